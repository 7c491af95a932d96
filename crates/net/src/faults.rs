//! The transport's fault shim, driven by the simulator's [`FaultPlan`] type. Times in the plan
//! count from the process's start. Network faults (partition, loss, duplication, reordering
//! and slow-period delays) apply to each outgoing datagram; node faults (crash, pause, clock jump and drift)
//! apply to the nodes this process hosts. A plan that names nodes by role (`node = "replica:0"`)
//! is resolved against the cluster's topology when the shim is built.

use crate::config::ConfigError;
use ordo_core::Topology;
use ordo_sim::{Fault, FaultPlan};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What to do with one outgoing datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drop it (partition or loss).
    Drop,
    /// Send `copies` copies (1 or 2), the first after `delay_ns` (0: now).
    Send {
        /// 1, or 2 when duplicated.
        copies: u8,
        /// Extra delay (reordering).
        delay_ns: u64,
    },
}

/// A node fault that is due.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeFault {
    /// Stop the process now (the harness restarts it if the plan says so).
    Crash,
    /// Stop reading input until this many ns after start.
    Pause(u64),
    /// Jump the clock.
    ClockJump(i64),
    /// Set the clock's drift.
    ClockDrift(f64),
}

/// The shim's state.
pub struct FaultShim {
    faults: Vec<Fault>,
    node_faults_done: Vec<bool>,
    rng: ChaCha8Rng,
    /// Counters: dropped by partition, dropped by loss, duplicated, delayed.
    pub counts: [u64; 4],
}

impl FaultShim {
    /// A shim for the plan, its node references resolved against `topology` (random plans are
    /// not drawn in the runtime: faults are listed). Fails on a reference to a node the cluster
    /// lacks.
    pub fn new(plan: &FaultPlan, topology: &Topology, seed: u64) -> Result<Self, ConfigError> {
        let faults = plan.resolve(topology).map_err(ConfigError::Invalid)?;
        Ok(FaultShim {
            node_faults_done: vec![false; faults.len()],
            faults,
            rng: ChaCha8Rng::seed_from_u64(seed),
            counts: [0; 4],
        })
    }

    /// True when there is nothing to inject.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// True when some fault acts on datagrams (partition, loss, duplication, reordering), so
    /// that the host must decide each datagram's fate per link.
    pub fn has_network_faults(&self) -> bool {
        self.faults.iter().any(|fault| {
            matches!(
                fault,
                Fault::Partition { .. }
                    | Fault::Loss { .. }
                    | Fault::Duplicate { .. }
                    | Fault::Reorder { .. }
                    | Fault::Slow { .. }
            )
        })
    }

    /// Decides the fate of a datagram from node `from` to node `to`, `elapsed_ns` after start.
    pub fn decide(&mut self, elapsed_ns: u64, from: u32, to: u32) -> Verdict {
        let mut loss: f64 = 0.0;
        let mut duplicate: f64 = 0.0;
        let mut delay_ns = 0;
        for fault in &self.faults {
            match fault {
                Fault::Partition { side, at_ns, until_ns }
                    if (*at_ns..*until_ns).contains(&elapsed_ns) && side.contains(&from) != side.contains(&to) =>
                {
                    self.counts[0] += 1;
                    return Verdict::Drop;
                }
                Fault::Loss { probability, at_ns, until_ns } if (*at_ns..*until_ns).contains(&elapsed_ns) => {
                    loss = loss.max(probability.clamp(0.0, 1.0));
                }
                Fault::Duplicate { probability, at_ns, until_ns } if (*at_ns..*until_ns).contains(&elapsed_ns) => {
                    duplicate = duplicate.max(probability.clamp(0.0, 1.0));
                }
                Fault::Reorder { probability, delay_max_ns, at_ns, until_ns }
                    if (*at_ns..*until_ns).contains(&elapsed_ns)
                        && self.rng.random_bool(probability.clamp(0.0, 1.0)) =>
                {
                    delay_ns = delay_ns.max(self.rng.random_range(0..(*delay_max_ns).max(1)));
                }
                // Over UDP a delayed datagram may overtake later ones: the runtime's slow period
                // delays each datagram alone, it does not keep the simulator's link order.
                Fault::Slow { nodes, delay_max_ns, at_ns, until_ns }
                    if (*at_ns..*until_ns).contains(&elapsed_ns)
                        && (nodes.is_empty() || nodes.contains(&from) || nodes.contains(&to)) =>
                {
                    delay_ns = delay_ns.max(self.rng.random_range(0..=*delay_max_ns));
                }
                _ => {}
            }
        }
        if loss > 0.0 && self.rng.random_bool(loss) {
            self.counts[1] += 1;
            return Verdict::Drop;
        }
        let copies = if duplicate > 0.0 && self.rng.random_bool(duplicate) {
            self.counts[2] += 1;
            2
        } else {
            1
        };
        if delay_ns > 0 {
            self.counts[3] += 1;
        }
        Verdict::Send { copies, delay_ns }
    }

