//! The set commands ([`SetOp`], [`Combine`], SMOVE) on a `BTreeSet`, with Redis' answers.
//!
//! SPOP and SRANDMEMBER draw from a generator seeded with the command's `seed` alone, so every
//! replica removes and returns the same members. A `BTreeSet` has no random access: a draw
//! walks the set, which costs O(n) where Redis' hash table costs O(1).

use super::KvStore;
use crate::command::{Combine, CommandResult, Key, SetOp, Value};
use crate::ids::RequestId;
use std::collections::BTreeSet;

type Set = BTreeSet<Value>;

/// Most members one SRANDMEMBER with a negative count returns (it may repeat members, so the
/// set's size does not bound it): one small command must not make every replica build a
/// reply of gigabytes.
pub const RANDOM_MEMBERS_MAX: u64 = 1 << 20;

fn integer(n: usize) -> CommandResult {
    CommandResult::Integer(n as i64)
}

fn values(members: impl IntoIterator<Item = Value>) -> CommandResult {
    CommandResult::Values(members.into_iter().map(Some).collect())
}

impl KvStore {
    /// The set at `key` (`None`: absent), or WRONGTYPE.
    fn members(&self, key: &Key) -> Result<Option<&Set>, CommandResult> {
        self.read::<Set>(key)
    }

    /// Runs a command on the set at `key`.
    pub(super) fn execute_set(
        &mut self,
        request: RequestId,
        key: &Key,
        op: &SetOp,
    ) -> Result<CommandResult, CommandResult> {
        match op {
            SetOp::Add(members) => self.change(request, key, |set: &mut Set| {
                let added = members.iter().filter(|member| set.insert((*member).clone())).count();
                (integer(added), added > 0)
            }),
            SetOp::Remove(members) => self.change(request, key, |set: &mut Set| {
                let removed = members.iter().filter(|member| set.remove(*member)).count();
                (integer(removed), removed > 0)
            }),
            SetOp::Members => Ok(values(self.members(key)?.into_iter().flatten().cloned())),
            SetOp::IsMember(member) => {
                Ok(integer(usize::from(self.members(key)?.is_some_and(|set| set.contains(member)))))
            }
            SetOp::AreMembers(members) => {
                let set = self.members(key)?;
                let flags = members.iter().map(|member| set.is_some_and(|set| set.contains(member)));
                Ok(values(flags.map(|flag| Value::from_static(if flag { b"1" } else { b"0" }))))
            }
            SetOp::Card => Ok(integer(self.members(key)?.map_or(0, Set::len))),
            SetOp::Pop { count, seed } => self.change(request, key, |set: &mut Set| pop(set, *count, *seed)),
            SetOp::Random { count, seed } => Ok(random(self.members(key)?, *count, *seed)),
        }
    }

    /// SINTER, SUNION, SDIFF and their STORE forms: every key is checked for its type first, as
    /// Redis does, then the sets combine; a STORE replaces `destination` whatever it held.
    pub(super) fn execute_set_algebra(
        &mut self,
        request: RequestId,
        op: Combine,
        keys: &[Key],
        destination: Option<&Key>,
    ) -> Result<CommandResult, CommandResult> {
        let sets = keys.iter().map(|key| self.read::<Set>(key)).collect::<Result<Vec<_>, _>>()?;
        let combined = combine(op, &sets);
        match destination {
            None => Ok(values(combined)),
            Some(destination) => {
                let count = combined.len();
                self.store(request, destination, combined);
                Ok(integer(count))
            }
        }
    }

    /// SMOVE: an absent source answers 0 before any type check of the destination, and a
    /// source that is also the destination changes nothing, as in Redis.
    pub(super) fn execute_set_move(
        &mut self,
        request: RequestId,
        source: &Key,
        destination: &Key,
        member: &Value,
    ) -> Result<CommandResult, CommandResult> {
        let Some(from) = self.read::<Set>(source)? else { return Ok(integer(0)) };
        let present = from.contains(member);
        self.read::<Set>(destination)?;
        if source == destination || !present {
            return Ok(integer(usize::from(present)));
        }
        self.change(request, source, |set: &mut Set| (CommandResult::Ok, set.remove(member)))?;
        self.change(request, destination, |set: &mut Set| (CommandResult::Ok, set.insert(member.clone())))?;
        Ok(integer(1))
    }
}

