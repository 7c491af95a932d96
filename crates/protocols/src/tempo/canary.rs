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

use super::client::Client;
use super::replica::Replica;
use super::{Config, Flaw, Tempo, Timer, messages::Message};
use ordo_core::{
    ClockReading, Effect, Node, NodeContext, NodeId, NodeStats, Outbox, Protocol, Role, StateMachine, Submission,
};

/// Tempo whose stability needs one process instead of a majority (broken on purpose).
pub struct TempoMinorityStability;

/// Tempo whose first recovery ballot may equal an initial coordinator's (broken on purpose).
pub struct TempoLowRecoveryBallot;

/// A Tempo node driven as a node of protocol `P`.
struct Flawed<P: Protocol> {
    inner: Box<dyn Node<Tempo>>,
    scratch: Outbox<Tempo>,
    _protocol: std::marker::PhantomData<fn() -> P>,
}

pub(crate) fn new_flawed<P>(context: NodeContext<P>, flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config>,
{
    let role = context.role();
    let context = NodeContext::<Tempo> {
        id: context.id,
        topology: context.topology,
        config: context.config,
        seed: context.seed,
        new_state_machine: context.new_state_machine,
        incarnation: context.incarnation,
    };
    let inner: Box<dyn Node<Tempo>> = match role {
        Role::Client => Box::new(Client::new(context)),
        _ => Box::new(Replica::new(context, flaw)),
    };
    Box::new(Flawed::<P> { inner, scratch: Outbox::default(), _protocol: std::marker::PhantomData })
}

impl<P> Flawed<P>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config>,
{
    /// Runs `input` on the real node, then moves its effects into the canary's outbox.
    fn forward(&mut self, out: &mut Outbox<P>, input: impl FnOnce(&mut dyn Node<Tempo>, &mut Outbox<Tempo>)) {
        assert!(self.scratch.is_empty(), "the scratch outbox is drained after every input");
        self.scratch.set_next_ticket(out.next_ticket());
        input(self.inner.as_mut(), &mut self.scratch);
        for effect in self.scratch.drain() {
            match effect {
                Effect::Send { to, message, after: None } => out.send(to, message),
                Effect::Send { to, message, after: Some(ticket) } => out.send_after(ticket, to, message),
                Effect::Multicast { to, message, after: None } => out.multicast(&to, message),
                Effect::Multicast { to, message, after: Some(ticket) } => out.multicast_after(ticket, &to, message),
                Effect::Complete { op, result } => out.complete(op, result),
                Effect::SetTimer { timer, after_ns } => out.set_timer(timer, after_ns),
                Effect::SetTimerAt { timer, local_ns } => out.set_timer_at(timer, local_ns),
                Effect::CancelTimer { timer } => out.cancel_timer(timer),
                Effect::Persist { .. } => unreachable!("Tempo persists nothing"),
            }
        }
    }
}

impl<P> Node<P> for Flawed<P>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = (), Config = Config>,
{
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_start(now, scratch));
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_message(now, from, message, scratch));
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_timer(now, timer, scratch));
    }

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_submit(now, submission, scratch));
    }

    fn check_invariants(&self) {
        self.inner.check_invariants();
    }

    fn stats(&self) -> &NodeStats {
        self.inner.stats()
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        self.inner.state_machine()
    }

    fn status(&self) -> String {
        self.inner.status()
    }
}

impl Protocol for TempoMinorityStability {
    const NAME: &'static str = "tempo-canary-minority-stability";
    const SUMMARY: &'static str = "BROKEN on purpose: Tempo whose stability needs one process, not a majority";
    type Message = Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;

    fn has_fast_path() -> bool {
        true
    }

    fn supports_shards() -> bool {
        true
    }

    fn crash_model() -> ordo_core::CrashModel {
        ordo_core::CrashModel::Stop
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn new_node(context: NodeContext<Self>, _durable: Vec<()>) -> Box<dyn Node<Self>> {
        new_flawed(context, Flaw::MinorityStability)
    }
}

impl Protocol for TempoLowRecoveryBallot {
    const NAME: &'static str = "tempo-canary-low-recovery-ballot";
    const SUMMARY: &'static str = "BROKEN on purpose: Tempo whose first recovery ballot may equal a coordinator's";
    type Message = Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;

    fn has_fast_path() -> bool {
        true
    }

    fn crash_model() -> ordo_core::CrashModel {
        ordo_core::CrashModel::Stop
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn new_node(context: NodeContext<Self>, _durable: Vec<()>) -> Box<dyn Node<Self>> {
        new_flawed(context, Flaw::LowRecoveryBallot)
    }
}
