//! The store's keyspace commands (KEYS, SCAN, DBSIZE, FLUSH, RANDOMKEY) and RENAME.
//!
//! # SCAN's cursor
//!
//! SCAN walks keys in the order of a fixed hash of the key ([`scan_hash`]), kept in a secondary
//! index ([`ScanIndex`]: (hash, key) for every entry of the map, tombstones included); the cursor
//! it returns is the hash of the next key to look at, and `0` once the walk is over. A call
//! always finishes the hash it stopped in, so each call covers a whole range of hashes, and the
//! calls of one walk cover every hash from 0 up in order. A key present for the whole walk
//! therefore lies in one call's range while it is in the index, and is returned exactly once,
//! however many keys come and go between calls (Redis promises at least once). The index costs
//! per key one 8-byte hash and one `Bytes` handle (the key's bytes are shared, not copied), plus
//! the B-tree's nodes: about 60 bytes a key. It is derived state: never serialized, rebuilt on
//! restore.
//!
//! # FLUSH and versions
//!
//! FLUSH empties the map, tombstones and all, so its memory really is freed. Versions must
//! still never repeat for a key (WATCH compares them: a key flushed and written again must not
//! come back to the version a client watched), so the store keeps [`Flushes`]: every version it
//! reports is `floor + the entry's own count`, and a FLUSH raises `floor` above every version
//! any key had. A key without an entry reports `floor`. Since a FLUSH is ordered against every
//! command, every replica flushes at the same point and computes the same floor, so digests
//! stay comparable; the flushes' request ids are chained into every digest as well.
//!
//! One difference from Redis 7 follows: a watched key that did not exist at the FLUSH also makes
//! EXEC abort (unless the store was empty), where Redis lets EXEC run. Telling the two apart
//! would need a tombstone for every flushed key, which is the memory the flush is meant to free;
//! an extra abort is safe, as WATCH users retry.

use super::{Data, Entry, KvStore};
use crate::command::expiry::is_expired;
use crate::command::{CommandResult, Key, Keyspace, Value};
use crate::glob::glob_match;
use crate::ids::RequestId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The seed of SCAN's order: fixed, so that every replica walks keys in the same order.
const SCAN_SEED: u64 = 0x6f72_646f_7363_616e;

/// Where `key` lies in SCAN's order.
pub fn scan_hash(key: &[u8]) -> u64 {
    xxh3_64_with_seed(key, SCAN_SEED)
}

/// True when an entry holds a value: tombstones are never listed nor counted (whether it has
/// expired is [`KvStore::visible`]'s question).
pub(super) fn is_live(entry: &Entry) -> bool {
    !matches!(entry.data, Data::Absent)
}

/// TYPE's name for a value (`None` for a tombstone).
pub(super) fn type_name(data: &Data) -> Option<&'static str> {
    match data {
        Data::Absent => None,
        Data::Text(_) => Some("string"),
        Data::Hash(_) => Some("hash"),
        Data::List(_) => Some("list"),
        Data::Set(_) => Some("set"),
        Data::Sorted(_) => Some("zset"),
    }
}

/// What survives a FLUSH: the floor under every version the store reports, and a hash chained
/// over the flushes' request ids (both 0 before the first flush that found keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Flushes {
    floor: u64,
    chain: u64,
}

impl Flushes {
    /// The version the store reports for an entry that counted `own` writes since the last flush
    /// (0: no entry).
    pub(super) fn version(&self, own: u64) -> u64 {
        self.floor.checked_add(own).expect("versions stay below 2^64: each counts a write")
    }

    /// The chain the store reports for an entry whose own chain is `own`: unchanged before the
    /// first flush, so that a store never flushed digests as it always did.
    pub(super) fn chain(&self, own: u64) -> u64 {
        if self.chain == 0 {
            return own;
        }
        let mut buffer = [0u8; 16];
        buffer[0..8].copy_from_slice(&self.chain.to_le_bytes());
        buffer[8..16].copy_from_slice(&own.to_le_bytes());
        xxh3_64(&buffer)
    }
}

/// SCAN's order: (hash, key) of every entry of the map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ScanIndex(BTreeSet<(u64, Key)>);

impl ScanIndex {
    /// The index of `keys`.
    pub(super) fn of<'a>(keys: impl Iterator<Item = &'a Key>) -> ScanIndex {
        ScanIndex(keys.map(|key| (scan_hash(key), key.clone())).collect())
    }

    /// Entries indexed.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

