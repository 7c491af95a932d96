//! A node's queue of inputs waiting for its CPU: arrival order, except that urgent messages
//! (`Protocol::is_urgent`) go after the urgent ones already queued and before everything else.

use std::collections::VecDeque;

/// Inputs waiting for the CPU; the first `urgent` of `items` are the urgent ones.
#[derive(Debug)]
pub(super) struct Inbox<T> {
    items: VecDeque<T>,
    urgent: usize,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox { items: VecDeque::new(), urgent: 0 }
    }
}

impl<T> Inbox<T> {
    /// Queues `item`: an urgent one after the urgent ones already queued, anything else last.
    pub(super) fn push(&mut self, item: T, urgent: bool) {
        if urgent {
            self.items.insert(self.urgent, item);
            self.urgent += 1;
        } else {
            self.items.push_back(item);
        }
        assert!(self.urgent <= self.items.len(), "urgent inputs are queued inputs");
    }

    /// The next input for the CPU.
    pub(super) fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        self.urgent = self.urgent.saturating_sub(1);
        assert!(self.urgent <= self.items.len(), "urgent inputs are queued inputs");
        Some(item)
    }

    /// Forgets every queued input (a crash).
    pub(super) fn clear(&mut self) {
        self.items.clear();
        self.urgent = 0;
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Inbox;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::VecDeque;

    /// Goal: the inbox serves what a naive two-queue model serves (urgent items first, each
    /// class in arrival order). Method: random pushes, pops and clears, compared step by step.
    #[test]
    fn inbox_serves_urgent_first_each_class_in_arrival_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for _ in 0..1000 {
            let mut inbox = Inbox::default();
            let (mut urgent, mut ordinary) = (VecDeque::new(), VecDeque::new());
            for step in 0..64u32 {
                match rng.random_range(0..10) {
                    0..=4 => {
                        let is_urgent = rng.random_bool(0.3);
                        inbox.push(step, is_urgent);
                        if is_urgent { urgent.push_back(step) } else { ordinary.push_back(step) }
                    }
                    5..=8 => assert_eq!(inbox.pop(), urgent.pop_front().or_else(|| ordinary.pop_front())),
                    _ => {
                        inbox.clear();
                        urgent.clear();
                        ordinary.clear();
                    }
                }
                assert_eq!(inbox.len(), urgent.len() + ordinary.len());
                assert_eq!(inbox.is_empty(), urgent.is_empty() && ordinary.is_empty());
            }
        }
    }
}
