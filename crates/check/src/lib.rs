//! ordo-check: what a run must satisfy, checked after the fact.
//!
//! - [`history`]: the client history format (one JSON event per line), its parser and writer,
//!   and the pairing of invocations with their completions into [`history::Operation`]s.
//! - [`linearizability`]: whether a history of reads, writes, appends, expires and deletes on a
//!   key-value store with key expiry is linearizable, checked key by key with a frontier search.
//! - [`agreement`]: whether replicas that applied the same number of writes to a key applied the
//!   same writes in the same order, and whether they converged.
//!
//! Every checker returns a typed violation that names what broke, and none of them panics on
//! malformed input: a history is data from outside, not state the checker guarantees.
#![deny(missing_docs)]

pub mod agreement;
mod fixed_hash;
#[doc(hidden)]
pub mod fuzzing;
pub mod history;
pub mod linearizability;

pub use agreement::{AgreementViolation, check_agreement, check_converged};
pub use history::{
    EventKind, HistoryError, HistoryEvent, OpKind, Operation, Outcome, Problem, pair_operations, parse_history,
    validate_history, write_history,
};
pub use linearizability::{
    Applied, CheckOptions, CheckStats, ReportedState, Violation, Witness, check_linearizable, check_linearizable_with,
    check_linearizable_witnessed,
};
