//! Resolution and planning: a parsed HogQL query → a DataFusion `LogicalPlan`, built directly
//! with `LogicalPlanBuilder` and `Expr` (never SQL text).
//!
//! What a query can read is decided here: table names come from [`super::schema::TABLES`]
//! through the [`Catalog`], whose providers are limited to the caller's project; table
//! functions, unknown tables and other databases are refused. Semantics follow compat.md:
//! null-safe comparisons, float `/`, SELECT aliases usable everywhere, properties as nullable
//! strings, DateTime columns in the project's time zone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinType, ScalarValue, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::functions::core::expr_fn as core_fn;
use datafusion::logical_expr::expr::{AggregateFunction, Sort, WindowFunction};
use datafusion::logical_expr::utils::{find_aggregate_exprs, find_window_exprs};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, GroupingSet, LogicalPlan, LogicalPlanBuilder, Operator,
    WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition, cast, lit, when,
};

use crate::propdefs::{PropertyKind, PropertyType};

use super::ast::{self, BinaryOp, ExprKind, Literal, Span, UnaryOp};
use super::functions::{self, Arg, FnContext, FnKind, WeekStart};
use super::schema::{Catalog, EVENTS_COLUMNS, EVENTS_LAZY_JOINS, SESSIONS_QUERY, TABLES};

/// Why a query cannot be planned. Messages are for the query's author.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub message: String,
    pub span: Option<Span>,
}

impl PlanError {
    fn new(message: impl Into<String>, span: Option<Span>) -> Self {
        PlanError {
            message: message.into(),
            span,
        }
    }
}

fn err<T>(message: impl Into<String>, span: Span) -> Result<T, PlanError> {
    Err(PlanError::new(message, Some(span)))
}

fn df(e: datafusion::error::DataFusionError) -> PlanError {
    PlanError::new(e.strip_backtrace().to_string(), None)
}

type PResult<T> = Result<T, PlanError>;

/// What planning needs besides the query.
pub struct PlanContext<'a> {
    pub catalog: &'a dyn Catalog,
    pub timezone: String,
    pub week_start: WeekStart,
    pub now: DateTime<Utc>,
    /// `{name}` placeholders.
    pub values: HashMap<String, serde_json::Value>,
    /// Parses HogQL text (used for `sessions`): the planner does not depend on the parser.
    pub parse: &'a (dyn Fn(&str) -> Result<ast::Query, String> + Sync),
    /// Prints an expression as HogQL (names of unaliased columns).
    pub print: &'a (dyn Fn(&ast::Expr) -> String + Sync),
    /// How events' `person_id` and `person.properties` are read.
    pub persons_mode: super::overrides::PersonsMode,
}

/// Plans a whole query.
pub fn plan_query(query: &ast::Query, ctx: &PlanContext<'_>) -> PResult<LogicalPlan> {
    let planner = Planner {
        ctx,
        value_subqueries: Default::default(),
    };
    planner.query(query, &Ctes::default())
}

/// Named subqueries (`WITH name AS (…)`) visible to a query, innermost last.
#[derive(Clone, Default)]
struct Ctes {
    queries: Vec<(String, ast::Query)>,
    exprs: Vec<(String, ast::Expr)>,
}

impl Ctes {
    fn query(&self, name: &str) -> Option<&ast::Query> {
        self.queries
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, q)| q)
    }
}

struct Planner<'a> {
    ctx: &'a PlanContext<'a>,
    /// Subqueries used as values (scalar, `IN`, `EXISTS`) open around the current position.
    value_subqueries: std::cell::Cell<usize>,
}

/// The most subqueries used as values (`(SELECT …)`, `IN (SELECT …)`, `EXISTS (…)`) nested
/// inside one another. DataFusion checks a plan's subquery invariants by visiting each
/// nested subquery twice per level above it (`datafusion-expr` 55, `invariants.rs`), so
/// planning time doubles with each level: measured in a debug build, 10 levels 0.25 s, 14
/// levels 1.8 s, 18 levels 26 s. Subqueries in FROM cost nothing of the kind and nest up
/// to the parser's bound (ClickHouse's 100).
pub const MAX_VALUE_SUBQUERY_DEPTH: usize = 10;

/// One relation of a FROM clause.
#[derive(Debug, Clone)]
struct Relation {
    /// The qualifier its columns carry.
    alias: String,
    /// Columns `*` expands to.
    visible: Vec<String>,
    /// Every column reachable by name.
    columns: HashSet<String>,
    /// An `events` relation: property shortcuts and lazy joins apply.
    events: bool,
    /// Whose properties its `properties` column holds (typed property definitions apply).
    props: Option<PropertyKind>,
    /// Lazy joins added to this relation: join name → qualifier of its columns.
    lazy: HashMap<String, String>,
}

/// What names mean while translating expressions of one SELECT.
struct Scope<'s> {
    relations: Vec<Relation>,
    /// Unqualified columns added by ARRAY JOIN / arrayJoin.
    extra: HashSet<String>,
    /// SELECT aliases and `WITH expr AS name`.
    aliases: HashMap<String, ast::Expr>,
    /// Aliases being expanded (an alias inside its own definition means the column).
    expanding: std::cell::RefCell<Vec<String>>,
    lambda: Vec<String>,
    ctes: &'s Ctes,
    schema: Arc<DFSchema>,
    /// Precomputed `arrayJoin(x)` columns.
    array_joins: Vec<(ast::Expr, String)>,
    /// The SELECT's `WINDOW name AS (…)` definitions.
    windows: &'s [(String, ast::WindowSpec)],
}

