//! Durations as scenario files write them: `250ms`, `2s`, `1.5s`, `1m`.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s` or `m`.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
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
    fn parse_rejects_missing_or_unknown_unit() {
        assert!(parse("5").is_err());
        assert!(parse("5h").is_err());
        assert!(parse("ms").is_err());
    }
}
