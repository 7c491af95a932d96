//! NOPaxos' evaluation (OSDI 2016 §6, spec §8.3) in the simulator with the CPU cost model:
//! every server node at the same costs (1 µs per event, 3 µs per message, 1 ns per byte), the
//! LAN (40 µs + Exp(10 µs) one way), closed-loop clients, seed 1, uniform writes over 1000 keys.
//!
//! The sequencer is "free" (no CPU model) and half a link from everyone (20 µs one way, a site
//! of its own): the paper's in-switch sequencer. Rows marked `end-host` give it a normal node's
//! costs instead (the paper's Fig. 6). No row batches except `multipaxos` (ordo's batching
//! Multi-Paxos, the paper's "Paxos + batching"); `multipaxos-b1` is one request per `Prepare`
//! (`batch_max = 1`), the paper's Paxos. NOPaxos never batches.
//!
//! - Table 1 (Fig. 5, Fig. 6): throughput and latency as clients grow, 5 replicas; then each
//!   row's saturation throughput (the highest over the client counts) and NOPaxos' ratios.
//! - Table 2 (Fig. 7): saturation throughput (the highest over 64, 128 and 256 clients) with a
//!   share of all packets dropped (0, 0.1%, 1%, 5%), NOPaxos, batched Multi-Paxos and Nezha
//!   side by side.
//! - Table 3 (Fig. 8): saturation throughput at 3, 5, 7 and 9 replicas.
//!
//! Run: `cargo bench -p ordo-sim --bench nopaxos` (ORDO_QUICK=1 for fewer points, ORDO_TABLES=2
//! for the drop table alone, ORDO_TABLES=13 for tables 1 and 3).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::faults::{Fault, FaultPlan};
use ordo_sim::placement::{RoleCpu, RolePlacement};
use ordo_sim::{SimConfig, SimReport, WorkloadSpec};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("valid config").report
    }
}

/// One row: a protocol, its options, and whether the sequencer is in the switch.
struct Row {
    label: &'static str,
    protocol: &'static str,
    options: &'static str,
    switch_sequencer: bool,
}

const fn row(label: &'static str, protocol: &'static str, options: &'static str) -> Row {
    Row { label, protocol, options, switch_sequencer: false }
}

const NOPAXOS: Row = Row { switch_sequencer: true, ..row("nopaxos", "nopaxos", "") };
const NOPAXOS_END_HOST: Row = row("nopaxos end-host", "nopaxos", "");
const UNREPLICATED: Row = row("unreplicated", "unreplicated", "");
const MULTIPAXOS_B1: Row = row("multipaxos-b1", "multipaxos", "batch_max = 1");
const MULTIPAXOS: Row = row("multipaxos", "multipaxos", "");
const NEZHA: Row = row("nezha", "nezha", "proxies = 8");

const DURATION_NS: u64 = 500_000_000;

fn config(row: &Row, replicas: usize, clients: usize, loss: f64) -> SimConfig {
    let mut config = SimConfig {
        seed: 1,
        replicas,
        clients,
        duration_ns: DURATION_NS,
        workload: WorkloadSpec::from_name("uniform:1000").expect("known workload"),
        check_linearizability: false,
        protocol: toml::from_str(row.options).expect("options parse"),
        ..SimConfig::default()
    };
    if row.switch_sequencer {
        config.placement.insert("sequencer".into(), RolePlacement { site: None, own_site_delay_ns: Some(20_000) });
        config.cpu_roles.insert("sequencer".into(), RoleCpu::Named("free".into()));
    }
    if loss > 0.0 {
        // Every packet, for the whole run; progress is required throughout.
        config.faults = FaultPlan {
            random: false,
            random_slow: false,
            faults: vec![Fault::Loss { probability: loss, at_ns: 0, until_ns: DURATION_NS }],
            heal_ns: Some(0),
        };
    }
    config
}

fn run(row: &Row, replicas: usize, clients: usize, loss: f64) -> SimReport {
    with_protocol(row.protocol, Run(config(row, replicas, clients, loss))).expect("registered")
}

/// The highest throughput over `clients`.
fn saturation(row: &Row, replicas: usize, clients: &[usize], loss: f64) -> f64 {
    clients.iter().map(|&c| run(row, replicas, c, loss).throughput_ops_per_s).fold(0.0, f64::max)
}

