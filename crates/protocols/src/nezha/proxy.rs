//! The DOM sender with its quorum check (paper §4, §5.1, §5.5), and the stateless proxy built on
//! it. A client without proxy embeds the same [`Sender`].

use super::dom::LatencyBound;
use super::messages::{FastReply, Message};
use super::quorum::{Commit, QuorumTracker, Silence};
use super::{Config, Flaw, Nezha, Timer};
use ordo_core::{
    ClockReading, Command, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId,
};
use std::collections::BTreeMap;

/// One request the sender multicast and counts replies for.
struct InFlight {
    /// Who gets the result: the client node (proxy) or the sender itself (client).
    origin: NodeId,
    tracker: QuorumTracker,
    /// Sender ticks since the last (re)send; old requests are forgotten.
    age_ticks: u32,
}

/// How a sender groups requests into one DOM multicast.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    /// Most requests in one `Requests` message.
    pub max: usize,
    /// At most one multicast per window: a request that arrives within `window_ns` of the
    /// previous multicast waits for the window's end with the others (0: every request at once).
    pub window_ns: u64,
    /// Batching starts only while more requests than this are in flight: a lightly loaded
    /// sender multicasts each request at once and pays no latency for batching.
    pub above: usize,
    /// Past the window, a batch also waits until it holds 1/this of the requests in flight (0:
    /// it never does). By Little's law that takes 1/this of their latency, so when the sender
    /// queues, its batches grow and it spends less per request, instead of flushing small
    /// batches on a fixed timer.
    pub per_round_trip: usize,
}

impl Batching {
    /// Every request in its own multicast (a client that is its own DOM sender).
    pub const NONE: Batching = Batching { max: 1, window_ns: 0, above: 0, per_round_trip: 0 };

    /// A batch never waits longer than this many windows (requests that stay in flight without
    /// replies, e.g. lost ones, must not hold the others).
    const WAIT_WINDOWS_MAX: u64 = 10;

    /// How many requests a batch waits for, past the window, with `inflight` in flight.
    fn target(&self, inflight: usize) -> usize {
        match self.per_round_trip {
            0 => 1,
            share => (inflight / share).clamp(1, self.max),
        }
    }
}

/// Ticks (heartbeats, 1 ms by default) after which a request still in flight counts as stale.
/// Replies come within a round trip plus the replicas' queues, below that unless lost (two
/// ticks were too few for the quorum check at the leader with 9 replicas, whose median
/// reaches 4 ms at 100k ops/s).
const STALE_TICKS: u32 = 4;

/// DOM-S plus the quorum check: stamps each request with send time and latency bound,
/// multicasts it to every replica and counts the replies.
pub struct Sender {
    replicas: Destinations,
    f: usize,
    bound: LatencyBound,
    inflight: BTreeMap<RequestId, InFlight>,
    inflight_max: usize,
    forget_ticks: u32,
    /// In-flight requests without a reply or resend for `STALE_TICKS` ticks (their messages or
    /// replies were lost, or the client retries elsewhere): not counted when batches size
    /// themselves by what is in flight.
    stale: usize,
    /// Followers (besides the leader) a fast commit needs.
    fast_followers: usize,
    /// Which replicas replied lately.
    silence: Silence,
    /// The sender counts replies itself (false when the leader checks quorums).
    checks_quorums: bool,
    batching: Batching,
    /// Requests waiting for the batch window to close...
    pending: Vec<(RequestId, Command)>,
    /// ... and their commands' encoded bytes (a batch leaves before it passes
    /// `ordo_core::BATCH_BYTES_MAX`).
    pending_bytes: usize,
    /// Local clock at the last multicast.
    last_multicast_ns: Option<u64>,
    /// Local clock when the oldest waiting request arrived.
    oldest_pending_ns: u64,
    /// A `ProxyFlush` timer is set.
    flush_scheduled: bool,
}

impl Sender {
    /// A sender for the cluster of `context`.
    pub(crate) fn new(context: &NodeContext<Nezha>, flaw: Flaw, batching: Batching) -> Self {
        let replicas = context.topology.replicas().clone();
        assert!(!replicas.is_empty(), "a cluster has replicas");
        let config = &context.config;
        let forget_ticks = u32::try_from(config.proxy_forget_ns / config.heartbeat_ns.max(1)).unwrap_or(u32::MAX);
        let count = replicas.len();
        Sender {
            bound: LatencyBound::new(count, config.initial_owd_ns),
            replicas,
            f: context.topology.f,
            inflight: BTreeMap::new(),
            inflight_max: config.proxy_inflight_max,
            forget_ticks: forget_ticks.max(2),
            stale: 0,
            fast_followers: match flaw {
                Flaw::None | Flaw::VolatileLog => super::quorum::fast_quorum(context.topology.f) - 1,
                Flaw::MajorityFastQuorum => context.topology.f,
            },
            silence: Silence::new(count),
            checks_quorums: !config.quorum_check_at_leader,
            batching: Batching { max: batching.max.max(1), ..batching },
            pending: Vec::new(),
            pending_bytes: 0,
            last_multicast_ns: None,
            oldest_pending_ns: 0,
            flush_scheduled: false,
        }
    }

