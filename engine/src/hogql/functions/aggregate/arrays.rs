//! Array functions (1-based indexes, 0 = not found, negative indexes count from the end).
//!
//! Predicates (`has`, `hasAny`, `hasAll`, `empty`, `notEmpty`) return Boolean where
//! ClickHouse returns UInt8, so they can stand in WHERE like comparisons do. Array element
//! fields are nullable (DataFusion's convention), where ClickHouse has `Array(T)`.

use super::super::FnContext;
use super::{FunctionError, default_value, lit, type_of};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, Scalar, UInt32Array, UInt64Array,
    new_empty_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{SortOptions, cast, sort_to_indices, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_nested as fnn;
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Op {
    Range,
    Has,
    HasAny,
    HasAll,
    IndexOf,
    Element,
    Empty,
    NotEmpty,
    Slice,
    StringConcat,
    Compact,
    Distinct,
    Enumerate,
    Sum,
    Avg,
    Min,
    Max,
    Sort {
        desc: bool,
    },
    CumSum,
    CumSumNonNegative,
    /// For each element: how many times its value appeared so far (Uniq), or the 1-based
    /// order of its value's first appearance (Dense).
    EnumerateUniq,
    EnumerateDense,
    /// L1 (1), L2 (2), Linf (0) or Lp (p in the second argument, -1 here) norms of number
    /// arrays; distances of two; the array divided by its norm.
    Norm(i8),
    Distance(i8),
    Normalize(i8),
    DotProduct,
    CosineDistance,
    Intersect,
    Zip,
    Product,
    Difference,
    CountEqual,
    HasSubstr,
    Uniq,
}

/// One of our array functions; the result type is fixed at translation (arguments are cast
/// there to the types `invoke` expects).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ArrayUdf {
    op: Op,
    name: &'static str,
    ret: DataType,
    signature: Signature,
}

pub(super) fn call(op: Op, name: &'static str, ret: DataType, args: Vec<Expr>) -> Expr {
    let udf = ArrayUdf {
        op,
        name,
        ret,
        // A range is a few bytes of text that can make gigabytes: never folded into a
        // literal while planning (where it would be copied with the plan, outside the
        // memory pool), always built per batch under the output budget.
        signature: Signature::variadic_any(if op == Op::Range {
            Volatility::Volatile
        } else {
            Volatility::Immutable
        }),
    };
    ScalarUDF::from(udf).call(args)
}

fn item(t: &DataType) -> Option<&FieldRef> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Some(f),
        _ => None,
    }
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

fn need_list(name: &str, t: &DataType) -> Result<DataType, FunctionError> {
    item(t).map(|f| f.data_type().clone()).ok_or_else(|| {
        FunctionError::Invalid(format!(
            "Function `{name}` needs an array argument, got {t}"
        ))
    })
}

fn cast_to(e: Expr, from: &DataType, to: &DataType) -> Expr {
    if from == to {
        e
    } else {
        datafusion::logical_expr::cast(e, to.clone())
    }
}

/// Casts (array, value) or (array, array) to one element type, as ClickHouse compares
/// by value (`has([1, 2], 1.5)` is false, not a truncated match).
fn common(
    name: &str,
    list: Expr,
    other: Expr,
    other_is_list: bool,
    ctx: &FnContext<'_>,
) -> Result<(Expr, Expr), FunctionError> {
    let lt = type_of(&list, ctx)?;
    let ot = type_of(&other, ctx)?;
    let le = need_list(name, &lt)?;
    let oe = if other_is_list {
        need_list(name, &ot)?
    } else {
        ot.clone()
    };
    let c = if le == oe {
        le.clone()
    } else if le == DataType::Null {
        oe.clone()
    } else if oe == DataType::Null {
        le.clone()
    } else {
        comparison_coercion(&le, &oe).ok_or_else(|| {
            FunctionError::Invalid(format!(
                "Function `{name}`: cannot compare elements of type {le} with {oe}"
            ))
        })?
    };
    let list = cast_to(list, &lt, &list_of(c.clone()));
    let other = if other_is_list {
        cast_to(other, &ot, &list_of(c))
    } else {
        cast_to(other, &ot, &c)
    };
    Ok((list, other))
}

