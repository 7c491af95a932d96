//! A replica's log with a checkpoint in front: bounded memory (issue 17; the paper's §5.2.4
//! says synchronisation lets logs be truncated, without the details).
//!
//! Slots `1 ..= base` are represented by a [`Checkpoint`]: the state machine and client table
//! after executing them. Every truncated slot lies at or under the sync-point, so it is
//! committed and the same at every replica (SyncSafety); nothing later can change it, and a
//! replica that needs it takes the checkpoint instead. Slots `base + 1 ..= len` are held.
//!
//! Every replica truncates on its own (`Replica::maybe_truncate`): once its sync-point is two
//! intervals past the base, it moves the base to one interval below the sync-point. The
//! interval is `checkpoint_interval`, or more for a big state (its size over
//! `checkpoint_bytes_per_op`, up to `checkpoint_interval_max`), since each move decodes and
//! serializes the whole state. The checkpoint is rebuilt from the previous one and the entries between,
//! in a scratch state machine, because a leader's own state runs ahead of its sync-point
//! (speculative) and a checkpoint must hold committed slots only. The slots kept under the
//! sync-point serve slow followers' lookups; a follower behind the leader's base gets the
//! leader's whole log instead (a state transfer, `gap_agreement.rs`). So a replica holds at
//! most two of the longest intervals' entries plus those past its sync-point.
//!
//! View changes, state transfers and recovery carry a `Log`: the checkpoint and the suffix.

use super::messages::Entry;
use crate::client_table::ClientRecord;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The state after every slot up to `slot`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last slot it covers (0: the initial state).
    pub slot: u64,
    /// `StateMachine::snapshot` after `slot`; empty for the initial state.
    pub state: Vec<u8>,
    /// The client table after `slot`.
    pub clients: Vec<ClientRecord>,
}

/// A checkpoint and the entries after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log {
    /// Slots up to `checkpoint.slot`.
    pub checkpoint: Arc<Checkpoint>,
    /// Slot `base + i` at index `i - 1`.
    pub entries: Vec<Entry>,
}

impl Log {
    /// A log holding `entries` from slot 1.
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        Log { checkpoint: Arc::new(Checkpoint::default()), entries }
    }

    /// The last slot the checkpoint covers.
    pub fn base(&self) -> u64 {
        self.checkpoint.slot
    }

    /// The log's length in slots (truncated ones included).
    pub fn len(&self) -> u64 {
        self.base() + self.entries.len() as u64
    }

    /// True when the log has no slot at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries held in memory.
    pub fn held(&self) -> usize {
        self.entries.len()
    }

    /// The entry at `slot`, if held (`None` when truncated or beyond the end).
    pub fn get(&self, slot: u64) -> Option<&Entry> {
        if slot <= self.base() {
            return None;
        }
        self.entries.get((slot - self.base() - 1) as usize)
    }

    /// The entry at `slot`, which the caller knows is held.
    pub fn at(&self, slot: u64) -> &Entry {
        self.get(slot).unwrap_or_else(|| panic!("slot {slot} is held (base {}, len {})", self.base(), self.len()))
    }

    /// Replaces the entry at a held `slot`.
    pub fn set(&mut self, slot: u64, entry: Entry) {
        assert!(slot > self.base() && slot <= self.len(), "only held slots are overwritten");
        let index = (slot - self.base() - 1) as usize;
        self.entries[index] = entry;
    }

    /// Appends at slot `len + 1`.
    pub fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
    }

    /// The last entry, if held.
    pub fn last(&self) -> Option<&Entry> {
        self.entries.last()
    }

    /// Held slots with their entries, in order.
    pub fn slots(&self) -> impl Iterator<Item = (u64, &Entry)> {
        let base = self.base();
        self.entries.iter().enumerate().map(move |(i, entry)| (base + 1 + i as u64, entry))
    }

    /// Drops the slots `checkpoint` covers; it must lie within the held part.
    pub fn truncate(&mut self, checkpoint: Checkpoint) {
        assert!(checkpoint.slot >= self.base() && checkpoint.slot <= self.len(), "a checkpoint within the log");
        let dropped = (checkpoint.slot - self.base()) as usize;
        self.entries.drain(..dropped);
        self.checkpoint = Arc::new(checkpoint);
    }
}
