//! SwiftPaxos scenarios of `specs/swiftpaxos.md` §12 that `tests.rs` does not cover: 7 (a slow
//! quorum beats a slow fast-quorum member), 14 (optimistic results under load), 23 (competing
//! recoveries), 27 (majority loss) and 30 (garbage collection). As in `tests.rs`, the global checker (Inv 1, 7, 14,
//! Nontriviality) runs after every step of every cluster test.
//!
//! # Coverage of §12
//!
//! Scenario number → the test that covers it (`tests.rs` unless marked ★, this file):
//!
//! - 1 single command, fast path: `scenario_1_single_command_takes_the_fast_path`
//! - 2 N = 3, C2 and C1: `scenario_2_three_replicas_c2_and_c1`
//! - 3 conflict-free concurrency: `scenario_3_commuting_commands_all_fast`
//! - 4 contention-free conflicts: `scenario_4_contention_free_conflicts_stay_fast`
//! - 5 Fig 1 replay: `scenario_5_reordered_conflicts_double_vote`
//! - 6 Fig 2 replay: `scenario_6_fig_2_paths_differ_where_direct_dependencies_match`,
//!   `scenario_6_direct_deps_canary_breaks_inv_14`
//! - 7 slow-quorum path is faster: ★ [`scenario_7_slow_quorum_beats_a_slow_fast_quorum_member`]
//! - 8 diamond dependencies: `scenario_8_diamond_dependencies`
//! - 9, 10 non-FIFO FastAck, FastAck before Propagate:
//!   `scenario_9_and_10_leader_fast_ack_waits_for_its_precondition`
//! - 11 duplicate Propagate: `scenario_11_duplicate_propagates_execute_once`
//! - 12 lost payload at followers: `scenario_12_lost_payload_is_fetched_from_the_leader`
//! - 13 command missing at the leader: `scenario_13_command_missing_at_the_leader_is_reproposed`
//! - 14 optimistic results under load: ★ [`scenario_14_optimistic_results_under_load`]
//! - 15 leader crash, idle system: `scenario_15_leader_crash_idle_system`
//! - 16–20 leader crash at each point: `scenario_16_to_20_leader_crash_at_every_point` (the
//!   leader crashed after each of the first 60 messages of three conflicting commands; 17 and
//!   20 have no hand-built state of their own), `scenario_18_reply_without_acks_is_not_delivered`
//! - 21 Fig 6 cycle: `scenario_21_fig_6_cycle_is_broken`
//! - 22 unrecoverable dependency pruned: `scenario_22_unrecoverable_dependency_is_pruned`
//! - 23 competing recoveries: ★ [`scenario_23_competing_recoveries_the_higher_ballot_wins`]
//! - 24 stale-ballot messages: `scenario_24_stale_ballot_acks_are_dropped`
//! - 25, 26 follower crashes, C1 robustness: `scenario_25_and_26_follower_crashes`
//! - 27 majority loss: ★ [`scenario_27_majority_loss_with_the_leader_alive`],
//!   ★ [`scenario_27_majority_loss_with_the_leader_crashed`]
//! - 28 randomised fuzzing: `crates/sim/tests/swiftpaxos.rs::campaign_with_five_replicas` (two
//!   seeds, five replicas) and `crates/sim/tests/harness.rs` (24 seeds, three replicas, the
//!   canaries); the CLI campaign of 300 seeds is in `docs/reproduce/swiftpaxos.md`, not a test
//! - 29 latency oracle: no test; `ordo reproduce swiftpaxos` checks the 13-region means against
//!   spec §9.6 (docs/reproduce/swiftpaxos.md)
//! - 30 garbage collection: ★ [`scenario_30_garbage_collection_keeps_memory_bounded`],
//!   ★ [`scenario_30_a_crashed_replica_holds_collection_back_until_it_retires`],
//!   ★ [`an_abandoned_command_still_completes_before_the_next_is_numbered`]; the read
//!   optimisation (SwiftPaxos^reads): every test of `tests_reads.rs`

