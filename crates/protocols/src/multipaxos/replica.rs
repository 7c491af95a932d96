//! The replica: its state, message dispatch, the normal case (requests, `Prepare`, `PrepareOk`,
//! `Commit`), execution with checkpoints, timers and invariants. View changes live in
//! `view_change.rs`, state transfer in `state_transfer.rs`, restart in `recovery.rs`.

use super::checker::{Observation, execution_digest};
use super::executor::{Executor, Outcome};
use super::log::Log;
use super::messages::{Entry, Message, Prepare, Snapshot};
use super::recovery::Recovered;
use super::state_transfer::TransferState;
use super::view_change::ViewChangeState;
use super::{Config, Durable, Flaw, MultiPaxos, Timer};
use crate::client_table::Lookup;
use ordo_core::{
    ClockReading, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode, PersistTicket, RequestId,
    StateMachine,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// What a replica is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Processing requests in its view.
    Normal,
    /// Electing the leader of its view.
    ViewChange,
    /// Its view runs without it: fetching the log before it becomes normal.
    Transfer,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Normal => "normal",
            Status::ViewChange => "view-change",
            Status::Transfer => "transfer",
        }
    }
}

/// Why a replica ignored an input (counted in `NodeStats::dropped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A reply or redirect reached a replica.
    ClientMessage,
    /// A replica-only message came from a node that is not another replica.
    NotReplica,
    /// The message belongs to a view older than ours.
    StaleView,
    /// The message belongs to a newer view we have no business in yet.
    FutureView,
    /// The replica is not normal.
    NotNormal,
    /// The replica is not the leader of its view.
    NotLeader,
    /// The message must come from the leader of its view and did not.
    NotFromLeader,
    /// The request is below its client's acknowledgement mark: the client needs no answer.
    OldRequest,
    /// The request is beyond its client's window (a faulty client).
    BeyondWindow,
    /// The request is already in the log or queued, not yet executed.
    AlreadyProposed,
    /// The log holds `log_max` entries.
    LogFull,
    /// The leader's queue holds `pending_max` requests.
    PendingFull,
    /// The message contradicts itself.
    Malformed,
    /// Every entry of the `Prepare` is already held.
    DuplicatePrepare,
    /// Too many out-of-order `Prepare`s are buffered.
    PrepareBufferFull,
    /// A `PrepareOk` for an op the leader does not hold.
    AckBeyondLog,
    /// A message of a higher view: the replica joins that view instead.
    JoiningView,
    /// The leader of our view-change view is already normal: fetch its log instead.
    ViewStartedWithoutUs,
    /// The replica is fetching state and ignores the normal protocol meanwhile.
    Transferring,
    /// The view has started already.
    ViewAlreadyStarted,
    /// A `DoViewChange` for a view another replica leads.
    NotLeaderOfView,
    /// A `StartView` whose log is shorter than what we know is committed.
    StartViewBehindCommit,
    /// The `DoViewChange`s of a view contradict each other: the log with the latest normal view
    /// lacks entries another offer (or we) saw committed. Honest replicas never offer this.
    ContradictoryOffers,
    /// A `GetState` for entries after our op number.
    RequesterAhead,
    /// A `GetState` below our log base while we hold no snapshot for it.
    CannotServe,
    /// A `NewState` we did not ask for.
    UnexpectedState,
    /// A `NewState` that brings nothing new, or out of order.
    StaleTransfer,
    /// A transferred snapshot does not decode.
    SnapshotCorrupt,
    /// A snapshot beyond a leader's own log.
    SnapshotBeyondLog,
    /// A timer that does not concern replicas.
    ForeignTimer,
    /// A view, op or commit number above [`NUMBER_MAX`]: no honest replica gets there, and
    /// `+ 1` on it could overflow (a view of `u64::MAX`, once persisted, failed every restart).
    NumberOutOfRange,
}

// NUMBER_MAX (shared) bounds the view, op number or commit number a replica accepts from a peer.
// Views and ops grow by one per view change or command, so no cluster reaches it; below it, `+ 1`
// on a number that came from a peer (or was adopted from one) cannot overflow.
pub use crate::NUMBER_MAX;

/// Checks the views and op numbers a message carries against [`NUMBER_MAX`], before any
/// handler adds to them.
fn check_numbers(message: &Message) -> Result<(), DropReason> {
    let numbers: [u64; 4] = match message {
        Message::Request { .. } | Message::Reply { .. } => [0; 4],
        Message::Redirect { view } | Message::StartViewChange { view } => [*view, 0, 0, 0],
        Message::Prepare(p) => [p.view, p.op_number, p.commit_number, 0],
        Message::PrepareOk { view, op_number } | Message::GetState { view, op_number } => [*view, *op_number, 0, 0],
        Message::Commit { view, commit_number } => [*view, *commit_number, 0, 0],
        Message::DoViewChange(d) => [d.view.max(d.last_normal_view), d.op_number, d.commit_number, d.log_base],
        Message::StartView(s) => [s.view, s.op_number, s.commit_number, s.log_base],
        Message::NewState(n) => {
            [n.view, n.op_number.max(n.commit_number), n.after, n.snapshot.as_ref().map_or(0, |snapshot| snapshot.op)]
        }
    };
    if numbers.iter().any(|&number| number > NUMBER_MAX) {
        return Err(DropReason::NumberOutOfRange);
    }
    Ok(())
}

