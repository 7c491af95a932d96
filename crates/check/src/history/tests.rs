use super::*;
use proptest::prelude::*;

fn event(client: u64, kind: EventKind, time_ns: u64, op: OpKind, key: &str, value: Option<&str>) -> HistoryEvent {
    HistoryEvent { client, kind, time_ns, op, key: key.into(), value: value.map(Into::into) }
}

fn problem_of(text: &str) -> (usize, Problem) {
    let error = parse_history(text).expect_err("the history is malformed");
    (error.line, error.problem)
}

#[test]
fn example_lines_parse_and_round_trip() {
    // Goal: the format's example parses to the expected events, and writing then parsing gives
    // the same events back. Method: parse the documented example, write it, parse again.
    let text = r#"{"client": 3, "kind": "invoke", "time_ns": 1200, "op": "write", "key": "k1", "value": "v5"}
{"client": 3, "kind": "ok", "time_ns": 5400, "op": "write", "key": "k1", "value": "v5"}
{"client": 4, "kind": "invoke", "time_ns": 5500, "op": "read", "key": "k1"}
{"client": 4, "kind": "ok", "time_ns": 5600, "op": "read", "key": "k1", "value": null}
"#;
    let events = parse_history(text).unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0], event(3, EventKind::Invoke, 1200, OpKind::Write, "k1", Some("v5")));
    assert_eq!(events[3], event(4, EventKind::Ok, 5600, OpKind::Read, "k1", None));
    let mut written = Vec::new();
    write_history(&events, &mut written).unwrap();
    let text_again = String::from_utf8(written).unwrap();
    assert!(text_again.ends_with('\n'));
    assert!(!events[0].to_json_line().contains('\n'));
    assert_eq!(parse_history(&text_again).unwrap(), events);
}

#[test]
fn blank_lines_extra_fields_and_crlf_are_accepted() {
    // Goal: tolerated variations do not reject a history. Method: blank lines, CRLF endings, a
    // byte-order mark and unknown fields, checked against the plain parse.
    let invoke = r#"{"client":1,"kind":"invoke","time_ns":0,"op":"read","key":"a","node":7}"#;
    let ok = r#"{"client":1,"kind":"ok","time_ns":9,"op":"read","key":"a","value":"x","extra":[1,2]}"#;
    let text = format!("\u{feff}\n  \r\n{invoke}\r\n\n{ok}\n");
    let events = parse_history(&text).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].value.as_deref(), Some("x"));
    assert_eq!(parse_history("").unwrap(), vec![]);
}

#[test]
fn line_numbers_count_blank_lines() {
    // Goal: the reported line is the line of the text, blank lines included. Method: a bad
    // line after two blank lines is reported as line 3.
    let (line, problem) = problem_of("\n\nnot json\n");
    assert_eq!(line, 3);
    assert!(matches!(problem, Problem::BadJson(_)));
}

/// Recognizes the expected problem.
type ProblemTest = fn(&Problem) -> bool;

#[test]
fn each_malformation_is_named() {
    // Goal: every rule of the format has its own typed error. Method: one minimal violating
    // history per rule, checking the problem and the line.
    let invoke_w = r#"{"client":1,"kind":"invoke","time_ns":10,"op":"write","key":"a","value":"x"}"#;
    let cases: Vec<(String, usize, ProblemTest)> = vec![
        ("{".into(), 1, |p| matches!(p, Problem::BadJson(_))),
        (r#"{"client":-1,"kind":"ok","time_ns":1,"op":"read","key":"a"}"#.into(), 1, |p| {
            matches!(p, Problem::BadJson(_))
        }),
        (r#"{"kind":"ok","time_ns":1,"op":"read","key":"a"}"#.into(), 1, |p| matches!(p, Problem::BadJson(_))),
        (
            r#"{"client":1,"kind":"done","time_ns":1,"op":"read","key":"a"}"#.into(),
            1,
            |p| matches!(p, Problem::UnknownKind(k) if k == "done"),
        ),
        (
            r#"{"client":1,"kind":"invoke","time_ns":1,"op":"cas","key":"a"}"#.into(),
            1,
            |p| matches!(p, Problem::UnknownOp(o) if o == "cas"),
        ),
        (r#"{"client":1,"kind":"invoke","time_ns":1,"op":"append","key":"a"}"#.into(), 1, |p| {
            matches!(p, Problem::MissingValue { client: 1, op: OpKind::Append })
        }),
        (r#"{"client":1,"kind":"ok","time_ns":1,"op":"read","key":"a"}"#.into(), 1, |p| {
            matches!(p, Problem::CompletionWithoutInvoke { client: 1 })
        }),
        (format!("{invoke_w}\n{invoke_w}"), 2, |p| {
            matches!(p, Problem::SecondInvoke { client: 1, outstanding_line: 1 })
        }),
        (format!("{invoke_w}\n{}\n{}", invoke_w.replace("invoke", "info"), invoke_w.replace("10", "20")), 3, |p| {
            matches!(p, Problem::ClientReusedAfterInfo { client: 1, info_line: 2 })
        }),
        (format!("{invoke_w}\n{}\n{}", invoke_w.replace("invoke", "info"), invoke_w.replace("invoke", "ok")), 3, |p| {
            matches!(p, Problem::ClientReusedAfterInfo { client: 1, info_line: 2 })
        }),
        (format!("{invoke_w}\n{}", invoke_w.replace("invoke", "ok").replace("10", "9")), 2, |p| {
            matches!(p, Problem::TimeWentBackwards { client: 1, previous_ns: 10, time_ns: 9 })
        }),
        (format!("{invoke_w}\n{}\n{}", invoke_w.replace("invoke", "ok"), invoke_w.replace("10", "5")), 3, |p| {
            matches!(p, Problem::TimeWentBackwards { client: 1, previous_ns: 10, time_ns: 5 })
        }),
        (format!("{invoke_w}\n{}", invoke_w.replace("invoke", "ok").replace("\"a\"", "\"b\"")), 2, |p| {
            matches!(p, Problem::Mismatch { invoke_line: 1, .. })
        }),
        (format!("{invoke_w}\n{}", invoke_w.replace("invoke", "ok").replace("write", "append")), 2, |p| {
            matches!(p, Problem::Mismatch { op: OpKind::Append, invoke_op: OpKind::Write, .. })
        }),
        (format!("{invoke_w}\n{}", invoke_w.replace("invoke", "ok").replace("\"x\"", "\"y\"")), 2, |p| {
            matches!(p, Problem::ValueMismatch { .. })
        }),
    ];
    for (text, line, expected) in cases {
        let (found_line, problem) = problem_of(&text);
        assert_eq!(found_line, line, "{text}");
        assert!(expected(&problem), "{text}: {problem}");
        assert!(!problem.to_string().is_empty());
    }
}

