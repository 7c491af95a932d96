//! View change (§6.5): any replica that sees no commit for a while becomes a candidate of the
//! next view; f + 1 votes, given only to candidates whose log is at least as up to date
//! (Definition 1), make it the initiator, which proposes the view-init at view-base = its
//! last-append + 1. Followers then verify their logs against the initiator's with
//! nack/recover (`recovery.rs`) and ack the view-init; once it commits, proposing resumes.

use super::checker::Observation;
use super::log::Schedule;
use super::messages::{Entry, Message, Value};
use super::replica::{Dropped, Replica, ViewRole};
use super::{Chora, Mode};
use ordo_core::{NodeId, Outbox};
use rand::RngExt;

impl Replica {
    /// A fresh view-change timeout in [t, 2t): the random back-off of duelling candidates.
    pub(super) fn random_timeout(&mut self) -> u64 {
        let timeout = self.config.view_change_timeout_ns;
        self.rng.random_range(timeout..timeout.saturating_mul(2))
    }

    /// Starts a view change when nothing committed for the view's timeout while work waits
    /// (the paper's suspicion, spec §7.1), or retries one that did not finish.
    pub(super) fn on_watchdog(&mut self, now: u64, out: &mut Outbox<Chora>) {
        let pending = !self.proposing.cmds.is_empty()
            || self.proposing.latest_proposed > self.acks.last_commit
            || self.log.last_slot() > self.acks.last_commit
            || !self.vs.view_init_committed;
        if !pending {
            self.vs.progress_ns = now;
            return;
        }
        if now.saturating_sub(self.vs.progress_ns) > self.vs.timeout_ns {
            self.start_candidacy(now, self.vs.view + 1, out);
        }
    }

    /// Starts the candidacy owed to a refused stale candidate once its back-off is over.
    pub(super) fn on_counter_candidacy_due(&mut self, now: u64, out: &mut Outbox<Chora>) {
        if let Some((view, at)) = self.vs.counter_candidacy
            && now >= at
        {
            self.start_candidacy(now, view, out);
        }
    }

    /// Moves to `view` in `role`: uncommitted entries past the first gap go, acks reset, and
    /// proposing stops until the view's view-init commits (§6.5).
    fn enter_view(&mut self, now: u64, view: u64, role: ViewRole, out: &mut Outbox<Chora>) {
        assert!(view > self.vs.view, "views only grow");
        self.vs.view = view;
        self.vs.role = role;
        self.vs.voted_for = None;
        self.vs.voted_by.clear();
        self.vs.schedule = None;
        self.vs.announced_base = None;
        self.vs.view_init_committed = false;
        self.vs.progress_ns = now;
        self.vs.timeout_ns = self.random_timeout();
        if self.vs.counter_candidacy.is_some_and(|(owed, _)| view >= owed) {
            self.vs.counter_candidacy = None;
        }
        // "clears all buffered proposals in slots after last-append".
        self.log.remove_above(self.log.last_append());
        self.proposing.next_propose = None;
        self.proposing.latest_proposed = 0;
        self.acks.acked.fill(0);
        self.acks.last_ack = self.acks.last_commit;
        self.acks.acked[self.rank as usize] = self.own_ack();
        self.repair.clear();
        self.rounds.window.clear();
        // Nothing of the view (vote, proposal, ack) leaves before the view is durable: a
        // restarted replica must know every view it may have spoken in.
        self.persist_view(out);
    }

    /// Follows `view`, whose initiator was elected without our vote.
    pub(super) fn adopt_view(&mut self, now: u64, view: u64, out: &mut Outbox<Chora>) {
        self.stats.count("adopt_view");
        self.enter_view(now, view, ViewRole::Follower, out);
    }

