//! The sorted-set commands ([`Command::Sorted`](super::Command::Sorted)) and their scores.
//!
//! Scores are doubles, never NaN (Redis refuses NaN scores and any increment that would make
//! one), so [`Score`] has a total order and sorted sets can be kept in ordered maps.

use super::number::parse_double;
use super::{SetCondition, Value};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A sorted-set score: a double that is never NaN, with negative zero stored as zero.
/// Deserializing a NaN fails, so a malformed message cannot smuggle one in.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Score(f64);

impl Score {
    /// The score `value`, or `None` for NaN.
    pub fn new(value: f64) -> Option<Score> {
        // Adding zero turns -0 into 0, so equal scores are equal bit for bit.
        (!value.is_nan()).then_some(Score(value + 0.0))
    }

    /// A score as a client writes it (see [`parse_double`]).
    pub fn parse(text: &[u8]) -> Option<Score> {
        parse_double(text).and_then(Score::new)
    }

    /// The double.
    pub fn value(self) -> f64 {
        self.0
    }
}

impl Eq for Score {}

impl Ord for Score {
    fn cmp(&self, other: &Score) -> Ordering {
        self.0.partial_cmp(&other.0).expect("a score is never NaN")
    }
}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl TryFrom<f64> for Score {
    type Error = &'static str;

    fn try_from(value: f64) -> Result<Score, Self::Error> {
        Score::new(value).ok_or("a score is never NaN")
    }
}

impl From<Score> for f64 {
    fn from(score: Score) -> f64 {
        score.0
    }
}

/// One end of a score range: `1.5`, or `(1.5` to leave the score itself out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreBound {
    /// The score.
    pub score: Score,
    /// True with `(`: the score itself is outside the range.
    pub exclusive: bool,
}

impl ScoreBound {
    /// A bound as a client writes it (`-inf`, `(2`, `3.5`); `None` when it is not one.
    pub fn parse(text: &[u8]) -> Option<ScoreBound> {
        match text.strip_prefix(b"(") {
            Some(rest) => Some(ScoreBound { score: Score::parse(rest)?, exclusive: true }),
            None => Some(ScoreBound { score: Score::parse(text)?, exclusive: false }),
        }
    }

    /// True when `score` is on the inner side of this bound taken as the range's minimum.
    pub fn below(&self, score: Score) -> bool {
        if self.exclusive { self.score < score } else { self.score <= score }
    }

    /// True when `score` is on the inner side of this bound taken as the range's maximum.
    pub fn above(&self, score: Score) -> bool {
        if self.exclusive { score < self.score } else { score <= self.score }
    }
}

/// One end of a lexicographic range (BYLEX): `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LexBound {
    /// `-`: before every member.
    Least,
    /// `+`: after every member.
    Greatest,
    /// `[member`: the member is inside the range.
    Inclusive(Value),
    /// `(member`: the member is outside the range.
    Exclusive(Value),
}

impl LexBound {
    /// A bound as a client writes it; `None` when it is not one.
    pub fn parse(text: &Value) -> Option<LexBound> {
        match text.first() {
            Some(b'-') if text.len() == 1 => Some(LexBound::Least),
            Some(b'+') if text.len() == 1 => Some(LexBound::Greatest),
            Some(b'[') => Some(LexBound::Inclusive(text.slice(1..))),
            Some(b'(') => Some(LexBound::Exclusive(text.slice(1..))),
            _ => None,
        }
    }

    /// True when `member` is on the inner side of this bound taken as the range's minimum.
    pub fn below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Least => true,
            LexBound::Greatest => false,
            LexBound::Inclusive(bound) => bound.as_ref() <= member,
            LexBound::Exclusive(bound) => bound.as_ref() < member,
        }
    }

    /// True when `member` is on the inner side of this bound taken as the range's maximum.
    pub fn above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Least => false,
            LexBound::Greatest => true,
            LexBound::Inclusive(bound) => member <= bound.as_ref(),
            LexBound::Exclusive(bound) => member < bound.as_ref(),
        }
    }
}

/// ZADD's GT and LT: update an existing member only when the new score is greater (or less).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Compare {
    /// Any new score.
    #[default]
    Any,
    /// GT: only a greater score.
    Greater,
    /// LT: only a lesser score.
    Less,
}

/// ZADD's options (ZINCRBY is ZADD with `increment`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AddOptions {
    /// NX (only new members) or XX (only existing ones).
    pub condition: SetCondition,
    /// GT or LT.
    pub compare: Compare,
    /// CH: count updated members too, not only new ones.
    pub changed: bool,
    /// INCR: add the score to the member's score, reply with the new score (Nil when the
    /// options kept it from changing).
    pub increment: bool,
}

