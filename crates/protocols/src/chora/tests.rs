//! Scenario tests of spec §12 on the testkit. Node ids with 3 replicas: r0..r2 = n0..n2, then
//! the clients; client `n3 + i` sends to replica `(3 + i) % 3` first. The testkit delivers
//! messages at once, so a round is the only delay.

use super::messages::{Message, Value, ValueId};
use super::replica::{Replica, ViewRole, commit_point};
use super::{Chora, Config, Mode};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{Command, CommandResult, NodeId, Outbox, RequestId};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn cluster(replicas: usize, clients: usize, config: Config) -> Cluster<Chora> {
    Cluster::new(replicas, clients, config)
}

fn replica(cluster: &Cluster<Chora>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn event(cluster: &Cluster<Chora>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

fn is_pulse_with_proposal(envelope: &Envelope<Chora>) -> bool {
    matches!(&envelope.message, Message::Pulse(p) if matches!(&p.proposal, Some((_, e)) if matches!(e.value, Value::Requests(_))))
}

/// The committed values of a replica's log, slot by slot, up to its commit point.
fn committed(replica: &Replica) -> Vec<ValueId> {
    let last = replica.acks().last_commit;
    (replica.log().first()..=last).map(|slot| replica.log().get(slot).expect("held").value_id()).collect()
}

/// Submits `count` writes one after the other at `client`, each run to completion.
fn run_writes(cluster: &mut Cluster<Chora>, client: NodeId, count: u64) {
    for i in 0..count {
        let op = cluster.submit(client, Command::set(format!("k{i}"), format!("v{i}")));
        let done = cluster.run_until(50 * MS, |c| c.result(op).is_some());
        assert!(done, "write {i} at {client} completed");
    }
}

#[test]
fn commit_rule_takes_the_quorum_th_highest_ack() {
    // Scenario 5: acked = [9, 4, 7] with q = 2 commits 7, the longest prefix two replicas hold.
    assert_eq!(commit_point(&[9, 4, 7], 2), 7);
    assert_eq!(commit_point(&[9, 4, 7], 1), 9, "the canary's rule takes our own ack");
    assert_eq!(commit_point(&[3, 3, 0, 8, 1], 3), 3);
}

#[test]
fn a_single_request_commits_in_its_replicas_slot_and_gets_one_reply() {
    // Scenario 1: one request to replica 0 commits at a slot replica 0 owns, executes once at
    // every replica at the same position, and only replica 0 replies.
    let mut cluster = cluster(3, 1, Config::default());
    cluster.keep_sent_log();
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("x", "1"));
    assert!(cluster.run_until(20 * MS, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    cluster.run_for(2 * MS);
    let slot = (1..=replica(&cluster, 0).acks().last_commit)
        .find(|&s| matches!(replica(&cluster, 0).log().get(s).map(|e| &e.value), Some(Value::Requests(_))))
        .expect("the request is in the log");
    assert_eq!(replica(&cluster, 0).schedule().unwrap().owner(slot), Some(0), "replica 0 owns the slot");
    for rank in 0..3 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 1, "executed once at replica {rank}");
        assert_eq!(committed(replica(&cluster, rank))[slot as usize], committed(replica(&cluster, 0))[slot as usize]);
    }
    let replies: Vec<_> = cluster.sent_log().iter().filter(|e| matches!(e.message, Message::Reply { .. })).collect();
    assert_eq!(replies.len(), 1, "exactly one reply");
    assert_eq!(replies[0].from, cluster.replica(0));
}

#[test]
fn all_replicas_propose_in_parallel_and_logs_agree() {
    // Scenario 2: clients at every replica; each replica pulses at most once per round (the
    // replica asserts it), the logs are identical and every command commits.
    let mut cluster = cluster(3, 3, Config { batch_max: 1, ..Config::default() });
    let mut ops = Vec::new();
    for round in 0..20 {
        for c in 0..3 {
            let client = cluster.client(c);
            if cluster.outstanding(client).is_none() {
                ops.push(cluster.submit(client, Command::set(format!("k{c}"), format!("{round}"))));
            }
        }
        cluster.run_for(200_000);
    }
    cluster.run_for(5 * MS);
    assert!(ops.iter().all(|&op| cluster.result(op).is_some()), "every command committed");
    let reference = committed(replica(&cluster, 0));
    for rank in 1..3 {
        let other = committed(replica(&cluster, rank));
        let common = reference.len().min(other.len());
        assert_eq!(reference[..common], other[..common], "replica {rank}'s log matches");
    }
    let owners: std::collections::BTreeSet<u32> = (1..=replica(&cluster, 0).acks().last_commit)
        .filter(|&s| matches!(replica(&cluster, 0).log().get(s).unwrap().value, Value::Requests(_)))
        .map(|s| replica(&cluster, 0).schedule().unwrap().owner(s).unwrap())
        .collect();
    assert_eq!(owners.len(), 3, "every replica proposed commands");
}

#[test]
fn idle_proposers_skip_and_do_not_block() {
    // Scenario 4: only replica 0 gets requests; replicas 1 and 2 give up their slots with
    // skips, and replica 0's commands keep committing.
    let mut cluster = cluster(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 20);
    assert!(event(&cluster, cluster.replica(1), "skip") > 0);
    assert!(event(&cluster, cluster.replica(2), "skip") > 0);
}

#[test]
fn a_proposal_dropped_on_one_link_is_nacked_and_recovered() {
    // Scenario 6: replica 1's proposal to replica 2 is lost; replica 2 keeps later slots, its
    // coordination timer nacks the gap, replica 1 recovers it, and the logs end identical.
    let mut cluster = cluster(3, 3, Config { batch_max: 1, ..Config::default() });
    let (r1, r2) = (cluster.replica(1), cluster.replica(2));
    let client = cluster.client(1);
    assert_eq!(client, NodeId(4));
    let op = cluster.submit(client, Command::set("a", "1"));
    // Let the round go by until replica 1's pulse with the proposal is in the network.
    assert!(
        cluster.run_until(5 * MS, |c| c.pending().any(|e| e.from == r1 && e.to == r2 && is_pulse_with_proposal(e)))
    );
    let dropped = cluster.drop_where(|e| e.from == r1 && e.to == r2 && is_pulse_with_proposal(e));
    assert_eq!(dropped, 1);
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()));
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    cluster.run_for(5 * MS);
    assert!(event(&cluster, r2, "coordination_nack") + event(&cluster, r2, "nack") > 0, "replica 2 nacked");
    assert!(event(&cluster, r1, "recover") > 0, "replica 1 recovered its proposal");
    let reference = committed(replica(&cluster, 1));
    let other = committed(replica(&cluster, 2));
    let common = reference.len().min(other.len());
    assert_eq!(reference[..common], other[..common]);
}