    /// The latency bound in use (the largest replica estimate).
    pub fn bound_ns(&self) -> u64 {
        self.bound.bound_ns()
    }

    /// Requests being counted.
    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    /// Multicasts a request stamped with the local clock, alone or with the others of its batch
    /// window. A resend of a request already in flight keeps the replies counted so far (they
    /// are for the same request).
    pub fn send(
        &mut self,
        now: ClockReading,
        id: RequestId,
        command: Command,
        origin: NodeId,
        stats: &mut NodeStats,
        out: &mut Outbox<Nezha>,
    ) {
        if !self.inflight.contains_key(&id) && self.inflight.len() >= self.inflight_max {
            stats.drop_input("sender in-flight table full");
            return;
        }
        let flight = self.inflight.entry(id).or_insert_with(|| InFlight {
            origin,
            tracker: QuorumTracker::default(),
            age_ticks: 0,
        });
        flight.origin = origin;
        if flight.age_ticks >= STALE_TICKS {
            self.stale -= 1;
        }
        flight.age_ticks = 0;
        let len = command.encoded_len();
        if !self.pending.is_empty() && self.pending_bytes + len > ordo_core::BATCH_BYTES_MAX {
            // The waiting batch leaves first rather than grow past the bound.
            self.multicast(now, out);
        }
        if self.pending.is_empty() {
            self.oldest_pending_ns = now.local_ns;
        }
        self.pending.push((id, command));
        self.pending_bytes += len;
        let busy = self.inflight.len() > self.batching.above;
        if busy {
            self.flush_or_wait(now, out);
        } else {
            self.multicast(now, out);
        }
    }

    /// A flush timer: multicasts what waits if the batch is ready, else waits on.
    pub fn on_flush_timer(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        self.flush_scheduled = false;
        if !self.pending.is_empty() {
            self.flush_or_wait(now, out);
        }
    }

    fn flush_or_wait(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        if self.batch_ready(now) {
            self.multicast(now, out);
        } else if !self.flush_scheduled {
            self.flush_scheduled = true;
            out.set_timer(Timer::ProxyFlush, self.until_ready(now));
        }
    }

    /// Whether the waiting batch leaves now: it is full; or a window has passed since the last
    /// multicast and it holds its share of the requests in flight; or it waited its longest.
    fn batch_ready(&self, now: ClockReading) -> bool {
        let window = self.batching.window_ns;
        self.pending.len() >= self.batching.max
            || self.pending_bytes >= ordo_core::BATCH_BYTES_MAX
            || (self.since_multicast(now) >= window
                && self.pending.len() >= self.batching.target(self.inflight.len() - self.stale))
            || now.local_ns.saturating_sub(self.oldest_pending_ns) >= window * Batching::WAIT_WINDOWS_MAX
    }

    /// When to look again: at the window's end, then at the longest wait.
    fn until_ready(&self, now: ClockReading) -> u64 {
        let window = self.batching.window_ns;
        let since = self.since_multicast(now);
        if since < window {
            return window - since;
        }
        let waited = now.local_ns.saturating_sub(self.oldest_pending_ns);
        (window * Batching::WAIT_WINDOWS_MAX).saturating_sub(waited).max(1)
    }

    fn since_multicast(&self, now: ClockReading) -> u64 {
        self.last_multicast_ns.map_or(u64::MAX, |last| now.local_ns.saturating_sub(last))
    }

    fn multicast(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        let message = Message::Requests {
            requests: std::mem::take(&mut self.pending),
            send_ns: now.local_ns,
            bound_ns: self.bound.bound_ns(),
            sender_error_ns: now.error_bound_ns,
            slow_replies: self.wants_slow_replies(),
        };
        self.pending_bytes = 0;
        self.last_multicast_ns = Some(now.local_ns);
        out.multicast(&self.replicas, message);
    }

