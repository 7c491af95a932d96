//! Gap agreement (paper §5.2.2, fn 3): what a replica does with a DROP-NOTIFICATION.
//!
//! - A follower asks the leader for the slot (`SlotLookup`) and processes nothing later until
//!   the leader's entry (`SlotContent`: the request, or a NO-OP) fills it.
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
use std::collections::BTreeSet;
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

impl Replica {
    /// A DROP-NOTIFICATION for the next slot (its position is consumed).
    pub(super) fn on_drop_notification(&mut self, now: u64, out: &mut Outbox<NoPaxos>) {
        let slot = self.log_len() + 1;
        self.stats.count("drop_notification");
        if self.is_leader() {
            self.start_finding(slot, now, out);
        } else {
            self.gap = Gap::Lookup { slot };
            out.send(self.leader_of(self.view), Message::SlotLookup { view: self.view, slot });
        }
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

    /// Leader: a follower asks for `slot`.
    pub(super) fn on_slot_lookup(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.in_view(from, view)?;
        if !self.is_leader() {
            return Err(DropReason::SlotLookupAtAFollower);
        }
        if slot == 0 {
            return Err(DropReason::Slot0DoesNotExist);
        }
        if slot <= self.log.base() {
            // Truncated here: the follower is far behind (a checkpoint interval past the
            // sync-point). It gets the whole current log instead, as a late replica does.
            self.stats.count("state_transfer_sent");
            out.send(from, self.current_log_message());
            return Ok(());
        }
        if let Some(entry) = self.log.get(slot) {
            out.send(from, Message::SlotContent { view, slot, entry: entry.clone() });
            return Ok(());
        }
        if slot > self.log_len() + 1 || self.gap.blocks() {
            return Err(DropReason::SlotLookupBeyondTheLeaderSPosition);
        }
        self.on_lookup_ahead(now, slot, out);
        Ok(())
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

    /// Follower: the leader's entry for the slot it waits on.
    pub(super) fn on_slot_content(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        entry: Entry,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.check_from_leader(now, from, view, DropReason::SlotContentNotFromTheLeader)?;
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
        let request = match self.log.get(slot) {
            Some(Entry::Request(request)) => Some(request.clone()),
            _ => None,
        };
        out.send(from, Message::GapFound { view, slot, request });
        Ok(())
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

    /// Follower: commit a NO-OP at `slot` (§5.2.2 step 2, fn 3).
    pub(super) fn on_gap_commit(
        &mut self,
        now: u64,
        from: NodeId,
        view: ViewId,
        slot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Handled {
        self.check_from_leader(now, from, view, DropReason::GapCommitNotFromTheLeader)?;
        if slot == 0 || slot > self.log_len() + 1 {
            return Err(DropReason::GapCommitAheadOfTheLog);
        }
        if slot <= self.sync.sync_point {
            // A sync-prepare carried this NO-OP already: acknowledge it again (the first
            // acknowledgement may have been lost).
            if !self.log.get(slot).is_some_and(Entry::is_no_op) {
                // A request, or truncated (then a `SyncCommit` tells the leader instead).
                return Err(DropReason::GapCommitAtASynchronisedRequest);
            }
            out.send(from, Message::GapCommitRep { view, slot });
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
        out.send(from, Message::GapCommitRep { view, slot });
        self.pump(now, out);
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
