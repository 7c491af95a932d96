//! What every protocol's canaries share. A canary is a deliberately broken protocol that the fuzz
//! harness must catch; it is a `Protocol` type of its own whose nodes are the real protocol's
//! nodes built with one flaw switched on. [`Retyped`] drives such a node under the canary's type
//! (both protocols have the same message, timer and durable types), and [`real_context`] turns
//! the canary's node context into the real protocol's. Protocols built from another protocol's
//! nodes (N²Paxos from SwiftPaxos') use the same two, which is why this module is compiled
//! without the `canary` feature too.

use ordo_core::{
    ClockReading, Node, NodeContext, NodeId, NodeStats, Outbox, PersistTicket, Protocol, StateMachine, Submission,
};
use std::marker::PhantomData;

/// A node of protocol `Real` driven as a node of protocol `P`.
pub struct Retyped<Real: Protocol, P> {
    inner: Box<dyn Node<Real>>,
    scratch: Outbox<Real>,
    _protocol: PhantomData<fn() -> P>,
}

impl<Real, P> Retyped<Real, P>
where
    Real: Protocol,
    P: Protocol<Message = Real::Message, Timer = Real::Timer, Durable = Real::Durable, Observation = Real::Observation>,
{
    /// Wraps a real node as a node of `P`.
    pub fn boxed(inner: Box<dyn Node<Real>>) -> Box<dyn Node<P>> {
        Box::new(Retyped::<Real, P> { inner, scratch: Outbox::default(), _protocol: PhantomData })
    }

    /// Runs `input` on the real node, then moves its effects into the canary's outbox.
    fn forward(&mut self, out: &mut Outbox<P>, input: impl FnOnce(&mut dyn Node<Real>, &mut Outbox<Real>)) {
        assert!(self.scratch.is_empty(), "the scratch outbox is drained after every input");
        self.scratch.set_next_ticket(out.next_ticket());
        input(self.inner.as_mut(), &mut self.scratch);
        out.absorb(&mut self.scratch);
        assert_eq!(out.next_ticket(), self.scratch.next_ticket(), "both outboxes agree on the next ticket");
    }
}

impl<Real, P> Node<P> for Retyped<Real, P>
where
    Real: Protocol,
    P: Protocol<Message = Real::Message, Timer = Real::Timer, Durable = Real::Durable, Observation = Real::Observation>,
{
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_start(now, scratch));
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: P::Message, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_message(now, from, message, scratch));
    }

    fn on_timer(&mut self, now: ClockReading, timer: P::Timer, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_timer(now, timer, scratch));
    }

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_submit(now, submission, scratch));
    }

    fn on_durable(&mut self, now: ClockReading, through: PersistTicket, out: &mut Outbox<P>) {
        self.forward(out, |node, scratch| node.on_durable(now, through, scratch));
    }

    fn check_invariants(&self) {
        self.inner.check_invariants();
    }

    fn is_recovering(&self) -> bool {
        self.inner.is_recovering()
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

/// The real protocol's context for a canary's node.
pub fn real_context<Real, P>(context: NodeContext<P>) -> NodeContext<Real>
where
    Real: Protocol,
    P: Protocol<Config = Real::Config>,
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
