//! Tempo (Enes et al., EuroSys 2021): per-site latency on five EC2 regions (§6.3, Fig. 5), tail
//! latency as conflicts grow (Fig. 6), and throughput as clients grow (Fig. 7). The paper's
//! numbers are those of `specs/tempo.md` §8.5.

use super::{MS, base};
use crate::experiment::{Analysis, Axis, Chart, ChartKind, Claim, Expected, Experiment, Paper, Run, Value};
use ordo_sim::{LatencyModel, SimConfig};

/// The five regions of the paper's EC2 runs (specs/tempo.md §8.2), one replica and one client
/// site per region.
const AWS: &str = include_str!("../../../../examples/latency/aws-5-regions.toml");
const SITES: [&str; 5] = ["ireland", "n-california", "singapore", "canada", "sao-paulo"];

/// Tempo's experiments, full or quick.
pub fn paper(quick: bool) -> Paper {
    Paper {
        name: "tempo",
        title: "Efficient Replication via Timestamp Stability (Tempo, EuroSys 2021)",
        scope: "All runs are simulations, seed 1, with the CPU cost model (1 µs per event, 3 µs per message, \
                1 ns per byte). The WAN runs use the 5-region round-trip matrix of `specs/tempo.md` §8.2 \
                (one-way = RTT/2). ordo's baseline is Multi-Paxos (Viewstamped Replication, majority \
                quorums, leader in Ireland) standing in for FPaxos; the paper's Atlas, EPaxos, Caesar and \
                Janus* baselines and its partial-replication runs (Fig. 9) are not reproduced.",
        experiments: vec![wan(quick), tails(quick), throughput(quick)],
    }
}

fn aws() -> LatencyModel {
    LatencyModel::from_toml(AWS).expect("the embedded latency matrix is valid")
}

/// A protocol of the WAN runs: Tempo at f, or Multi-Paxos with WAN time-outs.
struct WanProtocol {
    label: &'static str,
    protocol: &'static str,
    f: usize,
}

const WAN_PROTOCOLS: [WanProtocol; 3] = [
    WanProtocol { label: "tempo f=1", protocol: "tempo", f: 1 },
    WanProtocol { label: "tempo f=2", protocol: "tempo", f: 2 },
    WanProtocol { label: "multipaxos, leader IE", protocol: "multipaxos", f: 2 },
];

impl WanProtocol {
    /// Five replicas on the WAN; Multi-Paxos' LAN time-outs raised (or it changes views
    /// forever) and its pipeline widened so that clients do not queue behind it.
    fn config(&self, clients: usize, workload: &str, duration_ns: u64) -> SimConfig {
        let mut config = SimConfig { latency: aws(), f: Some(self.f), ..base(5, clients, workload, duration_ns) };
        if self.protocol == "multipaxos" {
            config.protocol = super::options(
                "heartbeat_ns = 50000000\nview_change_timeout_ns = 2000000000\nclient_retry_ns = 3000000000\n\
                 pipeline_max = 64",
            );
        }
        config
    }

    fn run(&self, id: String, x: f64, config: SimConfig) -> Run {
        Run { id, series: self.label.into(), x, protocol: self.protocol, config, analysis: Analysis::Summary }
    }
}

fn wan(quick: bool) -> Experiment {
    let seconds = if quick { 5 } else { 30 };
    let runs = WAN_PROTOCOLS
        .iter()
        .map(|p| {
            let mut config = p.config(40, "conflict:0.02", seconds * 1_000 * MS);
            config.check_linearizability = true;
            p.run(p.label.into(), 0.0, config)
        })
        .collect();
    Experiment {
        id: "fig5",
        figures: "Fig. 5, §6.3",
        title: "per-site latency on five EC2 regions",
        measures: "Mean latency of the clients of each region, and its mean over the regions, for Tempo at f = 1 \
                   and f = 2 and for a leader-based protocol with its leader in Ireland.",
        settings: format!(
            "5 replicas, one per region; 40 closed-loop clients spread round-robin over the regions; 2% \
             conflicts (key 0 with probability 0.02, otherwise a fresh key), 100-byte values; {seconds} s \
             simulated; linearizability checked."
        ),
        limits: "The paper ran 512 clients per site on EC2, where queueing adds to latency; 40 clients measure \
                 the protocols' message delays. ordo's Multi-Paxos has majority phase-2 quorums, the paper's \
                 FPaxos f = 2 column; FPaxos f = 1's quorums of f + 1 are not offered.",
        runs,
        charts: vec![wan_chart()],
        claims: wan_claims(),
    }
}

