//! Date and time helpers shared by the date/time functions: reading any date-like array as
//! UTC instants, local-time conversions in a zone with ClickHouse's DST rules, and the
//! best-effort string parser.

use std::sync::Arc;

use chrono::{
    DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc,
};
use chrono_tz::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Date32Array, TimestampSecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::Result;

pub(crate) const MICROS: i64 = 1_000_000;

pub(crate) fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")
}

/// Days since 1970-01-01 of a date.
pub(crate) fn days_of(d: NaiveDate) -> i32 {
    (d - epoch()).num_days() as i32
}

pub(crate) fn date_of_days(days: i32) -> Option<NaiveDate> {
    epoch().checked_add_signed(Duration::days(days as i64))
}

/// The local wall-clock time of a UTC instant (microseconds) in `tz`.
pub(crate) fn local(tz: Tz, micros: i64) -> Option<NaiveDateTime> {
    let utc = DateTime::<Utc>::from_timestamp_micros(micros)?;
    // UTC (every project's zone by default) without chrono-tz's search of its transitions:
    // a twentieth of a weekly retention's CPU went to that per row at 10M events.
    if tz == Tz::UTC {
        return Some(utc.naive_utc());
    }
    Some(utc.with_timezone(&tz).naive_local())
}

/// Seconds east of UTC of `tz` at a UTC instant (microseconds).
pub(crate) fn offset_at(tz: Tz, micros: i64) -> i64 {
    if tz == Tz::UTC {
        return 0;
    }
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|d| d.with_timezone(&tz).offset().fix().local_minus_utc() as i64)
        .unwrap_or(0)
}

/// The UTC instant (microseconds) of a local wall-clock time in `tz`, as ClickHouse reads
/// it: an ambiguous time (DST ends) is the earlier instant; a time in a DST gap is read with
/// the offset in force after the gap.
pub(crate) fn from_local(tz: Tz, n: NaiveDateTime) -> i64 {
    use chrono::LocalResult;
    if tz == Tz::UTC {
        return n.and_utc().timestamp_micros();
    }
    match tz.from_local_datetime(&n) {
        LocalResult::Single(d) => d.timestamp_micros(),
        LocalResult::Ambiguous(a, b) => a.timestamp_micros().min(b.timestamp_micros()),
        LocalResult::None => {
            let as_utc = n.and_utc().timestamp_micros();
            let first = as_utc - offset_at(tz, as_utc) * MICROS;
            as_utc - offset_at(tz, first) * MICROS
        }
    }
}

/// The sampling step of [`steady_offset`]: no zone changes its offset twice within it.
const OFFSET_STEP_SECS: i64 = 15 * 60;

/// Bounds (µs, about ±7900 years) inside which the integer calendar paths agree with chrono's.
const STEADY_RANGE_MICROS: i64 = 250_000_000_000_000_000;

/// Zones whose offset never changes.
fn fixed_zone(tz: Tz) -> bool {
    matches!(
        tz,
        Tz::UTC | Tz::Etc__UTC | Tz::Etc__UCT | Tz::UCT | Tz::Etc__GMT | Tz::GMT | Tz::Zulu
    )
}

/// `tz`'s offset (seconds east of UTC) if it is the same at every instant of `[lo, hi]`
/// (µs), which lets a whole batch be computed with integer arithmetic instead of a zone
/// lookup per row. Fixed zones answer at once. Others are sampled every 15 minutes, and
/// only while that costs at most `budget` lookups: a transition between two samples would
/// show as a different offset at the next one, since no zone changes its offset twice
/// within 15 minutes.
pub(crate) fn steady_offset(tz: Tz, lo: i64, hi: i64, budget: i64) -> Option<i64> {
    if lo > hi || lo < -STEADY_RANGE_MICROS || hi > STEADY_RANGE_MICROS {
        return None;
    }
    if fixed_zone(tz) {
        return Some(0);
    }
    let step = OFFSET_STEP_SECS * MICROS;
    if (hi - lo) / step > budget {
        return None;
    }
    let first = offset_at(tz, lo);
    let mut t = lo;
    while t < hi {
        t = (t + step).min(hi);
        if offset_at(tz, t) != first {
            return None;
        }
    }
    Some(first)
}

