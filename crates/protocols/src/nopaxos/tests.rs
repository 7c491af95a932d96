//! Scenario tests of spec §11 on the testkit (scenarios 5 and 6 are unit tests in `oum.rs`).
//! Node ids with 3 replicas: r0..r2 = n0..n2, sequencers n3 and n4, the controller n5, then
//! the clients.

use super::controller::Controller;
use super::gap_agreement::Gap;
use super::messages::{Entry, Message, ViewId};
use super::replica::{Replica, Status};
use super::sequencer::Sequencer;
use super::{Config, Durable, NoPaxos, Timer};
use crate::testkit::script::Layout;
use crate::testkit::{Cluster, Envelope};
use ordo_core::{Command, CommandResult, NodeId, RequestId, Role};

fn cluster(replicas: usize, clients: usize) -> Cluster<NoPaxos> {
    let config = Config::default();
    let topology = Layout::new(replicas, clients).topology::<NoPaxos>(&config);
    let mut cluster = Cluster::with_topology(topology, config, 1);
    // Sequencer 0 announces itself; the controller persists session 0 and installs it.
    cluster.deliver_all();
    cluster
}

fn replica(cluster: &Cluster<NoPaxos>, rank: usize) -> &Replica {
    cluster.node_as::<Replica>(cluster.replica(rank))
}

fn sequencer(cluster: &Cluster<NoPaxos>, index: usize) -> NodeId {
    cluster.with_role(Role::Sequencer, index)
}

fn controller(cluster: &Cluster<NoPaxos>) -> NodeId {
    cluster.with_role(Role::Controller, 0)
}

fn is_stamped(envelope: &Envelope<NoPaxos>) -> bool {
    matches!(envelope.message, Message::Stamped { .. })
}

fn stamped(envelope: &Envelope<NoPaxos>, seq: u64, to: NodeId) -> bool {
    matches!(envelope.message, Message::Stamped { seq: s, .. } if s == seq) && envelope.to == to
}

fn is_reply(envelope: &Envelope<NoPaxos>) -> bool {
    matches!(envelope.message, Message::Reply { .. })
}

fn ids(replica: &Replica) -> Vec<Option<RequestId>> {
    replica.log().iter().map(Entry::id).collect()
}

fn no_ops(replica: &Replica) -> usize {
    replica.log().iter().filter(|entry| entry.is_no_op()).count()
}

fn event(cluster: &Cluster<NoPaxos>, node: NodeId, name: &str) -> u64 {
    cluster.stats(node).events.get(name).copied().unwrap_or(0)
}

/// Submits at `client` and lets the sequencer stamp the request; the stamped copies stay in
/// the network.
fn submit_and_stamp(cluster: &mut Cluster<NoPaxos>, client: NodeId, command: Command) -> u64 {
    let op = cluster.submit(client, command);
    assert!(cluster.deliver_first(|e| e.from == client && matches!(e.message, Message::Request(_))));
    op
}

fn assert_logs_equal(cluster: &Cluster<NoPaxos>, ranks: &[usize]) {
    let first = ids(replica(cluster, ranks[0]));
    for &rank in &ranks[1..] {
        assert_eq!(ids(replica(cluster, rank)), first, "r{rank}'s log equals r{}'s", ranks[0]);
    }
}

#[test]
fn scenario_1_single_request_without_faults() {
    // Goal: one round trip; every replica logs the request at slot 1 with session-msg-num 1;
    // only the leader executes. Method: n = 3 and n = 5, one SET, deliver everything.
    for replicas in [3, 5] {
        let mut cluster = cluster(replicas, 1);
        let client = cluster.client(0);
        let op = cluster.submit(client, Command::set("k", "v"));
        cluster.deliver_all();
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
        for rank in 0..replicas {
            let r = replica(&cluster, rank);
            assert_eq!(r.log().len(), 1);
            assert_eq!(r.session_msg_num(), 1);
            assert_eq!(r.executed(), u64::from(rank == 0), "only the leader executes");
        }
        assert_eq!(cluster.stats(cluster.replica(0)).executed, 1);
    }
}

#[test]
fn scenario_2_concurrent_clients_logs_follow_sequencer_order() {
    // Goal: identical logs in sequencer order, each op executed once. Method: 3 clients, 30
    // writes each, delivered in FIFO order; then one sync round.
    let mut cluster = cluster(3, 3);
    for round in 0..30 {
        for index in 0..3 {
            let client = cluster.client(index);
            cluster.submit(client, Command::append("k", format!("{index}.{round};")));
        }
        cluster.deliver_all();
    }
    assert_eq!(cluster.completions().len(), 90);
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert_eq!(replica(&cluster, 0).executed(), 90);
    cluster.advance(Config::default().heartbeat_ns);
    cluster.deliver_all();
    for rank in 0..3 {
        assert_eq!(replica(&cluster, rank).sync_point(), 90, "scenario 30: a sync round covers the log");
        assert_eq!(replica(&cluster, rank).executed(), 90, "followers execute up to the sync-point");
    }
}

#[test]
fn scenario_3_client_needs_the_leader_and_f_matching_replies() {
    // Goal: the acceptance rule. Method: the client's request never reaches the sequencer;
    // replies are injected: f + 1 without the leader, the leader with a follower at another
    // slot, then the leader with a matching follower.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    let id = match &cluster.pending().next().unwrap().message {
        Message::Request(request) => request.id,
        other => panic!("expected the request, got {other:?}"),
    };
    cluster.drop_where(|_| true);
    let view = ViewId::new(0, 0);
    let reply = |slot, result| Message::Reply { view, slot, id, result };
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    cluster.inject(r1, client, reply(1, None));
    cluster.inject(r2, client, reply(1, None));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), None, "f + 1 replies without the leader's");
    cluster.inject(r0, client, reply(2, Some(CommandResult::Integer(7))));
    cluster.inject(r2, client, Message::Reply { view: ViewId::new(1, 0), slot: 2, id, result: None });
    cluster.deliver_all();
    assert_eq!(cluster.result(op), None, "the leader's reply with a follower of another view");
    cluster.inject(r1, client, reply(3, Some(CommandResult::Ok)));
    cluster.deliver_all();
    assert_eq!(cluster.stats(client).dropped.get("result from a replica that does not lead the view"), Some(&1));
    cluster.inject(r1, client, reply(2, None));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(7)), "the leader's result");
}

