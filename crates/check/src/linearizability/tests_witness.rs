//! The witness (`witness.rs`): a right order proves a key without a search, a wrong one never
//! makes a non-linearizable history pass.

use super::oracle;
use super::tests::{
    append, client_script_strategy, history, operation, read, render, scripted_history, stamped, write,
};
use super::*;
use crate::history::EventKind;
use proptest::prelude::*;

fn order(effects: &[(&str, Applied)]) -> Witness {
    let mut witness = Witness::default();
    for (key, effect) in effects {
        witness.effects.entry(key.to_string()).or_default().push(effect.clone());
    }
    witness
}

fn w(value: &str) -> Applied {
    Applied::Write(value.into())
}

fn a(value: &str) -> Applied {
    Applied::Append(value.into())
}

fn checked(events: &[HistoryEvent], witness: &Witness) -> Result<CheckStats, Violation> {
    check_linearizable_witnessed(events, witness, &CheckOptions::default())
}

#[test]
fn the_replicas_order_proves_a_key_without_search() {
    // Goal: a right order verifies, appends and absent reads included, and counts as witnessed.
    let events = history(vec![
        read(1, None, 0, 5),
        write(1, "x", 10, 20),
        append(2, "y", 15, 30),
        read(3, Some("xy"), 31, 40),
        read(1, Some("xy"), 35, 45),
    ]);
    let stats = checked(&events, &order(&[("k", w("x")), ("k", a("y"))])).expect("linearizable");
    assert_eq!(stats.keys_witnessed, 1);
}

#[test]
fn a_wrong_order_falls_back_to_the_search() {
    // Goal: an order real time forbids does not verify, and the search still proves the key.
    let events = history(vec![write(1, "x", 0, 10), write(2, "y", 20, 30), read(1, Some("y"), 40, 50)]);
    let stats = checked(&events, &order(&[("k", w("y")), ("k", w("x"))])).expect("linearizable");
    assert_eq!(stats.keys_witnessed, 0, "searched instead");
}

#[test]
fn a_stale_read_is_rejected_whatever_the_order() {
    // Goal: a read of an overwritten value after the overwrite completed is a violation, with
    // the true order or an order that would explain the read.
    let events = history(vec![write(1, "x", 0, 10), write(2, "y", 20, 30), read(3, Some("x"), 40, 50)]);
    for witness in [order(&[("k", w("x")), ("k", w("y"))]), order(&[("k", w("y")), ("k", w("x"))])] {
        assert!(matches!(checked(&events, &witness), Err(Violation::NotLinearizable { .. })));
    }
}

#[test]
fn a_lost_write_is_rejected_whatever_the_order() {
    // Goal: a completed write that a later read does not see is a violation, whether the
    // order offered holds the write or leaves it out (a replica that lost it).
    let events = history(vec![write(1, "x", 0, 10), read(2, None, 20, 30)]);
    for witness in [order(&[("k", w("x"))]), Witness::default()] {
        assert!(matches!(checked(&events, &witness), Err(Violation::NotLinearizable { .. })));
    }
}

#[test]
fn an_impossible_value_is_rejected_whatever_the_order() {
    // Goal: a read of a value nobody wrote is a violation, even with an order that claims it.
    let events = history(vec![write(1, "x", 0, 10), read(2, Some("z"), 20, 30)]);
    for witness in [order(&[("k", w("x"))]), order(&[("k", w("x")), ("k", w("z"))])] {
        assert!(matches!(checked(&events, &witness), Err(Violation::NotLinearizable { .. })));
    }
}

#[test]
fn writes_of_unknown_outcome_may_be_in_the_order_failed_ones_may_not() {
    // Goal: an info write the replicas applied verifies; a failed write they applied does not
    // (the search then judges: here the read of it is a violation).
    let info = operation(1, OpKind::Write, Some("x"), 0, Some((EventKind::Info, 10)));
    let events = history(vec![info, read(2, Some("x"), 20, 30)]);
    let stats = checked(&events, &order(&[("k", w("x"))])).expect("linearizable");
    assert_eq!(stats.keys_witnessed, 1);
    let failed = operation(1, OpKind::Write, Some("x"), 0, Some((EventKind::Fail, 10)));
    let events = history(vec![failed, read(2, Some("x"), 20, 30)]);
    assert!(matches!(checked(&events, &order(&[("k", w("x"))])), Err(Violation::NotLinearizable { .. })));
}

#[test]
fn the_replicas_order_places_sweeps_and_deletes_and_reads_at_their_stamps() {
    // Goal: an order with sweeps and deletes verifies, with reads judged at their own stamps:
    // a read stamped before the expiry but made after a read that found the key expired, one
    // after the sweep, and reads of absent explained by an expired state, a sweep and a delete.
    let at = |at_ms, events| stamped(Some(at_ms), None, events);
    let events = history(vec![
        stamped(Some(100), Some(110), write(1, "a", 0, 1)),
        at(120, read(2, None, 2, 3)),
        at(50, read(3, Some("a"), 4, 5)),
        at(120, operation(4, OpKind::Expire, None, 6, Some((EventKind::Ok, 7)))),
        at(50, read(2, None, 8, 9)),
        write(1, "b", 10, 11),
        at(50, read(3, Some("b"), 12, 13)),
        operation(4, OpKind::Delete, None, 14, Some((EventKind::Ok, 15))),
        read(2, None, 16, 17),
    ]);
    let right = order(&[("k", w("a")), ("k", Applied::Expire(Some(120))), ("k", w("b")), ("k", Applied::Delete)]);
    let stats = checked(&events, &right).expect("linearizable");
    assert_eq!(stats.keys_witnessed, 1);
    // The sweep placed before the write it follows in real time: the search proves the key.
    let wrong = order(&[("k", Applied::Expire(Some(120))), ("k", w("a")), ("k", w("b")), ("k", Applied::Delete)]);
    assert_eq!(checked(&events, &wrong).expect("linearizable").keys_witnessed, 0);
    // An ok sweep missing from the order does not verify either.
    let missing = order(&[("k", w("a")), ("k", w("b")), ("k", Applied::Delete)]);
    assert_eq!(checked(&events, &missing).expect("linearizable").keys_witnessed, 0);
}

