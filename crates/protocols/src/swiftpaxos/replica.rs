//! The SwiftPaxos replica: normal operation (Figure 4, L6–L39), execution in dependency-graph
//! order through the shared executor, the leader's optimistic execution, payload fetch and
//! re-proposal (§4.3). Recovery and leader nomination are in `recovery.rs`.
//!
//! Handlers whose preconditions do not hold yet keep their message in the command's
//! [`Instance`] (the leader's `FastAck` waits in `leader_ack`, votes in `votes`); every input
//! ends with [`Replica::progress`], which retries them until nothing more can happen.

use super::checker::Observation;
use super::conflicts::KeyIndex;
use super::gc::Collector;
use super::messages::{Deps, Message, Phase};
use super::quorums::Quorums;
use super::reads::Served;
use super::recovery::{Detector, Recovery};
use super::{Config, Flaw, SwiftPaxos, Timer, Variant, paths};
use crate::client_table::{ClientTable, Lookup};
use crate::executor::graph::{CommandStatus, GraphConfig, GraphExecutor};
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClockReading, Command, CommandResult, Destinations, Key, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode,
    PersistTicket, RequestId, StateMachine, Topology,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// How a replica process comes up: what its durable storage says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boot {
    /// Nothing stored: the process never ran before.
    First,
    /// The boot marker is stored: an earlier incarnation ran and crashed.
    Restarted,
}

impl Boot {
    /// What the stored records say: the boot marker is the only record a replica writes.
    pub fn from_durable(durable: &[()]) -> Boot {
        if durable.is_empty() { Boot::First } else { Boot::Restarted }
    }
}

/// Where a replica process is in its life. SwiftPaxos is crash-stop (§2): a restarted process
/// lost its votes and could vote twice differently in one ballot, so it stays out for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    Starting,
    /// The boot marker written; every send waits for it (all sends are durable sends).
    Booting(PersistTicket),
    Running,
    Retired,
}

/// `NORMAL` or `RECOVERING` (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Handling normal messages.
    Normal,
    /// Joined a new ballot, waiting for its Sync.
    Recovering,
}

/// Ballot state: `bal`, `cbal`, `status` (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ballots {
    /// The ballot the replica is in.
    pub bal: u64,
    /// The last ballot it completed recovery in.
    pub cbal: u64,
    /// Normal or recovering.
    pub status: Status,
}

/// Votes received for one command in one ballot (the bookkeeping L30 needs).
#[derive(Clone, Debug, Default)]
pub struct Votes {
    /// The ballot they belong to; a higher ballot's vote replaces them.
    pub ballot: u64,
    /// Followers' proposals, by rank, with the digest of their paths.
    pub fast: BTreeMap<usize, (BTreeSet<RequestId>, u64)>,
    /// Followers that adopted the leader's proposal.
    pub slow: BTreeSet<usize>,
}

/// The leader's `FastAck`, kept until L23's precondition holds.
#[derive(Clone, Debug)]
pub struct LeaderAck {
    /// Its ballot.
    pub ballot: u64,
    /// The leader's dependencies.
    pub deps: BTreeSet<RequestId>,
    /// The digest of the leader's paths.
    pub paths: u64,
}

/// One command at one replica: `phase[id]`, `cmd[id]`, `dep[id]`, `paths[id]` and what waits.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Its phase.
    pub phase: Phase,
    /// Its payload, once received.
    pub command: Option<Command>,
    /// Its dependencies: the proposal, then the leader's.
    pub deps: Option<BTreeSet<RequestId>>,
    /// The digest of the paths of our own proposal.
    pub paths: Option<u64>,
    /// The leader's FastAck, waiting for L23.
    pub leader_ack: Option<LeaderAck>,
    /// The digest of the leader's paths, once its FastAck was processed: a follower's FastAck
    /// counts for the fast path only with the same paths (see `try_commit`).
    pub leader_paths: Option<u64>,
    /// Votes for L30.
    pub votes: Votes,
    /// Local time it was first seen (or its ballot installed): the stuck timers count from it.
    pub seen_ns: u64,
    /// Re-proposed to the leader already.
    pub reproposed: bool,
    /// What we told the client when we serve this read (SwiftPaxos^reads).
    pub served_read: Option<Served>,
}

impl Instance {
    pub(crate) fn new(now_ns: u64) -> Self {
        Instance {
            phase: Phase::Start,
            command: None,
            deps: None,
            paths: None,
            leader_ack: None,
            leader_paths: None,
            votes: Votes::default(),
            seen_ns: now_ns,
            reproposed: false,
            served_read: None,
        }
    }
}

/// The leader's uncommitted commands in arrival order (`pending_log`, L16, L36, L74).
#[derive(Clone, Debug, Default)]
pub struct PendingLog {
    next: u64,
    by_position: BTreeMap<u64, RequestId>,
    position: BTreeMap<RequestId, u64>,
}

impl PendingLog {
    /// Appends `id` (no-op if present).
    pub fn push(&mut self, id: RequestId) {
        if self.position.contains_key(&id) {
            return;
        }
        self.by_position.insert(self.next, id);
        self.position.insert(id, self.next);
        self.next += 1;
        assert_eq!(self.by_position.len(), self.position.len(), "the two indexes agree");
    }

