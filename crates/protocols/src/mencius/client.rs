//! The client: sends each request to one replica (every replica owns slots), which
//! answers once the request executed. On a timeout it resends to the next replica, since the
//! first may have crashed; the replicas' client table executes a request at most once.

use super::messages::Message;
use super::{Mencius, Timer};
use crate::chora::messages::Request;
use crate::client_pipeline::{ClientPipeline, RetrySweep};
use ordo_core::{
    ClockReading, CommandResult, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission,
};
use std::sync::Arc;

/// A Mencius client.
pub struct Client {
    replicas: Destinations,
    /// The replica our requests go to (rank); moves on at each retry.
    home: usize,
    pipeline: ClientPipeline,
    retries: RetrySweep,
    stats: NodeStats,
}

impl Client {
    /// A client whose first replica is picked by its id, spreading clients over replicas.
    pub fn new(context: NodeContext<Mencius>) -> Self {
        let replicas = context.topology.replicas().clone();
        assert!(!replicas.is_empty(), "a cluster has replicas");
        let home = context.id.index() % replicas.len();
        let pipeline = ClientPipeline::new(context.client_id(), context.config.client_window);
        let retries = RetrySweep::new(context.config.client_retry_ns);
        Client { replicas, home, pipeline, retries, stats: NodeStats::default() }
    }

    fn request(&self, id: RequestId) -> Message {
        let request = self.pipeline.get(id.number).expect("the request is in flight");
        let acked_below = self.pipeline.acked_below();
        Message::Request(Arc::new(Request { id, acked_below, command: request.command.clone() }))
    }

    fn send(&mut self, started: Vec<RequestId>, out: &mut Outbox<Mencius>) {
        for id in started {
            out.send(self.replicas[self.home], self.request(id));
        }
        self.retries.keep_running(&self.pipeline, Timer::ClientRetry, out);
    }

    fn on_reply(
        &mut self,
        now: ClockReading,
        from: NodeId,
        id: RequestId,
        result: CommandResult,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        if !self.replicas.contains(&from) {
            return Err("reply not from a replica");
        }
        let (op, started) = self.pipeline.complete(id, now.local_ns);
        let op = op.ok_or("reply for a request no longer outstanding")?;
        out.complete(op, result);
        self.send(started, out);
        Ok(())
    }
}

impl Node<Mencius> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Mencius>) {}

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<Mencius>) {
        let started = self.pipeline.submit(submission, now.local_ns);
        self.send(started, out);
    }

    fn on_abandon(&mut self, now: ClockReading, op: u64, out: &mut Outbox<Mencius>) {
        let started = self.pipeline.abandon(op, now.local_ns);
        self.send(started, out);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Mencius>) {
        let handled = match message {
            Message::Reply { id, result } => self.on_reply(now, from, id, result, out),
            _ => Err("replica message sent to a client"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Mencius>) {
        if timer != Timer::ClientRetry {
            return;
        }
        let due = self.retries.fired(&mut self.pipeline, now.local_ns);
        if !due.is_empty() {
            // Our replica may be down or cut off: try the next one.
            self.home = (self.home + 1) % self.replicas.len();
        }
        for id in due {
            self.stats.count("client_retry");
            out.send(self.replicas[self.home], self.request(id));
        }
        self.retries.keep_running(&self.pipeline, Timer::ClientRetry, out);
    }

    fn check_invariants(&self) {
        self.pipeline.check_invariants();
        assert!(self.home < self.replicas.len(), "our replica exists");
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let (next, mark) = (self.pipeline.next_number(), self.pipeline.acked_below());
        format!("client home={} next={next} acked_below={mark}", self.home)
    }
}
