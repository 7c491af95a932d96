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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
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

/// The longest non-test function in any crate, in lines from its `fn` line to its closing brace.
const FUNCTION_LINES_MAX: usize = 80;
/// The longest file in the simulator and the network runtime.
const SIM_NET_FILE_LINES_MAX: usize = 600;
/// Folders whose files must stay under [`SIM_NET_FILE_LINES_MAX`].
const SIM_NET: &[&str] = &["crates/sim/src", "crates/net/src"];

/// The text with every comment, string literal and char literal blanked out (newlines kept, so
/// byte offsets and line numbers are those of the original), leaving only code to scan.
fn code_only(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut code = bytes.to_vec();
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut code[from..to.min(bytes.len())] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let end = literal_or_comment_end(bytes, at);
        if end > at {
            blank(&mut code, at, end);
            at = end;
        } else {
            at += 1;
        }
    }
    code
}

/// Where the comment or literal starting at `at` ends (one past it), or `at` when none starts there.
fn literal_or_comment_end(bytes: &[u8], at: usize) -> usize {
    let next = |offset: usize| bytes.get(at + offset).copied().unwrap_or(0);
    let identifier_before = at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
    match bytes[at] {
        b'/' if next(1) == b'/' => bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| at + p),
        b'/' if next(1) == b'*' => block_comment_end(bytes, at),
        b'"' => quoted_end(bytes, at + 1, b'"'),
        b'b' if !identifier_before && next(1) == b'"' => quoted_end(bytes, at + 2, b'"'),
        b'b' if !identifier_before && next(1) == b'r' && matches!(next(2), b'"' | b'#') => raw_end(bytes, at + 2),
        b'r' if !identifier_before && (next(1) == b'"' || (next(1) == b'#' && matches!(next(2), b'"' | b'#'))) => {
            raw_end(bytes, at + 1)
        }
        b'b' if !identifier_before && next(1) == b'\'' => quoted_end(bytes, at + 2, b'\''),
        b'\'' if next(1) == b'\\' => quoted_end(bytes, at + 1, b'\''),
        b'\'' => {
            // A char literal holds one (maybe multi-byte) char; anything else is a lifetime or label.
            let width = std::str::from_utf8(&bytes[at + 1..(at + 5).min(bytes.len())])
                .or_else(|e| std::str::from_utf8(&bytes[at + 1..at + 1 + e.valid_up_to()]))
                .ok()
                .and_then(|s| s.chars().next())
                .map_or(1, char::len_utf8);
            if bytes.get(at + 1 + width) == Some(&b'\'') { at + 2 + width } else { at }
        }
        _ => at,
    }
}

