//! Commands over the whole keyspace (KEYS, SCAN, DBSIZE, FLUSHDB/FLUSHALL, RANDOMKEY) and the
//! marker protocols order them by: [`Command::touches_every_key`].
//!
//! Such a command names no key, yet its result or its effect depends on every key: KEYS must
//! see every write ordered before it and none after, and FLUSHALL must not land between two
//! writes that a replica applied in another order. So it conflicts with every command that
//! writes, and a FLUSH with every command at all; only two read-only commands commute.
//! [`Command::for_each_key`] visits none of its keys (there is no list of them), so code that
//! derives conflicts from key sets must ask [`Command::touches_every_key`] first.

use super::{Command, Value};
use serde::{Deserialize, Serialize};

/// A command that reads or writes every key ([`Command::Keyspace`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Keyspace {
    /// KEYS: every key matching the glob `pattern` ([`crate::glob`]), in key order; returns
    /// [`super::CommandResult::Values`].
    Keys {
        /// The glob pattern.
        pattern: Value,
    },
    /// SCAN: the keys from `cursor` on, about `count` of them, in the order of a fixed hash of
    /// the key; the cursor is the hash of the next key (0: start, and, returned, the end).
    /// Returns [`super::CommandResult::Values`]: the next cursor in decimal, then the keys.
    Scan {
        /// Where to go on from (0 to start).
        cursor: u64,
        /// MATCH: only keys matching this glob pattern.
        pattern: Option<Value>,
        /// COUNT: how many keys to look at (not how many to return), at least 1.
        count: u64,
        /// TYPE: only keys holding this type (`string`, `hash`, ...), as TYPE names it.
        kind: Option<Value>,
    },
    /// DBSIZE: how many keys exist; returns [`super::CommandResult::Integer`].
    Size,
    /// FLUSHDB / FLUSHALL (there is one database): deletes every key; returns
    /// [`super::CommandResult::Ok`].
    Flush,
    /// RANDOMKEY: a key picked by `seed` (or Nil when there is none). The gateway draws the seed
    /// into the command, so that every replica picks the same key.
    RandomKey {
        /// The replicated randomness.
        seed: u64,
    },
}

impl Keyspace {
    /// True unless the command writes (FLUSH).
    pub fn is_read_only(&self) -> bool {
        !matches!(self, Keyspace::Flush)
    }

    /// A short lowercase name for logs and histories.
    pub fn name(&self) -> &'static str {
        match self {
            Keyspace::Keys { .. } => "keys",
            Keyspace::Scan { .. } => "scan",
            Keyspace::Size => "dbsize",
            Keyspace::Flush => "flush",
            Keyspace::RandomKey { .. } => "randomkey",
        }
    }
}

impl Command {
    /// True when the command reads or writes every key, whatever keys it names: a keyspace
    /// command, or a transaction holding one. Protocols order such a command against every
    /// command it does not commute with ([`Command::commutes_with`]), not just those sharing a
    /// key with it.
    pub fn touches_every_key(&self) -> bool {
        match self {
            Command::Keyspace(_) => true,
            Command::Transaction { commands, .. } => commands.iter().any(Command::touches_every_key),
            Command::Timed { command, .. } => command.touches_every_key(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush() -> Command {
        Command::Keyspace(Keyspace::Flush)
    }

    fn keys() -> Command {
        Command::Keyspace(Keyspace::Keys { pattern: "*".into() })
    }

    #[test]
    fn keyspace_commands_conflict_with_every_write() {
        // Goal: a command touching every key commutes with nothing that writes, whatever its
        // keys, and a FLUSH with nothing at all; two reads still commute. Method: pair KEYS,
        // DBSIZE and FLUSH, bare and inside transactions, with reads and writes on unrelated keys.
        let write = Command::set("a", "1");
        let read = Command::get("a");
        let size = Command::Keyspace(Keyspace::Size);
        let in_transaction = |command: Command| Command::Transaction { watched: Vec::new(), commands: vec![command] };
        for reader in [keys(), size.clone(), in_transaction(keys())] {
            assert!(reader.touches_every_key() && reader.is_read_only());
            assert!(!reader.commutes_with(&write) && !write.commutes_with(&reader));
            assert!(reader.commutes_with(&read) && read.commutes_with(&reader));
            assert!(reader.commutes_with(&size));
            assert!(!reader.commutes_with(&flush()) && !flush().commutes_with(&reader));
        }
        for writer in [flush(), in_transaction(flush())] {
            assert!(writer.touches_every_key() && !writer.is_read_only());
            assert!(!writer.commutes_with(&read) && !read.commutes_with(&writer));
            assert!(!writer.commutes_with(&write));
            assert!(!writer.commutes_with(&flush()));
        }
        assert!(keys().keys().is_empty(), "a keyspace command names no key");
        assert!(!write.touches_every_key() && !in_transaction(write).touches_every_key());
    }

    #[test]
    fn rename_touches_both_keys() {
        // Goal: RENAME's key set is its two keys, so it conflicts with a command on either, and
        // with nothing else.
        let rename = Command::Rename { source: "a".into(), destination: "b".into(), only_if_absent: false };
        assert_eq!(rename.keys(), vec![super::super::Key::from("a"), "b".into()]);
        assert!(!rename.is_read_only() && !rename.touches_every_key());
        assert!(!rename.commutes_with(&Command::get("b")));
        assert!(rename.commutes_with(&Command::get("c")));
        assert_eq!(rename.name(), "rename");
    }
}
