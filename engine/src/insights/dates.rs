//! PostHog's dates of a date range: an ISO date or date-time (in the project's time zone
//! when it names none), or a relative form such as `-7d`, `-24h`, `-1mStart`, `dStart`,
//! `-2w`, `-1y`, read against `now` as PostHog reads them.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use super::FilterError;

/// `text` as an instant. A date without a time is midnight in `tz`; a date-time without an
/// offset is in `tz`. A relative form moves back from `now` (in `tz`) by its count of hours
/// (`h`), days (`d`), weeks (`w`), months (`m`), quarters (`q`, 13 weeks), years (`y`),
/// minutes (`M`) or seconds (`s`), then `Start`/`End` sets the smaller fields of its unit
/// (`-1dStart` is yesterday 00:00, `mStart` the 1st of this month at the current time of
/// day, as PostHog sets only the fields the unit names).
pub fn parse_date(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, FilterError> {
    let t = text.trim();
    if let Some(d) = absolute(t, tz) {
        return Ok(d);
    }
    let rel = relative(t).ok_or_else(|| {
        FilterError(format!(
            "'{text}' is not a date: use an ISO 8601 date or date-time, or a relative date such as -7d, -24h, -1mStart"
        ))
    })?;
    let local = now.with_timezone(&tz).naive_local();
    let n = rel.number;
    let moved = match rel.kind {
        'h' => Some(local - Duration::hours(n)),
        'd' => Some(local - Duration::days(n)),
        'w' => Some(local - Duration::weeks(n)),
        'q' => Some(local - Duration::weeks(13 * n)),
        'M' => Some(local - Duration::minutes(n)),
        's' => Some(local - Duration::seconds(n)),
        'm' => with_day(local, rel.position, true).and_then(|d| months_back(d, n)),
        'y' => with_day(local, rel.position, false).and_then(|d| months_back(d, 12 * n)),
        _ => unreachable!("relative() reads only these kinds"),
    }
    .ok_or_else(|| FilterError(format!("'{text}' is out of range")))?;
    let moved = match (rel.kind, rel.position) {
        ('h', Some(start)) => moved.with_minute(if start { 0 } else { 59 }).and_then(|d| {
            d.with_second(if start { 0 } else { 59 })
                .and_then(|d| d.with_nanosecond(if start { 0 } else { 999_999_000 }))
        }),
        ('d', Some(start)) => {
            let time = if start {
                chrono::NaiveTime::MIN
            } else {
                chrono::NaiveTime::from_hms_micro_opt(23, 59, 59, 999_999).expect("valid")
            };
            Some(moved.date().and_time(time))
        }
        _ => Some(moved),
    }
    .ok_or_else(|| FilterError(format!("'{text}' is out of range")))?;
    local_to_utc(moved, tz).ok_or_else(|| FilterError(format!("'{text}' is out of range")))
}

/// `text` (as [`parse_date`] reads it, against the context's zone and now) as a HogQL
/// DateTime literal.
pub fn date_literal(text: &str, cx: &super::FilterContext) -> Result<String, FilterError> {
    Ok(instant_literal(parse_date(text, cx.timezone, cx.now)?))
}

/// An instant as a HogQL DateTime literal (microseconds, UTC).
pub fn instant_literal(at: DateTime<Utc>) -> String {
    format!(
        "toDateTime64({}, 6, 'UTC')",
        super::quote(&at.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    )
}

/// An absolute date or date-time, as PostHog's `isoparse` (and `2021-1-1`) read them.
fn absolute(t: &str, tz: Tz) -> Option<DateTime<Utc>> {
    if let Ok(d) = DateTime::parse_from_rfc3339(&t.replace(' ', "T")) {
        return Some(d.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, f) {
            return local_to_utc(d, tz);
        }
    }
    let d = NaiveDate::parse_from_str(t, "%Y-%m-%d").ok()?;
    local_to_utc(d.and_time(chrono::NaiveTime::MIN), tz)
}

fn local_to_utc(d: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    // A time skipped by a DST change reads as the instant an hour later.
    tz.from_local_datetime(&d)
        .earliest()
        .or_else(|| tz.from_local_datetime(&(d + Duration::hours(1))).earliest())
        .map(|x| x.with_timezone(&Utc))
}

struct Relative {
    number: i64,
    kind: char,
    /// `Some(true)`: `Start`, `Some(false)`: `End`.
    position: Option<bool>,
}

/// `-?<number>?<kind>(Start|End)?`, the whole text.
fn relative(t: &str) -> Option<Relative> {
    let rest = t.strip_prefix('-').unwrap_or(t);
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let number = match digits {
        0 => 0,
        _ => rest[..digits]
            .parse::<i64>()
            .ok()
            .filter(|n| *n <= 100_000)?,
    };
    let mut chars = rest[digits..].chars();
    let kind = chars.next()?;
    let kind = match kind {
        'h' | 'd' | 'w' | 'm' | 'q' | 'y' | 's' | 'M' => kind,
        'H' | 'D' | 'W' | 'Q' | 'Y' | 'S' => kind.to_ascii_lowercase(),
        _ => return None,
    };
    let position = match chars.as_str() {
        "" => None,
        "Start" => Some(true),
        "End" => Some(false),
        _ => return None,
    };
    Some(Relative {
        number,
        kind,
        position,
    })
}

/// `Start`/`End` of a month (`day` 1 / the month's last day) or a year (January 1st / the
/// last day of the month, as PostHog sets only `day=31`).
fn with_day(d: NaiveDateTime, position: Option<bool>, month: bool) -> Option<NaiveDateTime> {
    match position {
        None => Some(d),
        Some(true) if month => d.with_day(1),
        Some(true) => d.with_month(1).and_then(|d| d.with_day(1)),
        Some(false) => d.with_day(last_day(d.year(), d.month())),
    }
}

fn last_day(year: i32, month: u32) -> u32 {
    (28..=31)
        .rev()
        .find(|&d| NaiveDate::from_ymd_opt(year, month, d).is_some())
        .unwrap_or(28)
}

/// `n` months earlier, the day clamped to the target month's length.
fn months_back(d: NaiveDateTime, n: i64) -> Option<NaiveDateTime> {
    let total = d.year() as i64 * 12 + d.month0() as i64 - n;
    let (year, month) = (total.div_euclid(12) as i32, total.rem_euclid(12) as u32 + 1);
    let day = d.day().min(last_day(year, month));
    NaiveDate::from_ymd_opt(year, month, day).map(|x| x.and_time(d.time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn absolute_dates_are_in_the_projects_zone_unless_they_say() {
        let ny: Tz = "America/New_York".parse().unwrap();
        let now = at("2024-03-15T12:00:00Z");
        assert_eq!(
            parse_date("2024-01-01", ny, now).unwrap(),
            at("2024-01-01T05:00:00Z")
        );
        assert_eq!(
            parse_date("2024-01-01T10:30:00", ny, now).unwrap(),
            at("2024-01-01T15:30:00Z")
        );
        assert_eq!(
            parse_date("2024-01-01T10:30:00Z", ny, now).unwrap(),
            at("2024-01-01T10:30:00Z")
        );
        assert_eq!(
            parse_date("2024-01-01 10:30:00+01:00", ny, now).unwrap(),
            at("2024-01-01T09:30:00Z")
        );
        assert!(parse_date("yesterday-ish", ny, now).is_err());
        assert!(parse_date("all", ny, now).is_err());
    }

    #[test]
    fn relative_dates_move_back_from_now_as_posthog_does() {
        let utc: Tz = "UTC".parse().unwrap();
        let now = at("2024-03-31T15:45:30Z");
        let p = |s: &str| parse_date(s, utc, now).unwrap();
        assert_eq!(p("-7d"), at("2024-03-24T15:45:30Z"));
        assert_eq!(p("-24h"), at("2024-03-30T15:45:30Z"));
        assert_eq!(p("-1hStart"), at("2024-03-31T14:00:00Z"));
        assert_eq!(p("-1dStart"), at("2024-03-30T00:00:00Z"));
        assert_eq!(p("dStart"), at("2024-03-31T00:00:00Z"));
        assert_eq!(
            p("-1dEnd"),
            at("2024-03-30T23:59:59.999999Z"),
            "the end of yesterday"
        );
        assert_eq!(p("-2w"), at("2024-03-17T15:45:30Z"));
        // A month back from March 31st is February 29th (2024), the day clamped.
        assert_eq!(p("-1m"), at("2024-02-29T15:45:30Z"));
        // `Start` sets the day only: the time of day stays, as in PostHog.
        assert_eq!(p("-1mStart"), at("2024-02-01T15:45:30Z"));
        assert_eq!(p("mStart"), at("2024-03-01T15:45:30Z"));
        assert_eq!(p("yStart"), at("2024-01-01T15:45:30Z"));
        assert_eq!(p("-1y"), at("2023-03-31T15:45:30Z"));
        assert_eq!(p("-1q"), at("2023-12-31T15:45:30Z"));
        assert_eq!(p("-30M"), at("2024-03-31T15:15:30Z"));
        // In the project's zone: the start of "today" in Tokyo.
        let tokyo: Tz = "Asia/Tokyo".parse().unwrap();
        assert_eq!(
            parse_date("dStart", tokyo, now).unwrap(),
            at("2024-03-31T15:00:00Z")
        );
        for bad in ["-7x", "-d7", "-7dStartx", "-9999999999d"] {
            assert!(parse_date(bad, utc, now).is_err(), "{bad}");
        }
    }
}
