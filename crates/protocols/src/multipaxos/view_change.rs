//! View change (VR Revisited §4.2), with logs that start at a snapshot base.
//!
//! A backup that stops hearing from its leader moves to view `v + 1`, persists the view number
//! (its promise to ignore lower views) and sends `StartViewChange`. With `f` of those from others
//! it sends the new leader a `DoViewChange` carrying its last normal view, op number, commit
//! number and its log after its base. The new leader, with `f + 1` of them, adopts the log of the
//! largest (last normal view, op number), takes the largest commit number, persists, sends
//! `StartView` and becomes normal; backups adopt that log, persist it and acknowledge.
//!
//! Why no committed entry is lost: an entry committed in view `u` is durable at a majority that
//! was normal in `u`. A replica is normal in a view only with a log that contains the whole log
//! its leader started the view with (a `StartView`, or a state transfer that reached a normal
//! replica's op number), and never drops entries until it is normal in a later view. The
//! `DoViewChange` majority meets the committing majority, so the largest last normal view in it is
//! at least `u`; if it is `u`, the longest log of view `u` holds the entry; if it is later, that
//! view's starting log held it by induction.
//!
//! Snapshot bases: a `DoViewChange` carries only the entries after its sender's base, and the
//! entries at or below any base are committed. The new leader keeps its own log up to its own
//! commit number and takes the chosen log after it. When the chosen log's base lies above our own
//! commit number, the entries between are committed but not held here: the log restarts at the
//! chosen base and the state below it arrives by state transfer (the replica is in *gap*:
//! executed < log base). `StartView` receivers merge the same way.

use super::log::Log;
use super::messages::{DoViewChange, Entry, Message, StartView};
use super::replica::{DropReason, Handled, Replica, Status};
use super::{Durable, Flaw, MultiPaxos, Timer};
use ordo_core::{NodeId, Outbox, PersistMode};
use std::collections::{BTreeMap, BTreeSet};

/// View-change progress in the current view.
#[derive(Debug, Default)]
pub struct ViewChangeState {
    /// Other replicas that sent `StartViewChange` for our view.
    pub start_from: BTreeSet<NodeId>,
    /// `DoViewChange`s received for our view (we lead it), ours included once sent.
    pub do_view_change: BTreeMap<NodeId, DoViewChange>,
    /// We sent our `DoViewChange` for this view.
    pub sent_do_view_change: bool,
    /// Heartbeats spent in this view change: the `DoViewChange` is resent at the powers of two
    /// and every 64th.
    pub resend_beats: u32,
}

/// Checks the internal consistency of a log suffix (base, op number, entries, commit number).
fn log_suffix_is_consistent(log_base: u64, op_number: u64, commit_number: u64, entries: &[Entry]) -> bool {
    let Some(length) = op_number.checked_sub(log_base) else {
        return false;
    };
    length == entries.len() as u64 && log_base <= commit_number && commit_number <= op_number
}

/// The reused-op canary's flaw: it takes the entries above the highest commit number offered
/// for uncommitted and drops them, so the new leader proposes at their op numbers again. Wrong:
/// the old leader may have committed them (a majority acknowledged) without telling anyone.
fn drop_entries_above(offer: &mut DoViewChange, max_commit: u64) {
    let Some(keep) = max_commit.checked_sub(offer.log_base) else {
        return;
    };
    offer.entries.truncate(usize::try_from(keep).unwrap_or(usize::MAX));
    assert!(offer.log_base + offer.entries.len() as u64 <= offer.op_number, "only a suffix is dropped");
}

impl Replica {
    /// Moves to `view` in view-change status: persists the view (the promise), then announces it.
    pub(super) fn start_view_change(&mut self, view: u64, out: &mut Outbox<MultiPaxos>) {
        assert!(view > self.view, "view changes move forward");
        self.view = view;
        self.status = Status::ViewChange;
        self.reset_role_state(out);
        self.persist(Durable::View { view }, PersistMode::Append, out);
        self.stats.count("view_change_started");
        out.multicast_durable(&self.others, Message::StartViewChange { view });
        self.arm_view_change_timer(out);
        self.maybe_send_do_view_change(out);
        assert_eq!(self.status, Status::ViewChange, "with f > 0 a view change needs others");
    }

