//! The `ordo` command: list protocols, run simulations (one seed or a seed search), check
//! histories, run nodes and local clusters behind a Redis gateway, and benchmark them.

mod bench_command;
mod check_command;
mod cluster_command;
mod node_command;
mod parse;
mod sim_command;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// ordo: state-machine replication protocols, simulated, checked and compared.
#[derive(Parser)]
#[command(name = "ordo", version, about)]
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
    /// Check a client history (JSON lines) for linearizability: exit 0 yes, 1 no, 2 malformed,
    /// 3 unknown (a key too complex under the limits).
    Check(check_command::CheckArgs),
    /// Run one node of a cluster file over UDP (a replica, another role, or the Redis gateway).
    Node(node_command::NodeArgs),
    /// Run a local cluster of processes on 127.0.0.1 with a Redis gateway.
    #[command(subcommand)]
    Cluster(cluster_command::ClusterCommand),
    /// Benchmark protocols on local clusters: throughput-latency sweeps, CSV/JSON and PNG plots.
    Bench(Box<bench_command::BenchArgs>),
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
    }
}
