//! The application interface ([`StateMachine`]) and the built-in key-value store ([`KvStore`]).

use crate::command::expiry::is_expired;
use crate::command::{
    Command, CommandResult, ExpireCondition, ExpiryTime, HashRead, Key, SetCondition, SetExpiry, Value,
};
use crate::ids::RequestId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use xxhash_rust::xxh3::xxh3_64;

mod collections;
mod float;
mod list;
mod set;
mod sorted;
#[cfg(test)]
mod tests_collections;
pub use set::RANDOM_MEMBERS_MAX;
mod keyspace;
pub use keyspace::scan_hash;

/// What a key's history looks like at one replica, for the replica-agreement check: replicas
/// that applied the same number of writes to a key must have applied the same writes in the
/// same order, so their `chain` hashes must be equal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDigest {
    /// The key.
    pub key: Key,
    /// How many writing commands touched the key (after a FLUSH, counted from a floor above
    /// every earlier version).
    pub version: u64,
    /// A hash chained over the request ids of those writes, in order.
    pub chain: u64,
}

/// A snapshot could not be restored.
#[derive(Debug, thiserror::Error)]
#[error("snapshot does not decode: {0}")]
pub struct SnapshotError(String);

/// The replicated application. Protocols decide the order; an executor feeds the state machine.
pub trait StateMachine: Send {
    /// Executes one command. `request` identifies it, so that state digests reflect order.
    fn apply(&mut self, request: RequestId, command: &Command) -> CommandResult;
    /// Serializes the whole state (state transfer, log truncation).
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the state with a snapshot taken by [`StateMachine::snapshot`].
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotError>;
    /// Per-key digests, sorted by key, for the replica-agreement check (empty if unsupported).
    fn key_digests(&self) -> Vec<KeyDigest>;
    /// Calls `visit(key, version, chain)` for every key's digest, sorted by key, as
    /// [`StateMachine::key_digests`] lists them but without collecting them: a real replica
    /// hashes them for its status every few seconds, over states of millions of keys. The
    /// default walks `key_digests`.
    fn visit_key_digests(&self, visit: &mut dyn FnMut(&Key, u64, u64)) {
        for digest in self.key_digests() {
            visit(&digest.key, digest.version, digest.chain);
        }
    }
    /// A scratch machine holding copies of just `keys`, for speculative execution (a SwiftPaxos
    /// leader applies the pending commands that conflict with a new one, then the new one,
    /// without touching the real state). Commands that touch only forked keys give the fork
    /// the same results and per-key state they would give this machine, which stays unchanged.
    /// **A key not forked reads as absent** (never written) in the fork, so the caller forks
    /// every key the speculative commands touch ([`Command::keys`]); the fork's snapshot and
    /// digests cover only its keys. `None` means forking is unsupported (the default): the
    /// caller then copies the whole state through [`StateMachine::snapshot`] and
    /// [`StateMachine::restore`].
    fn fork_keys(&self, keys: &[Key]) -> Option<Box<dyn StateMachine>> {
        let _ = keys;
        None
    }
}

/// Entries between two snapshots: at least `least`; for a big state, the last snapshot's size
/// over `bytes_per_entry`, since a snapshot serializes the whole state and then costs about
/// that many bytes per entry (0: no growth); at most `most` (or `least`), which bounds the log
/// kept between snapshots.
pub fn snapshot_interval(snapshot_bytes: u64, bytes_per_entry: u64, least: u64, most: u64) -> u64 {
    let grown = snapshot_bytes.checked_div(bytes_per_entry).unwrap_or(0);
    grown.clamp(least, least.max(most))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Data {
    /// Deleted or never written; kept so that the key's version chain survives a DEL.
    Absent,
    Text(Value),
    Hash(BTreeMap<Value, Value>),
    List(std::collections::VecDeque<Value>),
    Set(std::collections::BTreeSet<Value>),
    Sorted(sorted::SortedSet),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    data: Data,
    version: u64,
    chain: u64,
    /// When the key expires (Unix ms), if it does; see [`crate::command::expiry`].
    #[serde(default)]
    expires: Option<i64>,
}

impl Entry {
    fn new() -> Self {
        Entry { data: Data::Absent, version: 0, chain: 0, expires: None }
    }

    fn record_write(&mut self, request: RequestId) {
        let mut buffer = [0u8; 24];
        buffer[0..8].copy_from_slice(&self.chain.to_le_bytes());
        buffer[8..16].copy_from_slice(&request.client.0.to_le_bytes());
        buffer[16..24].copy_from_slice(&request.number.to_le_bytes());
        self.chain = xxh3_64(&buffer);
        self.version += 1;
    }
}

const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Longest string value a command may build (APPEND, SETRANGE): Redis' `proto-max-bulk-len`
/// as the gateway applies it, so that one small command cannot make every replica allocate
/// gigabytes.
pub const STRING_LEN_MAX: usize = 64 * 1024 * 1024;

const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// The built-in key-value store with Redis semantics for strings, hashes, lists, sets and sorted
/// sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvStore {
    entries: BTreeMap<Key, Entry>,
    /// The stamp of the command being executed ([`Command::Timed`]); `None` between commands
    /// and for unstamped ones, which see nothing expired.
    #[serde(skip)]
    now: Option<i64>,
    // ---- the whole keyspace (`keyspace.rs`) ----
    /// The floor of reported versions, raised by FLUSH.
    flushes: keyspace::Flushes,
    /// SCAN's order over `entries`' keys: derived, rebuilt on restore.
    #[serde(skip)]
    index: keyspace::ScanIndex,
}

