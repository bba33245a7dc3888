//! HogQL functions: aggregate part (aggregates and their `-If` forms, window functions, array
//! functions and lambdas). See `super` for the contract.
//!
//! Every name here is checked against ClickHouse (through chdb) for its values and result
//! type; where ours must differ the function's doc comment says so.

mod aggs;
mod arg_best;
mod arrays;
mod bitmaps;
mod collect_groups;
mod crosstab;
mod frame;
mod funnel;
mod groups;
mod keyed;
mod lambda;
mod map_sums;
mod maps;
mod reduce;
mod rows;
mod tdigest;
#[cfg(test)]
mod testutil;
mod timing;
mod udaf;
mod uniq;
mod window;

use super::{Arg, FnContext, FnInfo, FnKind, FunctionError};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, ExprSchemable};
pub(crate) use frame::{frame_value_respect_udaf, frame_value_udaf, sliding_udaf};

/// How a name is spelled in the registry and whether it matches in any case.
struct Entry {
    name: &'static str,
    /// SQL-standard names (`count`, `sum`, …) match in any case, as in ClickHouse.
    any_case: bool,
    kind: FnKind,
    min_args: usize,
    max_args: Option<usize>,
    params: (usize, usize),
}

const fn e(
    name: &'static str,
    any_case: bool,
    kind: FnKind,
    min_args: usize,
    max_args: Option<usize>,
    params: (usize, usize),
) -> Entry {
    Entry {
        name,
        any_case,
        kind,
        min_args,
        max_args,
        params,
    }
}

use FnKind::{Aggregate as A, Scalar as S, Window as W};

