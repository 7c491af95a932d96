//! The slow path (paper §5.4, §5.5) and the commit point (§6 "acceleration"): the leader
//! announces its log positions in batched sync messages; followers fix their logs from their
//! late-buffer (or with the bodies the leader resends), advance their sync-point, send
//! slow-replies and acknowledge; the leader derives the commit point from f + 1 sync-points.

use super::hashes::{Footprint, crash_vector_hash};
use super::messages::{CrashVector, Entry, Message, SyncEntry};
use super::replica::{Replica, Slot, Status};
use super::{Nezha, Timer};
use ordo_core::{ClockReading, NodeId, Outbox};
use std::collections::{BTreeMap, VecDeque};

/// The leader's pending announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnnounceDelay {
    /// Due `sync_delay_ns` after the first waiting position.
    First,
    /// Extended to `sync_delay_fast_path_ns`: many positions wait, all on the fast path.
    Extended,
}

/// Resends to a follower whose acknowledgement is stuck: the first once it has not moved for
/// `STUCK_TICKS`, then after 1, 2, 4 ... ticks (at most `RESEND_INTERVAL_MAX`), until it
/// acknowledges again. A follower that is alive acknowledges the first resend; a crashed one gets
/// about ten a second, not a thousand. This is the fallback: a follower that hears a heartbeat
/// announcing positions it lacks asks for them itself (`SyncAck::missing`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ResendBackoff {
    stuck_ticks: u32,
    interval: u32,
    wait: u32,
}

/// Most ticks between two resends to a stuck follower (128 ms at the default 1 ms tick).
const RESEND_INTERVAL_MAX: u32 = 128;

/// Ticks without an acknowledgement moving before the leader resends unasked. One was too few:
/// acknowledgements come about once a tick (the heartbeat's), and a leader whose inbox is
/// queued can see a tick pass without one, then sent a resend (or, past its checkpoint, its
/// whole state) to a follower that lacked nothing, which queued it further.
const STUCK_TICKS: u32 = 3;

impl ResendBackoff {
    /// One tick with the acknowledgement stuck: true when a resend is due now.
    fn due(&mut self) -> bool {
        self.stuck_ticks += 1;
        if self.stuck_ticks < STUCK_TICKS {
            return false;
        }
        if self.wait > 0 {
            self.wait -= 1;
            return false;
        }
        self.wait = self.interval;
        self.interval = (self.interval * 2).clamp(1, RESEND_INTERVAL_MAX);
        true
    }

    /// No resend for the next `ticks` ticks: the whole state just went out to this follower
    /// (a state transfer, or a new view's start), and a copy sent before it has arrived and
    /// been installed would only queue behind it, costing both sides a full encode and decode.
    pub(super) fn hold(&mut self, ticks: u32) {
        self.stuck_ticks = self.stuck_ticks.max(STUCK_TICKS);
        self.wait = self.wait.max(ticks);
    }
}

/// Bytes of state a holding leader allows per tick for a transfer to travel and be installed
/// (64 MB/s at the runtime's 1 ms tick: 200 MB waits about 3 s before it is resent).
const IMAGE_BYTES_PER_TICK: usize = 64 << 10;

/// Ticks to wait before repeating a message that carries a state of `bytes` (none for a small
/// state: the usual resend schedule applies).
pub(super) fn image_hold_ticks(bytes: usize) -> u32 {
    u32::try_from(bytes / IMAGE_BYTES_PER_TICK).unwrap_or(u32::MAX)
}

/// What a `Sync` carries besides its view and crash-vector.
pub(super) struct SyncBatch {
    /// The leader's first position appended under its crash-vector.
    pub cv_since: u64,
    /// Position of the first entry.
    pub first: u64,
    /// The positions, in order.
    pub entries: Vec<SyncEntry>,
    /// The leader's commit point.
    pub commit: u64,
    /// The leader asks for slow-replies to every position.
    pub slow_replies: bool,
}

