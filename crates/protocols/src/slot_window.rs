//! What global checkers remember per slot (an op number, a log position): a bounded map from
//! slot to what was decided there. Past its bound it forgets the lowest slots, and reports about
//! a forgotten slot are counted as unchecked rather than compared, so a long simulation keeps a
//! fixed memory (a checker of 2^19 slots holds a few tens of MB).

use std::collections::BTreeMap;

/// A bounded slot → value map with a floor below which slots were forgotten.
#[derive(Debug)]
pub struct SlotWindow<V> {
    decided: BTreeMap<u64, V>,
    /// Most slots remembered.
    window: usize,
    /// Slots below this were forgotten.
    floor: u64,
    unchecked: u64,
}

impl<V> SlotWindow<V> {
    /// A window that remembers at most `window` slots.
    pub fn new(window: usize) -> Self {
        assert!(window > 0, "a checker remembers at least one slot");
        SlotWindow { decided: BTreeMap::new(), window, floor: 0, unchecked: 0 }
    }

    /// What is known at `slot`, after inserting `first()` if nothing was; `None` (counted as
    /// unchecked) when the slot lies below the window.
    pub fn entry(&mut self, slot: u64, first: impl FnOnce() -> V) -> Option<&mut V> {
        if slot < self.floor {
            self.unchecked += 1;
            return None;
        }
        Some(self.decided.entry(slot).or_insert_with(first))
    }

    /// Forgets the lowest slots beyond the bound (call after each report).
    pub fn trim(&mut self) {
        while self.decided.len() > self.window {
            let (lowest, _) = self.decided.pop_first().expect("the map is over its bound");
            self.floor = self.floor.max(lowest + 1);
        }
        assert!(self.decided.len() <= self.window, "the window respects its bound");
    }

    /// Reports accepted without comparison because their slot lay below the window.
    pub fn unchecked(&self) -> u64 {
        self.unchecked
    }

    /// Slots remembered.
    pub fn len(&self) -> usize {
        self.decided.len()
    }

    /// True before the first report.
    pub fn is_empty(&self) -> bool {
        self.decided.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_lowest_slots_past_its_bound_and_counts_reports_below() {
        // Goal: memory stays bounded and a forgotten slot is never compared. Method: a window of
        // two; three slots; the first is forgotten and a later report about it is unchecked.
        let mut window = SlotWindow::new(2);
        for slot in 1..=3 {
            assert_eq!(*window.entry(slot, || slot * 10).unwrap(), slot * 10);
            window.trim();
        }
        assert_eq!(window.len(), 2);
        assert!(window.entry(1, || 99).is_none());
        assert_eq!(window.unchecked(), 1);
        assert_eq!(*window.entry(3, || 99).unwrap(), 30, "a remembered slot keeps its first value");
    }
}
