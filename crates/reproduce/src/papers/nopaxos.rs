//! NOPaxos (Li et al., OSDI 2016): throughput and latency as closed-loop clients grow with an
//! in-switch and an end-host sequencer (§6.1, Fig. 5 and 6), saturation throughput as packets
//! are dropped (§6.2, Fig. 7) and as replicas are added (§6.3, Fig. 8). The paper's numbers are
//! those of `specs/nopaxos.md` §8.3.

use super::{MS, base, options};
use crate::experiment::{Analysis, Axis, Chart, ChartKind, Claim, Expected, Experiment, Paper, Run, Value};
use ordo_sim::{Fault, FaultPlan, RoleCpu, RolePlacement, SimConfig};

/// A protocol as the paper's figures name it, with its options and its sequencer.
struct Variant {
    label: &'static str,
    protocol: &'static str,
    options: &'static str,
    /// The sequencer "free" (no CPU model) and half a link from everyone: the paper's in-switch
    /// (or middlebox) sequencer. Otherwise a sequencer has a normal node's costs.
    switch_sequencer: bool,
}

const fn variant(label: &'static str, protocol: &'static str, options: &'static str) -> Variant {
    Variant { label, protocol, options, switch_sequencer: false }
}

const NOPAXOS: Variant = Variant { switch_sequencer: true, ..variant("nopaxos", "nopaxos", "") };
/// The paper's Fig. 6: the sequencer on an end host, at a normal node's costs.
const NOPAXOS_END_HOST: Variant = variant("nopaxos end-host", "nopaxos", "");
const UNREPLICATED: Variant = variant("unreplicated", "unreplicated", "");
/// The paper's Paxos: one request per accept.
const MULTIPAXOS_B1: Variant = variant("multipaxos-b1", "multipaxos", "batch_max = 1");
/// ordo's batching Multi-Paxos: the paper's "Paxos + batching".
const MULTIPAXOS: Variant = variant("multipaxos", "multipaxos", "");
const NEZHA: Variant = variant("nezha", "nezha", "proxies = 8");

/// The sequencer's one-way delay from every other node when it is in the switch: half of the
/// LAN's 40 µs link.
const SWITCH_DELAY_NS: u64 = 20_000;

impl Variant {
    /// `replicas`, `clients` closed-loop clients, uniform keys over 1,000, a share `loss` of
    /// every packet dropped for the whole run.
    fn config(&self, replicas: usize, clients: usize, loss: f64, duration_ns: u64) -> SimConfig {
        let mut config = base(replicas, clients, "uniform:1000", duration_ns);
        config.protocol = options(self.options);
        if self.switch_sequencer {
            let place = RolePlacement { site: None, own_site_delay_ns: Some(SWITCH_DELAY_NS) };
            config.placement.insert("sequencer".into(), place);
            config.cpu_roles.insert("sequencer".into(), RoleCpu::Named("free".into()));
        }
        if loss > 0.0 {
            // Every packet, for the whole run; progress is required throughout.
            let loss = Fault::Loss { probability: loss, at_ns: 0, until_ns: duration_ns };
            config.faults = FaultPlan {
                random: false,
                random_slow: false,
                random_clients: false,
                faults: vec![loss],
                heal_ns: Some(0),
            };
        }
        config
    }

    fn run(&self, id: String, series: String, x: f64, config: SimConfig) -> Run {
        Run { id, series, x, protocol: self.protocol, config, analysis: Analysis::Summary }
    }
}

/// NOPaxos' experiments, full or quick.
pub fn paper(quick: bool) -> Paper {
    Paper {
        name: "nopaxos",
        title: "Just Say NO to Paxos Overhead: Replacing Consensus with Network Ordering (NOPaxos, OSDI 2016)",
        scope: "All runs are simulations: the LAN model (40 µs + Exp(10 µs) one way), the same CPU cost \
                model for every server node (1 µs per event, 3 µs per message, 1 ns per byte), closed-loop \
                clients (one operation outstanding each, as the paper's), seed 1. The in-switch sequencer is \
                \"free\" (no CPU model) and 20 µs from every node. The paper's Fast Paxos and Speculative \
                Paxos baselines are not built; its sequencer failover (Fig. 9) is measured on real processes \
                by `cargo test -p ordo-cli --test nopaxos_sequencer`, not here; its transactional store \
                (Fig. 10) is not reproduced.",
        experiments: vec![clients_sweep(quick), drops(quick), scalability(quick)],
    }
}

