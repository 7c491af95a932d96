//! The vocabulary in which a paper's experiments are declared: runs (simulations, each one
//! `SimConfig`), charts (which measured numbers each figure plots), and claims (each number the
//! paper states, where ordo reads its own, and how close counts as reproduced).

use ordo_sim::SimConfig;

/// One paper and every experiment of it that ordo runs.
pub struct Paper {
    /// The name `ordo reproduce` takes.
    pub name: &'static str,
    /// The paper's title and venue.
    pub title: &'static str,
    /// What the whole reproduction leaves out and why, said once.
    pub scope: &'static str,
    /// The experiments, in the order of the paper's figures.
    pub experiments: Vec<Experiment>,
}

/// One experiment: a figure (or a few figures sharing runs) of the paper.
pub struct Experiment {
    /// A short identifier, unique in the paper: the key in `results.json`.
    pub id: &'static str,
    /// The paper's figures or sections it reproduces, e.g. "Fig. 6b".
    pub figures: &'static str,
    /// A title.
    pub title: &'static str,
    /// What it measures, in a sentence or two.
    pub measures: &'static str,
    /// The settings shared by its runs, in words (each run's exact config is written out too).
    pub settings: String,
    /// What the simulator or one machine cannot model here, said plainly.
    pub limits: &'static str,
    /// The simulations.
    pub runs: Vec<Run>,
    /// One PNG each.
    pub charts: Vec<Chart>,
    /// The paper's numbers and ordo's.
    pub claims: Vec<Claim>,
}

/// One simulation.
pub struct Run {
    /// Unique in its experiment, e.g. `nezha@150000`.
    pub id: String,
    /// The line it belongs to on the charts.
    pub series: String,
    /// Its parameter on the x axis (offered load, replicas, clock error, ...), as metric `x`.
    pub x: f64,
    /// The protocol's registry name.
    pub protocol: &'static str,
    /// Everything the simulator needs.
    pub config: SimConfig,
    /// What is computed from the run besides its report.
    pub analysis: Analysis,
}

/// Measurements taken from a run's history, beyond the report's summary.
#[derive(Clone, Copy, Debug)]
pub enum Analysis {
    /// The report's numbers only.
    Summary,
    /// A crash at `crash_ns`: throughput per `bucket_ns`, the outage and the time to recover.
    Recovery {
        /// When the node crashes.
        crash_ns: u64,
        /// When it boots again.
        restart_ns: u64,
        /// The timeline's bucket.
        bucket_ns: u64,
    },
    /// The report's numbers and `broadcasts_per_commit`: `(Σ replica messages sent − commits) /
    /// (N − 1) / commits`, each replica message one copy of a broadcast to its N − 1 peers and
    /// each commit one reply to a client (Chora's pulses, its Fig. 8a).
    Broadcasts,
    /// The report's numbers, with `sites_mean` over these sites only: the paper's client sites,
    /// when clients placed round-robin also sit at sites the paper has no client at.
    ClientSites(&'static [&'static str]),
}

/// One PNG: which metrics go on which axis.
pub struct Chart {
    /// File name, without `.png`.
    pub file: String,
    /// Title, naming the paper's figure.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// How runs become lines.
    pub kind: ChartKind,
    /// Only the runs whose id starts with this (all when `None`).
    pub only: Option<String>,
    /// The paper's numbers: `(series, points)`; a series named like a measured one shares its colour.
    pub paper: Vec<(String, Vec<(f64, f64)>)>,
}

/// An axis: its description (with its unit), the metric it shows, and its scale.
pub struct Axis {
    /// Shown along the axis; names the unit.
    pub desc: &'static str,
    /// The metric of each run plotted on it (unused on a category axis).
    pub metric: &'static str,
    /// Log scale.
    pub log: bool,
}

/// How a chart turns runs into lines.
pub enum ChartKind {
    /// One line per series: each run is the point (x metric, y metric), in x order.
    Lines,
    /// One line per run over named categories: category `i` plots metric `metrics[i]`.
    Categories {
        /// The categories' names.
        names: Vec<&'static str>,
        /// The metric plotted at each.
        metrics: Vec<&'static str>,
    },
    /// One line per run: a curve of it over time (e.g. `throughput_timeline`).
    Timeline {
        /// The curve's name in the run's measurements.
        curve: &'static str,
    },
    /// As `Timeline`, zoomed on a moment (a crash): the points from `before_ms` before `at_ms` to
    /// `after_ms` after it, time counted from `at_ms`.
    Window {
        /// The curve's name in the run's measurements.
        curve: &'static str,
        /// The moment shown as time 0 (ms into the run).
        at_ms: f64,
        /// Shown before it (ms).
        before_ms: f64,
        /// Shown after it (ms).
        after_ms: f64,
    },
}

/// A number the paper states, and where ordo reads its own.
pub struct Claim {
    /// What is compared.
    pub what: String,
    /// The paper's number.
    pub paper: Expected,
    /// ordo's number; `None` when ordo cannot measure it (then `caveat` says why).
    pub ordo: Option<Value>,
    /// The unit of both numbers.
    pub unit: &'static str,
    /// The relative distance from the paper's number (or range) still counted as reproduced.
    pub tolerance: f64,
    /// Why ordo's number may differ: what the simulator or one machine cannot model.
    pub caveat: &'static str,
}

