//! PNG plots: throughput against p50 and p99 latency, the latency CDF, and plain time series.
//! Every plot has a title block (the title and, for benchmarks, the run's settings), a legend in
//! a column of its own so that it never hides data, a colour-blind-safe palette with a marker
//! shape per line, and plain tick labels (`5k`, `0.5`). Log axes are labelled at 1, 2 and 5 of
//! each decade, since plotters' default labels a log axis only at a few powers of ten. The font is
//! DejaVu Sans, embedded (its licence is in `assets/`), so plotting needs no system fonts.

use crate::load::PointResult;
use crate::settings::Settings;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
pub(crate) type Chart<'a, X, Y> = ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>;
pub(crate) type Drawn = Result<(), Box<dyn std::error::Error>>;

/// Pixels of every PNG: wide enough for the legend column and a settings line of ~120 characters.
pub(crate) const SIZE: (u32, u32) = (1100, 720);
/// Width of the legend column, right of the chart.
const LEGEND_WIDTH: u32 = 230;

/// Okabe and Ito's colour-blind-safe palette without its yellow, which is unreadable on white;
/// the darkest colours first, since most plots compare two or three protocols.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(0, 0, 0),       // black
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
];

/// Grey of the settings lines and reference lines: quieter than the data, still readable.
pub(crate) const GREY: RGBColor = RGBColor(80, 80, 80);

/// The palette colour of the `index`th line.
pub(crate) fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// A point marker; each line gets its own shape, so lines differ even in grey print.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    Cross,
    /// A large open ring: the paper's numbers on a figure.
    Ring,
}

/// The marker of the `index`th line.
pub(crate) fn marker(index: usize) -> Marker {
    [Marker::Circle, Marker::Triangle, Marker::Square, Marker::Diamond, Marker::Cross][index % 5]
}

/// Draws `marker` centred at pixel `at` of `area`: filled, or (for p99) an outline filled with
/// white, so that the line through it does not make it look filled.
pub(crate) fn draw_marker(area: &Area, marker: Marker, at: (i32, i32), color: RGBColor, filled: bool) -> Drawn {
    let (x, y) = at;
    let outline = match marker {
        Marker::Circle => {
            area.draw(&Circle::new(at, 5, if filled { color.filled() } else { WHITE.filled() }))?;
            if !filled {
                area.draw(&Circle::new(at, 5, color.stroke_width(2)))?;
            }
            return Ok(());
        }
        Marker::Cross => return Ok(area.draw(&Cross::new(at, 5, color.stroke_width(2)))?),
        Marker::Ring => return Ok(area.draw(&Circle::new(at, 9, color.stroke_width(3)))?),
        Marker::Triangle => vec![(x, y - 6), (x + 6, y + 5), (x - 6, y + 5)],
        Marker::Square => vec![(x - 5, y - 5), (x + 5, y - 5), (x + 5, y + 5), (x - 5, y + 5)],
        Marker::Diamond => vec![(x, y - 7), (x + 7, y), (x, y + 7), (x - 7, y)],
    };
    area.draw(&Polygon::new(outline.clone(), if filled { color.filled() } else { WHITE.filled() }))?;
    if !filled {
        let closed: Vec<(i32, i32)> = outline.iter().chain(outline.first()).copied().collect();
        area.draw(&PathElement::new(closed, color.stroke_width(2)))?;
    }
    Ok(())
}

/// One line of the legend: its colour, line style and marker, a label and an optional second
/// line in smaller type.
pub(crate) struct LegendEntry {
    pub(crate) label: String,
    pub(crate) detail: Option<String>,
    pub(crate) color: RGBColor,
    pub(crate) dashed: bool,
    pub(crate) marker: Marker,
    pub(crate) filled: bool,
}

