//! The replica: state, dispatch, normal operations (§5.2.1), execution, the tick and invariants.
//! Gap agreement lives in `gap_agreement.rs`, view changes in `view_change.rs`, synchronisation
//! in `sync.rs`.

use super::checker::Observation;
use super::execution::{Applied, Execution};
use super::gap_agreement::{Deferred, Gap, LookupAhead};
use super::log::{Checkpoint, Log};
use super::messages::{Entry, Message, Request, ViewId};
use super::oum::{Delivery, Discard, OumReceiver};
use super::recovery::RecoveryProgress;
use super::sync::SyncState;
use super::view_change::ViewChangeState;
use super::{Config, Durable, Flaw, NoPaxos, Timer};
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode,
    PersistTicket, Role, StateMachine,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// What a replica is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for its launch record to be durable before it takes part.
    Booting,
    /// Processing requests in its view.
    Normal,
    /// Changing view.
    ViewChange,
    /// Restarted after a crash: rebuilding its state from its peers before it takes part
    /// again (§5.2.5, `recovery.rs`).
    Recovering,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Booting => "booting",
            Status::Normal => "normal",
            Status::ViewChange => "view-change",
            Status::Recovering => "recovering",
        }
    }
}

/// Why a replica ignored an input (counted in `NodeStats::dropped` under [`DropReason::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// libOUM discarded a stamped request.
    Oum(Discard),
    /// "stamped request not from a sequencer".
    StampedRequestNotFromASequencer,
    /// "message not for a replica".
    MessageNotForAReplica,
    /// "sender is not another replica".
    SenderIsNotAnotherReplica,
    /// "message of another view".
    MessageOfAnotherView,
    /// "not normal".
    NotNormal,
    /// "recovering".
    Recovering,
    /// "recovery response while not recovering".
    RecoveryResponseWhileNotRecovering,
    /// "recovery response of another incarnation".
    RecoveryResponseOfAnotherIncarnation,
    /// "malformed recovery response".
    MalformedRecoveryResponse,
    /// "malformed checkpoint".
    MalformedCheckpoint,
    /// "booting".
    Booting,
    /// "slot 0 does not exist".
    Slot0DoesNotExist,
    /// "slot content not from the leader".
    SlotContentNotFromTheLeader,
    /// "slot content not waited for".
    SlotContentNotWaitedFor,
    /// "gap find not from the leader".
    GapFindNotFromTheLeader,
    /// "gap found while not searching".
    GapFoundWhileNotSearching,
    /// "gap found for another slot".
    GapFoundForAnotherSlot,
    /// "gap commit not from the leader".
    GapCommitNotFromTheLeader,
    /// "gap commit ahead of the log".
    GapCommitAheadOfTheLog,
    /// "gap commit at a synchronised request".
    GapCommitAtASynchronisedRequest,
    /// "gap commit rep while not committing".
    GapCommitRepWhileNotCommitting,
    /// "gap commit rep for another slot".
    GapCommitRepForAnotherSlot,
    /// "view-change-req not above our view".
    ViewChangeReqNotAboveOurView,
    /// "malformed view-change".
    MalformedViewChange,
    /// "view-change for another view".
    ViewChangeForAnotherView,
    /// "view-change for a view another replica leads".
    ViewChangeForAViewAnotherReplicaLeads,
    /// "not changing view".
    NotChangingView,
    /// "start-view not from the view's leader".
    StartViewNotFromTheViewSLeader,
    /// "malformed start-view".
    MalformedStartView,
    /// "start-view of the current view".
    StartViewOfTheCurrentView,
    /// "start-view of an older or incomparable view".
    StartViewOfAnOlderOrIncomparableView,
    /// "start-view ack not for our started view".
    StartViewAckNotForOurStartedView,
    /// "sync-prepare not from the leader".
    SyncPrepareNotFromTheLeader,
    /// "malformed sync-prepare".
    MalformedSyncPrepare,
    /// "sync-prepare beyond the log".
    SyncPrepareBeyondTheLog,
    /// "sync-prepare from beyond what we agreed".
    SyncPrepareFromBeyondWhatWeAgreed,
    /// "sync-rep at a follower".
    SyncRepAtAFollower,
    /// "sync-rep beyond the log".
    SyncRepBeyondTheLog,
    /// "sync-commit not from the leader".
    SyncCommitNotFromTheLeader,
    /// "number out of range": a view, session, slot or position above [`NUMBER_MAX`].
    NumberOutOfRange,
}

