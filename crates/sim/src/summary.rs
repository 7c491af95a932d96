//! Turns a finished world into its report: percentiles, per-site and per-node figures, checks.

use crate::report::FaultSummary;
use crate::report::{LatencySummary, NodeReport, SimReport, SiteSummary};
use crate::world::World;
use hdrhistogram::Histogram;
use ordo_core::{Protocol, Role};

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

const NANOS_PER_MS: f64 = 1e6;

fn summarize(histogram: &Histogram<u64>) -> LatencySummary {
    if histogram.is_empty() {
        return LatencySummary::default();
    }
    let at = |q: f64| histogram.value_at_quantile(q) as f64 / NANOS_PER_MS;
    LatencySummary { mean: histogram.mean() / NANOS_PER_MS, p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999) }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Replica => "replica",
        Role::Client => "client",
        Role::Proxy => "proxy",
        Role::Sequencer => "sequencer",
        Role::Controller => "controller",
    }
}

pub(crate) fn report<P: Protocol>(world: &World<P>, assertion: Option<String>, wall_s: f64) -> SimReport {
    let config = &world.config;
    let duration_s = config.duration_ns as f64 / 1e9;
    let outcome = &world.outcome;
    let (overall, sites) = latency_by_site(world);
    let (nodes, fast_path_ratio) = node_reports(world);
    let (linearizable, linearizability_error, linearizability_unknown) = linearizability(world, assertion.is_some());
    let heal_ns = config.faults.heal_ns(config.duration_ns);
    let progress_error = progress_error(world, heal_ns);
    let events_per_wall_s = if wall_s > 0.0 { outcome.events as f64 / wall_s } else { 0.0 };
    SimReport {
        protocol: P::NAME.to_string(),
        seed: config.seed,
        replicas: config.replicas,
        shards: config.shards,
        f: config.f(),
        clients: config.clients,
        duration_s,
        committed: outcome.committed,
        failed: outcome.failed,
        unknown: outcome.unknown,
        throughput_ops_per_s: outcome.committed as f64 / duration_s,
        latency_ms: summarize(&overall),
        sites,
        fast_path_ratio,
        linearizable,
        linearizability_error,
        linearizability_unknown,
        agreement: outcome.agreement_error.is_none(),
        agreement_error: outcome.agreement_error.clone(),
        global_invariant_error: outcome.global_error.clone(),
        observations: outcome.observations,
        progress: progress_error.is_none(),
        progress_error,
        assertion,
        events: outcome.events,
        wall_s,
        events_per_wall_s,
        faults: FaultSummary { counts: outcome.fault_counts.clone(), crash_by_role: outcome.crash_by_role.clone() },
        heal_s: heal_ns as f64 / 1e9,
        network: outcome.network.clone(),
        nodes,
    }
}

/// The latency histogram over all clients, and a summary per site of the clients there.
fn latency_by_site<P: Protocol>(world: &World<P>) -> (Histogram<u64>, Vec<SiteSummary>) {
    let mut overall = histogram();
    let mut sites = Vec::new();
    for (site, name) in world.config.latency.sites.iter().enumerate() {
        let mut at_site = histogram();
        let clients: Vec<_> = world.clients.iter().filter(|c| c.site == site).collect();
        for latency in clients.iter().flat_map(|c| c.latencies_ns.iter()) {
            at_site.saturating_record(*latency);
        }
        overall.add(&at_site).expect("same bounds");
        let s = summarize(&at_site);
        sites.push(SiteSummary {
            name: name.clone(),
            clients: clients.len(),
            committed: at_site.len(),
            mean: s.mean,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
        });
    }
    (overall, sites)
}

/// Each node's figures, and the share of commits that took the fast path (protocols with one).
fn node_reports<P: Protocol>(world: &World<P>) -> (Vec<NodeReport>, Option<f64>) {
    let config = &world.config;
    let committed = world.outcome.committed.max(1) as f64;
    let mut fast = 0;
    let mut slow = 0;
    let nodes: Vec<NodeReport> = world
        .nodes
        .iter()
        .map(|slot| {
            let stats = slot.total_stats();
            fast += stats.fast_path_commits;
            slow += stats.slow_path_commits;
            let t = &slot.traffic;
            NodeReport {
                id: slot.spec.id.0,
                role: role_name(slot.spec.role).to_string(),
                site: config.latency.sites[slot.spec.site].clone(),
                messages_sent: t.messages_sent,
                messages_received: t.messages_received,
                bytes_sent: t.bytes_sent,
                bytes_received: t.bytes_received,
                messages_per_command: (t.messages_sent + t.messages_received) as f64 / committed,
                bytes_per_command: (t.bytes_sent + t.bytes_received) as f64 / committed,
                cpu_utilisation: t.busy_ns as f64 / config.duration_ns as f64,
                queue_len_max: t.queue_len_max,
                queue_drops: t.queue_drops,
                executed: stats.executed,
                dropped: stats.dropped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                events: stats.events.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                crashes: t.crashes,
                status: slot.runner.node().map_or_else(|| "down".to_string(), |n| n.status()),
            }
        })
        .collect();
    let fast_path_ratio = (P::has_fast_path() && fast + slow > 0).then(|| fast as f64 / (fast + slow) as f64);
    (nodes, fast_path_ratio)
}

/// The linearizability verdict as (linearizable, violation, why unknown); not checked when
/// switched off or when an assertion already failed the run.
fn linearizability<P: Protocol>(
    world: &World<P>,
    assertion_failed: bool,
) -> (Option<bool>, Option<String>, Option<String>) {
    let config = &world.config;
    if !config.check_linearizability || assertion_failed {
        return (None, None, None);
    }
    let verdict = if config.check_witness {
        ordo_check::check_linearizable_witnessed(&world.history, &crate::witness::collect(), &config.check_limits)
    } else {
        ordo_check::check_linearizable_with(&world.history, &config.check_limits)
    };
    match verdict {
        Ok(_) => (Some(true), None, None),
        Err(too_complex @ ordo_check::Violation::TooComplex { .. }) => (None, None, Some(too_complex.to_string())),
        Err(violation) => (Some(false), Some(violation.to_string()), None),
    }
}

/// Every client must complete an operation after the faults healed (plus a grace period for
/// the protocol to notice and recover).
fn progress_error<P: Protocol>(world: &World<P>, heal_ns: u64) -> Option<String> {
    let duration = world.config.duration_ns;
    let grace = (duration - heal_ns.min(duration)) / 2;
    let deadline = heal_ns + grace;
    let stuck: Vec<String> =
        world.clients.iter().filter(|c| c.last_ok_ns <= heal_ns).map(|c| c.node.to_string()).collect();
    (!stuck.is_empty()).then(|| {
        format!(
            "clients {} completed nothing after the faults healed at {:.3}s (checked at {:.3}s, end {:.3}s)",
            stuck.join(","),
            heal_ns as f64 / 1e9,
            deadline as f64 / 1e9,
            duration as f64 / 1e9
        )
    })
}
