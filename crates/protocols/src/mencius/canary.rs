//! Deliberately broken variants of Mencius: the negative controls for the fuzz harness.
//!
//! - `MenciusAckAnyChosen`: an acceptor that already knows a slot's chosen value
//!   acknowledges a proposal of another value there. An owner that lagged behind the
//!   revocation of its slot then gathers f + 1 acknowledgements for its request where a no-op
//!   was chosen, and the global checker sees two values. (This was a real bug of the first
//!   version, caught at seed 1. A first canary, learning with f acknowledgements, survived 100
//!   random-fault seeds with three replicas: it needs the owner to crash or be cut off between
//!   its own acceptance and any other's, a window too narrow for the random plans.)
//! - `MenciusRestartFresh`: a restarted replica ignores its durable bound and takes part at once
//!   as a fresh replica, forgetting its promises, acceptances and proposals (as if it persisted
//!   nothing before answering). It proposes again in slots it proposed or skipped before, and
//!   accepts round-0 values in slots it promised to a revoker.

use super::messages::Message;
use super::{Config, Durable, Flaw, Mencius, Timer, new_node_with};
use crate::canary::{Retyped, real_context};
use crate::chora::checker::{ChoraChecker, Observation};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// Mencius acknowledging any value at a chosen slot (broken on purpose).
pub struct MenciusAckAnyChosen;

impl Protocol for MenciusAckAnyChosen {
    const NAME: &'static str = "mencius-canary-ack-any-chosen";
    const SUMMARY: &'static str = "BROKEN on purpose: Mencius acknowledging any value at a chosen slot";
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
        Retyped::boxed(new_node_with(real_context::<Mencius, Self>(context), durable, Flaw::AckAnyChosen))
    }
}

/// Mencius whose restarted replicas forget their earlier incarnation (broken on purpose).
pub struct MenciusRestartFresh;

impl Protocol for MenciusRestartFresh {
    const NAME: &'static str = "mencius-canary-restart-fresh";
    const SUMMARY: &'static str = "BROKEN on purpose: restarted Mencius replicas forget their promises and proposals";
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
        Retyped::boxed(new_node_with(real_context::<Mencius, Self>(context), durable, Flaw::RestartFresh))
    }
}