// NUMBER_MAX (shared) bounds the view number, session number, slot or message number a replica
// accepts from a peer. Each grows by one per view change, session or request, so no cluster reaches
// it; below it, `+ 1` on a number that came from a peer cannot overflow.
pub use crate::NUMBER_MAX;

/// The highest view, session, slot or message number `message` carries (logs included), checked
/// against [`NUMBER_MAX`] before any handler adds to it.
fn highest_number(message: &Message) -> u64 {
    let view = |view: &ViewId| view.leader_num.max(view.session_num);
    let log = |log: &super::log::Log| log.base().saturating_add(log.held() as u64);
    match message {
        Message::Request(_) | Message::Ping => 0,
        Message::Stamped { session, seq, .. } => (*session).max(*seq),
        Message::Reply { view: v, slot, .. }
        | Message::SlotLookup { view: v, slot }
        | Message::SlotContent { view: v, slot, .. }
        | Message::SlotMissing { view: v, slot }
        | Message::GapFind { view: v, slot }
        | Message::GapFound { view: v, slot, .. }
        | Message::GapCommit { view: v, slot }
        | Message::GapCommitRep { view: v, slot } => view(v).max(*slot),
        Message::ViewChangeReq { view: v } | Message::StartViewAck { view: v } => view(v),
        Message::ViewChange { view: v, last_normal, session_msg_num, log: l } => {
            view(v).max(view(last_normal)).max(*session_msg_num).max(log(l))
        }
        Message::StartView { view: v, session_msg_num, log: l } => view(v).max(*session_msg_num).max(log(l)),
        Message::SyncPrepare { view: v, from, through, no_ops } => {
            view(v).max(*from).max(*through).max(no_ops.iter().copied().max().unwrap_or(0))
        }
        Message::SyncRep { view: v, through } | Message::SyncCommit { view: v, through } => view(v).max(*through),
        Message::Recovery { .. } => 0,
        Message::RecoveryResponse { view: v, state, .. } => view(v)
            .max(state.as_ref().map_or(0, |state| state.session_msg_num.max(state.sync_point).max(log(&state.log)))),
        Message::Pong { session, .. } => session.unwrap_or(0),
        Message::SetSession { session, .. } => *session,
    }
}

impl DropReason {
    /// The counter name.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Oum(discard) => discard.name(),
            DropReason::NumberOutOfRange => "number out of range",
            DropReason::StampedRequestNotFromASequencer => "stamped request not from a sequencer",
            DropReason::MessageNotForAReplica => "message not for a replica",
            DropReason::SenderIsNotAnotherReplica => "sender is not another replica",
            DropReason::MessageOfAnotherView => "message of another view",
            DropReason::NotNormal => "not normal",
            DropReason::Recovering => "recovering",
            DropReason::RecoveryResponseWhileNotRecovering => "recovery response while not recovering",
            DropReason::RecoveryResponseOfAnotherIncarnation => "recovery response of another incarnation",
            DropReason::MalformedRecoveryResponse => "malformed recovery response",
            DropReason::MalformedCheckpoint => "malformed checkpoint",
            DropReason::Booting => "booting",
            DropReason::Slot0DoesNotExist => "slot 0 does not exist",
            DropReason::SlotContentNotFromTheLeader => "slot content not from the leader",
            DropReason::SlotContentNotWaitedFor => "slot content not waited for",
            DropReason::GapFindNotFromTheLeader => "gap find not from the leader",
            DropReason::GapFoundWhileNotSearching => "gap found while not searching",
            DropReason::GapFoundForAnotherSlot => "gap found for another slot",
            DropReason::GapCommitNotFromTheLeader => "gap commit not from the leader",
            DropReason::GapCommitAheadOfTheLog => "gap commit ahead of the log",
            DropReason::GapCommitAtASynchronisedRequest => "gap commit at a synchronised request",
            DropReason::GapCommitRepWhileNotCommitting => "gap commit rep while not committing",
            DropReason::GapCommitRepForAnotherSlot => "gap commit rep for another slot",
            DropReason::ViewChangeReqNotAboveOurView => "view-change-req not above our view",
            DropReason::MalformedViewChange => "malformed view-change",
            DropReason::ViewChangeForAnotherView => "view-change for another view",
            DropReason::ViewChangeForAViewAnotherReplicaLeads => "view-change for a view another replica leads",
            DropReason::NotChangingView => "not changing view",
            DropReason::StartViewNotFromTheViewSLeader => "start-view not from the view's leader",
            DropReason::MalformedStartView => "malformed start-view",
            DropReason::StartViewOfTheCurrentView => "start-view of the current view",
            DropReason::StartViewOfAnOlderOrIncomparableView => "start-view of an older or incomparable view",
            DropReason::StartViewAckNotForOurStartedView => "start-view ack not for our started view",
            DropReason::SyncPrepareNotFromTheLeader => "sync-prepare not from the leader",
            DropReason::MalformedSyncPrepare => "malformed sync-prepare",
            DropReason::SyncPrepareBeyondTheLog => "sync-prepare beyond the log",
            DropReason::SyncPrepareFromBeyondWhatWeAgreed => "sync-prepare from beyond what we agreed",
            DropReason::SyncRepAtAFollower => "sync-rep at a follower",
            DropReason::SyncRepBeyondTheLog => "sync-rep beyond the log",
            DropReason::SyncCommitNotFromTheLeader => "sync-commit not from the leader",
        }
    }
}

