//! A candidate linearization, checked in near-linear time: when a run knows the order in which a
//! replica applied each key's updates (writes, appends, expires, deletes; the simulator records
//! it), that order with every read placed after an update whose state explains it is a
//! candidate; if it explains every result and respects real time, it proves the key
//! linearizable without a search.
//!
//! The witness is checked, never trusted: a wrong one (a replica that applied a write twice, a
//! speculative effect later undone, a value written twice) merely fails to verify, and the key
//! goes to the search of `frontier.rs`. What a verified candidate proves:
//!
//! - every `ok` operation is in it, a `fail` operation is not, an `info` or unfinished update is
//!   in it or not (it may take effect or never);
//! - each read returns what the state the candidate's updates before it produce holds for the
//!   read's stamp (an expired key reads as absent);
//! - no operation is placed after one that was invoked only after it completed.
//!
//! That is a linearization, so the key is linearizable (the definition in `mod.rs`).
//!
//! Which operation each update is: `matching.rs`.
//!
//! Where reads go: with expiry, several states of the order may explain a read (every expired
//! or absent state explains a read of `null`), so each read takes the earliest state, at or
//! after every update and read that completed before it was invoked, that explains it. Taking
//! the earliest is never worse: a read only bounds later reads from below and is bounded from
//! above by the updates invoked after it completed, so an earlier place can only help both. If
//! that placement breaks real time, so does every other placement in this order.

use super::matching::Matching;
use super::state::{concatenated_hash, text_hash};
use crate::fixed_hash::FixedHashMap;
use crate::history::{OpKind, OperationView, Outcome};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// One update a replica applied to a key, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The key was set to this value (with the expiry, if any, of the write that set it).
    Write(String),
    /// This value was appended to the key.
    Append(String),
    /// The store's sweep of expired keys stamped with this `at_ms` ran on the key, whether or
    /// not it removed it. The stamp tells sweeps apart, as a value tells writes apart.
    Expire(Option<u64>),
    /// The key was deleted.
    Delete,
}

/// Per key, the updates one replica applied, in order; a key absent from the map had none.
/// Keys the recorder could not describe (a command outside the modelled ones touched them) are
/// listed in `unknown` and always searched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// The updates per key.
    pub effects: HashMap<String, Vec<Applied>>,
    /// Keys without a usable order.
    pub unknown: std::collections::HashSet<String>,
}

impl Witness {
    /// The order offered for `key`, `None` when there is none.
    pub(super) fn order(&self, key: &str) -> Option<&[Applied]> {
        if self.unknown.contains(key) {
            return None;
        }
        Some(self.effects.get(key).map_or(&[], Vec::as_slice))
    }
}

/// One element of the candidate: an operation (index into the history's operations) placed
/// after `slot` updates.
#[derive(Clone, Copy)]
pub(super) struct Placed {
    pub(super) slot: usize,
    /// Reads in one slot are ordered by completion: a read that completed before another was
    /// invoked then comes first, as real time demands.
    pub(super) completion_ns: u64,
    pub(super) operation: usize,
}