impl DropReason {
    /// The counter name.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::ClientMessage => "client message sent to a replica",
            DropReason::NotReplica => "sender is not another replica",
            DropReason::StaleView => "stale view",
            DropReason::FutureView => "view not joined",
            DropReason::NotNormal => "not normal",
            DropReason::NotLeader => "not the leader",
            DropReason::NotFromLeader => "not from the view's leader",
            DropReason::OldRequest => "request below the client's acknowledgement mark",
            DropReason::BeyondWindow => "request beyond the client's window",
            DropReason::AlreadyProposed => "request already in the log",
            DropReason::LogFull => "log full",
            DropReason::PendingFull => "pending queue full",
            DropReason::Malformed => "malformed message",
            DropReason::DuplicatePrepare => "duplicate prepare",
            DropReason::PrepareBufferFull => "prepare buffer full",
            DropReason::AckBeyondLog => "ack beyond the log",
            DropReason::JoiningView => "higher view: joining it",
            DropReason::ViewStartedWithoutUs => "view started without us",
            DropReason::Transferring => "transferring state",
            DropReason::ViewAlreadyStarted => "view already started",
            DropReason::NotLeaderOfView => "do-view-change for a view led by another",
            DropReason::StartViewBehindCommit => "start-view behind our commit",
            DropReason::ContradictoryOffers => "view-change offers contradict each other",
            DropReason::RequesterAhead => "state requested beyond our log",
            DropReason::CannotServe => "state below our log base",
            DropReason::UnexpectedState => "new-state not asked for",
            DropReason::StaleTransfer => "stale new-state",
            DropReason::SnapshotCorrupt => "snapshot does not decode",
            DropReason::SnapshotBeyondLog => "snapshot beyond the leader's log",
            DropReason::NumberOutOfRange => "view or op number out of range",
            DropReason::ForeignTimer => "timer not for replicas",
        }
    }
}

/// The result of a handler: done, or ignored for a reason.
pub type Handled = Result<(), DropReason>;

/// What `on_start` must do after a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StartAction {
    /// Nothing beyond arming timers.
    Nothing,
    /// We led our durable view and lost its volatile state: move to the next view.
    LeaveView,
    /// We were in a view change: announce it again.
    ResumeViewChange,
}

/// State the leader keeps for its view.
#[derive(Debug, Default)]
pub(super) struct LeaderState {
    /// Requests waiting for room in the pipeline.
    pub(super) pending: VecDeque<Entry>,
    /// The last op of each uncommitted batch, oldest first.
    pub(super) in_flight: VecDeque<u64>,
    /// Highest op each backup acknowledged in this view.
    pub(super) acks: BTreeMap<NodeId, u64>,
    /// `acks` at the previous heartbeat, to spot backups that stopped progressing.
    pub(super) acks_at_heartbeat: BTreeMap<NodeId, u64>,
    /// Heartbeats each stalled backup has gone without progress (retransmission backoff).
    pub(super) stalled_beats: BTreeMap<NodeId, u32>,
    /// The leader's own log is durable up to here (see the module docs on durability).
    pub(super) durable_op: u64,
    /// Requests in the log or queue but not executed.
    pub(super) proposed: BTreeSet<RequestId>,
    /// Scratch space for the acknowledgements sorted by `advance_leader_commit`, kept so that
    /// each acknowledgement does not allocate.
    pub(super) votes: Vec<u64>,
}

/// State a backup keeps about its leader.
#[derive(Debug, Default)]
pub(super) struct BackupState {
    /// Heard from the leader since the view-change timer was last armed.
    pub(super) heard_from_leader: bool,
    /// Highest commit number heard in this view.
    pub(super) leader_commit: u64,
    /// `Prepare`s that arrived ahead of a gap, by first op.
    pub(super) future: BTreeMap<u64, Prepare>,
}

/// A Multi-Paxos replica.
pub struct Replica {
    pub(super) id: NodeId,
    pub(super) config: Config,
    pub(super) flaw: Flaw,
    pub(super) replicas: Destinations,
    /// Every replica but this one.
    pub(super) others: Destinations,
    /// Acknowledgements from others that a quorum needs besides this replica (f).
    pub(super) quorum_others: usize,
    pub(super) rng: ChaCha8Rng,
    pub(super) view: u64,
    pub(super) last_normal_view: u64,
    pub(super) status: Status,
    pub(super) log: Log,
    pub(super) commit_number: u64,
    pub(super) executor: Executor,
    /// The latest snapshot held, served to replicas that lag below our log base.
    pub(super) snapshot: Option<Arc<Snapshot>>,
    /// `executed` at the last checkpoint.
    pub(super) last_checkpoint: u64,
    /// Encoded bytes of the commands executed since the last checkpoint.
    pub(super) bytes_since_checkpoint: u64,
    pub(super) leader: LeaderState,
    pub(super) backup: BackupState,
    pub(super) view_change: ViewChangeState,
    pub(super) transfer: TransferState,
    /// The early-reply canary's state machine, run ahead of the quorum.
    pub(super) speculative: Option<Box<dyn StateMachine>>,
    start_action: StartAction,
    pub(super) stats: NodeStats,
}

