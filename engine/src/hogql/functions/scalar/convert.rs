//! Type conversions. PostHog's `toInt`/`toFloat` are ClickHouse's
//! `accurateCastOrNull(x, 'Int64'|'Float64')`: a string must be exactly a number, a float
//! must be integral to become an Int64, anything else is NULL.

use std::sync::Arc;

use chrono_tz::Tz;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit, UInt64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{Cast, Expr, TryCast};

use super::time::{MICROS, date_of_days, local};
use super::udf::{Nulls, call, kernel};
use super::{FnContext, FunctionError, invalid, is_string, lit_str, type_of};
use crate::hogql::functions::budget::Output;

/// A Float64 as ClickHouse prints it: shortest round-trip digits, exponent form below 1e-6
/// and from 1e21 on, `inf`/`-inf`/`nan`.
pub(crate) fn format_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A string that is exactly an integer (`[+-]digits`), as accurateCastOrNull reads it.
fn parse_int(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = match b.first() {
        Some(b'+' | b'-') => &b[1..],
        _ => b,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

use crate::storage::layout::parse_float;

/// Int64 conversion; `or_zero` turns failures (not NULL inputs) into 0.
fn to_int(name: &str, a: Expr, or_zero: bool, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    let in_ty = ty.clone();
    let k = kernel(move |arr, _| {
        let x = &arr[0];
        let fail = if or_zero { Some(0) } else { None };
        let v: Int64Array = match &in_ty {
            t if is_string(t) => {
                let s = cast(x, &DataType::Utf8)?;
                s.as_string::<i32>()
                    .iter()
                    .map(|s| s.map(|s| parse_int(s).or(fail)).unwrap_or(None))
                    .collect()
            }
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                let f = cast(x, &DataType::Float64)?;
                f.as_primitive::<Float64Type>()
                    .iter()
                    .map(|f| {
                        let f = f?;
                        if f.fract() == 0.0
                            && (-9.223372036854776e18..9.223372036854776e18).contains(&f)
                        {
                            Some(f as i64)
                        } else {
                            fail
                        }
                    })
                    .collect()
            }
            DataType::UInt64 => x
                .as_primitive::<UInt64Type>()
                .iter()
                .map(|v| v.map(|v| i64::try_from(v).ok().or(fail)).unwrap_or(None))
                .collect(),
            DataType::Timestamp(..) => {
                let m = super::time::instants(x, Tz::UTC)?;
                m.into_iter()
                    .map(|m| m.map(|m| m.div_euclid(MICROS)))
                    .collect()
            }
            _ => {
                let c = cast(x, &DataType::Int64)?;
                c.as_primitive::<Int64Type>().iter().collect()
            }
        };
        Ok(Arc::new(v) as ArrayRef)
    });
    let nulls = if or_zero {
        Nulls::FromFirst
    } else {
        Nulls::Always
    };
    Ok(call(
        name,
        format!("{or_zero}"),
        DataType::Int64,
        nulls,
        vec![a],
        k,
    ))
}

fn to_float(
    name: &str,
    a: Expr,
    or_zero: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    let in_ty = ty.clone();
    let k = kernel(move |arr, _| {
        let x = &arr[0];
        let fail = if or_zero { Some(0.0) } else { None };
        let v: Float64Array = if is_string(&in_ty) {
            let s = cast(x, &DataType::Utf8)?;
            s.as_string::<i32>()
                .iter()
                .map(|s| s.map(|s| parse_float(s).or(fail)).unwrap_or(None))
                .collect()
        } else if let DataType::Timestamp(..) = in_ty {
            let m = super::time::instants(x, Tz::UTC)?;
            m.into_iter()
                .map(|m| m.map(|m| m.div_euclid(MICROS) as f64))
                .collect()
        } else if in_ty.is_integer() && !or_zero {
            // accurateCastOrNull(x, 'Float64'): NULL where the integer has no exact Float64
            let exact = |i: i128| {
                let f = i as f64;
                (f as i128 == i).then_some(f)
            };
            if in_ty.is_unsigned_integer() {
                let c = cast(x, &DataType::UInt64)?;
                c.as_primitive::<datafusion::arrow::datatypes::UInt64Type>()
                    .iter()
                    .map(|v| v.and_then(|v| exact(i128::from(v))))
                    .collect()
            } else {
                let c = cast(x, &DataType::Int64)?;
                c.as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|v| v.and_then(|v| exact(i128::from(v))))
                    .collect()
            }
        } else {
            let c = cast(x, &DataType::Float64)?;
            c.as_primitive::<Float64Type>().iter().collect()
        };
        Ok(Arc::new(v) as ArrayRef)
    });
    let nulls = if or_zero {
        Nulls::FromFirst
    } else {
        Nulls::Always
    };
    Ok(call(
        name,
        format!("{or_zero}"),
        DataType::Float64,
        nulls,
        vec![a],
        k,
    ))
}