use super::client::Client;
use super::messages::{Message, Phase};
use super::replica::{Replica, Status};
use super::tests::{committed_deps, event, replica};
use super::{Config, SwiftPaxos};
use crate::testkit::Cluster;
use ordo_check::{EventKind, HistoryEvent, OpKind, check_linearizable};
use ordo_core::{Command, CommandResult, KvStore, NodeId, RequestId, StateMachine};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The id of the `number`-th command `client` submitted.
fn id_of(cluster: &Cluster<SwiftPaxos>, client: NodeId, number: u64) -> RequestId {
    RequestId { client: cluster.node_as::<Client>(client).client_id(), number }
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
        let far =
            (from == far_client && near_leader.contains(&to)) || (to == far_client && near_leader.contains(&from));
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

// ---- scenario 27 -----------------------------------------------------------------------------

/// Commands completed, committed and executed so far: what a majority loss must freeze.
#[derive(Debug, PartialEq, Eq)]
struct Progress {
    completions: usize,
    committed: Vec<usize>,
    executed: Vec<u64>,
}

fn progress(cluster: &Cluster<SwiftPaxos>, live: &[usize]) -> Progress {
    Progress {
        completions: cluster.completions().len(),
        // Forgotten commands (garbage collection, once the crashed replicas retire) committed too.
        committed: live
            .iter()
            .map(|&rank| {
                let forgotten = event(cluster, cluster.replica(rank), "gc_forgotten") as usize;
                committed_deps(cluster, rank).len() + forgotten
            })
            .collect(),
        executed: live.iter().map(|&rank| replica(cluster, rank).execution.executed).collect(),
    }
}

/// Commits one command with all five replicas, crashes `crashed`, submits a second command
/// and runs one second (timers, pings, client retries, recovery attempts). Returns the cluster,
/// the second command's id and the progress made before the crashes.
fn lose_a_majority(crashed: [usize; 3], live: &[usize]) -> (Cluster<SwiftPaxos>, RequestId, Progress) {
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let first = cluster.submit(client, Command::set("k", "1"));
    cluster.deliver_all();
    assert_eq!(cluster.result(first), Some(&CommandResult::Ok));
    let before = progress(&cluster, live);
    assert_eq!(before, Progress { completions: 1, committed: vec![1; live.len()], executed: vec![1; live.len()] });
    for rank in crashed {
        cluster.crash(cluster.replica(rank));
    }
    cluster.submit(client, Command::IncrBy { key: "k".into(), delta: 1 });
    cluster.run_for(1_000_000_000);
    let second = id_of(&cluster, client, 2);
    (cluster, second, before)
}

/// What a majority loss must leave: no completion, commit or execution beyond `before`, and the
/// second command committed nowhere among `live`.
fn assert_stalled(cluster: &Cluster<SwiftPaxos>, live: &[usize], second: RequestId, before: &Progress) {
    assert_eq!(&progress(cluster, live), before, "no new completion, commit or execution");
    for &rank in live {
        assert_ne!(phase_of(cluster, rank, second), Phase::Commit, "rank {rank} did not commit the second command");
    }
    let client = cluster.client(0);
    assert_eq!(event(cluster, client, "client_fast") + event(cluster, client, "client_slow"), 1, "only the first");
    assert!(event(cluster, client, "client_retry") >= 10, "the client kept trying");
}

#[test]
fn scenario_27_majority_loss_with_the_leader_alive() {
    // Goal: with three of five replicas crashed, nothing new commits or completes, the client
    // never takes the leader's optimistic result without a quorum's acks, and no invariant
    // breaks; SwiftPaxos is crash-stop, so restarting the three brings no progress back: they
    // retire. Method: crash followers 2, 3 and 4 (two of them outside the fast quorum), submit,
    // run 1 s; restart the three, run 1 s more.
    let live = [0, 1];
    let (mut cluster, second, before) = lose_a_majority([2, 3, 4], &live);
    assert_ne!(phase_of(&cluster, 0, second), Phase::Start, "the leader received the second command");
    assert_stalled(&cluster, &live, second, &before);
    for rank in 2..5 {
        cluster.restart(cluster.replica(rank));
    }
    cluster.run_for(1_000_000_000);
    for rank in 2..5 {
        let status = cluster.status(cluster.replica(rank));
        assert!(status.contains("retired"), "rank {rank} retired after its restart: {status}");
    }
    assert_stalled(&cluster, &live, second, &before);
}

#[test]
fn scenario_27_majority_loss_with_the_leader_crashed() {
    // Goal: two survivors of five keep trying to recover (NewLeader) but never gather the
    // majority of NewLeaderAcks a Sync needs, so they never install a ballot and commit nothing.
    // Method: crash the leader and followers 3 and 4, submit, run 1 s.
    let live = [1, 2];
    let (cluster, second, before) = lose_a_majority([0, 3, 4], &live);
    assert_stalled(&cluster, &live, second, &before);
    assert!(event(&cluster, cluster.replica(1), "recovery") >= 2, "replica 1 tried to recover, again and again");
    for rank in live {
        let ballots = replica(&cluster, rank).ballots;
        assert_eq!(ballots.status, Status::Recovering, "rank {rank} waits for a Sync that cannot come");
        assert_eq!(ballots.cbal, 0, "rank {rank} completed no recovery");
        assert_eq!(event(&cluster, cluster.replica(rank), "sync_installed"), 0);
    }
    assert_eq!(event(&cluster, cluster.replica(1), "sync_sent"), 0, "no Sync without a majority");
}

// ---- scenario 23 -----------------------------------------------------------------------------

fn is_recovery(message: &Message) -> bool {
    matches!(message, Message::NewLeader { .. } | Message::NewLeaderAck { .. } | Message::Sync { .. })
}

/// Delivers the oldest pending `name` message from `from` to `to`.
fn deliver_one(cluster: &mut Cluster<SwiftPaxos>, from: NodeId, to: NodeId, name: &str) {
    let found = cluster.deliver_first(|e| e.from == from && e.to == to && e.message.name() == name);
    assert!(found, "a {name} from {from} to {to} is pending");
}

/// Lets time pass a millisecond at a time (timers fire, pings flow) while replica 1's messages
/// to replica 2 are lost, so that replica 2 suspects both 0 (crashed) and 1 and trusts itself,
/// while replica 1 suspects only 0; holds every recovery message, until both started one.
fn start_two_recoveries(cluster: &mut Cluster<SwiftPaxos>) {
    let (r1, r2) = (cluster.replica(1), cluster.replica(2));
    for _ in 0..100 {
        if event(cluster, r1, "recovery") >= 1 && event(cluster, r2, "recovery") >= 1 {
            return;
        }
        cluster.advance(1_000_000);
        cluster.drop_where(|e| e.from == r1 && e.to == r2 && !is_recovery(&e.message));
        cluster.deliver_all_where(|e| !(is_recovery(&e.message) || (e.from == r1 && e.to == r2)));
    }
    panic!("replicas 1 and 2 never both started a recovery");
}

/// Every Sync sent, by ballot: (sender, entries) of each copy.
fn syncs_by_ballot(cluster: &Cluster<SwiftPaxos>) -> BTreeMap<u64, Vec<(NodeId, Vec<super::messages::Entry>)>> {
    let mut syncs: BTreeMap<u64, Vec<_>> = BTreeMap::new();
    for envelope in cluster.sent_log() {
        if let Message::Sync { ballot, entries } = &envelope.message {
            syncs.entry(*ballot).or_default().push((envelope.from, entries.clone()));
        }
    }
    syncs
}

/// One command committed, a second pre-accepted everywhere whose leader then crashed (its
/// messages lost), then replicas 1 and 2 start recoveries of ballots b1 < b2.
fn two_recoveries_under_way() -> (Cluster<SwiftPaxos>, u64, u64, u64) {
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, Config::default());
    cluster.keep_sent_log();
    let first = cluster.submit(cluster.client(0), Command::set("k", "1"));
    cluster.deliver_all();
    assert_eq!(cluster.result(first), Some(&CommandResult::Ok));
    let second = cluster.submit(cluster.client(1), Command::IncrBy { key: "k".into(), delta: 1 });
    cluster.deliver_all_where(|e| matches!(e.message, Message::Propagate { .. }));
    let leader = cluster.replica(0);
    cluster.crash(leader);
    cluster.drop_where(|e| e.from == leader);
    start_two_recoveries(&mut cluster);
    let (b1, b2) = (replica(&cluster, 1).ballots.bal, replica(&cluster, 2).ballots.bal);
    assert!(0 < b1 && b1 < b2, "replica 1 recovers b1 = {b1}, replica 2 the higher b2 = {b2}");
    assert_eq!((replica(&cluster, 3).ballots.bal, replica(&cluster, 4).ballots.bal), (0, 0), "held so far");
    (cluster, second, b1, b2)
}

