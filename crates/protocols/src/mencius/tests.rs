//! Mencius scenarios on the testkit: rotating slots, skips, and revocation of a crashed owner.

use super::replica::Replica;
use super::{Config, Mencius};
use crate::testkit::Cluster;
use ordo_core::{Command, NodeId};

const MS: u64 = 1_000_000;

fn run_writes(cluster: &mut Cluster<Mencius>, client: NodeId, count: u64) {
    for i in 0..count {
        let op = cluster.submit(client, Command::set(format!("k{i}"), format!("v{i}")));
        assert!(cluster.run_until(100 * MS, |c| c.result(op).is_some()), "write {i} at {client} completed");
    }
}

fn event(cluster: &Cluster<Mencius>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

#[test]
fn every_replica_proposes_and_idle_ones_skip() {
    // Goal: slots rotate; an owner with nothing to propose skips, so the others go on.
    let mut cluster = Cluster::<Mencius>::new(3, 3, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 10);
    assert!(event(&cluster, cluster.replica(1), "skip") + event(&cluster, cluster.replica(2), "skip") > 0);
    for c in 0..3 {
        let client = cluster.client(c);
        run_writes(&mut cluster, client, 3);
    }
    cluster.run_for(5 * MS);
    let executed: Vec<u64> = (0..3).map(|r| cluster.node_as::<Replica>(cluster.replica(r)).executed()).collect();
    assert!(executed.iter().all(|&e| e == executed[0]), "all replicas executed the same slots: {executed:?}");
    for r in 0..3 {
        assert_eq!(cluster.stats(cluster.replica(r)).executed, 19);
    }
}

#[test]
fn a_crashed_owner_is_revoked() {
    // Goal: a crashed replica's slots are revoked (no-ops chosen by Paxos at a higher ballot),
    // so the others keep committing.
    let mut cluster = Cluster::<Mencius>::new(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    cluster.crash(cluster.replica(2));
    run_writes(&mut cluster, client, 10);
    let revocations =
        event(&cluster, cluster.replica(0), "revocation") + event(&cluster, cluster.replica(1), "revocation");
    assert!(revocations > 0);
}
