//! Tests of the sender's request batching and of the quorum check at the leader (the paper's
//! No-QC-Offloading ablation, §7.5).

use super::messages::Message;
use super::proxy::{Batching, Sender};
use super::{Config, Flaw, Nezha, Timer};
use crate::testkit::{Cluster, topology};
use ordo_core::{
    ClientId, ClockReading, Command, Effect, KvStore, NodeContext, NodeId, NodeStats, Outbox, RequestId, StateMachine,
};
use std::sync::Arc;

fn kv() -> Box<dyn StateMachine> {
    Box::new(KvStore::new())
}

/// A sender at node 3 of a 3-replica cluster.
fn sender(batching: Batching) -> Sender {
    let context = NodeContext::<Nezha> {
        id: NodeId(3),
        topology: Arc::new(topology(3, 2)),
        config: Config::default(),
        seed: 1,
        new_state_machine: kv,
        incarnation: 0,
    };
    Sender::new(&context, Flaw::None, batching)
}

/// The number of requests in each `Requests` multicast, and the flush timers set, in order.
fn multicasts(out: &Outbox<Nezha>) -> (Vec<usize>, usize) {
    let mut sizes = Vec::new();
    let mut timers = 0;
    for effect in out.effects() {
        match effect {
            Effect::Multicast { message: Message::Requests { requests, .. }, .. } => sizes.push(requests.len()),
            Effect::SetTimer { timer: Timer::ProxyFlush, .. } => timers += 1,
            _ => {}
        }
    }
    (sizes, timers)
}

fn send(sender: &mut Sender, at_ns: u64, number: u64, out: &mut Outbox<Nezha>) {
    let id = RequestId { client: ClientId(4), number };
    sender.send(ClockReading::exact(at_ns), id, Command::set("k", "v"), NodeId(4), &mut NodeStats::default(), out);
}

#[test]
fn a_busy_sender_batches_within_its_window() {
    // Goal: with more requests in flight than `above`, requests arriving within the window of
    // the last multicast wait and leave together, at the window's end or when the batch is full.
    let mut sender = sender(Batching { max: 3, window_ns: 100_000, above: 0, per_round_trip: 0 });
    let mut out = Outbox::default();
    send(&mut sender, 1_000_000, 1, &mut out); // nothing sent before: at once
    send(&mut sender, 1_010_000, 2, &mut out); // within the window: waits, timer set
    send(&mut sender, 1_020_000, 3, &mut out);
    assert_eq!(multicasts(&out), (vec![1], 1));
    sender.on_flush_timer(ClockReading::exact(1_100_000), &mut out);
    assert_eq!(multicasts(&out), (vec![1, 2], 1), "the window's end sends what waits");
    for number in 4..=6 {
        send(&mut sender, 1_110_000 + number, number, &mut out);
    }
    assert_eq!(multicasts(&out), (vec![1, 2, 3], 2), "a full batch leaves at once");
    sender.on_flush_timer(ClockReading::exact(1_200_000), &mut out);
    assert_eq!(multicasts(&out).0.len(), 3, "an empty window sends nothing");
    sender.check_invariants();
}

#[test]
fn a_queued_sender_waits_for_its_share_of_what_is_in_flight() {
    // Goal: past the window, a batch also waits until it holds 1/`per_round_trip` of the
    // requests in flight (so batches grow when replies are slow to come), but never longer
    // than ten windows.
    let mut sender = sender(Batching { max: 64, window_ns: 100_000, above: 0, per_round_trip: 2 });
    let mut out = Outbox::default();
    send(&mut sender, 0, 1, &mut out);
    for number in 2..=6 {
        send(&mut sender, 10_000 + number, number, &mut out);
    }
    sender.on_flush_timer(ClockReading::exact(100_000), &mut out);
    assert_eq!(multicasts(&out).0, vec![1, 5], "at the window's end five of six in flight leave");
    send(&mut sender, 210_000, 7, &mut out);
    send(&mut sender, 220_000, 8, &mut out);
    sender.on_flush_timer(ClockReading::exact(400_000), &mut out);
    assert_eq!(multicasts(&out).0, vec![1, 5], "two of eight in flight wait past the window");
    sender.on_flush_timer(ClockReading::exact(1_210_000), &mut out);
    assert_eq!(multicasts(&out).0, vec![1, 5, 2], "ten windows at most");
    sender.check_invariants();
}

