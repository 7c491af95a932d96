//! ordo-sim: a deterministic discrete-event simulator for ordo's sans-IO protocols.
//!
//! One run is a [`SimConfig`] plus a protocol type: [`run`] builds the nodes, drives them in
//! virtual time through a faulty network with per-node clocks and a CPU cost model, records the
//! clients' history, checks it for linearizability and the replicas for agreement, and returns a
//! [`SimReport`]. The same seed gives the same report (except the wall-clock fields).
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod faults;
pub mod network;
pub mod placement;
pub mod report;
mod summary;
pub mod witness;
pub mod workload;
mod world;

pub use config::{ClockSpec, CpuCost, SimConfig};
pub use faults::{Fault, FaultPlan, FaultSpec, NodeRef};
pub use network::LatencyModel;
pub use placement::{RoleCpu, RolePlacement};
pub use report::{SimReport, Violation};
pub use workload::WorkloadSpec;

use ordo_check::history::HistoryEvent;
use ordo_core::Protocol;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// A finished run: its report and the client history.
pub struct SimRun {
    /// The report.
    pub report: SimReport,
    /// The client history, in time order.
    pub history: Vec<HistoryEvent>,
}

/// Runs one simulation of protocol `P`. Fails only on a configuration that cannot run; protocol
/// failures (assertions, violations) are in the report.
pub fn run<P: Protocol>(config: SimConfig) -> Result<SimRun, String> {
    let started = Instant::now();
    witness::reset();
    let built = catch_unwind(AssertUnwindSafe(|| world::World::<P>::new(config)));
    let mut world =
        built.map_err(|payload| format!("a node panicked while starting: {}", panic_message(payload.as_ref())))??;
    let outcome = catch_unwind(AssertUnwindSafe(|| world.run()));
    let assertion = outcome.err().map(|payload| panic_message(payload.as_ref()));
    let wall_s = started.elapsed().as_secs_f64();
    let report = summary::report(&world, assertion, wall_s);
    Ok(SimRun { report, history: std::mem::take(&mut world.history) })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