/// One past the closing `quote` of a literal whose body starts at `from`, honouring `\` escapes.
fn quoted_end(bytes: &[u8], from: usize, quote: u8) -> usize {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b if b == quote => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// One past the end of a raw string whose `#`s (or opening quote) start at `from`.
fn raw_end(bytes: &[u8], from: usize) -> usize {
    let hashes = bytes[from..].iter().take_while(|&&b| b == b'#').count();
    let body = from + hashes + 1;
    let closing: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
    bytes[body.min(bytes.len())..]
        .windows(closing.len())
        .position(|w| w == closing)
        .map_or(bytes.len(), |p| body + p + closing.len())
}

/// One past the end of a (possibly nested) block comment starting at `from`.
fn block_comment_end(bytes: &[u8], from: usize) -> usize {
    let (mut at, mut depth) = (from, 0);
    while at + 1 < bytes.len() {
        match (bytes[at], bytes[at + 1]) {
            (b'/', b'*') => (depth, at) = (depth + 1, at + 2),
            (b'*', b'/') => {
                (depth, at) = (depth - 1, at + 2);
                if depth == 0 {
                    return at;
                }
            }
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The offset of the brace matching the `{` at `open` in code-only text.
fn matching_brace(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &byte) in code[open..].iter().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `word` stands alone at `at` (no identifier characters on either side).
fn word_at(code: &[u8], at: usize, word: &str) -> bool {
    let is_identifier = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    code[at..].starts_with(word.as_bytes())
        && (at == 0 || !is_identifier(code[at - 1]))
        && code.get(at + word.len()).is_none_or(|&b| !is_identifier(b))
}

/// The identifier starting at the first non-blank byte from `at`, if any.
fn identifier_after(code: &[u8], at: usize) -> Option<String> {
    let start = at + code[at..].iter().take_while(|b| b.is_ascii_whitespace()).count();
    let name: String =
        code[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').map(|&b| b as char).collect();
    (!name.is_empty() && !name.as_bytes()[0].is_ascii_digit()).then_some(name)
}

/// The byte ranges of `#[cfg(test)] mod name { ... }` blocks.
fn test_modules(code: &[u8]) -> Vec<(usize, usize)> {
    let marker = b"#[cfg(test)]";
    let mut ranges = Vec::new();
    for at in (0..code.len()).filter(|&at| code[at..].starts_with(marker)) {
        let mut next = at + marker.len();
        loop {
            next += code[next..].iter().take_while(|b| b.is_ascii_whitespace()).count();
            if code[next..].starts_with(b"#[") {
                next += code[next..].iter().position(|&b| b == b']').map_or(code.len() - next, |p| p + 1);
            } else if word_at(code, next, "pub") {
                next += 3;
                if code[next..].starts_with(b"(") {
                    next += code[next..].iter().position(|&b| b == b')').map_or(0, |p| p + 1);
                }
            } else {
                break;
            }
        }
        if word_at(code, next, "mod") {
            let open = next + code[next..].iter().position(|&b| b == b'{' || b == b';').unwrap_or(0);
            if code[open] == b'{' {
                ranges.push((at, matching_brace(code, open).unwrap_or(code.len())));
            }
        }
    }
    ranges
}

/// A function found by [`functions`]: its name, first line (1-based) and length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `text`, outside `#[cfg(test)] mod` blocks.
fn functions(text: &str) -> Vec<Function> {
    let code = code_only(text);
    let skipped = test_modules(&code);
    let line_of = |offset: usize| 1 + code[..offset].iter().filter(|&&b| b == b'\n').count();
    let mut found = Vec::new();
    for at in (0..code.len()).filter(|&at| word_at(&code, at, "fn")) {
        let Some(name) = identifier_after(&code, at + 2) else { continue }; // `fn(u8)` is a type
        if skipped.iter().any(|&(from, to)| (from..=to).contains(&at)) {
            continue;
        }
        // The body opens at the first `{` outside brackets; a `;` there first means no body.
        let mut depth = 0i32;
        let mut open = None;
        for (offset, &byte) in code[at..].iter().enumerate() {
            match byte {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(at + offset);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = matching_brace(&code, open).unwrap_or(code.len() - 1);
        let line = line_of(at);
        found.push(Function { name, line, lines: line_of(close) - line + 1 });
    }
    found
}

fn relative(file: &Path) -> String {
    file.strip_prefix(root()).unwrap_or(file).to_string_lossy().into_owned()
}

#[test]
fn function_scanner_measures_bodies_and_skips_test_modules() {
    // Goal: the function-length check cannot silently measure nothing or the wrong span. Method:
    // scan a small example whose braces hide in strings, chars, raw strings and comments, with a
    // bodiless trait method, a fn-pointer type and a test module that must be skipped.
    let example = r##"
trait Shape {
    fn area(&self) -> f64;
}

fn tricky<'a>(x: &'a str, f: fn(u8) -> u8) -> usize {
    let open = "{ not a brace \" {";
    let raw = r#"} still "not" a brace }"#;
    let c = '{';
    let escaped = '\'';
    // } a comment brace
    /* } a block comment { */
    if x.is_empty() { 0 } else { 1 }
}

#[cfg(test)]
mod tests {
    fn hidden() {
        let s = "}";
    }
}

pub fn after() {}
"##;
    let expected =
        [Function { name: "tricky".into(), line: 6, lines: 9 }, Function { name: "after".into(), line: 23, lines: 1 }];
    assert_eq!(functions(example), expected);
}

#[test]
fn functions_stay_short() {
    // Goal: no non-test function in any crate grows past FUNCTION_LINES_MAX lines (STYLE 18's
    // ratchet: the limit only goes down). Method: blank out comments and literals, find each `fn`
    // with a body outside `#[cfg(test)] mod` blocks and `tests*.rs` files, and count the lines
    // from its `fn` line to its matching closing brace.
    let mut problems = Vec::new();
    let mut count = 0;
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let source = krate.unwrap().path().join("src");
        if !source.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&source, &mut files);
        files.sort();
        for file in files {
            if file.file_name().is_some_and(|name| name.to_string_lossy().starts_with("tests")) {
                continue;
            }
            for function in functions(&std::fs::read_to_string(&file).unwrap()) {
                count += 1;
                if function.lines > FUNCTION_LINES_MAX {
                    let Function { name, line, lines } = function;
                    let file = relative(&file);
                    problems.push(format!("{file}:{line} fn {name}: {lines} lines (max {FUNCTION_LINES_MAX})"));
                }
            }
        }
    }
    assert!(count > 500, "the scanner found only {count} functions: it is not measuring");
    assert!(problems.is_empty(), "functions too long, split them:\n{}", problems.join("\n"));
}

#[test]
fn simulator_and_network_files_stay_short() {
    // Goal: the simulator and the network runtime stay split by concern, no file over
    // SIM_NET_FILE_LINES_MAX lines (a limit that only goes down). Method: count every Rust file's
    // lines under those folders, recursively.
    let mut problems = Vec::new();
    for dir in SIM_NET {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        files.sort();
        for file in files {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > SIM_NET_FILE_LINES_MAX {
                let file = relative(&file);
                problems.push(format!("{file}: {lines} lines (max {SIM_NET_FILE_LINES_MAX}): split it by concern"));
            }
        }
    }
    assert!(problems.is_empty(), "files too long:\n{}", problems.join("\n"));
}
