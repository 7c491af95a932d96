//! The client's side of the client table: requests in flight, numbered, within a window.
//!
//! A client numbers its requests 1, 2, 3... and keeps at most `window` numbers in flight above
//! its acknowledgement mark (the lowest number still in flight), which it sends with every
//! request so the replicas' [`ClientTable`](crate::client_table::ClientTable) can forget older
//! results. A slow request holds the mark back, so a submission whose number would not fit
//! waits here until the mark moves (at most `window` submissions wait, since the driver keeps at
//! most that many outstanding). With a window of one, a new submission abandons the previous one,
//! as [`Submission`] says.

use ordo_core::{ClientId, Command, RequestId, Submission};
use std::collections::{BTreeMap, VecDeque};

/// A request in flight.
#[derive(Clone, Debug)]
pub struct InFlight {
    /// The driver's number for the operation.
    pub op: u64,
    /// What to execute.
    pub command: Command,
}

/// A client's requests in flight and the submissions waiting for room.
#[derive(Debug)]
pub struct ClientPipeline {
    client: ClientId,
    window: u64,
    next_number: u64,
    in_flight: BTreeMap<u64, InFlight>,
    waiting: VecDeque<Submission>,
}

impl ClientPipeline {
    /// An empty pipeline for `client`, numbering from 1.
    pub fn new(client: ClientId, window: usize) -> Self {
        assert!(window > 0, "a client has at least one request in flight");
        ClientPipeline {
            client,
            window: window as u64,
            next_number: 1,
            in_flight: BTreeMap::new(),
            waiting: VecDeque::new(),
        }
    }

    /// The acknowledgement mark: every request below it was answered or given up.
    pub fn acked_below(&self) -> u64 {
        self.in_flight.keys().next().copied().unwrap_or(self.next_number)
    }

    /// The number the next request will get.
    pub fn next_number(&self) -> u64 {
        self.next_number
    }

    /// Takes a submission; returns the ids of the requests that started (to send them).
    pub fn submit(&mut self, submission: Submission) -> Vec<RequestId> {
        if self.window == 1 {
            self.in_flight.clear();
            self.waiting.clear();
        }
        self.waiting.push_back(submission);
        self.start_waiting()
    }

    /// The request `number` was answered: returns its operation (`None` if it is not in flight)
    /// and the ids of the requests that started because the mark moved.
    pub fn complete(&mut self, number: u64) -> (Option<u64>, Vec<RequestId>) {
        let Some(done) = self.in_flight.remove(&number) else { return (None, Vec::new()) };
        (Some(done.op), self.start_waiting())
    }

    /// The driver gave up on operation `op`: its request stops (or never starts). Returns the
    /// ids of the requests that started because the mark moved.
    pub fn abandon(&mut self, op: u64) -> Vec<RequestId> {
        self.waiting.retain(|waiting| waiting.op != op);
        self.in_flight.retain(|_, request| request.op != op);
        self.start_waiting()
    }

    /// Request `number`, if it is in flight.
    pub fn get(&self, number: u64) -> Option<&InFlight> {
        self.in_flight.get(&number)
    }

    /// The requests in flight, lowest number first.
    pub fn in_flight(&self) -> impl Iterator<Item = (RequestId, &InFlight)> {
        self.in_flight.iter().map(|(&number, request)| (RequestId { client: self.client, number }, request))
    }

    /// True when no request is in flight or waiting.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.waiting.is_empty()
    }

    /// Panics if a request lies outside the window above the mark or bears a number not given.
    pub fn check_invariants(&self) {
        let mark = self.acked_below();
        for &number in self.in_flight.keys() {
            assert!(number >= mark && number < mark + self.window, "requests stay within the window");
            assert!(number < self.next_number, "requests in flight were numbered");
        }
        assert!(self.waiting.len() as u64 <= self.window, "at most a window of submissions waits");
    }

    fn start_waiting(&mut self) -> Vec<RequestId> {
        let mut started = Vec::new();
        while self.next_number < self.acked_below() + self.window {
            let Some(submission) = self.waiting.pop_front() else { break };
            let number = self.next_number;
            self.next_number += 1;
            self.in_flight.insert(number, InFlight { op: submission.op, command: submission.command });
            started.push(RequestId { client: self.client, number });
        }
        started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submission(op: u64) -> Submission {
        Submission { op, command: Command::get("k") }
    }

    #[test]
    fn a_slow_request_holds_the_window_back() {
        // Goal: numbers stay within `window` of the lowest request in flight, whatever the
        // order of answers, and a waiting submission starts when the mark moves.
        let mut pipeline = ClientPipeline::new(ClientId(7), 2);
        assert_eq!(pipeline.submit(submission(10)).len(), 1);
        assert_eq!(pipeline.submit(submission(11)).len(), 1);
        assert_eq!(pipeline.complete(2), (Some(11), Vec::new()), "3 does not fit above mark 1 yet");
        assert!(pipeline.submit(submission(12)).is_empty(), "it waits");
        let (op, started) = pipeline.complete(1);
        assert_eq!(op, Some(10));
        assert_eq!(started, vec![RequestId { client: ClientId(7), number: 3 }]);
        assert_eq!(pipeline.acked_below(), 3);
        assert_eq!(pipeline.complete(1), (None, Vec::new()), "answered once");
        pipeline.check_invariants();
    }

    #[test]
    fn abandoning_moves_the_mark_and_a_window_of_one_replaces() {
        // Goal: an abandoned operation never completes; with a window of one a submission
        // abandons the one before it.
        let mut pipeline = ClientPipeline::new(ClientId(1), 2);
        pipeline.submit(submission(1));
        pipeline.submit(submission(2));
        assert!(pipeline.abandon(1).is_empty());
        assert_eq!(pipeline.acked_below(), 2);
        assert_eq!(pipeline.complete(1), (None, Vec::new()));
        let mut single = ClientPipeline::new(ClientId(2), 1);
        single.submit(submission(5));
        single.submit(submission(6));
        assert_eq!(single.in_flight().map(|(id, r)| (id.number, r.op)).collect::<Vec<_>>(), vec![(2, 6)]);
        single.check_invariants();
    }
}