#[test]
fn scenario_4_retry_gets_a_new_slot_and_executes_once() {
    // Goal: at-most-once. Method: every reply of the first attempt is lost; the client retries
    // with the same id; the retry takes slot 2; the leader answers from its client table.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 5 });
    cluster.deliver_all_where(|e| !is_reply(e));
    assert_eq!(cluster.drop_where(is_reply), 3);
    assert!(cluster.fire_timer(client, &Timer::ClientRetry));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(5)));
    let leader = replica(&cluster, 0);
    assert_eq!(leader.log().len(), 2);
    assert_eq!(leader.log()[0].id(), leader.log()[1].id(), "the retry is the same request");
    assert_eq!(cluster.stats(cluster.replica(0)).executed, 1, "executed once");
    assert_eq!(event(&cluster, cluster.replica(0), "duplicate_in_log"), 1);
}

fn is_lookup(envelope: &Envelope<NoPaxos>, from: NodeId, to: NodeId) -> bool {
    matches!(envelope.message, Message::SlotLookup { .. }) && envelope.from == from && envelope.to == to
}

#[test]
fn scenario_7_drop_to_one_follower_is_filled_from_a_peer() {
    // Goal: a follower's drop notification is resolved by a copy, no NO-OP, and without the
    // leader: a peer follower holds the request (ordo asks a peer first, the leader after).
    // Method: A's stamped copy to r2 is lost; B's arrival gives r2 a drop notification for
    // slot 1; r2's lookup goes to r1.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0, r1, r2) =
        (cluster.client(0), cluster.client(1), cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r2));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok), "the leader and r1 suffice");
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::SlotLookup { .. }));
    assert!(cluster.deliver_first(|e| is_lookup(e, r2, r1)), "r2 asks its peer");
    assert_eq!(cluster.drop_where(|e| is_lookup(e, r2, r0)), 0, "and not the leader");
    cluster.deliver_all();
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert!((0..3).all(|rank| no_ops(replica(&cluster, rank)) == 0));
    assert_eq!(event(&cluster, r2, "gap_filled"), 1);
}

#[test]
fn a_peer_without_the_slot_sends_the_follower_to_the_leader() {
    // Goal: the peer lookup falls back to the leader (§5.2.2's rule) at once, not at the next
    // tick. Method: A reaches only the leader; B gives both followers a drop notification for
    // slot 1; each asks the other, which is resolving the same slot and says so.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0, r1, r2) =
        (cluster.client(0), cluster.client(1), cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r1) || stamped(e, 1, r2));
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::SlotLookup { .. }));
    assert!(cluster.deliver_first(|e| is_lookup(e, r1, r2)));
    assert!(cluster.deliver_first(|e| is_lookup(e, r2, r1)));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::SlotLookup { .. }));
    assert!(cluster.deliver_first(|e| is_lookup(e, r1, r0)), "r2 had nothing: r1 asks the leader");
    assert!(cluster.deliver_first(|e| is_lookup(e, r2, r0)), "and so does r2");
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert!((0..3).all(|rank| no_ops(replica(&cluster, rank)) == 0));
}

#[test]
fn a_follower_answers_the_leaders_search_once_it_reaches_the_slot() {
    // Goal: a follower behind the leader does not answer "no copy" for a slot it has not
    // reached (the leader would NO-OP a request the follower is about to log, and its client
    // would wait out a retry). Method: A's copy to the leader is lost and its copies to the
    // followers are late; B gives the leader a drop notification; the followers keep the
    // search until A reaches them.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0) = (cluster.client(0), cluster.client(1), cluster.replica(0));
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r0));
    let b = submit_and_stamp(&mut cluster, c1, Command::set("b", "2"));
    assert!(cluster.deliver_first(|e| stamped(e, 2, r0)));
    cluster.deliver_all_where(|e| !is_stamped(e));
    assert!(matches!(replica(&cluster, 0).gap(), Gap::Finding { .. }), "the leader still searches");
    assert_eq!(replica(&cluster, 0).log().len(), 0);
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok), "a late follower's copy filled the slot");
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_eq!(event(&cluster, r0, "gap_no_op"), 0);
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn a_gap_commit_ahead_of_the_log_waits_for_the_follower_to_reach_it() {
    // Goal: a GAP-COMMIT for a slot past a follower's next one is kept, not dropped (the leader
    // would wait for its next resend). Method: A (seq 1) and B (seq 2) are late at r2; B is
    // lost to the leader, whose search answers are lost too, so it NO-OPs slot 2 when C (seq 3)
    // arrives; r2, still before slot 1, gets that GAP-COMMIT, then A.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0, r2) = (cluster.client(0), cluster.client(1), cluster.replica(0), cluster.replica(2));
    let to_r2 = move |e: &Envelope<NoPaxos>| is_stamped(e) && e.to == r2;
    let is_found = |e: &Envelope<NoPaxos>| matches!(e.message, Message::GapFound { .. });
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    let b = submit_and_stamp(&mut cluster, c1, Command::set("b", "2"));
    cluster.drop_where(|e| stamped(e, 2, r0));
    cluster.deliver_all_where(|e| !to_r2(e));
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok));
    let c = submit_and_stamp(&mut cluster, c0, Command::set("c", "3"));
    cluster.deliver_all_where(|e| !to_r2(e) && !is_found(e));
    cluster.drop_where(is_found);
    cluster.advance(2 * Config::default().gap_find_timeout_ns);
    cluster.deliver_all_where(|e| !to_r2(e));
    assert_eq!(replica(&cluster, 2).log().len(), 0, "r2 has not reached slot 1");
    assert!(cluster.deliver_first(|e| stamped(e, 1, r2)));
    cluster.deliver_all();
    assert_eq!(event(&cluster, r2, "gap_commit_applied_late"), 1);
    assert_eq!(cluster.result(b), None, "B's slot became a NO-OP");
    assert_eq!(cluster.result(c), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert!(replica(&cluster, 2).log()[1].is_no_op());
}

