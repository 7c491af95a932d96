//! The client: sends each submission to the server and retries until it is answered.

use super::{Config, Timer, Unreplicated, messages::Message};
use ordo_core::{ClientId, ClockReading, Command, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Submission};

/// The request the client is waiting on.
struct Outstanding {
    op: u64,
    id: RequestId,
    command: Command,
}

/// The client role.
pub struct Client {
    id: ClientId,
    server: NodeId,
    config: Config,
    next_number: u64,
    outstanding: Option<Outstanding>,
    stats: NodeStats,
}

impl Client {
    /// A client of the cluster's only server.
    pub fn new(context: NodeContext<Unreplicated>) -> Self {
        let server = context.topology.replicas()[0];
        Client {
            id: context.client_id(),
            server,
            config: context.config,
            next_number: 1,
            outstanding: None,
            stats: NodeStats::default(),
        }
    }

    fn send_request(&self, out: &mut Outbox<Unreplicated>) {
        let outstanding = self.outstanding.as_ref().expect("a request is outstanding");
        out.send(self.server, Message::Request { id: outstanding.id, command: outstanding.command.clone() });
        out.set_timer(Timer::ClientRetry, self.config.client_retry_ns);
    }
}

impl Node<Unreplicated> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Unreplicated>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<Unreplicated>) {
        let id = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        self.outstanding = Some(Outstanding { op: submission.op, id, command: submission.command });
        self.send_request(out);
    }

    fn on_message(&mut self, _now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        let Message::Reply { id, result } = message else {
            self.stats.drop_input("request sent to client");
            return;
        };
        match &self.outstanding {
            Some(outstanding) if outstanding.id == id => {
                out.complete(outstanding.op, result);
                out.cancel_timer(Timer::ClientRetry);
                self.outstanding = None;
            }
            _ => self.stats.drop_input("reply to a request no longer outstanding"),
        }
    }

    fn on_timer(&mut self, _now: ClockReading, _timer: Timer, out: &mut Outbox<Unreplicated>) {
        if self.outstanding.is_some() {
            self.send_request(out);
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        format!("client {:?} next request {}", self.id, self.next_number)
    }
}
