//! What global checkers remember per slot (an op number, a log position): a bounded window from
//! slot to what was decided there. Slots are dense and mostly increasing, so the window is a ring
//! indexed by `slot - floor` (a checker sees a report every few simulated events: a tree map was
//! a tenth of a Multi-Paxos run's time). Past its bound it forgets the lowest slots, and reports
//! about a forgotten slot are counted as unchecked rather than compared, so a long simulation
//! keeps a fixed memory (2^19 slots hold a few tens of MB).

use std::collections::VecDeque;

/// A bounded slot → value map with a floor below which slots were forgotten.
#[derive(Debug)]
pub struct SlotWindow<V> {
    /// Slot `floor + i` at index `i`; `None` where nothing was reported.
    decided: VecDeque<Option<V>>,
    /// Slots remembered with a value.
    known: usize,
    /// Most slots the window spans.
    window: usize,
    /// Slots below this were forgotten.
    floor: u64,
    unchecked: u64,
}

impl<V> SlotWindow<V> {
    /// A window that remembers at most `window` slots.
    pub fn new(window: usize) -> Self {
        assert!(window > 0, "a checker remembers at least one slot");
        SlotWindow { decided: VecDeque::new(), known: 0, window, floor: 0, unchecked: 0 }
    }

    /// What is known at `slot`, after inserting `first()` if nothing was; `None` (counted as
    /// unchecked) when the slot lies below the window.
    pub fn entry(&mut self, slot: u64, first: impl FnOnce() -> V) -> Option<&mut V> {
        if slot < self.floor {
            self.unchecked += 1;
            return None;
        }
        if slot - self.floor >= self.window as u64 {
            // Far ahead: slide the window so that `slot` is its last slot.
            self.forget_below(slot + 1 - self.window as u64);
        }
        let index = (slot - self.floor) as usize;
        if index >= self.decided.len() {
            self.decided.resize_with(index + 1, || None);
        }
        let entry = &mut self.decided[index];
        if entry.is_none() {
            self.known += 1;
        }
        Some(entry.get_or_insert_with(first))
    }

    /// Keeps the window within its bound (call after each report; `entry` already slides the
    /// window, so this only checks).
    pub fn trim(&mut self) {
        assert!(self.decided.len() <= self.window, "the window respects its bound");
        assert!(self.known <= self.decided.len(), "known slots lie in the window");
    }

    fn forget_below(&mut self, floor: u64) {
        while self.floor < floor {
            match self.decided.pop_front() {
                Some(forgotten) => self.known -= usize::from(forgotten.is_some()),
                None => {
                    self.floor = floor;
                    break;
                }
            }
            self.floor += 1;
        }
    }

    /// Reports accepted without comparison because their slot lay below the window.
    pub fn unchecked(&self) -> u64 {
        self.unchecked
    }

    /// Slots remembered.
    pub fn len(&self) -> usize {
        self.known
    }

    /// True before the first report.
    pub fn is_empty(&self) -> bool {
        self.known == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_lowest_slots_past_its_bound_and_counts_reports_below() {
        // Goal: memory stays bounded and a forgotten slot is never compared. Method: a window of
        // two; three slots; the first is forgotten and a later report about it is unchecked; a
        // slot far ahead slides the window past everything.
        let mut window = SlotWindow::new(2);
        for slot in 1..=3 {
            assert_eq!(*window.entry(slot, || slot * 10).unwrap(), slot * 10);
            window.trim();
        }
        assert_eq!(window.len(), 2);
        assert!(window.entry(1, || 99).is_none());
        assert_eq!(window.unchecked(), 1);
        assert_eq!(*window.entry(3, || 99).unwrap(), 30, "a remembered slot keeps its first value");
        assert_eq!(*window.entry(100, || 7).unwrap(), 7);
        assert_eq!(window.len(), 1, "slots 2 and 3 fell out of the window");
        assert!(window.entry(98, || 0).is_none());
        assert_eq!(*window.entry(99, || 8).unwrap(), 8);
        window.trim();
    }
}
