//! `ordo check HISTORY.jsonl`.

use std::path::Path;
use std::process::ExitCode;

/// Exit 0: linearizable; 1: not (says which key and operations); 2: unreadable or malformed.
pub fn run(path: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("ordo check: cannot read {}: {error}", path.display());
            return ExitCode::from(2);
        }
    };
    let events = match ordo_check::history::parse_history(&text) {
        Ok(events) => events,
        Err(error) => {
            eprintln!("ordo check: {}: malformed history: {error}", path.display());
            return ExitCode::from(2);
        }
    };
    match ordo_check::linearizability::check_linearizable(&events) {
        Ok(stats) => {
            println!("linearizable: {} events ({stats:?})", events.len());
            ExitCode::SUCCESS
        }
        Err(violation) => {
            println!("NOT linearizable: {violation}");
            ExitCode::from(1)
        }
    }
}
