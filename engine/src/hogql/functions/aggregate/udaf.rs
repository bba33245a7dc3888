//! Our aggregate functions, each with a mergeable state so multi-partition aggregation is
//! right: `Collect` (quantiles, groupArray, groupUniqArray, topK), `ArgMinMax`, and
//! `WindowFunnel`.

use super::arg_best::{ArgBestI64, key_fits_i64};
use super::collect_groups::{CollectGroups, CollectRule};
use super::default_value;
use super::groups::{GroupStates, HeapSize};
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
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};
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
    /// `quantileExact(p)(x)` / `quantilesExact(…)(x)`: the sorted values' element at
    /// position ⌊p·n⌋ (the last for p = 1), no interpolation, in the argument's own type;
    /// no values give the type's default.
    QuantilesExact { levels: Vec<u64>, array: bool },
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
            CollectKind::QuantilesExact {
                levels: l,
                array: true,
            } => format!("quantilesExact({})", levels(l)),
            CollectKind::QuantilesExact {
                levels: l,
                array: false,
            } => format!("quantileExact({})", levels(l)),
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
            CollectKind::QuantilesExact { array: false, .. } => t.clone(),
            _ => list_type(t),
        })
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let types: Vec<DataType> = arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let dt = self.return_type(&types)?;
        let nullable = matches!(
            self.kind,
            CollectKind::Quantiles { array: false, .. }
                | CollectKind::QuantilesExact { array: false, .. }
        ) && arg_fields[0].is_nullable();
        Ok(Arc::new(Field::new(self.name(), dt, nullable)))
    }

    fn is_nullable(&self) -> bool {
        matches!(
            self.kind,
            CollectKind::Quantiles { array: false, .. }
                | CollectKind::QuantilesExact { array: false, .. }
        )
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

    fn groups_accumulator_supported(&self, _: AccumulatorArgs<'_>) -> bool {
        self.collect_rule().is_some()
    }

    fn create_groups_accumulator(
        &self,
        acc_args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let Some(rule) = self.collect_rule() else {
            return exec_err!("{} has no groups accumulator", self.name);
        };
        let dt = acc_args.expr_fields[0].data_type().clone();
        Ok(Box::new(CollectGroups::new(rule, dt)))
    }
}

