//! Human units for rates and sizes: `100mbit`, `10gbit`, `800g`, `1.5MB`, `64KiB`, `9000`.

/// Parses a link rate in bits per second: a number with an optional decimal SI prefix (`k`, `m`,
/// `g`, `t`, powers of 1000) and an optional `bit`/`bps`/`b/s` suffix. `0` means unshaped.
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let body = ["bit/s", "bits", "bit", "bps", "b/s"]
        .iter()
        .find_map(|suffix| lower.strip_suffix(suffix))
        .unwrap_or(&lower);
    let (number, multiplier) = split_prefix(body, 1000)?;
    scale(number, multiplier)
        .ok_or_else(|| format!("`{text}` is not a rate (examples: 100mbit, 10gbit, 800g, 0)"))
}

/// Parses a size in bytes: a number with an optional prefix, decimal (`KB`, `MB`, `GB`: powers of
/// 1000) or binary (`KiB`, `MiB`, `GiB`: powers of 1024), and an optional `B`.
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let invalid = || format!("`{text}` is not a size (examples: 800KB, 1MiB, 9000)");
    let (body, base) = if let Some(body) = lower.strip_suffix("ib") {
        (body, 1024)
    } else if let Some(body) = lower.strip_suffix('b') {
        (body, 1000)
    } else {
        (lower.as_str(), 1000)
    };
    let (number, multiplier) = split_prefix(body, base).map_err(|_| invalid())?;
    scale(number, multiplier).ok_or_else(invalid)
}

fn split_prefix(body: &str, base: u64) -> Result<(&str, u64), String> {
    let body = body.trim();
    let (number, power) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1),
        Some('m') => (&body[..body.len() - 1], 2),
        Some('g') => (&body[..body.len() - 1], 3),
        Some('t') => (&body[..body.len() - 1], 4),
        _ => (body, 0),
    };
    Ok((number.trim(), base.pow(power)))
}

fn scale(number: &str, multiplier: u64) -> Option<u64> {
    if let Ok(integer) = number.parse::<u64>() {
        return integer.checked_mul(multiplier);
    }
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * multiplier as f64).round() as u64)
}

/// Formats bits per second the way `parse_rate` reads them.
pub fn format_rate(bps: u64) -> String {
    match bps {
        0 => "0 (unshaped)".to_owned(),
        b if b % 1_000_000_000 == 0 => format!("{}gbit", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{}mbit", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{}kbit", b / 1_000),
        b => format!("{b}bit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("10Gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("800g"), Ok(800_000_000_000));
        assert_eq!(parse_rate("2.5gbps"), Ok(2_500_000_000));
        assert_eq!(parse_rate("0"), Ok(0));
        assert_eq!(parse_rate("1500"), Ok(1500));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1mbit").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("800KB"), Ok(800_000));
        assert_eq!(parse_size("1MiB"), Ok(1_048_576));
        assert_eq!(parse_size("64kib"), Ok(65_536));
        assert_eq!(parse_size("9000"), Ok(9000));
        assert_eq!(parse_size("1.5MB"), Ok(1_500_000));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn rates_round_trip() {
        for bps in [100_000_000, 10_000_000_000, 25_000] {
            assert_eq!(parse_rate(&format_rate(bps)), Ok(bps));
        }
    }
}