    /// Removes `id` if present.
    pub fn remove(&mut self, id: RequestId) {
        if let Some(at) = self.position.remove(&id) {
            self.by_position.remove(&at);
        }
        assert_eq!(self.by_position.len(), self.position.len(), "the two indexes agree");
    }

    /// Empties the log (L70).
    pub fn clear(&mut self) {
        self.by_position.clear();
        self.position.clear();
    }

    /// The ids in order.
    pub fn ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.by_position.values().copied()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.position.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }
}

/// What runs commands: the graph executor, the state machine, and the results kept for retries.
pub struct Execution {
    pub(crate) executor: GraphExecutor<RequestId>,
    pub(crate) state_machine: Box<dyn StateMachine>,
    pub(crate) clients: ClientTable,
    pub(crate) executed: u64,
    pub(crate) new_state_machine: fn() -> Box<dyn StateMachine>,
    scratch: Vec<RequestId>,
}

impl Execution {
    /// A scratch machine holding `keys` for speculative execution; a machine that cannot fork
    /// keys is copied whole (spec §5.6: never the real state).
    pub(crate) fn fork(&self, keys: &[ordo_core::Key]) -> Box<dyn StateMachine> {
        self.state_machine.fork_keys(keys).unwrap_or_else(|| {
            let mut copy = (self.new_state_machine)();
            copy.restore(&self.state_machine.snapshot()).expect("a snapshot restores");
            copy
        })
    }
}

/// A SwiftPaxos replica.
pub struct Replica {
    pub(crate) id: NodeId,
    pub(crate) rank: usize,
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: Config,
    pub(crate) variant: Variant,
    pub(crate) flaw: Flaw,
    pub(crate) peers: Destinations,
    pub(crate) quorums: Quorums,
    pub(crate) ballots: Ballots,
    pub(crate) instances: BTreeMap<RequestId, Instance>,
    /// Per key, the ids of the commands touching it (the conflict index for L11).
    pub(crate) by_key: KeyIndex,
    /// Ids holding a leader FastAck not yet processed.
    pub(crate) awaiting: BTreeSet<RequestId>,
    /// Ids in `Accept`.
    pub(crate) accepted: BTreeSet<RequestId>,
    /// Ids in `PreAccept`.
    pub(crate) preaccepted: BTreeSet<RequestId>,
    pub(crate) pending_log: PendingLog,
    pub(crate) execution: Execution,
    /// What every replica executed, and what we forgot (garbage collection).
    pub(crate) gc: Collector,
    pub(crate) detector: Detector,
    pub(crate) recovery: Recovery,
    /// CURP+ witness: commands recorded and not yet committed here (`Unsynced`, App. B L22);
    /// they commute pairwise.
    pub(crate) witness: BTreeSet<RequestId>,
    /// Propagates received while recovering, replayed after Sync.
    pub(crate) deferred: Vec<(NodeId, RequestId, Command)>,
    /// Which clients we answer on execution (the co-located ones, §3.5).
    pub(crate) serves: BTreeMap<NodeId, bool>,
    pub(crate) last_fetch_ns: u64,
    pub(crate) now_ns: u64,
    pub(crate) stats: NodeStats,
    pub(crate) life: Life,
    /// How many times `check_invariants` ran (it samples the expensive checks).
    checks: std::cell::Cell<u64>,
}

/// Most Propagates buffered while recovering.
const DEFERRED_MAX: usize = 65_536;

impl Replica {
    /// A replica process; a restarted one (`Boot::Restarted`) stays out of the protocol.
    pub(crate) fn new(context: NodeContext<SwiftPaxos>, variant: Variant, flaw: Flaw, boot: Boot) -> Self {
        let rank = context.topology.replica_rank(context.id).expect("a replica has a rank");
        let peers = context.topology.replicas().clone();
        let config = context.config.scaled(&context.topology);
        let quorums = Quorums::new(&context.topology, &config);
        let quorums = if variant.has_fast_path() { quorums } else { quorums.without_fast_path() };
        let graph = GraphConfig {
            commands_max: config.instances_max,
            lanes_max: config.clients_max,
            deps_max: config.instances_max,
        };
        Replica {
            id: context.id,
            rank,
            topology: context.topology.clone(),
            variant,
            flaw,
            peers: peers.clone(),
            ballots: Ballots { bal: 0, cbal: 0, status: Status::Normal },
            instances: BTreeMap::new(),
            by_key: KeyIndex::default(),
            awaiting: BTreeSet::new(),
            accepted: BTreeSet::new(),
            preaccepted: BTreeSet::new(),
            pending_log: PendingLog::default(),
            execution: Execution {
                executor: GraphExecutor::new(graph),
                state_machine: (context.new_state_machine)(),
                clients: ClientTable::new(config.clients_max, 1),
                executed: 0,
                new_state_machine: context.new_state_machine,
                scratch: Vec::new(),
            },
            gc: Collector::new(rank, peers.len(), config.clients_max),
            detector: Detector::new(peers.len()),
            recovery: Recovery::default(),
            witness: BTreeSet::new(),
            deferred: Vec::new(),
            serves: BTreeMap::new(),
            last_fetch_ns: 0,
            now_ns: 0,
            stats: NodeStats::default(),
            life: match boot {
                Boot::First => Life::Starting,
                Boot::Restarted => Life::Retired,
            },
            quorums,
            config,
            checks: std::cell::Cell::new(0),
        }
    }