/// Array functions that answer NULL for a NULL literal array (ClickHouse's Nullable(Nothing)).
const NULL_IN_NULL_OUT: &[&str] = &[
    "arrayReverse",
    "arraySort",
    "arrayReverseSort",
    "arrayDistinct",
    "arrayCompact",
    "arraySlice",
    "arrayPopBack",
    "arrayPopFront",
    "arrayPushBack",
    "arrayPushFront",
    "arrayCumSum",
    "arrayCumSumNonNegative",
    "arraySum",
    "arrayAvg",
    "arrayMin",
    "arrayMax",
    "arrayProduct",
    "arrayDifference",
    "arrayStringConcat",
    "arrayElement",
    "hasAny",
    "hasAll",
    "arrayUniq",
    "arrayEnumerate",
    "arrayFlatten",
    "L1Norm",
    "L2Norm",
    "LinfNorm",
    "LpNorm",
    "L1Distance",
    "L2Distance",
    "LinfDistance",
    "LpDistance",
    "L1Normalize",
    "L2Normalize",
    "LinfNormalize",
    "LpNormalize",
    "dotProduct",
    "cosineDistance",
];

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let mut args = args;
    let name_static = super::ENTRIES
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.name)
        .unwrap_or("array");
    let t0 = match args.first() {
        Some(a) => type_of(a, ctx)?,
        None => DataType::Null,
    };
    // ClickHouse: an array function of a NULL literal is NULL (has, indexOf and countEqual
    // refuse it, as here)
    if t0 == DataType::Null
        && matches!(args.first(), Some(Expr::Literal(v, _)) if v.is_null())
        && NULL_IN_NULL_OUT.contains(&name)
    {
        return Ok(lit(ScalarValue::Null));
    }
    let simple = |op: Op, ret: DataType, args: Vec<Expr>| Ok(call(op, name_static, ret, args));
    match name {
        "array" => Ok(fnn::make_array::make_array_udf().call(args)),
        "range" => {
            let args = args
                .into_iter()
                .map(|a| {
                    let t = type_of(&a, ctx)?;
                    Ok(cast_to(a, &t, &DataType::Int64))
                })
                .collect::<Result<Vec<_>, FunctionError>>()?;
            simple(Op::Range, list_of(DataType::Int64), args)
        }
        "arrayConcat" => Ok(fnn::concat::array_concat_udf().call(args)),
        "arrayPushBack" => Ok(fnn::concat::array_append_udf().call(args)),
        "arrayPushFront" => {
            // DataFusion's array_prepend takes (element, array)
            args.swap(0, 1);
            Ok(fnn::concat::array_prepend_udf().call(args))
        }
        "arrayReverse" => {
            need_list(name, &t0)?;
            Ok(fnn::reverse::array_reverse_udf().call(args))
        }
        "has" | "indexOf" => {
            let x = args.pop().expect("arity");
            let a = args.pop().expect("arity");
            let (a, x) = common(name, a, x, false, ctx)?;
            let (op, ret) = if name == "has" {
                (Op::Has, DataType::Boolean)
            } else {
                (Op::IndexOf, DataType::UInt64)
            };
            simple(op, ret, vec![a, x])
        }
        "hasAny" | "hasAll" => {
            let b = args.pop().expect("arity");
            let a = args.pop().expect("arity");
            let (a, b) = common(name, a, b, true, ctx)?;
            let op = if name == "hasAny" {
                Op::HasAny
            } else {
                Op::HasAll
            };
            simple(op, DataType::Boolean, vec![a, b])
        }
        "arrayElement" => {
            let i = args.pop().expect("arity");
            let a = args.pop().expect("arity");
            // A literal array's element keeps ClickHouse's narrow constant type.
            if let Expr::ScalarFunction(f) = &a
                && f.name() == "make_array"
                && let Some(folded) = super::super::scalar::const_array_element(&f.args, &i)
            {
                return Ok(folded);
            }
            if matches!(t0, DataType::Map(..)) {
                return super::maps::element(a, i, ctx);
            }
            let el = need_list(name, &t0)?;
            let it = type_of(&i, ctx)?;
            if !it.is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Array index of `{name}` must be an integer, got {it}"
                )));
            }
            let default = lit(default_value(&el));
            simple(
                Op::Element,
                el,
                vec![a, cast_to(i, &it, &DataType::Int64), default],
            )
        }
        "empty" | "notEmpty" => {
            let a = args.pop().expect("arity");
            let a = match &t0 {
                DataType::Utf8 => a,
                DataType::LargeUtf8 | DataType::Utf8View => cast_to(a, &t0, &DataType::Utf8),
                t if item(t).is_some() => a,
                DataType::Null => cast_to(a, &t0, &DataType::Utf8),
                t => {
                    return Err(FunctionError::Invalid(format!(
                        "Function `{name}` needs a String or an array, got {t}"
                    )));
                }
            };
            let op = if name == "empty" {
                Op::Empty
            } else {
                Op::NotEmpty
            };
            simple(op, DataType::Boolean, vec![a])
        }
        "arraySlice" => {
            need_list(name, &t0)?;
            let mut out = vec![args.remove(0)];
            for a in args {
                let t = type_of(&a, ctx)?;
                out.push(cast_to(a, &t, &DataType::Int64));
            }
            simple(Op::Slice, t0.clone(), out)
        }
        "arrayStringConcat" => {
            let el = need_list(name, &t0)?;
            let a = args.remove(0);
            let a = cast_to(a, &t0, &list_of(DataType::Utf8));
            let _ = el;
            let sep = match args.pop() {
                Some(s) => {
                    let st = type_of(&s, ctx)?;
                    cast_to(s, &st, &DataType::Utf8)
                }
                None => lit(ScalarValue::Utf8(Some(String::new()))),
            };
            simple(Op::StringConcat, DataType::Utf8, vec![a, sep])
        }
        "arrayCompact" | "arrayDistinct" | "arraySort" | "arrayReverseSort" => {
            need_list(name, &t0)?;
            let op = match name {
                "arrayCompact" => Op::Compact,
                "arrayDistinct" => Op::Distinct,
                "arraySort" => Op::Sort { desc: false },
                _ => Op::Sort { desc: true },
            };
            simple(op, t0.clone(), args)
        }
        "arrayPopBack" | "arrayPopFront" => {
            need_list(name, &t0)?;
            let a = args.remove(0);
            let bounds = if name == "arrayPopBack" {
                vec![
                    lit(ScalarValue::Int64(Some(1))),
                    lit(ScalarValue::Int64(Some(-1))),
                ]
            } else {
                vec![lit(ScalarValue::Int64(Some(2)))]
            };
            let mut out = vec![a];
            out.extend(bounds);
            simple(Op::Slice, t0.clone(), out)
        }
        "arrayCumSum" | "arrayCumSumNonNegative" => {
            let el = need_list(name, &t0)?;
            if !(el.is_numeric() || matches!(el, DataType::Boolean | DataType::Null)) {
                return Err(FunctionError::Invalid(format!(
                    "`{name}` cannot add values of type {el}"
                )));
            }
            let target = if el.is_floating() {
                DataType::Float64
            } else if el.is_unsigned_integer() || el == DataType::Boolean {
                DataType::UInt64
            } else {
                DataType::Int64
            };
            let op = match name {
                "arrayCumSum" => Op::CumSum,
                _ => Op::CumSumNonNegative,
            };
            let a = cast_to(args.remove(0), &t0, &list_of(target.clone()));
            simple(op, list_of(target), vec![a])
        }
        "L1Norm" | "L2Norm" | "LinfNorm" | "LpNorm" | "L1Distance" | "L2Distance"
        | "LinfDistance" | "LpDistance" | "L1Normalize" | "L2Normalize" | "LinfNormalize"
        | "LpNormalize" | "dotProduct" | "cosineDistance" => {
            let kind = match &name[..2] {
                "L1" => 1,
                "L2" => 2,
                "Li" => 0,
                _ => -1,
            };
            let lists = if matches!(name, "L1Norm" | "L2Norm" | "LinfNorm" | "LpNorm")
                || name.ends_with("Normalize")
            {
                1
            } else {
                2
            };
            // Two constant arrays of different sizes fail when the query is planned, as
            // ClickHouse's do (a later NULL or an untaken branch would hide a failure that
            // waits for the rows).
            if lists == 2
                && let (Some(x), Some(y)) = (const_len(&args[0]), const_len(&args[1]))
                && x != y
            {
                return Err(FunctionError::Invalid(format!(
                    "Array arguments for function `{name}` must have equal sizes: {x} and {y}"
                )));
            }
            let mut out = Vec::with_capacity(args.len());
            for (i, a) in args.into_iter().enumerate() {
                let t = type_of(&a, ctx)?;
                if i < lists {
                    let el = need_list(name, &t)?;
                    if !(el.is_numeric() || el == DataType::Null) {
                        return Err(FunctionError::Invalid(format!(
                            "`{name}` needs arrays of numbers, got {t}"
                        )));
                    }
                    // dotProduct of integers stays an integer (wrapping, as ClickHouse)
                    let to = if name == "dotProduct" && (el.is_integer() || el == DataType::Null) {
                        DataType::Int64
                    } else {
                        DataType::Float64
                    };
                    out.push(cast_to(a, &t, &list_of(to)));
                } else {
                    out.push(a);
                }
            }
            let int_dot = name == "dotProduct"
                && out.iter().all(|a| {
                    type_of(a, ctx)
                        .is_ok_and(|t| item(&t).is_some_and(|f| *f.data_type() == DataType::Int64))
                });
            let (op, ret) = match name {
                "dotProduct" if int_dot => (Op::DotProduct, DataType::Int64),
                "dotProduct" => (Op::DotProduct, DataType::Float64),
                "cosineDistance" => (Op::CosineDistance, DataType::Float64),
                n if n.ends_with("Normalize") => (Op::Normalize(kind), list_of(DataType::Float64)),
                n if n.ends_with("Distance") => (Op::Distance(kind), DataType::Float64),
                _ => (Op::Norm(kind), DataType::Float64),
            };
            simple(op, ret, out)
        }
        // The other arrays are read as the first one's element type, as ClickHouse
        // (`arrayIntersect([1, 2], [1.0, 2.5])` is [1, 2]).
        "arrayIntersect" => {
            let mut el = DataType::Null;
            let mut types = vec![];
            for a in &args {
                let t = type_of(a, ctx)?;
                let e = need_list(name, &t)?;
                if el == DataType::Null {
                    el = e;
                }
                types.push(t);
            }
            let args = args
                .into_iter()
                .zip(&types)
                .map(|(a, t)| cast_to(a, t, &list_of(el.clone())))
                .collect();
            simple(Op::Intersect, list_of(el), args)
        }
        "arrayFlatten" => {
            need_list(name, &t0)?;
            Ok(fnn::flatten::flatten_udf().call(args))
        }
        "arrayProduct" | "arrayDifference" => {
            let el = need_list(name, &t0)?;
            if !(el.is_numeric() || matches!(el, DataType::Boolean | DataType::Null)) {
                return Err(FunctionError::Invalid(format!(
                    "`{name}` cannot be performed on type {el}"
                )));
            }
            if name == "arrayProduct" {
                let a = cast_to(args.remove(0), &t0, &list_of(DataType::Float64));
                simple(Op::Product, DataType::Float64, vec![a])
            } else {
                let target = if el.is_floating() {
                    DataType::Float64
                } else {
                    DataType::Int64
                };
                let a = cast_to(args.remove(0), &t0, &list_of(target.clone()));
                simple(Op::Difference, list_of(target), vec![a])
            }
        }
        "countEqual" => {
            let x = args.pop().expect("arity");
            let a = args.pop().expect("arity");
            let (a, x) = common(name, a, x, false, ctx)?;
            simple(Op::CountEqual, DataType::UInt64, vec![a, x])
        }
        "hasSubstr" => {
            let b = args.pop().expect("arity");
            let a = args.pop().expect("arity");
            let (a, b) = common(name, a, b, true, ctx)?;
            simple(Op::HasSubstr, DataType::Boolean, vec![a, b])
        }
        "arrayEnumerateUniq" | "arrayEnumerateDense" => {
            need_list(name, &t0)?;
            let op = if name == "arrayEnumerateUniq" {
                Op::EnumerateUniq
            } else {
                Op::EnumerateDense
            };
            simple(op, list_of(DataType::UInt32), vec![args.remove(0)])
        }
        "arrayUniq" => {
            need_list(name, &t0)?;
            simple(Op::Uniq, DataType::UInt64, vec![args.remove(0)])
        }
        "arrayZip" => {
            let mut fields = vec![];
            for (i, a) in args.iter().enumerate() {
                let t = type_of(a, ctx)?;
                let e = need_list(name, &t)?;
                fields.push(Field::new(format!("c{i}"), e, true));
            }
            let ret = list_of(DataType::Struct(fields.into()));
            simple(Op::Zip, ret, args)
        }
        "arrayEnumerate" => {
            need_list(name, &t0)?;
            simple(Op::Enumerate, list_of(DataType::UInt32), args)
        }
        "arraySum" | "arrayAvg" | "arrayMin" | "arrayMax" => {
            let el = need_list(name, &t0)?;
            let (op, target) = match name {
                "arraySum" => (Op::Sum, super::aggs::sum_type(&el)),
                "arrayAvg" => (Op::Avg, DataType::Float64),
                "arrayMin" => (Op::Min, el.clone()),
                _ => (Op::Max, el.clone()),
            };
            let target = if el == DataType::Boolean && matches!(op, Op::Min | Op::Max) {
                DataType::UInt8
            } else {
                target
            };
            if matches!(op, Op::Sum | Op::Avg) && !(el.is_numeric() || el == DataType::Boolean) {
                return Err(FunctionError::Invalid(format!(
                    "`{name}` cannot be performed on type {el}"
                )));
            }
            let a = cast_to(args.remove(0), &t0, &list_of(target.clone()));
            let ret = if op == Op::Avg {
                DataType::Float64
            } else {
                target.clone()
            };
            simple(op, ret.clone(), vec![a, lit(default_value(&ret))])
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

impl ScalarUDFImpl for ArrayUdf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.ret.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = super::arg_arrays(&args)?;
        let out = eval(self.op, &arrays, &self.ret)?;
        Ok(ColumnarValue::Array(out))
    }
}

