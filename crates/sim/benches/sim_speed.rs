//! Simulator speed: simulated events per wall-clock second, for every registered protocol, on
//! the LAN with the CPU cost model and no faults, then with random faults.
//! Run: `cargo bench -p ordo-sim --bench sim_speed`.

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, SimReport};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("valid config").report
    }
}

fn main() {
    println!(
        "{:<16} {:<7} {:>12} {:>10} {:>8} {:>14}",
        "protocol", "faults", "events", "committed", "wall s", "events/wall s"
    );
    for info in protocols().iter().filter(|p| !p.canary) {
        for faults in [false, true] {
            let config = SimConfig {
                seed: 1,
                duration_ns: 10_000_000_000,
                clients: 8,
                faults: FaultPlan { random: faults, ..FaultPlan::default() },
                check_linearizability: false,
                record_history: false,
                ..SimConfig::default()
            };
            let report = with_protocol(info.name, Run(config)).expect("registered");
            println!(
                "{:<16} {:<7} {:>12} {:>10} {:>8.2} {:>12.2} M",
                info.name,
                if faults { "random" } else { "none" },
                report.events,
                report.committed,
                report.wall_s,
                report.events_per_wall_s / 1e6
            );
        }
    }
}
