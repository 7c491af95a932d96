//! SwiftPaxos^reads (§4.4, §5.6; spec scenario 30): a read-only command runs speculatively at
//! the fast-quorum replica closest to its client, the *reader*, rather than at the leader, so
//! reads spread over the fast quorum instead of saturating the leader.
//!
//! The reader answers with a `Reply` that carries its own dependencies and paths and the read's
//! result over them; the leader sends the client a plain `FastAck` instead of its `Reply`. The
//! client takes the reader's result on the fast path only: when the leader and every other
//! member of a fast quorum report the reader's paths. Then the read commits with the reader's
//! dependencies (the leader's equal them, and Prop 10 keeps what a fast quorum matched), and the
//! reader computed the result over exactly what precedes the read in that order:
//!
//! - its executed state holds only commands ordered before the read (a command executed here
//!   before the read arrived cannot depend on it);
//! - the unexecuted commands below the read are applied in dependency order, following each
//!   command's dependencies as the reader knows them: its own proposal where it is still
//!   pre-accepted (the matching paths say the leader proposed the same), the leader's where it
//!   accepted or committed it (Inv 13: the accepted graph is the leader's);
//! - a conflicting command outside that closure depends on the read, as every pair of
//!   committed conflicting commands is ordered one way (Inv 2), so it runs after it.
//!
//! Where the reader cannot compute the result (a payload or a dependency set it lacks, a cycle
//! in its local view, a closure over [`CLOSURE_MAX`] commands) it sends a `FastAck` like any
//! follower. Where the client cannot take the fast path, the reader answers after executing
//! the read (`Executed`); a co-located client gets that answer anyway. The paper is silent on
//! both; `docs/protocols/swiftpaxos.md` records the choice. The option is `reads` (off by
//! default, as the paper's base protocol).

use super::messages::Message;
use super::quorums::Quorums;
use super::replica::Replica;
use super::{Config, Flaw, Variant};
use crate::executor::graph::CommandStatus;
use ordo_core::{Command, CommandResult, NodeId, RequestId, Topology};
use std::collections::BTreeSet;

/// Most unexecuted commands a reader replays below a read; beyond, it answers after execution.
pub const CLOSURE_MAX: usize = 1_024;

/// What the reader told a read's client when the read arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// A speculative result in ballot `ballot`, over dependencies whose paths digest is `paths`.
    Answered {
        /// The ballot of the Reply.
        ballot: u64,
        /// The digest of the reader's paths.
        paths: u64,
    },
    /// No result: the client waits for the read's execution here.
    Deferred,
}

/// Whether `command` is a read that a reader serves instead of the leader (`reads` is on, and
/// the variant has fast quorums).
pub fn delegates(config: &Config, variant: Variant, command: &Command) -> bool {
    config.reads && variant.has_fast_path() && command.is_read_only()
}

/// The rank of the replica that serves `client`'s reads in `ballot`: the fast-quorum member
/// closest to it; among equally close members, one chosen by the client's index, so that the
/// clients of a LAN spread over the whole fast quorum. Replicas and clients compute the same.
pub fn reader(quorums: &Quorums, topology: &Topology, replicas: &[NodeId], client: NodeId, ballot: u64) -> usize {
    let distance = |rank: usize| {
        if client.index() >= topology.nodes.len() {
            return 0;
        }
        topology.delay_ns(client, replicas[rank])
    };
    let members: Vec<(u64, usize)> = (0..quorums.n)
        .filter(|&rank| quorums.is_fast_member(rank, ballot))
        .map(|rank| (distance(rank), rank))
        .collect();
    let nearest = members.iter().map(|&(delay, _)| delay).min().expect("the leader is a fast member");
    let tied: Vec<usize> = members.iter().filter(|&&(delay, _)| delay == nearest).map(|&(_, rank)| rank).collect();
    tied[client.index() % tied.len()]
}

/// Orders the unexecuted commands below `deps` dependencies first. `view(id)` gives a
/// command's payload and dependencies here, `None` when unknown; `executed(id)` whether it ran
/// here already (its effect is in the state, and so is everything below it). `None` when some
/// command below is unknown, the local view has a cycle, or the closure exceeds `CLOSURE_MAX`.
pub fn closure_order<'a>(
    deps: &BTreeSet<RequestId>,
    view: impl Fn(RequestId) -> Option<(&'a Command, &'a BTreeSet<RequestId>)>,
    executed: impl Fn(RequestId) -> bool,
) -> Option<Vec<RequestId>> {
    // Iterative depth-first walk; `open` marks commands on the current path (a cycle).
    let mut order = Vec::new();
    let mut done: BTreeSet<RequestId> = BTreeSet::new();
    let mut open: BTreeSet<RequestId> = BTreeSet::new();
    let mut stack: Vec<(RequestId, bool)> = deps.iter().rev().map(|&id| (id, false)).collect();
    while let Some((id, expanded)) = stack.pop() {
        if expanded {
            open.remove(&id);
            done.insert(id);
            order.push(id);
            continue;
        }
        if done.contains(&id) || executed(id) {
            continue;
        }
        if open.contains(&id) {
            return None;
        }
        let (_, below) = view(id)?;
        if done.len() + open.len() >= CLOSURE_MAX {
            return None;
        }
        open.insert(id);
        stack.push((id, true));
        for &dep in below.iter().rev() {
            if open.contains(&dep) {
                return None;
            }
            if !done.contains(&dep) {
                stack.push((dep, false));
            }
        }
    }
    Some(order)
}

