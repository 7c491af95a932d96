//! Durable mode (`durable.rs`), step by step on the testkit: what a replica writes, what waits
//! for it, and how a restarted replica resumes. The simulator's power-cut campaign and its
//! canary are in `crates/sim/tests/nezha_scenarios.rs`, the real processes' whole-cluster
//! restart in `crates/cli/tests/whole_cluster_restart.rs`.

use super::messages::Message;
use super::replica::{Replica, Status};
use super::{Config, Durable, Nezha, Timer};
use crate::testkit::Cluster;
use ordo_core::{ClientId, ClockReading, Command, CommandResult, Effect, Node, NodeId, Outbox, RequestId};

const MS: u64 = 1_000_000;

fn durable() -> Config {
    Config { proxies: 0, leader_release_ahead_ns: MS, durable: true, ..Config::default() }
}

fn execute(cluster: &mut Cluster<Nezha>, client: NodeId, command: Command) -> CommandResult {
    let op = cluster.submit(client, command);
    assert!(cluster.run_until(100 * MS, |c| c.result(op).is_some()), "op {op} completes");
    cluster.result(op).expect("completed").clone()
}

/// A durable 3-replica cluster whose client appended `0,` to `count - 1,` to key `k`.
fn with_appends(count: usize) -> (Cluster<Nezha>, NodeId) {
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, durable());
    let client = cluster.client(0);
    for i in 0..count {
        execute(&mut cluster, client, Command::append("k", format!("{i},")));
    }
    (cluster, client)
}

/// What a read of `k` returns after `count` appends.
fn appended(count: usize) -> CommandResult {
    CommandResult::Value((0..count).map(|i| format!("{i},")).collect::<String>().into())
}

/// Replica `node`'s log: its view, its synced entries' ids and its unsynced entries' ids.
fn log_of(cluster: &Cluster<Nezha>, node: NodeId) -> (u64, Vec<ordo_core::RequestId>, Vec<ordo_core::RequestId>) {
    let replica = cluster.node_as::<Replica>(node);
    let ids = |slots: &mut dyn Iterator<Item = &super::replica::Slot>| slots.map(|slot| slot.entry.id).collect();
    (replica.view, ids(&mut replica.synced.iter()), ids(&mut replica.unsynced.iter()))
}

#[test]
fn every_send_of_a_handler_waits_for_what_the_handler_wrote() {
    // Goal: the rule durable mode rests on, at the level of one handler's effects: the records
    // of what it changed come before its sends, and every send waits for the last of them. A
    // fast-reply that left before its entry was durable would vouch, after a crash, for an
    // entry the replica no longer holds. Method: a lone follower releases a request: the
    // handler's effects hold an `Unsynced` record with the entry, then the fast-reply, which
    // waits for that record's ticket.
    let context = ordo_core::NodeContext::<Nezha> {
        id: NodeId(1),
        topology: std::sync::Arc::new(crate::testkit::topology(3, 1)),
        config: durable(),
        seed: 7,
        new_state_machine: || Box::new(ordo_core::KvStore::new()),
        incarnation: 0,
    };
    let mut follower = Replica::new(context, Vec::new(), super::Flaw::None);
    let mut out = Outbox::default();
    follower.on_start(ClockReading::exact(0), &mut out);
    assert!(
        matches!(out.effects(), [Effect::Persist { record: Durable::Image(_), .. }, ..]),
        "the first boot writes an image of the empty log"
    );
    let request = Message::Requests {
        requests: vec![(RequestId { client: ClientId(3), number: 1 }, Command::set("k", "v"))],
        send_ns: 0,
        bound_ns: 100,
        sender_error_ns: 0,
        slow_replies: false,
    };
    follower.on_message(ClockReading::exact(50), NodeId(3), request, &mut out);
    let start = out.effects().len();
    follower.on_timer(ClockReading::exact(200), Timer::Release, &mut out);
    let handler = &out.effects()[start..];
    let ticket = handler
        .iter()
        .find_map(|effect| match effect {
            Effect::Persist { record: Durable::Unsynced { added, .. }, ticket, .. } if added.len() == 1 => {
                Some(*ticket)
            }
            _ => None,
        })
        .expect("the release wrote the entry");
    let sends: Vec<_> = handler
        .iter()
        .filter_map(|effect| match effect {
            Effect::Send { after, .. } | Effect::Multicast { after, .. } => Some(*after),
            _ => None,
        })
        .collect();
    assert!(!sends.is_empty(), "the follower fast-replied");
    assert!(sends.iter().all(|after| *after == Some(ticket)), "every send waits for the record: {sends:?}");
}

