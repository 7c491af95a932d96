//! Scenario tests of Nezha (specs/nezha.md §11). Cluster scenarios run on the step-by-step
//! testkit (clients are their own DOM senders there: the kit has no proxies); clock scenarios
//! drive one replica directly with hand-made clock readings, since the kit has one clock.

use super::hashes::crash_vector_hash;
use super::messages::{Message, SyncEntry};
use super::replica::{Replica, Status};
use super::{Config, Nezha};
use crate::testkit::{Cluster, Envelope, topology};
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, KvStore, Node, NodeContext, NodeId, Outbox, RequestId, StateMachine,
};
use std::sync::Arc;

/// The kit delivers messages at once, so a deadline lies a whole bound past the leader's
/// clock: keep App. D.2.4's early release out of the way.
fn config() -> Config {
    Config { proxies: 0, leader_release_ahead_ns: 1_000_000, ..Config::default() }
}

fn kv() -> Box<dyn StateMachine> {
    Box::new(KvStore::new())
}

/// A lone replica of rank `rank` in a 3-replica cluster with 2 clients (nodes 3 and 4).
fn replica(rank: usize, config: Config) -> Replica {
    let context = NodeContext::<Nezha> {
        id: NodeId(rank as u32),
        topology: Arc::new(topology(3, 2)),
        config,
        seed: 7,
        new_state_machine: kv,
        incarnation: 0,
    };
    Replica::new(context, Vec::new(), super::Flaw::None)
}

fn request(client: u64, number: u64, send_ns: u64, bound_ns: u64, command: Command) -> Message {
    Message::Requests {
        requests: vec![(RequestId { client: ClientId(client), number }, command)],
        send_ns,
        bound_ns,
        sender_error_ns: 0,
        slow_replies: false,
    }
}

fn clock(ns: u64) -> ClockReading {
    ClockReading::exact(ns)
}

/// The deadlines of a replica's log, synced then unsynced.
fn deadlines(replica: &Replica) -> Vec<u64> {
    replica.synced.iter().chain(&replica.unsynced).map(|slot| slot.entry.deadline).collect()
}

fn commit_all(cluster: &mut Cluster<Nezha>, client: NodeId, count: usize) {
    for i in 0..count {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()), "op {i} commits");
    }
}

#[test]
fn happy_path_commits_on_the_fast_path() {
    // Goal (spec §11 #1): with one client and perfect clocks every request commits on the fast
    // path, results are those of a sequential execution and logs agree. Method: 100 appends,
    // then compare the last result and the replicas' digests.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 100);
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()));
    let expected: String = (0..100).map(|i| format!("{i},")).collect();
    assert_eq!(cluster.result(op), Some(&CommandResult::Value(expected.into())));
    assert_eq!(cluster.stats(client).fast_path_commits, 101);
    assert_eq!(cluster.stats(client).slow_path_commits, 0);
    cluster.run_for(20_000_000);
    let digests: Vec<_> =
        cluster.replicas().iter().map(|&r| cluster.node(r).state_machine().unwrap().key_digests()).collect();
    assert!(digests.windows(2).all(|pair| pair[0] == pair[1]), "replicas agree");
}

#[test]
fn dom_fixes_reordering() {
    // Goal (spec §11 #3): B (deadline 110) arriving before A (deadline 100), both before the
    // clock reaches 100, are released A then B.
    let mut follower = replica(1, config());
    let mut out = Outbox::default();
    follower.on_message(clock(50), NodeId(3), request(3, 1, 10, 100, Command::set("k", "b")), &mut out);
    follower.on_message(clock(60), NodeId(4), request(4, 1, 0, 100, Command::set("k", "a")), &mut out);
    assert!(follower.unsynced.is_empty(), "nothing released before the deadline");
    follower.on_timer(clock(120), super::Timer::Release, &mut out);
    assert_eq!(deadlines(&follower), vec![100, 110]);
    follower.check_invariants();
}

#[test]
fn late_request_at_a_follower_is_fixed_by_sync() {
    // Goal (spec §11 #4): a request whose deadline is below the last released one goes to the
    // late-buffer; the leader's sync moves it into the log at the leader's position and the
    // follower slow-replies.
    let mut follower = replica(1, config());
    let mut out = Outbox::default();
    follower.on_message(clock(0), NodeId(3), request(3, 1, 0, 200, Command::set("k", "b")), &mut out);
    follower.on_timer(clock(300), super::Timer::Release, &mut out);
    follower.on_message(clock(310), NodeId(4), request(4, 1, 0, 100, Command::set("k", "a")), &mut out);
    assert_eq!(follower.late.len(), 1, "A is late");
    let cv = follower.cv.clone();
    let sync = |id: RequestId, deadline| SyncEntry { id, deadline, body: None };
    let a = RequestId { client: ClientId(4), number: 1 };
    let b = RequestId { client: ClientId(3), number: 1 };
    let message = Message::Sync {
        view: 0,
        cv,
        cv_since: 1,
        first: 1,
        entries: vec![sync(a, 100), sync(b, 200)],
        commit: 0,
        slow_replies: false,
    };
    let mut out = Outbox::default();
    follower.on_message(clock(320), NodeId(0), message, &mut out);
    assert_eq!(follower.sync_point(), 2);
    assert_eq!(deadlines(&follower), vec![100, 200]);
    assert!(follower.late.is_empty());
    assert_eq!(slow_replied(&out).len(), 2, "both synced requests are slow-replied");
    follower.check_invariants();
}

/// The delay of the last `Announce` timer a handler set, if any.
fn announce_delay(out: &Outbox<Nezha>) -> Option<u64> {
    out.effects().iter().rev().find_map(|effect| match effect {
        ordo_core::Effect::SetTimer { timer: super::Timer::Announce, after_ns } => Some(*after_ns),
        _ => None,
    })
}

