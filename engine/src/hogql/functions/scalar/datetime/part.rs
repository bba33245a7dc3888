//! Parts of a date or time: `toYear`, `toHour`, `toDayOfWeek` and the rest.

use super::*;

/// A local-time part of a date/time.
#[derive(Debug, Clone, Copy)]
pub(super) enum Part {
    Year,
    Quarter,
    Month,
    DayOfMonth,
    DayOfYear,
    Hour,
    Minute,
    Second,
    /// ClickHouse modes: 0 Monday=1..7, 1 Monday=0..6, 2 Sunday=0..6, 3 Sunday=1..7.
    DayOfWeek(i64),
    YyyyMm,
    YyyyMmDd,
    YyyyMmDdHhMmSs,
    IsoWeek,
    IsoYear,
    Unix,
    /// `toWeek(t, mode)`: the week number in MySQL's modes 0-7 and ClickHouse's 8-15.
    Week(i64),
    /// `toYearWeek(t, mode)`: year * 100 + week, the year the week belongs to.
    YearWeek(i64),
}

impl Part {
    pub(super) fn ret(self) -> DataType {
        match self {
            Part::Year | Part::DayOfYear => DataType::UInt16,
            Part::YyyyMm | Part::YyyyMmDd | Part::Unix | Part::YearWeek(_) => DataType::UInt32,
            Part::YyyyMmDdHhMmSs => DataType::UInt64,
            Part::IsoYear => DataType::UInt16,
            _ => DataType::UInt8,
        }
    }

    /// The part of a local wall-clock time; `Unix` is read from the instant by the caller.
    pub(super) fn of_local(self, l: NaiveDateTime) -> i64 {
        match self {
            Part::Year => l.year() as i64,
            Part::Quarter => l.month0() as i64 / 3 + 1,
            Part::Month => l.month() as i64,
            Part::DayOfMonth => l.day() as i64,
            Part::DayOfYear => l.ordinal() as i64,
            Part::Hour => l.hour() as i64,
            Part::Minute => l.minute() as i64,
            Part::Second => l.second() as i64,
            Part::DayOfWeek(mode) => {
                let from_monday = l.weekday().num_days_from_monday() as i64;
                let from_sunday = l.weekday().num_days_from_sunday() as i64;
                match mode {
                    1 => from_monday,
                    2 => from_sunday,
                    3 => from_sunday + 1,
                    _ => from_monday + 1,
                }
            }
            Part::YyyyMm => l.year() as i64 * 100 + l.month() as i64,
            Part::YyyyMmDd => l.year() as i64 * 10000 + l.month() as i64 * 100 + l.day() as i64,
            Part::YyyyMmDdHhMmSs => {
                (l.year() as i64 * 10000 + l.month() as i64 * 100 + l.day() as i64) * 1_000_000
                    + l.hour() as i64 * 10000
                    + l.minute() as i64 * 100
                    + l.second() as i64
            }
            Part::IsoWeek => l.iso_week().week() as i64,
            Part::IsoYear => l.iso_week().year() as i64,
            Part::Unix => unreachable!("read from the instant"),
            Part::Week(mode) => year_week(l.date(), week_flags(mode)).1,
            Part::YearWeek(mode) => {
                let (y, w) = year_week(l.date(), week_flags(mode) | WEEK_YEAR);
                y * 100 + w
            }
        }
    }
}

pub(super) fn part_call(
    name: &str,
    t: Expr,
    part: Part,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let ret = part.ret();
    let out = ret.clone();
    let k = kernel(move |a, _| {
        let inst = instants(&a[0], tz)?;
        let v: Int64Array = if let Part::Unix = part {
            inst.iter()
                .map(|m| m.map(|m| m.div_euclid(MICROS)))
                .collect()
        } else {
            locals(tz, &inst)
                .into_iter()
                .map(|l| l.map(|l| part.of_local(l)))
                .collect()
        };
        Ok(cast(&v, &out)?)
    });
    Ok(call(
        name,
        format!("{part:?}/{tz_name}"),
        ret,
        nulls_of(&ty),
        vec![t],
        k,
    ))
}

/// Week mode flags (MySQL's, plus ClickHouse's `NEWYEAR_DAY`).
const MONDAY_FIRST: u8 = 1;
/// Weeks count 1-53, a week of the previous/next year taking that year's number.
const WEEK_YEAR: u8 = 2;
/// Week 1 is the first with the week's first day in the year (else: with 4 or more days).
const FIRST_WEEKDAY: u8 = 4;
/// Week 1 is the one with January 1st.
const NEWYEAR_DAY: u8 = 8;

/// A mode (0-15) as flags: in the Sunday-first modes the sense of FIRST_WEEKDAY is flipped.
fn week_flags(mode: i64) -> u8 {
    let mode = (mode & 15) as u8;
    let mut f = mode & 7;
    if f & MONDAY_FIRST == 0 {
        f ^= FIRST_WEEKDAY;
    }
    f | (mode & NEWYEAR_DAY)
}

fn days_in_year(y: i32) -> i64 {
    if NaiveDate::from_ymd_opt(y, 2, 29).is_some() {
        366
    } else {
        365
    }
}

/// Days from the week's first day (Monday or Sunday) to `d`.
fn into_week(d: NaiveDate, monday_first: bool) -> i64 {
    if monday_first {
        d.weekday().num_days_from_monday() as i64
    } else {
        d.weekday().num_days_from_sunday() as i64
    }
}

