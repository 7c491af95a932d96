//! The client: sends each submission to the server and retries until it is answered. It keeps
//! up to `client_window` requests in flight.

use super::{Timer, Unreplicated, messages::Message};
use crate::client_pipeline::{ClientPipeline, RetrySweep};
use ordo_core::{ClockReading, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission};

/// The client role.
pub struct Client {
    server: NodeId,
    pipeline: ClientPipeline,
    retries: RetrySweep,
    stats: NodeStats,
}

impl Client {
    /// A client of the cluster's only server.
    pub fn new(context: NodeContext<Unreplicated>) -> Self {
        let server = context.topology.replicas()[0];
        let pipeline = ClientPipeline::new(context.client_id(), context.config.client_window);
        let retries = RetrySweep::new(context.topology.stretched_for_clients(context.config.client_retry_ns, 2));
        Client { server, pipeline, retries, stats: NodeStats::default() }
    }

    fn send(&mut self, ids: Vec<RequestId>, out: &mut Outbox<Unreplicated>) {
        let acked_below = self.pipeline.acked_below();
        for id in ids {
            let request = self.pipeline.get(id.number).expect("the request is in flight");
            out.send(self.server, Message::Request { id, acked_below, command: request.command.clone() });
        }
        self.retries.keep_running(&self.pipeline, Timer::ClientRetry, out);
    }
}

impl Node<Unreplicated> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Unreplicated>) {}

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<Unreplicated>) {
        let started = self.pipeline.submit(submission, now.local_ns);
        self.send(started, out);
    }

    fn on_abandon(&mut self, now: ClockReading, op: u64, out: &mut Outbox<Unreplicated>) {
        let started = self.pipeline.abandon(op, now.local_ns);
        self.send(started, out);
    }

    fn on_message(&mut self, now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        let Message::Reply { id, result } = message else {
            self.stats.drop_input("request sent to client");
            return;
        };
        let (op, started) = self.pipeline.complete(id, now.local_ns);
        let Some(op) = op else {
            self.stats.drop_input("reply to a request no longer outstanding");
            return;
        };
        out.complete(op, result);
        self.send(started, out);
    }

    fn on_timer(&mut self, now: ClockReading, _timer: Timer, out: &mut Outbox<Unreplicated>) {
        let due = self.retries.fired(&mut self.pipeline, now.local_ns);
        self.send(due, out);
    }

    fn check_invariants(&self) {
        self.pipeline.check_invariants();
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        format!("client next request {} acked below {}", self.pipeline.next_number(), self.pipeline.acked_below())
    }
}