/// The result of a handler: done, or ignored for a reason.
pub type Handled = Result<(), DropReason>;

/// A NOPaxos replica.
pub struct Replica {
    pub(super) id: NodeId,
    pub(super) config: Config,
    pub(super) flaw: Flaw,
    pub(super) replicas: Destinations,
    /// Every replica but this one.
    pub(super) others: Destinations,
    /// Failures tolerated: acknowledgements a leader needs besides its own.
    pub(super) f: usize,
    sequencers: Vec<NodeId>,
    pub(super) rng: ChaCha8Rng,
    pub(super) status: Status,
    pub(super) view: ViewId,
    pub(super) last_normal: ViewId,
    /// The checkpoint and the entries held after it (`log.rs`).
    pub(super) log: Log,
    pub(super) oum: OumReceiver<Arc<Request>>,
    /// `log length − session-msg-num` in this view (I10).
    pub(super) session_base: u64,
    pub(super) exec: Execution,
    /// The committed state at the log's checkpoint (the checkpoint it was built for, and the
    /// state), kept between truncations so that the next one applies only the slots since:
    /// rebuilt from the checkpoint's bytes each time, a million keys were decoded at every
    /// truncation, most of a real replica's time.
    pub(super) at_checkpoint: Option<(Arc<Checkpoint>, Execution)>,
    pub(super) gap: Gap,
    /// Leader: a follower asked about the leader's own next slot (see `gap_agreement.rs`).
    pub(super) lookup_ahead: Option<LookupAhead>,
    /// Lookups and NO-OPs waiting for the log to reach their slot.
    pub(super) deferred: Deferred,
    pub(super) sync: SyncState,
    pub(super) vc: ViewChangeState,
    /// Last time the leader of the view was heard from (followers).
    pub(super) heard_from_leader_ns: u64,
    /// This view's leader-failure timeout (randomised).
    pub(super) leader_timeout_ns: u64,
    /// View changes in a row that timed out: each doubles the next timeouts, up to
    /// `STALLED_VIEWS_MAX` (`view_change.rs`).
    pub(super) stalled_views: u32,
    launch: Option<PersistTicket>,
    /// How many times this replica restarted (persisted; the nonce of its recovery).
    pub(super) incarnation: u64,
    pub(super) recovery: RecoveryProgress,
    pub(super) stats: NodeStats,
}

