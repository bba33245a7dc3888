//! Helpers over DataFusion expressions and plans: literals, operators, null handling, window
//! rewrites, outer-join defaults.

use super::*;

// -------------------------------------------------------------------------------------
// helpers
// -------------------------------------------------------------------------------------

/// `plan` with the columns `replace` (given each column's index, field and reference)
/// answers an expression for replaced by it under the column's name; the rest as they are.
pub(super) fn map_columns(
    plan: LogicalPlan,
    replace: impl Fn(usize, &datafusion::arrow::datatypes::Field, Expr) -> Option<Expr>,
) -> PResult<LogicalPlan> {
    let exprs: Vec<Expr> = plan
        .schema()
        .iter()
        .enumerate()
        .map(|(i, (q, f))| {
            let c = Expr::Column(Column::new(q.cloned(), f.name()));
            match replace(i, f, c.clone()) {
                Some(e) => e.alias(f.name()),
                None => c,
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan)
        .project(exprs)
        .and_then(|b| b.build())
        .map_err(df)
}

/// The two sides of a set operation with every column where one side's type `meets` the
/// other's (either way round) passed through `convert` on both sides (where it answers).
pub(super) fn set_op_agree(
    l: LogicalPlan,
    r: LogicalPlan,
    meets: impl Fn(&DataType, &DataType) -> bool,
    convert: impl Fn(&datafusion::arrow::datatypes::Field, Expr) -> Option<Expr>,
) -> PResult<(LogicalPlan, LogicalPlan)> {
    let types = |p: &LogicalPlan| -> Vec<DataType> {
        p.schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect()
    };
    let (lt, rt) = (types(&l), types(&r));
    if lt.len() != rt.len() {
        return Ok((l, r));
    }
    let hit: Vec<bool> = lt
        .iter()
        .zip(&rt)
        .map(|(a, b)| meets(a, b) || meets(b, a))
        .collect();
    if !hit.contains(&true) {
        return Ok((l, r));
    }
    let side = |plan| map_columns(plan, |i, f, c| if hit[i] { convert(f, c) } else { None });
    Ok((side(l)?, side(r)?))
}

/// Whether each column was nullable before a join: (right side by name, left side by
/// (qualifier, name)).
pub(super) type Nullability = (HashMap<String, bool>, HashMap<(String, String), bool>);

/// ClickHouse fills the missing side of an outer join with its columns' default values
/// (0, '', …), not NULL, unless a column was Nullable to begin with; PostHog keeps that.
pub(super) fn join_defaults(
    plan: LogicalPlan,
    nullability: &Nullability,
    right_alias: &str,
    left_rels: &[Relation],
    join_type: JoinType,
) -> PResult<LogicalPlan> {
    let mut changed = false;
    let exprs: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(q, f)| {
            let c = Expr::Column(Column::new(q.cloned(), f.name()));
            let qual = q.map(|q| q.table().to_string()).unwrap_or_default();
            let is_right = qual == right_alias;
            let was_nullable = if is_right {
                nullability.0.get(f.name()).copied().unwrap_or(true)
            } else {
                nullability
                    .1
                    .get(&(qual.clone(), f.name().clone()))
                    .copied()
                    .unwrap_or(true)
            };
            let filled_side = match join_type {
                JoinType::Left => is_right,
                JoinType::Right => !is_right && left_rels.iter().any(|r| r.alias == qual),
                _ => true,
            };
            if filled_side
                && !was_nullable
                && f.is_nullable()
                && let Ok(default) = ScalarValue::new_default(f.data_type())
            {
                changed = true;
                return core_fn::coalesce(vec![c, Expr::Literal(default, None)])
                    .alias_qualified(q.cloned(), f.name());
            }
            c
        })
        .collect();
    if !changed {
        return Ok(plan);
    }
    LogicalPlanBuilder::from(plan)
        .project(exprs)
        .and_then(|b| b.build())
        .map_err(df)
}

/// The name a select item gets without an alias: a field's last part, else the HogQL text.
pub(super) fn column_name(e: &ast::Expr, print: &(dyn Fn(&ast::Expr) -> String + Sync)) -> String {
    match &e.kind {
        ExprKind::Alias { name, .. } => name.clone(),
        ExprKind::Field(parts) => parts.last().cloned().unwrap_or_default(),
        _ => print(e),
    }
}

pub(super) fn literal(l: &Literal) -> Expr {
    match l {
        Literal::Null => Expr::Literal(ScalarValue::Null, None),
        Literal::Bool(b) => lit(*b),
        Literal::Int(i) => {
            if let Ok(v) = i64::try_from(*i) {
                lit(v)
            } else if let Ok(v) = u64::try_from(*i) {
                lit(v)
            } else {
                lit(*i as f64)
            }
        }
        Literal::Float(f) => lit(*f),
        Literal::String(s) => lit(s.clone()),
    }
}

pub(super) fn json_literal(v: &serde_json::Value, span: Span) -> PResult<Expr> {
    Ok(match v {
        serde_json::Value::Null => Expr::Literal(ScalarValue::Null, None),
        serde_json::Value::Bool(b) => lit(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => lit(i),
            (_, Some(u), _) => lit(u),
            (_, _, Some(f)) => lit(f),
            _ => return err("unsupported number in `values`", span),
        },
        serde_json::Value::String(s) => lit(s.clone()),
        serde_json::Value::Array(items) => datafusion::functions_nested::expr_fn::make_array(
            items
                .iter()
                .map(|i| json_literal(i, span))
                .collect::<PResult<Vec<_>>>()?,
        ),
        serde_json::Value::Object(_) => return err("objects cannot be placeholder values", span),
    })
}

pub(super) fn is_null_lit(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v, _) if v.is_null())
}