#[test]
fn scenario_8_drop_to_the_leader_is_filled_from_a_follower() {
    // Goal: the leader first looks for a copy (§5.2.2's optimisation). Method: A's stamped copy
    // to r0 is lost; B's arrival gives r0 a drop notification; r1 and r2 hold A.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0) = (cluster.client(0), cluster.client(1), cluster.replica(0));
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r0));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), None, "no leader reply yet");
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert_eq!(no_ops(replica(&cluster, 0)), 0);
    assert_eq!(event(&cluster, r0, "gap_filled"), 1);
}

#[test]
fn scenario_9_leader_without_a_copy_commits_a_no_op_and_the_client_retries() {
    // Goal: the NO-OP path. Method: A reaches only the followers; the followers' answers to
    // the leader's search are lost; after the search timeout the leader commits a NO-OP, the
    // followers overwrite A; A's client retries and A executes once, at slot 3.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0) = (cluster.client(0), cluster.client(1), cluster.replica(0));
    let a = submit_and_stamp(&mut cluster, c0, Command::IncrBy { key: "n".into(), delta: 1 });
    cluster.drop_where(|e| stamped(e, 1, r0));
    cluster.deliver_all();
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::GapFound { .. }));
    assert_eq!(cluster.drop_where(|e| matches!(e.message, Message::GapFound { .. })), 2);
    assert_eq!(replica(&cluster, 0).log().len(), 0, "the leader holds back while it searches");
    cluster.advance(Config::default().gap_find_timeout_ns);
    cluster.deliver_all();
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok), "B follows the NO-OP");
    assert_eq!(cluster.result(a), None, "A's slot became a NO-OP: no leader reply");
    assert!((0..3).all(|rank| replica(&cluster, rank).log()[0].is_no_op()), "followers overwrote A");
    assert_eq!(event(&cluster, r0, "gap_no_op"), 1);
    assert!(cluster.fire_timer(c0, &Timer::ClientRetry));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Integer(1)), "executed once");
    assert_eq!(replica(&cluster, 0).log().len(), 3);
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn scenario_10_drop_to_every_replica_becomes_a_no_op() {
    // Goal: a request lost after sequencing everywhere. Method: A's three stamped copies are
    // lost; B gives every replica a drop notification; the followers' lookups wait while the
    // leader finds no copy and commits a NO-OP; A's retry succeeds.
    let mut cluster = cluster(3, 2);
    let (c0, c1) = (cluster.client(0), cluster.client(1));
    let a = submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    assert_eq!(cluster.drop_where(is_stamped), 3);
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all();
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert!((0..3).all(|rank| replica(&cluster, rank).log()[0].is_no_op()));
    assert!(cluster.fire_timer(c0, &Timer::ClientRetry));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn scenario_11_drop_before_the_sequencer_is_retried() {
    // Goal: sender omission: no notification anywhere, no NO-OP; the retry executes once.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("a", "1"));
    assert_eq!(cluster.drop_where(|_| true), 1);
    assert!(cluster.fire_timer(client, &Timer::ClientRetry));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert!((0..3).all(|rank| replica(&cluster, rank).log().len() == 1 && no_ops(replica(&cluster, rank)) == 0));
    assert_eq!(event(&cluster, cluster.replica(0), "drop_notification"), 0);
}

#[test]
fn scenario_12_gap_commit_ahead_of_a_follower_skips_the_oum_position() {
    // Goal: fn 3. Method: A (seq 1) reaches nobody but r2, late; B (seq 2) reaches r0 and r1,
    // late at r2 too. The leader's search times out (r2 would answer only once it reaches
    // slot 1) and it commits a NO-OP at slot 1; r2 gets the GAP-COMMIT before A:
    // it appends the NO-OP and consumes position 1, so the late A is discarded and B lands in
    // slot 2, aligned with the others.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r0, r1, r2) =
        (cluster.client(0), cluster.client(1), cluster.replica(0), cluster.replica(1), cluster.replica(2));
    submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r0) || stamped(e, 1, r1));
    let b = submit_and_stamp(&mut cluster, c1, Command::set("b", "2"));
    cluster.deliver_all_where(|e| !(is_stamped(e) && e.to == r2));
    // r2 keeps the leader's search to answer once it reaches slot 1; the search times out.
    assert_eq!(replica(&cluster, 0).log().len(), 0, "the leader waits for r2's answer");
    cluster.advance(Config::default().gap_find_timeout_ns);
    cluster.deliver_all_where(|e| !(is_stamped(e) && e.to == r2));
    assert_eq!(replica(&cluster, 2).log().len(), 1, "r2 took the NO-OP ahead of its OUM messages");
    assert_eq!(replica(&cluster, 2).session_msg_num(), 1, "and consumed position 1");
    cluster.deliver_all();
    assert_eq!(cluster.stats(r2).dropped.get("oum: late or duplicate"), Some(&1), "late A discarded");
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
    assert!(replica(&cluster, 2).log()[0].is_no_op());
    assert_eq!(replica(&cluster, 2).session_msg_num(), 2);
}

