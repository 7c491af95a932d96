//! `ordo check HISTORY.jsonl`.

use clap::Args;
use ordo_check::{CheckOptions, CheckStats, Violation, check_linearizable_with};
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

/// `count` and `noun`, in the plural unless one.
fn counted(count: usize, noun: &str) -> String {
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

/// What a passed check covered, in two indented lines: the history's operations by outcome, and
/// its keys by how each was proved (the replicas' order as a witness, or a search).
fn summary(stats: &CheckStats, events: usize) -> String {
    let searched = stats.keys - stats.keys_witnessed;
    let search = if searched > 0 {
        format!(" (at most {} at once)", counted(stats.configurations_peak, "candidate state"))
    } else {
        String::new()
    };
    format!(
        "  {}, {}: {} ok, {} failed, {} of unknown outcome\n  {}: {searched} proved by search{search}, {} by the \
         replicas' order (a witness)",
        counted(events, "event"),
        counted(stats.operations, "operation"),
        stats.operations_ok,
        stats.operations_failed,
        stats.operations_indeterminate,
        counted(stats.keys, "key"),
        stats.keys_witnessed,
    )
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
            println!("linearizable: {}\n{}", path.display(), summary(&stats, events.len()));
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
