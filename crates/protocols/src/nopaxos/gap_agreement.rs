//! Gap agreement (paper §5.2.2, fn 3): what a replica does with a DROP-NOTIFICATION.
//!
//! - A follower asks a peer follower for the slot (`SlotLookup`), and the leader when the peer
//!   has nothing there (`SlotMissing`) or at the next tick; it processes nothing later until an
//!   entry (`SlotContent`: the request, or a NO-OP) fills it. The paper asks the leader; a
//!   peer's entry is as good, because within a view a slot is one OUM position everywhere
//!   (fn 3 keeps them aligned): a request there is the one the sequencer stamped, which the
//!   follower could have received itself, and a NO-OP there came from the leader's
//!   `GapCommit`, which reaches this follower too. Asking a peer first keeps the leader, the
//!   busiest replica, out of every follower's drops (docs/protocols/nopaxos.md).
//! - The leader first asks the others for a copy (`GapFind`, the paper's optional
//!   optimisation); if one answers with the request it fills the slot and executes it. Once
//!   all answered without one, or after `gap_find_timeout_ns`, it appends a NO-OP, sends
//!   `GapCommit`, and does not consume the next OUM position before f `GapCommitRep`s: a
//!   majority then knows the decision, which every later view change keeps.
//! - A follower receiving `GapCommit` for a slot it filled overwrites it with a NO-OP; for its
//!   next slot it appends the NO-OP and, unless it already consumed that position's drop
//!   notification, skips the position in libOUM (fn 3: session-msg-num moves with the log).
//! - A follower asking the leader about the leader's own next slot, which the leader has neither
//!   received nor seen a drop for, means the message was sequenced (a later one reached the
//!   follower): on the second request after `gap_find_timeout_ns` the leader treats it as its
//!   own drop notification, so a follower is never stuck behind a leader that heard nothing.

use super::NoPaxos;
use super::checker::Observation;
use super::messages::{Entry, Message, Request, ViewId};
use super::replica::{DropReason, Handled, Replica};
use ordo_core::{NodeId, Outbox};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The gap a replica is resolving, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Gap {
    /// None.
    #[default]
    None,
    /// A follower consumed a drop notification for `slot` and asked the leader.
    Lookup {
        /// The slot (the next one).
        slot: u64,
    },
    /// The leader consumed a drop notification for `slot` and asks the others for a copy.
    Finding {
        /// The slot (the next one).
        slot: u64,
        /// When it started asking.
        since_ns: u64,
        /// Replicas that answered without a copy.
        answered: BTreeSet<NodeId>,
    },
    /// The leader appended a NO-OP at `slot` and waits for f acknowledgements.
    Committing {
        /// The slot (the last one).
        slot: u64,
        /// Replicas that acknowledged.
        acks: BTreeSet<NodeId>,
    },
}

impl Gap {
    /// True while the replica must not consume the next OUM position.
    pub fn blocks(&self) -> bool {
        !matches!(self, Gap::None)
    }

    /// True when the replica consumed an OUM position whose slot is not filled yet.
    pub fn consumed_unfilled(&self) -> bool {
        matches!(self, Gap::Lookup { .. } | Gap::Finding { .. })
    }

    /// A short name for the status line.
    pub fn name(&self) -> String {
        match self {
            Gap::None => "-".to_string(),
            Gap::Lookup { slot } => format!("lookup@{slot}"),
            Gap::Finding { slot, .. } => format!("finding@{slot}"),
            Gap::Committing { slot, acks } => format!("committing@{slot}({})", acks.len()),
        }
    }

    /// Panics unless the gap's slot is where the log (`log_len` slots, ending in `last`) says
    /// it is.
    pub fn check(&self, log_len: u64, last: Option<&Entry>) {
        match self {
            Gap::None => {}
            Gap::Lookup { slot } | Gap::Finding { slot, .. } => {
                assert_eq!(*slot, log_len + 1, "a gap being resolved is the next slot");
            }
            Gap::Committing { slot, .. } => {
                assert_eq!(*slot, log_len, "the NO-OP being committed is the last slot");
                assert!(last.is_some_and(Entry::is_no_op), "the leader holds the NO-OP it commits");
            }
        }
    }
}

/// Leader-side memory of a follower asking about the leader's own next slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupAhead {
    /// The slot asked about.
    pub slot: u64,
    /// When it was first asked.
    pub first_ns: u64,
}

