//! One SELECT: its clauses in ClickHouse's order (WITH, FROM, ARRAY JOIN, WHERE, GROUP BY,
//! HAVING, windows, QUALIFY, ORDER BY, LIMIT BY, LIMIT … WITH TIES).

use super::*;

/// One SELECT's planned clause expressions. Grouping and windows replace parts of them with
/// their output columns, so they are rewritten together ([`Clauses::rebase`]).
struct Clauses {
    items: Vec<(Expr, String)>,
    having: Option<Expr>,
    qualify: Option<Expr>,
    /// Key, descending, nulls first.
    order: Vec<(Expr, bool, Option<bool>)>,
    limit_by: Vec<Expr>,
}

impl Clauses {
    fn rebase(self, f: impl Fn(Expr) -> PResult<Expr>) -> PResult<Self> {
        Ok(Clauses {
            items: self
                .items
                .into_iter()
                .map(|(e, n)| Ok((f(e)?, n)))
                .collect::<PResult<_>>()?,
            having: self.having.map(&f).transpose()?,
            qualify: self.qualify.map(&f).transpose()?,
            order: self
                .order
                .into_iter()
                .map(|(e, d, n)| Ok((f(e)?, d, n)))
                .collect::<PResult<_>>()?,
            limit_by: self.limit_by.into_iter().map(&f).collect::<PResult<_>>()?,
        })
    }

    /// Output names must be unique: a repeated one gets `_1`, `_2`….
    fn unique_names(&mut self) {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (_, n) in self.items.iter_mut() {
            let k = seen.entry(n.clone()).or_insert(0);
            if *k > 0 {
                *n = format!("{n}_{k}");
            }
            *k += 1;
        }
    }
}