#[test]
fn pairing_builds_operations_with_outcomes() {
    // Goal: invocations are paired with their completions, reads take the value returned and
    // outstanding invocations become unfinished. Method: a small history covering each outcome.
    let events = vec![
        event(1, EventKind::Invoke, 0, OpKind::Write, "a", Some("x")),
        event(2, EventKind::Invoke, 1, OpKind::Read, "a", None),
        event(1, EventKind::Ok, 2, OpKind::Write, "a", None),
        event(2, EventKind::Ok, 3, OpKind::Read, "a", Some("x")),
        event(1, EventKind::Invoke, 4, OpKind::Append, "a", Some("y")),
        event(2, EventKind::Invoke, 4, OpKind::Read, "b", None),
        event(1, EventKind::Fail, 5, OpKind::Append, "a", Some("y")),
        event(2, EventKind::Info, 6, OpKind::Read, "b", None),
        event(3, EventKind::Invoke, 7, OpKind::Write, "b", Some("z")),
    ];
    let operations = pair_operations(&events).unwrap();
    let outcomes: Vec<Outcome> = operations.iter().map(|o| o.outcome).collect();
    assert_eq!(outcomes, [Outcome::Ok, Outcome::Ok, Outcome::Fail, Outcome::Info, Outcome::Unfinished]);
    assert_eq!(operations[1].value.as_deref(), Some("x"));
    assert_eq!(operations[0].completion_ns, Some(2));
    assert_eq!(operations[4].completion_ns, None);
    assert!(operations[4].to_string().contains("never completed"));
    assert!(operations[1].to_string().contains("-> \"x\""));
    assert!(validate_history(&events).is_ok());
    let reused = [events.clone(), vec![event(2, EventKind::Invoke, 8, OpKind::Read, "b", None)]].concat();
    assert_eq!(validate_history(&reused).unwrap_err().line, 10);
}

#[test]
fn long_values_are_cut_in_messages() {
    // Goal: reports about long appended values stay readable. Method: display a 1,000-byte value.
    let long = "x".repeat(1000);
    let shown = ShortValue(Some(&long)).to_string();
    assert!(shown.len() < 100, "{shown}");
    assert!(shown.contains("1000 bytes"));
    assert_eq!(ShortValue(None).to_string(), "absent");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        // Goal: invalid input is an error, never a panic. Method: random strings.
        let _ = parse_history(&text);
    }

    #[test]
    fn mangled_lines_never_panic(cut in 0usize..90, byte in any::<u8>(), position in 0usize..90) {
        // Goal: near-valid lines (truncated or with one byte changed) never panic. Method: damage
        // a valid two-line history at random places.
        let valid = r#"{"client":1,"kind":"invoke","time_ns":1,"op":"write","key":"k","value":"v"}"#;
        let mut bytes = valid.as_bytes().to_vec();
        let position = position % bytes.len();
        bytes[position] = byte;
        bytes.truncate(cut.max(1));
        let text = format!("{valid}\n{}", String::from_utf8_lossy(&bytes));
        let _ = parse_history(&text);
    }
}