/// Every name this half implements. `-If` forms of aggregates are derived (see [`lookup`]).
const ENTRIES: &[Entry] = &[
    // aggregates
    e("count", true, A, 0, Some(1), (0, 0)),
    e("sum", true, A, 1, Some(1), (0, 0)),
    e("avg", true, A, 1, Some(1), (0, 0)),
    e("min", true, A, 1, Some(1), (0, 0)),
    e("max", true, A, 1, Some(1), (0, 0)),
    e("any", false, A, 1, Some(1), (0, 0)),
    e("any_value", true, A, 1, Some(1), (0, 0)),
    e("first_value", true, A, 1, Some(1), (0, 0)),
    e("anyLast", false, A, 1, Some(1), (0, 0)),
    e("last_value", true, A, 1, Some(1), (0, 0)),
    e("uniq", false, A, 1, None, (0, 0)),
    e("uniqExact", false, A, 1, None, (0, 0)),
    e("uniqHLL12", false, A, 1, None, (0, 0)),
    e("uniqCombined", false, A, 1, None, (0, 1)),
    e("uniqCombined64", false, A, 1, None, (0, 1)),
    e("uniqTheta", false, A, 1, None, (0, 0)),
    e("countDistinct", false, A, 1, None, (0, 0)),
    e("argMax", false, A, 2, Some(2), (0, 0)),
    e("argMin", false, A, 2, Some(2), (0, 0)),
    e("median", false, A, 1, Some(1), (0, 0)),
    e("quantile", false, A, 1, Some(1), (1, 1)),
    e("quantiles", false, A, 1, Some(1), (1, usize::MAX)),
    e("quantileExact", false, A, 1, Some(1), (0, 1)),
    e("medianExact", false, A, 1, Some(1), (0, 0)),
    e("quantilesExact", false, A, 1, Some(1), (1, usize::MAX)),
    e("groupArray", false, A, 1, Some(1), (0, 1)),
    e("groupUniqArray", false, A, 1, Some(1), (0, 1)),
    e("topK", false, A, 1, Some(1), (0, 1)),
    e("windowFunnel", false, A, 2, None, (1, usize::MAX)),
    e("hedgerowFunnel", false, A, 2, None, (3, 4)),
    e("hedgerowFunnelTrends", false, A, 3, None, (4, 4)),
    e("stddevPop", false, A, 1, Some(1), (0, 0)),
    e("stddevSamp", false, A, 1, Some(1), (0, 0)),
    e("varPop", false, A, 1, Some(1), (0, 0)),
    e("varSamp", false, A, 1, Some(1), (0, 0)),
    e("STDDEV_POP", true, A, 1, Some(1), (0, 0)),
    e("STDDEV_SAMP", true, A, 1, Some(1), (0, 0)),
    e("VAR_POP", true, A, 1, Some(1), (0, 0)),
    e("VAR_SAMP", true, A, 1, Some(1), (0, 0)),
    e("corr", true, A, 2, Some(2), (0, 0)),
    e("avgWeighted", false, A, 2, Some(2), (0, 0)),
    e("skewPop", false, A, 1, Some(1), (0, 0)),
    e("skewSamp", false, A, 1, Some(1), (0, 0)),
    e("kurtPop", false, A, 1, Some(1), (0, 0)),
    e("kurtSamp", false, A, 1, Some(1), (0, 0)),
    e("covarPop", false, A, 2, Some(2), (0, 0)),
    e("covarSamp", false, A, 2, Some(2), (0, 0)),
    e("COVAR_POP", true, A, 2, Some(2), (0, 0)),
    e("COVAR_SAMP", true, A, 2, Some(2), (0, 0)),
    e("groupBitAnd", false, A, 1, Some(1), (0, 0)),
    e("groupBitOr", false, A, 1, Some(1), (0, 0)),
    e("groupBitXor", false, A, 1, Some(1), (0, 0)),
    e("sumWithOverflow", false, A, 1, Some(1), (0, 0)),
    e("deltaSum", false, A, 1, Some(1), (0, 0)),
    e("deltaSumTimestamp", false, A, 2, Some(2), (0, 0)),
    e("anyHeavy", false, A, 1, Some(1), (0, 0)),
    e("medianExactLow", false, A, 1, Some(1), (0, 0)),
    e("medianExactHigh", false, A, 1, Some(1), (0, 0)),
    e("medianExactWeighted", false, A, 2, Some(2), (0, 0)),
    e("medianBFloat16", false, A, 1, Some(1), (0, 0)),
    e("medianTiming", false, A, 1, Some(1), (0, 0)),
    e("medianTimingWeighted", false, A, 2, Some(2), (0, 0)),
    e("medianTDigest", false, A, 1, Some(1), (0, 0)),
    e("medianTDigestWeighted", false, A, 2, Some(2), (0, 0)),
    e("medianDeterministic", false, A, 2, Some(2), (0, 0)),
    e("simpleLinearRegression", false, A, 2, Some(2), (0, 0)),
    e("groupArrayMovingSum", false, A, 1, Some(1), (0, 1)),
    e("groupArrayMovingAvg", false, A, 1, Some(1), (0, 1)),
    e("groupArrayInsertAt", false, A, 2, Some(2), (0, 2)),
    e("maxIntersections", false, A, 2, Some(2), (0, 0)),
    e("maxIntersectionsPosition", false, A, 2, Some(2), (0, 0)),
    e("contingency", false, A, 2, Some(2), (0, 0)),
    e("cramersV", false, A, 2, Some(2), (0, 0)),
    e("cramersVBiasCorrected", false, A, 2, Some(2), (0, 0)),
    e("theilsU", false, A, 2, Some(2), (0, 0)),
    e("sumMap", false, A, 1, None, (0, 0)),
    e("minMap", false, A, 1, None, (0, 0)),
    e("maxMap", false, A, 1, None, (0, 0)),
    e("groupBitmap", false, A, 1, Some(1), (0, 0)),
    e("groupBitmapAnd", false, A, 1, Some(1), (0, 0)),
    e("groupBitmapOr", false, A, 1, Some(1), (0, 0)),
    e("groupBitmapXor", false, A, 1, Some(1), (0, 0)),
    // window functions
    e("row_number", true, W, 0, Some(0), (0, 0)),
    e("rank", true, W, 0, Some(0), (0, 0)),
    e("dense_rank", true, W, 0, Some(0), (0, 0)),
    e("percent_rank", true, W, 0, Some(0), (0, 0)),
    e("cume_dist", false, W, 0, Some(0), (0, 0)),
    e("lag", true, W, 1, Some(3), (0, 0)),
    e("lead", true, W, 1, Some(3), (0, 0)),
    e("lagInFrame", false, W, 1, Some(3), (0, 0)),
    e("leadInFrame", false, W, 1, Some(3), (0, 0)),
    e("nth_value", true, W, 2, Some(2), (0, 0)),
    // arrays
    e("array", false, S, 0, None, (0, 0)),
    e("range", false, S, 1, Some(3), (0, 0)),
    e("has", false, S, 2, Some(2), (0, 0)),
    e("hasAny", false, S, 2, Some(2), (0, 0)),
    e("hasAll", false, S, 2, Some(2), (0, 0)),
    e("indexOf", false, S, 2, Some(2), (0, 0)),
    e("arrayElement", false, S, 2, Some(2), (0, 0)),
    e("empty", false, S, 1, Some(1), (0, 0)),
    e("notEmpty", false, S, 1, Some(1), (0, 0)),
    e("arraySlice", false, S, 2, Some(3), (0, 0)),
    e("arrayStringConcat", false, S, 1, Some(2), (0, 0)),
    e("arrayConcat", false, S, 2, None, (0, 0)),
    e("arrayCompact", false, S, 1, Some(1), (0, 0)),
    e("arrayDistinct", false, S, 1, Some(1), (0, 0)),
    e("arrayReverse", false, S, 1, Some(1), (0, 0)),
    e("arrayEnumerate", false, S, 1, Some(1), (0, 0)),
    e("arrayPushBack", false, S, 2, Some(2), (0, 0)),
    e("arrayPushFront", false, S, 2, Some(2), (0, 0)),
    e("arrayPopBack", false, S, 1, Some(1), (0, 0)),
    e("arrayPopFront", false, S, 1, Some(1), (0, 0)),
    e("arrayCumSum", false, S, 1, Some(1), (0, 0)),
    e("arrayCumSumNonNegative", false, S, 1, Some(1), (0, 0)),
    e("arrayEnumerateUniq", false, S, 1, Some(1), (0, 0)),
    e("arrayEnumerateDense", false, S, 1, Some(1), (0, 0)),
    e("L1Norm", false, S, 1, Some(1), (0, 0)),
    e("L2Norm", false, S, 1, Some(1), (0, 0)),
    e("LinfNorm", false, S, 1, Some(1), (0, 0)),
    e("LpNorm", false, S, 2, Some(2), (0, 0)),
    e("L1Distance", false, S, 2, Some(2), (0, 0)),
    e("L2Distance", false, S, 2, Some(2), (0, 0)),
    e("LinfDistance", false, S, 2, Some(2), (0, 0)),
    e("LpDistance", false, S, 3, Some(3), (0, 0)),
    e("L1Normalize", false, S, 1, Some(1), (0, 0)),
    e("L2Normalize", false, S, 1, Some(1), (0, 0)),
    e("LinfNormalize", false, S, 1, Some(1), (0, 0)),
    e("LpNormalize", false, S, 2, Some(2), (0, 0)),
    e("dotProduct", false, S, 2, Some(2), (0, 0)),
    e("cosineDistance", false, S, 2, Some(2), (0, 0)),
    e("arrayIntersect", false, S, 1, None, (0, 0)),
    e("arrayZip", false, S, 2, None, (0, 0)),
    e("arrayFlatten", false, S, 1, Some(1), (0, 0)),
    e("arrayProduct", false, S, 1, Some(1), (0, 0)),
    e("arrayDifference", false, S, 1, Some(1), (0, 0)),
    e("countEqual", false, S, 2, Some(2), (0, 0)),
    e("hasSubstr", false, S, 2, Some(2), (0, 0)),
    e("arrayUniq", false, S, 1, Some(1), (0, 0)),
    e("arraySum", false, S, 1, Some(2), (0, 0)),
    e("arrayAvg", false, S, 1, Some(2), (0, 0)),
    e("arrayMin", false, S, 1, Some(2), (0, 0)),
    e("arrayMax", false, S, 1, Some(2), (0, 0)),
    // higher-order (lambda) array functions
    e("arrayMap", false, S, 2, None, (0, 0)),
    e("arrayFilter", false, S, 2, None, (0, 0)),
    e("arrayExists", false, S, 1, None, (0, 0)),
    e("arrayAll", false, S, 1, None, (0, 0)),
    e("arrayCount", false, S, 1, None, (0, 0)),
    e("arrayFirst", false, S, 2, None, (0, 0)),
    e("arrayLast", false, S, 2, None, (0, 0)),
    e("arrayFirstIndex", false, S, 2, None, (0, 0)),
    e("arrayLastIndex", false, S, 2, None, (0, 0)),
    e("arraySort", false, S, 1, None, (0, 0)),
    e("arrayReverseSort", false, S, 1, None, (0, 0)),
    e("arrayFill", false, S, 2, None, (0, 0)),
    e("arrayReverseFill", false, S, 2, None, (0, 0)),
    e("arraySplit", false, S, 2, None, (0, 0)),
    e("arrayReverseSplit", false, S, 2, None, (0, 0)),
    // an aggregate over each row's elements
    e("arrayReduce", false, S, 2, None, (0, 0)),
    // maps
    e("map", false, S, 0, None, (0, 0)),
    e("mapFromArrays", false, S, 2, Some(2), (0, 0)),
    e("mapKeys", false, S, 1, Some(1), (0, 0)),
    e("mapValues", false, S, 1, Some(1), (0, 0)),
    e("mapContains", false, S, 2, Some(2), (0, 0)),
    e("mapContainsKeyLike", false, S, 2, Some(2), (0, 0)),
    e("mapExtractKeyLike", false, S, 2, Some(2), (0, 0)),
    e("mapAdd", false, S, 2, None, (0, 0)),
    e("mapSubtract", false, S, 2, Some(2), (0, 0)),
    e("mapPopulateSeries", false, S, 1, Some(2), (0, 0)),
    e("mapUpdate", false, S, 2, Some(2), (0, 0)),
    e("mapApply", false, S, 2, Some(2), (0, 0)),
    e("mapFilter", false, S, 2, Some(2), (0, 0)),
    // PostHog's own
    e("sparkline", false, S, 1, Some(2), (0, 0)),
    // bitmaps
    e("bitmapBuild", false, S, 1, Some(1), (0, 0)),
    e("bitmapToArray", false, S, 1, Some(1), (0, 0)),
    e("bitmapSubsetInRange", false, S, 3, Some(3), (0, 0)),
    e("bitmapSubsetLimit", false, S, 3, Some(3), (0, 0)),
    e("subBitmap", false, S, 3, Some(3), (0, 0)),
    e("bitmapContains", false, S, 2, Some(2), (0, 0)),
    e("bitmapHasAny", false, S, 2, Some(2), (0, 0)),
    e("bitmapHasAll", false, S, 2, Some(2), (0, 0)),
    e("bitmapCardinality", false, S, 1, Some(1), (0, 0)),
    e("bitmapMin", false, S, 1, Some(1), (0, 0)),
    e("bitmapMax", false, S, 1, Some(1), (0, 0)),
    e("bitmapTransform", false, S, 3, Some(3), (0, 0)),
    e("bitmapAnd", false, S, 2, Some(2), (0, 0)),
    e("bitmapOr", false, S, 2, Some(2), (0, 0)),
    e("bitmapXor", false, S, 2, Some(2), (0, 0)),
    e("bitmapAndnot", false, S, 2, Some(2), (0, 0)),
    e("bitmapAndCardinality", false, S, 2, Some(2), (0, 0)),
    e("bitmapOrCardinality", false, S, 2, Some(2), (0, 0)),
    e("bitmapXorCardinality", false, S, 2, Some(2), (0, 0)),
    e("bitmapAndnotCardinality", false, S, 2, Some(2), (0, 0)),
];

