//! SwiftPaxos scenarios of `specs/swiftpaxos.md` §12 on the testkit, and unit tests of the
//! pure pieces (quorums, paths, recovery's merge). The global checker runs after every step
//! of every cluster test (the testkit panics on a violation).

use super::canary::SwiftPaxosDirectDeps;
use super::messages::{Entry, Message, Phase};
use super::recovery::topological;
use super::replica::Replica;
use super::{Config, QuorumSystem, SwiftPaxos, paths};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{ClientId, Command, CommandResult, NodeId, Protocol, RequestId};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn replica(cluster: &Cluster<SwiftPaxos>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

pub(super) fn event<P: Protocol>(cluster: &Cluster<P>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

pub(super) fn committed_deps(cluster: &Cluster<SwiftPaxos>, rank: usize) -> BTreeMap<RequestId, BTreeSet<RequestId>> {
    replica(cluster, rank)
        .instances
        .iter()
        .filter(|(_, i)| i.phase == Phase::Commit)
        .map(|(&id, i)| (id, i.deps.clone().expect("committed with deps")))
        .collect()
}

fn is_propagate_to<P: Protocol<Message = Message>>(envelope: &Envelope<P>, to: NodeId) -> bool {
    envelope.to == to && matches!(envelope.message, Message::Propagate { .. })
}

fn id(client: u64, number: u64) -> RequestId {
    RequestId { client: ClientId(client), number }
}

#[test]
fn scenario_1_single_command_takes_the_fast_path() {
    // Goal: one command, no concurrency, commits in two delays with D = ∅ and the client takes
    // the leader's Reply with matching FastAcks (L3). Method: five replicas (C2: leader 0 with
    // followers 1 and 2), deliver everything in FIFO order.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, client, "client_fast"), 1, "the client took the fast path");
    for rank in 0..5 {
        let deps = committed_deps(&cluster, rank);
        assert_eq!(deps.len(), 1, "rank {rank} committed the command");
        assert!(deps.values().all(BTreeSet::is_empty), "rank {rank}: D = ∅");
        assert_eq!(replica(&cluster, rank).execution.executed, 1, "rank {rank} executed it once");
    }
    assert_eq!(cluster.stats(cluster.replica(0)).fast_path_commits, 1, "the leader committed on the fast path");
}

#[test]
fn scenario_2_three_replicas_c2_and_c1() {
    // Goal: N = 3 works with both quorum systems; under C1 (fast quorum = all three) a crashed
    // follower blocks the fast path, yet commands commit through the slow quorum. Method: one
    // command each way; the C1 run crashes replica 2 first.
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 1, Config::default());
    let op = cluster.submit(cluster.client(0), Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, cluster.client(0), "client_fast"), 1);

    let config = Config { quorum_system: QuorumSystem::C1, ..Config::default() };
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 1, config);
    cluster.crash(cluster.replica(2));
    let op = cluster.submit(cluster.client(0), Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, cluster.client(0), "client_fast"), 0, "no fast quorum is alive");
    assert_eq!(cluster.stats(cluster.replica(0)).slow_path_commits, 1, "the leader committed on the slow path");
}

#[test]
fn scenario_3_commuting_commands_all_fast() {
    // Goal: commands on distinct keys never depend on each other, whatever the arrival order.
    // Method: ten clients, their Propagates delivered to the fast quorum in opposite orders.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 10, Config::default());
    let ops: Vec<u64> =
        (0..10).map(|i| cluster.submit(cluster.client(i), Command::set(format!("k{i}"), "v"))).collect();
    let follower = cluster.replica(1);
    for i in (0..10).rev() {
        let from = cluster.client(i);
        assert!(cluster.deliver_first(|e| is_propagate_to(e, follower) && e.from == from));
    }
    cluster.deliver_all();
    for op in ops {
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    }
    for rank in 0..5 {
        assert!(committed_deps(&cluster, rank).values().all(BTreeSet::is_empty), "no dependencies at {rank}");
    }
}

