//! Human units, one convention for every ofan command, the same as Linux's `tc` and `iperf3`:
//!
//! * **rates** are bits per second with decimal SI prefixes: `100mbit` = 10⁸, `10gbit`, `800g`,
//!   `25kbit`, plain `1500`; an optional `bit`, `bps`, `b/s` suffix;
//! * **sizes** are bytes with binary prefixes: `64KB` = `64KiB` = `64k` = 65,536, `1MB` = 2²⁰,
//!   `1.5GB`; an optional `B`. For an exact decimal size write the number (`800000`).
//!
//! Fractions are allowed (`1.5MB`, `2.5gbit`) and rounded to the nearest unit.

/// A value that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {what} (examples: {examples})")]
pub struct UnitError {
    /// The text as given.
    pub text: String,
    /// `rate` or `size`.
    pub what: &'static str,
    /// Valid examples.
    pub examples: &'static str,
}

/// Parses a rate in bits per second (decimal prefixes `k`, `m`, `g`, `t`).
///
/// # Errors
/// When `text` is not a non-negative number with an optional prefix and suffix.
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let lower = text.trim().to_ascii_lowercase();
    let body = ["bit/s", "bits", "bit", "bps", "b/s"]
        .iter()
        .find_map(|suffix| lower.strip_suffix(suffix))
        .unwrap_or(&lower);
    let (number, multiplier) = split_prefix(body, 1000);
    scale(number, multiplier).ok_or_else(|| UnitError {
        text: text.to_owned(),
        what: "rate",
        examples: "100mbit, 10gbit, 800g, 0",
    })
}

/// Parses a size in bytes (binary prefixes: `K`/`KB`/`KiB` = 1024, `M`, `G`, `T`).
///
/// # Errors
/// When `text` is not a non-negative number with an optional prefix and suffix.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let lower = text.trim().to_ascii_lowercase();
    let body = ["ib", "b"]
        .iter()
        .find_map(|suffix| lower.strip_suffix(suffix))
        .unwrap_or(&lower);
    let (number, multiplier) = split_prefix(body, 1024);
    scale(number, multiplier).ok_or_else(|| UnitError {
        text: text.to_owned(),
        what: "size",
        examples: "64KB, 1MB, 1.5MiB, 9000",
    })
}

fn split_prefix(body: &str, base: u64) -> (&str, u64) {
    let body = body.trim();
    let (number, power) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1),
        Some('m') => (&body[..body.len() - 1], 2),
        Some('g') => (&body[..body.len() - 1], 3),
        Some('t') => (&body[..body.len() - 1], 4),
        _ => (body, 0),
    };
    (number.trim(), base.pow(power))
}

fn scale(number: &str, multiplier: u64) -> Option<u64> {
    if let Ok(integer) = number.parse::<u64>() {
        return integer.checked_mul(multiplier);
    }
    let value: f64 = number.parse().ok()?;
    let scaled = value * multiplier as f64;
    (value.is_finite() && value >= 0.0 && scaled < u64::MAX as f64).then(|| scaled.round() as u64)
}

/// Formats bits per second the way [`parse_rate`] reads them (`100mbit`, `0 (unshaped)`).
#[must_use]
pub fn format_rate(bps: u64) -> String {
    match bps {
        0 => "0 (unshaped)".to_owned(),
        b if b % 1_000_000_000 == 0 => format!("{}gbit", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{}mbit", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{}kbit", b / 1_000),
        b => format!("{b}bit"),
    }
}

/// Formats bytes the way [`parse_size`] reads them (`64KB`, `1MB`, `1500B`).
#[must_use]
pub fn format_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KB", b >> 10),
        b => format!("{b}B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_decimal() {
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("10Gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("800g"), Ok(800_000_000_000));
        assert_eq!(parse_rate("2.5gbps"), Ok(2_500_000_000));
        assert_eq!(parse_rate("1mbit"), Ok(1_000_000));
        assert_eq!(parse_rate("0"), Ok(0));
        assert_eq!(parse_rate("1500"), Ok(1500));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1mbit").is_err());
        assert!(parse_rate("").is_err());
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("64KB"), Ok(65_536));
        assert_eq!(parse_size("64kib"), Ok(65_536));
        assert_eq!(parse_size("64k"), Ok(65_536));
        assert_eq!(parse_size("1MB"), Ok(1 << 20));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5MB"), Ok(1_572_864));
        assert_eq!(parse_size("9000"), Ok(9000));
        assert_eq!(parse_size("9000B"), Ok(9000));
        assert_eq!(parse_size("2GB"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("99999999999T").is_err());
        let error = parse_size("1XB").unwrap_err().to_string();
        assert!(error.contains("`1XB` is not a size"), "{error}");
    }

    #[test]
    fn formatting_round_trips() {
        for bps in [100_000_000, 10_000_000_000, 25_000, 1234] {
            assert_eq!(parse_rate(&format_rate(bps)), Ok(bps));
        }
        for bytes in [65_536, 1 << 20, 3 << 30, 1500] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }
}
