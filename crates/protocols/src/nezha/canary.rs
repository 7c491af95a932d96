//! A deliberately broken variant of Nezha: the negative control of the fuzz harness.
//!
//! `NezhaMajorityFastQuorum`: senders fast-commit with the leader and f matching followers (a
//! simple majority) instead of the super quorum f + ⌈f/2⌉ + 1 (§5.2's counter-example). After a
//! leader crash the view change needs ⌈f/2⌉ + 1 votes among f + 1 logs, which a request on only
//! f + 1 replicas may not get, so a write a client saw committed can vanish.

use super::{Config, Durable, Flaw, Nezha, Timer, messages::Message, new_node_with};
use ordo_core::{
    ClockReading, Effect, Node, NodeContext, NodeId, NodeStats, Outbox, Protocol, Role, StateMachine, Submission,
};

/// Nezha with a majority fast quorum (broken on purpose).
pub struct NezhaMajorityFastQuorum;

/// A Nezha node driven as a node of the canary protocol.
struct Flawed {
    inner: Box<dyn Node<Nezha>>,
    scratch: Outbox<Nezha>,
}

impl Flawed {
    /// Runs `input` on the real node, then moves its effects into the canary's outbox.
    fn forward(
        &mut self,
        out: &mut Outbox<NezhaMajorityFastQuorum>,
        input: impl FnOnce(&mut dyn Node<Nezha>, &mut Outbox<Nezha>),
    ) {
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
    }
}

impl Node<NezhaMajorityFastQuorum> for Flawed {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<NezhaMajorityFastQuorum>) {
        self.forward(out, |node, inner| node.on_start(now, inner));
    }

    fn on_message(
        &mut self,
        now: ClockReading,
        from: NodeId,
        message: Message,
        out: &mut Outbox<NezhaMajorityFastQuorum>,
    ) {
        self.forward(out, |node, inner| node.on_message(now, from, message, inner));
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<NezhaMajorityFastQuorum>) {
        self.forward(out, |node, inner| node.on_timer(now, timer, inner));
    }

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<NezhaMajorityFastQuorum>) {
        self.forward(out, |node, inner| node.on_submit(now, submission, inner));
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

impl Protocol for NezhaMajorityFastQuorum {
    const NAME: &'static str = "nezha-majority-fast-quorum";
    const SUMMARY: &'static str = "canary: Nezha fast-committing with a simple majority (must be caught)";
    type Message = Message;
    type Timer = Timer;
    type Durable = Durable;
    type Config = Config;

    fn extra_roles(replicas_per_shard: usize, config: &Config) -> Vec<Role> {
        Nezha::extra_roles(replicas_per_shard, config)
    }

    fn has_fast_path() -> bool {
        true
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<Durable>) -> Box<dyn Node<Self>> {
        let real = NodeContext {
            id: context.id,
            topology: context.topology,
            config: context.config,
            seed: context.seed,
            new_state_machine: context.new_state_machine,
            incarnation: context.incarnation,
        };
        let inner = new_node_with(real, durable, Flaw::MajorityFastQuorum);
        Box::new(Flawed { inner, scratch: Outbox::default() })
    }
}
