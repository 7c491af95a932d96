//! Tempo's evaluation in the simulator (specs/tempo.md §8): (1) the 5-region WAN table — Tempo
//! f = 1 and f = 2 and Multi-Paxos with its leader in Ireland, per client site, next to the
//! paper's averages; (2) throughput as closed-loop clients grow, Tempo vs Multi-Paxos on five
//! sites with the CPU cost model, and the ratio of their best throughputs.
//! Run: `cargo bench -p ordo-sim --bench tempo_wan` (ORDO_TEMPO_PART=wan or =throughput to run
//! one part; ORDO_TEMPO_WAN_S sets the WAN run length, default 30).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{CpuCost, LatencyModel, SimConfig, SimReport, WorkloadSpec};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("valid config").report
    }
}

fn aws() -> LatencyModel {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/latency/aws-5-regions.toml");
    LatencyModel::from_toml(&std::fs::read_to_string(path).expect("latency file")).expect("valid matrix")
}

/// Multi-Paxos' defaults suit a LAN (10 ms view-change timeout); on a WAN they would start view
/// changes forever. Its pipeline is widened so that 40 clients do not queue behind it.
fn wan_options(protocol: &str) -> toml::Table {
    let mut table = toml::Table::new();
    if protocol == "multipaxos" {
        table.insert("heartbeat_ns".into(), toml::Value::Integer(50_000_000));
        table.insert("view_change_timeout_ns".into(), toml::Value::Integer(2_000_000_000));
        table.insert("client_retry_ns".into(), toml::Value::Integer(3_000_000_000));
        table.insert("pipeline_max".into(), toml::Value::Integer(64));
    }
    table
}

fn wan_table() {
    let seconds: u64 = std::env::var("ORDO_TEMPO_WAN_S").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let runs = [
        ("tempo", 1, "138"),
        ("tempo", 2, "178"),
        ("multipaxos", 1, "majority quorum = FPaxos f=2: 142 IE, 323 SG, 325 SP (f=1: 82, 264, 267)"),
    ];
    println!("WAN, 5 regions, 40 clients, conflict:0.02, {seconds}s simulated (latency ms)");
    println!(
        "{:<16} {:>9} {:>13} {:>10} {:>10} {:>10} {:>14} {:>8}  paper",
        "protocol", "ireland", "n-california", "singapore", "canada", "sao-paulo", "mean of sites", "overall"
    );
    for (protocol, f, paper) in runs {
        let config = SimConfig {
            seed: 1,
            replicas: 5,
            f: Some(f),
            clients: 40,
            duration_ns: seconds * 1_000_000_000,
            latency: aws(),
            workload: WorkloadSpec::from_name("conflict:0.02").expect("known"),
            ..SimConfig::default()
        };
        let config = SimConfig { protocol: wan_options(protocol), ..config };
        let report = with_protocol(protocol, Run(config)).expect("registered");
        assert!(report.violation().is_none(), "{protocol}: {:?}", report.violation());
        let means: Vec<f64> = report.sites.iter().map(|s| s.mean).collect();
        let average = means.iter().sum::<f64>() / means.len() as f64;
        let cells: Vec<String> = means.iter().map(|m| format!("{m:.1}")).collect();
        println!(
            "{:<16} {:>9} {:>13} {:>10} {:>10} {:>10} {:>14.1} {:>8.1}  {paper}",
            format!("{protocol} f={f}"),
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            average,
            report.latency_ms.mean
        );
    }
}

fn throughput() {
    // Five sites 0.25 ms apart (one way), so that each client's closest replica is its own
    // site's and Tempo's load spreads; the default CPU model (1 µs per event, 3 µs per message,
    // 1 ns per byte), serial per node.
    let sites: Vec<String> = (0..5).map(|i| format!("site{i}")).collect();
    let one_way: Vec<Vec<u64>> = (0..5).map(|i| (0..5).map(|j| if i == j { 0 } else { 250_000 }).collect()).collect();
    let latency = LatencyModel {
        sites,
        one_way_ns: one_way,
        jitter_mean_ns: 10_000,
        local_ns: 40_000,
        ..LatencyModel::default()
    };
    println!("\nThroughput, 5 sites 0.5 ms apart, CPU model, conflict:0.02, 4 KB values (as Fig. 7), 1s simulated");
    println!("{:<12} {:>8} {:>12} {:>8} {:>8} {:>10}", "protocol", "clients", "ops/s", "p50 ms", "p99 ms", "max cpu%");
    let mut best = std::collections::BTreeMap::new();
    // The paper's Fig. 7 runs without batching; Multi-Paxos batched (its default, 64 requests
    // per Prepare) is shown as well. Unbatched, its pipeline is widened so that the leader's CPU,
    // not the pipeline, is the limit. Tempo's LAN time-outs are raised so that queueing under
    // overload does not start recoveries and client retries that add load.
    for (label, protocol, options) in [
        ("tempo", "tempo", vec![("recovery_timeout_ns", 500_000_000), ("client_retry_ns", 2_000_000_000)]),
        (
            "multipaxos",
            "multipaxos",
            vec![("batch_max", 1), ("pipeline_max", 4096), ("client_retry_ns", 2_000_000_000)],
        ),
        ("mp-batch64", "multipaxos", vec![("client_retry_ns", 2_000_000_000)]),
    ] {
        let table: toml::Table =
            options.into_iter().map(|(name, value)| (name.to_string(), toml::Value::Integer(value))).collect();
        for clients in [80, 320, 1280] {
            let mut workload = WorkloadSpec::from_name("conflict:0.02").expect("known");
            workload.value_size = 4096;
            let config = SimConfig {
                seed: 1,
                replicas: 5,
                f: Some(1),
                clients,
                duration_ns: 1_000_000_000,
                latency: latency.clone(),
                cpu: CpuCost::default(),
                workload,
                check_linearizability: false,
                protocol: table.clone(),
                ..SimConfig::default()
            };
            let report = with_protocol(protocol, Run(config)).expect("registered");
            let busiest = report.nodes.iter().map(|n| n.cpu_utilisation).fold(0.0, f64::max);
            println!(
                "{:<12} {:>8} {:>12.0} {:>8.2} {:>8.2} {:>10.1}",
                label,
                clients,
                report.throughput_ops_per_s,
                report.latency_ms.p50,
                report.latency_ms.p99,
                busiest * 100.0
            );
            let entry = best.entry(label).or_insert(0.0f64);
            *entry = entry.max(report.throughput_ops_per_s);
        }
    }
    let ratio = best["tempo"] / best["multipaxos"].max(1.0);
    let ratio_batched = best["tempo"] / best["mp-batch64"].max(1.0);
    println!(
        "best: tempo {:.0} ops/s, multipaxos unbatched {:.0} ops/s (ratio {ratio:.2}; paper without batching: 230K vs 53K, 4.3x), multipaxos batched {:.0} ops/s (ratio {ratio_batched:.2})",
        best["tempo"], best["multipaxos"], best["mp-batch64"]
    );
}

fn main() {
    let part = std::env::var("ORDO_TEMPO_PART").unwrap_or_default();
    if part.is_empty() || part == "wan" {
        wan_table();
    }
    if part.is_empty() || part == "throughput" {
        throughput();
    }
}
