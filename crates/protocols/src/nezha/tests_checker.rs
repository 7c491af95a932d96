//! Tests of the global position-agreement checker (`checker.rs`): hand-made histories it must
//! reject and accept, and real replicas whose reports it accepts (normal case, view change,
//! rejoin, random faults).

use super::checker::{Observation, PositionAgreement, Violation};
use super::messages::Message;
use super::{Config, Nezha};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{ClientId, Command, NodeId, RequestId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn request(client: u64, number: u64) -> RequestId {
    RequestId { client: ClientId(client), number }
}

fn committed(position: u64, client: u64, number: u64) -> Observation {
    Observation::Committed { position, id: request(client, number) }
}

/// Clients are their own DOM senders in the kit; the kit delivers at once, so keep the leader's
/// early release (App. D.2.4) out of the way, as `tests.rs` does.
fn config() -> Config {
    Config { proxies: 0, leader_release_ahead_ns: 1_000_000, ..Config::default() }
}

#[test]
fn position_agreement_rejects_two_requests_at_one_position() {
    // Goal (STYLE 15): the checker can fail. Method: n0 commits c1#1 at position 1 and c2#1 at
    // position 2; n1, after a view change, reports c3#1 committed at position 2.
    let mut checker = PositionAgreement::new();
    assert_eq!(checker.check(NodeId(0), &committed(1, 1, 1)), Ok(()));
    assert_eq!(checker.check(NodeId(0), &committed(2, 2, 1)), Ok(()));
    let violation = checker.check(NodeId(1), &committed(2, 3, 1)).expect_err("two requests at position 2");
    let expected =
        Violation::DifferentRequests { position: 2, node: NodeId(1), reported: request(3, 1), earlier: request(2, 1) };
    assert_eq!(violation, expected);
    assert!(violation.to_string().contains("at position 2"), "{violation}");
}

#[test]
fn position_agreement_accepts_agreeing_replicas_repeats_and_a_retry_at_two_positions() {
    // Goal: the passing case. Method: three replicas report the same positions in different
    // orders, one twice (a rejoin reports again), and one request sits at two positions (a
    // retry with a new deadline, skipped at execution).
    let mut checker = PositionAgreement::new();
    let log = [committed(1, 1, 1), committed(2, 2, 1), committed(3, 1, 1)];
    for node in 0..3 {
        for fact in log.iter().cycle().skip(node).take(3) {
            assert_eq!(checker.check(NodeId(node as u32), fact), Ok(()));
        }
    }
    for fact in &log {
        assert_eq!(checker.check(NodeId(2), fact), Ok(()));
    }
    assert_eq!(checker.len(), 3);
    assert_eq!(checker.unchecked(), 0);
}

#[test]
fn position_agreement_forgets_positions_below_its_window() {
    // Goal: memory stays bounded, and what was forgotten is counted, not misjudged. Method: a
    // window of 3 positions takes positions 1..=5; a conflicting report at 2 passes unchecked,
    // one at 3 is still caught.
    let mut checker = PositionAgreement::with_window(3);
    for position in 1..=5 {
        assert_eq!(checker.check(NodeId(0), &committed(position, 1, position)), Ok(()));
    }
    assert_eq!(checker.len(), 3);
    assert_eq!(checker.check(NodeId(1), &committed(2, 9, 9)), Ok(()));
    assert_eq!(checker.unchecked(), 1);
    assert!(checker.check(NodeId(1), &committed(3, 9, 9)).is_err(), "position 3 is still remembered");
}

fn is_sync_ack(envelope: &Envelope<Nezha>) -> bool {
    matches!(envelope.message, Message::SyncAck { .. })
}

#[test]
fn synced_positions_are_reported_once_the_commit_point_covers_them() {
    // Goal: a replica reports a position when it becomes final, not when it is synced, and
    // each replica reports it once in the normal case. Method: every SyncAck is lost while five
    // writes commit on the fast path and the followers sync them: the leader's commit point
    // stays at 0 and nothing is reported. Then acknowledgements flow: the leader's commit point
    // moves, its next sync carries it, and each of the three replicas reports the five
    // positions.
    let config = Config { sync_batch_min: 1, ..config() };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let (client, follower) = (cluster.client(0), cluster.replica(1));
    for i in 0..5 {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        for _ in 0..1_000 {
            cluster.drop_where(is_sync_ack);
            cluster.deliver_all_where(|envelope| !is_sync_ack(envelope));
            if cluster.result(op).is_some() {
                break;
            }
            cluster.advance(50_000);
        }
        assert!(cluster.result(op).is_some(), "write {i} commits on the fast path");
    }
    for _ in 0..20 {
        cluster.drop_where(is_sync_ack);
        cluster.deliver_all_where(|envelope| !is_sync_ack(envelope));
        cluster.advance(50_000);
    }
    assert!(cluster.status(follower).contains("sync=5 commit=0"), "{}", cluster.status(follower));
    assert_eq!(cluster.observations(), 0, "synced but not committed: nothing is final yet");
    cluster.run_for(20_000_000);
    assert!(cluster.status(follower).contains("commit=5"), "{}", cluster.status(follower));
    assert_eq!(cluster.observations(), 3 * 5, "three replicas, five positions, once each");
}

#[test]
fn real_replicas_report_positions_the_checker_accepts_through_a_view_change_and_a_rejoin() {
    // Goal: reports stay consistent across a view change (the new leader's merged log) and a
    // rejoin (the old leader adopts the new view's log and reports its positions again).
    // Method: 10 writes, the leader crashes, 5 writes in view 1, the old leader restarts and
    // rejoins, 5 more writes; the kit's checker panics on any disagreement.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let (client, leader) = (cluster.client(0), cluster.replica(0));
    let commit = |cluster: &mut Cluster<Nezha>, count: usize| {
        for i in 0..count {
            let op = cluster.submit(client, Command::append("k", format!("{i},")));
            assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()), "op {i} commits");
        }
        cluster.run_for(5_000_000);
    };
    commit(&mut cluster, 10);
    let before_crash = cluster.observations();
    assert!(before_crash > 0, "replicas reported their commits");
    cluster.crash(leader);
    commit(&mut cluster, 5);
    assert!(
        cluster.status(cluster.replica(1)).contains("view=1 normal leader"),
        "{}",
        cluster.status(cluster.replica(1))
    );
    cluster.restart(leader);
    assert!(cluster.run_until(100_000_000, |c| c.status(leader).contains("normal")), "{}", cluster.status(leader));
    let after_rejoin = cluster.observations();
    commit(&mut cluster, 5);
    assert!(cluster.status(leader).contains("commit=20"), "{}", cluster.status(leader));
    assert!(after_rejoin > before_crash, "the view change and the rejoin reported positions");
    assert!(cluster.observations() > after_rejoin, "the rejoined replica reports new commits");
}

