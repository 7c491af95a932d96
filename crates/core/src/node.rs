//! The sans-IO node interface.
//!
//! A [`Protocol`] names its message, timer and durable-record types and builds its nodes. A
//! [`Node`] is one role of a protocol (replica, client, proxy, sequencer, controller). Every
//! input arrives with the node's [`ClockReading`]; every output is an [`Effect`] appended to an
//! [`Outbox`] that the driver owns, clears and reuses. Nodes never touch sockets, threads, the
//! system clock or global randomness, so the simulator and the real runtime drive the same code
//! and the same inputs give the same outputs.

use crate::command::{Command, CommandResult};
use crate::ids::{ClientId, NodeId};
use crate::kv::StateMachine;
use crate::stats::NodeStats;
use crate::time::ClockReading;
use serde::{Serialize, de::DeserializeOwned};
use std::fmt::Debug;
use std::sync::Arc;

/// The role a node plays. Protocols add the roles their paper needs through
/// [`Protocol::extra_roles`]; replicas and clients always exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Role {
    /// Holds a copy of the state machine.
    Replica,
    /// Turns application submissions into protocol requests and returns their results.
    Client,
    /// A stateless helper between clients and replicas (Nezha's proxies).
    Proxy,
    /// A network-level orderer (NOPaxos' sequencer).
    Sequencer,
    /// Installs sequencers and sessions (NOPaxos' controller).
    Controller,
}

/// One node in a [`Topology`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    /// The node.
    pub id: NodeId,
    /// What it does.
    pub role: Role,
    /// The site (region or rack) it runs in, an index into [`Topology::sites`].
    pub site: usize,
    /// For replicas, the shard whose keys it holds.
    pub shard: Option<usize>,
    /// The machine it runs on, when it shares one with other nodes (messages between them
    /// cross loopback, not the network); `None`: a machine of its own.
    pub machine: Option<usize>,
}

/// Who is who in a cluster: the same for every node and for the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Every node, indexed by `NodeId`.
    pub nodes: Vec<NodeSpec>,
    /// The replicas of each shard, in rank order. Unsharded protocols use `shards[0]`.
    pub shards: Vec<Destinations>,
    /// How many replica failures each shard tolerates.
    pub f: usize,
    /// Site names.
    pub sites: Vec<String>,
    /// Expected one-way delay between sites in nanoseconds (what a protocol may assume when it
    /// picks the closest quorum; the network may differ).
    pub site_delay_ns: Vec<Vec<u64>>,
}

/// The shard of `key` among `shards`: xxh3 with a fixed seed, stable across processes, versions
/// and runs (never a randomly seeded hasher).
pub fn shard_of_key(key: &[u8], shards: usize) -> usize {
    assert!(shards > 0, "a cluster has at least one shard");
    (xxhash_rust::xxh3::xxh3_64(key) % shards as u64) as usize
}

/// How a protocol treats a crashed replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashModel {
    /// Crashed replicas restart from what they persisted and rejoin (Multi-Paxos/VR, Nezha...).
    Recover,
    /// Crash-stop, as the protocol's paper assumes: a crashed replica never takes part again. If
    /// its process is restarted it stays out (it *retires*: it sends and executes nothing, has
    /// no state machine to compare, and reports [`Node::is_recovering`]), so at most f replicas
    /// of a shard may crash in a whole run.
    Stop,
}

/// How many nodes of one role may be down at once in a random fault plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureBudget {
    /// Never crashed or paused.
    Never,
    /// At most this many down at once.
    AtMost(usize),
    /// Any number, all of them at once included.
    Any,
}

/// A shared, immutable list of destination nodes (cheap to clone into many effects).
pub type Destinations = Arc<[NodeId]>;

impl Topology {
    /// The replicas of shard 0 (all replicas, for unsharded protocols).
    pub fn replicas(&self) -> &Destinations {
        &self.shards[0]
    }

    /// The spec of a node.
    pub fn node(&self, id: NodeId) -> &NodeSpec {
        &self.nodes[id.index()]
    }

