//! Planning the commands that set or read expiry: SET's EX/PX/EXAT/PXAT/KEEPTTL, SETEX,
//! PSETEX, EXPIRE and its variants, TTL and its variants, PERSIST. Relative times stay
//! relative in the command: the replicas add the command's own stamp, so a pipelined command
//! expires relative to when it entered the system, not when it was parsed.

use super::{Action, Shape, error, integer};
use bytes::Bytes;
use ordo_core::Command;
use ordo_core::command::{ExpireCondition, ExpiryTime, SetCondition, SetExpiry, TtlRead};

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
pub fn set(rest: &[Bytes]) -> Action {
    let mut condition = SetCondition::Always;
    let mut expiry = None;
    let mut get = false;
    let mut words = rest[2..].iter();
    while let Some(option) = words.next() {
        let option = option.to_ascii_uppercase();
        match option.as_slice() {
            b"GET" if !get => get = true,
            b"NX" if condition == SetCondition::Always => condition = SetCondition::IfAbsent,
            b"XX" if condition == SetCondition::Always => condition = SetCondition::IfPresent,
            b"KEEPTTL" if expiry.is_none() => expiry = Some(SetExpiry::Keep),
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if expiry.is_none() => {
                let Some(amount) = words.next() else { return error("ERR syntax error") };
                match set_time(&option, amount) {
                    Ok(time) => expiry = Some(SetExpiry::Set(time)),
                    Err(refused) => return refused,
                }
            }
            _ => return error("ERR syntax error"),
        }
    }
    let (key, value, expiry) = (rest[0].clone(), rest[1].clone(), expiry.unwrap_or_default());
    let command = if get {
        Command::GetSet { key, value, condition, expiry }
    } else {
        Command::Set { key, value, condition, expiry }
    };
    Action::Replicate(command, Shape::Plain)
}

/// A SET or SETEX time: a positive integer, in seconds or milliseconds, that fits in
/// milliseconds.
fn set_time(option: &[u8], amount: &Bytes) -> Result<ExpiryTime, Action> {
    let Some(amount) = integer(amount) else { return Err(error("ERR value is not an integer or out of range")) };
    let seconds = matches!(option, b"EX" | b"EXAT" | b"SETEX");
    let ms = if seconds { amount.checked_mul(1000) } else { Some(amount) };
    let invalid = || error("ERR invalid expire time in 'set' command");
    match ms {
        Some(ms) if amount > 0 => Ok(if option.ends_with(b"AT") { ExpiryTime::At(ms) } else { ExpiryTime::In(ms) }),
        _ => Err(invalid()),
    }
}

/// SETEX, PSETEX, the EXPIRE family, the TTL family and PERSIST.
pub fn plan(name: &str, rest: &[Bytes]) -> Action {
    let key = rest[0].clone();
    let ttl = |read| Action::Replicate(Command::Ttl { key: key.clone(), read }, Shape::Plain);
    match name {
        "SETEX" | "PSETEX" => match set_time(name.as_bytes(), &rest[1]) {
            Ok(time) => Action::Replicate(
                Command::Set {
                    key,
                    value: rest[2].clone(),
                    condition: SetCondition::Always,
                    expiry: SetExpiry::Set(time),
                },
                Shape::Plain,
            ),
            Err(refused) => refused.renamed(name),
        },
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" => expire(name, rest),
        "TTL" => ttl(TtlRead::Seconds),
        "PTTL" => ttl(TtlRead::Millis),
        "EXPIRETIME" => ttl(TtlRead::AtSeconds),
        "PEXPIRETIME" => ttl(TtlRead::AtMillis),
        "PERSIST" => Action::Replicate(Command::Persist { key }, Shape::Plain),
        _ => error(format!("ERR unknown command '{name}'")),
    }
}

/// `EXPIRE key seconds [NX|XX|GT|LT]` and its millisecond and absolute variants. A time in the
/// past is allowed (the key then reads as expired at once), as Redis deletes such a key.
fn expire(name: &str, rest: &[Bytes]) -> Action {
    let Some(amount) = integer(&rest[1]) else { return error("ERR value is not an integer or out of range") };
    let seconds = matches!(name, "EXPIRE" | "EXPIREAT");
    let Some(ms) = (if seconds { amount.checked_mul(1000) } else { Some(amount) }) else {
        return error(format!("ERR invalid expire time in '{}' command", name.to_ascii_lowercase()));
    };
    let time = if name.ends_with("AT") { ExpiryTime::At(ms) } else { ExpiryTime::In(ms) };
    let mut condition = ExpireCondition::Always;
    for option in &rest[2..] {
        let next = match option.to_ascii_uppercase().as_slice() {
            b"NX" => ExpireCondition::IfNone,
            b"XX" => ExpireCondition::IfSome,
            b"GT" => ExpireCondition::IfLater,
            b"LT" => ExpireCondition::IfEarlier,
            _ => return error(format!("ERR Unsupported option {}", String::from_utf8_lossy(option))),
        };
        if condition != ExpireCondition::Always && condition != next {
            return error("ERR NX and XX, GT or LT options at the same time are not compatible");
        }
        condition = next;
    }
    Action::Replicate(Command::Expire { key: rest[0].clone(), time, condition }, Shape::Plain)
}

impl Action {
    /// An error reply naming `set` renamed for the command that gave it (SETEX, PSETEX).
    fn renamed(self, name: &str) -> Action {
        match self {
            Action::Reply(crate::resp::Reply::Error(text)) => {
                error(text.replace("'set'", &format!("'{}'", name.to_ascii_lowercase())))
            }
            other => other,
        }
    }
}
