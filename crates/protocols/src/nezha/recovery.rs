//! Replica rejoin with crash-vectors (paper §6, App. A.2, Algorithm 1) and state transfer.
//!
//! A restarted replica has lost everything but its launch marker. It asks every replica for its
//! crash-vector and view (one round: Algorithm 1's two reads merged, the nonce proving the
//! replies fresh), takes the element-wise maximum, raises its own counter, and asks the leader
//! of the highest view for its log. The leader learns the raised counter from that request, so
//! its fast-reply hashes change and no reply the replica sent before its crash can match them
//! again (App. H.2); every message the replica sent before carries a smaller counter and is
//! stray to anyone who learned the new one (App. H.1). If the replica itself would lead the
//! highest view, it waits until the others elect someone else.

use super::messages::{CrashVector, LogImage, Message};
use super::replica::{Rejoin, Replica, Status};
use super::{Nezha, Timer};
use ordo_core::{ClockReading, NodeId, Outbox};
use rand::RngExt;
use std::sync::Arc;

/// Ticks between resends while rejoining.
const RESEND_TICKS: u64 = 5;
/// Ticks a rejoining replica waits for the leader's state before it asks for views again.
const TRANSFER_TICKS: u64 = 30;

impl Replica {
    /// Starts (or restarts) a rejoin with a fresh nonce.
    pub(super) fn start_rejoin(&mut self, out: &mut Outbox<Nezha>) {
        assert_eq!(self.status, Status::Recovering, "only a recovering replica rejoins");
        let nonce = self.rng.random::<u64>();
        self.rejoin = Some(Rejoin { nonce, replies: Default::default(), raised: false, asked: None, ticks: 0 });
        self.send_all(out, Message::RecoveryRequest { nonce, cv: self.cv.clone() });
    }

    /// While rejoining: resend the current step; fall back to asking views if the leader
    /// does not answer.
    pub(super) fn rejoin_tick(&mut self, out: &mut Outbox<Nezha>) {
        let Some(rejoin) = &mut self.rejoin else { return };
        rejoin.ticks += 1;
        let (nonce, asked, ticks) = (rejoin.nonce, rejoin.asked, rejoin.ticks);
        match asked {
            Some(_) if ticks >= TRANSFER_TICKS => {
                rejoin.asked = None;
                rejoin.replies.clear();
                rejoin.ticks = 0;
                self.send_all(out, Message::RecoveryRequest { nonce, cv: self.cv.clone() });
            }
            Some(leader) if ticks.is_multiple_of(RESEND_TICKS) => {
                self.send_to(out, leader, Message::StateTransferRequest { cv: self.cv.clone() });
            }
            None if ticks.is_multiple_of(RESEND_TICKS) => {
                rejoin.replies.clear();
                self.send_all(out, Message::RecoveryRequest { nonce, cv: self.cv.clone() });
            }
            _ => {}
        }
    }

    pub(super) fn on_recovery_request(
        &mut self,
        from: NodeId,
        nonce: u64,
        cv: CrashVector,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("recovery request from a non-replica")?;
        if self.status != Status::Normal {
            return Err("recovery request while not normal");
        }
        if sender == self.rank || cv.len() != self.cv.len() {
            return Err("malformed recovery request");
        }
        for (mine, theirs) in self.cv.iter_mut().zip(&cv) {
            *mine = (*mine).max(*theirs);
        }
        self.send_to(out, from, Message::RecoveryReply { nonce, view: self.view, cv: self.cv.clone() });
        Ok(())
    }

    pub(super) fn on_recovery_reply(
        &mut self,
        from: NodeId,
        nonce: u64,
        view: u64,
        cv: CrashVector,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("recovery reply from a non-replica")?;
        if self.status != Status::Recovering || cv.len() != self.cv.len() {
            return Err("recovery reply while not recovering, or malformed");
        }
        let (f, me, n) = (self.f, self.rank, self.replicas.len() as u64);
        let rejoin = self.rejoin.as_mut().expect("a recovering replica is rejoining");
        if rejoin.nonce != nonce {
            return Err("recovery reply to another attempt");
        }
        if rejoin.asked.is_some() {
            return Err("recovery reply after the leader was asked");
        }
        rejoin.replies.insert(sender, (view, cv));
        if rejoin.replies.len() < f + 1 {
            return Ok(());
        }
        let highest = rejoin.replies.values().map(|(view, _)| *view).max().expect("f + 1 replies");
        if !rejoin.raised {
            for (_, cv) in rejoin.replies.values() {
                for (mine, theirs) in self.cv.iter_mut().zip(cv) {
                    *mine = (*mine).max(*theirs);
                }
            }
            self.cv[me] += 1;
            rejoin.raised = true;
        }
        if (highest % n) as usize == me {
            // We would lead: wait for the others to move to a view led by someone else.
            self.stats.count("rejoin_waits_for_election");
            rejoin.replies.clear();
            return Ok(());
        }
        let leader = self.replicas[(highest % n) as usize];
        rejoin.asked = Some(leader);
        rejoin.ticks = 0;
        self.send_to(out, leader, Message::StateTransferRequest { cv: self.cv.clone() });
        Ok(())
    }

    pub(super) fn on_state_transfer_request(
        &mut self,
        from: NodeId,
        cv: CrashVector,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("state transfer request from a non-replica")?;
        if self.status != Status::Normal || !self.is_leader() || sender == self.rank {
            return Err("state transfer request while not the normal leader");
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray state transfer request (sender rejoined since)");
        }
        self.stats.count("state_transfer");
        let message = Message::StateTransferReply {
            view: self.view,
            cv: self.cv.clone(),
            commit: self.commit,
            image: self.image(),
        };
        self.send_to(out, from, message);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_state_transfer_reply(
        &mut self,
        now: ClockReading,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        commit: u64,
        image: Arc<LogImage>,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("state transfer reply from a non-replica")?;
        self.check_image(&image)?;
        if from != self.leader_of(view) || from == self.me {
            return Err("state transfer reply from a replica that does not lead its view");
        }
        match self.status {
            Status::Recovering => {
                let raised = self.rejoin.as_ref().is_some_and(|r| r.raised);
                // The leader must have learned our raised counter, or its hashes could still
                // match replies from our previous life.
                if !raised || cv.len() != self.cv.len() || cv[self.rank] != self.cv[self.rank] {
                    return Err("state transfer reply that predates our rejoin");
                }
            }
            _ if view < self.view => return Err("state transfer reply of an old view"),
            Status::Normal if view == self.view && image.sync_point() <= self.sync_point() => {
                return Err("state transfer reply not ahead of us");
            }
            _ => {}
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray state transfer reply (sender rejoined since)");
        }
        let rejoining = self.status == Status::Recovering;
        if !image.unsynced.is_empty() {
            return Err("state transfer reply with unsynced entries");
        }
        // Within our view, what we fast-replied for beyond the transferred log still counts.
        let same_view = self.status == Status::Normal && view == self.view;
        let unsynced = if same_view { std::mem::take(&mut self.unsynced) } else { Default::default() };
        self.adopt(view, commit, image.checkpoint.clone(), image.synced.clone(), out);
        self.keep_unsynced(now, unsynced, &image.synced);
        if rejoining {
            self.stats.count("rejoin");
        }
        self.send_to(
            out,
            from,
            Message::SyncAck { view, cv: self.cv.clone(), sync_point: self.sync_point(), missing: false },
        );
        out.set_timer(Timer::Tick, self.config.heartbeat_ns);
        self.release_due(now, out);
        Ok(())
    }
}