    /// The nodes with a given role, in id order.
    pub fn with_role(&self, role: Role) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().filter(move |n| n.role == role).map(|n| n.id)
    }

    /// The rank of a replica within its shard, if `id` is a replica.
    pub fn replica_rank(&self, id: NodeId) -> Option<usize> {
        let shard = self.node(id).shard?;
        self.shards[shard].iter().position(|&r| r == id)
    }

    /// Majority of a shard's replicas: f + 1 when there are 2f + 1.
    pub fn majority(&self) -> usize {
        self.shards[0].len() / 2 + 1
    }

    /// The replicas of `shard`, in rank order.
    pub fn replicas_of(&self, shard: usize) -> &Destinations {
        &self.shards[shard]
    }

    /// The shard holding `key`: a fixed hash, the same in every process and every run.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        shard_of_key(key, self.shards.len())
    }

    /// The slowest round trip between the sites of two replicas (0 on a single site, and in
    /// the runtime, whose cluster file states no delays): what replicas wait on one another.
    pub fn replica_round_trip_ns(&self) -> u64 {
        self.round_trip_max_ns(|node| node.role == Role::Replica)
    }

    /// The slowest round trip between a replica's site and any node's: what a client (or a
    /// proxy, a sequencer) waits on a replica.
    pub fn client_round_trip_ns(&self) -> u64 {
        self.round_trip_max_ns(|_| true)
    }

    fn round_trip_max_ns(&self, far_end: impl Fn(&NodeSpec) -> bool) -> u64 {
        let replicas = self.nodes.iter().filter(|node| node.role == Role::Replica);
        let one_way = |a: usize, b: usize| self.site_delay_ns.get(a).and_then(|row| row.get(b)).copied().unwrap_or(0);
        replicas
            .flat_map(|replica| self.nodes.iter().filter(|n| far_end(n)).map(move |other| (replica.site, other.site)))
            .map(|(a, b)| one_way(a, b).max(one_way(b, a)))
            .max()
            .unwrap_or(0)
            .saturating_mul(2)
    }

    /// A replica's timeout that is `lan_ns` on a LAN, stretched by `round_trips` of the slowest
    /// round trip between replicas. Protocols' timeout options are LAN values; a WAN must not
    /// trigger the view changes and recoveries that only a LAN's speed would justify, so every
    /// protocol derives its timeouts with this (and [`Topology::stretched_for_clients`]), and
    /// so runs on any latency matrix with no option set.
    pub fn stretched(&self, lan_ns: u64, round_trips: u64) -> u64 {
        lan_ns.saturating_add(self.replica_round_trip_ns().saturating_mul(round_trips))
    }

    /// A client's timeout (a retry, a proxy's), as [`Topology::stretched`] but by the slowest
    /// round trip between a replica and any node.
    pub fn stretched_for_clients(&self, lan_ns: u64, round_trips: u64) -> u64 {
        lan_ns.saturating_add(self.client_round_trip_ns().saturating_mul(round_trips))
    }

    /// Whether two nodes run on one machine.
    pub fn same_machine(&self, a: NodeId, b: NodeId) -> bool {
        self.node(a).machine.is_some() && self.node(a).machine == self.node(b).machine
    }

    /// Expected one-way delay between two nodes' sites.
    pub fn delay_ns(&self, from: NodeId, to: NodeId) -> u64 {
        self.site_delay_ns[self.node(from).site][self.node(to).site]
    }

    /// The `count` nodes of `among` closest to `from` by expected delay (ties broken by their
    /// order in `among`, so every node computes the same answer). `from` itself counts as
    /// closest if listed.
    pub fn closest(&self, from: NodeId, among: &[NodeId], count: usize) -> Vec<NodeId> {
        let mut ranked: Vec<(u64, usize, NodeId)> = among
            .iter()
            .enumerate()
            .map(|(rank, &node)| (if node == from { 0 } else { self.delay_ns(from, node).max(1) }, rank, node))
            .collect();
        ranked.sort_unstable();
        ranked.into_iter().take(count).map(|(_, _, node)| node).collect()
    }
}

