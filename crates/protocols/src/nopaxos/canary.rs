//! Deliberately broken variants of NOPaxos: negative controls for the fuzz harness, which must
//! catch them. Each runs the real nodes with one flaw switched on (`Flaw`), retyped.
//!
//! - `NoPaxosRequestOverNoOp`: the view-change merge keeps a REQUEST where another log of the
//!   latest normal view holds a NO-OP. A NO-OP the old leader committed (f GAP-COMMIT-REPs)
//!   becomes a request in the new view: the global checker sees two values at one slot.
//! - `NoPaxosEarlyGapResume`: the leader moves past a NO-OP before f replicas acknowledged it
//!   (§5.2.2: "before proceeding to the next sequence number, the leader must ensure that a
//!   majority of replicas have learned of its decision"). Its executed state and its replies
//!   then assume a NO-OP that a view change may replace with the request.

use super::checker::{Observation, SlotAgreement};
use super::messages::Message;
use super::{Config, Durable, Flaw, NoPaxos, Timer, new_node_with};
use crate::canary::{Retyped, real_context};
use ordo_core::{CrashModel, FailureBudget, GlobalChecker, Node, NodeContext, Protocol, Role};

/// NOPaxos whose merge prefers a REQUEST over a NO-OP (broken on purpose).
pub struct NoPaxosRequestOverNoOp;

/// NOPaxos whose leader resumes before its NO-OP is acknowledged (broken on purpose).
pub struct NoPaxosEarlyGapResume;

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
flawed_protocol!(
    NoPaxosEarlyGapResume,
    "nopaxos-canary-early-gap-resume",
    "BROKEN on purpose: NOPaxos whose leader resumes before f GAP-COMMIT-REPs",
    Flaw::EarlyGapResume
);
