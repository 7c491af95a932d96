//! The workload clients: simulated application threads that submit operations to their
//! protocol client node and record the history.

use super::*;
use ordo_core::Command;

/// An operation a workload client is waiting on.
pub(crate) struct Outstanding {
    pub(super) op: u64,
    /// How the history records it; empty when no history is kept.
    pub(super) parts: Vec<GeneratedPart>,
    /// A null result means it took no effect (a transaction with WATCH).
    pub(super) may_abort: bool,
    pub(super) arrival_ns: u64,
}

/// History client ids of the second and later keys of a multi-key operation start here, so that
/// each key's part is one operation of its own history client (one outstanding each).
pub const HISTORY_PART_CLIENT_BASE: u64 = 1 << 40;
/// Most keys of one operation the history can record.
pub(super) const PARTS_MAX: u64 = 8;

/// The history client id of part `part` of an operation by history process `process`.
pub(super) fn history_client(process: u64, part: usize) -> u64 {
    assert!((part as u64) < PARTS_MAX, "at most {PARTS_MAX} keys per recorded operation");
    if part == 0 { process } else { HISTORY_PART_CLIENT_BASE + process * PARTS_MAX + part as u64 }
}

/// A simulated application thread using one protocol client node.
pub(crate) struct WorkloadClient {
    pub node: NodeId,
    pub site: usize,
    /// The history's client id; without operation ids, replaced after an operation of unknown
    /// outcome.
    pub(super) process: u64,
    /// Operations in flight, at most `outstanding_max`.
    pub(super) outstanding: Vec<Outstanding>,
    pub(super) backlog: VecDeque<u64>,
    pub backlog_drops: u64,
    pub last_ok_ns: u64,
    pub latencies_ns: Vec<u64>,
}

impl<P: Protocol> World<P> {
    pub(super) fn start_clients(&mut self) {
        for client in 0..self.clients.len() {
            // Spread the clients' first operations over 100 µs so they do not all collide.
            let start = self.workload_rng.random_range(0..100_000);
            let event = if self.config.workload.rate_per_client.is_some() {
                Event::ClientArrival { client }
            } else {
                Event::ClientNext { client }
            };
            self.schedule(start, event);
        }
    }

    /// Pipelining clients name their operations in the history; the others pair by client.
    fn history_id(&self, op: u64) -> Option<u64> {
        (self.config.workload.outstanding_max > 1).then_some(op)
    }

    /// Submits operations until the client has `outstanding_max` in flight (or, open loop, no
    /// arrival waiting).
    pub(super) fn fill_window(&mut self, client: usize) {
        if !self.nodes[self.clients[client].node.index()].is_up() {
            // Its client node is down: the application waits for it to boot again.
            return;
        }
        while self.clients[client].outstanding.len() < self.config.workload.outstanding_max
            && self.now < self.config.duration_ns
        {
            let arrival_ns = match self.config.workload.rate_per_client {
                Some(_) => match self.clients[client].backlog.pop_front() {
                    Some(arrival) => arrival,
                    None => return,
                },
                None => self.now,
            };
            self.submit(client, arrival_ns);
        }
    }