/// A short run under random faults, checked by the global checker (the kit panics on a
/// violation): random deliveries, drops, crashes and restarts (rejoins) of one replica at a
/// time, time passing and submissions. Returns the observations the checker accepted and the
/// replicas' event counters.
fn random_faults(seed: u64, steps: u64) -> (u64, Events) {
    let config = Config { checkpoint_interval: 8, sync_batch_min: 4, ..config() };
    let mut cluster: Cluster<Nezha> = Cluster::with_seed(3, 4, config, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (replicas, clients) = (cluster.replicas(), cluster.clients());
    for step in 0..steps {
        let roll = rng.random_range(0..1_000u32);
        let pending = cluster.pending_count();
        let replica = replicas[rng.random_range(0..replicas.len())];
        if roll < 3 && !cluster.is_up(replica) {
            cluster.restart(replica);
        } else if roll < 6 && replicas.iter().all(|&r| cluster.is_up(r) && !cluster.node(r).is_recovering()) {
            cluster.crash(replica);
        } else if roll < 50 && pending > 0 {
            let id = cluster.pending().nth(rng.random_range(0..pending)).expect("in range").id;
            cluster.drop_where(|e| e.id == id);
        } else if roll < 200 {
            let client = clients[rng.random_range(0..clients.len())];
            if cluster.outstanding(client).is_none() {
                cluster.submit(client, Command::set(format!("k{}", step % 5), format!("{step}")));
            }
        } else if roll < 320 || pending == 0 {
            cluster.advance(rng.random_range(0..400_000));
        } else {
            let id = cluster.pending().nth(rng.random_range(0..pending)).expect("in range").id;
            cluster.deliver(id);
        }
    }
    (cluster.observations(), events(&cluster))
}

/// Event counters summed over every incarnation of every replica.
type Events = BTreeMap<&'static str, u64>;

fn events(cluster: &Cluster<Nezha>) -> Events {
    let mut events = Events::new();
    for replica in cluster.replicas() {
        for (&name, &count) in &cluster.total_stats(replica).events {
            *events.entry(name).or_default() += count;
        }
    }
    events
}

/// Seeds of the random-fault runs of the real protocol: `ORDO_CHAOS_SEEDS` (for long
/// exploratory runs), else `default`.
fn chaos_seeds(default: u64) -> u64 {
    std::env::var("ORDO_CHAOS_SEEDS").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

#[test]
fn random_faults_keep_committed_positions_in_agreement() {
    // Goal: under message loss, reordering, crashes, rejoins, view changes, state transfers and
    // checkpoints, every report the real replicas make agrees, and those mechanisms are
    // reached. Method: 20 seeds (or `ORDO_CHAOS_SEEDS`) of `random_faults`; sum the replicas'
    // event counters.
    let mut reached = Events::new();
    for seed in 0..chaos_seeds(20) {
        let (observations, events) = random_faults(seed, 20_000);
        assert!(observations > 0, "seed {seed}: nothing observed");
        events.into_iter().for_each(|(name, count)| *reached.entry(name).or_default() += count);
    }
    for goal in ["view_change", "rejoin", "state_transfer", "checkpoint"] {
        assert!(reached.get(goal).is_some_and(|&n| n > 0), "{goal} never happened: {reached:?}");
    }
}
