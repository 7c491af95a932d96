//! `ordo check HISTORY.jsonl`.

use clap::Args;
use ordo_check::{CheckOptions, Violation, check_linearizable_with};
use std::path::PathBuf;
use std::process::ExitCode;

/// `ordo check`'s arguments.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The history file.
    history: PathBuf,
    /// Most configurations the search keeps for one key; past it the key is too complex.
    #[arg(long, default_value_t = CheckOptions::default().configurations_max)]
    configurations_max: usize,
    /// Most configurations one step of the search may explore; past it the key is too complex.
    #[arg(long, default_value_t = CheckOptions::default().explored_per_step_max)]
    explored_max: usize,
}

/// Exit 0: linearizable; 1: not (says which key and operations); 2: unreadable or malformed;
/// 3: unknown, a key was too complex under the limits (neither a pass nor a failure).
pub fn run(args: &CheckArgs) -> ExitCode {
    let path = &args.history;
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
    let options =
        CheckOptions { configurations_max: args.configurations_max, explored_per_step_max: args.explored_max };
    match check_linearizable_with(&events, &options) {
        Ok(stats) => {
            println!("linearizable: {} events, {stats}", events.len());
            ExitCode::SUCCESS
        }
        Err(violation @ Violation::TooComplex { .. }) => {
            println!("UNKNOWN: {violation}; no other key is not linearizable");
            println!("raise --configurations-max (now {}) or --explored-max to settle it", args.configurations_max);
            ExitCode::from(3)
        }
        Err(violation) => {
            println!("NOT linearizable: {violation}");
            ExitCode::from(1)
        }
    }
}