fn entry(name: &str) -> Option<&'static Entry> {
    ENTRIES
        .iter()
        .find(|e| e.name == name || (e.any_case && e.name.eq_ignore_ascii_case(name)))
}

/// Resolves `name` to its registry entry and whether it is the `-If` form of an aggregate.
fn resolve(name: &str) -> Option<(&'static Entry, bool)> {
    if let Some(e) = entry(name) {
        return Some((e, false));
    }
    let base = name.strip_suffix("If")?;
    let e = entry(base)?;
    (e.kind == FnKind::Aggregate).then_some((e, true))
}

/// A scalar UDF's arguments as arrays of the batch's rows (constants repeated).
fn arg_arrays(
    args: &datafusion::logical_expr::ScalarFunctionArgs,
) -> datafusion::common::Result<Vec<datafusion::arrow::array::ArrayRef>> {
    let n = args.number_rows;
    args.args.iter().map(|a| a.to_array(n)).collect()
}

pub(super) fn lookup(name: &str) -> Option<FnInfo> {
    let (e, is_if) = resolve(name)?;
    let extra = usize::from(is_if);
    Some(FnInfo {
        kind: e.kind,
        min_args: e.min_args + extra,
        max_args: e.max_args.map(|m| m + extra),
        params: e.params,
    })
}