/// Deferred gap messages beyond this many NO-OPs are dropped (the leader resends them).
const DEFERRED_GAP_COMMITS_MAX: usize = 1024;

/// Gap messages that arrived before this replica reached their slot, kept (for this view only)
/// to answer or apply when it does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deferred {
    /// Replicas waiting for this replica's entry at a slot (one slot each: a replica resolves
    /// one gap at a time).
    pub lookups: BTreeMap<NodeId, u64>,
    /// Follower: the leader's NO-OPs for slots past the log's next one.
    pub gap_commits: BTreeSet<u64>,
    /// Follower: the slot the leader searches a copy of (it searches one at a time).
    pub find: Option<u64>,
}

impl Replica {
    /// A DROP-NOTIFICATION for the next slot (its position is consumed).
    pub(super) fn on_drop_notification(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        let slot = self.log_len() + 1;
        self.stats.count("drop_notification");
        if self.is_leader() {
            self.start_finding(slot, now, out);
        } else {
            self.gap = Gap::Lookup { slot };
            let asked = self.lookup_peer(slot).unwrap_or_else(|| self.leader_of(self.view));
            out.send(asked, Message::SlotLookup { view: self.view, slot });
        }
    }

    /// The follower a follower asks first about `slot`: the slot spreads the lookups over the
    /// peers. `None` when there is no other follower.
    fn lookup_peer(&self, slot: u64) -> Option<NodeId> {
        let leader = self.leader_of(self.view);
        let peers: Vec<NodeId> = self.others.iter().copied().filter(|&r| r != leader).collect();
        (!peers.is_empty()).then(|| peers[(slot % peers.len() as u64) as usize])
    }

    fn start_finding(&mut self, slot: u64, now: u64, out: &mut Outbox<NoPaxos>) {
        self.gap = Gap::Finding { slot, since_ns: now, answered: BTreeSet::new() };
        if self.others.is_empty() {
            self.commit_no_op(out);
            return;
        }
        out.multicast(&self.others, Message::GapFind { view: self.view, slot });
    }

    /// The leader gives up on a copy: a NO-OP at the next slot (§5.2.2 step 1).
    fn commit_no_op(&mut self, out: &mut Outbox<NoPaxos>) {
        let Gap::Finding { slot, .. } = self.gap else { panic!("a NO-OP follows a failed search") };
        self.log.push(Entry::NoOp);
        assert_eq!(self.log_len(), slot, "the NO-OP fills the slot searched for");
        self.execute_through(slot, out);
        self.sync.leader_no_op(slot);
        self.gap = Gap::Committing { slot, acks: BTreeSet::new() };
        out.multicast(&self.others, Message::GapCommit { view: self.view, slot });
        self.maybe_gap_committed(out);
    }

    /// Ends the gap commit once f followers hold the NO-OP: acknowledged it, or synchronised
    /// through it (their sync-prepare carried it).
    pub(super) fn maybe_gap_committed(&mut self, out: &mut Outbox<NoPaxos>) {
        let Gap::Committing { slot, acks } = &self.gap else { return };
        if acks.len() < self.f && self.sync.sync_point < *slot {
            return;
        }
        // f acknowledgements and the leader's own: the NO-OP is committed (§5.4).
        out.observe(Observation::Committed { slot: *slot, id: None });
        self.stats.count("gap_no_op");
        self.gap = Gap::None;
    }

    /// Periodic: resend lookups and gap commits; a leader's search times out.
    pub(super) fn gap_tick(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        match &self.gap {
            Gap::None => {}
            Gap::Lookup { slot } => {
                out.send(self.leader_of(self.view), Message::SlotLookup { view: self.view, slot: *slot });
            }
            Gap::Finding { since_ns, .. } => {
                if now.saturating_sub(*since_ns) >= self.config.gap_find_timeout_ns {
                    self.commit_no_op(out);
                }
            }
            Gap::Committing { slot, acks } => {
                let message = Message::GapCommit { view: self.view, slot: *slot };
                for &replica in self.others.iter().filter(|r| !acks.contains(r)) {
                    out.send(replica, message.clone());
                }
            }
        }
    }

    /// A follower asks for `slot`: the leader's answer, or a peer's. A slot this replica has
    /// not reached yet is answered when it does (`Deferred`), not dropped: the asker would
    /// otherwise stall until its next resend.
    pub(super) fn on_slot_lookup(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        if slot == 0 {
            return Err(DropReason::Slot0DoesNotExist);
        }
        if self.answer_lookup(from, slot, out) {
            return Ok(());
        }
        if self.is_leader() && slot == self.log_len() + 1 && !self.gap.blocks() {
            self.on_lookup_ahead(now, slot, out);
        }
        self.deferred.lookups.insert(from, slot);
        Ok(())
    }