/// Draws the legend top-down in its own column.
pub(crate) fn draw_legend(area: &Area, entries: &[LegendEntry]) -> Drawn {
    let label_style = ("sans-serif", 16).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let detail_style = ("sans-serif", 13).into_font().color(&GREY).pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 30;
    for entry in entries {
        let style = entry.color.stroke_width(2);
        if matches!(entry.marker, Marker::Ring) {
            // A ring stands alone, as on the chart.
        } else if entry.dashed {
            for start in [4, 18, 32] {
                area.draw(&PathElement::new(vec![(start, y), (start + 8, y)], style))?;
            }
        } else {
            area.draw(&PathElement::new(vec![(4, y), (40, y)], style))?;
        }
        draw_marker(area, entry.marker, (22, y), entry.color, entry.filled)?;
        area.draw_text(&entry.label, &label_style, (50, y))?;
        y += 24;
        if let Some(detail) = &entry.detail {
            area.draw_text(detail, &detail_style, (50, y - 6))?;
            y += 18;
        }
    }
    Ok(())
}

/// Fills the image, draws the title block and returns the chart's area and the legend column.
pub(crate) fn layout<'a>(
    root: &Area<'a>,
    title: &str,
    lines: &[String],
) -> Result<(Area<'a>, Area<'a>), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let header_height = 48 + 21 * lines.len() as u32;
    let (header, body) = root.split_vertically(header_height);
    draw_fitted(&header, title, 24, BLACK, (20, 14))?;
    for (index, line) in lines.iter().enumerate() {
        draw_fitted(&header, line, 15, GREY, (20, 48 + 21 * index as i32))?;
    }
    let (chart, legend) = body.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    Ok((chart, legend))
}

/// Draws `text` at `at` in `size` points, or smaller (down to 9) when it would run past the right
/// edge: a title naming many protocols, or many `--set` options, must not be cut.
fn draw_fitted(area: &Area, text: &str, size: u32, color: RGBColor, at: (i32, i32)) -> Drawn {
    let room = SIZE.0.saturating_sub(at.0 as u32 + 10);
    let mut size = size;
    while size > 9 && area.estimate_text_size(text, &("sans-serif", size).into())?.0 > room {
        size -= 1;
    }
    area.draw_text(text, &("sans-serif", size).into_font().color(&color), at)?;
    Ok(())
}

/// Draws grid, ticks and axis descriptions with plain labels on both axes.
fn draw_mesh<X, Y>(chart: &mut Chart<'_, X, Y>, x_desc: &str, y_desc: &str) -> Drawn
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_mesh_named(chart, x_desc, y_desc, &[])
}

/// [`draw_mesh`], with x a category axis when `categories` is not empty: x = i is labelled
/// `categories[i]`.
pub(crate) fn draw_mesh_named<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    x_desc: &str,
    y_desc: &str,
    categories: &[String],
) -> Drawn
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (x_max, y_max) = (chart.x_range().end, chart.y_range().end);
    let x_label = |v: &f64| {
        if categories.is_empty() {
            return format_axis_tick(*v, x_max);
        }
        let index = v.round();
        let named = (v - index).abs() < 1e-6 && index >= 0.0;
        categories.get(index as usize).filter(|_| named).cloned().unwrap_or_default()
    };
    let y_label = |v: &f64| format_axis_tick(*v, y_max);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(238, 238, 238))
        // One light line between labels on linear axes; log axes name their own (1 to 9 × 10^k).
        .max_light_lines(1);
    if !categories.is_empty() {
        // A label at each category and a grid line between neighbours.
        mesh.x_labels(categories.len() * 2 + 1);
    }
    mesh.draw()?;
    Ok(())
}

/// Draws the `index`th line in its colour with a marker at every `every`th point, and returns
/// its legend entry.
pub(crate) fn draw_line<X, Y>(
    root: &Area,
    chart: &mut Chart<'_, X, Y>,
    index: usize,
    line: &Series,
    every: usize,
) -> Result<LegendEntry, Box<dyn std::error::Error>>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (color, marker) = (color(index), marker(index));
    let points = line.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite());
    chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
    for point in points.step_by(every.max(1)) {
        draw_marker(root, marker, chart.backend_coord(&point), color, true)?;
    }
    Ok(LegendEntry { label: line.label.clone(), detail: None, color, dashed: false, marker, filled: true })
}

