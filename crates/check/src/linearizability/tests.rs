use super::oracle::{self, Store};
use super::workload::{Expiry, SplitMix, Workload};
use super::*;
use crate::history::{EventKind, pair_operations};
use proptest::prelude::*;

/// The two events of an operation on key `k`; `end` is the completion's kind and time, `None`
/// for an operation never completed.
pub(super) fn operation(
    client: u64,
    op: OpKind,
    value: Option<&str>,
    invoke_ns: u64,
    end: Option<(EventKind, u64)>,
) -> Vec<HistoryEvent> {
    on_key("k", client, op, value, invoke_ns, end)
}

pub(super) fn on_key(
    key: &str,
    client: u64,
    op: OpKind,
    value: Option<&str>,
    invoke_ns: u64,
    end: Option<(EventKind, u64)>,
) -> Vec<HistoryEvent> {
    let invoke_value = if op == OpKind::Read { None } else { value.map(String::from) };
    let event = |kind, time_ns, value| HistoryEvent {
        client,
        id: None,
        kind,
        time_ns,
        op,
        key: key.into(),
        value,
        at_ms: None,
        expires_ms: None,
    };
    let mut events = vec![event(EventKind::Invoke, invoke_ns, invoke_value)];
    if let Some((kind, time_ns)) = end {
        let value = if op == OpKind::Read && kind != EventKind::Ok { None } else { value.map(String::from) };
        events.push(event(kind, time_ns, value));
    }
    events
}

/// An operation's events with its stamps: `at_ms` on every event, `expires_ms` (writes) on the
/// invocation and repeated on the completion, as the format allows.
pub(super) fn stamped(at_ms: Option<u64>, expires_ms: Option<u64>, mut events: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    for event in &mut events {
        (event.at_ms, event.expires_ms) = (at_ms, expires_ms);
    }
    events
}

pub(super) fn write(client: u64, value: &str, invoke_ns: u64, ok_ns: u64) -> Vec<HistoryEvent> {
    operation(client, OpKind::Write, Some(value), invoke_ns, Some((EventKind::Ok, ok_ns)))
}

pub(super) fn append(client: u64, value: &str, invoke_ns: u64, ok_ns: u64) -> Vec<HistoryEvent> {
    operation(client, OpKind::Append, Some(value), invoke_ns, Some((EventKind::Ok, ok_ns)))
}

pub(super) fn read(client: u64, result: Option<&str>, invoke_ns: u64, ok_ns: u64) -> Vec<HistoryEvent> {
    operation(client, OpKind::Read, result, invoke_ns, Some((EventKind::Ok, ok_ns)))
}

pub(super) fn history(parts: Vec<Vec<HistoryEvent>>) -> Vec<HistoryEvent> {
    parts.concat()
}

/// An operation's events, named by operation id `id`, as a pipelining client writes them.
fn with_id(id: u64, mut events: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    for event in &mut events {
        event.id = Some(id);
    }
    events
}

/// The events sorted by time, keeping their order at equal times: operations written one after
/// another become the interleaving a pipelining client records.
fn in_time_order(mut events: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    events.sort_by_key(|event| event.time_ns);
    events
}

pub(super) fn passes(events: &[HistoryEvent]) -> bool {
    match check_linearizable(events) {
        Ok(_) => true,
        Err(Violation::NotLinearizable { .. }) => false,
        Err(other) => panic!("unexpected verdict: {other}"),
    }
}

/// Asserts the fast checker and the oracle agree, and returns the verdict.
pub(super) fn agreed_verdict(events: &[HistoryEvent]) -> bool {
    let fast = passes(events);
    let slow = oracle::is_linearizable(events).expect("test histories are well formed");
    assert_eq!(fast, slow, "checker and oracle disagree on:\n{}", render(events));
    fast
}

pub(super) fn render(events: &[HistoryEvent]) -> String {
    events.iter().map(HistoryEvent::to_json_line).collect::<Vec<_>>().join("\n")
}

#[test]
fn sequential_ok_history_passes() {
    // Goal: the plain case works. Method: one client writes, appends and reads in sequence,
    // including a read of the absent key first.
    let events = history(vec![
        read(1, None, 0, 1),
        write(1, "a", 2, 3),
        read(1, Some("a"), 4, 5),
        append(1, "b", 6, 7),
        read(1, Some("ab"), 8, 9),
    ]);
    let stats = check_linearizable(&events).unwrap();
    assert_eq!((stats.keys, stats.operations, stats.operations_ok), (1, 5, 5));
    assert!(agreed_verdict(&events));
}

