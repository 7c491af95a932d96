//! The replica: state, dispatch, pulses, the commit rule, execution and invariants. Proposal
//! recovery (nack, recover, skip, coordination timer) lives in `recovery.rs`, view changes in
//! `view_change.rs`.

use super::checker::Observation;
use super::log::{ReplicaLog, Schedule};
use super::messages::{Entry, Message, NUMBER_MAX, Pulse, Request, Value};
use super::state_transfer::Durability;
use super::{Chora, Config, Durable, Flaw, Mode, Timer};
use crate::client_table::{ClientTable, Lookup};
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, PersistTicket, RequestId,
    StateMachine,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Most requests a replica remembers having received from clients (to reply to them).
pub const WAITING_MAX: usize = 100_000;

/// What a replica is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for its launch record to be durable before it takes part.
    Booting,
    /// Taking part.
    Running,
    /// Restarted after a crash: waiting for a snapshot before it takes part again.
    Recovering,
}

/// The replica's role in its view (§6.5, Fig. 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewRole {
    /// Voted for a candidate, adopted the view, or in view 0.
    Follower,
    /// Started a view change and voted for itself.
    Candidate,
    /// A candidate with f + 1 votes: it proposed the view-init.
    Initiator,
}

/// The view and what the view change keeps (§6.5).
#[derive(Clone, Debug)]
pub struct ViewState {
    /// The current view.
    pub view: u64,
    /// Candidate, initiator or follower.
    pub role: ViewRole,
    /// Whom this replica voted for in `view`.
    pub voted_for: Option<NodeId>,
    /// Who voted for this replica (a candidate).
    pub voted_by: BTreeSet<NodeId>,
    /// The view's schedule, known once its view-init is in the log.
    pub schedule: Option<Schedule>,
    /// The view-base other replicas announced before our view-init arrived.
    pub announced_base: Option<u64>,
    /// The view-init committed: slots may commit by acks and proposers propose.
    pub view_init_committed: bool,
    /// Local time the view was entered (or last made progress).
    pub progress_ns: u64,
    /// This view's randomised view-change timeout.
    pub timeout_ns: u64,
    /// A candidacy we owe after refusing a stale candidate: its view, and the local time it
    /// starts unless a view at least that high is entered first (a random back-off, §6.1).
    pub counter_candidacy: Option<(u64, u64)>,
}

/// Acknowledgements and commit (§6.2).
#[derive(Clone, Debug)]
pub struct Acks {
    /// Highest ack heard from each replica (by rank) in this view; ours is `last_ack`.
    pub acked: Vec<u64>,
    /// Our cumulative ack: every slot up to it is held and verified in this view.
    pub last_ack: u64,
    /// Every slot up to it is committed.
    pub last_commit: u64,
}

/// Proposing our own slots.
#[derive(Clone, Debug)]
pub struct Proposing {
    /// Our next slot, `None` while we may not propose (§6.5).
    pub next_propose: Option<u64>,
    /// Client requests waiting for a slot.
    pub cmds: VecDeque<Arc<Request>>,
    /// The highest slot known proposed in the view (§6.7.1).
    pub latest_proposed: u64,
}

/// Executing committed slots and answering clients.
pub struct Execution {
    pub(super) state_machine: Box<dyn StateMachine>,
    pub(super) table: ClientTable,
    /// Every slot up to it is executed.
    pub executed: u64,
    /// Requests executed, numbering the client table's ops.
    pub(super) ops: u64,
    /// Requests clients sent to us, which we answer once executed.
    pub waiting: BTreeMap<RequestId, NodeId>,
}

/// Sending pulses: the round and what the last pulse said.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// Pulses sent in the current round (pulsing: at most one).
    pub pulses_this_round: u32,
    /// Rounds since our last pulse.
    pub rounds_since_pulse: u64,
    /// The ack and latest slot our last pulse carried.
    pub last_sent: (u64, u64),
    /// Running in responsive mode now.
    pub responsive: bool,
    /// Adaptive mode: of the last rounds, how many heard every other proposer.
    pub window: VecDeque<bool>,
    /// Proposers (by rank) heard in the current round.
    pub heard_this_round: BTreeSet<u32>,
}

/// Why a replica ignored an input.
pub type Dropped = &'static str;