impl Replica {
    /// A replica, fresh or rebuilt from its durable records.
    pub(crate) fn new(context: NodeContext<MultiPaxos>, durable: Vec<Durable>, flaw: Flaw) -> Self {
        let config = context.config.scaled(&context.topology);
        assert_eq!(config.validate(), Ok(()), "drivers validate the config first");
        let replicas = context.topology.replicas().clone();
        assert!(replicas.contains(&context.id), "a replica is listed among the replicas");
        let others: Destinations = replicas.iter().copied().filter(|&r| r != context.id).collect();
        let quorum_others = context.topology.majority() - 1;
        assert!(quorum_others <= others.len(), "a quorum fits in the cluster");
        let recovered = Recovered::replay(&durable);
        let mut executor = Executor::new(context.new_state_machine, config.client_table_max, config.client_window);
        executor.reexecute_retries = flaw == Flaw::ReexecutedRetry;
        if let Some(snapshot) = &recovered.snapshot {
            executor.restore(snapshot).expect("a replica's own snapshot decodes");
        }
        let commit_number = executor.executed().max(recovered.log.base());
        let leads_view = replicas[(recovered.view % replicas.len() as u64) as usize] == context.id;
        let (status, start_action) = if recovered.fresh {
            (Status::Normal, StartAction::Nothing)
        } else if recovered.last_normal_view < recovered.view {
            (Status::ViewChange, StartAction::ResumeViewChange)
        } else if leads_view {
            (Status::ViewChange, StartAction::LeaveView)
        } else {
            (Status::Normal, StartAction::Nothing)
        };
        let mut replica = Replica {
            id: context.id,
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            flaw,
            replicas,
            others,
            quorum_others,
            view: recovered.view,
            last_normal_view: recovered.last_normal_view,
            status,
            last_checkpoint: executor.executed(),
            bytes_since_checkpoint: 0,
            log: recovered.log,
            commit_number,
            executor,
            snapshot: recovered.snapshot,
            leader: LeaderState::default(),
            backup: BackupState { leader_commit: commit_number, ..BackupState::default() },
            view_change: ViewChangeState::default(),
            transfer: TransferState::default(),
            speculative: None,
            start_action,
            stats: NodeStats::default(),
            config,
        };
        if replica.status == Status::Normal && replica.is_leader() {
            replica.rebuild_speculative();
        }
        replica.check_invariants();
        replica
    }

    // ---- small helpers -------------------------------------------------------------------

    /// The leader of `view`.
    pub(super) fn leader_of(&self, view: u64) -> NodeId {
        self.replicas[(view % self.replicas.len() as u64) as usize]
    }

    /// True when this replica leads its current view (whatever its status).
    pub(super) fn is_leader(&self) -> bool {
        self.leader_of(self.view) == self.id
    }

    /// True for another replica.
    pub(super) fn is_other_replica(&self, node: NodeId) -> bool {
        node != self.id && self.replicas.contains(&node)
    }

    /// Writes a durable record; later promises wait for it.
    pub(super) fn persist(
        &mut self,
        record: Durable,
        mode: PersistMode,
        out: &mut Outbox<MultiPaxos>,
    ) -> PersistTicket {
        let ticket = out.persist(record, mode);
        assert_eq!(out.last_ticket(), Some(ticket), "a durable send after this waits for it");
        ticket
    }

    /// Arms the view-change timer with the configured timeout, randomised by ±50% so that
    /// replicas rarely start competing view changes at once.
    pub(super) fn arm_view_change_timer(&mut self, out: &mut Outbox<MultiPaxos>) {
        let timeout = self.config.view_change_timeout_ns;
        let delay = self.rng.random_range(timeout / 2..=timeout.saturating_add(timeout / 2));
        assert!(delay >= timeout / 2, "the delay stays in its range");
        out.set_timer(Timer::ViewChange, delay);
    }

    /// Forgets everything tied to the current role and view (on entering another).
    pub(super) fn reset_role_state(&mut self, out: &mut Outbox<MultiPaxos>) {
        self.leader = LeaderState::default();
        self.backup = BackupState { leader_commit: self.commit_number, ..BackupState::default() };
        self.view_change = ViewChangeState::default();
        if self.transfer.requesting {
            out.cancel_timer(Timer::StateTransfer);
        }
        self.transfer = TransferState::default();
        self.speculative = None;
    }

    /// Tells the leader how far our log is durable.
    pub(super) fn send_prepare_ok(&self, out: &mut Outbox<MultiPaxos>) {
        assert_eq!(self.status, Status::Normal, "only a normal replica acknowledges");
        let message = Message::PrepareOk { view: self.view, op_number: self.log.op_number() };
        out.send_durable(self.leader_of(self.view), message);
    }