/// `[+-]digits[.digits]` as a Decimal64 with `scale` digits, the extra digits cut off (as
/// ClickHouse's `accurateCastOrNull(x, 'Decimal64(S)')`); None when it does not fit 18 digits.
fn decimal_of_text(t: &str, scale: u32) -> Option<i128> {
    let (neg, t) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let frac: String = frac
        .chars()
        .chain(std::iter::repeat('0'))
        .take(scale as usize)
        .collect();
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 18 {
        return None;
    }
    let v: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `toDecimal(x, S)`: PostHog's `accurateCastOrNull(x, 'Decimal64(S)')`, a nullable
/// Decimal(18, S): extra digits are cut off, values that do not read or fit are NULL.
fn to_decimal(a: Expr, scale: i8, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    if !(ty.is_numeric() || is_string(&ty) || matches!(ty, DataType::Null | DataType::Boolean)) {
        return Err(invalid(format!(
            "Illegal type {ty} of argument of function `toDecimal`"
        )));
    }
    let ret = DataType::Decimal128(18, scale);
    let out = ret.clone();
    let k = kernel(move |arr, _| {
        let x = &arr[0];
        let s = scale as u32;
        let v: datafusion::arrow::array::Decimal128Array =
            if x.data_type().is_integer() || matches!(x.data_type(), DataType::Boolean) {
                let c = cast(x, &DataType::Int64)?;
                c.as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|v| {
                        let v = (v? as i128).checked_mul(10i128.pow(s))?;
                        (v.abs() < 10i128.pow(18)).then_some(v)
                    })
                    .collect()
            } else if x.data_type().is_floating() {
                let c = cast(x, &DataType::Float64)?;
                c.as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| {
                        // Scaled in binary and cut, as ClickHouse: 0.29 at scale 2 is 0.28.
                        let v = (v? * 10f64.powi(s as i32)).trunc();
                        (v.is_finite() && v.abs() < 1e18).then_some(v as i128)
                    })
                    .collect()
            } else {
                let c = cast(x, &DataType::Utf8)?;
                c.as_string::<i32>()
                    .iter()
                    .map(|t| decimal_of_text(t?, s))
                    .collect()
            };
        Ok(Arc::new(v.with_precision_and_scale(18, scale)?) as ArrayRef)
    });
    Ok(call(
        "toDecimal",
        format!("{scale}"),
        out,
        Nulls::Always,
        vec![a],
        k,
    ))
}

/// `toString(x[, tz])` as ClickHouse prints values: DateTime as `YYYY-MM-DD hh:mm:ss` in its
/// zone (with the type's fraction digits), Date as `YYYY-MM-DD`, Bool as true/false,
/// floats in ClickHouse's shortest form.
/// A value inside an array or tuple as ClickHouse's `toString` prints it: strings, dates and
/// times quoted (`'` and `\` escaped), NULL as `NULL`, floats in ClickHouse's form.
fn nested_text(a: &ArrayRef, row: usize) -> String {
    use datafusion::arrow::util::display::array_value_to_string;
    if a.is_null(row) {
        return "NULL".into();
    }
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    match a.data_type() {
        DataType::List(_) | DataType::LargeList(_) => {
            let l = match a.data_type() {
                DataType::List(_) => a.as_list::<i32>().value(row),
                _ => a.as_list::<i64>().value(row),
            };
            let items: Vec<String> = (0..l.len()).map(|i| nested_text(&l, i)).collect();
            format!("[{}]", items.join(","))
        }
        DataType::Struct(_) => {
            let items: Vec<String> = a
                .as_struct()
                .columns()
                .iter()
                .map(|c| nested_text(c, row))
                .collect();
            format!("({})", items.join(","))
        }
        DataType::Float32 | DataType::Float64 => {
            let f = cast(&a.slice(row, 1), &DataType::Float64)
                .ok()
                .map(|f| f.as_primitive::<Float64Type>().value(0));
            f.map(format_float).unwrap_or_default()
        }
        DataType::Boolean => if a.as_boolean().value(row) {
            "true"
        } else {
            "false"
        }
        .into(),
        t if t.is_numeric() => array_value_to_string(a, row).unwrap_or_default(),
        DataType::Date32 | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            quote(&array_value_to_string(a, row).unwrap_or_default())
        }
        _ => {
            // DateTimes and the rest: their own toString text, quoted.
            let one = a.slice(row, 1);
            match cast(&one, &DataType::Utf8) {
                Ok(c) => quote(c.as_string::<i32>().value(0)),
                Err(_) => String::new(),
            }
        }
    }
}

