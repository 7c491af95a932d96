//! The single server: executes requests in arrival order, at most once per request.

use super::{Unreplicated, messages::Message};
use ordo_core::{ClientId, ClockReading, CommandResult, Node, NodeContext, NodeId, NodeStats, Outbox, StateMachine};
use std::collections::BTreeMap;

/// The last request executed for each client and its result, so a retry gets the same answer.
struct ClientTableEntry {
    number: u64,
    result: CommandResult,
}

/// The server role.
pub struct Server {
    state_machine: Box<dyn StateMachine>,
    client_table: BTreeMap<ClientId, ClientTableEntry>,
    stats: NodeStats,
}

impl Server {
    /// A server with an empty store.
    pub fn new(context: NodeContext<Unreplicated>) -> Self {
        Server {
            state_machine: (context.new_state_machine)(),
            client_table: BTreeMap::new(),
            stats: NodeStats::default(),
        }
    }
}

impl Node<Unreplicated> for Server {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Unreplicated>) {}

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        let Message::Request { id, command } = message else {
            self.stats.drop_input("reply sent to server");
            return;
        };
        if let Some(entry) = self.client_table.get(&id.client) {
            if id.number < entry.number {
                self.stats.drop_input("request older than the client's last");
                return;
            }
            if id.number == entry.number {
                out.send(from, Message::Reply { id, result: entry.result.clone() });
                return;
            }
        }
        let result = self.state_machine.apply(id, &command);
        self.stats.executed += 1;
        self.stats.slow_path_commits += 1;
        self.client_table.insert(id.client, ClientTableEntry { number: id.number, result: result.clone() });
        out.send(from, Message::Reply { id, result });
    }

    fn on_timer(&mut self, _now: ClockReading, _timer: super::Timer, _out: &mut Outbox<Unreplicated>) {}

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn state_machine(&self) -> Option<&dyn StateMachine> {
        Some(self.state_machine.as_ref())
    }

    fn status(&self) -> String {
        format!("server executed={} clients={}", self.stats.executed, self.client_table.len())
    }
}
