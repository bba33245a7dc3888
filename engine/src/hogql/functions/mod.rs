//! HogQL functions on DataFusion: each HogQL function name maps to a DataFusion expression
//! (built-in functions where they give ClickHouse's answer, our own UDFs/UDAFs where not).
//!
//! The planner calls [`lookup`] to learn what a name is (scalar, aggregate, window) and
//! [`translate`] to build the expression from already-translated arguments.
//!
//! `scalar`: date/time, conversion, string, URL, JSON, math, conditional functions and the
//! operator forms (`equals`, `plus`, …). `aggregate`: aggregates (and their `-If` forms),
//! window functions, array functions and lambdas.

mod aggregate;
mod posthog_names;
pub(crate) use aggregate::{frame_value_respect_udaf, frame_value_udaf, sliding_udaf};
pub mod budget;
mod scalar;
pub(crate) use scalar::{
    DateRange, IntOp, agree_numeric, ch_date, city_hash_64_of, elements_nullable, int_arith,
    int_negate, narrow_const_items, null_literal_gives_null, stored_uuid, to_uuid, uuid_order_key,
    uuid_text,
};

use chrono::{DateTime, Utc};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;

/// What kind of function a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    Scalar,
    Aggregate,
    /// Only valid with `OVER`: row_number, rank, lag, …
    Window,
}

/// A function's entry in the registry.
#[derive(Debug, Clone, Copy)]
pub struct FnInfo {
    pub kind: FnKind,
    pub min_args: usize,
    /// None: variadic.
    pub max_args: Option<usize>,
    /// Parameters of parametric aggregates (`quantile(0.9)(x)`): (min, max).
    pub params: (usize, usize),
}

/// First day of the week for `toStartOfWeek` and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeekStart {
    #[default]
    Sunday,
    Monday,
}

/// What translation may need to know about the query it is in.
pub struct FnContext<'a> {
    /// The project's IANA time zone: DateTime functions compute in it, string literals are
    /// read in it.
    pub timezone: &'a str,
    pub week_start: WeekStart,
    /// `now()`/`today()` read this, so a query and its tests see one instant.
    pub now: DateTime<Utc>,
    /// Schema the argument expressions are typed against (`expr.get_type(schema)`).
    pub schema: &'a DFSchema,
}

/// One argument as the planner hands it over.
#[derive(Debug, Clone)]
pub enum Arg {
    Expr(Expr),
    /// `x -> body`: each parameter is bound to the element type of the array argument at the
    /// same position among the non-lambda arguments; `body` refers to parameters as
    /// unqualified columns named after them and to nothing else.
    Lambda {
        params: Vec<(String, DataType)>,
        body: Expr,
    },
}

/// Why a call cannot be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    #[error("Unknown function `{0}`")]
    Unknown(String),
    /// In PostHog's HogQL function list, not (yet) in hedgerow.
    #[error("Function `{0}` is part of PostHog's HogQL but hedgerow does not support it yet")]
    Unsupported(String),
    #[error("{0}")]
    Arity(String),
    #[error("{0}")]
    Invalid(String),
}

/// What `name` is, if HogQL knows it. Names are case-sensitive except the SQL-standard ones
/// (`count`, `sum`, `min`, `max`, `avg`, `if`, `coalesce`, `lower`, `upper`, `concat`,
/// `length`, `round`, …), which match in any case.
pub fn lookup(name: &str) -> Option<FnInfo> {
    scalar::lookup(name).or_else(|| aggregate::lookup(name))
}

/// Builds the expression for `name(params)(args)`. `distinct` is `count(DISTINCT x)`.
/// Aggregates come back as expressions containing `Expr::AggregateFunction` nodes (possibly
/// wrapped, e.g. in a cast); window-only functions as `Expr::WindowFunction` with an empty
/// window, which the planner fills from `OVER`.
pub fn translate(
    name: &str,
    params: Vec<Expr>,
    args: Vec<Arg>,
    distinct: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    if scalar::lookup(name).is_some() {
        scalar::translate(name, params, args, distinct, ctx)
    } else if aggregate::lookup(name).is_some() {
        aggregate::translate(name, params, args, distinct, ctx)
    } else if posthog_names::is_posthog_function(name) {
        Err(FunctionError::Unsupported(name.to_string()))
    } else {
        Err(FunctionError::Unknown(name.to_string()))
    }
}

/// Names the planner answers itself before the function table: operator spellings,
/// `tuple`/`tupleElement`, `in`/`notIn`, `arrayJoin`, and the names of PostHog's list it
/// spells as other calls (`planner/call.rs::posthog_spelling`).
pub const PLANNER_FUNCTIONS: &[&str] = &[
    "equals",
    "notEquals",
    "less",
    "lessOrEquals",
    "greater",
    "greaterOrEquals",
    "plus",
    "minus",
    "multiply",
    "divide",
    "like",
    "ilike",
    "notLike",
    "notILike",
    "and",
    "or",
    "not",
    "xor",
    "tuple",
    "tupleElement",
    "untuple",
    "in",
    "notIn",
    "arrayJoin",
    "btrim",
    "current_date",
    "array_agg",
    "arrayRotateLeft",
    "arrayRotateRight",
    "arrayWithConstant",
    "date_subtract",
    "timezone",
    "string_agg",
    "every",
];

#[cfg(test)]
mod coverage {
    use super::*;

    /// Every name of PostHog's list is known here or refused by name; the counts are
    /// printed (`--nocapture`) for the record.
    #[test]
    fn posthog_function_list_is_known_or_refused_by_name() {
        let all = posthog_names::POSTHOG_FUNCTIONS;
        let missing: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| lookup(n).is_none() && !PLANNER_FUNCTIONS.contains(n))
            .collect();
        for n in &missing {
            let schema = DFSchema::empty();
            let ctx = FnContext {
                timezone: "UTC",
                week_start: WeekStart::Sunday,
                now: chrono::Utc::now(),
                schema: &schema,
            };
            let e = translate(n, vec![], vec![], false, &ctx).unwrap_err();
            assert_eq!(e, FunctionError::Unsupported(n.to_string()));
            assert!(e.to_string().contains(&format!("`{n}`")));
        }
        println!(
            "PostHog's HogQL functions: {} names, {} known to hedgerow, {} refused by name: {}",
            all.len(),
            all.len() - missing.len(),
            missing.len(),
            missing.join(" ")
        );
    }
}
