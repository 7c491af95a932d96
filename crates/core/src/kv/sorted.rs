//! The sorted-set commands ([`SortedOp`]) on [`SortedSet`], with Redis' answers. Scores travel
//! in results as text ([`format_double`]); the gateway turns them into RESP3 doubles.
//!
//! Redis keeps a skip list, which finds a member's rank in O(log n); a `BTreeSet` has no ranks,
//! so ZRANK and rank ranges walk the set, O(n).

use super::KvStore;
use super::collections::span;
use crate::command::number::format_double;
use crate::command::{
    AddOptions, CommandResult, Compare, Key, Range, RangeBy, Score, ScoreBound, SetCondition, SortedOp, Value,
};
use crate::ids::RequestId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};

/// A sorted set: each member's score, and the (score, member) pairs in Redis' order (by score,
/// then by member's bytes). Both always hold the same pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct SortedSet {
    scores: BTreeMap<Value, Score>,
    order: BTreeSet<(Score, Value)>,
}

// Snapshots carry the scores only; the order is rebuilt from them, so it cannot disagree.
impl Serialize for SortedSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.scores.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SortedSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SortedSet, D::Error> {
        let scores = BTreeMap::<Value, Score>::deserialize(deserializer)?;
        let order = scores.iter().map(|(member, score)| (*score, member.clone())).collect();
        Ok(SortedSet { scores, order })
    }
}

type Pair = (Score, Value);

impl SortedSet {
    /// How many members.
    pub(super) fn len(&self) -> usize {
        assert_eq!(self.scores.len(), self.order.len(), "both views hold the same pairs");
        self.scores.len()
    }

    /// True when it has no member.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn score(&self, member: &Value) -> Option<Score> {
        self.scores.get(member).copied()
    }

    fn insert(&mut self, member: Value, score: Score) {
        if let Some(old) = self.scores.insert(member.clone(), score) {
            assert!(self.order.remove(&(old, member.clone())), "the order holds every pair");
        }
        self.order.insert((score, member));
    }

    fn remove(&mut self, member: &Value) -> bool {
        let Some(score) = self.scores.remove(member) else { return false };
        assert!(self.order.remove(&(score, member.clone())), "the order holds every pair");
        true
    }

    fn rank(&self, member: &Value, reverse: bool) -> Option<usize> {
        let score = self.score(member)?;
        let below = self.order.range(..(score, member.clone())).count();
        Some(if reverse { self.len() - 1 - below } else { below })
    }

    /// The pairs from the lowest score `min` allows, in order.
    fn scored_from(&self, min: ScoreBound) -> impl Iterator<Item = &Pair> {
        self.order.range((min.score, Value::new())..).skip_while(move |(score, _)| !min.below(*score))
    }

    /// The pairs a range selects, in its direction, LIMIT applied.
    fn select(&self, by: &RangeBy, reverse: bool, limit: Option<(i64, i64)>) -> Vec<&Pair> {
        let pairs = &self.order;
        match (by, reverse) {
            (RangeBy::Rank { start, stop }, _) => match span(self.len(), *start, *stop) {
                None => Vec::new(),
                Some(ranks) if reverse => limited(pairs.iter().rev().skip(*ranks.start()).take(ranks.count()), limit),
                Some(ranks) => limited(pairs.iter().skip(*ranks.start()).take(ranks.count()), limit),
            },
            (RangeBy::Score { min, max }, false) => {
                limited(self.scored_from(*min).take_while(|(score, _)| max.above(*score)), limit)
            }
            (RangeBy::Score { min, max }, true) => {
                let from_max = pairs.iter().rev().skip_while(|(score, _)| !max.above(*score));
                limited(from_max.take_while(|(score, _)| min.below(*score)), limit)
            }
            (RangeBy::Lex { min, max }, false) => {
                let from_min = pairs.iter().skip_while(|(_, member)| !min.below(member));
                limited(from_min.take_while(|(_, member)| max.above(member)), limit)
            }
            (RangeBy::Lex { min, max }, true) => {
                let from_max = pairs.iter().rev().skip_while(|(_, member)| !max.above(member));
                limited(from_max.take_while(|(_, member)| min.below(member)), limit)
            }
        }
    }
}

/// LIMIT offset count: a negative offset selects nothing and a negative count everything, as in
/// Redis.
fn limited<'a>(pairs: impl Iterator<Item = &'a Pair>, limit: Option<(i64, i64)>) -> Vec<&'a Pair> {
    let (offset, count) = limit.unwrap_or((0, -1));
    let Ok(offset) = usize::try_from(offset) else { return Vec::new() };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    pairs.skip(offset).take(count).collect()
}