/// The `Sync` multicasts among a handler's effects.
fn syncs_sent(out: &Outbox<Nezha>) -> usize {
    out.effects()
        .iter()
        .filter(|effect| matches!(effect, ordo_core::Effect::Multicast { message: Message::Sync { .. }, .. }))
        .count()
}

#[test]
fn syncs_wait_longer_while_many_positions_take_the_fast_path() {
    // Goal (choice 4): no client waits for the sync of a position that commits on the fast
    // path, so under load the leader batches those syncs longer. Under light load it keeps the
    // short delay (a follower's mismatched fast-reply, which the leader cannot see, makes its
    // client wait for the sync), and a position whose deadline it raised can only commit on the
    // slow path, so an extended announcement is brought forward.
    let config = Config { sync_fast_path_min: 2, ..config() };
    let mut leader = replica(0, config.clone());
    let mut out = Outbox::default();
    leader.on_message(clock(0), NodeId(3), request(3, 1, 0, 200, Command::set("k", "b")), &mut out);
    leader.on_timer(clock(300), super::Timer::Release, &mut out);
    assert_eq!(announce_delay(&out), Some(config.sync_delay_ns), "the first delay is short");
    let mut out = Outbox::default();
    leader.on_timer(clock(400), super::Timer::Announce, &mut out);
    assert_eq!((syncs_sent(&out), announce_delay(&out)), (1, None), "one position waits: announced");

    let mut out = Outbox::default();
    leader.on_message(clock(410), NodeId(3), request(3, 2, 410, 200, Command::set("k", "c")), &mut out);
    leader.on_message(clock(420), NodeId(4), request(4, 1, 420, 200, Command::set("j", "d")), &mut out);
    leader.on_timer(clock(700), super::Timer::Release, &mut out);
    assert_eq!(announce_delay(&out), Some(config.sync_delay_ns));
    let mut out = Outbox::default();
    leader.on_timer(clock(800), super::Timer::Announce, &mut out);
    let rest = config.sync_delay_fast_path_ns - config.sync_delay_ns;
    assert_eq!((syncs_sent(&out), announce_delay(&out)), (0, Some(rest)), "two wait, fast path: extended");

    let mut out = Outbox::default();
    leader.on_message(clock(810), NodeId(4), request(4, 2, 0, 100, Command::set("k", "a")), &mut out);
    assert_eq!(leader.stats.events.get("leader_raised_deadline"), Some(&1));
    assert_eq!(announce_delay(&out), Some(config.sync_delay_ns), "late: the extended announcement brought forward");
    leader.check_invariants();
}

/// What `pick` takes from each message a handler sent to one node.
fn sent<T>(out: &Outbox<Nezha>, pick: impl Fn(&Message) -> Option<T>) -> Vec<T> {
    out.effects()
        .iter()
        .filter_map(|effect| match effect {
            ordo_core::Effect::Send { message, .. } => pick(message),
            _ => None,
        })
        .collect()
}

/// The ids a handler slow-replied to.
fn slow_replied(out: &Outbox<Nezha>) -> Vec<RequestId> {
    let ids = |message: &Message| match message {
        Message::SlowReply { ids, .. } => Some(ids.clone()),
        _ => None,
    };
    sent(out, ids).concat()
}

/// Requests `(client, number, deadline, command)` reach `replica`, which releases them at 1 ms.
fn release(replica: &mut Replica, requests: &[(u64, u64, u64, Command)], out: &mut Outbox<Nezha>) {
    for (client, number, deadline, command) in requests {
        replica.on_message(
            clock(0),
            NodeId(*client as u32),
            request(*client, *number, 0, *deadline, command.clone()),
            out,
        );
    }
    replica.on_timer(clock(1_000), super::Timer::Release, out);
}

/// The leader's announcement of everything it appended, as its follower would receive it.
fn announcement(leader: &mut Replica) -> Message {
    let mut out = Outbox::default();
    leader.on_timer(clock(1_100), super::Timer::Announce, &mut out);
    out.drain()
        .find_map(|effect| match effect {
            ordo_core::Effect::Multicast { message: sync @ Message::Sync { .. }, .. } => Some(sync),
            _ => None,
        })
        .expect("the leader announces")
}

#[test]
fn followers_recompute_the_leaders_fast_reply_hashes() {
    // Goal (choice 4, choice 6): syncs carry no hashes; a follower computes the leader's
    // fast-reply hash of each synced position from its synced log, which is the leader's.
    // Where its own fast-reply carried that hash it skips the slow-reply; where its log held
    // another request (so its hash differed), or the leader's crash-vector changed since it
    // appended the position, it slow-replies. Method: a leader and a follower get A (k, 100)
    // and B (k, 200); in one run the follower also holds C (k, 150), which the leader never got.
    let (a, b, c) = (Command::set("k", "a"), Command::set("k", "b"), Command::set("k", "c"));
    let id = |client, number| RequestId { client: ClientId(client), number };
    for extra in [false, true] {
        let mut leader = replica(0, config());
        let mut follower = replica(1, config());
        let mut out = Outbox::default();
        release(&mut leader, &[(3, 1, 100, a.clone()), (4, 1, 200, b.clone())], &mut out);
        let mut requests = vec![(3, 1, 100, a.clone()), (4, 1, 200, b.clone())];
        if extra {
            requests.push((3, 2, 150, c.clone()));
        }
        release(&mut follower, &requests, &mut Outbox::default());
        let mut out = Outbox::default();
        follower.on_message(clock(1_200), NodeId(0), announcement(&mut leader), &mut out);
        assert_eq!(follower.sync_point(), 2);
        let expected = if extra { vec![id(4, 1)] } else { Vec::new() };
        assert_eq!(slow_replied(&out), expected, "slow-replies only where the fast-reply differed (extra: {extra})");
        follower.check_invariants();
    }

    // The leader learnt the follower's newer crash-vector only after it appended A and B: its
    // fast-replies carried the old one, which the sync no longer tells, so the follower (whose
    // own fast-replies carried the new one) slow-replies to both.
    let mut leader = replica(0, config());
    let mut follower = replica(1, config());
    follower.cv[2] = 1;
    release(&mut leader, &[(3, 1, 100, a.clone()), (4, 1, 200, b.clone())], &mut Outbox::default());
    release(&mut follower, &[(3, 1, 100, a), (4, 1, 200, b)], &mut Outbox::default());
    let mut sync = announcement(&mut leader);
    if let Message::Sync { cv, cv_since, .. } = &mut sync {
        cv[2] = 1;
        *cv_since = 3;
    }
    let mut out = Outbox::default();
    follower.on_message(clock(1_200), NodeId(0), sync, &mut out);
    assert_eq!(slow_replied(&out), vec![id(3, 1), id(4, 1)]);
    follower.check_invariants();
}

