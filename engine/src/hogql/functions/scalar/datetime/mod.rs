//! Date and time functions. DateTime arguments compute in their own zone (the planner
//! gives event timestamps the project's zone); a trailing zone argument overrides it, and
//! dates and strings are read in the project's zone.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, Timelike};
use chrono_tz::Tz;
use datafusion::arrow::array::{
    ArrayRef, AsArray, Int64Array, IntervalMonthDayNanoArray, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{Expr, Operator, binary_expr};

use super::time::{
    DATE_MAX_DAYS, DateRange, MICROS, add_months, batch_offset, ch_date, civil_from_days,
    date_array, date_of_days, days_from_civil, days_of, from_local, instants, iso_date, local,
    locals, midnight, parse_date_text, seconds_array, timestamp_array,
};
use super::udf::{Kernel, Nulls, call, kernel};
use super::{FnContext, FunctionError, invalid, lit_str, type_of};

mod arith;
mod format;
mod parse;
mod part;
#[cfg(test)]
mod tests;
mod trunc;

use arith::*;
use format::*;
use part::*;
use trunc::*;

/// Metadata key on interval literals naming the HogQL unit they were written in, so
/// `toStartOfInterval(t, INTERVAL 1 WEEK)` is not read as 7 days.
pub(crate) const INTERVAL_UNIT_KEY: &str = "hogql.interval_unit";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    pub(crate) fn parse(s: &str) -> Option<Unit> {
        Some(match s.to_ascii_lowercase().as_str() {
            "second" | "seconds" | "ss" | "s" => Unit::Second,
            "minute" | "minutes" | "mi" | "n" => Unit::Minute,
            "hour" | "hours" | "hh" | "h" => Unit::Hour,
            "day" | "days" | "dd" | "d" => Unit::Day,
            "week" | "weeks" | "wk" | "ww" => Unit::Week,
            "month" | "months" | "mm" | "m" => Unit::Month,
            "quarter" | "quarters" | "qq" | "q" => Unit::Quarter,
            "year" | "years" | "yyyy" | "yy" => Unit::Year,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Quarter => "quarter",
            Unit::Year => "year",
        }
    }

    fn of_fn_suffix(s: &str) -> Option<Unit> {
        Unit::parse(s.trim_end_matches('s'))
    }

    /// As an Arrow interval of `n` units.
    fn interval(self, n: i64) -> IntervalMonthDayNano {
        let n32 = n as i32;
        match self {
            Unit::Second => IntervalMonthDayNano::new(0, 0, n * 1_000_000_000),
            Unit::Minute => IntervalMonthDayNano::new(0, 0, n * 60_000_000_000),
            Unit::Hour => IntervalMonthDayNano::new(0, 0, n * 3_600_000_000_000),
            Unit::Day => IntervalMonthDayNano::new(0, n32, 0),
            Unit::Week => IntervalMonthDayNano::new(0, n32 * 7, 0),
            Unit::Month => IntervalMonthDayNano::new(n32, 0, 0),
            Unit::Quarter => IntervalMonthDayNano::new(n32 * 3, 0, 0),
            Unit::Year => IntervalMonthDayNano::new(n32 * 12, 0, 0),
        }
    }

    fn is_calendar(self) -> bool {
        !matches!(self, Unit::Second | Unit::Minute | Unit::Hour)
    }
}

fn weekday_name(d: chrono::Weekday) -> &'static str {
    match d {
        chrono::Weekday::Mon => "Monday",
        chrono::Weekday::Tue => "Tuesday",
        chrono::Weekday::Wed => "Wednesday",
        chrono::Weekday::Thu => "Thursday",
        chrono::Weekday::Fri => "Friday",
        chrono::Weekday::Sat => "Saturday",
        chrono::Weekday::Sun => "Sunday",
    }
}

/// 1970-01-01 as a Modified Julian Day.
const MJD_EPOCH_DAYS: i32 = 40587;

fn epoch_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

fn parse_tz(name: &str) -> Result<Tz, FunctionError> {
    name.parse::<Tz>()
        .map_err(|_| invalid(format!("Unknown time zone `{name}`")))
}

