//! The Mencius replica: proposing in its own slots, accepting, learning, skipping, executing in
//! slot order, and revoking a silent owner's slots. Durability and recovery: `state_transfer.rs`.

use super::messages::{Ballot, Message, NUMBER_MAX, Value};
use super::state_transfer::Durability;
use super::{Config, Durable, Flaw, Mencius, Timer};
use crate::chora::checker::Observation;
use crate::chora::messages::Request;
use crate::client_table::{ClientTable, Lookup};
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, PersistTicket, RequestId,
    StateMachine,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Most requests a replica remembers having received from clients (to reply to them).
pub const WAITING_MAX: usize = 100_000;
/// Most entries in one `Propose`, `Learn` or answer to a `Query`.
pub const ENTRIES_MAX: usize = 512;
/// Doublings of the ticks between resends of a proposal not yet chosen ([`Resend`]): at most
/// 16 ticks apart (16 ms in the simulator, 160 ms for real processes).
pub const RESEND_DOUBLINGS_MAX: u32 = 4;
/// The highest ballot: what a promise reports for a value already chosen.
/// A revocation retried for the same stall waits twice as long as the one before, up to this
/// many times the revoke timeout.
const REVOKE_BACKOFF_MAX: u64 = 32;
const CHOSEN: Ballot = Ballot { round: u64::MAX, rank: u32::MAX };

/// One slot's Paxos state.
#[derive(Clone, Debug, Default)]
pub struct Instance {
    /// The value accepted, with its ballot.
    pub accepted: Option<(Ballot, Value)>,
    /// The value chosen.
    pub learned: Option<Value>,
    /// Ranks that accepted our proposal (when we proposed at `accepted`'s ballot).
    pub accepts: BTreeSet<u32>,
    /// Our proposal here: how often it went out again, and ticks since it last did.
    pub resend: Resend,
}

/// The back-off of one of our proposals not yet chosen: resent at the second tick after it
/// went out (so it had a whole tick to be acknowledged), then after 4, 8, ... ticks up to
/// `2^RESEND_DOUBLINGS_MAX`, and only to the replicas that have not accepted it.
///
/// Why (issue 20): every tick used to send every unchosen proposal again to every other
/// replica. A proposal carrying a value of megabytes takes longer than a tick to travel and be
/// acknowledged, so each tick sent the megabytes again, which slowed every replica further and
/// made the next tick resend more: a 4 MiB SET never finished (the replicas held 2.4 GB of
/// copies after 30 s).
#[derive(Clone, Debug, Default)]
pub struct Resend {
    sends: u32,
    ticks: u64,
}

impl Resend {
    /// Counts a tick; true when the proposal is due to go out again (which it then counts).
    fn tick(&mut self) -> bool {
        self.ticks += 1;
        if self.ticks < 2 << self.sends.min(RESEND_DOUBLINGS_MAX - 1) {
            return false;
        }
        self.ticks = 0;
        self.sends = self.sends.saturating_add(1);
        true
    }
}

/// Which owner we suspect: when we last heard from each replica, and the owner whose slots our
/// last revocation took, with the time that revocation started. An owner revoked and silent
/// since is suspected, and a stall on its later slots revokes them at the next tick rather than
/// after another stall timeout.
///
/// Why: a revocation covers `revoke_ahead` of the owner's slots past the highest slot seen.
/// Under load the others use those up in a fraction of a second and stall on the dead owner's
/// next slot; with real processes' 1-2 s stall timeout, a SIGKILLed replica's slots were
/// revoked stretch after stretch and progress resumed only 10.7 s after the kill.
#[derive(Clone, Debug)]
pub struct Suspicion {
    heard_ns: Vec<u64>,
    revoked: Option<(u32, u64)>,
}

impl Suspicion {
    fn new(replicas: usize) -> Self {
        Suspicion { heard_ns: vec![0; replicas], revoked: None }
    }

    fn heard(&mut self, rank: u32, now: u64) {
        self.heard_ns[rank as usize] = now;
    }

    /// True when our last revocation took `owner`'s slots and nothing came from it since.
    fn suspects(&self, owner: u32) -> bool {
        self.revoked.is_some_and(|(revoked, since)| revoked == owner && self.heard_ns[owner as usize] < since)
    }
}

/// A revocation in phase 1.
#[derive(Clone, Debug)]
pub struct Revocation {
    ballot: Ballot,
    owner: u32,
    from: u64,
    until: u64,
    started_ns: u64,
    promises: BTreeMap<u32, Vec<(u64, Ballot, Value)>>,
}

/// Where a replica is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Fresh: waiting for its first bound to be durable.
    Booting,
    /// Restarted: waiting for a snapshot executed past its durable bound.
    Recovering,
    /// Taking part.
    Running,
}

