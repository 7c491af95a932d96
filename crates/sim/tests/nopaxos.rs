//! NOPaxos under a steady drop rate: spec §11 scenario 15. The scripted scenarios are in
//! `crates/protocols/src/nopaxos/tests.rs`; the seed campaigns with random faults in
//! `harness.rs` and CI.

use ordo_core::Protocol;
use ordo_protocols::nopaxos::NoPaxos;
use ordo_protocols::unreplicated::Unreplicated;
use ordo_sim::faults::{Fault, FaultPlan};
use ordo_sim::{SimConfig, SimReport};

const DURATION_NS: u64 = 1_000_000_000;

/// One run with a share `loss` of every packet dropped for the whole run (progress required
/// throughout: `heal_ns = 0`), the history workload, linearizability and the global checker on.
fn run<P: Protocol>(replicas: usize, loss: f64) -> SimReport {
    let faults =
        if loss > 0.0 { vec![Fault::Loss { probability: loss, at_ns: 0, until_ns: DURATION_NS }] } else { Vec::new() };
    let config = SimConfig {
        seed: 15,
        replicas,
        clients: 16,
        duration_ns: DURATION_NS,
        faults: FaultPlan { faults, heal_ns: Some(0), ..FaultPlan::default() },
        ..SimConfig::default()
    };
    ordo_sim::run::<P>(config).expect("valid config").report
}

fn event(report: &SimReport, name: &str) -> u64 {
    report.nodes.iter().map(|node| node.events.get(name).copied().unwrap_or(0)).sum()
}

#[test]
fn scenario_15_drop_rate_sweep_keeps_every_invariant() {
    // Goal: every invariant holds at every drop rate, and throughput degrades gracefully (no
    // collapse, no rollback, no divergence). Method: 3 and 5 replicas, drop rates 0, 0.1%,
    // 0.5%, 1% and 5% of all packets for the whole run; each run's history is checked for
    // linearizability, the global checker (I1-I13 across replicas) runs after every step,
    // replicas must agree on every key's write order, and every client must make progress.
    // Gap agreement must have run (drop notifications, filled gaps) wherever packets dropped.
    // Graceful is measured against an unreplicated server under the same drops: closed-loop
    // clients wait out a retry for every lost request or reply whatever the protocol (at 5%,
    // both lose most of their fault-free throughput to it), so NOPaxos must keep at least
    // 0.8x the share of its fault-free throughput that the single server keeps.
    let losses = [0.0, 0.001, 0.005, 0.01, 0.05];
    let alone_all: Vec<f64> = losses.iter().map(|&loss| run::<Unreplicated>(1, loss).throughput_ops_per_s).collect();
    for replicas in [3, 5] {
        let mut previous = f64::INFINITY;
        let mut at_zero = 0.0;
        for (&loss, &alone) in losses.iter().zip(&alone_all) {
            let report = run::<NoPaxos>(replicas, loss);
            let label = format!("{replicas} replicas, {:.1}% drops", loss * 100.0);
            assert_eq!(report.violation(), None, "{label}");
            assert_eq!(report.linearizable, Some(true), "{label}: the history was checked");
            assert!(report.observations > 0, "{label}: the global checker saw the run");
            let throughput = report.throughput_ops_per_s;
            if loss == 0.0 {
                at_zero = throughput;
                assert_eq!(event(&report, "drop_notification"), 0, "{label}: a fault-free run has no gaps");
            } else {
                assert!(report.network.dropped_loss > 0, "{label}: packets dropped");
                assert!(event(&report, "drop_notification") > 0, "{label}: replicas saw gaps");
                assert!(event(&report, "gap_filled") > 0, "{label}: gaps were filled with copies");
            }
            // More drops never buy throughput (2% slack for the seed's noise).
            assert!(throughput <= previous * 1.02, "{label}: {throughput:.0} ops/s after {previous:.0}");
            let (kept, alone_kept) = (throughput / at_zero, alone / alone_all[0]);
            assert!(
                kept >= 0.8 * alone_kept,
                "{label}: kept {kept:.2} of its throughput, unreplicated {alone_kept:.2}"
            );
            eprintln!("{label}: {throughput:.0} ops/s, kept {kept:.2} (unreplicated {alone_kept:.2})");
            previous = throughput;
        }
    }
}
