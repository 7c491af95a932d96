//! Recovery (paper §4.2, Figure 5, L40–L76; spec §6) and leader nomination (Figure 13).
//!
//! A replica that suspects the leader, or sees a command stuck longer than `stuck_timeout_ns`,
//! asks the replica it trusts (the lowest-ranked one it does not suspect) for a new ballot; the
//! trusted replica calls `recover()`. A new ballot is also the cure for lost messages: after
//! its Sync every command is `Accept`, `Commit` or forgotten, and followers vote again (L76).
//! Where the paper is silent (when to suspect, when a command counts as stuck, that the trusted
//! leader may start a new ballot of its own to unstick a follower) the choices are written in
//! `docs/protocols/swiftpaxos.md`.

use super::checker::Observation;
use super::messages::{Deps, Entry, Message, Phase};
use super::replica::{Instance, Replica, Status, Votes};
use super::{QuorumSystem, SwiftPaxos, Variant};
use crate::executor::graph::CommandStatus;
use ordo_core::{ClientId, Command, Key, Outbox, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// The failure detector ◇P (Fig 13): a peer is alive if heard from within the suspicion time.
#[derive(Clone, Debug)]
pub struct Detector {
    last_heard_ns: Vec<u64>,
    /// When we last asked the trusted replica for a new ballot.
    last_request_ns: Option<u64>,
}

impl Detector {
    /// A detector for `n` replicas.
    pub fn new(n: usize) -> Self {
        Detector { last_heard_ns: vec![0; n], last_request_ns: None }
    }

    /// Everyone counts as heard at boot.
    pub fn start(&mut self, now_ns: u64) {
        self.last_heard_ns.iter_mut().for_each(|heard| *heard = now_ns);
    }

    /// A message from `rank` arrived.
    pub fn heard(&mut self, rank: usize, now_ns: u64) {
        self.last_heard_ns[rank] = self.last_heard_ns[rank].max(now_ns);
    }

    fn alive(&self, rank: usize, now_ns: u64, timeout_ns: u64) -> bool {
        now_ns.saturating_sub(self.last_heard_ns[rank]) < timeout_ns
    }
}

/// The new leader's side of recovery.
#[derive(Clone, Debug, Default)]
pub struct Recovery {
    /// The ballot we are collecting `NewLeaderAck`s for.
    pub ballot: Option<u64>,
    /// By rank: its `cbal` and its report.
    pub acks: BTreeMap<usize, (u64, Vec<Entry>)>,
    /// When we last started a recovery.
    pub started_ns: Option<u64>,
    /// When we last joined a ballot (NewLeader), to time out a recovery that never ends.
    pub joined_ns: u64,
    /// Per client, requests through this number ran at every replica, as the acks say.
    pub everywhere: BTreeMap<ClientId, u64>,
}

pub(crate) type Recovered = BTreeMap<RequestId, (Phase, Command, BTreeSet<RequestId>)>;

impl Replica {
    /// `select(Alive)`: the lowest rank not suspected (we never suspect ourselves).
    pub(crate) fn trusted(&self) -> usize {
        (0..self.quorums.n)
            .find(|&rank| rank == self.rank || self.detector.alive(rank, self.now_ns, self.config.suspect_timeout_ns))
            .expect("we trust ourselves")
    }

    /// L82–L84, plus the stuck-command rule: ask for a new ballot when our leader is not the one
    /// we trust, when a command waits too long, or when a recovery never finishes.
    pub(crate) fn nominate(&mut self, out: &mut Outbox<SwiftPaxos>) {
        let trusted = self.trusted();
        let wrong_leader = self.ballots.status == Status::Normal && self.leader() != trusted;
        let stuck_recovering = self.ballots.status == Status::Recovering
            && self.now_ns.saturating_sub(self.recovery.joined_ns) >= self.config.stuck_timeout_ns;
        if !(wrong_leader || stuck_recovering || self.stuck()) {
            return;
        }
        if trusted == self.rank {
            self.maybe_recover(self.ballots.bal, out);
            return;
        }
        let due = self
            .detector
            .last_request_ns
            .is_none_or(|at| self.now_ns.saturating_sub(at) >= self.config.suspect_timeout_ns);
        if due {
            self.detector.last_request_ns = Some(self.now_ns);
            self.stats.count("recover_request");
            out.send_durable(self.peers[trusted], Message::Recover { ballot: self.ballots.bal });
        }
    }

    /// L85–L86.
    pub(crate) fn on_recover(&mut self, ballot: u64, out: &mut Outbox<SwiftPaxos>) -> Result<(), &'static str> {
        if self.trusted() != self.rank {
            return Err("recover request to a replica that does not trust itself");
        }
        self.maybe_recover(ballot.max(self.ballots.bal), out);
        Ok(())
    }

    /// Starts a recovery unless one started less than a stuck time-out ago.
    fn maybe_recover(&mut self, above: u64, out: &mut Outbox<SwiftPaxos>) {
        if self.recovery.started_ns.is_some_and(|at| self.now_ns.saturating_sub(at) < self.config.stuck_timeout_ns) {
            return;
        }
        self.recover(above, out);
    }

    /// L40–L42: a ballot above `above` that we lead, preferably one whose fast quorum we
    /// believe alive (Fig 13, §4.3).
    pub(crate) fn recover(&mut self, above: u64, out: &mut Outbox<SwiftPaxos>) {
        let above = above.max(self.ballots.bal);
        let mut ballot = self.quorums.next_ballot_of(self.rank, above);
        if self.quorums_system_is_c2() {
            for _ in 0..self.quorums.n {
                let alive = self.quorums.fast_quorums(ballot)[0].iter().all(|&rank| {
                    rank == self.rank || self.detector.alive(rank, self.now_ns, self.config.suspect_timeout_ns)
                });
                if alive {
                    break;
                }
                ballot = self.quorums.next_ballot_of(self.rank, ballot);
            }
        }
        assert!(ballot > self.ballots.bal, "a recovery moves to a higher ballot");
        assert_eq!(self.quorums.leader(ballot), self.rank, "we lead the new ballot");
        self.recovery = Recovery {
            ballot: Some(ballot),
            acks: BTreeMap::new(),
            started_ns: Some(self.now_ns),
            joined_ns: self.recovery.joined_ns,
            everywhere: BTreeMap::new(),
        };
        self.stats.count("recovery");
        out.multicast_durable(&self.peers, Message::NewLeader { ballot });
        let joined = self.on_new_leader(self.rank, ballot, out);
        assert!(joined.is_ok(), "we join our own higher ballot");
    }

    fn quorums_system_is_c2(&self) -> bool {
        self.config.quorum_system == QuorumSystem::C2 && self.quorums.has_fast_path()
    }

    /// L43–L47.
    pub(crate) fn on_new_leader(
        &mut self,
        rank: usize,
        ballot: u64,
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        if ballot <= self.ballots.bal {
            return Err("new leader of a ballot not above ours (L44)");
        }
        if self.quorums.leader(ballot) != rank {
            return Err("new leader of a ballot it does not own");
        }
        self.ballots.status = Status::Recovering;
        self.ballots.bal = ballot;
        self.recovery.joined_ns = self.now_ns;
        let entries = self.report();
        let cbal = self.ballots.cbal;
        let collected = self.gc.collected_lanes();
        if rank == self.rank {
            return self.on_new_leader_ack(rank, ballot, cbal, entries, &collected, out);
        }
        out.send_durable(self.peers[rank], Message::NewLeaderAck { ballot, cbal, entries, collected });
        Ok(())
    }

    /// Every command we know, for a `NewLeaderAck`.
    fn report(&self) -> Vec<Entry> {
        self.instances
            .iter()
            .filter(|(_, instance)| instance.phase != Phase::Start)
            .map(|(&id, instance)| Entry {
                id,
                phase: instance.phase,
                command: instance.command.clone().expect("a known command has a payload"),
                deps: instance.deps.as_ref().map(|deps| deps.iter().copied().collect()),
                witnessed: self.witness.contains(&id),
            })
            .collect()
    }

    /// L48–L65.
    pub(crate) fn on_new_leader_ack(
        &mut self,
        rank: usize,
        ballot: u64,
        cbal: u64,
        entries: Vec<Entry>,
        collected: &[(ClientId, u64)],
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        if self.ballots.status != Status::Recovering
            || self.ballots.bal != ballot
            || self.recovery.ballot != Some(ballot)
        {
            return Err("new leader ack for a recovery we are not running");
        }
        if cbal > ballot || entries.iter().any(|e| e.phase == Phase::Start) {
            return Err("malformed new leader ack");
        }
        self.recovery.acks.insert(rank, (cbal, entries));
        for &(client, through) in collected {
            let known = self.recovery.everywhere.entry(client).or_default();
            *known = (*known).max(through);
        }
        if self.recovery.acks.len() < self.topology.majority() {
            return Ok(());
        }
        let acks = std::mem::take(&mut self.recovery.acks);
        self.recovery.ballot = None;
        let recovered = self.compute_sync(&acks);
        let entries: Vec<Entry> = recovered
            .into_iter()
            .map(|(id, (phase, command, deps))| Entry {
                id,
                phase,
                command,
                deps: Some(deps.into_iter().collect()),
                witnessed: false,
            })
            .collect();
        for entry in &entries {
            let deps = entry.deps.clone().expect("sync entries carry dependencies");
            out.observe(Observation::LeaderDeps { ballot, id: entry.id, deps });
        }
        self.stats.count("sync_sent");
        out.multicast_durable(&self.peers, Message::Sync { ballot, entries: entries.clone() });
        self.on_sync(self.rank, ballot, entries, out)
    }

    /// L50–L64: the initial state of the new ballot from a majority's reports.
    pub(crate) fn compute_sync(&self, acks: &BTreeMap<usize, (u64, Vec<Entry>)>) -> Recovered {
        let b_max = acks.values().map(|(cbal, _)| *cbal).max().expect("a majority answered");
        let in_u: BTreeSet<usize> = acks.iter().filter(|(_, (cbal, _))| *cbal == b_max).map(|(&r, _)| r).collect();
        let by_rank: BTreeMap<usize, BTreeMap<RequestId, &Entry>> =
            acks.iter().map(|(&rank, (_, entries))| (rank, entries.iter().map(|e| (e.id, e)).collect())).collect();
        let mut new: Recovered = BTreeMap::new();
        // L53–L56: whatever a freshest replica accepted or committed (a commit report wins).
        for rank in &in_u {
            for entry in by_rank[rank].values() {
                let (Phase::Accept | Phase::Commit, Some(deps)) = (entry.phase, &entry.deps) else { continue };
                let better = new.get(&entry.id).is_none_or(|(phase, _, _)| *phase == Phase::Accept);
                if better {
                    new.insert(entry.id, (entry.phase, entry.command.clone(), deps.iter().copied().collect()));
                }
            }
        }
        let mut index: BTreeMap<Key, Vec<RequestId>> = BTreeMap::new();
        for (&id, (_, command, _)) in &new {
            command.for_each_key(|key| index.entry(key.clone()).or_default().push(id));
        }
        // L57–L61: whatever a fast quorum may have agreed on.
        let candidates: BTreeSet<RequestId> =
            by_rank.values().flat_map(|entries| entries.keys().copied()).filter(|id| !new.contains_key(id)).collect();
        let fast_quorums = self.quorums.fast_quorums(b_max);
        let mut recovered_fast = Vec::new();
        for id in candidates {
            let Some((command, deps)) = fast_quorums.iter().find_map(|quorum| agreed(id, quorum, &by_rank, &in_u))
            else {
                continue;
            };
            command.for_each_key(|key| index.entry(key.clone()).or_default().push(id));
            new.insert(id, (Phase::Accept, command, deps.into_iter().filter(|dep| *dep != id).collect()));
            recovered_fast.push(id);
        }
        if self.variant == Variant::Curp {
            recovered_fast.extend(self.recover_witnessed(&by_rank, b_max, &mut new, &mut index));
        }
        // The extra term of L61 keeps Invariant 2: order each command recovered this way after
        // every conflicting command kept that it is not ordered with yet (§4.2). It is
        // evaluated once every such command is in (a command recovered later could otherwise
        // be missing from the graph the first one's order is judged in). Proposals are
        // transitively reduced (`conflicts.rs`), so "ordered" means reachable either way, not a
        // direct edge: a direct edge to a command already reached would change the
        // dependencies a fast quorum may have committed with.
        for id in recovered_fast {
            let command = new[&id].1.clone();
            let mut others = BTreeSet::new();
            command.for_each_key(|key| others.extend(index.get(key).into_iter().flatten().copied()));
            let below = reachable(&new, new[&id].2.iter().copied());
            let mut extra = Vec::new();
            for other in others {
                let (_, their_command, _) = &new[&other];
                if other == id || their_command.commutes_with(&command) || below.contains(&other) {
                    continue;
                }
                if self.ran_everywhere(other) {
                    // Every replica ran it already, so it precedes `id` everywhere; a path to
                    // it may pass through commands reporters forgot, so reachability here
                    // cannot tell, and an extra edge could change a committed `dep[id]`.
                    continue;
                }
                if !reaches_uncommitted(&new, other, id) {
                    extra.push(other);
                }
            }
            new.get_mut(&id).expect("recovered").2.extend(extra);
        }
        // L62–L63: a dependency nobody kept could not have committed, unless it ran here: then
        // it ran everywhere and reporters may have forgotten it (garbage collection); a
        // command committed with it keeps it (Inv 1).
        let kept: BTreeSet<RequestId> = new.keys().copied().collect();
        let executor = &self.execution.executor;
        for (_, _, deps) in new.values_mut() {
            deps.retain(|dep| kept.contains(dep) || executor.status(*dep) == CommandStatus::Executed);
        }
        // L64.
        break_cycles(&mut new);
        assert!(topological(&new).len() == new.len(), "Inv 3: the Sync graph is acyclic");
        new
    }

    /// CURP+ (App. B; the paper omits recovery, this is CURP's 2f+1 rule): a command whose
    /// optimistic result a client took was held by the leader of `b_max` and recorded by
    /// witnesses, more than 3N/4 replicas in all, so by at least ⌈f/2⌉ + 1 of any majority;
    /// a command conflicting with it was recorded by fewer (a witness records one of two
    /// conflicting commands). Such a command not kept yet is kept as accepted, with no
    /// dependencies: the extra term of L61 then orders it after every conflicting command kept
    /// that does not follow it, where the leader's result put it.
    fn recover_witnessed(
        &self,
        by_rank: &BTreeMap<usize, BTreeMap<RequestId, &Entry>>,
        b_max: u64,
        new: &mut Recovered,
        index: &mut BTreeMap<Key, Vec<RequestId>>,
    ) -> Vec<RequestId> {
        let old_leader = self.quorums.leader(b_max);
        let needed = self.quorums.f.div_ceil(2) + 1;
        let mut witnesses: BTreeMap<RequestId, (usize, &Command)> = BTreeMap::new();
        for (&rank, entries) in by_rank {
            for entry in entries.values().filter(|e| e.witnessed || rank == old_leader) {
                witnesses.entry(entry.id).or_insert((0, &entry.command)).0 += 1;
            }
        }
        let mut recovered = Vec::new();
        for (id, (count, command)) in witnesses {
            if count < needed || new.contains_key(&id) {
                continue;
            }
            command.for_each_key(|key| index.entry(key.clone()).or_default().push(id));
            new.insert(id, (Phase::Accept, command.clone(), BTreeSet::new()));
            recovered.push(id);
        }
        recovered
    }

    /// L66–L76: install the new ballot's state.
    pub(crate) fn on_sync(
        &mut self,
        rank: usize,
        ballot: u64,
        entries: Vec<Entry>,
        out: &mut Outbox<SwiftPaxos>,
    ) -> Result<(), &'static str> {
        if ballot < self.ballots.bal {
            return Err("sync of an older ballot (L67)");
        }
        if self.quorums.leader(ballot) != rank {
            return Err("sync from a replica that does not lead its ballot");
        }
        if ballot == self.ballots.bal && self.ballots.status == Status::Normal {
            return Err("sync of our ballot, installed already");
        }
        let well_formed = entries.iter().all(|e| matches!(e.phase, Phase::Accept | Phase::Commit) && e.deps.is_some());
        if !well_formed {
            return Err("malformed sync");
        }
        if !self.sync_closed(&entries) {
            return Err("sync with a dependency of an accepted command missing");
        }
        self.ballots.status = Status::Normal;
        self.ballots.bal = ballot;
        self.ballots.cbal = ballot;
        let now_ns = self.now_ns;
        let mut old = std::mem::take(&mut self.instances);
        let mut newly_committed: Vec<(RequestId, Deps)> = Vec::new();
        for entry in entries {
            if !old.contains_key(&entry.id) && self.execution.executor.status(entry.id) == CommandStatus::Executed {
                // It ran here and was forgotten (garbage collection): nothing to install.
                continue;
            }
            let deps: BTreeSet<RequestId> = entry.deps.expect("checked well formed").into_iter().collect();
            let mut instance = old.remove(&entry.id).unwrap_or_else(|| Instance::new(now_ns));
            if instance.phase == Phase::Commit {
                if instance.deps.as_ref() != Some(&deps) {
                    // The global checker reports it (Inv 1); we keep what we committed.
                    self.stats.count("sync_disagrees_with_commit");
                }
            } else {
                instance.phase = entry.phase;
                instance.deps = Some(deps.clone());
                if entry.phase == Phase::Commit {
                    newly_committed.push((entry.id, deps.iter().copied().collect()));
                }
            }
            instance.command = Some(entry.command);
            if instance.leader_ack.as_ref().is_some_and(|ack| ack.ballot <= ballot) {
                instance.leader_ack = None;
            }
            if instance.votes.ballot < ballot {
                instance.votes = Votes { ballot, ..Votes::default() };
            }
            instance.paths = None;
            instance.seen_ns = now_ns;
            instance.reproposed = false;
            self.instances.insert(entry.id, instance);
        }
        for (id, instance) in old {
            // A command we committed is in every Sync (Inv 14); keep it whatever the message says.
            if instance.phase == Phase::Commit {
                self.stats.count("committed_not_in_sync");
                self.instances.insert(id, instance);
            }
        }
        self.awaiting = self.instances.iter().filter(|(_, i)| i.leader_ack.is_some()).map(|(&id, _)| id).collect();
        self.accepted = self.instances.iter().filter(|(_, i)| i.phase == Phase::Accept).map(|(&id, _)| id).collect();
        self.preaccepted.clear();
        // CURP+: the new ballot's Sync holds every record that may matter; acks of older
        // ballots no longer count at clients.
        self.witness.clear();
        for (id, deps) in newly_committed {
            out.observe(Observation::Committed { id, deps: deps.clone() });
            self.commit_to_executor(id, &deps);
        }
        self.resume_after_sync(ballot, out);
        Ok(())
    }

    /// Whether installing `entries` keeps Inv 13 (an accepted command's dependencies are
    /// accepted or committed): every dependency of an entry left accepted is in the Sync, or
    /// committed or executed here. An honest leader's Sync is closed so (L62–L63 keep only
    /// dependencies kept or executed at the leader, and those ran everywhere); only a lying or
    /// corrupted one is not, and installing it would break the invariant.
    fn sync_closed(&self, entries: &[Entry]) -> bool {
        let in_sync: BTreeSet<RequestId> = entries.iter().map(|entry| entry.id).collect();
        let known = |dep: &RequestId| {
            in_sync.contains(dep)
                || self.instances.get(dep).is_some_and(|instance| instance.phase == Phase::Commit)
                || self.execution.executor.status(*dep) == CommandStatus::Executed
        };
        entries
            .iter()
            .filter(|entry| entry.phase == Phase::Accept)
            .filter(|entry| self.instances.get(&entry.id).is_none_or(|instance| instance.phase != Phase::Commit))
            .filter(|entry| self.execution.executor.status(entry.id) != CommandStatus::Executed)
            .all(|entry| entry.deps.iter().flatten().all(known))
    }

    /// L70–L76: rebuild the log order from the installed graph; the leader queues what it has not
    /// executed, followers vote again for what is only accepted; then deferred proposals run.
    fn resume_after_sync(&mut self, ballot: u64, out: &mut Outbox<SwiftPaxos>) {
        self.pending_log.clear();
        let graph: Recovered = self
            .instances
            .iter()
            .filter(|(_, i)| matches!(i.phase, Phase::Accept | Phase::Commit))
            .map(|(&id, i)| (id, (i.phase, i.command.clone().expect("payload"), i.deps.clone().expect("deps"))))
            .collect();
        let order = topological(&graph);
        self.rebuild_index(&order);
        let is_leader = self.rank == self.quorums.leader(ballot);
        for &id in &order {
            if is_leader {
                if self.execution.executor.status(id) != CommandStatus::Executed {
                    self.pending_log.push(id);
                }
            } else if self.instances[&id].phase == Phase::Accept {
                out.multicast_durable(&self.peers, Message::SlowAck { ballot, id });
            }
        }
        self.stats.count("sync_installed");
        for (from, id, command) in std::mem::take(&mut self.deferred) {
            if let Err(reason) = self.on_propagate(from, id, command, out) {
                self.stats.drop_input(reason);
            }
        }
    }
}

