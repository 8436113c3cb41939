//! Durations as scenario files write them: `250ms`, `2s`, `1.5s`, `1m`.

use std::time::Duration;

/// The longest duration a scenario may give: a year (365 days). Offsets,
/// down periods and delays are added to the clock's `Instant`s, and a year
/// stays far from any overflow while being longer than any test runs.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Parses `<number><unit>` with unit `ms`, `s` or `m`, at most
/// [`MAX_DURATION`].
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let duration = parse_unbounded(text)?;
    if duration > MAX_DURATION {
        return Err(format!(
            "{:?} is longer than the longest allowed duration, 525600m (365 days)",
            text.trim()
        ));
    }
    Ok(duration)
}

fn parse_unbounded(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit (write e.g. 250ms, 2s or 1m)"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use ms, s or m)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_ms_s_and_m() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
    }

    #[test]
    fn parse_accepts_a_year_and_refuses_longer() {
        assert_eq!(parse("525600m"), Ok(MAX_DURATION));
        assert!(parse("525601m").is_err());
        assert!(parse("10000000000000000000s").is_err());
        assert!(parse("1e999s").is_err());
        assert!(parse(&format!("{}s", "9".repeat(400))).is_err());
    }

    #[test]
    fn parse_rejects_missing_or_unknown_unit() {
        assert!(parse("5").is_err());
        assert!(parse("5h").is_err());
        assert!(parse("ms").is_err());
    }
}
