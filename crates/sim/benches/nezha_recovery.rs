//! The Nezha paper's leader-failure experiment (§7.4, Fig. 10 and 11) in the simulator, with
//! Multi-Paxos beside it under the same CPU costs and the same 10 ms view-change timeout.
//!
//! Three replicas, 200 open-loop clients at 20k, 100k and 200k ops/s (the paper's 10 clients at
//! 2k, 10k and 20k each), uniform keys, the LAN model. The leader crashes at 300 ms and boots
//! again at 600 ms (it rejoins as a follower); the run ends at 1.2 s. For each run the table
//! gives the throughput before the crash, the outage (the longest stretch without a commit after
//! the crash: detection, view change and the clients' retries — what the paper's Fig. 10
//! measures from the replicas' side), how long after the crash the throughput per 10 ms is back
//! at its pre-crash level (Fig. 11), the lowest 10 ms throughput while the old leader rejoins,
//! and whether the history is linearizable and the replicas agree.
//!
//! Writes the throughput per 10 ms of every run to `target/ordo-bench/nezha-recovery/`:
//! `timeline.csv` and one PNG per protocol (one line per load, like Fig. 11).
//! Run: `cargo bench -p ordo-sim --bench nezha_recovery` (about a minute).

use ordo_bench::output::{Series, plot_series};
use ordo_check::history::{EventKind, HistoryEvent};
use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{Fault, FaultPlan, SimConfig, SimRun, WorkloadSpec};
use std::fmt::Write as _;
use std::path::PathBuf;

const REPLICAS: usize = 3;
const CLIENTS: usize = 200;
const MS: u64 = 1_000_000;
const CRASH_NS: u64 = 300 * MS;
const RESTART_NS: u64 = 600 * MS;
const DURATION_NS: u64 = 1_200 * MS;
const BUCKET_NS: u64 = 10 * MS;
/// Buckets before this are warm-up, left out of the pre-crash level.
const WARM_NS: u64 = 100 * MS;
/// A bucket at this share of the pre-crash level counts as recovered.
const RECOVERED_SHARE: f64 = 0.95;

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimRun;
    fn visit<P: Protocol>(self) -> SimRun {
        ordo_sim::run::<P>(self.0).expect("valid config")
    }
}

/// The protocols compared, with their options.
const PROTOCOLS: [(&str, &str, &str); 2] = [("nezha", "nezha", "proxies = 8"), ("multipaxos", "multipaxos", "")];

fn config(protocol_options: &str, offered_ops: f64) -> SimConfig {
    let mut workload = WorkloadSpec::from_name("uniform:1000").expect("known workload");
    workload.rate_per_client = Some(offered_ops / CLIENTS as f64);
    let crash = Fault::Crash { node: 0.into(), at_ns: CRASH_NS, restart_ns: Some(RESTART_NS) };
    SimConfig {
        seed: 1,
        replicas: REPLICAS,
        clients: CLIENTS,
        duration_ns: DURATION_NS,
        workload,
        faults: FaultPlan {
            random: false,
            random_slow: false,
            faults: vec![crash],
            heal_ns: Some(RESTART_NS + 100 * MS),
        },
        check_linearizability: true,
        protocol: toml::from_str(protocol_options).expect("options parse"),
        ..SimConfig::default()
    }
}

/// What one run shows about the crash.
struct Recovery {
    /// Commits per second in each 10 ms bucket.
    per_bucket: Vec<f64>,
    /// Mean of the buckets between warm-up and the crash.
    before: f64,
    /// Longest stretch without a commit after the crash.
    outage_ns: u64,
    /// From the crash to the end of the first bucket back at the pre-crash level, after the outage.
    recovered_ns: Option<u64>,
    /// Lowest bucket in the 100 ms after the old leader boots again.
    rejoin_low: f64,
    /// Median latency (ms) of operations invoked between warm-up and the crash...
    p50_before_ms: f64,
    /// ... and once the old leader has been back for `SETTLED_NS`: a rejoined replica must not
    /// leave the protocol slower than before (a follower whose fast-replies never match again
    /// would).
    p50_after_ms: f64,
}

/// After the old leader boots again, the time it gets to rejoin before latency is compared.
const SETTLED_NS: u64 = 200 * MS;

