//! Random list, set and sorted-set commands (and INCRBYFLOAT, HINCRBYFLOAT) for the store's
//! property tests: small keys and members, so that commands meet each other's data, WRONGTYPE
//! and empty collections often. Every command is one the store must answer without panicking,
//! including some the gateway would refuse.

use super::{Data, KvStore, StateMachine};
use crate::command::{
    AddOptions, Combine, Command, CommandResult, Compare, Key, LexBound, ListEnd, ListOp, Range, RangeBy, Score,
    ScoreBound, SetCondition, SetOp, SortedOp, Value,
};
use crate::ids::{ClientId, RequestId};
use proptest::prelude::*;

/// A store and a request counter, for the families' unit tests.
pub(super) struct Store {
    pub(super) kv: KvStore,
    number: u64,
}

impl Store {
    pub(super) fn new() -> Store {
        Store { kv: KvStore::new(), number: 0 }
    }

    /// Applies `command` as the next request.
    pub(super) fn run(&mut self, command: Command) -> CommandResult {
        self.number += 1;
        self.kv.apply(RequestId { client: ClientId(1), number: self.number }, &command)
    }

    /// The key's version (0: never written).
    pub(super) fn version(&self, key: &str) -> u64 {
        self.kv.version(&Key::from(key.to_string()))
    }

    /// True when the store keeps an entry for the key (written once, maybe deleted since).
    pub(super) fn has_entry(&self, key: &str) -> bool {
        self.kv.entries.contains_key(key.as_bytes())
    }
}

/// `values` as a result of present values.
pub(super) fn values(values: &[&str]) -> CommandResult {
    CommandResult::Values(values.iter().map(|v| Some(Value::from(v.to_string()))).collect())
}

/// An error result that starts with `prefix`.
pub(super) fn is_error(result: &CommandResult, prefix: &str) -> bool {
    matches!(result, CommandResult::Error(text) if text.starts_with(prefix))
}

type Keys = BoxedStrategy<Key>;
type Values = BoxedStrategy<Value>;

/// Any command of these families, over `key` and `value`.
pub(super) fn collection_command(key: Keys, value: Values) -> BoxedStrategy<Command> {
    prop_oneof![
        3 => (key.clone(), list_op(value.clone())).prop_map(|(key, op)| Command::List { key, op }),
        3 => (key.clone(), set_op(value.clone())).prop_map(|(key, op)| Command::Members { key, op }),
        3 => (key.clone(), sorted_op(value.clone())).prop_map(|(key, op)| Command::Sorted { key, op }),
        1 => (combine(), prop::collection::vec(key.clone(), 0..3), prop::option::of(key.clone()))
            .prop_map(|(op, keys, destination)| Command::SetAlgebra { op, keys, destination }),
        1 => (key.clone(), key.clone(), value.clone())
            .prop_map(|(source, destination, member)| Command::SetMove { source, destination, member }),
        1 => (key.clone(), delta()).prop_map(|(key, delta)| Command::IncrByFloat { key, delta }),
        1 => (key, value, delta()).prop_map(|(key, field, delta)| Command::HIncrByFloat { key, field, delta }),
    ]
    .boxed()
}

fn delta() -> BoxedStrategy<Value> {
    prop::sample::select(vec!["1.5", "-2", "0.1", "x", "inf", "1e308"]).prop_map(Value::from).boxed()
}

fn end() -> impl Strategy<Value = ListEnd> {
    prop_oneof![Just(ListEnd::Left), Just(ListEnd::Right)]
}

fn list_op(value: Values) -> BoxedStrategy<ListOp> {
    let values = prop::collection::vec(value.clone(), 0..3);
    prop_oneof![
        (end(), values, any::<bool>()).prop_map(|(end, values, existing_only)| ListOp::Push {
            end,
            values,
            existing_only
        }),
        (end(), prop::option::of(0u64..4)).prop_map(|(end, count)| ListOp::Pop { end, count }),
        (-4i64..4, -4i64..4).prop_map(|(start, stop)| ListOp::Range { start, stop }),
        Just(ListOp::Len),
        (-4i64..4).prop_map(ListOp::Index),
        (-4i64..4, value.clone()).prop_map(|(index, value)| ListOp::Set { index, value }),
        (-2i64..3, value.clone()).prop_map(|(count, value)| ListOp::Remove { count, value }),
        (-4i64..4, -4i64..4).prop_map(|(start, stop)| ListOp::Trim { start, stop }),
        (any::<bool>(), value.clone(), value.clone()).prop_map(|(after, pivot, value)| ListOp::Insert {
            after,
            pivot,
            value
        }),
        (value, -3i64..3, prop::option::of(0u64..3), 0u64..4)
            .prop_map(|(value, rank, count, max_len)| ListOp::Position { value, rank, count, max_len }),
    ]
    .boxed()
}

fn set_op(value: Values) -> BoxedStrategy<SetOp> {
    let members = prop::collection::vec(value.clone(), 0..3);
    prop_oneof![
        members.clone().prop_map(SetOp::Add),
        members.clone().prop_map(SetOp::Remove),
        Just(SetOp::Members),
        value.prop_map(SetOp::IsMember),
        members.prop_map(SetOp::AreMembers),
        Just(SetOp::Card),
        (prop::option::of(0u64..4), any::<u64>()).prop_map(|(count, seed)| SetOp::Pop { count, seed }),
        (prop::option::of(-4i64..4), any::<u64>()).prop_map(|(count, seed)| SetOp::Random { count, seed }),
    ]
    .boxed()
}

