//! Lists, sets, sorted sets, INCRBYFLOAT and HINCRBYFLOAT: their Redis words become replicated
//! commands ([`plan`]), and their results replies in Redis 7's shapes ([`reply`]).
//!
//! Arguments are checked here, before the command is replicated, with Redis' error texts;
//! Redis checks a few of them only after looking at the key (LINDEX's and LSET's index), so
//! when both the key and the argument are wrong ordo names the argument, Redis the key.
//! INCRBYFLOAT's and HINCRBYFLOAT's increments travel as the client's text and the store
//! checks them, in Redis' order.
//!
//! SPOP and SRANDMEMBER carry the request's `seed`, drawn by the gateway: every replica then
//! chooses the same members.
//!
//! Scores come back from the store as text and go out as doubles: RESP3 `,1.5`, RESP2 a bulk
//! string, spelled as Redis 7.2 spells them (the shortest text that reads back the same).

mod sorted;

use super::{Action, Shape, error, integer, wrong_args};
use crate::host::Outcome;
use crate::resp::Reply;
use bytes::Bytes;
use ordo_core::command::number::parse_double;
use ordo_core::command::{Combine, LPOS_RANK_ZERO, ListEnd, ListOp, SetOp};
use ordo_core::{Command, CommandResult};

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const SYNTAX: &str = "ERR syntax error";

/// How a collection command's result becomes a reply, beyond [`Shape::Plain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Values as a set, RESP3 `~` (SMEMBERS, SINTER, SPOP with a count).
    Members,
    /// Values as an array, Nil as a null array (LPOP and RPOP with a count).
    NullableArray,
    /// Values holding decimal text as an array of integers (SMISMEMBER, LPOS with COUNT).
    Integers,
    /// A score's text as a double, Nil as a null (ZSCORE, ZINCRBY, ZADD INCR).
    Double,
    /// Scores' texts as an array of doubles and nulls (ZMSCORE).
    Doubles,
    /// Member, score, member, score...: RESP3 an array of [member, double] pairs, RESP2 one
    /// flat array (WITHSCORES, ZPOPMIN with a count).
    Scored,
    /// Member, score as one flat array of a bulk string and a double (ZPOPMIN without a count).
    ScoredFlat,
}

/// The action for a list, set, sorted-set or float-increment command; `None` when `name` is
/// none of these. The table has checked the arity.
pub fn plan(name: &str, rest: &[Bytes], seed: u64) -> Option<Action> {
    // Every command here names a key first (DBSIZE, RANDOMKEY and the like name none).
    if rest.is_empty() {
        return None;
    }
    plan_list(name, rest)
        .or_else(|| plan_set(name, rest, seed))
        .or_else(|| sorted::plan(name, rest))
        .or_else(|| plan_float(name, rest))
}

fn shaped(command: Command, form: Form) -> Action {
    Action::Replicate(command, Shape::Collection(form))
}

fn plain(command: Command) -> Action {
    Action::Replicate(command, Shape::Plain)
}

/// A count that must not be negative (LPOP's, SPOP's, ZPOPMIN's): Redis' one error for both a
/// non-number and a negative number.
fn positive(word: &Bytes) -> Result<u64, Action> {
    integer(word).and_then(|n| u64::try_from(n).ok()).ok_or_else(|| error(NOT_POSITIVE))
}

fn integers<const N: usize>(words: &[Bytes]) -> Result<[i64; N], Action> {
    let mut out = [0; N];
    for (slot, word) in out.iter_mut().zip(words) {
        *slot = integer(word).ok_or_else(|| error(NOT_INTEGER))?;
    }
    Ok(out)
}