#[test]
fn a_proposal_lost_to_everyone_is_proposed_again() {
    // Scenario 7: the proposal is lost on every link; the proposer's coordination timer sends
    // the same proposal again and it commits unchanged.
    let mut cluster = cluster(3, 1, Config { batch_max: 1, ..Config::default() });
    let r0 = cluster.replica(0);
    let op = cluster.submit(cluster.client(0), Command::set("b", "2"));
    assert!(cluster.run_until(5 * MS, |c| c.pending().any(|e| e.from == r0 && is_pulse_with_proposal(e))));
    assert_eq!(cluster.drop_where(|e| e.from == r0 && is_pulse_with_proposal(e)), 2);
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()));
    assert!(event(&cluster, r0, "coordination_resend") > 0);
    assert_eq!(event(&cluster, r0, "view_change"), 0, "no view change was needed");
}

#[test]
fn duplicated_messages_change_nothing() {
    // Scenario 9: every message is delivered twice; duplicates are harmless and all commit.
    let mut cluster = cluster(3, 2, Config::default());
    let mut ops = Vec::new();
    for i in 0..10 {
        for c in 0..2 {
            ops.push(cluster.submit(cluster.client(c), Command::append("d", format!("{c}{i}"))));
        }
        for _ in 0..200 {
            let ids: Vec<u64> = cluster.pending().map(|e| e.id).collect();
            for id in ids {
                cluster.duplicate(id);
            }
            cluster.deliver_all();
            cluster.advance(20_000);
            if ops.iter().all(|&op| cluster.result(op).is_some()) {
                break;
            }
        }
    }
    assert!(ops.iter().all(|&op| cluster.result(op).is_some()), "every append committed");
    cluster.run_for(10 * MS);
    for rank in 0..3 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 20, "each append executed once at {rank}");
    }
}

