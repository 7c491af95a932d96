//! ordo-net: the real runtime. The same sans-IO nodes the simulator drives, run as processes
//! over UDP, with real timers, clocks and files, a Redis (RESP2 and RESP3) gateway and Prometheus
//! metrics.
//!
//! - [`wire`]: versioned datagram format with a checksum, batching and fragmentation.
//! - [`udp`]: batched UDP I/O (`recvmmsg`, `sendmmsg`).
//! - [`config`]: the cluster file (every node, role and address) and the topology built from it.
//! - [`clock`]: the system clock with an injected offset and drift.
//! - [`timer`]: `timerfd`-based timers precise to tens of microseconds.
//! - [`storage`]: append-only durable file per node with group commit.
//! - [`faults`]: the transport's fault shim, driven by the simulator's `FaultPlan`.
//! - [`host`]: the node host loop, generic over the protocol.
//! - [`resp`] and [`gateway`]: RESP parsing, RESP2/RESP3 replies and the Redis-command mapping.
//! - [`metrics`]: Prometheus text and JSON status over HTTP.
//! - [`node`]: one node process.
//! - `fuzzing` (hidden): the fuzz bodies of every decoder of outside bytes (`docs/fuzzing.md`).
//!
//! `docs/runtime.md` describes the design.
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod faults;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod host;
pub mod metrics;
pub mod node;
pub mod resp;
pub mod storage;
pub mod timer;
pub mod udp;
pub mod wire;

pub use config::ClusterFile;
pub use host::{Host, HostError, Outcome, Request};
