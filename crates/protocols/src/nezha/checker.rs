//! Agreement on committed log positions across replicas (Nezha, NSDI 2023, App. B.1: a committed
//! request stays at its log position in every later view), checked from the facts replicas
//! report, not from their final state.
//!
//! What is compared: positions are absolute. A checkpoint folds positions `1..=p` into state but
//! numbering goes on from `p + 1`; a view change, a state transfer and a rejoin adopt an image
//! whose checkpoint carries its own absolute position. So "position `k` holds request `r`" means
//! the same at every replica, in every view and incarnation.
//!
//! When a position is final: not when a follower syncs it (a view change keeps only the longest
//! synced prefix among f + 1 voters of the latest normal view, so a position synced at a
//! minority may be rebuilt), but when it lies under the commit point: f + 1 sync-points of one
//! view (the leader's `SyncAck` count), or a commit point a leader, a `StartView` or a state
//! transfer handed on. Replicas report [`Observation::Committed`] for each synced position their
//! commit point newly covers (`Replica::commit_through`, `Replica::adopt`). A leader executes on
//! append, ahead of the commit point, so executions are not reported.
//!
//! [`PositionAgreement`] keeps, per position, the request first reported there; a report of
//! another request there is a [`Violation`]. Repeats (after a view change or a rejoin a replica
//! reports its committed positions again) are accepted. The same request at two positions is
//! not a violation: a retry with a new deadline may reach the log twice, and execution skips the
//! second copy everywhere alike.
//!
//! Memory: the newest [`POSITIONS_WINDOW`] positions reported (2^19; a `BTreeMap` of 16-byte
//! values, about 24 MB when full). When it is full the lowest position is forgotten; a later
//! report below the window is accepted unchecked and counted in
//! [`PositionAgreement::unchecked`]. A one-second simulation commits far fewer.

use crate::slot_window::SlotWindow;
use ordo_core::{GlobalChecker, NodeId, Protocol, RequestId};
use std::fmt;

/// Most positions the checker remembers (see the module docs).
pub const POSITIONS_WINDOW: usize = 1 << 19;

/// A fact a Nezha replica reports to the global checker. It carries an id, not a command, so
/// building one allocates nothing (the real runtime drops them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Synced position `position` holds request `id` and lies under this replica's commit point.
    Committed {
        /// The absolute log position.
        position: u64,
        /// The request there.
        id: RequestId,
    },
}

/// Two reports that cannot both be true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two requests committed at one position.
    DifferentRequests {
        /// The position.
        position: u64,
        /// The replica whose report conflicts.
        node: NodeId,
        /// What it reported there.
        reported: RequestId,
        /// What was reported there before.
        earlier: RequestId,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Violation::DifferentRequests { position, node, reported, earlier } = self;
        write!(
            f,
            "position agreement: {node} reports {reported:?} committed at position {position}, \
             where {earlier:?} was committed"
        )
    }
}

/// The agreement checker: no two reports put different requests at one position.
#[derive(Debug)]
pub struct PositionAgreement {
    /// The request committed at each position, the newest [`POSITIONS_WINDOW`] (fewer in tests).
    committed: SlotWindow<RequestId>,
}

impl Default for PositionAgreement {
    fn default() -> Self {
        Self::new()
    }
}

impl PositionAgreement {
    /// A checker that knows nothing yet and remembers [`POSITIONS_WINDOW`] positions.
    pub fn new() -> Self {
        Self::with_window(POSITIONS_WINDOW)
    }

    /// A checker that remembers `window` positions (tests use a small one).
    pub fn with_window(window: usize) -> Self {
        PositionAgreement { committed: SlotWindow::new(window) }
    }

    /// Reports accepted without comparison because their position lay below the window.
    pub fn unchecked(&self) -> u64 {
        self.committed.unchecked()
    }

    /// Positions remembered.
    pub fn len(&self) -> usize {
        self.committed.len()
    }

    /// True before the first report.
    pub fn is_empty(&self) -> bool {
        self.committed.is_empty()
    }

    /// Takes one report from `node`.
    pub fn check(&mut self, node: NodeId, observation: &Observation) -> Result<(), Violation> {
        let Observation::Committed { position, id } = *observation;
        assert!(position > 0, "positions start at 1");
        let Some(&mut earlier) = self.committed.entry(position, || id) else { return Ok(()) };
        if earlier != id {
            return Err(Violation::DifferentRequests { position, node, reported: id, earlier });
        }
        self.committed.trim();
        Ok(())
    }
}

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for PositionAgreement {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        self.check(node, observation).map_err(|violation| violation.to_string())
    }
}