/// A Mencius replica. Fields are shared with `state_transfer.rs`, which installs snapshots.
pub struct Replica {
    pub(super) rank: u32,
    pub(super) n: u64,
    quorum: usize,
    pub(super) config: Config,
    flaw: Flaw,
    replicas: Destinations,
    pub(super) others: Destinations,
    rng: ChaCha8Rng,
    pub(super) status: Status,
    pub(super) durability: Durability,
    pub(super) instances: BTreeMap<u64, Instance>,
    /// Executed slots' values, the newest `log_keep` (contiguous, ending at `executed`).
    pub(super) chosen: BTreeMap<u64, Value>,
    pub(super) next_own: u64,
    pub(super) max_seen: u64,
    cmds: VecDeque<Arc<Request>>,
    /// Per owner: a promise of `ballot` for its slots in `from..=until`.
    promises: Vec<(Ballot, u64, u64)>,
    max_round: u64,
    pub(super) revocation: Option<Revocation>,
    pub(super) state_machine: Box<dyn StateMachine>,
    pub(super) table: ClientTable,
    pub(super) executed: u64,
    pub(super) ops: u64,
    pub(super) waiting: BTreeMap<RequestId, NodeId>,
    pub(super) stalled_at: u64,
    stalled_since_ns: u64,
    stall_timeout_ns: u64,
    /// When our latest revocation of the current stall started, phase 2 included: the next waits
    /// `stall_timeout_ns`, doubled at each retry ([`REVOKE_BACKOFF_MAX`]).
    revoked_at_ns: Option<u64>,
    /// The owner whose slots we revoke at once when we stall on them ([`Suspicion`]).
    suspicion: Suspicion,
    /// The back-off of our queries for the slot we are stalled on: an answer carries the
    /// slot's value, which may be megabytes still on its way.
    stall_queries: Resend,
    pub(super) stats: NodeStats,
}

impl Replica {
    /// A replica, fresh or restarted (it recovers: `state_transfer.rs`).
    pub(crate) fn new(context: NodeContext<Mencius>, durable: Vec<Durable>, flaw: Flaw) -> Self {
        // The broken variant forgets its earlier incarnation, as if it had persisted nothing.
        let restored = Durability::restored(&durable).filter(|_| flaw != Flaw::RestartFresh);
        let durability = Durability { limit: restored.unwrap_or(0), need: restored.unwrap_or(0), ..Default::default() };
        let replicas = context.topology.replicas().clone();
        let others: Destinations = replicas.iter().copied().filter(|&r| r != context.id).collect();
        let rank = context.topology.replica_rank(context.id).expect("a replica has a rank") as u32;
        let config = context.config.clone();
        let n = replicas.len() as u64;
        Replica {
            rank,
            n,
            quorum: replicas.len() / 2 + 1,
            flaw,
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            status: if restored.is_some() { Status::Recovering } else { Status::Booting },
            durability,
            instances: BTreeMap::new(),
            chosen: BTreeMap::new(),
            next_own: u64::from(rank) + 1,
            max_seen: 0,
            cmds: VecDeque::new(),
            promises: vec![(Ballot::default(), u64::MAX, 0); replicas.len()],
            max_round: 0,
            revocation: None,
            state_machine: (context.new_state_machine)(),
            table: ClientTable::new(config.client_table_max, config.client_window),
            executed: 0,
            ops: 0,
            waiting: BTreeMap::new(),
            stalled_at: 0,
            stalled_since_ns: 0,
            stall_timeout_ns: config.revoke_timeout_ns,
            revoked_at_ns: None,
            stall_queries: Resend::default(),
            suspicion: Suspicion::new(replicas.len()),
            stats: NodeStats::default(),
            replicas,
            others,
            config,
        }
    }

    /// The owner (rank) of `slot`.
    pub fn owner(&self, slot: u64) -> u32 {
        assert!(slot > 0, "slots start at 1");
        ((slot - 1) % self.n) as u32
    }

    /// The first slot above `after` owned by `rank`.
    pub(super) fn next_owned(&self, rank: u32, after: u64) -> u64 {
        let first = u64::from(rank) + 1;
        if after < first {
            return first;
        }
        first + ((after - first) / self.n + 1) * self.n
    }