#[test]
fn scenario_23_competing_recoveries_the_higher_ballot_wins() {
    // Goal: two concurrent recoveries with b1 < b2: a NewLeader of a ballot not above a
    // replica's is ignored (L44), a Sync of a lower ballot is ignored (L67), b2's leader wins,
    // each ballot has one Sync content (Inv 7), the replicas end in one ballot and commit again.
    // Method: five replicas; the leader crashes with a command in flight; replica 2 cannot hear
    // replica 1, so both recover. Recovery messages in a chosen order: b1 completes at replica 1
    // with acks of 3 and 4; b2's NewLeader then reaches 1, 3 and 4 before b1's Sync does, and
    // b1's NewLeader reaches 2 last; b2's Sync follows. Then time runs (with nominations).
    let (mut cluster, second, b1, b2) = two_recoveries_under_way();
    let [r1, r2, r3, r4] = [1, 2, 3, 4].map(|rank| cluster.replica(rank));
    for follower in [r3, r4] {
        deliver_one(&mut cluster, r1, follower, "new_leader");
        deliver_one(&mut cluster, follower, r1, "new_leader_ack");
    }
    assert_eq!(replica(&cluster, 1).ballots.cbal, b1, "replica 1 sent and installed b1's Sync");
    for follower in [r1, r3, r4] {
        deliver_one(&mut cluster, r2, follower, "new_leader");
    }
    for follower in [r2, r3, r4] {
        deliver_one(&mut cluster, r1, follower, "sync");
    }
    deliver_one(&mut cluster, r1, r2, "new_leader");
    for rank in [2, 3, 4] {
        let dropped = &cluster.stats(cluster.replica(rank)).dropped;
        assert_eq!(dropped.get("sync of an older ballot (L67)"), Some(&1), "rank {rank} ignored b1's Sync");
        assert_eq!(replica(&cluster, rank).ballots.cbal, 0, "rank {rank} did not install b1");
    }
    assert_eq!(cluster.stats(r2).dropped.get("new leader of a ballot not above ours (L44)"), Some(&1));
    for follower in [r1, r3, r4] {
        deliver_one(&mut cluster, follower, r2, "new_leader_ack");
    }
    cluster.deliver_all();
    for rank in 1..5 {
        let ballots = replica(&cluster, rank).ballots;
        assert_eq!((ballots.bal, ballots.cbal, ballots.status), (b2, b2, Status::Normal), "rank {rank} in b2");
    }
    let syncs = syncs_by_ballot(&cluster);
    assert_eq!(syncs.keys().copied().collect::<Vec<_>>(), vec![b1, b2], "one Sync round per ballot");
    for (ballot, copies) in &syncs {
        assert!(copies.windows(2).all(|w| w[0] == w[1]), "ballot {ballot}: one sender, one content (Inv 7)");
    }
    converges_and_commits(&mut cluster, second);
}

