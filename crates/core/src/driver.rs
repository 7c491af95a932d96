//! The one effect interpreter: [`NodeRunner`] owns a node and carries out the contract every
//! driver shares, so the simulator, the real runtime, the testkit and the canary adapter never
//! interpret [`Effect`]s themselves (in the manner of etcd raft's `RawNode`, the one place that
//! turns the core's output into I/O).
//!
//! What the runner keeps, per node:
//! - the node itself, its incarnation and its seed (derived from the run's seed by [`node_seed`]);
//! - the persist tickets: how many writes this incarnation issued and how many are durable;
//! - sends held until the write they wait for is durable, released in the order they were made;
//! - pending timers and their generations: a timer set again or cancelled makes the earlier
//!   firing stale, so drivers may schedule lazily and ask [`NodeRunner::fire_timer`] on firing;
//! - the multicast rule: a multicast skips its sender, a plain send to oneself does not.
//!
//! What it hands the driver is plain I/O, as [`Action`]s appended to a buffer the driver owns:
//! send these bytes-to-be to these nodes, arm this timer, write this record, complete this
//! operation, record this observation. The driver performs them with its own network, clock and
//! storage, and reports back only two things: a timer fired, and writes became durable.

use crate::command::CommandResult;
use crate::ids::NodeId;
use crate::kv::StateMachine;
use crate::node::{Destinations, Effect, Node, NodeContext, Outbox, PersistMode, PersistTicket, Protocol, Topology};
use crate::stats::NodeStats;
use crate::time::ClockReading;
use std::sync::Arc;

/// Most rounds of durability notices one input may cause when writes are durable at once (a node
/// whose `on_durable` always writes again would loop forever).
const DURABLE_ROUNDS_MAX: usize = 64;

/// The seed of a node's private random generator: a fixed function of the run's seed, the node
/// and its incarnation, the same in every driver, so a restarted node draws new numbers.
pub fn node_seed(run_seed: u64, id: NodeId, incarnation: u64) -> u64 {
    run_seed.wrapping_mul(1_000_003).wrapping_add(u64::from(id.0) * 7919 + incarnation)
}

/// Who a send goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// One node (possibly the sender itself).
    One(NodeId),
    /// Every node of a group but the sender.
    Group {
        /// The group as the node named it.
        to: Destinations,
        /// The sender, skipped.
        skip: NodeId,
    },
}

impl Targets {
    /// The destinations, in the order the node named them.
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        let (one, group, skip) = match self {
            Targets::One(node) => (Some(*node), &[][..], None),
            Targets::Group { to, skip } => (None, &to[..], Some(*skip)),
        };
        one.into_iter().chain(group.iter().copied().filter(move |&node| Some(node) != skip))
    }

    /// How many destinations.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when nobody is addressed (a multicast to the sender alone).
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// When an armed timer falls due, in the node's local time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// After this much local time has elapsed (at the clock's rate; a clock jump does not move it).
    After(u64),
    /// When the local clock first reads at least this (after a backward jump, it waits for the
    /// clock to get there again).
    At(u64),
}

/// Plain I/O the driver performs for a node.
pub enum Action<P: Protocol> {
    /// Deliver `message` to every target.
    Send {
        /// Destinations (the multicast rule already applied).
        to: Targets,
        /// The message.
        message: P::Message,
    },
    /// Schedule a call to [`NodeRunner::fire_timer`] with this timer and generation at `deadline`.
    ArmTimer {
        /// Which timer.
        timer: P::Timer,
        /// Its generation: the firing is stale unless this is still the timer's latest setting.
        generation: u64,
        /// When.
        deadline: Deadline,
    },
    /// Write a record to durable storage; report it with [`NodeRunner::writes_durable`] once it is
    /// (unless the runner was told writes are durable at once).
    Write {
        /// The record.
        record: P::Durable,
        /// Append or replace.
        mode: PersistMode,
        /// Its ticket: writes are numbered 0, 1, 2... per incarnation and become durable in order.
        ticket: PersistTicket,
    },
    /// A client node hands a submission's result back to the application.
    Complete {
        /// The submission's number.
        op: u64,
        /// Its result.
        result: CommandResult,
    },
    /// A fact for the protocol's global checker (the simulator feeds it; the runtime ignores it).
    Observe(P::Observation),
}

/// What firing a timer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerFiring {
    /// The timer was cancelled, set again or lost in a crash since: nothing ran.
    Stale,
    /// An absolute timer whose clock jumped back: schedule the same generation again for when the
    /// local clock reads this.
    NotYet(u64),
    /// The node's timer handler ran.
    Fired,
}

