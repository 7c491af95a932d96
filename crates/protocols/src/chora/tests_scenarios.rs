//! Scripted tests of the spec §12 scenarios that `tests.rs` does not cover: view-change races
//! (16–20), the recover discipline (23), lost acks (8), a lagging replica (14), spurious
//! coordination timeouts (28) and the one-send-per-round rule (3). Node ids: replicas first (n0..), then clients; client `i`
//! sends to replica `(replicas + i) % replicas` first. The global checker (§8.3) runs after
//! every step.

use super::messages::{Message, Value};
use super::replica::{Replica, ViewRole};
use super::{Chora, Config};
use crate::testkit::Cluster;
use ordo_core::{Command, CommandResult, NodeId, Outbox};

const MS: u64 = 1_000_000;

pub(super) fn replica(cluster: &Cluster<Chora>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn event(cluster: &Cluster<Chora>, node: NodeId, name: &str) -> u64 {
    cluster.total_stats(node).events.get(name).copied().unwrap_or(0)
}

fn write(cluster: &mut Cluster<Chora>, client: NodeId, key: &str, value: &str) {
    let op = cluster.submit(client, Command::set(key.to_string(), value.to_string()));
    assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "SET {key} completed");
}

fn read(cluster: &mut Cluster<Chora>, client: NodeId, key: &str) -> CommandResult {
    let op = cluster.submit(client, Command::get(key.to_string()));
    assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "GET {key} completed");
    cluster.result(op).expect("completed").clone()
}

pub(super) fn is_proposal(message: &Message) -> bool {
    matches!(message, Message::Pulse(p) if matches!(&p.proposal, Some((_, e)) if matches!(e.value, Value::Requests(_))))
}

/// Advances time in 10 µs steps until `proposer` has a proposal in the network.
pub(super) fn advance_until_proposal(cluster: &mut Cluster<Chora>, proposer: NodeId) {
    let mut waited = 0;
    while !cluster.pending().any(|e| e.from == proposer && is_proposal(&e.message)) {
        cluster.advance(10_000);
        waited += 1;
        assert!(waited < 1_000, "{proposer} proposed");
    }
}

#[test]
#[should_panic(expected = "one multicast per round")]
fn a_second_multicast_in_one_round_is_refused() {
    // Scenario 3: everything rides on one pulse per round; a second multicast in the same
    // round is a bug the replica refuses (it asserts), whatever the caller.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config::default());
    let client = cluster.client(0);
    write(&mut cluster, client, "a", "1");
    let r0 = cluster.replica(0);
    let node = cluster.node_as_mut::<Replica>(r0);
    let mut out = Outbox::<Chora>::default();
    for _ in 0..2 {
        let pulse = node.build_pulse().expect("a schedule to speak in");
        node.send_pulse(pulse, &mut out);
    }
}

#[test]
fn lost_ack_only_pulses_are_made_up_by_later_cumulative_acks() {
    // Scenario 8: replica 2's ack-only pulses are dropped for a while; its later pulses'
    // cumulative ack makes up for them (no ack is sent again), and commits go on.
    let mut cluster = Cluster::<Chora>::new(3, 3, Config::default());
    let (r0, r2) = (cluster.replica(0), cluster.replica(2));
    let client = cluster.client(2);
    write(&mut cluster, client, "w", "0");
    let mut dropped = 0;
    for i in 1..=5 {
        let op = cluster.submit(client, Command::set("w", i.to_string()));
        let mut steps = 0;
        while cluster.result(op).is_none() {
            dropped +=
                cluster.drop_where(|e| e.from == r2 && matches!(&e.message, Message::Pulse(p) if p.proposal.is_none()));
            if !cluster.deliver_next() {
                cluster.advance(50_000);
            }
            steps += 1;
            assert!(steps < 100_000, "write {i} completed");
        }
    }
    assert!(dropped > 0, "some of replica 2's ack-only pulses were lost");
    cluster.run_for(5 * MS);
    let r2_ack = replica(&cluster, 2).acks().last_ack;
    assert!(replica(&cluster, 0).acks().acked[2] >= r2_ack.saturating_sub(3), "a later pulse carried the ack");
    let reader = cluster.client(0);
    assert_eq!(read(&mut cluster, reader, "w"), CommandResult::Value("5".into()));
    assert_eq!(replica(&cluster, 0).view(), 0, "no view change");
    let _ = r0;
}

