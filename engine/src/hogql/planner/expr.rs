//! Expressions: literals, operators, CAST, IN, subqueries used as values.

use super::*;

impl Planner<'_> {
    pub(super) fn expr(&self, e: &ast::Expr, scope: &Scope<'_>) -> PResult<Expr> {
        match &e.kind {
            ExprKind::Literal(l) => Ok(literal(l)),
            ExprKind::Field(parts) => self.field(parts, e.span, scope),
            ExprKind::Star(_) => err(
                "`*` is only allowed in the select list and in count(*)",
                e.span,
            ),
            // `?.` reads the same: ClickHouse gives NULL for a NULL base either way.
            ExprKind::Index { base, index, .. } => {
                // properties['a']['b'] and properties.a['b']: one JSON path.
                let mut keys = Vec::new();
                let mut cur: &ast::Expr = e;
                while let ExprKind::Index { base, index, .. } = &cur.kind
                    && let ExprKind::Literal(Literal::String(key)) = &index.kind
                {
                    keys.push(key.clone());
                    cur = base;
                }
                if !keys.is_empty()
                    && let ExprKind::Field(parts) = &cur.kind
                    && let Some(json) = self.json_base(parts, scope)?
                {
                    let mut path = json.1;
                    path.extend(keys.into_iter().rev());
                    return self.property(json.0, &path, scope);
                }
                let b = self.expr(base, scope)?;
                let i = self.expr(index, scope)?;
                self.call_translated(
                    "arrayElement",
                    vec![],
                    vec![Arg::Expr(b), Arg::Expr(i)],
                    false,
                    scope,
                    e.span,
                )
            }
            ExprKind::TupleElement { base, index, .. } => {
                let b = self.expr(base, scope)?;
                match self.tuple_field(b, *index as usize, base.span, scope)? {
                    Some(f) => Ok(f),
                    None => err(
                        format!("Tuple doesn't have element with index '{index}'"),
                        e.span,
                    ),
                }
            }
            ExprKind::Call {
                name,
                params,
                args,
                distinct,
                over,
            } => self.call(
                e,
                name,
                params.as_deref(),
                args,
                *distinct,
                over.as_ref(),
                scope,
            ),
            ExprKind::Lambda { .. } => err("A lambda can only be a function argument", e.span),
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right, scope, e.span),
            ExprKind::Unary { op, expr } => {
                let v = self.expr(expr, scope)?;
                Ok(match op {
                    UnaryOp::Not => Expr::Not(Box::new(to_bool(v, &scope.schema)?)),
                    UnaryOp::Neg => {
                        let t = v.get_type(&scope.schema).map_err(df)?;
                        // Integers negate wrapping, as ClickHouse's do (the minimum Int64
                        // stays itself); DataFusion's negation stops with an overflow error.
                        match t
                            .is_integer()
                            .then(|| functions::int_negate(v.clone(), &t))
                            .transpose()
                            .map_err(|x| PlanError::new(x.to_string(), Some(e.span)))?
                            .flatten()
                        {
                            Some(n) => n,
                            None => Expr::Negative(Box::new(v)),
                        }
                    }
                })
            }
            ExprKind::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let v = self.expr(expr, scope)?;
                let vt = v.get_type(&scope.schema).map_err(df)?;
                let bound = |b: &ast::Expr| -> PResult<Expr> {
                    let x = self.expr(b, scope)?;
                    Ok(self.coerce_literal_to(&x, &vt)?.unwrap_or(x))
                };
                let (lo, hi) = (bound(low)?, bound(high)?);
                let b = Expr::Between(datafusion::logical_expr::Between::new(
                    Box::new(v),
                    *negated,
                    Box::new(lo),
                    Box::new(hi),
                ));
                Ok(null_false(b))
            }
            ExprKind::In {
                expr,
                list,
                negated,
            } => self.in_expr(expr, list, *negated, scope),
            ExprKind::IsNull { expr, negated } => {
                let v = self.expr(expr, scope)?;
                Ok(if *negated {
                    v.is_not_null()
                } else {
                    v.is_null()
                })
            }
            ExprKind::Case {
                operand,
                whens,
                else_,
            } => {
                let operand = operand.as_ref().map(|o| self.expr(o, scope)).transpose()?;
                let mut conds = Vec::with_capacity(whens.len());
                let mut values = Vec::with_capacity(whens.len() + 1);
                for (c, v) in whens {
                    conds.push(match operand {
                        Some(_) => self.expr(c, scope)?,
                        None => self.predicate(c, scope, false)?,
                    });
                    values.push(self.expr(v, scope)?);
                }
                if conds.is_empty() {
                    return err("CASE needs WHEN", e.span);
                }
                if let Some(x) = else_ {
                    values.push(self.expr(x, scope)?);
                }
                let values = self.uuid_agree(values, &scope.schema)?;
                let mut values = functions::agree_numeric(values, &scope.schema)
                    .map_err(|x| PlanError::new(x.to_string(), Some(e.span)))?
                    .into_iter();
                let mut b = match operand {
                    Some(o) => datafusion::logical_expr::case(o),
                    None => datafusion::logical_expr::conditional_expressions::CaseBuilder::new(
                        None,
                        vec![],
                        vec![],
                        None,
                    ),
                };
                for c in conds {
                    b.when(c, values.next().expect("a value per WHEN"));
                }
                match values.next() {
                    Some(x) => b.otherwise(x),
                    None => b.end(),
                }
                .map_err(df)
            }
            ExprKind::Cast { expr, ty } => {
                let v = self.expr(expr, scope)?;
                let t = self.parse_type(ty, e.span)?;
                let vt = v.get_type(&scope.schema).map_err(df)?;
                if let Some(c) = self.coerce_literal_to(&v, &t)? {
                    return Ok(c);
                }
                if ids::is_uuid(&t) && !ids::is_uuid(&vt) {
                    return Ok(functions::to_uuid(v));
                }
                if ids::is_uuid(&vt) && !ids::is_uuid(&t) {
                    return Ok(cast(functions::uuid_text(v), t));
                }
                // ClickHouse's Date from anything else is `toDate`'s (its range included), a
                // DateTime from text `toDateTime`'s.
                let to_date = t == DataType::Date32
                    && vt != DataType::Date32
                    && (vt.is_integer()
                        || vt.is_floating()
                        || matches!(
                            vt,
                            DataType::Utf8 | DataType::Utf8View | DataType::Timestamp(..)
                        ));
                let to_date_time = vt == DataType::Utf8 && matches!(t, DataType::Timestamp(..));
                if to_date || to_date_time {
                    let name = if to_date { "toDate" } else { "toDateTime" };
                    return self.call_translated(
                        name,
                        vec![],
                        vec![Arg::Expr(v)],
                        false,
                        scope,
                        e.span,
                    );
                }
                Ok(cast(v, t))
            }
            ExprKind::Interval { value, unit } => {
                let v = self.expr(value, scope)?;
                let name = match unit {
                    ast::IntervalUnit::Second => "toIntervalSecond",
                    ast::IntervalUnit::Minute => "toIntervalMinute",
                    ast::IntervalUnit::Hour => "toIntervalHour",
                    ast::IntervalUnit::Day => "toIntervalDay",
                    ast::IntervalUnit::Week => "toIntervalWeek",
                    ast::IntervalUnit::Month => "toIntervalMonth",
                    ast::IntervalUnit::Quarter => "toIntervalQuarter",
                    ast::IntervalUnit::Year => "toIntervalYear",
                };
                self.call_translated(name, vec![], vec![Arg::Expr(v)], false, scope, e.span)
            }
            ExprKind::Ternary { cond, then, else_ } => {
                let c = self.predicate(cond, scope, false)?;
                let mut vals = self
                    .uuid_agree(
                        vec![self.expr(then, scope)?, self.expr(else_, scope)?],
                        &scope.schema,
                    )?
                    .into_iter();
                let (t, f) = (vals.next().expect("two"), vals.next().expect("two"));
                when(c, t).otherwise(f).map_err(df)
            }
            ExprKind::Array(items) => {
                let items = items
                    .iter()
                    .map(|i| self.expr(i, scope))
                    .collect::<PResult<Vec<_>>>()?;
                let items = self.uuid_agree(items, &scope.schema)?;
                // The elements agree as `if` branches do: `[length(s), -1]` is an Int64 array
                // (ClickHouse has no common type there, and from 26.1 a Variant holding the
                // same numbers), not DataFusion's Decimal(20, 0), which prints as strings.
                let items = functions::agree_numeric(items, &scope.schema)
                    .map_err(|x| PlanError::new(x.to_string(), Some(e.span)))?;
                let items = functions::narrow_const_items(&items).unwrap_or(items);
                Ok(datafusion::functions_nested::expr_fn::make_array(items))
            }
            ExprKind::Tuple(items) => {
                // `tuple(…)` is a call in PostHog's syntax tree: `*COLUMNS(…)` unpacks there.
                let spread;
                let items: &[ast::Expr] = if items.iter().any(|a| {
                    matches!(a.kind, ExprKind::Spread(_)) || super::call::untuple_arg(a).is_some()
                }) {
                    spread = self.spread_args(items, scope)?;
                    &spread
                } else {
                    items
                };
                let mut args = Vec::new();
                for (i, it) in items.iter().enumerate() {
                    args.push(lit(format!("c{i}")));
                    // An integer constant keeps its narrow type, as in ClickHouse's tuple
                    // (`(-128, 300)` is a Tuple(Int8, UInt16)).
                    let v = self.expr(it, scope)?;
                    args.push(
                        functions::narrow_const_items(std::slice::from_ref(&v))
                            .and_then(|n| n.into_iter().next())
                            .unwrap_or(v),
                    );
                }
                Ok(core_fn::named_struct(args))
            }
            // Inside `expr AS name`, `name` is the column, not the alias being defined
            // (`argMin(distinct_id, timestamp) AS distinct_id`).
            ExprKind::Alias { expr, name } => {
                scope.expanding.borrow_mut().push(name.clone());
                let r = self.expr(expr, scope);
                scope.expanding.borrow_mut().pop();
                r
            }
            ExprKind::Placeholder(name) => match self.ctx.values.get(name) {
                Some(v) => json_literal(v, e.span),
                None => match name.strip_prefix("variables.") {
                    Some(var) => err(
                        format!(
                            "Variable {var} has no value: give it in the query's `variables` or in `variables_override`"
                        ),
                        e.span,
                    ),
                    None => err(
                        format!("Placeholder {{{name}}} has no value in `values`"),
                        e.span,
                    ),
                },
            },
            ExprKind::Subquery(q) => {
                let plan = self.value_subquery(q, scope.ctes, e.span)?;
                Ok(datafusion::logical_expr::expr_fn::scalar_subquery(
                    Arc::new(plan),
                ))
            }
            ExprKind::Exists(q) => {
                let plan = self.value_subquery(q, scope.ctes, e.span)?;
                Ok(datafusion::logical_expr::expr_fn::exists(Arc::new(plan)))
            }
            ExprKind::Columns(_) => err(
                "`COLUMNS(…)`, `* EXCLUDE (…)` and `* REPLACE (…)` are only allowed as items of \
                 the select list",
                e.span,
            ),
            // ClickHouse: IGNORE NULLS changes no function's answer (they skip NULLs already).
            ExprKind::NullsAction {
                expr,
                respect: false,
            } if matches!(expr.kind, ExprKind::Call { .. }) => self.expr(expr, scope),
            ExprKind::NullsAction { respect: false, .. } => err(
                "IGNORE NULLS must follow a function call, as in `first_value(x) IGNORE NULLS`",
                e.span,
            ),
            // RESPECT NULLS picks ClickHouse's `_respect_nulls` variant, which only any,
            // anyLast, any_value, first_value and last_value have.
            ExprKind::NullsAction {
                expr: inner,
                respect: true,
            } => {
                let ExprKind::Call { name, .. } = &inner.kind else {
                    return err(
                        "RESPECT NULLS must follow a function call, as in \
                         `first_value(x) RESPECT NULLS`",
                        e.span,
                    );
                };
                let has_variant = matches!(name.as_str(), "any" | "anyLast")
                    || ["any_value", "first_value", "last_value"]
                        .iter()
                        .any(|k| name.eq_ignore_ascii_case(k));
                if !has_variant {
                    return err(
                        format!("Function {name} does not support RESPECT NULLS"),
                        e.span,
                    );
                }
                self.respect_nulls.set(true);
                let planned = self.expr(inner, scope);
                self.respect_nulls.set(false);
                planned
            }
            ExprKind::PlaceholderExpr(_) => err(
                "A placeholder holding an expression ({…}) is not supported: values fill \
                 placeholders by name, as in {name}",
                e.span,
            ),
            // A call unpacks its spreads before this (`Planner::call`).
            ExprKind::Spread(_) => err(
                "*COLUMNS(…) can only be used to unpack columns inside function call \
                 arguments; use COLUMNS(…) for top-level column selection",
                e.span,
            ),
            ExprKind::Tag(tag) if super::hogqlx::is_rendered(&tag.name) => {
                self.expr(&super::hogqlx::to_tuple(tag, e.span), scope)
            }
            ExprKind::Tag(tag) => match super::hogqlx::hogql_query(tag) {
                Some(Ok(q)) => {
                    let plan = self.value_subquery(&q, scope.ctes, e.span)?;
                    Ok(datafusion::logical_expr::expr_fn::scalar_subquery(
                        Arc::new(plan),
                    ))
                }
                Some(Err(msg)) => err(msg, e.span),
                None => err(
                    format!(
                        "HogQLX tag <{} … /> is not supported: hedgerow renders PostHog's \
                         display tags (<strong>, <Sparkline>, …) and runs <HogQLQuery query='…' />; \
                         send other query nodes to the query endpoint",
                        tag.name
                    ),
                    e.span,
                ),
            },
            // PostHog's resolver refuses them with the same words.
            ExprKind::Block(_) => err(
                "You can not use blocks in HogQL (a lambda's body in braces holds Hog \
                 statements)",
                e.span,
            ),
            ExprKind::PositionalRef(n) => err(
                format!(
                    "Positional references (#{n}) are not supported in the ClickHouse dialect: \
                     name the column"
                ),
                e.span,
            ),
            // PostHog's ClickHouse printer refuses it with the same words.
            ExprKind::WithinGroup { call, .. } => {
                let name = match &call.kind {
                    ExprKind::Call { name, .. } => name.as_str(),
                    _ => "?",
                };
                err(
                    format!(
                        "Aggregation '{name}' with WITHIN GROUP is not supported in ClickHouse \
                         dialect"
                    ),
                    e.span,
                )
            }
            // PostHog's resolver refuses these with the same words.
            ExprKind::ExprCall { .. } => err(
                "You can only call simple functions in HogQL, not expressions (such as \
                 `(x -> x * 2)(3)` or `a.b(1)`): ClickHouse calls functions by name",
                e.span,
            ),
        }
    }

    pub(super) fn parse_type(&self, ty: &str, span: Span) -> PResult<DataType> {
        let t = ty.trim();
        let inner = |p: &str| t.strip_prefix(p).and_then(|r| r.strip_suffix(')'));
        if let Some(i) = inner("Nullable(") {
            return self.parse_type(i, span);
        }
        if let Some(i) = inner("LowCardinality(") {
            return self.parse_type(i, span);
        }
        if let Some(i) = inner("Array(") {
            let item = self.parse_type(i, span)?;
            return Ok(DataType::new_list(item, true));
        }
        let tz: Arc<str> = Arc::from(self.ctx.timezone.as_str());
        Ok(match t {
            "String" | "text" | "TEXT" | "VARCHAR" => DataType::Utf8,
            "Int8" => DataType::Int8,
            "Int16" => DataType::Int16,
            "Int32" | "INT" | "Int" => DataType::Int32,
            "Int64" | "BIGINT" => DataType::Int64,
            "UInt8" => DataType::UInt8,
            "UInt16" => DataType::UInt16,
            "UInt32" => DataType::UInt32,
            "UInt64" => DataType::UInt64,
            "Float32" => DataType::Float32,
            "Float64" | "Float" | "DOUBLE" => DataType::Float64,
            "Bool" | "Boolean" => DataType::Boolean,
            "Date" | "Date32" => DataType::Date32,
            "DateTime" => DataType::Timestamp(TimeUnit::Second, Some(tz)),
            _ if t.starts_with("DateTime64") => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(tz))
            }
            _ if t.starts_with("DateTime(") => DataType::Timestamp(TimeUnit::Second, Some(tz)),
            "UUID" => crate::storage::ids::UUID_TYPE,
            _ => return err(format!("Unknown type `{t}` in CAST"), span),
        })
    }

    pub(super) fn binary(
        &self,
        op: BinaryOp,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
        span: Span,
    ) -> PResult<Expr> {
        use BinaryOp::*;
        match op {
            And | Or => {
                let l = to_bool(self.expr(left, scope)?, &scope.schema)?;
                let r = to_bool(self.expr(right, scope)?, &scope.schema)?;
                Ok(if op == And { l.and(r) } else { l.or(r) })
            }
            Eq | NotEq | Lt | LtEq | Gt | GtEq => {
                let (l, r) = self.comparison_operands(left, right, scope)?;
                let ln = l.nullable(&scope.schema).map_err(df)?;
                let rn = r.nullable(&scope.schema).map_err(df)?;
                let (l0, r0) = (l.clone(), r.clone());
                let ieee = |c: Expr| ieee_float_cmp(c, op, &l0, &r0, &scope.schema);
                if !ln && !rn {
                    return ieee(Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(l),
                        binary_operator(op),
                        Box::new(r),
                    )));
                }
                ieee(match op {
                    Eq => Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(l),
                        Operator::IsNotDistinctFrom,
                        Box::new(r),
                    )),
                    NotEq => Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(l),
                        Operator::IsDistinctFrom,
                        Box::new(r),
                    )),
                    _ => null_false(Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(l),
                        binary_operator(op),
                        Box::new(r),
                    ))),
                })
            }
            Add | Sub | Mul | Mod => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                let l = bool_to_int(l, &scope.schema)?;
                let r = bool_to_int(r, &scope.schema)?;
                let lt = l.get_type(&scope.schema).map_err(df)?;
                let rt = r.get_type(&scope.schema).map_err(df)?;
                // A Date plus or minus days or an interval: the date functions, which keep
                // the result in ClickHouse's 16-bit Date range as it does.
                let shift = |t: &DataType| {
                    t.is_integer() || t.is_floating() || matches!(t, DataType::Interval(_))
                };
                let date_shift = match (op, &lt, &rt) {
                    (Add | Sub, DataType::Date32, t) if shift(t) => Some((l.clone(), r.clone(), t)),
                    (Add, t, DataType::Date32) if shift(t) => Some((r.clone(), l.clone(), t)),
                    _ => None,
                };
                if let Some((date, n, nt)) = date_shift {
                    let name = match (op, matches!(nt, DataType::Interval(_))) {
                        (Add, false) => "addDays",
                        (_, false) => "subtractDays",
                        (Add, true) => "dateAdd",
                        (_, true) => "dateSub",
                    };
                    return self.call_translated(
                        name,
                        vec![],
                        vec![Arg::Expr(date), Arg::Expr(n)],
                        false,
                        scope,
                        span,
                    );
                }
                let int_op = match op {
                    Add => functions::IntOp::Add,
                    Sub => functions::IntOp::Sub,
                    Mul => functions::IntOp::Mul,
                    _ => functions::IntOp::Mod,
                };
                if let Some(e) = functions::int_arith(int_op, l.clone(), r.clone(), &lt, &rt)
                    .map_err(|e| PlanError::new(e.to_string(), Some(span)))?
                {
                    return Ok(e);
                }
                Ok(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(l),
                    binary_operator(op),
                    Box::new(r),
                )))
            }
            Div => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                Ok(cast(l, DataType::Float64) / cast(r, DataType::Float64))
            }
            Concat => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                self.call_translated(
                    "concat",
                    vec![],
                    vec![Arg::Expr(l), Arg::Expr(r)],
                    false,
                    scope,
                    span,
                )
            }
            Coalesce => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                Ok(core_fn::coalesce(
                    self.uuid_agree(vec![l, r], &scope.schema)?,
                ))
            }
            Like | NotLike | ILike | NotILike => {
                let l = self.uuid_as_text(self.expr(left, scope)?, &scope.schema)?;
                let r = self.uuid_as_text(self.expr(right, scope)?, &scope.schema)?;
                let negated = matches!(op, NotLike | NotILike);
                let ci = matches!(op, ILike | NotILike);
                let like = Expr::Like(datafusion::logical_expr::Like::new(
                    negated,
                    Box::new(l),
                    Box::new(r),
                    None,
                    ci,
                ));
                // PostHog: ifNull(like(…), 0), ifNull(notLike(…), 1).
                Ok(null_to(like, negated))
            }
            Regex | NotRegex | IRegex | NotIRegex => {
                let l = self.uuid_as_text(self.expr(left, scope)?, &scope.schema)?;
                let r = self.uuid_as_text(self.expr(right, scope)?, &scope.schema)?;
                let o = match op {
                    Regex => Operator::RegexMatch,
                    NotRegex => Operator::RegexNotMatch,
                    IRegex => Operator::RegexIMatch,
                    _ => Operator::RegexNotIMatch,
                };
                // PostHog: ifNull(match(…), 0), ifNull(not(match(…)), 1).
                Ok(null_to(
                    Expr::BinaryExpr(BinaryExpr::new(Box::new(l), o, Box::new(r))),
                    matches!(op, NotRegex | NotIRegex),
                ))
            }
        }
    }

    pub(super) fn in_expr(
        &self,
        expr: &ast::Expr,
        list: &ast::InList,
        negated: bool,
        scope: &Scope<'_>,
    ) -> PResult<Expr> {
        let v = self.expr(expr, scope)?;
        let vt = v.get_type(&scope.schema).map_err(df)?;
        let positive = match list {
            ast::InList::List(items) => {
                let items = items
                    .iter()
                    .map(|i| {
                        let x = self.expr(i, scope)?;
                        Ok(self.coerce_literal_to(&x, &vt)?.unwrap_or(x))
                    })
                    .collect::<PResult<Vec<_>>>()?;
                let mut agreed = self
                    .uuid_agree(
                        std::iter::once(v.clone()).chain(items).collect(),
                        &scope.schema,
                    )?
                    .into_iter();
                let v = agreed.next().expect("the value");
                let items: Vec<Expr> = agreed.collect();
                // A NULL in the list matches a NULL value (ClickHouse's transform_null_in,
                // which PostHog turns on).
                let has_null = items.iter().any(is_null_lit);
                let items: Vec<Expr> = items.into_iter().filter(|i| !is_null_lit(i)).collect();
                let membership = if items.is_empty() {
                    lit(false)
                } else {
                    null_false(v.clone().in_list(items, false))
                };
                if has_null {
                    v.clone().is_null().or(membership)
                } else {
                    membership
                }
            }
            ast::InList::Subquery(q) => {
                // Outside a filter: membership in the subquery's values, gathered once.
                let (v, plan) = self.in_subquery_operands(expr, q, scope)?;
                let col = plan.schema().qualified_field(0);
                let col = Expr::Column(Column::new(col.0.cloned(), col.1.name()));
                let agg = LogicalPlanBuilder::from(plan)
                    .aggregate(
                        Vec::<Expr>::new(),
                        vec![
                            datafusion::functions_aggregate::expr_fn::array_agg(col)
                                .alias("__values"),
                        ],
                    )
                    .and_then(|b| b.build())
                    .map_err(df)?;
                let values = datafusion::logical_expr::expr_fn::scalar_subquery(Arc::new(agg));
                datafusion::functions_nested::expr_fn::array_has(
                    core_fn::coalesce(vec![
                        values,
                        datafusion::functions_nested::expr_fn::make_array(vec![]),
                    ]),
                    v,
                )
            }
            // The query service turns `IN COHORT x` into a subquery of `cohort_people`
            // before planning; one that reaches here named no cohort of the project.
            ast::InList::Cohort(e) => {
                return err("IN COHORT needs a cohort of the project", e.span);
            }
            ast::InList::Expr(e) => {
                if let ExprKind::Field(p) = &e.kind
                    && p.len() == 1
                    && let Some(q) = scope.ctes.query(&p[0])
                {
                    let plan = self.value_subquery(q, scope.ctes, e.span)?;
                    let (v, plan) = self.uuid_subquery_agree(v.clone(), plan, scope)?;
                    datafusion::logical_expr::expr_fn::in_subquery(v, Arc::new(plan))
                } else {
                    let arr = self.expr(e, scope)?;
                    match &e.kind {
                        ExprKind::Tuple(items) => {
                            let items = items
                                .iter()
                                .map(|i| self.expr(i, scope))
                                .collect::<PResult<Vec<_>>>()?;
                            v.clone().in_list(items, false)
                        }
                        _ => datafusion::functions_nested::expr_fn::array_has(arr, v.clone()),
                    }
                }
            }
        };
        // NULL IN (…) is false and NULL NOT IN (…) is true (compat.md).
        Ok(if negated {
            v.is_null().or(Expr::Not(Box::new(null_false(positive))))
        } else {
            null_false(positive)
        })
    }

    /// The two sides of `x IN (SELECT …)`; a tuple `(a, b) IN (SELECT x, y …)` compares
    /// structs.
    pub(super) fn in_subquery_operands(
        &self,
        lhs: &ast::Expr,
        q: &ast::Query,
        scope: &Scope<'_>,
    ) -> PResult<(Expr, LogicalPlan)> {
        let plan = self.value_subquery(q, scope.ctes, lhs.span)?;
        if let ExprKind::Tuple(items) = &lhs.kind {
            let n = plan.schema().fields().len();
            if n != items.len() {
                return err(
                    format!(
                        "The tuple has {} elements but the subquery returns {n} columns",
                        items.len()
                    ),
                    lhs.span,
                );
            }
            let mut args = Vec::new();
            let mut sub = Vec::new();
            for (i, it) in items.iter().enumerate() {
                args.push(lit(format!("c{i}")));
                args.push(self.expr(it, scope)?);
                let (q, f) = plan.schema().qualified_field(i);
                sub.push(lit(format!("c{i}")));
                sub.push(Expr::Column(Column::new(q.cloned(), f.name())));
            }
            let plan = LogicalPlanBuilder::from(plan)
                .project(vec![core_fn::named_struct(sub).alias("__tuple")])
                .and_then(|b| b.build())
                .map_err(df)?;
            return Ok((core_fn::named_struct(args), plan));
        }
        if plan.schema().fields().len() != 1 {
            return err("The subquery of IN must return one column", lhs.span);
        }
        self.uuid_subquery_agree(self.expr(lhs, scope)?, plan, scope)
    }
}
