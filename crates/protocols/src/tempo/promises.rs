//! Clocks and promises (spec §5.6): a process's own per-key clocks, which generate promises in
//! `proposal` and `bump`, and the table of every process's promises that a process has learned,
//! from which it computes the stable timestamp of each key (Theorem 1). Pure: no messages, no
//! time. Property-tested against a naive oracle in `tests_promises.rs`.
//!
//! Each key is a partition of its own (spec §2.4), with its own clock: commands on different
//! keys never wait for each other's promises.
//!
//! Both tables hold a row for every key ever touched (a million in a soak), and every command
//! looks its keys up in both: they are hash maps, which a lookup reaches in one or two cache
//! misses where an ordered map compared a key at every level. They are never iterated, so the
//! per-process seed of the hasher (which resists keys chosen to collide) never shows in
//! behaviour and the simulator stays deterministic.

use super::messages::{Dot, PromiseRange};
use ordo_core::Key;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A process's own clock per key (`Clock` in Algorithm 1, one per key).
#[derive(Debug, Default)]
pub struct KeyClocks {
    // Never iterated (module comment).
    clocks: HashMap<Key, u64>,
}

impl KeyClocks {
    /// The clock of `key` (0 if never used).
    pub fn clock(&self, key: &Key) -> u64 {
        self.clocks.get(key).copied().unwrap_or(0)
    }

    /// How many keys have a clock.
    pub fn len(&self) -> usize {
        self.clocks.len()
    }

    /// True when no key has a clock.
    pub fn is_empty(&self) -> bool {
        self.clocks.is_empty()
    }

    /// `proposal(id, m)` over the command's keys (lines 34–39): `t = max(m, max clock + 1)`; on
    /// each key, detached promises for the values skipped and the attached promise `t`. The
    /// generated promises are appended to `out`. Returns `t`.
    pub fn proposal(&mut self, dot: Dot, keys: &[Key], m: u64, out: &mut Vec<PromiseRange>) -> u64 {
        assert!(!keys.is_empty(), "a command touches at least one key");
        let highest = keys.iter().map(|key| self.clock(key)).max().unwrap_or(0);
        let t = m.max(highest + 1);
        for key in keys {
            let clock = self.clocks.entry(key.clone()).or_insert(0);
            if *clock >= t {
                // The same key listed twice in one command: already promised above.
                continue;
            }
            if *clock + 1 < t {
                out.push(PromiseRange { key: key.clone(), lo: *clock + 1, hi: t - 1, attached: None });
            }
            out.push(PromiseRange { key: key.clone(), lo: t, hi: t, attached: Some(dot) });
            *clock = t;
            assert!(self.clock(key) == t, "the clock moved to the proposal");
        }
        t
    }

    /// `bump(t)` on each key (lines 40–43): detached promises up to `t`, appended to `out`.
    pub fn bump(&mut self, keys: &[Key], t: u64, out: &mut Vec<PromiseRange>) {
        for key in keys {
            let clock = self.clocks.entry(key.clone()).or_insert(0);
            if *clock < t {
                out.push(PromiseRange { key: key.clone(), lo: *clock + 1, hi: t, attached: None });
                *clock = t;
            }
            assert!(*clock >= t, "a bump leaves the clock at least at t");
        }
    }
}

/// What one process promised on one key, as far as we know.
#[derive(Debug, Default, Clone)]
struct Known {
    /// Highest contiguous promise counted (`highest_contiguous_promise`).
    hcp: u64,
    /// Ranges known above `hcp`, by first value: (last value, attached command).
    above: BTreeMap<u64, (u64, Option<Dot>)>,
}

/// Why a promise range was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromiseError {
    /// The range names a process the shard does not have.
    UnknownProcess,
    /// The range is empty or inverted.
    Malformed,
    /// The range overlaps a known range differently (a process never does that).
    Overlap,
}

impl PromiseError {
    /// The drop reason counted in the stats.
    pub fn reason(self) -> &'static str {
        match self {
            PromiseError::UnknownProcess => "promise from an unknown process",
            PromiseError::Malformed => "malformed promise range",
            PromiseError::Overlap => "promise range overlaps a known one",
        }
    }
}

/// The promises of every process of a shard, per key (`Promises` in Algorithm 2), with the
/// attached-promise rule of line 47: a promise attached to a command counts only once the
/// command is committed here.
#[derive(Debug)]
pub struct PromiseTable {
    processes: usize,
    // Never iterated (module comment).
    keys: HashMap<Key, Box<[Known]>>,
    /// Commands whose attached promises wait for their commit here, and the keys they block.
    waiting: BTreeMap<Dot, BTreeSet<Key>>,
}