#[test]
fn late_request_at_the_leader_gets_a_raised_deadline() {
    // Goal (spec §11 #5): the leader never late-buffers: it raises the deadline just above the
    // last released conflicting request and appends at once.
    let mut leader = replica(0, config());
    let mut out = Outbox::default();
    leader.on_message(clock(0), NodeId(3), request(3, 1, 0, 200, Command::set("k", "b")), &mut out);
    leader.on_timer(clock(300), super::Timer::Release, &mut out);
    leader.on_message(clock(310), NodeId(4), request(4, 1, 0, 100, Command::set("k", "a")), &mut out);
    assert_eq!(deadlines(&leader), vec![200, 201]);
    assert_eq!(leader.stats.events.get("leader_raised_deadline"), Some(&1));
    leader.check_invariants();
}

#[test]
fn commutativity_keeps_different_keys_on_the_fast_path() {
    // Goal (spec §11 #16): a write on y below the last released deadline of x still enters the
    // early-buffer with commutativity on, and goes late with it off.
    for (commutativity, late) in [(true, 0), (false, 1)] {
        let mut follower = replica(1, Config { commutativity, ..config() });
        let mut out = Outbox::default();
        follower.on_message(clock(0), NodeId(3), request(3, 1, 0, 200, Command::set("x", "1")), &mut out);
        follower.on_timer(clock(300), super::Timer::Release, &mut out);
        follower.on_message(clock(310), NodeId(4), request(4, 1, 0, 100, Command::set("y", "1")), &mut out);
        assert_eq!(follower.late.len(), late, "commutativity {commutativity}");
    }
}

#[test]
fn non_monotonic_clock_keeps_the_log_ordered() {
    // Goal (spec §11 #14, App. D.1): a clock that jumps back and forth never releases a
    // request below the last released deadline. Method: random deadlines and clock readings.
    let mut follower = replica(1, config());
    let mut out = Outbox::default();
    let mut state = 12345u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        state >> 33
    };
    for number in 1..400 {
        // Time moves forward on average, with jumps of up to a millisecond either way.
        let now = (number * 100 + next() % 2_000).saturating_sub(1_000);
        let send = number * 100 + next() % 300;
        follower.on_message(clock(now), NodeId(3), request(3, number, send, 50, Command::set("k", "v")), &mut out);
        follower.on_timer(
            clock((number * 100 + next() % 2_000).saturating_sub(1_000)),
            super::Timer::Release,
            &mut out,
        );
        follower.check_invariants();
        let _ = out.drain();
    }
    let log = deadlines(&follower);
    assert!(log.len() > 10, "some requests were released");
    assert!(log.windows(2).all(|pair| pair[0] < pair[1]), "deadlines strictly increase: {log:?}");
}

#[test]
fn duplicates_execute_once() {
    // Goal (spec §11 #8): duplicated request packets are appended and executed once; the
    // duplicate gets the previous reply again.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::append("k", "x"));
    let ids: Vec<u64> = cluster.pending().map(|e| e.id).collect();
    for id in ids {
        cluster.duplicate(id);
    }
    assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()));
    let read = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(read).is_some()));
    assert_eq!(cluster.result(read), Some(&CommandResult::Value("x".into())));
}

#[test]
fn request_lost_to_the_leader_is_retried_and_executed_once() {
    // Goal (spec §11 #7): without the leader's reply nothing commits; the client's retry gets
    // a new deadline and the request executes exactly once.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    let leader = cluster.replica(0);
    let op = cluster.submit(client, Command::append("k", "x"));
    cluster.drop_where(|e| e.to == leader && matches!(e.message, Message::Requests { .. }));
    assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()), "commits after a retry");
    assert!(cluster.stats(client).events.contains_key("client_retry"));
    let read = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(read).is_some()));
    assert_eq!(cluster.result(read), Some(&CommandResult::Value("x".into())));
}

#[test]
fn leader_crash_keeps_committed_requests() {
    // Goal (spec §11 #19, #20, #22): after the leader crashes, the others change view and keep
    // every committed request; the restarted old leader rejoins through recovery.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 20);
    let leader = cluster.replica(0);
    cluster.crash(leader);
    commit_all(&mut cluster, client, 5);
    assert!(
        cluster.status(cluster.replica(1)).contains("view=1 normal leader"),
        "{}",
        cluster.status(cluster.replica(1))
    );
    cluster.restart(leader);
    assert!(cluster.run_until(100_000_000, |c| c.status(leader).contains("normal")), "{}", cluster.status(leader));
    assert!(cluster.status(leader).contains("cv=[1, 0, 0]"), "{}", cluster.status(leader));
    let read = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(read).is_some()));
    let expected: String = (0..20).chain(0..5).map(|i| format!("{i},")).collect();
    assert_eq!(cluster.result(read), Some(&CommandResult::Value(expected.into())));
}