    fn rank(&self, from: NodeId) -> Option<usize> {
        self.replicas.iter().position(|&r| r == from)
    }

    /// Fewer replicas are heard than a fast quorum: only the slow path can commit.
    fn wants_slow_replies(&self) -> bool {
        self.checks_quorums && self.silence.heard_count(None) <= self.fast_followers
    }

    fn is_leader(&self, view: u64, rank: usize) -> bool {
        (view % self.replicas.len() as u64) as usize == rank
    }

    /// A fast-reply; returns the origin and commit once the request commits.
    pub fn on_fast_reply(
        &mut self,
        from: NodeId,
        view: u64,
        reply: FastReply,
        owd_ns: u64,
        stats: &mut NodeStats,
    ) -> Option<(NodeId, Commit)> {
        let FastReply { id, hash, result } = reply;
        let Some(rank) = self.rank(from) else {
            stats.drop_input("fast-reply from a non-replica");
            return None;
        };
        self.bound.update(rank, owd_ns);
        self.silence.heard(rank);
        let is_leader = self.is_leader(view, rank);
        let Some(flight) = self.inflight.get_mut(&id) else {
            stats.drop_input("fast-reply for a request not in flight");
            return None;
        };
        if !flight.tracker.fast_reply(view, rank, is_leader, hash, result) {
            stats.drop_input("fast-reply of an old view or without result");
            return None;
        }
        self.maybe_commit(id, stats)
    }

    /// A slow-reply; returns the origin and commit once the request commits.
    pub fn on_slow_reply(
        &mut self,
        from: NodeId,
        view: u64,
        id: RequestId,
        owd_ns: u64,
        stats: &mut NodeStats,
    ) -> Option<(NodeId, Commit)> {
        let Some(rank) = self.rank(from) else {
            stats.drop_input("slow-reply from a non-replica");
            return None;
        };
        self.bound.update(rank, owd_ns);
        self.silence.heard(rank);
        let is_leader = self.is_leader(view, rank);
        let Some(flight) = self.inflight.get_mut(&id) else {
            // Usual: the request committed on the fast path before its sync.
            stats.count("slow_reply_after_commit");
            return None;
        };
        if !flight.tracker.slow_reply(view, rank, is_leader) {
            stats.drop_input("slow-reply of an old view or from the leader");
            return None;
        }
        self.maybe_commit(id, stats)
    }

    /// The leader checked the quorum of `id` (`quorum_check_at_leader`): it committed, on the
    /// fast path or not. Returns the origin and commit the first time.
    #[allow(clippy::too_many_arguments)]
    pub fn on_commit(
        &mut self,
        from: NodeId,
        view: u64,
        id: RequestId,
        result: CommandResult,
        fast: bool,
        owd_ns: u64,
        stats: &mut NodeStats,
    ) -> Option<(NodeId, Commit)> {
        if !self.rank(from).is_some_and(|rank| self.is_leader(view, rank)) {
            stats.drop_input("commit from a replica that does not lead its view");
            return None;
        };
        // The leader reports the largest estimate among the replicas that replied.
        for replica in 0..self.replicas.len() {
            self.bound.update(replica, owd_ns);
        }
        let Some(flight) = self.remove(&id) else {
            stats.count("commit_after_commit");
            return None;
        };
        if fast {
            stats.fast_path_commits += 1;
            Some((flight.origin, Commit::Fast(result)))
        } else {
            stats.slow_path_commits += 1;
            Some((flight.origin, Commit::Slow(result)))
        }
    }

    fn maybe_commit(&mut self, id: RequestId, stats: &mut NodeStats) -> Option<(NodeId, Commit)> {
        let commit = self.inflight.get(&id)?.tracker.check(self.f, self.fast_followers)?;
        let flight = self.remove(&id).expect("checked above");
        match commit {
            Commit::Fast(_) => stats.fast_path_commits += 1,
            Commit::Slow(_) => stats.slow_path_commits += 1,
        }
        Some((flight.origin, commit))
    }

    /// Ages in-flight requests and forgets those nobody resent for a while (their client gave
    /// up or retries through another proxy); counts a silent tick for every replica if some
    /// request was in flight (an idle sender suspects nobody).
    pub fn tick(&mut self) {
        self.silence.tick(!self.inflight.is_empty());
        let forget = self.forget_ticks;
        self.inflight.retain(|_, flight| {
            flight.age_ticks += 1;
            flight.age_ticks < forget
        });
        self.stale = self.count_stale();
    }

    fn count_stale(&self) -> usize {
        self.inflight.values().filter(|flight| flight.age_ticks >= STALE_TICKS).count()
    }

