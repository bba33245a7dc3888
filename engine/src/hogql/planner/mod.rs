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
use datafusion::logical_expr::utils::find_aggregate_exprs;
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, GroupingSet, LogicalPlan, LogicalPlanBuilder, Operator,
    WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition, cast, lit, when,
};

use crate::propdefs::{PropertyKind, PropertyType};
use crate::storage::layout::{COLUMN_PROPERTIES, Family};

use super::ast::{self, BinaryOp, ExprKind, Literal, Span, UnaryOp};
use super::functions::{self, Arg, FnContext, FnKind, WeekStart};
use super::nesting::Nesting;
use super::schema::{Catalog, EVENTS_COLUMNS, EVENTS_LAZY_JOINS, SESSIONS_QUERY, TABLES};

mod call;
mod expr;
mod exprs;
mod field;
mod frames;
mod hogqlx;
mod ids;
mod predicate;
mod relation;
mod select;
mod walk;

pub use exprs::parse_datetime_in;
use exprs::*;
use walk::*;

/// Why a query cannot be planned. Messages are for the query's author.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub message: String,
    pub span: Option<Span>,
}

impl PlanError {
    pub(crate) fn new(message: impl Into<String>, span: Option<Span>) -> Self {
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
        value_subqueries: std::cell::Cell::new(Nesting::new(MAX_VALUE_SUBQUERY_DEPTH)),
        respect_nulls: std::cell::Cell::new(false),
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
    value_subqueries: std::cell::Cell<Nesting>,
    /// Set while planning the call under `RESPECT NULLS` (read and cleared by [`Planner::call`]).
    respect_nulls: std::cell::Cell<bool>,
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
    pub(super) fn fn_ctx<'s>(&'s self, schema: &'s DFSchema) -> FnContext<'s> {
        FnContext {
            timezone: &self.ctx.timezone,
            week_start: self.ctx.week_start,
            now: self.ctx.now,
            schema,
        }
    }

    /// Plans a subquery used as a value, within [`MAX_VALUE_SUBQUERY_DEPTH`].
    pub(super) fn value_subquery(
        &self,
        q: &ast::Query,
        ctes: &Ctes,
        span: Span,
    ) -> PResult<LogicalPlan> {
        let mut nest = self.value_subqueries.get();
        if nest.enter().is_err() {
            return err(
                format!(
                    "subqueries used as values are nested too deeply (more than \
                     {MAX_VALUE_SUBQUERY_DEPTH} levels); nest them in FROM instead"
                ),
                span,
            );
        }
        self.value_subqueries.set(nest);
        let plan = self.query(q, ctes);
        nest.leave();
        self.value_subqueries.set(nest);
        plan
    }
}
