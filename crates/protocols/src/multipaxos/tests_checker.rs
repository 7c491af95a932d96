//! Tests of the global log-agreement checker (`checker.rs`): hand-made histories it must reject
//! and accept, real replicas whose reports it accepts, and the reused-op canary it catches.

use super::checker::{LogAgreement, Observation, Violation, execution_digest};
use super::tests::{SECOND_NS, execute, is_prepare, is_request, settle, status_number};
use super::{Config, MultiPaxos, Timer};
use crate::testkit::Cluster;
use ordo_core::{ClientId, Command, CommandResult, NodeId, Protocol, RequestId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn request(client: u64, number: u64) -> RequestId {
    RequestId { client: ClientId(client), number }
}

fn committed(op: u64, client: u64, number: u64) -> Observation {
    Observation::Committed { op, id: request(client, number) }
}

fn executed(op: u64, client: u64, number: u64, result: &CommandResult) -> Observation {
    Observation::Executed { op, id: request(client, number), digest: execution_digest(true, Some(result)) }
}

#[test]
fn log_agreement_rejects_two_requests_committed_at_one_op() {
    // Goal (STYLE 15): the checker can fail. Method: n0 commits c1#1 at op 1 and c1#2 at op 2;
    // n1 then reports c2#1 committed at op 2 (a leader that reused the op number).
    let mut checker = LogAgreement::new();
    assert_eq!(checker.check(NodeId(0), &committed(1, 1, 1)), Ok(()));
    assert_eq!(checker.check(NodeId(0), &committed(2, 1, 2)), Ok(()));
    let violation = checker.check(NodeId(1), &committed(2, 2, 1)).expect_err("two requests at op 2");
    let expected =
        Violation::DifferentEntries { op: 2, node: NodeId(1), reported: request(2, 1), earlier: request(1, 2) };
    assert_eq!(violation, expected);
    assert!(violation.to_string().contains("at op 2"), "{violation}");
}

#[test]
fn log_agreement_rejects_an_execution_of_another_request() {
    // Goal: an execution is also a claim about the log. Method: c1#1 committed at op 1, then a
    // replica reports executing c3#1 there.
    let mut checker = LogAgreement::new();
    assert_eq!(checker.check(NodeId(0), &committed(1, 1, 1)), Ok(()));
    let violation = checker.check(NodeId(2), &executed(1, 3, 1, &CommandResult::Ok));
    assert!(matches!(violation, Err(Violation::DifferentEntries { op: 1, .. })), "{violation:?}");
}

#[test]
fn log_agreement_rejects_different_outcomes_of_one_entry() {
    // Goal: diverged state machines are caught at the first op they answer differently. Method:
    // two replicas execute c1#1 at op 3, one getting 1 and the other 2; and a third skips it as
    // a duplicate where the others applied it.
    let mut checker = LogAgreement::new();
    assert_eq!(checker.check(NodeId(0), &executed(3, 1, 1, &CommandResult::Integer(1))), Ok(()));
    let violation = checker.check(NodeId(1), &executed(3, 1, 1, &CommandResult::Integer(2)));
    assert!(matches!(violation, Err(Violation::DifferentExecutions { op: 3, .. })), "{violation:?}");
    let skipped = execution_digest(false, Some(&CommandResult::Integer(1)));
    let duplicate = Observation::Executed { op: 3, id: request(1, 1), digest: skipped };
    assert!(checker.check(NodeId(2), &duplicate).is_err(), "applied and skipped differ");
}

#[test]
fn log_agreement_accepts_agreeing_replicas_and_repeats() {
    // Goal: the passing case. Method: three replicas report the same log in different orders,
    // commits before and after executions, a restarted replica reports it all again, and one
    // replica reports only the ops above its snapshot.
    let mut checker = LogAgreement::new();
    let results = [CommandResult::Ok, CommandResult::Integer(7), CommandResult::Value("v".into())];
    let mut facts = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let op = index as u64 + 1;
        facts.push((NodeId(0), committed(op, 1, op)));
        facts.push((NodeId(0), executed(op, 1, op, result)));
    }
    for (index, result) in results.iter().enumerate().rev() {
        let op = index as u64 + 1;
        facts.push((NodeId(1), executed(op, 1, op, result)));
        facts.push((NodeId(1), committed(op, 1, op)));
    }
    facts.extend(facts.clone());
    facts.push((NodeId(2), committed(3, 1, 3)));
    for (node, fact) in &facts {
        assert_eq!(checker.check(*node, fact), Ok(()), "{node} {fact:?}");
    }
    assert_eq!(checker.len(), 3);
    assert_eq!(checker.unchecked(), 0);
}

