//! Messages of Tempo (Algorithms 1–4 of the paper, plus the liveness helpers of spec §6.3), and
//! the identifiers and payloads they carry.

use ordo_core::{Command, CommandResult, Key, NodeId, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A command identifier: the client's request and the client's attempt at it. A client that
/// times out submits the same request again under a new attempt (with other coordinators), so
/// every attempt is a distinct Tempo command; the executor's client table runs each request at
/// most once. Ordered by request then attempt: the tie-break of ⟨ts, id⟩.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Dot {
    /// The client request.
    pub request: RequestId,
    /// The attempt, from 0.
    pub attempt: u32,
}

/// What every replica needs to know about a command before it can recover it: each accessed
/// shard's part of the command, who coordinates it in each shard, and each shard's fast quorum
/// (the paper's `cmd[id]` and `quorums[id]`). Every accessed shard gets the same payload, so a
/// replica of one shard can hand it to another shard whose coordinator crashed before anyone
/// there heard of the command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Every shard the command accesses, ascending.
    pub shards: Vec<u32>,
    /// Each shard's part of the command (only keys of that shard), in the order of `shards`.
    pub parts: Vec<Command>,
    /// The initial coordinator in each shard, in the order of `shards`.
    pub coordinators: Vec<NodeId>,
    /// The fast quorum of each shard, its coordinator first, in the order of `shards`.
    pub quorums: Vec<Vec<NodeId>>,
    /// The client node the coordinators answer.
    pub client: NodeId,
}

impl Payload {
    /// The position of `shard` in `shards`.
    pub fn index(&self, shard: u32) -> Option<usize> {
        self.shards.iter().position(|&s| s == shard)
    }

    /// The part of the command for `shard` (which must be accessed).
    pub fn command(&self, shard: u32) -> &Command {
        &self.parts[self.index(shard).expect("an accessed shard")]
    }

    /// The fast quorum of `shard`.
    pub fn quorum(&self, shard: u32) -> &[NodeId] {
        &self.quorums[self.index(shard).expect("an accessed shard")]
    }

    /// The initial coordinator in `shard` (`initial_p(id)`).
    pub fn coordinator(&self, shard: u32) -> NodeId {
        self.coordinators[self.index(shard).expect("an accessed shard")]
    }
}

/// A run of promises of one process on one key: "I will never propose `lo..=hi` on `key` for
/// any command but `attached`" (detached when `attached` is `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseRange {
    /// The key (the paper's partition: each key has its own clock).
    pub key: Key,
    /// First timestamp promised.
    pub lo: u64,
    /// Last timestamp promised (inclusive).
    pub hi: u64,
    /// The command the promise is attached to, if any.
    pub attached: Option<Dot>,
}

/// The phase a recovery acceptor reports (`ph_j` in `MRecAck`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecPhase {
    /// The proposal was computed in the `MPropose` handler.
    RecoverP,
    /// The proposal was computed in the `MRec` handler.
    RecoverR,
}

