//! Truncation: `toStartOf…` and `dateTrunc`, in the zone a call computes in.

use super::*;

/// What a truncation rounds down to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Trunc {
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
    pub(super) fn gives_date(self) -> bool {
        matches!(self, Trunc::Weeks(..) | Trunc::Months(_) | Trunc::Years(_))
    }

    pub(super) fn from_unit(unit: Unit, n: i64) -> Trunc {
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
    pub(super) fn apply(self, tz: Tz, micros: i64) -> Option<i64> {
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
    pub(super) fn lookback_micros(self) -> i64 {
        const DAY: i64 = 86_400 * MICROS;
        match self {
            Trunc::Hours(_) => DAY,
            Trunc::Days(n) => n.saturating_mul(DAY),
            _ => 0,
        }
    }

    /// [`Trunc::apply`] where the zone's offset is `o` seconds at the input and at the
    /// result: integer arithmetic only.
    pub(super) fn apply_fixed(self, o: i64, micros: i64) -> i64 {
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

    /// Truncates a column of µs instants without NULLs (`timestamp`, as stored) in one
    /// pass over its values, when the zone keeps one offset over them: what
    /// [`Trunc::apply_all`] gives, without its two copies of the column as `Option`s
    /// (a tenth of a weekly retention's CPU at 10M events). `None` otherwise.
    pub(super) fn apply_micros(
        self,
        tz: Tz,
        a: &ArrayRef,
        date: bool,
        out_tz: &str,
    ) -> Option<ArrayRef> {
        use super::super::time::steady_offset;
        use datafusion::arrow::array::PrimitiveArray;
        use datafusion::arrow::datatypes::{
            Date32Type, TimestampMicrosecondType, TimestampSecondType,
        };
        if !matches!(a.data_type(), DataType::Timestamp(TimeUnit::Microsecond, _))
            || a.null_count() > 0
            || a.is_empty()
        {
            return None;
        }
        let p = a.as_primitive::<TimestampMicrosecondType>();
        let (lo, hi) = p
            .values()
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        let zone = if matches!(self, Trunc::Seconds(_)) {
            Tz::UTC
        } else {
            tz
        };
        let o = steady_offset(
            zone,
            lo.saturating_sub(self.lookback_micros()),
            hi,
            (p.len() / 4) as i64,
        )?;
        Some(if date {
            Arc::new(PrimitiveArray::<Date32Type>::from_iter_values(
                self.each_fixed(o, p.values())
                    .map(|d| ch_date(d, DateRange::Clamp)),
            ))
        } else {
            Arc::new(
                PrimitiveArray::<TimestampSecondType>::from_iter_values(
                    self.each_fixed(o, p.values()),
                )
                .with_timezone(out_tz),
            )
        })
    }

    /// [`Trunc::apply_fixed`] of each of `micros`. A unit of a day or more gives every
    /// instant of one local day the same answer, so the day of the last answer is kept and
    /// a row inside it costs two comparisons: a stored file holds one UTC day, and
    /// `toStartOfMonth`'s calendar arithmetic per row was a third of a monthly-active-users
    /// query's CPU at 10M events.
    fn each_fixed(self, o: i64, micros: &[i64]) -> impl Iterator<Item = i64> {
        const DAY: i128 = 86_400;
        let by_day = matches!(
            self,
            Trunc::Days(_) | Trunc::Weeks(..) | Trunc::Months(_) | Trunc::Years(_)
        );
        // The µs range [lo, hi) of the local day of the last answer, and that answer.
        let (mut lo, mut hi, mut last) = (0i64, 0i64, 0i64);
        micros.iter().map(move |&m| {
            if m >= lo && m < hi {
                return last;
            }
            last = self.apply_fixed(o, m);
            if by_day {
                let day = (i128::from(m.div_euclid(MICROS)) + i128::from(o)).div_euclid(DAY);
                let at = |d: i128| {
                    ((d * DAY - i128::from(o)) * i128::from(MICROS))
                        .clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                        as i64
                };
                (lo, hi) = (at(day), at(day + 1));
            }
            last
        })
    }

    /// Truncates a batch of UTC instants. When the zone keeps one offset over the whole
    /// batch (always in UTC; within a day or so of data almost always elsewhere) this is
    /// integer arithmetic; otherwise each row is converted to local time.
    pub(super) fn apply_all(self, tz: Tz, v: &[Option<i64>]) -> Vec<Option<i64>> {
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

pub(super) fn trunc_call(
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
        if let Some(out) = tr.apply_micros(tz, &a[0], date, &out_tz) {
            return Ok(out);
        }
        let v = tr.apply_all(tz, &instants(&a[0], tz)?);
        Ok(if date {
            // A start outside ClickHouse's Date range is its nearest end.
            date_array(
                v.into_iter()
                    .map(|d| d.map(|d| ch_date(d, DateRange::Clamp)))
                    .collect(),
            )
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