    /// The rank of the leader of our ballot.
    pub(crate) fn leader(&self) -> usize {
        self.quorums.leader(self.ballots.bal)
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.leader() == self.rank
    }

    fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.peers.iter().position(|&peer| peer == node)
    }

    /// Whether we answer `client` on execution: we are the replica closest to it, at its site
    /// (SwiftPaxos' co-located client), or wherever it is (N²Paxos: its only answer).
    fn serves_client(&mut self, client: NodeId) -> bool {
        if let Some(&serves) = self.serves.get(&client) {
            return serves;
        }
        let anywhere = self.variant != Variant::Swift;
        let serves = client.index() < self.topology.nodes.len()
            && (anywhere || self.topology.node(client).site == self.topology.node(self.id).site)
            && self.topology.closest(client, &self.peers, 1).first() == Some(&self.id);
        self.serves.insert(client, serves);
        serves
    }

    // ---- dispatch ------------------------------------------------------------------------------

    fn handle_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<SwiftPaxos>) {
        self.now_ns = now.local_ns;
        if let Err(reason) = message.check_numbers() {
            self.stats.drop_input(reason);
            return;
        }
        let from_rank = self.rank_of(from);
        if let Some(rank) = from_rank.filter(|_| !matches!(message, Message::Retired)) {
            self.detector.heard(rank, self.now_ns);
        }
        let handled = match (message, from_rank) {
            (Message::Propagate { id, command }, _) => self.on_propagate(from, id, command, out),
            (Message::FastAck { ballot, id, deps, paths }, Some(rank)) => {
                self.on_fast_ack(rank, ballot, id, deps, paths)
            }
            (Message::SlowAck { ballot, id }, Some(rank)) => self.on_slow_ack(rank, ballot, id),
            (Message::Fetch { ids }, Some(_)) => self.on_fetch(from, ids, out),
            (Message::Payloads { commands }, Some(_)) => self.on_payloads(from, commands, out),
            (Message::Ping { executed, .. }, Some(rank)) => self.on_ping(rank, &executed),
            (Message::Retired, Some(rank)) => self.on_retired(rank),
            (Message::Recover { ballot }, Some(_)) => self.on_recover(ballot, out),
            (Message::NewLeader { ballot }, Some(rank)) => self.on_new_leader(rank, ballot, out),
            (Message::NewLeaderAck { ballot, cbal, entries, collected }, Some(rank)) => {
                self.on_new_leader_ack(rank, ballot, cbal, entries, &collected, out)
            }
            (Message::Sync { ballot, entries }, Some(rank)) => self.on_sync(rank, ballot, entries, out),
            (Message::Reply { .. } | Message::Executed { .. } | Message::RecordAck { .. }, _) => {
                Err("client message sent to a replica")
            }
            (_, None) => Err("replica message from a node that is not a replica"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
        self.progress(out);
    }

    // ---- L6–L21: Propagate ---------------------------------------------------------------------

    /// L6–L21. `from` is the client, or a follower re-proposing (§4.3).
    pub(crate) fn on_propagate(
        &mut self,
        from: NodeId,
        id: RequestId,
        command: Command,
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        let _ = from;
        if self.execution.executor.status(id) == CommandStatus::Executed {
            // A retry of a command that ran here: answer with what it returned.
            if let Lookup::Executed(result) = self.execution.clients.lookup(id, id.number) {
                out.send_durable(id.client.node(), Message::Executed { id, result: result.clone() });
            }
            return Err("propagate of an executed command");
        }
        if self.ballots.status != Status::Normal {
            if self.deferred.len() >= DEFERRED_MAX {
                return Err("propagate while recovering, buffer full");
            }
            self.deferred.push((from, id, command));
            return Ok(());
        }
        let now_ns = self.now_ns;
        if self.instances.get(&id).is_some_and(|instance| instance.phase != Phase::Start) {
            return Err("propagate of a command received already (L7)");
        }
        if !self.instances.contains_key(&id) && self.instances.len() >= self.config.instances_max {
            return Err("instances full");
        }
        // L8–L9, and L11 (every replica keeps the index; only fast-quorum members propose).
        let deps = self.by_key.record(id, &command);
        let instance = self.instances.entry(id).or_insert_with(|| Instance::new(now_ns));
        instance.phase = Phase::PreAccept;
        instance.command = Some(command.clone());
        self.preaccepted.insert(id);
        let bal = self.ballots.bal;
        if !self.quorums.is_fast_member(self.rank, bal) {
            if self.flaw == Flaw::OwnOrder {
                // The canary remembers its own arrival order, to vote for it later.
                instance.deps = Some(deps);
            }
            if self.variant == Variant::Curp {
                self.record(id, &command, out);
            }
            return Ok(());
        }
        // L12–L14, paths evaluated after the dependencies are set (spec §13.3).
        let digest = self.paths_digest(id, &deps);
        let instance = self.instances.get_mut(&id).expect("inserted above");
        instance.deps = Some(deps.clone());
        instance.paths = Some(digest);
        let wire: Deps = deps.iter().copied().collect();
        let fast_ack = Message::FastAck { ballot: bal, id, deps: wire.clone(), paths: digest };
        let client = id.client.node();
        let reader = self.reads_reader(client, &command, bal);
        if self.is_leader() {
            self.lead(id, &command, deps, digest, reader, out);
        } else {
            // L21; the reader of a read sends the client its result with its proposal.
            out.multicast_durable(&self.peers, fast_ack.clone());
            let answer = if reader == Some(self.rank) { self.serve_read(id, &command, &deps, digest) } else { None };
            out.send_durable(client, answer.unwrap_or(fast_ack));
        }
        Ok(())
    }

    /// L15–L19 at the leader: optimistic execution, Reply, then our proposal to everyone; our
    /// own FastAck is handled here (L22) as the multicast skips us. N²Paxos' leader sends only
    /// the proposal (its 2A): its clients wait for an execution. A read that another replica
    /// serves (`reader`) gets our FastAck instead (`reads.rs`).
    fn lead(
        &mut self,
        id: RequestId,
        command: &Command,
        deps: BTreeSet<RequestId>,
        digest: u64,
        reader: Option<usize>,
        out: &mut Outbox<SwiftPaxos>,
    ) {
        let (bal, client) = (self.ballots.bal, id.client.node());
        let wire: Deps = deps.iter().copied().collect();
        let fast_ack = Message::FastAck { ballot: bal, id, deps: wire.clone(), paths: digest };
        if reader.is_some_and(|reader| reader != self.rank) {
            out.send_durable(client, fast_ack.clone());
        } else if self.replies(&deps) {
            self.pending_log.push(id);
            let result = self.optimistic_result(id, command);
            let reply = Message::Reply { ballot: bal, id, deps: wire.clone(), paths: digest, result };
            out.send_durable(client, reply);
        }
        out.multicast_durable(&self.peers, fast_ack);
        out.observe(Observation::LeaderDeps { ballot: bal, id, deps: wire });
        let instance = self.instances.get_mut(&id).expect("proposed just now");
        instance.leader_ack = Some(LeaderAck { ballot: bal, deps, paths: digest });
        self.awaiting.insert(id);
    }

    /// The digest of `id`'s trimmed dependency paths (L12–L14) given its dependencies `deps`.
    fn paths_digest(&self, id: RequestId, deps: &BTreeSet<RequestId>) -> u64 {
        paths::digest(id, deps, |other| match self.instances.get(&other) {
            Some(instance) => (instance.phase, instance.deps.as_ref()),
            // Forgotten here: it ran everywhere, so it ends a path like any committed command.
            None if self.execution.executor.status(other) == CommandStatus::Executed => (Phase::Commit, None),
            None => (Phase::Start, None),
        })
    }

    /// Whether the leader sends its optimistic result: always in SwiftPaxos; in CURP+ only when
    /// every dependency is committed (App. B L14; a commit waits for its dependencies' commits,
    /// so then every earlier conflicting command is committed); never in N²Paxos.
    fn replies(&self, deps: &BTreeSet<RequestId>) -> bool {
        match self.variant {
            Variant::Swift => true,
            Variant::N2Paxos => false,
            Variant::Curp => {
                self.flaw == Flaw::BlindWitness
                    || deps.iter().all(|dep| {
                        self.instances.get(dep).is_some_and(|i| i.phase == Phase::Commit)
                            || self.execution.executor.status(*dep) == CommandStatus::Executed
                    })
            }
        }
    }

    /// CURP+ witness (App. B L18–L23): record `id` unless a conflicting command is unsynced,
    /// and tell the client.
    fn record(&mut self, id: RequestId, command: &Command, out: &mut Outbox<SwiftPaxos>) {
        let conflicts = self.witness.iter().any(|other| {
            self.instances.get(other).and_then(|i| i.command.as_ref()).is_some_and(|c| !c.commutes_with(command))
        });
        if conflicts && self.flaw != Flaw::BlindWitness {
            return;
        }
        self.witness.insert(id);
        out.send_durable(id.client.node(), Message::RecordAck { ballot: self.ballots.bal, id });
    }

    /// `opt_exec(pending_log, state)` (L17): `command`'s result after every pending command that
    /// shares a key with it, in pending order, on a fork of the keys involved, and, closing
    /// over keys, after every pending command sharing a key with those: a watched transaction
    /// or an MSETNX writes one key or not depending on another, so a pending command on a key
    /// `command` does not touch can still change what an earlier pending one wrote to a key it
    /// does (seed 2 of the transactions campaign). Commands on keys outside the closure cannot
    /// change the result.
    fn optimistic_result(&mut self, id: RequestId, command: &Command) -> CommandResult {
        let pending: Vec<(RequestId, &Command)> = self
            .pending_log
            .ids()
            .filter(|&other| other != id)
            .filter(|&other| {
                // The CURP+ canary answers from the executed state alone.
                self.flaw != Flaw::BlindWitness && self.execution.executor.status(other) != CommandStatus::Executed
            })
            .filter_map(|other| Some((other, self.instances.get(&other)?.command.as_ref()?)))
            .collect();
        let mut keys: BTreeSet<Key> = command.keys().into_iter().collect();
        let mut before = vec![false; pending.len()];
        let mut grown = true;
        while grown {
            grown = false;
            for (index, (_, other)) in pending.iter().enumerate() {
                let mut shares = false;
                other.for_each_key(|key| shares |= keys.contains(key));
                if shares && !before[index] {
                    before[index] = true;
                    keys.extend(other.keys());
                    grown = true;
                }
            }
        }
        let keys: Vec<Key> = keys.into_iter().collect();
        let before: Vec<(RequestId, Command)> = pending
            .iter()
            .zip(&before)
            .filter(|(_, take)| **take)
            .map(|((other, c), _)| (*other, (*c).clone()))
            .collect();
        let mut fork = self.execution.fork(&keys);
        for (other, pending) in before {
            fork.apply(other, &pending);
        }
        fork.apply(id, command)
    }

    // ---- L22–L32: acks ---------------------------------------------------------------------------

    fn instance_for_ack(&mut self, id: RequestId) -> Result<&mut Instance, &'static str> {
        let now_ns = self.now_ns;
        if !self.instances.contains_key(&id) {
            if self.execution.executor.status(id) == CommandStatus::Executed {
                return Err("ack for an executed command");
            }
            if self.instances.len() >= self.config.instances_max {
                return Err("instances full");
            }
        }
        Ok(self.instances.entry(id).or_insert_with(|| Instance::new(now_ns)))
    }

    fn on_fast_ack(
        &mut self,
        rank: usize,
        ballot: u64,
        id: RequestId,
        deps: Deps,
        paths: u64,
    ) -> Result<(), &'static str> {
        if ballot < self.ballots.bal {
            return Err("fast ack of an older ballot");
        }
        if !self.quorums.is_fast_member(rank, ballot) {
            return Err("fast ack from outside the fast quorum");
        }
        let leader = self.quorums.leader(ballot);
        let deps: BTreeSet<RequestId> = deps.into_iter().collect();
        let instance = self.instance_for_ack(id)?;
        if rank == leader {
            // L22: kept until its precondition holds.
            if instance.leader_ack.as_ref().is_some_and(|ack| ack.ballot >= ballot) {
                return Err("leader fast ack received already");
            }
            instance.leader_ack = Some(LeaderAck { ballot, deps, paths });
            self.awaiting.insert(id);
            return Ok(());
        }
        record_vote(&mut instance.votes, ballot)?;
        instance.votes.fast.insert(rank, (deps, paths));
        Ok(())
    }

    fn on_slow_ack(&mut self, rank: usize, ballot: u64, id: RequestId) -> Result<(), &'static str> {
        if ballot < self.ballots.bal {
            return Err("slow ack of an older ballot");
        }
        if rank == self.quorums.leader(ballot) {
            return Err("slow ack from the leader");
        }
        let instance = self.instance_for_ack(id)?;
        record_vote(&mut instance.votes, ballot)?;
        instance.votes.slow.insert(rank);
        Ok(())
    }

    /// Retries every waiting handler until none can run, then executes what it can.
    pub(crate) fn progress(&mut self, out: &mut Outbox<SwiftPaxos>) {
        if self.life == Life::Retired || self.ballots.status != Status::Normal {
            return;
        }
        loop {
            let mut changed = false;
            let awaiting: Vec<RequestId> = self.awaiting.iter().copied().collect();
            for id in awaiting {
                changed |= self.try_accept(id, out);
            }
            let accepted: Vec<RequestId> = self.accepted.iter().copied().collect();
            for id in accepted {
                changed |= self.try_commit(id, out);
            }
            if !changed {
                break;
            }
        }
        self.execute(out);
    }

    /// L22–L29 once L23 holds: adopt the leader's dependencies, vote again.
    fn try_accept(&mut self, id: RequestId, out: &mut Outbox<SwiftPaxos>) -> bool {
        let bal = self.ballots.bal;
        let instance = &self.instances[&id];
        let Some(ack) = &instance.leader_ack else {
            self.awaiting.remove(&id);
            return false;
        };
        if ack.ballot < bal || matches!(instance.phase, Phase::Accept | Phase::Commit) {
            self.instances.get_mut(&id).expect("present").leader_ack = None;
            self.awaiting.remove(&id);
            return false;
        }
        if ack.ballot > bal || instance.phase != Phase::PreAccept {
            return false;
        }
        let ready = ack.deps.iter().all(|dep| {
            self.instances.get(dep).is_some_and(|i| matches!(i.phase, Phase::Accept | Phase::Commit))
                || self.execution.executor.status(*dep) == CommandStatus::Executed
        });
        if !ready {
            return false;
        }
        let is_leader = self.is_leader();
        let fast_member = self.quorums.is_fast_member(self.rank, bal);
        let instance = self.instances.get_mut(&id).expect("present");
        let ack = instance.leader_ack.take().expect("checked above");
        instance.leader_paths = Some(ack.paths);
        self.awaiting.remove(&id);
        instance.phase = Phase::Accept;
        self.preaccepted.remove(&id);
        self.accepted.insert(id);
        if is_leader {
            assert_eq!(instance.deps.as_ref(), Some(&ack.deps), "the leader's own FastAck carries its proposal");
            return true;
        }
        let disagreed = instance.deps.as_ref() != Some(&ack.deps);
        let mut dropped = Vec::new();
        if disagreed && fast_member {
            self.stats.count("double_vote");
            let proposal = instance.deps.iter().flatten();
            dropped.extend(proposal.filter(|dep| !ack.deps.contains(dep)).copied());
        }
        // L25–L27. Every follower sends SlowAck (spec §13.1). The canaries keep their own vote
        // while claiming the leader's.
        let keeps_own = (self.flaw == Flaw::SingleVote && fast_member) || self.flaw == Flaw::OwnOrder;
        if !(keeps_own && instance.deps.is_some()) {
            instance.deps = Some(ack.deps);
        }
        self.reinstate(&dropped);
        let slow_ack = Message::SlowAck { ballot: bal, id };
        out.multicast_durable(&self.peers, slow_ack.clone());
        // N²Paxos' and CURP+'s clients count no votes: the 2B goes to the replicas only.
        if self.variant.has_fast_path() {
            out.send_durable(id.client.node(), slow_ack);
        }
        true
    }

    /// L30–L32: commit once a fast or slow quorum voted for the leader's dependencies and they
    /// are all committed.
    fn try_commit(&mut self, id: RequestId, out: &mut Outbox<SwiftPaxos>) -> bool {
        let bal = self.ballots.bal;
        let instance = &self.instances[&id];
        if instance.phase != Phase::Accept {
            self.accepted.remove(&id);
            return false;
        }
        let deps = instance.deps.as_ref().expect("an accepted command has dependencies");
        let deps_committed = deps.iter().all(|dep| {
            self.instances.get(dep).is_some_and(|i| i.phase == Phase::Commit)
                || self.execution.executor.status(*dep) == CommandStatus::Executed
        });
        if !deps_committed {
            return false;
        }
        let leader = self.leader();
        let votes = &instance.votes;
        let current = votes.ballot == bal;
        let mine = self.rank != leader;
        let slow_voted = |rank: usize| (mine && rank == self.rank) || (current && votes.slow.contains(&rank));
        // A FastAck counts only with the leader's dependencies *and paths*: proposals are
        // transitively reduced (`conflicts.rs`), so equal direct dependencies may stand for
        // different orders below them (scenario 6's mismatch, here at the replicas).
        let leader_paths = instance.leader_paths;
        let fast_voted = |rank: usize| {
            (mine && rank == self.rank)
                || (current
                    && votes
                        .fast
                        .get(&rank)
                        .is_some_and(|(proposal, paths)| proposal == deps && Some(*paths) == leader_paths))
        };
        let fast = self.quorums.fast_quorum_met(bal, fast_voted);
        let slow_count = (0..self.quorums.n).filter(|&rank| rank != leader && slow_voted(rank)).count();
        let either = self.quorums.fast_quorum_met(bal, |rank| fast_voted(rank) || slow_voted(rank));
        if !(fast || either || self.quorums.slow_quorum_met(slow_count)) {
            return false;
        }
        let wire: Deps = deps.iter().copied().collect();
        let instance = self.instances.get_mut(&id).expect("present");
        instance.phase = Phase::Commit;
        self.accepted.remove(&id);
        // App. B L31: a committed command is synced.
        self.witness.remove(&id);
        if fast {
            self.stats.fast_path_commits += 1;
        } else {
            self.stats.slow_path_commits += 1;
            self.stats.count("slow_path");
        }
        out.observe(Observation::Committed { id, deps: wire.clone() });
        self.commit_to_executor(id, &wire);
        true
    }

    pub(crate) fn commit_to_executor(&mut self, id: RequestId, deps: &[RequestId]) {
        match self.execution.executor.commit(id, 0, deps) {
            Ok(()) => {}
            Err(crate::executor::graph::GraphError::Executed | crate::executor::graph::GraphError::Committed) => {}
            Err(error) => panic!("the executor refused a commit: {error:?}"),
        }
    }

    /// L33–L36: run what the executor releases.
    fn execute(&mut self, out: &mut Outbox<SwiftPaxos>) {
        let mut ready = std::mem::take(&mut self.execution.scratch);
        ready.clear();
        self.execution.executor.execute_ready(&mut ready);
        let mut collectable = Vec::new();
        for &id in &ready {
            let command = self.instances[&id].command.clone().expect("a committed command has a payload");
            let result = self.execution.state_machine.apply(id, &command);
            self.execution.executed += 1;
            self.stats.executed += 1;
            if self.execution.clients.lookup(id, id.number) == Lookup::New {
                self.execution.clients.record(id, id.number, result.clone(), self.execution.executed);
            }
            out.observe(Observation::Executed { id, digest: execution_digest(true, Some(&result)) });
            self.pending_log.remove(id);
            let client = id.client.node();
            let unanswered_read = self.read_unanswered(id);
            if unanswered_read {
                self.stats.count("read_answered_on_execution");
            }
            if self.serves_client(client) || unanswered_read {
                out.send_durable(client, Message::Executed { id, result });
            }
            if self.config.gc {
                collectable.extend(self.gc.executed(id));
            }
        }
        self.execution.scratch = ready;
        for (client, through) in collectable {
            self.forget(client, through);
        }
    }

    // ---- payloads (§4.3) -----------------------------------------------------------------------

    fn on_fetch(
        &mut self,
        from: NodeId,
        ids: Vec<RequestId>,
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        if ids.len() > 4096 {
            return Err("fetch of too many ids");
        }
        let commands: Vec<(RequestId, Command)> = ids
            .iter()
            .filter_map(|id| self.instances.get(id).and_then(|i| i.command.clone()).map(|c| (*id, c)))
            .collect();
        if commands.is_empty() {
            return Err("fetch of unknown payloads");
        }
        out.send_durable(from, Message::Payloads { commands });
        Ok(())
    }

    /// Fetched payloads go through L6, as if the client had sent them (spec §5.1).
    fn on_payloads(
        &mut self,
        from: NodeId,
        commands: Vec<(RequestId, Command)>,
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        for (id, command) in commands {
            if self.instances.get(&id).is_none_or(|i| i.phase == Phase::Start) {
                self.stats.count("payload_fetched");
                let _ = self.on_propagate(from, id, command, out);
            }
        }
        Ok(())
    }

    /// Ids the leader mentioned (a waiting FastAck, or in its dependencies) whose payload we lack.
    fn missing_payloads(&self) -> Vec<RequestId> {
        let mut missing = BTreeSet::new();
        for id in &self.awaiting {
            let instance = &self.instances[id];
            if instance.phase == Phase::Start {
                missing.insert(*id);
            }
            if let Some(ack) = &instance.leader_ack {
                for dep in &ack.deps {
                    let known = self.instances.get(dep).is_some_and(|i| i.phase != Phase::Start)
                        || self.execution.executor.status(*dep) == CommandStatus::Executed;
                    if !known {
                        missing.insert(*dep);
                    }
                }
            }
            if missing.len() >= 1024 {
                break;
            }
        }
        missing.into_iter().collect()
    }

    // ---- timers --------------------------------------------------------------------------------

    fn handle_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<SwiftPaxos>) {
        self.now_ns = now.local_ns;
        if timer != Timer::Tick {
            return;
        }
        out.set_timer(Timer::Tick, self.config.tick_ns);
        let executed = if self.config.gc { self.gc.report() } else { Vec::new() };
        out.multicast_durable(&self.peers, Message::Ping { ballot: self.ballots.bal, executed });
        if self.ballots.status == Status::Normal && !self.is_leader() {
            self.fetch_and_repropose(out);
        }
        self.nominate(out);
        self.progress(out);
    }

    fn fetch_and_repropose(&mut self, out: &mut Outbox<SwiftPaxos>) {
        let leader = self.peers[self.leader()];
        if self.now_ns.saturating_sub(self.last_fetch_ns) >= self.config.fetch_timeout_ns {
            let missing = self.missing_payloads();
            if !missing.is_empty() {
                self.last_fetch_ns = self.now_ns;
                self.stats.count("fetch");
                out.send_durable(leader, Message::Fetch { ids: missing });
            }
        }
        let now_ns = self.now_ns;
        let timeout = self.config.repropose_timeout_ns;
        for &id in &self.preaccepted {
            let instance = self.instances.get_mut(&id).expect("pre-accepted ids are known");
            if !instance.reproposed && now_ns.saturating_sub(instance.seen_ns) >= timeout {
                instance.reproposed = true;
                self.stats.count("repropose");
                let command = instance.command.clone().expect("a pre-accepted command has a payload");
                out.send_durable(leader, Message::Propagate { id, command });
            }
        }
    }

    /// Whether some command waits longer than the stuck time-out for a commit.
    pub(crate) fn stuck(&self) -> bool {
        let limit = self.config.stuck_timeout_ns;
        let waited = |id: &RequestId| self.now_ns.saturating_sub(self.instances[id].seen_ns) >= limit;
        self.preaccepted.iter().any(waited) || self.accepted.iter().any(waited) || self.awaiting.iter().any(waited)
    }

    /// Our proposal put `dropped` below a command whose dependencies the leader set without them:
    /// that command no longer stands for them in our conflict index, so later proposals must
    /// name them directly (`KeyIndex::reinstate`).
    fn reinstate(&mut self, dropped: &[RequestId]) {
        for id in dropped {
            let command = self.instances.get(id).and_then(|i| i.command.as_ref());
            if let Some(command) = command {
                self.by_key.reinstate(*id, command);
                self.stats.count("dependency_reinstated");
            }
        }
    }

    /// Rebuilds the conflict index from the commands in `order` (dependencies first), so that
    /// new proposals follow everything the new ballot kept.
    pub(crate) fn rebuild_index(&mut self, order: &[RequestId]) {
        self.by_key.clear();
        for id in order {
            if let Some(command) = &self.instances[id].command {
                self.by_key.record(*id, command);
            }
        }
    }
}

