//! Multi-Paxos in its Viewstamped-Replication form (Liskov & Cowling, "Viewstamped Replication
//! Revisited", 2012), with disk persistence, batching, log truncation by snapshots and state
//! transfer.
//!
//! # Glossary
//!
//! - **view**: a numbered period with one leader, `replicas[view % n]`. Every replica remembers the
//!   highest view it joined durably (its promise) and ignores messages of lower views.
//! - **status**: `normal` (processing requests in its view), `view-change` (electing the next
//!   leader) or `transfer` (it learned that its view is running without it and fetches the log).
//! - **op number**: position in the log; op 1 is the first command. One log entry holds one
//!   client request.
//! - **commit number**: every entry up to it is committed (durable at a majority in a way every
//!   later view keeps).
//! - **executed**: how far this replica has applied the log to its state machine.
//! - **last normal view**: the latest view in which this replica was normal; a view change prefers
//!   the log with the largest (last normal view, op number).
//! - **log base**: the op number just below the first entry kept in memory; entries up to it are
//!   committed and folded into a snapshot (or, right after adopting another replica's log, still
//!   to be fetched: see *gap* below).
//! - **gap**: `executed < log base`. The replica holds the agreed log but lacks the state below
//!   its base; it fetches a snapshot or the missing committed entries by state transfer before it
//!   executes further.
//! - **checkpoint**: every `checkpoint_interval` executed entries (more for a big state, up to
//!   `checkpoint_interval_max`), a replica snapshots its state machine and client table,
//!   persists them with the log in one `Replace` record, and drops the log prefix up to one
//!   interval behind the snapshot (that tail lets a replica that lags by less catch up with
//!   entries rather than a snapshot of the whole state).
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Request` | client → leader (all replicas on retry) | execute a command |
//! | `Reply` | leader → client | the result, with the view so the client learns the leader |
//! | `Redirect` | non-leader replica → client | the view the replica is normal in |
//! | `Prepare` | leader → backups | a batch of new log entries and the commit number |
//! | `PrepareOk` | backup → leader | "my log is durable up to this op in this view" |
//! | `Commit` | leader → backups | heartbeat carrying the commit number |
//! | `StartViewChange` | replica → replicas | "I moved to this view" |
//! | `DoViewChange` | replica → new leader | its log suffix, last normal view and commit number |
//! | `StartView` | new leader → backups | the log of the new view and its commit number |
//! | `GetState` | replica → replica | "send me the log after this op" |
//! | `NewState` | replica → replica | entries after that op, or a snapshot and the entries after it |
//!
//! # Invariants (checked after every input by `check_invariants`)
//!
//! - `log base ≤ commit number ≤ op number`, `executed ≤ commit number`.
//! - `last normal view ≤ view`; in `normal` status they are equal.
//! - A normal leader is `replicas[view % n]`; its pipeline holds at most `pipeline_max` batches,
//!   its queue at most `pending_max` requests.
//! - The log holds at most `log_max()` entries; the client table at most `client_table_max`.
//! - Safety (argued in `view_change.rs`): a replica is normal in view `v` only with a log that
//!   contains every entry the leader of `v` started the view with, so a view change that picks
//!   the largest (last normal view, op number) among a majority never loses a committed entry.
//!
//! # Global invariant (checked across replicas in simulation, `checker.rs`)
//!
//! | observation | reported by a replica when | the checker's rule (any replicas, any incarnations) |
//! |---|---|---|
//! | `Committed { op, id }` | its commit number passes an entry it holds | one request per op |
//! | `Executed { op, id, digest }` | it applies a committed entry | one request and one outcome digest per op |
//!
//! The checker (`LogAgreement`) remembers the newest 2^19 ops; the real runtime drops
//! observations, which carry ids and digests only.
//!
//! # Status line
//!
//! `view=3 normal leader op=120 commit=118 exec=118 base=0 log=120`: view, status, role, op
//! number, commit number, executed, log base and entries held in memory.
//!
//! # Durability
//!
//! Persists of one node are assumed durable in ticket order (a write-ahead log): a message sent
//! after ticket `t` implies every earlier write is durable too. Each message that promises
//! something (`PrepareOk`, `StartViewChange`, `DoViewChange`, `StartView`) and every leader
//! `Prepare` waits for the node's latest persist. Because a leader's `Prepare` leaves only once its
//! own entries are durable, a backup's `PrepareOk` for op `k` also proves the leader's copy of `k`
//! durable, so the leader counts its own vote together with the first backup's.

pub mod checker;
pub mod client;
pub mod executor;
pub mod log;
pub mod messages;
pub mod recovery;
pub mod replica;
pub mod state_transfer;
pub mod view_change;

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::{MultiPaxosEarlyReply, MultiPaxosLossyViewChange, MultiPaxosReexecutedRetry, MultiPaxosReusedOp};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_checker;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_scripts;

use messages::{Entry, Snapshot};
use ordo_core::{GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Multi-Paxos / Viewstamped Replication.
pub struct MultiPaxos;

/// Options of Multi-Paxos. Defaults suit a LAN.
/// Time-outs are LAN values; every node runs with them stretched by the topology's slowest
/// round trip (`Config::scaled`), so a WAN needs no option set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often a leader sends a `Commit` heartbeat and retransmits to backups that stopped
    /// acknowledging; replicas in a view change resend their view-change messages as often.
    pub heartbeat_ns: u64,
    /// How long a backup waits without hearing from its leader before it starts a view change,
    /// and how long a view change may take before the next one starts. Randomised by ±50%.
    pub view_change_timeout_ns: u64,
    /// How long a client waits for a reply before it sends its request to every replica, doubled
    /// after each resend of the same request up to 8 times (`client_pipeline::retry_after`).
    pub client_retry_ns: u64,
    /// How long a replica waits for a `NewState` before it asks another replica.
    pub state_transfer_retry_ns: u64,
    /// Most uncommitted `Prepare` batches a leader keeps in flight.
    pub pipeline_max: usize,
    /// Most requests in one `Prepare` (each request is one log entry).
    pub batch_max: usize,
    /// Most requests waiting at the leader for room in the pipeline; more are dropped.
    pub pending_max: usize,
    /// A replica snapshots its state and truncates its log every this many executed entries,
    /// or more for a big state: its last snapshot's state size in bytes over
    /// `checkpoint_bytes_per_op`, up to `checkpoint_interval_max`. A snapshot serializes (and
    /// persists) the whole state, so a big state then costs about that many bytes per op.
    pub checkpoint_interval: u64,
    /// See `checkpoint_interval` (0: no growth with the state).
    pub checkpoint_bytes_per_op: u64,
    /// See `checkpoint_interval`; the log's bound (`log_max`) follows it, so that every replica
    /// has the same bound whatever the size of its own last snapshot.
    pub checkpoint_interval_max: u64,
    /// Most clients remembered in the client table; the least recently executed is evicted.
    pub client_table_max: usize,
    /// Requests one client may keep in flight (pipelining).
    pub client_window: usize,
    /// Most out-of-order `Prepare`s a backup buffers while it waits for the missing ones.
    pub prepare_buffer_max: usize,
    /// Most log entries in one `NewState` (or retransmitted `Prepare`); larger logs move in rounds.
    pub state_transfer_entries_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_ns: 2_000_000,
            view_change_timeout_ns: 10_000_000,
            client_retry_ns: 20_000_000,
            state_transfer_retry_ns: 5_000_000,
            pipeline_max: 8,
            batch_max: 64,
            pending_max: 10_000,
            checkpoint_interval: 1024,
            checkpoint_bytes_per_op: 64,
            checkpoint_interval_max: 16_384,
            client_table_max: 100_000,
            client_window: 16,
            prepare_buffer_max: 64,
            state_transfer_entries_max: 1024,
        }
    }
}

impl Config {
    /// Positions between two checkpoints after one whose state took `state_bytes`.
    pub fn checkpoint_every(&self, state_bytes: u64) -> u64 {
        let (least, most) = (self.checkpoint_interval, self.checkpoint_interval_max);
        ordo_core::snapshot_interval(state_bytes, self.checkpoint_bytes_per_op, least, most)
    }

    /// The least byte bound of the log between checkpoints and of the tail kept behind one
    /// (for a small state): `checkpoint_interval` entries of `checkpoint_bytes_per_op` bytes.
    pub fn checkpoint_bytes_min(&self) -> u64 {
        self.checkpoint_interval.saturating_mul(self.checkpoint_bytes_per_op)
    }

    /// Most entries a replica keeps in its log: three of the longest checkpoint intervals (the
    /// tail kept behind a checkpoint, the entries executed until the next one, and one of slack)
    /// plus a full pipeline of uncommitted batches. A replica that cannot execute (it waits for a
    /// snapshot) stops growing its log here.
    pub fn log_max(&self) -> usize {
        let longest = self.checkpoint_interval.max(self.checkpoint_interval_max);
        let interval = usize::try_from(longest).unwrap_or(usize::MAX);
        interval.saturating_mul(3).saturating_add(self.pipeline_max.saturating_mul(self.batch_max))
    }

    /// Rejects options no replica can run with, saying which.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("heartbeat_ns", self.heartbeat_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("state_transfer_retry_ns", self.state_transfer_retry_ns),
            ("pipeline_max", self.pipeline_max as u64),
            ("batch_max", self.batch_max as u64),
            ("pending_max", self.pending_max as u64),
            ("checkpoint_interval", self.checkpoint_interval),
            ("client_table_max", self.client_table_max as u64),
            ("client_window", self.client_window as u64),
            ("state_transfer_entries_max", self.state_transfer_entries_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("multipaxos: {name} must be positive"));
        }
        if self.view_change_timeout_ns < 2 {
            return Err("multipaxos: view_change_timeout_ns must be at least 2".into());
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's slowest round trip
    /// ([`Topology::stretched`]): a leader's heartbeat
    /// takes half a round trip to reach a backup and a request two to commit, so a WAN must
    /// not start the view changes and retries a LAN's values would.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            view_change_timeout_ns: topology.stretched(self.view_change_timeout_ns, 3),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 4),
            state_transfer_retry_ns: topology.stretched(self.state_transfer_retry_ns, 2),
            ..self.clone()
        }
    }
}

/// Timers of Multi-Paxos.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A client's request went unanswered.
    ClientRetry,
    /// A backup heard nothing from its leader, or a view change took too long.
    ViewChange,
    /// Periodic: the leader's heartbeat and retransmissions, view-change resends.
    Heartbeat,
    /// A `GetState` went unanswered.
    StateTransfer,
}

/// What a replica writes to durable storage. Replayed in order on restart (see `recovery.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durable {
    /// The replica joined `view`: it will never again accept a message of a lower view.
    View {
        /// The view joined.
        view: u64,
    },
    /// The log becomes its prefix up to `after` followed by `entries`, accepted while normal in
    /// `view` (which is then also the last normal view).
    Entries {
        /// The view the entries were accepted in.
        view: u64,
        /// The op number just before the first entry.
        after: u64,
        /// The entries, at ops `after + 1 ..`.
        entries: Vec<Entry>,
    },
    /// The log becomes exactly `entries` after `log_base`, accepted while normal in `view`. Used
    /// when a replica adopts a log whose base lies above its own commit number: its own entries
    /// below that base are not known to be committed and must go.
    Log {
        /// The view the log was accepted in.
        view: u64,
        /// The op number just before the first entry.
        log_base: u64,
        /// The entries, at ops `log_base + 1 ..`.
        entries: Vec<Entry>,
    },
    /// Everything a replica needs, replacing every earlier record: a snapshot of the state
    /// machine and client table, and the log after `log_base`. Written with `PersistMode::Compact`
    /// for the replica's own checkpoint (its earlier records say as much: the entries it executed
    /// and the views it joined, and a replay reads a checkpoint in the middle of them the same),
    /// and with `PersistMode::Replace` for a snapshot received from a peer.
    Checkpoint {
        /// The view.
        view: u64,
        /// The last normal view.
        last_normal_view: u64,
        /// State machine and client table at `snapshot.op`.
        snapshot: Arc<Snapshot>,
        /// The op number just before the first log entry (at least `snapshot.op`).
        log_base: u64,
        /// The log, at ops `log_base + 1 ..`.
        entries: Vec<Entry>,
    },
}