impl Collect {
    /// The arrays a groups accumulator builds for this aggregate, if it is one of them.
    fn collect_rule(&self) -> Option<CollectRule> {
        match self.kind {
            CollectKind::GroupArray { limit } => Some(CollectRule {
                unique: false,
                limit,
            }),
            CollectKind::GroupUniqArray { limit } => Some(CollectRule {
                unique: true,
                limit,
            }),
            _ => None,
        }
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

    /// Each state's values are copied out of the states' shared buffer: a slice would keep
    /// the whole buffer alive for every group and count it in every group's `size`, so a
    /// grouped `groupUniqArray` over thousands of persons reported gigabytes it did not
    /// hold and failed the query's memory limit.
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                let v = lists.value(i);
                let all =
                    datafusion::arrow::array::UInt32Array::from_iter_values(0..v.len() as u32);
                self.push(take(&v, &all, None)?)?;
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
            CollectKind::QuantilesExact { levels, array } => {
                let all = self.all()?;
                let idx = datafusion::arrow::compute::sort_to_indices(&all, None, None)?;
                let sorted = take(&all, &idx, None)?;
                let n = sorted.len();
                let mut out = vec![];
                for bits in levels {
                    let p = f64::from_bits(*bits);
                    out.push(if n == 0 && self.nullable_input && !*array {
                        ScalarValue::try_from(&self.dt)?
                    } else if n == 0 {
                        default_value(&self.dt)
                    } else {
                        let i = if p < 1.0 {
                            (p * n as f64) as usize
                        } else {
                            n - 1
                        };
                        ScalarValue::try_from_array(&sorted, i.min(n - 1))?
                    });
                }
                if *array {
                    let arr = ScalarValue::iter_to_array(out).or_else(|_| {
                        Ok::<_, datafusion::error::DataFusionError>(new_empty_array(&self.dt))
                    })?;
                    Ok(list_scalar(arr))
                } else {
                    Ok(out.pop().expect("one level"))
                }
            }
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

    fn groups_accumulator_supported(&self, _: AccumulatorArgs<'_>) -> bool {
        true
    }

    /// Per group, the best (value, key) so far; each batch first finds each group's best
    /// row by comparing rows of the batch, then compares that row once with the group's
    /// best. DataFusion's adapter for the row accumulator gathered each group's rows out of
    /// every batch instead: the sessions table (an `argMinIf` per entry column, grouped by
    /// session) spent most of its time there.
    fn create_groups_accumulator(
        &self,
        acc_args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let f = acc_args.expr_fields;
        let nullable_out = f.iter().any(|f| f.is_nullable());
        if key_fits_i64(f[1].data_type()) {
            let val_type = f[0].data_type();
            let empty = if nullable_out {
                ScalarValue::try_from(val_type)?
            } else {
                default_value(val_type)
            };
            return Ok(Box::new(ArgBestI64::new(
                self.max,
                f[1].data_type().clone(),
                empty,
            )));
        }
        Ok(Box::new(ArgGroups {
            max: self.max,
            val_type: f[0].data_type().clone(),
            key_type: f[1].data_type().clone(),
            nullable_out: f.iter().any(|f| f.is_nullable()),
            best: GroupStates::default(),
            batch_best: vec![],
        }))
    }
}

/// `argMin`/`argMax` rows as states of their own: each row's value and key, the key NULL
/// where `opt_filter` drops the row (a state with a NULL key is skipped when merged).
pub(super) fn arg_states(
    values: &[ArrayRef],
    opt_filter: Option<&BooleanArray>,
) -> Result<Vec<ArrayRef>> {
    let Some(filter) = opt_filter else {
        return Ok(values.to_vec());
    };
    // A NULL in the filter drops the row too.
    let keep = if filter.null_count() > 0 {
        datafusion::arrow::compute::prep_null_mask_filter(filter)
    } else {
        filter.clone()
    };
    let dropped = datafusion::arrow::compute::not(&keep)?;
    Ok(vec![
        values[0].clone(),
        datafusion::arrow::compute::nullif(&values[1], &dropped)?,
    ])
}

/// [`ArgAcc`] for many groups at once.
struct ArgGroups {
    max: bool,
    val_type: DataType,
    key_type: DataType,
    nullable_out: bool,
    best: GroupStates<Best>,
    /// Scratch, by group: the best row of the batch being read (`u32::MAX`: none yet).
    batch_best: Vec<u32>,
}

/// A group's (value, key) of its best row so far.
#[derive(Default)]
struct Best(Option<(ScalarValue, ScalarValue)>);

impl HeapSize for Best {
    fn heap_size(&self) -> usize {
        self.0.as_ref().map_or(0, |(v, k)| v.size() + k.size())
    }
}

impl ArgGroups {
    fn wanted(&self) -> std::cmp::Ordering {
        if self.max {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        }
    }

    /// Takes the rows of (`vals`, `keys`) kept by `filter` (non-NULL both) into their groups.
    fn add(
        &mut self,
        vals: &ArrayRef,
        keys: &ArrayRef,
        group_indices: &[usize],
        filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.best.resize(total_num_groups);
        self.batch_best.resize(total_num_groups, u32::MAX);
        let wanted = self.wanted();
        let cmp = datafusion::arrow::array::make_comparator(
            keys.as_ref(),
            keys.as_ref(),
            SortOptions::default(),
        )?;
        let mut touched = Vec::new();
        for (row, &g) in group_indices.iter().enumerate() {
            if keys.is_null(row)
                || vals.is_null(row)
                || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row))
            {
                continue;
            }
            let b = self.batch_best[g];
            if b == u32::MAX {
                touched.push(g);
                self.batch_best[g] = row as u32;
            } else if cmp(row, b as usize) == wanted {
                self.batch_best[g] = row as u32;
            }
        }
        for g in touched {
            let row = self.batch_best[g] as usize;
            self.batch_best[g] = u32::MAX;
            let key = ScalarValue::try_from_array(keys, row)?;
            let replace = match &self.best.get(g).0 {
                None => true,
                Some((_, cur)) => key.partial_cmp(cur) == Some(wanted),
            };
            if replace {
                let new = (ScalarValue::try_from_array(vals, row)?, key);
                self.best.update(g, |best| best.0 = Some(new));
            }
        }
        Ok(())
    }

    fn take(&mut self, emit_to: EmitTo) -> Vec<Option<(ScalarValue, ScalarValue)>> {
        let taken = self.best.take(emit_to);
        if let EmitTo::First(n) = emit_to {
            self.batch_best.drain(..n.min(self.batch_best.len()));
        } else {
            self.batch_best.clear();
        }
        taken.into_iter().map(|b| b.0).collect()
    }
}