pub(super) fn binary_operator(op: BinaryOp) -> Operator {
    match op {
        BinaryOp::Eq => Operator::Eq,
        BinaryOp::NotEq => Operator::NotEq,
        BinaryOp::Lt => Operator::Lt,
        BinaryOp::LtEq => Operator::LtEq,
        BinaryOp::Gt => Operator::Gt,
        BinaryOp::GtEq => Operator::GtEq,
        BinaryOp::Add => Operator::Plus,
        BinaryOp::Sub => Operator::Minus,
        BinaryOp::Mul => Operator::Multiply,
        BinaryOp::Div => Operator::Divide,
        BinaryOp::Mod => Operator::Modulo,
        BinaryOp::And => Operator::And,
        BinaryOp::Or => Operator::Or,
        _ => Operator::Eq,
    }
}

/// A comparison of computed floats as IEEE 754 (and ClickHouse) compare them: NaN is neither
/// equal to, less nor greater than anything (Arrow's kernels order NaN as a value, and
/// `log(-1)` is a negative NaN that sorts below everything). Only operands that can hold a
/// NaN are checked: a stored column or a literal cannot (JSON has no NaN), so filters on
/// them keep their form.
pub(super) fn ieee_float_cmp(
    cmp: Expr,
    op: BinaryOp,
    l: &Expr,
    r: &Expr,
    schema: &DFSchema,
) -> PResult<Expr> {
    let mut nan_sides = Vec::new();
    for side in [l, r] {
        if matches!(side, Expr::Column(_) | Expr::Literal(..)) {
            continue;
        }
        if side.get_type(schema).map_err(df)?.is_floating() {
            nan_sides.push(datafusion::functions::math::expr_fn::isnan(side.clone()));
        }
    }
    Ok(nan_sides.into_iter().fold(cmp, |acc, is_nan| {
        if op == BinaryOp::NotEq {
            acc.or(null_to(is_nan, false))
        } else {
            acc.and(null_to(Expr::Not(Box::new(is_nan)), true))
        }
    }))
}

/// NULL → false.
pub(super) fn null_false(e: Expr) -> Expr {
    null_to(e, false)
}

/// `e`, or `v` where `e` is NULL: PostHog's `ifNull(…, 0)` around positive comparisons and
/// `ifNull(…, 1)` around negated ones (`NOT LIKE`, `!~`, …).
pub(super) fn null_to(e: Expr, v: bool) -> Expr {
    // A CASE rather than coalesce(): lambda bodies are evaluated without the optimizer,
    // which is what turns coalesce into something executable.
    Expr::Case(datafusion::logical_expr::Case::new(
        None,
        vec![(Box::new(e.clone().is_null()), Box::new(lit(v)))],
        Some(Box::new(e)),
    ))
}

/// A value used as a condition: booleans as they are, numbers as `!= 0` (ClickHouse's UInt8).
pub(super) fn to_bool(e: Expr, schema: &DFSchema) -> PResult<Expr> {
    let t = e.get_type(schema).map_err(df)?;
    Ok(match t {
        DataType::Boolean | DataType::Null => e,
        t if t.is_numeric() => e.not_eq(lit(0i64)),
        DataType::Utf8 => cast(e, DataType::Boolean),
        other => {
            return Err(PlanError::new(
                format!("a {other} value cannot be used as a condition"),
                None,
            ));
        }
    })
}

