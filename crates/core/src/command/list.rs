//! The list commands ([`Command::List`](super::Command::List)): what each does to the list at
//! one key. Positions are Redis': 0 is the head, negative ones count from the tail.

use super::Value;
use serde::{Deserialize, Serialize};

/// Redis' refusal of `LPOS ... RANK 0`.
pub const LPOS_RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
    or use negative to start from the end of the list";

/// The end of a list a command works at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListEnd {
    /// The head (LPUSH, LPOP).
    Left,
    /// The tail (RPUSH, RPOP).
    Right,
}

/// A list command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListOp {
    /// LPUSH, RPUSH, LPUSHX, RPUSHX: pushes the values one by one; returns the new length.
    Push {
        /// Where they go.
        end: ListEnd,
        /// The values, in the order they are pushed.
        values: Vec<Value>,
        /// LPUSHX, RPUSHX: only when the list exists (returns 0 otherwise).
        existing_only: bool,
    },
    /// LPOP, RPOP: without a count the value (Nil when absent); with one, up to that many values
    /// (Nil when the list is absent).
    Pop {
        /// Where they come from.
        end: ListEnd,
        /// How many, when given.
        count: Option<u64>,
    },
    /// LRANGE: the values from `start` to `stop` inclusive.
    Range {
        /// First position.
        start: i64,
        /// Last position, inclusive.
        stop: i64,
    },
    /// LLEN.
    Len,
    /// LINDEX: the value at a position (Nil out of range).
    Index(i64),
    /// LSET: replaces the value at a position.
    Set {
        /// The position.
        index: i64,
        /// The new value.
        value: Value,
    },
    /// LREM: removes values equal to `value`: the first `count` from the head (count > 0), the
    /// last `-count` from the tail (count < 0), or all (0); returns how many.
    Remove {
        /// How many and from which end.
        count: i64,
        /// The value removed.
        value: Value,
    },
    /// LTRIM: keeps only the values from `start` to `stop` inclusive.
    Trim {
        /// First position kept.
        start: i64,
        /// Last position kept, inclusive.
        stop: i64,
    },
    /// LINSERT: inserts `value` before or after the first `pivot`; returns the new length, -1
    /// when there is no pivot, 0 when the list is absent.
    Insert {
        /// AFTER (else BEFORE).
        after: bool,
        /// The value looked for.
        pivot: Value,
        /// The value inserted.
        value: Value,
    },
    /// LPOS: the positions (from the head) of the values equal to `value`.
    Position {
        /// The value looked for.
        value: Value,
        /// RANK: skip the first `rank - 1` matches; a negative rank searches from the tail.
        /// Never 0.
        rank: i64,
        /// COUNT: a list of at most this many positions (0: all) instead of one or Nil.
        count: Option<u64>,
        /// MAXLEN: compare at most this many values (0: all).
        max_len: u64,
    },
}

impl ListOp {
    /// True when the command never changes the list.
    pub fn is_read_only(&self) -> bool {
        matches!(self, ListOp::Range { .. } | ListOp::Len | ListOp::Index(_) | ListOp::Position { .. })
    }

    /// The Redis command's lowercase name.
    pub fn name(&self) -> &'static str {
        match self {
            ListOp::Push { end: ListEnd::Left, existing_only: false, .. } => "lpush",
            ListOp::Push { end: ListEnd::Right, existing_only: false, .. } => "rpush",
            ListOp::Push { end: ListEnd::Left, existing_only: true, .. } => "lpushx",
            ListOp::Push { end: ListEnd::Right, existing_only: true, .. } => "rpushx",
            ListOp::Pop { end: ListEnd::Left, .. } => "lpop",
            ListOp::Pop { end: ListEnd::Right, .. } => "rpop",
            ListOp::Range { .. } => "lrange",
            ListOp::Len => "llen",
            ListOp::Index(_) => "lindex",
            ListOp::Set { .. } => "lset",
            ListOp::Remove { .. } => "lrem",
            ListOp::Trim { .. } => "ltrim",
            ListOp::Insert { .. } => "linsert",
            ListOp::Position { .. } => "lpos",
        }
    }
}
