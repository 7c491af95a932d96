//! The client's side of the client table: requests in flight, numbered, within a window.
//!
//! A client numbers its requests 1, 2, 3... and keeps at most `window` numbers in flight above
//! its acknowledgement mark (the lowest number still in flight), which it sends with every
//! request so the replicas' [`ClientTable`](crate::client_table::ClientTable) can forget older
//! results. A slow request holds the mark back, so a submission whose number would not fit
//! waits here until the mark moves (at most `window` submissions wait, since the driver keeps at
//! most that many outstanding). With a window of one, a new submission abandons the previous one,
//! as [`Submission`] says.
//!
//! Retries: each request remembers when it was last sent and how often, and
//! [`ClientPipeline::due`] picks those unanswered for their retry period. A client sweeps on one
//! periodic timer that it stops when idle, rather than arming a timer per request: a busy
//! client's per-request timers were almost all cancelled, yet each cost an event (in the
//! simulator, most of the event heap).
//!
//! Back-off: a request's retry period doubles with each resend, up to [`RETRY_DOUBLINGS_MAX`]
//! doublings ([`retry_after`]), and a new request starts again from the configured period. A
//! request unanswered for one period was most likely lost, and is resent at once; one still
//! unanswered after several resends waits on something slower (a view change, a replica
//! catching up, an overloaded leader), which every client resending at the same fixed period
//! would only load further. Nezha's client, which keeps its own timer, follows the same rule.

use ordo_core::{ClientId, Command, Outbox, Protocol, RequestId, Submission};
use std::collections::VecDeque;

/// Doublings of a request's retry period at most: a request resent again and again waits up to
/// 8 times the configured period between resends (160 ms at the 20 ms default of most
/// protocols, 80 ms for Nezha's 10 ms). The simulator's liveness check wants progress within
/// 200 ms of the faults healing: with 32 times, a Nezha client whose one resend in that window
/// went through a crashed proxy waited 320 ms for the next (seed 206 of the transactions and
/// expiry campaign).
pub const RETRY_DOUBLINGS_MAX: u32 = 3;
const _: () = assert!(RETRY_DOUBLINGS_MAX < u64::BITS, "the doubled period is a shift of the configured one");

/// How long to wait for an answer to a request sent `sends` times (1 after the first send)
/// before sending it again: `retry_ns`, doubled for each resend, at most `RETRY_DOUBLINGS_MAX`
/// times (saturating: a huge configured period stays huge rather than wrapping).
pub fn retry_after(retry_ns: u64, sends: u32) -> u64 {
    assert!(sends > 0, "a request is sent before it waits for an answer");
    retry_ns.saturating_mul(1 << (sends - 1).min(RETRY_DOUBLINGS_MAX))
}

/// How long to wait before resending a command of `command_bytes` encoded bytes sent `sends`
/// times: [`retry_after`], plus its [`large_command_wait`].
pub fn retry_wait(retry_ns: u64, sends: u32, command_bytes: usize) -> u64 {
    retry_after(retry_ns, sends).saturating_add(large_command_wait(command_bytes, sends))
}

/// The extra wait before resending a large command sent `sends` times: its
/// [`transfer_allowance_ns`], doubled for each resend as [`retry_after`] doubles (0 for a
/// command of at most [`ALLOWANCE_FREE_BYTES`], whose resends cost little).
pub fn large_command_wait(command_bytes: usize, sends: u32) -> u64 {
    retry_after(transfer_allowance_ns(command_bytes), sends)
}

/// Extra wait before resending a command of `bytes` encoded bytes: the time it takes to move at
/// [`TRANSFER_BYTES_PER_SECOND`], so that a large value is not sent again while its first copy
/// is still on its way (a Tempo client resending a 16 MiB SET every 40 ms made each attempt a
/// new 16 MiB proposal, and the cluster slower with each).
/// A command of at most [`ALLOWANCE_FREE_BYTES`] gets none: it moves in well under a retry period.
pub fn transfer_allowance_ns(bytes: usize) -> u64 {
    let beyond = bytes.saturating_sub(ALLOWANCE_FREE_BYTES) as u64;
    beyond.saturating_mul(1_000_000_000) / TRANSFER_BYTES_PER_SECOND
}

