//! The Tempo replica: state, dispatch, and the commit protocol (Algorithm 1): submit, propose,
//! payload, the fast-path rule, the slow path, commit, the promise log (Algorithm 2's
//! `MPromises`, made reliable) and execution. Recovery (Algorithm 4) is in `recovery.rs`, the
//! multi-shard parts (Algorithm 3) in `shards.rs`, ordering in `executor.rs`.

use super::executor::{ClientTable, Dedup, Executor};
use super::gc::{Forgotten, Gc};
use super::messages::{Dot, Message, Payload, PromiseRange};
use super::promises::{KeyClocks, PromiseTable};
use super::{Config, FastQuorumChoice, Flaw, Tempo, Timer};
use ordo_core::{
    ClockReading, Command, Destinations, Key, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode, PersistTicket,
    StateMachine, Topology,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Where a command is at this replica (the paper's `phase[id]`, Figure 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Nothing known but perhaps another shard's timestamp.
    Start,
    /// Payload kept, no proposal (not in the fast quorum).
    Payload,
    /// Proposal computed in the `MPropose` handler.
    Propose,
    /// Proposal computed in the `MRec` handler.
    RecoverR,
    /// Joined a recovery after proposing in `MPropose`.
    RecoverP,
    /// Final timestamp known; waiting to be stable.
    Commit,
    /// Executed.
    Execute,
}

impl Phase {
    /// The paper's `pending`: payload known, not committed.
    pub fn pending(self) -> bool {
        matches!(self, Phase::Payload | Phase::Propose | Phase::RecoverR | Phase::RecoverP)
    }

    /// Committed or executed.
    pub fn committed(self) -> bool {
        self >= Phase::Commit
    }
}

/// One command at this replica.
#[derive(Debug)]
pub struct Instance {
    /// The payload, once known.
    pub payload: Option<Arc<Payload>>,
    /// The command's keys (from the payload).
    pub keys: Vec<Key>,
    /// The phase.
    pub phase: Phase,
    /// This process's proposal (0 before one is made).
    pub proposal: u64,
    /// The value accepted at `abal` (consensus).
    pub accepted: u64,
    /// The highest ballot joined (`bal[id]`).
    pub bal: u64,
    /// The ballot of the last accepted consensus proposal (`abal[id]`).
    pub abal: u64,
    /// The final timestamp, once committed.
    pub ts: u64,
    /// Committed timestamp per accessed shard, as learned.
    pub shard_ts: BTreeMap<u32, u64>,
    /// Coordinator: `MProposeAck`s received, with the promises they carried.
    pub acks: BTreeMap<NodeId, (u64, Vec<PromiseRange>)>,
    /// Coordinator or recoverer: the ballot of our own consensus proposal, and its acks.
    pub consensus_ballot: u64,
    /// Acceptors that acknowledged `consensus_ballot`.
    pub consensus_acks: BTreeSet<NodeId>,
    /// Recoverer: the ballot of our recovery, and the `MRecAck`s.
    pub rec_ballot: u64,
    /// `MRecAck`s at `rec_ballot`: (proposal or accepted value, phase, abal).
    pub rec_acks: BTreeMap<NodeId, (u64, super::messages::RecPhase, u64)>,
    /// Shards that told us the command is stable there.
    pub stable_from: BTreeSet<u32>,
    /// We told the other shards the command is stable here.
    pub stable_sent: bool,
    /// Ranks of our shard known to have executed the command (garbage collection, `gc.rs`).
    pub executed_by: u64,
}

impl Instance {
    fn new() -> Self {
        Instance {
            payload: None,
            keys: Vec::new(),
            phase: Phase::Start,
            proposal: 0,
            accepted: 0,
            bal: 0,
            abal: 0,
            ts: 0,
            shard_ts: BTreeMap::new(),
            acks: BTreeMap::new(),
            consensus_ballot: 0,
            consensus_acks: BTreeSet::new(),
            rec_ballot: 0,
            rec_acks: BTreeMap::new(),
            stable_from: BTreeSet::new(),
            stable_sent: false,
            executed_by: 0,
        }
    }
}

/// The reliable promise stream to the peers: our ranges in generation order, numbered from
/// `base`, and what each peer acknowledged; plus what we applied of each peer's stream.
#[derive(Debug)]
pub struct PromiseLog {
    /// Sequence number of `ranges[0]`.
    pub base: u64,
    /// Our ranges not yet acknowledged by every peer.
    pub ranges: VecDeque<PromiseRange>,
    /// Per peer rank: the next sequence number it expects from us.
    pub acked: Vec<u64>,
    /// Per peer rank: the next sequence number we expect from it.
    pub expected: Vec<u64>,
}

/// How a replica process comes up: what its durable storage says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boot {
    /// Nothing stored: the process never ran before.
    First,
    /// The boot marker is stored: an earlier incarnation ran and crashed, and everything it
    /// promised, proposed and accepted is lost.
    Restarted,
}

impl Boot {
    /// What the stored records say: the boot marker is the only record a replica writes.
    pub fn from_durable(durable: &[()]) -> Boot {
        if durable.is_empty() { Boot::First } else { Boot::Restarted }
    }
}

