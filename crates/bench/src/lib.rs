//! ordo-bench: the load generator of `ordo bench`. It drives a cluster through the gateway's
//! pool of protocol client nodes, hosted in this process (the native client: no Redis hop),
//! records HDR histograms, and writes CSV, JSON and PNG plots.
//!
//! - [`workload`]: the operation mix and key choice (YCSB A/B/C, uniform, conflict rate).
//! - [`load`]: closed-loop clients or open-loop Poisson arrivals against one running cluster.
//! - [`output`]: CSV/JSON files and the throughput–latency and CDF plots.
#![deny(missing_docs)]

pub mod load;
pub mod output;
pub mod workload;
