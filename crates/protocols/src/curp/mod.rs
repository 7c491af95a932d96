//! CURP+, the second baseline of the SwiftPaxos paper (App. B, Figs 14–15; spec §9.7): CURP's
//! 2f+1 variant on top of N²Paxos. Followers are also CURP witnesses: each records a command
//! unless a conflicting one is unsynced there, and tells the client (`RecordAck`). The leader
//! orders every command (N²Paxos' 2A, 2Bs to all) and, when every conflicting command before
//! it is committed, replies at once with the result of an optimistic execution. The client
//! takes that reply with record acks making more than 3N/4 replicas (one round trip), and
//! otherwise the result from the replica closest to it after execution. See
//! `docs/protocols/curp.md`.
//!
//! # Built from SwiftPaxos' nodes
//!
//! As N²Paxos (`crate::n2paxos`), CURP+ runs SwiftPaxos' nodes, here in `Variant::Curp`,
//! under this protocol's type through [`Retyped`](crate::canary::Retyped):
//!
//! | CURP+ (Figs 14–15) | SwiftPaxos node in `Variant::Curp` |
//! |---|---|
//! | `Record` | `Propagate` to every replica |
//! | `RecordAck` (L23) | `RecordAck { ballot, id }`, witness → client, when no conflicting command is in the witness (`Replica::witness`) |
//! | `Accept` / `AcceptAck` (L17, L27) | the leader's `FastAck` / each follower's `SlowAck` to every replica |
//! | `Reply` (L14–L16) | the leader's `Reply` when every dependency is committed, result from `opt_exec` |
//! | `SyncReply` (L36–L37) | `Executed` from the replica closest to the client |
//! | recovery (omitted by the paper) | SwiftPaxos' recovery plus CURP's rule (`recover_witnessed`) |
//!
//! CURP's rule: a command recorded by ⌈f/2⌉ + 1 replicas of the majority that answered the new
//! leader is kept, after every conflicting command kept that does not follow it.
//!
//! # Invariants
//!
//! SwiftPaxos' checker (`SwiftChecker`): Inv 1 (one set of dependencies per committed command
//! at every replica), Inv 7, and Nontriviality, which here is the fast path's safety: the result
//! a client took from the leader's reply equals every execution of the command. Per node: a
//! witness holds no two conflicting commands (`check_invariants` of the replica).

#[cfg(feature = "canary")]
pub mod canary;
#[cfg(feature = "canary")]
pub use canary::CurpBlindWitness;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_random_peers;

use crate::canary::{Retyped, real_context};
use crate::swiftpaxos::checker::{Observation, SwiftChecker};
use crate::swiftpaxos::messages::Message;
use crate::swiftpaxos::{Config, Flaw, SwiftPaxos, Timer, Variant, new_node_with};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// CURP+.
pub struct Curp;

/// Builds a CURP+ node with `flaw` switched on, under protocol type `P`.
pub(crate) fn new_node<P>(context: NodeContext<P>, durable: &[()], flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config, Observation = Observation>,
{
    Retyped::boxed(new_node_with(real_context::<SwiftPaxos, P>(context), durable, Variant::Curp, flaw))
}

impl Protocol for Curp {
    const NAME: &'static str = "curp";
    const SUMMARY: &'static str = "CURP+: N²Paxos with CURP witnesses; 1-RTT fast path with > 3N/4 records";
    type Message = Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;
    type Observation = Observation;

    fn has_fast_path() -> bool {
        true
    }

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
