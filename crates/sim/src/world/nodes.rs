//! Nodes and their CPU: each node's runner, clock, CPU queue and disk; handing inputs to
//! the runner and performing its actions with the CPU cost model.

use super::inbox::Inbox;
use super::*;

/// A write issued but not yet durable.
pub(crate) struct PendingWrite<P: Protocol> {
    pub(super) record: P::Durable,
    pub(super) mode: PersistMode,
    pub(super) ticket: u64,
    pub(super) done_ns: u64,
}

/// Counters the driver keeps per node.
#[derive(Default, Clone)]
pub(crate) struct Traffic {
    pub messages_sent: u64,
    pub messages_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub busy_ns: u64,
    pub queue_len_max: usize,
    pub queue_drops: u64,
    pub crashes: u64,
}

/// A node and everything the driver keeps about it.
pub(crate) struct NodeSlot<P: Protocol> {
    /// The node and its effect contract (timers, held sends, tickets).
    pub runner: NodeRunner<P>,
    pub spec: NodeSpec,
    /// Boots so far, less one: a crash makes every scheduled event of the node stale.
    pub(super) incarnation: u64,
    pub clock: SimClock,
    pub(super) costed: bool,
    /// What its CPU costs (its role's profile, or the run's `cpu`).
    pub(super) cpu: crate::config::CpuCost,
    pub(super) busy_until: u64,
    pub(super) paused_until: u64,
    pub(super) wake_pending: bool,
    /// Inputs waiting for the CPU (urgent messages first, `Protocol::is_urgent`).
    pub(super) inbox: Inbox<Input<P>>,
    /// The node's disk: what a restart reads back.
    pub(super) durable: Vec<P::Durable>,
    /// Writes issued and not yet durable, in ticket order.
    pub(super) pending_writes: VecDeque<PendingWrite<P>>,
    /// Writes of this incarnation that are durable.
    pub(super) durable_count: u64,
    pub traffic: Traffic,
}

impl<P: Protocol> NodeSlot<P> {
    /// The node's counters over all its incarnations.
    pub fn total_stats(&self) -> NodeStats {
        self.runner.total_stats()
    }

    /// True while the node runs.
    pub fn is_up(&self) -> bool {
        self.runner.is_up()
    }

    /// Queues an input for the CPU: an urgent message after the urgent ones already queued and
    /// before every other input, anything else at the back.
    pub(super) fn enqueue(&mut self, input: Input<P>) {
        let urgent = matches!(&input, Input::Message { message, .. } if P::is_urgent(message));
        self.inbox.push(input, urgent);
    }
}

impl<P: Protocol> World<P> {
    pub(super) fn create_nodes(&mut self) {
        let setup = RunnerSetup {
            topology: self.topology.clone(),
            config: self.protocol_config.clone(),
            run_seed: self.config.seed,
            new_state_machine: crate::witness::RecordingKv::boxed,
            check_invariants: self.config.check_invariants,
        };
        for spec in self.topology.nodes.clone() {
            // Clients stand for machines of their own and cost nothing, unless the run profiles them.
            let costed = spec.role != Role::Client || self.cpu_by_role.contains_key(&Role::Client);
            let cpu = self.cpu_by_role.get(&spec.role).cloned().unwrap_or_else(|| self.config.cpu.clone());
            let mut runner = NodeRunner::new(spec.id, setup.clone());
            runner.set_durable_at_once(self.config.persist_ns == 0);
            self.nodes.push(NodeSlot {
                runner,
                clock: SimClock::new(&self.config.clock),
                spec: spec.clone(),
                incarnation: 0,
                costed,
                cpu,
                busy_until: 0,
                paused_until: 0,
                wake_pending: false,
                inbox: Inbox::default(),
                durable: Vec::new(),
                pending_writes: VecDeque::new(),
                durable_count: 0,
                traffic: Traffic::default(),
            });
            if spec.role == Role::Client {
                self.clients.push(WorkloadClient {
                    node: spec.id,
                    site: spec.site,
                    process: self.clients.len() as u64,
                    outstanding: Vec::new(),
                    backlog: VecDeque::new(),
                    backlog_drops: 0,
                    last_ok_ns: 0,
                    latencies_ns: Vec::new(),
                });
            }
        }
        for index in 0..self.nodes.len() {
            self.boot(NodeId(index as u32));
        }
    }