    /// The last slot executed.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    pub(super) fn rank_of(&self, node: NodeId) -> Option<u32> {
        self.replicas.iter().position(|&r| r == node).map(|r| r as u32)
    }

    fn learn_quorum(&self) -> usize {
        self.quorum
    }

    fn in_window(&self, slot: u64) -> bool {
        slot > self.executed && slot <= self.executed + self.config.window_max
    }

    /// A slot was proposed, skipped or chosen: the highest slot seen follows, up to our
    /// window's end. Why (issue 20): each tick an idle owner skips its slots below the highest
    /// slot seen, and the durable bound is kept ahead of it (`reserve_bound`), so a lying
    /// peer's far slot would otherwise make us skip a whole window at every tick and write a
    /// bound no restarted incarnation could ever reach. Honest runs change only where a
    /// replica hears of a slot past its window (a state request beyond it is refused already,
    /// `on_state_request`); counted as `seen_clamped`.
    fn see(&mut self, slot: u64) {
        let end = self.executed + self.config.window_max;
        if slot > end {
            self.stats.count("seen_clamped");
        }
        self.max_seen = self.max_seen.max(slot.min(end));
    }

    // ---- clients ---------------------------------------------------------------------------

    fn on_request(
        &mut self,
        from: NodeId,
        request: Arc<Request>,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        if self.rank_of(from).is_some() {
            return Err("request from a replica");
        }
        match self.table.lookup(request.id, request.acked_below) {
            Lookup::Executed(result) => {
                out.send(from, Message::Reply { id: request.id, result: result.clone() });
                return Ok(());
            }
            Lookup::Old => return Err("request below the client's mark"),
            Lookup::BeyondWindow => return Err("request beyond the client's window"),
            Lookup::New => {}
        }
        if self.waiting.contains_key(&request.id) {
            // A client's retry of a request we hold: it is queued, or in a proposal of ours
            // not yet chosen (which goes out again by itself), or back in the queue if another
            // value was chosen there (`learn_all`). Proposing it again would send its value
            // once more to every replica: with megabytes, that is what overloads them.
            return Err("request held already");
        }
        if self.waiting.len() >= WAITING_MAX {
            return Err("too many requests waiting");
        }
        if self.cmds.iter().any(|queued| queued.id == request.id) {
            // Queued, though no longer waiting: a snapshot's install forgot whom to answer.
            return Err("request queued already");
        }
        if self.cmds.len() >= self.config.cmds_max {
            return Err("command buffer full");
        }
        self.waiting.insert(request.id, from);
        self.cmds.push_back(request);
        self.propose_commands(out);
        Ok(())
    }

    /// Suggests buffered commands in our next slots (round 0: we coordinate them).
    pub(super) fn propose_commands(&mut self, out: &mut Outbox<Mencius>) {
        while !self.cmds.is_empty() && self.in_window(self.next_own) {
            let slot = self.next_own;
            if !self.covered(slot, out) {
                // Resumed when the bound is durable (`on_written`).
                break;
            }
            self.next_own = self.next_owned(self.rank, slot);
            if !self.may_accept(slot, Ballot { round: 0, rank: self.rank }) {
                // We promised a revoker this slot of ours: it is being revoked, leave it.
                continue;
            }
            let take = ordo_core::batch_len(self.cmds.iter().map(|r| &r.command), self.config.batch_max);
            let value = Value::Requests(self.cmds.drain(..take).collect());
            let ballot = Ballot { round: 0, rank: self.rank };
            self.propose(ballot, vec![(slot, value)], out);
        }
    }

    /// Phase 2a at `ballot`: we accept our own proposals and ask the others.
    fn propose(&mut self, ballot: Ballot, entries: Vec<(u64, Value)>, out: &mut Outbox<Mencius>) {
        for (slot, value) in &entries {
            assert!(self.may_accept(*slot, ballot), "we propose only where we may accept");
            assert!(*slot <= self.durability.limit, "we propose only below our durable bound");
            out.observe(Observation::Proposed {
                slot: *slot,
                view: ballot_view(ballot),
                value: value.value_id(),
                owner: ballot.rank,
            });
            let instance = self.instances.entry(*slot).or_default();
            instance.accepted = Some((ballot, value.clone()));
            instance.accepts = BTreeSet::from([self.rank]);
            instance.resend = Resend::default();
            self.see(*slot);
        }
        let learned: Vec<(u64, Value)> = if self.quorum <= 1 { entries.clone() } else { Vec::new() };
        for chunk in entries.chunks(ENTRIES_MAX) {
            out.multicast(&self.others, Message::Propose { ballot, entries: chunk.to_vec() });
        }
        if !learned.is_empty() {
            self.learn_all(learned, out);
        }
    }

    fn may_accept(&self, slot: u64, ballot: Ballot) -> bool {
        let (promised, from, until) = self.promises[self.owner(slot) as usize];
        if slot >= from && slot <= until && ballot < promised {
            return false;
        }
        let accepted = self.instances.get(&slot).and_then(|i| i.accepted.as_ref()).map(|(b, _)| *b);
        accepted.is_none_or(|b| ballot >= b)
    }

    // ---- acceptor ----------------------------------------------------------------------------

    fn on_propose(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        entries: Vec<(u64, Value)>,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        let rank = self.rank_of(from).ok_or("propose not from a replica")?;
        if ballot.rank != rank || entries.is_empty() || entries.len() > ENTRIES_MAX {
            return Err("malformed propose");
        }
        if ballot.round == 0 && entries.iter().any(|(slot, _)| *slot == 0 || self.owner(*slot) != rank) {
            return Err("round-0 proposal outside its sender's slots");
        }
        if entries.iter().any(|(slot, _)| *slot == 0) {
            return Err("slot 0 does not exist");
        }
        self.max_round = self.max_round.max(ballot.round);
        let mut slots = Vec::new();
        let mut chosen = Vec::new();
        let mut highest = 0;
        for (slot, value) in entries {
            highest = highest.max(slot);
            let learned = if slot <= self.executed {
                self.chosen.get(&slot)
            } else {
                self.instances.get(&slot).and_then(|i| i.learned.as_ref())
            };
            if let Some(learned) = learned {
                // Chosen already: acknowledge only the chosen value, and tell a proposer that
                // suggests another (it lags, its slot was revoked) what was chosen.
                if *learned == value || self.flaw == Flaw::AckAnyChosen {
                    slots.push(slot);
                } else if chosen.len() < ENTRIES_MAX {
                    chosen.push((slot, learned.clone()));
                }
                continue;
            }
            if !self.in_window(slot) || !self.may_accept(slot, ballot) || !self.covered(slot, out) {
                // Not covered: the proposer sends it again at its next tick.
                continue;
            }
            assert!(slot <= self.durability.limit, "we accept only below our durable bound");
            self.instances.entry(slot).or_default().accepted = Some((ballot, value));
            slots.push(slot);
        }
        self.see(highest);
        if !slots.is_empty() {
            out.send(from, Message::Accepted { ballot, slots });
        }
        if !chosen.is_empty() {
            out.send(from, Message::Learn { entries: chosen });
        }
        if ballot.round == 0 {
            // Mencius' rule: a proposal for a higher slot means we are behind; skip our slots
            // below it so that we never hold it back.
            self.skip_below(highest, out);
        }
        self.execute(out);
        Ok(())
    }

    /// Gives up (as no-ops) our unused slots below `slot`, those within our window only.
    ///
    /// A lying peer's slot far ahead (issue 20) must not make us walk, and fill, every slot of
    /// ours up to it: the walk stops at the window's end, and later ticks (`on_tick` skips
    /// below the highest slot seen) go on as we execute. This changes no honest run. The old
    /// walk marked every own slot below `slot` (all lie above `executed`, as `next_own` does),
    /// and `check_invariants` allows no instance past the window; so in every run that keeps
    /// its invariants (each simulated run is checked after every event) no own slot lay
    /// between the window's end and `slot`. There the clamped walk marks the same slots, ends
    /// at the same next slot (at or past `slot`), waits for the same bound and sends the same
    /// skip.
    fn skip_below(&mut self, slot: u64, out: &mut Outbox<Mencius>) {
        let end = slot.min(self.executed + self.config.window_max + 1);
        // Our first slot the walk leaves alone; the skip names every slot below it up to
        // `slot` when that is ours to give up, else the window's end.
        let beyond = self.next_owned(self.rank, end - 1);
        let until = if beyond >= slot { slot - 1 } else { end - 1 };
        if self.next_own >= end || !self.cmds.is_empty() || !self.covered(until, out) {
            return;
        }
        let from = self.next_own;
        let mut own = from;
        while own < end {
            assert!(self.in_window(own), "we skip only slots of our window");
            self.instances.entry(own).or_default().learned.get_or_insert(Value::NoOp);
            own = self.next_owned(self.rank, own);
        }
        assert_eq!(own, beyond, "the walk stops at our first slot past its end");
        if beyond < slot {
            self.stats.count("skip_clamped");
        }
        self.next_own = own;
        self.stats.count("skip");
        out.multicast(&self.others, Message::Skip { from, until });
    }

    fn on_accepted(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        slots: Vec<u64>,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        let rank = self.rank_of(from).ok_or("accepted not from a replica")?;
        if ballot.rank != self.rank {
            return Err("accepted for another proposer's ballot");
        }
        let needed = self.learn_quorum();
        let mut learned = Vec::new();
        for slot in slots {
            let Some(instance) = self.instances.get_mut(&slot) else { continue };
            let Some((accepted, value)) = &instance.accepted else { continue };
            if *accepted != ballot || instance.learned.is_some() {
                continue;
            }
            instance.accepts.insert(rank);
            if instance.accepts.len() >= needed {
                learned.push((slot, value.clone()));
            }
        }
        if !learned.is_empty() {
            for chunk in learned.chunks(ENTRIES_MAX) {
                out.multicast(&self.others, Message::Learn { entries: chunk.to_vec() });
            }
            self.learn_all(learned, out);
        }
        Ok(())
    }

    fn on_skip(&mut self, from: NodeId, first: u64, until: u64, out: &mut Outbox<Mencius>) -> Result<(), &'static str> {
        let rank = self.rank_of(from).ok_or("skip not from a replica")?;
        if first == 0 || until < first || self.owner(first) != rank || until - first > self.config.window_max {
            return Err("malformed skip");
        }
        // Only the owner may suggest anything but a no-op in its slots, so its skip is
        // learned at once (Mencius' optimisation).
        let mut slot = first;
        while slot <= until {
            if self.in_window(slot) {
                let instance = self.instances.entry(slot).or_default();
                if instance.learned.is_none() {
                    instance.learned = Some(Value::NoOp);
                }
            }
            slot += self.n;
        }
        self.see(until);
        self.execute(out);
        Ok(())
    }

    fn on_learn(
        &mut self,
        from: NodeId,
        entries: Vec<(u64, Value)>,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        self.rank_of(from).ok_or("learn not from a replica")?;
        if entries.len() > ENTRIES_MAX || entries.iter().any(|(slot, _)| *slot == 0) {
            return Err("malformed learn");
        }
        self.learn_all(entries, out);
        Ok(())
    }

    /// Records chosen values; a revoked slot of ours moves our next slot past it, and gives
    /// the requests we had suggested there back to the buffer.
    fn learn_all(&mut self, entries: Vec<(u64, Value)>, out: &mut Outbox<Mencius>) {
        let mut requeue = Vec::new();
        for (slot, value) in entries {
            self.see(slot);
            if !self.in_window(slot) {
                continue;
            }
            let ours = self.owner(slot) == self.rank;
            let instance = self.instances.entry(slot).or_default();
            if instance.learned.is_some() {
                continue;
            }
            if ours
                && let Some((ballot, Value::Requests(requests))) = &instance.accepted
                && ballot.round == 0
                && value != Value::Requests(requests.clone())
            {
                requeue.extend(requests.iter().cloned());
            }
            instance.learned = Some(value);
            if ours && slot >= self.next_own {
                self.next_own = self.next_owned(self.rank, slot);
            }
        }
        for request in requeue.into_iter().rev() {
            if self.cmds.len() < self.config.cmds_max {
                self.cmds.push_front(request);
            } else {
                // Dropped: forget it, so that the client's retry is proposed afresh.
                self.waiting.remove(&request.id);
            }
        }
        self.execute(out);
        self.propose_commands(out);
    }

    fn on_query(
        &mut self,
        from: NodeId,
        first: u64,
        until: u64,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        self.rank_of(from).ok_or("query not from a replica")?;
        if first == 0 || until < first {
            return Err("malformed query");
        }
        if first <= self.executed && first < self.kept_floor() {
            // The querier misses values we executed and no longer keep: it needs our state.
            self.send_snapshot(from, out);
            return Ok(());
        }
        let until = until.min(first + ENTRIES_MAX as u64 - 1);
        let mut entries: Vec<(u64, Value)> = self.chosen.range(first..=until).map(|(s, v)| (*s, v.clone())).collect();
        for (slot, instance) in self.instances.range(first..=until) {
            if let Some(value) = &instance.learned {
                entries.push((*slot, value.clone()));
            }
        }
        if !entries.is_empty() {
            out.send(from, Message::Learn { entries });
        }
        Ok(())
    }

    // ---- revocation --------------------------------------------------------------------------

    fn start_revocation(&mut self, now: u64, owner: u32, out: &mut Outbox<Mencius>) {
        let from = self.executed + 1;
        let until =
            (self.max_seen.max(from) + self.config.revoke_ahead * self.n).min(self.executed + self.config.window_max);
        if !self.covered(until, out) {
            // Tried again at a later tick, once the bound is durable.
            return;
        }
        self.max_round += 1;
        let ballot = Ballot { round: self.max_round, rank: self.rank };
        self.stats.count("revocation_started");
        self.revocation = Some(Revocation { ballot, owner, from, until, started_ns: now, promises: BTreeMap::new() });
        out.multicast(&self.others, Message::Prepare { ballot, owner, from, until });
        let accepted = self.promise(ballot, owner, from, until).expect("our own ballot is the highest we know");
        self.on_promise_from(self.rank, ballot, accepted, out);
    }

    /// The lowest slot whose chosen value we can still report: what we keep of the executed
    /// log, and every slot above it.
    pub(super) fn kept_floor(&self) -> u64 {
        self.chosen.first_key_value().map_or(self.executed + 1, |(&slot, _)| slot)
    }

    /// Promises `ballot` for `owner`'s slots in `from..=until`; returns what we accepted there.
    fn promise(&mut self, ballot: Ballot, owner: u32, from: u64, until: u64) -> Option<Vec<(u64, Ballot, Value)>> {
        assert!(until <= self.durability.limit, "we promise only below our durable bound");
        assert!(from > self.executed || from >= self.kept_floor(), "we report every executed slot of the range");
        let (promised, old_from, old_until) = self.promises[owner as usize];
        if ballot <= promised && promised != Ballot::default() {
            return None;
        }
        // Promising more slots than asked is safe (an acceptor may always refuse).
        let range = if old_from == u64::MAX { (from, until) } else { (old_from.min(from), old_until.max(until)) };
        self.promises[owner as usize] = (ballot, range.0, range.1);
        let mut accepted = Vec::new();
        let mut slot = self.next_owned(owner, from - 1);
        while slot <= until {
            if let Some(value) = self.chosen.get(&slot) {
                accepted.push((slot, CHOSEN, value.clone()));
            } else if let Some(instance) = self.instances.get(&slot) {
                if let Some(value) = &instance.learned {
                    accepted.push((slot, CHOSEN, value.clone()));
                } else if let Some((b, value)) = &instance.accepted {
                    accepted.push((slot, *b, value.clone()));
                }
            }
            slot += self.n;
        }
        Some(accepted)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_prepare(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        owner: u32,
        first: u64,
        until: u64,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        let rank = self.rank_of(from).ok_or("prepare not from a replica")?;
        let span = self.config.window_max + self.config.revoke_ahead * self.n;
        if ballot.rank != rank
            || ballot.round == 0
            || owner as u64 >= self.n
            || first == 0
            || until < first
            || until - first > span
        {
            return Err("malformed prepare");
        }
        self.max_round = self.max_round.max(ballot.round);
        if !self.covered(until, out) {
            // The revoker tries again after its stall timeout.
            return Err("prepare beyond our durable bound");
        }
        if first <= self.executed && first < self.kept_floor() {
            // We executed slots of the range whose values we no longer keep: a promise would
            // report nothing there, and the revoker could then choose a no-op over a value.
            return Err("prepare below the values we keep");
        }
        let accepted = self.promise(ballot, owner, first, until).ok_or("prepare below our promise")?;
        out.send(from, Message::Promise { ballot, accepted });
        Ok(())
    }

    fn on_promise(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        accepted: Vec<(u64, Ballot, Value)>,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        let rank = self.rank_of(from).ok_or("promise not from a replica")?;
        if self.revocation.as_ref().is_none_or(|r| r.ballot != ballot) {
            return Err("promise for no revocation of ours");
        }
        self.on_promise_from(rank, ballot, accepted, out);
        Ok(())
    }

    /// f + 1 promises: propose, for each revoked slot, the value accepted at the highest
    /// ballot, or a no-op.
    fn on_promise_from(
        &mut self,
        rank: u32,
        ballot: Ballot,
        accepted: Vec<(u64, Ballot, Value)>,
        out: &mut Outbox<Mencius>,
    ) {
        let Some(revocation) = self.revocation.as_mut() else { return };
        revocation.promises.insert(rank, accepted);
        if revocation.promises.len() < self.quorum {
            return;
        }
        let revocation = self.revocation.take().expect("checked");
        self.suspicion.revoked = Some((revocation.owner, revocation.started_ns));
        let mut best: BTreeMap<u64, (Ballot, Value)> = BTreeMap::new();
        for (slot, b, value) in revocation.promises.into_values().flatten() {
            if best.get(&slot).is_none_or(|(held, _)| b > *held) {
                best.insert(slot, (b, value));
            }
        }
        let mut entries = Vec::new();
        let mut slot = self.next_owned(revocation.owner, revocation.from - 1);
        while slot <= revocation.until {
            let learned = self.instances.get(&slot).is_some_and(|i| i.learned.is_some());
            if self.in_window(slot) && !learned && self.may_accept(slot, ballot) {
                let value = best.remove(&slot).map_or(Value::NoOp, |(_, value)| value);
                entries.push((slot, value));
            }
            slot += self.n;
        }
        self.stats.count("revocation");
        if !entries.is_empty() {
            self.propose(ballot, entries, out);
        }
    }

    // ---- execution and ticks ------------------------------------------------------------------

    pub(super) fn execute(&mut self, out: &mut Outbox<Mencius>) {
        while let Some(value) = self.instances.get(&(self.executed + 1)).and_then(|i| i.learned.clone()) {
            let slot = self.executed + 1;
            self.instances.remove(&slot);
            out.observe(Observation::Committed { slot, value: value.value_id() });
            let mut digest = execution_digest(true, None);
            if let Value::Requests(requests) = &value {
                for request in requests {
                    let result = self.apply(request);
                    if let Some(result) = &result {
                        digest = digest.rotate_left(7) ^ execution_digest(true, Some(result));
                    }
                    if let (Some(result), Some(client)) = (result, self.waiting.remove(&request.id)) {
                        out.send(client, Message::Reply { id: request.id, result });
                    }
                }
                self.stats.slow_path_commits += requests.len() as u64;
            }
            out.observe(Observation::Executed { slot, digest });
            self.chosen.insert(slot, value);
            self.executed = slot;
            if self.next_own <= slot {
                self.next_own = self.next_owned(self.rank, slot);
            }
        }
        while self.chosen.len() as u64 > self.config.log_keep {
            self.chosen.pop_first();
        }
    }

    fn apply(&mut self, request: &Request) -> Option<CommandResult> {
        match self.table.lookup(request.id, request.acked_below) {
            Lookup::Executed(result) => Some(result.clone()),
            Lookup::Old | Lookup::BeyondWindow => None,
            Lookup::New => {
                self.ops += 1;
                let result = self.state_machine.apply(request.id, &request.command);
                self.table.record(request.id, request.acked_below, result.clone(), self.ops);
                self.stats.executed += 1;
                Some(result)
            }
        }
    }

    fn on_tick(&mut self, now: u64, out: &mut Outbox<Mencius>) {
        self.resend_proposals(out);
        // An idle owner behind the others skips, so it never blocks them.
        if self.max_seen > self.next_own {
            self.skip_below(self.max_seen + 1, out);
        }
        let next = self.executed + 1;
        if self.instances.get(&next).is_some_and(|i| i.learned.is_some()) || self.max_seen < next {
            self.stalled_at = self.executed;
            self.stalled_since_ns = now;
            self.revoked_at_ns = None;
            return;
        }
        if self.stalled_at != self.executed {
            self.stalled_at = self.executed;
            self.stalled_since_ns = now;
            self.revoked_at_ns = None;
            self.stall_timeout_ns =
                self.rng.random_range(self.config.revoke_timeout_ns..2 * self.config.revoke_timeout_ns);
            self.stall_queries = Resend::default();
            return;
        }
        if self.stall_queries.tick() {
            out.multicast(&self.others, Message::Query { from: next, until: next + ENTRIES_MAX as u64 - 1 });
        }
        let owner = self.owner(next);
        let stalled =
            self.suspicion.suspects(owner) || now.saturating_sub(self.stalled_since_ns) > self.stall_timeout_ns;
        // A revocation that ended without the slot chosen was preempted in phase 2, often by
        // another replica revoking the same owner: retrying at the next tick, each preempts the
        // other for good when an accept takes longer than a tick (16 MiB values: issue 20).
        let retry = self.revoked_at_ns.is_none_or(|at| now.saturating_sub(at) > self.stall_timeout_ns);
        if stalled && owner != self.rank && retry {
            if self.revoked_at_ns.is_some() {
                let most = self.config.revoke_timeout_ns.saturating_mul(REVOKE_BACKOFF_MAX);
                self.stall_timeout_ns = self.stall_timeout_ns.saturating_mul(2).min(most);
            }
            self.start_revocation(now, owner, out);
            if self.revocation.as_ref().is_some_and(|r| r.started_ns == now) {
                self.revoked_at_ns = Some(now);
            }
        }
    }

    /// Our proposals not yet chosen go out again (lost proposes or acks), backed off
    /// ([`Resend`]), each to the replicas that have not accepted it.
    fn resend_proposals(&mut self, out: &mut Outbox<Mencius>) {
        let mut by_target: BTreeMap<(u32, Ballot), Vec<(u64, Value)>> = BTreeMap::new();
        for (slot, instance) in &mut self.instances {
            let (None, Some((ballot, value))) = (&instance.learned, &instance.accepted) else { continue };
            if ballot.rank != self.rank || !instance.resend.tick() {
                continue;
            }
            for rank in (0..self.n as u32).filter(|rank| !instance.accepts.contains(rank)) {
                let entries = by_target.entry((rank, *ballot)).or_default();
                if entries.len() < ENTRIES_MAX {
                    entries.push((*slot, value.clone()));
                }
            }
        }
        for ((rank, ballot), entries) in by_target {
            out.send(self.replicas[rank as usize], Message::Propose { ballot, entries });
        }
    }

    fn dispatch(
        &mut self,
        now: u64,
        from: NodeId,
        message: Message,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        let _ = now;
        match message {
            Message::Request(request) => self.on_request(from, request, out),
            Message::Propose { ballot, entries } => self.on_propose(from, ballot, entries, out),
            Message::Accepted { ballot, slots } => self.on_accepted(from, ballot, slots, out),
            Message::Skip { from: first, until } => self.on_skip(from, first, until, out),
            Message::Learn { entries } => self.on_learn(from, entries, out),
            Message::Query { from: first, until } => self.on_query(from, first, until, out),
            Message::Prepare { ballot, owner, from: first, until } => {
                self.on_prepare(from, ballot, owner, first, until, out)
            }
            Message::Promise { ballot, accepted } => self.on_promise(from, ballot, accepted, out),
            Message::StateRequest { need } => self.on_state_request(from, need, out),
            Message::StateReply(snapshot) => self.on_state_reply(*snapshot, out),
            Message::Reply { .. } => Err("reply sent to a replica"),
        }
    }
}