/// What every node of a run is built from.
pub struct RunnerSetup<P: Protocol> {
    /// The whole cluster.
    pub topology: Arc<Topology>,
    /// The protocol's options.
    pub config: P::Config,
    /// The run's seed; each node's derives from it ([`node_seed`]).
    pub run_seed: u64,
    /// Builds an empty application state machine.
    pub new_state_machine: fn() -> Box<dyn StateMachine>,
    /// Call `check_invariants` after every input.
    pub check_invariants: bool,
}

impl<P: Protocol> Clone for RunnerSetup<P> {
    fn clone(&self) -> Self {
        RunnerSetup {
            topology: self.topology.clone(),
            config: self.config.clone(),
            run_seed: self.run_seed,
            new_state_machine: self.new_state_machine,
            check_invariants: self.check_invariants,
        }
    }
}

/// A send waiting for a write to become durable.
struct HeldSend<P: Protocol> {
    ticket: u64,
    to: Targets,
    message: P::Message,
}

/// A timer's latest setting.
struct PendingTimer {
    generation: u64,
    deadline: Deadline,
}

/// A node's pending timers in timer order: a sorted vector, as a node has a handful of timers
/// and the runner looks one up on every arm, cancel and firing (a tree map's search and node
/// allocations cost more there).
struct TimerTable<T> {
    pending: Vec<(T, PendingTimer)>,
}

impl<T> Default for TimerTable<T> {
    fn default() -> Self {
        TimerTable { pending: Vec::new() }
    }
}

impl<T: Ord + Clone> TimerTable<T> {
    fn find(&self, timer: &T) -> Result<usize, usize> {
        self.pending.binary_search_by(|(pending, _)| pending.cmp(timer))
    }

    fn get(&self, timer: &T) -> Option<&PendingTimer> {
        self.find(timer).ok().map(|index| &self.pending[index].1)
    }

    /// Sets `timer`, replacing its earlier setting.
    fn insert(&mut self, timer: &T, setting: PendingTimer) {
        match self.find(timer) {
            Ok(index) => self.pending[index].1 = setting,
            Err(index) => self.pending.insert(index, (timer.clone(), setting)),
        }
    }

