//! The replica: its state, dispatch, the DOM receiver (early- and late-buffer, release) and the
//! leader's append and execution (paper §4, §5.2–§5.4, §5.6). Sync handling is in `sync.rs`,
//! view change in `view_change.rs`, rejoin and state transfer in `recovery.rs`.

use super::checker::Observation;
use super::clients::Clients;
use super::dom::{EarlyBuffer, EstimatorOptions, OwdEstimator};
use super::durable::{Replayed, Written};
use super::hashes::{ConflictTable, Footprint, WriteHashes};
use super::leader_quorum::LeaderQuorums;
use super::messages::{Checkpoint, CrashVector, Entry, FastReply, LogImage, Message, SyncEntry};
use super::sync::{AnnounceDelay, ResendBackoff, SyncBatch};
use super::{Config, Durable, Flaw, Nezha, Timer};
use bytes::Bytes;
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox,
    PersistMode, RequestId, StateMachine,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// What a replica is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Processing requests in its view.
    Normal,
    /// Electing the leader of its view.
    ViewChange,
    /// Restarted: rejoining from its peers before it does anything else.
    Recovering,
}

/// One log entry with what the replica computed when it appended it.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The entry.
    pub entry: Entry,
    /// Its buckets and whether it writes.
    pub print: Footprint,
    /// The hash its fast-reply carried (resent for duplicates).
    pub hash: u64,
}

/// What a DOM sender stamped on one multicast: the deadline `s + l` and the bound `l`.
#[derive(Clone, Copy, Debug)]
struct Stamp {
    deadline: u64,
    bound_ns: u64,
}

/// Where a rejoin stands (`recovery.rs`).
#[derive(Clone, Debug)]
pub struct Rejoin {
    /// Identifies this attempt; replies echo it.
    pub nonce: u64,
    /// Crash-vectors and views received, by rank.
    pub replies: BTreeMap<usize, (u64, CrashVector)>,
    /// True once the own counter was raised (done once per restart).
    pub raised: bool,
    /// The leader asked for state, if any.
    pub asked: Option<NodeId>,
    /// Ticks since the last step.
    pub ticks: u64,
}

/// A view-change vote the leader-to-be holds.
#[derive(Clone, Debug)]
pub struct Vote {
    /// The sender's crash-vector.
    pub cv: CrashVector,
    /// Its last normal view.
    pub last_normal_view: u64,
    /// Its commit point.
    pub commit: u64,
    /// Its log.
    pub image: Arc<LogImage>,
}