#[test]
fn with_f_replicas_down_requests_commit_on_the_slow_path_without_retries() {
    // Goal: with a follower down no fast quorum can form, and followers whose fast-reply
    // matched skip their slow-reply (choice 6). Once the sender has not heard the dead follower
    // for two ticks it asks for slow-replies, so every later request commits on the slow path
    // without waiting for its client's retry. Method: crash a follower, let the first requests
    // find out, then count retries and slow commits over the next 20.
    commit_slowly_without_retries_with_a_follower_down(config());
}

#[test]
fn with_the_leader_checking_quorums_and_f_replicas_down_requests_commit_without_retries() {
    // Goal: the same when the leader checks quorums (the No-QC-Offloading ablation): there the
    // sender hears only the leader, so the leader, which gets every follower's replies, is the
    // one to notice the silent follower and to ask the others for slow-replies in its syncs.
    commit_slowly_without_retries_with_a_follower_down(Config { quorum_check_at_leader: true, ..config() });
}

fn commit_slowly_without_retries_with_a_follower_down(config: Config) {
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 5);
    cluster.crash(cluster.replica(2));
    commit_all(&mut cluster, client, 3);
    let retries = |c: &Cluster<Nezha>| c.stats(client).events.get("client_retry").copied().unwrap_or(0);
    let (retries_before, slow_before) = (retries(&cluster), cluster.stats(client).slow_path_commits);
    commit_all(&mut cluster, client, 20);
    assert_eq!(retries(&cluster), retries_before, "no request waited for a retry");
    assert_eq!(cluster.stats(client).slow_path_commits, slow_before + 20);
}

#[test]
fn follower_rejoin_raises_its_crash_vector() {
    // Goal (spec §11 #24, #25): a first boot is normal at once; a restart recovers, raises its
    // own crash-vector counter, state-transfers from the leader, and the cluster keeps going.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    let follower = cluster.replica(2);
    assert!(cluster.status(follower).contains("normal"));
    commit_all(&mut cluster, client, 10);
    cluster.crash(follower);
    commit_all(&mut cluster, client, 10);
    cluster.restart(follower);
    assert!(cluster.status(follower).contains("recovering"));
    assert!(cluster.run_until(100_000_000, |c| c.status(follower).contains("normal")));
    assert!(cluster.status(follower).contains("cv=[0, 0, 1]"), "{}", cluster.status(follower));
    commit_all(&mut cluster, client, 10);
    assert!(cluster.status(cluster.replica(0)).contains("cv=[0, 0, 1]"), "the leader learned the new counter");
}

#[test]
fn after_a_rejoin_by_state_transfer_fast_replies_match_again() {
    // Goal (spec §11 #24: "fast path resumes once cvs agree"): a follower that rejoins through a
    // state transfer of a checkpointed log computes the same fast-reply hashes as the others,
    // so its fast-replies match the leader's again instead of every request needing its
    // slow-reply. Method: checkpoint every 4 positions, crash a follower, commit past several
    // checkpoints, restart it, then count its mismatched fast-replies over 20 requests.
    let config = Config { checkpoint_interval: 4, ..config() };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let client = cluster.client(0);
    let follower = cluster.replica(2);
    commit_all(&mut cluster, client, 20);
    cluster.crash(follower);
    commit_all(&mut cluster, client, 20);
    cluster.restart(follower);
    assert!(cluster.run_until(100_000_000, |c| c.status(follower).contains("normal")));
    commit_all(&mut cluster, client, 10);
    let mismatched = |c: &Cluster<Nezha>| c.stats(follower).events.get("fast_reply_mismatched").copied().unwrap_or(0);
    let before = mismatched(&cluster);
    commit_all(&mut cluster, client, 20);
    assert_eq!(mismatched(&cluster), before, "the rejoined follower's fast-replies match the leader's");
}

#[test]
fn a_crashed_follower_gets_resends_with_backoff_not_every_tick() {
    // Goal: the leader resends to a follower whose acknowledgement is stuck, but a crashed one
    // never answers; once its positions were folded, every resend is a whole state transfer.
    // Backing off keeps that to a handful over 100 ms (it was one per 1 ms tick), while a
    // follower that comes back still catches up.
    let config = Config { checkpoint_interval: 4, ..config() };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let client = cluster.client(0);
    let (leader, follower) = (cluster.replica(0), cluster.replica(2));
    commit_all(&mut cluster, client, 10);
    cluster.crash(follower);
    commit_all(&mut cluster, client, 20);
    let transfers = |c: &Cluster<Nezha>| c.stats(leader).events.get("state_transfer").copied().unwrap_or(0);
    let before = transfers(&cluster);
    cluster.run_for(100_000_000);
    let sent = transfers(&cluster) - before;
    assert!((1..=10).contains(&sent), "{sent} state transfers to a crashed follower in 100 ms");
    cluster.restart(follower);
    assert!(cluster.run_until(300_000_000, |c| c.status(follower).contains("normal")));
    commit_all(&mut cluster, client, 5);
}

#[test]
fn stray_fast_reply_hash_differs_after_rejoin() {
    // Goal (spec §11 #26, App. H.2): once the leader learns a rejoined follower's raised
    // counter, the same log yields another hash, so fast-replies sent before the crash can
    // never match the leader's again.
    assert_ne!(crash_vector_hash(&vec![0, 0, 0]), crash_vector_hash(&vec![0, 1, 0]));
    let mut leader = replica(0, config());
    assert!(leader.check_crash_vector(1, &vec![0, 1, 0]));
    assert!(!leader.check_crash_vector(1, &vec![0, 0, 0]), "a message from before the rejoin is stray");
    assert_eq!(leader.status, Status::Normal);
}

