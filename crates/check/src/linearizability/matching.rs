//! Which operation each update of a witness (`witness.rs`) is.
//!
//! An update names what it did: a write or an append its value, a sweep its stamp; a delete
//! nothing. So an update of the order can be any operation of its *class* (same kind, same
//! value or stamp) that did not fail. Most classes have one candidate and one position, and the
//! update is identified. The others (deletes, a value written twice, sweeps sharing a stamp) are
//! matched to their positions so that real time holds: each candidate may only go where it was
//! invoked before everything after it completed and completed after everything before it was
//! invoked, and within those windows positions are filled earliest deadline first, the greedy
//! that matches points to intervals whenever any matching does.
//!
//! The windows are first taken against the identified updates alone, which fixes the states
//! the order produces. Reads are then placed (`witness.rs`), and the classes whose candidates
//! all have the same effect (deletes, sweeps with one stamp, ...) are matched again against the
//! reads too: which member stands where changes no state, so the reads stay valid. Whatever the
//! matching, the candidate is still checked in full afterwards; a poor matching only sends the
//! key to the search.

use crate::fixed_hash::FixedHashMap;
use crate::history::{OpKind, OperationView, Outcome};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::witness::{Applied, Placed};

/// Which operations an update of the order can be: same kind and, for writes and appends, same
/// value, for sweeps same stamp.
type Class<'a> = (OpKind, &'a str, Option<u64>);

fn class_of(effect: &Applied) -> Class<'_> {
    match effect {
        Applied::Write(value) => (OpKind::Write, value.as_str(), None),
        Applied::Append(value) => (OpKind::Append, value.as_str(), None),
        Applied::Expire(at_ms) => (OpKind::Expire, "", *at_ms),
        Applied::Delete => (OpKind::Delete, "", None),
    }
}

fn class_of_operation<'a>(operation: &OperationView<'a>) -> Class<'a> {
    let at_ms = if operation.op == OpKind::Expire { operation.at_ms } else { None };
    (operation.op, operation.value.unwrap_or_default(), at_ms)
}

/// The operation of each update of an order.
pub(super) struct Matching {
    /// Per position of the order, the operation (index into the history's operations).
    pub(super) updates: Vec<usize>,
    /// The classes not identified whose candidates all have the same effect, with their
    /// positions, for [`Matching::rematch`].
    interchangeable: Vec<(Vec<usize>, Vec<usize>)>,
}

/// A class's candidates and the positions of the order naming it.
#[derive(Default)]
struct ClassEntry {
    candidates: Few,
    positions: Few,
}

/// A list that holds its first element inline: nearly every class has one candidate and one
/// position, and two allocations per update showed in the witness check's time.
#[derive(Default)]
struct Few {
    first: Option<usize>,
    rest: Vec<usize>,
}

impl Few {
    fn push(&mut self, element: usize) {
        match self.first {
            None => self.first = Some(element),
            Some(_) => self.rest.push(element),
        }
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.first.into_iter().chain(self.rest.iter().copied())
    }

    fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }
}

