//! `results.json`: every measured point and every claim's verdict, so that two reports can be
//! compared (`ordo reproduce --compare`).

use crate::experiment::{Claim, Expected, Experiment, Value};
use crate::measure::Measured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything one `ordo reproduce PAPER` measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// The paper's name.
    pub paper: String,
    /// Whether this was a `--quick` run (fewer points, shorter runs).
    pub quick: bool,
    /// The version of ordo that measured it.
    pub ordo_version: String,
    /// One entry per experiment, in the report's order.
    pub experiments: Vec<ExperimentResults>,
}

/// One experiment's runs and claims.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExperimentResults {
    /// The experiment's id.
    pub id: String,
    /// The paper's figures it reproduces.
    pub figures: String,
    /// Its title.
    pub title: String,
    /// Every run, measured.
    pub runs: Vec<RunResults>,
    /// Every claim, with ordo's number and the verdict.
    pub claims: Vec<ClaimResult>,
}

/// One run's measurements.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunResults {
    /// The run's id.
    pub id: String,
    /// Its series on the charts.
    pub series: String,
    /// The protocol.
    pub protocol: String,
    /// What it measured.
    pub measured: Measured,
}

/// One claim, judged.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClaimResult {
    /// What is compared.
    pub what: String,
    /// The paper's number.
    pub paper: Expected,
    /// ordo's number.
    pub ordo: Option<f64>,
    /// Their unit.
    pub unit: String,
    /// ordo over the paper (to the nearest end of a range).
    pub ratio: Option<f64>,
    /// The tolerance it was judged with.
    pub tolerance: f64,
    /// The verdict.
    pub verdict: Verdict,
}

/// Whether ordo reproduces a claim.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Verdict {
    /// Within the tolerance.
    Reproduced,
    /// Outside it.
    NotReproduced,
    /// ordo does not measure it.
    NotMeasured,
}

impl ExperimentResults {
    /// Judges `experiment`'s claims against its measured `runs`.
    pub fn judge(experiment: &Experiment, runs: Vec<RunResults>) -> ExperimentResults {
        let claims = experiment.claims.iter().map(|claim| judge(claim, &runs)).collect();
        ExperimentResults {
            id: experiment.id.into(),
            figures: experiment.figures.into(),
            title: experiment.title.into(),
            runs,
            claims,
        }
    }
}

fn judge(claim: &Claim, runs: &[RunResults]) -> ClaimResult {
    let ordo = claim.ordo.as_ref().and_then(|value| evaluate(value, runs));
    let ratio = ordo.map(|o| claim.paper.ratio(o)).filter(|r| r.is_finite());
    let verdict = match ordo {
        None => Verdict::NotMeasured,
        Some(o) if claim.paper.holds(o, claim.tolerance) => Verdict::Reproduced,
        Some(_) => Verdict::NotReproduced,
    };
    ClaimResult {
        what: claim.what.clone(),
        paper: claim.paper,
        ordo,
        unit: claim.unit.into(),
        ratio,
        tolerance: claim.tolerance,
        verdict,
    }
}

/// ordo's number for `value`, or `None` when a run or metric it names is missing.
pub fn evaluate(value: &Value, runs: &[RunResults]) -> Option<f64> {
    let of_series = |series: &String, metric: &str| -> Vec<f64> {
        runs.iter().filter(|r| &r.series == series).filter_map(|r| r.measured.metrics.get(metric).copied()).collect()
    };
    match value {
        Value::Metric { run, metric } => runs.iter().find(|r| &r.id == run)?.measured.metrics.get(*metric).copied(),
        Value::Max { series, metric } => of_series(series, metric).into_iter().reduce(f64::max),
        Value::Min { series, metric } => of_series(series, metric).into_iter().reduce(f64::min),
        Value::Best { runs: ids, metric } => (runs.iter().filter(|r| ids.contains(&r.id)))
            .filter_map(|r| r.measured.metrics.get(*metric).copied())
            .reduce(f64::max),
        Value::Ratio(top, bottom) => Some(evaluate(top, runs)? / evaluate(bottom, runs)?),
    }
}

/// What moved from `before` to `after`: one line per changed metric, claim verdict, or run or
/// experiment present in only one of them. Empty when nothing moved.
pub fn compare(before: &Results, after: &Results) -> Vec<String> {
    let mut lines = Vec::new();
    if before.paper != after.paper {
        lines.push(format!("different papers: {} and {}", before.paper, after.paper));
    }
    let index = |results: &Results| -> BTreeMap<(String, String), Measured> {
        let runs = results.experiments.iter().flat_map(|e| e.runs.iter().map(move |r| (e, r)));
        runs.map(|(e, r)| ((e.id.clone(), r.id.clone()), r.measured.clone())).collect()
    };
    let (old, new) = (index(before), index(after));
    for key in old.keys().chain(new.keys().filter(|k| !old.contains_key(*k))) {
        let name = format!("{} {}", key.0, key.1);
        match (old.get(key), new.get(key)) {
            (Some(a), Some(b)) => compare_run(&name, a, b, &mut lines),
            (Some(_), None) => lines.push(format!("{name}: only in the first")),
            _ => lines.push(format!("{name}: only in the second")),
        }
    }
    let verdicts = |results: &Results| -> BTreeMap<(String, String), Verdict> {
        let claims = results.experiments.iter().flat_map(|e| e.claims.iter().map(move |c| (e, c)));
        claims.map(|(e, c)| ((e.id.clone(), c.what.clone()), c.verdict)).collect()
    };
    let (old, new) = (verdicts(before), verdicts(after));
    for (key, verdict) in &old {
        if let Some(now) = new.get(key).filter(|now| *now != verdict) {
            lines.push(format!("{} \"{}\": {verdict:?} -> {now:?}", key.0, key.1));
        }
    }
    lines
}

fn compare_run(name: &str, a: &Measured, b: &Measured, lines: &mut Vec<String>) {
    for (metric, old) in &a.metrics {
        match b.metrics.get(metric) {
            Some(new) if new == old => {}
            Some(new) => {
                let change = if *old != 0.0 { format!(" ({:+.1}%)", (new / old - 1.0) * 100.0) } else { String::new() };
                lines.push(format!(
                    "{name} {metric}: {} -> {}{change}",
                    crate::experiment::number(*old),
                    crate::experiment::number(*new)
                ));
            }
            None => lines.push(format!("{name} {metric}: only in the first")),
        }
    }
    for metric in b.metrics.keys().filter(|m| !a.metrics.contains_key(*m)) {
        lines.push(format!("{name} {metric}: only in the second"));
    }
    for (curve, points) in &a.curves {
        if b.curves.get(curve) != Some(points) {
            lines.push(format!("{name} {curve}: the curve changed"));
        }
    }
    if a.violation != b.violation {
        lines.push(format!("{name} violation: {:?} -> {:?}", a.violation, b.violation));
    }
}
