//! Recovery of a restarted Mencius replica and state transfer (docs/protocols/mencius.md,
//! "Recovery"), on the testkit. Node ids with 3 replicas: r0..r2 = n0..n2, then clients; client
//! `c` first sends to replica `c mod 3`.

use super::messages::{Ballot, Message, Value};
use super::replica::Replica;
use super::{Config, Durable, Mencius};
use crate::testkit::Cluster;
use ordo_core::{Command, NodeId};

const MS: u64 = 1_000_000;

fn replica(cluster: &Cluster<Mencius>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn event(cluster: &Cluster<Mencius>, node: NodeId, name: &str) -> u64 {
    cluster.total_stats(node).events.get(name).copied().unwrap_or(0)
}

fn run_writes(cluster: &mut Cluster<Mencius>, client: NodeId, from: u64, count: u64) {
    for i in from..from + count {
        let op = cluster.submit(client, Command::set(format!("k{}", i % 7), format!("v{i}")));
        assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "write {i} completed");
    }
}

fn digests(cluster: &Cluster<Mencius>, rank: usize) -> Vec<ordo_core::KeyDigest> {
    cluster.node(cluster.replica(rank)).state_machine().expect("a running replica has state").key_digests()
}

fn durable_bound(cluster: &Cluster<Mencius>, node: NodeId) -> u64 {
    let Some(Durable::Bound { slot }) = cluster.durable(node).last() else { panic!("{node} persisted") };
    *slot
}

/// Small reserves, so that a restarted replica's bound is reached within a few writes.
fn config() -> Config {
    Config { bound_reserve: 16, revoke_ahead: 8, ..Config::default() }
}

