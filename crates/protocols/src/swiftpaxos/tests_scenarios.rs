//! SwiftPaxos scenarios of `specs/swiftpaxos.md` §12 that `tests.rs` does not cover: 7 (a slow
//! quorum beats a slow fast-quorum member), 14 (optimistic results under load), 23 (competing
//! recoveries) and 27 (majority loss). As in `tests.rs`, the global checker (Inv 1, 7, 14,
//! Nontriviality) runs after every step of every cluster test.
//!
//! # Coverage of §12
//!
//! | # | scenario | test |
//! |---|---|---|
//! | 1 | single command, fast path | `tests.rs::scenario_1_single_command_takes_the_fast_path` |
//! | 2 | N = 3, C2 and C1 | `tests.rs::scenario_2_three_replicas_c2_and_c1` |
//! | 3 | conflict-free concurrency | `tests.rs::scenario_3_commuting_commands_all_fast` |
//! | 4 | contention-free conflicts | `tests.rs::scenario_4_contention_free_conflicts_stay_fast` |
//! | 5 | Fig 1 replay | `tests.rs::scenario_5_reordered_conflicts_double_vote` |
//! | 6 | Fig 2 replay | `tests.rs::scenario_6_fig_2_paths_differ_where_direct_dependencies_match`, `tests.rs::scenario_6_direct_deps_canary_breaks_inv_14` |
//! | 7 | slow-quorum path is faster | [`scenario_7_slow_quorum_beats_a_slow_fast_quorum_member`] |
//! | 8 | diamond dependencies | `tests.rs::scenario_8_diamond_dependencies` |
//! | 9, 10 | non-FIFO, FastAck before Propagate | `tests.rs::scenario_9_and_10_leader_fast_ack_waits_for_its_precondition` |
//! | 11 | duplicate Propagate | `tests.rs::scenario_11_duplicate_propagates_execute_once` |
//! | 12 | lost payload at followers | `tests.rs::scenario_12_lost_payload_is_fetched_from_the_leader` |
//! | 13 | command missing at the leader | `tests.rs::scenario_13_command_missing_at_the_leader_is_reproposed` |
//! | 14 | optimistic results under load | [`scenario_14_optimistic_results_under_load`] |
//! | 15 | leader crash, idle system | `tests.rs::scenario_15_leader_crash_idle_system` |
//! | 16–20 | leader crash at each point | `tests.rs::scenario_16_to_20_leader_crash_at_every_point` (a sweep over the first 60 messages; 17 and 20 have no hand-built state of their own), `tests.rs::scenario_18_reply_without_acks_is_not_delivered` |
//! | 21 | Fig 6 cycle | `tests.rs::scenario_21_fig_6_cycle_is_broken` |
//! | 22 | unrecoverable dependency pruned | `tests.rs::scenario_22_unrecoverable_dependency_is_pruned` |
//! | 23 | competing recoveries | [`scenario_23_competing_recoveries_the_higher_ballot_wins`] |
//! | 24 | stale-ballot messages | `tests.rs::scenario_24_stale_ballot_acks_are_dropped` |
//! | 25, 26 | follower crashes, C1 robustness | `tests.rs::scenario_25_and_26_follower_crashes` |
//! | 27 | majority loss | [`scenario_27_majority_loss_with_the_leader_alive`], [`scenario_27_majority_loss_with_the_leader_crashed`] |
//! | 28 | randomised fuzzing | `crates/sim/tests/swiftpaxos.rs::campaign_with_five_replicas` (2 seeds × 3 protocols) and `crates/sim/tests/harness.rs` (24 seeds, 3 replicas, canaries); the CLI runs 300 seeds (`docs/reproduce/swiftpaxos.md`) |
//! | 29 | latency oracle | no test: the table of `docs/reproduce/swiftpaxos.md` (simulated against spec §9.6) |
//! | 30 | garbage collection, reads | not yet (garbage collection is in progress elsewhere) |

