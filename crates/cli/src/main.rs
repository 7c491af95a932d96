//! The `ordo` command: list protocols, run simulations (one seed or a seed search), check
//! histories, run nodes and local clusters behind a Redis gateway, benchmark them, and reproduce
//! the papers' experiments.

mod bench_command;
mod check_command;
mod cluster_command;
mod node_command;
mod parse;
mod reproduce_command;
mod sim_command;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Every ordo process allocates through mimalloc: replicas allocate and free a few buffers
/// per message, and glibc's allocator spent a fifth of a Tempo replica's CPU in a soak
/// (`_int_malloc`, `unlink_chunk`, `malloc_consolidate`). docs/runtime.md has the measurements.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit codes every command follows (docs/runtime.md, "Exit codes").
const EXIT_CODES: &str = "\
Exit codes (every command):
  0  success
  1  a violation or failure: a history not linearizable, replicas that disagree, no progress,
     a node that failed
  2  a usage or configuration error: a bad option, an unreadable or malformed input, ports or
     a data directory refused
  3  inconclusive: a check hit its limits (neither a pass nor a failure)";

/// ordo: state-machine replication protocols, simulated, checked and compared.
#[derive(Parser)]
#[command(name = "ordo", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the protocols.
    Protocols {
        /// Also list the deliberately broken variants used as negative controls.
        #[arg(long)]
        canaries: bool,
    },
    /// Run a protocol in the deterministic simulator (one seed, or a search over seeds).
    Sim(Box<sim_command::SimArgs>),
    /// Check a client history (JSON lines) for linearizability.
    ///
    /// Exit 0: linearizable; 1: not (the key and operations are named); 2: unreadable or
    /// malformed; 3: unknown (a key too complex for the search under its limits).
    Check(check_command::CheckArgs),
    /// Run one node of a cluster file (a replica, another role, or the Redis gateway) over UDP.
    Node(node_command::NodeArgs),
    /// Run a local cluster of processes on 127.0.0.1 with a Redis gateway.
    #[command(subcommand)]
    Cluster(cluster_command::ClusterCommand),
    /// Benchmark protocols on local clusters: throughput-latency sweeps, CSV/JSON, PNG plots.
    Bench(Box<bench_command::BenchArgs>),
    /// Rerun a paper's experiments in the simulator; write report.md, PNGs and results.json.
    Reproduce(reproduce_command::ReproduceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Protocols { canaries } => {
            for info in ordo_protocols::protocols().iter().filter(|p| canaries || !p.canary) {
                println!("{:<40} {}", info.name, info.summary);
            }
            ExitCode::SUCCESS
        }
        Command::Sim(args) => sim_command::run(*args),
        Command::Check(args) => check_command::run(&args),
        Command::Node(args) => node_command::run(args),
        Command::Cluster(command) => cluster_command::run(command),
        Command::Bench(args) => bench_command::run(*args),
        Command::Reproduce(args) => reproduce_command::run(args),
    }
}