/// The one offset `tz` keeps over a batch of instants (µs) and the `lookback` before its
/// earliest, if it does (see [`steady_offset`]). Sampling the zone may cost at most a
/// quarter of the per-row lookups it saves.
pub(crate) fn batch_offset(tz: Tz, v: &[Option<i64>], lookback: i64) -> Option<i64> {
    let (lo, hi) = v
        .iter()
        .flatten()
        .fold((i64::MAX, i64::MIN), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    steady_offset(tz, lo.saturating_sub(lookback), hi, (v.len() / 4) as i64)
}

/// The local wall-clock times of a batch of UTC instants (µs) in `tz`: what [`local`] gives
/// for each, with one zone lookup per batch instead of one per row when the zone keeps one
/// offset over the batch.
pub(crate) fn locals(tz: Tz, v: &[Option<i64>]) -> Vec<Option<NaiveDateTime>> {
    match batch_offset(tz, v, 0) {
        Some(o) => v
            .iter()
            .map(|m| {
                m.and_then(|m| DateTime::<Utc>::from_timestamp_micros(m + o * MICROS))
                    .map(|d| d.naive_utc())
            })
            .collect(),
        None => v.iter().map(|m| m.and_then(|m| local(tz, m))).collect(),
    }
}

/// (year, month 1-12, day) of a day number since 1970-01-01 (proleptic Gregorian).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The day number since 1970-01-01 of a (year, month 1-12, day).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let (m, d) = (m as i64, d as i64);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(crate) fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_time(NaiveTime::MIN)
}

/// Reads a date/time-like array as UTC microseconds: timestamps as they are, dates as their
/// midnight in `tz`, strings parsed best-effort in `tz` (unparsable: NULL), numbers as
/// Unix seconds.
pub(crate) fn instants(a: &ArrayRef, tz: Tz) -> Result<Vec<Option<i64>>> {
    Ok(match a.data_type() {
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => prim_map::<TimestampSecondType>(a, |v| v * MICROS),
            TimeUnit::Millisecond => prim_map::<TimestampMillisecondType>(a, |v| v * 1000),
            TimeUnit::Microsecond => prim_map::<TimestampMicrosecondType>(a, |v| v),
            TimeUnit::Nanosecond => prim_map::<TimestampNanosecondType>(a, |v| v.div_euclid(1000)),
        },
        DataType::Date32 => a
            .as_primitive::<Date32Type>()
            .iter()
            .map(|v| {
                v.and_then(date_of_days)
                    .map(|d| from_local(tz, midnight(d)))
            })
            .collect(),
        DataType::Date64 => prim_map::<Date64Type>(a, |v| v * 1000),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let s = cast(a, &DataType::Utf8)?;
            s.as_string::<i32>()
                .iter()
                .map(|v| v.and_then(|s| parse_best_effort(s, tz)))
                .collect()
        }
        DataType::Float32 | DataType::Float64 => {
            let f = cast(a, &DataType::Float64)?;
            f.as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(|x| (x * MICROS as f64).floor() as i64))
                .collect()
        }
        DataType::Null => vec![None; a.len()],
        _ => {
            let i = cast(a, &DataType::Int64)?;
            prim_map::<Int64Type>(&i, |v| v.saturating_mul(MICROS))
        }
    })
}

fn prim_map<T>(a: &ArrayRef, f: impl Fn(i64) -> i64) -> Vec<Option<i64>>
where
    T: datafusion::arrow::datatypes::ArrowPrimitiveType<Native = i64>,
{
    a.as_primitive::<T>().iter().map(|v| v.map(&f)).collect()
}

pub(crate) fn seconds_array(v: Vec<Option<i64>>, tz: &str) -> ArrayRef {
    Arc::new(TimestampSecondArray::from(v).with_timezone(tz))
}

/// How a day number outside ClickHouse's `Date` comes back into it. `Date` is a UInt16 of
/// days since 1970-01-01 (to 2149-06-06) and HogQL has no `Date32`, so every date a query
/// computes (an Arrow `Date32` here) is one of those, and ClickHouse brings the ones that
/// fall outside back in one of these ways, depending on what made them (checked against
/// chdb, `tests/slt/functions_datetime_range.slt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DateRange {
    /// The nearest end: text, a DateTime, numbers, and the `toStartOf…`/`toLastDayOf…`
    /// functions (`toMonday('1970-01-02')` is 1970-01-01).
    Clamp,
    /// Modulo 2^16: day and week arithmetic and the day of a DateTime64
    /// (`toDate('1970-01-01') - 1` is 2149-06-06).
    Wrap,
    /// Month, quarter and year arithmetic: 1970-01-01 below the range, modulo 2^16 above.
    Months,
}