impl Replica {
    /// A replica, fresh (`durable` empty) or restarted (it recovers from its peers).
    pub(crate) fn new(context: NodeContext<NoPaxos>, durable: Vec<Durable>, flaw: Flaw) -> Self {
        let replicas = context.topology.replicas().clone();
        let others: Destinations = replicas.iter().copied().filter(|&r| r != context.id).collect();
        let launches = durable.iter().filter_map(|record| match record {
            Durable::Launched { incarnation } => Some(*incarnation),
            Durable::Issued { .. } => None,
        });
        let incarnation = launches.max().map_or(0, |last| last + 1);
        let restarted = incarnation > 0;
        let config = context.config.clone();
        Replica {
            id: context.id,
            flaw,
            f: context.topology.f,
            sequencers: context.topology.with_role(Role::Sequencer).collect(),
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            status: if restarted { Status::Recovering } else { Status::Booting },
            view: ViewId::default(),
            last_normal: ViewId::default(),
            log: Log::default(),
            oum: OumReceiver::new(0, config.oum_buffer_max),
            session_base: 0,
            exec: Execution::new(context.new_state_machine, config.client_table_max),
            at_checkpoint: None,
            gap: Gap::None,
            lookup_ahead: None,
            deferred: Deferred::default(),
            sync: SyncState::default(),
            vc: ViewChangeState::default(),
            heard_from_leader_ns: 0,
            leader_timeout_ns: config.view_change_timeout_ns,
            stalled_views: 0,
            launch: None,
            incarnation,
            recovery: RecoveryProgress::default(),
            stats: NodeStats::default(),
            replicas,
            others,
            config,
        }
    }

    /// The leader of `view`.
    pub(super) fn leader_of(&self, view: ViewId) -> NodeId {
        self.replicas[(view.leader_num % self.replicas.len() as u64) as usize]
    }

    /// True when this replica leads its view.
    pub fn is_leader(&self) -> bool {
        self.leader_of(self.view) == self.id
    }

    /// The status.
    pub fn status_kind(&self) -> Status {
        self.status
    }

    /// The view.
    pub fn view(&self) -> ViewId {
        self.view
    }

    /// The gap this replica is resolving, if any.
    pub fn gap(&self) -> &Gap {
        &self.gap
    }

    /// The entries held, from slot `log_base() + 1`.
    pub fn log(&self) -> &[Entry] {
        &self.log.entries
    }

    /// The last slot the log's checkpoint covers (slots up to it are truncated).
    pub fn log_base(&self) -> u64 {
        self.log.base()
    }

    /// OUM positions consumed in the view's session.
    pub fn session_msg_num(&self) -> u64 {
        self.oum.session_msg_num()
    }

    /// The sync-point.
    pub fn sync_point(&self) -> u64 {
        self.sync.sync_point
    }

    /// The last slot executed.
    pub fn executed(&self) -> u64 {
        self.exec.executed()
    }

    pub(super) fn log_len(&self) -> u64 {
        self.log.len()
    }

    /// A fresh randomised timeout in [t/2, 3t/2].
    pub(super) fn random_timeout(&mut self) -> u64 {
        let timeout = self.config.view_change_timeout_ns.saturating_mul(1 << self.stalled_views);
        self.rng.random_range(timeout / 2..=timeout.saturating_add(timeout / 2))
    }

    // ---- normal operations -------------------------------------------------------------

    fn on_stamped(
        &mut self,
        now: u64,
        from: NodeId,
        session: u64,
        seq: u64,
        request: Arc<Request>,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if !self.sequencers.contains(&from) {
            return Err(DropReason::StampedRequestNotFromASequencer);
        }
        self.oum.receive(session, seq, request).map_err(DropReason::Oum)?;
        self.pump(now, out);
        Ok(())
    }

    /// Consumes OUM deliveries while the replica is Normal and no gap holds it back (replicas
    /// always process operations in order, §5.2.2).
    pub(super) fn pump(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        while self.status == Status::Normal {
            if self.serve_deferred(out) {
                continue;
            }
            if self.gap.blocks() {
                break;
            }
            match self.oum.get_message() {
                None => break,
                Some(Delivery::Message { message, .. }) => self.append_request(message, out),
                Some(Delivery::Drop { .. }) => self.on_drop_notification(now, out),
                Some(Delivery::SessionTerminated { session }) => {
                    self.stats.count("session_terminated");
                    let target = self.view.join(ViewId::new(self.view.leader_num, session));
                    self.start_view_change(target, now, out);
                }
            }
        }
    }

    /// Appends a request at the next slot; the leader executes it; replies to its client.
    pub(super) fn append_request(&mut self, request: Arc<Request>, out: &mut Outbox<NoPaxos>) {
        self.log.push(Entry::Request(request.clone()));
        let slot = self.log_len();
        let result = if self.is_leader() { self.execute_through(slot, out) } else { None };
        out.send(request.id.client.node(), Message::Reply { view: self.view, slot, id: request.id, result });
    }