    fn remove(&mut self, timer: &T) {
        if let Ok(index) = self.find(timer) {
            self.pending.remove(index);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&T, &PendingTimer)> {
        self.pending.iter().map(|(timer, setting)| (timer, setting))
    }

    fn len(&self) -> usize {
        self.pending.len()
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn clear(&mut self) {
        self.pending.clear();
    }
}

/// One node and everything every driver keeps around it.
pub struct NodeRunner<P: Protocol> {
    id: NodeId,
    setup: RunnerSetup<P>,
    node: Option<Box<dyn Node<P>>>,
    incarnation: u64,
    /// Writes this incarnation issued: the next write's ticket.
    written: u64,
    /// Writes of this incarnation that are durable: tickets below this.
    durable: u64,
    /// How many writes the node has been told are durable (`on_durable`).
    notified: u64,
    /// Whether a write is durable as soon as it is issued (a driver without write latency).
    durable_at_once: bool,
    held: Vec<HeldSend<P>>,
    timers: TimerTable<P::Timer>,
    /// Grows across incarnations, so a firing scheduled before a crash never matches after it.
    timer_generation: u64,
    outbox: Outbox<P>,
    /// Counters of earlier incarnations, so a crash does not erase them.
    stats_before: NodeStats,
}

impl<P: Protocol> NodeRunner<P> {
    /// A runner for node `id`, not booted yet.
    pub fn new(id: NodeId, setup: RunnerSetup<P>) -> Self {
        assert!(id.index() < setup.topology.nodes.len(), "{id} is in the topology");
        NodeRunner {
            id,
            setup,
            node: None,
            incarnation: 0,
            written: 0,
            durable: 0,
            notified: 0,
            durable_at_once: false,
            held: Vec::new(),
            timers: TimerTable::default(),
            timer_generation: 0,
            outbox: Outbox::default(),
            stats_before: NodeStats::default(),
        }
    }

    // ---- reading ----------------------------------------------------------------------------

    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The running node, or `None` while it is down.
    pub fn node(&self) -> Option<&dyn Node<P>> {
        self.node.as_deref()
    }

    /// The running node, mutably (tests reach into it; drivers do not).
    pub fn node_mut(&mut self) -> Option<&mut (dyn Node<P> + 'static)> {
        self.node.as_deref_mut()
    }

    /// True while the node runs.
    pub fn is_up(&self) -> bool {
        self.node.is_some()
    }

    /// The current incarnation (as given to the latest [`NodeRunner::boot`]).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Writes this incarnation issued.
    pub fn writes_issued(&self) -> u64 {
        self.written
    }

    /// Writes of this incarnation that are durable.
    pub fn writes_durable_count(&self) -> u64 {
        self.durable
    }

    /// Sends waiting for a write.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Timers pending.
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    /// True when `generation` is the latest setting of a pending `timer`.
    pub fn is_timer_pending(&self, timer: &P::Timer, generation: u64) -> bool {
        self.timers.get(timer).is_some_and(|pending| pending.generation == generation)
    }

    /// The pending timers with their latest generation and deadline.
    pub fn pending_timers(&self) -> impl Iterator<Item = (&P::Timer, u64, Deadline)> {
        self.timers.iter().map(|(timer, pending)| (timer, pending.generation, pending.deadline))
    }

    /// The node's counters over all its incarnations.
    pub fn total_stats(&self) -> NodeStats {
        let mut total = self.stats_before.clone();
        if let Some(node) = &self.node {
            total.absorb(node.stats());
        }
        total
    }

    // ---- driver settings ----------------------------------------------------------------------

    /// With `at_once`, every write is durable as soon as it is issued: sends waiting for it leave
    /// in the same step, and `on_durable` runs right after the input that wrote.
    pub fn set_durable_at_once(&mut self, at_once: bool) {
        self.durable_at_once = at_once;
    }

    // ---- inputs -------------------------------------------------------------------------------

    /// Builds the node from its durable records (none on a first boot) and runs its start
    /// handler. `incarnation` must differ between a node's boots.
    pub fn boot(
        &mut self,
        now: ClockReading,
        incarnation: u64,
        durable: Vec<P::Durable>,
        actions: &mut Vec<Action<P>>,
    ) {
        assert!(self.node.is_none(), "{} boots while running", self.id);
        assert!(self.held.is_empty() && self.timers.is_empty(), "a down node keeps no volatile state");
        self.incarnation = incarnation;
        self.written = 0;
        self.durable = 0;
        self.notified = 0;
        let context = NodeContext {
            id: self.id,
            topology: self.setup.topology.clone(),
            config: self.setup.config.clone(),
            seed: node_seed(self.setup.run_seed, self.id, incarnation),
            new_state_machine: self.setup.new_state_machine,
            incarnation,
        };
        let node = P::new_node(context, durable);
        if self.setup.check_invariants {
            node.check_invariants();
        }
        self.node = Some(node);
        self.step(now, actions, |node, now, out| node.on_start(now, out));
    }

    /// Crashes the node: it loses its volatile state, its pending timers, the sends held for its
    /// writes and (by the driver) the writes not yet durable. False if it was already down.
    pub fn crash(&mut self) -> bool {
        let Some(node) = self.node.take() else { return false };
        self.stats_before.absorb(node.stats());
        self.held.clear();
        self.timers.clear();
        self.written = 0;
        self.durable = 0;
        self.notified = 0;
        true
    }

    /// A message arrived. Ignored while down.
    pub fn deliver(&mut self, now: ClockReading, from: NodeId, message: P::Message, actions: &mut Vec<Action<P>>) {
        self.step(now, actions, |node, now, out| node.on_message(now, from, message, out));
    }

    /// The application submits a command (client nodes). Ignored while down.
    pub fn submit(&mut self, now: ClockReading, submission: crate::node::Submission, actions: &mut Vec<Action<P>>) {
        self.step(now, actions, |node, now, out| node.on_submit(now, submission, out));
    }

    /// The application gave up on operation `op` (client nodes). Ignored while down.
    pub fn abandon(&mut self, now: ClockReading, op: u64, actions: &mut Vec<Action<P>>) {
        self.step(now, actions, |node, now, out| node.on_abandon(now, op, out));
    }

    /// A timer armed by [`Action::ArmTimer`] fell due (by the driver's reckoning).
    pub fn fire_timer(
        &mut self,
        now: ClockReading,
        timer: P::Timer,
        generation: u64,
        actions: &mut Vec<Action<P>>,
    ) -> TimerFiring {
        let Some(pending) = self.timers.get(&timer).filter(|p| p.generation == generation && self.node.is_some())
        else {
            return TimerFiring::Stale;
        };
        if let Deadline::At(local_ns) = pending.deadline
            && now.local_ns < local_ns
        {
            return TimerFiring::NotYet(local_ns);
        }
        self.timers.remove(&timer);
        self.step(now, actions, |node, now, out| node.on_timer(now, timer, out));
        TimerFiring::Fired
    }

    /// Every write of this incarnation with a ticket below `durable` is now durable: the sends
    /// waiting for them leave, and the node hears it through `on_durable`.
    pub fn writes_durable(&mut self, now: ClockReading, durable: u64, actions: &mut Vec<Action<P>>) {
        if self.node.is_none() {
            return;
        }
        assert!(durable <= self.written, "only issued writes become durable");
        if durable <= self.durable {
            return;
        }
        self.durable = durable;
        self.release_held(actions);
        // The notice itself is a step with no input: `step` tells the node what became durable.
        self.step(now, actions, |_, _, _| {});
    }

    // ---- the contract -------------------------------------------------------------------------

    /// Runs one input on the node, then interprets its effects; then tells the node of writes
    /// that became durable meanwhile (with writes durable at once), until it writes no more; then
    /// checks the node's invariants once (the notices are part of the input's step).
    fn step(
        &mut self,
        now: ClockReading,
        actions: &mut Vec<Action<P>>,
        input: impl FnOnce(&mut dyn Node<P>, ClockReading, &mut Outbox<P>),
    ) {
        let Some(node) = self.node.as_deref_mut() else { return };
        assert!(self.outbox.is_empty(), "the outbox is drained after every input");
        self.outbox.set_next_ticket(self.written);
        input(node, now, &mut self.outbox);
        self.interpret(actions);
        let mut rounds = 0;
        while self.notified < self.durable {
            rounds += 1;
            assert!(
                rounds <= DURABLE_ROUNDS_MAX,
                "{}: on_durable kept writing for {DURABLE_ROUNDS_MAX} rounds",
                self.id
            );
            self.notified = self.durable;
            let through = PersistTicket(self.durable - 1);
            let node = self.node.as_deref_mut().expect("a node that wrote is up");
            self.outbox.set_next_ticket(self.written);
            node.on_durable(now, through, &mut self.outbox);
            self.interpret(actions);
        }
        assert_eq!(self.notified, self.durable, "the node heard of every durable write");
        if self.setup.check_invariants {
            self.node.as_deref().expect("a node that ran is up").check_invariants();
        }
    }

    /// Turns the effects of one input into actions, in order.
    fn interpret(&mut self, actions: &mut Vec<Action<P>>) {
        let mut outbox = std::mem::take(&mut self.outbox);
        for effect in outbox.drain() {
            self.interpret_one(effect, actions);
        }
        assert_eq!(outbox.next_ticket(), self.written, "every ticket handed out was written");
        self.outbox = outbox;
    }

    fn interpret_one(&mut self, effect: Effect<P>, actions: &mut Vec<Action<P>>) {
        match effect {
            Effect::Send { to, message, after } => self.send(Targets::One(to), message, after, actions),
            Effect::Multicast { to, message, after } => {
                let targets = Targets::Group { to, skip: self.id };
                if !targets.is_empty() {
                    self.send(targets, message, after, actions);
                }
            }
            Effect::Complete { op, result } => actions.push(Action::Complete { op, result }),
            Effect::SetTimer { timer, after_ns } => self.arm(timer, Deadline::After(after_ns), actions),
            Effect::SetTimerAt { timer, local_ns } => self.arm(timer, Deadline::At(local_ns), actions),
            Effect::CancelTimer { timer } => {
                self.timers.remove(&timer);
            }
            Effect::Persist { record, mode, ticket } => {
                assert_eq!(ticket.0, self.written, "writes are issued in ticket order");
                self.written += 1;
                actions.push(Action::Write { record, mode, ticket });
                if self.durable_at_once {
                    self.durable = self.written;
                }
            }
            Effect::Observe(observation) => actions.push(Action::Observe(observation)),
        }
    }

    fn send(&mut self, to: Targets, message: P::Message, after: Option<PersistTicket>, actions: &mut Vec<Action<P>>) {
        match after {
            Some(ticket) if ticket.0 >= self.durable => {
                assert!(ticket.0 < self.written, "a send waits for a write already issued");
                self.held.push(HeldSend { ticket: ticket.0, to, message });
            }
            _ => actions.push(Action::Send { to, message }),
        }
    }

    fn arm(&mut self, timer: P::Timer, deadline: Deadline, actions: &mut Vec<Action<P>>) {
        self.timer_generation += 1;
        let generation = self.timer_generation;
        self.timers.insert(&timer, PendingTimer { generation, deadline });
        actions.push(Action::ArmTimer { timer, generation, deadline });
    }

    /// Sends whose write is now durable leave, in the order they were made.
    fn release_held(&mut self, actions: &mut Vec<Action<P>>) {
        let durable = self.durable;
        let mut index = 0;
        while index < self.held.len() {
            if self.held[index].ticket < durable {
                let held = self.held.remove(index);
                actions.push(Action::Send { to: held.to, message: held.message });
            } else {
                index += 1;
            }
        }
    }
}
