//! A small deterministic cluster for step-by-step scenario tests, generic over any [`Protocol`]
//! and any [`Topology`] (several shards, extra roles such as proxies or a sequencer, sites).
//!
//! [`Cluster`] holds the nodes of one protocol, each in a [`NodeRunner`] (the same effect
//! interpreter the simulator and the runtime use), a network of pending messages, and a true
//! time that moves only when told; each node reads it through its own clock, which a test can
//! offset, jump or drift. Nothing happens by itself: a
//! test submits commands, delivers messages one at a time (first in, first out, or by choice),
//! drops or duplicates them, fires timers or lets time pass, crashes and restarts nodes, and reads
//! completions, `status()` and `stats()`. Every input is followed by the node's
//! `check_invariants`.
//!
//! Durability: by default a persist is durable at once, so sends that wait for it leave at once.
//! [`Cluster::set_manual_durability`] holds a node's persists (and the sends that wait for them)
//! until [`Cluster::flush`]; [`Cluster::flush_without_sends`] makes the writes durable but keeps
//! the sends held, so that [`Cluster::crash`] can strike between a write and the messages that
//! wait for it. A crash forgets the node's volatile state, its pending timers, its writes not yet
//! durable, the sends held for them and the messages addressed to it; messages it had already
//! sent stay in the network. [`Cluster::restart`] rebuilds the node from its durable records.
//!
//! The kit also checks clients: a client may complete only its outstanding submission, once.
//!
//! Node ids with [`Cluster::new`]: replicas are `0..n` (shard 0, in rank order), clients
//! `n..n + k`; one site. [`Cluster::with_topology`] takes any topology.
//!
//! When the protocol has a [`ordo_core::GlobalChecker`], every observation goes through it and a
//! violation panics at the step that produced it.

#[cfg(test)]
pub mod random_peers;
pub mod script;

use ordo_core::{
    Action, ClockReading, CommandResult, Deadline, Destinations, GlobalChecker, KvStore, Node, NodeId, NodeRunner,
    NodeSpec, NodeStats, PersistMode, Protocol, Role, RunnerSetup, StateMachine, Submission, Topology,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

/// Most inputs [`Cluster::deliver_all`] and [`Cluster::run_for`] process before they decide the
/// protocol is looping.
pub const STEP_LIMIT: usize = 5_000_000;

/// A message in the network.
pub struct Envelope<P: Protocol> {
    /// Unique, in sending order.
    pub id: u64,
    /// Sender.
    pub from: NodeId,
    /// Destination.
    pub to: NodeId,
    /// The message.
    pub message: P::Message,
}

impl<P: Protocol> Clone for Envelope<P> {
    fn clone(&self) -> Self {
        Envelope { id: self.id, from: self.from, to: self.to, message: self.message.clone() }
    }
}

impl<P: Protocol> fmt::Debug for Envelope<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {} → {}: {:?}", self.id, self.from, self.to, self.message)
    }
}

/// A result a client handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The client node.
    pub client: NodeId,
    /// The submission's number.
    pub op: u64,
    /// Its result.
    pub result: CommandResult,
}

/// A node's clock: true time scaled by its drift, plus an offset a test sets or jumps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KitClock {
    /// Added to the reading (negative: behind true time).
    pub offset_ns: i64,
    /// Rate error in parts per million (positive: runs fast), counted from true time 0.
    pub drift_ppm: i64,
    /// The error bound the clock claims.
    pub error_ns: u64,
}

impl KitClock {
    /// What the clock reads at true time `true_ns`.
    pub fn read(&self, true_ns: u64) -> ClockReading {
        let drifted = true_ns as i128 + true_ns as i128 * self.drift_ppm as i128 / 1_000_000;
        let local = (drifted + self.offset_ns as i128).max(0) as u64;
        ClockReading { local_ns: local, error_bound_ns: self.error_ns }
    }