/// After the competition, with time running: every live replica ends in one ballot, normal,
/// the in-flight command and a new one complete, and the replicas agree.
fn converges_and_commits(cluster: &mut Cluster<SwiftPaxos>, second: u64) {
    cluster.run_for(300_000_000);
    let third = cluster.submit(cluster.client(0), Command::get("k"));
    cluster.run_for(300_000_000);
    assert_eq!(cluster.result(second), Some(&CommandResult::Integer(2)), "the in-flight command ran once");
    assert_eq!(cluster.result(third), Some(&CommandResult::Value("2".into())), "a new command commits");
    let ballots: Vec<_> = (1..5).map(|rank| replica(cluster, rank).ballots).collect();
    assert!(ballots.iter().all(|b| *b == ballots[0]), "one ballot everywhere: {ballots:?}");
    assert!(ballots[0].status == Status::Normal && ballots[0].bal == ballots[0].cbal, "{ballots:?}");
    for rank in 2..5 {
        assert_eq!(committed_deps(cluster, rank), committed_deps(cluster, 1), "Inv 1 at rank {rank}");
    }
}

// ---- scenario 14 -----------------------------------------------------------------------------

/// Every result a state machine returned, in execution order.
type ExecutionLog = Arc<Mutex<Vec<(RequestId, CommandResult)>>>;

