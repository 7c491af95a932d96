//! Faults: a plan of timed events (crashes, restarts, pauses, partitions, lossy, duplicating,
//! reordering or slow periods, clock jumps and drift changes), written by hand in TOML or drawn
//! from the seed. Every fault of a random plan heals before `heal_ns`, so progress can be checked
//! after.
//!
//! A plan names a node by id (`node = 3`) or by role and index (`node = "proxy:2"`, see
//! [`NodeRef`]); ids depend on how a topology numbers its nodes, role references do not. A plan
//! holds [`FaultSpec`]s, faults as written; [`FaultPlan::resolve`] turns them into [`Fault`]s that
//! name node ids only, once the topology is known, so the code that applies faults and the random
//! plans see ids and nothing else.

mod node_ref;

pub use node_ref::NodeRef;

use ordo_core::{CrashModel, Topology};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One fault. Times are true simulated ns since the start of the run. `N` names nodes: node ids
/// (`u32`, the default) in a resolved fault, [`NodeRef`]s in a [`FaultSpec`] as a plan writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault<N = u32> {
    /// The node loses its volatile state at `at_ns`; with `restart_ns` it boots again then from
    /// what it persisted.
    Crash {
        /// The node.
        node: N,
        /// When it crashes.
        at_ns: u64,
        /// When it restarts, if ever.
        restart_ns: Option<u64>,
    },
    /// The node stops handling inputs (they queue) from `at_ns` to `until_ns`.
    Pause {
        /// The node.
        node: N,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// Messages between `side` and every other node are dropped from `at_ns` to `until_ns`.
    Partition {
        /// One side of the cut.
        side: Vec<N>,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// Every message is dropped with this probability.
    Loss {
        /// Probability of a drop.
        probability: f64,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// Every message is delivered twice with this probability.
    Duplicate {
        /// Probability of a second copy.
        probability: f64,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// With this probability a message is held back by up to `delay_max_ns` more.
    Reorder {
        /// Probability of an extra delay.
        probability: f64,
        /// Largest extra delay.
        delay_max_ns: u64,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// Every message to or from one of `nodes` (every message, if `nodes` is empty) takes an
    /// extra delay drawn uniformly from `0..=delay_max_ns`. Links stay FIFO: a slowed message
    /// also holds back the later messages of its link, so arrivals bunch up rather than reorder.
    Slow {
        /// The nodes whose links are slow; empty: every link.
        #[serde(default = "Vec::new")]
        nodes: Vec<N>,
        /// Largest extra delay.
        delay_max_ns: u64,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// The node's clock jumps by `delta_ns` (negative: backwards).
    ClockJump {
        /// The node.
        node: N,
        /// When.
        at_ns: u64,
        /// Jump size.
        delta_ns: i64,
    },
    /// The node's clock drift becomes `drift_ppm`.
    ClockDrift {
        /// The node.
        node: N,
        /// When.
        at_ns: u64,
        /// New drift in parts per million.
        drift_ppm: f64,
    },
}

/// A fault as a plan file writes it: nodes named by id or by role and index.
pub type FaultSpec = Fault<NodeRef>;

impl<N> Fault<N> {
    /// When the fault starts.
    pub fn at_ns(&self) -> u64 {
        match self {
            Fault::Crash { at_ns, .. }
            | Fault::Pause { at_ns, .. }
            | Fault::Partition { at_ns, .. }
            | Fault::Loss { at_ns, .. }
            | Fault::Duplicate { at_ns, .. }
            | Fault::Reorder { at_ns, .. }
            | Fault::Slow { at_ns, .. }
            | Fault::ClockJump { at_ns, .. }
            | Fault::ClockDrift { at_ns, .. } => *at_ns,
        }
    }

    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Crash { .. } => "crash",
            Fault::Pause { .. } => "pause",
            Fault::Partition { .. } => "partition",
            Fault::Loss { .. } => "loss",
            Fault::Duplicate { .. } => "duplicate",
            Fault::Reorder { .. } => "reorder",
            Fault::Slow { .. } => "slow",
            Fault::ClockJump { .. } => "clock_jump",
            Fault::ClockDrift { .. } => "clock_drift",
        }
    }

    /// Refuses a value no fault can have: a probability that is not a number (`nan` in a TOML
    /// plan), which every driver's random draw would panic on (the cluster-file fuzz target
    /// found it). A probability outside 0..=1 is clamped where it is applied.
    fn check_values(&self) -> Result<(), String> {
        match self {
            Fault::Loss { probability, .. }
            | Fault::Duplicate { probability, .. }
            | Fault::Reorder { probability, .. }
                if probability.is_nan() =>
            {
                Err("the probability is not a number".into())
            }
            _ => Ok(()),
        }
    }

    /// The same fault with every node `name` replaced by `rename(name)`; the first error stops it.
    pub fn try_map_nodes<M, E>(self, mut rename: impl FnMut(N) -> Result<M, E>) -> Result<Fault<M>, E> {
        Ok(match self {
            Fault::Crash { node, at_ns, restart_ns } => Fault::Crash { node: rename(node)?, at_ns, restart_ns },
            Fault::Pause { node, at_ns, until_ns } => Fault::Pause { node: rename(node)?, at_ns, until_ns },
            Fault::Partition { side, at_ns, until_ns } => {
                let side = side.into_iter().map(rename).collect::<Result<_, _>>()?;
                Fault::Partition { side, at_ns, until_ns }
            }
            Fault::Loss { probability, at_ns, until_ns } => Fault::Loss { probability, at_ns, until_ns },
            Fault::Duplicate { probability, at_ns, until_ns } => Fault::Duplicate { probability, at_ns, until_ns },
            Fault::Reorder { probability, delay_max_ns, at_ns, until_ns } => {
                Fault::Reorder { probability, delay_max_ns, at_ns, until_ns }
            }
            Fault::Slow { nodes, delay_max_ns, at_ns, until_ns } => {
                let nodes = nodes.into_iter().map(rename).collect::<Result<_, _>>()?;
                Fault::Slow { nodes, delay_max_ns, at_ns, until_ns }
            }
            Fault::ClockJump { node, at_ns, delta_ns } => Fault::ClockJump { node: rename(node)?, at_ns, delta_ns },
            Fault::ClockDrift { node, at_ns, drift_ppm } => Fault::ClockDrift { node: rename(node)?, at_ns, drift_ppm },
        })
    }
}

/// A resolved fault written back as a plan entry (by id), so code can build plans from ids.
impl From<Fault> for FaultSpec {
    fn from(fault: Fault) -> Self {
        let Ok(spec) = fault.try_map_nodes(|id| Ok::<_, std::convert::Infallible>(NodeRef::Id(id)));
        spec
    }
}

/// The faults of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultPlan {
    /// Draw a random plan from the seed (added to `faults`).
    pub random: bool,
    /// Draw slow-network periods from the seed (added to `faults`; `--faults random-slow` sets
    /// both this and `random`). They come from a random stream of their own, so a seed's
    /// `random` faults are the same with or without them.
    pub random_slow: bool,
    /// Draw crashes and restarts of client nodes from the seed (added to `faults`; `--faults
    /// random-clients` sets both this and `random`), from a random stream of their own like
    /// `random_slow`. A restarted client node numbers its requests from 1 again under a new client
    /// id, as a restarted gateway's do; replicas that still send results to its address (a
    /// restarted leader re-executing its log) must not have them taken for its new requests.
    /// For protocols that keep their state on disk, a power cut of every node is added too.
    pub random_clients: bool,
    /// Scheduled faults, as written (see [`FaultPlan::resolve`]).
    pub faults: Vec<FaultSpec>,
    /// Time by which every fault has healed; progress is required after it. Defaults to 60% of
    /// the run when there are faults.
    pub heal_ns: Option<u64>,
}

/// What a random plan may touch.
pub struct RandomPlanScope<'a> {
    /// Replicas of each shard.
    pub shards: &'a [Vec<u32>],
    /// Every node (replicas, other roles, clients).
    pub all_nodes: &'a [u32],
    /// Failures tolerated per shard: never more replicas of a shard down at once.
    pub f: usize,
    /// Whether a crashed replica of the protocol comes back when restarted. Under
    /// [`CrashModel::Stop`] a restarted replica stays out (it retires), so it counts as down from
    /// its first crash to the end of the run.
    pub crash_model: CrashModel,
    /// Run length.
    pub duration_ns: u64,
    /// Nodes of each extra role that may fail, with how many may be down at once.
    pub extra_roles: &'a [(Vec<u32>, usize)],
}

impl FaultPlan {
    /// The scheduled faults in plan order, each node reference turned into the node id it names
    /// in `topology`; fails on the first reference the topology lacks, saying which fault.
    pub fn resolve(&self, topology: &Topology) -> Result<Vec<Fault>, String> {
        let resolve_one = |(position, fault): (usize, &FaultSpec)| {
            let named = |error: String| format!("fault plan, fault {} ({}): {error}", position + 1, fault.name());
            fault.check_values().map_err(named)?;
            fault.clone().try_map_nodes(|node| node.resolve(topology)).map_err(named)
        };
        self.faults.iter().enumerate().map(resolve_one).collect()
    }

    /// The time after which the run must make progress again.
    pub fn heal_ns(&self, duration_ns: u64) -> u64 {
        let faulty = self.random || self.random_slow || self.random_clients || !self.faults.is_empty();
        self.heal_ns.unwrap_or(if faulty { duration_ns * 6 / 10 } else { 0 })
    }

    /// Draws faults from `rng` for the nodes in `scope`, all healed by the plan's heal time.
    pub fn draw_random(&self, rng: &mut ChaCha8Rng, scope: &RandomPlanScope) -> Vec<Fault> {
        let heal_ns = self.heal_ns(scope.duration_ns);
        let mut faults = Vec::new();
        draw_crashes(rng, scope, heal_ns, &mut faults);
        draw_pauses(rng, scope, heal_ns, &mut faults);
        draw_partitions(rng, scope, heal_ns, &mut faults);
        draw_network(rng, heal_ns, &mut faults);
        draw_clocks(rng, scope, heal_ns, &mut faults);
        // Drawn last, so a seed's replica and network faults stay those of a plan without them.
        draw_extra_role_faults(rng, scope, heal_ns, &mut faults);
        faults.sort_by_key(Fault::at_ns);
        faults
    }

    /// Draws 1–4 crashes of client nodes among `clients` from `rng`, each restarting within a
    /// tenth of the healing window and all before heal; several clients may be down at once
    /// (every one of them, as when a gateway's process restarts).
    pub fn draw_client_restarts(&self, rng: &mut ChaCha8Rng, clients: &[u32], duration_ns: u64) -> Vec<Fault> {
        let heal_ns = self.heal_ns(duration_ns);
        let mut faults: Vec<Fault> = Vec::new();
        if clients.is_empty() {
            return faults;
        }
        for _ in 0..rng.random_range(1..=4) {
            let (at_ns, restart_ns) = window(rng, heal_ns, heal_ns / 10);
            let down_all = rng.random_bool(0.3);
            let chosen: Vec<u32> =
                if down_all { clients.to_vec() } else { vec![clients[rng.random_range(0..clients.len())]] };
            for node in chosen {
                if !crash_overlaps(&faults, node, at_ns, restart_ns) {
                    faults.push(Fault::Crash { node, at_ns, restart_ns: Some(restart_ns) });
                }
            }
        }
        faults.sort_by_key(Fault::at_ns);
        faults
    }

    /// Draws a power cut from `rng`: every node of `nodes` crashes at one instant and restarts
    /// at a later one, before heal. Only for protocols whose nodes keep their state on disk
    /// (`Protocol::state_on_disk`), for which that is a failure to survive, not a loss.
    pub fn draw_power_cut(&self, rng: &mut ChaCha8Rng, nodes: &[u32], duration_ns: u64) -> Vec<Fault> {
        let heal_ns = self.heal_ns(duration_ns);
        let (at_ns, restart_ns) = window(rng, heal_ns, heal_ns / 10);
        nodes.iter().map(|&node| Fault::Crash { node, at_ns, restart_ns: Some(restart_ns) }).collect()
    }

    /// Draws 1–3 slow-network periods from `rng`, all healed by the plan's heal time: each
    /// slows every link, or the links of one replica, by up to 0.2–2 ms per message for up to a
    /// quarter of the healing window. Slow and jittery enough that a protocol timing its steps
    /// to the network (Chora's rounds, heartbeats, timeouts) sees it, never a loss.
    pub fn draw_slow_periods(&self, rng: &mut ChaCha8Rng, scope: &RandomPlanScope) -> Vec<Fault> {
        let heal_ns = self.heal_ns(scope.duration_ns);
        let mut faults = Vec::new();
        for _ in 0..rng.random_range(1..=3) {
            let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 4);
            let delay_max_ns = rng.random_range(200_000..=2_000_000);
            let nodes = if rng.random_bool(0.5) {
                Vec::new()
            } else {
                let shard = &scope.shards[rng.random_range(0..scope.shards.len())];
                vec![shard[rng.random_range(0..shard.len())]]
            };
            faults.push(Fault::Slow { nodes, delay_max_ns, at_ns, until_ns });
        }
        faults.sort_by_key(Fault::at_ns);
        faults
    }
}