/// Every id reachable from `start` through dependencies inside `graph` (`start` included).
fn reachable(graph: &Recovered, start: impl Iterator<Item = RequestId>) -> BTreeSet<RequestId> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<RequestId> = start.collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if let Some((_, _, deps)) = graph.get(&id) {
            stack.extend(deps.iter().copied().filter(|dep| !seen.contains(dep)));
        }
    }
    seen
}

/// Whether `target`, which is not committed, is reachable from `start`. The walk stops at
/// committed commands: their dependencies are all committed (L31), so `target` is not below.
fn reaches_uncommitted(graph: &Recovered, start: RequestId, target: RequestId) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        if id == target {
            return true;
        }
        if !seen.insert(id) {
            continue;
        }
        if let Some((phase, _, deps)) = graph.get(&id)
            && *phase != Phase::Commit
        {
            stack.extend(deps.iter().copied().filter(|dep| !seen.contains(dep)));
        }
    }
    false
}

/// L58: if every member of `quorum` that answered is among the freshest (`in_u`) and reports
/// the same proposal for `id`, that proposal and the payload.
fn agreed(
    id: RequestId,
    quorum: &[usize],
    by_rank: &BTreeMap<usize, BTreeMap<RequestId, &Entry>>,
    in_u: &BTreeSet<usize>,
) -> Option<(Command, Deps)> {
    let answered: Vec<usize> = quorum.iter().copied().filter(|rank| by_rank.contains_key(rank)).collect();
    if answered.is_empty() || !answered.iter().all(|rank| in_u.contains(rank)) {
        return None;
    }
    let mut agreed: Option<(&Command, &Deps)> = None;
    for rank in answered {
        let entry = by_rank[&rank].get(&id)?;
        let deps = entry.deps.as_ref()?;
        match agreed {
            None => agreed = Some((&entry.command, deps)),
            Some((_, seen)) if seen == deps => {}
            Some(_) => return None,
        }
    }
    agreed.map(|(command, deps)| (command.clone(), deps.clone()))
}