fn duration(quick: bool) -> u64 {
    if quick { 150 * MS } else { 500 * MS }
}

/// The closed-loop clients of the saturation runs, and those the claims read.
const SATURATING: usize = 256;

fn curve(quick: bool) -> Vec<usize> {
    if quick { vec![1, 16, 64, SATURATING] } else { vec![1, 4, 16, 32, 64, 128, SATURATING] }
}

/// Batched Multi-Paxos' batches grow with the clients waiting, so its throughput still rises past
/// 256 clients (the other series' is flat from 32 or 64 on): it also runs with more, up to where
/// its throughput stops rising.
const BATCHED_MORE: [usize; 2] = [512, 1024];

/// The client counts of `v`'s curve.
fn sweep(v: &Variant, quick: bool) -> Vec<usize> {
    let more = if v.label == MULTIPAXOS.label { &BATCHED_MORE[..] } else { &[] };
    curve(quick).into_iter().chain(more.iter().copied()).collect()
}

fn list(values: &[usize]) -> String {
    values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
}

fn clients_sweep(quick: bool) -> Experiment {
    let mut runs = Vec::new();
    for v in [&NOPAXOS, &NOPAXOS_END_HOST, &UNREPLICATED, &MULTIPAXOS_B1, &MULTIPAXOS] {
        for clients in sweep(v, quick) {
            let config = v.config(5, clients, 0.0, duration(quick));
            runs.push(v.run(format!("{}@{clients}", v.label), v.label.into(), clients as f64, config));
        }
    }
    Experiment {
        id: "fig5-6",
        figures: "Fig. 5, 6, §6.1",
        title: "throughput and latency as clients grow",
        measures: "Median latency and throughput as closed-loop clients grow, 5 replicas: NOPaxos with the \
                   sequencer in the switch and on an end host (Fig. 6), an unreplicated server, Multi-Paxos \
                   unbatched (the paper's Paxos) and batched (its Paxos + batching). A run's saturation is \
                   its series' highest throughput.",
        settings: format!(
            "5 replicas; closed-loop clients {} (batched Multi-Paxos also {}, as its batches grow with the \
             clients waiting); uniform keys over 1,000, half reads; {} ms simulated per point. NOPaxos' \
             sequencer is free and 20 µs from every node (`[cpu_roles] sequencer = \"free\"`, \
             `[placement.sequencer] own_site_delay_ns = 20000`), or, for `nopaxos end-host`, a node on the \
             LAN at the same costs as the others. Only `multipaxos` batches; `multipaxos-b1` is \
             `batch_max = 1`; NOPaxos never batches. On the low-load chart the paper's unreplicated ring is \
             111 − 16 µs (\"within 16 µs\") and its end-host ring 111 µs × 1.36 (\"+36%\").",
            list(&curve(quick)),
            list(&BATCHED_MORE),
            duration(quick) / MS
        ),
        limits: "The paper's latencies come from a fat-tree testbed with a Cavium middlebox sequencer (8 µs \
                 median) and Linux servers; ordo's are its LAN model plus CPU queueing, with the sequencer a \
                 fixed 20 µs half link. Absolute throughputs are the cost model's: every message costs the \
                 same at every node, so where a curve bends is set by message counts, not by a kernel or a NIC.",
        runs,
        charts: sweep_charts(),
        claims: throughput_claims().into_iter().chain(latency_claims()).collect(),
    }
}

