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
    DataType, Int64Type, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{Expr, Operator, binary_expr};

use super::time::{
    MICROS, add_months, batch_offset, civil_from_days, date_array, date_of_days, days_from_civil,
    days_of, from_local, instants, local, locals, midnight, parse_date, seconds_array,
    timestamp_array,
};
use super::udf::{Kernel, Nulls, call};
use super::{FnContext, FunctionError, invalid, lit_str, type_of};

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

fn kernel(f: impl Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync + 'static) -> Kernel {
    Arc::new(f)
}

/// What a truncation rounds down to.
#[derive(Debug, Clone, Copy)]
enum Trunc {
    /// Multiples of n seconds since the epoch.
    Seconds(i64),
    /// toStartOfHour: drops the local minutes and seconds.
    Hour,
    /// n-hour steps from the local midnight.
    Hours(i64),
    /// Multiples of n local days since the epoch (a DateTime at local midnight).
    Days(i64),
    /// Weeks starting on Monday (true) or Sunday; n-week steps from 1970-01-05 (a Date).
    Weeks(i64, bool),
    /// n-month steps from 1970-01 (a Date).
    Months(i64),
    /// Years that are multiples of n (a Date).
    Years(i64),
}

impl Trunc {
    fn gives_date(self) -> bool {
        matches!(self, Trunc::Weeks(..) | Trunc::Months(_) | Trunc::Years(_))
    }

    fn from_unit(unit: Unit, n: i64) -> Trunc {
        match unit {
            Unit::Second => Trunc::Seconds(n),
            Unit::Minute => Trunc::Seconds(n * 60),
            Unit::Hour if n == 1 => Trunc::Hour,
            Unit::Hour => Trunc::Hours(n),
            Unit::Day => Trunc::Days(n),
            Unit::Week => Trunc::Weeks(n, true),
            Unit::Month => Trunc::Months(n),
            Unit::Quarter => Trunc::Months(n * 3),
            Unit::Year => Trunc::Years(n),
        }
    }

    /// Seconds (DateTime) or days (Date) of the start of the period holding `micros`.
    fn apply(self, tz: Tz, micros: i64) -> Option<i64> {
        let secs = micros.div_euclid(MICROS);
        let l = local(tz, micros)?;
        Some(match self {
            Trunc::Seconds(n) => secs.div_euclid(n) * n,
            Trunc::Hour => secs - (l.minute() as i64 * 60 + l.second() as i64),
            Trunc::Hours(n) => {
                let h = (l.hour() as i64 / n) * n;
                let t = midnight(l.date()) + Duration::hours(h);
                from_local(tz, t).div_euclid(MICROS)
            }
            Trunc::Days(n) => {
                let d = days_of(l.date()) as i64;
                let d = d.div_euclid(n) * n;
                from_local(tz, midnight(date_of_days(d as i32)?)).div_euclid(MICROS)
            }
            Trunc::Weeks(n, monday) => {
                let d = days_of(l.date()) as i64;
                // 1970-01-05 was a Monday, 1970-01-04 a Sunday.
                let base = if monday { 4 } else { 3 };
                let w = (d - base).div_euclid(7);
                base + w.div_euclid(n) * n * 7
            }
            Trunc::Months(n) => {
                let m = (l.year() as i64 - 1970) * 12 + l.month0() as i64;
                let m = m.div_euclid(n) * n;
                let y = 1970 + m.div_euclid(12);
                let d = NaiveDate::from_ymd_opt(y as i32, m.rem_euclid(12) as u32 + 1, 1)?;
                days_of(d) as i64
            }
            Trunc::Years(n) => {
                let y = (l.year() as i64).div_euclid(n) * n;
                days_of(NaiveDate::from_ymd_opt(y as i32, 1, 1)?) as i64
            }
        })
    }

    /// How far before its input a result can fall whose zone offset the DateTime results
    /// depend on (the local midnight or the first of n days); Date results and the plain
    /// hour need only the input's own offset.
    fn lookback_micros(self) -> i64 {
        const DAY: i64 = 86_400 * MICROS;
        match self {
            Trunc::Hours(_) => DAY,
            Trunc::Days(n) => n.saturating_mul(DAY),
            _ => 0,
        }
    }

    /// [`Trunc::apply`] where the zone's offset is `o` seconds at the input and at the
    /// result: integer arithmetic only.
    fn apply_fixed(self, o: i64, micros: i64) -> i64 {
        const DAY: i64 = 86_400;
        let secs = micros.div_euclid(MICROS);
        let ls = secs + o;
        let day = ls.div_euclid(DAY);
        match self {
            Trunc::Seconds(n) => secs.div_euclid(n) * n,
            Trunc::Hour => ls.div_euclid(3600) * 3600 - o,
            Trunc::Hours(n) => day * DAY + (ls.rem_euclid(DAY) / 3600 / n) * n * 3600 - o,
            Trunc::Days(n) => day.div_euclid(n) * n * DAY - o,
            Trunc::Weeks(n, monday) => {
                let base = if monday { 4 } else { 3 };
                base + (day - base).div_euclid(7).div_euclid(n) * n * 7
            }
            Trunc::Months(n) => {
                let (y, m, _) = civil_from_days(day);
                let m = ((y - 1970) * 12 + m as i64 - 1).div_euclid(n) * n;
                days_from_civil(1970 + m.div_euclid(12), m.rem_euclid(12) as u32 + 1, 1)
            }
            Trunc::Years(n) => days_from_civil(civil_from_days(day).0.div_euclid(n) * n, 1, 1),
        }
    }