/// A ballot as the checker's "view": unique per proposer and round.
fn ballot_view(ballot: Ballot) -> u64 {
    ballot.round.saturating_mul(1 << 16).saturating_add(u64::from(ballot.rank))
}

impl Node<Mencius> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<Mencius>) {
        if self.status == Status::Recovering {
            self.stats.count("restarted");
            self.request_state(now.local_ns, out);
            out.set_timer(Timer::Tick, self.config.tick_ns);
            return;
        }
        self.persist_bound_at_boot(out);
    }

    fn on_durable(&mut self, now: ClockReading, through: PersistTicket, out: &mut Outbox<Mencius>) {
        self.on_written(through, out);
        if self.status == Status::Booting && self.durability.boot.is_some_and(|ticket| ticket <= through) {
            // Taking part before the first bound is durable would let a crash erase the fact
            // that this replica ever acted (a restart must recover, not start afresh).
            self.status = Status::Running;
            self.stalled_since_ns = now.local_ns;
            out.set_timer(Timer::Tick, self.config.tick_ns);
        }
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Mencius>) {
        if message.highest_number() > NUMBER_MAX {
            self.stats.drop_input("number out of range");
            return;
        }
        if let Some(rank) = self.rank_of(from) {
            self.suspicion.heard(rank, now.local_ns);
        }
        let handled = match (self.status, message) {
            (Status::Recovering, Message::StateReply(snapshot)) => self.on_state_reply(*snapshot, out),
            (Status::Recovering, _) => Err("recovering"),
            (Status::Booting, _) => Err("booting"),
            (Status::Running, message) => self.dispatch(now.local_ns, from, message, out),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
        if self.status == Status::Running {
            self.reserve_bound(out);
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Mencius>) {
        if timer != Timer::Tick {
            return;
        }
        match self.status {
            Status::Booting => return,
            Status::Recovering => self.request_state(now.local_ns, out),
            Status::Running => {
                self.on_tick(now.local_ns, out);
                self.reserve_bound(out);
            }
        }
        out.set_timer(Timer::Tick, self.config.tick_ns);
    }

    fn check_invariants(&self) {
        if self.status != Status::Running {
            assert_eq!(self.executed, 0, "a replica that has not joined executes nothing");
            assert!(self.instances.is_empty(), "a replica that has not joined holds no instance");
            return;
        }
        assert!(self.instances.first_key_value().is_none_or(|(&s, _)| s > self.executed), "executed slots are gone");
        assert!(self.instances.last_key_value().is_none_or(|(&s, _)| s <= self.executed + self.config.window_max));
        assert_eq!(self.owner(self.next_own), self.rank, "our next slot is ours");
        assert!(self.next_own > self.executed, "our next slot lies ahead");
        assert!(self.cmds.len() <= self.config.cmds_max, "the command buffer is bounded");
        assert!(self.chosen.len() as u64 <= self.config.log_keep, "the kept log is bounded");
        assert!(self.chosen.last_key_value().is_none_or(|(&s, _)| s == self.executed), "the kept log ends executed");
        assert!(self.waiting.len() <= WAITING_MAX, "waiting requests are bounded");
        let limit = self.durability.limit;
        let accepted_max = self.instances.iter().rev().find(|(_, i)| i.accepted.is_some()).map(|(&s, _)| s);
        assert!(accepted_max.is_none_or(|slot| slot <= limit), "every acceptance lies below the durable bound");
        assert!(self.promises.iter().all(|&(b, _, until)| b == Ballot::default() || until <= limit), "promises too");
    }

    fn is_recovering(&self) -> bool {
        self.status == Status::Recovering
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        (self.status != Status::Recovering).then(|| self.state_machine.as_ref())
    }

    fn status(&self) -> String {
        let revoking = self.revocation.as_ref().map_or("-".to_string(), |r| format!("r{}", r.owner));
        format!("executed={} next_own={} seen={} revoking={revoking}", self.executed, self.next_own, self.max_seen)
    }
}
