//! Scenario tests of Tempo (specs/tempo.md §11), on the testkit's [`Cluster`] (the one effect
//! interpreter drives the nodes: held sends, timers and persists as in the simulator). The
//! [`Scenario`] below gives it the shape these scenarios need (r = 5 with f = 1, several shards,
//! replicas and clients at sites), the recording state machine, and the Tempo readings and
//! inputs they share: messages are delivered first in, first out, or in a random order with loss
//! and duplication; tests hold, drop and crash. More scenarios use it in `tests_scenarios.rs` and
//! `tests_recovery.rs`.

use super::messages::{Dot, Message, RecPhase};
use super::recovery::{choose_timestamp, recovery_ballot, recovery_ballot_floor};
use super::replica::{Phase, Replica};
use super::{Config, Tempo, Timer};
use crate::testkit::{Cluster, Envelope};
use ordo_core::kv::SnapshotError;
use ordo_core::{
    ClientId, Command, CommandResult, Destinations, KeyDigest, KvStore, NodeId, NodeSpec, RequestId, Role,
    StateMachine, Topology,
};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// `shards` shards of `r` replicas (replica i of each shard at site i, site i and j `|i − j|` ms
/// apart, so closeness follows rank), then one client at each of `client_sites`.
pub(super) fn topology(shards: usize, r: usize, f: usize, client_sites: &[usize]) -> Topology {
    let mut nodes = Vec::new();
    let mut members = Vec::new();
    for shard in 0..shards {
        let mut ids = Vec::new();
        for rank in 0..r {
            let id = NodeId(nodes.len() as u32);
            nodes.push(NodeSpec { id, role: Role::Replica, site: rank, shard: Some(shard), machine: None });
            ids.push(id);
        }
        members.push(Destinations::from(ids));
    }
    for &site in client_sites {
        assert!(site < r, "a client sits at a replica's site");
        let id = NodeId(nodes.len() as u32);
        nodes.push(NodeSpec { id, role: Role::Client, site, shard: None, machine: None });
    }
    let site_delay_ns = (0..r).map(|i| (0..r).map(|j| (i.abs_diff(j) as u64) * 1_000_000).collect()).collect();
    Topology { nodes, shards: members, f, sites: (0..r).map(|i| format!("s{i}")).collect(), site_delay_ns }
}

/// The key-value store plus the order in which it applied requests. That order is part of its
/// state (and of its snapshot), so a scenario can compare what each replica executed.
#[derive(Default)]
struct Recorder {
    applied: Vec<RequestId>,
    store: KvStore,
}

impl StateMachine for Recorder {
    fn apply(&mut self, request: RequestId, command: &Command) -> CommandResult {
        self.applied.push(request);
        self.store.apply(request, command)
    }

    /// The applied requests (a count, then client and number of each), then the store.
    fn snapshot(&self) -> Vec<u8> {
        let mut bytes = (self.applied.len() as u64).to_le_bytes().to_vec();
        for request in &self.applied {
            bytes.extend(request.client.0.to_le_bytes());
            bytes.extend(request.number.to_le_bytes());
        }
        bytes.extend(self.store.snapshot());
        bytes
    }

    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), SnapshotError> {
        unreachable!("Tempo is crash-stop: it never restores a snapshot")
    }

    fn key_digests(&self) -> Vec<KeyDigest> {
        self.store.key_digests()
    }
}

/// Decodes the applied requests from a [`Recorder`] snapshot.
fn applied_requests(snapshot: &[u8]) -> Vec<RequestId> {
    let word = |at: usize| u64::from_le_bytes(snapshot[at..at + 8].try_into().expect("eight bytes"));
    (0..word(0) as usize).map(|i| RequestId { client: ClientId(word(8 + 16 * i)), number: word(16 + 16 * i) }).collect()
}

fn recorder() -> Box<dyn StateMachine> {
    Box::<Recorder>::default()
}

/// How `deliver_all_shuffled` mistreats messages: each delivery takes a message at random from
/// the network (reordering), then drops it with probability `loss` or, with probability
/// `duplicate`, delivers it and puts a copy at the end of the network to be delivered again later.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Chaos {
    pub(super) loss: f64,
    pub(super) duplicate: f64,
}

/// Most deliveries one call of a `deliver_*` method makes before it decides messages keep
/// flowing without end.
const DELIVERIES_MAX: usize = 1_000_000;

