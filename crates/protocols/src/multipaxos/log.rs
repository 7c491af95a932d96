//! The replicated log: the entries after a base op number. Entries up to the base are committed
//! and live only in a snapshot (or, right after a replica adopted another's log, are still to be
//! fetched).

use super::messages::Entry;
use std::collections::VecDeque;

/// The log: entries at ops `base + 1 ..= op_number()`, contiguous by construction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log {
    base: u64,
    entries: VecDeque<Entry>,
}

impl Log {
    /// An empty log whose next entry will be `base + 1`.
    pub fn new(base: u64) -> Self {
        Log { base, entries: VecDeque::new() }
    }

    /// A log holding `entries` at ops `base + 1 ..`.
    pub fn from_entries(base: u64, entries: Vec<Entry>) -> Self {
        Log { base, entries: entries.into() }
    }

    /// The op number just below the first entry held.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The op number of the last entry (the base when empty).
    pub fn op_number(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    /// How many entries are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at `op`, if held.
    pub fn get(&self, op: u64) -> Option<&Entry> {
        if op <= self.base {
            return None;
        }
        let index = usize::try_from(op - self.base - 1).ok()?;
        self.entries.get(index)
    }

    /// Appends the entry at `op_number() + 1`.
    pub fn append(&mut self, entry: Entry) {
        self.entries.push_back(entry);
    }

    /// Copies of at most `max` entries after `after`, which must lie within `[base, op_number]`.
    pub fn entries_after(&self, after: u64, max: usize) -> Vec<Entry> {
        assert!(after >= self.base, "entries below the base are gone");
        assert!(after <= self.op_number(), "entries after the end do not exist");
        let skip = usize::try_from(after - self.base).expect("the log fits in memory");
        self.entries.iter().skip(skip).take(max).cloned().collect()
    }

    /// Copies of every entry held.
    pub fn all_entries(&self) -> Vec<Entry> {
        self.entries.iter().cloned().collect()
    }

    /// Iterates over `(op, entry)` for every entry after `after` (which must be at least `base`).
    pub fn iter_after(&self, after: u64) -> impl Iterator<Item = (u64, &Entry)> {
        assert!(after >= self.base, "entries below the base are gone");
        let skip = usize::try_from(after - self.base).unwrap_or(usize::MAX);
        let base = self.base;
        self.entries.iter().enumerate().skip(skip).map(move |(index, entry)| (base + index as u64 + 1, entry))
    }

    /// Forgets every entry up to `through` (which must lie within `[base, op_number]`): they are
    /// folded into a snapshot.
    pub fn truncate_prefix(&mut self, through: u64) {
        assert!(through >= self.base, "the base never moves back this way");
        assert!(through <= self.op_number(), "cannot truncate past the end");
        let count = usize::try_from(through - self.base).expect("the log fits in memory");
        self.entries.drain(..count);
        self.base = through;
    }

    /// Forgets every entry after `through` (which must lie within `[base, op_number]`).
    pub fn truncate_suffix(&mut self, through: u64) {
        assert!(through >= self.base, "cannot keep less than nothing");
        assert!(through <= self.op_number(), "cannot truncate past the end");
        let keep = usize::try_from(through - self.base).expect("the log fits in memory");
        self.entries.truncate(keep);
    }

    /// Makes the log its own prefix up to `after` followed by `entries`. When `after` lies outside
    /// `[base, op_number]` the entries up to `after` are not held: the log restarts at base
    /// `after`. Callers only splice at committed ops, so the new base stays committed.
    pub fn splice(&mut self, after: u64, entries: Vec<Entry>) {
        if after < self.base || after > self.op_number() {
            self.base = after;
            self.entries = entries.into();
        } else {
            self.truncate_suffix(after);
            self.entries.extend(entries);
        }
        assert!(self.op_number() >= after, "the spliced entries follow `after`");
    }

    /// Empties the log and moves its base to `base` (a snapshot past the end was installed).
    pub fn reset(&mut self, base: u64) {
        self.entries.clear();
        self.base = base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::{ClientId, Command, NodeId, RequestId};

    fn entry(number: u64) -> Entry {
        Entry {
            id: RequestId { client: ClientId(1), number },
            acked_below: number,
            reply_to: NodeId(9),
            command: Command::get("k"),
        }
    }

    fn numbers(log: &Log) -> Vec<u64> {
        log.iter_after(log.base()).map(|(_, e)| e.id.number).collect()
    }

    #[test]
    fn append_get_and_truncate() {
        // Goal: ops map to entries across prefix truncation. Method: append five, truncate two,
        // read back by op.
        let mut log = Log::new(0);
        for n in 1..=5 {
            log.append(entry(n));
        }
        assert_eq!(log.op_number(), 5);
        log.truncate_prefix(2);
        assert_eq!(log.base(), 2);
        assert!(log.get(2).is_none());
        assert_eq!(log.get(3).unwrap().id.number, 3);
        assert_eq!(log.entries_after(3, 10).len(), 2);
        assert_eq!(log.entries_after(2, 1)[0].id.number, 3);
        log.truncate_suffix(4);
        assert_eq!(numbers(&log), vec![3, 4]);
    }

    #[test]
    fn splice_inside_and_outside() {
        // Goal: splicing replaces the suffix, or restarts the log when the splice point is not
        // held. Method: compare against the expected op → entry lists.
        let mut log = Log::new(0);
        for n in 1..=4 {
            log.append(entry(n));
        }
        log.splice(2, vec![entry(30), entry(40), entry(50)]);
        assert_eq!(numbers(&log), vec![1, 2, 30, 40, 50]);
        log.splice(9, vec![entry(100)]);
        assert_eq!((log.base(), log.op_number()), (9, 10));
        log.splice(3, vec![entry(4)]);
        assert_eq!((log.base(), log.op_number()), (3, 4));
        log.reset(20);
        assert!(log.is_empty());
        assert_eq!(log.op_number(), 20);
    }
}