#[test]
fn stale_read_after_completed_write_fails() {
    // Goal: a read that misses a write completed before it began is caught, and the report
    // names the key, the read and what the key could hold. Method: write a, write b, read a.
    let events = history(vec![write(1, "a", 0, 10), write(1, "b", 20, 30), read(2, Some("a"), 40, 50)]);
    let Err(violation) = check_linearizable(&events) else { panic!("the stale read must fail") };
    let Violation::NotLinearizable { key, operation, states, concurrent } = &violation else { panic!("{violation}") };
    assert_eq!(key, "k");
    assert_eq!((operation.client, operation.op), (2, OpKind::Read));
    assert_eq!(states, &vec![ReportedState::value(Some("b"))]);
    assert!(concurrent.is_empty());
    let text = violation.to_string();
    assert!(text.contains("\"k\"") && text.contains("client 2 read -> \"a\"") && text.contains("\"b\""), "{text}");
    assert!(!agreed_verdict(&events));
}

#[test]
fn lost_acknowledged_write_fails() {
    // Goal: an acknowledged write or append that a later read misses is caught. Method: a read
    // of the absent key after an acked write, and a read missing the second of two acked appends.
    let lost_write = history(vec![write(1, "a", 0, 10), read(2, None, 20, 30)]);
    assert!(!agreed_verdict(&lost_write));
    let lost_append = history(vec![append(1, "x", 0, 10), append(1, "y", 20, 30), read(2, Some("x"), 40, 50)]);
    assert!(!agreed_verdict(&lost_append));
}

#[test]
fn timed_out_write_taking_effect_later_passes() {
    // Goal: an info write may take effect long after its client gave up. Method: the info write
    // of a is overwritten by an acked b, and a read much later sees a again: only the info
    // write landing late explains it.
    let events = history(vec![
        operation(1, OpKind::Write, Some("a"), 0, Some((EventKind::Info, 10))),
        write(2, "b", 20, 30),
        read(3, Some("b"), 40, 50),
        read(3, Some("a"), 1000, 1010),
    ]);
    assert!(agreed_verdict(&events));
    let stats = check_linearizable(&events).unwrap();
    assert_eq!(stats.operations_indeterminate, 1);
}

#[test]
fn timed_out_write_never_taking_effect_passes() {
    // Goal: an info write may also never take effect. Method: reads after it keep seeing the
    // absent key, and an unfinished write behaves the same way.
    let events = history(vec![
        operation(1, OpKind::Write, Some("a"), 0, Some((EventKind::Info, 10))),
        operation(2, OpKind::Write, Some("z"), 5, None),
        read(3, None, 40, 50),
        read(3, None, 1000, 1010),
    ]);
    assert!(agreed_verdict(&events));
}

#[test]
fn info_write_takes_effect_at_most_once() {
    // Goal: an info write is applied at most once. Method: a, then acked b, then a, then b,
    // then a again: the info write of a could explain one return of a, not two.
    let events = history(vec![
        operation(1, OpKind::Write, Some("a"), 0, Some((EventKind::Info, 1))),
        write(2, "b", 10, 11),
        read(3, Some("a"), 20, 21),
        write(2, "b", 30, 31),
        read(3, Some("a"), 40, 41),
    ]);
    assert!(!agreed_verdict(&events));
}

#[test]
fn concurrent_writes_with_reads_seeing_either_order_pass() {
    // Goal: concurrent writes may take effect in either order, and reads during them may see
    // both orders' intermediate values. Method: writes a and b overlap; one history's reads see
    // b then a, another's a then b, and a third sees a, b, a after both completed (which fails).
    let writes = || vec![write(1, "a", 0, 100), write(2, "b", 0, 100)];
    let b_then_a = history([writes(), vec![read(3, Some("b"), 10, 20), read(3, Some("a"), 30, 40)]].concat());
    assert!(agreed_verdict(&b_then_a));
    let a_then_b = history([writes(), vec![read(3, Some("a"), 10, 20), read(4, Some("b"), 150, 160)]].concat());
    assert!(agreed_verdict(&a_then_b));
    let flip_flop = history(
        [writes(), vec![read(3, Some("a"), 110, 120), read(3, Some("b"), 130, 140), read(3, Some("a"), 150, 160)]]
            .concat(),
    );
    assert!(!agreed_verdict(&flip_flop));
}

