//! Paper §5.4 (and spec invariant I1): at most one value — a REQUEST or a NO-OP — is ever
//! committed in a log slot, across all replicas, views and sessions.
//!
//! Reports come from every node that learns a slot is committed:
//! - a client accepting f + 1 matching replies with the leader's (the request is committed at
//!   the slot the replies name);
//! - a leader that received f GAP-COMMIT-REPs (the NO-OP is committed);
//! - a replica whose sync-point passes a slot (every slot up to it is committed, I12), with the
//!   value its log holds there.
//!
//! It also checks that a committed request's result is the same wherever it is known: the
//! result a client accepted (the leader's) and the result every replica computes when it
//! executes the slot under its sync-point ([`Observation::Executed`]). A committed slot's
//! log prefix is committed too (§5.4), so every execution of it starts from the same state;
//! a leader that ran ahead of an undecided prefix breaks it.
//!
//! [`SlotAgreement`] keeps the first value and result reported per slot and flags any other. Slot numbers
//! are the log's positions, which never change across view changes, so the rule holds across
//! views. Memory: the newest [`SLOTS_WINDOW`] slots (`slot_window`); reports below are
//! accepted unchecked and counted.

use crate::slot_window::SlotWindow;
use ordo_core::{GlobalChecker, NodeId, Protocol, RequestId};
use std::fmt;

/// Most slots the checker remembers.
pub const SLOTS_WINDOW: usize = 1 << 19;

/// A fact a NOPaxos node reports to the global checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The value at `slot` is committed: request `id`, or a NO-OP when `None`.
    Committed {
        /// The log slot (from 1).
        slot: u64,
        /// The request, `None` for a NO-OP.
        id: Option<RequestId>,
    },
    /// The committed request `id` at `slot` produced a result with digest `digest`
    /// (`multipaxos::checker::execution_digest(true, Some(result))`).
    Executed {
        /// The log slot.
        slot: u64,
        /// The request.
        id: RequestId,
        /// Digest of its result.
        digest: u64,
    },
}

/// Two reports that cannot both be true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two values committed at one slot.
    DifferentValues {
        /// The slot.
        slot: u64,
        /// The node whose report conflicts.
        node: NodeId,
        /// What it reported.
        reported: Option<RequestId>,
        /// What was reported there before.
        earlier: Option<RequestId>,
    },
    /// One committed request with two results.
    DifferentResults {
        /// The slot.
        slot: u64,
        /// The node whose report conflicts.
        node: NodeId,
        /// Its result digest.
        reported: u64,
        /// The digest reported before.
        earlier: u64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |id: &Option<RequestId>| id.map_or("NO-OP".to_string(), |id| format!("{id:?}"));
        match self {
            Violation::DifferentValues { slot, node, reported, earlier } => write!(
                f,
                "slot agreement: {node} reports {} committed at slot {slot}, where {} was committed",
                show(reported),
                show(earlier)
            ),
            Violation::DifferentResults { slot, node, reported, earlier } => write!(
                f,
                "slot agreement: {node} reports result {reported:#x} for the request at slot {slot}, others {earlier:#x}"
            ),
        }
    }
}

/// What is known of one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Decided {
    id: Option<RequestId>,
    digest: Option<u64>,
}

/// The checker: one value per slot.
#[derive(Debug)]
pub struct SlotAgreement {
    decided: SlotWindow<Decided>,
}

impl SlotAgreement {
    /// A checker remembering [`SLOTS_WINDOW`] slots.
    pub fn new() -> Self {
        Self::with_window(SLOTS_WINDOW)
    }

    /// A checker remembering `window` slots.
    pub fn with_window(window: usize) -> Self {
        SlotAgreement { decided: SlotWindow::new(window) }
    }

    /// Slots remembered.
    pub fn len(&self) -> usize {
        self.decided.len()
    }

    /// True before the first report.
    pub fn is_empty(&self) -> bool {
        self.decided.is_empty()
    }

    /// Reports accepted unchecked (below the window).
    pub fn unchecked(&self) -> u64 {
        self.decided.unchecked()
    }

    /// Takes one report from `node`.
    pub fn check(&mut self, node: NodeId, observation: &Observation) -> Result<(), Violation> {
        let (slot, id, digest) = match *observation {
            Observation::Committed { slot, id } => (slot, id, None),
            Observation::Executed { slot, id, digest } => (slot, Some(id), Some(digest)),
        };
        assert!(slot > 0, "slots start at 1");
        let Some(decided) = self.decided.entry(slot, || Decided { id, digest }) else { return Ok(()) };
        if decided.id != id {
            return Err(Violation::DifferentValues { slot, node, reported: id, earlier: decided.id });
        }
        match (decided.digest, digest) {
            (Some(earlier), Some(reported)) if earlier != reported => {
                return Err(Violation::DifferentResults { slot, node, reported, earlier });
            }
            (None, Some(_)) => decided.digest = digest,
            _ => {}
        }
        self.decided.trim();
        Ok(())
    }
}

impl Default for SlotAgreement {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for SlotAgreement {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        self.check(node, observation).map_err(|violation| violation.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::ClientId;

    fn id(number: u64) -> Option<RequestId> {
        Some(RequestId { client: ClientId(7), number })
    }

    #[test]
    fn a_request_and_a_no_op_at_one_slot_is_a_violation() {
        // Goal: the checker can fail (STYLE 15). Method: a hand-made history where a client
        // accepted request 1 at slot 3 and a leader later gap-committed a NO-OP there; repeats
        // of the same fact and other slots pass.
        let mut checker = SlotAgreement::new();
        let committed = |slot, id| Observation::Committed { slot, id };
        assert!(checker.check(NodeId(5), &committed(3, id(1))).is_ok());
        assert!(checker.check(NodeId(0), &committed(3, id(1))).is_ok(), "a repeat agrees");
        assert!(checker.check(NodeId(0), &committed(4, None)).is_ok());
        let violation = checker.check(NodeId(1), &committed(3, None)).unwrap_err();
        assert_eq!(violation, Violation::DifferentValues { slot: 3, node: NodeId(1), reported: None, earlier: id(1) });
        assert!(violation.to_string().contains("NO-OP committed at slot 3"));
        let other = checker.check(NodeId(2), &committed(4, id(2))).unwrap_err();
        assert!(matches!(other, Violation::DifferentValues { earlier: None, .. }));
        assert_eq!(checker.len(), 2);
    }

    #[test]
    fn one_request_with_two_results_is_a_violation() {
        // Goal: the result check can fail. Method: a client accepted result digest 10 at slot 5;
        // a replica executing slot 5 under its sync-point got 11; the same digest agrees.
        let mut checker = SlotAgreement::new();
        let executed = |digest| Observation::Executed { slot: 5, id: id(1).unwrap(), digest };
        assert!(checker.check(NodeId(6), &Observation::Committed { slot: 5, id: id(1) }).is_ok());
        assert!(checker.check(NodeId(6), &executed(10)).is_ok());
        assert!(checker.check(NodeId(1), &executed(10)).is_ok());
        let violation = checker.check(NodeId(2), &executed(11)).unwrap_err();
        assert_eq!(violation, Violation::DifferentResults { slot: 5, node: NodeId(2), reported: 11, earlier: 10 });
        assert!(checker.check(NodeId(2), &Observation::Executed { slot: 6, id: id(2).unwrap(), digest: 1 }).is_ok());
        assert!(checker.check(NodeId(2), &Observation::Committed { slot: 6, id: None }).is_err());
    }
}