fn plan_list(name: &str, rest: &[Bytes]) -> Option<Action> {
    let key = rest[0].clone();
    let list = |op| plain(Command::List { key: key.clone(), op });
    let end = if name.starts_with('L') { ListEnd::Left } else { ListEnd::Right };
    let planned = match name {
        "LPUSH" | "RPUSH" | "LPUSHX" | "RPUSHX" => {
            Ok(list(ListOp::Push { end, values: rest[1..].to_vec(), existing_only: name.ends_with('X') }))
        }
        "LPOP" | "RPOP" => match rest.len() {
            1 => Ok(list(ListOp::Pop { end, count: None })),
            2 => positive(&rest[1]).map(|count| {
                shaped(
                    Command::List { key: key.clone(), op: ListOp::Pop { end, count: Some(count) } },
                    Form::NullableArray,
                )
            }),
            _ => Err(wrong_args(name)),
        },
        "LRANGE" => integers(&rest[1..]).map(|[start, stop]| list(ListOp::Range { start, stop })),
        "LLEN" => Ok(list(ListOp::Len)),
        "LINDEX" => integers(&rest[1..]).map(|[index]| list(ListOp::Index(index))),
        "LSET" => integers(&rest[1..2]).map(|[index]| list(ListOp::Set { index, value: rest[2].clone() })),
        "LREM" => integers(&rest[1..2]).map(|[count]| list(ListOp::Remove { count, value: rest[2].clone() })),
        "LTRIM" => integers(&rest[1..]).map(|[start, stop]| list(ListOp::Trim { start, stop })),
        "LINSERT" => match rest[1].to_ascii_uppercase().as_slice() {
            position @ (b"BEFORE" | b"AFTER") => {
                Ok(list(ListOp::Insert { after: position == b"AFTER", pivot: rest[2].clone(), value: rest[3].clone() }))
            }
            _ => Err(error(SYNTAX)),
        },
        "LPOS" => plan_lpos(rest),
        _ => return None,
    };
    Some(planned.unwrap_or_else(|refused| refused))
}

/// LPOS key element [RANK rank] [COUNT count] [MAXLEN len], each option checked as Redis
/// checks it, in order.
fn plan_lpos(rest: &[Bytes]) -> Result<Action, Action> {
    let (mut rank, mut count, mut max_len) = (1, None, 0);
    let mut options = rest[2..].iter();
    while let Some(option) = options.next() {
        let upper = option.to_ascii_uppercase();
        let Some(argument) = options.next() else { return Err(error(SYNTAX)) };
        let number = integer(argument);
        match (upper.as_slice(), number) {
            (b"RANK", Some(0)) => return Err(error(LPOS_RANK_ZERO)),
            // Redis 7.2 refuses the one rank whose opposite does not fit.
            (b"RANK", Some(i64::MIN)) => return Err(error(FULL_RANGE)),
            (b"RANK", Some(n)) => rank = n,
            (b"RANK", None) => return Err(error(NOT_INTEGER)),
            (b"COUNT", n) => {
                count = Some(n.and_then(|n| u64::try_from(n).ok()).ok_or_else(|| error("ERR COUNT can't be negative"))?)
            }
            (b"MAXLEN", n) => {
                max_len = n.and_then(|n| u64::try_from(n).ok()).ok_or_else(|| error("ERR MAXLEN can't be negative"))?
            }
            _ => return Err(error(SYNTAX)),
        }
    }
    let op = ListOp::Position { value: rest[1].clone(), rank, count, max_len };
    let command = Command::List { key: rest[0].clone(), op };
    Ok(if count.is_some() { shaped(command, Form::Integers) } else { plain(command) })
}

/// Redis' error for a number whose opposite does not fit (SRANDMEMBER's count, LPOS's rank).
const FULL_RANGE: &str = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

