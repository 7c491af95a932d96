//! `ordo bench`: starts a local cluster per protocol, drives it with the native client (the
//! gateway's pool of protocol client nodes, hosted in this process), sweeps the offered load,
//! and writes CSV, JSON and PNG plots.

use crate::cluster_command::{LocalCluster, UpArgs, cluster_file};
use crate::parse;
use clap::Args;
use ordo_bench::load::{self, Point, PointResult};
use ordo_bench::settings::{Machine, Settings};
use ordo_bench::workload::Workload;
use ordo_core::Protocol;
use ordo_net::ClusterFile;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod soak;

/// Options of `ordo bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Protocol name.
    #[arg(long, conflicts_with = "protocols")]
    protocol: Option<String>,
    /// Several protocols, compared in one sweep: multipaxos,nezha,unreplicated.
    #[arg(long, value_delimiter = ',')]
    protocols: Vec<String>,
    /// Replicas.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Closed-loop clients; a list (1,8,32) sweeps the load.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    clients: Vec<usize>,
    /// Open-loop Poisson arrivals per second (total); a list (1000,5000,20000) sweeps the load.
    #[arg(long, value_delimiter = ',')]
    rate: Vec<f64>,
    /// Measured time per load point.
    #[arg(long, value_parser = parse::duration_ns, default_value = "30s")]
    duration: u64,
    /// Warm-up per load point, not measured.
    #[arg(long, value_parser = parse::duration_ns, default_value = "2s")]
    warmup: u64,
    /// ycsb-a, ycsb-b, ycsb-c, uniform:N, conflict:RATE.
    #[arg(long, default_value = "ycsb-a")]
    workload: String,
    /// Output directory.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Protocol client nodes in the load generator (operations in flight at most).
    #[arg(long, default_value_t = 256)]
    gateway_clients: usize,
    /// First UDP port of the clusters.
    #[arg(long, default_value_t = 7500)]
    port_base: u16,
    /// Protocol option key=value (repeatable).
    #[arg(long = "set", value_parser = parse::protocol_option)]
    protocol_options: Vec<(String, toml::Value)>,
    /// Skip fsync.
    #[arg(long)]
    no_fsync: bool,
    /// Extra roles whose nodes run inside the gateway's process (see `cluster up --colocate`).
    #[arg(long, value_delimiter = ',', default_value = "proxy")]
    colocate: Vec<String>,
    /// Soak instead of a sweep: drive each protocol's cluster through its Redis gateway with
    /// redis-benchmark for this long (e.g. 10m), sampling throughput and every process's memory;
    /// writes soak.csv, soak-throughput.png, soak-memory.png and soak-summary.md.
    #[arg(long, value_parser = parse::duration_ns)]
    soak: Option<u64>,
    /// Soak: time between samples.
    #[arg(long, value_parser = parse::duration_ns, default_value = "5s")]
    soak_every: u64,
    /// Soak: redis-benchmark connections (-c).
    #[arg(long, default_value_t = 50)]
    soak_connections: u64,
    /// Soak: redis-benchmark pipeline depth (-P).
    #[arg(long, default_value_t = 16)]
    soak_pipeline: u64,
    /// Soak: key space of the SETs (redis-benchmark -r).
    #[arg(long, default_value_t = 1_000_000)]
    soak_keys: u64,
    /// Soak: start on an empty key space instead of writing every key once before the clock
    /// starts; memory then grows while the keys fill, which the early window includes.
    #[arg(long)]
    soak_no_fill: bool,
}

struct Drive<'a>(&'a ClusterFile, &'a Workload, &'a [Point]);

impl ProtocolVisitor for Drive<'_> {
    type Output = Result<Vec<PointResult>, ordo_net::HostError>;
    fn visit<P: Protocol>(self) -> Self::Output {
        load::run::<P>(self.0, "gw", self.1, self.2, &mut |line| eprintln!("{line}"))
    }
}

