//! Each paper's experiments, declared as data: one file per paper, built for a full or a quick
//! run. Adding a paper is adding a file here and a line to [`paper`].

use crate::experiment::Paper;
use ordo_sim::{SimConfig, WorkloadSpec};

mod chora;
mod nezha;
mod nopaxos;
mod swiftpaxos;
mod tempo;

/// The papers `ordo reproduce` knows, in the order `ordo reproduce all` runs them.
pub const NAMES: [&str; 5] = ["nezha", "tempo", "nopaxos", "swiftpaxos", "chora"];

/// Paper `name`'s experiments, full or quick.
pub fn paper(name: &str, quick: bool) -> Option<Paper> {
    match name {
        "nezha" => Some(nezha::paper(quick)),
        "chora" => Some(chora::paper(quick)),
        "tempo" => Some(tempo::paper(quick)),
        "nopaxos" => Some(nopaxos::paper(quick)),
        "swiftpaxos" => Some(swiftpaxos::paper(quick)),
        _ => None,
    }
}

const MS: u64 = 1_000_000;

/// Protocol options from TOML text (`key = value` lines), as `ordo sim --set` gives them.
fn options(text: &str) -> toml::Table {
    toml::from_str(text).expect("the declared options are valid TOML")
}

/// The simulator's defaults (LAN, CPU cost model, seed 1) with these clients, replicas, workload
/// and run length; the linearizability check off (throughput runs are too big for it).
fn base(replicas: usize, clients: usize, workload: &str, duration_ns: u64) -> SimConfig {
    SimConfig {
        seed: 1,
        replicas,
        clients,
        duration_ns,
        workload: WorkloadSpec::from_name(workload).expect("a known workload"),
        check_linearizability: false,
        ..SimConfig::default()
    }
}

/// `config` with open-loop Poisson arrivals summing to `offered` operations per second.
fn open_loop(mut config: SimConfig, offered: f64) -> SimConfig {
    config.workload.rate_per_client = Some(offered / config.clients as f64);
    config
}

/// A compact label for a load: `150k`.
fn kilo(ops: f64) -> String {
    format!("{}k", ops / 1e3)
}
