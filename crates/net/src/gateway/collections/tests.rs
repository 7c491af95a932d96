//! The collection commands through the gateway: words to commands, results to replies, and
//! whole sessions (gateway plus store, in process) against the bytes redis-server 7.0.15 sent
//! for the same requests.

use super::*;
use crate::gateway::tests::{connected, words};
use crate::gateway::transaction::exec_reply;
use crate::gateway::{Gateway, reply as shape_reply};
use crate::resp::RespVersion;
use ordo_core::command::{AddOptions, Compare, LexBound, Range, RangeBy, Score, ScoreBound, SetCondition, SortedOp};
use ordo_core::{ClientId, KvStore, RequestId, StateMachine};

fn planned(text: &str) -> Action {
    let (gateway, id) = connected();
    gateway.plan(id, &words(text))
}

fn refused(text: &str) -> String {
    match planned(text) {
        Action::Reply(Reply::Error(error)) => error,
        other => panic!("{text}: planned {other:?}"),
    }
}

fn command(text: &str) -> (Command, Shape) {
    match planned(text) {
        Action::Replicate(command, shape) => (command, shape),
        other => panic!("{text}: planned {other:?}"),
    }
}

/// A gateway connection and a store behind it, run in process: each request is planned, its
/// command applied to the store, and its reply encoded in the connection's version.
struct Session {
    gateway: Gateway,
    id: u64,
    store: KvStore,
    number: u64,
}

impl Session {
    fn new() -> Session {
        let (gateway, id) = connected();
        Session { gateway, id, store: KvStore::new(), number: 0 }
    }

    fn apply(&mut self, command: &Command) -> CommandResult {
        self.number += 1;
        self.store.apply(RequestId { client: ClientId(1), number: self.number }, command)
    }

    /// The reply bytes of one request, as text.
    fn send(&mut self, text: &str) -> String {
        let reply = match self.gateway.plan(self.id, &words(text)) {
            Action::Reply(reply) => reply,
            Action::Replicate(command, shape) => shape_reply(Outcome::Done(self.apply(&command)), shape),
            Action::Exec(exec) => {
                let transaction = Command::Transaction { watched: Vec::new(), commands: exec.commands.clone() };
                exec_reply(Outcome::Done(self.apply(&transaction)), &exec.slots)
            }
            other => panic!("{text}: {other:?}"),
        };
        let mut out = Vec::new();
        reply.encode(self.gateway.version(self.id), &mut out);
        String::from_utf8(out).expect("text replies")
    }

    /// Sends each request and checks its reply.
    fn check(&mut self, exchanges: &[(&str, &str)]) {
        for (request, expected) in exchanges {
            assert_eq!(self.send(request), *expected, "reply to {request}");
        }
    }
}

#[test]
fn list_and_set_words_become_commands() {
    // Goal: each list and set command plans the right command and reply shape, SPOP and
    // SRANDMEMBER with the request's seed.
    assert_eq!(
        command("RPUSHX l a b"),
        (
            Command::List {
                key: "l".into(),
                op: ListOp::Push { end: ListEnd::Right, values: vec!["a".into(), "b".into()], existing_only: true }
            },
            Shape::Plain
        )
    );
    let pop = command("lpop l 2");
    assert_eq!(pop.1, Shape::Collection(Form::NullableArray));
    assert!(matches!(pop.0, Command::List { op: ListOp::Pop { end: ListEnd::Left, count: Some(2) }, .. }));
    let lpos = command("LPOS l a RANK -2 COUNT 0 MAXLEN 9");
    let op = ListOp::Position { value: "a".into(), rank: -2, count: Some(0), max_len: 9 };
    assert_eq!(lpos, (Command::List { key: "l".into(), op }, Shape::Collection(Form::Integers)));
    let spop = |text| match command(text).0 {
        Command::Members { op: SetOp::Pop { seed, .. }, .. } => seed,
        other => panic!("{other:?}"),
    };
    assert_ne!(spop("SPOP s"), spop("SPOP s"), "each request draws its own seed");
    let store = command("SDIFFSTORE d a b").0;
    let expected =
        Command::SetAlgebra { op: Combine::Diff, keys: vec!["a".into(), "b".into()], destination: Some("d".into()) };
    assert_eq!(store, expected);
    assert_eq!(store.keys(), vec![Key::from("d"), Key::from("a"), Key::from("b")]);
    assert_eq!(command("SINTER a b").1, Shape::Collection(Form::Members));
    assert_eq!(command("INCRBYFLOAT k 1.5").0, Command::IncrByFloat { key: "k".into(), delta: "1.5".into() });
}

