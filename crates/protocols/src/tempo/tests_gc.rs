//! Garbage collection (`gc.rs`): executed commands are forgotten once every replica of their
//! shard executed them, never before, and late or duplicated messages about a forgotten
//! command neither bring it back nor run it again.

use super::gc::{Forgotten, Stamps};
use super::messages::{Dot, Message};
use super::tests::{Scenario, dot};
use ordo_core::{ClientId, Command, CommandResult, RequestId};

fn set(i: u64) -> Command {
    Command::set(format!("k{}", i % 3), format!("v{i}"))
}

/// Runs `count` SETs one after the other from the scenario's client, each to completion.
fn run_sets(s: &mut Scenario, count: u64) {
    let client = s.client();
    for i in 0..count {
        let op = s.submit(client, set(i));
        s.run_ms(5);
        assert_eq!(s.result(op), Some(CommandResult::Ok), "SET {i} completed");
    }
    s.run_ms(5);
}

#[test]
fn forgotten_record_folds_old_dots_into_a_floor() {
    // Goal: the record of forgotten dots is bounded per client and exact above its floor.
    // Method: forget 10 dots of one client with a window of 4.
    let mut forgotten = Forgotten::default();
    let client = ClientId(7);
    let dot = |number: u64, attempt: u32| Dot { request: RequestId { client, number }, attempt };
    for number in 1..=10 {
        forgotten.insert(dot(number, 0), Stamps { shard: number, last: number }, 4);
    }
    assert_eq!(forgotten.len(), 4, "four dots held one by one");
    assert!(forgotten.contains(dot(3, 5)), "below the floor, every attempt counts as forgotten");
    assert_eq!(forgotten.stamps(dot(3, 0)), None, "below the floor, no timestamp is kept");
    assert_eq!(forgotten.stamps(dot(9, 0)), Some(Stamps { shard: 9, last: 9 }));
    assert!(!forgotten.contains(dot(9, 1)), "another attempt above the floor is not forgotten");
    assert!(!forgotten.contains(dot(11, 0)), "a later request is not forgotten");
    assert!(!forgotten.contains(Dot { request: RequestId { client: ClientId(8), number: 1 }, attempt: 0 }));
}

#[test]
fn executed_commands_are_forgotten_everywhere() {
    // Goal: once every replica of the shard executed a command, every replica forgets it, and
    // the instance table stays small however many commands ran. Method: r = 3, 60 SETs one
    // after the other, then a few promise periods.
    let mut s = Scenario::new(1, 3, 1, 1);
    run_sets(&mut s, 60);
    for node in s.shard(0) {
        let replica = s.state(node);
        assert_eq!(s.executed(node), 60, "{node} executed every SET");
        assert!(replica.instances.is_empty(), "{node} forgot every command: {}", replica.instances.len());
        assert!(replica.instances_peak <= 5, "{node} never held more than a few: {}", replica.instances_peak);
        assert_eq!(s.events(node, "forgotten"), 60, "{node} forgot 60 commands");
    }
}

#[test]
fn a_replica_that_did_not_execute_keeps_everyone_from_forgetting() {
    // Goal: nothing is forgotten before every replica of the shard executed it. Method: r = 3,
    // f = 1; replica 2's executed reports never arrive: the others keep every command, and
    // forget them all once the reports flow again.
    let mut s = Scenario::new(1, 3, 1, 1);
    let silent = s.replica(2);
    let client = s.client();
    for i in 0..10 {
        let op = s.submit(client, set(i));
        for _ in 0..5 {
            s.tick_ms();
            s.deliver_all_dropping(|from, _, m| from == silent && matches!(m, Message::Executed { .. }));
        }
        assert!(s.completed(op), "SET {i} completed");
    }
    for rank in 0..2 {
        let replica = s.state(s.replica(rank));
        assert_eq!(replica.instances.len(), 10, "rank {rank} keeps what rank 2 may still need");
        assert_eq!(replica.gc.forgotten.len(), 0, "rank {rank} forgot nothing");
    }
    s.run_ms(5);
    for node in s.shard(0) {
        assert!(s.state(node).instances.is_empty(), "{node} forgot everything once rank 2 reported");
    }
}

#[test]
fn late_messages_about_a_forgotten_command_are_dropped() {
    // Goal: a duplicated or late MSubmit, MPropose, MPayload, MCommit, MConsensus, MRec or Help
    // for a forgotten command neither recreates it nor runs it again; each is counted. Method:
    // run 5 SETs to completion and forgetting, then deliver again every message about the first
    // one that the replicas exchanged.
    let mut s = Scenario::new(1, 3, 1, 1);
    run_sets(&mut s, 5);
    let first = dot(s.client(), 1);
    let replicas = s.shard(0);
    let replays: Vec<_> = s
        .sent()
        .iter()
        .filter(|e| e.message.dot() == Some(first) && replicas.contains(&e.to))
        .map(|e| (e.from, e.to, e.message.clone()))
        .collect();
    assert!(replays.len() >= 6, "the first SET took several messages: {}", replays.len());
    for (from, to, message) in replays {
        s.inject(from, to, message);
    }
    s.run_ms(30);
    for node in replicas {
        let replica = s.state(node);
        assert_eq!(s.executed(node), 5, "{node} ran nothing again");
        assert!(replica.instances.is_empty(), "{node} did not bring the command back");
        assert!(s.drops(node, "message about a forgotten command") > 0, "{node} counted the drops");
        assert_eq!(s.events(node, "recovery"), 0, "{node} recovered nothing");
    }
}

#[test]
fn multi_shard_command_is_forgotten_and_still_answers_the_other_shard() {
    // Goal: an MSET over two shards is forgotten in each shard once that shard's replicas ran
    // it; a replica of the other shard that still asks (Help, Stable waiting) gets our shard's
    // timestamp and MStable from the record. Method: 2 shards of 3, one MSET, then a Help and a
    // waiting Stable injected from shard 1 to shard 0.
    let mut s = Scenario::new(2, 3, 1, 1);
    let shard_of = |k: &str| ordo_core::shard_of_key(k.as_bytes(), 2);
    let key = |shard: usize| (0..).map(|i| format!("k{i}")).find(|k| shard_of(k) == shard).expect("a key");
    let (k0, k1) = (key(0), key(1));
    let op = s.submit(s.client(), Command::MSet { pairs: vec![(k0.into(), "a".into()), (k1.into(), "b".into())] });
    s.run_ms(20);
    assert_eq!(s.result(op), Some(CommandResult::Ok));
    let d = dot(s.client(), 1);
    for node in s.shard(0).into_iter().chain(s.shard(1)) {
        assert!(s.state(node).instances.is_empty(), "{node} forgot the MSET");
    }
    let (asker, answerer) = (s.shard(1)[0], s.shard(0)[0]);
    let sent_before = s.sent().len();
    s.inject(asker, answerer, Message::Help { dot: d, payload: None });
    s.inject(asker, answerer, Message::Stable { dot: d, shard: 1, waiting: true });
    s.deliver_all();
    let answers: Vec<&Message> =
        s.sent()[sent_before..].iter().filter(|e| e.from == answerer && e.to == asker).map(|e| &e.message).collect();
    assert!(answers.iter().any(|m| matches!(m, Message::Commit { shard: 0, .. })), "Help answered: {answers:?}");
    assert!(answers.iter().any(|m| matches!(m, Message::Stable { waiting: false, .. })), "Stable answered");
    assert!(s.state(asker).instances.is_empty(), "the answers do not bring the command back at the asker");
}