/// The zone a call computes in: an explicit zone argument, else the argument's own zone,
/// else the project's.
fn zone(
    arg: &DataType,
    explicit: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<(Tz, String), FunctionError> {
    let name = match explicit {
        Some(e) => {
            lit_str(e).ok_or_else(|| invalid("The time zone argument must be a constant string"))?
        }
        None => match arg {
            DataType::Timestamp(_, Some(tz)) => tz.to_string(),
            _ => ctx.timezone.to_string(),
        },
    };
    Ok((parse_tz(&name)?, name))
}

/// Strings are parsed, and unparsable ones give NULL.
fn nulls_of(ty: &DataType) -> Nulls {
    if matches!(
        ty,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        Nulls::Always
    } else {
        Nulls::FromFirst
    }
}

/// The constant mode argument (the second) of `name`, or `default` without one.
fn const_mode(args: &[Expr], name: &str, default: i64) -> Result<i64, FunctionError> {
    match args.get(1) {
        Some(m) => const_int(m)
            .ok_or_else(|| invalid(format!("The mode argument of `{name}` must be a constant"))),
        None => Ok(default),
    }
}

pub(crate) fn const_int(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(x)) => Some(*x as i64),
            ScalarValue::Int16(Some(x)) => Some(*x as i64),
            ScalarValue::Int32(Some(x)) => Some(*x as i64),
            ScalarValue::Int64(Some(x)) => Some(*x),
            ScalarValue::UInt8(Some(x)) => Some(*x as i64),
            ScalarValue::UInt16(Some(x)) => Some(*x as i64),
            ScalarValue::UInt32(Some(x)) => Some(*x as i64),
            ScalarValue::UInt64(Some(x)) => i64::try_from(*x).ok(),
            ScalarValue::Float64(Some(x)) => Some(x.trunc() as i64),
            _ => None,
        },
        Expr::Cast(c) => const_int(&c.expr),
        Expr::TryCast(c) => const_int(&c.expr),
        _ => None,
    }
}

/// Reads an interval argument (`INTERVAL n UNIT`, i.e. our `toIntervalX(n)` literal).
fn interval_of(e: &Expr) -> Option<(Unit, i64)> {
    match e {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), meta) => {
            let named = meta
                .as_ref()
                .and_then(|m| m.inner().get(INTERVAL_UNIT_KEY))
                .and_then(|u| Unit::parse(u));
            let (m, d, ns) = (v.months as i64, v.days as i64, v.nanoseconds);
            match named {
                Some(Unit::Week) if m == 0 && ns == 0 => Some((Unit::Week, d / 7)),
                Some(Unit::Quarter) if d == 0 && ns == 0 => Some((Unit::Quarter, m / 3)),
                Some(Unit::Year) if d == 0 && ns == 0 => Some((Unit::Year, m / 12)),
                _ => interval_parts(m, d, ns),
            }
        }
        Expr::Literal(ScalarValue::IntervalYearMonth(Some(m)), _) => {
            interval_parts(*m as i64, 0, 0)
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            interval_parts(0, v.days as i64, v.milliseconds as i64 * 1_000_000)
        }
        _ => None,
    }
}

