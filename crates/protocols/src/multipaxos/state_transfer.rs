//! State transfer: how a replica gets entries or a snapshot it lacks.
//!
//! Two situations use the same `GetState` / `NewState` pair; a responder answers only while
//! normal in the requester's view, so that its log is a prefix of that view's leader's log.
//!
//! - **Catch-up while normal.** A backup that sees a gap (a `Prepare` ahead of its log, a commit
//!   number beyond it), or any replica whose state lies below its log base (*gap*, after adopting
//!   another replica's log), asks for what follows its op number (or its executed op, in gap).
//!   Entries above its log are appended, persisted and acknowledged like a `Prepare`; entries in
//!   the gap are committed and executed directly; a snapshot beyond its executed op is installed.
//! - **Joining a view that started without us** (status `transfer`). A replica that learns of a
//!   normal view it is not normal in (a `Prepare` or `Commit` of a higher view, or of the view it
//!   is still changing to) collects the log from its executed op onward in a separate buffer,
//!   without touching its own log: until it is normal in the new view its log and last normal
//!   view are what it promised, and a view change may still need them. It becomes normal only
//!   once the buffer reaches an op number a normal replica reported, so its log then contains
//!   the log the view started with (the safety argument in `view_change.rs` needs this).
//!
//! Each `NewState` carries at most `state_transfer_entries_max` entries; the requester asks again
//! from where it got to, so logs of any size move in rounds. A snapshot is one message (the
//! simulator has no datagram limit; the runtime sends large messages over TCP). A `GetState`
//! that goes unanswered is sent to the next replica after `state_transfer_retry_ns`, doubled
//! at each unanswered retry in a row (a large snapshot takes long to arrive, and each retry
//! makes a responder send it again).

use super::messages::{Entry, Message, NewState, Snapshot};
use super::replica::{DropReason, Handled, Replica, Status};
use super::{Durable, MultiPaxos, Timer};
use ordo_core::{NodeId, Outbox, PersistMode};
use std::sync::Arc;

/// Most doublings of the state-transfer retry period (64 times the configured period).
pub const RETRY_DOUBLINGS_MAX: u32 = 6;

/// The log being collected while joining a view (status `transfer`).
#[derive(Debug)]
pub struct TransferBuffer {
    /// The op just before the first collected entry: our executed op when the transfer began,
    /// or the op of the collected snapshot.
    pub base: u64,
    /// The snapshot collected, if the responder had truncated below our executed op.
    pub snapshot: Option<Arc<Snapshot>>,
    /// Entries collected, at ops `base + 1 ..`.
    pub entries: Vec<Entry>,
    /// The smallest op number a normal replica reported during this transfer. Every normal
    /// replica's log contains the log its view started with, so reaching any reported op number
    /// is enough; fixing the smallest keeps a transfer from chasing a log that grows faster than
    /// rounds fetch it.
    pub target_op: Option<u64>,
}

impl TransferBuffer {
    fn new(base: u64) -> Self {
        TransferBuffer { base, snapshot: None, entries: Vec::new(), target_op: None }
    }

    /// The op of the last entry collected.
    pub fn end(&self) -> u64 {
        self.base + self.entries.len() as u64
    }
}

/// State-transfer progress.
#[derive(Debug, Default)]
pub struct TransferState {
    /// A `GetState` is outstanding, or scheduled (the retry timer is armed).
    pub requesting: bool,
    /// The request is scheduled, not yet sent: the timer's first firing sends it, to `target`.
    pub scheduled: bool,
    /// Whom we asked last.
    pub target: NodeId,
    /// Requests of this transfer that went unanswered in a row: each doubles the wait before
    /// the next (up to [`RETRY_DOUBLINGS_MAX`] times), since an answer carrying a large
    /// snapshot can take longer than the retry period, and every retry makes a responder
    /// serialize and send the whole state again.
    pub unanswered: u32,
    /// The log collected while joining a view; present exactly in status `transfer`.
    pub buffer: Option<TransferBuffer>,
}