fn wan_chart() -> Chart {
    let mut names = SITES.to_vec();
    names.push("mean of sites");
    let metrics =
        vec!["site:ireland", "site:n-california", "site:singapore", "site:canada", "site:sao-paulo", "sites_mean"];
    Chart {
        file: "fig5".into(),
        title: "Fig. 5: mean latency per client site, 5 EC2 regions, 2% conflicts".into(),
        x: Axis { desc: "client site", metric: "", log: false },
        y: Axis { desc: "mean latency (ms)", metric: "", log: false },
        kind: ChartKind::Categories { names, metrics },
        only: None,
        paper: vec![
            ("tempo f=1".into(), vec![(5.0, 138.0)]),
            ("tempo f=2".into(), vec![(5.0, 178.0)]),
            ("multipaxos, leader IE".into(), vec![(0.0, 142.0), (2.0, 323.0), (4.0, 325.0)]),
            ("FPaxos f=1 (not in ordo)".into(), vec![(0.0, 82.0), (2.0, 264.0), (4.0, 267.0)]),
        ],
    }
}

fn wan_claims() -> Vec<Claim> {
    let site = |run: &str, metric| Value::metric(run, metric);
    let claim = |what: &str, paper, ordo, caveat| Claim {
        what: what.into(),
        paper: Expected::About(paper),
        ordo,
        unit: "ms",
        tolerance: 0.1,
        caveat,
    };
    let majority = "ordo's Multi-Paxos stands in for FPaxos f = 2 (majority quorums of 3 of 5)";
    vec![
        claim(
            "Tempo f = 1, mean over the sites",
            138.0,
            Some(site("tempo f=1", "sites_mean")),
            "queueing at 512 clients per site",
        ),
        claim(
            "Tempo f = 2, mean over the sites",
            178.0,
            Some(site("tempo f=2", "sites_mean")),
            "queueing at 512 clients per site",
        ),
        claim(
            "FPaxos f = 2, Ireland (the leader)",
            142.0,
            Some(site("multipaxos, leader IE", "site:ireland")),
            majority,
        ),
        claim("FPaxos f = 2, Singapore", 323.0, Some(site("multipaxos, leader IE", "site:singapore")), majority),
        claim("FPaxos f = 2, São Paulo", 325.0, Some(site("multipaxos, leader IE", "site:sao-paulo")), majority),
        claim(
            "FPaxos f = 1, Ireland (the leader)",
            82.0,
            None,
            "ordo's Multi-Paxos has no f + 1 phase-2 quorums (Flexible Paxos)",
        ),
    ]
}

const CONFLICTS: [f64; 4] = [0.0, 0.02, 0.1, 0.3];

