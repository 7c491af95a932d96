//! Mencius (Mao, Junqueira, Marzullo, OSDI 2008), the multi-leader baseline of the Chora paper:
//! the log's slots rotate among the replicas (slot `s` belongs to replica `(s − 1) mod N`), each
//! slot is an instance of coordinated Paxos whose round 0 belongs to its owner, and a replica
//! with nothing to propose *skips* its slots. A slot commits with f + 1 per-slot
//! acknowledgements (`Accepted`); execution is in slot order. A replica that stalls on a slot
//! of a silent owner *revokes* the owner's slots: Paxos phase 1 over a range of them at a
//! higher ballot, then no-ops (or the values already accepted) in phase 2.
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Request` / `Reply` | client ↔ any replica | a command and its result |
//! | `Propose` | owner or revoker → replicas | phase 2a |
//! | `Accepted` | replica → proposer | phase 2b, per slot |
//! | `Learn` | proposer → replicas | the chosen values |
//! | `Skip` | owner → replicas | no-ops in the owner's slots of a range |
//! | `Query` | replica → replicas | ask for chosen values it missed |
//! | `Prepare` / `Promise` | revoker ↔ replicas | phase 1 of a revocation |
//! | `StateRequest` / `StateReply` | restarted or lagging replica ↔ replicas | a snapshot |
//!
//! # Invariants
//!
//! Local: executed slots are contiguous; the next own slot is our own and beyond everything
//! we gave up; buffers are bounded. Global (Chora's checker, `chora/checker.rs`): one value
//! per committed slot, one result per executed slot, one value per (slot, ballot).
//!
//! # Status line
//!
//! `executed=120 next_own=124 seen=130 revoking=-`
//!
//! # Durability and recovery
//!
//! A replica persists one record, a bound on every slot it acted on (accepted, promised,
//! proposed, skipped), and acts on a slot only once the durable bound covers it. A restarted
//! replica installs a snapshot executed past its bound before it takes part again
//! (`state_transfer.rs`), so it never acts again on a slot its earlier incarnation acted on.
//!
//! See docs/protocols/mencius.md for the choices made and the safety argument.

pub mod client;
pub mod messages;
pub mod replica;
pub mod state_transfer;

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::{MenciusAckAnyChosen, MenciusRestartFresh};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_recovery;

use crate::chora::checker::{ChoraChecker, Observation};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};

/// Mencius.
pub struct Mencius;

/// Options of Mencius. Defaults suit the simulator's LAN.
/// Time-outs are LAN values; every node runs with them stretched by the topology's slowest
/// round trip (`Config::scaled`), so a WAN needs no option set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Most commands in one proposal (1: batching off, as in the Chora paper's evaluation).
    pub batch_max: usize,
    /// Periodic work: resends, queries for missed values, skips, failure detection.
    pub tick_ns: u64,
    /// A replica stalled this long on another owner's slot revokes that owner (randomised up to
    /// twice as long).
    pub revoke_timeout_ns: u64,
    /// Slots of the owner one revocation covers beyond the highest slot seen.
    pub revoke_ahead: u64,
    /// A client resends an unanswered request (to the next replica) after this long, doubled
    /// after each resend of the same request up to 8 times (`client_pipeline::retry_after`).
    pub client_retry_ns: u64,
    /// Requests a client keeps in flight.
    pub client_window: usize,
    /// Commands a replica buffers.
    pub cmds_max: usize,
    /// Slots beyond the executed one a replica keeps state for.
    pub window_max: u64,
    /// Executed slots' values kept to answer queries and revocations.
    pub log_keep: u64,
    /// Clients remembered for at-most-once execution.
    pub client_table_max: usize,
    /// Slots a replica's durable bound runs ahead of the highest slot it acts on, so that
    /// acting on a slot rarely waits for a write (one write per about half this many slots).
    pub bound_reserve: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            batch_max: 16,
            tick_ns: 1_000_000,
            revoke_timeout_ns: 10_000_000,
            revoke_ahead: 256,
            client_retry_ns: 20_000_000,
            client_window: 1,
            cmds_max: 4096,
            window_max: 100_000,
            log_keep: 50_000,
            client_table_max: 100_000,
            bound_reserve: 1024,
        }
    }
}

impl Config {
    /// Rejects options no node can run with, saying which.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("batch_max", self.batch_max as u64),
            ("tick_ns", self.tick_ns),
            ("revoke_ahead", self.revoke_ahead),
            ("client_retry_ns", self.client_retry_ns),
            ("client_window", self.client_window as u64),
            ("cmds_max", self.cmds_max as u64),
            ("window_max", self.window_max),
            ("log_keep", self.log_keep),
            ("client_table_max", self.client_table_max as u64),
            ("bound_reserve", self.bound_reserve),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("mencius: {name} must be positive"));
        }
        if self.revoke_timeout_ns < 2 * self.tick_ns {
            return Err("mencius: revoke_timeout_ns must be at least two ticks".into());
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's slowest round trip ([`Topology::stretched`]):
    /// on a WAN an owner's proposal or skip takes up to half a round trip to arrive and a
    /// client's request two to commit, so revocations and retries must not fire at LAN speed.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            revoke_timeout_ns: topology.stretched(self.revoke_timeout_ns, 4),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 4),
            ..self.clone()
        }
    }
}

/// Timers of Mencius.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A client's retry sweep.
    ClientRetry,
    /// Periodic replica work.
    Tick,
}

/// What Mencius nodes persist: one record, replaced at every write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durable {
    /// No acceptance, promise, proposal or skip of this replica names a slot above `slot`.
    /// Written before the replica acts on any slot above the previous bound; its presence also
    /// says that the replica ran before (a restart recovers, `state_transfer.rs`).
    Bound {
        /// The bound.
        slot: u64,
    },
}

/// A deliberate bug, for the canaries of the fuzz harness (`canary.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// An acceptor acknowledges a proposal for a slot already chosen whatever its value.
    AckAnyChosen,
    /// A restarted replica ignores its durable bound and takes part at once as a fresh one:
    /// it forgets every promise, acceptance and proposal of its earlier incarnation.
    RestartFresh,
}