/// An application command handed to a client node. The driver numbers operations; the client
/// reports the result under the same number, once. A driver keeps at most
/// [`Protocol::client_window`] operations outstanding per client node. With a window of one,
/// submitting while an operation is still outstanding abandons it (the driver gave up on it and
/// recorded its outcome as unknown); with a wider window the driver says so through
/// [`Node::on_abandon`]. Either way the client must then never report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The driver's number for this operation.
    pub op: u64,
    /// What to execute.
    pub command: Command,
}

/// A write to durable storage is identified by its ticket: the number of writes the node issued
/// before it since it started. Outputs that may only leave once a write is durable name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PersistTicket(pub u64);

/// How a durable record joins what is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistMode {
    /// Added after the records already stored.
    Append,
    /// Replaces every record stored so far (a snapshot that compacts the log).
    Replace,
    /// Replaces every record stored so far with one that says no more than they do together (a
    /// checkpoint of state the node already holds durably). The node need not wait for it: a
    /// driver may write it in the background, keeping the earlier records and the writes issued
    /// after it until it lands, so a restart reads either the old records or this one, each
    /// followed by every later write. A simulated disk stores it as [`PersistMode::Replace`].
    Compact,
}

impl PersistMode {
    /// Stores `record` in `records`, a disk kept as a list (the simulator's, the testkit's).
    pub fn store<D>(self, records: &mut Vec<D>, record: D) {
        if self != PersistMode::Append {
            records.clear();
        }
        records.push(record);
    }
}

/// What a node asks its driver to do.
pub enum Effect<P: Protocol> {
    /// Send one message. `after` holds it back until that write is durable.
    Send {
        /// Destination.
        to: NodeId,
        /// The message.
        message: P::Message,
        /// Durable write this send must wait for.
        after: Option<PersistTicket>,
    },
    /// Send the same message to several nodes.
    Multicast {
        /// Destinations (the sender itself is skipped if listed).
        to: Destinations,
        /// The message.
        message: P::Message,
        /// Durable write this send must wait for.
        after: Option<PersistTicket>,
    },
    /// A client node hands the result of a submission back to the application.
    Complete {
        /// The submission's number.
        op: u64,
        /// Its result.
        result: CommandResult,
    },
    /// Fire `timer` after `after_ns` of local time (elapsed at the clock's rate; a clock jump does
    /// not move it); setting a pending timer again moves it.
    SetTimer {
        /// Which timer.
        timer: P::Timer,
        /// Delay in local nanoseconds.
        after_ns: u64,
    },
    /// Fire `timer` at the first moment the node's clock reads at least `local_ns` (Nezha's
    /// deadline release). If the clock jumps backwards first, the timer waits for the clock to
    /// get there again; setting a pending timer again moves it.
    SetTimerAt {
        /// Which timer.
        timer: P::Timer,
        /// Local clock reading to fire at.
        local_ns: u64,
    },
    /// Cancel a pending timer (no effect if it is not pending).
    CancelTimer {
        /// Which timer.
        timer: P::Timer,
    },
    /// Write a record to durable storage; it is durable once the driver says so (the simulator
    /// models a write latency and may crash the node in between).
    Persist {
        /// The record.
        record: P::Durable,
        /// Append or replace.
        mode: PersistMode,
        /// Its ticket.
        ticket: PersistTicket,
    },
    /// A fact for the protocol's [`GlobalChecker`] (such as "slot 7 committed request r"). The
    /// simulator feeds it to the checker after the step; the real runtime drops it.
    Observe(P::Observation),
}

impl<P: Protocol> Effect<P> {
    /// The same effect under another protocol with the same types (a canary that wraps the real
    /// protocol's nodes).
    pub fn retype<Q>(self) -> Effect<Q>
    where
        Q: Protocol<Message = P::Message, Timer = P::Timer, Durable = P::Durable, Observation = P::Observation>,
    {
        match self {
            Effect::Send { to, message, after } => Effect::Send { to, message, after },
            Effect::Multicast { to, message, after } => Effect::Multicast { to, message, after },
            Effect::Complete { op, result } => Effect::Complete { op, result },
            Effect::SetTimer { timer, after_ns } => Effect::SetTimer { timer, after_ns },
            Effect::SetTimerAt { timer, local_ns } => Effect::SetTimerAt { timer, local_ns },
            Effect::CancelTimer { timer } => Effect::CancelTimer { timer },
            Effect::Persist { record, mode, ticket } => Effect::Persist { record, mode, ticket },
            Effect::Observe(observation) => Effect::Observe(observation),
        }
    }
}