#[test]
fn scenario_5_reordered_conflicts_double_vote() {
    // Goal: Fig 1's essence: a fast-quorum follower that received two conflicting commands in
    // the other order proposes different dependencies, adopts the leader's (double vote) and
    // every replica commits the same dependencies. Method: two clients write one key; follower
    // 2 gets them in the opposite order to the leader.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, Config::default());
    let (a, b) = (cluster.client(0), cluster.client(1));
    let op_x = cluster.submit(a, Command::set("k", "x"));
    let op_z = cluster.submit(b, Command::set("k", "z"));
    let follower = cluster.replica(2);
    assert!(cluster.deliver_first(|e| is_propagate_to(e, follower) && e.from == b));
    assert!(cluster.deliver_first(|e| is_propagate_to(e, follower) && e.from == a));
    cluster.deliver_all();
    assert_eq!(cluster.result(op_x), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(op_z), Some(&CommandResult::Ok));
    assert!(event(&cluster, follower, "double_vote") >= 1, "the follower voted twice");
    let leader = committed_deps(&cluster, 0);
    assert_eq!(leader.len(), 2);
    for rank in 1..5 {
        assert_eq!(committed_deps(&cluster, rank), leader, "Inv 1 at rank {rank}");
    }
    let states: Vec<_> = (0..5).map(|r| replica(&cluster, r).execution.state_machine.key_digests()).collect();
    assert!(states.windows(2).all(|w| w[0] == w[1]), "every replica ran the writes in one order");
}

/// Fig 2 (spec scenario 6): c1 reaches only the leader; c2 (conflicting with c1 and c3) and c3
/// reach everyone. The followers' direct dependencies of c3 match the leader's, their paths do
/// not. Returns the cluster after c3's acks reached its client, the leader's FastAck for c2
/// still held back from the followers (so they cannot accept c2).
fn fig_2<P: Protocol<Message = Message, Config = Config>>() -> (Cluster<P>, u64) {
    let mut cluster = Cluster::<P>::new(3, 3, Config::default());
    let (c1, c2, c3) = (cluster.client(0), cluster.client(1), cluster.client(2));
    let leader = cluster.replica(0);
    cluster.submit(c1, Command::set("a", "1"));
    cluster.drop_where(|e| e.from == c1 && e.to != leader);
    cluster.deliver_all();
    let mset = Command::MSet { pairs: vec![("a".into(), "2".into()), ("b".into(), "2".into())] };
    cluster.submit(c2, mset);
    // Everything but the leader's FastAck of c2 to the followers (L23 would hold it anyway:
    // they lack c1) and the payload fetches.
    let held = |e: &Envelope<P>| matches!(e.message, Message::FastAck { .. }) && e.from == leader;
    cluster.deliver_all_where(|e| !held(e));
    cluster.drop_where(held);
    let op3 = cluster.submit(c3, Command::get("b"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::FastAck { .. } if e.from == leader && e.to != c3));
    (cluster, op3)
}

#[test]
fn scenario_6_fig_2_paths_differ_where_direct_dependencies_match() {
    // Goal: the client of c3 must not take the leader's optimistic result on FastAcks alone:
    // direct dependencies match ({c2}), paths do not ([c3,c2,c1…] vs [c3,c2]). Method: Fig 2
    // replayed; the client completes only after the followers fetched c1 and voted again.
    let (mut cluster, op3) = fig_2::<SwiftPaxos>();
    assert_eq!(cluster.result(op3), None, "no fast path on mismatching paths");
    assert_eq!(event(&cluster, cluster.client(2), "client_fast"), 0);
    // The followers fetch c1 from the leader after a time-out, accept c2, then c3.
    cluster.run_for(200_000_000);
    assert_eq!(cluster.result(op3), Some(&CommandResult::Value("2".into())));
    assert!(event(&cluster, cluster.replica(1), "payload_fetched") >= 1, "follower 1 fetched c1");
}

#[test]
fn scenario_6_direct_deps_canary_breaks_inv_14() {
    // Goal: the checker catches a client that compares direct dependencies only. Method: Fig 2
    // with the canary; its client takes c3's optimistic result at once; then the leader crashes
    // before the followers learn c1, recovery keeps c2 without c1, and the global checker sees
    // c2 commit with dependencies other than those the client relied on.
    let outcome = std::panic::catch_unwind(|| {
        let (mut cluster, op3) = fig_2::<SwiftPaxosDirectDeps>();
        assert!(cluster.result(op3).is_some(), "the canary's client took the fast path");
        cluster.crash(cluster.replica(0));
        cluster.drop_where(|e| e.from == NodeId(0));
        cluster.run_for(2_000_000_000);
    });
    let panic = outcome.expect_err("the checker caught the canary");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("Inv 14"), "caught as an Inv 14 violation: {message}");
}

