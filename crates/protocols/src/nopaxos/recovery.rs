//! Recovery of a restarted replica (paper §5.2.5: "a direct equivalent of the Viewstamped
//! Replication protocol"; spec §6.6).
//!
//! A replica keeps its log in memory only, so a restarted replica has lost every promise it
//! made: requests it acknowledged, GAP-COMMIT-REPs, view-change offers. It must not take part
//! with that amnesia (its answers could complete a quorum the lost state contradicts). So it
//! persists one record, its incarnation, and on restart:
//!
//! 1. once the new incarnation is durable it sends `Recovery { nonce: incarnation }` to every
//!    replica, and again every quarter view-change timeout until it has recovered; it answers
//!    nothing else meanwhile (`Status::Recovering`, reported by `is_recovering`, so fault
//!    injectors count it as failed);
//! 2. a replica in Normal status answers `RecoveryResponse { view, nonce }`; the leader adds its
//!    log, the OUM position that goes with it and its sync-point;
//! 3. with answers from f + 1 replicas carrying its nonce, including the leader of the highest
//!    view among them, it installs the leader's log in that view as a follower, listens to the
//!    view's session at that position and executes up to the sync-point.
//!
//! Why nothing committed is lost: a request or NO-OP committed in view v is held by f + 1
//! replicas of v; at most one of them is the recovering replica, so one of the f + 1 responders
//! held it and is now Normal in a view covering v; the highest view among the answers is then
//! a started view covering v, and its leader's log holds every value committed up to it (the
//! view-change merge keeps committed values). A view the old incarnation helped start was
//! started by f + 1 replicas, f of them others, so one of the responders is in it or later.
//! The nonce keeps answers to an earlier incarnation (stale states) out. Persisting the
//! incarnation before asking is what makes the nonce unique.

use super::NoPaxos;
use super::messages::{Message, RecoveryState, ViewId};
use super::replica::{DropReason, Handled, Replica, Status};
use ordo_core::{NodeId, Outbox};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A recovering replica's progress.
#[derive(Debug, Default)]
pub struct RecoveryProgress {
    /// The incarnation record is durable: `Recovery` may go out.
    pub asking: bool,
    /// When `Recovery` was last sent.
    pub sent_ns: u64,
    /// The latest answer of each replica to this incarnation's nonce.
    pub answers: BTreeMap<NodeId, (ViewId, Option<RecoveryState>)>,
}

impl RecoveryProgress {
    /// Panics if more answers are held than there are other replicas.
    pub fn check(&self, others: usize) {
        assert!(self.answers.len() <= others, "one answer per other replica at most");
    }
}

impl Replica {
    /// The incarnation record is durable: start asking (step 1).
    pub(super) fn begin_recovery(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        self.recovery.asking = true;
        self.send_recovery(now, out);
    }

    pub(super) fn send_recovery(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        self.recovery.sent_ns = now;
        out.multicast(&self.others, Message::Recovery { nonce: self.incarnation });
    }

    /// Periodic while recovering: ask again (answers or requests may be lost, and the leader of
    /// the highest view may be this replica's own former incarnation until the others replace it).
    pub(super) fn recovery_tick(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        if self.recovery.asking && now.saturating_sub(self.recovery.sent_ns) >= self.config.view_change_timeout_ns / 4 {
            self.send_recovery(now, out);
        }
    }

    /// Step 2, at a peer.
    pub(super) fn on_recovery(&mut self, from: NodeId, nonce: u64, out: &mut Outbox<NoPaxos>) -> Handled {
        if !self.others.contains(&from) {
            return Err(DropReason::SenderIsNotAnotherReplica);
        }
        if self.status != Status::Normal {
            return Err(DropReason::NotNormal);
        }
        let state = self.is_leader().then(|| RecoveryState {
            // The log's own OUM position (a drop notification being resolved is not in it).
            session_msg_num: self.log_len() - self.session_base,
            sync_point: self.sync.sync_point,
            log: Arc::new(self.log.clone()),
        });
        self.stats.count("recovery_answered");
        out.send(from, Message::RecoveryResponse { view: self.view, nonce, state });
        Ok(())
    }

    /// Step 3, at the recovering replica.
    pub(super) fn on_recovery_response(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        nonce: u64,
        state: Option<RecoveryState>,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if !self.others.contains(&from) {
            return Err(DropReason::SenderIsNotAnotherReplica);
        }
        if self.status != Status::Recovering {
            return Err(DropReason::RecoveryResponseWhileNotRecovering);
        }
        if nonce != self.incarnation {
            return Err(DropReason::RecoveryResponseOfAnotherIncarnation);
        }
        if let Some(state) = &state {
            let len = state.log.len();
            if state.session_msg_num > len || state.sync_point > len || self.leader_of(view) != from {
                return Err(DropReason::MalformedRecoveryResponse);
            }
        }
        self.recovery.answers.insert(from, (view, state));
        self.maybe_recovered(now, out)
    }

    fn maybe_recovered(&mut self, now: u64, out: &mut Outbox<NoPaxos>) -> Handled {
        if self.recovery.answers.len() < self.f + 1 {
            return Ok(());
        }
        // Started views are comparable (fn 4), so the largest by rank is the latest.
        let Some(latest) = self.recovery.answers.values().map(|(view, _)| *view).max_by_key(|v| v.rank()) else {
            return Ok(());
        };
        let leader = self.leader_of(latest);
        let Some((view, Some(state))) = self.recovery.answers.get(&leader) else { return Ok(()) };
        if *view != latest {
            return Ok(());
        }
        let state = state.clone();
        // The leader's sync-point is this follower's: those slots are committed, so it may
        // execute them (I14); the rest of the log is the leader's speculative order.
        self.sync.sync_point = state.sync_point;
        if let Err(reason) = self.install_view(latest, state.session_msg_num, state.log.as_ref().clone(), now, out) {
            // A checkpoint that does not decode: ask again, from a clean slate.
            self.sync.sync_point = 0;
            self.recovery.answers.remove(&leader);
            return Err(reason);
        }
        self.recovery = RecoveryProgress::default();
        self.stats.count("recovered");
        Ok(())
    }
}