    pub(super) fn boot(&mut self, id: NodeId) {
        let slot = &mut self.nodes[id.index()];
        slot.durable_count = 0;
        let (incarnation, durable) = (slot.incarnation, slot.durable.clone());
        self.run_step(id, 0, |runner, now, actions| runner.boot(now, incarnation, durable, actions));
    }

    pub(super) fn on_arrive(&mut self, to: NodeId, input: Input<P>) {
        if let Input::Message { from, sequence, .. } = &input {
            let link = self.links.get(*from, to);
            if link.delivered.is_some_and(|delivered| *sequence < delivered) {
                self.outcome.network.delivered_out_of_order += 1;
            }
            link.delivered = link.delivered.max(Some(*sequence));
        }
        let now = self.now;
        let queue_max = self.nodes[to.index()].cpu.queue_max;
        let slot = &mut self.nodes[to.index()];
        if !slot.is_up() {
            self.outcome.network.dropped_down += 1;
            return;
        }
        let busy = slot.costed && (slot.busy_until > now || slot.paused_until > now || !slot.inbox.is_empty());
        if !busy {
            self.process(to, input);
            return;
        }
        if slot.inbox.len() >= queue_max {
            slot.traffic.queue_drops += 1;
            return;
        }
        slot.enqueue(input);
        slot.traffic.queue_len_max = slot.traffic.queue_len_max.max(slot.inbox.len());
        if !slot.wake_pending {
            slot.wake_pending = true;
            let at = slot.busy_until.max(slot.paused_until).max(now);
            let incarnation = slot.incarnation;
            self.schedule(at, Event::Wake { node: to, incarnation });
        }
    }

    pub(super) fn on_wake(&mut self, id: NodeId, incarnation: u64) {
        let now = self.now;
        let slot = &mut self.nodes[id.index()];
        if slot.incarnation != incarnation {
            return;
        }
        slot.wake_pending = false;
        if slot.paused_until > now || slot.busy_until > now {
            slot.wake_pending = true;
            let at = slot.busy_until.max(slot.paused_until);
            self.schedule(at, Event::Wake { node: id, incarnation });
            return;
        }
        if let Some(input) = slot.inbox.pop() {
            self.process(id, input);
        }
    }

    /// Hands one input to the node now and carries out its effects.
    pub(super) fn process(&mut self, id: NodeId, input: Input<P>) {
        let slot = &mut self.nodes[id.index()];
        let cpu = &slot.cpu;
        let mut cost = if slot.costed { cpu.per_event_ns } else { 0 };
        if let Input::Message { size, .. } = &input {
            slot.traffic.messages_received += 1;
            slot.traffic.bytes_received += *size as u64;
            if slot.costed {
                cost += cpu.per_message_ns + (*size as f64 * cpu.per_byte_ns) as u64;
            }
        }
        let mut timer_not_yet = None;
        self.run_step(id, cost, |runner, now, actions| match input {
            Input::Message { from, message, .. } => runner.deliver(now, from, message, actions),
            Input::Submit(submission) => runner.submit(now, submission, actions),
            Input::Abandon(op) => runner.abandon(now, op, actions),
            Input::Timer { timer, generation } => {
                if let TimerFiring::NotYet(local_ns) = runner.fire_timer(now, timer.clone(), generation, actions) {
                    timer_not_yet = Some((timer, generation, local_ns));
                }
            }
        });
        if let Some((timer, generation, local_ns)) = timer_not_yet {
            // An absolute timer whose clock jumped back waits until the clock gets there again.
            let at = self.nodes[id.index()].clock.true_time_of(local_ns, self.now).max(self.now + 1);
            self.schedule(at, Event::TimerFire { node: id, timer, generation });
        }
    }