#[test]
fn scenario_11_duplicate_propagates_execute_once() {
    // Goal: Propagate is ignored unless the id is in START (L7) and a retry of an executed
    // command is answered, not run again. Method: duplicate every Propagate; after completion
    // inject one more copy (a retry that crossed the answer).
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 1, Config::default());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 1 });
    let copies: Vec<u64> = cluster.pending().map(|e| e.id).collect();
    for copy in copies {
        cluster.duplicate(copy);
    }
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(1)));
    let own = cluster.node_as::<super::client::Client>(client).client_id();
    let late = Message::Propagate {
        id: RequestId { client: own, number: 1 },
        command: Command::IncrBy { key: "n".into(), delta: 1 },
    };
    cluster.inject(client, cluster.replica(1), late);
    cluster.deliver_all();
    for rank in 0..3 {
        assert_eq!(replica(&cluster, rank).execution.executed, 1, "executed once at {rank}");
    }
}

#[test]
fn scenario_12_lost_payload_is_fetched_from_the_leader() {
    // Goal: followers that never got the client's Propagate learn the id from the leader's
    // FastAck and fetch the payload (§4.3). Method: the Propagate reaches only replicas 0 and 1.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config { gc: true, ..Config::default() });
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    let (r0, r1) = (cluster.replica(0), cluster.replica(1));
    cluster.drop_where(|e| e.from == client && e.to != r0 && e.to != r1);
    cluster.run_for(100_000_000);
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    for rank in 0..5 {
        assert_eq!(replica(&cluster, rank).execution.executed, 1, "rank {rank} executed it");
        // Executed everywhere, so every replica forgot it since (garbage collection).
        assert_eq!(event(&cluster, cluster.replica(rank), "gc_forgotten"), 1, "rank {rank} forgot it");
        assert!(replica(&cluster, rank).instances.is_empty(), "rank {rank} holds nothing");
    }
    assert!(event(&cluster, cluster.replica(2), "fetch") >= 1, "rank 2 fetched the payload");
}

#[test]
fn scenario_15_leader_crash_idle_system() {
    // Goal: after the leader crashes the failure detector nominates the lowest live replica,
    // which recovers (NewLeader, NewLeaderAcks, Sync) and serves new commands. Method: commit
    // one command, crash replica 0, let time pass, submit another.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let first = cluster.submit(client, Command::set("k", "1"));
    cluster.deliver_all();
    assert_eq!(cluster.result(first), Some(&CommandResult::Ok));
    cluster.crash(cluster.replica(0));
    cluster.run_for(200_000_000);
    for rank in 1..5 {
        let ballots = replica(&cluster, rank).ballots;
        assert!(ballots.bal > 0 && ballots.bal == ballots.cbal, "rank {rank} is in the new ballot: {ballots:?}");
        assert_eq!(ballots.bal % 5, 1, "replica 1 leads");
    }
    let second = cluster.submit(client, Command::get("k"));
    cluster.run_for(200_000_000);
    assert_eq!(cluster.result(second), Some(&CommandResult::Value("1".into())));
}

#[test]
fn scenario_18_reply_without_acks_is_not_delivered() {
    // Goal: the leader's Reply alone is not a response; if the leader crashes before any
    // follower accepted, the command runs once in the new ballot after the client's retry.
    // Method: deliver the Propagates and the Reply only, crash the leader, run.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 5 });
    cluster.deliver_all_where(|e| matches!(e.message, Message::Propagate { .. }));
    cluster.deliver_all_where(|e| matches!(e.message, Message::Reply { .. }));
    assert_eq!(cluster.result(op), None);
    cluster.crash(cluster.replica(0));
    cluster.drop_where(|e| e.from == NodeId(0));
    cluster.run_for(1_000_000_000);
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(5)));
    for rank in 1..5 {
        assert_eq!(replica(&cluster, rank).execution.executed, 1, "executed once at {rank}");
    }
}

