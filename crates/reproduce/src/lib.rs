//! ordo-reproduce: `ordo reproduce PAPER` reruns a paper's experiments in the simulator and
//! writes a report beside the paper's numbers.
//!
//! - [`experiment`]: the vocabulary: runs, charts, claims.
//! - [`papers`]: each paper's experiments, declared as data in one file per paper.
//! - [`runner`]: runs them on several threads and reports progress.
//! - [`measure`]: what one run measured.
//! - [`results`]: `results.json`, the claims' verdicts, and the comparison of two reports.
//! - [`report`], [`charts`]: `report.md` and one PNG per figure.
#![deny(missing_docs)]

pub mod charts;
pub mod experiment;
pub mod measure;
pub mod papers;
pub mod report;
pub mod results;
pub mod runner;

use results::{ExperimentResults, Results, RunResults};
use std::path::{Path, PathBuf};

/// How to reproduce.
pub struct Options {
    /// Fewer points and shorter runs, every experiment still present.
    pub quick: bool,
    /// Where the report goes.
    pub out: PathBuf,
    /// Simulations run at once.
    pub jobs: usize,
}

/// Runs every experiment of paper `name`, writes `report.md`, `results.json`, the PNGs and the
/// run files into `options.out`, and returns the results. `progress` receives a line per run.
pub fn reproduce(name: &str, options: &Options, progress: &mut (dyn FnMut(&str) + Send)) -> Result<Results, String> {
    let paper = papers::paper(name, options.quick)
        .ok_or_else(|| format!("unknown paper {name}; known: {}", papers::NAMES.join(", ")))?;
    let measured = runner::run_all(&paper, options.jobs, progress)?;
    let experiments = (paper.experiments.iter().zip(measured))
        .map(|(experiment, runs)| {
            let runs = (experiment.runs.iter().zip(runs))
                .map(|(run, measured)| RunResults {
                    id: run.id.clone(),
                    series: run.series.clone(),
                    protocol: run.protocol.into(),
                    measured,
                })
                .collect();
            ExperimentResults::judge(experiment, runs)
        })
        .collect();
    let results = Results {
        paper: paper.name.into(),
        quick: options.quick,
        ordo_version: env!("CARGO_PKG_VERSION").into(),
        experiments,
    };
    write(&paper, &results, &options.out)?;
    Ok(results)
}

fn write(paper: &experiment::Paper, results: &Results, dir: &Path) -> Result<(), String> {
    let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for (experiment, measured) in paper.experiments.iter().zip(&results.experiments) {
        let runs_dir = dir.join("runs").join(experiment.id);
        std::fs::create_dir_all(&runs_dir).map_err(|e| io(&runs_dir, e))?;
        for run in &experiment.runs {
            let text = toml::to_string(&run.config).map_err(|e| format!("{} {}: {e}", experiment.id, run.id))?;
            let path = runs_dir.join(format!("{}.toml", file_name(&run.id)));
            let header = format!("# ordo sim --protocol {} --config {}\n", run.protocol, path.display());
            std::fs::write(&path, header + &text).map_err(|e| io(&path, e))?;
        }
        for chart in &experiment.charts {
            charts::draw(dir, experiment, chart, &measured.runs, results.quick)?;
        }
    }
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    let path = dir.join("results.json");
    std::fs::write(&path, json).map_err(|e| io(&path, e))?;
    let path = dir.join("report.md");
    std::fs::write(&path, report::render(paper, results)).map_err(|e| io(&path, e))
}

/// A run's id as a file name: letters, digits and `-_.@%=` kept, anything else a `-`.
fn file_name(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.@%=".contains(c) { c } else { '-' }).collect()
}

/// Reads a `results.json`.
pub fn load(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a results.json of ordo reproduce: {e}", path.display()))
}
