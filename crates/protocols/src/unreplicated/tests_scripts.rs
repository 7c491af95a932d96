//! The scripted scenarios of `testdata/unreplicated/` (STYLE rule 14; format in `testkit::script`).
//! `ORDO_REWRITE=1 cargo test -p ordo-protocols unreplicated::tests_scripts` rewrites their outputs.

use super::Unreplicated;
use crate::testkit::script::run_scripts;

#[test]
fn scripts() {
    run_scripts::<Unreplicated>("testdata/unreplicated");
}
