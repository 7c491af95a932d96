//! Leader change (paper §6, App. A.3, Algorithm 2) with the paper's log-rebuild rule.
//!
//! Safety argument, in short (App. B.1): a request committed on the slow path lies under the
//! sync-points of f + 1 replicas, so one of any f + 1 view-change logs of the latest normal view
//! has it in its synced prefix, and the longest such prefix is copied. A request committed on
//! the fast path is on the leader and f + ⌈f/2⌉ followers with the same hash, so at least
//! ⌈f/2⌉ + 1 of any f + 1 logs hold it with the same deadline, and the vote keeps it; an
//! uncommitted conflicting request with a smaller deadline is on at most ⌊f/2⌋ of them.
//! Crash-vectors make every vote of a replica's earlier life (before a rejoin) stray.

use super::Nezha;
use super::hashes::ConflictTable;
use super::messages::{Checkpoint, CrashVector, Entry, LogImage, Message};
use super::quorum::recovery_votes;
use super::replica::{Replica, Status, Vote};
use super::sync::{ResendBackoff, image_hold_ticks};
use ordo_core::{ClientId, ClockReading, NodeId, Outbox};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Resend view-change messages every this many ticks while the view change lasts.
const RESEND_TICKS: u64 = 5;
/// Most doublings of the view-change timeout after view changes that stalled (32 times the
/// configured timeout: 3.2 s with the real runtime's 100 ms, enough to move a state of
/// hundreds of megabytes between processes).
pub(super) const STALLED_VIEWS_MAX: u32 = 5;

/// MERGE-LOG (Alg. 2): among the votes of the largest last normal view, copy the longest synced
/// prefix, then add every later entry found in at least ⌈f/2⌉ + 1 of those logs, sorted by
/// deadline (ties by client and request number). A request already in the prefix or executed
/// per the prefix's checkpoint is not added again (a retry with another deadline).
pub fn merge(votes: &[(u64, &LogImage)], f: usize) -> (Arc<Checkpoint>, Vec<Entry>) {
    let largest = votes.iter().map(|(lnv, _)| *lnv).max().expect("a merge has votes");
    let qualified: Vec<&LogImage> = votes.iter().filter(|(lnv, _)| *lnv == largest).map(|(_, image)| *image).collect();
    let best = qualified.iter().copied().fold(None::<&LogImage>, |best, image| match best {
        Some(b) if b.sync_point() >= image.sync_point() => Some(b),
        _ => Some(image),
    });
    let best = best.expect("the largest view has a vote");
    let mut log = best.synced.clone();
    let mut known: BTreeSet<_> = log.iter().map(|e| e.id).collect();
    let executed: BTreeMap<ClientId, u64> = best.checkpoint.clients.iter().map(|(c, n, ..)| (*c, *n)).collect();
    let mut tally: BTreeMap<(u64, ClientId, u64), (usize, &Entry)> = BTreeMap::new();
    for image in &qualified {
        let mut seen = BTreeSet::new();
        for entry in &image.unsynced {
            if seen.insert(entry.order()) {
                tally.entry(entry.order()).or_insert((0, entry)).0 += 1;
            }
        }
    }
    for (_, (count, entry)) in tally {
        let done = executed.get(&entry.id.client).is_some_and(|n| *n >= entry.id.number);
        if count >= recovery_votes(f) && !done && known.insert(entry.id) {
            log.push(entry.clone());
        }
    }
    (best.checkpoint.clone(), log)
}

impl Replica {
    /// INITIATE-VIEW-CHANGE: moves to `view`, tells everyone, sends our log to its leader.
    pub(super) fn start_view_change(&mut self, view: u64, out: &mut Outbox<Nezha>) {
        assert!(view > self.view || self.status != Status::Normal, "a view change moves forward");
        assert!(self.status != Status::Recovering, "recovering replicas do not vote");
        self.status = Status::ViewChange;
        self.view = view;
        self.votes.clear();
        self.leader_quorums.clear();
        self.early.clear();
        self.early_ids.clear();
        self.pending_sync.clear();
        self.reset_timeout();
        self.stats.count("view_change");
        self.send_view_change(out);
    }