impl<P: Protocol> Debug for Effect<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Send { to, message, after } => write!(f, "send {to} {message:?} after {after:?}"),
            Effect::Multicast { to, message, after } => write!(f, "multicast {to:?} {message:?} after {after:?}"),
            Effect::Complete { op, result } => write!(f, "complete op {op} {result:?}"),
            Effect::SetTimer { timer, after_ns } => write!(f, "set timer {timer:?} +{after_ns}ns"),
            Effect::SetTimerAt { timer, local_ns } => write!(f, "set timer {timer:?} at local {local_ns}ns"),
            Effect::CancelTimer { timer } => write!(f, "cancel timer {timer:?}"),
            Effect::Persist { record, mode, ticket } => write!(f, "persist {ticket:?} {mode:?} {record:?}"),
            Effect::Observe(observation) => write!(f, "observe {observation:?}"),
        }
    }
}

/// The buffer a node appends its effects to. The driver owns it, drains it after each input
/// and reuses it, so handling an event allocates no vector of effects.
pub struct Outbox<P: Protocol> {
    effects: Vec<Effect<P>>,
    next_ticket: u64,
}

impl<P: Protocol> Default for Outbox<P> {
    fn default() -> Self {
        Outbox { effects: Vec::new(), next_ticket: 0 }
    }
}

impl<P: Protocol> Outbox<P> {
    /// An empty outbox whose next persist ticket is `next_ticket` (the driver keeps the count
    /// per node, across inputs).
    pub fn new(next_ticket: u64) -> Self {
        Outbox { effects: Vec::new(), next_ticket }
    }

    /// Sets the next persist ticket (driver use, when switching between nodes).
    pub fn set_next_ticket(&mut self, next_ticket: u64) {
        self.next_ticket = next_ticket;
    }

    /// The next persist ticket (driver use).
    pub fn next_ticket(&self) -> u64 {
        self.next_ticket
    }

    /// Sends a message.
    pub fn send(&mut self, to: NodeId, message: P::Message) {
        self.effects.push(Effect::Send { to, message, after: None });
    }

    /// Sends a message once the write `ticket` is durable.
    pub fn send_after(&mut self, ticket: PersistTicket, to: NodeId, message: P::Message) {
        self.effects.push(Effect::Send { to, message, after: Some(ticket) });
    }

    /// Sends one message to several nodes.
    pub fn multicast(&mut self, to: &Destinations, message: P::Message) {
        self.effects.push(Effect::Multicast { to: to.clone(), message, after: None });
    }

    /// Sends one message to several nodes once the write `ticket` is durable.
    pub fn multicast_after(&mut self, ticket: PersistTicket, to: &Destinations, message: P::Message) {
        self.effects.push(Effect::Multicast { to: to.clone(), message, after: Some(ticket) });
    }

    /// The latest write this node issued in its current incarnation, if any.
    pub fn last_ticket(&self) -> Option<PersistTicket> {
        self.next_ticket.checked_sub(1).map(PersistTicket)
    }

    /// Sends a message once every write the node has issued so far is durable (at once when
    /// there is none, or all are).
    pub fn send_durable(&mut self, to: NodeId, message: P::Message) {
        let after = self.last_ticket();
        self.effects.push(Effect::Send { to, message, after });
    }

    /// Sends one message to several nodes once every write issued so far is durable.
    pub fn multicast_durable(&mut self, to: &Destinations, message: P::Message) {
        let after = self.last_ticket();
        self.effects.push(Effect::Multicast { to: to.clone(), message, after });
    }

    /// Hands a fact to the protocol's global checker (simulation only).
    pub fn observe(&mut self, observation: P::Observation) {
        self.effects.push(Effect::Observe(observation));
    }

