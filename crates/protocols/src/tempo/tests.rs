//! Scenario tests of Tempo (specs/tempo.md §11). A small network of our own drives the nodes
//! (the shared testkit has one shard and f = (r − 1)/2; these scenarios need r = 5 with f = 1 and
//! several shards): messages are delivered first in, first out, or in a random order with loss
//! and duplication; tests hold, drop and crash. More scenarios use this network in
//! `tests_scenarios.rs` and `tests_recovery.rs`.

use super::client::Client;
use super::messages::{Dot, Message, RecPhase};
use super::recovery::{choose_timestamp, recovery_ballot, recovery_ballot_floor};
use super::replica::{Boot, Phase, Replica};
use super::{Config, Flaw, Tempo, Timer};
use ordo_core::kv::SnapshotError;
use ordo_core::{
    ClientId, Command, CommandResult, Destinations, Effect, KeyDigest, KvStore, Node, NodeContext, NodeId, NodeSpec,
    Outbox, RequestId, Role, StateMachine, Submission, Topology,
};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// `shards` shards of `r` replicas (replica i of each shard at site i, site i and j `|i − j|` ms
/// apart, so closeness follows rank), then one client at each of `client_sites`.
fn topology(shards: usize, r: usize, f: usize, client_sites: &[usize]) -> Topology {
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
/// the queue (reordering), then drops it with probability `loss` or, with probability
/// `duplicate`, delivers it and puts a copy back to be delivered again later.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Chaos {
    pub(super) loss: f64,
    pub(super) duplicate: f64,
}

/// The network of a scenario.
pub(super) struct Net {
    pub(super) topology: Arc<Topology>,
    pub(super) replicas: BTreeMap<NodeId, Replica>,
    pub(super) clients: BTreeMap<NodeId, Client>,
    pub(super) queue: VecDeque<(NodeId, NodeId, Message)>,
    /// Every message ever sent: (from, to, message).
    pub(super) sent: Vec<(NodeId, NodeId, Message)>,
    /// Messages set aside by `deliver_all_holding`, until `release`.
    pub(super) held: Vec<(NodeId, NodeId, Message)>,
    pub(super) down: BTreeSet<NodeId>,
    pub(super) now_ns: u64,
    pub(super) completions: Vec<(u64, CommandResult)>,
    next_op: u64,
    flaw: Flaw,
    /// What each replica wrote to its durable storage (it survives `restart`).
    pub(super) durable: BTreeMap<NodeId, Vec<()>>,
}

/// This network has no storage: a replica's boot marker is durable at once, so the `Booted`
/// message it sends itself is handed back before anything else happens.
/// Returns the records the replica wrote.
fn boot_at_once(replica: &mut Replica, now: ordo_core::ClockReading, out: &mut Outbox<Tempo>) -> Vec<()> {
    let id = replica.id;
    let mut written = Vec::new();
    let effects: Vec<Effect<Tempo>> = out.drain().collect();
    for effect in effects {
        match effect {
            Effect::Send { to, message: Message::Booted, .. } => {
                assert_eq!(to, id, "a replica sends Booted to itself");
                replica.on_message(now, id, Message::Booted, out);
            }
            Effect::Persist { record, .. } => written.push(record),
            Effect::SetTimer { timer, after_ns } => out.set_timer(timer, after_ns),
            other => panic!("a replica only persists, sets timers and boots when it starts: {other:?}"),
        }
    }
    written
}

impl Net {
    /// `shards` shards of `r` replicas and `clients` clients at site 0.
    pub(super) fn new(shards: usize, r: usize, f: usize, clients: usize, flaw: Flaw) -> Net {
        Net::with_clients_at(shards, r, f, &vec![0; clients], flaw)
    }

