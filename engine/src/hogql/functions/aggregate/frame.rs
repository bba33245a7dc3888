//! Aggregates over sliding frames (`ROWS BETWEEN 1 PRECEDING AND CURRENT ROW`: a frame whose
//! start moves). DataFusion runs them with an accumulator that takes the rows leaving the frame
//! back out (`retract_batch`), and refuses to run an aggregate whose accumulator cannot.
//!
//! - `first_value`/`last_value` (ClickHouse's `any`/`anyLast`: NULLs skipped) keep the frame's
//!   rows and drop them from the front as the frame slides ([`frame_value_udaf`]).
//! - Every other aggregate whose accumulator cannot retract (`groupArray`, `uniq`, the
//!   quantiles, `argMax`, `topK`, …) is wrapped by [`sliding_udaf`]: the wrapper keeps the
//!   frame's rows and, for each output row, feeds them to a fresh accumulator. That costs the
//!   frame's length per row, which is what ClickHouse does for such functions too (it has no
//!   way to take a row out of a `groupArray` state either).

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::concat;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue, not_impl_err};
use datafusion::logical_expr::expr::{AggregateFunctionParams, WindowFunctionParams};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ReversedUDAF, Signature, Volatility,
};
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};

#[derive(Debug, PartialEq, Eq, Hash)]
struct FrameValue {
    last: bool,
    /// `RESPECT NULLS`: the frame's first (last) row even when NULL.
    respect: bool,
    signature: Signature,
}

/// The frame aggregate standing in for `first_value` (`last = false`) or `last_value` in a
/// window.
pub(crate) fn frame_value_udaf(last: bool) -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::from(FrameValue {
        last,
        respect: false,
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

/// The same with `RESPECT NULLS` (ClickHouse's `first_value_respect_nulls` /
/// `last_value_respect_nulls`): the frame's first (last) row's value, NULL included.
pub(crate) fn frame_value_respect_udaf(last: bool) -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::from(FrameValue {
        last,
        respect: true,
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

impl AggregateUDFImpl for FrameValue {
    fn name(&self) -> &str {
        match (self.last, self.respect) {
            (true, false) => "last_value",
            (false, false) => "first_value",
            (true, true) => "last_value_respect_nulls",
            (false, true) => "first_value_respect_nulls",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn is_nullable(&self) -> bool {
        true
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "value"),
            args.input_fields[0].data_type().clone(),
            true,
        ))])
    }

    fn accumulator(&self, acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(FrameAcc {
            last: self.last,
            respect: self.respect,
            dt: acc_args.expr_fields[0].data_type().clone(),
            rows: VecDeque::new(),
        }))
    }
}

#[derive(Debug)]
struct FrameAcc {
    last: bool,
    respect: bool,
    dt: DataType,
    /// The frame's rows in order (NULL ones too, so retracting counts rows).
    rows: VecDeque<ScalarValue>,
}

impl Accumulator for FrameAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let a = &values[0];
        for i in 0..a.len() {
            self.rows.push_back(ScalarValue::try_from_array(a, i)?);
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for _ in 0..values[0].len() {
            self.rows.pop_front();
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let found = if self.respect {
            if self.last {
                self.rows.back()
            } else {
                self.rows.front()
            }
        } else if self.last {
            self.rows.iter().rev().find(|v| !v.is_null())
        } else {
            self.rows.iter().find(|v| !v.is_null())
        };
        match found {
            Some(v) => Ok(v.clone()),
            None => ScalarValue::try_from(&self.dt),
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.rows.iter().map(|v| v.size()).sum::<usize>()
    }
}

/// `inner` as a window aggregate over a sliding frame: its own accumulator where that one can
/// retract rows, else one that replays the frame's rows (see the module's comment).
pub(crate) fn sliding_udaf(inner: Arc<AggregateUDF>) -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::from(Sliding { inner }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Sliding {
    inner: Arc<AggregateUDF>,
}

impl AggregateUDFImpl for Sliding {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.inner().schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.inner().display_name(params)
    }

    fn window_function_schema_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.inner().window_function_schema_name(params)
    }

    fn window_function_display_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.inner().window_function_display_name(params)
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Reversed(udf) => ReversedUDAF::Reversed(sliding_udaf(udf)),
            other => other,
        }
    }

    fn accumulator(&self, args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(args)
    }

    fn create_sliding_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn Accumulator>> {
        let own = self.inner.create_sliding_accumulator(args.clone())?;
        if own.supports_retract_batch() {
            return Ok(own);
        }
        Ok(Box::new(Replay {
            inner: Arc::clone(&self.inner),
            args: OwnedArgs::of(&args),
            rows: VecDeque::new(),
        }))
    }
}

/// [`AccumulatorArgs`] held by value, so a fresh accumulator can be made at any time.
#[derive(Debug)]
struct OwnedArgs {
    return_field: FieldRef,
    schema: Schema,
    ignore_nulls: bool,
    order_bys: Vec<PhysicalSortExpr>,
    is_reversed: bool,
    name: String,
    is_distinct: bool,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    expr_fields: Vec<FieldRef>,
}

