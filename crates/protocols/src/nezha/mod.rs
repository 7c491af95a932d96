//! Nezha (Geng, Sivaraman, Prabhakar, Rosenblum, NSDI 2023): consensus on synchronised clocks.
//!
//! # Glossary
//!
//! - **DOM** (deadline-ordered multicast): a sender (proxy, or client without proxy) stamps each
//!   request with its send time `s` and latency bound `l`; each replica holds it in its
//!   **early-buffer** until its clock passes the **deadline** `s + l`, then appends it to its log.
//!   A request whose deadline is not above the last released conflicting one goes to the
//!   **late-buffer** instead (the leader raises its deadline instead).
//! - **OWD estimate**: per sender, a percentile (median) of recent `receive − send` samples plus
//!   β·(σS + σR), clamped to D; piggy-backed on replies; the sender's `l` is the largest.
//! - **view**: leader is `replicas[view % n]`. **status**: normal, view-change or recovering.
//! - **synced / unsynced**: a follower's log is a prefix agreed with the leader (up to its
//!   **sync-point**) followed by entries it released itself, not yet confirmed.
//! - **fast-reply**: sent by every replica on append, with a hash of the conflicting writes before
//!   it (per key bucket, or the whole log without commutativity) and of the crash-vector; the
//!   leader's carries the result. **slow-reply**: a follower's "synced up to this request".
//! - **commit point**: positions synced at f + 1 replicas (leader included); followers execute up
//!   to it and every replica folds executed positions into a **checkpoint** to truncate its log.
//! - **crash-vector**: one counter per replica, raised by a replica each time it rejoins; a
//!   message whose sender's counter is below what the receiver knows is stray and ignored.
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `ClientRequest` | client → proxy | execute a command |
//! | `ClientReply` | proxy → client | the committed result |
//! | `Requests` | proxy (or client) → replicas | DOM multicast of a batch with one send time and bound |
//! | `FastReplies` | replica → proxy | appended (batched per sender); hash; result (leader); OWD estimate |
//! | `SlowReply` | follower → proxy | synced with the leader up to this request |
//! | `Sync` | leader → followers | positions (ids, deadline differences; bodies on resend), commit point, crash-vector, `cv_since`; heartbeat |
//! | `SyncAck` | follower → leader | sync-point (and "I lack the next body or announced positions") |
//! | `ViewChangeRequest` | replica → replicas | "I moved to view v" |
//! | `ViewChange` | replica → new leader | its log, sync-point, last normal view |
//! | `StartView` | new leader → replicas | the merged log of the new view |
//! | `RecoveryRequest` / `RecoveryReply` | rejoining replica ↔ replicas | crash-vectors and views |
//! | `StateTransferRequest` / `StateTransferReply` | rejoining (or lagging) replica ↔ leader | the leader's log |
//!
//! # Invariants (checked after every input by `check_invariants`)
//!
//! - Checkpoint position ≤ executed ≤ sync-point; executed ≤ commit point on followers; a
//!   leader's whole log is synced and executed; every queue and map is within its limit.
//! - A replica's synced hashes are its conflict table's without the unsynced entries: those
//!   of its synced log, from which a follower computes the leader's fast-reply hashes.
//! - Within every log, entries that conflict are in strictly increasing deadline order: the
//!   entry check compares with the highest released conflicting deadline, never with the clock.
//! - Safety (argued in `view_change.rs`): a committed request is on the leader and either on a
//!   super quorum with the same hash, or under f + 1 sync-points; any f + 1 logs of the latest
//!   normal view therefore keep it at the same place.
//!
//! # Global invariant (checked across replicas in simulation, `checker.rs`)
//!
//! | observation | reported by a replica when | the checker's rule (any replicas, views, incarnations) |
//! |---|---|---|
//! | `Committed { position, id }` | its commit point passes a synced position (or it adopts a log) | one request per position |
//!
//! Positions are absolute (checkpoints keep the numbering), so the rule holds across view
//! changes, state transfers and rejoins. A synced position is not reported before the commit
//! point covers it: a view change may rebuild positions synced only at a minority. The checker
//! (`PositionAgreement`) remembers the newest 2^19 positions; the real runtime drops
//! observations, which carry ids only.
//!
//! # Status line
//!
//! `view=2 normal leader log=1200 sync=1200 commit=1198 exec=1200 base=1024 unsynced=0 early=3 late=0 bound=56000`
//!
//! See docs/protocols/nezha.md for the choices made where the paper is silent.