#[test]
fn a_briefly_cut_off_replica_skips_ahead_without_a_view_change() {
    // Scenario 14 (with its messages lost rather than queued): replica 2 is cut off for 50
    // rounds, well below the view-change timeout; commits wait for its slots; once back, it
    // skips up to the latest proposed slot, the backlog commits, and the view stays 0.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config::default());
    let client = cluster.client(0);
    write(&mut cluster, client, "k", "0");
    let r2 = cluster.replica(2);
    let skips_before = event(&cluster, r2, "skip");
    let commit_before = replica(&cluster, 0).acks().last_commit;
    cluster.isolate(r2);
    let op = cluster.submit(client, Command::set("k", "1"));
    cluster.run_for(50 * 50_000);
    assert!(cluster.result(op).is_none(), "commits block while replica 2's slots are empty");
    assert!(replica(&cluster, 0).acks().last_commit <= commit_before + 3);
    cluster.heal(r2);
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "the backlog commits");
    assert!(event(&cluster, r2, "skip") > skips_before, "replica 2 skipped ahead");
    for rank in 0..3 {
        assert_eq!(replica(&cluster, rank).view(), 0, "no view change at replica {rank}");
    }
}

#[test]
fn a_proposal_that_reached_one_replica_before_its_proposer_crashed_commits_at_most_once() {
    // Scenario 16: replica 2's proposal reaches replica 0 only, then replica 2 crashes. The
    // view change keeps it or truncates it; either way the command executes at most once, the
    // client's retry gets an answer, and the survivors agree.
    let mut cluster = Cluster::<Chora>::new(3, 3, Config::default());
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let client = cluster.client(2);
    write(&mut cluster, client, "p", "0");
    let op = cluster.submit(client, Command::append("p", "+"));
    cluster.deliver_all();
    advance_until_proposal(&mut cluster, r2);
    cluster.drop_where(|e| e.from == r2 && e.to != r0);
    cluster.deliver_all_where(|e| e.from == r2);
    cluster.crash(r2);
    assert!(cluster.run_until(300 * MS, |c| c.result(op).is_some()), "the retried command completed");
    let reader = cluster.client(0);
    let value = read(&mut cluster, reader, "p");
    assert_eq!(value, CommandResult::Value("0+".into()), "executed exactly once");
    cluster.run_for(5 * MS);
    let (a, b) = (replica(&cluster, 0), replica(&cluster, 1));
    let common = a.acks().last_commit.min(b.acks().last_commit);
    let from = a.log().first().max(b.log().first());
    for slot in from..=common {
        assert_eq!(a.log().get(slot).map(|e| e.value_id()), b.log().get(slot).map(|e| e.value_id()), "slot {slot}");
    }
    let _ = r1;
}

