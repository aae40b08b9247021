//! Times as the web app reads and shows them, with the `time` crate: RFC 3339
//! from the API, `datetime-local` from forms, `YYYY-MM-DD HH:MM UTC` for
//! people. All stored times are Unix milliseconds.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

fn to_ms(t: OffsetDateTime) -> Option<i64> {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

fn from_ms(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

/// Parses RFC 3339 text (`2030-01-31T17:00:00Z`, `...+01:00`, fractions) to
/// Unix milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    OffsetDateTime::parse(s.trim(), &Rfc3339).ok().and_then(to_ms)
}

/// Parses a `datetime-local` value (`YYYY-MM-DDTHH:MM[:SS[.frac]]`) as UTC,
/// to Unix milliseconds.
pub fn parse_datetime_local(s: &str) -> Option<i64> {
    let s = s.trim();
    let formats = [
        format_description!("[year]-[month]-[day]T[hour]:[minute]"),
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]"),
    ];
    formats
        .iter()
        .find_map(|f| PrimitiveDateTime::parse(s, *f).ok())
        .and_then(|t| to_ms(t.assume_utc()))
}

/// Unix ms as a `datetime-local` value in UTC (`2026-11-29T10:30`).
pub fn datetime_local(ms: i64) -> String {
    match from_ms(ms) {
        Some(t) => t
            .format(format_description!("[year]-[month]-[day]T[hour]:[minute]"))
            .unwrap_or_default(),
        None => String::new(),
    }
}

/// Unix ms as RFC 3339 in UTC (`2026-11-29T10:31:02.5Z`), for machines.
pub fn rfc3339(ms: i64) -> String {
    from_ms(ms).and_then(|t| t.format(&Rfc3339).ok()).unwrap_or_default()
}

/// Unix ms for people: `2026-11-29 10:31 UTC`.
/// A stored time as its UTC day only (`YYYY-MM-DD`): what blind review
/// shows, so an exact time cannot be matched to a name.
pub fn utc_day(ms: i64) -> String {
    match from_ms(ms).and_then(|t| t.format(format_description!("[year]-[month]-[day]")).ok()) {
        Some(s) => s,
        None => ms.to_string(),
    }
}

/// A stored time (Unix ms) as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(ms: i64) -> String {
    match from_ms(ms).and_then(|t| {
        t.format(format_description!("[year]-[month]-[day] [hour]:[minute] UTC")).ok()
    }) {
        Some(s) => s,
        None => ms.to_string(),
    }
}

/// `1h02m05s`, `2m05s` or `5s`.
pub fn span(secs: i64) -> String {
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339() {
        let check = |input: &str, expect: Option<i64>| {
            assert_eq!(parse_rfc3339(input), expect, "{input:?}")
        };
        check("1970-01-01T00:00:00Z", Some(0));
        check("1970-01-01T01:00:00+01:00", Some(0));
        check("2026-11-18T11:06:40.5Z", Some(1_795_000_000_500));
        check("tomorrow", None);
        // A multibyte character where a byte-sliced parser split a char.
        check("2030-01-31T17:00:00+00é0", None);
        check("2030-01-31T17:00:0é", None);
        check("2030-01-3é17:00:00Z", None);
        check("é030-01-31T17:00:00Z", None);
        check("2030-01-31T17:00:00+0é:00", None);
        check("2030-02-30T17:00:00Z", None);
        check("", None);
    }

    #[test]
    fn datetime_local_round_trips_in_utc() {
        let check = |input: &str, expect: Option<i64>| {
            assert_eq!(parse_datetime_local(input), expect, "{input}")
        };
        check("1970-01-01T00:00", Some(0));
        check("2026-11-29T10:30", Some(1_795_948_200_000));
        check("2024-02-29T23:59:30", Some(1_709_251_170_000));
        check("2023-02-29T10:00", None);
        check("2026-13-01T10:00", None);
        check("2026-11-29 10:30", None);
        check("2026-11-29T10:3é", None);
        check("tomorrow", None);
        assert_eq!(datetime_local(1_795_948_200_000), "2026-11-29T10:30");
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_795_000_000_000), "2026-11-18 11:06 UTC");
    }
}
