//! The §8.3 invariants that span replicas (spec §8.3), checked on every observation:
//!
//! - **Agreement** (Theorem 1, invariant 1): one value per committed slot, and one result
//!   digest per executed slot, across replicas and views.
//! - **Proposal uniqueness** (Fact 1, Claim 4, invariant 2): one value per (slot, view).
//! - **Election safety** (Claim 2, invariant 3): each replica votes at most once per view (for
//!   one candidate), and each view has at most one initiator; so at most one view-init
//!   (Claim 3, invariant 4).
//! - **Initiator completeness** (Claim 14, invariant 7): when a replica becomes initiator, its
//!   log holds every slot committed so far, with the committed value.
//!
//! Local invariants (5, 8, 9, 10) are asserted in the replica itself. Memory: the newest
//! [`SLOTS_WINDOW`] slots and [`VIEWS_WINDOW`] views; older reports are accepted unchecked.

use super::messages::ValueId;
use ordo_core::{GlobalChecker, NodeId, Protocol};
use std::collections::BTreeMap;

/// Most slots remembered.
pub const SLOTS_WINDOW: u64 = 1 << 17;
/// Most views remembered.
pub const VIEWS_WINDOW: u64 = 4096;

/// A fact a Chora replica reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// A replica proposed `value` at `slot` in `view` (its own slot, or a view-init).
    Proposed {
        /// The slot.
        slot: u64,
        /// The view.
        view: u64,
        /// The value.
        value: ValueId,
        /// The proposer's rank.
        owner: u32,
    },
    /// A replica committed (and is about to execute) `value` at `slot`.
    Committed {
        /// The slot.
        slot: u64,
        /// The value.
        value: ValueId,
    },
    /// A replica executed `slot`; `digest` covers its results.
    Executed {
        /// The slot.
        slot: u64,
        /// Digest of the slot's results.
        digest: u64,
    },
    /// `voter` voted for `candidate` in `view` (a candidate votes for itself).
    Vote {
        /// The view.
        view: u64,
        /// Voter rank.
        voter: u32,
        /// Candidate rank.
        candidate: u32,
    },
    /// `rank` became the initiator of `view`; its log above its commit point.
    Initiator {
        /// The view.
        view: u64,
        /// Its rank.
        rank: u32,
        /// Its last-commit.
        last_commit: u64,
        /// Its last-append.
        last_append: u64,
        /// Its entries in `last_commit + 1 ..= last_append`.
        entries: Vec<(u64, ValueId)>,
    },
}

/// The checker.
#[derive(Debug, Default)]
pub struct ChoraChecker {
    committed: BTreeMap<u64, ValueId>,
    executed: BTreeMap<u64, u64>,
    proposed: BTreeMap<(u64, u64), ValueId>,
    votes: BTreeMap<(u64, u32), u32>,
    initiators: BTreeMap<u64, u32>,
    highest_slot: u64,
    highest_view: u64,
    unchecked: u64,
}

impl ChoraChecker {
    /// An empty checker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports accepted unchecked (below the windows).
    pub fn unchecked(&self) -> u64 {
        self.unchecked
    }

    fn slot_forgotten(&mut self, slot: u64) -> bool {
        self.highest_slot = self.highest_slot.max(slot);
        let floor = self.highest_slot.saturating_sub(SLOTS_WINDOW);
        if slot < floor {
            self.unchecked += 1;
            return true;
        }
        if self.committed.first_key_value().is_some_and(|(&s, _)| s < floor) {
            self.committed = self.committed.split_off(&floor);
            self.executed = self.executed.split_off(&floor);
            self.proposed = self.proposed.split_off(&(floor, 0));
        }
        false
    }

    fn view_forgotten(&mut self, view: u64) -> bool {
        self.highest_view = self.highest_view.max(view);
        let floor = self.highest_view.saturating_sub(VIEWS_WINDOW);
        if view < floor {
            self.unchecked += 1;
            return true;
        }
        if self.initiators.first_key_value().is_some_and(|(&v, _)| v < floor) {
            self.initiators = self.initiators.split_off(&floor);
            self.votes = self.votes.split_off(&(floor, 0));
        }
        false
    }