/// True when `faults` already crash `node` at some time between `at_ns` and `restart_ns`.
fn crash_overlaps(faults: &[Fault], node: u32, at_ns: u64, restart_ns: u64) -> bool {
    faults.iter().any(|fault| {
        matches!(fault, Fault::Crash { node: n, at_ns: a, restart_ns: Some(r) } if *n == node && *a < restart_ns && at_ns < *r)
    })
}

fn window(rng: &mut ChaCha8Rng, heal_ns: u64, length_max_ns: u64) -> (u64, u64) {
    let start = rng.random_range(heal_ns / 20..heal_ns * 9 / 10);
    let length = rng.random_range(length_max_ns / 20..=length_max_ns.max(1));
    (start, (start + length).min(heal_ns))
}

/// Crashes replicas, each restarting before heal, never more than f of a shard down at once.
/// Under [`CrashModel::Stop`] a crashed replica is down until the end even once restarted (the
/// restart must find it retired), so at most f distinct replicas of a shard crash; the draws
/// from `rng` are the same whatever the crash model, so one seed crashes the same way where the
/// models agree.
fn draw_crashes(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    if scope.f == 0 {
        return;
    }
    for shard in scope.shards {
        let mut down: Vec<(u64, u64)> = Vec::new();
        let mut crashed: Vec<u32> = Vec::new();
        for _ in 0..rng.random_range(1..=4) {
            let node = shard[rng.random_range(0..shard.len())];
            let (at_ns, restart_ns) = window(rng, heal_ns, heal_ns / 4);
            let overlapping = down.iter().filter(|(start, end)| *start < restart_ns && at_ns < *end).count();
            let same_node = crash_overlaps(faults, node, at_ns, restart_ns);
            let within_f = match scope.crash_model {
                CrashModel::Recover => overlapping < scope.f,
                CrashModel::Stop => crashed.contains(&node) || crashed.len() < scope.f,
            };
            if within_f && !same_node {
                down.push((at_ns, restart_ns));
                if !crashed.contains(&node) {
                    crashed.push(node);
                }
                faults.push(Fault::Crash { node, at_ns, restart_ns: Some(restart_ns) });
            }
        }
        if scope.crash_model == CrashModel::Stop {
            assert!(crashed.len() <= scope.f, "at most f replicas of a crash-stop shard ever crash");
        }
    }
}

