//! A deliberately broken CURP+, the negative control of the fuzz harness: `CurpBlindWitness`'s
//! witnesses record every command, conflicting or not, and its leader replies at once from its
//! executed state, without L14's wait for the earlier conflicting commands' commits. Under the
//! campaign's contention a client soon takes a result that the command's execution does not
//! give (Nontriviality); the harness (`crates/sim/tests/harness.rs`) catches it within 100
//! seeds.

use super::new_node;
use crate::swiftpaxos::checker::{Observation, SwiftChecker};
use crate::swiftpaxos::messages::Message;
use crate::swiftpaxos::{Config, Flaw, Timer};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// CURP+ whose witnesses ignore conflicts and whose leader does not wait (broken on purpose).
pub struct CurpBlindWitness;

impl Protocol for CurpBlindWitness {
    const NAME: &'static str = "curp-canary-blind-witness";
    const SUMMARY: &'static str = "BROKEN on purpose: CURP+ whose witnesses ignore conflicts and leader replies early";
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
        Some(Box::new(SwiftChecker::default()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
        new_node(context, &durable, Flaw::BlindWitness)
    }
}