fn integer(n: usize) -> CommandResult {
    CommandResult::Integer(n as i64)
}

fn score_text(score: Score) -> Value {
    Value::from(format_double(score.value()))
}

/// Members, each followed by its score when `with_scores`.
fn listed<'a>(pairs: impl IntoIterator<Item = &'a Pair>, with_scores: bool) -> CommandResult {
    let mut values = Vec::new();
    for (score, member) in pairs {
        values.push(Some(member.clone()));
        if with_scores {
            values.push(Some(score_text(*score)));
        }
    }
    CommandResult::Values(values)
}

impl KvStore {
    /// The sorted set at `key` (`None`: absent), or WRONGTYPE.
    fn sorted(&self, key: &Key) -> Result<Option<&SortedSet>, CommandResult> {
        self.read::<SortedSet>(key)
    }

    /// Runs a sorted-set command on the sorted set at `key`.
    pub(super) fn execute_sorted(
        &mut self,
        request: RequestId,
        key: &Key,
        op: &SortedOp,
    ) -> Result<CommandResult, CommandResult> {
        match op {
            SortedOp::Add { members, options } => self.sorted_add(request, key, members, *options),
            SortedOp::Remove(members) => self.change(request, key, |sorted: &mut SortedSet| {
                let removed = members.iter().filter(|member| sorted.remove(member)).count();
                (integer(removed), removed > 0)
            }),
            SortedOp::Score(member) => {
                let score = self.sorted(key)?.and_then(|sorted| sorted.score(member));
                Ok(score.map_or(CommandResult::Nil, |score| CommandResult::Value(score_text(score))))
            }
            SortedOp::Scores(members) => {
                let sorted = self.sorted(key)?;
                let scores = members.iter().map(|member| sorted.and_then(|s| s.score(member)).map(score_text));
                Ok(CommandResult::Values(scores.collect()))
            }
            SortedOp::Card => Ok(integer(self.sorted(key)?.map_or(0, SortedSet::len))),
            SortedOp::Rank { member, reverse } => {
                let rank = self.sorted(key)?.and_then(|sorted| sorted.rank(member, *reverse));
                Ok(rank.map_or(CommandResult::Nil, integer))
            }
            SortedOp::Count { min, max } => {
                let count =
                    self.sorted(key)?.map_or(0, |s| s.scored_from(*min).take_while(|(x, _)| max.above(*x)).count());
                Ok(integer(count))
            }
            SortedOp::Range(range) => {
                let Range { by, reverse, limit, with_scores } = range.as_ref();
                let pairs = self.sorted(key)?.map(|sorted| sorted.select(by, *reverse, *limit)).unwrap_or_default();
                Ok(listed(pairs, *with_scores))
            }
            SortedOp::Pop { count, max } => {
                self.change(request, key, |sorted: &mut SortedSet| pop(sorted, *count, *max))
            }
            SortedOp::RemoveRange(by) => self.change(request, key, |sorted: &mut SortedSet| {
                let doomed: Vec<Value> = sorted.select(by, false, None).into_iter().map(|(_, m)| m.clone()).collect();
                doomed.iter().for_each(|member| assert!(sorted.remove(member), "a selected member is there"));
                (integer(doomed.len()), !doomed.is_empty())
            }),
        }
    }

    /// ZADD and ZINCRBY. XX on an absent key creates nothing.
    fn sorted_add(
        &mut self,
        request: RequestId,
        key: &Key,
        members: &[(Score, Value)],
        options: AddOptions,
    ) -> Result<CommandResult, CommandResult> {
        if options.condition == SetCondition::IfPresent && self.read::<SortedSet>(key)?.is_none() {
            return Ok(if options.increment { CommandResult::Nil } else { integer(0) });
        }
        self.change(request, key, |sorted: &mut SortedSet| add_all(sorted, members, options))
    }
}

/// What ZADD did to one member.
enum Added {
    /// Nothing: NX, XX, GT or LT kept it.
    Kept,
    /// A new member, with this score.
    New(Score),
    /// An existing member, now with this score (maybe the one it had).
    Scored { score: Score, changed: bool },
}

