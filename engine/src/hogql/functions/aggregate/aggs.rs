//! Aggregate functions: DataFusion's where they give ClickHouse's answer (wrapped to give
//! ClickHouse's result type and its value for no rows), ours (`udaf`) where they do not.
//!
//! No rows (or, for `-If`, no row passing the condition): ClickHouse answers the type's
//! default (`0`, `''`, `1970-01-01 00:00:00`; `nan` for avg/quantiles/variances) when the
//! argument is not Nullable, and NULL when it is. We follow that using the argument
//! expression's nullability, so `sum(toFloat(properties.x))` of nothing is NULL while
//! `sum(1)` or `count()` of nothing is 0.

use super::super::FnContext;
use super::rows::{BitmapOp, KeyedOp, Rows, RowsKind};
use super::udaf::{ArgMinMax, Collect, CollectKind, MomentKind, Moments, WindowFunnel};
use super::{FunctionError, default_value, lit, literal_f64, literal_i64, nullable, type_of};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::functions::core::expr_fn::{coalesce, r#struct};
use datafusion::functions_aggregate as fa;
use datafusion::logical_expr::expr::{AggregateFunction, NullTreatment};
use datafusion::logical_expr::{AggregateUDF, Expr, cast};
use std::sync::Arc;

fn node(
    udaf: Arc<AggregateUDF>,
    args: Vec<Expr>,
    distinct: bool,
    filter: Option<Expr>,
    nulls: Option<NullTreatment>,
) -> Expr {
    Expr::AggregateFunction(AggregateFunction::new_udf(
        udaf,
        args,
        distinct,
        filter.map(Box::new),
        vec![],
        nulls,
    ))
}

/// AND of an optional filter with more conditions.
fn and_filter(filter: Option<Expr>, more: Vec<Expr>) -> Option<Expr> {
    more.into_iter()
        .fold(filter, |acc, c| Some(acc.map_or(c.clone(), |a| a.and(c))))
}

/// Booleans are aggregated as ClickHouse's UInt8.
fn bool_to_u8(e: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    Ok(if type_of(&e, ctx)? == DataType::Boolean {
        cast(e, DataType::UInt8)
    } else {
        e
    })
}

fn numeric_arg(fname: &str, e: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let t = type_of(&e, ctx)?;
    match t {
        DataType::Boolean => Ok(cast(e, DataType::UInt8)),
        DataType::Null => Ok(cast(e, DataType::Float64)),
        t if t.is_numeric() => Ok(e),
        t => Err(FunctionError::Invalid(format!(
            "Illegal type {t} of argument for aggregate function {fname}"
        ))),
    }
}

fn as_f64(e: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    Ok(if type_of(&e, ctx)? == DataType::Float64 {
        e
    } else {
        cast(e, DataType::Float64)
    })
}

/// `agg` when some argument is Nullable (NULL for no rows), else `coalesce(agg, default)`.
fn or_default(agg: Expr, any_nullable: bool, default: ScalarValue) -> Expr {
    if any_nullable {
        agg
    } else {
        coalesce(vec![agg, lit(default)])
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn translate(
    canon: &str,
    called: &str,
    params: Vec<Expr>,
    args: Vec<Expr>,
    distinct: bool,
    filter: Option<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let any_nullable = args.iter().any(|a| nullable(a, ctx));
    let u64 = |e: Expr| cast(e, DataType::UInt64);
    match canon {
        "count" => {
            let arg = args
                .into_iter()
                .next()
                .unwrap_or(lit(ScalarValue::Int64(Some(1))));
            if distinct && is_id(&arg, ctx)? {
                return Ok(u64(uniq_id(arg, filter)));
            }
            Ok(u64(node(
                fa::count::count_udaf(),
                vec![arg],
                distinct,
                filter,
                None,
            )))
        }
        "uniq" | "uniqExact" | "uniqHLL12" | "uniqCombined" | "uniqCombined64" | "uniqTheta"
        | "countDistinct" => {
            if args.len() == 1 && is_id(&args[0], ctx)? {
                let arg = args.into_iter().next().expect("one argument");
                return Ok(u64(uniq_id(arg, filter)));
            }
            Ok(u64(count_distinct(args, filter)))
        }
        "sum" => {
            let arg = numeric_arg(called, args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            let out = sum_type(&t);
            let agg = node(fa::sum::sum_udaf(), vec![arg], distinct, filter, None);
            let agg = if type_of_agg_matches(&t, &out) {
                agg
            } else {
                cast(agg, out.clone())
            };
            Ok(or_default(agg, any_nullable, default_value(&out)))
        }
        "avg" => {
            let arg = as_f64(
                numeric_arg(called, args.into_iter().next().expect("arity"), ctx)?,
                ctx,
            )?;
            let agg = node(fa::average::avg_udaf(), vec![arg], distinct, filter, None);
            Ok(or_default(
                agg,
                any_nullable,
                ScalarValue::Float64(Some(f64::NAN)),
            ))
        }
        "min" | "max" => {
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            let udaf = if canon == "min" {
                fa::min_max::min_udaf()
            } else {
                fa::min_max::max_udaf()
            };
            let agg = node(udaf, vec![arg], distinct, filter, None);
            Ok(or_default(agg, any_nullable, default_value(&t)))
        }
        "any" | "any_value" | "first_value" => {
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            let agg = node(
                fa::any_value::any_value_udaf(),
                vec![arg],
                distinct,
                filter,
                None,
            );
            Ok(or_default(agg, any_nullable, default_value(&t)))
        }
        "anyLast" | "last_value" => {
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            let agg = node(
                fa::first_last::last_value_udaf(),
                vec![arg],
                distinct,
                filter,
                Some(NullTreatment::IgnoreNulls),
            );
            Ok(or_default(agg, any_nullable, default_value(&t)))
        }
        "argMax" | "argMin" => {
            let mut it = args.into_iter();
            let val = bool_to_u8(it.next().expect("arity"), ctx)?;
            let key = bool_to_u8(it.next().expect("arity"), ctx)?;
            let udaf = Arc::new(AggregateUDF::from(ArgMinMax::new(canon == "argMax")));
            Ok(node(udaf, vec![val, key], false, filter, None))
        }
        "median" | "quantile" | "quantiles" => {
            let ps = if canon == "median" || params.is_empty() {
                vec![0.5]
            } else {
                params
                    .iter()
                    .map(|p| literal_f64(called, p))
                    .collect::<Result<Vec<_>, _>>()?
            };
            if let Some(p) = ps.iter().find(|p| !(0.0..=1.0).contains(*p)) {
                return Err(FunctionError::Invalid(format!(
                    "Quantile level {p} of `{called}` is out of range [0..1]"
                )));
            }
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            let arg = match t {
                DataType::Timestamp(_, _) | DataType::Date32 | DataType::Float64 => arg,
                t if t.is_numeric() => cast(arg, DataType::Float64),
                t => {
                    return Err(FunctionError::Invalid(format!(
                        "Illegal type {t} of argument for aggregate function {called}"
                    )));
                }
            };
            let kind = CollectKind::Quantiles {
                levels: ps.iter().map(|p| p.to_bits()).collect(),
                array: canon == "quantiles",
            };
            Ok(collect(kind, arg, filter))
        }
        "quantileExact" | "quantilesExact" | "medianExact" => {
            let ps = if params.is_empty() {
                vec![0.5]
            } else {
                params
                    .iter()
                    .map(|p| literal_f64(called, p))
                    .collect::<Result<Vec<_>, _>>()?
            };
            if let Some(p) = ps.iter().find(|p| !(0.0..=1.0).contains(*p)) {
                return Err(FunctionError::Invalid(format!(
                    "Quantile level {p} of `{called}` is out of range [0..1]"
                )));
            }
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let t = type_of(&arg, ctx)?;
            if !(t.is_numeric() || matches!(t, DataType::Timestamp(..) | DataType::Date32)) {
                return Err(FunctionError::Invalid(format!(
                    "Illegal type {t} of argument for aggregate function {called}"
                )));
            }
            let kind = CollectKind::QuantilesExact {
                levels: ps.iter().map(|p| p.to_bits()).collect(),
                array: canon == "quantilesExact",
            };
            Ok(collect(kind, arg, filter))
        }
        "groupArray" | "groupUniqArray" | "topK" => {
            let limit = match params.first() {
                Some(p) => {
                    let n = literal_i64(called, p)?;
                    if n <= 0 {
                        return Err(FunctionError::Invalid(format!(
                            "Parameter of `{called}` must be a positive integer"
                        )));
                    }
                    Some(n as usize)
                }
                None => None,
            };
            let arg = bool_to_u8(args.into_iter().next().expect("arity"), ctx)?;
            let kind = match canon {
                "groupArray" => CollectKind::GroupArray { limit },
                "groupUniqArray" => CollectKind::GroupUniqArray { limit },
                _ => CollectKind::TopK {
                    k: limit.unwrap_or(10),
                },
            };
            Ok(collect(kind, arg, filter))
        }
        "windowFunnel" => window_funnel(called, params, args, filter, ctx),
        "hedgerowFunnel" | "hedgerowFunnelTrends" => {
            super::funnel::plan(called, params, args, filter, ctx)
        }
        // Σ(x·w) / Σw as Float64 over the rows where both are set (nan for none, as
        // ClickHouse).
        "avgWeighted" => {
            let mut it = args.into_iter();
            let x = as_f64(numeric_arg(called, it.next().expect("arity"), ctx)?, ctx)?;
            let w = as_f64(numeric_arg(called, it.next().expect("arity"), ctx)?, ctx)?;
            // Rows where either is NULL count in neither sum.
            let filter = and_filter(
                filter,
                vec![x.clone().is_not_null(), w.clone().is_not_null()],
            );
            let num = node(
                fa::sum::sum_udaf(),
                vec![x * w.clone()],
                false,
                filter.clone(),
                None,
            );
            let den = node(fa::sum::sum_udaf(), vec![w], false, filter, None);
            Ok(or_default(
                num / den,
                any_nullable,
                ScalarValue::Float64(Some(f64::NAN)),
            ))
        }
        // Skewness and kurtosis from the power sums of x: central moments m2, m3, m4 over n,
        // divided by m2^1.5 / m2² (Pop) or by the sample variance's (Samp), as ClickHouse.
        "skewPop" | "skewSamp" | "kurtPop" | "kurtSamp" => {
            let x = as_f64(
                numeric_arg(called, args.into_iter().next().expect("arity"), ctx)?,
                ctx,
            )?;
            let f = |v: f64| lit(ScalarValue::Float64(Some(v)));
            let sum_pow = |k: i32| {
                let mut e = x.clone();
                for _ in 1..k {
                    e = e * x.clone();
                }
                node(fa::sum::sum_udaf(), vec![e], false, filter.clone(), None)
            };
            let n = cast(
                node(
                    fa::count::count_udaf(),
                    vec![x.clone()],
                    false,
                    filter.clone(),
                    None,
                ),
                DataType::Float64,
            );
            let (s1, s2, s3, s4) = (sum_pow(1), sum_pow(2), sum_pow(3), sum_pow(4));
            let mu = s1 / n.clone();
            let e2 = s2 / n.clone();
            let m2 = e2.clone() - mu.clone() * mu.clone();
            let var = if canon.ends_with("Samp") {
                m2 * n.clone() / (n.clone() - f(1.0))
            } else {
                m2
            };
            let power = datafusion::functions::math::expr_fn::power;
            let out = if canon.starts_with("skew") {
                let e3 = s3 / n;
                let m3 = e3 - f(3.0) * mu.clone() * e2 + f(2.0) * mu.clone() * mu.clone() * mu;
                m3 / power(var, f(1.5))
            } else {
                let e3 = s3 / n.clone();
                let e4 = s4 / n;
                let mu2 = mu.clone() * mu.clone();
                let m4 = e4 - f(4.0) * mu.clone() * e3 + f(6.0) * mu2.clone() * e2
                    - f(3.0) * mu2.clone() * mu2;
                m4 / (var.clone() * var)
            };
            Ok(or_default(
                out,
                any_nullable,
                ScalarValue::Float64(Some(f64::NAN)),
            ))
        }
        "stddevPop" | "STDDEV_POP" | "stddevSamp" | "STDDEV_SAMP" | "varPop" | "VAR_POP"
        | "varSamp" | "VAR_SAMP" | "corr" | "covarPop" | "COVAR_POP" | "covarSamp"
        | "COVAR_SAMP" => {
            let args = args
                .into_iter()
                .map(|a| as_f64(numeric_arg(called, a, ctx)?, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            let kind = match canon {
                "stddevPop" | "STDDEV_POP" => MomentKind::StddevPop,
                "stddevSamp" | "STDDEV_SAMP" => MomentKind::StddevSamp,
                "varPop" | "VAR_POP" => MomentKind::VarPop,
                "varSamp" | "VAR_SAMP" => MomentKind::VarSamp,
                "corr" => MomentKind::Corr,
                "covarPop" | "COVAR_POP" => MomentKind::CovarPop,
                _ => MomentKind::CovarSamp,
            };
            let udaf = Arc::new(AggregateUDF::from(Moments::new(kind)));
            Ok(node(udaf, args, false, filter, None))
        }
        "medianDeterministic" => {
            // ClickHouse samples with the determinator's hash beyond 8192 values; up to there
            // it is `median` (as our `median`, exact at every size). The determinator must be
            // an integer and is otherwise unused.
            let mut it = args.into_iter();
            let x = it.next().expect("arity");
            let det = it.next().expect("arity");
            let dt = type_of(&det, ctx)?;
            if !dt.is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Second argument (determinator) of `{called}` must be an integer, not {dt}"
                )));
            }
            let filter = and_filter(filter, vec![det.is_not_null()]);
            translate("median", called, vec![], vec![x], false, filter, ctx)
        }
        "groupBitAnd"
        | "groupBitOr"
        | "groupBitXor"
        | "sumWithOverflow"
        | "deltaSum"
        | "deltaSumTimestamp"
        | "anyHeavy"
        | "medianExactLow"
        | "medianExactHigh"
        | "medianExactWeighted"
        | "medianBFloat16"
        | "simpleLinearRegression"
        | "groupArrayMovingSum"
        | "groupArrayMovingAvg"
        | "groupArrayInsertAt"
        | "medianTiming"
        | "medianTimingWeighted"
        | "medianTDigest"
        | "medianTDigestWeighted"
        | "maxIntersections"
        | "maxIntersectionsPosition"
        | "contingency"
        | "cramersV"
        | "cramersVBiasCorrected"
        | "theilsU" => rows(canon, called, params, args, filter, ctx),
        "sumMap" | "minMap" | "maxMap" => keyed_map(canon, called, args, filter, ctx),
        // The number of distinct values, in the argument's type (NULL for no rows when it is
        // Nullable).
        "groupBitmap" => {
            let x = args.into_iter().next().expect("arity");
            let t = type_of(&x, ctx)?;
            if !(t.is_unsigned_integer() || t == DataType::Int64) {
                return Err(FunctionError::Invalid(format!(
                    "Illegal type {t} of argument for aggregate function {called}: bitmaps hold unsigned integers or Int64"
                )));
            }
            let n = node(fa::count::count_udaf(), vec![x], true, filter, None);
            let out = cast(n.clone(), t);
            Ok(if any_nullable {
                datafusion::logical_expr::when(
                    n.eq(lit(ScalarValue::Int64(Some(0)))),
                    lit(ScalarValue::Null),
                )
                .otherwise(out)
                .map_err(super::df_err)?
            } else {
                out
            })
        }
        "groupBitmapAnd" | "groupBitmapOr" | "groupBitmapXor" => {
            let b = args.into_iter().next().expect("arity");
            let t = type_of(&b, ctx)?;
            if super::bitmaps::bitmap_item(&t).is_none() {
                return Err(FunctionError::Invalid(format!(
                    "Function `{called}` needs a bitmap (from bitmapBuild), got {t}"
                )));
            }
            let op = match canon {
                "groupBitmapAnd" => BitmapOp::And,
                "groupBitmapOr" => BitmapOp::Or,
                _ => BitmapOp::Xor,
            };
            let udaf = Arc::new(AggregateUDF::from(Rows::new(RowsKind::BitmapAgg(op), 1)));
            Ok(node(udaf, vec![b], false, filter, None))
        }
        _ => Err(FunctionError::Unknown(called.to_string())),
    }
}

/// `sumMap(keys, values…)`, `sumMap((keys, values…))`, `sumMap(map)` and the same of
/// minMap/maxMap.
fn keyed_map(
    canon: &str,
    called: &str,
    args: Vec<Expr>,
    filter: Option<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    use datafusion::functions::core::expr_fn::get_field;
    let op = match canon {
        "sumMap" => KeyedOp::Sum,
        "minMap" => KeyedOp::Min,
        _ => KeyedOp::Max,
    };
    let mut map_out = false;
    let args = if args.len() == 1 {
        let a = args.into_iter().next().expect("one argument");
        match type_of(&a, ctx)? {
            DataType::Map(..) => {
                map_out = true;
                let (k, v) = super::maps::keys_and_values(a, ctx)?;
                vec![k, v]
            }
            DataType::Struct(fs) if fs.len() >= 2 => fs
                .iter()
                .map(|f| get_field(a.clone(), f.name().as_str()))
                .collect(),
            t => {
                return Err(FunctionError::Invalid(format!(
                    "Function `{called}` needs arrays of keys and values, a tuple of them or a Map, got {t}"
                )));
            }
        }
    } else {
        args
    };
    if args.len() < 2 {
        return Err(FunctionError::Invalid(format!(
            "Function `{called}` needs arrays of keys and values"
        )));
    }
    for (i, a) in args.iter().enumerate() {
        match type_of(a, ctx)? {
            DataType::List(f) => {
                let t = f.data_type();
                if i > 0 && op == KeyedOp::Sum && !(t.is_numeric() || t.is_null()) {
                    return Err(FunctionError::Invalid(format!(
                        "Illegal type {t} of values for aggregate function {called}"
                    )));
                }
            }
            t => {
                return Err(FunctionError::Invalid(format!(
                    "Function `{called}` needs arrays of keys and values, got {t}"
                )));
            }
        }
    }
    let n = args.len();
    let udaf = Arc::new(AggregateUDF::from(Rows::new(
        RowsKind::KeyedMap { op, map_out },
        n,
    )));
    Ok(node(udaf, args, false, filter, None))
}

/// The aggregates of `rows.rs`: argument types checked as ClickHouse does.
fn rows(
    canon: &str,
    called: &str,
    params: Vec<Expr>,
    args: Vec<Expr>,
    filter: Option<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let args = if canon == "anyHeavy" {
        args
    } else {
        args.into_iter()
            .map(|a| bool_to_u8(a, ctx))
            .collect::<Result<Vec<_>, _>>()?
    };
    let types = args
        .iter()
        .map(|a| type_of(a, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let illegal = |t: &DataType| {
        Err(FunctionError::Invalid(format!(
            "Illegal type {t} of argument for aggregate function {called}"
        )))
    };
    let is_time = |t: &DataType| matches!(t, DataType::Timestamp(..) | DataType::Date32);
    let window = |params: &[Expr]| -> Result<Option<usize>, FunctionError> {
        match params.first() {
            None => Ok(None),
            Some(p) => {
                let n = literal_i64(called, p)?;
                if n <= 0 {
                    return Err(FunctionError::Invalid(format!(
                        "Parameter of `{called}` must be a positive integer"
                    )));
                }
                Ok(Some(n as usize))
            }
        }
    };
    let t0 = &types[0];
    let kind = match canon {
        "groupBitAnd" | "groupBitOr" | "groupBitXor" => {
            if !t0.is_integer() {
                return illegal(t0);
            }
            match canon {
                "groupBitAnd" => RowsKind::BitAnd,
                "groupBitOr" => RowsKind::BitOr,
                _ => RowsKind::BitXor,
            }
        }
        "sumWithOverflow"
        | "deltaSum"
        | "groupArrayMovingSum"
        | "groupArrayMovingAvg"
        | "simpleLinearRegression"
        | "medianBFloat16" => {
            if let Some(t) = types.iter().find(|t| !t.is_numeric()) {
                return illegal(t);
            }
            match canon {
                "sumWithOverflow" => RowsKind::SumWithOverflow,
                "deltaSum" => RowsKind::DeltaSum,
                "groupArrayMovingSum" => RowsKind::MovingSum(window(&params)?),
                "groupArrayMovingAvg" => RowsKind::MovingAvg(window(&params)?),
                "medianBFloat16" => RowsKind::MedianBFloat16,
                _ => RowsKind::LinearRegression,
            }
        }
        "deltaSumTimestamp" => {
            if !t0.is_numeric() {
                return illegal(t0);
            }
            if !(types[1].is_numeric() || is_time(&types[1])) {
                return illegal(&types[1]);
            }
            RowsKind::DeltaSumTimestamp
        }
        "anyHeavy" => RowsKind::AnyHeavy,
        "medianTiming" | "medianTimingWeighted" | "medianTDigest" | "medianTDigestWeighted" => {
            if !t0.is_numeric() {
                return illegal(t0);
            }
            let weighted = canon.ends_with("Weighted");
            if weighted && !types[1].is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Second argument (weight) of `{called}` must be an integer, not {}",
                    types[1]
                )));
            }
            if canon.starts_with("medianTDigest") {
                RowsKind::MedianTDigest { weighted }
            } else {
                RowsKind::MedianTiming { weighted }
            }
        }
        "medianExactLow" | "medianExactHigh" | "medianExactWeighted" => {
            if !(t0.is_numeric() || is_time(t0)) {
                return illegal(t0);
            }
            if canon == "medianExactWeighted" && !types[1].is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Second argument (weight) of `{called}` must be an integer, not {}",
                    types[1]
                )));
            }
            match canon {
                "medianExactLow" => RowsKind::MedianLow,
                "medianExactHigh" => RowsKind::MedianHigh,
                _ => RowsKind::MedianWeighted,
            }
        }
        "groupArrayInsertAt" => {
            if !types[1].is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Second argument (position) of `{called}` must be an integer, not {}",
                    types[1]
                )));
            }
            let default = match params.first() {
                None => None,
                Some(Expr::Literal(v, _)) => Some(v.cast_to(t0).map_err(|_| {
                    FunctionError::Invalid(format!(
                        "The default value of `{called}` does not convert to {t0}"
                    ))
                })?),
                Some(p) => {
                    return Err(FunctionError::Invalid(format!(
                        "The default value of `{called}` must be a constant, got {p}"
                    )));
                }
            };
            let size = match params.get(1) {
                None => None,
                Some(p) => {
                    let n = literal_i64(called, p)?;
                    if !(0..=0xFF_FFFF).contains(&n) {
                        return Err(FunctionError::Invalid(format!(
                            "Size of `{called}` must be between 0 and 16777215"
                        )));
                    }
                    Some(n as usize)
                }
            };
            RowsKind::InsertAt { default, size }
        }
        "maxIntersections" | "maxIntersectionsPosition" => {
            if !t0.is_numeric() || types[1] != *t0 {
                return Err(FunctionError::Invalid(format!(
                    "`{called}`: arguments must be numbers of the same type, got {t0} and {}",
                    types[1]
                )));
            }
            if canon == "maxIntersections" {
                RowsKind::MaxIntersections
            } else {
                RowsKind::MaxIntersectionsPosition
            }
        }
        "contingency" => RowsKind::Contingency,
        "cramersV" => RowsKind::CramersV,
        "cramersVBiasCorrected" => RowsKind::CramersVBiasCorrected,
        _ => RowsKind::TheilsU,
    };
    let n = args.len();
    let udaf = Arc::new(AggregateUDF::from(Rows::new(kind, n)));
    Ok(node(udaf, args, false, filter, None))
}

