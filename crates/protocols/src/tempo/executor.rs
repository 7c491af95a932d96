//! Tempo's executor: the shared timestamp-stability executor (`crate::executor::stability`,
//! Algorithm 2, lines 49–53, per key) over dots, and the client table that runs each request
//! once. Committed commands wait in per-key ⟨ts, dot⟩ queues and run once they head every queue
//! they are in and are stable on each key; the replica says which timestamps are stable and
//! whether a command may run (multi-shard commands also wait for `MStable`). The ordering is
//! tested against a naive oracle in `executor/tests_stability.rs`, and as Tempo uses it (with
//! Theorem 1's constraint on timestamps) in `tests_executor.rs`.

use super::messages::Dot;
use crate::executor::stability::StabilityExecutor;
use ordo_core::{ClientId, CommandResult, Key, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// Committed commands not yet executed, in per-key ⟨ts, dot⟩ queues.
///
/// Its bound is the replica's: only committed instances are added, and the replica holds at
/// most `Config::instances_max` of them (asserted in its `check_invariants`), so the shared
/// executor's own bound is left open here rather than asserted twice.
#[derive(Debug)]
pub struct Executor {
    stability: StabilityExecutor<Dot>,
}

impl Default for Executor {
    fn default() -> Self {
        Executor { stability: StabilityExecutor::new(usize::MAX) }
    }
}

impl Executor {
    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.stability.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.stability.is_empty()
    }

    /// The timestamp of a waiting command.
    pub fn ts(&self, dot: Dot) -> Option<u64> {
        self.stability.timestamp(dot)
    }

    /// Adds a committed command with its final timestamp and keys (duplicates removed).
    pub fn add(&mut self, dot: Dot, ts: u64, keys: &[Key]) {
        let added = self.stability.add(dot, ts, keys);
        assert!(added.is_ok(), "the replica's instances_max bounds committed commands");
    }

    /// Marks `key` as worth another look (its stable timestamp moved).
    pub fn touch_key(&mut self, key: &Key) {
        self.stability.touch_key(key);
    }

    /// Marks the keys of a waiting command as worth another look (its gate opened).
    pub fn touch(&mut self, dot: Dot) {
        self.stability.touch(dot);
    }

    /// The next command that may run: it heads the queue of each of its keys, each key's stable
    /// timestamp (`stable`) has reached its timestamp, and `gate` lets it through. A command
    /// that is ready but stopped by the gate is offered to `gate` again only after `touch`.
    /// The command returned is removed from the queues.
    pub fn next(&mut self, stable: &dyn Fn(&Key) -> u64, gate: &mut dyn FnMut(Dot) -> bool) -> Option<(Dot, u64)> {
        self.stability.next(stable, gate)
    }

    /// The head of the first non-empty queue (diagnostics).
    pub fn first_head(&self) -> Option<(Key, u64, Dot)> {
        self.stability.first_head()
    }

    /// Checks the queues and the command index agree.
    pub fn check_invariants(&self) {
        self.stability.check_invariants();
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