/// Runs `ordo bench`.
pub fn run(args: BenchArgs) -> ExitCode {
    let protocols: Vec<String> = match &args.protocol {
        Some(p) => vec![p.clone()],
        None => args.protocols.clone(),
    };
    if protocols.is_empty() {
        eprintln!("error: name --protocol P or --protocols A,B");
        return ExitCode::from(2);
    }
    if let Some(duration) = args.soak {
        return soak::run(&args, &protocols, Duration::from_nanos(duration));
    }
    let workload = match Workload::parse(&args.workload) {
        Ok(workload) => workload,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let points = load_points(&args);
    let mut results = Vec::new();
    for (index, protocol) in protocols.iter().enumerate() {
        let mut cluster = match start_cluster(&args, protocol, index) {
            Ok(cluster) => cluster,
            Err(code) => return code,
        };
        for point in &points {
            match measure_point(protocol, &cluster, &workload, point) {
                Ok(mut measured) => results.append(&mut measured),
                Err(code) => return code,
            }
        }
        cluster.stop();
        let _ = std::fs::remove_dir_all(&cluster.file.data_dir);
    }
    write_results(&args.out, &settings(&args, &protocols, &workload), &results)
}

/// The run's settings as `results.json` and the plots' title blocks record them.
fn settings(args: &BenchArgs, protocols: &[String], workload: &Workload) -> Settings {
    let (load, load_points) = if args.rate.is_empty() {
        ("closed", args.clients.iter().map(|&c| c as f64).collect())
    } else {
        ("open", args.rate.clone())
    };
    Settings {
        protocols: protocols.to_vec(),
        protocol_options: args.protocol_options.iter().map(|(key, value)| format!("{key}={value}")).collect(),
        replicas: args.replicas,
        workload: args.workload.clone(),
        workload_description: workload.description(),
        keys: workload.keys(),
        value: Workload::VALUE_DESCRIPTION.into(),
        load: load.into(),
        load_points,
        duration_s: Duration::from_nanos(args.duration).as_secs_f64(),
        warmup_s: Duration::from_nanos(args.warmup).as_secs_f64(),
        fsync: !args.no_fsync,
        gateway_clients: args.gateway_clients,
        colocate: args.colocate.clone(),
        machine: Machine::detect(),
        ordo_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The load points to sweep: one per closed-loop client count, or one per open-loop rate.
fn load_points(args: &BenchArgs) -> Vec<Point> {
    let (duration, warmup) = (Duration::from_nanos(args.duration), Duration::from_nanos(args.warmup));
    if args.rate.is_empty() {
        args.clients.iter().map(|&clients| Point { clients, rate: None, duration, warmup }).collect()
    } else {
        args.rate.iter().map(|&rate| Point { clients: 0, rate: Some(rate), duration, warmup }).collect()
    }
}

/// The `cluster up` options for the `index`th protocol's cluster (each on its own ports).
fn up_args(args: &BenchArgs, protocol: &str, index: usize) -> UpArgs {
    UpArgs {
        protocol: protocol.to_string(),
        replicas: args.replicas,
        clients: args.gateway_clients,
        redis_port: 0,
        port_base: args.port_base + index as u16 * 20,
        data_dir: None,
        wipe_data_dir: false,
        no_key: false,
        protocol_options: args.protocol_options.clone(),
        no_fsync: args.no_fsync,
        status_every: 0,
        colocate: args.colocate.clone(),
        requirepass: None,
    }
}

/// Starts the `index`th protocol's local cluster (no Redis gateway) in a fresh data directory and
/// waits until it is ready; on failure, prints the error and returns the exit code.
fn start_cluster(args: &BenchArgs, protocol: &str, index: usize) -> Result<LocalCluster, ExitCode> {
    let up = up_args(args, protocol, index);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let data_dir = std::env::temp_dir().join(format!("ordo-bench-{}-{stamp}", std::process::id()));
    let mut file = cluster_file(&up, data_dir).map_err(|error| {
        eprintln!("error: {protocol}: {error}");
        ExitCode::from(2)
    })?;
    for node in &mut file.nodes {
        node.redis = None;
    }
    eprintln!("== {protocol}: {} replicas, workload {}", args.replicas, args.workload);
    let mut cluster = LocalCluster::start(file, !up.no_key).map_err(|error| {
        eprintln!("error: {error}");
        ExitCode::from(1)
    })?;
    if let Err(error) = cluster.wait_ready(Duration::from_secs(20)) {
        eprintln!("error: {error}");
        return Err(ExitCode::from(1));
    }
    Ok(cluster)
}

/// Drives `cluster` at one load point and prints a line per result; on failure, prints the
/// error and returns the exit code.
fn measure_point(
    protocol: &str,
    cluster: &LocalCluster,
    workload: &Workload,
    point: &Point,
) -> Result<Vec<PointResult>, ExitCode> {
    match point.rate {
        Some(rate) => eprintln!("-- {protocol}: open loop, {rate:.0} ops/s offered"),
        None => eprintln!("-- {protocol}: closed loop, {} clients", point.clients),
    }
    match with_protocol(protocol, Drive(&cluster.file, workload, std::slice::from_ref(point))) {
        Ok(Ok(measured)) => {
            measured.iter().for_each(print_result);
            Ok(measured)
        }
        Ok(Err(error)) => {
            eprintln!("error: {protocol}: {error}");
            Err(ExitCode::from(1))
        }
        Err(unknown) => {
            eprintln!("error: {unknown}");
            Err(ExitCode::from(2))
        }
    }
}

/// Prints one load point's result as a table row.
fn print_result(r: &PointResult) {
    println!(
        "{:<14} clients {:>4} offered {:>8} -> {:>9.0} ops/s  p50 {:>6} us  p99 {:>7} us  errors {} timeouts {}",
        r.protocol,
        r.clients,
        r.offered_per_s.map_or("-".into(), |o| format!("{o:.0}")),
        r.throughput_per_s,
        r.latency_us[0],
        r.latency_us[2],
        r.errors,
        r.timeouts
    );
}

/// Writes the CSV, JSON and plots of all results under `out` and names each file written.
fn write_results(out: &Path, settings: &Settings, results: &[PointResult]) -> ExitCode {
    match ordo_bench::output::write_all(out, settings, results) {
        Ok(paths) => {
            for path in paths {
                println!("wrote {path}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}