/// A Tempo scenario: a [`Cluster<Tempo>`] of [`topology`]'s shape with the [`Recorder`] state
/// machine, a log of every message sent, and the Tempo-specific readings and inputs the
/// scenarios share. It interprets no effect and keeps no message of its own: every delivery,
/// drop and duplicate goes through the cluster. What `deliver_all_holding` sets aside stays in
/// the cluster's network, marked by id here, and every delivery of this struct skips it until
/// `release` puts it back at the end of the network.
pub(super) struct Scenario {
    /// The cluster, for what this struct does not wrap (isolation, a node's counters...).
    pub(super) cluster: Cluster<Tempo>,
    /// Ids of the messages set aside by `deliver_all_holding`, until `release`.
    held: BTreeSet<u64>,
    /// What each crashed replica had committed when it last crashed (dot → timestamp): a crashed
    /// node cannot be read, and what it committed still counts for P1.
    committed_at_crash: BTreeMap<NodeId, BTreeMap<Dot, u64>>,
}

impl Scenario {
    /// `shards` shards of `r` replicas and `clients` clients at site 0.
    pub(super) fn new(shards: usize, r: usize, f: usize, clients: usize) -> Scenario {
        Scenario::with_clients_at(shards, r, f, &vec![0; clients])
    }

    /// `shards` shards of `r` replicas and one client at each of `client_sites`, all started in
    /// id order (replicas first).
    pub(super) fn with_clients_at(shards: usize, r: usize, f: usize, client_sites: &[usize]) -> Scenario {
        let topology = topology(shards, r, f, client_sites);
        let nodes = topology.nodes.len();
        let mut cluster = Cluster::stopped_with_topology(topology, Config::default(), 1);
        cluster.set_state_machine(recorder);
        cluster.keep_sent_log();
        for index in 0..nodes {
            cluster.start(NodeId(u32::try_from(index).expect("node ids fit in u32")));
        }
        Scenario { cluster, held: BTreeSet::new(), committed_at_crash: BTreeMap::new() }
    }

    // ---- who is who ----------------------------------------------------------------------

    /// Rank `rank` of shard 0.
    pub(super) fn replica(&self, rank: usize) -> NodeId {
        self.cluster.replica(rank)
    }

    /// The replicas of `shard`, by rank.
    pub(super) fn shard(&self, shard: usize) -> Vec<NodeId> {
        self.cluster.topology().shards[shard].to_vec()
    }

    /// How many shards.
    pub(super) fn shards(&self) -> usize {
        self.cluster.topology().shards.len()
    }

    /// Every replica of every shard, in id order.
    pub(super) fn all_replicas(&self) -> Vec<NodeId> {
        self.cluster.topology().with_role(Role::Replica).collect()
    }

    /// The first client.
    pub(super) fn client(&self) -> NodeId {
        self.cluster.client(0)
    }

    /// Every client, in id order.
    pub(super) fn clients(&self) -> Vec<NodeId> {
        self.cluster.clients()
    }

    /// The running replica `node`. Panics if it is down.
    pub(super) fn state(&self, node: NodeId) -> &Replica {
        self.cluster.node_as::<Replica>(node)
    }

    /// The true time.
    pub(super) fn now_ns(&self) -> u64 {
        self.cluster.now_ns()
    }

    // ---- inputs --------------------------------------------------------------------------

    /// `client` submits `command`; returns the submission's number.
    pub(super) fn submit(&mut self, client: NodeId, command: Command) -> u64 {
        self.cluster.submit(client, command)
    }

    /// Sends a single-shard `MSubmit` as `client` would, to `coordinator`, without the client's
    /// one-request-at-a-time discipline (the reply is dropped by the client). Returns the dot.
    pub(super) fn inject_submit(&mut self, client: NodeId, coordinator: NodeId, number: u64, command: Command) -> Dot {
        let dot = dot(client, number);
        let message = Message::Submit { dot, shards: vec![0], parts: vec![command], coordinators: vec![coordinator] };
        self.inject(client, coordinator, message);
        dot
    }

    /// Puts a message in the network as if `from` had sent it.
    pub(super) fn inject(&mut self, from: NodeId, to: NodeId, message: Message) {
        self.cluster.inject(from, to, message);
    }

    /// Crashes `node` (it loses its memory and the messages addressed to it), noting what it had
    /// committed if it is a replica.
    pub(super) fn crash(&mut self, node: NodeId) {
        if let Some(replica) = self.cluster.node(node).as_any().downcast_ref::<Replica>() {
            let committed = replica.instances.iter().filter(|(_, i)| i.phase.committed()).map(|(&d, i)| (d, i.ts));
            self.committed_at_crash.insert(node, committed.collect());
        }
        self.cluster.crash(node);
    }

    /// A crashed replica's process starts again: its memory is gone, its storage is not.
    pub(super) fn restart(&mut self, node: NodeId) {
        self.cluster.restart(node);
    }

    // ---- delivery ------------------------------------------------------------------------

    /// Every message ever put in the network, in that order.
    pub(super) fn sent(&self) -> &[Envelope<Tempo>] {
        self.cluster.sent_log()
    }