pub mod checker;
pub mod client;
pub mod clients;
pub mod dom;
pub mod durable;
pub mod hashes;
pub mod leader_quorum;
pub mod messages;
pub mod proxy;
pub mod quorum;
pub mod recovery;
pub mod replica;
pub mod sync;
pub mod view_change;

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::{NezhaMajorityFastQuorum, NezhaVolatileLog};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ablations;
#[cfg(test)]
mod tests_checker;
#[cfg(test)]
mod tests_durable;
#[cfg(test)]
mod tests_proxy;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_scripts;

use ordo_core::{FailureBudget, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Nezha.
pub struct Nezha;

/// Options of Nezha. Defaults follow the paper's evaluation (App. D) on a LAN.
/// Time-outs are LAN values; every node runs with them stretched by the topology's slowest
/// round trip (`Config::scaled`), so a WAN needs no option set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Proxies in the cluster; 0 makes every client its own DOM sender (Non-Proxy mode).
    pub proxies: usize,
    /// The commutativity optimisation (§5.3); off, every request conflicts with every other.
    pub commutativity: bool,
    /// Percentile of the OWD window used as `M` (the paper's median is 50).
    pub owd_percentile: u8,
    /// Samples per sender in the OWD window (the paper: 1000).
    pub owd_window: usize,
    /// β (the paper: 3).
    pub owd_beta: u64,
    /// D: the largest OWD estimate (the paper: 200 µs).
    pub owd_max_ns: u64,
    /// The sender's estimate for every replica before the first reply.
    pub initial_owd_ns: u64,
    /// The leader appends at once, with its deadline lowered, a request whose deadline is
    /// further past its clock than this and than the request's latency bound (App. D.2.4: only
    /// a clock fault makes a request arrive before it was sent); 0 turns it off.
    pub leader_release_ahead_ns: u64,
    /// Leader heartbeat and sync retransmission period; replicas' tick.
    pub heartbeat_ns: u64,
    /// A follower that hears nothing from its leader this long starts a view change (±50%).
    pub view_change_timeout_ns: u64,
    /// A client resends its request (through the next proxy) after this long, doubled after each
    /// resend of the same request up to 8 times (`client_pipeline::retry_after`).
    pub client_retry_ns: u64,
    /// A sender forgets a request nobody resent for this long.
    pub proxy_forget_ns: u64,
    /// Requests a sender counts replies for at once.
    pub proxy_inflight_max: usize,
    /// Followers reply to the leader, which checks quorums and tells the sender what committed
    /// (the paper's No-QC-Offloading ablation, §7.5); off, the sender checks them.
    pub quorum_check_at_leader: bool,
    /// Most requests a proxy puts in one DOM multicast.
    pub proxy_batch_max: usize,
    /// A busy proxy multicasts at most once per this window; requests arriving within it wait
    /// for its end and go together (0: each request at once).
    pub proxy_batch_window_ns: u64,
    /// A proxy is busy, and batches, while more requests than this are in flight through it.
    pub proxy_batch_above: usize,
    /// Past the window, a busy proxy's batch waits until it holds 1/this of the requests in
    /// flight through the proxy (at most 10 windows; 0: never), so batches grow when it queues.
    pub proxy_batches_per_round_trip: usize,
    /// Requests an early-buffer holds; more are dropped (the client retries).
    pub early_buffer_max: usize,
    /// Requests a late-buffer holds; the oldest is evicted (it can be fetched again).
    pub late_buffer_max: usize,
    /// Unsynced entries a follower holds; beyond it, releases wait in the late-buffer.
    pub unsynced_max: usize,
    /// Most positions in one `Sync`.
    pub sync_batch_max: usize,
    /// The leader announces new positions once this many wait (sync batching, §5)...
    pub sync_batch_min: usize,
    /// ... or this long after the first of them was appended...
    pub sync_delay_ns: u64,
    /// ... extended to this long when, by then, at least `sync_fast_path_min` positions wait and
    /// every one of them is expected to commit on the fast path, where no client waits for its
    /// sync: under load, batches grow (fewer syncs per follower)...
    pub sync_delay_fast_path_ns: u64,
    /// ... but not under light load, where a sync costs the leader little and a follower whose
    /// fast-reply did not match (which the leader cannot see) has its client wait for the sync.
    pub sync_fast_path_min: usize,
    /// A follower acknowledges syncs once its sync-point has moved this many positions (and
    /// every heartbeat, resend and missing body): fewer messages for the leader per follower.
    /// The heartbeat's acknowledgement moves the commit point every tick anyway.
    pub sync_ack_every: u64,
    /// Executed positions folded into a checkpoint each time, at least...
    pub checkpoint_interval: u64,
    /// ... and at least the last checkpoint's state size in bytes over this: a checkpoint
    /// serializes the whole state, so a big state is serialized about this many bytes per
    /// executed position instead of once every `checkpoint_interval` positions (0: no floor)...
    pub checkpoint_bytes_per_position: u64,
    /// ... but at most this many, which bounds the positions held in memory for a huge state.
    pub checkpoint_interval_max: u64,
    /// Clients remembered for at-most-once execution.
    pub client_table_max: usize,
    /// Durable mode (not in the paper, which is diskless): a replica persists its log, view
    /// and crash-vector before anything it sends leaves (group commit), and a restarted one
    /// resumes from its files instead of rejoining from its peers, so the whole cluster may
    /// stop at once, a power cut, and lose no acknowledged write (`durable.rs`).
    pub durable: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            proxies: 3,
            commutativity: true,
            owd_percentile: 50,
            owd_window: 1000,
            owd_beta: 3,
            owd_max_ns: 200_000,
            initial_owd_ns: 80_000,
            leader_release_ahead_ns: 50_000,
            heartbeat_ns: 1_000_000,
            view_change_timeout_ns: 10_000_000,
            client_retry_ns: 10_000_000,
            proxy_forget_ns: 200_000_000,
            proxy_inflight_max: 100_000,
            quorum_check_at_leader: false,
            proxy_batch_max: 64,
            proxy_batch_window_ns: 100_000,
            proxy_batch_above: 6,
            proxy_batches_per_round_trip: 4,
            early_buffer_max: 100_000,
            late_buffer_max: 10_000,
            unsynced_max: 10_000,
            sync_batch_max: 1024,
            sync_batch_min: 1024,
            sync_delay_ns: 100_000,
            sync_delay_fast_path_ns: 300_000,
            sync_fast_path_min: 64,
            sync_ack_every: 4096,
            checkpoint_interval: 1024,
            checkpoint_bytes_per_position: 64,
            checkpoint_interval_max: 16_384,
            client_table_max: 100_000,
            durable: false,
        }
    }
}