/// Which members a ZRANGE (or ZREMRANGEBY...) takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RangeBy {
    /// By position in the order, `start` to `stop` inclusive, negative from the end.
    Rank {
        /// First position.
        start: i64,
        /// Last position, inclusive.
        stop: i64,
    },
    /// BYSCORE: scores from `min` to `max`.
    Score {
        /// The lower end.
        min: ScoreBound,
        /// The upper end.
        max: ScoreBound,
    },
    /// BYLEX: members from `min` to `max` (meant for members that share one score).
    Lex {
        /// The lower end.
        min: LexBound,
        /// The upper end.
        max: LexBound,
    },
}

/// A ZRANGE in all its forms (ZRANGEBYSCORE, ZREVRANGE, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    /// Which members.
    pub by: RangeBy,
    /// REV: from the highest score down (ranks then count from the top).
    pub reverse: bool,
    /// LIMIT offset count (BYSCORE and BYLEX only): skip `offset` members (none at all when it
    /// is negative), then take `count` (all when negative).
    pub limit: Option<(i64, i64)>,
    /// WITHSCORES: each member followed by its score.
    pub with_scores: bool,
}

/// A sorted-set command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortedOp {
    /// ZADD and ZINCRBY: (score, member) pairs.
    Add {
        /// The pairs, applied in order.
        members: Vec<(Score, Value)>,
        /// NX, XX, GT, LT, CH, INCR.
        options: AddOptions,
    },
    /// ZREM: returns how many members were removed.
    Remove(Vec<Value>),
    /// ZSCORE: the score as text (Nil when absent).
    Score(Value),
    /// ZMSCORE: each member's score as text, or absent.
    Scores(Vec<Value>),
    /// ZCARD.
    Card,
    /// ZRANK, ZREVRANK: the member's position (Nil when absent).
    Rank {
        /// The member.
        member: Value,
        /// ZREVRANK: counted from the highest score.
        reverse: bool,
    },
    /// ZCOUNT: how many scores are in the range.
    Count {
        /// The lower end.
        min: ScoreBound,
        /// The upper end.
        max: ScoreBound,
    },
    /// ZRANGE and its older forms: members (and scores as text) in order. Boxed, as is
    /// [`SortedOp::RemoveRange`]'s range, because two lexicographic bounds would make every
    /// [`Command`](super::Command) bigger.
    Range(Box<Range>),
    /// ZPOPMIN, ZPOPMAX: removes up to `count` members from the lowest (or highest) score and
    /// returns them with their scores.
    Pop {
        /// How many.
        count: u64,
        /// ZPOPMAX.
        max: bool,
    },
    /// ZREMRANGEBYRANK, ZREMRANGEBYSCORE: removes the range's members; returns how many.
    RemoveRange(Box<RangeBy>),
}

impl SortedOp {
    /// True when the command never changes the sorted set.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            SortedOp::Score(_)
                | SortedOp::Scores(_)
                | SortedOp::Card
                | SortedOp::Rank { .. }
                | SortedOp::Count { .. }
                | SortedOp::Range(_)
        )
    }

    /// The Redis command's lowercase name (ZRANGE for all of its forms).
    pub fn name(&self) -> &'static str {
        match self {
            SortedOp::Add { options, .. } if options.increment => "zincrby",
            SortedOp::Add { .. } => "zadd",
            SortedOp::Remove(_) => "zrem",
            SortedOp::Score(_) => "zscore",
            SortedOp::Scores(_) => "zmscore",
            SortedOp::Card => "zcard",
            SortedOp::Rank { reverse: false, .. } => "zrank",
            SortedOp::Rank { reverse: true, .. } => "zrevrank",
            SortedOp::Count { .. } => "zcount",
            SortedOp::Range(_) => "zrange",
            SortedOp::Pop { max: false, .. } => "zpopmin",
            SortedOp::Pop { max: true, .. } => "zpopmax",
            SortedOp::RemoveRange(by) if matches!(**by, RangeBy::Score { .. }) => "zremrangebyscore",
            SortedOp::RemoveRange(_) => "zremrangebyrank",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_order_totally_and_refuse_nan() {
        // Goal: NaN is never a score, -0 is 0, and bounds parse as Redis' ZCOUNT reads them.
        assert_eq!(Score::new(f64::NAN), None);
        assert_eq!(Score::new(-0.0).map(|s| s.value().to_bits()), Some(0.0f64.to_bits()));
        assert!(Score::parse(b"-inf") < Score::parse(b"-1e300"));
        assert!(postcard::from_bytes::<Score>(&postcard::to_stdvec(&f64::NAN).expect("f64")).is_err());
        let open = ScoreBound::parse(b"(1").expect("a bound");
        assert!(open.exclusive && !open.below(Score::parse(b"1").expect("1")));
        assert!(ScoreBound::parse(b"(").is_none() && ScoreBound::parse(b"x").is_none());
        assert_eq!(LexBound::parse(&Value::from("[a")), Some(LexBound::Inclusive("a".into())));
        assert_eq!(LexBound::parse(&Value::from("a")), None);
        assert!(LexBound::Exclusive("a".into()).below(b"ab") && !LexBound::Exclusive("a".into()).above(b"a"));
    }
}