impl Replica {
    /// Leader: announces new positions now if a batch is full; else makes sure an announcement
    /// is due, within `sync_delay_ns` once a position waits for the slow path.
    pub(super) fn maybe_announce(&mut self, out: &mut Outbox<Nezha>) {
        let waiting = self.waiting_announcement();
        if waiting >= self.config.sync_batch_min as u64 {
            self.announce(out);
            self.maybe_checkpoint();
            return;
        }
        let extended_but_slow = self.announce_scheduled == Some(AnnounceDelay::Extended) && self.slow_path_waits();
        if waiting > 0 && (self.announce_scheduled.is_none() || extended_but_slow) {
            self.announce_scheduled = Some(AnnounceDelay::First);
            out.set_timer(Timer::Announce, self.config.sync_delay_ns);
        }
    }

    /// Leader: the announcement is due; it waits longer (choice 4) while enough positions wait
    /// and all of them are expected to commit on the fast path.
    pub(super) fn on_announce_timer(&mut self, out: &mut Outbox<Nezha>) {
        let scheduled = self.announce_scheduled.take();
        if self.status != Status::Normal || !self.is_leader() {
            return;
        }
        let many_wait = self.waiting_announcement() >= self.config.sync_fast_path_min as u64;
        if scheduled == Some(AnnounceDelay::First) && many_wait && !self.slow_path_waits() {
            self.announce_scheduled = Some(AnnounceDelay::Extended);
            let rest = self.config.sync_delay_fast_path_ns.saturating_sub(self.config.sync_delay_ns);
            out.set_timer(Timer::Announce, rest.max(1));
            return;
        }
        self.announce(out);
        self.maybe_checkpoint();
    }

    /// Leader: positions appended and not yet announced.
    fn waiting_announcement(&self) -> u64 {
        (self.sync_point() + 1).saturating_sub(self.unannounced)
    }

    /// Leader: some unannounced position waits for the slow path, or a quorum checker hears too
    /// few replicas and asked for slow-replies (then every request commits on the slow path).
    fn slow_path_waits(&self) -> bool {
        self.slow_path_waiting || !self.slow_replies_wanted.is_empty() || self.wants_slow_replies()
    }

    /// Leader: sends the positions appended since the last announcement to every follower.
    pub(super) fn announce(&mut self, out: &mut Outbox<Nezha>) {
        self.slow_path_waiting = false;
        let end = self.sync_point();
        while self.unannounced <= end {
            let entries = self.sync_entries(self.unannounced, false);
            assert!(!entries.is_empty(), "positions above the checkpoint are in memory");
            let first = self.unannounced;
            self.unannounced += entries.len() as u64;
            let message = self.sync_message(first, entries);
            self.send_all(out, message);
        }
    }

    /// Up to a batch of positions from `first`, with bodies when `bodies` (then also bounded in
    /// bytes, `ordo_core::batch_len`).
    fn sync_entries(&self, first: u64, bodies: bool) -> Vec<SyncEntry> {
        let end = self.sync_point();
        let last = end.min(first + self.config.sync_batch_max as u64 - 1);
        let slots: Vec<_> = (first..=last).filter_map(|position| self.slot(position)).collect();
        let count = if bodies {
            ordo_core::batch_len(slots.iter().map(|s| &s.entry.command), slots.len())
        } else {
            slots.len()
        };
        slots[..count]
            .iter()
            .map(|slot| SyncEntry {
                id: slot.entry.id,
                deadline: slot.entry.deadline,
                body: bodies.then(|| slot.entry.clone()),
            })
            .collect()
    }

    /// Leader: resends to `follower` from its acknowledged sync-point, with bodies (they
    /// double as the paper's fetch of a missing request), or the whole state when the
    /// positions it lacks were folded into a checkpoint.
    fn resend_to(&mut self, follower: usize, out: &mut Outbox<Nezha>) {
        let to = self.replicas[follower];
        let from = self.acked[follower] + 1;
        if from <= self.checkpoint.position {
            self.stats.count("state_transfer");
            let message = Message::StateTransferReply {
                view: self.view,
                cv: self.cv.clone(),
                commit: self.commit,
                image: self.image(),
            };
            self.send_to(out, to, message);
            self.resend_backoff[follower].hold(image_hold_ticks(self.checkpoint.state.len()));
            return;
        }
        let entries = self.sync_entries(from, true);
        let message = self.sync_message(from, entries);
        self.send_to(out, to, message);
    }