impl Config {
    /// Rejects options no node can run with, saying which.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("owd_window", self.owd_window as u64),
            ("owd_max_ns", self.owd_max_ns),
            ("heartbeat_ns", self.heartbeat_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("proxy_forget_ns", self.proxy_forget_ns),
            ("proxy_inflight_max", self.proxy_inflight_max as u64),
            ("proxy_batch_max", self.proxy_batch_max as u64),
            ("early_buffer_max", self.early_buffer_max as u64),
            ("late_buffer_max", self.late_buffer_max as u64),
            ("unsynced_max", self.unsynced_max as u64),
            ("sync_batch_max", self.sync_batch_max as u64),
            ("sync_batch_min", self.sync_batch_min as u64),
            ("sync_ack_every", self.sync_ack_every),
            ("checkpoint_interval", self.checkpoint_interval),
            ("client_table_max", self.client_table_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("nezha: {name} must be positive"));
        }
        if self.owd_percentile > 100 {
            return Err("nezha: owd_percentile must be at most 100".into());
        }
        if self.view_change_timeout_ns < 2 * self.heartbeat_ns {
            return Err("nezha: view_change_timeout_ns must be at least two heartbeats".into());
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's slowest round trip ([`Topology::stretched`]):
    /// on a WAN a leader's heartbeat takes up to half a round trip, a request two to commit,
    /// and D, the largest OWD estimate (the paper's 200 µs, a LAN value), must cover the
    /// slowest one-way delay or every deadline is missed.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            owd_max_ns: topology.stretched_for_clients(self.owd_max_ns, 1),
            view_change_timeout_ns: topology.stretched(self.view_change_timeout_ns, 3),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 4),
            proxy_forget_ns: topology.stretched_for_clients(self.proxy_forget_ns, 8),
            ..self.clone()
        }
    }
}

/// Timers of Nezha.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// The early-buffer's earliest deadline has come (set at a local clock reading).
    Release,
    /// Periodic replica work: heartbeat and sync retransmission (leader), leader-failure
    /// detection (followers), resends during view change and recovery.
    Tick,
    /// The leader announces the positions appended since its last sync.
    Announce,
    /// Periodic sender work: forget requests nobody resends.
    ProxyTick,
    /// A sender's batch window closed: multicast the requests waiting.
    ProxyFlush,
    /// A client's request went unanswered.
    ClientRetry,
}