#[test]
fn log_agreement_forgets_ops_below_its_window() {
    // Goal: memory stays bounded, and what was forgotten is counted, not misjudged. Method: a
    // window of 4 ops takes ops 1..=6; op 1 and 2 are gone, so another request there passes
    // unchecked, while ops 3..=6 are still compared.
    let mut checker = LogAgreement::with_window(4);
    for op in 1..=6 {
        assert_eq!(checker.check(NodeId(0), &committed(op, 1, op)), Ok(()));
    }
    assert_eq!(checker.len(), 4);
    assert_eq!(checker.check(NodeId(1), &committed(2, 9, 9)), Ok(()));
    assert_eq!(checker.unchecked(), 1);
    assert!(checker.check(NodeId(1), &committed(3, 9, 9)).is_err(), "op 3 is still remembered");
}

#[test]
fn execution_digests_tell_outcomes_apart() {
    // Goal: the digest separates what a replica must agree on. Method: compare digests of
    // results that differ only in variant, bytes, split point or application.
    let value = |text: &str| Some(text.as_bytes().to_vec().into());
    let digests = [
        execution_digest(true, Some(&CommandResult::Ok)),
        execution_digest(true, Some(&CommandResult::Nil)),
        execution_digest(false, Some(&CommandResult::Ok)),
        execution_digest(false, None),
        execution_digest(true, Some(&CommandResult::Value("1".into()))),
        execution_digest(true, Some(&CommandResult::Integer(1))),
        execution_digest(true, Some(&CommandResult::Error("1".into()))),
        execution_digest(true, Some(&CommandResult::Values(vec![value("ab"), value("c")]))),
        execution_digest(true, Some(&CommandResult::Values(vec![value("a"), value("bc")]))),
        execution_digest(true, Some(&CommandResult::Values(vec![None, value("c")]))),
    ];
    for (index, digest) in digests.iter().enumerate() {
        assert!(digests[index + 1..].iter().all(|other| other != digest), "digest {index} repeats");
    }
    assert_eq!(digests[0], execution_digest(true, Some(&CommandResult::Ok)), "digests are deterministic");
}

/// A write commits at the leader with one backup's acknowledgement; no backup hears of the
/// commit; the leader crashes and replica 1 starts view 1 with replica 2. Then a second write.
/// The real protocol keeps the first write at op 1 and puts the second at op 2; a new leader
/// that reuses op 1 commits the second write there, which the old leader reported committed.
fn commit_then_leader_crash_then_write<
    P: Protocol<Config = Config, Message = super::messages::Message, Timer = Timer>,
>() -> Cluster<P> {
    let mut cluster: Cluster<P> = Cluster::new(3, 1, Config::default());
    let (leader, backup, other, client) =
        (cluster.replica(0), cluster.replica(1), cluster.replica(2), cluster.client(0));
    let write = cluster.submit(client, Command::set("x", "1"));
    cluster.deliver_all_where(is_request);
    cluster.drop_where(|e| e.to == other && is_prepare(e));
    cluster.deliver_all_where(|e| e.to == backup && is_prepare(e));
    cluster.deliver_all_where(|e| e.to == leader);
    assert_eq!(status_number(&cluster, leader, "commit"), 1, "the leader committed op 1");
    assert!(cluster.observations() > 0, "the leader reported its commit");
    cluster.deliver_all_where(|e| e.to == client);
    assert_eq!(cluster.result(write), Some(&CommandResult::Ok));
    assert_eq!(status_number(&cluster, backup, "commit"), 0, "the backup never heard of the commit");
    cluster.crash(leader);
    cluster.drop_where(|_| true);
    assert!(cluster.fire_timer(other, &Timer::ViewChange));
    cluster.deliver_all();
    assert!(cluster.status(backup).starts_with("view=1 normal leader"), "{}", cluster.status(backup));
    assert_eq!(execute(&mut cluster, client, Command::set("y", "2")), CommandResult::Ok);
    cluster
}

#[test]
fn real_replicas_report_facts_the_checker_accepts() {
    // Goal: the real protocol's reports pass, through a view change, a restart and a catch-up.
    // Method: the scenario above with Multi-Paxos; then the old leader restarts (replaying its
    // log, so it reports op 1 again) and catches up; the checker must have accepted reports
    // all along, more after the restart.
    let mut cluster = commit_then_leader_crash_then_write::<MultiPaxos>();
    let (old_leader, new_leader, client) = (cluster.replica(0), cluster.replica(1), cluster.client(0));
    assert_eq!(status_number(&cluster, new_leader, "commit"), 2, "the first write kept op 1");
    let before_restart = cluster.observations();
    cluster.restart(old_leader);
    assert_eq!(execute(&mut cluster, client, Command::get("x")), CommandResult::Value("1".into()));
    cluster.run_for(SECOND_NS / 10);
    settle(&mut cluster);
    assert_eq!(status_number(&cluster, old_leader, "exec"), 3, "the old leader caught up");
    assert!(cluster.observations() > before_restart, "the restarted replica reported too");
}