#[test]
fn a_crashed_proposer_is_removed_by_a_view_change() {
    // Scenario 15: replica 2 crashes; commits stop (its slots stay empty) until a view change
    // elects an initiator with f + 1 votes, whose view-init excludes replica 2; then the two
    // remaining proposers go on.
    let mut cluster = cluster(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    cluster.crash(cluster.replica(2));
    run_writes(&mut cluster, client, 5);
    let r0 = replica(&cluster, 0);
    assert!(r0.view() > 0, "a view change happened");
    assert_eq!(r0.schedule().unwrap().proposers, vec![0, 1], "replica 2 was left out");
    assert!(
        event(&cluster, cluster.replica(0), "view_change") + event(&cluster, cluster.replica(1), "view_change") > 0
    );
}

#[test]
fn stale_view_pulses_are_ignored() {
    // Scenario 25: after the view change, a pulse of view 0 is dropped.
    let mut cluster = cluster(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 2);
    cluster.keep_sent_log();
    cluster.run_for(MS);
    let old = cluster
        .sent_log()
        .iter()
        .find(|e| e.from == cluster.replica(2) && e.to == cluster.replica(0) && matches!(e.message, Message::Pulse(_)))
        .expect("replica 2 pulsed")
        .message
        .clone();
    cluster.crash(cluster.replica(2));
    run_writes(&mut cluster, client, 3);
    let view = replica(&cluster, 0).view();
    assert!(view > 0);
    let before = cluster.stats(cluster.replica(0)).dropped.get("pulse of an older view").copied().unwrap_or(0);
    cluster.inject(cluster.replica(1), cluster.replica(0), old);
    cluster.deliver_all();
    let after = cluster.stats(cluster.replica(0)).dropped.get("pulse of an older view").copied().unwrap_or(0);
    assert_eq!(after, before + 1);
    assert_eq!(replica(&cluster, 0).view(), view);
}

#[test]
fn a_retried_request_executes_once_and_gets_the_cached_result() {
    // Scenario 26: the client's request reaches a second replica after it executed; that
    // replica answers from the client table and nothing executes twice.
    let mut cluster = cluster(3, 1, Config::default());
    cluster.keep_sent_log();
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::append("z", "1"));
    assert!(cluster.run_until(20 * MS, |c| c.result(op).is_some()));
    cluster.run_for(2 * MS);
    let request = cluster
        .sent_log()
        .iter()
        .find(|e| matches!(e.message, Message::Request(_)))
        .expect("the client sent its request")
        .message
        .clone();
    cluster.inject(client, cluster.replica(1), request);
    cluster.run_for(2 * MS);
    for rank in 0..3 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 1);
    }
    let replies = cluster
        .sent_log()
        .iter()
        .filter(|e| matches!(e.message, Message::Reply { .. }) && e.from == cluster.replica(1))
        .count();
    assert_eq!(replies, 1, "replica 1 answered the retry from its table");
}

#[test]
fn f_plus_one_crashes_stop_commits_but_break_nothing() {
    // Scenario 27: two of three replicas crash; nothing more commits and the survivor's
    // committed prefix stays.
    let mut cluster = cluster(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    let before = replica(&cluster, 0).acks().last_commit;
    cluster.crash(cluster.replica(1));
    cluster.crash(cluster.replica(2));
    let op = cluster.submit(client, Command::set("q", "1"));
    assert!(!cluster.run_until(100 * MS, |c| c.result(op).is_some()), "no quorum, no commit");
    assert_eq!(replica(&cluster, 0).acks().last_commit, before);
    assert_eq!(cluster.stats(cluster.replica(0)).executed, 3);
}

#[test]
fn a_single_proposer_serves_requests_sent_to_others() {
    // Scenario 29: only replica 0 owns slots (§6.7.2); a request to replica 1 is forwarded,
    // committed in replica 0's slot, and answered by replica 1.
    let mut cluster = cluster(3, 2, Config { proposers: 1, ..Config::default() });
    cluster.keep_sent_log();
    let client = cluster.client(1);
    assert_eq!(client, NodeId(4), "client n4 sends to replica 1");
    run_writes(&mut cluster, client, 3);
    assert!(cluster.sent_log().iter().any(|e| matches!(e.message, Message::Forward(_))));
    let r1 = replica(&cluster, 1);
    assert_eq!(r1.next_propose(), None, "replica 1 owns no slots");
    for slot in 1..=r1.acks().last_commit {
        assert_eq!(r1.schedule().unwrap().owner(slot), Some(0));
    }
}

#[test]
fn responsive_mode_commits_without_rounds() {
    // Scenario 12 (responsive half): the same protocol driven by events commits a workload.
    let mut cluster = cluster(3, 3, Config { mode: Mode::Responsive, ..Config::default() });
    for c in 0..3 {
        let client = cluster.client(c);
        run_writes(&mut cluster, client, 5);
    }
    for rank in 0..3 {
        assert!(replica(&cluster, rank).is_responsive());
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, 15);
    }
}

