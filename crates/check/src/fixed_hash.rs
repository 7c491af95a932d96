//! A hash map with a fixed, fast hasher for the checker's lookups.
//!
//! Why not the standard hasher: it is seeded from OS entropy (anti-pattern A1) and is slow for
//! the short keys the frontier search hashes millions of times. The checker only looks things
//! up in these maps and never lets their iteration order reach a result (anti-pattern A2).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hasher: each word is folded into the state, then mixed by a multiplication
/// with an odd constant. Good enough for lookups; no defence against adversarial keys is needed
/// because a collision only costs time, never correctness.
#[derive(Default, Clone, Copy)]
pub(crate) struct FixedHasher {
    state: u64,
}

/// An odd constant with well-spread bits (the golden ratio's fraction times 2^64).
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl FixedHasher {
    fn fold(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for FixedHasher {
    fn finish(&self) -> u64 {
        // A final shift spreads the high bits, which the multiplication mixed best, downwards
        // where the hash table takes its bucket index from.
        self.state ^ (self.state >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.fold(u64::from_le_bytes(chunk.try_into().expect("chunks of eight bytes")));
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.fold(u64::from_le_bytes(tail) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u8(&mut self, value: u8) {
        self.fold(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.fold(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.fold(value as u64);
    }
}

/// A `HashMap` with [`FixedHasher`].
pub(crate) type FixedHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FixedHasher>>;

/// A `HashSet` with [`FixedHasher`].
pub(crate) type FixedHashSet<T> = HashSet<T, BuildHasherDefault<FixedHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash_of(value: impl Hash) -> u64 {
        let mut hasher = FixedHasher::default();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn equal_values_hash_equal_and_nearby_values_differ() {
        // Goal: the hasher is deterministic and separates similar keys. Method: hash the same
        // and neighbouring values, and strings differing only in length.
        assert_eq!(hash_of("abc"), hash_of("abc"));
        assert_ne!(hash_of(1u64), hash_of(2u64));
        assert_ne!(hash_of("a"), hash_of("a\0"));
        let mut map = FixedHashMap::default();
        map.insert("k", 1);
        assert_eq!(map.get("k"), Some(&1));
    }
}
