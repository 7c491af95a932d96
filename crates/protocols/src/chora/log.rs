//! The replica's log and the slot schedule of a view.
//!
//! [`ReplicaLog`] holds entries by slot above a truncation floor and keeps `last-append` (the
//! slot before the first empty one, §6.1) up to date as entries come and go. [`Schedule`] says
//! which replica owns which slot in a view: the view-init at `base`, then the proposers in turn
//! (`base + i + n·R`, §6.2, with i counted from 1 over the view-init's proposer list).

use super::messages::Entry;
use std::collections::BTreeMap;

/// Slots owned in one view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The view-base: the view-init's slot.
    pub base: u64,
    /// Proposer ranks, in the order they take slots after `base`.
    pub proposers: Vec<u32>,
}

impl Schedule {
    /// A schedule; `proposers` is not empty.
    pub fn new(base: u64, proposers: Vec<u32>) -> Self {
        assert!(!proposers.is_empty(), "a view has at least one proposer");
        Schedule { base, proposers }
    }

    /// The rank owning `slot`, `None` for the view-init's slot and below.
    pub fn owner(&self, slot: u64) -> Option<u32> {
        if slot <= self.base {
            return None;
        }
        let index = (slot - self.base - 1) % self.proposers.len() as u64;
        Some(self.proposers[index as usize])
    }

    /// True when `rank` owns slots in the view.
    pub fn is_proposer(&self, rank: u32) -> bool {
        self.proposers.contains(&rank)
    }

    /// The first slot above `after` that `rank` owns (`rank` is a proposer).
    pub fn next_owned(&self, rank: u32, after: u64) -> u64 {
        let position = self.proposers.iter().position(|&p| p == rank).expect("rank is a proposer") as u64;
        let count = self.proposers.len() as u64;
        let first = self.base + 1 + position;
        if after < first {
            return first;
        }
        let rounds = (after - first) / count + 1;
        let next = first + rounds * count;
        assert!(next > after && self.owner(next) == Some(rank), "the next owned slot is ours and ahead");
        next
    }
}

/// The log: entries by slot above a floor of truncated (executed) slots.
#[derive(Clone, Debug)]
pub struct ReplicaLog {
    entries: BTreeMap<u64, Entry>,
    /// Slots below `first` were truncated; `first` itself is held (it is ≤ last-append).
    first: u64,
    last_append: u64,
}

impl ReplicaLog {
    /// A log holding view 0's view-init at slot 0.
    pub fn new(view_init: Entry) -> Self {
        assert!(view_init.is_view_init() && view_init.view == 0, "slot 0 holds view 0's view-init");
        let mut entries = BTreeMap::new();
        entries.insert(0, view_init);
        ReplicaLog { entries, first: 0, last_append: 0 }
    }

    /// The slot before the first empty slot.
    pub fn last_append(&self) -> u64 {
        self.last_append
    }

