//! Math functions. `round` rounds floats half to even on their shortest decimal form (so
//! `round(2.675, 2)` is 2.68 and `round(2.5)` is 2, as ClickHouse) and integers half away
//! from zero; `intDiv` truncates toward zero and fails on division by zero like ClickHouse,
//! `intDivOrZero` gives 0 there; `modulo` takes the dividend's sign; `abs` of a signed
//! integer is unsigned. `trunc` rounds toward zero and `roundBankers` half to even (integers
//! too); `moduloOrZero` gives 0 for an integer divisor of 0 and `positiveModulo` adds |b| to
//! a negative remainder. Trigonometric and exponential functions answer Float64 (nan outside
//! their domain), `isNaN`/`isFinite`/`isInfinite` are Booleans, `intExp2`/`intExp10` UInt64
//! (saturating), bit functions compute on Int64.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int8Array, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::functions::expr_fn as f;
use datafusion::logical_expr::{Cast, Expr, Operator, binary_expr, when};

use super::udf::{Nulls, call, kernel};
use super::{FnContext, FunctionError, invalid, type_of};

fn float(e: Expr) -> Expr {
    Expr::Cast(Cast::new(Box::new(e), DataType::Float64))
}

/// Rounds half to even at `n` decimals, reading `x` as its shortest decimal form.
pub(crate) fn round_half_even(x: f64, n: i64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    // ClickHouse scales by 10^n first: where that overflows, the answer is ±inf.
    if n > 0 && (x * 10f64.powi(n.min(400) as i32)).is_infinite() {
        return f64::INFINITY.copysign(x);
    }
    let s = format!("{:e}", x.abs());
    let (mant, exp) = s.split_once('e').expect("exponent form");
    let exp: i64 = exp.parse().expect("exponent");
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    let keep = exp + 1 + n;
    if keep >= digits.len() as i64 {
        return x;
    }
    let sign = x.signum();
    if keep < 0 {
        return 0.0 * sign;
    }
    let keep = keep as usize;
    let mut kept: u128 = digits[..keep]
        .iter()
        .fold(0, |a, d| a * 10 + (d - b'0') as u128);
    let first = digits[keep];
    let rest_nonzero = digits[keep + 1..].iter().any(|&d| d != b'0');
    if first > b'5' || (first == b'5' && (rest_nonzero || kept % 2 == 1)) {
        kept += 1;
    }
    let scale = exp + 1 - keep as i64;
    let v: f64 = format!("{kept}e{scale}").parse().unwrap_or(x.abs());
    v * sign
}

fn pow10(n: i64) -> i128 {
    10i128.pow(n.unsigned_abs().min(38) as u32)
}

#[derive(Debug, Clone, Copy)]
enum Rounding {
    Round,
    /// `roundBankers`: half to even for integers too.
    Bankers,
    Floor,
    Ceil,
    /// `trunc`: toward zero.
    Trunc,
}

