//! The generic harness every registered protocol gets for free: determinism, a fuzz campaign
//! with random faults, coverage goals, and negative controls (canaries that must be caught).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, SimReport, Violation};
use std::collections::BTreeMap;

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = (SimReport, &'static [&'static str]);
    fn visit<P: Protocol>(self) -> Self::Output {
        (ordo_sim::run::<P>(self.0).expect("config is valid").report, P::coverage_goals())
    }
}

/// Clients of every campaign run. Twelve keep enough operations in flight that a write can sit
/// in the narrow windows where a broken fast quorum loses it (a leader crash before its sync
/// reaches a follower): with six, the Nezha canary was caught in 1 seed of 200.
const CAMPAIGN_CLIENTS: usize = 12;

fn fault_config(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        duration_ns: 1_000_000_000,
        clients: CAMPAIGN_CLIENTS,
        faults: FaultPlan { random: true, ..FaultPlan::default() },
        ..SimConfig::default()
    }
}

fn seeds_from_env(default: u64) -> u64 {
    std::env::var("ORDO_TEST_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The report without the fields that measure the host rather than the run.
fn deterministic_part(report: &SimReport) -> serde_json::Value {
    let mut json = serde_json::to_value(report).unwrap();
    let object = json.as_object_mut().unwrap();
    object.remove("wall_s");
    object.remove("events_per_wall_s");
    json
}

#[test]
fn same_seed_same_summary() {
    // Goal: a run is a function of its seed. Method: run every protocol twice with the same
    // seed and random faults and compare the JSON summaries (all but the wall-clock fields).
    // Every protocol is checked before the test fails, listing each one that failed and why.
    let mut failures = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        let first = with_protocol(info.name, Run(fault_config(42))).unwrap().0;
        let second = with_protocol(info.name, Run(fault_config(42))).unwrap().0;
        if first.committed == 0 {
            failures.push(format!("{}: nothing committed", info.name));
        }
        if deterministic_part(&first) != deterministic_part(&second) {
            failures.push(format!("{} is not deterministic: seed 42 gave two different summaries", info.name));
        }
        let other = with_protocol(info.name, Run(fault_config(43))).unwrap().0;
        if deterministic_part(&first) == deterministic_part(&other) {
            failures.push(format!("{}: the seed changes nothing (seeds 42 and 43 gave the same summary)", info.name));
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_protocol_survives_random_faults() {
    // Goal: safety and progress under crashes, partitions, loss, duplication, reordering and
    // clock faults. Method: a seed campaign per protocol (ORDO_TEST_SEEDS, default 24; CI runs
    // 200 more through the CLI); the protocol's coverage goals (view change, state transfer...)
    // must each be reached at least once. Every protocol runs every seed before the test fails
    // with the list of all failing protocols and seeds, each violation with its replay command.
    let seeds = seeds_from_env(24);
    let mut failures = Vec::new();
    let mut failing_seeds = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        let mut reached: BTreeMap<String, u64> = BTreeMap::new();
        let mut goals: &[&str] = &[];
        let mut failed = Vec::new();
        for seed in 1..=seeds {
            let (report, protocol_goals) = with_protocol(info.name, Run(fault_config(seed))).unwrap();
            goals = protocol_goals;
            if let Some(violation) = report.violation() {
                failed.push(seed);
                failures.push(format!(
                    "{} seed {seed}: {violation}\n  replay: ordo sim --protocol {} --seed {seed} --faults random --duration 1s --clients {CAMPAIGN_CLIENTS}",
                    info.name, info.name
                ));
            }
            for node in &report.nodes {
                for (event, count) in &node.events {
                    *reached.entry(event.clone()).or_default() += count;
                }
            }
        }
        if !failed.is_empty() {
            failing_seeds.push(format!("{} seeds {failed:?}", info.name));
        }
        for goal in goals.iter().filter(|goal| !reached.contains_key(**goal)) {
            failures.push(format!("{}: {seeds} seeds never reached `{goal}` (reached: {reached:?})", info.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s); failing seeds: {}\n{}",
        failures.len(),
        if failing_seeds.is_empty() { "none".to_string() } else { failing_seeds.join(", ") },
        failures.join("\n")
    );
}

#[test]
fn every_protocol_survives_client_restarts_and_power_cuts() {
    // Goal: a client node that restarts (a gateway's process) numbers its requests from 1 again
    // under a new client id, and nothing a replica sends to its address afterwards may complete
    // a new request with an old result; protocols that keep their state on disk survive a power
    // cut of every node at once. Method: `--faults random-clients` (the random plan, plus
    // client crashes and, where `state_on_disk`, a power cut) over ORDO_TEST_SEEDS (default
    // 12) seeds per protocol; every run must pass, and the plans must really crash clients
    // (and every replica at once where there is a power cut). Negative control: with the
    // client's own-id check of `ClientPipeline::complete` removed, Multi-Paxos fails at seed 1
    // (a read answered with an old result after the power cut); the testkit's
    // `a_power_cut_of_every_node_keeps_every_acknowledged_write` pins that case.
    let seeds = seeds_from_env(12);
    let mut failures = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        let mut client_crashes = 0;
        for seed in 1..=seeds {
            let mut config = fault_config(seed);
            config.faults.random_clients = true;
            let (report, _) = with_protocol(info.name, Run(config)).unwrap();
            if let Some(violation) = report.violation() {
                failures.push(format!(
                    "{} seed {seed}: {violation}\n  replay: ordo sim --protocol {} --seed {seed} --faults random-clients --duration 1s --clients {CAMPAIGN_CLIENTS}",
                    info.name, info.name
                ));
            }
            client_crashes += report.faults.crash_by_role.get("client").copied().unwrap_or(0);
            let replica_crashes = report.faults.crash_by_role.get("replica").copied().unwrap_or(0);
            if info.state_on_disk && replica_crashes < report.replicas as u64 {
                failures.push(format!("{} seed {seed}: no power cut ({replica_crashes} replica crashes)", info.name));
            }
        }
        if client_crashes == 0 {
            failures.push(format!("{}: {seeds} seeds crashed no client", info.name));
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn canaries_are_caught_within_100_seeds() {
    // Goal: the harness can fail. Method: every deliberately broken variant in the registry
    // must produce a violation within 100 seeds of the same campaign; every canary is tried
    // before the test fails, naming each one that survived.
    let canaries: Vec<_> = protocols().into_iter().filter(|p| p.canary).collect();
    assert!(!canaries.is_empty(), "the registry has no canary: the fuzz harness is unproven");
    let mut survivors = Vec::new();
    for info in canaries {
        let caught = (1..=100).find_map(|seed| {
            let report = with_protocol(info.name, Run(fault_config(seed))).unwrap().0;
            // An inconclusive check is not a catch: the canary must break something for sure.
            report.violation().filter(|violation| !matches!(violation, Violation::Inconclusive(_))).map(|v| (seed, v))
        });
        match caught {
            Some((seed, violation)) => eprintln!("canary {} caught at seed {seed}: {violation}", info.name),
            None => survivors.push(info.name),
        }
    }
    assert!(survivors.is_empty(), "canaries that survived 100 seeds: {}", survivors.join(", "));
}
