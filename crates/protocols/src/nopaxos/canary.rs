//! A deliberately broken variant of NOPaxos: the negative control for the fuzz harness, which
//! must catch it. It runs the real nodes with one flaw switched on (`Flaw`), retyped.
//!
//! - `NoPaxosRequestOverNoOp`: the view-change merge keeps a REQUEST where another log of the
//!   latest normal view holds a NO-OP. A NO-OP the old leader committed (f GAP-COMMIT-REPs)
//!   becomes a request in the new view: the global checker sees two values at one slot.
//!
//! A second flaw, a leader that resumes before f GAP-COMMIT-REPs (§5.2.2), was tried and
//! dropped: it needs the GAP-COMMITs and the next sync-prepare lost and a view change within a
//! heartbeat, and survived 100 random-fault seeds, so it proved nothing about the harness.

use super::checker::{Observation, SlotAgreement};
use super::messages::Message;
use super::{Config, Durable, Flaw, NoPaxos, Timer, new_node_with};
use crate::canary::{Retyped, real_context};
use ordo_core::{CrashModel, FailureBudget, GlobalChecker, Node, NodeContext, Protocol, Role};

/// NOPaxos whose merge prefers a REQUEST over a NO-OP (broken on purpose).
pub struct NoPaxosRequestOverNoOp;

macro_rules! flawed_protocol {
    ($canary:ty, $name:literal, $summary:literal, $flaw:expr) => {
        impl Protocol for $canary {
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;
            type Message = Message;
            type Timer = Timer;
            type Durable = Durable;
            type Config = Config;
            type Observation = Observation;

            fn extra_roles(replicas_per_shard: usize, config: &Config) -> Vec<Role> {
                NoPaxos::extra_roles(replicas_per_shard, config)
            }

            fn crash_model() -> CrashModel {
                NoPaxos::crash_model()
            }

            fn failure_budget(role: Role) -> FailureBudget {
                NoPaxos::failure_budget(role)
            }

            fn validate_config(config: &Config) -> Result<(), String> {
                config.validate()
            }

            fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
                Some(Box::new(SlotAgreement::new()))
            }

            fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
                Retyped::boxed(new_node_with(real_context::<NoPaxos, Self>(context), durable, $flaw))
            }
        }
    };
}

flawed_protocol!(
    NoPaxosRequestOverNoOp,
    "nopaxos-canary-request-over-no-op",
    "BROKEN on purpose: NOPaxos whose view-change merge prefers a REQUEST over a NO-OP",
    Flaw::RequestOverNoOp
);
