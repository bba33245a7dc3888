//! Our aggregate functions, each with a mergeable state so multi-partition aggregation is
//! right: `Collect` (quantiles, groupArray, groupUniqArray, topK), `ArgMinMax`, and
//! `WindowFunnel`.

use super::default_value;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, UInt8Array, new_empty_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{SortOptions, cast, concat, filter, is_not_null, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type, UInt8Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};
use std::collections::HashMap;
use std::sync::Arc;

/// A one-row list scalar holding `values`.
pub(super) fn list_scalar(values: ArrayRef) -> ScalarValue {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    let list = ListArray::new(
        field,
        OffsetBuffer::from_lengths([values.len()]),
        values,
        None,
    );
    ScalarValue::List(Arc::new(list))
}

fn list_type(t: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t.clone(), true)))
}

/// Indices of the first occurrence of each distinct value, in order of first occurrence.
fn first_occurrences(values: &ArrayRef) -> Result<Vec<u32>> {
    let conv = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    let rows = conv.convert_columns(std::slice::from_ref(values))?;
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    for i in 0..rows.num_rows() {
        if seen.insert(rows.row(i)) {
            out.push(i as u32);
        }
    }
    Ok(out)
}

/// What a [`Collect`] aggregate computes from all non-NULL values of its argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum CollectKind {
    /// `groupArray([n])(x)`: the values in order (the first n).
    GroupArray { limit: Option<usize> },
    /// `groupUniqArray([n])(x)`: distinct values. ClickHouse's order is its hash table's; ours
    /// is first occurrence.
    GroupUniqArray { limit: Option<usize> },
    /// `topK(k)(x)`: the k most frequent values, most frequent first. ClickHouse's answer is
    /// approximate (Space-Saving) and orders ties by its hash table; ours is exact, ties in
    /// order of first occurrence.
    TopK { k: usize },
    /// `quantile(p)(x)` / `quantiles(p1, …)(x)` / `median(x)` (levels as f64 bits). ClickHouse's
    /// `quantile` keeps a reservoir sample of 8192 values and interpolates linearly between
    /// the sorted sample's neighbours (position p·(n−1)), so it equals
    /// `quantileExactInclusive` for up to 8192 values. We always use all values (exact),
    /// so beyond 8192 values we may differ from ClickHouse's sampled estimate.
    Quantiles { levels: Vec<u64>, array: bool },
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Collect {
    kind: CollectKind,
    /// Includes the parameters (`quantile(0.9)`), so the column names of two calls differ.
    name: String,
    signature: Signature,
}

impl Collect {
    pub(super) fn new(kind: CollectKind) -> Self {
        let levels = |l: &[u64]| {
            l.iter()
                .map(|b| f64::from_bits(*b).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let name = match &kind {
            CollectKind::GroupArray { limit: None } => "groupArray".to_string(),
            CollectKind::GroupArray { limit: Some(n) } => format!("groupArray({n})"),
            CollectKind::GroupUniqArray { limit: None } => "groupUniqArray".to_string(),
            CollectKind::GroupUniqArray { limit: Some(n) } => format!("groupUniqArray({n})"),
            CollectKind::TopK { k } => format!("topK({k})"),
            CollectKind::Quantiles {
                levels: l,
                array: true,
            } => format!("quantiles({})", levels(l)),
            CollectKind::Quantiles {
                levels: l,
                array: false,
            } => format!("quantile({})", levels(l)),
        };
        Collect {
            kind,
            name,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// Quantile result type: DateTime and Date stay themselves, numbers become Float64.
fn quantile_item_type(t: &DataType) -> DataType {
    match t {
        DataType::Timestamp(_, _) | DataType::Date32 => t.clone(),
        _ => DataType::Float64,
    }
}

impl AggregateUDFImpl for Collect {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let t = &arg_types[0];
        Ok(match &self.kind {
            CollectKind::Quantiles { array: false, .. } => quantile_item_type(t),
            CollectKind::Quantiles { array: true, .. } => list_type(&quantile_item_type(t)),
            _ => list_type(t),
        })
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let types: Vec<DataType> = arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let dt = self.return_type(&types)?;
        let nullable = matches!(self.kind, CollectKind::Quantiles { array: false, .. })
            && arg_fields[0].is_nullable();
        Ok(Arc::new(Field::new(self.name(), dt, nullable)))
    }

    fn is_nullable(&self) -> bool {
        matches!(self.kind, CollectKind::Quantiles { array: false, .. })
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        Ok(match data_type {
            DataType::List(f) => super::empty_list(f),
            _ => ScalarValue::try_from(data_type)?,
        })
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        let t = args.input_fields[0].data_type();
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "values"),
            list_type(t),
            true,
        ))])
    }

    fn accumulator(&self, acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        let input = &acc_args.expr_fields[0];
        Ok(Box::new(CollectAcc {
            kind: self.kind.clone(),
            dt: input.data_type().clone(),
            nullable_input: input.is_nullable(),
            values: vec![],
            len: 0,
        }))
    }
}