/// The last day ClickHouse's `Date` holds (2149-06-06), in days since 1970-01-01.
pub(crate) const DATE_MAX_DAYS: i64 = 65_535;

/// `days` (since 1970-01-01) brought into ClickHouse's `Date` range as `how` says.
pub(crate) fn ch_date(days: i64, how: DateRange) -> i32 {
    let d = match how {
        DateRange::Clamp => days.clamp(0, DATE_MAX_DAYS),
        DateRange::Wrap => days.rem_euclid(DATE_MAX_DAYS + 1),
        DateRange::Months if days < 0 => 0,
        DateRange::Months => days.rem_euclid(DATE_MAX_DAYS + 1),
    };
    d as i32
}

pub(crate) fn date_array(v: Vec<Option<i32>>) -> ArrayRef {
    Arc::new(Date32Array::from(v))
}

/// Builds a timestamp array of `unit` from microseconds.
pub(crate) fn timestamp_array(v: Vec<Option<i64>>, unit: TimeUnit, tz: &str) -> ArrayRef {
    use datafusion::arrow::array::{
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
    };
    match unit {
        TimeUnit::Second => Arc::new(
            TimestampSecondArray::from(
                v.into_iter()
                    .map(|x| x.map(|m| m.div_euclid(MICROS)))
                    .collect::<Vec<_>>(),
            )
            .with_timezone(tz),
        ),
        TimeUnit::Millisecond => Arc::new(
            TimestampMillisecondArray::from(
                v.into_iter()
                    .map(|x| x.map(|m| m.div_euclid(1000)))
                    .collect::<Vec<_>>(),
            )
            .with_timezone(tz),
        ),
        TimeUnit::Microsecond => Arc::new(TimestampMicrosecondArray::from(v).with_timezone(tz)),
        TimeUnit::Nanosecond => Arc::new(
            TimestampNanosecondArray::from(
                v.into_iter()
                    .map(|x| x.and_then(|m| m.checked_mul(1000)))
                    .collect::<Vec<_>>(),
            )
            .with_timezone(tz),
        ),
    }
}

/// Parses a date or date-time the way ClickHouse's `parseDateTimeBestEffort` does for the
/// forms seen in practice: `YYYY-MM-DD`, `YYYY-M-D`, `YYYY/MM/DD`, `YYYYMMDD`, with an
/// optional time `hh:mm[:ss[.fraction]]` after a space or `T`, an optional `Z` or
/// `±hh[:mm]` offset, Unix timestamps (all digits, more than 8 of them), and dates with a
/// month name (`15 March 2024 08:00`, RFC 2822, see [`with_month_name`]). Local times are
/// read in `tz`. Returns UTC microseconds.
pub(crate) fn parse_best_effort(s: &str, tz: Tz) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().any(|b| b.is_ascii_alphabetic())
        && let Some(numeric) = with_month_name(s)
    {
        return parse_best_effort(&numeric, tz);
    }
    if s.len() > 8 && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i64>().ok().map(|v| v * MICROS);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let num = |i: &mut usize, max: usize| -> Option<u32> {
        let start = *i;
        while *i < b.len() && *i - start < max && b[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i == start {
            None
        } else {
            s[start..*i].parse().ok()
        }
    };
    let (y, m, d);
    if b.len() >= 8
        && b[..8].iter().all(u8::is_ascii_digit)
        && b.get(8).is_none_or(|c| !c.is_ascii_digit())
    {
        y = s[0..4].parse::<i32>().ok()?;
        m = s[4..6].parse::<u32>().ok()?;
        d = s[6..8].parse::<u32>().ok()?;
        i = 8;
    } else {
        y = num(&mut i, 4)? as i32;
        if i != 4 {
            return None;
        }
        let sep = *b.get(i)?;
        if !matches!(sep, b'-' | b'/' | b'.') {
            return None;
        }
        i += 1;
        m = num(&mut i, 2)?;
        if b.get(i) != Some(&sep) {
            return None;
        }
        i += 1;
        d = num(&mut i, 2)?;
    }
    let date = NaiveDate::from_ymd_opt(y, m, d)?;
    let mut time = NaiveTime::MIN;
    let mut offset: Option<i64> = None;
    if i < b.len() && (b[i] == b' ' || b[i] == b'T' || b[i] == b't') {
        i += 1;
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let hh = num(&mut i, 2)?;
        if b.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        let mm = num(&mut i, 2)?;
        let mut ss = 0;
        let mut micros = 0u32;
        if b.get(i) == Some(&b':') {
            i += 1;
            ss = num(&mut i, 2)?;
            if b.get(i) == Some(&b'.') || b.get(i) == Some(&b',') {
                i += 1;
                let start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let frac = &s[start..i];
                let mut digits: String = frac.chars().take(6).collect();
                while digits.len() < 6 {
                    digits.push('0');
                }
                micros = digits.parse().ok()?;
            }
        }
        time = NaiveTime::from_hms_micro_opt(hh, mm, ss, micros)?;
    }
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    if i < b.len() {
        match b[i] {
            b'Z' | b'z' => {
                offset = Some(0);
                i += 1;
            }
            b'+' | b'-' => {
                let sign = if b[i] == b'-' { -1 } else { 1 };
                i += 1;
                let hh = num(&mut i, 2)? as i64;
                let mut mm = 0;
                if b.get(i) == Some(&b':') {
                    i += 1;
                }
                if i < b.len() {
                    mm = num(&mut i, 2)? as i64;
                }
                offset = Some(sign * (hh * 3600 + mm * 60));
            }
            _ => return None,
        }
    }
    if i != b.len() {
        return None;
    }
    let n = date.and_time(time);
    Some(match offset {
        Some(off) => n.and_utc().timestamp_micros() - off * MICROS,
        None => from_local(tz, n),
    })
}