    /// The oldest message in the network that is not held.
    pub(super) fn next_message(&self) -> Option<&Envelope<Tempo>> {
        self.cluster.pending().find(|envelope| !self.held.contains(&envelope.id))
    }

    /// How many held messages are still in the network (a crash drops those to the crashed node).
    pub(super) fn held_count(&self) -> usize {
        self.cluster.pending().filter(|envelope| self.held.contains(&envelope.id)).count()
    }

    /// Delivers the oldest message not held; false when none is left.
    pub(super) fn step(&mut self) -> bool {
        let Some(id) = self.next_message().map(|envelope| envelope.id) else { return false };
        assert!(self.cluster.deliver(id), "message {id} is in the network");
        true
    }

    /// Delivers every message but the held ones, including those they cause, oldest first.
    pub(super) fn deliver_all(&mut self) {
        let held = &self.held;
        self.cluster.deliver_all_where(|envelope| !held.contains(&envelope.id));
    }

    /// Removes the messages in the network that are not held.
    pub(super) fn drop_pending(&mut self) {
        let held = &self.held;
        self.cluster.drop_where(|envelope| !held.contains(&envelope.id));
    }

    /// Delivers, dropping the messages `drop` selects as their turn comes.
    pub(super) fn deliver_all_dropping(&mut self, drop: impl Fn(NodeId, NodeId, &Message) -> bool) {
        for _ in 0..DELIVERIES_MAX {
            let Some(envelope) = self.next_message() else { return };
            let (id, dropped) = (envelope.id, drop(envelope.from, envelope.to, &envelope.message));
            if dropped {
                self.cluster.drop_where(|envelope| envelope.id == id);
            } else {
                self.cluster.deliver(id);
            }
        }
        panic!("messages keep flowing");
    }

    /// Delivers, setting aside (held) the messages `hold` selects as their turn comes.
    pub(super) fn deliver_all_holding(&mut self, hold: impl Fn(NodeId, NodeId, &Message) -> bool) {
        self.deliver_until(hold, |scenario| scenario.next_message().is_none());
    }

    /// As `deliver_all_holding`, but stops as soon as `done` holds (checked before each
    /// delivery). Panics if the network drains first.
    pub(super) fn deliver_until(
        &mut self,
        hold: impl Fn(NodeId, NodeId, &Message) -> bool,
        done: impl Fn(&Scenario) -> bool,
    ) {
        for _ in 0..DELIVERIES_MAX {
            if done(self) {
                return;
            }
            let envelope = self.next_message().expect("the network drained before `done`");
            let id = envelope.id;
            if hold(envelope.from, envelope.to, &envelope.message) {
                self.held.insert(id);
            } else {
                self.cluster.deliver(id);
            }
        }
        panic!("messages keep flowing");
    }

    /// Puts the held messages `pick` selects back at the end of the network, in the order they
    /// were held (each moves: a copy goes to the end, the original leaves).
    pub(super) fn release(&mut self, pick: impl Fn(NodeId, NodeId, &Message) -> bool) {
        let held: Vec<(u64, bool)> = self
            .cluster
            .pending()
            .filter(|envelope| self.held.contains(&envelope.id))
            .map(|envelope| (envelope.id, pick(envelope.from, envelope.to, &envelope.message)))
            .collect();
        self.held = held.iter().filter(|(_, picked)| !picked).map(|&(id, _)| id).collect();
        for (id, _) in held.into_iter().filter(|(_, picked)| *picked) {
            self.cluster.duplicate(id).expect("a held message is in the network");
            assert_eq!(self.cluster.drop_where(|envelope| envelope.id == id), 1, "the original leaves");
        }
    }

    /// Delivers a message taken at random from those not held, as `chaos` says; false when none
    /// is left.
    pub(super) fn step_shuffled(&mut self, rng: &mut ChaCha8Rng, chaos: Chaos) -> bool {
        let held = &self.held;
        let count = if held.is_empty() {
            self.cluster.pending_count()
        } else {
            self.cluster.pending().filter(|e| !held.contains(&e.id)).count()
        };
        if count == 0 {
            return false;
        }
        let index = rng.random_range(0..count);
        let id = self.cluster.pending().filter(|e| !held.contains(&e.id)).nth(index).expect("index in range").id;
        if chaos.loss > 0.0 && rng.random_bool(chaos.loss) {
            self.cluster.drop_where(|envelope| envelope.id == id);
            return true;
        }
        if chaos.duplicate > 0.0 && rng.random_bool(chaos.duplicate) {
            self.cluster.duplicate(id);
        }
        self.cluster.deliver(id);
        true
    }

    /// Delivers everything but the held messages in a random order, as `chaos` says.
    pub(super) fn deliver_all_shuffled(&mut self, rng: &mut ChaCha8Rng, chaos: Chaos) {
        for _ in 0..DELIVERIES_MAX {
            if !self.step_shuffled(rng, chaos) {
                return;
            }
        }
        panic!("messages keep flowing");
    }

