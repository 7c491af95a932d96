//! SwiftPaxos, N²Paxos and CURP+ in the simulator: the campaign configuration of the generic
//! harness with five replicas (the harness runs three, and catches every canary).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, SimReport};

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
fn campaign_with_five_replicas() {
    // Goal: safety and progress with f = 2 under the harness' faults, for SwiftPaxos and the
    // two baselines built on its nodes (the harness runs 3 replicas, and every canary,
    // `swiftpaxos-canary-single-vote`, `n2paxos-canary-own-order` and
    // `curp-canary-blind-witness` included). Method: the first seeds of the campaign with five
    // replicas (the CLI runs 300 and 200: docs/reproduce/swiftpaxos.md).
    for protocol in ["swiftpaxos", "n2paxos", "curp"] {
        for seed in 1..=2 {
            let report = with_protocol(protocol, Run(campaign(seed, 5))).unwrap();
            assert!(report.violation().is_none(), "{protocol} seed {seed}: {:?}", report.violation());
            assert!(report.committed > 0, "{protocol} seed {seed}: nothing committed");
        }
    }
}
