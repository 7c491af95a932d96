//! Results on disk: `points.csv` (one row per load point), `results.json` (the run's settings and
//! every point), `cdf.csv`, and two PNG plots (see [`crate::plot`]): throughput against p50/p99
//! latency (one colour per protocol) and the latency CDF of each protocol's highest-throughput
//! point.

use crate::load::PointResult;
pub use crate::plot::{Series, plot_series};
use crate::plot::{plot_cdf, plot_throughput_latency};
use crate::settings::Settings;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// The layout of `results.json`: the settings, then the points. The points were the whole file
/// before the settings were recorded; a reader of that layout reads `.points` now.
#[derive(Serialize)]
struct ResultsFile<'a> {
    settings: &'a Settings,
    points: &'a [PointResult],
}

/// Writes every file into `dir`; returns the paths written.
pub fn write_all(dir: &Path, settings: &Settings, results: &[PointResult]) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let json = ResultsFile { settings, points: results };
    for (name, body) in [
        ("points.csv", points_csv(results)),
        ("cdf.csv", cdf_csv(results)),
        ("results.json", serde_json::to_string_pretty(&json).expect("results serialize")),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    let path = dir.join("throughput-latency.png");
    plot_throughput_latency(&path, settings, results).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path.display().to_string());
    let path = dir.join("latency-cdf.png");
    plot_cdf(&path, settings, results).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path.display().to_string());
    Ok(written)
}

/// One row per load point.
fn points_csv(results: &[PointResult]) -> String {
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
    csv
}

/// One row per CDF step of each load point.
fn cdf_csv(results: &[PointResult]) -> String {
    let mut cdf = String::from("protocol,clients,offered_per_s,latency_us,fraction\n");
    for r in results {
        for (latency, fraction) in &r.cdf {
            let offered = r.offered_per_s.map_or(String::new(), |o| format!("{o:.0}"));
            let _ = writeln!(cdf, "{},{},{offered},{latency},{fraction:.6}", r.protocol, r.clients);
        }
    }
    cdf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Machine;

    /// Settings as `ordo bench --protocols a,b --clients 4,16 --set batch=8 --no-fsync` records.
    fn settings() -> Settings {
        Settings {
            protocols: vec!["a".into(), "b".into()],
            protocol_options: vec!["batch=8".into()],
            replicas: 3,
            workload: "ycsb-a".into(),
            workload_description: "50% reads, Zipfian 0.99 over 10000 keys".into(),
            keys: Some(10_000),
            value: crate::workload::Workload::VALUE_DESCRIPTION.into(),
            load: "closed".into(),
            load_points: vec![4.0, 16.0],
            duration_s: 5.0,
            warmup_s: 1.0,
            fsync: false,
            gateway_clients: 256,
            colocate: vec!["proxy".into()],
            machine: Machine { cores: 2, cpu_model: "Test CPU".into() },
            ordo_version: "0.1.0".into(),
        }
    }

    #[test]
    fn writes_csv_json_and_plots() {
        // Goal: the files are written, results.json holds the settings next to the points, and
        // the PNGs are real images, without system fonts.
        let dir = std::env::temp_dir().join(format!("ordo-bench-output-{}", std::process::id()));
        let point = |protocol: &str, clients: usize, t: f64, p50: u64| PointResult {
            protocol: protocol.into(),
            clients,
            offered_per_s: None,
            throughput_per_s: t,
            latency_us: [p50, p50 * 2, p50 * 3, p50 * 4, p50 * 5],
            errors: 0,
            timeouts: 0,
            dropped: 0,
            cdf: vec![(p50 / 2, 0.1), (p50, 0.5), (p50 * 3, 0.99), (p50 * 5, 1.0)],
        };
        let results = vec![point("a", 4, 1_000.0, 300), point("a", 16, 5_000.0, 900), point("b", 4, 2_000.0, 500)];
        let written = write_all(&dir, &settings(), &results).expect("written");
        assert_eq!(written.len(), 5);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).expect("json")).expect("valid");
        let recorded: Settings = serde_json::from_value(json["settings"].clone()).expect("settings");
        assert_eq!(recorded, settings());
        assert_eq!(json["settings"]["fsync"], false);
        assert_eq!(json["settings"]["replicas"], 3);
        assert_eq!(json["settings"]["machine"]["cores"], 2);
        assert_eq!(json["points"].as_array().map(Vec::len), Some(3));
        assert_eq!(json["points"][1]["clients"], 16);
        assert_eq!(
            settings().title_lines(),
            [
                "3 replicas, options batch=8, fsync off",
                "workload ycsb-a: 50% reads, Zipfian 0.99 over 10000 keys; values text c<client>-<op>, 4 to ~12 bytes",
                "closed loop with 4, 16 clients; 5 s measured after 1 s warm-up per point",
                "machine: 2 cores, Test CPU; ordo 0.1.0; load generator with 256 client nodes",
            ]
        );
        for png in ["throughput-latency.png", "latency-cdf.png"] {
            assert!(std::fs::read(dir.join(png)).expect("png").starts_with(b"\x89PNG"), "{png}");
        }
        // A run whose points measured nothing (all failed) still writes its files.
        let empty = PointResult { throughput_per_s: 0.0, latency_us: [0; 5], cdf: Vec::new(), ..point("c", 4, 0.0, 0) };
        write_all(&dir.join("empty"), &settings(), &[empty]).expect("written without data");
        write_all(&dir.join("none"), &settings(), &[]).expect("written without points");
        let series = [Series { label: "a".into(), points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)] }];
        let path = dir.join("series.png");
        plot_series(&path, "title", "x", "y", &series).expect("plotted");
        assert!(std::fs::read(&path).expect("png").starts_with(b"\x89PNG"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