    // ---- time ----------------------------------------------------------------------------

    /// Fires `timer` now at every live replica that has it armed, whatever its deadline (the
    /// messages it sends stay in the network).
    pub(super) fn fire(&mut self, timer: Timer) {
        for node in self.all_replicas() {
            if self.cluster.is_up(node) {
                self.cluster.fire_timer(node, &timer);
            }
        }
    }

    /// One millisecond passes: every timer due fires (a replica's promise and tick timers come
    /// every millisecond; a client's retry timer after its time-out); the network is not drained.
    pub(super) fn tick_ms(&mut self) {
        self.cluster.advance(1_000_000);
    }

    /// Lets `ms` pass in 1 ms rounds: the timers due fire, then the network drains (but for the
    /// held messages).
    pub(super) fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms {
            self.tick_ms();
            self.deliver_all();
        }
    }

    /// As `run_ms`, the network draining in a random order, as `chaos` says.
    pub(super) fn run_ms_shuffled(&mut self, ms: u64, rng: &mut ChaCha8Rng, chaos: Chaos) {
        for _ in 0..ms {
            self.tick_ms();
            self.deliver_all_shuffled(rng, chaos);
        }
    }

    // ---- replica state -------------------------------------------------------------------

    /// Moves a replica's clock on `key` to `clock` as if it had proposed there before,
    /// publishing the promises so that its peers learn them.
    pub(super) fn set_clock(&mut self, rank: usize, key: &str, clock: u64) {
        self.set_clock_of(self.replica(rank), key, clock);
    }

    /// `set_clock` for any replica of any shard.
    pub(super) fn set_clock_of(&mut self, node: NodeId, key: &str, clock: u64) {
        let replica = self.cluster.node_as_mut::<Replica>(node);
        let mut fresh = std::mem::take(&mut replica.fresh);
        replica.clocks.bump(&[ordo_core::Key::from(key.to_string())], clock, &mut fresh);
        replica.fresh = fresh;
        replica.publish_fresh();
    }

    /// `recover(id)` called at `node` now, as its failure detector would: the command's
    /// recovery deadline is moved to now and the node's tick timer fires (the messages it sends
    /// stay in the network). The command must be pending there, its shard's timestamp unknown.
    pub(super) fn recover(&mut self, node: NodeId, dot: Dot) {
        let replica = self.cluster.node_as_mut::<Replica>(node);
        let instance = replica.instances.get(&dot).expect("known");
        assert!(instance.phase.pending(), "{node}: only a pending command is recovered");
        assert!(!instance.shard_ts.contains_key(&replica.shard), "{node}: its shard's timestamp is unknown");
        replica.watch.insert(dot, 0);
        let recoveries = self.events(node, "recovery");
        assert!(self.cluster.fire_timer(node, &Timer::Tick), "{node}: the tick timer is armed");
        assert_eq!(self.events(node, "recovery"), recoveries + 1, "{node} recovered {dot:?} and nothing else");
    }

    /// How many commands `node` executed.
    pub(super) fn executed(&self, node: NodeId) -> u64 {
        self.state(node).stats.executed
    }

    /// The requests `node`'s state machine applied, in order.
    pub(super) fn applied(&self, node: NodeId) -> Vec<RequestId> {
        applied_requests(&self.state(node).state_machine.snapshot())
    }

    /// The command's timestamp at `node`, once committed there (also once executed
    /// everywhere and forgotten: the record keeps it).
    pub(super) fn ts(&self, node: NodeId, dot: Dot) -> Option<u64> {
        let replica = self.state(node);
        match replica.instances.get(&dot) {
            Some(instance) => instance.phase.committed().then_some(instance.ts),
            None => replica.gc.forgotten.stamps(dot).map(|stamps| stamps.last),
        }
    }

    /// Every committed timestamp: (replica, dot, timestamp), at the live replicas now and at the
    /// crashed ones as they were when they crashed.
    pub(super) fn committed(&self) -> Vec<(NodeId, Dot, u64)> {
        let mut all = Vec::new();
        for (&node, committed) in &self.committed_at_crash {
            all.extend(committed.iter().map(|(&dot, &ts)| (node, dot, ts)));
        }
        for node in self.all_replicas().into_iter().filter(|&node| self.cluster.is_up(node)) {
            let instances = self.state(node).instances.iter().filter(|(_, i)| i.phase.committed());
            all.extend(instances.map(|(&dot, i)| (node, dot, i.ts)));
            all.extend(self.state(node).gc.forgotten.iter().map(|(dot, stamps)| (node, dot, stamps.last)));
        }
        all
    }

    /// How often `node` dropped an input for `reason`.
    pub(super) fn drops(&self, node: NodeId, reason: &str) -> u64 {
        self.cluster.stats(node).dropped.get(reason).copied().unwrap_or(0)
    }

    /// How often `node` counted `event`.
    pub(super) fn events(&self, node: NodeId, event: &str) -> u64 {
        self.cluster.stats(node).events.get(event).copied().unwrap_or(0)
    }

    // ---- clients -------------------------------------------------------------------------

    /// Whether submission `op` completed at its client.
    pub(super) fn completed(&self, op: u64) -> bool {
        self.cluster.result(op).is_some()
    }

    /// The result of submission `op`, once completed.
    pub(super) fn result(&self, op: u64) -> Option<CommandResult> {
        self.cluster.result(op).cloned()
    }

    /// Every completion so far, in order: (submission, result).
    pub(super) fn completions(&self) -> Vec<(u64, CommandResult)> {
        self.cluster.completions().iter().map(|c| (c.op, c.result.clone())).collect()
    }
}

