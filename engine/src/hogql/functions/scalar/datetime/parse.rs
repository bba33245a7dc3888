//! `parseDateTime(text[, format[, zone]])`: text read by a MySQL-style format as ClickHouse
//! reads it (`%Y-%m-%d %H:%i:%s` by default), into a DateTime in the zone. Numbers have fixed
//! widths (`%c`, `%e`, `%k`, `%l` take one or two digits), names match in any case, the
//! whole text must be read and every field must be in range (years 1970 to 2106), else the
//! call fails, as in ClickHouse. A format with a specifier outside the supported set is
//! refused when the call is planned.

use super::*;

/// One piece of a format.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Piece {
    Lit(String),
    /// A specifier letter (composites like `%F` already expanded).
    Spec(char),
}

const SUPPORTED: &str = "YymcdeHkhIlisSfpjbMaW";

/// Splits a format into pieces, expanding `%F`, `%T`, `%D`, `%R`, `%r`.
pub(super) fn compile(fmt: &str) -> Result<Vec<Piece>, String> {
    let mut out = vec![];
    let mut lit = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            lit.push(c);
            continue;
        }
        let Some(s) = chars.next() else {
            return Err("the format ends with a lone %".into());
        };
        let expand = match s {
            '%' => {
                lit.push('%');
                continue;
            }
            'n' => {
                lit.push('\n');
                continue;
            }
            't' => {
                lit.push('\t');
                continue;
            }
            'F' => "%Y-%m-%d",
            'T' => "%H:%i:%s",
            'D' => "%m/%d/%y",
            'R' => "%H:%i",
            'r' => "%h:%i %p",
            s if SUPPORTED.contains(s) => {
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(Piece::Spec(s));
                continue;
            }
            s => return Err(format!("hedgerow does not support the specifier %{s}")),
        };
        if !lit.is_empty() {
            out.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        out.extend(compile(expand)?);
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    Ok(out)
}

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// The local date and time `s` spells in the format.
pub(super) fn parse_with(s: &str, pieces: &[Piece]) -> Result<NaiveDateTime, String> {
    let b = s.as_bytes();
    let mut pos = 0usize;
    let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
    let (mut hour, mut minute, mut second) = (0i64, 0i64, 0i64);
    let mut day_of_year: Option<i64> = None;
    let mut half_day = false;
    let mut pm: Option<bool> = None;
    let num = |pos: &mut usize, min: usize, max: usize, what: char| -> Result<i64, String> {
        let start = *pos;
        while *pos < b.len() && *pos - start < max && b[*pos].is_ascii_digit() {
            *pos += 1;
        }
        if *pos - start < min {
            return Err(format!(
                "Unable to parse fragment %{what} from {}",
                &s[start.min(s.len())..]
            ));
        }
        s[start..*pos]
            .parse::<i64>()
            .map_err(|e| format!("Unable to parse fragment %{what}: {e}"))
    };
    let name =
        |pos: &mut usize, names: &[&str], short: bool, what: char| -> Result<usize, String> {
            for (i, n) in names.iter().enumerate() {
                let n = if short { &n[..3] } else { n };
                let end = *pos + n.len();
                if end <= b.len() && s.is_char_boundary(end) && s[*pos..end].eq_ignore_ascii_case(n)
                {
                    *pos = end;
                    return Ok(i);
                }
            }
            Err(format!(
                "Unable to parse fragment %{what} from {}",
                &s[*pos..]
            ))
        };
    for p in pieces {
        match p {
            Piece::Lit(l) => {
                if !s[pos..].starts_with(l.as_str()) {
                    return Err(format!(
                        "Unable to parse fragment LITERAL from {}: literal {l} is expected",
                        &s[pos..]
                    ));
                }
                pos += l.len();
            }
            Piece::Spec(c) => match c {
                'Y' => year = num(&mut pos, 4, 4, 'Y')?,
                'y' => {
                    let y = num(&mut pos, 2, 2, 'y')?;
                    year = if y < 70 { 2000 + y } else { 1900 + y };
                }
                'm' => month = num(&mut pos, 2, 2, 'm')?,
                'c' => month = num(&mut pos, 1, 2, 'c')?,
                'd' => day = num(&mut pos, 2, 2, 'd')?,
                'e' => {
                    if b.get(pos) == Some(&b' ') {
                        pos += 1;
                        day = num(&mut pos, 1, 1, 'e')?;
                    } else {
                        day = num(&mut pos, 1, 2, 'e')?;
                    }
                }
                'H' => hour = num(&mut pos, 2, 2, 'H')?,
                'k' => hour = num(&mut pos, 1, 2, 'k')?,
                'h' | 'I' => {
                    hour = num(&mut pos, 2, 2, *c)?;
                    half_day = true;
                }
                'l' => {
                    hour = num(&mut pos, 1, 2, 'l')?;
                    half_day = true;
                }
                'i' => minute = num(&mut pos, 2, 2, 'i')?,
                's' | 'S' => second = num(&mut pos, 2, 2, *c)?,
                'f' => {
                    num(&mut pos, 1, 6, 'f')?;
                }
                'j' => day_of_year = Some(num(&mut pos, 3, 3, 'j')?),
                'p' => pm = Some(name(&mut pos, &["AM", "PM"], false, 'p')? == 1),
                'b' => month = name(&mut pos, &super::format::MONTHS, true, 'b')? as i64 + 1,
                'M' => month = name(&mut pos, &super::format::MONTHS, false, 'M')? as i64 + 1,
                'a' => {
                    name(&mut pos, &DAYS, true, 'a')?;
                }
                'W' => {
                    name(&mut pos, &DAYS, false, 'W')?;
                }
                _ => return Err(format!("unsupported specifier %{c}")),
            },
        }
    }
    if pos < b.len() {
        return Err(format!(
            "Invalid format input {s} is malformed at {}",
            &s[pos..]
        ));
    }
    if !(1970..=2106).contains(&year) {
        return Err(format!(
            "Value {year} for year must be in the range [1970, 2106]"
        ));
    }
    if half_day {
        if !(1..=12).contains(&hour) {
            return Err(format!(
                "Value {hour} for hour must be in the range [1, 12]"
            ));
        }
        hour %= 12;
        if pm == Some(true) {
            hour += 12;
        }
    } else {
        if !(0..=23).contains(&hour) {
            return Err(format!(
                "Value {hour} for hour must be in the range [0, 23]"
            ));
        }
        if pm == Some(true) && hour < 12 {
            hour += 12;
        }
    }
    if !(0..=59).contains(&minute) || !(0..=59).contains(&second) {
        return Err(format!(
            "Invalid time, out of range (minute: {minute} second: {second})"
        ));
    }
    let date = match day_of_year {
        Some(n) => NaiveDate::from_yo_opt(year as i32, n as u32).ok_or_else(|| {
            format!("Invalid day of year, out of range (year: {year} day of year: {n})")
        })?,
        None => {
            if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
                return Err(format!(
                    "Invalid date, out of range (year: {year} month: {month} day_of_month: {day})"
                ));
            }
            NaiveDate::from_ymd_opt(year as i32, month as u32, day as u32).ok_or_else(|| {
                format!(
                    "Invalid date, out of range (year: {year} month: {month} day_of_month: {day})"
                )
            })?
        }
    };
    date.and_hms_opt(hour as u32, minute as u32, second as u32)
        .ok_or_else(|| "Invalid time".to_string())
}

