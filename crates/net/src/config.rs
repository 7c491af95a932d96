//! The cluster file: the protocol, its options, and every node with its role and addresses.
//!
//! ```toml
//! protocol = "multipaxos"
//! data_dir = "/tmp/ordo"
//! [protocol_options]          # the protocol's own Config, as in `ordo sim --set`
//! [[node]]
//! name = "r1"
//! role = "replica"
//! addr = "127.0.0.1:7401"
//! metrics = "127.0.0.1:9401"
//! [[node]]
//! name = "gw"
//! role = "gateway"            # hosts `clients` protocol client nodes and the Redis port
//! addr = "127.0.0.1:7400"
//! redis = "127.0.0.1:7379"
//! clients = 32
//! ```
//!
//! Node ids follow the simulator's order: replicas in file order, then the protocol's extra
//! roles in the order `Protocol::extra_roles` lists them, then each gateway's client nodes.

use ordo_core::{NodeId, NodeSpec, Protocol, Role, Topology};
use ordo_sim::FaultPlan;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use thiserror::Error;

/// Most client nodes one gateway may host.
pub const GATEWAY_CLIENTS_MAX: usize = 1_024;

/// A problem with a cluster file.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Not valid TOML or a field is wrong.
    #[error("cluster file: {0}")]
    Parse(String),
    /// The nodes do not make a cluster the protocol can run.
    #[error("cluster file: {0}")]
    Invalid(String),
    /// No node of that name.
    #[error("no node named `{0}` in the cluster file")]
    UnknownNode(String),
}

/// What a node entry of the cluster file runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileRole {
    /// A replica.
    Replica,
    /// A proxy (extra role).
    Proxy,
    /// A sequencer (extra role).
    Sequencer,
    /// A controller (extra role).
    Controller,
    /// A process hosting protocol client nodes and a Redis port.
    Gateway,
}

impl FileRole {
    fn role(self) -> Option<Role> {
        match self {
            FileRole::Replica => Some(Role::Replica),
            FileRole::Proxy => Some(Role::Proxy),
            FileRole::Sequencer => Some(Role::Sequencer),
            FileRole::Controller => Some(Role::Controller),
            FileRole::Gateway => None,
        }
    }
}

/// `options` over the protocol's option values for real processes
/// ([`Protocol::runtime_defaults`]): what a cluster of processes runs with, whether its file was
/// written by `ordo cluster up` (which records them) or by hand.
pub fn with_runtime_defaults<P: Protocol>(options: &toml::Table) -> toml::Table {
    let value = |ns: u64| toml::Value::Integer(i64::try_from(ns).expect("a runtime default fits in i64"));
    let mut merged: toml::Table =
        P::runtime_defaults().iter().map(|&(name, ns)| (name.to_string(), value(ns))).collect();
    merged.extend(options.iter().map(|(name, value)| (name.clone(), value.clone())));
    merged
}

/// Clock options of a node: an injected offset and drift on top of the system clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockOptions {
    /// Added to the system clock, in ns (negative: behind).
    pub offset_ns: i64,
    /// Rate error in parts per million.
    pub drift_ppm: f64,
    /// The error bound the clock claims, in ns.
    pub error_bound_ns: u64,
}

