//! Faults: a plan of timed events (crashes, restarts, pauses, partitions, lossy, duplicating or
//! reordering periods, clock jumps and drift changes), written by hand in TOML or drawn from the
//! seed. Every fault of a random plan heals before `heal_ns`, so progress can be checked after.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One fault. Times are true simulated ns since the start of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The node loses its volatile state at `at_ns`; with `restart_ns` it boots again then from
    /// what it persisted.
    Crash {
        /// Node id.
        node: u32,
        /// When it crashes.
        at_ns: u64,
        /// When it restarts, if ever.
        restart_ns: Option<u64>,
    },
    /// The node stops handling inputs (they queue) from `at_ns` to `until_ns`.
    Pause {
        /// Node id.
        node: u32,
        /// Start.
        at_ns: u64,
        /// End.
        until_ns: u64,
    },
    /// Messages between `side` and every other node are dropped from `at_ns` to `until_ns`.
    Partition {
        /// One side of the cut.
        side: Vec<u32>,
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
    /// The node's clock jumps by `delta_ns` (negative: backwards).
    ClockJump {
        /// Node id.
        node: u32,
        /// When.
        at_ns: u64,
        /// Jump size.
        delta_ns: i64,
    },
    /// The node's clock drift becomes `drift_ppm`.
    ClockDrift {
        /// Node id.
        node: u32,
        /// When.
        at_ns: u64,
        /// New drift in parts per million.
        drift_ppm: f64,
    },
}

impl Fault {
    /// When the fault starts.
    pub fn at_ns(&self) -> u64 {
        match self {
            Fault::Crash { at_ns, .. }
            | Fault::Pause { at_ns, .. }
            | Fault::Partition { at_ns, .. }
            | Fault::Loss { at_ns, .. }
            | Fault::Duplicate { at_ns, .. }
            | Fault::Reorder { at_ns, .. }
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
            Fault::ClockJump { .. } => "clock_jump",
            Fault::ClockDrift { .. } => "clock_drift",
        }
    }
}

/// The faults of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultPlan {
    /// Draw a random plan from the seed (added to `faults`).
    pub random: bool,
    /// Scheduled faults.
    pub faults: Vec<Fault>,
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
    /// Run length.
    pub duration_ns: u64,
}

impl FaultPlan {
    /// The time after which the run must make progress again.
    pub fn heal_ns(&self, duration_ns: u64) -> u64 {
        self.heal_ns.unwrap_or(if self.random || !self.faults.is_empty() { duration_ns * 6 / 10 } else { 0 })
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
        faults.sort_by_key(Fault::at_ns);
        faults
    }
}

fn window(rng: &mut ChaCha8Rng, heal_ns: u64, length_max_ns: u64) -> (u64, u64) {
    let start = rng.random_range(heal_ns / 20..heal_ns * 9 / 10);
    let length = rng.random_range(length_max_ns / 20..=length_max_ns.max(1));
    (start, (start + length).min(heal_ns))
}

/// Crashes replicas, never more than f of a shard down at once, each restarting before heal.
fn draw_crashes(rng: &mut ChaCha8Rng, scope: &RandomPlanScope, heal_ns: u64, faults: &mut Vec<Fault>) {
    if scope.f == 0 {
        return;
    }
    for shard in scope.shards {
        let mut down: Vec<(u64, u64)> = Vec::new();
        for _ in 0..rng.random_range(1..=4) {
            let node = shard[rng.random_range(0..shard.len())];
            let (at_ns, restart_ns) = window(rng, heal_ns, heal_ns / 4);
            let overlapping = down.iter().filter(|(start, end)| *start < restart_ns && at_ns < *end).count();
            let same_node = faults.iter().any(|fault| {
                matches!(fault, Fault::Crash { node: n, at_ns: a, restart_ns: Some(r) } if *n == node && *a < restart_ns && at_ns < *r)
            });
            if overlapping < scope.f && !same_node {
                down.push((at_ns, restart_ns));
                faults.push(Fault::Crash { node, at_ns, restart_ns: Some(restart_ns) });
            }
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
