//! The client: sends each submission to the replica it believes leads, and on a timeout to every
//! replica. It learns the view from replies and redirects, and completes each submission exactly
//! once.

use super::messages::Message;
use super::{Config, MultiPaxos, Timer};
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox,
    RequestId, Submission,
};

/// The request the client is waiting on.
struct Outstanding {
    op: u64,
    id: RequestId,
    command: Command,
}

/// A Multi-Paxos client.
pub struct Client {
    id: ClientId,
    replicas: Destinations,
    config: Config,
    /// The highest view heard of; its leader gets our requests.
    view: u64,
    next_number: u64,
    outstanding: Option<Outstanding>,
    stats: NodeStats,
}

impl Client {
    /// A client that first believes view 0.
    pub fn new(context: NodeContext<MultiPaxos>) -> Self {
        let replicas = context.topology.replicas().clone();
        assert!(!replicas.is_empty(), "a cluster has replicas");
        Client {
            id: context.client_id(),
            replicas,
            config: context.config,
            view: 0,
            next_number: 1,
            outstanding: None,
            stats: NodeStats::default(),
        }
    }

    fn leader(&self) -> NodeId {
        self.replicas[(self.view % self.replicas.len() as u64) as usize]
    }

    fn request(&self) -> Message {
        let outstanding = self.outstanding.as_ref().expect("a request is outstanding");
        Message::Request { id: outstanding.id, command: outstanding.command.clone() }
    }

    fn send_to_leader(&self, out: &mut Outbox<MultiPaxos>) {
        out.send(self.leader(), self.request());
        out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
    }

    fn on_reply(
        &mut self,
        view: u64,
        id: RequestId,
        result: CommandResult,
        out: &mut Outbox<MultiPaxos>,
    ) -> Result<(), &'static str> {
        self.view = self.view.max(view);
        let Some(outstanding) = &self.outstanding else {
            return Err("reply while nothing is outstanding");
        };
        if outstanding.id != id {
            return Err("reply for a request no longer outstanding");
        }
        out.complete(outstanding.op, result);
        out.cancel_timer(Timer::ClientRetry);
        self.outstanding = None;
        Ok(())
    }

    fn on_redirect(&mut self, view: u64, out: &mut Outbox<MultiPaxos>) -> Result<(), &'static str> {
        if view <= self.view {
            return Err("redirect to a view already known");
        }
        self.view = view;
        if self.outstanding.is_some() {
            self.send_to_leader(out);
        }
        Ok(())
    }
}

impl Node<MultiPaxos> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<MultiPaxos>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<MultiPaxos>) {
        // A new submission abandons the previous one: its late reply will not match the new id.
        let id = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        self.outstanding = Some(Outstanding { op: submission.op, id, command: submission.command });
        self.send_to_leader(out);
    }

    fn on_message(&mut self, _now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<MultiPaxos>) {
        let handled = match message {
            Message::Reply { view, id, result } => self.on_reply(view, id, result, out),
            Message::Redirect { view } => self.on_redirect(view, out),
            _ => Err("replica message sent to a client"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, _now: ClockReading, timer: Timer, out: &mut Outbox<MultiPaxos>) {
        if timer != Timer::ClientRetry || self.outstanding.is_none() {
            return;
        }
        // The leader may be gone or our view stale: ask everyone; the leader answers, the
        // others redirect.
        self.stats.count("client_retry");
        out.multicast(&self.replicas, self.request());
        out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
    }

    fn check_invariants(&self) {
        if let Some(outstanding) = &self.outstanding {
            assert!(outstanding.id.number < self.next_number, "the outstanding request was numbered");
            assert_eq!(outstanding.id.client, self.id, "requests carry our id");
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let outstanding = self.outstanding.as_ref().map_or(0, |o| o.id.number);
        format!("client {:?} view={} next={} outstanding={}", self.id, self.view, self.next_number, outstanding)
    }
}
