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

#[test]
fn an_unchosen_proposal_goes_out_again_backed_off_to_those_that_have_not_accepted_it() {
    // Goal (issue 20): an owner resends a proposal not yet chosen after 2, 4, 8 and then 16
    // ticks rather than at every tick, only to the replicas that have not accepted it, and a
    // client's retry of a request it holds is not proposed again (with megabyte values, each
    // resend and each new proposal sent the megabytes to every replica once more). Method: 5
    // replicas; the client's request reaches its home replica, of whose peers only one stays
    // connected, so the proposal gets 2 of the 3 acceptances it needs; 60 ticks (1 ms each).
    use super::messages::Message;
    let mut cluster = Cluster::<Mencius>::new(5, 1, Config::default());
    let client = cluster.client(0);
    cluster.keep_sent_log();
    let op = cluster.submit(client, Command::set("k", "v"));
    let request = cluster.sent_log().iter().find(|e| matches!(e.message, Message::Request(_))).expect("sent").clone();
    let home = request.to;
    let peers: Vec<NodeId> = cluster.replicas().into_iter().filter(|&r| r != home).collect();
    let (helper, cut) = (peers[0], &peers[1..]);
    for &node in cut {
        cluster.isolate(node);
    }
    cluster.run_for(60 * MS);
    let proposes_to = |to: NodeId| {
        cluster
            .sent_log()
            .iter()
            .filter(|e| e.from == home && e.to == to && matches!(e.message, Message::Propose { .. }))
            .count()
    };
    assert_eq!(proposes_to(helper), 1, "the replica that accepted it gets it once");
    for &node in cut {
        // Sent at 0, then resent at ticks 2, 6, 14, 30 and 46: six in 60 ticks (sixty without
        // the back-off).
        let sent = proposes_to(node);
        assert!((5..=7).contains(&sent), "{node} got the proposal {sent} times in 60 ticks");
    }
    assert!(cluster.result(op).is_none(), "two acceptances of three needed: nothing is chosen");

    // The client's retry of the request, back at its home replica, is not proposed again.
    let sent_before = cluster.sent_log().len();
    cluster.inject(client, home, request.message.clone());
    cluster.deliver_all_where(|e| e.to == home && e.from == client);
    let proposed_again = cluster.sent_log()[sent_before..]
        .iter()
        .any(|e| e.from == home && matches!(e.message, Message::Propose { .. }));
    assert!(!proposed_again, "a request held is not proposed again");
    assert_eq!(cluster.stats(home).dropped.get("request held already"), Some(&1));

    // Reconnected, the proposal is chosen and the client answered.
    cluster.heal_all();
    assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "chosen once the replicas are back");
}

#[test]
fn a_revoked_owner_still_silent_is_revoked_again_at_once() {
    // Goal: once a revocation took a crashed owner's slots and nothing came from it since, a
    // stall on its later slots revokes them at the next tick, not after another stall timeout
    // (with real processes' 1-2 s timeout, a SIGKILLed replica's slots were revoked stretch after
    // stretch and progress resumed 10.7 s after the kill). Method: revocations that cover only
    // two of the owner's slots ahead, so that 40 writes after the crash need many of them; the
    // simulated time they take is compared with the stall timeout.
    let config = Config { revoke_ahead: 2, ..Config::default() };
    let timeout = config.revoke_timeout_ns;
    let mut cluster = Cluster::<Mencius>::new(3, 1, config);
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    cluster.crash(cluster.replica(2));
    let started = cluster.now_ns();
    run_writes(&mut cluster, client, 40);
    let elapsed = cluster.now_ns() - started;
    let revocations =
        event(&cluster, cluster.replica(0), "revocation") + event(&cluster, cluster.replica(1), "revocation");
    assert!(revocations >= 5, "the writes needed several revocations ({revocations})");
    // One stall timeout (up to twice the configured one) for the first revocation, then a tick
    // or two per revocation: 40 ms here, 189 ms when every revocation waits a stall timeout.
    assert!(elapsed < 8 * timeout, "40 writes took {} ms after the crash", elapsed / MS);
}
