//! Higher-order array functions with lambdas: `arrayMap(x -> x * 2, arr)`,
//! `arrayFilter((x, y) -> x > y, a, b)`, …
//!
//! Each call becomes a ScalarUDF holding the lambda body. At invoke time the array arguments
//! are flattened, the body is evaluated once on a RecordBatch whose columns are the lambda's
//! parameters (all elements of all rows), and the lists are rebuilt with the original
//! offsets and NULLs. Several arrays are zipped and must have equal sizes in every row
//! (ClickHouse errors otherwise, so do we).
//!
//! Limit: the body may use any scalar expression but only the lambda's own parameters as
//! columns — not columns of the table, nor the parameters of an enclosing lambda.

use super::super::{Arg, FnContext};
use super::arrays;
use super::{FunctionError, default_value, df_err, lit, type_of};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, RecordBatch, Scalar, UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, filter, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, Result, exec_err};
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::analyzer::type_coercion::TypeCoercionRewriter;
use std::sync::Arc;

const HIGHER_ORDER: &[&str] = &[
    "arrayMap",
    "arrayFilter",
    "arrayExists",
    "arrayAll",
    "arrayCount",
    "arrayFirst",
    "arrayLast",
    "arrayFirstIndex",
    "arrayLastIndex",
    "arraySort",
    "arrayReverseSort",
    "arraySum",
    "arrayAvg",
    "arrayMin",
    "arrayMax",
    "arrayFill",
    "arrayReverseFill",
    "arraySplit",
    "arrayReverseSplit",
];

