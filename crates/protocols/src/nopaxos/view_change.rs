//! View change (paper §5.2.3, fn 4, fn 5): a new leader, a new OUM session, or both.
//!
//! A replica moves to a higher view when it suspects the leader (leader-num + 1), when libOUM
//! reports SESSION-TERMINATED (session-num := the new session), or when a peer's view-change
//! message names a view with a higher component (component-wise maximum, so leader-num and
//! session-num never decrease, I4). It sends `ViewChangeReq` to all and `ViewChange` (last
//! normal view, session-msg-num, log) to the new leader, and resends them until the view starts
//! or times out into the next leader-num.
//!
//! The new leader, with f + 1 `ViewChange`s of its view including its own, merges the logs of
//! the largest last-normal view (started views are comparable, fn 4): a slot is a NO-OP if any
//! of them holds a NO-OP there, else the request one of them holds. Its session-msg-num comes
//! from the longest of those logs (the same replica as the merged log's last entry, §5.4 (2)),
//! or 0 when the view opens a new session. Why this keeps every committed slot: a committed
//! value was processed by f + 1 replicas of its view, one of which is in any f + 1 view-change
//! quorum; logs of later normal views already carry it; and a NO-OP is committed only by the
//! leader, whose view's requests at that slot were never successful.
//!
//! A replica accepts `StartView` of a strictly higher view, or of its own view while it is
//! still changing view (a Normal replica never re-applies its current view's `StartView`,
//! which would roll its log back). It acknowledges it (fn 5); the leader resends to replicas
//! that did not, a few times, and answers any `ViewChange` of its started view with the
//! `StartView` again.
//!
//! A replica whose executed prefix is not a prefix of the new log (an ousted leader that ran
//! requests the new view dropped, §5.3) discards its state and executes the agreed log again.

