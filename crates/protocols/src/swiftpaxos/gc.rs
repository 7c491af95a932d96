//! Garbage collection (§4.1): a command executed at every replica is forgotten.
//!
//! The paper trims commands "executed at all replicas" and does not say how replicas learn it
//! (spec §13.10). Here each replica tracks, per client, its *executed prefix*: the highest
//! number `p` such that the client's requests `1..=p` all ran here. A client numbers its
//! requests 1, 2, 3… and sends the next only once the previous one completed, so a prefix only
//! waits for commands that will run (or for a client that died mid-request, whose lane then
//! simply stops). Replicas piggyback their prefixes on the failure detector's `Ping`; a
//! replica forgets request `(c, n)` once every replica's prefix for `c` reaches `n`, minus the
//! replicas that told us they left for good (a restarted process retires, crash-stop).
//!
//! Why forgetting is safe: a forgotten command ran at every replica that will ever execute
//! again, so any command that depends on it, or conflicts with it and arrives later, executes
//! after it everywhere; the executor counts a dependency below a lane's frontier as satisfied
//! and refuses a late commit of it, and a retry is answered from the client table. Recovery
//! never needs it: every replica that reports it reports it committed, and a dependency on an
//! id nobody reports is pruned (L62–L63), which is harmless for a command that ran everywhere.
//!
//! A crashed replica that never restarts stops collection (the paper's rule: executed at *all*
//! replicas); memory then grows up to `instances_max`, as without collection.

use super::messages::Phase;
use super::replica::Replica;
use crate::executor::graph::ForgetError;
use ordo_core::{ClientId, RequestId};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Most lanes one `Ping` reports: bounds the message however many clients there are.
pub const LANES_PER_PING: usize = 512;

/// Most requests of one client that ran here out of order (beyond its prefix): an honest client
/// has one in flight, so this only bounds a misbehaving one.
const BEYOND_MAX: usize = 1_024;

/// One client's executed requests here: the contiguous prefix and what ran beyond it.
#[derive(Clone, Debug, Default)]
struct Lane {
    prefix: u64,
    beyond: BTreeSet<u64>,
}

/// What this replica knows of every replica's executed prefixes, and what it forgot.
#[derive(Clone, Debug)]
pub struct Collector {
    rank: usize,
    own: BTreeMap<ClientId, Lane>,
    /// By rank (our own slot unused): each peer's reported prefixes.
    peers: Vec<BTreeMap<ClientId, u64>>,
    /// Ranks that retired for good; they no longer hold collection back.
    retired: Vec<bool>,
    /// Per client, the requests through this number are forgotten here.
    collected: BTreeMap<ClientId, u64>,
    /// Lanes whose prefix moved since the last report.
    dirty: BTreeSet<ClientId>,
    /// Where the next report resumes its sweep over every lane (lost pings are repaired).
    cursor: Option<ClientId>,
    /// Collectable commands still held: one of their dependencies is held.
    pub(crate) waiting: BTreeSet<RequestId>,
    lanes_max: usize,
}

impl Collector {
    /// A collector for the replica of rank `rank` among `n`, tracking at most `lanes_max` clients.
    pub fn new(rank: usize, n: usize, lanes_max: usize) -> Self {
        Collector {
            rank,
            own: BTreeMap::new(),
            peers: vec![BTreeMap::new(); n],
            retired: vec![false; n],
            collected: BTreeMap::new(),
            dirty: BTreeSet::new(),
            cursor: None,
            waiting: BTreeSet::new(),
            lanes_max,
        }
    }

    /// `id` ran here: the lane, with its new collectable prefix, if that moved.
    pub fn executed(&mut self, id: RequestId) -> Option<(ClientId, u64)> {
        if !self.own.contains_key(&id.client) && self.own.len() >= self.lanes_max {
            return None;
        }
        let lane = self.own.entry(id.client).or_default();
        if id.number <= lane.prefix || lane.beyond.len() >= BEYOND_MAX {
            // Not counted: the prefix stays lower than it could be, which only delays collection.
            return None;
        }
        lane.beyond.insert(id.number);
        let before = lane.prefix;
        while lane.beyond.remove(&(lane.prefix + 1)) {
            lane.prefix += 1;
        }
        if lane.prefix == before {
            return None;
        }
        self.dirty.insert(id.client);
        self.advance(id.client)
    }

    /// Our prefixes for the next `Ping`: the lanes that moved, then a sweep over the others.
    pub fn report(&mut self) -> Vec<(ClientId, u64)> {
        let mut report: Vec<(ClientId, u64)> = Vec::new();
        while let Some(client) = self.dirty.pop_first() {
            if report.len() == LANES_PER_PING {
                self.dirty.insert(client);
                return report;
            }
            report.push((client, self.own[&client].prefix));
        }
        let from = self.cursor.take().map_or(Bound::Unbounded, Bound::Excluded);
        for (&client, lane) in self.own.range((from, Bound::Unbounded)) {
            if report.len() == LANES_PER_PING {
                // The sweep resumes after the last lane sent; past the end it starts over.
                return report;
            }
            report.push((client, lane.prefix));
            self.cursor = Some(client);
        }
        self.cursor = None;
        report
    }

    /// Peer `rank` reported `prefixes`: the lanes whose collectable prefix moved, with it.
    pub fn heard(&mut self, rank: usize, prefixes: &[(ClientId, u64)]) -> Vec<(ClientId, u64)> {
        if rank == self.rank || rank >= self.peers.len() {
            return Vec::new();
        }
        let mut moved = Vec::new();
        for &(client, prefix) in prefixes {
            let known = self.peers[rank].len();
            let entry = match self.peers[rank].get_mut(&client) {
                Some(entry) => entry,
                None if known < self.lanes_max => self.peers[rank].entry(client).or_default(),
                None => continue,
            };
            if prefix <= *entry {
                continue;
            }
            *entry = prefix;
            moved.extend(self.advance(client));
        }
        moved
    }

