//! The commands of the built-in key-value store, with Redis semantics, and their results.
//!
//! Each command says which keys it touches and whether it only reads them: conflicts and
//! commutativity (Nezha's per-key hashes, SwiftPaxos' and Tempo's conflict relation, Tempo's
//! shards) are derived from these key sets, never from the command's name.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub mod expiry;
pub use expiry::{ExpireCondition, ExpiryTime, SetExpiry, TtlRead};
mod list;
pub mod number;
mod set;
mod sorted;
pub use list::{LPOS_RANK_ZERO, ListEnd, ListOp};
pub use set::{Combine, SetOp};
pub use sorted::{AddOptions, Compare, LexBound, Range, RangeBy, Score, ScoreBound, SortedOp};
pub mod keyspace;
pub use keyspace::Keyspace;

/// A key of the store.
pub type Key = Bytes;
/// A value of the store.
pub type Value = Bytes;

/// When a SET takes effect (Redis' NX and XX options).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SetCondition {
    /// Always.
    #[default]
    Always,
    /// Only when the key does not exist (NX).
    IfAbsent,
    /// Only when the key exists (XX).
    IfPresent,
}

/// What [`Command::HRead`] reads of a hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HashRead {
    /// HKEYS: every field.
    Fields,
    /// HVALS: every value.
    Values,
    /// HLEN: how many fields.
    Len,
    /// HEXISTS: 1 when the field exists.
    Exists(Value),
    /// HSTRLEN: the length of the field's value (0 when absent).
    StrLen(Value),
}

