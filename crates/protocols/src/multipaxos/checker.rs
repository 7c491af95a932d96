//! Agreement on the log across replicas (VR Revisited §4.2 and its correctness argument: an
//! operation committed at op number `k` stays at `k` in every later view), checked from the
//! facts replicas report, not from their final state.
//!
//! Replicas report [`Observation::Committed`] when their commit number passes an entry they
//! hold (`Replica::commit_through`) and [`Observation::Executed`] when they apply an entry
//! (`Replica::execute_entry`). [`LogAgreement`] keeps, per op, the request first reported there
//! and, once some replica executed it, a digest of what executing it did. A later report with
//! another request at that op, or another execution digest, is a [`Violation`]. Repeats of the
//! same fact are expected (a restarted replica commits and executes its log again) and
//! accepted; the checker keys nothing by replica, so every incarnation of every replica is held
//! to the same log.
//!
//! Memory: the newest [`OPS_WINDOW`] ops reported (2^19; a `BTreeMap` of 24-byte values, about
//! 32 MB when full). When it is full the lowest op is forgotten; a later report about an op below
//! the window (a replica replaying a log far behind the others) is accepted unchecked and
//! counted in [`LogAgreement::unchecked`]. A one-second simulation commits far fewer ops, so
//! there every report is compared.

use crate::slot_window::SlotWindow;
use ordo_core::{CommandResult, GlobalChecker, NodeId, Protocol, RequestId};
use std::fmt;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Most ops the checker remembers (see the module docs).
pub const OPS_WINDOW: usize = 1 << 19;

/// A fact a Multi-Paxos replica reports to the global checker. Both carry ids and digests, not
/// commands, so building one allocates nothing (the real runtime drops them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The entry at `op`, the request `id`, is committed: this replica's commit number reached
    /// `op` while it held the entry.
    Committed {
        /// The op number.
        op: u64,
        /// The request of the entry.
        id: RequestId,
    },
    /// This replica executed the committed entry at `op`; `digest` is [`execution_digest`] of
    /// what executing it did.
    Executed {
        /// The op number.
        op: u64,
        /// The request of the entry.
        id: RequestId,
        /// What execution did: applied or skipped as a duplicate, and the result.
        digest: u64,
    },
}

/// Two reports that cannot both be true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two requests committed (or executed) at one op.
    DifferentEntries {
        /// The op.
        op: u64,
        /// The replica whose report conflicts.
        node: NodeId,
        /// What it reported at `op`.
        reported: RequestId,
        /// What was reported there before.
        earlier: RequestId,
    },
    /// One entry executed with different outcomes: the state machines diverged before `op`.
    DifferentExecutions {
        /// The op.
        op: u64,
        /// The replica whose report conflicts.
        node: NodeId,
        /// The request executed.
        id: RequestId,
        /// Its execution digest.
        reported: u64,
        /// The digest reported there before.
        earlier: u64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::DifferentEntries { op, node, reported, earlier } => write!(
                f,
                "log agreement: {node} reports {reported:?} committed at op {op}, where {earlier:?} was committed"
            ),
            Violation::DifferentExecutions { op, node, id, reported, earlier } => write!(
                f,
                "log agreement: {node} executed {id:?} at op {op} with outcome {reported:#x}, others with {earlier:#x}"
            ),
        }
    }
}

/// What is known about one op.
#[derive(Clone, Copy, Debug)]
struct Decided {
    /// The request committed there.
    id: RequestId,
    /// Its execution digest, or [`NOT_EXECUTED`].
    digest: u64,
}

/// No replica reported executing the op yet ([`execution_digest`] never returns it).
const NOT_EXECUTED: u64 = 0;

/// The agreement checker: no two reports put different requests at one op, and every execution
/// of an entry does the same (see the module docs).
#[derive(Debug)]
pub struct LogAgreement {
    /// What was decided at each op, the newest [`OPS_WINDOW`] (fewer in tests).
    decided: SlotWindow<Decided>,
}

