//! `report.md`: per experiment, what it measures, its settings, its chart, and a table of the
//! paper's numbers beside ordo's with a verdict per row.

use crate::experiment::{Experiment, Paper, number};
use crate::results::{ClaimResult, ExperimentResults, Results, Verdict};
use std::fmt::Write as _;

/// The report of `results`, measured from `paper`'s declarations.
pub fn render(paper: &Paper, results: &Results) -> String {
    let mut out = String::new();
    let quick = if results.quick { " --quick" } else { "" };
    let _ = writeln!(out, "# Reproducing {}\n", paper.title);
    let _ = writeln!(
        out,
        "Written by `ordo reproduce {}{quick}` (ordo {}). Every number below was measured by that \
         command; nothing is pasted by hand. {}\n",
        paper.name, results.ordo_version, paper.scope
    );
    let claims = || results.experiments.iter().flat_map(|e| e.claims.iter());
    let count = |verdict| claims().filter(|c| c.verdict == verdict).count();
    let _ = writeln!(
        out,
        "**Summary:** of {} numbers the paper states, {} reproduced within their tolerance, {} not, \
         {} not measured by ordo.\n",
        claims().count(),
        count(Verdict::Reproduced),
        count(Verdict::NotReproduced),
        count(Verdict::NotMeasured)
    );
    let violations: Vec<String> = (results.experiments.iter())
        .flat_map(|e| {
            e.runs.iter().filter_map(move |r| r.measured.violation.as_ref().map(|v| format!("{} {}: {v}", e.id, r.id)))
        })
        .collect();
    if violations.is_empty() {
        out.push_str("No run found a safety violation (every run checks agreement and the protocol's invariants).\n\n");
    } else {
        let _ = writeln!(out, "**Safety violations:** {}\n", violations.join("; "));
    }
    for (experiment, measured) in paper.experiments.iter().zip(&results.experiments) {
        section(&mut out, experiment, measured);
    }
    out
}

fn section(out: &mut String, experiment: &Experiment, measured: &ExperimentResults) {
    let _ = writeln!(out, "## {} — {}\n", experiment.figures, experiment.title);
    let _ = writeln!(out, "**What it measures.** {}\n", experiment.measures);
    let _ = writeln!(
        out,
        "**Settings.** {} Each run's exact configuration is in `runs/{}/`: `ordo sim --protocol P --config FILE` \
         reruns it.\n",
        experiment.settings, experiment.id
    );
    let _ = writeln!(out, "**What ordo cannot model here.** {}\n", experiment.limits);
    for chart in &experiment.charts {
        let _ = writeln!(out, "![{}]({}.png)\n", chart.title, chart.file);
    }
    if !measured.claims.is_empty() {
        out.push_str("| the paper says | paper | ordo | ordo / paper | verdict |\n|---|---|---|---|---|\n");
        for (claim, declared) in measured.claims.iter().zip(&experiment.claims) {
            claim_row(out, claim, declared.caveat);
        }
        out.push('\n');
    }
    let notes: Vec<String> =
        measured.runs.iter().filter_map(|r| r.measured.note.as_ref().map(|n| format!("{}: {n}", r.id))).collect();
    if !notes.is_empty() {
        let _ =
            writeln!(out, "Notes from the checkers (liveness in overloaded runs is expected): {}\n", notes.join("; "));
    }
    points_table(out, experiment, measured);
}

fn claim_row(out: &mut String, claim: &ClaimResult, caveat: &str) {
    let unit = if claim.unit.is_empty() { String::new() } else { format!(" {}", claim.unit) };
    let ordo = claim.ordo.map_or("–".to_string(), |o| format!("{}{unit}", number(o)));
    let ratio = claim.ratio.map_or("–".to_string(), |r| format!("{r:.2}"));
    let tolerance = format!("±{:.0}%", claim.tolerance * 100.0);
    let verdict = match claim.verdict {
        Verdict::Reproduced => format!("reproduced ({tolerance})"),
        Verdict::NotReproduced => format!("**not reproduced** ({tolerance}): {caveat}"),
        Verdict::NotMeasured => format!("not measured: {caveat}"),
    };
    let _ = writeln!(out, "| {} | {}{unit} | {ordo} | {ratio} | {verdict} |", claim.what, claim.paper);
}

/// Every run with its main numbers, and the metrics its charts plot.
fn points_table(out: &mut String, experiment: &Experiment, measured: &ExperimentResults) {
    let mut columns = vec!["throughput", "p50_ms", "p99_ms", "fast_ratio"];
    for chart in &experiment.charts {
        for metric in [chart.x.metric, chart.y.metric] {
            if !columns.contains(&metric) && metric != "x" {
                columns.push(metric);
            }
        }
    }
    columns.retain(|c| measured.runs.iter().any(|r| r.measured.metrics.contains_key(*c)));
    let _ = writeln!(out, "<details><summary>Measured points ({} runs)</summary>\n", measured.runs.len());
    let _ = writeln!(out, "| run | {} |", columns.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(columns.len()));
    for run in &measured.runs {
        let cells: Vec<String> =
            columns.iter().map(|c| run.measured.metrics.get(*c).map_or("–".into(), |v| number(*v))).collect();
        let _ = writeln!(out, "| {} | {} |", run.id, cells.join(" | "));
    }
    out.push_str("\n</details>\n\n");
}