/// A Chora replica.
pub struct Replica {
    pub(super) id: NodeId,
    pub(super) rank: u32,
    pub(super) config: Config,
    pub(super) flaw: Flaw,
    pub(super) replicas: Destinations,
    pub(super) others: Destinations,
    /// q = f + 1 over all replicas (spec §2.1).
    pub(super) quorum: usize,
    pub(super) rng: ChaCha8Rng,
    pub(super) status: Status,
    pub(super) log: ReplicaLog,
    pub(super) vs: ViewState,
    pub(super) acks: Acks,
    pub(super) proposing: Proposing,
    pub(super) exec: Execution,
    pub(super) rounds: Rounds,
    pub(super) repair: super::recovery::Repair,
    /// Last local time each replica (by rank) was heard from.
    pub(super) heard_ns: Vec<u64>,
    pub(super) durability: Durability,
    pub(super) stats: NodeStats,
}

/// The commit rule (§6.2): sort the acks in descending order and take the `quorum`-th, the
/// longest prefix that `quorum` replicas hold.
pub fn commit_point(acked: &[u64], quorum: usize) -> u64 {
    assert!(quorum >= 1 && quorum <= acked.len(), "a quorum is among the replicas");
    let mut sorted = acked.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted[quorum - 1]
}

/// The view-0 proposer ranks for `config` among `n` replicas.
pub fn initial_proposers(config: &Config, n: usize) -> Vec<u32> {
    let count = if config.proposers == 0 { n } else { config.proposers.min(n) };
    (0..count as u32).collect()
}

impl Replica {
    /// A replica, fresh (`durable` empty) or restarted (it recovers by state transfer).
    pub(crate) fn new(context: NodeContext<Chora>, durable: Vec<Durable>, flaw: Flaw) -> Self {
        let replicas = context.topology.replicas().clone();
        let others: Destinations = replicas.iter().copied().filter(|&r| r != context.id).collect();
        let rank = context.topology.replica_rank(context.id).expect("a replica has a rank") as u32;
        let restored = Durability::restored(&durable);
        let config = context.config.clone();
        let proposers = initial_proposers(&config, replicas.len());
        let schedule = Schedule::new(0, proposers.clone());
        let next_propose = schedule.is_proposer(rank).then(|| schedule.next_owned(rank, 0));
        let log = ReplicaLog::new(Entry { view: 0, value: Value::ViewInit { proposers } });
        let n = replicas.len();
        Replica {
            id: context.id,
            rank,
            flaw,
            quorum: n / 2 + 1,
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            status: if restored.is_some() { Status::Recovering } else { Status::Booting },
            log,
            vs: ViewState {
                view: 0,
                role: ViewRole::Follower,
                voted_for: None,
                voted_by: BTreeSet::new(),
                schedule: Some(schedule),
                announced_base: None,
                view_init_committed: true,
                progress_ns: 0,
                timeout_ns: config.view_change_timeout_ns,
                counter_candidacy: None,
            },
            acks: Acks { acked: vec![0; n], last_ack: 0, last_commit: 0 },
            proposing: Proposing { next_propose, cmds: VecDeque::new(), latest_proposed: 0 },
            exec: Execution {
                state_machine: (context.new_state_machine)(),
                table: ClientTable::new(config.client_table_max, config.client_window),
                executed: 0,
                ops: 0,
                waiting: BTreeMap::new(),
            },
            rounds: Rounds { responsive: config.mode == Mode::Responsive, ..Rounds::default() },
            repair: super::recovery::Repair::default(),
            heard_ns: vec![0; n],
            durability: restored.map_or_else(Durability::default, |(view, ack_limit)| Durability {
                ack_limit,
                fresh_from: view + 1,
                need: ack_limit,
                ..Durability::default()
            }),
            stats: NodeStats::default(),
            replicas,
            others,
            config,
        }
    }

    /// The current view.
    pub fn view(&self) -> u64 {
        self.vs.view
    }

    /// The role in the view.
    pub fn role(&self) -> ViewRole {
        self.vs.role
    }

    /// The log.
    pub fn log(&self) -> &ReplicaLog {
        &self.log
    }

    /// Acks and commit.
    pub fn acks(&self) -> &Acks {
        &self.acks
    }

    /// The view's schedule, if known.
    pub fn schedule(&self) -> Option<&Schedule> {
        self.vs.schedule.as_ref()
    }

    /// The next slot we will propose in.
    pub fn next_propose(&self) -> Option<u64> {
        self.proposing.next_propose
    }

    /// The last slot executed.
    pub fn executed(&self) -> u64 {
        self.exec.executed
    }

    /// Whether the replica runs in responsive mode now.
    pub fn is_responsive(&self) -> bool {
        self.rounds.responsive
    }

