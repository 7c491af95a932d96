//! Ballots and quorums (paper §3.1, spec §2.2 and §3.5): who leads a ballot, which replicas form
//! its fast quorums, and whether a set of followers' votes completes a fast or a slow quorum.
//! Replicas and clients compute the same answers from the ballot alone.

use super::{Config, QuorumSystem};
use ordo_core::Topology;

/// The quorum system of one cluster, the same at every replica and client.
#[derive(Clone, Debug)]
pub struct Quorums {
    /// Replicas.
    pub n: usize,
    /// Failures tolerated: a slow quorum is the leader plus `f` followers.
    pub f: usize,
    system: QuorumSystem,
    /// Per leader rank: the other ranks, closest to the leader first (ties by rank).
    by_distance: Vec<Vec<usize>>,
    /// Ballot-0-style override of the C2 fast followers (ranks), for the leader it names.
    configured: Option<(usize, Vec<usize>)>,
    /// False for N²Paxos: no fast quorum exists, only the leader proposes dependencies and
    /// every command commits by the slow quorum.
    fast_path: bool,
}

impl Quorums {
    /// The quorums of `topology`'s shard 0 under `config`.
    pub fn new(topology: &Topology, config: &Config) -> Self {
        let replicas = topology.replicas();
        let n = replicas.len();
        assert!(n >= 1, "a cluster has a replica");
        let f = (n - 1) / 2;
        let by_distance: Vec<Vec<usize>> = (0..n)
            .map(|leader| {
                let mut others: Vec<(u64, usize)> = (0..n)
                    .filter(|&rank| rank != leader)
                    .map(|rank| (topology.delay_ns(replicas[leader], replicas[rank]), rank))
                    .collect();
                others.sort_unstable();
                others.into_iter().map(|(_, rank)| rank).collect()
            })
            .collect();
        let configured = config.fast_quorum_ranks.split_first().and_then(|(&leader, followers)| {
            let valid = leader < n && followers.len() == f && followers.iter().all(|&r| r < n && r != leader);
            valid.then(|| (leader, followers.to_vec()))
        });
        Quorums { n, f, system: config.quorum_system, by_distance, configured, fast_path: true }
    }

    /// The same quorums with the fast path switched off (N²Paxos, `Variant::N2Paxos`).
    pub fn without_fast_path(self) -> Self {
        Quorums { fast_path: false, ..self }
    }

    /// Whether fast quorums exist (SwiftPaxos) or not (N²Paxos).
    pub fn has_fast_path(&self) -> bool {
        self.fast_path
    }

    /// `leader(b) = p_(b mod N)`.
    pub fn leader(&self, ballot: u64) -> usize {
        (ballot % self.n as u64) as usize
    }

    /// The smallest ballot above `above` that `rank` leads.
    pub fn next_ballot_of(&self, rank: usize, above: u64) -> u64 {
        let n = self.n as u64;
        let base = (above / n) * n + rank as u64;
        let ballot = if base > above { base } else { base + n };
        assert!(ballot > above, "a new ballot is higher");
        assert_eq!(self.leader(ballot), rank, "the new ballot is ours");
        ballot
    }

    /// Followers needed beside the leader for a fast quorum.
    pub fn fast_followers_needed(&self) -> usize {
        match self.system {
            // A majority: f followers.
            QuorumSystem::C2 => self.f,
            // More than 3/4 of the replicas: ⌊3N/4⌋ + 1 with the leader.
            QuorumSystem::C1 => (3 * self.n / 4 + 1).min(self.n) - 1,
        }
    }

    /// Under C2, the fixed followers of ballot `ballot`'s unique fast quorum: the configured ones
    /// for the configured leader's first round, otherwise the leader's `f` closest peers, the
    /// window shifted by one peer per round of ballots (so a later ballot can leave out a
    /// failed member, §4.3). `None` under C1, where any large enough set is a fast quorum.
    pub fn fixed_fast_followers(&self, ballot: u64) -> Option<Vec<usize>> {
        if self.system == QuorumSystem::C1 {
            return None;
        }
        let leader = self.leader(ballot);
        let round = (ballot / self.n as u64) as usize;
        if let Some((configured_leader, followers)) = &self.configured
            && *configured_leader == leader
            && round == 0
        {
            return Some(followers.clone());
        }
        let others = &self.by_distance[leader];
        if others.is_empty() {
            return Some(Vec::new());
        }
        let mut followers: Vec<usize> = (0..self.f).map(|i| others[(round + i) % others.len()]).collect();
        followers.sort_unstable();
        followers.dedup();
        assert_eq!(followers.len(), self.f.min(others.len()), "distinct fast followers");
        Some(followers)
    }

    /// Whether `rank` is in some fast quorum of `ballot` (`fast(p, b)`).
    /// Without a fast path only the leader proposes (its `FastAck` is N²Paxos' 2A).
    pub fn is_fast_member(&self, rank: usize, ballot: u64) -> bool {
        rank == self.leader(ballot)
            || self.fast_path && self.fixed_fast_followers(ballot).is_none_or(|f| f.contains(&rank))
    }

    /// Whether the followers for which `voted` holds complete a fast quorum of `ballot` (the
    /// leader's part is the caller's to check).
    pub fn fast_quorum_met(&self, ballot: u64, voted: impl Fn(usize) -> bool) -> bool {
        if !self.fast_path {
            return false;
        }
        let leader = self.leader(ballot);
        match self.fixed_fast_followers(ballot) {
            Some(followers) => followers.iter().all(|&rank| voted(rank)),
            None => (0..self.n).filter(|&rank| rank != leader && voted(rank)).count() >= self.fast_followers_needed(),
        }
    }

    /// Whether `followers` slow votes complete a slow quorum (the leader plus `f` followers).
    pub fn slow_quorum_met(&self, followers: usize) -> bool {
        followers >= self.f
    }

    /// Every fast quorum of `ballot`, as sorted ranks including the leader (recovery, L58).
    pub fn fast_quorums(&self, ballot: u64) -> Vec<Vec<usize>> {
        if !self.fast_path {
            return Vec::new();
        }
        let leader = self.leader(ballot);
        if let Some(mut followers) = self.fixed_fast_followers(ballot) {
            followers.push(leader);
            followers.sort_unstable();
            return vec![followers];
        }
        let others: Vec<usize> = (0..self.n).filter(|&rank| rank != leader).collect();
        let need = self.fast_followers_needed();
        let mut quorums = Vec::new();
        for mask in 0u32..(1u32 << others.len()) {
            if mask.count_ones() as usize != need {
                continue;
            }
            let mut quorum: Vec<usize> =
                others.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, &r)| r).collect();
            quorum.push(leader);
            quorum.sort_unstable();
            quorums.push(quorum);
        }
        quorums
    }
}
