//! Planning and replies of the commands over the whole keyspace (KEYS, SCAN, DBSIZE,
//! FLUSHDB/FLUSHALL, RANDOMKEY), and of RENAME, RENAMENX and UNLINK. Each becomes one replicated
//! command ([`Keyspace`], [`Command::Rename`]; UNLINK is DEL: the store frees memory at once
//! either way).

use super::{Action, Shape, error};
use crate::resp::Reply;
use bytes::Bytes;
use ordo_core::command::Keyspace;
use ordo_core::{Command, CommandResult};

/// SCAN's COUNT when none is given, as in Redis.
pub const SCAN_COUNT_DEFAULT: u64 = 10;

/// Plans one of this module's commands (the table checked the name and arity); any other name
/// is an unknown command.
pub fn plan(name: &str, rest: &[Bytes]) -> Action {
    let keyspace = |command| Action::Replicate(Command::Keyspace(command), Shape::Plain);
    match name {
        "KEYS" => keyspace(Keyspace::Keys { pattern: rest[0].clone() }),
        "SCAN" => plan_scan(rest),
        "DBSIZE" => keyspace(Keyspace::Size),
        // ASYNC and SYNC differ only in when Redis frees the memory; the store frees it at once.
        "FLUSHDB" | "FLUSHALL" => match rest {
            [] => keyspace(Keyspace::Flush),
            [mode] if mode.eq_ignore_ascii_case(b"ASYNC") || mode.eq_ignore_ascii_case(b"SYNC") => {
                keyspace(Keyspace::Flush)
            }
            _ => error("ERR syntax error"),
        },
        // The seed is drawn here, once, and replicated with the command: every replica then
        // picks the same key.
        "RANDOMKEY" => keyspace(Keyspace::RandomKey { seed: rand::random() }),
        "RENAME" | "RENAMENX" => Action::Replicate(
            Command::Rename {
                source: rest[0].clone(),
                destination: rest[1].clone(),
                only_if_absent: name == "RENAMENX",
            },
            Shape::Plain,
        ),
        "UNLINK" => Action::Replicate(Command::Del { keys: rest.to_vec() }, Shape::Plain),
        _ => error(format!("ERR unknown command '{name}'")),
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`, with Redis' errors: a cursor that is
/// not an unsigned 64-bit number is invalid, a COUNT below 1 or an option without its value is
/// a syntax error.
fn plan_scan(rest: &[Bytes]) -> Action {
    let Some(cursor) = std::str::from_utf8(&rest[0]).ok().and_then(|text| text.parse::<u64>().ok()) else {
        return error("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut kind) = (None, SCAN_COUNT_DEFAULT, None);
    let mut options = rest[1..].chunks(2);
    for option in &mut options {
        let [name, value] = option else { return error("ERR syntax error") };
        match name.to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(value.clone()),
            b"TYPE" => kind = Some(value.clone()),
            b"COUNT" => match std::str::from_utf8(value).ok().and_then(|text| text.parse::<i64>().ok()) {
                Some(wanted) if wanted >= 1 => count = wanted as u64,
                Some(_) => return error("ERR syntax error"),
                None => return error("ERR value is not an integer or out of range"),
            },
            _ => return error("ERR syntax error"),
        }
    }
    // `*` matches every key: leave it out, so the store skips the matching.
    let pattern = pattern.filter(|pattern| pattern.as_ref() != b"*");
    Action::Replicate(Command::Keyspace(Keyspace::Scan { cursor, pattern, count, kind }), Shape::Scan)
}

/// SCAN's reply from the store's values (the next cursor, then the keys): a two-element array
/// of the cursor, as a bulk string, and the array of keys.
pub fn scan_reply(values: Vec<Option<Bytes>>) -> Reply {
    let mut values = values.into_iter();
    let Some(Some(cursor)) = values.next() else {
        return Reply::Error("ERR SCAN returned no cursor".into());
    };
    Reply::Nested(vec![Reply::Bulk(Some(cursor)), Reply::Array(values.collect())])
}

/// The reply of a SCAN result that is not values (an error is shaped before this).
pub fn scan_unexpected(result: &CommandResult) -> Reply {
    Reply::Error(format!("ERR unexpected SCAN result {result:?}"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::words;
    use super::super::{reply, tests::connected};
    use super::*;
    use crate::host::Outcome;

    fn plan_words(text: &str) -> Action {
        let (gateway, id) = connected();
        gateway.plan(id, &words(text))
    }

    fn keyspace(command: Keyspace, shape: Shape) -> Action {
        Action::Replicate(Command::Keyspace(command), shape)
    }

    fn refused(text: &str, expected: &str) {
        match plan_words(text) {
            Action::Reply(Reply::Error(error)) => assert_eq!(error, expected, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn keyspace_commands_plan_as_redis_parses_them() {
        // Goal: each command becomes the right replicated command, with redis-server 7.0's
        // errors for bad arguments (checked by hand against it).
        assert_eq!(plan_words("KEYS a*"), keyspace(Keyspace::Keys { pattern: "a*".into() }, Shape::Plain));
        assert_eq!(plan_words("dbsize"), keyspace(Keyspace::Size, Shape::Plain));
        for flush in ["FLUSHALL", "flushdb", "FLUSHALL async", "FLUSHDB SYNC"] {
            assert_eq!(plan_words(flush), keyspace(Keyspace::Flush, Shape::Plain), "{flush}");
        }
        refused("FLUSHALL foo", "ERR syntax error");
        refused("FLUSHDB sync async", "ERR syntax error");
        let scan = |cursor, pattern: Option<&'static str>, count, kind: Option<&'static str>| {
            keyspace(
                Keyspace::Scan { cursor, pattern: pattern.map(Bytes::from), count, kind: kind.map(Bytes::from) },
                Shape::Scan,
            )
        };
        assert_eq!(plan_words("SCAN 0"), scan(0, None, 10, None));
        assert_eq!(
            plan_words("scan 18446744073709551615 match k* COUNT 3 type hash"),
            scan(u64::MAX, Some("k*"), 3, Some("hash"))
        );
        assert_eq!(plan_words("SCAN 7 MATCH * COUNT 1 COUNT 5"), scan(7, None, 5, None), "the last COUNT wins");
        refused("SCAN abc", "ERR invalid cursor");
        refused("SCAN 18446744073709551616", "ERR invalid cursor");
        refused("SCAN abc COUNT 0", "ERR invalid cursor");
        refused("SCAN 0 COUNT 0", "ERR syntax error");
        refused("SCAN 0 COUNT -1", "ERR syntax error");
        refused("SCAN 0 COUNT abc", "ERR value is not an integer or out of range");
        refused("SCAN 0 COUNT", "ERR syntax error");
        refused("SCAN 0 MATCH a extra", "ERR syntax error");
        refused("SCAN 0 NOPE x", "ERR syntax error");
        refused("KEYS", "ERR wrong number of arguments for 'keys' command");
        refused("DBSIZE x", "ERR wrong number of arguments for 'dbsize' command");
        assert_eq!(
            plan_words("RENAMENX a b"),
            Action::Replicate(
                Command::Rename { source: "a".into(), destination: "b".into(), only_if_absent: true },
                Shape::Plain
            )
        );
        refused("RENAME a", "ERR wrong number of arguments for 'rename' command");
        assert_eq!(
            plan_words("UNLINK a b"),
            Action::Replicate(Command::Del { keys: vec!["a".into(), "b".into()] }, Shape::Plain)
        );
    }

    #[test]
    fn randomkey_carries_a_fresh_seed() {
        // Goal: the gateway draws RANDOMKEY's seed into the command, a new one each time (so
        // replicas agree on the key and clients still get different keys).
        let seeds: std::collections::BTreeSet<u64> = (0..8)
            .map(|_| match plan_words("RANDOMKEY") {
                Action::Replicate(Command::Keyspace(Keyspace::RandomKey { seed }), Shape::Plain) => seed,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(seeds.len() > 1, "{seeds:?}");
    }

    #[test]
    fn scan_replies_are_a_cursor_and_an_array() {
        // Goal: SCAN's reply is [cursor, [keys]] with the cursor a bulk string; other keyspace
        // results take the plain mapping (KEYS an array, DBSIZE an integer, FLUSH OK).
        let values = vec![Some(Bytes::from("42")), Some(Bytes::from("a")), Some(Bytes::from("b"))];
        assert_eq!(
            reply(Outcome::Done(CommandResult::Values(values)), Shape::Scan),
            Reply::Nested(vec![Reply::Bulk(Some("42".into())), Reply::Array(vec![Some("a".into()), Some("b".into())])])
        );
        assert_eq!(
            reply(Outcome::Done(CommandResult::Values(vec![Some(Bytes::from("0"))])), Shape::Scan),
            Reply::Nested(vec![Reply::Bulk(Some("0".into())), Reply::Array(Vec::new())])
        );
        assert!(matches!(reply(Outcome::Done(CommandResult::Ok), Shape::Scan), Reply::Error(_)));
        assert!(matches!(
            reply(Outcome::Done(CommandResult::Error("ERR no such key".into())), Shape::Plain),
            Reply::Error(e) if e == "ERR no such key"
        ));
        let keys = vec![Some(Bytes::from("a"))];
        assert_eq!(reply(Outcome::Done(CommandResult::Values(keys.clone())), Shape::Plain), Reply::Array(keys));
    }

    #[test]
    fn keyspace_commands_queue_inside_multi() {
        // Goal: KEYS and FLUSHALL queue inside MULTI and become part of the transaction, which
        // then touches every key.
        let (gateway, id) = connected();
        gateway.plan(id, &words("MULTI"));
        assert_eq!(gateway.plan(id, &words("KEYS *")), Action::Reply(Reply::Simple("QUEUED")));
        assert_eq!(gateway.plan(id, &words("FLUSHALL")), Action::Reply(Reply::Simple("QUEUED")));
        let Action::Exec(exec) = gateway.plan(id, &words("EXEC")) else { panic!("EXEC") };
        let transaction = Command::Transaction { watched: Vec::new(), commands: exec.commands };
        assert!(transaction.touches_every_key() && !transaction.is_read_only());
    }
}