    /// Writes `records` as if they had been issued at effect `from` (an index into
    /// [`Outbox::effects`]), before the effects queued since, and makes every send queued since
    /// wait for them: for a node that records what a handler changed once the handler is done,
    /// after the handler queued its sends. Returns the last write's ticket, if any. No write may
    /// have been queued since `from` (tickets are issued in order).
    pub fn persist_before(
        &mut self,
        from: usize,
        records: impl IntoIterator<Item = (P::Durable, PersistMode)>,
    ) -> Option<PersistTicket> {
        let queued_since = |e: &Effect<P>| matches!(e, Effect::Persist { .. });
        assert!(!self.effects[from..].iter().any(queued_since), "no write was queued since `from`");
        let mut writes = Vec::new();
        for (record, mode) in records {
            writes.push(Effect::Persist { record, mode, ticket: PersistTicket(self.next_ticket) });
            self.next_ticket += 1;
        }
        let last = self.last_ticket().filter(|_| !writes.is_empty())?;
        for effect in &mut self.effects[from..] {
            if let Effect::Send { after, .. } | Effect::Multicast { after, .. } = effect {
                *after = Some(last);
            }
        }
        self.effects.splice(from..from, writes);
        Some(last)
    }

    /// Moves every effect of `other` (a wrapped node's outbox with the same types) here, in order,
    /// with its persist tickets.
    pub fn absorb<Q>(&mut self, other: &mut Outbox<Q>)
    where
        Q: Protocol<Message = P::Message, Timer = P::Timer, Durable = P::Durable, Observation = P::Observation>,
    {
        assert!(other.next_ticket >= self.next_ticket, "the wrapped node started from our ticket");
        self.effects.extend(other.effects.drain(..).map(Effect::retype));
        self.next_ticket = other.next_ticket;
    }

    /// Returns a submission's result to the application (client nodes).
    pub fn complete(&mut self, op: u64, result: CommandResult) {
        self.effects.push(Effect::Complete { op, result });
    }

    /// Sets (or moves) a timer.
    pub fn set_timer(&mut self, timer: P::Timer, after_ns: u64) {
        self.effects.push(Effect::SetTimer { timer, after_ns });
    }

    /// Sets (or moves) a timer to fire when the local clock reads `local_ns`.
    pub fn set_timer_at(&mut self, timer: P::Timer, local_ns: u64) {
        self.effects.push(Effect::SetTimerAt { timer, local_ns });
    }

    /// Cancels a timer.
    pub fn cancel_timer(&mut self, timer: P::Timer) {
        self.effects.push(Effect::CancelTimer { timer });
    }

    /// Writes a durable record and returns its ticket.
    pub fn persist(&mut self, record: P::Durable, mode: PersistMode) -> PersistTicket {
        let ticket = PersistTicket(self.next_ticket);
        self.next_ticket += 1;
        self.effects.push(Effect::Persist { record, mode, ticket });
        ticket
    }

    /// The effects appended so far.
    pub fn effects(&self) -> &[Effect<P>] {
        &self.effects
    }

    /// Takes the effects out, leaving the buffer empty with its capacity.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Effect<P>> {
        self.effects.drain(..)
    }

    /// True when nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty()
    }
}

/// What a node is built from.
pub struct NodeContext<P: Protocol> {
    /// This node.
    pub id: NodeId,
    /// The whole cluster.
    pub topology: Arc<Topology>,
    /// The protocol's own options.
    pub config: P::Config,
    /// Seed of the node's private random generator (the only randomness a node may use).
    pub seed: u64,
    /// Builds an empty application state machine.
    pub new_state_machine: fn() -> Box<dyn StateMachine>,
    /// A number that differs between this node's incarnations (the simulator counts restarts;
    /// the runtime uses a random boot number). Clients fold it into their [`ClientId`], so that
    /// a restarted client, whose request numbers start again at 1, is never taken for the old one
    /// by a replica's client table.
    pub incarnation: u64,
}

impl<P: Protocol> NodeContext<P> {
    /// This node's role.
    pub fn role(&self) -> Role {
        self.topology.node(self.id).role
    }

    /// The identity a client node's requests carry: its node id in the low 32 bits, its
    /// incarnation in the high 32.
    pub fn client_id(&self) -> ClientId {
        ClientId(((self.incarnation & 0xFFFF_FFFF) << 32) | u64::from(self.id.0))
    }
}

