//! The simulated network's order and the role-aware fault plans.
//!
//! Links are FIFO unless a fault plan reorders: NOPaxos-style protocols read a reordered message
//! as a gap, so a fault-free run must not reorder. Random fault plans crash every role a
//! protocol declares a failure budget for, not only replicas.

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use ordo_sim::{Fault, FaultPlan, SimConfig, SimReport};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimReport;
    fn visit<P: Protocol>(self) -> SimReport {
        ordo_sim::run::<P>(self.0).expect("config is valid").report
    }
}

fn config(seed: u64, faults: FaultPlan) -> SimConfig {
    SimConfig {
        seed,
        duration_ns: 200_000_000,
        clients: 16,
        faults,
        check_linearizability: false,
        ..SimConfig::default()
    }
}

#[test]
fn links_deliver_in_order_without_faults() {
    // Goal: jitter delays a message but never lets it overtake an earlier one on its link.
    // Method: run every protocol on the default LAN (10 µs mean exponential jitter, which alone
    // reorders thousands of messages a run) without faults; the simulator counts deliveries
    // that arrive after a message sent later on the same link.
    for info in protocols().iter().filter(|p| !p.canary) {
        let report = with_protocol(info.name, Run(config(7, FaultPlan::default()))).expect("registered");
        assert!(report.network.sent > 10_000, "{}: the run sent messages", info.name);
        assert_eq!(report.network.delivered_out_of_order, 0, "{}: a fault-free link reordered", info.name);
        assert_eq!(report.network.reordered, 0, "{}", info.name);
    }
}

#[test]
fn a_reorder_fault_reorders_links() {
    // Goal: the out-of-order count can fail (negative control of the test above), and reordering
    // is still available to fault plans. Method: a reorder fault over the whole run.
    let reorder = Fault::Reorder { probability: 0.2, delay_max_ns: 200_000, at_ns: 0, until_ns: 150_000_000 };
    let plan = FaultPlan { faults: vec![reorder], ..FaultPlan::default() };
    let report = with_protocol("multipaxos", Run(config(7, plan))).expect("registered");
    assert!(report.network.reordered > 100, "the fault delayed messages: {:?}", report.network);
    assert!(report.network.delivered_out_of_order > 100, "and they arrived late: {:?}", report.network);
}

#[test]
fn a_slow_fault_delays_the_links_it_names_and_keeps_them_in_order() {
    // Goal: a slow period adds delay, only on the links of the nodes it names (every link when
    // it names none), without reordering any link, and only while it lasts. Method: Multi-Paxos
    // with clients for 200 ms; slow periods (up to 1 ms per message) over the middle 100 ms:
    // on every link, then on one client's links only; compare latency and counts with a run
    // without faults.
    let slow =
        |nodes: Vec<u32>| Fault::Slow { nodes, delay_max_ns: 1_000_000, at_ns: 50_000_000, until_ns: 150_000_000 };
    let run = |faults: Vec<Fault>| {
        let plan = FaultPlan { faults: faults.into_iter().map(Into::into).collect(), ..FaultPlan::default() };
        with_protocol("multipaxos", Run(config(7, plan))).expect("registered")
    };
    let calm = run(vec![]);
    let everywhere = run(vec![slow(vec![])]);
    assert_eq!(calm.network.slowed, 0, "no slow period, no slowed message");
    assert!(everywhere.network.slowed > 1_000, "every link was slow: {:?}", everywhere.network);
    assert!(everywhere.network.slowed < everywhere.network.sent / 2, "only while the period lasted");
    assert_eq!(everywhere.network.delivered_out_of_order, 0, "slow links stay FIFO");
    assert!(
        everywhere.latency_ms.p99 > 2.0 * calm.latency_ms.p99,
        "{:?} vs {:?}",
        everywhere.latency_ms,
        calm.latency_ms
    );
    // The last client (the highest node id): only its requests and replies are slowed.
    let client = everywhere.nodes.iter().filter(|node| node.role == "client").map(|node| node.id).max();
    let one_client = run(vec![slow(vec![client.expect("the run has clients")])]);
    assert!(one_client.network.slowed > 10, "its links were slow: {:?}", one_client.network);
    assert!(one_client.network.slowed * 10 < everywhere.network.slowed, "and no others");
    assert_eq!(one_client.network.delivered_out_of_order, 0);
}

#[test]
fn random_plans_crash_proxies_as_well_as_replicas() {
    // Goal: random fault plans fail every role the protocol gives a failure budget (Nezha's
    // stateless proxies: any number), not only replicas; the report counts crashes by role.
    // Method: 20 seeds of Nezha with random faults; sum `faults.crash_by_role`; every run passes.
    let (mut replicas, mut proxies) = (0, 0);
    for seed in 1..=20 {
        let mut run = config(seed, FaultPlan { random: true, ..FaultPlan::default() });
        run.duration_ns = 1_000_000_000;
        run.check_linearizability = true;
        let report = with_protocol("nezha", Run(run)).expect("registered");
        assert!(report.violation().is_none(), "seed {seed}: {:?}", report.violation());
        replicas += report.faults.crash_by_role.get("replica").copied().unwrap_or(0);
        proxies += report.faults.crash_by_role.get("proxy").copied().unwrap_or(0);
        assert_eq!(report.faults.crash_by_role.get("client"), None, "clients are never crashed");
    }
    assert!(replicas >= 10, "replicas crashed {replicas} times in 20 seeds");
    assert!(proxies >= 10, "proxies crashed {proxies} times in 20 seeds");
}