/// The id a client node's requests carry: `NodeContext::client_id` of its first incarnation,
/// which the testkit numbers 1 (no scenario restarts a client).
pub(super) fn client_id(client: NodeId) -> ClientId {
    const FIRST_INCARNATION: u64 = 1;
    ClientId((FIRST_INCARNATION << 32) | u64::from(client.0))
}

/// The first attempt of `client`'s request `number`.
pub(super) fn dot(client: NodeId, number: u64) -> Dot {
    Dot { request: RequestId { client: client_id(client), number }, attempt: 0 }
}

#[test]
fn single_command_fast_path_t7() {
    // Goal: T7 — one command, no contention: fast path; MPropose to ⌊r/2⌋ + f − 1 others, MPayload
    // to the rest; every replica executes; the client gets its reply; one timestamp.
    for (r, f) in [(3, 1), (5, 1), (5, 2)] {
        let mut s = Scenario::new(1, r, f, 1);
        let client = s.client();
        let op = s.submit(client, Command::set("a", "1"));
        s.deliver_all();
        s.run_ms(3);
        let coordinator = s.replica(0);
        let proposes = s.sent().iter().filter(|e| matches!(e.message, Message::Propose { .. })).count();
        let payloads = s.sent().iter().filter(|e| matches!(e.message, Message::Payload { .. })).count();
        assert_eq!(proposes, r / 2 + f - 1, "r={r} f={f}: MPropose to the rest of the fast quorum");
        assert_eq!(payloads, r - (r / 2 + f), "r={r} f={f}: MPayload to the others");
        assert_eq!(s.state(coordinator).stats.fast_path_commits, 1);
        assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
        let d = dot(client, 1);
        let stamps: BTreeSet<u64> = s.shard(0).iter().map(|&n| s.ts(n, d).unwrap()).collect();
        assert_eq!(stamps.len(), 1, "one commit timestamp");
        for node in s.shard(0) {
            assert_eq!(s.executed(node), 1, "r={r} f={f}: {node} executed");
        }
    }
}

#[test]
fn fast_path_rule_table_1_t3() {
    // Goal: T3 — Table 1 (r = 5, A proposes 6): rows a, c, d take the fast path, b does not.
    // Method: set the members' clocks as in the table, submit at A, count fast and slow paths.
    let rows: [(usize, [u64; 4], bool, u64); 4] = [
        (2, [5, 6, 10, 10], true, 11),
        (2, [5, 6, 10, 5], false, 11),
        (1, [5, 6, 10, 0], true, 11),
        (1, [5, 5, 1, 0], true, 6),
    ];
    for (f, clocks, fast, expected) in rows {
        let mut s = Scenario::new(1, 5, f, 1);
        let key = ordo_core::Key::from("a");
        for (rank, &clock) in clocks.iter().enumerate() {
            s.set_clock(rank, "a", clock);
        }
        let client = s.client();
        s.submit(client, Command::set("a", "1"));
        s.deliver_all();
        let a = s.replica(0);
        let stats = &s.state(a).stats;
        assert_eq!(
            (stats.fast_path_commits, stats.slow_path_commits),
            (u64::from(fast), u64::from(!fast)),
            "f={f} {clocks:?}"
        );
        assert_eq!(s.ts(a, dot(client, 1)), Some(expected), "f={f} {clocks:?}");
        // T9: after the slow path everyone commits the same value and bumps past it.
        for rank in 0..5 {
            let node = s.replica(rank);
            assert_eq!(s.ts(node, dot(client, 1)), Some(expected));
            assert!(s.state(node).clocks.clock(&key) >= expected);
        }
    }
}

