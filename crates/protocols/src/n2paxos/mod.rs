//! N²Paxos, the first baseline of the SwiftPaxos paper (§5, spec §9.2): Multi-Paxos whose
//! followers broadcast their 2B to every replica, so that every replica learns the commit one
//! message delay after the 2A, and the replica closest to a client answers it after execution
//! (three message delays for a client next to a replica, instead of Paxos' four). See
//! `docs/protocols/n2paxos.md`.
//!
//! # Built from SwiftPaxos' nodes
//!
//! N²Paxos is SwiftPaxos without its fast path, so its nodes are SwiftPaxos' nodes in
//! `Variant::N2Paxos` (`crate::swiftpaxos`), driven under this protocol's type by
//! [`Retyped`](crate::canary::Retyped):
//!
//! | N²Paxos | SwiftPaxos node in `Variant::N2Paxos` |
//! |---|---|
//! | 2A: the leader orders the command | the leader's `FastAck`, carrying its dependencies |
//! | 2B to all | every follower's `SlowAck`, multicast to the replicas only |
//! | commit on a majority of 2Bs | commit on the slow quorum (leader + `f` followers) |
//! | the closest replica replies | `Executed` from the replica closest to the client |
//! | leader change | SwiftPaxos' recovery (`NewLeader`, `NewLeaderAck`, `Sync`) with no fast quorum |
//!
//! The order the leader imposes is its dependency graph over conflicting commands, not a
//! total log: commuting commands run in either order at different replicas, which no client
//! can observe. Reusing the nodes keeps one recovery, one executor, one checker and one
//! failure detector for the two protocols; a separate log-based copy would duplicate all four.
//!
//! # Messages, invariants, status line
//!
//! Those of SwiftPaxos (`crate::swiftpaxos`), less `Reply` and the followers' `FastAck`s. The
//! global checker is SwiftPaxos' (`SwiftChecker`): every replica commits a command with the
//! same dependencies (Inv 1), the leader proposes one set per command and ballot (Inv 7), and
//! every execution of a command and every client's result agree.

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::N2PaxosOwnOrder;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random_peers;

use crate::canary::{Retyped, real_context};
use crate::swiftpaxos::checker::{Observation, SwiftChecker};
use crate::swiftpaxos::messages::Message;
use crate::swiftpaxos::{Config, Flaw, SwiftPaxos, Timer, Variant, new_node_with};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// N²Paxos.
pub struct N2Paxos;

/// Builds an N²Paxos node with `flaw` switched on, under protocol type `P`.
pub(crate) fn new_node<P>(context: NodeContext<P>, durable: &[()], flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config, Observation = Observation>,
{
    Retyped::boxed(new_node_with(real_context::<SwiftPaxos, P>(context), durable, Variant::N2Paxos, flaw))
}

impl Protocol for N2Paxos {
    const NAME: &'static str = "n2paxos";
    const SUMMARY: &'static str = "N²Paxos: Paxos whose followers broadcast 2B; the closest replica answers";
    type Message = Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;
    type Observation = Observation;

    /// Crash-stop, as SwiftPaxos (§2): a restarted replica retires.
    fn crash_model() -> CrashModel {
        CrashModel::Stop
    }

    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        SwiftPaxos::runtime_defaults()
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["slow_path", "recovery", "retired"]
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(SwiftChecker::default()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
        new_node(context, &durable, Flaw::None)
    }
}
