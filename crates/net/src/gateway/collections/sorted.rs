//! The sorted-set commands' words: ZADD's options, and ZRANGE in all its forms (ZRANGEBYSCORE,
//! ZREVRANGE, ...), parsed as Redis 7's `zaddGenericCommand` and `zrangeGenericCommand` parse
//! them, errors and their order included.

use super::{Form, SYNTAX, integers, plain, positive, shaped};
use crate::gateway::{Action, error};
use bytes::Bytes;
use ordo_core::Command;
use ordo_core::command::{AddOptions, Compare, LexBound, Range, RangeBy, Score, ScoreBound, SetCondition, SortedOp};

const NOT_FLOAT: &str = "ERR value is not a valid float";
const MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
const MIN_MAX_NOT_LEX: &str = "ERR min or max not valid string range item";

/// The action for a sorted-set command; `None` when `name` is not one.
pub(super) fn plan(name: &str, rest: &[Bytes]) -> Option<Action> {
    let key = rest[0].clone();
    let sorted = |op| Command::Sorted { key: key.clone(), op };
    let planned = match name {
        "ZADD" => plan_add(rest, false),
        "ZINCRBY" => plan_add(rest, true),
        "ZREM" => Ok(plain(sorted(SortedOp::Remove(rest[1..].to_vec())))),
        "ZSCORE" => Ok(shaped(sorted(SortedOp::Score(rest[1].clone())), Form::Double)),
        "ZMSCORE" => Ok(shaped(sorted(SortedOp::Scores(rest[1..].to_vec())), Form::Doubles)),
        "ZCARD" => Ok(plain(sorted(SortedOp::Card))),
        "ZRANK" | "ZREVRANK" => {
            Ok(plain(sorted(SortedOp::Rank { member: rest[1].clone(), reverse: name == "ZREVRANK" })))
        }
        "ZCOUNT" => score_bounds(&rest[1], &rest[2]).map(|(min, max)| plain(sorted(SortedOp::Count { min, max }))),
        "ZRANGE" => plan_range(rest, Kind::Any, None),
        "ZRANGEBYSCORE" => plan_range(rest, Kind::Score, Some(false)),
        "ZREVRANGEBYSCORE" => plan_range(rest, Kind::Score, Some(true)),
        "ZREVRANGE" => plan_range(rest, Kind::Rank, Some(true)),
        "ZPOPMIN" | "ZPOPMAX" => plan_pop(rest, name == "ZPOPMAX"),
        "ZREMRANGEBYSCORE" => score_bounds(&rest[1], &rest[2])
            .map(|(min, max)| plain(sorted(SortedOp::RemoveRange(Box::new(RangeBy::Score { min, max }))))),
        "ZREMRANGEBYRANK" => integers(&rest[1..])
            .map(|[start, stop]| plain(sorted(SortedOp::RemoveRange(Box::new(RangeBy::Rank { start, stop }))))),
        _ => return None,
    };
    Some(planned.unwrap_or_else(|refused| refused))
}