    /// Leader: a sync of `entries` from position `first` (none: a heartbeat).
    fn sync_message(&self, first: u64, entries: Vec<SyncEntry>) -> Message {
        Message::Sync {
            view: self.view,
            cv: self.cv.clone(),
            cv_since: self.cv_since,
            first,
            entries,
            commit: self.commit,
            slow_replies: self.wants_slow_replies(),
        }
    }

    /// Leader, every tick: resends to followers whose acknowledgement is stuck behind the log,
    /// and a heartbeat to the others.
    fn leader_tick(&mut self, out: &mut Outbox<Nezha>) {
        self.count_silent_followers();
        let end = self.sync_point();
        for follower in 0..self.replicas.len() {
            if follower == self.rank {
                continue;
            }
            let stuck = self.acked[follower] < end && self.acked[follower] == self.acked_last_tick[follower];
            if !stuck {
                self.resend_backoff[follower] = ResendBackoff::default();
            }
            if stuck && self.resend_backoff[follower].due() {
                self.resend_to(follower, out);
            } else {
                // It says where the announced positions end: a follower short of that asks.
                let heartbeat = self.sync_message(self.unannounced, Vec::new());
                self.send_to(out, self.replicas[follower], heartbeat);
            }
        }
        self.acked_last_tick.clone_from(&self.acked);
    }

    /// Every tick: the status decides.
    pub(super) fn on_tick(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        self.asked_this_tick = false;
        match self.status {
            Status::Normal if self.is_leader() => {
                self.leader_tick(out);
                self.release_due(now, out);
            }
            Status::Normal => {
                self.quiet_ticks += 1;
                if self.quiet_ticks >= self.timeout_ticks {
                    self.stats.count("leader_suspected");
                    self.start_view_change(self.view + 1, out);
                } else {
                    self.release_due(now, out);
                }
            }
            Status::ViewChange => self.view_change_tick(out),
            Status::Recovering => self.rejoin_tick(out),
        }
    }

    /// Follower: positions of the leader's log.
    pub(super) fn on_sync(
        &mut self,
        now: ClockReading,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        batch: SyncBatch,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let SyncBatch { cv_since, first, entries, commit, slow_replies } = batch;
        let sender = self.rank_of(from).ok_or("sync from a non-replica")?;
        if self.status == Status::Recovering {
            return Err("sync while recovering");
        }
        if view > self.view && from == self.leader_of(view) {
            // We missed a view: ask its leader for its log.
            self.ask_state(from, out);
            return Err("sync of a newer view: asked for state");
        }
        if view != self.view || self.status != Status::Normal {
            return Err("sync of another view or while not normal");
        }
        if from != self.leader_of(view) || self.is_leader() {
            return Err("sync from a non-leader");
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray sync (sender rejoined since)");
        }
        assert!(!self.is_leader(), "followers take syncs");
        self.quiet_ticks = 0;
        self.leader_wants_slow_replies = slow_replies;
        let heartbeat_or_resend = entries.iter().all(|entry| entry.body.is_some());
        // A heartbeat's `first` follows the last position the leader announced.
        let announced_end =
            if entries.is_empty() { std::mem::replace(&mut self.announced_before, first.saturating_sub(1)) } else { 0 };
        let window_end = self.sync_point() + Replica::pending_sync_max();
        // The leader appended the positions from `cv_since` on under this crash-vector.
        let cv_hash = crash_vector_hash(&cv);
        for (offset, entry) in entries.into_iter().enumerate() {
            let position = first + offset as u64;
            if position <= self.sync_point() || position > window_end {
                continue;
            }
            let keep_old =
                self.pending_sync.get(&position).is_some_and(|(old, _)| old.body.is_some() && entry.body.is_none());
            if !keep_old {
                self.pending_sync.insert(position, (entry, (position >= cv_since).then_some(cv_hash)));
            }
        }
        let (newly, to_reply, missing_body) = self.advance_sync_point();
        let missing = missing_body || self.sync_point() < announced_end;
        self.after_sync(now, &newly);
        self.commit_through(commit.min(self.sync_point()), out);
        let executable = self.commit.min(self.sync_point());
        self.execute_through(executable);
        self.maybe_checkpoint();
        self.release_due(now, out);
        if self.should_ack(heartbeat_or_resend, missing) {
            if missing {
                self.asked_this_tick = true;
            }
            self.ack_sent = self.sync_point();
            let ack = Message::SyncAck { view: self.view, cv: self.cv.clone(), sync_point: self.sync_point(), missing };
            self.send_to(out, from, ack);
        }
        for entry in to_reply {
            self.queue_slow_reply(entry.reply_to, entry.id);
        }
        Ok(())
    }

