//! Durations as users write them: `90`, `90s`, `10m`, `1h30m`.

use std::time::Duration;

/// Why a text is not a duration; each variant holds the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("`{0}` is not a duration (use e.g. 90s, 10m, 1h30m)")]
    Malformed(String),
    #[error("`{0}` is too long")]
    TooLong(String),
    #[error("`{0}` has a number without a unit at the end")]
    NoUnit(String),
}

/// Parses a duration; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut digits = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return Err(DurationError::Malformed(text.to_string())),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| DurationError::Malformed(text.to_string()))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| DurationError::TooLong(text.to_string()))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(DurationError::NoUnit(text.to_string()));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("1h30").is_err());
        assert!(parse_duration("").is_err());
    }
}
