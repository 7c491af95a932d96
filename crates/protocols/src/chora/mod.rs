//! Chora (Wan et al., "Building State Machine Replication Using Practical Network Synchrony"):
//! every replica owns a share of the log slots and, in pulsing mode, multicasts exactly one
//! message per round, a *pulse*: the proposal for its next slot plus its cumulative ack. A slot
//! commits once f + 1 replicas ack it, so N proposals commit per round at O(1) messages each.
//!
//! # Glossary
//!
//! - **pulse**: the one multicast of a round (`messages::Pulse`): `propose` with `ack-slot`,
//!   and piggybacked `propose-nack` / `propose-recover` / `skip` / `latest-propose-slot`.
//! - **last-append**: the slot before the first empty slot; **last-ack**: the replica's own
//!   cumulative ack, the prefix it holds *and* has verified in this view (≤ last-append);
//!   **acked**: the highest ack heard from each replica in this view; **last-commit**: the
//!   q-th highest of them (q = f + 1), never below the view's view-base.
//! - **schedule**: who owns which slot in a view (`log::Schedule`): the view-init at view-base,
//!   then the proposers round-robin.
//! - **view-init**: a view's first entry, proposed by its **initiator** (a candidate with f + 1
//!   votes) at view-base = its last-append + 1; committing it commits everything before it.
//! - **modes**: *pulsing* sends at round boundaries, *responsive* after every input; the state
//!   and messages are the same, and each replica may run either (§6.1).
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Request` | client → any replica | a command; that replica replies |
//! | `Forward` | non-proposer → proposer | propose this request for me (§6.7.2) |
//! | `Reply` | replica → client | the result, from the replica the client asked |
//! | `Pulse` | replica → replicas | proposal, cumulative ack, nack/recover/skip |
//! | `ViewChangeRequest` | candidate → replicas | ask for votes, with the log's (view, last-append) |
//! | `ViewChangeReply` | voter → candidate | one vote per view |
//! | `StateRequest` | restarted or lagging replica → replicas | ask for a snapshot (not in the paper) |
//! | `StateReply` | replica → requester | the committed prefix as a snapshot, with the view |
//!
//! # Recovery (not in the paper, which is crash-stop)
//!
//! A replica persists its highest view and a bound on its acks before speaking in the view or
//! acking past the bound; a restarted one installs a snapshot committed past that bound before
//! it acks or votes, and never votes or proposes in a view it may have spoken in
//! (`state_transfer.rs`; the argument is in docs/protocols/chora.md).
//!
//! # Invariants (checked after every input by `check_invariants`)
//!
//! - last-commit ≤ last-ack ≤ last-append; executed = last-commit; views never decrease along
//!   the appended prefix; no proposing (next-propose is `None`) before the view's view-init
//!   commits; at most one pulse per round in pulsing mode; every buffer is bounded.
//!
//! # Global invariants (`checker.rs`, spec §8.3)
//!
//! One value per committed slot and one result per executed slot; one proposal per (slot,
//! view) and only by the slot's owner; one vote per replica per view and one initiator per
//! view; every initiator's log holds every slot committed before it.
//!
//! # Status line
//!
//! `view=2 follower pulsing base=120 ack=340 append=342 commit=338 next=344 proposers=[0,2]`
//!
//! See docs/protocols/chora.md for the choices made where the paper is silent.

pub mod checker;
pub mod client;
pub mod log;
pub mod messages;
pub mod recovery;
pub mod replica;
pub mod state_transfer;
pub mod view_change;

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::ChoraCommitBelowQuorum;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_scenarios;
#[cfg(test)]
mod tests_scenarios_2;

use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};

/// Chora.
pub struct Chora;

/// When a replica sends its pulse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Once per round, at the round timer (§6.2).
    Pulsing,
    /// At once after any input that gives it something to say (§6.4).
    Responsive,
    /// Pulsing while rounds complete in time, responsive while they do not (the switching
    /// rule of docs/protocols/chora.md).
    Adaptive,
}

/// Options of Chora. Defaults suit the simulator's LAN and its CPU model.
/// Time-outs are LAN values; every node runs with them stretched by the topology's slowest
/// round trip (`Config::scaled`), so a WAN needs no option set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Pulsing, responsive or adaptive.
    pub mode: Mode,
    /// Length of a round (pulsing mode).
    pub round_ns: u64,
    /// How many replicas own slots in view 0 (the lowest ranks); 0 means all (§6.7.2).
    pub proposers: usize,
    /// Most commands in one proposal (1: batching off, as in the paper's evaluation).
    pub batch_max: usize,
    /// An idle replica still pulses every this many rounds (its heartbeat).
    pub heartbeat_rounds: u64,
    /// The coordination timer (§6.6): nack gaps and resend own proposals when nothing
    /// committed for this long.
    pub coordination_ns: u64,
    /// No commit for this long while work is pending starts a view change (randomised up to
    /// twice as long, the back-off of §6.5).
    pub view_change_timeout_ns: u64,
    /// A client resends an unanswered request (to the next replica) after this long, doubled
    /// after each resend of the same request up to 8 times (`client_pipeline::retry_after`).
    pub client_retry_ns: u64,
    /// Requests a client keeps in flight.
    pub client_window: usize,
    /// Commands a replica buffers before it proposes them.
    pub cmds_max: usize,
    /// Most entries sent again in one pulse, and most slots one nack names.
    pub recover_max: usize,
    /// Executed slots kept in the log for repairing others before truncation. A replica that
    /// falls further behind the others' commit point than half of this fetches a snapshot.
    pub log_keep: u64,
    /// Slots a replica may ack beyond its last durable ack limit's write: it persists a new
    /// limit this far ahead when half of the reserve is used (see `state_transfer.rs`).
    pub ack_reserve: u64,
    /// Clients remembered for at-most-once execution.
    pub client_table_max: usize,
    /// Adaptive mode: share of rounds (in percent) whose pulses from every proposer arrived
    /// within the round below which a replica leaves pulsing mode, and above which it returns.
    pub switch_threshold_percent: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Pulsing,
            round_ns: 50_000,
            proposers: 0,
            batch_max: 16,
            heartbeat_rounds: 20,
            coordination_ns: 1_000_000,
            view_change_timeout_ns: 10_000_000,
            client_retry_ns: 20_000_000,
            client_window: 1,
            cmds_max: 4096,
            recover_max: 64,
            log_keep: 50_000,
            ack_reserve: 4096,
            client_table_max: 100_000,
            switch_threshold_percent: 50,
        }
    }
}

impl Config {
    /// Rejects options no node can run with, saying which.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("round_ns", self.round_ns),
            ("batch_max", self.batch_max as u64),
            ("heartbeat_rounds", self.heartbeat_rounds),
            ("coordination_ns", self.coordination_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("client_window", self.client_window as u64),
            ("cmds_max", self.cmds_max as u64),
            ("recover_max", self.recover_max as u64),
            ("log_keep", self.log_keep),
            ("ack_reserve", self.ack_reserve),
            ("client_table_max", self.client_table_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("chora: {name} must be positive"));
        }
        if self.view_change_timeout_ns < 2 * self.coordination_ns {
            return Err("chora: view_change_timeout_ns must be at least two coordination periods".into());
        }
        if self.switch_threshold_percent > 100 {
            return Err("chora: switch_threshold_percent is a percentage".into());
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's slowest round trip ([`Topology::stretched`]):
    /// on a WAN a proposal's acknowledgements take a round trip and a client's request two
    /// to commit, so coordination, view changes and retries must not fire at LAN speed.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            coordination_ns: topology.stretched(self.coordination_ns, 2),
            view_change_timeout_ns: topology.stretched(self.view_change_timeout_ns, 4),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 4),
            ..self.clone()
        }
    }
}

/// Timers of Chora.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A client's retry sweep.
    ClientRetry,
    /// The round boundary: send the pulse (pulsing mode).
    Round,
    /// The coordination timer (§6.6).
    Coordination,
    /// Progress check: starts view changes, and retries them with back-off.
    Watchdog,
}

/// What Chora nodes persist: one record, replaced at every write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durable {
    /// The highest view the replica entered (it voted, proposed or acked in no higher one) and
    /// a bound on every ack it sent. A restarted replica neither votes nor proposes in a view
    /// up to `view`, and takes part again only from a snapshot committed at or past
    /// `ack_limit` (docs/protocols/chora.md, "Recovery").
    State {
        /// Highest view entered.
        view: u64,
        /// No ack ever sent names a slot above it.
        ack_limit: u64,
    },
}

/// A deliberate bug, for the canaries of the fuzz harness (`canary.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// Commit at the (q−1)-th highest ack instead of the q-th.
    CommitBelowQuorum,
}