impl Planner<'_> {
    fn fn_ctx<'s>(&'s self, schema: &'s DFSchema) -> FnContext<'s> {
        FnContext {
            timezone: &self.ctx.timezone,
            week_start: self.ctx.week_start,
            now: self.ctx.now,
            schema,
        }
    }

    /// Plans a subquery used as a value, within [`MAX_VALUE_SUBQUERY_DEPTH`].
    fn value_subquery(&self, q: &ast::Query, ctes: &Ctes, span: Span) -> PResult<LogicalPlan> {
        let depth = self.value_subqueries.get();
        if depth >= MAX_VALUE_SUBQUERY_DEPTH {
            return err(
                format!(
                    "subqueries used as values are nested too deeply (more than \
                     {MAX_VALUE_SUBQUERY_DEPTH} levels); nest them in FROM instead"
                ),
                span,
            );
        }
        self.value_subqueries.set(depth + 1);
        let plan = self.query(q, ctes);
        self.value_subqueries.set(depth);
        plan
    }

    fn query(&self, q: &ast::Query, ctes: &Ctes) -> PResult<LogicalPlan> {
        match q {
            ast::Query::Select(s) => self.select(s, ctes),
            ast::Query::SetOp { op, left, right } => {
                let l = self.query(left, ctes)?;
                let r = self.query(right, ctes)?;
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

    fn table_plan(
        &self,
        t: &ast::TableExpr,
        ctes: &Ctes,
        lazy: &HashSet<String>,
    ) -> PResult<(LogicalPlan, Relation)> {
        if t.sample.is_some() {
            // Sampling would change answers silently; refuse rather than ignore.
            return err(
                "SAMPLE is not supported: hedgerow reads every row (remove SAMPLE)",
                t.span,
            );
        }
        let mut props = None;
        let (plan, alias, events) = match &t.source {
            ast::TableSource::Function { name, .. } => {
                return err(
                    format!(
                        "Table functions are not allowed: `{name}(…)`. Query one of: {}",
                        TABLES.join(", ")
                    ),
                    t.span,
                );
            }
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
                    let plan = self.stored_table(&parts[0], t.span)?;
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
    fn stored_table(&self, name: &str, span: Span) -> PResult<LogicalPlan> {
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
                exprs.push(
                    super::overrides::override_person_id(cast(c, DataType::Utf8), map)
                        .alias(f.name()),
                );
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
                DataType::Utf8View | DataType::LargeUtf8 => cast(c, DataType::Utf8).alias(f.name()),
                _ => c.alias(f.name()),
            };
            exprs.push(e);
        }
        LogicalPlanBuilder::from(scan)
            .project(exprs)
            .and_then(|b| b.build())
            .map_err(df)
    }

    fn add_lazy_join(
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
            "person" => ("persons", c("person_id").eq(cast(r("id"), DataType::Utf8))),
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

    fn from(
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
            if matches!(j.strictness, Some(ast::JoinStrictness::Asof)) {
                return err("ASOF JOIN is not supported", j.span);
            }
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
                    // ClickHouse joins match NULL keys to nothing: plain `=` here.
                    let on = self.predicate(on, &scope, true)?;
                    builder.join_on(right, join_type, vec![on])
                }
            }
            .and_then(|b| b.build())
            .map_err(df)?;
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

    fn select(&self, s: &ast::Select, outer: &Ctes) -> PResult<LogicalPlan> {
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

        let (mut plan, relations) = match &s.from {
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

        // ARRAY JOIN
        if let Some(aj) = &s.array_join {
            plan = self.array_join_clause(plan, aj, &mut scope)?;
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
            let p = self.predicate(w, &scope, false)?;
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
            plan = self.array_join_calls(plan, ajs, &mut scope)?;
        }

        // Select list, with stars expanded.
        let mut items: Vec<(Expr, String)> = Vec::new();
        for c in &s.columns {
            match &c.kind {
                ExprKind::Star(qual) => {
                    for r in &scope.relations {
                        if let Some(q) = qual
                            && q.join(".") != r.alias
                        {
                            continue;
                        }
                        for col in &r.visible {
                            items.push((
                                Expr::Column(Column::new(
                                    Some(TableReference::bare(r.alias.clone())),
                                    col,
                                )),
                                col.clone(),
                            ));
                        }
                    }
                    if let Some(q) = qual
                        && !scope.relations.iter().any(|r| r.alias == q.join("."))
                    {
                        return err(
                            format!("Unknown table `{}` in `{}.*`", q.join("."), q.join(".")),
                            c.span,
                        );
                    }
                }
                _ => {
                    let e = self.expr(c, &scope)?;
                    items.push((e, column_name(c, self.ctx.print)));
                }
            }
        }
        if items.is_empty() {
            return err("SELECT needs at least one column", s.span);
        }

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
                        self.expr(g, &scope)
                    }
                })
                .collect::<PResult<_>>()?,
            None => vec![],
        };
        let having = s
            .having
            .as_ref()
            .map(|h| self.predicate(h, &scope, false))
            .transpose()?;
        let qualify = s
            .qualify
            .as_ref()
            .map(|h| self.predicate(h, &scope, false))
            .transpose()?;
        let mut limit_by_exprs: Vec<Expr> = match &s.limit_by {
            Some(lb) => lb
                .by
                .iter()
                .map(|b| self.expr(b, &scope))
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
                    None => self.expr(&o.expr, &scope)?,
                };
                Ok((e, o.desc, o.nulls_first))
            })
            .collect::<PResult<_>>()?;

        // Aggregation.
        let mut all: Vec<&Expr> = items.iter().map(|(e, _)| e).collect();
        all.extend(having.iter());
        all.extend(qualify.iter());
        all.extend(order.iter().map(|(e, _, _)| e));
        all.extend(limit_by_exprs.iter());
        let aggs = find_aggregate_exprs(all.iter().copied());
        let mut items = items;
        let mut having = having;
        let mut qualify = qualify;
        let mut order = order;
        if !aggs.is_empty() || !group.is_empty() {
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
            let rebase = |e: Expr| -> PResult<Expr> { rebase(e, &map, &out) };
            items = items
                .into_iter()
                .map(|(e, n)| Ok((rebase(e)?, n)))
                .collect::<PResult<_>>()?;
            having = having.map(rebase).transpose()?;
            qualify = qualify.map(rebase).transpose()?;
            order = order
                .into_iter()
                .map(|(e, d, n)| Ok((rebase(e)?, d, n)))
                .collect::<PResult<_>>()?;
            limit_by_exprs = limit_by_exprs
                .into_iter()
                .map(rebase)
                .collect::<PResult<_>>()?;
            plan = agg_plan;
            if let Some(h) = having.take() {
                plan = LogicalPlanBuilder::from(plan)
                    .having(h)
                    .and_then(|b| b.build())
                    .map_err(df)?;
            }
        } else if having.is_some() {
            return err("HAVING needs GROUP BY or an aggregate", s.span);
        }

        // Window functions.
        let mut all: Vec<&Expr> = items.iter().map(|(e, _)| e).collect();
        all.extend(qualify.iter());
        all.extend(order.iter().map(|(e, _, _)| e));
        let windows = find_window_exprs(all.iter().copied());
        if !windows.is_empty() {
            let wplan = LogicalPlanBuilder::window_plan(plan, windows.clone()).map_err(df)?;
            let map: Vec<(Expr, Expr)> = windows
                .iter()
                .map(|w| {
                    let name = w.schema_name().to_string();
                    (w.clone(), Expr::Column(Column::from_name(name)))
                })
                .collect();
            let rebase = |e: Expr| -> PResult<Expr> { replace_exprs(e, &map) };
            items = items
                .into_iter()
                .map(|(e, n)| Ok((rebase(e)?, n)))
                .collect::<PResult<_>>()?;
            qualify = qualify.map(rebase).transpose()?;
            order = order
                .into_iter()
                .map(|(e, d, n)| Ok((rebase(e)?, d, n)))
                .collect::<PResult<_>>()?;
            limit_by_exprs = limit_by_exprs
                .into_iter()
                .map(rebase)
                .collect::<PResult<_>>()?;
            plan = wplan;
        }
        if let Some(q) = qualify {
            plan = LogicalPlanBuilder::from(plan)
                .filter(q)
                .and_then(|b| b.build())
                .map_err(df)?;
        }

        // Output names must be unique.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (_, n) in items.iter_mut() {
            let k = seen.entry(n.clone()).or_insert(0);
            if *k > 0 {
                *n = format!("{n}_{k}");
            }
            *k += 1;
        }

        let sorts: Vec<Sort> = order
            .iter()
            .map(|(e, desc, nf)| Sort::new(e.clone(), !desc, nf.unwrap_or(false)))
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
                    .map(|so| {
                        items
                            .iter()
                            .position(|(e, _)| *e == so.expr)
                            .map(|i| {
                                Sort::new(
                                    Expr::Column(Column::from_name(items[i].1.clone())),
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
            // Sort on the output when every key is a selected column (the sort is then the
            // last step, after any window); otherwise below the projection.
            let on_output = output_sorts(&items, &sorts);
            let sort_after = !sorts.is_empty() && on_output.len() == sorts.len();
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
            plan = self.limit_by(plan, lb, &items, &sorts, &scope)?;
        }

        // LIMIT / OFFSET
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
            plan = self.with_ties(plan, n + offset, &items, &sorts)?;
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

    fn array_join_clause(
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
            exprs.push(v.alias(name.clone()));
            names.push(name);
        }
        let mut b = LogicalPlanBuilder::from(plan).project(exprs).map_err(df)?;
        for n in &names {
            b = b.unnest_column(Column::from_name(n.clone())).map_err(df)?;
        }
        let plan = b.build().map_err(df)?;
        scope.extra.extend(names);
        scope.schema = plan.schema().clone();
        Ok(plan)
    }

    fn array_join_calls(
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
            exprs.push(v.alias(name.clone()));
            scope.array_joins.push((call.clone(), name.clone()));
            names.push(name);
        }
        let mut b = LogicalPlanBuilder::from(plan).project(exprs).map_err(df)?;
        for n in &names {
            b = b.unnest_column(Column::from_name(n.clone())).map_err(df)?;
        }
        let plan = b.build().map_err(df)?;
        scope.schema = plan.schema().clone();
        Ok(plan)
    }

    fn limit_by(
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

    fn with_ties(
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

    /// A condition in a filtering position (WHERE, HAVING, ON, QUALIFY): a NULL result and
    /// false mean the same there, so comparisons keep their plain form (which prunes files
    /// and row groups); elsewhere they are null-safe.
    fn predicate(&self, e: &ast::Expr, scope: &Scope<'_>, join: bool) -> PResult<Expr> {
        match &e.kind {
            ExprKind::Binary {
                op: BinaryOp::And,
                left,
                right,
            } => Ok(self
                .predicate(left, scope, join)?
                .and(self.predicate(right, scope, join)?)),
            ExprKind::Binary {
                op: BinaryOp::Or,
                left,
                right,
            } => Ok(self
                .predicate(left, scope, join)?
                .or(self.predicate(right, scope, join)?)),
            ExprKind::Binary { op, left, right }
                if matches!(
                    op,
                    BinaryOp::Eq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq
                ) =>
            {
                let (l, r) = self.comparison_operands(left, right, scope)?;
                // `NULL = NULL` is true in HogQL; outside joins keep that when either side is
                // a NULL literal.
                if !join
                    && *op == BinaryOp::Eq
                    && (is_null_lit(&l)
                        || is_null_lit(&r)
                        || (l.nullable(&scope.schema).map_err(df)?
                            && r.nullable(&scope.schema).map_err(df)?))
                {
                    return self.expr(e, scope);
                }
                let cmp = Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(l),
                    binary_operator(*op),
                    Box::new(r),
                ));
                Ok(match self.implied_range(*op, left, right, scope)? {
                    Some(range) => cmp.and(range),
                    None => cmp,
                })
            }
            ExprKind::Alias { expr, name } => {
                scope.expanding.borrow_mut().push(name.clone());
                let r = self.predicate(expr, scope, join);
                scope.expanding.borrow_mut().pop();
                r
            }
            ExprKind::In {
                expr,
                list: ast::InList::Subquery(q),
                negated,
            } => {
                // A filter takes the subquery as a semi/anti join.
                let (v, plan) = self.in_subquery_operands(expr, q, scope)?;
                let nullable = v.nullable(&scope.schema).map_err(df)?;
                Ok(if *negated {
                    let not_in = datafusion::logical_expr::expr_fn::not_in_subquery(
                        v.clone(),
                        Arc::new(plan),
                    );
                    if nullable {
                        v.is_null().or(not_in)
                    } else {
                        not_in
                    }
                } else {
                    datafusion::logical_expr::expr_fn::in_subquery(v, Arc::new(plan))
                })
            }
            _ => {
                let v = self.expr(e, scope)?;
                to_bool(v, &scope.schema)
            }
        }
    }

    /// `toDate(t) >= '2024-03-01'` (also `toStartOfDay`, any comparison, either side) says
    /// `t >= '2024-03-01 00:00:00'`: that range on the DateTime column itself is added to the
    /// filter so files and row groups are pruned by `t`'s statistics; the original comparison
    /// stays, so the answer is unchanged. Only for a date literal (a day boundary) and a
    /// DateTime or Date argument.
    fn implied_range(
        &self,
        op: BinaryOp,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
    ) -> PResult<Option<Expr>> {
        let flip = |op: BinaryOp| match op {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            o => o,
        };
        let (call, lit_side, op) = match (&left.kind, &right.kind) {
            (ExprKind::Call { .. }, ExprKind::Literal(Literal::String(_))) => (left, right, op),
            (ExprKind::Literal(Literal::String(_)), ExprKind::Call { .. }) => {
                (right, left, flip(op))
            }
            _ => return Ok(None),
        };
        let (
            ExprKind::Call {
                name,
                params: None,
                args,
                distinct: false,
                over: None,
            },
            ExprKind::Literal(Literal::String(day)),
        ) = (&call.kind, &lit_side.kind)
        else {
            return Ok(None);
        };
        if !matches!(name.as_str(), "toDate" | "toStartOfDay") || args.len() != 1 {
            return Ok(None);
        }
        let day = day.trim();
        let day = day.strip_suffix(" 00:00:00").unwrap_or(day);
        let Ok(d) = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d") else {
            return Ok(None);
        };
        let arg = &args[0];
        let t = self.expr(arg, scope)?.get_type(&scope.schema).map_err(df)?;
        if !matches!(t, DataType::Timestamp(..) | DataType::Date32) {
            return Ok(None);
        }
        let bound = |op: BinaryOp, d: chrono::NaiveDate| -> PResult<Expr> {
            let at = ast::Expr {
                kind: ExprKind::Literal(Literal::String(format!("{d} 00:00:00"))),
                span: lit_side.span,
            };
            let (l, r) = self.comparison_operands(arg, &at, scope)?;
            Ok(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(l),
                binary_operator(op),
                Box::new(r),
            )))
        };
        let Some(next) = d.succ_opt() else {
            return Ok(None);
        };
        Ok(Some(match op {
            BinaryOp::GtEq => bound(BinaryOp::GtEq, d)?,
            BinaryOp::Gt => bound(BinaryOp::GtEq, next)?,
            BinaryOp::Lt => bound(BinaryOp::Lt, d)?,
            BinaryOp::LtEq => bound(BinaryOp::Lt, next)?,
            BinaryOp::Eq => bound(BinaryOp::GtEq, d)?.and(bound(BinaryOp::Lt, next)?),
            _ => return Ok(None),
        }))
    }

    fn comparison_operands(
        &self,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
    ) -> PResult<(Expr, Expr)> {
        let l = self.expr(left, scope)?;
        let r = self.expr(right, scope)?;
        let lt = l.get_type(&scope.schema).map_err(df)?;
        let rt = r.get_type(&scope.schema).map_err(df)?;
        // A string compared with a DateTime is read in the project's time zone.
        let l = self.coerce_literal_to(&l, &rt)?.unwrap_or(l);
        let r = self.coerce_literal_to(&r, &lt)?.unwrap_or(r);
        Ok((l, r))
    }

    /// A string literal compared with a date or DateTime becomes one (in the project zone);
    /// with a Bool or a number, it becomes that.
    fn coerce_literal_to(&self, e: &Expr, other: &DataType) -> PResult<Option<Expr>> {
        let Expr::Literal(ScalarValue::Utf8(Some(s)), _) = e else {
            return Ok(None);
        };
        match other {
            DataType::Timestamp(unit, tz) => {
                let tz_name = tz.as_deref().unwrap_or(&self.ctx.timezone);
                let Some(instant) = parse_datetime_in(s, tz_name) else {
                    return Ok(None);
                };
                let v = match unit {
                    TimeUnit::Second => {
                        ScalarValue::TimestampSecond(Some(instant.timestamp()), tz.clone())
                    }
                    TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(
                        Some(instant.timestamp_millis()),
                        tz.clone(),
                    ),
                    TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(
                        Some(instant.timestamp_micros()),
                        tz.clone(),
                    ),
                    TimeUnit::Nanosecond => {
                        ScalarValue::TimestampNanosecond(instant.timestamp_nanos_opt(), tz.clone())
                    }
                };
                Ok(Some(Expr::Literal(v, None)))
            }
            DataType::Date32 => {
                let Ok(d) = chrono::NaiveDate::parse_from_str(s.get(..10).unwrap_or(s), "%Y-%m-%d")
                else {
                    return Ok(None);
                };
                let days =
                    (d - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days();
                Ok(Some(Expr::Literal(
                    ScalarValue::Date32(Some(days as i32)),
                    None,
                )))
            }
            // As ClickHouse reads a string as a Bool (typed boolean properties compare with
            // 'true').
            DataType::Boolean => Ok(match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" | "t" | "y" | "enable" => Some(lit(true)),
                "false" | "0" | "no" | "off" | "f" | "n" | "disable" => Some(lit(false)),
                _ => None,
            }),
            // A number in a string compared with a number is that number (typed numeric
            // properties compare with '49').
            t if t.is_integer() => Ok(s.trim().parse::<i64>().ok().map(lit)),
            t if t.is_floating() => Ok(s.trim().parse::<f64>().ok().map(lit)),
            _ => Ok(None),
        }
    }

    fn expr(&self, e: &ast::Expr, scope: &Scope<'_>) -> PResult<Expr> {
        match &e.kind {
            ExprKind::Literal(l) => Ok(literal(l)),
            ExprKind::Field(parts) => self.field(parts, e.span, scope),
            ExprKind::Star(_) => err(
                "`*` is only allowed in the select list and in count(*)",
                e.span,
            ),
            ExprKind::Index { base, index } => {
                // properties['a']['b'] and properties.a['b']: one JSON path.
                let mut keys = Vec::new();
                let mut cur: &ast::Expr = e;
                while let ExprKind::Index { base, index } = &cur.kind
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
            ExprKind::TupleElement { base, index } => {
                let b = self.expr(base, scope)?;
                Ok(core_fn::get_field(
                    b,
                    format!("c{}", index.saturating_sub(1)),
                ))
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
                    UnaryOp::Neg => Expr::Negative(Box::new(v)),
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
                let mut b = match operand {
                    Some(o) => {
                        let o = self.expr(o, scope)?;
                        datafusion::logical_expr::case(o)
                    }
                    None => {
                        let (c, v) = whens
                            .first()
                            .ok_or_else(|| PlanError::new("CASE needs WHEN", Some(e.span)))?;
                        let c = self.predicate(c, scope, false)?;
                        let v = self.expr(v, scope)?;
                        let mut b = when(c, v);
                        for (c, v) in &whens[1..] {
                            b.when(self.predicate(c, scope, false)?, self.expr(v, scope)?);
                        }
                        return match else_ {
                            Some(x) => b.otherwise(self.expr(x, scope)?),
                            None => b.end(),
                        }
                        .map_err(df);
                    }
                };
                for (c, v) in whens {
                    b.when(self.expr(c, scope)?, self.expr(v, scope)?);
                }
                match else_ {
                    Some(x) => b.otherwise(self.expr(x, scope)?),
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
                if vt == DataType::Utf8 && matches!(t, DataType::Timestamp(..)) {
                    return self.call_translated(
                        "toDateTime",
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
                when(c, self.expr(then, scope)?)
                    .otherwise(self.expr(else_, scope)?)
                    .map_err(df)
            }
            ExprKind::Array(items) => {
                let items = items
                    .iter()
                    .map(|i| self.expr(i, scope))
                    .collect::<PResult<Vec<_>>>()?;
                Ok(datafusion::functions_nested::expr_fn::make_array(items))
            }
            ExprKind::Tuple(items) => {
                let mut args = Vec::new();
                for (i, it) in items.iter().enumerate() {
                    args.push(lit(format!("c{i}")));
                    args.push(self.expr(it, scope)?);
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
                None => err(
                    format!("Placeholder {{{name}}} has no value in `values`"),
                    e.span,
                ),
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
        }
    }

    fn parse_type(&self, ty: &str, span: Span) -> PResult<DataType> {
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
            "UUID" => DataType::Utf8,
            _ => return err(format!("Unknown type `{t}` in CAST"), span),
        })
    }

    fn binary(
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
                if !ln && !rn {
                    return Ok(Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(l),
                        binary_operator(op),
                        Box::new(r),
                    )));
                }
                Ok(match op {
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
                Ok(core_fn::coalesce(vec![l, r]))
            }
            Like | NotLike | ILike | NotILike => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                let negated = matches!(op, NotLike | NotILike);
                let ci = matches!(op, ILike | NotILike);
                let like = Expr::Like(datafusion::logical_expr::Like::new(
                    negated,
                    Box::new(l),
                    Box::new(r),
                    None,
                    ci,
                ));
                Ok(null_false(like))
            }
            Regex | NotRegex | IRegex | NotIRegex => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                let o = match op {
                    Regex => Operator::RegexMatch,
                    NotRegex => Operator::RegexNotMatch,
                    IRegex => Operator::RegexIMatch,
                    _ => Operator::RegexNotIMatch,
                };
                Ok(null_false(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(l),
                    o,
                    Box::new(r),
                ))))
            }
        }
    }

    fn in_expr(
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
            ast::InList::Expr(e) => {
                if let ExprKind::Field(p) = &e.kind
                    && p.len() == 1
                    && let Some(q) = scope.ctes.query(&p[0])
                {
                    let plan = self.value_subquery(q, scope.ctes, e.span)?;
                    datafusion::logical_expr::expr_fn::in_subquery(v.clone(), Arc::new(plan))
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
    fn in_subquery_operands(
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
        Ok((self.expr(lhs, scope)?, plan))
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        whole: &ast::Expr,
        name: &str,
        params: Option<&[ast::Expr]>,
        args: &[ast::Expr],
        distinct: bool,
        over: Option<&ast::Over>,
        scope: &Scope<'_>,
    ) -> PResult<Expr> {
        // arrayJoin was computed before grouping.
        if name == "arrayJoin" {
            return scope
                .array_joins
                .iter()
                .find(|(e, _)| e == whole)
                .map(|(_, c)| Expr::Column(Column::from_name(c.clone())))
                .ok_or_else(|| {
                    PlanError::new(
                        "arrayJoin is only supported in the SELECT list",
                        Some(whole.span),
                    )
                });
        }
        // Operator spellings.
        let binop = match name {
            "equals" => Some(BinaryOp::Eq),
            "notEquals" => Some(BinaryOp::NotEq),
            "less" => Some(BinaryOp::Lt),
            "lessOrEquals" => Some(BinaryOp::LtEq),
            "greater" => Some(BinaryOp::Gt),
            "greaterOrEquals" => Some(BinaryOp::GtEq),
            "plus" => Some(BinaryOp::Add),
            "minus" => Some(BinaryOp::Sub),
            "multiply" => Some(BinaryOp::Mul),
            "divide" => Some(BinaryOp::Div),
            _ => None,
        };
        if let Some(op) = binop {
            if args.len() != 2 {
                return err(
                    format!("Function `{name}` takes 2 arguments, got {}", args.len()),
                    whole.span,
                );
            }
            return self.binary(op, &args[0], &args[1], scope, whole.span);
        }
        match name {
            "and" | "or" if args.len() >= 2 => {
                let mut it = args
                    .iter()
                    .map(|a| self.expr(a, scope).and_then(|v| to_bool(v, &scope.schema)));
                let first = it.next().expect("two args")?;
                return it.try_fold(first, |acc, x| {
                    Ok(if name == "and" {
                        acc.and(x?)
                    } else {
                        acc.or(x?)
                    })
                });
            }
            "not" if args.len() == 1 => {
                return Ok(Expr::Not(Box::new(to_bool(
                    self.expr(&args[0], scope)?,
                    &scope.schema,
                )?)));
            }
            "tuple" => {
                return self.expr(
                    &ast::Expr::new(ExprKind::Tuple(args.to_vec()), whole.span),
                    scope,
                );
            }
            "in" | "notIn" if args.len() == 2 => {
                let list = ast::InList::Expr(Box::new(args[1].clone()));
                return self.in_expr(&args[0], &list, name == "notIn", scope);
            }
            _ => {}
        }
        let info = functions::lookup(name);
        if let Some(info) = info
            && info.kind == FnKind::Aggregate
            && over.is_none()
        {
            for a in args {
                if let Some((inner, span)) = find_aggregate_call(a) {
                    return err(
                        format!(
                            "Aggregation `{inner}` cannot be nested inside another aggregation `{name}`"
                        ),
                        span,
                    );
                }
            }
        }
        if info.is_some_and(|i| i.kind == FnKind::Window) && over.is_none() {
            return err(
                format!("Window function `{name}` needs OVER (…)"),
                whole.span,
            );
        }
        let params = params
            .unwrap_or(&[])
            .iter()
            .map(|p| self.expr(p, scope))
            .collect::<PResult<Vec<_>>>()?;
        // Arguments: plain ones first, then lambdas typed by the arrays beside them.
        let mut translated: Vec<Option<Arg>> = Vec::with_capacity(args.len());
        let mut array_types = Vec::new();
        for a in args {
            match &a.kind {
                ExprKind::Lambda { .. } => translated.push(None),
                ExprKind::Star(None) if args.len() == 1 => {}
                _ => {
                    let v = self.expr(a, scope)?;
                    let t = v.get_type(&scope.schema).map_err(df)?;
                    if let DataType::List(f) | DataType::LargeList(f) = &t {
                        array_types.push(f.data_type().clone());
                    } else {
                        array_types.push(t);
                    }
                    translated.push(Some(Arg::Expr(v)));
                }
            }
        }
        let mut final_args = Vec::with_capacity(translated.len());
        for (a, t) in args.iter().zip(
            translated
                .into_iter()
                .chain(std::iter::repeat_with(|| None)),
        ) {
            match (&a.kind, t) {
                (_, Some(x)) => final_args.push(x),
                (ExprKind::Lambda { params, body }, None) => {
                    let typed: Vec<(String, DataType)> = params
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            (
                                p.clone(),
                                array_types.get(i).cloned().unwrap_or(DataType::Null),
                            )
                        })
                        .collect();
                    let fields: Vec<datafusion::arrow::datatypes::Field> = typed
                        .iter()
                        .map(|(n, t)| datafusion::arrow::datatypes::Field::new(n, t.clone(), true))
                        .collect();
                    let lschema = Arc::new(
                        DFSchema::try_from(datafusion::arrow::datatypes::Schema::new(fields))
                            .map_err(df)?,
                    );
                    let inner = Scope {
                        relations: vec![],
                        extra: HashSet::new(),
                        aliases: HashMap::new(),
                        expanding: Default::default(),
                        lambda: params.clone(),
                        ctes: scope.ctes,
                        schema: lschema,
                        array_joins: vec![],
                        windows: scope.windows,
                    };
                    let body = self.expr(body, &inner)?;
                    final_args.push(Arg::Lambda {
                        params: typed,
                        body,
                    });
                }
                _ => {}
            }
        }
        let v = self.call_translated(name, params, final_args, distinct, scope, whole.span)?;
        match over {
            None => Ok(v),
            Some(o) => {
                let spec = self.window_spec(o, scope.windows, whole.span)?;
                let partition = spec
                    .partition_by
                    .iter()
                    .map(|p| self.expr(p, scope))
                    .collect::<PResult<Vec<_>>>()?;
                let order = spec
                    .order_by
                    .iter()
                    .map(|o| {
                        Ok(Sort::new(
                            self.expr(&o.expr, scope)?,
                            !o.desc,
                            o.nulls_first.unwrap_or(o.desc),
                        ))
                    })
                    .collect::<PResult<Vec<_>>>()?;
                let frame = spec.frame.as_ref().map(|f| self.frame(f)).transpose()?;
                to_window(v, partition, order, frame).map_err(df)
            }
        }
    }

    /// The window an `OVER` means: inline, a name from the WINDOW clause, or a named window
    /// extended (`OVER (w ORDER BY …)`, SQL's rules: the base's PARTITION BY, its ORDER BY
    /// unless it has none, the frame of the extension when it gives one).
    fn window_spec(
        &self,
        o: &ast::Over,
        windows: &[(String, ast::WindowSpec)],
        span: Span,
    ) -> PResult<ast::WindowSpec> {
        let named = |name: &str| {
            windows
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, w)| w.clone())
                .ok_or_else(|| {
                    PlanError::new(
                        format!("Window `{name}` is not defined in this SELECT's WINDOW clause"),
                        Some(span),
                    )
                })
        };
        let mut spec = match o {
            ast::Over::Named(name) => ast::WindowSpec {
                base: Some(name.clone()),
                ..Default::default()
            },
            ast::Over::Spec(s) => s.clone(),
        };
        // Resolve the chain of bases (bounded: a window may not refer to itself).
        for _ in 0..=windows.len() {
            let Some(base_name) = spec.base.take() else {
                return Ok(spec);
            };
            let base = named(&base_name)?;
            if !spec.partition_by.is_empty() {
                return err(
                    format!("A window based on `{base_name}` cannot add PARTITION BY"),
                    span,
                );
            }
            if !spec.order_by.is_empty() && !base.order_by.is_empty() {
                return err(
                    format!("Window `{base_name}` already has an ORDER BY"),
                    span,
                );
            }
            spec = ast::WindowSpec {
                base: base.base,
                partition_by: base.partition_by,
                order_by: if spec.order_by.is_empty() {
                    base.order_by
                } else {
                    spec.order_by
                },
                frame: spec.frame.or(base.frame),
            };
        }
        err("Named windows refer to each other in a cycle", span)
    }

    fn frame(&self, f: &ast::WindowFrame) -> PResult<WindowFrame> {
        let units = match f.units {
            ast::FrameUnits::Rows => WindowFrameUnits::Rows,
            ast::FrameUnits::Range => WindowFrameUnits::Range,
        };
        let bound = |b: &ast::FrameBound| -> PResult<WindowFrameBound> {
            Ok(match b {
                ast::FrameBound::UnboundedPreceding => {
                    WindowFrameBound::Preceding(ScalarValue::UInt64(None))
                }
                ast::FrameBound::UnboundedFollowing => {
                    WindowFrameBound::Following(ScalarValue::UInt64(None))
                }
                ast::FrameBound::CurrentRow => WindowFrameBound::CurrentRow,
                ast::FrameBound::Preceding(e) => WindowFrameBound::Preceding(ScalarValue::UInt64(
                    Some(const_usize(e, "a frame bound")? as u64),
                )),
                ast::FrameBound::Following(e) => WindowFrameBound::Following(ScalarValue::UInt64(
                    Some(const_usize(e, "a frame bound")? as u64),
                )),
            })
        };
        let start = bound(&f.start)?;
        let end = match &f.end {
            Some(e) => bound(e)?,
            None => WindowFrameBound::CurrentRow,
        };
        Ok(WindowFrame::new_bounds(units, start, end))
    }

    fn call_translated(
        &self,
        name: &str,
        params: Vec<Expr>,
        args: Vec<Arg>,
        distinct: bool,
        scope: &Scope<'_>,
        span: Span,
    ) -> PResult<Expr> {
        let fctx = self.fn_ctx(&scope.schema);
        functions::translate(name, params, args, distinct, &fctx)
            .map_err(|e| PlanError::new(e.to_string(), Some(span)))
    }

    // ---------------------------------------------------------------------------------
    // Names
    // ---------------------------------------------------------------------------------

    /// If `parts` names a JSON column plus a path (`properties.a.b`), that column and path.
    fn json_base(
        &self,
        parts: &[String],
        scope: &Scope<'_>,
    ) -> PResult<Option<(Expr, Vec<String>)>> {
        let (rel, rest) = match self.relation_of(parts, scope) {
            Some(x) => x,
            None => return Ok(None),
        };
        if rest.is_empty() {
            return Ok(None);
        }
        let q = Some(TableReference::bare(rel.alias.clone()));
        if rel.events
            && rest[0] == "person"
            && rest.get(1).map(String::as_str) == Some("properties")
            && !self.ctx.persons_mode.joined_properties()
        {
            return Ok(Some((
                Expr::Column(Column::new(q, "person_properties")),
                rest[2..].to_vec(),
            )));
        }
        if rest[0] == "properties" && rel.columns.contains("properties") {
            return Ok(Some((
                Expr::Column(Column::new(q, "properties")),
                rest[1..].to_vec(),
            )));
        }
        Ok(None)
    }

    /// Which relation `parts` starts in, and the parts after a qualifier.
    fn relation_of<'s>(
        &self,
        parts: &'s [String],
        scope: &'s Scope<'_>,
    ) -> Option<(&'s Relation, &'s [String])> {
        if parts.len() > 1
            && let Some(r) = scope.relations.iter().find(|r| r.alias == parts[0])
        {
            return Some((r, &parts[1..]));
        }
        let first = &parts[0];
        let mut found = scope.relations.iter().filter(|r| {
            r.columns.contains(first) || (r.events && (EVENTS_LAZY_JOINS.contains(&first.as_str())))
        });
        let r = found.next()?;
        Some((r, parts))
    }

    /// `json` at `path`, typed by the project's property definitions.
    fn property(&self, json: Expr, path: &[String], scope: &Scope<'_>) -> PResult<Expr> {
        let Expr::Column(c) = &json else {
            return Ok(super::property::property(json, path));
        };
        let rel = c
            .relation
            .as_ref()
            .and_then(|q| scope.relations.iter().find(|r| r.alias == q.table()));
        let kind = match c.name.as_str() {
            "person_properties" => Some(PropertyKind::Person),
            "properties" => rel.and_then(|r| r.props),
            _ => None,
        };
        // A shredded column answers exactly what reading the JSON would.
        if path.len() == 1
            && c.name == "properties"
            && crate::storage::schema::SHREDDED_PROPERTIES.contains(&path[0].as_str())
        {
            let mat = format!("{}{}", crate::storage::schema::SHREDDED_PREFIX, path[0]);
            if rel.is_some_and(|r| r.columns.contains(&mat)) {
                let col = Expr::Column(Column::new(c.relation.clone(), mat));
                return self.typed_property(col, kind, path, scope);
            }
        }
        self.typed_property(super::property::property(json, path), kind, path, scope)
    }

    /// A property's string value read as its definition's type, as PostHog does: Numeric
    /// through `toFloat`, DateTime through `toDateTime`, Boolean as `'true'` → true,
    /// `'false'` → false, anything else NULL. Only top-level properties have definitions.
    fn typed_property(
        &self,
        value: Expr,
        kind: Option<PropertyKind>,
        path: &[String],
        scope: &Scope<'_>,
    ) -> PResult<Expr> {
        let (Some(kind), [name]) = (kind, path) else {
            return Ok(value);
        };
        let cast_with = |f: &str| {
            functions::translate(
                f,
                vec![],
                vec![Arg::Expr(value.clone())],
                false,
                &self.fn_ctx(&scope.schema),
            )
            .map_err(|e| PlanError::new(e.to_string(), None))
        };
        match self.ctx.catalog.property_type(kind, name) {
            None | Some(PropertyType::String) => Ok(value),
            Some(PropertyType::Numeric) => cast_with("toFloat"),
            Some(PropertyType::DateTime) => cast_with("toDateTime"),
            Some(PropertyType::Boolean) => when(value.clone().eq(lit("true")), lit(true))
                .when(value.eq(lit("false")), lit(false))
                .otherwise(lit(ScalarValue::Boolean(None)))
                .map_err(df),
        }
    }

    fn field(&self, parts: &[String], span: Span, scope: &Scope<'_>) -> PResult<Expr> {
        let first = &parts[0];
        if parts.len() == 1 && scope.lambda.contains(first) {
            return Ok(Expr::Column(Column::from_name(first.clone())));
        }
        if parts.len() == 1 && scope.extra.contains(first) {
            return Ok(Expr::Column(Column::from_name(first.clone())));
        }
        if parts.len() == 1
            && let Some(def) = scope.aliases.get(first)
            && !scope.expanding.borrow().contains(first)
        {
            // An alias that is just the column of the same name is that column.
            let same_column = matches!(&def.kind, ExprKind::Field(p)
                if p.last() == Some(first)
                    && (p.len() == 1 || (p.len() == 2 && scope.relations.iter().any(|r| r.alias == p[0]))));
            if !same_column {
                scope.expanding.borrow_mut().push(first.clone());
                let r = self.expr(def, scope);
                scope.expanding.borrow_mut().pop();
                return r;
            }
        }
        if let Some((json, path)) = self.json_base(parts, scope)? {
            if path.is_empty() {
                return Ok(json);
            }
            return self.property(json, &path, scope);
        }
        let Some((rel, rest)) = self.relation_of(parts, scope) else {
            return err(self.unknown_field(parts, scope), span);
        };
        let q = Some(TableReference::bare(rel.alias.clone()));
        let name = &rest[0];
        if rel.events && EVENTS_LAZY_JOINS.contains(&name.as_str()) && !rel.columns.contains(name) {
            let Some(sub) = rest.get(1) else {
                return err(
                    format!(
                        "`{name}` is a table; name one of its fields, e.g. `{name}.properties`"
                    ),
                    span,
                );
            };
            // person.id is the event's person_id; the other person fields come from the
            // persons table.
            if name == "person" && sub == "id" {
                return Ok(Expr::Column(Column::new(q, "person_id")));
            }
            let Some(jq) = rel.lazy.get(name.as_str()) else {
                return err(format!("internal: join `{name}` was not prepared"), span);
            };
            let jq = Some(TableReference::bare(jq.clone()));
            if sub == "properties" {
                let json = Expr::Column(Column::new(jq, "properties"));
                if rest.len() <= 2 {
                    return Ok(json);
                }
                let kind = match name.as_str() {
                    "person" => Some(PropertyKind::Person),
                    g => g
                        .strip_prefix("group_")
                        .and_then(|i| i.parse().ok())
                        .map(PropertyKind::Group),
                };
                let value = super::property::property(json, &rest[2..]);
                return self.typed_property(value, kind, &rest[2..], scope);
            }
            if rest.len() > 2 {
                return err(
                    format!("`{}` has no field `{}`", rest[..2].join("."), rest[2]),
                    span,
                );
            }
            let col = Expr::Column(Column::new(jq, sub));
            let joined_schema = &scope.schema;
            if !joined_schema.has_column(
                &col.try_as_col()
                    .cloned()
                    .unwrap_or_else(|| Column::from_name("")),
            ) {
                return err(format!("`{name}` has no field `{sub}`"), span);
            }
            return Ok(col);
        }
        if !rel.columns.contains(name) {
            return err(self.unknown_field(parts, scope), span);
        }
        let col = Expr::Column(Column::new(q, name));
        if rest.len() > 1 {
            return err(
                format!(
                    "`{}` is not an object; cannot read `{}` from it",
                    name,
                    rest[1..].join(".")
                ),
                span,
            );
        }
        Ok(col)
    }

    fn unknown_field(&self, parts: &[String], scope: &Scope<'_>) -> String {
        let name = parts.join(".");
        let mut known: Vec<&str> = scope
            .relations
            .iter()
            .flat_map(|r| r.visible.iter().map(String::as_str))
            .collect();
        known.sort();
        known.dedup();
        if known.is_empty() {
            format!("Unknown field `{name}`")
        } else {
            format!("Unknown field `{name}`. Fields here: {}", known.join(", "))
        }
    }
}

