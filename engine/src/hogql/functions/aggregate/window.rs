//! Window-only functions, returned as `Expr::WindowFunction` with an empty window (the planner
//! fills PARTITION BY / ORDER BY / frame from OVER).
//!
//! `first_value`/`last_value` are not here: in ClickHouse they are the aggregates `any` and
//! `anyLast` (NULLs skipped, frame respected), so they are registered as aggregates.

use super::super::FnContext;
use super::{FunctionError, default_value, lit, literal_i64, nullable, type_of};
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_window as fw;
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion::logical_expr::{
    Expr, PartitionEvaluator, Signature, Volatility, WindowUDF, WindowUDFImpl, cast,
};
use std::ops::Range;
use std::sync::Arc;

fn window(udwf: Arc<WindowUDF>, args: Vec<Expr>) -> Expr {
    Expr::WindowFunction(Box::new(WindowFunction::new(udwf, args)))
}

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    match name {
        "row_number" => Ok(window(fw::row_number::row_number_udwf(), vec![])),
        "rank" => Ok(window(fw::rank::rank_udwf(), vec![])),
        "dense_rank" => Ok(window(fw::rank::dense_rank_udwf(), vec![])),
        "percent_rank" => Ok(window(fw::rank::percent_rank_udwf(), vec![])),
        "cume_dist" => Ok(window(fw::cume_dist::cume_dist_udwf(), vec![])),
        "lag" | "lead" | "lagInFrame" | "leadInFrame" | "nth_value" => {
            let mut it = args.into_iter();
            let x = it.next().expect("arity");
            let x = if type_of(&x, ctx)? == DataType::Boolean {
                cast(x, DataType::UInt8)
            } else {
                x
            };
            let t = type_of(&x, ctx)?;
            let n = match it.next() {
                Some(e) => literal_i64(name, &e)?,
                None => 1,
            };
            let min = if name == "nth_value" { 1 } else { 0 };
            if n < min {
                return Err(FunctionError::Invalid(format!(
                    "Offset of `{name}` must be a constant integer ≥ {min}, got {n}"
                )));
            }
            // The value when the row asked for does not exist: the given default, else the
            // type's default for a non-Nullable argument and NULL for a Nullable one. PostHog
            // runs `lag`/`lead` as lagInFrame/leadInFrame of toNullable(x): NULL.
            let default = match it.next() {
                Some(d) if type_of(&d, ctx)? == t => d,
                Some(d) => cast(d, t.clone()),
                None if nullable(&x, ctx) || matches!(name, "lag" | "lead") => {
                    lit(ScalarValue::try_from(&t).map_err(super::df_err)?)
                }
                None => lit(default_value(&t)),
            };
            let offset = lit(ScalarValue::Int64(Some(n)));
            match name {
                "lag" => Ok(window(fw::lead_lag::lag_udwf(), vec![x, offset, default])),
                "lead" => Ok(window(fw::lead_lag::lead_udwf(), vec![x, offset, default])),
                _ => {
                    let kind = match name {
                        "lagInFrame" => Shift::Lag,
                        "leadInFrame" => Shift::Lead,
                        _ => Shift::Nth,
                    };
                    let udwf = Arc::new(WindowUDF::from(InFrame::new(kind, n)));
                    Ok(window(udwf, vec![x, offset, default]))
                }
            }
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shift {
    Lag,
    Lead,
    Nth,
}

/// ClickHouse's frame-respecting `lagInFrame(x[, n[, default]])`,
/// `leadInFrame(x[, n[, default]])` and `nth_value(x, n)`: the value n rows before/after the
/// current row (or the frame's n-th row) if that row is inside the current row's frame,
/// else the default. Arguments: (x, n as a literal, default).
#[derive(Debug, PartialEq, Eq, Hash)]
struct InFrame {
    kind: Shift,
    n: i64,
    signature: Signature,
}

impl InFrame {
    fn new(kind: Shift, n: i64) -> Self {
        InFrame {
            kind,
            n,
            signature: Signature::any(3, Volatility::Immutable),
        }
    }
}

impl WindowUDFImpl for InFrame {
    fn name(&self) -> &str {
        match self.kind {
            Shift::Lag => "lagInFrame",
            Shift::Lead => "leadInFrame",
            Shift::Nth => "nth_value",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn partition_evaluator(
        &self,
        _args: PartitionEvaluatorArgs<'_>,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        Ok(Box::new(InFrameEval {
            kind: self.kind,
            n: self.n,
            row: 0,
        }))
    }

    fn field(&self, field_args: WindowUDFFieldArgs<'_>) -> Result<FieldRef> {
        let x = &field_args.input_fields()[0];
        let d = &field_args.input_fields()[2];
        Ok(Arc::new(Field::new(
            field_args.name(),
            x.data_type().clone(),
            x.is_nullable() || d.is_nullable(),
        )))
    }
}

#[derive(Debug)]
struct InFrameEval {
    kind: Shift,
    n: i64,
    /// DataFusion calls `evaluate` once per row of the partition, in order.
    row: usize,
}

impl PartitionEvaluator for InFrameEval {
    fn uses_window_frame(&self) -> bool {
        true
    }

    fn evaluate(&mut self, values: &[ArrayRef], range: &Range<usize>) -> Result<ScalarValue> {
        let row = self.row as i64;
        self.row += 1;
        let target = match self.kind {
            Shift::Lag => row - self.n,
            Shift::Lead => row + self.n,
            Shift::Nth => range.start as i64 + self.n - 1,
        };
        if target >= range.start as i64 && target < range.end as i64 {
            ScalarValue::try_from_array(&values[0], target as usize)
        } else {
            ScalarValue::try_from_array(&values[2], row as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Table, col, lit, over};
    use datafusion::arrow::array::{ArrayRef, Int64Array};
    use datafusion::logical_expr::{WindowFrame, WindowFrameBound, WindowFrameUnits};
    use datafusion::prelude::Expr;
    use std::sync::Arc;

    fn rows_frame(start: WindowFrameBound, end: WindowFrameBound) -> Option<WindowFrame> {
        Some(WindowFrame::new_bounds(WindowFrameUnits::Rows, start, end))
    }

    #[test]
    fn window_functions_match_clickhouse() {
        use WindowFrameBound::{CurrentRow, Following, Preceding};
        use datafusion::common::ScalarValue::UInt64;
        let g: ArrayRef = Arc::new(Int64Array::from(vec![1, 1, 1, 1, 2, 2]));
        let x: ArrayRef = Arc::new(Int64Array::from(vec![10, 20, 20, 40, 5, 7]));
        let t = Table::new(vec![("g", g, false), ("x", x, false)]);
        let o = |e: Expr, frame: Option<WindowFrame>| {
            over(e, vec![col("g")], vec![col("x").sort(true, false)], frame)
        };
        let all = rows_frame(Preceding(UInt64(None)), Following(UInt64(None)));
        let cases: Vec<(Expr, Vec<&str>)> = vec![
            (
                o(
                    t.f("lagInFrame", vec![col("x"), lit(1), lit(99)]),
                    rows_frame(Preceding(UInt64(None)), CurrentRow),
                ),
                vec!["99", "10", "20", "20", "99", "5"],
            ),
            (
                o(t.f("leadInFrame", vec![col("x"), lit(2)]), all.clone()),
                vec!["20", "40", "0", "0", "0", "0"],
            ),
            (
                o(
                    t.f("leadInFrame", vec![col("x")]),
                    rows_frame(CurrentRow, Following(UInt64(Some(1)))),
                ),
                vec!["20", "20", "40", "0", "7", "0"],
            ),
            (
                o(t.f("nth_value", vec![col("x"), lit(2)]), None),
                vec!["0", "20", "20", "20", "0", "7"],
            ),
            // PostHog's lag is lagInFrame(toNullable(x)): NULL without a neighbour.
            (
                o(t.f("lag", vec![col("x"), lit(1)]), None),
                vec!["NULL", "10", "20", "20", "NULL", "5"],
            ),
            (
                o(t.f("LEAD", vec![col("x"), lit(1), lit(-1)]), None),
                vec!["20", "20", "40", "-1", "7", "-1"],
            ),
            (
                o(t.f("row_number", vec![]), None),
                vec!["1", "2", "3", "4", "1", "2"],
            ),
            (
                o(t.f("rank", vec![]), None),
                vec!["1", "2", "2", "4", "1", "2"],
            ),
            (
                o(t.f("dense_rank", vec![]), None),
                vec!["1", "2", "2", "3", "1", "2"],
            ),
            (
                o(t.f("percent_rank", vec![]), None),
                vec![
                    "0.0",
                    "0.3333333333333333",
                    "0.3333333333333333",
                    "1.0",
                    "0.0",
                    "1.0",
                ],
            ),
            (
                o(t.f("cume_dist", vec![]), None),
                vec!["0.25", "0.75", "0.75", "1.0", "0.5", "1.0"],
            ),
            (
                o(t.f("sum", vec![col("x")]), None),
                vec!["10", "50", "50", "90", "5", "12"],
            ),
            (
                o(t.f("first_value", vec![col("x")]), all.clone()),
                vec!["10", "10", "10", "10", "5", "5"],
            ),
            (
                o(t.f("last_value", vec![col("x")]), all.clone()),
                vec!["40", "40", "40", "40", "7", "7"],
            ),
        ];
        let out = t.window(cases.iter().map(|c| c.0.clone()).collect());
        for (i, (e, want)) in cases.iter().enumerate() {
            assert_eq!(out[i].rows, *want, "{e}");
        }
        assert_eq!(out[0].dt, datafusion::arrow::datatypes::DataType::Int64);
        assert!(!out[0].nullable);
        assert_eq!(out[6].dt, datafusion::arrow::datatypes::DataType::UInt64);
    }
}
