//! `arrayReduce('agg', arr, …)`: the aggregate `agg` over each row's array elements, as if the
//! elements were rows (several arrays are zipped into the aggregate's arguments and must have
//! equal sizes). ClickHouse answers exactly what the aggregate answers for those rows: its
//! type, NULLs skipped, the type's default (or NULL for a Nullable element type, nan for
//! `avg`) for an empty array.
//!
//! PostHog lets through only the names of its permitted list (`count`, `sum`, `min`, `max`,
//! `avg`, `uniq`, their `-Map` forms and the `-State` forms of those) and refuses any other
//! with its own message; the `-State` forms give ClickHouse's aggregate-function states, a type
//! hedgerow does not have, so they are refused by name.
//!
//! The call becomes a ScalarUDF holding the aggregate's translation over columns standing for
//! the elements (the same translation `agg(x)` gets in a query, casts and defaults included).
//! At invoke time the elements of all rows are one batch; each aggregate node of the
//! translation gets a fresh accumulator per row fed that row's slice, and the expression
//! around the nodes runs once over the per-row answers.

use super::super::{Arg, FnContext};
use super::lambda::{batch, elements, equal_sizes, param_schema, rebase, simplified};
use super::{FunctionError, df_err, type_of};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, new_empty_array};
use datafusion::arrow::compute::{cast, filter};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue, not_impl_err};
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::analyzer::type_coercion::TypeCoercionRewriter;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::create_physical_expr;
use std::sync::Arc;

/// PostHog's permitted names (`HOGQL_PERMITTED_PARAMETRIC_FUNCTIONS`), matched exactly.
const PERMITTED: &[&str] = &[
    "count",
    "countMap",
    "countMapState",
    "sum",
    "sumMap",
    "sumMapState",
    "min",
    "minMap",
    "minMapState",
    "max",
    "maxMap",
    "maxMapState",
    "avg",
    "avgState",
    "avgMap",
    "avgMapState",
    "uniq",
    "uniqState",
    "uniqMap",
    "uniqMapState",
];

pub(super) fn translate(args: Vec<Arg>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let mut args = super::exprs_only("arrayReduce", args)?.into_iter();
    let agg = match args.next() {
        Some(Expr::Literal(ScalarValue::Utf8(Some(s)), _)) => s,
        Some(other) => {
            return Err(FunctionError::Invalid(format!(
                "Expected constant string as first arg in function 'arrayReduce', got {}",
                type_of(&other, ctx)?
            )));
        }
        None => unreachable!("arity checked"),
    };
    if !PERMITTED.contains(&agg.as_str()) {
        return Err(FunctionError::Invalid(format!(
            "Invalid parametric function in 'arrayReduce', '{agg}' is not supported."
        )));
    }
    if agg.ends_with("State") {
        return Err(FunctionError::Invalid(format!(
            "arrayReduce('{agg}', …) gives a ClickHouse aggregate-function state, a type \
             hedgerow does not have"
        )));
    }
    let arrays: Vec<Expr> = args.collect();
    let mut params = Vec::with_capacity(arrays.len());
    let mut fields = Vec::with_capacity(arrays.len());
    for (i, a) in arrays.iter().enumerate() {
        match type_of(a, ctx)? {
            DataType::List(f) => {
                let name = format!("__reduce_{i}");
                // The aggregate of no rows is the type's default for non-Nullable elements
                // and NULL for Nullable ones; an array whose elements hedgerow cannot type
                // (what functions make) counts as ClickHouse's functions make them from
                // non-Nullable values: non-Nullable.
                let nullable = super::super::elements_nullable(a, ctx.schema).unwrap_or(false);
                fields.push(Field::new(&name, f.data_type().clone(), nullable));
                params.push((name, f.data_type().clone()));
            }
            t => {
                return Err(FunctionError::Invalid(format!(
                    "Argument {} for function arrayReduce must be an array but it has type {t}",
                    i + 1
                )));
            }
        }
    }
    let schema = DFSchema::try_from(Schema::new(fields)).map_err(df_err)?;
    let inner = FnContext {
        timezone: ctx.timezone,
        week_start: ctx.week_start,
        now: ctx.now,
        schema: &schema,
    };
    let columns = params
        .iter()
        .map(|(n, _)| Arg::Expr(datafusion::prelude::col(n)))
        .collect();
    let body = super::super::translate(&agg, vec![], columns, false, &inner)?;
    let body = body
        .rewrite(&mut TypeCoercionRewriter::new(&schema))
        .map_err(df_err)?
        .data;
    // The expression around the aggregates runs as a physical expression, as lambda bodies.
    let body = simplified(body, &schema)?;
    let ret = body.get_type(&schema).map_err(df_err)?;
    let udf = ReduceUdf {
        agg,
        params,
        body,
        ret,
        signature: Signature::variadic_any(Volatility::Immutable),
    };
    Ok(ScalarUDF::from(udf).call(arrays))
}

