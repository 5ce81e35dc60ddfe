//! The argument parsers every command shares, with the flag named in their errors: rates
//! (decimal prefixes, `20mbit`), sizes (binary prefixes, `1MB` = 2^20 bytes, as everywhere in
//! ofan; see [`ofan_topology::units`]) and durations (`2s`, `500ms`).

use std::time::Duration;

use anyhow::{bail, Context};

/// A rate in bits per second (`--link-rate`).
///
/// # Errors
/// Text that is not a rate.
pub fn parse_rate(text: &str) -> anyhow::Result<u64> {
    ofan_topology::units::parse_rate(text).map_err(|e| anyhow::anyhow!("--link-rate {e}"))
}

/// A size in bytes (`--size`).
///
/// # Errors
/// Text that is not a size.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    ofan_topology::units::parse_size(text).map_err(|e| anyhow::anyhow!("--size {e}"))
}

/// A duration: a number with unit ns, us, ms or s (e.g. 2s, 1.5s, 500ms).
///
/// # Errors
/// Text that is not a duration.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .with_context(|| format!("`{text}` is not a duration (examples: 2s, 500ms)"))?;
    let seconds = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "" => 1.0,
        other => bail!("`{text}`: unknown unit `{other}` (ns, us, ms, s)"),
    };
    Ok(Duration::from_secs_f64(value * seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates_sizes_durations() {
        assert_eq!(parse_rate("50mbit").unwrap(), 50_000_000);
        assert_eq!(parse_rate("1.5Gbit").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("20000").unwrap(), 20_000);
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_size("1MB").unwrap(), 1 << 20);
        assert_eq!(parse_size("64kib").unwrap(), 64 << 10);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert!(parse_size("1XB").is_err());
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert!(parse_duration("2 fortnights").is_err());
    }
}