    /// Persists a checkpoint record: snapshot, view and the log after the snapshot, replacing
    /// every earlier record. `Compact` for a checkpoint of what this replica executed (its
    /// earlier records hold all of it, so the write may land in the background), `Replace` for
    /// a snapshot from a peer. The tail of executed entries kept in memory for lagging replicas
    /// is not written: the snapshot holds it, and writing it doubled a checkpoint of large values.
    pub(super) fn persist_checkpoint(&mut self, mode: PersistMode, out: &mut Outbox<MultiPaxos>) {
        let snapshot = self.snapshot.clone().expect("a checkpoint has a snapshot");
        assert!(snapshot.op <= self.log.op_number(), "the log reaches the snapshot");
        let log_base = self.log.base().max(snapshot.op);
        let record = Durable::Checkpoint {
            view: self.view,
            last_normal_view: self.last_normal_view,
            snapshot,
            log_base,
            entries: self.log.entries_after(log_base, usize::MAX),
        };
        self.persist(record, mode, out);
    }

    /// Accepts a message that only the leader of `view` sends to its backups (`Prepare`,
    /// `Commit`): joins a higher view, notices a view that started without us, or refuses.
    fn accept_leader_message(&mut self, from: NodeId, view: u64, out: &mut Outbox<MultiPaxos>) -> Handled {
        if view < self.view {
            return Err(DropReason::StaleView);
        }
        if from != self.leader_of(view) || from == self.id {
            return Err(DropReason::NotFromLeader);
        }
        if view > self.view {
            self.start_transfer(view, out);
            return Err(DropReason::JoiningView);
        }
        match self.status {
            Status::Normal => {
                assert!(!self.is_leader(), "the sender leads this view");
                self.backup.heard_from_leader = true;
                Ok(())
            }
            Status::ViewChange => {
                self.start_transfer(view, out);
                Err(DropReason::ViewStartedWithoutUs)
            }
            Status::Transfer => {
                self.backup.heard_from_leader = true;
                Err(DropReason::Transferring)
            }
        }
    }

    // ---- normal case: leader ---------------------------------------------------------------

    fn on_request(
        &mut self,
        from: NodeId,
        id: ordo_core::RequestId,
        acked_below: u64,
        command: ordo_core::Command,
        out: &mut Outbox<MultiPaxos>,
    ) -> Handled {
        if self.status != Status::Normal {
            return Err(DropReason::NotNormal);
        }
        if !self.is_leader() {
            out.send(from, Message::Redirect { view: self.view });
            return Err(DropReason::NotLeader);
        }
        match self.executor.client_table().lookup(id, acked_below) {
            Lookup::Old => return Err(DropReason::OldRequest),
            Lookup::BeyondWindow => return Err(DropReason::BeyondWindow),
            Lookup::Executed(_) if self.flaw == Flaw::ReexecutedRetry => {}
            Lookup::Executed(result) => {
                out.send(from, Message::Reply { view: self.view, id, result: result.clone() });
                return Ok(());
            }
            Lookup::New => {}
        }
        if self.leader.proposed.contains(&id) {
            return Err(DropReason::AlreadyProposed);
        }
        if self.log.len() + self.leader.pending.len() >= self.config.log_max() {
            return Err(DropReason::LogFull);
        }
        if self.leader.pending.len() >= self.config.pending_max {
            return Err(DropReason::PendingFull);
        }
        self.leader.proposed.insert(id);
        self.leader.pending.push_back(Entry { id, acked_below, reply_to: from, command });
        self.send_batches(out);
        assert!(self.leader.pending.len() <= self.config.pending_max, "the queue respects its bound");
        Ok(())
    }

    /// Moves queued requests into new batches while the pipeline has room.
    pub(super) fn send_batches(&mut self, out: &mut Outbox<MultiPaxos>) {
        while self.leader.in_flight.len() < self.config.pipeline_max && !self.leader.pending.is_empty() {
            let count = ordo_core::batch_len(self.leader.pending.iter().map(|e| &e.command), self.config.batch_max);
            let batch: Vec<Entry> = self.leader.pending.drain(..count).collect();
            self.propose(batch, out);
        }
        assert!(self.leader.in_flight.len() <= self.config.pipeline_max, "the pipeline respects its bound");
    }

    /// Appends a batch, persists it, and sends it to the backups once it is durable here.
    fn propose(&mut self, batch: Vec<Entry>, out: &mut Outbox<MultiPaxos>) {
        assert!(self.status == Status::Normal && self.is_leader(), "only a normal leader proposes");
        assert!(!batch.is_empty(), "a batch holds at least one request");
        let after = self.log.op_number();
        for entry in &batch {
            self.log.append(entry.clone());
        }
        let op_number = self.log.op_number();
        let record = Durable::Entries { view: self.view, after, entries: batch.clone() };
        let ticket = self.persist(record, PersistMode::Append, out);
        if self.flaw == Flaw::EarlyReply {
            self.reply_early(&batch, out);
        }
        self.leader.in_flight.push_back(op_number);
        if self.others.is_empty() {
            // Alone, the leader learns that its write is durable from a message to itself.
            out.send_after(ticket, self.id, Message::PrepareOk { view: self.view, op_number });
        } else {
            let prepare = Prepare { view: self.view, op_number, entries: batch, commit_number: self.commit_number };
            out.multicast_after(ticket, &self.others, Message::Prepare(prepare));
        }
    }