impl Planner<'_> {
    pub(super) fn select(&self, s: &ast::Select, outer: &Ctes) -> PResult<LogicalPlan> {
        if s.sample.is_some() {
            return err(
                "SAMPLE after WHERE (DuckDB's USING SAMPLE) is not supported in the ClickHouse \
                 dialect: sample the table, as in FROM events SAMPLE 0.1",
                s.span,
            );
        }
        let mut ctes = outer.clone();
        for cte in &s.with {
            match cte {
                ast::Cte::Subquery { name, query, .. } => {
                    ctes.queries.push((name.clone(), (**query).clone()))
                }
                ast::Cte::Expr { name, expr, .. } => ctes.exprs.push((name.clone(), expr.clone())),
            }
        }
        if let Some(gb) = &s.group_by
            && gb.with_totals
        {
            return err(
                "GROUP BY … WITH TOTALS is not supported: the totals row has no place in a \
                 query response; add the totals as a second query or use WITH ROLLUP",
                s.span,
            );
        }

        // Aliases: `WITH expr AS name` and the select list.
        let mut aliases: HashMap<String, ast::Expr> = HashMap::new();
        for (name, e) in &ctes.exprs {
            aliases.insert(name.clone(), e.clone());
        }
        for c in &s.columns {
            collect_aliases(c, &mut aliases);
        }

        // Lazy joins any field asks for.
        let mut lazy = HashSet::new();
        for e in select_exprs(s) {
            collect_lazy(e, &mut lazy);
        }

        let (plan, relations) = match &s.from {
            Some(f) => self.from(f, &ctes, &lazy)?,
            None => (LogicalPlanBuilder::empty(true).build().map_err(df)?, vec![]),
        };

        let mut scope = Scope {
            relations,
            extra: HashSet::new(),
            aliases,
            expanding: Default::default(),
            lambda: vec![],
            ctes: &ctes,
            schema: plan.schema().clone(),
            array_joins: vec![],
            windows: &s.window,
        };

        let plan = self.rows(plan, s, &mut scope)?;
        let items = self.select_list(s, &scope)?;
        let (group, clauses) = self.clauses(s, items, &scope)?;
        let (plan, clauses) = self.aggregate(plan, s, group, clauses)?;
        let (plan, mut clauses) = self.windows(plan, clauses)?;
        clauses.unique_names();
        let (plan, sorts) = self.order_and_project(plan, s, &clauses, &scope)?;
        self.limit(plan, s, &clauses.items, &sorts)
    }

    /// The rows a SELECT reads: ARRAY JOIN, WHERE and PREWHERE, then the select list's
    /// `arrayJoin(…)` calls (unnested before grouping).
    fn rows(
        &self,
        mut plan: LogicalPlan,
        s: &ast::Select,
        scope: &mut Scope<'_>,
    ) -> PResult<LogicalPlan> {
        // ARRAY JOIN
        if let Some(aj) = &s.array_join {
            plan = self.array_join_clause(plan, aj, scope)?;
        }

        // WHERE / PREWHERE
        let mut filter: Option<Expr> = None;
        for w in [&s.prewhere, &s.where_].into_iter().flatten() {
            if contains_aggregate(w) {
                return err(
                    "Aggregate functions are not allowed in WHERE; use HAVING",
                    w.span,
                );
            }
            let p = self.predicate(w, scope, false)?;
            filter = Some(match filter {
                Some(f) => f.and(p),
                None => p,
            });
        }
        if let Some(f) = filter {
            plan = LogicalPlanBuilder::from(plan)
                .filter(f)
                .and_then(|b| b.build())
                .map_err(df)?;
            scope.schema = plan.schema().clone();
        }

        // arrayJoin(...) in the select list: unnest before grouping.
        let mut ajs = Vec::new();
        for c in &s.columns {
            collect_array_join_calls(c, &mut ajs);
        }
        if !ajs.is_empty() {
            plan = self.array_join_calls(plan, ajs, scope)?;
        }
        Ok(plan)
    }

    /// The select list, with stars expanded.
    fn select_list(&self, s: &ast::Select, scope: &Scope<'_>) -> PResult<Vec<(Expr, String)>> {
        let mut items: Vec<(Expr, String)> = Vec::new();
        for c in &s.columns {
            match &c.kind {
                ExprKind::Star(qual) => {
                    self.star_items(qual, &[], &[], c.span, scope, &mut items)?
                }
                ExprKind::Columns(cols) => match &cols.source {
                    // `* EXCLUDE (…) REPLACE (…)`: as ClickHouse's `* EXCEPT … REPLACE …`, a name
                    // that is not a column is ignored.
                    ast::ColumnsSource::Star(qual) => self.star_items(
                        qual,
                        &cols.exclude,
                        &cols.replace,
                        c.span,
                        scope,
                        &mut items,
                    )?,
                    ast::ColumnsSource::Regex(re) => {
                        let rx = match regex::Regex::new(re) {
                            Ok(rx) => rx,
                            Err(e) => {
                                return err(
                                    format!("Invalid regular expression in COLUMNS: {e}"),
                                    c.span,
                                );
                            }
                        };
                        let before = items.len();
                        for r in &scope.relations {
                            for col in r.visible.iter().filter(|col| rx.is_match(col)) {
                                let e = Expr::Column(Column::new(
                                    Some(TableReference::bare(r.alias.clone())),
                                    col,
                                ));
                                items.push((self.whole_properties(e, scope), col.clone()));
                            }
                        }
                        if items.len() == before {
                            return err(format!("COLUMNS('{re}') matches no column"), c.span);
                        }
                    }
                    ast::ColumnsSource::List(list) => {
                        for e in list {
                            items.push((self.expr(e, scope)?, column_name(e, self.ctx.print)));
                        }
                    }
                },
                _ if super::call::untuple_arg(c).is_some() => {
                    let t = super::call::untuple_arg(c).expect("matched");
                    for (e, name) in self.untuple_items(t, scope)? {
                        items.push((self.expr(&e, scope)?, name));
                    }
                }
                _ => {
                    let e = self.expr(c, scope)?;
                    items.push((e, column_name(c, self.ctx.print)));
                }
            }
        }
        if items.is_empty() {
            return err("SELECT needs at least one column", s.span);
        }
        Ok(items)
    }

    /// The columns of `*` / `t.*`, less `exclude`, with `replace`'s values under their names.
    fn star_items(
        &self,
        qual: &Option<Vec<String>>,
        exclude: &[String],
        replace: &[(ast::Expr, String)],
        span: Span,
        scope: &Scope<'_>,
        items: &mut Vec<(Expr, String)>,
    ) -> PResult<()> {
        for r in &scope.relations {
            if let Some(q) = qual
                && q.join(".") != r.alias
            {
                continue;
            }
            for col in &r.visible {
                if exclude.contains(col) {
                    continue;
                }
                if let Some((e, _)) = replace.iter().find(|(_, n)| n == col) {
                    items.push((self.expr(e, scope)?, col.clone()));
                    continue;
                }
                let e = Expr::Column(Column::new(
                    Some(TableReference::bare(r.alias.clone())),
                    col,
                ));
                items.push((self.whole_properties(e, scope), col.clone()));
            }
        }
        if let Some(q) = qual
            && !scope.relations.iter().any(|r| r.alias == q.join("."))
        {
            return err(
                format!("Unknown table `{}` in `{}.*`", q.join("."), q.join(".")),
                span,
            );
        }
        Ok(())
    }

    /// GROUP BY's keys and the other clauses' expressions (positions `1`, `2`… in GROUP BY
    /// and ORDER BY name the select list's items).
    fn clauses(
        &self,
        s: &ast::Select,
        items: Vec<(Expr, String)>,
        scope: &Scope<'_>,
    ) -> PResult<(Vec<Expr>, Clauses)> {
        let group: Vec<Expr> = match &s.group_by {
            Some(gb) => gb
                .exprs
                .iter()
                .map(|g| {
                    if contains_aggregate(g) {
                        err("Aggregate functions are not allowed in GROUP BY", g.span)
                    } else if let ExprKind::Literal(Literal::Int(n)) = &g.kind
                        && *n >= 1
                        && (*n as usize) <= items.len()
                    {
                        Ok(items[*n as usize - 1].0.clone())
                    } else {
                        self.expr(g, scope)
                    }
                })
                .collect::<PResult<_>>()?,
            None => vec![],
        };
        let having = s
            .having
            .as_ref()
            .map(|h| self.predicate(h, scope, false))
            .transpose()?;
        let qualify = s
            .qualify
            .as_ref()
            .map(|h| self.predicate(h, scope, false))
            .transpose()?;
        let limit_by: Vec<Expr> = match &s.limit_by {
            Some(lb) => lb
                .by
                .iter()
                .map(|b| self.expr(b, scope))
                .collect::<PResult<_>>()?,
            None => vec![],
        };
        let positional = |e: &ast::Expr| -> Option<Expr> {
            match &e.kind {
                ExprKind::Literal(Literal::Int(n)) if *n >= 1 && (*n as usize) <= items.len() => {
                    Some(items[*n as usize - 1].0.clone())
                }
                _ => None,
            }
        };
        let order: Vec<(Expr, bool, Option<bool>)> = s
            .order_by
            .iter()
            .map(|o| {
                let e = match positional(&o.expr) {
                    Some(e) => e,
                    None => self.expr(&o.expr, scope)?,
                };
                Ok((e, o.desc, o.nulls_first))
            })
            .collect::<PResult<_>>()?;
        Ok((
            group,
            Clauses {
                items,
                having,
                qualify,
                order,
                limit_by,
            },
        ))
    }

    /// GROUP BY (with ROLLUP or CUBE) and the aggregates any clause uses, then HAVING. The
    /// clauses' expressions are rewritten to read the aggregate's output.
    fn aggregate(
        &self,
        mut plan: LogicalPlan,
        s: &ast::Select,
        group: Vec<Expr>,
        mut c: Clauses,
    ) -> PResult<(LogicalPlan, Clauses)> {
        let mut all: Vec<&Expr> = c.items.iter().map(|(e, _)| e).collect();
        all.extend(c.having.iter());
        all.extend(c.qualify.iter());
        all.extend(c.order.iter().map(|(e, _, _)| e));
        all.extend(c.limit_by.iter());
        let aggs = find_aggregate_exprs(all.iter().copied());
        if aggs.is_empty() && group.is_empty() {
            if c.having.is_some() {
                return err("HAVING needs GROUP BY or an aggregate", s.span);
            }
            return Ok((plan, c));
        }
        // ROLLUP / CUBE: DataFusion's grouping sets; a rolled-up key reads as its type's
        // default (ClickHouse without group_by_use_nulls), NULL when the key is Nullable.
        let modifier = s
            .group_by
            .as_ref()
            .map_or(ast::GroupByModifier::None, |g| g.modifier);
        let sets = match modifier {
            ast::GroupByModifier::None => None,
            ast::GroupByModifier::Rollup => Some(GroupingSet::Rollup(group.clone())),
            ast::GroupByModifier::Cube => Some(GroupingSet::Cube(group.clone())),
        };
        let group_expr = match sets {
            Some(g) if !group.is_empty() => vec![Expr::GroupingSet(g)],
            _ => group.clone(),
        };
        let input_schema = plan.schema().clone();
        let agg_plan = LogicalPlanBuilder::from(plan)
            .aggregate(group_expr, aggs.clone())
            .and_then(|b| b.build())
            .map_err(df)?;
        let out = agg_plan.schema().clone();
        let grouping_id = out.index_of_column_by_name(
            None,
            datafusion::logical_expr::Aggregate::INTERNAL_GROUPING_ID,
        );
        let mut map: Vec<(Expr, Expr)> = Vec::new();
        let n = group.len();
        for (i, e) in group.iter().enumerate() {
            let (q, f) = out.qualified_field(i);
            let col = Expr::Column(Column::new(q.cloned(), f.name()));
            let value = match grouping_id {
                Some(gid) if !e.nullable(&input_schema).map_err(df)? => {
                    let (gq, gf) = out.qualified_field(gid);
                    let gcol = Expr::Column(Column::new(gq.cloned(), gf.name()));
                    let t = e.get_type(&input_schema).map_err(df)?;
                    let default = ScalarValue::new_default(&t).map_err(df)?;
                    let shifted = Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(cast(gcol, DataType::UInt64)),
                        Operator::BitwiseShiftRight,
                        Box::new(lit((n - 1 - i) as u64)),
                    ));
                    let bit = Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(shifted),
                        Operator::BitwiseAnd,
                        Box::new(lit(1u64)),
                    ));
                    when(bit.eq(lit(1u64)), Expr::Literal(default, None))
                        .otherwise(col)
                        .map_err(df)?
                }
                _ => col,
            };
            map.push((e.clone(), value));
        }
        let first_agg = n + usize::from(grouping_id.is_some());
        for (j, e) in aggs.iter().enumerate() {
            let (q, f) = out.qualified_field(first_agg + j);
            map.push((e.clone(), Expr::Column(Column::new(q.cloned(), f.name()))));
        }
        c = c.rebase(|e| rebase(e, &map, &out))?;
        plan = agg_plan;
        if let Some(h) = c.having.take() {
            plan = LogicalPlanBuilder::from(plan)
                .having(h)
                .and_then(|b| b.build())
                .map_err(df)?;
        }
        Ok((plan, c))
    }

    /// Window functions any clause uses, then QUALIFY. A window inside another's window
    /// (a frame's key reading a whole partition's value) is computed first.
    fn windows(&self, mut plan: LogicalPlan, mut c: Clauses) -> PResult<(LogicalPlan, Clauses)> {
        for round in 0.. {
            let mut all: Vec<&Expr> = c.items.iter().map(|(e, _)| e).collect();
            all.extend(c.qualify.iter());
            all.extend(c.order.iter().map(|(e, _, _)| e));
            let windows = innermost_windows(&all);
            if windows.is_empty() {
                break;
            }
            if round > 0 {
                // A projection between the rounds' windows: DataFusion's common
                // subexpression pass takes a run of windows as one and would compute an
                // expression of the earlier round's columns below them all.
                plan = map_columns(plan, |_, _, _| None)?;
            }
            let wplan = LogicalPlanBuilder::window_plan(plan, windows.clone()).map_err(df)?;
            let map: Vec<(Expr, Expr)> = windows
                .iter()
                .map(|w| {
                    let name = w.schema_name().to_string();
                    (w.clone(), Expr::Column(Column::from_name(name)))
                })
                .collect();
            c = c.rebase(|e| replace_exprs(e, &map))?;
            plan = wplan;
        }
        if let Some(q) = c.qualify.take() {
            plan = LogicalPlanBuilder::from(plan)
                .filter(q)
                .and_then(|b| b.build())
                .map_err(df)?;
        }
        Ok((plan, c))
    }

    /// ORDER BY, DISTINCT, LIMIT BY and the projection to the select list, in the order
    /// ClickHouse applies them. Returns the plan and the sort keys (LIMIT … WITH TIES
    /// needs them).
    fn order_and_project(
        &self,
        mut plan: LogicalPlan,
        s: &ast::Select,
        c: &Clauses,
        scope: &Scope<'_>,
    ) -> PResult<(LogicalPlan, Vec<Sort>)> {
        let (items, order, limit_by_exprs) = (&c.items, &c.order, &c.limit_by);
        let sorts: Vec<Sort> = order
            .iter()
            .map(|(e, desc, nf)| {
                Sort::new(
                    self.order_key(e.clone(), plan.schema()),
                    !desc,
                    nf.unwrap_or(false),
                )
            })
            .collect();
        let projection: Vec<Expr> = items
            .iter()
            .map(|(e, n)| e.clone().alias(n.clone()))
            .collect();

        if s.distinct {
            // ORDER BY after DISTINCT may only use the selected columns.
            plan = LogicalPlanBuilder::from(plan)
                .project(projection)
                .and_then(|b| b.distinct())
                .and_then(|b| b.build())
                .map_err(df)?;
            if !sorts.is_empty() {
                let sorts = sorts
                    .iter()
                    .zip(order)
                    .map(|(so, (key, _, _))| {
                        items
                            .iter()
                            .position(|(e, _)| e == key)
                            .map(|i| {
                                Sort::new(
                                    self.order_key(
                                        Expr::Column(Column::from_name(items[i].1.clone())),
                                        plan.schema(),
                                    ),
                                    so.asc,
                                    so.nulls_first,
                                )
                            })
                            .ok_or_else(|| {
                                PlanError::new(
                                    "With SELECT DISTINCT, ORDER BY may only use selected columns",
                                    Some(s.span),
                                )
                            })
                    })
                    .collect::<PResult<Vec<_>>>()?;
                plan = LogicalPlanBuilder::from(plan)
                    .sort(sorts)
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
        } else {
            // LIMIT n BY and WITH TIES are windows over the rows before projection, so they
            // may order by anything the query can.
            if let Some(lb) = &s.limit_by {
                let n = const_usize(&lb.limit, "LIMIT BY")?;
                let off = lb
                    .offset
                    .as_ref()
                    .map(|o| const_usize(o, "LIMIT BY offset"))
                    .transpose()?
                    .unwrap_or(0);
                plan = numbered_filter(
                    plan,
                    row_number_expr(),
                    limit_by_exprs.clone(),
                    sorts.clone(),
                    off,
                    off + n,
                )?;
            }
            if s.with_ties {
                let n = s
                    .limit
                    .as_ref()
                    .map(|l| const_usize(l, "LIMIT"))
                    .transpose()?
                    .ok_or_else(|| PlanError::new("WITH TIES needs LIMIT", Some(s.span)))?;
                let off = s
                    .offset
                    .as_ref()
                    .map(|l| const_usize(l, "OFFSET"))
                    .transpose()?
                    .unwrap_or(0);
                if sorts.is_empty() {
                    return err("LIMIT … WITH TIES needs ORDER BY", s.span);
                }
                plan = numbered_filter(plan, rank_expr(), vec![], sorts.clone(), 0, n + off)?;
            }
            // With a window function, sort on the output when every key is a selected
            // column (the sort is then the last step, after the window); otherwise below
            // the projection, so a LIMIT becomes a top-k there and the projection (say, the
            // whole `properties` rebuilt from its columns) runs on the rows kept only.
            let on_output = output_sorts(items, &sorts);
            let has_window = plan
                .exists(|p| Ok(matches!(p, LogicalPlan::Window(_))))
                .unwrap_or(true);
            let sort_after = !sorts.is_empty() && on_output.len() == sorts.len() && has_window;
            if !sorts.is_empty() && !sort_after {
                plan = LogicalPlanBuilder::from(plan)
                    .sort(sorts.clone())
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
            plan = LogicalPlanBuilder::from(plan)
                .project(projection)
                .and_then(|b| b.build())
                .map_err(df)?;
            if sort_after {
                plan = LogicalPlanBuilder::from(plan)
                    .sort(on_output)
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
        }

        // LIMIT n BY cols (after DISTINCT: over the selected columns)
        if s.distinct
            && let Some(lb) = &s.limit_by
        {
            plan = self.limit_by(plan, lb, items, &sorts, scope)?;
        }
        Ok((plan, sorts))
    }

    /// LIMIT and OFFSET (and WITH TIES after DISTINCT).
    fn limit(
        &self,
        mut plan: LogicalPlan,
        s: &ast::Select,
        items: &[(Expr, String)],
        sorts: &[Sort],
    ) -> PResult<LogicalPlan> {
        if s.limit_percent {
            return self.limit_percent(plan, s, items, sorts);
        }
        let limit = s
            .limit
            .as_ref()
            .map(|l| const_usize(l, "LIMIT"))
            .transpose()?;
        let offset = s
            .offset
            .as_ref()
            .map(|l| const_usize(l, "OFFSET"))
            .transpose()?
            .unwrap_or(0);
        if s.with_ties && !s.distinct {
            if offset > 0 {
                plan = LogicalPlanBuilder::from(plan)
                    .limit(offset, None)
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
        } else if s.with_ties {
            let Some(n) = limit else {
                return err("WITH TIES needs LIMIT", s.span);
            };
            if sorts.is_empty() {
                return err("LIMIT … WITH TIES needs ORDER BY", s.span);
            }
            plan = self.with_ties(plan, n + offset, items, sorts)?;
            if offset > 0 {
                plan = LogicalPlanBuilder::from(plan)
                    .limit(offset, None)
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
        } else if limit.is_some() || offset > 0 {
            plan = LogicalPlanBuilder::from(plan)
                .limit(offset, limit)
                .and_then(|b| b.build())
                .map_err(df)?;
        }
        Ok(plan)
    }

    pub(super) fn array_join_clause(
        &self,
        plan: LogicalPlan,
        aj: &ast::ArrayJoin,
        scope: &mut Scope<'_>,
    ) -> PResult<LogicalPlan> {
        let mut exprs: Vec<Expr> = plan
            .schema()
            .iter()
            .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
            .collect();
        let mut names = Vec::new();
        let mut not_null = HashSet::new();
        for e in &aj.exprs {
            let (inner, name) = match &e.kind {
                ExprKind::Alias { expr, name } => (&**expr, name.clone()),
                ExprKind::Field(parts) => (e, parts.last().cloned().unwrap_or_default()),
                _ => return err("ARRAY JOIN needs `expr AS name`", e.span),
            };
            let mut v = self.expr(inner, scope)?;
            if aj.left {
                // LEFT ARRAY JOIN keeps rows whose array is empty, with a NULL element.
                let ty = v.get_type(&scope.schema).map_err(df)?;
                if let DataType::List(f) = &ty {
                    let null_list = ScalarValue::List(ScalarValue::new_list_nullable(
                        &[ScalarValue::try_from(f.data_type()).map_err(df)?],
                        f.data_type(),
                    ));
                    v = when(
                        datafusion::functions_nested::expr_fn::cardinality(v.clone()).eq(lit(0u64)),
                        Expr::Literal(null_list, None),
                    )
                    .otherwise(v)
                    .map_err(df)?;
                }
            }
            if !aj.left && functions::elements_nullable(&v, &scope.schema) == Some(false) {
                not_null.insert(name.clone());
            }
            exprs.push(v.alias(name.clone()));
            names.push(name);
        }
        let mut b = LogicalPlanBuilder::from(plan).project(exprs).map_err(df)?;
        for n in &names {
            b = b.unnest_column(Column::from_name(n.clone())).map_err(df)?;
        }
        let plan = not_nullable(b.build().map_err(df)?, &not_null)?;
        scope.extra.extend(names);
        scope.schema = plan.schema().clone();
        Ok(plan)
    }

    pub(super) fn array_join_calls(
        &self,
        plan: LogicalPlan,
        calls: Vec<ast::Expr>,
        scope: &mut Scope<'_>,
    ) -> PResult<LogicalPlan> {
        let mut exprs: Vec<Expr> = plan
            .schema()
            .iter()
            .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
            .collect();
        let mut names = Vec::new();
        for (i, call) in calls.into_iter().enumerate() {
            let ExprKind::Call { args, .. } = &call.kind else {
                continue;
            };
            if args.len() != 1 {
                return err("arrayJoin takes 1 argument", call.span);
            }
            let v = self.expr(&args[0], scope)?;
            let name = format!("__array_join_{i}");
            let not_null = functions::elements_nullable(&v, &scope.schema) == Some(false);
            exprs.push(v.alias(name.clone()));
            scope.array_joins.push((call.clone(), name.clone()));
            names.push((name, not_null));
        }
        let mut b = LogicalPlanBuilder::from(plan).project(exprs).map_err(df)?;
        for (n, _) in &names {
            b = b.unnest_column(Column::from_name(n.clone())).map_err(df)?;
        }
        let not_null: HashSet<String> = names
            .into_iter()
            .filter_map(|(n, not_null)| not_null.then_some(n))
            .collect();
        let plan = not_nullable(b.build().map_err(df)?, &not_null)?;
        scope.schema = plan.schema().clone();
        Ok(plan)
    }

    pub(super) fn limit_by(
        &self,
        plan: LogicalPlan,
        lb: &ast::LimitBy,
        items: &[(Expr, String)],
        sorts: &[Sort],
        scope: &Scope<'_>,
    ) -> PResult<LogicalPlan> {
        let n = const_usize(&lb.limit, "LIMIT BY")?;
        let offset = lb
            .offset
            .as_ref()
            .map(|o| const_usize(o, "LIMIT BY offset"))
            .transpose()?
            .unwrap_or(0);
        // BY expressions name output columns (by alias or by equal expression).
        let by: Vec<Expr> = lb
            .by
            .iter()
            .map(|b| {
                let e = self.expr(b, scope)?;
                let i = items
                    .iter()
                    .position(|(x, n)| {
                        *x == e
                            || matches!(&b.kind, ExprKind::Field(p) if p.len() == 1 && p[0] == *n)
                    })
                    .ok_or_else(|| {
                        PlanError::new("LIMIT BY may only use selected columns", Some(b.span))
                    })?;
                Ok(Expr::Column(Column::from_name(items[i].1.clone())))
            })
            .collect::<PResult<_>>()?;
        let order = output_sorts(items, sorts);
        let rn = Expr::from(WindowFunction::new(
            WindowFunctionDefinition::WindowUDF(
                datafusion::functions_window::row_number::row_number_udwf(),
            ),
            vec![],
        ));
        let rn = window_with(rn, by, order, None).map_err(df)?;
        let cols: Vec<Expr> = items
            .iter()
            .map(|(_, n)| Expr::Column(Column::from_name(n.clone())))
            .collect();
        let rn_name = rn.schema_name().to_string();
        LogicalPlanBuilder::window_plan(plan, vec![rn])
            .and_then(|p| {
                LogicalPlanBuilder::from(p)
                    .filter(
                        Expr::Column(Column::from_name(rn_name.clone()))
                            .gt(lit(offset as u64))
                            .and(
                                Expr::Column(Column::from_name(rn_name))
                                    .lt_eq(lit((offset + n) as u64)),
                            ),
                    )?
                    .project(cols)?
                    .build()
            })
            .map_err(df)
    }

    /// `LIMIT p %`: PostHog prints it for ClickHouse as the fractional `LIMIT p/100`, which
    /// keeps the first `ceil(rows × p/100)` rows (rows counted before OFFSET, computed in
    /// Float64); `LIMIT 100 %` prints as `LIMIT 1.0`, which ClickHouse reads as one row.
    /// Only a constant between 0 and 100 is allowed, as in PostHog.
    fn limit_percent(
        &self,
        plan: LogicalPlan,
        s: &ast::Select,
        items: &[(Expr, String)],
        sorts: &[Sort],
    ) -> PResult<LogicalPlan> {
        let Some(l) = &s.limit else {
            return err("LIMIT … % needs a percentage", s.span);
        };
        let percent = match &l.kind {
            ExprKind::Literal(Literal::Int(i)) => *i as f64,
            ExprKind::Literal(Literal::Float(f)) => *f,
            _ => {
                return err(
                    "LIMIT percent with expressions is not supported (PostHog allows only a \
                     number: LIMIT 10 %)",
                    l.span,
                );
            }
        };
        if !(0.0..=100.0).contains(&percent) {
            return err("Limit percent must be between 0 and 100", l.span);
        }
        if s.with_ties {
            return err(
                "LIMIT … % WITH TIES is not supported: use LIMIT n WITH TIES",
                l.span,
            );
        }
        let offset = s
            .offset
            .as_ref()
            .map(|l| const_usize(l, "OFFSET"))
            .transpose()?
            .unwrap_or(0);
        let fraction = percent / 100.0;
        if fraction == 0.0 || fraction >= 1.0 {
            let n = if fraction == 0.0 { 0 } else { 1 };
            return LogicalPlanBuilder::from(plan)
                .limit(offset, Some(n))
                .and_then(|b| b.build())
                .map_err(df);
        }
        let order = output_sorts(items, sorts);
        let resort = order.len() == sorts.len() && !order.is_empty();
        let rn = Expr::from(WindowFunction::new(
            WindowFunctionDefinition::WindowUDF(
                datafusion::functions_window::row_number::row_number_udwf(),
            ),
            vec![],
        ));
        let rn = window_with(
            rn,
            vec![],
            if resort { order.clone() } else { vec![] },
            None,
        )
        .map_err(df)?;
        let count = Expr::from(WindowFunction::new(
            WindowFunctionDefinition::AggregateUDF(
                datafusion::functions_aggregate::count::count_udaf(),
            ),
            vec![lit(1u8)],
        ));
        let count = window_with(count, vec![], vec![], None).map_err(df)?;
        let rn_col = Expr::Column(Column::from_name(rn.schema_name().to_string()));
        let count_col = Expr::Column(Column::from_name(count.schema_name().to_string()));
        // rn - offset <= ceil(count × fraction), in Float64 as ClickHouse computes it.
        let kept = datafusion::functions::math::expr_fn::ceil(
            cast(count_col, DataType::Float64) * lit(fraction),
        );
        let cols: Vec<Expr> = items
            .iter()
            .map(|(_, n)| Expr::Column(Column::from_name(n.clone())))
            .collect();
        LogicalPlanBuilder::window_plan(plan, vec![rn, count])
            .and_then(|p| {
                let b = LogicalPlanBuilder::from(p).filter(
                    rn_col
                        .clone()
                        .gt(lit(offset as u64))
                        .and(cast(rn_col, DataType::Float64).lt_eq(lit(offset as f64) + kept)),
                )?;
                let b = if resort { b.sort(order)? } else { b };
                b.project(cols)?.build()
            })
            .map_err(df)
    }

    pub(super) fn with_ties(
        &self,
        plan: LogicalPlan,
        n: usize,
        items: &[(Expr, String)],
        sorts: &[Sort],
    ) -> PResult<LogicalPlan> {
        let order = output_sorts(items, sorts);
        if order.len() != sorts.len() {
            return Err(PlanError::new(
                "LIMIT … WITH TIES may only order by selected columns",
                None,
            ));
        }
        let rank = Expr::from(WindowFunction::new(
            WindowFunctionDefinition::WindowUDF(datafusion::functions_window::rank::rank_udwf()),
            vec![],
        ));
        let rank = window_with(rank, vec![], order.clone(), None).map_err(df)?;
        let rank_name = rank.schema_name().to_string();
        let cols: Vec<Expr> = items
            .iter()
            .map(|(_, n)| Expr::Column(Column::from_name(n.clone())))
            .collect();
        LogicalPlanBuilder::window_plan(plan, vec![rank])
            .and_then(|p| {
                LogicalPlanBuilder::from(p)
                    .filter(Expr::Column(Column::from_name(rank_name)).lt_eq(lit(n as u64)))?
                    .sort(order)?
                    .project(cols)?
                    .build()
            })
            .map_err(df)
    }

    // ---------------------------------------------------------------------------------
    // Expressions
    // ---------------------------------------------------------------------------------
}

/// `plan` with its columns named in `names` typed non-nullable, their values unchanged.
/// arrayJoin of an array whose elements ClickHouse types non-Nullable gives non-Nullable
/// values, and what depends on that (the type's default where nth_value or lagInFrame
/// finds no row) reads it from the schema, where DataFusion's unnest always says nullable.
/// `coalesce` with a value of the type says it; the fallback is never taken. A type without
/// a default value stays as it is.
fn not_nullable(plan: LogicalPlan, names: &HashSet<String>) -> PResult<LogicalPlan> {
    if names.is_empty() {
        return Ok(plan);
    }
    map_columns(plan, |_, f, c| {
        match ScalarValue::new_default(f.data_type()) {
            Ok(d) if names.contains(f.name()) && !d.is_null() => {
                Some(core_fn::coalesce(vec![c, lit(d)]))
            }
            _ => None,
        }
    })
}