    /// Node faults for `node` that became due by `elapsed_ns`, each returned once.
    pub fn due_node_faults(&mut self, elapsed_ns: u64, node: u32) -> Vec<NodeFault> {
        let mut due = Vec::new();
        for (index, fault) in self.faults.iter().enumerate() {
            if self.node_faults_done[index] || fault.at_ns() > elapsed_ns {
                continue;
            }
            let hit = match fault {
                Fault::Crash { node: n, .. } if *n == node => Some(NodeFault::Crash),
                Fault::Pause { node: n, until_ns, .. } if *n == node => Some(NodeFault::Pause(*until_ns)),
                Fault::ClockJump { node: n, delta_ns, .. } if *n == node => Some(NodeFault::ClockJump(*delta_ns)),
                Fault::ClockDrift { node: n, drift_ppm, .. } if *n == node => Some(NodeFault::ClockDrift(*drift_ppm)),
                _ => None,
            };
            if let Some(hit) = hit {
                self.node_faults_done[index] = true;
                due.push(hit);
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three replicas (ids 0–2) and two clients (3, 4).
    fn topology() -> Topology {
        use ordo_core::{NodeId, NodeSpec, Role};
        let nodes = (0..5)
            .map(|id| {
                let (role, shard) = if id < 3 { (Role::Replica, Some(0)) } else { (Role::Client, None) };
                NodeSpec { id: NodeId(id), role, site: 0, shard, machine: None }
            })
            .collect();
        let shards = vec![(0..3).map(NodeId).collect()];
        Topology { nodes, shards, f: 1, sites: vec!["lan".to_string()], site_delay_ns: vec![vec![0]] }
    }

    #[test]
    fn partitions_cut_only_across_sides_and_loss_is_probabilistic() {
        // Goal: the shim reads the simulator's plan type the simulator's way.
        let plan = FaultPlan {
            faults: vec![
                Fault::Partition { side: vec![0.into()], at_ns: 0, until_ns: 100 },
                Fault::Loss { probability: 0.5, at_ns: 200, until_ns: 10_000 },
                Fault::ClockJump { node: 1.into(), at_ns: 50, delta_ns: -7 },
            ],
            ..Default::default()
        };
        let mut shim = FaultShim::new(&plan, &topology(), 1).expect("the plan fits the cluster");
        assert!(shim.has_network_faults());
        assert!(!FaultShim::new(&FaultPlan::default(), &topology(), 1).expect("empty").has_network_faults());
        assert_eq!(shim.decide(10, 0, 1), Verdict::Drop);
        assert_eq!(shim.decide(10, 1, 2), Verdict::Send { copies: 1, delay_ns: 0 });
        assert_eq!(shim.decide(150, 0, 1), Verdict::Send { copies: 1, delay_ns: 0 });
        let dropped = (0..1_000).filter(|_| shim.decide(300, 1, 2) == Verdict::Drop).count();
        assert!((350..650).contains(&dropped), "{dropped}");
        assert!(shim.due_node_faults(10, 1).is_empty());
        assert_eq!(shim.due_node_faults(60, 1), vec![NodeFault::ClockJump(-7)]);
        assert!(shim.due_node_faults(70, 1).is_empty());
    }

    #[test]
    fn a_slow_period_delays_only_the_links_it_covers_while_it_lasts() {
        // Goal: the runtime applies a slow period as the simulator does: a delay up to
        // `delay_max_ns` on every datagram to or from the named node, none elsewhere or after.
        // Method: a slow period on replica 0's links from 0 to 100 ns; decide many datagrams.
        let slow = Fault::Slow { nodes: vec![0.into()], delay_max_ns: 1_000, at_ns: 0, until_ns: 100 };
        let plan = FaultPlan { faults: vec![slow], ..Default::default() };
        let mut shim = FaultShim::new(&plan, &topology(), 1).expect("the plan fits the cluster");
        assert!(shim.has_network_faults());
        let delays: Vec<u64> = (0..1_000)
            .map(|i| match shim.decide(50, i % 2, 1 - i % 2) {
                Verdict::Send { copies: 1, delay_ns } => delay_ns,
                verdict => panic!("a slow period neither drops nor copies: {verdict:?}"),
            })
            .collect();
        assert!(delays.iter().all(|&delay| delay <= 1_000), "{delays:?}");
        assert!(delays.iter().filter(|&&delay| delay > 500).count() > 300, "delays spread up to the maximum");
        assert_eq!(shim.decide(50, 1, 2), Verdict::Send { copies: 1, delay_ns: 0 }, "another link");
        assert_eq!(shim.decide(150, 0, 1), Verdict::Send { copies: 1, delay_ns: 0 }, "after the period");
    }

    #[test]
    fn a_plan_naming_nodes_by_role_resolves_against_the_clusters_topology() {
        // Goal: the runtime reads role references the simulator's way, and refuses one the
        // cluster lacks before it runs. Method: a cluster-file fault table naming `replica:1`
        // and `client:0`, then one naming `replica:3` of a three-replica cluster.
        let plan: FaultPlan = toml::from_str(
            "[[faults]]\nkind = \"partition\"\nside = [\"client:0\"]\nat_ns = 0\nuntil_ns = 100\n\
             [[faults]]\nkind = \"clock_drift\"\nnode = \"replica:1\"\nat_ns = 10\ndrift_ppm = 50.0\n",
        )
        .expect("the plan parses");
        let mut shim = FaultShim::new(&plan, &topology(), 1).expect("the plan fits the cluster");
        assert_eq!(shim.decide(5, 3, 0), Verdict::Drop);
        assert_eq!(shim.decide(5, 4, 0), Verdict::Send { copies: 1, delay_ns: 0 });
        assert!(shim.due_node_faults(20, 0).is_empty());
        assert_eq!(shim.due_node_faults(20, 1), vec![NodeFault::ClockDrift(50.0)]);
        let plan: FaultPlan =
            toml::from_str("[[faults]]\nkind = \"crash\"\nnode = \"replica:3\"\nat_ns = 1\n").expect("the plan parses");
        let error = FaultShim::new(&plan, &topology(), 1).err().expect("no fourth replica").to_string();
        assert!(error.ends_with("the plan names replica:3 but shard 0 has 3 replicas"), "{error}");
    }
}