/// Whether a Boolean expression is a ClickHouse Bool rather than a UInt8 condition.
fn is_bool_value(e: &Expr) -> bool {
    match e {
        Expr::Literal(..) | Expr::Column(_) => true,
        Expr::Cast(c) => c.field.data_type() == &DataType::Boolean || is_bool_value(&c.expr),
        Expr::Alias(a) => is_bool_value(&a.expr),
        Expr::ScalarFunction(f) => f.name() == "toBool",
        _ => false,
    }
}

pub(crate) fn to_string_expr(
    a: Expr,
    tz_arg: Option<&Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    if is_string(&ty) && !matches!(ty, DataType::Utf8) {
        return Ok(Expr::Cast(Cast::new(Box::new(a), DataType::Utf8)));
    }
    // Comparisons and predicates (`1 = 1`, `has(…)`, `isNull(…)`) are ClickHouse's UInt8 and
    // print as 1/0; only Bool values (`true`, `toBool(…)`, Bool columns) print as true/false.
    if ty == DataType::Boolean && !is_bool_value(&a) {
        let a = Expr::Cast(Cast::new(Box::new(a), DataType::UInt8));
        return to_string_expr(a, tz_arg, ctx);
    }
    if matches!(ty, DataType::Utf8) {
        return Ok(a);
    }
    let tz_name = match (tz_arg, &ty) {
        (Some(e), _) => {
            lit_str(e).ok_or_else(|| invalid("The time zone argument must be a constant string"))?
        }
        (None, DataType::Timestamp(_, Some(tz))) => tz.to_string(),
        _ => ctx.timezone.to_string(),
    };
    let tz: Tz = tz_name
        .parse()
        .map_err(|_| invalid(format!("Unknown time zone `{tz_name}`")))?;
    let in_ty = ty.clone();
    let k = kernel(move |arr, n| {
        let x = &arr[0];
        let v: StringArray = match &in_ty {
            DataType::Timestamp(unit, _) => {
                let m = super::time::instants(x, tz)?;
                m.into_iter()
                    .map(|m| {
                        let m = m?;
                        let l = local(tz, m)?;
                        let base = l.format("%Y-%m-%d %H:%M:%S").to_string();
                        let us = m.rem_euclid(MICROS);
                        Some(match unit {
                            TimeUnit::Second => base,
                            TimeUnit::Millisecond => format!("{base}.{:03}", us / 1000),
                            _ => format!("{base}.{us:06}"),
                        })
                    })
                    .collect()
            }
            DataType::Date32 => x
                .as_primitive::<datafusion::arrow::datatypes::Date32Type>()
                .iter()
                .map(|d| {
                    d.and_then(date_of_days)
                        .map(|d| d.format("%Y-%m-%d").to_string())
                })
                .collect(),
            DataType::Boolean => x
                .as_boolean()
                .iter()
                .map(|b| b.map(|b| if b { "true" } else { "false" }.to_string()))
                .collect(),
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                let f = cast(x, &DataType::Float64)?;
                let f32_in = matches!(in_ty, DataType::Float32 | DataType::Float16);
                f.as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| {
                        v.map(|v| {
                            if f32_in {
                                format_float((v as f32).to_string().parse().unwrap_or(v))
                            } else {
                                format_float(v)
                            }
                        })
                    })
                    .collect()
            }
            DataType::Null => (0..n).map(|_| None::<String>).collect(),
            DataType::FixedSizeBinary(16) => {
                return Ok(crate::storage::ids::to_text(x.as_ref())?);
            }
            _ => {
                // Arrays, maps and tuples print to about as many bytes as they hold:
                // reserved before Arrow builds the text.
                if matches!(
                    in_ty,
                    DataType::List(_)
                        | DataType::LargeList(_)
                        | DataType::FixedSizeList(..)
                        | DataType::Map(..)
                        | DataType::Struct(_)
                ) {
                    Output::new("toString").take(x.get_array_memory_size())?;
                }
                // Arrays and tuples as ClickHouse prints them: `[1,2]`, `('a',1)`.
                if matches!(
                    in_ty,
                    DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_)
                ) {
                    let v: StringArray = (0..x.len())
                        .map(|r| x.is_valid(r).then(|| nested_text(x, r)))
                        .collect();
                    return Ok(Arc::new(v) as ArrayRef);
                }
                let c = cast(x, &DataType::Utf8)?;
                c.as_string::<i32>().iter().collect()
            }
        };
        Ok(Arc::new(v) as ArrayRef)
    });
    Ok(call(
        "toString",
        tz_name,
        DataType::Utf8,
        Nulls::FromFirst,
        vec![a],
        k,
    ))
}