    /// After a restart in the middle of a view change: announce it again (the view is durable).
    pub(super) fn resume_view_change(&mut self, out: &mut Outbox<MultiPaxos>) {
        assert_eq!(self.status, Status::ViewChange, "resuming a view change");
        assert!(self.last_normal_view < self.view, "we were not normal in this view");
        out.multicast_durable(&self.others, Message::StartViewChange { view: self.view });
        self.arm_view_change_timer(out);
        self.maybe_send_do_view_change(out);
    }

    /// Heartbeat in view-change status: messages get lost, so announce again (the large
    /// `DoViewChange` with back-off).
    pub(super) fn resend_view_change(&mut self, out: &mut Outbox<MultiPaxos>) {
        assert_eq!(self.status, Status::ViewChange, "resending only during a view change");
        out.multicast_durable(&self.others, Message::StartViewChange { view: self.view });
        let leader = self.leader_of(self.view);
        self.view_change.resend_beats = self.view_change.resend_beats.saturating_add(1);
        let beats = self.view_change.resend_beats;
        // A `DoViewChange` carries the whole log, a megabyte or more with a big state: resent at
        // every heartbeat, it once filled sockets faster than they drained, lost fragments, and
        // kept a real cluster changing views for minutes. Backed off as `retransmit` is.
        let due = crate::backoff::is_due(u64::from(beats), 64);
        if self.view_change.sent_do_view_change && leader != self.id && due {
            let message = Message::DoViewChange(self.own_do_view_change());
            out.send_durable(leader, message);
        }
    }

    pub(super) fn on_start_view_change(&mut self, from: NodeId, view: u64, out: &mut Outbox<MultiPaxos>) -> Handled {
        if !self.is_other_replica(from) {
            return Err(DropReason::NotReplica);
        }
        if view < self.view {
            return Err(DropReason::StaleView);
        }
        if view > self.view {
            self.start_view_change(view, out);
        } else if self.status == Status::Normal {
            return Err(DropReason::ViewAlreadyStarted);
        } else if self.status == Status::Transfer {
            return Err(DropReason::Transferring);
        }
        assert_eq!(self.status, Status::ViewChange, "only a view change counts start-view-changes");
        self.view_change.start_from.insert(from);
        self.maybe_send_do_view_change(out);
        Ok(())
    }

    fn own_do_view_change(&self) -> DoViewChange {
        DoViewChange {
            view: self.view,
            last_normal_view: self.last_normal_view,
            op_number: self.log.op_number(),
            commit_number: self.commit_number,
            log_base: self.log.base(),
            entries: self.log.all_entries(),
        }
    }

    /// With `f` start-view-changes from others, offer our log to the new leader.
    fn maybe_send_do_view_change(&mut self, out: &mut Outbox<MultiPaxos>) {
        if self.status != Status::ViewChange
            || self.view_change.sent_do_view_change
            || self.view_change.start_from.len() < self.quorum_others
        {
            return;
        }
        self.view_change.sent_do_view_change = true;
        let do_view_change = self.own_do_view_change();
        let leader = self.leader_of(self.view);
        if leader == self.id {
            self.view_change.do_view_change.insert(self.id, do_view_change);
            self.maybe_finish_view_change(out);
        } else {
            out.send_durable(leader, Message::DoViewChange(do_view_change));
        }
    }