fn as_list(a: &ArrayRef) -> Result<ListArray> {
    match a.data_type() {
        DataType::List(_) => Ok(a.as_list::<i32>().clone()),
        DataType::Null => Ok(ListArray::new_null(
            Arc::new(Field::new_list_field(DataType::Null, true)),
            a.len(),
        )),
        t => {
            let f = item(t).cloned().ok_or_else(|| {
                datafusion::error::DataFusionError::Execution(format!("expected an array, got {t}"))
            })?;
            Ok(cast(a, &DataType::List(f))?.as_list::<i32>().clone())
        }
    }
}

/// Rows of a list: (is valid, first value index, end value index).
fn spans(l: &ListArray) -> impl Iterator<Item = (bool, usize, usize)> + '_ {
    let offs = l.value_offsets();
    (0..l.len()).map(move |i| (l.is_valid(i), offs[i] as usize, offs[i + 1] as usize))
}

/// Builds a list from per-row picks of `l`'s values (absolute indexes), keeping row nulls.
fn rebuild(l: &ListArray, picks: Vec<Vec<u32>>) -> Result<ArrayRef> {
    let lens: Vec<usize> = picks.iter().map(|p| p.len()).collect();
    let idx = UInt32Array::from(picks.into_iter().flatten().collect::<Vec<_>>());
    let values = take(l.values().as_ref(), &idx, None)?;
    let field = match l.data_type() {
        DataType::List(f) => f.clone(),
        _ => unreachable!(),
    };
    Ok(Arc::new(ListArray::try_new(
        field,
        OffsetBuffer::from_lengths(lens),
        values,
        l.nulls().cloned(),
    )?))
}

fn rows_of(values: &ArrayRef) -> Result<datafusion::arrow::row::Rows> {
    let conv = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    Ok(conv.convert_columns(std::slice::from_ref(values))?)
}

/// ClickHouse's `function_range_max_elements_in_block`.
const MAX_RANGE_ELEMENTS: u64 = 500_000_000;

/// `range(end)`, `range(start, end[, step])` over Int64 arguments, its size checked first.
fn range(a: &[ArrayRef]) -> Result<ArrayRef> {
    use datafusion::arrow::array::Int64Builder;
    use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
    use datafusion::arrow::datatypes::Int64Type;
    let ints: Vec<_> = a.iter().map(|x| x.as_primitive::<Int64Type>()).collect();
    let rows = ints.first().map_or(0, |x| x.len());
    let mut spans = Vec::with_capacity(rows);
    let mut total: u64 = 0;
    for r in 0..rows {
        if ints.iter().any(|x| x.is_null(r)) {
            spans.push(None);
            continue;
        }
        let v = |i: usize| ints[i].value(r) as i128;
        let (start, end, step) = match ints.len() {
            1 => (0, v(0), 1),
            2 => (v(0), v(1), 1),
            _ => (v(0), v(1), v(2)),
        };
        if step == 0 {
            return Err(datafusion::error::DataFusionError::Execution(
                "The step of function range must not be zero".into(),
            ));
        }
        let count = if step > 0 && end > start {
            (end - start - 1) / step + 1
        } else if step < 0 && start > end {
            (start - end - 1) / -step + 1
        } else {
            0
        };
        total = total.saturating_add(count.min(u64::MAX as i128) as u64);
        if total > MAX_RANGE_ELEMENTS {
            return Err(datafusion::error::DataFusionError::Execution(format!(
                "A call to function range would produce {total} array elements, which is \
                 greater than the allowed maximum of {MAX_RANGE_ELEMENTS}"
            )));
        }
        spans.push(Some((start, count, step)));
    }
    crate::hogql::functions::budget::Output::new("range").take(total as usize * 8)?;
    let mut values = Int64Builder::with_capacity(total as usize);
    let mut lens = Vec::with_capacity(rows);
    for span in &spans {
        let (start, count, step) = span.unwrap_or((0, 0, 1));
        for k in 0..count {
            values.append_value((start + k * step) as i64);
        }
        lens.push(count as usize);
    }
    let nulls = NullBuffer::new(BooleanBuffer::from_iter(spans.iter().map(Option::is_some)));
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Int64, true)),
        OffsetBuffer::from_lengths(lens),
        Arc::new(values.finish()),
        Some(nulls),
    )?))
}