/// Crashes (each restarting before heal) and pauses of extra roles (proxies, sequencers,
/// controllers), never more of one role down at once than its budget.
fn draw_extra_role_faults(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    for (nodes, down_max) in scope.extra_roles {
        if nodes.is_empty() || *down_max == 0 {
            continue;
        }
        let mut down: Vec<(u32, u64, u64)> = Vec::new();
        for _ in 0..rng.random_range(1..=3) {
            let node = nodes[rng.random_range(0..nodes.len())];
            let (at_ns, restart_ns) = window(rng, heal_ns, heal_ns / 4);
            let overlapping: Vec<&(u32, u64, u64)> =
                down.iter().filter(|(_, start, end)| *start < restart_ns && at_ns < *end).collect();
            if overlapping.len() < *down_max && overlapping.iter().all(|(n, ..)| *n != node) {
                down.push((node, at_ns, restart_ns));
                faults.push(Fault::Crash { node, at_ns, restart_ns: Some(restart_ns) });
            }
        }
        if rng.random_bool(0.5) {
            let node = nodes[rng.random_range(0..nodes.len())];
            let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 20);
            faults.push(Fault::Pause { node, at_ns, until_ns });
        }
    }
}

fn draw_pauses(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    for _ in 0..rng.random_range(0..=2) {
        let shard = &scope.shards[rng.random_range(0..scope.shards.len())];
        let node = shard[rng.random_range(0..shard.len())];
        let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 20);
        faults.push(Fault::Pause { node, at_ns, until_ns });
    }
}