impl Replica {
    /// Joins `view`, which is running normally without us: fetch its log before becoming normal.
    pub(super) fn start_transfer(&mut self, view: u64, out: &mut Outbox<MultiPaxos>) {
        assert!(view >= self.view, "transfers never go back to older views");
        if self.leader_of(view) == self.id {
            // Someone is normal in a view we lead, so we led it before a restart and lost its
            // volatile state: leave it for the next view.
            self.start_view_change(view + 1, out);
            return;
        }
        if view > self.view {
            self.view = view;
            self.persist(Durable::View { view }, PersistMode::Append, out);
        }
        self.status = Status::Transfer;
        self.reset_role_state(out);
        self.transfer.buffer = Some(TransferBuffer::new(self.executor.executed()));
        self.backup.heard_from_leader = true;
        self.arm_view_change_timer(out);
        self.stats.count("state_transfer");
        self.transfer.requesting = true;
        self.ask_afresh(self.leader_of(view), out);
        assert!(self.last_normal_view < self.view || self.status == Status::Transfer);
    }

    /// True when this replica lacks state it knows exists.
    pub(super) fn needs_state(&self) -> bool {
        match self.status {
            Status::Transfer => true,
            Status::ViewChange => false,
            Status::Normal => {
                self.executor.executed() < self.log.base()
                    || (!self.is_leader()
                        && (self.backup.leader_commit > self.log.op_number() || !self.backup.future.is_empty()))
            }
        }
    }

    /// Asks `source` for state now, unless a request is already outstanding.
    pub(super) fn request_state_now(&mut self, source: NodeId, out: &mut Outbox<MultiPaxos>) {
        if self.transfer.requesting || self.others.is_empty() {
            return;
        }
        assert!(source != self.id, "state comes from another replica");
        self.transfer.requesting = true;
        self.transfer.scheduled = false;
        self.stats.count("state_transfer");
        self.ask_afresh(source, out);
    }

    /// Asks `source` for state when the retry timer fires, unless the gap closes meanwhile (a
    /// `Prepare` that overtook another usually sees the other arrive soon).
    pub(super) fn schedule_state_request(&mut self, source: NodeId, out: &mut Outbox<MultiPaxos>) {
        if self.transfer.requesting || self.others.is_empty() {
            return;
        }
        self.transfer.requesting = true;
        self.transfer.scheduled = true;
        self.transfer.target = source;
        self.transfer.unanswered = 0;
        out.set_timer(Timer::StateTransfer, self.config.state_transfer_retry_ns);
    }

    /// Ends the request, sent or scheduled: the state arrived, or is no longer needed.
    fn end_request(&mut self, out: &mut Outbox<MultiPaxos>) {
        self.transfer.requesting = false;
        self.transfer.scheduled = false;
        out.cancel_timer(Timer::StateTransfer);
    }

    /// The op after which we need entries.
    fn state_request_point(&self) -> u64 {
        match &self.transfer.buffer {
            Some(buffer) => buffer.end(),
            None if self.executor.executed() < self.log.base() => self.executor.executed(),
            None => self.log.op_number(),
        }
    }

    /// Asks `target` for state with the retry period back at its start (a new request, or one
    /// after progress).
    fn ask_afresh(&mut self, target: NodeId, out: &mut Outbox<MultiPaxos>) {
        self.transfer.target = target;
        self.transfer.unanswered = 0;
        self.send_get_state(out);
    }

    fn send_get_state(&mut self, out: &mut Outbox<MultiPaxos>) {
        assert!(self.transfer.requesting, "a request is outstanding");
        assert!(self.transfer.target != self.id, "state comes from another replica");
        let op_number = self.state_request_point();
        out.send(self.transfer.target, Message::GetState { view: self.view, op_number });
        let doublings = self.transfer.unanswered.min(RETRY_DOUBLINGS_MAX);
        out.set_timer(Timer::StateTransfer, self.config.state_transfer_retry_ns.saturating_mul(1 << doublings));
    }

    pub(super) fn on_state_transfer_timer(&mut self, out: &mut Outbox<MultiPaxos>) {
        if !self.transfer.requesting {
            return;
        }
        if !self.needs_state() {
            return self.end_request(out);
        }
        if std::mem::take(&mut self.transfer.scheduled) {
            // The gap outlasted the wait: this is the request's first send.
            self.stats.count("state_transfer");
            return self.ask_afresh(self.transfer.target, out);
        }
        // Unanswered, or answered without progress: try the next replica.
        let position = self.others.iter().position(|&r| r == self.transfer.target);
        let next = position.map_or(0, |p| (p + 1) % self.others.len());
        self.transfer.target = self.others[next];
        self.transfer.unanswered = self.transfer.unanswered.saturating_add(1);
        self.stats.count("state_transfer_retry");
        self.send_get_state(out);
    }

