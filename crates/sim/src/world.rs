//! The discrete-event engine: virtual time in ns, one event queue ordered by (time, sequence),
//! nodes with clocks, CPU queues, timers and durable storage, a faulty network, and the
//! workload clients that drive everything and record the history.

use crate::clock::SimClock;
use crate::config::SimConfig;
use crate::faults::{Fault, RandomPlanScope};
use crate::workload::{GeneratedPart, Generator};
use ordo_check::history::{EventKind, HistoryEvent, OpKind};
use ordo_core::{
    Action, ClockReading, CommandResult, Deadline, FailureBudget, GlobalChecker, NodeId, NodeRunner, NodeSpec, NodeStats, PersistMode,
    Protocol, Role, RunnerSetup, Submission, Targets, TimerFiring, Topology,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;

/// An input waiting for a node's CPU.
pub(crate) enum Input<P: Protocol> {
    /// `sequence`: the message's number on its link, in sending order.
    Message { from: NodeId, message: P::Message, size: usize, sequence: u64 },
    Timer { timer: P::Timer, generation: u64 },
    Submit(Submission),
}

/// Something that happens at a point of simulated time.
enum Event<P: Protocol> {
    Arrive { to: NodeId, input: Input<P> },
    TimerFire { node: NodeId, timer: P::Timer, generation: u64 },
    Wake { node: NodeId, incarnation: u64 },
    PersistDone { node: NodeId, incarnation: u64 },
    ClientNext { client: usize },
    ClientArrival { client: usize },
    ClientTimeout { client: usize, op: u64 },
    Fault(usize),
    Heal(usize),
    AgreementCheck,
}

/// A write issued but not yet durable.
struct PendingWrite<P: Protocol> {
    record: P::Durable,
    mode: PersistMode,
    ticket: u64,
    done_ns: u64,
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
    incarnation: u64,
    pub clock: SimClock,
    costed: bool,
    busy_until: u64,
    paused_until: u64,
    wake_pending: bool,
    inbox: VecDeque<Input<P>>,
    /// The node's disk: what a restart reads back.
    durable: Vec<P::Durable>,
    /// Writes issued and not yet durable, in ticket order.
    pending_writes: VecDeque<PendingWrite<P>>,
    /// Writes of this incarnation that are durable.
    durable_count: u64,
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
}

/// An operation a workload client is waiting on.
struct Outstanding {
    op: u64,
    parts: Vec<GeneratedPart>,
    arrival_ns: u64,
}

/// History client ids of the second and later keys of a multi-key operation start here, so that
/// each key's part is one operation of its own history client (one outstanding each).
pub const HISTORY_PART_CLIENT_BASE: u64 = 1 << 40;
/// Most keys of one operation the history can record.
const PARTS_MAX: u64 = 8;

/// The history client id of part `part` of an operation by history process `process`.
fn history_client(process: u64, part: usize) -> u64 {
    assert!((part as u64) < PARTS_MAX, "at most {PARTS_MAX} keys per recorded operation");
    if part == 0 { process } else { HISTORY_PART_CLIENT_BASE + process * PARTS_MAX + part as u64 }
}

/// A simulated application thread using one protocol client node.
pub(crate) struct WorkloadClient {
    pub node: NodeId,
    pub site: usize,
    /// The history's client id; replaced after an operation of unknown outcome.
    process: u64,
    outstanding: Option<Outstanding>,
    backlog: VecDeque<u64>,
    pub backlog_drops: u64,
    pub last_ok_ns: u64,
    pub latencies_ns: Vec<u64>,
}

/// Per-link order: each link is FIFO unless a reorder fault delays a message on purpose.
#[derive(Default)]
struct LinkState {
    /// Messages sent on the link so far.
    sent: u64,
    /// The latest arrival time scheduled on the link: a later message never arrives before it.
    last_arrival_ns: u64,
    /// The highest link sequence number delivered so far.
    delivered: Option<u64>,
}

/// Network fault state, changed by fault events.
#[derive(Default)]
struct NetworkFaults {
    partitions: Vec<(usize, Vec<bool>)>,
    loss: Vec<(usize, f64)>,
    duplicate: Vec<(usize, f64)>,
    reorder: Vec<(usize, f64, u64)>,
}

/// Run outcomes the report is built from.
pub(crate) struct Outcome {
    pub committed: u64,
    pub failed: u64,
    pub unknown: u64,
    pub events: u64,
    pub agreement_error: Option<String>,
    /// Crashes that happened, by role.
    pub crash_by_role: BTreeMap<String, u64>,
    /// The first violation the protocol's global checker found.
    pub global_error: Option<String>,
    /// Observations the global checker accepted.
    pub observations: u64,
    pub fault_counts: BTreeMap<String, u64>,
    pub network: crate::report::NetworkReport,
}

/// The whole simulated world of one run.
pub(crate) struct World<P: Protocol> {
    pub config: SimConfig,
    protocol_config: P::Config,
    pub topology: Arc<Topology>,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slab: Vec<Option<Event<P>>>,
    free: Vec<u32>,
    sequence: u64,
    pub nodes: Vec<NodeSlot<P>>,
    pub clients: Vec<WorkloadClient>,
    generator: Generator,
    network_rng: ChaCha8Rng,
    workload_rng: ChaCha8Rng,
    clock_rng: ChaCha8Rng,
    jitter: Option<Exp<f64>>,
    faults: Vec<Fault>,
    /// Faults at this index and after were drawn from the seed.
    random_faults_from: usize,
    network_faults: NetworkFaults,
    /// Links by (from, to); a fixed hasher, and never iterated.
    links: rustc_hash::FxHashMap<(NodeId, NodeId), LinkState>,
    actions: Vec<Action<P>>,
    checker: Option<Box<dyn GlobalChecker<P>>>,
    pub history: Vec<HistoryEvent>,
    next_process: u64,
    next_op: u64,
    pub outcome: Outcome,
}

/// Derives independent random streams from one seed.
fn stream(seed: u64, salt: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(salt))
}