fn eval(op: Op, a: &[ArrayRef], ret: &DataType) -> Result<ArrayRef> {
    match op {
        Op::Range => range(a),
        Op::Has | Op::IndexOf => {
            let l = as_list(&a[0])?;
            let conv = RowConverter::new(vec![SortField::new(l.values().data_type().clone())])?;
            let vr = conv.convert_columns(std::slice::from_ref(l.values()))?;
            let nr = conv.convert_columns(std::slice::from_ref(&a[1]))?;
            let found: Vec<Option<u64>> = spans(&l)
                .enumerate()
                .map(|(i, (ok, s, e))| {
                    ok.then(|| {
                        (s..e)
                            .position(|j| vr.row(j) == nr.row(i))
                            .map_or(0, |p| p as u64 + 1)
                    })
                })
                .collect();
            if op == Op::Has {
                Ok(Arc::new(
                    found
                        .into_iter()
                        .map(|f| f.map(|p| p > 0))
                        .collect::<BooleanArray>(),
                ))
            } else {
                Ok(Arc::new(UInt64Array::from(found)))
            }
        }
        Op::HasAny | Op::HasAll => {
            let l = as_list(&a[0])?;
            let r = as_list(&a[1])?;
            let conv = RowConverter::new(vec![SortField::new(l.values().data_type().clone())])?;
            let lr = conv.convert_columns(std::slice::from_ref(l.values()))?;
            let rr = conv.convert_columns(std::slice::from_ref(r.values()))?;
            let out: BooleanArray = spans(&l)
                .zip(spans(&r))
                .map(|((lok, ls, le), (rok, rs, re))| {
                    (lok && rok).then(|| {
                        let set: std::collections::HashSet<_> =
                            (ls..le).map(|j| lr.row(j)).collect();
                        let mut it = (rs..re).map(|j| set.contains(&rr.row(j)));
                        if op == Op::HasAny {
                            it.any(|b| b)
                        } else {
                            it.all(|b| b)
                        }
                    })
                })
                .collect();
            Ok(Arc::new(out))
        }
        Op::Element => {
            let l = as_list(&a[0])?;
            let ix = a[1].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let mut take_idx: Vec<Option<u32>> = Vec::with_capacity(l.len());
            let mut oor: Vec<bool> = Vec::with_capacity(l.len());
            for (i, (ok, s, e)) in spans(&l).enumerate() {
                let len = (e - s) as i64;
                let pos = if !ok || ix.is_null(i) {
                    None
                } else {
                    let k = ix.value(i);
                    if k > 0 && k <= len {
                        Some(s as i64 + k - 1)
                    } else if k < 0 && k.unsigned_abs() <= len as u64 {
                        Some(e as i64 + k)
                    } else {
                        oor.push(true);
                        take_idx.push(None);
                        continue;
                    }
                };
                oor.push(false);
                take_idx.push(pos.map(|p| p as u32));
            }
            let taken = take(l.values().as_ref(), &UInt32Array::from(take_idx), None)?;
            let taken = if taken.data_type() != ret {
                cast(&taken, ret)?
            } else {
                taken
            };
            if !oor.iter().any(|b| *b) {
                return Ok(taken);
            }
            let default = a[2].slice(0, 1);
            let mask = BooleanArray::from(oor);
            Ok(datafusion::arrow::compute::kernels::zip::zip(
                &mask,
                &Scalar::new(default),
                &taken,
            )?)
        }
        Op::Empty | Op::NotEmpty => {
            let want_empty = op == Op::Empty;
            let out: BooleanArray = if let Some(s) = a[0].as_string_opt::<i32>() {
                s.iter()
                    .map(|v| v.map(|v| v.is_empty() == want_empty))
                    .collect()
            } else {
                let l = as_list(&a[0])?;
                spans(&l)
                    .map(|(ok, s, e)| ok.then_some((s == e) == want_empty))
                    .collect()
            };
            Ok(Arc::new(out))
        }
        Op::Slice => {
            let l = as_list(&a[0])?;
            let off = a[1].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let len = a
                .get(2)
                .map(|x| x.as_primitive::<datafusion::arrow::datatypes::Int64Type>());
            let picks = spans(&l)
                .enumerate()
                .map(|(i, (_, s, e))| {
                    let n = (e - s) as i64;
                    if off.is_null(i) || len.is_some_and(|x| x.is_null(i)) {
                        return vec![];
                    }
                    let o = off.value(i);
                    let start = match o {
                        0 => return vec![],
                        o if o > 0 => o - 1,
                        o => n + o,
                    };
                    let end = match len.map(|x| x.value(i)) {
                        None => n,
                        Some(k) if k >= 0 => start.saturating_add(k),
                        Some(k) => n + k,
                    };
                    let (lo, hi) = (start.max(0), end.min(n));
                    (lo..hi.max(lo)).map(|j| (s as i64 + j) as u32).collect()
                })
                .collect();
            rebuild(&l, picks)
        }
        Op::StringConcat => {
            let l = as_list(&a[0])?;
            let vals = l.values().as_string::<i32>().clone();
            let sep = a[1].as_string::<i32>();
            let mut budget = crate::hogql::functions::budget::Output::new("arrayStringConcat");
            let mut out = datafusion::arrow::array::StringBuilder::new();
            for (i, (ok, s, e)) in spans(&l).enumerate() {
                if !ok {
                    out.append_null();
                    continue;
                }
                let sep = if sep.is_valid(i) { sep.value(i) } else { "" };
                let parts: Vec<&str> = (s..e)
                    .filter(|j| vals.is_valid(*j))
                    .map(|j| vals.value(j))
                    .collect();
                let size = parts
                    .iter()
                    .map(|p| p.len())
                    .sum::<usize>()
                    .saturating_add(sep.len().saturating_mul(parts.len().saturating_sub(1)));
                budget.take(size)?;
                out.append_value(parts.join(sep));
            }
            Ok(Arc::new(out.finish()))
        }
        Op::Compact | Op::Distinct => {
            let l = as_list(&a[0])?;
            let rows = rows_of(l.values())?;
            let vals = l.values();
            let picks = spans(&l)
                .map(|(_, s, e)| {
                    let mut out = vec![];
                    if op == Op::Compact {
                        for j in s..e {
                            if j == s || rows.row(j) != rows.row(j - 1) {
                                out.push(j as u32);
                            }
                        }
                    } else {
                        let mut seen = std::collections::HashSet::new();
                        for j in s..e {
                            if vals.is_valid(j) && seen.insert(rows.row(j)) {
                                out.push(j as u32);
                            }
                        }
                    }
                    out
                })
                .collect();
            rebuild(&l, picks)
        }
        Op::Sort { desc } => {
            let l = as_list(&a[0])?;
            sort_by_keys(&l, l.values(), desc)
        }
        Op::Enumerate => {
            let l = as_list(&a[0])?;
            let lens: Vec<usize> = spans(&l).map(|(_, s, e)| e - s).collect();
            let values = UInt32Array::from(
                lens.iter()
                    .flat_map(|n| 1..=(*n as u32))
                    .collect::<Vec<_>>(),
            );
            Ok(Arc::new(ListArray::try_new(
                Arc::new(Field::new_list_field(DataType::UInt32, true)),
                OffsetBuffer::from_lengths(lens),
                Arc::new(values),
                l.nulls().cloned(),
            )?))
        }
        Op::Sum | Op::Avg | Op::Min | Op::Max => reduce(op, a, ret),
        Op::CumSum => cum_sum(&as_list(&a[0])?, ret, false),
        Op::CumSumNonNegative => cum_sum(&as_list(&a[0])?, ret, true),
        Op::EnumerateUniq | Op::EnumerateDense => {
            let l = as_list(&a[0])?;
            let rows = rows_of(l.values())?;
            let mut values = Vec::with_capacity(l.values().len());
            for (_, s, e) in spans(&l) {
                let mut seen: std::collections::HashMap<Vec<u8>, u32> =
                    std::collections::HashMap::new();
                for j in s..e {
                    let next = seen.len() as u32 + 1;
                    let n = seen.entry(rows.row(j).as_ref().to_vec()).or_insert(0);
                    if op == Op::EnumerateUniq {
                        *n += 1;
                        values.push(*n);
                    } else {
                        if *n == 0 {
                            *n = next;
                        }
                        values.push(*n);
                    }
                }
            }
            Ok(Arc::new(ListArray::try_new(
                Arc::new(Field::new_list_field(DataType::UInt32, true)),
                l.offsets().clone(),
                Arc::new(UInt32Array::from(values)),
                l.nulls().cloned(),
            )?))
        }
        Op::Norm(_) | Op::Distance(_) | Op::Normalize(_) | Op::DotProduct | Op::CosineDistance => {
            vector_op(op, a)
        }
        Op::Intersect => intersect(a),
        Op::Zip => zip(a, ret),
        Op::Product | Op::Difference => {
            use datafusion::arrow::datatypes::{Float64Type, Int64Type};
            let l = as_list(&a[0])?;
            let vals = l.values();
            if op == Op::Product {
                let v = vals.as_primitive::<Float64Type>();
                let out: datafusion::arrow::array::Float64Array = spans(&l)
                    .map(|(ok, s, e)| {
                        ok.then(|| {
                            (s..e)
                                .filter(|&j| v.is_valid(j))
                                .map(|j| v.value(j))
                                .product()
                        })
                    })
                    .collect();
                return Ok(Arc::new(out));
            }
            // Each element minus the one before it, the first 0.
            let out: ArrayRef = if vals.data_type() == &DataType::Float64 {
                let v = vals.as_primitive::<Float64Type>();
                let mut d = Vec::with_capacity(v.len());
                for (_, s, e) in spans(&l) {
                    for j in s..e {
                        d.push(if j == s {
                            0.0
                        } else {
                            v.value(j) - v.value(j - 1)
                        });
                    }
                }
                Arc::new(datafusion::arrow::array::Float64Array::from(d))
            } else {
                let v = vals.as_primitive::<Int64Type>();
                let mut d = Vec::with_capacity(v.len());
                for (_, s, e) in spans(&l) {
                    for j in s..e {
                        d.push(if j == s {
                            0
                        } else {
                            v.value(j).wrapping_sub(v.value(j - 1))
                        });
                    }
                }
                Arc::new(datafusion::arrow::array::Int64Array::from(d))
            };
            let DataType::List(f) = ret else {
                unreachable!("a list")
            };
            Ok(Arc::new(ListArray::try_new(
                f.clone(),
                l.offsets().clone(),
                out,
                l.nulls().cloned(),
            )?))
        }
        Op::CountEqual => {
            let l = as_list(&a[0])?;
            let conv = RowConverter::new(vec![SortField::new(l.values().data_type().clone())])?;
            let vr = conv.convert_columns(std::slice::from_ref(l.values()))?;
            let nr = conv.convert_columns(std::slice::from_ref(&a[1]))?;
            let out: UInt64Array = spans(&l)
                .enumerate()
                .map(|(i, (ok, s, e))| {
                    ok.then(|| (s..e).filter(|&j| vr.row(j) == nr.row(i)).count() as u64)
                })
                .collect();
            Ok(Arc::new(out))
        }
        Op::HasSubstr => {
            let l = as_list(&a[0])?;
            let r = as_list(&a[1])?;
            let conv = RowConverter::new(vec![SortField::new(l.values().data_type().clone())])?;
            let lr = conv.convert_columns(std::slice::from_ref(l.values()))?;
            let rr = conv.convert_columns(std::slice::from_ref(r.values()))?;
            let out: BooleanArray = spans(&l)
                .zip(spans(&r))
                .map(|((lok, ls, le), (rok, rs, re))| {
                    (lok && rok).then(|| {
                        let n = re - rs;
                        n == 0
                            || (ls..le)
                                .filter(|&st| st + n <= le)
                                .any(|st| (0..n).all(|k| lr.row(st + k) == rr.row(rs + k)))
                    })
                })
                .collect();
            Ok(Arc::new(out))
        }
        Op::Uniq => {
            let l = as_list(&a[0])?;
            let rows = rows_of(l.values())?;
            let out: UInt64Array = spans(&l)
                .map(|(ok, s, e)| {
                    ok.then(|| {
                        (s..e)
                            .filter(|&j| l.values().is_valid(j))
                            .map(|j| rows.row(j))
                            .collect::<std::collections::HashSet<_>>()
                            .len() as u64
                    })
                })
                .collect();
            Ok(Arc::new(out))
        }
    }
}