#[test]
fn coordinator_crash_after_fast_path_recovers_t14() {
    // Goal: T14 (R-a) — r = 5, f = 1, Table 1c clocks: A decides the fast path with 11 and
    // crashes before any MCommit leaves. Recovery by the others must commit 11 everywhere and
    // the command must execute at every live replica.
    let mut s = Scenario::new(1, 5, 1, 1);
    for (rank, clock) in [(0, 5), (1, 6), (2, 10)] {
        s.set_clock(rank, "a", clock);
    }
    let client = s.client();
    s.submit(client, Command::set("a", "1"));
    let a = s.replica(0);
    s.deliver_all_dropping(|from, _, m| from == a && matches!(m, Message::Commit { .. }));
    assert_eq!(s.ts(a, dot(client, 1)), Some(11), "A took the fast path with 11");
    s.crash(a);
    s.run_ms(200);
    for rank in 1..5 {
        let node = s.replica(rank);
        assert_eq!(s.ts(node, dot(client, 1)), Some(11), "recovery keeps the fast-path value");
        assert_eq!(s.executed(node), 1);
    }
    let recoveries: u64 = (1..5).map(|rank| s.events(s.replica(rank), "recovery")).sum();
    assert!(recoveries >= 1, "someone recovered");
}

#[test]
fn coordinator_crash_after_propose_unblocks_others_t23() {
    // Goal: T23 — A sends MPropose and crashes; the fast-quorum members' attached promises hold
    // back every later command on the key until recovery commits A's command; then everything
    // executes, in the same order everywhere.
    let mut s = Scenario::new(1, 5, 1, 2);
    let clients = s.clients();
    s.submit(clients[0], Command::set("a", "1"));
    let a = s.replica(0);
    // Deliver only A's proposes and payloads, then A crashes.
    s.deliver_all_dropping(|from, to, m| {
        from == a && to != a && !matches!(m, Message::Propose { .. } | Message::Payload { .. })
    });
    s.crash(a);
    s.drop_pending();
    s.run_ms(100);
    s.submit(clients[1], Command::set("a", "2"));
    s.run_ms(300);
    let orders: BTreeSet<Vec<u8>> = (1..5)
        .map(|rank| {
            let node = s.replica(rank);
            assert_eq!(s.executed(node), 2, "{node} executed both commands");
            s.state(node).state_machine.snapshot()
        })
        .collect();
    assert_eq!(orders.len(), 1, "every live replica ends in the same state");
}

#[test]
fn recovery_rules_r_a_to_r_d_t15_t16_t17() {
    // Goal: Rules A and B on the worked examples of spec §6.5. Method: build the MRecAcks of
    // each recovery quorum and check the chosen timestamp.
    let n = |i: u32| NodeId(i);
    let payload = |quorum: Vec<NodeId>| super::messages::Payload {
        shards: vec![0],
        parts: vec![Command::set("a", "1")],
        coordinators: vec![n(0)],
        quorums: vec![quorum],
        client: n(9),
    };
    use RecPhase::{RecoverP, RecoverR};
    // R-a: r = 5, f = 1, fast quorum {A, B, C}; quorum {B, C, D, E}: I = {B, C}, s = false → 11.
    let acks: BTreeMap<NodeId, (u64, RecPhase, u64)> =
        [(n(1), (7, RecoverP, 0)), (n(2), (11, RecoverP, 0)), (n(3), (1, RecoverR, 0)), (n(4), (1, RecoverR, 0))]
            .into();
    assert_eq!(choose_timestamp(&acks, &payload(vec![n(0), n(1), n(2)]), 0), 11);
    // R-b: r = 5, f = 2, fast quorum {A, B, C, D}, Table 1a: any 3-quorum holds 2 of {B, C, D} → 11.
    let fq = vec![n(0), n(1), n(2), n(3)];
    for quorum in [[1, 2, 4], [1, 3, 4], [2, 3, 4]] {
        let value = |i: u32| match i {
            1 => (7, RecoverP, 0),
            2 | 3 => (11, RecoverP, 0),
            _ => (1, RecoverR, 0),
        };
        let acks: BTreeMap<NodeId, _> = quorum.iter().map(|&i| (n(i), value(i))).collect();
        // E answered in RECOVER-R but is outside the fast quorum: s stays false.
        assert_eq!(choose_timestamp(&acks, &payload(fq.clone()), 0), 11, "quorum {quorum:?}");
    }
    // R-c: Table 1b, quorum {B, D, E}: I = {B, D} → max(7, 6) = 7.
    let acks: BTreeMap<NodeId, _> =
        [(n(1), (7, RecoverP, 0)), (n(3), (6, RecoverP, 0)), (n(4), (1, RecoverR, 0))].into();
    assert_eq!(choose_timestamp(&acks, &payload(fq.clone()), 0), 7);
    // s = true when a fast-quorum member computed its proposal in MRec: max over the quorum.
    let acks: BTreeMap<NodeId, _> =
        [(n(1), (7, RecoverR, 0)), (n(3), (6, RecoverP, 0)), (n(4), (12, RecoverR, 0))].into();
    assert_eq!(choose_timestamp(&acks, &payload(fq.clone()), 0), 12);
    // R-d: a value accepted at a ballot wins (Rule A), the highest ballot first.
    let acks: BTreeMap<NodeId, _> =
        [(n(1), (11, RecoverP, 1)), (n(3), (6, RecoverP, 0)), (n(4), (9, RecoverR, 7))].into();
    assert_eq!(choose_timestamp(&acks, &payload(fq), 0), 9);
}