/// Where a replica process is in its life. Tempo is crash-stop (paper §2): a process that
/// crashed lost its clocks, promises and ballots, and if it took part again it could propose a
/// timestamp it promised never to propose, or accept a ballot below one it joined. So a
/// restarted process stays out for good, as if still crashed; it knows it restarted from the
/// marker it writes when it first boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    /// First boot, before `on_start`.
    Starting,
    /// First boot, the marker written but perhaps not durable: every send waits for it (all of
    /// a replica's sends are durable sends), so that a crash before it is durable leaves no trace
    /// of this incarnation. Ends when the driver says the marker is durable (`on_durable`).
    Booting(PersistTicket),
    /// Taking part in the protocol.
    Running,
    /// A restarted incarnation: it drops every input and sends nothing.
    Retired,
}

/// A Tempo replica: coordinator, fast-quorum member, acceptor and executor.
pub struct Replica {
    pub(crate) id: NodeId,
    pub(crate) rank: usize,
    pub(crate) shard: u32,
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: Config,
    pub(crate) flaw: Flaw,
    /// The replicas of our shard, by rank.
    pub(crate) peers: Destinations,
    pub(crate) f: usize,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) clocks: KeyClocks,
    pub(crate) promises: PromiseTable,
    pub(crate) instances: BTreeMap<Dot, Instance>,
    /// The most instances held at once: the memory gauge of the status line (`peak=`).
    pub(crate) instances_peak: usize,
    /// Commands to look at again at a local time: recover, or ask for what is missing.
    pub(crate) watch: BTreeMap<Dot, u64>,
    pub(crate) executor: Executor,
    pub(crate) clients: ClientTable,
    pub(crate) state_machine: Box<dyn StateMachine>,
    pub(crate) log: PromiseLog,
    /// Garbage collection: our executed stream and what we forgot.
    pub(crate) gc: Gc,
    /// Per peer rank: local time we last heard from it.
    pub(crate) last_heard: Vec<u64>,
    pub(crate) now_ns: u64,
    pub(crate) stats: NodeStats,
    /// Scratch buffer for promises generated by one step.
    pub(crate) fresh: Vec<PromiseRange>,
    /// Booting, running, or retired after a restart.
    pub(crate) life: Life,
}

impl Replica {
    /// A replica process. Tempo is crash-stop: nothing is restored, and a restarted process
    /// (`Boot::Restarted`) stays out of the protocol.
    pub(crate) fn new(context: NodeContext<Tempo>, flaw: Flaw, boot: Boot) -> Self {
        let spec = context.topology.node(context.id).clone();
        let shard = spec.shard.expect("a replica belongs to a shard");
        let peers = context.topology.replicas_of(shard).clone();
        let rank = context.topology.replica_rank(context.id).expect("a replica has a rank");
        let r = peers.len();
        let config = context.config.scaled(&context.topology);
        Replica {
            id: context.id,
            rank,
            shard: u32::try_from(shard).expect("shard fits u32"),
            f: context.topology.f,
            topology: context.topology.clone(),
            config,
            flaw,
            peers,
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            clocks: KeyClocks::default(),
            promises: PromiseTable::new(r),
            instances: BTreeMap::new(),
            instances_peak: 0,
            watch: BTreeMap::new(),
            executor: Executor::default(),
            clients: ClientTable::default(),
            state_machine: (context.new_state_machine)(),
            log: PromiseLog { base: 0, ranges: VecDeque::new(), acked: vec![0; r], expected: vec![0; r] },
            gc: Gc::new(r),
            last_heard: vec![0; r],
            now_ns: 0,
            stats: NodeStats::default(),
            fresh: Vec::new(),
            life: match boot {
                Boot::First => Life::Starting,
                Boot::Restarted => Life::Retired,
            },
        }
    }

    /// Runs one input's handler as our life allows: at once when running or booting (a booting
    /// replica's sends wait for its boot marker, as every send of a replica is a durable send);
    /// not at all once retired.
    fn step(&mut self, out: &mut Outbox<Tempo>, handle: impl FnOnce(&mut Self, &mut Outbox<Tempo>)) {
        match self.life {
            Life::Running | Life::Booting(_) => handle(self, out),
            Life::Retired => self.stats.drop_input("restarted replica stays down (crash-stop)"),
            Life::Starting => panic!("an input before on_start"),
        }
    }

    /// Replicas per shard.
    pub(crate) fn r(&self) -> usize {
        self.peers.len()
    }

    /// Size of a fast quorum: `⌊r/2⌋ + f` (spec §0 erratum 1).
    pub(crate) fn fast_quorum_size(&self) -> usize {
        (self.r() / 2 + self.f).min(self.r())
    }