#[test]
fn read_of_a_value_never_written_fails() {
    // Goal: a read returning a value no operation wrote is caught, even with writes open.
    // Method: a read of "ghost" concurrent with writes of a and b.
    let events = history(vec![write(1, "a", 0, 100), write(2, "b", 0, 100), read(3, Some("ghost"), 10, 20)]);
    let Err(Violation::NotLinearizable { concurrent, .. }) = check_linearizable(&events) else { panic!() };
    assert_eq!(concurrent.len(), 2, "both open writes are reported");
    assert!(!agreed_verdict(&events));
}

#[test]
fn append_order_follows_real_time() {
    // Goal: appends concatenate in linearization order. Method: sequential appends a then b;
    // a later read of "ab" passes, "ba" fails; with the appends concurrent, both pass.
    let sequential =
        |result| history(vec![append(1, "a", 0, 10), append(2, "b", 20, 30), read(3, Some(result), 40, 50)]);
    assert!(agreed_verdict(&sequential("ab")));
    assert!(!agreed_verdict(&sequential("ba")));
    let concurrent =
        |result| history(vec![append(1, "a", 0, 30), append(2, "b", 0, 30), read(3, Some(result), 40, 50)]);
    assert!(agreed_verdict(&concurrent("ab")));
    assert!(agreed_verdict(&concurrent("ba")));
    assert!(!agreed_verdict(&concurrent("a")));
}

#[test]
fn failed_operations_are_ignored() {
    // Goal: a failed operation never takes effect. Method: a failed write and append, then
    // reads: the absent key passes, seeing the failed value fails.
    let failed = || {
        vec![
            operation(1, OpKind::Write, Some("x"), 0, Some((EventKind::Fail, 10))),
            operation(1, OpKind::Append, Some("y"), 20, Some((EventKind::Fail, 30))),
        ]
    };
    assert!(agreed_verdict(&history([failed(), vec![read(2, None, 40, 50)]].concat())));
    assert!(!agreed_verdict(&history([failed(), vec![read(2, Some("x"), 40, 50)]].concat())));
    let stats = check_linearizable(&history(failed())).unwrap();
    assert_eq!(stats.operations_failed, 2);
}

#[test]
fn reads_without_ok_are_ignored() {
    // Goal: a read that failed or timed out constrains nothing, whatever value it carries.
    // Method: an info read and a failed read around an acked write.
    let events = history(vec![
        write(1, "a", 0, 10),
        operation(2, OpKind::Read, Some("nonsense"), 20, Some((EventKind::Info, 30))),
        operation(3, OpKind::Read, None, 20, Some((EventKind::Fail, 30))),
    ]);
    assert!(agreed_verdict(&events));
}

#[test]
fn read_linearized_early_survives_a_later_write() {
    // Goal: guard against the tempting but unsound pruning that drops a configuration whose
    // linearized set is a superset of another's. Method: a long read of a overlaps a write of b
    // that completes (and is read) before the read returns; only linearizing the read before
    // the write explains it, and that configuration has the larger set.
    let events =
        history(vec![write(1, "a", 0, 1), read(2, Some("a"), 2, 10), write(3, "b", 3, 4), read(4, Some("b"), 5, 6)]);
    assert!(agreed_verdict(&events));
}

#[test]
fn write_applied_early_survives_until_a_read_decides() {
    // Goal: the search keeps configurations that differ only in which concurrent writes were
    // applied. Method: a long write of c overlaps a short write of x; a read after both sees x,
    // which needs c applied before x, while the read of x before c completed allowed both.
    let events =
        history(vec![write(1, "c", 0, 10), write(2, "x", 1, 2), read(3, Some("x"), 3, 4), read(3, Some("x"), 11, 12)]);
    assert!(agreed_verdict(&events));
    let flipped =
        history(vec![write(1, "c", 0, 10), write(2, "x", 1, 2), read(3, Some("c"), 3, 4), read(3, Some("x"), 11, 12)]);
    assert!(!agreed_verdict(&flipped));
}

#[test]
fn equal_times_are_concurrent() {
    // Goal: an operation invoked at the very time another completes may be ordered before it.
    // Method: a write of b completes at 20, and a read invoked at 20 returns the older a:
    // legal; invoked at 21 it is stale.
    let at = |invoke_ns| history(vec![write(1, "a", 0, 5), write(1, "b", 10, 20), read(2, Some("a"), invoke_ns, 30)]);
    assert!(agreed_verdict(&at(20)));
    assert!(!agreed_verdict(&at(21)));
}