fn to_bool(a: Expr) -> Expr {
    let k = kernel(|arr, _| {
        let x = &arr[0];
        let v: BooleanArray = match x.data_type() {
            DataType::Boolean => x.as_boolean().clone(),
            t if is_string(t) => {
                let s = cast(x, &DataType::Utf8)?;
                s.as_string::<i32>()
                    .iter()
                    .map(|s| match s?.to_ascii_lowercase().as_str() {
                        "true" | "1" | "yes" | "on" | "t" | "y" | "enable" | "enabled" => {
                            Some(true)
                        }
                        "false" | "0" | "no" | "off" | "f" | "n" | "disable" | "disabled" => {
                            Some(false)
                        }
                        _ => None,
                    })
                    .collect()
            }
            _ => {
                let f = cast(x, &DataType::Float64)?;
                f.as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.map(|v| v != 0.0))
                    .collect()
            }
        };
        Ok(Arc::new(v) as ArrayRef)
    });
    call(
        "toBool",
        "",
        DataType::Boolean,
        Nulls::FromFirst,
        vec![a],
        k,
    )
}

/// `toUUID`: HogQL's UUID type is 16 bytes (`FixedSizeBinary(16)`, what `uuid` and
/// `person_id` are); text in any spelling `uuid` parses becomes one, anything else NULL.
pub(crate) fn to_uuid(a: Expr) -> Expr {
    let k = kernel(|arr, _| {
        let x = &arr[0];
        if is_string(x.data_type()) {
            let text = cast(x, &DataType::Utf8)?;
            let trimmed: StringArray = text
                .as_string::<i32>()
                .iter()
                .map(|s| s.map(str::trim))
                .collect();
            return Ok(Arc::new(crate::storage::ids::to_uuid(&trimmed)?) as ArrayRef);
        }
        Ok(Arc::new(crate::storage::ids::to_uuid(x.as_ref())?) as ArrayRef)
    });
    call(
        "toUUID",
        "",
        crate::storage::ids::UUID_TYPE,
        Nulls::Always,
        vec![a],
        k,
    )
}

/// A stored id column (`uuid`, `person_id`) as 16 bytes: the files' binary values, or the
/// text of a table written before 16-byte ids. Every stored value is a UUID, so the column
/// stays as nullable as it was.
pub(crate) fn stored_uuid(a: Expr) -> Expr {
    let k =
        kernel(|arr, _| Ok(Arc::new(crate::storage::ids::to_uuid(arr[0].as_ref())?) as ArrayRef));
    call(
        "toUUID",
        "stored",
        crate::storage::ids::UUID_TYPE,
        Nulls::FromFirst,
        vec![a],
        k,
    )
}