fn entry(id: RequestId, phase: Phase, deps: &[RequestId]) -> Entry {
    Entry { id, phase, command: Command::set("k", "v"), deps: Some(deps.to_vec()), witnessed: false }
}

#[test]
fn scenario_21_fig_6_cycle_is_broken() {
    // Goal: merging fast-quorum agreements of Fig 6 forms the cycle c0…c5; L64 breaks it and
    // keeps every conflicting pair ordered. Method: C1 with five replicas, leader(4) = p4;
    // p0, p1 and p2 report cbal = 4 and the orders of Fig 6a; the recovery merge runs on them.
    let config = Config { quorum_system: QuorumSystem::C1, ..Config::default() };
    let cluster = Cluster::<SwiftPaxos>::new(5, 0, config);
    let c: Vec<RequestId> = (0..6).map(|i| id(100, i)).collect();
    let order = |ids: &[usize]| -> Vec<Entry> {
        ids.iter()
            .enumerate()
            .map(|(at, &i)| {
                let deps: Vec<RequestId> = if at == 0 { vec![] } else { vec![c[ids[at - 1]]] };
                entry(c[i], Phase::PreAccept, &deps)
            })
            .collect()
    };
    let mut acks = BTreeMap::new();
    acks.insert(0, (4, order(&[0, 1, 2, 3, 4])));
    acks.insert(1, (4, order(&[2, 3, 4, 5, 0])));
    acks.insert(2, (4, order(&[4, 5, 0, 1, 2])));
    let recovered = replica(&cluster, 0).compute_sync(&acks);
    assert_eq!(recovered.len(), 6, "every command recovered through some fast quorum (L57–L61)");
    assert_eq!(topological(&recovered).len(), 6, "the Sync graph is acyclic");
    let reach = |from: RequestId, to: RequestId| {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(at) = stack.pop() {
            if at == to {
                return true;
            }
            if seen.insert(at) {
                stack.extend(recovered[&at].2.iter().copied());
            }
        }
        false
    };
    for &x in &c {
        for &y in &c {
            if x < y {
                assert!(reach(x, y) || reach(y, x), "{x:?} and {y:?} stay ordered");
            }
        }
    }
}

#[test]
fn scenario_22_unrecoverable_dependency_is_pruned() {
    // Goal: a dependency only one replica of Q knows, pre-accepted, is not recovered and is
    // removed from its dependents (L62–L63). Method: a merge where c is accepted at p0 with
    // c' in its dependencies and c' is pre-accepted at p2 only (not on a fast quorum).
    let cluster = Cluster::<SwiftPaxos>::new(5, 0, Config::default());
    let (c, c2) = (id(100, 1), id(101, 1));
    let mut acks = BTreeMap::new();
    acks.insert(0, (0, vec![entry(c, Phase::Accept, &[c2])]));
    acks.insert(3, (0, vec![]));
    acks.insert(4, (0, vec![entry(c2, Phase::PreAccept, &[])]));
    let recovered = replica(&cluster, 1).compute_sync(&acks);
    assert_eq!(recovered.len(), 1, "c' is back in START");
    assert!(recovered[&c].2.is_empty(), "c no longer depends on c'");
}

#[test]
fn quorums_c2_and_c1() {
    // Goal: the quorum rules of §3.1. Method: five replicas on one site (ties by rank).
    let topology = crate::testkit::topology(5, 0);
    let c2 = super::quorums::Quorums::new(&topology, &Config::default());
    assert_eq!(c2.leader(7), 2);
    assert_eq!(c2.fixed_fast_followers(0), Some(vec![1, 2]));
    assert_eq!(c2.fixed_fast_followers(5), Some(vec![2, 3]), "the next round shifts the window");
    assert!(c2.is_fast_member(2, 0) && !c2.is_fast_member(3, 0));
    assert_eq!(c2.next_ballot_of(3, 4), 8);
    assert!(c2.slow_quorum_met(2) && !c2.slow_quorum_met(1));
    let c1 = super::quorums::Quorums::new(&topology, &Config { quorum_system: QuorumSystem::C1, ..Config::default() });
    assert_eq!(c1.fast_followers_needed(), 3, "a C1 fast quorum holds 4 of 5");
    assert_eq!(c1.fast_quorums(4).len(), 4);
    let configured = Config { fast_quorum_ranks: vec![3, 0, 1], ..Config::default() };
    let fixed = super::quorums::Quorums::new(&topology, &configured);
    assert_eq!(fixed.fixed_fast_followers(3), Some(vec![0, 1]), "the configured quorum of ballot 3");
}

