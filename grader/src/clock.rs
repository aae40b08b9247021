//! Times in evidence: parsing what a candidate's ledger or log claims, and
//! formatting Unix seconds for a scorecard. On the `time` crate, so a date
//! that does not exist (month 13, 31 February) is refused. A leaf.

use std::sync::LazyLock;

use regex::Regex;
use time::macros::format_description;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

// ASCII digits only: `\d` also matches other scripts' digits.
static RFC3339: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})?$").expect("static regex")
});

/// Parses Unix seconds or an RFC 3339 time (`2026-01-05T09:00:00Z`, a space
/// for the `T`, fractional seconds and offsets allowed; no offset is UTC).
/// `None` for anything else, including dates and times that do not exist.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<f64>() {
        return n.is_finite().then(|| n.floor() as i64);
    }
    let c = RFC3339.captures(s)?;
    let n = |i: usize| c[i].parse::<u16>().ok();
    let date = Date::from_calendar_date(
        i32::from(n(1)?),
        Month::try_from(u8::try_from(n(2)?).ok()?).ok()?,
        u8::try_from(n(3)?).ok()?,
    )
    .ok()?;
    let time = Time::from_hms(
        u8::try_from(n(4)?).ok()?,
        u8::try_from(n(5)?).ok()?,
        u8::try_from(n(6)?).ok()?,
    )
    .ok()?;
    let offset = match c.get(7).map(|m| m.as_str()).filter(|o| *o != "Z") {
        None => UtcOffset::UTC,
        Some(off) => {
            let sign: i8 = if off.starts_with('-') { -1 } else { 1 };
            let digits: String = off[1..].chars().filter(char::is_ascii_digit).collect();
            let (h, m) = (digits[..2].parse::<i8>().ok()?, digits[2..].parse::<i8>().ok()?);
            // RFC 3339 offsets stop at 23:59 (`time` would take up to 25).
            if h > 23 || m > 59 {
                return None;
            }
            UtcOffset::from_hms(sign * h, sign * m, 0).ok()?
        }
    };
    Some(PrimitiveDateTime::new(date, time).assume_offset(offset).unix_timestamp())
}

/// Formats Unix seconds as RFC 3339 UTC (`2026-01-05T09:00:00Z`); a time
/// outside the years 1–9999 is shown as its seconds, `@<n>`.
pub fn format_time(t: i64) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| d.format(&format).ok())
        .unwrap_or_else(|| format!("@{t}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Option<i64>) {
        assert_eq!(parse_time(input), expect, "{input:?}");
    }

    #[test]
    fn parses_what_ledgers_write() {
        check("1767603600", Some(1_767_603_600));
        check("1767603600.9", Some(1_767_603_600));
        check("2026-01-05T09:00:00Z", Some(1_767_603_600));
        check("2026-01-05 09:00:00", Some(1_767_603_600));
        check("2026-01-05T09:00:00.250Z", Some(1_767_603_600));
        check("2026-01-05T10:00:00+01:00", Some(1_767_603_600));
        check("2026-01-05T08:30:00-0030", Some(1_767_603_600));
        check("1970-01-01T00:00:00Z", Some(0));
        check("2024-02-29T00:00:00Z", Some(1_709_164_800));
    }

    #[test]
    fn refuses_times_that_do_not_exist() {
        check("2026-13-01T00:00:00Z", None);
        check("2026-02-31T00:00:00Z", None);
        check("2025-02-29T00:00:00Z", None);
        check("2026-01-05T24:00:00Z", None);
        check("2026-01-05T09:60:00Z", None);
        check("2026-01-05T09:00:00+25:00", None);
        check("２０２６-01-05T09:00:00Z", None);
        check("yesterday", None);
        // Found by tests/it/fuzz.rs: digits of another script in the offset
        // panicked (a candidate's ledger or log reaches this).
        check("2026-01-05T09:00:00+\u{660}\u{661}:00", None);
        check("\u{660}026-01-05T09:00:00Z", None);
        check("NaN", None);
        check("inf", None);
    }

    #[test]
    fn formats_and_round_trips() {
        assert_eq!(format_time(1_767_603_600), "2026-01-05T09:00:00Z");
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_time(i64::MAX), format!("@{}", i64::MAX));
        for t in [0, 951_782_400, 1_709_164_800, 4_102_444_799] {
            assert_eq!(parse_time(&format_time(t)), Some(t));
        }
    }
}