#[test]
fn scenario_13_lost_gap_commit_reps_are_retried_and_the_leader_waits() {
    // Goal: the leader does not process the next sequence number before f acknowledgements.
    // Method: A lost everywhere; B makes the leader commit a NO-OP; every GAP-COMMIT-REP is
    // lost; C arrives and waits; the leader's tick resends GAP-COMMIT and all proceeds.
    let mut cluster = cluster(3, 3);
    let (c0, c1, c2) = (cluster.client(0), cluster.client(1), cluster.client(2));
    submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(is_stamped);
    let b = cluster.submit(c1, Command::set("b", "2"));
    cluster.deliver_all_where(|e| !matches!(e.message, Message::GapCommitRep { .. }));
    assert!(cluster.drop_where(|e| matches!(e.message, Message::GapCommitRep { .. })) >= 1);
    let c = cluster.submit(c2, Command::set("c", "3"));
    cluster.deliver_all();
    assert_eq!(replica(&cluster, 0).log().len(), 1, "the leader waits at its NO-OP");
    assert_eq!(cluster.result(b), None);
    let leader = cluster.replica(0);
    assert!(cluster.fire_timer(leader, &Timer::Tick));
    cluster.deliver_all();
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok));
    assert_eq!(cluster.result(c), Some(&CommandResult::Ok));
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn scenario_14_reordering_at_one_replica() {
    // Goal: a reordered pair reads as a drop then a late message; the gap is filled from the
    // leader. Method: r2 gets seq 2 before seq 1.
    let mut cluster = cluster(3, 2);
    let (c0, c1, r2) = (cluster.client(0), cluster.client(1), cluster.replica(2));
    submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    submit_and_stamp(&mut cluster, c1, Command::set("b", "2"));
    assert!(cluster.deliver_first(|e| stamped(e, 2, r2)));
    cluster.deliver_all();
    assert_eq!(cluster.completions().len(), 2);
    assert_eq!(cluster.stats(r2).dropped.get("oum: late or duplicate"), Some(&1));
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

fn run_until_view(cluster: &mut Cluster<NoPaxos>, ranks: &[usize], view: ViewId) {
    let done = |c: &Cluster<NoPaxos>| {
        ranks.iter().all(|&r| {
            c.node_as::<Replica>(c.replica(r)).view() == view
                && c.node_as::<Replica>(c.replica(r)).status_kind() == Status::Normal
        })
    };
    assert!(cluster.run_until(200_000_000, done), "view {view:?} started");
}

#[test]
fn scenario_16_leader_crash_keeps_successful_requests() {
    // Goal: a view change to <1,0> keeps every successful op at its slot; the new leader
    // executes the log before new ops. Method: two writes, crash r0, let timers run.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    for value in ["1", "2"] {
        let op = cluster.submit(client, Command::append("k", value));
        cluster.deliver_all();
        assert!(cluster.result(op).is_some());
    }
    let before = ids(replica(&cluster, 0));
    cluster.crash(cluster.replica(0));
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("12".into())));
    assert_eq!(&ids(replica(&cluster, 1))[..2], &before[..]);
    assert_eq!(replica(&cluster, 1).executed(), 3, "the new leader executed the whole log");
}

#[test]
fn scenario_21_ousted_leader_adopts_the_new_log_by_state_transfer() {
    // Goal: §5.3: an ousted leader that executed a request the new view dropped rejoins without
    // rollback. Method: A reaches r0 alone, which executes it; r0 is cut off from the other
    // replicas, which form <1,0> and NO-OP slot 1 when B arrives; healed, r0 learns of the view
    // from the new leader's heartbeat, adopts its log and starts its state again.
    let mut cluster = cluster(3, 2);
    let (c0, c1) = (cluster.client(0), cluster.client(1));
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    submit_and_stamp(&mut cluster, c0, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r1) || stamped(e, 1, r2));
    cluster.deliver_all();
    assert_eq!(replica(&cluster, 0).executed(), 1, "r0 executed A speculatively");
    let between = move |e: &Envelope<NoPaxos>| {
        (e.from == r0 && (e.to == r1 || e.to == r2)) || (e.to == r0 && (e.from == r1 || e.from == r2))
    };
    let settle_cut_off = |c: &mut Cluster<NoPaxos>| {
        c.drop_where(between);
        while c.deliver_all_where(move |e| !between(e)) > 0 {
            c.drop_where(between);
        }
    };
    for _ in 0..40 {
        cluster.advance(1_000_000);
        settle_cut_off(&mut cluster);
    }
    assert_eq!(replica(&cluster, 1).view(), ViewId::new(1, 0));
    assert_eq!(replica(&cluster, 0).view(), ViewId::new(0, 0), "r0 still believes it leads");
    let b = cluster.submit(c1, Command::set("b", "2"));
    for _ in 0..5 {
        settle_cut_off(&mut cluster);
        cluster.advance(1_000_000);
    }
    assert!(replica(&cluster, 1).log()[0].is_no_op(), "the new view dropped A");
    assert!(cluster.run_until(50_000_000, |c| c.result(b).is_some()));
    assert!(cluster.run_until(50_000_000, |c| c.node_as::<Replica>(c.replica(0)).view() == ViewId::new(1, 0)));
    cluster.run_for(5_000_000);
    assert_eq!(event(&cluster, r0, "state_reset"), 1, "r0 discarded the state where it ran A");
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn scenario_22_new_leader_crash_during_the_view_change() {
    // Goal: a view change whose leader is gone times out into the next leader-num. Method:
    // crash r0 and r1; with n = 5, r2..r4 suspect r0, wait for r1, then move to <2,0>.
    let mut cluster = cluster(5, 1);
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert!(cluster.result(op).is_some());
    cluster.crash(cluster.replica(0));
    cluster.crash(cluster.replica(1));
    run_until_view(&mut cluster, &[2, 3, 4], ViewId::new(2, 0));
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("v".into())));
}

