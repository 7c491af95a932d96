//! Scenario tests of Multi-Paxos on the step-by-step cluster (`testkit`): the normal case,
//! batching, retries, view changes, state transfer, restarts and bounded memory. Fault-injection
//! tests over many seeds and the canaries are in `tests_faults.rs`.

use super::messages::{Entry, Message, Prepare};
use super::{Config, MultiPaxos, Timer};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{ClientId, Command, CommandResult, KeyDigest, NodeId, Protocol, RequestId};

pub(super) type Kit = Cluster<MultiPaxos>;

/// One second, the patience of every `run_until` here.
pub(super) const SECOND_NS: u64 = 1_000_000_000;

pub(super) fn is_request<P: Protocol<Message = Message>>(envelope: &Envelope<P>) -> bool {
    matches!(envelope.message, Message::Request { .. })
}

pub(super) fn is_prepare<P: Protocol<Message = Message>>(envelope: &Envelope<P>) -> bool {
    matches!(envelope.message, Message::Prepare(_))
}

pub(super) fn digests<P: Protocol>(cluster: &Cluster<P>, node: NodeId) -> Vec<KeyDigest> {
    cluster.node(node).state_machine().expect("replicas have a state machine").key_digests()
}

/// A number from the node's status line (`op=`, `commit=`, `exec=`, `base=`, `log=`, `view=`).
pub(super) fn status_number<P: Protocol>(cluster: &Cluster<P>, node: NodeId, field: &str) -> u64 {
    let status = cluster.status(node);
    let prefix = format!("{field}=");
    let word = status.split(' ').find_map(|word| word.strip_prefix(&prefix));
    word.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no {field} in `{status}`"))
}

/// Submits `command` at `client` and runs the cluster until it completes.
pub(super) fn execute<P: Protocol>(cluster: &mut Cluster<P>, client: NodeId, command: Command) -> CommandResult {
    let op = cluster.submit(client, command);
    assert!(cluster.run_until(SECOND_NS, |c| c.result(op).is_some()), "op {op} did not complete");
    cluster.result(op).expect("completed").clone()
}

/// Runs until every replica that is up executed as far as the others; false if that does not
/// happen within a second.
pub(super) fn try_settle<P: Protocol>(cluster: &mut Cluster<P>) -> bool {
    let replicas = cluster.replicas();
    cluster.run_until(SECOND_NS, |c| {
        let up: Vec<NodeId> = replicas.iter().copied().filter(|&r| c.is_up(r)).collect();
        let executed: Vec<u64> = up.iter().map(|&r| status_number(c, r, "exec")).collect();
        executed.iter().all(|&e| e == executed[0])
    })
}

/// Runs until every replica that is up executed as far as the others.
pub(super) fn settle<P: Protocol>(cluster: &mut Cluster<P>) {
    assert!(try_settle(cluster), "replicas did not converge");
}

/// Asserts that every replica that is up holds the same state.
pub(super) fn assert_agree<P: Protocol>(cluster: &Cluster<P>) {
    let up: Vec<NodeId> = cluster.replicas().into_iter().filter(|&r| cluster.is_up(r)).collect();
    for &replica in &up[1..] {
        assert_eq!(digests(cluster, replica), digests(cluster, up[0]), "{replica} disagrees with {}", up[0]);
    }
}

fn small_checkpoints() -> Config {
    Config { checkpoint_interval: 4, state_transfer_entries_max: 3, ..Config::default() }
}

#[test]
fn normal_case_commits_and_replies_with_f1() {
    // Goal: with three replicas a write commits, executes, is answered and reaches the backups.
    // Method: deliver every message in order, then fire one heartbeat so the backups learn the
    // commit number.
    let mut cluster = Kit::new(3, 1, Config::default());
    let (leader, client) = (cluster.replica(0), cluster.client(0));
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(cluster.status(leader), "view=0 normal leader op=1 commit=1 exec=1 base=0 log=1");
    assert_eq!(cluster.stats(leader).slow_path_commits, 1);
    assert_eq!(cluster.stats(leader).executed, 1);
    assert_eq!(status_number(&cluster, cluster.replica(1), "exec"), 0, "backups wait for the commit number");
    assert!(cluster.fire_timer(leader, &Timer::Heartbeat));
    cluster.deliver_all();
    for replica in cluster.replicas() {
        assert_eq!(cluster.stats(replica).executed, 1);
    }
    assert_agree(&cluster);
}