    fn on_prepare_ok(&mut self, from: NodeId, view: u64, op_number: u64, out: &mut Outbox<MultiPaxos>) -> Handled {
        if !self.replicas.contains(&from) {
            return Err(DropReason::NotReplica);
        }
        if view < self.view {
            return Err(DropReason::StaleView);
        }
        if view > self.view {
            return Err(DropReason::FutureView);
        }
        if self.status != Status::Normal || !self.is_leader() {
            return Err(DropReason::NotLeader);
        }
        if op_number > self.log.op_number() {
            return Err(DropReason::AckBeyondLog);
        }
        // A backup holds entries of this view only after they left us, which they do only once
        // durable here: its acknowledgement proves our own copy durable as well.
        self.leader.durable_op = self.leader.durable_op.max(op_number);
        if from != self.id {
            let ack = self.leader.acks.entry(from).or_insert(0);
            *ack = (*ack).max(op_number);
        }
        self.advance_leader_commit(out);
        Ok(())
    }

    /// Commits up to the highest op that a majority (this leader included) holds durably.
    fn advance_leader_commit(&mut self, out: &mut Outbox<MultiPaxos>) {
        let mut votes = std::mem::take(&mut self.leader.votes);
        votes.clear();
        votes.extend(self.others.iter().map(|backup| self.leader.acks.get(backup).copied().unwrap_or(0)));
        votes.push(self.leader.durable_op);
        votes.sort_unstable_by(|a, b| b.cmp(a));
        let quorum_op = votes[self.quorum_others];
        self.leader.votes = votes;
        if quorum_op <= self.commit_number {
            return;
        }
        assert!(quorum_op <= self.log.op_number(), "acknowledged ops are in the log");
        self.stats.slow_path_commits += quorum_op - self.commit_number;
        self.commit_through(quorum_op, out);
        while self.leader.in_flight.front().is_some_and(|&op| op <= quorum_op) {
            self.leader.in_flight.pop_front();
        }
        self.execute_committed(out);
        self.send_batches(out);
    }

    // ---- normal case: backup ---------------------------------------------------------------

    fn on_prepare(&mut self, from: NodeId, prepare: Prepare, out: &mut Outbox<MultiPaxos>) -> Handled {
        self.accept_leader_message(from, prepare.view, out)?;
        let Some(first) = prepare.first_op() else {
            return Err(DropReason::Malformed);
        };
        if prepare.entries.len() > self.config.batch_max {
            // Leaders send at most a batch (new or retransmitted); this bounds the buffer below.
            return Err(DropReason::Malformed);
        }
        assert_eq!(self.status, Status::Normal, "accepted leader messages reach normal backups");
        self.backup.leader_commit = self.backup.leader_commit.max(prepare.commit_number);
        let op = self.log.op_number();
        if prepare.op_number <= op {
            // A retransmission or a duplicate: acknowledge again in case our answer was lost.
            self.send_prepare_ok(out);
            self.advance_backup_commit(out);
            return Err(DropReason::DuplicatePrepare);
        }
        if first > op + 1 {
            return self.buffer_future_prepare(first, prepare, out);
        }
        self.append_from_leader(first, prepare.entries, out)?;
        self.drain_future(out);
        self.advance_backup_commit(out);
        Ok(())
    }

    /// Keeps a `Prepare` that arrived ahead of a gap; asks for state if the gap persists.
    fn buffer_future_prepare(&mut self, first: u64, prepare: Prepare, out: &mut Outbox<MultiPaxos>) -> Handled {
        let leader = self.leader_of(self.view);
        self.schedule_state_request(leader, out);
        if self.backup.future.len() >= self.config.prepare_buffer_max && !self.backup.future.contains_key(&first) {
            return Err(DropReason::PrepareBufferFull);
        }
        self.backup.future.insert(first, prepare);
        self.stats.count("prepare_buffered");
        assert!(self.backup.future.len() <= self.config.prepare_buffer_max, "the buffer respects its bound");
        Ok(())
    }

    /// Appends the entries of a `Prepare` that starts at or before our next op, persists them
    /// and acknowledges once durable.
    fn append_from_leader(&mut self, first: u64, entries: Vec<Entry>, out: &mut Outbox<MultiPaxos>) -> Handled {
        let after = self.log.op_number();
        assert!(first <= after + 1, "the entries join our log without a gap");
        let skip = usize::try_from(after + 1 - first).unwrap_or(usize::MAX);
        if skip >= entries.len() {
            return Ok(());
        }
        if self.log.len() + (entries.len() - skip) > self.config.log_max() {
            return Err(DropReason::LogFull);
        }
        let new: Vec<Entry> = entries.into_iter().skip(skip).collect();
        for entry in &new {
            self.log.append(entry.clone());
        }
        self.persist(Durable::Entries { view: self.view, after, entries: new }, PersistMode::Append, out);
        self.send_prepare_ok(out);
        Ok(())
    }

    /// Appends buffered `Prepare`s that now follow our log.
    pub(super) fn drain_future(&mut self, out: &mut Outbox<MultiPaxos>) {
        while let Some((&first, _)) = self.backup.future.first_key_value() {
            let op = self.log.op_number();
            if first > op + 1 {
                break;
            }
            let prepare = self.backup.future.remove(&first).expect("the key was just read");
            if prepare.op_number <= op {
                continue;
            }
            if let Err(reason) = self.append_from_leader(first, prepare.entries, out) {
                self.stats.drop_input(reason.name());
                break;
            }
        }
    }

