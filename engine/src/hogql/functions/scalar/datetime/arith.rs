//! Date arithmetic: adding units (`addDays`, `dateAdd`, `+ INTERVAL`) and differences
//! (`dateDiff`), on local wall-clock time for calendar units.

use super::*;

/// Adds `n` (an array) units to date/times, as ClickHouse's `addX`: calendar units move the
/// local wall-clock time (months clamp to the month's end), others add exact time.
pub(super) fn add_call(
    name: &str,
    t: Expr,
    n: Expr,
    unit: Unit,
    sign: i64,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&t, ctx)?;
    if ty == DataType::Null {
        // ClickHouse: a NULL date gives NULL (of no type, so `if(c, d, addDays(NULL, 1))`
        // stays a Date)
        return Ok(Expr::Literal(datafusion::common::ScalarValue::Null, None));
    }
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
    // A Date plus days or weeks: day numbers, wrapping as ClickHouse's 16-bit Date does.
    if ret == DataType::Date32 && matches!(unit, Unit::Day | Unit::Week) {
        let per = if unit == Unit::Week { 7 } else { 1 };
        let k = kernel(move |a, _| {
            let d = cast(&a[0], &DataType::Date32)?;
            let n = cast(&a[1], &DataType::Int64)?;
            let v: Vec<Option<i32>> = d
                .as_primitive::<datafusion::arrow::datatypes::Date32Type>()
                .iter()
                .zip(n.as_primitive::<Int64Type>().iter())
                .map(|(d, n)| {
                    let days = i64::from(d?).checked_add(n?.checked_mul(per * sign)?)?;
                    Some(ch_date(days, DateRange::Wrap))
                })
                .collect();
            Ok(date_array(v))
        });
        return Ok(call(
            name,
            format!("{unit:?}/{sign}/date"),
            ret,
            Nulls::FromArgs,
            vec![t, n],
            k,
        ));
    }
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
            // Months, quarters, years: 1970-01-01 below the Date range, wrapping above.
            DataType::Date32 => date_array(
                v.into_iter()
                    .map(|m| {
                        m.and_then(|m| local(tz, m))
                            .map(|l| ch_date(days_of(l.date()).into(), DateRange::Months))
                    })
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

pub(super) fn add_units(tz: Tz, micros: i64, unit: Unit, n: i64) -> Option<i64> {
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

pub(super) fn date_diff(
    unit: Unit,
    a: Expr,
    b: Expr,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    units_between("dateDiff", diff_units, unit, a, b, tz_arg, ctx)
}

/// `age(unit, a, b[, zone])`: dateDiff's count less the unit not yet complete. Seconds,
/// minutes and hours from the elapsed time (toward zero); days and weeks from the local
/// dates and times of day; months, quarters and years from the local months, a month being
/// complete once b's day and time of day reach a's.
pub(super) fn age(
    unit: Unit,
    a: Expr,
    b: Expr,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    units_between("age", age_units, unit, a, b, tz_arg, ctx)
}

/// `name(unit, a, b[, zone])`: `count(zone, unit, a, b)` per row (instants in microseconds).
fn units_between(
    name: &'static str,
    count: fn(Tz, Unit, i64, i64) -> Option<i64>,
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
            .map(|(x, y)| count(tz, unit, (*x)?, (*y)?))
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    Ok(call(
        name,
        format!("{unit:?}/{tz_name}"),
        DataType::Int64,
        Nulls::FromArgs,
        vec![a, b],
        k,
    ))
}

pub(super) fn age_units(tz: Tz, unit: Unit, a: i64, b: i64) -> Option<i64> {
    let elapsed = |per: i64| (b - a) / per;
    // n whole units by the calendar, less one when the rest of b has not reached a's.
    let settle = |n: i64, rest_a: (u32, i64), rest_b: (u32, i64)| {
        if n > 0 && rest_b < rest_a {
            n - 1
        } else if n < 0 && rest_b > rest_a {
            n + 1
        } else {
            n
        }
    };
    Some(match unit {
        Unit::Second => elapsed(MICROS),
        Unit::Minute => elapsed(60 * MICROS),
        Unit::Hour => elapsed(3600 * MICROS),
        _ => {
            let (la, lb) = (local(tz, a)?, local(tz, b)?);
            let tod = |l: &chrono::NaiveDateTime| {
                l.num_seconds_from_midnight() as i64 * MICROS
                    + (l.nanosecond() as i64 / 1000).min(MICROS - 1)
            };
            match unit {
                Unit::Day | Unit::Week => {
                    let day = |l: &chrono::NaiveDateTime| days_of(l.date()) as i64;
                    let n = settle(day(&lb) - day(&la), (0, tod(&la)), (0, tod(&lb)));
                    if unit == Unit::Week { n / 7 } else { n }
                }
                _ => {
                    let months = (lb.year() as i64 * 12 + lb.month0() as i64)
                        - (la.year() as i64 * 12 + la.month0() as i64);
                    let n = settle(months, (la.day(), tod(&la)), (lb.day(), tod(&lb)));
                    match unit {
                        Unit::Quarter => n / 3,
                        Unit::Year => n / 12,
                        _ => n,
                    }
                }
            }
        }
    })
}

/// ClickHouse's `dateDiff`: how many unit boundaries lie between a and b.
pub(super) fn diff_units(tz: Tz, unit: Unit, a: i64, b: i64) -> Option<i64> {
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
pub(super) fn to_interval(unit: Unit, n: Expr) -> Expr {
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