fn build_topology<P: Protocol>(config: &SimConfig, protocol_config: &P::Config) -> Topology {
    let sites = config.latency.sites.len();
    let mut nodes = Vec::new();
    let mut shards = Vec::new();
    for shard in 0..config.shards {
        let mut members = Vec::new();
        for rank in 0..config.replicas {
            let id = NodeId(nodes.len() as u32);
            nodes.push(NodeSpec { id, role: Role::Replica, site: rank % sites, shard: Some(shard), machine: None });
            members.push(id);
        }
        shards.push(members.into());
    }
    let first_extra = nodes.len();
    let extra_roles = P::extra_roles(config.replicas, protocol_config);
    let extras = extra_roles.len();
    let colocated = config.colocate_clients && extras > 0;
    for (index, role) in extra_roles.into_iter().enumerate() {
        let machine = colocated.then_some(index);
        nodes.push(NodeSpec { id: NodeId(nodes.len() as u32), role, site: index % sites, shard: None, machine });
    }
    for client in 0..config.clients {
        // A co-located client shares its extra node's machine, hence its site.
        let (site, machine) = if colocated {
            let host = &nodes[first_extra + client % extras];
            (host.site, host.machine)
        } else {
            (client % sites, None)
        };
        nodes.push(NodeSpec { id: NodeId(nodes.len() as u32), role: Role::Client, site, shard: None, machine });
    }
    Topology {
        nodes,
        shards,
        f: config.f(),
        sites: config.latency.sites.clone(),
        site_delay_ns: config.latency.matrix_ns(),
    }
}

fn new_state_machine() -> Box<dyn ordo_core::StateMachine> {
    Box::new(ordo_core::KvStore::new())
}