fn sweep_charts() -> Vec<Chart> {
    let latency_vs_throughput = |file: &str, title: &str, only: Option<&str>| Chart {
        file: file.into(),
        title: title.into(),
        x: Axis { desc: "throughput (operations/s)", metric: "throughput", log: false },
        y: Axis { desc: "median latency (µs, log scale)", metric: "p50_us", log: true },
        kind: ChartKind::Lines,
        only: only.map(String::from),
        paper: Vec::new(),
    };
    vec![
        latency_vs_throughput("fig5", "Fig. 5: median latency against throughput as clients grow, 5 replicas", None),
        latency_vs_throughput(
            "fig6",
            "Fig. 6: NOPaxos with the sequencer in the switch and on an end host, 5 replicas",
            Some("nopaxos"),
        ),
        Chart {
            file: "fig5-low-load".into(),
            title: "§6.1: median latency against closed-loop clients, 5 replicas".into(),
            x: Axis { desc: "closed-loop clients (log scale)", metric: "x", log: true },
            y: Axis { desc: "median latency (µs, log scale)", metric: "p50_us", log: true },
            kind: ChartKind::Lines,
            only: None,
            paper: vec![
                ("nopaxos".into(), vec![(1.0, 111.0)]),
                ("nopaxos end-host".into(), vec![(1.0, 111.0 * 1.36)]),
                ("unreplicated".into(), vec![(1.0, 111.0 - 16.0)]),
                ("multipaxos-b1".into(), vec![(1.0, 240.0)]),
                ("multipaxos".into(), vec![(1.0, 385.0)]),
                ("Fast Paxos (not in ordo)".into(), vec![(1.0, 193.0)]),
            ],
        },
    ]
}

fn best(series: &str) -> Value {
    Value::max(series, "throughput")
}

