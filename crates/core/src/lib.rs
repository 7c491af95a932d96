//! ordo-core: the vocabulary every protocol, driver and checker shares.
//!
//! - [`ids`]: node, client and request identifiers.
//! - [`time`]: clock readings with an error bound, and the [`time::Clock`] trait.
//! - [`command`]: the key-value commands, their results and the keys each touches.
//! - [`kv`]: the [`kv::StateMachine`] trait and the built-in key-value store.
//! - [`node`]: the sans-IO node interface: a [`node::Protocol`] names its message, timer and
//!   durable-record types; a [`node::Node`] takes one input with the local clock reading and
//!   appends effects to an [`node::Outbox`] the driver owns.
//! - [`stats`]: counters each node keeps, read the same way for every protocol.
#![deny(missing_docs)]

pub mod command;
pub mod ids;
pub mod kv;
pub mod node;
pub mod stats;
pub mod time;

pub use command::{Command, CommandResult, Key, Value};
pub use ids::{ClientId, NodeId, RequestId};
pub use kv::{KeyDigest, KvStore, StateMachine, snapshot_interval};
pub use node::{
    CrashModel, Destinations, Effect, Node, NodeContext, NodeSpec, Outbox, PersistMode, PersistTicket, Protocol, Role,
    Submission, Topology, shard_of_key,
};
pub use stats::NodeStats;
pub use time::{Clock, ClockReading};