/// The rows of a List(Float64) array (cast at translation) as vectors; NULL rows None.
fn vectors(a: &ArrayRef) -> Result<Vec<Option<Vec<f64>>>> {
    use datafusion::arrow::datatypes::Float64Type;
    let l = as_list(a)?;
    let vals = cast(l.values(), &DataType::Float64)?;
    let v = vals.as_primitive::<Float64Type>();
    Ok(spans(&l)
        .map(|(ok, s, e)| ok.then(|| (s..e).map(|j| v.value(j)).collect()))
        .collect())
}

/// The length of a constant array (`[1, 2]`, `array(1, 2)`), if `e` is one.
fn const_len(e: &Expr) -> Option<usize> {
    match e {
        Expr::ScalarFunction(f) if f.name() == "make_array" => Some(f.args.len()),
        Expr::Literal(ScalarValue::List(l), _) if l.len() == 1 && !l.is_null(0) => {
            Some(l.value_length(0) as usize)
        }
        Expr::Cast(c) => const_len(&c.expr),
        _ => None,
    }
}

/// A float sum as ClickHouse adds: from +0 (Rust's `Sum` for floats starts from -0, so an
/// empty sum would print as `-0`).
fn fsum(it: impl Iterator<Item = f64>) -> f64 {
    it.fold(0.0, |a, x| a + x)
}

