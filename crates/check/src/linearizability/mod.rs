//! Linearizability of a key-value history (Herlihy and Wing, 1990), checked key by key.
//!
//! The model: a key holds `None` (absent) or a string with an optional expiry stamp; a write sets
//! both, an append concatenates to the string (keeping the expiry; an absent or expired key
//! counts as empty and the result never expires), a read returns the string, an expire (the
//! store's sweep) removes an expired key and a delete any key. A key has expired for an
//! operation stamped `at_ms` when `at_ms` is strictly greater than its expiry; an operation
//! without a stamp sees no key as expired. Stamps come from the clients' clocks and need not
//! grow in linearization order: each operation is judged at its own stamp. Operations on different keys commute,
//! so a history is linearizable exactly when each key's sub-history is (P-compositionality,
//! Horn and Kroening 2015), and each key is checked alone.
//!
//! What the outcomes mean: an `ok` operation took effect between its invocation and its
//! completion; a `fail` operation never took effect and is dropped; an `info` operation, or
//! one never completed, may take effect at any time after its invocation, or never. A read
//! that did not complete `ok` says nothing and is dropped. Real-time order: A precedes B only
//! if A completed strictly before B was invoked; equal times count as concurrent. Clients play
//! no part in the order: overlapping operations of one pipelining client (see
//! `crate::history`) are as concurrent as those of two clients.
//!
//! Each key is searched with the frontier algorithm described in `frontier.rs`;
//! `docs/history.md` explains it for users.

mod frontier;
mod matching;
mod observers;
mod slots;
mod state;
mod witness;

pub use witness::{Applied, Witness};

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_expiry;
#[cfg(test)]
mod tests_witness;
#[cfg(test)]
mod workload;

use crate::history::{
    HistoryError, HistoryEvent, OpKind, Operation, OperationView, Outcome, ShortValue, pair, write_stamps,
};
use frontier::{Effect, Failure, KeyOperation, Limits, Search, Step, StepKind};
use observers::Observers;
use state::{KeyState, Piece};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Limits of the search.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckOptions {
    /// Most configurations a key's frontier may hold before the key is reported
    /// [`Violation::TooComplex`] instead of exhausting memory.
    pub configurations_max: usize,
    /// Most configurations one completion step may explore before the key is reported
    /// [`Violation::TooComplex`] instead of exhausting time. Bursts of concurrent appends that no
    /// read orders (a batch released after a view change) explore far more than they keep.
    pub explored_per_step_max: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { configurations_max: 1_000_000, explored_per_step_max: 20_000_000 }
    }
}

/// Most operations of one key that may be open at once (info operations stay open until no
/// read can observe them). The slot sets are sized from it; past it a key is too complex.
pub const OPEN_OPERATIONS_MAX: usize = 1024;
// The largest slot set `check_key` instantiates must hold exactly that many.
const _: () = assert!(OPEN_OPERATIONS_MAX == 16 * 64);

/// What a successful check covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Keys checked.
    pub keys: usize,
    /// Operations in the history, whatever their outcome.
    pub operations: usize,
    /// Operations that completed ok.
    pub operations_ok: usize,
    /// Operations that failed, which the check drops.
    pub operations_failed: usize,
    /// Operations whose outcome is unknown: info, or never completed.
    pub operations_indeterminate: usize,
    /// The largest frontier of any key: a measure of how ambiguous the history was.
    pub configurations_peak: usize,
    /// Keys proved by a verified witness (`witness.rs`), without a search.
    pub keys_witnessed: usize,
}

impl std::fmt::Display for CheckStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} operations on {} keys: {} ok, {} failed, {} of unknown outcome; ",
            self.operations, self.keys, self.operations_ok, self.operations_failed, self.operations_indeterminate,
        )?;
        if self.keys_witnessed > 0 {
            write!(f, "{} keys proved by the replicas' order, ", self.keys_witnessed)?;
        }
        write!(f, "at most {} candidate states for a searched key", self.configurations_peak)
    }
}