pub(super) fn translate(
    name: &str,
    params: Vec<Expr>,
    args: Vec<Arg>,
    distinct: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let (entry, is_if) = resolve(name).ok_or_else(|| FunctionError::Unknown(name.to_string()))?;
    let info = lookup(name).expect("resolved");
    check_count(name, "argument", info.min_args, info.max_args, args.len())?;
    let (pmin, pmax) = info.params;
    check_count(
        name,
        "parameter",
        pmin,
        (pmax != usize::MAX).then_some(pmax),
        params.len(),
    )?;
    match entry.kind {
        FnKind::Aggregate => {
            let mut args = exprs_only(name, args)?;
            let filter = if is_if {
                let cond = args.pop().expect("arity checked");
                Some(to_predicate(cond, ctx)?)
            } else {
                None
            };
            aggs::translate(entry.name, name, params, args, distinct, filter, ctx)
        }
        FnKind::Window => {
            let args = exprs_only(name, args)?;
            window::translate(entry.name, args, ctx)
        }
        FnKind::Scalar => {
            if entry.name == "sparkline" {
                sparkline(exprs_only(name, args)?)
            } else if maps::NAMES.contains(&entry.name) {
                maps::translate(entry.name, args, ctx)
            } else if bitmaps::NAMES.contains(&entry.name) {
                bitmaps::translate(entry.name, exprs_only(name, args)?, ctx)
            } else if entry.name == "arrayReduce" {
                reduce::translate(args, ctx)
            } else if lambda::is_higher_order(entry.name, &args) {
                lambda::translate(entry.name, args, ctx)
            } else {
                let args = exprs_only(name, args)?;
                arrays::translate(entry.name, args, ctx)
            }
        }
    }
}