#[test]
fn keys_are_checked_independently() {
    // Goal: each key is checked alone and a violation names its key. Method: key a is fine,
    // key b has a stale read, and the same values are used on both keys.
    let events = history(vec![
        on_key("a", 1, OpKind::Write, Some("v"), 0, Some((EventKind::Ok, 10))),
        on_key("b", 2, OpKind::Write, Some("w"), 0, Some((EventKind::Ok, 10))),
        on_key("a", 3, OpKind::Read, Some("v"), 20, Some((EventKind::Ok, 30))),
        on_key("b", 4, OpKind::Read, Some("v"), 20, Some((EventKind::Ok, 30))),
    ]);
    let Err(Violation::NotLinearizable { key, .. }) = check_linearizable(&events) else { panic!() };
    assert_eq!(key, "b");
    assert!(!agreed_verdict(&events));
}

#[test]
fn pipelined_operations_of_one_client_are_concurrent() {
    // Goal: overlapping operations of one client have no order between them: neither the
    // client nor the order of invocation orders them. Method: client 1 pipelines a write of a
    // and a write of b, and a later read sees a, which needs b to take effect first; client 1
    // also pipelines a write of x and a read that returns before x lands. Both pass, and their
    // one-at-a-time versions (the second operation invoked after the first completed) fail.
    let pipelined_writes = in_time_order(history(vec![
        with_id(1, write(1, "a", 0, 10)),
        with_id(2, write(1, "b", 1, 10)),
        read(2, Some("a"), 20, 21),
    ]));
    assert!(agreed_verdict(&pipelined_writes));
    let one_at_a_time = history(vec![write(1, "a", 0, 5), write(1, "b", 6, 10), read(2, Some("a"), 20, 21)]);
    assert!(!agreed_verdict(&one_at_a_time));

    let write_and_read = in_time_order(history(vec![with_id(1, write(1, "x", 0, 3)), with_id(2, read(1, None, 1, 2))]));
    assert!(agreed_verdict(&write_and_read));
    assert!(!agreed_verdict(&history(vec![write(1, "x", 0, 1), read(1, None, 2, 3)])));
}

#[test]
fn non_linearizable_pipelined_history_fails() {
    // Goal: pipelining excuses no real violation, and the report names the operation by client
    // and id. Method: client 1 pipelines writes of a and b and, while they are open, reads that
    // see a, then b, then a again: the third read would need a written twice.
    let events = in_time_order(history(vec![
        with_id(1, write(1, "a", 0, 10)),
        with_id(2, write(1, "b", 1, 10)),
        with_id(3, read(1, Some("a"), 2, 3)),
        with_id(4, read(1, Some("b"), 4, 5)),
        with_id(5, read(1, Some("a"), 6, 7)),
    ]));
    assert!(!agreed_verdict(&events));
    let Err(violation) = check_linearizable(&events) else { panic!("the third read must fail") };
    let Violation::NotLinearizable { operation, concurrent, .. } = &violation else { panic!("{violation}") };
    assert_eq!((operation.client, operation.id), (1, Some(5)));
    let concurrent_ids: Vec<Option<u64>> = concurrent.iter().map(|operation| operation.id).collect();
    assert_eq!(concurrent_ids, [Some(1), Some(2)], "both open writes are reported");
    assert!(violation.to_string().contains("client 1 id 5 read -> \"a\""), "{violation}");
}

#[test]
fn pipelining_client_carries_on_after_an_info() {
    // Goal: with ids, a client that lost an operation keeps invoking others (reusing ids whose
    // operations completed), and the lost operation may land after them, at most once. Method:
    // client 1's write of a (id 1) ends in info; the same client then writes b and reads b,
    // and later reads a: only the lost write landing late explains it. Seeing a after a
    // further write of b fails: the lost write cannot land twice.
    let carried_on = vec![
        with_id(1, operation(1, OpKind::Write, Some("a"), 0, Some((EventKind::Info, 5)))),
        with_id(2, write(1, "b", 10, 20)),
        with_id(3, read(1, Some("b"), 30, 31)),
        with_id(2, read(1, Some("a"), 40, 41)),
    ];
    assert!(agreed_verdict(&in_time_order(history(carried_on.clone()))));
    let landing_twice =
        [carried_on, vec![with_id(4, write(1, "b", 50, 51)), with_id(5, read(1, Some("a"), 60, 61))]].concat();
    assert!(!agreed_verdict(&in_time_order(history(landing_twice))));
}