/// One node entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Name used on the command line (`--id r1`).
    pub name: String,
    /// What it runs.
    pub role: FileRole,
    /// UDP address of its protocol traffic.
    pub addr: SocketAddr,
    /// HTTP address serving Prometheus text (`/metrics`) and status (`/status`).
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Gateways: the Redis (RESP) address; none for a gateway driven in-process (benchmarks).
    #[serde(default)]
    pub redis: Option<SocketAddr>,
    /// Gateways: how many protocol client nodes to host.
    #[serde(default)]
    pub clients: Option<usize>,
    /// Clock skew injected into this node.
    #[serde(default)]
    pub clock: ClockOptions,
    /// Run this entry's node inside the process of the named entry (a gateway, say) instead of
    /// a process of its own, so messages between them are handed over in memory rather than
    /// through the kernel. Its `addr` must be that entry's; its `metrics`, `redis` and `clock`
    /// are unused (the hosting process's apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Transport and storage options shared by every node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeOptions {
    /// Largest datagram sent, in bytes.
    pub datagram_max: usize,
    /// `fsync` durable writes before held sends leave (false: only `write`, for benchmarks
    /// that compare against an in-memory store; a crash of the machine may then lose data).
    pub fsync: bool,
    /// A gateway gives up on an operation after this long and replies an error.
    pub op_timeout_ns: u64,
    /// Most requests a gateway queues while all its client nodes are busy.
    pub gateway_queue_max: usize,
    /// Most Redis connections a gateway serves at once (Redis' `maxclients`). At the cap, the
    /// connection idle the longest is closed to admit a new one; only when none is idle is the
    /// new one refused. The gateway also lowers it to what its file-descriptor limit allows.
    pub connections_max: usize,
    /// A Redis connection waiting for a request, or for the client to take its replies, is
    /// closed after this long (Redis' `timeout`; 0: never). Redis defaults to never; ordo does not,
    /// because a connection left open by a crashed or leaking client would otherwise hold its
    /// slot and descriptor until the gateway restarts.
    pub idle_timeout_ns: u64,
    /// Most requests of one Redis connection read and not yet answered; the connection is not
    /// read again until they are (backpressure, not an error).
    pub pipeline_depth_max: usize,
    /// Most reply bytes the gateway holds for one Redis connection before it stops answering and
    /// reading to write them out; a client that does not read its replies is then held back by
    /// TCP flow control (backpressure, not an error).
    pub reply_bytes_max: usize,
    /// Seed of the node's random generator (and of the fault shim).
    pub seed: u64,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            datagram_max: 32 * 1024,
            fsync: true,
            op_timeout_ns: 10_000_000_000,
            gateway_queue_max: 100_000,
            connections_max: 10_000,
            idle_timeout_ns: 300_000_000_000,
            pipeline_depth_max: 1_024,
            reply_bytes_max: 64 * 1024,
            seed: 1,
        }
    }
}

/// A password from the cluster file. Its `Debug` does not show it, so a logged configuration
/// does not leak it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Password(..)")
    }
}

/// A cluster file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Registry name of the protocol.
    pub protocol: String,
    /// Directory of the nodes' durable files (one file per node).
    pub data_dir: PathBuf,
    /// The protocol's options.
    #[serde(default)]
    pub protocol_options: toml::Table,
    /// Transport and storage options.
    #[serde(default)]
    pub runtime: RuntimeOptions,
    /// Faults injected by the transport's shim; times count from each process's start.
    #[serde(default)]
    pub faults: FaultPlan,
    /// The password Redis clients must give with AUTH (or HELLO's AUTH option) before any other
    /// command (Redis' `requirepass`); none: no password, as in Redis by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirepass: Option<Password>,
    /// Every node.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeEntry>,
}

/// Where each topology node lives.
#[derive(Clone, Debug)]
pub struct Placement {
    /// The topology.
    pub topology: Topology,
    /// For each node id, the index of its entry in the file.
    pub entry_of: Vec<usize>,
}