/// Combines the sets (`None`: an absent key, an empty set).
fn combine(op: Combine, sets: &[Option<&Set>]) -> Set {
    let present = || sets.iter().flatten();
    match op {
        Combine::Union => present().flat_map(|set| set.iter().cloned()).collect(),
        Combine::Inter if sets.is_empty() || sets.iter().any(Option::is_none) => Set::new(),
        Combine::Inter => {
            let smallest = present().min_by_key(|set| set.len()).expect("SINTER names a key");
            let in_all = |member: &&Value| present().all(|set| set.contains(*member));
            smallest.iter().filter(in_all).cloned().collect()
        }
        Combine::Diff => {
            let first = sets.first().copied().flatten().into_iter().flatten();
            first.filter(|member| !sets[1..].iter().flatten().any(|set| set.contains(*member))).cloned().collect()
        }
    }
}

/// SPOP: Nil (without a count) or nothing (with one) from an empty, that is absent, set.
fn pop(set: &mut Set, count: Option<u64>, seed: u64) -> (CommandResult, bool) {
    let mut draws = Draws(seed);
    match count {
        _ if set.is_empty() => (if count.is_none() { CommandResult::Nil } else { values([]) }, false),
        None => {
            let member = set.iter().nth(draws.below(set.len())).cloned().expect("a draw is inside the set");
            set.remove(&member);
            (CommandResult::Value(member), true)
        }
        Some(count) => {
            let chosen = pick(set, count, &mut draws);
            chosen.iter().for_each(|member| assert!(set.remove(member), "a member is picked once"));
            let changed = !chosen.is_empty();
            (values(chosen), changed)
        }
    }
}

/// SRANDMEMBER of a set (`None`: absent).
fn random(set: Option<&Set>, count: Option<i64>, seed: u64) -> CommandResult {
    let mut draws = Draws(seed);
    let Some(set) = set else { return if count.is_none() { CommandResult::Nil } else { values([]) } };
    match count {
        None => CommandResult::Value(set.iter().nth(draws.below(set.len())).cloned().expect("a draw is inside")),
        Some(count) if count >= 0 => values(pick(set, count.unsigned_abs(), &mut draws)),
        Some(count) if count.unsigned_abs() > RANDOM_MEMBERS_MAX => CommandResult::Error(format!(
            "ERR value is out of range: ordo returns at most {RANDOM_MEMBERS_MAX} members with a negative count"
        )),
        Some(count) => {
            let members: Vec<&Value> = set.iter().collect();
            values((0..count.unsigned_abs()).map(|_| members[draws.below(members.len())].clone()))
        }
    }
}

/// `count` distinct members of `set` chosen from `draws` (all of them when it has no more), in
/// the set's order.
fn pick(set: &Set, count: u64, draws: &mut Draws) -> Vec<Value> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= set.len() {
        return set.iter().cloned().collect();
    }
    let positions = draws.distinct(count, set.len());
    set.iter().enumerate().filter(|(at, _)| positions.contains(at)).map(|(_, member)| member.clone()).collect()
}