    /// Truncates a batch of UTC instants. When the zone keeps one offset over the whole
    /// batch (always in UTC; within a day or so of data almost always elsewhere) this is
    /// integer arithmetic; otherwise each row is converted to local time.
    fn apply_all(self, tz: Tz, v: &[Option<i64>]) -> Vec<Option<i64>> {
        // Whole seconds do not depend on the zone.
        let zone = if matches!(self, Trunc::Seconds(_)) {
            Tz::UTC
        } else {
            tz
        };
        match batch_offset(zone, v, self.lookback_micros()) {
            Some(o) => v
                .iter()
                .map(|m| m.map(|m| self.apply_fixed(o, m)))
                .collect(),
            None => v
                .iter()
                .map(|m| m.and_then(|m| self.apply(tz, m)))
                .collect(),
        }
    }
}

fn trunc_call(
    name: &str,
    t: Expr,
    tr: Trunc,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let date = tr.gives_date();
    let ret = if date {
        DataType::Date32
    } else {
        DataType::Timestamp(TimeUnit::Second, Some(tz_name.clone().into()))
    };
    let out_tz = tz_name.clone();
    let k = kernel(move |a, _| {
        let v = tr.apply_all(tz, &instants(&a[0], tz)?);
        Ok(if date {
            date_array(v.into_iter().map(|d| d.map(|d| d as i32)).collect())
        } else {
            seconds_array(v, &out_tz)
        })
    });
    Ok(call(
        name,
        format!("{tr:?}/{tz_name}"),
        ret,
        nulls_of(&ty),
        vec![t],
        k,
    ))
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

/// A local-time part of a date/time.
#[derive(Debug, Clone, Copy)]
enum Part {
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
    Unix,
}

impl Part {
    fn ret(self) -> DataType {
        match self {
            Part::Year | Part::DayOfYear => DataType::UInt16,
            Part::YyyyMm | Part::YyyyMmDd | Part::Unix => DataType::UInt32,
            _ => DataType::UInt8,
        }
    }

    /// The part of a local wall-clock time; `Unix` is read from the instant by the caller.
    fn of_local(self, l: NaiveDateTime) -> i64 {
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
            Part::Unix => unreachable!("read from the instant"),
        }
    }
}

fn part_call(
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

/// Adds `n` (an array) units to date/times, as ClickHouse's `addX`: calendar units move the
/// local wall-clock time (months clamp to the month's end), others add exact time.
fn add_call(
    name: &str,
    t: Expr,
    n: Expr,
    unit: Unit,
    sign: i64,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    let (tz, tz_name) = zone(&ty, None, ctx)?;
    let ret = match &ty {
        DataType::Timestamp(u, _) => DataType::Timestamp(*u, Some(tz_name.clone().into())),
        DataType::Date32 | DataType::Date64 if unit.is_calendar() => DataType::Date32,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            DataType::Timestamp(TimeUnit::Millisecond, Some(tz_name.clone().into()))
        }
        _ => DataType::Timestamp(TimeUnit::Second, Some(tz_name.clone().into())),
    };
    let out = ret.clone();
    let out_tz = tz_name.clone();
    let k = kernel(move |a, _| {
        let ts = instants(&a[0], tz)?;
        let n = cast(&a[1], &DataType::Int64)?;
        let n = n.as_primitive::<Int64Type>();
        let v: Vec<Option<i64>> = ts
            .iter()
            .zip(n.iter())
            .map(|(t, n)| {
                let (t, n) = (t.as_ref()?, n? * sign);
                add_units(tz, *t, unit, n)
            })
            .collect();
        Ok(match &out {
            DataType::Date32 => date_array(
                v.into_iter()
                    .map(|m| m.and_then(|m| local(tz, m)).map(|l| days_of(l.date())))
                    .collect(),
            ),
            DataType::Timestamp(u, _) => timestamp_array(v, *u, &out_tz),
            _ => unreachable!(),
        })
    });
    Ok(call(
        name,
        format!("{unit:?}/{sign}/{tz_name}"),
        ret,
        Nulls::FromArgs,
        vec![t, n],
        k,
    ))
}

pub(crate) fn add_units(tz: Tz, micros: i64, unit: Unit, n: i64) -> Option<i64> {
    Some(match unit {
        Unit::Second => micros.checked_add(n.checked_mul(MICROS)?)?,
        Unit::Minute => micros.checked_add(n.checked_mul(60 * MICROS)?)?,
        Unit::Hour => micros.checked_add(n.checked_mul(3600 * MICROS)?)?,
        Unit::Day | Unit::Week => {
            let days = if unit == Unit::Week {
                n.checked_mul(7)?
            } else {
                n
            };
            let l = local(tz, micros)?.checked_add_signed(Duration::try_days(days)?)?;
            from_local(tz, l)
        }
        Unit::Month | Unit::Quarter | Unit::Year => {
            let months = match unit {
                Unit::Month => n,
                Unit::Quarter => n.checked_mul(3)?,
                _ => n.checked_mul(12)?,
            };
            from_local(tz, add_months(local(tz, micros)?, months)?)
        }
    })
}

