//! The event queue: events in order of (time, scheduling sequence), so equal times keep the
//! order they were scheduled in and a run is a fixed function of its seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Bits of a heap key for the slab index: at most 16 million events wait in the heap at once.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The heap key of an event: its time in the high 64 bits, then its sequence (40 bits: a
/// trillion events), then its slab index, so keys order as (time, sequence).
fn heap_key(time: u64, sequence: u64, slot: u32) -> u128 {
    assert!(sequence < 1 << (64 - SLOT_BITS), "at most 2^40 events per run");
    assert!(u64::from(slot) <= SLOT_MASK, "at most 2^24 events wait at once");
    (u128::from(time) << 64) | u128::from(sequence << SLOT_BITS | u64::from(slot))
}

fn time_of(key: u128) -> u64 {
    (key >> 64) as u64
}

fn sequence_of(key: u128) -> u64 {
    key as u64 >> SLOT_BITS
}

/// Events by (time, sequence): a heap for events at any time, and a FIFO for events scheduled a
/// fixed delay after now (client timeouts), which arrive in time order already. Every operation
/// has a timeout a second ahead that is almost always stale when it falls due: in the heap they
/// were most of its entries (35 000 of 36 000 in a 10 s Multi-Paxos run), and every pop sifted
/// through them.
pub(super) struct EventQueue<E> {
    /// Keys of events at any time ([`heap_key`]): one integer compares faster than a tuple, and
    /// the pop that sifts through the heap on every event is the queue's main cost.
    heap: BinaryHeap<Reverse<u128>>,
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
        self.heap.push(Reverse(heap_key(time, self.sequence, slot)));
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
        let heap_first = self.heap.peek().map(|&Reverse(key)| (time_of(key), sequence_of(key)));
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
        let Reverse(key) = self.heap.pop().expect("peeked");
        let slot = (key as u64 & SLOT_MASK) as u32;
        self.free.push(slot);
        Some((time, self.slab[slot as usize].take().expect("scheduled event present")))
    }
}