    /// The rank of a replica of our shard.
    pub(crate) fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.peers.iter().position(|&peer| peer == node)
    }

    pub(crate) fn suspected(&self, rank: usize) -> bool {
        rank != self.rank && self.now_ns.saturating_sub(self.last_heard[rank]) > self.config.suspect_timeout_ns
    }

    /// `fast_quorums(i, I_c)` for our shard: us, then our closest peers.
    fn choose_fast_quorum(&self) -> Vec<NodeId> {
        let size = self.fast_quorum_size();
        let ranked = self.topology.closest(self.id, &self.peers, self.r());
        assert_eq!(ranked[0], self.id, "a node is closest to itself");
        let avoid = self.config.fast_quorum == FastQuorumChoice::Closest;
        let mut quorum: Vec<NodeId> = Vec::with_capacity(size);
        quorum.push(self.id);
        for &node in &ranked[1..] {
            let rank = self.rank_of(node).expect("a peer");
            if quorum.len() < size && !(avoid && self.suspected(rank)) {
                quorum.push(node);
            }
        }
        // Not enough unsuspected peers: fill with suspected ones (recovery will finish the job).
        for &node in &ranked[1..] {
            if quorum.len() < size && !quorum.contains(&node) {
                quorum.push(node);
            }
        }
        assert_eq!(quorum.len(), size, "a fast quorum has ⌊r/2⌋ + f members");
        quorum
    }

    /// Every replica of every shard the command accesses (`I_c`).
    pub(crate) fn all_replicas(&self, payload: &Payload) -> Destinations {
        payload.shards.iter().flat_map(|&s| self.topology.replicas_of(s as usize).iter().copied()).collect()
    }

    /// Is the command committed here (line 47's `commit ∪ execute`)? A forgotten command was
    /// executed here.
    pub(crate) fn committed(instances: &BTreeMap<Dot, Instance>, forgotten: &Forgotten, dot: Dot) -> bool {
        match instances.get(&dot) {
            Some(instance) => instance.phase.committed(),
            None => forgotten.contains(dot),
        }
    }

    /// Makes room for a command we hear of; `None` when the table is full.
    pub(crate) fn instance(&mut self, dot: Dot) -> Option<&mut Instance> {
        if !self.instances.contains_key(&dot) {
            // Every input about a forgotten command is dropped before its handler runs
            // (`forgotten_guard`), so none brings it back to be proposed or run again.
            assert!(!self.gc.forgotten.contains(dot), "a forgotten command is never recreated");
            if self.instances.len() >= self.config.instances_max {
                self.stats.drop_input("instance table full");
                return None;
            }
            self.instances_peak = self.instances_peak.max(self.instances.len() + 1);
        }
        Some(self.instances.entry(dot).or_insert_with(Instance::new))
    }

    /// Records promises this process just generated: into its own table and its log.
    pub(crate) fn publish_fresh(&mut self) {
        let fresh = std::mem::take(&mut self.fresh);
        for range in &fresh {
            let (instances, forgotten) = (&self.instances, &self.gc.forgotten);
            let moved = self
                .promises
                .insert(self.rank, range, &|dot| Self::committed(instances, forgotten, dot))
                .expect("our own promises are consistent");
            if moved {
                self.executor.touch_key(&range.key);
            }
        }
        self.log.ranges.extend(fresh.iter().cloned());
        self.fresh = fresh;
        self.fresh.clear();
    }

    /// Adopts a payload for a command in `Start` (MPayload, or one carried by MRec / MCommit).
    pub(crate) fn adopt_payload(&mut self, dot: Dot, payload: &Arc<Payload>) {
        let keys = payload.command(self.shard).keys();
        let Some(instance) = self.instance(dot) else { return };
        assert_eq!(instance.phase, Phase::Start, "a payload is adopted in start");
        instance.payload = Some(payload.clone());
        instance.keys = keys;
        instance.phase = Phase::Payload;
        self.schedule_recovery(dot);
    }

    /// Checks a payload names our shard and us sensibly.
    pub(crate) fn validate_payload(&self, payload: &Payload) -> Result<(), &'static str> {
        let count = payload.shards.len();
        if payload.coordinators.len() != count || payload.parts.len() != count || payload.quorums.len() != count {
            return Err("payload without one part, coordinator and quorum per shard");
        }
        if payload.shards.windows(2).any(|w| w[0] >= w[1]) {
            return Err("payload shards not ascending");
        }
        if payload.shards.iter().any(|&s| s as usize >= self.topology.shards.len()) {
            return Err("payload names an unknown shard");
        }
        let Some(index) = payload.index(self.shard) else {
            return Err("payload for shards we do not replicate");
        };
        if self.rank_of(payload.coordinators[index]).is_none() {
            return Err("payload whose coordinator is not in our shard");
        }
        let quorum = &payload.quorums[index];
        if quorum.len() != self.fast_quorum_size()
            || quorum.first() != Some(&payload.coordinators[index])
            || quorum.iter().any(|&n| self.rank_of(n).is_none())
        {
            return Err("payload with a malformed fast quorum");
        }
        let mut keys = 0;
        let mut foreign = false;
        payload.parts[index].for_each_key(|key| {
            keys += 1;
            foreign |= self.topology.shard_of(key) != self.shard as usize;
        });
        if keys == 0 || foreign {
            return Err("payload with keys outside our shard");
        }
        // Clients refuse these (`client::KEYSPACE_REFUSED`); per-key ordering cannot run them.
        if payload.parts[index].touches_every_key() {
            return Err("payload touching every key");
        }
        Ok(())
    }

    /// The fast quorum of `coordinator` in `shard` without looking at suspicions: what every
    /// replica computes alike (used for multi-shard commands, whose payload every accessed
    /// shard must agree on).
    fn static_fast_quorum(&self, shard: u32, coordinator: NodeId) -> Vec<NodeId> {
        let replicas = self.topology.replicas_of(shard as usize);
        self.topology.closest(coordinator, replicas, self.fast_quorum_size())
    }

    // ---- Algorithm 1 -----------------------------------------------------------------------

    /// `MSubmit` (lines 5–8): become the command's coordinator in our shard.
    fn on_submit(
        &mut self,
        from: NodeId,
        dot: Dot,
        shards: Vec<u32>,
        parts: Vec<Command>,
        coordinators: Vec<NodeId>,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        // Validate the lists before indexing with them (a multi-shard submit once built fast
        // quorums for shards that do not exist).
        if parts.len() != shards.len() || shards.windows(2).any(|w| w[0] >= w[1]) {
            return Err("submit without one part per ascending shard");
        }
        if shards.iter().any(|&s| s as usize >= self.topology.shards.len()) {
            return Err("submit names an unknown shard");
        }
        let Some(index) = shards.iter().position(|&s| s == self.shard) else {
            return Err("submit for shards we do not replicate");
        };
        if coordinators.len() != shards.len() || coordinators[index] != self.id {
            return Err("submit to a replica that does not coordinate it");
        }
        if self.instances.get(&dot).is_some_and(|i| i.phase != Phase::Start) {
            return Err("submit of a command already known");
        }
        if self.clients.len() >= self.config.clients_max {
            return Err("client table full");
        }
        if self.clocks.len() >= self.config.keys_max {
            return Err("key table full");
        }
        // A single-shard command's quorum is ours to choose (we avoid suspected peers); every
        // shard of a multi-shard command must build the same payload, so theirs is static.
        let quorums: Vec<Vec<NodeId>> = if shards.len() == 1 {
            vec![self.choose_fast_quorum()]
        } else {
            shards.iter().zip(&coordinators).map(|(&s, &c)| self.static_fast_quorum(s, c)).collect()
        };
        let payload = Arc::new(Payload { shards, parts, coordinators, quorums, client: from });
        self.validate_payload(&payload)?;
        let keys = payload.command(self.shard).keys();
        let t = keys.iter().map(|key| self.clocks.clock(key)).max().unwrap_or(0) + 1;
        let fast_quorum = payload.quorum(self.shard);
        let quorum: Destinations = fast_quorum[1..].iter().copied().collect();
        let others: Destinations = self.peers.iter().copied().filter(|n| !fast_quorum.contains(n)).collect();
        out.multicast_durable(&quorum, Message::Propose { dot, payload: payload.clone(), t });
        out.multicast_durable(&others, Message::Payload { dot, payload: payload.clone() });
        self.stats.count("submit");
        // Self-addressed messages are delivered at once (paper §3.1).
        self.on_propose(self.id, dot, payload, t, out)
    }

    /// `MPropose` (lines 12–16, 67–69): compute a proposal and answer the coordinator.
    pub(crate) fn on_propose(
        &mut self,
        from: NodeId,
        dot: Dot,
        payload: Arc<Payload>,
        t: u64,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        self.validate_payload(&payload)?;
        let quorum = payload.quorum(self.shard);
        if quorum[0] != from || !quorum.contains(&self.id) {
            return Err("propose from a non-coordinator or outside the fast quorum");
        }
        let instance = self.instances.get(&dot);
        if instance.is_some_and(|i| i.phase != Phase::Start) {
            return Err("propose for a command not in start");
        }
        if instance.is_some_and(|i| i.bal > 0) {
            // We joined a ballot already (a recovery's consensus reached us first): keep the
            // payload only, so that the coordinator cannot take the fast path with us.
            self.adopt_payload(dot, &payload);
            self.try_commit(dot, out);
            return Err("propose after a ballot was joined");
        }
        let keys = payload.command(self.shard).keys();
        let mut fresh = std::mem::take(&mut self.fresh);
        let proposal = self.clocks.proposal(dot, &keys, t, &mut fresh);
        self.fresh = fresh;
        assert!(proposal >= t, "a proposal is at least the coordinator's");
        let promises = self.fresh.clone();
        self.publish_fresh();
        let Some(instance) = self.instance(dot) else { return Err("instance table full") };
        instance.payload = Some(payload.clone());
        instance.keys = keys;
        instance.phase = Phase::Propose;
        instance.proposal = proposal;
        self.schedule_recovery(dot);
        if self.config.bump && payload.shards.len() > 1 {
            self.send_bumps(dot, &payload, proposal, out);
        }
        if from == self.id {
            self.on_propose_ack(self.id, dot, proposal, promises, out)?;
        } else {
            out.send_durable(from, Message::ProposeAck { dot, t: proposal, promises });
        }
        self.try_commit(dot, out);
        Ok(())
    }

    /// `MPayload` (lines 9–11).
    fn on_payload(&mut self, dot: Dot, payload: Arc<Payload>, out: &mut Outbox<Tempo>) -> Result<(), &'static str> {
        self.validate_payload(&payload)?;
        if self.instances.get(&dot).is_some_and(|i| i.phase != Phase::Start) {
            return Err("payload for a command not in start");
        }
        self.adopt_payload(dot, &payload);
        self.try_commit(dot, out);
        Ok(())
    }

    /// `MProposeAck` from every fast-quorum member (lines 17–21): fast path or slow path.
    fn on_propose_ack(
        &mut self,
        from: NodeId,
        dot: Dot,
        t: u64,
        promises: Vec<PromiseRange>,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        let f = self.f;
        let Some(instance) = self.instances.get_mut(&dot) else { return Err("propose ack for an unknown command") };
        if instance.phase != Phase::Propose {
            return Err("propose ack while not in propose");
        }
        let payload = instance.payload.clone().expect("propose phase has the payload");
        let quorum = payload.quorum(self.shard);
        if quorum[0] != self.id || !quorum.contains(&from) {
            return Err("propose ack from outside our fast quorum");
        }
        if instance.acks.contains_key(&from) {
            return Err("duplicate propose ack");
        }
        instance.acks.insert(from, (t, promises));
        if instance.acks.len() < quorum.len() {
            return Ok(());
        }
        let highest = instance.acks.values().map(|(t, _)| *t).max().expect("acks");
        let count = instance.acks.values().filter(|(t, _)| *t == highest).count();
        assert!(highest >= instance.proposal, "the highest proposal is at least ours");
        if count >= f {
            self.stats.fast_path_commits += 1;
            self.send_commit(dot, highest, out);
        } else {
            self.stats.slow_path_commits += 1;
            let ballot = self.rank as u64 + 1;
            self.start_consensus(dot, highest, ballot, out);
        }
        Ok(())
    }

    /// Sends `MConsensus(id, t, ballot)` to the shard and accepts it ourselves.
    pub(crate) fn start_consensus(&mut self, dot: Dot, t: u64, ballot: u64, out: &mut Outbox<Tempo>) {
        let instance = self.instances.get_mut(&dot).expect("known");
        instance.consensus_ballot = ballot;
        instance.consensus_acks.clear();
        out.multicast_durable(&self.peers, Message::Consensus { dot, t, ballot });
        if let Err(reason) = self.on_consensus(self.id, dot, t, ballot, out) {
            self.stats.drop_input(reason);
        }
    }

    /// The shard's timestamp is decided: tell every replica of every accessed shard, and
    /// commit here.
    pub(crate) fn send_commit(&mut self, dot: Dot, t: u64, out: &mut Outbox<Tempo>) {
        let instance = self.instances.get(&dot).expect("known");
        let payload = instance.payload.clone().expect("a decided command has its payload");
        let to = self.all_replicas(&payload);
        let promises: Vec<(u32, PromiseRange)> = instance
            .acks
            .iter()
            .flat_map(|(node, (_, ranges))| {
                let rank = self.rank_of(*node).expect("acks come from our shard") as u32;
                ranges.iter().map(move |range| (rank, range.clone()))
            })
            .collect();
        let message = Message::Commit { dot, shard: self.shard, t, promises: promises.clone(), payload: None };
        out.multicast_durable(&to, message);
        self.on_commit(dot, self.shard, t, promises, None, out);
    }

    /// `MConsensus` (lines 26–30).
    pub(crate) fn on_consensus(
        &mut self,
        from: NodeId,
        dot: Dot,
        t: u64,
        ballot: u64,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if self.rank_of(from).is_none() || ballot == 0 {
            return Err("consensus from outside the shard");
        }
        let shard = self.shard;
        let Some(instance) = self.instance(dot) else { return Err("instance table full") };
        if let Some(&decided) = instance.shard_ts.get(&shard) {
            self.answer_with_commit(from, dot, decided, out);
            return Err("consensus for a decided command");
        }
        if instance.bal > ballot {
            return Err("consensus at a stale ballot");
        }
        instance.accepted = t;
        instance.bal = ballot;
        instance.abal = ballot;
        let keys = instance.keys.clone();
        if !keys.is_empty() {
            let mut fresh = std::mem::take(&mut self.fresh);
            self.clocks.bump(&keys, t, &mut fresh);
            self.fresh = fresh;
            self.publish_fresh();
        }
        self.postpone_recovery(dot);
        if from == self.id {
            self.on_consensus_ack(self.id, dot, ballot, out)
        } else {
            out.send_durable(from, Message::ConsensusAck { dot, ballot });
            Ok(())
        }
    }

    /// `MConsensusAck` from `f + 1` acceptors (lines 31–33).
    fn on_consensus_ack(
        &mut self,
        from: NodeId,
        dot: Dot,
        ballot: u64,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        let shard = self.shard;
        let f = self.f;
        let Some(instance) = self.instances.get_mut(&dot) else { return Err("consensus ack for an unknown command") };
        if instance.consensus_ballot != ballot || instance.bal != ballot {
            return Err("consensus ack for a ballot we left");
        }
        if instance.shard_ts.contains_key(&shard) {
            return Err("consensus ack for a decided command");
        }
        if !instance.consensus_acks.insert(from) || instance.consensus_acks.len() != f + 1 {
            return Ok(());
        }
        assert_eq!(instance.abal, ballot, "we accepted our own proposal");
        let t = instance.accepted;
        self.send_commit(dot, t, out);
        Ok(())
    }

    /// Answers a process that asks about a command we know decided in our shard.
    pub(crate) fn answer_with_commit(&mut self, to: NodeId, dot: Dot, t: u64, out: &mut Outbox<Tempo>) {
        let payload = self.instances.get(&dot).and_then(|i| i.payload.clone());
        // The payload is our shard's: only a replica of our shard may adopt it.
        let payload = payload.filter(|_| self.rank_of(to).is_some());
        out.send_durable(to, Message::Commit { dot, shard: self.shard, t, promises: Vec::new(), payload });
    }

    /// `MCommit` (lines 22–25, 56–59): learn a shard's timestamp; commit once every accessed
    /// shard's is known.
    pub(crate) fn on_commit(
        &mut self,
        dot: Dot,
        shard: u32,
        t: u64,
        promises: Vec<(u32, PromiseRange)>,
        payload: Option<Arc<Payload>>,
        out: &mut Outbox<Tempo>,
    ) {
        let own = shard == self.shard;
        if own {
            for (rank, range) in &promises {
                let (instances, forgotten) = (&self.instances, &self.gc.forgotten);
                match self.promises.insert(*rank as usize, range, &|d| Self::committed(instances, forgotten, d)) {
                    Ok(true) => self.executor.touch_key(&range.key),
                    Ok(false) => {}
                    Err(error) => self.stats.drop_input(error.reason()),
                }
            }
        }
        let Some(instance) = self.instance(dot) else { return };
        if let Some(&known) = instance.shard_ts.get(&shard) {
            // P1 (a shard commits one timestamp per command) holds among correct replicas; a
            // second `Commit` with another timestamp is forged or corrupt, never ours to apply.
            if known != t {
                self.stats.drop_input("commit with another timestamp");
                return;
            }
        }
        instance.shard_ts.insert(shard, t);
        if instance.phase == Phase::Start
            && own
            && let Some(payload) = payload
            && self.validate_payload(&payload).is_ok()
        {
            self.adopt_payload(dot, &payload);
        }
        self.try_commit(dot, out);
    }

    /// Commits once the payload and every accessed shard's timestamp are known.
    pub(crate) fn try_commit(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        let Some(instance) = self.instances.get_mut(&dot) else { return };
        if !instance.phase.pending() {
            return;
        }
        let payload = instance.payload.clone().expect("pending has a payload");
        if !payload.shards.iter().all(|s| instance.shard_ts.contains_key(s)) {
            if instance.shard_ts.contains_key(&self.shard) {
                // Decided here, waiting for the other shards: ask them later if they stay silent.
                let deadline = self.now_ns + self.config.recovery_timeout_ns;
                self.watch.insert(dot, deadline);
            }
            return;
        }
        let ts = instance.shard_ts.values().copied().max().expect("at least one shard");
        instance.ts = ts;
        instance.phase = Phase::Commit;
        let keys = instance.keys.clone();
        self.watch.remove(&dot);
        let mut fresh = std::mem::take(&mut self.fresh);
        self.clocks.bump(&keys, ts, &mut fresh);
        self.fresh = fresh;
        self.publish_fresh();
        self.executor.add(dot, ts, &keys);
        let (instances, forgotten) = (&self.instances, &self.gc.forgotten);
        for key in self.promises.on_commit(dot, &|d| Self::committed(instances, forgotten, d)) {
            self.executor.touch_key(&key);
        }
        self.stats.count("commit");
        let _ = out;
    }

    // ---- Algorithm 2: promises and execution ----------------------------------------------

    /// Sends each peer the part of our promise log it has not acknowledged.
    fn send_promises(&mut self, out: &mut Outbox<Tempo>) {
        let end = self.log.base + self.log.ranges.len() as u64;
        for rank in 0..self.r() {
            if rank == self.rank {
                continue;
            }
            let from = self.log.acked[rank];
            if from < self.log.base {
                self.stats.drop_input("peer cut off from our promise log");
                continue;
            }
            let start = (from - self.log.base) as usize;
            // A suspected peer (crashed, or cut off) gets an empty message: it keeps our
            // acknowledgements flowing without resending a batch it is unlikely to receive.
            let batch = if self.suspected(rank) { 0 } else { self.config.promise_batch_max };
            let count = ((end - from) as usize).min(batch);
            let ranges: Vec<PromiseRange> = self.log.ranges.range(start..start + count).cloned().collect();
            let message = Message::Promises { from_seq: from, ranges, ack: self.log.expected[rank] };
            out.send_durable(self.peers[rank], message);
        }
        // Forget what every peer holds; beyond the limit, forget anyway (only a crashed peer
        // lags that far).
        let everyone = (0..self.r()).filter(|&rank| rank != self.rank).map(|rank| self.log.acked[rank]).min();
        let mut drop_to = everyone.unwrap_or(end).max(self.log.base).min(end);
        let limit = self.config.promise_log_max as u64;
        if end - drop_to > limit {
            drop_to = end - limit;
        }
        while self.log.base < drop_to {
            self.log.ranges.pop_front();
            self.log.base += 1;
        }
    }

    /// `MPromises` (lines 46–48): apply the peer's ranges we have not applied yet.
    fn on_promises(
        &mut self,
        rank: usize,
        from_seq: u64,
        ranges: Vec<PromiseRange>,
        ack: u64,
    ) -> Result<(), &'static str> {
        let end = self.log.base + self.log.ranges.len() as u64;
        if ack <= end {
            self.log.acked[rank] = self.log.acked[rank].max(ack);
        }
        let expected = self.log.expected[rank];
        if from_seq > expected {
            return Err("promises after a gap");
        }
        let skip = (expected - from_seq) as usize;
        for range in ranges.iter().skip(skip) {
            let (instances, forgotten) = (&self.instances, &self.gc.forgotten);
            match self.promises.insert(rank, range, &|d| Self::committed(instances, forgotten, d)) {
                Ok(true) => self.executor.touch_key(&range.key),
                Ok(false) => {}
                Err(error) => self.stats.drop_input(error.reason()),
            }
            self.log.expected[rank] += 1;
        }
        Ok(())
    }

    /// Runs every command that is stable, in ⟨ts, dot⟩ order per key.
    pub(crate) fn execute_ready(&mut self, out: &mut Outbox<Tempo>) {
        loop {
            let promises = &self.promises;
            let minority = self.flaw == Flaw::MinorityStability;
            let stable = |key: &Key| if minority { promises.stable_minority(key) } else { promises.stable(key) };
            let instances = &mut self.instances;
            let shard = self.shard;
            let mut announce: Vec<Dot> = Vec::new();
            let mut gate = |dot: Dot| {
                let instance = instances.get_mut(&dot).expect("committed commands are known");
                let payload = instance.payload.as_ref().expect("committed has payload");
                let ready = payload.shards.iter().all(|&s| s == shard || instance.stable_from.contains(&s));
                if payload.shards.len() > 1 && !instance.stable_sent {
                    instance.stable_sent = true;
                    announce.push(dot);
                }
                ready
            };
            let next = self.executor.next(&stable, &mut gate);
            for dot in announce {
                self.send_stable(dot, out);
            }
            let Some((dot, ts)) = next else { return };
            self.execute(dot, ts, out);
        }
    }

    /// Applies one command (at most once per request) and answers the client if we coordinate.
    fn execute(&mut self, dot: Dot, ts: u64, out: &mut Outbox<Tempo>) {
        let instance = self.instances.get_mut(&dot).expect("known");
        assert_eq!(instance.phase, Phase::Commit, "only committed commands execute");
        assert_eq!(instance.ts, ts, "the executor runs the committed timestamp");
        instance.phase = Phase::Execute;
        let payload = instance.payload.clone().expect("payload");
        let result = match self.clients.check(dot.request) {
            Dedup::Execute => {
                let result = self.state_machine.apply(dot.request, payload.command(self.shard));
                self.clients.record(dot.request, result.clone(), self.config.client_window);
                self.stats.executed += 1;
                Some(result)
            }
            Dedup::Duplicate(result) => {
                self.stats.count("duplicate_attempt");
                result
            }
        };
        if payload.coordinator(self.shard) == self.id
            && let Some(result) = result
        {
            out.send_durable(payload.client, Message::Reply { dot, shard: self.shard, result });
        }
        self.note_executed(dot, out);
    }
}

