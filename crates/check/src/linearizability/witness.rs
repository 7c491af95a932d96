//! A candidate linearization, checked in linear time: when a run knows the order in which a
//! replica applied each key's writes and appends (the simulator records it), that order with
//! every read placed after the effect whose state it returned is a candidate; if it explains
//! every result and respects real time, it proves the key linearizable without a search.
//!
//! The witness is checked, never trusted: a wrong one (a replica that applied a write twice, a
//! speculative effect later undone, a value written twice) merely fails to verify, and the key
//! goes to the search of `frontier.rs`. What a verified candidate proves:
//!
//! - every `ok` operation is in it, a `fail` operation is not, an `info` or unfinished write is
//!   in it or not (it may take effect or never);
//! - each read returns the state the candidate's effects before it produce;
//! - no operation is placed after one that was invoked only after it completed.
//!
//! That is a linearization, so the key is linearizable (the definition in `mod.rs`).

use crate::history::{OpKind, OperationView, Outcome};
use std::collections::HashMap;

/// One effect a replica applied to a key, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The key was set to this value.
    Write(String),
    /// This value was appended to the key.
    Append(String),
}

/// Per key, the effects one replica applied, in order; a key absent from the map had none.
/// Keys the recorder could not describe (a command outside reads, writes and appends touched
/// them) are listed in `unknown` and always searched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// The effects per key.
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

/// One element of the candidate: an operation (index into the key's operations) placed after
/// `slot` effects.
struct Placed {
    slot: usize,
    /// Reads in one slot are ordered by completion: a read that completed before another was
    /// invoked then comes first, as real time demands.
    completion_ns: u64,
    operation: usize,
}

/// Whether `effects` with the key's reads placed in it is a linearization of the key's
/// operations (`indices` among `operations`).
pub(super) fn verifies(operations: &[OperationView<'_>], indices: &[usize], effects: &[Applied]) -> bool {
    let Some(mut placed) = place_effects(operations, indices, effects) else { return false };
    let states = StateIndex::new(effects);
    for &index in indices {
        let operation = &operations[index];
        if operation.op != OpKind::Read || operation.outcome != Outcome::Ok {
            continue;
        }
        let Some(slot) = states.slot_of(operation.value) else { return false };
        let completion_ns = operation.completion_ns.unwrap_or(u64::MAX);
        placed.push(Placed { slot, completion_ns, operation: index });
    }
    // Effects sort before the reads of their own slot (reads of slot k follow effect k).
    placed.sort_by_key(|p| (p.slot, operations[p.operation].op == OpKind::Read, p.completion_ns));
    respects_real_time(operations, &placed)
}

/// Places each effect on the operation that caused it (matched by kind and value, each used
/// once); `None` when an effect has no such operation, an operation that failed took effect, or
/// an `ok` write or append is missing from the order.
fn place_effects(operations: &[OperationView<'_>], indices: &[usize], effects: &[Applied]) -> Option<Vec<Placed>> {
    let mut by_effect: HashMap<(OpKind, &str), Vec<usize>> = HashMap::new();
    for &index in indices {
        let operation = &operations[index];
        if operation.op != OpKind::Read {
            by_effect.entry((operation.op, operation.value?)).or_default().push(index);
        }
    }
    let mut placed = Vec::with_capacity(indices.len());
    for (position, effect) in effects.iter().enumerate() {
        let key = match effect {
            Applied::Write(value) => (OpKind::Write, value.as_str()),
            Applied::Append(value) => (OpKind::Append, value.as_str()),
        };
        let index = by_effect.get_mut(&key)?.pop()?;
        if operations[index].outcome == Outcome::Fail {
            return None;
        }
        placed.push(Placed { slot: position + 1, completion_ns: 0, operation: index });
    }
    // Every write or append left over must be one that may never take effect.
    let left_ok = by_effect.values().flatten().any(|&index| operations[index].outcome == Outcome::Ok);
    (!left_ok).then_some(placed)
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

/// The key's state after each prefix of the effects, found by a read's value: a rolling hash
/// finds the candidate slot, an exact comparison confirms it.
struct StateIndex<'a> {
    effects: &'a [Applied],
    /// Hash of the state after `k` effects → `k`; a hash reached twice maps to `None`.
    by_hash: HashMap<u64, Option<usize>>,
}

/// A polynomial hash modulo the Mersenne prime 2^61 − 1, so that the hash of a concatenation
/// follows from the hashes of its parts.
const MODULUS: u64 = (1 << 61) - 1;
const BASE: u64 = 1_000_003;

fn mul_mod(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(MODULUS)) as u64
}

/// The hash of `text` and `BASE^len(text)`.
fn hash(text: &str) -> (u64, u64) {
    text.bytes()
        .fold((0, 1), |(h, power), byte| ((mul_mod(h, BASE) + u64::from(byte) + 1) % MODULUS, mul_mod(power, BASE)))
}

/// The hash standing for the absent key (no string hashes to it: theirs are below MODULUS).
const ABSENT: u64 = u64::MAX;

impl<'a> StateIndex<'a> {
    fn new(effects: &'a [Applied]) -> Self {
        let mut by_hash = HashMap::with_capacity(effects.len() + 1);
        by_hash.insert(ABSENT, Some(0));
        let mut state = ABSENT;
        for (position, effect) in effects.iter().enumerate() {
            state = match effect {
                Applied::Write(value) => hash(value).0,
                Applied::Append(value) => {
                    let (tail, power) = hash(value);
                    let head = if state == ABSENT { 0 } else { state };
                    (mul_mod(head, power) + tail) % MODULUS
                }
            };
            by_hash.entry(state).and_modify(|slot| *slot = None).or_insert(Some(position + 1));
        }
        StateIndex { effects, by_hash }
    }

    /// The one slot whose state is `value`, confirmed exactly.
    fn slot_of(&self, value: Option<&str>) -> Option<usize> {
        let hash = value.map_or(ABSENT, |text| hash(text).0);
        let slot = (*self.by_hash.get(&hash)?)?;
        (self.state_is(slot, value)).then_some(slot)
    }

    /// Whether the state after `slot` effects is exactly `value`: walks back over the appends
    /// to the last write, comparing suffixes.
    fn state_is(&self, slot: usize, value: Option<&str>) -> bool {
        let Some(mut rest) = value else { return slot == 0 };
        for effect in self.effects[..slot].iter().rev() {
            match effect {
                Applied::Write(written) => return rest == written,
                Applied::Append(appended) => match rest.strip_suffix(appended.as_str()) {
                    Some(shorter) => rest = shorter,
                    None => return false,
                },
            }
        }
        // Appends to an absent key: the state is their concatenation.
        rest.is_empty() && slot > 0
    }
}