fn norm(v: &[f64], p: f64) -> f64 {
    if p.is_infinite() {
        v.iter().fold(0.0, |m, x| m.max(x.abs()))
    } else if p == 1.0 {
        fsum(v.iter().map(|x| x.abs()))
    } else if p == 2.0 {
        fsum(v.iter().map(|x| x * x)).sqrt()
    } else {
        fsum(v.iter().map(|x| x.abs().powf(p))).powf(1.0 / p)
    }
}

/// L1/L2/Linf/Lp norms, distances and normalizations, dotProduct and cosineDistance.
fn vector_op(op: Op, a: &[ArrayRef]) -> Result<ArrayRef> {
    use datafusion::arrow::datatypes::{Float64Type, Int64Type};
    if op == Op::DotProduct
        && let (Ok(x), Ok(y)) = (as_list(&a[0]), as_list(&a[1]))
        && x.values().data_type() == &DataType::Int64
        && y.values().data_type() == &DataType::Int64
    {
        let (xv, yv) = (
            x.values().as_primitive::<Int64Type>(),
            y.values().as_primitive::<Int64Type>(),
        );
        let mut out = Vec::with_capacity(x.len());
        for ((ok_x, sx, ex), (ok_y, sy, ey)) in spans(&x).zip(spans(&y)) {
            if !(ok_x && ok_y) {
                out.push(None);
                continue;
            }
            if ex - sx != ey - sy {
                return Err(datafusion::common::DataFusionError::Execution(format!(
                    "Arguments of function have different array sizes: {} and {}",
                    ex - sx,
                    ey - sy
                )));
            }
            out.push(Some((0..ex - sx).fold(0i64, |acc, k| {
                acc.wrapping_add(xv.value(sx + k).wrapping_mul(yv.value(sy + k)))
            })));
        }
        return Ok(Arc::new(datafusion::arrow::array::Int64Array::from(out)));
    }
    let first = vectors(&a[0])?;
    let rows = first.len();
    let second = match op {
        Op::Distance(_) | Op::DotProduct | Op::CosineDistance => Some(vectors(&a[1])?),
        _ => None,
    };
    // Lp: p is the last argument
    let p_of = |kind: i8, r: usize| -> Result<Option<f64>> {
        Ok(match kind {
            1 => Some(1.0),
            2 => Some(2.0),
            0 => Some(f64::INFINITY),
            _ => {
                let c = cast(&a[a.len() - 1], &DataType::Float64)?;
                let c = c.as_primitive::<Float64Type>();
                if c.is_null(r) {
                    None
                } else {
                    let p = c.value(r);
                    if p.is_nan() || p < 1.0 {
                        return Err(datafusion::common::DataFusionError::Execution(format!(
                            "Second argument for function Lp must be not less than one, got {p}"
                        )));
                    }
                    Some(p)
                }
            }
        })
    };
    let pair = |r: usize| -> Result<Option<(Vec<f64>, Vec<f64>)>> {
        let (Some(x), Some(y)) = (&first[r], second.as_ref().and_then(|s| s[r].as_ref())) else {
            return Ok(None);
        };
        if x.len() != y.len() {
            return Err(datafusion::common::DataFusionError::Execution(format!(
                "Arguments of function have different array sizes: {} and {}",
                x.len(),
                y.len()
            )));
        }
        Ok(Some((x.clone(), y.clone())))
    };
    if let Op::Normalize(kind) = op {
        let mut offsets = vec![0i32];
        let mut values = Vec::new();
        let mut valid = Vec::with_capacity(rows);
        for (r, x) in first.iter().enumerate() {
            match (x, p_of(kind, r)?) {
                (Some(x), Some(p)) => {
                    let n = norm(x, p);
                    values.extend(x.iter().map(|v| v / n));
                    valid.push(true);
                }
                _ => valid.push(false),
            }
            offsets.push(values.len() as i32);
        }
        return Ok(Arc::new(ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Float64, true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(datafusion::arrow::array::Float64Array::from(values)),
            Some(valid.into()),
        )?));
    }
    let mut out = Vec::with_capacity(rows);
    for (r, x) in first.iter().enumerate() {
        out.push(match op {
            Op::Norm(kind) => match (x, p_of(kind, r)?) {
                (Some(x), Some(p)) => Some(norm(x, p)),
                _ => None,
            },
            Op::Distance(kind) => match (pair(r)?, p_of(kind, r)?) {
                (Some((x, y)), Some(p)) => {
                    let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
                    Some(norm(&d, p))
                }
                _ => None,
            },
            Op::DotProduct => pair(r)?.map(|(x, y)| fsum(x.iter().zip(&y).map(|(a, b)| a * b))),
            _ => pair(r)?.map(|(x, y)| {
                let dot = fsum(x.iter().zip(&y).map(|(a, b)| a * b));
                let (xx, yy): (f64, f64) =
                    (fsum(x.iter().map(|a| a * a)), fsum(y.iter().map(|b| b * b)));
                1.0 - dot / (xx * yy).sqrt()
            }),
        });
    }
    Ok(Arc::new(datafusion::arrow::array::Float64Array::from(out)))
}

/// `arrayCumSum`: running sums (NULL elements add nothing), in the list's element type
/// (Int64, UInt64 or Float64, cast at translation).
fn cum_sum(l: &ListArray, ret: &DataType, non_negative: bool) -> Result<ArrayRef> {
    use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
    let vals = l.values();
    let out: ArrayRef = match vals.data_type() {
        DataType::Float64 => {
            let v = vals.as_primitive::<Float64Type>();
            let mut out = Vec::with_capacity(v.len());
            for (_, s, e) in spans(l) {
                let mut acc = 0.0;
                for j in s..e {
                    if v.is_valid(j) {
                        acc += v.value(j);
                    }
                    if non_negative && acc < 0.0 {
                        acc = 0.0;
                    }
                    out.push(acc);
                }
            }
            Arc::new(datafusion::arrow::array::Float64Array::from(out))
        }
        DataType::UInt64 => {
            let v = vals.as_primitive::<UInt64Type>();
            let mut out = Vec::with_capacity(v.len());
            for (_, s, e) in spans(l) {
                let mut acc = 0u64;
                for j in s..e {
                    if v.is_valid(j) {
                        acc = acc.wrapping_add(v.value(j));
                    }
                    out.push(acc);
                }
            }
            Arc::new(UInt64Array::from(out))
        }
        _ => {
            let c = cast(vals, &DataType::Int64)?;
            let v = c.as_primitive::<Int64Type>();
            let mut out = Vec::with_capacity(v.len());
            for (_, s, e) in spans(l) {
                let mut acc = 0i64;
                for j in s..e {
                    if v.is_valid(j) {
                        acc = acc.wrapping_add(v.value(j));
                    }
                    if non_negative && acc < 0 {
                        acc = 0;
                    }
                    out.push(acc);
                }
            }
            Arc::new(datafusion::arrow::array::Int64Array::from(out))
        }
    };
    let field = match ret {
        DataType::List(f) => f.clone(),
        _ => Arc::new(Field::new_list_field(out.data_type().clone(), true)),
    };
    let out = cast(&out, field.data_type())?;
    Ok(Arc::new(ListArray::try_new(
        field,
        l.offsets().clone(),
        out,
        l.nulls().cloned(),
    )?))
}