/// ZADD's pairs, one after the other, and its reply: how many were added (and, with CH,
/// updated), or with INCR the new score (Nil when kept).
fn add_all(sorted: &mut SortedSet, members: &[(Score, Value)], options: AddOptions) -> (CommandResult, bool) {
    let (mut added, mut updated, mut last) = (0, 0, None);
    for (score, member) in members {
        match add_one(sorted, *score, member, options) {
            None => {
                let nan = CommandResult::Error("ERR resulting score is not a number (NaN)".into());
                return (nan, added + updated > 0);
            }
            Some(Added::Kept) => last = None,
            Some(Added::New(score)) => (added, last) = (added + 1, Some(score)),
            Some(Added::Scored { score, changed }) => (updated, last) = (updated + usize::from(changed), Some(score)),
        }
    }
    let changed = added + updated > 0;
    if options.increment {
        return (last.map_or(CommandResult::Nil, |score| CommandResult::Value(score_text(score))), changed);
    }
    (integer(if options.changed { added + updated } else { added }), changed)
}

/// One ZADD pair; `None` when INCR would make the score NaN.
fn add_one(sorted: &mut SortedSet, score: Score, member: &Value, options: AddOptions) -> Option<Added> {
    let Some(current) = sorted.score(member) else {
        if options.condition == SetCondition::IfPresent {
            return Some(Added::Kept);
        }
        sorted.insert(member.clone(), score);
        return Some(Added::New(score));
    };
    if options.condition == SetCondition::IfAbsent {
        return Some(Added::Kept);
    }
    let new = if options.increment { Score::new(current.value() + score.value())? } else { score };
    let kept = match options.compare {
        Compare::Any => false,
        Compare::Greater => new <= current,
        Compare::Less => new >= current,
    };
    if kept {
        return Some(Added::Kept);
    }
    if new != current {
        sorted.insert(member.clone(), new);
    }
    Some(Added::Scored { score: new, changed: new != current })
}