// NUMBER_MAX (shared) bounds the timestamp, ballot or promise sequence number a replica accepts
// from a peer. Timestamps grow by one per conflicting command and ballots by `r` per recovery, so
// no cluster reaches it; below it, `+ 1` on a number that came from a peer cannot overflow.
pub use crate::NUMBER_MAX;

/// The highest timestamp, ballot or sequence number `message` carries, checked against
/// [`NUMBER_MAX`] before any handler adds to it.
fn highest_number(message: &Message) -> u64 {
    let ranges = |ranges: &mut dyn Iterator<Item = &PromiseRange>| ranges.map(|r| r.lo.max(r.hi)).max().unwrap_or(0);
    match message {
        Message::Submit { .. } | Message::Payload { .. } | Message::Help { .. } | Message::Reply { .. } => 0,
        Message::Stable { .. } => 0,
        Message::Executed { from_seq, dots, ack } => (*from_seq).max(*ack).saturating_add(dots.len() as u64),
        Message::Propose { t, .. } | Message::Bump { t, .. } => *t,
        Message::ProposeAck { t, promises, .. } => (*t).max(ranges(&mut promises.iter())),
        Message::Commit { t, promises, .. } => (*t).max(ranges(&mut promises.iter().map(|(_, range)| range))),
        Message::Consensus { t, ballot, .. } => (*t).max(*ballot),
        Message::ConsensusAck { ballot, .. } | Message::Rec { ballot, .. } => *ballot,
        Message::RecAck { t, abal, ballot, .. } => (*t).max(*abal).max(*ballot),
        Message::Promises { from_seq, ranges: r, ack } => {
            (*from_seq).max(*ack).max(ranges(&mut r.iter())).saturating_add(r.len() as u64)
        }
    }
}