/// `arrayIntersect`: the distinct elements of the first array (in its order) found in every
/// other array; NULL equals NULL. A NULL array gives NULL.
fn intersect(a: &[ArrayRef]) -> Result<ArrayRef> {
    let lists = a.iter().map(as_list).collect::<Result<Vec<_>>>()?;
    let first = &lists[0];
    let conv = RowConverter::new(vec![SortField::new(first.values().data_type().clone())])?;
    let rows = lists
        .iter()
        .map(|l| conv.convert_columns(std::slice::from_ref(l.values())))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let offs: Vec<&[i32]> = lists.iter().map(|l| l.value_offsets()).collect();
    let mut picks = Vec::with_capacity(first.len());
    let mut valid = Vec::with_capacity(first.len());
    for r in 0..first.len() {
        let ok = lists.iter().all(|l| l.is_valid(r));
        valid.push(ok);
        let mut pick = vec![];
        if ok {
            let others: Vec<std::collections::HashSet<_>> = (1..lists.len())
                .map(|i| {
                    (offs[i][r] as usize..offs[i][r + 1] as usize)
                        .map(|j| rows[i].row(j))
                        .collect()
                })
                .collect();
            let mut seen = std::collections::HashSet::new();
            for j in offs[0][r] as usize..offs[0][r + 1] as usize {
                let row = rows[0].row(j);
                if others.iter().all(|o| o.contains(&row)) && seen.insert(row) {
                    pick.push(j as u32);
                }
            }
        }
        picks.push(pick);
    }
    let out = rebuild(first, picks)?;
    let out = out.as_list::<i32>();
    Ok(Arc::new(ListArray::try_new(
        match out.data_type() {
            DataType::List(f) => f.clone(),
            _ => unreachable!(),
        },
        out.offsets().clone(),
        out.values().clone(),
        Some(valid.into()),
    )?))
}

/// `arrayZip`: one array of tuples; the arrays must have equal sizes (ClickHouse's error).
fn zip(a: &[ArrayRef], ret: &DataType) -> Result<ArrayRef> {
    use datafusion::arrow::array::StructArray;
    let lists = a.iter().map(as_list).collect::<Result<Vec<_>>>()?;
    let rows = lists.first().map_or(0, |l| l.len());
    let mut idx: Vec<Vec<u32>> = vec![vec![]; lists.len()];
    let mut lens = Vec::with_capacity(rows);
    let mut valid = Vec::with_capacity(rows);
    for r in 0..rows {
        let ok = lists.iter().all(|l| l.is_valid(r));
        valid.push(ok);
        let n = if ok {
            lists[0].value_length(r) as usize
        } else {
            0
        };
        for (i, l) in lists.iter().enumerate() {
            if ok && l.value_length(r) as usize != n {
                return Err(datafusion::error::DataFusionError::Execution(format!(
                    "The argument 1 and argument {} of function arrayZip have different array sizes",
                    i + 1
                )));
            }
            let s = l.value_offsets()[r] as u32;
            idx[i].extend((0..n as u32).map(|k| s + k));
        }
        lens.push(n);
    }
    let DataType::List(item) = ret else {
        unreachable!("arrayZip returns a list")
    };
    let DataType::Struct(fields) = item.data_type() else {
        unreachable!("of tuples")
    };
    let cols = lists
        .iter()
        .zip(idx)
        .map(|(l, ix)| Ok(take(l.values().as_ref(), &UInt32Array::from(ix), None)?))
        .collect::<Result<Vec<_>>>()?;
    let values = StructArray::try_new(fields.clone(), cols, None)?;
    Ok(Arc::new(ListArray::try_new(
        item.clone(),
        OffsetBuffer::from_lengths(lens),
        Arc::new(values),
        Some(valid.into()),
    )?))
}

/// Sorts each row of `l` by `keys` (aligned with `l`'s values), NULLs last in both directions
/// (as ClickHouse).
pub(super) fn sort_by_keys(l: &ListArray, keys: &ArrayRef, desc: bool) -> Result<ArrayRef> {
    let opts = SortOptions {
        descending: desc,
        nulls_first: false,
    };
    let picks = spans(l)
        .map(|(_, s, e)| {
            if e - s < 2 {
                return Ok((s as u32..e as u32).collect());
            }
            let slice = keys.slice(s, e - s);
            let idx = sort_to_indices(&slice, Some(opts), None)?;
            Ok(idx.values().iter().map(|i| i + s as u32).collect())
        })
        .collect::<Result<Vec<Vec<u32>>>>()?;
    rebuild(l, picks)
}