impl ClusterFile {
    /// Parses a cluster file.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// The file as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a cluster file always serializes")
    }

    /// A hash of the file that names the cluster on the wire.
    pub fn cluster_hash(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.to_toml().as_bytes())
    }

    /// The entry of a node name.
    pub fn entry(&self, name: &str) -> Result<usize, ConfigError> {
        self.nodes.iter().position(|n| n.name == name).ok_or_else(|| ConfigError::UnknownNode(name.to_string()))
    }

    /// The entry whose process runs `entry`'s node: its `host`, or itself.
    pub fn hosting_entry(&self, entry: usize) -> Result<usize, ConfigError> {
        let node = &self.nodes[entry];
        let Some(host) = &node.host else { return Ok(entry) };
        let hosting = self.entry(host)?;
        if self.nodes[hosting].host.is_some() {
            return Err(ConfigError::Invalid(format!(
                "node `{}` is hosted by `{host}`, which is hosted itself",
                node.name
            )));
        }
        if self.nodes[hosting].addr != node.addr {
            return Err(ConfigError::Invalid(format!(
                "node `{}` is hosted by `{host}` but has another addr",
                node.name
            )));
        }
        Ok(hosting)
    }

    /// The protocol's options over its runtime defaults, parsed and validated.
    pub fn protocol_config<P: Protocol>(&self) -> Result<P::Config, ConfigError> {
        let config: P::Config = toml::Value::Table(with_runtime_defaults::<P>(&self.protocol_options))
            .try_into()
            .map_err(|e| ConfigError::Invalid(format!("[protocol_options] for {}: {e}", P::NAME)))?;
        P::validate_config(&config).map_err(ConfigError::Invalid)?;
        Ok(config)
    }

    /// Builds the topology every node of the cluster shares, checking that the file's extra
    /// roles are exactly the ones the protocol asks for.
    pub fn placement<P: Protocol>(&self, config: &P::Config) -> Result<Placement, ConfigError> {
        let mut names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(ConfigError::Invalid("two nodes share a name".into()));
        }
        let replicas: Vec<usize> = (0..self.nodes.len()).filter(|&i| self.nodes[i].role == FileRole::Replica).collect();
        if replicas.is_empty() {
            return Err(ConfigError::Invalid("a cluster needs at least one replica".into()));
        }
        let mut nodes = Vec::new();
        let mut entry_of = Vec::new();
        for &entry in &replicas {
            nodes.push(NodeSpec {
                id: NodeId(nodes.len() as u32),
                role: Role::Replica,
                site: 0,
                shard: Some(0),
                machine: None,
            });
            entry_of.push(entry);
        }
        let mut unused: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| !matches!(self.nodes[i].role, FileRole::Replica | FileRole::Gateway))
            .collect();
        for role in P::extra_roles(replicas.len(), config) {
            let Some(at) = unused.iter().position(|&i| self.nodes[i].role.role() == Some(role)) else {
                return Err(ConfigError::Invalid(format!("{} needs a node with role {role:?}", P::NAME)));
            };
            let entry = unused.remove(at);
            nodes.push(NodeSpec { id: NodeId(nodes.len() as u32), role, site: 0, shard: None, machine: None });
            entry_of.push(entry);
        }
        if let Some(&extra) = unused.first() {
            return Err(ConfigError::Invalid(format!(
                "node `{}` has a role {} does not use",
                self.nodes[extra].name,
                P::NAME
            )));
        }
        for (entry, node) in self.nodes.iter().enumerate().filter(|(_, n)| n.role == FileRole::Gateway) {
            let clients = node.clients.unwrap_or(16);
            if clients == 0 || clients > GATEWAY_CLIENTS_MAX {
                return Err(ConfigError::Invalid(format!(
                    "gateway `{}`: clients must be 1..={GATEWAY_CLIENTS_MAX}",
                    node.name
                )));
            }
            for _ in 0..clients {
                nodes.push(NodeSpec {
                    id: NodeId(nodes.len() as u32),
                    role: Role::Client,
                    site: 0,
                    shard: None,
                    machine: None,
                });
                entry_of.push(entry);
            }
        }
        for entry in entry_of.iter_mut() {
            *entry = self.hosting_entry(*entry)?;
        }
        // Nodes in one process share a machine: a gateway's clients prefer the proxies it hosts.
        for (node, &entry) in nodes.iter_mut().zip(&entry_of) {
            node.machine = Some(entry);
        }
        let f = (replicas.len() - 1) / 2;
        let topology = Topology {
            nodes,
            shards: vec![replicas.iter().enumerate().map(|(rank, _)| NodeId(rank as u32)).collect()],
            f,
            sites: vec!["local".into()],
            site_delay_ns: vec![vec![50_000]],
        };
        Ok(Placement { topology, entry_of })
    }

    /// Checks the ports a local cluster of `nodes` nodes would use: UDP ports from `port_base`,
    /// metrics ports from `port_base + 1000`, and the Redis port. Refuses ports below 1024 (they
    /// need root, and a node that cannot bind exits), ranges that run past 65535 (they would wrap
    /// to port 0 and the privileged ports), and a Redis port inside either range.
    pub fn check_local_ports(port_base: u16, nodes: usize, redis_port: Option<u16>) -> Result<(), String> {
        const METRICS_OFFSET: u32 = 1000;
        if nodes as u32 > METRICS_OFFSET {
            return Err(format!("{nodes} nodes: a local cluster has at most {METRICS_OFFSET}"));
        }
        if port_base < 1024 {
            return Err(format!("--port-base {port_base}: ports below 1024 need root; choose 1024 or above"));
        }
        let last = u32::from(port_base) + METRICS_OFFSET + nodes as u32 - 1;
        if last > u32::from(u16::MAX) {
            let highest = u32::from(u16::MAX) + 1 - METRICS_OFFSET - nodes as u32;
            return Err(format!(
                "--port-base {port_base}: {nodes} nodes use UDP ports {port_base}.. and metrics ports {}..{last}, \
                 past 65535; choose a base of at most {highest}",
                u32::from(port_base) + METRICS_OFFSET
            ));
        }
        if let Some(redis) = redis_port {
            let base = u32::from(port_base);
            let inside = |start: u32| (start..start + nodes as u32).contains(&u32::from(redis));
            if redis < 1024 {
                return Err(format!("--redis-port {redis}: ports below 1024 need root; choose 1024 or above"));
            }
            if inside(base) || inside(base + METRICS_OFFSET) {
                return Err(format!(
                    "--redis-port {redis} lies among the nodes' ports (from {port_base} and {})",
                    base + 1000
                ));
            }
        }
        Ok(())
    }

    /// A local cluster on 127.0.0.1: `replicas` replicas, the protocol's extra roles, and one
    /// gateway with `clients` client nodes. Ports count up from `port_base` (UDP) and
    /// `port_base + 1000` (metrics); the gateway's Redis port is `redis_port`, if any. The ports
    /// must pass [`ClusterFile::check_local_ports`].
    pub fn local<P: Protocol>(
        config: &P::Config,
        options: toml::Table,
        replicas: usize,
        clients: usize,
        port_base: u16,
        redis_port: Option<u16>,
        data_dir: PathBuf,
    ) -> Self {
        let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let mut nodes = Vec::new();
        let mut push = |name: String, role: FileRole, redis: Option<SocketAddr>, clients: Option<usize>| {
            let index = nodes.len() as u16;
            nodes.push(NodeEntry {
                name,
                role,
                addr: address(port_base + index),
                metrics: Some(address(port_base + 1000 + index)),
                redis,
                clients,
                clock: ClockOptions::default(),
                host: None,
            });
        };
        for rank in 0..replicas {
            push(format!("r{}", rank + 1), FileRole::Replica, None, None);
        }
        for (index, role) in P::extra_roles(replicas, config).into_iter().enumerate() {
            let (name, file_role) = match role {
                Role::Proxy => ("proxy", FileRole::Proxy),
                Role::Sequencer => ("sequencer", FileRole::Sequencer),
                Role::Controller => ("controller", FileRole::Controller),
                Role::Replica => ("replica", FileRole::Replica),
                Role::Client => ("client", FileRole::Gateway),
            };
            push(format!("{name}{}", index + 1), file_role, None, None);
        }
        push("gw".into(), FileRole::Gateway, redis_port.map(address), Some(clients));
        ClusterFile {
            protocol: P::NAME.to_string(),
            data_dir,
            protocol_options: options,
            runtime: RuntimeOptions::default(),
            faults: FaultPlan::default(),
            requirepass: None,
            nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_protocols::multipaxos::MultiPaxos;

    #[test]
    fn example_cluster_files_parse_and_place() {
        // Goal: the shipped examples are valid cluster files; ids follow the simulator's order
        // (replicas, extra roles, then the gateway's client nodes).
        for name in ["multipaxos-3.toml", "faults.toml"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster").join(name);
            let file = ClusterFile::parse(&std::fs::read_to_string(&path).expect("example exists")).expect(name);
            let config = file.protocol_config::<MultiPaxos>().expect("options");
            let placement = file.placement::<MultiPaxos>(&config).expect("placement");
            assert_eq!(placement.topology.replicas().len(), 3);
            assert_eq!(placement.topology.node(NodeId(3)).role, Role::Client);
            assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
        }
    }

    #[test]
    fn requirepass_and_gateway_limits_round_trip_and_old_files_get_defaults() {
        // Goal: `requirepass` and the gateway's limits are read from and written to the file, a
        // file without them (written before they existed) still parses with the defaults, and
        // the password never shows in a debug print. Method: parse, print, parse again.
        let old = "protocol = \"multipaxos\"\ndata_dir = \"/x\"\n[[node]]\nname = \"r1\"\nrole = \"replica\"\naddr = \"127.0.0.1:9000\"\n";
        let file = ClusterFile::parse(old).expect("a file without the new keys");
        assert_eq!((file.requirepass.as_ref(), file.runtime.connections_max), (None, 10_000));
        assert_eq!(file.runtime.idle_timeout_ns, 300_000_000_000);
        assert!(!file.to_toml().contains("requirepass"), "no password: no key");
        let text = format!("requirepass = \"s3cret\"\n{old}[runtime]\nidle_timeout_ns = 0\npipeline_depth_max = 8\n");
        let file = ClusterFile::parse(&text).expect("with the new keys");
        assert_eq!(file.requirepass, Some(Password("s3cret".into())));
        assert_eq!((file.runtime.idle_timeout_ns, file.runtime.pipeline_depth_max), (0, 8));
        assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
        assert!(!format!("{file:?}").contains("s3cret"), "Debug hides the password");
        assert!(
            ClusterFile::parse(&format!("{old}[runtime]\nno_such_limit = 1\n")).is_err(),
            "unknown keys are errors"
        );
    }

    #[test]
    fn a_cluster_runs_with_the_protocols_runtime_defaults_under_its_own_options() {
        // Goal: a cluster file that does not set an option gets the protocol's value for real
        // processes (a hand-written file too), and one that sets it keeps its own.
        use ordo_protocols::nezha::Nezha;
        let mut file =
            ClusterFile::local::<Nezha>(&Default::default(), toml::Table::new(), 3, 4, 9000, None, "/x".into());
        assert_eq!(file.protocol_config::<Nezha>().unwrap().view_change_timeout_ns, 100_000_000);
        file.protocol_options.insert("view_change_timeout_ns".into(), toml::Value::Integer(30_000_000));
        assert_eq!(file.protocol_config::<Nezha>().unwrap().view_change_timeout_ns, 30_000_000);
    }

    #[test]
    fn hosted_nodes_live_in_their_hosts_process() {
        // Goal: a node entry with `host` is placed in the hosting entry's process (same entry
        // index, so the same socket), and its id keeps the simulator's order.
        use ordo_protocols::nezha::Nezha;
        let config = Default::default();
        let mut file = ClusterFile::local::<Nezha>(&config, toml::Table::new(), 3, 4, 9000, None, "/tmp/x".into());
        let gateway = file.entry("gw").expect("gateway");
        let proxy = file.entry("proxy1").expect("proxy");
        file.nodes[proxy].host = Some("gw".into());
        file.nodes[proxy].addr = file.nodes[gateway].addr;
        let placement = file.placement::<Nezha>(&config).expect("placement");
        let proxy_node = placement.topology.nodes.iter().position(|n| n.role == Role::Proxy).expect("a proxy");
        assert_eq!(placement.entry_of[proxy_node], gateway);
        let client = placement.topology.with_role(Role::Client).next().expect("a client");
        assert!(
            placement.topology.same_machine(client, NodeId(proxy_node as u32)),
            "a hosted proxy shares its host's machine"
        );
        assert!(!placement.topology.same_machine(client, NodeId(0)), "a replica runs on a machine of its own");
        assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
    }

    #[test]
    fn bad_cluster_files_are_errors() {
        assert!(ClusterFile::parse("protocol = 3").is_err());
        let mut file = ClusterFile::local::<MultiPaxos>(
            &Default::default(),
            toml::Table::new(),
            3,
            4,
            9000,
            None,
            "/tmp/x".into(),
        );
        file.nodes[1].name = "r1".into();
        assert!(file.placement::<MultiPaxos>(&Default::default()).is_err(), "duplicate names");
        let mut hosted = file.clone();
        hosted.nodes[0].name = "r0".into();
        hosted.nodes[0].host = Some("gw".into());
        assert!(hosted.placement::<MultiPaxos>(&Default::default()).is_err(), "a hosted node keeps its own addr");
        hosted.nodes[0].host = Some("nobody".into());
        assert!(hosted.placement::<MultiPaxos>(&Default::default()).is_err(), "unknown host");
        file.nodes.retain(|n| n.role == FileRole::Gateway);
        assert!(file.placement::<MultiPaxos>(&Default::default()).is_err(), "no replica");
    }
}
