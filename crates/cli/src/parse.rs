//! Parsers for command-line values: durations, seed ranges, protocol options.

/// Parses `10s`, `500ms`, `250us`, `2m`, `1.5s` or a bare number of seconds into nanoseconds.
pub fn duration_ns(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration (try 10s, 500ms)"))?;
    let scale = match unit {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (use ns, us, ms, s, m)")),
    };
    if value <= 0.0 || !value.is_finite() {
        return Err(format!("`{text}`: a duration must be positive"));
    }
    Ok((value * scale).round() as u64)
}

/// Parses `1..300` (inclusive: 300 seeds), `1..=300`, or a single seed.
pub fn seed_range(text: &str) -> Result<std::ops::RangeInclusive<u64>, String> {
    let bad = || format!("`{text}` is not a seed range (try 1..300)");
    let Some((start, end)) = text.split_once("..") else {
        let seed = text.parse().map_err(|_| bad())?;
        return Ok(seed..=seed);
    };
    let start: u64 = start.parse().map_err(|_| bad())?;
    let end: u64 = end.trim_start_matches('=').parse().map_err(|_| bad())?;
    if end < start {
        return Err(format!("`{text}`: the range is empty"));
    }
    Ok(start..=end)
}

/// Parses `key=value` into a TOML table entry; the value is read as TOML (number, boolean,
/// string in quotes) and otherwise taken as a plain string.
pub fn protocol_option(text: &str) -> Result<(String, toml::Value), String> {
    let (key, value) = text.split_once('=').ok_or_else(|| format!("`{text}`: protocol options are key=value"))?;
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut table| table.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    Ok((key.trim().to_string(), parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        // Goal: the units users type are read right, and mistakes are explained.
        assert_eq!(duration_ns("10s"), Ok(10_000_000_000));
        assert_eq!(duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(duration_ns("3"), Ok(3_000_000_000));
        assert!(duration_ns("10h").unwrap_err().contains("unknown unit"));
        assert!(duration_ns("0s").is_err());
        assert!(duration_ns("abc").is_err());
    }

    #[test]
    fn seed_ranges() {
        // Goal: `1..300` means 300 seeds, inclusive, as the docs say.
        assert_eq!(seed_range("1..300"), Ok(1..=300));
        assert_eq!(seed_range("1..=3"), Ok(1..=3));
        assert_eq!(seed_range("7"), Ok(7..=7));
        assert!(seed_range("5..1").is_err());
        assert!(seed_range("x..2").is_err());
    }

    #[test]
    fn protocol_options() {
        // Goal: numbers stay numbers, bare words become strings.
        assert_eq!(protocol_option("batch_max=8"), Ok(("batch_max".into(), toml::Value::Integer(8))));
        assert_eq!(protocol_option("mode=fast"), Ok(("mode".into(), toml::Value::String("fast".into()))));
        assert!(protocol_option("novalue").is_err());
    }
}
