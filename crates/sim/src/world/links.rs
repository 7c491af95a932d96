//! The network: FIFO links with a delay and jitter per message, and the network faults
//! (partitions, loss, duplication, reordering, slow periods) that fault events switch on and off.

use super::*;

/// Per-link order: each link is FIFO unless a reorder fault delays a message on purpose.
#[derive(Default)]
pub(crate) struct LinkState {
    /// Messages sent on the link so far.
    pub(super) sent: u64,
    /// The latest arrival time scheduled on the link: a later message never arrives before it.
    pub(super) last_arrival_ns: u64,
    /// The highest link sequence number delivered so far.
    pub(super) delivered: Option<u64>,
}

/// Every link's state: a dense table for clusters of up to `DENSE_NODES_MAX` nodes (a link
/// lookup per message is on the simulator's hot path), a map with a fixed hasher beyond.
pub(crate) enum Links {
    /// Link (from, to) at `from * nodes + to`.
    Dense { nodes: usize, links: Vec<LinkState> },
    /// Links by (from, to); never iterated.
    Sparse(rustc_hash::FxHashMap<(NodeId, NodeId), LinkState>),
}

/// Largest cluster whose links are held densely (256 × 256 × 24 bytes: 1.5 MB).
const DENSE_NODES_MAX: usize = 256;

impl Links {
    /// The links of a cluster of `nodes` nodes, all fresh.
    pub(crate) fn new(nodes: usize) -> Self {
        if nodes <= DENSE_NODES_MAX {
            Links::Dense { nodes, links: (0..nodes * nodes).map(|_| LinkState::default()).collect() }
        } else {
            Links::Sparse(rustc_hash::FxHashMap::default())
        }
    }

    /// The link from `from` to `to`.
    pub(crate) fn get(&mut self, from: NodeId, to: NodeId) -> &mut LinkState {
        match self {
            Links::Dense { nodes, links } => &mut links[from.index() * *nodes + to.index()],
            Links::Sparse(links) => links.entry((from, to)).or_default(),
        }
    }
}

/// Network fault state, changed by fault events.
#[derive(Default)]
pub(crate) struct NetworkFaults {
    pub(super) partitions: Vec<(usize, Vec<bool>)>,
    pub(super) loss: Vec<(usize, f64)>,
    pub(super) duplicate: Vec<(usize, f64)>,
    pub(super) reorder: Vec<(usize, f64, u64)>,
    /// Slow periods: fault index, the nodes whose links are slow (by node index; `None`: every
    /// link) and the largest extra delay.
    pub(super) slow: Vec<(usize, Option<Vec<bool>>, u64)>,
}

impl<P: Protocol> World<P> {
    pub(super) fn transmit_all(
        &mut self,
        from: NodeId,
        to: &Targets,
        count: usize,
        message: P::Message,
        size: usize,
        depart_ns: u64,
    ) {
        // `count` is `to.len()`, which the caller already needed for the CPU cost: the last
        // target takes the message itself instead of a clone.
        for (index, target) in to.iter().enumerate() {
            if index + 1 == count {
                self.transmit(from, target, message, size, depart_ns);
                return;
            }
            self.transmit(from, target, message.clone(), size, depart_ns);
        }
    }

    pub(super) fn transmit(&mut self, from: NodeId, to: NodeId, message: P::Message, size: usize, depart_ns: u64) {
        let sender = &mut self.nodes[from.index()].traffic;
        sender.messages_sent += 1;
        sender.bytes_sent += size as u64;
        self.outcome.network.sent += 1;
        let link = self.links.get(from, to);
        let sequence = link.sent;
        link.sent += 1;
        if from == to {
            let input = Input::Message { from, message, size, sequence };
            self.schedule(depart_ns, Event::Arrive { to, input });
            return;
        }
        if self.network_faults.partitions.iter().any(|(_, side)| side[from.index()] != side[to.index()]) {
            self.outcome.network.dropped_partition += 1;
            return;
        }
        let loss: f64 = self.network_faults.loss.iter().map(|(_, p)| *p).fold(0.0, f64::max);
        if loss > 0.0 && self.network_rng.random_bool(loss) {
            self.outcome.network.dropped_loss += 1;
            return;
        }
        let duplicate: f64 = self.network_faults.duplicate.iter().map(|(_, p)| *p).fold(0.0, f64::max);
        if duplicate > 0.0 && self.network_rng.random_bool(duplicate) {
            self.outcome.network.duplicated += 1;
            let arrival = self.arrival_ns(from, to, depart_ns);
            let input = Input::Message { from, message: message.clone(), size, sequence };
            self.schedule(arrival, Event::Arrive { to, input });
        }
        let arrival = self.arrival_ns(from, to, depart_ns);
        self.schedule(arrival, Event::Arrive { to, input: Input::Message { from, message, size, sequence } });
    }

    /// When a message leaving now arrives: the link's delay plus jitter, but never before an
    /// earlier message of the same link (links are FIFO; equal times keep sending order, as the
    /// event queue breaks ties by scheduling order), unless a reorder fault delays it on purpose.
    pub(super) fn arrival_ns(&mut self, from: NodeId, to: NodeId, depart_ns: u64) -> u64 {
        let (base, jitter) = if self.topology.same_machine(from, to) {
            (self.config.latency.machine_ns, 0)
        } else {
            let sites = (self.nodes[from.index()].spec.site, self.nodes[to.index()].spec.site);
            let jitter = self.jitter.as_ref().map_or(0.0, |j| j.sample(&mut self.network_rng)) as u64;
            (self.config.latency.base_ns(sites.0, sites.1), jitter)
        };
        let slow = self.slow_delay_ns(from, to);
        let mut extra = 0;
        for &(_, probability, delay_max_ns) in &self.network_faults.reorder {
            if self.network_rng.random_bool(probability) {
                extra = extra.max(self.network_rng.random_range(0..delay_max_ns));
            }
        }
        let link = self.links.get(from, to);
        let in_order = (depart_ns + base + jitter + slow).max(link.last_arrival_ns);
        if extra > 0 {
            // Delayed past its successors: the one way a link reorders.
            self.outcome.network.reordered += 1;
            return in_order + extra;
        }
        link.last_arrival_ns = in_order;
        in_order
    }

    /// The extra delay of the slow periods on the link from `from` to `to`: the largest of one
    /// uniform draw per period that covers the link. Draws nothing when no period is on, so a
    /// plan without slow periods consumes the network's randomness as before they existed.
    fn slow_delay_ns(&mut self, from: NodeId, to: NodeId) -> u64 {
        let mut slow = 0;
        for (_, nodes, delay_max_ns) in &self.network_faults.slow {
            let covered = nodes.as_ref().is_none_or(|mask| mask[from.index()] || mask[to.index()]);
            if covered {
                slow = slow.max(self.network_rng.random_range(0..=*delay_max_ns));
            }
        }
        if slow > 0 {
            self.outcome.network.slowed += 1;
        }
        slow
    }
}