impl Replica {
    /// The reader of `command` in `ballot` when reads are delegated and `command` is one.
    pub(crate) fn reads_reader(&self, client: NodeId, command: &Command, ballot: u64) -> Option<usize> {
        delegates(&self.config, self.variant, command)
            .then(|| reader(&self.quorums, &self.topology, &self.peers, client, ballot))
    }

    /// Our answer to the client of the read `id` we serve, proposed just now with `deps` and
    /// paths digest `paths`: a Reply with its speculative result, or `None` when we cannot
    /// compute one (the client then gets our FastAck and waits for the execution here).
    pub(crate) fn serve_read(
        &mut self,
        id: RequestId,
        command: &Command,
        deps: &BTreeSet<RequestId>,
        paths: u64,
    ) -> Option<Message> {
        let ballot = self.ballots.bal;
        let result = self.speculative_read(id, command, deps);
        let instance = self.instances.get_mut(&id).expect("proposed just now");
        let Some(result) = result else {
            instance.served_read = Some(Served::Deferred);
            self.stats.count("read_deferred");
            return None;
        };
        instance.served_read = Some(Served::Answered { ballot, paths });
        self.stats.count("read_served");
        Some(Message::Reply { ballot, id, deps: deps.iter().copied().collect(), paths, result })
    }

    /// Whether the client of `id`, a read we serve, may still wait for its result now that it
    /// ran here: we gave it none, or we cannot tell that the leader and a fast quorum reported
    /// our paths in that ballot (without them the client cannot take ours).
    pub(crate) fn read_unanswered(&self, id: RequestId) -> bool {
        let Some(instance) = self.instances.get(&id) else { return false };
        let Some(Served::Answered { ballot, paths }) = instance.served_read else {
            return instance.served_read == Some(Served::Deferred);
        };
        let votes = &instance.votes;
        let same_ballot = self.ballots.bal == ballot && votes.ballot == ballot;
        let matched = |rank: usize| rank == self.rank || votes.fast.get(&rank).is_some_and(|(_, p)| *p == paths);
        !(same_ballot && instance.leader_paths == Some(paths) && self.quorums.fast_quorum_met(ballot, matched))
    }

    /// The read `id`'s result over the state here and the unexecuted commands below `deps`, in
    /// dependency order, on a fork of the keys involved; `None` when it cannot be computed here.
    pub(crate) fn speculative_read(
        &self,
        id: RequestId,
        command: &Command,
        deps: &BTreeSet<RequestId>,
    ) -> Option<CommandResult> {
        let view = |other: RequestId| {
            let instance = self.instances.get(&other)?;
            Some((instance.command.as_ref()?, instance.deps.as_ref()?))
        };
        let executed = |other: RequestId| self.execution.executor.status(other) == CommandStatus::Executed;
        let order = if self.flaw == Flaw::StaleRead {
            // The canary answers from its executed state alone.
            Vec::new()
        } else {
            closure_order(deps, view, executed)?
        };
        let writes: Vec<&Command> = order
            .iter()
            .map(|other| self.instances[other].command.as_ref().expect("ordered commands are known"))
            .filter(|other| !other.is_read_only())
            .collect();
        let mut keys = command.keys();
        for write in &writes {
            keys.extend(write.keys());
        }
        keys.sort_unstable();
        keys.dedup();
        let mut fork = self.execution.fork(&keys);
        for (other, write) in order.iter().zip(writes) {
            fork.apply(*other, write);
        }
        Some(fork.apply(id, command))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::ClientId;
    use std::collections::BTreeMap;

    fn id(number: u64) -> RequestId {
        RequestId { client: ClientId(1), number }
    }

    fn set(key: &'static str) -> Command {
        Command::set(key, "v")
    }

    #[test]
    fn closure_orders_dependencies_first_and_stops_at_executed_commands() {
        let commands: BTreeMap<RequestId, (Command, BTreeSet<RequestId>)> = [
            (id(1), (set("a"), BTreeSet::new())),
            (id(2), (set("a"), BTreeSet::from([id(1)]))),
            (id(3), (set("a"), BTreeSet::from([id(2), id(1)]))),
        ]
        .into();
        let view = |other: RequestId| commands.get(&other).map(|(c, d)| (c, d));
        let order = closure_order(&BTreeSet::from([id(3)]), view, |_| false).expect("known and acyclic");
        assert_eq!(order, vec![id(1), id(2), id(3)]);
        let order = closure_order(&BTreeSet::from([id(3)]), view, |other| other == id(1)).expect("acyclic");
        assert_eq!(order, vec![id(2), id(3)], "an executed command and what lies below it are in the state");
    }

    #[test]
    fn closure_refuses_cycles_and_unknown_commands() {
        let commands: BTreeMap<RequestId, (Command, BTreeSet<RequestId>)> = [
            (id(1), (set("a"), BTreeSet::from([id(2)]))),
            (id(2), (set("a"), BTreeSet::from([id(1)]))),
            (id(3), (set("a"), BTreeSet::from([id(9)]))),
        ]
        .into();
        let view = |other: RequestId| commands.get(&other).map(|(c, d)| (c, d));
        assert_eq!(closure_order(&BTreeSet::from([id(1)]), view, |_| false), None, "a cycle");
        assert_eq!(closure_order(&BTreeSet::from([id(3)]), view, |_| false), None, "an unknown command");
    }
}