    /// Switches between pulsing and responsive mode (the adaptive rule, or a test).
    pub fn set_responsive(&mut self, responsive: bool, out: &mut Outbox<Chora>) {
        if self.rounds.responsive == responsive {
            return;
        }
        self.rounds.responsive = responsive;
        self.stats.count(if responsive { "switch_to_responsive" } else { "switch_to_pulsing" });
        if !responsive || self.config.mode == Mode::Adaptive {
            out.set_timer(Timer::Round, self.config.round_ns);
        }
    }

    pub(super) fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.replicas.iter().position(|&r| r == node)
    }

    /// The highest slot a peer's word may make us treat as proposed: `2 · ack_reserve` past our
    /// commit, the reach a restarted replica's state request may claim (`on_state_request`).
    ///
    /// Why (issue 20): an idle proposer skips every slot of its own up to the latest proposed
    /// slot, and a skip fills the sender's slots of its range, so a lying peer's slot far
    /// ahead would cost a walk and log entries without end. Below the horizon a skip walks at
    /// most `2 · ack_reserve` slots past our commit, once (the latest only moves on when the
    /// commit does). An honest run changes only where a replica's commit lags a proposal it
    /// hears of by more than the horizon (a replica that lags by `log_keep / 2` fetches a
    /// snapshot instead, `check_lag`): it then skips and fills in stretches as its commit
    /// moves, and what it gives up and learns is the same (docs/protocols/chora.md).
    pub(super) fn latest_horizon(&self) -> u64 {
        self.acks.last_commit.saturating_add(2 * self.config.ack_reserve)
    }

    /// A peer says `slot` was proposed in our view: the latest proposed slot follows, up to
    /// the horizon (`latest_horizon`).
    fn hear_proposed(&mut self, slot: u64) {
        let horizon = self.latest_horizon();
        if slot > horizon {
            self.stats.count("latest_clamped");
        }
        self.proposing.latest_proposed = self.proposing.latest_proposed.max(slot.min(horizon));
    }

    // ---- clients ---------------------------------------------------------------------------

    fn on_request(&mut self, from: NodeId, request: Arc<Request>, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        if self.rank_of(from).is_some() {
            return Err("request from a replica");
        }
        match self.exec.table.lookup(request.id, request.acked_below) {
            Lookup::Executed(result) => {
                out.send(from, Message::Reply { id: request.id, result: result.clone() });
                return Ok(());
            }
            Lookup::Old => return Err("request below the client's mark"),
            Lookup::BeyondWindow => return Err("request beyond the client's window"),
            Lookup::New => {}
        }
        if self.exec.waiting.len() >= WAITING_MAX && !self.exec.waiting.contains_key(&request.id) {
            return Err("too many requests waiting");
        }
        self.exec.waiting.insert(request.id, from);
        self.take_command(request, out)
    }

    fn on_forward(&mut self, from: NodeId, request: Arc<Request>, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        if self.rank_of(from).is_none() {
            return Err("forward not from a replica");
        }
        if !self.is_proposer() {
            return Err("forward to a replica that owns no slots");
        }
        self.take_command(request, out)
    }

    /// True when we own slots in the current view's schedule.
    pub(super) fn is_proposer(&self) -> bool {
        self.vs.schedule.as_ref().is_some_and(|s| s.is_proposer(self.rank))
    }

    /// [`Replica::take_command`] for the view change.
    pub(super) fn take_command_pub(&mut self, request: Arc<Request>, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        self.take_command(request, out)
    }

    /// Queues a request for our next slot, or forwards it to a proposer if we own none.
    fn take_command(&mut self, request: Arc<Request>, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        if let Some(schedule) = &self.vs.schedule
            && !schedule.is_proposer(self.rank)
        {
            // §6.7.2 leaves non-proposers' requests open: hand them to a proposer chosen by
            // the client, so one client's requests keep their order.
            let index = (request.id.client.0 % schedule.proposers.len() as u64) as usize;
            let to = self.replicas[schedule.proposers[index] as usize];
            out.send(to, Message::Forward(request));
            return Ok(());
        }
        if self.proposing.cmds.iter().any(|queued| queued.id == request.id) {
            return Err("request queued already");
        }
        if self.proposing.cmds.len() >= self.config.cmds_max {
            return Err("command buffer full");
        }
        self.proposing.cmds.push_back(request);
        Ok(())
    }

    // ---- pulses ----------------------------------------------------------------------------

    /// Builds our pulse: the proposal for our next slot (or a skip), our ack and whatever
    /// repair is pending. `None` while we have no schedule to speak in.
    pub(super) fn build_pulse(&mut self) -> Option<Pulse> {
        let schedule = self.vs.schedule.clone()?;
        let mut pulse = Pulse {
            view: self.vs.view,
            base: schedule.base,
            ack: 0,
            latest_proposed: 0,
            proposal: None,
            skip: None,
            nack: self.repair.nack.take(),
            recovers: std::mem::take(&mut self.repair.recovers).into_iter().collect(),
        };
        let resend = !self.rounds.responsive || std::mem::take(&mut self.repair.resend_view_init);
        if self.vs.role == ViewRole::Initiator && !self.vs.view_init_committed && resend {
            // The view-init goes out until it commits (§6.5): followers that missed it get it.
            // Pulsing: in every round's pulse; responsive: when elected, then at each
            // coordination timeout (every pulse would resend it after every input).
            let entry = self.log.get(schedule.base).expect("the initiator holds its view-init").clone();
            pulse.proposal = Some((schedule.base, entry));
        } else if let Some(next) = self.proposing.next_propose {
            assert!(self.vs.view_init_committed, "proposing waits for the view-init to commit");
            self.propose_into(&mut pulse, &schedule, next);
        }
        self.advance_ack();
        pulse.ack = self.own_ack();
        pulse.latest_proposed = self.proposing.latest_proposed;
        Some(pulse)
    }

    /// Fills the pulse's proposal and skip from `next`, our next slot.
    fn propose_into(&mut self, pulse: &mut Pulse, schedule: &Schedule, next: u64) {
        let view = self.vs.view;
        let mut next = next;
        if !self.proposing.cmds.is_empty() {
            let take = ordo_core::batch_len(self.proposing.cmds.iter().map(|r| &r.command), self.config.batch_max);
            let requests: Vec<Arc<Request>> = self.proposing.cmds.drain(..take).collect();
            let entry = Entry { view, value: Value::Requests(requests) };
            self.append_own(next, entry.clone());
            pulse.proposal = Some((next, entry));
            next = schedule.next_owned(self.rank, next);
        }
        // Skip (§6.7.1): an idle proposer gives up its slots up to the latest proposed one, and
        // a busy one that lags by more than two rounds catches up the same way.
        let lag_slots = 2 * schedule.proposers.len() as u64;
        let idle = pulse.proposal.is_none();
        let latest = self.proposing.latest_proposed;
        if next <= latest && (idle || latest - next >= lag_slots) {
            let until = latest;
            let mut slot = next;
            while slot <= until {
                self.append_own(slot, Entry { view, value: Value::NoOp });
                slot = schedule.next_owned(self.rank, slot);
            }
            pulse.skip = Some((next, until));
            self.stats.count("skip");
            next = slot;
        }
        self.proposing.next_propose = Some(next);
    }

    /// Writes our own proposal into our log and reports it.
    fn append_own(&mut self, slot: u64, entry: Entry) {
        assert!(self.log.get(slot).is_none(), "we propose each of our slots once (Fact 1)");
        assert_eq!(self.vs.schedule.as_ref().and_then(|s| s.owner(slot)), Some(self.rank), "only our own slots");
        self.repair.pending_observations.push(Observation::Proposed {
            slot,
            view: entry.view,
            value: entry.value_id(),
            owner: self.rank,
        });
        self.log.insert(slot, entry);
        self.proposing.latest_proposed = self.proposing.latest_proposed.max(slot);
    }

    /// Sends `pulse` to every other replica.
    pub(super) fn send_pulse(&mut self, pulse: Pulse, out: &mut Outbox<Chora>) {
        for observation in std::mem::take(&mut self.repair.pending_observations) {
            self.observe_in_view(observation, out);
        }
        self.rounds.pulses_this_round += 1;
        self.rounds.rounds_since_pulse = 0;
        self.rounds.last_sent = (pulse.ack, pulse.latest_proposed);
        if !self.rounds.responsive {
            assert!(self.rounds.pulses_this_round <= 1, "one multicast per round in pulsing mode (§4.4)");
        }
        if pulse.nack.is_some() {
            self.stats.count("nack");
        }
        if !pulse.recovers.is_empty() {
            self.stats.count("recover");
        }
        self.multicast_in_view(Message::Pulse(Box::new(pulse)), out);
    }

    /// True when a pulse says nothing its predecessor did not.
    fn is_idle(&self, pulse: &Pulse) -> bool {
        pulse.proposal.is_none()
            && pulse.skip.is_none()
            && pulse.nack.is_none()
            && pulse.recovers.is_empty()
            && (pulse.ack, pulse.latest_proposed) == self.rounds.last_sent
    }

    /// The round boundary: the pulse of this round (pulsing mode), or a heartbeat.
    fn on_round(&mut self, now: u64, out: &mut Outbox<Chora>) {
        self.adapt_mode(out);
        self.rounds.pulses_this_round = 0;
        self.rounds.rounds_since_pulse += 1;
        if self.rounds.responsive {
            if self.config.mode == Mode::Adaptive {
                out.set_timer(Timer::Round, self.config.round_ns);
            }
            return;
        }
        out.set_timer(Timer::Round, self.config.round_ns);
        let Some(pulse) = self.build_pulse() else { return };
        let heartbeat = self.rounds.rounds_since_pulse >= self.config.heartbeat_rounds;
        if !self.is_idle(&pulse) || heartbeat {
            self.send_pulse(pulse, out);
        } else {
            self.restore_unsent(pulse);
        }
        self.after_progress(now, out);
    }

    /// A pulse we did not send gives back what it took.
    fn restore_unsent(&mut self, pulse: Pulse) {
        assert!(pulse.proposal.is_none() && pulse.skip.is_none(), "an idle pulse proposes nothing");
        self.repair.nack = pulse.nack;
        self.repair.recovers.extend(pulse.recovers);
    }

    /// Responsive mode: after any input, send what there is to say (§6.4): one pulse per fresh
    /// proposal, or one carrying the ack, skip or repair.
    pub(super) fn flush_responsive(&mut self, out: &mut Outbox<Chora>) {
        if !self.rounds.responsive || self.status != Status::Running {
            return;
        }
        for _ in 0..=self.config.cmds_max {
            let Some(pulse) = self.build_pulse() else { return };
            if self.is_idle(&pulse) {
                self.restore_unsent(pulse);
                return;
            }
            let proposed = pulse.proposal.is_some();
            self.send_pulse(pulse, out);
            if !proposed || self.proposing.cmds.is_empty() {
                return;
            }
        }
    }

    /// Adaptive mode: the switching rule of docs/protocols/chora.md.
    fn adapt_mode(&mut self, out: &mut Outbox<Chora>) {
        if self.config.mode != Mode::Adaptive {
            return;
        }
        let Some(schedule) = &self.vs.schedule else { return };
        let expected = schedule.proposers.iter().filter(|&&p| p != self.rank).count();
        let complete = self.rounds.heard_this_round.len() >= expected;
        self.rounds.heard_this_round.clear();
        self.rounds.window.push_back(complete);
        const WINDOW: usize = 100;
        if self.rounds.window.len() > WINDOW {
            self.rounds.window.pop_front();
        }
        if self.rounds.window.len() < WINDOW {
            return;
        }
        let percent = self.rounds.window.iter().filter(|&&c| c).count() as u64 * 100 / WINDOW as u64;
        let threshold = self.config.switch_threshold_percent;
        // Hysteresis: return to pulsing only well above the threshold, so a replica near it
        // does not flap.
        if !self.rounds.responsive && percent < threshold {
            self.rounds.window.clear();
            self.set_responsive(true, out);
        } else if self.rounds.responsive && percent >= (threshold + 20).min(100) {
            self.rounds.window.clear();
            self.set_responsive(false, out);
        }
    }

    // ---- receiving ---------------------------------------------------------------------------

    fn on_pulse(&mut self, now: u64, from: NodeId, pulse: Pulse, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        let rank = self.rank_of(from).ok_or("pulse not from a replica")?;
        if rank == self.rank as usize {
            return Err("pulse from ourselves");
        }
        if pulse.view < self.vs.view {
            return Err("pulse of an older view");
        }
        if pulse.ack > pulse.latest_proposed.max(pulse.base) {
            return Err("ack beyond the latest proposed slot");
        }
        if pulse.view > self.vs.view {
            // A pulse comes only from a replica that knows the view's schedule: an initiator
            // was elected, so we follow it (§6.5).
            self.adopt_view(now, pulse.view, out);
        }
        self.heard_ns[rank] = now;
        self.rounds.heard_this_round.insert(rank as u32);
        if self.vs.role == ViewRole::Candidate && (pulse.proposal.is_some() || !pulse.recovers.is_empty()) {
            // Someone else's view-init was proposed in our view: we lost (§6.5).
            self.vs.role = ViewRole::Follower;
        }
        if self.vs.schedule.is_none() && pulse.base > self.acks.last_commit {
            self.vs.announced_base = Some(pulse.base);
        }
        self.acks.acked[rank] = self.acks.acked[rank].max(pulse.ack);
        let ack_before = self.acks.last_ack;
        if let Some((slot, entry)) = pulse.proposal {
            self.on_entry(rank, slot, entry, true, out);
        }
        if let Some((start, until)) = pulse.skip {
            self.on_skip(rank as u32, start, until, pulse.view);
        }
        for (slot, entry) in pulse.recovers {
            self.on_entry(rank, slot, entry, false, out);
        }
        if self.vs.schedule.is_some() {
            self.hear_proposed(pulse.latest_proposed);
        }
        if let Some((start, until)) = pulse.nack {
            self.on_nack(start, until);
        }
        self.continue_repair(now, ack_before);
        self.after_progress(now, out);
        Ok(())
    }

    /// An entry arrived at `slot`, freshly proposed by `rank` (`fresh`) or sent again.
    fn on_entry(&mut self, rank: usize, slot: u64, entry: Entry, fresh: bool, out: &mut Outbox<Chora>) {
        if entry.view > self.vs.view {
            self.stats.drop_input("entry of a later view");
            return;
        }
        if entry.is_view_init() && entry.view == self.vs.view {
            if let Err(reason) = self.on_view_init(slot, entry, out) {
                self.stats.drop_input(reason);
            }
            return;
        }
        let Some(schedule) = self.vs.schedule.clone() else {
            self.stats.drop_input("entry before the view-init");
            return;
        };
        let result = if entry.view == self.vs.view {
            self.on_current_entry(&schedule, rank, slot, entry, fresh)
        } else {
            self.on_old_entry(&schedule, slot, entry)
        };
        if let Err(reason) = result {
            self.stats.drop_input(reason);
        }
    }

    /// A proposal of the current view (§6.2): stored where it belongs, gaps or not.
    fn on_current_entry(
        &mut self,
        schedule: &Schedule,
        rank: usize,
        slot: u64,
        entry: Entry,
        fresh: bool,
    ) -> Result<(), Dropped> {
        if slot <= schedule.base {
            return Err("current-view entry at or below the view-base");
        }
        if fresh && schedule.owner(slot) != Some(rank as u32) {
            return Err("proposal for a slot its sender does not own");
        }
        if slot < self.log.first() {
            return Err("entry below the truncated log");
        }
        if schedule.owner(slot) == Some(self.rank) && self.proposing.next_propose.is_some_and(|next| slot >= next) {
            // Only we propose our slots of this view, and we have not reached this one: no
            // honest peer holds it (a forged one would make us propose a slot twice, Fact 1).
            return Err("entry at one of our slots not proposed yet");
        }
        if let Some(held) = self.log.get(slot) {
            if held.view == entry.view && held.value_id() != entry.value_id() {
                return Err("a second value for one slot and view");
            }
            return Err("entry held already");
        }
        self.hear_proposed(slot);
        self.log.insert(slot, entry);
        Ok(())
    }

    /// Applies a skip: no-ops at the sender's slots in `start..=until` (§6.7.1), up to the
    /// horizon (`latest_horizon`); slots past it come by repair (nack, recover) if still
    /// missing when our commit gets there.
    fn on_skip(&mut self, rank: u32, start: u64, until: u64, view: u64) {
        let Some(schedule) = self.vs.schedule.clone() else {
            self.stats.drop_input("skip before the view-init");
            return;
        };
        if view != self.vs.view || start <= schedule.base || until < start || schedule.owner(start) != Some(rank) {
            self.stats.drop_input("malformed skip");
            return;
        }
        let mut slot = start;
        while slot <= until.min(self.latest_horizon()) {
            if slot > self.log.first() && self.log.get(slot).is_none() {
                self.log.insert(slot, Entry { view, value: Value::NoOp });
            }
            slot = schedule.next_owned(rank, slot);
        }
        self.hear_proposed(until);
    }

    /// Moves our ack forward over what we hold and have verified (§6.2, §6.5).
    pub(super) fn advance_ack(&mut self) {
        let Some(schedule) = &self.vs.schedule else { return };
        if self.acks.last_ack + 1 == schedule.base && self.log.last_append() >= schedule.base {
            self.acks.last_ack = schedule.base;
        }
        if self.acks.last_ack >= schedule.base {
            self.acks.last_ack = self.acks.last_ack.max(self.log.last_append());
        }
        self.acks.acked[self.rank as usize] = self.own_ack();
    }

    /// The commit rule: the q-th highest ack, once it reaches the view-base (§6.2, §6.5).
    pub(super) fn try_commit(&mut self, now: u64, out: &mut Outbox<Chora>) {
        let Some(schedule) = self.vs.schedule.clone() else { return };
        self.advance_ack();
        let quorum = match self.flaw {
            Flaw::None => self.quorum,
            Flaw::CommitBelowQuorum => self.quorum.saturating_sub(1).max(1),
        };
        // We execute only what we hold: a commit beyond our ack waits until we catch up.
        let candidate = commit_point(&self.acks.acked, quorum).min(self.acks.last_ack);
        if candidate < schedule.base || candidate <= self.acks.last_commit {
            return;
        }
        self.acks.last_commit = candidate;
        self.vs.progress_ns = now;
        if !self.vs.view_init_committed {
            self.on_view_init_committed(&schedule, out);
        }
        self.execute(out);
    }

    /// Executes every committed slot in order and answers the clients we serve.
    fn execute(&mut self, out: &mut Outbox<Chora>) {
        while self.exec.executed < self.acks.last_commit {
            let slot = self.exec.executed + 1;
            let entry = self.log.get(slot).expect("committed slots up to last-ack are held").clone();
            out.observe(Observation::Committed { slot, value: entry.value_id() });
            let mut digest = execution_digest(true, None);
            if let Value::Requests(requests) = &entry.value {
                for request in requests {
                    let result = self.apply(request);
                    if let Some(result) = &result {
                        digest = digest.rotate_left(7) ^ execution_digest(true, Some(result));
                    }
                    if let (Some(result), Some(client)) = (result, self.exec.waiting.remove(&request.id)) {
                        out.send(client, Message::Reply { id: request.id, result });
                    }
                }
                self.stats.slow_path_commits += requests.len() as u64;
            }
            out.observe(Observation::Executed { slot, digest });
            self.exec.executed = slot;
        }
        self.truncate();
    }

    /// Applies one request at most once; `None` when the client no longer needs an answer.
    fn apply(&mut self, request: &Request) -> Option<CommandResult> {
        match self.exec.table.lookup(request.id, request.acked_below) {
            Lookup::Executed(result) => Some(result.clone()),
            Lookup::Old | Lookup::BeyondWindow => None,
            Lookup::New => {
                self.exec.ops += 1;
                let result = self.exec.state_machine.apply(request.id, &request.command);
                self.exec.table.record(request.id, request.acked_below, result.clone(), self.exec.ops);
                self.stats.executed += 1;
                Some(result)
            }
        }
    }

    /// Keeps memory bounded: forgets executed slots older than `log_keep`.
    fn truncate(&mut self) {
        let keep = self.config.log_keep;
        let floor = self.exec.executed.saturating_sub(keep);
        // Truncate in chunks, so a busy log is split rarely.
        if floor > self.log.first() + keep / 4 + 1 {
            self.log.truncate_below(floor);
        }
    }

    /// What follows any input: acks move, commits happen, responsive pulses leave.
    pub(super) fn after_progress(&mut self, now: u64, out: &mut Outbox<Chora>) {
        self.try_commit(now, out);
        self.reserve_acks(out);
        self.flush_responsive(out);
    }

    fn dispatch(&mut self, now: u64, from: NodeId, message: Message, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        match message {
            Message::Request(request) => {
                self.on_request(from, request, out)?;
                self.flush_responsive(out);
                Ok(())
            }
            Message::Forward(request) => {
                self.on_forward(from, request, out)?;
                self.flush_responsive(out);
                Ok(())
            }
            Message::Pulse(pulse) => self.on_pulse(now, from, *pulse, out),
            Message::ViewChangeRequest { view, last_append, last_append_view } => {
                self.on_view_change_request(now, from, view, last_append, last_append_view, out)
            }
            Message::ViewChangeReply { view } => self.on_view_change_reply(now, from, view, out),
            Message::StateRequest { need } => {
                self.on_state_request(from, need, out)?;
                self.after_progress(now, out);
                Ok(())
            }
            Message::StateReply(snapshot) => self.on_state_reply(now, *snapshot, out),
            Message::Reply { .. } => Err("reply sent to a replica"),
        }
    }
}