/// A Nezha replica.
pub struct Replica {
    pub(super) me: NodeId,
    pub(super) rank: usize,
    pub(super) replicas: Destinations,
    pub(super) f: usize,
    pub(super) config: Config,
    pub(super) status: Status,
    pub(super) view: u64,
    pub(super) last_normal_view: u64,
    pub(super) cv: CrashVector,
    /// State below the first synced entry.
    pub(super) checkpoint: Arc<Checkpoint>,
    /// Leader: a checkpoint taken (in the view given) but not folded in yet, so that positions
    /// a follower has not acknowledged can still be resent rather than the whole state.
    pub(super) unfolded: Option<(u64, Arc<Checkpoint>)>,
    /// Entries agreed with the leader, at positions `checkpoint.position + 1 ..`.
    pub(super) synced: Vec<Slot>,
    /// Entries released here and not yet confirmed by the leader (always empty at the leader).
    pub(super) unsynced: VecDeque<Slot>,
    /// Position of every synced entry.
    pub(super) positions: BTreeMap<RequestId, u64>,
    /// Positions up to here are committed.
    pub(super) commit: u64,
    /// Positions up to here are applied to the state machine.
    pub(super) executed: u64,
    pub(super) state_machine: Box<dyn StateMachine>,
    pub(super) new_state_machine: fn() -> Box<dyn StateMachine>,
    /// Per client: last request number executed and its result (at-most-once, §5.6).
    pub(super) clients: Clients,
    pub(super) conflicts: ConflictTable,
    /// The write hashes of the synced log alone (the conflict table also holds the unsynced
    /// entries). A follower's synced log is the leader's, so these give the hash of the
    /// leader's fast-reply for each position it syncs, which syncs therefore need not carry.
    pub(super) synced_hashes: WriteHashes,
    /// Leader: its first position appended under its current crash-vector.
    pub(super) cv_since: u64,
    pub(super) early: EarlyBuffer<Entry>,
    /// The early-buffer's key of every request it holds.
    pub(super) early_ids: BTreeMap<RequestId, (u64, ClientId, u64)>,
    pub(super) late: BTreeMap<RequestId, Entry>,
    pub(super) owd: OwdEstimator,
    /// DOM senders whose latest multicast asked for slow-replies even where fast-replies
    /// matched (they hear fewer replicas than a fast quorum); at most one per tracked sender.
    pub(super) slow_replies_wanted: BTreeSet<NodeId>,
    /// Follower: the leader's latest sync asked for slow-replies to every position (it checks
    /// quorums and hears fewer replicas than a fast quorum).
    pub(super) leader_wants_slow_replies: bool,
    /// Follower: sync positions received beyond the sync-point, each with the hash of the
    /// crash-vector the leader's fast-reply for it carried (none when the sync could not say).
    pub(super) pending_sync: BTreeMap<u64, (SyncEntry, Option<u64>)>,
    /// Leader: each replica's sync-point as last acknowledged in this view.
    pub(super) acked: Vec<u64>,
    /// Leader: the acknowledgements at the previous tick (a follower whose ack did not move
    /// while behind gets a resend).
    pub(super) acked_last_tick: Vec<u64>,
    /// Leader: per follower, ticks between resends while its acknowledgement stays stuck, and
    /// ticks until the next (a crashed follower would otherwise get a resend, often a whole
    /// state transfer, every tick).
    pub(super) resend_backoff: Vec<ResendBackoff>,
    /// Leader: the first position no sync announced yet.
    pub(super) unannounced: u64,
    /// Leader: the announce timer is pending, and whether it runs the short (slow-path) delay.
    pub(super) announce_scheduled: Option<AnnounceDelay>,
    /// Leader: a position appended since the last announcement waits for the slow path (the
    /// leader raised its deadline, so no follower's fast-reply can match).
    pub(super) slow_path_waiting: bool,
    /// Follower: asked the leader for a body or state since the last tick.
    pub(super) asked_this_tick: bool,
    /// Follower: where the announced positions ended at the leader's previous heartbeat. A
    /// follower still short of it a heartbeat later lacks positions (a sync was lost); short
    /// of the latest one it may only be waiting for a sync the heartbeat overtook.
    pub(super) announced_before: u64,
    /// Follower: the sync-point its last `SyncAck` carried.
    pub(super) ack_sent: u64,
    /// Ticks without hearing from the leader (or without finishing the view change).
    pub(super) quiet_ticks: u64,
    /// Ticks of quiet before a view change (randomised).
    pub(super) timeout_ticks: u64,
    /// View changes in a row that timed out into the next view: each doubles the next one's
    /// timeout and resend period (up to `view_change::STALLED_VIEWS_MAX` doublings), so that a view change
    /// whose messages carry a large state has time to finish instead of being restarted forever.
    pub(super) stalled_views: u32,
    /// New leader: view-change votes of the current view, by rank.
    pub(super) votes: BTreeMap<usize, Vote>,
    pub(super) rejoin: Option<Rejoin>,
    pub(super) rng: ChaCha8Rng,
    pub(super) stats: NodeStats,
    /// Fast-replies made by the current handler, by destination and view; sent as one
    /// `FastReplies` per destination when the handler ends (empty between handlers).
    pub(super) fast_out: BTreeMap<(NodeId, u64, NodeId), Vec<FastReply>>,
    /// Slow-replies made by the current handler, by destination, view and DOM sender.
    pub(super) slow_out: BTreeMap<(NodeId, u64, NodeId), Vec<RequestId>>,
    /// Leader with `quorum_check_at_leader`: the quorum check of every request.
    pub(super) leader_quorums: LeaderQuorums,
    /// Raised whenever the log is rebuilt rather than extended (a checkpoint folded in, a view
    /// change or state transfer adopted): durable mode then writes a whole image.
    pub(super) log_epoch: u64,
    /// Durable mode: what the records hold (`durable.rs`); none before the first image.
    pub(super) written: Option<Written>,
    /// Durable mode: resumed from records as a leader or voter, so `on_start` starts a view
    /// change.
    pub(super) view_change_at_start: bool,
    /// A deliberate bug (canaries only).
    pub(super) flaw: Flaw,
}

/// Positions a follower buffers beyond its sync-point.
const PENDING_SYNC_MAX: u64 = 65_536;

impl Replica {
    /// A replica, fresh (`durable` empty: it joins view 0 as normal) or restarted: it rejoins,
    /// or in durable mode resumes from its records (`durable.rs`).
    pub(crate) fn new(context: NodeContext<Nezha>, durable: Vec<Durable>, flaw: Flaw) -> Self {
        let replicas = context.topology.replicas().clone();
        let rank = context.topology.replica_rank(context.id).expect("a replica has a rank");
        let config = context.config.clone();
        let n = replicas.len();
        let options = EstimatorOptions {
            window: config.owd_window,
            percentile: config.owd_percentile,
            beta: config.owd_beta,
            max_ns: config.owd_max_ns,
            senders_max: context.topology.nodes.len(),
        };
        let (replayed, restarted) = boot_records(&config, rank, &durable);
        let conflicts = ConflictTable::new(config.commutativity);
        let mut replica = Replica {
            me: context.id,
            rank,
            f: context.topology.f,
            status: if restarted { Status::Recovering } else { Status::Normal },
            view: 0,
            last_normal_view: 0,
            cv: vec![0; n],
            checkpoint: Arc::new(Checkpoint {
                position: 0,
                deadline_max: 0,
                state: (context.new_state_machine)().snapshot().into(),
                clients: Vec::new(),
                hashes: conflicts.hashes_without([]).into_vec(),
            }),
            unfolded: None,
            synced: Vec::new(),
            unsynced: VecDeque::new(),
            positions: BTreeMap::new(),
            commit: 0,
            executed: 0,
            state_machine: (context.new_state_machine)(),
            new_state_machine: context.new_state_machine,
            clients: Clients::new(config.client_table_max),
            synced_hashes: conflicts.write_hashes().clone(),
            cv_since: 1,
            conflicts,
            early: EarlyBuffer::new(config.early_buffer_max),
            early_ids: BTreeMap::new(),
            late: BTreeMap::new(),
            owd: OwdEstimator::new(options),
            slow_replies_wanted: BTreeSet::new(),
            leader_wants_slow_replies: false,
            pending_sync: BTreeMap::new(),
            acked: vec![0; n],
            acked_last_tick: vec![0; n],
            resend_backoff: vec![ResendBackoff::default(); n],
            unannounced: 1,
            announce_scheduled: None,
            slow_path_waiting: false,
            asked_this_tick: false,
            announced_before: 0,
            ack_sent: 0,
            quiet_ticks: 0,
            timeout_ticks: 0,
            stalled_views: 0,
            votes: BTreeMap::new(),
            rejoin: None,
            rng: ChaCha8Rng::seed_from_u64(context.seed),
            stats: NodeStats::default(),
            fast_out: BTreeMap::new(),
            slow_out: BTreeMap::new(),
            leader_quorums: LeaderQuorums::new(n),
            log_epoch: 0,
            written: None,
            view_change_at_start: false,
            flaw,
            replicas,
            config,
        };
        if let Some(replayed) = replayed {
            replica.view_change_at_start = replica.resume(replayed);
        }
        replica.reset_timeout();
        replica
    }

