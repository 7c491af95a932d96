//! Saturation: throughput, latency and the busiest node's load as closed-loop clients grow, on
//! the simulated LAN with the CPU cost model. A leader-based protocol flattens when its leader's
//! CPU is full; the leader handles the most messages per command.
//! Run: `cargo bench -p ordo-sim --bench saturation` (ORDO_PROTOCOLS=a,b and ORDO_REPLICAS=n to
//! choose).

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use ordo_sim::{SimConfig, SimReport};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("valid config").report
    }
}

fn main() {
    let protocols = std::env::var("ORDO_PROTOCOLS").unwrap_or_else(|_| "unreplicated,multipaxos".into());
    let replicas: usize = std::env::var("ORDO_REPLICAS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    println!(
        "{:<14} {:>8} {:>9} {:>12} {:>8} {:>8} {:>12} {:>12} {:>10}",
        "protocol", "replicas", "clients", "ops/s", "p50 ms", "p99 ms", "busiest", "msgs/cmd", "busy cpu%"
    );
    for protocol in protocols.split(',') {
        for clients in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            let config = SimConfig {
                seed: 1,
                replicas,
                clients,
                duration_ns: 2_000_000_000,
                workload: ordo_sim::WorkloadSpec::from_name("uniform:1000").expect("known"),
                check_linearizability: false,
                ..SimConfig::default()
            };
            let report = with_protocol(protocol, Run(config)).expect("registered");
            let busiest =
                report.nodes.iter().max_by(|a, b| a.cpu_utilisation.total_cmp(&b.cpu_utilisation)).expect("nodes");
            println!(
                "{:<14} {:>8} {:>9} {:>12.0} {:>8.3} {:>8.3} {:>12} {:>12.2} {:>10.1}",
                protocol,
                replicas,
                clients,
                report.throughput_ops_per_s,
                report.latency_ms.p50,
                report.latency_ms.p99,
                format!("n{} {}", busiest.id, busiest.role),
                busiest.messages_per_command,
                busiest.cpu_utilisation * 100.0
            );
        }
    }
}
