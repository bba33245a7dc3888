//! `first_value`/`last_value` (ClickHouse's `any`/`anyLast`: NULLs skipped) as window
//! aggregates over any frame. DataFusion's own accumulators for them cannot retract rows,
//! so a sliding frame (`ROWS BETWEEN 1 PRECEDING AND CURRENT ROW`) failed to run; this one
//! keeps the frame's rows and drops them from the front as the frame slides.

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

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