#[test]
fn stray_view_change_request_is_ignored() {
    // Goal (spec §11 #27, App. H.1): a view-change request sent before its sender's rejoin
    // does not start a view change once the receiver knows the raised counter.
    let mut follower = replica(2, config());
    assert!(follower.check_crash_vector(1, &vec![0, 1, 0]));
    let mut out = Outbox::default();
    follower.on_message(clock(0), NodeId(1), Message::ViewChangeRequest { view: 1, cv: vec![0, 0, 0] }, &mut out);
    assert_eq!(follower.status, Status::Normal);
    assert_eq!(follower.view, 0);
    follower.on_message(clock(0), NodeId(1), Message::ViewChangeRequest { view: 1, cv: vec![0, 1, 0] }, &mut out);
    assert_eq!(follower.status, Status::ViewChange);
}

#[test]
fn request_lost_to_a_follower_is_fetched_from_the_leader() {
    // Goal (spec §11 #6): a follower that never received a request gets its body with the
    // leader's resend, places it at the synced position, and everything commits.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    let follower = cluster.replica(1);
    let op = cluster.submit(client, Command::append("k", "x"));
    cluster.drop_where(|e| e.to == follower && matches!(e.message, Message::Requests { .. }));
    assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()));
    commit_all(&mut cluster, client, 3);
    cluster.run_for(5_000_000);
    assert!(cluster.stats(follower).events.contains_key("fetched_body"), "{:?}", cluster.stats(follower));
    assert!(cluster.status(follower).contains("sync=4"), "{}", cluster.status(follower));
}

#[test]
fn lost_syncs_are_resent() {
    // Goal (spec §11 #10): with every first sync dropped, followers' sync-points advance only
    // through resends, and all requests commit.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    for i in 0..10 {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        cluster.run_for(200_000);
        cluster.drop_where(|e| matches!(&e.message, Message::Sync { entries, .. } if !entries.is_empty()));
        assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()), "op {i} commits");
    }
    cluster.run_for(5_000_000);
    for rank in 1..3 {
        assert!(cluster.status(cluster.replica(rank)).contains("sync=10"), "{}", cluster.status(cluster.replica(rank)));
    }
}

/// The `SyncAck`s among a handler's effects, as (sync-point, missing).
fn acks_sent(out: &Outbox<Nezha>) -> Vec<(u64, bool)> {
    let ack = |message: &Message| match message {
        Message::SyncAck { sync_point, missing, .. } => Some((*sync_point, *missing)),
        _ => None,
    };
    sent(out, ack)
}

#[test]
fn a_follower_asks_for_positions_announced_a_heartbeat_ago() {
    // Goal (choice 4): a follower that lacks positions the leader announced asks for them
    // itself, but only once they were announced a heartbeat ago: a heartbeat can overtake the
    // sync sent just before it, and a needless resend (past the leader's checkpoint, its whole
    // state) is what queued an overloaded leader further. Method: heartbeats saying positions
    // 1..=2 were announced reach a follower that holds none of them.
    let mut follower = replica(1, config());
    let heartbeat = |first| Message::Sync {
        view: 0,
        cv: vec![0, 0, 0],
        cv_since: 1,
        first,
        entries: Vec::new(),
        commit: 0,
        slow_replies: false,
    };
    let mut out = Outbox::default();
    follower.on_message(clock(1_000), NodeId(0), heartbeat(3), &mut out);
    assert_eq!(acks_sent(&out), vec![(0, false)], "the sync may still be on its way");
    follower.on_tick(clock(1_000_000), &mut Outbox::default());
    let mut out = Outbox::default();
    follower.on_message(clock(1_001_000), NodeId(0), heartbeat(3), &mut out);
    assert_eq!(acks_sent(&out), vec![(0, true)], "a heartbeat later it is lost: ask");
}

#[test]
fn the_leader_resends_unasked_only_after_a_few_silent_ticks() {
    // Goal: the leader's own resend (for a follower that cannot ask) waits until the follower's
    // acknowledgement has not moved for three ticks, not one. Method: one follower of a
    // 3-replica leader never acknowledges; count resends (syncs with bodies) per tick.
    let mut leader = replica(0, config());
    release(&mut leader, &[(3, 1, 100, Command::set("k", "a"))], &mut Outbox::default());
    announcement(&mut leader);
    let mut out = Outbox::default();
    let ack = Message::SyncAck { view: 0, cv: vec![0, 0, 0], sync_point: 1, missing: false };
    leader.on_message(clock(1_200), NodeId(2), ack, &mut out);
    let resends = |out: &Outbox<Nezha>| {
        let with_bodies = |message: &Message| match message {
            Message::Sync { entries, .. } if entries.iter().any(|entry| entry.body.is_some()) => Some(()),
            _ => None,
        };
        sent(out, with_bodies).len()
    };
    let per_tick: Vec<usize> = (1..=5u64)
        .map(|tick| {
            let mut out = Outbox::default();
            leader.on_tick(clock(tick * 1_000_000), &mut out);
            resends(&out)
        })
        .collect();
    assert_eq!(per_tick, vec![0, 0, 1, 1, 0], "the first resend comes at the third silent tick, then backs off");
}

#[test]
fn partitioned_old_leader_rejoins_the_new_view() {
    // Goal (spec §11 #23): an isolated leader is replaced; its replies carry the old view and
    // never mix into new quorums; once healed it adopts the new view.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 5);
    let old = cluster.replica(0);
    cluster.isolate(old);
    commit_all(&mut cluster, client, 5);
    assert!(cluster.status(old).contains("view=0"), "{}", cluster.status(old));
    cluster.heal(old);
    assert!(
        cluster.run_until(100_000_000, |c| c.status(old).contains("view=1 normal follower")),
        "{}",
        cluster.status(old)
    );
    commit_all(&mut cluster, client, 5);
}