impl Node<Tempo> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<Tempo>) {
        self.now_ns = now.local_ns;
        if self.life == Life::Retired {
            self.stats.count("retired");
            return;
        }
        assert_eq!(self.life, Life::Starting, "a replica starts once");
        let marker = out.persist((), PersistMode::Append);
        self.life = Life::Booting(marker);
        for heard in &mut self.last_heard {
            *heard = now.local_ns;
        }
        let jitter = self.rng.random_range(0..self.config.promise_interval_ns);
        out.set_timer(Timer::Promises, self.config.promise_interval_ns + jitter);
        out.set_timer(Timer::Tick, self.config.tick_ns + jitter);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Tempo>) {
        self.step(out, |replica, out| replica.handle_message(now, from, message, out));
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Tempo>) {
        self.step(out, |replica, out| replica.handle_timer(now, timer, out));
    }

    /// The boot marker is durable: this incarnation may now leave traces, so it runs.
    fn on_durable(&mut self, _now: ClockReading, through: PersistTicket, _out: &mut Outbox<Tempo>) {
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
        self.executor.check_invariants();
        assert!(self.instances.len() <= self.config.instances_max, "instances bounded");
        assert!(
            self.log.ranges.len() <= self.config.promise_log_max + self.config.promise_batch_max * 4,
            "log bounded"
        );
        assert!(self.log.acked.len() == self.r() && self.log.expected.len() == self.r(), "one stream per peer");
        assert!(self.gc.log.dots.len() <= self.config.executed_log_max, "executed log bounded");
    }

    fn is_recovering(&self) -> bool {
        // Fault injectors count a retired replica among the failed ones: it never comes back.
        self.life == Life::Retired
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        // A retired replica holds no replica state: nothing to compare.
        (self.life != Life::Retired).then_some(self.state_machine.as_ref())
    }

    fn status(&self) -> String {
        if self.life == Life::Retired {
            return format!("shard={} rank={} retired (restarted after a crash)", self.shard, self.rank);
        }
        let pending = self.instances.values().filter(|i| i.phase.pending()).count();
        let suspects = (0..self.r()).filter(|&rank| self.suspected(rank)).count();
        let head = self.executor.first_head().map(|(key, ts, dot)| {
            let phase = self.instances.get(&dot).map(|i| i.phase);
            format!(
                " head={key:?}@{ts} {dot:?} {phase:?} stable={} [{}]",
                self.promises.stable(&key),
                self.promises.describe(&key)
            )
        });
        format!(
            "shard={} rank={} cmds={} peak={} pending={} waiting={} exec={} forgotten={} keys={} log={} suspects={}{}",
            self.shard,
            self.rank,
            self.instances.len(),
            self.instances_peak,
            pending,
            self.executor.len(),
            self.stats.executed,
            self.gc.forgotten.len(),
            self.clocks.len(),
            self.log.ranges.len(),
            suspects,
            head.unwrap_or_default()
        )
    }
}