    pub(super) fn on_do_view_change(
        &mut self,
        from: NodeId,
        message: DoViewChange,
        out: &mut Outbox<MultiPaxos>,
    ) -> Handled {
        if !self.is_other_replica(from) {
            return Err(DropReason::NotReplica);
        }
        if message.view < self.view {
            return Err(DropReason::StaleView);
        }
        if self.leader_of(message.view) != self.id {
            return Err(DropReason::NotLeaderOfView);
        }
        let consistent =
            log_suffix_is_consistent(message.log_base, message.op_number, message.commit_number, &message.entries);
        if !consistent || message.last_normal_view >= message.view || message.entries.len() > self.config.log_max() {
            return Err(DropReason::Malformed);
        }
        if message.view > self.view {
            self.start_view_change(message.view, out);
        } else if self.status == Status::Normal {
            // The sender missed our StartView.
            self.send_start_view(from, out);
            return Err(DropReason::ViewAlreadyStarted);
        } else if self.status == Status::Transfer {
            return Err(DropReason::Transferring);
        }
        assert_eq!(self.status, Status::ViewChange, "only a view change collects do-view-changes");
        self.view_change.do_view_change.insert(from, message);
        self.maybe_finish_view_change(out);
        Ok(())
    }

    fn maybe_finish_view_change(&mut self, out: &mut Outbox<MultiPaxos>) {
        if self.status == Status::ViewChange
            && self.is_leader()
            && self.view_change.do_view_change.len() > self.quorum_others
        {
            self.finish_view_change(out);
        }
    }

    /// The sender whose log the new view starts from: the largest (last normal view, op
    /// number); on ties the highest node id, whose log is then the same anyway. The lossy canary
    /// takes the shortest log instead.
    fn choose_log(&self) -> NodeId {
        let offers = self.view_change.do_view_change.iter();
        let chosen = match self.flaw {
            Flaw::LossyViewChange => offers.min_by_key(|(id, offer)| (offer.op_number, **id)),
            Flaw::None | Flaw::EarlyReply | Flaw::ReusedOp | Flaw::ReexecutedRetry => {
                offers.max_by_key(|(id, offer)| (offer.last_normal_view, offer.op_number, **id))
            }
        };
        *chosen.expect("a view change finishes with offers").0
    }

    /// The new leader, with `f + 1` offers: adopts the chosen log and starts the view.
    fn finish_view_change(&mut self, out: &mut Outbox<MultiPaxos>) {
        let chosen_from = self.choose_log();
        let mut offers = std::mem::take(&mut self.view_change.do_view_change);
        let max_commit = offers.values().map(|offer| offer.commit_number).max().expect("a quorum of offers");
        let mut chosen = offers.remove(&chosen_from).expect("the chosen offer is among the offers");
        let holds_committed = chosen.op_number >= max_commit && chosen.op_number >= self.commit_number;
        if !holds_committed && self.flaw != Flaw::LossyViewChange {
            // VR's view-change argument: the log of the latest normal view holds every committed
            // entry, so only a lying peer gets here. Adopting its log would lose committed
            // entries; the view is abandoned instead, and the timer starts the next one.
            self.stats.drop_input(DropReason::ContradictoryOffers.name());
            return;
        }
        if self.flaw == Flaw::ReusedOp {
            drop_entries_above(&mut chosen, max_commit);
        }
        self.adopt_log(chosen.log_base, chosen.entries, out);
        self.last_normal_view = self.view;
        self.status = Status::Normal;
        self.commit_through(max_commit.min(self.log.op_number()), out);
        self.backup.leader_commit = self.commit_number;
        out.cancel_timer(Timer::ViewChange);
        self.start_leading();
        self.stats.count("view_change");
        out.multicast_durable(&self.others, Message::StartView(self.own_start_view()));
        if self.others.is_empty() {
            // Alone, the leader learns that its adopted log is durable from a message to itself.
            let message = Message::PrepareOk { view: self.view, op_number: self.log.op_number() };
            out.send_durable(self.id, message);
        }
        self.execute_committed(out);
        if self.needs_state() {
            let source = if chosen_from == self.id { self.others[0] } else { chosen_from };
            self.request_state_now(source, out);
        }
        assert_eq!(self.last_normal_view, self.view, "the new leader is normal in its view");
    }

