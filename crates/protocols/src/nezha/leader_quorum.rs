//! The quorum check at the leader: the paper's No-QC-Offloading ablation (§7.5), switched on by
//! `quorum_check_at_leader`. Followers send their fast- and slow-replies to the leader instead
//! of the DOM sender; the leader counts them with the same [`QuorumTracker`] a proxy uses and
//! tells the sender which requests committed (`Commits`). The proxy still multicasts; only the
//! quorum check moves, so the leader handles the replies a proxy would have.

use super::Nezha;
use super::messages::{FastReply, Message};
use super::quorum::{Commit, QuorumTracker, Silence, fast_quorum};
use super::replica::{Replica, Status};
use ordo_core::{ClockReading, CommandResult, NodeId, Outbox, RequestId};
use std::collections::BTreeMap;

/// One request the leader counts replies for.
struct Counting {
    /// The DOM sender, known once the leader appended the request.
    origin: Option<NodeId>,
    tracker: QuorumTracker,
}

/// The leader's quorum trackers and the commits it owes the senders.
pub struct LeaderQuorums {
    counting: BTreeMap<RequestId, Counting>,
    /// Which followers replied lately.
    silence: Silence,
    /// Per sender: the followers' latest OWD estimates for it, by rank.
    owd: BTreeMap<NodeId, BTreeMap<usize, u64>>,
    /// Commits made by the current handler, per sender (empty between handlers).
    commits_out: BTreeMap<NodeId, Vec<(RequestId, CommandResult, bool)>>,
}

impl LeaderQuorums {
    /// No counts, for a cluster of `replicas`.
    pub fn new(replicas: usize) -> Self {
        LeaderQuorums {
            counting: BTreeMap::new(),
            silence: Silence::new(replicas),
            owd: BTreeMap::new(),
            commits_out: BTreeMap::new(),
        }
    }

    /// Requests being counted.
    pub fn len(&self) -> usize {
        self.counting.len()
    }

    /// True when nothing is being counted.
    pub fn is_empty(&self) -> bool {
        self.counting.is_empty()
    }

    /// Forgets every count (a new view: replies of the old one never count).
    pub fn clear(&mut self) {
        self.counting.clear();
        self.commits_out.clear();
        self.silence.reset();
    }

    /// True when no commit waits to be sent.
    pub fn flushed(&self) -> bool {
        self.commits_out.is_empty()
    }
}

impl Replica {
    /// The leader's own fast-reply for a request it appended (or appended before: a duplicate).
    pub(super) fn count_own_reply(&mut self, origin: NodeId, reply: FastReply) {
        let (view, rank) = (self.view, self.rank);
        let id = reply.id;
        let counting = self.counting(id);
        counting.origin = Some(origin);
        counting.tracker.fast_reply(view, rank, true, reply.hash, reply.result);
        self.maybe_leader_commit(id);
    }

    /// Follower replies forwarded to the leader.
    pub(super) fn on_forwarded_replies(
        &mut self,
        from: NodeId,
        view: u64,
        about: NodeId,
        replies: Result<Vec<FastReply>, Vec<RequestId>>,
        owd_ns: u64,
    ) -> Result<(), &'static str> {
        if !self.config.quorum_check_at_leader {
            return Err("replies to a replica while proxies check quorums");
        }
        if self.status != Status::Normal || !self.is_leader() || view != self.view {
            return Err("replies to a replica that is not the leader of their view");
        }
        let rank = self.rank_of(from).ok_or("replies from a non-replica")?;
        self.leader_quorums.silence.heard(rank);
        self.leader_quorums.owd.entry(about).or_default().insert(rank, owd_ns);
        match replies {
            Ok(fast) => {
                for reply in fast {
                    self.counting(reply.id).tracker.fast_reply(view, rank, false, reply.hash, None);
                    self.maybe_leader_commit(reply.id);
                }
            }
            Err(slow) => {
                for id in slow {
                    self.counting(id).tracker.slow_reply(view, rank, false);
                    self.maybe_leader_commit(id);
                }
            }
        }
        Ok(())
    }

    /// The tracker of `id`, made room for if new (the smallest request id is dropped: its
    /// client retries, and the retry is answered from the client table).
    fn counting(&mut self, id: RequestId) -> &mut Counting {
        let quorums = &mut self.leader_quorums;
        if !quorums.counting.contains_key(&id) && quorums.counting.len() >= self.config.proxy_inflight_max {
            quorums.counting.pop_first();
            self.stats.drop_input("leader quorum table full: evicted");
        }
        quorums.counting.entry(id).or_insert_with(|| Counting { origin: None, tracker: QuorumTracker::default() })
    }

    fn maybe_leader_commit(&mut self, id: RequestId) {
        let fast_followers = fast_quorum(self.f) - 1;
        let quorums = &mut self.leader_quorums;
        let Some(counting) = quorums.counting.get(&id) else { return };
        let (Some(origin), Some(commit)) = (counting.origin, counting.tracker.check(self.f, fast_followers)) else {
            return;
        };
        quorums.counting.remove(&id);
        let (result, fast) = match commit {
            Commit::Fast(result) => (result, true),
            Commit::Slow(result) => (result, false),
        };
        quorums.commits_out.entry(origin).or_default().push((id, result, fast));
    }

    /// Leader, every tick: a silent tick for every follower while requests are being counted
    /// (an idle leader suspects nobody).
    pub(super) fn count_silent_followers(&mut self) {
        if self.config.quorum_check_at_leader {
            let quorums = &mut self.leader_quorums;
            quorums.silence.tick(!quorums.counting.is_empty());
        }
    }

    /// Leader checking quorums: fewer followers are heard than a fast quorum needs, so only the
    /// slow path can commit and the syncs ask every follower for slow-replies.
    pub(super) fn wants_slow_replies(&self) -> bool {
        if !self.config.quorum_check_at_leader {
            return false;
        }
        self.leader_quorums.silence.heard_count(Some(self.rank)) < fast_quorum(self.f) - 1
    }

    /// Sends the commits the handler made, one `Commits` per sender.
    pub(super) fn flush_commits(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        for (to, commits) in std::mem::take(&mut self.leader_quorums.commits_out) {
            let own = self.owd.estimate(to, now.error_bound_ns);
            let followers = self.leader_quorums.owd.get(&to).and_then(|by_rank| by_rank.values().max().copied());
            let owd_ns = own.max(followers.unwrap_or(0));
            self.send_to(out, to, Message::Commits { view: self.view, commits, owd_ns });
        }
    }
}