impl LogAgreement {
    /// A checker that knows nothing yet and remembers [`OPS_WINDOW`] ops.
    pub fn new() -> Self {
        Self::with_window(OPS_WINDOW)
    }

    /// A checker that remembers `window` ops (tests use a small one).
    pub fn with_window(window: usize) -> Self {
        LogAgreement { decided: SlotWindow::new(window) }
    }

    /// Reports accepted without comparison because their op lay below the window.
    pub fn unchecked(&self) -> u64 {
        self.decided.unchecked()
    }

    /// Ops remembered.
    pub fn len(&self) -> usize {
        self.decided.len()
    }

    /// True before the first report.
    pub fn is_empty(&self) -> bool {
        self.decided.is_empty()
    }

    /// Takes one report from `node`.
    pub fn check(&mut self, node: NodeId, observation: &Observation) -> Result<(), Violation> {
        let (op, id, digest) = match *observation {
            Observation::Committed { op, id } => (op, id, NOT_EXECUTED),
            Observation::Executed { op, id, digest } => {
                assert_ne!(digest, NOT_EXECUTED, "execution digests are never the marker");
                (op, id, digest)
            }
        };
        assert!(op > 0, "op numbers start at 1");
        let Some(decided) = self.decided.entry(op, || Decided { id, digest }) else { return Ok(()) };
        if decided.id != id {
            return Err(Violation::DifferentEntries { op, node, reported: id, earlier: decided.id });
        }
        if decided.digest == NOT_EXECUTED {
            decided.digest = digest;
        } else if digest != NOT_EXECUTED && digest != decided.digest {
            let earlier = decided.digest;
            return Err(Violation::DifferentExecutions { op, node, id, reported: digest, earlier });
        }
        self.decided.trim();
        Ok(())
    }
}

impl Default for LogAgreement {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for LogAgreement {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        self.check(node, observation).map_err(|violation| violation.to_string())
    }
}

/// A digest of what executing an entry did: `applied` (false: skipped as a duplicate) and the
/// result the replica got (a duplicate's cached result, if any). Deterministic replicas that
/// executed the same log get the same digest; it is never [`NOT_EXECUTED`]. Allocates nothing:
/// each piece is hashed in one shot, seeded with the digest so far.
pub fn execution_digest(applied: bool, result: Option<&CommandResult>) -> u64 {
    let mut digest = xxh3_64(&[u8::from(applied), u8::from(result.is_some())]);
    if let Some(result) = result {
        digest = result_digest(digest, result);
    }
    digest.max(NOT_EXECUTED + 1)
}

/// Chains `result` onto `digest`: each variant with its own tag, every byte string with its
/// length (so that no two results chain the same pieces).
fn result_digest(digest: u64, result: &CommandResult) -> u64 {
    let piece = |digest: u64, bytes: &[u8]| xxh3_64_with_seed(bytes, digest);
    let bytes = |digest: u64, bytes: &[u8]| piece(piece(digest, &(bytes.len() as u64).to_le_bytes()), bytes);
    match result {
        CommandResult::Ok => piece(digest, &[0]),
        CommandResult::Nil => piece(digest, &[1]),
        CommandResult::Value(value) => bytes(piece(digest, &[2]), value),
        CommandResult::Integer(integer) => piece(piece(digest, &[3]), &integer.to_le_bytes()),
        CommandResult::Values(values) => {
            let count = piece(piece(digest, &[4]), &(values.len() as u64).to_le_bytes());
            values.iter().fold(count, |digest, value| match value {
                Some(value) => bytes(piece(digest, &[1]), value),
                None => piece(digest, &[0]),
            })
        }
        CommandResult::Error(message) => bytes(piece(digest, &[5]), message.as_bytes()),
        CommandResult::Results(results) => {
            let count = piece(piece(digest, &[6]), &(results.len() as u64).to_le_bytes());
            results.iter().fold(count, result_digest)
        }
        CommandResult::Versions(versions) => {
            let count = piece(piece(digest, &[7]), &(versions.len() as u64).to_le_bytes());
            versions.iter().fold(count, |digest, version| piece(digest, &version.to_le_bytes()))
        }
    }
}