impl GroupsAccumulator for ArgGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(
            &values[0],
            &values[1],
            group_indices,
            opt_filter,
            total_num_groups,
        )
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(
            &values[0],
            &values[1],
            group_indices,
            None,
            total_num_groups,
        )
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let empty = if self.nullable_out {
            ScalarValue::try_from(&self.val_type)?
        } else {
            default_value(&self.val_type)
        };
        let taken = self.take(emit_to);
        if taken.is_empty() {
            return Ok(new_empty_array(&self.val_type));
        }
        ScalarValue::iter_to_array(
            taken
                .into_iter()
                .map(|p| p.map_or_else(|| empty.clone(), |(v, _)| v)),
        )
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (val_type, key_type) = (self.val_type.clone(), self.key_type.clone());
        let taken = self.take(emit_to);
        if taken.is_empty() {
            return Ok(vec![new_empty_array(&val_type), new_empty_array(&key_type)]);
        }
        let null_val = ScalarValue::try_from(&val_type)?;
        let null_key = ScalarValue::try_from(&key_type)?;
        let (vals, keys): (Vec<ScalarValue>, Vec<ScalarValue>) = taken
            .into_iter()
            .map(|p| p.unwrap_or_else(|| (null_val.clone(), null_key.clone())))
            .unzip();
        Ok(vec![
            ScalarValue::iter_to_array(vals)?,
            ScalarValue::iter_to_array(keys)?,
        ])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        arg_states(values, opt_filter)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.best.size()
            + self.batch_best.capacity() * size_of::<u32>()
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

    fn groups_accumulator_supported(&self, _: AccumulatorArgs<'_>) -> bool {
        true
    }

    /// One list of events per group, filled straight from the batch by group index:
    /// DataFusion's adapter for a row accumulator instead gathers every group's rows out of
    /// each batch (a `take` per group per batch), which made a funnel grouped by person
    /// spend most of its time copying (half its CPU at 2M events).
    fn create_groups_accumulator(
        &self,
        _: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(FunnelGroups {
            window: self.window,
            levels: self.levels,
            events: GroupStates::default(),
        }))
    }
}

/// Calls `f(row, timestamp, step)` for each condition that holds on each row kept by
/// `filter` whose timestamp is not NULL (NULL conditions are false).
fn each_funnel_event(
    values: &[ArrayRef],
    levels: usize,
    filter: Option<&BooleanArray>,
    mut f: impl FnMut(usize, i64, u8),
) -> Result<()> {
    let ts = values[0].as_primitive::<Int64Type>();
    let conds: Vec<&BooleanArray> = values[1..].iter().map(|c| c.as_boolean()).collect();
    if conds.len() != levels {
        return exec_err!("windowFunnel: expected {levels} conditions");
    }
    for row in 0..ts.len() {
        if ts.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
            continue;
        }
        let t = ts.value(row);
        for (step, c) in conds.iter().enumerate() {
            if c.is_valid(row) && c.value(row) {
                f(row, t, step as u8);
            }
        }
    }
    Ok(())
}

/// Calls `f(row, timestamp, step)` for each event of each row's state (two lists).
fn each_funnel_state_event(states: &[ArrayRef], mut f: impl FnMut(usize, i64, u8)) {
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
        for (t, s) in t.values().iter().zip(s.values().iter()) {
            f(i, *t, *s);
        }
    }
}