impl PromiseTable {
    /// A table for a shard of `processes` processes.
    pub fn new(processes: usize) -> Self {
        assert!(processes > 0, "a shard has processes");
        PromiseTable { processes, keys: HashMap::new(), waiting: BTreeMap::new() }
    }

    /// How many keys the table holds.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Adds a range promised by process `rank`. `committed` says whether a command is
    /// committed here. Returns whether the key's highest contiguous promise moved.
    pub fn insert(
        &mut self,
        rank: usize,
        range: &PromiseRange,
        committed: &dyn Fn(Dot) -> bool,
    ) -> Result<bool, PromiseError> {
        if rank >= self.processes {
            return Err(PromiseError::UnknownProcess);
        }
        if range.lo == 0 || range.lo > range.hi {
            return Err(PromiseError::Malformed);
        }
        let processes = self.processes;
        let known = &mut self
            .keys
            .entry(range.key.clone())
            .or_insert_with(|| vec![Known::default(); processes].into_boxed_slice())[rank];
        if range.hi <= known.hcp {
            return Ok(false);
        }
        if range.lo <= known.hcp {
            return Err(PromiseError::Overlap);
        }
        if let Some((&lo, &(hi, attached))) = known.above.range(..=range.hi).next_back()
            && hi >= range.lo
        {
            // Promise ranges of one process never overlap unless they are the same range.
            if lo == range.lo && hi == range.hi && attached == range.attached {
                return Ok(false);
            }
            return Err(PromiseError::Overlap);
        }
        known.above.insert(range.lo, (range.hi, range.attached));
        if let Some(dot) = range.attached
            && !committed(dot)
        {
            self.waiting.entry(dot).or_default().insert(range.key.clone());
        }
        Ok(self.advance(rank, &range.key, committed))
    }

    /// Moves the highest contiguous promise of `rank` on `key` past every range now counted.
    fn advance(&mut self, rank: usize, key: &Key, committed: &dyn Fn(Dot) -> bool) -> bool {
        let Some(peers) = self.keys.get_mut(key) else { return false };
        let known = &mut peers[rank];
        let before = known.hcp;
        while let Some((&lo, &(hi, attached))) = known.above.first_key_value() {
            if lo != known.hcp + 1 || attached.is_some_and(|dot| !committed(dot)) {
                break;
            }
            known.above.pop_first();
            known.hcp = hi;
        }
        if known.above.is_empty() {
            // An emptied map keeps its node (hundreds of bytes); a new map allocates nothing.
            // Most keys wait for nothing most of the time.
            known.above = BTreeMap::new();
        }
        assert!(known.hcp >= before, "promises only accumulate");
        known.hcp != before
    }

    /// A command committed here: its attached promises now count. Returns the keys whose
    /// promises may have moved.
    pub fn on_commit(&mut self, dot: Dot, committed: &dyn Fn(Dot) -> bool) -> Vec<Key> {
        assert!(committed(dot), "on_commit follows the commit");
        let keys: Vec<Key> = self.waiting.remove(&dot).map(|keys| keys.into_iter().collect()).unwrap_or_default();
        for key in &keys {
            for rank in 0..self.processes {
                self.advance(rank, key, committed);
            }
        }
        keys
    }

    /// Highest contiguous promise of `rank` on `key`.
    pub fn hcp(&self, rank: usize, key: &Key) -> u64 {
        self.keys.get(key).map_or(0, |peers| peers[rank].hcp)
    }

    /// The highest stable timestamp of `key`: the value a majority of processes has promised
    /// everything up to (Theorem 1; spec Appendix A.2 for even r).
    pub fn stable(&self, key: &Key) -> u64 {
        let Some(peers) = self.keys.get(key) else { return 0 };
        let mut hcps: Vec<u64> = peers.iter().map(|known| known.hcp).collect();
        hcps.sort_unstable_by(|a, b| b.cmp(a));
        hcps[self.processes / 2]
    }

    /// The stable timestamp computed with a minority (the canary's flaw): the highest promise.
    pub fn stable_minority(&self, key: &Key) -> u64 {
        self.keys.get(key).map_or(0, |peers| peers.iter().map(|known| known.hcp).max().unwrap_or(0))
    }

    /// Diagnostics: per process, the highest contiguous promise and the first range above it.
    pub fn describe(&self, key: &Key) -> String {
        let Some(peers) = self.keys.get(key) else { return String::new() };
        peers.iter().map(|k| format!("{}:{:?}", k.hcp, k.above.first_key_value())).collect::<Vec<_>>().join(" ")
    }

    /// Commands whose attached promises are known here but which are not committed here.
    pub fn waiting(&self) -> impl Iterator<Item = Dot> + '_ {
        self.waiting.keys().copied()
    }

    /// How many commands `waiting` lists.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }
}