impl Matching {
    /// Matches every update of `effects` to an operation among `indices`; `None` when an update
    /// has no candidate, or an `ok` update cannot be matched (it is missing from the order, or
    /// real time allows it nowhere the order has room).
    pub(super) fn new(operations: &[OperationView<'_>], indices: &[usize], effects: &[Applied]) -> Option<Self> {
        let mut classes: FixedHashMap<Class<'_>, ClassEntry> = FixedHashMap::default();
        for &index in indices {
            let operation = &operations[index];
            // A failed operation did not take effect, so it caused no update.
            if operation.op != OpKind::Read && operation.outcome != Outcome::Fail {
                classes.entry(class_of_operation(operation)).or_default().candidates.push(index);
            }
        }
        let mut matching = Matching { updates: vec![usize::MAX; effects.len()], interchangeable: Vec::new() };
        for (position, effect) in effects.iter().enumerate() {
            let entry = classes.get_mut(&class_of(effect))?;
            if let (1, None) = (entry.candidates.len(), entry.positions.first) {
                matching.updates[position] = entry.candidates.first.expect("one candidate");
            }
            entry.positions.push(position);
        }
        // An ok update of a class the order never names is missing from it.
        let unnamed_ok = |entry: &ClassEntry| {
            entry.positions.len() == 0 && entry.candidates.iter().any(|index| operations[index].outcome == Outcome::Ok)
        };
        if classes.values().any(unnamed_ok) {
            return None;
        }
        let mut ambiguous: Vec<(Vec<usize>, Vec<usize>)> = classes
            .into_values()
            .filter(|entry| entry.positions.len() > 0 && (entry.candidates.len() > 1 || entry.positions.len() > 1))
            .map(|entry| (entry.candidates.to_vec(), entry.positions.to_vec()))
            .collect();
        if !ambiguous.is_empty() {
            // Ascending first position, so that the outcome never depends on the map's order.
            ambiguous.sort_unstable_by_key(|(_, positions)| positions[0]);
            matching.match_ambiguous(operations, ambiguous)?;
        }
        Some(matching)
    }

    /// Matches the classes that are not identified (candidates, positions) against the
    /// identified updates.
    fn match_ambiguous(
        &mut self,
        operations: &[OperationView<'_>],
        ambiguous: Vec<(Vec<usize>, Vec<usize>)>,
    ) -> Option<()> {
        for (_, positions) in &ambiguous {
            positions.iter().for_each(|&position| self.updates[position] = usize::MAX);
        }
        let identified: Vec<Option<usize>> =
            self.updates.iter().map(|&operation| (operation != usize::MAX).then_some(operation)).collect();
        let bounds = Bounds::new(operations, &identified, &[]);
        for (candidates, positions) in ambiguous {
            let chosen = match_class(operations, &candidates, &positions, &bounds)?;
            for (&position, operation) in positions.iter().zip(chosen) {
                self.updates[position] = operation;
            }
            if candidates.iter().all(|&member| same_effect(&operations[member], &operations[candidates[0]])) {
                self.interchangeable.push((candidates, positions));
            }
        }
        Some(())
    }

    /// Matches the interchangeable classes again, now against the placed reads too (see the
    /// module's header); says whether any update changed.
    pub(super) fn rematch(&mut self, operations: &[OperationView<'_>], reads: &[Placed]) -> bool {
        if self.interchangeable.is_empty() {
            return false;
        }
        let mut fixed: Vec<Option<usize>> = self.updates.iter().map(|&operation| Some(operation)).collect();
        for (_, positions) in &self.interchangeable {
            positions.iter().for_each(|&position| fixed[position] = None);
        }
        let bounds = Bounds::new(operations, &fixed, reads);
        let mut changed = false;
        for (members, positions) in &self.interchangeable {
            if let Some(chosen) = match_class(operations, members, positions, &bounds) {
                for (&position, operation) in positions.iter().zip(chosen) {
                    changed |= self.updates[position] != operation;
                    self.updates[position] = operation;
                }
            }
        }
        changed
    }
}

/// Whether two operations of one class do the same to every state.
fn same_effect(one: &OperationView<'_>, other: &OperationView<'_>) -> bool {
    match one.op {
        OpKind::Write => one.expires_ms == other.expires_ms,
        OpKind::Append => one.at_ms == other.at_ms,
        OpKind::Read | OpKind::Expire | OpKind::Delete => true,
    }
}

/// Real-time bounds on where an update can go, from the elements already placed: an update at
/// position `p` (after `p` others) must be invoked no later than every ok element after it
/// completed, and complete no earlier than every element before it was invoked.
struct Bounds {
    /// Per position, the earliest completion of an ok element after it.
    completed_after_min: Vec<u64>,
    /// Per position, the latest invocation of an element before it.
    invoked_before_max: Vec<u64>,
}

impl Bounds {
    /// From `updates` (per position, the operation if placed) and `reads` (a read in slot `s`
    /// comes after the update at position `s - 1` and before the one at position `s`).
    fn new(operations: &[OperationView<'_>], updates: &[Option<usize>], reads: &[Placed]) -> Self {
        let length = updates.len();
        let mut reads_completed_min = vec![u64::MAX; length + 1];
        let mut reads_invoked_max = vec![0; length + 1];
        for read in reads {
            let operation = &operations[read.operation];
            reads_completed_min[read.slot] = reads_completed_min[read.slot].min(completion_ns(operation));
            reads_invoked_max[read.slot] = reads_invoked_max[read.slot].max(operation.invoke_ns);
        }
        let completed = |position: usize| updates[position].map_or(u64::MAX, |index| completion_ns(&operations[index]));
        let invoked = |position: usize| updates[position].map_or(0, |index| operations[index].invoke_ns);
        let mut bounds = Bounds { completed_after_min: vec![u64::MAX; length], invoked_before_max: vec![0; length] };
        // After position p: updates at positions past p, reads in slots p + 1 and later.
        let mut after = reads_completed_min[length];
        for position in (0..length).rev() {
            bounds.completed_after_min[position] = after;
            after = after.min(completed(position)).min(reads_completed_min[position]);
        }
        // Before position p: updates at positions before p, reads in slots up to p.
        let mut before = reads_invoked_max[0];
        for position in 0..length {
            bounds.invoked_before_max[position] = before;
            before = before.max(invoked(position)).max(reads_invoked_max[position + 1]);
        }
        bounds
    }
}

/// When an operation completed for real-time purposes: never, unless it completed ok.
fn completion_ns(operation: &OperationView<'_>) -> u64 {
    match operation.outcome {
        Outcome::Ok => operation.completion_ns.unwrap_or(u64::MAX),
        _ => u64::MAX,
    }
}

/// The candidate for each of `positions` (ascending), every ok candidate used: earliest
/// deadline first within the candidates' windows. A window starts at the first position the
/// candidate's invocation allows and ends at the last its completion allows (both bounds only
/// grow with the position). When real time leaves a position no candidate, the best one left
/// takes it anyway: the candidate is checked in full later, and one bad spot should not spoil
/// the matching of a class of thousands of deletes. `None` when there are more ok candidates
/// than positions, or an ok one is left over.
fn match_class(
    operations: &[OperationView<'_>],
    candidates: &[usize],
    positions: &[usize],
    bounds: &Bounds,
) -> Option<Vec<usize>> {
    let first_allowed = |index: usize| {
        positions.partition_point(|&position| bounds.completed_after_min[position] < operations[index].invoke_ns)
    };
    let ok_count = candidates.iter().filter(|&&index| operations[index].outcome == Outcome::Ok).count();
    if ok_count > positions.len() {
        return None;
    }
    let mut waiting: Vec<(usize, usize)> = candidates.iter().map(|&index| (first_allowed(index), index)).collect();
    waiting.sort_unstable();
    let mut waiting = waiting.into_iter().peekable();
    let mut ready: BinaryHeap<Reverse<(u64, u64, usize)>> = BinaryHeap::new();
    // Candidates whose window closed before the position reached: placed first, as best they can.
    let mut late: Vec<usize> = Vec::new();
    let mut chosen = Vec::with_capacity(positions.len());
    for (rank, &position) in positions.iter().enumerate() {
        while let Some((_, index)) = waiting.next_if(|&(first, _)| first <= rank) {
            ready.push(Reverse((completion_ns(&operations[index]), operations[index].invoke_ns, index)));
        }
        while let Some(&Reverse((completion, _, index))) = ready.peek() {
            if bounds.invoked_before_max[position] <= completion {
                break;
            }
            late.push(index);
            ready.pop();
        }
        let best = late.pop().or_else(|| ready.pop().map(|Reverse((_, _, index))| index));
        chosen.push(best.or_else(|| waiting.next().map(|(_, index)| index))?);
    }
    let left = late.into_iter().chain(ready.into_iter().map(|Reverse((_, _, index))| index));
    let left_ok = left.chain(waiting.map(|(_, index)| index)).any(|index| operations[index].outcome == Outcome::Ok);
    (!left_ok).then_some(chosen)
}
