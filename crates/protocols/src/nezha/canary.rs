//! Deliberately broken variants of Nezha: negative controls of the fuzz harness.
//!
//! `NezhaMajorityFastQuorum`: senders fast-commit with the leader and f matching followers (a
//! simple majority) instead of the super quorum f + ⌈f/2⌉ + 1 (§5.2's counter-example). After a
//! leader crash the view change needs ⌈f/2⌉ + 1 votes among f + 1 logs, which a request on only
//! f + 1 replicas may not get, so a write a client saw committed can vanish.
//!
//! Its replicas are the real ones and report the real observations, but it runs no global
//! checker: the flaw is in the senders' commit decision, and a write it loses was never under a
//! replica's commit point (f + 1 sync-points would have kept it), so the position checker has
//! nothing to see; the canary stays a negative control of the end-of-run checks.
//!
//! `NezhaVolatileLog`: durable mode (`durable.rs`) whose replicas write their first image and
//! nothing after, yet resume from it as if it held their log. After a power cut every replica
//! is an amnesic member of view 0, and writes the clients saw acknowledged are gone. It is the
//! negative control of the durable-mode power-cut campaign (`--faults random-clients`); the
//! harness's own canary campaign has no power cut, so it is not registered there.

use super::{Config, Durable, Flaw, Nezha, Timer, checker::Observation, messages::Message, new_node_with};
use crate::canary::{Retyped, real_context};
use ordo_core::{Node, NodeContext, Protocol, Role};

/// Nezha with a majority fast quorum (broken on purpose).
pub struct NezhaMajorityFastQuorum;

impl Protocol for NezhaMajorityFastQuorum {
    const NAME: &'static str = "nezha-majority-fast-quorum";
    const SUMMARY: &'static str = "canary: Nezha fast-committing with a simple majority (must be caught)";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = Observation;

    fn extra_roles(replicas_per_shard: usize, config: &Config) -> Vec<Role> {
        Nezha::extra_roles(replicas_per_shard, config)
    }

    fn has_fast_path() -> bool {
        true
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        let real = real_context::<Nezha, Self>(context);
        let inner = new_node_with(real, durable, Flaw::MajorityFastQuorum);
        Retyped::boxed(inner)
    }
}

/// Nezha's durable mode with its log never written (broken on purpose).
pub struct NezhaVolatileLog;

impl Protocol for NezhaVolatileLog {
    const NAME: &'static str = "nezha-volatile-log";
    const SUMMARY: &'static str = "canary: Nezha's durable mode resuming from a log it never wrote (must be caught)";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;
    type Observation = Observation;

    fn extra_roles(replicas_per_shard: usize, config: &Config) -> Vec<Role> {
        Nezha::extra_roles(replicas_per_shard, config)
    }

    fn has_fast_path() -> bool {
        true
    }

    /// It claims to, as the real durable mode does: so the simulator cuts the power.
    fn state_on_disk_with(_config: &Config) -> bool {
        true
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        let real = real_context::<Nezha, Self>(context);
        Retyped::boxed(new_node_with(real, durable, Flaw::VolatileLog))
    }
}