#[test]
fn paths_tell_a_trimmed_end_from_a_complete_one() {
    // Goal: Fig 2's mismatch shows in the digest: [c3, c2…] (c2 accepted) differs from
    // [c3, c2] (c2 pre-accepted without dependencies), equal direct dependencies or not.
    let (c2, c3) = (id(1, 2), id(1, 3));
    let deps: BTreeSet<RequestId> = [c2].into();
    let empty = BTreeSet::new();
    let accepted = paths::digest(c3, &deps, |_| (Phase::Accept, Some(&empty)));
    let proposed = paths::digest(c3, &deps, |_| (Phase::PreAccept, Some(&empty)));
    let again = paths::digest(c3, &deps, |_| (Phase::Accept, None));
    assert_ne!(accepted, proposed);
    assert_eq!(accepted, again, "below a trimmed end nothing counts");
}

#[test]
fn scenario_4_contention_free_conflicts_stay_fast() {
    // Goal: conflicting commands that reach every replica in one order (a client's sequence)
    // commit on the fast path, each depending on the previous (Lemma 1). Method: five writes of
    // one key from one client, one after the other.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    let client = cluster.client(0);
    for value in 0..5 {
        let op = cluster.submit(client, Command::set("k", value.to_string()));
        cluster.deliver_all();
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    }
    assert_eq!(event(&cluster, client, "client_fast"), 5, "every command took the fast path");
    let leader = committed_deps(&cluster, 0);
    assert_eq!(leader.values().filter(|deps| deps.len() == 1).count(), 4, "each depends on the previous");
    for rank in 1..5 {
        assert_eq!(committed_deps(&cluster, rank), leader, "Inv 1 at rank {rank}");
    }
}

#[test]
fn scenario_8_diamond_dependencies() {
    // Goal: x ⋈ y and y ⋈ z with x, z commuting: dep[y] = {x, z}, dep[x] = dep[z] = ∅.
    // Method: SET a, SET b, then MSET a b, each delivered before the next.
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 3, Config::default());
    let x = cluster.submit(cluster.client(0), Command::set("a", "1"));
    cluster.deliver_all();
    let z = cluster.submit(cluster.client(1), Command::set("b", "1"));
    cluster.deliver_all();
    let mset = Command::MSet { pairs: vec![("a".into(), "2".into()), ("b".into(), "2".into())] };
    let y = cluster.submit(cluster.client(2), mset);
    cluster.deliver_all();
    for op in [x, y, z] {
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    }
    let deps = committed_deps(&cluster, 0);
    let sizes: Vec<usize> = deps.values().map(BTreeSet::len).collect();
    assert_eq!(sizes.iter().filter(|&&n| n == 0).count(), 2, "x and z depend on nothing");
    assert_eq!(sizes.iter().filter(|&&n| n == 2).count(), 1, "y depends on both");
}

