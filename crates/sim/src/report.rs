//! What a run reports: the same fields for every protocol, as a readable table or one JSON object.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// Results of the clients of one site.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SiteSummary {
    /// Site name.
    pub name: String,
    /// Clients at the site.
    pub clients: usize,
    /// Operations completed.
    pub committed: u64,
    /// Mean latency in ms.
    pub mean: f64,
    /// Median latency in ms.
    pub p50: f64,
    /// 90th percentile in ms.
    pub p90: f64,
    /// 99th percentile in ms.
    pub p99: f64,
}

/// Per-node traffic and CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeReport {
    /// Node id.
    pub id: u32,
    /// Role name.
    pub role: String,
    /// Site name.
    pub site: String,
    /// Messages sent.
    pub messages_sent: u64,
    /// Messages received (handled).
    pub messages_received: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// (sent + received) / committed operations.
    pub messages_per_command: f64,
    /// (bytes sent + received) / committed operations.
    pub bytes_per_command: f64,
    /// Share of the run the node's CPU was busy.
    pub cpu_utilisation: f64,
    /// Longest input queue seen.
    pub queue_len_max: usize,
    /// Inputs dropped because the queue was full.
    pub queue_drops: u64,
    /// Commands executed (all incarnations).
    pub executed: u64,
    /// Inputs the protocol ignored, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Protocol events (view changes, state transfers...).
    pub events: BTreeMap<String, u64>,
    /// Crashes suffered.
    pub crashes: u64,
    /// Status line at the end of the run.
    pub status: String,
}

/// Network totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NetworkReport {
    /// Messages handed to the network.
    pub sent: u64,
    /// Messages dropped by a partition.
    pub dropped_partition: u64,
    /// Messages dropped by loss.
    pub dropped_loss: u64,
    /// Messages dropped because the receiver was down.
    pub dropped_down: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Messages delayed past a later message of their link by a reorder fault.
    pub reordered: u64,
    /// Messages given an extra delay by a slow period.
    pub slowed: u64,
    /// Messages delivered after a message sent later on the same link (zero unless a fault plan
    /// reorders: links are FIFO).
    pub delivered_out_of_order: u64,
}

/// Faults injected.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultSummary {
    /// Faults by kind (`crash`, `pause`, `partition`...; `crash_skipped` for random crashes
    /// skipped because they would exceed the role's failure budget at that moment).
    #[serde(flatten)]
    pub counts: BTreeMap<String, u64>,
    /// Crashes that happened, by the crashed node's role.
    pub crash_by_role: BTreeMap<String, u64>,
}

/// Everything one run says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    /// Protocol name.
    pub protocol: String,
    /// Seed.
    pub seed: u64,
    /// Replicas per shard.
    pub replicas: usize,
    /// Shards.
    pub shards: usize,
    /// Failures tolerated per shard.
    pub f: usize,
    /// Client nodes.
    pub clients: usize,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Operations completed successfully.
    pub committed: u64,
    /// Operations that certainly failed.
    pub failed: u64,
    /// Operations whose outcome is unknown (timed out).
    pub unknown: u64,
    /// Committed operations per simulated second.
    pub throughput_ops_per_s: f64,
    /// Latency of committed operations.
    pub latency_ms: LatencySummary,
    /// Per client site.
    pub sites: Vec<SiteSummary>,
    /// Share of commits on the fast path; null for protocols without one.
    pub fast_path_ratio: Option<f64>,
    /// Whether the history is linearizable (null when not checked, or when the check was
    /// inconclusive: see `linearizability_unknown`).
    pub linearizable: Option<bool>,
    /// Why not.
    pub linearizability_error: Option<String>,
    /// Why the check could not tell (a key too complex under `SimConfig::check_limits`).
    pub linearizability_unknown: Option<String>,
    /// Whether replicas agree on every key's write order.
    pub agreement: bool,
    /// Why not.
    pub agreement_error: Option<String>,
    /// The first violation the protocol's global checker found (null when none, or no checker).
    pub global_invariant_error: Option<String>,
    /// Observations the global checker accepted.
    pub observations: u64,
    /// Whether every client made progress after the faults healed.
    pub progress: bool,
    /// Why not.
    pub progress_error: Option<String>,
    /// An invariant assertion that failed (the run stopped there).
    pub assertion: Option<String>,
    /// Simulated events processed.
    pub events: u64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Events per wall-clock second.
    pub events_per_wall_s: f64,
    /// Faults injected.
    pub faults: FaultSummary,
    /// Time after which progress was required, in simulated seconds.
    pub heal_s: f64,
    /// Network totals.
    pub network: NetworkReport,
    /// Per node.
    pub nodes: Vec<NodeReport>,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// An invariant assertion fired.
    Assertion(String),
    /// Not linearizable, or replicas disagree.
    Correctness(String),
    /// No progress after the faults healed.
    Liveness(String),
    /// Nothing else failed, but the linearizability check hit its limits: unknown, neither a
    /// pass nor a failure (raise `check_limits` to settle it).
    Inconclusive(String),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Assertion(why) => write!(f, "assertion: {why}"),
            Violation::Correctness(why) => write!(f, "correctness: {why}"),
            Violation::Liveness(why) => write!(f, "liveness: {why}"),
            Violation::Inconclusive(why) => write!(f, "inconclusive: {why}"),
        }
    }
}