impl<P: Protocol> World<P> {
    /// Builds the world; fails on a configuration that cannot run.
    pub fn new(config: SimConfig) -> Result<Self, String> {
        config.validate()?;
        let protocol_config: P::Config = toml::Value::Table(config.protocol.clone())
            .try_into()
            .map_err(|e| format!("[protocol] options for {}: {e}", P::NAME))?;
        P::validate_config(&protocol_config)?;
        if config.shards > 1 && !P::supports_shards() {
            return Err(format!("{} does not support partial replication: use --shards 1", P::NAME));
        }
        let topology = Arc::new(build_topology::<P>(&config, &protocol_config));
        let jitter = (config.latency.jitter_mean_ns > 0)
            .then(|| Exp::new(1.0 / config.latency.jitter_mean_ns as f64).expect("positive"));
        let mut world = World {
            generator: Generator::new(&config.workload),
            network_rng: stream(config.seed, 1),
            workload_rng: stream(config.seed, 2),
            clock_rng: stream(config.seed, 3),
            jitter,
            protocol_config,
            topology,
            now: 0,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            sequence: 0,
            nodes: Vec::new(),
            clients: Vec::new(),
            faults: Vec::new(),
            random_faults_from: usize::MAX,
            network_faults: NetworkFaults::default(),
            links: rustc_hash::FxHashMap::default(),
            actions: Vec::new(),
            checker: P::global_checker(),
            history: Vec::new(),
            next_process: config.clients as u64,
            next_op: 0,
            outcome: Outcome {
                committed: 0,
                failed: 0,
                unknown: 0,
                events: 0,
                agreement_error: None,
                crash_by_role: BTreeMap::new(),
                global_error: None,
                observations: 0,
                fault_counts: BTreeMap::new(),
                network: Default::default(),
            },
            config,
        };
        world.create_nodes();
        world.plan_faults();
        // The random plan may have drawn a write latency: later writes take it.
        let at_once = world.config.persist_ns == 0;
        world.nodes.iter_mut().for_each(|slot| slot.runner.set_durable_at_once(at_once));
        world.start_clients();
        Ok(world)
    }