#[test]
fn a_restarted_replica_catches_up_by_state_transfer_and_proposes_again() {
    // Goal: a crashed replica restarted from its durable bound takes part again. Method:
    // replica 2 crashes; the others revoke its slots and go on; it restarts, waits (recovering,
    // counted as down) for a snapshot executed past its bound, installs it, ends with the
    // others' state, and then commits a client's writes in its own slots again.
    let mut cluster = Cluster::<Mencius>::new(3, 3, config());
    let (c0, c2) = (cluster.client(0), cluster.client(2));
    run_writes(&mut cluster, c0, 0, 5);
    run_writes(&mut cluster, c2, 5, 5);
    let r2 = cluster.replica(2);
    let bound = durable_bound(&cluster, r2);
    cluster.crash(r2);
    run_writes(&mut cluster, c0, 10, 10);
    assert!(event(&cluster, cluster.replica(0), "revocation") + event(&cluster, cluster.replica(1), "revocation") > 0);
    cluster.restart(r2);
    assert!(cluster.node(r2).is_recovering(), "restarted, it waits for a snapshot");
    assert!(cluster.run_until(500 * MS, |c| !c.node(r2).is_recovering()), "it recovered: {}", cluster.status(r2));
    assert!(replica(&cluster, 2).executed() >= bound, "the snapshot covers every slot it may have acted on");
    assert!(event(&cluster, r2, "state_transfer") >= 1);
    cluster.keep_sent_log();
    let executed_before = cluster.stats(r2).executed;
    run_writes(&mut cluster, c2, 20, 10);
    cluster.run_for(20 * MS);
    assert!(cluster.stats(r2).executed >= executed_before + 10, "it executes the new writes");
    assert_eq!(replica(&cluster, 2).executed(), replica(&cluster, 0).executed(), "{}", cluster.status(r2));
    assert_eq!(digests(&cluster, 2), digests(&cluster, 0), "same state as replica 0");
    // Its client's writes were suggested by it, at round 0 in its own slots above its old bound.
    let own_proposals: Vec<u64> = cluster
        .sent_log()
        .iter()
        .filter(|e| e.from == r2)
        .filter_map(|e| match &e.message {
            Message::Propose { ballot, entries } if ballot.round == 0 => Some(entries.iter().map(|(s, _)| *s)),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(!own_proposals.is_empty(), "it proposes again");
    assert!(own_proposals.iter().all(|&slot| slot > bound && replica(&cluster, 2).owner(slot) == 2));
}

#[test]
fn a_restarted_replica_never_accepts_against_a_durable_promise() {
    // Goal: a promise survives a crash. Method: replica 2 promises ballot (5, 1) for replica
    // 0's slots around slot 64 (a prepare injected from replica 1); its durable bound covers
    // the range before the promise leaves. It crashes and restarts; a round-0 proposal of
    // replica 0 for slot 64 (below the promise) then gets no acceptance, neither while it
    // recovers nor once it has recovered.
    let mut cluster = Cluster::<Mencius>::new(3, 1, config());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 3);
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    cluster.keep_sent_log();
    let slot = 64;
    assert_eq!(replica(&cluster, 2).owner(slot), 0);
    let prepare = Message::Prepare { ballot: Ballot { round: 5, rank: 1 }, owner: 0, from: slot, until: slot + 30 };
    // The range lies beyond replica 2's bound: the first prepare only starts a write of a new
    // bound (and is refused); the revoker's retry, after it, gets the promise.
    cluster.inject(r1, r2, prepare.clone());
    cluster.run_for(MS);
    assert!(!cluster.sent_log().iter().any(|e| e.from == r2 && matches!(e.message, Message::Promise { .. })));
    cluster.inject(r1, r2, prepare);
    assert!(cluster.run_until(20 * MS, |c| {
        c.sent_log().iter().any(|e| e.from == r2 && e.to == r1 && matches!(e.message, Message::Promise { .. }))
    }));
    assert!(durable_bound(&cluster, r2) >= slot + 30, "the promise's range is durable");
    cluster.crash(r2);
    cluster.restart(r2);
    let propose = || Message::Propose { ballot: Ballot { round: 0, rank: 0 }, entries: vec![(slot, Value::NoOp)] };
    cluster.inject(r0, r2, propose());
    cluster.run_for(MS);
    assert!(cluster.run_until(500 * MS, |c| !c.node(r2).is_recovering()), "recovered: {}", cluster.status(r2));
    cluster.inject(r0, r2, propose());
    cluster.run_for(5 * MS);
    let accepted = |e: &&crate::testkit::Envelope<Mencius>| {
        e.from == r2
            && matches!(&e.message, Message::Accepted { ballot, slots } if ballot.round == 0 && slots.contains(&slot))
    };
    assert!(!cluster.sent_log().iter().any(|e| accepted(&e)), "no acceptance below the promise");
}

#[test]
fn no_acceptance_leaves_above_the_durable_bound() {
    // Goal: a replica acts on a slot only once its durable bound covers it (what a restart
    // relies on). Method: replica 1's writes stay pending (manual durability) while writes go
    // on; every acceptance it sends names a slot at or below its durable bound, though the
    // others go beyond it; once flushed, its bound moves on and it accepts again.
    let mut cluster = Cluster::<Mencius>::new(3, 1, config());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 2);
    let r1 = cluster.replica(1);
    cluster.set_manual_durability(r1, true);
    cluster.keep_sent_log();
    let bound = durable_bound(&cluster, r1);
    run_writes(&mut cluster, client, 2, 40);
    let slots: Vec<u64> = cluster
        .sent_log()
        .iter()
        .filter(|e| e.from == r1)
        .filter_map(|e| if let Message::Accepted { slots, .. } = &e.message { Some(slots.clone()) } else { None })
        .flatten()
        .collect();
    assert!(slots.iter().all(|&slot| slot <= bound), "acceptances {slots:?} above the bound {bound}");
    assert!(replica(&cluster, 0).executed() > bound, "the others went beyond it");
    assert!(event(&cluster, r1, "bound_wait") > 0);
    cluster.set_manual_durability(r1, false);
    run_writes(&mut cluster, client, 42, 5);
    assert!(durable_bound(&cluster, r1) > bound, "a new bound is durable");
}

#[test]
fn a_replica_behind_the_kept_log_fetches_a_snapshot() {
    // Goal: a replica that lags more than the others keep (log_keep) is not stuck. Method:
    // log_keep = 16; replica 2 is cut off while 60 writes commit (the others truncate what it
    // misses, revoking its slots); after healing, its query is answered with a snapshot and it
    // ends with the others' state.
    let mut cluster = Cluster::<Mencius>::new(3, 1, Config { log_keep: 16, ..config() });
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 0, 3);
    let r2 = cluster.replica(2);
    cluster.isolate(r2);
    run_writes(&mut cluster, client, 3, 60);
    cluster.heal(r2);
    run_writes(&mut cluster, client, 63, 3);
    cluster.run_for(100 * MS);
    assert!(event(&cluster, r2, "state_transfer") >= 1, "{}", cluster.status(r2));
    assert_eq!(replica(&cluster, 2).executed(), replica(&cluster, 0).executed(), "{}", cluster.status(r2));
    assert_eq!(digests(&cluster, 2), digests(&cluster, 0));
}