    /// The true time that `local_ns` of elapsed local time takes.
    fn true_duration(&self, local_ns: u64) -> u64 {
        (local_ns as i128 * 1_000_000 / (1_000_000 + self.drift_ppm as i128)).max(0) as u64
    }

    /// The first true time at or after `now` when the clock reads at least `local_ns`.
    fn true_time_of(&self, local_ns: u64, now: u64) -> u64 {
        let reading = self.read(now).local_ns;
        if reading >= local_ns {
            return now;
        }
        let mut at = now + self.true_duration(local_ns - reading);
        while self.read(at).local_ns < local_ns {
            at += 1;
        }
        at
    }
}

/// One node and what the driver keeps for it besides its runner.
struct Slot<P: Protocol> {
    runner: NodeRunner<P>,
    clock: KitClock,
    /// The node's disk: what a restart reads back.
    durable: Vec<P::Durable>,
    /// Writes issued but not yet on disk (manual durability).
    unflushed: Vec<(P::Durable, PersistMode)>,
    /// Writes of this incarnation on disk; the runner hears of them at `flush`.
    on_disk: u64,
    manual_durability: bool,
    /// When each armed timer falls due, in true time, with its generation.
    deadlines: BTreeMap<P::Timer, (u64, u64)>,
    /// For clients: the submission not yet completed.
    /// Submissions not yet completed nor abandoned (clients only).
    outstanding: BTreeSet<u64>,
    incarnation: u64,
}

/// Builds the topology the kit uses: `replicas` replicas in shard 0, then `clients` clients, one
/// site, `f = (replicas - 1) / 2`.
pub fn topology(replicas: usize, clients: usize) -> Topology {
    assert!(replicas > 0, "a cluster has at least one replica");
    let mut nodes = Vec::new();
    for index in 0..replicas + clients {
        let id = NodeId(u32::try_from(index).expect("node ids fit in u32"));
        let (role, shard) = if index < replicas { (Role::Replica, Some(0)) } else { (Role::Client, None) };
        nodes.push(NodeSpec { id, role, site: 0, shard, machine: None });
    }
    let shard: Destinations = nodes.iter().take(replicas).map(|n| n.id).collect();
    Topology {
        nodes,
        shards: vec![shard],
        f: (replicas - 1) / 2,
        sites: vec!["local".to_string()],
        site_delay_ns: vec![vec![0]],
    }
}

/// A deterministic cluster of one protocol, driven step by step.
pub struct Cluster<P: Protocol> {
    topology: Arc<Topology>,
    setup: RunnerSetup<P>,
    now_ns: u64,
    slots: Vec<Slot<P>>,
    network: VecDeque<Envelope<P>>,
    next_envelope: u64,
    next_op: u64,
    completions: Vec<Completion>,
    isolated: BTreeSet<NodeId>,
    partition_drops: u64,
    /// Sends to a node id that names no node, dropped.
    unknown_destination_drops: u64,
    checker: Option<Box<dyn GlobalChecker<P>>>,
    observations: u64,
    actions: Vec<Action<P>>,
    /// Every message put in the network since [`Cluster::keep_sent_log`], when it was called.
    sent_log: Option<Vec<Envelope<P>>>,
}

impl<P: Protocol> Cluster<P> {
    /// `replicas` replicas and `clients` clients with the key-value store, seed 1, all started.
    pub fn new(replicas: usize, clients: usize, config: P::Config) -> Self {
        Self::with_seed(replicas, clients, config, 1)
    }

    /// Like [`Cluster::new`] with the given seed (each node's RNG seed derives from it).
    pub fn with_seed(replicas: usize, clients: usize, config: P::Config, seed: u64) -> Self {
        Self::with_topology(topology(replicas, clients), config, seed)
    }

    /// Every node of `topology`, with the key-value store, all started in id order.
    pub fn with_topology(topology: Topology, config: P::Config, seed: u64) -> Self {
        let mut cluster = Self::stopped_with_topology(topology, config, seed);
        for index in 0..cluster.slots.len() {
            cluster.start(cluster.node_id(index));
        }
        cluster
    }