/// `15 March 2024 08:00`, `March 15, 2024`, `Fri, 29 Mar 2026 13:45:00 +0000` (RFC 2822,
/// `GMT`/`UTC` for +0000), `March 2024` (the 1st) rewritten as `2024-03-15 08:00` for
/// [`parse_best_effort`]; None when there is no month name where one is expected.
fn with_month_name(s: &str) -> Option<String> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let month_of = |w: &str| {
        let w = w.to_ascii_lowercase();
        (w.len() >= 3 && w.bytes().all(|b| b.is_ascii_alphabetic()))
            .then(|| MONTHS.iter().position(|m| w.starts_with(m)))
            .flatten()
            .map(|i| i as u32 + 1)
    };
    let mut words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    if let Some(first) = words.first() {
        let w = first.to_ascii_lowercase();
        if w.len() >= 3 && DAYS.iter().any(|d| w.starts_with(d)) && month_of(first).is_none() {
            words.remove(0);
        }
    }
    let num = |w: &str| w.parse::<u32>().ok();
    let (d, m, y, rest) = match words.as_slice() {
        [a, b, c, rest @ ..] if num(a).is_some() && month_of(b).is_some() && num(c).is_some() => {
            (num(a)?, month_of(b)?, num(c)?, rest)
        }
        [a, b, c, rest @ ..] if month_of(a).is_some() && num(b).is_some() && num(c).is_some() => {
            (num(b)?, month_of(a)?, num(c)?, rest)
        }
        [a, b] if month_of(a).is_some() && num(b).is_some() => (1, month_of(a)?, num(b)?, &[][..]),
        _ => return None,
    };
    if y < 1000 || d > 31 {
        return None;
    }
    let rest: Vec<&str> = rest
        .iter()
        .map(|w| match w.to_ascii_uppercase().as_str() {
            "GMT" | "UTC" | "UT" => "Z",
            _ => w,
        })
        .collect();
    let mut out = format!("{y:04}-{m:02}-{d:02}");
    if !rest.is_empty() {
        out.push(' ');
        out.push_str(&rest.join(" "));
    }
    Some(out)
}

/// A `YYYY-MM-DD` date, exactly that shape and a real calendar day.
pub(crate) fn iso_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) {
        return None;
    }
    if !digits(8..10) {
        return None;
    }
    NaiveDate::from_ymd_opt(
        s[..4].parse().ok()?,
        s[5..7].parse().ok()?,
        s[8..].parse().ok()?,
    )
}

