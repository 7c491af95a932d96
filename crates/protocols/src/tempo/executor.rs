//! The timestamp-stability executor (Algorithm 2, lines 49–53, per key): committed commands wait
//! in one queue per key, ordered by ⟨ts, id⟩; a command runs once it heads the queue of every key
//! it touches and its timestamp is stable on each of them. Sans-IO and pure: the replica says
//! which timestamps are stable and whether a command may run (multi-shard commands also wait
//! for `MStable`), the executor says what runs next. Tested against a naive oracle in
//! `tests_executor.rs`.
//!
//! Why per-key queues suffice: two commands that share a key run in ⟨ts, id⟩ order on it, and a
//! command heading all its queues cannot be blocked by a cycle, because ⟨ts, id⟩ is a total order.

use super::messages::Dot;
use ordo_core::{ClientId, CommandResult, Key, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// A committed command waiting to run.
#[derive(Debug)]
struct Waiting {
    ts: u64,
    keys: Vec<Key>,
}

/// Committed commands not yet executed, in per-key ⟨ts, id⟩ queues.
#[derive(Debug, Default)]
pub struct Executor {
    queues: BTreeMap<Key, BTreeSet<(u64, Dot)>>,
    commands: BTreeMap<Dot, Waiting>,
    /// Keys whose queue head may have become runnable.
    dirty: BTreeSet<Key>,
}

impl Executor {
    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The timestamp of a waiting command.
    pub fn ts(&self, dot: Dot) -> Option<u64> {
        self.commands.get(&dot).map(|waiting| waiting.ts)
    }

    /// Adds a committed command with its final timestamp and keys (duplicates removed).
    pub fn add(&mut self, dot: Dot, ts: u64, keys: &[Key]) {
        assert!(!self.commands.contains_key(&dot), "a command is committed once");
        assert!(!keys.is_empty(), "a command touches a key");
        let mut unique: Vec<Key> = keys.to_vec();
        unique.sort();
        unique.dedup();
        for key in &unique {
            let inserted = self.queues.entry(key.clone()).or_default().insert((ts, dot));
            assert!(inserted, "a command is queued once per key");
            self.dirty.insert(key.clone());
        }
        self.commands.insert(dot, Waiting { ts, keys: unique });
    }

    /// Marks `key` as worth another look (its stable timestamp moved).
    pub fn touch_key(&mut self, key: &Key) {
        if self.queues.contains_key(key) {
            self.dirty.insert(key.clone());
        }
    }

    /// Marks the keys of a waiting command as worth another look (its gate opened).
    pub fn touch(&mut self, dot: Dot) {
        if let Some(waiting) = self.commands.get(&dot) {
            self.dirty.extend(waiting.keys.iter().cloned());
        }
    }

    /// The next command that may run: it heads the queue of each of its keys, each key's stable
    /// timestamp (`stable`) has reached its timestamp, and `gate` lets it through. A command
    /// that is ready but stopped by the gate is offered to `gate` again only after `touch`.
    /// The command returned is removed from the queues.
    pub fn next(&mut self, stable: &dyn Fn(&Key) -> u64, gate: &mut dyn FnMut(Dot) -> bool) -> Option<(Dot, u64)> {
        while let Some(key) = self.dirty.pop_first() {
            let Some(&(ts, dot)) = self.queues.get(&key).and_then(|queue| queue.first()) else { continue };
            let waiting = self.commands.get(&dot).expect("queued commands are known");
            let heads_all = waiting.keys.iter().all(|k| self.queues.get(k).and_then(|q| q.first()) == Some(&(ts, dot)));
            let stable_all = waiting.keys.iter().all(|k| stable(k) >= ts);
            if !heads_all || !stable_all || !gate(dot) {
                continue;
            }
            let waiting = self.commands.remove(&dot).expect("present");
            for k in &waiting.keys {
                let queue = self.queues.get_mut(k).expect("queued");
                assert!(queue.pop_first() == Some((ts, dot)), "the command headed the queue");
                if queue.is_empty() {
                    self.queues.remove(k);
                } else {
                    self.dirty.insert(k.clone());
                }
            }
            return Some((dot, ts));
        }
        None
    }

    /// The head of the first non-empty queue (diagnostics).
    pub fn first_head(&self) -> Option<(Key, u64, Dot)> {
        self.queues.iter().next().and_then(|(k, q)| q.first().map(|(ts, dot)| (k.clone(), *ts, *dot)))
    }

    /// Checks the queues and the command index agree.
    pub fn check_invariants(&self) {
        let queued: usize = self.queues.values().map(BTreeSet::len).sum();
        let expected: usize = self.commands.values().map(|w| w.keys.len()).sum();
        assert_eq!(queued, expected, "every waiting command sits in the queue of each of its keys");
    }
}

/// What the client table says about a request about to execute.
#[derive(Debug, PartialEq, Eq)]
pub enum Dedup {
    /// First time: execute it.
    Execute,
    /// Another attempt of the request already ran here; this is its result if still known.
    Duplicate(Option<CommandResult>),
}

/// Requests executed per client, so that a request submitted under several attempts runs once.
/// Attempts of one request touch the same keys, so they run in the same relative order at every
/// replica: whether an attempt is a duplicate is the same everywhere.
#[derive(Debug, Default)]
pub struct ClientTable {
    clients: BTreeMap<ClientId, ClientRecord>,
}

#[derive(Debug, Default)]
struct ClientRecord {
    executed: BTreeSet<u64>,
    last: Option<(u64, CommandResult)>,
}

impl ClientTable {
    /// Clients known.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// True when no client is known.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Is the request new? Does not record it.
    pub fn check(&self, request: RequestId) -> Dedup {
        let Some(record) = self.clients.get(&request.client) else { return Dedup::Execute };
        if !record.executed.contains(&request.number) {
            return Dedup::Execute;
        }
        let result = record.last.as_ref().filter(|(number, _)| *number == request.number).map(|(_, r)| r.clone());
        Dedup::Duplicate(result)
    }

    /// Records an executed request, remembering at most `window` numbers per client.
    pub fn record(&mut self, request: RequestId, result: CommandResult, window: usize) {
        let record = self.clients.entry(request.client).or_default();
        let inserted = record.executed.insert(request.number);
        assert!(inserted, "a request executes once");
        if record.last.as_ref().is_none_or(|(number, _)| *number < request.number) {
            record.last = Some((request.number, result));
        }
        while record.executed.len() > window {
            record.executed.pop_first();
        }
    }
}