    fn create_nodes(&mut self) {
        let setup = RunnerSetup {
            topology: self.topology.clone(),
            config: self.protocol_config.clone(),
            run_seed: self.config.seed,
            new_state_machine,
            check_invariants: self.config.check_invariants,
        };
        for spec in self.topology.nodes.clone() {
            let costed = spec.role != Role::Client;
            let mut runner = NodeRunner::new(spec.id, setup.clone());
            runner.set_durable_at_once(self.config.persist_ns == 0);
            self.nodes.push(NodeSlot {
                runner,
                clock: SimClock::new(&self.config.clock),
                spec: spec.clone(),
                incarnation: 0,
                costed,
                busy_until: 0,
                paused_until: 0,
                wake_pending: false,
                inbox: VecDeque::new(),
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
                    outstanding: None,
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

    fn boot(&mut self, id: NodeId) {
        let slot = &mut self.nodes[id.index()];
        slot.durable_count = 0;
        let (incarnation, durable) = (slot.incarnation, slot.durable.clone());
        self.run_step(id, 0, |runner, now, actions| runner.boot(now, incarnation, durable, actions));
    }

    fn plan_faults(&mut self) {
        let mut faults = self.config.faults.faults.clone();
        if self.config.faults.random {
            let shards: Vec<Vec<u32>> = self.topology.shards.iter().map(|s| s.iter().map(|n| n.0).collect()).collect();
            let all_nodes: Vec<u32> = self.topology.nodes.iter().map(|n| n.id.0).collect();
            let extra_roles = self.extra_role_budgets();
            let scope = RandomPlanScope {
                shards: &shards,
                all_nodes: &all_nodes,
                f: self.config.f(),
                crash_model: P::crash_model(),
                duration_ns: self.config.duration_ns,
                extra_roles: &extra_roles,
            };
            let mut rng = stream(self.config.seed, 4);
            self.random_faults_from = faults.len();
            faults.extend(self.config.faults.draw_random(&mut rng, &scope));
            // The durable-write latency is part of the world drawn from the seed, so that crashes
            // land between a write and the sends that wait for it.
            self.config.persist_ns = [0, 5_000, 50_000][rng.random_range(0..3)];
        }
        for (index, fault) in faults.iter().enumerate() {
            *self.outcome.fault_counts.entry(fault.name().to_string()).or_default() += 1;
            self.schedule(fault.at_ns(), Event::Fault(index));
        }
        self.faults = faults;
        let checks = 10;
        for i in 1..checks {
            self.schedule(self.config.duration_ns * i / checks, Event::AgreementCheck);
        }
    }

    /// The nodes of each extra role a random plan may fail, with how many may be down at once.
    fn extra_role_budgets(&self) -> Vec<(Vec<u32>, usize)> {
        let mut roles: Vec<Role> = self.topology.nodes.iter().map(|n| n.role).collect();
        roles.sort();
        roles.dedup();
        roles
            .into_iter()
            .filter(|role| !matches!(role, Role::Replica | Role::Client))
            .map(|role| {
                let nodes: Vec<u32> = self.topology.with_role(role).map(|n| n.0).collect();
                let down_max = match P::failure_budget(role) {
                    FailureBudget::Never => 0,
                    FailureBudget::AtMost(count) => count.min(nodes.len()),
                    FailureBudget::Any => nodes.len(),
                };
                (nodes, down_max)
            })
            .collect()
    }

    fn start_clients(&mut self) {
        for client in 0..self.clients.len() {
            // Spread the clients' first operations over 100 µs so they do not all collide.
            let start = self.workload_rng.random_range(0..100_000);
            let event = if self.config.workload.rate_per_client.is_some() {
                Event::ClientArrival { client }
            } else {
                Event::ClientNext { client }
            };
            self.schedule(start, event);
        }
    }

    fn schedule(&mut self, time: u64, event: Event<P>) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.sequence += 1;
        self.queue.push(Reverse((time, self.sequence, slot)));
    }

    /// Runs until the end of the simulated duration.
    pub fn run(&mut self) {
        let end = self.config.duration_ns;
        while let Some(&Reverse((time, _, slot))) = self.queue.peek() {
            if time > end {
                break;
            }
            self.queue.pop();
            let event = self.slab[slot as usize].take().expect("scheduled event present");
            self.free.push(slot);
            debug_assert!(time >= self.now, "time goes forward");
            self.now = time;
            self.outcome.events += 1;
            self.handle(event);
        }
        self.now = end;
        self.check_agreement();
    }

    fn handle(&mut self, event: Event<P>) {
        match event {
            Event::Arrive { to, input } => self.on_arrive(to, input),
            Event::TimerFire { node, timer, generation } => {
                // Stale firings (moved, cancelled, crashed) are dropped here, before the CPU queue.
                if self.nodes[node.index()].runner.is_timer_pending(&timer, generation) {
                    self.on_arrive(node, Input::Timer { timer, generation });
                }
            }
            Event::Wake { node, incarnation } => self.on_wake(node, incarnation),
            Event::PersistDone { node, incarnation } => self.on_persist_done(node, incarnation),
            Event::ClientNext { client } => self.submit_next(client),
            Event::ClientArrival { client } => self.on_client_arrival(client),
            Event::ClientTimeout { client, op } => self.on_client_timeout(client, op),
            Event::Fault(index) => self.start_fault(index),
            Event::Heal(index) => self.heal_fault(index),
            Event::AgreementCheck => self.check_agreement(),
        }
    }

    // ---- nodes and their CPU -------------------------------------------------------------

    fn on_arrive(&mut self, to: NodeId, input: Input<P>) {
        if let Input::Message { from, sequence, .. } = &input {
            let link = self.links.entry((*from, to)).or_default();
            if link.delivered.is_some_and(|delivered| *sequence < delivered) {
                self.outcome.network.delivered_out_of_order += 1;
            }
            link.delivered = link.delivered.max(Some(*sequence));
        }
        let now = self.now;
        let queue_max = self.config.cpu.queue_max;
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
        slot.inbox.push_back(input);
        slot.traffic.queue_len_max = slot.traffic.queue_len_max.max(slot.inbox.len());
        if !slot.wake_pending {
            slot.wake_pending = true;
            let at = slot.busy_until.max(slot.paused_until).max(now);
            let incarnation = slot.incarnation;
            self.schedule(at, Event::Wake { node: to, incarnation });
        }
    }

    fn on_wake(&mut self, id: NodeId, incarnation: u64) {
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
        if let Some(input) = slot.inbox.pop_front() {
            self.process(id, input);
        }
    }

    /// Hands one input to the node now and carries out its effects.
    fn process(&mut self, id: NodeId, input: Input<P>) {
        let slot = &mut self.nodes[id.index()];
        let cpu = &self.config.cpu;
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
    fn run_step(
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

    fn message_cost(&self, id: NodeId, size: usize) -> u64 {
        if !self.nodes[id.index()].costed {
            return 0;
        }
        self.config.cpu.per_message_ns + (size as f64 * self.config.cpu.per_byte_ns) as u64
    }

    /// Performs one action; returns the CPU time used so far in this step.
    fn perform(&mut self, id: NodeId, action: Action<P>, mut cost: u64) -> u64 {
        match action {
            Action::Send { to, message } => {
                let size = postcard::experimental::serialized_size(&message).expect("messages serialize");
                cost += self.message_cost(id, size) * to.len() as u64;
                self.transmit_all(id, &to, message, size, self.now + cost);
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

    fn observe(&mut self, id: NodeId, observation: &P::Observation) {
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

    fn persist(&mut self, id: NodeId, record: P::Durable, mode: PersistMode, ticket: u64, cost: u64) {
        let persist_ns = self.config.persist_ns;
        let slot = &mut self.nodes[id.index()];
        assert_eq!(ticket, slot.durable_count + slot.pending_writes.len() as u64, "tickets are issued in order");
        if slot.pending_writes.is_empty() && slot.runner.writes_durable_count() > ticket {
            // The runner took it as durable at once (no write latency).
            store(&mut slot.durable, record, mode);
            slot.durable_count += 1;
            return;
        }
        let start = slot.pending_writes.back().map_or(self.now + cost, |w| w.done_ns.max(self.now + cost));
        let done_ns = start + persist_ns;
        slot.pending_writes.push_back(PendingWrite { record, mode, ticket, done_ns });
        let incarnation = slot.incarnation;
        self.schedule(done_ns, Event::PersistDone { node: id, incarnation });
    }

    fn on_persist_done(&mut self, id: NodeId, incarnation: u64) {
        let now = self.now;
        let slot = &mut self.nodes[id.index()];
        if slot.incarnation != incarnation {
            return;
        }
        while slot.pending_writes.front().is_some_and(|w| w.done_ns <= now) {
            let write = slot.pending_writes.pop_front().expect("front exists");
            debug_assert_eq!(write.ticket, slot.durable_count);
            store(&mut slot.durable, write.record, write.mode);
            slot.durable_count += 1;
        }
        // The node sends what waited, after whatever it is busy with.
        let durable = slot.durable_count;
        self.run_step(id, 0, |runner, now, actions| runner.writes_durable(now, durable, actions));
    }

    // ---- the network ---------------------------------------------------------------------

    fn transmit_all(&mut self, from: NodeId, to: &Targets, message: P::Message, size: usize, depart_ns: u64) {
        let count = to.len();
        for (index, target) in to.iter().enumerate() {
            if index + 1 == count {
                self.transmit(from, target, message, size, depart_ns);
                return;
            }
            self.transmit(from, target, message.clone(), size, depart_ns);
        }
    }

    fn transmit(&mut self, from: NodeId, to: NodeId, message: P::Message, size: usize, depart_ns: u64) {
        let sender = &mut self.nodes[from.index()].traffic;
        sender.messages_sent += 1;
        sender.bytes_sent += size as u64;
        self.outcome.network.sent += 1;
        let link = self.links.entry((from, to)).or_default();
        let sequence = link.sent;
        link.sent += 1;
        if from == to {
            let input = Input::Message { from, message, size, sequence };
            self.schedule(depart_ns, Event::Arrive { to, input });
            return;
        }
        if self.network_faults.partitions.iter().any(|(_, side)| side[from.index()] != side[to.index()]) {
            self.outcome.network.dropped_partition += 1;
            return;
        }
        let loss: f64 = self.network_faults.loss.iter().map(|(_, p)| *p).fold(0.0, f64::max);
        if loss > 0.0 && self.network_rng.random_bool(loss) {
            self.outcome.network.dropped_loss += 1;
            return;
        }
        let duplicate: f64 = self.network_faults.duplicate.iter().map(|(_, p)| *p).fold(0.0, f64::max);
        if duplicate > 0.0 && self.network_rng.random_bool(duplicate) {
            self.outcome.network.duplicated += 1;
            let arrival = self.arrival_ns(from, to, depart_ns);
            let input = Input::Message { from, message: message.clone(), size, sequence };
            self.schedule(arrival, Event::Arrive { to, input });
        }
        let arrival = self.arrival_ns(from, to, depart_ns);
        self.schedule(arrival, Event::Arrive { to, input: Input::Message { from, message, size, sequence } });
    }

    /// When a message leaving now arrives: the link's delay plus jitter, but never before an
    /// earlier message of the same link (links are FIFO; equal times keep sending order, as the
    /// event queue breaks ties by scheduling order), unless a reorder fault delays it on purpose.
    fn arrival_ns(&mut self, from: NodeId, to: NodeId, depart_ns: u64) -> u64 {
        let (base, jitter) = if self.topology.same_machine(from, to) {
            (self.config.latency.machine_ns, 0)
        } else {
            let sites = (self.nodes[from.index()].spec.site, self.nodes[to.index()].spec.site);
            let jitter = self.jitter.as_ref().map_or(0.0, |j| j.sample(&mut self.network_rng)) as u64;
            (self.config.latency.base_ns(sites.0, sites.1), jitter)
        };
        let mut extra = 0;
        for &(_, probability, delay_max_ns) in &self.network_faults.reorder {
            if self.network_rng.random_bool(probability) {
                extra = extra.max(self.network_rng.random_range(0..delay_max_ns));
            }
        }
        let link = self.links.entry((from, to)).or_default();
        let in_order = (depart_ns + base + jitter).max(link.last_arrival_ns);
        if extra > 0 {
            // Delayed past its successors: the one way a link reorders.
            self.outcome.network.reordered += 1;
            return in_order + extra;
        }
        link.last_arrival_ns = in_order;
        in_order
    }

    // ---- faults --------------------------------------------------------------------------

    fn start_fault(&mut self, index: usize) {
        let node_count = self.nodes.len();
        match self.faults[index].clone() {
            Fault::Crash { node, restart_ns, .. } => {
                if index >= self.random_faults_from && self.would_exceed_budget(NodeId(node)) {
                    *self.outcome.fault_counts.entry("crash_skipped".to_string()).or_default() += 1;
                    return;
                }
                self.crash(NodeId(node));
                if let Some(at) = restart_ns {
                    self.schedule(at.max(self.now), Event::Heal(index));
                }
            }
            Fault::Pause { node, until_ns, .. } => {
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.paused_until = slot.paused_until.max(until_ns);
                }
            }
            Fault::Partition { side, until_ns, .. } => {
                let mut mask = vec![false; node_count];
                side.iter().filter(|&&n| (n as usize) < node_count).for_each(|&n| mask[n as usize] = true);
                self.network_faults.partitions.push((index, mask));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Loss { probability, until_ns, .. } => {
                self.network_faults.loss.push((index, probability.clamp(0.0, 1.0)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Duplicate { probability, until_ns, .. } => {
                self.network_faults.duplicate.push((index, probability.clamp(0.0, 1.0)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Reorder { probability, delay_max_ns, until_ns, .. } => {
                self.network_faults.reorder.push((index, probability.clamp(0.0, 1.0), delay_max_ns.max(1)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::ClockJump { node, delta_ns, .. } => {
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.clock.jump(delta_ns);
                }
            }
            Fault::ClockDrift { node, drift_ppm, .. } => {
                let now = self.now;
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.clock.set_drift(now, drift_ppm);
                }
            }
        }
    }

    fn heal_fault(&mut self, index: usize) {
        if let Fault::Crash { node, .. } = self.faults[index] {
            let id = NodeId(node);
            if self.nodes.get(id.index()).is_some_and(|slot| !slot.is_up()) {
                self.boot(id);
            }
            return;
        }
        let faults = &mut self.network_faults;
        faults.partitions.retain(|(i, _)| *i != index);
        faults.loss.retain(|(i, _)| *i != index);
        faults.duplicate.retain(|(i, _)| *i != index);
        faults.reorder.retain(|(i, _, _)| *i != index);
    }

    /// Whether crashing `id` now would leave more nodes of its role down than the protocol's
    /// fault model allows: for replicas, more than f of its shard crashed or still recovering
    /// (for protocols that rejoin from their peers a recovering replica counts as failed); for an
    /// extra role, more than its failure budget.
    fn would_exceed_budget(&self, id: NodeId) -> bool {
        let Some(slot) = self.nodes.get(id.index()) else { return false };
        let Some(shard) = slot.spec.shard else {
            let role = slot.spec.role;
            let down = self.nodes.iter().filter(|other| other.spec.role == role && !other.is_up()).count();
            return match P::failure_budget(role) {
                FailureBudget::Never => true,
                FailureBudget::AtMost(count) => down >= count,
                FailureBudget::Any => false,
            };
        };
        let failed = self.topology.shards[shard]
            .iter()
            .filter(|&&replica| replica != id)
            .filter(|&&replica| self.nodes[replica.index()].runner.node().is_none_or(|node| node.is_recovering()))
            .count();
        failed >= self.config.f()
    }

    fn crash(&mut self, id: NodeId) {
        let Some(slot) = self.nodes.get_mut(id.index()) else { return };
        if !slot.runner.crash() {
            return;
        }
        let role = format!("{:?}", slot.spec.role).to_lowercase();
        *self.outcome.crash_by_role.entry(role).or_default() += 1;
        slot.traffic.crashes += 1;
        slot.incarnation += 1;
        slot.inbox.clear();
        slot.pending_writes.clear();
        slot.wake_pending = false;
        slot.busy_until = 0;
        slot.paused_until = 0;
    }

    // ---- workload clients ----------------------------------------------------------------

    fn submit_next(&mut self, client: usize) {
        if self.clients[client].outstanding.is_some() || self.now >= self.config.duration_ns {
            return;
        }
        let arrival_ns = match self.config.workload.rate_per_client {
            Some(_) => match self.clients[client].backlog.pop_front() {
                Some(arrival) => arrival,
                None => return,
            },
            None => self.now,
        };
        let op = self.next_op;
        self.next_op += 1;
        let generated = self.generator.next(&mut self.workload_rng, client, op);
        let state = &mut self.clients[client];
        for (index, part) in generated.parts.iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(state.process, index),
                id: None,
                kind: EventKind::Invoke,
                time_ns: self.now,
                op: part.kind,
                key: part.key.clone(),
                value: part.value.clone(),
            });
        }
        state.outstanding = Some(Outstanding { op, parts: generated.parts, arrival_ns });
        let node = state.node;
        self.schedule(self.now + self.config.workload.op_timeout_ns, Event::ClientTimeout { client, op });
        self.on_arrive(node, Input::Submit(Submission { op, command: generated.command }));
    }

    fn on_client_arrival(&mut self, client: usize) {
        let rate = self.config.workload.rate_per_client.expect("open loop");
        if self.now >= self.config.duration_ns {
            return;
        }
        let state = &mut self.clients[client];
        if state.backlog.len() >= self.config.workload.backlog_max {
            state.backlog_drops += 1;
        } else {
            state.backlog.push_back(self.now);
        }
        let gap = Exp::new(rate).expect("positive rate").sample(&mut self.workload_rng);
        self.schedule(self.now + (gap * 1e9) as u64, Event::ClientArrival { client });
        self.submit_next(client);
    }

    fn on_complete(&mut self, node: NodeId, op: u64, result: CommandResult) {
        let Some(client) = self.clients.iter().position(|c| c.node == node) else {
            panic!("{node} completed an operation but is not a client");
        };
        let state = &mut self.clients[client];
        let Some(outstanding) = state.outstanding.take_if(|o| o.op == op) else {
            return; // a late completion of an operation the client already gave up on
        };
        let failed = matches!(result, CommandResult::Error(_));
        if failed {
            self.outcome.failed += 1;
        } else {
            self.outcome.committed += 1;
            state.last_ok_ns = self.now;
            state.latencies_ns.push(self.now - outstanding.arrival_ns);
        }
        let read_values: Vec<Option<String>> = match result {
            CommandResult::Value(v) => vec![Some(String::from_utf8_lossy(&v).into_owned())],
            CommandResult::Values(values) => {
                values.into_iter().map(|v| v.map(|v| String::from_utf8_lossy(&v).into_owned())).collect()
            }
            _ => Vec::new(),
        };
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            let (kind, value) = match (failed, part.kind) {
                (true, _) => (EventKind::Fail, part.value),
                (false, OpKind::Read) => (EventKind::Ok, read_values.get(index).cloned().flatten()),
                (false, _) => (EventKind::Ok, part.value),
            };
            let client = history_client(state.process, index);
            self.history.push(HistoryEvent {
                client,
                id: None,
                kind,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value,
            });
        }
        self.schedule(self.now, Event::ClientNext { client });
    }

    fn on_client_timeout(&mut self, client: usize, op: u64) {
        let state = &mut self.clients[client];
        let Some(outstanding) = state.outstanding.take_if(|o| o.op == op) else { return };
        self.outcome.unknown += 1;
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(state.process, index),
                id: None,
                kind: EventKind::Info,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value: part.value,
            });
        }
        // After an unknown outcome the history never reuses the client id.
        state.process = self.next_process;
        self.next_process += 1;
        self.schedule(self.now, Event::ClientNext { client });
    }

    // ---- checks --------------------------------------------------------------------------

    fn check_agreement(&mut self) {
        if self.outcome.agreement_error.is_some() {
            return;
        }
        let digests: Vec<(NodeId, Vec<ordo_core::KeyDigest>)> = self
            .nodes
            .iter()
            .filter_map(|slot| {
                let machine = slot.runner.node()?.state_machine()?;
                Some((slot.spec.id, machine.key_digests()))
            })
            .collect();
        if let Err(violation) = ordo_check::agreement::check_agreement(&digests) {
            self.outcome.agreement_error = Some(format!("at {:.3}s: {violation}", self.now as f64 / 1e9));
        }
    }
}

fn store<D>(durable: &mut Vec<D>, record: D, mode: PersistMode) {
    if mode == PersistMode::Replace {
        durable.clear();
    }
    durable.push(record);
}
