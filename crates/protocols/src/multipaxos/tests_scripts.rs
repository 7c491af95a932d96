//! The scripted scenarios of `testdata/multipaxos/` (STYLE rule 14; format in `testkit::script`).
//! `ORDO_REWRITE=1 cargo test -p ordo-protocols multipaxos::tests_scripts` rewrites their outputs.

use super::MultiPaxos;
use crate::testkit::script::run_scripts;

#[test]
fn scripts() {
    run_scripts::<MultiPaxos>("testdata/multipaxos");
}