/// What a replica persists. As in the paper (§6), only that it has launched, so that a restart
/// is told from a first boot and rejoins through recovery instead of acting on state it lost.
/// In durable mode (`Config::durable`), its log and view instead, record by record, so that it
/// resumes from them (`durable.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durable {
    /// The replica of this rank has run before (diskless mode).
    Launched {
        /// Its rank.
        rank: usize,
    },
    /// Durable mode: the whole log and view, replacing every earlier record. Written at the
    /// first boot, when a checkpoint is folded in, and when a view change or state transfer
    /// replaces the log.
    Image(Arc<durable::Image>),
    /// Durable mode: the view, last normal view, status or crash-vector changed.
    View(durable::ViewRecord),
    /// Durable mode: entries synced at positions `first ..`, after those already recorded.
    Synced {
        /// The position of the first.
        first: u64,
        /// The entries, in log order.
        entries: Vec<messages::Entry>,
    },
    /// Durable mode: entries that left the unsynced log, then entries released into it (each
    /// with the hash its fast-reply carried).
    Unsynced {
        /// Requests no longer unsynced (synced, or back in the late-buffer).
        removed: Vec<ordo_core::RequestId>,
        /// Entries released, with their fast-reply hash.
        added: Vec<(messages::Entry, u64)>,
    },
}

/// A deliberate bug, for the canary of the fuzz harness (`canary.rs`). Always `None` in the
/// real protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// Senders fast-commit with a simple majority of matching hashes (§5.2's counter-example).
    MajorityFastQuorum,
    /// Durable mode whose replicas write their first image and nothing after it, yet resume
    /// from their records as if they held the log: a power cut makes every one amnesic.
    VolatileLog,
}

impl Protocol for Nezha {
    const NAME: &'static str = "nezha";
    const SUMMARY: &'static str =
        "Nezha: deadline-ordered multicast on synchronised clocks, fast and slow paths, proxies";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = checker::Observation;

    fn extra_roles(_replicas_per_shard: usize, config: &Config) -> Vec<Role> {
        vec![Role::Proxy; config.proxies]
    }

    /// Proxies are stateless (§3): any number may crash at once; clients retry through others
    /// or wait for a restart.
    fn failure_budget(role: Role) -> FailureBudget {
        match role {
            Role::Proxy => FailureBudget::Any,
            _ => FailureBudget::Never,
        }
    }

    fn has_fast_path() -> bool {
        true
    }

    /// In durable mode only: diskless replicas rebuild their state from f + 1 live peers.
    fn state_on_disk_with(config: &Config) -> bool {
        config.durable
    }

    /// Measured on a 2-core host under `redis-benchmark -c 50 -P 16`:
    /// - view changes after 1 s: over 100,000 keys, 10 ms made about 22 view changes in 11 s,
    ///   with seconds-long stalls (26k SET/s; 32.5k and none with 100 ms); over a million keys,
    ///   100 ms made 5 view changes and 33 state transfers in the first minute, with replicas
    ///   at 0.7–0.95 GB: a checkpoint serializes the whole state inside the event loop, and a
    ///   leader is silent meanwhile;
    /// - checkpoints at most every 131,072 positions rather than 16,384, so that a big state
    ///   (tens of megabytes for a million keys) costs a few microseconds per operation.
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[("view_change_timeout_ns", 1_000_000_000), ("checkpoint_interval_max", 131_072)]
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["view_change", "state_transfer", "rejoin", "late_buffer", "leader_raised_deadline"]
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(checker::PositionAgreement::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_node_with(context, durable, Flaw::None)
    }
}

/// Builds a node of the real protocol with `flaw` switched on.
pub(crate) fn new_node_with(context: NodeContext<Nezha>, durable: Vec<Durable>, flaw: Flaw) -> Box<dyn Node<Nezha>> {
    let mut config = context.config.scaled(&context.topology);
    config.durable |= flaw == Flaw::VolatileLog;
    let context = NodeContext { config, ..context };
    match context.role() {
        Role::Client => Box::new(client::Client::new(context, flaw)),
        Role::Proxy => Box::new(proxy::Proxy::new(context, flaw)),
        _ => Box::new(replica::Replica::new(context, durable, flaw)),
    }
}
