//! Fault plans that name nodes by role and index (`node = "proxy:0"`) rather than by id, run in
//! the simulator: the reference reaches the node it names, and one to a node the cluster lacks is
//! refused before the run. Only the public sim API and Nezha's `proxies` option are used.

use ordo_protocols::nezha::Nezha;
use ordo_sim::{FaultPlan, SimConfig};

const REPLICAS: usize = 3;
const PROXIES: usize = 3;
const CLIENTS: usize = 6;

/// A short Nezha run with three proxies whose fault plan is the TOML `plan`, read as a plan file.
fn config(plan: &str) -> SimConfig {
    SimConfig {
        seed: 3,
        replicas: REPLICAS,
        clients: CLIENTS,
        duration_ns: 200_000_000,
        faults: toml::from_str::<FaultPlan>(plan).expect("the plan parses"),
        protocol: toml::from_str(&format!("proxies = {PROXIES}")).expect("options parse"),
        ..SimConfig::default()
    }
}

#[test]
fn a_crash_of_proxy_0_crashes_exactly_the_first_proxy() {
    // Goal: `node = "proxy:0"` names the first proxy whatever ids the topology gives it (replicas
    // come first, so it is not node 0). Method: crash it 50 ms into a Nezha run; the report must
    // count one proxy crash and no replica crash, and the one crashed node must be the proxy
    // with the lowest id.
    let plan = "[[faults]]\nkind = \"crash\"\nnode = \"proxy:0\"\nat_ns = 50_000_000\nrestart_ns = 100_000_000\n";
    let report = ordo_sim::run::<Nezha>(config(plan)).expect("the run starts").report;
    assert!(report.assertion.is_none(), "assertion: {:?}", report.assertion);
    let crash_by_role = &report.faults.crash_by_role;
    assert_eq!(crash_by_role.get("proxy"), Some(&1), "{crash_by_role:?}");
    assert_eq!(crash_by_role.get("replica"), None, "{crash_by_role:?}");
    let first_proxy = report.nodes.iter().filter(|node| node.role == "proxy").map(|node| node.id).min();
    let crashed: Vec<u32> = report.nodes.iter().filter(|node| node.crashes > 0).map(|node| node.id).collect();
    assert_eq!(first_proxy, Some(REPLICAS as u32), "nodes are numbered replicas first, then proxies");
    assert_eq!(crashed, vec![REPLICAS as u32], "only the first proxy crashed");
}

#[test]
fn a_plan_naming_a_proxy_the_cluster_lacks_is_refused() {
    // Goal: an index beyond a role's nodes is a configuration error that says what the cluster
    // has, never a fault that silently never fires. Method: name `proxy:9` of three proxies;
    // the run must not start, and its error must name the fault, the reference and the count.
    let plan = "[[faults]]\nkind = \"crash\"\nnode = \"proxy:9\"\nat_ns = 50_000_000\n";
    let error = ordo_sim::run::<Nezha>(config(plan)).err().expect("the run is refused");
    assert_eq!(error, "fault plan, fault 1 (crash): the plan names proxy:9 but the cluster has 3 proxies");
}