fn score_bounds(min: &Bytes, max: &Bytes) -> Result<(ScoreBound, ScoreBound), Action> {
    match (ScoreBound::parse(min), ScoreBound::parse(max)) {
        (Some(min), Some(max)) => Ok((min, max)),
        _ => Err(error(MIN_MAX_NOT_FLOAT)),
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ..., and ZINCRBY, which Redis parses as
/// ZADD with INCR (so `ZINCRBY key NX member` is a syntax error there too). Every score is
/// checked before anything runs, so the command runs whole or not at all.
fn plan_add(rest: &[Bytes], increment: bool) -> Result<Action, Action> {
    let mut options = AddOptions { increment, ..AddOptions::default() };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    let mut at = 1;
    while let Some(word) = rest.get(at) {
        match word.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => options.changed = true,
            b"INCR" => options.increment = true,
            _ => break,
        }
        at += 1;
    }
    let pairs = &rest[at..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return Err(error(SYNTAX));
    }
    if nx && xx {
        return Err(error("ERR XX and NX options at the same time are not compatible"));
    }
    if (gt || lt) && nx || gt && lt {
        return Err(error("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if options.increment && pairs.len() > 2 {
        return Err(error("ERR INCR option supports a single increment-element pair"));
    }
    options.condition = if nx {
        SetCondition::IfAbsent
    } else if xx {
        SetCondition::IfPresent
    } else {
        SetCondition::Always
    };
    options.compare = if gt {
        Compare::Greater
    } else if lt {
        Compare::Less
    } else {
        Compare::Any
    };
    let members = pairs
        .chunks_exact(2)
        .map(|pair| Score::parse(&pair[0]).map(|score| (score, pair[1].clone())).ok_or_else(|| error(NOT_FLOAT)))
        .collect::<Result<Vec<_>, _>>()?;
    let command = Command::Sorted { key: rest[0].clone(), op: SortedOp::Add { members, options } };
    Ok(if options.increment { shaped(command, Form::Double) } else { plain(command) })
}

/// What a ZRANGE selects by, before its options are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// ZRANGE: BYSCORE or BYLEX may choose; by rank otherwise.
    Any,
    /// By position (ZREVRANGE).
    Rank,
    /// By score (ZRANGEBYSCORE, or ZRANGE with BYSCORE).
    Score,
    /// By member (ZRANGE with BYLEX).
    Lex,
}

/// ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES], and the older
/// commands, which fix the kind and the direction (`reverse`: `None` lets REV choose). With
/// REV, BYSCORE and BYLEX take the maximum first.
fn plan_range(rest: &[Bytes], mut kind: Kind, mut reverse: Option<bool>) -> Result<Action, Action> {
    let (mut with_scores, mut limit) = (false, None);
    let mut at = 3;
    while let Some(word) = rest.get(at) {
        match word.to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => with_scores = true,
            b"LIMIT" if rest.len() - at > 2 => {
                let [offset, count] = integers(&rest[at + 1..at + 3])?;
                limit = Some((offset, count));
                at += 2;
            }
            b"REV" if reverse.is_none() => reverse = Some(true),
            b"BYSCORE" if kind == Kind::Any => kind = Kind::Score,
            b"BYLEX" if kind == Kind::Any => kind = Kind::Lex,
            _ => return Err(error(SYNTAX)),
        }
        at += 1;
    }
    let reverse = reverse.unwrap_or(false);
    if limit.is_some() && matches!(kind, Kind::Any | Kind::Rank) {
        return Err(error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if with_scores && kind == Kind::Lex {
        return Err(error("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (low, high) =
        if reverse && matches!(kind, Kind::Score | Kind::Lex) { (&rest[2], &rest[1]) } else { (&rest[1], &rest[2]) };
    let by = match kind {
        Kind::Any | Kind::Rank => {
            integers(&[low.clone(), high.clone()]).map(|[start, stop]| RangeBy::Rank { start, stop })?
        }
        Kind::Score => score_bounds(low, high).map(|(min, max)| RangeBy::Score { min, max })?,
        Kind::Lex => match (LexBound::parse(low), LexBound::parse(high)) {
            (Some(min), Some(max)) => RangeBy::Lex { min, max },
            _ => return Err(error(MIN_MAX_NOT_LEX)),
        },
    };
    let command = Command::Sorted {
        key: rest[0].clone(),
        op: SortedOp::Range(Box::new(Range { by, reverse, limit, with_scores })),
    };
    Ok(if with_scores { shaped(command, Form::Scored) } else { plain(command) })
}

/// ZPOPMIN, ZPOPMAX key [count]: without a count one flat [member, score], with one a list of
/// pairs.
fn plan_pop(rest: &[Bytes], max: bool) -> Result<Action, Action> {
    let key = rest[0].clone();
    match rest.len() {
        1 => Ok(shaped(Command::Sorted { key, op: SortedOp::Pop { count: 1, max } }, Form::ScoredFlat)),
        2 => positive(&rest[1])
            .map(|count| shaped(Command::Sorted { key, op: SortedOp::Pop { count, max } }, Form::Scored)),
        _ => Err(error(SYNTAX)),
    }
}
