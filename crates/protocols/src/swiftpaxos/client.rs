//! The SwiftPaxos client (Figure 3, L1–L5; §3.5): it sends each command to every replica and
//! takes the leader's optimistic result once a fast quorum's followers reported the leader's
//! dependency *paths* (or adopted its proposal), or once a slow quorum's followers adopted it.
//! It also takes the result of an actual execution from any replica (`Executed`: the co-located
//! client's answer, and the answer to a retry of a command that ran). It never mixes ballots.
//! A command unanswered for `client_retry_ns` is sent again with the same id; replicas run an
//! id at most once (L7, and `Exec` never shrinks).

use super::checker::Observation;
use super::messages::{Deps, Message};
use super::quorums::Quorums;
use super::reads;
use super::{Config, Flaw, SwiftPaxos, Timer, Variant};
use crate::client_pipeline::large_command_wait;
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox,
    RequestId, Submission, Topology,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The answer to KEYS, SCAN, DBSIZE, FLUSHDB, FLUSHALL and RANDOMKEY (or a transaction holding
/// one) in SwiftPaxos, CURP+ and N²Paxos, whose conflict index does not yet order a command on
/// every key against every other.
pub const KEYSPACE_REFUSED: &str = concat!(
    "ERR keyspace commands (KEYS, SCAN, DBSIZE, FLUSHDB, FLUSHALL, RANDOMKEY) ",
    "are not supported yet by this protocol, which orders commands by their keys"
);
/// What the client heard in one ballot.
#[derive(Clone, Debug, Default)]
struct View {
    /// The leader's Reply: its dependencies, paths digest and optimistic result.
    reply: Option<(Deps, u64, CommandResult)>,
    /// Followers' FastAcks, by rank.
    fast: BTreeMap<usize, (Deps, u64)>,
    /// Followers' SlowAcks.
    slow: BTreeSet<usize>,
    /// CURP+: witnesses that recorded the command.
    records: BTreeSet<usize>,
}

/// The command the client waits on.
struct Outstanding {
    op: u64,
    id: RequestId,
    command: Command,
    views: BTreeMap<u64, View>,
    /// A read served by the fast-quorum member closest to us (SwiftPaxos^reads, `reads.rs`).
    delegated_read: bool,
    /// The driver gave up on it; it is still sent until it completes (see `Client::queued`).
    abandoned: bool,
    /// Times sent: a large command waits longer after each (`client_pipeline::large_command_wait`).
    sends: u32,
}

/// Ballots a client keeps views of; an older one is dropped (its acks can no longer help once
/// replicas moved on).
const VIEWS_MAX: usize = 8;

/// A SwiftPaxos client.
pub struct Client {
    id: ClientId,
    node: NodeId,
    topology: Arc<Topology>,
    replicas: Destinations,
    quorums: Quorums,
    config: Config,
    variant: Variant,
    flaw: Flaw,
    next_number: u64,
    outstanding: Option<Outstanding>,
    /// A submission waiting for an abandoned command to complete. A client never leaves a
    /// number behind unfinished: each of its commands then runs everywhere or the client died,
    /// which garbage collection needs (`gc.rs`: per client, an executed prefix).
    queued: Option<Submission>,
    stats: NodeStats,
}

impl Client {
    /// A client with nothing outstanding.
    pub(crate) fn new(context: NodeContext<SwiftPaxos>, variant: Variant, flaw: Flaw) -> Self {
        let config = context.config.scaled(&context.topology);
        let quorums = Quorums::new(&context.topology, &config);
        // N²Paxos clients hear only `Executed`: no Reply comes, so the rules below never fire.
        let quorums = if variant.has_fast_path() { quorums } else { quorums.without_fast_path() };
        Client {
            id: context.client_id(),
            node: context.id,
            topology: context.topology.clone(),
            replicas: context.topology.replicas().clone(),
            quorums,
            config,
            variant,
            flaw,
            next_number: 1,
            outstanding: None,
            queued: None,
            stats: NodeStats::default(),
        }
    }

    /// The id this client's commands carry.
    pub fn client_id(&self) -> ClientId {
        self.id
    }

    fn send(&mut self, out: &mut Outbox<SwiftPaxos>) {
        let outstanding = self.outstanding.as_mut().expect("outstanding");
        outstanding.sends = outstanding.sends.saturating_add(1);
        let message = Message::Propagate { id: outstanding.id, command: outstanding.command.clone() };
        out.multicast(&self.replicas, message);
        let large = large_command_wait(outstanding.command.encoded_len(), outstanding.sends);
        let wait = self.config.client_retry_ns.saturating_add(large);
        out.set_timer(Timer::ClientRetry, wait);
    }

    fn view(&mut self, id: RequestId, ballot: u64) -> Result<&mut View, &'static str> {
        let Some(outstanding) = &mut self.outstanding else { return Err("message while nothing is outstanding") };
        if outstanding.id != id {
            return Err("message for a command no longer outstanding");
        }
        if !outstanding.views.contains_key(&ballot) && outstanding.views.len() >= VIEWS_MAX {
            let oldest = *outstanding.views.keys().next().expect("non-empty");
            if oldest > ballot {
                return Err("message of a ballot older than every one kept");
            }
            outstanding.views.remove(&oldest);
        }
        Ok(outstanding.views.entry(ballot).or_default())
    }

    /// CURP+'s fast path (App. B L3–L5): the leader's Reply of `ballot` and record acks of that
    /// ballot from followers that make, with the leader, more than 3N/4 replicas.
    fn maybe_deliver_curp(&mut self, ballot: u64, out: &mut Outbox<SwiftPaxos>) {
        let outstanding = self.outstanding.as_ref().expect("a message for the outstanding command");
        let view = &outstanding.views[&ballot];
        let Some((_, _, result)) = &view.reply else { return };
        let n = self.quorums.n;
        // The leader and the recording followers must be more than 3N/4: 1 + records > ⌊3N/4⌋.
        if view.records.len() < 3 * n / 4 {
            return;
        }
        self.stats.count("client_fast");
        let result = result.clone();
        let (op, id) = (outstanding.op, outstanding.id);
        // Recovery keeps the result, not the leader's exact dependencies: report it as delivered.
        out.observe(Observation::Delivered { id, digest: execution_digest(true, Some(&result)) });
        self.finish(op, result, out);
    }

    /// L3–L5 for ballot `ballot`.
    fn maybe_deliver(&mut self, ballot: u64, out: &mut Outbox<SwiftPaxos>) {
        if self.variant == Variant::Curp {
            return self.maybe_deliver_curp(ballot, out);
        }
        let outstanding = self.outstanding.as_ref().expect("a message for the outstanding command");
        let view = &outstanding.views[&ballot];
        let Some((deps, paths, result)) = &view.reply else { return };
        let (leader, replier) = (self.quorums.leader(ballot), self.replier(ballot));
        let matches = |rank: usize| {
            view.slow.contains(&rank)
                || view.fast.get(&rank).is_some_and(|(their_deps, their_paths)| match self.flaw {
                    // The canary compares direct dependencies only (spec scenario 6).
                    Flaw::DirectDeps => their_deps == deps,
                    _ => their_paths == paths,
                })
        };
        // A read's reader stands in for the leader, whose FastAck must then match its paths.
        let leader_agrees = replier == leader || matches(leader);
        let fast = self.quorums.fast_quorum_met(ballot, |rank| rank == replier || matches(rank));
        let slow = self.quorums.slow_quorum_met(view.slow.len());
        if !(leader_agrees && (fast || slow)) {
            return;
        }
        self.stats.count(if fast { "client_fast" } else { "client_slow" });
        let result = result.clone();
        let (op, id) = (outstanding.op, outstanding.id);
        out.observe(Observation::Accepted { ballot, id, digest: execution_digest(true, Some(&result)) });
        self.finish(op, result, out);
    }

    fn finish(&mut self, op: u64, result: CommandResult, out: &mut Outbox<SwiftPaxos>) {
        let abandoned = self.outstanding.as_ref().is_some_and(|o| o.abandoned);
        if !abandoned {
            out.complete(op, result);
        }
        out.cancel_timer(Timer::ClientRetry);
        self.outstanding = None;
        if let Some(next) = self.queued.take() {
            self.start(next, out);
        }
    }

    fn start(&mut self, submission: Submission, out: &mut Outbox<SwiftPaxos>) {
        let id = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        let delegated_read = reads::delegates(&self.config, self.variant, &submission.command);
        self.outstanding = Some(Outstanding {
            op: submission.op,
            id,
            command: submission.command,
            delegated_read,
            views: BTreeMap::new(),
            abandoned: false,
            sends: 0,
        });
        self.send(out);
    }

    /// The rank whose Reply the outstanding command waits for in `ballot`: the leader, or the
    /// reader of a delegated read.
    fn replier(&self, ballot: u64) -> usize {
        match &self.outstanding {
            Some(outstanding) if outstanding.delegated_read => {
                reads::reader(&self.quorums, &self.topology, &self.replicas, self.node, ballot)
            }
            _ => self.quorums.leader(ballot),
        }
    }

    fn rank(&self, node: NodeId) -> Option<usize> {
        self.replicas.iter().position(|&replica| replica == node)
    }

    fn handle(&mut self, from: NodeId, message: Message, out: &mut Outbox<SwiftPaxos>) -> Result<(), &'static str> {
        let Some(rank) = self.rank(from) else { return Err("message from a node that is not a replica") };
        match message {
            Message::Reply { ballot, id, deps, paths, result } => {
                if self.replier(ballot) != rank {
                    return Err("reply from a replica that neither leads its ballot nor serves the read");
                }
                self.view(id, ballot)?.reply = Some((deps, paths, result));
                self.maybe_deliver(ballot, out);
            }
            Message::FastAck { ballot, id, deps, paths } => {
                if self.replier(ballot) == rank {
                    return Err("the fast ack of the replica that replies");
                }
                self.view(id, ballot)?.fast.insert(rank, (deps, paths));
                self.maybe_deliver(ballot, out);
            }
            Message::RecordAck { ballot, id } => {
                if self.quorums.leader(ballot) == rank {
                    return Err("record ack from the leader");
                }
                self.view(id, ballot)?.records.insert(rank);
                self.maybe_deliver(ballot, out);
            }
            Message::SlowAck { ballot, id } => {
                if self.quorums.leader(ballot) == rank {
                    return Err("slow ack from the leader");
                }
                self.view(id, ballot)?.slow.insert(rank);
                self.maybe_deliver(ballot, out);
            }
            Message::Executed { id, result } => {
                let Some(outstanding) = &self.outstanding else { return Err("result while nothing is outstanding") };
                if outstanding.id != id {
                    return Err("result of a command no longer outstanding");
                }
                self.stats.count("client_executed");
                let op = outstanding.op;
                out.observe(Observation::Delivered { id, digest: execution_digest(true, Some(&result)) });
                self.finish(op, result, out);
            }
            _ => return Err("replica-only message sent to a client"),
        }
        Ok(())
    }
}