impl KvStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store as a boxed state machine: what drivers hand nodes as
    /// `NodeContext::new_state_machine` when the application is the built-in store.
    pub fn boxed() -> Box<dyn StateMachine> {
        Box::new(KvStore::new())
    }

    /// A store holding copies of just `keys` (with their version chains, so digests go on
    /// from where they were); every other key is absent. See [`StateMachine::fork_keys`].
    pub fn fork(&self, keys: &[Key]) -> KvStore {
        let entries: BTreeMap<Key, Entry> =
            keys.iter().filter_map(|key| self.entries.get(key).map(|entry| (key.clone(), entry.clone()))).collect();
        assert!(entries.len() <= keys.len(), "a fork holds only the keys asked for");
        assert!(entries.iter().all(|(key, entry)| self.entries.get(key) == Some(entry)), "forked entries are copies");
        KvStore::from_entries(entries, self.flushes)
    }

    /// The string value of a key, if any (tests).
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        match self.entries.get(key).map(|entry| &entry.data) {
            Some(Data::Text(value)) => Some(value),
            _ => None,
        }
    }

    /// The key's entry unless it is expired at the current command's stamp (reads never remove
    /// an expired key: not every replica executes every read; writes do, in `remove_expired`).
    fn live(&self, key: &Key) -> Option<&Entry> {
        self.entries.get(key).filter(|entry| !is_expired(entry.expires, self.now))
    }

    fn data(&self, key: &Key) -> Option<&Data> {
        self.live(key).map(|entry| &entry.data)
    }

    fn text(&self, key: &Key) -> Result<Option<&Value>, CommandResult> {
        match self.data(key) {
            None | Some(Data::Absent) => Ok(None),
            Some(Data::Text(value)) => Ok(Some(value)),
            Some(_) => Err(CommandResult::Error(WRONG_TYPE.into())),
        }
    }

    fn exists(&self, key: &Key) -> bool {
        self.live(key).is_some_and(keyspace::is_live)
    }

    /// Changes a key's value, keeping its expiry (as INCR, APPEND or HSET do) unless the key
    /// is deleted.
    fn write(&mut self, request: RequestId, key: &Key, data: Data) {
        let entry = self.entry_mut(key);
        if matches!(data, Data::Absent) {
            entry.expires = None;
        }
        entry.data = data;
        entry.record_write(request);
    }

    /// Replaces a key's value and clears its expiry (SET, GETSET, MSET), as Redis does.
    fn overwrite(&mut self, request: RequestId, key: &Key, data: Data) {
        self.write(request, key, data);
        self.entries.get_mut(key).expect("just written").expires = None;
    }

    fn hash_mut(&mut self, request: RequestId, key: &Key) -> Result<&mut BTreeMap<Value, Value>, CommandResult> {
        let entry = self.entry_mut(key);
        if matches!(entry.data, Data::Absent) {
            entry.data = Data::Hash(BTreeMap::new());
        }
        if !matches!(entry.data, Data::Hash(_)) {
            return Err(CommandResult::Error(WRONG_TYPE.into()));
        }
        entry.record_write(request);
        match &mut entry.data {
            Data::Hash(fields) => Ok(fields),
            _ => unreachable!("checked above"),
        }
    }

    fn hash(&self, key: &Key) -> Result<Option<&BTreeMap<Value, Value>>, CommandResult> {
        match self.data(key) {
            None | Some(Data::Absent) => Ok(None),
            Some(Data::Hash(fields)) => Ok(Some(fields)),
            Some(_) => Err(CommandResult::Error(WRONG_TYPE.into())),
        }
    }

    /// Executes one command: a stamp sets the time the command sees; a writing command first
    /// removes the expired keys it touches (as Redis' writes do), so it starts from what its
    /// reads see.
    fn execute(&mut self, request: RequestId, command: &Command) -> Result<CommandResult, CommandResult> {
        match command {
            Command::Timed { now_ms, command } => {
                let outer = self.now.replace(*now_ms);
                let result = self.execute(request, command);
                self.now = outer;
                result
            }
            Command::ExpireSweep { keys } => Ok(CommandResult::Integer(self.remove_expired(request, keys) as i64)),
            Command::Transaction { watched, commands } => Ok(self.transaction(request, watched, commands)),
            command if command.is_read_only() => self.execute_one(request, command),
            command => {
                if self.now.is_some() {
                    let mut expired = Vec::new();
                    command.for_each_key(|key| {
                        if self.entries.get(key).is_some_and(|entry| is_expired(entry.expires, self.now)) {
                            expired.push(key.clone());
                        }
                    });
                    self.remove_expired(request, &expired);
                }
                self.execute_one(request, command)
            }
        }
    }

    /// Removes the keys among `keys` that are expired now; returns how many. A removal is a
    /// write of the key (its version moves, so a WATCH of it aborts EXEC).
    fn remove_expired(&mut self, request: RequestId, keys: &[Key]) -> usize {
        let mut removed = 0;
        for key in keys {
            let expired = self.entries.get(key).is_some_and(|entry| is_expired(entry.expires, self.now));
            if expired {
                self.write(request, key, Data::Absent);
                removed += 1;
            }
        }
        removed
    }

    fn execute_one(&mut self, request: RequestId, command: &Command) -> Result<CommandResult, CommandResult> {
        Ok(match command {
            Command::Get { key } => self.text(key)?.cloned().map_or(CommandResult::Nil, CommandResult::Value),
            Command::Set { key, value, condition, expiry } => self.set(request, key, value, *condition, *expiry),
            Command::Del { keys } => self.delete(request, keys),
            Command::Exists { keys } => CommandResult::Integer(keys.iter().filter(|k| self.exists(k)).count() as i64),
            Command::Append { key, value } => {
                let mut joined = self.text(key)?.map(|v| v.to_vec()).unwrap_or_default();
                if joined.len() + value.len() > STRING_LEN_MAX {
                    return Err(CommandResult::Error(TOO_LONG.into()));
                }
                joined.extend_from_slice(value);
                let length = joined.len() as i64;
                self.write(request, key, Data::Text(joined.into()));
                CommandResult::Integer(length)
            }
            Command::IncrBy { key, delta } => self.increment(request, key, *delta)?,
            Command::MGet { keys } => {
                let values = keys.iter().map(|key| self.text(key).ok().flatten().cloned()).collect();
                CommandResult::Values(values)
            }
            Command::MSet { pairs } => {
                for (key, value) in pairs {
                    self.overwrite(request, key, Data::Text(value.clone()));
                }
                CommandResult::Ok
            }
            Command::GetSet { key, value, condition, expiry } => {
                let old = self.text(key)?.cloned();
                self.set(request, key, value, *condition, *expiry);
                old.map_or(CommandResult::Nil, CommandResult::Value)
            }
            Command::GetDel { key } => match self.text(key)?.cloned() {
                Some(value) => {
                    self.write(request, key, Data::Absent);
                    CommandResult::Value(value)
                }
                None => CommandResult::Nil,
            },
            Command::StrLen { key } => CommandResult::Integer(self.text(key)?.map_or(0, |v| v.len() as i64)),
            Command::GetRange { key, start, end } => {
                let value = self.text(key)?.cloned().unwrap_or_default();
                CommandResult::Value(value.slice(byte_range(value.len(), *start, *end)))
            }
            Command::SetRange { key, offset, value } => self.set_range(request, key, *offset, value)?,
            Command::MSetNx { pairs } => {
                if pairs.iter().any(|(key, _)| self.exists(key)) {
                    return Ok(CommandResult::Integer(0));
                }
                for (key, value) in pairs {
                    self.overwrite(request, key, Data::Text(value.clone()));
                }
                CommandResult::Integer(1)
            }
            Command::HSet { .. }
            | Command::HGet { .. }
            | Command::HGetAll { .. }
            | Command::HDel { .. }
            | Command::HIncrBy { .. }
            | Command::HSetNx { .. }
            | Command::HMGet { .. }
            | Command::HRead { .. } => self.execute_hash(request, command)?,
            Command::Type { key } => CommandResult::Value(Value::from_static(
                self.data(key).and_then(keyspace::type_name).unwrap_or("none").as_bytes(),
            )),
            Command::Versions { keys } => CommandResult::Versions(keys.iter().map(|key| self.version(key)).collect()),
            Command::Expire { .. } | Command::Ttl { .. } | Command::Persist { .. } => {
                self.execute_expiry(request, command)
            }
            Command::Transaction { .. } | Command::Timed { .. } | Command::ExpireSweep { .. } => {
                unreachable!("{} is executed by `execute`", command.name())
            }
            Command::Keyspace(keyspace) => self.keyspace(request, keyspace),
            Command::Rename { source, destination, only_if_absent } => {
                self.rename(request, source, destination, *only_if_absent)?
            }
            // Lists, sets, sorted sets and float increments (`kv/collections.rs`).
            collection => self.execute_collection(request, collection)?,
        })
    }

    /// EXPIRE and friends, TTL and friends, PERSIST.
    fn execute_expiry(&mut self, request: RequestId, command: &Command) -> CommandResult {
        let now = self.now.unwrap_or(0);
        match command {
            Command::Expire { key, time, condition } => self.expire(request, key, *time, *condition),
            Command::Ttl { key, read } => {
                CommandResult::Integer(self.live_expiry(key).map_or(-2, |expires| read.answer(expires, now)))
            }
            Command::Persist { key } => match self.live_expiry(key) {
                Some(Some(_)) => {
                    let entry = self.entries.get_mut(key).expect("live");
                    entry.expires = None;
                    entry.record_write(request);
                    CommandResult::Integer(1)
                }
                _ => CommandResult::Integer(0),
            },
            other => unreachable!("{} is not an expiry command", other.name()),
        }
    }

    /// A live key's expiry (`Some(None)`: it never expires); `None` when the key is absent.
    fn live_expiry(&self, key: &Key) -> Option<Option<i64>> {
        self.live(key).filter(|entry| !matches!(entry.data, Data::Absent)).map(|entry| entry.expires)
    }

    /// EXPIRE: a live key takes the new time when the condition allows; a time already past
    /// leaves the key expired from then on (its memory goes at the next write or sweep).
    fn expire(&mut self, request: RequestId, key: &Key, time: ExpiryTime, condition: ExpireCondition) -> CommandResult {
        let Some(current) = self.live_expiry(key) else { return CommandResult::Integer(0) };
        let at = time.resolve(self.now.unwrap_or(0));
        if !condition.allows(current, at) {
            return CommandResult::Integer(0);
        }
        let entry = self.entries.get_mut(key).expect("live");
        entry.expires = Some(at);
        entry.record_write(request);
        CommandResult::Integer(1)
    }

    /// SETRANGE: overwrites from `offset`, zero-padding a shorter value; an empty `value` only
    /// reads the length (and creates nothing), as in Redis.
    fn set_range(
        &mut self,
        request: RequestId,
        key: &Key,
        offset: u64,
        value: &Value,
    ) -> Result<CommandResult, CommandResult> {
        let current = self.text(key)?.map(|v| v.to_vec()).unwrap_or_default();
        if value.is_empty() {
            return Ok(CommandResult::Integer(current.len() as i64));
        }
        let end =
            usize::try_from(offset).ok().and_then(|o| o.checked_add(value.len())).filter(|&end| end <= STRING_LEN_MAX);
        let Some(end) = end else { return Err(CommandResult::Error(TOO_LONG.into())) };
        let mut bytes = current;
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[end - value.len()..end].copy_from_slice(value);
        let length = bytes.len() as i64;
        self.write(request, key, Data::Text(bytes.into()));
        Ok(CommandResult::Integer(length))
    }

    /// HINCRBY: adds `delta` to an integer field (absent counts as 0), refusing overflow.
    fn hash_increment(
        &mut self,
        request: RequestId,
        key: &Key,
        field: &Value,
        delta: i64,
    ) -> Result<CommandResult, CommandResult> {
        let current = match self.hash(key)?.and_then(|hash| hash.get(field)) {
            None => 0,
            Some(value) => {
                parse_integer(value).map_err(|_| CommandResult::Error("ERR hash value is not an integer".into()))?
            }
        };
        let Some(next) = current.checked_add(delta) else {
            return Err(CommandResult::Error("ERR increment or decrement would overflow".into()));
        };
        self.hash_mut(request, key)?.insert(field.clone(), next.to_string().into());
        Ok(CommandResult::Integer(next))
    }

    /// The hash commands.
    fn execute_hash(&mut self, request: RequestId, command: &Command) -> Result<CommandResult, CommandResult> {
        Ok(match command {
            Command::HSet { key, fields } => {
                let hash = self.hash_mut(request, key)?;
                let added = fields.iter().filter(|(f, v)| hash.insert(f.clone(), v.clone()).is_none()).count();
                CommandResult::Integer(added as i64)
            }
            Command::HGet { key, field } => match self.hash(key)?.and_then(|h| h.get(field)) {
                Some(value) => CommandResult::Value(value.clone()),
                None => CommandResult::Nil,
            },
            Command::HGetAll { key } => {
                let hash = self.hash(key)?;
                let flat = hash.into_iter().flatten().flat_map(|(f, v)| [Some(f.clone()), Some(v.clone())]);
                CommandResult::Values(flat.collect())
            }
            Command::HDel { key, fields } => self.hash_delete(request, key, fields)?,
            Command::HIncrBy { key, field, delta } => self.hash_increment(request, key, field, *delta)?,
            Command::HSetNx { key, field, value } => {
                if self.hash(key)?.is_some_and(|hash| hash.contains_key(field)) {
                    return Ok(CommandResult::Integer(0));
                }
                self.hash_mut(request, key)?.insert(field.clone(), value.clone());
                CommandResult::Integer(1)
            }
            Command::HMGet { key, fields } => {
                let hash = self.hash(key)?;
                CommandResult::Values(fields.iter().map(|f| hash.and_then(|h| h.get(f)).cloned()).collect())
            }
            Command::HRead { key, read } => hash_read(self.hash(key)?, read),
            other => unreachable!("{} is not a hash command", other.name()),
        })
    }

    /// How many writes have changed `key` (0 for a key never written), above the floor a FLUSH
    /// leaves (`keyspace.rs`). A delete is a write, so the count only grows: WATCH compares it
    /// before and after.
    fn version(&self, key: &Key) -> u64 {
        self.flushes.version(self.entries.get(key).map_or(0, |entry| entry.version))
    }

    /// MULTI ... EXEC: every command in order, or none when a watched key moved. Each command's
    /// error is its own result, as in Redis; a nested transaction is an error (the gateway
    /// never sends one).
    fn transaction(&mut self, request: RequestId, watched: &[(Key, u64)], commands: &[Command]) -> CommandResult {
        if watched.iter().any(|(key, version)| self.version(key) != *version) {
            return CommandResult::Nil;
        }
        let results = commands.iter().map(|command| match command {
            Command::Transaction { .. } => CommandResult::Error("ERR MULTI calls can not be nested".into()),
            command => self.execute(request, command).unwrap_or_else(|error| error),
        });
        CommandResult::Results(results.collect())
    }

    /// SET: writes the value and answers Ok, or answers Nil when the condition (NX, XX) forbids it.
    fn set(
        &mut self,
        request: RequestId,
        key: &Key,
        value: &Value,
        condition: SetCondition,
        expiry: SetExpiry,
    ) -> CommandResult {
        let exists = self.exists(key);
        let allowed = match condition {
            SetCondition::Always => true,
            SetCondition::IfAbsent => !exists,
            SetCondition::IfPresent => exists,
        };
        if !allowed {
            return CommandResult::Nil;
        }
        let kept = self.live(key).and_then(|entry| entry.expires);
        self.overwrite(request, key, Data::Text(value.clone()));
        self.entries.get_mut(key).expect("just written").expires = match expiry {
            SetExpiry::Clear => None,
            SetExpiry::Keep => kept,
            SetExpiry::Set(time) => Some(time.resolve(self.now.unwrap_or(0))),
        };
        CommandResult::Ok
    }

    /// DEL: removes the keys that exist and counts them.
    fn delete(&mut self, request: RequestId, keys: &[Key]) -> CommandResult {
        let mut deleted = 0;
        for key in keys {
            if self.exists(key) {
                deleted += 1;
                self.write(request, key, Data::Absent);
            }
        }
        CommandResult::Integer(deleted)
    }

    /// INCRBY: adds `delta` to the integer value (absent counts as 0), refusing overflow.
    fn increment(&mut self, request: RequestId, key: &Key, delta: i64) -> Result<CommandResult, CommandResult> {
        let current = match self.text(key)? {
            None => 0,
            Some(value) => parse_integer(value)?,
        };
        let Some(next) = current.checked_add(delta) else {
            return Err(CommandResult::Error("ERR increment or decrement would overflow".into()));
        };
        self.write(request, key, Data::Text(next.to_string().into()));
        Ok(CommandResult::Integer(next))
    }

    /// HDEL: removes the fields and counts them; a hash left empty is deleted.
    fn hash_delete(&mut self, request: RequestId, key: &Key, fields: &[Value]) -> Result<CommandResult, CommandResult> {
        if self.hash(key)?.is_none() {
            return Ok(CommandResult::Integer(0));
        }
        let hash = self.hash_mut(request, key)?;
        let removed = fields.iter().filter(|f| hash.remove(*f).is_some()).count();
        if hash.is_empty() {
            let entry = self.entries.get_mut(key).expect("hash exists");
            entry.data = Data::Absent;
            entry.expires = None;
        }
        Ok(CommandResult::Integer(removed as i64))
    }
}