use ordo_core::Key;

#[test]
fn list_and_set_argument_errors_are_redis_texts() {
    // Goal: argument errors found while planning, word for word as redis-server 7.0.15 (7.2 for
    // LPOS RANK's smallest value) gives them.
    assert_eq!(refused("LPOP l -1"), NOT_POSITIVE);
    assert_eq!(refused("LPOP l x"), NOT_POSITIVE);
    assert_eq!(refused("LPOP l 1 2"), "ERR wrong number of arguments for 'lpop' command");
    assert_eq!(refused("LINDEX l x"), NOT_INTEGER);
    assert_eq!(refused("LRANGE l a b"), NOT_INTEGER);
    assert_eq!(refused("LINSERT l middle a b"), SYNTAX);
    assert_eq!(refused("LPOS l a RANK 0"), LPOS_RANK_ZERO);
    assert_eq!(refused("LPOS l a RANK -9223372036854775808"), FULL_RANGE);
    assert_eq!(refused("LPOS l a COUNT -1"), "ERR COUNT can't be negative");
    assert_eq!(refused("LPOS l a MAXLEN -1"), "ERR MAXLEN can't be negative");
    assert_eq!(refused("LPOS l a RANK"), SYNTAX);
    assert_eq!(refused("LPOS l a FOO 1"), SYNTAX);
    assert_eq!(refused("SPOP s x"), NOT_POSITIVE);
    assert_eq!(refused("SPOP s 1 2"), SYNTAX);
    assert_eq!(refused("SRANDMEMBER s x"), NOT_INTEGER);
    assert_eq!(refused("SRANDMEMBER s -9223372036854775808"), FULL_RANGE);
    assert_eq!(refused("LPUSH l"), "ERR wrong number of arguments for 'lpush' command");
}

#[test]
fn sorted_words_become_commands() {
    // Goal: ZADD's options, ZRANGE's forms (REV swaps BYSCORE's and BYLEX's ends) and the
    // shapes of their replies.
    let score = |text: &str| Score::parse(text.as_bytes()).expect("score");
    let options =
        AddOptions { condition: SetCondition::IfPresent, compare: Compare::Greater, changed: true, increment: false };
    let members = vec![(score("1"), "a".into()), (score("-inf"), "b".into())];
    assert_eq!(
        command("ZADD z xx gt ch 1 a -inf b"),
        (Command::Sorted { key: "z".into(), op: SortedOp::Add { members, options } }, Shape::Plain)
    );
    let (incr, shape) = command("ZINCRBY z 2.5 m");
    assert_eq!(shape, Shape::Collection(Form::Double));
    assert!(matches!(
        incr,
        Command::Sorted { op: SortedOp::Add { options: AddOptions { increment: true, .. }, .. }, .. }
    ));
    let bound = |text: &str| ScoreBound::parse(text.as_bytes()).expect("bound");
    let range = |by, reverse, limit, with_scores| Command::Sorted {
        key: "z".into(),
        op: SortedOp::Range(Box::new(Range { by, reverse, limit, with_scores })),
    };
    assert_eq!(
        command("ZRANGE z (5 1 BYSCORE REV LIMIT 1 2 WITHSCORES"),
        (
            range(RangeBy::Score { min: bound("1"), max: bound("(5") }, true, Some((1, 2)), true),
            Shape::Collection(Form::Scored)
        )
    );
    assert_eq!(
        command("ZREVRANGEBYSCORE z +inf -inf").0,
        range(RangeBy::Score { min: bound("-inf"), max: bound("+inf") }, true, None, false)
    );
    assert_eq!(
        command("zrange z [b (d bylex").0,
        range(
            RangeBy::Lex { min: LexBound::Inclusive("b".into()), max: LexBound::Exclusive("d".into()) },
            false,
            None,
            false
        )
    );
    assert_eq!(command("ZREVRANGE z 0 -1").0, range(RangeBy::Rank { start: 0, stop: -1 }, true, None, false));
    assert_eq!(command("ZPOPMIN z").1, Shape::Collection(Form::ScoredFlat));
    assert_eq!(command("ZPOPMAX z 3").1, Shape::Collection(Form::Scored));
    assert_eq!(command("ZMSCORE z a b").1, Shape::Collection(Form::Doubles));
}