    /// Sends one message once the node's writes are durable. A replica writes only its launch
    /// marker, on a first boot: everything it sends waits for it, so a crash before it is durable
    /// leaves a replica that never spoke and may boot fresh again.
    pub(super) fn send_to(&self, out: &mut Outbox<Nezha>, to: NodeId, message: Message) {
        out.send_durable(to, message);
    }

    /// Sends one message to every other replica once the launch marker is durable.
    pub(super) fn send_all(&self, out: &mut Outbox<Nezha>, message: Message) {
        out.multicast_durable(&self.replicas, message);
    }

    /// The leader of `view`.
    pub(super) fn leader_of(&self, view: u64) -> NodeId {
        self.replicas[(view % self.replicas.len() as u64) as usize]
    }

    /// True when this replica leads its view.
    pub(super) fn is_leader(&self) -> bool {
        self.leader_of(self.view) == self.me
    }

    /// The rank of a replica node.
    pub(super) fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.replicas.iter().position(|&r| r == node)
    }

    /// The position of the last synced entry.
    pub(super) fn sync_point(&self) -> u64 {
        self.checkpoint.position + self.synced.len() as u64
    }

    /// Draws a new leader-failure timeout, ±50% around the configured one, doubled for each
    /// stalled view change in a row.
    pub(super) fn reset_timeout(&mut self) {
        let base = (self.config.view_change_timeout_ns / self.config.heartbeat_ns).max(2) << self.stalled_views;
        self.timeout_ticks = self.rng.random_range(base / 2..=base + base / 2).max(2);
        self.quiet_ticks = 0;
    }

    /// CHECK-CRASH-VECTOR (Alg. 1): false for a stray message, sent by `sender` before its
    /// latest rejoin; otherwise learns the message's counters.
    pub(super) fn check_crash_vector(&mut self, sender: usize, cv: &CrashVector) -> bool {
        if cv.len() != self.cv.len() || cv[sender] < self.cv[sender] {
            return false;
        }
        let mut raised = false;
        for (mine, theirs) in self.cv.iter_mut().zip(cv) {
            raised |= theirs > mine;
            *mine = (*mine).max(*theirs);
        }
        if raised {
            self.cv_since = self.sync_point() + 1;
        }
        true
    }

    /// Our current log as sent in view changes and state transfers.
    pub(super) fn image(&self) -> Arc<LogImage> {
        Arc::new(LogImage {
            checkpoint: self.checkpoint.clone(),
            synced: self.synced.iter().map(|slot| slot.entry.clone()).collect(),
            unsynced: self.unsynced.iter().map(|slot| slot.entry.clone()).collect(),
        })
    }

    // ----- DOM receiver -------------------------------------------------------------------

    /// A DOM batch: one OWD sample for the message, then each request to the early-buffer,
    /// the late-buffer or (a duplicate) its previous reply.
    #[allow(clippy::too_many_arguments)]
    fn on_requests(
        &mut self,
        now: ClockReading,
        from: NodeId,
        requests: Vec<(RequestId, Command)>,
        send_ns: u64,
        bound_ns: u64,
        sender_error_ns: u64,
        slow_replies: bool,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        if self.status != Status::Normal {
            return Err("request while not normal");
        }
        if self.rank_of(from).is_some() {
            return Err("request from a replica");
        }
        if self.owd.record(from, send_ns, now.local_ns, sender_error_ns) {
            self.note_slow_replies_wanted(from, slow_replies);
        } else {
            self.stats.drop_input("owd sample from an untracked sender");
        }
        let stamp = Stamp { deadline: send_ns.saturating_add(bound_ns), bound_ns };
        for (id, command) in requests {
            if let Err(reason) = self.on_request(now, from, id, command, stamp, out) {
                self.stats.drop_input(reason);
            }
        }
        self.release_due(now, out);
        Ok(())
    }

    /// Remembers whether `sender` wants slow-replies for requests whose fast-reply matched
    /// (only for senders the OWD estimator tracks, so the set stays bounded).
    fn note_slow_replies_wanted(&mut self, sender: NodeId, wanted: bool) {
        if wanted {
            self.slow_replies_wanted.insert(sender);
        } else {
            self.slow_replies_wanted.remove(&sender);
        }
    }

    fn on_request(
        &mut self,
        now: ClockReading,
        from: NodeId,
        id: RequestId,
        command: Command,
        stamp: Stamp,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        if self.answer_duplicate(from, id) {
            return Ok(());
        }
        if self.early_ids.contains_key(&id) || self.late.contains_key(&id) {
            return Err("request already buffered");
        }
        let entry = Entry { id, deadline: stamp.deadline, reply_to: from, command };
        let print = self.conflicts.footprint(&entry.command);
        if self.is_leader() {
            self.leader_receive(now, entry, print, stamp.bound_ns, out);
        } else if self.conflicts.eligible(&print, entry.deadline) {
            self.hold(entry)?;
        } else {
            self.stats.count("late_buffer");
            self.keep_late(entry);
        }
        Ok(())
    }

    /// Answers a request this replica already appended or executed, as §5.6 says: the previous
    /// reply again (sent to whoever sent this copy). True when the request was a duplicate.
    fn answer_duplicate(&mut self, from: NodeId, id: RequestId) -> bool {
        let executed =
            self.clients.get(id.client).filter(|(number, _)| *number >= id.number).map(|(n, r)| (n, r.clone()));
        let synced = self.positions.get(&id).copied();
        let unsynced = self.unsynced.iter().find(|slot| slot.entry.id == id).map(|slot| slot.hash);
        if executed.is_none() && synced.is_none() && unsynced.is_none() {
            return false;
        }
        if self.is_leader() {
            let Some((number, result)) = executed else {
                self.stats.drop_input("duplicate at the leader not executed yet");
                return true;
            };
            if number != id.number {
                self.stats.drop_input("duplicate of a request the client moved past");
                return true;
            }
            let hash = synced.map_or(0, |position| self.slot(position).map_or(0, |slot| slot.hash));
            self.queue_fast_reply(from, FastReply { id, hash, result: Some(result) });
        } else if let Some(hash) = unsynced {
            self.queue_fast_reply(from, FastReply { id, hash, result: None });
        } else {
            // Synced: the slow-reply goes out in the same handler, with the fast-replies.
            self.queue_slow_reply(from, id);
        }
        self.stats.count("duplicate_reply");
        true
    }

    /// The synced slot at `position`, if held in memory.
    pub(super) fn slot(&self, position: u64) -> Option<&Slot> {
        let index = position.checked_sub(self.checkpoint.position + 1)?;
        self.synced.get(usize::try_from(index).ok()?)
    }

    /// The leader takes a request: late ones get a deadline just above the last released
    /// conflicting request (§5.4), and so do ones held too long by the leader's clock (App.
    /// D.2.4); both are appended at once. Others wait in the early-buffer.
    fn leader_receive(
        &mut self,
        now: ClockReading,
        mut entry: Entry,
        print: Footprint,
        bound_ns: u64,
        out: &mut Outbox<Nezha>,
    ) {
        if !self.conflicts.eligible(&print, entry.deadline) || self.held_too_long(now, entry.deadline, bound_ns) {
            self.raise_deadline(&mut entry, &print);
            self.leader_append(vec![(entry, print)], out);
        } else if let Err(reason) = self.hold(entry) {
            self.stats.drop_input(reason);
        }
    }

    /// App. D.2.4: whether the leader's clock would hold a request longer than its whole latency
    /// bound (and than `leader_release_ahead_ns`), i.e. the request reached the leader before
    /// it was sent by the leader's clock. Only a clock fault does that (the leader's clock
    /// behind, or the sender's ahead). A hold within the bound is normal: other replicas asked
    /// for it (under load their CPUs queue, so their OWD estimates grow), the fast quorum
    /// waits for them anyway, and lowering the deadline would only push the request to the
    /// slow path, whose extra slow-replies load the followers further.
    fn held_too_long(&self, now: ClockReading, deadline: u64, bound_ns: u64) -> bool {
        let ahead = self.config.leader_release_ahead_ns;
        ahead > 0 && deadline > now.local_ns.saturating_add(ahead.max(bound_ns))
    }

    fn hold(&mut self, entry: Entry) -> Result<(), &'static str> {
        let order = entry.order();
        let id = entry.id;
        self.early.insert(order, entry).map_err(|_| "early-buffer full")?;
        self.early_ids.insert(id, order);
        Ok(())
    }

    /// Keeps a request in the late-buffer, evicting the oldest-numbered one when full (an
    /// evicted request can still reach the log through a sync with its body).
    pub(super) fn keep_late(&mut self, entry: Entry) {
        if self.late.len() >= self.config.late_buffer_max {
            self.late.pop_first();
            self.stats.drop_input("late-buffer full: evicted");
        }
        self.late.insert(entry.id, entry);
    }

    /// Releases every early-buffer entry whose deadline the clock has passed, in deadline
    /// order, and sets the release timer for the next one.
    pub(super) fn release_due(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        let mut released = Vec::new();
        while let Some((_, entry)) = self.early.pop_due(now.local_ns) {
            self.early_ids.remove(&entry.id);
            let print = self.conflicts.footprint(&entry.command);
            if self.is_leader() {
                self.leader_append(vec![(entry, print)], out);
                continue;
            }
            // Re-checked at release: a sync may have raised the threshold meanwhile.
            if self.positions.contains_key(&entry.id) || self.unsynced.iter().any(|s| s.entry.id == entry.id) {
                continue;
            }
            if !self.conflicts.eligible(&print, entry.deadline) || self.unsynced.len() >= self.config.unsynced_max {
                self.stats.count("late_buffer");
                self.keep_late(entry);
                continue;
            }
            self.conflicts.add(&entry, &print);
            let hash = self.conflicts.reply_hash(&print, &self.cv);
            released.push((entry.reply_to, entry.id, hash));
            self.unsynced.push_back(Slot { entry, print, hash });
        }
        for (to, id, hash) in released {
            self.queue_fast_reply(to, FastReply { id, hash, result: None });
        }
        if let Some(deadline) = self.early.next_deadline() {
            out.set_timer_at(Timer::Release, deadline);
        }
    }

    /// Leader, §5.4: a late request goes just above the last released conflicting one. Its
    /// followers' fast-replies cannot match, so it commits on the slow path, which waits for
    /// its sync.
    fn raise_deadline(&mut self, entry: &mut Entry, print: &Footprint) {
        entry.deadline = self.conflicts.threshold(print) + 1;
        self.stats.count("leader_raised_deadline");
        self.slow_path_waiting = true;
    }

    /// Whether `id` holds a synced position here or the client table says it ran.
    pub(super) fn appended_or_executed(&self, id: RequestId) -> bool {
        self.positions.contains_key(&id) || self.clients.get(id.client).is_some_and(|(number, _)| number >= id.number)
    }

    /// The leader appends entries, executes them, fast-replies with the results and announces
    /// the new positions to the followers.
    pub(super) fn leader_append(&mut self, entries: Vec<(Entry, Footprint)>, out: &mut Outbox<Nezha>) {
        assert!(self.is_leader() && self.status == Status::Normal, "only a normal leader appends");
        for (mut entry, print) in entries {
            if self.appended_or_executed(entry.id) {
                self.stats.drop_input("released a request already appended or executed");
                continue;
            }
            if !self.conflicts.eligible(&print, entry.deadline) {
                self.raise_deadline(&mut entry, &print);
            }
            self.conflicts.add(&entry, &print);
            self.synced_hashes.toggle(&entry, &print);
            let hash = self.conflicts.reply_hash(&print, &self.cv);
            let position = self.sync_point() + 1;
            self.positions.insert(entry.id, position);
            let (to, id) = (entry.reply_to, entry.id);
            self.synced.push(Slot { entry, print, hash });
            let result = self.execute_through(position);
            self.queue_fast_reply(to, FastReply { id, hash, result });
        }
        self.maybe_announce(out);
        self.maybe_checkpoint();
    }

    /// Where a reply about a request of `sender` goes: the sender, or the leader when the
    /// leader checks quorums.
    fn reply_destination(&self, sender: NodeId) -> NodeId {
        if self.config.quorum_check_at_leader { self.leader_of(self.view) } else { sender }
    }

    /// Queues a fast-reply of the current view to the request's sender; the handler's end sends
    /// it. A leader that checks quorums counts its own reply instead.
    fn queue_fast_reply(&mut self, sender: NodeId, reply: FastReply) {
        if self.config.quorum_check_at_leader && self.is_leader() {
            self.count_own_reply(sender, reply);
            return;
        }
        let to = self.reply_destination(sender);
        self.fast_out.entry((to, self.view, sender)).or_default().push(reply);
    }

    /// Queues a slow-reply of the current view (a follower's, never the leader's).
    pub(super) fn queue_slow_reply(&mut self, sender: NodeId, id: RequestId) {
        let to = self.reply_destination(sender);
        self.slow_out.entry((to, self.view, sender)).or_default().push(id);
    }

    /// Sends the replies the handler made: one `FastReplies` and one `SlowReply` per
    /// destination and sender, with this replica's OWD estimate for the sender (batching keeps
    /// the leader's load near 2/m messages per request, Tab. 1), and the leader's commits.
    pub(super) fn flush_replies(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        for ((to, view, about), replies) in std::mem::take(&mut self.fast_out) {
            let owd_ns = self.owd.estimate(about, now.error_bound_ns);
            self.send_to(out, to, Message::FastReplies { view, about, replies, owd_ns });
        }
        for ((to, view, about), ids) in std::mem::take(&mut self.slow_out) {
            let owd_ns = self.owd.estimate(about, now.error_bound_ns);
            self.send_to(out, to, Message::SlowReply { view, about, ids, owd_ns });
        }
        self.flush_commits(now, out);
    }

    // ----- commit point, execution and checkpoints ----------------------------------------

    /// Raises the commit point to `commit` (a lower one changes nothing) and reports each synced
    /// position it newly covers to the global checker (`checker.rs`): this is where a position
    /// becomes final at a replica.
    pub(super) fn commit_through(&mut self, commit: u64, out: &mut Outbox<Nezha>) {
        if commit <= self.commit {
            return;
        }
        assert!(commit <= self.sync_point(), "only synced positions commit");
        self.report_committed(self.commit, commit, out);
        self.commit = commit;
    }

    /// Reports the synced positions held in memory after `after` up to `through` as committed.
    /// Positions folded into the checkpoint are not held, hence not reported.
    pub(super) fn report_committed(&self, after: u64, through: u64, out: &mut Outbox<Nezha>) {
        assert!(through <= self.sync_point(), "only synced positions are reported");
        for position in after.max(self.checkpoint.position) + 1..=through {
            let slot = self.slot(position).expect("synced positions above the checkpoint are in memory");
            out.observe(Observation::Committed { position, id: slot.entry.id });
        }
    }

    /// Applies synced positions up to `position`; returns the last one's result.
    pub(super) fn execute_through(&mut self, position: u64) -> Option<CommandResult> {
        assert!(position <= self.sync_point(), "only synced positions execute");
        let mut last = None;
        while self.executed < position {
            let slot = self.slot(self.executed + 1).expect("positions above the checkpoint are in memory");
            let (id, command) = (slot.entry.id, slot.entry.command.clone());
            let result = match self.clients.get(id.client) {
                // At-most-once: a request already executed (a retry with a new deadline that
                // reached the log twice) is skipped everywhere alike.
                Some((number, result)) if number >= id.number => {
                    if number == id.number {
                        result.clone()
                    } else {
                        CommandResult::Error("stale request".into())
                    }
                }
                _ => {
                    let result = self.state_machine.apply(id, &command);
                    self.clients.record(id.client, id.number, result.clone(), self.executed + 1);
                    self.stats.executed += 1;
                    result
                }
            };
            self.executed += 1;
            last = Some(result);
        }
        last
    }

    /// Folds executed positions into a checkpoint once an interval's worth accumulated, so
    /// that the log does not grow without bound. A follower folds at once. The leader folds a
    /// checkpoint in only when every follower acknowledged its position, or when the next one is
    /// due: a lost sync message is then resent from memory, not answered by a state transfer,
    /// and the leader holds at most two intervals of positions.
    pub(super) fn maybe_checkpoint(&mut self) {
        let leading = self.status == Status::Normal && self.is_leader();
        if self.unfolded.as_ref().is_some_and(|(view, _)| !leading || *view != self.view) {
            self.unfolded = None;
        }
        let since = self.unfolded.as_ref().map_or(self.checkpoint.position, |(_, taken)| taken.position);
        if let Some((_, taken)) = &self.unfolded {
            let acknowledged =
                (0..self.replicas.len()).all(|rank| rank == self.rank || self.acked[rank] >= taken.position);
            if acknowledged || self.executed - since >= self.checkpoint_every() {
                let (_, taken) = self.unfolded.take().expect("checked above");
                self.fold(taken);
            }
        }
        if self.executed - since < self.checkpoint_every() {
            return;
        }
        if leading && self.unannounced <= self.executed {
            // Positions are announced from memory: fold them only once announced.
            return;
        }
        let taken = self.take_checkpoint();
        if leading {
            self.unfolded = Some((self.view, taken));
        } else {
            self.fold(taken);
        }
    }

    /// Positions between two checkpoints: `checkpoint_interval`, or more for a big state, whose
    /// serialization would otherwise dominate (100,000 keys: about 2 MB every 1,024 positions),
    /// up to `checkpoint_interval_max`.
    fn checkpoint_every(&self) -> u64 {
        let state_bytes = self.unfolded.as_ref().map_or(&self.checkpoint, |(_, taken)| taken).state.len() as u64;
        let (least, most) = (self.config.checkpoint_interval, self.config.checkpoint_interval_max);
        ordo_core::snapshot_interval(state_bytes, self.config.checkpoint_bytes_per_position, least, most)
    }

    /// A checkpoint of the state at `executed`. Its hashes are the conflict table's without
    /// the entries after `executed`: the synced positions beyond it and the unsynced entries.
    fn take_checkpoint(&mut self) -> Arc<Checkpoint> {
        let after = self.executed + 1..=self.sync_point();
        let beyond = after.filter_map(|position| self.slot(position)).chain(&self.unsynced);
        let hashes = self.conflicts.hashes_without(beyond.map(|slot| (&slot.entry, &slot.print))).into_vec();
        let deadline_max = (self.checkpoint.position + 1..=self.executed)
            .filter_map(|position| self.slot(position))
            .map(|slot| slot.entry.deadline)
            .fold(self.checkpoint.deadline_max, u64::max);
        self.stats.count("checkpoint");
        Arc::new(Checkpoint {
            position: self.executed,
            deadline_max,
            state: Bytes::from(self.state_machine.snapshot()),
            clients: self.clients.rows(),
            hashes,
        })
    }

    /// Drops the positions `checkpoint` holds from memory and makes it the log's base.
    fn fold(&mut self, checkpoint: Arc<Checkpoint>) {
        let fold = usize::try_from(checkpoint.position - self.checkpoint.position).expect("positions fit in memory");
        for slot in self.synced.drain(..fold) {
            self.positions.remove(&slot.entry.id);
        }
        self.checkpoint = checkpoint;
        self.log_epoch += 1;
    }

    /// Replaces the state machine and client table with a checkpoint's.
    pub(super) fn restore(&mut self, checkpoint: &Checkpoint) {
        let mut machine = (self.new_state_machine)();
        machine.restore(&checkpoint.state).expect("a checkpoint taken by a replica restores");
        self.state_machine = machine;
        self.clients = Clients::from_rows(&checkpoint.clients, self.config.client_table_max);
        self.executed = checkpoint.position;
    }
}