pub(super) fn parse_date_time(args: Vec<Expr>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let fmt = match args.get(1) {
        Some(e) => lit_str(e).ok_or_else(|| {
            invalid("The format argument of `parseDateTime` must be a constant string")
        })?,
        None => "%Y-%m-%d %H:%i:%s".to_string(),
    };
    let pieces = compile(&fmt).map_err(|e| invalid(format!("parseDateTime: {e}")))?;
    let (tz, tz_name) = zone(&DataType::Null, args.get(2), ctx)?;
    let t = type_of(&args[0], ctx)?;
    if !(super::super::is_string(&t) || t == DataType::Null) {
        return Err(invalid(format!(
            "Illegal type {t} of the first argument of function `parseDateTime`, expected a String"
        )));
    }
    let out_tz = tz_name.clone();
    let k = kernel(move |a, _| {
        let s = cast(&a[0], &DataType::Utf8)?;
        let mut v = Vec::with_capacity(s.len());
        for x in s.as_string::<i32>().iter() {
            match x {
                None => v.push(None),
                Some(x) => {
                    let l = parse_with(x, &pieces).map_err(|e| {
                        datafusion::error::DataFusionError::Execution(format!("parseDateTime: {e}"))
                    })?;
                    // A DateTime is 32 unsigned bits of seconds: past them it wraps.
                    let secs = from_local(tz, l).div_euclid(MICROS);
                    v.push(Some(secs.rem_euclid(1 << 32)));
                }
            }
        }
        Ok(seconds_array(v, &out_tz))
    });
    let mut call_args = args;
    call_args.truncate(1);
    Ok(call(
        "parseDateTime",
        format!("{fmt}/{tz_name}"),
        ts_type(TimeUnit::Second, &tz_name),
        Nulls::FromFirst,
        call_args,
        k,
    ))
}

