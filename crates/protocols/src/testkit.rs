//! A small deterministic cluster for step-by-step scenario tests, generic over any [`Protocol`].
//!
//! [`Cluster`] holds `n` replicas and `k` clients of one protocol, a network of pending messages
//! and every node's timers, with a clock that moves only when told. Nothing happens by itself: a
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
//! Node ids: replicas are `0..n` (shard 0, in rank order), clients `n..n + k`; one site.

use ordo_core::{
    ClockReading, CommandResult, Destinations, Effect, KvStore, Node, NodeContext, NodeId, NodeSpec, NodeStats, Outbox,
    PersistMode, Protocol, Role, StateMachine, Submission, Topology,
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

/// Sends waiting for a write to become durable.
struct Held<P: Protocol> {
    ticket: u64,
    to: Vec<NodeId>,
    message: P::Message,
}

/// One node and what the driver keeps for it.
struct Slot<P: Protocol> {
    node: Option<Box<dyn Node<P>>>,
    durable: Vec<P::Durable>,
    unflushed: Vec<(P::Durable, PersistMode, u64)>,
    held: Vec<Held<P>>,
    /// Writes of this incarnation with a ticket up to this one are durable.
    durable_through: Option<u64>,
    next_ticket: u64,
    manual_durability: bool,
    timers: BTreeMap<P::Timer, u64>,
    /// For clients: the submission not yet completed.
    outstanding: Option<u64>,
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

fn new_kv_store() -> Box<dyn StateMachine> {
    Box::new(KvStore::new())
}

/// A deterministic cluster of one protocol, driven step by step.
pub struct Cluster<P: Protocol> {
    topology: Arc<Topology>,
    replica_count: usize,
    config: P::Config,
    seed: u64,
    now_ns: u64,
    slots: Vec<Slot<P>>,
    network: VecDeque<Envelope<P>>,
    next_envelope: u64,
    next_op: u64,
    completions: Vec<Completion>,
    isolated: BTreeSet<NodeId>,
    partition_drops: u64,
    new_state_machine: fn() -> Box<dyn StateMachine>,
    outbox: Outbox<P>,
}

impl<P: Protocol> Cluster<P> {
    /// `replicas` replicas and `clients` clients with the key-value store, seed 1, all started.
    pub fn new(replicas: usize, clients: usize, config: P::Config) -> Self {
        Self::with_seed(replicas, clients, config, 1)
    }

    /// Like [`Cluster::new`] with the given seed (each node's RNG seed derives from it).
    pub fn with_seed(replicas: usize, clients: usize, config: P::Config, seed: u64) -> Self {
        let mut cluster = Self::stopped(replicas, clients, config, seed);
        for index in 0..replicas + clients {
            cluster.start(cluster.node_id(index));
        }
        cluster
    }

    /// Like [`Cluster::with_seed`], but no node runs yet: start each with [`Cluster::start`].
    pub fn stopped(replicas: usize, clients: usize, config: P::Config, seed: u64) -> Self {
        let topology = Arc::new(topology(replicas, clients));
        let slots = (0..replicas + clients)
            .map(|_| Slot {
                node: None,
                durable: Vec::new(),
                unflushed: Vec::new(),
                held: Vec::new(),
                durable_through: None,
                next_ticket: 0,
                manual_durability: false,
                timers: BTreeMap::new(),
                outstanding: None,
                incarnation: 0,
            })
            .collect();
        Cluster {
            topology,
            replica_count: replicas,
            config,
            seed,
            now_ns: 0,
            slots,
            network: VecDeque::new(),
            next_envelope: 0,
            next_op: 1,
            completions: Vec::new(),
            isolated: BTreeSet::new(),
            partition_drops: 0,
            new_state_machine: new_kv_store,
            outbox: Outbox::default(),
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

    /// The replica of rank `rank`.
    pub fn replica(&self, rank: usize) -> NodeId {
        assert!(rank < self.replica_count, "no replica of rank {rank}");
        self.node_id(rank)
    }

    /// The `index`-th client.
    pub fn client(&self, index: usize) -> NodeId {
        assert!(self.replica_count + index < self.slots.len(), "no client {index}");
        self.node_id(self.replica_count + index)
    }

    /// Every replica, in rank order.
    pub fn replicas(&self) -> Vec<NodeId> {
        (0..self.replica_count).map(|i| self.node_id(i)).collect()
    }

    /// Every client.
    pub fn clients(&self) -> Vec<NodeId> {
        (self.replica_count..self.slots.len()).map(|i| self.node_id(i)).collect()
    }

    /// The simulated time in nanoseconds (every node reads it exactly).
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    // ---- reading state -------------------------------------------------------------------

    /// True unless the node is crashed (or not started).
    pub fn is_up(&self, node: NodeId) -> bool {
        self.slots[node.index()].node.is_some()
    }

    /// The running node. Panics if it is down.
    pub fn node(&self, node: NodeId) -> &dyn Node<P> {
        self.slots[node.index()].node.as_deref().unwrap_or_else(|| panic!("{node} is down"))
    }

    /// The node's status line, or `down`.
    pub fn status(&self, node: NodeId) -> String {
        self.slots[node.index()].node.as_ref().map_or_else(|| "down".to_string(), |n| n.status())
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

    /// The client's submission not yet completed, if any.
    pub fn outstanding(&self, client: NodeId) -> Option<u64> {
        self.slots[client.index()].outstanding
    }

    /// Messages dropped because an end was isolated.
    pub fn partition_drops(&self) -> u64 {
        self.partition_drops
    }

    // ---- inputs --------------------------------------------------------------------------

    /// Hands `command` to `client` and returns the submission's number. A submission still
    /// outstanding at that client is abandoned.
    pub fn submit(&mut self, client: NodeId, command: ordo_core::Command) -> u64 {
        assert!(self.topology.node(client).role == Role::Client, "{client} is not a client");
        let op = self.next_op;
        self.next_op += 1;
        if self.slots[client.index()].node.is_none() {
            return op;
        }
        self.slots[client.index()].outstanding = Some(op);
        self.step(client.index(), |node, now, out| node.on_submit(now, Submission { op, command }, out));
        op
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

    /// The node's pending timers with their deadlines.
    pub fn pending_timers(&self, node: NodeId) -> Vec<(P::Timer, u64)> {
        self.slots[node.index()].timers.iter().map(|(t, d)| (t.clone(), *d)).collect()
    }

    /// Fires `timer` at `node` now if it is pending; false otherwise.
    pub fn fire_timer(&mut self, node: NodeId, timer: &P::Timer) -> bool {
        if self.slots[node.index()].timers.remove(timer).is_none() {
            return false;
        }
        let timer = timer.clone();
        self.step(node.index(), |n, now, out| n.on_timer(now, timer, out));
        true
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
        let mut next: Option<(u64, usize, P::Timer)> = None;
        for (index, slot) in self.slots.iter().enumerate() {
            for (timer, &deadline) in &slot.timers {
                if deadline <= end && next.as_ref().is_none_or(|(d, _, _)| deadline < *d) {
                    next = Some((deadline, index, timer.clone()));
                }
            }
        }
        let Some((deadline, index, timer)) = next else {
            return false;
        };
        self.now_ns = self.now_ns.max(deadline);
        self.slots[index].timers.remove(&timer);
        self.step(index, |n, now, out| n.on_timer(now, timer, out));
        true
    }

    // ---- crashes and durability ----------------------------------------------------------

    /// Starts a node that never ran (or restarts one, see [`Cluster::restart`]).
    pub fn start(&mut self, node: NodeId) {
        let index = node.index();
        assert!(self.slots[index].node.is_none(), "{node} is already running");
        let slot = &mut self.slots[index];
        slot.incarnation += 1;
        slot.next_ticket = 0;
        slot.durable_through = None;
        let context = NodeContext {
            id: node,
            topology: self.topology.clone(),
            config: self.config.clone(),
            seed: self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((index as u64) << 32) ^ slot.incarnation,
            new_state_machine: self.new_state_machine,
            incarnation: slot.incarnation,
        };
        let built = P::new_node(context, slot.durable.clone());
        built.check_invariants();
        slot.node = Some(built);
        self.step(index, |n, now, out| n.on_start(now, out));
    }

    /// Crashes a node: it forgets its volatile state, pending timers, writes not yet durable,
    /// the sends held for them and the messages addressed to it.
    pub fn crash(&mut self, node: NodeId) {
        let slot = &mut self.slots[node.index()];
        assert!(slot.node.is_some(), "{node} is already down");
        slot.node = None;
        slot.timers.clear();
        slot.unflushed.clear();
        slot.held.clear();
        slot.outstanding = None;
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
        self.slots[node.index()].manual_durability = manual;
        if !manual {
            self.flush(node);
        }
    }

    /// Makes the node's pending writes durable and releases the sends waiting for them.
    pub fn flush(&mut self, node: NodeId) {
        self.flush_without_sends(node);
        let slot = &mut self.slots[node.index()];
        let durable_through = slot.durable_through;
        let (ready, waiting): (Vec<Held<P>>, Vec<Held<P>>) =
            slot.held.drain(..).partition(|held| durable_through.is_some_and(|d| held.ticket <= d));
        slot.held = waiting;
        for held in ready {
            for to in held.to {
                self.push_envelope(node, to, held.message.clone());
            }
        }
    }

    /// Makes the node's pending writes durable but keeps the sends waiting for them held: a
    /// crash now loses those sends.
    pub fn flush_without_sends(&mut self, node: NodeId) {
        let slot = &mut self.slots[node.index()];
        for (record, mode, ticket) in std::mem::take(&mut slot.unflushed) {
            Self::write_durable(slot, record, mode, ticket);
        }
    }

    /// How many writes of the node wait to become durable.
    pub fn unflushed_count(&self, node: NodeId) -> usize {
        self.slots[node.index()].unflushed.len()
    }

    fn write_durable(slot: &mut Slot<P>, record: P::Durable, mode: PersistMode, ticket: u64) {
        assert!(slot.durable_through.is_none_or(|d| d < ticket), "writes become durable in ticket order");
        if mode == PersistMode::Replace {
            slot.durable.clear();
        }
        slot.durable.push(record);
        slot.durable_through = Some(ticket);
    }

    // ---- plumbing ------------------------------------------------------------------------

    fn push_envelope(&mut self, from: NodeId, to: NodeId, message: P::Message) -> u64 {
        let id = self.next_envelope;
        self.next_envelope += 1;
        if self.isolated.contains(&from) || self.isolated.contains(&to) {
            self.partition_drops += 1;
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
        self.step(to.index(), |node, now, out| node.on_message(now, from, message, out));
    }

    /// Runs one input on a running node and applies its effects.
    fn step(&mut self, index: usize, input: impl FnOnce(&mut dyn Node<P>, ClockReading, &mut Outbox<P>)) {
        let now = ClockReading::exact(self.now_ns);
        let slot = &mut self.slots[index];
        let Some(node) = slot.node.as_mut() else {
            return;
        };
        self.outbox.set_next_ticket(slot.next_ticket);
        input(node.as_mut(), now, &mut self.outbox);
        node.check_invariants();
        slot.next_ticket = self.outbox.next_ticket();
        let effects: Vec<Effect<P>> = self.outbox.drain().collect();
        for effect in effects {
            self.apply_effect(index, effect);
        }
    }

    fn apply_effect(&mut self, index: usize, effect: Effect<P>) {
        let from = self.node_id(index);
        match effect {
            Effect::Send { to, message, after } => self.send_or_hold(index, vec![to], message, after),
            Effect::Multicast { to, message, after } => {
                let targets = to.iter().copied().filter(|&t| t != from).collect();
                self.send_or_hold(index, targets, message, after);
            }
            Effect::Complete { op, result } => {
                let slot = &mut self.slots[index];
                assert_eq!(slot.outstanding, Some(op), "{from} completed op {op}, which is not its outstanding one");
                slot.outstanding = None;
                self.completions.push(Completion { client: from, op, result });
            }
            Effect::SetTimer { timer, after_ns } => {
                let deadline = self.now_ns + after_ns;
                self.slots[index].timers.insert(timer, deadline);
            }
            Effect::SetTimerAt { timer, local_ns } => {
                // The testkit's clocks are exact: local time is the cluster's time.
                self.slots[index].timers.insert(timer, local_ns.max(self.now_ns));
            }
            Effect::CancelTimer { timer } => {
                self.slots[index].timers.remove(&timer);
            }
            Effect::Persist { record, mode, ticket } => {
                let slot = &mut self.slots[index];
                if slot.manual_durability {
                    slot.unflushed.push((record, mode, ticket.0));
                } else {
                    assert!(slot.unflushed.is_empty(), "manual writes are flushed before automatic ones");
                    Self::write_durable(slot, record, mode, ticket.0);
                }
            }
        }
    }

    fn send_or_hold(
        &mut self,
        index: usize,
        to: Vec<NodeId>,
        message: P::Message,
        after: Option<ordo_core::PersistTicket>,
    ) {
        let slot = &mut self.slots[index];
        if let Some(ticket) = after
            && slot.durable_through.is_none_or(|d| ticket.0 > d)
        {
            slot.held.push(Held { ticket: ticket.0, to, message });
            return;
        }
        let from = self.node_id(index);
        for target in to {
            self.push_envelope(from, target, message.clone());
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