/// Reads a date as ClickHouse's `toDateOrNull(<string>)` does, as days since 1970-01-01:
/// `YYYYMMDD`, or `YYYY?M?D` (one- or two-digit month and day, any non-digit separators), or
/// `YYYY?MM?DD` followed by `' '` or `'T'`, eight characters of time (not checked) and an
/// optional fraction. ClickHouse does not check the day against the month: a day of 1–31
/// counts on from the first of the month (`2024-02-30` is 2024-03-01); a month or day
/// outside 1–12 / 1–31 gives day 0, and the result is clamped to ClickHouse's `Date` range
/// (1970-01-01 to 2149-06-06). Anything else is NULL.
pub(crate) fn parse_date_text(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    let num = |r: &[u8]| -> Option<u32> {
        (!r.is_empty() && r.iter().all(u8::is_ascii_digit))
            .then(|| r.iter().fold(0u32, |n, &c| n * 10 + u32::from(c - b'0')))
    };
    let sep = |i: usize| b.get(i).is_some_and(|c| !c.is_ascii_digit());
    let (y, m, d) = if b.len() == 8 && b.iter().all(u8::is_ascii_digit) {
        (num(&b[..4])?, num(&b[4..6])?, num(&b[6..])?)
    } else if b.len() >= 19 {
        if !(sep(4) && sep(7) && matches!(b[10], b' ' | b'T')) {
            return None;
        }
        match &b[19..] {
            [] => {}
            [b'.', frac @ ..] if num(frac).is_some() => {}
            _ => return None,
        }
        (num(&b[..4])?, num(&b[5..7])?, num(&b[8..10])?)
    } else {
        // YYYY?M?D with one or two digits each
        if !sep(4) {
            return None;
        }
        let y = num(&b[..4])?;
        let rest = &b[5..];
        let m_len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        // the month's digits, then a separator (not a digit, as the digits were counted)
        if !(1..=2).contains(&m_len) || rest.len() <= m_len {
            return None;
        }
        let day = &rest[m_len + 1..];
        if !(1..=2).contains(&day.len()) {
            return None;
        }
        (y, num(&rest[..m_len])?, num(day)?)
    };
    let days = if (1..=12).contains(&m) && (1..=31).contains(&d) {
        let first = NaiveDate::from_ymd_opt(y as i32, m, 1)?;
        days_of(first) + d as i32 - 1
    } else {
        0
    };
    Some(days.clamp(0, u16::MAX as i32))
}

/// Adds months to a local time, clamping the day to the month's last (ClickHouse).
pub(crate) fn add_months(n: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let total = n.year() as i64 * 12 + n.month0() as i64 + months;
    let y = total.div_euclid(12) as i32;
    let m = total.rem_euclid(12) as u32 + 1;
    let last = last_day(y, m)?;
    let d = n.day().min(last);
    Some(NaiveDate::from_ymd_opt(y, m, d)?.and_time(n.time()))
}

