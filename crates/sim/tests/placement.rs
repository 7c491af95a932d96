//! Placement and CPU profiles per role (gaps G6 and G7): a role on a site of its own at a given
//! delay, and a role whose CPU is free or costs what the run says.

use ordo_sim::{RoleCpu, RolePlacement, SimConfig, SimReport};
use std::collections::BTreeMap;

fn nezha(config: SimConfig) -> SimReport {
    ordo_sim::run::<ordo_protocols::nezha::Nezha>(config).expect("valid config").report
}

fn base() -> SimConfig {
    SimConfig { seed: 3, duration_ns: 200_000_000, clients: 8, check_linearizability: false, ..SimConfig::default() }
}

#[test]
fn a_role_on_a_site_of_its_own_is_that_far_from_everyone() {
    // Goal: `[placement.proxy] own_site_delay_ns` puts every proxy on a new site at that one-way
    // delay. Method: Nezha's request path crosses client → proxy → replicas → proxy → client, four
    // proxy links; with proxies 1 ms away the median latency grows by about 4 ms over the LAN.
    let lan = nezha(base());
    let mut far = base();
    far.placement =
        BTreeMap::from([("proxy".to_string(), RolePlacement { site: None, own_site_delay_ns: Some(1_000_000) })]);
    let far = nezha(far);
    assert!(lan.latency_ms.p50 < 1.0, "LAN median {}", lan.latency_ms.p50);
    assert!(far.latency_ms.p50 > 4.0 && far.latency_ms.p50 < 5.0, "four 1 ms proxy links: {}", far.latency_ms.p50);
    let proxy_sites: Vec<&str> = far.nodes.iter().filter(|n| n.role == "proxy").map(|n| n.site.as_str()).collect();
    assert!(!proxy_sites.is_empty() && proxy_sites.iter().all(|&s| s == "proxy-site"), "{proxy_sites:?}");
    assert!(far.nodes.iter().filter(|n| n.role == "replica").all(|n| n.site == "lan"));
}

#[test]
fn a_role_gets_its_own_cpu_profile() {
    // Goal: `[cpu_roles]` gives a role its own costs: "free" (an in-switch sequencer) costs
    // nothing, explicit costs are charged. Method: Nezha's proxies free, then ten times dearer
    // per message than the default; replicas keep the default profile throughout.
    let utilisation = |report: &SimReport, role: &str| -> f64 {
        report.nodes.iter().filter(|n| n.role == role).map(|n| n.cpu_utilisation).sum()
    };
    let mut free = base();
    free.cpu_roles = BTreeMap::from([("proxy".to_string(), RoleCpu::Named("free".into()))]);
    let free = nezha(free);
    assert_eq!(utilisation(&free, "proxy"), 0.0);
    assert!(utilisation(&free, "replica") > 0.0);
    let default = nezha(base());
    let mut dear = base();
    let costs = ordo_sim::CpuCost { per_message_ns: 30_000, ..ordo_sim::CpuCost::default() };
    dear.cpu_roles = BTreeMap::from([("proxy".to_string(), RoleCpu::Costs(costs))]);
    let dear = nezha(dear);
    assert!(
        utilisation(&dear, "proxy") > 3.0 * utilisation(&default, "proxy"),
        "dear proxies {} vs default {}",
        utilisation(&dear, "proxy"),
        utilisation(&default, "proxy")
    );
    let mut wrong = base();
    wrong.cpu_roles = BTreeMap::from([("switch".to_string(), RoleCpu::Named("free".into()))]);
    assert!(ordo_sim::run::<ordo_protocols::nezha::Nezha>(wrong).is_err(), "an unknown role is refused");
}