#[test]
fn scenario_24_lost_start_view_and_duplicate_start_view() {
    // Goal: a replica that missed START-VIEW still ends Normal in the view; a duplicate
    // START-VIEW of the current view does not reset a Normal replica's log. Method: r0 crashes;
    // r1's START-VIEW to r2 is lost; timers run; then the START-VIEW is injected again after
    // r2 logged a new request.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    cluster.crash(cluster.replica(0));
    let r2 = cluster.replica(2);
    let mut lost = false;
    for _ in 0..60 {
        cluster.advance(1_000_000);
        if !lost {
            lost = cluster.drop_where(|e| e.to == r2 && matches!(e.message, Message::StartView { .. })) > 0;
        }
        cluster.deliver_all_where(|e| !(e.to == r2 && matches!(e.message, Message::StartView { .. })) || lost);
    }
    assert!(lost, "a START-VIEW was dropped");
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    let op = cluster.submit(client, Command::set("k", "v"));
    assert!(cluster.run_until(50_000_000, |c| c.result(op).is_some()));
    let stale = Message::StartView { view: ViewId::new(1, 0), session_msg_num: 0, log: Default::default() };
    cluster.inject(cluster.replica(1), r2, stale);
    cluster.deliver_all();
    assert_eq!(replica(&cluster, 2).log().len(), 1, "a Normal replica keeps its log");
    assert_eq!(cluster.stats(r2).dropped.get("start-view of the current view"), Some(&1));
}

#[test]
fn scenario_25_old_view_messages_are_ignored() {
    // Goal: I13. Method: after <1,0> starts, a GAP-COMMIT, a GAP-COMMIT-REP and a SYNC-COMMIT of
    // <0,0> reach the replicas and change nothing.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert!(cluster.result(op).is_some());
    cluster.crash(cluster.replica(0));
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    let old = ViewId::new(0, 0);
    cluster.inject(r0, r2, Message::GapCommit { view: old, slot: 1 });
    cluster.inject(r2, r1, Message::GapCommitRep { view: old, slot: 1 });
    cluster.inject(r0, r2, Message::SyncCommit { view: old, through: 1 });
    cluster.deliver_all();
    assert!(!replica(&cluster, 2).log()[0].is_no_op());
    assert_eq!(cluster.stats(r2).dropped.get("message of another view"), Some(&2));
    assert_eq!(cluster.stats(r1).dropped.get("message of another view"), Some(&1));
}

#[test]
fn scenario_26_sequencer_failure_moves_the_group_to_a_new_session() {
    // Goal: the controller installs session 1 on the other sequencer; replicas see it,
    // terminate session 0 and change view to <0,1> with session-msg-num 0; the client's retry
    // completes; nothing executes twice. Method: crash sequencer 0, let timers run.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let first = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 1 });
    cluster.deliver_all();
    assert!(cluster.result(first).is_some());
    cluster.crash(sequencer(&cluster, 0));
    let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 1 });
    assert!(cluster.run_until(200_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(2)));
    assert_eq!(cluster.node_as::<Controller>(controller(&cluster)).issued(), Some(1));
    assert_eq!(cluster.node_as::<Sequencer>(sequencer(&cluster, 1)).session(), Some(1));
    for rank in 0..3 {
        let r = replica(&cluster, rank);
        assert_eq!(r.view(), ViewId::new(0, 1));
        assert_eq!(r.session_msg_num(), 1, "session 1 counted from 0");
        assert_eq!(r.log().len(), 2, "the old session's request kept its slot");
    }
    assert!(event(&cluster, cluster.replica(1), "session_terminated") >= 1);
}

#[test]
fn scenario_29_controller_restart_never_reuses_a_session() {
    // Goal: sessions only grow across controller restarts; a sequencer never takes a session
    // addressed to its previous incarnation. Method: restart the controller; crash and restart
    // sequencer 0 while sequencer 1 is down, replay the old SET-SESSION at it.
    let mut cluster = cluster(3, 1);
    let controller_id = controller(&cluster);
    assert_eq!(cluster.durable(controller_id), &[Durable::Issued { session: 0 }]);
    cluster.crash(controller_id);
    cluster.restart(controller_id);
    assert_eq!(cluster.node_as::<Controller>(controller_id).issued(), Some(0), "read back");
    let s0 = sequencer(&cluster, 0);
    cluster.crash(sequencer(&cluster, 1));
    cluster.crash(s0);
    cluster.restart(s0);
    // Boot numbers are drawn per incarnation; 1 is not the new one's (checked below).
    assert_ne!(cluster.status(s0), "", "the sequencer runs");
    cluster.inject(controller_id, s0, Message::SetSession { session: 0, boot: 1 });
    cluster.deliver_all();
    assert_eq!(cluster.node_as::<Sequencer>(s0).session(), None, "an old incarnation's session is refused");
    assert!(
        cluster.run_until(100_000_000, |c| c.node_as::<Sequencer>(c.with_role(Role::Sequencer, 0)).session().is_some())
    );
    let issued = cluster.node_as::<Controller>(controller_id).issued().unwrap();
    assert!(issued > 0, "a new session, above 0");
    assert_eq!(issued % 2, 0, "mapped to sequencer 0");
    assert_eq!(cluster.node_as::<Sequencer>(s0).session(), Some(issued));
}

/// A is lost everywhere, B gives every replica a drop notification at slot 1; the leader's
/// search finds nothing and it commits a NO-OP. `reach` says which followers get GAP-COMMIT.
fn leader_no_ops_slot_one(cluster: &mut Cluster<NoPaxos>, reach: &[NodeId]) -> (u64, u64) {
    let (c0, c1) = (cluster.client(0), cluster.client(1));
    let a = submit_and_stamp(cluster, c0, Command::set("a", "1"));
    let r0 = cluster.replica(0);
    cluster.drop_where(|e| stamped(e, 1, r0));
    let b = submit_and_stamp(cluster, c1, Command::set("b", "2"));
    let reach = reach.to_vec();
    let held = move |e: &Envelope<NoPaxos>| matches!(e.message, Message::GapCommit { .. }) && !reach.contains(&e.to);
    cluster.deliver_all_where(|e| !held(e) && !matches!(e.message, Message::GapFound { request: Some(_), .. }));
    cluster.drop_where(|e| matches!(e.message, Message::GapFound { .. }));
    cluster.advance(Config::default().gap_find_timeout_ns);
    cluster.deliver_all_where(|e| !held(e));
    cluster.drop_where(held);
    (a, b)
}

