//! Planning: Redis commands to replicated commands or the gateway's own replies.

use super::*;

/// Facts of a made-up gateway for the unit tests.
pub(crate) fn facts() -> ServerFacts {
    ServerFacts {
        protocol: "nezha".into(),
        node: "gw".into(),
        replicas: 3,
        client_nodes: 256,
        connections_max: 1_024,
        address: "127.0.0.1:7379".parse().expect("address"),
        requirepass: None,
        idle_timeout: std::time::Duration::from_secs(300),
        pipeline_depth_max: 1_024,
        reply_bytes_max: 64 * 1024,
    }
}

/// A gateway with one connection open, and that connection's id.
pub(crate) fn connected() -> (Gateway, u64) {
    let gateway = Gateway::new(facts());
    let id = gateway.open("127.0.0.1:50000".parse().expect("peer"), facts().address, 9);
    (gateway, id)
}

pub(crate) fn words(text: &str) -> Vec<Bytes> {
    text.split(' ').map(|w| Bytes::from(w.to_string())).collect()
}

fn plan_words(text: &str) -> Action {
    let (gateway, id) = connected();
    gateway.plan(id, &words(text))
}

#[test]
fn expiry_options_stay_relative_and_bad_times_are_refused_as_redis_does() {
    use ordo_core::command::{ExpireCondition, ExpiryTime, SetExpiry, TtlRead};
    let set_expiry = |text| match plan_words(text) {
        Action::Replicate(Command::Set { expiry, .. }, _) => Ok(expiry),
        Action::Reply(Reply::Error(e)) => Err(e),
        other => panic!("{other:?}"),
    };
    assert_eq!(set_expiry("SET k v EX 10"), Ok(SetExpiry::Set(ExpiryTime::In(10_000))));
    assert_eq!(set_expiry("SET k v NX PX 5"), Ok(SetExpiry::Set(ExpiryTime::In(5))));
    assert_eq!(set_expiry("SET k v PXAT 7"), Ok(SetExpiry::Set(ExpiryTime::At(7))));
    assert_eq!(set_expiry("SET k v KEEPTTL"), Ok(SetExpiry::Keep));
    assert_eq!(set_expiry("SET k v"), Ok(SetExpiry::Clear));
    assert_eq!(set_expiry("SET k v EX 0"), Err("ERR invalid expire time in 'set' command".into()));
    assert_eq!(set_expiry("SETEX k -1 v"), Err("ERR invalid expire time in 'setex' command".into()));
    assert_eq!(set_expiry("SET k v EX 1 PX 1"), Err("ERR syntax error".into()));
    assert_eq!(set_expiry("SET k v EX 9223372036854775807"), Err("ERR invalid expire time in 'set' command".into()));
    assert_eq!(
        plan_words("PEXPIRE k 50 GT"),
        Action::Replicate(
            Command::Expire { key: "k".into(), time: ExpiryTime::In(50), condition: ExpireCondition::IfLater },
            Shape::Plain
        )
    );
    assert!(matches!(plan_words("EXPIRE k 1 NX GT"), Action::Reply(Reply::Error(e)) if e.contains("not compatible")));
    assert_eq!(
        plan_words("TTL k"),
        Action::Replicate(Command::Ttl { key: "k".into(), read: TtlRead::Seconds }, Shape::Plain)
    );
    assert!(matches!(plan_words("TIME"), Action::Reply(Reply::Array(parts)) if parts.len() == 2));
}

#[test]
fn redis_commands_map_to_replicated_commands() {
    // Goal: each supported command becomes the right Command; INCR/DECR are IncrBy,
    // HMSET is HSet; SET GET is GetSet; unknown commands are errors.
    assert_eq!(plan_words("get k"), Action::Replicate(Command::get("k"), Shape::Plain));
    assert_eq!(plan_words("DECR k"), Action::Replicate(Command::IncrBy { key: "k".into(), delta: -1 }, Shape::Plain));
    assert!(matches!(plan_words("HMSET h a 1 b 2"), Action::Replicate(Command::HSet { .. }, Shape::Ok)));
    assert!(matches!(
        plan_words("SET k v NX"),
        Action::Replicate(Command::Set { condition: SetCondition::IfAbsent, .. }, _)
    ));
    assert!(matches!(plan_words("FLUSHALL"), Action::Replicate(Command::Keyspace(_), Shape::Plain)));
    assert!(matches!(
        plan_words("SET k v XX GET PX 5"),
        Action::Replicate(
            Command::GetSet { condition: SetCondition::IfPresent, expiry: ordo_core::command::SetExpiry::Set(_), .. },
            _
        )
    ));
    assert!(matches!(plan_words("SET k v GET GET"), Action::Reply(Reply::Error(e)) if e.contains("syntax")));
    assert!(matches!(plan_words("SUBSTR k 0 1"), Action::Replicate(Command::GetRange { .. }, _)));
    assert!(matches!(plan_words("NOSUCH"), Action::Reply(Reply::Error(e)) if e.contains("unknown command")));
    assert!(matches!(plan_words("GET"), Action::Reply(Reply::Error(e)) if e.contains("wrong number")));
    assert!(matches!(plan_words("MSET a 1 b"), Action::Reply(Reply::Error(e)) if e.contains("'mset'")));
    assert!(matches!(plan_words("HSET h a"), Action::Reply(Reply::Error(e)) if e.contains("'hset'")));
    assert_eq!(plan_words("CONFIG GET save"), Action::Reply(Reply::Map(Vec::new())));
    assert!(matches!(plan_words("SETNX k v"), Action::Replicate(Command::Set { .. }, Shape::Flag)));
    assert!(matches!(plan_words("GETRANGE k 0 x"), Action::Reply(Reply::Error(e)) if e.contains("integer")));
    assert!(matches!(plan_words("SETRANGE k -1 x"), Action::Reply(Reply::Error(e)) if e.contains("out of range")));
    assert!(matches!(plan_words("MSETNX a 1 b"), Action::Reply(Reply::Error(e)) if e.contains("'msetnx'")));
    assert_eq!(
        plan_words("HEXISTS h f"),
        Action::Replicate(Command::HRead { key: "h".into(), read: HashRead::Exists("f".into()) }, Shape::Plain)
    );
}

