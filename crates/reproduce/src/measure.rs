//! One run: simulate it, then name every number a chart or a claim may read.

use crate::experiment::{Analysis, Run};
use ordo_check::history::{EventKind, HistoryEvent};
use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{SimConfig, SimReport, SimRun, Violation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one run measured: named numbers and named curves.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// Scalars: `throughput` (ops/s), `p50_us`, `p99_ms`, `fast_ratio`, `site:ireland` (mean ms)...
    pub metrics: BTreeMap<String, f64>,
    /// Curves: `throughput_timeline` (time in ms, ops/s).
    pub curves: BTreeMap<String, Vec<(f64, f64)>>,
    /// The first safety violation a checker found (an assertion, a history not linearizable,
    /// replicas that disagree), if any: a reproduction must not hide one.
    pub violation: Option<String>,
    /// Clients that completed nothing after the faults healed, or a check that hit its limits:
    /// expected of an overloaded open-loop run, worth a note, not a failure.
    pub note: Option<String>,
}

struct Simulate(SimConfig);

impl ProtocolVisitor for Simulate {
    type Output = Result<SimRun, String>;
    fn visit<P: Protocol>(self) -> Self::Output {
        ordo_sim::run::<P>(self.0)
    }
}

/// Simulates `run` and measures it.
pub fn measure(run: &Run) -> Result<Measured, String> {
    let simulated = with_protocol(run.protocol, Simulate(run.config.clone()))
        .map_err(|e| format!("protocol {}: {e}", run.protocol))??;
    let mut measured = summary(&simulated.report);
    measured.metrics.insert("x".into(), run.x);
    match run.analysis {
        Analysis::Summary => {}
        Analysis::Recovery { crash_ns, restart_ns, bucket_ns } => {
            recovery(&simulated.history, run.config.duration_ns, crash_ns, restart_ns, bucket_ns, &mut measured)
        }
        Analysis::Broadcasts => {
            if let Some(broadcasts) = broadcasts_per_commit(&simulated.report) {
                measured.metrics.insert("broadcasts_per_commit".into(), broadcasts);
            }
        }
        Analysis::ClientSites(sites) => sites_mean_over(sites, &mut measured),
    }
    Ok(measured)
}

/// `(Σ replica messages sent − commits) / (N − 1) / commits` ([`Analysis::Broadcasts`]); `None`
/// without a commit or with a single replica.
fn broadcasts_per_commit(report: &SimReport) -> Option<f64> {
    let replicas: Vec<_> = report.nodes.iter().filter(|node| node.role == "replica").collect();
    let peers = replicas.len().checked_sub(1).filter(|&peers| peers > 0)?;
    let commits = Some(report.committed).filter(|&c| c > 0)?;
    let sent: u64 = replicas.iter().map(|node| node.messages_sent).sum();
    Some(sent.saturating_sub(commits) as f64 / peers as f64 / commits as f64)
}

/// The report's numbers.
fn summary(report: &SimReport) -> Measured {
    let mut metrics = BTreeMap::new();
    let latency = &report.latency_ms;
    for (name, value) in [
        ("throughput", report.throughput_ops_per_s),
        ("committed", report.committed as f64),
        ("mean_ms", latency.mean),
        ("p50_ms", latency.p50),
        ("p99_ms", latency.p99),
        ("p999_ms", latency.p999),
        ("p50_us", latency.p50 * 1e3),
        ("p99_us", latency.p99 * 1e3),
        ("agreement", f64::from(u8::from(report.agreement))),
    ] {
        metrics.insert(name.to_string(), value);
    }
    if let Some(fast) = report.fast_path_ratio {
        metrics.insert("fast_ratio".into(), fast);
    }
    if let Some(linearizable) = report.linearizable {
        metrics.insert("linearizable".into(), f64::from(u8::from(linearizable)));
    }
    let busiest = report.nodes.iter().map(|n| n.cpu_utilisation).fold(0.0, f64::max);
    metrics.insert("busiest_cpu_percent".into(), busiest * 100.0);
    for site in &report.sites {
        metrics.insert(format!("site:{}", site.name), site.mean);
    }
    if !report.sites.is_empty() {
        let mean = report.sites.iter().map(|s| s.mean).sum::<f64>() / report.sites.len() as f64;
        metrics.insert("sites_mean".into(), mean);
    }
    let metrics = metrics.into_iter().filter(|(_, v)| v.is_finite()).collect();
    let (violation, note) = match report.violation() {
        Some(v @ (Violation::Assertion(_) | Violation::Correctness(_))) => (Some(shortened(&v.to_string())), None),
        Some(other) => (None, Some(shortened(&other.to_string()))),
        None => (None, None),
    };
    Measured { metrics, curves: BTreeMap::new(), violation, note }
}

