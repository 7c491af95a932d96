//! The client (paper §5.2.1, §5.2.2): sends each request through the OUM group's sequencer and
//! accepts it once f + 1 replicas replied with the same view-id and log slot, the view's leader
//! among them; the result is the leader's. On a timeout it retries with the same request id
//! (replicas' client table suppresses duplicates); a retried request takes a new log slot.
//!
//! The active sequencer is `sequencers[session % k]` (see `controller.rs`); the client learns
//! the session from replies' view-ids and sends a retry to every sequencer, as the network's
//! group address would reach whichever one is active.

use super::checker::Observation;
use super::messages::{Message, Request, ViewId};
use super::{Config, NoPaxos, Timer};
use crate::client_pipeline::large_command_wait;
use crate::multipaxos::checker::execution_digest;
use ordo_core::{
    ClientId, ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Role,
    Submission,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most distinct ⟨view, slot⟩ reply groups kept for one request (retries add slots).
const VOTE_GROUPS_MAX: usize = 64;

/// Replies for one request at one ⟨view, slot⟩.
#[derive(Debug, Default)]
struct Votes {
    replicas: BTreeSet<NodeId>,
    leader_result: Option<CommandResult>,
}

/// The request the client waits on.
struct Outstanding {
    op: u64,
    request: Arc<Request>,
    /// By ⟨leader-num, session-num, slot⟩.
    votes: BTreeMap<(u64, u64, u64), Votes>,
    /// Times sent (1 after the first send): a large command waits longer after each
    /// (`client_pipeline::large_command_wait`).
    sends: u32,
}

/// A NOPaxos client.
pub struct Client {
    id: ClientId,
    replicas: Destinations,
    sequencers: Destinations,
    config: Config,
    /// Replies needed: f + 1.
    quorum: usize,
    /// The highest session heard of in replies.
    session: u64,
    next_number: u64,
    outstanding: Option<Outstanding>,
    stats: NodeStats,
}

impl Client {
    /// A client that first believes session 0.
    pub fn new(context: NodeContext<NoPaxos>) -> Self {
        let replicas = context.topology.replicas().clone();
        let sequencers: Destinations = context.topology.with_role(Role::Sequencer).collect();
        assert!(!replicas.is_empty() && !sequencers.is_empty(), "a cluster has replicas and a sequencer");
        Client {
            id: context.client_id(),
            quorum: context.topology.f + 1,
            replicas,
            sequencers,
            config: context.config,
            session: 0,
            next_number: 1,
            outstanding: None,
            stats: NodeStats::default(),
        }
    }

    fn leader_of(&self, view: ViewId) -> NodeId {
        self.replicas[(view.leader_num % self.replicas.len() as u64) as usize]
    }

    fn active_sequencer(&self) -> NodeId {
        self.sequencers[(self.session % self.sequencers.len() as u64) as usize]
    }

    fn on_reply(
        &mut self,
        from: NodeId,
        view: ViewId,
        slot: u64,
        id: RequestId,
        result: Option<CommandResult>,
        out: &mut Outbox<NoPaxos>,
    ) -> Result<(), &'static str> {
        if !self.replicas.contains(&from) {
            return Err("reply not from a replica");
        }
        if result.is_some() && from != self.leader_of(view) {
            return Err("result from a replica that does not lead the view");
        }
        self.session = self.session.max(view.session_num);
        let quorum = self.quorum;
        let outstanding = self.outstanding.as_mut().ok_or("reply while nothing is outstanding")?;
        if outstanding.request.id != id {
            return Err("reply for a request no longer outstanding");
        }
        if outstanding.votes.len() >= VOTE_GROUPS_MAX {
            outstanding.votes.clear();
        }
        let votes = outstanding.votes.entry((view.leader_num, view.session_num, slot)).or_default();
        votes.replicas.insert(from);
        if result.is_some() {
            votes.leader_result = result;
        }
        if votes.replicas.len() < quorum || votes.leader_result.is_none() {
            return Ok(());
        }
        // f + 1 matching replies with the leader's: the request is committed at `slot` (§5.4).
        let result = votes.leader_result.take().expect("checked");
        let op = outstanding.op;
        self.outstanding = None;
        out.observe(Observation::Committed { slot, id: Some(id) });
        out.observe(Observation::Executed { slot, id, digest: execution_digest(true, Some(&result)) });
        out.complete(op, result);
        out.cancel_timer(Timer::ClientRetry);
        self.stats.slow_path_commits += 1;
        Ok(())
    }
}

impl Node<NoPaxos> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<NoPaxos>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<NoPaxos>) {
        // A new submission abandons the previous one: late replies will not match the new id.
        let id = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        let request = Arc::new(Request { id, command: submission.command });
        out.send(self.active_sequencer(), Message::Request(request.clone()));
        let wait = self.config.client_retry_ns.saturating_add(large_command_wait(request.command.encoded_len(), 1));
        out.set_timer(Timer::ClientRetry, wait);
        self.outstanding = Some(Outstanding { op: submission.op, request, votes: BTreeMap::new(), sends: 1 });
    }

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<NoPaxos>) {
        let handled = match message {
            Message::Reply { view, slot, id, result } => self.on_reply(from, view, slot, id, result, out),
            _ => Err("message not for a client"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, _now: ClockReading, timer: Timer, out: &mut Outbox<NoPaxos>) {
        let Some(outstanding) = &mut self.outstanding else { return };
        if timer != Timer::ClientRetry {
            return;
        }
        // Same request id: a replica that executed it answers from its client table (§5.2.2).
        self.stats.count("client_retry");
        out.multicast(&self.sequencers, Message::Request(outstanding.request.clone()));
        outstanding.sends = outstanding.sends.saturating_add(1);
        let large = large_command_wait(outstanding.request.command.encoded_len(), outstanding.sends);
        let wait = self.config.client_retry_ns.saturating_add(large);
        out.set_timer(Timer::ClientRetry, wait);
    }

    fn check_invariants(&self) {
        if let Some(outstanding) = &self.outstanding {
            assert!(outstanding.request.id.number < self.next_number, "the outstanding request was numbered");
            assert_eq!(outstanding.request.id.client, self.id, "requests carry our id");
            assert!(outstanding.votes.len() <= VOTE_GROUPS_MAX, "reply groups are bounded");
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let outstanding = self.outstanding.as_ref().map_or(0, |o| o.request.id.number);
        format!("client {:?} session={} next={} outstanding={}", self.id, self.session, self.next_number, outstanding)
    }
}