fn tails(quick: bool) -> Experiment {
    let (clients, seconds) = if quick { (200, 5) } else { (640, 6) };
    let mut runs = Vec::new();
    for p in &WAN_PROTOCOLS {
        for rate in CONFLICTS {
            let config = p.config(clients, &format!("conflict:{rate}"), seconds * 1_000 * MS);
            runs.push(p.run(format!("{}@{}%", p.label, rate * 100.0), rate * 100.0, config));
        }
    }
    Experiment {
        id: "fig6",
        figures: "Fig. 6, §6.3",
        title: "tail latency as conflicts grow",
        measures: "The 99th and 99.9th percentile of latency over all sites as the conflict rate grows. The \
                   paper gives Tempo's tail at 2% conflicts (Fig. 6); the other rates show how a conflicting \
                   command's wait for the stability of every earlier timestamp on its key adds to the tail.",
        settings: format!(
            "The WAN of Fig. 5; {clients} closed-loop clients ({} per site); conflict rates {}%; {seconds} s \
             simulated per point.",
            clients / 5,
            CONFLICTS.iter().map(|c| (c * 100.0).to_string()).collect::<Vec<_>>().join(", ")
        ),
        limits: "The paper's tails come from EC2 with 256 and 512 clients per site, whose machines queue; the \
                 simulator's tails come from its CPU model and the WAN matrix. Atlas, EPaxos and Caesar, whose \
                 tails the paper contrasts with Tempo's, are not built.",
        runs,
        charts: vec![
            tail_chart("fig6", "p99_ms", "99th percentile latency (ms)", vec![(2.0, 280.0)], vec![(2.0, 449.0)]),
            tail_chart(
                "fig6-p999",
                "p999_ms",
                "99.9th percentile latency (ms)",
                vec![(2.0, 361.0)],
                vec![(2.0, 552.0)],
            ),
        ],
        claims: tail_claims(),
    }
}

fn tail_chart(file: &str, metric: &'static str, desc: &'static str, f1: Vec<(f64, f64)>, f2: Vec<(f64, f64)>) -> Chart {
    let which = if metric == "p99_ms" { "p99" } else { "p99.9" };
    Chart {
        file: file.into(),
        title: format!("Fig. 6: {which} latency against the conflict rate, 5 EC2 regions"),
        x: Axis { desc: "conflict rate (%)", metric: "x", log: false },
        y: Axis { desc, metric, log: false },
        kind: ChartKind::Lines,
        only: None,
        paper: vec![("tempo f=1".into(), f1), ("tempo f=2".into(), f2)],
    }
}

fn tail_claims() -> Vec<Claim> {
    let at = |label: &str, rate: &str, metric| Value::metric(format!("{label}@{rate}%"), metric);
    let claim = |what: &str, paper, ordo| Claim {
        what: what.into(),
        paper: Expected::About(paper),
        ordo: Some(ordo),
        unit: "ms",
        tolerance: 0.25,
        caveat: "the paper's tail includes queueing on EC2 machines at 256-512 clients per site",
    };
    vec![
        claim("Tempo f = 1, p99 at 2% conflicts", 280.0, at("tempo f=1", "2", "p99_ms")),
        claim("Tempo f = 1, p99.9 at 2% conflicts", 361.0, at("tempo f=1", "2", "p999_ms")),
        claim("Tempo f = 2, p99 at 2% conflicts", 449.0, at("tempo f=2", "2", "p99_ms")),
        claim("Tempo f = 2, p99.9 at 2% conflicts", 552.0, at("tempo f=2", "2", "p999_ms")),
    ]
}

/// Five sites 0.25 ms apart one way, so that each client's closest replica is its own site's and
/// Tempo's load spreads: the paper's Fig. 7 cluster, without its injected WAN delays.
fn cluster() -> LatencyModel {
    let sites: Vec<String> = (0..5).map(|i| format!("site{i}")).collect();
    let one_way = (0..5).map(|i| (0..5).map(|j| if i == j { 0 } else { 250_000 }).collect()).collect();
    LatencyModel { sites, one_way_ns: one_way, jitter_mean_ns: 10_000, local_ns: 40_000, ..LatencyModel::default() }
}

/// The protocols of Fig. 7, with their options: Tempo's LAN time-outs raised so that queueing
/// under overload does not start recoveries and retries that add load; Multi-Paxos unbatched
/// (the paper's Fig. 7 runs without batching) with a pipeline wide enough that its leader's CPU
/// sets its limit, and batched (ordo's default) beside it.
const THROUGHPUT_PROTOCOLS: [(&str, &str, &str); 3] = [
    ("tempo", "tempo", "recovery_timeout_ns = 500000000\nclient_retry_ns = 2000000000"),
    ("multipaxos", "multipaxos", "batch_max = 1\npipeline_max = 4096\nclient_retry_ns = 2000000000"),
    ("multipaxos-batched", "multipaxos", "client_retry_ns = 2000000000"),
];