fn combine() -> impl Strategy<Value = Combine> {
    prop_oneof![Just(Combine::Inter), Just(Combine::Union), Just(Combine::Diff)]
}

fn score() -> impl Strategy<Value = Score> {
    prop_oneof![(-3i32..4).prop_map(|n| f64::from(n) / 2.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0)]
        .prop_map(|value| Score::new(value).expect("not NaN"))
}

fn score_bound() -> impl Strategy<Value = ScoreBound> {
    (score(), any::<bool>()).prop_map(|(score, exclusive)| ScoreBound { score, exclusive })
}

fn lex_bound(value: Values) -> impl Strategy<Value = LexBound> {
    prop_oneof![
        Just(LexBound::Least),
        Just(LexBound::Greatest),
        value.clone().prop_map(LexBound::Inclusive),
        value.prop_map(LexBound::Exclusive),
    ]
}

fn range_by(value: Values) -> impl Strategy<Value = RangeBy> {
    prop_oneof![
        (-4i64..4, -4i64..4).prop_map(|(start, stop)| RangeBy::Rank { start, stop }),
        (score_bound(), score_bound()).prop_map(|(min, max)| RangeBy::Score { min, max }),
        (lex_bound(value.clone()), lex_bound(value)).prop_map(|(min, max)| RangeBy::Lex { min, max }),
    ]
}

fn add_options() -> impl Strategy<Value = AddOptions> {
    let condition =
        prop_oneof![Just(SetCondition::Always), Just(SetCondition::IfAbsent), Just(SetCondition::IfPresent)];
    let compare = prop_oneof![Just(Compare::Any), Just(Compare::Greater), Just(Compare::Less)];
    (condition, compare, any::<bool>(), any::<bool>()).prop_map(|(condition, compare, changed, increment)| AddOptions {
        condition,
        compare,
        changed,
        increment,
    })
}

fn sorted_op(value: Values) -> BoxedStrategy<SortedOp> {
    let members = prop::collection::vec(value.clone(), 0..3);
    let limit = prop::option::of((-1i64..3, -1i64..3));
    prop_oneof![
        (prop::collection::vec((score(), value.clone()), 0..3), add_options())
            .prop_map(|(members, options)| SortedOp::Add { members, options }),
        members.clone().prop_map(SortedOp::Remove),
        value.clone().prop_map(SortedOp::Score),
        members.prop_map(SortedOp::Scores),
        Just(SortedOp::Card),
        (value.clone(), any::<bool>()).prop_map(|(member, reverse)| SortedOp::Rank { member, reverse }),
        (score_bound(), score_bound()).prop_map(|(min, max)| SortedOp::Count { min, max }),
        (range_by(value.clone()), any::<bool>(), limit, any::<bool>()).prop_map(|(by, reverse, limit, with_scores)| {
            SortedOp::Range(Box::new(Range { by, reverse, limit, with_scores }))
        }),
        (0u64..4, any::<bool>()).prop_map(|(count, max)| SortedOp::Pop { count, max }),
        range_by(value).prop_map(|by| SortedOp::RemoveRange(Box::new(by))),
    ]
    .boxed()
}

/// The key's data, an absent key and a deleted one alike.
fn data_of<'a>(kv: &'a KvStore, key: &Key) -> Option<&'a Data> {
    kv.entries.get(key).map(|entry| &entry.data).filter(|data| !matches!(data, Data::Absent))
}

/// The keys whose version must move exactly when their data changes: those of the list, set and
/// sorted-set commands, except the ones Redis counts as writes whatever they store (LSET, the
/// STORE forms, the float increments).
fn exact_keys(command: &Command) -> Vec<Key> {
    match command {
        Command::List { op: ListOp::Set { .. }, .. } => Vec::new(),
        Command::List { key, .. } | Command::Members { key, .. } | Command::Sorted { key, .. } => vec![key.clone()],
        Command::SetMove { source, destination, .. } => vec![source.clone(), destination.clone()],
        _ => Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Goal: Redis' rules for aggregates hold after every command of a random history: no key
    /// holds an empty list, set or sorted set; a collection command moves its key's version
    /// exactly when it changes the key's data; a read never moves a version. Method: random
    /// histories over three keys; compare each key's data and version before and after.
    #[test]
    fn collections_keep_redis_rules(history in prop::collection::vec(
        collection_command(
            prop::sample::select(vec!["a", "b", "c"]).prop_map(Key::from).boxed(),
            prop::sample::select(vec!["x", "y", "z", "1"]).prop_map(Value::from).boxed(),
        ),
        1..40,
    )) {
        let mut store = Store::new();
        for command in history {
            let before = store.kv.clone();
            store.run(command.clone());
            for entry in store.kv.entries.values() {
                let empty = match &entry.data {
                    Data::List(list) => list.is_empty(),
                    Data::Set(set) => set.is_empty(),
                    Data::Sorted(sorted) => sorted.is_empty(),
                    _ => false,
                };
                prop_assert!(!empty, "an empty collection is kept after {:?}", command);
                prop_assert!(entry.version > 0, "a never-written entry is kept after {:?}", command);
            }
            if command.is_read_only() {
                prop_assert_eq!(&before, &store.kv, "a read changed the store: {:?}", command);
            }
            for key in exact_keys(&command) {
                let changed = data_of(&before, &key) != data_of(&store.kv, &key);
                let bumped = before.version(&key) != store.kv.version(&key);
                prop_assert_eq!(changed, bumped, "{:?} on {:?}", command, key);
            }
        }
    }
}
