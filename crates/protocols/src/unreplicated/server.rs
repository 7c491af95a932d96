//! The single server: executes requests in arrival order, at most once per request, and logs
//! each command durably before it answers.

use super::{Config, Unreplicated, messages::Message};
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode,
    PersistTicket, RequestId, StateMachine,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the server writes to durable storage.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Durable {
    /// A command, in execution order.
    Executed {
        /// Its request.
        id: RequestId,
        /// The command.
        command: Command,
    },
    /// The whole state, replacing every record before it.
    Snapshot {
        /// State machine snapshot.
        state: Vec<u8>,
        /// The client table at that point.
        client_table: Vec<(ClientId, u64, CommandResult)>,
    },
}

/// The last request executed for each client and its result, so a retry gets the same answer.
#[derive(Clone, Debug)]
struct ClientTableEntry {
    number: u64,
    result: CommandResult,
}

/// The server role.
pub struct Server {
    config: Config,
    state_machine: Box<dyn StateMachine>,
    client_table: BTreeMap<ClientId, ClientTableEntry>,
    /// The last durable write issued: replies wait for it, so nothing unlogged is ever seen.
    last_write: Option<PersistTicket>,
    since_snapshot: u64,
    stats: NodeStats,
}

impl Server {
    /// A server rebuilt from its durable records (empty for a fresh one).
    pub fn restore(context: NodeContext<Unreplicated>, durable: Vec<Durable>) -> Self {
        let mut server = Server {
            config: context.config,
            state_machine: (context.new_state_machine)(),
            client_table: BTreeMap::new(),
            last_write: None,
            since_snapshot: 0,
            stats: NodeStats::default(),
        };
        for record in durable {
            match record {
                Durable::Executed { id, command } => {
                    server.execute(id, &command);
                }
                Durable::Snapshot { state, client_table } => {
                    server.state_machine.restore(&state).expect("our own snapshot decodes");
                    server.client_table = client_table
                        .into_iter()
                        .map(|(client, number, result)| (client, ClientTableEntry { number, result }))
                        .collect();
                }
            }
        }
        server
    }

    fn execute(&mut self, id: RequestId, command: &Command) -> CommandResult {
        let result = self.state_machine.apply(id, command);
        self.stats.executed += 1;
        self.client_table.insert(id.client, ClientTableEntry { number: id.number, result: result.clone() });
        result
    }

    fn reply(&self, to: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        match self.last_write {
            Some(ticket) => out.send_after(ticket, to, message),
            None => out.send(to, message),
        }
    }

    fn maybe_snapshot(&mut self, out: &mut Outbox<Unreplicated>) {
        self.since_snapshot += 1;
        if self.since_snapshot < self.config.snapshot_interval {
            return;
        }
        self.since_snapshot = 0;
        let client_table =
            self.client_table.iter().map(|(client, entry)| (*client, entry.number, entry.result.clone())).collect();
        let record = Durable::Snapshot { state: self.state_machine.snapshot(), client_table };
        self.last_write = Some(out.persist(record, PersistMode::Replace));
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
                let reply = Message::Reply { id, result: entry.result.clone() };
                self.reply(from, reply, out);
                return;
            }
        }
        if !command.is_read_only() {
            self.last_write =
                Some(out.persist(Durable::Executed { id, command: command.clone() }, PersistMode::Append));
        }
        let result = self.execute(id, &command);
        self.stats.slow_path_commits += 1;
        self.reply(from, Message::Reply { id, result }, out);
        if !command.is_read_only() {
            self.maybe_snapshot(out);
        }
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