fn plan_set(name: &str, rest: &[Bytes], seed: u64) -> Option<Action> {
    let key = rest[0].clone();
    let members = |op| Command::Members { key: key.clone(), op };
    let combine = match name.trim_end_matches("STORE") {
        "SINTER" => Some(Combine::Inter),
        "SUNION" => Some(Combine::Union),
        "SDIFF" => Some(Combine::Diff),
        _ => None,
    };
    let planned = match name {
        "SADD" => plain(members(SetOp::Add(rest[1..].to_vec()))),
        "SREM" => plain(members(SetOp::Remove(rest[1..].to_vec()))),
        "SMEMBERS" => shaped(members(SetOp::Members), Form::Members),
        "SISMEMBER" => plain(members(SetOp::IsMember(rest[1].clone()))),
        "SMISMEMBER" => shaped(members(SetOp::AreMembers(rest[1..].to_vec())), Form::Integers),
        "SCARD" => plain(members(SetOp::Card)),
        "SPOP" | "SRANDMEMBER" if rest.len() > 2 => error(SYNTAX),
        "SPOP" if rest.len() == 1 => plain(members(SetOp::Pop { count: None, seed })),
        "SPOP" => match positive(&rest[1]) {
            Ok(count) => shaped(members(SetOp::Pop { count: Some(count), seed }), Form::Members),
            Err(refused) => refused,
        },
        "SRANDMEMBER" if rest.len() == 1 => plain(members(SetOp::Random { count: None, seed })),
        "SRANDMEMBER" => match integer(&rest[1]) {
            Some(i64::MIN) => error(FULL_RANGE),
            Some(count) => plain(members(SetOp::Random { count: Some(count), seed })),
            None => error(NOT_INTEGER),
        },
        "SINTER" | "SUNION" | "SDIFF" => {
            let op = combine.expect("named above");
            shaped(Command::SetAlgebra { op, keys: rest.to_vec(), destination: None }, Form::Members)
        }
        "SINTERSTORE" | "SUNIONSTORE" | "SDIFFSTORE" => {
            let op = combine.expect("named above");
            plain(Command::SetAlgebra { op, keys: rest[1..].to_vec(), destination: Some(key) })
        }
        "SMOVE" => plain(Command::SetMove { source: key, destination: rest[1].clone(), member: rest[2].clone() }),
        _ => return None,
    };
    Some(planned)
}

fn plan_float(name: &str, rest: &[Bytes]) -> Option<Action> {
    Some(match name {
        "INCRBYFLOAT" => plain(Command::IncrByFloat { key: rest[0].clone(), delta: rest[1].clone() }),
        "HINCRBYFLOAT" => {
            plain(Command::HIncrByFloat { key: rest[0].clone(), field: rest[1].clone(), delta: rest[2].clone() })
        }
        _ => return None,
    })
}

/// The reply for a collection command's result in `form`; errors never reach here (see
/// [`super::reply`]).
pub fn reply(result: CommandResult, form: Form) -> Reply {
    let bulk = Reply::Bulk;
    match (form, result) {
        (Form::Members, CommandResult::Values(values)) => Reply::Set(values.into_iter().map(bulk).collect()),
        (Form::NullableArray, CommandResult::Nil) => Reply::NullArray,
        (Form::Integers, CommandResult::Values(values)) => Reply::Nested(
            values.iter().map(|v| v.as_ref().and_then(integer).map_or(Reply::Bulk(None), Reply::Integer)).collect(),
        ),
        (Form::Double, CommandResult::Value(score)) => double(score),
        (Form::Doubles, CommandResult::Values(scores)) => {
            Reply::Nested(scores.into_iter().map(|score| score.map_or(Reply::Bulk(None), double)).collect())
        }
        (Form::Scored, CommandResult::Values(values)) => Reply::Pairs(
            values
                .chunks_exact(2)
                .map(|pair| (bulk(pair[0].clone()), pair[1].clone().map_or(Reply::Bulk(None), double)))
                .collect(),
        ),
        (Form::ScoredFlat, CommandResult::Values(values)) => Reply::Nested(
            values
                .chunks_exact(2)
                .flat_map(|pair| [bulk(pair[0].clone()), pair[1].clone().map_or(Reply::Bulk(None), double)])
                .collect(),
        ),
        (_, other) => super::reply(Outcome::Done(other), Shape::Plain),
    }
}

/// A score's text as a double (as a bulk string, should it ever not parse).
fn double(score: Bytes) -> Reply {
    match parse_double(&score) {
        Some(value) => Reply::Double(value),
        None => Reply::Bulk(Some(score)),
    }
}

#[cfg(test)]
mod tests;
