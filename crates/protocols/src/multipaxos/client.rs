//! The client: sends each submission to the replica it believes leads, and on a timeout to every
//! replica. It learns the view from replies and redirects, keeps up to `client_window` requests
//! in flight, and completes each submission exactly once.

use super::messages::Message;
use super::{Config, MultiPaxos, Timer};
use crate::client_pipeline::ClientPipeline;
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission,
};

/// A Multi-Paxos client.
pub struct Client {
    replicas: Destinations,
    config: Config,
    /// The highest view heard of; its leader gets our requests.
    view: u64,
    pipeline: ClientPipeline,
    /// Whether the retry timer is armed: new submissions must not push back a retry that an
    /// older request is due.
    retry_armed: bool,
    stats: NodeStats,
}

impl Client {
    /// A client that first believes view 0.
    pub fn new(context: NodeContext<MultiPaxos>) -> Self {
        let replicas = context.topology.replicas().clone();
        assert!(!replicas.is_empty(), "a cluster has replicas");
        let pipeline = ClientPipeline::new(context.client_id(), context.config.client_window);
        Client { replicas, config: context.config, view: 0, pipeline, retry_armed: false, stats: NodeStats::default() }
    }

    fn leader(&self) -> NodeId {
        self.replicas[(self.view % self.replicas.len() as u64) as usize]
    }

    fn request(&self, id: RequestId) -> Message {
        let request = self.pipeline.get(id.number).expect("the request is in flight");
        Message::Request { id, acked_below: self.pipeline.acked_below(), command: request.command.clone() }
    }

    fn in_flight(&self) -> Vec<RequestId> {
        self.pipeline.in_flight().map(|(id, _)| id).collect()
    }

    /// Sends `started` to the leader, and keeps the retry timer armed while anything is in
    /// flight.
    fn send_to_leader(&mut self, started: Vec<RequestId>, out: &mut Outbox<MultiPaxos>) {
        for id in started {
            out.send(self.leader(), self.request(id));
        }
        if self.pipeline.is_idle() {
            out.cancel_timer(Timer::ClientRetry);
            self.retry_armed = false;
        } else if !self.retry_armed {
            out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
            self.retry_armed = true;
        }
    }

    fn on_reply(
        &mut self,
        view: u64,
        id: RequestId,
        result: CommandResult,
        out: &mut Outbox<MultiPaxos>,
    ) -> Result<(), &'static str> {
        self.view = self.view.max(view);
        let (op, started) = self.pipeline.complete(id.number);
        let op = op.ok_or("reply for a request no longer outstanding")?;
        out.complete(op, result);
        self.send_to_leader(started, out);
        Ok(())
    }

    fn on_redirect(&mut self, view: u64, out: &mut Outbox<MultiPaxos>) -> Result<(), &'static str> {
        if view <= self.view {
            return Err("redirect to a view already known");
        }
        self.view = view;
        let in_flight = self.in_flight();
        self.send_to_leader(in_flight, out);
        Ok(())
    }
}

impl Node<MultiPaxos> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<MultiPaxos>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<MultiPaxos>) {
        let started = self.pipeline.submit(submission);
        self.send_to_leader(started, out);
    }

    fn on_abandon(&mut self, _now: ClockReading, op: u64, out: &mut Outbox<MultiPaxos>) {
        let started = self.pipeline.abandon(op);
        self.send_to_leader(started, out);
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
        if timer != Timer::ClientRetry {
            return;
        }
        self.retry_armed = false;
        if self.pipeline.is_idle() {
            return;
        }
        // The leader may be gone or our view stale: ask everyone; the leader answers, the
        // others redirect.
        self.stats.count("client_retry");
        for id in self.in_flight() {
            out.multicast(&self.replicas, self.request(id));
        }
        out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
        self.retry_armed = true;
    }

    fn check_invariants(&self) {
        self.pipeline.check_invariants();
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let (next, mark) = (self.pipeline.next_number(), self.pipeline.acked_below());
        format!("client view={} next={next} acked_below={mark}", self.view)
    }
}
