//! A deliberately broken variant of Chora: the negative control for the fuzz harness, which
//! must catch it. It runs the real nodes with one flaw switched on (`Flaw`), retyped.
//!
//! - `ChoraCommitBelowQuorum`: a replica commits at the (q−1)-th highest ack instead of the
//!   q-th. With three replicas that is its own ack: it executes its own proposals before any
//!   other replica holds them, so a crash or partition followed by a view change replaces a
//!   slot it executed, and the global checker sees two values there.

use super::checker::{ChoraChecker, Observation};
use super::messages::Message;
use super::{Chora, Config, Durable, Flaw, Timer, new_node_with};
use crate::canary::{Retyped, real_context};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// Chora committing one ack short of a quorum (broken on purpose).
pub struct ChoraCommitBelowQuorum;

impl Protocol for ChoraCommitBelowQuorum {
    const NAME: &'static str = "chora-canary-commit-below-quorum";
    const SUMMARY: &'static str = "BROKEN on purpose: Chora committing at the (q-1)-th highest ack";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = Observation;

    fn crash_model() -> CrashModel {
        Chora::crash_model()
    }

    fn client_window(config: &Config) -> usize {
        Chora::client_window(config)
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(ChoraChecker::new()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        Retyped::boxed(new_node_with(real_context::<Chora, Self>(context), durable, Flaw::CommitBelowQuorum))
    }
}