/// A command of the key-value store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Reads a string value.
    Get {
        /// The key read.
        key: Key,
    },
    /// Writes a string value.
    Set {
        /// The key written.
        key: Key,
        /// The new value.
        value: Value,
        /// NX / XX.
        condition: SetCondition,
        /// What happens to the key's expiry (EX, PX, EXAT, PXAT, KEEPTTL; a plain SET clears it).
        #[serde(default)]
        expiry: SetExpiry,
    },
    /// Deletes keys; returns how many existed.
    Del {
        /// The keys deleted.
        keys: Vec<Key>,
    },
    /// Counts how many of the keys exist.
    Exists {
        /// The keys tested.
        keys: Vec<Key>,
    },
    /// Appends to a string value; returns the new length.
    Append {
        /// The key appended to.
        key: Key,
        /// The bytes appended.
        value: Value,
    },
    /// Adds to an integer value (INCR, INCRBY, DECR); returns the new value.
    IncrBy {
        /// The key incremented.
        key: Key,
        /// The amount added, negative for DECR.
        delta: i64,
    },
    /// Reads several string values.
    MGet {
        /// The keys read.
        keys: Vec<Key>,
    },
    /// Writes several string values atomically.
    MSet {
        /// The key-value pairs written.
        pairs: Vec<(Key, Value)>,
    },
    /// Sets fields of a hash; returns how many fields were new.
    HSet {
        /// The hash's key.
        key: Key,
        /// The field-value pairs written.
        fields: Vec<(Value, Value)>,
    },
    /// Reads one field of a hash.
    HGet {
        /// The hash's key.
        key: Key,
        /// The field read.
        field: Value,
    },
    /// Reads all fields of a hash, as field, value, field, value...
    HGetAll {
        /// The hash's key.
        key: Key,
    },
    /// Deletes fields of a hash; returns how many existed.
    HDel {
        /// The hash's key.
        key: Key,
        /// The fields deleted.
        fields: Vec<Value>,
    },
    /// GETSET, and SET with its GET option: returns the old string value (Nil when absent;
    /// WRONGTYPE, writing nothing, when the key holds another type) and writes the new one when
    /// `condition` allows, with `expiry` as SET has it.
    GetSet {
        /// The key written.
        key: Key,
        /// The new value.
        value: Value,
        /// SET's NX / XX (GETSET: always).
        #[serde(default)]
        condition: SetCondition,
        /// SET's EX, PX, EXAT, PXAT, KEEPTTL (GETSET: the expiry is cleared).
        #[serde(default)]
        expiry: SetExpiry,
    },
    /// GETDEL: returns a string value and deletes the key.
    GetDel {
        /// The key read and deleted.
        key: Key,
    },
    /// STRLEN: the length of a string value (0 when absent).
    StrLen {
        /// The key read.
        key: Key,
    },
    /// GETRANGE: the bytes of a string value from `start` to `end` inclusive; negative
    /// positions count from the end.
    GetRange {
        /// The key read.
        key: Key,
        /// First position.
        start: i64,
        /// Last position, inclusive.
        end: i64,
    },
    /// SETRANGE: overwrites a string value from `offset`, padding with zero bytes; returns the
    /// new length.
    SetRange {
        /// The key written.
        key: Key,
        /// Where the bytes go.
        offset: u64,
        /// The bytes written.
        value: Value,
    },
    /// MSETNX: writes every pair only if none of the keys exists; returns 1 or 0.
    MSetNx {
        /// The key-value pairs written.
        pairs: Vec<(Key, Value)>,
    },
    /// HINCRBY: adds to an integer field of a hash; returns the new value.
    HIncrBy {
        /// The hash's key.
        key: Key,
        /// The field incremented.
        field: Value,
        /// The amount added.
        delta: i64,
    },
    /// HSETNX: sets a field only if it does not exist; returns 1 or 0.
    HSetNx {
        /// The hash's key.
        key: Key,
        /// The field.
        field: Value,
        /// Its value.
        value: Value,
    },
    /// HMGET: some fields of a hash, in order, each absent or not.
    HMGet {
        /// The hash's key.
        key: Key,
        /// The fields read.
        fields: Vec<Value>,
    },
    /// A hash's fields, values, field count or one field's existence or length (HKEYS, HVALS,
    /// HLEN, HEXISTS, HSTRLEN).
    HRead {
        /// The hash's key.
        key: Key,
        /// What is read.
        read: HashRead,
    },
    /// TYPE: `string`, `hash`, `list`, `set`, `zset` or `none`.
    Type {
        /// The key.
        key: Key,
    },
    /// Redis' MULTI ... EXEC: `commands` run one after the other at one point of the order, and
    /// nothing runs between them; returns [`CommandResult::Results`], one result per command
    /// (an error fails only its own command, as in Redis: there is no rollback). With `watched`
    /// (Redis' WATCH), the commands run only if every watched key is still at the version
    /// the client read ([`Command::Versions`]); otherwise none runs and the result is
    /// [`CommandResult::Nil`]. A transaction never holds a transaction.
    Transaction {
        /// (key, version read by WATCH): the transaction aborts if any moved.
        watched: Vec<(Key, u64)>,
        /// The queued commands, in the order they were queued.
        commands: Vec<Command>,
    },
    /// WATCH's read: each key's version, the number of writes that have changed it, so a later
    /// [`Command::Transaction`] can tell whether anything wrote the key since. Returns
    /// [`CommandResult::Versions`].
    Versions {
        /// The keys watched.
        keys: Vec<Key>,
    },
    /// `command`, stamped with the time it entered the system (the gateway's clock), in Unix
    /// milliseconds: the state machine decides expiry from this stamp alone, so every replica
    /// agrees. A command without a stamp sees no key as expired.
    Timed {
        /// The stamp.
        now_ms: i64,
        /// The command.
        command: Box<Command>,
    },
    /// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: sets a live key's expiry; returns 1, or 0 when the
    /// key is absent or the condition refuses.
    Expire {
        /// The key.
        key: Key,
        /// When it expires.
        time: ExpiryTime,
        /// NX / XX / GT / LT.
        condition: ExpireCondition,
    },
    /// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for an absent key, -1 for one that never expires.
    Ttl {
        /// The key.
        key: Key,
        /// What is read.
        read: TtlRead,
    },
    /// PERSIST: removes a live key's expiry; returns 1 when it had one.
    Persist {
        /// The key.
        key: Key,
    },
    /// The replicated sweep of expired keys (not a Redis command; a gateway sends it for the
    /// keys whose expiry it set): removes each named key that is expired at the command's
    /// stamp, and returns how many it removed. A key since rewritten or persisted is left alone.
    ExpireSweep {
        /// Keys that may have expired.
        keys: Vec<Key>,
    },
    /// A list command (LPUSH, LPOP, LRANGE, ...) on the list at `key`.
    List {
        /// The list's key.
        key: Key,
        /// What is done.
        op: ListOp,
    },
    /// A command on the set at `key` (SADD, SMEMBERS, SPOP, ...).
    Members {
        /// The set's key.
        key: Key,
        /// What is done.
        op: SetOp,
    },
    /// SINTER, SUNION, SDIFF of the sets at `keys`, in that order; with a `destination`
    /// (SINTERSTORE, ...) the result replaces whatever `destination` held and is counted.
    SetAlgebra {
        /// How the sets combine.
        op: Combine,
        /// The sets' keys (at least one).
        keys: Vec<Key>,
        /// Where the STORE forms write.
        destination: Option<Key>,
    },
    /// SMOVE: moves `member` from one set to another; 1 when it was in `source`.
    SetMove {
        /// The set it leaves.
        source: Key,
        /// The set it joins.
        destination: Key,
        /// The member.
        member: Value,
    },
    /// A command on the sorted set at `key` (ZADD, ZRANGE, ...).
    Sorted {
        /// The sorted set's key.
        key: Key,
        /// What is done.
        op: SortedOp,
    },
    /// INCRBYFLOAT: adds to a number stored as text; returns the new text. `delta` is the
    /// client's text, parsed by the store, so that a WRONGTYPE key is reported first, as Redis does.
    IncrByFloat {
        /// The key incremented.
        key: Key,
        /// The amount, as the client wrote it.
        delta: Value,
    },
    /// HINCRBYFLOAT: INCRBYFLOAT on a field of a hash.
    HIncrByFloat {
        /// The hash's key.
        key: Key,
        /// The field incremented.
        field: Value,
        /// The amount, as the client wrote it.
        delta: Value,
    },
    // ---- the whole keyspace, and renames (see `keyspace`) ----
    /// KEYS, SCAN, DBSIZE, FLUSHDB/FLUSHALL, RANDOMKEY: commands that touch every key
    /// ([`Command::touches_every_key`]).
    Keyspace(Keyspace),
    /// RENAME (returns Ok) or, with `only_if_absent`, RENAMENX (returns 1, or 0 when
    /// `destination` exists): moves `source`'s value to `destination`, replacing what was there;
    /// an error when `source` does not exist.
    Rename {
        /// The key moved from.
        source: Key,
        /// The key moved to.
        destination: Key,
        /// RENAMENX: only when `destination` does not exist.
        only_if_absent: bool,
    },
}