#[test]
fn mixed_modes_interoperate() {
    // Scenario 12: replica 1 switches to responsive mode mid-run; the others keep pulsing;
    // messages of either mode are processed and progress continues.
    let mut cluster = cluster(3, 3, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 3);
    let r1 = cluster.replica(1);
    let mut scratch = Outbox::<Chora>::default();
    cluster.node_as_mut::<Replica>(r1).set_responsive(true, &mut scratch);
    for c in 0..3 {
        let client = cluster.client(c);
        run_writes(&mut cluster, client, 3);
    }
    assert!(replica(&cluster, 1).is_responsive());
    assert!(!replica(&cluster, 0).is_responsive());
    assert_eq!(cluster.stats(cluster.replica(2)).executed, 12);
}

#[test]
fn a_partitioned_replica_rejoins_with_a_consistent_log() {
    // Scenario 24: replica 2 is cut off; the majority changes view and goes on; after healing,
    // replica 2 adopts the higher view, repairs its log against the others and executes the
    // same commands.
    let mut cluster = cluster(3, 1, Config::default());
    let client = cluster.client(0);
    run_writes(&mut cluster, client, 2);
    let r2 = cluster.replica(2);
    cluster.isolate(r2);
    run_writes(&mut cluster, client, 4);
    cluster.heal(r2);
    run_writes(&mut cluster, client, 2);
    cluster.run_for(50 * MS);
    assert_eq!(cluster.stats(r2).executed, 8, "replica 2 caught up: {}", cluster.status(r2));
    let common = committed(replica(&cluster, 0)).len().min(committed(replica(&cluster, 2)).len());
    assert_eq!(committed(replica(&cluster, 0))[..common], committed(replica(&cluster, 2))[..common]);
}

#[test]
fn malformed_peer_messages_are_counted_drops() {
    // Bad input is a counted drop, never a panic: a pulse acking beyond anything proposed, a
    // proposal for a slot its sender does not own, a reply sent to a replica.
    let mut cluster = cluster(3, 1, Config::default());
    let (r0, r1) = (cluster.replica(0), cluster.replica(1));
    let pulse = |ack, proposal| {
        Message::Pulse(Box::new(super::messages::Pulse {
            view: 0,
            base: 0,
            ack,
            latest_proposed: 0,
            proposal,
            skip: None,
            nack: None,
            recovers: Vec::new(),
        }))
    };
    cluster.inject(r1, r0, pulse(1_000, None));
    let entry = super::messages::Entry { view: 0, value: Value::NoOp };
    cluster.inject(r1, r0, pulse(0, Some((3, entry))));
    let id = RequestId { client: ordo_core::ClientId(1), number: 1 };
    cluster.inject(r1, r0, Message::Reply { id, result: CommandResult::Ok });
    cluster.deliver_all();
    let dropped = &cluster.stats(r0).dropped;
    assert_eq!(dropped.get("ack beyond the latest proposed slot"), Some(&1));
    assert_eq!(dropped.get("proposal for a slot its sender does not own"), Some(&1));
    assert_eq!(dropped.get("reply sent to a replica"), Some(&1));
    let _ = Arc::new(0);
    assert_eq!(replica(&cluster, 0).role(), ViewRole::Follower);
}

#[test]
fn repairs_back_off_while_nothing_commits() {
    // Goal (issue 20): while nothing commits, the coordination timer repairs (resends our
    // proposals, nacks gaps) at its 1st, 2nd, 4th and 8th firing and then every 8th, not at
    // every firing: a proposal carrying 16 MiB took longer than a period to commit, and each
    // resend sent the megabytes again. Method: replica 0 alone with a proposal (its peers cut
    // off, view changes out of reach) for 40 coordination periods, then reconnected.
    let config = Config { batch_max: 1, view_change_timeout_ns: 1_000 * MS, ..Config::default() };
    let period = config.coordination_ns;
    let mut cluster = cluster(3, 1, config);
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let op = cluster.submit(cluster.client(0), Command::set("b", "2"));
    assert!(cluster.run_until(5 * MS, |c| c.pending().any(|e| e.from == r0 && is_pulse_with_proposal(e))));
    cluster.isolate(r1);
    cluster.isolate(r2);
    cluster.run_for(40 * period);
    // Firings 1, 2, 4, 8, 16, 24, 32 and 40 repair (a timer firing late may move the last).
    let resends = event(&cluster, r0, "coordination_resend");
    assert!((6..=9).contains(&resends), "{resends} repairs in 40 periods without a commit");
    cluster.heal_all();
    assert!(cluster.run_until(20 * period, |c| c.result(op).is_some()), "it commits once reconnected");
}
