//! Key expiry, expires and deletes: hand-made histories whose verdicts follow from the model
//! (`mod.rs`), each also checked against the oracle, and generated histories with stamps that
//! go back and forth.

use super::tests::{
    agreed_verdict, append, history, operation, passes_then_fails_when_corrupted, read, stamped, write,
};
use super::workload::{Expiry, StoreClock};
use super::*;
use crate::history::{EventKind, pair_operations};

/// The operation's events stamped `at_ms`.
fn at(at_ms: u64, events: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    stamped(Some(at_ms), None, events)
}

/// A write of `value` stamped `at_ms` that expires after `expires_ms`.
fn write_expiring(
    client: u64,
    value: &str,
    at_ms: u64,
    expires_ms: u64,
    invoke_ns: u64,
    ok_ns: u64,
) -> Vec<HistoryEvent> {
    stamped(Some(at_ms), Some(expires_ms), write(client, value, invoke_ns, ok_ns))
}

/// A sweep stamped `at_ms`, ending with `end` (`None`: never completes).
fn expire(client: u64, at_ms: u64, invoke_ns: u64, end: Option<(EventKind, u64)>) -> Vec<HistoryEvent> {
    at(at_ms, operation(client, OpKind::Expire, None, invoke_ns, end))
}

fn delete(client: u64, invoke_ns: u64, end: Option<(EventKind, u64)>) -> Vec<HistoryEvent> {
    operation(client, OpKind::Delete, None, invoke_ns, end)
}

fn ok(time_ns: u64) -> Option<(EventKind, u64)> {
    Some((EventKind::Ok, time_ns))
}

fn info(time_ns: u64) -> Option<(EventKind, u64)> {
    Some((EventKind::Info, time_ns))
}

#[test]
fn reads_see_a_value_until_it_expires() {
    // Goal: a key expires strictly after its expiry, for stamped reads only, and a read of an
    // expired key removes nothing. Method: a write of a expiring after 10, then one read at
    // several stamps and results; then a null read at 11 followed by a read of a at 10.
    let then_read = |at_ms: Option<u64>, result: Option<&str>| {
        history(vec![write_expiring(1, "a", 0, 10, 0, 1), stamped(at_ms, None, read(2, result, 2, 3))])
    };
    assert!(agreed_verdict(&then_read(Some(10), Some("a"))), "at its expiry the value is still there");
    assert!(agreed_verdict(&then_read(Some(11), None)), "after its expiry the key reads as absent");
    assert!(!agreed_verdict(&then_read(Some(11), Some("a"))));
    assert!(!agreed_verdict(&then_read(Some(10), None)));
    assert!(agreed_verdict(&then_read(None, Some("a"))), "an unstamped read sees nothing expired");
    assert!(!agreed_verdict(&then_read(None, None)));
    let expired_then_not = history(vec![
        write_expiring(1, "a", 0, 10, 0, 1),
        at(11, read(2, None, 2, 3)),
        at(10, read(3, Some("a"), 4, 5)),
    ]);
    assert!(agreed_verdict(&expired_then_not), "reading an expired key does not remove it");
}