#[test]
fn a_durable_replica_sends_nothing_before_its_log_is_written() {
    // Goal: a follower that crashes before its writes are durable loses them with everything it
    // would have sent about them, and resumes as a follower that missed some messages. Method:
    // a follower with manual durability takes a write and sends nothing while its records wait
    // (the handler-level rule is pinned by the test above); a crash before the flush leaves
    // its records as they were, the write still commits through the others (with f = 1, the
    // slow path), and the restarted follower resumes normal, serves the read and catches up.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, durable());
    cluster.keep_sent_log();
    let (client, follower) = (cluster.client(0), cluster.replica(1));
    assert_eq!(execute(&mut cluster, client, Command::set("a", "1")), CommandResult::Ok);
    cluster.set_manual_durability(follower, true);
    let sent_by = |c: &Cluster<Nezha>| c.sent_log().iter().filter(|e| e.from == follower).count();
    let before = sent_by(&cluster);
    let op = cluster.submit(client, Command::set("b", "2"));
    cluster.run_for(5 * MS);
    assert!(cluster.unflushed_count(follower) > 0, "the follower wrote the entry it released");
    assert_eq!(sent_by(&cluster), before, "and sent nothing while the write is not durable");
    let records = cluster.durable(follower).len();
    cluster.crash(follower);
    assert_eq!(cluster.durable(follower).len(), records, "the crash lost the unflushed write only");
    assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "the write commits without the follower");
    cluster.set_manual_durability(follower, false);
    cluster.restart(follower);
    assert_eq!(cluster.node_as::<Replica>(follower).status, Status::Normal, "a resumed follower is normal");
    assert_eq!(execute(&mut cluster, client, Command::get("b")), CommandResult::Value("2".into()));
    cluster.run_for(20 * MS);
    let digests: Vec<_> =
        cluster.replicas().iter().map(|&r| cluster.node(r).state_machine().expect("replica").key_digests()).collect();
    assert!(digests.windows(2).all(|pair| pair[0] == pair[1]), "the resumed follower caught up");
}

#[test]
fn a_power_cut_keeps_every_log_and_the_cluster_serves_again() {
    // Goal: after every replica stops at once, each resumes its log and view from its records
    // (none rejoins: there would be no one to rejoin from), the leader's view change elects a
    // new one, and every acknowledged write is read back. Method: 40 appends, then crash every
    // replica; each restarted replica holds the same synced log as before (the leader's own
    // log is its whole log), the view moves on, and a read returns all 40 appends.
    let (mut cluster, client) = with_appends(40);
    cluster.run_for(20 * MS);
    let before: Vec<_> = cluster.replicas().iter().map(|&r| log_of(&cluster, r)).collect();
    for replica in cluster.replicas() {
        cluster.crash(replica);
    }
    for replica in cluster.replicas() {
        cluster.restart(replica);
        let resumed = log_of(&cluster, replica);
        let was = &before[replica.index()];
        assert_eq!(resumed.1, was.1, "replica {replica} resumed its synced log");
        assert_eq!(resumed.2, was.2, "replica {replica} resumed its unsynced entries");
        let stats = cluster.stats(replica);
        assert_eq!(stats.events.get("durable_resume"), Some(&1), "replica {replica} resumed from its records");
        assert_eq!(stats.events.get("rejoin"), None, "replica {replica} did not rejoin");
    }
    assert_eq!(execute(&mut cluster, client, Command::get("k")), appended(40));
    let view = cluster.node_as::<Replica>(cluster.replica(0)).view;
    assert!(view > before[0].0, "the resumed leader handed over through a view change (view {view})");
}

#[test]
fn a_log_rebuilt_by_a_view_change_is_written_whole() {
    // Goal: when a replica's log is replaced rather than extended (a view change here; a folded
    // checkpoint and a state transfer alike), its records restart from one image of the new log,
    // so a restart never replays entries of a log it gave up. Method: a view change (the
    // leader isolated); the records of each replica in the new view then begin with an image of
    // the new view, and a restart resumes that view's log.
    let (mut cluster, client) = with_appends(10);
    let old_leader = cluster.replica(0);
    cluster.isolate(old_leader);
    // Rank 1 leads view 1; rank 2 follows in it.
    let follower = cluster.replica(2);
    assert!(
        cluster.run_until(2_000 * MS, |c| c.node_as::<Replica>(follower).view > 0
            && c.node_as::<Replica>(follower).status == Status::Normal),
        "the followers elect a new leader"
    );
    execute(&mut cluster, client, Command::append("k", "10,"));
    let Some(Durable::Image(image)) = cluster.durable(follower).first() else { panic!("records begin with an image") };
    assert!(image.view.view > 0 && image.view.normal, "the image is of the new view: {:?}", image.view);
    let before = log_of(&cluster, follower);
    cluster.crash(follower);
    cluster.restart(follower);
    assert_eq!(log_of(&cluster, follower), before, "the restarted replica resumed the new view's log");
    cluster.heal_all();
    assert_eq!(execute(&mut cluster, client, Command::get("k")), appended(11));
}

#[test]
fn a_diskless_replica_ignores_durable_records_and_rejoins() {
    // Goal: switching a cluster from durable to diskless mode cannot make a replica act on
    // records it no longer keeps up to date. Method: a replica that ran in durable mode is
    // restarted with `durable = false`: it rejoins through recovery, as any diskless restart.
    let mut cluster: Cluster<Nezha> = Cluster::new(3, 1, durable());
    let client = cluster.client(0);
    execute(&mut cluster, client, Command::set("a", "1"));
    let follower = cluster.replica(2);
    let records = cluster.durable(follower).to_vec();
    assert!(matches!(records.first(), Some(Durable::Image(_))), "a durable replica's records begin with an image");
    let context = ordo_core::NodeContext::<Nezha> {
        id: follower,
        topology: cluster.topology().clone(),
        config: Config { durable: false, ..durable() },
        seed: 3,
        new_state_machine: || Box::new(ordo_core::KvStore::new()),
        incarnation: 1,
    };
    let diskless = Replica::new(context, records, super::Flaw::None);
    assert_eq!(diskless.status, Status::Recovering, "it rejoins");
    diskless.check_invariants();
}