pub(super) fn bool_to_int(e: Expr, schema: &DFSchema) -> PResult<Expr> {
    Ok(match e.get_type(schema).map_err(df)? {
        DataType::Boolean => cast(e, DataType::UInt8),
        _ => e,
    })
}

pub(super) fn const_usize(e: &ast::Expr, what: &str) -> PResult<usize> {
    match &e.kind {
        ExprKind::Literal(Literal::Int(i)) if *i >= 0 => Ok((*i).min(usize::MAX as i128) as usize),
        _ => err(
            format!("{what} must be a non-negative integer constant"),
            e.span,
        ),
    }
}

/// Replaces group-by and aggregate expressions by the aggregate's output columns, and
/// refuses any remaining column that is neither grouped nor aggregated.
pub(super) fn rebase(e: Expr, map: &[(Expr, Expr)], out: &DFSchema) -> PResult<Expr> {
    let e = replace_exprs(e, map)?;
    let mut bad = None;
    e.apply(|x| {
        if let Expr::Column(c) = x
            && !out.has_column(c)
        {
            bad = Some(c.name.clone());
            return Ok(TreeNodeRecursion::Stop);
        }
        if matches!(
            x,
            Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
        ) {
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(df)?;
    match bad {
        Some(c) => Err(PlanError::new(
            format!("Column `{c}` must be in GROUP BY or used inside an aggregate function"),
            None,
        )),
        None => Ok(e),
    }
}

pub(super) fn replace_exprs(e: Expr, map: &[(Expr, Expr)]) -> PResult<Expr> {
    e.transform_down(|x| {
        if let Some((_, to)) = map.iter().find(|(from, _)| *from == x) {
            return Ok(Transformed::new(to.clone(), true, TreeNodeRecursion::Jump));
        }
        Ok(Transformed::no(x))
    })
    .map(|t| t.data)
    .map_err(df)
}

/// ORDER BY of the select, in terms of output columns (for windows added after projection).
pub(super) fn output_sorts(items: &[(Expr, String)], sorts: &[Sort]) -> Vec<Sort> {
    sorts
        .iter()
        .filter_map(|s| {
            items.iter().find(|(e, _)| *e == s.expr).map(|(_, n)| {
                Sort::new(
                    Expr::Column(Column::from_name(n.clone())),
                    s.asc,
                    s.nulls_first,
                )
            })
        })
        .collect()
}

pub(super) fn row_number_expr() -> Expr {
    Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(
            datafusion::functions_window::row_number::row_number_udwf(),
        ),
        vec![],
    ))
}

pub(super) fn rank_expr() -> Expr {
    Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(datafusion::functions_window::rank::rank_udwf()),
        vec![],
    ))
}

/// Keeps the rows whose number (`f` over the window) is in `(from, to]`; the number column
/// is dropped again.
pub(super) fn numbered_filter(
    plan: LogicalPlan,
    f: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    from: usize,
    to: usize,
) -> PResult<LogicalPlan> {
    let w = window_with(f, partition, order, None).map_err(df)?;
    let name = w.schema_name().to_string();
    let cols: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect();
    let n = || Expr::Column(Column::from_name(name.clone()));
    LogicalPlanBuilder::window_plan(plan, vec![w])
        .and_then(|p| {
            LogicalPlanBuilder::from(p)
                .filter(n().gt(lit(from as u64)).and(n().lt_eq(lit(to as u64))))?
                .project(cols)?
                .build()
        })
        .map_err(df)
}

