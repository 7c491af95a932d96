//! CURP+ on the testkit: the one-round-trip fast path, the slow path under conflicts, and a
//! leader crash after every message. The global checker (Inv 1, Inv 7, Nontriviality: a fast
//! result equals every execution) runs after every step (the testkit panics on a violation).

use super::Curp;
use crate::swiftpaxos::Config;
use crate::testkit::Cluster;
use ordo_core::{Command, CommandResult, NodeId};

fn event(cluster: &Cluster<Curp>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

fn digest(cluster: &Cluster<Curp>, rank: usize) -> String {
    let machine = cluster.node(cluster.replica(rank)).state_machine().expect("a live replica has a state machine");
    format!("{:?}", machine.key_digests())
}

#[test]
fn a_lone_command_takes_the_fast_path() {
    // Goal: with nothing conflicting, the leader's reply and the witnesses' record acks
    // complete the command (App. B L3–L5). Method: five replicas, one client, FIFO delivery.
    let mut cluster = Cluster::<Curp>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, client, "client_fast"), 1, "the client took the fast path");
    for rank in 0..5 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 1, "rank {rank} executed it once");
    }
}

#[test]
fn conflicting_commands_complete_and_agree() {
    // Goal: witnesses refuse a command conflicting with an unsynced one, the leader waits for
    // earlier conflicting commits before replying, and every replica ends in the same state.
    // Method: ten clients increment one key, delivered last-submitted first.
    let mut cluster = Cluster::<Curp>::new(5, 10, Config::default());
    let ops: Vec<u64> = (0..10)
        .map(|i| cluster.submit(cluster.client(i), Command::IncrBy { key: "n".into(), delta: 1 << i }))
        .collect();
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
    // Goal: whatever the leader had sent when it crashed, a result a client took from the fast
    // path is what the command's execution gives (the checker's Nontriviality), the clients
    // complete and the survivors agree. Method: two conflicting increments and a write of
    // another key; for k = 0..60, deliver k messages in FIFO order, crash the leader, and run
    // for two seconds.
    for k in 0..60 {
        let mut cluster = Cluster::<Curp>::new(5, 3, Config::default());
        let commands = [
            Command::IncrBy { key: "n".into(), delta: 1 },
            Command::IncrBy { key: "n".into(), delta: 2 },
            Command::set("other", "v"),
        ];
        let ops: Vec<u64> =
            commands.into_iter().enumerate().map(|(i, c)| cluster.submit(cluster.client(i), c)).collect();
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