#[cfg(test)]
mod tests {
    use super::{compile, parse_with};

    fn p(s: &str, f: &str) -> Result<String, String> {
        parse_with(s, &compile(f)?).map(|l| l.format("%Y-%m-%d %H:%M:%S").to_string())
    }

    #[test]
    fn parse_like_clickhouse() {
        let ok = |s: &str, f: &str, want: &str| assert_eq!(p(s, f).as_deref(), Ok(want), "{s} {f}");
        ok(
            "2021-01-04 23:00:00",
            "%Y-%m-%d %H:%i:%s",
            "2021-01-04 23:00:00",
        );
        ok(
            "2021-01-04+23:00:00",
            "%Y-%m-%d+%H:%i:%s",
            "2021-01-04 23:00:00",
        );
        ok("21-01-04", "%y-%m-%d", "2021-01-04 00:00:00");
        ok("70-01-04", "%y-%m-%d", "1970-01-04 00:00:00");
        ok("Jan 04 2021", "%b %d %Y", "2021-01-04 00:00:00");
        ok("JANUARY 04 2021", "%M %d %Y", "2021-01-04 00:00:00");
        ok(
            "2021-01-04 11:00:00 PM",
            "%Y-%m-%d %h:%i:%s %p",
            "2021-01-04 23:00:00",
        );
        ok(
            "2021-01-04 12:00:00 AM",
            "%Y-%m-%d %h:%i:%s %p",
            "2021-01-04 00:00:00",
        );
        ok("2021-004", "%Y-%j", "2021-01-04 00:00:00");
        ok("2021-1-4 3", "%Y-%c-%e %l", "2021-01-04 03:00:00");
        ok("2021-01- 4", "%Y-%m-%e", "2021-01-04 00:00:00");
        ok("01/04/21", "%D", "2021-01-04 00:00:00");
        ok("11:05 PM", "%r", "1970-01-01 23:05:00");
        ok(
            "2021-01-04 23:00:00.123",
            "%Y-%m-%d %H:%i:%s.%f",
            "2021-01-04 23:00:00",
        );
        ok("Monday 2021-01-04", "%W %Y-%m-%d", "2021-01-04 00:00:00");
        for (s, f) in [
            ("2021-1-4", "%Y-%m-%d"),
            ("2021-01-04 23:00:00 extra", "%Y-%m-%d %H:%i:%s"),
            ("2021-02-30", "%Y-%m-%d"),
            ("2021-01-04 25:00:00", "%Y-%m-%d %H:%i:%s"),
            ("2021-01-04 13", "%Y-%m-%d %h"),
            ("2021-366", "%Y-%j"),
            ("1969-12-31", "%Y-%m-%d"),
            ("2021-01-04 23:00:00.1234567", "%Y-%m-%d %H:%i:%s.%f"),
            ("2021-01-004", "%Y-%m-%e"),
        ] {
            assert!(p(s, f).is_err(), "{s} {f}");
        }
        assert!(compile("%Q").is_err());
    }
}