impl Protocol for Mencius {
    const NAME: &'static str = "mencius";
    const SUMMARY: &'static str = "Mencius: rotating slot ownership, per-slot acks, skips and revocation";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = Observation;

    fn crash_model() -> CrashModel {
        CrashModel::Recover
    }

    /// Real processes tick every 10 ms and:
    /// - revoke a silent owner after 1-2 s rather than 100-200 ms: a proposal carrying a
    ///   16 MiB value takes a few hundred milliseconds to reach and be checked by the other
    ///   replicas (copies, MACs), and they revoked its owner every time, so such a value was
    ///   proposed again and again (as Nezha's view change after 1 s);
    /// - a client retries after 200 ms rather than 50 ms: each retry goes to the next replica,
    ///   which proposes the request again, so every 16 MiB SET was proposed by all three
    ///   replicas and sent six times (as Multi-Paxos' clients).
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[("tick_ns", 10_000_000), ("revoke_timeout_ns", 1_000_000_000), ("client_retry_ns", 200_000_000)]
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["revocation", "skip", "state_transfer"]
    }

    fn client_window(config: &Config) -> usize {
        config.client_window
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(ChoraChecker::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_node_with(context, durable, Flaw::None)
    }
}

/// Builds a node of the real protocol with `flaw` switched on.
pub(crate) fn new_node_with(
    context: NodeContext<Mencius>,
    durable: Vec<Durable>,
    flaw: Flaw,
) -> Box<dyn Node<Mencius>> {
    let context = NodeContext { config: context.config.scaled(&context.topology), ..context };
    match context.role() {
        Role::Client => Box::new(client::Client::new(context)),
        _ => Box::new(replica::Replica::new(context, durable, flaw)),
    }
}