#[test]
fn normal_case_needs_a_majority_with_f2() {
    // Goal: with five replicas a write commits only once three (leader included) hold it.
    // Method: let the Prepare reach one backup, check nothing commits, then a second backup.
    let mut cluster = Kit::new(5, 1, Config::default());
    let (leader, client) = (cluster.replica(0), cluster.client(0));
    let op = cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all_where(is_request);
    let first = cluster.replica(1);
    cluster.deliver_all_where(|e| e.to == first || e.from == first);
    assert_eq!(status_number(&cluster, leader, "commit"), 0, "two of five is not a majority");
    assert!(cluster.result(op).is_none());
    let second = cluster.replica(2);
    cluster.deliver_all_where(|e| e.to == second || e.from == second);
    assert_eq!(status_number(&cluster, leader, "commit"), 1);
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    assert_eq!(execute(&mut cluster, client, Command::get("k")), CommandResult::Value("v".into()));
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn batching_puts_queued_requests_in_one_prepare() {
    // Goal: requests arriving while the pipeline is full leave together in the next Prepare.
    // Method: a pipeline of one; four clients submit; the first request goes out alone, the
    // other three wait and must leave as one batch of three.
    let config = Config { pipeline_max: 1, ..Config::default() };
    let mut cluster = Kit::new(3, 4, config);
    let ops: Vec<u64> = (0..4).map(|i| cluster.submit(cluster.client(i), Command::set(format!("k{i}"), "v"))).collect();
    cluster.deliver_all_where(is_request);
    let sizes = |cluster: &Kit| -> Vec<usize> {
        cluster
            .pending()
            .filter_map(|e| match &e.message {
                Message::Prepare(prepare) => Some(prepare.entries.len()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(sizes(&cluster), vec![1, 1], "one request in flight, to both backups");
    let mut saw_batch = false;
    while cluster.deliver_next() {
        saw_batch |= sizes(&cluster).contains(&3);
    }
    assert!(saw_batch, "the three queued requests left in one Prepare");
    for op in ops {
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
    }
    assert_eq!(cluster.stats(cluster.replica(0)).slow_path_commits, 4);
}

#[test]
fn retried_request_executes_once() {
    // Goal: the client table makes a retried request execute at most once. Method: lose the
    // reply so the client retries to every replica; the leader answers from its table. Then
    // retry a request that is in the log but not yet committed: the leader ignores the copy.
    // A retry period short against the heartbeat and view-change timeouts, so that waiting for
    // the client's retry fires nothing else.
    let config = Config { client_retry_ns: 1_000_000, ..Config::default() };
    let mut cluster = Kit::new(3, 1, config.clone());
    let (leader, client) = (cluster.replica(0), cluster.client(0));
    let incr = Command::IncrBy { key: "n".into(), delta: 1 };
    let op = cluster.submit(client, incr.clone());
    cluster.deliver_all_where(|e| e.to != client);
    assert_eq!(cluster.drop_where(|e| e.to == client), 1, "the reply is lost");
    cluster.advance(config.client_retry_ns * 5 / 4); // the sweep tick after one retry period
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(1)));
    assert_eq!(cluster.stats(leader).executed, 1);

    let op = cluster.submit(client, incr);
    cluster.deliver_all_where(is_request);
    let held = cluster.drop_where(is_prepare);
    assert_eq!(held, 2, "the Prepares are lost");
    cluster.advance(config.client_retry_ns * 5 / 4); // the sweep tick after one retry period
    cluster.deliver_all_where(is_request);
    assert_eq!(cluster.stats(leader).dropped.get("request already in the log"), Some(&1));
    assert!(cluster.run_until(SECOND_NS, |c| c.result(op).is_some()), "the leader retransmits");
    assert_eq!(cluster.result(op), Some(&CommandResult::Integer(2)));
    settle(&mut cluster);
    for replica in cluster.replicas() {
        assert_eq!(cluster.stats(replica).executed, 2, "{replica} executed each request once");
    }
}

#[test]
fn duplicate_and_old_prepares_are_ignored() {
    // Goal: a Prepare a backup already holds changes nothing but is acknowledged again. Method:
    // duplicate one Prepare in the network and deliver both copies.
    let mut cluster = Kit::new(3, 1, Config::default());
    let (backup, client) = (cluster.replica(1), cluster.client(0));
    cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all_where(is_request);
    let id = cluster.pending().find(|e| e.to == backup && is_prepare(e)).expect("a Prepare to the backup").id;
    cluster.duplicate(id).expect("the Prepare is in the network");
    cluster.deliver_all();
    assert_eq!(cluster.stats(backup).dropped.get("duplicate prepare"), Some(&1));
    assert_eq!(status_number(&cluster, backup, "op"), 1);
    assert_eq!(cluster.durable(backup).len(), 1, "the entry was written once");
}

#[test]
fn leader_crash_view_change_keeps_committed_entries() {
    // Goal: after the leader crashes, the next view's leader holds every committed entry and
    // the client's outstanding request completes. Method: three writes commit; a fourth reaches
    // only the leader, which crashes; timers drive the view change and the client's retry.
    let mut cluster = Kit::new(3, 1, Config::default());
    let client = cluster.client(0);
    for i in 0..3 {
        assert_eq!(execute(&mut cluster, client, Command::set(format!("k{i}"), "v")), CommandResult::Ok);
    }
    let op = cluster.submit(client, Command::set("k3", "v"));
    cluster.deliver_all_where(is_request);
    cluster.crash(cluster.replica(0));
    cluster.drop_where(|_| true);
    assert!(cluster.run_until(SECOND_NS, |c| c.result(op).is_some()), "the request completes");
    let new_leader = cluster.replica(1);
    assert!(cluster.status(new_leader).starts_with("view=1 normal leader"), "{}", cluster.status(new_leader));
    assert_eq!(cluster.stats(new_leader).events.get("view_change"), Some(&1));
    for i in 0..4 {
        assert_eq!(execute(&mut cluster, client, Command::get(format!("k{i}"))), CommandResult::Value("v".into()));
    }
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn view_change_skips_a_dead_next_leader() {
    // Goal: views keep advancing when the next leader is dead too. Method: five replicas; the
    // leaders of views 0 and 1 crash; the view change to 1 cannot finish, so it times out and
    // view 2's leader takes over.
    let mut cluster = Kit::new(5, 1, Config::default());
    let client = cluster.client(0);
    assert_eq!(execute(&mut cluster, client, Command::set("a", "1")), CommandResult::Ok);
    cluster.crash(cluster.replica(0));
    cluster.crash(cluster.replica(1));
    assert_eq!(execute(&mut cluster, client, Command::get("a")), CommandResult::Value("1".into()));
    let leaders: Vec<NodeId> =
        cluster.replicas().into_iter().filter(|&r| cluster.status(r).contains("normal leader")).collect();
    assert_eq!(leaders.len(), 1, "one normal leader");
    assert!(status_number(&cluster, leaders[0], "view") >= 2, "views 0 and 1 were skipped");
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn partitioned_backup_catches_up_across_a_snapshot() {
    // Goal: a backup cut off while the others truncated their logs catches up by state
    // transfer: a snapshot, then entries in rounds. Method: checkpoints every 4 entries, at most
    // 3 entries per NewState; isolate a backup for 20 writes, heal, let heartbeats reveal the gap.
    let mut cluster = Kit::new(3, 1, small_checkpoints());
    let (lagging, client) = (cluster.replica(2), cluster.client(0));
    cluster.isolate(lagging);
    for i in 0..20 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), format!("{i}")));
    }
    assert!(status_number(&cluster, cluster.replica(0), "base") > 0, "the leader truncated its log");
    assert_eq!(status_number(&cluster, lagging, "op"), 0);
    cluster.heal(lagging);
    settle(&mut cluster);
    assert_agree(&cluster);
    let stats = cluster.stats(lagging);
    assert!(stats.events.contains_key("state_transfer"), "{:?}", stats.events);
    assert!(stats.events.contains_key("snapshot_installed"), "{:?}", stats.events);
    assert_eq!(status_number(&cluster, lagging, "exec"), 20);
}

#[test]
fn a_backup_lagging_less_than_an_interval_catches_up_without_a_snapshot() {
    // Goal: a checkpoint keeps a tail of one interval behind its snapshot, so a backup that
    // missed fewer entries than that fetches entries, not the whole state (a snapshot of a big
    // state once took seconds to move and stalled a real cluster). Method: checkpoints every 8;
    // the backup misses ops 11..=20 while the others checkpoint at 16 (without the tail their
    // logs would start at 16, past the backup's 10); heal and compare.
    let config = Config { checkpoint_interval: 8, ..Config::default() };
    let mut cluster = Kit::new(3, 1, config);
    let (lagging, client) = (cluster.replica(2), cluster.client(0));
    for i in 0..10 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), "v"));
    }
    cluster.isolate(lagging);
    for i in 10..20 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), "v"));
    }
    let leader = cluster.replica(0);
    assert!(cluster.stats(leader).events.get("checkpoint").is_some_and(|&n| n >= 2), "the leader checkpointed at 16");
    assert_eq!(status_number(&cluster, leader, "base"), 8, "its log keeps the 8 entries behind its snapshot");
    cluster.heal(lagging);
    settle(&mut cluster);
    assert_agree(&cluster);
    assert_eq!(status_number(&cluster, lagging, "exec"), 20);
    // Entries come by the leader's retransmission or a state transfer, whichever is first.
    let events = &cluster.stats(lagging).events;
    assert!(!events.contains_key("snapshot_installed"), "entries were enough: {events:?}");
}

