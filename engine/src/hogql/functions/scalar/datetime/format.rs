//! Formatting: `formatDateTime` with ClickHouse's %-codes, and fractional seconds.

use super::*;

/// The months' English names, January first (`%M`, `%b`, `monthName`).
pub(super) const MONTHS: [&str; 12] = [
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

/// `formatDateTime` with ClickHouse's %-codes (MySQL-style: `%i` minutes, `%M` month name).
pub(super) fn format_local(
    l: &chrono::NaiveDateTime,
    fmt: &str,
    frac: &str,
    offset: i64,
) -> String {
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
pub(super) fn fraction(ty: &DataType, micros: i64) -> String {
    let us = micros.rem_euclid(MICROS);
    match ty {
        DataType::Timestamp(TimeUnit::Millisecond, _) => format!("{:03}", us / 1000),
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _) => {
            format!("{us:06}")
        }
        _ => "000000".to_string(),
    }
}

pub(super) fn format_call(
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
                let off = super::super::time::offset_at(tz, m);
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
