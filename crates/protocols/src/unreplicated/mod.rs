//! Unreplicated: one server executes every command in arrival order. No fault tolerance; it is
//! the upper bound that replicated protocols are measured against.
//!
//! Roles: [`server::Server`] (the single replica), [`client::Client`]. The client retries on a
//! timeout; the server's client table makes retries execute at most once. The server logs every
//! command durably before it replies (like Redis with `appendfsync always`), so a crash and
//! restart loses nothing acknowledged; every `snapshot_interval` commands the log is compacted.

pub mod client;
pub mod messages;
pub mod server;

#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_scripts;

use ordo_core::{Node, NodeContext, Protocol, Role};
use serde::{Deserialize, Serialize};

/// The Unreplicated protocol.
pub struct Unreplicated;

/// Options of the Unreplicated protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How long a client waits for a reply before sending its request again, plus two of the
    /// topology's slowest round trips ([`ordo_core::Topology::stretched_for_clients`]), doubled
    /// after each resend of the same request up to 8 times (`client_pipeline::retry_after`).
    pub client_retry_ns: u64,
    /// Commands between two snapshots that compact the durable log.
    pub snapshot_interval: u64,
    /// Requests one client may keep in flight (pipelining).
    pub client_window: usize,
    /// Clients the server's client table remembers.
    pub client_table_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { client_retry_ns: 20_000_000, snapshot_interval: 10_000, client_window: 16, client_table_max: 100_000 }
    }
}

/// Timers of the Unreplicated protocol.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// The client's request went unanswered for too long.
    ClientRetry,
}

impl Protocol for Unreplicated {
    const NAME: &'static str = "unreplicated";
    const SUMMARY: &'static str = "one server, no replication: the upper bound on throughput and latency";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = server::Durable;
    type Config = Config;
    type Observation = ();

    /// One server: further replicas would receive nothing.
    fn replicas_max() -> Option<usize> {
        Some(1)
    }

    /// The server logs each command durably before it replies.
    fn state_on_disk() -> bool {
        true
    }

    fn client_window(config: &Config) -> usize {
        config.client_window
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        if config.client_window == 0 || config.client_table_max == 0 {
            return Err("unreplicated: client_window and client_table_max must be at least 1".into());
        }
        Ok(())
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<server::Durable>) -> Box<dyn Node<Self>> {
        match context.role() {
            Role::Client => Box::new(client::Client::new(context)),
            _ => Box::new(server::Server::restore(context, durable)),
        }
    }
}