/// Bytes of a command that [`transfer_allowance_ns`] does not count.
pub const ALLOWANCE_FREE_BYTES: usize = 64 * 1024;

/// The rate [`transfer_allowance_ns`] assumes: well below what the runtime moves between
/// processes on one machine, so that a loaded machine still fits in the allowance.
pub const TRANSFER_BYTES_PER_SECOND: u64 = 50_000_000;

/// A request in flight.
#[derive(Clone, Debug)]
pub struct InFlight {
    /// Its number.
    pub number: u64,
    /// The driver's number for the operation.
    pub op: u64,
    /// What to execute.
    pub command: Command,
    /// When it was last sent (local clock).
    pub sent_ns: u64,
    /// How many times it was sent (1 from its first send): its retry period's back-off.
    pub sends: u32,
}

/// A client's requests in flight and the submissions waiting for room.
#[derive(Debug)]
pub struct ClientPipeline {
    client: ClientId,
    window: u64,
    next_number: u64,
    /// By number, ascending (numbers are handed out in order); at most a window of them.
    in_flight: VecDeque<InFlight>,
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
            in_flight: VecDeque::new(),
            waiting: VecDeque::new(),
        }
    }

    /// The acknowledgement mark: every request below it was answered or given up.
    pub fn acked_below(&self) -> u64 {
        self.in_flight.front().map_or(self.next_number, |request| request.number)
    }

    /// The number the next request will get.
    pub fn next_number(&self) -> u64 {
        self.next_number
    }

    /// Takes a submission at local time `now_ns`; returns the ids of the requests that started
    /// (to send them).
    pub fn submit(&mut self, submission: Submission, now_ns: u64) -> Vec<RequestId> {
        if self.window == 1 {
            self.in_flight.clear();
            self.waiting.clear();
        }
        self.waiting.push_back(submission);
        self.start_waiting(now_ns)
    }

    /// The request `id` was answered: returns its operation (`None` if it is not in flight)
    /// and the ids of the requests that started because the mark moved.
    ///
    /// A reply for another client id is not ours even when its number is in flight: replicas
    /// that re-execute their log after a restart send the results of an earlier incarnation of
    /// this client node (same address, numbers also from 1) to this one.
    pub fn complete(&mut self, id: RequestId, now_ns: u64) -> (Option<u64>, Vec<RequestId>) {
        if id.client != self.client {
            return (None, Vec::new());
        }
        let Some(index) = self.in_flight.iter().position(|request| request.number == id.number) else {
            return (None, Vec::new());
        };
        let done = self.in_flight.remove(index).expect("found");
        (Some(done.op), self.start_waiting(now_ns))
    }

    /// The driver gave up on operation `op`: its request stops (or never starts). Returns the
    /// ids of the requests that started because the mark moved.
    pub fn abandon(&mut self, op: u64, now_ns: u64) -> Vec<RequestId> {
        self.waiting.retain(|waiting| waiting.op != op);
        self.in_flight.retain(|request| request.op != op);
        self.start_waiting(now_ns)
    }

    /// Request `number`, if it is in flight.
    pub fn get(&self, number: u64) -> Option<&InFlight> {
        self.in_flight.iter().find(|request| request.number == number)
    }

    /// The requests in flight, lowest number first.
    pub fn in_flight(&self) -> impl Iterator<Item = (RequestId, &InFlight)> {
        self.in_flight.iter().map(|request| (RequestId { client: self.client, number: request.number }, request))
    }

    /// The requests still unanswered whose last send lies at least their backed-off retry period
    /// ([`retry_wait`] of `retry_ns`) before `now_ns`; they count as sent again now.
    pub fn due(&mut self, now_ns: u64, retry_ns: u64) -> Vec<RequestId> {
        let mut due = Vec::new();
        // A clock that jumped back makes every request due rather than none.
        let is_due = |r: &InFlight| {
            now_ns < r.sent_ns || now_ns - r.sent_ns >= retry_wait(retry_ns, r.sends, r.command.encoded_len())
        };
        for request in self.in_flight.iter_mut().filter(|r| is_due(r)) {
            request.sent_ns = now_ns;
            request.sends = request.sends.saturating_add(1);
            due.push(RequestId { client: self.client, number: request.number });
        }
        due
    }

    /// True when no request is in flight or waiting.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.waiting.is_empty()
    }

    /// Panics if a request lies outside the window above the mark or bears a number not given.
    pub fn check_invariants(&self) {
        let mark = self.acked_below();
        let numbers = self.in_flight.iter().map(|request| request.number);
        assert!(numbers.clone().zip(numbers.clone().skip(1)).all(|(a, b)| a < b), "requests by number");
        for number in numbers {
            assert!(number >= mark && number < mark + self.window, "requests stay within the window");
            assert!(number < self.next_number, "requests in flight were numbered");
        }
        assert!(self.in_flight.iter().all(|request| request.sends > 0), "requests in flight were sent");
        assert!(self.waiting.len() as u64 <= self.window, "at most a window of submissions waits");
    }

    fn start_waiting(&mut self, now_ns: u64) -> Vec<RequestId> {
        let mut started = Vec::new();
        while self.next_number < self.acked_below() + self.window {
            let Some(submission) = self.waiting.pop_front() else { break };
            let number = self.next_number;
            self.next_number += 1;
            let request =
                InFlight { number, op: submission.op, command: submission.command, sent_ns: now_ns, sends: 1 };
            self.in_flight.push_back(request);
            started.push(RequestId { client: self.client, number });
        }
        started
    }
}