impl OwnedArgs {
    fn of(a: &AccumulatorArgs<'_>) -> Self {
        Self {
            return_field: Arc::clone(&a.return_field),
            schema: a.schema.clone(),
            ignore_nulls: a.ignore_nulls,
            order_bys: a.order_bys.to_vec(),
            is_reversed: a.is_reversed,
            name: a.name.to_string(),
            is_distinct: a.is_distinct,
            exprs: a.exprs.to_vec(),
            expr_fields: a.expr_fields.to_vec(),
        }
    }

    fn get(&self) -> AccumulatorArgs<'_> {
        AccumulatorArgs {
            return_field: Arc::clone(&self.return_field),
            schema: &self.schema,
            ignore_nulls: self.ignore_nulls,
            order_bys: &self.order_bys,
            is_reversed: self.is_reversed,
            name: &self.name,
            is_distinct: self.is_distinct,
            exprs: &self.exprs,
            expr_fields: &self.expr_fields,
        }
    }
}

/// The frame's rows, in chunks as they came (one array per argument in each), replayed into a
/// fresh accumulator of `inner` for every answer.
#[derive(Debug)]
struct Replay {
    inner: Arc<AggregateUDF>,
    args: OwnedArgs,
    rows: VecDeque<Vec<ArrayRef>>,
}

impl Replay {
    /// A fresh accumulator fed the frame's rows (first merged into one chunk, so the next
    /// answer starts from it).
    fn replayed(&mut self) -> Result<Box<dyn Accumulator>> {
        if self.rows.len() > 1 {
            let columns = self.rows[0].len();
            let merged = (0..columns)
                .map(|c| {
                    let parts: Vec<&dyn Array> =
                        self.rows.iter().map(|chunk| chunk[c].as_ref()).collect();
                    Ok(concat(&parts)?)
                })
                .collect::<Result<Vec<_>>>()?;
            self.rows.clear();
            self.rows.push_back(merged);
        }
        let mut acc = self.inner.accumulator(self.args.get())?;
        if let Some(chunk) = self.rows.front() {
            acc.update_batch(chunk)?;
        }
        Ok(acc)
    }
}

impl Accumulator for Replay {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values.first().is_some_and(|v| !v.is_empty()) {
            self.rows.push_back(values.to_vec());
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let mut leaving = values.first().map_or(0, |v| v.len());
        while leaving > 0 {
            let Some(front) = self.rows.front_mut() else {
                break;
            };
            let len = front[0].len();
            if len <= leaving {
                self.rows.pop_front();
                leaving -= len;
            } else {
                for a in front.iter_mut() {
                    *a = a.slice(leaving, len - leaving);
                }
                leaving = 0;
            }
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.replayed()?.evaluate()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.replayed()?.state()
    }

    fn merge_batch(&mut self, _states: &[ArrayRef]) -> Result<()> {
        not_impl_err!(
            "{} over a sliding window frame cannot merge partial states",
            self.inner.name()
        )
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .rows
                .iter()
                .flatten()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::functions_aggregate::array_agg::array_agg_udaf;
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::physical_expr::expressions::col;

    fn sliding_accumulator(udaf: Arc<AggregateUDF>) -> Result<Box<dyn Accumulator>> {
        let schema = Schema::new(vec![Field::new("x", DataType::Int64, true)]);
        let field: FieldRef = Arc::new(Field::new("x", DataType::Int64, true));
        let udf = sliding_udaf(udaf);
        let args = AccumulatorArgs {
            return_field: udf.return_field(std::slice::from_ref(&field))?,
            schema: &schema,
            ignore_nulls: false,
            order_bys: &[],
            is_reversed: false,
            name: "f(x)",
            is_distinct: false,
            exprs: &[col("x", &schema)?],
            expr_fields: &[field],
        };
        udf.create_sliding_accumulator(args)
    }

    fn rows(v: &[i64]) -> Vec<ArrayRef> {
        vec![Arc::new(Int64Array::from(v.to_vec()))]
    }

    #[test]
    fn a_sliding_frame_replays_its_rows_where_the_aggregate_cannot_retract() -> Result<()> {
        let mut acc = sliding_accumulator(array_agg_udaf())?;
        assert!(acc.supports_retract_batch());
        acc.update_batch(&rows(&[1, 2]))?;
        acc.update_batch(&rows(&[3]))?;
        assert_eq!(acc.evaluate()?.to_string(), "[1, 2, 3]");
        // one row leaves from inside a chunk, then three across a chunk's end
        acc.retract_batch(&rows(&[0]))?;
        assert_eq!(acc.evaluate()?.to_string(), "[2, 3]");
        acc.update_batch(&rows(&[4, 5]))?;
        acc.retract_batch(&rows(&[0, 0, 0]))?;
        assert_eq!(acc.evaluate()?.to_string(), "[5]");
        // an empty frame: the aggregate of no rows
        acc.retract_batch(&rows(&[0]))?;
        assert!(acc.evaluate()?.is_null());
        acc.update_batch(&rows(&[6]))?;
        assert_eq!(acc.evaluate()?.to_string(), "[6]");
        Ok(())
    }

    #[test]
    fn an_aggregate_that_retracts_keeps_its_own_accumulator() -> Result<()> {
        let acc = sliding_accumulator(sum_udaf())?;
        assert!(!format!("{acc:?}").contains("Replay"), "{acc:?}");
        Ok(())
    }
}
