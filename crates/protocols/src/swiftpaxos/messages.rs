//! SwiftPaxos messages (paper Figures 3–5; spec §4), plus the three the paper describes only in
//! prose: the co-located client's result (`Executed`), the payload fetch (`Fetch`/`Payloads`)
//! and the failure detector's heartbeat (`Ping`, which also carries what garbage collection needs),
//! plus `Retired`.

use ordo_core::{ClientId, Command, CommandResult, RequestId};
use serde::{Deserialize, Serialize};

/// A set of command ids (dependencies), sorted and without duplicates on the wire.
pub type Deps = Vec<RequestId>;

/// The phase of a command at one replica (spec §3.1). `Start` is never sent: an id a report does
/// not list is in `Start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    /// Not received.
    Start,
    /// Received; waiting for the leader's proposal.
    PreAccept,
    /// The leader's proposal adopted.
    Accept,
    /// Committed.
    Commit,
}

/// One command as a replica reports it in recovery (`NewLeaderAck`) or as the new leader
/// installs it (`Sync`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The command's id.
    pub id: RequestId,
    /// Its phase at the sender (never `Start`).
    pub phase: Phase,
    /// The payload.
    pub command: Command,
    /// Its dependencies; `None` for a `PreAccept` command a replica outside the fast quorum
    /// never proposed for (L10).
    pub deps: Option<Deps>,
    /// CURP+: the sender's witness holds the command unsynced (App. B, L22).
    #[serde(default)]
    pub witnessed: bool,
}

/// Every message of SwiftPaxos.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Message {
    /// Client → every replica: order this command (L2); sent again on a retry.
    Propagate {
        /// The command's id (the client and its request number).
        id: RequestId,
        /// The command.
        command: Command,
    },
    /// Fast-quorum replica → replicas (and a follower's to the client): its dependency proposal
    /// (L19, L21). The leader's is the proposal every replica adopts (L22).
    FastAck {
        /// The sender's ballot.
        ballot: u64,
        /// The command.
        id: RequestId,
        /// The proposed dependencies.
        deps: Deps,
        /// Digest of the proposer's trimmed dependency paths (§3.5, §4.1).
        paths: u64,
    },
    /// Follower → replicas and client: it adopted the leader's dependencies (L27, L76).
    SlowAck {
        /// The ballot.
        ballot: u64,
        /// The command.
        id: RequestId,
    },
    /// CURP+ witness → client: the command is recorded with no conflicting unsynced command
    /// (App. B, L23).
    RecordAck {
        /// The witness's ballot.
        ballot: u64,
        /// The command.
        id: RequestId,
    },
    /// Leader → client: the optimistic result (L18). Under SwiftPaxos^reads, also a read's
    /// reader → client: the speculative result over the reader's dependencies (`reads.rs`).
    Reply {
        /// The ballot.
        ballot: u64,
        /// The command.
        id: RequestId,
        /// The sender's dependencies (the flawed client of the canary compares these).
        deps: Deps,
        /// Digest of the sender's dependency paths.
        paths: u64,
        /// The result of optimistic execution.
        result: CommandResult,
    },
    /// Replica → client: the result of executing the committed command (the co-located
    /// client's response of §3.5, and the answer to a retry of an executed command).
    Executed {
        /// The command.
        id: RequestId,
        /// What executing it returned.
        result: CommandResult,
    },
    /// Replica → leader: send me these payloads (§4.3), or the command (a follower's
    /// re-proposal of a command the leader may lack is a `Propagate`).
    Fetch {
        /// The ids whose payloads are missing.
        ids: Vec<RequestId>,
    },
    /// Leader → replica: the payloads asked for.
    Payloads {
        /// Id and payload.
        commands: Vec<(RequestId, Command)>,
    },
    /// Replica → replicas: I am alive (failure detector ◇P of Fig 13), and what I executed
    /// (garbage collection, `gc.rs`).
    Ping {
        /// The sender's ballot.
        ballot: u64,
        /// Per client, the sender's executed prefix (some clients per ping, `gc::LANES_PER_PING`).
        executed: Vec<(ClientId, u64)>,
    },
    /// Restarted replica → a replica that pinged it: I left for good (crash-stop), so do not
    /// wait for me to collect garbage.
    Retired,
    /// Replica → the trusted replica: start a new ballot (L84).
    Recover {
        /// The sender's ballot.
        ballot: u64,
    },
    /// New leader → replicas: join ballot `ballot` (L42).
    NewLeader {
        /// The new ballot.
        ballot: u64,
    },
    /// Replica → new leader: my state (L47).
    NewLeaderAck {
        /// The ballot joined.
        ballot: u64,
        /// The last ballot the sender completed recovery in.
        cbal: u64,
        /// Every command the sender knows (not in `Start`).
        entries: Vec<Entry>,
        /// Per client, the sender knows its requests through this number ran at every replica
        /// (garbage collection): the new leader need not order recovered commands after them.
        collected: Vec<(ClientId, u64)>,
    },
    /// New leader → replicas: the initial state of the ballot (L65).
    Sync {
        /// The ballot.
        ballot: u64,
        /// Every command kept, each `Accept` or `Commit`.
        entries: Vec<Entry>,
    },
}

