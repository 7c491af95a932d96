//! Scripted tests of further spec §12 scenarios: a link with a multi-round delay (10), random
//! delays well above the round (11), a responsive owner's no-ops on a nack (13), an initiator
//! dying after its view-init reached one follower (21) and a divergent uncommitted suffix
//! repaired from a new initiator (22). Node ids: replicas first (n0..), then clients; client
//! `i` sends to replica `(replicas + i) % replicas` first. The global checker (§8.3) runs
//! after every step.

use super::messages::{Entry, Message, Pulse, Value};
use super::replica::Replica;
use super::tests_scenarios::{advance_until_proposal, replica};
use super::{Chora, Config, Timer};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{Command, CommandResult, NodeId};
use std::collections::BTreeMap;

const MS: u64 = 1_000_000;

/// Runs the cluster with each message held `delay(message)` after it was first seen in the
/// network (drawn once per message), the others delivered at once, until `done` holds or
/// `limit_ns` pass; returns whether `done` held. Time moves in fifths of a round when nothing
/// is due.
fn run_with_delays(
    cluster: &mut Cluster<Chora>,
    mut delay: impl FnMut(&Envelope<Chora>) -> u64,
    limit_ns: u64,
    mut done: impl FnMut(&Cluster<Chora>) -> bool,
) -> bool {
    let mut due_at = BTreeMap::new();
    let end = cluster.now_ns() + limit_ns;
    while cluster.now_ns() < end {
        if done(cluster) {
            return true;
        }
        let now = cluster.now_ns();
        for envelope in cluster.pending() {
            due_at.entry(envelope.id).or_insert_with(|| now + delay(envelope));
        }
        if !cluster.deliver_first(|e| due_at.get(&e.id).is_some_and(|&at| at <= now)) {
            cluster.advance(Config::default().round_ns / 5);
        }
    }
    done(cluster)
}

fn run_with_late_link(
    cluster: &mut Cluster<Chora>,
    (from, to): (NodeId, NodeId),
    delay_ns: u64,
    limit_ns: u64,
    done: impl FnMut(&Cluster<Chora>) -> bool,
) -> bool {
    run_with_delays(cluster, |e| if e.from == from && e.to == to { delay_ns } else { 0 }, limit_ns, done)
}

/// Writes `count` values of `key` from `client`, each with the link `late` held `delay_ns`;
/// returns the mean latency of a write.
fn timed_writes(cluster: &mut Cluster<Chora>, client: NodeId, late: (NodeId, NodeId), delay_ns: u64) -> u64 {
    let count = 10;
    let start = cluster.now_ns();
    for i in 0..count {
        let op = cluster.submit(client, Command::set("late", i.to_string()));
        assert!(run_with_late_link(cluster, late, delay_ns, 50 * MS, |c| c.result(op).is_some()), "write {i}");
    }
    (cluster.now_ns() - start) / count
}

#[test]
fn a_link_four_rounds_late_delays_commits_but_not_rounds() {
    // Goal: scenario 10 — with the link replica 2 → replica 0 four rounds late (Fig. 1),
    // messages are processed in later rounds, everything stays safe, a write's latency at
    // replica 0 grows by about the extra delay, and the rounds keep their length. Method:
    // one client writing through replica 0; time ten writes with no delay, then ten with
    // every message on that link held 4 rounds; count replica 0's pulses while late.
    let config = Config::default();
    let round = config.round_ns;
    let mut cluster = Cluster::<Chora>::new(3, 1, config);
    let client = cluster.client(0);
    let late = (cluster.replica(2), cluster.replica(0));
    let prompt = timed_writes(&mut cluster, client, late, 0);
    cluster.keep_sent_log();
    let start = cluster.now_ns();
    let delayed = timed_writes(&mut cluster, client, late, 4 * round);
    let elapsed = cluster.now_ns() - start;
    assert!(delayed >= prompt + 5 * round / 2, "latency grew by the delay: {prompt} ns → {delayed} ns");
    assert!(delayed <= prompt + 8 * round, "and by little more: {prompt} ns → {delayed} ns");
    let (r0, r1) = (cluster.replica(0), cluster.replica(1));
    let pulses =
        cluster.sent_log().iter().filter(|e| e.from == r0 && e.to == r1 && matches!(e.message, Message::Pulse(_)));
    let pulses = pulses.count() as u64;
    assert!(pulses <= elapsed / round + 1, "at most one pulse per round: {pulses} in {elapsed} ns");
    assert!(pulses >= 10, "each write rode one of replica 0's pulses: {pulses}");
    let (_, deadline) =
        cluster.pending_timers(r0).into_iter().find(|(t, _)| *t == Timer::Round).expect("a round timer");
    assert!(deadline <= cluster.now_ns() + round, "the next round is at most one round away");
    cluster.run_for(5 * MS);
    let reader = cluster.client(0);
    let op = cluster.submit(reader, Command::get("late"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("9".into())));
    let logs: Vec<_> = (0..3).map(|r| replica(&cluster, r)).collect();
    let common = logs.iter().map(|r| r.acks().last_commit).min().expect("3 replicas");
    let from = logs.iter().map(|r| r.log().first()).max().expect("3 replicas");
    for slot in from..=common {
        let values: Vec<_> = logs.iter().map(|r| r.log().get(slot).map(|e| e.value_id())).collect();
        assert!(values.windows(2).all(|w| w[0] == w[1]), "slot {slot}: {values:?}");
    }
    assert!(logs.iter().all(|r| r.view() == 0), "no view change");
}