/// GETRANGE's byte range of a value of `len` bytes: negative positions count from the end,
/// both ends are clamped, and an empty range is `0..0`.
fn byte_range(len: usize, start: i64, end: i64) -> std::ops::Range<usize> {
    let len = len as i64;
    let from_end = |position: i64| if position < 0 { (len + position).max(0) } else { position };
    let (start, end) = (from_end(start), from_end(end).min(len - 1));
    if len == 0 || start > end { 0..0 } else { start as usize..end as usize + 1 }
}

/// HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN of a hash (`None`: absent, read as empty).
fn hash_read(hash: Option<&BTreeMap<Value, Value>>, read: &HashRead) -> CommandResult {
    let all = || hash.into_iter().flatten();
    match read {
        HashRead::Fields => CommandResult::Values(all().map(|(f, _)| Some(f.clone())).collect()),
        HashRead::Values => CommandResult::Values(all().map(|(_, v)| Some(v.clone())).collect()),
        HashRead::Len => CommandResult::Integer(hash.map_or(0, |h| h.len() as i64)),
        HashRead::Exists(field) => CommandResult::Integer(i64::from(hash.is_some_and(|h| h.contains_key(field)))),
        HashRead::StrLen(field) => {
            CommandResult::Integer(hash.and_then(|h| h.get(field)).map_or(0, |v| v.len() as i64))
        }
    }
}