    pub(super) fn on_get_state(
        &mut self,
        from: NodeId,
        view: u64,
        op_number: u64,
        out: &mut Outbox<MultiPaxos>,
    ) -> Handled {
        if !self.is_other_replica(from) {
            return Err(DropReason::NotReplica);
        }
        if view > self.view {
            // The requester saw view `view` running (it is normal or transferring in it).
            self.start_transfer(view, out);
            return Err(DropReason::JoiningView);
        }
        if view < self.view {
            return Err(DropReason::StaleView);
        }
        if self.status != Status::Normal {
            return Err(DropReason::NotNormal);
        }
        if op_number > self.log.op_number() {
            return Err(DropReason::RequesterAhead);
        }
        let max = self.config.state_transfer_entries_max;
        let (snapshot, after) = if op_number >= self.log.base() {
            (None, op_number)
        } else {
            match &self.snapshot {
                Some(snapshot) if snapshot.op >= self.log.base() => (Some(snapshot.clone()), snapshot.op),
                // In gap ourselves: we hold neither the entries nor the state below our base.
                _ => return Err(DropReason::CannotServe),
            }
        };
        let entries = self.log.entries_after(after, max);
        assert!(entries.len() <= max, "a round carries a bounded number of entries");
        let reply = NewState {
            view: self.view,
            op_number: self.log.op_number(),
            commit_number: self.commit_number,
            snapshot,
            after,
            entries,
        };
        // Our entries may not be durable yet; whoever receives them acknowledges them to the
        // leader, which counts that as proof of its own durability, so wait for ours.
        out.send_durable(from, Message::NewState(reply));
        self.stats.count("state_served");
        Ok(())
    }

    pub(super) fn on_new_state(&mut self, from: NodeId, message: NewState, out: &mut Outbox<MultiPaxos>) -> Handled {
        if !self.is_other_replica(from) {
            return Err(DropReason::NotReplica);
        }
        let end = message.after.checked_add(message.entries.len() as u64);
        let snapshot_matches = message.snapshot.as_ref().is_none_or(|s| s.op == message.after);
        if end.is_none_or(|end| end > message.op_number)
            || !snapshot_matches
            || message.commit_number > message.op_number
            || message.entries.len() > self.config.state_transfer_entries_max
        {
            return Err(DropReason::Malformed);
        }
        if message.view < self.view {
            return Err(DropReason::StaleView);
        }
        if message.view > self.view {
            return Err(DropReason::FutureView);
        }
        match self.status {
            Status::ViewChange => Err(DropReason::UnexpectedState),
            Status::Transfer => self.absorb_transfer(from, message, out),
            Status::Normal => self.absorb_catch_up(from, message, out),
        }
    }

    /// Status `transfer`: collect into the buffer; become normal once it is complete.
    fn absorb_transfer(&mut self, from: NodeId, message: NewState, out: &mut Outbox<MultiPaxos>) -> Handled {
        let log_max = self.config.log_max();
        let buffer = self.transfer.buffer.as_mut().expect("status transfer keeps a buffer");
        let end = buffer.end();
        let progressed = if let Some(snapshot) = message.snapshot {
            if snapshot.op <= end {
                return Err(DropReason::StaleTransfer);
            }
            if message.entries.len() > log_max {
                return Err(DropReason::Malformed);
            }
            buffer.base = snapshot.op;
            buffer.snapshot = Some(snapshot);
            buffer.entries = message.entries;
            true
        } else {
            if message.after > end {
                return Err(DropReason::StaleTransfer);
            }
            let skip = usize::try_from(end - message.after).unwrap_or(usize::MAX);
            let new = message.entries.len().saturating_sub(skip);
            if buffer.entries.len() + new > log_max {
                return Err(DropReason::Malformed);
            }
            buffer.entries.extend(message.entries.into_iter().skip(skip));
            new > 0
        };
        let target = buffer.target_op.map_or(message.op_number, |target| target.min(message.op_number));
        buffer.target_op = Some(target);
        let end = buffer.end();
        if end >= target && end >= self.commit_number {
            return self.complete_transfer(message.commit_number, out);
        }
        if progressed {
            // More to fetch: ask the same replica for the next round right away.
            self.ask_afresh(from, out);
        }
        Ok(())
    }