    /// Runs one step of the node's runner with its clock reading, performs the actions, and
    /// keeps its CPU busy for `cost` plus what the actions cost.
    pub(super) fn run_step(
        &mut self,
        id: NodeId,
        mut cost: u64,
        step: impl FnOnce(&mut NodeRunner<P>, ClockReading, &mut Vec<Action<P>>),
    ) {
        let now = self.now;
        let slot = &mut self.nodes[id.index()];
        let reading = slot.clock.read(now, &mut self.clock_rng);
        let mut actions = std::mem::take(&mut self.actions);
        step(&mut slot.runner, reading, &mut actions);
        for action in actions.drain(..) {
            cost = self.perform(id, action, cost);
        }
        self.actions = actions;
        let slot = &mut self.nodes[id.index()];
        if slot.costed {
            slot.busy_until = slot.busy_until.max(now) + cost;
            slot.traffic.busy_ns += cost;
            if !slot.inbox.is_empty() && !slot.wake_pending {
                slot.wake_pending = true;
                let (at, incarnation) = (slot.busy_until.max(slot.paused_until), slot.incarnation);
                self.schedule(at, Event::Wake { node: id, incarnation });
            }
        }
    }

    pub(super) fn message_cost(&self, id: NodeId, size: usize) -> u64 {
        if !self.nodes[id.index()].costed {
            return 0;
        }
        let cpu = &self.nodes[id.index()].cpu;
        cpu.per_message_ns + (size as f64 * cpu.per_byte_ns) as u64
    }

    /// Performs one action; returns the CPU time used so far in this step.
    pub(super) fn perform(&mut self, id: NodeId, action: Action<P>, mut cost: u64) -> u64 {
        match action {
            Action::Send { to, message } => {
                let size = postcard::experimental::serialized_size(&message).expect("messages serialize");
                let count = to.len();
                cost += self.message_cost(id, size) * count as u64;
                self.transmit_all(id, &to, count, message, size, self.now + cost);
            }
            Action::Complete { op, result } => self.on_complete(id, op, result),
            Action::ArmTimer { timer, generation, deadline } => {
                let slot = &self.nodes[id.index()];
                let at = match deadline {
                    Deadline::After(local_ns) => self.now + slot.clock.true_duration_ns(local_ns).max(1),
                    Deadline::At(local_ns) => slot.clock.true_time_of(local_ns, self.now).max(self.now),
                };
                self.schedule(at, Event::TimerFire { node: id, timer, generation });
            }
            Action::Write { record, mode, ticket } => self.persist(id, record, mode, ticket.0, cost),
            Action::Observe(observation) => self.observe(id, &observation),
        }
        cost
    }

    pub(super) fn observe(&mut self, id: NodeId, observation: &P::Observation) {
        let Some(checker) = self.checker.as_mut() else { return };
        if self.outcome.global_error.is_some() {
            return;
        }
        match checker.observe(id, observation) {
            Ok(()) => self.outcome.observations += 1,
            Err(violation) => {
                self.outcome.global_error = Some(format!("at {:.6}s, {id}: {violation}", self.now as f64 / 1e9));
            }
        }
    }

    pub(super) fn persist(&mut self, id: NodeId, record: P::Durable, mode: PersistMode, ticket: u64, cost: u64) {
        let persist_ns = self.config.persist_ns;
        let slot = &mut self.nodes[id.index()];
        assert_eq!(ticket, slot.durable_count + slot.pending_writes.len() as u64, "tickets are issued in order");
        if slot.pending_writes.is_empty() && slot.runner.writes_durable_count() > ticket {
            // The runner took it as durable at once (no write latency).
            mode.store(&mut slot.durable, record);
            slot.durable_count += 1;
            return;
        }
        let start = slot.pending_writes.back().map_or(self.now + cost, |w| w.done_ns.max(self.now + cost));
        let done_ns = start + persist_ns;
        slot.pending_writes.push_back(PendingWrite { record, mode, ticket, done_ns });
        let incarnation = slot.incarnation;
        self.schedule(done_ns, Event::PersistDone { node: id, incarnation });
    }

    pub(super) fn on_persist_done(&mut self, id: NodeId, incarnation: u64) {
        let now = self.now;
        let slot = &mut self.nodes[id.index()];
        if slot.incarnation != incarnation {
            return;
        }
        while slot.pending_writes.front().is_some_and(|w| w.done_ns <= now) {
            let write = slot.pending_writes.pop_front().expect("front exists");
            debug_assert_eq!(write.ticket, slot.durable_count);
            write.mode.store(&mut slot.durable, write.record);
            slot.durable_count += 1;
        }
        // The node sends what waited, after whatever it is busy with.
        let durable = slot.durable_count;
        self.run_step(id, 0, |runner, now, actions| runner.writes_durable(now, durable, actions));
    }
}
