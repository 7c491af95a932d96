//! Recovery of a restarted replica and state transfer (docs/protocols/chora.md, "Recovery and
//! state transfer"), on the testkit. Node ids with 3 replicas: r0..r2 = n0..n2, then clients.

use super::messages::Message;
use super::replica::Replica;
use super::{Chora, Config, Durable};
use crate::testkit::Cluster;
use ordo_core::{Command, NodeId};

const MS: u64 = 1_000_000;

fn replica(cluster: &Cluster<Chora>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn event(cluster: &Cluster<Chora>, node: NodeId, name: &str) -> u64 {
    cluster.total_stats(node).events.get(name).copied().unwrap_or(0)
}

fn run_writes(cluster: &mut Cluster<Chora>, client: NodeId, from: u64, count: u64) {
    for i in from..from + count {
        let op = cluster.submit(client, Command::set(format!("k{}", i % 7), format!("v{i}")));
        assert!(cluster.run_until(100 * MS, |c| c.result(op).is_some()), "write {i} completed");
    }
}

fn digests(cluster: &Cluster<Chora>, rank: usize) -> Vec<ordo_core::KeyDigest> {
    cluster.node(cluster.replica(rank)).state_machine().expect("a running replica has state").key_digests()
}

fn durable_state(cluster: &Cluster<Chora>, node: NodeId) -> (u64, u64) {
    let Some(Durable::State { view, ack_limit }) = cluster.durable(node).last() else { panic!("{node} persisted") };
    (*view, *ack_limit)
}

#[test]
fn a_restarted_replica_recovers_by_state_transfer_and_proposes_again() {
    // Goal: a crashed replica restarted from its durable record takes part again. Method:
    // replica 2 crashes; the others change view without it and go on; it restarts, installs a
    // snapshot committed past its durable ack limit, asks for a view change, and is listed as
    // a proposer again; its state equals the others'; later writes execute everywhere.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config { ack_reserve: 16, ..Config::default() });
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 10);
    let r2 = cluster.replica(2);
    let (_, limit) = durable_state(&cluster, r2);
    cluster.crash(r2);
    run_writes(&mut cluster, client, 10, 5);
    let view_without = replica(&cluster, 0).view();
    assert!(view_without > 0 && !replica(&cluster, 0).schedule().unwrap().is_proposer(2));
    cluster.restart(r2);
    assert!(cluster.node(r2).is_recovering(), "restarted, it waits for a snapshot");
    assert!(cluster.run_until(200 * MS, |c| !c.node(r2).is_recovering()), "it recovered: {}", cluster.status(r2));
    assert!(replica(&cluster, 2).executed() >= limit, "the snapshot covers every slot it may have acked");
    assert!(event(&cluster, r2, "state_transfer") >= 1);
    let listed = |c: &Cluster<Chora>| (0..3).all(|r| replica(c, r).schedule().is_some_and(|s| s.is_proposer(2)));
    assert!(cluster.run_until(300 * MS, listed), "listed as a proposer again: {}", cluster.status(r2));
    assert!(replica(&cluster, 0).view() > view_without);
    run_writes(&mut cluster, client, 15, 10);
    cluster.run_for(20 * MS);
    assert!(replica(&cluster, 2).next_propose().is_some(), "it proposes again");
    assert_eq!(digests(&cluster, 2), digests(&cluster, 0), "same state as replica 0");
    assert_eq!(replica(&cluster, 2).executed(), replica(&cluster, 0).executed());
}

#[test]
fn a_restarted_replica_never_votes_twice_in_a_view() {
    // Goal: a vote survives a crash (Claim 2 across incarnations). Method: replica 2 votes for
    // replica 0 in view 5 (a request injected), crashes, restarts and recovers; a request of
    // replica 1 for view 5 then gets no vote, though replica 1's log is as up to date.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 3);
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let request = |c: &Cluster<Chora>| Message::ViewChangeRequest {
        view: 5,
        last_append: c.node_as::<Replica>(r0).log().last_append() + 100,
        last_append_view: 0,
    };
    cluster.keep_sent_log();
    let vote = request(&cluster);
    cluster.inject(r0, r2, vote);
    cluster.deliver_first(|e| e.to == r2 && matches!(e.message, Message::ViewChangeRequest { .. }));
    let voted = |c: &Cluster<Chora>, to| {
        c.sent_log()
            .iter()
            .any(|e| e.from == r2 && e.to == to && matches!(e.message, Message::ViewChangeReply { view: 5 }))
    };
    assert!(voted(&cluster, r0), "replica 2 voted for replica 0 in view 5");
    assert_eq!(durable_state(&cluster, r2).0, 5, "the vote's view is durable");
    cluster.crash(r2);
    cluster.restart(r2);
    assert!(cluster.run_until(200 * MS, |c| !c.node(r2).is_recovering()), "recovered: {}", cluster.status(r2));
    let second = request(&cluster);
    cluster.inject(r1, r2, second);
    cluster.deliver_first(|e| e.to == r2 && matches!(e.message, Message::ViewChangeRequest { .. }));
    assert!(!voted(&cluster, r1), "no second vote in view 5");
}

#[test]
fn acks_wait_for_their_durable_limit() {
    // Goal: no ack leaves above the durable ack limit (what a restarted replica relies on).
    // Method: replica 1's writes stay pending (manual durability) while writes go on; every
    // pulse it sends acks at most its durable limit, though it holds more; commits go on with
    // replicas 0 and 2; once flushed, its acks move on.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config { ack_reserve: 8, ..Config::default() });
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 2);
    let r1 = cluster.replica(1);
    cluster.set_manual_durability(r1, true);
    cluster.keep_sent_log();
    let (_, limit) = durable_state(&cluster, r1);
    run_writes(&mut cluster, client, 2, 20);
    let acks: Vec<u64> = cluster
        .sent_log()
        .iter()
        .filter(|e| e.from == r1)
        .filter_map(|e| if let Message::Pulse(p) = &e.message { Some(p.ack) } else { None })
        .collect();
    assert!(acks.iter().all(|&ack| ack <= limit), "acks {acks:?} above the limit {limit}");
    assert!(replica(&cluster, 1).log().last_append() > limit, "it holds slots it may not ack yet");
    cluster.set_manual_durability(r1, false);
    cluster.run_for(5 * MS);
    assert!(durable_state(&cluster, r1).1 > limit, "a new limit is durable");
    assert!(replica(&cluster, 1).acks().last_ack > limit);
}

#[test]
fn a_replica_behind_the_truncated_log_fetches_a_snapshot() {
    // Goal: a replica that lags more than the others keep (log_keep) is not stuck. Method:
    // log_keep = 16; replica 2 is cut off while 60 writes commit (the others truncate what it
    // misses); after healing it fetches a snapshot and ends with the others' state.
    let config = Config { log_keep: 16, ..Config::default() };
    let mut cluster = Cluster::<Chora>::new(3, 1, config);
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 3);
    let r2 = cluster.replica(2);
    cluster.isolate(r2);
    run_writes(&mut cluster, client, 3, 60);
    assert!(replica(&cluster, 0).log().first() > replica(&cluster, 2).acks().last_ack, "truncated past it");
    cluster.heal(r2);
    run_writes(&mut cluster, client, 63, 3);
    cluster.run_for(100 * MS);
    assert!(event(&cluster, r2, "state_transfer") >= 1, "{}", cluster.status(r2));
    assert_eq!(replica(&cluster, 2).executed(), replica(&cluster, 0).executed(), "{}", cluster.status(r2));
    assert_eq!(digests(&cluster, 2), digests(&cluster, 0));
}