#[test]
fn malformed_events_are_reported() {
    // Goal: events not parsed from text are validated too. Method: a completion without invoke.
    let mut events = read(1, None, 0, 1);
    events.remove(0);
    let Err(Violation::Malformed(error)) = check_linearizable(&events) else { panic!() };
    assert_eq!(error.line, 1);
    assert!(Violation::Malformed(error).to_string().starts_with("malformed history"));
}

#[test]
fn configuration_limit_reports_too_complex() {
    // Goal: a search past its limit stops with TooComplex instead of running on. Method: a
    // limit of one configuration and two concurrent writes, whose order stays undecided.
    let events = history(vec![write(1, "a", 0, 10), write(2, "b", 0, 20), read(3, Some("b"), 30, 40)]);
    let options = CheckOptions { configurations_max: 1, explored_per_step_max: 1 };
    let verdict = check_linearizable_with(&events, &options);
    assert_eq!(verdict, Err(Violation::TooComplex { key: "k".into() }));
    assert!(verdict.unwrap_err().to_string().contains("too complex"));
    assert!(check_linearizable(&events).is_ok());
}

#[test]
fn open_operation_limit_reports_too_complex() {
    // Goal: a key with more operations open at once than the slot sets hold is inconclusive,
    // not a crash. Method: 1,100 concurrent writes on one key.
    let clients = OPEN_OPERATIONS_MAX as u64 + 76;
    let events: Vec<HistoryEvent> = (0..clients)
        .flat_map(|client| operation(client, OpKind::Write, Some("v"), 0, None))
        .chain(read(clients, Some("v"), 10, 20))
        .collect();
    assert_eq!(check_linearizable(&events), Err(Violation::TooComplex { key: "k".into() }));
}

#[test]
fn violation_on_one_key_outranks_too_complex_on_another() {
    // Goal: an inconclusive key never hides a real violation. Method: key a is too complex at
    // a limit of one configuration, key b has a stale read.
    let events = history(vec![
        on_key("a", 1, OpKind::Write, Some("x"), 0, Some((EventKind::Ok, 10))),
        on_key("a", 2, OpKind::Write, Some("y"), 0, Some((EventKind::Ok, 20))),
        on_key("a", 3, OpKind::Read, Some("y"), 30, Some((EventKind::Ok, 40))),
        on_key("b", 4, OpKind::Write, Some("x"), 0, Some((EventKind::Ok, 10))),
        on_key("b", 5, OpKind::Read, None, 20, Some((EventKind::Ok, 30))),
    ]);
    let verdict = check_linearizable_with(&events, &CheckOptions { configurations_max: 1, explored_per_step_max: 1 });
    assert!(matches!(verdict, Err(Violation::NotLinearizable { key, .. }) if key == "b"));
}

#[test]
fn generated_faulty_histories_pass_and_a_corrupted_read_fails() {
    // Goal: realistic histories with fails, timeouts and appends pass, and one corrupted read
    // in them is found. Method: generated linearizable workloads on several seeds; then each
    // has one ok read changed to a value nobody wrote.
    for seed in 0..6 {
        passes_then_fails_when_corrupted(seed, 12, 1, None);
    }
}

#[test]
fn generated_pipelined_histories_pass_and_a_corrupted_read_fails() {
    // Goal: the same with clients that keep up to three operations outstanding and carry on
    // after an info, so that a client's own operations overlap. Method: as above with 4
    // clients (as many operations open at once as 12 one-at-a-time clients: 12 pipelining 4
    // deep make keys too ambiguous for the default limits), plus a check that the histories
    // really overlap operations of one client.
    for seed in 0..6 {
        let events = passes_then_fails_when_corrupted(seed, 4, 3, None);
        let operations = pair_operations(&events).expect("generated histories are well formed");
        // Operations come in invocation order; an overlap shows as an invocation before the
        // completion of the client's previous operation.
        let mut previous_end_ns = std::collections::BTreeMap::new();
        let overlapping = operations.iter().any(|operation| {
            let end_ns = operation.completion_ns.unwrap_or(u64::MAX);
            previous_end_ns.insert(operation.client, end_ns).is_some_and(|previous| previous > operation.invoke_ns)
        });
        assert!(overlapping, "seed {seed}: no client had two operations outstanding");
    }
}

/// Generates a history (3 keys, 6,000 operations), checks that it passes, then corrupts one ok
/// read in its second half and checks that exactly that read is reported. Returns the
/// uncorrupted history.
/// The short workload the corruption, witness and expiry tests share: 3 keys, 6,000 operations,
/// some failed and some of unknown outcome.
pub(super) fn small_workload(seed: u64, clients: u64, pipeline_depth: usize, expiry: Option<Expiry>) -> Workload {
    Workload {
        clients,
        keys: 3,
        operations: 6_000,
        seed,
        write_percent: 30,
        append_percent: 15,
        fail_percent: 3,
        info_percent: 3,
        pipeline_depth,
        expiry,
    }
}