#[test]
fn sorted_argument_errors_are_redis_texts() {
    // Goal: ZADD's and ZRANGE's refusals, each checked against redis-server 7.0.15.
    assert_eq!(refused("ZADD z nx xx 1 a"), "ERR XX and NX options at the same time are not compatible");
    assert_eq!(refused("ZADD z gt lt 1 a"), "ERR GT, LT, and/or NX options at the same time are not compatible");
    assert_eq!(refused("ZADD z nx gt 1 a"), "ERR GT, LT, and/or NX options at the same time are not compatible");
    assert_eq!(refused("ZADD z incr 1 a 2 b"), "ERR INCR option supports a single increment-element pair");
    assert_eq!(refused("ZADD z x a"), "ERR value is not a valid float");
    assert_eq!(refused("ZADD z nan a"), "ERR value is not a valid float");
    assert_eq!(refused("ZADD z 1 a 2"), SYNTAX);
    assert_eq!(refused("ZADD z foo 1 a"), SYNTAX);
    assert_eq!(refused("ZINCRBY z nx a"), SYNTAX, "ZINCRBY is ZADD INCR to Redis' parser");
    assert_eq!(refused("ZRANGE z x 3 BYSCORE"), "ERR min or max is not a float");
    assert_eq!(refused("ZRANGE z 1 x"), NOT_INTEGER);
    assert_eq!(
        refused("ZRANGE z 1 3 LIMIT 0 1"),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(refused("ZRANGE z 0 -1 BYLEX"), "ERR min or max not valid string range item");
    assert_eq!(
        refused("ZRANGE z [b (d BYLEX WITHSCORES"),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(refused("ZRANGE z 0 -1 BYSCORE BYLEX"), SYNTAX);
    assert_eq!(refused("ZRANGE z 0 -1 REV REV"), SYNTAX);
    assert_eq!(refused("ZRANGEBYSCORE z 2 4 LIMIT 1"), SYNTAX);
    assert_eq!(refused("ZRANGEBYSCORE z 2 4 WITHSCORES REV"), SYNTAX);
    assert_eq!(refused("ZCOUNT z x 1"), "ERR min or max is not a float");
    assert_eq!(refused("ZPOPMIN z -1"), NOT_POSITIVE);
    assert_eq!(refused("ZREMRANGEBYRANK z x 0"), NOT_INTEGER);
    assert!(
        matches!(planned("ZRANGE z 0 -1 LIMIT 0 1 LIMIT 0 2 BYSCORE"), Action::Replicate(..)),
        "the last LIMIT counts"
    );
}

#[test]
fn forms_shape_replies_for_both_versions() {
    // Goal: each form's reply has Redis 7's bytes in RESP3 and its RESP2 lowering.
    let encoded = |reply: Reply, version| {
        let mut out = Vec::new();
        reply.encode(version, &mut out);
        String::from_utf8(out).expect("text")
    };
    let both = |result: CommandResult, form| {
        let reply = super::reply(result, form);
        (encoded(reply.clone(), RespVersion::Resp3), encoded(reply, RespVersion::Resp2))
    };
    let values =
        |items: &[&str]| CommandResult::Values(items.iter().map(|v| Some(Bytes::from(v.to_string()))).collect());
    assert_eq!(both(values(&["a"]), Form::Members), ("~1\r\n$1\r\na\r\n".into(), "*1\r\n$1\r\na\r\n".into()));
    assert_eq!(both(CommandResult::Nil, Form::NullableArray), ("_\r\n".into(), "*-1\r\n".into()));
    assert_eq!(both(values(&["1", "0"]), Form::Integers), ("*2\r\n:1\r\n:0\r\n".into(), "*2\r\n:1\r\n:0\r\n".into()));
    assert_eq!(both(CommandResult::Value("2.5".into()), Form::Double), (",2.5\r\n".into(), "$3\r\n2.5\r\n".into()));
    assert_eq!(both(CommandResult::Nil, Form::Double), ("_\r\n".into(), "$-1\r\n".into()));
    let scores = CommandResult::Values(vec![Some("inf".into()), None]);
    assert_eq!(both(scores, Form::Doubles), ("*2\r\n,inf\r\n_\r\n".into(), "*2\r\n$3\r\ninf\r\n$-1\r\n".into()));
    assert_eq!(
        both(values(&["a", "1", "b", "2.5"]), Form::Scored),
        (
            "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n".into(),
            "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n".into()
        )
    );
    assert_eq!(
        both(values(&["c", "-2"]), Form::ScoredFlat),
        ("*2\r\n$1\r\nc\r\n,-2\r\n".into(), "*2\r\n$1\r\nc\r\n$2\r\n-2\r\n".into())
    );
    assert_eq!(both(values(&[]), Form::ScoredFlat), ("*0\r\n".into(), "*0\r\n".into()));
    let error = super::super::reply(
        Outcome::Done(CommandResult::Error("WRONGTYPE x".into())),
        Shape::Collection(Form::Members),
    );
    assert_eq!(error, Reply::Error("WRONGTYPE x".into()));
}

#[test]
fn sessions_answer_as_redis_in_resp3() {
    // Goal: whole exchanges, gateway and store together, give the bytes redis-server 7.0.15
    // gave the same requests after HELLO 3 (scores chosen to print alike in 7.0 and 7.2).
    let mut session = Session::new();
    session.send("HELLO 3");
    session.check(&[
        ("zadd z 1 a 2.5 b 0.5 c", ":3\r\n"),
        ("zrange z 0 -1 withscores", "*3\r\n*2\r\n$1\r\nc\r\n,0.5\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"),
        ("zpopmin z", "*2\r\n$1\r\nc\r\n,0.5\r\n"),
        ("zpopmin z 2", "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"),
        ("zscore z a", "_\r\n"),
        ("zmscore z a x", "*2\r\n_\r\n_\r\n"),
        ("zadd z incr 1 a", ",1\r\n"),
        ("zadd z nx incr 1 a", "_\r\n"),
        ("zrank z a", ":0\r\n"),
        ("zpopmin nz", "*0\r\n"),
        ("type z", "+zset\r\n"),
        ("lpop l 2", "_\r\n"),
        ("rpush l a b", ":2\r\n"),
        ("lpop l 1", "*1\r\n$1\r\na\r\n"),
        ("type l", "+list\r\n"),
        ("sadd s a", ":1\r\n"),
        ("smembers s", "~1\r\n$1\r\na\r\n"),
        ("spop nos 2", "~0\r\n"),
        ("srandmember nos 2", "*0\r\n"),
        ("smismember s a x", "*2\r\n:1\r\n:0\r\n"),
        ("sinter s nos", "~0\r\n"),
        ("type s", "+set\r\n"),
        ("incrbyfloat f 1.5", "$3\r\n1.5\r\n"),
        ("hincrbyfloat h f 1.5", "$3\r\n1.5\r\n"),
        ("zincrby z 1.5 a", ",2.5\r\n"),
        ("lpos l zz count 1", "*0\r\n"),
        ("lpos l b", ":0\r\n"),
    ]);
}

#[test]
fn sessions_answer_as_redis_in_resp2() {
    // Goal: the same for RESP2, where doubles are bulk strings, pairs flat and null arrays `*-1`;
    // errors come from the store in Redis' words.
    let mut session = Session::new();
    session.check(&[
        ("lpop l", "$-1\r\n"),
        ("lpop l 2", "*-1\r\n"),
        ("rpush l a b c", ":3\r\n"),
        ("lpop l 0", "*0\r\n"),
        ("lpop l 5", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        ("exists l", ":0\r\n"),
        ("set s x", "+OK\r\n"),
        ("lpop s", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("lset nol 0 a", "-ERR no such key\r\n"),
        ("rpush l a b c", ":3\r\n"),
        ("lset l 5 a", "-ERR index out of range\r\n"),
        ("zadd z 1 a 2 b 3 c 4 d 5 e", ":5\r\n"),
        ("zrange z -inf +inf byscore limit 1 2 withscores", "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
        ("zrevrange z 0 1 withscores", "*4\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n"),
        ("zcount z (1 3", ":2\r\n"),
        ("zpopmax z", "*2\r\n$1\r\ne\r\n$1\r\n5\r\n"),
        ("zadd z incr -inf e2", "$4\r\n-inf\r\n"),
        ("zadd z incr +inf e2", "-ERR resulting score is not a number (NaN)\r\n"),
        ("zadd s 1 a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("incrbyfloat n 10.5", "$4\r\n10.5\r\n"),
        ("incrbyfloat n 0.1", "$4\r\n10.6\r\n"),
        ("incrbyfloat n inf", "-ERR increment would produce NaN or Infinity\r\n"),
        ("incrbyfloat s 1", "-ERR value is not a valid float\r\n"),
        ("hincrbyfloat s f x", "-ERR value is not a valid float\r\n"),
        ("hincrbyfloat s f 1", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("hset h f x", ":1\r\n"),
        ("hincrbyfloat h f 1", "-ERR hash value is not a float\r\n"),
        ("hincrbyfloat h g inf", "-ERR value is NaN or Infinity\r\n"),
        ("incrbyfloat x -0", "$1\r\n0\r\n"),
    ]);
}

#[test]
fn transactions_shape_each_collection_reply() {
    // Goal: inside MULTI a collection command keeps its own reply shape in EXEC's array.
    let mut session = Session::new();
    session.send("HELLO 3");
    session.check(&[
        ("MULTI", "+OK\r\n"),
        ("ZADD z 1 a", "+QUEUED\r\n"),
        ("ZSCORE z a", "+QUEUED\r\n"),
        ("SADD s m", "+QUEUED\r\n"),
        ("SMEMBERS s", "+QUEUED\r\n"),
        ("ZADD z x a", "+QUEUED\r\n"),
        ("EXEC", "*5\r\n:1\r\n,1\r\n:1\r\n~1\r\n$1\r\nm\r\n-ERR value is not a valid float\r\n"),
    ]);
}

use proptest::prelude::*;

const NAMES: &[&str] = &[
    "ZADD",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGEBYSCORE",
    "ZREVRANGE",
    "ZINCRBY",
    "ZPOPMIN",
    "ZCOUNT",
    "ZREMRANGEBYSCORE",
    "LPOS",
    "LPOP",
    "LINSERT",
    "LSET",
    "LRANGE",
    "SPOP",
    "SRANDMEMBER",
    "SINTERSTORE",
    "SMOVE",
    "INCRBYFLOAT",
    "HINCRBYFLOAT",
];

const WORDS: &[&str] = &[
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "BYSCORE",
    "BYLEX",
    "REV",
    "LIMIT",
    "WITHSCORES",
    "RANK",
    "COUNT",
    "MAXLEN",
    "BEFORE",
    "(1",
    "[a",
    "-",
    "+",
    "-inf",
    "+inf",
    "0",
    "-1",
    "1",
    "x",
    "",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]
    #[test]
    fn planning_collection_commands_never_panics(
        name in proptest::sample::select(NAMES),
        words in proptest::collection::vec(prop_oneof![proptest::sample::select(WORDS).prop_map(String::from), ".{0,4}"], 0..9),
    ) {
        // Goal: any words after a collection command's name are planned into a command or an
        // error reply, never a panic (the table only checks their count). Method: word soups of
        // options and numbers after each name, each reply encoded.
        let (gateway, id) = connected();
        let args: Vec<Bytes> = std::iter::once(name.to_string()).chain(words).map(Bytes::from).collect();
        if let Action::Reply(reply) = gateway.plan(id, &args) {
            reply.encode(gateway.version(id), &mut Vec::new());
        }
    }
}

/// The requests of the live comparison (`live_requests.txt`): one per line, `#` comments.
fn live_requests() -> impl Iterator<Item = &'static str> {
    include_str!("live_requests.txt").lines().filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// Where the reply starting at `at` ends, once `buffer` holds all of it.
fn reply_end(buffer: &[u8], at: usize) -> Option<usize> {
    let line = at + buffer.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let number = || std::str::from_utf8(&buffer[at + 1..line]).ok()?.parse::<i64>().ok();
    let next = line + 2;
    match buffer[at] {
        b'$' | b'=' | b'!' => match number()? {
            n if n < 0 => Some(next),
            n => Some(next + n as usize + 2).filter(|&end| end <= buffer.len()),
        },
        kind @ (b'*' | b'~' | b'%' | b'>') => {
            let count = number()?.max(0) as usize * if kind == b'%' { 2 } else { 1 };
            (0..count).try_fold(next, |at, _| reply_end(buffer, at))
        }
        _ => Some(next),
    }
}

/// Sends one request to a live Redis and returns its reply, as text.
fn ask(stream: &mut std::net::TcpStream, request: &str) -> String {
    use std::io::{Read, Write};
    let args = words(request);
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in &args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    stream.write_all(&out).expect("redis takes the request");
    let mut buffer = Vec::new();
    while reply_end(&buffer, 0).is_none() {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).expect("redis answers");
        assert!(read > 0, "redis closed the connection");
        buffer.extend_from_slice(&chunk[..read]);
    }
    String::from_utf8(buffer).expect("text replies")
}

#[test]
#[ignore = "needs redis-server 7 on 127.0.0.1:6399 (redis-server --port 6399 --save '' --daemonize yes)"]
fn replies_match_a_live_redis_server() {
    // Goal: for every request of `live_requests.txt`, in RESP2 and in RESP3, ordo (gateway and store
    // in process) sends the bytes a real redis-server sends. Method: the same requests on a
    // flushed Redis and a fresh session, reply by reply. Run with
    // `cargo test -p ordo-net --lib live_redis -- --ignored`.
    assert!(live_requests().count() > 200, "the comparison covers every command");
    let mut redis = std::net::TcpStream::connect("127.0.0.1:6399").expect("redis-server on port 6399");
    for version in ["2", "3"] {
        ask(&mut redis, "FLUSHALL");
        ask(&mut redis, &format!("HELLO {version}"));
        let mut session = Session::new();
        session.send(&format!("HELLO {version}"));
        for request in live_requests() {
            assert_eq!(session.send(request), ask(&mut redis, request), "RESP{version}: {request}");
        }
    }
}
