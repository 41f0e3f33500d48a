//! Go-style durations (`90s`, `1h30m`, `1.5h`), the format CEL's `duration()` accepts.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why}; use a Go duration such as 30s, 5m or 1h30m")]
pub struct DurationError {
    input: String,
    why: &'static str,
}

/// Parses a non-negative Go duration string.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        input: input.to_string(),
        why,
    };
    let s = input.strip_prefix('+').unwrap_or(input);
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(err("too large"));
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        for (s, secs) in [
            ("1h", 3600.0),
            ("90s", 90.0),
            ("1h30m", 5400.0),
            ("1.5h", 5400.0),
            ("500ms", 0.5),
            ("0", 0.0),
            ("2m3s", 123.0),
            ("+2s", 2.0),
        ] {
            assert_eq!(parse(s).unwrap().as_secs_f64(), secs, "{s}");
        }
        // Every unit Go knows, down to the nanosecond.
        for (s, d) in [
            ("1500ns", Duration::from_nanos(1500)),
            ("7us", Duration::from_micros(7)),
            ("7µs", Duration::from_micros(7)),
            ("7μs", Duration::from_micros(7)),
            ("1s250ms", Duration::from_millis(1250)),
        ] {
            let got = parse(s).unwrap();
            let off = got.abs_diff(d);
            assert!(off <= Duration::from_nanos(1), "{s}: {got:?}");
        }
    }

    #[test]
    fn each_refusal_says_why_and_the_largest_accepted_value_is_exact() {
        for (s, why) in [
            ("", "empty"),
            ("1", "missing unit"),
            ("1h5", "missing unit"),
            ("1d", "unknown unit"),
            ("-5m", "negative"),
            ("h", "expected a number"),
            ("1..5s", "bad number"),
            ("1000000000001s", "too large"),
            ("1000000000000000s", "too large"),
            (&format!("{}s", "9".repeat(400)), "too large"),
        ] {
            let e = parse(s).unwrap_err();
            assert_eq!(e.why, why, "{s}");
            assert!(e.to_string().contains(why), "{e}");
        }
        assert_eq!(
            parse("1000000000000s").unwrap(),
            Duration::from_secs(1_000_000_000_000)
        );
    }

    #[test]
    fn rejects_malformed_durations() {
        for s in ["", "1", "h", "1d", "-5m", "1h-", "abc", "1..5s"] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}