#[derive(Debug)]
struct CollectAcc {
    kind: CollectKind,
    dt: DataType,
    nullable_input: bool,
    values: Vec<ArrayRef>,
    len: usize,
}

impl CollectAcc {
    fn push(&mut self, arr: ArrayRef) -> Result<()> {
        let arr = if arr.null_count() > 0 {
            filter(&arr, &is_not_null(&arr)?)?
        } else {
            arr
        };
        // groupArray(n) needs only the first n values.
        let arr = match self.kind {
            CollectKind::GroupArray { limit: Some(n) } => {
                let room = n.saturating_sub(self.len);
                arr.slice(0, room.min(arr.len()))
            }
            _ => arr,
        };
        if !arr.is_empty() {
            self.len += arr.len();
            self.values.push(arr);
        }
        Ok(())
    }

    fn all(&self) -> Result<ArrayRef> {
        if self.values.is_empty() {
            return Ok(new_empty_array(&self.dt));
        }
        let refs: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        Ok(concat(&refs)?)
    }

    fn quantiles(&self, levels: &[u64], array: bool) -> Result<ScalarValue> {
        let values = self.all()?;
        let out_t = quantile_item_type(&self.dt);
        let is_time = out_t != DataType::Float64;
        let as_f64 = if is_time {
            cast(&cast(&values, &DataType::Int64)?, &DataType::Float64)?
        } else {
            cast(&values, &DataType::Float64)?
        };
        let mut sorted: Vec<f64> = as_f64
            .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
            .values()
            .to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = sorted.len();
        let mut out = vec![];
        for bits in levels {
            let p = f64::from_bits(*bits);
            let v = if n == 0 {
                None
            } else {
                let pos = p * (n - 1) as f64;
                let lo = pos.floor() as usize;
                let frac = pos - lo as f64;
                let a = sorted[lo];
                Some(if lo + 1 < n && frac > 0.0 {
                    a + frac * (sorted[lo + 1] - a)
                } else {
                    a
                })
            };
            let s = match (v, is_time) {
                (Some(v), false) => ScalarValue::Float64(Some(v)),
                (Some(v), true) => ScalarValue::Int64(Some(v as i64)).cast_to(&out_t)?,
                (None, _) if self.nullable_input && !array => ScalarValue::try_from(&out_t)?,
                (None, false) => ScalarValue::Float64(Some(f64::NAN)),
                (None, true) => default_value(&out_t),
            };
            out.push(s);
        }
        if array {
            let arr = ScalarValue::iter_to_array(out).or_else(|_| {
                Ok::<_, datafusion::error::DataFusionError>(new_empty_array(&out_t))
            })?;
            Ok(list_scalar(arr))
        } else {
            Ok(out.pop().expect("one level"))
        }
    }
}

