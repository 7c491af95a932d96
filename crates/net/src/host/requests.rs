//! The gateway's requests: a bounded queue in front of the client nodes, one operation per client
//! node at a time, answers on completion or timeout, and the latency of completed operations.

use super::{Outcome, Request};
use crate::clock::monotonic_ns;
use crate::metrics::Transport;
use ordo_core::{CommandResult, Submission};
use std::collections::{BTreeMap, VecDeque};
use tokio::sync::oneshot;

/// How often the gateway looks for operations whose caller hung up.
const CLOSED_SWEEP_NS: u64 = 20_000_000;

/// A client node's current operation.
struct Busy {
    op: u64,
    deadline_ns: u64,
    started_ns: u64,
    reply: oneshot::Sender<Outcome>,
}

/// Requests waiting for a client node, the client nodes free to take one, each client node's
/// current operation (by local node index), and the latency histogram of completed operations.
pub(super) struct Requests {
    queue: VecDeque<Request>,
    queue_max: usize,
    free_clients: Vec<usize>,
    /// The current operation of each local node (always `None` for nodes that are not clients).
    busy: Vec<Option<Busy>>,
    /// Outstanding operations by number, so by deadline too (every operation gets the same
    /// timeout from a monotonic start): the first is the next to expire. Bounded by the client
    /// nodes, which take one operation each.
    outstanding: BTreeMap<u64, usize>,
    next_op: u64,
    op_timeout_ns: u64,
    /// When [`Requests::abandon_closed`] looks at the callers next.
    next_sweep_ns: u64,
    latency: hdrhistogram::Histogram<u64>,
}

impl Requests {
    /// `free_clients` are the local indexes of the client nodes, the last taken first;
    /// `locals_len` is the number of local nodes.
    pub(super) fn new(free_clients: Vec<usize>, locals_len: usize, op_timeout_ns: u64, queue_max: usize) -> Self {
        Requests {
            queue: VecDeque::new(),
            queue_max,
            free_clients,
            busy: (0..locals_len).map(|_| None).collect(),
            outstanding: BTreeMap::new(),
            next_op: 0,
            op_timeout_ns,
            next_sweep_ns: 0,
            latency: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
        }
    }

    /// Queues `request`, or answers it `Busy` when the queue is full.
    pub(super) fn enqueue(&mut self, request: Request, transport: &mut Transport) {
        if self.queue.len() >= self.queue_max {
            let _ = request.reply.send(Outcome::Busy);
            transport.requests_rejected += 1;
            return;
        }
        self.queue.push_back(request);
    }

    /// Takes the next queued request whose caller still waits and a free client node for it:
    /// (local node index, its submission). The caller submits it to that node.
    pub(super) fn next_submission(&mut self, now: u64) -> Option<(usize, Submission)> {
        while !self.queue.is_empty() {
            let index = self.free_clients.pop()?;
            let request = self.queue.pop_front().expect("not empty");
            if request.reply.is_closed() {
                self.free_clients.push(index);
                continue;
            }
            let op = self.next_op;
            self.next_op += 1;
            self.outstanding.insert(op, index);
            self.busy[index] =
                Some(Busy { op, deadline_ns: now + self.op_timeout_ns, started_ns: now, reply: request.reply });
            return Some((index, Submission { op, command: request.command }));
        }
        None
    }

    /// Client node `index` completed operation `op`: answers it unless it was already answered
    /// (timed out and abandoned).
    pub(super) fn complete(&mut self, index: usize, op: u64, result: CommandResult, transport: &mut Transport) {
        if let Some(busy) = self.busy[index].take_if(|b| b.op == op) {
            self.outstanding.remove(&op);
            let now = monotonic_ns();
            let _ = self.latency.record((now - busy.started_ns) / 1_000);
            let _ = busy.reply.send(Outcome::Done(result));
            transport.operations_completed += 1;
            self.free_clients.push(index);
        }
    }