#[test]
fn a_divergent_uncommitted_suffix_is_truncated_and_refilled_from_the_initiator() {
    // Goal: scenario 22 — a follower holding old-view entries at slots where the new
    // initiator holds another view's entries truncates from the first such slot and refills
    // from the initiator, ending identical to it up to the view-base. Method: single proposer
    // (replica 0), its next proposal (view 0) dropped so only it holds it; replica 1
    // (injected) wins view 2 with a log of view 1, and its view-init pulse recovers no-ops of
    // view 1 at every slot above replica 0's verified prefix.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config { proposers: 1, ..Config::default() });
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("v", "0"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "the first write completed");
    let (r0, r1) = (cluster.replica(0), cluster.replica(1));
    let _op = cluster.submit(client, Command::set("v", "1"));
    cluster.deliver_all();
    advance_until_proposal(&mut cluster, r0);
    cluster.drop_where(|e| e.from == r0);
    let (held, verified) = (replica(&cluster, 0).log().last_append(), replica(&cluster, 0).acks().last_commit);
    assert!(held > verified, "an entry nobody acked");
    assert_eq!(replica(&cluster, 0).log().get(held).map(|e| e.view), Some(0));
    cluster.inject(r1, r0, Message::ViewChangeRequest { view: 2, last_append: held, last_append_view: 1 });
    cluster.deliver_all_where(|e| e.to == r0);
    assert_eq!(replica(&cluster, 0).view(), 2, "replica 0 voted for the newer log");
    let truncations = cluster.total_stats(r0).events.get("repair_truncate").copied().unwrap_or(0);
    let base = held + 1;
    let initiator_log: Vec<(u64, Entry)> =
        (verified + 1..=held).map(|slot| (slot, Entry { view: 1, value: Value::NoOp })).collect();
    let view_init = Entry { view: 2, value: Value::ViewInit { proposers: vec![1] } };
    let pulse = Pulse {
        view: 2,
        base,
        ack: base,
        latest_proposed: base,
        proposal: Some((base, view_init.clone())),
        skip: None,
        nack: None,
        recovers: initiator_log.clone(),
    };
    cluster.inject(r1, r0, Message::Pulse(Box::new(pulse)));
    cluster.deliver_all_where(|e| e.to == r0);
    let after = cluster.total_stats(r0).events.get("repair_truncate").copied().unwrap_or(0);
    assert_eq!(after, truncations + 1, "one truncation, at the first divergent slot");
    let follower = replica(&cluster, 0);
    for (slot, entry) in initiator_log.iter().chain([(base, view_init)].iter()) {
        assert_eq!(follower.log().get(*slot), Some(entry), "slot {slot} as at the initiator");
    }
    assert!(follower.acks().last_ack >= base, "the repaired prefix is verified up to the view-base");
}

