//! The scripted scenarios of `testdata/nopaxos/` (STYLE rule 14; format in `testkit::script`).
//! `ORDO_REWRITE=1 cargo test -p ordo-protocols nopaxos::tests_scripts` rewrites their outputs.

use super::NoPaxos;
use crate::testkit::script::run_scripts;

#[test]
fn scripts() {
    run_scripts::<NoPaxos>("testdata/nopaxos");
}