    /// Answers `asker` about `slot` if this replica can now: its entry there; a peer without
    /// one that is itself resolving that slot, or has truncated it, says so; a leader sends a
    /// truncated slot's asker the whole current log, as a late replica gets.
    fn answer_lookup(&mut self, asker: NodeId, slot: u64, out: &mut Outbox<NoPaxos>) -> bool {
        let view = self.view;
        if slot <= self.log.base() {
            if self.is_leader() {
                self.stats.count("state_transfer_sent");
                out.send(asker, self.current_log_message());
            } else {
                out.send(asker, Message::SlotMissing { view, slot });
            }
            return true;
        }
        if let Some(entry) = self.log.get(slot) {
            out.send(asker, Message::SlotContent { view, slot, entry: entry.clone() });
            return true;
        }
        if !self.is_leader() && self.gap == (Gap::Lookup { slot }) {
            out.send(asker, Message::SlotMissing { view, slot });
            return true;
        }
        false
    }

    /// After the log grew: answers the lookups that waited for it, applies the leader's NO-OPs
    /// that arrived ahead of it. True if a NO-OP was applied (the log moved again).
    pub(super) fn serve_deferred(&mut self, out: &mut Outbox<NoPaxos>) -> bool {
        if !self.deferred.lookups.is_empty() {
            let waiting: Vec<(NodeId, u64)> = self.deferred.lookups.iter().map(|(&a, &s)| (a, s)).collect();
            for (asker, slot) in waiting {
                if self.answer_lookup(asker, slot, out) {
                    self.deferred.lookups.remove(&asker);
                }
            }
        }
        if let Some(slot) = self.deferred.find
            && self.answer_find(slot, out)
        {
            self.deferred.find = None;
        }
        let Some(&slot) = self.deferred.gap_commits.first() else { return false };
        if slot > self.log_len() + 1 {
            return false;
        }
        self.deferred.gap_commits.remove(&slot);
        self.stats.count("gap_commit_applied_late");
        if let Err(reason) = self.apply_gap_commit(slot, out) {
            self.stats.drop_input(reason.name());
        }
        true
    }

    /// The leader has neither the message nor a drop notification for its next slot, which a
    /// follower knows was sequenced: after a grace period it consumes the position as dropped.
    fn on_lookup_ahead(&mut self, now: u64, slot: u64, out: &mut Outbox<NoPaxos>) {
        match self.lookup_ahead {
            Some(ahead)
                if ahead.slot == slot && now.saturating_sub(ahead.first_ns) >= self.config.gap_find_timeout_ns =>
            {
                self.lookup_ahead = None;
                self.stats.count("leader_skipped_position");
                self.oum.skip_one();
                self.start_finding(slot, now, out);
            }
            Some(ahead) if ahead.slot == slot => {}
            _ => self.lookup_ahead = Some(LookupAhead { slot, first_ns: now }),
        }
    }

    /// Follower: the peer it asked has nothing at `slot`; the leader decides.
    pub(super) fn on_slot_missing(
        &mut self,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        if self.gap != (Gap::Lookup { slot }) {
            return Err(DropReason::SlotContentNotWaitedFor);
        }
        out.send(self.leader_of(view), Message::SlotLookup { view, slot });
        Ok(())
    }

    /// Follower: the leader's or a peer's entry for the slot it waits on.
    pub(super) fn on_slot_content(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        entry: Entry,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        if from == self.leader_of(view) {
            self.check_from_leader(now, from, view, DropReason::SlotContentNotFromTheLeader)?;
        } else {
            self.in_view(from, view)?;
            if self.is_leader() {
                return Err(DropReason::SlotContentNotFromTheLeader);
            }
        }
        if self.gap != (Gap::Lookup { slot }) {
            return Err(DropReason::SlotContentNotWaitedFor);
        }
        self.gap = Gap::None;
        match entry {
            Entry::Request(request) => {
                self.stats.count("gap_filled");
                self.append_request(request, out);
            }
            Entry::NoOp => self.log.push(Entry::NoOp),
        }
        self.pump(now, out);
        Ok(())
    }

