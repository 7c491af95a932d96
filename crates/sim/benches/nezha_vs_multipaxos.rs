//! Nezha against Multi-Paxos on the simulated LAN with the CPU cost model (the same costs for
//! both), as the Nezha paper compares them (§7.2, §7.6), and Nezha's graceful degradation as
//! clocks get worse (App. D).
//!
//! Table 1: protocol × replicas × offered load (open loop) → throughput, p50, p99, fast-path
//! ratio; then each protocol's saturation throughput and Nezha's ratio to it. Nezha runs with 8
//! proxies batching requests (its default), with the same 8 proxies as sidecars on the clients'
//! machines (§3's co-located deployment, how `ordo cluster up` runs them), with 8 proxies sending
//! each request alone, with the quorum check at the leader (the paper's No-QC-Offloading
//! ablation), and without proxies. Multi-Paxos runs twice: with ordo's batching (its default)
//! and with one request per `Prepare` (the leader load `2(2f+1)` of the paper's baseline, Tab. 1).
//! Table 1b: saturation of Nezha and both Multi-Paxos with 2,000 clients, so that the nodes,
//! not the clients, set the limit: Nezha with its 8 proxies (they set its limit), and with 24
//! (standalone and sidecars), enough that its replicas set the limit, as Multi-Paxos' do.
//! Table 2: Nezha with clock error bounds of 1 µs … 1 ms (every clock reading off by up to the
//! bound), with linearizability and agreement checked.
//! Run: `cargo bench -p ordo-sim --bench nezha_vs_multipaxos` (ORDO_QUICK=1 for fewer points).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{SimConfig, SimReport, WorkloadSpec};
use std::collections::BTreeMap;

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("valid config").report
    }
}

/// One protocol setting of table 1.
struct Variant {
    label: &'static str,
    protocol: &'static str,
    options: &'static str,
    /// Clients share machines with the proxies (`SimConfig::colocate_clients`).
    sidecar: bool,
}

const fn variant(label: &'static str, protocol: &'static str, options: &'static str) -> Variant {
    Variant { label, protocol, options, sidecar: false }
}

const VARIANTS: [Variant; 7] = [
    variant("nezha", "nezha", "proxies = 8"),
    Variant { sidecar: true, ..variant("nezha-sidecar", "nezha", "proxies = 8") },
    variant("nezha-nobatch", "nezha", "proxies = 8\nproxy_batch_window_ns = 0"),
    variant("nezha-leaderqc", "nezha", "proxies = 8\nquorum_check_at_leader = true"),
    variant("nezha-noproxy", "nezha", "proxies = 0"),
    variant("multipaxos", "multipaxos", ""),
    variant("multipaxos-b1", "multipaxos", "batch_max = 1"),
];

const CLIENTS: usize = 200;

/// Each simulated client has one operation outstanding (later arrivals wait in its backlog), so
/// clients cap throughput at `clients / latency`. With 200, Nezha reaches that cap at 3 and 5
/// replicas before any node's CPU saturates; table 1b uses enough clients to find the nodes' limit.
const MANY_CLIENTS: usize = 2000;

fn config(replicas: usize, offered_ops: f64, variant: &Variant, duration_ns: u64) -> SimConfig {
    config_with(CLIENTS, replicas, offered_ops, variant, duration_ns)
}

fn config_with(clients: usize, replicas: usize, offered_ops: f64, variant: &Variant, duration_ns: u64) -> SimConfig {
    let mut workload = WorkloadSpec::from_name("uniform:1000").expect("known workload");
    workload.rate_per_client = Some(offered_ops / clients as f64);
    SimConfig {
        seed: 1,
        replicas,
        clients,
        duration_ns,
        workload,
        check_linearizability: false,
        protocol: toml::from_str(variant.options).expect("options parse"),
        colocate_clients: variant.sidecar,
        ..SimConfig::default()
    }
}

