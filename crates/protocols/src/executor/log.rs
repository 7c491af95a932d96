//! Log order: committed entries arrive by slot number in any order and leave in slot order,
//! each exactly once, with no slot skipped.
//!
//! An entry above the next slot to release waits in a gap buffer until every slot below it has
//! arrived. The buffer accepts only slots inside a window of `gap_slots_max` slots starting at
//! the next slot to release, so it never spans more than `gap_slots_max` slots (STYLE 12): a
//! slot beyond the window is refused with [`LogError::BeyondWindow`], which the caller counts
//! and recovers from the way it recovers from a lost message (it asks again later, or fetches
//! state). Refusing is safe because the entry stays committed elsewhere; buffering it would let
//! a replica that lags by a million slots hold a million entries.
//!
//! The buffer is a ring of `gap_slots_max` positions at most, one per slot from the next one to
//! release: commit and release are O(1) and allocate nothing once the ring has grown, which
//! matters because every committed op of a log protocol passes through here.
//!
//! Checked against a naive oracle (a set of arrived slots and a counter) in `tests_log.rs`.

use std::collections::VecDeque;

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
    /// The window of slots accepted, from `next_slot`; also the bound on `ring`'s length.
    gap_slots_max: usize,
    /// Position `i` holds slot `next_slot + i` if it has arrived. Never ends with an empty
    /// position, so its length is how far the furthest waiting entry reaches.
    ring: VecDeque<Option<T>>,
    /// How many positions of `ring` hold an entry.
    waiting: usize,
}

impl<T> LogExecutor<T> {
    /// An executor whose first release will be `next_slot`, accepting slots up to
    /// `gap_slots_max - 1` beyond the next one to release.
    pub fn new(next_slot: u64, gap_slots_max: usize) -> Self {
        assert!(gap_slots_max >= 1, "the window holds at least the next slot");
        assert!(next_slot < u64::MAX, "slots stay below u64::MAX");
        LogExecutor { next_slot, gap_slots_max, ring: VecDeque::new(), waiting: 0 }
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
        self.waiting
    }

    /// True when no entry waits.
    pub fn is_empty(&self) -> bool {
        self.waiting == 0
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
        let index = (slot - self.next_slot) as usize;
        if index >= self.ring.len() {
            self.ring.resize_with(index + 1, || None);
        }
        let position = &mut self.ring[index];
        if position.is_some() {
            return Err(LogError::Buffered);
        }
        *position = Some(value);
        self.waiting += 1;
        assert!(self.ring.len() <= self.gap_slots_max, "the window bounds the buffer");
        assert!(self.waiting <= self.ring.len(), "each waiting entry has its own position");
        Ok(())
    }

    /// Releases the entry of `next_slot` if it has arrived.
    pub fn pop(&mut self) -> Option<(u64, T)> {
        let value = self.ring.front_mut()?.take()?;
        self.ring.pop_front();
        self.waiting -= 1;
        let slot = self.next_slot;
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
        let skipped = (next_slot - self.next_slot).min(self.ring.len() as u64) as usize;
        self.waiting -= self.ring.drain(..skipped).filter(Option::is_some).count();
        self.next_slot = next_slot;
        // Entries now beyond the window stay: the window only ever moves forward, so they were
        // inside it when accepted and still are.
        self.check_invariants();
    }

    /// Checks the buffer lies inside the window and within its bound.
    pub fn check_invariants(&self) {
        assert!(self.ring.len() <= self.gap_slots_max, "the buffer holds at most the window");
        assert!(self.ring.back().is_none_or(Option::is_some), "the ring ends with a waiting entry");
        assert_eq!(self.ring.iter().filter(|p| p.is_some()).count(), self.waiting, "waiting counts the entries");
        // Position i is slot next_slot + i and the length is at most the window: every waiting
        // slot is inside it, and none was released already.
    }
}
