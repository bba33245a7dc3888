//! FROM: queries and set operations, tables (stored, `sessions`, CTEs), lazy joins to
//! persons and groups, and joins.

use super::*;

/// The columns of a set operation where one side is a UInt64 and the other a signed integer
/// agree on Int64, as `if` branches do (ClickHouse has no common type there, and from 26.1 a
/// Variant holding the same numbers); DataFusion's Decimal(20, 0) would print them as
/// strings.
fn int_set_op_agree(l: LogicalPlan, r: LogicalPlan) -> PResult<(LogicalPlan, LogicalPlan)> {
    set_op_agree(
        l,
        r,
        |a, b| *a == DataType::UInt64 && b.is_signed_integer(),
        |f, c| (*f.data_type() != DataType::Int64).then(|| cast(c, DataType::Int64)),
    )
}

impl Planner<'_> {
    pub(super) fn query(&self, q: &ast::Query, ctes: &Ctes) -> PResult<LogicalPlan> {
        match q {
            ast::Query::Select(s) => self.select(s, ctes),
            ast::Query::Offset { .. } => Err(PlanError::new(
                "OFFSET after a parenthesized query is not supported (ClickHouse refuses it): \
                 put the OFFSET inside the parentheses",
                None,
            )),
            ast::Query::Placeholder(name) => Err(PlanError::new(
                format!(
                    "A placeholder cannot stand for a whole query: {{{name}}} (values fill \
                     placeholders with constants)"
                ),
                None,
            )),
            ast::Query::SetOp { op, left, right } => {
                let l = self.query(left, ctes)?;
                let r = self.query(right, ctes)?;
                let (l, r) = self.uuid_set_op_agree(l, r)?;
                let (l, r) = int_set_op_agree(l, r)?;
                if l.schema().fields().len() != r.schema().fields().len() {
                    return Err(PlanError::new(
                        format!(
                            "Each part of a set operation must have the same number of columns, got {} and {}",
                            l.schema().fields().len(),
                            r.schema().fields().len()
                        ),
                        None,
                    ));
                }
                let plan = match op {
                    ast::SetOp::UnionAll => LogicalPlanBuilder::from(l).union(r),
                    ast::SetOp::UnionDistinct => LogicalPlanBuilder::from(l).union_distinct(r),
                    ast::SetOp::Intersect => {
                        LogicalPlanBuilder::intersect(l, r, false).map(LogicalPlanBuilder::from)
                    }
                    ast::SetOp::Except => {
                        LogicalPlanBuilder::except(l, r, false).map(LogicalPlanBuilder::from)
                    }
                }
                .and_then(|b| b.build())
                .map_err(df)?;
                Ok(plan)
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // FROM
    // ---------------------------------------------------------------------------------

    pub(super) fn table_plan(
        &self,
        t: &ast::TableExpr,
        ctes: &Ctes,
        lazy: &HashSet<String>,
    ) -> PResult<(LogicalPlan, Relation)> {
        // SAMPLE: PostHog's events table samples by cityHash64(distinct_id); nothing else
        // has a sampling key.
        let sample = match &t.sample {
            None => None,
            Some(smp) => {
                let events = matches!(&t.source, ast::TableSource::Table(p)
                    if p.len() == 1 && p[0] == "events" && ctes.query("events").is_none());
                if !events {
                    return err(
                        "SAMPLE is only supported on the events table (the one table with a \
                         sampling key, cityHash64(distinct_id))",
                        t.span,
                    );
                }
                sample_range(smp, t.span)?
            }
        };
        let mut props = None;
        let (plan, alias, events) = match &t.source {
            ast::TableSource::Function { name, args } if name == "numbers" => {
                let plan = self.numbers_table(args, t.span)?;
                let alias = t.alias.clone().unwrap_or_else(|| "numbers".to_string());
                (plan, alias, false)
            }
            ast::TableSource::Function { name, .. } => {
                return err(
                    format!(
                        "Table functions are not allowed: `{name}(…)`. Query one of: {}",
                        TABLES.join(", ")
                    ),
                    t.span,
                );
            }
            ast::TableSource::Pivot { pivot, .. } => {
                let word = if pivot.unpivot { "UNPIVOT" } else { "PIVOT" };
                // PostHog's resolver refuses both outside its Postgres dialect (ClickHouse has
                // neither), so a query PostHog runs never holds one.
                let instead = if pivot.unpivot {
                    "ARRAY JOIN over an array of (name, value) tuples"
                } else {
                    "GROUP BY with sumIf/countIf per value"
                };
                return err(
                    format!(
                        "{word} is not allowed in the ClickHouse dialect (PostHog refuses it too; \
                         ClickHouse has no {word}): use {instead} instead"
                    ),
                    t.span,
                );
            }
            ast::TableSource::Joined(_) => {
                return err(
                    "A join chain in parentheses is not supported: write the joins without \
                     parentheses",
                    t.span,
                );
            }
            ast::TableSource::Tag(tag) => match super::hogqlx::hogql_query(tag) {
                Some(Ok(q)) => {
                    let plan = self.query(&q, ctes)?;
                    let alias = t.alias.clone().unwrap_or_else(|| "__subquery".to_string());
                    (plan, alias, false)
                }
                Some(Err(msg)) => return err(msg, t.span),
                None => {
                    return err(
                        format!(
                            "HogQLX tag <{} … /> is not supported as a table: hedgerow runs \
                             <HogQLQuery query='…' /> there; write other queries as a subquery \
                             or send their node to the query endpoint",
                            tag.name
                        ),
                        t.span,
                    );
                }
            },
            ast::TableSource::Placeholder(name) => {
                return err(
                    format!("Placeholders cannot name tables: {{{name}}}"),
                    t.span,
                );
            }
            ast::TableSource::Subquery(q) => {
                let plan = self.query(q, ctes)?;
                let alias = t.alias.clone().unwrap_or_else(|| "__subquery".to_string());
                (plan, alias, false)
            }
            ast::TableSource::Table(parts) => {
                let name = parts.join(".");
                if parts.len() == 1
                    && let Some(q) = ctes.query(&parts[0])
                {
                    let plan = self.query(q, ctes)?;
                    let alias = t.alias.clone().unwrap_or_else(|| parts[0].clone());
                    (plan, alias, false)
                } else {
                    if parts.len() != 1 || !TABLES.contains(&parts[0].as_str()) {
                        return err(
                            format!(
                                "Unknown table `{name}`. Query one of: {}",
                                TABLES.join(", ")
                            ),
                            t.span,
                        );
                    }
                    let alias = t.alias.clone().unwrap_or_else(|| parts[0].clone());
                    let mut plan = self.stored_table(&parts[0], t.span)?;
                    if let Some((lower, upper)) = sample {
                        let key = functions::city_hash_64_of(Expr::Column(Column::from_name(
                            "distinct_id",
                        )));
                        let mut keep = lit(true);
                        if lower > 0 {
                            keep = keep.and(key.clone().gt_eq(lit(lower)));
                        }
                        if let Some(upper) = upper {
                            keep = keep.and(key.lt(lit(upper)));
                        }
                        plan = LogicalPlanBuilder::from(plan)
                            .filter(keep)
                            .and_then(|b| b.build())
                            .map_err(df)?;
                    }
                    props = match parts[0].as_str() {
                        "events" => Some(PropertyKind::Event),
                        "persons" => Some(PropertyKind::Person),
                        _ => None,
                    };
                    (plan, alias, parts[0] == "events")
                }
            }
        };
        let plan = LogicalPlanBuilder::from(plan)
            .alias(TableReference::bare(alias.clone()))
            .and_then(|b| b.build())
            .map_err(df)?;
        let visible: Vec<String> = if events {
            EVENTS_COLUMNS.iter().map(|s| s.to_string()).collect()
        } else {
            plan.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| !n.starts_with("__"))
                .collect()
        };
        let columns = plan
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut rel = Relation {
            alias,
            visible,
            columns,
            events,
            props,
            lazy: HashMap::new(),
        };
        let mut plan = plan;
        if events {
            let joined = self.ctx.persons_mode.joined_properties();
            for name in EVENTS_LAZY_JOINS {
                let wanted = |n: &str| {
                    lazy.contains(&format!("{}.{n}", rel.alias)) || lazy.contains(&format!(".{n}"))
                };
                // `person.properties` reads the event's snapshot unless the persons mode
                // asks for the person's current properties.
                if wanted(name) || (*name == "person" && joined && wanted("person.properties")) {
                    plan = self.add_lazy_join(plan, &mut rel, name, t.span)?;
                }
            }
        }
        Ok((plan, rel))
    }

    /// A stored table's plan: the provider's scan with the columns HogQL shows, DateTime
    /// columns labelled with the project's zone.
    /// `numbers(n)` / `numbers(offset, n)`: one UInt64 column `number` counting from the
    /// offset (0), as ClickHouse's table function. The values come from `range`, so its
    /// size limit and the output budget apply.
    fn numbers_table(&self, args: &[ast::Expr], span: Span) -> PResult<LogicalPlan> {
        let ints = args
            .iter()
            .map(|a| match &a.kind {
                ExprKind::Literal(ast::Literal::Int(n)) if *n >= 0 && *n <= u64::MAX as i128 => {
                    i64::try_from(*n).ok()
                }
                _ => None,
            })
            .collect::<Option<Vec<i64>>>();
        let (start, count) = match ints.as_deref() {
            Some([n]) => (0, *n),
            Some([o, n]) => (*o, *n),
            _ => {
                return err(
                    "Table function `numbers` takes one or two constant non-negative integers: numbers(n) or numbers(offset, n)",
                    span,
                );
            }
        };
        let end = start.checked_add(count).ok_or_else(|| {
            PlanError::new("numbers(offset, n): offset + n is out of range", Some(span))
        })?;
        let empty = DFSchema::empty();
        let range = functions::translate(
            "range",
            vec![],
            vec![
                Arg::Expr(Expr::Literal(ScalarValue::Int64(Some(start)), None)),
                Arg::Expr(Expr::Literal(ScalarValue::Int64(Some(end)), None)),
            ],
            false,
            &self.fn_ctx(&empty),
        )
        .map_err(|e| PlanError::new(e.to_string(), Some(span)))?;
        LogicalPlanBuilder::empty(true)
            .project(vec![range.alias("__numbers")])
            .and_then(|b| b.unnest_column("__numbers"))
            .and_then(|b| {
                b.project(vec![
                    // coalesce: unnest's column is nullable, `number` is not (as ClickHouse).
                    datafusion::logical_expr::cast(
                        core_fn::coalesce(vec![
                            Expr::Column(Column::from_name("__numbers")),
                            Expr::Literal(ScalarValue::Int64(Some(0)), None),
                        ]),
                        DataType::UInt64,
                    )
                    .alias("number"),
                ])
            })
            .and_then(|b| b.build())
            .map_err(df)
    }

    pub(super) fn stored_table(&self, name: &str, span: Span) -> PResult<LogicalPlan> {
        if name == "sessions" {
            let q = (self.ctx.parse)(SESSIONS_QUERY)
                .map_err(|e| PlanError::new(format!("sessions view: {e}"), None))?;
            return self.query(&q, &Ctes::default());
        }
        let provider = self.ctx.catalog.table(name).ok_or_else(|| {
            PlanError::new(format!("Table `{name}` is not available"), Some(span))
        })?;
        let scan = LogicalPlanBuilder::scan(
            TableReference::bare(format!("__{name}")),
            provider_as_source(provider),
            None,
        )
        .map_err(df)?
        .build()
        .map_err(df)?;
        let tz: Arc<str> = Arc::from(self.ctx.timezone.as_str());
        let mut exprs = Vec::new();
        for f in scan.schema().fields() {
            let c = Expr::Column(Column::new(
                Some(TableReference::bare(format!("__{name}"))),
                f.name(),
            ));
            if name == "events" && matches!(f.name().as_str(), "team_id" | "event_date") {
                continue;
            }
            if name == "events"
                && f.name() == "person_id"
                && self.ctx.persons_mode.overrides()
                && let Some(map) = self.ctx.catalog.person_overrides()
            {
                exprs.push(crate::hogql::overrides::override_person_id(c, map).alias(f.name()));
                continue;
            }
            if name == "events" && crate::storage::ids::ID_COLUMNS.contains(&f.name().as_str()) {
                // 16 bytes in the files (binary to Delta), text in a table from before.
                exprs.push(functions::stored_uuid(c).alias(f.name()));
                continue;
            }
            if name == "events" && f.name() == "elements_chain" {
                // PostHog's column is a plain String: '' when there is no chain.
                exprs.push(core_fn::coalesce(vec![c, lit("")]).alias(f.name()));
                continue;
            }
            let e = match f.data_type() {
                DataType::Timestamp(unit, _) => {
                    cast(c, DataType::Timestamp(*unit, Some(tz.clone()))).alias(f.name())
                }
                // Utf8View stays as read: a cast to Utf8 here copied every string a
                // filter, hash or join saw (measured in the bench at 10M events:
                // plan_filter 1437 → 1019 ms, utm_breakdown 347 → 234 ms).
                DataType::LargeUtf8 => cast(c, DataType::Utf8).alias(f.name()),
                _ => c.alias(f.name()),
            };
            exprs.push(e);
        }
        LogicalPlanBuilder::from(scan)
            .project(exprs)
            .and_then(|b| b.build())
            .map_err(df)
    }

    pub(super) fn add_lazy_join(
        &self,
        plan: LogicalPlan,
        rel: &mut Relation,
        name: &str,
        span: Span,
    ) -> PResult<LogicalPlan> {
        let q = format!("{}__{}", rel.alias, name);
        let c = |col: &str| {
            Expr::Column(Column::new(
                Some(TableReference::bare(rel.alias.clone())),
                col,
            ))
        };
        let r = |col: &str| Expr::Column(Column::new(Some(TableReference::bare(q.clone())), col));
        let (table, on) = match name {
            "person" => ("persons", c("person_id").eq(r("id"))),
            "pdi" => ("person_distinct_ids", c("distinct_id").eq(r("distinct_id"))),
            "session" => ("sessions", c("$session_id").eq(r("session_id"))),
            g => {
                let idx: i64 = g.trim_start_matches("group_").parse().unwrap_or(0);
                (
                    "groups",
                    c(&format!("$group_{idx}"))
                        .eq(r("key"))
                        .and(r("index").eq(lit(idx))),
                )
            }
        };
        let right = self.stored_table(table, span)?;
        let right = LogicalPlanBuilder::from(right)
            .alias(TableReference::bare(q.clone()))
            .and_then(|b| b.build())
            .map_err(df)?;
        let plan = LogicalPlanBuilder::from(plan)
            .join_on(right, JoinType::Left, vec![on])
            .and_then(|b| b.build())
            .map_err(df)?;
        rel.lazy.insert(name.to_string(), q);
        Ok(plan)
    }

    /// The order that puts an ASOF JOIN's closest right row first: the ON clause's one
    /// inequality, by its right-table side (`a.t >= b.t`: the greatest `b.t`; `a.t <= b.t`:
    /// the least).
    fn asof_order(
        &self,
        on: &ast::Expr,
        scope: &Scope<'_>,
        right_alias: &str,
        span: Span,
    ) -> PResult<Sort> {
        fn conjuncts<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
            match &e.kind {
                ExprKind::Binary {
                    op: BinaryOp::And,
                    left,
                    right,
                } => {
                    conjuncts(left, out);
                    conjuncts(right, out);
                }
                _ => out.push(e),
            }
        }
        let mut all = Vec::new();
        conjuncts(on, &mut all);
        let inequalities: Vec<_> = all
            .iter()
            .filter_map(|c| match &c.kind {
                ExprKind::Binary { op, left, right }
                    if matches!(
                        op,
                        BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::Lt | BinaryOp::LtEq
                    ) =>
                {
                    Some((*op, &**left, &**right))
                }
                _ => None,
            })
            .collect();
        let [(op, l, r)] = inequalities[..] else {
            return err(
                "ASOF JOIN needs exactly one inequality (>=, >, <=, <) in ON, besides its \
                 equalities",
                span,
            );
        };
        if all.len() < 2 {
            return err(
                "ASOF JOIN needs at least one equality in ON besides its inequality",
                span,
            );
        }
        let of_right = |e: &Expr| {
            let refs = e.column_refs();
            let right = refs
                .iter()
                .filter(|c| {
                    c.relation
                        .as_ref()
                        .is_some_and(|q| q.table() == right_alias)
                })
                .count();
            (right > 0, right < refs.len())
        };
        let (le, re) = (self.expr(l, scope)?, self.expr(r, scope)?);
        // `left op right`, with `right` the right table's side.
        let (right_side, op) = match (of_right(&le), of_right(&re)) {
            ((false, true), (true, false)) => (re, op),
            ((true, false), (false, true)) => (
                le,
                match op {
                    BinaryOp::Gt => BinaryOp::Lt,
                    BinaryOp::GtEq => BinaryOp::LtEq,
                    BinaryOp::Lt => BinaryOp::Gt,
                    _ => BinaryOp::GtEq,
                },
            ),
            _ => {
                return err(
                    "The ASOF JOIN inequality must compare a column of each table",
                    span,
                );
            }
        };
        let descending = matches!(op, BinaryOp::Gt | BinaryOp::GtEq);
        Ok(Sort::new(right_side, !descending, false))
    }

    pub(super) fn from(
        &self,
        from: &ast::From,
        ctes: &Ctes,
        lazy: &HashSet<String>,
    ) -> PResult<(LogicalPlan, Vec<Relation>)> {
        let (mut plan, rel) = self.table_plan(&from.first, ctes, lazy)?;
        let mut rels = vec![rel];
        for j in &from.joins {
            let (right, rel) = self.table_plan(&j.table, ctes, lazy)?;
            let right_nullability: HashMap<String, bool> = right
                .schema()
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.is_nullable()))
                .collect();
            let left_nullability: HashMap<(String, String), bool> = plan
                .schema()
                .iter()
                .map(|(q, f)| {
                    (
                        (
                            q.map(|q| q.table().to_string()).unwrap_or_default(),
                            f.name().clone(),
                        ),
                        f.is_nullable(),
                    )
                })
                .collect();
            let right_nullability = (right_nullability, left_nullability);
            if rels.iter().any(|r| r.alias == rel.alias) {
                return err(
                    format!(
                        "Table alias `{}` is used twice; give each table its own alias",
                        rel.alias
                    ),
                    j.span,
                );
            }
            // ASOF JOIN: each left row takes the one right row that matches the equalities
            // and is closest under the inequality; numbered first so that one can be picked.
            let asof = matches!(j.strictness, Some(ast::JoinStrictness::Asof));
            if asof {
                if !matches!(j.kind, ast::JoinKind::Inner | ast::JoinKind::Left) {
                    return err(
                        "ASOF JOIN is either INNER or LEFT (as in ClickHouse)",
                        j.span,
                    );
                }
                if !matches!(j.constraint, Some(ast::JoinConstraint::On(_))) {
                    return err(
                        "ASOF JOIN needs ON with equalities and one inequality, as in \
                         `ON a.id = b.id AND a.t >= b.t`",
                        j.span,
                    );
                }
                plan = with_row_number(plan, ASOF_ROW)?;
            }
            let mut asof_order = None;
            let join_type = match (j.kind, j.strictness) {
                (ast::JoinKind::Left, Some(ast::JoinStrictness::Semi)) => JoinType::LeftSemi,
                (ast::JoinKind::Left, Some(ast::JoinStrictness::Anti)) => JoinType::LeftAnti,
                (ast::JoinKind::Right, Some(ast::JoinStrictness::Semi)) => JoinType::RightSemi,
                (ast::JoinKind::Right, Some(ast::JoinStrictness::Anti)) => JoinType::RightAnti,
                (ast::JoinKind::Inner, _) => JoinType::Inner,
                (ast::JoinKind::Left, _) => JoinType::Left,
                (ast::JoinKind::Right, _) => JoinType::Right,
                (ast::JoinKind::Full, _) => JoinType::Full,
                (ast::JoinKind::Cross, _) => JoinType::Inner,
            };
            let builder = LogicalPlanBuilder::from(plan);
            plan = match &j.constraint {
                None => {
                    if j.kind != ast::JoinKind::Cross {
                        return err("JOIN needs ON or USING (or use CROSS JOIN)", j.span);
                    }
                    builder.cross_join(right)
                }
                Some(ast::JoinConstraint::UsingExprs(_)) => {
                    return err(
                        "JOIN … USING takes column names, not expressions (as in ClickHouse)",
                        j.span,
                    );
                }
                Some(ast::JoinConstraint::Using(cols)) => {
                    let keys = cols.iter().map(|c| Column::from_name(c.clone())).collect();
                    builder.join_using(right, join_type, keys)
                }
                Some(ast::JoinConstraint::On(on)) => {
                    let mut all = rels.clone();
                    all.push(rel.clone());
                    let schema = Arc::new(builder.schema().join(right.schema()).map_err(df)?);
                    let scope = Scope {
                        relations: all,
                        extra: HashSet::new(),
                        aliases: HashMap::new(),
                        expanding: Default::default(),
                        lambda: vec![],
                        ctes,
                        schema,
                        array_joins: vec![],
                        windows: &[],
                    };
                    if asof {
                        asof_order = Some(self.asof_order(on, &scope, &rel.alias, j.span)?);
                    }
                    // ClickHouse joins match NULL keys to nothing: plain `=` here.
                    let on = self.predicate(on, &scope, true)?;
                    builder.join_on(right, join_type, vec![on])
                }
            }
            .and_then(|b| b.build())
            .map_err(df)?;
            if let Some(order) = asof_order {
                plan = closest_match(plan, order)?;
            }
            if matches!(join_type, JoinType::Left | JoinType::Right | JoinType::Full) {
                plan = join_defaults(plan, &right_nullability, &rel.alias, &rels, join_type)?;
            }
            rels.push(rel);
        }
        Ok((plan, rels))
    }

    // ---------------------------------------------------------------------------------
    // SELECT
    // ---------------------------------------------------------------------------------
}