impl Replica {
    /// CURP+: a witness holds commands it knows, pairwise commuting (App. B L21), unless it
    /// is the canary's.
    fn check_witness(&self) {
        if self.flaw == Flaw::BlindWitness {
            return;
        }
        let commands: Vec<&Command> = self
            .witness
            .iter()
            .map(|id| self.instances[id].command.as_ref().expect("a recorded command has a payload"))
            .collect();
        for (i, a) in commands.iter().enumerate() {
            for b in &commands[i + 1..] {
                assert!(a.commutes_with(b), "a witness holds two conflicting commands");
            }
        }
    }
}

/// A vote of `ballot` joins the votes if they are of that ballot, replaces them if older.
fn record_vote(votes: &mut Votes, ballot: u64) -> Result<(), &'static str> {
    if ballot < votes.ballot {
        return Err("vote of an older ballot");
    }
    if ballot > votes.ballot {
        *votes = Votes { ballot, ..Votes::default() };
    }
    Ok(())
}

impl Node<SwiftPaxos> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<SwiftPaxos>) {
        self.now_ns = now.local_ns;
        if self.life == Life::Retired {
            self.stats.count("retired");
            return;
        }
        assert_eq!(self.life, Life::Starting, "a replica starts once");
        let marker = out.persist((), PersistMode::Append);
        self.life = Life::Booting(marker);
        self.detector.start(now.local_ns);
        out.set_timer(Timer::Tick, self.config.tick_ns);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<SwiftPaxos>) {
        match self.life {
            Life::Running | Life::Booting(_) => self.handle_message(now, from, message, out),
            Life::Retired => {
                // Peers wait for every replica before collecting garbage: tell them not to.
                if matches!(message, Message::Ping { .. }) && self.rank_of(from).is_some() {
                    out.send_durable(from, Message::Retired);
                }
                self.stats.drop_input("restarted replica stays down (crash-stop)")
            }
            Life::Starting => panic!("an input before on_start"),
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<SwiftPaxos>) {
        match self.life {
            Life::Running | Life::Booting(_) => self.handle_timer(now, timer, out),
            Life::Retired => self.stats.drop_input("restarted replica stays down (crash-stop)"),
            Life::Starting => panic!("a timer before on_start"),
        }
    }

    fn on_durable(&mut self, _now: ClockReading, through: PersistTicket, _out: &mut Outbox<SwiftPaxos>) {
        if let Life::Booting(marker) = self.life {
            assert!(through >= marker, "the marker is this incarnation's only write");
            self.life = Life::Running;
        }
    }

    fn check_invariants(&self) {
        if self.life == Life::Retired {
            assert!(self.instances.is_empty(), "a retired replica knows no command");
            assert_eq!(self.stats.executed, 0, "a retired replica executes nothing");
            return;
        }
        // The executor's own check walks every executed id: run it at every 1024th check only,
        // so that checking stays linear in the run, not quadratic.
        let checks = self.checks.get();
        self.checks.set(checks + 1);
        if checks.is_multiple_of(1024) {
            self.execution.executor.check_invariants();
            self.check_collection();
        }
        assert!(self.ballots.cbal <= self.ballots.bal, "cbal ≤ bal");
        assert!(self.instances.len() <= self.config.instances_max, "instances bounded");
        for id in &self.accepted {
            let instance = &self.instances[id];
            assert_eq!(instance.phase, Phase::Accept, "the accepted set holds accepted commands");
            // Inv 13 / Inv 5: an accepted command's dependencies are accepted or committed.
            for dep in instance.deps.as_ref().expect("accepted with dependencies") {
                let known = self.instances.get(dep).is_some_and(|i| matches!(i.phase, Phase::Accept | Phase::Commit))
                    || self.execution.executor.status(*dep) == CommandStatus::Executed;
                assert!(known, "Inv 13: {dep:?}, a dependency of accepted {id:?}, is neither accepted nor committed");
            }
        }
        for id in &self.awaiting {
            assert!(self.instances[id].leader_ack.is_some(), "awaiting ids hold a leader FastAck");
        }
        self.check_witness();
        if !self.is_leader() && self.ballots.status == Status::Normal {
            assert!(self.pending_log.is_empty(), "only the leader keeps a pending log");
        }
    }

    fn is_recovering(&self) -> bool {
        self.life == Life::Retired
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        (self.life != Life::Retired).then_some(self.execution.state_machine.as_ref())
    }

    fn status(&self) -> String {
        if self.life == Life::Retired {
            return format!("rank={} retired (restarted after a crash)", self.rank);
        }
        let count = |phase: Phase| self.instances.values().filter(|i| i.phase == phase).count();
        format!(
            "rank={} bal={} cbal={} {} leader={} cmds={} preaccept={} accept={} commit={} exec={}",
            self.rank,
            self.ballots.bal,
            self.ballots.cbal,
            if self.ballots.status == Status::Normal { "normal" } else { "recovering" },
            self.leader(),
            self.instances.len(),
            count(Phase::PreAccept),
            count(Phase::Accept),
            count(Phase::Commit),
            self.execution.executed,
        )
    }
}