/// (year, week) of a date under week-mode flags.
pub(super) fn year_week(d: NaiveDate, flags: u8) -> (i64, i64) {
    let monday_first = flags & MONDAY_FIRST != 0;
    let mut week_year = flags & WEEK_YEAR != 0;
    let first_weekday = flags & FIRST_WEEKDAY != 0;
    let day_nr = |x: NaiveDate| x.num_days_from_ce() as i64;
    if flags & NEWYEAR_DAY != 0 {
        let week_start = |x: NaiveDate| day_nr(x) - into_week(x, monday_first);
        if let Some(next) = NaiveDate::from_ymd_opt(d.year() + 1, 1, 1)
            && week_start(next) <= day_nr(d)
        {
            return (d.year() as i64 + 1, 1);
        }
        let Some(jan1) = NaiveDate::from_ymd_opt(d.year(), 1, 1) else {
            return (d.year() as i64, 0);
        };
        return (
            d.year() as i64,
            (day_nr(d) - week_start(jan1)).div_euclid(7) + 1,
        );
    }
    let mut year = d.year();
    let Some(jan1) = NaiveDate::from_ymd_opt(year, 1, 1) else {
        return (year as i64, 0);
    };
    let this = day_nr(d);
    let mut first = day_nr(jan1);
    let mut wd = into_week(jan1, monday_first);
    // Whether the year's first (partial) week is counted in the previous year.
    let late_start = |wd: i64| (first_weekday && wd != 0) || (!first_weekday && wd >= 4);
    if d.month() == 1 && (d.day() as i64) <= 7 - wd {
        if !week_year && late_start(wd) {
            return (year as i64, 0);
        }
        week_year = true;
        year -= 1;
        let n = days_in_year(year);
        first -= n;
        wd = (wd + 53 * 7 - n).rem_euclid(7);
    }
    let days = if late_start(wd) {
        this - (first + 7 - wd)
    } else {
        this - (first - wd)
    };
    if week_year && days >= 52 * 7 {
        let wd2 = (wd + days_in_year(year)).rem_euclid(7);
        if (!first_weekday && wd2 < 4) || (first_weekday && wd2 == 0) {
            return (year as i64 + 1, 1);
        }
    }
    (year as i64, days.div_euclid(7) + 1)
}

#[cfg(test)]
mod week_tests {
    use super::{WEEK_YEAR, week_flags, year_week};
    use chrono::NaiveDate;

    /// (date, [(toWeek, toYearWeek) for modes 0..=9]) from ClickHouse.
    const CASES: &[(&str, [(i64, i64); 10])] = &[
        (
            "2016-12-27",
            [
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (52, 201652),
                (53, 201653),
                (1, 201701),
            ],
        ),
        (
            "2024-01-01",
            [
                (0, 202353),
                (1, 202401),
                (53, 202353),
                (1, 202401),
                (1, 202401),
                (1, 202401),
                (1, 202401),
                (1, 202401),
                (1, 202401),
                (1, 202401),
            ],
        ),
        (
            "2023-01-01",
            [
                (1, 202301),
                (0, 202252),
                (1, 202301),
                (52, 202252),
                (1, 202301),
                (0, 202252),
                (1, 202301),
                (52, 202252),
                (1, 202301),
                (1, 202301),
            ],
        ),
        (
            "2021-01-03",
            [
                (1, 202101),
                (0, 202053),
                (1, 202101),
                (53, 202053),
                (1, 202101),
                (0, 202052),
                (1, 202101),
                (52, 202052),
                (2, 202102),
                (1, 202101),
            ],
        ),
        (
            "2020-12-31",
            [
                (52, 202052),
                (53, 202053),
                (52, 202052),
                (53, 202053),
                (53, 202053),
                (52, 202052),
                (53, 202053),
                (52, 202052),
                (1, 202101),
                (1, 202101),
            ],
        ),
        (
            "2027-01-01",
            [
                (0, 202652),
                (0, 202653),
                (52, 202652),
                (53, 202653),
                (0, 202652),
                (0, 202652),
                (52, 202652),
                (52, 202652),
                (1, 202701),
                (1, 202701),
            ],
        ),
        (
            "2026-12-28",
            [
                (52, 202652),
                (53, 202653),
                (52, 202652),
                (53, 202653),
                (52, 202652),
                (52, 202652),
                (52, 202652),
                (52, 202652),
                (1, 202701),
                (1, 202701),
            ],
        ),
        (
            "2019-12-30",
            [
                (52, 201952),
                (53, 202001),
                (52, 201952),
                (1, 202001),
                (53, 202001),
                (52, 201952),
                (1, 202001),
                (52, 201952),
                (1, 202001),
                (1, 202001),
            ],
        ),
    ];

    #[test]
    fn week_modes_like_clickhouse() {
        for (d, modes) in CASES {
            let date: NaiveDate = d.parse().unwrap();
            for (m, &(week, yw)) in modes.iter().enumerate() {
                let f = week_flags(m as i64);
                assert_eq!(year_week(date, f).1, week, "toWeek({d}, {m})");
                let (y, w) = year_week(date, f | WEEK_YEAR);
                assert_eq!(y * 100 + w, yw, "toYearWeek({d}, {m})");
            }
        }
    }
}