/// A deliberate bug, for the canaries of the fuzz harness (`canary.rs`). Always `None` in the
/// real protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// The leader replies to a request as soon as it appends it, before a quorum holds it.
    EarlyReply,
    /// The new leader of a view adopts the shortest log offered instead of the longest.
    LossyViewChange,
    /// The new leader of a view keeps the chosen log only up to the highest commit number
    /// offered, and so proposes new requests at op numbers that may already be committed.
    ReusedOp,
    /// Retries of executed requests execute again: the leader proposes them anew and the
    /// executor applies them instead of answering from the client table.
    ReexecutedRetry,
}

impl Protocol for MultiPaxos {
    const NAME: &'static str = "multipaxos";
    const SUMMARY: &'static str = "Multi-Paxos as Viewstamped Replication: one leader per view, batching, snapshots";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = checker::Observation;

    /// Measured on a 2-core host under `redis-benchmark -c 50 -P 16` with a million keys:
    /// - view changes after 3 s (randomised to 1.5–4.5 s): a checkpoint serializes the whole
    ///   state inside the event loop (63 ms for 500,000 keys on an idle core; stalls of up to
    ///   0.7 s with 600,000 keys on the busy host), so a leader is silent that long; with 10 ms
    ///   the cluster made about 55 view changes in 13 s, with 100 ms about 60 in 100 s, and
    ///   with 1 s none in 240 s, but a 10-minute soak stalled for over 10 s at 300 s (near a
    ///   million keys);
    /// - a client retries after 200 ms: with 20 ms, every stall made the gateway resend every
    ///   request in flight to every replica;
    /// - state transfer retries after 50 ms (backed off up to 64 times): with 5 ms, replicas
    ///   waiting for a snapshot of a few hundred thousand keys asked about 250 times a second,
    ///   and each request made the responder serialize and send the whole state;
    /// - checkpoints at most every 131,072 entries rather than 16,384, so that a big state
    ///   (about 35 MB for a million keys) costs a few microseconds per operation, not tens.
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[
            ("view_change_timeout_ns", 3_000_000_000),
            ("client_retry_ns", 200_000_000),
            ("state_transfer_retry_ns", 50_000_000),
            ("checkpoint_interval_max", 131_072),
        ]
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["view_change", "state_transfer"]
    }

    /// The log (or a snapshot and the log after it) is durable before a replica acknowledges it.
    fn state_on_disk() -> bool {
        true
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn client_window(config: &Config) -> usize {
        config.client_window
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(checker::LogAgreement::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        match context.role() {
            Role::Client => Box::new(client::Client::new(context)),
            _ => Box::new(replica::Replica::new(context, durable, Flaw::None)),
        }
    }
}
