//! NOPaxos (Li, Michael, Sharma, Szekeres, Ports, OSDI 2016): replication on ordered unreliable
//! multicast. The network (here a sequencer node) orders requests; replicas only agree on which
//! sequenced requests to skip.
//!
//! # Glossary
//!
//! - **OUM session**: a stream of requests stamped ⟨session, sequence⟩ by one sequencer, the
//!   sequence +1 per request from 1; `oum.rs` turns it into messages, **drop notifications**
//!   (a gap) and **session termination** (a higher session).
//! - **view-id** ⟨leader-num, session-num⟩: partially ordered; the leader is
//!   `replicas[leader-num % n]`; the session is the one the view listens to.
//! - **session-msg-num**: OUM positions consumed in the view's session. In Normal status
//!   `log length − session-msg-num` is constant within a view (the *session base*).
//! - **slot**: position in the log, from 1, the same in every view.
//! - **gap agreement**: a follower missing a request asks a peer follower, then the leader,
//!   for the slot; a leader missing one first asks the others for a copy, then commits a
//!   **NO-OP** with f GAP-COMMIT-REPs before it moves on.
//! - **sync-point**: every slot up to it is committed and the same in every replica's log;
//!   followers execute up to it (only the leader executes beyond).
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Request` | client → sequencer | a request for the group |
//! | `Stamped` | sequencer → replicas | the request with ⟨session, sequence⟩ |
//! | `Reply` | replica → client | view-id, slot; the leader's carries the result |
//! | `SlotLookup` / `SlotContent` / `SlotMissing` | follower ↔ peer, then leader | a follower's drop notification: the entry |
//! | `GapFind` / `GapFound` | leader ↔ followers | a leader's drop notification: a copy, if any |
//! | `GapCommit` / `GapCommitRep` | leader ↔ followers | commit a NO-OP at a slot |
//! | `ViewChangeReq` | replica → replicas | "I moved to this view" |
//! | `ViewChange` | replica → new leader | last normal view, session-msg-num, log |
//! | `StartView` / `StartViewAck` | new leader ↔ replicas | the merged log; acknowledgement (fn 5) |
//! | `SyncPrepare` / `SyncRep` / `SyncCommit` | leader ↔ followers | heartbeat; sync-point |
//! | `Ping` / `Pong` / `SetSession` | controller ↔ sequencers | failure detection, new session |
//! | `Recovery` / `RecoveryResponse` | restarted replica ↔ replicas | VR-style recovery (`recovery.rs`) |
//!
//! Logs in messages are a checkpoint and the entries after it (`log.rs`).
//!
//! # Invariants (checked after every input by `check_invariants`)
//!
//! - executed ≤ log length; a follower executes at most to its sync-point (I14); sync-point ≤
//!   log length; the last normal view is covered by the view, equal in Normal status.
//! - In Normal status `log length − session-msg-num` is the session base of the view (I10),
//!   one less while a follower resolves a drop notification it consumed.
//! - A leader waiting for GAP-COMMIT-REPs holds the NO-OP at the slot and does not consume
//!   the next OUM position (§5.2.2).
//! - Every buffer is bounded (OUM buffer, client table, pending view-change messages), and so
//!   is the log: at most twice the longest checkpoint interval plus those past the sync-point; the
//!   checkpoint lies at or under the sync-point and what was executed.
//! - A recovering replica holds and executes nothing until it installs a leader's state.
//!
//! # Global invariant (`checker.rs`)
//!
//! | observation | reported by | rule |
//! |---|---|---|
//! | `Committed { slot, id }` | a client accepting; a leader whose NO-OP got f replies; sync | one value per slot |
//! | `Executed { slot, id, digest }` | a client accepting; a replica executing under its sync-point | one result |
//!
//! # Status line
//!
//! `view=<1,0> normal leader log=120 smn=118 exec=120 sync=100 gap=-`
//!
//! See docs/protocols/nopaxos.md for the choices made where the paper is silent.

pub mod checker;
pub mod client;
pub mod controller;
pub mod execution;
pub mod gap_agreement;
pub mod log;
pub mod messages;
pub mod oum;
pub mod recovery;
pub mod replica;
pub mod sequencer;
pub mod sync;
pub mod view_change;

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::NoPaxosRequestOverNoOp;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_scripts;

use ordo_core::{CrashModel, FailureBudget, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};

/// NOPaxos.
pub struct NoPaxos;

/// Options of NOPaxos. Defaults suit the simulator's LAN.
/// Time-outs are LAN values; every node runs with them stretched by the topology's slowest
/// round trip (`Config::scaled`), so a WAN needs no option set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Sequencer nodes; the controller moves the group to another one when the active one fails.
    pub sequencers: usize,
    /// Replica tick: the leader's sync-prepare (also its heartbeat) and every resend.
    pub heartbeat_ns: u64,
    /// A follower that hears nothing from its leader this long, or a view change that takes this
    /// long, starts the next view change (randomised ±50%).
    pub view_change_timeout_ns: u64,
    /// How long a leader waits for copies of a dropped request before it commits a NO-OP.
    pub gap_find_timeout_ns: u64,
    /// A client resends its request after this long.
    pub client_retry_ns: u64,
    /// The controller pings sequencers this often...
    pub controller_ping_ns: u64,
    /// ... and replaces the active one after this long without its answer.
    pub sequencer_timeout_ns: u64,
    /// Stamped requests a replica buffers while it cannot consume them.
    pub oum_buffer_max: usize,
    /// Clients remembered for at-most-once execution.
    pub client_table_max: usize,
    /// Log truncation (`log.rs`): once the sync-point is twice the interval past the
    /// checkpoint, the checkpoint moves to one interval below the sync-point. The interval is
    /// at least this many slots...
    pub checkpoint_interval: u64,
    /// ... and at least the last checkpoint's state size in bytes over this: a checkpoint
    /// decodes and serializes the whole state, so a big state costs about this many bytes of
    /// it per slot instead of all of it every `checkpoint_interval` slots (0: no growth)...
    pub checkpoint_bytes_per_op: u64,
    /// ... but at most this many, which bounds the entries held for a huge state.
    pub checkpoint_interval_max: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sequencers: 2,
            heartbeat_ns: 1_000_000,
            view_change_timeout_ns: 10_000_000,
            gap_find_timeout_ns: 1_000_000,
            client_retry_ns: 10_000_000,
            controller_ping_ns: 2_000_000,
            sequencer_timeout_ns: 10_000_000,
            oum_buffer_max: 4096,
            client_table_max: 100_000,
            checkpoint_interval: 4096,
            checkpoint_bytes_per_op: 64,
            checkpoint_interval_max: 16_384,
        }
    }
}

impl Config {
    /// Slots between two checkpoints for a state whose last checkpoint is `state_bytes` long.
    pub fn checkpoint_every(&self, state_bytes: usize) -> u64 {
        let (least, most) = (self.checkpoint_interval, self.checkpoint_interval_max);
        ordo_core::snapshot_interval(state_bytes as u64, self.checkpoint_bytes_per_op, least, most)
    }

    /// The longest interval [`Config::checkpoint_every`] gives, whatever the state's size.
    pub fn checkpoint_every_max(&self) -> u64 {
        self.checkpoint_interval.max(self.checkpoint_interval_max)
    }

    /// Rejects options no node can run with, saying which.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("sequencers", self.sequencers as u64),
            ("heartbeat_ns", self.heartbeat_ns),
            ("gap_find_timeout_ns", self.gap_find_timeout_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("controller_ping_ns", self.controller_ping_ns),
            ("oum_buffer_max", self.oum_buffer_max as u64),
            ("client_table_max", self.client_table_max as u64),
            ("checkpoint_interval", self.checkpoint_interval),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("nopaxos: {name} must be positive"));
        }
        if self.view_change_timeout_ns < 2 * self.heartbeat_ns {
            return Err("nopaxos: view_change_timeout_ns must be at least two heartbeats".into());
        }
        if self.sequencer_timeout_ns < 2 * self.controller_ping_ns {
            return Err("nopaxos: sequencer_timeout_ns must be at least two controller pings".into());
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's slowest round trip ([`Topology::stretched`]):
    /// on a WAN a leader's heartbeat takes up to half a round trip, a request two to commit,
    /// a gap's copies one, and the controller's ping of a sequencer one.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            view_change_timeout_ns: topology.stretched(self.view_change_timeout_ns, 3),
            gap_find_timeout_ns: topology.stretched(self.gap_find_timeout_ns, 1),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 4),
            sequencer_timeout_ns: topology.stretched_for_clients(self.sequencer_timeout_ns, 3),
            ..self.clone()
        }
    }
}

/// Timers of NOPaxos.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A client's request went unanswered.
    ClientRetry,
    /// Periodic replica work (see `Config::heartbeat_ns`).
    Tick,
    /// Periodic controller work: pings and failover.
    ControllerTick,
}

/// What NOPaxos nodes persist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durable {
    /// A replica has run (its `incarnation`-th start): on restart it recovers from its peers
    /// (§5.2.5) with the next incarnation as its nonce.
    Launched {
        /// Starts before this one.
        incarnation: u64,
    },
    /// The controller issued `session` (written before it is announced).
    Issued {
        /// The session.
        session: u64,
    },
}

/// A deliberate bug, for the canaries of the fuzz harness (`canary.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// The view-change merge prefers a REQUEST over a NO-OP.
    RequestOverNoOp,
}