/// The window calls in `exprs` (at any depth, each once) that hold no window call
/// themselves: the ones to compute first.
pub(super) fn innermost_windows(exprs: &[&Expr]) -> Vec<Expr> {
    let mut found: Vec<Expr> = Vec::new();
    for e in exprs {
        // Visiting never fails.
        let _ = e.apply(|x| {
            if let Expr::WindowFunction(w) = x {
                let nested = w
                    .params
                    .args
                    .iter()
                    .chain(&w.params.partition_by)
                    .chain(w.params.order_by.iter().map(|s| &s.expr))
                    .chain(w.params.filter.as_deref())
                    .any(|a| {
                        a.exists(|y| Ok(matches!(y, Expr::WindowFunction(_))))
                            .unwrap_or(false)
                    });
                if !nested && !found.contains(x) {
                    found.push(x.clone());
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    found
}

/// Gives a window expression its OVER clause.
pub(super) fn window_with(
    e: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    frame: Option<WindowFrame>,
) -> datafusion::error::Result<Expr> {
    use datafusion::logical_expr::ExprFunctionExt;
    let has_order = !order.is_empty();
    let frame =
        frame.unwrap_or_else(|| WindowFrame::new(if has_order { Some(false) } else { None }));
    // DataFusion's builder sets DISTINCT, FILTER and the NULLs clause from its own (empty)
    // fields: keep the call's (`count(DISTINCT x)`, `countIf(c)`, `RESPECT NULLS`).
    let kept = match &e {
        Expr::WindowFunction(w) => Some((
            w.params.distinct,
            w.params.filter.clone(),
            w.params.null_treatment,
        )),
        _ => None,
    };
    let mut built = e
        .partition_by(partition)
        .order_by(order)
        .window_frame(frame)
        .build()?;
    if let (Expr::WindowFunction(w), Some((distinct, filter, nulls))) = (&mut built, kept) {
        w.params.distinct = distinct;
        w.params.filter = filter;
        w.params.null_treatment = nulls;
    }
    Ok(built)
}

/// Turns the aggregate and window calls in `e` into window functions over the given window.
pub(super) fn to_window(
    e: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    frame: Option<WindowFrame>,
) -> datafusion::error::Result<Expr> {
    e.transform_down(|x| match x {
        Expr::AggregateFunction(AggregateFunction { func, params }) => {
            // `first_value`/`last_value` (ClickHouse's any/anyLast, NULLs skipped) by an
            // aggregate that can retract rows, so sliding frames work.
            let respect = params.null_treatment
                == Some(datafusion::logical_expr::expr::NullTreatment::RespectNulls);
            let func = match func.name() {
                "any_value" if params.null_treatment.is_none() => {
                    functions::frame_value_udaf(false)
                }
                "first_value" if respect => functions::frame_value_respect_udaf(false),
                "last_value" if respect => functions::frame_value_respect_udaf(true),
                "last_value" => functions::frame_value_udaf(true),
                _ => func,
            };
            // Over a frame whose start moves, an aggregate that cannot take rows back out
            // replays the frame's rows.
            let func = if frame.as_ref().is_some_and(|f| !f.is_ever_expanding()) {
                functions::sliding_udaf(func)
            } else {
                func
            };
            let mut w =
                WindowFunction::new(WindowFunctionDefinition::AggregateUDF(func), params.args);
            w.params.distinct = params.distinct;
            w.params.filter = params.filter;
            let w = window_with(
                Expr::from(w),
                partition.clone(),
                order.clone(),
                frame.clone(),
            )?;
            Ok(Transformed::new(w, true, TreeNodeRecursion::Jump))
        }
        Expr::WindowFunction(w) => {
            let w = window_with(
                Expr::WindowFunction(w),
                partition.clone(),
                order.clone(),
                frame.clone(),
            )?;
            Ok(Transformed::new(w, true, TreeNodeRecursion::Jump))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// Parses `2024-01-31`, `2024-01-31 10:00:00[.ffffff]`, `2024-01-31T10:00:00[Z|±hh:mm]` in
/// zone `tz` (an explicit offset wins).
pub fn parse_datetime_in(s: &str, tz: &str) -> Option<DateTime<Utc>> {
    use chrono::{NaiveDate, NaiveDateTime, TimeZone};
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.with_timezone(&Utc));
    }
    let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f"))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M"))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    let zone: chrono_tz::Tz = tz.parse().ok()?;
    zone.from_local_datetime(&naive)
        .earliest()
        .map(|d| d.with_timezone(&Utc))
}

/// `any(x) RESPECT NULLS` and its kin (ClickHouse's `any_respect_nulls`,
/// `anyLast_respect_nulls`, `first_value_respect_nulls`, `last_value_respect_nulls`): the
/// first (last) row's value even when it is NULL, where the plain functions skip NULLs.
pub(super) fn respect_nulls(e: Expr) -> datafusion::error::Result<Expr> {
    use datafusion::logical_expr::expr::NullTreatment;
    e.transform_down(|x| match x {
        Expr::AggregateFunction(AggregateFunction { func, mut params })
            if matches!(func.name(), "any_value" | "last_value") =>
        {
            let func = if func.name() == "any_value" {
                datafusion::functions_aggregate::first_last::first_value_udaf()
            } else {
                func
            };
            params.null_treatment = Some(NullTreatment::RespectNulls);
            Ok(Transformed::new(
                Expr::AggregateFunction(AggregateFunction { func, params }),
                true,
                TreeNodeRecursion::Jump,
            ))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}