fn main() {
    let quick = std::env::var("ORDO_QUICK").is_ok();
    let duration_ns = if quick { 200_000_000 } else { 400_000_000 };
    let loads: &[f64] = if quick {
        &[50_000.0, 150_000.0, 300_000.0]
    } else {
        &[25_000.0, 50_000.0, 100_000.0, 150_000.0, 200_000.0, 300_000.0, 400_000.0, 600_000.0, 800_000.0]
    };
    println!("Table 1: open loop, {CLIENTS} clients, uniform keys, LAN, CPU cost model (same for both)");
    println!(
        "{:<14} {:>8} {:>12} {:>12} {:>8} {:>8} {:>6}",
        "protocol", "replicas", "offered/s", "ops/s", "p50 ms", "p99 ms", "fast"
    );
    let mut saturation: BTreeMap<(usize, &str), f64> = BTreeMap::new();
    let mut p50: BTreeMap<(usize, &str, u64), (f64, f64)> = BTreeMap::new();
    for replicas in [3, 5, 9] {
        for variant in &VARIANTS {
            for &load in loads {
                let report = with_protocol(variant.protocol, Run(config(replicas, load, variant, duration_ns)))
                    .expect("registered");
                let fast = report.fast_path_ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
                println!(
                    "{:<14} {:>8} {:>12.0} {:>12.0} {:>8.3} {:>8.3} {:>6}",
                    variant.label,
                    replicas,
                    load,
                    report.throughput_ops_per_s,
                    report.latency_ms.p50,
                    report.latency_ms.p99,
                    fast
                );
                let best = saturation.entry((replicas, variant.label)).or_default();
                *best = best.max(report.throughput_ops_per_s);
                p50.insert(
                    (replicas, variant.label, load as u64),
                    (report.throughput_ops_per_s, report.latency_ms.p50),
                );
            }
        }
    }
    println!();
    println!("Saturation throughput (best over offered loads)");
    print!("{:>8}", "replicas");
    for variant in &VARIANTS {
        print!(" {:>14}", variant.label);
    }
    println!();
    for replicas in [3, 5, 9] {
        print!("{replicas:>8}");
        for variant in &VARIANTS {
            print!(" {:>14.0}", saturation[&(replicas, variant.label)]);
        }
        println!();
    }
    println!();
    println!("Ratios of saturation throughput");
    let pairs = [
        ("nezha", "multipaxos"),
        ("nezha", "multipaxos-b1"),
        ("nezha-sidecar", "multipaxos"),
        ("nezha-sidecar", "multipaxos-b1"),
        ("nezha-nobatch", "multipaxos"),
        ("nezha-nobatch", "multipaxos-b1"),
        ("nezha-leaderqc", "nezha"),
        ("nezha-noproxy", "multipaxos"),
        ("nezha-noproxy", "multipaxos-b1"),
    ];
    for (mine, other) in pairs {
        let ratios: Vec<String> = [3, 5, 9]
            .iter()
            .map(|&n| format!("n={n}: {:.2}", saturation[&(n, mine)] / saturation[&(n, other)]))
            .collect();
        println!("  {mine:>14} / {other:<14} {}", ratios.join("  "));
    }
    println!();
    println!("Median latency (p50 ms) at loads both sustain (achieved ≥ 95% of offered)");
    for replicas in [3, 5, 9] {
        for &load in loads {
            let key = |label| p50[&(replicas, label, load as u64)];
            for mine in ["nezha", "nezha-sidecar", "nezha-noproxy"] {
                let (mine_ops, mine_p50) = key(mine);
                for other in ["multipaxos", "multipaxos-b1"] {
                    let (other_ops, other_p50) = key(other);
                    if mine_ops >= 0.95 * load && other_ops >= 0.95 * load {
                        let verdict = if mine_p50 < other_p50 { "lower" } else { "NOT lower" };
                        println!(
                            "  n={replicas} load {load:>7.0}: {mine} {mine_p50:.3} vs {other} {other_p50:.3} ({verdict})"
                        );
                    }
                }
            }
        }
    }
    println!();
    many_clients_table(duration_ns);
    println!();
    clock_table(duration_ns);
}

