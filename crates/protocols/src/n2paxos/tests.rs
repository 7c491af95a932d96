//! N²Paxos on the testkit: the normal case (2A, 2Bs to all, the closest replica answers) and
//! a leader crash after every message of three conflicting commands. The global checker (Inv 1,
//! Inv 7, Nontriviality) runs after every step (the testkit panics on a violation).

use super::N2Paxos;
use crate::swiftpaxos::Config;
use crate::swiftpaxos::messages::Message;
use crate::testkit::Cluster;
use ordo_core::{Command, CommandResult, NodeId};

fn event(cluster: &Cluster<N2Paxos>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

fn digest(cluster: &Cluster<N2Paxos>, rank: usize) -> String {
    let machine = cluster.node(cluster.replica(rank)).state_machine().expect("a live replica has a state machine");
    format!("{:?}", machine.key_digests())
}

#[test]
fn one_command_commits_everywhere_and_the_closest_replica_answers() {
    // Goal: no fast path and no Reply: the leader's 2A, every follower's 2B to every replica,
    // a commit at each replica, and the answer from one replica after execution. Method: five
    // replicas, one client, FIFO delivery; count the messages by kind.
    let mut cluster = Cluster::<N2Paxos>::new(5, 1, Config::default());
    cluster.keep_sent_log();
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, client, "client_executed"), 1, "the answer came from an execution");
    let sent = cluster.sent_log();
    let count = |p: fn(&Message) -> bool| sent.iter().filter(|e| p(&e.message)).count();
    assert_eq!(count(|m| matches!(m, Message::Reply { .. })), 0, "no optimistic reply");
    assert_eq!(count(|m| matches!(m, Message::FastAck { .. })), 4, "one 2A to each follower");
    assert_eq!(count(|m| matches!(m, Message::SlowAck { .. })), 16, "each follower's 2B to the other replicas");
    assert_eq!(count(|m| matches!(m, Message::Executed { .. })), 1, "one replica answers");
    for rank in 0..5 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 1, "rank {rank} executed it once");
        assert_eq!(cluster.stats(cluster.replica(rank)).fast_path_commits, 0, "rank {rank}: no fast path");
    }
}

#[test]
fn conflicting_commands_execute_in_the_leader_order_everywhere() {
    // Goal: followers that received conflicting commands in another order still execute them
    // in the leader's order. Method: ten clients append to one key; the network delivers
    // last-submitted first (LIFO) to stress the arrival orders; compare every replica's state.
    let mut cluster = Cluster::<N2Paxos>::new(5, 10, Config::default());
    let ops: Vec<u64> =
        (0..10).map(|i| cluster.submit(cluster.client(i), Command::append("k", format!("{i},")))).collect();
    while cluster.pending_count() > 0 {
        let last = cluster.pending_count() - 1;
        let target = cluster.pending().nth(last).map(|e| (e.from, e.to)).expect("pending");
        assert!(cluster.deliver_first(|e| (e.from, e.to) == target));
    }
    for op in ops {
        assert!(cluster.result(op).is_some(), "op {op} completed");
    }
    let first = digest(&cluster, 0);
    for rank in 1..5 {
        assert_eq!(digest(&cluster, rank), first, "rank {rank} agrees with the leader");
    }
}

#[test]
fn leader_crash_at_every_point() {
    // Goal: whatever the leader had sent when it crashed, the next ballot keeps every command
    // that may have committed, the clients complete, and the survivors agree. Method: three
    // conflicting commands; for k = 0..50, deliver k messages in FIFO order, crash the leader,
    // and run for two seconds.
    for k in 0..50 {
        let mut cluster = Cluster::<N2Paxos>::new(5, 3, Config::default());
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
        let first = digest(&cluster, 1);
        for rank in 2..5 {
            assert_eq!(digest(&cluster, rank), first, "k = {k}: the survivors agree");
        }
        assert_eq!(cluster.stats(cluster.replica(1)).executed, 3, "k = {k}: each command ran once");
    }
}