fn throughput(quick: bool) -> Experiment {
    let clients: &[usize] = if quick { &[80, 1280] } else { &[80, 320, 1280, 2560] };
    let duration_ns = if quick { 300 * MS } else { 1_000 * MS };
    let mut runs = Vec::new();
    for (label, protocol, options) in THROUGHPUT_PROTOCOLS {
        for conflict in [0.02, 0.1] {
            for &n in clients {
                let mut config = SimConfig {
                    latency: cluster(),
                    f: Some(1),
                    ..base(5, n, &format!("conflict:{conflict}"), duration_ns)
                };
                config.workload.value_size = 4096;
                config.protocol = super::options(options);
                let series = format!("{label} {}%", conflict * 100.0);
                runs.push(Run {
                    id: format!("{series}/{n}"),
                    series,
                    x: n as f64,
                    protocol,
                    config,
                    analysis: Analysis::Summary,
                });
            }
        }
    }
    Experiment {
        id: "fig7",
        figures: "Fig. 7, §6.3",
        title: "throughput and latency as clients grow",
        measures: "Throughput against median latency as closed-loop clients grow, Tempo f = 1 against Multi-Paxos \
                   (the paper's FPaxos) without batching, at 2% and 10% conflicts. A leader sends and receives every \
                   message of every command; Tempo spreads the work over all replicas.",
        settings: format!(
            "5 replicas on five sites 0.5 ms apart (round trip), f = 1; 4 KB values; closed-loop clients {}; \
             {} ms simulated per point; the CPU cost model, serial per node.",
            clients.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            duration_ns / MS
        ),
        limits: "Absolute throughputs are the cost model's: per-message costs dominate it, while the paper's \
                 FPaxos leader was limited by its outgoing bandwidth at 4 KB and Tempo by 8-core machines.",
        runs,
        charts: vec![Chart {
            file: "fig7".into(),
            title: "Fig. 7: median latency against throughput as clients grow, 4 KB values".into(),
            x: Axis { desc: "throughput (operations/s)", metric: "throughput", log: false },
            y: Axis { desc: "median latency (ms, log scale)", metric: "p50_ms", log: true },
            kind: ChartKind::Lines,
            only: None,
            paper: Vec::new(),
        }],
        claims: throughput_claims(),
    }
}

fn throughput_claims() -> Vec<Claim> {
    let best = |series: &str| Value::max(series, "throughput");
    let model = "absolute throughput is the CPU cost model's, not the paper's machines'";
    vec![
        Claim {
            what: "Tempo over FPaxos without batching, best throughput, 4.3–5.1×: at 2% conflicts".into(),
            paper: Expected::Between(4.3, 5.1),
            ordo: Some(best("tempo 2%").over(best("multipaxos 2%"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "the paper's FPaxos leader ran out of outgoing bandwidth at 4 KB; ordo's cost model charges \
                     1 ns per byte, so its leader runs out of CPU per message first, later",
        },
        Claim {
            what: "Tempo's best throughput".into(),
            paper: Expected::About(230_000.0),
            ordo: Some(best("tempo 2%")),
            unit: "ops/s",
            tolerance: 0.25,
            caveat: model,
        },
        Claim {
            what: "FPaxos f = 1, best throughput".into(),
            paper: Expected::About(53_000.0),
            ordo: Some(best("multipaxos 2%")),
            unit: "ops/s",
            tolerance: 0.25,
            caveat: model,
        },
        Claim {
            what: "Tempo's throughput does not depend on the conflict rate: best at 10% / at 2%".into(),
            paper: Expected::About(1.0),
            ordo: Some(best("tempo 10%").over(best("tempo 2%"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "conflicts delay execution in Tempo, never add messages",
        },
    ]
}
