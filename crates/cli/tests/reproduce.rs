//! `ordo reproduce --quick` for every paper, as a user runs it: the report lists only what
//! results.json holds, every chart it shows exists as a PNG, no run found a safety violation, and
//! `--compare` sees no change between a report and itself but names a metric that moved.

use std::path::{Path, PathBuf};
use std::process::Command;

fn ordo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ordo"))
}

fn out_dir(paper: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-reproduce-test-{}-{paper}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn reproduce_quick(paper: &str) -> PathBuf {
    let dir = out_dir(paper);
    let output = ordo().args(["reproduce", paper, "--quick", "--jobs", "2", "--out"]).arg(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "ordo reproduce {paper} --quick failed:\n{stderr}");
    // Progress names each run as it finishes, with the time left.
    assert!(stderr.contains("runs ·") && stderr.contains("left"), "no progress lines:\n{stderr}");
    dir
}

/// The experiments (`## ` headings), images and claim rows of a report.
struct Report {
    headings: Vec<String>,
    images: Vec<String>,
    claim_rows: usize,
}

fn read_report(dir: &Path) -> Report {
    let text = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let headings = text.lines().filter_map(|l| l.strip_prefix("## ")).map(str::to_string).collect();
    let images = text
        .lines()
        .filter_map(|l| l.strip_prefix("![").and_then(|rest| rest.split_once("](")))
        .map(|(_, file)| file.trim_end_matches(')').to_string())
        .collect();
    let verdict =
        |l: &str| l.contains("| reproduced (") || l.contains("| **not reproduced**") || l.contains("| not measured:");
    let claim_rows = text.lines().filter(|l| l.starts_with("| ") && verdict(l)).count();
    Report { headings, images, claim_rows }
}

fn check_paper(paper: &str) {
    let dir = reproduce_quick(paper);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let experiments = results["experiments"].as_array().unwrap();
    let report = read_report(&dir);
    assert!(!report.headings.is_empty(), "{paper}: the report lists no experiment");
    assert_eq!(report.headings.len(), experiments.len(), "{paper}: report and results.json list different experiments");
    for (heading, experiment) in report.headings.iter().zip(experiments) {
        let expected =
            format!("{} — {}", experiment["figures"].as_str().unwrap(), experiment["title"].as_str().unwrap());
        assert_eq!(heading, &expected, "{paper}: the report's experiment is not the results' one");
        let runs = experiment["runs"].as_array().unwrap();
        assert!(!runs.is_empty(), "{paper} {heading}: no measured run");
        for run in runs {
            let metrics = run["measured"]["metrics"].as_object().unwrap();
            assert!(metrics.contains_key("throughput"), "{paper} {heading}: run {} has no throughput", run["id"]);
            assert!(run["measured"]["violation"].is_null(), "{paper}: {}: {}", run["id"], run["measured"]["violation"]);
        }
    }
    let claims: usize = experiments.iter().map(|e| e["claims"].as_array().unwrap().len()).sum();
    assert_eq!(report.claim_rows, claims, "{paper}: the report's claim rows are not the results' claims");
    for image in &report.images {
        let bytes = std::fs::read(dir.join(image)).unwrap_or_else(|e| panic!("{paper}: {image}: {e}"));
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{paper}: {image} is not a drawn PNG");
    }
    check_compare(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--compare` of a report with itself: no change. With one throughput moved by 10%: that run's
/// throughput, and nothing else.
fn check_compare(dir: &Path) {
    let results = dir.join("results.json");
    let same = ordo().args(["reproduce", "--compare"]).arg(&results).arg(&results).output().unwrap();
    assert!(same.status.success());
    assert_eq!(String::from_utf8_lossy(&same.stdout).trim(), "no change");
    let mut moved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let run = &mut moved["experiments"][0]["runs"][0];
    let id = run["id"].as_str().unwrap().to_string();
    let throughput = run["measured"]["metrics"]["throughput"].as_f64().unwrap();
    run["measured"]["metrics"]["throughput"] = serde_json::json!(throughput * 1.1);
    let changed = dir.join("moved.json");
    std::fs::write(&changed, serde_json::to_string(&moved).unwrap()).unwrap();
    let output = ordo().args(["reproduce", "--compare"]).arg(&results).arg(&changed).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // A claim reading that throughput may change its verdict too (those lines quote the claim).
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.contains('"')).collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(lines[0].contains(&id) && lines[0].contains("throughput") && lines[0].contains("+10.0%"), "{stdout}");
}

#[test]
fn nezha_quick_reproduction_reports_what_it_measured() {
    check_paper("nezha");
}

#[test]
fn tempo_quick_reproduction_reports_what_it_measured() {
    check_paper("tempo");
}

#[test]
fn nopaxos_quick_reproduction_reports_what_it_measured() {
    check_paper("nopaxos");
}

#[test]
fn chora_quick_reproduction_reports_what_it_measured() {
    check_paper("chora");
}

#[test]
fn swiftpaxos_quick_reproduction_reports_what_it_measured() {
    check_paper("swiftpaxos");
}

#[test]
fn unknown_papers_and_unreadable_results_are_usage_errors() {
    let unknown = ordo().args(["reproduce", "paxos-made-simple", "--quick"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("known: nezha, tempo, nopaxos"));
    let missing =
        ordo().args(["reproduce", "--compare", "/nonexistent/a.json", "/nonexistent/b.json"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
}