#[test]
fn every_table_command_is_served() {
    // Goal: the table and the dispatch agree: no command of the table falls through to
    // "unknown command". Method: plan each name with enough arguments for its arity.
    for spec in table::COMMANDS {
        let mut args = vec![Bytes::from(spec.name)];
        let words = spec.arity.unsigned_abs() as usize;
        args.extend((1..words).map(|_| Bytes::from_static(b"0")));
        let (gateway, id) = connected();
        let action = gateway.plan(id, &args);
        assert!(
            !matches!(&action, Action::Reply(Reply::Error(e)) if e.contains("unknown command")),
            "{} is in the table but not served: {action:?}",
            spec.name
        );
    }
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]
    #[test]
    fn planning_never_panics(words in proptest::collection::vec(prop_oneof![
        proptest::sample::select(vec!["HELLO", "hello", "AUTH", "CLIENT", "CONFIG", "INFO", "COMMAND", "SET", "HSET",
            "GET", "2", "3", "-1", "AUTH", "SETNAME", "SETINFO", "LIB-NAME", "LIST", "ID", "TYPE", "GET", "SET", "*",
            "[", "[^", "\\", "default", ""]).prop_map(String::from),
        ".{0,8}",
    ], 0..8)) {
        // Goal: bad input to the gateway's own commands is an error reply, never a panic.
        // Method: word soups from command and option names, planned on one connection in turn,
        // each reply encoded in the version the connection then has.
        let (gateway, id) = connected();
        let args: Vec<Bytes> = words.into_iter().map(Bytes::from).collect();
        if let Action::Reply(reply) | Action::Close(reply) = gateway.plan(id, &args) {
            reply.encode(gateway.version(id), &mut Vec::new());
        }
    }
}

#[test]
fn command_count_and_list_come_from_the_table() {
    let count = table::COMMANDS.len() as i64;
    assert_eq!(plan_words("COMMAND COUNT"), Action::Reply(Reply::Integer(count)));
    let Action::Reply(Reply::Array(names)) = plan_words("COMMAND LIST") else { panic!("a list") };
    assert_eq!(names.len() as i64, count);
    assert!(names.contains(&Some(Bytes::from("hello"))));
    let Action::Reply(Reply::Array(names)) = plan_words("COMMAND LIST FILTERBY PATTERN h*") else { panic!("a list") };
    assert!(names.iter().flatten().all(|name| name.starts_with(b"h")) && names.len() >= 6);
    assert!(
        matches!(plan_words("COMMAND GETKEYS get k"), Action::Reply(Reply::Error(e)) if e.contains("unknown subcommand"))
    );
}

#[test]
fn results_become_redis_replies() {
    assert_eq!(reply(Outcome::Done(CommandResult::Nil), Shape::Plain), Reply::Bulk(None));
    assert_eq!(reply(Outcome::Done(CommandResult::Integer(2)), Shape::Ok), Reply::Simple("OK"));
    assert_eq!(reply(Outcome::Done(CommandResult::Ok), Shape::Flag), Reply::Integer(1));
    assert_eq!(reply(Outcome::Done(CommandResult::Nil), Shape::Flag), Reply::Integer(0));
    assert_eq!(reply(Outcome::Done(CommandResult::Value("hash".into())), Shape::Status), Reply::Simple("hash"));
    assert!(matches!(reply(Outcome::Done(CommandResult::Error("value is not an integer".into())), Shape::Plain),
        Reply::Error(e) if e.starts_with("ERR ")));
}

#[test]
fn hgetall_is_a_map() {
    // Goal: HGETALL's pairs are a RESP3 map (a flat array in RESP2), an absent hash an empty map.
    let values = vec![Some(Bytes::from("f")), Some(Bytes::from("1"))];
    assert_eq!(
        reply(Outcome::Done(CommandResult::Values(values)), Shape::Pairs),
        Reply::Map(vec![(Reply::text("f"), Reply::text("1"))])
    );
    assert_eq!(reply(Outcome::Done(CommandResult::Nil), Shape::Pairs), Reply::Map(Vec::new()));
}