/// The result of executing a command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResult {
    /// Done, nothing to return (Redis `+OK`).
    Ok,
    /// No value (Redis nil).
    Nil,
    /// A value.
    Value(Value),
    /// An integer.
    Integer(i64),
    /// Several values, some absent (MGET, HGETALL).
    Values(Vec<Option<Value>>),
    /// The command failed against the current state (e.g. INCR of a non-integer).
    Error(String),
    /// A transaction's results, one per command.
    Results(Vec<CommandResult>),
    /// Keys' versions ([`Command::Versions`]).
    Versions(Vec<u64>),
}

impl Command {
    /// Bytes of the command's encoding (postcard, as on the wire and on disk): what it adds to
    /// a log, a batch or a message that carries it.
    pub fn encoded_len(&self) -> usize {
        postcard::serialize_with_flavor(self, postcard::ser_flavors::Size::default()).expect("commands serialize")
    }

    /// True when the command never changes the state.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Command::Get { .. }
                | Command::Exists { .. }
                | Command::MGet { .. }
                | Command::HGet { .. }
                | Command::HGetAll { .. }
                | Command::Versions { .. }
                | Command::StrLen { .. }
                | Command::GetRange { .. }
                | Command::HMGet { .. }
                | Command::HRead { .. }
                | Command::Type { .. }
                | Command::Ttl { .. }
        ) || matches!(self, Command::Timed { command, .. } if command.is_read_only())
            || matches!(self, Command::Transaction { commands, .. } if commands.iter().all(Command::is_read_only))
            || self.collection_is_read_only()
            || matches!(self, Command::Keyspace(keyspace) if keyspace.is_read_only())
    }

    /// Calls `visit` once for every key the command names, in the command's order (a key named
    /// twice, as in `MSET a 1 a 2` or a transaction, is visited twice). A command that is not
    /// read-only may write every key it touches.
    pub fn for_each_key(&self, mut visit: impl FnMut(&Key)) {
        self.visit_keys(&mut visit);
    }

    // Not generic, so that a transaction's commands recurse into the same function.
    fn visit_keys(&self, visit: &mut dyn FnMut(&Key)) {
        match self {
            Command::Get { key }
            | Command::Set { key, .. }
            | Command::Append { key, .. }
            | Command::IncrBy { key, .. }
            | Command::HSet { key, .. }
            | Command::HGet { key, .. }
            | Command::HGetAll { key }
            | Command::HDel { key, .. }
            | Command::GetSet { key, .. }
            | Command::GetDel { key }
            | Command::StrLen { key }
            | Command::GetRange { key, .. }
            | Command::SetRange { key, .. }
            | Command::HIncrBy { key, .. }
            | Command::HSetNx { key, .. }
            | Command::HMGet { key, .. }
            | Command::HRead { key, .. }
            | Command::Type { key }
            | Command::Expire { key, .. }
            | Command::Ttl { key, .. }
            | Command::Persist { key } => visit(key),
            Command::Del { keys }
            | Command::Exists { keys }
            | Command::MGet { keys }
            | Command::Versions { keys }
            | Command::ExpireSweep { keys } => keys.iter().for_each(&mut *visit),
            Command::MSet { pairs } | Command::MSetNx { pairs } => pairs.iter().for_each(|(key, _)| visit(key)),
            Command::List { key, .. }
            | Command::Members { key, .. }
            | Command::Sorted { key, .. }
            | Command::IncrByFloat { key, .. }
            | Command::HIncrByFloat { key, .. } => visit(key),
            Command::SetAlgebra { keys, destination, .. } => destination.iter().chain(keys).for_each(visit),
            Command::SetMove { source, destination, .. } => [source, destination].into_iter().for_each(visit),
            // The watched keys are read (their versions), so a write to one conflicts.
            Command::Transaction { watched, commands } => {
                watched.iter().for_each(|(key, _)| visit(key));
                commands.iter().for_each(|command| command.visit_keys(visit));
            }
            Command::Timed { command, .. } => command.visit_keys(visit),
            // No list of keys: `touches_every_key` says it touches them all.
            Command::Keyspace(_) => {}
            Command::Rename { source, destination, .. } => {
                visit(source);
                visit(destination);
            }
        }
    }

    /// The keys the command touches (allocates; for tests and slow paths).
    pub fn keys(&self) -> Vec<Key> {
        let mut keys = Vec::new();
        self.for_each_key(|key| keys.push(key.clone()));
        keys
    }

    /// True when executing the two commands in either order gives the same results and state:
    /// they share no key, or both only read. A command that touches every key shares a key
    /// with every command.
    pub fn commutes_with(&self, other: &Command) -> bool {
        if self.is_read_only() && other.is_read_only() {
            return true;
        }
        if self.touches_every_key() || other.touches_every_key() {
            return false;
        }
        let mut shared = false;
        self.for_each_key(|mine| other.for_each_key(|theirs| shared |= mine == theirs));
        !shared
    }

    /// A short lowercase name for logs and histories.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Get { .. } => "get",
            Command::Set { .. } => "set",
            Command::Del { .. } => "del",
            Command::Exists { .. } => "exists",
            Command::Append { .. } => "append",
            Command::IncrBy { .. } => "incrby",
            Command::MGet { .. } => "mget",
            Command::MSet { .. } => "mset",
            Command::HSet { .. } => "hset",
            Command::HGet { .. } => "hget",
            Command::HGetAll { .. } => "hgetall",
            Command::HDel { .. } => "hdel",
            Command::GetSet { .. } => "getset",
            Command::GetDel { .. } => "getdel",
            Command::StrLen { .. } => "strlen",
            Command::GetRange { .. } => "getrange",
            Command::SetRange { .. } => "setrange",
            Command::MSetNx { .. } => "msetnx",
            Command::HIncrBy { .. } => "hincrby",
            Command::HSetNx { .. } => "hsetnx",
            Command::HMGet { .. } => "hmget",
            Command::HRead { .. } => "hread",
            Command::Type { .. } => "type",
            Command::Transaction { .. } => "transaction",
            Command::Versions { .. } => "versions",
            Command::Timed { command, .. } => command.name(),
            Command::Expire { .. } => "expire",
            Command::Ttl { .. } => "ttl",
            Command::Persist { .. } => "persist",
            Command::ExpireSweep { .. } => "expiresweep",
            Command::List { op, .. } => op.name(),
            Command::Members { op, .. } => op.name(),
            Command::SetAlgebra { op, destination, .. } => op.name(destination.is_some()),
            Command::SetMove { .. } => "smove",
            Command::Sorted { op, .. } => op.name(),
            Command::IncrByFloat { .. } => "incrbyfloat",
            Command::HIncrByFloat { .. } => "hincrbyfloat",
            Command::Keyspace(keyspace) => keyspace.name(),
            Command::Rename { only_if_absent: false, .. } => "rename",
            Command::Rename { only_if_absent: true, .. } => "renamenx",
        }
    }

    /// The list, set and sorted-set commands that only read.
    fn collection_is_read_only(&self) -> bool {
        match self {
            Command::List { op, .. } => op.is_read_only(),
            Command::Members { op, .. } => op.is_read_only(),
            Command::SetAlgebra { destination, .. } => destination.is_none(),
            Command::Sorted { op, .. } => op.is_read_only(),
            _ => false,
        }
    }

    /// A plain SET (no condition), the common case.
    pub fn set(key: impl Into<Key>, value: impl Into<Value>) -> Command {
        Command::Set { key: key.into(), value: value.into(), condition: SetCondition::Always, expiry: SetExpiry::Clear }
    }

    /// GETSET: set, clearing any expiry, and return the old value.
    pub fn getset(key: impl Into<Key>, value: impl Into<Value>) -> Command {
        let (key, value) = (key.into(), value.into());
        Command::GetSet { key, value, condition: SetCondition::Always, expiry: SetExpiry::Clear }
    }

    /// `self` stamped with `now_ms` ([`Command::Timed`]).
    pub fn timed(self, now_ms: i64) -> Command {
        Command::Timed { now_ms, command: Box::new(self) }
    }

    /// The command inside any [`Command::Timed`] stamp.
    pub fn untimed(&self) -> &Command {
        match self {
            Command::Timed { command, .. } => command.untimed(),
            other => other,
        }
    }

    /// A GET.
    pub fn get(key: impl Into<Key>) -> Command {
        Command::Get { key: key.into() }
    }

    /// An APPEND.
    pub fn append(key: impl Into<Key>, value: impl Into<Value>) -> Command {
        Command::Append { key: key.into(), value: value.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_sets_drive_commutativity() {
        // Goal: conflicts come from key sets. Two writes on different keys commute, a read and
        // a write on one key do not, two reads always do.
        let a = Command::set("a", "1");
        let b = Command::set("b", "1");
        let read_a = Command::get("a");
        assert!(a.commutes_with(&b));
        assert!(!a.commutes_with(&read_a));
        assert!(read_a.commutes_with(&Command::get("a")));
        let mset = Command::MSet { pairs: vec![("x".into(), "1".into()), ("b".into(), "2".into())] };
        assert!(!mset.commutes_with(&b));
        assert_eq!(mset.keys(), vec![Key::from("x"), Key::from("b")]);
    }
}
