//! The client: sends each submission to the replica it believes leads, and on a timeout to every
//! replica. It learns the view from replies and redirects, keeps up to `client_window` requests
//! in flight, and completes each submission exactly once.

use super::messages::Message;
use super::{MultiPaxos, Timer};
use crate::client_pipeline::{ClientPipeline, RetrySweep};
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission,
};

/// A Multi-Paxos client.
pub struct Client {
    replicas: Destinations,
    /// The highest view heard of; its leader gets our requests.
    view: u64,
    pipeline: ClientPipeline,
    retries: RetrySweep,
    stats: NodeStats,
}

impl Client {
    /// A client that first believes view 0.
    pub fn new(context: NodeContext<MultiPaxos>) -> Self {
        let replicas = context.topology.replicas().clone();
        assert!(!replicas.is_empty(), "a cluster has replicas");
        let pipeline = ClientPipeline::new(context.client_id(), context.config.client_window);
        let retries = RetrySweep::new(context.config.scaled(&context.topology).client_retry_ns);
        Client { replicas, view: 0, pipeline, retries, stats: NodeStats::default() }
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

    /// Sends `started` to the leader, and keeps the retry sweep running while anything is in
    /// flight.
    fn send_to_leader(&mut self, started: Vec<RequestId>, out: &mut Outbox<MultiPaxos>) {
        for id in started {
            out.send(self.leader(), self.request(id));
        }
        self.retries.keep_running(&self.pipeline, Timer::ClientRetry, out);
    }

    fn on_reply(
        &mut self,
        now: ClockReading,
        view: u64,
        id: RequestId,
        result: CommandResult,
        out: &mut Outbox<MultiPaxos>,
    ) -> Result<(), &'static str> {
        self.view = self.view.max(view);
        let (op, started) = self.pipeline.complete(id, now.local_ns);
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

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<MultiPaxos>) {
        let started = self.pipeline.submit(submission, now.local_ns);
        self.send_to_leader(started, out);
    }

    fn on_abandon(&mut self, now: ClockReading, op: u64, out: &mut Outbox<MultiPaxos>) {
        let started = self.pipeline.abandon(op, now.local_ns);
        self.send_to_leader(started, out);
    }

    fn on_message(&mut self, now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<MultiPaxos>) {
        let handled = match message {
            Message::Reply { view, id, result } => self.on_reply(now, view, id, result, out),
            Message::Redirect { view } => self.on_redirect(view, out),
            _ => Err("replica message sent to a client"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<MultiPaxos>) {
        if timer != Timer::ClientRetry {
            return;
        }
        // The leader may be gone or our view stale: ask everyone; the leader answers, the
        // others redirect.
        for id in self.retries.fired(&mut self.pipeline, now.local_ns) {
            self.stats.count("client_retry");
            out.multicast(&self.replicas, self.request(id));
        }
        self.retries.keep_running(&self.pipeline, Timer::ClientRetry, out);
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
