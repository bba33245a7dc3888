//! Array functions without lambdas that live with the scalars:
//! - `arrayResize(arr, size[, extender])`: a size ≥ 0 keeps the first `size` elements or
//!   pads at the end, a negative size keeps the last |size| or pads at the front; the pad is
//!   `extender`, else NULL for elements ClickHouse types Nullable, else the element type's
//!   default (0, '', …). hedgerow's array types carry no Nullable flag, so "Nullable" is
//!   what [`elements_nullable`] can tell from the array's expression (a constant array with
//!   a NULL); an array of Nullable elements it cannot tell (`[x]` of a Nullable column, a
//!   stored array) is padded with the default where ClickHouse pads with NULL.
//! - `arrayAUC(scores, labels[, scale])`: the area under the ROC curve, a label above 0
//!   being positive and equal scores counting half; nan without positives or negatives;
//!   `scale` false gives the unnormalised area (the count of correctly ordered pairs).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, ListArray, UInt32Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
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
                None if elements_nullable(&args[0], ctx.schema) == Some(true) => Expr::Literal(
                    ScalarValue::try_from(&el).map_err(|e| invalid(e.to_string()))?,
                    None,
                ),
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

/// Whether ClickHouse types the elements of the array `e` Nullable, as far as the
/// expression tells: `Some(true)` when it surely does, `Some(false)` when it surely does not,
/// `None` when it cannot be told. `Some(false)` also says the array itself is never NULL.
/// hedgerow's list types cannot say it (DataFusion builds arrays with nullable items
/// whatever they hold), so it is read from how the array is made: a constant array is
/// Nullable exactly when it holds a NULL (`[1, NULL]`), an array built from values
/// (`[a, b]`) is Nullable when one of them is a NULL literal and not when none of them can
/// be NULL, a range of bounds that cannot be NULL is not; a column tells only when its items
/// cannot be NULL. A nullable column's items may be ClickHouse-Nullable or not (hedgerow
/// reads properties and outer-join columns as nullable), so `[x]` of one is `None`, and so
/// is what other functions make.
pub(crate) fn elements_nullable(e: &Expr, schema: &DFSchema) -> Option<bool> {
    let is_null_literal = |a: &Expr| {
        matches!(a, Expr::Literal(v, _) if v.is_null())
            || a.get_type(schema).is_ok_and(|t| t == DataType::Null)
    };
    match e {
        Expr::ScalarFunction(f) if f.name() == "make_array" => {
            if f.args.iter().any(is_null_literal) {
                Some(true)
            } else if f.args.iter().all(|a| a.nullable(schema).is_ok_and(|n| !n)) {
                Some(false)
            } else {
                None
            }
        }
        Expr::Literal(ScalarValue::List(l), _) if l.len() == 1 && !l.is_null(0) => {
            Some(l.value(0).null_count() > 0)
        }
        // Integers, from bounds that cannot be NULL.
        Expr::ScalarFunction(f) if f.name() == "range" => f
            .args
            .iter()
            .all(|a| a.nullable(schema).is_ok_and(|n| !n))
            .then_some(false),
        Expr::Alias(a) => elements_nullable(&a.expr, schema),
        Expr::Cast(c) if matches!(c.field.data_type(), DataType::List(_)) => {
            elements_nullable(&c.expr, schema)
        }
        // A NULL array, which ClickHouse does not have, comes only from a nullable column.
        Expr::Column(_) => match e.to_field(schema).map(|(_, f)| f) {
            Ok(f)
                if !f.is_nullable()
                    && matches!(f.data_type(), DataType::List(i) if !i.is_nullable()) =>
            {
                Some(false)
            }
            _ => None,
        },
        _ => None,
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
    use super::{DFSchema, DataType, Expr, ScalarValue, auc, elements_nullable};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::functions_nested::expr_fn::make_array;
    use datafusion::logical_expr::{cast, col, lit};
    use std::sync::Arc;

    #[test]
    fn elements_nullable_reads_how_the_array_is_made() {
        let list =
            |items: bool| DataType::List(Arc::new(Field::new_list_field(DataType::Int64, items)));
        let schema = DFSchema::try_from(Schema::new(vec![
            Field::new("kept", list(false), false),
            Field::new("null_list", list(false), true),
            Field::new("null_items", list(true), false),
            Field::new("n", DataType::Int64, true),
            Field::new("v", DataType::Int64, false),
        ]))
        .unwrap();
        let f = |e: Expr| elements_nullable(&e, &schema);
        let constant = |v: &[Option<i64>]| {
            let items: Vec<ScalarValue> = v.iter().map(|x| ScalarValue::Int64(*x)).collect();
            lit(ScalarValue::List(ScalarValue::new_list_nullable(
                &items,
                &DataType::Int64,
            )))
        };
        assert_eq!(f(make_array(vec![lit(1i64), col("v")])), Some(false));
        assert_eq!(
            f(make_array(vec![lit(1i64), lit(ScalarValue::Null)])),
            Some(true)
        );
        assert_eq!(
            f(make_array(vec![col("n"), lit(ScalarValue::Null)])),
            Some(true)
        );
        // A nullable column may or may not be Nullable in ClickHouse.
        assert_eq!(f(make_array(vec![col("v"), col("n")])), None);
        assert_eq!(f(constant(&[Some(1), Some(2)])), Some(false));
        assert_eq!(f(constant(&[Some(1), None])), Some(true));
        assert_eq!(f(make_array(vec![lit(1i64)]).alias("a")), Some(false));
        let floats = DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)));
        assert_eq!(
            f(cast(
                make_array(vec![lit(1i64), lit(ScalarValue::Null)]),
                floats
            )),
            Some(true)
        );
        let range = |args: Vec<Expr>| {
            crate::hogql::functions::translate(
                "range",
                vec![],
                args.into_iter()
                    .map(crate::hogql::functions::Arg::Expr)
                    .collect(),
                false,
                &crate::hogql::functions::FnContext {
                    timezone: "UTC",
                    week_start: Default::default(),
                    now: chrono::Utc::now(),
                    schema: &schema,
                },
            )
            .unwrap()
        };
        assert_eq!(f(range(vec![lit(3i64)])), Some(false));
        assert_eq!(f(range(vec![col("n")])), None);
        assert_eq!(f(col("kept")), Some(false));
        assert_eq!(f(col("null_list")), None);
        assert_eq!(f(col("null_items")), None);
    }

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