#[test]
fn scenario_9_and_10_leader_fast_ack_waits_for_its_precondition() {
    // Goal: L23: a follower holds the leader's FastAck for z until x ∈ D(z) is accepted, and a
    // leader FastAck that arrives before the Propagate waits for it. Method: two writes of one
    // key; follower 1 gets the leader's FastAck for z first, then both FastAcks before any
    // Propagate.
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 2, Config::default());
    let (a, b) = (cluster.client(0), cluster.client(1));
    let (leader, follower) = (cluster.replica(0), cluster.replica(1));
    let x = cluster.submit(a, Command::set("k", "x"));
    let z = cluster.submit(b, Command::set("k", "z"));
    assert!(cluster.deliver_first(|e| is_propagate_to(e, leader) && e.from == a));
    assert!(cluster.deliver_first(|e| is_propagate_to(e, leader) && e.from == b));
    let leader_ack =
        |e: &Envelope<SwiftPaxos>| e.from == leader && e.to == follower && matches!(e.message, Message::FastAck { .. });
    let acks: Vec<u64> = cluster.pending().filter(|e| leader_ack(e)).map(|e| e.id).collect();
    assert_eq!(acks.len(), 2);
    assert!(cluster.deliver(acks[1]), "z's FastAck first (non-FIFO)");
    assert!(cluster.deliver(acks[0]));
    let waiting = &replica(&cluster, 1).awaiting;
    assert_eq!(waiting.len(), 2, "both wait for their Propagate (L23: id ∈ PreAccept)");
    cluster.deliver_all();
    assert_eq!(cluster.result(x), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(z), Some(&CommandResult::Ok));
    assert_eq!(committed_deps(&cluster, 1), committed_deps(&cluster, 0), "the follower follows the leader");
}

#[test]
fn scenario_16_to_20_leader_crash_at_every_point() {
    // Goal: whatever the leader had sent when it crashed (before any FastAck, after a fast or
    // slow commit at one replica, after a Reply, after the client accepted), recovery keeps
    // every command that may have committed with its dependencies, the clients complete and
    // the survivors agree. The global checker (Inv 1, 7, 14, Nontriviality) runs throughout.
    // Method: three conflicting commands from three clients; for k = 0..60, deliver k messages
    // in FIFO order, crash the leader, and run for two seconds.
    for k in 0..60 {
        let mut cluster = Cluster::<SwiftPaxos>::new(5, 3, Config::default());
        let ops: Vec<u64> = (0..3)
            .map(|i| cluster.submit(cluster.client(i), Command::IncrBy { key: "n".into(), delta: 1 << i }))
            .collect();
        for _ in 0..k {
            cluster.deliver_next();
        }
        cluster.crash(cluster.replica(0));
        cluster.run_for(2_000_000_000);
        for &op in &ops {
            assert!(cluster.result(op).is_some(), "k = {k}: op {op} completed");
        }
        let digests: Vec<_> = (1..5).map(|r| replica(&cluster, r).execution.state_machine.key_digests()).collect();
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "k = {k}: the survivors agree");
        assert_eq!(replica(&cluster, 1).execution.executed, 3, "k = {k}: each command ran once");
    }
}

#[test]
fn scenario_24_stale_ballot_acks_are_dropped() {
    // Goal: acks of an older ballot change nothing after a ballot change (L23, L31). Method:
    // crash the leader, let replica 1 take over, inject ballot-0 acks.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    cluster.crash(cluster.replica(0));
    cluster.run_for(200_000_000);
    assert!(replica(&cluster, 2).ballots.bal > 0);
    let stale = id(999, 1);
    let (r1, r2) = (cluster.replica(1), cluster.replica(2));
    cluster.inject(r1, r2, Message::SlowAck { ballot: 0, id: stale });
    cluster.inject(r1, r2, Message::FastAck { ballot: 0, id: stale, deps: vec![], paths: 0 });
    cluster.deliver_all();
    let dropped = &cluster.stats(r2).dropped;
    assert_eq!(dropped.get("slow ack of an older ballot"), Some(&1));
    assert_eq!(dropped.get("fast ack of an older ballot"), Some(&1));
    assert!(!replica(&cluster, 2).instances.contains_key(&stale), "no trace of the stale command");
}

#[test]
fn scenario_25_and_26_follower_crashes() {
    // Goal: under C2, two crashed followers (one in the fast quorum) leave no fast path but
    // commands commit through slow quorums; under C1 one crashed follower leaves the fast path
    // open (§5.5). Method: one command each way, timers not run (no ballot change).
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, Config::default());
    cluster.crash(cluster.replica(2));
    cluster.crash(cluster.replica(4));
    let op = cluster.submit(cluster.client(0), Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, cluster.client(0), "client_fast"), 0);
    assert_eq!(event(&cluster, cluster.client(0), "client_slow"), 1);

    let config = Config { quorum_system: QuorumSystem::C1, ..Config::default() };
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, config);
    cluster.crash(cluster.replica(4));
    let op = cluster.submit(cluster.client(0), Command::set("k", "v"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::SlowAck { .. }));
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok), "fast path with 4 of 5");
    assert_eq!(event(&cluster, cluster.client(0), "client_fast"), 1);
}

