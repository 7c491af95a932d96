//! A paper's figure redrawn: measured lines, and the paper's own numbers overlaid as large
//! open rings in the colour of the line they belong to, so that a reader sees at a glance where
//! ordo lands against the paper. Axes are linear or log, or named categories (per-site plots).

use crate::plot::{
    Area, Chart, Drawn, GREY, LegendEntry, Marker, SIZE, Series, color, draw_legend, draw_line, draw_marker,
    draw_mesh_named, layout, log_bounds, log_grid, log_ticks, register_font,
};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use std::path::Path;

/// One figure: what its axes show, the measured lines and the paper's points.
pub struct Figure {
    /// The title line, naming the paper's figure.
    pub title: String,
    /// Lines under the title: the settings, in small grey type.
    pub lines: Vec<String>,
    /// The x axis description, with its unit.
    pub x_desc: String,
    /// The y axis description, with its unit.
    pub y_desc: String,
    /// Log scale on x.
    pub x_log: bool,
    /// Log scale on y.
    pub y_log: bool,
    /// When not empty, x is a category axis: x = i is labelled `x_categories[i]`.
    pub x_categories: Vec<String>,
    /// The measured lines.
    pub series: Vec<Series>,
    /// The paper's numbers, each labelled like the measured line it belongs to (same colour).
    pub paper: Vec<Series>,
}

/// Writes `figure` as a PNG at `path`.
pub fn plot_figure(path: &Path, figure: &Figure) -> Result<(), String> {
    draw_figure(path, figure).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_figure(path: &Path, figure: &Figure) -> Drawn {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let (area, legend_area) = layout(&root, &figure.title, &figure.lines)?;
    let all = || figure.series.iter().chain(&figure.paper).flat_map(|s| s.points.iter());
    let (x_range, y_range) = (range(all().map(|p| p.0), figure.x_log), range(all().map(|p| p.1), figure.y_log));
    let (x_range, y_range) = if figure.x_categories.is_empty() {
        (x_range, y_range)
    } else {
        ((-0.5, figure.x_categories.len() as f64 - 0.5), y_range)
    };
    let mut builder = ChartBuilder::on(&area);
    builder.margin(15).margin_right(25).x_label_area_size(50).y_label_area_size(70);
    let legend = match (figure.x_log, figure.y_log) {
        (false, false) => draw_on(&root, &mut builder.build_cartesian_2d(span(x_range), span(y_range))?, figure)?,
        (false, true) => draw_on(&root, &mut builder.build_cartesian_2d(span(x_range), log_axis(y_range))?, figure)?,
        (true, false) => draw_on(&root, &mut builder.build_cartesian_2d(log_axis(x_range), span(y_range))?, figure)?,
        (true, true) => draw_on(&root, &mut builder.build_cartesian_2d(log_axis(x_range), log_axis(y_range))?, figure)?,
    };
    draw_legend(&legend_area, &legend)?;
    root.present()?;
    Ok(())
}

fn span((low, high): (f64, f64)) -> std::ops::Range<f64> {
    low..high
}

type LogAxis = plotters::coord::combinators::WithKeyPoints<plotters::coord::combinators::LogCoord<f64>>;

fn log_axis((low, high): (f64, f64)) -> LogAxis {
    (low..high).log_scale().with_key_points(log_ticks(low, high)).with_light_points(log_grid(low, high))
}

/// The axis range around `values`: from zero (linear) or the nearest 1-2-5 steps (log).
fn range(values: impl Iterator<Item = f64> + Clone, log: bool) -> (f64, f64) {
    let finite = values.filter(|v| v.is_finite());
    let (min, max) = (finite.clone().fold(f64::MAX, f64::min), finite.fold(0.0, f64::max));
    if log {
        log_bounds(min.max(1e-6), max)
    } else {
        let low = if min < 0.0 { min * 1.1 } else { 0.0 };
        (low, if max > 0.0 { max * 1.1 } else { 1.0 })
    }
}

/// Draws the mesh, the lines and the paper's rings; returns the legend.
fn draw_on<X, Y>(
    root: &Area,
    chart: &mut Chart<'_, X, Y>,
    figure: &Figure,
) -> Result<Vec<LegendEntry>, Box<dyn std::error::Error>>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_mesh_named(chart, &figure.x_desc, &figure.y_desc, &figure.x_categories)?;
    let mut legend = Vec::new();
    for (index, line) in figure.series.iter().enumerate() {
        legend.push(draw_line(root, chart, index, line, 1)?);
    }
    for paper in &figure.paper {
        let index = figure.series.iter().position(|s| s.label == paper.label);
        let color = index.map_or(GREY, color);
        for point in &paper.points {
            draw_marker(root, Marker::Ring, chart.backend_coord(point), color, false)?;
        }
        let label = "paper (open ring)".to_string();
        let detail = Some(paper.label.clone());
        legend.push(LegendEntry { label, detail, color, dashed: false, marker: Marker::Ring, filled: false });
    }
    Ok(legend)
}