#[test]
fn scenario_19_a_committed_no_op_survives_the_leader_crash() {
    // Goal: a NO-OP acknowledged by f followers is in the merged log. Method: A reaches r1 and
    // r2 only; the leader's search answers are lost; its NO-OP reaches r1 alone (f = 1), which
    // acknowledges, so the leader takes B. The leader crashes; r1 and r2 merge: NO-OP at 1
    // although r2 still holds A there.
    let mut cluster = cluster(3, 2);
    let r1 = cluster.replica(1);
    let (_, b) = leader_no_ops_slot_one(&mut cluster, &[r1]);
    assert_eq!(cluster.result(b), Some(&CommandResult::Ok), "the leader went on after r1's ack");
    assert!(!replica(&cluster, 2).log()[0].is_no_op(), "r2 never learned of the NO-OP");
    cluster.crash(cluster.replica(0));
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    assert!(replica(&cluster, 1).log()[0].is_no_op());
    assert!(replica(&cluster, 2).log()[0].is_no_op(), "the merge prefers the NO-OP");
    assert_logs_equal(&cluster, &[1, 2]);
}

#[test]
fn scenario_18_a_no_op_known_to_the_leader_alone_may_give_way_to_the_request() {
    // Goal: a NO-OP that reached no follower was never committed; the request, never successful
    // (no leader reply), may take the slot in the next view, and its client then completes
    // through the new view's replies. Method: as scenario 19, but no GAP-COMMIT arrives.
    let mut cluster = cluster(3, 2);
    let (a, b) = leader_no_ops_slot_one(&mut cluster, &[]);
    assert_eq!(cluster.result(a), None);
    assert_eq!(cluster.result(b), None, "the leader waits for an acknowledgement");
    cluster.crash(cluster.replica(0));
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    assert!(!replica(&cluster, 1).log()[0].is_no_op(), "A keeps slot 1");
    assert!(cluster.run_until(50_000_000, |c| c.result(a).is_some() && c.result(b).is_some()));
    assert_logs_equal(&cluster, &[1, 2]);
}

#[test]
fn scenario_23_crossing_view_change_requests_meet_at_the_join() {
    // Goal: one replica proposes <1,0>, another <0,1>; every replica ends in <1,1>, and no
    // replica's view ever goes back (checked after every input). Method: inject the two
    // requests and let the replicas exchange view-change messages.
    let mut cluster = cluster(3, 1);
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    cluster.inject(r2, r1, Message::ViewChangeReq { view: ViewId::new(1, 0) });
    cluster.inject(r1, r2, Message::ViewChangeReq { view: ViewId::new(0, 1) });
    cluster.deliver_all();
    for node in [r0, r1, r2] {
        assert_eq!(cluster.node_as::<Replica>(node).view(), ViewId::new(1, 1));
        assert_eq!(cluster.node_as::<Replica>(node).status_kind(), Status::Normal);
    }
}

#[test]
fn scenario_28_session_change_and_leader_crash_together() {
    // Goal: both components move: the sequencer and the leader fail; the group ends in <1,1>
    // led by r1, and a new request completes. Method: crash sequencer 0 and r0, run timers.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let first = cluster.submit(client, Command::set("k", "1"));
    cluster.deliver_all();
    assert!(cluster.result(first).is_some());
    cluster.crash(sequencer(&cluster, 0));
    cluster.crash(cluster.replica(0));
    let op = cluster.submit(client, Command::append("k", "2"));
    assert!(cluster.run_until(300_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(2)));
    for rank in [1, 2] {
        assert_eq!(replica(&cluster, rank).view(), ViewId::new(1, 1));
    }
}

#[test]
fn scenario_17_minimal_quorum_success_survives_the_leader_crash() {
    // Goal: a request successful with exactly f + 1 replicas (n = 5) is in every later view at
    // its slot. Method: A reaches r0, r2 and r3 only; the client completes; r0 crashes. The new
    // leader r1 lacks A, but any 3 of r1..r4 include r2 or r3.
    let mut cluster = cluster(5, 1);
    let (client, r1, r4) = (cluster.client(0), cluster.replica(1), cluster.replica(4));
    let a = submit_and_stamp(&mut cluster, client, Command::set("a", "1"));
    cluster.drop_where(|e| stamped(e, 1, r1) || stamped(e, 1, r4));
    cluster.deliver_all();
    assert_eq!(cluster.result(a), Some(&CommandResult::Ok));
    let id = replica(&cluster, 0).log()[0].id();
    cluster.crash(cluster.replica(0));
    run_until_view(&mut cluster, &[1, 2, 3, 4], ViewId::new(1, 0));
    for rank in 1..5 {
        assert_eq!(replica(&cluster, rank).log()[0].id(), id, "r{rank} holds A at slot 1");
    }
}

#[test]
fn scenario_20_a_stale_replica_log_is_ignored_by_the_merge() {
    // Goal: only logs of the latest normal view are merged. Method (n = 5): r4 logs C at slot 3
    // in <0,0>, which nobody else receives; r0 crashes and r4 is cut off while <1,0> starts
    // and puts a NO-OP then D at slots 3 and 4. Then r1 crashes and r4 is back: <2,0>'s merge
    // sees r4's longer log of <0,0> and ignores it: slot 3 stays a NO-OP.
    let mut cluster = cluster(5, 2);
    let (c0, c1, r4) = (cluster.client(0), cluster.client(1), cluster.replica(4));
    for value in ["a", "b"] {
        let op = cluster.submit(c0, Command::set(value, "1"));
        cluster.deliver_all();
        assert!(cluster.result(op).is_some());
    }
    submit_and_stamp(&mut cluster, c1, Command::set("c", "1"));
    cluster.drop_where(|e| is_stamped(e) && e.to != r4);
    cluster.deliver_all();
    assert_eq!(replica(&cluster, 4).log().len(), 3);
    cluster.crash(cluster.replica(0));
    cluster.isolate(r4);
    run_until_view(&mut cluster, &[1, 2, 3], ViewId::new(1, 0));
    let d = cluster.submit(c0, Command::set("d", "1"));
    assert!(cluster.run_until(100_000_000, |c| c.result(d).is_some()));
    assert!(replica(&cluster, 1).log()[2].is_no_op(), "<1,0> dropped seq 3");
    cluster.crash(cluster.replica(1));
    cluster.heal(r4);
    run_until_view(&mut cluster, &[2, 3, 4], ViewId::new(2, 0));
    for rank in 2..5 {
        assert!(replica(&cluster, rank).log()[2].is_no_op(), "r{rank}: slot 3 is the NO-OP of <1,0>");
    }
    assert_logs_equal(&cluster, &[2, 3, 4]);
}