impl SimReport {
    /// The first violation of the run, if any: assertion, then correctness, then liveness, then
    /// an inconclusive linearizability check (so a real failure is never hidden behind it).
    pub fn violation(&self) -> Option<Violation> {
        if let Some(why) = &self.assertion {
            return Some(Violation::Assertion(why.clone()));
        }
        if let Some(why) = &self.linearizability_error {
            return Some(Violation::Correctness(format!("not linearizable: {why}")));
        }
        if let Some(why) = &self.global_invariant_error {
            return Some(Violation::Correctness(format!("global invariant broken: {why}")));
        }
        if let Some(why) = &self.agreement_error {
            return Some(Violation::Correctness(format!("replicas disagree: {why}")));
        }
        if let Some(why) = &self.progress_error {
            return Some(Violation::Liveness(why.clone()));
        }
        self.linearizability_unknown.as_ref().map(|why| Violation::Inconclusive(why.clone()))
    }

    /// A readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        self.write_totals(&mut out);
        self.write_sites(&mut out);
        self.write_nodes(&mut out);
        self.write_verdict(&mut out);
        let _ = writeln!(
            out,
            "events {}  wall {:.2}s  {:.2}M events/s",
            self.events,
            self.wall_s,
            self.events_per_wall_s / 1e6
        );
        out
    }

    /// The table's head: the run's shape, totals, latency and fast-path share.
    fn write_totals(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "protocol {}  seed {}  replicas {}×{} (f={})  clients {}  {:.1}s simulated",
            self.protocol, self.seed, self.replicas, self.shards, self.f, self.clients, self.duration_s
        );
        let _ = writeln!(
            out,
            "committed {}  failed {}  unknown {}  throughput {:.0} ops/s",
            self.committed, self.failed, self.unknown, self.throughput_ops_per_s
        );
        let l = &self.latency_ms;
        let _ = writeln!(
            out,
            "latency ms  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}",
            l.mean, l.p50, l.p90, l.p99, l.p999
        );
        if let Some(ratio) = self.fast_path_ratio {
            let _ = writeln!(out, "fast path   {:.1}%", ratio * 100.0);
        }
    }

    /// A row per site, when there is more than one.
    fn write_sites(&self, out: &mut String) {
        if self.sites.len() > 1 {
            let _ = writeln!(
                out,
                "{:<16} {:>8} {:>10} {:>9} {:>9} {:>9}",
                "site", "clients", "committed", "mean ms", "p50 ms", "p99 ms"
            );
            for s in &self.sites {
                let _ = writeln!(
                    out,
                    "{:<16} {:>8} {:>10} {:>9.2} {:>9.2} {:>9.2}",
                    s.name, s.clients, s.committed, s.mean, s.p50, s.p99
                );
            }
        }
    }

    /// A row per node other than clients.
    fn write_nodes(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{:<5} {:<11} {:>10} {:>10} {:>9} {:>6} {:>8}  status",
            "node", "role", "msgs out", "msgs in", "msgs/cmd", "cpu%", "executed"
        );
        for n in &self.nodes {
            if n.role == "client" {
                continue;
            }
            let _ = writeln!(
                out,
                "{:<5} {:<11} {:>10} {:>10} {:>9.2} {:>6.1} {:>8}  {}",
                format!("n{}", n.id),
                n.role,
                n.messages_sent,
                n.messages_received,
                n.messages_per_command,
                n.cpu_utilisation * 100.0,
                n.executed,
                n.status
            );
        }
    }

    /// The faults injected, the checks' verdicts and the first violation, if any.
    fn write_verdict(&self, out: &mut String) {
        let ok = |flag: Option<bool>| match flag {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "not checked",
        };
        let faults: Vec<String> = self.faults.counts.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        if !faults.is_empty() {
            let _ = writeln!(out, "faults      {} (healed by {:.2}s)", faults.join(" "), self.heal_s);
        }
        let _ = writeln!(
            out,
            "linearizable {}  agreement {}  progress {}{}",
            if self.linearizability_unknown.is_some() { "unknown" } else { ok(self.linearizable) },
            ok(Some(self.agreement)),
            ok(Some(self.progress)),
            self.assertion.as_ref().map(|a| format!("  ASSERTION: {a}")).unwrap_or_default()
        );
        match self.violation() {
            Some(Violation::Inconclusive(why)) => _ = writeln!(out, "UNKNOWN     {why}"),
            Some(v) => _ = writeln!(out, "VIOLATION   {v}"),
            None => {}
        }
    }
}