#[test]
fn a_value_read_after_it_must_have_expired_fails() {
    // Goal: once a sweep or an append has acted on an expired key, its value is gone for good,
    // even for a read whose stamp is earlier. Method: a write of a expiring after 10, then a
    // sweep at 20 or an append of b at 20 (which starts afresh), then a read stamped 5; and an
    // append stamped 5, which extends a and keeps its expiry.
    let after = |update: Vec<HistoryEvent>, result: Option<&str>| {
        history(vec![write_expiring(1, "a", 0, 10, 0, 1), update, at(5, read(3, result, 4, 5))])
    };
    assert!(!agreed_verdict(&after(expire(2, 20, 2, ok(3)), Some("a"))), "the sweep removed a");
    assert!(agreed_verdict(&after(expire(2, 20, 2, ok(3)), None)));
    assert!(!agreed_verdict(&after(at(20, append(2, "b", 2, 3)), Some("ab"))), "b started afresh");
    assert!(agreed_verdict(&after(at(20, append(2, "b", 2, 3)), Some("b"))));
    assert!(agreed_verdict(&after(at(5, append(2, "b", 2, 3)), Some("ab"))), "b extended a");
    let extended_then_expired =
        history(vec![write_expiring(1, "a", 0, 10, 0, 1), at(5, append(2, "b", 2, 3)), at(11, read(3, None, 4, 5))]);
    assert!(agreed_verdict(&extended_then_expired), "an append keeps the expiry");
    let Err(violation) = check_linearizable(&after(expire(2, 20, 2, ok(3)), Some("a"))) else { panic!() };
    let text = violation.to_string();
    assert!(text.contains(r#"client 3 read -> "a" (at_ms 5)"#) && text.contains("could hold: absent"), "{text}");
}

#[test]
fn a_sweep_racing_a_fresh_write_leaves_the_fresh_value() {
    // Goal: a sweep concurrent with a fresh write never removes the fresh value, whichever
    // comes first; it may remove a fresh value that has itself expired. Method: a written
    // expiring after 10; then, overlapping, a sweep at 20 and a write of b at 15; a later read.
    let race = |b_expires_ms: Option<u64>, sweep_end, read_at_ms: u64, result: Option<&str>| {
        history(vec![
            write_expiring(1, "a", 0, 10, 0, 1),
            expire(2, 20, 10, sweep_end),
            stamped(Some(15), b_expires_ms, write(3, "b", 12, 25)),
            at(read_at_ms, read(4, result, 40, 41)),
        ])
    };
    for sweep_end in [ok(30), info(30), None] {
        assert!(agreed_verdict(&race(None, sweep_end, 40, Some("b"))));
        assert!(!agreed_verdict(&race(None, sweep_end, 40, None)), "the sweep cannot remove b");
        assert!(!agreed_verdict(&race(None, sweep_end, 40, Some("a"))));
    }
    // b expiring after 18: a sweep after it removes it, one before it leaves it.
    assert!(agreed_verdict(&race(Some(18), ok(30), 17, None)));
    assert!(agreed_verdict(&race(Some(18), ok(30), 17, Some("b"))));
}

#[test]
fn skewed_stamps_judge_each_operation_at_its_own_stamp() {
    // Goal: stamps need not grow in linearization order: an operation stamped earlier but
    // ordered later is judged at its own stamp. Method: a written at 100 expiring after 110;
    // a later read stamped 50 still sees it, also after a read at 120 found it expired, but not
    // after a sweep at 120; an append stamped 90 after one stamped 105 still extends a.
    let written = || write_expiring(1, "a", 100, 110, 0, 1);
    assert!(agreed_verdict(&history(vec![written(), at(50, read(2, Some("a"), 10, 11))])));
    let expired_for_one = history(vec![written(), at(120, read(2, None, 2, 3)), at(50, read(3, Some("a"), 4, 5))]);
    assert!(agreed_verdict(&expired_for_one));
    let swept = |result| history(vec![written(), expire(2, 120, 2, ok(3)), at(50, read(3, result, 4, 5))]);
    assert!(!agreed_verdict(&swept(Some("a"))));
    assert!(agreed_verdict(&swept(None)));
    let appends = |at_ms, result| {
        history(vec![
            written(),
            at(105, append(2, "b", 2, 3)),
            at(90, append(3, "c", 4, 5)),
            at(at_ms, read(4, result, 6, 7)),
        ])
    };
    assert!(agreed_verdict(&appends(100, Some("abc"))));
    assert!(agreed_verdict(&appends(111, None)), "the appends kept a's expiry");
    assert!(!agreed_verdict(&appends(111, Some("abc"))));
}

#[test]
fn deletes_remove_the_key_once() {
    // Goal: a delete removes any key, expiring or not; a lost delete may land late, but once.
    // Method: a write then a delete then reads; a delete ending in info with reads of a, then
    // absent, then a again.
    let deleted = |result| history(vec![write(1, "a", 0, 1), delete(2, 2, ok(3)), read(3, result, 4, 5)]);
    assert!(agreed_verdict(&deleted(None)));
    assert!(!agreed_verdict(&deleted(Some("a"))));
    let lost = |results: &[Option<&str>]| {
        let reads = results
            .iter()
            .enumerate()
            .map(|(index, &result)| read(3, result, 10 * index as u64 + 10, 10 * index as u64 + 11));
        history([vec![write(1, "a", 0, 1), delete(2, 2, info(3))], reads.collect()].concat())
    };
    assert!(agreed_verdict(&lost(&[Some("a"), None])), "the lost delete landed late");
    assert!(!agreed_verdict(&lost(&[Some("a"), None, Some("a")])), "it cannot be undone");
}

#[test]
fn removals_of_unknown_outcome_stay_open_for_the_reads_they_explain() {
    // Goal: the pruning rule keeps a lost delete, sweep or expiring write open for as long as a
    // read of null, or of appended values alone, could be explained by it: only such an update
    // landing late explains these histories. Method: reads of a first (so the update must land
    // after them), then the read it alone explains, long after the update was lost.
    let lost_delete = history(vec![write(1, "a", 0, 1), delete(2, 2, info(3)), read(3, Some("a"), 10, 11)]);
    let then = |events: &[HistoryEvent], more: Vec<Vec<HistoryEvent>>| history([vec![events.to_vec()], more].concat());
    assert!(agreed_verdict(&then(&lost_delete, vec![read(3, None, 50, 51)])));
    assert!(agreed_verdict(&then(&lost_delete, vec![append(4, "x", 20, 21), read(3, Some("x"), 50, 51)])));
    assert!(!agreed_verdict(&then(
        &lost_delete,
        vec![append(4, "x", 20, 21), read(3, Some("ax"), 30, 31), read(3, Some("x"), 50, 51)]
    )));
    let lost_sweep =
        history(vec![write_expiring(1, "a", 0, 10, 0, 1), expire(2, 20, 2, None), at(5, read(3, Some("a"), 10, 11))]);
    assert!(agreed_verdict(&then(&lost_sweep, vec![at(5, read(3, None, 50, 51))])));
    let lost_write = history(vec![
        write(1, "a", 0, 1),
        stamped(Some(2), Some(5), operation(2, OpKind::Write, Some("b"), 2, info(3))),
        read(3, Some("a"), 10, 11),
    ]);
    assert!(agreed_verdict(&then(&lost_write, vec![at(100, read(3, None, 50, 51))])));
    assert!(agreed_verdict(&then(&lost_write, vec![at(10, append(4, "x", 20, 21)), read(3, Some("x"), 50, 51)])));
    assert!(!agreed_verdict(&then(&lost_write, vec![read(3, None, 50, 51)])), "unstamped, b never expires");
}

#[test]
fn unstamped_sweeps_change_nothing() {
    // Goal: a sweep without a stamp sees nothing expired, so it never removes a key. Method: an
    // expiring write, an unstamped sweep, then reads of a and of absent without stamps.
    let swept = |result| {
        history(vec![
            write_expiring(1, "a", 0, 10, 0, 1),
            operation(2, OpKind::Expire, None, 2, ok(3)),
            read(3, result, 4, 5),
        ])
    };
    assert!(agreed_verdict(&swept(Some("a"))));
    assert!(!agreed_verdict(&swept(None)));
}

fn expiry() -> Expiry {
    Expiry { expiring_percent: 50, expire_percent: 6, delete_percent: 3, skew_ms_max: 10, ttl_ms_max: 40 }
}

#[test]
fn generated_expiring_histories_pass_and_a_corrupted_read_fails() {
    // Goal: realistic histories with expiring writes, sweeps, deletes and clocks off by up to
    // 10 ms either way pass, and one corrupted read in them is found, with one-at-a-time and
    // pipelining clients. Method: as `generated_faulty_histories_pass_and_a_corrupted_read_fails`,
    // plus a check that every new op occurs, that some reads find a key expired and that
    // stamps go back in real time.
    for seed in 0..6 {
        for (clients, pipeline_depth) in [(12, 1), (4, 3)] {
            let events = passes_then_fails_when_corrupted(seed, clients, pipeline_depth, Some(expiry()));
            let operations = pair_operations(&events).expect("generated histories are well formed");
            let has = |op: OpKind| operations.iter().any(|operation| operation.op == op);
            assert!(has(OpKind::Expire) && has(OpKind::Delete), "seed {seed}");
            assert!(operations.iter().any(|operation| operation.expires_ms.is_some()), "seed {seed}");
            assert!(stamps_go_back(&operations), "seed {seed}: stamps always grow");
        }
    }
}

/// Whether some operation invoked after another completed has a smaller stamp: in invocation
/// order, compared with the largest stamp among operations completed before it.
fn stamps_go_back(operations: &[Operation]) -> bool {
    let mut completed: Vec<(u64, u64)> =
        operations.iter().filter_map(|operation| Some((operation.completion_ns?, operation.at_ms?))).collect();
    completed.sort_unstable();
    let (mut next, mut largest) = (0, 0);
    operations.iter().any(|operation| {
        while next < completed.len() && completed[next].0 < operation.invoke_ns {
            largest = largest.max(completed[next].1);
            next += 1;
        }
        operation.at_ms.is_some_and(|at_ms| at_ms < largest)
    })
}

#[test]
fn a_quarter_million_expiring_operations_check_quickly() {
    // Goal: expiry keeps the checker fast on long histories. Method: 250,000 generated
    // operations on 5 keys with 20 clients, expiring writes, sweeps, deletes and skewed clocks;
    // it must pass (time it with `cargo test -p ordo-check quarter_million -- --nocapture`).
    let workload = super::workload::Workload {
        clients: 20,
        keys: 5,
        operations: 250_000,
        seed: 7,
        write_percent: 30,
        append_percent: 10,
        fail_percent: 1,
        info_percent: 1,
        pipeline_depth: 1,
        expiry: Some(expiry()),
    };
    let events = workload.generate();
    let stats = check_linearizable(&events).unwrap_or_else(|violation| panic!("{violation}"));
    assert_eq!((stats.keys, stats.operations), (5, 250_000));
    println!("{stats:?}");
}

#[test]
fn a_store_deciding_expiry_by_another_clock_is_caught() {
    // Goal: negative control. The checker must reject what a store that ignores the stamps, or
    // decides expiry by its own clock when it applies a command, answers: reads see values at
    // stamps after their expiry, sweeps leave expired keys, appends extend them. Method: the
    // generated workload run by such stores (same operations, stamps and order) must be found
    // not linearizable, with its order offered as a witness and without; the correct store's
    // history passes both ways.
    for seed in 0..4 {
        let workload = super::tests::small_workload(seed, 12, 1, Some(expiry()));
        for clock in [StoreClock::Stamp, StoreClock::Ignored, StoreClock::Own] {
            let (events, witness) = workload.generate_by(clock);
            let options = CheckOptions::default();
            for verdict in [check_linearizable(&events), check_linearizable_witnessed(&events, &witness, &options)] {
                match (clock, verdict) {
                    (StoreClock::Stamp, Ok(_)) => {}
                    (StoreClock::Stamp, Err(violation)) => panic!("seed {seed}: the correct store failed: {violation}"),
                    (_, Err(Violation::NotLinearizable { .. })) => {}
                    (_, verdict) => panic!("seed {seed}: the store deciding by {clock:?} was not caught: {verdict:?}"),
                }
            }
        }
    }
}