impl Node<Chora> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<Chora>) {
        if self.status == Status::Recovering {
            self.stats.count("restarted");
            let need = self.durability.need;
            self.request_state(now.local_ns, need, out);
            out.set_timer(Timer::Coordination, self.config.coordination_ns);
            return;
        }
        self.persist_view(out);
        self.reserve_acks(out);
        self.durability.boot = out.last_ticket();
    }

    fn on_durable(&mut self, now: ClockReading, through: PersistTicket, out: &mut Outbox<Chora>) {
        self.on_written(through, out);
        if self.status == Status::Booting && self.durability.boot.is_some_and(|ticket| ticket <= through) {
            // Taking part before the first record is durable would let a crash erase the fact
            // that this replica ever voted, proposed or acked (a restart must recover).
            self.status = Status::Running;
            self.vs.progress_ns = now.local_ns;
            self.heard_ns.fill(now.local_ns);
            self.vs.timeout_ns = self.random_timeout();
            self.start_timers(out);
        }
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Chora>) {
        if message.highest_number() > NUMBER_MAX {
            self.stats.drop_input("number out of range");
            return;
        }
        let handled = match (self.status, message) {
            (Status::Recovering, Message::StateReply(snapshot)) => self.on_state_reply(now.local_ns, *snapshot, out),
            (Status::Recovering, _) => Err("recovering"),
            (Status::Booting, _) => Err("booting"),
            (Status::Running, message) => self.dispatch(now.local_ns, from, message, out),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Chora>) {
        let now = now.local_ns;
        if self.status == Status::Recovering && timer == Timer::Coordination {
            // Ask again until a snapshot reaches what we may have acked.
            let need = self.durability.need;
            self.request_state(now, need, out);
            out.set_timer(Timer::Coordination, self.config.coordination_ns);
        }
        if self.status != Status::Running {
            return;
        }
        match timer {
            Timer::Round => self.on_round(now, out),
            Timer::Coordination => {
                self.check_lag(now, out);
                self.on_coordination(now);
                self.flush_responsive(out);
                out.set_timer(Timer::Coordination, self.config.coordination_ns);
            }
            Timer::Watchdog => {
                self.on_counter_candidacy_due(now, out);
                self.on_watchdog(now, out);
                self.maybe_rejoin(now, out);
                out.set_timer(Timer::Watchdog, self.config.coordination_ns);
            }
            Timer::ClientRetry => self.stats.drop_input("timer not for a replica"),
        }
    }

    fn check_invariants(&self) {
        if self.status == Status::Recovering {
            assert_eq!(self.exec.executed, 0, "a recovering replica executes nothing");
            return;
        }
        let acks = &self.acks;
        assert!(acks.last_commit <= acks.last_ack, "we commit only what we hold and verified");
        assert!(acks.last_ack <= self.log.last_append(), "last-ack ≤ last-append (§6.1)");
        let own = acks.acked[self.rank as usize];
        assert!(own <= self.durability.ack_limit, "no ack counts above the durable ack limit");
        assert_eq!(self.exec.executed, acks.last_commit, "committed slots execute at once");
        assert!(self.log.first() <= self.exec.executed, "only executed slots are truncated");
        if !self.vs.view_init_committed {
            assert!(self.proposing.next_propose.is_none(), "no proposing during a view change (§6.5)");
        }
        if let Some(schedule) = &self.vs.schedule {
            assert!(schedule.base <= self.log.last_slot(), "the view-init is in the log");
            if self.vs.view_init_committed {
                assert!(acks.last_commit >= schedule.base, "a committed view-init commits its prefix");
            }
            if let Some(next) = self.proposing.next_propose {
                assert_eq!(schedule.owner(next), Some(self.rank), "we propose only in our own slots");
            }
        }
        if self.vs.role != ViewRole::Follower {
            assert_eq!(self.vs.voted_for, Some(self.id), "a candidate voted for itself");
        }
        assert!(self.proposing.cmds.len() <= self.config.cmds_max, "the command buffer is bounded");
        assert!(self.exec.waiting.len() <= WAITING_MAX, "waiting requests are bounded");
        assert!(self.log.len() as u64 <= 4 * self.config.log_keep + 4 * self.config.cmds_max as u64 + 1_000_000);
        self.log.check_invariants();
        self.repair.check(self.config.recover_max);
    }

    fn is_recovering(&self) -> bool {
        self.status == Status::Recovering
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        (self.status != Status::Recovering).then(|| self.exec.state_machine.as_ref())
    }

    fn status(&self) -> String {
        let role = match self.vs.role {
            ViewRole::Follower => "follower",
            ViewRole::Candidate => "candidate",
            ViewRole::Initiator => "initiator",
        };
        let mode = if self.rounds.responsive { "responsive" } else { "pulsing" };
        let (base, proposers) =
            self.vs.schedule.as_ref().map_or((None, Vec::new()), |s| (Some(s.base), s.proposers.clone()));
        format!(
            "view={} {role} {mode} base={base:?} ack={} append={} commit={} next={:?} proposers={proposers:?}",
            self.vs.view,
            self.acks.last_ack,
            self.log.last_append(),
            self.acks.last_commit,
            self.proposing.next_propose,
        )
    }
}