    /// Follower: whether this sync gets a `SyncAck`. Acknowledgements only move the leader's
    /// commit point (followers' execution) and its retransmission, neither on a client's path,
    /// so a follower acknowledges heartbeats and resends (the leader's tick sees it move),
    /// a missing body (at most once a tick), and otherwise every `sync_ack_every` positions:
    /// the leader's load no longer grows by an ack per follower per sync.
    fn should_ack(&self, heartbeat_or_resend: bool, missing: bool) -> bool {
        if missing {
            return !self.asked_this_tick;
        }
        heartbeat_or_resend || self.sync_point() >= self.ack_sent + self.config.sync_ack_every
    }

    /// Places pending sync positions in order while their bodies are at hand. Returns the
    /// entries newly synced, those that need a slow-reply, and whether it stopped for a
    /// missing body.
    fn advance_sync_point(&mut self) -> (Vec<Entry>, Vec<Entry>, bool) {
        let mut newly = Vec::new();
        let mut to_reply = Vec::new();
        loop {
            let position = self.sync_point() + 1;
            let Some((sync, leader_cv_hash)) = self.pending_sync.remove(&position) else {
                return (newly, to_reply, false);
            };
            let Some((mut entry, own_hash)) = self.take_body(&sync) else {
                self.pending_sync.insert(position, (sync, leader_cv_hash));
                return (newly, to_reply, true);
            };
            if self.positions.contains_key(&entry.id) {
                // The leader never lists one request twice; a malformed sync is not applied.
                self.stats.drop_input("sync repeats a synced request");
                return (newly, to_reply, false);
            }
            entry.deadline = sync.deadline;
            let print = self.conflicts.footprint(&entry.command);
            self.conflicts.add(&entry, &print);
            self.synced_hashes.toggle(&entry, &print);
            // Our synced log is now the leader's up to this position: its hashes are the ones
            // the leader's fast-reply carried.
            let leader_hash = leader_cv_hash.map(|cv_hash| self.synced_hashes.reply_hash_with(&print, cv_hash));
            let matched = own_hash.is_some() && own_hash == leader_hash;
            self.positions.insert(entry.id, position);
            if !matched || self.leader_wants_slow_replies || self.slow_replies_wanted.contains(&entry.reply_to) {
                if !matched {
                    self.stats.count("fast_reply_mismatched");
                }
                to_reply.push(entry.clone());
            }
            newly.push(entry.clone());
            self.synced.push(Slot { entry, print, hash: 0 });
        }
    }

    /// The body of a synced position: from our unsynced entries (case 1/2 of §5.4: same
    /// request, maybe another deadline), the late-buffer, the early-buffer, or the leader's resend.
    /// The second value is the hash our fast-reply for it carried, when we fast-replied at the
    /// leader's deadline (it then needs no slow-reply if the leader's hash was the same).
    fn take_body(&mut self, sync: &SyncEntry) -> Option<(Entry, Option<u64>)> {
        if let Some(index) = self.unsynced.iter().position(|slot| slot.entry.id == sync.id) {
            let slot = self.unsynced.remove(index).expect("the index was just found");
            self.conflicts.remove(&slot.entry, &slot.print);
            let same_deadline = slot.entry.deadline == sync.deadline && sync.body.is_none();
            return Some((slot.entry, same_deadline.then_some(slot.hash)));
        }
        if let Some(entry) = self.late.remove(&sync.id) {
            return Some((entry, None));
        }
        if let Some(order) = self.early_ids.remove(&sync.id) {
            return Some((self.early.remove(&order).expect("indexed early entries are held"), None));
        }
        let body = sync.body.clone()?;
        self.stats.count("fetched_body");
        (body.id == sync.id).then_some((body, None))
    }