// NUMBER_MAX (shared) bounds the view, position, crash-vector entry or time a replica accepts from
// a peer. Each grows by one per view change, request or rejoin (times are nanoseconds, far below it
// until the next century), so no cluster reaches it; below it, `+ 1` on a number that came from a
// peer cannot overflow.
pub use crate::NUMBER_MAX;

/// The highest number `message` carries that a handler may add to: views, positions, crash
/// vectors, deadlines and times (log images included), checked against [`NUMBER_MAX`].
fn highest_number(message: &Message) -> u64 {
    let cv = |cv: &CrashVector| cv.iter().copied().max().unwrap_or(0);
    let entries = |entries: &[Entry]| entries.iter().map(|e| e.deadline).max().unwrap_or(0);
    let image = |image: &LogImage| {
        let checkpoint = &image.checkpoint;
        let held = (image.synced.len() + image.unsynced.len()) as u64;
        [
            checkpoint.position.saturating_add(held),
            checkpoint.deadline_max,
            entries(&image.synced),
            entries(&image.unsynced),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    };
    match message {
        Message::ClientRequest { .. } | Message::ClientReply { .. } | Message::Commits { .. } => 0,
        Message::Requests { send_ns, bound_ns, sender_error_ns, .. } => (*send_ns).max(*bound_ns).max(*sender_error_ns),
        Message::FastReplies { view, owd_ns, .. } | Message::SlowReply { view, owd_ns, .. } => (*view).max(*owd_ns),
        Message::Sync { view, cv: c, cv_since, first, entries: sync, commit, .. } => {
            let deadlines = sync.iter().map(|e| e.deadline).max().unwrap_or(0);
            let end = first.saturating_add(sync.len() as u64);
            [*view, cv(c), *cv_since, end, *commit, deadlines].into_iter().max().unwrap_or(0)
        }
        Message::SyncAck { view, cv: c, sync_point, .. } => (*view).max(cv(c)).max(*sync_point),
        Message::ViewChangeRequest { view, cv: c } => (*view).max(cv(c)),
        Message::ViewChange { view, cv: c, last_normal_view, commit, image: i } => {
            [*view, cv(c), *last_normal_view, *commit, image(i)].into_iter().max().unwrap_or(0)
        }
        Message::StartView { view, cv: c, commit, image: i }
        | Message::StateTransferReply { view, cv: c, commit, image: i } => {
            [*view, cv(c), *commit, image(i)].into_iter().max().unwrap_or(0)
        }
        Message::RecoveryRequest { cv: c, .. } | Message::StateTransferRequest { cv: c } => cv(c),
        Message::RecoveryReply { view, cv: c, .. } => (*view).max(cv(c)),
    }
}

/// What a replica boots from: a durable replica's records replayed, and whether it restarts
/// without them and must rejoin. Records that are not a durable replica's (or durable records
/// while diskless) hold nothing a restarted replica may act on.
fn boot_records(config: &Config, rank: usize, durable: &[Durable]) -> (Option<Replayed>, bool) {
    let replayed = if config.durable { Replayed::from_records(rank, durable) } else { None };
    for record in durable {
        if let Durable::Launched { rank: stored } = record {
            assert_eq!(*stored, rank, "a replica restarts with its own launch marker");
        }
    }
    let restarted = !durable.is_empty() && replayed.is_none();
    (replayed, restarted)
}

impl Node<Nezha> for Replica {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        let start = out.effects().len();
        if self.status == Status::Recovering {
            self.start_rejoin(out);
        } else if self.view_change_at_start {
            self.view_change_at_start = false;
            self.start_view_change(self.view + 1, out);
        } else if !self.config.durable {
            out.persist(Durable::Launched { rank: self.rank }, PersistMode::Replace);
        }
        let _ = now;
        out.set_timer(Timer::Tick, self.config.heartbeat_ns);
        self.persist_changes(out, start);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Nezha>) {
        let start = out.effects().len();
        if highest_number(&message) > NUMBER_MAX {
            self.stats.drop_input("number out of range");
            return;
        }
        let handled = match message {
            Message::Requests { requests, send_ns, bound_ns, sender_error_ns, slow_replies } => {
                self.on_requests(now, from, requests, send_ns, bound_ns, sender_error_ns, slow_replies, out)
            }
            Message::Sync { view, cv, cv_since, first, entries, commit, slow_replies } => {
                self.on_sync(now, from, view, cv, SyncBatch { cv_since, first, entries, commit, slow_replies }, out)
            }
            Message::SyncAck { view, cv, sync_point, missing } => {
                self.on_sync_ack(from, view, cv, sync_point, missing, out)
            }
            Message::ViewChangeRequest { view, cv } => self.on_view_change_request(now, from, view, cv, out),
            Message::ViewChange { view, cv, last_normal_view, commit, image } => {
                self.on_view_change(now, from, view, cv, last_normal_view, commit, image, out)
            }
            Message::StartView { view, cv, commit, image } => {
                self.on_start_view(now, from, view, cv, commit, image, out)
            }
            Message::RecoveryRequest { nonce, cv } => self.on_recovery_request(from, nonce, cv, out),
            Message::RecoveryReply { nonce, view, cv } => self.on_recovery_reply(from, nonce, view, cv, out),
            Message::StateTransferRequest { cv } => self.on_state_transfer_request(from, cv, out),
            Message::StateTransferReply { view, cv, commit, image } => {
                self.on_state_transfer_reply(now, from, view, cv, commit, image, out)
            }
            Message::FastReplies { view, about, replies, owd_ns } => {
                self.on_forwarded_replies(from, view, about, Ok(replies), owd_ns)
            }
            Message::SlowReply { view, about, ids, owd_ns } => {
                self.on_forwarded_replies(from, view, about, Err(ids), owd_ns)
            }
            Message::ClientRequest { .. } | Message::ClientReply { .. } | Message::Commits { .. } => {
                Err("client or proxy message sent to a replica")
            }
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
        self.flush_replies(now, out);
        self.persist_changes(out, start);
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Nezha>) {
        let start = out.effects().len();
        match timer {
            Timer::Release => {
                if self.status == Status::Normal {
                    self.release_due(now, out);
                }
            }
            Timer::Tick => {
                self.on_tick(now, out);
                out.set_timer(Timer::Tick, self.config.heartbeat_ns);
            }
            Timer::Announce => self.on_announce_timer(out),
            Timer::ProxyTick | Timer::ProxyFlush | Timer::ClientRetry => {
                self.stats.drop_input("sender timer at a replica")
            }
        }
        self.flush_replies(now, out);
        self.persist_changes(out, start);
    }

    fn check_invariants(&self) {
        assert!(self.fast_out.is_empty() && self.slow_out.is_empty(), "a handler sends the replies it made");
        assert!(self.leader_quorums.flushed(), "a handler sends the commits it made");
        assert!(self.leader_quorums.len() <= self.config.proxy_inflight_max, "leader quorum table within its limit");
        assert!(
            self.leader_quorums.is_empty() || (self.is_leader() && self.config.quorum_check_at_leader),
            "only a leader that checks quorums counts replies"
        );
        let sync_point = self.sync_point();
        assert!(self.checkpoint.position <= self.executed, "executed positions include the checkpoint");
        assert!(self.executed <= sync_point, "only synced positions execute");
        assert!(self.positions.len() == self.synced.len(), "every synced entry is indexed");
        assert!(self.last_normal_view <= self.view, "last normal view is at most the view");
        assert!(self.early.len() == self.early_ids.len(), "early-buffer index matches");
        assert!(self.early.len() <= self.config.early_buffer_max, "early-buffer within its limit");
        assert!(self.late.len() <= self.config.late_buffer_max, "late-buffer within its limit");
        assert!(self.unsynced.len() <= self.config.unsynced_max, "unsynced entries within their limit");
        assert!(self.clients.len() <= self.config.client_table_max, "client table within its limit");
        self.clients.check_invariants();
        assert!(self.pending_sync.len() as u64 <= PENDING_SYNC_MAX, "pending syncs within their limit");
        if self.status == Status::Normal {
            assert_eq!(self.last_normal_view, self.view, "a normal replica is normal in its view");
            if self.is_leader() {
                assert!(self.unsynced.is_empty(), "the leader's whole log is synced");
                assert_eq!(self.executed, sync_point, "the leader executes on append");
            } else {
                assert!(
                    self.executed <= self.commit.max(self.checkpoint.position),
                    "followers execute committed positions only"
                );
            }
        }
        let unsynced = self.unsynced.iter().map(|slot| (&slot.entry, &slot.print));
        assert!(self.conflicts.hashes_without(unsynced) == self.synced_hashes, "synced hashes are the synced log's");
        if let (Some(last), Some(first)) = (self.synced.last(), self.synced.first()) {
            assert!(self.positions.get(&last.entry.id) == Some(&sync_point), "the last synced entry is indexed");
            assert!(self.positions.get(&first.entry.id) == Some(&(self.checkpoint.position + 1)), "first indexed");
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// The state for the agreement check, only while it holds committed positions alone: the
    /// leader executes on append (§5.2), ahead of the commit point, and a deposed leader's
    /// speculative state is discarded when it adopts the next view's log (`adopt`).
    fn state_machine(&self) -> Option<&dyn StateMachine> {
        (self.executed <= self.commit).then_some(self.state_machine.as_ref())
    }

    fn is_recovering(&self) -> bool {
        self.status == Status::Recovering
    }

    fn status(&self) -> String {
        let status = match self.status {
            Status::Normal => "normal",
            Status::ViewChange => "view-change",
            Status::Recovering => "recovering",
        };
        let role = if self.is_leader() { "leader" } else { "follower" };
        format!(
            "view={} {status} {role} log={} sync={} commit={} exec={} base={} unsynced={} early={} late={} cv={:?}",
            self.view,
            self.sync_point() + self.unsynced.len() as u64,
            self.sync_point(),
            self.commit,
            self.executed,
            self.checkpoint.position,
            self.unsynced.len(),
            self.early.len(),
            self.late.len(),
            self.cv
        )
    }
}

impl Replica {
    /// The pending-sync window limit (positions beyond the sync-point a follower buffers).
    pub(super) fn pending_sync_max() -> u64 {
        PENDING_SYNC_MAX
    }
}
