//! Messages of Multi-Paxos, and the log entry and snapshot they carry.

use crate::client_table::ClientRecord;
use bytes::Bytes;
use ordo_core::{Command, CommandResult, NodeId, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One log entry: one client request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The request.
    pub id: RequestId,
    /// The client's acknowledgement mark sent with it (see `crate::client_table`).
    pub acked_below: u64,
    /// The client node the leader replies to.
    pub reply_to: NodeId,
    /// What to execute.
    pub command: Command,
}

/// The state machine and client table after executing ops `1..=op`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The last op folded in.
    pub op: u64,
    /// `StateMachine::snapshot` bytes.
    pub state: Bytes,
    /// The client table, sorted by client.
    pub client_table: Vec<ClientRecord>,
}

/// Leader → backups: new entries at ops `op_number - entries.len() + 1 ..= op_number`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    /// The leader's view.
    pub view: u64,
    /// The op number of the last entry.
    pub op_number: u64,
    /// The entries, in op order (never empty).
    pub entries: Vec<Entry>,
    /// The leader's commit number when it sent this.
    pub commit_number: u64,
}

impl Prepare {
    /// The op number of the first entry, or `None` if the message is malformed.
    pub fn first_op(&self) -> Option<u64> {
        let count = u64::try_from(self.entries.len()).ok()?;
        if count == 0 || count > self.op_number {
            return None;
        }
        Some(self.op_number - count + 1)
    }
}

/// Replica → leader of `view`: what a replica offers for the new view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoViewChange {
    /// The view being started.
    pub view: u64,
    /// The latest view in which the sender was normal.
    pub last_normal_view: u64,
    /// The sender's op number.
    pub op_number: u64,
    /// The sender's commit number.
    pub commit_number: u64,
    /// The op number just before the first entry sent (the sender's log base: it has folded
    /// everything below into a snapshot).
    pub log_base: u64,
    /// The sender's log, at ops `log_base + 1 ..= op_number`.
    pub entries: Vec<Entry>,
}

/// New leader → backups: the log of the new view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartView {
    /// The new view.
    pub view: u64,
    /// The leader's op number.
    pub op_number: u64,
    /// The leader's commit number.
    pub commit_number: u64,
    /// The op number just before the first entry.
    pub log_base: u64,
    /// The leader's log, at ops `log_base + 1 ..= op_number`.
    pub entries: Vec<Entry>,
}

/// Replica → replica: the answer to a `GetState`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewState {
    /// The responder's view (it is normal in it).
    pub view: u64,
    /// The responder's op number.
    pub op_number: u64,
    /// The responder's commit number.
    pub commit_number: u64,
    /// The responder's snapshot, when the requester asked for entries it no longer holds.
    pub snapshot: Option<Arc<Snapshot>>,
    /// The op number just before the first entry (the snapshot's op, if there is one).
    pub after: u64,
    /// Entries at ops `after + 1 ..`, at most `state_transfer_entries_max` of them.
    pub entries: Vec<Entry>,
}

/// Every message of Multi-Paxos.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → leader: execute this command.
    Request {
        /// The request.
        id: RequestId,
        /// The client's acknowledgement mark: it needs no answer below this number.
        acked_below: u64,
        /// What to execute.
        command: Command,
    },
    /// Leader → client: the result.
    Reply {
        /// The leader's view.
        view: u64,
        /// The request answered.
        id: RequestId,
        /// Its result.
        result: CommandResult,
    },
    /// Non-leader replica → client: "I am normal in this view; ask its leader".
    Redirect {
        /// The replica's view.
        view: u64,
    },
    /// Leader → backups: new entries.
    Prepare(Prepare),
    /// Backup → leader: the backup's log is durable up to `op_number` in `view`.
    PrepareOk {
        /// The view.
        view: u64,
        /// The highest op the backup holds durably.
        op_number: u64,
    },
    /// Leader → backups: the commit number (heartbeat).
    Commit {
        /// The view.
        view: u64,
        /// The leader's commit number.
        commit_number: u64,
    },
    /// Replica → replicas: the sender moved to `view` and wants a view change.
    StartViewChange {
        /// The view.
        view: u64,
    },
    /// Replica → new leader: the sender's log for the view change.
    DoViewChange(DoViewChange),
    /// New leader → backups: the view starts with this log.
    StartView(StartView),
    /// Replica → replica: send the log after `op_number`.
    GetState {
        /// The requester's view.
        view: u64,
        /// The requester holds everything up to this op.
        op_number: u64,
    },
    /// Replica → replica: the requested entries or a snapshot.
    NewState(NewState),
}