/// The key ClickHouse orders UUIDs by: its UUID is a UInt128 whose high half is the text's
/// second half, so `ORDER BY` compares bytes 8–15 first, then bytes 0–7.
pub(crate) fn uuid_order_key(a: Expr) -> Expr {
    let k = kernel(|arr, _| {
        let ids = crate::storage::ids::to_uuid(arr[0].as_ref())?;
        let mut out =
            datafusion::arrow::array::FixedSizeBinaryBuilder::with_capacity(ids.len(), 16);
        for i in 0..ids.len() {
            if ids.is_null(i) {
                out.append_null();
            } else {
                let v = ids.value(i);
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&v[8..]);
                key[8..].copy_from_slice(&v[..8]);
                out.append_value(key)?;
            }
        }
        Ok(Arc::new(out.finish()) as ArrayRef)
    });
    call(
        "toUUID",
        "order",
        crate::storage::ids::UUID_TYPE,
        Nulls::FromFirst,
        vec![a],
        k,
    )
}

/// A UUID as PostHog shows it: lowercase hyphenated text.
pub(crate) fn uuid_text(a: Expr) -> Expr {
    let k = kernel(|arr, _| Ok(crate::storage::ids::to_text(arr[0].as_ref())?));
    call(
        "toString",
        "uuid",
        DataType::Utf8,
        Nulls::FromFirst,
        vec![a],
        k,
    )
}

/// `toJSONString(x)`: the value as JSON (ClickHouse's): numbers bare (`nan`/`inf` as
/// `null`), Bool as `true`/`false`, strings, dates and times quoted, arrays and tuples as JSON
/// arrays (NULL elements as `null`), maps as objects. A NULL value is NULL.
fn to_json_string(a: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    if matches!(
        ty,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Struct(_)
            | DataType::Map(..)
    ) {
        json_nested_supported(&ty)?;
        let k = kernel(|arr, _| {
            let mut budget = Output::new("toJSONString");
            let mut out = StringBuilder::new();
            let mut buf = String::new();
            for i in 0..arr[0].len() {
                if arr[0].is_null(i) {
                    out.append_null();
                    continue;
                }
                buf.clear();
                write_json(&arr[0], i, &mut buf)?;
                budget.take(buf.len())?;
                out.append_value(&buf);
            }
            Ok(Arc::new(out.finish()) as ArrayRef)
        });
        return Ok(call(
            "toJSONString",
            "nested",
            DataType::Utf8,
            Nulls::FromFirst,
            vec![a],
            k,
        ));
    }
    let numeric = ty.is_numeric();
    let boolean = matches!(ty, DataType::Boolean);
    // Booleans are written from the values, everything else from its ClickHouse text.
    let s = if boolean {
        a
    } else {
        to_string_expr(a, None, ctx)?
    };
    let k = kernel(move |arr, _| {
        let mut budget = Output::new("toJSONString");
        let mut out = StringBuilder::new();
        if boolean {
            for b in arr[0].as_boolean().iter() {
                out.append_option(b.map(|b| if b { "true" } else { "false" }));
            }
            return Ok(Arc::new(out.finish()) as ArrayRef);
        }
        let s = cast(&arr[0], &DataType::Utf8)?;
        let mut buf = String::new();
        for s in s.as_string::<i32>().iter() {
            match s {
                None => out.append_null(),
                Some(s) if numeric && !matches!(s, "nan" | "inf" | "-inf") => out.append_value(s),
                Some(_) if numeric => out.append_value("null"),
                Some(s) => {
                    buf.clear();
                    json_quote(s, &mut buf);
                    budget.take(buf.len())?;
                    out.append_value(&buf);
                }
            }
        }
        Ok(Arc::new(out.finish()) as ArrayRef)
    });
    Ok(call(
        "toJSONString",
        format!("{numeric}/{boolean}"),
        DataType::Utf8,
        Nulls::FromFirst,
        vec![s],
        k,
    ))
}

/// Whether [`write_json`] writes every value a nested type can hold; the error names the
/// type it does not.
fn json_nested_supported(ty: &DataType) -> Result<(), FunctionError> {
    match ty {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            json_nested_supported(f.data_type())
        }
        DataType::Struct(fs) => fs
            .iter()
            .try_for_each(|f| json_nested_supported(f.data_type())),
        DataType::Map(f, _) => json_nested_supported(f.data_type()),
        DataType::Null
        | DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Date32 => Ok(()),
        t if t.is_numeric() => Ok(()),
        t => Err(invalid(format!(
            "toJSONString of an array, tuple or map holding {t} is not supported"
        ))),
    }
}