/// A protocol: its types, its extra roles and how to build its nodes. Drivers, tests and the CLI
/// reach a protocol only through this trait and the registry.
pub trait Protocol: Sized + 'static {
    /// The registry name (`ordo sim --protocol NAME`).
    const NAME: &'static str;
    /// One line for `ordo protocols`.
    const SUMMARY: &'static str;
    /// Every message any role of the protocol sends.
    type Message: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;
    /// The protocol's timers; a timer is identified by its value.
    type Timer: Clone + Debug + Ord + Send + 'static;
    /// What a node writes to durable storage, and gets back when it restarts.
    type Durable: Clone + Debug + Serialize + DeserializeOwned + Send + 'static;
    /// The protocol's own options, read from the `[protocol]` table of a run's configuration.
    type Config: Clone + Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// Facts nodes report to the protocol's [`GlobalChecker`] (`()` for a protocol without one).
    type Observation: Clone + Debug + Send + 'static;

    /// Roles besides replicas and clients that a cluster of this protocol needs.
    fn extra_roles(_replicas_per_shard: usize, _config: &Self::Config) -> Vec<Role> {
        Vec::new()
    }

    /// The most replicas a shard of this protocol uses, when it uses a fixed number (a protocol
    /// without replication runs one server); `None`: any number. Drivers refuse more, which
    /// would be idle processes counted as replicas.
    fn replicas_max() -> Option<usize> {
        None
    }

    /// True when the protocol has a fast path (so a fast-path ratio is meaningful).
    fn has_fast_path() -> bool {
        false
    }

    /// True when the protocol replicates each shard on its own replicas (partial replication);
    /// drivers refuse more than one shard otherwise.
    fn supports_shards() -> bool {
        false
    }

    /// Whether crashed replicas come back. The simulator's random fault plans restart every
    /// crashed replica; for [`CrashModel::Stop`] a crashed replica counts as down until the end
    /// of the run (its restart must find it retired), so they crash at most f distinct replicas
    /// of a shard.
    fn crash_model() -> CrashModel {
        CrashModel::Recover
    }

    /// True when a replica's durable records hold everything it promised (its log, or a
    /// snapshot and the log after it), so that every process of a cluster may stop at once (a
    /// power cut) and the cluster, restarted from its files, loses no acknowledged write.
    /// False for crash-stop protocols and for diskless recovery, where a replica persists
    /// only markers and bounds and rebuilds its state from f + 1 live peers: with all of them
    /// restarted at once there is no peer left to rebuild from.
    fn state_on_disk() -> bool {
        false
    }

    /// [`Protocol::state_on_disk`] under `config`, for a protocol whose durability is an option
    /// (Nezha's durable mode); the simulator's power cuts and `cluster up`'s restarts ask this.
    fn state_on_disk_with(_config: &Self::Config) -> bool {
        Self::state_on_disk()
    }

    /// How many nodes of an extra role (proxy, sequencer, controller) random fault plans may
    /// crash or pause at once. Replicas are bounded by f and [`Protocol::crash_model`]; clients
    /// are never crashed. A protocol opts its extra roles in: stateless proxies can take any
    /// number of failures, a controller group only its own bound.
    fn failure_budget(_role: Role) -> FailureBudget {
        FailureBudget::Never
    }

    /// True for a message a busy node serves before the ordinary inputs already queued at it
    /// (FIFO among such messages): the control traffic a real node reads from a socket or
    /// queue of its own, first, while its data stream waits. For messages other nodes wait on
    /// while the protocol's progress is held, such as NOPaxos' gap agreement, which otherwise
    /// waits behind a saturated replica's backlog of requests. Only the order changes: the
    /// message costs what any message costs. Default: none (arrival order).
    fn is_urgent(_message: &Self::Message) -> bool {
        false
    }

    /// Rejects protocol options no node can run with, saying which. Drivers call it before
    /// they build any node.
    fn validate_config(_config: &Self::Config) -> Result<(), String> {
        Ok(())
    }

    /// Protocol options (`Config` fields, named as `ordo sim --set` names them) that a cluster
    /// of real processes gets unless the user sets them. `Config::default()` suits the
    /// simulator's LAN, where nothing stalls; a process on a busy host can wait milliseconds
    /// for a core, and failure detectors tuned to 10 ms then suspect live nodes over and over.
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[]
    }

    /// Protocol events (names counted with `NodeStats::count`) that a fuzz campaign with faults
    /// must reach, such as `view_change` or `state_transfer`: a campaign that never reaches
    /// them did not test them, and fails.
    fn coverage_goals() -> &'static [&'static str] {
        &[]
    }

    /// How many operations a driver may keep outstanding at one client node (pipelining). One
    /// unless the protocol's client and replicas handle several requests of a client in flight:
    /// a client table keyed by request number within a window, not by the client's last request.
    fn client_window(_config: &Self::Config) -> usize {
        1
    }

    /// A checker of invariants that span nodes, fed every [`Effect::Observe`] in simulation.
    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        None
    }

    /// Builds a node, fresh (`durable` empty) or restarted with what it had persisted.
    fn new_node(context: NodeContext<Self>, durable: Vec<Self::Durable>) -> Box<dyn Node<Self>>;
}