/// ClickHouse's sum type: signed integers sum as Int64, unsigned as UInt64, floats as Float64.
pub(super) fn sum_type(t: &DataType) -> DataType {
    match t {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            DataType::UInt64
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => DataType::Float64,
        other => other.clone(),
    }
}

/// Whether DataFusion's `sum` already returns `out` for input `t`.
fn type_of_agg_matches(t: &DataType, out: &DataType) -> bool {
    !matches!(
        (t, out),
        (DataType::Float32 | DataType::Float16, DataType::Float64)
    )
}

/// `uniq(x, y, …)`: distinct non-NULL tuples (rows with a NULL argument are skipped).
/// Whether `e` is a 16-byte id (HogQL's UUID) or a string, which [`uniq_id`] counts.
fn is_id(e: &Expr, ctx: &FnContext<'_>) -> Result<bool, FunctionError> {
    let t = type_of(e, ctx)?;
    Ok(t == crate::storage::ids::UUID_TYPE
        || matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8))
}

/// The number of distinct non-NULL 16-byte ids or strings (see `uniq.rs`).
fn uniq_id(arg: Expr, filter: Option<Expr>) -> Expr {
    let udaf = Arc::new(AggregateUDF::from(super::uniq::UniqId::new()));
    node(udaf, vec![arg], false, filter, None)
}

