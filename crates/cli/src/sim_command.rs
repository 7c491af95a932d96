//! `ordo sim`: one simulated run, or a search over seeds that stops at the first violation.

use crate::parse;
use clap::Args;
use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{CpuCost, FaultPlan, LatencyModel, SimConfig, SimReport, Violation, WorkloadSpec};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Options of `ordo sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Protocol name (see `ordo protocols`).
    #[arg(long)]
    protocol: String,
    /// A run file (TOML, the fields of a simulation config); the options below override it.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Replicas per shard.
    #[arg(long)]
    replicas: Option<usize>,
    /// Failures tolerated per shard (default (replicas-1)/2).
    #[arg(long)]
    f: Option<usize>,
    /// Shards (protocols with partial replication).
    #[arg(long)]
    shards: Option<usize>,
    /// Client nodes.
    #[arg(long)]
    clients: Option<usize>,
    /// Simulated time: 10s, 500ms... (default 10s; 2s in a seed search).
    #[arg(long, value_parser = parse::duration_ns)]
    duration: Option<u64>,
    /// The seed of one run.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// A seed search: `1..300` runs seeds 1 to 300 and stops at the first violation.
    #[arg(long, value_parser = parse::seed_range)]
    seeds: Option<std::ops::RangeInclusive<u64>>,
    /// none, random, random-slow (random plus slow-network periods), random-clients (random plus
    /// crashes and restarts of client nodes), or a fault-plan TOML file.
    #[arg(long, default_value = "none")]
    faults: String,
    /// lan, or a latency-matrix TOML file (examples/latency/).
    #[arg(long, default_value = "lan")]
    latency: String,
    /// history (default), uniform:N, ycsb-a, ycsb-b, ycsb-c, conflict:RATE.
    #[arg(long)]
    workload: Option<String>,
    /// Open-loop Poisson arrivals per client per second (closed loop when absent).
    #[arg(long)]
    rate: Option<f64>,
    /// Share of operations touching two keys (MGET/MSET): multi-shard commands with --shards.
    #[arg(long)]
    multi_key: Option<f64>,
    /// Share of operations that are MULTI/EXEC transactions of 2-3 GET/SET/APPEND on distinct
    /// keys (a quarter of them with WATCH, so some abort).
    #[arg(long)]
    transactions: Option<f64>,
    /// Share of SETs that expire (PX 1-20 ms); every command is then stamped with its client's
    /// clock, and some operations are sweeps of expired keys (key expiry, checked like the rest).
    #[arg(long)]
    expiry: Option<f64>,
    /// Operations each client keeps in flight (pipelining; at most what the protocol's clients
    /// take at once: unreplicated and multipaxos pipeline, the others take one).
    #[arg(long)]
    outstanding: Option<usize>,
    /// CPU cost model: default, or free (no CPU model).
    #[arg(long, default_value = "default")]
    cpu: String,
    /// Clock error bound every clock claims, e.g. 10us.
    #[arg(long, value_parser = parse::duration_ns)]
    clock_error: Option<u64>,
    /// Each clock reading is off by a uniform amount within ± this, e.g. 100us (clocks whose
    /// jitter exceeds --clock-error break the bound they claim: a clock fault).
    #[arg(long, value_parser = parse::duration_ns)]
    clock_jitter: Option<u64>,
    /// Run each client on one machine with one of the protocol's extra nodes (Nezha: proxies as
    /// sidecars of their clients).
    #[arg(long)]
    colocate_clients: bool,
    /// Protocol option key=value (repeatable), e.g. --set batch_max=16.
    #[arg(long = "set", value_parser = parse::protocol_option)]
    protocol_options: Vec<(String, toml::Value)>,
    /// Write the client history (JSON lines) to this file.
    #[arg(long)]
    history: Option<std::path::PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// A node event to sum over a seed search (repeatable), e.g. --tally switch_to_responsive:
    /// the summary gives its total over every node and seed, and how many seeds saw it.
    #[arg(long)]
    tally: Vec<String>,
    /// Worker threads of a seed search (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Skip the linearizability check (large benchmark runs).
    #[arg(long)]
    no_check: bool,
    /// Most configurations the linearizability check keeps for one key (default 1000000); past
    /// it the key is too complex and the run's linearizability unknown (exit 3).
    #[arg(long)]
    check_configurations_max: Option<usize>,
    /// Most configurations one step of the check may explore (default 20000000).
    #[arg(long)]
    check_explored_max: Option<usize>,
    /// Search every key, without the replicas' order as a witness (docs/history.md).
    #[arg(long)]
    check_without_witness: bool,
}

struct RunOne(SimConfig);

impl ProtocolVisitor for RunOne {
    type Output = Result<ordo_sim::SimRun, String>;
    fn visit<P: Protocol>(self) -> Self::Output {
        ordo_sim::run::<P>(self.0)
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("ordo sim: {message}");
    ExitCode::from(2)
}

fn build_config(args: &SimArgs, seeds_mode: bool) -> Result<SimConfig, String> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => SimConfig::default(),
    };
    if seeds_mode && args.duration.is_none() && args.config.is_none() {
        config.duration_ns = 2_000_000_000;
    }
    config.replicas = args.replicas.unwrap_or(config.replicas);
    config.f = args.f.or(config.f);
    config.shards = args.shards.unwrap_or(config.shards);
    config.clients = args.clients.unwrap_or(config.clients);
    config.duration_ns = args.duration.unwrap_or(config.duration_ns);
    config.seed = args.seed.unwrap_or(config.seed);
    apply_workload_args(args, &mut config.workload)?;
    config.faults = match args.faults.as_str() {
        "none" => config.faults,
        "random" => FaultPlan { random: true, ..config.faults },
        "random-slow" => FaultPlan { random: true, random_slow: true, ..config.faults },
        "random-clients" => FaultPlan { random: true, random_clients: true, ..config.faults },
        path => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read fault plan {path}: {e}"))?;
            toml::from_str(&text).map_err(|e| format!("fault plan {path}: {e}"))?
        }
    };
    if args.latency != "lan" {
        let text = std::fs::read_to_string(&args.latency)
            .map_err(|e| format!("cannot read latency file {}: {e}", args.latency))?;
        config.latency = LatencyModel::from_toml(&text)?;
        // Wide-area runs need more patience before a client gives up on an operation.
        config.workload.op_timeout_ns = config.workload.op_timeout_ns.max(10_000_000_000);
    }
    config.cpu = match args.cpu.as_str() {
        "default" => config.cpu,
        "free" => CpuCost::free(),
        other => return Err(format!("--cpu {other}: use default or free")),
    };
    if let Some(bound) = args.clock_error {
        config.clock.error_bound_ns = bound;
    }
    if let Some(jitter) = args.clock_jitter {
        config.clock.jitter_ns = jitter;
    }
    for (key, value) in &args.protocol_options {
        config.protocol.insert(key.clone(), value.clone());
    }
    if args.no_check {
        config.check_linearizability = false;
    }
    // Nothing reads the history of an unchecked run unless it is written out.
    config.record_history = args.history.is_some() || config.check_linearizability;
    if let Some(max) = args.check_configurations_max {
        config.check_limits.configurations_max = max;
    }
    if let Some(max) = args.check_explored_max {
        config.check_limits.explored_per_step_max = max;
    }
    config.check_witness &= !args.check_without_witness;
    config.colocate_clients |= args.colocate_clients;
    config.validate()?;
    Ok(config)
}

/// The workload flags (`--workload`, `--multi-key`, `--transactions`, `--expiry`, `--rate`,
/// `--outstanding`) over the configured workload.
fn apply_workload_args(args: &SimArgs, workload: &mut WorkloadSpec) -> Result<(), String> {
    if let Some(name) = &args.workload {
        *workload = WorkloadSpec { op_timeout_ns: workload.op_timeout_ns, ..WorkloadSpec::from_name(name)? };
    }
    if let Some(ratio) = args.multi_key {
        workload.multi_key_ratio = ratio;
    }
    if let Some(ratio) = args.transactions {
        workload.transaction_ratio = ratio;
    }
    if let Some(ratio) = args.expiry {
        workload.expiry_ratio = ratio;
    }
    if let Some(rate) = args.rate {
        workload.rate_per_client = Some(rate);
    }
    if let Some(outstanding) = args.outstanding {
        workload.outstanding_max = outstanding;
    }
    Ok(())
}

/// Runs `ordo sim`.
pub fn run(args: SimArgs) -> ExitCode {
    if ordo_protocols::protocols().iter().all(|p| p.name != args.protocol) {
        return fail(ordo_protocols::UnknownProtocol(args.protocol.clone()));
    }
    let config = match build_config(&args, args.seeds.is_some()) {
        Ok(config) => config,
        Err(error) => return fail(error),
    };
    match args.seeds.clone() {
        Some(seeds) => search(&args, config, seeds),
        None => run_single(&args, config),
    }
}

fn simulate(protocol: &str, config: SimConfig) -> Result<ordo_sim::SimRun, String> {
    with_protocol(protocol, RunOne(config)).map_err(|e| e.to_string())?
}

fn run_single(args: &SimArgs, config: SimConfig) -> ExitCode {
    let run = match simulate(&args.protocol, config) {
        Ok(run) => run,
        Err(error) => return fail(error),
    };
    if let Some(path) = &args.history {
        let written = std::fs::File::create(path).and_then(|file| {
            let mut writer = std::io::BufWriter::new(file);
            ordo_check::history::write_history(&run.history, &mut writer)
        });
        if let Err(error) = written {
            return fail(format!("cannot write history {}: {error}", path.display()));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&run.report).expect("reports serialize"));
    } else {
        print!("{}", run.report.table());
    }
    match run.report.violation() {
        Some(Violation::Inconclusive(_)) => ExitCode::from(INCONCLUSIVE),
        Some(_) => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    }
}

/// Exit code of a run (or campaign) that nothing failed but whose linearizability check hit its
/// limits somewhere: unknown, neither a pass nor a failure.
const INCONCLUSIVE: u8 = 3;

/// The command line that replays one seed: the user's arguments with `--seeds` replaced.
fn replay_command(seed: u64) -> String {
    let mut words = vec!["ordo".to_string()];
    let mut arguments = std::env::args().skip(1);
    while let Some(word) = arguments.next() {
        if word == "--seeds" {
            arguments.next();
            words.push(format!("--seed {seed}"));
        } else if word.starts_with("--seeds=") {
            words.push(format!("--seed {seed}"));
        } else if word == "--jobs" {
            arguments.next();
        } else {
            words.push(word);
        }
    }
    words.join(" ")
}

fn one_line(report: &SimReport) -> String {
    let faults: u64 = report.faults.counts.values().sum();
    format!(
        "seed {:>5}  committed {:>7}  unknown {:>4}  faults {:>3}  p50 {:>7.3} ms  {:>5.2}M ev/s  {}",
        report.seed,
        report.committed,
        report.unknown,
        faults,
        report.latency_ms.p50,
        report.events_per_wall_s / 1e6,
        report.violation().map_or_else(|| "ok".to_string(), |v| v.to_string())
    )
}

/// What a seed search has seen so far, shared by its worker threads.
#[derive(Default)]
struct Campaign {
    next: AtomicU64,
    stop: AtomicBool,
    failures: Mutex<Vec<(u64, String)>>,
    inconclusive: Mutex<Vec<u64>>,
    setup_error: Mutex<Option<String>>,
    passed: AtomicU64,
    crash_by_role: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Faults injected, by kind, over every seed.
    fault_counts: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Each `--tally` event: its total over every node and seed, and the seeds that saw it.
    tallies: Mutex<std::collections::BTreeMap<String, (u64, u64)>>,
}

impl Campaign {
    /// One worker: runs the next untried seed until the range is spent or the search stops.
    fn work(&self, args: &SimArgs, config: &SimConfig, last_seed: u64) {
        let protocol = &args.protocol;
        while !self.stop.load(Ordering::SeqCst) {
            let seed = self.next.fetch_add(1, Ordering::SeqCst);
            if seed > last_seed {
                break;
            }
            match simulate(protocol, SimConfig { seed, ..config.clone() }) {
                Err(error) => {
                    *self.setup_error.lock().expect("lock") = Some(error);
                    self.stop.store(true, Ordering::SeqCst);
                }
                Ok(run) => {
                    self.count(&args.tally, &run.report);
                    self.record(seed, &run.report);
                }
            }
        }
    }

    /// Adds one finished run's faults by kind and its `--tally` events to the campaign's sums.
    fn count(&self, tally: &[String], report: &SimReport) {
        let mut faults = self.fault_counts.lock().expect("lock");
        for (kind, count) in &report.faults.counts {
            *faults.entry(kind.clone()).or_default() += count;
        }
        drop(faults);
        let mut tallies = self.tallies.lock().expect("lock");
        for event in tally {
            let total: u64 = report.nodes.iter().filter_map(|node| node.events.get(event)).sum();
            let (sum, seeds) = tallies.entry(event.clone()).or_default();
            *sum += total;
            *seeds += u64::from(total > 0);
        }
    }

    /// Prints one finished run and tallies its crashes and verdict; a failure stops the search.
    fn record(&self, seed: u64, report: &SimReport) {
        println!("{}", one_line(report));
        let mut crashes = self.crash_by_role.lock().expect("lock");
        for (role, count) in &report.faults.crash_by_role {
            *crashes.entry(role.clone()).or_default() += count;
        }
        drop(crashes);
        match report.violation() {
            // Not a failure: the campaign goes on, and says so at the end.
            Some(Violation::Inconclusive(_)) => self.inconclusive.lock().expect("lock").push(seed),
            Some(violation) => {
                self.failures.lock().expect("lock").push((seed, violation.to_string()));
                self.stop.store(true, Ordering::SeqCst);
            }
            None => {
                self.passed.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Prints the campaign's summary and returns its exit code.
    fn conclude(self, args: &SimArgs, config: &SimConfig) -> ExitCode {
        if let Some(error) = self.setup_error.into_inner().expect("lock") {
            return fail(error);
        }
        let mut failures = self.failures.into_inner().expect("lock");
        failures.sort();
        let passed = self.passed.into_inner();
        let mut inconclusive = self.inconclusive.into_inner().expect("lock");
        inconclusive.sort();
        let crashes = self.crash_by_role.into_inner().expect("lock");
        if !crashes.is_empty() {
            let tally: Vec<String> = crashes.iter().map(|(role, count)| format!("{role} {count}")).collect();
            println!("crashes by role: {}", tally.join(", "));
        }
        let faults = self.fault_counts.into_inner().expect("lock");
        if !faults.is_empty() {
            let tally: Vec<String> = faults.iter().map(|(kind, count)| format!("{kind} {count}")).collect();
            println!("faults by kind: {}", tally.join(", "));
        }
        for (event, (total, seeds)) in self.tallies.into_inner().expect("lock") {
            println!("tally {event}: {total} over every node, in {seeds} of the seeds run");
        }
        let unknown = match inconclusive.as_slice() {
            [] => String::new(),
            seeds => format!("{} inconclusive (seeds {seeds:?}), ", seeds.len()),
        };
        match failures.first() {
            None => {
                println!(
                    "{passed} seeds passed, {unknown}0 failed: {} with faults={} ({} replicas, {} clients, {:.1}s each)",
                    args.protocol,
                    args.faults,
                    config.replicas,
                    config.clients,
                    config.duration_ns as f64 / 1e9
                );
                if let Some(seed) = inconclusive.first() {
                    println!(
                        "the linearizability check hit its limits; settle one with: {} --check-configurations-max 50000000",
                        replay_command(*seed)
                    );
                    return ExitCode::from(INCONCLUSIVE);
                }
                ExitCode::SUCCESS
            }
            Some((seed, violation)) => {
                println!("{passed} seeds passed, {unknown}1 failed: seed {seed}: {violation}");
                println!("reproduce with: {}", replay_command(*seed));
                ExitCode::from(1)
            }
        }
    }
}

fn search(args: &SimArgs, config: SimConfig, seeds: std::ops::RangeInclusive<u64>) -> ExitCode {
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let campaign = Campaign { next: AtomicU64::new(*seeds.start()), ..Campaign::default() };
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| campaign.work(args, &config, *seeds.end()));
        }
    });
    campaign.conclude(args, &config)
}
