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
//! [`SlotAgreement`] keeps the first value reported per slot and flags any other. Slot numbers
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
}

/// Two values committed at one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The slot.
    pub slot: u64,
    /// The node whose report conflicts.
    pub node: NodeId,
    /// What it reported.
    pub reported: Option<RequestId>,
    /// What was reported there before.
    pub earlier: Option<RequestId>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |id: Option<RequestId>| id.map_or("NO-OP".to_string(), |id| format!("{id:?}"));
        write!(
            f,
            "slot agreement: {} reports {} committed at slot {}, where {} was committed",
            self.node,
            show(self.reported),
            self.slot,
            show(self.earlier)
        )
    }
}

/// The checker: one value per slot.
#[derive(Debug)]
pub struct SlotAgreement {
    decided: SlotWindow<Option<RequestId>>,
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
        let Observation::Committed { slot, id } = *observation;
        assert!(slot > 0, "slots start at 1");
        let Some(earlier) = self.decided.entry(slot, || id) else { return Ok(()) };
        if *earlier != id {
            return Err(Violation { slot, node, reported: id, earlier: *earlier });
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
        assert_eq!(violation, Violation { slot: 3, node: NodeId(1), reported: None, earlier: id(1) });
        assert!(violation.to_string().contains("NO-OP committed at slot 3"));
        let other = checker.check(NodeId(2), &committed(4, id(2))).unwrap_err();
        assert_eq!(other.earlier, None);
        assert_eq!(checker.len(), 2);
    }
}