fn date_diff(
    unit: Unit,
    a: Expr,
    b: Expr,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let k = kernel(move |arr, _| {
        let x = instants(&arr[0], tz)?;
        let y = instants(&arr[1], tz)?;
        let v: Int64Array = x
            .iter()
            .zip(y.iter())
            .map(|(x, y)| diff_units(tz, unit, (*x)?, (*y)?))
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    Ok(call(
        "dateDiff",
        format!("{unit:?}/{tz_name}"),
        DataType::Int64,
        Nulls::FromArgs,
        vec![a, b],
        k,
    ))
}

/// ClickHouse's `dateDiff`: how many unit boundaries lie between a and b.
fn diff_units(tz: Tz, unit: Unit, a: i64, b: i64) -> Option<i64> {
    let secs = |m: i64| m.div_euclid(MICROS);
    Some(match unit {
        Unit::Second => secs(b) - secs(a),
        Unit::Minute => secs(b).div_euclid(60) - secs(a).div_euclid(60),
        Unit::Hour => secs(b).div_euclid(3600) - secs(a).div_euclid(3600),
        _ => {
            let (la, lb) = (local(tz, a)?, local(tz, b)?);
            let day = |l: &chrono::NaiveDateTime| days_of(l.date()) as i64;
            match unit {
                Unit::Day => day(&lb) - day(&la),
                Unit::Week => (day(&lb) - 4).div_euclid(7) - (day(&la) - 4).div_euclid(7),
                Unit::Month => {
                    (lb.year() as i64 * 12 + lb.month0() as i64)
                        - (la.year() as i64 * 12 + la.month0() as i64)
                }
                Unit::Quarter => {
                    (lb.year() as i64 * 4 + lb.month0() as i64 / 3)
                        - (la.year() as i64 * 4 + la.month0() as i64 / 3)
                }
                _ => lb.year() as i64 - la.year() as i64,
            }
        }
    })
}

/// `toIntervalX(n)`: an Arrow MonthDayNano interval; a literal when n is one, tagged with
/// its unit.
fn to_interval(unit: Unit, n: Expr) -> Expr {
    if let Some(v) = const_int(&n) {
        let meta = FieldMetadata::from(HashMap::from([(
            INTERVAL_UNIT_KEY.to_string(),
            unit.name().to_string(),
        )]));
        return Expr::Literal(
            ScalarValue::IntervalMonthDayNano(Some(unit.interval(v))),
            Some(meta),
        );
    }
    let k = kernel(move |a, _| {
        let n = cast(&a[0], &DataType::Int64)?;
        let v: IntervalMonthDayNanoArray = n
            .as_primitive::<Int64Type>()
            .iter()
            .map(|x| x.map(|x| unit.interval(x)))
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    let name = format!("toInterval{}", capitalized(unit.name()));
    call(
        &name,
        unit.name(),
        DataType::Interval(IntervalUnit::MonthDayNano),
        Nulls::FromArgs,
        vec![n],
        k,
    )
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

/// `formatDateTime` with ClickHouse's %-codes (MySQL-style: `%i` minutes, `%M` month name).
pub(crate) fn format_local(
    l: &chrono::NaiveDateTime,
    fmt: &str,
    frac: &str,
    offset: i64,
) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(code) = chars.next() else {
            out.push('%');
            break;
        };
        let wd = l.weekday().num_days_from_monday() as usize;
        let h12 = match l.hour() % 12 {
            0 => 12,
            h => h,
        };
        use std::fmt::Write;
        let _ = match code {
            'a' => write!(out, "{}", &DAYS[wd][..3]),
            'b' => write!(out, "{}", &MONTHS[l.month0() as usize][..3]),
            'c' => write!(out, "{:02}", l.month()),
            'C' => write!(out, "{:02}", l.year().div_euclid(100)),
            'd' => write!(out, "{:02}", l.day()),
            'D' => write!(
                out,
                "{:02}/{:02}/{:02}",
                l.month(),
                l.day(),
                l.year().rem_euclid(100)
            ),
            'e' => write!(out, "{}", l.day()),
            'f' => write!(out, "{frac}"),
            'F' => write!(out, "{:04}-{:02}-{:02}", l.year(), l.month(), l.day()),
            'g' => write!(out, "{:02}", l.iso_week().year().rem_euclid(100)),
            'G' => write!(out, "{:04}", l.iso_week().year()),
            'h' | 'I' => write!(out, "{h12:02}"),
            'H' => write!(out, "{:02}", l.hour()),
            'i' => write!(out, "{:02}", l.minute()),
            'j' => write!(out, "{:03}", l.ordinal()),
            'k' => write!(out, "{:02}", l.hour()),
            'l' => write!(out, "{h12:02}"),
            'm' => write!(out, "{:02}", l.month()),
            'M' => write!(out, "{}", MONTHS[l.month0() as usize]),
            'n' => writeln!(out),
            'p' => write!(out, "{}", if l.hour() < 12 { "AM" } else { "PM" }),
            'Q' => write!(out, "{}", l.month0() / 3 + 1),
            'r' => write!(
                out,
                "{h12:02}:{:02} {}",
                l.minute(),
                if l.hour() < 12 { "AM" } else { "PM" }
            ),
            'R' => write!(out, "{:02}:{:02}", l.hour(), l.minute()),
            's' | 'S' => write!(out, "{:02}", l.second()),
            't' => write!(out, "\t"),
            'T' => write!(out, "{:02}:{:02}:{:02}", l.hour(), l.minute(), l.second()),
            'u' => write!(out, "{}", wd + 1),
            'V' => write!(out, "{:02}", l.iso_week().week()),
            'w' => write!(out, "{}", l.weekday().num_days_from_sunday()),
            'W' => write!(out, "{}", DAYS[wd]),
            'y' => write!(out, "{:02}", l.year().rem_euclid(100)),
            'Y' => write!(out, "{:04}", l.year()),
            'z' => {
                let sign = if offset < 0 { '-' } else { '+' };
                let o = offset.abs();
                write!(out, "{sign}{:02}{:02}", o / 3600, o % 3600 / 60)
            }
            '%' => write!(out, "%"),
            other => write!(out, "%{other}"),
        };
    }
    out
}

/// The digits `%f` prints for a type: the type's fractional scale (6 zeros for DateTime).
pub(crate) fn fraction(ty: &DataType, micros: i64) -> String {
    let us = micros.rem_euclid(MICROS);
    match ty {
        DataType::Timestamp(TimeUnit::Millisecond, _) => format!("{:03}", us / 1000),
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _) => {
            format!("{us:06}")
        }
        _ => "000000".to_string(),
    }
}

fn format_call(
    t: Expr,
    fmt: &Expr,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let f = lit_str(fmt).ok_or_else(|| invalid("The format argument must be a constant string"))?;
    let key = format!("{f}/{tz_name}");
    let in_ty = ty.clone();
    let k = kernel(move |a, _| {
        let v: StringArray = instants(&a[0], tz)?
            .into_iter()
            .map(|m| {
                let m = m?;
                let l = local(tz, m)?;
                let off = super::time::offset_at(tz, m);
                Some(format_local(&l, &f, &fraction(&in_ty, m), off))
            })
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    Ok(call(
        "formatDateTime",
        key,
        DataType::Utf8,
        nulls_of(&ty),
        vec![t],
        k,
    ))
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
    let unit = unit.unwrap_or(if is_str {
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

fn to_date(t: Expr, tz_arg: Option<&Expr>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    if matches!(ty, DataType::Date32) {
        return Ok(t);
    }
    let (tz, tz_name) = zone(&ty, tz_arg, ctx)?;
    let in_ty = ty.clone();
    let k = kernel(move |a, _| {
        let v: Vec<Option<i32>> = match in_ty {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let s = cast(&a[0], &DataType::Utf8)?;
                s.as_string::<i32>()
                    .iter()
                    .map(|s| s.and_then(parse_date).map(days_of))
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
                // ClickHouse: small numbers are days, larger ones Unix seconds.
                let n = cast(&a[0], &DataType::Int64)?;
                n.as_primitive::<Int64Type>()
                    .iter()
                    .map(|x| {
                        let x = x?;
                        if (0..65536).contains(&x) {
                            Some(x as i32)
                        } else {
                            local(tz, x.checked_mul(MICROS)?).map(|l| days_of(l.date()))
                        }
                    })
                    .collect()
            }
            _ => locals(tz, &instants(&a[0], tz)?)
                .into_iter()
                .map(|l| l.map(|l| days_of(l.date())))
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
        "now" => {
            let (_, tz_name) = zone(&DataType::Null, args.first(), ctx)?;
            let ms = ctx.now.timestamp_millis();
            Ok(Expr::Literal(
                ScalarValue::TimestampMillisecond(Some(ms), Some(tz_name.into())),
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
        "toStartOfSecond" => trunc_simple(name, Trunc::Seconds(1), args),
        "toStartOfFiveMinutes" | "toStartOfFiveMinute" => {
            trunc_simple(name, Trunc::Seconds(300), args)
        }
        "toStartOfTenMinutes" => trunc_simple(name, Trunc::Seconds(600), args),
        "toStartOfFifteenMinutes" => trunc_simple(name, Trunc::Seconds(900), args),
        "toMonday" => trunc_simple(name, Trunc::Weeks(1, true), args),
        "toStartOfMonth" => trunc_simple(name, Trunc::Months(1), args),
        "toStartOfQuarter" => trunc_simple(name, Trunc::Months(3), args),
        "toStartOfYear" => trunc_simple(name, Trunc::Years(1), args),
        "toStartOfWeek" => {
            let mode = match args.get(1) {
                Some(m) => const_int(m).ok_or_else(|| {
                    invalid("The mode argument of `toStartOfWeek` must be a constant")
                })?,
                None => week_monday,
            };
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            trunc_call(name, t, Trunc::Weeks(1, mode % 2 == 1), tz.as_ref(), ctx)
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
        "toUnixTimestamp" => part_simple(name, Part::Unix, args),
        "toDayOfWeek" | "DAYOFWEEK" => {
            let mode = match args.get(1) {
                Some(m) => const_int(m).ok_or_else(|| {
                    invalid("The mode argument of `toDayOfWeek` must be a constant")
                })?,
                None => 0,
            };
            let tz = args.get(2).cloned();
            let t = args.swap_remove(0);
            part_call(name, t, Part::DayOfWeek(mode), tz.as_ref(), ctx)
        }
        "toDate" | "to_date" | "DATE" => {
            let tz = args.get(1).cloned();
            to_date(args.swap_remove(0), tz.as_ref(), ctx)
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
        "dateAdd" | "date_add" | "DATE_ADD" | "dateSub" | "date_sub" | "DATE_SUB" => {
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

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::arrow::datatypes::{DataType, TimeUnit};
    use datafusion::logical_expr::{Expr, Operator, binary_expr};

    /// The batch path (integer arithmetic when the offset is steady) gives what converting
    /// each row gives, in zones with DST, half-hour shifts and none, for batches that sit
    /// beside, straddle and follow a transition.
    #[test]
    fn batch_truncation_matches_row_by_row() {
        use super::super::time::MICROS;
        use super::Trunc;
        let zones = [
            "UTC",
            "America/New_York",
            "Europe/London",
            "Asia/Kolkata",
            "Australia/Lord_Howe",
            "Pacific/Chatham",
        ];
        let truncs = [
            Trunc::Seconds(60),
            Trunc::Hour,
            Trunc::Hours(6),
            Trunc::Days(1),
            Trunc::Days(7),
            Trunc::Weeks(1, true),
            Trunc::Weeks(2, false),
            Trunc::Months(1),
            Trunc::Months(3),
            Trunc::Years(1),
        ];
        let h = 3_600 * MICROS;
        // 2024-03-10 07:00 UTC (New York springs forward), 2024-10-27 01:00 UTC (London falls
        // back), 2024-04-06 15:00 UTC (Lord Howe), 1900-01-01, 2024-01-01.
        let anchors = [
            1_710_054_000,
            1_729_990_800,
            1_712_415_600,
            -2_208_988_800,
            1_704_067_200,
        ];
        let mut checked = 0;
        for name in zones {
            let tz: chrono_tz::Tz = name.parse().unwrap();
            for &a in &anchors {
                let a = a * MICROS;
                for (from, to) in [(-30 * h, -h), (-3 * h, 3 * h), (h, 30 * h), (0, 24 * h)] {
                    let mut batch: Vec<Option<i64>> = (0..2000)
                        .map(|i| Some(a + from + (to - from) * i / 2000 + i * 7_919))
                        .collect();
                    batch.push(None);
                    for tr in truncs {
                        let want: Vec<Option<i64>> = batch
                            .iter()
                            .map(|m| m.and_then(|m| tr.apply(tz, m)))
                            .collect();
                        let got = tr.apply_all(tz, &batch);
                        let bad = (0..want.len()).find(|&i| got[i] != want[i]);
                        assert_eq!(bad, None, "{tr:?} in {name} near {a}: row {bad:?} differs");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, zones.len() * anchors.len() * 4 * truncs.len());
    }

    fn ny_s() -> DataType {
        DataType::Timestamp(TimeUnit::Second, Some(TZ.into()))
    }

    /// Each call on the `ts` column: ClickHouse's type and values for the three rows (the
    /// fourth row is NULL).
    fn column_cases(cases: Vec<(Expr, DataType, [&str; 3])>) {
        let (exprs, want): (Vec<Expr>, Vec<(DataType, [&str; 3])>) =
            cases.into_iter().map(|(e, t, v)| (e, (t, v))).unzip();
        let names: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
        for ((n, (t, v)), (gt, gv)) in names.iter().zip(want).zip(eval(exprs)) {
            assert_eq!(gt, t, "type of {n}");
            assert_eq!(gv[..3], v, "{n}");
            assert_eq!(gv[3], "\\N", "{n} on NULL");
        }
    }

    #[test]
    fn truncations_on_timestamps() {
        let t = || c("ts");
        let date = DataType::Date32;
        column_cases(vec![
            (
                call("toStartOfDay", vec![t()]),
                ny_s(),
                [
                    "2024-03-10 00:00:00",
                    "2024-11-03 00:00:00",
                    "2024-02-29 00:00:00",
                ],
            ),
            (
                call("toStartOfHour", vec![t()]),
                ny_s(),
                [
                    "2024-03-10 01:00:00",
                    "2024-11-03 01:00:00",
                    "2024-02-29 23:00:00",
                ],
            ),
            (
                call("toUnixTimestamp", vec![call("toStartOfHour", vec![t()])]),
                DataType::UInt32,
                ["1710050400", "1730613600", "1709265600"],
            ),
            (
                call("toStartOfWeek", vec![t()]),
                date.clone(),
                ["2024-03-10", "2024-11-03", "2024-02-25"],
            ),
            (
                call("toStartOfWeek", vec![t(), i(1)]),
                date.clone(),
                ["2024-03-04", "2024-10-28", "2024-02-26"],
            ),
            (
                call("toMonday", vec![t()]),
                date.clone(),
                ["2024-03-04", "2024-10-28", "2024-02-26"],
            ),
            (
                call("toStartOfMonth", vec![t()]),
                date.clone(),
                ["2024-03-01", "2024-11-01", "2024-02-01"],
            ),
            (
                call("toStartOfQuarter", vec![t()]),
                date.clone(),
                ["2024-01-01", "2024-10-01", "2024-01-01"],
            ),
            (
                call("toStartOfYear", vec![t()]),
                date.clone(),
                ["2024-01-01", "2024-01-01", "2024-01-01"],
            ),
            (
                call("toStartOfMinute", vec![t()]),
                ny_s(),
                [
                    "2024-03-10 01:30:00",
                    "2024-11-03 01:30:00",
                    "2024-02-29 23:59:00",
                ],
            ),
            (
                call("toStartOfFifteenMinutes", vec![t()]),
                ny_s(),
                [
                    "2024-03-10 01:30:00",
                    "2024-11-03 01:30:00",
                    "2024-02-29 23:45:00",
                ],
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![t(), call("toIntervalHour", vec![i(2)])],
                ),
                ny_s(),
                [
                    "2024-03-10 00:00:00",
                    "2024-11-03 00:00:00",
                    "2024-02-29 22:00:00",
                ],
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![t(), call("toIntervalMinute", vec![i(10)])],
                ),
                ny_s(),
                [
                    "2024-03-10 01:30:00",
                    "2024-11-03 01:30:00",
                    "2024-02-29 23:50:00",
                ],
            ),
            (
                call("toStartOfDay", vec![t(), s("UTC")]),
                DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
                [
                    "2024-03-10 00:00:00",
                    "2024-11-03 00:00:00",
                    "2024-03-01 00:00:00",
                ],
            ),
            (
                call("dateTrunc", vec![s("week"), t()]),
                date.clone(),
                ["2024-03-04", "2024-10-28", "2024-02-26"],
            ),
            (
                call("dateTrunc", vec![s("minute"), t()]),
                ny_s(),
                [
                    "2024-03-10 01:30:00",
                    "2024-11-03 01:30:00",
                    "2024-02-29 23:59:00",
                ],
            ),
            (
                call("toDate", vec![t()]),
                date,
                ["2024-03-10", "2024-11-03", "2024-02-29"],
            ),
            (
                call("toDateTime", vec![t()]),
                ny_s(),
                [
                    "2024-03-10 01:30:00",
                    "2024-11-03 01:30:00",
                    "2024-02-29 23:59:59",
                ],
            ),
        ]);
    }

    #[test]
    fn parts_of_timestamps() {
        let t = || c("ts");
        let u8t = DataType::UInt8;
        column_cases(vec![
            (
                call("toYear", vec![t()]),
                DataType::UInt16,
                ["2024", "2024", "2024"],
            ),
            (call("toQuarter", vec![t()]), u8t.clone(), ["1", "4", "1"]),
            (call("toMonth", vec![t()]), u8t.clone(), ["3", "11", "2"]),
            (
                call("toDayOfMonth", vec![t()]),
                u8t.clone(),
                ["10", "3", "29"],
            ),
            (
                call("toDayOfYear", vec![t()]),
                DataType::UInt16,
                ["70", "308", "60"],
            ),
            (call("toHour", vec![t()]), u8t.clone(), ["1", "1", "23"]),
            (call("toMinute", vec![t()]), u8t.clone(), ["30", "30", "59"]),
            (call("toSecond", vec![t()]), u8t.clone(), ["0", "0", "59"]),
            (call("toDayOfWeek", vec![t()]), u8t.clone(), ["7", "7", "4"]),
            (
                call("toYYYYMM", vec![t()]),
                DataType::UInt32,
                ["202403", "202411", "202402"],
            ),
            (
                call("toYYYYMMDD", vec![t()]),
                DataType::UInt32,
                ["20240310", "20241103", "20240229"],
            ),
            (
                call("toUnixTimestamp", vec![t()]),
                DataType::UInt32,
                ["1710052200", "1730615400", "1709269199"],
            ),
            (
                call("toHour", vec![t(), s("Asia/Tokyo")]),
                u8t,
                ["15", "15", "13"],
            ),
            (
                call(
                    "formatDateTime",
                    vec![t(), s("%Y/%m/%d %H:%i:%S.%f %a %W %p %j %V %z")],
                ),
                DataType::Utf8,
                [
                    "2024/03/10 01:30:00.123456 Sun Sunday AM 070 10 -0500",
                    "2024/11/03 01:30:00.000000 Sun Sunday AM 308 44 -0500",
                    "2024/02/29 23:59:59.000000 Thu Thursday PM 060 09 -0500",
                ],
            ),
        ]);
    }

    #[test]
    fn arithmetic_on_timestamps() {
        let t = || c("ts");
        let ny6 = DataType::Timestamp(TimeUnit::Microsecond, Some(TZ.into()));
        let end = || ts("2024-12-25 00:00:00");
        column_cases(vec![
            (
                call("addMonths", vec![t(), i(1)]),
                ny6.clone(),
                [
                    "2024-04-10 01:30:00.123456",
                    "2024-12-03 01:30:00.000000",
                    "2024-03-29 23:59:59.000000",
                ],
            ),
            (
                call("addDays", vec![t(), i(-1)]),
                ny6.clone(),
                [
                    "2024-03-09 01:30:00.123456",
                    "2024-11-02 01:30:00.000000",
                    "2024-02-28 23:59:59.000000",
                ],
            ),
            (
                call("addHours", vec![t(), i(24)]),
                ny6.clone(),
                [
                    "2024-03-11 02:30:00.123456",
                    "2024-11-04 01:30:00.000000",
                    "2024-03-01 23:59:59.000000",
                ],
            ),
            (
                call("subtractYears", vec![t(), i(1)]),
                ny6.clone(),
                [
                    "2023-03-10 01:30:00.123456",
                    "2023-11-03 01:30:00.000000",
                    "2023-02-28 23:59:59.000000",
                ],
            ),
            (
                call("dateAdd", vec![t(), call("toIntervalDay", vec![i(1)])]),
                ny6.clone(),
                [
                    "2024-03-11 01:30:00.123456",
                    "2024-11-04 01:30:00.000000",
                    "2024-03-01 23:59:59.000000",
                ],
            ),
            (
                call("dateSub", vec![s("month"), i(1), t()]),
                ny6.clone(),
                [
                    "2024-02-10 01:30:00.123456",
                    "2024-10-03 01:30:00.000000",
                    "2024-01-29 23:59:59.000000",
                ],
            ),
            (
                binary_expr(t(), Operator::Plus, call("toIntervalHour", vec![i(3)])),
                ny6.clone(),
                [
                    "2024-03-10 05:30:00.123456",
                    "2024-11-03 04:30:00.000000",
                    "2024-03-01 02:59:59.000000",
                ],
            ),
            (
                binary_expr(t(), Operator::Plus, call("toIntervalDay", vec![i(1)])),
                ny6.clone(),
                [
                    "2024-03-11 01:30:00.123456",
                    "2024-11-04 01:30:00.000000",
                    "2024-03-01 23:59:59.000000",
                ],
            ),
            (
                binary_expr(t(), Operator::Minus, call("toIntervalMonth", vec![i(1)])),
                ny6.clone(),
                [
                    "2024-02-10 01:30:00.123456",
                    "2024-10-03 01:30:00.000000",
                    "2024-01-29 23:59:59.000000",
                ],
            ),
            (
                call("dateDiff", vec![s("day"), t(), end()]),
                DataType::Int64,
                ["290", "52", "300"],
            ),
            (
                call("dateDiff", vec![s("week"), t(), end()]),
                DataType::Int64,
                ["42", "8", "43"],
            ),
            (
                call("dateDiff", vec![s("month"), t(), end()]),
                DataType::Int64,
                ["9", "1", "10"],
            ),
            (
                call("dateDiff", vec![s("hour"), t(), end()]),
                DataType::Int64,
                ["6959", "1247", "7177"],
            ),
        ]);
    }

    #[test]
    fn constants_and_edge_cases() {
        check(vec![
            // Interval starts (ClickHouse: months from 1970, years from 0, weeks from 1970-01-05).
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts("2024-11-03 01:30:00"),
                        call("toIntervalMonth", vec![i(7)]),
                    ],
                ),
                "2024-11-01",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts("2024-11-03 01:30:00"),
                        call("toIntervalYear", vec![i(3)]),
                    ],
                ),
                "2022-01-01",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts("2024-11-03 01:30:00"),
                        call("toIntervalWeek", vec![i(3)]),
                    ],
                ),
                "2024-10-21",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts("2024-11-03 01:30:00"),
                        call("toIntervalWeek", vec![i(1)]),
                    ],
                ),
                "2024-10-28",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![ts("2024-11-03 01:30:00"), call("toIntervalDay", vec![i(7)])],
                ),
                "2024-10-31 00:00:00",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![ts("2024-11-03 01:30:00"), call("toIntervalDay", vec![i(3)])],
                ),
                "2024-11-01 00:00:00",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts("2024-11-03 01:30:00"),
                        call("toIntervalQuarter", vec![i(2)]),
                    ],
                ),
                "2024-07-01",
            ),
            (
                call(
                    "toStartOfInterval",
                    vec![
                        ts_in("2024-11-03 03:37:00", "Asia/Kolkata"),
                        call("toIntervalHour", vec![i(2)]),
                    ],
                ),
                "2024-11-03 02:00:00",
            ),
            // Dates.
            (
                call(
                    "addMonths",
                    vec![call("toDate", vec![s("2024-01-31")]), i(1)],
                ),
                "2024-02-29",
            ),
            (
                call(
                    "addYears",
                    vec![call("toDate", vec![s("2024-02-29")]), i(1)],
                ),
                "2025-02-28",
            ),
            (
                call(
                    "addHours",
                    vec![call("toDate", vec![s("2024-01-31")]), i(1)],
                ),
                "2024-01-31 01:00:00",
            ),
            (
                call(
                    "addWeeks",
                    vec![call("toDate", vec![s("2024-01-01")]), i(-1)],
                ),
                "2023-12-25",
            ),
            (
                call(
                    "addDays",
                    vec![ts_in("2024-01-01 00:00:00", "UTC"), fl(1.7)],
                ),
                "2024-01-02 00:00:00.000000",
            ),
            (
                call(
                    "dateDiff",
                    vec![
                        s("week"),
                        call("toDate", vec![s("2024-01-07")]),
                        call("toDate", vec![s("2024-01-08")]),
                    ],
                ),
                "1",
            ),
            (
                call(
                    "dateDiff",
                    vec![
                        s("month"),
                        call("toDate", vec![s("2024-01-31")]),
                        call("toDate", vec![s("2024-02-01")]),
                    ],
                ),
                "1",
            ),
            (
                call(
                    "dateDiff",
                    vec![
                        s("second"),
                        ts_in("2024-01-01 00:00:00.9", "UTC"),
                        ts_in("2024-01-01 00:00:01.1", "UTC"),
                    ],
                ),
                "1",
            ),
            (
                call(
                    "dateDiff",
                    vec![
                        s("hour"),
                        ts("2024-03-10 00:30:00"),
                        ts("2024-03-10 03:30:00"),
                    ],
                ),
                "2",
            ),
            (
                call("toStartOfWeek", vec![call("toDate", vec![s("2024-05-05")])]),
                "2024-05-05",
            ),
            (
                call(
                    "toStartOfWeek",
                    vec![call("toDate", vec![s("2024-05-05")]), i(1)],
                ),
                "2024-04-29",
            ),
            (
                call("toStartOfDay", vec![call("toDate", vec![s("2024-05-05")])]),
                "2024-05-05 00:00:00",
            ),
            (
                call(
                    "dateTrunc",
                    vec![s("month"), call("toDate", vec![s("2024-05-05")])],
                ),
                "2024-05-01",
            ),
            (
                call(
                    "toDayOfWeek",
                    vec![call("toDate", vec![s("2024-01-07")]), i(1)],
                ),
                "6",
            ),
            (
                call(
                    "toDayOfWeek",
                    vec![call("toDate", vec![s("2024-01-07")]), i(2)],
                ),
                "0",
            ),
            (
                call(
                    "toDayOfWeek",
                    vec![call("toDate", vec![s("2024-01-07")]), i(3)],
                ),
                "1",
            ),
            (call("toDate", vec![i(19000)]), "2022-01-08"),
            (call("toDate", vec![i(1700000000)]), "2023-11-14"),
            (call("toDate", vec![s("2024-01-15 10:00:00")]), "2024-01-15"),
            (call("toDate", vec![s("2024-1-5")]), "2024-01-05"),
            (call("toDate", vec![s("x")]), "\\N"),
            (
                call("toDateTime", vec![i(1700000000), s("UTC")]),
                "2023-11-14 22:13:20",
            ),
            (
                call("fromUnixTimestamp", vec![i(1700000000)]),
                "2023-11-14 17:13:20",
            ),
            (
                call("toDateTime", vec![s("2024-03-10 02:30:00")]),
                "2024-03-10 01:30:00.000000",
            ),
            (
                call("toDateTime", vec![s("2024-01-02T03:04:05Z")]),
                "2024-01-01 22:04:05.000000",
            ),
            (call("toDateTime", vec![s("garbage")]), "\\N"),
            (
                call("parseDateTimeBestEffort", vec![s("2024-01-02 03:04:05")]),
                "2024-01-02 03:04:05.000000",
            ),
            (call("parseDateTimeBestEffortOrNull", vec![s("")]), "\\N"),
            (
                call("toUnixTimestamp", vec![s("2024-01-01 00:00:00")]),
                "1704085200",
            ),
            (
                call("toTimeZone", vec![ts("2024-01-01 00:00:00"), s("UTC")]),
                "2024-01-01 05:00:00.000000",
            ),
            (
                call(
                    "toDateTime64",
                    vec![s("2024-01-01 00:00:00.5"), i(3), s("UTC")],
                ),
                "2024-01-01 00:00:00.500",
            ),
            (
                call(
                    "formatDateTime",
                    vec![
                        ts_in("2024-03-05 17:00:00", "UTC"),
                        s("%F %T %f %z"),
                        s("Asia/Kolkata"),
                    ],
                ),
                "2024-03-05 22:30:00 000000 +0530",
            ),
            (
                call(
                    "formatDateTime",
                    vec![
                        ts("2024-03-05 07:08:09.123456"),
                        s(
                            "%Y-%m-%d %H:%M:%S|%a %b %c %C %d %D %e %F %g %G %h %i %I %j %k %l %Q %r %R %s %T %u %V %w %y %%",
                        ),
                    ],
                ),
                "2024-03-05 07:March:09|Tue Mar 03 20 05 03/05/24 5 2024-03-05 24 2024 07 08 07 065 07 07 1 07:08 AM 07:08 09 07:08:09 2 10 2 24 %",
            ),
            // Now is 2024-05-06 03:04:05 UTC, still the 5th in New York.
            (call("today", vec![]), "2024-05-05"),
            (call("yesterday", vec![]), "2024-05-04"),
            (call("now", vec![]), "2024-05-05 23:04:05.000"),
            (call("now", vec![s("UTC")]), "2024-05-06 03:04:05.000"),
        ]);
        assert_eq!(typ(call("today", vec![])), DataType::Date32);
        assert!(
            try_call(
                "toStartOfDay",
                vec![ts("2024-01-01 00:00:00"), s("Mars/Base")]
            )
            .is_err()
        );
        assert!(
            try_call(
                "dateDiff",
                vec![
                    s("fortnight"),
                    ts("2024-01-01 00:00:00"),
                    ts("2024-01-01 00:00:00")
                ]
            )
            .is_err()
        );
    }
}