#[test]
fn fast_follower_clock_only_costs_the_fast_path() {
    // Goal (spec §11 #11): a follower whose clock runs 300 µs ahead releases early, later
    // requests land in its late-buffer, and the leader's sync still puts them in its log.
    let mut leader = replica(0, config());
    let mut follower = replica(1, config());
    let skew = 300_000;
    let mut to_follower = Vec::new();
    for number in 1..20u64 {
        let send = number * 10_000;
        let message = request(3, number, send, 50_000, Command::set("k", format!("{number}")));
        let mut out = Outbox::default();
        leader.on_message(clock(send + 40_000), NodeId(3), message.clone(), &mut out);
        leader.on_timer(clock(send + 60_000), super::Timer::Release, &mut out);
        leader.on_timer(clock(send + 60_000), super::Timer::Announce, &mut out);
        let mut local = Outbox::default();
        follower.on_message(clock(send + 40_000 + skew), NodeId(3), message, &mut local);
        follower.on_timer(clock(send + 40_000 + skew), super::Timer::Release, &mut local);
        for effect in out.drain() {
            if let ordo_core::Effect::Multicast { message: sync @ Message::Sync { .. }, .. } = effect {
                to_follower.push(sync);
            }
        }
    }
    for sync in to_follower {
        let mut out = Outbox::default();
        follower.on_message(clock(1_000_000), NodeId(0), sync, &mut out);
    }
    assert_eq!(follower.sync_point(), leader.sync_point());
    assert_eq!(deadlines(&follower)[..19], deadlines(&leader)[..]);
    follower.check_invariants();
}

#[test]
fn slow_leader_clock_releases_early_with_a_lowered_deadline() {
    // Goal (spec §11 #12, #13): a deadline far past the leader's clock (its clock is behind,
    // or the proxy's ahead) is lowered and the request appended at once (App. D.2.4); with the
    // option off it waits for the clock.
    for (ahead, appended) in [(50_000, 1), (0, 0)] {
        let mut leader = replica(0, Config { leader_release_ahead_ns: ahead, ..config() });
        let mut out = Outbox::default();
        leader.on_message(clock(0), NodeId(3), request(3, 1, 300_000, 200_000, Command::set("k", "v")), &mut out);
        assert_eq!(leader.synced.len(), appended, "ahead {ahead}");
    }
}

#[test]
fn leader_holds_a_request_within_its_latency_bound() {
    // Goal: followers whose CPUs queue raise the bound (150 µs); a request that reached the
    // leader after 50 µs is held 100 µs, more than `leader_release_ahead_ns` but within the
    // bound. That is no clock fault, so the leader keeps the deadline and waits (lowering it
    // would turn every such request into a slow commit); one sent "after" it arrived, by the
    // leader's clock, is still lowered and appended at once.
    let mut leader = replica(0, Config { leader_release_ahead_ns: 50_000, ..config() });
    let mut out = Outbox::default();
    leader.on_message(clock(100_000), NodeId(3), request(3, 1, 50_000, 150_000, Command::set("a", "v")), &mut out);
    assert_eq!(leader.synced.len(), 0, "held: 100 µs to go is within the 150 µs bound");
    leader.on_message(clock(100_000), NodeId(4), request(4, 1, 120_000, 150_000, Command::set("b", "v")), &mut out);
    assert_eq!(leader.synced.len(), 1, "sent 20 µs after it arrived: a clock fault");
    leader.on_timer(clock(200_001), super::Timer::Release, &mut out);
    assert_eq!(deadlines(&leader).len(), 2, "the held request is released at its deadline");
}

#[test]
fn stale_state_transfer_keeps_what_the_follower_fast_replied() {
    // Goal: a state transfer within the view, taken before the leader appended B but arriving
    // after the follower fast-replied for B, leaves B among the follower's unsynced entries: a
    // view change counts them, and B may have committed on the fast path. (Campaign seed 71
    // lost an acknowledged append this way: the transfer wiped B, the merge found one vote.)
    let (mut leader, mut follower) = (replica(0, config()), replica(1, config()));
    let mut out = Outbox::default();
    let a = request(3, 1, 0, 100, Command::append("k", "a"));
    leader.on_message(clock(1_000), NodeId(3), a.clone(), &mut out);
    follower.on_message(clock(1_000), NodeId(3), a, &mut out);
    let stale = leader.image();
    let b = request(3, 2, 2_000, 100, Command::append("k", "b"));
    leader.on_message(clock(3_000), NodeId(3), b.clone(), &mut out);
    follower.on_message(clock(3_000), NodeId(3), b, &mut out);
    assert_eq!(follower.image().unsynced.len(), 2, "the follower fast-replied for A and B");
    let transfer = Message::StateTransferReply { view: 0, cv: vec![0, 0, 0], commit: 1, image: stale };
    follower.on_message(clock(4_000), NodeId(0), transfer, &mut out);
    assert_eq!(follower.sync_point(), 1, "the transfer was taken");
    let unsynced: Vec<u64> = follower.image().unsynced.iter().map(|e| e.id.number).collect();
    assert_eq!(unsynced, vec![2], "B is still a vote");
}

#[test]
fn recovering_replica_that_would_lead_waits_for_an_election() {
    // Goal (spec §11 #28): the restarted leader of the current view does not rejoin as leader;
    // the others elect a new leader, then it state-transfers from it.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 3);
    let leader = cluster.replica(0);
    cluster.crash(leader);
    cluster.restart(leader);
    assert!(
        cluster.run_until(200_000_000, |c| c.status(leader).contains("normal follower")),
        "{}",
        cluster.status(leader)
    );
    assert!(cluster.stats(leader).events.contains_key("rejoin_waits_for_election"));
    commit_all(&mut cluster, client, 3);
}

#[test]
fn lagging_replica_catches_up() {
    // Goal (spec §11 #29): a replica still in an old view that hears a view-change of that old
    // view from a peer gets the current view from the leader.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 3);
    cluster.crash(cluster.replica(0));
    commit_all(&mut cluster, client, 3);
    let new_leader = cluster.replica(1);
    let cv = vec![0, 0, 0];
    let stale = Message::ViewChangeRequest { view: 0, cv };
    cluster.inject(cluster.replica(2), new_leader, stale);
    cluster.run_for(1_000_000);
    assert!(cluster.status(cluster.replica(2)).contains("view=1 normal"), "{}", cluster.status(cluster.replica(2)));
}

