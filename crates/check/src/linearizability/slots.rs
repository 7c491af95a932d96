//! Fixed-size bit sets over the slots of a key's open operations.
//!
//! Each open operation of a key holds a slot, reused once the operation leaves the open set, so
//! a configuration's "already linearized" set is a few machine words: copying, hashing and
//! comparing configurations then costs no allocation, which is what lets the frontier search
//! take a million operations in seconds.

/// A set of slots `0..WORDS * 64`. `WORDS` is chosen per key from the most operations that
/// are ever open at once (one instantiation per size class keeps the common case at one word).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct SlotSet<const WORDS: usize>([u64; WORDS]);

impl<const WORDS: usize> SlotSet<WORDS> {
    /// How many slots the set can hold.
    pub(super) const CAPACITY: usize = WORDS * 64;

    /// The empty set.
    pub(super) fn empty() -> Self {
        SlotSet([0; WORDS])
    }

    /// Whether `slot` is in the set.
    pub(super) fn contains(&self, slot: usize) -> bool {
        debug_assert!(slot < Self::CAPACITY);
        self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Adds `slot`.
    pub(super) fn insert(&mut self, slot: usize) {
        debug_assert!(slot < Self::CAPACITY);
        self.0[slot / 64] |= 1 << (slot % 64);
    }

    /// Removes `slot`.
    pub(super) fn remove(&mut self, slot: usize) {
        debug_assert!(slot < Self::CAPACITY);
        self.0[slot / 64] &= !(1 << (slot % 64));
    }

    /// Replaces the slots of `self` that are in `mask` by those of `with` (a subset of `mask`).
    pub(super) fn replace_within(&mut self, mask: &Self, with: &Self) {
        for word in 0..WORDS {
            self.0[word] = (self.0[word] & !mask.0[word]) | with.0[word];
        }
    }

    /// Removes the slots of `other`.
    pub(super) fn remove_all(&mut self, other: &Self) {
        for word in 0..WORDS {
            self.0[word] &= !other.0[word];
        }
    }

    /// Adds the slots of `other`.
    pub(super) fn insert_all(&mut self, other: &Self) {
        for word in 0..WORDS {
            self.0[word] |= other.0[word];
        }
    }

    /// Keeps only the slots of `other`.
    pub(super) fn intersect(&mut self, other: &Self) {
        for word in 0..WORDS {
            self.0[word] &= other.0[word];
        }
    }

    /// Whether the set is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|&word| word == 0)
    }

    /// How many slots of `self` are in `within`.
    pub(super) fn count_within(&self, within: &Self) -> u32 {
        (0..WORDS).map(|word| (self.0[word] & within.0[word]).count_ones()).sum()
    }

    /// Whether every slot in `self` but not in `other` is in `allowed`.
    pub(super) fn difference_within(&self, other: &Self, allowed: &Self) -> bool {
        (0..WORDS).all(|word| self.0[word] & !other.0[word] & !allowed.0[word] == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_and_difference() {
        // Goal: the set operations work across word boundaries. Method: slots 0, 63, 64 and 127
        // in a two-word set, then the difference test with and without an allowance.
        let mut set = SlotSet::<2>::empty();
        assert_eq!(set, SlotSet::empty());
        for slot in [0, 63, 64, 127] {
            set.insert(slot);
            assert!(set.contains(slot));
        }
        assert!(!set.contains(1));
        let mut smaller = set;
        smaller.remove(64);
        assert!(!smaller.contains(64));
        assert!(smaller.difference_within(&set, &SlotSet::empty()));
        assert!(!set.difference_within(&smaller, &SlotSet::empty()));
        let mut allowed = SlotSet::empty();
        allowed.insert(64);
        assert!(set.difference_within(&smaller, &allowed));
        assert_eq!((set.count_within(&allowed), set.count_within(&set), smaller.count_within(&allowed)), (1, 4, 0));
        let mut replaced = set;
        replaced.replace_within(&set, &allowed);
        assert_eq!(replaced, allowed);
        let mut joined = smaller;
        joined.insert_all(&allowed);
        assert_eq!(joined, set);
        joined.remove_all(&allowed);
        assert_eq!(joined, smaller);
        joined.intersect(&allowed);
        assert!(joined.is_empty() && !set.is_empty());
        assert_eq!(SlotSet::<2>::CAPACITY, 128);
    }
}