#[test]
fn a_slot_committed_at_one_replica_survives_its_crash() {
    // Scenario 17: replica 0 commits (and answers) a write with acks from itself and one
    // other, then crashes before the others learn of the commit; the next view keeps the
    // command (Claim 14), and a read at the survivors sees it.
    let mut cluster = Cluster::<Chora>::new(3, 3, Config::default());
    let client = cluster.client(0);
    write(&mut cluster, client, "c", "0");
    let op = cluster.submit(client, Command::set("c", "1"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "replica 0 answered");
    let r0 = cluster.replica(0);
    let slot = replica(&cluster, 0).acks().last_commit;
    assert!(replica(&cluster, 1).acks().last_commit < slot || replica(&cluster, 2).acks().last_commit < slot);
    cluster.drop_where(|e| e.from == r0);
    cluster.crash(r0);
    let reader = cluster.client(1);
    assert_eq!(read(&mut cluster, reader, "c"), CommandResult::Value("1".into()));
}

#[test]
fn concurrent_candidates_of_one_view_elect_at_most_one_initiator() {
    // Scenario 18: replica 2 crashes; replicas 0 and 1 both time out before hearing from each
    // other and run for view 1. Each voted for itself, so neither gets a second vote in view
    // 1; a retry at a higher view elects one initiator, and writes go on. Both have work
    // pending (a client each), and no message moves until both are candidates.
    let mut cluster = Cluster::<Chora>::new(3, 2, Config::default());
    let client = cluster.client(0);
    write(&mut cluster, client, "r", "0");
    cluster.crash(cluster.replica(2));
    let op = cluster.submit(client, Command::set("r", "1"));
    let other = cluster.client(1);
    let op1 = cluster.submit(other, Command::set("q", "1"));
    cluster.deliver_all();
    let both =
        |c: &Cluster<Chora>| (0..2).all(|r| replica(c, r).view() == 1 && replica(c, r).role() == ViewRole::Candidate);
    let mut waited = 0;
    while !both(&cluster) {
        cluster.advance(MS);
        waited += 1;
        assert!(
            waited < 100,
            "both ran for view 1: {} / {}",
            cluster.status(cluster.replica(0)),
            cluster.status(cluster.replica(1))
        );
    }
    let done = |c: &Cluster<Chora>| c.result(op).is_some() && c.result(op1).is_some();
    assert!(cluster.run_until(300 * MS, done), "a later view elected an initiator");
    let (a, b) = (replica(&cluster, 0), replica(&cluster, 1));
    assert_eq!(a.view(), b.view());
    assert!(a.view() >= 2, "no initiator in view 1");
    assert_eq!([a.role(), b.role()].iter().filter(|&&r| r == ViewRole::Initiator).count(), 1);
}

#[test]
fn a_voter_refuses_a_stale_candidate_and_runs_itself() {
    // Scenario 19: a candidate whose log is behind a voter's (Definition 1) gets no vote; the
    // voter runs itself at a higher view after a random back-off (§6.1), and the initiator
    // elected holds the newer log.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config::default());
    let client = cluster.client(0);
    for i in 0..3 {
        write(&mut cluster, client, "s", &i.to_string());
    }
    let (r0, r2) = (cluster.replica(0), cluster.replica(2));
    cluster.keep_sent_log();
    cluster.inject(r2, r0, Message::ViewChangeRequest { view: 1, last_append: 1, last_append_view: 0 });
    cluster.deliver_first(|e| e.to == r0 && matches!(e.message, Message::ViewChangeRequest { .. }));
    let voted = cluster.sent_log().iter().any(|e| e.from == r0 && matches!(e.message, Message::ViewChangeReply { .. }));
    assert!(!voted, "no vote for the stale candidate");
    assert_eq!(event(&cluster, r0, "refused_stale_candidate"), 1);
    assert_eq!(replica(&cluster, 0).view(), 0, "replica 0 runs only after a random back-off");
    cluster.run_for(Config::default().view_change_timeout_ns + 2 * Config::default().coordination_ns);
    assert!(event(&cluster, r0, "candidacy") >= 1, "replica 0 ran after its back-off");
    assert!(replica(&cluster, 0).view() >= 2, "replica 0 runs at a higher view");
    write(&mut cluster, client, "s", "3");
    assert_eq!(read(&mut cluster, client, "s"), CommandResult::Value("3".into()));
    assert!(replica(&cluster, 0).view() >= 2);
}

#[test]
fn an_initiator_that_dies_before_its_view_init_leaves_is_replaced() {
    // Scenario 20 (5 replicas, f = 2): replica 4 crashes; the first initiator elected dies
    // before its view-init reaches anyone. The survivors elect a higher view; nothing commits
    // in the dead view (no entry of it in any log), and the write completes.
    let mut cluster = Cluster::<Chora>::new(5, 1, Config::default());
    let client = cluster.client(0);
    write(&mut cluster, client, "d", "0");
    cluster.crash(cluster.replica(4));
    let op = cluster.submit(client, Command::set("d", "1"));
    let initiator = |c: &Cluster<Chora>| (0..4).find(|&r| replica(c, r).role() == ViewRole::Initiator);
    assert!(cluster.run_until(300 * MS, |c| initiator(c).is_some()), "an initiator was elected");
    let dead = initiator(&cluster).expect("elected");
    let dead_view = replica(&cluster, dead).view();
    let node = cluster.replica(dead);
    cluster.drop_where(|e| e.from == node);
    cluster.crash(node);
    assert!(cluster.run_until(500 * MS, |c| c.result(op).is_some()), "the write completed in a later view");
    cluster.run_for(5 * MS);
    for rank in (0..4).filter(|&r| r != dead) {
        let r = replica(&cluster, rank);
        assert!(r.view() > dead_view);
        let (first, last) = (r.log().first(), r.log().last_slot());
        assert!(
            (first..=last).all(|s| r.log().get(s).is_none_or(|e| e.view != dead_view)),
            "no entry of view {dead_view}"
        );
    }
}

#[test]
fn spurious_coordination_timeouts_stay_safe_and_bounded() {
    // Scenario 28: the coordination timer (20 µs) fires well below the commit latency. Every
    // write completes, the replicas agree, the timer did fire (nacks or re-proposals), and
    // pulses stay at one per replica per round.
    let config = Config { coordination_ns: 20_000, ..Config::default() };
    let mut cluster = Cluster::<Chora>::new(3, 3, config);
    for i in 0..10 {
        for c in 0..3 {
            let client = cluster.client(c);
            write(&mut cluster, client, &format!("t{c}"), &i.to_string());
        }
    }
    cluster.run_for(5 * MS);
    let fired: u64 = (0..3)
        .map(|r| {
            event(&cluster, cluster.replica(r), "coordination_nack")
                + event(&cluster, cluster.replica(r), "coordination_resend")
        })
        .sum();
    assert!(fired > 0, "the short timer fired");
    let executed = cluster.stats(cluster.replica(0)).executed;
    for rank in 1..3 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, executed);
    }
    assert_eq!(executed, 30);
    for rank in 0..3 {
        assert_eq!(replica(&cluster, rank).view(), 0, "no view change");
    }
}