    /// Peer `rank` retired: every lane may move.
    pub fn retire(&mut self, rank: usize) -> Vec<(ClientId, u64)> {
        if rank == self.rank || rank >= self.retired.len() || self.retired[rank] {
            return Vec::new();
        }
        self.retired[rank] = true;
        self.peers[rank].clear();
        let clients: Vec<ClientId> = self.own.keys().copied().collect();
        clients.into_iter().filter_map(|client| self.advance(client)).collect()
    }

    /// The lowest prefix over the replicas still in, and whether it passed what we forgot.
    fn advance(&mut self, client: ClientId) -> Option<(ClientId, u64)> {
        let own = self.own.get(&client).map_or(0, |lane| lane.prefix);
        let lowest = (0..self.peers.len())
            .filter(|&rank| rank != self.rank && !self.retired[rank])
            .map(|rank| self.peers[rank].get(&client).copied().unwrap_or(0))
            .fold(own, u64::min);
        let collected = self.collected.entry(client).or_default();
        if lowest <= *collected {
            return None;
        }
        *collected = lowest;
        Some((client, lowest))
    }

    /// `client`'s requests through this number ran at every replica still in.
    pub fn collected(&self, client: ClientId) -> u64 {
        self.collected.get(&client).copied().unwrap_or(0)
    }

    /// Every client's collected number (for a `NewLeaderAck`).
    pub fn collected_lanes(&self) -> Vec<(ClientId, u64)> {
        self.collected.iter().map(|(&client, &through)| (client, through)).collect()
    }

    /// Our executed prefix for `client`.
    pub fn prefix(&self, client: ClientId) -> u64 {
        self.own.get(&client).map_or(0, |lane| lane.prefix)
    }

    /// Checks what collection relies on.
    pub fn check_invariants(&self) {
        for (client, &collected) in &self.collected {
            assert!(collected <= self.prefix(*client), "only commands executed here are forgotten");
        }
        for lane in self.own.values() {
            assert!(lane.beyond.first().is_none_or(|&n| n > lane.prefix + 1), "the prefix is maximal");
        }
        assert!(self.own.len() <= self.lanes_max, "lanes bounded");
    }
}

impl Replica {
    /// A peer's `Ping`: its executed prefixes.
    pub(crate) fn on_ping(&mut self, rank: usize, executed: &[(ClientId, u64)]) -> Result<(), &'static str> {
        if executed.len() > LANES_PER_PING {
            return Err("ping reporting too many clients");
        }
        if !self.config.gc {
            return Ok(());
        }
        for (client, through) in self.gc.heard(rank, executed) {
            self.forget(client, through);
        }
        Ok(())
    }

    /// A peer restarted and retired for good.
    pub(crate) fn on_retired(&mut self, rank: usize) -> Result<(), &'static str> {
        if !self.config.gc {
            return Ok(());
        }
        for (client, through) in self.gc.retire(rank) {
            self.forget(client, through);
        }
        Ok(())
    }

    /// Whether `id` ran at every replica still in, as we or the recovery's acks know.
    pub(crate) fn ran_everywhere(&self, id: RequestId) -> bool {
        let reported = self.recovery.everywhere.get(&id.client).copied().unwrap_or(0);
        id.number <= self.gc.collected(id.client).max(reported)
    }

    /// `client`'s requests numbered through `through` ran at every replica: forget them, each
    /// once its dependencies are forgotten. That order keeps what we hold closed under
    /// dependents (if a command is held, so is everything that depends on it), so a recovery
    /// that meets a command we forgot also learns, from our `collected`, that whatever it
    /// depended on ran everywhere (`ran_everywhere`).
    pub(crate) fn forget(&mut self, client: ClientId, through: u64) {
        let first = RequestId { client, number: 0 };
        let last = RequestId { client, number: through };
        self.gc.waiting.extend(self.instances.range(first..=last).map(|(&id, _)| id));
        loop {
            let ready: Vec<RequestId> = self
                .gc
                .waiting
                .iter()
                .copied()
                .filter(|id| {
                    let deps = self.instances.get(id).and_then(|i| i.deps.as_ref());
                    deps.is_none_or(|deps| deps.iter().all(|dep| !self.instances.contains_key(dep)))
                })
                .collect();
            if ready.is_empty() {
                break;
            }
            for id in ready {
                self.gc.waiting.remove(&id);
                self.drop_instance(id);
            }
        }
        if let Err(error) = self.execution.executor.forget_below(client, through + 1) {
            // The executor keeps these ids; they stay answered as executed. Counted, not fatal.
            self.stats.drop_input(match error {
                ForgetError::Pending => "gc: the executor holds an unexecuted id",
                ForgetError::LanesFull => "gc: executor lanes full",
            });
        }
    }

    fn drop_instance(&mut self, id: RequestId) {
        let Some(instance) = self.instances.remove(&id) else { return };
        assert_eq!(instance.phase, Phase::Commit, "only executed commands are forgotten");
        self.awaiting.remove(&id);
        self.stats.count("gc_forgotten");
    }

    /// What collection promises: a collectable command is held only while it waits for its
    /// dependencies to go, and nothing unexecuted is collectable.
    pub(crate) fn check_collection(&self) {
        self.gc.check_invariants();
        for id in self.instances.keys() {
            let collectable = id.number <= self.gc.collected(id.client);
            assert!(!collectable || self.gc.waiting.contains(id), "{id:?} is collectable, held and not waiting");
        }
        for id in &self.gc.waiting {
            assert!(self.instances.contains_key(id), "{id:?} waits to be forgotten but is gone");
        }
    }
}
