//! ordo-core: the vocabulary every protocol, driver and checker shares.
//!
//! - [`ids`]: node, client and request identifiers.
//! - [`time`]: clock readings with an error bound, and the [`time::Clock`] trait.
//! - [`command`]: the key-value commands, their results and the keys each touches.
//! - [`kv`]: the [`kv::StateMachine`] trait and the built-in key-value store.
//! - [`glob`]: Redis' glob patterns (KEYS, SCAN MATCH, CONFIG GET).
//! - [`node`]: the sans-IO node interface: a [`node::Protocol`] names its message, timer and
//!   durable-record types; a [`node::Node`] takes one input with the local clock reading and
//!   appends effects to an [`node::Outbox`] the driver owns.
//! - [`driver`]: [`driver::NodeRunner`], the one interpreter of a node's effects that every
//!   driver (simulator, runtime, testkit) uses.
//! - [`stats`]: counters each node keeps, read the same way for every protocol.
#![deny(missing_docs)]

pub mod batch;
pub mod command;
pub mod driver;
pub mod glob;
pub mod ids;
pub mod kv;
pub mod node;
pub mod stats;
pub mod time;

pub use batch::{BATCH_BYTES_MAX, batch_len};
pub use command::{Command, CommandResult, Key, Value};
pub use driver::{Action, Deadline, NodeRunner, RunnerSetup, Targets, TimerFiring, node_seed};
pub use ids::{ClientId, NodeId, RequestId};
pub use kv::{KeyDigest, KvStore, StateMachine, snapshot_interval};
pub use node::{
    AsAny, CrashModel, Destinations, Effect, FailureBudget, GlobalChecker, Node, NodeContext, NodeSpec, Outbox,
    PersistMode, PersistTicket, Protocol, Role, Submission, Topology, shard_of_key,
};
pub use stats::NodeStats;
pub use time::{Clock, ClockReading};