impl Protocol for NoPaxos {
    const NAME: &'static str = "nopaxos";
    const SUMMARY: &'static str = "NOPaxos: a sequencer orders requests (OUM), replicas agree only on drops";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = checker::Observation;

    /// The sequencers, then the controller.
    fn extra_roles(_replicas_per_shard: usize, config: &Config) -> Vec<Role> {
        let mut roles = vec![Role::Sequencer; config.sequencers];
        roles.push(Role::Controller);
        roles
    }

    /// A restarted replica rejoins through VR-style recovery (§5.2.5, `recovery.rs`); until it
    /// has, it reports `is_recovering` and counts as failed.
    fn crash_model() -> CrashModel {
        CrashModel::Recover
    }

    /// Sequencers hold no state the protocol relies on (a new session replaces a failed one):
    /// any number may fail. The single controller persists every session before announcing it,
    /// so it may crash at any point; while it is down a failed sequencer is not replaced.
    fn failure_budget(role: Role) -> FailureBudget {
        match role {
            Role::Sequencer => FailureBudget::Any,
            Role::Controller => FailureBudget::AtMost(1),
            _ => FailureBudget::Never,
        }
    }

    /// Real processes change views after 1 s without progress rather than 100 ms, and clients
    /// retry after 200 ms rather than 50 ms: a request carrying a 16 MiB value takes a few
    /// hundred milliseconds to be copied and checked at each hop, and with the shorter times
    /// every such SET started view changes and was sent again until it timed out (issue 20).
    /// Checkpoints of a big state are up to 65,536 slots apart, not 16,384: a checkpoint
    /// serializes the whole state, which with a million keys is tens of megabytes.
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[
            ("view_change_timeout_ns", 1_000_000_000),
            ("sequencer_timeout_ns", 100_000_000),
            ("client_retry_ns", 200_000_000),
            ("checkpoint_interval_max", 65_536),
        ]
    }

    /// Gap agreement is served ahead of a replica's queued requests: while a replica resolves
    /// a drop it holds its replies, and at saturation a lookup or search that waited behind
    /// the answerer's backlog of `Stamped` requests left the leader idle (docs/protocols/nopaxos.md).
    fn is_urgent(message: &messages::Message) -> bool {
        matches!(
            message,
            messages::Message::SlotLookup { .. }
                | messages::Message::SlotContent { .. }
                | messages::Message::SlotMissing { .. }
                | messages::Message::GapFind { .. }
                | messages::Message::GapFound { .. }
                | messages::Message::GapCommit { .. }
                | messages::Message::GapCommitRep { .. }
        )
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["gap_no_op", "gap_filled", "view_change", "session_change"]
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(checker::SlotAgreement::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_node_with(context, durable, Flaw::None)
    }
}

/// Builds a node of the real protocol with `flaw` switched on.
pub(crate) fn new_node_with(
    context: NodeContext<NoPaxos>,
    durable: Vec<Durable>,
    flaw: Flaw,
) -> Box<dyn Node<NoPaxos>> {
    let context = NodeContext { config: context.config.scaled(&context.topology), ..context };
    match context.role() {
        Role::Client => Box::new(client::Client::new(context)),
        Role::Sequencer => Box::new(sequencer::Sequencer::new(context)),
        Role::Controller => Box::new(controller::Controller::new(context, durable)),
        _ => Box::new(replica::Replica::new(context, durable, flaw)),
    }
}