/// Why a history is not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// No order of the key's operations explains `operation`'s result.
    NotLinearizable {
        /// The key.
        key: String,
        /// The ok operation that could not be linearized (always a read: updates
        /// can always take effect). Boxed to keep the error small on the success path.
        operation: Box<Operation>,
        /// The states the key could hold just before the operation completed, before applying
        /// any of the open operations; at most a few.
        states: Vec<ReportedState>,
        /// The other operations on the key that were open at that moment.
        concurrent: Vec<Operation>,
    },
    /// The key's search exceeded [`CheckOptions::configurations_max`] or
    /// [`OPEN_OPERATIONS_MAX`]; its linearizability is unknown.
    TooComplex {
        /// The key.
        key: String,
    },
    /// The history breaks the format's rules.
    Malformed(HistoryError),
}

/// A state the key could hold, in a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedState {
    /// The value, `None` when absent.
    pub value: Option<String>,
    /// The stamp after which the value expires, if it does.
    pub expires_ms: Option<u64>,
}

impl ReportedState {
    /// A state without expiry.
    pub fn value(value: Option<&str>) -> Self {
        ReportedState { value: value.map(String::from), expires_ms: None }
    }
}

impl fmt::Display for ReportedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", ShortValue(self.value.as_deref()))?;
        write_stamps(f, None, self.expires_ms)
    }
}

/// How many concurrent operations a report lists before summarizing the rest.
const REPORTED_CONCURRENT_MAX: usize = 20;

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::NotLinearizable { key, operation, states, concurrent } => {
                writeln!(f, "key {key:?} is not linearizable: no order of its operations explains")?;
                writeln!(f, "  {operation}")?;
                let states: Vec<String> = states.iter().map(ReportedState::to_string).collect();
                write!(
                    f,
                    "  before it completed, without the open operations, the key could hold: {}",
                    states.join(", ")
                )?;
                write_concurrent(f, concurrent)
            }
            Violation::TooComplex { key } => write!(
                f,
                "key {key:?} is too complex to check: the search exceeded its limit of configurations or of \
                 {OPEN_OPERATIONS_MAX} open operations"
            ),
            Violation::Malformed(error) => write!(f, "malformed history: {error}"),
        }
    }
}

fn write_concurrent(f: &mut fmt::Formatter<'_>, concurrent: &[Operation]) -> fmt::Result {
    if concurrent.is_empty() {
        return write!(f, "\n  no other operation on the key was open");
    }
    write!(f, "\n  operations on the key open at that moment:")?;
    for operation in concurrent.iter().take(REPORTED_CONCURRENT_MAX) {
        write!(f, "\n    {operation}")?;
    }
    if concurrent.len() > REPORTED_CONCURRENT_MAX {
        write!(f, "\n    ... and {} more", concurrent.len() - REPORTED_CONCURRENT_MAX)?;
    }
    Ok(())
}

impl std::error::Error for Violation {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Violation::Malformed(error) => Some(error),
            _ => None,
        }
    }
}

/// Checks that the history is linearizable, with the default limits.
pub fn check_linearizable(events: &[HistoryEvent]) -> Result<CheckStats, Violation> {
    check_linearizable_with(events, &CheckOptions::default())
}

/// Checks that the history is linearizable. Keys are checked in sorted order; a key that is not
/// linearizable is reported before a key that is too complex, so that a real violation is never
/// hidden behind an inconclusive key.
pub fn check_linearizable_with(events: &[HistoryEvent], options: &CheckOptions) -> Result<CheckStats, Violation> {
    check(events, None, options)
}

/// Checks that the history is linearizable, trying first for each key the order in which a
/// replica applied its writes and appends (`witness`): a key whose order verifies needs no
/// search; any other key is searched as by [`check_linearizable_with`]. The verdict is the
/// same as without a witness whenever the search concludes; a witness only spares the search.
pub fn check_linearizable_witnessed(
    events: &[HistoryEvent],
    witness: &Witness,
    options: &CheckOptions,
) -> Result<CheckStats, Violation> {
    check(events, Some(witness), options)
}

