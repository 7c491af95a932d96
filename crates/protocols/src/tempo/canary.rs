//! Deliberately broken variants of Tempo: negative controls for the fuzz harness. Each runs the
//! real replica with one flaw switched on (`Flaw`) behind a thin wrapper that forwards effects
//! between the two protocols' outboxes (their message, timer and durable types are the same).
//!
//! - `TempoMinorityStability`: a timestamp counts as stable once any one process promised up
//!   to it (instead of a majority, Theorem 1). A replica then runs a command before a lower
//!   command it has not yet heard of is committed, so replicas run conflicting commands in
//!   different orders.
//! - `TempoLowRecoveryBallot` (not registered: it needs f ≥ 2 and a slow path to go wrong, which
//!   the 3-replica harness never has; `tests.rs` shows it breaking agreement): recovery ballots
//!   computed with floor division, so a first recovery runs at `rank + 1`, an initial
//!   coordinator's ballot (spec §6.4).
//! - `TempoEarlyForget`: garbage collection forgets a command once every replica of its shard
//!   but one executed it. The global checker (`gc::GcChecker`) sees a replica forget a command
//!   that a replica of its shard has not executed.

use super::client::Client;
use super::gc::{GcChecker, Observation};
use super::replica::{Boot, Replica};
use super::{Config, Flaw, Tempo, Timer, messages::Message};
use crate::canary::{Retyped, real_context};
use ordo_core::{GlobalChecker, Node, NodeContext, Protocol, Role};

/// Tempo whose stability needs one process instead of a majority (broken on purpose).
pub struct TempoMinorityStability;

/// Tempo whose first recovery ballot may equal an initial coordinator's (broken on purpose).
pub struct TempoLowRecoveryBallot;

/// Tempo whose garbage collection forgets a command one replica has not executed (broken on
/// purpose).
pub struct TempoEarlyForget;

pub(crate) fn new_flawed<P>(context: NodeContext<P>, durable: &[()], flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config, Observation = Observation>,
{
    let role = context.role();
    let context = real_context::<Tempo, P>(context);
    let inner: Box<dyn Node<Tempo>> = match role {
        Role::Client => Box::new(Client::new(context)),
        _ => Box::new(Replica::new(context, flaw, Boot::from_durable(durable))),
    };
    Retyped::boxed(inner)
}

/// The `Protocol` impl of a canary: Tempo's types and options with one flaw on, sharding where
/// the flaw can show without it or not, and the garbage-collection checker when asked for.
macro_rules! flawed_protocol {
    ($canary:ty, $name:literal, $summary:literal, $flaw:expr, shards: $shards:literal, checker: $checker:literal) => {
        impl Protocol for $canary {
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

            fn supports_shards() -> bool {
                $shards
            }

            fn crash_model() -> ordo_core::CrashModel {
                ordo_core::CrashModel::Stop
            }

            fn validate_config(config: &Config) -> Result<(), String> {
                config.validate()
            }

            fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
                $checker.then(|| Box::new(GcChecker::default()) as Box<dyn GlobalChecker<Self>>)
            }

            fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
                new_flawed(context, &durable, $flaw)
            }
        }
    };
}

flawed_protocol!(
    TempoMinorityStability,
    "tempo-canary-minority-stability",
    "BROKEN on purpose: Tempo whose stability needs one process, not a majority",
    Flaw::MinorityStability,
    shards: true,
    checker: false
);

flawed_protocol!(
    TempoLowRecoveryBallot,
    "tempo-canary-low-recovery-ballot",
    "BROKEN on purpose: Tempo whose first recovery ballot may equal a coordinator's",
    Flaw::LowRecoveryBallot,
    shards: false,
    checker: false
);

flawed_protocol!(
    TempoEarlyForget,
    "tempo-canary-early-forget",
    "BROKEN on purpose: Tempo that forgets a command one replica has not executed",
    Flaw::EarlyForget,
    shards: true,
    checker: true
);