/// `sites_mean` over `sites` only (their `site:` means); none when one of them measured nothing.
fn sites_mean_over(sites: &[&str], into: &mut Measured) {
    let means: Option<Vec<f64>> = sites.iter().map(|site| into.metrics.get(&format!("site:{site}")).copied()).collect();
    match means {
        Some(means) if !means.is_empty() => {
            into.metrics.insert("sites_mean".into(), means.iter().sum::<f64>() / means.len() as f64);
        }
        _ => {
            into.metrics.remove("sites_mean");
        }
    }
}

/// `text`, cut at about 300 characters: a report names the problem, the run file reproduces it.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A bucket at this share of the pre-crash level counts as recovered.
const RECOVERED_SHARE: f64 = 0.95;
/// Buckets before this are warm-up, left out of the pre-crash level.
const WARM_NS: u64 = 100_000_000;

/// Throughput per bucket around a crash; the outage (the longest stretch without a commit
/// after the crash); when throughput is back at its pre-crash level; the low while the crashed
/// node rejoins.
fn recovery(
    history: &[HistoryEvent],
    duration_ns: u64,
    crash_ns: u64,
    restart_ns: u64,
    bucket_ns: u64,
    into: &mut Measured,
) {
    let mut commits: Vec<u64> = history.iter().filter(|e| e.kind == EventKind::Ok).map(|e| e.time_ns).collect();
    commits.sort_unstable();
    let buckets = duration_ns.div_ceil(bucket_ns) as usize;
    let mut counts = vec![0u64; buckets];
    for &t in &commits {
        counts[((t / bucket_ns) as usize).min(buckets - 1)] += 1;
    }
    let per_bucket: Vec<f64> = counts.iter().map(|&c| c as f64 * 1e9 / bucket_ns as f64).collect();
    let bucket = |ns: u64| ((ns / bucket_ns) as usize).min(buckets);
    let warm = &per_bucket[bucket(WARM_NS.min(crash_ns))..bucket(crash_ns)];
    let before = warm.iter().sum::<f64>() / warm.len().max(1) as f64;
    let after: Vec<u64> = std::iter::once(crash_ns).chain(commits.iter().copied().filter(|&t| t >= crash_ns)).collect();
    let (outage_ns, outage_end) = after.windows(2).map(|w| (w[1] - w[0], w[1])).max().unwrap_or((0, crash_ns));
    let recovered = (bucket(outage_end)..bucket(restart_ns)).find(|&b| per_bucket[b] >= RECOVERED_SHARE * before);
    let rejoin = &per_bucket[bucket(restart_ns)..bucket(restart_ns + 100_000_000)];
    let rejoin_low = rejoin.iter().copied().fold(f64::INFINITY, f64::min);
    let metrics = &mut into.metrics;
    metrics.insert("before_crash".into(), before);
    metrics.insert("outage_ms".into(), outage_ns as f64 / 1e6);
    if let Some(b) = recovered {
        metrics.insert("recovered_ms".into(), ((b as u64 + 1) * bucket_ns - crash_ns) as f64 / 1e6);
    }
    if rejoin_low.is_finite() && before > 0.0 {
        metrics.insert("rejoin_low_share".into(), rejoin_low / before);
    }
    let timeline = per_bucket.iter().enumerate().map(|(b, ops)| ((b as u64 * bucket_ns) as f64 / 1e6, *ops)).collect();
    into.curves.insert("throughput_timeline".into(), timeline);
}
