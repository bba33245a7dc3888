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
}

impl Part {
    pub(super) fn ret(self) -> DataType {
        match self {
            Part::Year | Part::DayOfYear => DataType::UInt16,
            Part::YyyyMm | Part::YyyyMmDd | Part::Unix => DataType::UInt32,
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