impl Accumulator for CollectAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.push(values[0].clone())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.push(lists.value(i))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![list_scalar(self.all()?)])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        match &self.kind {
            CollectKind::GroupArray { limit } => {
                let all = self.all()?;
                let n = limit.unwrap_or(usize::MAX).min(all.len());
                Ok(list_scalar(all.slice(0, n)))
            }
            CollectKind::GroupUniqArray { limit } => {
                let all = self.all()?;
                let mut idx = first_occurrences(&all)?;
                if let Some(n) = limit {
                    idx.truncate(*n);
                }
                let idx = datafusion::arrow::array::UInt32Array::from(idx);
                Ok(list_scalar(take(&all, &idx, None)?))
            }
            CollectKind::TopK { k } => {
                let all = self.all()?;
                let conv = RowConverter::new(vec![SortField::new(all.data_type().clone())])?;
                let rows = conv.convert_columns(std::slice::from_ref(&all))?;
                // row -> (count, first index)
                let mut counts: HashMap<_, (u64, u32)> = HashMap::new();
                for i in 0..rows.num_rows() {
                    counts.entry(rows.row(i)).or_insert((0, i as u32)).0 += 1;
                }
                let mut ranked: Vec<(u64, u32)> = counts.into_values().collect();
                ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                ranked.truncate(*k);
                let idx = datafusion::arrow::array::UInt32Array::from(
                    ranked.into_iter().map(|(_, i)| i).collect::<Vec<_>>(),
                );
                Ok(list_scalar(take(&all, &idx, None)?))
            }
            CollectKind::Quantiles { levels, array } => self.quantiles(levels, *array),
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .values
                .iter()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }
}

/// `argMax(val, key)` / `argMin(val, key)`: `val` of the row with the greatest (least) `key`;
/// the first such row on ties. Rows where either argument is NULL are skipped (ClickHouse's
/// Null combinator). No rows: the type's default, or NULL when an argument is Nullable.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct ArgMinMax {
    max: bool,
    signature: Signature,
}

impl ArgMinMax {
    pub(super) fn new(max: bool) -> Self {
        ArgMinMax {
            max,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for ArgMinMax {
    fn name(&self) -> &str {
        if self.max { "argMax" } else { "argMin" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let nullable = arg_fields.iter().any(|f| f.is_nullable());
        Ok(Arc::new(Field::new(
            self.name(),
            arg_fields[0].data_type().clone(),
            nullable,
        )))
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        ScalarValue::try_from(data_type)
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "val"),
                args.input_fields[0].data_type().clone(),
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "key"),
                args.input_fields[1].data_type().clone(),
                true,
            )),
        ])
    }

    fn accumulator(&self, acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        let f = acc_args.expr_fields;
        Ok(Box::new(ArgAcc {
            max: self.max,
            val_type: f[0].data_type().clone(),
            key_type: f[1].data_type().clone(),
            nullable_out: f.iter().any(|f| f.is_nullable()),
            best: None,
        }))
    }
}

#[derive(Debug)]
struct ArgAcc {
    max: bool,
    val_type: DataType,
    key_type: DataType,
    nullable_out: bool,
    best: Option<(ScalarValue, ScalarValue)>,
}