#[test]
fn unanswered_state_requests_back_off() {
    // Goal: each unanswered `GetState` doubles the wait before the next, up to 64 periods: an
    // answer carrying a big snapshot can take longer than one period, and each retry makes a
    // responder send the whole state again (once about 250 a second on a real cluster). Method:
    // a backup in need of state is cut off as soon as it schedules its request (one period
    // before its first send: the entries may be on their way); read its retry timer's deadline
    // at every retry.
    // No view change while cut off: it would end the transfer.
    let config = Config { view_change_timeout_ns: 100 * SECOND_NS, ..small_checkpoints() };
    let period = config.state_transfer_retry_ns;
    let mut cluster = Kit::new(3, 1, config);
    let (lagging, client) = (cluster.replica(2), cluster.client(0));
    cluster.isolate(lagging);
    for i in 0..20 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), "v"));
    }
    cluster.heal(lagging);
    let retry_deadline = |cluster: &Kit| {
        cluster.pending_timers(lagging).into_iter().find(|(timer, _)| *timer == Timer::StateTransfer).map(|(_, at)| at)
    };
    assert!(cluster.run_until(SECOND_NS, |c| retry_deadline(c).is_some()), "the backup asks for state");
    cluster.isolate(lagging);
    let mut deadlines = Vec::new();
    for _ in 0..9 {
        let deadline = retry_deadline(&cluster).expect("a request stays outstanding");
        deadlines.push(deadline);
        cluster.advance(deadline - cluster.now_ns() + 1);
    }
    let gaps: Vec<u64> = deadlines.windows(2).map(|pair| (pair[1] - pair[0]) / period).collect();
    assert_eq!(gaps, vec![1, 2, 4, 8, 16, 32, 64, 64]);
    cluster.heal(lagging);
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn restarted_backup_rebuilds_from_durable_records_and_rejoins() {
    // Goal: a backup restarted from its records has its view, log and snapshot back and
    // catches up. Method: checkpoints every 4; crash a backup after 10 writes, run 5 more,
    // restart it, compare.
    let mut cluster = Kit::new(3, 1, small_checkpoints());
    let (backup, client) = (cluster.replica(2), cluster.client(0));
    for i in 0..10 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), "v"));
    }
    settle(&mut cluster);
    let op_before = status_number(&cluster, backup, "op");
    cluster.crash(backup);
    for i in 10..15 {
        execute(&mut cluster, client, Command::set(format!("k{i}"), "v"));
    }
    cluster.restart(backup);
    assert!(cluster.status(backup).starts_with("view=0 normal backup"), "{}", cluster.status(backup));
    assert_eq!(status_number(&cluster, backup, "op"), op_before, "the log is rebuilt");
    assert_eq!(status_number(&cluster, backup, "exec"), 8, "state comes back from the last snapshot");
    settle(&mut cluster);
    assert_agree(&cluster);
    assert_eq!(status_number(&cluster, backup, "exec"), 15);
}