    fn on_commit(&mut self, from: NodeId, view: u64, commit_number: u64, out: &mut Outbox<MultiPaxos>) -> Handled {
        self.accept_leader_message(from, view, out)?;
        assert!(!self.is_leader(), "the leader does not receive its own heartbeat");
        self.backup.leader_commit = self.backup.leader_commit.max(commit_number);
        self.advance_backup_commit(out);
        Ok(())
    }

    /// A backup commits what the leader committed, as far as its own log goes (its log is a
    /// prefix of the leader's), and asks for state when its own state lies below its log base,
    /// or when the leader is ahead and the `Prepare`s in between do not arrive meanwhile: a
    /// commit number usually overtakes a `Prepare` still on its way (a large one goes over TCP,
    /// and asking at once made the leader send its 16 MiB entries again, several times).
    pub(super) fn advance_backup_commit(&mut self, out: &mut Outbox<MultiPaxos>) {
        assert!(!self.is_leader(), "backups follow the leader's commit number");
        let target = self.backup.leader_commit.min(self.log.op_number());
        self.commit_through(target, out);
        self.execute_committed(out);
        let leader = self.leader_of(self.view);
        if self.executor.executed() < self.log.base() {
            self.request_state_now(leader, out);
        } else if self.backup.leader_commit > self.log.op_number() {
            self.schedule_state_request(leader, out);
        }
    }

    // ---- commit and execution --------------------------------------------------------------

    /// Raises the commit number to `commit_number` (a lower one changes nothing) and reports each
    /// entry it newly covers in our log to the global checker: this is where a replica learns
    /// that an entry is committed. Entries below our log base are not held, hence not reported
    /// (a snapshot or a leader's log vouches for them).
    pub(super) fn commit_through(&mut self, commit_number: u64, out: &mut Outbox<MultiPaxos>) {
        if commit_number <= self.commit_number {
            return;
        }
        assert!(commit_number <= self.log.op_number(), "only ops in the log commit");
        let from = self.commit_number.max(self.log.base());
        for (op, entry) in self.log.iter_after(from).take_while(|&(op, _)| op <= commit_number) {
            out.observe(Observation::Committed { op, id: entry.id });
        }
        self.commit_number = commit_number;
        assert!(self.log.base() <= self.commit_number, "the log base stays committed");
    }

    /// Executes committed entries in op order, as far as the log holds them.
    pub(super) fn execute_committed(&mut self, out: &mut Outbox<MultiPaxos>) {
        while self.executor.executed() < self.commit_number {
            let op = self.executor.executed() + 1;
            let Some(entry) = self.log.get(op) else {
                // Below our log base: the state must come by state transfer.
                assert!(op <= self.log.base(), "a committed op above the base is in the log");
                break;
            };
            let entry = entry.clone();
            self.bytes_since_checkpoint += entry.command.encoded_len() as u64;
            self.execute_entry(op, &entry, out);
            self.maybe_checkpoint(out);
        }
        assert!(self.executor.executed() <= self.commit_number, "only committed entries execute");
    }

    /// Executes one committed entry; a normal leader replies to its client.
    pub(super) fn execute_entry(&mut self, op: u64, entry: &Entry, out: &mut Outbox<MultiPaxos>) {
        assert!(op <= self.commit_number, "only committed entries execute");
        let (result, digest) = match self.executor.execute(op, entry) {
            Outcome::Applied(result) => {
                self.stats.executed += 1;
                let digest = execution_digest(true, Some(&result));
                (Some(result), digest)
            }
            Outcome::Duplicate(cached) => {
                self.stats.count("duplicate_in_log");
                let digest = execution_digest(false, cached.as_ref());
                (cached, digest)
            }
        };
        out.observe(Observation::Executed { op, id: entry.id, digest });
        if self.status == Status::Normal && self.is_leader() {
            self.leader.proposed.remove(&entry.id);
            if let Some(result) = result {
                out.send(entry.reply_to, Message::Reply { view: self.view, id: entry.id, result });
            }
        }
    }

    /// Every `Config::checkpoint_every` executed entries, or sooner once the commands executed
    /// since the last checkpoint weigh as much as its state: snapshot, truncate the log, persist
    /// both.
    ///
    /// The log keeps a tail of up to an interval behind the snapshot (as etcd's raft keeps
    /// entries behind its snapshot for slow followers): a replica that lags by less, or that
    /// adopted a log in a view change just past its executed op, then catches up with entries
    /// instead of a snapshot of the whole state. Both the tail and the log between checkpoints
    /// are bounded in bytes by the state's size (or `Config::checkpoint_bytes_min`), so the log
    /// never costs more than the snapshot it spares: counted in entries only, 1 KiB values made
    /// a checkpoint record of 296 MB, most of it log.
    pub(super) fn maybe_checkpoint(&mut self, out: &mut Outbox<MultiPaxos>) {
        let executed = self.executor.executed();
        let state_bytes = self.snapshot.as_ref().map_or(0, |snapshot| snapshot.state.len() as u64);
        let every = self.config.checkpoint_every(state_bytes);
        let bytes_max = state_bytes.max(self.config.checkpoint_bytes_min());
        let due = executed >= self.last_checkpoint + every || self.bytes_since_checkpoint >= bytes_max;
        if !due || executed < self.log.base() {
            return;
        }
        let snapshot = Arc::new(self.executor.snapshot());
        assert_eq!(snapshot.op, executed, "the snapshot is taken at the executed op");
        let tail_bytes_max = (snapshot.state.len() as u64).max(self.config.checkpoint_bytes_min());
        let tail_start = self.tail_start(executed, every, tail_bytes_max);
        self.log.truncate_prefix(tail_start);
        self.snapshot = Some(snapshot);
        self.last_checkpoint = executed;
        self.bytes_since_checkpoint = 0;
        self.persist_checkpoint(PersistMode::Compact, out);
        self.stats.count("checkpoint");
    }