#[test]
fn reads_and_compound_writes_hash_their_keys() {
    // Goal (spec §11 #17, with the deviation of docs/protocols/nezha.md choice 22): a read leaves
    // hashes alone; a two-key request's hash covers both keys' write hashes, and a write on both
    // keys changes it (the paper's `hash_x ⊕ hash_y` would count that write twice and cancel it).
    let mut table = super::hashes::ConflictTable::new(true);
    let cv = vec![0, 0, 0];
    let entry = |client: u64, deadline: u64, command: Command| super::messages::Entry {
        id: RequestId { client: ClientId(client), number: 1 },
        deadline,
        reply_to: NodeId(9),
        command,
    };
    let both = Command::MGet { keys: vec!["x".into(), "y".into()] };
    let print_both = table.footprint(&both);
    assert_eq!(print_both.buckets.len(), 2, "x and y fall in two buckets");
    let mut seen = vec![table.reply_hash(&print_both, &cv)];
    let read = entry(1, 5, Command::get("x"));
    table.add(&read, &table.footprint(&read.command));
    assert_eq!(table.reply_hash(&print_both, &cv), seen[0], "a read leaves the hashes alone");
    let writes = [
        entry(2, 10, Command::set("x", "1")),
        entry(3, 20, Command::set("y", "1")),
        entry(4, 30, Command::MSet { pairs: vec![("x".into(), "2".into()), ("y".into(), "2".into())] }),
    ];
    for write in &writes {
        let print = table.footprint(&write.command);
        table.add(write, &print);
        let hash = table.reply_hash(&print_both, &cv);
        assert!(!seen.contains(&hash), "the write {:?} changes the two-key hash", write.command);
        seen.push(hash);
    }
    assert_ne!(table.reply_hash(&print_both, &vec![0, 1, 0]), seen[3], "the crash-vector counts");
}

#[test]
fn a_compound_write_a_follower_lacks_changes_its_hash_for_a_read_of_two_of_its_keys() {
    // Goal: a follower whose log lacks a write on two keys never sends the leader's fast-reply
    // hash for a later read of both keys, so that read cannot commit on the fast path with a
    // result that counts the write. Method (fault campaign seed 151, reduced): A reads k2 and
    // W writes k0 and k2 with A's deadline; the follower releases A and late-buffers W, the
    // leader appends W at a raised deadline; then both release R, a read of k0 and k2. With the
    // paper's XOR of per-key hashes, W counted in both buckets cancelled and the hashes matched;
    // the view change that followed dropped W, and R's committed result could not be explained.
    let (mut leader, mut follower) = (replica(0, config()), replica(1, config()));
    let a = (3, 1, 100, Command::get("k2"));
    let w = (4, 1, 100, Command::MSet { pairs: vec![("k0".into(), "w".into()), ("k2".into(), "w".into())] });
    let r = (3, 2, 200, Command::MGet { keys: vec!["k2".into(), "k0".into()] });
    let mut leader_out = Outbox::default();
    let mut follower_out = Outbox::default();
    release(&mut leader, &[a.clone(), w.clone()], &mut leader_out);
    release(&mut follower, &[a, w], &mut follower_out);
    assert_eq!(deadlines(&leader), vec![100, 101], "the leader appended W at a raised deadline");
    assert_eq!(deadlines(&follower), vec![100], "the follower holds W late");
    assert_eq!(follower.late.len(), 1);
    release(&mut leader, std::slice::from_ref(&r), &mut leader_out);
    release(&mut follower, std::slice::from_ref(&r), &mut follower_out);
    let id = RequestId { client: ClientId(3), number: 2 };
    let hash_of = |out: &Outbox<Nezha>| {
        let replies = |message: &Message| match message {
            Message::FastReplies { replies, .. } => Some(replies.clone()),
            _ => None,
        };
        sent(out, replies).concat().into_iter().find(|reply| reply.id == id).map(|reply| reply.hash)
    };
    let (leader_hash, follower_hash) = (hash_of(&leader_out), hash_of(&follower_out));
    assert!(leader_hash.is_some() && follower_hash.is_some(), "both fast-replied to R");
    assert_ne!(leader_hash, follower_hash, "the follower lacks W: R's hashes must differ");
    leader.check_invariants();
    follower.check_invariants();
}

#[test]
fn next_leader_crashing_during_the_view_change_is_skipped() {
    // Goal (spec §11 #22, f = 2): the leader of view 0 crashes, then the designated leader of
    // view 1 crashes mid view change; the others move on to view 2 and keep committed requests.
    let mut cluster: Cluster<Nezha> = Cluster::new(5, 1, config());
    let client = cluster.client(0);
    commit_all(&mut cluster, client, 5);
    cluster.crash(cluster.replica(0));
    let third = cluster.replica(2);
    assert!(cluster.run_until(100_000_000, |c| c.status(third).contains("view-change")));
    cluster.crash(cluster.replica(1));
    commit_all(&mut cluster, client, 5);
    assert!(cluster.status(third).contains("view=2 normal leader"), "{}", cluster.status(third));
    let read = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(50_000_000, |c| c.result(read).is_some()));
    let expected: String = (0..5).chain(0..5).map(|i| format!("{i},")).collect();
    assert_eq!(cluster.result(read), Some(&CommandResult::Value(expected.into())));
}

