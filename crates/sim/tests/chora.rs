//! Chora in the simulator: its canary (and Mencius') is caught, responsive mode and adaptive switching
//! survive random faults, and a jittery network makes adaptive replicas switch modes.

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

fn fault_config(seed: u64, options: &[(&str, toml::Value)]) -> SimConfig {
    let mut table = toml::Table::new();
    for (key, value) in options {
        table.insert(key.to_string(), value.clone());
    }
    SimConfig {
        seed,
        duration_ns: 1_000_000_000,
        clients: 12,
        faults: FaultPlan { random: true, ..FaultPlan::default() },
        protocol: table,
        ..SimConfig::default()
    }
}

#[test]
fn committing_one_ack_short_of_a_quorum_is_caught() {
    // Goal: the harness can fail for Chora. Method: the canary commits at the (q-1)-th highest
    // ack; within 100 random-fault seeds some run must break a checked property for sure.
    let caught = (1..=100).find_map(|seed| {
        let report = with_protocol("chora-canary-commit-below-quorum", Run(fault_config(seed, &[]))).unwrap();
        report.violation().filter(|v| !matches!(v, Violation::Inconclusive(_))).map(|v| (seed, v))
    });
    let (seed, violation) = caught.expect("the canary survived 100 seeds");
    eprintln!("chora canary caught at seed {seed}: {violation}");
    let mencius = (1..=100).find(|&seed| {
        let report = with_protocol("mencius-canary-ack-any-chosen", Run(fault_config(seed, &[]))).unwrap();
        report.violation().is_some_and(|v| !matches!(v, Violation::Inconclusive(_)))
    });
    assert!(mencius.is_some(), "the Mencius canary survived 100 seeds");
}

#[test]
fn responsive_and_adaptive_modes_survive_random_faults() {
    // Goal: the event-driven mode and the switching rule keep safety and progress under
    // crashes, partitions, loss, duplication and reordering. Method: a few seeds of each
    // (the CLI campaigns of docs/reproduce/chora.md run hundreds).
    for mode in ["responsive", "adaptive"] {
        for seed in 1..=4 {
            let options = [("mode", toml::Value::String(mode.into()))];
            let report = with_protocol("chora", Run(fault_config(seed, &options))).unwrap();
            assert!(report.violation().is_none(), "mode {mode} seed {seed}: {:?}", report.violation());
            assert!(report.committed > 0);
        }
    }
}
