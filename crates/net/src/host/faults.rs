//! The fault plan as the host applies it: network verdicts for outgoing datagrams, node faults
//! (crash, pause, clock jump and drift) for the nodes it hosts, all timed from the host's start.

use crate::clock::SkewedClock;
use crate::faults::{FaultShim, NodeFault, Verdict};
use ordo_core::NodeId;

/// The fault shim, the monotonic start its plan is timed from, and the pause it imposed.
pub(super) struct Faults {
    shim: FaultShim,
    start_ns: u64,
    /// The end of the latest pause, as time since `start_ns` (0: never paused).
    paused_until_ns: u64,
}

impl Faults {
    pub(super) fn new(shim: FaultShim, start_ns: u64) -> Self {
        Faults { shim, start_ns, paused_until_ns: 0 }
    }

    /// True while a pause fault holds the process (it then reads no datagrams).
    pub(super) fn is_paused(&self, now: u64) -> bool {
        self.paused_until_ns > now.saturating_sub(self.start_ns)
    }

    /// When the latest pause ends (monotonic), if there was one.
    pub(super) fn pause_end(&self) -> Option<u64> {
        (self.paused_until_ns > 0).then_some(self.start_ns + self.paused_until_ns)
    }

    /// The fate of a datagram sent at `now` from node `from` to node `to`.
    pub(super) fn decide(&mut self, now: u64, from: u32, to: u32) -> Verdict {
        self.shim.decide(now - self.start_ns, from, to)
    }

    /// Dropped by partition, by loss, duplicated, delayed.
    pub(super) fn counts(&self) -> [u64; 4] {
        self.shim.counts
    }

    /// Applies the node faults due by `now` to the hosted nodes `ids`. A crash ends the process.
    pub(super) fn apply_node_faults(&mut self, now: u64, ids: impl Iterator<Item = NodeId>, clock: &mut SkewedClock) {
        if self.shim.is_empty() {
            return;
        }
        let elapsed = now - self.start_ns;
        for id in ids {
            for fault in self.shim.due_node_faults(elapsed, id.0) {
                match fault {
                    NodeFault::Crash => {
                        eprintln!("fault plan: crashing {id}");
                        std::process::exit(137);
                    }
                    NodeFault::Pause(until_ns) => self.paused_until_ns = self.paused_until_ns.max(until_ns),
                    NodeFault::ClockJump(delta_ns) => clock.jump(delta_ns),
                    NodeFault::ClockDrift(drift_ppm) => clock.set_drift(drift_ppm),
                }
            }
        }
    }
}