#[test]
fn a_value_read_after_its_sweep_is_rejected_whatever_the_order() {
    // Goal: a read that returns a value a completed sweep removed is a violation with any order
    // offered, including one that puts the sweep first (where it would remove nothing).
    let events = history(vec![
        stamped(Some(0), Some(10), write(1, "a", 0, 1)),
        stamped(Some(20), None, operation(2, OpKind::Expire, None, 2, Some((EventKind::Ok, 3)))),
        stamped(Some(5), None, read(3, Some("a"), 4, 5)),
    ]);
    for witness in [
        order(&[("k", w("a")), ("k", Applied::Expire(Some(20)))]),
        order(&[("k", Applied::Expire(Some(20))), ("k", w("a"))]),
        order(&[("k", w("a"))]),
    ] {
        assert!(matches!(checked(&events, &witness), Err(Violation::NotLinearizable { .. })));
    }
}

#[test]
fn generated_histories_are_proved_by_their_true_order() {
    // Goal: the order in which the store really applied the updates proves every key, with
    // expiring writes, sweeps, deletes and skewed stamps as without, with one-at-a-time and
    // pipelining clients. Method: generated workloads (6,000 operations on 3 keys) checked with
    // the generator's order as the witness.
    use super::workload::Expiry;
    for seed in 0..4 {
        for (clients, pipeline_depth) in [(12, 1), (4, 3)] {
            for expiry in [false, true] {
                let expiry = expiry.then_some(Expiry {
                    expiring_percent: 50,
                    expire_percent: 6,
                    delete_percent: 3,
                    skew_ms_max: 10,
                    ttl_ms_max: 40,
                });
                let workload = super::tests::small_workload(seed, clients, pipeline_depth, expiry);
                let (events, witness) = workload.generate_with_witness();
                let stats = checked(&events, &witness).unwrap_or_else(|violation| panic!("seed {seed}: {violation}"));
                assert_eq!(stats.keys_witnessed, 3, "seed {seed}, {clients} clients");
            }
        }
    }
}

/// A plausible but often wrong order: each key's updates by invocation time.
fn by_invocation(events: &[HistoryEvent]) -> Witness {
    let mut invocations: Vec<&HistoryEvent> =
        events.iter().filter(|e| e.kind == EventKind::Invoke && e.op != OpKind::Read).collect();
    invocations.sort_by_key(|e| e.time_ns);
    let mut witness = Witness::default();
    for event in invocations {
        let value = event.value.clone().unwrap_or_default();
        let effect = match event.op {
            OpKind::Write => Applied::Write(value),
            OpKind::Append => Applied::Append(value),
            OpKind::Expire => Applied::Expire(event.at_ms),
            OpKind::Delete | OpKind::Read => Applied::Delete,
        };
        witness.effects.entry(event.key.clone()).or_default().push(effect);
    }
    witness
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn a_witness_never_changes_the_verdict(
        clients in prop::collection::vec(client_script_strategy(), 1..=4),
        keys in 1u8..=3,
        expiry in any::<bool>(),
    ) {
        // Goal: soundness: with an order offered (right or wrong), the verdict is the oracle's,
        // with and without expiry. Method: the scripted random histories of `tests.rs`, with the
        // updates in invocation order as the witness.
        let events = scripted_history(&clients, keys, 9, expiry);
        let witnessed = checked(&events, &by_invocation(&events)).is_ok();
        let truth = oracle::is_linearizable(&events).expect("scripted histories are well formed");
        prop_assert_eq!(witnessed, truth, "witnessed check and oracle disagree on:\n{}", render(&events));
    }
}

#[test]
fn the_soundness_property_meets_verified_orders() {
    // Goal: `a_witness_never_changes_the_verdict` is not vacuous: on the same kind of random
    // histories the invocation order verifies for many keys, and it is offered on many
    // non-linearizable histories too, with and without expiry. Method: 4,000 seeded histories
    // of each kind, counting both.
    for expiry in [false, true] {
        let (witnessed, rejected) = witnessed_and_rejected(expiry);
        assert!(
            witnessed > 1_000 && rejected > 300,
            "expiry {expiry}: keys witnessed {witnessed}, rejected {rejected}"
        );
    }
}

/// Over 4,000 seeded scripted histories with the invocation order as witness: how many keys
/// verified, and how many histories were rejected.
fn witnessed_and_rejected(expiry: bool) -> (usize, usize) {
    use super::tests::{ClientScript, random_scripted};
    use super::workload::SplitMix;
    let mut random = SplitMix::new(7);
    let (mut witnessed, mut rejected) = (0, 0);
    for _ in 0..4_000 {
        let clients: Vec<ClientScript> = (0..1 + random.below(4))
            .map(|_| ClientScript {
                pipelined: false,
                steps: (0..1 + random.below(3)).map(|_| random_scripted(&mut random)).collect(),
            })
            .collect();
        let events = scripted_history(&clients, 1 + random.below(3) as u8, 9, expiry);
        match checked(&events, &by_invocation(&events)) {
            Ok(stats) => witnessed += stats.keys_witnessed,
            Err(_) => rejected += 1,
        }
    }
    (witnessed, rejected)
}
