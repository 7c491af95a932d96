//! The fuzz body of the history parser (issue 20): `ordo check` reads histories that users and
//! other tools write, so arbitrary bytes must give events or a typed error, never a panic. The
//! cargo-fuzz target `history` under `fuzz/` and the stable test in `crates/net/tests/fuzz_bodies.rs`
//! call it; `docs/fuzzing.md` says how to run it.

use crate::history::{parse_history, write_history};
use crate::linearizability::{CheckOptions, check_linearizable_with};

/// Most configurations the body lets the checker explore, so one input stays fast.
const CONFIGURATIONS_MAX: usize = 1_000;

/// A history file's bytes. What parses writes back as lines that parse to the same events; the
/// linearizability check, with small limits, returns a verdict or a typed violation.
pub fn history(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(events) = parse_history(text) else { return };
    assert!(events.len() <= text.lines().count(), "at most one event per line");
    let mut written = Vec::new();
    write_history(&events, &mut written).expect("writing to memory cannot fail");
    let written = String::from_utf8(written).expect("a written history is text");
    let again = parse_history(&written).expect("a written history parses");
    assert_eq!(again, events, "a written history reads back the same");
    let options =
        CheckOptions { configurations_max: CONFIGURATIONS_MAX, explored_per_step_max: 10 * CONFIGURATIONS_MAX };
    if let Ok(stats) = check_linearizable_with(&events, &options) {
        assert!(stats.operations <= events.len(), "an operation is made of events");
        assert!(stats.operations_ok + stats.operations_failed + stats.operations_indeterminate <= stats.operations);
    }
}
