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
            fault.clone().try_map_nodes(|node| node.resolve(topology)).map_err(named)
        };
        self.faults.iter().enumerate().map(resolve_one).collect()
    }

    /// The time after which the run must make progress again.
    pub fn heal_ns(&self, duration_ns: u64) -> u64 {
        let faulty = self.random || self.random_slow || !self.faults.is_empty();
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
            let same_node = faults.iter().any(|fault| {
                matches!(fault, Fault::Crash { node: n, at_ns: a, restart_ns: Some(r) } if *n == node && *a < restart_ns && at_ns < *r)
            });
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
mod tests {
    use super::*;
    use ordo_core::Role;
    use rand::SeedableRng;

    const SHARDS: [&[u32]; 2] = [&[0, 1, 2], &[3, 4, 5, 6, 7]];

    /// The random plan of `seed` for two shards (3 and 5 replicas) and four clients.
    fn plan(seed: u64, f: usize, crash_model: CrashModel) -> Vec<Fault> {
        let shards: Vec<Vec<u32>> = SHARDS.iter().map(|shard| shard.to_vec()).collect();
        let all_nodes: Vec<u32> = (0..12).collect();
        let scope = RandomPlanScope {
            shards: &shards,
            all_nodes: &all_nodes,
            f,
            crash_model,
            duration_ns: 2_000_000_000,
            extra_roles: &[],
        };
        FaultPlan { random: true, ..FaultPlan::default() }.draw_random(&mut ChaCha8Rng::seed_from_u64(seed), &scope)
    }

    fn crashes(plan: &[Fault]) -> impl Iterator<Item = (u32, u64, Option<u64>)> + '_ {
        plan.iter().filter_map(|fault| match *fault {
            Fault::Crash { node, at_ns, restart_ns } => Some((node, at_ns, restart_ns)),
            _ => None,
        })
    }

    #[test]
    fn crash_stop_plans_crash_at_most_f_distinct_replicas_per_shard_and_restart_them() {
        // Goal: under `CrashModel::Stop` a restarted replica stays out (it retires), so a random
        // plan must never crash more than f distinct replicas of a shard over the whole run, or
        // more than f would be down for good and progress after healing could not be required;
        // and it keeps the restarts, so that campaigns exercise the retirement. Method: 600
        // plans (f = 1 and 2, seeds 1–300); count distinct crashed replicas per shard; check
        // that every crash restarts before heal and that some plans crash a replica twice or
        // crash f distinct replicas of a shard (so the bound is reached, not vacuous).
        let (mut at_the_bound, mut crashed_twice, mut restarts) = (0, 0, 0);
        for seed in 1..=300 {
            for f in 1..=2 {
                let plan = plan(seed, f, CrashModel::Stop);
                for shard in SHARDS {
                    let in_shard: Vec<u32> =
                        crashes(&plan).map(|(node, _, _)| node).filter(|node| shard.contains(node)).collect();
                    let mut distinct = in_shard.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    assert!(distinct.len() <= f, "seed {seed} f {f}: {distinct:?} crash in shard {shard:?}");
                    at_the_bound += usize::from(distinct.len() == f);
                    crashed_twice += usize::from(in_shard.len() > distinct.len());
                }
                for (node, at_ns, restart_ns) in crashes(&plan) {
                    let restart_ns = restart_ns.expect("every crash of a random plan restarts");
                    assert!(at_ns < restart_ns, "seed {seed}: node {node} restarts after it crashes");
                    assert!(restart_ns <= 1_200_000_000, "seed {seed}: node {node} restarts before heal");
                    restarts += 1;
                }
            }
        }
        assert!(at_the_bound > 100, "plans reach f crashed replicas ({at_the_bound} shards)");
        assert!(crashed_twice > 10, "plans crash a retired replica again ({crashed_twice} shards)");
        assert!(restarts > 600, "plans restart crashed replicas ({restarts} restarts)");
    }

    #[test]
    fn a_recovering_protocols_plans_are_unchanged() {
        // Goal: the crash-stop rule must not move the plans of protocols whose replicas recover
        // (Nezha, Multi-Paxos...): one seed, one world, before and after. Method: a fingerprint
        // (FNV-1a of the JSON) of 600 plans (f = 1 and 2, seeds 1–300) under
        // `CrashModel::Recover`, compared with the one printed by the code before crash models
        // reached the plan (commit dd087c5); and under either model a seed draws the same faults
        // other than crashes (the crash rule consumes no randomness of its own).
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for seed in 1..=300 {
            for f in 1..=2 {
                let recover = plan(seed, f, CrashModel::Recover);
                for byte in serde_json::to_string(&recover).expect("a plan serializes").bytes() {
                    hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
                }
                let others = |plan: Vec<Fault>| -> Vec<Fault> {
                    plan.into_iter().filter(|fault| !matches!(fault, Fault::Crash { .. })).collect()
                };
                assert_eq!(others(recover), others(plan(seed, f, CrashModel::Stop)), "seed {seed} f {f}");
            }
        }
        assert_eq!(hash, 0x0ce6_32ca_ec83_9762, "the plans of recovering protocols moved");
    }

    #[test]
    fn slow_periods_heal_in_time_and_slow_every_link_or_one_replicas() {
        // Goal: the slow-network periods of `--faults random-slow` keep the random plans'
        // contract (every fault heals before heal time) and cover both shapes they promise (every
        // link; one replica's links) with delays in the stated range; a seed's `random` faults are
        // not drawn from the same stream, so they cannot move. Method: 300 seeds' periods for two
        // shards; check counts, windows, delays and nodes; count the shapes.
        let shards: Vec<Vec<u32>> = SHARDS.iter().map(|shard| shard.to_vec()).collect();
        let scope = RandomPlanScope {
            shards: &shards,
            all_nodes: &[],
            f: 1,
            crash_model: CrashModel::Recover,
            duration_ns: 2_000_000_000,
            extra_roles: &[],
        };
        let plan = FaultPlan { random: true, random_slow: true, ..FaultPlan::default() };
        let (mut everywhere, mut one_replica) = (0, 0);
        for seed in 1..=300 {
            let periods = plan.draw_slow_periods(&mut ChaCha8Rng::seed_from_u64(seed), &scope);
            assert!((1..=3).contains(&periods.len()), "seed {seed}: {} periods", periods.len());
            for period in periods {
                let Fault::Slow { nodes, delay_max_ns, at_ns, until_ns } = period else {
                    panic!("seed {seed}: only slow periods, got {period:?}");
                };
                assert!(at_ns < until_ns && until_ns <= 1_200_000_000, "seed {seed}: heals before heal time");
                assert!((200_000..=2_000_000).contains(&delay_max_ns), "seed {seed}: {delay_max_ns} ns");
                match nodes.as_slice() {
                    [] => everywhere += 1,
                    [node] => {
                        assert!(shards.iter().flatten().any(|replica| replica == node), "seed {seed}: a replica");
                        one_replica += 1;
                    }
                    _ => panic!("seed {seed}: at most one node, got {nodes:?}"),
                }
            }
        }
        assert!(everywhere > 100 && one_replica > 100, "both shapes: {everywhere} and {one_replica}");
        assert_eq!(plan.heal_ns(1_000), 600, "slow periods alone also set a heal time");
        let only_slow = FaultPlan { random_slow: true, ..FaultPlan::default() };
        assert_eq!(only_slow.heal_ns(1_000), 600, "without `random` too");
    }

    #[test]
    fn a_slow_period_reads_from_a_plan_with_or_without_nodes() {
        // Goal: a hand-written plan can slow every link (no `nodes`) or named nodes' links.
        // Method: parse both forms and resolve them.
        let plan: FaultPlan = toml::from_str(
            r#"
            [[faults]]
            kind = "slow"
            delay_max_ns = 500000
            at_ns = 10
            until_ns = 20
            [[faults]]
            kind = "slow"
            nodes = ["replica:1", 4]
            delay_max_ns = 100
            at_ns = 30
            until_ns = 40
            "#,
        )
        .expect("the plan parses");
        let resolved = plan.resolve(&topology()).expect("every reference exists");
        assert_eq!(
            resolved,
            vec![
                Fault::Slow { nodes: vec![], delay_max_ns: 500_000, at_ns: 10, until_ns: 20 },
                Fault::Slow { nodes: vec![1, 4], delay_max_ns: 100, at_ns: 30, until_ns: 40 },
            ]
        );
        assert_eq!(resolved[1].name(), "slow");
    }

    /// Two shards of 3 replicas (ids 0–5), 3 proxies (6–8), a sequencer (9) and 2 clients (10, 11).
    fn topology() -> Topology {
        use ordo_core::{NodeId, NodeSpec};
        let counts = [(Role::Replica, 6), (Role::Proxy, 3), (Role::Sequencer, 1), (Role::Client, 2)];
        let roles: Vec<Role> = counts.iter().flat_map(|&(role, count)| vec![role; count]).collect();
        let nodes = roles
            .iter()
            .enumerate()
            .map(|(id, &role)| {
                let shard = (role == Role::Replica).then_some(id / 3);
                NodeSpec { id: NodeId(id as u32), role, site: 0, shard, machine: None }
            })
            .collect();
        let shards = vec![(0..3).map(NodeId).collect(), (3..6).map(NodeId).collect()];
        Topology { nodes, shards, f: 1, sites: vec!["lan".to_string()], site_delay_ns: vec![vec![0]] }
    }

    fn parse(text: &str) -> Result<NodeRef, String> {
        text.parse()
    }

    fn role(role: Role, shard: Option<usize>, index: usize) -> NodeRef {
        NodeRef::Role { role, shard, index }
    }

    #[test]
    fn node_references_parse_by_role_and_index_and_print_back() {
        // Goal: every form the plan syntax promises reads as meant and prints in the form it
        // reads. Method: parse each form, compare with the expected reference, print it again.
        let cases = [
            ("proxy:2", role(Role::Proxy, None, 2), "proxy:2"),
            ("sequencer", role(Role::Sequencer, None, 0), "sequencer:0"),
            ("controller:0", role(Role::Controller, None, 0), "controller:0"),
            ("client:5", role(Role::Client, None, 5), "client:5"),
            ("replica:1", role(Role::Replica, None, 1), "replica:1"),
            ("shard1/replica:0", role(Role::Replica, Some(1), 0), "shard1/replica:0"),
            ("3", NodeRef::Id(3), "3"),
        ];
        for (text, expected, printed) in cases {
            let parsed = parse(text).unwrap_or_else(|error| panic!("{text}: {error}"));
            assert_eq!(parsed, expected, "{text}");
            assert_eq!(parsed.to_string(), printed, "{text}");
            assert_eq!(parse(printed), Ok(expected), "{printed} reads back");
        }
    }

    #[test]
    fn malformed_references_and_unknown_roles_are_refused_with_the_reason() {
        // Goal: a typo in a plan is an error that says what is wrong, never a silently different
        // node. Method: parse bad strings; check each error names the problem.
        for text in ["", "proxy:", "proxy:x", "proxy:1:2", ":1", "proxy:-1", "shard/replica:0", "shardx/replica:0"] {
            let error = parse(text).expect_err(text);
            assert!(error.starts_with("malformed node reference"), "{text}: {error}");
            assert!(error.contains("ROLE:INDEX") && error.contains("proxy"), "{text}: {error}");
        }
        let error = parse("leader:0").expect_err("unknown role");
        assert!(error.contains("unknown role \"leader\""), "{error}");
        assert!(error.contains("replica, client, proxy, sequencer, controller"), "{error}");
        let error = parse("Proxy:1").expect_err("roles are lower case");
        assert!(error.contains("unknown role \"Proxy\""), "{error}");
        let error = parse("shard1/proxy:0").expect_err("proxies have no shard");
        assert!(error.contains("only replicas belong to a shard"), "{error}");
    }

    #[test]
    fn a_plan_file_names_nodes_by_id_or_by_role_and_resolves_against_the_topology() {
        // Goal: numeric ids keep working next to role references, in node fields and partition
        // sides, and resolve to the ids the topology gives them. Method: read a TOML plan with
        // both forms, resolve it against a two-shard topology with proxies and a sequencer.
        let plan: FaultPlan = toml::from_str(
            r#"
            [[faults]]
            kind = "crash"
            node = "proxy:0"
            at_ns = 10
            [[faults]]
            kind = "pause"
            node = 4
            at_ns = 20
            until_ns = 30
            [[faults]]
            kind = "partition"
            side = [1, "shard1/replica:2", "sequencer", "client:1"]
            at_ns = 40
            until_ns = 50
            [[faults]]
            kind = "clock_jump"
            node = "replica:2"
            at_ns = 60
            delta_ns = -5
            "#,
        )
        .expect("the plan parses");
        assert_eq!(plan.faults[0], Fault::Crash { node: role(Role::Proxy, None, 0), at_ns: 10, restart_ns: None });
        let resolved = plan.resolve(&topology()).expect("every reference exists");
        assert_eq!(
            resolved,
            vec![
                Fault::Crash { node: 6, at_ns: 10, restart_ns: None },
                Fault::Pause { node: 4, at_ns: 20, until_ns: 30 },
                Fault::Partition { side: vec![1, 5, 9, 11], at_ns: 40, until_ns: 50 },
                Fault::ClockJump { node: 2, at_ns: 60, delta_ns: -5 },
            ]
        );
        let written = toml::to_string(&plan).expect("a plan serializes");
        assert_eq!(toml::from_str::<FaultPlan>(&written).expect("and reads back"), plan, "{written}");
        let by_id = FaultPlan { faults: resolved.into_iter().map(FaultSpec::from).collect(), ..FaultPlan::default() };
        assert_eq!(by_id.resolve(&topology()), plan.resolve(&topology()), "resolved faults are plans by id");
    }

    #[test]
    fn references_to_nodes_the_cluster_lacks_are_refused_naming_the_fault() {
        // Goal: an index beyond a role's nodes (or a shard, or a node id, beyond the cluster) is
        // a configuration error that says what the cluster has, not a fault that never fires.
        // Method: resolve one-fault plans with out-of-range references; read the errors.
        let topology = topology();
        let crash = |node: &str| -> String {
            let text = format!("[[faults]]\nkind = \"crash\"\nnode = {node}\nat_ns = 1\n");
            let plan: FaultPlan = toml::from_str(&text).expect("the plan parses");
            plan.resolve(&topology).expect_err(node)
        };
        assert_eq!(
            crash("\"proxy:5\""),
            "fault plan, fault 1 (crash): the plan names proxy:5 but the cluster has 3 proxies"
        );
        assert!(crash("\"sequencer:1\"").ends_with("the cluster has 1 sequencer"));
        assert!(crash("\"controller\"").ends_with("the plan names controller:0 but the cluster has 0 controllers"));
        assert!(crash("\"replica:3\"").ends_with("the plan names replica:3 but shard 0 has 3 replicas"));
        assert!(crash("\"shard2/replica:0\"").ends_with("but the cluster has 2 shard(s)"));
        assert!(crash("\"client:2\"").ends_with("the cluster has 2 clients"));
        assert!(crash("12").ends_with("the plan names node 12 but the cluster has 12 nodes"));
        let negative = toml::from_str::<FaultPlan>("[[faults]]\nkind = \"crash\"\nnode = -1\nat_ns = 1\n");
        assert!(negative.expect_err("negative id").to_string().contains("node id -1 is negative"));
        let unknown = toml::from_str::<FaultPlan>("[[faults]]\nkind = \"crash\"\nnode = \"leader\"\nat_ns = 1\n");
        assert!(unknown.expect_err("unknown role").to_string().contains("unknown role \"leader\""));
    }
}