    /// `shards` shards of `r` replicas and one client at each of `client_sites`.
    pub(super) fn with_clients_at(shards: usize, r: usize, f: usize, client_sites: &[usize], flaw: Flaw) -> Net {
        let topology = Arc::new(topology(shards, r, f, client_sites));
        let mut net = Net {
            topology: topology.clone(),
            replicas: BTreeMap::new(),
            clients: BTreeMap::new(),
            queue: VecDeque::new(),
            sent: Vec::new(),
            held: Vec::new(),
            down: BTreeSet::new(),
            now_ns: 0,
            completions: Vec::new(),
            next_op: 0,
            flaw,
            durable: BTreeMap::new(),
        };
        for spec in &topology.nodes {
            if spec.role == Role::Client {
                let mut out = Outbox::default();
                let mut client = Client::new(net.context(spec.id, 0));
                client.on_start(ordo_core::ClockReading::exact(0), &mut out);
                net.clients.insert(spec.id, client);
                net.absorb(spec.id, &mut out);
            } else {
                net.boot(spec.id, 0);
            }
        }
        net
    }

    pub(super) fn context(&self, id: NodeId, incarnation: u64) -> NodeContext<Tempo> {
        NodeContext::<Tempo> {
            id,
            topology: self.topology.clone(),
            config: Config::default(),
            seed: u64::from(id.0) + 1 + incarnation * 7919,
            new_state_machine: recorder,
            incarnation,
        }
    }

    /// Starts a replica process from what its storage holds (as `Tempo::new_node` does).
    fn boot(&mut self, id: NodeId, incarnation: u64) {
        let stored = self.durable.get(&id).cloned().unwrap_or_default();
        let mut replica = Replica::new(self.context(id, incarnation), self.flaw, Boot::from_durable(&stored));
        let now = self.now();
        let mut out = Outbox::default();
        replica.on_start(now, &mut out);
        let written = boot_at_once(&mut replica, now, &mut out);
        self.durable.entry(id).or_default().extend(written);
        self.replicas.insert(id, replica);
        self.absorb(id, &mut out);
    }

    /// A crashed replica's process starts again: its memory is gone, its storage is not.
    pub(super) fn restart(&mut self, id: NodeId) {
        assert!(self.down.remove(&id), "only a crashed replica restarts");
        self.boot(id, 1);
    }

    fn absorb(&mut self, from: NodeId, out: &mut Outbox<Tempo>) {
        for effect in out.drain() {
            match effect {
                Effect::Send { to, message, .. } => {
                    self.sent.push((from, to, message.clone()));
                    self.queue.push_back((from, to, message));
                }
                Effect::Multicast { to, message, .. } => {
                    for &node in to.iter().filter(|&&n| n != from) {
                        self.sent.push((from, node, message.clone()));
                        self.queue.push_back((from, node, message.clone()));
                    }
                }
                Effect::Complete { op, result } => self.completions.push((op, result)),
                _ => {}
            }
        }
    }

    fn now(&self) -> ordo_core::ClockReading {
        ordo_core::ClockReading::exact(self.now_ns)
    }

    pub(super) fn submit(&mut self, client: NodeId, command: Command) -> u64 {
        let op = self.next_op;
        self.next_op += 1;
        let mut out = Outbox::default();
        let now = self.now();
        self.clients.get_mut(&client).unwrap().on_submit(now, Submission { op, command }, &mut out);
        self.absorb(client, &mut out);
        op
    }

    /// Sends a single-shard `MSubmit` as `client` would, to `coordinator`, without the client's
    /// one-request-at-a-time discipline (the reply is dropped by the client). Returns the dot.
    pub(super) fn inject_submit(&mut self, client: NodeId, coordinator: NodeId, number: u64, command: Command) -> Dot {
        let dot = dot(client, number);
        let message = Message::Submit { dot, shards: vec![0], parts: vec![command], coordinators: vec![coordinator] };
        self.inject(client, coordinator, message);
        dot
    }

