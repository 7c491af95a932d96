//! The single server: executes requests in arrival order, at most once per request, and logs
//! each command durably before it answers.

use super::{Config, Unreplicated, messages::Message};
use crate::client_table::{ClientRecord, ClientTable, Lookup};
use ordo_core::{
    ClockReading, Command, CommandResult, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode, PersistTicket,
    RequestId, StateMachine,
};
use serde::{Deserialize, Serialize};

/// What the server writes to durable storage.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Durable {
    /// A command, in execution order.
    Executed {
        /// Its request.
        id: RequestId,
        /// The client's acknowledgement mark sent with it.
        acked_below: u64,
        /// The command.
        command: Command,
    },
    /// The whole state, replacing every record before it.
    Snapshot {
        /// State machine snapshot.
        state: Vec<u8>,
        /// The client table at that point.
        client_table: Vec<ClientRecord>,
    },
}

/// The server role.
pub struct Server {
    config: Config,
    state_machine: Box<dyn StateMachine>,
    client_table: ClientTable,
    /// The last durable write issued: replies wait for it, so nothing unlogged is ever seen.
    last_write: Option<PersistTicket>,
    since_snapshot: u64,
    stats: NodeStats,
}

impl Server {
    /// A server rebuilt from its durable records (empty for a fresh one).
    pub fn restore(context: NodeContext<Unreplicated>, durable: Vec<Durable>) -> Self {
        let mut server = Server {
            config: context.config.clone(),
            state_machine: (context.new_state_machine)(),
            client_table: ClientTable::new(context.config.client_table_max, context.config.client_window),
            last_write: None,
            since_snapshot: 0,
            stats: NodeStats::default(),
        };
        for record in durable {
            match record {
                Durable::Executed { id, acked_below, command } => {
                    server.execute(id, acked_below, &command);
                }
                Durable::Snapshot { state, client_table } => {
                    server.state_machine.restore(&state).expect("our own snapshot decodes");
                    server.client_table = ClientTable::from_records(
                        server.config.client_table_max,
                        server.config.client_window,
                        &client_table,
                    )
                    .expect("our own snapshot's client table is consistent");
                }
            }
        }
        server
    }

    /// Executes a request the client table found new. Only writes enter the table: they are
    /// what the durable log replays, so a restarted server rebuilds the same table, and a read
    /// that runs twice for a retry is still answered within the operation's lifetime.
    fn execute(&mut self, id: RequestId, acked_below: u64, command: &Command) -> CommandResult {
        let result = self.state_machine.apply(id, command);
        self.stats.executed += 1;
        if !command.is_read_only() {
            let op = self.client_table.last_op() + 1;
            self.client_table.record(id, acked_below, result.clone(), op);
        }
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
        let client_table = self.client_table.to_records();
        let record = Durable::Snapshot { state: self.state_machine.snapshot(), client_table };
        self.last_write = Some(out.persist(record, PersistMode::Replace));
    }
}

impl Node<Unreplicated> for Server {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Unreplicated>) {}

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Unreplicated>) {
        let Message::Request { id, acked_below, command } = message else {
            self.stats.drop_input("reply sent to server");
            return;
        };
        match self.client_table.lookup(id, acked_below) {
            Lookup::New => {}
            Lookup::Executed(result) => {
                let reply = Message::Reply { id, result: result.clone() };
                self.reply(from, reply, out);
                return;
            }
            Lookup::Old => return self.stats.drop_input("request below the client's acknowledgement mark"),
            Lookup::BeyondWindow => return self.stats.drop_input("request beyond the client's window"),
        }
        if !command.is_read_only() {
            let record = Durable::Executed { id, acked_below, command: command.clone() };
            self.last_write = Some(out.persist(record, PersistMode::Append));
        }
        let result = self.execute(id, acked_below, &command);
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