/// The labelled ticks of a log axis over `[low, high]`: 1, 2 and 5 times each power of ten,
/// or only the powers of ten when the axis spans more than five decades (more labels would
/// collide).
pub fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let decades = (high / low).log10();
    let mantissas: &[f64] = if decades > 5.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    log_values(low, high, mantissas)
}

/// The unlabelled grid lines of a log axis: 1 to 9 times each power of ten.
pub(crate) fn log_grid(low: f64, high: f64) -> Vec<f64> {
    log_values(low, high, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

/// `mantissa × 10^k` for every `k`, within `[low, high]` (with a little slack for rounding).
fn log_values(low: f64, high: f64, mantissas: &[f64]) -> Vec<f64> {
    assert!(low > 0.0 && low < high, "a log axis needs 0 < low < high, got {low}..{high}");
    let (first, last) = (low.log10().floor() as i32, high.log10().ceil() as i32);
    (first..=last)
        .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
        .filter(|v| *v >= low * (1.0 - 1e-9) && *v <= high * (1.0 + 1e-9))
        .collect()
}

/// A log axis' range around `[min, max]`, widened to the nearest 1-2-5 steps so that both ends
/// carry a label; 0.1 to 10 when there is no data (`min` and `max` are then the folds' starting
/// values, `f64::MAX` and 0), so that a run whose points all failed still plots.
pub(crate) fn log_bounds(min: f64, max: f64) -> (f64, f64) {
    if !(min.is_finite() && max.is_finite() && min <= max && max > 0.0) || min == f64::MAX {
        return (0.1, 10.0);
    }
    let min = min.max(1e-3);
    let max = max.max(min * 1.5);
    let steps = log_values(min / 10.0, max * 10.0, &[1.0, 2.0, 5.0]);
    let low = steps.iter().copied().filter(|s| *s <= min * 0.95).fold(min / 10.0, f64::max);
    let high = steps.iter().copied().filter(|s| *s >= max * 1.1).fold(max * 10.0, f64::min);
    (low, high)
}

pub(crate) fn register_font() {
    // Registering twice is harmless; an invalid embedded font would be a build mistake.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).ok().expect("embedded font is valid");
}

/// The protocols of `results`, in order of first appearance.
fn protocols(results: &[PointResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results {
        if !names.contains(&r.protocol) {
            names.push(r.protocol.clone());
        }
    }
    names
}

/// Latency in ms from µs, floored so that a log axis can show it.
fn ms(latency_us: u64) -> f64 {
    (latency_us as f64 / 1e3).max(1e-3)
}

/// What a point's label says: its offered load (open loop) or its client count (closed loop).
fn load_label(r: &PointResult) -> String {
    r.offered_per_s.map_or(r.clients.to_string(), format_tick)
}

/// A plain tick label: at most three significant digits, no trailing zeros, and `k` or `M` for
/// thousands and millions (`5000` is `5k`, `0.5` is `0.5`, `12500` is `12.5k`, `250` is `250`).
pub fn format_tick(value: f64) -> String {
    format_scaled(value, 1e3)
}

/// The tick label of `value` on an axis that ends at `axis_max`: thousands are written out
/// (`1000`, `5000`: a time axis in ms reads better so) unless the axis reaches 10,000, where `k`
/// keeps the labels short and alike along the whole axis (`5k`, `10k`, not `5000`, `10k`).
pub fn format_axis_tick(value: f64, axis_max: f64) -> String {
    format_scaled(value, if axis_max.abs() < 1e4 { 1e6 } else { 1e3 })
}

/// [`format_tick`], with `k` from `thousands_from` on.
fn format_scaled(value: f64, thousands_from: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "0".into();
    }
    // Round to three significant digits first, so that 999.9 becomes `1k`, not `1000`.
    let step = 10f64.powi(value.abs().log10().floor() as i32 - 2);
    let rounded = (value / step).round() * step;
    let (scaled, suffix) = match rounded.abs() {
        m if m >= 1e6 => (rounded / 1e6, "M"),
        m if m >= thousands_from => (rounded / 1e3, "k"),
        _ => (rounded, ""),
    };
    // Decimals for three significant digits: 12.5 needs one, 0.05 needs three.
    let digits_before_point = scaled.abs().log10().floor() as i32 + 1;
    let decimals = (3 - digits_before_point).max(0) as usize;
    let text = format!("{scaled:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text}{suffix}")
}

/// Writes the throughput–latency plot: per protocol, p50 (solid, filled markers) and p99
/// (dashed, outlined markers) against throughput on a log latency axis, each point labelled
/// with its load.
pub fn plot_throughput_latency(path: &Path, settings: &Settings, results: &[PointResult]) -> Drawn {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let what = if settings.load == "open" { "offered ops/s" } else { "clients" };
    let title = format!("{}: throughput vs latency (numbers at points: {what})", settings.protocols.join(", "));
    let (area, legend_area) = layout(&root, &title, &settings.title_lines())?;
    let x_max = results.iter().map(|r| r.throughput_per_s).fold(1.0, f64::max) * 1.12;
    let latencies = || results.iter().flat_map(|r| [ms(r.latency_us[0]), ms(r.latency_us[2])]);
    let (low, high) = log_bounds(latencies().fold(f64::MAX, f64::min), latencies().fold(0.0, f64::max));
    let y_axis = (low..high).log_scale().with_key_points(log_ticks(low, high)).with_light_points(log_grid(low, high));
    let mut chart = ChartBuilder::on(&area)
        .margin(15)
        .margin_right(25)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, y_axis)?;
    draw_mesh(&mut chart, "throughput (operations/s)", "latency (ms, log scale)")?;
    let (mut legend, mut labels) = (Vec::new(), Labels::default());
    for (index, protocol) in protocols(results).iter().enumerate() {
        let mut points: Vec<&PointResult> = results.iter().filter(|r| &r.protocol == protocol).collect();
        points.sort_by(|a, b| a.throughput_per_s.total_cmp(&b.throughput_per_s));
        draw_latency_curves(&root, &mut chart, index, &points, &mut labels)?;
        for (quantile, dashed) in [("p50", false), ("p99", true)] {
            let (color, marker, filled) = (color(index), marker(index), !dashed);
            let label = format!("{protocol} {quantile}");
            legend.push(LegendEntry { label, detail: None, color, dashed, marker, filled });
        }
    }
    // Labels last, so that no later line crosses them.
    labels.draw(&root)?;
    draw_legend(&legend_area, &legend)?;
    root.present()?;
    Ok(())
}

/// A label to draw at a point: its text, colour, and the pixel of the point.
struct Label {
    text: String,
    color: RGBColor,
    at: (i32, i32),
}

/// Point labels, placed after every line and marker is drawn: each goes above its point, or
/// right, left or below it when that spot overlaps a marker or a label already placed; each sits
/// on a white box so that a line crossing it does not hide it.
#[derive(Default)]
struct Labels {
    labels: Vec<Label>,
    /// Pixels of every marker, to keep labels off them.
    markers: Vec<(i32, i32)>,
}

impl Labels {
    fn draw(&self, root: &Area) -> Drawn {
        const MARKER_RADIUS: i32 = 7;
        let mut taken: Vec<[i32; 4]> = self
            .markers
            .iter()
            .map(|&(x, y)| [x - MARKER_RADIUS, y - MARKER_RADIUS, x + MARKER_RADIUS, y + MARKER_RADIUS])
            .collect();
        let overlaps = |a: &[i32; 4], b: &[i32; 4]| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
        for label in &self.labels {
            let style = ("sans-serif", 14).into_font().color(&label.color).pos(Pos::new(HPos::Left, VPos::Top));
            let (width, height) = root.estimate_text_size(&label.text, &style)?;
            let (w, h, (x, y)) = (width as i32 + 4, height as i32 + 2, label.at);
            let gap = MARKER_RADIUS + 2;
            let spots =
                [(x - w / 2, y - gap - h), (x + gap, y - h / 2), (x - gap - w, y - h / 2), (x - w / 2, y + gap)];
            let boxes = spots.map(|(left, top)| [left, top, left + w, top + h]);
            let chosen = boxes.iter().find(|b| !taken.iter().any(|t| overlaps(b, t))).unwrap_or(&boxes[0]);
            root.draw(&Rectangle::new([(chosen[0], chosen[1]), (chosen[2], chosen[3])], WHITE.mix(0.85).filled()))?;
            root.draw_text(&label.text, &style, (chosen[0] + 2, chosen[1] + 1))?;
            taken.push(*chosen);
        }
        Ok(())
    }
}

/// Draws one protocol's p50 and p99 curves with their markers, and queues its load labels at the
/// p99 markers (above them is the free side of the upper curve).
fn draw_latency_curves<X, Y>(
    root: &Area,
    chart: &mut Chart<'_, X, Y>,
    index: usize,
    points: &[&PointResult],
    labels: &mut Labels,
) -> Drawn
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let color = color(index);
    let p50: Vec<(f64, f64)> = points.iter().map(|r| (r.throughput_per_s, ms(r.latency_us[0]))).collect();
    let p99: Vec<(f64, f64)> = points.iter().map(|r| (r.throughput_per_s, ms(r.latency_us[2]))).collect();
    chart.draw_series(LineSeries::new(p50.iter().copied(), color.stroke_width(2)))?;
    chart.draw_series(DashedLineSeries::new(p99.iter().copied(), 8, 6, color.stroke_width(2)))?;
    for ((r, at50), at99) in points.iter().zip(&p50).zip(&p99) {
        let (at50, at99) = (chart.backend_coord(at50), chart.backend_coord(at99));
        draw_marker(root, marker(index), at50, color, true)?;
        draw_marker(root, marker(index), at99, color, false)?;
        labels.markers.extend([at50, at99]);
        labels.labels.push(Label { text: load_label(r), color, at: at99 });
    }
    Ok(())
}