/// One point of scenario 11's sweep: every replica-to-replica message held a delay drawn
/// uniformly from `0..=width_ns`; three clients (one per replica) write `batches` times each.
/// Returns (pulses per executed command, mean time of a batch of three writes).
fn delay_sweep_point(width_ns: u64, batches: u64) -> (f64, u64) {
    let mut cluster = Cluster::<Chora>::new(3, 3, Config::default());
    let replicas = cluster.replicas();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ width_ns;
    let mut delay = move |e: &Envelope<Chora>| {
        if !(replicas.contains(&e.from) && replicas.contains(&e.to)) {
            return 0;
        }
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % (width_ns + 1)
    };
    cluster.keep_sent_log();
    let start = cluster.now_ns();
    for i in 0..batches {
        let ops: Vec<u64> = (0..3)
            .map(|c| {
                let client = cluster.client(c);
                cluster.submit(client, Command::set(format!("k{c}"), i.to_string()))
            })
            .collect();
        let done = |c: &Cluster<Chora>| ops.iter().all(|&op| c.result(op).is_some());
        assert!(run_with_delays(&mut cluster, &mut delay, 200 * MS, done), "batch {i} at width {width_ns}");
    }
    let elapsed = cluster.now_ns() - start;
    let r1 = cluster.replica(1);
    let replicas = cluster.replicas();
    let pulses = cluster
        .sent_log()
        .iter()
        .filter(|e| replicas.contains(&e.from) && e.to == if e.from == r1 { replicas[0] } else { r1 })
        .filter(|e| matches!(e.message, Message::Pulse(_)))
        .count();
    let executed = cluster.stats(cluster.replica(0)).executed;
    assert_eq!(executed, 3 * batches, "every write executed once at width {width_ns}");
    for rank in 1..3 {
        assert_eq!(cluster.stats(cluster.replica(rank)).executed, executed, "replica {rank} agrees");
    }
    (pulses as f64 / executed as f64, elapsed / batches)
}

#[test]
fn random_delays_well_above_the_round_stay_safe_and_degrade_smoothly() {
    // Goal: scenario 11 — with every message between replicas delayed uniformly at random up
    // to many rounds, pulsing mode stays safe (the global checker, every write executed once
    // everywhere), messages per commit rise and throughput falls as the width grows. Method:
    // three clients, one per replica, 20 batches of three writes at widths 0, 4 and 16 rounds;
    // count one multicast per pulse (its copy to one peer).
    let round = Config::default().round_ns;
    let points: Vec<(f64, u64)> = [0, 4, 16].iter().map(|&w| delay_sweep_point(w * round, 20)).collect();
    for pair in points.windows(2) {
        assert!(pair[1].1 > pair[0].1, "each wider delay is slower: {points:?}");
    }
    assert!(points[2].0 > points[0].0, "messages per commit rise: {points:?}");
}