    /// The buffer reached a normal replica's op number: install it and become normal.
    fn complete_transfer(&mut self, responder_commit: u64, out: &mut Outbox<MultiPaxos>) -> Handled {
        let buffer = self.transfer.buffer.take().expect("status transfer keeps a buffer");
        if let Some(snapshot) = &buffer.snapshot {
            if self.executor.restore(snapshot).is_err() {
                // Start over, from another replica.
                self.transfer.buffer = Some(TransferBuffer::new(self.executor.executed()));
                return Err(DropReason::SnapshotCorrupt);
            }
            self.snapshot = Some(snapshot.clone());
            self.last_checkpoint = snapshot.op;
            self.bytes_since_checkpoint = 0;
            self.stats.count("snapshot_installed");
            self.log = super::log::Log::from_entries(buffer.base, buffer.entries);
            self.last_normal_view = self.view;
            self.persist_checkpoint(PersistMode::Replace, out);
        } else {
            assert_eq!(buffer.base, self.executor.executed(), "nothing executes while transferring");
            // Our log up to our executed op is committed; keep it and take the rest.
            self.log.splice(buffer.base, buffer.entries.clone());
            let record = Durable::Entries { view: self.view, after: buffer.base, entries: buffer.entries };
            self.persist(record, PersistMode::Append, out);
            self.last_normal_view = self.view;
        }
        self.status = Status::Normal;
        self.commit_through(self.log.base().max(responder_commit.min(self.log.op_number())), out);
        self.backup.leader_commit = responder_commit;
        self.backup.heard_from_leader = true;
        self.end_request(out);
        self.send_prepare_ok(out);
        self.execute_committed(out);
        if self.needs_state() {
            let leader = self.leader_of(self.view);
            self.request_state_now(leader, out);
        }
        assert_eq!(self.last_normal_view, self.view, "a completed transfer makes us normal");
        Ok(())
    }

    /// Status `normal`: fill our gap or extend our log.
    fn absorb_catch_up(&mut self, from: NodeId, message: NewState, out: &mut Outbox<MultiPaxos>) -> Handled {
        let leading = self.is_leader();
        let mut progressed = false;
        if let Some(snapshot) = &message.snapshot
            && snapshot.op > self.executor.executed()
        {
            self.install_snapshot(snapshot, leading, out)?;
            progressed = true;
        }
        let old_op = self.log.op_number();
        let mut appended = Vec::new();
        let mut op = message.after;
        for entry in message.entries {
            op += 1;
            if op <= self.executor.executed() {
                continue;
            }
            if op <= self.log.base() {
                // In gap: entries up to our base are committed; execute them directly.
                if op != self.executor.executed() + 1 {
                    break;
                }
                self.execute_entry(op, &entry, out);
                progressed = true;
                continue;
            }
            if op <= self.log.op_number() {
                continue;
            }
            if leading || op != self.log.op_number() + 1 || self.log.len() >= self.config.log_max() {
                break;
            }
            self.log.append(entry.clone());
            appended.push(entry);
        }
        if !appended.is_empty() {
            progressed = true;
            self.persist(
                Durable::Entries { view: self.view, after: old_op, entries: appended },
                PersistMode::Append,
                out,
            );
            self.send_prepare_ok(out);
        }
        if leading {
            self.execute_committed(out);
        } else {
            self.backup.leader_commit = self.backup.leader_commit.max(message.commit_number);
            self.drain_future(out);
            self.advance_backup_commit(out);
        }
        if !self.needs_state() {
            self.end_request(out);
        } else if progressed && self.transfer.requesting {
            self.ask_afresh(from, out);
        }
        Ok(())
    }

    /// Installs a snapshot beyond our executed op while normal.
    fn install_snapshot(&mut self, snapshot: &Arc<Snapshot>, leading: bool, out: &mut Outbox<MultiPaxos>) -> Handled {
        assert!(snapshot.op > self.executor.executed(), "only newer snapshots are installed");
        if leading && snapshot.op > self.log.op_number() {
            // A leader's log holds every committed entry of its view; this cannot be right.
            return Err(DropReason::SnapshotBeyondLog);
        }
        self.executor.restore(snapshot).map_err(|_| DropReason::SnapshotCorrupt)?;
        if snapshot.op >= self.log.op_number() {
            self.log.reset(snapshot.op);
        } else if snapshot.op > self.log.base() {
            self.log.truncate_prefix(snapshot.op);
        }
        self.commit_through(snapshot.op, out);
        self.snapshot = Some(snapshot.clone());
        self.last_checkpoint = snapshot.op;
        self.bytes_since_checkpoint = 0;
        self.persist_checkpoint(PersistMode::Replace, out);
        self.stats.count("snapshot_installed");
        if leading {
            // The snapshot executed requests the leader still counted as proposed.
            self.rebuild_proposed();
        }
        assert_eq!(self.executor.executed(), snapshot.op, "the snapshot's op is executed");
        Ok(())
    }
}
