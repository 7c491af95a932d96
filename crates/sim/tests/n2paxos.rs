//! N²Paxos in the simulator: its negative control (a canary the checker must catch) and a few
//! seeds of the generic campaign with five replicas (the CLI runs 200: docs/reproduce/swiftpaxos.md).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, SimReport, Violation};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("config is valid").report
    }
}

/// The generic harness' campaign: 12 clients, 1 s, random faults.
fn campaign(seed: u64, replicas: usize) -> SimConfig {
    SimConfig {
        seed,
        replicas,
        duration_ns: 1_000_000_000,
        clients: 12,
        faults: FaultPlan { random: true, ..FaultPlan::default() },
        ..SimConfig::default()
    }
}

#[test]
fn own_order_canary_is_caught() {
    // Goal: the checker sees followers that 2B an order the leader did not choose. Method: the
    // canary's followers keep the dependencies of their own arrival order; under the campaign's
    // contention two replicas soon commit one command with different dependencies (Inv 1).
    let caught = (1..=100).find_map(|seed| {
        let report = with_protocol("n2paxos-canary-own-order", Run(campaign(seed, 3))).unwrap();
        report.violation().filter(|v| !matches!(v, Violation::Inconclusive(_))).map(|v| (seed, v))
    });
    let (seed, violation) = caught.expect("the own-order canary survived 100 seeds");
    eprintln!("n2paxos-canary-own-order caught at seed {seed}: {violation}");
}

#[test]
fn campaign_with_five_replicas() {
    // Goal: safety and progress with f = 2 under the harness' faults, leader crashes included.
    for seed in 1..=2 {
        let report = with_protocol("n2paxos", Run(campaign(seed, 5))).unwrap();
        assert!(report.violation().is_none(), "seed {seed}: {:?}", report.violation());
        assert!(report.committed > 0, "seed {seed}: nothing committed");
    }
}