/// Checks an invariant that spans nodes (no two replicas commit different commands at one slot,
/// say) from the facts nodes report with [`Outbox::observe`]. The simulator calls it after every
/// step, in the order the facts were produced; the runtime never builds one.
pub trait GlobalChecker<P: Protocol>: Send {
    /// Takes one fact from `node`; returns the violation it reveals, if any.
    fn observe(&mut self, node: NodeId, observation: &P::Observation) -> Result<(), String>;
}

/// Lets tests reach a node's concrete type behind `dyn Node` (every `'static` type has it).
pub trait AsAny: std::any::Any {
    /// The node as `Any`, to downcast.
    fn as_any(&self) -> &dyn std::any::Any;
    /// The node as `Any`, mutably.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

impl<T: std::any::Any> AsAny for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// One role of a protocol. Each method takes the local clock reading and one input, and appends
/// effects to `out`.
pub trait Node<P: Protocol>: Send + AsAny {
    /// Called once when the node boots or restarts: set the first timers.
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<P>);
    /// A message arrived.
    fn on_message(&mut self, now: ClockReading, from: NodeId, message: P::Message, out: &mut Outbox<P>);
    /// A timer fired.
    fn on_timer(&mut self, now: ClockReading, timer: P::Timer, out: &mut Outbox<P>);
    /// The application submits a command (client nodes only; others ignore it).
    fn on_submit(&mut self, _now: ClockReading, _submission: Submission, _out: &mut Outbox<P>) {}
    /// The driver gave up on operation `op` and recorded its outcome as unknown: the client
    /// stops retrying it and never reports it. Clients with a window of one may ignore it, since
    /// their next submission abandons the previous one anyway.
    fn on_abandon(&mut self, _now: ClockReading, _op: u64, _out: &mut Outbox<P>) {}
    /// Every write this incarnation issued up to and including `through` is durable (a write
    /// becomes durable after those issued before it). Sends that waited for them have left.
    fn on_durable(&mut self, _now: ClockReading, _through: PersistTicket, _out: &mut Outbox<P>) {}
    /// Panics if the node's state breaks one of its invariants. Drivers call it after every
    /// input in simulation and debug builds.
    fn check_invariants(&self) {}
    /// True while a restarted replica rebuilds its state from its peers before it may take part
    /// again (a diskless rejoin, as in Nezha), and for good once a restarted replica of a
    /// [`CrashModel::Stop`] protocol has retired. Fault injectors count such a replica as failed:
    /// such protocols tolerate f replicas crashed *or recovering* at once.
    fn is_recovering(&self) -> bool {
        false
    }
    /// The node's counters.
    fn stats(&self) -> &NodeStats;
    /// The node's state machine, for the agreement check (replicas only).
    fn state_machine(&self) -> Option<&dyn StateMachine> {
        None
    }
    /// One line saying what the node is doing (view, leader, log position...).
    fn status(&self) -> String;
}
