//! Every message of Mencius (Mao, Junqueira, Marzullo, OSDI 2008): coordinated Paxos per slot,
//! with slot `s` coordinated by replica `(s − 1) mod N`.

use crate::chora::messages::{Request, ValueId};
use crate::client_table::ClientRecord;
use bytes::Bytes;
use ordo_core::{CommandResult, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A Paxos ballot: (round, rank). Round 0 belongs to the slot's coordinator (its owner).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ballot {
    /// Higher rounds win.
    pub round: u64,
    /// The proposer's rank (breaks ties, makes ballots unique).
    pub rank: u32,
}

/// What a slot holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// Client requests (one unless batching is on).
    Requests(Vec<Arc<Request>>),
    /// A no-op: a skipped or revoked slot.
    NoOp,
}

impl Value {
    /// The identity of the value, for the checker.
    pub fn value_id(&self) -> ValueId {
        match self {
            Value::Requests(requests) => ValueId::Requests(requests.iter().map(|r| r.id).collect()),
            Value::NoOp => ValueId::NoOp,
        }
    }
}

/// A replica's executed prefix, for a restarted or lagging replica (`state_transfer.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Every slot up to here is chosen and executed into `state`.
    pub executed: u64,
    /// Requests executed so far (numbers the client table's ops).
    pub ops: u64,
    /// `StateMachine::snapshot` bytes.
    pub state: Bytes,
    /// The client table, by client.
    pub client_table: Vec<ClientRecord>,
}

/// Every message of Mencius.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → any replica.
    Request(Arc<Request>),
    /// The replica that received the request → its client, after execution.
    Reply {
        /// The request.
        id: RequestId,
        /// Its result.
        result: CommandResult,
    },
    /// Phase 2a: accept these values at `ballot` (the owner's suggestion at round 0, or a
    /// revoker's proposals).
    Propose {
        /// The ballot.
        ballot: Ballot,
        /// Slots and values, ascending.
        entries: Vec<(u64, Value)>,
    },
    /// Phase 2b: the sender accepted these slots at `ballot` (per-slot acknowledgements).
    Accepted {
        /// The ballot.
        ballot: Ballot,
        /// The slots.
        slots: Vec<u64>,
    },
    /// The owner gives up its slots in `from..=until`: they are no-ops (Mencius' skip, learned
    /// at once since only the owner may suggest anything but a no-op).
    Skip {
        /// First slot (owned by the sender).
        from: u64,
        /// Last slot.
        until: u64,
    },
    /// These values are chosen.
    Learn {
        /// Slots and values.
        entries: Vec<(u64, Value)>,
    },
    /// A replica misses the chosen values of `from..=until`.
    Query {
        /// First slot.
        from: u64,
        /// Last slot.
        until: u64,
    },
    /// Phase 1a of a revocation: promise `ballot` for `owner`'s slots from `from` on.
    Prepare {
        /// The ballot.
        ballot: Ballot,
        /// The suspected owner's rank.
        owner: u32,
        /// First slot revoked.
        from: u64,
        /// Last slot revoked.
        until: u64,
    },
    /// Phase 1b: what the sender accepted (or learned) in the revoked range.
    Promise {
        /// The ballot promised.
        ballot: Ballot,
        /// Accepted (slot, ballot, value) in the range; chosen values at the highest ballot.
        accepted: Vec<(u64, Ballot, Value)>,
    },
    /// A restarted replica (or one behind what the others keep) asks for a snapshot executed
    /// at least through `need`.
    StateRequest {
        /// The lowest executed slot of a snapshot the sender may install.
        need: u64,
    },
    /// A snapshot of the sender's executed prefix.
    StateReply(Box<Snapshot>),
}

// NUMBER_MAX (shared) bounds the slot, ballot round, request number or op count a replica accepts
// from a peer. Slots grow by one per proposal and rounds by one per revocation, so no cluster
// reaches it; below it, `+ 1` (or `+ n`) on a number that came from a peer cannot overflow.
pub use crate::NUMBER_MAX;

impl Message {
    /// The highest slot, round or count `self` carries, checked against [`NUMBER_MAX`] before
    /// any handler adds to it: only a lying or corrupted peer sends one above.
    pub fn highest_number(&self) -> u64 {
        let slots = |entries: &[(u64, Value)]| entries.iter().map(|(slot, _)| *slot).max().unwrap_or(0);
        match self {
            Message::Request(request) => request.highest_number(),
            Message::Reply { .. } => 0,
            Message::Propose { ballot, entries } => ballot.round.max(slots(entries)),
            Message::Accepted { ballot, slots } => ballot.round.max(slots.iter().copied().max().unwrap_or(0)),
            Message::Skip { from, until } | Message::Query { from, until } => (*from).max(*until),
            Message::Learn { entries } => slots(entries),
            Message::Prepare { ballot, from, until, .. } => ballot.round.max(*from).max(*until),
            Message::Promise { ballot, accepted } => {
                // An accepted entry's ballot is the replica's `CHOSEN` (round u64::MAX) for a
                // learned value: only the slots and the promise's own round are checked.
                let accepted = accepted.iter().map(|(slot, _, _)| *slot).max().unwrap_or(0);
                ballot.round.max(accepted)
            }
            Message::StateRequest { need } => *need,
            Message::StateReply(snapshot) => snapshot.executed.max(snapshot.ops),
        }
    }
}