    /// Like [`Cluster::with_seed`], but no node runs yet: start each with [`Cluster::start`].
    pub fn stopped(replicas: usize, clients: usize, config: P::Config, seed: u64) -> Self {
        Self::stopped_with_topology(topology(replicas, clients), config, seed)
    }

    /// Like [`Cluster::with_topology`], but no node runs yet.
    pub fn stopped_with_topology(topology: Topology, config: P::Config, seed: u64) -> Self {
        let topology = Arc::new(topology);
        let setup = RunnerSetup {
            topology: topology.clone(),
            config,
            run_seed: seed,
            new_state_machine: KvStore::boxed,
            check_invariants: true,
        };
        let slots = (0..topology.nodes.len())
            .map(|index| {
                let mut runner = NodeRunner::new(NodeId(index as u32), setup.clone());
                runner.set_durable_at_once(true);
                Slot {
                    runner,
                    clock: KitClock::default(),
                    durable: Vec::new(),
                    unflushed: Vec::new(),
                    on_disk: 0,
                    manual_durability: false,
                    deadlines: BTreeMap::new(),
                    outstanding: BTreeSet::new(),
                    incarnation: 0,
                }
            })
            .collect();
        Cluster {
            topology,
            setup,
            now_ns: 0,
            slots,
            network: VecDeque::new(),
            next_envelope: 0,
            next_op: 1,
            completions: Vec::new(),
            isolated: BTreeSet::new(),
            partition_drops: 0,
            unknown_destination_drops: 0,
            checker: P::global_checker(),
            observations: 0,
            actions: Vec::new(),
            sent_log: None,
        }
    }