fn draw_partitions(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    for _ in 0..rng.random_range(0..=2) {
        let side: Vec<u32> = scope.all_nodes.iter().copied().filter(|_| rng.random_bool(0.3)).collect();
        if side.is_empty() {
            continue;
        }
        let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 5);
        faults.push(Fault::Partition { side, at_ns, until_ns });
    }
}

fn draw_network(rng: &mut ChaCha8Rng, heal_ns: u64, faults: &mut Vec<Fault>) {
    if rng.random_bool(0.7) {
        let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 3);
        faults.push(Fault::Loss { probability: rng.random_range(0.01..0.2), at_ns, until_ns });
    }
    if rng.random_bool(0.5) {
        let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 3);
        faults.push(Fault::Duplicate { probability: rng.random_range(0.01..0.1), at_ns, until_ns });
    }
    if rng.random_bool(0.5) {
        let (at_ns, until_ns) = window(rng, heal_ns, heal_ns / 3);
        let delay_max_ns = rng.random_range(100_000..2_000_000);
        faults.push(Fault::Reorder { probability: rng.random_range(0.05..0.5), delay_max_ns, at_ns, until_ns });
    }
}

fn draw_clocks(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    for &node in scope.all_nodes {
        if rng.random_bool(0.3) {
            let at_ns = rng.random_range(0..heal_ns);
            faults.push(Fault::ClockDrift { node, at_ns, drift_ppm: rng.random_range(-200.0..200.0) });
        }
        if rng.random_bool(0.15) {
            let at_ns = rng.random_range(0..heal_ns);
            faults.push(Fault::ClockJump { node, at_ns, delta_ns: rng.random_range(-5_000_000..5_000_000) });
        }
    }
}

#[cfg(test)]
mod tests;