/// `arrayReduce` with its aggregate's translation. Equality and hashing include the body, so
/// DataFusion never merges two calls of different aggregates.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ReduceUdf {
    agg: String,
    params: Vec<(String, DataType)>,
    body: Expr,
    ret: DataType,
    signature: Signature,
}

impl ScalarUDFImpl for ReduceUdf {
    fn name(&self) -> &str {
        "arrayReduce"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.ret.clone())
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        self.schema_name(args)
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        let args: Vec<String> = args.iter().map(|a| a.schema_name().to_string()).collect();
        Ok(format!("arrayReduce('{}', {})", self.agg, args.join(", ")))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let mut lists = vec![];
        for a in &args.args {
            lists.push(rebase(a.to_array(n)?.as_list::<i32>()));
        }
        equal_sizes("arrayReduce", &lists)?;
        let l0 = &lists[0];
        // Every row's elements, one column per array (typed nullable here whatever the plan
        // said: the values are what they are).
        let schema = param_schema(&self.params)?;
        let elements = elements(&lists, &self.params, &schema)?;
        // The aggregate nodes of the body, each replaced by a column of its per-row answers.
        let mut nodes = vec![];
        let outer = self
            .body
            .clone()
            .transform_up(|e| match e {
                Expr::AggregateFunction(f) => {
                    let name = format!("__reduced_{}", nodes.len());
                    nodes.push(f);
                    Ok(Transformed::yes(datafusion::prelude::col(name)))
                }
                other => Ok(Transformed::no(other)),
            })?
            .data;
        let props = ExecutionProps::new();
        let planning = PhysicalPlanningContext::default();
        let mut answers: Vec<ArrayRef> = Vec::with_capacity(nodes.len());
        let mut fields = Vec::with_capacity(nodes.len());
        for (k, node) in nodes.iter().enumerate() {
            let column = reduce_rows(node, &schema, &elements, l0, &props, &planning)?;
            fields.push(Field::new(
                format!("__reduced_{k}"),
                column.data_type().clone(),
                true,
            ));
            answers.push(column);
        }
        let answers_schema = DFSchema::try_from(Schema::new(fields))?;
        let per_row = batch(&answers_schema, answers, n)?;
        let outer = create_physical_expr(&outer, &answers_schema, &props, &planning)?;
        let out = outer.evaluate(&per_row)?.into_array(n)?;
        Ok(ColumnarValue::Array(if out.data_type() == &self.ret {
            out
        } else {
            cast(&out, &self.ret)?
        }))
    }
}

/// One aggregate node over each row's slice of `elements` (rows by `rows`' offsets).
fn reduce_rows(
    node: &AggregateFunction,
    schema: &DFSchema,
    elements: &RecordBatch,
    rows: &datafusion::arrow::array::ListArray,
    props: &ExecutionProps,
    planning: &PhysicalPlanningContext,
) -> Result<ArrayRef> {
    let p = &node.params;
    if !p.order_by.is_empty() {
        return not_impl_err!("arrayReduce of an aggregate with ORDER BY");
    }
    let args = p
        .args
        .iter()
        .map(|a| create_physical_expr(a, schema, props, planning))
        .collect::<Result<Vec<_>>>()?;
    let agg = AggregateExprBuilder::new(Arc::clone(&node.func), args.clone())
        .schema(Arc::new(schema.as_arrow().clone()))
        .alias(node.func.name())
        .with_distinct(p.distinct)
        .with_ignore_nulls(matches!(
            p.null_treatment,
            Some(datafusion::logical_expr::expr::NullTreatment::IgnoreNulls)
        ))
        .build()?;
    let values = args
        .iter()
        .map(|a| a.evaluate(elements)?.into_array(elements.num_rows()))
        .collect::<Result<Vec<_>>>()?;
    let keep = match &p.filter {
        Some(f) => {
            let f = create_physical_expr(f, schema, props, planning)?;
            Some(f.evaluate(elements)?.into_array(elements.num_rows())?)
        }
        None => None,
    };
    let offsets = rows.value_offsets();
    let mut out = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
        let mut slice: Vec<ArrayRef> = values.iter().map(|v| v.slice(start, end - start)).collect();
        if let Some(keep) = &keep {
            let mask = keep.slice(start, end - start);
            slice = slice
                .iter()
                .map(|v| filter(v.as_ref(), mask.as_boolean()))
                .collect::<std::result::Result<_, _>>()?;
        }
        let mut acc = agg.create_accumulator()?;
        acc.update_batch(&slice)?;
        out.push(acc.evaluate()?);
    }
    if out.is_empty() {
        return Ok(new_empty_array(agg.field().data_type()));
    }
    ScalarValue::iter_to_array(out)
}