impl Protocol for Chora {
    const NAME: &'static str = "chora";
    const SUMMARY: &'static str = "Chora: every replica proposes once per round, commits by cumulative acks";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = checker::Observation;

    /// The paper is crash-stop (§6.1); ordo adds recovery: a restarted replica rejoins after
    /// state transfer (`state_transfer.rs`).
    fn crash_model() -> CrashModel {
        CrashModel::Recover
    }

    /// Real processes pulse every 200 µs and repair after 10 ms without a commit (backed off,
    /// `recovery::is_due`); they change views after 1 s without a commit rather than 100 ms,
    /// and clients retry after 200 ms rather than 50 ms: a proposal carrying a 16 MiB value
    /// takes a few hundred milliseconds to commit, and with the shorter times every such SET
    /// started view changes and was proposed again until it timed out (issue 20).
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[
            ("round_ns", 200_000),
            ("coordination_ns", 10_000_000),
            ("view_change_timeout_ns", 1_000_000_000),
            ("client_retry_ns", 200_000_000),
        ]
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["view_change", "recover", "skip", "state_transfer"]
    }

    fn client_window(config: &Config) -> usize {
        config.client_window
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(checker::ChoraChecker::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_node_with(context, durable, Flaw::None)
    }
}

/// Builds a node of the real protocol with `flaw` switched on.
pub(crate) fn new_node_with(context: NodeContext<Chora>, durable: Vec<Durable>, flaw: Flaw) -> Box<dyn Node<Chora>> {
    let context = NodeContext { config: context.config.scaled(&context.topology), ..context };
    match context.role() {
        Role::Client => Box::new(client::Client::new(context)),
        _ => Box::new(replica::Replica::new(context, durable, flaw)),
    }
}