/// PostHog's `sparkline(data[, labels])`: the HogQLX tag its UI draws as a small chart, a
/// tuple `('__hx_tag', 'Sparkline', 'data', data[, 'labels', labels])`, as PostHog's
/// printer makes it.
fn sparkline(args: Vec<Expr>) -> Result<Expr, FunctionError> {
    let s = |v: &str| lit(ScalarValue::Utf8(Some(v.to_string())));
    let mut items = vec![s("__hx_tag"), s("Sparkline"), s("data")];
    let mut it = args.into_iter();
    items.push(it.next().expect("arity"));
    if let Some(labels) = it.next() {
        items.push(s("labels"));
        items.push(labels);
    }
    Ok(datafusion::functions::core::expr_fn::r#struct(items))
}

fn check_count(
    name: &str,
    what: &str,
    min: usize,
    max: Option<usize>,
    got: usize,
) -> Result<(), FunctionError> {
    let ok = got >= min && max.is_none_or(|m| got <= m);
    if ok {
        return Ok(());
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let expected = match max {
        Some(m) if m == min => format!("{min} {what}{}", plural(min)),
        Some(m) if got > m => format!("at most {m} {what}{}", plural(m)),
        _ => format!("at least {min} {what}{}", plural(min)),
    };
    let msg = format!("Function `{name}` expects {expected}, found {got}");
    Err(FunctionError::Arity(msg))
}

fn exprs_only(name: &str, args: Vec<Arg>) -> Result<Vec<Expr>, FunctionError> {
    args.into_iter()
        .map(|a| match a {
            Arg::Expr(e) => Ok(e),
            Arg::Lambda { .. } => Err(FunctionError::Invalid(format!(
                "Function `{name}` does not take a lambda argument"
            ))),
        })
        .collect()
}

fn type_of(expr: &Expr, ctx: &FnContext<'_>) -> Result<DataType, FunctionError> {
    expr.get_type(ctx.schema)
        .map_err(|e| FunctionError::Invalid(e.to_string()))
}

fn nullable(expr: &Expr, ctx: &FnContext<'_>) -> bool {
    expr.nullable(ctx.schema).unwrap_or(true)
}

fn df_err(e: datafusion::error::DataFusionError) -> FunctionError {
    FunctionError::Invalid(e.to_string())
}

/// A condition as a Boolean predicate: ClickHouse conditions are UInt8 (non-zero is true).
fn to_predicate(cond: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    match type_of(&cond, ctx)? {
        DataType::Boolean => Ok(cond),
        DataType::Null => Ok(Expr::Literal(ScalarValue::Boolean(None), None)),
        t if t.is_numeric() => Ok(datafusion::logical_expr::cast(cond, DataType::Boolean)),
        t => Err(FunctionError::Invalid(format!(
            "Illegal type {t} of condition, must be a Bool or a number"
        ))),
    }
}

/// ClickHouse's default value of a type: what non-Nullable aggregates of no rows and
/// out-of-range array reads give (0, '', 1970-01-01, empty array).
fn default_value(dt: &DataType) -> ScalarValue {
    match dt {
        DataType::Utf8 => ScalarValue::Utf8(Some(String::new())),
        DataType::LargeUtf8 => ScalarValue::LargeUtf8(Some(String::new())),
        DataType::Utf8View => ScalarValue::Utf8View(Some(String::new())),
        DataType::Boolean => ScalarValue::Boolean(Some(false)),
        DataType::Date32 => ScalarValue::Date32(Some(0)),
        DataType::Timestamp(unit, tz) => {
            let tz = tz.clone();
            match unit {
                TimeUnit::Second => ScalarValue::TimestampSecond(Some(0), tz),
                TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(Some(0), tz),
                TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(0), tz),
                TimeUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(0), tz),
            }
        }
        DataType::List(f) => empty_list(f),
        _ => ScalarValue::new_zero(dt)
            .unwrap_or_else(|_| ScalarValue::try_from(dt).unwrap_or(ScalarValue::Null)),
    }
}