impl Accumulator for ArgAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (vals, keys) = (&values[0], &values[1]);
        let cmp = datafusion::arrow::array::make_comparator(
            keys.as_ref(),
            keys.as_ref(),
            SortOptions::default(),
        )?;
        let wanted = if self.max {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        };
        let mut best: Option<usize> = None;
        for i in 0..keys.len() {
            if keys.is_null(i) || vals.is_null(i) {
                continue;
            }
            if best.is_none_or(|b| cmp(i, b) == wanted) {
                best = Some(i);
            }
        }
        let Some(b) = best else { return Ok(()) };
        let key = ScalarValue::try_from_array(keys, b)?;
        let replace = match &self.best {
            None => true,
            Some((_, cur)) => key.partial_cmp(cur) == Some(wanted),
        };
        if replace {
            self.best = Some((ScalarValue::try_from_array(vals, b)?, key));
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(match &self.best {
            Some((v, k)) => vec![v.clone(), k.clone()],
            None => vec![
                ScalarValue::try_from(&self.val_type)?,
                ScalarValue::try_from(&self.key_type)?,
            ],
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(match &self.best {
            Some((v, _)) => v.clone(),
            None if self.nullable_out => ScalarValue::try_from(&self.val_type)?,
            None => default_value(&self.val_type),
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.best.as_ref().map_or(0, |(v, k)| v.size() + k.size())
    }
}

/// `windowFunnel(window)(timestamp, cond1, …)`, ClickHouse's default mode: events sorted by
/// (timestamp, step); a step-1 event starts a chain; step k joins a chain that reached step
/// k−1 if it is within `window` of the chain's first event (inclusive). Answers the deepest
/// step reached (0 if none) as UInt8. Arguments arrive as (Int64 timestamp in the window's
/// unit, Boolean conditions); rows with a NULL timestamp are skipped, NULL conditions are
/// false.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct WindowFunnel {
    window: i64,
    levels: usize,
    name: String,
    signature: Signature,
}

impl WindowFunnel {
    pub(super) fn new(window: i64, levels: usize) -> Self {
        WindowFunnel {
            window,
            levels,
            name: format!("windowFunnel({window})"),
            signature: Signature::any(levels + 1, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for WindowFunnel {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt8)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::UInt8(Some(0)))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "ts"),
                list_type(&DataType::Int64),
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "step"),
                list_type(&DataType::UInt8),
                true,
            )),
        ])
    }

    fn accumulator(&self, _acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(FunnelAcc {
            window: self.window,
            levels: self.levels,
            events: vec![],
        }))
    }
}

#[derive(Debug)]
struct FunnelAcc {
    window: i64,
    levels: usize,
    events: Vec<(i64, u8)>,
}