fn count_distinct(args: Vec<Expr>, filter: Option<Expr>) -> Expr {
    if args.len() == 1 {
        return node(fa::count::count_udaf(), args, true, filter, None);
    }
    let not_null: Vec<Expr> = args.iter().map(|a| a.clone().is_not_null()).collect();
    node(
        fa::count::count_udaf(),
        vec![r#struct(args)],
        true,
        and_filter(filter, not_null),
        None,
    )
}

fn collect(kind: CollectKind, arg: Expr, filter: Option<Expr>) -> Expr {
    let udaf = Arc::new(AggregateUDF::from(Collect::new(kind)));
    node(udaf, vec![arg], false, filter, None)
}

/// `windowFunnel(window)(timestamp, cond1, cond2, …)` in ClickHouse's default mode.
/// ClickHouse takes DateTime (window in seconds), Date (days) or an unsigned integer (raw
/// units); we also take DateTime64 (ClickHouse rejects it), with the window in seconds.
fn window_funnel(
    called: &str,
    params: Vec<Expr>,
    args: Vec<Expr>,
    filter: Option<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let window = literal_i64(called, &params[0])?;
    if window < 0 {
        return Err(FunctionError::Invalid(format!(
            "Window of `{called}` must not be negative"
        )));
    }
    if params.len() > 1 {
        return Err(FunctionError::Invalid(format!(
            "`{called}`: modes (strict_order, strict_deduplication, strict_increase, …) are not supported"
        )));
    }
    let mut it = args.into_iter();
    let ts = it.next().expect("arity");
    let (ts, scale) = match type_of(&ts, ctx)? {
        DataType::Timestamp(unit, _) => {
            let scale = match unit {
                TimeUnit::Second => 1,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            (cast(ts, DataType::Int64), scale)
        }
        DataType::Date32 => (cast(cast(ts, DataType::Int32), DataType::Int64), 1),
        t if t.is_integer() => (cast(ts, DataType::Int64), 1),
        t => {
            return Err(FunctionError::Invalid(format!(
                "Illegal type {t} of first argument of aggregate function {called}, must be a number, Date or DateTime"
            )));
        }
    };
    let conds = it
        .map(|c| super::to_predicate(c, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    if conds.len() > 32 {
        return Err(FunctionError::Invalid(format!(
            "`{called}` takes at most 32 conditions"
        )));
    }
    let window = window
        .checked_mul(scale)
        .ok_or_else(|| FunctionError::Invalid(format!("Window of `{called}` is too large")))?;
    let udaf = Arc::new(AggregateUDF::from(WindowFunnel::new(window, conds.len())));
    let mut all = vec![ts];
    all.extend(conds);
    Ok(node(udaf, all, false, filter, None))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Table, col, lit};
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::DataType;
    use std::sync::Arc;

    /// The same rows as the chdb reference query:
    /// n Int64 [3,1,4,1,5,9,2,6]; s Nullable(String); f Nullable(Float64).
    fn table() -> Table {
        let n: ArrayRef = Arc::new(Int64Array::from(vec![3, 1, 4, 1, 5, 9, 2, 6]));
        let s: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a"),
            None,
            Some("b"),
            Some("a"),
            None,
            Some("c"),
            Some("b"),
            Some("a"),
        ]));
        let f: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.5),
            None,
            Some(2.5),
            None,
            Some(4.0),
            None,
            None,
            Some(1.0),
        ]));
        Table::new(vec![("n", n, false), ("s", s, true), ("f", f, true)])
    }

    /// (expression, expected ClickHouse type as Arrow type, nullable, printed value)
    fn check(t: &Table, cases: Vec<(datafusion::logical_expr::Expr, DataType, bool, &str)>) {
        for parts in [1, 2, 3] {
            let exprs = cases.iter().map(|c| c.0.clone()).collect();
            let out = t.agg_parts(parts, exprs);
            for (i, (e, dt, nullable, want)) in cases.iter().enumerate() {
                assert_eq!(out[i].one(), *want, "value of {e} ({parts} partitions)");
                assert_eq!(&out[i].dt, dt, "type of {e}");
                assert_eq!(out[i].nullable, *nullable, "nullability of {e}");
            }
        }
    }

    #[test]
    fn counts_and_uniq() {
        let t = table();
        let gt = |v: i64| col("n").gt(lit(v));
        check(
            &t,
            vec![
                (t.f("count", vec![]), DataType::UInt64, false, "8"),
                (t.f("COUNT", vec![col("s")]), DataType::UInt64, false, "6"),
                (
                    t.call(
                        "count",
                        vec![],
                        vec![super::super::Arg::Expr(col("s"))],
                        true,
                    ),
                    DataType::UInt64,
                    false,
                    "3",
                ),
                (t.f("countIf", vec![gt(2)]), DataType::UInt64, false, "5"),
                (
                    t.f("countIf", vec![col("s"), gt(2)]),
                    DataType::UInt64,
                    false,
                    "4",
                ),
                (t.f("uniq", vec![col("s")]), DataType::UInt64, false, "3"),
                (
                    t.f("uniqExact", vec![col("n")]),
                    DataType::UInt64,
                    false,
                    "7",
                ),
                (
                    t.f("countDistinct", vec![col("n")]),
                    DataType::UInt64,
                    false,
                    "7",
                ),
                (
                    t.f("uniq", vec![col("n"), col("s")]),
                    DataType::UInt64,
                    false,
                    "6",
                ),
                (
                    t.f("uniqIf", vec![col("s"), gt(3)]),
                    DataType::UInt64,
                    false,
                    "3",
                ),
                (
                    t.f("uniqExactIf", vec![col("s"), gt(100)]),
                    DataType::UInt64,
                    false,
                    "0",
                ),
            ],
        );
    }

    #[test]
    fn sum_avg_min_max() {
        let t = table();
        let gt = |v: i64| col("n").gt(lit(v));
        let f64n = DataType::Float64;
        check(
            &t,
            vec![
                (t.f("sum", vec![col("n")]), DataType::Int64, false, "31"),
                (t.f("sum", vec![col("f")]), f64n.clone(), true, "9.0"),
                (t.f("sum", vec![gt(2)]), DataType::UInt64, false, "5"),
                (
                    t.f("sumIf", vec![col("n"), gt(100)]),
                    DataType::Int64,
                    false,
                    "0",
                ),
                (
                    t.f("sumIf", vec![col("f"), gt(100)]),
                    f64n.clone(),
                    true,
                    "NULL",
                ),
                (t.f("avg", vec![col("n")]), f64n.clone(), false, "3.875"),
                (t.f("avg", vec![col("f")]), f64n.clone(), true, "2.25"),
                (
                    t.f("avgIf", vec![col("n"), gt(100)]),
                    f64n.clone(),
                    false,
                    "NaN",
                ),
                (
                    t.f("avgIf", vec![col("f"), gt(100)]),
                    f64n.clone(),
                    true,
                    "NULL",
                ),
                (t.f("min", vec![col("n")]), DataType::Int64, false, "1"),
                (t.f("MAX", vec![col("s")]), DataType::Utf8, true, "c"),
                (
                    t.f("minIf", vec![col("n"), gt(100)]),
                    DataType::Int64,
                    false,
                    "0",
                ),
                (
                    t.f("maxIf", vec![col("s"), gt(100)]),
                    DataType::Utf8,
                    true,
                    "NULL",
                ),
                (t.f("min", vec![gt(2)]), DataType::UInt8, false, "0"),
            ],
        );
        // (a cast does not show in a column name: these need their own query)
        check(
            &t,
            vec![(
                t.f(
                    "sum",
                    vec![datafusion::logical_expr::cast(col("n"), DataType::UInt8)],
                ),
                DataType::UInt64,
                false,
                "31",
            )],
        );
        check(
            &t,
            vec![(
                t.f(
                    "sum",
                    vec![datafusion::logical_expr::cast(col("n"), DataType::Float32)],
                ),
                DataType::Float64,
                false,
                "31.0",
            )],
        );
    }

    #[test]
    fn any_and_arg() {
        let t = table();
        let gt = |v: i64| col("n").gt(lit(v));
        // order-dependent: one partition
        let cases = [
            (t.f("any", vec![col("s")]), DataType::Utf8, true, "a"),
            (t.f("anyLast", vec![col("s")]), DataType::Utf8, true, "a"),
            (
                t.f("first_value", vec![col("f")]),
                DataType::Float64,
                true,
                "1.5",
            ),
            (
                t.f("last_value", vec![col("f")]),
                DataType::Float64,
                true,
                "1.0",
            ),
            (
                t.f("anyIf", vec![col("n"), gt(100)]),
                DataType::Int64,
                false,
                "0",
            ),
        ];
        let out = t.agg_parts(1, cases.iter().map(|c| c.0.clone()).collect());
        for (i, (e, dt, nullable, want)) in cases.iter().enumerate() {
            assert_eq!(out[i].one(), *want, "{e}");
            assert_eq!((&out[i].dt, out[i].nullable), (dt, *nullable), "{e}");
        }
        check(
            &t,
            vec![
                (
                    t.f("argMax", vec![col("s"), col("n")]),
                    DataType::Utf8,
                    true,
                    "c",
                ),
                (
                    t.f("argMin", vec![col("s"), col("n")]),
                    DataType::Utf8,
                    true,
                    "a",
                ),
                (
                    t.f("argMaxIf", vec![col("n"), col("f"), gt(100)]),
                    DataType::Int64,
                    true,
                    "NULL",
                ),
                (
                    t.f("argMin", vec![col("n"), col("f")]),
                    DataType::Int64,
                    true,
                    "6",
                ),
                (
                    t.f("argMax", vec![col("n"), col("n")]),
                    DataType::Int64,
                    false,
                    "9",
                ),
                (
                    t.f("argMaxIf", vec![col("n"), col("n"), gt(100)]),
                    DataType::Int64,
                    false,
                    "0",
                ),
            ],
        );
    }

    #[test]
    fn quantiles_and_arrays() {
        let t = table();
        let gt = |v: i64| col("n").gt(lit(v));
        let lf = |t: DataType| {
            DataType::List(Arc::new(
                datafusion::arrow::datatypes::Field::new_list_field(t, true),
            ))
        };
        check(
            &t,
            vec![
                (
                    t.f("median", vec![col("n")]),
                    DataType::Float64,
                    false,
                    "3.5",
                ),
                (
                    t.p("quantile", vec![lit(0.9)], vec![col("n")]),
                    DataType::Float64,
                    false,
                    "6.8999999999999995",
                ),
                (
                    t.p(
                        "quantiles",
                        vec![lit(0.1), lit(0.5), lit(0.99)],
                        vec![col("n")],
                    ),
                    lf(DataType::Float64),
                    false,
                    "[1.0, 3.5, 8.79]",
                ),
                (
                    t.p("quantile", vec![lit(0.5)], vec![col("f")]),
                    DataType::Float64,
                    true,
                    "2.0",
                ),
                (
                    t.p("quantileIf", vec![lit(0.5)], vec![col("f"), gt(100)]),
                    DataType::Float64,
                    true,
                    "NULL",
                ),
                (
                    t.p("quantileIf", vec![lit(0.5)], vec![col("n"), gt(100)]),
                    DataType::Float64,
                    false,
                    "NaN",
                ),
                (
                    t.p("quantilesIf", vec![lit(0.5)], vec![col("n"), gt(100)]),
                    lf(DataType::Float64),
                    false,
                    "[NaN]",
                ),
                (
                    t.p("topK", vec![lit(2)], vec![col("s")]),
                    lf(DataType::Utf8),
                    false,
                    "[a, b]",
                ),
                (
                    t.f("groupArrayIf", vec![col("s"), gt(100)]),
                    lf(DataType::Utf8),
                    false,
                    "[]",
                ),
            ],
        );
        // Order-dependent ones on one partition.
        let cases = [
            (t.f("groupArray", vec![col("s")]), "[a, b, a, c, b, a]"),
            (t.p("groupArray", vec![lit(2)], vec![col("n")]), "[3, 1]"),
            (t.f("groupUniqArray", vec![col("s")]), "[a, b, c]"),
            (t.f("topK", vec![col("n")]), "[1, 3, 4, 5, 9, 2, 6]"),
        ];
        let out = t.agg_parts(1, cases.iter().map(|c| c.0.clone()).collect());
        for (i, (e, want)) in cases.iter().enumerate() {
            assert_eq!(out[i].one(), *want, "{e}");
        }
        assert!(
            t.try_call(
                "quantile",
                vec![lit(1.5)],
                vec![super::super::Arg::Expr(col("n"))],
                false
            )
            .is_err()
        );
    }

    #[test]
    fn statistics() {
        let t = table();
        let eq = |v: i64| col("n").eq(lit(v));
        let f = DataType::Float64;
        check(
            &t,
            vec![
                (
                    t.f("stddevPop", vec![col("n")]),
                    f.clone(),
                    false,
                    "2.5708704751503917",
                ),
                (
                    t.f("stddevSamp", vec![col("f")]),
                    f.clone(),
                    true,
                    "1.3228756555322954",
                ),
                (t.f("varPop", vec![col("f")]), f.clone(), true, "1.3125"),
                (
                    t.f("varSamp", vec![col("n")]),
                    f.clone(),
                    false,
                    "7.553571428571429",
                ),
                (
                    t.f("varSampIf", vec![col("n"), eq(9)]),
                    f.clone(),
                    false,
                    "NaN",
                ),
                (
                    t.f("varSampIf", vec![col("f"), eq(3)]),
                    f.clone(),
                    true,
                    "NaN",
                ),
                (
                    t.f("stddevPopIf", vec![col("f"), eq(100)]),
                    f.clone(),
                    true,
                    "NULL",
                ),
                (
                    t.f("covarPop", vec![col("n"), col("f")]),
                    f.clone(),
                    true,
                    "0.0",
                ),
                (
                    t.f("covarSamp", vec![col("n"), col("f")]),
                    f.clone(),
                    true,
                    "0.0",
                ),
                (
                    t.f("corr", vec![col("n"), col("n")]),
                    f.clone(),
                    false,
                    "1.0",
                ),
                (
                    t.f("corr", vec![col("n"), col("f")]),
                    f.clone(),
                    true,
                    "0.0",
                ),
                (
                    t.f("covarSampIf", vec![col("n"), col("f"), eq(100)]),
                    f.clone(),
                    true,
                    "NULL",
                ),
                (
                    t.f("varPopIf", vec![col("n"), eq(100)]),
                    f.clone(),
                    false,
                    "NaN",
                ),
            ],
        );
    }
}

