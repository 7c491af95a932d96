//! The stability executor against a naive oracle (STYLE 6): a command may run iff it is stable
//! on each of its keys, its gate is open, and no waiting command sharing a key is lower in
//! ⟨timestamp, id⟩. The executor must run only such commands, and stop only when there is none.

use super::stability::{Full, StabilityExecutor};
use ordo_core::Key;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const KEYS: usize = 4;

fn key(index: usize) -> Key {
    Key::from(format!("k{index}"))
}

#[test]
fn a_command_waits_for_every_key_it_touches() {
    // Goal: a two-key command runs only once it heads both queues and both keys are stable.
    // Method: a (ts 2, keys 0 and 1) behind b (ts 1, key 1); key 1 not yet stable.
    let mut executor = StabilityExecutor::new(8);
    executor.add('a', 2, &[key(0), key(1)]).unwrap();
    executor.add('b', 1, &[key(1)]).unwrap();
    let mut stable = [5u64, 0];
    let mut open = |_: char| true;
    assert_eq!(executor.next(&|k: &Key| stable[usize::from(k[1] - b'0')], &mut open), None);
    stable[1] = 2;
    executor.touch_key(&key(1));
    assert_eq!(executor.next(&|k: &Key| stable[usize::from(k[1] - b'0')], &mut open), Some(('b', 1)));
    assert_eq!(executor.next(&|k: &Key| stable[usize::from(k[1] - b'0')], &mut open), Some(('a', 2)));
    assert!(executor.is_empty());
    executor.check_invariants_deeply();
}

#[test]
fn a_full_executor_refuses() {
    // Goal: the bound is enforced and a refusal changes nothing.
    let mut executor = StabilityExecutor::new(1);
    assert_eq!(executor.add(1u32, 1, &[key(0)]), Ok(()));
    assert_eq!(executor.add(2u32, 1, &[key(0)]), Err(Full));
    assert_eq!(executor.len(), 1);
    executor.check_invariants_deeply();
}

/// A waiting command in the oracle: timestamp and keys.
type Oracle = BTreeMap<u32, (u64, Vec<usize>)>;

/// The oracle's rule, from scratch: may `id` run now?
fn may_run(id: u32, waiting: &Oracle, stable: &[u64; KEYS], open: &BTreeSet<u32>) -> bool {
    let (timestamp, keys) = &waiting[&id];
    let lower_on_a_key = waiting.iter().any(|(other, (other_timestamp, other_keys))| {
        *other != id && other_keys.iter().any(|k| keys.contains(k)) && (*other_timestamp, *other) < (*timestamp, id)
    });
    open.contains(&id) && keys.iter().all(|&k| stable[k] >= *timestamp) && !lower_on_a_key
}

/// One step of a random run.
#[derive(Clone, Debug)]
enum Step {
    /// A command commits with this timestamp on keys `a` and `b` (one key if equal).
    Add { timestamp: u64, a: usize, b: usize, gated: bool },
    /// Key `key`'s stable timestamp rises by `by`.
    Raise { key: usize, by: u64 },
    /// The gate of the `nth` waiting command (modulo how many wait) opens.
    Open { nth: usize },
    /// Run what can run.
    Drain,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..20, 0..KEYS, 0..KEYS, prop::bool::weighted(0.2))
            .prop_map(|(timestamp, a, b, gated)| Step::Add { timestamp, a, b, gated }),
        3 => (0..KEYS, 0u64..6).prop_map(|(key, by)| Step::Raise { key, by }),
        1 => (0usize..64).prop_map(|nth| Step::Open { nth }),
        2 => Just(Step::Drain),
    ]
}

/// Drains the executor, checking each run against the oracle and that it stops only when the
/// oracle has nothing runnable either. Returns how many ran.
fn drain(
    executor: &mut StabilityExecutor<u32>,
    waiting: &mut Oracle,
    stable: &[u64; KEYS],
    open: &BTreeSet<u32>,
) -> Result<usize, TestCaseError> {
    let keys: Vec<Key> = (0..KEYS).map(key).collect();
    let lookup = |k: &Key| stable[keys.iter().position(|known| known == k).expect("a test key")];
    let mut ran = 0;
    while let Some((id, timestamp)) = executor.next(&lookup, &mut |id| open.contains(&id)) {
        prop_assert!(waiting.contains_key(&id), "ran {} which was not waiting", id);
        prop_assert_eq!(waiting[&id].0, timestamp, "ran at another timestamp");
        prop_assert!(may_run(id, waiting, stable, open), "ran {} though the oracle forbids it", id);
        waiting.remove(&id);
        ran += 1;
    }
    let runnable: Vec<u32> = waiting.keys().copied().filter(|&id| may_run(id, waiting, stable, open)).collect();
    prop_assert!(runnable.is_empty(), "stopped though {:?} may run", runnable);
    Ok(ran)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// Goal: whatever order commands commit in, stability rises and gates open, the executor
    /// runs a command only when the oracle allows it, never stops while the oracle has a
    /// runnable command, refuses exactly when full, and in the end runs everything. Method:
    /// random steps on 4 keys; the oracle keeps the waiting set, stable timestamps and open
    /// gates, and re-derives from scratch what may run; the caller touches a key when its
    /// stable timestamp rises and a command when its gate opens, as the contract asks.
    #[test]
    fn stability_executor_matches_oracle(
        commands_max in 1usize..30,
        steps in prop::collection::vec(step(), 0..120),
    ) {
        let mut executor = StabilityExecutor::new(commands_max);
        let mut waiting: Oracle = BTreeMap::new();
        let mut stable = [0u64; KEYS];
        let mut open: BTreeSet<u32> = BTreeSet::new();
        let mut next_id = 0u32;
        let mut added = 0;
        let mut ran = 0;
        for step in steps {
            match step {
                Step::Add { timestamp, a, b, gated } => {
                    // Ids are not in timestamp order, so ties and inversions both occur.
                    let id = next_id.wrapping_mul(2_654_435_761) % 1_000;
                    next_id += 1;
                    if waiting.contains_key(&id) {
                        continue;
                    }
                    let keys: Vec<usize> = if a == b { vec![a] } else { vec![a, b] };
                    let full = waiting.len() >= commands_max;
                    let result = executor.add(id, timestamp, &[key(a), key(b)]);
                    prop_assert_eq!(result, if full { Err(Full) } else { Ok(()) });
                    if !full {
                        waiting.insert(id, (timestamp, keys));
                        added += 1;
                        // An id may come back after it ran: its gate starts as drawn.
                        if gated {
                            open.remove(&id);
                        } else {
                            open.insert(id);
                        }
                    }
                }
                Step::Raise { key: k, by } => {
                    stable[k] += by;
                    executor.touch_key(&key(k));
                }
                Step::Open { nth } => {
                    if let Some(&id) = waiting.keys().nth(nth % waiting.len().max(1)) {
                        open.insert(id);
                        executor.touch(id);
                    }
                }
                Step::Drain => ran += drain(&mut executor, &mut waiting, &stable, &open)?,
            }
            prop_assert_eq!(executor.len(), waiting.len());
            executor.check_invariants_deeply();
        }
        for (k, value) in stable.iter_mut().enumerate() {
            *value = u64::MAX;
            executor.touch_key(&key(k));
        }
        for &id in waiting.keys() {
            open.insert(id);
            executor.touch(id);
        }
        ran += drain(&mut executor, &mut waiting, &stable, &open)?;
        prop_assert_eq!(ran, added);
        prop_assert!(executor.is_empty());
    }
}