/// ZPOPMIN, ZPOPMAX: up to `count` members from one end, each followed by its score.
fn pop(sorted: &mut SortedSet, count: u64, max: bool) -> (CommandResult, bool) {
    let mut popped = Vec::new();
    for _ in 0..count.min(sorted.len() as u64) {
        let (score, member) = if max { sorted.order.last() } else { sorted.order.first() }.cloned().expect("counted");
        assert!(sorted.remove(&member), "a popped member was there");
        popped.extend([Some(member), Some(score_text(score))]);
    }
    let changed = !popped.is_empty();
    (CommandResult::Values(popped), changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, LexBound};
    use crate::kv::StateMachine;
    use crate::kv::tests_collections::{Store, is_error, values};

    fn sorted(key: &str, op: SortedOp) -> Command {
        Command::Sorted { key: key.to_string().into(), op }
    }

    fn score(text: &str) -> Score {
        Score::parse(text.as_bytes()).expect("a score")
    }

    fn zadd(key: &str, pairs: &[(&str, &str)], options: AddOptions) -> Command {
        let members = pairs.iter().map(|(s, m)| (score(s), Value::from(m.to_string()))).collect();
        sorted(key, SortedOp::Add { members, options })
    }

    fn bound(text: &str) -> ScoreBound {
        ScoreBound::parse(text.as_bytes()).expect("a bound")
    }

    fn range(by: RangeBy, reverse: bool, limit: Option<(i64, i64)>, with_scores: bool) -> Command {
        sorted("z", SortedOp::Range(Box::new(Range { by, reverse, limit, with_scores })))
    }

    fn by_score(min: &str, max: &str) -> RangeBy {
        RangeBy::Score { min: bound(min), max: bound(max) }
    }

    #[test]
    fn zadd_options_answer_as_redis() {
        // Goal: ZADD's NX, XX, GT, LT, CH and INCR, and ZINCRBY, give redis-server 7.0.15's
        // answers (the same sequence was run against it).
        let mut s = Store::new();
        let opts = |condition, compare, changed, increment| AddOptions { condition, compare, changed, increment };
        let plain = AddOptions::default();
        let ch = opts(SetCondition::Always, Compare::Any, true, false);
        assert_eq!(s.run(zadd("z", &[("1", "a")], ch)), CommandResult::Integer(1));
        assert_eq!(s.run(zadd("z", &[("2", "a"), ("1", "b")], ch)), CommandResult::Integer(2));
        let gt_ch = opts(SetCondition::Always, Compare::Greater, true, false);
        assert_eq!(s.run(zadd("z", &[("1", "a"), ("3", "b")], gt_ch)), CommandResult::Integer(1));
        assert_eq!(
            s.run(zadd("z", &[("0", "a")], opts(SetCondition::Always, Compare::Less, false, false))),
            CommandResult::Integer(0)
        );
        assert_eq!(
            s.run(range(RangeBy::Rank { start: 0, stop: -1 }, false, None, true)),
            values(&["a", "0", "b", "3"])
        );
        assert_eq!(
            s.run(zadd("z", &[("5", "new")], opts(SetCondition::IfPresent, Compare::Any, false, false))),
            CommandResult::Integer(0)
        );
        assert_eq!(
            s.run(zadd("z", &[("1", "c")], opts(SetCondition::Always, Compare::Greater, false, false))),
            CommandResult::Integer(1)
        );
        let incr = |compare| opts(SetCondition::Always, compare, false, true);
        assert_eq!(s.run(zadd("z", &[("-1", "a")], incr(Compare::Greater))), CommandResult::Nil);
        assert_eq!(s.run(zadd("z", &[("-1", "a")], incr(Compare::Less))), CommandResult::Value("-1".into()));
        assert_eq!(s.run(zadd("z", &[("inf", "a")], incr(Compare::Any))), CommandResult::Value("inf".into()));
        let nan = s.run(zadd("z", &[("-inf", "a")], incr(Compare::Any)));
        assert!(is_error(&nan, "ERR resulting score is not a number (NaN)"));
        assert_eq!(s.run(sorted("z", SortedOp::Score("a".into()))), CommandResult::Value("inf".into()));
        assert_eq!(s.run(zadd("z", &[("1.5e2", "e"), ("-0", "zero")], plain)), CommandResult::Integer(2));
        let scores = sorted("z", SortedOp::Scores(vec!["e".into(), "zero".into(), "x".into()]));
        assert_eq!(s.run(scores), CommandResult::Values(vec![Some("150".into()), Some("0".into()), None]));
        assert_eq!(s.run(zadd("none", &[("1", "a")], incr(Compare::Any))), CommandResult::Value("1".into()));
        let xx_incr = opts(SetCondition::IfPresent, Compare::Any, false, true);
        assert_eq!(s.run(zadd("absent", &[("1", "a")], xx_incr)), CommandResult::Nil);
        assert!(!s.has_entry("absent"), "XX on an absent key creates nothing");
        let nx = opts(SetCondition::IfAbsent, Compare::Any, false, true);
        assert_eq!(s.run(zadd("z", &[("1", "a")], nx)), CommandResult::Nil);
    }

    #[test]
    fn ranges_answer_as_redis() {
        // Goal: ZRANGE by rank, BYSCORE and BYLEX, with REV, LIMIT and WITHSCORES, ZCOUNT,
        // ZRANK and ZREVRANK, as redis-server 7.0.15 answered them.
        let mut s = Store::new();
        let pairs = [("1", "a"), ("2", "b"), ("3", "c"), ("4", "d"), ("5", "e")];
        s.run(zadd("z", &pairs, AddOptions::default()));
        assert_eq!(s.run(range(RangeBy::Rank { start: 1, stop: 3 }, false, None, false)), values(&["b", "c", "d"]));
        assert_eq!(s.run(range(by_score("(1", "3"), false, None, false)), values(&["b", "c"]));
        assert_eq!(s.run(range(by_score("(1", "3"), true, None, false)), values(&["c", "b"]));
        let limited = range(by_score("-inf", "+inf"), false, Some((1, 2)), true);
        assert_eq!(s.run(limited), values(&["b", "2", "c", "3"]));
        let everything_down = range(by_score("-inf", "+inf"), true, Some((0, -1)), false);
        assert_eq!(s.run(everything_down), values(&["e", "d", "c", "b", "a"]));
        assert_eq!(s.run(range(by_score("-inf", "+inf"), false, Some((-1, 2)), false)), values(&[]));
        assert_eq!(s.run(range(by_score("-inf", "+inf"), false, Some((1, 0)), false)), values(&[]));
        assert_eq!(s.run(range(by_score("5", "1"), false, None, false)), values(&[]));
        assert_eq!(s.run(range(by_score("(5", "(5"), false, None, false)), values(&[]));
        assert_eq!(s.run(range(RangeBy::Rank { start: 0, stop: 1 }, true, None, true)), values(&["e", "5", "d", "4"]));
        let count = |min, max| sorted("z", SortedOp::Count { min: bound(min), max: bound(max) });
        assert_eq!(s.run(count("(1", "3")), CommandResult::Integer(2));
        assert_eq!(s.run(count("-inf", "+inf")), CommandResult::Integer(5));
        assert_eq!(s.run(count("1", "(1")), CommandResult::Integer(0));
        let rank = |member: &str, reverse| sorted("z", SortedOp::Rank { member: member.to_string().into(), reverse });
        assert_eq!(s.run(rank("c", false)), CommandResult::Integer(2));
        assert_eq!(s.run(rank("a", true)), CommandResult::Integer(4));
        assert_eq!(s.run(rank("zz", false)), CommandResult::Nil);
        assert_eq!(s.run(sorted("none", SortedOp::Rank { member: "a".into(), reverse: false })), CommandResult::Nil);
        let lex = |min: &str, max: &str| RangeBy::Lex {
            min: LexBound::parse(&Value::from(min.to_string())).expect("lex"),
            max: LexBound::parse(&Value::from(max.to_string())).expect("lex"),
        };
        s.run(zadd("z", &[("0", "a"), ("0", "b"), ("0", "c"), ("0", "d"), ("0", "e")], AddOptions::default()));
        assert_eq!(s.run(range(lex("-", "+"), false, None, false)), values(&["a", "b", "c", "d", "e"]));
        assert_eq!(s.run(range(lex("[b", "(d"), false, None, false)), values(&["b", "c"]));
        assert_eq!(s.run(range(lex("-", "+"), true, Some((1, 2)), false)), values(&["d", "c"]));
    }

    #[test]
    fn pops_and_removals_delete_emptied_sets() {
        // Goal: ZPOPMIN/ZPOPMAX, ZREM and ZREMRANGEBY... as Redis answers them, an emptied
        // sorted set deleted, and versions moved only by real removals.
        let mut s = Store::new();
        assert_eq!(s.run(sorted("z", SortedOp::Pop { count: 1, max: false })), values(&[]));
        assert!(!s.has_entry("z"));
        s.run(zadd("z", &[("1", "a"), ("2", "b"), ("3", "c"), ("4", "d")], AddOptions::default()));
        assert_eq!(s.run(sorted("z", SortedOp::Pop { count: 1, max: true })), values(&["d", "4"]));
        assert_eq!(s.run(sorted("z", SortedOp::Pop { count: 0, max: false })), values(&[]));
        let by_rank = SortedOp::RemoveRange(Box::new(RangeBy::Rank { start: 0, stop: 0 }));
        assert_eq!(s.run(sorted("z", by_rank)), CommandResult::Integer(1));
        assert_eq!(s.run(sorted("z", SortedOp::RemoveRange(Box::new(by_score("(1", "2"))))), CommandResult::Integer(1));
        assert_eq!(s.run(sorted("z", SortedOp::Remove(vec!["b".into(), "zz".into()]))), CommandResult::Integer(0));
        assert_eq!(s.version("z"), 4);
        assert_eq!(s.run(sorted("z", SortedOp::Card)), CommandResult::Integer(1));
        assert_eq!(s.run(zadd("z", &[("3", "c")], AddOptions::default())), CommandResult::Integer(0));
        assert_eq!(s.version("z"), 4, "the same score again is no write");
        assert_eq!(s.run(sorted("z", SortedOp::Pop { count: 5, max: false })), values(&["c", "3"]));
        assert!(!s.kv.exists(&"z".into()));
        assert_eq!(s.run(Command::Type { key: "z".into() }), CommandResult::Value("none".into()));
    }

    #[test]
    fn sorted_sets_refuse_other_types_and_survive_snapshots() {
        // Goal: WRONGTYPE both ways, TYPE says `zset`, and a snapshot restores the same order.
        let mut s = Store::new();
        s.run(Command::set("str", "x"));
        for op in [SortedOp::Card, SortedOp::Score("a".into()), SortedOp::Pop { count: 0, max: false }] {
            assert!(is_error(&s.run(sorted("str", op)), "WRONGTYPE"));
        }
        s.run(zadd("z", &[("2", "b"), ("1", "a"), ("-inf", "m")], AddOptions::default()));
        assert_eq!(s.run(Command::Type { key: "z".into() }), CommandResult::Value("zset".into()));
        assert!(is_error(&s.run(Command::get("z")), "WRONGTYPE"));
        let mut restored = KvStore::new();
        restored.restore(&s.kv.snapshot()).expect("restores");
        assert_eq!(restored, s.kv);
    }
}