/// Whether `effects` with the key's reads placed in it is a linearization of the key's
/// operations (`indices` among `operations`).
pub(super) fn verifies(operations: &[OperationView<'_>], indices: &[usize], effects: &[Applied]) -> bool {
    let Some(mut matching) = Matching::new(operations, indices, effects) else { return false };
    // Rematching moves only updates with the same effect, so the states stay those of the first.
    let states = States::new(operations, &matching.updates);
    for round in 1..=MATCHING_ROUNDS_MAX {
        let Some(reads) = place_reads(operations, indices, &states, &matching.updates) else { return false };
        let updates = matching.updates.iter().enumerate();
        let mut placed: Vec<Placed> =
            updates.map(|(position, &operation)| Placed { slot: position + 1, completion_ns: 0, operation }).collect();
        placed.extend_from_slice(&reads);
        // Updates sort before the reads of their own slot (reads of slot k follow update k).
        placed.sort_by_key(|p| (p.slot, operations[p.operation].op == OpKind::Read, p.completion_ns));
        if respects_real_time(operations, &placed) {
            return true;
        }
        if round == MATCHING_ROUNDS_MAX || !matching.rematch(operations, &reads) {
            return false;
        }
    }
    false
}

/// How many times the candidate is built before the key goes to the search: reads are placed
/// after the matched updates, and when real time fails the interchangeable updates are matched
/// again against those reads (`matching.rs`). A matching that needs more is rare enough to
/// leave to the search.
const MATCHING_ROUNDS_MAX: usize = 3;

/// Gives each ok read the earliest slot that explains it at or after every update (`updates`,
/// the operation at each position) and read that completed before it was invoked (see the
/// module's header); `None` when a read has none.
fn place_reads(
    operations: &[OperationView<'_>],
    indices: &[usize],
    states: &States,
    updates: &[usize],
) -> Option<Vec<Placed>> {
    let completion = |index: usize| operations[index].completion_ns.unwrap_or(u64::MAX);
    let mut reads: Vec<usize> = indices
        .iter()
        .copied()
        .filter(|&index| operations[index].op == OpKind::Read && operations[index].outcome == Outcome::Ok)
        .collect();
    reads.sort_by_key(|&index| operations[index].invoke_ns);
    // Ok updates by completion: the ones completed before a read was invoked precede it.
    let mut completed: Vec<(u64, usize)> = updates
        .iter()
        .enumerate()
        .filter(|&(_, &operation)| operations[operation].outcome == Outcome::Ok)
        .map(|(position, &operation)| (completion(operation), position + 1))
        .collect();
    completed.sort_unstable();
    let mut completed = completed.into_iter().peekable();
    let mut placed = Vec::with_capacity(reads.len());
    let mut earlier_reads: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut lowest = 0;
    for read in reads {
        let operation = &operations[read];
        while let Some((_, slot)) = completed.next_if(|&(completion_ns, _)| completion_ns < operation.invoke_ns) {
            lowest = lowest.max(slot);
        }
        while let Some(Reverse((_, slot))) = earlier_reads.peek().filter(|Reverse((c, _))| *c < operation.invoke_ns) {
            lowest = lowest.max(*slot);
            earlier_reads.pop();
        }
        let slot = states.first_explaining(operation.value, operation.at_ms, lowest)?;
        earlier_reads.push(Reverse((completion(read), slot)));
        placed.push(Placed { slot, completion_ns: completion(read), operation: read });
    }
    Some(placed)
}

/// No element follows one that completed strictly before it was invoked.
fn respects_real_time(operations: &[OperationView<'_>], placed: &[Placed]) -> bool {
    let mut earliest_completion_after = u64::MAX;
    for p in placed.iter().rev() {
        let operation = &operations[p.operation];
        if earliest_completion_after < operation.invoke_ns {
            return false;
        }
        let completion = match operation.outcome {
            Outcome::Ok => operation.completion_ns.unwrap_or(u64::MAX),
            _ => u64::MAX,
        };
        earliest_completion_after = earliest_completion_after.min(completion);
    }
    true
}

/// The key's states along the order, in runs of equal consecutive states (a sweep that removes
/// nothing repeats the state), indexed for the reads: by value, and for reads of `null` by the
/// runs that are absent or expire. The strings are chains of the updates' values, hashed as the
/// search's states are (`state.rs`) but without allocating, which on long runs the witness
/// check, meant to be fast, could not afford.
struct States<'a> {
    chains: Vec<Chain<'a>>,
    /// The first slot of each run; run `r` lasts until the next run's first slot.
    starts: Vec<usize>,
    held: Vec<Held>,
    /// The first run holding each value, by the value's length and hash (equality is confirmed
    /// on bytes), and for each run the next run with the same length and hash (`usize::MAX`
    /// for none): a list per value without an allocation per value.
    first_by_value: FixedHashMap<(usize, u64), usize>,
    next_same_value: Vec<usize>,
    last_by_value: FixedHashMap<(usize, u64), usize>,
    /// Runs where the key is absent.
    absent: Vec<usize>,
    /// Runs whose value expires, and their expiries for "first run expired by then" lookups.
    expiring: Vec<usize>,
    expiries: MinTree,
}

/// A string the key holds at some point: `piece`, appended to the chain `prefix` if any.
struct Chain<'a> {
    piece: &'a str,
    prefix: Option<usize>,
    length: usize,
    hash: u64,
}

/// What the key holds: nothing (`chain` is `None`), or a chain and its expiry.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Held {
    chain: Option<usize>,
    expires_ms: Option<u64>,
}