/// The paper's number.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub enum Expected {
    /// A number.
    About(f64),
    /// A range.
    Between(f64, f64),
    /// At most.
    AtMost(f64),
    /// At least.
    AtLeast(f64),
}

/// Where ordo's number comes from.
pub enum Value {
    /// A metric of one run.
    Metric {
        /// The run's id.
        run: String,
        /// The metric.
        metric: &'static str,
    },
    /// The largest of a metric over a series' runs.
    Max {
        /// The series.
        series: String,
        /// The metric.
        metric: &'static str,
    },
    /// The smallest of a metric over a series' runs.
    Min {
        /// The series.
        series: String,
        /// The metric.
        metric: &'static str,
    },
    /// The largest of a metric over the named runs that ran (a quick run may leave some out):
    /// the best of a few client counts.
    Best {
        /// The runs' ids.
        runs: Vec<String>,
        /// The metric.
        metric: &'static str,
    },
    /// One value over another.
    Ratio(Box<Value>, Box<Value>),
}

impl Value {
    /// A metric of run `run`.
    pub fn metric(run: impl Into<String>, metric: &'static str) -> Value {
        Value::Metric { run: run.into(), metric }
    }

    /// The largest `metric` of `series`.
    pub fn max(series: impl Into<String>, metric: &'static str) -> Value {
        Value::Max { series: series.into(), metric }
    }

    /// The smallest `metric` of `series`.
    pub fn min(series: impl Into<String>, metric: &'static str) -> Value {
        Value::Min { series: series.into(), metric }
    }

    /// The largest `metric` of the runs `runs`.
    pub fn best(runs: Vec<String>, metric: &'static str) -> Value {
        Value::Best { runs, metric }
    }

    /// `self / other`.
    pub fn over(self, other: Value) -> Value {
        Value::Ratio(Box::new(self), Box::new(other))
    }
}

impl Expected {
    /// The ratio of `ordo` to the paper's number: to the number itself, or to the nearest end of
    /// the range (1 inside it).
    pub fn ratio(&self, ordo: f64) -> f64 {
        match *self {
            Expected::About(paper) => ordo / paper,
            Expected::Between(low, _) if ordo < low => ordo / low,
            Expected::Between(_, high) if ordo > high => ordo / high,
            Expected::Between(..) => 1.0,
            Expected::AtMost(bound) => (ordo / bound).max(1.0),
            Expected::AtLeast(bound) => (ordo / bound).min(1.0),
        }
    }

    /// Whether `ordo` is the paper's number within `tolerance` (relative).
    pub fn holds(&self, ordo: f64, tolerance: f64) -> bool {
        let ratio = self.ratio(ordo);
        ratio.is_finite() && (ratio - 1.0).abs() <= tolerance + 1e-12
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::About(value) => write!(f, "{}", number(*value)),
            Expected::Between(low, high) => write!(f, "{} – {}", number(*low), number(*high)),
            Expected::AtMost(bound) => write!(f, "≤ {}", number(*bound)),
            Expected::AtLeast(bound) => write!(f, "≥ {}", number(*bound)),
        }
    }
}

/// A number as a table shows it: three significant digits, thousands separated.
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return "–".into();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        let rounded = value.round() as i64;
        let digits = rounded.unsigned_abs().to_string();
        let mut grouped = String::new();
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        return if rounded < 0 { format!("-{grouped}") } else { grouped };
    }
    let decimals = if magnitude >= 100.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_measure_the_distance_to_the_paper_number_or_range() {
        // Goal: a claim is reproduced exactly when ordo's number is within the tolerance of the
        // paper's number, or of the nearest end of its range. Method: values on each side of
        // each boundary.
        let about = Expected::About(100.0);
        assert!(about.holds(110.0, 0.1) && about.holds(90.0, 0.1));
        assert!(!about.holds(111.0, 0.1) && !about.holds(89.0, 0.1));
        let range = Expected::Between(2.5, 9.0);
        assert_eq!(range.ratio(5.0), 1.0);
        assert!(range.holds(2.3, 0.1) && !range.holds(2.2, 0.1));
        assert!(range.holds(9.9, 0.1) && !range.holds(10.0, 0.1));
        assert!(Expected::AtMost(1.0).holds(0.2, 0.0) && !Expected::AtMost(1.0).holds(1.01, 0.0));
        assert!(Expected::AtLeast(1.0).holds(7.0, 0.0) && !Expected::AtLeast(1.0).holds(0.99, 0.0));
        assert!(!about.holds(f64::NAN, 0.1), "a missing number is never reproduced");
    }

    #[test]
    fn numbers_read_like_a_table() {
        assert_eq!(number(187_800.0), "187,800");
        assert_eq!(number(1_234_567.0), "1,234,567");
        assert_eq!(number(-2500.0), "-2,500");
        assert_eq!(number(138.4), "138");
        assert_eq!(number(13.25), "13.2");
        assert_eq!(number(0.97), "0.970");
        assert_eq!(number(f64::NAN), "–");
    }
}