/// Every message of Tempo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → coordinator of each accessed shard: coordinate this command (`MSubmit`).
    Submit {
        /// The command id.
        dot: Dot,
        /// Every accessed shard, ascending.
        shards: Vec<u32>,
        /// Each shard's part of the command.
        parts: Vec<Command>,
        /// The coordinator chosen in each accessed shard.
        coordinators: Vec<NodeId>,
    },
    /// Coordinator → fast quorum: propose a timestamp at least `t` (`MPropose`).
    Propose {
        /// The command id.
        dot: Dot,
        /// The payload.
        payload: Arc<Payload>,
        /// The coordinator's proposal.
        t: u64,
    },
    /// Coordinator → the rest of its shard: keep the payload for recovery (`MPayload`).
    Payload {
        /// The command id.
        dot: Dot,
        /// The payload.
        payload: Arc<Payload>,
    },
    /// Fast-quorum member → coordinator: its proposal and the promises it made for it.
    ProposeAck {
        /// The command id.
        dot: Dot,
        /// The proposal.
        t: u64,
        /// The promises the proposal generated.
        promises: Vec<PromiseRange>,
    },
    /// Coordinator of `shard` → every replica of every accessed shard: the shard's timestamp
    /// (`MCommit`). Carries the fast quorum's promises, and the payload when it answers a
    /// process that may lack it.
    Commit {
        /// The command id.
        dot: Dot,
        /// The shard whose timestamp this is.
        shard: u32,
        /// The shard's committed timestamp.
        t: u64,
        /// Promises of the shard's processes made for the command, with each maker's rank.
        promises: Vec<(u32, PromiseRange)>,
        /// The payload, for a receiver that may not have it.
        payload: Option<Arc<Payload>>,
    },
    /// Coordinator → its shard: accept `t` at `ballot` (`MConsensus`, Flexible Paxos phase 2).
    Consensus {
        /// The command id.
        dot: Dot,
        /// The timestamp proposed.
        t: u64,
        /// The ballot.
        ballot: u64,
    },
    /// Acceptor → coordinator: accepted at `ballot` (`MConsensusAck`).
    ConsensusAck {
        /// The command id.
        dot: Dot,
        /// The ballot.
        ballot: u64,
    },
    /// Process → each peer of its shard: promises `from_seq..` of the sender's promise log, and
    /// how much of the receiver's log the sender holds (`MPromises`, made reliable).
    Promises {
        /// Sequence number of the first range sent.
        from_seq: u64,
        /// Consecutive ranges of the sender's log.
        ranges: Vec<PromiseRange>,
        /// The next sequence number the sender expects from the receiver.
        ack: u64,
    },
    /// Process → each peer of its shard: the commands the sender executed, `from_seq..` of its
    /// executed log, and how much of the receiver's executed log the sender holds (garbage
    /// collection, `gc.rs`; not in the paper). Reliable the same way as `Promises`.
    Executed {
        /// Sequence number of the first dot sent.
        from_seq: u64,
        /// Consecutive dots of the sender's executed log.
        dots: Vec<Dot>,
        /// The next sequence number the sender expects from the receiver.
        ack: u64,
    },
    /// Recovering process → its shard: phase 1 at `ballot` (`MRec`). Carries the payload so
    /// that a process without it can join (payload dissemination).
    Rec {
        /// The command id.
        dot: Dot,
        /// The recovery ballot (above r).
        ballot: u64,
        /// The payload.
        payload: Arc<Payload>,
    },
    /// Acceptor → recovering process (`MRecAck`).
    RecAck {
        /// The command id.
        dot: Dot,
        /// The acceptor's `ts[id]`.
        t: u64,
        /// Where the proposal was computed.
        phase: RecPhase,
        /// The acceptor's `abal[id]`.
        abal: u64,
        /// The ballot answered.
        ballot: u64,
    },
    /// Process → processes: "send me what you know of this command" (a commit if decided, the
    /// payload otherwise). Sent by a process that sees promises attached to a command it does
    /// not know, or that waits for another shard's timestamp.
    Help {
        /// The command id.
        dot: Dot,
        /// The payload, for another shard that may never have heard of the command.
        payload: Option<Arc<Payload>>,
    },
    /// Fast-quorum member → nearby replicas of the other accessed shards: bump to my proposal
    /// (`MBump`).
    Bump {
        /// The command id.
        dot: Dot,
        /// The sender's proposal.
        t: u64,
    },
    /// Process of `shard` → the replicas of the other accessed shards: the command is stable
    /// in `shard` (`MStable`).
    Stable {
        /// The command id.
        dot: Dot,
        /// The shard where it is stable.
        shard: u32,
        /// The sender still waits for the receiver's shard: answer with your own `Stable` if
        /// you sent one already (yours may have been lost).
        waiting: bool,
    },
    /// Coordinator → client: the shard's part of the command executed with this result.
    Reply {
        /// The command id.
        dot: Dot,
        /// The shard that executed.
        shard: u32,
        /// The result of the shard's part.
        result: CommandResult,
    },
}

impl Message {
    /// The command a message is about, if it is about one (all but the streams `Promises` and
    /// `Executed`).
    pub fn dot(&self) -> Option<Dot> {
        match self {
            Message::Submit { dot, .. }
            | Message::Propose { dot, .. }
            | Message::Payload { dot, .. }
            | Message::ProposeAck { dot, .. }
            | Message::Commit { dot, .. }
            | Message::Consensus { dot, .. }
            | Message::ConsensusAck { dot, .. }
            | Message::Rec { dot, .. }
            | Message::RecAck { dot, .. }
            | Message::Help { dot, .. }
            | Message::Bump { dot, .. }
            | Message::Stable { dot, .. }
            | Message::Reply { dot, .. } => Some(*dot),
            Message::Promises { .. } | Message::Executed { .. } => None,
        }
    }
}