/// A short run under random faults, checked only by the global checker (the kit panics on a
/// violation): random deliveries, drops, crashes and restarts of replicas, time passing and
/// submissions. Returns the observations the checker accepted and the view changes finished.
fn random_faults<P: Protocol<Config = Config>>(seed: u64, steps: u64) -> (u64, u64) {
    let mut cluster: Cluster<P> = Cluster::with_seed(3, 4, Config::default(), seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (replicas, clients) = (cluster.replicas(), cluster.clients());
    for step in 0..steps {
        let roll = rng.random_range(0..1_000u32);
        let pending = cluster.pending_count();
        let replica = replicas[rng.random_range(0..replicas.len())];
        if roll < 4 && !cluster.is_up(replica) {
            cluster.restart(replica);
        } else if roll < 8 && cluster.is_up(replica) && replicas.iter().all(|&r| cluster.is_up(r)) {
            cluster.crash(replica);
        } else if roll < 60 && pending > 0 {
            let id = cluster.pending().nth(rng.random_range(0..pending)).expect("in range").id;
            cluster.drop_where(|e| e.id == id);
        } else if roll < 200 {
            let client = clients[rng.random_range(0..clients.len())];
            if cluster.outstanding(client).is_none() {
                cluster.submit(client, Command::set(format!("k{}", step % 5), format!("{step}")));
            }
        } else if roll < 300 || pending == 0 {
            cluster.advance(rng.random_range(0..3_000_000));
        } else {
            let id = cluster.pending().nth(rng.random_range(0..pending)).expect("in range").id;
            cluster.deliver(id);
        }
    }
    let view_changes = replicas.iter().map(|&r| cluster.total_stats(r).events.get("view_change").copied().unwrap_or(0));
    (cluster.observations(), view_changes.sum())
}

/// Seeds of the random-fault runs of the real protocol: `ORDO_CHAOS_SEEDS` (for long
/// exploratory runs), else `default`.
fn chaos_seeds(default: u64) -> u64 {
    std::env::var("ORDO_CHAOS_SEEDS").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

#[test]
fn random_faults_keep_the_real_log_in_agreement() {
    // Goal: the control for the canary below: the same random runs pass with the real protocol,
    // replicas do report, and view changes (where the canary errs) happen. Method: 20 seeds (or
    // `ORDO_CHAOS_SEEDS`) of `random_faults`.
    let mut view_changes = 0;
    for seed in 0..chaos_seeds(20) {
        let (observations, changes) = random_faults::<MultiPaxos>(seed, 20_000);
        assert!(observations > 0, "seed {seed}: nothing observed");
        view_changes += changes;
    }
    assert!(view_changes > 0, "no view change in 20 seeds");
}

#[cfg(feature = "canary")]
mod canary {
    use super::*;
    use crate::multipaxos::MultiPaxosReusedOp;

    #[test]
    #[should_panic(expected = "global invariant broken")]
    fn the_global_checker_catches_a_reused_op() {
        // Goal: the reused-op canary breaks log agreement and the global checker says so at
        // the step the second write commits at op 1. Method: the scenario above.
        commit_then_leader_crash_then_write::<MultiPaxosReusedOp>();
    }

    #[test]
    fn the_reused_op_violation_names_the_op() {
        // Goal: the failure explains itself. Method: the same scenario, its panic caught.
        let caught = std::panic::catch_unwind(commit_then_leader_crash_then_write::<MultiPaxosReusedOp>);
        let message = caught.err().and_then(|panic| panic.downcast::<String>().ok()).expect("a panic message");
        assert!(message.contains("committed at op 1"), "{message}");
    }

    #[test]
    fn random_faults_reach_the_reused_op_within_20_seeds() {
        // Goal: the flaw is reachable under random faults, not only in a script, and it is the
        // global checker that catches it. Method: `random_faults` over seeds 0..20 until one
        // panics; the panic must be the checker's.
        let caught = (0..20).find_map(|seed| {
            let run = std::panic::catch_unwind(|| random_faults::<MultiPaxosReusedOp>(seed, 20_000));
            run.err().map(|panic| (seed, panic.downcast::<String>().map(|m| *m).unwrap_or_default()))
        });
        let (seed, message) = caught.expect("no seed in 0..20 broke the log");
        assert!(message.contains("global invariant broken"), "seed {seed}: {message}");
    }
}