/// A client's retry sweep: one timer that ticks every quarter of the configured retry period
/// while requests are in flight and stops when the client is idle, so a request is resent
/// between one and one and a quarter of the configured period after its backed-off retry
/// period ran out.
#[derive(Debug)]
pub struct RetrySweep {
    retry_ns: u64,
    armed: bool,
}

impl RetrySweep {
    /// A sweep that resends requests unanswered for `retry_ns`, backed off per request.
    pub fn new(retry_ns: u64) -> Self {
        RetrySweep { retry_ns, armed: false }
    }

    /// Arms `timer` unless it is armed already or nothing is in flight.
    pub fn keep_running<P: Protocol>(&mut self, pipeline: &ClientPipeline, timer: P::Timer, out: &mut Outbox<P>) {
        if !self.armed && !pipeline.is_idle() {
            out.set_timer(timer, (self.retry_ns / 4).max(1));
            self.armed = true;
        }
    }

    /// The timer fired: the requests due for a resend (the caller sends them, then calls
    /// [`RetrySweep::keep_running`]).
    pub fn fired(&mut self, pipeline: &mut ClientPipeline, now_ns: u64) -> Vec<RequestId> {
        self.armed = false;
        pipeline.due(now_ns, self.retry_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submission(op: u64) -> Submission {
        Submission { op, command: Command::get("k") }
    }

    fn id(client: u64, number: u64) -> RequestId {
        RequestId { client: ClientId(client), number }
    }

    #[test]
    fn a_slow_request_holds_the_window_back() {
        // Goal: numbers stay within `window` of the lowest request in flight, whatever the
        // order of answers, and a waiting submission starts when the mark moves.
        let mut pipeline = ClientPipeline::new(ClientId(7), 2);
        assert_eq!(pipeline.submit(submission(10), 0).len(), 1);
        assert_eq!(pipeline.submit(submission(11), 0).len(), 1);
        assert_eq!(pipeline.complete(id(7, 2), 0), (Some(11), Vec::new()), "3 does not fit above mark 1 yet");
        assert!(pipeline.submit(submission(12), 0).is_empty(), "it waits");
        let (op, started) = pipeline.complete(id(7, 1), 0);
        assert_eq!(op, Some(10));
        assert_eq!(started, vec![RequestId { client: ClientId(7), number: 3 }]);
        assert_eq!(pipeline.acked_below(), 3);
        assert_eq!(pipeline.complete(id(7, 1), 0), (None, Vec::new()), "answered once");
        pipeline.check_invariants();
    }

    #[test]
    fn abandoning_moves_the_mark_and_a_window_of_one_replaces() {
        // Goal: an abandoned operation never completes; with a window of one a submission
        // abandons the one before it.
        let mut pipeline = ClientPipeline::new(ClientId(1), 2);
        pipeline.submit(submission(1), 0);
        pipeline.submit(submission(2), 0);
        assert!(pipeline.abandon(1, 0).is_empty());
        assert_eq!(pipeline.acked_below(), 2);
        assert_eq!(pipeline.complete(id(1, 1), 0), (None, Vec::new()));
        let mut single = ClientPipeline::new(ClientId(2), 1);
        single.submit(submission(5), 0);
        single.submit(submission(6), 0);
        assert_eq!(single.in_flight().map(|(id, r)| (id.number, r.op)).collect::<Vec<_>>(), vec![(2, 6)]);
        single.check_invariants();
    }

    #[test]
    fn a_reply_to_an_earlier_incarnation_completes_nothing() {
        // Goal: a restarted client node numbers from 1 again under a new client id; a reply
        // for its earlier incarnation's request 1 (a replica re-executing its log after a
        // restart sends one) must not complete the new request 1 with someone else's result.
        let mut pipeline = ClientPipeline::new(ClientId(2 << 32 | 5), 4);
        pipeline.submit(submission(1), 0);
        assert_eq!(pipeline.complete(id(1 << 32 | 5, 1), 0), (None, Vec::new()));
        assert_eq!(pipeline.complete(id(2 << 32 | 5, 1), 0), (Some(1), Vec::new()));
    }

    #[test]
    fn only_requests_unanswered_for_a_retry_period_are_due() {
        // Goal: a periodic sweep resends a request once its retry period ran out, not on every
        // tick; each request waits by its own count of sends.
        let mut pipeline = ClientPipeline::new(ClientId(3), 4);
        pipeline.submit(submission(1), 0);
        pipeline.submit(submission(2), 15);
        let numbers = |ids: Vec<RequestId>| ids.into_iter().map(|id| id.number).collect::<Vec<_>>();
        assert_eq!(numbers(pipeline.due(20, 20)), vec![1]);
        assert_eq!(numbers(pipeline.due(30, 20)), Vec::<u64>::new());
        assert_eq!(numbers(pipeline.due(40, 20)), vec![2], "1 was resent at 20: it waits 40 now");
        assert_eq!(numbers(pipeline.due(60, 20)), vec![1]);
        pipeline.check_invariants();
    }

    #[test]
    fn retries_back_off_up_to_a_cap_and_a_new_request_starts_afresh() {
        // Goal: a request's retry period doubles with each resend, up to RETRY_DOUBLINGS_MAX
        // doublings; a clock that jumped back makes it due at once; the next request waits one
        // configured period again. Method: a sweep every 10 ns, as a timer would tick, records
        // when request 1 is resent.
        assert_eq!(
            (1..=8).map(|sends| retry_after(20, sends)).collect::<Vec<_>>(),
            vec![20, 40, 80, 160, 160, 160, 160, 160]
        );
        assert_eq!(retry_after(u64::MAX / 2, 3), u64::MAX, "saturates");
        let mut pipeline = ClientPipeline::new(ClientId(4), 1);
        pipeline.submit(submission(1), 0);
        let resends: Vec<u64> =
            (1..=160).map(|tick| tick * 10).filter(|&now| !pipeline.due(now, 20).is_empty()).collect();
        assert_eq!(resends, vec![20, 60, 140, 300, 460, 620, 780, 940, 1100, 1260, 1420, 1580]);
        assert_eq!(pipeline.due(1000, 20).len(), 1, "the clock jumped back: due at once");
        pipeline.submit(submission(2), 1000);
        assert!(pipeline.due(1010, 20).is_empty());
        assert_eq!(pipeline.due(1020, 20).len(), 1, "a new request waits one period");
        pipeline.check_invariants();
    }
}