    /// Puts a message on the wire as if `from` had sent it.
    pub(super) fn inject(&mut self, from: NodeId, to: NodeId, message: Message) {
        self.sent.push((from, to, message.clone()));
        self.queue.push_back((from, to, message));
    }

    /// Hands one message to its receiver (nothing happens if either end is down).
    fn deliver(&mut self, from: NodeId, to: NodeId, message: Message) {
        if self.down.contains(&to) || self.down.contains(&from) {
            return;
        }
        let now = self.now();
        let mut out = Outbox::default();
        if let Some(replica) = self.replicas.get_mut(&to) {
            replica.on_message(now, from, message, &mut out);
            replica.check_invariants();
        } else if let Some(client) = self.clients.get_mut(&to) {
            client.on_message(now, from, message, &mut out);
            client.check_invariants();
        }
        self.absorb(to, &mut out);
    }

    /// Delivers the oldest message; false when none is left.
    pub(super) fn step(&mut self) -> bool {
        let Some((from, to, message)) = self.queue.pop_front() else { return false };
        self.deliver(from, to, message);
        true
    }

    pub(super) fn deliver_all(&mut self) {
        let mut steps = 0;
        while self.step() {
            steps += 1;
            assert!(steps < 1_000_000, "messages keep flowing");
        }
    }

    /// Delivers, dropping the messages `drop` selects.
    pub(super) fn deliver_all_dropping(&mut self, drop: impl Fn(NodeId, NodeId, &Message) -> bool) {
        let mut steps = 0;
        while let Some((from, to, message)) = self.queue.front() {
            if drop(*from, *to, message) {
                self.queue.pop_front();
                continue;
            }
            self.step();
            steps += 1;
            assert!(steps < 1_000_000, "messages keep flowing");
        }
    }

    /// Delivers, setting aside (in `held`) the messages `hold` selects.
    pub(super) fn deliver_all_holding(&mut self, hold: impl Fn(NodeId, NodeId, &Message) -> bool) {
        let mut steps = 0;
        while let Some((from, to, message)) = self.queue.pop_front() {
            if hold(from, to, &message) {
                self.held.push((from, to, message));
                continue;
            }
            self.deliver(from, to, message);
            steps += 1;
            assert!(steps < 1_000_000, "messages keep flowing");
        }
    }

    /// As `deliver_all_holding`, but stops as soon as `done` holds (checked after each delivery).
    pub(super) fn deliver_until(
        &mut self,
        hold: impl Fn(NodeId, NodeId, &Message) -> bool,
        done: impl Fn(&Net) -> bool,
    ) {
        while !done(self) {
            let (from, to, message) = self.queue.pop_front().expect("the network drained before `done`");
            if hold(from, to, &message) {
                self.held.push((from, to, message));
            } else {
                self.deliver(from, to, message);
            }
        }
    }

    /// Puts the held messages `pick` selects back on the wire, in the order they were held.
    pub(super) fn release(&mut self, pick: impl Fn(NodeId, NodeId, &Message) -> bool) {
        let (released, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.held).into_iter().partition(|(from, to, m)| pick(*from, *to, m));
        self.held = kept;
        self.queue.extend(released);
    }

