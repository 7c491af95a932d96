//! Synchronisation (paper §5.2.4; the paper defers the details to its tech report, so this
//! follows the authors' TLA+ `SYNC-PREPARE / SYNC-REP / SYNC-COMMIT` with EXT-CODE's compact
//! form, spec §6.5).
//!
//! Every heartbeat the leader sends each follower `SyncPrepare { from, through, no_ops }`: its
//! log is final through `through` (its length), and the NO-OPs among slots `from + 1 ..=
//! through` are `no_ops`, where `from` is what that follower last acknowledged (or the view's
//! start, where every replica holds the `StartView` log). Within a view a follower's entries
//! differ from the leader's only where the leader put a NO-OP (both took the same OUM
//! positions), so once the follower holds `through` slots and applies those NO-OPs its log
//! equals the leader's through `through`; it answers `SyncRep { through }`. With f followers at
//! or past a slot, that slot is committed (f + 1 replicas of the view, the leader included,
//! hold the same value, §5.4): the leader moves its sync-point there and sends `SyncCommit`.
//! A follower moves its sync-point to the lower of that and what it acknowledged, and executes
//! up to it (I12, I14). `SyncPrepare` is also the leader's heartbeat; a replica that receives
//! one from the leader of a higher view has missed that view and joins it.

use super::NoPaxos;
use super::messages::{Entry, Message, ViewId};
use super::replica::{DropReason, Handled, Replica, Status};
use ordo_core::{NodeId, Outbox};
use std::collections::{BTreeMap, BTreeSet};

/// Most NO-OP slots in one `SyncPrepare`; a longer stretch is synchronised over several.
pub const SYNC_NO_OPS_MAX: usize = 1024;

/// Synchronisation state.
#[derive(Debug, Default)]
pub struct SyncState {
    /// Every slot up to here is committed; followers executed up to it.
    pub sync_point: u64,
    /// Follower: its log equals the leader's through here, in this view.
    prepared: u64,
    /// The length of the `StartView` log of this view.
    view_start: u64,
    /// Leader: the highest `through` each follower acknowledged in this view.
    acked: BTreeMap<NodeId, u64>,
    /// Leader: its NO-OP slots after `view_start`.
    no_ops: BTreeSet<u64>,
}

impl SyncState {
    /// A new view starts with a log of `log_len` slots that every member holds (so no NO-OP
    /// of the view is yet to be synchronised).
    pub fn start_view(&mut self, log_len: u64) {
        self.sync_point = self.sync_point.min(log_len);
        self.prepared = log_len;
        self.view_start = log_len;
        self.acked.clear();
        self.no_ops.clear();
    }

    /// Leader: it appended a NO-OP at `slot`.
    pub fn leader_no_op(&mut self, slot: u64) {
        assert!(slot > self.view_start, "NO-OPs of this view follow its start");
        self.no_ops.insert(slot);
    }

    /// Panics if the bookkeeping contradicts itself.
    pub fn check(&self, log_len: u64) {
        assert!(self.sync_point <= log_len, "the sync-point lies in the log");
        assert!(self.acked.values().all(|&through| through <= log_len), "acknowledged slots lie in the log");
        assert!(self.no_ops.iter().all(|&slot| slot > self.view_start && slot <= log_len), "NO-OPs lie in the view");
    }
}

impl Replica {
    /// Leader, every heartbeat: a `SyncPrepare` to each follower.
    pub(super) fn send_sync_prepares(&mut self, out: &mut Outbox<NoPaxos>) {
        let log_len = self.log_len();
        for &follower in self.others.iter() {
            let from = self.sync.acked.get(&follower).copied().unwrap_or(self.sync.view_start).min(log_len);
            let no_ops: Vec<u64> =
                self.sync.no_ops.range(from + 1..log_len + 1).take(SYNC_NO_OPS_MAX).copied().collect();
            // Past the cap, stop just before the first NO-OP left out.
            let through = match self.sync.no_ops.range(from + 1..log_len + 1).nth(SYNC_NO_OPS_MAX) {
                Some(&left_out) => left_out - 1,
                None => log_len,
            };
            out.send(follower, Message::SyncPrepare { view: self.view, from, through, no_ops });
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_sync_prepare(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        start: u64,
        through: u64,
        no_ops: &[u64],
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        let joinable = matches!(self.status, Status::Normal | Status::ViewChange);
        if joinable && self.others.contains(&from) && self.view.below(view) && from == self.leader_of(view) {
            // A view started without us: join it (its leader answers our view-change with the log).
            self.stats.count("joined_started_view");
            self.start_view_change(view, now, out);
            return Ok(());
        }
        self.check_from_leader(now, from, view, DropReason::SyncPrepareNotFromTheLeader)?;
        let well_formed = start <= through && no_ops.windows(2).all(|w| w[0] < w[1]);
        if !well_formed || no_ops.iter().any(|&slot| slot <= start || slot > through) {
            return Err(DropReason::MalformedSyncPrepare);
        }
        if through > self.log_len() {
            return Err(DropReason::SyncPrepareBeyondTheLog);
        }
        if start > self.sync.prepared {
            return Err(DropReason::SyncPrepareFromBeyondWhatWeAgreed);
        }
        let synced = self.sync.sync_point;
        for &slot in no_ops.iter().filter(|&&slot| slot > synced) {
            if slot <= self.exec.executed() {
                self.rewind_state(out);
            }
            self.log.set(slot, Entry::NoOp);
        }
        self.sync.prepared = self.sync.prepared.max(through);
        out.send(from, Message::SyncRep { view, through });
        Ok(())
    }

    pub(super) fn on_sync_rep(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        through: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        if !self.is_leader() {
            return Err(DropReason::SyncRepAtAFollower);
        }
        if through > self.log_len() {
            return Err(DropReason::SyncRepBeyondTheLog);
        }
        let acked = self.sync.acked.entry(from).or_default();
        *acked = (*acked).max(through);
        // The f-th highest acknowledgement: f followers and the leader hold the log through it.
        let mut points: Vec<u64> = self.others.iter().map(|r| self.sync.acked.get(r).copied().unwrap_or(0)).collect();
        points.sort_unstable_by(|a, b| b.cmp(a));
        let point = if self.f == 0 { self.log_len() } else { points[self.f - 1] };
        if point > self.sync.sync_point {
            self.observe_committed(self.sync.sync_point, point, out);
            self.sync.sync_point = point;
            self.maybe_truncate();
            self.stats.count("sync");
            out.multicast(&self.others, Message::SyncCommit { view, through: point });
            self.maybe_gap_committed(out);
            self.pump(now, out);
        }
        Ok(())
    }

    pub(super) fn on_sync_commit(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        through: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.check_from_leader(now, from, view, DropReason::SyncCommitNotFromTheLeader)?;
        let point = through.min(self.sync.prepared).min(self.log_len());
        if point <= self.sync.sync_point {
            return Ok(());
        }
        self.observe_committed(self.sync.sync_point, point, out);
        self.sync.sync_point = point;
        if self.exec.executed() < point {
            self.execute_through(point, out);
        }
        self.maybe_truncate();
        Ok(())
    }
}
