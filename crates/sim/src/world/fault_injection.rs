//! Fault injection: the plan (scheduled and drawn from the seed), starting and healing each
//! fault, and the per-role failure budgets a random plan keeps to.

use super::*;

impl<P: Protocol> World<P> {
    /// Resolves the plan's node references against the topology (a reference to a node the
    /// cluster lacks is a configuration error), draws the random plan and schedules every fault.
    pub(super) fn plan_faults(&mut self) -> Result<(), String> {
        let mut faults = self.config.faults.resolve(&self.topology)?;
        let shards: Vec<Vec<u32>> = self.topology.shards.iter().map(|s| s.iter().map(|n| n.0).collect()).collect();
        if self.config.faults.random {
            let all_nodes: Vec<u32> = self.topology.nodes.iter().map(|n| n.id.0).collect();
            let extra_roles = self.extra_role_budgets();
            let scope = RandomPlanScope {
                shards: &shards,
                all_nodes: &all_nodes,
                f: self.config.f(),
                crash_model: P::crash_model(),
                duration_ns: self.config.duration_ns,
                extra_roles: &extra_roles,
            };
            let mut rng = stream(self.config.seed, 4);
            self.random_faults_from = faults.len();
            faults.extend(self.config.faults.draw_random(&mut rng, &scope));
            // The durable-write latency is part of the world drawn from the seed, so that crashes
            // land between a write and the sends that wait for it.
            self.config.persist_ns = [0, 5_000, 50_000][rng.random_range(0..3)];
        }
        if self.config.faults.random_slow {
            let scope = RandomPlanScope {
                shards: &shards,
                all_nodes: &[],
                f: self.config.f(),
                crash_model: P::crash_model(),
                duration_ns: self.config.duration_ns,
                extra_roles: &[],
            };
            // A stream of its own: the seed's other faults and its write latency stay those of
            // `random` alone, so a failure here can be compared with the same seed without them.
            let slow = self.config.faults.draw_slow_periods(&mut stream(self.config.seed, 5), &scope);
            faults.extend(slow);
        }
        if self.config.faults.random_clients {
            let clients: Vec<u32> = self.topology.with_role(Role::Client).map(|n| n.0).collect();
            // A stream of its own, as for slow periods: the seed's other faults stay the same.
            let mut rng = stream(self.config.seed, 6);
            let restarts = self.config.faults.draw_client_restarts(&mut rng, &clients, self.config.duration_ns);
            faults.extend(restarts);
            if P::state_on_disk_with(&self.protocol_config) {
                // A power cut: every replica and client at once. Placed with the scheduled
                // faults, which no failure budget holds back.
                let all: Vec<u32> = self.topology.nodes.iter().map(|n| n.id.0).collect();
                let cut = self.config.faults.draw_power_cut(&mut rng, &all, self.config.duration_ns);
                self.random_faults_from = self.random_faults_from.saturating_add(cut.len());
                faults.splice(0..0, cut);
            }
        }
        for (index, fault) in faults.iter().enumerate() {
            *self.outcome.fault_counts.entry(fault.name().to_string()).or_default() += 1;
            self.schedule(fault.at_ns(), Event::Fault(index));
        }
        self.faults = faults;
        let checks = 10;
        for i in 1..checks {
            self.schedule(self.config.duration_ns * i / checks, Event::AgreementCheck);
        }
        Ok(())
    }

    /// The nodes of each extra role a random plan may fail, with how many may be down at once.
    pub(super) fn extra_role_budgets(&self) -> Vec<(Vec<u32>, usize)> {
        let mut roles: Vec<Role> = self.topology.nodes.iter().map(|n| n.role).collect();
        roles.sort();
        roles.dedup();
        roles
            .into_iter()
            .filter(|role| !matches!(role, Role::Replica | Role::Client))
            .map(|role| {
                let nodes: Vec<u32> = self.topology.with_role(role).map(|n| n.0).collect();
                let down_max = match P::failure_budget(role) {
                    FailureBudget::Never => 0,
                    FailureBudget::AtMost(count) => count.min(nodes.len()),
                    FailureBudget::Any => nodes.len(),
                };
                (nodes, down_max)
            })
            .collect()
    }