    fn send_view_change(&mut self, out: &mut Outbox<Nezha>) {
        self.send_all(out, Message::ViewChangeRequest { view: self.view, cv: self.cv.clone() });
        let vote = Vote {
            cv: self.cv.clone(),
            last_normal_view: self.last_normal_view,
            commit: self.commit,
            image: self.image(),
        };
        let leader = self.leader_of(self.view);
        if leader == self.me {
            self.votes.insert(self.rank, vote);
            self.maybe_finish_view_change(out);
        } else {
            let message = Message::ViewChange {
                view: self.view,
                cv: vote.cv,
                last_normal_view: vote.last_normal_view,
                commit: vote.commit,
                image: vote.image,
            };
            self.send_to(out, leader, message);
        }
    }

    /// During a view change: resend, and move on to the next view if this one stalls (its
    /// leader may be down).
    pub(super) fn view_change_tick(&mut self, out: &mut Outbox<Nezha>) {
        self.quiet_ticks += 1;
        if self.quiet_ticks >= 2 * self.timeout_ticks {
            self.stalled_views = (self.stalled_views + 1).min(STALLED_VIEWS_MAX);
            self.start_view_change(self.view + 1, out);
        } else if self.quiet_ticks.is_multiple_of(self.vote_resend_ticks()) {
            self.send_view_change(out);
        }
    }

    /// Ticks between resends of our vote: it carries our whole state, so a large one is not
    /// repeated before the last copy can have arrived.
    fn vote_resend_ticks(&self) -> u64 {
        (RESEND_TICKS << self.stalled_views).max(u64::from(image_hold_ticks(self.checkpoint.state.len())))
    }

    pub(super) fn on_view_change_request(
        &mut self,
        _now: ClockReading,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("view-change request from a non-replica")?;
        if self.status == Status::Recovering {
            return Err("view-change request while recovering");
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray view-change request (sender rejoined since)");
        }
        if view > self.view {
            self.start_view_change(view, out);
        } else if view < self.view {
            self.help_lagging(from, out);
        }
        Ok(())
    }