/// The deepest step of a funnel of `levels` steps that `events` reach within `window`
/// (see [`WindowFunnel`]); sorts `events`.
fn funnel_level(events: &mut [(i64, u8)], window: i64, levels: usize) -> u8 {
    events.sort_unstable();
    let mut chain_start: Vec<Option<i64>> = vec![None; levels];
    for &(t, step) in events.iter() {
        let step = step as usize;
        if step == 0 {
            chain_start[0] = Some(t);
        } else if let Some(first) = chain_start[step - 1]
            && t <= first.saturating_add(window)
        {
            chain_start[step] = Some(first);
            if step + 1 == levels {
                return levels as u8;
            }
        }
    }
    chain_start
        .iter()
        .rposition(|s| s.is_some())
        .map_or(0, |i| i + 1) as u8
}

/// Events of many states as the state's two list columns.
fn funnel_state<'a>(groups: impl Iterator<Item = &'a [(i64, u8)]>) -> Vec<ArrayRef> {
    let mut lengths = Vec::new();
    let mut ts = Vec::new();
    let mut steps = Vec::new();
    for events in groups {
        lengths.push(events.len());
        ts.extend(events.iter().map(|e| e.0));
        steps.extend(events.iter().map(|e| e.1));
    }
    let offsets = OffsetBuffer::from_lengths(lengths);
    let list = |values: ArrayRef| -> ArrayRef {
        let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
        Arc::new(ListArray::new(field, offsets.clone(), values, None))
    };
    vec![
        list(Arc::new(Int64Array::from(ts))),
        list(Arc::new(UInt8Array::from(steps))),
    ]
}

#[derive(Debug)]
struct FunnelAcc {
    window: i64,
    levels: usize,
    events: Vec<(i64, u8)>,
}

impl Accumulator for FunnelAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        each_funnel_event(values, self.levels, None, |_, t, s| {
            self.events.push((t, s))
        })
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        each_funnel_state_event(states, |_, t, s| self.events.push((t, s)));
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        funnel_state(std::iter::once(self.events.as_slice()))
            .iter()
            .map(|a| ScalarValue::try_from_array(a, 0))
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::UInt8(Some(funnel_level(
            &mut self.events,
            self.window,
            self.levels,
        ))))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.events.heap_size()
    }
}

/// [`FunnelAcc`] for many groups at once.
struct FunnelGroups {
    window: i64,
    levels: usize,
    events: GroupStates<Vec<(i64, u8)>>,
}

impl HeapSize for Vec<(i64, u8)> {
    fn heap_size(&self) -> usize {
        self.capacity() * size_of::<(i64, u8)>()
    }
}

impl FunnelGroups {
    fn push(&mut self, group: usize, event: (i64, u8)) {
        self.events.update(group, |events| events.push(event));
    }
}

