//! Deadline-Ordered Multicast (paper §4): the receiver's early-buffer (released in deadline
//! order once the local clock passes the deadline), the receiver's one-way-delay estimator, and
//! the sender's latency bound. Pure code, checked against naive oracles below.

use ordo_core::{ClientId, NodeId};
use std::collections::{BTreeMap, VecDeque};

/// The early-buffer: requests held until their deadline, keyed by the log's total order.
#[derive(Clone, Debug)]
pub struct EarlyBuffer<T> {
    held: BTreeMap<(u64, ClientId, u64), T>,
    capacity: usize,
}

impl<T> EarlyBuffer<T> {
    /// An empty buffer that holds at most `capacity` requests.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "an early-buffer holds something");
        EarlyBuffer { held: BTreeMap::new(), capacity }
    }

    /// Holds `item` under `order`; gives it back when the buffer is full or the order is taken.
    pub fn insert(&mut self, order: (u64, ClientId, u64), item: T) -> Result<(), T> {
        if self.held.len() >= self.capacity || self.held.contains_key(&order) {
            return Err(item);
        }
        self.held.insert(order, item);
        Ok(())
    }

    /// The earliest deadline held.
    pub fn next_deadline(&self) -> Option<u64> {
        self.held.keys().next().map(|order| order.0)
    }

    /// Takes the earliest request if its deadline is at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<((u64, ClientId, u64), T)> {
        if self.next_deadline()? > now_ns {
            return None;
        }
        self.held.pop_first()
    }

    /// Takes the item held under `order`.
    pub fn remove(&mut self, order: &(u64, ClientId, u64)) -> Option<T> {
        self.held.remove(order)
    }

    /// Requests held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Drops everything (view change: clients retry).
    pub fn clear(&mut self) {
        self.held.clear();
    }
}

/// How a receiver turns delay samples into an estimate (paper §4, App. D.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorOptions {
    /// Samples kept per sender (the paper uses 1000).
    pub window: usize,
    /// Which percentile of the window (the paper's median is 50).
    pub percentile: u8,
    /// β in `M + β(σS + σR)` (the paper uses 3).
    pub beta: u64,
    /// D: estimates outside `(0, D)` become D (the paper uses 200 µs).
    pub max_ns: u64,
    /// Senders tracked; samples from more are ignored.
    pub senders_max: usize,
}

/// One sender's sliding window of samples.
#[derive(Clone, Debug, Default)]
struct Window {
    arrival: VecDeque<i64>,
    sorted: Vec<i64>,
    /// The error bound the sender's clock last claimed (its σ).
    sender_error_ns: u64,
}

/// The receiver's per-sender one-way-delay estimator: a sliding window of
/// `receive − send` samples, its percentile (moving median by default), plus β times the two
/// clocks' error bounds, clamped to D.
#[derive(Clone, Debug)]
pub struct OwdEstimator {
    options: EstimatorOptions,
    windows: BTreeMap<NodeId, Window>,
}

impl OwdEstimator {
    /// An estimator with no samples.
    pub fn new(options: EstimatorOptions) -> Self {
        assert!(options.window > 0, "a window holds samples");
        assert!(options.percentile <= 100, "a percentile is at most 100");
        OwdEstimator { options, windows: BTreeMap::new() }
    }

    /// Records a sample and the sender clock's claimed error; returns false when the sender
    /// could not be tracked.
    pub fn record(&mut self, sender: NodeId, send_ns: u64, receive_ns: u64, sender_error_ns: u64) -> bool {
        if !self.windows.contains_key(&sender) && self.windows.len() >= self.options.senders_max {
            return false;
        }
        let sample = receive_ns as i64 - send_ns as i64;
        let window = self.windows.entry(sender).or_default();
        window.sender_error_ns = sender_error_ns;
        if window.arrival.len() == self.options.window {
            let oldest = window.arrival.pop_front().expect("a full window has samples");
            let at = window.sorted.binary_search(&oldest).expect("every sample is in the sorted copy");
            window.sorted.remove(at);
        }
        window.arrival.push_back(sample);
        let at = window.sorted.binary_search(&sample).unwrap_or_else(|at| at);
        window.sorted.insert(at, sample);
        debug_assert_eq!(window.arrival.len(), window.sorted.len());
        true
    }

    /// The estimate for `sender` given the receiver clock's error bound σR (σS is what the
    /// sender last claimed): D until there are samples, and whenever it leaves `(0, D)`.
    pub fn estimate(&self, sender: NodeId, receiver_error_ns: u64) -> u64 {
        let Some(window) = self.windows.get(&sender).filter(|w| !w.sorted.is_empty()) else {
            return self.options.max_ns;
        };
        let rank = (window.sorted.len() - 1) * usize::from(self.options.percentile) / 100;
        let margin = self.options.beta.saturating_mul(window.sender_error_ns.saturating_add(receiver_error_ns));
        clamp_estimate(window.sorted[rank], margin, self.options.max_ns)
    }
}

