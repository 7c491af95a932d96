//! The scripted scenarios of `testdata/tempo/` (STYLE rule 14; format in `testkit::script`).
//! `ORDO_REWRITE=1 cargo test -p ordo-protocols tempo::tests_scripts` rewrites their outputs.

use super::Tempo;
use crate::testkit::script::run_scripts;

#[test]
fn scripts() {
    run_scripts::<Tempo>("testdata/tempo");
}