    /// Executes every slot up to `through`; returns the result of the last one if it is a request
    /// (a duplicate answers from the client table, §5.2.1).
    /// Slots under the sync-point are committed: their results are reported to the checker.
    pub(super) fn execute_through(&mut self, through: u64, out: &mut Outbox<NoPaxos>) -> Option<CommandResult> {
        assert!(through <= self.log_len(), "only held entries execute");
        let mut last = None;
        while self.exec.executed() < through {
            let slot = self.exec.executed() + 1;
            let entry = self.log.at(slot);
            last = match self.exec.apply(slot, entry) {
                Applied::NoOp => None,
                Applied::Executed(result) => {
                    self.stats.executed += 1;
                    Some(result)
                }
                Applied::Duplicate(cached) => {
                    self.stats.count("duplicate_in_log");
                    cached
                }
            };
            if let (Some(result), Some(id)) = (&last, entry.id())
                && slot <= self.sync.sync_point
            {
                out.observe(Observation::Executed { slot, id, digest: execution_digest(true, Some(result)) });
            }
        }
        last
    }

    /// The leader's result for the request at `slot`, for a reply after a view change.
    pub(super) fn result_for(&self, slot: u64) -> Option<CommandResult> {
        let id = self.log.at(slot).id()?;
        (self.is_leader() && self.exec.executed() >= slot).then(|| self.exec.cached(id)).flatten()
    }

    /// Discards speculative execution (§5.3, an ousted leader's state): the state goes back to
    /// the log's checkpoint and the committed slots after it are executed again.
    pub(super) fn rewind_state(&mut self, out: &mut Outbox<NoPaxos>) {
        self.stats.count("state_reset");
        self.exec = self.exec.restored(&self.log.checkpoint).expect("a replica's own checkpoint decodes");
        self.execute_through(self.sync.sync_point, out);
    }

    /// Moves the checkpoint up once the sync-point is two intervals past it (see `log.rs`).
    pub(super) fn maybe_truncate(&mut self) {
        let interval = self.config.checkpoint_every(self.log.checkpoint.state.len());
        let base = self.log.base();
        if self.sync.sync_point < base + 2 * interval {
            return;
        }
        let target = self.sync.sync_point - interval;
        // A scratch state at the previous checkpoint: this replica's own state may run ahead of
        // its sync-point (a leader's), and a checkpoint holds committed slots only. The one kept
        // from our last truncation serves unless a view change or transfer replaced the log.
        let mut scratch = match self.at_checkpoint.take() {
            Some((built_for, kept)) if Arc::ptr_eq(&built_for, &self.log.checkpoint) => kept,
            _ => self.exec.restored(&self.log.checkpoint).expect("a replica's own checkpoint decodes"),
        };
        for slot in base + 1..=target {
            scratch.apply(slot, self.log.at(slot));
        }
        self.log.truncate(scratch.checkpoint());
        self.at_checkpoint = Some((self.log.checkpoint.clone(), scratch));
        self.stats.count("log_truncated");
    }

    /// The leader's current log with the OUM position that goes with it, as a `StartView` of
    /// its view: for a replica that missed the view's start or fell behind the checkpoint.
    /// Every entry appended since the view started is the leader's, at the position the
    /// receiver would have taken it, so this is the `StartView` plus what the receiver would
    /// have logged since (a state transfer).
    pub(super) fn current_log_message(&self) -> Message {
        let session_msg_num = self.log_len() - self.session_base;
        Message::StartView { view: self.view, session_msg_num, log: Arc::new(self.log.clone()) }
    }

    /// Reports slots `from + 1 ..= through` of this log as committed.
    pub(super) fn observe_committed(&self, from: u64, through: u64, out: &mut Outbox<NoPaxos>) {
        for slot in from + 1..=through {
            out.observe(Observation::Committed { slot, id: self.log.at(slot).id() });
        }
    }

    // ---- dispatch ----------------------------------------------------------------------