    pub(super) fn start_fault(&mut self, index: usize) {
        let node_count = self.nodes.len();
        match self.faults[index].clone() {
            Fault::Crash { node, restart_ns, .. } => {
                if index >= self.random_faults_from && self.would_exceed_budget(NodeId(node)) {
                    *self.outcome.fault_counts.entry("crash_skipped".to_string()).or_default() += 1;
                    return;
                }
                self.crash(NodeId(node));
                if let Some(at) = restart_ns {
                    self.schedule(at.max(self.now), Event::Heal(index));
                }
            }
            Fault::Pause { node, until_ns, .. } => {
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.paused_until = slot.paused_until.max(until_ns);
                }
            }
            Fault::Partition { side, until_ns, .. } => {
                let mut mask = vec![false; node_count];
                side.iter().filter(|&&n| (n as usize) < node_count).for_each(|&n| mask[n as usize] = true);
                self.network_faults.partitions.push((index, mask));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Loss { probability, until_ns, .. } => {
                self.network_faults.loss.push((index, probability.clamp(0.0, 1.0)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Duplicate { probability, until_ns, .. } => {
                self.network_faults.duplicate.push((index, probability.clamp(0.0, 1.0)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Reorder { probability, delay_max_ns, until_ns, .. } => {
                self.network_faults.reorder.push((index, probability.clamp(0.0, 1.0), delay_max_ns.max(1)));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::Slow { nodes, delay_max_ns, until_ns, .. } => {
                let mask = (!nodes.is_empty()).then(|| {
                    let mut mask = vec![false; node_count];
                    nodes.iter().filter(|&&n| (n as usize) < node_count).for_each(|&n| mask[n as usize] = true);
                    mask
                });
                self.network_faults.slow.push((index, mask, delay_max_ns));
                self.schedule(until_ns, Event::Heal(index));
            }
            Fault::ClockJump { node, delta_ns, .. } => {
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.clock.jump(delta_ns);
                }
            }
            Fault::ClockDrift { node, drift_ppm, .. } => {
                let now = self.now;
                if let Some(slot) = self.nodes.get_mut(node as usize) {
                    slot.clock.set_drift(now, drift_ppm);
                }
            }
        }
    }

    pub(super) fn heal_fault(&mut self, index: usize) {
        if let Fault::Crash { node, .. } = self.faults[index] {
            let id = NodeId(node);
            if self.nodes.get(id.index()).is_some_and(|slot| !slot.is_up()) {
                self.boot(id);
                if self.nodes[id.index()].spec.role == Role::Client {
                    self.on_client_node_boot(id);
                }
            }
            return;
        }
        let faults = &mut self.network_faults;
        faults.partitions.retain(|(i, _)| *i != index);
        faults.loss.retain(|(i, _)| *i != index);
        faults.duplicate.retain(|(i, _)| *i != index);
        faults.reorder.retain(|(i, _, _)| *i != index);
        faults.slow.retain(|(i, _, _)| *i != index);
    }

    /// Whether crashing `id` now would leave more nodes of its role down than the protocol's
    /// fault model allows: for replicas, more than f of its shard crashed or still recovering
    /// (for protocols that rejoin from their peers a recovering replica counts as failed); for an
    /// extra role, more than its failure budget.
    pub(super) fn would_exceed_budget(&self, id: NodeId) -> bool {
        let Some(slot) = self.nodes.get(id.index()) else { return false };
        let Some(shard) = slot.spec.shard else {
            let role = slot.spec.role;
            if role == Role::Client {
                // The workload's clients: any may be down (their operations become unknown).
                return false;
            }
            let down = self.nodes.iter().filter(|other| other.spec.role == role && !other.is_up()).count();
            return match P::failure_budget(role) {
                FailureBudget::Never => true,
                FailureBudget::AtMost(count) => down >= count,
                FailureBudget::Any => false,
            };
        };
        let failed = self.topology.shards[shard]
            .iter()
            .filter(|&&replica| replica != id)
            .filter(|&&replica| self.nodes[replica.index()].runner.node().is_none_or(|node| node.is_recovering()))
            .count();
        failed >= self.config.f()
    }

    pub(super) fn crash(&mut self, id: NodeId) {
        let Some(slot) = self.nodes.get_mut(id.index()) else { return };
        if !slot.runner.crash() {
            return;
        }
        let role = format!("{:?}", slot.spec.role).to_lowercase();
        *self.outcome.crash_by_role.entry(role).or_default() += 1;
        slot.traffic.crashes += 1;
        slot.incarnation += 1;
        slot.inbox.clear();
        slot.pending_writes.clear();
        slot.wake_pending = false;
        slot.busy_until = 0;
        slot.paused_until = 0;
        if slot.spec.role == Role::Client {
            self.on_client_node_crash(id);
        }
    }
}
