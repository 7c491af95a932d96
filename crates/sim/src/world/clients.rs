//! The workload clients: simulated application threads that submit operations to their
//! protocol client node and record the history.

use super::*;

/// An operation a workload client is waiting on.
pub(crate) struct Outstanding {
    pub(super) op: u64,
    pub(super) parts: Vec<GeneratedPart>,
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
    /// The history's client id; replaced after an operation of unknown outcome.
    pub(super) process: u64,
    pub(super) outstanding: Option<Outstanding>,
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

    pub(super) fn submit_next(&mut self, client: usize) {
        if self.clients[client].outstanding.is_some() || self.now >= self.config.duration_ns {
            return;
        }
        let arrival_ns = match self.config.workload.rate_per_client {
            Some(_) => match self.clients[client].backlog.pop_front() {
                Some(arrival) => arrival,
                None => return,
            },
            None => self.now,
        };
        let op = self.next_op;
        self.next_op += 1;
        let generated = self.generator.next(&mut self.workload_rng, client, op);
        let state = &mut self.clients[client];
        for (index, part) in generated.parts.iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(state.process, index),
                id: None,
                kind: EventKind::Invoke,
                time_ns: self.now,
                op: part.kind,
                key: part.key.clone(),
                value: part.value.clone(),
            });
        }
        state.outstanding = Some(Outstanding { op, parts: generated.parts, arrival_ns });
        let node = state.node;
        self.schedule_after_fixed(self.config.workload.op_timeout_ns, Event::ClientTimeout { client, op });
        self.on_arrive(node, Input::Submit(Submission { op, command: generated.command }));
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
        self.submit_next(client);
    }

    pub(super) fn on_complete(&mut self, node: NodeId, op: u64, result: CommandResult) {
        let Some(client) = self.clients.iter().position(|c| c.node == node) else {
            panic!("{node} completed an operation but is not a client");
        };
        let state = &mut self.clients[client];
        let Some(outstanding) = state.outstanding.take_if(|o| o.op == op) else {
            return; // a late completion of an operation the client already gave up on
        };
        let failed = matches!(result, CommandResult::Error(_));
        if failed {
            self.outcome.failed += 1;
        } else {
            self.outcome.committed += 1;
            state.last_ok_ns = self.now;
            state.latencies_ns.push(self.now - outstanding.arrival_ns);
        }
        let read_values: Vec<Option<String>> = match result {
            CommandResult::Value(v) => vec![Some(String::from_utf8_lossy(&v).into_owned())],
            CommandResult::Values(values) => {
                values.into_iter().map(|v| v.map(|v| String::from_utf8_lossy(&v).into_owned())).collect()
            }
            _ => Vec::new(),
        };
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            let (kind, value) = match (failed, part.kind) {
                (true, _) => (EventKind::Fail, part.value),
                (false, OpKind::Read) => (EventKind::Ok, read_values.get(index).cloned().flatten()),
                (false, _) => (EventKind::Ok, part.value),
            };
            let client = history_client(state.process, index);
            self.history.push(HistoryEvent {
                client,
                id: None,
                kind,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value,
            });
        }
        self.schedule(self.now, Event::ClientNext { client });
    }

    pub(super) fn on_client_timeout(&mut self, client: usize, op: u64) {
        let state = &mut self.clients[client];
        let Some(outstanding) = state.outstanding.take_if(|o| o.op == op) else { return };
        self.outcome.unknown += 1;
        for (index, part) in outstanding.parts.into_iter().enumerate() {
            self.history.push(HistoryEvent {
                client: history_client(state.process, index),
                id: None,
                kind: EventKind::Info,
                time_ns: self.now,
                op: part.kind,
                key: part.key,
                value: part.value,
            });
        }
        // After an unknown outcome the history never reuses the client id.
        state.process = self.next_process;
        self.next_process += 1;
        self.schedule(self.now, Event::ClientNext { client });
    }
}