    fn dispatch(&mut self, now: u64, from: NodeId, message: Message, out: &mut Outbox<NoPaxos>) -> Handled {
        match message {
            Message::Stamped { session, seq, request } => self.on_stamped(now, from, session, seq, request, out),
            Message::SlotLookup { view, slot } => self.on_slot_lookup(now, from, view, slot, out),
            Message::SlotContent { view, slot, entry } => self.on_slot_content(now, from, view, slot, entry, out),
            Message::SlotMissing { view, slot } => self.on_slot_missing(from, view, slot, out),
            Message::GapFind { view, slot } => self.on_gap_find(now, from, view, slot, out),
            Message::GapFound { view, slot, request } => self.on_gap_found(now, from, view, slot, request, out),
            Message::GapCommit { view, slot } => self.on_gap_commit(now, from, view, slot, out),
            Message::GapCommitRep { view, slot } => self.on_gap_commit_rep(now, from, view, slot, out),
            Message::ViewChangeReq { view } => self.on_view_change_req(now, from, view, out),
            Message::ViewChange { view, last_normal, session_msg_num, log } => {
                self.on_view_change(now, from, view, last_normal, session_msg_num, log, out)
            }
            Message::StartView { view, session_msg_num, log } => {
                self.on_start_view(now, from, view, session_msg_num, log, out)
            }
            Message::StartViewAck { view } => self.on_start_view_ack(from, view),
            Message::SyncPrepare { view, from: start, through, no_ops } => {
                self.on_sync_prepare(now, from, view, start, through, &no_ops, out)
            }
            Message::SyncRep { view, through } => self.on_sync_rep(now, from, view, through, out),
            Message::SyncCommit { view, through } => self.on_sync_commit(now, from, view, through, out),
            Message::Recovery { nonce } => self.on_recovery(from, nonce, out),
            Message::RecoveryResponse { view, nonce, state } => {
                self.on_recovery_response(now, from, view, nonce, state, out)
            }
            _ => Err(DropReason::MessageNotForAReplica),
        }
    }

    /// Guard for the normal-case sub-protocols: a replica peer in our view while we are Normal
    /// (§5.2: replicas ignore messages from other views, I13).
    /// A message of our view that only its leader may send: checks both (dropping with
    /// `not_from_leader` otherwise) and notes that the leader was heard from.
    pub(super) fn check_from_leader(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        not_from_leader: DropReason,
    ) -> Handled {
        self.in_view(from, view)?;
        if from != self.leader_of(view) {
            return Err(not_from_leader);
        }
        self.heard_from_leader_ns = now;
        Ok(())
    }

    pub(super) fn in_view(&self, from: NodeId, view: ViewId) -> Handled {
        if !self.replicas.contains(&from) || from == self.id {
            return Err(DropReason::SenderIsNotAnotherReplica);
        }
        if view != self.view {
            return Err(DropReason::MessageOfAnotherView);
        }
        if self.status != Status::Normal {
            return Err(DropReason::NotNormal);
        }
        Ok(())
    }

    fn on_tick(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        // A high-water mark, not a count: the most entries this replica held at a tick.
        let held = self.log.held() as u64;
        let high_water = self.stats.events.entry("log_held_max").or_default();
        *high_water = (*high_water).max(held);
        match self.status {
            Status::Normal if self.is_leader() => {
                self.send_sync_prepares(out);
                self.resend_start_view(now, out);
                self.gap_tick(now, out);
            }
            Status::Normal => {
                if now.saturating_sub(self.heard_from_leader_ns) > self.leader_timeout_ns {
                    self.stats.count("leader_suspected");
                    let next = ViewId::new(self.view.leader_num + 1, self.view.session_num);
                    self.start_view_change(next, now, out);
                } else {
                    self.gap_tick(now, out);
                }
            }
            Status::ViewChange => self.view_change_tick(now, out),
            Status::Recovering => self.recovery_tick(now, out),
            Status::Booting => {}
        }
        self.pump(now, out);
    }
}

