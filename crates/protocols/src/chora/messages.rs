//! Every message of Chora (paper §6.2–§6.7; spec §5), with the log-entry types they carry.
//!
//! A replica sends one [`Pulse`] per round in pulsing mode: it is the paper's `propose` (with
//! its cumulative `ack-slot`) with `propose-nack`, `propose-recover`, `propose-noop`, `skip` and
//! `latest-propose-slot` piggybacked. In responsive mode the same pulse leaves at once after
//! any input that gave it something to say, so it also plays `propose-ack`.

use crate::client_table::ClientRecord;
use bytes::Bytes;
use ordo_core::{Command, CommandResult, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A client's request: its id (client + number, for at-most-once execution) and command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Client and number.
    pub id: RequestId,
    /// The client's acknowledgement mark (see `client_table.rs`).
    pub acked_below: u64,
    /// What to execute.
    pub command: Command,
}

/// What a log slot holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// Client requests (one unless batching is on).
    Requests(Vec<Arc<Request>>),
    /// A no-op: an idle proposer's slot, a skipped slot, or a recover's companion (§6.3).
    NoOp,
    /// A view's first entry, at its view-base: the proposers of the view, by replica rank, in
    /// slot order (§6.5, §6.7.2). Slot 0 holds view 0's.
    ViewInit {
        /// Ranks of the replicas that own slots in the view.
        proposers: Vec<u32>,
    },
}

/// One log entry: a value and the view it was proposed in (§6.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The view in which it was proposed.
    pub view: u64,
    /// The value.
    pub value: Value,
}

/// What the global checker compares at a slot: the value, by identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueId {
    /// Requests, by id.
    Requests(Vec<RequestId>),
    /// A no-op.
    NoOp,
    /// A view-init of a view.
    ViewInit(u64),
}

impl Entry {
    /// The identity of the value, for the checker.
    pub fn value_id(&self) -> ValueId {
        match &self.value {
            Value::Requests(requests) => ValueId::Requests(requests.iter().map(|r| r.id).collect()),
            Value::NoOp => ValueId::NoOp,
            Value::ViewInit { .. } => ValueId::ViewInit(self.view),
        }
    }

    /// True for a view-init.
    pub fn is_view_init(&self) -> bool {
        matches!(self.value, Value::ViewInit { .. })
    }
}

/// A replica's message of one round (pulsing mode) or one event (responsive mode).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulse {
    /// The sender's view; pulses of lower views are ignored (§6.5).
    pub view: u64,
    /// The view-base of the sender's view (lets a replica that adopted the view late ask for
    /// the view-init).
    pub base: u64,
    /// The sender's `last-ack`: it holds every slot up to here, verified (§6.2).
    pub ack: u64,
    /// The highest slot the sender knows was proposed in the view (§6.7.1).
    pub latest_proposed: u64,
    /// A fresh proposal for the sender's next slot (a command, a no-op, or the initiator's
    /// view-init at view-base).
    pub proposal: Option<(u64, Entry)>,
    /// The sender proposes a no-op for each of its slots in `start..=until` (§6.7.1).
    pub skip: Option<(u64, u64)>,
    /// Slots `start..=until` the sender misses (`propose-nack`, as a range).
    pub nack: Option<(u64, u64)>,
    /// Entries the sender sends again: `propose-recover`s for nacked slots, and its own
    /// re-proposals when the coordination timer fires (§6.3, §6.6). In slot order.
    pub recovers: Vec<(u64, Entry)>,
}

/// A committed prefix, for state transfer: the state after executing every slot up to
/// `commit`, with the view it was taken in (docs/protocols/chora.md, "Recovery").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The sender's view; its view-init committed at or below `commit`.
    pub view: u64,
    /// That view's view-base.
    pub base: u64,
    /// That view's proposers.
    pub proposers: Vec<u32>,
    /// Every slot up to here is committed and folded in.
    pub commit: u64,
    /// The entry at `commit` (the receiver's new log floor).
    pub floor: Entry,
    /// Requests executed so far (numbers the client table's ops).
    pub ops: u64,
    /// `StateMachine::snapshot` bytes.
    pub state: Bytes,
    /// The client table, by client.
    pub client_table: Vec<ClientRecord>,
}

/// Every message of Chora.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → any replica.
    Request(Arc<Request>),
    /// A replica that owns no slots → a proposer: propose this for me (§6.7.2).
    Forward(Arc<Request>),
    /// The replica that received the request → its client, after execution.
    Reply {
        /// The request.
        id: RequestId,
        /// Its result.
        result: CommandResult,
    },
    /// Replica → replicas: proposal, ack and piggybacked repair.
    Pulse(Box<Pulse>),
    /// Candidate → replicas (§6.5).
    ViewChangeRequest {
        /// The view the candidate asks for.
        view: u64,
        /// The candidate's `last-append`.
        last_append: u64,
        /// The view of its entry there.
        last_append_view: u64,
    },
    /// A restarted or far-behind replica → replicas: send a snapshot once your commit reaches
    /// `need` (state transfer; not in the paper).
    StateRequest {
        /// The lowest commit point the requester accepts.
        need: u64,
    },
    /// Replica → requester: its committed prefix.
    StateReply(Box<Snapshot>),
    /// Voter → candidate (`view-change-reply`, a.k.a. `view-change-vote`).
    ViewChangeReply {
        /// The view voted in.
        view: u64,
    },
}

// NUMBER_MAX (shared) bounds the view, slot, request number or op count a replica accepts from a
// peer. Views grow by one per view change and slots by one per proposal, so no cluster reaches it;
// below it, `+ 1` (or `+ n`) on a number that came from a peer cannot overflow.
pub use crate::NUMBER_MAX;

impl Request {
    /// The highest number the request carries (its number, its acknowledgement mark).
    pub fn highest_number(&self) -> u64 {
        self.id.number.max(self.acked_below)
    }
}

impl Message {
    /// The highest view, slot or count `self` carries, checked against [`NUMBER_MAX`] before
    /// any handler adds to it: only a lying or corrupted peer sends one above.
    pub fn highest_number(&self) -> u64 {
        let range = |range: &Option<(u64, u64)>| range.map_or(0, |(start, until)| start.max(until));
        match self {
            Message::Request(request) | Message::Forward(request) => request.highest_number(),
            Message::Reply { .. } => 0,
            Message::Pulse(pulse) => {
                let proposal = pulse.proposal.as_ref().map_or(0, |(slot, entry)| (*slot).max(entry.view));
                let recovers = pulse.recovers.iter().map(|(slot, entry)| (*slot).max(entry.view)).max().unwrap_or(0);
                [pulse.view, pulse.base, pulse.ack, pulse.latest_proposed, proposal, recovers]
                    .into_iter()
                    .chain([range(&pulse.skip), range(&pulse.nack)])
                    .max()
                    .unwrap_or(0)
            }
            Message::ViewChangeRequest { view, last_append, last_append_view } => {
                (*view).max(*last_append).max(*last_append_view)
            }
            Message::StateRequest { need } => *need,
            Message::StateReply(snapshot) => {
                [snapshot.view, snapshot.base, snapshot.commit, snapshot.ops, snapshot.floor.view]
                    .into_iter()
                    .max()
                    .unwrap_or(0)
            }
            Message::ViewChangeReply { view } => *view,
        }
    }
}