/// Nezha with enough proxies that its replicas, not its proxies, set its limit (table 1b).
const MANY_PROXIES: [Variant; 2] = [
    variant("nezha-24px", "nezha", "proxies = 24"),
    Variant { sidecar: true, ..variant("sidecar-24px", "nezha", "proxies = 24") },
];

/// Table 1b: saturation with enough clients that the nodes, not the clients, set the limit
/// (each protocol offered more than it can do).
fn many_clients_table(duration_ns: u64) {
    println!("Table 1b: saturation with {MANY_CLIENTS} clients (open loop, offered above every protocol's limit)");
    let (multipaxos, multipaxos_b1) = ((&VARIANTS[5], 400_000.0), (&VARIANTS[6], 200_000.0));
    let nezhas = [
        (&VARIANTS[0], 1_200_000.0),
        (&VARIANTS[1], 1_200_000.0),
        (&MANY_PROXIES[0], 3_000_000.0),
        (&MANY_PROXIES[1], 3_000_000.0),
    ];
    let runs: Vec<_> = nezhas.iter().chain([&multipaxos, &multipaxos_b1]).collect();
    print!("{:>8}", "replicas");
    for (variant, _) in &runs {
        print!(" {:>14}", variant.label);
    }
    println!();
    let mut ratios = Vec::new();
    for replicas in [3, 5, 9] {
        let ops: Vec<f64> = runs
            .iter()
            .map(|(variant, offered)| {
                let config = config_with(MANY_CLIENTS, replicas, *offered, variant, duration_ns);
                with_protocol(variant.protocol, Run(config)).expect("registered").throughput_ops_per_s
            })
            .collect();
        print!("{replicas:>8}");
        for value in &ops {
            print!(" {value:>14.0}");
        }
        println!();
        ratios.push((replicas, ops));
    }
    println!("Ratios of table 1b");
    let (mp, mp_b1) = (nezhas.len(), nezhas.len() + 1);
    for (index, (variant, _)) in nezhas.iter().enumerate() {
        for (other, label) in [(mp, "multipaxos"), (mp_b1, "multipaxos-b1")] {
            let line: Vec<String> =
                ratios.iter().map(|(n, ops)| format!("n={n}: {:.2}", ops[index] / ops[other])).collect();
            println!("  {:>14} / {label:<14} {}", variant.label, line.join("  "));
        }
    }
}

/// Table 2: the same Nezha cluster with worse and worse clocks.
fn clock_table(duration_ns: u64) {
    println!("Table 2: Nezha, 3 replicas, closed loop, 16 clients, history workload (5 keys), checked");
    println!(
        "{:>10} {:>10} {:>8} {:>8} {:>6} {:>13} {:>10}",
        "clock err", "ops/s", "p50 ms", "p99 ms", "fast", "linearizable", "agreement"
    );
    for error_ns in [1_000, 10_000, 100_000, 1_000_000] {
        let mut config = SimConfig {
            seed: 1,
            replicas: 3,
            clients: 16,
            duration_ns,
            protocol: toml::from_str("proxies = 3").expect("options parse"),
            ..SimConfig::default()
        };
        // Every reading is off by up to the claimed bound, independently per reading.
        config.clock.error_bound_ns = error_ns;
        config.clock.jitter_ns = error_ns;
        let report = with_protocol("nezha", Run(config)).expect("registered");
        println!(
            "{:>8}µs {:>10.0} {:>8.3} {:>8.3} {:>6.2} {:>13} {:>10}",
            error_ns / 1_000,
            report.throughput_ops_per_s,
            report.latency_ms.p50,
            report.latency_ms.p99,
            report.fast_path_ratio.unwrap_or(0.0),
            report.linearizable.map_or("-", |ok| if ok { "yes" } else { "NO" }),
            if report.agreement { "yes" } else { "NO" }
        );
    }
}
