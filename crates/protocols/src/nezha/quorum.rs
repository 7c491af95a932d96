//! The quorum check a proxy (or a client without proxy) runs per request (paper §5.2, §5.5).
//!
//! Fast commit: the leader's fast-reply plus `f + ⌈f/2⌉` followers whose fast-reply hash equals
//! the leader's, or who sent a slow-reply (a slow-reply may stand in for a fast-reply, never the
//! reverse). Slow commit: the leader's fast-reply plus `f` slow-replies. All in one view.

use ordo_core::CommandResult;
use std::collections::BTreeMap;

/// Ticks with requests awaiting replies after which a replica that sent none counts as unheard.
const UNHEARD_TICKS: u32 = 2;

/// Which replicas replied lately, for whoever checks quorums (the DOM sender, or the leader
/// with `quorum_check_at_leader`). While it hears fewer replicas than a fast quorum it asks
/// followers for slow-replies: otherwise, with `f` replicas down, every request would wait for
/// its client's retry (choice 6 leaves out the slow-replies of followers whose fast-reply
/// matched).
#[derive(Clone, Debug)]
pub struct Silence {
    /// By rank: ticks with replies awaited since the replica last replied.
    ticks: Vec<u32>,
}

impl Silence {
    /// Every replica of `replicas` heard.
    pub fn new(replicas: usize) -> Self {
        Silence { ticks: vec![0; replicas] }
    }

    /// One tick: a silent tick for every replica if replies were awaited (a checker with
    /// nothing in flight suspects nobody).
    pub fn tick(&mut self, awaiting: bool) {
        if awaiting {
            self.ticks.iter_mut().for_each(|ticks| *ticks = ticks.saturating_add(1));
        }
    }

    /// The replica of `rank` replied.
    pub fn heard(&mut self, rank: usize) {
        self.ticks[rank] = 0;
    }

    /// Every replica heard again (a new view).
    pub fn reset(&mut self) {
        self.ticks.fill(0);
    }

    /// Replicas that replied within `UNHEARD_TICKS`, leaving out `except`.
    pub fn heard_count(&self, except: Option<usize>) -> usize {
        let heard = |(rank, &ticks): (usize, &u32)| Some(rank) != except && ticks < UNHEARD_TICKS;
        self.ticks.iter().enumerate().filter(|&entry| heard(entry)).count()
    }
}

/// The size of the fast super quorum, leader included: `f + ⌈f/2⌉ + 1`.
pub fn fast_quorum(f: usize) -> usize {
    f + f.div_ceil(2) + 1
}

/// The size of the slow quorum, leader included: `f + 1`.
pub fn slow_quorum(f: usize) -> usize {
    f + 1
}

/// Votes a log entry needs among the view-change logs to be kept: `⌈f/2⌉ + 1`.
pub fn recovery_votes(f: usize) -> usize {
    f.div_ceil(2) + 1
}

/// How a request committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Through the super quorum of matching hashes.
    Fast(CommandResult),
    /// Through the leader and f slow-replies.
    Slow(CommandResult),
}

/// A follower's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vote {
    Fast(u64),
    Slow,
}

/// Replies received for one request, all of the highest view seen.
#[derive(Clone, Debug, Default)]
pub struct QuorumTracker {
    view: u64,
    leader: Option<(u64, CommandResult)>,
    followers: BTreeMap<usize, Vote>,
}

impl QuorumTracker {
    /// Starts (or restarts) counting for `view`, dropping replies of lower views.
    fn enter(&mut self, view: u64) -> bool {
        if view < self.view {
            return false;
        }
        if view > self.view {
            self.view = view;
            self.leader = None;
            self.followers.clear();
        }
        true
    }

    /// Records a fast-reply from replica `rank`; `is_leader` says whether `rank` leads `view`.
    /// Returns false for a stale view.
    pub fn fast_reply(
        &mut self,
        view: u64,
        rank: usize,
        is_leader: bool,
        hash: u64,
        result: Option<CommandResult>,
    ) -> bool {
        if !self.enter(view) {
            return false;
        }
        if is_leader {
            // Only the leader's fast-reply carries a result; without one it is malformed.
            let Some(result) = result else { return false };
            self.leader = Some((hash, result));
        } else if self.followers.get(&rank) != Some(&Vote::Slow) {
            self.followers.insert(rank, Vote::Fast(hash));
        }
        true
    }

    /// Records a slow-reply from follower `rank`; it replaces that follower's fast-reply.
    pub fn slow_reply(&mut self, view: u64, rank: usize, is_leader: bool) -> bool {
        if is_leader || !self.enter(view) {
            return false;
        }
        self.followers.insert(rank, Vote::Slow);
        true
    }

    /// The commit, if the replies so far form a quorum for a cluster tolerating `f` failures
    /// whose fast path needs `fast_followers` matching followers (`fast_quorum(f) - 1`).
    pub fn check(&self, f: usize, fast_followers: usize) -> Option<Commit> {
        let (leader_hash, result) = self.leader.as_ref()?;
        let matching = self
            .followers
            .values()
            .filter(|vote| match vote {
                Vote::Fast(hash) => hash == leader_hash,
                Vote::Slow => true,
            })
            .count();
        let slow = self.followers.values().filter(|vote| **vote == Vote::Slow).count();
        if matching >= fast_followers {
            Some(Commit::Fast(result.clone()))
        } else if slow + 1 >= slow_quorum(f) {
            Some(Commit::Slow(result.clone()))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_arithmetic() {
        // Goal (spec §11 #2): the quorum table for f = 1..4.
        let fast: Vec<usize> = (1..=4).map(fast_quorum).collect();
        let slow: Vec<usize> = (1..=4).map(slow_quorum).collect();
        let votes: Vec<usize> = (1..=4).map(recovery_votes).collect();
        assert_eq!(fast, vec![3, 4, 6, 7]);
        assert_eq!(slow, vec![2, 3, 4, 5]);
        assert_eq!(votes, vec![2, 2, 3, 3]);
    }

    #[test]
    fn leader_is_mandatory_and_hashes_must_match() {
        // Goal: 2f matching followers never commit without the leader; a mismatching hash does
        // not count; a slow-reply substitutes for a fast-reply; replies of an older view are
        // dropped once a newer view is seen.
        let mut tracker = QuorumTracker::default();
        tracker.fast_reply(0, 1, false, 7, None);
        tracker.fast_reply(0, 2, false, 7, None);
        assert_eq!(tracker.check(1, 2), None);
        tracker.fast_reply(0, 0, true, 8, Some(CommandResult::Ok));
        assert_eq!(tracker.check(1, 2), None);
        tracker.slow_reply(0, 1, false);
        assert_eq!(tracker.check(1, 2), Some(Commit::Slow(CommandResult::Ok)));
        tracker.slow_reply(0, 2, false);
        assert_eq!(tracker.check(1, 2), Some(Commit::Fast(CommandResult::Ok)));
        tracker.fast_reply(1, 2, false, 7, None);
        assert_eq!(tracker.check(1, 2), None);
        assert!(!tracker.slow_reply(0, 1, false));
    }
}