impl Held {
    const ABSENT: Held = Held { chain: None, expires_ms: None };

    /// Whether the key has expired for an operation stamped `at_ms` (see `KeyState::expired_at`).
    fn expired_at(&self, at_ms: Option<u64>) -> bool {
        self.chain.is_some()
            && matches!((self.expires_ms, at_ms), (Some(expires_ms), Some(at_ms)) if at_ms > expires_ms)
    }
}

impl<'a> States<'a> {
    /// The states after each prefix of the updates (the operation at each position).
    fn new(operations: &[OperationView<'a>], updates: &[usize]) -> Self {
        let mut states = States {
            chains: Vec::with_capacity(updates.len()),
            starts: Vec::new(),
            held: Vec::new(),
            first_by_value: FixedHashMap::default(),
            next_same_value: Vec::new(),
            last_by_value: FixedHashMap::default(),
            absent: Vec::new(),
            expiring: Vec::new(),
            expiries: MinTree::default(),
        };
        let mut held = Held::ABSENT;
        states.push_run(0, held);
        for (position, &operation) in updates.iter().enumerate() {
            let next = states.apply(held, &operations[operation]);
            if next != held {
                states.push_run(position + 1, next);
            }
            held = next;
        }
        let expiries: Vec<u64> =
            states.expiring.iter().map(|&run| states.held[run].expires_ms.expect("expiring runs expire")).collect();
        states.expiries = MinTree::new(&expiries);
        states
    }

    /// What the key holds after `operation` (an update) is applied to `held`: the model of
    /// `mod.rs`.
    fn apply(&mut self, held: Held, operation: &OperationView<'a>) -> Held {
        let value = operation.value.unwrap_or_default();
        match operation.op {
            OpKind::Write => Held { chain: Some(self.chain(value, None)), expires_ms: operation.expires_ms },
            OpKind::Append if held.chain.is_none() || held.expired_at(operation.at_ms) => {
                Held { chain: Some(self.chain(value, None)), expires_ms: None }
            }
            OpKind::Append => Held { chain: Some(self.chain(value, held.chain)), expires_ms: held.expires_ms },
            OpKind::Expire if held.expired_at(operation.at_ms) => Held::ABSENT,
            OpKind::Read | OpKind::Expire => held,
            OpKind::Delete => Held::ABSENT,
        }
    }

    fn chain(&mut self, piece: &'a str, prefix: Option<usize>) -> usize {
        let (hash, power) = text_hash(piece);
        let (length, hash) = match prefix {
            Some(prefix) => {
                let before = &self.chains[prefix];
                (before.length + piece.len(), concatenated_hash(before.hash, hash, power))
            }
            None => (piece.len(), hash),
        };
        self.chains.push(Chain { piece, prefix, length, hash });
        self.chains.len() - 1
    }

    fn push_run(&mut self, start: usize, held: Held) {
        let run = self.held.len();
        self.starts.push(start);
        self.held.push(held);
        self.next_same_value.push(usize::MAX);
        match held.chain {
            None => self.absent.push(run),
            Some(chain) => {
                let fingerprint = (self.chains[chain].length, self.chains[chain].hash);
                match self.last_by_value.insert(fingerprint, run) {
                    Some(previous) => self.next_same_value[previous] = run,
                    None => _ = self.first_by_value.insert(fingerprint, run),
                }
            }
        }
        if held.expires_ms.is_some() {
            self.expiring.push(run);
        }
    }

    /// Whether the chain spells `text`: its pieces, from the last, are suffixes of what is left.
    fn spells(&self, chain: usize, text: &str) -> bool {
        let mut rest = text.as_bytes();
        let mut next = Some(chain);
        while let Some(chain) = next {
            let Some(shorter) = rest.strip_suffix(self.chains[chain].piece.as_bytes()) else { return false };
            rest = shorter;
            next = self.chains[chain].prefix;
        }
        rest.is_empty()
    }

    /// The earliest slot at or after `lowest` whose state a read stamped `at_ms` returning
    /// `value` is legal in.
    fn first_explaining(&self, value: Option<&str>, at_ms: Option<u64>, lowest: usize) -> Option<usize> {
        let first_run = self.starts.partition_point(|&start| start <= lowest) - 1;
        let after = |runs: &[usize]| runs.partition_point(|&run| run < first_run);
        let run = match value {
            Some(text) => {
                let first = *self.first_by_value.get(&(text.len(), text_hash(text).0))?;
                let runs = std::iter::successors(Some(first), |&run| {
                    Some(self.next_same_value[run]).filter(|&next| next != usize::MAX)
                });
                let explains = |&run: &usize| {
                    let held = self.held[run];
                    !held.expired_at(at_ms) && held.chain.is_some_and(|chain| self.spells(chain, text))
                };
                runs.skip_while(|&run| run < first_run).find(explains)
            }
            None => {
                let absent = self.absent.get(after(&self.absent)).copied();
                let expired = at_ms
                    .and_then(|at_ms| self.expiries.first_below(after(&self.expiring), at_ms))
                    .map(|position| self.expiring[position]);
                absent.into_iter().chain(expired).min()
            }
        }?;
        Some(self.starts[run].max(lowest))
    }
}

/// A minimum segment tree over a list of numbers, for "the first position at or after `from`
/// holding a number below a bound" in logarithmic time.
#[derive(Default)]
struct MinTree {
    /// Leaves at `leaves..2 * leaves`, padded with `u64::MAX`; node `n` holds the minimum of
    /// nodes `2n` and `2n + 1`.
    minima: Vec<u64>,
    leaves: usize,
}

impl MinTree {
    fn new(values: &[u64]) -> Self {
        let leaves = values.len().next_power_of_two();
        let mut minima = vec![u64::MAX; 2 * leaves];
        minima[leaves..leaves + values.len()].copy_from_slice(values);
        for node in (1..leaves).rev() {
            minima[node] = minima[2 * node].min(minima[2 * node + 1]);
        }
        MinTree { minima, leaves }
    }