    /// A peer is in an older view: the leader tells it the current view, a replica in a view
    /// change invites it.
    fn help_lagging(&mut self, to: NodeId, out: &mut Outbox<Nezha>) {
        match self.status {
            Status::Normal if self.is_leader() => {
                let message = Message::StartView {
                    view: self.view,
                    cv: self.cv.clone(),
                    commit: self.commit,
                    image: self.image(),
                };
                self.send_to(out, to, message);
            }
            Status::ViewChange => {
                self.send_to(out, to, Message::ViewChangeRequest { view: self.view, cv: self.cv.clone() })
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_view_change(
        &mut self,
        _now: ClockReading,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        last_normal_view: u64,
        commit: u64,
        image: Arc<LogImage>,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("view change from a non-replica")?;
        if self.status == Status::Recovering {
            return Err("view change while recovering");
        }
        self.check_image(&image)?;
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray view change (sender rejoined since)");
        }
        if view < self.view || (view == self.view && self.status == Status::Normal) {
            self.help_lagging(from, out);
            return Ok(());
        }
        if view > self.view {
            self.start_view_change(view, out);
        }
        if self.leader_of(view) != self.me {
            return Err("view change sent to a replica that does not lead its view");
        }
        if self.status != Status::ViewChange {
            return Ok(());
        }
        assert_eq!(view, self.view, "votes are for our view");
        self.votes.insert(sender, Vote { cv, last_normal_view, commit, image });
        self.maybe_finish_view_change(out);
        Ok(())
    }

    /// An image from another replica can be adopted: its checkpoint's hashes have our bucket
    /// count (a replica configured with another commutativity mode sends another).
    pub(super) fn check_image(&self, image: &LogImage) -> Result<(), &'static str> {
        if image.checkpoint.hashes.len() != self.conflicts.buckets() {
            return Err("image whose checkpoint has another number of hash buckets");
        }
        Ok(())
    }

    /// With f + 1 votes that are not stray, rebuilds the log and starts the view.
    fn maybe_finish_view_change(&mut self, out: &mut Outbox<Nezha>) {
        let cv = self.cv.clone();
        self.votes.retain(|rank, vote| vote.cv[*rank] >= cv[*rank]);
        if self.votes.len() < self.f + 1 {
            return;
        }
        if !self.votes.contains_key(&self.rank) {
            // Our own vote went stale: a peer's crash vector (forged, or from a later rejoin of
            // ours) raised our own entry. The view change timer moves on to the next view.
            self.stats.drop_input("own view-change vote stale");
            return;
        }
        let inputs: Vec<(u64, &LogImage)> =
            self.votes.values().map(|vote| (vote.last_normal_view, vote.image.as_ref())).collect();
        let (checkpoint, log) = merge(&inputs, self.f);
        let commit = self.votes.values().map(|vote| vote.commit).max().unwrap_or(0);
        self.stats.count("view_started");
        self.adopt(self.view, commit, checkpoint, log, out);
        let message =
            Message::StartView { view: self.view, cv: self.cv.clone(), commit: self.commit, image: self.image() };
        self.send_all(out, message);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_start_view(
        &mut self,
        now: ClockReading,
        from: NodeId,
        view: u64,
        cv: CrashVector,
        commit: u64,
        image: Arc<LogImage>,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        let sender = self.rank_of(from).ok_or("start view from a non-replica")?;
        if self.status == Status::Recovering {
            return Err("start view while recovering");
        }
        self.check_image(&image)?;
        if from != self.leader_of(view) || from == self.me {
            return Err("start view from a replica that does not lead it");
        }
        if view < self.view || (view == self.view && self.status == Status::Normal) {
            return Err("start view of an old or current view");
        }
        if !self.check_crash_vector(sender, &cv) {
            return Err("stray start view (sender rejoined since)");
        }
        self.adopt(view, commit, image.checkpoint.clone(), image.synced.clone(), out);
        self.send_to(
            out,
            from,
            Message::SyncAck { view, cv: self.cv.clone(), sync_point: self.sync_point(), missing: false },
        );
        self.release_due(now, out);
        Ok(())
    }

    /// Takes a log of `view` as ours, all synced, and becomes normal in it. Our state machine
    /// stays if what it executed is a committed prefix of the new log; otherwise (a former
    /// leader that executed ahead of the commit point, or a replica behind the new checkpoint)
    /// it restarts from the new log's checkpoint. Every position under the new commit point is
    /// reported to the global checker again (the log is new, the facts must be the same).
    pub(super) fn adopt(
        &mut self,
        view: u64,
        commit: u64,
        checkpoint: Arc<Checkpoint>,
        log: Vec<Entry>,
        out: &mut Outbox<Nezha>,
    ) {
        assert!(view >= self.view || self.status == Status::Recovering, "a replica never goes back a view");
        let end = checkpoint.position + log.len() as u64;
        self.leader_quorums.clear();
        let keep = self.status != Status::Recovering
            && self.executed <= self.commit
            && self.executed >= checkpoint.position
            && self.executed <= end;
        let commit = commit.max(if keep { self.commit } else { 0 }).min(end);
        if !keep {
            self.restore(&checkpoint);
        }
        let mut table = ConflictTable::new(self.config.commutativity);
        let restored = table.restore_hashes(&checkpoint.hashes);
        assert!(restored, "images are checked for their checkpoint's bucket count before adoption");
        let deadline_max = log.iter().map(|e| e.deadline).max().unwrap_or(0).max(checkpoint.deadline_max);
        // Requests in flight during the change follow everything in the new log.
        table.raise_all(deadline_max);
        self.checkpoint = checkpoint;
        self.log_epoch += 1;
        self.synced.clear();
        self.unsynced.clear();
        self.positions.clear();
        for (index, entry) in log.into_iter().enumerate() {
            let print = table.footprint(&entry.command);
            table.add(&entry, &print);
            let hash = table.reply_hash(&print, &self.cv);
            self.positions.insert(entry.id, self.checkpoint.position + 1 + index as u64);
            self.synced.push(super::replica::Slot { entry, print, hash });
        }
        self.synced_hashes = table.write_hashes().clone();
        self.cv_since = end + 1;
        self.conflicts = table;
        self.early.clear();
        self.early_ids.clear();
        self.late.clear();
        self.pending_sync.clear();
        self.votes.clear();
        self.rejoin = None;
        self.view = view;
        self.last_normal_view = view;
        self.status = Status::Normal;
        self.stalled_views = 0;
        self.commit = commit;
        self.report_committed(self.checkpoint.position, commit, out);
        self.acked = vec![0; self.replicas.len()];
        self.acked[self.rank] = end;
        self.acked_last_tick = vec![0; self.replicas.len()];
        self.resend_backoff = vec![ResendBackoff::default(); self.replicas.len()];
        if self.is_leader() {
            // Our StartView, about to go out, carries the whole state to every follower.
            let hold = image_hold_ticks(self.checkpoint.state.len());
            self.resend_backoff.iter_mut().for_each(|backoff| backoff.hold(hold));
        }
        self.unannounced = end + 1;
        self.announced_before = 0;
        self.reset_timeout();
        let executable = if self.is_leader() { end } else { commit };
        if executable > self.executed {
            self.execute_through(executable);
        }
        self.maybe_checkpoint();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ordo_core::{Command, RequestId};

    fn entry(client: u64, deadline: u64) -> Entry {
        Entry {
            id: RequestId { client: ClientId(client), number: 1 },
            deadline,
            reply_to: NodeId(99),
            command: Command::set("k", "v"),
        }
    }

    fn image(synced: Vec<Entry>, unsynced: Vec<Entry>) -> LogImage {
        let checkpoint = Arc::new(Checkpoint {
            position: 0,
            deadline_max: 0,
            state: Bytes::new(),
            clients: Vec::new(),
            hashes: vec![0; 1],
        });
        LogImage { checkpoint, synced, unsynced }
    }

    #[test]
    fn merge_copies_the_longest_prefix_of_the_latest_view_and_votes_the_rest() {
        // Goal (spec §6.5, §11 #19–#21, f = 2): the longest synced prefix among the largest
        // last-normal-view wins; a later entry needs ⌈f/2⌉ + 1 = 2 votes; a lagging view's log
        // is ignored; the result is sorted by deadline.
        let (a, b, c, x, y) = (entry(1, 10), entry(2, 20), entry(3, 30), entry(4, 40), entry(5, 35));
        let lagging = image(vec![a.clone(), b.clone(), c.clone(), x.clone()], vec![]);
        let short = image(vec![a.clone()], vec![x.clone(), y.clone()]);
        let long = image(vec![a.clone(), b.clone()], vec![x.clone()]);
        let (_, log) = merge(&[(0, &lagging), (1, &short), (1, &long)], 2);
        assert_eq!(log, vec![a, b, x]);
    }

    #[test]
    fn merge_needs_the_super_quorum_intersection() {
        // Goal (spec §7.4, f = 1): an entry on only one of the two logs is not recovered.
        let (a, b) = (entry(1, 10), entry(2, 20));
        let one = image(vec![], vec![a.clone()]);
        let other = image(vec![], vec![b.clone()]);
        assert!(merge(&[(0, &one), (0, &other)], 1).1.is_empty());
        let both = image(vec![], vec![a.clone(), b.clone()]);
        assert_eq!(merge(&[(0, &one), (0, &both)], 1).1, vec![a]);
    }
}