thread_local! {
    /// The log of every recording machine built on this thread (a test runs on one), by the
    /// machine's address.
    static LOGS: RefCell<Vec<(usize, ExecutionLog)>> = const { RefCell::new(Vec::new()) };
}

/// The key-value store, recording each result it returns. Its forks (the leader's optimistic
/// execution, §5.6) are plain stores: they record nothing.
struct Recording {
    store: KvStore,
    log: ExecutionLog,
}

fn address(machine: &dyn StateMachine) -> usize {
    machine as *const dyn StateMachine as *const () as usize
}

fn recording_store() -> Box<dyn StateMachine> {
    let log = ExecutionLog::default();
    let machine: Box<dyn StateMachine> = Box::new(Recording { store: KvStore::new(), log: log.clone() });
    LOGS.with(|logs| logs.borrow_mut().push((address(machine.as_ref()), log)));
    machine
}

impl StateMachine for Recording {
    fn apply(&mut self, request: RequestId, command: &Command) -> CommandResult {
        let result = self.store.apply(request, command);
        self.log.lock().expect("one thread").push((request, result.clone()));
        result
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), ordo_core::kv::SnapshotError> {
        self.store.restore(snapshot)
    }

    fn key_digests(&self) -> Vec<ordo_core::KeyDigest> {
        self.store.key_digests()
    }

    fn fork_keys(&self, keys: &[ordo_core::Key]) -> Option<Box<dyn StateMachine>> {
        self.store.fork_keys(keys)
    }
}

/// What the replica of `rank` executed, by command: its own state machine's log.
fn executed_results(cluster: &Cluster<SwiftPaxos>, rank: usize) -> BTreeMap<RequestId, CommandResult> {
    let at = address(replica(cluster, rank).execution.state_machine.as_ref());
    let log = LOGS.with(|logs| logs.borrow().iter().rfind(|(a, _)| *a == at).map(|(_, log)| log.clone()));
    let log = log.expect("the replica runs a recording store").lock().expect("one thread").clone();
    let results: BTreeMap<RequestId, CommandResult> = log.iter().cloned().collect();
    assert_eq!(results.len(), log.len(), "rank {rank} executed each command once (Integrity)");
    results
}

/// One submission of scenario 14 and how it ended.
struct Submitted {
    client: NodeId,
    op: u64,
    id: RequestId,
    command: Command,
    /// The result, and whether the client took it from the leader's Reply (fast or slow rule).
    outcome: Option<(CommandResult, bool)>,
}

/// A random command on one of three keys: half reads, a quarter SETs, a quarter APPENDs, each
/// write with a value unique in the run (the linearizability checker tells writes apart).
fn random_command(rng: &mut ChaCha8Rng, unique: usize) -> Command {
    let key = format!("k{}", rng.random_range(0..3));
    match rng.random_range(0..4) {
        0 | 1 => Command::get(key),
        2 => Command::set(key, format!("s{unique}")),
        _ => Command::Append { key: key.into(), value: format!("a{unique};").into() },
    }
}

/// The run's history in the checker's format; the step count stands for time.
fn history_event(sub: &Submitted, kind: EventKind, step: u64) -> HistoryEvent {
    let (op, key, written) = match &sub.command {
        Command::Get { key } => (OpKind::Read, key, None),
        Command::Set { key, value, .. } => (OpKind::Write, key, Some(value)),
        Command::Append { key, value } => (OpKind::Append, key, Some(value)),
        other => panic!("scenario 14 submits no {other:?}"),
    };
    let text = |bytes: &ordo_core::Value| String::from_utf8(bytes.to_vec()).expect("values are text");
    let value = match (kind, &sub.outcome) {
        (EventKind::Ok, Some((CommandResult::Value(read), _))) if op == OpKind::Read => Some(text(read)),
        (EventKind::Ok, Some((CommandResult::Nil, _))) => None,
        _ => written.map(text),
    };
    HistoryEvent {
        client: u64::from(sub.client.0),
        id: None,
        kind,
        time_ns: step,
        op,
        key: text(key),
        value,
        at_ms: None,
        expires_ms: None,
    }
}