/// A non-negative number as an exact fraction (numerator, denominator): what ClickHouse
/// reads a SAMPLE ratio as (`0.1` is 1/10, not the float).
fn ratio_of(e: &ast::Expr) -> PResult<(u128, u128)> {
    let bad = || {
        PlanError::new(
            "SAMPLE takes a non-negative number or a fraction of two, such as 0.1 or 1/10",
            Some(e.span),
        )
    };
    let number = |e: &ast::Expr| -> PResult<(u128, u128)> {
        match &e.kind {
            ExprKind::Literal(Literal::Int(i)) if *i >= 0 => Ok((*i as u128, 1)),
            ExprKind::Literal(Literal::Float(f)) if *f >= 0.0 && f.is_finite() => {
                // The shortest decimal that reads back as `f`: the number as written.
                let text = format!("{f}");
                let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
                let den = 10u128.checked_pow(frac.len() as u32).ok_or_else(bad)?;
                let num = format!("{whole}{frac}")
                    .parse::<u128>()
                    .map_err(|_| bad())?;
                Ok((num, den))
            }
            _ => Err(bad()),
        }
    };
    let (n, d) = match &e.kind {
        ExprKind::Binary {
            op: BinaryOp::Div,
            left,
            right,
        } => {
            let (a, b) = number(left)?;
            let (c, d) = number(right)?;
            if c == 0 {
                return Err(PlanError::new("SAMPLE divides by zero", Some(e.span)));
            }
            (
                a.checked_mul(d).ok_or_else(bad)?,
                b.checked_mul(c).ok_or_else(bad)?,
            )
        }
        _ => number(e)?,
    };
    let g = gcd(n, d);
    Ok((n / g, d / g))
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// `SAMPLE k [OFFSET m]` as ClickHouse reads it over a UInt64 sampling key: the rows whose
/// key is at least ⌊m·2^64⌋ (when that is above 0) and below ⌊(m+k)·2^64⌋ (when m+k < 1).
/// `SAMPLE 0` and `SAMPLE 1` sample nothing away. A k or m above 1 counts rows, which
/// ClickHouse turns into a ratio from its storage's estimate of the rows to read: refused.
/// Returns None when every row is kept, else (lower bound, upper bound if any).
fn sample_range(smp: &ast::Sample, span: Span) -> PResult<Option<(u64, Option<u64>)>> {
    let (kn, kd) = ratio_of(&smp.ratio)?;
    let (mn, md) = match &smp.offset {
        Some(o) => ratio_of(o)?,
        None => (0, 1),
    };
    if kn > kd || mn > md {
        return err(
            "SAMPLE with a number of rows (above 1) is not supported: ClickHouse turns it into \
             a ratio from its storage's row estimate; write a ratio such as SAMPLE 1/10",
            span,
        );
    }
    if kn == 0 || kn == kd {
        if mn > 0 {
            return err(
                "Sampling offset is incorrect because no sampling (SAMPLE 0 and SAMPLE 1 keep \
                 every row)",
                span,
            );
        }
        return Ok(None);
    }
    // ⌊n/d · 2^64⌋ for n < d, by long division (d stays below 2^127).
    let scaled = |n: u128, d: u128| -> PResult<u64> {
        if d >= 1 << 126 {
            return err("SAMPLE ratio has too many digits", span);
        }
        let (mut q, mut r) = (0u64, n);
        for _ in 0..64 {
            r <<= 1;
            q <<= 1;
            if r >= d {
                r -= d;
                q |= 1;
            }
        }
        Ok(q)
    };
    let lower = if mn == 0 { 0 } else { scaled(mn, md)? };
    // m + k = (mn·kd + kn·md) / (md·kd)
    let too_big = || PlanError::new("SAMPLE ratio has too many digits", Some(span));
    let sn = mn
        .checked_mul(kd)
        .and_then(|a| kn.checked_mul(md).and_then(|b| a.checked_add(b)))
        .ok_or_else(too_big)?;
    let sd = md.checked_mul(kd).ok_or_else(too_big)?;
    let upper = if sn >= sd {
        None
    } else {
        Some(scaled(sn, sd)?)
    };
    Ok(Some((lower, upper)))
}

/// The row number column an ASOF JOIN gives its left rows.
const ASOF_ROW: &str = "__asof_row";

/// `plan` with a `name` column numbering its rows.
fn with_row_number(plan: LogicalPlan, name: &str) -> PResult<LogicalPlan> {
    let rn = Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(
            datafusion::functions_window::row_number::row_number_udwf(),
        ),
        vec![],
    ));
    let rn = window_with(rn, vec![], vec![], None).map_err(df)?;
    let rn_name = rn.schema_name().to_string();
    let mut cols: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect();
    cols.push(Expr::Column(Column::from_name(rn_name)).alias(name));
    LogicalPlanBuilder::window_plan(plan, vec![rn])
        .and_then(|p| LogicalPlanBuilder::from(p).project(cols)?.build())
        .map_err(df)
}

/// Keeps, of each left row's matches, the first under `order` (an unmatched row of an ASOF
/// LEFT JOIN is its own only match), and drops the row numbers.
fn closest_match(plan: LogicalPlan, order: Sort) -> PResult<LogicalPlan> {
    let row = Expr::Column(Column::from_name(ASOF_ROW));
    let rn = Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(
            datafusion::functions_window::row_number::row_number_udwf(),
        ),
        vec![],
    ));
    let rn = window_with(rn, vec![row], vec![order], None).map_err(df)?;
    let rn_col = Expr::Column(Column::from_name(rn.schema_name().to_string()));
    let keep: Vec<Expr> = plan
        .schema()
        .iter()
        .filter(|(_, f)| f.name() != ASOF_ROW)
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect();
    LogicalPlanBuilder::window_plan(plan, vec![rn])
        .and_then(|p| {
            LogicalPlanBuilder::from(p)
                .filter(rn_col.eq(lit(1u64)))?
                .project(keep)?
                .build()
        })
        .map_err(df)
}