use super::gap_agreement::{Deferred, Gap};
use super::log::Log;
use super::messages::{Entry, Message, SharedLog, ViewId};
use super::replica::{DropReason, Handled, Replica, Status};
use super::{Flaw, NoPaxos};
use ordo_core::{NodeId, Outbox};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most doublings of the view-change timeout after view changes in a row that timed out (32
/// times the configured timeout). Logs travel whole, with the state in their checkpoint: with
/// a million keys on real processes, a view change took longer than the 1 s timeout, so every
/// one timed out and the next started, for good (a soak, 2026-11-28).
pub(super) const STALLED_VIEWS_MAX: u32 = 5;

/// How often a leader resends `StartView` to a replica that did not acknowledge it.
const START_VIEW_RESENDS_MAX: u32 = 3;

/// One replica's `ViewChange`.
#[derive(Clone, Debug)]
pub struct Offer {
    last_normal: ViewId,
    session_msg_num: u64,
    log: SharedLog,
}

/// View-change bookkeeping.
#[derive(Debug, Default)]
pub struct ViewChangeState {
    /// As the leader of the view being formed: offers received, by sender.
    offers: BTreeMap<NodeId, Offer>,
    /// This replica's own offer (built once per view change).
    own_log: Option<SharedLog>,
    /// When the view change began, and when it was last resent.
    started_ns: u64,
    resent_ns: u64,
    timeout_ns: u64,
    /// As a leader whose view started: replicas yet to acknowledge, and resends so far.
    unacked: BTreeSet<NodeId>,
    resends: u32,
    /// As a leader whose view started: what it sent.
    start_view: Option<(u64, SharedLog)>,
}

impl ViewChangeState {
    /// Panics if more offers are held than there are replicas.
    pub fn check(&self, replicas: usize) {
        assert!(self.offers.len() <= replicas, "one offer per replica at most");
        assert!(self.unacked.len() < replicas.max(1), "the leader never waits for itself");
    }
}

impl Replica {
    /// Moves to `target` (§5.2.3 step 1).
    pub(super) fn start_view_change(&mut self, target: ViewId, now: u64, out: &mut Outbox<NoPaxos>) {
        assert!(self.view.below(target), "a view change moves to a higher view");
        if self.gap.consumed_unfilled() {
            // The unresolved drop notification is given back: it is not represented in the log.
            self.oum.unconsume();
        }
        if self.view.session_num != target.session_num {
            self.stats.count("view_change_session");
        }
        self.gap = Gap::None;
        self.lookup_ahead = None;
        self.deferred = Deferred::default();
        self.view = target;
        self.status = Status::ViewChange;
        self.vc = ViewChangeState {
            own_log: Some(Arc::new(self.log.clone())),
            started_ns: now,
            timeout_ns: self.random_timeout(),
            ..ViewChangeState::default()
        };
        self.stats.count("view_change");
        self.send_view_change(now, out);
    }

    fn send_view_change(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        assert_eq!(
            self.oum.session(),
            self.last_normal.session_num,
            "the OUM listens to the last normal view's session"
        );
        self.vc.resent_ns = now;
        out.multicast(&self.others, Message::ViewChangeReq { view: self.view });
        let log = self.vc.own_log.clone().expect("a view change holds its own offer");
        let offer = Offer { last_normal: self.last_normal, session_msg_num: self.oum.session_msg_num(), log };
        let leader = self.leader_of(self.view);
        if leader == self.id {
            self.vc.offers.insert(self.id, offer);
            self.maybe_start_view(now, out);
        } else {
            let Offer { last_normal, session_msg_num, log } = offer;
            out.send(leader, Message::ViewChange { view: self.view, last_normal, session_msg_num, log });
        }
    }

    /// Periodic during a view change: resend, or give up on this leader.
    pub(super) fn view_change_tick(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        if now.saturating_sub(self.vc.started_ns) > self.vc.timeout_ns {
            self.stats.count("view_change_timeout");
            self.stalled_views = (self.stalled_views + 1).min(STALLED_VIEWS_MAX);
            let next = ViewId::new(self.view.leader_num + 1, self.view.session_num);
            self.start_view_change(next, now, out);
        } else if now.saturating_sub(self.vc.resent_ns) >= self.vc.timeout_ns / 4 {
            self.send_view_change(now, out);
        }
    }

    pub(super) fn on_view_change_req(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if !self.others.contains(&from) {
            return Err(DropReason::SenderIsNotAnotherReplica);
        }
        if view.covered_by(self.view) {
            return Err(DropReason::ViewChangeReqNotAboveOurView);
        }
        self.start_view_change(self.view.join(view), now, out);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_view_change(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        last_normal: ViewId,
        session_msg_num: u64,
        log: SharedLog,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if !self.others.contains(&from) {
            return Err(DropReason::SenderIsNotAnotherReplica);
        }
        if session_msg_num > log.len() || !last_normal.covered_by(view) {
            return Err(DropReason::MalformedViewChange);
        }
        if !view.covered_by(self.view) {
            self.start_view_change(self.view.join(view), now, out);
        }
        if view != self.view {
            return Err(DropReason::ViewChangeForAnotherView);
        }
        if self.leader_of(view) != self.id {
            return Err(DropReason::ViewChangeForAViewAnotherReplicaLeads);
        }
        match self.status {
            Status::ViewChange => {
                self.vc.offers.insert(from, Offer { last_normal, session_msg_num, log });
                self.maybe_start_view(now, out);
                Ok(())
            }
            Status::Normal => {
                // The sender missed our StartView: it gets the log as it is now.
                self.stats.count("start_view_to_late_replica");
                out.send(from, self.current_log_message());
                Ok(())
            }
            _ => Err(DropReason::NotChangingView),
        }
    }

    /// §5.2.3 step 2: with f + 1 offers including its own, the new leader merges and starts.
    fn maybe_start_view(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        if self.status != Status::ViewChange
            || self.vc.offers.len() < self.f + 1
            || !self.vc.offers.contains_key(&self.id)
        {
            return;
        }
        let (session_msg_num, merged) = self.merge();
        let log: SharedLog = Arc::new(merged);
        let view = self.view;
        self.vc.offers.clear();
        if let Err(reason) = self.install_view(view, session_msg_num, log.as_ref().clone(), now, out) {
            // The checkpoint taken does not decode: this view cannot start here; the view
            // change times out into the next one.
            self.stats.drop_input(reason.name());
            return;
        }
        // Installing consumes buffered OUM messages, which may already have moved this replica
        // on to a later view (SESSION-TERMINATED): the StartView names the view it merged, and
        // the resend bookkeeping belongs to that view only.
        out.multicast(&self.others, Message::StartView { view, session_msg_num, log: log.clone() });
        if self.view == view && self.status == Status::Normal {
            self.vc.unacked = self.others.iter().copied().collect();
            self.vc.start_view = Some((session_msg_num, log));
            self.vc.resent_ns = now;
        }
    }

    /// The merge rule (see the module docs). Returns the session-msg-num and the log.
    ///
    /// Offers may be truncated at different slots; every truncated slot is committed, so the
    /// highest checkpoint among the selected offers starts the merged log and the rule applies
    /// to the slots after it, which every selected offer long enough holds.
    fn merge(&self) -> (u64, Log) {
        let best = self.vc.offers.values().map(|offer| offer.last_normal).max_by_key(|v| v.rank()).expect("offers");
        let selected: Vec<&Offer> = self.vc.offers.values().filter(|offer| offer.last_normal == best).collect();
        let longest = selected.iter().max_by_key(|offer| offer.log.len()).expect("the best view has an offer");
        let checkpoint = selected.iter().map(|offer| &offer.log.checkpoint).max_by_key(|c| c.slot).expect("offers");
        let mut merged = Log { checkpoint: checkpoint.clone(), entries: Vec::new() };
        for slot in merged.base() + 1..=longest.log.len() {
            let mut no_op = false;
            let mut request = None;
            for offer in &selected {
                match offer.log.get(slot) {
                    Some(Entry::NoOp) => no_op = true,
                    Some(entry) if request.is_none() => request = Some(entry.clone()),
                    _ => {}
                }
            }
            let prefer_request = self.flaw == Flaw::RequestOverNoOp && request.is_some();
            merged.push(if no_op && !prefer_request { Entry::NoOp } else { request.unwrap_or(Entry::NoOp) });
        }
        let same_session = best.session_num == self.view.session_num;
        let session_msg_num = if same_session { longest.session_msg_num } else { 0 };
        (session_msg_num, merged)
    }

    pub(super) fn on_start_view(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        session_msg_num: u64,
        log: SharedLog,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if !self.others.contains(&from) || from != self.leader_of(view) {
            return Err(DropReason::StartViewNotFromTheViewSLeader);
        }
        if session_msg_num > log.len() {
            return Err(DropReason::MalformedStartView);
        }
        // The leader's current log for a follower behind its checkpoint (`log.rs`): never a
        // duplicate of the StartView this replica installed, whose checkpoint it covers.
        let transfer = view == self.view && self.status == Status::Normal && log.base() > self.log_len();
        if view == self.view && self.status == Status::Normal && !transfer {
            out.send(from, Message::StartViewAck { view });
            return Err(DropReason::StartViewOfTheCurrentView);
        }
        let accept = transfer || self.view.below(view) || (view == self.view && self.status == Status::ViewChange);
        if !accept {
            return Err(DropReason::StartViewOfAnOlderOrIncomparableView);
        }
        if transfer {
            self.stats.count("state_transfer");
        }
        self.install_view(view, session_msg_num, log.as_ref().clone(), now, out)?;
        out.send(from, Message::StartViewAck { view });
        Ok(())
    }

    pub(super) fn on_start_view_ack(&mut self, from: NodeId, view: ViewId) -> Handled {
        if view != self.view || self.status != Status::Normal || !self.is_leader() {
            return Err(DropReason::StartViewAckNotForOurStartedView);
        }
        self.vc.unacked.remove(&from);
        Ok(())
    }

    /// Leader, periodic: resend `StartView` to replicas that did not acknowledge it (fn 5), at
    /// the view-change timeout's pace and a few times only (logs are whole; a replica still
    /// changing view asks again with its `ViewChange`).
    pub(super) fn resend_start_view(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        if self.vc.unacked.is_empty() || self.vc.resends >= START_VIEW_RESENDS_MAX {
            return;
        }
        if now.saturating_sub(self.vc.resent_ns) < self.config.view_change_timeout_ns {
            return;
        }
        let Some((session_msg_num, log)) = self.vc.start_view.clone() else { return };
        self.vc.resent_ns = now;
        self.vc.resends += 1;
        for &replica in &self.vc.unacked {
            out.send(replica, Message::StartView { view: self.view, session_msg_num, log: log.clone() });
        }
    }

    /// §5.2.3 step 3: installs the view's log, listens at its OUM position, executes (the
    /// leader all of it, a follower up to its sync-point), and replies for the requests past the
    /// sync-point so their clients can complete in this view.
    ///
    /// The state is kept when it covers the new log's checkpoint and what it executed past its
    /// own sync-point (speculatively, as a leader) is what the new log holds there; slots up to
    /// the sync-point are committed, the same in every later view. Otherwise it is rebuilt
    /// from the new log's checkpoint (an error if that does not decode; nothing changes then).
    pub(super) fn install_view(
        &mut self,
        view: ViewId,
        session_msg_num: u64,
        log: Log,
        now: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        assert!(session_msg_num <= log.len(), "the OUM position is within the log");
        let executed = self.exec.executed();
        let synced = self.sync.sync_point;
        let speculative_kept =
            (synced + 1..=executed).all(|slot| log.get(slot).map(Entry::id) == self.log.get(slot).map(Entry::id));
        let keep = executed >= log.base() && executed <= log.len() && (executed <= synced || speculative_kept);
        if !keep {
            let restored = self.exec.restored(&log.checkpoint).map_err(|_| DropReason::MalformedCheckpoint)?;
            self.stats.count(if executed > synced && !speculative_kept {
                "state_reset"
            } else {
                "checkpoint_installed"
            });
            self.exec = restored;
        }
        self.log = log;
        self.view = view;
        self.last_normal = view;
        self.status = Status::Normal;
        self.oum.listen(view.session_num, session_msg_num);
        self.session_base = self.log_len() - session_msg_num;
        self.gap = Gap::None;
        self.lookup_ahead = None;
        self.deferred = Deferred::default();
        self.sync.start_view(self.log_len());
        // The checkpoint's slots are committed.
        self.sync.sync_point = self.sync.sync_point.max(self.log.base());
        self.heard_from_leader_ns = now;
        self.stalled_views = 0;
        self.leader_timeout_ns = self.random_timeout();
        self.stats.count("view_started");
        let through = if self.is_leader() { self.log_len() } else { self.sync.sync_point.min(self.log_len()) };
        self.execute_through(through.max(self.exec.executed()), out);
        for slot in self.sync.sync_point + 1..=self.log_len() {
            if let Some(id) = self.log.at(slot).id() {
                let result = self.result_for(slot);
                out.send(id.client.node(), Message::Reply { view, slot, id, result });
            }
        }
        self.maybe_truncate();
        self.pump(now, out);
        Ok(())
    }
}