    /// The first position at or after `from` whose number is below `bound`.
    fn first_below(&self, from: usize, bound: u64) -> Option<usize> {
        if from >= self.leaves {
            return None;
        }
        self.descend(1, 0, self.leaves, from, bound)
    }

    /// [`Self::first_below`] within node `node`, which covers positions `low..high`.
    fn descend(&self, node: usize, low: usize, high: usize, from: usize, bound: u64) -> Option<usize> {
        if high <= from || self.minima[node] >= bound {
            return None;
        }
        if high - low == 1 {
            return Some(low);
        }
        let middle = (low + high) / 2;
        self.descend(2 * node, low, middle, from, bound)
            .or_else(|| self.descend(2 * node + 1, middle, high, from, bound))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_tree_finds_the_first_number_below_a_bound() {
        // Goal: the tree answers like a scan. Method: every start and bound over a small list,
        // compared with a linear search.
        let values = [7, 3, 9, 3, 12, 0, 5];
        let tree = MinTree::new(&values);
        for from in 0..=values.len() + 1 {
            for bound in 0..14 {
                let naive = (from..values.len()).find(|&position| values[position] < bound);
                assert_eq!(tree.first_below(from, bound), naive, "from {from} bound {bound}");
            }
        }
        assert_eq!(MinTree::new(&[]).first_below(0, u64::MAX), None);
    }
}
