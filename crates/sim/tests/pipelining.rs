//! Clients with several operations in flight (G10): every protocol whose clients pipeline keeps
//! its histories linearizable under random faults, the history names each operation by id, and a
//! workload that asks a protocol for more than its clients take is refused.

use ordo_check::EventKind;
use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, Violation, WorkloadSpec};
use std::collections::BTreeMap;

/// Operations each client keeps in flight.
const DEPTH: usize = 4;

fn pipelined(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        duration_ns: 1_000_000_000,
        clients: 6,
        faults: FaultPlan { random: true, ..FaultPlan::default() },
        // Enough keys that the checker's search stays small with 24 operations in flight.
        workload: WorkloadSpec { outstanding_max: DEPTH, ..WorkloadSpec::from_name("uniform:64").unwrap() },
        ..SimConfig::default()
    }
}

/// The protocol's client window, and for a pipelining protocol one run's outcome: (the
/// violation, operations committed, the most operations one history client had in flight).
struct Campaign(u64);

impl ProtocolVisitor for Campaign {
    type Output = (usize, Option<(Option<Violation>, u64, usize)>);
    fn visit<P: Protocol>(self) -> Self::Output {
        let window = P::client_window(&P::Config::default());
        if window < DEPTH {
            return (window, None);
        }
        let run = ordo_sim::run::<P>(pipelined(self.0)).expect("config is valid");
        let mut in_flight: BTreeMap<u64, usize> = BTreeMap::new();
        let mut deepest = 0;
        for event in &run.history {
            assert!(event.id.is_some(), "a pipelining client names its operations: {event:?}");
            let count = in_flight.entry(event.client).or_default();
            match event.kind {
                EventKind::Invoke => *count += 1,
                _ => *count -= 1,
            }
            deepest = deepest.max(*count);
        }
        (window, Some((run.report.violation(), run.report.committed, deepest)))
    }
}

#[test]
fn pipelining_clients_stay_linearizable_under_faults() {
    // Goal: several operations per client in flight, through retries, crashes and view
    // changes, never break linearizability or at-most-once execution, and they really overlap.
    // Method: 20 seeds with random faults for each protocol whose clients take 4 at once.
    let seeds: u64 = std::env::var("ORDO_TEST_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut pipelining = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        for seed in 1..=seeds {
            let (window, outcome) = with_protocol(info.name, Campaign(seed)).unwrap();
            let Some((violation, committed, deepest)) = outcome else {
                assert!(window >= 1, "{}: a client takes at least one operation", info.name);
                break;
            };
            assert!(violation.is_none(), "{} seed {seed}: {violation:?}", info.name);
            assert!(committed > 1_000, "{} seed {seed}: only {committed} committed", info.name);
            assert_eq!(deepest, DEPTH, "{} seed {seed}: clients kept {DEPTH} in flight", info.name);
            if seed == 1 {
                pipelining.push(info.name);
            }
        }
    }
    assert!(pipelining.contains(&"unreplicated") && pipelining.contains(&"multipaxos"), "{pipelining:?}");
}

struct TooDeep;

impl ProtocolVisitor for TooDeep {
    type Output = Result<(), String>;
    fn visit<P: Protocol>(self) -> Self::Output {
        let mut config = pipelined(1);
        config.workload.outstanding_max = P::client_window(&P::Config::default()) + 1;
        ordo_sim::run::<P>(config).map(|_| ())
    }
}

#[test]
fn a_workload_deeper_than_the_client_window_is_refused() {
    // Goal: asking a protocol's clients for more operations than they take is a clear error,
    // not a client that silently abandons its own operations.
    let error = with_protocol("nezha", TooDeep).unwrap().expect_err("nezha's clients take one");
    assert!(error.contains("outstanding_max 2 is more than nezha's clients take at once (1)"), "{error}");
    let error = with_protocol("multipaxos", TooDeep).unwrap().expect_err("beyond the window");
    assert!(error.contains("(16)"), "{error}");
}

struct Caught;

impl ProtocolVisitor for Caught {
    type Output = Option<(u64, Violation)>;
    fn visit<P: Protocol>(self) -> Self::Output {
        (1..=20).find_map(|seed| {
            let report = ordo_sim::run::<P>(pipelined(seed)).expect("config is valid").report;
            report.violation().filter(|v| !matches!(v, Violation::Inconclusive(_))).map(|v| (seed, v))
        })
    }
}

#[test]
fn the_pipelining_campaign_catches_a_retry_executed_twice() {
    // Goal: the campaign above can fail. Method: Multi-Paxos that applies a retried request
    // again instead of answering from the client table must break linearizability within 20
    // seeds of the same runs.
    let caught = with_protocol("multipaxos-canary-reexecuted-retry", Caught).unwrap();
    let (seed, violation) = caught.expect("the re-executing canary survived 20 pipelined seeds");
    eprintln!("caught at seed {seed}: {violation}");
}
