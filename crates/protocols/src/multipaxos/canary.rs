//! Deliberately broken variants of Multi-Paxos: negative controls for the fuzz harness, which
//! must catch them. Each is a protocol of its own that runs the real replica with one flaw
//! switched on (`Flaw`), behind a thin wrapper that forwards effects between the two protocols'
//! outboxes (their message, timer and durable types are the same).
//!
//! - `MultiPaxosEarlyReply`: the leader replies as soon as it appends a request, from a state
//!   machine run ahead of the quorum. A leader crash before the quorum holds the entry loses a
//!   write the client saw acknowledged.
//! - `MultiPaxosLossyViewChange`: the new leader adopts the shortest log offered. An entry
//!   committed by a majority that did not tell the new leader is dropped.

use super::client::Client;
use super::replica::Replica;
use super::{Config, Durable, Flaw, MultiPaxos, Timer, messages::Message};
use ordo_core::{
    ClockReading, Effect, Node, NodeContext, NodeId, NodeStats, Outbox, Protocol, Role, StateMachine, Submission,
};

/// Multi-Paxos whose leader replies before a quorum holds the request (broken on purpose).
pub struct MultiPaxosEarlyReply;

/// Multi-Paxos whose view change adopts the shortest log (broken on purpose).
pub struct MultiPaxosLossyViewChange;

/// A Multi-Paxos node driven as a node of protocol `P`.
struct Flawed<P: Protocol> {
    inner: Box<dyn Node<MultiPaxos>>,
    scratch: Outbox<MultiPaxos>,
    _protocol: std::marker::PhantomData<fn() -> P>,
}

/// Rebuilds a context for the real protocol from a canary's.
fn real_context<P>(context: NodeContext<P>) -> NodeContext<MultiPaxos>
where
    P: Protocol<Config = Config>,
{
    NodeContext {
        id: context.id,
        topology: context.topology,
        config: context.config,
        seed: context.seed,
        new_state_machine: context.new_state_machine,
        incarnation: context.incarnation,
    }
}

fn new_flawed<P>(context: NodeContext<P>, durable: Vec<Durable>, flaw: Flaw) -> Box<dyn Node<P>>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = Durable, Config = Config>,
{
    let role = context.role();
    let context = real_context(context);
    let inner: Box<dyn Node<MultiPaxos>> = match role {
        Role::Client => Box::new(Client::new(context)),
        _ => Box::new(Replica::new(context, durable, flaw)),
    };
    Box::new(Flawed::<P> { inner, scratch: Outbox::default(), _protocol: std::marker::PhantomData })
}

impl<P> Flawed<P>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = Durable, Config = Config>,
{
    /// Runs `input` on the real node, then moves its effects into the canary's outbox.
    fn forward(&mut self, out: &mut Outbox<P>, input: impl FnOnce(&mut dyn Node<MultiPaxos>, &mut Outbox<MultiPaxos>)) {
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
                Effect::Persist { record, mode, ticket } => {
                    let forwarded = out.persist(record, mode);
                    assert_eq!(forwarded, ticket, "tickets are numbered the same in both outboxes");
                }
            }
        }
        assert_eq!(out.next_ticket(), self.scratch.next_ticket(), "both outboxes agree on the next ticket");
    }
}

impl<P> Node<P> for Flawed<P>
where
    P: Protocol<Message = Message, Timer = Timer, Durable = Durable, Config = Config>,
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

impl Protocol for MultiPaxosEarlyReply {
    const NAME: &'static str = "multipaxos-canary-early-reply";
    const SUMMARY: &'static str = "BROKEN on purpose: Multi-Paxos whose leader replies before a quorum";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_flawed(context, durable, Flaw::EarlyReply)
    }
}

impl Protocol for MultiPaxosLossyViewChange {
    const NAME: &'static str = "multipaxos-canary-lossy-view-change";
    const SUMMARY: &'static str = "BROKEN on purpose: Multi-Paxos whose view change keeps the shortest log";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        new_flawed(context, durable, Flaw::LossyViewChange)
    }
}