    /// A state transfer within our view replaced our synced log. The unsynced entries we
    /// fast-replied for that it does not hold stay: they are votes a view change counts, and a
    /// fast commit may rest on them (a transfer taken before the leader appended them can
    /// arrive after we did). As after a sync, those a transferred conflicting entry now
    /// precedes go back to the late-buffer.
    pub(super) fn keep_unsynced(&mut self, now: ClockReading, slots: VecDeque<Slot>, transferred: &[Entry]) {
        for slot in slots {
            if self.appended_or_executed(slot.entry.id) {
                continue;
            }
            self.conflicts.add(&slot.entry, &slot.print);
            self.unsynced.push_back(slot);
        }
        self.after_sync(now, transferred);
    }

    /// Unsynced entries that now precede a newly synced conflicting entry in deadline order
    /// cannot stay (the log must stay ordered); they go back to the late-buffer, where a
    /// later sync finds them.
    fn after_sync(&mut self, _now: ClockReading, newly: &[Entry]) {
        if newly.is_empty() || self.unsynced.is_empty() {
            return;
        }
        let mut marks: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
        for entry in newly {
            let print = self.conflicts.footprint(&entry.command);
            for bucket in print.buckets {
                let mark = marks.entry(bucket).or_default();
                mark.0 = mark.0.max(entry.deadline);
                if print.write {
                    mark.1 = mark.1.max(entry.deadline);
                }
            }
        }
        let conflicting = |slot: &Slot| {
            let print: &Footprint = &slot.print;
            print.buckets.iter().any(|bucket| {
                marks.get(bucket).is_some_and(|(any, write)| {
                    let threshold = if print.write { *any } else { *write };
                    threshold >= slot.entry.deadline
                })
            })
        };
        let (stay, leave): (VecDeque<Slot>, VecDeque<Slot>) =
            std::mem::take(&mut self.unsynced).into_iter().partition(|s| !conflicting(s));
        self.unsynced = stay;
        for slot in leave {
            self.conflicts.remove(&slot.entry, &slot.print);
            self.stats.count("unsynced_reordered");
            self.keep_late(slot.entry);
        }
    }

    /// Leader: a follower's sync-point.
    pub(super) fn on_sync_ack(
        &mut self,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        sync_point: u64,
        missing: bool,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("sync ack from a non-replica")?;
        if self.status != Status::Normal || view != self.view || !self.is_leader() {
            return Err("sync ack while not the normal leader of its view");
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray sync ack (sender rejoined since)");
        }
        if sync_point > self.sync_point() {
            return Err("sync ack beyond the leader's log");
        }
        if sender == self.rank {
            // Only a forged or misrouted datagram names the leader as its own follower.
            return Err("sync ack from the leader itself");
        }
        assert!(sender != self.rank, "the leader does not acknowledge itself");
        self.acked[sender] = self.acked[sender].max(sync_point);
        self.acked[self.rank] = self.sync_point();
        let mut points = self.acked.clone();
        points.sort_unstable_by(|a, b| b.cmp(a));
        self.commit_through(points[self.f], out);
        if missing {
            self.resend_to(sender, out);
        }
        Ok(())
    }

    /// Asks the leader `leader` for its log (a lagging replica), once per tick.
    pub(super) fn ask_state(&mut self, leader: NodeId, out: &mut Outbox<Nezha>) {
        if self.asked_this_tick {
            return;
        }
        self.asked_this_tick = true;
        self.send_to(out, leader, Message::StateTransferRequest { cv: self.cv.clone() });
    }
}