    /// Follower: the leader asks for a copy of `slot`.
    pub(super) fn on_gap_find(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.check_from_leader(now, from, view, DropReason::GapFindNotFromTheLeader)?;
        if slot == 0 {
            return Err(DropReason::Slot0DoesNotExist);
        }
        if !self.answer_find(slot, out) {
            // Not reached yet: a "no" now would make the leader NO-OP a request this follower is
            // about to log, and its client retry.
            self.deferred.find = Some(slot);
        }
        Ok(())
    }

    /// Follower: answers the leader's search for `slot` if it can now: the request it holds
    /// there, or none (a NO-OP, truncated, or itself resolving a drop there).
    fn answer_find(&mut self, slot: u64, out: &mut Outbox<NoPaxos>) -> bool {
        let request = match self.log.get(slot) {
            Some(Entry::Request(request)) if slot > self.log.base() => Some(request.clone()),
            Some(_) => None,
            None if slot <= self.log.base() || self.gap == (Gap::Lookup { slot }) => None,
            None => return false,
        };
        out.send(self.leader_of(self.view), Message::GapFound { view: self.view, slot, request });
        true
    }

    /// Leader: an answer to its search.
    pub(super) fn on_gap_found(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        request: Option<Arc<Request>>,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        let Gap::Finding { slot: searching, answered, .. } = &mut self.gap else {
            return Err(DropReason::GapFoundWhileNotSearching);
        };
        if *searching != slot {
            return Err(DropReason::GapFoundForAnotherSlot);
        }
        let Some(request) = request else {
            answered.insert(from);
            if answered.len() == self.others.len() {
                self.commit_no_op(out);
                self.pump(now, out);
            }
            return Ok(());
        };
        // Within a view a slot maps to one OUM position, so the copy is the request the
        // sequencer stamped there.
        self.gap = Gap::None;
        self.stats.count("gap_filled");
        self.append_request(request, out);
        self.pump(now, out);
        Ok(())
    }

    /// Follower: commit a NO-OP at `slot` (§5.2.2 step 2, fn 3). One past the log's next slot
    /// waits until the log reaches it (the spec's EXT-CODE choice): dropping it would stall
    /// the leader until its next resend.
    pub(super) fn on_gap_commit(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.check_from_leader(now, from, view, DropReason::GapCommitNotFromTheLeader)?;
        if slot == 0 {
            return Err(DropReason::Slot0DoesNotExist);
        }
        if slot > self.log_len() + 1 {
            if self.deferred.gap_commits.len() >= DEFERRED_GAP_COMMITS_MAX {
                return Err(DropReason::GapCommitAheadOfTheLog);
            }
            self.deferred.gap_commits.insert(slot);
            return Ok(());
        }
        self.apply_gap_commit(slot, out)?;
        self.pump(now, out);
        Ok(())
    }

    /// Puts the leader's NO-OP at `slot` (at most the next slot) and acknowledges it.
    fn apply_gap_commit(&mut self, slot: u64, out: &mut Outbox<NoPaxos>) -> Handled {
        let (view, leader) = (self.view, self.leader_of(self.view));
        if slot <= self.sync.sync_point {
            // A sync-prepare carried this NO-OP already: acknowledge it again (the first
            // acknowledgement may have been lost).
            if !self.log.get(slot).is_some_and(Entry::is_no_op) {
                // A request, or truncated (then a `SyncCommit` tells the leader instead).
                return Err(DropReason::GapCommitAtASynchronisedRequest);
            }
            out.send(leader, Message::GapCommitRep { view, slot });
            return Ok(());
        }
        if slot <= self.exec.executed() {
            // Only an ousted leader executes beyond its sync-point; what it ran there is gone.
            self.rewind_state(out);
        }
        if slot <= self.log_len() {
            self.log.set(slot, Entry::NoOp);
        } else {
            // The next slot: consume its OUM position unless its drop notification already was.
            if !self.gap.consumed_unfilled() {
                self.oum.skip_one();
            }
            self.gap = Gap::None;
            self.log.push(Entry::NoOp);
        }
        out.send(leader, Message::GapCommitRep { view, slot });
        Ok(())
    }

    /// Leader: a follower holds the NO-OP.
    pub(super) fn on_gap_commit_rep(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        let Gap::Committing { slot: committing, acks } = &mut self.gap else {
            return Err(DropReason::GapCommitRepWhileNotCommitting);
        };
        if *committing != slot {
            return Err(DropReason::GapCommitRepForAnotherSlot);
        }
        acks.insert(from);
        self.maybe_gap_committed(out);
        self.pump(now, out);
        Ok(())
    }
}