impl KvStore {
    /// The entry of `key`, created (and indexed) when missing: every insertion into the map goes
    /// through here, so that SCAN's index holds exactly the map's keys.
    pub(super) fn entry_mut(&mut self, key: &Key) -> &mut Entry {
        match self.entries.entry(key.clone()) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => {
                let inserted = self.index.0.insert((scan_hash(key), key.clone()));
                assert!(inserted, "a key is indexed once");
                entry.insert(Entry::new())
            }
        }
    }

    /// A store made of `entries` (a fork's) with `flushes`, and its index.
    pub(super) fn from_entries(entries: std::collections::BTreeMap<Key, Entry>, flushes: Flushes) -> KvStore {
        let index = ScanIndex::of(entries.keys());
        KvStore { entries, flushes, index, now: None }
    }

    /// Removes a never-written entry (one a failed command created), and its index entry.
    pub(super) fn forget(&mut self, key: &Key) {
        if self.entries.remove(key).is_some() {
            let removed = self.index.0.remove(&(scan_hash(key), key.clone()));
            assert!(removed, "an entry of the map is indexed");
        }
    }

    /// True when KEYS, SCAN and RANDOMKEY list the entry: it holds a value that has not
    /// expired at the command's stamp (DBSIZE, as Redis', also counts expired keys not yet
    /// removed).
    fn visible(&self, entry: &Entry) -> bool {
        is_live(entry) && !is_expired(entry.expires, self.now)
    }

    /// Rebuilds the derived index (after a restore).
    pub(super) fn reindex(&mut self) {
        self.index = ScanIndex::of(self.entries.keys());
    }

    /// The index holds exactly the map's keys (checked after every command: a code path that
    /// inserts into the map without [`KvStore::entry_mut`] fails here).
    pub(super) fn check_index(&self) {
        assert_eq!(self.index.len(), self.entries.len(), "SCAN's index holds every key of the map");
    }

    /// Runs a keyspace command.
    pub(super) fn keyspace(&mut self, request: RequestId, command: &Keyspace) -> CommandResult {
        match command {
            Keyspace::Keys { pattern } => CommandResult::Values(self.matching(pattern).map(Some).collect()),
            Keyspace::Scan { cursor, pattern, count, kind } => {
                self.scan(*cursor, pattern.as_ref(), *count, kind.as_ref())
            }
            Keyspace::Size => CommandResult::Integer(self.entries.values().filter(|e| is_live(e)).count() as i64),
            Keyspace::Flush => {
                self.flush(request);
                CommandResult::Ok
            }
            Keyspace::RandomKey { seed } => self.random_key(*seed).map_or(CommandResult::Nil, CommandResult::Value),
        }
    }

    /// KEYS: the live keys matching `pattern`, in key order. A pattern that starts with literal
    /// bytes only looks at the keys starting with them.
    fn matching<'a>(&'a self, pattern: &'a Value) -> impl Iterator<Item = Key> + 'a {
        let literal = pattern.iter().position(|b| matches!(b, b'*' | b'?' | b'[' | b'\\')).unwrap_or(pattern.len());
        let prefix = &pattern[..literal];
        let from: &[u8] = prefix;
        self.entries
            .range::<[u8], _>((std::ops::Bound::Included(from), std::ops::Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(prefix))
            .filter(move |(key, entry)| self.visible(entry) && glob_match(pattern, key))
            .map(|(key, _)| key.clone())
    }

    /// SCAN: looks at `count` keys from `cursor` on in hash order, finishing the last hash, and
    /// returns the next cursor (0 at the end) and the live ones that match.
    fn scan(&self, cursor: u64, pattern: Option<&Value>, count: u64, kind: Option<&Value>) -> CommandResult {
        // The gateway refuses COUNT 0, but a command can come from a peer: look at one key.
        let count = count.max(1);
        let mut found = Vec::new();
        let (mut looked, mut last_hash, mut next) = (0u64, cursor, 0u64);
        for (hash, key) in self.index.0.range((cursor, Key::new())..) {
            if looked >= count && *hash != last_hash {
                next = *hash;
                break;
            }
            looked += 1;
            last_hash = *hash;
            let entry = &self.entries[key];
            let kind_fits = |name: &str| kind.is_none_or(|kind| kind.eq_ignore_ascii_case(name.as_bytes()));
            let fits = self.visible(entry) && type_name(&entry.data).is_some_and(kind_fits);
            if fits && pattern.is_none_or(|pattern| glob_match(pattern, key)) {
                found.push(Some(key.clone()));
            }
        }
        assert!(next == 0 || next > cursor, "a walk only goes forward");
        found.insert(0, Some(Value::from(next.to_string())));
        CommandResult::Values(found)
    }

    /// RANDOMKEY: the first live key at or after `seed` in hash order, going round.
    fn random_key(&self, seed: u64) -> Option<Key> {
        let start = (seed, Key::new());
        let mut around = self.index.0.range(start.clone()..).chain(self.index.0.range(..start));
        around.find(|(_, key)| self.visible(&self.entries[key])).map(|(_, key)| key.clone())
    }

    /// FLUSH: forgets every entry, raising the floor above every version reported so far.
    fn flush(&mut self, request: RequestId) {
        let Some(highest) = self.entries.values().map(|entry| entry.version).max() else {
            return; // nothing to forget: no version moves
        };
        let floor = self.flushes.version(highest).checked_add(1).expect("versions stay below 2^64");
        let mut buffer = [0u8; 24];
        buffer[0..8].copy_from_slice(&self.flushes.chain.to_le_bytes());
        buffer[8..16].copy_from_slice(&request.client.0.to_le_bytes());
        buffer[16..24].copy_from_slice(&request.number.to_le_bytes());
        self.flushes = Flushes { floor, chain: xxh3_64(&buffer) };
        self.entries.clear();
        self.index.0.clear();
        assert!(self.flushes.version(0) > highest, "a key without an entry reports a version never seen");
    }

    /// RENAME / RENAMENX: moves the value (and, once keys expire, its expiry with it) from
    /// `source` to `destination`. Renaming a key onto itself changes nothing, as in Redis.
    pub(super) fn rename(
        &mut self,
        request: RequestId,
        source: &Key,
        destination: &Key,
        only_if_absent: bool,
    ) -> Result<CommandResult, CommandResult> {
        if !self.exists(source) {
            return Err(CommandResult::Error("ERR no such key".into()));
        }
        let refused = source == destination || (only_if_absent && self.exists(destination));
        if refused {
            return Ok(if only_if_absent { CommandResult::Integer(0) } else { CommandResult::Ok });
        }
        let expires = self.entries.get(source).and_then(|entry| entry.expires);
        let moved = std::mem::replace(&mut self.entry_mut(source).data, Data::Absent);
        self.write(request, source, Data::Absent);
        self.write(request, destination, moved);
        self.entry_mut(destination).expires = expires;
        Ok(if only_if_absent { CommandResult::Integer(1) } else { CommandResult::Ok })
    }
}

#[cfg(test)]
mod tests;