/// Commands of scenario 14, and clients submitting them.
const LOAD_COMMANDS: usize = 1000;
const LOAD_CLIENTS: usize = 4;

/// How many of a client's completions came from the leader's Reply (fast or slow rule).
fn taken_from_reply(cluster: &Cluster<SwiftPaxos>, client: NodeId) -> u64 {
    event(cluster, client, "client_fast") + event(cluster, client, "client_slow")
}

/// The load of scenario 14 and what it observed: every submission with its outcome, the
/// history, and how many submissions found a conflicting command of another client in flight.
#[derive(Default)]
struct Load {
    submitted: Vec<Submitted>,
    history: Vec<HistoryEvent>,
    conflicting: usize,
    /// Per client: its submission in flight (an index into `submitted`), its commands so far,
    /// and `taken_from_reply` at its last completion.
    open: Vec<(Option<usize>, u64, u64)>,
    completions_seen: usize,
}

impl Load {
    /// Every idle client submits its next command, until all are submitted.
    fn submit(&mut self, cluster: &mut Cluster<SwiftPaxos>, rng: &mut ChaCha8Rng, step: u64) {
        for (index, client) in cluster.clients().into_iter().enumerate() {
            if self.submitted.len() == LOAD_COMMANDS || self.open[index].0.is_some() {
                continue;
            }
            let command = random_command(rng, self.submitted.len());
            let in_flight = self.open.iter().filter_map(|(open, ..)| *open).map(|at| &self.submitted[at].command);
            self.conflicting += usize::from(in_flight.clone().any(|other| !other.commutes_with(&command)));
            self.open[index].1 += 1;
            let op = cluster.submit(client, command.clone());
            let id = id_of(cluster, client, self.open[index].1);
            let submitted = Submitted { client, op, id, command, outcome: None };
            self.history.push(history_event(&submitted, EventKind::Invoke, step));
            self.open[index].0 = Some(self.submitted.len());
            self.submitted.push(submitted);
        }
    }

    /// Records the completions since the last call, and where each client took its result.
    fn complete(&mut self, cluster: &Cluster<SwiftPaxos>, step: u64) {
        let clients = cluster.clients();
        for completion in &cluster.completions()[self.completions_seen..] {
            let index = clients.iter().position(|&c| c == completion.client).expect("a client completed");
            let at = self.open[index].0.take().expect("the client had a command in flight");
            let taken = taken_from_reply(cluster, completion.client);
            let from_reply = taken > self.open[index].2;
            self.open[index].2 = taken;
            let submitted = &mut self.submitted[at];
            assert_eq!(submitted.op, completion.op, "the client completed its command in flight");
            submitted.outcome = Some((completion.result.clone(), from_reply));
            self.history.push(history_event(submitted, EventKind::Ok, step));
        }
        self.completions_seen = cluster.completions().len();
    }
}

/// Drives scenario 14: idle clients submit, then one pending message, chosen at random, is
/// delivered (any order: the network reorders freely, but loses nothing and time stands still,
/// so no timer fires and nothing fails).
fn run_load(cluster: &mut Cluster<SwiftPaxos>, rng: &mut ChaCha8Rng) -> Load {
    let mut load = Load { open: vec![(None, 0, 0); LOAD_CLIENTS], ..Load::default() };
    let mut step = 0;
    while load.submitted.len() < LOAD_COMMANDS || load.completions_seen < LOAD_COMMANDS {
        load.submit(cluster, rng, step);
        let pick = rng.random_range(0..cluster.pending_count().max(1));
        let Some(envelope) = cluster.pending().nth(pick).map(|e| e.id) else {
            panic!("the network emptied with commands in flight, at step {step}");
        };
        assert!(cluster.deliver(envelope));
        step += 1;
        load.complete(cluster, step);
    }
    // Every client has its answers; the replicas still have messages to process and commands to
    // execute.
    while cluster.pending_count() > 0 {
        let pick = rng.random_range(0..cluster.pending_count());
        let envelope = cluster.pending().nth(pick).map(|e| e.id).expect("in range");
        assert!(cluster.deliver(envelope));
    }
    load
}