fn analyse(history: &[HistoryEvent]) -> Recovery {
    let mut commits: Vec<u64> = history.iter().filter(|e| e.kind == EventKind::Ok).map(|e| e.time_ns).collect();
    commits.sort_unstable();
    let buckets = DURATION_NS.div_ceil(BUCKET_NS) as usize;
    let mut counts = vec![0u64; buckets];
    for &t in &commits {
        counts[((t / BUCKET_NS) as usize).min(buckets - 1)] += 1;
    }
    let per_second = 1e9 / BUCKET_NS as f64;
    let per_bucket: Vec<f64> = counts.iter().map(|&c| c as f64 * per_second).collect();
    let bucket = |ns: u64| (ns / BUCKET_NS) as usize;
    let warm = &per_bucket[bucket(WARM_NS)..bucket(CRASH_NS)];
    let before = warm.iter().sum::<f64>() / warm.len() as f64;
    let after: Vec<u64> = std::iter::once(CRASH_NS).chain(commits.iter().copied().filter(|&t| t >= CRASH_NS)).collect();
    let (outage_ns, outage_end) = after.windows(2).map(|w| (w[1] - w[0], w[1])).max().unwrap_or((0, CRASH_NS));
    let recovered_ns = (bucket(outage_end)..bucket(RESTART_NS))
        .find(|&b| per_bucket[b] >= RECOVERED_SHARE * before)
        .map(|b| (b as u64 + 1) * BUCKET_NS - CRASH_NS);
    let rejoin = &per_bucket[bucket(RESTART_NS)..bucket(RESTART_NS + 100 * MS)];
    let rejoin_low = rejoin.iter().copied().fold(f64::INFINITY, f64::min);
    let p50_before_ms = median_latency_ms(history, WARM_NS..CRASH_NS);
    let p50_after_ms = median_latency_ms(history, RESTART_NS + SETTLED_NS..DURATION_NS);
    Recovery { per_bucket, before, outage_ns, recovered_ns, rejoin_low, p50_before_ms, p50_after_ms }
}

/// The median latency of the operations invoked within `window` that completed.
fn median_latency_ms(history: &[HistoryEvent], window: std::ops::Range<u64>) -> f64 {
    let mut invoked = std::collections::BTreeMap::new();
    let mut latencies = Vec::new();
    for event in history {
        match event.kind {
            EventKind::Invoke => {
                invoked.insert(event.client, event.time_ns);
            }
            EventKind::Ok => {
                if let Some(start) = invoked.remove(&event.client).filter(|start| window.contains(start)) {
                    latencies.push(event.time_ns - start);
                }
            }
            _ => {
                invoked.remove(&event.client);
            }
        }
    }
    latencies.sort_unstable();
    latencies.get(latencies.len() / 2).map_or(f64::NAN, |&ns| ns as f64 / MS as f64)
}

fn out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ordo-bench/nezha-recovery")
}

fn main() {
    let loads = [20_000.0, 100_000.0, 200_000.0];
    println!(
        "Leader crash at {} ms, back at {} ms; {REPLICAS} replicas, {CLIENTS} open-loop clients, LAN, CPU cost model",
        CRASH_NS / MS,
        RESTART_NS / MS
    );
    println!(
        "{:<11} {:>9} {:>11} {:>10} {:>13} {:>12} {:>11} {:>10} {:>8} {:>6}",
        "protocol",
        "offered/s",
        "before/s",
        "outage ms",
        "recovered ms",
        "rejoin low",
        "p50 before",
        "p50 after",
        "linear.",
        "agree"
    );
    let mut csv = String::from("protocol,offered_per_s,time_ms,ops_per_s\n");
    let mut plots: Vec<(&str, Vec<Series>)> = PROTOCOLS.iter().map(|(label, ..)| (*label, Vec::new())).collect();
    for (index, (label, protocol, options)) in PROTOCOLS.iter().enumerate() {
        for &load in &loads {
            let run = with_protocol(protocol, Run(config(options, load))).expect("registered");
            let recovery = analyse(&run.history);
            let recovered =
                recovery.recovered_ns.map_or("never".to_string(), |ns| format!("{:.0}", ns as f64 / MS as f64));
            println!(
                "{:<11} {:>9.0} {:>11.0} {:>10.1} {:>13} {:>11.0}% {:>11.3} {:>10.3} {:>8} {:>6}",
                label,
                load,
                recovery.before,
                recovery.outage_ns as f64 / MS as f64,
                recovered,
                100.0 * recovery.rejoin_low / recovery.before,
                recovery.p50_before_ms,
                recovery.p50_after_ms,
                run.report.linearizable.map_or("-".into(), |l| l.to_string()),
                run.report.agreement
            );
            let mut points = Vec::new();
            for (b, ops) in recovery.per_bucket.iter().enumerate() {
                let time_ms = (b as u64 * BUCKET_NS / MS) as f64;
                let _ = writeln!(csv, "{label},{load:.0},{time_ms:.0},{ops:.0}");
                points.push((time_ms, *ops));
            }
            plots[index].1.push(Series { label: format!("{:.0}k ops/s offered", load / 1e3), points });
        }
    }
    let dir = out_dir();
    std::fs::create_dir_all(&dir).expect("output directory");
    std::fs::write(dir.join("timeline.csv"), csv).expect("timeline written");
    for (label, series) in &plots {
        let title = format!("{label}: throughput per 10 ms, leader crashed at 300 ms, back at 600 ms");
        let path = dir.join(format!("{label}-throughput.png"));
        plot_series(&path, &title, "time (ms)", "ops/s", series).expect("plot written");
    }
    println!();
    println!("Timeline and plots: {}", dir.display());
}