/// Whether `name` is translated here (with a lambda, or for arrayCount/Exists/All without).
pub(super) fn is_higher_order(name: &str, args: &[Arg]) -> bool {
    HIGHER_ORDER.contains(&name)
        && (matches!(args.first(), Some(Arg::Lambda { .. }))
            || matches!(name, "arrayCount" | "arrayExists" | "arrayAll"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Map,
    Filter,
    Exists,
    All,
    Count,
    First,
    Last,
    FirstIndex,
    LastIndex,
    Sort {
        desc: bool,
    },
    /// arrayFill / arrayReverseFill: an element the lambda rejects takes the value of the
    /// one before (after); the first (last) element is kept.
    Fill {
        reverse: bool,
    },
    /// arraySplit / arrayReverseSplit: a new piece starts before (ends after) each element
    /// the lambda accepts, but for the first (last) element.
    Split {
        reverse: bool,
    },
}

pub(super) fn translate(
    name: &str,
    args: Vec<Arg>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let mut args = args.into_iter();
    let (params, body) = match args.next() {
        Some(Arg::Lambda { params, body }) => (params, body),
        Some(Arg::Expr(e)) => {
            // arrayCount(arr) / arrayExists(arr) / arrayAll(arr): the elements themselves.
            let t = type_of(&e, ctx)?;
            let el = match &t {
                DataType::List(f) => f.data_type().clone(),
                t => {
                    return Err(FunctionError::Invalid(format!(
                        "Function `{name}` needs an array, got {t}"
                    )));
                }
            };
            let mut rest = vec![Arg::Expr(e)];
            rest.extend(args);
            let body = datafusion::prelude::col("x");
            return build(name, vec![("x".to_string(), el)], body, rest, ctx);
        }
        None => unreachable!("arity checked"),
    };
    build(name, params, body, args.collect(), ctx)
}

pub(super) fn build(
    name: &str,
    params: Vec<(String, DataType)>,
    body: Expr,
    arrays: Vec<Arg>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let arrays = super::exprs_only(name, arrays)?;
    if arrays.len() != params.len() {
        return Err(FunctionError::Invalid(format!(
            "Lambda of `{name}` takes {} parameters but {} arrays are passed",
            params.len(),
            arrays.len()
        )));
    }
    let mut array_types = vec![];
    for a in &arrays {
        match type_of(a, ctx)? {
            t @ DataType::List(_) => array_types.push(t),
            t => {
                return Err(FunctionError::Invalid(format!(
                    "Function `{name}` needs array arguments, got {t}"
                )));
            }
        }
    }
    let schema = param_schema(&params).map_err(df_err)?;
    let body = body
        .rewrite(&mut TypeCoercionRewriter::new(&schema))
        .map_err(df_err)?
        .data;
    let body_type = body.get_type(&schema).map_err(df_err)?;
    let op = match name {
        "arrayMap" | "arraySum" | "arrayAvg" | "arrayMin" | "arrayMax" => Op::Map,
        "arrayFilter" => Op::Filter,
        "arrayExists" => Op::Exists,
        "arrayAll" => Op::All,
        "arrayCount" => Op::Count,
        "arrayFirst" => Op::First,
        "arrayLast" => Op::Last,
        "arrayFirstIndex" => Op::FirstIndex,
        "arrayLastIndex" => Op::LastIndex,
        "arraySort" => Op::Sort { desc: false },
        "arrayFill" => Op::Fill { reverse: false },
        "arrayReverseFill" => Op::Fill { reverse: true },
        "arraySplit" => Op::Split { reverse: false },
        "arrayReverseSplit" => Op::Split { reverse: true },
        _ => Op::Sort { desc: true },
    };
    let predicate = matches!(
        op,
        Op::Filter
            | Op::Exists
            | Op::All
            | Op::Count
            | Op::First
            | Op::Last
            | Op::FirstIndex
            | Op::LastIndex
            | Op::Fill { .. }
            | Op::Split { .. }
    );
    let body = if predicate && body_type != DataType::Boolean {
        if !(body_type.is_numeric() || body_type == DataType::Null) {
            return Err(FunctionError::Invalid(format!(
                "Lambda of `{name}` must return a Bool or a number, got {body_type}"
            )));
        }
        datafusion::logical_expr::cast(body, DataType::Boolean)
    } else {
        body
    };
    let body = simplified(body, &schema)?;
    let first_elem = match &array_types[0] {
        DataType::List(f) => f.data_type().clone(),
        _ => unreachable!(),
    };
    let ret = match op {
        Op::Map => DataType::List(Arc::new(Field::new_list_field(body_type, true))),
        Op::Filter | Op::Sort { .. } | Op::Fill { .. } => array_types[0].clone(),
        Op::Split { .. } => DataType::List(Arc::new(Field::new_list_field(
            array_types[0].clone(),
            true,
        ))),
        Op::Exists | Op::All => DataType::Boolean,
        Op::Count | Op::FirstIndex | Op::LastIndex => DataType::UInt32,
        Op::First | Op::Last => first_elem.clone(),
    };
    let mut call_args = arrays;
    if matches!(op, Op::First | Op::Last) {
        call_args.push(lit(default_value(&first_elem)));
    }
    let udf = LambdaUdf {
        op,
        name: match op {
            Op::Map => "arrayMap",
            Op::Filter => "arrayFilter",
            Op::Exists => "arrayExists",
            Op::All => "arrayAll",
            Op::Count => "arrayCount",
            Op::First => "arrayFirst",
            Op::Last => "arrayLast",
            Op::FirstIndex => "arrayFirstIndex",
            Op::LastIndex => "arrayLastIndex",
            Op::Sort { desc: false } => "arraySort",
            Op::Sort { desc: true } => "arrayReverseSort",
            Op::Fill { reverse: false } => "arrayFill",
            Op::Fill { reverse: true } => "arrayReverseFill",
            Op::Split { reverse: false } => "arraySplit",
            Op::Split { reverse: true } => "arrayReverseSplit",
        },
        params,
        body,
        ret,
        signature: Signature::variadic_any(Volatility::Immutable),
    };
    let mapped = ScalarUDF::from(udf).call(call_args);
    match name {
        "arraySum" | "arrayAvg" | "arrayMin" | "arrayMax" => {
            arrays::translate(name, vec![mapped], ctx)
        }
        _ => Ok(mapped),
    }
}

/// Zipped arrays must have equal sizes in every row where both are there (ClickHouse's
/// error otherwise).
pub(super) fn equal_sizes(name: &str, lists: &[ListArray]) -> Result<()> {
    let l0 = &lists[0];
    for l in &lists[1..] {
        for i in 0..l0.len() {
            if l.is_valid(i) && l0.is_valid(i) && l.value_length(i) != l0.value_length(i) {
                return exec_err!(
                    "Array arguments for function {name} must have equal sizes, got {} and {} \
                     in row {i}",
                    l0.value_length(i),
                    l.value_length(i)
                );
            }
        }
    }
    Ok(())
}

/// `body` simplified to run as a physical expression without the optimizer, which also
/// rewrites what exists only to be simplified (coalesce → CASE).
pub(super) fn simplified(body: Expr, schema: &DFSchema) -> Result<Expr, FunctionError> {
    let simplifier = datafusion::optimizer::simplify_expressions::ExprSimplifier::new(
        datafusion::logical_expr::simplify::SimplifyContext::builder()
            .with_schema(Arc::new(schema.clone()))
            .build(),
    );
    simplifier.simplify(body).map_err(df_err)
}

/// The elements of every row of `lists` (rebased) as one batch over `schema`: a column per
/// parameter, in its type.
pub(super) fn elements(
    lists: &[ListArray],
    params: &[(String, DataType)],
    schema: &DFSchema,
) -> Result<RecordBatch> {
    let total = lists[0].values().len();
    let mut columns = vec![];
    for (l, (_, t)) in lists.iter().zip(params) {
        let v = l.values().slice(0, total.min(l.values().len()));
        columns.push(if v.data_type() == t { v } else { cast(&v, t)? });
    }
    batch(schema, columns, total)
}

/// A batch of `rows` rows over `schema`.
pub(super) fn batch(schema: &DFSchema, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new_with_options(
        Arc::new(schema.as_arrow().clone()),
        columns,
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

pub(super) fn param_schema(params: &[(String, DataType)]) -> Result<DFSchema> {
    let fields: Vec<Field> = params
        .iter()
        .map(|(n, t)| Field::new(n, t.clone(), true))
        .collect();
    DFSchema::try_from(Schema::new(fields))
}

/// A higher-order function with its lambda. Equality and hashing include the body and the
/// parameters, so DataFusion never merges two calls with different lambdas.
#[derive(Debug, PartialEq, Eq, Hash)]
struct LambdaUdf {
    op: Op,
    name: &'static str,
    params: Vec<(String, DataType)>,
    body: Expr,
    ret: DataType,
    signature: Signature,
}

impl ScalarUDFImpl for LambdaUdf {
    fn name(&self) -> &str {
        self.name
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
        let params: Vec<&str> = self.params.iter().map(|p| p.0.as_str()).collect();
        let args: Vec<String> = args.iter().map(|a| a.schema_name().to_string()).collect();
        Ok(format!(
            "{}(({}) -> {}, {})",
            self.name,
            params.join(", "),
            self.body,
            args.join(", ")
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let k = self.params.len();
        let mut lists = vec![];
        for a in &args.args[..k] {
            let arr = a.to_array(n)?;
            lists.push(rebase(arr.as_list::<i32>()));
        }
        equal_sizes(self.name, &lists)?;
        let total = lists[0].values().len();
        let schema = param_schema(&self.params)?;
        let batch = elements(&lists, &self.params, &schema)?;
        let phys = datafusion::physical_expr::create_physical_expr(
            &self.body,
            &schema,
            &ExecutionProps::new(),
            &PhysicalPlanningContext::default(),
        )?;
        let result = phys.evaluate(&batch)?.into_array(total)?;
        let l0 = &lists[0];
        let spans = || {
            let offs = l0.value_offsets();
            (0..n).map(move |i| (l0.is_valid(i), offs[i] as usize, offs[i + 1] as usize))
        };
        let out: ArrayRef = match self.op {
            Op::Map => {
                let field = Arc::new(Field::new_list_field(result.data_type().clone(), true));
                Arc::new(ListArray::try_new(
                    field,
                    l0.offsets().clone(),
                    result,
                    l0.nulls().cloned(),
                )?)
            }
            Op::Sort { desc } => arrays::sort_by_keys(l0, &result, desc)?,
            _ => {
                let mask = result.as_boolean();
                let truth = |j: usize| mask.is_valid(j) && mask.value(j);
                match self.op {
                    Op::Fill { reverse } => {
                        // Each element's source index: itself, or the last kept one.
                        let mut idx: Vec<u32> = Vec::with_capacity(total);
                        for (_, s, e) in spans() {
                            let start = idx.len();
                            idx.extend((s..e).map(|j| j as u32));
                            let row = &mut idx[start..];
                            if reverse {
                                for i in (0..row.len().saturating_sub(1)).rev() {
                                    if !truth(s + i) {
                                        row[i] = row[i + 1];
                                    }
                                }
                            } else {
                                for i in 1..row.len() {
                                    if !truth(s + i) {
                                        row[i] = row[i - 1];
                                    }
                                }
                            }
                        }
                        let values = take(l0.values().as_ref(), &UInt32Array::from(idx), None)?;
                        let field = match l0.data_type() {
                            DataType::List(f) => f.clone(),
                            _ => unreachable!(),
                        };
                        Arc::new(ListArray::try_new(
                            field,
                            l0.offsets().clone(),
                            values,
                            l0.nulls().cloned(),
                        )?)
                    }
                    Op::Split { reverse } => {
                        // Lengths of the pieces of every row, then the pieces per row.
                        let mut piece_lens: Vec<usize> = vec![];
                        let mut pieces_per_row: Vec<usize> = vec![];
                        for (_, s, e) in spans() {
                            let before = piece_lens.len();
                            let mut cur = 0usize;
                            for j in s..e {
                                let cut_before = !reverse && j > s && truth(j);
                                if cut_before {
                                    piece_lens.push(cur);
                                    cur = 0;
                                }
                                cur += 1;
                                let cut_after = reverse && j + 1 < e && truth(j);
                                if cut_after {
                                    piece_lens.push(cur);
                                    cur = 0;
                                }
                            }
                            if e > s {
                                piece_lens.push(cur);
                            }
                            pieces_per_row.push(piece_lens.len() - before);
                        }
                        let field = match l0.data_type() {
                            DataType::List(f) => f.clone(),
                            _ => unreachable!(),
                        };
                        let inner = ListArray::try_new(
                            field,
                            OffsetBuffer::from_lengths(piece_lens),
                            l0.values().slice(0, total),
                            None,
                        )?;
                        Arc::new(ListArray::try_new(
                            Arc::new(Field::new_list_field(l0.data_type().clone(), true)),
                            OffsetBuffer::from_lengths(pieces_per_row),
                            Arc::new(inner),
                            l0.nulls().cloned(),
                        )?)
                    }
                    Op::Filter => {
                        let keep: BooleanArray = (0..total).map(|j| Some(truth(j))).collect();
                        let lens: Vec<usize> = spans()
                            .map(|(_, s, e)| (s..e).filter(|j| truth(*j)).count())
                            .collect();
                        let values = filter(l0.values(), &keep)?;
                        let field = match l0.data_type() {
                            DataType::List(f) => f.clone(),
                            _ => unreachable!(),
                        };
                        Arc::new(ListArray::try_new(
                            field,
                            OffsetBuffer::from_lengths(lens),
                            values,
                            l0.nulls().cloned(),
                        )?)
                    }
                    Op::Exists | Op::All => Arc::new(
                        spans()
                            .map(|(ok, s, e)| {
                                ok.then(|| {
                                    if self.op == Op::Exists {
                                        (s..e).any(truth)
                                    } else {
                                        (s..e).all(truth)
                                    }
                                })
                            })
                            .collect::<BooleanArray>(),
                    ),
                    Op::Count | Op::FirstIndex | Op::LastIndex => Arc::new(
                        spans()
                            .map(|(ok, s, e)| {
                                ok.then(|| match self.op {
                                    Op::Count => (s..e).filter(|j| truth(*j)).count() as u32,
                                    Op::FirstIndex => {
                                        (s..e).position(truth).map_or(0, |p| p as u32 + 1)
                                    }
                                    _ => (s..e).rposition(truth).map_or(0, |p| p as u32 + 1),
                                })
                            })
                            .collect::<UInt32Array>(),
                    ),
                    _ => {
                        // First / Last: the element, or the type's default if none matches.
                        let mut idx: Vec<Option<u32>> = vec![];
                        let mut missing: Vec<bool> = vec![];
                        for (ok, s, e) in spans() {
                            let hit = if self.op == Op::First {
                                (s..e).find(|j| truth(*j))
                            } else {
                                (s..e).rev().find(|j| truth(*j))
                            };
                            missing.push(ok && hit.is_none());
                            idx.push(hit.map(|j| j as u32));
                        }
                        let taken = take(l0.values().as_ref(), &UInt32Array::from(idx), None)?;
                        let default = args.args[k].to_array(1)?;
                        datafusion::arrow::compute::kernels::zip::zip(
                            &BooleanArray::from(missing),
                            &Scalar::new(default),
                            &taken,
                        )?
                    }
                }
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// The same list with offsets starting at 0 and values cut to what the offsets use.
pub(super) fn rebase(l: &ListArray) -> ListArray {
    let offs = l.value_offsets();
    let first = offs[0];
    let last = offs[l.len()];
    if first == 0 && last as usize == l.values().len() {
        return l.clone();
    }
    let values = l.values().slice(first as usize, (last - first) as usize);
    let lens = (0..l.len()).map(|i| (offs[i + 1] - offs[i]) as usize);
    let field = match l.data_type() {
        DataType::List(f) => f.clone(),
        _ => unreachable!(),
    };
    ListArray::new(
        field,
        OffsetBuffer::from_lengths(lens),
        values,
        l.nulls().cloned(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::Arg;
    use super::super::arrays::tests::table;
    use super::super::testutil::{col, lit};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::Expr;
    use datafusion::prelude::col as param;

    fn lam(params: &[&str], body: Expr) -> Arg {
        Arg::Lambda {
            params: params
                .iter()
                .map(|p| (p.to_string(), DataType::Int64))
                .collect(),
            body,
        }
    }

    #[test]
    fn lambdas_match_clickhouse() {
        let t = table();
        let x = || param("x");
        let a = || Arg::Expr(col("a"));
        let c = |name: &str, args: Vec<Arg>| t.call(name, vec![], args, false);
        // a: [1,2,3,2] | [] | NULL | [3,NULL,1]  (chdb answers for the non-NULL rows)
        let cases: Vec<(Expr, [&str; 4])> = vec![
            (
                c("arrayMap", vec![lam(&["x"], x() * lit(2i64)), a()]),
                ["[2, 4, 6, 4]", "[]", "NULL", "[6, NULL, 2]"],
            ),
            (
                c("arrayFilter", vec![lam(&["x"], x().gt(lit(1i64))), a()]),
                ["[2, 3, 2]", "[]", "NULL", "[3]"],
            ),
            (
                c("arrayExists", vec![lam(&["x"], x().eq(lit(3i64))), a()]),
                ["true", "false", "NULL", "true"],
            ),
            (
                c("arrayAll", vec![lam(&["x"], x().gt(lit(0i64))), a()]),
                ["true", "true", "NULL", "false"],
            ),
            (
                c("arrayCount", vec![lam(&["x"], x().gt_eq(lit(2i64))), a()]),
                ["3", "0", "NULL", "1"],
            ),
            (
                c("arrayFirst", vec![lam(&["x"], x().gt(lit(1i64))), a()]),
                ["2", "0", "NULL", "3"],
            ),
            (
                c("arrayLast", vec![lam(&["x"], x().gt(lit(1i64))), a()]),
                ["2", "0", "NULL", "3"],
            ),
            (
                c("arrayFirstIndex", vec![lam(&["x"], x().eq(lit(2i64))), a()]),
                ["2", "0", "NULL", "0"],
            ),
            (
                c("arrayLastIndex", vec![lam(&["x"], x().eq(lit(2i64))), a()]),
                ["4", "0", "NULL", "0"],
            ),
            (
                c("arraySort", vec![lam(&["x"], -x()), a()]),
                ["[3, 2, 2, 1]", "[]", "NULL", "[3, 1, NULL]"],
            ),
            (
                c("arrayReverseSort", vec![lam(&["x"], x()), a()]),
                ["[3, 2, 2, 1]", "[]", "NULL", "[3, 1, NULL]"],
            ),
            (
                c(
                    "arrayMap",
                    vec![lam(&["x", "y"], x() + param("y")), a(), a()],
                ),
                ["[2, 4, 6, 4]", "[]", "NULL", "[6, NULL, 2]"],
            ),
            (
                c("arraySum", vec![lam(&["x"], x() * lit(10i64)), a()]),
                ["80", "0", "NULL", "40"],
            ),
            // a body mixing types is coerced (Int64 > Float64)
            (
                c("arrayCount", vec![lam(&["x"], x().gt(lit(1.5))), a()]),
                ["3", "0", "NULL", "1"],
            ),
            // no lambda: the elements themselves are the conditions
            (
                c(
                    "arrayCount",
                    vec![Arg::Expr(
                        t.f("array", vec![lit(true), lit(false), lit(true)]),
                    )],
                ),
                ["2"; 4],
            ),
        ];
        let out = t.project(cases.iter().map(|c| c.0.clone()).collect());
        for (i, (e, want)) in cases.iter().enumerate() {
            assert_eq!(out[i].rows, want.to_vec(), "{e}");
        }
        assert_eq!(out[4].dt, DataType::UInt32);
        assert_eq!(out[2].dt, DataType::Boolean);
        // arrays of different sizes in one row are an error, as in ClickHouse
        let bad = c(
            "arrayMap",
            vec![
                lam(&["x", "y"], x() + param("y")),
                a(),
                Arg::Expr(t.f("array", vec![lit(1i64)])),
            ],
        );
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.project(vec![bad])));
        assert!(r.is_err());
        // two different lambdas in one projection stay apart
        let two = t.project(vec![
            c("arrayMap", vec![lam(&["x"], x() + lit(1i64)), a()]),
            c("arrayMap", vec![lam(&["x"], x() + lit(2i64)), a()]),
        ]);
        assert_eq!(two[0].rows[0], "[2, 3, 4, 3]");
        assert_eq!(two[1].rows[0], "[3, 4, 5, 4]");
    }
}