/// `s` as a JSON string.
fn json_quote(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Row `i` of `a` as JSON (a NULL as `null`), for the types [`json_nested_supported`] lets
/// through.
fn write_json(a: &ArrayRef, i: usize, out: &mut String) -> Result<()> {
    use std::fmt::Write;
    if a.is_null(i) {
        out.push_str("null");
        return Ok(());
    }
    let list = |values: ArrayRef, out: &mut String| -> Result<()> {
        out.push('[');
        for j in 0..values.len() {
            if j > 0 {
                out.push(',');
            }
            write_json(&values, j, out)?;
        }
        out.push(']');
        Ok(())
    };
    match a.data_type() {
        DataType::Boolean => out.push_str(if a.as_boolean().value(i) {
            "true"
        } else {
            "false"
        }),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let s = cast(&a.slice(i, 1), &DataType::Utf8)?;
            json_quote(s.as_string::<i32>().value(0), out);
        }
        DataType::Date32 => {
            let d = a
                .as_primitive::<datafusion::arrow::datatypes::Date32Type>()
                .value(i);
            match date_of_days(d) {
                Some(d) => {
                    let _ = write!(out, "\"{d}\"");
                }
                None => out.push_str("null"),
            }
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let x = cast(&a.slice(i, 1), &DataType::Float64)?;
            let x = x.as_primitive::<Float64Type>().value(0);
            if x.is_finite() {
                out.push_str(&format_float(x));
            } else {
                out.push_str("null");
            }
        }
        t if t.is_numeric() => {
            let s = cast(&a.slice(i, 1), &DataType::Utf8)?;
            out.push_str(s.as_string::<i32>().value(0));
        }
        DataType::List(_) => list(a.as_list::<i32>().value(i), out)?,
        DataType::LargeList(_) => list(a.as_list::<i64>().value(i), out)?,
        DataType::FixedSizeList(..) => list(a.as_fixed_size_list().value(i), out)?,
        DataType::Struct(_) => {
            let st = a.as_struct();
            out.push('[');
            for (j, c) in st.columns().iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                write_json(c, i, out)?;
            }
            out.push(']');
        }
        DataType::Map(..) => {
            let m = a.as_map();
            let entries = m.value(i);
            let keys = cast(entries.column(0), &DataType::Utf8)?;
            let keys = keys.as_string::<i32>();
            out.push('{');
            for j in 0..entries.len() {
                if j > 0 {
                    out.push(',');
                }
                json_quote(keys.value(j), out);
                out.push(':');
                write_json(entries.column(1), j, out)?;
            }
            out.push('}');
        }
        _ => out.push_str("null"),
    }
    Ok(())
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let a = args.remove(0);
    let numeric_cast = |t: DataType, a: Expr| -> Result<Expr, FunctionError> {
        let ty = type_of(&a, ctx)?;
        Ok(if is_string(&ty) {
            Expr::TryCast(TryCast::new(Box::new(a), t))
        } else {
            Expr::Cast(Cast::new(Box::new(a), t))
        })
    };
    match name {
        "toString" => to_string_expr(a, args.first(), ctx),
        "toInt" | "toIntOrNull" | "toInt64OrNull" => to_int(name, a, false, ctx),
        "toIntOrZero" | "toInt64OrZero" => to_int(name, a, true, ctx),
        "toFloat" | "toFloatOrNull" | "toFloat64OrNull" => to_float(name, a, false, ctx),
        "toFloatOrZero" | "toFloat64OrZero" => to_float(name, a, true, ctx),
        // toFloat64OrDefault: the default (0 unless given) where the value does not read
        // as a number or is NULL.
        "toFloatOrDefault" => {
            let d = match args.pop() {
                Some(d) => Expr::Cast(Cast::new(Box::new(d), DataType::Float64)),
                None => Expr::Literal(datafusion::common::ScalarValue::Float64(Some(0.0)), None),
            };
            Ok(datafusion::functions::expr_fn::coalesce(vec![
                to_float(name, a, false, ctx)?,
                d,
            ]))
        }
        "toDecimal" => {
            let scale = args.pop().expect("arity checked");
            let scale = super::datetime::const_int(&scale)
                .filter(|s| (0..=18).contains(s))
                .ok_or_else(|| {
                    invalid("The scale argument of `toDecimal` must be a constant from 0 to 18")
                })?;
            to_decimal(a, scale as i8, ctx)
        }
        "toInt8" => numeric_cast(DataType::Int8, a),
        "toInt16" => numeric_cast(DataType::Int16, a),
        "toInt32" => numeric_cast(DataType::Int32, a),
        "toInt64" => numeric_cast(DataType::Int64, a),
        "toUInt8" => numeric_cast(DataType::UInt8, a),
        "toUInt16" => numeric_cast(DataType::UInt16, a),
        "toUInt32" => numeric_cast(DataType::UInt32, a),
        "toUInt64" => numeric_cast(DataType::UInt64, a),
        "toFloat32" => numeric_cast(DataType::Float32, a),
        "toFloat64" => numeric_cast(DataType::Float64, a),
        "toBool" => Ok(to_bool(a)),
        "toUUID" => Ok(to_uuid(a)),
        "toJSONString" => to_json_string(a, ctx),
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::arrow::datatypes::DataType;

    #[test]
    fn conversions() {
        check(vec![
            (call("toInt", vec![s("12")]), "12"),
            (call("toInt", vec![s("12.5")]), "\\N"),
            (call("toInt", vec![s(" 12")]), "\\N"),
            (call("toInt", vec![s("+5")]), "5"),
            (call("toInt", vec![s("")]), "\\N"),
            (call("toInt", vec![fl(12.7)]), "\\N"),
            (call("toInt", vec![fl(12.0)]), "12"),
            (call("toIntOrZero", vec![s("x")]), "0"),
            (call("toIntOrZero", vec![s("-5")]), "-5"),
            (call("toFloat", vec![s("12.5")]), "12.5"),
            (call("toFloat", vec![s("1e3")]), "1000"),
            (call("toFloat", vec![s("abc")]), "\\N"),
            (call("toFloatOrZero", vec![s("2.5x")]), "0"),
            (call("toInt64", vec![s("12")]), "12"),
            (call("toInt64", vec![fl(-12.7)]), "-12"),
            (call("toBool", vec![s("true")]), "true"),
            (call("toBool", vec![i(0)]), "false"),
            (call("toString", vec![i(123)]), "123"),
            (call("toString", vec![fl(-1.5)]), "-1.5"),
            (call("toString", vec![fl(0.1 + 0.2)]), "0.30000000000000004"),
            (call("toString", vec![fl(1e20)]), "100000000000000000000"),
            (call("toString", vec![fl(1e21)]), "1e21"),
            (call("toString", vec![fl(1e-7)]), "1e-7"),
            (call("toString", vec![fl(0.00001)]), "0.00001"),
            (call("toString", vec![fl(f64::INFINITY)]), "inf"),
            (
                call("toString", vec![ts_in("2024-03-05 17:00:00", "UTC")]),
                "2024-03-05 17:00:00.000000",
            ),
            (
                call(
                    "toString",
                    vec![call("toDateTime", vec![i(1709658000), s("UTC")])],
                ),
                "2024-03-05 17:00:00",
            ),
            (
                call("toString", vec![call("toDate", vec![s("2024-03-05")])]),
                "2024-03-05",
            ),
            (call("toJSONString", vec![s("a\"b")]), "\"a\\\"b\""),
            (call("toJSONString", vec![fl(1.5)]), "1.5"),
            (
                call("toUUID", vec![s("550E8400-E29B-41D4-A716-446655440000")]),
                "550e8400-e29b-41d4-a716-446655440000",
            ),
            (call("toUUID", vec![s("x")]), "\\N"),
        ]);
        assert_eq!(typ(call("toInt", vec![s("1")])), DataType::Int64);
        assert_eq!(typ(call("toFloat", vec![s("1")])), DataType::Float64);
        assert_eq!(
            rows(call("toString", vec![c("ts")]))[0],
            "2024-03-10 01:30:00.123456"
        );
        assert_eq!(
            rows(call("toString", vec![c("f")])),
            ["2.5", "-2.5", "0.1", "\\N"]
        );
    }
}