    /// Becomes a candidate of `view` and asks for votes.
    pub(super) fn start_candidacy(&mut self, now: u64, view: u64, out: &mut Outbox<Chora>) {
        // A restarted replica never runs in a view an earlier incarnation may have voted in.
        let view = view.max(self.durability.fresh_from);
        self.stats.count("candidacy");
        self.enter_view(now, view, ViewRole::Candidate, out);
        self.vs.voted_for = Some(self.id);
        self.vs.voted_by.insert(self.id);
        self.observe_in_view(Observation::Vote { view, voter: self.rank, candidate: self.rank }, out);
        let request = Message::ViewChangeRequest {
            view,
            last_append: self.log.last_append(),
            last_append_view: self.log.last_append_view(),
        };
        self.multicast_in_view(request, out);
        if self.vs.voted_by.len() >= self.quorum {
            self.become_initiator(now, out);
        }
    }

    pub(super) fn on_view_change_request(
        &mut self,
        now: u64,
        from: NodeId,
        view: u64,
        last_append: u64,
        last_append_view: u64,
        out: &mut Outbox<Chora>,
    ) -> Result<(), Dropped> {
        let rank = self.rank_of(from).ok_or("view-change request not from a replica")?;
        if rank == self.rank as usize {
            return Err("view-change request from ourselves");
        }
        if view <= self.vs.view {
            // One vote per view: later candidates of a view we voted in are ignored (Claim 2).
            return Err("view-change request not above our view");
        }
        if last_append_view >= view {
            return Err("malformed view-change request");
        }
        if view < self.durability.fresh_from {
            // An earlier incarnation of ours may have voted in this view (Claim 2).
            return Err("view-change request for a view we may have voted in");
        }
        self.heard_ns[rank] = now;
        let ours = (self.log.last_append_view(), self.log.last_append());
        if (last_append_view, last_append) < ours {
            // Definition 1: the candidate's log is behind ours; run ourselves, higher, after a
            // random back-off (§6.1: conflicting view changes "are resolved by random
            // back-offs"). At once, two initiators whose requests crossed, each holding a newer
            // view-init than the other's request says, refuse each other one view higher
            // forever while the third replica votes for each in turn (issue 20: 58,000 views
            // in one random-peer case, a livelock of honest replicas). A view at least as high
            // entered meanwhile (the stale candidate's initiator's pulse) cancels it.
            self.stats.count("refused_stale_candidate");
            let owed = self.vs.counter_candidacy.map_or(0, |(owed, _)| owed).max(view + 1);
            let back_off = self.rng.random_range(0..self.config.view_change_timeout_ns);
            self.vs.counter_candidacy = Some((owed, now + back_off));
            return Ok(());
        }
        self.enter_view(now, view, ViewRole::Follower, out);
        self.vs.voted_for = Some(from);
        self.observe_in_view(Observation::Vote { view, voter: self.rank, candidate: rank as u32 }, out);
        self.send_in_view(from, Message::ViewChangeReply { view }, out);
        Ok(())
    }

    pub(super) fn on_view_change_reply(
        &mut self,
        now: u64,
        from: NodeId,
        view: u64,
        out: &mut Outbox<Chora>,
    ) -> Result<(), Dropped> {
        let rank = self.rank_of(from).ok_or("vote not from a replica")?;
        if view != self.vs.view || self.vs.role != ViewRole::Candidate {
            return Err("vote for a view we are not a candidate of");
        }
        self.heard_ns[rank] = now;
        self.vs.voted_by.insert(from);
        if self.vs.voted_by.len() >= self.quorum {
            self.become_initiator(now, out);
        }
        Ok(())
    }