#[test]
fn a_nack_above_an_idle_owners_next_slot_makes_it_fill_its_slots_with_no_ops() {
    // Goal: scenario 13 — in responsive mode, a nack from replica 2 for a slot s of replica
    // 1 above replica 1's next-propose makes replica 1 propose no-ops for all its slots from
    // next-propose to s (in ordo, as one `skip` range: the nack's pulse raises its latest
    // proposed slot to s, and an idle owner skips up to it), and replica 0's commands then
    // commit. Method: one client, writing through replica 0; replica 1 is idle; the nack is
    // injected and delivered to replica 1 alone, and its answer is read from the network.
    let mut cluster = Cluster::<Chora>::new(3, 1, Config { mode: super::Mode::Responsive, ..Config::default() });
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("n", "0"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "the first write completed");
    cluster.run_for(MS);
    let (r1, r2) = (cluster.replica(1), cluster.replica(2));
    let next = replica(&cluster, 1).next_propose().expect("replica 1 proposes in view 0");
    let schedule = replica(&cluster, 1).schedule().expect("a schedule").clone();
    let s = schedule.next_owned(1, schedule.next_owned(1, next));
    assert!(replica(&cluster, 1).log().get(s).is_none(), "replica 1 has not proposed slot {s}");
    let nack = Pulse {
        view: 0,
        base: 0,
        ack: replica(&cluster, 2).acks().last_ack,
        latest_proposed: s,
        proposal: None,
        skip: None,
        nack: Some((s, s)),
        recovers: Vec::new(),
    };
    cluster.inject(r2, r1, Message::Pulse(Box::new(nack)));
    cluster.deliver_all_where(|e| e.to == r1);
    let skip = cluster.pending().find_map(|e| match &e.message {
        Message::Pulse(p) if e.from == r1 && e.to == r2 => p.skip,
        _ => None,
    });
    assert!(matches!(skip, Some((from, until)) if from == next && until >= s), "skip {skip:?} covers {next}..={s}");
    let mut slot = next;
    while slot <= s {
        assert_eq!(replica(&cluster, 1).log().get(slot).map(|e| e.value.clone()), Some(Value::NoOp), "slot {slot}");
        slot = schedule.next_owned(1, slot);
    }
    let op = cluster.submit(client, Command::set("n", "1"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "replica 0's next write commits");
    let reader = cluster.client(0);
    let op = cluster.submit(reader, Command::get("n"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("1".into())));
    assert!(replica(&cluster, 0).acks().last_commit >= s, "slot {s} committed");
}

#[test]
fn an_initiator_dying_after_its_view_init_reached_one_follower_leaves_no_conflict() {
    // Goal: scenario 21 (5 replicas, f = 2) — the initiator of the first view change crashes
    // after its view-init reached exactly one follower, uncommitted. A later view is elected,
    // the write completes, the survivors' committed prefixes agree (and the checker sees no
    // conflicting commit). Method: replica 4 crashes; other messages flow until the
    // initiator's view-init pulse is in the network; one copy is delivered, the rest dropped.
    let mut cluster = Cluster::<Chora>::new(5, 1, Config::default());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("i", "0"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()), "the first write completed");
    cluster.crash(cluster.replica(4));
    let op = cluster.submit(client, Command::set("i", "1"));
    let initiator = |c: &Cluster<Chora>| (0..4).find(|&r| replica(c, r).role() == super::replica::ViewRole::Initiator);
    assert!(cluster.run_until(300 * MS, |c| initiator(c).is_some()), "an initiator was elected");
    let dead = initiator(&cluster).expect("elected");
    let (node, dead_view) = (cluster.replica(dead), replica(&cluster, dead).view());
    let is_view_init = |e: &Envelope<Chora>| {
        e.from == node
            && matches!(&e.message, Message::Pulse(p) if p.proposal.as_ref().is_some_and(|(_, x)| x.is_view_init()))
    };
    let mut steps = 0;
    while !cluster.pending().any(is_view_init) {
        if !cluster.deliver_first(|e| e.from != node) {
            cluster.advance(10_000);
        }
        steps += 1;
        assert!(steps < 10_000, "the initiator sent its view-init");
    }
    let first = cluster.pending().find(|e| is_view_init(e)).map(|e| (e.id, e.to)).expect("pending");
    let base = replica(&cluster, dead).log().last_slot();
    assert!(cluster.deliver(first.0));
    cluster.drop_where(|e| e.from == node);
    cluster.crash(node);
    let follower = (0..4).find(|&r| cluster.replica(r) == first.1).expect("a replica");
    let held = replica(&cluster, follower).log().get(base).map(|e| e.value_id());
    assert_eq!(held, Some(super::messages::ValueId::ViewInit(dead_view)), "the follower holds the view-init");
    assert!(cluster.run_until(500 * MS, |c| c.result(op).is_some()), "the write completed in a later view");
    cluster.run_for(5 * MS);
    let survivors: Vec<&Replica> = (0..4).filter(|&r| r != dead).map(|r| replica(&cluster, r)).collect();
    assert!(survivors.iter().all(|r| r.view() > dead_view), "a later view");
    let common = survivors.iter().map(|r| r.acks().last_commit).min().expect("survivors");
    let from = survivors.iter().map(|r| r.log().first()).max().expect("survivors");
    for slot in from..=common {
        let values: Vec<_> = survivors.iter().map(|r| r.log().get(slot).map(|e| e.value_id())).collect();
        assert!(values.windows(2).all(|w| w[0] == w[1]), "slot {slot}: {values:?}");
    }
    let reader = cluster.client(0);
    let op = cluster.submit(reader, Command::get("i"));
    assert!(cluster.run_until(50 * MS, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("1".into())));
}