#[test]
fn scenario_14_optimistic_results_under_load() {
    // Goal: under contention, every result a client took from the leader's optimistic
    // execution (Reply plus matching FastAcks, or plus SlowAcks) equals the result of executing
    // the command at every replica (Nontriviality), every replica executes every command once,
    // and the history is linearizable. Method: five replicas, four closed-loop clients, 1000
    // random commands on three keys (half reads), messages delivered in random order; each
    // replica's state machine records its results; the client's counters tell at each
    // completion whether it came from the Reply; the history goes to ordo-check.
    results_under_load(Config::default(), LOAD_COMMANDS / 2);
}

/// Scenario 14's load and checks under `config`, at least `from_reply_min` results taken from
/// a Reply; returns the cluster after the run.
pub(super) fn results_under_load(config: Config, from_reply_min: usize) -> Cluster<SwiftPaxos> {
    LOGS.with(|logs| logs.borrow_mut().clear());
    let mut cluster = Cluster::<SwiftPaxos>::stopped(5, LOAD_CLIENTS, config, 14);
    cluster.set_state_machine(recording_store);
    for node in cluster.replicas().into_iter().chain(cluster.clients()) {
        cluster.start(node);
    }
    let load = run_load(&mut cluster, &mut ChaCha8Rng::seed_from_u64(14));
    let executed: Vec<_> = (0..5).map(|rank| executed_results(&cluster, rank)).collect();
    let mut from_reply = 0;
    for submitted in &load.submitted {
        let (result, reply) = submitted.outcome.clone().expect("every command completed");
        from_reply += usize::from(reply);
        for (rank, results) in executed.iter().enumerate() {
            let id = submitted.id;
            assert_eq!(results.get(&id), Some(&result), "{id:?} (from the Reply: {reply}) at rank {rank}");
        }
    }
    for (rank, results) in executed.iter().enumerate() {
        assert_eq!(results.len(), LOAD_COMMANDS, "rank {rank} executed every command");
    }
    let conflict_rate = load.conflicting as f64 / LOAD_COMMANDS as f64;
    assert!((0.4..=0.6).contains(&conflict_rate), "about half the commands conflict: {conflict_rate}");
    assert!(from_reply >= from_reply_min, "results from the Reply: {from_reply} < {from_reply_min}");
    let clients = cluster.clients();
    let slow: u64 = clients.iter().map(|&c| event(&cluster, c, "client_slow")).sum();
    let fast: u64 = clients.iter().map(|&c| event(&cluster, c, "client_fast")).sum();
    let double_votes: u64 = (1..5).map(|rank| event(&cluster, cluster.replica(rank), "double_vote")).sum();
    assert!(slow > 0 && fast > 0 && double_votes > 0, "both rules and double votes: {fast} {slow} {double_votes}");
    eprintln!("scenario 14: conflict rate {conflict_rate}, {from_reply} from the Reply ({fast} fast, {slow} slow)");
    eprintln!("scenario 14: {double_votes} double votes");
    let stats = check_linearizable(&load.history).expect("the history is linearizable");
    eprintln!("scenario 14: linearizability {stats:?}");
    cluster
}

/// Runs closed-loop `clients` for `commands` commands on three keys (half reads), with time
/// running so that pings (and the executed prefixes they carry) flow; returns the most
/// commands any replica held at once.
fn run_timed_load(cluster: &mut Cluster<SwiftPaxos>, commands: usize, seed: u64) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut submitted, mut peak) = (0, 0);
    while submitted < commands {
        for client in cluster.clients() {
            if submitted < commands && cluster.outstanding(client).is_none() {
                let key = format!("k{}", rng.random_range(0..3));
                let command = if rng.random_bool(0.5) { Command::get(key) } else { Command::set(key, "v") };
                cluster.submit(client, command);
                submitted += 1;
            }
        }
        cluster.run_for(100_000);
        let held = cluster.replicas().iter().filter(|&&r| cluster.is_up(r)).map(|&r| held(cluster, r)).max();
        peak = peak.max(held.unwrap_or(0));
    }
    cluster.run_for(20_000_000);
    peak
}

