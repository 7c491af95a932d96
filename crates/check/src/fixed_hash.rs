//! Hash maps with a fixed, fast hasher for the checker's lookups.
//!
//! Why not the standard hasher: it is seeded from OS entropy (anti-pattern A1) and is slow for
//! the short keys the frontier search hashes millions of times. rustc-hash's Fx hasher is fixed
//! and fast (specs/dependencies.md §11). The checker only looks things up in these maps and never
//! lets their iteration order reach a result (anti-pattern A2).

/// A `HashMap` with a fixed hasher.
pub(crate) type FixedHashMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A `HashSet` with a fixed hasher.
pub(crate) type FixedHashSet<T> = rustc_hash::FxHashSet<T>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_work() {
        // Goal: the aliases behave as maps and sets.
        let mut map = FixedHashMap::default();
        map.insert("k", 1);
        assert_eq!(map.get("k"), Some(&1));
        let mut set = FixedHashSet::default();
        assert!(set.insert(3u64));
        assert!(!set.insert(3u64));
    }
}