fn interval_parts(m: i64, d: i64, ns: i64) -> Option<(Unit, i64)> {
    match (m, d, ns) {
        (m, 0, 0) if m != 0 => Some((Unit::Month, m)),
        (0, d, 0) if d != 0 => Some((Unit::Day, d)),
        (0, 0, ns) if ns % 3_600_000_000_000 == 0 && ns != 0 => {
            Some((Unit::Hour, ns / 3_600_000_000_000))
        }
        (0, 0, ns) if ns % 60_000_000_000 == 0 && ns != 0 => {
            Some((Unit::Minute, ns / 60_000_000_000))
        }
        (0, 0, ns) if ns % 1_000_000_000 == 0 && ns != 0 => {
            Some((Unit::Second, ns / 1_000_000_000))
        }
        _ => None,
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

fn unit_arg(e: &Expr) -> Result<Unit, FunctionError> {
    let s = lit_str(e).ok_or_else(|| invalid("The unit argument must be a constant string"))?;
    Unit::parse(&s).ok_or_else(|| invalid(format!("Unknown date/time unit `{s}`")))
}

fn ts_type(unit: TimeUnit, tz: &str) -> DataType {
    DataType::Timestamp(unit, Some(tz.into()))
}

/// toDateTime / toDateTime64 / parseDateTimeBestEffort: strings are parsed best-effort
/// (NULL when unparsable, as PostHog's `parseDateTime64BestEffortOrNull`).
fn to_datetime(
    name: &str,
    t: Expr,
    unit: Option<TimeUnit>,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    let is_str = matches!(
        ty,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    // PostHog prints `toDateTime` of a constant 'YYYY-MM-DD hh:mm:ss' or 'YYYY-MM-DD' as
    // ClickHouse's toDateTime (a DateTime, whole seconds); of any other string as
    // parseDateTime64BestEffort(…, 6) or toDateTime64(…, 6) (a DateTime64(6)).
    let whole_seconds = is_str && lit_str(&t).is_some_and(|s| second_shape(&s));
    let unit = unit.unwrap_or(if is_str && !whole_seconds {
        TimeUnit::Microsecond
    } else {
        TimeUnit::Second
    });
    let ret = ts_type(unit, &tz_name);
    let out_tz = tz_name.clone();
    let k = kernel(move |a, _| Ok(timestamp_array(instants(&a[0], tz)?, unit, &out_tz)));
    Ok(call(
        name,
        format!("{unit:?}/{tz_name}"),
        ret,
        nulls_of(&ty),
        vec![t],
        k,
    ))
}

/// 'YYYY-MM-DD hh:mm:ss' or 'YYYY-MM-DD', digits only.
fn second_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let date = |b: &[u8]| b.len() >= 10 && b[4] == b'-' && b[7] == b'-';
    match b.len() {
        10 => date(b) && digits(0..4) && digits(5..7) && digits(8..10),
        19 => {
            date(b)
                && digits(0..4)
                && digits(5..7)
                && digits(8..10)
                && b[10] == b' '
                && b[13] == b':'
                && b[16] == b':'
                && digits(11..13)
                && digits(14..16)
                && digits(17..19)
        }
        _ => false,
    }
}

/// ClickHouse's `toDate` of a number: up to 65 535 it is days, above that Unix seconds (a
/// DateTime, so at most 2106-02-07, in `tz`), and a negative one is 1970-01-01.
fn number_date(x: i64, tz: Tz) -> Option<i32> {
    if x <= DATE_MAX_DAYS {
        return Some(ch_date(x, DateRange::Clamp));
    }
    let secs = x.min(i64::from(u32::MAX));
    local(tz, secs * MICROS).map(|l| days_of(l.date()))
}

fn to_date(t: Expr, tz_arg: Option<&Expr>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    if matches!(ty, DataType::Date32) {
        return Ok(t);
    }
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let in_ty = ty.clone();
    // Into ClickHouse's Date range (`DateRange`): a DateTime64's day wraps, the rest clamp.
    let how = match ty {
        DataType::Timestamp(u, _) if u != TimeUnit::Second => DateRange::Wrap,
        _ => DateRange::Clamp,
    };
    let k = kernel(move |a, _| {
        let v: Vec<Option<i32>> = match in_ty {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let s = cast(&a[0], &DataType::Utf8)?;
                s.as_string::<i32>()
                    .iter()
                    .map(|s| {
                        s.and_then(parse_date_text)
                            .map(|d| ch_date(d.into(), DateRange::Clamp))
                    })
                    .collect()
            }
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => {
                let n = cast(&a[0], &DataType::Int64)?;
                n.as_primitive::<Int64Type>()
                    .iter()
                    .map(|x| number_date(x?, tz))
                    .collect()
            }
            // The same for fractional numbers, the fraction dropped (NaN is 0).
            DataType::Float32 | DataType::Float64 => {
                let f = cast(&a[0], &DataType::Float64)?;
                f.as_primitive::<Float64Type>()
                    .iter()
                    .map(|x| number_date(x?.trunc() as i64, tz))
                    .collect()
            }
            _ => locals(tz, &instants(&a[0], tz)?)
                .into_iter()
                .map(|l| l.map(|l| ch_date(days_of(l.date()).into(), how)))
                .collect(),
        };
        Ok(date_array(v))
    });
    Ok(call(
        "toDate",
        tz_name,
        DataType::Date32,
        nulls_of(&ty),
        vec![t],
        k,
    ))
}

fn now_micros(ctx: &FnContext<'_>) -> i64 {
    ctx.now.timestamp_micros()
}

fn today_days(ctx: &FnContext<'_>, tz: Tz) -> i32 {
    local(tz, now_micros(ctx))
        .map(|l| days_of(l.date()))
        .unwrap_or(0)
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let week_monday = i64::from(ctx.week_start == super::super::WeekStart::Monday);
    let trunc_simple = |name: &str, tr: Trunc, args: Vec<Expr>| {
        let mut it = args.into_iter();
        let t = it.next().expect("arity checked");
        let tz = it.next();
        trunc_call(name, t, tr, tz.as_ref(), ctx)
    };
    let part_simple = |name: &str, p: Part, args: Vec<Expr>| {
        let mut it = args.into_iter();
        let t = it.next().expect("arity checked");
        let tz = it.next();
        part_call(name, t, p, tz.as_ref(), ctx)
    };
    match name {
        // PostHog prints `now()` as `now64(6, <zone>)`: a DateTime64(6).
        "now" => {
            let (_, tz_name) = zone(&DataType::Null, args.first(), ctx)?;
            let us = ctx.now.timestamp_micros();
            Ok(Expr::Literal(
                ScalarValue::TimestampMicrosecond(Some(us), Some(tz_name.into())),
                None,
            ))
        }
        "today" | "yesterday" => {
            let tz = parse_tz(ctx.timezone)?;
            let d = today_days(ctx, tz) - i32::from(name == "yesterday");
            Ok(Expr::Literal(ScalarValue::Date32(Some(d)), None))
        }
        "toStartOfDay" => trunc_simple(name, Trunc::Days(1), args),
        "toStartOfHour" => trunc_simple(name, Trunc::Hour, args),
        "toStartOfMinute" => trunc_simple(name, Trunc::Seconds(60), args),
        // ClickHouse keeps the DateTime64's precision (and refuses a DateTime).
        "toStartOfSecond" => {
            let ty = type_of(&args[0], ctx)?;
            let unit = match &ty {
                DataType::Timestamp(TimeUnit::Second, _) => {
                    return Err(invalid(
                        "Illegal type DateTime of argument for function `toStartOfSecond`, \
                         expected DateTime64",
                    ));
                }
                DataType::Timestamp(unit, _) => *unit,
                _ => TimeUnit::Second,
            };
            let e = trunc_simple(name, Trunc::Seconds(1), args)?;
            let ret = type_of(&e, ctx)?;
            match ret {
                DataType::Timestamp(TimeUnit::Second, tz) if unit != TimeUnit::Second => {
                    Ok(Expr::Cast(datafusion::logical_expr::Cast::new(
                        Box::new(e),
                        DataType::Timestamp(unit, tz),
                    )))
                }
                _ => Ok(e),
            }
        }
        "toStartOfFiveMinutes" | "toStartOfFiveMinute" => {
            trunc_simple(name, Trunc::Seconds(300), args)
        }
        "toStartOfTenMinutes" => trunc_simple(name, Trunc::Seconds(600), args),
        "toStartOfFifteenMinutes" => trunc_simple(name, Trunc::Seconds(900), args),
        "toMonday" => trunc_simple(name, Trunc::Weeks(1, true), args),
        "toStartOfMonth" => trunc_simple(name, Trunc::Months(1), args),
        // The first day of the month (a Date), moved to the month's last day.
        "toLastDayOfMonth" => {
            let first = trunc_simple("toStartOfMonth", Trunc::Months(1), args)?;
            let k: Kernel = Arc::new(|a, _| {
                let d = cast(&a[0], &DataType::Date32)?;
                let v = d
                    .as_primitive::<datafusion::arrow::datatypes::Date32Type>()
                    .iter()
                    .map(|d| {
                        let d = date_of_days(d?)?;
                        let last = super::time::last_day(d.year(), d.month())?;
                        let last = d.with_day(last).map(days_of)?;
                        Some(ch_date(last.into(), DateRange::Clamp))
                    })
                    .collect();
                Ok(date_array(v))
            });
            Ok(call(
                name,
                "",
                DataType::Date32,
                Nulls::FromFirst,
                vec![first],
                k,
            ))
        }
        // DateTime64 only, as ClickHouse: milliseconds since the epoch.
        "toUnixTimestamp64Milli" => {
            let t = args.remove(0);
            let ty = type_of(&t, ctx)?;
            if !matches!(ty, DataType::Timestamp(..)) {
                return Err(invalid(format!(
                    "Illegal type {ty} of argument of function `toUnixTimestamp64Milli`, expected DateTime64"
                )));
            }
            let k: Kernel = Arc::new(|a, _| {
                let m = instants(&a[0], chrono_tz::UTC)?;
                let v: Int64Array = m.into_iter().map(|m| m.map(|m| m / 1000)).collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(
                name,
                "",
                DataType::Int64,
                Nulls::FromFirst,
                vec![t],
                k,
            ))
        }
        "toStartOfQuarter" => trunc_simple(name, Trunc::Months(3), args),
        "toStartOfYear" => trunc_simple(name, Trunc::Years(1), args),
        "toStartOfWeek" => {
            let mode = const_mode(&args, "toStartOfWeek", week_monday)?;
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            trunc_call(name, t, Trunc::Weeks(1, mode % 2 == 1), tz.as_ref(), ctx)
        }
        // The week's last day (a Date): its first (by the mode, as toStartOfWeek) plus 6.
        "toLastDayOfWeek" => {
            let mode = const_mode(&args, "toLastDayOfWeek", week_monday)?;
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            let first = trunc_call(
                "toStartOfWeek",
                t,
                Trunc::Weeks(1, mode % 2 == 1),
                tz.as_ref(),
                ctx,
            )?;
            let k: Kernel = Arc::new(|a, _| {
                let d = cast(&a[0], &DataType::Date32)?;
                let v = d
                    .as_primitive::<datafusion::arrow::datatypes::Date32Type>()
                    .iter()
                    .map(|d| d.map(|d| ch_date(i64::from(d) + 6, DateRange::Clamp)))
                    .collect();
                Ok(date_array(v))
            });
            Ok(call(
                name,
                "",
                DataType::Date32,
                Nulls::FromFirst,
                vec![first],
                k,
            ))
        }
        "toStartOfInterval" => {
            let (unit, n) = interval_of(&args[1]).ok_or_else(|| {
                invalid("The second argument of `toStartOfInterval` must be a constant interval")
            })?;
            if n <= 0 {
                return Err(invalid("Value for the interval must be positive"));
            }
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            trunc_call(name, t, Trunc::from_unit(unit, n), tz.as_ref(), ctx)
        }
        "dateTrunc" | "date_trunc" | "DATE_TRUNC" => {
            let unit = unit_arg(&args[0])?;
            let tr = match unit {
                Unit::Day => Trunc::Days(1),
                u => Trunc::from_unit(u, 1),
            };
            let tz = args.get(2).cloned();
            let t = args.swap_remove(1);
            trunc_call("dateTrunc", t, tr, tz.as_ref(), ctx)
        }
        "toYear" | "YEAR" => part_simple(name, Part::Year, args),
        "toQuarter" | "QUARTER" => part_simple(name, Part::Quarter, args),
        "toMonth" | "MONTH" => part_simple(name, Part::Month, args),
        "toDayOfMonth" | "DAYOFMONTH" | "DAY" => part_simple(name, Part::DayOfMonth, args),
        "toDayOfYear" | "DAYOFYEAR" => part_simple(name, Part::DayOfYear, args),
        "toHour" | "HOUR" => part_simple(name, Part::Hour, args),
        "toMinute" | "MINUTE" => part_simple(name, Part::Minute, args),
        "toSecond" | "SECOND" => part_simple(name, Part::Second, args),
        "toYYYYMM" => part_simple(name, Part::YyyyMm, args),
        "toYYYYMMDD" => part_simple(name, Part::YyyyMmDd, args),
        "toYYYYMMDDhhmmss" => part_simple(name, Part::YyyyMmDdHhMmSs, args),
        "toISOWeek" => part_simple(name, Part::IsoWeek, args),
        "toISOYear" => part_simple(name, Part::IsoYear, args),
        // The month's English name, from its number.
        "monthName" => {
            let m = part_simple("toMonth", Part::Month, args)?;
            let k: Kernel = Arc::new(|a, _| {
                let m = cast(&a[0], &DataType::Int64)?;
                let v: StringArray = m
                    .as_primitive::<Int64Type>()
                    .iter()
                    .map(|m| m.and_then(|m| format::MONTHS.get((m - 1) as usize).copied()))
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(name, "", DataType::Utf8, Nulls::FromFirst, vec![m], k))
        }
        "toUnixTimestamp" => part_simple(name, Part::Unix, args),
        "toDayOfWeek" | "DAYOFWEEK" => {
            let mode = const_mode(&args, "toDayOfWeek", 0)?;
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            part_call(name, t, Part::DayOfWeek(mode), tz.as_ref(), ctx)
        }
        // toWeek(t[, mode[, zone]]), toYearWeek: mode 0 by default, not the project's week.
        "toWeek" | "toYearWeek" => {
            let mode = const_mode(&args, name, 0)?;
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            let part = if name == "toWeek" {
                Part::Week(mode)
            } else {
                Part::YearWeek(mode)
            };
            part_call(name, t, part, tz.as_ref(), ctx)
        }
        "toDate" | "to_date" | "DATE" => {
            let tz = args.get(1).cloned();
            to_date(args.swap_remove(0), tz.as_ref(), ctx)
        }
        // dateName(part, t[, zone]): the part as text (month and weekday as English names,
        // week the ISO week); hour/minute/second only of a DateTime.
        "dateName" => {
            let part = lit_str(&args[0]).ok_or_else(|| {
                invalid("The first argument of `dateName` must be a constant string")
            })?;
            const PARTS: [&str; 10] = [
                "year",
                "quarter",
                "month",
                "week",
                "dayofyear",
                "day",
                "weekday",
                "hour",
                "minute",
                "second",
            ];
            if !PARTS.contains(&part.as_str()) {
                return Err(invalid(format!(
                    "Invalid date part {part} for function dateName"
                )));
            }
            let t = args.swap_remove(1);
            let ty = type_of(&t, ctx)?;
            let timed = matches!(ty, DataType::Timestamp(..));
            if !timed && matches!(part.as_str(), "hour" | "minute" | "second") {
                return Err(invalid(format!(
                    "Illegal argument of type {ty} for the {part} of function dateName"
                )));
            }
            let tz_arg = args.get(1).cloned();
            let (tz, tz_name) = zone(&ty, tz_arg.as_ref(), ctx)?;
            let key = format!("{part}/{tz_name}");
            let k = kernel(move |a, _| {
                let v: datafusion::arrow::array::StringArray = instants(&a[0], tz)?
                    .into_iter()
                    .map(|m| {
                        let l = local(tz, m?)?;
                        Some(match part.as_str() {
                            "year" => l.year().to_string(),
                            "quarter" => ((l.month() - 1) / 3 + 1).to_string(),
                            "month" => chrono::Month::try_from(l.month() as u8)
                                .ok()?
                                .name()
                                .to_string(),
                            "week" => l.iso_week().week().to_string(),
                            "dayofyear" => l.ordinal().to_string(),
                            "day" => l.day().to_string(),
                            "weekday" => weekday_name(l.weekday()).to_string(),
                            "hour" => l.hour().to_string(),
                            "minute" => l.minute().to_string(),
                            _ => l.second().to_string(),
                        })
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(name, key, DataType::Utf8, nulls_of(&ty), vec![t], k))
        }
        // Days since 1858-11-17 (Int32), and back.
        "toModifiedJulianDay" => {
            let s = args.swap_remove(0);
            let t = type_of(&s, ctx)?;
            if !matches!(
                t,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
            ) {
                return Err(invalid(format!(
                    "The argument of function `toModifiedJulianDay` must be a String, got {t}"
                )));
            }
            // ClickHouse reads only `YYYY-MM-DD` here, a real calendar date of any year
            // (not the `Date` range): anything else is NULL.
            let k = kernel(|a, _| {
                let s = cast(&a[0], &DataType::Utf8)?;
                let v: datafusion::arrow::array::Int32Array = s
                    .as_string::<i32>()
                    .iter()
                    .map(|s| s.and_then(iso_date).map(|d| days_of(d) + MJD_EPOCH_DAYS))
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(name, "", DataType::Int32, Nulls::Always, vec![s], k))
        }
        "fromModifiedJulianDay" => {
            let n = args.swap_remove(0);
            let t = type_of(&n, ctx)?;
            if !(t.is_integer() || t == DataType::Null) {
                return Err(invalid(format!(
                    "Illegal type {t} of argument of function `fromModifiedJulianDay`, expected an integer"
                )));
            }
            let k = kernel(move |a, _| {
                let n = cast(&a[0], &DataType::Int64)?;
                let v: Vec<Option<i32>> = n
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|x| {
                        x.and_then(|x| x.checked_sub(i64::from(MJD_EPOCH_DAYS)))
                            .and_then(|d| i32::try_from(d).ok())
                    })
                    .collect();
                Ok(date_array(v))
            });
            Ok(call(name, "", DataType::Date32, nulls_of(&t), vec![n], k))
        }
        "timeZoneOf" => match type_of(&args[0], ctx)? {
            DataType::Timestamp(_, Some(tz)) => {
                Ok(Expr::Literal(ScalarValue::Utf8(Some(tz.to_string())), None))
            }
            t => Err(invalid(format!(
                "Illegal type {t} of argument of function `timeZoneOf`, expected a DateTime"
            ))),
        },
        // Seconds east of UTC at that instant in the value's zone.
        "timeZoneOffset" => {
            let t = args.swap_remove(0);
            let ty = type_of(&t, ctx)?;
            if !matches!(ty, DataType::Timestamp(..)) {
                return Err(invalid(format!(
                    "Illegal type {ty} of argument of function `timeZoneOffset`, expected a DateTime"
                )));
            }
            let (tz, tz_name) = zone(&ty, None, ctx)?;
            let k = kernel(move |a, _| {
                use chrono::Offset;
                let v: datafusion::arrow::array::Int32Array = instants(&a[0], tz)?
                    .into_iter()
                    .map(|m| {
                        let utc = chrono::DateTime::<chrono::Utc>::from_timestamp_micros(m?)?;
                        Some(utc.with_timezone(&tz).offset().fix().local_minus_utc())
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(
                name,
                tz_name,
                DataType::Int32,
                nulls_of(&ty),
                vec![t],
                k,
            ))
        }
        // The Monday of ISO week 1 of the date's ISO year.
        "toStartOfISOYear" => {
            let d = to_date(args.swap_remove(0), None, ctx)?;
            let k = kernel(move |a, _| {
                let c = cast(&a[0], &DataType::Int32)?;
                let v: Vec<Option<i32>> = c
                    .as_primitive::<datafusion::arrow::datatypes::Int32Type>()
                    .iter()
                    .map(|x| {
                        let date =
                            epoch_date().checked_add_signed(Duration::days(i64::from(x?)))?;
                        let start = NaiveDate::from_isoywd_opt(
                            date.iso_week().year(),
                            1,
                            chrono::Weekday::Mon,
                        )?;
                        Some(ch_date(days_of(start).into(), DateRange::Clamp))
                    })
                    .collect();
                Ok(date_array(v))
            });
            Ok(call(
                name,
                "",
                DataType::Date32,
                Nulls::FromArgs,
                vec![d],
                k,
            ))
        }
        "toDateTime" => {
            let tz = args.get(1).cloned();
            to_datetime(name, args.swap_remove(0), None, tz.as_ref(), ctx)
        }
        "parseDateTimeBestEffort"
        | "parseDateTimeBestEffortOrNull"
        | "parseDateTime64BestEffort"
        | "parseDateTime64BestEffortOrNull" => {
            let tz = args.get(1).cloned();
            to_datetime(
                name,
                args.swap_remove(0),
                Some(TimeUnit::Microsecond),
                tz.as_ref(),
                ctx,
            )
        }
        "toDateTime64" => {
            let unit = match args.get(1) {
                Some(p) => match const_int(p) {
                    Some(0) => TimeUnit::Second,
                    Some(1..=3) => TimeUnit::Millisecond,
                    Some(4..=6) => TimeUnit::Microsecond,
                    Some(7..=9) => TimeUnit::Nanosecond,
                    _ => return Err(invalid("The precision of `toDateTime64` must be 0 to 9")),
                },
                None => TimeUnit::Microsecond,
            };
            let tz = args.get(2).cloned();
            to_datetime(name, args.swap_remove(0), Some(unit), tz.as_ref(), ctx)
        }
        "fromUnixTimestamp" | "FROM_UNIXTIME" => {
            let tz = args.get(1).cloned();
            to_datetime(
                name,
                args.swap_remove(0),
                Some(TimeUnit::Second),
                tz.as_ref(),
                ctx,
            )
        }
        "toTimeZone" | "toTimezone" => {
            let tz_name = lit_str(&args[1])
                .ok_or_else(|| invalid("The time zone argument must be a constant string"))?;
            parse_tz(&tz_name)?;
            let t = args.swap_remove(0);
            let ty = type_of(&t, ctx)?;
            let unit = match ty {
                DataType::Timestamp(u, _) => u,
                _ => TimeUnit::Second,
            };
            let t = if matches!(ty, DataType::Timestamp(..)) {
                t
            } else {
                to_datetime("toDateTime", t, Some(unit), None, ctx)?
            };
            Ok(Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(t),
                ts_type(unit, &tz_name),
            )))
        }
        "dateDiff" | "date_diff" | "DATE_DIFF" | "timestampDiff" | "TIMESTAMP_DIFF" => {
            let unit = unit_arg(&args[0])?;
            let tz = args.get(3).cloned();
            let b = args.swap_remove(2);
            let a = args.swap_remove(1);
            date_diff(unit, a, b, tz.as_ref(), ctx)
        }
        "age" => {
            let unit = unit_arg(&args[0])?;
            let tz = args.get(3).cloned();
            let b = args.swap_remove(2);
            let a = args.swap_remove(1);
            age(unit, a, b, tz.as_ref(), ctx)
        }
        // timeSlot: the half hour the instant is in (on the Unix clock, so in a zone with a
        // quarter-hour offset a slot starts at :15/:45), as a DateTime.
        "timeSlot" => {
            let ty = type_of(&args[0], ctx)?;
            if !matches!(ty, DataType::Timestamp(..) | DataType::Null) {
                return Err(invalid(format!(
                    "Illegal argument of type {ty} for function `timeSlot`"
                )));
            }
            let (tz, tz_name) = zone(&ty, args.get(1), ctx)?;
            let out_tz = tz_name.clone();
            let k = kernel(move |a, _| {
                let v = instants(&a[0], tz)?
                    .into_iter()
                    .map(|m| m.map(|m| m.div_euclid(MICROS).div_euclid(1800) * 1800))
                    .collect();
                Ok(seconds_array(v, &out_tz))
            });
            Ok(call(
                name,
                tz_name.clone(),
                ts_type(TimeUnit::Second, &tz_name),
                nulls_of(&ty),
                vec![args.swap_remove(0)],
                k,
            ))
        }
        "timeSlots" => time_slots(args, ctx),
        "parseDateTime" => parse::parse_date_time(args, ctx),
        // Time windows: tumble = [toStartOfInterval(t, i), + i); hop = the window of width w
        // ending at the end of t's hop interval h. Of a DateTime only, as ClickHouse.
        "tumble" | "tumbleStart" | "tumbleEnd" | "hop" | "hopStart" | "hopEnd" => {
            let ty = type_of(&args[0], ctx)?;
            if !matches!(ty, DataType::Timestamp(TimeUnit::Second, _)) {
                return Err(invalid(format!(
                    "Illegal type {ty} of the first argument of function `{name}`, expected \
                     DateTime"
                )));
            }
            let hop = name.starts_with("hop");
            let n_iv = if hop { 2 } else { 1 };
            if args.len() > n_iv + 2 {
                return Err(FunctionError::Arity(format!(
                    "Function `{name}` expects at most {} arguments, found {}",
                    n_iv + 2,
                    args.len()
                )));
            }
            if args.len() < n_iv + 1 {
                return Err(FunctionError::Arity(format!(
                    "Function `{name}` expects at least {} arguments, found {}",
                    n_iv + 1,
                    args.len()
                )));
            }
            for iv in &args[1..=n_iv] {
                if interval_of(iv).is_none() {
                    return Err(invalid(format!(
                        "The interval arguments of `{name}` must be constant intervals"
                    )));
                }
            }
            let t = args[0].clone();
            let step = args[1].clone();
            let mut trunc_args = vec![t, step.clone()];
            if let Some(tz) = args.get(n_iv + 1) {
                trunc_args.push(tz.clone());
            }
            let start = translate("toStartOfInterval", trunc_args, ctx)?;
            let (start, end) = if hop {
                let end = translate("dateAdd", vec![start, step], ctx)?;
                let start = translate("dateSub", vec![end.clone(), args[2].clone()], ctx)?;
                (start, end)
            } else {
                let end = translate("dateAdd", vec![start.clone(), step], ctx)?;
                (start, end)
            };
            Ok(match name {
                "tumbleStart" | "hopStart" => start,
                "tumbleEnd" | "hopEnd" => end,
                _ => datafusion::functions::core::expr_fn::named_struct(vec![
                    Expr::Literal(ScalarValue::Utf8(Some("c0".into())), None),
                    start,
                    Expr::Literal(ScalarValue::Utf8(Some("c1".into())), None),
                    end,
                ]),
            })
        }
        // The clock of the query (seconds), as `now()` but a DateTime.
        "nowInBlock" => {
            let (_, tz_name) = zone(&DataType::Null, args.first(), ctx)?;
            Ok(Expr::Literal(
                ScalarValue::TimestampSecond(Some(ctx.now.timestamp()), Some(tz_name.into())),
                None,
            ))
        }
        "dateAdd" | "date_add" | "DATE_ADD" | "dateSub" | "date_sub" | "DATE_SUB"
        | "timeStampAdd" | "timeStampSub" => {
            let sign = if name.to_ascii_lowercase().contains("sub") {
                -1
            } else {
                1
            };
            if args.len() == 3 {
                let unit = unit_arg(&args[0])?;
                let t = args.swap_remove(2);
                let n = args.swap_remove(1);
                return add_call(name, t, n, unit, sign, ctx);
            }
            // (t, INTERVAL) or (INTERVAL, t)
            let (t, iv) = if matches!(type_of(&args[0], ctx)?, DataType::Interval(_)) {
                (args.swap_remove(1), args.swap_remove(0))
            } else {
                (args.swap_remove(0), args.swap_remove(0))
            };
            match interval_of(&iv) {
                Some((unit, n)) => add_call(name, t, super::lit_i64(n), unit, sign, ctx),
                None => Ok(binary_expr(
                    t,
                    if sign > 0 {
                        Operator::Plus
                    } else {
                        Operator::Minus
                    },
                    iv,
                )),
            }
        }
        _ if name.starts_with("add") || name.starts_with("subtract") => {
            let (sign, rest) = match name.strip_prefix("add") {
                Some(r) => (1, r),
                None => (-1, name.strip_prefix("subtract").unwrap_or_default()),
            };
            let unit =
                Unit::of_fn_suffix(rest).ok_or_else(|| FunctionError::Unknown(name.to_string()))?;
            let n = args.swap_remove(1);
            let t = args.swap_remove(0);
            add_call(name, t, n, unit, sign, ctx)
        }
        _ if name.starts_with("toInterval") => {
            let unit = Unit::parse(&name["toInterval".len()..])
                .ok_or_else(|| FunctionError::Unknown(name.to_string()))?;
            Ok(to_interval(unit, args.swap_remove(0)))
        }
        "formatDateTime" | "DATE_FORMAT" => {
            let tz = args.get(2).cloned();
            let fmt = args.swap_remove(1);
            format_call(args.swap_remove(0), &fmt, tz.as_ref(), ctx)
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

/// `timeSlots(start, duration[, size])`: the starts of the `size`-second slots (1800 by
/// default, on the Unix clock) from the one `start` is in to the one `start + duration` is
/// in, for a DateTime start (a DateTime64's Decimal arithmetic is not supported).
fn time_slots(args: Vec<Expr>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    use datafusion::arrow::array::{Array as _, ListBuilder, TimestampSecondBuilder};
    let ty = type_of(&args[0], ctx)?;
    let tz_name = match &ty {
        DataType::Timestamp(TimeUnit::Second, tz) => tz
            .as_deref()
            .map(str::to_string)
            .unwrap_or_else(|| ctx.timezone.to_string()),
        DataType::Null => ctx.timezone.to_string(),
        t => {
            return Err(invalid(format!(
                "Illegal type {t} of the first argument of function `timeSlots`: hedgerow \
                 supports a DateTime"
            )));
        }
    };
    for (i, a) in args.iter().enumerate().skip(1) {
        let t = type_of(a, ctx)?;
        if !(t.is_integer() || t == DataType::Null) {
            return Err(invalid(format!(
                "Illegal type {t} of argument {} of function `timeSlots`, expected an integer",
                i + 1
            )));
        }
    }
    let size = match args.get(2) {
        Some(e) => const_int(e)
            .ok_or_else(|| invalid("The third argument of `timeSlots` must be a constant"))?,
        None => 1800,
    };
    if size <= 0 {
        return Err(invalid(
            "Third argument for function `timeSlots` must be greater than zero",
        ));
    }
    let item = Arc::new(datafusion::arrow::datatypes::Field::new(
        "item",
        ts_type(TimeUnit::Second, &tz_name),
        true,
    ));
    let ret = DataType::List(item.clone());
    let out_tz = tz_name.clone();
    let k = kernel(move |a, rows| {
        let tz = parse_tz(&out_tz)
            .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?;
        let mut out = crate::hogql::functions::budget::Output::new("timeSlots");
        let start = instants(&a[0], tz)?;
        let dur = cast(&a[1], &DataType::Int64)?;
        let dur = dur.as_primitive::<Int64Type>();
        let mut b = ListBuilder::new(TimestampSecondBuilder::new().with_timezone(out_tz.as_str()))
            .with_field(item.clone());
        for (r, st) in start.iter().enumerate().take(rows) {
            match *st {
                Some(m) if !dur.is_null(r) => {
                    let s = m.div_euclid(MICROS);
                    let end = s.saturating_add(dur.value(r).max(0));
                    let mut t = s.div_euclid(size) * size;
                    while t <= end {
                        out.take(8)?;
                        b.values().append_value(t);
                        t += size;
                    }
                    b.append(true);
                }
                _ => b.append(false),
            }
        }
        Ok(Arc::new(b.finish()) as ArrayRef)
    });
    // Volatile: a small duration can make a large array, built per batch under the budget.
    Ok(super::udf::call_with(
        "timeSlots",
        format!("{size}/{tz_name}"),
        ret,
        Nulls::FromArgs,
        args.into_iter().take(2).collect(),
        k,
        datafusion::logical_expr::Volatility::Volatile,
    ))
}
