//! SwiftPaxos in the simulator: its negative controls (canaries the checker must catch) and the
//! campaign configuration of the generic harness, run for more seeds than the harness does.

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

fn first_catch(name: &str, replicas: usize, seeds: u64) -> Option<(u64, Violation)> {
    (1..=seeds).find_map(|seed| {
        let report = with_protocol(name, Run(campaign(seed, replicas))).unwrap();
        report.violation().filter(|v| !matches!(v, Violation::Inconclusive(_))).map(|v| (seed, v))
    })
}

#[test]
fn single_vote_canary_is_caught() {
    // Goal: the checker sees a follower that does not vote twice. Method: the canary's followers
    // keep their own dependencies while their SlowAck claims the leader's; under the campaign's
    // contention two replicas soon commit one command with different dependencies (Inv 1).
    let caught = first_catch("swiftpaxos-canary-single-vote", 3, 100);
    let (seed, violation) = caught.expect("the single-vote canary survived 100 seeds");
    eprintln!("swiftpaxos-canary-single-vote caught at seed {seed}: {violation}");
}

#[test]
fn campaign_with_five_replicas() {
    // Goal: safety and progress with f = 2 under the harness' faults. Method: the first seeds of
    // the campaign with five replicas (the CLI runs 300: docs/reproduce/swiftpaxos.md).
    for seed in 1..=2 {
        let report = with_protocol("swiftpaxos", Run(campaign(seed, 5))).unwrap();
        assert!(report.violation().is_none(), "seed {seed}: {:?}", report.violation());
        assert!(report.committed > 0, "seed {seed}: nothing committed");
    }
}
