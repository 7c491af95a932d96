//! The discrete-event engine: virtual time in ns, one event queue ordered by (time, sequence),
//! nodes with clocks, CPU queues, timers and durable storage, a faulty network, and the
//! workload clients that drive everything and record the history. Each concern in a file:
//! `nodes` (runners, CPU queues, disks), `links` (the network), `fault_injection`, `clients`
//! (workload and history); this file holds the event loop.

mod clients;
mod fault_injection;
mod inbox;
mod links;
mod nodes;
mod queue;

pub(crate) use clients::WorkloadClient;
use links::{Links, NetworkFaults};
pub(crate) use nodes::NodeSlot;

use crate::clock::SimClock;
use crate::config::SimConfig;
use crate::faults::{Fault, RandomPlanScope};
use crate::workload::{self, GeneratedPart, Generator};
use ordo_check::history::{EventKind, HistoryEvent, OpKind};
use ordo_core::{
    Action, ClockReading, CommandResult, Deadline, FailureBudget, GlobalChecker, NodeId, NodeRunner, NodeSpec,
    NodeStats, PersistMode, Protocol, Role, RunnerSetup, Submission, Targets, TimerFiring, Topology,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// An input waiting for a node's CPU.
pub(crate) enum Input<P: Protocol> {
    /// `sequence`: the message's number on its link, in sending order.
    Message {
        from: NodeId,
        message: P::Message,
        size: usize,
        sequence: u64,
    },
    Timer {
        timer: P::Timer,
        generation: u64,
    },
    Submit(Submission),
    /// The workload gave up on this operation (pipelining clients only).
    Abandon(u64),
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
    queue: queue::EventQueue<Event<P>>,
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
    /// CPU profiles of the roles the run names (`SimConfig::cpu_roles`).
    cpu_by_role: BTreeMap<Role, crate::config::CpuCost>,
    /// Every link's order.
    links: Links,
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

/// Replicas by rank over the sites, then the protocol's extra roles and the clients: round-robin
/// over the sites unless the run places their role (`SimConfig::placement`), or on their extra
/// node's machine when co-located.
fn build_topology<P: Protocol>(
    config: &SimConfig,
    protocol_config: &P::Config,
    placed: &crate::placement::Placements,
) -> Topology {
    // Own sites come after the matrix's: round-robin placement uses the matrix's sites only.
    let sites = config.latency.sites.len();
    let site_of = |role: Role, index: usize| placed.sites.get(&role).copied().unwrap_or(index % sites);
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
        nodes.push(NodeSpec { id: NodeId(nodes.len() as u32), role, site: site_of(role, index), shard: None, machine });
    }
    for client in 0..config.clients {
        // A co-located client shares its extra node's machine, hence its site.
        let (site, machine) = if colocated {
            let host = &nodes[first_extra + client % extras];
            (host.site, host.machine)
        } else {
            (site_of(Role::Client, client), None)
        };
        nodes.push(NodeSpec { id: NodeId(nodes.len() as u32), role: Role::Client, site, shard: None, machine });
    }
    Topology {
        nodes,
        shards,
        f: config.f(),
        sites: placed.latency.sites.clone(),
        site_delay_ns: placed.latency.matrix_ns(),
    }
}

impl<P: Protocol> World<P> {
    /// Builds the world; fails on a configuration that cannot run.
    pub fn new(mut config: SimConfig) -> Result<Self, String> {
        config.validate()?;
        let protocol_config: P::Config = toml::Value::Table(config.protocol.clone())
            .try_into()
            .map_err(|e| format!("[protocol] options for {}: {e}", P::NAME))?;
        P::validate_config(&protocol_config)?;
        let window = P::client_window(&protocol_config);
        if config.workload.outstanding_max > window {
            return Err(format!(
                "workload: outstanding_max {} is more than {}'s clients take at once ({window})",
                config.workload.outstanding_max,
                P::NAME
            ));
        }
        if config.shards > 1 && !P::supports_shards() {
            return Err(format!("{} does not support partial replication: use --shards 1", P::NAME));
        }
        let placed = crate::placement::resolve(&config.placement, &config.latency)?;
        let cpu_by_role = crate::placement::resolve_cpu(&config.cpu_roles, &config.cpu)?;
        let topology = Arc::new(build_topology::<P>(&config, &protocol_config, &placed));
        // Own sites join the matrix the links read.
        config.latency = placed.latency;
        let jitter = (config.latency.jitter_mean_ns > 0)
            .then(|| Exp::new(1.0 / config.latency.jitter_mean_ns as f64).expect("positive"));
        let links = Links::new(topology.nodes.len());
        let mut world = World {
            generator: Generator::new(&config.workload),
            network_rng: stream(config.seed, 1),
            workload_rng: stream(config.seed, 2),
            clock_rng: stream(config.seed, 3),
            jitter,
            protocol_config,
            topology,
            now: 0,
            queue: queue::EventQueue::default(),
            nodes: Vec::new(),
            clients: Vec::new(),
            faults: Vec::new(),
            random_faults_from: usize::MAX,
            network_faults: NetworkFaults::default(),
            links,
            cpu_by_role,
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
        world.plan_faults()?;
        // The random plan may have drawn a write latency: later writes take it.
        let at_once = world.config.persist_ns == 0;
        world.nodes.iter_mut().for_each(|slot| slot.runner.set_durable_at_once(at_once));
        world.start_clients();
        Ok(world)
    }

    fn schedule(&mut self, time: u64, event: Event<P>) {
        self.queue.push(time, event);
    }

    /// Schedules an event a fixed delay from now (the queue keeps these apart, already in order).
    fn schedule_after_fixed(&mut self, delay_ns: u64, event: Event<P>) {
        self.queue.push_in_order(self.now + delay_ns, event);
    }

    /// Runs until the end of the simulated duration.
    pub fn run(&mut self) {
        while let Some((time, event)) = self.queue.pop_through(self.config.duration_ns) {
            debug_assert!(time >= self.now, "time goes forward");
            self.now = time;
            self.outcome.events += 1;
            self.handle(event);
        }
        self.now = self.config.duration_ns;
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
            Event::ClientNext { client } => self.fill_window(client),
            Event::ClientArrival { client } => self.on_client_arrival(client),
            Event::ClientTimeout { client, op } => self.on_client_timeout(client, op),
            Event::Fault(index) => self.start_fault(index),
            Event::Heal(index) => self.heal_fault(index),
            Event::AgreementCheck => self.check_agreement(),
        }
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