#[test]
fn scenario_13_command_missing_at_the_leader_is_reproposed() {
    // Goal: followers that got a command the leader never received re-propose it to the leader
    // after a time-out (§4.3), and it commits; a later conflicting command is not blocked.
    // Method: the client's Propagate reaches followers 1 and 2 only; its retries
    // that come later are dropped.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, Config::default());
    let (client, other) = (cluster.client(0), cluster.client(1));
    let (r1, r2) = (cluster.replica(1), cluster.replica(2));
    let op = cluster.submit(client, Command::set("k", "1"));
    cluster.drop_where(|e| e.from == client && e.to != r1 && e.to != r2);
    cluster.deliver_all_where(|e| e.from == client);
    // Run until a follower re-proposed (after 10 ms, before the client's first retry at 40 ms).
    let reproposed = cluster.run_until(200_000_000, |c| {
        c.stats(r1).events.contains_key("repropose") || c.stats(r2).events.contains_key("repropose")
    });
    assert!(reproposed, "a follower re-proposed");
    cluster.drop_where(|e| e.from == client);
    cluster.run_for(100_000_000);
    let later = cluster.submit(other, Command::get("k"));
    cluster.run_for(300_000_000);
    assert!(cluster.result(later).is_some(), "the later conflicting command completed");
    assert_eq!(replica(&cluster, 0).execution.executed, 2, "both ran at the leader");
    assert!(cluster.result(op).is_some(), "the re-proposed command completed");
}

#[test]
fn a_dependency_the_leader_dropped_is_followed_directly_again() {
    // Goal: the conflict index lets a key's last write stand for every earlier conflicting
    // command; once the leader sets that write's dependencies without one of them, the next
    // proposals on the key must name it directly (or a fast path could agree on equal reduced
    // sets that stand for different orders: Inv 1 violations at random seeds before the fix).
    let (x, w, r) = (id(1, 1), id(2, 1), id(3, 1));
    let mut index = super::conflicts::KeyIndex::default();
    assert!(index.record(x, &Command::set("k", "1")).is_empty());
    assert_eq!(index.record(w, &Command::set("k", "2")), BTreeSet::from([x]), "w follows x");
    // The leader's dependencies for w leave x out: x is reinstated.
    index.reinstate(x, &Command::set("k", "1"));
    assert_eq!(index.record(r, &Command::get("k")), BTreeSet::from([x, w]), "a read follows both");
    let next = id(4, 1);
    assert_eq!(index.record(next, &Command::set("k", "3")), BTreeSet::from([x, w, r]), "so does a write");
    assert_eq!(index.record(id(5, 1), &Command::get("k")), BTreeSet::from([next]), "which stands for them all");
}

#[test]
fn keyspace_commands_are_refused_before_they_take_a_number() {
    // Goal: the conflict index orders commands by their keys, so a command on every key (bare,
    // stamped, or inside a transaction) is refused at the client with a clear error, nothing is
    // sent, and the client goes on with its next command.
    use ordo_core::command::Keyspace;
    let mut cluster = Cluster::<SwiftPaxos>::new(3, 1, Config::default());
    let client = cluster.client(0);
    let keyspace = [
        Command::Keyspace(Keyspace::Size),
        Command::Keyspace(Keyspace::Flush).timed(5),
        Command::Transaction {
            watched: Vec::new(),
            commands: vec![Command::set("k", "v"), Command::Keyspace(Keyspace::Size)],
        },
    ];
    for command in keyspace {
        let op = cluster.submit(client, command);
        assert_eq!(cluster.result(op), Some(&CommandResult::Error(super::client::KEYSPACE_REFUSED.into())));
    }
    assert!(cluster.sent_log().is_empty(), "a refused command sends nothing");
    assert_eq!(event(&cluster, client, "client_keyspace_refused"), 3);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok), "the next command commits");
}
