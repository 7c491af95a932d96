use super::*;
use crate::command::{Command, SetCondition};
use crate::ids::ClientId;
use crate::kv::StateMachine;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn request(number: u64) -> RequestId {
    RequestId { client: ClientId(1), number }
}

/// A store and a request counter, so each test reads as a session.
struct Session {
    kv: KvStore,
    number: u64,
}

impl Session {
    fn new() -> Session {
        Session { kv: KvStore::new(), number: 0 }
    }

    fn run(&mut self, command: Command) -> CommandResult {
        self.number += 1;
        self.kv.apply(request(self.number), &command)
    }

    fn keyspace(&mut self, command: Keyspace) -> CommandResult {
        self.run(Command::Keyspace(command))
    }

    fn versions(&mut self, keys: &[&str]) -> Vec<u64> {
        let keys = keys.iter().map(|key| Key::from(key.to_string())).collect();
        match self.run(Command::Versions { keys }) {
            CommandResult::Versions(versions) => versions,
            other => panic!("versions, not {other:?}"),
        }
    }

    fn rename(&mut self, source: &'static str, destination: &'static str, only_if_absent: bool) -> CommandResult {
        self.run(Command::Rename { source: source.into(), destination: destination.into(), only_if_absent })
    }
}

fn values(keys: &[&'static str]) -> CommandResult {
    CommandResult::Values(keys.iter().map(|key| Some(Value::from(*key))).collect())
}

fn keys(pattern: &'static str) -> Keyspace {
    Keyspace::Keys { pattern: pattern.into() }
}

fn scan_all(kv: &KvStore, pattern: Option<&'static str>, kind: Option<&'static str>) -> Vec<Key> {
    let mut found = Vec::new();
    let mut cursor = 0;
    loop {
        let (next, keys) = scan_once(kv, cursor, 2, pattern.map(Value::from), kind.map(Value::from));
        found.extend(keys);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

fn scan_once(kv: &KvStore, cursor: u64, count: u64, pattern: Option<Value>, kind: Option<Value>) -> (u64, Vec<Key>) {
    let CommandResult::Values(mut reply) = kv.scan(cursor, pattern.as_ref(), count, kind.as_ref()) else {
        panic!("SCAN returns values")
    };
    let next = reply.remove(0).expect("a cursor");
    let next = std::str::from_utf8(&next).expect("decimal").parse().expect("a number");
    (next, reply.into_iter().map(|key| key.expect("a key")).collect())
}

#[test]
fn keyspace_commands_answer_as_redis_and_skip_tombstones() {
    // Goal: KEYS, SCAN (MATCH, TYPE), DBSIZE and RANDOMKEY list live keys only (a deleted key's
    // tombstone never shows) with redis-server 7.0's answers. Method: strings, a hash and a
    // deleted key; every listing compared with what it must be.
    let mut s = Session::new();
    for key in ["a", "ab", "b", "*x", "gone"] {
        s.run(Command::set(key, "1"));
    }
    s.run(Command::HSet { key: "h".into(), fields: vec![("f".into(), "v".into())] });
    s.run(Command::Del { keys: vec!["gone".into()] });
    assert_eq!(s.keyspace(keys("*")), values(&["*x", "a", "ab", "b", "h"]));
    assert_eq!(s.keyspace(keys("a*")), values(&["a", "ab"]));
    assert_eq!(s.keyspace(keys("\\**")), values(&["*x"]), "an escaped star is a literal");
    assert_eq!(s.keyspace(keys("[ab]")), values(&["a", "b"]));
    assert_eq!(s.keyspace(keys("gone")), values(&[]));
    assert_eq!(s.keyspace(Keyspace::Size), CommandResult::Integer(5));
    let mut all = scan_all(&s.kv, None, None);
    all.sort();
    assert_eq!(all, ["*x", "a", "ab", "b", "h"].map(Key::from));
    assert_eq!(scan_all(&s.kv, None, Some("HASH")), vec![Key::from("h")], "TYPE ignores case");
    assert_eq!(scan_all(&s.kv, None, Some("list")), Vec::<Key>::new(), "an unknown type lists nothing");
    let mut matched = scan_all(&s.kv, Some("a*"), Some("string"));
    matched.sort();
    assert_eq!(matched, ["a", "ab"].map(Key::from));
    for seed in [0, 1, u64::MAX / 3, u64::MAX] {
        let CommandResult::Value(key) = s.keyspace(Keyspace::RandomKey { seed }) else { panic!("a key") };
        assert!(all.contains(&key), "{key:?} is live");
        assert_eq!(s.keyspace(Keyspace::RandomKey { seed }), CommandResult::Value(key), "the seed decides");
    }
    assert_eq!(s.keyspace(Keyspace::Flush), CommandResult::Ok);
    assert_eq!(s.keyspace(Keyspace::RandomKey { seed: 7 }), CommandResult::Nil);
    assert_eq!(s.keyspace(Keyspace::Size), CommandResult::Integer(0));
    assert_eq!(s.keyspace(keys("*")), values(&[]));
    assert_eq!(scan_once(&s.kv, 0, 10, None, None), (0, Vec::new()));
}

#[test]
fn random_keys_spread_over_the_keys() {
    // Goal: RANDOMKEY reaches every key of a small store for some seed, not one favourite.
    let mut s = Session::new();
    for key in 0..20 {
        s.run(Command::set(format!("k{key}"), "v"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..2_000u64 {
        if let CommandResult::Value(key) =
            s.keyspace(Keyspace::RandomKey { seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) })
        {
            seen.insert(key);
        }
    }
    assert_eq!(seen.len(), 20);
}

#[test]
fn flush_frees_everything_and_aborts_watchers_of_flushed_keys() {
    // Goal: FLUSH empties the map (tombstones too), and WATCH stays right across it: a watched
    // key that the flush removed aborts EXEC, even when it is written back to what it held (no
    // ABA), and no version a key reported comes back. Method: watch, flush, rewrite, exec.
    let mut s = Session::new();
    s.run(Command::set("x", "1"));
    s.run(Command::set("dead", "1"));
    s.run(Command::Del { keys: vec!["dead".into()] });
    let watched = s.versions(&["x", "y"]);
    assert_eq!(watched, vec![1, 0]);
    s.keyspace(Keyspace::Flush);
    assert!(s.kv.key_digests().is_empty(), "nothing left, tombstones included");
    assert_eq!(s.kv.entries.len(), 0);
    s.run(Command::set("x", "1"));
    let after = s.versions(&["x", "y"]);
    assert!(after[0] > watched[0] && after[1] > watched[1], "{after:?} after {watched:?}: never back");
    assert!(after[0] > 2, "above every version any key had, the tombstone's 2 included");
    let exec = |watched: &[u64]| Command::Transaction {
        watched: vec![("x".into(), watched[0])],
        commands: vec![Command::get("x")],
    };
    assert_eq!(s.run(exec(&watched)), CommandResult::Nil, "x was flushed since WATCH");
    assert_eq!(s.run(exec(&after)), CommandResult::Results(vec![CommandResult::Value("1".into())]));
    // An empty store flushes without moving any version: a watcher there is not disturbed.
    let mut empty = Session::new();
    let before = empty.versions(&["k"]);
    empty.keyspace(Keyspace::Flush);
    assert_eq!(empty.versions(&["k"]), before);
}

#[test]
fn flushes_reach_the_digests() {
    // Goal: replicas that flush at the same point agree; a replica that ordered a write and a
    // flush the other way reports another version or chain for the key. Method: three stores.
    let flush = Command::Keyspace(Keyspace::Flush);
    let (mut first, mut second, mut swapped) = (KvStore::new(), KvStore::new(), KvStore::new());
    for kv in [&mut first, &mut second] {
        kv.apply(request(1), &Command::set("a", "1"));
        kv.apply(request(2), &flush);
        kv.apply(request(3), &Command::set("a", "2"));
    }
    swapped.apply(request(2), &flush);
    swapped.apply(request(1), &Command::set("a", "1"));
    swapped.apply(request(3), &Command::set("a", "2"));
    assert_eq!(first.key_digests(), second.key_digests());
    assert_ne!(first.key_digests(), swapped.key_digests());
    let mut restored = KvStore::new();
    restored.restore(&first.snapshot()).expect("restores");
    assert_eq!(restored, first, "the floor and the index come back");
    assert_eq!(scan_all(&restored, None, None), vec![Key::from("a")]);
}

#[test]
fn rename_moves_values_and_writes_both_keys() {
    // Goal: RENAME and RENAMENX move the whole value (any type), write both keys (each key's
    // version moves, so watchers of either abort), and answer as redis-server 7.0: an error for
    // a missing source, OK or 0 and no write for a key renamed onto itself, 0 and no write for
    // RENAMENX onto an existing key.
    let mut s = Session::new();
    s.run(Command::HSet { key: "h".into(), fields: vec![("f".into(), "v".into())] });
    s.run(Command::set("s", "1"));
    let before = s.versions(&["h", "s", "t"]);
    assert_eq!(s.rename("h", "t", false), CommandResult::Ok);
    assert_eq!(s.run(Command::Type { key: "t".into() }), CommandResult::Value("hash".into()));
    assert_eq!(s.run(Command::Type { key: "h".into() }), CommandResult::Value("none".into()));
    let after = s.versions(&["h", "s", "t"]);
    assert_eq!((after[0], after[1], after[2]), (before[0] + 1, before[1], before[2] + 1));
    assert_eq!(s.rename("nosuch", "x", false), CommandResult::Error("ERR no such key".into()));
    assert_eq!(s.rename("nosuch", "nosuch", true), CommandResult::Error("ERR no such key".into()));
    let unchanged = s.kv.clone();
    assert_eq!(s.rename("s", "s", false), CommandResult::Ok);
    assert_eq!(s.rename("s", "s", true), CommandResult::Integer(0));
    assert_eq!(s.rename("s", "t", true), CommandResult::Integer(0));
    assert_eq!(s.kv, unchanged, "nothing written");
    assert_eq!(s.rename("t", "s", false), CommandResult::Ok, "RENAME replaces the destination");
    assert_eq!(s.run(Command::Type { key: "s".into() }), CommandResult::Value("hash".into()));
    assert_eq!(s.rename("s", "u", true), CommandResult::Integer(1));
    assert_eq!(s.keyspace(keys("*")), values(&["u"]));
    let nx = Command::Set {
        key: "s".into(),
        value: "v".into(),
        condition: SetCondition::IfAbsent,
        expiry: Default::default(),
    };
    assert_eq!(s.run(nx), CommandResult::Ok, "the source is gone");
}

#[test]
fn type_names_match_type() {
    // Goal: SCAN's TYPE filter and TYPE name a value alike (a new data type must be named in
    // both). Method: TYPE of one key of each kind against `type_name` of its entry.
    let mut s = Session::new();
    s.run(Command::set("s", "1"));
    s.run(Command::HSet { key: "h".into(), fields: vec![("f".into(), "v".into())] });
    for key in ["s", "h"] {
        let CommandResult::Value(name) = s.run(Command::Type { key: key.into() }) else { panic!("a name") };
        let named = type_name(&s.kv.entries[key.as_bytes()].data).expect("live");
        assert_eq!(name, Value::from(named));
    }
}

/// One change between two SCAN calls.
#[derive(Clone, Debug)]
enum Churn {
    Insert(u16),
    Delete(u16),
    Flip(u16),
}

fn churn() -> impl Strategy<Value = Churn> {
    prop_oneof![
        (0u16..200).prop_map(Churn::Insert),
        (0u16..200).prop_map(Churn::Delete),
        (0u16..200).prop_map(Churn::Flip),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Goal: SCAN's guarantee: every key present for the whole walk is returned (here: exactly
    /// once), whatever keys come and go between calls; and with no churn a walk lists what KEYS
    /// lists (the oracle). Method: stable keys `s*` and churning keys `c*` (inserted, deleted,
    /// turned into hashes) between calls with random COUNTs.
    #[test]
    fn scan_returns_every_key_present_for_the_whole_walk(
        stable in prop::collection::btree_set(0u16..300, 0..60),
        initial in prop::collection::btree_set(0u16..200, 0..60),
        steps in prop::collection::vec((1u64..8, prop::collection::vec(churn(), 0..6)), 1..40),
    ) {
        let mut s = Session::new();
        for key in &stable {
            s.run(Command::set(format!("s{key}"), "v"));
        }
        for key in &initial {
            s.run(Command::set(format!("c{key}"), "v"));
        }
        let CommandResult::Values(listed) = s.keyspace(keys("*")) else { panic!("values") };
        let mut walked = scan_all(&s.kv, None, None);
        walked.sort();
        prop_assert_eq!(walked, listed.into_iter().flatten().collect::<Vec<_>>());
        let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
        let mut cursor = 0;
        for (count, changes) in steps.iter().cycle().take(1_000) {
            let (next, found) = scan_once(&s.kv, cursor, *count, None, None);
            for key in found {
                *seen.entry(key).or_default() += 1;
            }
            if next == 0 {
                break;
            }
            cursor = next;
            for change in changes {
                let command = match change {
                    Churn::Insert(key) => Command::set(format!("c{key}"), "v"),
                    Churn::Delete(key) => Command::Del { keys: vec![format!("c{key}").into()] },
                    Churn::Flip(key) => Command::HSet { key: format!("c{key}").into(), fields: vec![("f".into(), "v".into())] },
                };
                s.run(command);
            }
        }
        for key in &stable {
            let key = Key::from(format!("s{key}"));
            prop_assert_eq!(seen.get(&key).copied(), Some(1), "{:?} present throughout", key);
        }
    }
}