#[test]
fn restarted_leader_moves_to_the_next_view() {
    // Goal: a leader that restarts does not lead its old view again (it lost its pipeline) but
    // starts a view change, and the cluster goes on. Method: crash and restart the leader at
    // once; the next write completes in view 1.
    let mut cluster = Kit::new(3, 1, Config::default());
    let (leader, client) = (cluster.replica(0), cluster.client(0));
    execute(&mut cluster, client, Command::set("a", "1"));
    cluster.crash(leader);
    cluster.restart(leader);
    assert!(cluster.status(leader).starts_with("view=1 view-change"), "{}", cluster.status(leader));
    assert_eq!(execute(&mut cluster, client, Command::get("a")), CommandResult::Value("1".into()));
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn crash_between_persist_and_prepare_ok() {
    // Goal: a backup that crashes after writing an entry but before its PrepareOk left keeps
    // the entry (the write was durable), one that crashes before the write loses it, and either
    // way the cluster commits once the backup is back. Method: isolate one backup so the other
    // is needed for a majority, hold its writes, crash it at both points.
    let mut cluster = Kit::new(3, 1, Config::default());
    let (leader, backup, client) = (cluster.replica(0), cluster.replica(1), cluster.client(0));
    cluster.isolate(cluster.replica(2));
    cluster.set_manual_durability(backup, true);
    let op = cluster.submit(client, Command::set("a", "1"));
    cluster.deliver_all();
    assert_eq!(cluster.unflushed_count(backup), 1, "the entry is written but not durable");
    cluster.crash(backup);
    cluster.restart(backup);
    assert_eq!(status_number(&cluster, backup, "op"), 0, "the write was lost with the crash");
    assert_eq!(status_number(&cluster, leader, "commit"), 0);

    cluster.deliver_all();
    cluster.run_until(SECOND_NS, |c| c.unflushed_count(backup) > 0);
    cluster.flush_without_sends(backup);
    cluster.crash(backup);
    assert_eq!(status_number(&cluster, leader, "commit"), 0, "the PrepareOk never left");
    cluster.restart(backup);
    assert_eq!(status_number(&cluster, backup, "op"), 1, "the durable entry is back");
    cluster.set_manual_durability(backup, false);
    assert!(cluster.run_until(SECOND_NS, |c| c.result(op).is_some()));
    assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
}

#[test]
fn log_stays_bounded_over_many_commands() {
    // Goal: memory stays bounded: checkpoints keep every log below three checkpoint intervals
    // (the tail of one interval kept behind the snapshot, one executed until the next
    // checkpoint, and the batches in flight). Method: checkpoints every 16; 600 writes from
    // three clients; check every replica's log length as the run goes.
    let config = Config { checkpoint_interval: 16, ..Config::default() };
    let mut cluster = Kit::new(3, 3, config);
    let clients = cluster.clients();
    let mut longest = 0;
    for round in 0..200 {
        let ops: Vec<u64> = clients
            .iter()
            .enumerate()
            .map(|(i, &c)| cluster.submit(c, Command::set(format!("k{}", (round * 3 + i) % 50), "v")))
            .collect();
        assert!(cluster.run_until(SECOND_NS, |c| ops.iter().all(|&op| c.result(op).is_some())));
        for replica in cluster.replicas() {
            longest = longest.max(status_number(&cluster, replica, "log"));
        }
    }
    assert!(longest < 48, "a log reached {longest} entries");
    assert!(longest >= 16, "the log keeps a tail behind its snapshot (longest {longest})");
    assert!(cluster.stats(cluster.replica(1)).events.get("checkpoint").is_some_and(|&n| n >= 30));
    settle(&mut cluster);
    assert_agree(&cluster);
}

#[test]
fn a_big_state_is_snapshotted_less_often_up_to_a_cap() {
    // Goal: a snapshot serializes and persists the whole state, so the entries between two
    // checkpoints grow with its size (`checkpoint_bytes_per_op`), up to
    // `checkpoint_interval_max`, which also sets the log's bound. Method: every 4 entries at
    // least, 100 bytes per op; one 4,000-byte value (a checkpoint at once: its command alone
    // weighs more than the empty state), then small increments. The snapshot holds about 4 KB,
    // so the next comes about 40 entries later, or 10 with a cap of 10.
    let checkpoints_after = |interval_max: u64, writes: usize| {
        let config = Config {
            checkpoint_interval: 4,
            checkpoint_bytes_per_op: 100,
            checkpoint_interval_max: interval_max,
            ..Config::default()
        };
        let mut cluster = Kit::new(3, 1, config);
        let client = cluster.client(0);
        execute(&mut cluster, client, Command::set("big", "v".repeat(4_000)));
        for _ in 1..writes {
            execute(&mut cluster, client, Command::IncrBy { key: "n".into(), delta: 1 });
        }
        settle(&mut cluster);
        cluster.stats(cluster.replica(1)).events.get("checkpoint").copied().unwrap_or(0)
    };
    assert_eq!(checkpoints_after(1_000, 30), 1, "one snapshot in 30 entries, not seven");
    assert_eq!(checkpoints_after(1_000, 60), 2, "the next about 40 entries later");
    assert_eq!(checkpoints_after(10, 30), 3, "capped: at 1, 11 and 21");
}

#[test]
fn the_log_between_and_behind_checkpoints_weighs_no_more_than_the_state() {
    // Goal: the log kept behind a checkpoint (the tail) and the log executed until the next
    // one are bounded in bytes by the state's size, not only in entries: with big values on
    // few keys, an entry count sized for small commands kept many times the state in the log
    // (on a real cluster, a 296 MB checkpoint record, issue 20). Method: 1,000-byte values on
    // 8 keys (a state of about 8 KB), an interval of 128 entries by the state's size over 64
    // bytes per op (and a byte floor of 16 × 64 = 1 KB); after 200 writes, every replica holds
    // at most about twice the state in log entries (the tail plus what was executed since), and
    // checkpoints came about every 9 writes rather than every 128.
    let config = Config { checkpoint_interval: 16, checkpoint_interval_max: 1_000, ..Config::default() };
    let mut cluster = Kit::new(3, 1, config);
    let client = cluster.client(0);
    for i in 0..200 {
        execute(&mut cluster, client, Command::set(format!("key{}", i % 8), "v".repeat(1_000)));
    }
    settle(&mut cluster);
    for rank in 0..3 {
        let replica = cluster.replica(rank);
        let held = status_number(&cluster, replica, "log");
        assert!(held <= 24, "r{rank} holds {held} entries of 1 KB for a state of 8 KB");
        let checkpoints = cluster.stats(replica).events.get("checkpoint").copied().unwrap_or(0);
        assert!(checkpoints >= 10, "r{rank}: {checkpoints} checkpoints in 200 writes");
    }
}

#[test]
fn prepare_from_an_older_view_after_restart_is_refused() {
    // Goal: a restarted replica keeps the promise it made durable: no Prepare of a lower view.
    // Method: move the cluster to view 1, restart a backup, then hand it a Prepare of view 0
    // from the old leader.
    let mut cluster = Kit::new(3, 1, Config::default());
    let client = cluster.client(0);
    cluster.crash(cluster.replica(0));
    execute(&mut cluster, client, Command::set("a", "1"));
    let backup = cluster.replica(2);
    cluster.crash(backup);
    cluster.restart(backup);
    assert!(cluster.status(backup).starts_with("view=1 normal backup"), "{}", cluster.status(backup));
    let op_before = status_number(&cluster, backup, "op");
    let entry = Entry {
        id: RequestId { client: ClientId(99), number: 1 },
        acked_below: 1,
        reply_to: client,
        command: Command::set("a", "x"),
    };
    let stale = Prepare { view: 0, op_number: op_before + 1, entries: vec![entry], commit_number: op_before + 1 };
    cluster.inject(cluster.replica(0), backup, Message::Prepare(stale));
    cluster.deliver_all();
    assert_eq!(cluster.stats(backup).dropped.get("stale view"), Some(&1));
    assert_eq!(status_number(&cluster, backup, "op"), op_before);
}

#[test]
fn fresh_node_starting_late_joins_the_current_view() {
    // Goal: a node with no records that starts late (here the leader of view 0) does not lead
    // a view that has moved on; it joins the current view and catches up. Method: start every
    // node but replica 0; write; then start replica 0.
    let mut cluster = Kit::stopped(3, 1, Config::default(), 7);
    for node in [cluster.replica(1), cluster.replica(2), cluster.client(0)] {
        cluster.start(node);
    }
    let client = cluster.client(0);
    assert_eq!(execute(&mut cluster, client, Command::set("a", "1")), CommandResult::Ok);
    let late = cluster.replica(0);
    cluster.start(late);
    settle(&mut cluster);
    assert!(cluster.status(late).starts_with("view=1 normal backup"), "{}", cluster.status(late));
    assert_agree(&cluster);
    assert_eq!(execute(&mut cluster, client, Command::get("a")), CommandResult::Value("1".into()));
}

#[test]
fn single_replica_commits_alone() {
    // Goal: with one replica (f = 0) the leader commits once its own write is durable.
    // Method: a write and a read on a one-replica cluster.
    let mut cluster = Kit::new(1, 1, Config::default());
    let client = cluster.client(0);
    assert_eq!(execute(&mut cluster, client, Command::set("a", "1")), CommandResult::Ok);
    assert_eq!(execute(&mut cluster, client, Command::get("a")), CommandResult::Value("1".into()));
}