    /// Delivers a message taken at random from the queue, as `chaos` says; false when none is
    /// left.
    pub(super) fn step_shuffled(&mut self, rng: &mut ChaCha8Rng, chaos: Chaos) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let index = rng.random_range(0..self.queue.len());
        let (from, to, message) = self.queue.swap_remove_back(index).expect("index in range");
        if chaos.loss > 0.0 && rng.random_bool(chaos.loss) {
            return true;
        }
        if chaos.duplicate > 0.0 && rng.random_bool(chaos.duplicate) {
            self.queue.push_back((from, to, message.clone()));
        }
        self.deliver(from, to, message);
        true
    }

    /// Delivers everything in a random order, as `chaos` says.
    pub(super) fn deliver_all_shuffled(&mut self, rng: &mut ChaCha8Rng, chaos: Chaos) {
        let mut steps = 0;
        while self.step_shuffled(rng, chaos) {
            steps += 1;
            assert!(steps < 1_000_000, "messages keep flowing");
        }
    }

    /// Fires `timer` at every live replica (the messages it sends stay queued).
    pub(super) fn fire(&mut self, timer: Timer) {
        let now = self.now();
        let ids: Vec<NodeId> = self.replicas.keys().copied().filter(|n| !self.down.contains(n)).collect();
        for id in ids {
            let mut out = Outbox::default();
            self.replicas.get_mut(&id).unwrap().on_timer(now, timer.clone(), &mut out);
            self.absorb(id, &mut out);
        }
    }

    /// One millisecond passes: every live replica's periodic timers fire (and every client's
    /// retry timer at each multiple of 50 ms); the network is not drained.
    pub(super) fn tick_ms(&mut self) {
        self.now_ns += 1_000_000;
        self.fire(Timer::Promises);
        self.fire(Timer::Tick);
        if self.now_ns.is_multiple_of(50_000_000) {
            let now = self.now();
            let ids: Vec<NodeId> = self.clients.keys().copied().collect();
            for id in ids {
                let mut out = Outbox::default();
                self.clients.get_mut(&id).unwrap().on_timer(now, Timer::ClientRetry, &mut out);
                self.absorb(id, &mut out);
            }
        }
    }

    /// Lets `ms` pass in 1 ms rounds: every live node's periodic timers fire, then the network
    /// drains.
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

    /// Moves a replica's clock on `key` to `clock` as if it had proposed there before,
    /// publishing the promises so that its peers learn them.
    pub(super) fn set_clock(&mut self, rank: usize, key: &str, clock: u64) {
        self.set_clock_of(self.replica(rank), key, clock);
    }

    /// `set_clock` for any replica of any shard.
    pub(super) fn set_clock_of(&mut self, node: NodeId, key: &str, clock: u64) {
        let replica = self.replicas.get_mut(&node).unwrap();
        let mut fresh = std::mem::take(&mut replica.fresh);
        replica.clocks.bump(&[ordo_core::Key::from(key.to_string())], clock, &mut fresh);
        replica.fresh = fresh;
        replica.publish_fresh();
    }

    /// `recover(id)` called at `node` now (as its failure detector would).
    pub(super) fn recover(&mut self, node: NodeId, dot: Dot) {
        let mut out = Outbox::default();
        let replica = self.replicas.get_mut(&node).unwrap();
        replica.recover(dot, &mut out);
        replica.check_invariants();
        self.absorb(node, &mut out);
    }

    /// Rank `rank` of shard 0.
    pub(super) fn replica(&self, rank: usize) -> NodeId {
        self.topology.shards[0][rank]
    }

    pub(super) fn client(&self) -> NodeId {
        *self.clients.keys().next().unwrap()
    }

    pub(super) fn executed(&self, node: NodeId) -> u64 {
        self.replicas[&node].stats.executed
    }

    /// The requests `node`'s state machine applied, in order.
    pub(super) fn applied(&self, node: NodeId) -> Vec<RequestId> {
        applied_requests(&self.replicas[&node].state_machine.snapshot())
    }

    /// The command's timestamp at `node`, once committed there.
    pub(super) fn ts(&self, node: NodeId, dot: Dot) -> Option<u64> {
        self.replicas[&node].instances.get(&dot).filter(|i| i.phase.committed()).map(|i| i.ts)
    }

    /// How often `node` dropped an input for `reason`.
    pub(super) fn drops(&self, node: NodeId, reason: &str) -> u64 {
        self.replicas[&node].stats.dropped.get(reason).copied().unwrap_or(0)
    }

    /// How often `node` counted `event`.
    pub(super) fn events(&self, node: NodeId, event: &str) -> u64 {
        self.replicas[&node].stats.events.get(event).copied().unwrap_or(0)
    }

    /// Whether operation `op` completed at its client.
    pub(super) fn completed(&self, op: u64) -> bool {
        self.completions.iter().any(|(done, _)| *done == op)
    }
}

