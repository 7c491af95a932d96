//! Messages of Nezha, and the log entry, checkpoint and log image they carry.

use bytes::Bytes;
use ordo_core::{ClientId, Command, CommandResult, NodeId, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A crash-vector: one counter per replica rank, raised by a replica each time it rejoins
/// (paper App. A.1). Carried by every replica-to-replica message of recovery and view change,
/// and folded into every fast-reply hash.
pub type CrashVector = Vec<u64>;

/// One log entry: a request with the deadline it is ordered by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The request.
    pub id: RequestId,
    /// Send time plus latency bound, as stamped by the DOM sender (or raised by the leader).
    pub deadline: u64,
    /// The node that multicast the request (proxy, or client without proxy): replies go there.
    pub reply_to: NodeId,
    /// What to execute.
    pub command: Command,
}

impl Entry {
    /// The total order of the log: deadline, then client, then request number (spec §12.1).
    pub fn order(&self) -> (u64, ClientId, u64) {
        (self.deadline, self.id.client, self.id.number)
    }
}

/// The state machine and client table after executing log positions `1..=position`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last position folded in (the log base of whoever holds it).
    pub position: u64,
    /// The highest deadline folded in: later requests are ordered after it.
    pub deadline_max: u64,
    /// `StateMachine::snapshot` bytes.
    pub state: Bytes,
    /// The client table: per client, the last request number executed, its result and the
    /// position it executed at.
    pub clients: Vec<super::clients::ClientRow>,
    /// The conflict table's write hashes of the positions folded in, per bucket: a replica
    /// that adopts this checkpoint starts its hashes from them, so its fast-replies match those
    /// of replicas that appended the same positions one by one.
    pub hashes: Vec<u64>,
}

/// A replica's log as sent in view changes and state transfers: a checkpoint, then the synced
/// entries at positions `checkpoint.position + 1 ..`, then the unsynced ones (no fixed position).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogImage {
    /// The state below the first synced entry.
    pub checkpoint: Arc<Checkpoint>,
    /// Entries agreed with the leader of the sender's last normal view, in log order.
    pub synced: Vec<Entry>,
    /// Entries appended since, not yet confirmed by the leader (empty from a leader).
    pub unsynced: Vec<Entry>,
}

impl LogImage {
    /// The position of the last synced entry.
    pub fn sync_point(&self) -> u64 {
        self.checkpoint.position + self.synced.len() as u64
    }
}

/// One position of the leader's log as a sync message announces it. It carries no hash: a
/// follower's synced log is the leader's, so the follower computes the leader's fast-reply
/// hash itself (`Replica::synced_hashes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncEntry {
    /// The request at that position.
    pub id: RequestId,
    /// Its deadline in the leader's log.
    pub deadline: u64,
    /// The full entry, when the leader resends (a follower that never received the request
    /// gets it this way: the paper's "fetch from other replicas").
    pub body: Option<Entry>,
}

