//! Deliberately broken variants of SwiftPaxos: negative controls for the fuzz harness and the
//! checker. Each runs the real nodes with one flaw switched on (`Flaw`).
//!
//! - `SwiftPaxosDirectDeps`: the client takes the leader's optimistic result on matching
//!   *direct* dependencies without comparing paths (spec scenario 6, Fig 2). It breaks only when
//!   a follower lacks a transitive dependency the leader has and the leader then fails, so the
//!   campaign rarely meets it; `tests.rs` replays Fig 2 and shows the checker catching it.
//! - `SwiftPaxosSingleVote`: a fast-quorum follower that disagrees with the leader keeps its own
//!   dependencies while sending the SlowAck that claims it adopted the leader's (no double
//!   vote): under contention replicas commit one command with different dependencies (Inv 1).
//! - `SwiftPaxosStaleRead`: SwiftPaxos^reads (forced on) whose reader answers a read from its
//!   executed state alone, ignoring the unexecuted writes below it: a client takes a value the
//!   read's execution does not return (Nontriviality, and the history is not linearizable).

use super::checker::{Observation, SwiftChecker};
use super::messages::Message;
use super::{Config, Flaw, SwiftPaxos, Timer, Variant, new_node_with};
use crate::canary::{Retyped, real_context};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, NodeId, Protocol};

/// SwiftPaxos whose client skips the path comparison (broken on purpose).
pub struct SwiftPaxosDirectDeps;

/// SwiftPaxos whose followers do not vote twice (broken on purpose).
pub struct SwiftPaxosSingleVote;

/// SwiftPaxos^reads whose reader ignores unexecuted writes (broken on purpose).
pub struct SwiftPaxosStaleRead;

/// The real checker, under a canary's type.
struct Checker(SwiftChecker);

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for Checker {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        GlobalChecker::<SwiftPaxos>::observe(&mut self.0, node, observation)
    }
}

fn flawed<P>(context: NodeContext<P>, durable: &[()], flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config, Observation = Observation>,
{
    let mut context = real_context::<SwiftPaxos, P>(context);
    if flaw == Flaw::StaleRead {
        context.config.reads = true;
    }
    Retyped::boxed(new_node_with(context, durable, Variant::Swift, flaw))
}

macro_rules! canary {
    ($type:ty, $name:expr, $summary:expr, $flaw:expr) => {
        impl Protocol for $type {
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;
            type Message = Message;
            type Timer = Timer;
            type Durable = ();
            type Config = Config;
            type Observation = Observation;

            fn has_fast_path() -> bool {
                true
            }

            fn crash_model() -> CrashModel {
                CrashModel::Stop
            }

            fn validate_config(config: &Config) -> Result<(), String> {
                config.validate()
            }

            fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
                Some(Box::new(Checker(SwiftChecker::default())))
            }

            fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
                flawed(context, &durable, $flaw)
            }
        }
    };
}

canary!(
    SwiftPaxosDirectDeps,
    "swiftpaxos-canary-direct-deps",
    "BROKEN on purpose: SwiftPaxos whose client compares direct dependencies, not paths",
    Flaw::DirectDeps
);
canary!(
    SwiftPaxosSingleVote,
    "swiftpaxos-canary-single-vote",
    "BROKEN on purpose: SwiftPaxos whose followers keep their own vote (no double vote)",
    Flaw::SingleVote
);
canary!(
    SwiftPaxosStaleRead,
    "swiftpaxos-canary-stale-read",
    "BROKEN on purpose: SwiftPaxos^reads whose reader answers reads from its executed state alone",
    Flaw::StaleRead
);