pub(super) fn passes_then_fails_when_corrupted(
    seed: u64,
    clients: u64,
    pipeline_depth: usize,
    expiry: Option<Expiry>,
) -> Vec<HistoryEvent> {
    let workload = small_workload(seed, clients, pipeline_depth, expiry);
    let events = workload.generate();
    let stats = check_linearizable(&events).unwrap_or_else(|violation| panic!("seed {seed}: {violation}"));
    assert!(stats.operations_indeterminate > 0 && stats.operations_failed > 0);
    let position = events.len() / 2
        + events[events.len() / 2..]
            .iter()
            .position(|event| event.op == OpKind::Read && event.kind == EventKind::Ok)
            .expect("a read completes in the second half");
    let mut corrupted = events.clone();
    corrupted[position].value = Some("never written".into());
    let Err(Violation::NotLinearizable { key, operation, .. }) = check_linearizable(&corrupted) else {
        panic!("seed {seed}: the corrupted read must be found")
    };
    assert_eq!(key, corrupted[position].key);
    assert_eq!((operation.client, operation.id), (corrupted[position].client, corrupted[position].id));
    events
}

#[test]
fn one_million_operations_check_quickly() {
    // Goal: the checker scales to a million operations over a handful of keys. Method: a
    // generated linearizable history of 1,000,000 operations on 5 keys with 20 clients, with
    // appends, fails and timeouts; it must pass (the test profile is optimized; time it with
    // `cargo test -p ordo-check one_million -- --nocapture`).
    let workload = Workload {
        clients: 20,
        keys: 5,
        operations: 1_000_000,
        seed: 7,
        write_percent: 30,
        append_percent: 10,
        fail_percent: 1,
        info_percent: 1,
        pipeline_depth: 1,
        expiry: None,
    };
    let events = workload.generate();
    let stats = check_linearizable(&events).unwrap_or_else(|violation| panic!("{violation}"));
    assert_eq!((stats.keys, stats.operations), (5, 1_000_000));
    println!("{stats:?}");
}

/// One operation of a client's script in the random comparison with the oracle.
#[derive(Clone, Debug)]
pub(super) struct Scripted {
    /// Which op: read, write, append, and with expiry also expire and delete.
    op: u8,
    key: u8,
    value: u8,
    gap_ns: u64,
    duration_ns: u64,
    /// 0: fail, 1: info, 2: never completes, otherwise ok.
    outcome: u8,
    /// Where in its interval (percent) an ok operation takes effect; for info, how far after
    /// its invocation.
    point: u64,
    /// Whether an info or unfinished operation takes effect.
    applied: bool,
    /// A wrong value to return instead of the right one (reads only), by index.
    corrupt: Option<u8>,
    /// With expiry: how far the client's clock is off at this operation (its stamp is its
    /// invocation time plus this, so stamps go back and forth); `None`: no stamp.
    skew: Option<i8>,
    /// With expiry, writes: the time to live after the stamp; `None`: the write never expires.
    ttl: Option<u8>,
}

const WRONG_VALUES: [Option<&str>; 5] = [None, Some("a"), Some("b"), Some("ab"), Some("ba")];

/// One client's script in the random comparison with the oracle.
#[derive(Clone, Debug)]
pub(super) struct ClientScript {
    /// Whether the client pipelines: it names operations by id, invokes each without waiting for
    /// the one before, and carries on after an info or an unfinished operation.
    pub(super) pipelined: bool,
    pub(super) steps: Vec<Scripted>,
}

/// A scripted operation, timed and with its point of effect, before it becomes events.
struct Timed {
    client: u64,
    id: Option<u64>,
    op: OpKind,
    key: String,
    value: Option<String>,
    at_ms: Option<u64>,
    expires_ms: Option<u64>,
    invoke_ns: u64,
    end: Option<(EventKind, u64)>,
    /// When it takes effect, in hundredths of a nanosecond (so that points can fall between
    /// ticks); `None` if it never does.
    point: Option<u64>,
    corrupt: Option<u8>,
}

