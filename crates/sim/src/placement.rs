//! Where each role runs and what its CPU costs (gaps G6 and G7): a run can put a role on a site
//! of the latency matrix, or on a site of its own at a given one-way delay from every other site
//! (an in-switch sequencer sits half a link away), and give a role its own CPU profile (`"free"`
//! for a switch, or per-event, per-message and per-byte costs).
//!
//! ```toml
//! [placement.sequencer]
//! own_site_delay_ns = 20000      # a site of its own, 20 µs from every other site
//! [placement.proxy]
//! site = "us-east-1"             # a site of the latency matrix, by name
//! [cpu_roles]
//! sequencer = "free"
//! proxy = { per_event_ns = 500, per_message_ns = 2000, per_byte_ns = 0.5 }
//! ```

use crate::config::CpuCost;
use crate::network::LatencyModel;
use ordo_core::Role;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where the nodes of one role run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolePlacement {
    /// A site of the latency matrix, by name.
    pub site: Option<String>,
    /// A site of its own, this far (one way, in ns) from every other site.
    pub own_site_delay_ns: Option<u64>,
}

/// A role's CPU profile: a name (`"free"`, `"default"`) or costs of its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RoleCpu {
    /// `"free"`: no CPU model (an in-switch sequencer); `"default"`: the run's `cpu`.
    Named(String),
    /// Costs of its own.
    Costs(CpuCost),
}

/// The roles a placement or CPU table may name: every role but replicas (placed by rank).
fn role_named(name: &str) -> Result<Role, String> {
    match name {
        "client" => Ok(Role::Client),
        "proxy" => Ok(Role::Proxy),
        "sequencer" => Ok(Role::Sequencer),
        "controller" => Ok(Role::Controller),
        "replica" => Err("replicas are placed by rank over the sites (replica r at site r modulo their count)".into()),
        other => Err(format!("unknown role `{other}` (client, proxy, sequencer, controller)")),
    }
}

/// The run's placements resolved against its latency matrix: the site of each placed role, and
/// the matrix with every own site added.
pub(crate) struct Placements {
    /// Site index by role.
    pub sites: BTreeMap<Role, usize>,
    /// The latency matrix, own sites included.
    pub latency: LatencyModel,
}

/// Resolves `placement` against `latency`, adding a site for each role that asks for its own.
pub(crate) fn resolve(
    placement: &BTreeMap<String, RolePlacement>,
    latency: &LatencyModel,
) -> Result<Placements, String> {
    let mut latency = latency.clone();
    let mut sites = BTreeMap::new();
    for (name, place) in placement {
        let role = role_named(name).map_err(|why| format!("[placement.{name}]: {why}"))?;
        let site =
            match (&place.site, place.own_site_delay_ns) {
                (Some(site), None) => latency.sites.iter().position(|s| s == site).ok_or_else(|| {
                    format!("[placement.{name}]: no site `{site}` (sites: {})", latency.sites.join(", "))
                })?,
                (None, Some(delay_ns)) => add_own_site(&mut latency, name, delay_ns),
                _ => return Err(format!("[placement.{name}]: give exactly one of `site` and `own_site_delay_ns`")),
            };
        sites.insert(role, site);
    }
    Ok(Placements { sites, latency })
}

/// Adds a site named after the role, `delay_ns` one way from every other site.
fn add_own_site(latency: &mut LatencyModel, name: &str, delay_ns: u64) -> usize {
    let index = latency.sites.len();
    latency.sites.push(format!("{name}-site"));
    for row in &mut latency.one_way_ns {
        row.push(delay_ns.max(1));
    }
    let mut own = vec![delay_ns.max(1); index];
    own.push(latency.local_ns);
    latency.one_way_ns.push(own);
    index
}

/// The CPU profile of each role named in `cpu_roles`, checked.
pub(crate) fn resolve_cpu(
    cpu_roles: &BTreeMap<String, RoleCpu>,
    cpu: &CpuCost,
) -> Result<BTreeMap<Role, CpuCost>, String> {
    let mut profiles = BTreeMap::new();
    for (name, profile) in cpu_roles {
        let role = match name.as_str() {
            "replica" => Role::Replica,
            other => role_named(other).map_err(|why| format!("[cpu_roles] {name}: {why}"))?,
        };
        let cost = match profile {
            RoleCpu::Named(named) if named == "free" => CpuCost::free(),
            RoleCpu::Named(named) if named == "default" => cpu.clone(),
            RoleCpu::Named(other) => {
                return Err(format!("[cpu_roles] {name} = \"{other}\": say \"free\", \"default\" or give costs"));
            }
            RoleCpu::Costs(costs) => costs.clone(),
        };
        profiles.insert(role, cost);
    }
    Ok(profiles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_site_is_added_at_its_delay_and_names_are_checked() {
        // Goal: a role asking for a site of its own gets one, at the given delay from every other
        // site and local delay to itself; bad tables are refused with the table's name.
        let lan = LatencyModel::default();
        let own = RolePlacement { site: None, own_site_delay_ns: Some(20_000) };
        let placed = resolve(&BTreeMap::from([("sequencer".to_string(), own)]), &lan).unwrap();
        assert_eq!(placed.sites[&Role::Sequencer], 1);
        assert_eq!(placed.latency.sites, vec!["lan".to_string(), "sequencer-site".to_string()]);
        assert_eq!(placed.latency.one_way_ns, vec![vec![40_000, 20_000], vec![20_000, lan.local_ns]]);
        assert!(placed.latency.validate().is_ok());
        let named = RolePlacement { site: Some("lan".into()), own_site_delay_ns: None };
        assert_eq!(resolve(&BTreeMap::from([("proxy".to_string(), named)]), &lan).unwrap().sites[&Role::Proxy], 0);
        let wrong = |name: &str, place: RolePlacement| resolve(&BTreeMap::from([(name.to_string(), place)]), &lan);
        assert!(wrong("proxy", RolePlacement { site: Some("mars".into()), own_site_delay_ns: None }).is_err());
        assert!(wrong("proxy", RolePlacement::default()).is_err());
        assert!(wrong("replica", RolePlacement { site: Some("lan".into()), own_site_delay_ns: None }).is_err());
        assert!(wrong("switch", RolePlacement { site: Some("lan".into()), own_site_delay_ns: None }).is_err());
    }

    #[test]
    fn cpu_profiles_by_role() {
        // Goal: "free", "default" and explicit costs resolve; anything else is refused.
        let cpu = CpuCost::default();
        let table: BTreeMap<String, RoleCpu> = toml::from_str(
            "sequencer = \"free\"\nreplica = \"default\"\nproxy = { per_event_ns = 5, per_message_ns = 7 }",
        )
        .unwrap();
        let profiles = resolve_cpu(&table, &cpu).unwrap();
        assert_eq!(profiles[&Role::Sequencer], CpuCost::free());
        assert_eq!(profiles[&Role::Replica], cpu);
        assert_eq!(profiles[&Role::Proxy].per_message_ns, 7);
        assert_eq!(profiles[&Role::Proxy].per_byte_ns, cpu.per_byte_ns, "unset costs keep their defaults");
        let bad: BTreeMap<String, RoleCpu> = toml::from_str("sequencer = \"cheap\"").unwrap();
        assert!(resolve_cpu(&bad, &cpu).is_err());
    }
}
