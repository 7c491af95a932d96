//! The conflict index: per key, the commands a new command must follow (L11), reduced
//! transitively as the reference implementation does (spec §5.4 [REPO]).
//!
//! Two commands conflict when they share a key and one of them writes (§5). The paper's `D`
//! holds *every* earlier conflicting command, which makes dependency sets, messages and the
//! graph grow with the history of a hot key. Here a write depends on the key's last write and
//! the reads since it, and a read on the key's last write: every earlier conflicting command is
//! still reached transitively, which is all execution order needs, and every replica reduces
//! the same way, so equal arrival orders still give equal proposals (the fast path). Where the
//! proofs use direct edges (the extra term of L61) recovery checks transitive order instead
//! (`recovery.rs`); `docs/protocols/swiftpaxos.md` explains the choice.

use ordo_core::{Command, Key, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// Reads remembered per key before the next read depends on them all (and replaces them):
/// bounds the state of a read-mostly key and the dependency set of its next write.
pub const READS_MAX: usize = 32;

#[derive(Clone, Debug, Default)]
struct KeyState {
    last_write: Option<RequestId>,
    reads: Vec<RequestId>,
    /// Earlier commands the last write no longer stands for (`reinstate`): followed directly.
    writes: Vec<RequestId>,
}

/// Per key, the last write and the reads since.
#[derive(Clone, Debug, Default)]
pub struct KeyIndex {
    keys: BTreeMap<Key, KeyState>,
}

impl KeyIndex {
    /// Forgets everything (before a rebuild).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Keys tracked.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The dependencies of `command` (id `id`) received now, and records it as the newest
    /// command on its keys.
    pub fn record(&mut self, id: RequestId, command: &Command) -> BTreeSet<RequestId> {
        let read_only = command.is_read_only();
        let mut deps = BTreeSet::new();
        let mut keys = command.keys();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let state = self.keys.entry(key).or_default();
            deps.extend(state.last_write);
            deps.extend(state.writes.iter().copied());
            if read_only {
                if state.reads.len() >= READS_MAX {
                    // A read barrier: this read follows the remembered ones, and stands for them.
                    deps.extend(state.reads.drain(..));
                }
                state.reads.push(id);
            } else {
                deps.extend(state.reads.drain(..));
                state.writes.clear();
                state.last_write = Some(id);
            }
            assert!(state.reads.len() <= READS_MAX, "reads per key bounded");
        }
        deps.remove(&id);
        deps
    }

    /// The index reduces a proposal to the key's last write and the reads since, relying on them
    /// to reach every earlier conflicting command through our own proposals. When the leader
    /// sets one of those commands' dependencies without some command `id` our proposal put
    /// below it, that path is gone (a later fast path could agree on equal reduced sets that
    /// stand for different orders, and recovery could then not order a committed command, the
    /// Inv 1 violations of seeds 44 and 301 at 3 replicas): `id` is followed directly again by
    /// the key's next proposals, until a write stands for it.
    /// A reinstated read joins `writes` too: later reads then follow it as well, an edge they do
    /// not need, but `writes` empties at the key's next write whatever its size.
    pub fn reinstate(&mut self, id: RequestId, command: &Command) {
        command.for_each_key(|key| {
            let state = self.keys.entry(key.clone()).or_default();
            if state.last_write != Some(id) && !state.reads.contains(&id) && !state.writes.contains(&id) {
                state.writes.push(id);
            }
        });
    }
}