    /// Answers as unknown every operation past its deadline at `now`, freeing its client node,
    /// and returns them as (local node index, op): the caller tells each node to abandon it.
    pub(super) fn expire(&mut self, now: u64, transport: &mut Transport) -> Vec<(usize, u64)> {
        let mut expired = Vec::new();
        while let Some((&op, &index)) = self.outstanding.first_key_value() {
            let current = self.busy[index].as_ref().is_some_and(|b| b.op == op);
            debug_assert!(current, "outstanding operations are their client's current one");
            if current && self.busy[index].as_ref().is_some_and(|b| b.deadline_ns > now) {
                break;
            }
            self.outstanding.remove(&op);
            if let Some(busy) = self.busy[index].take_if(|b| b.op == op) {
                let _ = busy.reply.send(Outcome::Timeout);
                transport.operations_timed_out += 1;
                self.free_clients.push(index);
                expired.push((index, op));
            }
        }
        expired
    }

    /// Frees the client node of every operation whose caller stopped waiting (its Redis
    /// connection closed while the operation ran) and returns them as (local node index, op):
    /// the caller tells each node to abandon it, so it stops retrying for nobody. Looks at most
    /// every [`CLOSED_SWEEP_NS`]: a hung-up caller need not be noticed at once.
    pub(super) fn abandon_closed(&mut self, now: u64, transport: &mut Transport) -> Vec<(usize, u64)> {
        if now < self.next_sweep_ns {
            return Vec::new();
        }
        self.next_sweep_ns = now + CLOSED_SWEEP_NS;
        let closed: Vec<(u64, usize)> = self
            .outstanding
            .iter()
            .filter(|&(&op, &index)| self.busy[index].as_ref().is_some_and(|b| b.op == op && b.reply.is_closed()))
            .map(|(&op, &index)| (op, index))
            .collect();
        for &(op, index) in &closed {
            self.outstanding.remove(&op);
            self.busy[index] = None;
            self.free_clients.push(index);
            transport.operations_abandoned += 1;
        }
        closed.into_iter().map(|(op, index)| (index, op)).collect()
    }

    /// The deadline of the next operation to expire.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.outstanding.first_key_value().and_then(|(_, &i)| self.busy[i].as_ref()).map(|b| b.deadline_ns)
    }

    /// Requests waiting for a free client node.
    pub(super) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Client nodes with an operation outstanding.
    pub(super) fn busy_count(&self) -> usize {
        self.busy.iter().filter(|b| b.is_some()).count()
    }

    /// Latency of completed operations, in microseconds.
    pub(super) fn latency(&self) -> &hdrhistogram::Histogram<u64> {
        &self.latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::Command;

    #[test]
    fn an_operation_whose_caller_hung_up_is_abandoned_once_and_its_client_freed() {
        // Goal: the gateway stops working for a caller that is gone (its connection closed),
        // frees the client node for others and ignores a late completion. Method: two
        // operations on two client nodes; the first caller drops its receiver.
        let mut requests = Requests::new(vec![0, 1], 2, 1_000_000_000, 8);
        let mut transport = Transport::default();
        let (first, first_waits) = oneshot::channel();
        let (second, _second_waits) = oneshot::channel();
        requests.enqueue(Request { command: Command::get("a"), reply: first }, &mut transport);
        requests.enqueue(Request { command: Command::get("b"), reply: second }, &mut transport);
        let (index, submission) = requests.next_submission(0).expect("a free client");
        assert!(requests.next_submission(0).is_some(), "two client nodes");
        assert!(requests.abandon_closed(0, &mut transport).is_empty(), "both callers wait");
        drop(first_waits);
        assert!(requests.abandon_closed(1, &mut transport).is_empty(), "not swept again so soon");
        let abandoned = requests.abandon_closed(CLOSED_SWEEP_NS, &mut transport);
        assert_eq!(abandoned, vec![(index, submission.op)]);
        assert_eq!((transport.operations_abandoned, requests.busy_count()), (1, 1));
        requests.complete(index, submission.op, CommandResult::Ok, &mut transport);
        assert_eq!(transport.operations_completed, 0, "a late completion of a given-up operation is ignored");
        assert!(requests.abandon_closed(2 * CLOSED_SWEEP_NS, &mut transport).is_empty(), "abandoned once");
    }
}