/// Writes the CDF plot: for each protocol, the latency distribution of its highest-throughput
/// point on a log latency axis, with its p50 and p99 marked.
pub fn plot_cdf(path: &Path, settings: &Settings, results: &[PointResult]) -> Drawn {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let title = format!("{}: latency CDF at each protocol's highest throughput", settings.protocols.join(", "));
    let (area, legend_area) = layout(&root, &title, &settings.title_lines())?;
    let best: Vec<&PointResult> = protocols(results)
        .iter()
        .filter_map(|protocol| {
            let runs = results.iter().filter(|r| &r.protocol == protocol);
            runs.max_by(|a, b| a.throughput_per_s.total_cmp(&b.throughput_per_s))
        })
        .collect();
    let latencies = || best.iter().flat_map(|r| r.cdf.iter().map(|(l, _)| ms(*l)));
    let (low, high) = log_bounds(latencies().fold(f64::MAX, f64::min), latencies().fold(0.0, f64::max));
    let x_axis = (low..high).log_scale().with_key_points(log_ticks(low, high)).with_light_points(log_grid(low, high));
    let mut chart = ChartBuilder::on(&area)
        .margin(15)
        .margin_right(25)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x_axis, 0.0..1.0)?;
    draw_mesh(&mut chart, "latency (ms, log scale)", "fraction of operations at or below")?;
    for (quantile, fraction) in [("p50", 0.5), ("p99", 0.99)] {
        chart.draw_series(DashedLineSeries::new([(low, fraction), (high, fraction)], 4, 4, GREY.stroke_width(1)))?;
        let (x, y) = chart.backend_coord(&(low, fraction));
        let style = ("sans-serif", 13).into_font().color(&GREY).pos(Pos::new(HPos::Left, VPos::Bottom));
        root.draw_text(quantile, &style, (x + 4, y - 2))?;
    }
    let mut legend = Vec::new();
    for (index, r) in best.iter().enumerate() {
        let (color, marker) = (color(index), marker(index));
        let points = r.cdf.iter().map(|&(l, f)| (ms(l), f));
        chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
        for (latency, fraction) in [(r.latency_us[0], 0.5), (r.latency_us[2], 0.99)] {
            draw_marker(&root, marker, chart.backend_coord(&(ms(latency), fraction)), color, true)?;
        }
        // Short enough for the legend column even at millions of operations per second.
        let load = r.offered_per_s.map_or(format!("{} clients", r.clients), |o| format!("{} offered", format_tick(o)));
        let detail = Some(format!("{load}: {} ops/s", format_tick(r.throughput_per_s)));
        legend.push(LegendEntry { label: r.protocol.clone(), detail, color, dashed: false, marker, filled: true });
    }
    draw_legend(&legend_area, &legend)?;
    root.present()?;
    Ok(())
}