    /// Builds nodes started from now on with this state machine (before any node starts, so all
    /// replicas hold the same kind).
    pub fn set_state_machine(&mut self, new_state_machine: fn() -> Box<dyn StateMachine>) {
        assert!(self.slots.iter().all(|s| !s.runner.is_up()), "choose the state machine before starting nodes");
        self.setup.new_state_machine = new_state_machine;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            slot.runner = NodeRunner::new(NodeId(index as u32), self.setup.clone());
            slot.runner.set_durable_at_once(!slot.manual_durability);
        }
    }

    fn node_id(&self, index: usize) -> NodeId {
        NodeId(u32::try_from(index).expect("node ids fit in u32"))
    }

    // ---- who is who ----------------------------------------------------------------------

    /// The cluster's topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// The replica of rank `rank` in shard 0.
    pub fn replica(&self, rank: usize) -> NodeId {
        self.replica_of(0, rank)
    }

    /// The replica of rank `rank` in `shard`.
    pub fn replica_of(&self, shard: usize, rank: usize) -> NodeId {
        *self.topology.shards[shard].get(rank).unwrap_or_else(|| panic!("no replica of rank {rank} in shard {shard}"))
    }

    /// The `index`-th client.
    pub fn client(&self, index: usize) -> NodeId {
        self.with_role(Role::Client, index)
    }

    /// The `index`-th node with `role`, in id order.
    pub fn with_role(&self, role: Role, index: usize) -> NodeId {
        self.topology.with_role(role).nth(index).unwrap_or_else(|| panic!("no {role:?} number {index}"))
    }

    /// Every replica of shard 0, in rank order.
    pub fn replicas(&self) -> Vec<NodeId> {
        self.topology.shards[0].to_vec()
    }

    /// Every client.
    pub fn clients(&self) -> Vec<NodeId> {
        self.topology.with_role(Role::Client).collect()
    }

    /// The true time in nanoseconds (a node whose clock was not changed reads it exactly).
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// What `node`'s clock reads now.
    pub fn clock_reading(&self, node: NodeId) -> ClockReading {
        self.slots[node.index()].clock.read(self.now_ns)
    }

    /// Sets `node`'s clock (offset, drift and claimed error); timers already armed keep their
    /// true deadlines, as a real timer armed before a clock step would.
    pub fn set_clock(&mut self, node: NodeId, clock: KitClock) {
        self.slots[node.index()].clock = clock;
    }

    /// Moves `node`'s clock by `delta_ns` (backwards when negative).
    pub fn jump_clock(&mut self, node: NodeId, delta_ns: i64) {
        self.slots[node.index()].clock.offset_ns += delta_ns;
    }

    // ---- reading state -------------------------------------------------------------------

    /// True unless the node is crashed (or not started).
    pub fn is_up(&self, node: NodeId) -> bool {
        self.slots[node.index()].runner.is_up()
    }

    /// The running node. Panics if it is down.
    pub fn node(&self, node: NodeId) -> &dyn Node<P> {
        self.slots[node.index()].runner.node().unwrap_or_else(|| panic!("{node} is down"))
    }

    /// The running node as its concrete type. Panics if it is down or of another type.
    pub fn node_as<T: 'static>(&self, node: NodeId) -> &T {
        self.node(node)
            .as_any()
            .downcast_ref::<T>()
            .unwrap_or_else(|| panic!("{node} is not a {}", std::any::type_name::<T>()))
    }

    /// The running node as its concrete type, mutably (to set up a scenario). Panics if it is
    /// down or of another type.
    pub fn node_as_mut<T: 'static>(&mut self, node: NodeId) -> &mut T {
        let running = self.slots[node.index()].runner.node_mut().unwrap_or_else(|| panic!("{node} is down"));
        running
            .as_any_mut()
            .downcast_mut::<T>()
            .unwrap_or_else(|| panic!("{node} is not a {}", std::any::type_name::<T>()))
    }

    /// The node's counters over all its incarnations.
    pub fn total_stats(&self, node: NodeId) -> NodeStats {
        self.slots[node.index()].runner.total_stats()
    }

    /// Observations the global checker has accepted so far.
    pub fn observations(&self) -> u64 {
        self.observations
    }

    /// The node's status line, or `down`.
    pub fn status(&self, node: NodeId) -> String {
        self.slots[node.index()].runner.node().map_or_else(|| "down".to_string(), |n| n.status())
    }

    /// The node's counters. Panics if it is down.
    pub fn stats(&self, node: NodeId) -> &NodeStats {
        self.node(node).stats()
    }

    /// The node's durable records.
    pub fn durable(&self, node: NodeId) -> &[P::Durable] {
        &self.slots[node.index()].durable
    }

    /// Every completion so far, in order.
    pub fn completions(&self) -> &[Completion] {
        &self.completions
    }

    /// The result of submission `op`, once completed.
    pub fn result(&self, op: u64) -> Option<&CommandResult> {
        self.completions.iter().find(|c| c.op == op).map(|c| &c.result)
    }

    /// The client's earliest submission not yet completed, if any.
    pub fn outstanding(&self, client: NodeId) -> Option<u64> {
        self.slots[client.index()].outstanding.first().copied()
    }

    /// Messages dropped because an end was isolated.
    pub fn partition_drops(&self) -> u64 {
        self.partition_drops
    }

    /// From now on, keeps a copy of every message put in the network (sent by a node, injected
    /// or duplicated, including one a partition drops at once), so that a test can check what
    /// was sent after it was delivered. Off by default: the copies cost memory.
    pub fn keep_sent_log(&mut self) {
        self.sent_log.get_or_insert_with(Vec::new);
    }

    /// The messages kept since [`Cluster::keep_sent_log`], in the order they were put in the
    /// network (empty if it was never called).
    pub fn sent_log(&self) -> &[Envelope<P>] {
        self.sent_log.as_deref().unwrap_or(&[])
    }

    // ---- inputs --------------------------------------------------------------------------

    /// Hands `command` to `client` and returns the submission's number. Submissions still
    /// outstanding at that client are abandoned first (one operation at a time, as a simple
    /// application does); [`Cluster::submit_pipelined`] keeps them.
    pub fn submit(&mut self, client: NodeId, command: ordo_core::Command) -> u64 {
        let earlier: Vec<u64> = self.slots[client.index()].outstanding.iter().copied().collect();
        for op in earlier {
            self.abandon(client, op);
        }
        self.submit_pipelined(client, command)
    }

    /// Hands `command` to `client`, keeping its other submissions in flight (at most the
    /// protocol's client window), and returns the submission's number.
    pub fn submit_pipelined(&mut self, client: NodeId, command: ordo_core::Command) -> u64 {
        assert!(self.topology.node(client).role == Role::Client, "{client} is not a client");
        let op = self.next_op;
        self.next_op += 1;
        if !self.is_up(client) {
            return op;
        }
        let outstanding = &mut self.slots[client.index()].outstanding;
        assert!(outstanding.len() < P::client_window(&self.setup.config), "{client} has a full window");
        outstanding.insert(op);
        self.step(client.index(), |runner, now, actions| runner.submit(now, Submission { op, command }, actions));
        op
    }

    /// Tells `client` the application gave up on submission `op`: it must never complete it.
    pub fn abandon(&mut self, client: NodeId, op: u64) {
        if self.slots[client.index()].outstanding.remove(&op) && self.is_up(client) {
            self.step(client.index(), |runner, now, actions| runner.abandon(now, op, actions));
        }
    }

    /// The messages in the network, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &Envelope<P>> {
        self.network.iter()
    }

    /// How many messages are in the network.
    pub fn pending_count(&self) -> usize {
        self.network.len()
    }

    /// Delivers the oldest message; false if the network is empty.
    pub fn deliver_next(&mut self) -> bool {
        match self.network.pop_front() {
            Some(envelope) => {
                self.deliver_envelope(envelope);
                true
            }
            None => false,
        }
    }

    /// Delivers the message with this id; false if it is not in the network.
    pub fn deliver(&mut self, id: u64) -> bool {
        self.deliver_first(|envelope| envelope.id == id)
    }

    /// Delivers the oldest message that matches; false if none does.
    pub fn deliver_first(&mut self, mut matches: impl FnMut(&Envelope<P>) -> bool) -> bool {
        let Some(position) = self.network.iter().position(&mut matches) else {
            return false;
        };
        let envelope = self.network.remove(position).expect("the position was just found");
        self.deliver_envelope(envelope);
        true
    }

    /// Delivers messages oldest first, including those they cause, until the network is empty.
    /// Returns how many were delivered.
    pub fn deliver_all(&mut self) -> usize {
        self.deliver_all_where(|_| true)
    }

    /// Delivers matching messages oldest first, including matching ones they cause, until none
    /// matches. Others stay in the network. Returns how many were delivered.
    pub fn deliver_all_where(&mut self, mut matches: impl FnMut(&Envelope<P>) -> bool) -> usize {
        let mut delivered = 0;
        while self.deliver_first(&mut matches) {
            delivered += 1;
            assert!(delivered < STEP_LIMIT, "the protocol keeps sending messages without end");
        }
        delivered
    }

    /// Removes every matching message from the network; returns how many.
    pub fn drop_where(&mut self, mut matches: impl FnMut(&Envelope<P>) -> bool) -> usize {
        let before = self.network.len();
        self.network.retain(|envelope| !matches(envelope));
        before - self.network.len()
    }

    /// Puts a copy of message `id` at the end of the network; returns the copy's id.
    pub fn duplicate(&mut self, id: u64) -> Option<u64> {
        let envelope = self.network.iter().find(|e| e.id == id)?.clone();
        Some(self.push_envelope(envelope.from, envelope.to, envelope.message))
    }

    /// Puts a message of the test's making in the network; returns its id.
    pub fn inject(&mut self, from: NodeId, to: NodeId, message: P::Message) -> u64 {
        self.push_envelope(from, to, message)
    }

    /// Cuts `node` off: messages from or to it are dropped (when sent, and when delivered).
    pub fn isolate(&mut self, node: NodeId) {
        self.isolated.insert(node);
    }

    /// Reconnects `node`.
    pub fn heal(&mut self, node: NodeId) {
        self.isolated.remove(&node);
    }

    /// Reconnects every node.
    pub fn heal_all(&mut self) {
        self.isolated.clear();
    }

    // ---- timers and time -----------------------------------------------------------------

    /// The node's pending timers with their true deadlines.
    pub fn pending_timers(&self, node: NodeId) -> Vec<(P::Timer, u64)> {
        let slot = &self.slots[node.index()];
        slot.deadlines
            .iter()
            .filter(|(timer, (generation, _))| slot.runner.is_timer_pending(timer, *generation))
            .map(|(timer, (_, deadline))| (timer.clone(), *deadline))
            .collect()
    }

    /// Fires `timer` at `node` now if it is pending, whatever its deadline; false otherwise.
    pub fn fire_timer(&mut self, node: NodeId, timer: &P::Timer) -> bool {
        let Some(&(generation, _)) = self.slots[node.index()].deadlines.get(timer) else { return false };
        let timer = timer.clone();
        let mut fired = false;
        self.step(node.index(), |runner, now, actions| {
            // A test may fire an absolute timer early: read the clock as the deadline.
            let reading = match runner.pending_timers().find(|(t, ..)| **t == timer) {
                Some((_, _, Deadline::At(local_ns))) => ClockReading { local_ns: local_ns.max(now.local_ns), ..now },
                _ => now,
            };
            fired = runner.fire_timer(reading, timer.clone(), generation, actions) == ordo_core::TimerFiring::Fired;
        });
        fired
    }

    /// Moves time forward by `ns`, firing every timer that falls due, in deadline order.
    /// Messages stay in the network.
    pub fn advance(&mut self, ns: u64) {
        let end = self.now_ns + ns;
        let mut steps = 0;
        while self.fire_next_timer_before(end) {
            steps += 1;
            assert!(steps < STEP_LIMIT, "timers keep firing without end");
        }
        self.now_ns = end;
    }

    /// Runs the cluster for `ns`: messages are delivered at once, oldest first; when none is
    /// left, time jumps to the next timer due. Returns how many inputs ran.
    pub fn run_for(&mut self, ns: u64) -> usize {
        let end = self.now_ns + ns;
        let steps = self.run_until_time(end, |_| false);
        self.now_ns = end;
        steps
    }

    /// Runs like [`Cluster::run_for`] until `done` holds (checked after every input) or `ns`
    /// have passed; returns whether `done` held.
    pub fn run_until(&mut self, ns: u64, mut done: impl FnMut(&Self) -> bool) -> bool {
        let end = self.now_ns + ns;
        if done(self) {
            return true;
        }
        let mut held = false;
        self.run_until_time(end, |cluster| {
            held = done(cluster);
            held
        });
        if !held {
            self.now_ns = end;
        }
        held
    }

    fn run_until_time(&mut self, end: u64, mut done: impl FnMut(&Self) -> bool) -> usize {
        let mut steps = 0;
        loop {
            let progressed = self.deliver_next() || self.fire_next_timer_before(end);
            if !progressed {
                return steps;
            }
            steps += 1;
            assert!(steps < STEP_LIMIT, "the cluster keeps running without end");
            if done(self) {
                return steps;
            }
        }
    }

    fn fire_next_timer_before(&mut self, end: u64) -> bool {
        let mut next: Option<(u64, usize, P::Timer, u64)> = None;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            slot.deadlines.retain(|timer, (generation, _)| slot.runner.is_timer_pending(timer, *generation));
            for (timer, &(generation, deadline)) in &slot.deadlines {
                if deadline <= end && next.as_ref().is_none_or(|(d, ..)| deadline < *d) {
                    next = Some((deadline, index, timer.clone(), generation));
                }
            }
        }
        let Some((deadline, index, timer, generation)) = next else {
            return false;
        };
        self.now_ns = self.now_ns.max(deadline);
        self.slots[index].deadlines.remove(&timer);
        let mut not_yet = None;
        self.step(index, |runner, now, actions| {
            if let ordo_core::TimerFiring::NotYet(local_ns) = runner.fire_timer(now, timer.clone(), generation, actions)
            {
                not_yet = Some(local_ns);
            }
        });
        if let Some(local_ns) = not_yet {
            // The clock was set back: wait until it reads the deadline again.
            let slot = &mut self.slots[index];
            let at = slot.clock.true_time_of(local_ns, self.now_ns).max(self.now_ns + 1);
            slot.deadlines.insert(timer, (generation, at));
        }
        true
    }

    // ---- crashes and durability ----------------------------------------------------------

    /// Starts a node that never ran (or restarts one, see [`Cluster::restart`]).
    pub fn start(&mut self, node: NodeId) {
        let index = node.index();
        assert!(!self.is_up(node), "{node} is already running");
        let slot = &mut self.slots[index];
        slot.incarnation += 1;
        slot.on_disk = 0;
        let (incarnation, durable) = (slot.incarnation, slot.durable.clone());
        self.step(index, |runner, now, actions| runner.boot(now, incarnation, durable, actions));
    }

    /// Crashes a node: it forgets its volatile state, pending timers, writes not yet durable,
    /// the sends held for them and the messages addressed to it.
    pub fn crash(&mut self, node: NodeId) {
        let slot = &mut self.slots[node.index()];
        assert!(slot.runner.crash(), "{node} is already down");
        slot.deadlines.clear();
        slot.unflushed.clear();
        slot.on_disk = 0;
        slot.outstanding.clear();
        self.network.retain(|envelope| envelope.to != node);
    }

    /// Restarts a crashed node from its durable records.
    pub fn restart(&mut self, node: NodeId) {
        self.start(node);
    }

    /// Erases the durable records of a crashed node, so that it restarts fresh.
    pub fn wipe(&mut self, node: NodeId) {
        assert!(!self.is_up(node), "wipe a node only while it is down");
        self.slots[node.index()].durable.clear();
    }

    /// With `manual` set, the node's writes become durable only at [`Cluster::flush`].
    pub fn set_manual_durability(&mut self, node: NodeId, manual: bool) {
        let slot = &mut self.slots[node.index()];
        slot.manual_durability = manual;
        slot.runner.set_durable_at_once(!manual);
        if !manual {
            self.flush(node);
        }
    }

    /// Makes the node's pending writes durable and releases the sends waiting for them.
    pub fn flush(&mut self, node: NodeId) {
        self.flush_without_sends(node);
        let on_disk = self.slots[node.index()].on_disk;
        self.step(node.index(), |runner, now, actions| runner.writes_durable(now, on_disk, actions));
    }

    /// Makes the node's pending writes durable but keeps the sends waiting for them held: a
    /// crash now loses those sends.
    pub fn flush_without_sends(&mut self, node: NodeId) {
        let slot = &mut self.slots[node.index()];
        for (record, mode) in std::mem::take(&mut slot.unflushed) {
            mode.store(&mut slot.durable, record);
            slot.on_disk += 1;
        }
    }

    /// How many writes of the node wait to become durable.
    pub fn unflushed_count(&self, node: NodeId) -> usize {
        self.slots[node.index()].unflushed.len()
    }

    // ---- plumbing ------------------------------------------------------------------------

    fn push_envelope(&mut self, from: NodeId, to: NodeId, message: P::Message) -> u64 {
        let id = self.next_envelope;
        self.next_envelope += 1;
        if let Some(log) = self.sent_log.as_mut() {
            log.push(Envelope { id, from, to, message: message.clone() });
        }
        if self.isolated.contains(&from) || self.isolated.contains(&to) {
            self.partition_drops += 1;
            return id;
        }
        if to.index() >= self.slots.len() {
            // As the runtime does (`send_to_unknown_node`): a node id taken from a forged
            // message may name no node at all.
            self.unknown_destination_drops += 1;
            return id;
        }
        self.network.push_back(Envelope { id, from, to, message });
        id
    }

    fn deliver_envelope(&mut self, envelope: Envelope<P>) {
        if self.isolated.contains(&envelope.from) || self.isolated.contains(&envelope.to) {
            self.partition_drops += 1;
            return;
        }
        let Envelope { from, to, message, .. } = envelope;
        self.step(to.index(), |runner, now, actions| runner.deliver(now, from, message, actions));
    }

    /// Runs one input on a node's runner (a down node ignores it) and performs its actions.
    fn step(&mut self, index: usize, input: impl FnOnce(&mut NodeRunner<P>, ClockReading, &mut Vec<Action<P>>)) {
        let mut actions = std::mem::take(&mut self.actions);
        let slot = &mut self.slots[index];
        input(&mut slot.runner, slot.clock.read(self.now_ns), &mut actions);
        for action in actions.drain(..) {
            self.perform(index, action);
        }
        self.actions = actions;
    }

    fn perform(&mut self, index: usize, action: Action<P>) {
        let from = self.node_id(index);
        match action {
            Action::Send { to, message } => {
                for target in to.iter() {
                    self.push_envelope(from, target, message.clone());
                }
            }
            Action::Complete { op, result } => {
                let slot = &mut self.slots[index];
                assert!(slot.outstanding.remove(&op), "{from} completed op {op}, which is not outstanding");
                self.completions.push(Completion { client: from, op, result });
            }
            Action::ArmTimer { timer, generation, deadline } => {
                let slot = &mut self.slots[index];
                let at = match deadline {
                    Deadline::After(local_ns) => self.now_ns + slot.clock.true_duration(local_ns),
                    Deadline::At(local_ns) => slot.clock.true_time_of(local_ns, self.now_ns),
                };
                slot.deadlines.insert(timer, (generation, at));
            }
            Action::Write { record, mode, ticket } => {
                let slot = &mut self.slots[index];
                if slot.manual_durability {
                    slot.unflushed.push((record, mode));
                } else {
                    assert!(slot.unflushed.is_empty(), "manual writes are flushed before automatic ones");
                    assert_eq!(ticket.0, slot.on_disk, "writes reach the disk in ticket order");
                    mode.store(&mut slot.durable, record);
                    slot.on_disk += 1;
                }
            }
            Action::Observe(observation) => {
                if let Some(checker) = self.checker.as_mut() {
                    if let Err(violation) = checker.observe(from, &observation) {
                        panic!("global invariant broken at {from}: {violation}");
                    }
                    self.observations += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unreplicated::Unreplicated;
    use ordo_core::Command;

    #[test]
    fn kit_drives_the_unreplicated_protocol() {
        // Goal: the kit works for any protocol. Method: run Unreplicated through a submit, a
        // dropped reply, a client retry, a crash and a restart.
        let mut cluster: Cluster<Unreplicated> = Cluster::new(1, 1, Default::default());
        let client = cluster.client(0);
        let op = cluster.submit(client, Command::set("k", "v"));
        assert_eq!(cluster.pending_count(), 1);
        assert_eq!(cluster.deliver_all(), 2);
        assert_eq!(cluster.result(op), Some(&CommandResult::Ok));
        let op = cluster.submit(client, Command::get("k"));
        assert!(cluster.deliver_next());
        assert_eq!(cluster.drop_where(|e| e.to == client), 1);
        cluster.advance(1_000_000_000);
        cluster.deliver_all();
        assert_eq!(cluster.result(op), Some(&CommandResult::Value("v".into())));
        let server = cluster.replica(0);
        cluster.crash(server);
        assert_eq!(cluster.status(server), "down");
        cluster.restart(server);
        assert!(cluster.is_up(server));
        assert_eq!(cluster.completions().len(), 2);
    }
}