    /// The lowest slot still held.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The highest slot held.
    pub fn last_slot(&self) -> u64 {
        *self.entries.last_key_value().expect("the log holds at least its first slot").0
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is held (never: the first slot stays).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at `slot`.
    pub fn get(&self, slot: u64) -> Option<&Entry> {
        self.entries.get(&slot)
    }

    /// The view of the entry at `last-append`.
    pub fn last_append_view(&self) -> u64 {
        self.entries[&self.last_append].view
    }

    /// Puts `entry` at the empty `slot` above the floor.
    pub fn insert(&mut self, slot: u64, entry: Entry) {
        assert!(slot > self.first, "the floor is never written");
        let previous = self.entries.insert(slot, entry);
        assert!(previous.is_none(), "only empty slots are written");
        if slot == self.last_append + 1 {
            while self.entries.contains_key(&(self.last_append + 1)) {
                self.last_append += 1;
            }
        }
    }

    /// Deletes every entry at `from..until`; `from` lies above the floor.
    pub fn remove_range(&mut self, from: u64, until: u64) {
        assert!(from > self.first, "truncated slots are committed and never removed");
        let kept_above = self.entries.split_off(&until);
        self.entries.split_off(&from);
        self.entries.extend(kept_above);
        if self.last_append >= from {
            self.last_append = from - 1;
        }
    }

    /// Deletes every entry above `slot`.
    pub fn remove_above(&mut self, slot: u64) {
        self.remove_range(slot + 1, u64::MAX);
    }

    /// Forgets the slots below `first` (executed and committed everywhere they matter).
    pub fn truncate_below(&mut self, first: u64) {
        assert!(first <= self.last_append, "only appended slots are truncated");
        if first <= self.first {
            return;
        }
        self.entries = self.entries.split_off(&first);
        self.first = first;
        assert!(self.entries.contains_key(&first), "the new floor is held");
    }

    /// Makes `slot`, holding `entry`, the new floor (a snapshot committed there was installed):
    /// forgets everything below and at it, keeps what lies above.
    pub fn install_floor(&mut self, slot: u64, entry: Entry) {
        assert!(slot > self.first, "a snapshot moves the floor up");
        let above = self.entries.split_off(&(slot + 1));
        self.entries = above;
        self.entries.insert(slot, entry);
        self.first = slot;
        self.last_append = self.last_append.max(slot);
        if self.last_append == slot {
            while self.entries.contains_key(&(self.last_append + 1)) {
                self.last_append += 1;
            }
        }
    }

    /// Entries in `from..=until`, in slot order.
    pub fn range(&self, from: u64, until: u64) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries.range(from..=until.max(from)).filter(move |_| from <= until).map(|(&slot, entry)| (slot, entry))
    }

    /// Checks last-append against the entries (over a bounded stretch above it).
    pub fn check_invariants(&self) {
        assert!(self.entries.contains_key(&self.first), "the floor is held");
        assert!(self.last_append >= self.first, "last-append is at or above the floor");
        assert!(self.entries.contains_key(&self.last_append), "last-append is held");
        assert!(!self.entries.contains_key(&(self.last_append + 1)), "the slot after last-append is empty");
        let mut previous_view = 0;
        for (_, entry) in self.entries.range(self.last_append.saturating_sub(64).max(self.first)..=self.last_append) {
            assert!(entry.view >= previous_view, "views never decrease along the appended prefix (Claim 6)");
            previous_view = entry.view;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::messages::Value;
    use super::*;

    fn entry(view: u64) -> Entry {
        Entry { view, value: Value::NoOp }
    }

    #[test]
    fn round_robin_ownership_starts_after_the_base() {
        // Goal: slots follow `base + i + n·R` with the proposer list's order (§6.2).
        let schedule = Schedule::new(10, vec![0, 2]);
        assert_eq!(schedule.owner(10), None);
        assert_eq!(schedule.owner(11), Some(0));
        assert_eq!(schedule.owner(12), Some(2));
        assert_eq!(schedule.owner(13), Some(0));
        assert_eq!(schedule.next_owned(2, 0), 12);
        assert_eq!(schedule.next_owned(2, 12), 14);
        assert_eq!(schedule.next_owned(0, 12), 13);
        assert!(!schedule.is_proposer(1));
    }

    #[test]
    fn last_append_follows_the_first_gap() {
        // Goal: last-append is the slot before the first empty slot, as entries come and go.
        let mut log = ReplicaLog::new(Entry { view: 0, value: Value::ViewInit { proposers: vec![0] } });
        log.insert(2, entry(0));
        assert_eq!(log.last_append(), 0);
        log.insert(1, entry(0));
        assert_eq!(log.last_append(), 2);
        log.insert(4, entry(1));
        log.remove_range(2, 4);
        assert_eq!(log.last_append(), 1);
        assert!(log.get(4).is_some(), "entries past the range stay");
        log.insert(2, entry(1));
        log.insert(3, entry(1));
        assert_eq!(log.last_append(), 4);
        log.truncate_below(3);
        assert_eq!(log.first(), 3);
        assert!(log.get(2).is_none());
        log.check_invariants();
    }
}