/// arraySum / arrayAvg / arrayMin / arrayMax, NULL elements skipped; an empty array gives 0
/// (ClickHouse's answer, also for arrayAvg) or the type's default for arrayMin/arrayMax.
fn reduce(op: Op, a: &[ArrayRef], ret: &DataType) -> Result<ArrayRef> {
    let l = as_list(&a[0])?;
    let vals = l.values();
    let default = ScalarValue::try_from_array(&a[1], 0)?;
    let mut out: Vec<ScalarValue> = Vec::with_capacity(l.len());
    match op {
        Op::Min | Op::Max => {
            let cmp = datafusion::arrow::array::make_comparator(
                vals.as_ref(),
                vals.as_ref(),
                SortOptions::default(),
            )?;
            let wanted = if op == Op::Min {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
            for (ok, s, e) in spans(&l) {
                if !ok {
                    out.push(ScalarValue::try_from(ret)?);
                    continue;
                }
                let mut best: Option<usize> = None;
                for j in s..e {
                    if vals.is_valid(j) && best.is_none_or(|b| cmp(j, b) == wanted) {
                        best = Some(j);
                    }
                }
                out.push(match best {
                    Some(b) => ScalarValue::try_from_array(vals, b)?,
                    None => default.clone(),
                });
            }
        }
        _ => {
            let f = cast(vals, &DataType::Float64)?;
            let f = f.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
            let ints = match ret {
                DataType::Int64 => Some(cast(vals, &DataType::Int64)?),
                DataType::UInt64 => Some(cast(vals, &DataType::UInt64)?),
                _ => None,
            };
            for (ok, s, e) in spans(&l) {
                if !ok {
                    out.push(ScalarValue::try_from(ret)?);
                    continue;
                }
                let valid = (s..e).filter(|j| vals.is_valid(*j));
                let v = match (&ints, op) {
                    (Some(iv), Op::Sum) if *ret == DataType::Int64 => {
                        let iv = iv.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                        ScalarValue::Int64(Some(
                            valid.map(|j| iv.value(j)).fold(0i64, i64::wrapping_add),
                        ))
                    }
                    (Some(iv), Op::Sum) => {
                        let iv = iv.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
                        ScalarValue::UInt64(Some(
                            valid.map(|j| iv.value(j)).fold(0u64, u64::wrapping_add),
                        ))
                    }
                    (_, Op::Sum) => ScalarValue::Float64(Some(fsum(valid.map(|j| f.value(j))))),
                    _ => {
                        let (n, sum) =
                            valid.fold((0usize, 0.0), |(n, acc), j| (n + 1, acc + f.value(j)));
                        ScalarValue::Float64(Some(if n == 0 { 0.0 } else { sum / n as f64 }))
                    }
                };
                out.push(v);
            }
        }
    }
    if out.is_empty() {
        return Ok(new_empty_array(ret));
    }
    let arr = ScalarValue::iter_to_array(out)?;
    if arr.data_type() != ret {
        return Ok(cast(&arr, ret)?);
    }
    Ok(arr)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::testutil::{Table, col, lit};
    use datafusion::arrow::array::Int64Builder;
    use datafusion::arrow::array::{ArrayRef, ListBuilder, StringArray, StringBuilder};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Expr;
    use std::sync::Arc;

    /// a: [1,2,3,2] | [] | NULL | [3,NULL,1]; s: [a,b] | [] | [x] | NULL; str: a | '' | NULL | b
    pub(crate) fn table() -> Table {
        let mut a = ListBuilder::new(Int64Builder::new());
        a.append_value([Some(1), Some(2), Some(3), Some(2)]);
        a.append_value([]);
        a.append_null();
        a.append_value([Some(3), None, Some(1)]);
        let mut s = ListBuilder::new(StringBuilder::new());
        s.append_value([Some("a"), Some("b")]);
        s.append_value(Vec::<Option<&str>>::new());
        s.append_value([Some("x")]);
        s.append_null();
        let st: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a"),
            Some(""),
            None,
            Some("b"),
        ]));
        Table::new(vec![
            ("a", Arc::new(a.finish()) as ArrayRef, true),
            ("s", Arc::new(s.finish()) as ArrayRef, true),
            ("str", st, true),
        ])
    }

    fn arr(t: &Table, v: Vec<i64>) -> Expr {
        t.f("array", v.into_iter().map(lit).collect())
    }

    #[test]
    fn array_functions_match_clickhouse() {
        let t = table();
        let null_i64 = super::lit(ScalarValue::Int64(None));
        let cases: Vec<(Expr, [&str; 4])> = vec![
            (
                t.f("has", vec![col("a"), lit(2)]),
                ["true", "false", "NULL", "false"],
            ),
            (
                t.f("has", vec![col("a"), null_i64]),
                ["false", "false", "NULL", "true"],
            ),
            (
                t.f("has", vec![col("a"), lit(1.5)]),
                ["false", "false", "NULL", "false"],
            ),
            (
                t.f("indexOf", vec![col("a"), lit(2)]),
                ["2", "0", "NULL", "0"],
            ),
            (
                t.f("indexOf", vec![col("a"), lit(1.0)]),
                ["1", "0", "NULL", "3"],
            ),
            (
                t.f("arrayElement", vec![col("a"), lit(2)]),
                ["2", "0", "NULL", "NULL"],
            ),
            (
                t.f("arrayElement", vec![col("a"), lit(-1)]),
                ["2", "0", "NULL", "1"],
            ),
            (
                t.f("arrayElement", vec![col("a"), lit(0)]),
                ["0", "0", "NULL", "0"],
            ),
            (
                t.f("arrayElement", vec![col("s"), lit(3)]),
                ["", "", "", "NULL"],
            ),
            (
                t.f("empty", vec![col("a")]),
                ["false", "true", "NULL", "false"],
            ),
            (
                t.f("notEmpty", vec![col("str")]),
                ["true", "false", "NULL", "true"],
            ),
            (
                t.f("empty", vec![col("str")]),
                ["false", "true", "NULL", "false"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(2), lit(2)]),
                ["[2, 3]", "[]", "NULL", "[NULL, 1]"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(-2)]),
                ["[3, 2]", "[]", "NULL", "[NULL, 1]"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(-9)]),
                ["[1, 2, 3, 2]", "[]", "NULL", "[3, NULL, 1]"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(-9), lit(2)]),
                ["[]", "[]", "NULL", "[]"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(0), lit(2)]),
                ["[]", "[]", "NULL", "[]"],
            ),
            (
                t.f("arraySlice", vec![col("a"), lit(2), lit(-1)]),
                ["[2, 3]", "[]", "NULL", "[NULL]"],
            ),
            (
                t.f("arrayStringConcat", vec![col("s"), lit("-")]),
                ["a-b", "", "x", "NULL"],
            ),
            (
                t.f("arrayStringConcat", vec![col("a")]),
                ["1232", "", "NULL", "31"],
            ),
            (
                t.f("arrayCompact", vec![arr(&t, vec![1, 1, 2, 2, 1])]),
                ["[1, 2, 1]"; 4],
            ),
            (
                t.f("arrayDistinct", vec![col("a")]),
                ["[1, 2, 3]", "[]", "NULL", "[3, 1]"],
            ),
            (
                t.f("arraySort", vec![col("a")]),
                ["[1, 2, 2, 3]", "[]", "NULL", "[1, 3, NULL]"],
            ),
            (
                t.f("arrayReverseSort", vec![col("a")]),
                ["[3, 2, 2, 1]", "[]", "NULL", "[3, 1, NULL]"],
            ),
            (t.f("arraySum", vec![col("a")]), ["8", "0", "NULL", "4"]),
            (
                t.f("arrayAvg", vec![col("a")]),
                ["2.0", "0.0", "NULL", "2.0"],
            ),
            (t.f("arrayMin", vec![col("a")]), ["1", "0", "NULL", "1"]),
            (t.f("arrayMax", vec![col("a")]), ["3", "0", "NULL", "3"]),
            (t.f("arrayMin", vec![col("s")]), ["a", "", "x", "NULL"]),
            (
                t.f("arrayEnumerate", vec![col("a")]),
                ["[1, 2, 3, 4]", "[]", "NULL", "[1, 2, 3]"],
            ),
            (
                t.f("hasAny", vec![col("a"), arr(&t, vec![2, 5])]),
                ["true", "false", "NULL", "false"],
            ),
            (
                t.f("hasAll", vec![col("a"), t.f("array", vec![])]),
                ["true", "true", "NULL", "true"],
            ),
            (
                t.f("hasAll", vec![col("a"), arr(&t, vec![1, 3])]),
                ["true", "false", "NULL", "true"],
            ),
            (
                t.f("arrayReverse", vec![col("a")]),
                ["[2, 3, 2, 1]", "[]", "NULL", "[1, NULL, 3]"],
            ),
            (
                t.f("range", vec![lit(1), lit(10), lit(3)]),
                ["[1, 4, 7]"; 4],
            ),
            (
                t.f("range", vec![lit(5), lit(1), lit(-1)]),
                ["[5, 4, 3, 2]"; 4],
            ),
            (t.f("range", vec![lit(3)]), ["[0, 1, 2]"; 4]),
            (
                t.f("arrayConcat", vec![arr(&t, vec![1, 2]), arr(&t, vec![3])]),
                ["[1, 2, 3]"; 4],
            ),
            (
                t.f("arrayPushBack", vec![arr(&t, vec![1]), lit(2)]),
                ["[1, 2]"; 4],
            ),
            (
                t.f("arrayPushFront", vec![arr(&t, vec![1]), lit(2)]),
                ["[2, 1]"; 4],
            ),
        ];
        let out = t.project(cases.iter().map(|c| c.0.clone()).collect());
        for (i, (e, want)) in cases.iter().enumerate() {
            assert_eq!(out[i].rows, want.to_vec(), "{e}");
        }
        assert_eq!(out[0].dt, DataType::Boolean);
        assert_eq!(out[3].dt, DataType::UInt64);
        assert_eq!(out[24].dt, DataType::Int64);
        assert!(
            t.try_call(
                "arrayElement",
                vec![],
                vec![
                    super::super::Arg::Expr(col("a")),
                    super::super::Arg::Expr(lit("x"))
                ],
                false
            )
            .is_err()
        );
    }
}