fn check(events: &[HistoryEvent], witness: Option<&Witness>, options: &CheckOptions) -> Result<CheckStats, Violation> {
    let operations = pair(events, |position| position + 1).map_err(Violation::Malformed)?;
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, operation) in operations.iter().enumerate() {
        by_key.entry(operation.key).or_default().push(index);
    }
    let mut stats = count_outcomes(&operations);
    stats.keys = by_key.len();
    let keys: Vec<(&str, Vec<usize>)> = by_key.into_iter().collect();
    let outcomes = check_keys(&operations, &keys, witness, options);
    let mut too_complex = None;
    for ((key, _), outcome) in keys.iter().zip(outcomes) {
        match outcome {
            Ok(KeyChecked::Witnessed) => stats.keys_witnessed += 1,
            Ok(KeyChecked::Searched(peak)) => stats.configurations_peak = stats.configurations_peak.max(peak),
            Err(KeyFailure::TooComplex) => _ = too_complex.get_or_insert(key.to_string()),
            Err(KeyFailure::Stuck { operation, states, open }) => {
                let mut concurrent: Vec<Operation> =
                    open.iter().map(|&index| operations[index].to_operation()).collect();
                concurrent.sort_by_key(|operation| (operation.invoke_ns, operation.client, operation.id));
                let operation = Box::new(operations[operation].to_operation());
                return Err(Violation::NotLinearizable { key: key.to_string(), operation, states, concurrent });
            }
        }
    }
    match too_complex {
        Some(key) => Err(Violation::TooComplex { key }),
        None => Ok(stats),
    }
}

/// Checks every key, spreading the keys over the available cores: they are independent, and a
/// big history is checked in a fraction of the time. The outcomes come back in key order, so
/// the verdict never depends on scheduling.
fn check_keys(
    operations: &[OperationView<'_>],
    keys: &[(&str, Vec<usize>)],
    witness: Option<&Witness>,
    options: &CheckOptions,
) -> Vec<Result<KeyChecked, KeyFailure>> {
    let check_one = |(key, indices): &(&str, Vec<usize>)| {
        let order = witness.and_then(|witness| witness.order(key));
        if order.is_some_and(|order| witness::verifies(operations, indices, order)) {
            return Ok(KeyChecked::Witnessed);
        }
        check_key(operations, indices, options).map(KeyChecked::Searched)
    };
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(keys.len());
    if workers <= 1 {
        return keys.iter().map(check_one).collect();
    }
    // Workers take the next unchecked key, so that one big key does not leave the others idle.
    let next_key = AtomicUsize::new(0);
    let mut outcomes: Vec<Option<Result<KeyChecked, KeyFailure>>> = (0..keys.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut checked = Vec::new();
                    loop {
                        let index = next_key.fetch_add(1, Ordering::Relaxed);
                        let Some(key) = keys.get(index) else { return checked };
                        checked.push((index, check_one(key)));
                    }
                })
            })
            .collect();
        for handle in handles {
            // A panic in a worker is a bug in the checker: pass it on unchanged.
            let checked = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (index, outcome) in checked {
                outcomes[index] = Some(outcome);
            }
        }
    });
    outcomes.into_iter().map(|outcome| outcome.expect("every key is checked by one worker")).collect()
}