fn round_int(x: i64, n: i64, mode: Rounding) -> i64 {
    if n >= 0 {
        return x;
    }
    let p = pow10(n);
    let x = x as i128;
    let q = x.div_euclid(p);
    let r = x.rem_euclid(p);
    let down = q * p;
    let out = match mode {
        Rounding::Floor => down,
        Rounding::Ceil if r == 0 => down,
        Rounding::Ceil => down + p,
        Rounding::Trunc if x < 0 && r != 0 => down + p,
        Rounding::Trunc => down,
        Rounding::Bankers => {
            let twice = 2 * r;
            if twice > p || (twice == p && q % 2 != 0) {
                down + p
            } else {
                down
            }
        }
        Rounding::Round => {
            // Half away from zero.
            let twice = 2 * r;
            if twice > p || (twice == p && x > 0) {
                down + p
            } else {
                down
            }
        }
    };
    out.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn round_float(x: f64, n: i64, mode: Rounding) -> f64 {
    match mode {
        Rounding::Round | Rounding::Bankers => round_half_even(x, n),
        Rounding::Floor | Rounding::Ceil | Rounding::Trunc => {
            let p = 10f64.powi(n.clamp(-300, 300) as i32);
            let y = x * p;
            let y = match mode {
                Rounding::Floor => y.floor(),
                Rounding::Ceil => y.ceil(),
                _ => y.trunc(),
            };
            y / p
        }
    }
}

fn rounding(
    name: &str,
    mut args: Vec<Expr>,
    mode: Rounding,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let x = args.remove(0);
    let n = match args.first() {
        Some(e) => super::datetime::const_int(e).ok_or_else(|| {
            invalid(format!(
                "The scale argument of `{name}` must be a constant integer"
            ))
        })?,
        None => 0,
    };
    let ty = type_of(&x, ctx)?;
    let is_int = ty.is_integer();
    if !is_int && !ty.is_floating() && !matches!(ty, DataType::Null) {
        return Err(invalid(format!(
            "Illegal type {ty} of argument of function `{name}`"
        )));
    }
    let ret = if matches!(ty, DataType::Null) {
        DataType::Float64
    } else {
        ty.clone()
    };
    let out = ret.clone();
    let k = kernel(move |a, _| {
        let r: ArrayRef = if is_int {
            let v = cast(&a[0], &DataType::Int64)?;
            let v: Int64Array = v
                .as_primitive::<Int64Type>()
                .iter()
                .map(|x| x.map(|x| round_int(x, n, mode)))
                .collect();
            Arc::new(v)
        } else {
            let v = cast(&a[0], &DataType::Float64)?;
            let v: Float64Array = v
                .as_primitive::<Float64Type>()
                .iter()
                .map(|x| x.map(|x| round_float(x, n, mode)))
                .collect();
            Arc::new(v)
        };
        Ok(cast(&r, &out)?)
    });
    Ok(call(
        name,
        format!("{mode:?}/{n}"),
        ret,
        Nulls::FromFirst,
        vec![x],
        k,
    ))
}

fn int_div(
    name: &str,
    a: Expr,
    b: Expr,
    or_zero: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let (ta, tb) = (type_of(&a, ctx)?, type_of(&b, ctx)?);
    let floats = ta.is_floating() || tb.is_floating();
    let k = kernel(move |arr, n| {
        let out: Int64Array = if floats {
            let x = cast(&arr[0], &DataType::Float64)?;
            let y = cast(&arr[1], &DataType::Float64)?;
            let (x, y) = (
                x.as_primitive::<Float64Type>(),
                y.as_primitive::<Float64Type>(),
            );
            let mut v = Vec::with_capacity(n);
            for (x, y) in x.iter().zip(y.iter()) {
                v.push(match (x, y) {
                    // The quotient of the values themselves, cut toward zero (intDiv(-7, 0.5)
                    // is -14); one past Int64 fails, as in ClickHouse.
                    (Some(x), Some(y)) => {
                        if y == 0.0 {
                            if or_zero {
                                Some(0)
                            } else {
                                return Err(DataFusionError::Execution("Division by zero".into()));
                            }
                        } else {
                            let q = (x / y).trunc();
                            if !(q.is_finite() && q.abs() < 9.223_372_036_854_776e18) {
                                return Err(DataFusionError::Execution(
                                    "Cannot perform integer division, because it will produce \
                                     infinite or too large number"
                                        .into(),
                                ));
                            }
                            Some(q as i64)
                        }
                    }
                    _ => None,
                });
            }
            v.into_iter().collect()
        } else {
            let x = cast(&arr[0], &DataType::Int64)?;
            let y = cast(&arr[1], &DataType::Int64)?;
            let (x, y) = (x.as_primitive::<Int64Type>(), y.as_primitive::<Int64Type>());
            let mut v = Vec::with_capacity(n);
            for (x, y) in x.iter().zip(y.iter()) {
                v.push(match (x, y) {
                    (Some(_), Some(0)) if or_zero => Some(0),
                    (Some(_), Some(0)) => {
                        return Err(DataFusionError::Execution("Division by zero".into()));
                    }
                    (Some(x), Some(y)) => Some(x.wrapping_div(y)),
                    _ => None,
                });
            }
            v.into_iter().collect()
        };
        Ok(Arc::new(out) as ArrayRef)
    });
    Ok(call(
        name,
        format!("{or_zero}/{floats}"),
        DataType::Int64,
        Nulls::FromArgs,
        vec![a, b],
        k,
    ))
}

/// `moduloOrZero` (0 where an integer divisor is 0; a float divisor of 0 gives nan, as
/// ClickHouse) and `positiveModulo` (the remainder made non-negative by adding |b|; an
/// integer divisor of 0 fails like `modulo`).
fn modulo_variant(
    name: &str,
    a: Expr,
    b: Expr,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let (ta, tb) = (type_of(&a, ctx)?, type_of(&b, ctx)?);
    for t in [&ta, &tb] {
        if !t.is_numeric() && !matches!(t, DataType::Null) {
            return Err(invalid(format!(
                "Illegal type {t} of argument of function `{name}`"
            )));
        }
    }
    let floats = ta.is_floating() || tb.is_floating();
    let or_zero = name == "moduloOrZero";
    let k = kernel(move |arr, n| {
        let out: ArrayRef = if floats {
            let x = cast(&arr[0], &DataType::Float64)?;
            let y = cast(&arr[1], &DataType::Float64)?;
            let (x, y) = (
                x.as_primitive::<Float64Type>(),
                y.as_primitive::<Float64Type>(),
            );
            let v: Float64Array = x
                .iter()
                .zip(y.iter())
                .map(|(x, y)| {
                    let (x, y) = (x?, y?);
                    let r = x % y;
                    Some(if !or_zero && r < 0.0 { r + y.abs() } else { r })
                })
                .collect();
            Arc::new(v)
        } else {
            let x = cast(&arr[0], &DataType::Int64)?;
            let y = cast(&arr[1], &DataType::Int64)?;
            let (x, y) = (x.as_primitive::<Int64Type>(), y.as_primitive::<Int64Type>());
            let mut v = Vec::with_capacity(n);
            for (x, y) in x.iter().zip(y.iter()) {
                v.push(match (x, y) {
                    (Some(_), Some(0)) if or_zero => Some(0),
                    (Some(_), Some(0)) => {
                        return Err(DataFusionError::Execution("Division by zero".into()));
                    }
                    (Some(x), Some(y)) => {
                        let r = x.wrapping_rem(y);
                        Some(if !or_zero && r < 0 {
                            r.wrapping_add(y.wrapping_abs())
                        } else {
                            r
                        })
                    }
                    _ => None,
                });
            }
            Arc::new(v.into_iter().collect::<Int64Array>())
        };
        Ok(out)
    });
    let ret = if floats {
        DataType::Float64
    } else {
        DataType::Int64
    };
    Ok(call(
        name,
        format!("{floats}"),
        ret,
        Nulls::FromArgs,
        vec![a, b],
        k,
    ))
}

/// A Float64 function of Float64 arguments (integers read as floats), NULL in, NULL out.
/// formatReadableSize (1024-based, KiB…), formatReadableDecimalSize (1000-based, KB…) and
/// formatReadableQuantity (1000-based, thousand…): two decimals and the unit.
fn readable(x: f64, which: u8) -> String {
    const BINARY: [&str; 9] = [
        " B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB", " ZiB", " YiB",
    ];
    const DECIMAL: [&str; 9] = [" B", " KB", " MB", " GB", " TB", " PB", " EB", " ZB", " YB"];
    const WORDS: [&str; 22] = [
        "",
        " thousand",
        " million",
        " billion",
        " trillion",
        " quadrillion",
        " quintillion",
        " sextillion",
        " septillion",
        " octillion",
        " nonillion",
        " decillion",
        " undecillion",
        " duodecillion",
        " tredecillion",
        " quattuordecillion",
        " quindecillion",
        " sexdecillion",
        " septendecillion",
        " octodecillion",
        " novemdecillion",
        " vigintillion",
    ];
    let (base, units): (f64, &[&str]) = match which {
        0 => (1024.0, &BINARY),
        1 => (1000.0, &DECIMAL),
        _ => (1000.0, &WORDS),
    };
    let mut v = x;
    let mut i = 0;
    while v.abs() >= base && i + 1 < units.len() {
        v /= base;
        i += 1;
    }
    // ClickHouse's fixed notation (double-conversion's ToFixed) rounds a tie away from
    // zero; from 1e60 on it writes the shortest form instead.
    let text = if !v.is_finite() {
        format!("{v}")
    } else if v.abs() >= 1e60 {
        format!("{v:e}")
    } else {
        let scaled = v * 100.0;
        if scaled.fract().abs() == 0.5 {
            format!("{:.2}", scaled.round() / 100.0)
        } else {
            format!("{v:.2}")
        }
    };
    format!("{text}{}", units[i])
}

/// Float arguments truncated to Int64 (a bucket of 59.9 is the bucket of 59).
fn floored(args: Vec<Expr>, ctx: &FnContext<'_>) -> Result<Vec<Expr>, FunctionError> {
    args.into_iter()
        .map(|a| {
            Ok(if type_of(&a, ctx)?.is_floating() {
                Expr::Cast(Cast::new(Box::new(a), DataType::Int64))
            } else {
                a
            })
        })
        .collect()
}

fn float_fn(name: &str, args: Vec<Expr>, f: fn(&[f64]) -> f64) -> Expr {
    let k = kernel(move |arr, n| {
        let cols = arr
            .iter()
            .map(|a| cast(a, &DataType::Float64))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let cols: Vec<_> = cols
            .iter()
            .map(|c| c.as_primitive::<Float64Type>())
            .collect();
        let mut row = vec![0.0; cols.len()];
        let v: Float64Array = (0..n)
            .map(|r| {
                for (i, c) in cols.iter().enumerate() {
                    if c.is_null(r) {
                        return None;
                    }
                    row[i] = c.value(r);
                }
                Some(f(&row))
            })
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    call(name, "", DataType::Float64, Nulls::FromArgs, args, k)
}

/// A Boolean test of a Float64 (ClickHouse's UInt8 0/1).
fn float_test(name: &str, a: Expr, f: fn(f64) -> bool) -> Expr {
    let k = kernel(move |arr, _| {
        let c = cast(&arr[0], &DataType::Float64)?;
        let v: datafusion::arrow::array::BooleanArray = c
            .as_primitive::<Float64Type>()
            .iter()
            .map(|x| x.map(f))
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    call(name, "", DataType::Boolean, Nulls::FromFirst, vec![a], k)
}

/// An Int64 function of Int64 arguments; `f` may fail (ClickHouse's argument errors).
fn int_fn(
    name: &str,
    args: Vec<Expr>,
    ret: DataType,
    f: fn(&[i64]) -> Result<i64>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    for a in &args {
        let t = type_of(a, ctx)?;
        if !(t.is_integer() || matches!(t, DataType::Boolean | DataType::Null)) {
            return Err(invalid(format!(
                "Illegal type {t} of argument of function `{name}`, expected an integer"
            )));
        }
    }
    let out = ret.clone();
    let k = kernel(move |arr, n| {
        let cols = arr
            .iter()
            .map(|a| cast(a, &DataType::Int64))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let cols: Vec<_> = cols.iter().map(|c| c.as_primitive::<Int64Type>()).collect();
        let mut row = vec![0; cols.len()];
        let mut v = Vec::with_capacity(n);
        'rows: for r in 0..n {
            for (i, c) in cols.iter().enumerate() {
                if c.is_null(r) {
                    v.push(None);
                    continue 'rows;
                }
                row[i] = c.value(r);
            }
            v.push(Some(f(&row)?));
        }
        let v: ArrayRef = Arc::new(v.into_iter().collect::<Int64Array>());
        Ok(cast(&v, &out)?)
    });
    Ok(call(name, "", ret, Nulls::FromArgs, args, k))
}

fn bit_position(p: i64) -> Result<u32> {
    if (0..=63).contains(&p) {
        Ok(p as u32)
    } else {
        Err(DataFusionError::Execution(format!(
            "The bit position argument needs to a positive value and less or equal to 63, got {p}"
        )))
    }
}

fn abs(a: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&a, ctx)?;
    let unsigned = match ty {
        DataType::Int8 => DataType::UInt8,
        DataType::Int16 => DataType::UInt16,
        DataType::Int32 => DataType::UInt32,
        DataType::Int64 => DataType::UInt64,
        _ => return Ok(f::abs(a)),
    };
    let out = unsigned.clone();
    let k = kernel(move |arr, _| {
        let v = cast(&arr[0], &DataType::Int64)?;
        let v: datafusion::arrow::array::UInt64Array = v
            .as_primitive::<Int64Type>()
            .iter()
            .map(|x| x.map(i64::unsigned_abs))
            .collect();
        Ok(cast(&v, &out)?)
    });
    Ok(call("abs", "", unsigned, Nulls::FromFirst, vec![a], k))
}

fn sign(a: Expr) -> Expr {
    let k = kernel(|arr, _| {
        let v = cast(&arr[0], &DataType::Float64)?;
        let v: Int8Array = v
            .as_primitive::<Float64Type>()
            .iter()
            .map(|x| {
                x.map(|x| {
                    if x > 0.0 {
                        1
                    } else if x < 0.0 {
                        -1
                    } else {
                        0
                    }
                })
            })
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    call("sign", "", DataType::Int8, Nulls::FromFirst, vec![a], k)
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let lit = |v: f64| Expr::Literal(ScalarValue::Float64(Some(v)), None);
    Ok(match name {
        "round" => rounding(name, args, Rounding::Round, ctx)?,
        "floor" => rounding(name, args, Rounding::Floor, ctx)?,
        "ceil" | "ceiling" => rounding("ceil", args, Rounding::Ceil, ctx)?,
        // The bucket of `operand` among `count` equal ones from `low` to `high`: 0 below (or
        // when low >= high), count + 1 from high on.
        "width_bucket" => {
            let k = kernel(move |arr, n| {
                let cols = arr[..3]
                    .iter()
                    .map(|a| cast(a, &DataType::Float64))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let cols: Vec<_> = cols
                    .iter()
                    .map(|c| c.as_primitive::<Float64Type>())
                    .collect();
                let count = cast(&arr[3], &DataType::Int64)?;
                let count = count.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                let mut out = Vec::with_capacity(n);
                for r in 0..n {
                    if cols.iter().any(|c| c.is_null(r)) || count.is_null(r) {
                        out.push(None);
                        continue;
                    }
                    let (x, lo, hi, c) = (
                        cols[0].value(r),
                        cols[1].value(r),
                        cols[2].value(r),
                        count.value(r),
                    );
                    if c <= 0 {
                        return Err(DataFusionError::Execution(
                            "Last argument (count) for function widthBucket must be positive"
                                .into(),
                        ));
                    }
                    if x.is_nan() || lo.is_nan() || hi.is_nan() {
                        return Err(DataFusionError::Execution(
                            "The first three arguments (operand, low, high) cannot be NaN in function widthBucket".into(),
                        ));
                    }
                    out.push(Some(if lo >= hi || x < lo {
                        0
                    } else if x >= hi {
                        c + 1
                    } else {
                        (((x - lo) / (hi - lo) * c as f64).floor() as i64 + 1).min(c)
                    }));
                }
                Ok(Arc::new(Int64Array::from(out)) as ArrayRef)
            });
            call(name, "", DataType::Int64, Nulls::FromArgs, args, k)
        }
        // The largest power of two not above x (integers: 0 below 1).
        "roundToExp2" => {
            let t = type_of(&args[0], ctx)?;
            if t.is_floating() {
                // ClickHouse clears the mantissa: the sign and exponent stay (-1.5 is -1, a
                // subnormal 0, NaN inf)
                float_fn(name, args, |v| {
                    f64::from_bits(v[0].to_bits() & !((1u64 << 52) - 1))
                })
            } else {
                int_fn(
                    name,
                    args,
                    DataType::Int64,
                    |v| {
                        Ok(if v[0] < 1 {
                            0
                        } else {
                            1i64 << (63 - v[0].leading_zeros())
                        })
                    },
                    ctx,
                )?
            }
        }
        // ClickHouse's buckets for durations (seconds) and ages (years).
        "roundDuration" => int_fn(
            name,
            floored(args, ctx)?,
            DataType::UInt16,
            |v| {
                const STEPS: [i64; 16] = [
                    0, 1, 10, 30, 60, 120, 180, 240, 300, 600, 1200, 1800, 3600, 7200, 18000, 36000,
                ];
                Ok(*STEPS.iter().rev().find(|s| v[0] >= **s).unwrap_or(&0))
            },
            ctx,
        )?,
        "roundAge" => int_fn(
            name,
            floored(args, ctx)?,
            DataType::UInt8,
            |v| {
                Ok(match v[0] {
                    ..1 => 0,
                    1..=17 => 17,
                    18..=24 => 18,
                    25..=34 => 25,
                    35..=44 => 35,
                    45..=54 => 45,
                    _ => 55,
                })
            },
            ctx,
        )?,
        "formatReadableSize" | "formatReadableDecimalSize" | "formatReadableQuantity" => {
            let which = match name {
                "formatReadableSize" => 0u8,
                "formatReadableDecimalSize" => 1,
                _ => 2,
            };
            let k = kernel(move |arr, _| {
                let c = cast(&arr[0], &DataType::Float64)?;
                let v: datafusion::arrow::array::StringArray = c
                    .as_primitive::<Float64Type>()
                    .iter()
                    .map(|x| x.map(|x| readable(x, which)))
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            call(name, "", DataType::Utf8, Nulls::FromArgs, args, k)
        }
        "trunc" | "truncate" => rounding("trunc", args, Rounding::Trunc, ctx)?,
        "roundBankers" => rounding(name, args, Rounding::Bankers, ctx)?,
        "abs" if let Some(folded) = super::intarith::const_abs(&args[0]) => folded,
        "abs" => abs(args.remove(0), ctx)?,
        "pow" | "power" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            f::power(float(a), float(b))
        }
        // DataFusion's sqrt refuses negative input; ClickHouse answers nan.
        "sqrt" => {
            let x = float(args.remove(0));
            when(x.clone().lt(lit(0.0)), lit(f64::NAN))
                .otherwise(f::sqrt(x))
                .map_err(|e| invalid(e.to_string()))?
        }
        "exp" => f::exp(float(args.remove(0))),
        "log" | "ln" => f::ln(float(args.remove(0))),
        "log2" => f::log2(float(args.remove(0))),
        "log10" => f::log10(float(args.remove(0))),
        "intDiv" | "intDivOrZero"
            if let Some(folded) = super::intarith::const_int_div(&args[0], &args[1]) =>
        {
            folded
        }
        "intDiv" | "intDivOrZero" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            int_div(name, a, b, name == "intDivOrZero", ctx)?
        }
        "modulo" | "mod" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            binary_expr(a, Operator::Modulo, b)
        }
        "moduloOrZero" | "positiveModulo" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            modulo_variant(name, a, b, ctx)?
        }
        "exp2" => float_fn(name, args, |v| v[0].exp2()),
        "exp10" => float_fn(name, args, |v| 10f64.powf(v[0])),
        "cbrt" => float_fn(name, args, |v| v[0].cbrt()),
        "sin" => float_fn(name, args, |v| v[0].sin()),
        "cos" => float_fn(name, args, |v| v[0].cos()),
        "tan" => float_fn(name, args, |v| v[0].tan()),
        "asin" => float_fn(name, args, |v| v[0].asin()),
        "acos" => float_fn(name, args, |v| v[0].acos()),
        "atan" => float_fn(name, args, |v| v[0].atan()),
        "sinh" => float_fn(name, args, |v| v[0].sinh()),
        "cosh" => float_fn(name, args, |v| v[0].cosh()),
        "asinh" => float_fn(name, args, |v| v[0].asinh()),
        "acosh" => float_fn(name, args, |v| v[0].acosh()),
        "atanh" => float_fn(name, args, |v| v[0].atanh()),
        "atan2" => float_fn(name, args, |v| v[0].atan2(v[1])),
        "hypot" => float_fn(name, args, |v| v[0].hypot(v[1])),
        "log1p" => float_fn(name, args, |v| v[0].ln_1p()),
        "degrees" => float_fn(name, args, |v| v[0].to_degrees()),
        "radians" => float_fn(name, args, |v| v[0].to_radians()),
        // max2/min2 compare as Float64 and answer Float64, as ClickHouse.
        "max2" => float_fn(name, args, |v| v[0].max(v[1])),
        "min2" => float_fn(name, args, |v| v[0].min(v[1])),
        "isFinite" => float_test(name, args.remove(0), f64::is_finite),
        "isInfinite" => float_test(name, args.remove(0), f64::is_infinite),
        "isNaN" => float_test(name, args.remove(0), f64::is_nan),
        "ifNotFinite" => {
            let y = args.pop().expect("2 args");
            let x = args.pop().expect("2 args");
            let fx = float(x);
            when(float_test("isFinite", fx.clone(), f64::is_finite), fx)
                .otherwise(float(y))
                .map_err(|e| invalid(e.to_string()))?
        }
        // 2^x and 10^x as UInt64: negative powers 0, fractions cut, overflow saturates.
        "intExp2" | "intExp10" => {
            let base = if name == "intExp2" { 2.0 } else { 10.0 };
            let k = kernel(move |arr, _| {
                let c = cast(&arr[0], &DataType::Float64)?;
                let v: datafusion::arrow::array::UInt64Array = c
                    .as_primitive::<Float64Type>()
                    .iter()
                    .map(|x| {
                        x.map(|x| {
                            let p = x.trunc();
                            if p < 0.0 {
                                0
                            } else {
                                let r = f64::powf(base, p);
                                if r >= u64::MAX as f64 {
                                    u64::MAX
                                } else {
                                    r as u64
                                }
                            }
                        })
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            call(
                name,
                "",
                DataType::UInt64,
                Nulls::FromFirst,
                vec![args.remove(0)],
                k,
            )
        }
        "factorial" => int_fn(
            name,
            args,
            DataType::UInt64,
            |v| match v[0] {
                n if n > 20 => Err(DataFusionError::Execution(format!(
                    "The maximum value for the input argument of function factorial is 20, got {n}"
                ))),
                n => Ok((1..=n.max(0)).product()),
            },
            ctx,
        )?,
        // Integers negate as the `-` operator does (wrapping, in ClickHouse's types).
        "negate" => {
            let a = args.remove(0);
            let t = type_of(&a, ctx)?;
            super::intarith::int_negate(a.clone(), &t)
                .map_err(|e| invalid(e.to_string()))?
                .unwrap_or_else(|| Expr::Negative(Box::new(a)))
        }
        // Euclid on |a|, |b|; a 0 fails as ClickHouse ("Division by zero").
        "gcd" | "lcm" => {
            fn gcd(a: i64, b: i64) -> Result<i64> {
                if a == 0 || b == 0 {
                    return Err(DataFusionError::Execution("Division by zero".into()));
                }
                let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
                while b != 0 {
                    (a, b) = (b, a % b);
                }
                Ok(a as i64)
            }
            if name == "gcd" {
                int_fn(name, args, DataType::Int64, |v| gcd(v[0], v[1]), ctx)?
            } else {
                int_fn(
                    name,
                    args,
                    DataType::Int64,
                    |v| Ok((v[0] / gcd(v[0], v[1])?).wrapping_mul(v[1]).wrapping_abs()),
                    ctx,
                )?
            }
        }
        "bitAnd" | "bitOr" | "bitXor" | "bitNot"
            if let Some(folded) = super::intarith::const_bits(name, &args) =>
        {
            folded
        }
        "bitAnd" => int_fn(name, args, DataType::Int64, |v| Ok(v[0] & v[1]), ctx)?,
        "bitOr" => int_fn(name, args, DataType::Int64, |v| Ok(v[0] | v[1]), ctx)?,
        "bitXor" => int_fn(name, args, DataType::Int64, |v| Ok(v[0] ^ v[1]), ctx)?,
        "bitNot" => {
            let t = type_of(&args[0], ctx)?;
            match super::intarith::int_bit_not(args[0].clone(), &t) {
                Some(e) => e,
                None => int_fn(name, args, DataType::Int64, |v| Ok(!v[0]), ctx)?,
            }
        }
        "bitShiftLeft" => int_fn(
            name,
            args,
            DataType::Int64,
            |v| {
                Ok(if (0..64).contains(&v[1]) {
                    v[0].wrapping_shl(v[1] as u32)
                } else {
                    0
                })
            },
            ctx,
        )?,
        "bitShiftRight" => int_fn(
            name,
            args,
            DataType::Int64,
            |v| {
                Ok(if (0..64).contains(&v[1]) {
                    v[0] >> v[1]
                } else {
                    0
                })
            },
            ctx,
        )?,
        "bitCount" => int_fn(
            name,
            args,
            DataType::UInt8,
            |v| Ok(v[0].count_ones() as i64),
            ctx,
        )?,
        "bitTest" => int_fn(
            name,
            args,
            DataType::UInt8,
            |v| Ok((v[0] >> bit_position(v[1])?) & 1),
            ctx,
        )?,
        // ClickHouse's common type of the arguments (Int64 for Int64 with UInt64, not
        // DataFusion's Decimal)
        "greatest" | "least" => {
            let types = args
                .iter()
                .map(|a| type_of(a, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            let greatest = name == "greatest";
            match super::intarith::int_extreme(greatest, &args, &types) {
                Some(e) => e,
                None if greatest => f::greatest(super::agree_numeric(args, ctx.schema)?),
                None => f::least(super::agree_numeric(args, ctx.schema)?),
            }
        }
        "sign" => sign(args.remove(0)),
        "e" => lit(std::f64::consts::E),
        "pi" => lit(std::f64::consts::PI),
        _ => return Err(FunctionError::Unknown(name.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::arrow::datatypes::DataType;

    #[test]
    fn math_like_clickhouse() {
        check(vec![
            (call("round", vec![fl(2.5)]), "2"),
            (call("round", vec![fl(3.5)]), "4"),
            (call("round", vec![fl(-2.5)]), "-2"),
            (call("round", vec![fl(2.675), i(2)]), "2.68"),
            (call("round", vec![fl(0.125), i(2)]), "0.12"),
            (call("round", vec![fl(0.375), i(2)]), "0.38"),
            (call("round", vec![fl(1.005), i(2)]), "1"),
            (call("round", vec![fl(1250.0), i(-2)]), "1200"),
            (call("round", vec![fl(1350.0), i(-2)]), "1400"),
            (call("round", vec![fl(12345.6789), i(-2)]), "12300"),
            (call("round", vec![fl(-0.4)]), "-0"),
            (call("round", vec![i(25), i(-1)]), "30"),
            (call("round", vec![i(-25), i(-1)]), "-30"),
            (call("round", vec![i(7)]), "7"),
            (call("floor", vec![fl(-2.5)]), "-3"),
            (call("floor", vec![fl(2.567), i(2)]), "2.56"),
            (call("floor", vec![i(1234), i(-2)]), "1200"),
            (call("ceil", vec![fl(2.1)]), "3"),
            (call("ceil", vec![fl(-2.1)]), "-2"),
            (call("ceiling", vec![fl(2.1)]), "3"),
            (call("abs", vec![i(-5)]), "5"),
            (call("abs", vec![fl(-2.5)]), "2.5"),
            (call("pow", vec![i(2), i(10)]), "1024"),
            (call("power", vec![fl(2.0), fl(0.5)]), "1.4142135623730951"),
            (call("sqrt", vec![i(16)]), "4"),
            (call("exp", vec![i(1)]), "2.718281828459045"),
            (call("log", vec![call("e", vec![])]), "1"),
            (call("ln", vec![i(1)]), "0"),
            (call("log2", vec![i(8)]), "3"),
            (call("log10", vec![i(1000)]), "3"),
            (call("log", vec![i(0)]), "-inf"),
            (call("log", vec![i(-1)]), "nan"),
            (call("intDiv", vec![i(7), i(2)]), "3"),
            (call("intDiv", vec![i(-7), i(2)]), "-3"),
            (call("intDiv", vec![fl(7.9), i(2)]), "3"),
            (call("intDiv", vec![i(-7), fl(0.5)]), "-14"),
            (call("intDiv", vec![i(7), fl(2.5)]), "2"),
            (call("intDivOrZero", vec![i(7), fl(0.2)]), "35"),
            (call("intDivOrZero", vec![i(7), i(0)]), "0"),
            (call("modulo", vec![i(-7), i(3)]), "-1"),
            (call("modulo", vec![i(7), i(-3)]), "1"),
            (call("modulo", vec![fl(-7.5), i(2)]), "-1.5"),
            (call("greatest", vec![i(1), fl(2.5)]), "2.5"),
            (
                call(
                    "greatest",
                    vec![
                        i(1),
                        Expr::Literal(datafusion::common::ScalarValue::Int64(None), None),
                    ],
                ),
                "1",
            ),
            (call("least", vec![i(3), i(1)]), "1"),
            (call("greatest", vec![s("a"), s("b")]), "b"),
            (call("sign", vec![i(-5)]), "-1"),
            (call("sign", vec![fl(2.5)]), "1"),
            (call("pi", vec![]), "3.141592653589793"),
        ]);
        // From ClickHouse: trunc toward zero, roundBankers half to even (integers too),
        // moduloOrZero 0 on an integer 0, positiveModulo non-negative.
        check(vec![
            (call("trunc", vec![fl(-2.7)]), "-2"),
            (call("trunc", vec![fl(1234.5678), i(2)]), "1234.56"),
            (call("trunc", vec![i(-17), i(-1)]), "-10"),
            (call("roundBankers", vec![i(25), i(-1)]), "20"),
            (call("roundBankers", vec![i(35), i(-1)]), "40"),
            (call("roundBankers", vec![fl(2.5)]), "2"),
            (call("moduloOrZero", vec![i(7), i(0)]), "0"),
            (call("moduloOrZero", vec![i(-7), i(3)]), "-1"),
            (call("positiveModulo", vec![i(-7), i(3)]), "2"),
            (call("positiveModulo", vec![fl(-7.5), i(2)]), "0.5"),
        ]);
        assert_eq!(typ(call("trunc", vec![i(5)])), DataType::Int64);
        assert_eq!(typ(call("trunc", vec![fl(5.5)])), DataType::Float64);
        assert_eq!(
            typ(call("positiveModulo", vec![i(5), i(2)])),
            DataType::Int64
        );
        assert_eq!(typ(call("abs", vec![i(-5)])), DataType::UInt64);
        assert_eq!(typ(call("round", vec![i(5)])), DataType::Int64);
        assert_eq!(typ(call("sign", vec![i(5)])), DataType::Int8);
        assert_eq!(rows(call("round", vec![c("f")])), ["2", "-2", "0", "\\N"]);
        assert_eq!(
            rows(call("intDivOrZero", vec![c("i"), c("i")])),
            ["1", "1", "0", "\\N"]
        );
    }

    use datafusion::logical_expr::Expr;

    #[test]
    #[should_panic(expected = "Division by zero")]
    fn int_div_by_zero_fails() {
        rows(call("intDiv", vec![c("i"), i(0)]));
    }
}
