//! The client: sends each submission to the server and retries until it is answered. It keeps
//! up to `client_window` requests in flight.

use super::{Config, Timer, Unreplicated, messages::Message};
use crate::client_pipeline::ClientPipeline;
use ordo_core::{ClockReading, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission};

/// The client role.
pub struct Client {
    server: NodeId,
    config: Config,
    pipeline: ClientPipeline,
    /// Whether the retry timer is armed: new submissions must not push back a retry that an
    /// older request is due.
    retry_armed: bool,
    stats: NodeStats,
}

impl Client {
    /// A client of the cluster's only server.
    pub fn new(context: NodeContext<Unreplicated>) -> Self {
        let server = context.topology.replicas()[0];
        let pipeline = ClientPipeline::new(context.client_id(), context.config.client_window);
        Client { server, config: context.config, pipeline, retry_armed: false, stats: NodeStats::default() }
    }

    fn send_request(&self, id: RequestId, out: &mut Outbox<Unreplicated>) {
        let request = self.pipeline.get(id.number).expect("the request is in flight");
        let acked_below = self.pipeline.acked_below();
        out.send(self.server, Message::Request { id, acked_below, command: request.command.clone() });
    }

    fn send_started(&mut self, started: Vec<RequestId>, out: &mut Outbox<Unreplicated>) {
        for id in started {
            self.send_request(id, out);
        }
        if self.pipeline.is_idle() {
            out.cancel_timer(Timer::ClientRetry);
            self.retry_armed = false;
        } else if !self.retry_armed {
            out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
            self.retry_armed = true;
        }
    }
}

impl Node<Unreplicated> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Unreplicated>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<Unreplicated>) {
        let started = self.pipeline.submit(submission);
        self.send_started(started, out);
    }

    fn on_abandon(&mut self, _now: ClockReading, op: u64, out: &mut Outbox<Unreplicated>) {
        let started = self.pipeline.abandon(op);
        self.send_started(started, out);
    }

    fn on_message(&mut self, _now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        let Message::Reply { id, result } = message else {
            self.stats.drop_input("request sent to client");
            return;
        };
        let (op, started) = self.pipeline.complete(id.number);
        let Some(op) = op else {
            self.stats.drop_input("reply to a request no longer outstanding");
            return;
        };
        out.complete(op, result);
        self.send_started(started, out);
    }

    fn on_timer(&mut self, _now: ClockReading, _timer: Timer, out: &mut Outbox<Unreplicated>) {
        self.retry_armed = false;
        let ids: Vec<RequestId> = self.pipeline.in_flight().map(|(id, _)| id).collect();
        self.send_started(ids, out);
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
