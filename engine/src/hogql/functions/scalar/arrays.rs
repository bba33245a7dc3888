//! Array functions without lambdas that live with the scalars:
//! - `arrayResize(arr, size[, extender])`: a size ≥ 0 keeps the first `size` elements or
//!   pads at the end, a negative size keeps the last |size| or pads at the front; the pad is
//!   `extender` or the element type's default (0, '', …; hedgerow's array elements carry no
//!   Nullable flag, so an array of Nullable elements is padded with the default too, where
//!   ClickHouse pads with NULL).
//! - `arrayAUC(scores, labels[, scale])`: the area under the ROC curve, a label above 0
//!   being positive and equal scores counting half; nan without positives or negatives;
//!   `scale` false gives the unnormalised area (the count of correctly ordered pairs).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, ListArray, UInt32Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{Expr, ExprSchemable};

use super::udf::{Nulls, call};
use super::{FnContext, FunctionError, invalid, type_of};

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    match name {
        "arrayResize" => {
            let t = type_of(&args[0], ctx)?;
            let DataType::List(field) = &t else {
                return Err(invalid(format!(
                    "The first argument of `arrayResize` must be an array, got {t}"
                )));
            };
            let el = field.data_type().clone();
            let ts = type_of(&args[1], ctx)?;
            if !ts.is_integer() {
                return Err(invalid(format!(
                    "The size argument of `arrayResize` must be an integer, got {ts}"
                )));
            }
            let extender = match args.get(2) {
                Some(e) => e
                    .clone()
                    .cast_to(&el, ctx.schema)
                    .map_err(|e| invalid(e.to_string()))?,
                None => Expr::Literal(default_of(&el)?, None),
            };
            args.truncate(2);
            args.push(extender);
            let out_field = field.clone();
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let l = a[0].as_list::<i32>();
                let size = cast(&a[1], &DataType::Int64)?;
                let size = size.as_primitive::<Int64Type>();
                let base = l.values().len();
                let offs = l.value_offsets();
                let all = concat(&[l.values().as_ref(), a[2].as_ref()])?;
                let mut idx: Vec<u32> = vec![];
                let mut lens = Vec::with_capacity(rows);
                let mut out = crate::hogql::functions::budget::Output::new("arrayResize");
                for r in 0..rows {
                    if l.is_null(r) || size.is_null(r) {
                        lens.push(0);
                        continue;
                    }
                    let (s, e) = (offs[r] as usize, offs[r + 1] as usize);
                    let len = e - s;
                    let n = size.value(r);
                    let want = n.unsigned_abs() as usize;
                    out.take(want.saturating_mul(8))?;
                    let pad = (base + r) as u32;
                    if n >= 0 {
                        idx.extend((s..s + want.min(len)).map(|j| j as u32));
                        idx.extend(std::iter::repeat_n(pad, want.saturating_sub(len)));
                    } else {
                        idx.extend(std::iter::repeat_n(pad, want.saturating_sub(len)));
                        idx.extend((e - want.min(len)..e).map(|j| j as u32));
                    }
                    lens.push(want);
                }
                let values = take(all.as_ref(), &UInt32Array::from(idx), None)?;
                let nulls = match (l.nulls(), size.nulls()) {
                    (None, None) => None,
                    _ => Some(
                        (0..rows)
                            .map(|r| !l.is_null(r) && !size.is_null(r))
                            .collect::<Vec<bool>>()
                            .into(),
                    ),
                };
                Ok(Arc::new(ListArray::try_new(
                    out_field.clone(),
                    OffsetBuffer::from_lengths(lens),
                    values,
                    nulls,
                )?) as ArrayRef)
            });
            // Volatile: a small size argument can make a large array, built per batch.
            Ok(super::udf::call_with(
                name,
                "",
                t.clone(),
                Nulls::FromArgs,
                args,
                k,
                datafusion::logical_expr::Volatility::Volatile,
            ))
        }
        "arrayAUC" => {
            for (i, what) in ["scores", "labels"].iter().enumerate() {
                let t = type_of(&args[i], ctx)?;
                let ok = matches!(&t, DataType::List(f)
                    if f.data_type().is_numeric() || f.data_type() == &DataType::Boolean);
                if !ok {
                    return Err(invalid(format!(
                        "The {what} argument of `arrayAUC` must be an array of numbers, got {t}"
                    )));
                }
            }
            let scale = match args.get(2) {
                None => true,
                Some(Expr::Literal(ScalarValue::Boolean(Some(b)), _)) => *b,
                Some(e) => match super::datetime::const_int(e) {
                    Some(v) => v != 0,
                    None => {
                        return Err(invalid(
                            "The scale argument of `arrayAUC` must be a constant Bool",
                        ));
                    }
                },
            };
            args.truncate(2);
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let (s, l) = (a[0].as_list::<i32>(), a[1].as_list::<i32>());
                let sv = cast(s.values(), &DataType::Float64)?;
                let lv = cast(l.values(), &DataType::Float64)?;
                let (sv, lv) = (
                    sv.as_primitive::<Float64Type>(),
                    lv.as_primitive::<Float64Type>(),
                );
                let (so, lo) = (s.value_offsets(), l.value_offsets());
                let mut out = Vec::with_capacity(rows);
                for r in 0..rows {
                    if s.is_null(r) || l.is_null(r) {
                        out.push(None);
                        continue;
                    }
                    let (ss, se, ls, le) = (
                        so[r] as usize,
                        so[r + 1] as usize,
                        lo[r] as usize,
                        lo[r + 1] as usize,
                    );
                    if se - ss != le - ls {
                        return Err(DataFusionError::Execution(
                            "The first two arguments of arrayAUC must be arrays of equal sizes"
                                .into(),
                        ));
                    }
                    // ClickHouse refuses arrays of Nullable elements by type.
                    if (ss..se).any(|j| sv.is_null(j)) || (ls..le).any(|j| lv.is_null(j)) {
                        return Err(DataFusionError::Execution(
                            "The arrays of arrayAUC must not contain NULL".into(),
                        ));
                    }
                    let pairs: Vec<(f64, bool)> = (0..se - ss)
                        .map(|i| (sv.value(ss + i), lv.value(ls + i) > 0.0))
                        .collect();
                    out.push(Some(auc(pairs, scale)));
                }
                Ok(Arc::new(Float64Array::from(out)) as ArrayRef)
            });
            Ok(call(
                name,
                format!("{scale}"),
                DataType::Float64,
                Nulls::FromArgs,
                args,
                k,
            ))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