/// Builds a history from client scripts: linearizable by construction unless a read is
/// corrupted (which may still happen to be right). Without `expiry` the history has reads,
/// writes and appends only and no stamps, the model before expiry.
pub(super) fn scripted_history(
    clients: &[ClientScript],
    keys: u8,
    operations_max: usize,
    expiry: bool,
) -> Vec<HistoryEvent> {
    let mut timed = time_scripts(clients, keys, operations_max, expiry);
    run_in_point_order(&mut timed);
    let mut events = Vec::new();
    for operation in &timed {
        let mut value = operation.value.as_deref();
        if let (OpKind::Read, Some(wrong)) = (operation.op, operation.corrupt) {
            value = WRONG_VALUES[usize::from(wrong) % WRONG_VALUES.len()];
        }
        let operation_events =
            on_key(&operation.key, operation.client, operation.op, value, operation.invoke_ns, operation.end);
        let operation_events = stamped(operation.at_ms, operation.expires_ms, operation_events);
        match operation.id {
            Some(id) => events.extend(with_id(id, operation_events)),
            None => events.extend(operation_events),
        }
    }
    // A pipelining client's events interleave; a client without ids keeps its order.
    in_time_order(events)
}

/// The op and value of a step; `expiry` admits expires and deletes.
fn scripted_op(step: &Scripted, expiry: bool) -> (OpKind, Option<String>) {
    let kinds = if expiry { 5 } else { 3 };
    match step.op % kinds {
        0 => (OpKind::Read, None),
        1 => (OpKind::Write, Some(["a", "b", "c"][usize::from(step.value % 3)].to_string())),
        2 => (OpKind::Append, Some(["a", "b"][usize::from(step.value % 2)].to_string())),
        3 => (OpKind::Expire, None),
        _ => (OpKind::Delete, None),
    }
}

/// Lays each client's script out in time. A client without ids invokes after its previous
/// operation completed and stops after an info or an unfinished operation, as the format
/// requires; a pipelining client invokes after its previous invocation and carries on.
fn time_scripts(clients: &[ClientScript], keys: u8, operations_max: usize, expiry: bool) -> Vec<Timed> {
    let mut timed = Vec::new();
    for (client, script) in clients.iter().enumerate() {
        let mut time_ns = 0;
        for (index, step) in script.steps.iter().take(operations_max.saturating_sub(timed.len())).enumerate() {
            let invoke_ns = time_ns + step.gap_ns;
            let completion_ns = invoke_ns + step.duration_ns;
            let (op, value) = scripted_op(step, expiry);
            let (end, point) = match step.outcome {
                0 => (Some((EventKind::Fail, completion_ns)), None),
                1 | 2 => {
                    let end = (step.outcome == 1).then_some((EventKind::Info, completion_ns));
                    (end, step.applied.then_some(invoke_ns * 100 + step.point * 7))
                }
                _ => (Some((EventKind::Ok, completion_ns)), Some(invoke_ns * 100 + step.point * step.duration_ns)),
            };
            let at_ms = step.skew.filter(|_| expiry).map(|skew| invoke_ns.saturating_add_signed(i64::from(skew)));
            let expires_ms = step
                .ttl
                .filter(|_| expiry && op == OpKind::Write)
                .map(|ttl| at_ms.unwrap_or(invoke_ns) + u64::from(ttl));
            let key = format!("k{}", step.key % keys);
            let id = script.pipelined.then_some(index as u64);
            let (client, corrupt) = (client as u64, step.corrupt);
            timed.push(Timed { client, id, op, key, value, at_ms, expires_ms, invoke_ns, end, point, corrupt });
            if script.pipelined {
                time_ns = invoke_ns;
                continue;
            }
            time_ns = completion_ns;
            if matches!(step.outcome, 1 | 2) {
                break;
            }
        }
    }
    timed
}

/// Applies the operations that take effect in the order of their points; reads get the value.
fn run_in_point_order(timed: &mut [Timed]) {
    let mut order: Vec<(u64, usize)> =
        timed.iter().enumerate().filter_map(|(index, operation)| Some((operation.point?, index))).collect();
    order.sort_unstable();
    let mut store = Store::default();
    for (_, index) in order {
        let operation = &mut timed[index];
        match operation.op {
            OpKind::Read => operation.value = store.read(&operation.key, operation.at_ms),
            op => store.update(op, &operation.key, operation.value.as_deref(), operation.at_ms, operation.expires_ms),
        }
    }
}

