//! The log executor against a naive oracle (STYLE 6): a set of accepted slots, and the rule that
//! the released sequence is always the longest run of consecutive accepted slots from the start.

use super::log::{LogError, LogExecutor};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[test]
fn releases_in_slot_order_once() {
    // Goal: out-of-order commits leave in slot order; duplicates and far slots are refused.
    // Method: commit 3, 1, 2 (window 3), then a duplicate, a released slot and one past the window.
    let mut log = LogExecutor::new(1, 3);
    let mut out = Vec::new();
    assert_eq!(log.commit(3, 'c'), Ok(()));
    assert_eq!(log.drain_ready(&mut out), 0);
    assert_eq!(log.commit(1, 'a'), Ok(()));
    assert_eq!(log.commit(3, 'x'), Err(LogError::Buffered));
    assert_eq!(log.commit(4, 'd'), Err(LogError::BeyondWindow));
    assert_eq!(log.commit(2, 'b'), Ok(()));
    assert_eq!(log.drain_ready(&mut out), 3);
    assert_eq!(out, vec![(1, 'a'), (2, 'b'), (3, 'c')]);
    assert_eq!(log.commit(2, 'b'), Err(LogError::Released));
    assert_eq!(log.next_slot(), 4);
    log.check_invariants();
}

#[test]
fn skip_to_drops_what_a_snapshot_covers() {
    // Goal: a snapshot moves the cursor and drops waiting entries below it, keeps those above.
    let mut log = LogExecutor::new(1, 10);
    for slot in [3, 5, 6] {
        log.commit(slot, slot).unwrap();
    }
    log.skip_to(5);
    let mut out = Vec::new();
    log.drain_ready(&mut out);
    assert_eq!(out, vec![(5, 5), (6, 6)]);
    assert_eq!(log.next_slot(), 7);
}

/// One step of a random run.
#[derive(Clone, Debug)]
enum Step {
    /// Commit the slot `start + offset`.
    Commit(u64),
    /// Release what can be released.
    Drain,
    /// A snapshot covers every slot below `start + offset`.
    SkipTo(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..40).prop_map(Step::Commit),
        2 => Just(Step::Drain),
        1 => (0u64..40).prop_map(Step::SkipTo),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// Goal: whatever order slots commit in, with duplicates, far slots and snapshots, the
    /// executor accepts exactly what the oracle accepts and releases exactly the oracle's
    /// sequence. Method: the oracle keeps the accepted slots with their values and a cursor;
    /// a slot is accepted iff it is new, at or past the cursor and inside the window; a drain
    /// releases the longest consecutive run from the cursor. Both run the same random steps.
    #[test]
    fn log_executor_matches_oracle(
        start in 0u64..1_000,
        gap_slots_max in 1usize..12,
        steps in prop::collection::vec(step(), 0..120),
    ) {
        let mut log = LogExecutor::new(start, gap_slots_max);
        let mut accepted: BTreeMap<u64, usize> = BTreeMap::new();
        let mut cursor = start;
        for (arrival, step) in steps.into_iter().enumerate() {
            match step {
                Step::Commit(offset) => {
                    let slot = start + offset;
                    let expected = if slot < cursor {
                        Err(LogError::Released)
                    } else if slot >= cursor + gap_slots_max as u64 {
                        Err(LogError::BeyondWindow)
                    } else if accepted.contains_key(&slot) {
                        Err(LogError::Buffered)
                    } else {
                        Ok(())
                    };
                    if expected.is_ok() {
                        accepted.insert(slot, arrival);
                    }
                    prop_assert_eq!(log.commit(slot, arrival), expected);
                }
                Step::Drain => {
                    let mut expected = Vec::new();
                    while let Some(value) = accepted.remove(&cursor) {
                        expected.push((cursor, value));
                        cursor += 1;
                    }
                    let mut out = vec![(u64::MAX, usize::MAX)];
                    let count = log.drain_ready(&mut out);
                    prop_assert_eq!(count, expected.len());
                    prop_assert_eq!(&out[1..], &expected[..]);
                }
                Step::SkipTo(offset) => {
                    let target = start + offset;
                    if target >= cursor {
                        accepted.retain(|&slot, _| slot >= target);
                        cursor = target;
                        log.skip_to(target);
                    }
                }
            }
            prop_assert_eq!(log.next_slot(), cursor);
            prop_assert_eq!(log.len(), accepted.len());
            log.check_invariants();
        }
    }
}
