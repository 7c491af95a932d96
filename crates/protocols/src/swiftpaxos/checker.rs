//! Spec §7.4, invariants that span nodes, checked after every simulated step:
//!
//! - **Inv 1**: every replica commits a command with the same dependencies, in any ballot.
//! - **Inv 7**: the leader of a ballot proposes one dependency set per command (its FastAck
//!   and its Sync agree).
//! - **Inv 14 / Prop 10**: when a client takes the leader's optimistic result of ballot `b`
//!   (fast or slow rule), the command and everything it transitively depends on in the leader's
//!   graph of `b` must commit with the leader's dependencies. This is what the path check of
//!   §3.5 buys; a client that compares direct dependencies only breaks it (scenario 6).
//! - **Nontriviality**: every replica that executes a command gets the same result, and a
//!   client's result (optimistic or executed) equals it.

use ordo_core::{GlobalChecker, NodeId, RequestId};
use std::collections::{BTreeMap, BTreeSet};

/// A fact a SwiftPaxos node reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The leader of `ballot` proposed `deps` for `id` (FastAck) or installed them (Sync).
    LeaderDeps {
        /// The ballot.
        ballot: u64,
        /// The command.
        id: RequestId,
        /// The dependencies, sorted.
        deps: Vec<RequestId>,
    },
    /// A replica committed `id` with `deps`.
    Committed {
        /// The command.
        id: RequestId,
        /// Its dependencies, sorted.
        deps: Vec<RequestId>,
    },
    /// A replica executed `id`; `digest` is its result's digest.
    Executed {
        /// The command.
        id: RequestId,
        /// `execution_digest(true, Some(result))`.
        digest: u64,
    },
    /// A client took the leader's optimistic result of `ballot`.
    Accepted {
        /// The ballot of the Reply.
        ballot: u64,
        /// The command.
        id: RequestId,
        /// The result's digest.
        digest: u64,
    },
    /// A client took a replica's executed result.
    Delivered {
        /// The command.
        id: RequestId,
        /// The result's digest.
        digest: u64,
    },
}

/// The global checker of SwiftPaxos.
#[derive(Debug, Default)]
pub struct SwiftChecker {
    /// Inv 1: the first committed dependencies of each command.
    decided: BTreeMap<RequestId, Vec<RequestId>>,
    /// Inv 7: the leader's dependencies per (ballot, command).
    leader: BTreeMap<(u64, RequestId), Vec<RequestId>>,
    /// Inv 14: dependencies a command must commit with, since a client relied on them.
    required: BTreeMap<RequestId, Vec<RequestId>>,
    /// (ballot, command) pairs whose leader graph was walked already.
    walked: BTreeSet<(u64, RequestId)>,
    /// Nontriviality: the first result digest known per command.
    results: BTreeMap<RequestId, u64>,
}

impl SwiftChecker {
    fn result(&mut self, id: RequestId, digest: u64, who: &str) -> Result<(), String> {
        match self.results.get(&id) {
            Some(&known) if known != digest => {
                Err(format!("Nontriviality: {who} result of {id:?} differs from an earlier result of it"))
            }
            Some(_) => Ok(()),
            None => {
                self.results.insert(id, digest);
                Ok(())
            }
        }
    }

    fn require(&mut self, id: RequestId, deps: &[RequestId]) -> Result<(), String> {
        if let Some(required) = self.required.get(&id)
            && required != deps
        {
            return Err(format!("Inv 14: {id:?} is required with {required:?} and with {deps:?}"));
        }
        if let Some(decided) = self.decided.get(&id)
            && decided != deps
        {
            return Err(format!(
                "Inv 14: a client relied on {id:?} committing with {deps:?}, but it committed with {decided:?}"
            ));
        }
        self.required.insert(id, deps.to_vec());
        Ok(())
    }

    /// A client relied on ballot `ballot`'s leader graph below `id`.
    fn accepted(&mut self, ballot: u64, id: RequestId) -> Result<(), String> {
        let mut stack = vec![id];
        while let Some(at) = stack.pop() {
            if !self.walked.insert((ballot, at)) {
                continue;
            }
            let Some(deps) = self.leader.get(&(ballot, at)).cloned() else { continue };
            self.require(at, &deps)?;
            stack.extend(deps);
        }
        Ok(())
    }

    fn check(&mut self, observation: &Observation) -> Result<(), String> {
        match observation {
            Observation::LeaderDeps { ballot, id, deps } => match self.leader.get(&(*ballot, *id)) {
                Some(known) if known != deps => {
                    Err(format!("Inv 7: the leader of ballot {ballot} proposed {known:?} and {deps:?} for {id:?}"))
                }
                Some(_) => Ok(()),
                None => {
                    self.leader.insert((*ballot, *id), deps.clone());
                    Ok(())
                }
            },
            Observation::Committed { id, deps } => {
                if let Some(decided) = self.decided.get(id) {
                    if decided != deps {
                        return Err(format!("Inv 1: {id:?} committed with {decided:?} and with {deps:?}"));
                    }
                    return Ok(());
                }
                if let Some(required) = self.required.get(id)
                    && required != deps
                {
                    return Err(format!(
                        "Inv 14: a client relied on {id:?} committing with {required:?}, but it committed with {deps:?}"
                    ));
                }
                self.decided.insert(*id, deps.clone());
                Ok(())
            }
            Observation::Executed { id, digest } => self.result(*id, *digest, "an executed"),
            Observation::Accepted { ballot, id, digest } => {
                self.accepted(*ballot, *id)?;
                self.result(*id, *digest, "the optimistic")
            }
            Observation::Delivered { id, digest } => self.result(*id, *digest, "a delivered"),
        }
    }
}

/// The same rules for every protocol built from SwiftPaxos' nodes (SwiftPaxos, N²Paxos).
impl<P: ordo_core::Protocol<Observation = Observation>> GlobalChecker<P> for SwiftChecker {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        self.check(observation).map_err(|violation| format!("{violation} (reported by node {node})"))
    }
}
