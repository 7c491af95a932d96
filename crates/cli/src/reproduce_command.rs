//! `ordo reproduce`: rerun a paper's experiments and write a report beside its numbers, or
//! compare two reports.

use ordo_reproduce::{Options, papers, results::compare};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ordo reproduce`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  ordo reproduce nezha --quick\n  ordo reproduce all --out reports\n  \
                        ordo reproduce --compare old/results.json new/results.json")]
pub struct ReproduceArgs {
    /// The paper: nezha, tempo, nopaxos, swiftpaxos, chora, or all.
    #[arg(required_unless_present = "compare")]
    paper: Option<String>,
    /// Fewer points and shorter runs: under a minute per paper on 2 cores (a full run takes 2-7 minutes).
    #[arg(long)]
    quick: bool,
    /// Where the report goes (default reproduce/PAPER; with `all`, one folder per paper in it).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Simulations run at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print what moved between two results.json files, and nothing else.
    #[arg(long, num_args = 2, value_names = ["BEFORE", "AFTER"], conflicts_with_all = ["paper", "quick", "out"])]
    compare: Option<Vec<PathBuf>>,
}

/// Runs `ordo reproduce`.
pub fn run(args: ReproduceArgs) -> ExitCode {
    if let Some(files) = &args.compare {
        return compare_files(&files[0], &files[1]);
    }
    let paper = args.paper.as_deref().unwrap_or("all");
    let names: Vec<&str> = if paper == "all" { papers::NAMES.to_vec() } else { vec![paper] };
    if let Some(unknown) = names.iter().find(|n| !papers::NAMES.contains(n)) {
        eprintln!("error: unknown paper {unknown}; known: {}, all", papers::NAMES.join(", "));
        return ExitCode::from(2);
    }
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut violations = 0;
    for name in names {
        let out = match (&args.out, paper == "all") {
            (Some(dir), true) => dir.join(name),
            (Some(dir), false) => dir.clone(),
            (None, _) => PathBuf::from("reproduce").join(name),
        };
        let options = Options { quick: args.quick, out: out.clone(), jobs };
        eprintln!(
            "reproducing {name}{} into {} with {jobs} jobs",
            if args.quick { " (quick)" } else { "" },
            out.display()
        );
        let results = match ordo_reproduce::reproduce(name, &options, &mut |line| eprintln!("{line}")) {
            Ok(results) => results,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        let claims: Vec<_> = results.experiments.iter().flat_map(|e| &e.claims).collect();
        let reproduced = claims.iter().filter(|c| c.verdict == ordo_reproduce::results::Verdict::Reproduced).count();
        let runs = results.experiments.iter().flat_map(|e| &e.runs);
        violations += runs.filter(|r| r.measured.violation.is_some()).count();
        println!(
            "{name}: {reproduced} of {} claims reproduced; report: {}",
            claims.len(),
            out.join("report.md").display()
        );
    }
    if violations > 0 {
        eprintln!("error: {violations} runs found a safety violation (see the reports)");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn compare_files(before: &std::path::Path, after: &std::path::Path) -> ExitCode {
    let (before, after) = match (ordo_reproduce::load(before), ordo_reproduce::load(after)) {
        (Ok(before), Ok(after)) => (before, after),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let changes = compare(&before, &after);
    if changes.is_empty() {
        println!("no change");
    }
    for line in &changes {
        println!("{line}");
    }
    ExitCode::SUCCESS
}