impl GroupsAccumulator for FunnelGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.events.resize(total_num_groups);
        let levels = self.levels;
        each_funnel_event(values, levels, opt_filter, |row, t, s| {
            self.push(group_indices[row], (t, s))
        })
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.events.resize(total_num_groups);
        each_funnel_state_event(values, |row, t, s| self.push(group_indices[row], (t, s)));
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let (window, levels) = (self.window, self.levels);
        let taken = self.events.take(emit_to);
        Ok(Arc::new(UInt8Array::from_iter_values(
            taken
                .into_iter()
                .map(|mut e| funnel_level(&mut e, window, levels)),
        )))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let taken = self.events.take(emit_to);
        Ok(funnel_state(taken.iter().map(Vec::as_slice)))
    }

    /// Each row as a state of its own (DataFusion skips the partial aggregation when it
    /// finds nearly every row a group of its own).
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut rows: Vec<Vec<(i64, u8)>> = vec![Vec::new(); values[0].len()];
        each_funnel_event(values, self.levels, opt_filter, |row, t, s| {
            rows[row].push((t, s))
        })?;
        Ok(funnel_state(rows.iter().map(Vec::as_slice)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.events.size()
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringArray;

    /// States merged from one shared buffer are counted by what each group holds, not by
    /// the buffer (the lifecycle's `groupUniqArray` per person hit the memory limit).
    #[test]
    fn collected_states_count_only_their_own_values() {
        let values: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..100_000).map(|i| format!("2024-03-{:02} 00:00:00 {i}", i % 28 + 1)),
        ));
        let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(1, 100_000));
        let states: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(DataType::Utf8, true)),
            offsets,
            values.clone(),
            None,
        ));
        let whole = values.get_array_memory_size();
        let mut acc = CollectAcc {
            kind: CollectKind::GroupUniqArray { limit: None },
            dt: DataType::Utf8,
            nullable_input: false,
            values: vec![],
            len: 0,
        };
        acc.merge_batch(&[states.slice(7, 1)]).unwrap();
        assert!(acc.size() < whole / 100, "{} of {whole}", acc.size());
    }

    fn arg_groups(max: bool) -> ArgGroups {
        ArgGroups {
            max,
            val_type: DataType::Utf8,
            key_type: DataType::Int64,
            nullable_out: true,
            best: GroupStates::default(),
            batch_best: vec![],
        }
    }

    fn strings(a: &ArrayRef) -> Vec<Option<String>> {
        a.as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_owned))
            .collect()
    }

    /// argMin/argMax per group: the first row on ties, NULL arguments skipped, a group with
    /// no row NULL; alike when fed directly, through merged partial states, through rows
    /// turned into states (with a filter), and emitted in parts.
    #[test]
    fn arg_groups_answer_per_group() {
        // (group, value, key)
        let rows: Vec<(usize, Option<&str>, Option<i64>)> = vec![
            (0, Some("a"), Some(5)),
            (1, Some("x"), Some(1)),
            (0, Some("b"), Some(3)),
            (0, Some("c"), Some(3)),
            (2, None, Some(0)),
            (1, Some("y"), None),
            (0, Some("d"), Some(9)),
            (1, Some("z"), Some(7)),
        ];
        let groups: Vec<usize> = rows.iter().map(|r| r.0).collect();
        let vals: ArrayRef = Arc::new(StringArray::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        ));
        let keys: ArrayRef = Arc::new(Int64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        ));
        let args = vec![vals, keys];
        let s = |v: &[Option<&str>]| v.iter().map(|x| x.map(str::to_owned)).collect::<Vec<_>>();
        for (max, want) in [
            (false, s(&[Some("b"), Some("x"), None])),
            (true, s(&[Some("d"), Some("z"), None])),
        ] {
            let mut direct = arg_groups(max);
            direct.update_batch(&args, &groups, None, 3).unwrap();
            assert!(direct.size() > 0);
            assert_eq!(strings(&direct.evaluate(EmitTo::All).unwrap()), want);
            assert_eq!(direct.best.heap_bytes(), 0);

            let mut total = arg_groups(max);
            for range in [0..4, 4..8] {
                let part: Vec<ArrayRef> = args.iter().map(|a| a.slice(range.start, 4)).collect();
                let mut partial = arg_groups(max);
                partial
                    .update_batch(&part, &groups[range], None, 3)
                    .unwrap();
                total
                    .merge_batch(&partial.state(EmitTo::All).unwrap(), &[0, 1, 2], 3)
                    .unwrap();
            }
            assert_eq!(
                strings(&total.evaluate(EmitTo::First(1)).unwrap()),
                want[..1]
            );
            assert_eq!(strings(&total.evaluate(EmitTo::All).unwrap()), want[1..]);

            // Rows as states; the filter drops group 0's winner, so the next one wins.
            let drop_row = if max { 6 } else { 2 };
            let keep = BooleanArray::from_iter((0..rows.len()).map(|i| Some(i != drop_row)));
            let mut from_rows = arg_groups(max);
            let states = from_rows.convert_to_state(&args, Some(&keep)).unwrap();
            from_rows.merge_batch(&states, &groups, 3).unwrap();
            let got = strings(&from_rows.evaluate(EmitTo::All).unwrap());
            assert_eq!(got[0].as_deref(), Some(if max { "a" } else { "c" }));
            assert_eq!(got[1..], want[1..]);
        }
    }

    /// (group, timestamp, conditions) rows as the arguments of a three-step funnel.
    fn funnel_args(rows: &[(usize, i64, [bool; 3])]) -> (Vec<usize>, Vec<ArrayRef>) {
        let groups = rows.iter().map(|r| r.0).collect();
        let mut args: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.1),
        ))];
        for step in 0..3 {
            args.push(Arc::new(BooleanArray::from_iter(
                rows.iter().map(|r| Some(r.2[step])),
            )));
        }
        (groups, args)
    }

    /// The groups accumulator answers as one row accumulator per group, fed directly,
    /// through states merged in two parts, and emitted in two parts.
    #[test]
    fn funnel_groups_answer_as_one_accumulator_per_group() {
        let (t, f) = (true, false);
        // Group 0 completes within the window; 1 reaches step 2 (step 3 too late);
        // 2 has no first step; 3 completes out of order in time (sorted by time).
        let rows = [
            (0, 10, [t, f, f]),
            (1, 0, [t, f, f]),
            (0, 15, [f, t, f]),
            (2, 5, [f, t, f]),
            (1, 50, [f, t, f]),
            (0, 19, [f, f, t]),
            (1, 200, [f, f, t]),
            (3, 30, [f, f, t]),
            (3, 10, [t, f, f]),
            (3, 20, [f, t, t]),
        ];
        let want = [3u8, 2, 0, 3];
        let (groups, args) = funnel_args(&rows);
        let wf = WindowFunnel::new(60, 3);
        let groups_acc = || FunnelGroups {
            window: 60,
            levels: 3,
            events: GroupStates::default(),
        };
        for (g, want) in want.iter().enumerate() {
            let mut acc = FunnelAcc {
                window: wf.window,
                levels: 3,
                events: vec![],
            };
            let mine: Vec<(i64, [bool; 3])> = rows
                .iter()
                .filter(|r| r.0 == g)
                .map(|r| (r.1, r.2))
                .collect();
            let (_, a) = funnel_args(&mine.iter().map(|r| (0, r.0, r.1)).collect::<Vec<_>>());
            acc.update_batch(&a).unwrap();
            assert_eq!(acc.evaluate().unwrap(), ScalarValue::UInt8(Some(*want)));
        }
        let mut direct = groups_acc();
        direct.update_batch(&args, &groups, None, 4).unwrap();
        assert!(direct.size() > size_of::<FunnelGroups>());
        let got = direct.evaluate(EmitTo::All).unwrap();
        assert_eq!(got.as_primitive::<UInt8Type>().values(), &want);
        assert_eq!(direct.events.heap_bytes(), 0, "emitting releases the lists");

        // Half the rows in each of two partial accumulators, then merged.
        let (first, second) = rows.split_at(5);
        let mut total = groups_acc();
        for part in [first, second] {
            let (g, a) = funnel_args(part);
            let mut partial = groups_acc();
            partial.update_batch(&a, &g, None, 4).unwrap();
            total
                .merge_batch(&partial.state(EmitTo::All).unwrap(), &[0, 1, 2, 3], 4)
                .unwrap();
        }
        let first_two = total.evaluate(EmitTo::First(2)).unwrap();
        assert_eq!(first_two.as_primitive::<UInt8Type>().values(), &want[..2]);
        let rest = total.evaluate(EmitTo::All).unwrap();
        assert_eq!(rest.as_primitive::<UInt8Type>().values(), &want[2..]);

        // Rows turned into states one by one merge to the same answers.
        let mut from_rows = groups_acc();
        let states = from_rows.convert_to_state(&args, None).unwrap();
        assert_eq!(states[0].len(), rows.len());
        from_rows.merge_batch(&states, &groups, 4).unwrap();
        let got = from_rows.evaluate(EmitTo::All).unwrap();
        assert_eq!(got.as_primitive::<UInt8Type>().values(), &want);

        // A filter drops rows: without group 0's last step it reaches step 2.
        let keep = BooleanArray::from_iter(rows.iter().map(|r| Some(!(r.0 == 0 && r.1 == 19))));
        let mut filtered = groups_acc();
        filtered
            .update_batch(&args, &groups, Some(&keep), 4)
            .unwrap();
        let got = filtered.evaluate(EmitTo::First(1)).unwrap();
        assert_eq!(got.as_primitive::<UInt8Type>().values(), &[2]);
    }
}
