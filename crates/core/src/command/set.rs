//! The set commands: [`SetOp`] for one set ([`Command::Members`](super::Command::Members)),
//! [`Combine`] for several ([`Command::SetAlgebra`](super::Command::SetAlgebra)).
//!
//! SPOP and SRANDMEMBER choose at random, and every replica must choose alike: the gateway
//! draws a `seed` when it plans the command, and the store derives its choices from it alone.

use super::Value;
use serde::{Deserialize, Serialize};

/// A command on one set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetOp {
    /// SADD: returns how many members were new.
    Add(Vec<Value>),
    /// SREM: returns how many members were removed.
    Remove(Vec<Value>),
    /// SMEMBERS.
    Members,
    /// SISMEMBER: 1 or 0.
    IsMember(Value),
    /// SMISMEMBER: 1 or 0 per member, as decimal text.
    AreMembers(Vec<Value>),
    /// SCARD.
    Card,
    /// SPOP: removes members chosen from `seed`; without a count one member (Nil when absent),
    /// with one up to that many.
    Pop {
        /// How many, when given.
        count: Option<u64>,
        /// The gateway's random draw, the same at every replica.
        seed: u64,
    },
    /// SRANDMEMBER: members chosen from `seed`; without a count one (Nil when absent); with a
    /// positive count that many distinct ones at most, with a negative one exactly `-count`,
    /// maybe repeated.
    Random {
        /// How many, when given.
        count: Option<i64>,
        /// The gateway's random draw, the same at every replica.
        seed: u64,
    },
}

impl SetOp {
    /// True when the command never changes the set.
    pub fn is_read_only(&self) -> bool {
        matches!(self, SetOp::Members | SetOp::IsMember(_) | SetOp::AreMembers(_) | SetOp::Card | SetOp::Random { .. })
    }

    /// The Redis command's lowercase name.
    pub fn name(&self) -> &'static str {
        match self {
            SetOp::Add(_) => "sadd",
            SetOp::Remove(_) => "srem",
            SetOp::Members => "smembers",
            SetOp::IsMember(_) => "sismember",
            SetOp::AreMembers(_) => "smismember",
            SetOp::Card => "scard",
            SetOp::Pop { .. } => "spop",
            SetOp::Random { .. } => "srandmember",
        }
    }
}

/// How SINTER, SUNION and SDIFF (and their STORE forms) combine sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Combine {
    /// The members in every set.
    Inter,
    /// The members in any set.
    Union,
    /// The members of the first set in none of the others.
    Diff,
}

impl Combine {
    /// The Redis command's lowercase name, with or without STORE.
    pub fn name(self, store: bool) -> &'static str {
        match (self, store) {
            (Combine::Inter, false) => "sinter",
            (Combine::Union, false) => "sunion",
            (Combine::Diff, false) => "sdiff",
            (Combine::Inter, true) => "sinterstore",
            (Combine::Union, true) => "sunionstore",
            (Combine::Diff, true) => "sdiffstore",
        }
    }
}
