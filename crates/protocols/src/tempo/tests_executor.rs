//! The executor against a naive oracle (STYLE 5, 6): commands run in ⟨ts, dot⟩ order on each
//! key they touch, only once stable, and never before a lower command sharing a key.

use super::executor::{ClientTable, Dedup, Executor};
use super::messages::Dot;
use ordo_core::{ClientId, CommandResult, Key, RequestId};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn dot(client: u64, n: u64) -> Dot {
    Dot { request: RequestId { client: ClientId(client), number: n }, attempt: 0 }
}

#[test]
fn equal_timestamps_run_in_id_order_t11() {
    // Goal: Fig. 3's w and y share ts 2; ties break by id, the same everywhere (T11).
    let key = Key::from("k");
    let (w, y) = (dot(1, 1), dot(2, 1));
    let mut executor = Executor::default();
    executor.add(y, 2, std::slice::from_ref(&key));
    executor.add(w, 2, std::slice::from_ref(&key));
    let stable = |_: &Key| 2;
    let mut gate = |_: Dot| true;
    assert_eq!(executor.next(&stable, &mut gate), Some((w, 2)));
    assert_eq!(executor.next(&stable, &mut gate), Some((y, 2)));
    assert_eq!(executor.next(&stable, &mut gate), None);
}

#[test]
fn client_table_runs_a_request_once() {
    // Goal: a request submitted under two attempts runs once; the second gets the result.
    let mut table = ClientTable::default();
    let request = RequestId { client: ClientId(3), number: 5 };
    assert_eq!(table.check(request), Dedup::Execute);
    table.record(request, CommandResult::Integer(1), 4);
    assert_eq!(table.check(request), Dedup::Duplicate(Some(CommandResult::Integer(1))));
}

/// Checks one run against the oracle's rule: stable on each key, and no waiting command that
/// shares a key has a lower ⟨ts, dot⟩.
fn check_run(ran: (Dot, u64), stable: &[u64; 4], waiting: &BTreeMap<Dot, (u64, Vec<usize>)>) -> Result<(), String> {
    let (d, ts) = ran;
    let (expected_ts, keys) = waiting.get(&d).ok_or("ran a command not waiting")?;
    if *expected_ts != ts {
        return Err("ran at another timestamp".into());
    }
    if keys.iter().any(|&k| stable[k] < ts) {
        return Err("ran before stable".into());
    }
    for (other, (other_ts, other_keys)) in waiting {
        if *other != d && other_keys.iter().any(|k| keys.contains(k)) && (*other_ts, *other) < (ts, d) {
            return Err(format!("{d:?} ran before the lower {other:?}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Goal: whatever the order commands commit in and stability moves, the executor runs a
    /// command only when the oracle allows it (stable on each of its keys, no lower waiting
    /// command on a shared key) and eventually runs them all. Method: random commands on 1–2
    /// of 4 keys, interleaved with random stability raises; every run is checked against the
    /// waiting set; at the end everything becomes stable and everything must have run.
    #[test]
    fn executor_matches_oracle(
        commands in prop::collection::vec((1u64..20, 0usize..4, 0usize..4), 1..40),
        raises in prop::collection::vec((0usize..4, 0u64..5), 0..60),
    ) {
        let keys: Vec<Key> = (0..4).map(|i| Key::from(format!("k{i}"))).collect();
        let mut executor = Executor::default();
        let mut stable = [0u64; 4];
        let mut waiting: BTreeMap<Dot, (u64, Vec<usize>)> = BTreeMap::new();
        let mut raises = raises.into_iter();
        let mut total = 0;
        for (index, (ts, a, b)) in commands.iter().enumerate() {
            // A command commits only above what is already stable on its keys (Theorem 1).
            let mut ks = vec![*a, *b];
            ks.sort_unstable();
            ks.dedup();
            let ts = ks.iter().map(|&k| stable[k] + 1).max().unwrap().max(*ts);
            let d = dot(1, index as u64);
            waiting.insert(d, (ts, ks.clone()));
            let command_keys: Vec<Key> = ks.iter().map(|&k| keys[k].clone()).collect();
            executor.add(d, ts, &command_keys);
            if let Some((k, up)) = raises.next() {
                stable[k] += up;
                executor.touch_key(&keys[k]);
            }
            let view = stable;
            let lookup = |key: &Key| view[keys.iter().position(|k| k == key).unwrap()];
            while let Some(next) = executor.next(&lookup, &mut |_| true) {
                prop_assert_eq!(check_run(next, &view, &waiting), Ok(()));
                waiting.remove(&next.0);
                total += 1;
            }
        }
        for (k, key) in keys.iter().enumerate() {
            stable[k] = 1_000;
            executor.touch_key(key);
        }
        let view = stable;
        let lookup = |key: &Key| view[keys.iter().position(|k| k == key).unwrap()];
        while let Some(next) = executor.next(&lookup, &mut |_| true) {
            prop_assert_eq!(check_run(next, &view, &waiting), Ok(()));
            waiting.remove(&next.0);
            total += 1;
        }
        prop_assert_eq!(total, commands.len());
        prop_assert!(executor.is_empty());
    }
}