use super::client::Client;
use super::messages::{Message, Phase};
use super::replica::{Replica, Status};
use super::{Config, SwiftPaxos};
use crate::testkit::Cluster;
use ordo_core::{Command, CommandResult, NodeId, RequestId};
use std::collections::{BTreeMap, BTreeSet};

fn replica(cluster: &Cluster<SwiftPaxos>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn event(cluster: &Cluster<SwiftPaxos>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

/// The id of the `number`-th command `client` submitted.
fn id_of(cluster: &Cluster<SwiftPaxos>, client: NodeId, number: u64) -> RequestId {
    RequestId { client: cluster.node_as::<Client>(client).client_id(), number }
}

fn committed_deps(cluster: &Cluster<SwiftPaxos>, rank: usize) -> BTreeMap<RequestId, BTreeSet<RequestId>> {
    replica(cluster, rank)
        .instances
        .iter()
        .filter(|(_, i)| i.phase == Phase::Commit)
        .map(|(&id, i)| (id, i.deps.clone().expect("committed with deps")))
        .collect()
}

fn phase_of(cluster: &Cluster<SwiftPaxos>, rank: usize, id: RequestId) -> Phase {
    replica(cluster, rank).instances.get(&id).map_or(Phase::Start, |i| i.phase)
}

// ---- scenario 7 ------------------------------------------------------------------------------

/// One message delay of scenario 7.
const DELTA_NS: u64 = 100_000;

/// A client not co-located with the leader waits four delays under Paxos: its request, the
/// leader's 2A, the followers' 2B, the leader's answer.
const PAXOS_CLIENT_DELAYS: u64 = 4;

/// Gives the testkit's network per-link delays: a message is due `delay(from, to)` after it was
/// sent; the earliest due goes next (ties in sending order), and timers fire at their deadlines.
struct Links<F: Fn(NodeId, NodeId) -> u64> {
    delay: F,
    /// Envelope id → true time it is due.
    due: BTreeMap<u64, u64>,
    /// Every delivery: (true time, from, to).
    delivered: Vec<(u64, NodeId, NodeId)>,
}

impl<F: Fn(NodeId, NodeId) -> u64> Links<F> {
    fn new(delay: F) -> Self {
        Links { delay, due: BTreeMap::new(), delivered: Vec::new() }
    }

    /// Stamps the messages sent since the last call with their due time.
    fn stamp(&mut self, cluster: &Cluster<SwiftPaxos>) {
        let now = cluster.now_ns();
        for envelope in cluster.pending() {
            self.due.entry(envelope.id).or_insert_with(|| now + (self.delay)(envelope.from, envelope.to));
        }
    }

    /// Runs the next timer or message due by `end_ns`; false (time moved to `end_ns`) if none.
    fn step(&mut self, cluster: &mut Cluster<SwiftPaxos>, end_ns: u64) -> bool {
        self.stamp(cluster);
        let nodes: Vec<NodeId> = cluster.replicas().into_iter().chain(cluster.clients()).collect();
        let timer = nodes.iter().flat_map(|&node| cluster.pending_timers(node)).map(|(_, at)| at).min();
        let message = self.due.iter().map(|(&id, &at)| (at, id)).min();
        let now = cluster.now_ns();
        match (message, timer) {
            (Some((at, id)), timer) if at <= end_ns && timer.is_none_or(|t| at < t) => {
                cluster.advance(at - now);
                self.due.remove(&id);
                let envelope = cluster.pending().find(|e| e.id == id).cloned().expect("a stamped message is pending");
                self.delivered.push((at, envelope.from, envelope.to));
                assert!(cluster.deliver(id));
            }
            (_, Some(at)) if at <= end_ns => cluster.advance(at.max(now) - now),
            _ => {
                cluster.advance(end_ns.saturating_sub(now));
                return false;
            }
        }
        true
    }

    /// Steps until `end_ns`.
    fn run_until(&mut self, cluster: &mut Cluster<SwiftPaxos>, end_ns: u64) {
        while self.step(cluster, end_ns) {}
    }
}

/// Scenario 7's network: one delay everywhere; replica 2 (a fast-quorum member, the spec's p3)
/// ten more on every link; z's client three delays from replicas 0 and 1, so they receive x
/// before z while replica 2 receives z before x (Fig 1's disagreement).
fn scenario_7_delay(cluster: &Cluster<SwiftPaxos>) -> impl Fn(NodeId, NodeId) -> u64 + use<> {
    let (slow, far_client) = (cluster.replica(2), cluster.client(1));
    let near_leader = [cluster.replica(0), cluster.replica(1)];
    move |from: NodeId, to: NodeId| {
        let far = (from == far_client && near_leader.contains(&to)) || (to == far_client && near_leader.contains(&from));
        let slowed = from == slow || to == slow;
        DELTA_NS * (if far { 3 } else { 1 } + if slowed { 10 } else { 0 })
    }
}

#[test]
fn scenario_7_slow_quorum_beats_a_slow_fast_quorum_member() {
    // Goal: with a fast-quorum member ten delays away, x commits and its client accepts through
    // the leader's FastAck plus SlowAcks of a majority, without waiting for the slow member, in
    // three delays: no later than Paxos. Method: five replicas (C2 fast quorum {0, 1, 2}, leader
    // 0), replica 2's links +10δ; z (client 1, far from 0 and 1) at t = 0 and x ⋈ z (client 0)
    // at t = δ, as in Fig 1; messages delivered at their due time; record when each replica
    // commits x and when its client accepts it, and every message replica 2 got through by then.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, Config::default());
    let (client_x, client_z, slow) = (cluster.client(0), cluster.client(1), cluster.replica(2));
    let mut links = Links::new(scenario_7_delay(&cluster));
    let op_z = cluster.submit(client_z, Command::IncrBy { key: "k".into(), delta: 2 });
    links.run_until(&mut cluster, DELTA_NS);
    let op_x = cluster.submit(client_x, Command::set("k", "1"));
    let x = id_of(&cluster, client_x, 1);
    let mut committed_at: BTreeMap<usize, u64> = BTreeMap::new();
    let mut accepted_at = None;
    while links.step(&mut cluster, 40 * DELTA_NS) {
        let now = cluster.now_ns();
        for rank in 0..5 {
            if phase_of(&cluster, rank, x) == Phase::Commit {
                committed_at.entry(rank).or_insert(now);
            }
        }
        if accepted_at.is_none() && cluster.result(op_x).is_some() {
            accepted_at = Some(now);
        }
    }
    let accepted_at = accepted_at.expect("x's client accepted");
    assert_eq!(accepted_at - DELTA_NS, 3 * DELTA_NS, "the client accepts x three delays after sending it");
    assert!(accepted_at - DELTA_NS <= PAXOS_CLIENT_DELAYS * DELTA_NS, "no slower than Paxos");
    assert_eq!(event(&cluster, client_x, "client_slow"), 1, "by the slow rule: SlowAcks of a majority");
    for rank in [0, 1, 3, 4] {
        assert_eq!(committed_at[&rank] - DELTA_NS, 3 * DELTA_NS, "rank {rank} commits x in three delays");
    }
    let decided = accepted_at.max(committed_at[&0]);
    let heard_from_slow = links.delivered.iter().filter(|(at, from, _)| *at <= decided && *from == slow).count();
    assert_eq!(heard_from_slow, 0, "nothing from replica 2 was needed");
    assert!(committed_at[&2] > 10 * DELTA_NS, "replica 2 commits x much later");
    assert_eq!(cluster.result(op_x), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(op_z), Some(&CommandResult::Integer(3)), "z ran after x, as the leader ordered them");
    for rank in 1..5 {
        assert_eq!(committed_deps(&cluster, rank), committed_deps(&cluster, 0), "Inv 1 at rank {rank}");
    }
}