fn held(cluster: &Cluster<SwiftPaxos>, node: NodeId) -> usize {
    cluster.node_as::<Replica>(node).instances.len()
}

#[test]
fn scenario_30_garbage_collection_keeps_memory_bounded() {
    // Goal: in a long run, a command executed at every replica is forgotten, so what a replica
    // holds stays bounded whatever the run's length; dependencies on forgotten commands are
    // satisfied (the checker runs after every step, and every replica executes everything).
    // Method: five replicas, four closed-loop clients, 3000 commands on three keys.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 4, Config { gc: true, ..Config::default() });
    let peak = run_timed_load(&mut cluster, 3000, 30);
    assert_eq!(cluster.completions().len(), 3000, "every command completed");
    for rank in 0..5 {
        let node = cluster.replica(rank);
        assert_eq!(replica(&cluster, rank).execution.executed, 3000, "rank {rank} executed everything");
        assert!(event(&cluster, node, "gc_forgotten") >= 2990, "rank {rank} forgot what ran everywhere");
        assert!(held(&cluster, node) <= 10, "rank {rank} holds {} commands at the end", held(&cluster, node));
    }
    assert!(peak <= 100, "at most {peak} commands held at once, of 3000");
}

#[test]
fn scenario_30_a_crashed_replica_holds_collection_back_until_it_retires() {
    // Goal: collection waits for every replica (the paper's rule), and a replica that restarts
    // (and so retires, crash-stop) stops holding it back. Method: crash replica 4, run 500
    // commands: nothing is forgotten; restart it: its `Retired` answer to a ping lets the
    // others forget.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 4, Config { gc: true, ..Config::default() });
    let crashed = cluster.replica(4);
    cluster.crash(crashed);
    run_timed_load(&mut cluster, 500, 31);
    assert_eq!(cluster.completions().len(), 500, "the four live replicas make progress");
    for rank in 0..4 {
        let node = cluster.replica(rank);
        assert_eq!(event(&cluster, node, "gc_forgotten"), 0, "rank {rank} waits for replica 4");
        assert_eq!(held(&cluster, node), 500, "rank {rank} holds everything");
    }
    cluster.restart(crashed);
    cluster.run_for(20_000_000);
    for rank in 0..4 {
        let node = cluster.replica(rank);
        assert_eq!(held(&cluster, node), 0, "rank {rank} forgot everything once replica 4 retired");
    }
}

#[test]
fn an_abandoned_command_still_completes_before_the_next_is_numbered() {
    // Goal: a client never leaves a number unfinished (garbage collection needs every
    // executed prefix to advance). Method: the client's command cannot commit (no replica
    // hears it); the driver abandons it and submits another; the second is numbered only
    // after the first completes, and both run at every replica.
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 1, Config { gc: true, ..Config::default() });
    let client = cluster.client(0);
    cluster.isolate(client);
    let first = cluster.submit(client, Command::set("k", "1"));
    cluster.run_for(1_000_000);
    cluster.abandon(client, first);
    let second = cluster.submit(client, Command::set("k", "2"));
    cluster.run_for(1_000_000);
    assert_eq!(replica(&cluster, 0).execution.executed, 0, "nothing reached the replicas yet");
    cluster.heal(client);
    cluster.run_for(200_000_000);
    assert_eq!(cluster.result(first), None, "the abandoned command is not reported");
    assert_eq!(cluster.result(second), Some(&CommandResult::Ok));
    for rank in 0..3 {
        assert_eq!(replica(&cluster, rank).execution.executed, 2, "rank {rank} ran both, in number order");
        let lane = cluster.node_as::<Client>(client).client_id();
        assert_eq!(replica(&cluster, rank).gc.prefix(lane), 2, "rank {rank}'s prefix is whole");
    }
}