/// SplitMix64: a tiny generator whose whole state is the command's seed, so every replica
/// draws the same numbers.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A position below `n` (multiply-shift: no modulo bias worth the name for sets this size).
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "a draw needs something to draw from");
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    /// `k` distinct positions below `n`, each set of `k` equally likely (Floyd's sampling).
    fn distinct(&mut self, k: usize, n: usize) -> BTreeSet<usize> {
        assert!(k <= n, "cannot draw more distinct positions than there are");
        let mut chosen = BTreeSet::new();
        for j in n - k..n {
            let drawn = self.below(j + 1);
            if !chosen.insert(drawn) {
                chosen.insert(j);
            }
        }
        assert_eq!(chosen.len(), k, "Floyd's sampling draws exactly k");
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::kv::tests_collections::{Store, is_error, values};

    fn members(key: &str, op: SetOp) -> Command {
        Command::Members { key: key.to_string().into(), op }
    }

    fn add(key: &str, items: &[&str]) -> Command {
        members(key, SetOp::Add(items.iter().map(|v| Value::from(v.to_string())).collect()))
    }

    fn algebra(op: Combine, keys: &[&str], destination: Option<&str>) -> Command {
        let keys = keys.iter().map(|k| Key::from(k.to_string())).collect();
        Command::SetAlgebra { op, keys, destination: destination.map(|d| Key::from(d.to_string())) }
    }

    #[test]
    fn sets_answer_as_redis() {
        // Goal: the set commands give redis-server 7.0.15's answers (its members come in hash
        // order, ordo's in byte order: Redis promises no order).
        let mut s = Store::new();
        assert_eq!(s.run(add("s", &["a", "b", "c"])), CommandResult::Integer(3));
        assert_eq!(s.run(add("s", &["a"])), CommandResult::Integer(0));
        assert_eq!(s.run(members("s", SetOp::Members)), values(&["a", "b", "c"]));
        assert_eq!(s.run(members("none", SetOp::Members)), values(&[]));
        assert_eq!(s.run(members("s", SetOp::IsMember("a".into()))), CommandResult::Integer(1));
        assert_eq!(s.run(members("none", SetOp::IsMember("a".into()))), CommandResult::Integer(0));
        assert_eq!(s.run(members("s", SetOp::AreMembers(vec!["a".into(), "x".into()]))), values(&["1", "0"]));
        assert_eq!(s.run(members("none", SetOp::Card)), CommandResult::Integer(0));
        assert_eq!(s.run(members("none", SetOp::Pop { count: None, seed: 1 })), CommandResult::Nil);
        assert_eq!(s.run(members("none", SetOp::Pop { count: Some(2), seed: 1 })), values(&[]));
        assert_eq!(s.run(members("s", SetOp::Pop { count: Some(0), seed: 1 })), values(&[]));
        assert_eq!(s.run(members("none", SetOp::Random { count: None, seed: 1 })), CommandResult::Nil);
        assert_eq!(s.run(members("none", SetOp::Random { count: Some(-2), seed: 1 })), values(&[]));
        assert_eq!(s.run(members("s", SetOp::Random { count: Some(5), seed: 1 })), values(&["a", "b", "c"]));
        assert_eq!(s.run(algebra(Combine::Inter, &["s", "none"], None)), values(&[]));
        assert_eq!(s.run(algebra(Combine::Union, &["s", "none"], None)), values(&["a", "b", "c"]));
        assert_eq!(s.run(algebra(Combine::Inter, &["s", "none"], Some("d"))), CommandResult::Integer(0));
        assert!(!s.has_entry("d"), "an empty result over an absent destination writes nothing");
        assert_eq!(s.run(members("s", SetOp::Remove(vec!["a".into(), "zz".into()]))), CommandResult::Integer(1));
        let smove = |source: &str, destination: &str, member: &str| Command::SetMove {
            source: source.to_string().into(),
            destination: destination.to_string().into(),
            member: member.to_string().into(),
        };
        assert_eq!(s.run(smove("s", "t", "b")), CommandResult::Integer(1));
        assert_eq!(s.run(members("t", SetOp::Members)), values(&["b"]));
        assert_eq!(s.run(smove("s", "t", "zz")), CommandResult::Integer(0));
        assert_eq!(s.run(smove("t", "t", "b")), CommandResult::Integer(1), "a move onto itself changes nothing");
        assert_eq!(s.run(smove("s", "t", "c")), CommandResult::Integer(1));
        assert!(!s.kv.exists(&"s".into()), "the emptied source is deleted");
        assert_eq!(s.run(members("t", SetOp::Members)), values(&["b", "c"]));
    }

    #[test]
    fn set_algebra_combines_and_stores_over_any_type() {
        // Goal: SINTER, SUNION, SDIFF with their STORE forms; every source is type-checked
        // (even after an absent one), and a STORE replaces a destination of any type.
        let mut s = Store::new();
        s.run(add("a", &["1", "2", "3"]));
        s.run(add("b", &["2", "3", "4"]));
        s.run(add("c", &["3", "5"]));
        s.run(Command::set("str", "x"));
        assert_eq!(s.run(algebra(Combine::Inter, &["a", "b", "c"], None)), values(&["3"]));
        assert_eq!(s.run(algebra(Combine::Union, &["a", "c"], None)), values(&["1", "2", "3", "5"]));
        assert_eq!(s.run(algebra(Combine::Diff, &["a", "b"], None)), values(&["1"]));
        assert_eq!(s.run(algebra(Combine::Diff, &["none", "b"], None)), values(&[]));
        for op in [Combine::Inter, Combine::Union, Combine::Diff] {
            assert!(is_error(&s.run(algebra(op, &["none", "str"], None)), "WRONGTYPE"), "{op:?}");
        }
        assert_eq!(s.run(algebra(Combine::Union, &["a", "b"], Some("str"))), CommandResult::Integer(4));
        assert_eq!(s.run(Command::Type { key: "str".into() }), CommandResult::Value("set".into()));
        assert_eq!(s.version("str"), 2);
        assert_eq!(s.run(algebra(Combine::Inter, &["a", "none"], Some("str"))), CommandResult::Integer(0));
        assert!(!s.kv.exists(&"str".into()), "an empty result deletes the destination");
        assert_eq!(s.version("str"), 3);
        let smove = |destination: &str| Command::SetMove {
            source: "a".into(),
            destination: destination.to_string().into(),
            member: "1".into(),
        };
        s.run(Command::set("str", "x"));
        assert!(is_error(&s.run(smove("str")), "WRONGTYPE"));
        let from_absent = Command::SetMove { source: "none".into(), destination: "str".into(), member: "1".into() };
        assert_eq!(s.run(from_absent), CommandResult::Integer(0), "Redis answers 0 before checking the destination");
    }

    #[test]
    fn random_choices_depend_on_the_seed_alone() {
        // Goal: SPOP and SRANDMEMBER choose the same members for the same seed on any replica,
        // different ones for other seeds, and within Redis' rules: distinct members for a
        // positive count, exactly |count| maybe repeated for a negative one. Method: two stores
        // with the same members run the same commands; many seeds must cover every member.
        let items: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
        let items: Vec<&str> = items.iter().map(String::as_str).collect();
        let mut first = Store::new();
        let mut second = Store::new();
        first.run(add("s", &items));
        second.run(add("s", &items));
        let random = |count, seed| members("s", SetOp::Random { count, seed });
        for seed in 0..50 {
            assert_eq!(first.run(random(Some(5), seed)), second.run(random(Some(5), seed)));
        }
        let mut seen = BTreeSet::new();
        for seed in 0..200 {
            let CommandResult::Values(picked) = first.run(random(Some(3), seed)) else { panic!("values") };
            let distinct: BTreeSet<_> = picked.iter().collect();
            assert_eq!((picked.len(), distinct.len()), (3, 3), "three distinct members");
            seen.extend(picked.into_iter().flatten());
        }
        assert_eq!(seen.len(), 20, "every member gets chosen");
        let CommandResult::Values(repeated) = first.run(random(Some(-30), 7)) else { panic!("values") };
        assert_eq!(repeated.len(), 30);
        assert_ne!(first.run(random(Some(5), 1)), first.run(random(Some(5), 2)), "the seed matters");
        let huge = random(Some(-(RANDOM_MEMBERS_MAX as i64) - 1), 1);
        assert!(is_error(&first.run(huge), "ERR value is out of range"));
        let spop = |count, seed| members("s", SetOp::Pop { count, seed });
        assert_eq!(first.run(spop(Some(4), 9)), second.run(spop(Some(4), 9)));
        assert_eq!(first.run(spop(None, 10)), second.run(spop(None, 10)));
        assert_eq!(first.run(members("s", SetOp::Card)), CommandResult::Integer(15));
        assert_eq!(first.run(members("s", SetOp::Members)), second.run(members("s", SetOp::Members)));
        assert_eq!(first.run(spop(Some(100), 11)), second.run(spop(Some(100), 11)));
        assert!(!first.kv.exists(&"s".into()), "popping every member deletes the set");
    }

    #[test]
    fn set_versions_move_only_on_change() {
        // Goal: SADD of a member already there, SREM of one not there and SPOP of an absent set
        // are not writes; a set command on another type changes nothing.
        let mut s = Store::new();
        s.run(members("s", SetOp::Pop { count: Some(3), seed: 1 }));
        assert!(!s.has_entry("s"));
        s.run(add("s", &["a"]));
        s.run(add("s", &["a"]));
        s.run(members("s", SetOp::Remove(vec!["zz".into()])));
        s.run(members("s", SetOp::Random { count: Some(-3), seed: 1 }));
        assert_eq!(s.version("s"), 1);
        s.run(members("s", SetOp::Pop { count: None, seed: 1 }));
        assert_eq!(s.version("s"), 2);
        s.run(Command::set("str", "x"));
        assert!(is_error(&s.run(add("str", &["a"])), "WRONGTYPE"));
        assert!(is_error(&s.run(members("str", SetOp::Pop { count: Some(0), seed: 1 })), "WRONGTYPE"));
        assert_eq!(s.version("str"), 1);
    }
}
