//! Timestamp-stability order (Tempo, Algorithm 2, lines 49–53, per key): committed commands wait
//! in one queue per key, ordered by ⟨timestamp, id⟩; a command runs once it heads the queue of
//! every key it touches and its timestamp is stable on each of them. The caller says which
//! timestamps are stable (a function of the key) and may hold a command back with a gate (a
//! multi-shard command also waits for the other shards' stability, say); the executor says what
//! runs next. Sans-IO and pure.
//!
//! Why per-key queues suffice: two commands that share a key run in ⟨timestamp, id⟩ order on
//! it, and a command heading all its queues cannot be blocked by a cycle, because
//! ⟨timestamp, id⟩ is a total order.
//!
//! Only keys whose queue head may have become runnable are examined (`dirty`): a key is marked
//! when a command joins or leaves its queue, and by the caller when its stable timestamp moves
//! ([`StabilityExecutor::touch_key`]) or a gate opens ([`StabilityExecutor::touch`]).
//!
//! Generic over the id (Tempo's `Dot`) because the id is the tie-break and is all the executor
//! hands back; the payload stays with the caller. Checked against a naive oracle in
//! `tests_stability.rs`.

use ordo_core::Key;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// [`StabilityExecutor::add`] refused a command: `commands_max` commands wait already. Nothing
/// changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// A committed command waiting to run.
#[derive(Clone, Debug)]
struct Waiting {
    timestamp: u64,
    /// Sorted, without duplicates, never empty.
    keys: Vec<Key>,
}

/// Committed commands not yet run, in per-key ⟨timestamp, id⟩ queues.
#[derive(Clone, Debug)]
pub struct StabilityExecutor<Id: Copy + Ord + Debug> {
    commands_max: usize,
    queues: BTreeMap<Key, BTreeSet<(u64, Id)>>,
    commands: BTreeMap<Id, Waiting>,
    /// Keys whose queue head may have become runnable.
    dirty: BTreeSet<Key>,
}

impl<Id: Copy + Ord + Debug> StabilityExecutor<Id> {
    /// An empty executor holding at most `commands_max` waiting commands.
    pub fn new(commands_max: usize) -> Self {
        assert!(commands_max >= 1, "room for one command");
        StabilityExecutor { commands_max, queues: BTreeMap::new(), commands: BTreeMap::new(), dirty: BTreeSet::new() }
    }

    /// The bound on waiting commands.
    pub fn commands_max(&self) -> usize {
        self.commands_max
    }

    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The timestamp of a waiting command.
    pub fn timestamp(&self, id: Id) -> Option<u64> {
        self.commands.get(&id).map(|waiting| waiting.timestamp)
    }

    /// Adds a committed command with its final timestamp and the keys it touches (duplicates
    /// are ignored). A command is added once and touches at least one key: the caller
    /// guarantees both. On error nothing changes.
    pub fn add(&mut self, id: Id, timestamp: u64, keys: &[Key]) -> Result<(), Full> {
        assert!(!self.commands.contains_key(&id), "a command is committed once");
        assert!(!keys.is_empty(), "a command touches a key");
        if self.commands.len() >= self.commands_max {
            return Err(Full);
        }
        let mut unique: Vec<Key> = keys.to_vec();
        unique.sort();
        unique.dedup();
        for key in &unique {
            let inserted = self.queues.entry(key.clone()).or_default().insert((timestamp, id));
            assert!(inserted, "a command is queued once per key");
            self.dirty.insert(key.clone());
        }
        self.commands.insert(id, Waiting { timestamp, keys: unique });
        assert!(self.commands.len() <= self.commands_max, "the bound holds");
        Ok(())
    }

    /// Marks `key` as worth another look (its stable timestamp moved).
    pub fn touch_key(&mut self, key: &Key) {
        if self.queues.contains_key(key) {
            self.dirty.insert(key.clone());
        }
    }

    /// Marks the keys of a waiting command as worth another look (its gate opened).
    pub fn touch(&mut self, id: Id) {
        if let Some(waiting) = self.commands.get(&id) {
            self.dirty.extend(waiting.keys.iter().cloned());
        }
    }

    /// The next command that may run, removed from the queues, with its timestamp: it heads
    /// the queue of each of its keys, each key's stable timestamp (`stable`) has reached its
    /// timestamp, and `gate` lets it through. A command that is ready but stopped by the gate
    /// is offered to `gate` again only after [`StabilityExecutor::touch`] (or a touch of one
    /// of its keys).
    pub fn next(&mut self, stable: &dyn Fn(&Key) -> u64, gate: &mut dyn FnMut(Id) -> bool) -> Option<(Id, u64)> {
        while let Some(key) = self.dirty.pop_first() {
            let Some(&(timestamp, id)) = self.queues.get(&key).and_then(BTreeSet::first) else { continue };
            let waiting = self.commands.get(&id).expect("queued commands are known");
            let head = Some(&(timestamp, id));
            let heads_all = waiting.keys.iter().all(|k| self.queues.get(k).and_then(BTreeSet::first) == head);
            let stable_all = waiting.keys.iter().all(|k| stable(k) >= timestamp);
            if !heads_all || !stable_all || !gate(id) {
                continue;
            }
            let waiting = self.commands.remove(&id).expect("present");
            for k in &waiting.keys {
                let queue = self.queues.get_mut(k).expect("queued");
                assert!(queue.pop_first() == Some((timestamp, id)), "the command headed the queue");
                if queue.is_empty() {
                    self.queues.remove(k);
                } else {
                    // A new head: it may be runnable now.
                    self.dirty.insert(k.clone());
                }
            }
            assert!(!self.commands.contains_key(&id), "a command runs once");
            return Some((id, timestamp));
        }
        None
    }

    /// The head of the first non-empty queue (diagnostics).
    pub fn first_head(&self) -> Option<(Key, u64, Id)> {
        self.queues.iter().next().and_then(|(k, q)| q.first().map(|&(timestamp, id)| (k.clone(), timestamp, id)))
    }

    /// Checks the bound and that the queues and the command index agree.
    pub fn check_invariants(&self) {
        assert!(self.commands.len() <= self.commands_max, "the bound holds");
        let queued: usize = self.queues.values().map(BTreeSet::len).sum();
        let expected: usize = self.commands.values().map(|w| w.keys.len()).sum();
        assert_eq!(queued, expected, "every waiting command sits in the queue of each of its keys");
        assert!(self.queues.values().all(|queue| !queue.is_empty()), "empty queues are removed");
    }

    /// [`StabilityExecutor::check_invariants`], plus that each waiting command sits in the queue
    /// of each of its keys under its own timestamp: a lookup per command and key, too slow for
    /// every event of a long run (Tempo's replicas call the cheap check), so tests call this one.
    pub fn check_invariants_deeply(&self) {
        self.check_invariants();
        for (id, waiting) in &self.commands {
            assert!(!waiting.keys.is_empty(), "a command touches a key");
            for key in &waiting.keys {
                let queued = self.queues.get(key).is_some_and(|queue| queue.contains(&(waiting.timestamp, *id)));
                assert!(queued, "a waiting command is queued on each of its keys");
            }
        }
    }
}