// NUMBER_MAX (shared) bounds the ballot, request number or executed prefix a replica accepts from a
// peer. Ballots grow by at most `N` per recovery and a client's numbers by one per request, so no
// cluster reaches it; below it, `+ 1` (or `+ N`) on a number that came from a peer cannot overflow.
pub use crate::NUMBER_MAX;

/// Whether `id` is a request number a client can send: clients number from 1 (a number 0 would
/// look forgotten by garbage collection, whose per-client mark starts at 0), and never reach
/// [`NUMBER_MAX`].
fn is_client_number(id: &RequestId) -> bool {
    (1..=NUMBER_MAX).contains(&id.number)
}

/// Whether every id of a recovery's entries (and of their dependencies) is a client's number.
fn entries_numbered(entries: &[Entry]) -> bool {
    entries.iter().all(|entry| {
        is_client_number(&entry.id) && entry.deps.as_ref().is_none_or(|deps| deps.iter().all(is_client_number))
    })
}

impl Message {
    /// Checks the numbers a message carries before any handler adds to or compares them: no
    /// honest node sends a ballot or an executed prefix above [`NUMBER_MAX`], nor a request
    /// numbered 0 or above it. Only a lying or corrupted peer does, and the message is dropped.
    pub fn check_numbers(&self) -> Result<(), &'static str> {
        let ids = |ids: &[RequestId]| ids.iter().all(is_client_number);
        let prefixes = |lanes: &[(ClientId, u64)]| lanes.iter().all(|&(_, prefix)| prefix <= NUMBER_MAX);
        let (ballot, numbered) = match self {
            Message::Propagate { id, .. } | Message::Executed { id, .. } => (0, is_client_number(id)),
            Message::FastAck { ballot, id, deps, .. } | Message::Reply { ballot, id, deps, .. } => {
                (*ballot, is_client_number(id) && ids(deps))
            }
            Message::SlowAck { ballot, id } | Message::RecordAck { ballot, id } => (*ballot, is_client_number(id)),
            Message::Fetch { ids: fetched } => (0, ids(fetched)),
            Message::Payloads { commands } => (0, commands.iter().all(|(id, _)| is_client_number(id))),
            Message::Ping { ballot, executed } => (*ballot, prefixes(executed)),
            Message::Retired => (0, true),
            Message::Recover { ballot } | Message::NewLeader { ballot } => (*ballot, true),
            Message::NewLeaderAck { ballot, cbal, entries, collected } => {
                ((*ballot).max(*cbal), entries_numbered(entries) && prefixes(collected))
            }
            Message::Sync { ballot, entries } => (*ballot, entries_numbered(entries)),
        };
        if ballot > NUMBER_MAX {
            return Err("ballot out of range");
        }
        if !numbered {
            return Err("request number or executed prefix out of range");
        }
        Ok(())
    }

    /// A short name for drop reasons and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Propagate { .. } => "propagate",
            Message::FastAck { .. } => "fast_ack",
            Message::SlowAck { .. } => "slow_ack",
            Message::RecordAck { .. } => "record_ack",
            Message::Reply { .. } => "reply",
            Message::Executed { .. } => "executed",
            Message::Fetch { .. } => "fetch",
            Message::Payloads { .. } => "payloads",
            Message::Ping { .. } => "ping",
            Message::Retired => "retired",
            Message::Recover { .. } => "recover",
            Message::NewLeader { .. } => "new_leader",
            Message::NewLeaderAck { .. } => "new_leader_ack",
            Message::Sync { .. } => "sync",
        }
    }
}
