//! The linearizability witness (`ordo_sim::witness`): the replicas' order of each key's
//! writes proves the keys of real runs without a search, for every protocol.

use ordo_core::Protocol;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use ordo_sim::{FaultPlan, SimConfig, SimRun};

struct Run(SimConfig);

impl ProtocolVisitor for Run {
    type Output = SimRun;
    fn visit<P: Protocol>(self) -> SimRun {
        ordo_sim::run::<P>(self.0).expect("config is valid")
    }
}

#[test]
fn the_replicas_order_proves_every_protocols_keys() {
    // Goal: on ordinary runs, faults included, the order the replicas applied proves the keys
    // without a search (the check of a long run stays linear), and the witnessed verdict is
    // the search's. Method: one seed per protocol with random faults; the witness of the run
    // (collected on this thread after it) is checked, then the history without it.
    witness_proves_every_key(0.0);
}

#[test]
fn the_replicas_order_proves_every_key_with_expiry() {
    // Goal: the same with key expiry: stamped commands, expiring SETs and sweeps, which the
    // witness records with their stamps. Method: as above with `--expiry 0.2`.
    witness_proves_every_key(0.2);
}

/// Runs every protocol for one seed with `expiry_ratio` and checks that the witness proves
/// every key and agrees with the search.
fn witness_proves_every_key(expiry_ratio: f64) {
    let mut report = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        let mut config = SimConfig {
            seed: 3,
            duration_ns: 300_000_000,
            clients: 8,
            faults: FaultPlan { random: true, ..FaultPlan::default() },
            ..SimConfig::default()
        };
        config.workload.expiry_ratio = expiry_ratio;
        let run = with_protocol(info.name, Run(config)).expect("registered");
        if expiry_ratio > 0.0 {
            // Otherwise the run would prove nothing about expiry.
            let has_sweeps = run.history.iter().any(|event| event.op == ordo_check::history::OpKind::Expire);
            assert!(has_sweeps, "{}: no sweep recorded", info.name);
            assert!(run.history.iter().any(|event| event.expires_ms.is_some()), "{}: nothing expires", info.name);
        }
        let witness = ordo_sim::witness::collect();
        let options = ordo_check::CheckOptions::default();
        let witnessed = ordo_check::check_linearizable_witnessed(&run.history, &witness, &options);
        let searched = ordo_check::check_linearizable_with(&run.history, &options);
        assert_eq!(witnessed.is_ok(), searched.is_ok(), "{}: the witness changed the verdict", info.name);
        let stats = witnessed.unwrap_or_else(|violation| panic!("{}: {violation}", info.name));
        report.push(format!("{} {}/{}", info.name, stats.keys_witnessed, stats.keys));
        assert_eq!(stats.keys_witnessed, stats.keys, "{}: keys left to the search: {report:?}", info.name);
    }
    eprintln!("keys witnessed (expiry {expiry_ratio}): {}", report.join(", "));
}
