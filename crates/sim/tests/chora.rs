//! Chora in the simulator: its canary (and Mencius') is caught, responsive mode and adaptive switching
//! survive random faults, a slow network makes adaptive replicas switch modes, and the round-length
//! sweep (spec §12 scenario 30) peaks between too-short and too-long rounds.

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{Fault, FaultPlan, SimConfig, SimReport, Violation};

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

/// Each replica's mode switches in a run: (to responsive, to pulsing).
fn switches(report: &SimReport) -> Vec<(u64, u64)> {
    let count = |events: &std::collections::BTreeMap<String, u64>, name: &str| events.get(name).copied().unwrap_or(0);
    let replicas = report.nodes.iter().filter(|node| node.role == "replica");
    replicas
        .map(|node| (count(&node.events, "switch_to_responsive"), count(&node.events, "switch_to_pulsing")))
        .collect()
}

fn adaptive() -> [(&'static str, toml::Value); 1] {
    [("mode", toml::Value::String("adaptive".into()))]
}

#[test]
fn adaptive_replicas_switch_both_ways_under_random_slow_network_plans() {
    // Goal: the slow-network periods of `--faults random-slow` (spec §12 scenario 11, drawn
    // from the seed) make adaptive replicas leave pulsing mode and come back, and the switching
    // stays safe and live among all the other random faults. Method: three seeds of the CI
    // configuration with `random_slow`; every run passes every check, each has slow periods,
    // and over its replicas it switches at least once each way.
    for seed in 1..=3 {
        let mut config = fault_config(seed, &adaptive());
        config.faults.random_slow = true;
        let report = with_protocol("chora", Run(config)).unwrap();
        assert!(report.violation().is_none(), "seed {seed}: {:?}", report.violation());
        assert_eq!(report.linearizable, Some(true), "seed {seed}: checked and linearizable");
        assert!(report.faults.counts.get("slow").is_some_and(|&n| n > 0), "seed {seed}: {:?}", report.faults);
        assert!(report.network.slowed > 0, "seed {seed}: {:?}", report.network);
        let switches = switches(&report);
        let to_responsive: u64 = switches.iter().map(|s| s.0).sum();
        let to_pulsing: u64 = switches.iter().map(|s| s.1).sum();
        assert!(to_responsive >= 1 && to_pulsing >= 1, "seed {seed}: {switches:?}");
    }
}

#[test]
fn a_slow_period_sends_adaptive_replicas_responsive_and_its_end_brings_them_back() {
    // Goal: the switches come from the slow network, not from chance: during a slow period
    // every adaptive replica is responsive, while a calm run at the same moment is pulsing, and
    // after the period they are all pulsing again. Method: one slow period (every link, up to
    // 1 ms per message) from 100 to 300 ms, no other fault; runs cut at 290 ms (inside the
    // period) and at 600 ms (after it), and a calm run cut at 290 ms; read each replica's mode
    // from its status line and its switch counts.
    let slow = Fault::Slow { nodes: vec![], delay_max_ns: 1_000_000, at_ns: 100_000_000, until_ns: 300_000_000 };
    let run = |faults: Vec<Fault>, duration_ns: u64| {
        let mut config = fault_config(1, &adaptive());
        config.faults = FaultPlan { faults: faults.into_iter().map(Into::into).collect(), ..FaultPlan::default() };
        // Progress is required from 200 ms on: slow, the network still carries every message.
        config.faults.heal_ns = Some(200_000_000);
        config.duration_ns = duration_ns;
        let report = with_protocol("chora", Run(config)).unwrap();
        assert!(report.violation().is_none(), "{duration_ns} ns: {:?}", report.violation());
        report
    };
    let modes = |report: &SimReport| -> Vec<bool> {
        let replicas = report.nodes.iter().filter(|node| node.role == "replica");
        replicas.map(|node| node.status.contains("responsive")).collect()
    };
    let calm = run(vec![], 290_000_000);
    assert_eq!(modes(&calm), [false; 3], "calm replicas pulse: {:?}", switches(&calm));
    let during = run(vec![slow.clone()], 290_000_000);
    assert_eq!(modes(&during), [true; 3], "slow replicas respond: {:?}", switches(&during));
    let after = run(vec![slow], 600_000_000);
    assert_eq!(modes(&after), [false; 3], "and pulse again after: {:?}", switches(&after));
    for (to_responsive, to_pulsing) in switches(&after) {
        assert!(to_responsive >= 1 && to_pulsing >= 1, "{:?}", switches(&after));
    }
}

/// One point of the round-length sweep: (commits, broadcasts per commit, busiest replica's CPU).
fn round_length_point(round_ns: u64) -> (u64, f64, f64) {
    let mut table = toml::Table::new();
    table.insert("round_ns".into(), toml::Value::Integer(round_ns as i64));
    table.insert("batch_max".into(), toml::Value::Integer(1));
    let config = SimConfig { seed: 1, duration_ns: 30_000_000, clients: 32, protocol: table, ..SimConfig::default() };
    let report = with_protocol("chora", Run(config)).unwrap();
    assert!(report.violation().is_none(), "round {round_ns} ns: {:?}", report.violation());
    let replicas: Vec<_> = report.nodes.iter().filter(|node| node.role == "replica").collect();
    let sent: u64 = replicas.iter().map(|node| node.messages_sent).sum();
    let commits = report.committed.max(1);
    // Each pulse goes to N − 1 peers; each commit adds one reply to its client.
    let broadcasts = sent.saturating_sub(commits) as f64 / (replicas.len() - 1) as f64 / commits as f64;
    let cpu = replicas.iter().map(|node| node.cpu_utilisation).fold(0.0, f64::max);
    (report.committed, broadcasts, cpu)
}

#[test]
fn round_length_sweep_has_an_interior_optimum() {
    // Goal: spec §12 scenario 30 (paper Fig. 8): with the CPU cost model, a round shorter than
    // the per-round work sends more than one broadcast per commit (ack-only pulses between
    // proposals) and wastes CPU on them; a round far longer leaves the CPU idle; throughput
    // peaks in between. Method: 3 replicas, 32 closed-loop clients, batching off, one seed,
    // 30 ms simulated per point, rounds of 2, 20 and 80 µs (about 0.1, 1 and 4 times the
    // ~20 µs of CPU a round's work takes here, docs/reproduce/chora.md).
    let (short, middle, long) = (round_length_point(2_000), round_length_point(20_000), round_length_point(80_000));
    eprintln!("round 2 µs {short:?}, 20 µs {middle:?}, 80 µs {long:?} (commits, broadcasts/commit, cpu)");
    assert!(middle.0 > short.0, "a round near the per-round work beats a too-short one");
    assert!(middle.0 > long.0 * 2, "and a much longer one, which leaves the CPU idle");
    assert!(short.1 > 1.2, "too-short rounds send extra broadcasts per commit");
    assert!(short.1 > middle.1 && middle.1 > long.1, "broadcasts per commit fall as the round grows");
    assert!(long.1 < 1.05, "long rounds carry a proposal in almost every pulse");
    assert!(short.2 > 0.95 && long.2 < 0.5, "short rounds saturate the CPU, long ones leave it idle");
}