#[test]
fn a_follower_never_recovers_an_unverified_old_slot() {
    // Scenario 23: a follower of a new view holds an old-view entry above its last-ack (its
    // own proposal that nobody acked); asked for it by a nack it does not send it again, since
    // only a verified prefix may be recovered below the view-base (§6.5). Asked for a slot at
    // or below its last-ack, it does. Method: single proposer (replica 0) so its proposals are
    // contiguous; its pulse is dropped; replica 1 (injected) wins view 1 and pulses its
    // view-init with the nacks.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config { proposers: 1, ..Config::default() });
    let client = cluster.client(0);
    write(&mut cluster, client, "u", "0");
    let (r0, r1) = (cluster.replica(0), cluster.replica(1));
    let _op = cluster.submit(client, Command::set("u", "1"));
    cluster.deliver_all();
    advance_until_proposal(&mut cluster, r0);
    cluster.drop_where(|e| e.from == r0);
    let (held, verified) = (replica(&cluster, 0).log().last_append(), replica(&cluster, 0).acks().last_commit);
    assert!(held > verified, "an entry nobody acked");
    cluster.inject(r1, r0, Message::ViewChangeRequest { view: 1, last_append: held + 10, last_append_view: 0 });
    cluster.deliver_all_where(|e| e.to == r0);
    assert_eq!(replica(&cluster, 0).view(), 1);
    assert_eq!(replica(&cluster, 0).acks().last_ack, verified, "a new view starts from the verified prefix");
    let base = held + 11;
    let view_init = super::messages::Entry { view: 1, value: Value::ViewInit { proposers: vec![1] } };
    let pulse = |nack: u64, proposal| {
        Message::Pulse(Box::new(super::messages::Pulse {
            view: 1,
            base,
            ack: base,
            latest_proposed: base,
            proposal,
            skip: None,
            nack: Some((nack, nack)),
            recovers: Vec::new(),
        }))
    };
    cluster.inject(r1, r0, pulse(held, Some((base, view_init))));
    cluster.deliver_all_where(|e| e.to == r0);
    assert!(!replica(&cluster, 0).repair.recovers.contains_key(&held), "no recover above last-ack");
    cluster.inject(r1, r0, pulse(verified, None));
    cluster.deliver_all_where(|e| e.to == r0);
    assert!(replica(&cluster, 0).repair.recovers.contains_key(&verified), "a verified slot is recovered");
}