pub(super) fn dot(client: NodeId, number: u64) -> Dot {
    Dot { request: RequestId { client: ClientId::from(client), number }, attempt: 0 }
}

#[test]
fn single_command_fast_path_t7() {
    // Goal: T7 — one command, no contention: fast path; MPropose to ⌊r/2⌋ + f − 1 others, MPayload
    // to the rest; every replica executes; the client gets its reply; one timestamp.
    for (r, f) in [(3, 1), (5, 1), (5, 2)] {
        let mut net = Net::new(1, r, f, 1, Flaw::None);
        let client = net.client();
        net.submit(client, Command::set("a", "1"));
        net.deliver_all();
        net.run_ms(3);
        let coordinator = net.replica(0);
        let proposes = net.sent.iter().filter(|(_, _, m)| matches!(m, Message::Propose { .. })).count();
        let payloads = net.sent.iter().filter(|(_, _, m)| matches!(m, Message::Payload { .. })).count();
        assert_eq!(proposes, r / 2 + f - 1, "r={r} f={f}: MPropose to the rest of the fast quorum");
        assert_eq!(payloads, r - (r / 2 + f), "r={r} f={f}: MPayload to the others");
        assert_eq!(net.replicas[&coordinator].stats.fast_path_commits, 1);
        assert_eq!(net.completions, vec![(0, CommandResult::Ok)]);
        let d = dot(client, 1);
        let stamps: BTreeSet<u64> = net.topology.shards[0].iter().map(|&n| net.ts(n, d).unwrap()).collect();
        assert_eq!(stamps.len(), 1, "one commit timestamp");
        for &node in net.topology.shards[0].iter() {
            assert_eq!(net.executed(node), 1, "r={r} f={f}: {node} executed");
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
        let mut net = Net::new(1, 5, f, 1, Flaw::None);
        let key = ordo_core::Key::from("a");
        for (rank, &clock) in clocks.iter().enumerate() {
            net.set_clock(rank, "a", clock);
        }
        let client = net.client();
        net.submit(client, Command::set("a", "1"));
        net.deliver_all();
        let a = net.replica(0);
        let stats = &net.replicas[&a].stats;
        assert_eq!(
            (stats.fast_path_commits, stats.slow_path_commits),
            (u64::from(fast), u64::from(!fast)),
            "f={f} {clocks:?}"
        );
        assert_eq!(net.ts(a, dot(client, 1)), Some(expected), "f={f} {clocks:?}");
        // T9: after the slow path everyone commits the same value and bumps past it.
        for rank in 0..5 {
            let node = net.replica(rank);
            assert_eq!(net.ts(node, dot(client, 1)), Some(expected));
            assert!(net.replicas[&node].clocks.clock(&key) >= expected);
        }
    }
}

#[test]
fn coordinator_crash_after_fast_path_recovers_t14() {
    // Goal: T14 (R-a) — r = 5, f = 1, Table 1c clocks: A decides the fast path with 11 and
    // crashes before any MCommit leaves. Recovery by the others must commit 11 everywhere and
    // the command must execute at every live replica.
    let mut net = Net::new(1, 5, 1, 1, Flaw::None);
    for (rank, clock) in [(0, 5), (1, 6), (2, 10)] {
        net.set_clock(rank, "a", clock);
    }
    let client = net.client();
    net.submit(client, Command::set("a", "1"));
    let a = net.replica(0);
    net.deliver_all_dropping(|from, _, m| from == a && matches!(m, Message::Commit { .. }));
    assert_eq!(net.ts(a, dot(client, 1)), Some(11), "A took the fast path with 11");
    net.down.insert(a);
    net.run_ms(200);
    for rank in 1..5 {
        let node = net.replica(rank);
        assert_eq!(net.ts(node, dot(client, 1)), Some(11), "recovery keeps the fast-path value");
        assert_eq!(net.executed(node), 1);
    }
    let recoveries: u64 =
        (1..5).map(|rank| net.replicas[&net.replica(rank)].stats.events.get("recovery").copied().unwrap_or(0)).sum();
    assert!(recoveries >= 1, "someone recovered");
}

#[test]
fn coordinator_crash_after_propose_unblocks_others_t23() {
    // Goal: T23 — A sends MPropose and crashes; the fast-quorum members' attached promises hold
    // back every later command on the key until recovery commits A's command; then everything
    // executes, in the same order everywhere.
    let mut net = Net::new(1, 5, 1, 2, Flaw::None);
    let clients: Vec<NodeId> = net.clients.keys().copied().collect();
    net.submit(clients[0], Command::set("a", "1"));
    let a = net.replica(0);
    // Deliver only A's proposes and payloads, then A crashes.
    net.deliver_all_dropping(|from, to, m| {
        from == a && to != a && !matches!(m, Message::Propose { .. } | Message::Payload { .. })
    });
    net.down.insert(a);
    net.queue.clear();
    net.run_ms(100);
    net.submit(clients[1], Command::set("a", "2"));
    net.run_ms(300);
    let orders: BTreeSet<Vec<u8>> = (1..5)
        .map(|rank| {
            let node = net.replica(rank);
            assert_eq!(net.executed(node), 2, "{node} executed both commands");
            net.replicas[&node].state_machine.snapshot()
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
    let mut net = Net::new(3, 3, 1, 1, Flaw::None);
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
    let client = net.client();
    net.submit(client, Command::MSet { pairs: vec![(k1.clone().into(), "x".into()), (k0.clone().into(), "y".into())] });
    net.deliver_all();
    net.run_ms(5);
    assert_eq!(net.completions, vec![(0, CommandResult::Ok)]);
    let d = dot(client, 1);
    let stamps: BTreeSet<u64> =
        net.topology.shards[..2].iter().flat_map(|s| s.iter()).map(|&node| net.ts(node, d).unwrap()).collect();
    assert_eq!(stamps.len(), 1, "one final timestamp in both shards");
    for &node in net.topology.shards[..2].iter().flat_map(|s| s.iter()) {
        assert_eq!(net.executed(node), 1);
    }
    let third: BTreeSet<NodeId> = net.topology.shards[2].iter().copied().collect();
    let about_it = net
        .sent
        .iter()
        .filter(|(from, to, m)| (third.contains(from) || third.contains(to)) && !matches!(m, Message::Promises { .. }));
    assert_eq!(about_it.count(), 0, "genuine: the third shard takes no step");
}

#[test]
fn multi_shard_with_crashed_coordinator_in_one_shard() {
    // Goal: a multi-shard command whose coordinator in one shard crashes before doing anything
    // still executes in both shards: the other shard hands the payload over (Help) and a replica
    // there recovers it.
    let mut net = Net::new(2, 3, 1, 1, Flaw::None);
    let shard_of = |k: &str| ordo_core::shard_of_key(k.as_bytes(), 2);
    let k0 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 0).unwrap();
    let k1 = (0..100).map(|i| format!("k{i}")).find(|k| shard_of(k) == 1).unwrap();
    let coordinator_1 = net.topology.shards[1][0];
    net.down.insert(coordinator_1);
    let client = net.client();
    net.submit(client, Command::MSet { pairs: vec![(k0.into(), "x".into()), (k1.into(), "y".into())] });
    net.deliver_all();
    net.run_ms(300);
    for &node in net.topology.shards[0].iter().chain(net.topology.shards[1][1..].iter()) {
        assert_eq!(net.executed(node), 1, "{node} executed");
    }
    assert_eq!(net.replicas[&net.topology.shards[0][0]].instances[&dot(client, 1)].phase, Phase::Execute);
}