fn count_outcomes(operations: &[OperationView<'_>]) -> CheckStats {
    let mut stats = CheckStats { operations: operations.len(), ..CheckStats::default() };
    for operation in operations {
        match operation.outcome {
            Outcome::Ok => stats.operations_ok += 1,
            Outcome::Fail => stats.operations_failed += 1,
            Outcome::Info | Outcome::Unfinished => stats.operations_indeterminate += 1,
        }
    }
    stats
}

/// How a key was found linearizable.
enum KeyChecked {
    /// The replicas' order verified.
    Witnessed,
    /// The search concluded, with this peak frontier.
    Searched(usize),
}

/// A key's failure in terms of the history's operations (indices into the paired operations).
enum KeyFailure {
    Stuck { operation: usize, states: Vec<ReportedState>, open: Vec<usize> },
    TooComplex,
}

/// Checks one key; `indices` are its operations among `operations`. Returns the peak frontier.
fn check_key(operations: &[OperationView<'_>], indices: &[usize], options: &CheckOptions) -> Result<usize, KeyFailure> {
    let (mut key_operations, steps) = prepare(operations, indices);
    let slots = assign_slots(&mut key_operations, &steps);
    let limits = Limits {
        configurations_max: options.configurations_max.max(1),
        explored_per_step_max: options.explored_per_step_max.max(1),
    };
    let result = match slots.div_ceil(64) {
        0 | 1 => Search::<1>::new(&key_operations, limits).run(&steps),
        2 => Search::<2>::new(&key_operations, limits).run(&steps),
        3..=4 => Search::<4>::new(&key_operations, limits).run(&steps),
        5..=16 => Search::<16>::new(&key_operations, limits).run(&steps),
        _ => Err(Failure::TooComplex),
    };
    result.map_err(|failure| match failure {
        Failure::TooComplex => KeyFailure::TooComplex,
        Failure::Stuck { operation, states, open } => KeyFailure::Stuck {
            operation: key_operations[operation].source,
            states,
            open: open.into_iter().map(|index| key_operations[index].source).collect(),
        },
    })
}

/// Turns a key's operations into the search's operations and steps, sorted. Failed operations
/// and reads without an ok are left out: they constrain nothing. Optional operations that no
/// read can observe are left out too, and the others retire once no read can observe them.
fn prepare(operations: &[OperationView<'_>], indices: &[usize]) -> (Vec<KeyOperation>, Vec<Step>) {
    let relevant: Vec<usize> = indices.iter().copied().filter(|&index| constrains(&operations[index])).collect();
    let relevant_operations: Vec<&OperationView<'_>> = relevant.iter().map(|&index| &operations[index]).collect();
    let observers = Observers::new(&relevant_operations);
    let mut key_operations = Vec::with_capacity(relevant.len());
    let mut steps = Vec::with_capacity(2 * relevant.len());
    for index in relevant {
        let operation = &operations[index];
        let end = match (operation.outcome, operation.completion_ns) {
            (Outcome::Ok, Some(completion_ns)) => Some((completion_ns, StepKind::Complete)),
            _ => observers.last_observation_ns(operation).map(|time_ns| (time_ns, StepKind::Retire)),
        };
        let Some((end_ns, end_kind)) = end.filter(|&(end_ns, _)| end_ns >= operation.invoke_ns) else { continue };
        let position = key_operations.len();
        steps.push(Step { time_ns: operation.invoke_ns, kind: StepKind::Invoke, operation: position });
        steps.push(Step { time_ns: end_ns, kind: end_kind, operation: position });
        key_operations.push(key_operation(index, operation));
    }
    steps.sort_unstable();
    (key_operations, steps)
}

/// Whether an operation constrains the key at all. An expire without a stamp sees nothing
/// expired, so it never changes the key.
fn constrains(operation: &OperationView<'_>) -> bool {
    match (operation.op, operation.outcome) {
        (_, Outcome::Fail) => false,
        (OpKind::Read, outcome) => outcome == Outcome::Ok,
        (OpKind::Expire, _) => operation.at_ms.is_some(),
        (OpKind::Write | OpKind::Append | OpKind::Delete, _) => true,
    }
}

fn key_operation(source: usize, operation: &OperationView<'_>) -> KeyOperation {
    let value = || operation.value.expect("pairing requires a value for writes and appends");
    let at_ms = operation.at_ms;
    let effect = match operation.op {
        OpKind::Read => Effect::Read { expected: operation.value.map(Piece::new), at_ms },
        OpKind::Write => Effect::Write(KeyState::written(&Piece::new(value()), operation.expires_ms)),
        OpKind::Append => Effect::Append { piece: Piece::new(value()), at_ms },
        OpKind::Expire => Effect::Expire { at_ms },
        OpKind::Delete => Effect::Delete,
    };
    let optional = operation.outcome != Outcome::Ok;
    KeyOperation { source, effect, optional, slot: usize::MAX }
}

/// Gives each operation the lowest slot free at its invocation; returns how many slots exist.
/// Reusing slots keeps the sets as small as the most operations ever open at once.
fn assign_slots(key_operations: &mut [KeyOperation], steps: &[Step]) -> usize {
    let mut free: BinaryHeap<Reverse<usize>> = BinaryHeap::new();
    let mut count = 0;
    for step in steps {
        let operation = &mut key_operations[step.operation];
        match step.kind {
            StepKind::Invoke => {
                operation.slot = free.pop().map_or_else(
                    || {
                        count += 1;
                        count - 1
                    },
                    |Reverse(slot)| slot,
                );
            }
            StepKind::Complete | StepKind::Retire => {
                debug_assert!(operation.slot != usize::MAX, "an operation ends after its invocation");
                free.push(Reverse(operation.slot));
            }
        }
    }
    count
}