    fn submit(&mut self, client: usize, arrival_ns: u64) {
        let op = self.next_op;
        self.next_op += 1;
        let command = self.generator.next(&mut self.workload_rng, client, op);
        let command = self.stamped(client, command);
        let recorded = self.config.record_history || self.config.check_linearizability;
        let parts = if recorded { workload::parts(&command) } else { Vec::new() };
        let id = self.history_id(op);
        let state = &mut self.clients[client];
        for (index, part) in parts.iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(state.process, index),
                id,
                kind: EventKind::Invoke,
                time_ns: self.now,
                op: part.kind,
                key: part.key.clone(),
                value: part.value.clone(),
                at_ms: part.at_ms,
                expires_ms: part.expires_ms,
            });
        }
        let may_abort = workload::may_abort(&command);
        state.outstanding.push(Outstanding { op, parts, may_abort, arrival_ns });
        let node = state.node;
        self.schedule_after_fixed(self.config.workload.op_timeout_ns, Event::ClientTimeout { client, op });
        self.on_arrive(node, Input::Submit(Submission { op, command }));
    }

    /// `command` stamped with the client node's clock in milliseconds ([`Command::Timed`], as
    /// a gateway stamps what it forwards) when the workload uses expiry; unchanged otherwise, so
    /// that runs without expiry draw from the clock stream exactly as before.
    fn stamped(&mut self, client: usize, command: Command) -> Command {
        if self.config.workload.expiry_ratio <= 0.0 {
            return command;
        }
        let node = self.clients[client].node;
        let reading = self.nodes[node.index()].clock.read(self.now, &mut self.clock_rng);
        let now_ms = i64::try_from(reading.local_ns / 1_000_000).expect("a simulated clock reads below 2^63 ms");
        command.timed(now_ms)
    }

    pub(super) fn on_client_arrival(&mut self, client: usize) {
        let rate = self.config.workload.rate_per_client.expect("open loop");
        if self.now >= self.config.duration_ns {
            return;
        }
        let state = &mut self.clients[client];
        if state.backlog.len() >= self.config.workload.backlog_max {
            state.backlog_drops += 1;
        } else {
            state.backlog.push_back(self.now);
        }
        let gap = Exp::new(rate).expect("positive rate").sample(&mut self.workload_rng);
        self.schedule(self.now + (gap * 1e9) as u64, Event::ClientArrival { client });
        self.fill_window(client);
    }

    /// Takes the client's operation `op` out of flight, if it is still there.
    fn take_outstanding(&mut self, client: usize, op: u64) -> Option<Outstanding> {
        let outstanding = &mut self.clients[client].outstanding;
        let index = outstanding.iter().position(|o| o.op == op)?;
        Some(outstanding.remove(index))
    }

    pub(super) fn on_complete(&mut self, node: NodeId, op: u64, result: CommandResult) {
        let Some(client) = self.clients.iter().position(|c| c.node == node) else {
            panic!("{node} completed an operation but is not a client");
        };
        let Some(outstanding) = self.take_outstanding(client, op) else {
            return; // a late completion of an operation the client already gave up on
        };
        let read_values = workload::part_results(result, outstanding.may_abort);
        let failed = read_values.is_none();
        let state = &mut self.clients[client];
        if failed {
            self.outcome.failed += 1;
        } else {
            self.outcome.committed += 1;
            state.last_ok_ns = self.now;
            state.latencies_ns.push(self.now - outstanding.arrival_ns);
        }
        let read_values = read_values.unwrap_or_default();
        let id = self.history_id(op);
        let process = self.clients[client].process;
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            let (kind, value) = match (failed, part.kind) {
                (true, _) => (EventKind::Fail, part.value),
                (false, OpKind::Read) => (EventKind::Ok, read_values.get(index).cloned().flatten()),
                (false, _) => (EventKind::Ok, part.value),
            };
            self.history.push(HistoryEvent {
                client: history_client(process, index),
                id,
                kind,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value,
                at_ms: part.at_ms,
                expires_ms: part.expires_ms,
            });
        }
        self.schedule(self.now, Event::ClientNext { client });
    }

    /// The client node `node` crashed: the operations its application threads had in flight
    /// there fail at once with an unknown outcome, as a gateway's connections reset when its
    /// process dies (they might still take effect).
    pub(super) fn on_client_node_crash(&mut self, node: NodeId) {
        let clients: Vec<usize> = (0..self.clients.len()).filter(|&c| self.clients[c].node == node).collect();
        for client in clients {
            let ops: Vec<u64> = self.clients[client].outstanding.iter().map(|o| o.op).collect();
            for op in ops {
                self.on_client_timeout(client, op);
            }
        }
    }

    /// The client node `node` booted again: its application threads go on.
    pub(super) fn on_client_node_boot(&mut self, node: NodeId) {
        let clients: Vec<usize> = (0..self.clients.len()).filter(|&c| self.clients[c].node == node).collect();
        for client in clients {
            self.schedule(self.now, Event::ClientNext { client });
        }
    }

    pub(super) fn on_client_timeout(&mut self, client: usize, op: u64) {
        let Some(outstanding) = self.take_outstanding(client, op) else { return };
        self.outcome.unknown += 1;
        let id = self.history_id(op);
        let process = self.clients[client].process;
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(process, index),
                id,
                kind: EventKind::Info,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value: part.value,
                at_ms: part.at_ms,
                expires_ms: part.expires_ms,
            });
        }
        if id.is_some() {
            // The lost operation keeps its id, so the client goes on under the same history
            // client; its node must stop retrying it.
            let node = self.clients[client].node;
            self.on_arrive(node, Input::Abandon(op));
        } else {
            // After an unknown outcome the history never reuses the client id (the next
            // submission abandons the lost operation at the node).
            self.clients[client].process = self.next_process;
            self.next_process += 1;
        }
        self.schedule(self.now, Event::ClientNext { client });
    }
}
