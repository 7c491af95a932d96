//! The event queue: events in order of (time, scheduling sequence), so equal times keep the
//! order they were scheduled in and a run is a fixed function of its seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Events by (time, sequence): a heap for events at any time, and a FIFO for events scheduled a
/// fixed delay after now (client timeouts), which arrive in time order already. Every operation
/// has a timeout a second ahead that is almost always stale when it falls due: in the heap they
/// were most of its entries (35 000 of 36 000 in a 10 s Multi-Paxos run), and every pop sifted
/// through them.
pub(super) struct EventQueue<E> {
    /// (time, sequence, slab index) of events at any time.
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// The heap's events, by index; `None` marks a free entry.
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    /// (time, sequence, event) of events scheduled in time order.
    in_order: VecDeque<(u64, u64, E)>,
    /// Events scheduled so far: the next one's tie-breaker.
    sequence: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            in_order: VecDeque::new(),
            sequence: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `time`.
    pub(super) fn push(&mut self, time: u64, event: E) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = Some(event);
                slot
            }
            None => {
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.sequence += 1;
        self.heap.push(Reverse((time, self.sequence, slot)));
    }

    /// Schedules `event` at `time`, no earlier than every event scheduled through this method
    /// before (a fixed delay after a clock that never goes back).
    pub(super) fn push_in_order(&mut self, time: u64, event: E) {
        assert!(self.in_order.back().is_none_or(|&(last, _, _)| last <= time), "in-order events come in time order");
        self.sequence += 1;
        self.in_order.push_back((time, self.sequence, event));
    }

    /// Takes the first event, with its time, unless it falls after `end`.
    pub(super) fn pop_through(&mut self, end: u64) -> Option<(u64, E)> {
        let heap_first = self.heap.peek().map(|&Reverse((time, sequence, _))| (time, sequence));
        let fifo_first = self.in_order.front().map(|&(time, sequence, _)| (time, sequence));
        // Sequences are unique: the two firsts never tie.
        let from_fifo = match (heap_first, fifo_first) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(heap), Some(fifo)) => fifo < heap,
        };
        let (time, _) = if from_fifo { fifo_first } else { heap_first }?;
        if time > end {
            return None;
        }
        if from_fifo {
            return self.in_order.pop_front().map(|(time, _, event)| (time, event));
        }
        let Reverse((_, _, slot)) = self.heap.pop().expect("peeked");
        self.free.push(slot);
        Some((time, self.slab[slot as usize].take().expect("scheduled event present")))
    }
}