    /// Forgets one request (its client abandoned it).
    pub fn forget(&mut self, id: &RequestId) {
        self.remove(id);
    }

    fn remove(&mut self, id: &RequestId) -> Option<InFlight> {
        let flight = self.inflight.remove(id)?;
        if flight.age_ticks >= STALE_TICKS {
            self.stale -= 1;
        }
        Some(flight)
    }

    /// Panics if the sender's bounds are broken.
    pub fn check_invariants(&self) {
        assert!(self.inflight.len() <= self.inflight_max, "in-flight table within its limit");
        assert_eq!(self.stale, self.count_stale(), "stale in-flight requests counted");
        assert!(self.pending.len() < self.batching.max, "a full batch is multicast at once");
        assert!(self.pending_bytes < ordo_core::BATCH_BYTES_MAX, "a batch past its bytes is multicast at once");
        assert!(self.pending.is_empty() || self.flush_scheduled, "a waiting batch has its timer");
        assert!(self.f * 2 < self.replicas.len(), "2f + 1 replicas");
    }
}

/// The result a commit carries.
pub fn commit_result(commit: Commit) -> CommandResult {
    match commit {
        Commit::Fast(result) | Commit::Slow(result) => result,
    }
}

/// A stateless proxy: DOM sender and quorum checker on behalf of clients.
pub struct Proxy {
    sender: Sender,
    heartbeat_ns: u64,
    stats: NodeStats,
}

impl Proxy {
    /// A proxy with no request in flight.
    pub(crate) fn new(context: NodeContext<Nezha>, flaw: Flaw) -> Self {
        let config: &Config = &context.config;
        let batching = Batching {
            max: config.proxy_batch_max,
            window_ns: config.proxy_batch_window_ns,
            above: config.proxy_batch_above,
            per_round_trip: config.proxy_batches_per_round_trip,
        };
        Proxy {
            heartbeat_ns: config.heartbeat_ns,
            sender: Sender::new(&context, flaw, batching),
            stats: NodeStats::default(),
        }
    }

    fn on_client_request(
        &mut self,
        now: ClockReading,
        from: NodeId,
        id: RequestId,
        command: Command,
        out: &mut Outbox<Nezha>,
    ) -> Result<(), &'static str> {
        if id.client.node() != from {
            return Err("client request under another client's id");
        }
        self.sender.send(now, id, command, from, &mut self.stats, out);
        Ok(())
    }

    fn deliver(&mut self, id: RequestId, done: Option<(NodeId, Commit)>, out: &mut Outbox<Nezha>) {
        if let Some((origin, commit)) = done {
            out.send(origin, Message::ClientReply { id, result: commit_result(commit) });
        }
    }
}

impl Node<Nezha> for Proxy {
    fn on_start(&mut self, _now: ClockReading, out: &mut Outbox<Nezha>) {
        out.set_timer(Timer::ProxyTick, self.heartbeat_ns);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Nezha>) {
        match message {
            Message::ClientRequest { id, command } => {
                if let Err(reason) = self.on_client_request(now, from, id, command, out) {
                    self.stats.drop_input(reason);
                }
            }
            Message::FastReplies { view, replies, owd_ns, .. } => {
                for reply in replies {
                    let id = reply.id;
                    let done = self.sender.on_fast_reply(from, view, reply, owd_ns, &mut self.stats);
                    self.deliver(id, done, out);
                }
            }
            Message::SlowReply { view, ids, owd_ns, .. } => {
                for id in ids {
                    let done = self.sender.on_slow_reply(from, view, id, owd_ns, &mut self.stats);
                    self.deliver(id, done, out);
                }
            }
            Message::Commits { view, commits, owd_ns } => {
                for (id, result, fast) in commits {
                    let done = self.sender.on_commit(from, view, id, result, fast, owd_ns, &mut self.stats);
                    self.deliver(id, done, out);
                }
            }
            _ => self.stats.drop_input("replica-to-replica message sent to a proxy"),
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Nezha>) {
        match timer {
            Timer::ProxyTick => {
                self.sender.tick();
                out.set_timer(Timer::ProxyTick, self.heartbeat_ns);
            }
            Timer::ProxyFlush => self.sender.on_flush_timer(now, out),
            _ => self.stats.drop_input("replica or client timer at a proxy"),
        }
    }

    fn check_invariants(&self) {
        self.sender.check_invariants();
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        format!("proxy inflight={} bound={}ns", self.sender.inflight(), self.sender.bound_ns())
    }
}
