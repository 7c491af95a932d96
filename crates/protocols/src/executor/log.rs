//! Log order: committed entries arrive by slot number in any order and leave in slot order,
//! each exactly once, with no slot skipped.
//!
//! An entry above the next slot to release waits in a gap buffer until every slot below it has
//! arrived. The buffer accepts only slots inside a window of `gap_slots_max` slots starting at
//! the next slot to release, so it never holds more than `gap_slots_max` entries (STYLE 12): a
//! slot beyond the window is refused with [`LogError::BeyondWindow`], which the caller counts
//! and recovers from the way it recovers from a lost message (it asks again later, or fetches
//! state). Refusing is safe because the entry stays committed elsewhere; buffering it would let
//! a replica that lags by a million slots hold a million entries.
//!
//! Checked against a naive oracle (a set of arrived slots and a counter) in `tests_log.rs`.

use std::collections::BTreeMap;

/// Why [`LogExecutor::commit`] refused an entry. Nothing changed in the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogError {
    /// The slot was released already (a duplicate commit, or one covered by a snapshot).
    Released,
    /// The slot waits in the gap buffer already (a duplicate commit).
    Buffered,
    /// The slot lies at or past `next_slot + gap_slots_max`: buffering it would exceed the bound.
    BeyondWindow,
}

/// Releases committed entries in slot order, each once.
#[derive(Clone, Debug)]
pub struct LogExecutor<T> {
    /// The next slot to release; every slot below it was released (or skipped by `skip_to`).
    next_slot: u64,
    /// The window of slots accepted, from `next_slot`; also the bound on `buffer`.
    gap_slots_max: usize,
    /// Committed entries not yet released, all inside the window.
    buffer: BTreeMap<u64, T>,
}

impl<T> LogExecutor<T> {
    /// An executor whose first release will be `next_slot`, accepting slots up to
    /// `gap_slots_max - 1` beyond the next one to release.
    pub fn new(next_slot: u64, gap_slots_max: usize) -> Self {
        assert!(gap_slots_max >= 1, "the window holds at least the next slot");
        assert!(next_slot < u64::MAX, "slots stay below u64::MAX");
        LogExecutor { next_slot, gap_slots_max, buffer: BTreeMap::new() }
    }

    /// The next slot to release: every slot below it has been released.
    pub fn next_slot(&self) -> u64 {
        self.next_slot
    }

    /// The window: how many slots from `next_slot` on are accepted.
    pub fn gap_slots_max(&self) -> usize {
        self.gap_slots_max
    }

    /// Entries waiting in the gap buffer.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// True when no entry waits.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The first slot past the window (refused).
    fn window_end(&self) -> u64 {
        self.next_slot.saturating_add(self.gap_slots_max as u64)
    }

    /// Accepts the committed entry of `slot`. It is released by [`LogExecutor::pop`] once every
    /// lower slot has been. On error nothing changes.
    pub fn commit(&mut self, slot: u64, value: T) -> Result<(), LogError> {
        if slot < self.next_slot {
            return Err(LogError::Released);
        }
        if slot >= self.window_end() {
            return Err(LogError::BeyondWindow);
        }
        if self.buffer.contains_key(&slot) {
            return Err(LogError::Buffered);
        }
        self.buffer.insert(slot, value);
        assert!(self.buffer.len() <= self.gap_slots_max, "the window bounds the buffer");
        assert!(
            self.buffer.first_key_value().is_some_and(|(&first, _)| first >= self.next_slot),
            "no stale slot waits"
        );
        Ok(())
    }

    /// Releases the entry of `next_slot` if it has arrived.
    pub fn pop(&mut self) -> Option<(u64, T)> {
        let first = self.buffer.first_entry()?;
        assert!(*first.key() >= self.next_slot, "released slots never wait");
        if *first.key() != self.next_slot {
            return None;
        }
        let (slot, value) = first.remove_entry();
        self.next_slot += 1;
        assert_eq!(slot + 1, self.next_slot, "slots are released one at a time, in order");
        Some((slot, value))
    }

    /// Appends every entry that can be released now to `out`, in slot order; returns how many.
    pub fn drain_ready(&mut self, out: &mut Vec<(u64, T)>) -> usize {
        let before = out.len();
        let first_slot = self.next_slot;
        while let Some(released) = self.pop() {
            out.push(released);
        }
        let count = out.len() - before;
        assert_eq!(first_slot + count as u64, self.next_slot, "each released slot moved the cursor by one");
        count
    }

    /// Moves the cursor forward to `next_slot` (a snapshot covers every slot below it): waiting
    /// entries below it are dropped, since the snapshot already holds their effect.
    pub fn skip_to(&mut self, next_slot: u64) {
        assert!(next_slot >= self.next_slot, "a snapshot only moves the cursor forward");
        assert!(next_slot < u64::MAX, "slots stay below u64::MAX");
        self.buffer = self.buffer.split_off(&next_slot);
        self.next_slot = next_slot;
        // Entries now beyond the window stay: the window only ever moves forward, so they were
        // inside it when accepted and still are.
        self.check_invariants();
    }

    /// Checks the buffer lies inside the window and within its bound.
    pub fn check_invariants(&self) {
        assert!(self.buffer.len() <= self.gap_slots_max, "the buffer holds at most the window");
        if let Some((&first, _)) = self.buffer.first_key_value() {
            assert!(first >= self.next_slot, "released slots never wait");
        }
        if let Some((&last, _)) = self.buffer.last_key_value() {
            assert!(last < self.window_end(), "every waiting slot is inside the window");
        }
    }
}