impl Accumulator for FunnelAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let ts = values[0].as_primitive::<Int64Type>();
        let conds: Vec<&BooleanArray> = values[1..].iter().map(|c| c.as_boolean()).collect();
        if conds.len() != self.levels {
            return exec_err!("windowFunnel: expected {} conditions", self.levels);
        }
        for row in 0..ts.len() {
            if ts.is_null(row) {
                continue;
            }
            let t = ts.value(row);
            for (step, c) in conds.iter().enumerate() {
                if c.is_valid(row) && c.value(row) {
                    self.events.push((t, step as u8));
                }
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let ts = states[0].as_list::<i32>();
        let steps = states[1].as_list::<i32>();
        for i in 0..ts.len() {
            if ts.is_null(i) {
                continue;
            }
            let t = ts.value(i);
            let s = steps.value(i);
            let t = t.as_primitive::<Int64Type>();
            let s = s.as_primitive::<UInt8Type>();
            self.events
                .extend(t.values().iter().copied().zip(s.values().iter().copied()));
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let ts: Int64Array = self.events.iter().map(|e| e.0).collect::<Vec<_>>().into();
        let steps: UInt8Array = self.events.iter().map(|e| e.1).collect::<Vec<_>>().into();
        Ok(vec![
            list_scalar(Arc::new(ts)),
            list_scalar(Arc::new(steps)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.events.sort_unstable();
        let mut chain_start: Vec<Option<i64>> = vec![None; self.levels];
        for &(t, step) in &self.events {
            let step = step as usize;
            if step == 0 {
                chain_start[0] = Some(t);
            } else if let Some(first) = chain_start[step - 1]
                && t <= first.saturating_add(self.window)
            {
                chain_start[step] = Some(first);
                if step + 1 == self.levels {
                    return Ok(ScalarValue::UInt8(Some(self.levels as u8)));
                }
            }
        }
        let reached = chain_start
            .iter()
            .rposition(|s| s.is_some())
            .map_or(0, |i| i + 1);
        Ok(ScalarValue::UInt8(Some(reached as u8)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.events.capacity() * 16
    }
}

/// Which statistic a [`Moments`] aggregate answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum MomentKind {
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
    CovarPop,
    CovarSamp,
    Corr,
}

/// Variances, covariances and correlation computed as ClickHouse does (from power sums, not
/// Welford's method, so the last digits agree): varPop = max(0, (Σx² − (Σx)²/n)/n), …,
/// corr = (nΣxy − ΣxΣy)/√((nΣx² − (Σx)²)(nΣy² − (Σy)²)). Rows with a NULL argument are
/// skipped. No rows: NaN, or NULL when an argument is Nullable; one row: NaN for the
/// sample forms.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Moments {
    kind: MomentKind,
    signature: Signature,
}

impl Moments {
    pub(super) fn new(kind: MomentKind) -> Self {
        let n = match kind {
            MomentKind::CovarPop | MomentKind::CovarSamp | MomentKind::Corr => 2,
            _ => 1,
        };
        Moments {
            kind,
            signature: Signature::uniform(n, vec![DataType::Float64], Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Moments {
    fn name(&self) -> &str {
        match self.kind {
            MomentKind::VarPop => "varPop",
            MomentKind::VarSamp => "varSamp",
            MomentKind::StddevPop => "stddevPop",
            MomentKind::StddevSamp => "stddevSamp",
            MomentKind::CovarPop => "covarPop",
            MomentKind::CovarSamp => "covarSamp",
            MomentKind::Corr => "corr",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let nullable = arg_fields.iter().any(|f| f.is_nullable());
        Ok(Arc::new(Field::new(
            self.name(),
            DataType::Float64,
            nullable,
        )))
    }

    fn default_value(&self, _data_type: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(None))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(["n", "sx", "sy", "sxx", "syy", "sxy"]
            .iter()
            .map(|s| {
                Arc::new(Field::new(
                    format_state_name(args.name, s),
                    DataType::Float64,
                    true,
                ))
            })
            .collect())
    }

    fn accumulator(&self, acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(MomentsAcc {
            kind: self.kind,
            nullable_out: acc_args.expr_fields.iter().any(|f| f.is_nullable()),
            s: [0.0; 6],
        }))
    }
}

#[derive(Debug)]
struct MomentsAcc {
    kind: MomentKind,
    nullable_out: bool,
    /// n, Σx, Σy, Σx², Σy², Σxy
    s: [f64; 6],
}

impl Accumulator for MomentsAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let xs = values[0].as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let ys = values
            .get(1)
            .map(|y| y.as_primitive::<datafusion::arrow::datatypes::Float64Type>());
        for i in 0..xs.len() {
            if xs.is_null(i) || ys.is_some_and(|y| y.is_null(i)) {
                continue;
            }
            let x = xs.value(i);
            let y = ys.map_or(x, |y| y.value(i));
            self.s[0] += 1.0;
            self.s[1] += x;
            self.s[2] += y;
            self.s[3] += x * x;
            self.s[4] += y * y;
            self.s[5] += x * y;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for (k, st) in states.iter().enumerate() {
            let st = st.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
            for i in 0..st.len() {
                if st.is_valid(i) {
                    self.s[k] += st.value(i);
                }
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(self
            .s
            .iter()
            .map(|v| ScalarValue::Float64(Some(*v)))
            .collect())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let [n, sx, sy, sxx, syy, sxy] = self.s;
        if n == 0.0 && self.nullable_out {
            return Ok(ScalarValue::Float64(None));
        }
        let var = |div: f64| ((sxx - sx * sx / n) / div).max(0.0);
        let v = match self.kind {
            _ if n == 0.0 => f64::NAN,
            MomentKind::VarSamp | MomentKind::StddevSamp | MomentKind::CovarSamp if n < 2.0 => {
                f64::NAN
            }
            MomentKind::VarPop => var(n),
            MomentKind::VarSamp => var(n - 1.0),
            MomentKind::StddevPop => var(n).sqrt(),
            MomentKind::StddevSamp => var(n - 1.0).sqrt(),
            MomentKind::CovarPop => (sxy - sx * sy / n) / n,
            MomentKind::CovarSamp => (sxy - sx * sy / n) / (n - 1.0),
            MomentKind::Corr => {
                (n * sxy - sx * sy) / ((n * sxx - sx * sx) * (n * syy - sy * sy)).sqrt()
            }
        };
        Ok(ScalarValue::Float64(Some(v)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
