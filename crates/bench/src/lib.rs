//! ordo-bench: the load generator of `ordo bench`. It drives a cluster through the gateway's
//! pool of protocol client nodes, hosted in this process (the native client: no Redis hop),
//! records HDR histograms, and writes CSV, JSON and PNG plots.
//!
//! - [`workload`]: the operation mix and key choice (YCSB A/B/C, uniform, conflict rate).
//! - [`load`]: closed-loop clients or open-loop Poisson arrivals against one running cluster.
//! - [`output`]: CSV and JSON files, and the plots written next to them.
//! - [`figure`]: a paper's figure redrawn, measured lines with the paper's numbers overlaid.
//! - [`plot`]: the PNG plots (throughput–latency, latency CDF, time series) and their axes.
//! - [`settings`]: the run's settings and machine, recorded in `results.json` and the plots.
#![deny(missing_docs)]

pub mod figure;
pub mod load;
pub mod output;
pub mod plot;
pub mod settings;
pub mod workload;