/// A one-row empty list scalar with item field `f`.
fn empty_list(f: &datafusion::arrow::datatypes::FieldRef) -> ScalarValue {
    use datafusion::arrow::array::{ListArray, new_empty_array};
    use datafusion::arrow::buffer::OffsetBuffer;
    let list = ListArray::new(
        f.clone(),
        OffsetBuffer::from_lengths([0]),
        new_empty_array(f.data_type()),
        None,
    );
    ScalarValue::List(std::sync::Arc::new(list))
}

fn lit(v: ScalarValue) -> Expr {
    Expr::Literal(v, None)
}

/// Reads a literal parameter/argument as an integer.
fn literal_i64(name: &str, e: &Expr) -> Result<i64, FunctionError> {
    let v = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(v, _) => v.arithmetic_negate().map_err(df_err)?,
            _ => ScalarValue::Null,
        },
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => v.clone(),
            _ => ScalarValue::Null,
        },
        _ => ScalarValue::Null,
    };
    match v.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(n))) => Ok(n),
        _ => Err(FunctionError::Invalid(format!(
            "Function `{name}` needs a constant integer, got {e}"
        ))),
    }
}

/// Reads a literal parameter as a float.
fn literal_f64(name: &str, e: &Expr) -> Result<f64, FunctionError> {
    let v = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => v.clone(),
            _ => ScalarValue::Null,
        },
        _ => ScalarValue::Null,
    };
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(Some(n))) => Ok(n),
        _ => Err(FunctionError::Invalid(format!(
            "Function `{name}` needs a constant number parameter, got {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_names_and_if_forms() {
        let c = lookup("COUNT").unwrap();
        assert_eq!(
            (c.kind, c.min_args, c.max_args),
            (FnKind::Aggregate, 0, Some(1))
        );
        let c = lookup("countIf").unwrap();
        assert_eq!((c.min_args, c.max_args), (1, Some(2)));
        let c = lookup("uniqExactIf").unwrap();
        assert_eq!((c.min_args, c.max_args), (2, None));
        assert!(lookup("Uniq").is_none());
        assert!(lookup("hasIf").is_none());
        assert!(lookup("length").is_none());
        assert!(lookup("arrayJoin").is_none());
        assert_eq!(lookup("ROW_NUMBER").unwrap().kind, FnKind::Window);
        assert_eq!(lookup("lagInFrame").unwrap().kind, FnKind::Window);
        assert_eq!(lookup("arrayMap").unwrap().kind, FnKind::Scalar);
        assert_eq!(lookup("quantile").unwrap().params, (1, 1));
        assert_eq!(lookup("first_value").unwrap().kind, FnKind::Aggregate);
    }

    #[test]
    fn sparkline_is_posthogs_tag_tuple() {
        use super::testutil::{Table, lit};
        use datafusion::arrow::array::{ArrayRef, Int64Array};
        let n: ArrayRef = std::sync::Arc::new(Int64Array::from(vec![1]));
        let t = Table::new(vec![("n", n, false)]);
        let data = t.f("array", vec![lit(3i64), lit(1i64)]);
        let labels = t.f("array", vec![lit("a"), lit("b")]);
        let out = t.project(vec![
            t.f("sparkline", vec![data.clone()]),
            t.f("sparkline", vec![data, labels]),
        ]);
        assert_eq!(
            out[0].rows[0],
            "{c0: __hx_tag, c1: Sparkline, c2: data, c3: [3, 1]}"
        );
        assert_eq!(
            out[1].rows[0],
            "{c0: __hx_tag, c1: Sparkline, c2: data, c3: [3, 1], c4: labels, c5: [a, b]}"
        );
        assert_eq!(lookup("sparkline").unwrap().max_args, Some(2));
    }

    #[test]
    fn arity_messages() {
        assert_eq!(
            check_count("argMax", "argument", 2, Some(2), 3).unwrap_err(),
            FunctionError::Arity("Function `argMax` expects 2 arguments, found 3".into())
        );
        assert_eq!(
            check_count("count", "argument", 0, Some(1), 2).unwrap_err(),
            FunctionError::Arity("Function `count` expects at most 1 argument, found 2".into())
        );
        assert_eq!(
            check_count("range", "argument", 1, Some(3), 0).unwrap_err(),
            FunctionError::Arity("Function `range` expects at least 1 argument, found 0".into())
        );
        assert_eq!(
            check_count("arrayMap", "argument", 2, None, 1).unwrap_err(),
            FunctionError::Arity(
                "Function `arrayMap` expects at least 2 arguments, found 1".into()
            )
        );
        assert!(check_count("uniq", "argument", 1, None, 5).is_ok());
    }
}