#[test]
fn recovery_ballots_t21() {
    // Goal: T21 — b > bal, b > r, b owned by the sender, for every (rank, bal, r); the floor
    // formula of the paper gives b = rank + 1 ≤ r at bal = 0 (the pitfall of spec §6.4).
    for r in [3usize, 5, 7] {
        for rank in 0..r {
            for bal in 0..40u64 {
                let b = recovery_ballot(rank, bal, r);
                assert!(b > bal && b > r as u64 && (b - 1) % r as u64 == rank as u64);
            }
            assert_eq!(recovery_ballot_floor(rank, 0, r), rank as u64 + 1, "the pitfall");
        }
    }
}

#[test]
fn multi_shard_command_t24_t27() {
    // Goal: T24/T27 — an MSET over two shards of three executes once in each accessed shard
    // with the maximum of the shards' timestamps; the client gets OK; no replica of the third
    // shard hears of it.
    let mut s = Scenario::new(3, 3, 1, 1);
    let shard_of = |k: &str| ordo_core::shard_of_key(k.as_bytes(), 3);
    let (mut k0, mut k1) = (None, None);
    for i in 0..100 {
        let key = format!("k{i}");
        match shard_of(&key) {
            0 if k0.is_none() => k0 = Some(key),
            1 if k1.is_none() => k1 = Some(key),
            _ => {}
        }
    }
    let (k0, k1) = (k0.unwrap(), k1.unwrap());
    let client = s.client();
    let op = s.submit(
        client,
        Command::MSet { pairs: vec![(k1.clone().into(), "x".into()), (k0.clone().into(), "y".into())] },
    );
    s.deliver_all();
    s.run_ms(5);
    assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
    let d = dot(client, 1);
    let accessed: Vec<NodeId> = s.shard(0).into_iter().chain(s.shard(1)).collect();
    let stamps: BTreeSet<u64> = accessed.iter().map(|&node| s.ts(node, d).unwrap()).collect();
    assert_eq!(stamps.len(), 1, "one final timestamp in both shards");
    for &node in &accessed {
        assert_eq!(s.executed(node), 1);
    }
    let third: BTreeSet<NodeId> = s.shard(2).into_iter().collect();
    let about_it = s.sent().iter().filter(|e| {
        let stream = matches!(e.message, Message::Promises { .. } | Message::Executed { .. });
        (third.contains(&e.from) || third.contains(&e.to)) && !stream
    });
    assert_eq!(about_it.count(), 0, "genuine: the third shard takes no step");
}

#[test]
fn multi_shard_with_crashed_coordinator_in_one_shard() {
    // Goal: a multi-shard command whose coordinator in one shard crashes before doing anything
    // still executes in both shards: the other shard hands the payload over (Help) and a replica
    // there recovers it.
    let mut s = Scenario::new(2, 3, 1, 1);
    let shard_of = |k: &str| ordo_core::shard_of_key(k.as_bytes(), 2);
    let k0 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 0).unwrap();
    let k1 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 1).unwrap();
    let coordinator_1 = s.shard(1)[0];
    s.crash(coordinator_1);
    let client = s.client();
    s.submit(client, Command::MSet { pairs: vec![(k0.into(), "x".into()), (k1.into(), "y".into())] });
    s.deliver_all();
    s.run_ms(300);
    for node in s.shard(0).into_iter().chain(s.shard(1).into_iter().skip(1)) {
        assert_eq!(s.executed(node), 1, "{node} executed");
    }
    // Shard 0 executed it everywhere, so it may have forgotten it already.
    let first = s.state(s.shard(0)[0]);
    let d = dot(client, 1);
    assert!(first.instances.get(&d).map_or(first.gc.forgotten.contains(d), |i| i.phase == Phase::Execute));
}