#[test]
fn followers_acknowledge_every_few_positions_and_every_heartbeat() {
    // Goal (choice 4 in docs/protocols/nezha.md): a follower does not acknowledge each sync, so
    // the leader's load does not grow by an ack per follower per sync, yet the commit point
    // still reaches the end of the log. Method: the leader announces every position
    // (`sync_batch_min` = 1), followers ack every 4; count one follower's syncs and acks over
    // 12 commits, then let a heartbeat pass and read the leader's commit point.
    let config = Config {
        sync_batch_min: 1,
        sync_ack_every: 4,
        heartbeat_ns: 50_000_000,
        view_change_timeout_ns: 200_000_000,
        ..config()
    };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let (client, leader, follower) = (cluster.client(0), cluster.replica(0), cluster.replica(1));
    let (mut syncs, mut acks) = (0, 0);
    for i in 0..12 {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        for _ in 0..100 {
            cluster.deliver_all_where(|envelope| {
                match &envelope.message {
                    Message::Sync { entries, .. } if envelope.to == follower && !entries.is_empty() => syncs += 1,
                    Message::SyncAck { .. } if envelope.from == follower => acks += 1,
                    _ => {}
                }
                true
            });
            if cluster.result(op).is_some() {
                break;
            }
            cluster.advance(50_000);
        }
        assert!(cluster.result(op).is_some(), "op {i} commits");
    }
    assert!(syncs >= 10, "the leader announced positions one by one: {syncs} syncs");
    assert!((2..=3).contains(&acks), "one ack per 4 positions, not per sync: {acks} acks for {syncs} syncs");
    cluster.run_for(60_000_000);
    assert!(cluster.status(leader).contains("commit=12"), "{}", cluster.status(leader));
}

#[test]
fn syncs_lost_past_a_checkpoint_are_resent_not_transferred() {
    // Goal (choice 13 in docs/protocols/nezha.md): the leader keeps the positions a follower has
    // not acknowledged in memory across a checkpoint, so syncs lost to that follower are resent
    // (the follower holds the bodies already) instead of the whole state; and it still folds
    // once the next checkpoint is due, so a silent follower pins at most two intervals.
    // Method: checkpoints every 4 positions; follower 1 loses every sync (and heartbeat) for 6
    // commits, then hears the leader again.
    let config = Config { checkpoint_interval: 4, sync_batch_min: 1, view_change_timeout_ns: 200_000_000, ..config() };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config);
    let (client, leader, follower) = (cluster.client(0), cluster.replica(0), cluster.replica(1));
    let deaf =
        move |envelope: &Envelope<Nezha>| envelope.to == follower && matches!(envelope.message, Message::Sync { .. });
    for i in 0..6 {
        let op = cluster.submit(client, Command::append("k", format!("{i},")));
        for _ in 0..1_000 {
            cluster.drop_where(deaf);
            cluster.deliver_all_where(|envelope| !deaf(envelope));
            if cluster.result(op).is_some() {
                break;
            }
            cluster.advance(50_000);
        }
        assert!(cluster.result(op).is_some(), "op {i} commits on the leader and follower 2");
    }
    assert!(cluster.stats(leader).events.contains_key("checkpoint"), "{:?}", cluster.stats(leader));
    let status = cluster.status(follower);
    assert!(status.contains("sync=0"), "the deaf follower caught up by a state transfer: {status}");
    commit_all(&mut cluster, client, 1);
    cluster.run_for(5_000_000);
    assert!(cluster.status(follower).contains("sync=7"), "{}", cluster.status(follower));
    assert!(!cluster.stats(leader).events.contains_key("state_transfer"), "{:?}", cluster.stats(leader));
    // A follower that stays silent: the leader folds when the next checkpoint is due.
    cluster.isolate(follower);
    commit_all(&mut cluster, client, 12);
    let status = cluster.status(leader);
    let field = |name: &str| -> u64 {
        let value = status.split_whitespace().find_map(|f| f.strip_prefix(name)).expect("status field");
        value.parse().expect("a number")
    };
    assert!(field("log=") - field("base=") <= 2 * 4, "at most two intervals in memory: {status}");
}

#[test]
fn a_big_state_is_checkpointed_less_often() {
    // Goal: a checkpoint serializes the whole state, so the positions between two checkpoints
    // grow with its size (`checkpoint_bytes_per_position`), up to `checkpoint_interval_max`,
    // and a big state costs about that many bytes per position, not a full serialization
    // every `checkpoint_interval`. Method: checkpoints every 4 positions at least, 100 bytes
    // per position; 1,000-byte values. The first checkpoint (at 4) holds about 4 KB, so the
    // next comes about 40 positions later, or 10 with `checkpoint_interval_max` 10.
    let config = Config {
        checkpoint_interval: 4,
        checkpoint_bytes_per_position: 100,
        checkpoint_interval_max: 1_000,
        ..config()
    };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, config.clone());
    let (client, leader) = (cluster.client(0), cluster.replica(0));
    let checkpoints = |cluster: &Cluster<Nezha>| cluster.stats(leader).events.get("checkpoint").copied().unwrap_or(0);
    let mut committed = 0;
    let mut commit = |cluster: &mut Cluster<Nezha>, count: usize| {
        for _ in 0..count {
            let op = cluster.submit(client, Command::set(format!("key{}", committed % 8), "v".repeat(1_000)));
            assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()), "op {committed} commits");
            committed += 1;
        }
        cluster.run_for(5_000_000);
    };
    commit(&mut cluster, 30);
    assert_eq!(checkpoints(&cluster), 1, "one checkpoint in 30 positions, not seven");
    commit(&mut cluster, 30);
    assert_eq!(checkpoints(&cluster), 2, "the next after about 40 more");

    // With `checkpoint_interval_max` 10, the interval stops growing at 10: at 4, 14 and 24.
    let capped = Config { checkpoint_interval_max: 10, ..config };
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, capped);
    let client = cluster.client(0);
    for i in 0..30 {
        let op = cluster.submit(client, Command::set(format!("key{}", i % 8), "v".repeat(1_000)));
        assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()), "op {i} commits");
    }
    cluster.run_for(5_000_000);
    assert_eq!(checkpoints(&cluster), 3, "capped at 10 positions");
}
