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
    let mut report = Vec::new();
    for info in protocols().iter().filter(|p| !p.canary) {
        let config = SimConfig {
            seed: 3,
            duration_ns: 300_000_000,
            clients: 8,
            faults: FaultPlan { random: true, ..FaultPlan::default() },
            ..SimConfig::default()
        };
        let run = with_protocol(info.name, Run(config)).expect("registered");
        let witness = ordo_sim::witness::collect();
        let options = ordo_check::CheckOptions::default();
        let witnessed = ordo_check::check_linearizable_witnessed(&run.history, &witness, &options);
        let searched = ordo_check::check_linearizable_with(&run.history, &options);
        assert_eq!(witnessed.is_ok(), searched.is_ok(), "{}: the witness changed the verdict", info.name);
        let stats = witnessed.unwrap_or_else(|violation| panic!("{}: {violation}", info.name));
        report.push(format!("{} {}/{}", info.name, stats.keys_witnessed, stats.keys));
        assert_eq!(stats.keys_witnessed, stats.keys, "{}: keys left to the search: {report:?}", info.name);
    }
    eprintln!("keys witnessed: {}", report.join(", "));
}