    /// Replaces our log by `entries` (after `log_base`), keeping our own committed prefix, and
    /// persists the result as accepted in the current view. Returns nothing; the log is then
    /// the adopted one.
    pub(super) fn adopt_log(&mut self, log_base: u64, entries: Vec<Entry>, out: &mut Outbox<MultiPaxos>) {
        let own_commit = self.commit_number;
        assert!(own_commit >= self.log.base(), "our commit number is within our log");
        if log_base <= own_commit {
            // Our entries up to our commit number are committed, hence the same as the offered
            // ones: keep them and take what follows.
            let skip = usize::try_from(own_commit - log_base).unwrap_or(usize::MAX);
            let tail: Vec<Entry> = entries.into_iter().skip(skip).collect();
            self.log.splice(own_commit, tail.clone());
            let record = Durable::Entries { view: self.view, after: own_commit, entries: tail };
            self.persist(record, PersistMode::Append, out);
        } else {
            // The offered log starts above our commit number: our entries between are not known
            // committed, and the committed ones are below the offered base. Restart the log
            // there; the state below it comes by state transfer.
            self.log = Log::from_entries(log_base, entries.clone());
            self.stats.count("view_change_gap");
            self.persist(Durable::Log { view: self.view, log_base, entries }, PersistMode::Append, out);
        }
        assert!(self.log.op_number() >= own_commit, "the adopted log keeps our committed prefix");
    }

    /// Sends the log of the view to one backup.
    pub(super) fn send_start_view(&self, to: NodeId, out: &mut Outbox<MultiPaxos>) {
        assert!(self.status == Status::Normal && self.is_leader(), "only a normal leader starts a view");
        out.send_durable(to, Message::StartView(self.own_start_view()));
    }

    fn own_start_view(&self) -> StartView {
        StartView {
            view: self.view,
            op_number: self.log.op_number(),
            commit_number: self.commit_number,
            log_base: self.log.base(),
            entries: self.log.all_entries(),
        }
    }

    pub(super) fn on_start_view(&mut self, from: NodeId, message: StartView, out: &mut Outbox<MultiPaxos>) -> Handled {
        if message.view < self.view {
            return Err(DropReason::StaleView);
        }
        if from != self.leader_of(message.view) || from == self.id {
            return Err(DropReason::NotFromLeader);
        }
        if !log_suffix_is_consistent(message.log_base, message.op_number, message.commit_number, &message.entries)
            || message.entries.len() > self.config.log_max()
        {
            return Err(DropReason::Malformed);
        }
        if message.view == self.view && self.status == Status::Normal {
            // A resent StartView: our acknowledgement may have been lost.
            self.send_prepare_ok(out);
            return Err(DropReason::ViewAlreadyStarted);
        }
        if message.op_number < self.commit_number {
            // Only a broken leader (a canary) can offer less than what we know is committed.
            return Err(DropReason::StartViewBehindCommit);
        }
        self.view = message.view;
        self.reset_role_state(out);
        self.adopt_log(message.log_base, message.entries, out);
        self.last_normal_view = self.view;
        self.status = Status::Normal;
        self.backup.leader_commit = message.commit_number;
        self.backup.heard_from_leader = true;
        self.commit_through(message.commit_number.min(self.log.op_number()), out);
        self.send_prepare_ok(out);
        self.arm_view_change_timer(out);
        self.execute_committed(out);
        if self.needs_state() {
            self.request_state_now(from, out);
        }
        assert_eq!(self.last_normal_view, self.view, "normal in the started view");
        Ok(())
    }

    /// Rebuilds the leader's bookkeeping at the start of its view.
    fn start_leading(&mut self) {
        assert!(self.status == Status::Normal && self.is_leader(), "leading a normal view");
        if self.log.op_number() > self.commit_number {
            self.leader.in_flight.push_back(self.log.op_number());
        }
        self.rebuild_proposed();
        self.rebuild_speculative();
    }

    /// Recomputes which requests the leader holds unexecuted: those in its log beyond what it
    /// executed, and those queued.
    pub(super) fn rebuild_proposed(&mut self) {
        let from = self.executor.executed().max(self.log.base());
        let entries = self.log.iter_after(from).map(|(_, entry)| entry).chain(self.leader.pending.iter());
        self.leader.proposed = entries.map(|entry| entry.id).collect();
    }
}
