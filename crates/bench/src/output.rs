//! Results on disk: `points.csv` (one row per load point), `results.json`, `cdf.csv`, and two
//! PNG plots: throughput against p50/p99 latency (one curve per protocol) and the latency CDF of
//! each protocol's highest-throughput point. The font is DejaVu Sans, embedded (its licence is
//! in `assets/`), so plotting needs no system fonts.

use crate::load::PointResult;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Writes every file into `dir`; returns the paths written.
pub fn write_all(dir: &Path, results: &[PointResult]) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut csv = String::from(
        "protocol,clients,offered_per_s,throughput_per_s,p50_us,p90_us,p99_us,p999_us,max_us,errors,timeouts,dropped\n",
    );
    for r in results {
        let offered = r.offered_per_s.map_or(String::new(), |o| format!("{o:.0}"));
        let [p50, p90, p99, p999, max] = r.latency_us;
        let _ = writeln!(
            csv,
            "{},{},{offered},{:.1},{p50},{p90},{p99},{p999},{max},{},{},{}",
            r.protocol, r.clients, r.throughput_per_s, r.errors, r.timeouts, r.dropped
        );
    }
    let mut cdf = String::from("protocol,clients,offered_per_s,latency_us,fraction\n");
    for r in results {
        for (latency, fraction) in &r.cdf {
            let offered = r.offered_per_s.map_or(String::new(), |o| format!("{o:.0}"));
            let _ = writeln!(cdf, "{},{},{offered},{latency},{fraction:.6}", r.protocol, r.clients);
        }
    }
    for (name, body) in [
        ("points.csv", csv),
        ("cdf.csv", cdf),
        ("results.json", serde_json::to_string_pretty(results).expect("results serialize")),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    let path = dir.join("throughput-latency.png");
    plot_throughput_latency(&path, results).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path.display().to_string());
    let path = dir.join("latency-cdf.png");
    plot_cdf(&path, results).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path.display().to_string());
    Ok(written)
}

fn register_font() {
    // Registering twice is harmless; an invalid embedded font would be a build mistake.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).ok().expect("embedded font is valid");
}

fn protocols(results: &[PointResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results {
        if !names.contains(&r.protocol) {
            names.push(r.protocol.clone());
        }
    }
    names
}

fn plot_throughput_latency(path: &Path, results: &[PointResult]) -> Result<(), Box<dyn std::error::Error>> {
    register_font();
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_max = results.iter().map(|r| r.throughput_per_s).fold(1.0, f64::max) * 1.1;
    let y_max = results.iter().map(|r| r.latency_us[2] as f64 / 1e3).fold(0.1, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput vs latency (solid: p50, dashed: p99)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, (0.01..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("throughput (ops/s)")
        .y_desc("latency (ms)")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (index, protocol) in protocols(results).iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let mut points: Vec<&PointResult> = results.iter().filter(|r| &r.protocol == protocol).collect();
        points.sort_by(|a, b| a.throughput_per_s.total_cmp(&b.throughput_per_s));
        let p50: Vec<(f64, f64)> =
            points.iter().map(|r| (r.throughput_per_s, (r.latency_us[0] as f64 / 1e3).max(0.01))).collect();
        let p99: Vec<(f64, f64)> =
            points.iter().map(|r| (r.throughput_per_s, (r.latency_us[2] as f64 / 1e3).max(0.01))).collect();
        chart
            .draw_series(LineSeries::new(p50.clone(), color.stroke_width(2)))?
            .label(protocol.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(p50.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        chart.draw_series(DashedLineSeries::new(p99, 6, 4, color.stroke_width(1)))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

fn plot_cdf(path: &Path, results: &[PointResult]) -> Result<(), Box<dyn std::error::Error>> {
    register_font();
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_max = results.iter().flat_map(|r| r.cdf.last()).map(|(l, _)| *l as f64 / 1e3).fold(0.1, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency CDF (highest-throughput point of each protocol)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0.01..x_max).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms)")
        .y_desc("fraction of operations")
        .label_style(("sans-serif", 14))
        .draw()?;
    let series: Vec<Series> = protocols(results)
        .into_iter()
        .filter_map(|protocol| {
            let best = results
                .iter()
                .filter(|r| r.protocol == protocol)
                .max_by(|a, b| a.throughput_per_s.total_cmp(&b.throughput_per_s))?;
            let points = best.cdf.iter().map(|&(l, f)| ((l as f64 / 1e3).max(0.01), f)).collect();
            Some(Series { label: protocol, points })
        })
        .collect();
    draw_lines_with_legend(&mut chart, &series)?;
    root.present()?;
    Ok(())
}

/// Draws each series as a line in its palette colour, with the legend in the lower right.
fn draw_lines_with_legend<'a, X, Y>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (index, line) in series.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(2)))?
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
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
/// both axes linear from zero.
pub fn plot_series(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    draw_series_png(path, title, x_desc, y_desc, series).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_series_png(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    register_font();
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1e-9, f64::max);
    let y_max = points().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    let y_label = |y: &f64| if y_max >= 1e4 { format!("{:.0}k", y / 1e3) } else { format!("{y:.1}") };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 14))
        .draw()?;
    draw_lines_with_legend(&mut chart, series)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_csv_json_and_plots() {
        // Goal: the files are written and the PNGs are real images, without system fonts.
        let dir = std::env::temp_dir().join(format!("ordo-bench-output-{}", std::process::id()));
        let point = |protocol: &str, t: f64, p50: u64| PointResult {
            protocol: protocol.into(),
            clients: 4,
            offered_per_s: None,
            throughput_per_s: t,
            latency_us: [p50, p50 * 2, p50 * 3, p50 * 4, p50 * 5],
            errors: 0,
            timeouts: 0,
            dropped: 0,
            cdf: vec![(p50 / 2, 0.1), (p50, 0.5), (p50 * 3, 0.99), (p50 * 5, 1.0)],
        };
        let results = vec![point("a", 1_000.0, 300), point("a", 5_000.0, 900), point("b", 2_000.0, 500)];
        let written = write_all(&dir, &results).expect("written");
        assert_eq!(written.len(), 5);
        let png = std::fs::read(dir.join("throughput-latency.png")).expect("png");
        assert!(png.starts_with(b"\x89PNG"));
        let series = [Series { label: "a".into(), points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)] }];
        let path = dir.join("series.png");
        plot_series(&path, "title", "x", "y", &series).expect("plotted");
        assert!(std::fs::read(&path).expect("png").starts_with(b"\x89PNG"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