impl Replica {
    /// One message, while running or booting.
    fn handle_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Tempo>) {
        self.now_ns = now.local_ns;
        if highest_number(&message) > NUMBER_MAX {
            self.stats.drop_input("number out of range");
            return;
        }
        if let Some(rank) = self.rank_of(from) {
            self.last_heard[rank] = now.local_ns;
        }
        if let Some(reason) = self.forgotten_guard(from, &message, out) {
            self.stats.drop_input(reason);
            return;
        }
        let handled = match message {
            Message::Submit { dot, shards, parts, coordinators } => {
                self.on_submit(from, dot, shards, parts, coordinators, out)
            }
            Message::Propose { dot, payload, t } => self.on_propose(from, dot, payload, t, out),
            Message::Payload { dot, payload } => self.on_payload(dot, payload, out),
            Message::ProposeAck { dot, t, promises } => self.on_propose_ack(from, dot, t, promises, out),
            Message::Commit { dot, shard, t, promises, payload } => {
                self.on_commit_message(from, dot, shard, t, promises, payload, out)
            }
            Message::Consensus { dot, t, ballot } => self.on_consensus(from, dot, t, ballot, out),
            Message::ConsensusAck { dot, ballot } => self.on_consensus_ack(from, dot, ballot, out),
            Message::Promises { from_seq, ranges, ack } => match self.rank_of(from) {
                Some(rank) if rank != self.rank => self.on_promises(rank, from_seq, ranges, ack),
                _ => Err("promises from outside the shard"),
            },
            Message::Executed { from_seq, dots, ack } => match self.rank_of(from) {
                Some(rank) if rank != self.rank => self.on_executed(rank, from_seq, dots, ack, out),
                _ => Err("executed dots from outside the shard"),
            },
            Message::Rec { dot, ballot, payload } => self.on_rec(from, dot, ballot, payload, out),
            Message::RecAck { dot, t, phase, abal, ballot } => self.on_rec_ack(from, dot, t, phase, abal, ballot, out),
            Message::Help { dot, payload } => self.on_help(from, dot, payload, out),
            Message::Bump { dot, t } => self.on_bump(dot, t),
            Message::Stable { dot, shard, waiting } => self.on_stable(from, dot, shard, waiting, out),
            Message::Reply { .. } => Err("reply sent to a replica"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
        self.execute_ready(out);
    }

    /// One timer, while running or booting.
    fn handle_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Tempo>) {
        self.now_ns = now.local_ns;
        match timer {
            Timer::Promises => {
                self.send_promises(out);
                self.send_executed(out);
                out.set_timer(Timer::Promises, self.config.promise_interval_ns);
            }
            Timer::Tick => {
                self.tick(out);
                out.set_timer(Timer::Tick, self.config.tick_ns);
            }
            Timer::ClientRetry => self.stats.drop_input("client timer at a replica"),
        }
        self.execute_ready(out);
    }
}