#[test]
fn requests_without_replies_for_four_ticks_do_not_hold_batches() {
    // Goal: a batch's share of what is in flight leaves out requests that got no reply or
    // resend for four ticks (their messages were lost, or the client retries through another
    // proxy), so loss does not make every batch wait its ten windows (with the eight stale ones
    // counted, the batch would wait for five); a resend counts again.
    let mut sender = sender(Batching { max: 64, window_ns: 100_000, above: 0, per_round_trip: 2 });
    let mut out = Outbox::default();
    for number in 1..=8 {
        send(&mut sender, number, number, &mut out);
    }
    sender.on_flush_timer(ClockReading::exact(1_000_000), &mut out);
    assert_eq!(multicasts(&out).0, vec![1, 7], "all eight are multicast");
    for _ in 0..4 {
        sender.tick();
    }
    sender.check_invariants();
    send(&mut sender, 4_000_000, 9, &mut out);
    send(&mut sender, 4_010_000, 10, &mut out);
    sender.on_flush_timer(ClockReading::exact(4_100_000), &mut out);
    assert_eq!(
        multicasts(&out).0,
        vec![1, 7, 1, 1],
        "the eight stale requests do not count: one of two live in flight is its share"
    );
    send(&mut sender, 4_150_000, 1, &mut out); // a resend, within the window: live again
    sender.check_invariants(); // the stale count follows (checked against a recount)
}

#[test]
fn a_lightly_loaded_sender_sends_each_request_at_once() {
    // Goal: batching costs no latency at low load: with at most `above` requests in flight,
    // each request is multicast at once even inside the window.
    let mut sender = sender(Batching { max: 64, window_ns: 100_000, above: 4, per_round_trip: 0 });
    let mut out = Outbox::default();
    for number in 1..=4 {
        send(&mut sender, 1_000_000 + number * 1_000, number, &mut out);
    }
    assert_eq!(multicasts(&out), (vec![1, 1, 1, 1], 0));
    send(&mut sender, 1_005_000, 5, &mut out);
    assert_eq!(multicasts(&out), (vec![1, 1, 1, 1], 1), "the fifth in flight waits for the window");
    sender.check_invariants();
}

#[test]
fn leader_checks_quorums_when_asked() {
    // Goal: with `quorum_check_at_leader`, followers reply to the leader only, the leader tells
    // the sender what committed, and requests still commit on the fast path with the results
    // of a sequential execution.
    let config =
        Config { proxies: 0, leader_release_ahead_ns: 1_000_000, quorum_check_at_leader: true, ..Config::default() };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let (client, leader) = (cluster.client(0), cluster.replica(0));
    let mut commits_seen = 0;
    for i in 0..20 {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        let committed = cluster.run_until(50_000_000, |c| {
            for envelope in c.pending() {
                match &envelope.message {
                    Message::FastReplies { .. } | Message::SlowReply { .. } => {
                        assert_eq!(envelope.to, leader, "replies go to the leader");
                    }
                    Message::Commits { .. } => {
                        assert_eq!((envelope.from, envelope.to), (leader, client), "the leader tells the sender");
                        commits_seen += 1;
                    }
                    _ => {}
                }
            }
            c.result(op).is_some()
        });
        assert!(committed, "op {i} commits");
    }
    assert!(commits_seen >= 20, "every commit came from the leader");
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()));
    let expected: String = (0..20).map(|i| format!("{i},")).collect();
    assert_eq!(cluster.result(op), Some(&ordo_core::CommandResult::Value(expected.into())));
    assert_eq!(cluster.stats(client).fast_path_commits, 21, "hashes still match on the fast path");
}
