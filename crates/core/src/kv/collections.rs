//! What lists, sets and sorted sets share: Redis' rules for aggregates, kept in one place.
//!
//! - An absent key reads as an empty collection, and a write creates it.
//! - A key holding another kind of value is `WRONGTYPE`, and nothing changes.
//! - A collection left empty is deleted (Redis never keeps an empty aggregate).
//! - The key's version moves only when the command changed it (SADD of a member already there
//!   or LPOP of an absent list writes nothing), so WATCH and the agreement digests see writes,
//!   not attempts; a key that was never written leaves no entry behind.

use super::sorted::SortedSet;
use super::{Data, KvStore, WRONG_TYPE};
use crate::command::{Command, CommandResult, Key, Value};
use crate::ids::RequestId;
use std::collections::{BTreeSet, VecDeque};

/// One kind of collection held in [`Data`].
pub(super) trait Collection: Default {
    /// The collection when `data` holds this kind.
    fn of(data: &Data) -> Option<&Self>;
    /// The same, to change it.
    fn of_mut(data: &mut Data) -> Option<&mut Self>;
    /// The collection as stored data.
    fn into_data(self) -> Data;
    /// True when it holds nothing.
    fn is_empty(&self) -> bool;
}

impl Collection for VecDeque<Value> {
    fn of(data: &Data) -> Option<&Self> {
        if let Data::List(list) = data { Some(list) } else { None }
    }
    fn of_mut(data: &mut Data) -> Option<&mut Self> {
        if let Data::List(list) = data { Some(list) } else { None }
    }
    fn into_data(self) -> Data {
        Data::List(self)
    }
    fn is_empty(&self) -> bool {
        VecDeque::is_empty(self)
    }
}

impl Collection for BTreeSet<Value> {
    fn of(data: &Data) -> Option<&Self> {
        if let Data::Set(set) = data { Some(set) } else { None }
    }
    fn of_mut(data: &mut Data) -> Option<&mut Self> {
        if let Data::Set(set) = data { Some(set) } else { None }
    }
    fn into_data(self) -> Data {
        Data::Set(self)
    }
    fn is_empty(&self) -> bool {
        BTreeSet::is_empty(self)
    }
}

impl Collection for SortedSet {
    fn of(data: &Data) -> Option<&Self> {
        if let Data::Sorted(sorted) = data { Some(sorted) } else { None }
    }
    fn of_mut(data: &mut Data) -> Option<&mut Self> {
        if let Data::Sorted(sorted) = data { Some(sorted) } else { None }
    }
    fn into_data(self) -> Data {
        Data::Sorted(self)
    }
    fn is_empty(&self) -> bool {
        SortedSet::is_empty(self)
    }
}

/// Redis' WRONGTYPE error.
pub(super) fn wrong_type() -> CommandResult {
    CommandResult::Error(WRONG_TYPE.into())
}

impl KvStore {
    /// Runs a list, set or sorted-set command, or a float increment.
    pub(super) fn execute_collection(
        &mut self,
        request: RequestId,
        command: &Command,
    ) -> Result<CommandResult, CommandResult> {
        match command {
            Command::List { key, op } => self.execute_list(request, key, op),
            Command::Members { key, op } => self.execute_set(request, key, op),
            Command::SetAlgebra { op, keys, destination } => {
                self.execute_set_algebra(request, *op, keys, destination.as_ref())
            }
            Command::SetMove { source, destination, member } => {
                self.execute_set_move(request, source, destination, member)
            }
            Command::Sorted { key, op } => self.execute_sorted(request, key, op),
            Command::IncrByFloat { key, delta } => self.increment_float(request, key, delta),
            Command::HIncrByFloat { key, field, delta } => self.hash_increment_float(request, key, field, delta),
            other => unreachable!("{} is not a collection command", other.name()),
        }
    }

    /// The collection at `key`: `None` when the key is absent, WRONGTYPE when it holds another
    /// kind of value.
    pub(super) fn read<C: Collection>(&self, key: &Key) -> Result<Option<&C>, CommandResult> {
        match self.data(key) {
            None | Some(Data::Absent) => Ok(None),
            Some(data) => C::of(data).map(Some).ok_or_else(wrong_type),
        }
    }

    /// Runs `change` on the collection at `key` (a new, empty one when the key is absent) and
    /// applies the module's rules: WRONGTYPE for another kind, deletion when left empty, a
    /// version bump only when `change` says it changed something. `change` returns the result
    /// and that flag.
    pub(super) fn change<C: Collection>(
        &mut self,
        request: RequestId,
        key: &Key,
        change: impl FnOnce(&mut C) -> (CommandResult, bool),
    ) -> Result<CommandResult, CommandResult> {
        let entry = self.entry_mut(key);
        if matches!(entry.data, Data::Absent) {
            entry.data = C::default().into_data();
        }
        let Some(collection) = C::of_mut(&mut entry.data) else { return Err(wrong_type()) };
        let (result, changed) = change(collection);
        if collection.is_empty() {
            entry.data = Data::Absent;
            entry.expires = None;
        }
        if changed {
            entry.record_write(request);
        }
        if entry.version == 0 {
            assert!(matches!(entry.data, Data::Absent), "a key holding data has been written");
            self.forget(key);
        }
        Ok(result)
    }

    /// Replaces whatever `key` holds with `collection` (deleting the key when it is empty): the
    /// STORE commands' write. Writing nothing over an absent key is no write.
    pub(super) fn store<C: Collection>(&mut self, request: RequestId, key: &Key, collection: C) {
        if !collection.is_empty() {
            self.overwrite(request, key, collection.into_data());
        } else if self.exists(key) {
            self.write(request, key, Data::Absent);
        }
    }
}

/// The positions `start` to `stop` (inclusive; negative ones count from the end) of a
/// collection of `len` members, clamped as LRANGE, LTRIM and ZRANGE clamp them; `None` when
/// the range holds nothing.
pub(super) fn span(len: usize, start: i64, stop: i64) -> Option<std::ops::RangeInclusive<usize>> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some(start as usize..=stop.min(len - 1) as usize)
}
