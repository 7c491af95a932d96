//! The replicas' order of each key's updates (writes, appends, sweeps, deletes), recorded as they apply them, for the
//! linearizability check's witness (`ordo_check::Witness`): with it, the check of a long run
//! verifies each key in linear time instead of searching.
//!
//! Every state machine a run builds is a [`RecordingKv`] registered on the run's thread (a run
//! is single-threaded; a seed search runs one run per thread). Speculative forks are plain
//! stores and record nothing. Per key the witness takes the longest sequence any machine
//! recorded: the machine of a replica that never lost its state holds the whole order, a
//! restored one only a suffix. The checker verifies what it is given, so a wrong sequence (a
//! speculation undone, a machine rebuilt from a snapshot) costs only a search, never a verdict.

use bytes::Bytes;
use ordo_check::{Applied, Witness};
use ordo_core::command::{SetCondition, SetExpiry};
use ordo_core::{Command, CommandResult, Key, KeyDigest, KvStore, RequestId, StateMachine};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What one machine applied, per key, in order; `None` once a command the history cannot
/// express (a conditional set, KEEPTTL, a counter) touched the key.
type Log = Arc<Mutex<HashMap<Key, Option<Vec<Applied>>>>>;

thread_local! {
    /// The logs of the machines built by the run on this thread.
    static LOGS: RefCell<Vec<Log>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the machines of an earlier run on this thread.
pub fn reset() {
    LOGS.with(|logs| logs.borrow_mut().clear());
}

/// A key-value store that records its writes and appends per key.
pub struct RecordingKv {
    store: KvStore,
    log: Log,
}

impl RecordingKv {
    /// A new, empty machine, registered for this thread's witness.
    pub fn boxed() -> Box<dyn StateMachine> {
        let log = Log::default();
        LOGS.with(|logs| logs.borrow_mut().push(log.clone()));
        Box::new(RecordingKv { store: KvStore::new(), log })
    }

    /// Records what `command`, stamped `at_ms` (from an enclosing [`Command::Timed`]), does to
    /// each key it touches.
    fn record(&self, command: &Command, at_ms: Option<i64>) {
        match command {
            Command::Timed { now_ms, command } => return self.record(command, Some(*now_ms)),
            // Without WATCH a transaction always runs its commands, in order, at its stamp.
            Command::Transaction { watched, commands } if watched.is_empty() => {
                return commands.iter().for_each(|command| self.record(command, at_ms));
            }
            _ => {}
        }
        let mut log = self.log.lock().expect("one thread");
        let mut push = |key: &Key, effect: Option<Applied>| {
            let entry = log.entry(key.clone()).or_insert_with(|| Some(Vec::new()));
            match (entry.as_mut(), effect) {
                (Some(sequence), Some(effect)) => sequence.push(effect),
                _ => *entry = None,
            }
        };
        let text = |bytes: &Bytes| String::from_utf8_lossy(bytes).into_owned();
        match command {
            // The expiry comes from the history's write; the order needs only the value.
            Command::Set {
                key,
                value,
                condition: SetCondition::Always,
                expiry: SetExpiry::Clear | SetExpiry::Set(_),
            } => push(key, Some(Applied::Write(text(value)))),
            Command::MSet { pairs } => {
                pairs.iter().for_each(|(key, value)| push(key, Some(Applied::Write(text(value)))))
            }
            Command::Append { key, value } => push(key, Some(Applied::Append(text(value)))),
            // A sweep is recorded whether or not it removed the key, with its stamp (in the
            // history's milliseconds; simulated clocks never read below zero).
            Command::ExpireSweep { keys } => {
                let stamp = at_ms.map(|at_ms| u64::try_from(at_ms).expect("simulated stamps are not negative"));
                keys.iter().for_each(|key| push(key, Some(Applied::Expire(stamp))))
            }
            Command::Del { keys } => keys.iter().for_each(|key| push(key, Some(Applied::Delete))),
            command if command.is_read_only() => {}
            command => command.for_each_key(|key| push(key, None)),
        }
    }
}

impl StateMachine for RecordingKv {
    fn apply(&mut self, request: RequestId, command: &Command) -> CommandResult {
        self.record(command, None);
        self.store.apply(request, command)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), ordo_core::kv::SnapshotError> {
        // The log no longer describes this machine's state: it starts again from the snapshot.
        self.log.lock().expect("one thread").clear();
        self.store.restore(snapshot)
    }

    fn key_digests(&self) -> Vec<KeyDigest> {
        self.store.key_digests()
    }

    fn fork_keys(&self, keys: &[Key]) -> Option<Box<dyn StateMachine>> {
        self.store.fork_keys(keys)
    }
}

/// The witness of this thread's run: per key, the longest sequence a machine recorded.
pub fn collect() -> Witness {
    let mut witness = Witness::default();
    let mut longest: HashMap<Key, usize> = HashMap::new();
    LOGS.with(|logs| {
        for log in logs.borrow().iter() {
            for (key, sequence) in log.lock().expect("one thread").iter() {
                let text = String::from_utf8_lossy(key).into_owned();
                let Some(sequence) = sequence else {
                    witness.unknown.insert(text);
                    continue;
                };
                if longest.get(key).is_some_and(|&length| length >= sequence.len()) {
                    continue;
                }
                longest.insert(key.clone(), sequence.len());
                witness.effects.insert(text, sequence.clone());
            }
        }
    });
    witness
}
