//! Key expiry (Redis TTLs) in a replicated store: every time here is in Unix milliseconds and
//! comes from the command itself ([`super::Command::Timed`], stamped where the command entered
//! the system), never from a replica's clock, so every replica decides expiry alike.

use serde::{Deserialize, Serialize};

/// When a key expires, as a command names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpiryTime {
    /// This many milliseconds after the command's own time (EX, PX, EXPIRE, PEXPIRE).
    In(i64),
    /// At this Unix time in milliseconds (EXAT, PXAT, EXPIREAT, PEXPIREAT).
    At(i64),
}

impl ExpiryTime {
    /// The absolute expiry time for a command stamped `now`.
    pub fn resolve(self, now: i64) -> i64 {
        match self {
            ExpiryTime::In(after) => now.saturating_add(after),
            ExpiryTime::At(at) => at,
        }
    }
}

/// What a SET does to the key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SetExpiry {
    /// The key no longer expires (a plain SET).
    #[default]
    Clear,
    /// The key keeps its expiry (KEEPTTL).
    Keep,
    /// The key expires then (EX, PX, EXAT, PXAT).
    Set(ExpiryTime),
}

/// EXPIRE's options: when the new expiry replaces the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ExpireCondition {
    /// Always.
    #[default]
    Always,
    /// NX: only when the key has no expiry.
    IfNone,
    /// XX: only when the key has one.
    IfSome,
    /// GT: only when the new time is later (a key without expiry counts as never expiring).
    IfLater,
    /// LT: only when the new time is earlier (a key without expiry counts as never expiring).
    IfEarlier,
}

impl ExpireCondition {
    /// True when a key whose expiry is `current` takes `new`.
    pub fn allows(self, current: Option<i64>, new: i64) -> bool {
        match self {
            ExpireCondition::Always => true,
            ExpireCondition::IfNone => current.is_none(),
            ExpireCondition::IfSome => current.is_some(),
            ExpireCondition::IfLater => current.is_some_and(|at| new > at),
            ExpireCondition::IfEarlier => current.is_none_or(|at| new < at),
        }
    }
}

/// What TTL-like commands read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TtlRead {
    /// TTL: seconds left, rounded.
    Seconds,
    /// PTTL: milliseconds left.
    Millis,
    /// EXPIRETIME: the Unix time in seconds.
    AtSeconds,
    /// PEXPIRETIME: the Unix time in milliseconds.
    AtMillis,
}

impl TtlRead {
    /// Redis' answer for a live key whose expiry is `expires`, read at `now`: -1 when it does not
    /// expire, else the time left (never negative) or the expiry time.
    pub fn answer(self, expires: Option<i64>, now: i64) -> i64 {
        let Some(at) = expires else { return -1 };
        let left = at.saturating_sub(now).max(0);
        match self {
            TtlRead::Seconds => left.saturating_add(500) / 1000,
            TtlRead::Millis => left,
            TtlRead::AtSeconds => at / 1000,
            TtlRead::AtMillis => at,
        }
    }
}

/// True when a key whose expiry is `expires` is expired for a command stamped `now`: strictly
/// past its time, as Redis decides. A command without a stamp sees nothing expired.
pub fn is_expired(expires: Option<i64>, now: Option<i64>) -> bool {
    matches!((expires, now), (Some(at), Some(now)) if now > at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_strictly_after_its_time_and_needs_a_stamp() {
        assert!(!is_expired(Some(100), Some(100)));
        assert!(is_expired(Some(100), Some(101)));
        assert!(!is_expired(Some(100), None));
        assert!(!is_expired(None, Some(i64::MAX)));
    }

    #[test]
    fn conditions_follow_redis_rules_for_keys_without_expiry() {
        assert!(ExpireCondition::IfEarlier.allows(None, 5));
        assert!(!ExpireCondition::IfLater.allows(None, 5));
        assert!(ExpireCondition::IfLater.allows(Some(4), 5));
        assert!(!ExpireCondition::IfNone.allows(Some(4), 5));
        assert!(ExpireCondition::IfSome.allows(Some(4), 5));
    }

    #[test]
    fn ttl_answers_round_like_redis() {
        assert_eq!(TtlRead::Seconds.answer(None, 0), -1);
        assert_eq!(TtlRead::Seconds.answer(Some(1_499), 0), 1);
        assert_eq!(TtlRead::Seconds.answer(Some(1_500), 0), 2);
        assert_eq!(TtlRead::Millis.answer(Some(10), 20), 0);
        assert_eq!(TtlRead::AtSeconds.answer(Some(12_345), 0), 12);
        assert_eq!(ExpiryTime::In(i64::MAX).resolve(5), i64::MAX);
    }
}