    /// Takes one report from `node`.
    pub fn check(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        match observation {
            Observation::Proposed { slot, view, value, owner } => {
                if self.slot_forgotten(*slot) {
                    return Ok(());
                }
                let earlier = self.proposed.entry((*slot, *view)).or_insert_with(|| value.clone());
                if earlier != value {
                    return Err(format!(
                        "proposal uniqueness: {node} (rank {owner}) proposed {value:?} at slot {slot} in view {view}, where {earlier:?} was proposed"
                    ));
                }
            }
            Observation::Committed { slot, value } => {
                if self.slot_forgotten(*slot) {
                    return Ok(());
                }
                let earlier = self.committed.entry(*slot).or_insert_with(|| value.clone());
                if earlier != value {
                    return Err(format!(
                        "agreement: {node} committed {value:?} at slot {slot}, where {earlier:?} was committed"
                    ));
                }
            }
            Observation::Executed { slot, digest } => {
                if self.slot_forgotten(*slot) {
                    return Ok(());
                }
                let earlier = *self.executed.entry(*slot).or_insert(*digest);
                if earlier != *digest {
                    return Err(format!(
                        "agreement: {node} executed slot {slot} with results {digest:#x}, others {earlier:#x}"
                    ));
                }
            }
            Observation::Vote { view, voter, candidate } => {
                if self.view_forgotten(*view) {
                    return Ok(());
                }
                let earlier = *self.votes.entry((*view, *voter)).or_insert(*candidate);
                if earlier != *candidate {
                    return Err(format!(
                        "election safety: rank {voter} voted for {candidate} and {earlier} in view {view}"
                    ));
                }
            }
            Observation::Initiator { view, rank, last_commit, last_append, entries } => {
                if self.view_forgotten(*view) {
                    return Ok(());
                }
                let earlier = *self.initiators.entry(*view).or_insert(*rank);
                if earlier != *rank {
                    return Err(format!("election safety: ranks {earlier} and {rank} both initiate view {view}"));
                }
                let held: BTreeMap<u64, &ValueId> = entries.iter().map(|(slot, value)| (*slot, value)).collect();
                for (slot, value) in self.committed.range(last_commit + 1..) {
                    if *slot > *last_append || held.get(slot) != Some(&value) {
                        return Err(format!(
                            "initiator completeness: rank {rank} initiates view {view} without slot {slot}'s committed {value:?} (it holds {:?})",
                            held.get(slot)
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for ChoraChecker {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        self.check(node, observation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::{ClientId, RequestId};

    fn request(number: u64) -> ValueId {
        ValueId::Requests(vec![RequestId { client: ClientId(9), number }])
    }

    #[test]
    fn two_values_at_one_slot_are_a_violation() {
        // Goal: the agreement check can fail (STYLE 15). Method: two replicas commit different
        // values at slot 4; repeats and other slots pass.
        let mut checker = ChoraChecker::new();
        let committed = |slot, value| Observation::Committed { slot, value };
        assert!(checker.check(NodeId(0), &committed(4, request(1))).is_ok());
        assert!(checker.check(NodeId(1), &committed(4, request(1))).is_ok());
        assert!(checker.check(NodeId(1), &committed(5, ValueId::NoOp)).is_ok());
        let error = checker.check(NodeId(2), &committed(4, ValueId::NoOp)).unwrap_err();
        assert!(error.starts_with("agreement"), "{error}");
        let executed = |digest| Observation::Executed { slot: 4, digest };
        assert!(checker.check(NodeId(0), &executed(1)).is_ok());
        assert!(checker.check(NodeId(2), &executed(2)).unwrap_err().starts_with("agreement"));
    }

    #[test]
    fn double_votes_two_initiators_and_two_proposals_are_violations() {
        // Goal: election safety and proposal uniqueness can fail.
        let mut checker = ChoraChecker::new();
        let vote = |voter, candidate| Observation::Vote { view: 3, voter, candidate };
        assert!(checker.check(NodeId(0), &vote(0, 0)).is_ok());
        assert!(checker.check(NodeId(1), &vote(1, 0)).is_ok());
        assert!(checker.check(NodeId(1), &vote(1, 2)).unwrap_err().starts_with("election safety"));
        let initiator =
            |rank| Observation::Initiator { view: 3, rank, last_commit: 0, last_append: 0, entries: Vec::new() };
        assert!(checker.check(NodeId(0), &initiator(0)).is_ok());
        assert!(checker.check(NodeId(2), &initiator(2)).unwrap_err().starts_with("election safety"));
        let proposed = |value| Observation::Proposed { slot: 7, view: 3, value, owner: 1 };
        assert!(checker.check(NodeId(1), &proposed(request(1))).is_ok());
        assert!(checker.check(NodeId(1), &proposed(ValueId::NoOp)).unwrap_err().starts_with("proposal uniqueness"));
    }

    #[test]
    fn an_initiator_missing_a_committed_slot_is_a_violation() {
        // Goal: initiator completeness can fail. Method: slot 5 committed; an initiator whose
        // log stops at 4, and one holding another value at 5.
        let mut checker = ChoraChecker::new();
        assert!(checker.check(NodeId(0), &Observation::Committed { slot: 5, value: request(1) }).is_ok());
        let initiator =
            |view, last_append, entries| Observation::Initiator { view, rank: 1, last_commit: 3, last_append, entries };
        let short = checker.check(NodeId(1), &initiator(1, 4, vec![(4, ValueId::NoOp)]));
        assert!(short.unwrap_err().starts_with("initiator completeness"));
        let other = checker.check(NodeId(1), &initiator(2, 5, vec![(4, ValueId::NoOp), (5, ValueId::NoOp)]));
        assert!(other.unwrap_err().starts_with("initiator completeness"));
        assert!(checker.check(NodeId(1), &initiator(3, 5, vec![(4, ValueId::NoOp), (5, request(1))])).is_ok());
    }
}
