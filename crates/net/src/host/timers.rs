//! The timer heap: the runner's armed timers by monotonic deadline, handed back when due.

use super::Local;
use crate::clock::{SkewedClock, monotonic_ns};
use ordo_core::{Deadline, Protocol};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Pending timers ordered by deadline: (monotonic deadline, local node, generation, timer).
type TimerHeap<T> = BinaryHeap<Reverse<(u64, usize, u64, T)>>;

/// The armed timers of every local node by monotonic deadline. It owns only the heap: whether an
/// entry is still live is the runner's to say (a moved or cancelled timer leaves a stale entry,
/// which the runner ignores when it comes up).
pub(super) struct Timers<P: Protocol> {
    heap: TimerHeap<P::Timer>,
}

impl<P: Protocol> Timers<P> {
    pub(super) fn new() -> Self {
        Timers { heap: BinaryHeap::new() }
    }

    /// Arms `timer` of local node `index` for the node's local `deadline`, read on `clock`.
    pub(super) fn arm(
        &mut self,
        clock: &SkewedClock,
        index: usize,
        generation: u64,
        deadline: Deadline,
        timer: P::Timer,
    ) {
        let at = match deadline {
            Deadline::After(local_ns) => monotonic_ns() + clock.monotonic_duration(local_ns).max(1),
            Deadline::At(local_ns) => clock.monotonic_at(local_ns),
        };
        self.heap.push(Reverse((at, index, generation, timer)));
    }

    /// Arms again a timer that came up at `now` before its absolute target `local_ns` (the clock
    /// jumped back): it waits until the clock reads the target again.
    pub(super) fn rearm(
        &mut self,
        clock: &SkewedClock,
        now: u64,
        index: usize,
        generation: u64,
        local_ns: u64,
        timer: P::Timer,
    ) {
        let at = clock.monotonic_at(local_ns).max(now + 1_000);
        self.heap.push(Reverse((at, index, generation, timer)));
    }

    /// The earliest entry due by `now`, taken off the heap: (local node, generation, timer).
    pub(super) fn pop_due(&mut self, now: u64) -> Option<(usize, u64, P::Timer)> {
        let Reverse((at, ..)) = self.heap.peek()?;
        if *at > now {
            return None;
        }
        let Reverse((_, index, generation, timer)) = self.heap.pop().expect("peeked");
        Some((index, generation, timer))
    }

    /// When the earliest entry is due.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, ..))| *at)
    }

    /// Stale entries of moved or cancelled timers are skipped lazily; drops them when they pile up.
    pub(super) fn prune(&mut self, locals: &[Local<P>]) {
        let live: usize = locals.iter().map(|l| l.runner.timer_count()).sum();
        if self.heap.len() > 4 * live + 1_024 {
            self.heap.retain(|Reverse((_, index, generation, timer))| {
                locals[*index].runner.is_timer_pending(timer, *generation)
            });
        }
    }
}
