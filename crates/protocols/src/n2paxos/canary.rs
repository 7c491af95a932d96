//! A deliberately broken N²Paxos, the negative control of the fuzz harness:
//! `N2PaxosOwnOrder`'s followers order each command after the conflicting commands *they*
//! received first, and their 2B claims that order is the leader's. Under the campaign's
//! contention two replicas commit one command with different dependencies, which the global
//! checker reports (Inv 1); the harness (`crates/sim/tests/harness.rs`) catches it within 100
//! seeds.

use super::new_node;
use crate::swiftpaxos::checker::{Observation, SwiftChecker};
use crate::swiftpaxos::messages::Message;
use crate::swiftpaxos::{Config, Flaw, Timer};
use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol};

/// N²Paxos whose followers vote for their own arrival order (broken on purpose).
pub struct N2PaxosOwnOrder;

impl Protocol for N2PaxosOwnOrder {
    const NAME: &'static str = "n2paxos-canary-own-order";
    const SUMMARY: &'static str = "BROKEN on purpose: N²Paxos whose followers 2B their own arrival order";
    type Message = Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;
    type Observation = Observation;

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
        new_node(context, &durable, Flaw::OwnOrder)
    }
}