    /// The op after which the log's tail behind a checkpoint at `executed` starts: at most
    /// `every` entries back, and no further than their commands' encoded bytes stay within
    /// `bytes_max`.
    fn tail_start(&self, executed: u64, every: u64, bytes_max: u64) -> u64 {
        let lowest = executed.saturating_sub(every).max(self.log.base());
        let mut start = executed;
        let mut bytes = 0;
        while start > lowest {
            let Some(entry) = self.log.get(start) else { break };
            bytes += entry.command.encoded_len() as u64;
            if bytes > bytes_max {
                break;
            }
            start -= 1;
        }
        start
    }

    // ---- canary: early reply ---------------------------------------------------------------

    /// The early-reply canary's leader answers from a state machine run ahead of the quorum.
    fn reply_early(&mut self, batch: &[Entry], out: &mut Outbox<MultiPaxos>) {
        let Some(speculative) = self.speculative.as_mut() else {
            return;
        };
        for entry in batch {
            let result = speculative.apply(entry.id, &entry.command);
            out.send(entry.reply_to, Message::Reply { view: self.view, id: entry.id, result });
        }
    }

    /// Builds the early-reply canary's speculative state machine when this replica starts
    /// leading: the executed state plus every entry of the log beyond it.
    pub(super) fn rebuild_speculative(&mut self) {
        if self.flaw != Flaw::EarlyReply || self.executor.executed() < self.log.base() {
            return;
        }
        let mut speculative = self.executor.clone_state_machine();
        for (_, entry) in self.log.iter_after(self.executor.executed()) {
            speculative.apply(entry.id, &entry.command);
        }
        self.speculative = Some(speculative);
    }

    // ---- timers ----------------------------------------------------------------------------

    fn on_heartbeat_timer(&mut self, out: &mut Outbox<MultiPaxos>) {
        out.set_timer(Timer::Heartbeat, self.config.heartbeat_ns);
        match self.status {
            Status::Normal if self.is_leader() => {
                if !self.others.is_empty() {
                    let commit = Message::Commit { view: self.view, commit_number: self.commit_number };
                    out.multicast(&self.others, commit);
                }
                self.retransmit(out);
            }
            Status::ViewChange => self.resend_view_change(out),
            Status::Normal | Status::Transfer => {}
        }
    }

    /// Sends entries again to each backup whose acknowledgements stalled since the previous
    /// heartbeat (a lost `Prepare` or `PrepareOk`, or a backup that restarted). A backup that
    /// stays silent is retried with exponential backoff, up to every 64th heartbeat, so a dead
    /// one costs little. A backup behind our log base gets the entries after the base: it then
    /// sees the gap and asks for a snapshot.
    fn retransmit(&mut self, out: &mut Outbox<MultiPaxos>) {
        let op = self.log.op_number();
        for index in 0..self.others.len() {
            let backup = self.others[index];
            let ack = self.leader.acks.get(&backup).copied().unwrap_or(0);
            let before = self.leader.acks_at_heartbeat.insert(backup, ack);
            if ack >= op || before != Some(ack) {
                self.leader.stalled_beats.remove(&backup);
                continue;
            }
            let beats = self.leader.stalled_beats.entry(backup).or_insert(0);
            *beats += 1;
            if !crate::backoff::is_due(u64::from(*beats), 64) {
                continue;
            }
            let after = ack.max(self.log.base());
            let count =
                ordo_core::batch_len(self.log.iter_after(after).map(|(_, e)| &e.command), self.config.batch_max);
            let entries = self.log.entries_after(after, count);
            if entries.is_empty() {
                // All we hold is committed and below its log: our commit number tells it.
                continue;
            }
            let op_number = after + entries.len() as u64;
            let prepare = Prepare { view: self.view, op_number, entries, commit_number: self.commit_number };
            out.send_durable(backup, Message::Prepare(prepare));
            self.stats.count("retransmit");
        }
        assert!(self.leader.stalled_beats.len() <= self.others.len(), "one stall count per backup");
    }

    fn on_view_change_timer(&mut self, out: &mut Outbox<MultiPaxos>) {
        match self.status {
            Status::Normal if self.is_leader() => {}
            Status::Normal | Status::Transfer => {
                if self.backup.heard_from_leader {
                    self.backup.heard_from_leader = false;
                    self.arm_view_change_timer(out);
                } else {
                    self.start_view_change(self.view + 1, out);
                }
            }
            Status::ViewChange => self.start_view_change(self.view + 1, out),
        }
    }
}