#[cfg(test)]
mod funnel_tests {
    use super::super::testutil::{Table, col, lit};
    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::cast;
    use std::sync::Arc;

    /// (person, second, event) rows; windowFunnel per person checked against chdb.
    fn table(rows: &[(i64, i64, &str)]) -> Table {
        let p: ArrayRef = Arc::new(Int64Array::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        ));
        let ts: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(
                rows.iter().map(|r| r.1 * 1_000_000).collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        );
        let e: ArrayRef = Arc::new(StringArray::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        ));
        Table::new(vec![("p", p, false), ("ts", ts, false), ("e", e, false)])
    }

    #[test]
    fn window_funnel_levels() {
        // person 1: a@1 b@20 a@21 c@22 b@25 c@40 with (a,b,c) window 10 -> 2
        // person 2: a@1 a@5 b@12 c@13 -> 3
        // person 3: a@1 b@11 -> 2 (window end inclusive); person 4: b@5 a@1 -> 2 (sorted)
        // person 5: b@1 a@1 -> 2 (same second: step order); person 6: b@3 -> 0
        let t = table(&[
            (1, 1, "a"),
            (1, 20, "b"),
            (1, 21, "a"),
            (1, 22, "c"),
            (1, 25, "b"),
            (1, 40, "c"),
            (2, 1, "a"),
            (2, 5, "a"),
            (2, 12, "b"),
            (2, 13, "c"),
            (3, 1, "a"),
            (3, 11, "b"),
            (4, 5, "b"),
            (4, 1, "a"),
            (5, 1, "b"),
            (5, 1, "a"),
            (6, 3, "b"),
        ]);
        let ev = |s: &str| col("e").eq(lit(s));
        let wf = t.p(
            "windowFunnel",
            vec![lit(10)],
            vec![col("ts"), ev("a"), ev("b"), ev("c")],
        );
        let out = t.agg_by(col("p"), vec![wf]);
        assert_eq!(out[0].rows, vec!["2", "3", "2", "2", "2", "0"]);
        assert_eq!(out[0].dt, DataType::UInt8);
        assert!(!out[0].nullable);
        // same condition twice: one event fills both steps (chdb: 2); UInt8 conditions work
        let wf2 = t.p(
            "windowFunnel",
            vec![lit(10)],
            vec![col("ts"), ev("a"), cast(ev("a"), DataType::UInt8)],
        );
        let wf_if = t.p(
            "windowFunnelIf",
            vec![lit(10)],
            vec![col("ts"), ev("a"), ev("b"), col("p").gt(lit(100))],
        );
        let out = t.agg_by(col("p"), vec![wf2, wf_if]);
        assert_eq!(out[0].rows, vec!["2", "2", "2", "2", "2", "0"]);
        assert_eq!(out[1].rows, vec!["0"; 6]);
        assert!(
            t.try_call(
                "windowFunnel",
                vec![lit(10), lit("strict_order")],
                vec![
                    super::super::Arg::Expr(col("ts")),
                    super::super::Arg::Expr(ev("a"))
                ],
                false
            )
            .unwrap_err()
            .to_string()
            .contains("not supported")
        );
    }
}