pub(crate) fn last_day(y: i32, m: u32) -> Option<u32> {
    let first_next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)?
    };
    Some(first_next.pred_opt()?.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(m: Option<i64>, tz: Tz) -> String {
        local(tz, m.unwrap()).unwrap().to_string()
    }

    /// Days outside ClickHouse's Date come back in by each rule, at and past both ends
    /// (values from chdb: `toDate('1969-12-31')`, `toDate('1970-01-01') - 1`,
    /// `addMonths(toDate('2149-05-01'), 2)`, `subtractMonths(toDate('1970-03-15'), 3)`).
    #[test]
    fn days_come_into_clickhouses_date_range() {
        use DateRange::*;
        for how in [Clamp, Wrap, Months] {
            for d in [0, 1, 19_723, DATE_MAX_DAYS] {
                assert_eq!(ch_date(d, how), d as i32, "{how:?} keeps {d}");
            }
        }
        assert_eq!(ch_date(-1, Clamp), 0);
        assert_eq!(ch_date(-1, Wrap), 65_535);
        assert_eq!(ch_date(-1, Months), 0);
        assert_eq!(ch_date(65_536, Clamp), 65_535);
        assert_eq!(ch_date(65_536, Wrap), 0);
        assert_eq!(ch_date(65_560, Months), 24);
        assert_eq!(ch_date(-3_653, Wrap), 61_883);
        assert_eq!(ch_date(i64::MIN, Clamp), 0);
        assert_eq!(ch_date(i64::MAX, Wrap), 65_535);
    }

    /// UTC's short cuts answer what chrono-tz's conversions answer, at the range's ends
    /// and across it.
    #[test]
    fn utc_short_cuts_agree_with_the_zone_database() {
        let mut m: i64 = -8_000_000_000_000_000;
        let mut checked = 0;
        while m < 8_000_000_000_000_000 {
            for v in [m, m + 1, m - 1, m + 999_999] {
                let want = DateTime::<Utc>::from_timestamp_micros(v)
                    .map(|d| d.with_timezone(&Tz::UTC).naive_local());
                assert_eq!(local(Tz::UTC, v), want, "{v}");
                assert_eq!(offset_at(Tz::UTC, v), 0);
                if let Some(n) = want {
                    let back = match Tz::UTC.from_local_datetime(&n) {
                        chrono::LocalResult::Single(d) => d.timestamp_micros(),
                        other => panic!("{other:?}"),
                    };
                    assert_eq!(from_local(Tz::UTC, n), back, "{v}");
                    checked += 1;
                }
            }
            m += 86_400_000_000 * 367 + 3_599_999_999;
        }
        assert!(checked > 1000, "{checked}");
    }

    /// ClickHouse's answers (chdb 4.4) for `toModifiedJulianDayOrNull(s)`'s reading.
    #[test]
    fn iso_dates_are_strict() {
        for (s, ok) in [
            ("2024-02-29", true),
            ("1858-11-16", true),
            ("0000-01-01", true),
            ("9999-12-31", true),
            ("2024-02-30", false),
            ("2024-2-3", false),
            ("2024-02-03 10:00:00", false),
            ("20240203", false),
            ("2024/02/03", false),
            ("2024-13-01", false),
            ("nope", false),
        ] {
            assert_eq!(iso_date(s).is_some(), ok, "{s}");
        }
    }

    /// ClickHouse's answers (chdb 4.4) for `toDateOrNull(s)`.
    #[test]
    fn date_text_reads_as_clickhouse_does() {
        let d = |s: &str| parse_date_text(s).map(|n| date_of_days(n).unwrap().to_string());
        for (s, want) in [
            ("2024-02-29", Some("2024-02-29")),
            ("2024-02-30", Some("2024-03-01")),
            ("2024-02-31", Some("2024-03-02")),
            ("2023-02-29", Some("2023-03-01")),
            ("2100-02-29", Some("2100-03-01")),
            ("2024-02-32", Some("1970-01-01")),
            ("2024-13-01", Some("1970-01-01")),
            ("2024-00-10", Some("1970-01-01")),
            ("2024-02-00", Some("1970-01-01")),
            ("20241301", Some("1970-01-01")),
            ("20240230", Some("2024-03-01")),
            ("1969-12-31", Some("1970-01-01")),
            ("2299-12-31", Some("2149-06-06")),
            ("2024-2-3", Some("2024-02-03")),
            ("2024-10-3", Some("2024-10-03")),
            ("2024/02/03", Some("2024-02-03")),
            ("2024a02b03", Some("2024-02-03")),
            ("20240203", Some("2024-02-03")),
            ("2024-02-03T10:00:00", Some("2024-02-03")),
            ("2024-02-30 10:00:00", Some("2024-03-01")),
            ("2024-02-03 10:00:00.123456789", Some("2024-02-03")),
            ("2024-02-03 aa:bb:cc", Some("2024-02-03")),
            ("2024/02/03 10:00:00", Some("2024-02-03")),
            ("nope", None),
            ("2024-01", None),
            (" 2024-02-03", None),
            ("2024-02-3x", None),
            ("2024-02-03x", None),
            ("2024-02-03 ", None),
            ("2024-02-03 10:00", None),
            ("2024-02-03 10:00:00 ", None),
            ("2024-02-03\t10:00:00", None),
            ("2024-02-03 10:00:00Z", None),
            ("2024-02-03 10:00:00.", None),
            ("2024-02-03 10:00:00,5", None),
            ("2024-02-03x10:00:00", None),
            ("2024-2-03 10:00:00", None),
            ("2024-2-3T10:00:00", None),
            ("20240203 10:00:00", None),
            ("2024-002-03", None),
            ("02024-02-03", None),
            ("202402031", None),
            ("2024020", None),
            ("24-02-03", None),
            ("2024--02-03", None),
            ("-2024-02-03", None),
        ] {
            assert_eq!(d(s).as_deref(), want, "{s:?}");
        }
    }

    #[test]
    fn civil_days_round_trip_and_match_chrono() {
        for d in (-800_000..800_000).step_by(37) {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
            let c = date_of_days(d as i32).unwrap();
            assert_eq!((y, m, dd), (c.year() as i64, c.month(), c.day()), "day {d}");
        }
    }

    #[test]
    fn steady_offset_sees_every_transition() {
        let ny: Tz = "America/New_York".parse().unwrap();
        let h = 3_600 * MICROS;
        // 2024-03-10 07:00 UTC: New York moves from -5 to -4.
        let jump = 1_710_054_000 * MICROS;
        assert_eq!(
            steady_offset(ny, jump - 10 * h, jump - 1, 1000),
            Some(-5 * 3600)
        );
        assert_eq!(
            steady_offset(ny, jump, jump + 10 * h, 1000),
            Some(-4 * 3600)
        );
        assert_eq!(steady_offset(ny, jump - 1, jump + 1, 1000), None);
        assert_eq!(steady_offset(ny, jump - 10 * h, jump + 10 * h, 1000), None);
        // Over the sampling budget: no answer rather than a guess.
        assert_eq!(steady_offset(ny, 0, 400 * 24 * h, 100), None);
        assert_eq!(steady_offset(Tz::UTC, i64::MIN / 2, 0, 0), None);
        assert_eq!(steady_offset(Tz::UTC, -h, 10_000 * 24 * h, 0), Some(0));
        // Lord Howe moves by 30 minutes: +11:00 to +10:30 at 2024-04-06 15:00 UTC.
        let lh: Tz = "Australia/Lord_Howe".parse().unwrap();
        let shift = 1_712_415_600 * MICROS;
        assert_eq!(
            steady_offset(lh, shift - h, shift - 1, 1000),
            Some(11 * 3600)
        );
        assert_eq!(
            steady_offset(lh, shift, shift + h, 1000),
            Some(10 * 3600 + 1800)
        );
        assert_eq!(steady_offset(lh, shift - 1, shift + 1, 1000), None);
    }

    #[test]
    fn batch_local_times_match_row_by_row() {
        let h = 3_600 * MICROS;
        let jump = 1_710_054_000 * MICROS;
        for name in [
            "UTC",
            "America/New_York",
            "Asia/Kolkata",
            "Australia/Lord_Howe",
        ] {
            let tz: Tz = name.parse().unwrap();
            for (from, to) in [(-20 * h, -h), (-h, h), (0, 20 * h)] {
                let mut v: Vec<Option<i64>> = (0..1000)
                    .map(|i| Some(jump + from + (to - from) * i / 1000))
                    .collect();
                v.push(None);
                let want: Vec<_> = v.iter().map(|m| m.and_then(|m| local(tz, m))).collect();
                assert!(locals(tz, &v) == want, "{name} {from}..{to}");
            }
        }
    }

    #[test]
    fn parses_common_forms() {
        let ny: Tz = "America/New_York".parse().unwrap();
        assert_eq!(
            show(parse_best_effort("2024-01-02 03:04:05", ny), ny),
            "2024-01-02 03:04:05"
        );
        assert_eq!(
            parse_best_effort("2024-01-02T03:04:05Z", ny),
            Some(1704164645 * MICROS)
        );
        assert_eq!(
            parse_best_effort("2024-01-02T03:04:05.5+01:00", ny),
            Some(1704164645 * MICROS - 3600 * MICROS + 500_000)
        );
        assert_eq!(
            parse_best_effort("1704164645", ny),
            Some(1704164645 * MICROS)
        );
        assert_eq!(
            show(parse_best_effort("2024-1-5", ny), ny),
            "2024-01-05 00:00:00"
        );
        assert_eq!(parse_best_effort("nope", ny), None);
        assert_eq!(parse_best_effort("2024-02-30", ny), None);
        // DST: ambiguous is the earlier instant, a gap is read with the later offset.
        assert_eq!(
            parse_best_effort("2024-11-03 01:30:00", ny),
            Some(1730611800 * MICROS)
        );
        assert_eq!(
            show(parse_best_effort("2024-03-10 02:30:00", ny), ny),
            "2024-03-10 01:30:00"
        );
    }
}
