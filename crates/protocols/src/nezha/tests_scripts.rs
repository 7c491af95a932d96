//! The scripted scenarios of `testdata/nezha/` (STYLE rule 14; format in `testkit::script`).
//! `ORDO_REWRITE=1 cargo test -p ordo-protocols nezha::tests_scripts` rewrites their outputs.

use super::Nezha;
use crate::testkit::script::run_scripts;

#[test]
fn scripts() {
    run_scripts::<Nezha>("testdata/nezha");
}