fn throughput_claims() -> Vec<Claim> {
    let leader = "every server node has the same CPU costs and the leader (or the single server) \
                  saturates first; the paper's servers pay a kernel's and a NIC's costs per packet too";
    vec![
        Claim {
            what: "NOPaxos' maximum throughput within 2% of the unreplicated server's: nopaxos / unreplicated, \
                   best over the client counts"
                .into(),
            paper: Expected::Between(0.98, 1.02),
            ordo: Some(best("nopaxos").over(best("unreplicated"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "the free sequencer takes all ordering work off the leader, which then handles two \
                     messages per request, as the unreplicated server does",
        },
        Claim {
            what: "NOPaxos' maximum throughput 4.7× Paxos' (+370%): nopaxos / multipaxos-b1, best".into(),
            paper: Expected::About(4.7),
            ordo: Some(best("nopaxos").over(best("multipaxos-b1"))),
            unit: "×",
            tolerance: 0.1,
            caveat: leader,
        },
        Claim {
            what: "NOPaxos' maximum throughput 4.7× Fast Paxos' (+370%)".into(),
            paper: Expected::About(4.7),
            ordo: None,
            unit: "×",
            tolerance: 0.1,
            caveat: "Fast Paxos is not built in ordo",
        },
        Claim {
            what: "NOPaxos' maximum throughput +24% over Speculative Paxos', which Paxos + batching matches: \
                   nopaxos / multipaxos (batched), best"
                .into(),
            paper: Expected::About(1.24),
            ordo: Some(best("nopaxos").over(best("multipaxos"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "Speculative Paxos is not built; ordo's batching Multi-Paxos stands in for it (the paper \
                     finds them about equal). Its batches grow without bound as clients wait, so at 1,024 \
                     clients its leader spreads per-message costs far thinner than the paper's Paxos + \
                     batching, which peaked at 907 µs",
        },
        Claim {
            what: "With an end-host sequencer NOPaxos' throughput stays \"still high\" (no number given; read \
                   as at least 0.9×): nopaxos end-host / nopaxos, best"
                .into(),
            paper: Expected::AtLeast(0.9),
            ordo: Some(best("nopaxos end-host").over(best("nopaxos"))),
            unit: "×",
            tolerance: 0.0,
            caveat: "ordo's end-host sequencer has a normal node's costs and sends each request to every \
                     replica (6 messages a request against the leader's 2), so it saturates first; the \
                     paper's used raw sockets on a dedicated machine",
        },
    ]
}

fn latency_claims() -> Vec<Claim> {
    let p50 = |label: &str, clients: usize| Value::metric(format!("{label}@{clients}"), "p50_us");
    let low = |label: &str| p50(label, 1);
    let absolute = "the simulator's latency is its LAN model (40 µs + Exp(10 µs) a hop) plus CPU costs, \
                    not the testbed's switches and Linux servers";
    let latency = |what: &str, paper: f64, ordo: Option<Value>, caveat: &'static str| Claim {
        what: what.into(),
        paper: Expected::About(paper),
        ordo,
        unit: "µs",
        tolerance: 0.25,
        caveat,
    };
    vec![
        latency("NOPaxos' latency at low load: 1 client", 111.0, Some(low("nopaxos")), absolute),
        latency("Paxos' latency at low load: multipaxos-b1, 1 client", 240.0, Some(low("multipaxos-b1")), absolute),
        latency("Fast Paxos' latency at low load", 193.0, None, "Fast Paxos is not built in ordo"),
        latency(
            "Paxos + batching's latency at low load: multipaxos, 1 client",
            385.0,
            Some(low("multipaxos")),
            "ordo's batching sends a batch as soon as the pipeline has room, so a lone request does not \
             wait for one to fill; the paper's adaptive batches keep one batch always in progress",
        ),
        latency(
            "Paxos + batching's latency at its maximum throughput: multipaxos, 1,024 clients",
            907.0,
            Some(p50("multipaxos", 1024)),
            "ordo's batched Multi-Paxos gains throughput as long as more clients wait (bigger batches spread \
             the leader's per-message costs), so its maximum comes at 1,024 clients, where a closed loop's \
             latency is the clients over the throughput; it is at 907 µs with 64 clients, at half that \
             throughput",
        ),
        Claim {
            what: "NOPaxos' latency within 16 µs of the unreplicated server's (111 against at least 95 µs): \
                   nopaxos / unreplicated, 1 client"
                .into(),
            paper: Expected::AtMost(111.0 / 95.0),
            ordo: Some(low("nopaxos").over(low("unreplicated"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "a request takes two 20 µs half links through the sequencer instead of one 40 µs link, \
                     with two jitter draws; the middlebox's own 8 µs is not modelled",
        },
        Claim {
            what: "NOPaxos' latency 54% lower than Paxos': nopaxos / multipaxos-b1, 1 client".into(),
            paper: Expected::About(111.0 / 240.0),
            ordo: Some(low("nopaxos").over(low("multipaxos-b1"))),
            unit: "×",
            tolerance: 0.1,
            caveat: absolute,
        },
        Claim {
            what: "NOPaxos' latency 42% lower than the latency-optimized protocol's (Fast Paxos, 193 µs)".into(),
            paper: Expected::About(111.0 / 193.0),
            ordo: None,
            unit: "×",
            tolerance: 0.1,
            caveat: "Fast Paxos is not built in ordo",
        },
        Claim {
            what: "An end-host sequencer adds 36% latency: nopaxos end-host / nopaxos, 1 client".into(),
            paper: Expected::About(1.36),
            ordo: Some(low("nopaxos end-host").over(low("nopaxos"))),
            unit: "×",
            tolerance: 0.1,
            caveat: "ordo's end-host sequencer is a whole LAN hop away (40 µs + jitter) and charges a normal \
                     node's CPU costs for each copy it sends; the switch's is a fixed 20 µs half link",
        },
        Claim {
            what: "The Cavium middlebox sequencer adds 8 µs at the median (16 µs at p99)".into(),
            paper: Expected::About(8.0),
            ordo: None,
            unit: "µs",
            tolerance: 0.25,
            caveat: "ordo's in-switch sequencer is a fixed half link with no processing time of its own",
        },
    ]
}

/// One throughput chart per client count (runs `{clients}/...`): `file` for the claims' count,
/// `file-{clients}-clients` for the others.
fn per_clients(clients: &[usize], file: &str, title: &str, x_desc: &'static str) -> Vec<Chart> {
    let mut clients = clients.to_vec();
    clients.sort_by_key(|&c| std::cmp::Reverse(c == SATURATING));
    (clients.into_iter())
        .map(|c| Chart {
            file: if c == SATURATING { file.into() } else { format!("{file}-{c}-clients") },
            title: format!("{title}, {c} closed-loop clients"),
            x: Axis { desc: x_desc, metric: "x", log: false },
            y: Axis { desc: "throughput (operations/s, log scale)", metric: "throughput", log: true },
            kind: ChartKind::Lines,
            only: Some(format!("{c}/")),
            paper: Vec::new(),
        })
        .collect()
}

/// The shares of all packets dropped (Fig. 7).
const LOSSES: [f64; 4] = [0.0, 0.001, 0.01, 0.05];

fn percent(loss: f64) -> String {
    format!("{}%", loss * 100.0)
}

fn drop_clients(quick: bool) -> Vec<usize> {
    if quick { vec![SATURATING] } else { vec![64, 128, SATURATING] }
}

fn drops(quick: bool) -> Experiment {
    let mut runs = Vec::new();
    for v in [&NOPAXOS, &MULTIPAXOS, &NEZHA] {
        for clients in drop_clients(quick) {
            for loss in LOSSES {
                let config = v.config(5, clients, loss, duration(quick));
                let id = format!("{clients}/{}@{}", v.label, percent(loss));
                runs.push(v.run(id, v.label.into(), loss * 100.0, config));
            }
        }
    }
    Experiment {
        id: "fig7",
        figures: "Fig. 7, §6.2",
        title: "maximum throughput against the packet drop rate",
        measures: "Throughput at saturation when a share of every packet (requests, the sequencer's copies, \
                   replies, replica messages) is dropped for the whole run: NOPaxos (gap agreement fills or \
                   NO-OPs each drop), batched Multi-Paxos, and Nezha (not in the paper) beside them.",
        settings: format!(
            "5 replicas; {} closed-loop clients, one chart each (the claims read {SATURATING}); drop rates 0, \
             0.1%, 1%, 5% (one `loss` fault over the whole run, `heal_ns = 0`); uniform keys over 1,000, half reads; \
             {} ms simulated per point; NOPaxos' sequencer in the switch; Nezha with 8 proxies.",
            list(&drop_clients(quick)),
            duration(quick) / MS
        ),
        limits: "The paper drops packets on the way to the replicas of its testbed; ordo drops any message \
                 between any two nodes with the same probability, including replies and replica messages. \
                 Its Speculative Paxos, Fast Paxos, Paxos (unbatched) and unreplicated rows are not run here. \
                 Batched Multi-Paxos is not at its limit with 256 clients (Fig. 5: its batches grow with more), \
                 so its points are its throughput at these client counts, not its maximum.",
        runs,
        charts: per_clients(
            &drop_clients(quick),
            "fig7",
            "Fig. 7: throughput against the packet drop rate, 5 replicas",
            "packets dropped (% of all messages)",
        ),
        claims: drop_claims(),
    }
}

fn drop_claims() -> Vec<Claim> {
    let at = |label: &str, loss: f64| Value::metric(format!("{SATURATING}/{label}@{}", percent(loss)), "throughput");
    let kept = |label: &str| at(label, 0.01).over(at(label, 0.0));
    let not_run = |what: &str, caveat: &'static str| Claim {
        what: what.into(),
        paper: Expected::About(1.0),
        ordo: None,
        unit: "×",
        tolerance: 0.1,
        caveat,
    };
    vec![
        Claim {
            what: format!("NOPaxos' throughput shows no significant drop at 1% loss: 1% / 0, {SATURATING} clients"),
            paper: Expected::About(1.0),
            ordo: Some(kept("nopaxos")),
            unit: "×",
            tolerance: 0.1,
            caveat: "each drop the leader sees makes it search its peers and hold every later reply until \
                     the copy arrives; the leader, the bottleneck, does more work per operation (the searches, \
                     their answers, the clients' retries of lost replies)",
        },
        Claim {
            what: format!(
                "Paxos + batching loses more than NOPaxos at 1% loss: (multipaxos 1% / 0) over (nopaxos 1% / \
                 0), {SATURATING} clients"
            ),
            paper: Expected::AtMost(1.0),
            ordo: Some(kept("multipaxos").over(kept("nopaxos"))),
            unit: "×",
            tolerance: 0.0,
            caveat: "the paper's batched Paxos falls back to frequent state transfers on drops; ordo's \
                     Multi-Paxos retransmits instead. It loses far more with fewer clients (smaller batches: \
                     the full run's 64-client line)",
        },
        not_run(
            "At 1% loss NOPaxos is about as fast as the unreplicated server (NOPaxos / unreplicated at 1%)",
            "the drop sweep runs NOPaxos, batched Multi-Paxos and Nezha, no unreplicated server",
        ),
        not_run(
            "Paxos barely changes at 1% loss (Paxos 1% / 0)",
            "the drop sweep runs NOPaxos, batched Multi-Paxos and Nezha, no unbatched Multi-Paxos",
        ),
        not_run(
            "Speculative Paxos falls to Paxos' throughput at 1% loss (SpecPaxos / Paxos at 1%)",
            "Speculative Paxos is not built in ordo",
        ),
    ]
}

fn replica_clients(quick: bool) -> Vec<usize> {
    if quick { vec![SATURATING] } else { vec![128, SATURATING] }
}

fn scalability(quick: bool) -> Experiment {
    let replicas = [3, 5, 7, 9];
    let mut runs = Vec::new();
    for v in [&NOPAXOS, &MULTIPAXOS, &MULTIPAXOS_B1] {
        for clients in replica_clients(quick) {
            for n in replicas {
                let config = v.config(n, clients, 0.0, duration(quick));
                let id = format!("{clients}/{}/n{n}", v.label);
                runs.push(v.run(id, v.label.into(), n as f64, config));
            }
        }
    }
    Experiment {
        id: "fig8",
        figures: "Fig. 8, §6.3",
        title: "maximum throughput against the number of replicas",
        measures: "Saturation throughput at 3 to 9 replicas. NOPaxos' leader handles two messages per request \
                   whatever the group's size (the sequencer's copy and the reply); a Multi-Paxos leader sends \
                   and receives 2(n − 1) more per accept round, so its throughput falls as n grows.",
        settings: format!(
            "3, 5, 7 and 9 replicas; {} closed-loop clients, one chart each (the claims read {SATURATING}); \
             uniform keys over 1,000, half reads; {} ms simulated per point; NOPaxos' sequencer in the switch; \
             Multi-Paxos batched and unbatched.",
            list(&replica_clients(quick)),
            duration(quick) / MS
        ),
        limits: "The paper does not state the replica counts of Fig. 8; ordo runs 3 to 9. Fast Paxos (whose \
                 throughput the paper finds falling with n, as Paxos') and Speculative Paxos (constant, as \
                 NOPaxos') are not built. Batched Multi-Paxos is not at its limit with 256 clients (Fig. 5: its \
                 batches grow with more), so its points are its throughput at these client counts.",
        runs,
        charts: per_clients(
            &replica_clients(quick),
            "fig8",
            "Fig. 8: maximum throughput against the number of replicas",
            "replicas",
        ),
        claims: scalability_claims(),
    }
}

fn scalability_claims() -> Vec<Claim> {
    let at = |label: &str, n: usize| Value::metric(format!("{SATURATING}/{label}/n{n}"), "throughput");
    let nine_over_three = |label: &str| at(label, 9).over(at(label, 3));
    vec![
        Claim {
            what: format!("NOPaxos' throughput stays constant as replicas grow: 9 / 3 replicas, {SATURATING} clients"),
            paper: Expected::About(1.0),
            ordo: Some(nine_over_three("nopaxos")),
            unit: "×",
            tolerance: 0.1,
            caveat: "the leader's work per request does not depend on n; the free sequencer's fan-out costs \
                     nothing",
        },
        Claim {
            what: format!(
                "Paxos' throughput falls in proportion to the replicas (the leader's 2n messages a request): \
                 multipaxos-b1 9 / 3 replicas, {SATURATING} clients"
            ),
            paper: Expected::About(3.0 / 9.0),
            ordo: Some(nine_over_three("multipaxos-b1")),
            unit: "×",
            tolerance: 0.1,
            caveat: "the paper states the proportionality, not the numbers; the cost model charges every \
                     message alike, so the leader's load is its 2n messages a request and nothing else",
        },
    ]
}
