//! Doubles as Redis reads and writes them: sorted-set scores, INCRBYFLOAT and HINCRBYFLOAT.
//!
//! Redis keeps INCRBYFLOAT's value as a C `long double` and ordo as an `f64`, so their last
//! digits can differ (Redis 7.0 answers `0.1 + 0.2` with `0.3`, ordo with
//! `0.30000000000000004`); scores are `double`s in both.

/// Parses a double as Redis' `strtod` check does: the whole text, no leading space, `inf`,
/// `+inf`, `-inf` and `infinity` in any case; NaN, overflow (`1e400`) and underflow to zero
/// (`1e-400`) are refused. Redis also takes C's hexadecimal form (`0x10`); ordo does not.
pub fn parse_double(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    let value: f64 = text.parse().ok()?;
    if value.is_nan() {
        return None;
    }
    let unsigned = text.trim_start_matches(['+', '-']);
    let spelled_infinite = unsigned.get(..3).is_some_and(|start| start.eq_ignore_ascii_case("inf"));
    if value.is_infinite() && !spelled_infinite {
        return None;
    }
    let mantissa = unsigned.split(['e', 'E']).next().unwrap_or_default();
    if value == 0.0 && mantissa.bytes().any(|digit| (b'1'..=b'9').contains(&digit)) {
        return None;
    }
    Some(value)
}

/// A double's text for replies and stored values: the shortest digits that read back as the
/// same value, never with an exponent (Redis 7.2's spelling of scores), `inf` and `-inf`, and
/// `0` for negative zero (as INCRBYFLOAT and ZSCORE answer it).
pub fn format_double(value: f64) -> String {
    assert!(!value.is_nan(), "Redis never stores NaN");
    if value.is_infinite() {
        return if value > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if value == 0.0 {
        return "0".into();
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_parse_and_print_as_redis_does() {
        // Goal: the texts redis-server 7.0.15 takes and refuses for ZADD and INCRBYFLOAT.
        for (text, value) in [("1", 1.0), ("-2.5", -2.5), (".5", 0.5), ("5.", 5.0), ("+3", 3.0), ("1.5e2", 150.0)] {
            assert_eq!(parse_double(text.as_bytes()), Some(value), "{text}");
        }
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"+Infinity"), Some(f64::INFINITY));
        for refused in ["", " 1", "1 ", "nan", "x", "1e400", "-1e400", "1e-400", "1,5"] {
            assert_eq!(parse_double(refused.as_bytes()), None, "{refused:?}");
        }
        assert_eq!(parse_double(b"0e-400"), Some(0.0), "a zero mantissa is no underflow");
        assert_eq!(format_double(10.5 + 0.1), "10.6");
        assert_eq!(format_double(1e21), "1000000000000000000000");
        assert_eq!(format_double(1.5e-7), "0.00000015");
        assert_eq!(format_double(-0.0), "0");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
    }
}