/// One named line of a time series plot: `(x, y)` points in x order.
pub struct Series {
    /// The legend's label.
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// Writes a PNG with one line per series (for example throughput per 10 ms around a crash),
/// both axes linear from zero, with the palette, markers, tick labels and legend column of the
/// benchmark plots. The axis descriptions should name their units.
pub fn plot_series(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    draw_series_png(path, title, x_desc, y_desc, series).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_series_png(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> Drawn {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let (area, legend_area) = layout(&root, title, &[])?;
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1e-9, f64::max);
    let y_max = points().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&area)
        .margin(15)
        .margin_right(25)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    draw_mesh(&mut chart, x_desc, y_desc)?;
    let mut legend = Vec::new();
    for (index, line) in series.iter().enumerate() {
        // About a dozen markers per line: enough to tell lines apart, few enough not to hide them.
        legend.push(draw_line(&root, &mut chart, index, line, line.points.len() / 12)?);
    }
    draw_legend(&legend_area, &legend)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_plain_numbers() {
        // Goal: tick labels read as a person writes numbers, never `5000.0`.
        // Method: values from each decade a plot of latency (ms) or throughput (ops/s) shows.
        let cases = [
            (0.0, "0"),
            (0.01, "0.01"),
            (0.05, "0.05"),
            (0.5, "0.5"),
            (1.0, "1"),
            (2.0, "2"),
            (12.5, "12.5"),
            (250.0, "250"),
            (1000.0, "1k"),
            (5000.0, "5k"),
            (12_500.0, "12.5k"),
            (20_000.0, "20k"),
            (2_000_000.0, "2M"),
            (0.0005, "0.0005"),
            (-3000.0, "-3k"),
            (999.9, "1k"),
            (1234.0, "1.23k"),
        ];
        for (value, text) in cases {
            assert_eq!(format_tick(value), text, "{value}");
        }
        // On an axis below 10,000 (a time axis in ms), thousands are written out.
        assert_eq!(format_axis_tick(1000.0, 1200.0), "1000");
        assert_eq!(format_axis_tick(5000.0, 9000.0), "5000");
        assert_eq!(format_axis_tick(5000.0, 20_000.0), "5k");
        assert_eq!(format_axis_tick(0.5, 2.0), "0.5");
    }

    #[test]
    fn log_axes_are_labelled_at_one_two_five() {
        // Goal: a log axis carries a label at each decade and between, and its range ends on a
        // label. Method: the ticks of typical latency ranges, and the bounds around data.
        assert_eq!(
            log_ticks(0.1, 10.0).iter().map(|v| format_tick(*v)).collect::<Vec<_>>(),
            ["0.1", "0.2", "0.5", "1", "2", "5", "10"]
        );
        assert_eq!(log_ticks(0.2, 50.0).len(), 8);
        let wide: Vec<String> = log_ticks(1e-3, 1e4).iter().map(|v| format_tick(*v)).collect();
        assert_eq!(wide, ["0.001", "0.01", "0.1", "1", "10", "100", "1k", "10k"]);
        let (low, high) = log_bounds(0.31, 7.2);
        assert_eq!((format_tick(low), format_tick(high)), ("0.2".to_string(), "10".to_string()));
        assert_eq!(log_bounds(f64::MAX, 0.0), (0.1, 10.0));
        let (low, high) = log_bounds(4.0, 4.0);
        assert!(low < 4.0 && high > 4.0 && log_ticks(low, high).len() >= 3, "{low}..{high}");
    }
}
