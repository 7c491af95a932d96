//! Metrics publishing: the shared snapshot the HTTP responder serves, refreshed every 200 ms,
//! with the replicas' state digests refreshed every second (less often for a large state).

use super::Local;
use crate::metrics::{LocalNodeMetrics, Metrics, Transport};
use ordo_core::{NodeId, Protocol, Role, Topology};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// How often the metrics snapshot is refreshed.
const METRICS_PERIOD_NS: u64 = 200_000_000;
/// How often the replicas' state digests are recomputed (they walk every key).
const DIGEST_PERIOD_NS: u64 = 1_000_000_000;
/// The walk takes at most one part in this many of the time: a state of millions of keys,
/// whose walk stalls the node for tens of milliseconds, is hashed less often than every period.
const DIGEST_TIME_SHARE: u64 = 100;

/// The snapshot shared with the metrics server, when it and the digests are next due, and the
/// digests last computed (by node id).
pub(super) struct Publisher {
    metrics: Arc<Mutex<Metrics>>,
    due_ns: u64,
    digest_due_ns: u64,
    digests: BTreeMap<u32, u64>,
}

impl Publisher {
    pub(super) fn new(metrics: Arc<Mutex<Metrics>>) -> Self {
        Publisher { metrics, due_ns: 0, digest_due_ns: 0, digests: BTreeMap::new() }
    }

    /// Names the process in the snapshot.
    pub(super) fn label(&self, protocol: &'static str, name: String, role: String) {
        let mut m = self.metrics.lock().expect("metrics lock");
        m.protocol = protocol;
        m.name = name;
        m.role = role;
    }

    /// Whether a refresh is due at `now`, and if so whether the digests are too; schedules the
    /// next ones.
    pub(super) fn due(&mut self, now: u64) -> Option<bool> {
        if now < self.due_ns {
            return None;
        }
        self.due_ns = now + METRICS_PERIOD_NS;
        let digest = now >= self.digest_due_ns;
        if digest {
            self.digest_due_ns = now + DIGEST_PERIOD_NS;
        }
        Some(digest)
    }

    /// When the next refresh is due (after `now` at the earliest).
    pub(super) fn next_due(&self, now: u64) -> u64 {
        self.due_ns.max(now + 1)
    }

    /// Refreshes the snapshot from the local nodes, the complete `transport` counters and the
    /// operation `latency`; recomputes the digests first when `digest`.
    pub(super) fn publish<P: Protocol>(
        &mut self,
        digest: bool,
        topology: &Topology,
        locals: &[Local<P>],
        transport: Transport,
        latency: &hdrhistogram::Histogram<u64>,
    ) {
        if digest {
            let started = std::time::Instant::now();
            self.compute_digests(locals);
            let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            // `due` scheduled the next walk a period from now; a long walk pushes it back.
            let later = spent.saturating_mul(DIGEST_TIME_SHARE).saturating_sub(DIGEST_PERIOD_NS);
            self.digest_due_ns = self.digest_due_ns.saturating_add(later);
        }
        let first_client =
            locals.iter().find(|l| topology.node(l.id).role == Role::Client).map_or(NodeId(u32::MAX), |l| l.id);
        let nodes: Vec<LocalNodeMetrics> = locals
            .iter()
            .filter(|l| topology.node(l.id).role != Role::Client || l.id == first_client)
            .map(|l| LocalNodeMetrics {
                id: l.id.0,
                role: format!("{:?}", topology.node(l.id).role).to_lowercase(),
                status: l.node().status(),
                stats: l.node().stats().clone(),
                timers: l.runner.timer_count(),
                held_sends: l.runner.held_count(),
                durable_writes: l.storage.durable(),
                fsyncs: l.storage.syncs,
                compactions: l.storage.compactions,
                digest: self.digests.get(&l.id.0).copied(),
            })
            .collect();
        let mut client_stats = ordo_core::NodeStats::default();
        for local in locals.iter().filter(|l| topology.node(l.id).role == Role::Client) {
            client_stats.absorb(local.node().stats());
        }
        let mut metrics = self.metrics.lock().expect("metrics lock");
        metrics.nodes = nodes;
        metrics.transport = transport;
        metrics.client_stats = client_stats;
        metrics.latency_us = [0.5, 0.9, 0.99, 0.999].map(|q| (q, latency.value_at_quantile(q)));
        metrics.latency_count = latency.len();
    }

    fn compute_digests<P: Protocol>(&mut self, locals: &[Local<P>]) {
        for local in locals {
            if let Some(machine) = local.node().state_machine() {
                let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                machine.visit_key_digests(&mut |key, version, chain| {
                    hasher.update(key);
                    hasher.update(&version.to_le_bytes());
                    hasher.update(&chain.to_le_bytes());
                });
                self.digests.insert(local.id.0, hasher.digest());
            }
        }
    }
}