impl Node<MultiPaxos> for Replica {
    fn on_start(&mut self, _now: ClockReading, out: &mut Outbox<MultiPaxos>) {
        out.set_timer(Timer::Heartbeat, self.config.heartbeat_ns);
        match self.start_action {
            StartAction::Nothing => {
                if !self.is_leader() {
                    self.arm_view_change_timer(out);
                }
            }
            StartAction::LeaveView => self.start_view_change(self.view + 1, out),
            StartAction::ResumeViewChange => self.resume_view_change(out),
        }
        self.start_action = StartAction::Nothing;
    }

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<MultiPaxos>) {
        if let Err(reason) = check_numbers(&message) {
            self.stats.drop_input(reason.name());
            return;
        }
        let handled = match message {
            Message::Request { id, acked_below, command } => self.on_request(from, id, acked_below, command, out),
            Message::Prepare(prepare) => self.on_prepare(from, prepare, out),
            Message::PrepareOk { view, op_number } => self.on_prepare_ok(from, view, op_number, out),
            Message::Commit { view, commit_number } => self.on_commit(from, view, commit_number, out),
            Message::StartViewChange { view } => self.on_start_view_change(from, view, out),
            Message::DoViewChange(do_view_change) => self.on_do_view_change(from, do_view_change, out),
            Message::StartView(start_view) => self.on_start_view(from, start_view, out),
            Message::GetState { view, op_number } => self.on_get_state(from, view, op_number, out),
            Message::NewState(new_state) => self.on_new_state(from, new_state, out),
            Message::Reply { .. } | Message::Redirect { .. } => Err(DropReason::ClientMessage),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason.name());
        }
    }

    fn on_timer(&mut self, _now: ClockReading, timer: Timer, out: &mut Outbox<MultiPaxos>) {
        match timer {
            Timer::Heartbeat => self.on_heartbeat_timer(out),
            Timer::ViewChange => self.on_view_change_timer(out),
            Timer::StateTransfer => self.on_state_transfer_timer(out),
            Timer::ClientRetry => self.stats.drop_input(DropReason::ForeignTimer.name()),
        }
    }

    fn check_invariants(&self) {
        let executed = self.executor.executed();
        assert!(self.commit_number <= self.log.op_number(), "commit ≤ op number");
        assert!(self.log.base() <= self.commit_number, "entries up to the log base are committed");
        assert!(executed <= self.commit_number, "executed ≤ commit");
        assert_eq!(self.log.op_number() - self.log.base(), self.log.len() as u64, "the log is contiguous");
        assert!(self.log.len() <= self.config.log_max(), "the log respects its bound");
        assert!(self.last_normal_view <= self.view, "the last normal view was joined");
        assert!(self.last_checkpoint <= executed, "checkpoints are taken of executed state");
        assert!(self.executor.client_table().len() <= self.config.client_table_max, "the client table is bounded");
        if let Some(snapshot) = &self.snapshot {
            assert!(snapshot.op <= executed, "the snapshot held was executed");
        }
        if self.status == Status::Normal {
            assert_eq!(self.last_normal_view, self.view, "a normal replica is normal in its view");
        }
        if self.status == Status::Normal && self.is_leader() {
            assert!(self.leader.in_flight.len() <= self.config.pipeline_max, "the pipeline is bounded");
            assert!(self.leader.pending.len() <= self.config.pending_max, "the queue is bounded");
            assert!(self.leader.pending.is_empty() || self.leader.in_flight.len() == self.config.pipeline_max);
            assert!(self.leader.durable_op <= self.log.op_number(), "durable ops are in the log");
            let unexecuted = self.log.op_number() - executed.max(self.log.base());
            assert!(self.leader.proposed.len() as u64 <= unexecuted + self.leader.pending.len() as u64);
            assert!(self.leader.in_flight.iter().all(|&op| op > self.commit_number && op <= self.log.op_number()));
        } else {
            assert!(self.leader.pending.is_empty(), "only a normal leader queues requests");
            assert!(self.leader.in_flight.is_empty(), "only a normal leader has batches in flight");
        }
        assert!(self.backup.future.len() <= self.config.prepare_buffer_max, "the prepare buffer is bounded");
        assert!(self.view_change.start_from.len() <= self.others.len(), "one start-view-change per replica");
        assert!(self.view_change.do_view_change.len() <= self.replicas.len(), "one do-view-change per replica");
        assert_eq!(self.transfer.buffer.is_some(), self.status == Status::Transfer, "a transfer has its buffer");
        if let Some(buffer) = &self.transfer.buffer {
            assert!(buffer.entries.len() <= self.config.log_max(), "the transfer buffer is bounded");
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        Some(self.executor.state_machine())
    }

    fn status(&self) -> String {
        format!(
            "view={} {} {} op={} commit={} exec={} base={} log={}",
            self.view,
            self.status.name(),
            if self.is_leader() { "leader" } else { "backup" },
            self.log.op_number(),
            self.commit_number,
            self.executor.executed(),
            self.log.base(),
            self.log.len(),
        )
    }
}