/// Sync entries on the wire: each deadline as its difference from the previous entry's. The
/// log is in deadline order, so that is a byte or two instead of up to nine: a sync goes to
/// every follower, and its bytes were the part of the leader's load that grew with them.
mod delta_deadlines {
    use super::{Entry, SyncEntry};
    use ordo_core::RequestId;
    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(entries: &[SyncEntry], serializer: S) -> Result<S::Ok, S::Error> {
        let mut previous = 0u64;
        serializer.collect_seq(entries.iter().map(|entry| {
            let delta = entry.deadline.wrapping_sub(previous) as i64;
            previous = entry.deadline;
            (entry.id, delta, &entry.body)
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<SyncEntry>, D::Error> {
        deserializer.deserialize_seq(Deltas)
    }

    struct Deltas;

    impl<'de> Visitor<'de> for Deltas {
        type Value = Vec<SyncEntry>;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("sync entries with delta-encoded deadlines")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // The hint comes from the sender: cap it so a forged length cannot reserve memory.
            let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            let mut previous = 0u64;
            while let Some((id, delta, body)) = seq.next_element::<(RequestId, i64, Option<Entry>)>()? {
                previous = previous.wrapping_add(delta as u64);
                entries.push(SyncEntry { id, deadline: previous, body });
            }
            Ok(entries)
        }
    }
}

/// One fast-reply: a replica appended `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastReply {
    /// The request.
    pub id: RequestId,
    /// Per-key (or whole-log) hash folded with the crash-vector's hash.
    pub hash: u64,
    /// The execution result (leader only).
    pub result: Option<CommandResult>,
}

/// Every message of Nezha.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → proxy: execute a command.
    ClientRequest {
        /// The request.
        id: RequestId,
        /// What to execute.
        command: Command,
    },
    /// Proxy → client: the committed result.
    ClientReply {
        /// The request.
        id: RequestId,
        /// The leader's execution result.
        result: CommandResult,
    },
    /// DOM sender → every replica: requests stamped with one send time and latency bound (a
    /// proxy batches the requests that reach it close together; each keeps its own id).
    Requests {
        /// The requests and what each executes.
        requests: Vec<(RequestId, Command)>,
        /// The sender's clock when it sent (DOM's `s`).
        send_ns: u64,
        /// The latency bound (DOM's `l`); the deadline is `send_ns + bound_ns`.
        bound_ns: u64,
        /// The sender clock's claimed error bound (its σ for the OWD estimate).
        sender_error_ns: u64,
        /// The sender hears fewer replicas than a fast quorum: followers slow-reply even where
        /// their fast-reply matched the leader's, so the slow path commits without a retry.
        slow_replies: bool,
    },
    /// Replica → DOM sender: "I appended these", each with the hash of what precedes it (the
    /// fast-replies of one handler to one sender, in one message).
    FastReplies {
        /// The replica's view.
        view: u64,
        /// The DOM sender that multicast these requests: the destination, or the sender the
        /// leader answers for when it checks quorums (`quorum_check_at_leader`).
        about: NodeId,
        /// The replies.
        replies: Vec<FastReply>,
        /// The replica's one-way-delay estimate for that sender (piggy-backed, paper §4).
        owd_ns: u64,
    },
    /// Follower → DOM sender: "my log agrees with the leader's up to these requests" (the
    /// requests of one sync batch that this sender multicast, in one message).
    SlowReply {
        /// The follower's view.
        view: u64,
        /// The DOM sender that multicast these requests (as in `FastReplies`).
        about: NodeId,
        /// The requests.
        ids: Vec<RequestId>,
        /// The follower's one-way-delay estimate for this sender.
        owd_ns: u64,
    },
    /// Leader → DOM sender, when the leader checks quorums (the paper's No-QC-Offloading
    /// ablation, §7.5): these requests committed.
    Commits {
        /// The leader's view.
        view: u64,
        /// Each request, the leader's result, and whether it committed on the fast path.
        commits: Vec<(RequestId, CommandResult, bool)>,
        /// The largest one-way-delay estimate for the sender among the replicas that replied.
        owd_ns: u64,
    },
    /// Leader → followers: log positions `first ..` (batched), the commit point and the
    /// leader's crash-vector. An empty one is the heartbeat; its `first` follows the last
    /// position announced.
    Sync {
        /// The leader's view.
        view: u64,
        /// The leader's crash-vector.
        cv: CrashVector,
        /// The leader's first position appended under this crash-vector: the fast-replies for
        /// earlier ones carried an older one, so a follower cannot recompute their hashes.
        cv_since: u64,
        /// Position of the first entry.
        first: u64,
        /// The positions, in order.
        #[serde(with = "delta_deadlines")]
        entries: Vec<SyncEntry>,
        /// Positions up to here are committed: followers may execute them.
        commit: u64,
        /// The leader checks quorums and hears fewer replicas than a fast quorum: followers
        /// slow-reply to every position, also where their fast-reply matched.
        slow_replies: bool,
    },
    /// Follower → leader: the follower's sync-point (and that it lacks the body of the next).
    SyncAck {
        /// The follower's view.
        view: u64,
        /// The follower's crash-vector.
        cv: CrashVector,
        /// Its sync-point.
        sync_point: u64,
        /// True when it waits for the body of the entry after its sync-point, or lacks
        /// positions a heartbeat said were announced: the leader resends from its sync-point.
        missing: bool,
    },
    /// Any replica → all: "I moved to this view".
    ViewChangeRequest {
        /// The view.
        view: u64,
        /// The sender's crash-vector.
        cv: CrashVector,
    },
    /// Replica → leader of `view`: its log for the merge.
    ViewChange {
        /// The view.
        view: u64,
        /// The sender's crash-vector.
        cv: CrashVector,
        /// The latest view the sender was normal in.
        last_normal_view: u64,
        /// The highest committed position the sender knows.
        commit: u64,
        /// Its log.
        image: Arc<LogImage>,
    },
    /// New leader → all: the log of the new view.
    StartView {
        /// The view.
        view: u64,
        /// The leader's crash-vector.
        cv: CrashVector,
        /// Committed positions.
        commit: u64,
        /// The log, all synced.
        image: Arc<LogImage>,
    },
    /// Rejoining replica → all: crash-vectors and views, please (Alg. 1's two reads in one).
    RecoveryRequest {
        /// Identifies this recovery attempt.
        nonce: u64,
        /// The sender's crash-vector (all zeros after a restart).
        cv: CrashVector,
    },
    /// Normal replica → rejoining replica.
    RecoveryReply {
        /// The nonce echoed.
        nonce: u64,
        /// The replier's view.
        view: u64,
        /// The replier's crash-vector.
        cv: CrashVector,
    },
    /// Rejoining replica → leader: send me your state.
    StateTransferRequest {
        /// The rejoiner's crash-vector, its own counter raised.
        cv: CrashVector,
    },
    /// Leader → rejoining (or lagging) replica: the leader's log.
    StateTransferReply {
        /// The leader's view.
        view: u64,
        /// The leader's crash-vector.
        cv: CrashVector,
        /// Committed positions.
        commit: u64,
        /// The log, all synced.
        image: Arc<LogImage>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::ClientId;
    use proptest::prelude::*;

    fn sync(entries: Vec<SyncEntry>) -> Message {
        Message::Sync { view: 1, cv: vec![0, 1, 0], cv_since: 7, first: 5, entries, commit: 4, slow_replies: false }
    }

    fn entry(number: u64, deadline: u64) -> SyncEntry {
        SyncEntry { id: RequestId { client: ClientId(number % 7), number }, deadline, body: None }
    }

    #[test]
    fn sync_deadlines_travel_as_small_differences() {
        // Goal: a sync's bytes per position stay small whatever the clock's epoch (the leader
        // sends every position to every follower). Method: 1,000 positions 1 µs apart at a Unix
        // epoch in nanoseconds, whose absolute deadlines alone would take 9 bytes each.
        let epoch = 1_795_000_000_000_000_000u64;
        let entries: Vec<SyncEntry> = (0..1000).map(|i| entry(1000 + i, epoch + i * 1_000)).collect();
        let bytes = postcard::to_allocvec(&sync(entries)).expect("serializes");
        assert!(bytes.len() < 1000 * 7, "{} bytes for 1,000 positions", bytes.len());
    }

    proptest! {
        #[test]
        fn syncs_round_trip_whatever_their_deadlines(deadlines in proptest::collection::vec(any::<u64>(), 0..50)) {
            // Goal: deadlines in any order (a malformed or hostile sync) come back exactly.
            let entries: Vec<SyncEntry> =
                deadlines.iter().enumerate().map(|(i, &deadline)| entry(i as u64, deadline)).collect();
            let message = sync(entries);
            let bytes = postcard::to_allocvec(&message).expect("serializes");
            prop_assert_eq!(postcard::from_bytes::<Message>(&bytes).expect("deserializes"), message);
        }

        #[test]
        fn garbage_never_panics_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = postcard::from_bytes::<Message>(&bytes);
        }
    }
}