fn scripted_strategy() -> impl Strategy<Value = Scripted> {
    let timing = (0u64..4, 0u64..5, 0u8..10, 0u64..=100, any::<bool>());
    let stamps = (prop::option::weighted(0.85, -3i8..=3), prop::option::weighted(0.5, 0u8..5));
    (0u8..15, 0u8..3, 0u8..3, timing, prop::option::weighted(0.2, 0u8..5), stamps).prop_map(
        |(op, key, value, (gap_ns, duration_ns, outcome, point, applied), corrupt, (skew, ttl))| Scripted {
            op,
            key,
            value,
            gap_ns,
            duration_ns,
            outcome,
            point,
            applied,
            corrupt,
            skew,
            ttl,
        },
    )
}

pub(super) fn client_script_strategy() -> impl Strategy<Value = ClientScript> {
    (any::<bool>(), prop::collection::vec(scripted_strategy(), 1..=3))
        .prop_map(|(pipelined, steps)| ClientScript { pipelined, steps })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn checker_agrees_with_the_oracle(
        clients in prop::collection::vec(client_script_strategy(), 1..=4),
        keys in 1u8..=3,
        expiry in any::<bool>(),
    ) {
        // Goal: the fast checker gives the oracle's verdict on small random histories with
        // concurrent operations on one to three keys, info, unfinished and failed operations,
        // pipelining clients (whose own operations overlap) and reads that are sometimes
        // wrong; half of them also with stamps that go back and forth, expiring writes, expires
        // and deletes. Method: compare both on scripted histories.
        let events = scripted_history(&clients, keys, 9, expiry);
        let fast = passes(&events);
        let slow = oracle::is_linearizable(&events).expect("scripted histories are well formed");
        prop_assert_eq!(fast, slow, "checker and oracle disagree on:\n{}", render(&events));
    }
}

#[test]
fn random_comparison_sees_both_verdicts() {
    // Goal: the random comparison with the oracle is not vacuous: it meets linearizable and
    // non-linearizable histories in good numbers, with and without pipelining clients, with
    // and without expiry, and with stamps out of real-time order. Method: 32,000 histories from
    // the same script builder, drawn with a seeded generator, counting the verdicts by whether
    // a client pipelines and whether the history uses expiry (each verdict checked against the
    // oracle), and the verdicts on histories where an operation invoked after another completed
    // carries an earlier stamp.
    let mut random = SplitMix::new(42);
    let mut verdicts = [[[0usize; 2]; 2]; 2];
    let mut skewed = [0usize; 2];
    for _ in 0..32_000 {
        let (may_pipeline, expiry) = (random.percent(50), random.percent(50));
        let clients: Vec<ClientScript> = (0..1 + random.below(4))
            .map(|_| ClientScript {
                pipelined: may_pipeline && random.percent(50),
                steps: (0..1 + random.below(3)).map(|_| random_scripted(&mut random)).collect(),
            })
            .collect();
        let events = scripted_history(&clients, 1 + random.below(3) as u8, 9, expiry);
        let pipelined = events.iter().any(|event| event.id.is_some());
        let verdict = agreed_verdict(&events);
        verdicts[usize::from(expiry)][usize::from(pipelined)][usize::from(verdict)] += 1;
        if stamps_go_back(&events) {
            skewed[usize::from(verdict)] += 1;
        }
    }
    for (expiry, counts) in verdicts.iter().enumerate() {
        for (pipelined, count) in counts.iter().enumerate() {
            assert!(count.iter().all(|&n| n > 300), "expiry {expiry}, pipelined {pipelined} (fail, pass): {count:?}");
        }
    }
    assert!(skewed.iter().all(|&n| n > 300), "stamps out of real-time order (fail, pass): {skewed:?}");
}

/// Whether an operation invoked after another completed carries a smaller stamp.
fn stamps_go_back(events: &[HistoryEvent]) -> bool {
    let operations = pair_operations(events).expect("scripted histories are well formed");
    operations.iter().any(|later| {
        operations.iter().any(|earlier| {
            earlier.completion_ns.is_some_and(|completion_ns| completion_ns < later.invoke_ns)
                && matches!((earlier.at_ms, later.at_ms), (Some(before), Some(after)) if after < before)
        })
    })
}

pub(super) fn random_scripted(random: &mut SplitMix) -> Scripted {
    Scripted {
        op: random.below(15) as u8,
        key: random.below(3) as u8,
        value: random.below(3) as u8,
        gap_ns: random.below(4),
        duration_ns: random.below(5),
        outcome: random.below(10) as u8,
        point: random.below(101),
        applied: random.percent(50),
        corrupt: random.percent(20).then(|| random.below(5) as u8),
        skew: random.percent(85).then(|| random.below(7) as i8 - 3),
        ttl: random.percent(50).then(|| random.below(5) as u8),
    }
}