/// Correctly ordered (positive above negative) pairs, ties counting half; divided by the
/// pairs when `scale`.
fn auc(mut v: Vec<(f64, bool)>, scale: bool) -> f64 {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut below_neg, mut area) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        let (mut pos, mut neg) = (0.0, 0.0);
        while j < v.len() && v[j].0 == v[i].0 {
            if v[j].1 {
                pos += 1.0;
            } else {
                neg += 1.0;
            }
            j += 1;
        }
        area += pos * below_neg + pos * neg / 2.0;
        below_neg += neg;
        i = j;
    }
    if !scale {
        return area;
    }
    let pos = v.iter().filter(|x| x.1).count() as f64;
    let neg = v.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        f64::NAN
    } else {
        area / (pos * neg)
    }
}

/// ClickHouse's default of a non-Nullable type.
fn default_of(t: &DataType) -> Result<ScalarValue, FunctionError> {
    Ok(match t {
        DataType::Utf8 => ScalarValue::Utf8(Some(String::new())),
        DataType::LargeUtf8 => ScalarValue::LargeUtf8(Some(String::new())),
        DataType::Utf8View => ScalarValue::Utf8View(Some(String::new())),
        DataType::Boolean => ScalarValue::Boolean(Some(false)),
        DataType::Date32 => ScalarValue::Date32(Some(0)),
        DataType::Timestamp(unit, tz) => match unit {
            TimeUnit::Second => ScalarValue::TimestampSecond(Some(0), tz.clone()),
            TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(Some(0), tz.clone()),
            TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(0), tz.clone()),
            TimeUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(0), tz.clone()),
        },
        DataType::Null => ScalarValue::Null,
        t if t.is_numeric() => ScalarValue::new_zero(t).map_err(|e| invalid(e.to_string()))?,
        t => {
            return Err(invalid(format!(
                "`arrayResize` of an array of {t} needs the extender argument"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::auc;

    #[test]
    fn auc_like_clickhouse() {
        let v = |s: &[f64], l: &[bool]| s.iter().copied().zip(l.iter().copied()).collect();
        let tf = [false, false, true, true];
        assert_eq!(auc(v(&[0.1, 0.4, 0.35, 0.8], &tf), true), 0.75);
        assert_eq!(auc(v(&[0.1, 0.4, 0.4, 0.8], &tf), true), 0.875);
        assert_eq!(auc(v(&[0.1, 0.4, 0.35, 0.8], &tf), false), 3.0);
        assert!(auc(v(&[0.1, 0.4], &[true, true]), true).is_nan());
        assert_eq!(auc(v(&[0.5, 0.5, 0.5], &[false, true, true]), true), 0.5);
    }
}