#[test]
fn a_stamped_command_splits_by_shard_and_every_part_keeps_its_stamp() {
    // Goal: the gateway stamps every command (expiry); a stamped multi-key command over several
    // shards splits like the plain one, each part keeps the stamp, and a stamped transaction
    // over several shards is still refused. Before the fix, a stamped MGET hit `unreachable!`.
    let topology = topology(3, 3, 1, &[0]);
    let keys: Vec<ordo_core::Key> = (0..12).map(|i| ordo_core::Key::from(format!("k{i}"))).collect();
    let plain = super::client::split(&Command::MGet { keys: keys.clone() }, &topology).expect("splits");
    let stamped = super::client::split(&Command::MGet { keys }.timed(77), &topology).expect("splits");
    assert!(plain.parts.len() > 1, "the keys fall in several shards");
    let expected: Vec<(u32, Command)> = plain.parts.into_iter().map(|(s, part)| (s, part.timed(77))).collect();
    assert_eq!(stamped.parts, expected);
    let transaction = Command::Transaction {
        watched: vec![],
        commands: (0..12).map(|i| Command::set(format!("k{i}"), "v")).collect(),
    };
    assert!(super::client::split(&transaction.timed(5), &topology).is_err());
}

#[test]
fn set_commands_over_several_shards_are_refused() {
    // Goal: SINTER/SUNION/SDIFF (and their STORE forms) and SMOVE whose keys live in several
    // shards get Redis Cluster's CROSSSLOT, as a transaction does, instead of being split as
    // single-key commands; within one shard they go whole. Method: split them over two shards.
    use super::client::{CROSS_SHARD, split};
    use ordo_core::command::Combine;
    let topology = topology(2, 3, 1, &[0]);
    let keys: Vec<ordo_core::Key> = (0..64).map(|i| format!("k{i}").into()).collect();
    let a = keys[0].clone();
    let other = keys.iter().find(|k| topology.shard_of(k) != topology.shard_of(&a)).expect("two shards").clone();
    let same = keys[1..].iter().find(|k| topology.shard_of(k) == topology.shard_of(&a)).expect("a neighbour").clone();
    let union = |keys: Vec<ordo_core::Key>| Command::SetAlgebra { op: Combine::Union, keys, destination: None };
    let refused =
        |command: &Command| matches!(split(command, &topology), Err(CommandResult::Error(text)) if text == CROSS_SHARD);
    assert!(refused(&union(vec![a.clone(), other.clone()])));
    let store = Command::SetAlgebra { op: Combine::Inter, keys: vec![a.clone()], destination: Some(other.clone()) };
    assert!(refused(&store));
    assert!(refused(&Command::SetMove { source: a.clone(), destination: other, member: "m".into() }));
    let whole = split(&union(vec![a, same]), &topology).expect("one shard");
    assert_eq!(whole.parts.len(), 1);
}

#[test]
fn keyspace_commands_are_refused_before_they_take_a_number() {
    // Goal: KEYS, FLUSHALL (bare or in a transaction) and a command naming no key never reach a
    // replica (whose per-key clocks and queues cannot order them): the client answers Tempo's
    // refusal at once, sends nothing, and its next command still takes number 1.
    let mut s = Scenario::new(1, 3, 1, 1);
    let client = s.client();
    let flush = Command::Keyspace(ordo_core::command::Keyspace::Flush);
    let refused = [
        (
            Command::Keyspace(ordo_core::command::Keyspace::Keys { pattern: "*".into() }),
            super::client::KEYSPACE_REFUSED,
        ),
        (flush.clone(), super::client::KEYSPACE_REFUSED),
        (
            Command::Transaction { watched: Vec::new(), commands: vec![Command::set("k", "v"), flush] },
            super::client::KEYSPACE_REFUSED,
        ),
        (Command::Del { keys: Vec::new() }, super::client::NO_KEY_REFUSED),
    ];
    let mut ops = Vec::new();
    for (command, _) in &refused {
        ops.push(s.submit(client, command.clone()));
    }
    s.deliver_all();
    let expected: Vec<(u64, CommandResult)> =
        ops.iter().zip(&refused).map(|(&op, (_, text))| (op, CommandResult::Error(text.to_string()))).collect();
    assert_eq!(s.completions(), expected);
    assert!(s.sent().is_empty() || s.sent().iter().all(|e| e.from != client), "the client sent nothing");
    s.submit(client, Command::set("k", "v"));
    s.deliver_all();
    s.run_ms(5);
    assert!(s.ts(s.shard(0)[0], dot(client, 1)).is_some(), "no gap in the numbers");
}

#[test]
fn rename_across_shards_is_crossslot() {
    // Goal: RENAME moves a value at one point of one shard's order, so over two shards the
    // client refuses it as Redis Cluster does, instead of splitting it.
    let mut s = Scenario::new(2, 3, 1, 1);
    let shard_of = |k: &str| ordo_core::shard_of_key(k.as_bytes(), 2);
    let k0 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 0).unwrap();
    let k1 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 1).unwrap();
    let client = s.client();
    let op = s.submit(client, Command::Rename { source: k0.into(), destination: k1.into(), only_if_absent: false });
    s.deliver_all();
    assert_eq!(s.completions(), vec![(op, CommandResult::Error(super::client::CROSS_SHARD.into()))]);
}
