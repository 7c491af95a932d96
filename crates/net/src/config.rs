//! The cluster file: the protocol, its options, and every node with its role and addresses.
//!
//! ```toml
//! protocol = "multipaxos"
//! data_dir = "/tmp/ordo"
//! key_file = "cluster.key"     # the secret that authenticates datagrams (see ClusterFile::key_file)
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
use std::path::{Path, PathBuf};
use thiserror::Error;

use crate::wire::ClusterKey;

/// Most client nodes one gateway may host.
pub const GATEWAY_CLIENTS_MAX: usize = 1_024;
/// The environment variable that holds the cluster secret, in place of a key file.
pub const KEY_ENV: &str = "ORDO_CLUSTER_KEY";
/// Fewest bytes of a cluster secret.
pub const SECRET_LEN_MIN: usize = 16;

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
    /// The file whose content (at least [`SECRET_LEN_MIN`] bytes, surrounding whitespace
    /// ignored) is the cluster secret: every datagram carries a MAC keyed with it, and a node
    /// drops datagrams without a valid one. The environment variable [`KEY_ENV`], when set,
    /// takes its place. A relative path is relative to the cluster file's directory. Required
    /// when a node's address is not a loopback address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
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

/// How to make a key, for the errors about keys.
const KEY_HINT: &str = "`head -c 32 /dev/urandom | base64 > cluster.key` makes one; `ordo cluster up` writes one";

fn read_key_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let secret =
        std::fs::read(path).map_err(|error| ConfigError::Invalid(format!("key file {}: {error}", path.display())))?;
    use std::os::unix::fs::PermissionsExt;
    if let Ok(metadata) = std::fs::metadata(path)
        && metadata.permissions().mode() & 0o077 != 0
    {
        eprintln!("warning: key file {} can be read by other users; `chmod 600` it", path.display());
    }
    Ok(secret)
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

    /// Reads and parses the cluster file at `path`; a relative `key_file` is taken relative to
    /// the file's directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::Parse(format!("cannot read {}: {error}", path.display())))?;
        let mut file = ClusterFile::parse(&text)?;
        if let (Some(key_file), Some(directory)) = (&file.key_file, path.parent()) {
            file.key_file = Some(directory.join(key_file));
        }
        Ok(file)
    }

    /// The file as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a cluster file always serializes")
    }

    /// A hash of what every node must agree on, which names the cluster on the wire: the
    /// protocol and its options, and each node's name, role, address, client count and host.
    /// What may differ between nodes or change one node at a time (metrics and Redis ports,
    /// clocks, the data directory, the key file's path, runtime options, faults) is left out.
    pub fn cluster_hash(&self) -> u64 {
        #[derive(Serialize)]
        struct Member<'a> {
            name: &'a str,
            role: FileRole,
            addr: SocketAddr,
            clients: Option<usize>,
            host: Option<&'a str>,
        }
        #[derive(Serialize)]
        struct Membership<'a> {
            protocol: &'a str,
            protocol_options: &'a toml::Table,
            node: Vec<Member<'a>>,
        }
        let node = self
            .nodes
            .iter()
            .map(|n| Member { name: &n.name, role: n.role, addr: n.addr, clients: n.clients, host: n.host.as_deref() })
            .collect();
        let membership = Membership { protocol: &self.protocol, protocol_options: &self.protocol_options, node };
        let text = toml::to_string(&membership).expect("a membership always serializes");
        xxhash_rust::xxh3::xxh3_64(text.as_bytes())
    }

    /// The cluster key, from the environment variable [`KEY_ENV`] or else the key file; none
    /// when neither is set, which only a cluster whose every address is a loopback address may
    /// run with.
    pub fn cluster_key(&self) -> Result<Option<ClusterKey>, ConfigError> {
        self.key_from(std::env::var_os(KEY_ENV).map(|v| v.into_encoded_bytes()))
    }

    /// [`ClusterFile::cluster_key`] with the environment variable's value given.
    pub fn key_from(&self, environment: Option<Vec<u8>>) -> Result<Option<ClusterKey>, ConfigError> {
        let (secret, source) = match (environment, &self.key_file) {
            (Some(secret), _) => (secret, format!("${KEY_ENV}")),
            (None, Some(path)) => (read_key_file(path)?, path.display().to_string()),
            (None, None) => return self.refuse_without_key().map(|()| None),
        };
        let secret = secret.trim_ascii();
        if secret.len() < SECRET_LEN_MIN {
            return Err(ConfigError::Invalid(format!(
                "cluster key {source}: {} bytes, at least {SECRET_LEN_MIN} needed ({KEY_HINT})",
                secret.len()
            )));
        }
        Ok(Some(ClusterKey::derive(secret)))
    }

    fn refuse_without_key(&self) -> Result<(), ConfigError> {
        let Some(exposed) = self.nodes.iter().find(|n| !n.addr.ip().is_loopback()) else { return Ok(()) };
        Err(ConfigError::Invalid(format!(
            "node `{}` is at {}, which is not a loopback address, so anyone on the network could send              it datagrams: the cluster needs a key. Set `key_file = \"PATH\"` in the cluster file or              the environment variable {KEY_ENV}, the same on every node ({KEY_HINT})",
            exposed.name, exposed.addr
        )))
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
            key_file: None,
            protocol_options: options,
            runtime: RuntimeOptions::default(),
            faults: FaultPlan::default(),
            requirepass: None,
            nodes,
        }
    }
}

#[cfg(test)]
mod tests;
