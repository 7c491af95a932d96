use super::*;
use proptest::prelude::*;

fn event(client: u64, kind: EventKind, time_ns: u64, op: OpKind, key: &str, value: Option<&str>) -> HistoryEvent {
    HistoryEvent {
        client,
        id: None,
        kind,
        time_ns,
        op,
        key: key.into(),
        value: value.map(Into::into),
        at_ms: None,
        expires_ms: None,
    }
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

/// `event` with operation id `id`.
fn with_id(id: u64, mut event: HistoryEvent) -> HistoryEvent {
    event.id = Some(id);
    event
}

#[test]
fn lines_without_ids_are_written_as_before_and_ids_round_trip() {
    // Goal: histories without ids keep their exact JSON lines (the simulator's output must not
    // change), and an id survives writing and parsing. Method: the exact line of an event
    // without id; the same event with an id, written and parsed back.
    let plain = event(3, EventKind::Invoke, 1200, OpKind::Write, "k1", Some("v5"));
    let expected = r#"{"client":3,"kind":"invoke","time_ns":1200,"op":"write","key":"k1","value":"v5"}"#;
    assert_eq!(plain.to_json_line(), expected);
    let identified = with_id(7, plain);
    let line = identified.to_json_line();
    assert_eq!(line, r#"{"client":3,"id":7,"kind":"invoke","time_ns":1200,"op":"write","key":"k1","value":"v5"}"#);
    assert_eq!(parse_history(&line).unwrap(), vec![identified]);
    let null_id = r#"{"client":3,"id":null,"kind":"invoke","time_ns":1200,"op":"write","key":"k1","value":"v5"}"#;
    assert_eq!(parse_history(null_id).unwrap()[0].id, None, "a null id is no id");
}

#[test]
fn ids_pair_completions_of_a_pipelining_client() {
    // Goal: with ids a client may have several operations outstanding, completed in any order;
    // after an info it carries on under other ids, and an id whose operation completed ok or
    // fail may be used again. Method: a client pipelines three operations, completes them out
    // of order (one with info), invokes again reusing a completed id, and leaves one unfinished.
    let events = vec![
        with_id(1, event(1, EventKind::Invoke, 0, OpKind::Write, "a", Some("x"))),
        with_id(2, event(1, EventKind::Invoke, 1, OpKind::Read, "a", None)),
        with_id(3, event(1, EventKind::Invoke, 1, OpKind::Append, "b", Some("y"))),
        with_id(2, event(1, EventKind::Ok, 2, OpKind::Read, "a", Some("x"))),
        with_id(3, event(1, EventKind::Info, 3, OpKind::Append, "b", Some("y"))),
        with_id(1, event(1, EventKind::Fail, 4, OpKind::Write, "a", None)),
        with_id(1, event(1, EventKind::Invoke, 5, OpKind::Read, "b", None)),
        with_id(4, event(1, EventKind::Invoke, 5, OpKind::Write, "b", Some("z"))),
        with_id(1, event(1, EventKind::Ok, 6, OpKind::Read, "b", Some("z"))),
    ];
    let operations = pair_operations(&events).unwrap();
    let summary: Vec<(Option<u64>, OpKind, Outcome, Option<u64>)> =
        operations.iter().map(|o| (o.id, o.op, o.outcome, o.completion_ns)).collect();
    assert_eq!(
        summary,
        [
            (Some(1), OpKind::Write, Outcome::Fail, Some(4)),
            (Some(2), OpKind::Read, Outcome::Ok, Some(2)),
            (Some(3), OpKind::Append, Outcome::Info, Some(3)),
            (Some(1), OpKind::Read, Outcome::Ok, Some(6)),
            (Some(4), OpKind::Write, Outcome::Unfinished, None),
        ]
    );
    assert_eq!(operations[1].value.as_deref(), Some("x"));
    assert!(operations[1].to_string().starts_with("client 1 id 2 read -> \"x\""), "{}", operations[1]);
    assert!(validate_history(&events).is_ok());
}

#[test]
fn each_id_malformation_is_named() {
    // Goal: every rule about operation ids has its own typed error, reported with its line and
    // a message naming the client and id. Method: one minimal violating history per rule,
    // checking the problem, the line and the message.
    let invoke = |id: u64, time_ns: u64| {
        format!(r#"{{"client":1,"id":{id},"kind":"invoke","time_ns":{time_ns},"op":"write","key":"a","value":"x"}}"#)
    };
    let complete = |kind: &str, id: u64| {
        format!(r#"{{"client":1,"id":{id},"kind":"{kind}","time_ns":20,"op":"write","key":"a","value":"x"}}"#)
    };
    let plain = r#"{"client":1,"kind":"invoke","time_ns":10,"op":"write","key":"a","value":"x"}"#;
    let read = r#"{"client":1,"id":2,"kind":"invoke","time_ns":10,"op":"read","key":"a"}"#;
    let cases: Vec<(String, usize, ProblemTest, &str)> = vec![
        (
            format!("{}\n{}", invoke(1, 10), invoke(1, 11)),
            2,
            |p| matches!(p, Problem::IdOutstanding { client: 1, id: 1, outstanding_line: 1 }),
            "line 2: client 1 invokes id 1 while its operation with that id, invoked on line 1, is outstanding",
        ),
        (
            format!("{}\n{}", invoke(1, 10), complete("ok", 2)),
            2,
            |p| matches!(p, Problem::CompletionWithoutInvokeOfId { client: 1, id: 2 }),
            "line 2: client 1 completes id 2, which is not outstanding",
        ),
        (
            format!("{}\n{}\n{}", invoke(1, 10), complete("info", 1), invoke(1, 30)),
            3,
            |p| matches!(p, Problem::IdReusedAfterInfo { client: 1, id: 1, info_line: 2 }),
            "line 3: client 1 uses id 1 again after its info on line 2",
        ),
        (
            format!("{}\n{}\n{}", invoke(1, 10), complete("info", 1), complete("ok", 1)),
            3,
            |p| matches!(p, Problem::IdReusedAfterInfo { client: 1, id: 1, info_line: 2 }),
            "line 3: client 1 uses id 1 again after its info on line 2",
        ),
        (
            format!("{}\n{plain}", invoke(1, 10)),
            2,
            |p| matches!(p, Problem::MixedIds { client: 1, first_line: 1, first_has_id: true }),
            "line 2: client 1 mixes events with and without an operation id: its first event (line 1) has an id \
             and this one has none",
        ),
        (
            format!("{plain}\n{}", invoke(1, 10)),
            2,
            |p| matches!(p, Problem::MixedIds { client: 1, first_line: 1, first_has_id: false }),
            "line 2: client 1 mixes events with and without an operation id: its first event (line 1) has no id \
             and this one has one",
        ),
        (
            format!("{}\n{}", invoke(1, 10), invoke(2, 9)),
            2,
            |p| matches!(p, Problem::TimeWentBackwards { client: 1, previous_ns: 10, time_ns: 9 }),
            "line 2: client 1's time goes backwards from 10 ns to 9 ns",
        ),
        (
            format!("{}\n{}\n{}", invoke(1, 10), invoke(2, 30), complete("ok", 1)),
            3,
            |p| matches!(p, Problem::TimeWentBackwards { client: 1, previous_ns: 30, time_ns: 20 }),
            "line 3: client 1's time goes backwards from 30 ns to 20 ns",
        ),
        (
            format!("{}\n{read}\n{}", invoke(1, 10), complete("ok", 2)),
            3,
            |p| matches!(p, Problem::Mismatch { op: OpKind::Write, invoke_op: OpKind::Read, invoke_line: 2, .. }),
            "line 3: client 1 completes write on \"a\" but invoked read on \"a\" (line 2)",
        ),
        (
            format!("{}\n{}", invoke(1, 10), complete("ok", 1).replace("\"x\"", "\"y\"")),
            2,
            |p| matches!(p, Problem::ValueMismatch { client: 1, .. }),
            "line 2: client 1 completes write of \"y\" but invoked it with \"x\"",
        ),
        (
            invoke(1, 10).replace(r#","value":"x""#, ""),
            1,
            |p| matches!(p, Problem::MissingValue { client: 1, op: OpKind::Write }),
            "line 1: client 1 invokes write without a value",
        ),
    ];
    for (text, line, expected, message) in cases {
        let error = parse_history(&text).expect_err("the history is malformed");
        assert_eq!(error.line, line, "{text}");
        assert!(expected(&error.problem), "{text}: {}", error.problem);
        assert_eq!(error.to_string(), message, "{text}");
    }
}

#[test]
fn stamps_and_new_ops_parse_and_round_trip() {
    // Goal: `at_ms`, `expires_ms`, `expire` and `delete` parse, survive writing and parsing, reach
    // the paired operations and their messages; a completion may repeat the stamps. Method: a
    // write with both stamps completed with them repeated, a stamped read, an expire and a delete.
    let text = r#"{"client":1,"kind":"invoke","time_ns":1,"op":"write","key":"k","value":"v","at_ms":5,"expires_ms":9}
{"client":1,"kind":"ok","time_ns":2,"op":"write","key":"k","value":"v","at_ms":5,"expires_ms":9}
{"client":2,"kind":"invoke","time_ns":3,"op":"read","key":"k","at_ms":11}
{"client":2,"kind":"ok","time_ns":4,"op":"read","key":"k","value":null}
{"client":3,"kind":"invoke","time_ns":5,"op":"expire","key":"k","at_ms":12}
{"client":3,"kind":"ok","time_ns":6,"op":"expire","key":"k","at_ms":12}
{"client":4,"kind":"invoke","time_ns":7,"op":"delete","key":"k"}
{"client":4,"kind":"info","time_ns":8,"op":"delete","key":"k"}
"#;
    let events = parse_history(text).unwrap();
    assert_eq!((events[0].at_ms, events[0].expires_ms), (Some(5), Some(9)));
    assert_eq!((events[4].op, events[6].op), (OpKind::Expire, OpKind::Delete));
    let mut written = Vec::new();
    write_history(&events, &mut written).unwrap();
    assert_eq!(parse_history(&String::from_utf8(written).unwrap()).unwrap(), events);
    let operations = pair_operations(&events).unwrap();
    assert_eq!((operations[0].at_ms, operations[0].expires_ms), (Some(5), Some(9)));
    assert_eq!((operations[1].at_ms, operations[2].at_ms, operations[3].outcome), (Some(11), Some(12), Outcome::Info));
    assert_eq!(operations[0].to_string(), r#"client 1 write "v" (at_ms 5, expires_ms 9) [invoked 1 ns, ok 2 ns]"#);
    assert_eq!(operations[1].to_string(), "client 2 read -> absent (at_ms 11) [invoked 3 ns, ok 4 ns]");
    assert_eq!(operations[2].to_string(), "client 3 expire (at_ms 12) [invoked 5 ns, ok 6 ns]");
    assert_eq!(operations[3].to_string(), "client 4 delete [invoked 7 ns, info 8 ns]");
    let line =
        r#"{"client":1,"kind":"invoke","time_ns":1,"op":"write","key":"k","value":"v","at_ms":5,"expires_ms":9}"#;
    assert_eq!(events[0].to_json_line(), line);
}

#[test]
fn each_stamp_malformation_is_named() {
    // Goal: a misplaced expiry and a completion contradicting its invocation's stamps are typed
    // errors with their line and a message. Method: one minimal violating history per case.
    let invoke = r#"{"client":1,"kind":"invoke","time_ns":1,"op":"write","key":"k","value":"v","at_ms":5}"#;
    let cases: Vec<(String, usize, ProblemTest, &str)> = vec![
        (
            r#"{"client":1,"kind":"invoke","time_ns":1,"op":"append","key":"k","value":"v","expires_ms":3}"#.into(),
            1,
            |p| matches!(p, Problem::ExpiryOnNonWrite { client: 1, op: OpKind::Append }),
            "line 1: client 1 gives append an expires_ms: only writes set an expiry",
        ),
        (
            format!("{invoke}\n{}", invoke.replace("invoke", "ok").replace(r#""at_ms":5"#, r#""at_ms":6"#)),
            2,
            |p| matches!(p, Problem::StampMismatch { field: "at_ms", value: 6, invoke_value: Some(5), .. }),
            "line 2: client 1 completes write with at_ms 6 but invoked it with 5",
        ),
        (
            format!("{invoke}\n{}", invoke.replace("invoke", "ok").replace('}', r#","expires_ms":8}"#)),
            2,
            |p| matches!(p, Problem::StampMismatch { field: "expires_ms", value: 8, invoke_value: None, .. }),
            "line 2: client 1 completes write with expires_ms 8 but invoked it with none",
        ),
        (
            r#"{"client":1,"kind":"invoke","time_ns":1,"op":"sweep","key":"k"}"#.into(),
            1,
            |p| matches!(p, Problem::UnknownOp(op) if op == "sweep"),
            r#"line 1: unknown op "sweep" (expected read, write, append, expire or delete)"#,
        ),
    ];
    for (text, line, expected, message) in cases {
        let error = parse_history(&text).expect_err("the history is malformed");
        assert_eq!(error.line, line, "{text}");
        assert!(expected(&error.problem), "{text}: {}", error.problem);
        assert_eq!(error.to_string(), message, "{text}");
    }
    let without = format!("{invoke}\n{}", invoke.replace("invoke", "ok").replace(r#","at_ms":5"#, ""));
    assert!(parse_history(&without).is_ok(), "a completion need not repeat the stamps");
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
