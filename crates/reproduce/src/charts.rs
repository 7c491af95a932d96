//! Each chart of an experiment drawn as a PNG: the measured lines and the paper's numbers.

use crate::experiment::{Chart, ChartKind, Experiment};
use crate::results::RunResults;
use ordo_bench::figure::{Figure, plot_figure};
use ordo_bench::plot::Series;
use std::path::Path;

/// Writes `chart` of `experiment` into `dir` as `<file>.png`.
pub fn draw(
    dir: &Path,
    experiment: &Experiment,
    chart: &Chart,
    runs: &[RunResults],
    quick: bool,
) -> Result<(), String> {
    let chosen: Vec<RunResults> = runs
        .iter()
        .filter(|r| chart.only.as_ref().is_none_or(|prefix| r.id.starts_with(prefix.as_str())))
        .cloned()
        .collect();
    let runs = &chosen[..];
    let series = match &chart.kind {
        ChartKind::Lines => lines(chart, runs),
        ChartKind::Categories { metrics, .. } => runs
            .iter()
            .map(|run| {
                let points = (metrics.iter().enumerate())
                    .filter_map(|(i, metric)| run.measured.metrics.get(*metric).map(|v| (i as f64, *v)))
                    .collect();
                Series { label: run.series.clone(), points }
            })
            .collect(),
        ChartKind::Timeline { curve } => runs
            .iter()
            .filter_map(|run| run.measured.curves.get(*curve).map(|points| (run, points)))
            .map(|(run, points)| Series { label: run.id.clone(), points: points.clone() })
            .collect(),
        ChartKind::Window { curve, at_ms, before_ms, after_ms } => runs
            .iter()
            .filter_map(|run| run.measured.curves.get(*curve).map(|points| (run, points)))
            .map(|(run, points)| {
                let shown = (points.iter().map(|(t, y)| (t - at_ms, *y)))
                    .filter(|(t, _)| (-before_ms..=*after_ms).contains(t))
                    .collect();
                Series { label: run.id.clone(), points: shown }
            })
            .collect(),
    };
    let paper = chart.paper.iter().map(|(label, points)| Series { label: label.clone(), points: points.clone() });
    let x_categories = match &chart.kind {
        ChartKind::Categories { names, .. } => names.iter().map(|n| n.to_string()).collect(),
        _ => Vec::new(),
    };
    let mut lines_under_title = vec![format!("{}: {}", experiment.figures, experiment.title)];
    if quick {
        lines_under_title.push("quick run: fewer points and shorter runs than the full reproduction".into());
    }
    let figure = Figure {
        title: chart.title.clone(),
        lines: lines_under_title,
        x_desc: chart.x.desc.into(),
        y_desc: chart.y.desc.into(),
        x_log: chart.x.log,
        y_log: chart.y.log,
        x_categories,
        series,
        paper: paper.collect(),
    };
    plot_figure(&dir.join(format!("{}.png", chart.file)), &figure)
}

/// One line per series, in the order series first appear; points in the order of the runs'
/// parameter (metric `x`: offered load, clients...), so that a curve drawn against a measured
/// number (throughput) follows its runs instead of zigzagging where that number stops rising.
fn lines(chart: &Chart, runs: &[RunResults]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for run in runs {
        if !series.iter().any(|s| s.label == run.series) {
            series.push(Series { label: run.series.clone(), points: Vec::new() });
        }
    }
    let parameter = |run: &RunResults| run.measured.metrics.get("x").copied().unwrap_or(0.0);
    let mut ordered: Vec<&RunResults> = runs.iter().collect();
    ordered.sort_by(|a, b| parameter(a).total_cmp(&parameter(b)));
    for run in ordered {
        let metrics = &run.measured.metrics;
        let (Some(x), Some(y)) = (metrics.get(chart.x.metric), metrics.get(chart.y.metric)) else { continue };
        if let Some(line) = series.iter_mut().find(|s| s.label == run.series) {
            line.points.push((*x, *y));
        }
    }
    series.retain(|line| !line.points.is_empty());
    series
}