/// Which tables to print: `ORDO_TABLES=2` (or `1,3`...) for some, every table by default.
fn wanted(table: char) -> bool {
    std::env::var("ORDO_TABLES").map_or(true, |tables| tables.contains(table))
}

fn main() {
    let quick = std::env::var("ORDO_QUICK").is_ok();
    let curve: &[usize] = if quick { &[1, 64, 256] } else { &[1, 4, 16, 32, 64, 128, 256] };
    let saturating: &[usize] = if quick { &[256] } else { &[128, 256] };
    // The drop table also tries 64 clients: before gap agreement was served ahead of queued
    // requests (`Protocol::is_urgent`), each gap the leader resolved waited a follower's queue,
    // so fewer clients (shorter queues) did better.
    let saturating_lossy: &[usize] = if quick { &[64] } else { &[64, 128, 256] };
    if wanted('1') {
        table_latency(curve);
    }
    if wanted('2') {
        table_drops(saturating_lossy);
    }
    if wanted('3') {
        table_replicas(saturating);
    }
}

fn table_latency(curve: &[usize]) {
    println!("Table 1: throughput vs latency, 5 replicas (closed-loop clients)\n");
    println!("| row | clients | ops/s | p50 ms | p99 ms | busiest node (CPU) |");
    println!("|---|---|---|---|---|---|");
    let rows = [&NOPAXOS, &UNREPLICATED, &MULTIPAXOS_B1, &MULTIPAXOS, &NOPAXOS_END_HOST];
    let mut peak = Vec::new();
    for row in rows {
        let mut best: f64 = 0.0;
        for &clients in curve {
            let report = run(row, 5, clients, 0.0);
            let busiest =
                report.nodes.iter().max_by(|a, b| a.cpu_utilisation.total_cmp(&b.cpu_utilisation)).expect("nodes");
            println!(
                "| {} | {clients} | {:.0} | {:.3} | {:.3} | n{} {} ({:.0}%) |",
                row.label,
                report.throughput_ops_per_s,
                report.latency_ms.p50,
                report.latency_ms.p99,
                busiest.id,
                busiest.role,
                busiest.cpu_utilisation * 100.0
            );
            best = best.max(report.throughput_ops_per_s);
        }
        peak.push((row.label, best));
    }
    let of = |label: &str| peak.iter().find(|(l, _)| *l == label).map(|(_, t)| *t).expect("row");
    println!("\nSaturation (highest over the client counts), 5 replicas:\n");
    println!("| row | ops/s | NOPaxos (switch) / row | NOPaxos (end-host) / row |");
    println!("|---|---|---|---|");
    for (label, throughput) in &peak {
        println!(
            "| {label} | {throughput:.0} | {:.2} | {:.2} |",
            of("nopaxos") / throughput,
            of("nopaxos end-host") / throughput
        );
    }
}

fn table_drops(saturating_lossy: &[usize]) {
    println!("\nTable 2: saturation throughput (ops/s) vs packet drop rate, 5 replicas\n");
    let losses = [0.0, 0.001, 0.01, 0.05];
    println!("| row | 0 | 0.1% | 1% | 5% | 1% / 0 |");
    println!("|---|---|---|---|---|---|");
    for row in [&NOPAXOS, &MULTIPAXOS, &NEZHA] {
        let points: Vec<f64> = losses.iter().map(|&loss| saturation(row, 5, saturating_lossy, loss)).collect();
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} |",
            row.label,
            points[0],
            points[1],
            points[2],
            points[3],
            points[2] / points[0]
        );
    }
}

fn table_replicas(saturating: &[usize]) {
    println!("\nTable 3: saturation throughput (ops/s) vs replicas\n");
    let replicas = [3, 5, 7, 9];
    println!("| row | 3 | 5 | 7 | 9 | 9 / 3 |");
    println!("|---|---|---|---|---|---|");
    for row in [&NOPAXOS, &MULTIPAXOS, &MULTIPAXOS_B1] {
        let points: Vec<f64> = replicas.iter().map(|&n| saturation(row, n, saturating, 0.0)).collect();
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} |",
            row.label,
            points[0],
            points[1],
            points[2],
            points[3],
            points[3] / points[0]
        );
    }
}