#[test]
fn scenario_27_session_change_with_silent_tail_loss() {
    // Goal: the last message of session 0 reached a minority (no drop notification is possible
    // across sessions); after the view change every replica holds one log, and the client
    // completes once, in the new view or by its retry. Method: A reaches r1 only; sequencer 0
    // crashes; timers run.
    let mut cluster = cluster(3, 1);
    let (client, r1) = (cluster.client(0), cluster.replica(1));
    let a = submit_and_stamp(&mut cluster, client, Command::IncrBy { key: "n".into(), delta: 1 });
    cluster.drop_where(|e| is_stamped(e) && e.to != r1);
    cluster.deliver_all();
    cluster.crash(sequencer(&cluster, 0));
    assert!(cluster.run_until(300_000_000, |c| c.result(a).is_some()));
    assert_eq!(cluster.result(a), Some(&CommandResult::Integer(1)), "executed once");
    assert_eq!(replica(&cluster, 0).view().session_num, 1);
    cluster.run_for(5_000_000);
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

// ---- recovery of a restarted replica (§5.2.5, `recovery.rs`) ----------------------------

fn write_all(cluster: &mut Cluster<NoPaxos>, client: NodeId, values: &[&'static str]) {
    for &value in values {
        let op = cluster.submit(client, Command::append("k", value));
        assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()), "append {value} completes");
    }
}

#[test]
fn recovery_a_restarted_follower_rejoins_with_the_leaders_log() {
    // Goal: a restarted follower asks for recovery once its incarnation is durable, answers
    // nothing before it has recovered, installs the leader's log in the current view and then
    // takes part: with the other follower crashed, it completes the quorum of new requests,
    // and a later leader crash keeps every write (its recovered log counts in the view change).
    // Method: 3 replicas; two writes; crash and restart r2; check its durable record and the
    // recovery; crash r1; two more writes; crash r0 and read from the new view <1,0>... which
    // needs r1 back, so r1 restarts and recovers too.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let (r0, r1, r2) = (cluster.replica(0), cluster.replica(1), cluster.replica(2));
    write_all(&mut cluster, client, &["1", "2"]);
    cluster.crash(r2);
    cluster.restart(r2);
    assert_eq!(
        cluster.durable(r2),
        &[Durable::Launched { incarnation: 0 }, Durable::Launched { incarnation: 1 }],
        "one record per start"
    );
    assert!(cluster.node(r2).is_recovering(), "amnesiac until recovered");
    assert!(cluster.run_until(50_000_000, |c| !c.node(c.replica(2)).is_recovering()), "r2 recovered");
    assert_eq!(event(&cluster, r2, "recovered"), 1);
    assert_eq!(replica(&cluster, 2).status_kind(), Status::Normal);
    assert_eq!(replica(&cluster, 2).view(), ViewId::new(0, 0));
    assert_logs_equal(&cluster, &[0, 2]);
    // r2 now stands in for r1: the leader and r2 are the f + 1.
    cluster.crash(r1);
    write_all(&mut cluster, client, &["3", "4"]);
    assert_logs_equal(&cluster, &[0, 2]);
    // r1 rejoins; then the leader fails and r1, r2 form <1,0> from their logs.
    cluster.restart(r1);
    assert!(cluster.run_until(50_000_000, |c| !c.node(c.replica(1)).is_recovering()), "r1 recovered");
    cluster.crash(r0);
    run_until_view(&mut cluster, &[1, 2], ViewId::new(1, 0));
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("1234".into())), "no acknowledged write lost");
    // The old leader comes back as a follower of <1,0>.
    cluster.restart(r0);
    assert!(cluster.run_until(50_000_000, |c| !c.node(c.replica(0)).is_recovering()), "r0 recovered");
    assert_eq!(replica(&cluster, 0).view(), ViewId::new(1, 0));
    cluster.run_for(5_000_000);
    assert_logs_equal(&cluster, &[0, 1, 2]);
}

#[test]
fn recovery_a_restarted_leader_waits_for_the_next_view() {
    // Goal: the leader of the highest view among the answers must answer with its log; when
    // that leader is the recovering replica's own former incarnation, it cannot, so recovery
    // waits until the others replace it (<1,0>) and recovers from the new leader. Before that
    // it sends nothing but `Recovery`. Method: crash and restart r0 at once; record what it
    // sends while recovering.
    let mut cluster = cluster(3, 1);
    let client = cluster.client(0);
    let r0 = cluster.replica(0);
    write_all(&mut cluster, client, &["1"]);
    cluster.crash(r0);
    cluster.restart(r0);
    cluster.keep_sent_log();
    assert!(cluster.run_until(200_000_000, |c| !c.node(c.replica(0)).is_recovering()), "r0 recovered");
    let sent_while_recovering: Vec<&Message> =
        cluster.sent_log().iter().filter(|e| e.from == r0).map(|e| &e.message).collect();
    assert!(sent_while_recovering.iter().all(|m| matches!(m, Message::Recovery { .. })), "{sent_while_recovering:?}");
    assert!(sent_while_recovering.len() >= 2, "asked again while the old view's leader was itself");
    assert_eq!(replica(&cluster, 0).view(), ViewId::new(1, 0), "recovered into the view that replaced it");
    assert!(!replica(&cluster, 0).is_leader());
    let op = cluster.submit(client, Command::get("k"));
    assert!(cluster.run_until(100_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("1".into())));
}