/// L64: inside every strongly connected component, re-orient each edge to follow id order
/// (a command depends only on lower ids of its component), so every conflicting pair stays
/// ordered one way and the graph becomes acyclic (spec §6.2 (f)). Nothing on a cycle can have
/// committed, so this is safe.
pub(crate) fn break_cycles(graph: &mut Recovered) {
    for component in components(graph) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<RequestId> = component.iter().copied().collect();
        let mut flips: Vec<(RequestId, RequestId)> = Vec::new();
        for &id in &component {
            for &dep in &graph[&id].2 {
                if members.contains(&dep) && dep > id {
                    flips.push((id, dep));
                }
            }
        }
        for (id, dep) in flips {
            graph.get_mut(&id).expect("member").2.remove(&dep);
            graph.get_mut(&dep).expect("member").2.insert(id);
        }
    }
}

/// Strongly connected components (Tarjan's algorithm, iterative), over dependencies inside the
/// graph.
fn components(graph: &Recovered) -> Vec<Vec<RequestId>> {
    let mut index: BTreeMap<RequestId, (usize, usize, bool)> = BTreeMap::new();
    let mut counter = 0;
    let mut stack: Vec<RequestId> = Vec::new();
    let mut result = Vec::new();
    for &root in graph.keys() {
        if index.contains_key(&root) {
            continue;
        }
        let mut call: Vec<(RequestId, Vec<RequestId>, usize)> = Vec::new();
        let deps = |id: RequestId| -> Vec<RequestId> {
            graph[&id].2.iter().copied().filter(|d| graph.contains_key(d)).collect()
        };
        index.insert(root, (counter, counter, true));
        counter += 1;
        stack.push(root);
        call.push((root, deps(root), 0));
        while let Some((id, children, next)) = call.last_mut() {
            let id = *id;
            if let Some(&child) = children.get(*next) {
                *next += 1;
                match index.get(&child) {
                    None => {
                        index.insert(child, (counter, counter, true));
                        counter += 1;
                        stack.push(child);
                        call.push((child, deps(child), 0));
                    }
                    Some(&(child_index, _, true)) => {
                        let entry = index.get_mut(&id).expect("visited");
                        entry.1 = entry.1.min(child_index);
                    }
                    Some(_) => {}
                }
                continue;
            }
            call.pop();
            let (own_index, low, _) = index[&id];
            if let Some((parent, _, _)) = call.last() {
                let entry = index.get_mut(parent).expect("visited");
                entry.1 = entry.1.min(low);
            }
            if low == own_index {
                let mut component = Vec::new();
                loop {
                    let member = stack.pop().expect("the root is on the stack");
                    index.get_mut(&member).expect("visited").2 = false;
                    component.push(member);
                    if member == id {
                        break;
                    }
                }
                result.push(component);
            }
        }
    }
    result
}

/// The ids in an order where dependencies come first (Kahn, smallest id first); shorter than
/// the graph if it has a cycle.
pub(crate) fn topological(graph: &Recovered) -> Vec<RequestId> {
    let mut waiting: BTreeMap<RequestId, usize> = BTreeMap::new();
    let mut dependents: BTreeMap<RequestId, Vec<RequestId>> = BTreeMap::new();
    for (&id, (_, _, deps)) in graph {
        let inside: Vec<RequestId> = deps.iter().copied().filter(|d| graph.contains_key(d) && *d != id).collect();
        waiting.insert(id, inside.len());
        for dep in inside {
            dependents.entry(dep).or_default().push(id);
        }
    }
    let mut ready: BTreeSet<RequestId> = waiting.iter().filter(|(_, n)| **n == 0).map(|(&id, _)| id).collect();
    let mut order = Vec::with_capacity(graph.len());
    while let Some(id) = ready.pop_first() {
        order.push(id);
        for &next in dependents.get(&id).into_iter().flatten() {
            let count = waiting.get_mut(&next).expect("in the graph");
            *count -= 1;
            if *count == 0 {
                ready.insert(next);
            }
        }
    }
    order
}
