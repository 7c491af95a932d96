//! Counters every node keeps, read the same way for every protocol.

use std::collections::BTreeMap;

/// A node's counters. Drivers add the network counters; the protocol counts commits and drops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Commands this node committed through the protocol's fast path (coordinator-side count).
    pub fast_path_commits: u64,
    /// Commands this node committed through the slow path (or the only path).
    pub slow_path_commits: u64,
    /// Commands applied to this node's state machine.
    pub executed: u64,
    /// Inputs ignored, by reason (stale view, unknown sender, full queue...).
    pub dropped: BTreeMap<&'static str, u64>,
    /// Other protocol events worth counting (view changes, state transfers...).
    pub events: BTreeMap<&'static str, u64>,
}

impl NodeStats {
    /// Counts an ignored input.
    pub fn drop_input(&mut self, reason: &'static str) {
        *self.dropped.entry(reason).or_default() += 1;
    }

    /// Counts a protocol event.
    pub fn count(&mut self, event: &'static str) {
        *self.events.entry(event).or_default() += 1;
    }

    /// Adds another node's counters to these.
    pub fn absorb(&mut self, other: &NodeStats) {
        self.fast_path_commits += other.fast_path_commits;
        self.slow_path_commits += other.slow_path_commits;
        self.executed += other.executed;
        for (reason, n) in &other.dropped {
            *self.dropped.entry(reason).or_default() += n;
        }
        for (event, n) in &other.events {
            *self.events.entry(event).or_default() += n;
        }
    }
}