fn parse_integer(value: &Value) -> Result<i64, CommandResult> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(|| CommandResult::Error("ERR value is not an integer or out of range".into()))
}

impl StateMachine for KvStore {
    fn apply(&mut self, request: RequestId, command: &Command) -> CommandResult {
        let result = self.execute(request, command).unwrap_or_else(|error| error);
        self.check_index();
        result
    }

    fn snapshot(&self) -> Vec<u8> {
        // Sized first: a state of large values is then copied once, not once per doubling.
        let size = postcard::experimental::serialized_size(self).expect("a KvStore always serializes");
        postcard::to_extend(self, Vec::with_capacity(size)).expect("a KvStore always serializes")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotError> {
        *self = postcard::from_bytes(snapshot).map_err(|e| SnapshotError(e.to_string()))?;
        self.reindex();
        Ok(())
    }

    fn key_digests(&self) -> Vec<KeyDigest> {
        let mut digests = Vec::with_capacity(self.entries.len());
        self.visit_key_digests(&mut |key, version, chain| {
            digests.push(KeyDigest { key: key.clone(), version, chain });
        });
        digests
    }

    fn visit_key_digests(&self, visit: &mut dyn FnMut(&Key, u64, u64)) {
        for (key, entry) in &self.entries {
            visit(key, self.flushes.version(entry.version), self.flushes.chain(entry.chain));
        }
    }

    fn fork_keys(&self, keys: &[Key]) -> Option<Box<dyn StateMachine>> {
        Some(Box::new(self.fork(keys)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::TtlRead;
    use crate::ids::ClientId;

    fn request(number: u64) -> RequestId {
        RequestId { client: ClientId(1), number }
    }

    #[test]
    fn redis_semantics_for_strings() {
        // Goal: the store answers as Redis does for the string commands ordo replicates.
        let mut kv = KvStore::new();
        assert_eq!(kv.apply(request(1), &Command::get("k")), CommandResult::Nil);
        assert_eq!(kv.apply(request(2), &Command::set("k", "a")), CommandResult::Ok);
        assert_eq!(kv.apply(request(3), &Command::append("k", "bc")), CommandResult::Integer(3));
        assert_eq!(kv.apply(request(4), &Command::get("k")), CommandResult::Value("abc".into()));
        let incr = Command::IncrBy { key: "n".into(), delta: 5 };
        assert_eq!(kv.apply(request(5), &incr), CommandResult::Integer(5));
        let bad = Command::IncrBy { key: "k".into(), delta: 1 };
        assert!(matches!(kv.apply(request(6), &bad), CommandResult::Error(_)));
        let nx = Command::Set {
            key: "k".into(),
            value: "z".into(),
            condition: SetCondition::IfAbsent,
            expiry: SetExpiry::Clear,
        };
        assert_eq!(kv.apply(request(7), &nx), CommandResult::Nil);
        let del = Command::Del { keys: vec!["k".into(), "missing".into()] };
        assert_eq!(kv.apply(request(8), &del), CommandResult::Integer(1));
        assert_eq!(kv.apply(request(9), &Command::get("k")), CommandResult::Nil);
    }

    #[test]
    fn hashes_and_wrong_types() {
        // Goal: hash commands work and mixing types gives Redis' WRONGTYPE error.
        let mut kv = KvStore::new();
        let hset = Command::HSet { key: "h".into(), fields: vec![("f".into(), "1".into()), ("g".into(), "2".into())] };
        assert_eq!(kv.apply(request(1), &hset), CommandResult::Integer(2));
        let hget = Command::HGet { key: "h".into(), field: "g".into() };
        assert_eq!(kv.apply(request(2), &hget), CommandResult::Value("2".into()));
        assert!(matches!(kv.apply(request(3), &Command::get("h")), CommandResult::Error(_)));
        let all = kv.apply(request(4), &Command::HGetAll { key: "h".into() });
        assert_eq!(
            all,
            CommandResult::Values(vec![Some("f".into()), Some("1".into()), Some("g".into()), Some("2".into())])
        );
        let hdel = Command::HDel { key: "h".into(), fields: vec!["f".into(), "g".into()] };
        assert_eq!(kv.apply(request(5), &hdel), CommandResult::Integer(2));
        assert_eq!(kv.apply(request(6), &Command::Exists { keys: vec!["h".into()] }), CommandResult::Integer(0));
    }

    fn at(kv: &mut KvStore, now: i64, command: Command) -> CommandResult {
        kv.apply(request(now as u64), &command.timed(now))
    }

    fn set_px(key: &'static str, value: &'static str, ms: i64) -> Command {
        let expiry = SetExpiry::Set(ExpiryTime::In(ms));
        Command::Set { key: key.into(), value: value.into(), condition: SetCondition::Always, expiry }
    }

    #[test]
    fn keys_expire_by_the_commands_own_stamps() {
        // Goal: expiry is decided from each command's stamp: a key set with PX 100 at 1000 is
        // there at 1100 and gone at 1101; a read never removes it (a later command with an
        // older stamp still sees it), a write does; an unstamped command sees nothing expired.
        let mut kv = KvStore::new();
        assert_eq!(at(&mut kv, 1000, set_px("k", "v", 100)), CommandResult::Ok);
        assert_eq!(at(&mut kv, 1100, Command::get("k")), CommandResult::Value("v".into()));
        assert_eq!(
            at(&mut kv, 1050, Command::Ttl { key: "k".into(), read: TtlRead::Millis }),
            CommandResult::Integer(50)
        );
        assert_eq!(at(&mut kv, 1101, Command::get("k")), CommandResult::Nil);
        assert_eq!(at(&mut kv, 1101, Command::Exists { keys: vec!["k".into()] }), CommandResult::Integer(0));
        assert_eq!(
            at(&mut kv, 1101, Command::Ttl { key: "k".into(), read: TtlRead::Seconds }),
            CommandResult::Integer(-2)
        );
        assert_eq!(at(&mut kv, 1099, Command::get("k")), CommandResult::Value("v".into()), "a read removes nothing");
        assert_eq!(kv.apply(request(9), &Command::get("k")), CommandResult::Value("v".into()), "unstamped");
        // A write at 1101 starts from an absent key and clears the expiry.
        assert_eq!(at(&mut kv, 1101, Command::append("k", "x")), CommandResult::Integer(1));
        assert_eq!(at(&mut kv, 1099, Command::get("k")), CommandResult::Value("x".into()));
        assert_eq!(
            at(&mut kv, 5000, Command::Ttl { key: "k".into(), read: TtlRead::Seconds }),
            CommandResult::Integer(-1)
        );
    }

    #[test]
    fn writes_keep_or_clear_expiry_as_redis_does() {
        let mut kv = KvStore::new();
        let ttl = |kv: &mut KvStore| at(kv, 0, Command::Ttl { key: "k".into(), read: TtlRead::Millis });
        at(&mut kv, 0, set_px("k", "1", 1000));
        at(&mut kv, 0, Command::IncrBy { key: "k".into(), delta: 1 });
        assert_eq!(ttl(&mut kv), CommandResult::Integer(1000), "INCR keeps the expiry");
        let keep = Command::Set {
            key: "k".into(),
            value: "5".into(),
            condition: SetCondition::Always,
            expiry: SetExpiry::Keep,
        };
        at(&mut kv, 0, keep);
        assert_eq!(ttl(&mut kv), CommandResult::Integer(1000), "KEEPTTL");
        at(&mut kv, 0, Command::set("k", "6"));
        assert_eq!(ttl(&mut kv), CommandResult::Integer(-1), "a plain SET clears it");
        let expire = |time, condition| Command::Expire { key: "k".into(), time, condition };
        assert_eq!(at(&mut kv, 0, expire(ExpiryTime::In(500), ExpireCondition::IfLater)), CommandResult::Integer(0));
        assert_eq!(at(&mut kv, 0, expire(ExpiryTime::In(500), ExpireCondition::IfEarlier)), CommandResult::Integer(1));
        assert_eq!(at(&mut kv, 0, expire(ExpiryTime::At(400), ExpireCondition::IfNone)), CommandResult::Integer(0));
        assert_eq!(at(&mut kv, 0, expire(ExpiryTime::At(900), ExpireCondition::IfLater)), CommandResult::Integer(1));
        assert_eq!(ttl(&mut kv), CommandResult::Integer(900));
        assert_eq!(at(&mut kv, 0, Command::Persist { key: "k".into() }), CommandResult::Integer(1));
        assert_eq!(at(&mut kv, 0, Command::Persist { key: "k".into() }), CommandResult::Integer(0));
        assert_eq!(at(&mut kv, 0, expire(ExpiryTime::In(5), ExpireCondition::Always)), CommandResult::Integer(1));
        assert_eq!(
            at(
                &mut kv,
                0,
                Command::Expire { key: "none".into(), time: ExpiryTime::In(5), condition: ExpireCondition::Always }
            ),
            CommandResult::Integer(0)
        );
    }

    #[test]
    fn set_with_get_returns_the_old_value_as_redis_does() {
        // Goal: SET's GET option (checked against redis-server 7.0 by hand): the old value, or
        // nil, whether or not NX/XX let the write happen; WRONGTYPE on another type, writing
        // nothing; the expiry options apply as in SET.
        let mut kv = KvStore::new();
        let set_get = |value: &str, condition, expiry| Command::GetSet {
            key: "k".into(),
            value: Value::copy_from_slice(value.as_bytes()),
            condition,
            expiry,
        };
        let px = SetExpiry::Set(ExpiryTime::In(100));
        assert_eq!(at(&mut kv, 0, set_get("1", SetCondition::IfPresent, SetExpiry::Clear)), CommandResult::Nil);
        assert_eq!(at(&mut kv, 0, Command::get("k")), CommandResult::Nil, "XX on an absent key writes nothing");
        assert_eq!(at(&mut kv, 0, set_get("2", SetCondition::Always, px)), CommandResult::Nil);
        assert_eq!(
            at(&mut kv, 0, set_get("3", SetCondition::IfAbsent, SetExpiry::Clear)),
            CommandResult::Value("2".into())
        );
        let ttl = Command::Ttl { key: "k".into(), read: TtlRead::Millis };
        assert_eq!(at(&mut kv, 0, ttl.clone()), CommandResult::Integer(100), "NX refused the write");
        assert_eq!(
            at(&mut kv, 0, set_get("4", SetCondition::Always, SetExpiry::Keep)),
            CommandResult::Value("2".into())
        );
        assert_eq!(at(&mut kv, 0, ttl), CommandResult::Integer(100), "KEEPTTL");
        assert_eq!(
            at(&mut kv, 101, set_get("5", SetCondition::Always, SetExpiry::Clear)),
            CommandResult::Nil,
            "expired"
        );
        at(&mut kv, 0, Command::HSet { key: "h".into(), fields: vec![("f".into(), "v".into())] });
        let wrong = Command::GetSet { key: "h".into(), value: "x".into(), condition: SetCondition::Always, expiry: px };
        assert!(matches!(at(&mut kv, 0, wrong), CommandResult::Error(e) if e.starts_with("WRONGTYPE")));
        assert_eq!(at(&mut kv, 0, Command::Type { key: "h".into() }), CommandResult::Value("hash".into()));
    }

    #[test]
    fn the_sweep_removes_only_what_expired_and_moves_versions() {
        // Goal: the replicated sweep frees expired keys only, and a removal is a write (WATCH
        // sees it), while a key rewritten since its expiry was set stays.
        let mut kv = KvStore::new();
        at(&mut kv, 0, set_px("old", "v", 10));
        at(&mut kv, 0, set_px("new", "v", 10));
        at(&mut kv, 5, Command::set("new", "w"));
        let version = kv.version(&"old".into());
        let sweep = Command::ExpireSweep { keys: vec!["old".into(), "new".into(), "none".into()] };
        assert_eq!(at(&mut kv, 10, sweep.clone()), CommandResult::Integer(0), "nothing expired yet");
        assert_eq!(at(&mut kv, 11, sweep), CommandResult::Integer(1));
        assert_eq!(kv.version(&"old".into()), version + 1);
        assert!(matches!(kv.entries.get(b"old".as_slice()).map(|e| &e.data), Some(Data::Absent)));
        assert_eq!(at(&mut kv, 0, Command::get("old")), CommandResult::Nil, "removed for every later stamp");
        assert_eq!(at(&mut kv, 11, Command::get("new")), CommandResult::Value("w".into()));
    }

    #[test]
    fn transactions_run_whole_or_not_at_all() {
        // Goal: a transaction runs its commands in order with per-command results (an error
        // fails only its command); with WATCH, a write to a watched key since its version was
        // read aborts all of it, and only a write does (a read or a failed SET NX does not).
        let mut kv = KvStore::new();
        let versions = |kv: &mut KvStore, number| match kv.apply(request(number), &versions_of(&["a", "b"])) {
            CommandResult::Versions(versions) => versions,
            other => panic!("versions, not {other:?}"),
        };
        assert_eq!(versions(&mut kv, 1), vec![0, 0]);
        kv.apply(request(2), &Command::set("b", "x"));
        let watched = versions(&mut kv, 3);
        assert_eq!(watched, vec![0, 1]);
        let transaction = |watched: &[u64]| Command::Transaction {
            watched: vec![("a".into(), watched[0]), ("b".into(), watched[1])],
            commands: vec![
                Command::IncrBy { key: "a".into(), delta: 1 },
                Command::IncrBy { key: "b".into(), delta: 1 },
                Command::get("a"),
            ],
        };
        kv.apply(request(4), &Command::get("a"));
        kv.apply(
            request(5),
            &Command::Set {
                key: "b".into(),
                value: "y".into(),
                condition: SetCondition::IfAbsent,
                expiry: SetExpiry::Clear,
            },
        );
        let ran = kv.apply(request(6), &transaction(&watched));
        let expected_error = CommandResult::Error("ERR value is not an integer or out of range".into());
        assert_eq!(
            ran,
            CommandResult::Results(vec![CommandResult::Integer(1), expected_error, CommandResult::Value("1".into())])
        );
        assert_eq!(versions(&mut kv, 7), vec![1, 1], "the failed INCR wrote nothing");
        let before = kv.clone();
        assert_eq!(kv.apply(request(8), &transaction(&watched)), CommandResult::Nil, "a moved: aborted");
        assert_eq!(kv, before, "an aborted transaction changes nothing");
        let nested = Command::Transaction { watched: Vec::new(), commands: vec![transaction(&[1, 1])] };
        assert!(
            matches!(kv.apply(request(9), &nested), CommandResult::Results(r) if matches!(r[0], CommandResult::Error(_)))
        );
        assert_eq!(kv, before, "a nested transaction runs nothing");
    }

    #[test]
    fn more_string_and_hash_commands_answer_as_redis() {
        // Goal: the string and hash commands added for Redis clients give Redis' answers,
        // edge cases included (checked against redis-server 7.0 by hand).
        let mut kv = KvStore::new();
        let mut n = 0;
        let mut run = |kv: &mut KvStore, command: Command| {
            n += 1;
            kv.apply(request(n), &command)
        };
        assert_eq!(run(&mut kv, Command::getset("s", "Hello")), CommandResult::Nil);
        assert_eq!(run(&mut kv, Command::getset("s", "Hello World")), CommandResult::Value("Hello".into()));
        let range = |start, end| Command::GetRange { key: "s".into(), start, end };
        assert_eq!(run(&mut kv, range(0, 3)), CommandResult::Value("Hell".into()));
        assert_eq!(run(&mut kv, range(-3, -1)), CommandResult::Value("rld".into()));
        assert_eq!(run(&mut kv, range(0, -1)), CommandResult::Value("Hello World".into()));
        assert_eq!(run(&mut kv, range(10, 100)), CommandResult::Value("d".into()));
        assert_eq!(run(&mut kv, range(5, 3)), CommandResult::Value("".into()));
        assert_eq!(run(&mut kv, range(-100, -50)), CommandResult::Value("H".into()), "Redis clamps both to 0");
        let set_range =
            |offset, value: &'static str| Command::SetRange { key: "s".into(), offset, value: value.into() };
        assert_eq!(run(&mut kv, set_range(6, "Redis")), CommandResult::Integer(11));
        assert_eq!(run(&mut kv, Command::get("s")), CommandResult::Value("Hello Redis".into()));
        assert_eq!(
            run(&mut kv, Command::SetRange { key: "p".into(), offset: 2, value: "x".into() }),
            CommandResult::Integer(3)
        );
        assert_eq!(run(&mut kv, Command::get("p")), CommandResult::Value(Value::from_static(b"\0\0x")));
        let huge = Command::SetRange { key: "p".into(), offset: STRING_LEN_MAX as u64, value: "x".into() };
        assert!(matches!(run(&mut kv, huge), CommandResult::Error(e) if e.contains("maximum allowed size")));
        assert_eq!(run(&mut kv, Command::StrLen { key: "s".into() }), CommandResult::Integer(11));
        assert_eq!(run(&mut kv, Command::GetDel { key: "s".into() }), CommandResult::Value("Hello Redis".into()));
        assert_eq!(run(&mut kv, Command::Type { key: "s".into() }), CommandResult::Value("none".into()));
        assert_eq!(run(&mut kv, Command::GetDel { key: "s".into() }), CommandResult::Nil);
        let msetnx = |pairs: &[(&'static str, &'static str)]| Command::MSetNx {
            pairs: pairs.iter().map(|(k, v)| (Key::from(*k), Value::from(*v))).collect(),
        };
        assert_eq!(run(&mut kv, msetnx(&[("a", "1"), ("b", "2")])), CommandResult::Integer(1));
        assert_eq!(run(&mut kv, msetnx(&[("b", "3"), ("c", "3")])), CommandResult::Integer(0));
        assert_eq!(run(&mut kv, Command::get("c")), CommandResult::Nil, "all or nothing");
        let hincr = |field: &'static str, delta| Command::HIncrBy { key: "h".into(), field: field.into(), delta };
        assert_eq!(run(&mut kv, hincr("n", 5)), CommandResult::Integer(5));
        assert_eq!(run(&mut kv, hincr("n", -7)), CommandResult::Integer(-2));
        let hsetnx = |field: &'static str| Command::HSetNx { key: "h".into(), field: field.into(), value: "v".into() };
        assert_eq!(run(&mut kv, hsetnx("f")), CommandResult::Integer(1));
        assert_eq!(run(&mut kv, hsetnx("f")), CommandResult::Integer(0));
        assert!(
            matches!(run(&mut kv, hincr("f", 1)), CommandResult::Error(e) if e == "ERR hash value is not an integer")
        );
        let hmget = Command::HMGet { key: "h".into(), fields: vec!["f".into(), "x".into(), "n".into()] };
        assert_eq!(run(&mut kv, hmget), CommandResult::Values(vec![Some("v".into()), None, Some("-2".into())]));
        let read = |read| Command::HRead { key: "h".into(), read };
        assert_eq!(
            run(&mut kv, read(HashRead::Fields)),
            CommandResult::Values(vec![Some("f".into()), Some("n".into())])
        );
        assert_eq!(
            run(&mut kv, read(HashRead::Values)),
            CommandResult::Values(vec![Some("v".into()), Some("-2".into())])
        );
        assert_eq!(run(&mut kv, read(HashRead::Len)), CommandResult::Integer(2));
        assert_eq!(run(&mut kv, read(HashRead::Exists("f".into()))), CommandResult::Integer(1));
        assert_eq!(run(&mut kv, read(HashRead::StrLen("n".into()))), CommandResult::Integer(2));
        assert_eq!(run(&mut kv, Command::Type { key: "h".into() }), CommandResult::Value("hash".into()));
        assert_eq!(run(&mut kv, Command::Type { key: "a".into() }), CommandResult::Value("string".into()));
        assert!(
            matches!(run(&mut kv, Command::StrLen { key: "h".into() }), CommandResult::Error(e) if e.starts_with("WRONGTYPE"))
        );
        assert!(
            matches!(run(&mut kv, Command::HRead { key: "a".into(), read: HashRead::Len }), CommandResult::Error(e) if e.starts_with("WRONGTYPE"))
        );
    }

    fn versions_of(keys: &[&str]) -> Command {
        Command::Versions { keys: keys.iter().map(|key| Key::from(key.to_string())).collect() }
    }

    #[test]
    fn snapshot_round_trip_keeps_digests() {
        // Goal: a restored snapshot has the same state and the same per-key version chains, so
        // state transfer does not confuse the agreement check.
        let mut kv = KvStore::new();
        kv.apply(request(1), &Command::set("a", "1"));
        kv.apply(request(2), &Command::append("a", "2"));
        let mut restored = KvStore::new();
        restored.restore(&kv.snapshot()).unwrap();
        assert_eq!(restored, kv);
        assert_eq!(restored.key_digests()[0].version, 2);
        assert!(restored.restore(b"\xff\xff garbage").is_err());
    }

    #[test]
    fn visiting_key_digests_sees_what_key_digests_lists() {
        // Goal: the allocation-free walk the runtime's status digest uses is the same list, in
        // the same order, after a FLUSH too (whose versions and chains are offset).
        let mut kv = KvStore::new();
        kv.apply(request(1), &Command::set("b", "1"));
        kv.apply(request(2), &Command::set("a", "2"));
        kv.apply(request(3), &Command::Keyspace(crate::command::Keyspace::Flush));
        kv.apply(request(4), &Command::set("c", "3"));
        kv.apply(request(5), &Command::append("a", "4"));
        let mut visited = Vec::new();
        kv.visit_key_digests(&mut |key, version, chain| {
            visited.push(KeyDigest { key: key.clone(), version, chain });
        });
        assert_eq!(visited, kv.key_digests());
        assert_eq!(visited.len(), 2);
    }

    #[test]
    fn a_fork_holds_only_its_keys() {
        // Goal: a key not forked reads as absent in the fork, and writing the fork leaves the
        // original alone. Method: fork "a" of a store holding "a" and "b"; read and write both.
        let mut kv = KvStore::new();
        kv.apply(request(1), &Command::set("a", "1"));
        kv.apply(request(2), &Command::set("b", "2"));
        let before = kv.clone();
        let mut fork = kv.fork_keys(&["a".into()]).expect("a KvStore forks");
        assert_eq!(fork.apply(request(3), &Command::get("a")), CommandResult::Value("1".into()));
        assert_eq!(fork.apply(request(4), &Command::get("b")), CommandResult::Nil);
        let exists = Command::Exists { keys: vec!["a".into(), "b".into()] };
        assert_eq!(fork.apply(request(5), &exists), CommandResult::Integer(1));
        assert_eq!(fork.apply(request(6), &Command::append("a", "x")), CommandResult::Integer(2));
        assert_eq!(kv, before);
        assert_eq!(fork.key_digests().len(), 1);
    }

    #[test]
    fn digests_depend_on_write_order() {
        // Goal: two replicas applying the same writes in different orders disagree in the digest.
        let mut first = KvStore::new();
        let mut second = KvStore::new();
        first.apply(request(1), &Command::set("a", "x"));
        first.apply(request(2), &Command::set("a", "x"));
        second.apply(request(2), &Command::set("a", "x"));
        second.apply(request(1), &Command::set("a", "x"));
        assert_ne!(first.key_digests(), second.key_digests());
    }

    mod fork {
        //! Speculation on a fork against the plain way (STYLE 6): applying commands to a fork
        //! of the keys they touch must match applying them to a full copy.

        use super::*;
        use proptest::prelude::*;

        const KEYS: [&str; 4] = ["a", "b", "c", "d"];

        fn key() -> impl Strategy<Value = Key> {
            prop::sample::select(&KEYS[..]).prop_map(Key::from)
        }

        fn value() -> impl Strategy<Value = Value> {
            prop_oneof![(0i64..20).prop_map(|n| Value::from(n.to_string())), Just(Value::from("x"))]
        }

        fn command() -> impl Strategy<Value = Command> {
            prop_oneof![
                4 => simple(),
                // Stamps from 0 to 19 ms, not monotonic, as clients' clocks are not.
                4 => (simple(), 0i64..20).prop_map(|(command, now)| command.timed(now)),
                3 => collection(),
                1 => prop::collection::vec(key(), 1..3).prop_map(|keys| Command::Versions { keys }),
                1 => (prop::collection::vec((key(), 0u64..3), 0..2), prop::collection::vec(simple(), 0..4))
                    .prop_map(|(watched, commands)| Command::Transaction { watched, commands }),
                1 => (prop::collection::vec((key(), 0u64..3), 0..2), prop::collection::vec(collection(), 0..4))
                    .prop_map(|(watched, commands)| Command::Transaction { watched, commands }),
            ]
        }

        /// Lists, sets, sorted sets and float increments (`kv/tests_collections.rs`).
        fn collection() -> BoxedStrategy<Command> {
            crate::kv::tests_collections::collection_command(key().boxed(), value().boxed())
        }

        fn simple() -> impl Strategy<Value = Command> {
            prop_oneof![
                key().prop_map(|key| Command::Get { key }),
                (key(), value()).prop_map(|(key, value)| Command::set(key, value)),
                (key(), value()).prop_map(|(key, value)| Command::Set {
                    key,
                    value,
                    condition: SetCondition::IfAbsent,
                    expiry: SetExpiry::Clear,
                }),
                (key(), value(), 0i64..10).prop_map(|(key, value, ms)| Command::Set {
                    key,
                    value,
                    condition: SetCondition::Always,
                    expiry: SetExpiry::Set(ExpiryTime::In(ms)),
                }),
                (key(), value()).prop_map(|(key, value)| Command::Set {
                    key,
                    value,
                    condition: SetCondition::Always,
                    expiry: SetExpiry::Keep,
                }),
                (key(), -2i64..10).prop_map(|(key, ms)| Command::Expire {
                    key,
                    time: ExpiryTime::In(ms),
                    condition: ExpireCondition::Always
                }),
                key().prop_map(|key| Command::Ttl { key, read: crate::command::TtlRead::Millis }),
                key().prop_map(|key| Command::Persist { key }),
                prop::collection::vec(key(), 1..3).prop_map(|keys| Command::ExpireSweep { keys }),
                prop::collection::vec(key(), 1..3).prop_map(|keys| Command::Del { keys }),
                prop::collection::vec(key(), 1..3).prop_map(|keys| Command::Exists { keys }),
                (key(), value()).prop_map(|(key, value)| Command::Append { key, value }),
                (key(), -3i64..4).prop_map(|(key, delta)| Command::IncrBy { key, delta }),
                prop::collection::vec(key(), 1..3).prop_map(|keys| Command::MGet { keys }),
                prop::collection::vec((key(), value()), 1..3).prop_map(|pairs| Command::MSet { pairs }),
                (key(), value(), value())
                    .prop_map(|(key, field, value)| Command::HSet { key, fields: vec![(field, value)] }),
                (key(), value()).prop_map(|(key, field)| Command::HGet { key, field }),
                key().prop_map(|key| Command::HGetAll { key }),
                (key(), value()).prop_map(|(key, field)| Command::HDel { key, fields: vec![field] }),
                (key(), value()).prop_map(|(key, value)| Command::getset(key, value)),
                key().prop_map(|key| Command::GetDel { key }),
                key().prop_map(|key| Command::StrLen { key }),
                (key(), -4i64..4, -4i64..4).prop_map(|(key, start, end)| Command::GetRange { key, start, end }),
                (key(), 0u64..6, value()).prop_map(|(key, offset, value)| Command::SetRange { key, offset, value }),
                prop::collection::vec((key(), value()), 1..3).prop_map(|pairs| Command::MSetNx { pairs }),
                (key(), value(), -3i64..4).prop_map(|(key, field, delta)| Command::HIncrBy { key, field, delta }),
                (key(), value(), value()).prop_map(|(key, field, value)| Command::HSetNx { key, field, value }),
                (key(), prop::collection::vec(value(), 1..3)).prop_map(|(key, fields)| Command::HMGet { key, fields }),
                (key(), value()).prop_map(|(key, field)| Command::HRead { key, read: HashRead::Exists(field) }),
                key().prop_map(|key| Command::HRead { key, read: HashRead::Fields }),
                key().prop_map(|key| Command::Type { key }),
                (key(), key(), any::<bool>()).prop_map(|(source, destination, only_if_absent)| Command::Rename {
                    source,
                    destination,
                    only_if_absent
                }),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3_000))]

            /// Goal: a fork of the keys some commands touch gives those commands the results
            /// and per-key state a full copy gives them, and the original does not change.
            /// Method: a random history builds the state; random speculative commands run on a
            /// fork of their keys (plus a random extra key) and on a full clone.
            #[test]
            fn a_fork_speculates_like_a_full_copy(
                history in prop::collection::vec(
                    prop_oneof![9 => command(), 1 => Just(Command::Keyspace(crate::command::Keyspace::Flush))],
                    0..30,
                ),
                speculative in prop::collection::vec(command(), 1..8),
                extra in key(),
            ) {
                let mut kv = KvStore::new();
                for (number, command) in history.iter().enumerate() {
                    kv.apply(request(number as u64), command);
                }
                let original = kv.clone();
                let mut keys: Vec<Key> = speculative.iter().flat_map(Command::keys).collect();
                keys.push(extra);
                let mut fork = kv.fork_keys(&keys).expect("a KvStore forks");
                let mut copy = kv.clone();
                for (number, command) in speculative.iter().enumerate() {
                    let id = request(1_000 + number as u64);
                    prop_assert_eq!(fork.apply(id, command), copy.apply(id, command));
                }
                prop_assert_eq!(&kv, &original);
                let forked: Vec<KeyDigest> = fork.key_digests();
                let expected: Vec<KeyDigest> = copy.key_digests().into_iter().filter(|d| keys.contains(&d.key)).collect();
                prop_assert_eq!(forked, expected);
            }
        }
    }
}
