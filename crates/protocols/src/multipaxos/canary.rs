//! Deliberately broken variants of Multi-Paxos: negative controls for the fuzz harness, which
//! must catch them. Each is a protocol of its own that runs the real replica with one flaw
//! switched on (`Flaw`), behind a thin wrapper that forwards effects between the two protocols'
//! outboxes (their message, timer and durable types are the same).
//!
//! - `MultiPaxosEarlyReply`: the leader replies as soon as it appends a request, from a state
//!   machine run ahead of the quorum. A leader crash before the quorum holds the entry loses a
//!   write the client saw acknowledged.
//! - `MultiPaxosLossyViewChange`: the new leader adopts the shortest log offered. An entry
//!   committed by a majority that did not tell the new leader is dropped.
//! - `MultiPaxosReusedOp`: the new leader keeps the chosen log only up to the highest commit
//!   number offered and proposes new requests from there, reusing op numbers the old leader may
//!   have committed (a majority acknowledged them; the leader crashed before its next `Commit`).
//!   Two replicas then report different requests committed at one op: the global checker
//!   (`checker.rs`) catches it at the step the second one commits, before any client reads.
//!
//! - `MultiPaxosReexecutedRetry`: a retry of an executed request is proposed and applied again
//!   instead of being answered from the client table. A retried append lands twice; the
//!   pipelining campaign (`crates/sim/tests/pipelining.rs`), where retries of requests still in
//!   a client's window are common, catches it.
//!
//! All share the real protocol's observations (the wrapper forwards them); only the reused-op
//! canary runs the global checker, so that the other two stay negative controls of the
//! end-of-run checks (linearizability, replica agreement).

use super::checker::{LogAgreement, Observation};
use super::client::Client;
use super::replica::Replica;
use super::{Config, Durable, Flaw, MultiPaxos, Timer, messages::Message};
use crate::canary::{Retyped, real_context};
use ordo_core::{GlobalChecker, Node, NodeContext, Protocol, Role};

/// Multi-Paxos whose leader replies before a quorum holds the request (broken on purpose).
pub struct MultiPaxosEarlyReply;

/// Multi-Paxos whose view change adopts the shortest log (broken on purpose).
pub struct MultiPaxosLossyViewChange;

/// Multi-Paxos whose new leader proposes at op numbers that may be committed (broken on purpose).
pub struct MultiPaxosReusedOp;

/// Multi-Paxos that executes retried requests again (broken on purpose).
pub struct MultiPaxosReexecutedRetry;

fn new_flawed<P>(context: NodeContext<P>, durable: Vec<Durable>, flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = Durable, Config = Config, Observation = Observation>,
{
    let role = context.role();
    let context = real_context::<MultiPaxos, P>(context);
    let inner: Box<dyn Node<MultiPaxos>> = match role {
        Role::Client => Box::new(Client::new(context)),
        _ => Box::new(Replica::new(context, durable, flaw)),
    };
    Retyped::boxed(inner)
}

/// The `Protocol` impl of a canary: the real protocol's types and options with one flaw on, and
/// the global checker when asked for.
macro_rules! flawed_protocol {
    ($canary:ty, $name:literal, $summary:literal, $flaw:expr, checker: $checker:literal) => {
        impl Protocol for $canary {
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;
            type Message = Message;
            type Timer = Timer;
            type Durable = Durable;
            type Config = Config;
            type Observation = Observation;

            fn validate_config(config: &Config) -> Result<(), String> {
                config.validate()
            }

            fn client_window(config: &Config) -> usize {
                config.client_window
            }

            fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
                $checker.then(|| Box::new(LogAgreement::new()) as Box<dyn GlobalChecker<Self>>)
            }

            fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
                new_flawed(context, durable, $flaw)
            }
        }
    };
}

flawed_protocol!(
    MultiPaxosEarlyReply,
    "multipaxos-canary-early-reply",
    "BROKEN on purpose: Multi-Paxos whose leader replies before a quorum",
    Flaw::EarlyReply,
    checker: false
);
flawed_protocol!(
    MultiPaxosLossyViewChange,
    "multipaxos-canary-lossy-view-change",
    "BROKEN on purpose: Multi-Paxos whose view change keeps the shortest log",
    Flaw::LossyViewChange,
    checker: false
);
flawed_protocol!(
    MultiPaxosReusedOp,
    "multipaxos-canary-reused-op",
    "BROKEN on purpose: Multi-Paxos whose new leader reuses op numbers above the commit",
    Flaw::ReusedOp,
    checker: true
);
flawed_protocol!(
    MultiPaxosReexecutedRetry,
    "multipaxos-canary-reexecuted-retry",
    "BROKEN on purpose: Multi-Paxos that executes a retried request again",
    Flaw::ReexecutedRetry,
    checker: false
);