// -------------------------------------------------------------------------------------
// helpers
// -------------------------------------------------------------------------------------

/// Whether each column was nullable before a join: (right side by name, left side by
/// (qualifier, name)).
type Nullability = (HashMap<String, bool>, HashMap<(String, String), bool>);

/// ClickHouse fills the missing side of an outer join with its columns' default values
/// (0, '', …), not NULL, unless a column was Nullable to begin with; PostHog keeps that.
fn join_defaults(
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
fn column_name(e: &ast::Expr, print: &(dyn Fn(&ast::Expr) -> String + Sync)) -> String {
    match &e.kind {
        ExprKind::Alias { name, .. } => name.clone(),
        ExprKind::Field(parts) => parts.last().cloned().unwrap_or_default(),
        _ => print(e),
    }
}

fn literal(l: &Literal) -> Expr {
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

fn json_literal(v: &serde_json::Value, span: Span) -> PResult<Expr> {
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

fn is_null_lit(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v, _) if v.is_null())
}

fn binary_operator(op: BinaryOp) -> Operator {
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

/// NULL → false.
fn null_false(e: Expr) -> Expr {
    // A CASE rather than coalesce(): lambda bodies are evaluated without the optimizer,
    // which is what turns coalesce into something executable.
    Expr::Case(datafusion::logical_expr::Case::new(
        None,
        vec![(Box::new(e.clone().is_null()), Box::new(lit(false)))],
        Some(Box::new(e)),
    ))
}

/// A value used as a condition: booleans as they are, numbers as `!= 0` (ClickHouse's UInt8).
fn to_bool(e: Expr, schema: &DFSchema) -> PResult<Expr> {
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

fn bool_to_int(e: Expr, schema: &DFSchema) -> PResult<Expr> {
    Ok(match e.get_type(schema).map_err(df)? {
        DataType::Boolean => cast(e, DataType::UInt8),
        _ => e,
    })
}

fn const_usize(e: &ast::Expr, what: &str) -> PResult<usize> {
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
fn rebase(e: Expr, map: &[(Expr, Expr)], out: &DFSchema) -> PResult<Expr> {
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

fn replace_exprs(e: Expr, map: &[(Expr, Expr)]) -> PResult<Expr> {
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
fn output_sorts(items: &[(Expr, String)], sorts: &[Sort]) -> Vec<Sort> {
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

fn row_number_expr() -> Expr {
    Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(
            datafusion::functions_window::row_number::row_number_udwf(),
        ),
        vec![],
    ))
}

fn rank_expr() -> Expr {
    Expr::from(WindowFunction::new(
        WindowFunctionDefinition::WindowUDF(datafusion::functions_window::rank::rank_udwf()),
        vec![],
    ))
}

/// Keeps the rows whose number (`f` over the window) is in `(from, to]`; the number column
/// is dropped again.
fn numbered_filter(
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

/// Gives a window expression its OVER clause.
fn window_with(
    e: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    frame: Option<WindowFrame>,
) -> datafusion::error::Result<Expr> {
    use datafusion::logical_expr::ExprFunctionExt;
    let has_order = !order.is_empty();
    let frame =
        frame.unwrap_or_else(|| WindowFrame::new(if has_order { Some(false) } else { None }));
    e.partition_by(partition)
        .order_by(order)
        .window_frame(frame)
        .build()
}

/// Turns the aggregate and window calls in `e` into window functions over the given window.
fn to_window(
    e: Expr,
    partition: Vec<Expr>,
    order: Vec<Sort>,
    frame: Option<WindowFrame>,
) -> datafusion::error::Result<Expr> {
    e.transform_down(|x| match x {
        Expr::AggregateFunction(AggregateFunction { func, params }) => {
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

/// Every expression of a SELECT that may name fields (for finding lazy joins).
fn select_exprs(s: &ast::Select) -> Vec<&ast::Expr> {
    let mut v: Vec<&ast::Expr> = s.columns.iter().collect();
    v.extend(s.prewhere.iter());
    v.extend(s.where_.iter());
    v.extend(s.having.iter());
    v.extend(s.qualify.iter());
    if let Some(g) = &s.group_by {
        v.extend(g.exprs.iter());
    }
    v.extend(s.order_by.iter().map(|o| &o.expr));
    if let Some(aj) = &s.array_join {
        v.extend(aj.exprs.iter());
    }
    if let Some(f) = &s.from {
        for j in &f.joins {
            if let Some(ast::JoinConstraint::On(e)) = &j.constraint {
                v.push(e);
            }
        }
    }
    for c in &s.with {
        if let ast::Cte::Expr { expr, .. } = c {
            v.push(expr);
        }
    }
    v
}

/// Calls `f` on `e` and every expression below it (not into subqueries).
fn walk<'a>(e: &'a ast::Expr, f: &mut dyn FnMut(&'a ast::Expr)) {
    f(e);
    let mut go = |x: &'a ast::Expr| walk(x, f);
    match &e.kind {
        ExprKind::Index { base, index } => {
            go(base);
            go(index);
        }
        ExprKind::TupleElement { base, .. } => go(base),
        ExprKind::Call {
            params, args, over, ..
        } => {
            for p in params.iter().flatten() {
                go(p);
            }
            for a in args {
                go(a);
            }
            if let Some(ast::Over::Spec(s)) = over {
                for p in &s.partition_by {
                    go(p);
                }
                for o in &s.order_by {
                    go(&o.expr);
                }
            }
        }
        ExprKind::Lambda { body, .. } => go(body),
        ExprKind::Binary { left, right, .. } => {
            go(left);
            go(right);
        }
        ExprKind::Unary { expr, .. }
        | ExprKind::IsNull { expr, .. }
        | ExprKind::Cast { expr, .. }
        | ExprKind::Alias { expr, .. } => go(expr),
        ExprKind::Interval { value, .. } => go(value),
        ExprKind::Between {
            expr, low, high, ..
        } => {
            go(expr);
            go(low);
            go(high);
        }
        ExprKind::In { expr, list, .. } => {
            go(expr);
            match list {
                ast::InList::List(items) => items.iter().for_each(&mut go),
                ast::InList::Expr(x) => go(x),
                ast::InList::Subquery(_) => {}
            }
        }
        ExprKind::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                go(o);
            }
            for (a, b) in whens {
                go(a);
                go(b);
            }
            if let Some(x) = else_ {
                go(x);
            }
        }
        ExprKind::Ternary { cond, then, else_ } => {
            go(cond);
            go(then);
            go(else_);
        }
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter().for_each(go),
        ExprKind::Literal(_)
        | ExprKind::Field(_)
        | ExprKind::Star(_)
        | ExprKind::Placeholder(_)
        | ExprKind::Subquery(_)
        | ExprKind::Exists(_) => {}
    }
}

fn collect_aliases(e: &ast::Expr, out: &mut HashMap<String, ast::Expr>) {
    walk(e, &mut |x| {
        if let ExprKind::Alias { expr, name } = &x.kind {
            out.entry(name.clone()).or_insert_with(|| (**expr).clone());
        }
    });
}

fn collect_lazy(e: &ast::Expr, out: &mut HashSet<String>) {
    walk(e, &mut |x| {
        if let ExprKind::Field(p) = &x.kind {
            // `person.id` is the event's own column and `person.properties` its snapshot
            // (unless the persons mode joins): they are marked apart from the join.
            let key = |name: &str, next: Option<&String>| match (name, next.map(String::as_str)) {
                ("person", Some("id")) => None,
                ("person", Some("properties")) => Some("person.properties".to_string()),
                _ => Some(name.to_string()),
            };
            if p.len() > 1
                && EVENTS_LAZY_JOINS.contains(&p[0].as_str())
                && let Some(k) = key(&p[0], p.get(1))
            {
                out.insert(format!(".{k}"));
            }
            if p.len() > 2
                && EVENTS_LAZY_JOINS.contains(&p[1].as_str())
                && let Some(k) = key(&p[1], p.get(2))
            {
                out.insert(format!("{}.{k}", p[0]));
            }
        }
    });
}

fn collect_array_join_calls(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    walk(e, &mut |x| {
        if let ExprKind::Call { name, .. } = &x.kind
            && name == "arrayJoin"
            && !out.contains(x)
        {
            out.push(x.clone());
        }
    });
}

fn is_aggregate_name(name: &str) -> bool {
    functions::lookup(name).is_some_and(|i| i.kind == FnKind::Aggregate)
}

/// The first aggregate call in `e` that has no OVER, with its position.
fn find_aggregate_call(e: &ast::Expr) -> Option<(String, Span)> {
    let mut found = None;
    walk(e, &mut |x| {
        if found.is_none()
            && let ExprKind::Call {
                name, over: None, ..
            } = &x.kind
            && is_aggregate_name(name)
        {
            found = Some((name.clone(), x.span));
        }
    });
    found
}

fn contains_aggregate(e: &ast::Expr) -> bool {
    find_aggregate_call(e).is_some()
}