#[test]
fn recovery_answers_of_an_earlier_incarnation_and_malformed_ones_are_dropped() {
    // Goal: the nonce keeps answers to an earlier incarnation out; a state that does not fit
    // its log is dropped, counted, not a panic. Method: restart r2 twice; inject an answer
    // carrying the first restart's nonce, and one with a session-msg-num beyond its log.
    let mut cluster = cluster(3, 1);
    let (r0, r2) = (cluster.replica(0), cluster.replica(2));
    cluster.crash(r2);
    cluster.restart(r2);
    cluster.crash(r2);
    cluster.restart(r2);
    assert_eq!(cluster.durable(r2).last(), Some(&Durable::Launched { incarnation: 2 }));
    let state = super::messages::RecoveryState {
        session_msg_num: 5,
        sync_point: 0,
        log: std::sync::Arc::new(super::log::Log::default()),
    };
    let view = ViewId::new(0, 0);
    cluster.inject(r0, r2, Message::RecoveryResponse { view, nonce: 1, state: None });
    cluster.inject(r0, r2, Message::RecoveryResponse { view, nonce: 2, state: Some(state) });
    cluster.deliver_all_where(|e| e.to == r2 && matches!(e.message, Message::RecoveryResponse { .. }) && e.from == r0);
    let dropped = &cluster.stats(r2).dropped;
    assert_eq!(dropped.get("recovery response of another incarnation").copied(), Some(1), "{dropped:?}");
    assert_eq!(dropped.get("malformed recovery response").copied(), Some(1), "{dropped:?}");
    assert!(cluster.run_until(50_000_000, |c| !c.node(c.replica(2)).is_recovering()));
}

// ---- bounded memory: checkpoints and log truncation (`log.rs`) -----------------------------

#[test]
fn bounded_log_over_a_minute_with_crashes_recovery_and_a_view_change() {
    // Goal: the entries a replica holds stay under a bound fixed by `checkpoint_interval` over
    // 60 s of simulated time, while the log itself grows without bound; a restarted replica
    // recovers from a checkpoint and a suffix; a view change merges truncated logs; nothing
    // acknowledged is lost. Method: 3 replicas, checkpoint_interval 16, one client incrementing
    // a counter every 5 ms for 60 s; r2 down from 20 s to 25 s, the leader r0 down from 40 s
    // to 45 s; sample every replica's held entries after every operation.
    let config = Config { checkpoint_interval: 16, ..Config::default() };
    let topology = Layout::new(3, 1).topology::<NoPaxos>(&config);
    let mut cluster = Cluster::with_topology(topology, config, 1);
    cluster.deliver_all();
    let client = cluster.client(0);
    let (r0, r2) = (cluster.replica(0), cluster.replica(2));
    let mut acknowledged = 0;
    let mut held_max = 0;
    // Entries past the sync-point are at most what one heartbeat appends here (one or two),
    // so 2 intervals plus a margin.
    let bound = 2 * 16 + 8;
    while cluster.now_ns() < 60_000_000_000 {
        let second = cluster.now_ns() / 1_000_000_000;
        match second {
            20 if cluster.is_up(r2) => cluster.crash(r2),
            25 if !cluster.is_up(r2) => cluster.restart(r2),
            40 if cluster.is_up(r0) => cluster.crash(r0),
            45 if !cluster.is_up(r0) => cluster.restart(r0),
            _ => {}
        }
        let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 1 });
        assert!(cluster.run_until(1_000_000_000, |c| c.result(op).is_some()), "op at {second} s completes");
        acknowledged += 1;
        for rank in 0..3 {
            if cluster.is_up(cluster.replica(rank)) {
                let held = replica(&cluster, rank).log().len();
                held_max = held_max.max(held);
                assert!(held <= bound, "r{rank} holds {held} entries at {second} s (bound {bound})");
            }
        }
        cluster.advance(5_000_000);
    }
    let op = cluster.submit(client, Command::IncrBy { key: "n".into(), delta: 0 });
    assert!(cluster.run_until(1_000_000_000, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(acknowledged)), "every increment counted once");
    let leader = replica(&cluster, 1);
    assert_eq!(leader.view(), ViewId::new(1, 0), "the view change happened");
    assert!(leader.log_base() > 10_000, "the log grew to {} slots, truncated", leader.log_base());
    assert!(event(&cluster, r2, "recovered") == 1 && event(&cluster, r0, "recovered") == 1);
    assert!(event(&cluster, r2, "checkpoint_installed") >= 1, "r2 recovered from a checkpoint");
    eprintln!("held at most {held_max} entries of {} slots", leader.log_base() + leader.log().len() as u64);
}

#[test]
fn view_changes_that_time_out_in_a_row_wait_longer_each_time() {
    // Goal: a view change that cannot finish in the timeout (a real cluster's logs carry a
    // state of tens of megabytes) must not be abandoned for the next one at the same pace for
    // ever: each timeout in a row doubles the next, up to 32 times. Method: 3 replicas; r2 is
    // cut off, so its view changes never finish; over 10 s of simulated time, count its
    // timeouts: about 1,000 at the configured 10 ms, at most 5 + 10 s / 160 ms (the least
    // randomised timeout at 32 times) with the doubling. Then it is reconnected: its higher
    // view is started with the others, and a request completes.
    let config = Config::default();
    let topology = Layout::new(3, 1).topology::<NoPaxos>(&config);
    let mut cluster = Cluster::with_topology(topology, config, 1);
    cluster.deliver_all();
    let r2 = cluster.replica(2);
    cluster.isolate(r2);
    cluster.advance(10_000_000_000);
    let timeouts = event(&cluster, r2, "view_change_timeout");
    assert!((5..=70).contains(&timeouts), "{timeouts} view-change timeouts in 10 s");
    cluster.heal_all();
    let client = cluster.client(0);
    let op = cluster.submit(client, Command::set("k", "v"));
    assert!(cluster.run_until(30_000_000_000, |c| c.result(op).is_some()), "the cluster serves");
    assert!(cluster.run_until(30_000_000_000, |c| event(c, r2, "view_started") >= 1), "r2 is in a view again");
}
