//! The transport's fault shim, driven by the simulator's [`FaultPlan`] type. Times in the plan
//! count from the process's start. Network faults (partition, loss, duplication, reordering
//! delay) apply to each outgoing datagram; node faults (crash, pause, clock jump and drift)
//! apply to the nodes this process hosts.

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
    /// A shim for the plan (random plans are not drawn in the runtime: faults are listed).
    pub fn new(plan: &FaultPlan, seed: u64) -> Self {
        FaultShim {
            node_faults_done: vec![false; plan.faults.len()],
            faults: plan.faults.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            counts: [0; 4],
        }
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
                Fault::Partition { .. } | Fault::Loss { .. } | Fault::Duplicate { .. } | Fault::Reorder { .. }
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

    #[test]
    fn partitions_cut_only_across_sides_and_loss_is_probabilistic() {
        // Goal: the shim reads the simulator's plan type the simulator's way.
        let plan = FaultPlan {
            faults: vec![
                Fault::Partition { side: vec![0], at_ns: 0, until_ns: 100 },
                Fault::Loss { probability: 0.5, at_ns: 200, until_ns: 10_000 },
                Fault::ClockJump { node: 1, at_ns: 50, delta_ns: -7 },
            ],
            ..Default::default()
        };
        let mut shim = FaultShim::new(&plan, 1);
        assert!(shim.has_network_faults());
        assert!(!FaultShim::new(&FaultPlan::default(), 1).has_network_faults());
        assert_eq!(shim.decide(10, 0, 1), Verdict::Drop);
        assert_eq!(shim.decide(10, 1, 2), Verdict::Send { copies: 1, delay_ns: 0 });
        assert_eq!(shim.decide(150, 0, 1), Verdict::Send { copies: 1, delay_ns: 0 });
        let dropped = (0..1_000).filter(|_| shim.decide(300, 1, 2) == Verdict::Drop).count();
        assert!((350..650).contains(&dropped), "{dropped}");
        assert!(shim.due_node_faults(10, 1).is_empty());
        assert_eq!(shim.due_node_faults(60, 1), vec![NodeFault::ClockJump(-7)]);
        assert!(shim.due_node_faults(70, 1).is_empty());
    }
}