impl Node<SwiftPaxos> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<SwiftPaxos>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<SwiftPaxos>) {
        if submission.command.touches_every_key() {
            // The conflict index orders commands by their keys; a command on every key needs
            // its own rule there (issue 23), so until then it is refused before it takes a
            // number, and nothing is sent.
            self.stats.count("client_keyspace_refused");
            out.complete(submission.op, CommandResult::Error(KEYSPACE_REFUSED.into()));
            return;
        }
        if self.outstanding.is_some() || self.queued.is_some() {
            // Only after an abandon: the driver hands a client one submission at a time.
            self.stats.count("client_queued_behind_abandoned");
            self.queued = Some(submission);
            return;
        }
        self.start(submission, out);
    }

    fn on_abandon(&mut self, _now: ClockReading, op: u64, _out: &mut Outbox<SwiftPaxos>) {
        if self.queued.as_ref().is_some_and(|queued| queued.op == op) {
            // Never numbered, never sent: dropping it leaves no hole.
            self.queued = None;
        } else if let Some(outstanding) = self.outstanding.as_mut().filter(|o| o.op == op) {
            outstanding.abandoned = true;
        }
    }

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<SwiftPaxos>) {
        if let Err(reason) = self.handle(from, message, out) {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, _now: ClockReading, timer: Timer, out: &mut Outbox<SwiftPaxos>) {
        if timer != Timer::ClientRetry || self.outstanding.is_none() {
            return;
        }
        self.stats.count("client_retry");
        self.send(out);
    }

    fn check_invariants(&self) {
        if let Some(outstanding) = &self.outstanding {
            assert!(outstanding.id.number < self.next_number, "the outstanding command was numbered");
            assert!(outstanding.views.len() <= VIEWS_MAX, "views bounded");
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let number = self.outstanding.as_ref().map_or(0, |o| o.id.number);
        format!("client {:?} next={} outstanding={}", self.id, self.next_number, number)
    }
}
