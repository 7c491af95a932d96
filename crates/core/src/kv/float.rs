//! INCRBYFLOAT and HINCRBYFLOAT: numbers kept as text, added as `f64`s, written back in Redis'
//! human form (no exponent, no trailing zeros). Each checks what Redis checks, in Redis' order.

use super::{Data, KvStore};
use crate::command::number::{format_double, parse_double};
use crate::command::{CommandResult, Key, Value};
use crate::ids::RequestId;

fn error(text: &str) -> CommandResult {
    CommandResult::Error(text.into())
}

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_FINITE: &str = "ERR increment would produce NaN or Infinity";

impl KvStore {
    /// INCRBYFLOAT: the key's type first, then its value, then the increment, as Redis checks.
    pub(super) fn increment_float(
        &mut self,
        request: RequestId,
        key: &Key,
        delta: &Value,
    ) -> Result<CommandResult, CommandResult> {
        let current = match self.text(key)? {
            None => 0.0,
            Some(value) => parse_double(value).ok_or_else(|| error(NOT_FLOAT))?,
        };
        let delta = parse_double(delta).ok_or_else(|| error(NOT_FLOAT))?;
        let next = current + delta;
        if !next.is_finite() {
            return Err(error(NOT_FINITE));
        }
        let text = Value::from(format_double(next));
        self.write(request, key, Data::Text(text.clone()));
        Ok(CommandResult::Value(text))
    }

    /// HINCRBYFLOAT: the increment first (an infinite one is refused outright), then the key's
    /// type, then the field's value, as Redis checks.
    pub(super) fn hash_increment_float(
        &mut self,
        request: RequestId,
        key: &Key,
        field: &Value,
        delta: &Value,
    ) -> Result<CommandResult, CommandResult> {
        let delta = parse_double(delta).ok_or_else(|| error(NOT_FLOAT))?;
        if !delta.is_finite() {
            return Err(error("ERR value is NaN or Infinity"));
        }
        let current = match self.hash(key)?.and_then(|hash| hash.get(field)) {
            None => 0.0,
            Some(value) => parse_double(value).ok_or_else(|| error("ERR hash value is not a float"))?,
        };
        let next = current + delta;
        if !next.is_finite() {
            return Err(error(NOT_FINITE));
        }
        let text = Value::from(format_double(next));
        self.hash_mut(request, key)?.insert(field.clone(), text.clone());
        Ok(CommandResult::Value(text))
    }
}