impl Node<NoPaxos> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<NoPaxos>) {
        // Appended, not replaced, though only the latest matters: one small record per restart,
        // and the runtime reports a replacing write durable only with a later append (its
        // group commit skips a node whose storage is not dirty).
        self.launch = Some(out.persist(Durable::Launched { incarnation: self.incarnation }, PersistMode::Append));
        self.heard_from_leader_ns = now.local_ns;
        self.leader_timeout_ns = self.random_timeout();
        out.set_timer(Timer::Tick, self.config.heartbeat_ns);
    }

    fn on_durable(&mut self, now: ClockReading, through: PersistTicket, out: &mut Outbox<NoPaxos>) {
        if self.launch.is_none_or(|ticket| ticket > through) {
            return;
        }
        // Taking part before the launch record is durable would let a crash then erase the fact
        // that this replica ever answered (a restart must recover, not start afresh); asking for
        // recovery before it is durable could reuse an earlier incarnation's nonce.
        self.launch = None;
        match self.status {
            Status::Booting => {
                self.status = Status::Normal;
                self.heard_from_leader_ns = now.local_ns;
                self.pump(now.local_ns, out);
            }
            Status::Recovering => self.begin_recovery(now.local_ns, out),
            _ => {}
        }
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<NoPaxos>) {
        if highest_number(&message) > NUMBER_MAX {
            self.stats.drop_input(DropReason::NumberOutOfRange.name());
            return;
        }
        let handled = match self.status {
            // Stamped requests are buffered by libOUM meanwhile; recovery answers are handled.
            Status::Recovering if !matches!(message, Message::Stamped { .. } | Message::RecoveryResponse { .. }) => {
                Err(DropReason::Recovering)
            }
            Status::Booting if !matches!(message, Message::Stamped { .. }) => Err(DropReason::Booting),
            _ => self.dispatch(now.local_ns, from, message, out),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason.name());
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<NoPaxos>) {
        if timer != Timer::Tick {
            self.stats.drop_input("timer not for a replica");
            return;
        }
        self.on_tick(now.local_ns, out);
        out.set_timer(Timer::Tick, self.config.heartbeat_ns);
    }

    fn check_invariants(&self) {
        if self.status == Status::Recovering {
            assert!(self.log.is_empty(), "a recovering replica holds nothing until it installs a state");
            assert_eq!(self.exec.executed(), 0, "a recovering replica executes nothing");
        }
        self.recovery.check(self.others.len());
        assert!(self.exec.executed() <= self.log_len(), "only held entries are executed");
        assert!(self.sync.sync_point <= self.log_len(), "the sync-point lies in the log");
        assert!(self.log.base() <= self.exec.executed(), "the state covers the checkpoint");
        assert!(self.log.base() <= self.sync.sync_point, "only committed slots are truncated");
        let bound = 2 * self.config.checkpoint_every_max() + (self.log_len() - self.sync.sync_point);
        assert!(self.log.held() as u64 <= bound, "bounded log: {} entries held, bound {bound}", self.log.held());
        assert!(self.last_normal.covered_by(self.view), "views never go back (I4)");
        if self.status == Status::Normal {
            assert_eq!(self.last_normal, self.view, "a normal replica's last normal view is its view");
            assert_eq!(self.oum.session(), self.view.session_num, "a normal replica listens to its view's session");
            let consumed_unfilled = u64::from(self.gap.consumed_unfilled());
            assert_eq!(
                self.log_len() + consumed_unfilled,
                self.session_base + self.oum.session_msg_num(),
                "log and OUM position stay aligned (I10)"
            );
            if self.is_leader() {
                assert_eq!(self.exec.executed(), self.log_len(), "the leader executes everything it appends");
            }
        }
        self.gap.check(self.log.len(), self.log.last());
        self.sync.check(self.log_len());
        self.vc.check(self.replicas.len());
        self.oum.check_invariants();
    }

    fn is_recovering(&self) -> bool {
        self.status == Status::Recovering
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// The state for the agreement check, only while it holds committed slots alone: the leader
    /// executes ahead of the sync-point, and an ousted leader's speculative state is discarded
    /// when it adopts the next view's log.
    fn state_machine(&self) -> Option<&dyn StateMachine> {
        let committed_only = self.exec.executed() <= self.sync.sync_point;
        (self.status != Status::Recovering && committed_only).then(|| self.exec.state_machine())
    }

    fn status(&self) -> String {
        let role = if self.is_leader() { "leader" } else { "follower" };
        format!(
            "view={:?} {} {role} log={} smn={} exec={} sync={} gap={}",
            self.view,
            self.status.name(),
            self.log.len(),
            self.oum.session_msg_num(),
            self.exec.executed(),
            self.sync.sync_point,
            self.gap.name()
        )
    }
}