    /// f + 1 votes: propose the view-init at our last-append + 1, naming the replicas we
    /// heard from lately as proposers (the suspected ones are left out, §6.5).
    fn become_initiator(&mut self, now: u64, out: &mut Outbox<Chora>) {
        assert_eq!(self.vs.role, ViewRole::Candidate, "only a candidate is elected");
        assert!(self.vs.voted_by.len() >= self.quorum, "an initiator has f + 1 votes");
        self.vs.role = ViewRole::Initiator;
        self.stats.count("initiator");
        let last_append = self.log.last_append();
        self.log.remove_above(last_append);
        let base = last_append + 1;
        let recent = self.config.view_change_timeout_ns;
        let limit = if self.config.proposers == 0 { self.replicas.len() } else { self.config.proposers };
        let proposers: Vec<u32> = (0..self.replicas.len() as u32)
            .filter(|&r| r == self.rank || now.saturating_sub(self.heard_ns[r as usize]) <= recent)
            .take(limit.max(1))
            .collect();
        let proposers = if proposers.contains(&self.rank) || proposers.len() < limit {
            proposers
        } else {
            // Keep ourselves: we are certainly alive.
            let mut kept: Vec<u32> = proposers.into_iter().take(limit - 1).collect();
            kept.push(self.rank);
            kept.sort_unstable();
            kept
        };
        let entries = self
            .log
            .range(self.acks.last_commit + 1, last_append)
            .map(|(slot, entry)| (slot, entry.value_id()))
            .collect();
        out.observe(Observation::Initiator {
            view: self.vs.view,
            rank: self.rank,
            last_commit: self.acks.last_commit,
            last_append,
            entries,
        });
        let entry = Entry { view: self.vs.view, value: Value::ViewInit { proposers: proposers.clone() } };
        let proposed =
            Observation::Proposed { slot: base, view: self.vs.view, value: entry.value_id(), owner: self.rank };
        self.observe_in_view(proposed, out);
        self.log.insert(base, entry);
        self.vs.schedule = Some(Schedule::new(base, proposers));
        self.acks.last_ack = base;
        self.acks.acked[self.rank as usize] = self.own_ack();
        self.proposing.latest_proposed = base;
        self.repair.resend_view_init = true;
        self.after_progress(now, out);
    }

    /// The view-init of our view arrived at `slot` (§6.5): clear from view-base, install the
    /// schedule, and ask for the slots between our verified prefix and the view-base.
    pub(super) fn on_view_init(&mut self, slot: u64, entry: Entry, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        let _ = out;
        if entry.view != self.vs.view {
            return Err("view-init of another view");
        }
        if let Some(schedule) = &self.vs.schedule {
            return if schedule.base == slot { Ok(()) } else { Err("a second view-init for one view") };
        }
        if slot <= self.acks.last_commit {
            return Err("view-init at or below our commit");
        }
        let Value::ViewInit { proposers } = &entry.value else { unreachable!("checked by the caller") };
        let n = self.replicas.len() as u32;
        let mut sorted = proposers.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if proposers.is_empty() || sorted.len() != proposers.len() || sorted.iter().any(|&r| r >= n) {
            return Err("malformed view-init");
        }
        let proposers = proposers.clone();
        self.log.remove_above(slot - 1);
        self.log.insert(slot, entry);
        self.vs.schedule = Some(Schedule::new(slot, proposers));
        self.vs.announced_base = None;
        if self.vs.role == ViewRole::Candidate {
            self.vs.role = ViewRole::Follower;
            self.vs.voted_for = None;
        }
        self.proposing.latest_proposed = self.proposing.latest_proposed.max(slot);
        let last_ack = self.acks.last_ack;
        if last_ack + 1 < slot {
            let until = (slot - 1).min(last_ack + self.config.recover_max as u64);
            self.repair.nack = Some((last_ack + 1, until));
        }
        self.advance_ack();
        Ok(())
    }

    /// The view-init committed (and with it every slot before it): proposers start proposing.
    pub(super) fn on_view_init_committed(&mut self, schedule: &Schedule, out: &mut Outbox<Chora>) {
        self.vs.view_init_committed = true;
        if self.vs.view > 0 {
            self.stats.count("view_change");
        }
        if schedule.is_proposer(self.rank) && self.vs.view >= self.durability.fresh_from {
            self.proposing.next_propose = Some(schedule.next_owned(self.rank, schedule.base));
            self.durability.rejoin_at = None;
        } else {
            if schedule.is_proposer(self.rank) {
                // Slots an earlier incarnation may have used: ask for a view that lists us anew.
                self.durability.rejoin_at.get_or_insert(self.vs.progress_ns + self.config.coordination_ns);
            }
            // We own no slots in this view: hand what we buffered to the proposers.
            let cmds: Vec<_> = self.proposing.cmds.drain(..).collect();
            for request in cmds {
                let _ = self.take_command_pub(request, out);
            }
        }
        if self.config.mode != Mode::Responsive {
            // Rounds go on as before; fewer proposers make them lighter (§7.4).
        }
    }
}