/// `M + margin` if it lies in `(0, D)`, else D (paper §4).
pub fn clamp_estimate(percentile_ns: i64, margin_ns: u64, max_ns: u64) -> u64 {
    let estimate = percentile_ns.saturating_add(i64::try_from(margin_ns).unwrap_or(i64::MAX));
    if estimate <= 0 || estimate as u64 >= max_ns { max_ns } else { estimate as u64 }
}

/// The sender's latency bound: the largest estimate the replicas piggy-backed.
#[derive(Clone, Debug)]
pub struct LatencyBound {
    per_replica: Vec<u64>,
}

impl LatencyBound {
    /// Every replica starts at `initial_ns`.
    pub fn new(replicas: usize, initial_ns: u64) -> Self {
        LatencyBound { per_replica: vec![initial_ns; replicas] }
    }

    /// Replica `rank` says its estimate for us is `owd_ns`.
    pub fn update(&mut self, rank: usize, owd_ns: u64) {
        if let Some(slot) = self.per_replica.get_mut(rank) {
            *slot = owd_ns;
        }
    }

    /// `l = max_r OWD~_r`.
    pub fn bound_ns(&self) -> u64 {
        self.per_replica.iter().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn options(window: usize, percentile: u8) -> EstimatorOptions {
        EstimatorOptions { window, percentile, beta: 3, max_ns: 200_000, senders_max: 4 }
    }

    proptest! {
        #[test]
        fn estimator_matches_naive_oracle(
            samples in proptest::collection::vec((0u64..400_000, 0u64..400_000), 1..300),
            window in 1usize..50,
            percentile in 0u8..=100,
            sigma in 0u64..5_000,
        ) {
            // Goal: the incremental window equals sorting the last `window` samples every time.
            let mut estimator = OwdEstimator::new(options(window, percentile));
            let mut all = Vec::new();
            for (send, receive) in samples {
                estimator.record(NodeId(1), send, receive, sigma);
                all.push(receive as i64 - send as i64);
                let mut last: Vec<i64> = all.iter().rev().take(window).copied().collect();
                last.sort_unstable();
                let rank = (last.len() - 1) * usize::from(percentile) / 100;
                let naive = last[rank] + 3 * 2 * sigma as i64;
                let expected = if naive <= 0 || naive >= 200_000 { 200_000 } else { naive as u64 };
                prop_assert_eq!(estimator.estimate(NodeId(1), sigma), expected);
            }
        }

        #[test]
        fn early_buffer_releases_in_deadline_order(
            inserts in proptest::collection::vec((0u64..1_000, 0u64..5), 1..100),
            clocks in proptest::collection::vec(0u64..1_200, 1..20),
        ) {
            // Goal: whatever the clock does (also backwards), what is released is exactly the
            // held items with deadline ≤ clock, smallest first, like a sorted list would.
            let mut buffer = EarlyBuffer::new(1_000);
            let mut oracle: Vec<(u64, ClientId, u64)> = Vec::new();
            for (i, (deadline, client)) in inserts.iter().enumerate() {
                let order = (*deadline, ClientId(*client), i as u64);
                prop_assert!(buffer.insert(order, ()).is_ok());
                oracle.push(order);
            }
            oracle.sort_unstable();
            for now in clocks {
                let mut released = Vec::new();
                while let Some((order, ())) = buffer.pop_due(now) {
                    released.push(order);
                }
                let due: Vec<_> = oracle.iter().copied().filter(|o| o.0 <= now).collect();
                oracle.retain(|o| o.0 > now);
                prop_assert_eq!(released, due);
            }
        }
    }

    #[test]
    fn estimator_edge_cases() {
        // Goal (spec §11 #15): outliers do not move the median, negative or too-large
        // estimates become D, no samples means D, the sender takes the maximum.
        let mut estimator = OwdEstimator::new(options(5, 50));
        assert_eq!(estimator.estimate(NodeId(1), 0), 200_000);
        for receive in [1_040, 1_050, 1_045, 900_000, 1_042] {
            estimator.record(NodeId(1), 1_000, receive, 1);
        }
        assert_eq!(estimator.estimate(NodeId(1), 1), 45 + 6);
        estimator.record(NodeId(2), 10_000, 1_000, 0);
        assert_eq!(estimator.estimate(NodeId(2), 0), 200_000);
        assert_eq!(clamp_estimate(250_000, 0, 200_000), 200_000);
        let mut bound = LatencyBound::new(3, 80_000);
        bound.update(1, 120_000);
        bound.update(2, 50_000);
        assert_eq!(bound.bound_ns(), 120_000);
    }
}
