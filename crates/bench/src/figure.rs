//! A paper's figure redrawn: measured lines, and the paper's own numbers overlaid as large
//! open rings in the colour of the line they belong to, so that a reader sees at a glance where
//! ordo lands against the paper. Axes are linear or log, or named categories (per-site plots).

use crate::plot::{
    Area, Chart, Drawn, GREY, LegendEntry, Marker, SIZE, color, draw_legend, draw_marker, layout, log_bounds, log_grid,
    log_ticks, marker, register_font,
};
use crate::plot::{Series, format_axis_tick};
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
    let (x_max, y_max) = (chart.x_range().end, chart.y_range().end);
    let categories = &figure.x_categories;
    let x_label = |v: &f64| {
        if categories.is_empty() {
            format_axis_tick(*v, x_max)
        } else {
            let index = v.round();
            let named = (v - index).abs() < 1e-6 && index >= 0.0;
            categories.get(index as usize).filter(|_| named).cloned().unwrap_or_default()
        }
    };
    let y_label = |v: &f64| format_axis_tick(*v, y_max);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&figure.x_desc)
        .y_desc(&figure.y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(1);
    if !categories.is_empty() {
        mesh.x_labels(categories.len() * 2 + 1);
    }
    mesh.draw()?;
    let mut legend = Vec::new();
    for (index, line) in figure.series.iter().enumerate() {
        let (color, marker) = (color(index), marker(index));
        let points = line.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite());
        chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
        for point in points {
            draw_marker(root, marker, chart.backend_coord(&point), color, true)?;
        }
        legend.push(LegendEntry {
            label: line.label.clone(),
            detail: None,
            color,
            dashed: false,
            marker,
            filled: true,
        });
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
