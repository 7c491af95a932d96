//! A simulation run, described as data: cluster shape, network, clocks, CPU costs, workload and
//! faults. Every field has a default, so a run is one seed plus the few fields a user changes.

use crate::faults::FaultPlan;
use crate::network::LatencyModel;
use crate::workload::WorkloadSpec;
use ordo_check::CheckOptions;
use serde::{Deserialize, Serialize};

/// CPU time a server node spends per input, serially: a busy node queues its inputs, so a leader
/// that handles more messages per command saturates first. Clients cost nothing (they stand for
/// machines of their own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuCost {
    /// Fixed cost of handling any input (message, timer, submission).
    pub per_event_ns: u64,
    /// Cost per message received or sent (syscall, packet processing).
    pub per_message_ns: u64,
    /// Cost per byte received or sent.
    pub per_byte_ns: f64,
    /// Inputs a node may queue before it drops new ones (counted).
    pub queue_max: usize,
}

impl Default for CpuCost {
    fn default() -> Self {
        // Orders of magnitude measured on this kind of machine (specs/dependencies.md §1): a
        // UDP send or receive costs about 3 µs in the kernel; handling logic about 1 µs.
        CpuCost { per_event_ns: 1_000, per_message_ns: 3_000, per_byte_ns: 1.0, queue_max: 100_000 }
    }
}

impl CpuCost {
    /// No CPU model: every node handles every input instantly.
    pub fn free() -> Self {
        CpuCost { per_event_ns: 0, per_message_ns: 0, per_byte_ns: 0.0, queue_max: usize::MAX }
    }
}

/// One node's clock: true time plus an offset, a drift and jitter, claiming an error bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockSpec {
    /// Offset from true time at time zero, in ns (negative: behind).
    pub offset_ns: i64,
    /// Rate error in parts per million (positive: runs fast).
    pub drift_ppm: f64,
    /// Each reading is off by a uniform amount in ±jitter_ns.
    pub jitter_ns: u64,
    /// The bound the clock claims on its error (honest clocks keep |error| within it).
    pub error_bound_ns: u64,
}

impl Default for ClockSpec {
    fn default() -> Self {
        ClockSpec { offset_ns: 0, drift_ppm: 0.0, jitter_ns: 0, error_bound_ns: 1_000 }
    }
}

/// Everything a simulation run needs besides the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Seed of every random choice in the run.
    pub seed: u64,
    /// Replicas per shard.
    pub replicas: usize,
    /// Failures tolerated per shard; defaults to (replicas - 1) / 2.
    pub f: Option<usize>,
    /// Number of shards (protocols with partial replication).
    pub shards: usize,
    /// Client nodes.
    pub clients: usize,
    /// Simulated run time in ns.
    pub duration_ns: u64,
    /// Network delays between sites.
    pub latency: LatencyModel,
    /// CPU cost model of server nodes.
    pub cpu: CpuCost,
    /// Time a durable write takes to become durable.
    pub persist_ns: u64,
    /// Clocks of all nodes, before faults change them.
    pub clock: ClockSpec,
    /// What the clients do.
    pub workload: WorkloadSpec,
    /// Faults during the run (all heal before `faults.heal_ns`).
    pub faults: FaultPlan,
    /// Call every node's `check_invariants` after every input.
    pub check_invariants: bool,
    /// Check linearizability of the client history at the end.
    pub check_linearizability: bool,
    /// Keep the client history and return it with the run. Always kept when linearizability is
    /// checked; off, the simulator copies no key or value per operation (benchmarks that read
    /// only the report).
    pub record_history: bool,
    /// Limits of the linearizability check; past them a key is too complex and the run's
    /// linearizability is unknown (reported, neither a pass nor a failure).
    pub check_limits: CheckOptions,
    /// Offer the check the replicas' order of each key as a witness (`witness.rs`), so that it
    /// searches only keys that order does not prove. Off: every key is searched.
    pub check_witness: bool,
    /// Protocol options, as the protocol's `Config` in TOML form.
    pub protocol: toml::Table,
    /// Runs client c on one machine with the protocol's c-th extra node modulo their count (for
    /// Nezha: each proxy a sidecar of its clients, the paper's co-located deployment, §3);
    /// messages within a machine take `latency.machine_ns`.
    pub colocate_clients: bool,
    /// Where roles other than replicas run, by role name (`[placement.sequencer]`): a site of the
    /// latency matrix, or a site of their own at a given delay (see `placement`).
    pub placement: std::collections::BTreeMap<String, crate::placement::RolePlacement>,
    /// CPU profiles by role name (`[cpu_roles] sequencer = "free"`); other server roles use `cpu`,
    /// clients cost nothing unless named here.
    pub cpu_roles: std::collections::BTreeMap<String, crate::placement::RoleCpu>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            replicas: 3,
            f: None,
            shards: 1,
            clients: 8,
            duration_ns: 10 * 1_000_000_000,
            latency: LatencyModel::default(),
            cpu: CpuCost::default(),
            persist_ns: 0,
            clock: ClockSpec::default(),
            workload: WorkloadSpec::default(),
            faults: FaultPlan::default(),
            check_invariants: true,
            check_linearizability: true,
            record_history: true,
            check_limits: CheckOptions::default(),
            check_witness: true,
            protocol: toml::Table::new(),
            colocate_clients: false,
            placement: Default::default(),
            cpu_roles: Default::default(),
        }
    }
}

impl SimConfig {
    /// Failures tolerated per shard.
    pub fn f(&self) -> usize {
        self.f.unwrap_or((self.replicas.saturating_sub(1)) / 2)
    }

    /// Rejects configurations that cannot run, with a message saying why.
    pub fn validate(&self) -> Result<(), String> {
        if self.replicas == 0 {
            return Err("replicas must be at least 1".into());
        }
        if self.shards == 0 {
            return Err("shards must be at least 1".into());
        }
        if self.clients == 0 {
            return Err("clients must be at least 1".into());
        }
        if self.duration_ns == 0 {
            return Err("duration must be positive".into());
        }
        if self.f() * 2 >= self.replicas && self.replicas > 1 {
            return Err(format!(
                "f = {} needs at least {} replicas, not {}",
                self.f(),
                2 * self.f() + 1,
                self.replicas
            ));
        }
        self.latency.validate()?;
        self.workload.validate()
    }
}
