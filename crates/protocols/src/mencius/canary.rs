//! A deliberately broken variant of Mencius: the negative control for the fuzz harness.
//!
//! - `MenciusLearnBelowQuorum`: a proposer learns a value with f acknowledgements (its own,
//!   with three replicas) instead of f + 1. A revocation whose quorum misses the one replica
//!   that accepted it then chooses a no-op there, and the global checker sees two values.

use super::messages::Message;
use super::{Config, Durable, Flaw, Mencius, Timer, new_node_with};
use crate::canary::{Retyped, real_context};
use crate::chora::checker::{ChoraChecker, Observation};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// Mencius learning one acknowledgement short of a quorum (broken on purpose).
pub struct MenciusLearnBelowQuorum;

impl Protocol for MenciusLearnBelowQuorum {
    const NAME: &'static str = "mencius-canary-learn-below-quorum";
    const SUMMARY: &'static str = "BROKEN on purpose: Mencius learning with f acknowledgements";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = Observation;

    fn crash_model() -> CrashModel {
        Mencius::crash_model()
    }

    fn client_window(config: &Config) -> usize {
        Mencius::client_window(config)
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(ChoraChecker::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        Retyped::boxed(new_node_with(real_context::<Mencius, Self>(context), durable, Flaw::LearnBelowQuorum))
    }
}
