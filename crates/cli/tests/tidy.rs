//! A tidy check that fails the build (STYLE 18): the deterministic crates must not reach for
//! ambient time, randomness, sockets or async runtimes, and files and lines stay short.

use std::path::{Path, PathBuf};

/// Crates (or folders) whose code shapes a simulated run and so must be deterministic.
const DETERMINISTIC: &[&str] = &["crates/core/src", "crates/protocols/src", "crates/check/src", "crates/sim/src"];

/// Banned text, with the reason printed when found.
const BANNED: &[(&str, &str)] = &[
    ("SystemTime", "wall-clock time breaks replay"),
    ("Instant::now", "wall-clock time breaks replay (only the simulator's own timing may use it)"),
    ("thread_rng", "ambient randomness breaks replay"),
    ("rand::rng()", "ambient randomness breaks replay"),
    ("from_entropy", "ambient randomness breaks replay"),
    ("from_os_rng", "ambient randomness breaks replay"),
    ("std::net", "protocol code is sans-IO"),
    ("tokio", "protocol code is sans-IO"),
    ("async fn", "protocol code is sans-IO"),
    ("dbg!(", "leftover debug macro"),
    ("todo!(", "unfinished code"),
    ("unimplemented!(", "unfinished code"),
    ("FIXME", "unfinished code"),
    ("RandomState", "randomly seeded hashing can reach effects"),
];

/// Files allowed one banned item, with the reason.
const ALLOWED: &[(&str, &str)] = &[("crates/sim/src/lib.rs", "Instant::now")];

/// The longest file in a deterministic crate, in lines (STYLE 3 asks protocol files to stay under 1,500).
const FILE_LINES_MAX: usize = 1_500;
/// The longest line.
const LINE_CHARS_MAX: usize = 150;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn deterministic_crates_stay_deterministic_and_short() {
    // Goal: banned items never creep into code that shapes a simulated run. Method: scan every
    // Rust file of those crates; report each hit with file, line and reason.
    let mut problems = Vec::new();
    for dir in DETERMINISTIC {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        for file in files {
            let relative = file.strip_prefix(root()).unwrap_or(&file).to_string_lossy().replace("../", "");
            let text = std::fs::read_to_string(&file).unwrap();
            let lines = text.lines().count();
            if lines > FILE_LINES_MAX {
                problems.push(format!("{relative}: {lines} lines (max {FILE_LINES_MAX}): split it by concern"));
            }
            for (number, line) in text.lines().enumerate() {
                if line.chars().count() > LINE_CHARS_MAX {
                    problems.push(format!("{relative}:{}: line longer than {LINE_CHARS_MAX}", number + 1));
                }
                for (banned, why) in BANNED {
                    let allowed = ALLOWED.iter().any(|(f, b)| relative.ends_with(f) && b == banned);
                    if line.contains(banned) && !allowed && !line.trim_start().starts_with("//") {
                        problems.push(format!("{relative}:{}: `{banned}`: {why}", number + 1));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "tidy check failed:\n{}", problems.join("\n"));
}
