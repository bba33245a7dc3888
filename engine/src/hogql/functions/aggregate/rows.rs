//! Aggregates that keep their (non-NULL) rows and answer from all of them at the end:
//! ClickHouse's bit aggregates, `sumWithOverflow`, `deltaSum`, `deltaSumTimestamp`,
//! `anyHeavy`, `medianExactLow/High/Weighted`, `medianBFloat16`, `simpleLinearRegression`,
//! `groupArrayMovingSum/Avg`, `groupArrayInsertAt`, `maxIntersections(Position)` and the
//! categorical statistics (`contingency`, `cramersV`, `cramersVBiasCorrected`, `theilsU`).
//!
//! The state is each argument's rows as a list, so partial states merge by concatenation and
//! the answer is computed once from every row. Rows where an argument is NULL are skipped
//! (ClickHouse's Null combinator). Order-dependent ones (`deltaSum`, `anyHeavy`,
//! `groupArrayMoving*`, `groupArrayInsertAt` on a repeated position) read the rows in the order
//! they arrive, as ClickHouse does on one thread. Every kernel's values were checked against
//! ClickHouse (chdb).

use super::default_value;
use super::udaf::list_scalar;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array, new_empty_array};
use datafusion::arrow::compute::{and, cast, concat, filter, is_not_null, take};
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Fields, Float64Type, Int64Type, UInt64Type,
};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a [`Rows`] aggregate computes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum RowsKind {
    /// `groupBitAnd(x)`: in x's integer type; no rows give all bits set.
    BitAnd,
    /// `groupBitOr(x)`; no rows give 0.
    BitOr,
    /// `groupBitXor(x)`; no rows give 0.
    BitXor,
    /// `sumWithOverflow(x)`: the sum in x's own type, wrapping.
    SumWithOverflow,
    /// `deltaSum(x)`: the sum of the positive differences between consecutive rows, in x's
    /// type; never NULL (0 for no rows).
    DeltaSum,
    /// `deltaSumTimestamp(x, t)`: as `deltaSum` over the rows in order (ClickHouse uses the
    /// timestamps only to order partial states, which here merge in arrival order).
    DeltaSumTimestamp,
    /// `anyHeavy(x)`: the majority-vote candidate (Boyer–Moore) over the rows in order.
    AnyHeavy,
    /// `medianExactLow(x)`: the sorted values' element at ⌊(n−1)/2⌋ (NaNs skipped).
    MedianLow,
    /// `medianExactHigh(x)`: the element at ⌊n/2⌋.
    MedianHigh,
    /// `medianExactWeighted(x, w)`: the least value whose cumulative weight reaches
    /// ⌈Σw / 2⌉ (the first value when all weights are 0).
    MedianWeighted,
    /// `medianBFloat16(x)`: values truncated to bfloat16 (the upper 16 bits of their Float32),
    /// the least whose cumulative count reaches ⌈n / 2⌉, as Float64.
    MedianBFloat16,
    /// `medianTiming(x)` / `medianTimingWeighted(x, w)` while ClickHouse's is exact
    /// (`timing.rs`).
    MedianTiming { weighted: bool },
    /// `medianTDigest(x)` / `medianTDigestWeighted(x, w)`: ClickHouse's t-digest (`tdigest.rs`).
    MedianTDigest { weighted: bool },
    /// `simpleLinearRegression(x, y)`: the least-squares `(k, b)` of `y = k·x + b`.
    LinearRegression,
    /// `groupArrayMovingSum([w])(x)`: the running sums over the last w (default all) rows.
    MovingSum(Option<usize>),
    /// `groupArrayMovingAvg([w])(x)`: the moving sums divided by w (default: the row count).
    MovingAvg(Option<usize>),
    /// `groupArrayInsertAt([default[, size]])(x, pos)`: x at each position (the first row for
    /// a repeated one), gaps filled with the default.
    InsertAt {
        default: Option<ScalarValue>,
        size: Option<usize>,
    },
    /// `maxIntersections(start, end)`: the most intervals covering one point (an end is
    /// counted before a start at the same point).
    MaxIntersections,
    /// `maxIntersectionsPosition(start, end)`: the first point where that maximum is reached.
    MaxIntersectionsPosition,
    /// `contingency(a, b)`: √(φ² / (φ² + 1)).
    Contingency,
    /// `cramersV(a, b)`: √(φ² / min(|A| − 1, |B| − 1)).
    CramersV,
    /// `cramersVBiasCorrected(a, b)`.
    CramersVBiasCorrected,
    /// `theilsU(a, b)`: (H(a) − Σ p(a,b)·ln p(a|b)) / H(a) with H(a) = Σ p(a)·ln p(a).
    TheilsU,
    /// `sumMap(keys, values…)` / `minMap` / `maxMap`: per key (sorted), the values' sum (in
    /// the 64-bit type), least or greatest; a key whose values were all NULL answers the
    /// default. As a tuple of arrays `(keys, values…)`, sumMap leaving out keys whose sums
    /// are all 0; with `map_out` (the argument was a Map) as a Map, zeros kept.
    KeyedMap { op: KeyedOp, map_out: bool },
    /// `groupBitmapAnd/Or/Xor(bitmap)`: the cardinality of the bitmaps' intersection, union or
    /// symmetric difference, in the bitmaps' value type (0 for no rows).
    BitmapAgg(BitmapOp),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum BitmapOp {
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum KeyedOp {
    Sum,
    Min,
    Max,
}

impl RowsKind {
    fn name(&self) -> String {
        match self {
            RowsKind::BitAnd => "groupBitAnd".into(),
            RowsKind::BitOr => "groupBitOr".into(),
            RowsKind::BitXor => "groupBitXor".into(),
            RowsKind::SumWithOverflow => "sumWithOverflow".into(),
            RowsKind::DeltaSum => "deltaSum".into(),
            RowsKind::DeltaSumTimestamp => "deltaSumTimestamp".into(),
            RowsKind::AnyHeavy => "anyHeavy".into(),
            RowsKind::MedianLow => "medianExactLow".into(),
            RowsKind::MedianHigh => "medianExactHigh".into(),
            RowsKind::MedianWeighted => "medianExactWeighted".into(),
            RowsKind::MedianBFloat16 => "medianBFloat16".into(),
            RowsKind::MedianTiming { weighted: false } => "medianTiming".into(),
            RowsKind::MedianTiming { weighted: true } => "medianTimingWeighted".into(),
            RowsKind::MedianTDigest { weighted: false } => "medianTDigest".into(),
            RowsKind::MedianTDigest { weighted: true } => "medianTDigestWeighted".into(),
            RowsKind::LinearRegression => "simpleLinearRegression".into(),
            RowsKind::MovingSum(None) => "groupArrayMovingSum".into(),
            RowsKind::MovingSum(Some(w)) => format!("groupArrayMovingSum({w})"),
            RowsKind::MovingAvg(None) => "groupArrayMovingAvg".into(),
            RowsKind::MovingAvg(Some(w)) => format!("groupArrayMovingAvg({w})"),
            RowsKind::InsertAt { default, size } => match (default, size) {
                (None, _) => "groupArrayInsertAt".into(),
                (Some(d), None) => format!("groupArrayInsertAt({d})"),
                (Some(d), Some(s)) => format!("groupArrayInsertAt({d}, {s})"),
            },
            RowsKind::MaxIntersections => "maxIntersections".into(),
            RowsKind::MaxIntersectionsPosition => "maxIntersectionsPosition".into(),
            RowsKind::Contingency => "contingency".into(),
            RowsKind::CramersV => "cramersV".into(),
            RowsKind::CramersVBiasCorrected => "cramersVBiasCorrected".into(),
            RowsKind::TheilsU => "theilsU".into(),
            RowsKind::KeyedMap { op, .. } => match op {
                KeyedOp::Sum => "sumMap".into(),
                KeyedOp::Min => "minMap".into(),
                KeyedOp::Max => "maxMap".into(),
            },
            RowsKind::BitmapAgg(op) => match op {
                BitmapOp::Xor => "groupBitmapXor".into(),
                BitmapOp::And => "groupBitmapAnd".into(),
                BitmapOp::Or => "groupBitmapOr".into(),
            },
        }
    }

    /// Whether the answer is NULL for no rows when an argument is Nullable (ClickHouse's
    /// Null combinator); the others answer their empty value and are never NULL.
    fn null_when_empty(&self) -> bool {
        !matches!(
            self,
            RowsKind::DeltaSum
                | RowsKind::DeltaSumTimestamp
                | RowsKind::MovingSum(_)
                | RowsKind::MovingAvg(_)
                | RowsKind::InsertAt { .. }
                | RowsKind::KeyedMap { .. }
                | RowsKind::BitmapAgg(_)
        )
    }
}

/// ClickHouse's sum type for the moving sums: Int64, UInt64 or Float64.
pub(super) fn wide_type(t: &DataType) -> DataType {
    if t.is_floating() {
        DataType::Float64
    } else if t.is_unsigned_integer() {
        DataType::UInt64
    } else {
        DataType::Int64
    }
}

pub(super) fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

fn regression_fields() -> Fields {
    Fields::from(vec![
        Field::new("k", DataType::Float64, false),
        Field::new("b", DataType::Float64, false),
    ])
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Rows {
    kind: RowsKind,
    name: String,
    signature: Signature,
}

impl Rows {
    pub(super) fn new(kind: RowsKind, args: usize) -> Self {
        Rows {
            name: kind.name(),
            kind,
            signature: Signature::any(args, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Rows {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let t = &arg_types[0];
        Ok(match &self.kind {
            RowsKind::MedianBFloat16
            | RowsKind::Contingency
            | RowsKind::CramersV
            | RowsKind::CramersVBiasCorrected
            | RowsKind::TheilsU => DataType::Float64,
            RowsKind::LinearRegression => DataType::Struct(regression_fields()),
            RowsKind::MedianTiming { .. } | RowsKind::MedianTDigest { .. } => DataType::Float32,
            RowsKind::MovingSum(_) => list_of(wide_type(t)),
            RowsKind::MovingAvg(_) => list_of(DataType::Float64),
            RowsKind::InsertAt { .. } => list_of(t.clone()),
            RowsKind::MaxIntersections => DataType::UInt64,
            RowsKind::BitmapAgg(_) => super::bitmaps::bitmap_item(t).unwrap_or(DataType::UInt64),
            RowsKind::KeyedMap { op, map_out } => {
                let item = |t: &DataType| match t {
                    DataType::List(f) => f.data_type().clone(),
                    t => t.clone(),
                };
                let value = |t: &DataType| {
                    if *op == KeyedOp::Sum {
                        wide_type(&item(t))
                    } else {
                        item(t)
                    }
                };
                if *map_out {
                    super::maps::map_type(item(t), value(&arg_types[1]), false)
                } else {
                    let mut fields = vec![Field::new("c0", t.clone(), false)];
                    for (i, vt) in arg_types[1..].iter().enumerate() {
                        fields.push(Field::new(format!("c{}", i + 1), list_of(value(vt)), false));
                    }
                    DataType::Struct(Fields::from(fields))
                }
            }
            _ => t.clone(),
        })
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let types: Vec<DataType> = arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let nullable = self.kind.null_when_empty() && arg_fields.iter().any(|f| f.is_nullable());
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            nullable,
        )))
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        Ok(match data_type {
            DataType::List(f) => super::empty_list(f),
            _ => ScalarValue::try_from(data_type)?,
        })
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(args
            .input_fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                Arc::new(Field::new(
                    format_state_name(args.name, &format!("rows{i}")),
                    list_of(f.data_type().clone()),
                    true,
                ))
            })
            .collect())
    }

    fn accumulator(&self, acc_args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        let f = acc_args.expr_fields;
        let types: Vec<DataType> = f.iter().map(|f| f.data_type().clone()).collect();
        Ok(Box::new(RowsAcc {
            kind: self.kind.clone(),
            out: self.return_type(&types)?,
            types,
            nullable_input: self.kind.null_when_empty() && f.iter().any(|f| f.is_nullable()),
            chunks: vec![],
            bytes: 0,
        }))
    }
}

#[derive(Debug)]
struct RowsAcc {
    kind: RowsKind,
    types: Vec<DataType>,
    out: DataType,
    nullable_input: bool,
    /// Batches of rows, one array per argument each, NULL-free.
    chunks: Vec<Vec<ArrayRef>>,
    bytes: usize,
}

impl RowsAcc {
    /// Keeps the rows where no argument is NULL.
    fn push(&mut self, cols: Vec<ArrayRef>) -> Result<()> {
        let mut keep = None;
        for c in &cols {
            if c.null_count() > 0 {
                let nn = is_not_null(c)?;
                keep = Some(match keep {
                    None => nn,
                    Some(k) => and(&k, &nn)?,
                });
            }
        }
        let cols = match keep {
            Some(k) => cols
                .iter()
                .map(|c| filter(c, &k))
                .collect::<std::result::Result<Vec<_>, _>>()?,
            None => cols,
        };
        if cols.first().is_some_and(|c| !c.is_empty()) {
            self.bytes += cols
                .iter()
                .map(|c| c.get_array_memory_size())
                .sum::<usize>();
            self.chunks.push(cols);
        }
        Ok(())
    }

    /// All rows, one array per argument.
    fn all(&self) -> Result<Vec<ArrayRef>> {
        (0..self.types.len())
            .map(|i| {
                if self.chunks.is_empty() {
                    return Ok(new_empty_array(&self.types[i]));
                }
                let parts: Vec<&dyn Array> = self.chunks.iter().map(|c| c[i].as_ref()).collect();
                Ok(concat(&parts)?)
            })
            .collect()
    }
}

impl Accumulator for RowsAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.push(values.to_vec())
    }

    /// Each state row's lists are copied out (a slice would keep the states' whole buffer
    /// alive and count it in every group's size).
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: Vec<_> = states.iter().map(|s| s.as_list::<i32>()).collect();
        for row in 0..lists[0].len() {
            if lists.iter().any(|l| l.is_null(row)) {
                continue;
            }
            let cols = lists
                .iter()
                .map(|l| {
                    let v = l.value(row);
                    let idx = UInt32Array::from_iter_values(0..v.len() as u32);
                    take(&v, &idx, None)
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            self.push(cols)?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(self.all()?.into_iter().map(list_scalar).collect())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let cols = self.all()?;
        if cols[0].is_empty() && self.nullable_input {
            return ScalarValue::try_from(&self.out);
        }
        evaluate(&self.kind, &cols, &self.out)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.bytes
            + self.chunks.capacity() * size_of::<Vec<ArrayRef>>()
    }
}

/// A column's values as i64 (integers, bools, dates and times), u64 (unsigned) or f64.
enum Nums {
    I(Vec<i64>),
    U(Vec<u64>),
    F(Vec<f64>),
}

fn nums(a: &ArrayRef) -> Result<Nums> {
    let t = a.data_type();
    Ok(if t.is_floating() {
        Nums::F(
            cast(a, &DataType::Float64)?
                .as_primitive::<Float64Type>()
                .values()
                .to_vec(),
        )
    } else if t.is_unsigned_integer() {
        Nums::U(
            cast(a, &DataType::UInt64)?
                .as_primitive::<UInt64Type>()
                .values()
                .to_vec(),
        )
    } else {
        let a = match t {
            DataType::Date32 => cast(a, &DataType::Int32)?,
            DataType::Boolean => cast(a, &DataType::UInt8)?,
            _ => a.clone(),
        };
        Nums::I(
            cast(&a, &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .values()
                .to_vec(),
        )
    })
}

fn floats(a: &ArrayRef) -> Result<Vec<f64>> {
    Ok(match nums(a)? {
        Nums::I(v) => v.into_iter().map(|x| x as f64).collect(),
        Nums::U(v) => v.into_iter().map(|x| x as f64).collect(),
        Nums::F(v) => v,
    })
}

/// An i64 as a value of `t`, truncated to its width (integers wrap as in ClickHouse).
fn from_i64(v: i64, t: &DataType) -> Result<ScalarValue> {
    Ok(match t {
        DataType::Int8 => ScalarValue::Int8(Some(v as i8)),
        DataType::Int16 => ScalarValue::Int16(Some(v as i16)),
        DataType::Int32 => ScalarValue::Int32(Some(v as i32)),
        DataType::Int64 => ScalarValue::Int64(Some(v)),
        DataType::Date32 => ScalarValue::Date32(Some(v as i32)),
        _ => ScalarValue::Int64(Some(v)).cast_to(t)?,
    })
}

fn from_u64(v: u64, t: &DataType) -> Result<ScalarValue> {
    Ok(match t {
        DataType::UInt8 => ScalarValue::UInt8(Some(v as u8)),
        DataType::UInt16 => ScalarValue::UInt16(Some(v as u16)),
        DataType::UInt32 => ScalarValue::UInt32(Some(v as u32)),
        _ => ScalarValue::UInt64(Some(v)).cast_to(t)?,
    })
}

fn from_f64(v: f64, t: &DataType) -> Result<ScalarValue> {
    Ok(match t {
        DataType::Float32 => ScalarValue::Float32(Some(v as f32)),
        _ => ScalarValue::Float64(Some(v)),
    })
}

/// Folds the values with `i`, `u` or `f` from `init`, answering in `t`.
fn fold(
    a: &ArrayRef,
    t: &DataType,
    init: (i64, u64, f64),
    i: impl Fn(i64, i64) -> i64,
    u: impl Fn(u64, u64) -> u64,
    f: impl Fn(f64, f64) -> f64,
) -> Result<ScalarValue> {
    match nums(a)? {
        Nums::I(v) => from_i64(v.into_iter().fold(init.0, i), t),
        Nums::U(v) => from_u64(v.into_iter().fold(init.1, u), t),
        Nums::F(v) => from_f64(v.into_iter().fold(init.2, f), t),
    }
}

/// Σ of the positive steps between consecutive values, wrapping in the value's type.
fn delta_sum(a: &ArrayRef, t: &DataType) -> Result<ScalarValue> {
    match nums(a)? {
        Nums::I(v) => {
            let s = v.windows(2).fold(0i64, |s, w| {
                if w[1] > w[0] {
                    s.wrapping_add(w[1].wrapping_sub(w[0]))
                } else {
                    s
                }
            });
            from_i64(s, t)
        }
        Nums::U(v) => {
            let s = v.windows(2).fold(0u64, |s, w| {
                if w[1] > w[0] {
                    s.wrapping_add(w[1] - w[0])
                } else {
                    s
                }
            });
            from_u64(s, t)
        }
        Nums::F(v) => {
            let s = v
                .windows(2)
                .fold(0f64, |s, w| if w[1] > w[0] { s + (w[1] - w[0]) } else { s });
            from_f64(s, t)
        }
    }
}

/// Indices of `a` sorted by value (NaNs of floats left out), stable.
fn sorted_indices(a: &ArrayRef) -> Result<Vec<usize>> {
    let mut idx: Vec<usize> = (0..a.len()).collect();
    match nums(a)? {
        Nums::I(v) => idx.sort_by_key(|&i| v[i]),
        Nums::U(v) => idx.sort_by_key(|&i| v[i]),
        Nums::F(v) => {
            idx.retain(|&i| !v[i].is_nan());
            idx.sort_by(|&x, &y| v[x].total_cmp(&v[y]));
        }
    }
    Ok(idx)
}

/// The least value whose cumulative weight reaches ⌈total·level⌉ over (sort key, weight)
/// pairs sorted by key; the last when none does; None for no pairs.
fn weighted_pick(mut pairs: Vec<(usize, u128)>, level: f64) -> Option<usize> {
    let total: u128 = pairs.iter().map(|p| p.1).sum();
    let threshold = (total as f64 * level).ceil();
    let mut acc = 0u128;
    for (i, w) in &pairs {
        acc += w;
        if acc as f64 >= threshold {
            return Some(*i);
        }
    }
    pairs.pop().map(|p| p.0)
}

/// A Float32's bfloat16 (its upper 16 bits), back as f64.
fn bfloat16(x: f64) -> f64 {
    let bits = (x as f32).to_bits() & 0xFFFF_0000;
    f32::from_bits(bits) as f64
}

/// Per-row keys of `a` that compare equal exactly when the values do.
pub(super) fn keys(a: &ArrayRef) -> Result<Vec<Vec<u8>>> {
    let conv = RowConverter::new(vec![SortField::new(a.data_type().clone())])?;
    let rows = conv.convert_columns(std::slice::from_ref(a))?;
    Ok((0..rows.num_rows())
        .map(|i| rows.row(i).as_ref().to_vec())
        .collect())
}

fn evaluate(kind: &RowsKind, cols: &[ArrayRef], out: &DataType) -> Result<ScalarValue> {
    let x = &cols[0];
    let t = x.data_type();
    let n = x.len();
    match kind {
        RowsKind::BitAnd => fold(
            x,
            t,
            (-1, u64::MAX, 0.0),
            |a, b| a & b,
            |a, b| a & b,
            |a, _| a,
        ),
        RowsKind::BitOr => fold(x, t, (0, 0, 0.0), |a, b| a | b, |a, b| a | b, |a, _| a),
        RowsKind::BitXor => fold(x, t, (0, 0, 0.0), |a, b| a ^ b, |a, b| a ^ b, |a, _| a),
        RowsKind::SumWithOverflow => fold(
            x,
            t,
            (0, 0, 0.0),
            i64::wrapping_add,
            u64::wrapping_add,
            |a, b| a + b,
        ),
        RowsKind::DeltaSum | RowsKind::DeltaSumTimestamp => delta_sum(x, t),
        RowsKind::AnyHeavy => {
            if n == 0 {
                return Ok(default_value(t));
            }
            let k = keys(x)?;
            let (mut cand, mut count) = (0usize, 0u64);
            for i in 0..n {
                if count > 0 && k[i] == k[cand] {
                    count += 1;
                } else if count == 0 {
                    cand = i;
                    count = 1;
                } else {
                    count -= 1;
                }
            }
            ScalarValue::try_from_array(x, cand)
        }
        RowsKind::MedianLow | RowsKind::MedianHigh => {
            let idx = sorted_indices(x)?;
            let m = idx.len();
            if m == 0 {
                return Ok(default_value(t));
            }
            let i = if *kind == RowsKind::MedianLow {
                (m - 1) / 2
            } else {
                m / 2
            };
            ScalarValue::try_from_array(x, idx[i])
        }
        RowsKind::MedianWeighted => {
            let w = match nums(&cols[1])? {
                Nums::U(v) => v,
                Nums::I(v) => {
                    if v.iter().any(|w| *w < 0) {
                        return exec_err!("medianExactWeighted: a weight is negative");
                    }
                    v.into_iter().map(|w| w as u64).collect()
                }
                Nums::F(_) => return exec_err!("medianExactWeighted: weights must be integers"),
            };
            // Equal values pool their weights.
            let idx = sorted_indices(x)?;
            let k = keys(x)?;
            let mut pairs: Vec<(usize, u128)> = vec![];
            for i in idx {
                match pairs.last_mut() {
                    Some((j, sum)) if k[*j] == k[i] => *sum += w[i] as u128,
                    _ => pairs.push((i, w[i] as u128)),
                }
            }
            match weighted_pick(pairs, 0.5) {
                Some(i) => ScalarValue::try_from_array(x, i),
                None => Ok(default_value(t)),
            }
        }
        RowsKind::MedianBFloat16 => {
            let mut v: Vec<f64> = floats(x)?
                .into_iter()
                .filter(|v| !v.is_nan())
                .map(bfloat16)
                .collect();
            v.sort_by(f64::total_cmp);
            let pairs = v.iter().enumerate().map(|(i, _)| (i, 1u128)).collect();
            Ok(ScalarValue::Float64(Some(
                weighted_pick(pairs, 0.5).map_or(f64::NAN, |i| v[i]),
            )))
        }
        RowsKind::MedianTDigest { weighted } => {
            let w = if *weighted {
                Some(weights(&cols[1], "medianTDigestWeighted")?)
            } else {
                None
            };
            super::tdigest::median(&floats(x)?, w.as_deref())
        }
        RowsKind::MedianTiming { weighted } => {
            let w = if *weighted {
                Some(weights(&cols[1], "medianTimingWeighted")?)
            } else {
                None
            };
            super::timing::median(&floats(x)?, w.as_deref())
        }
        RowsKind::LinearRegression => {
            let (xs, ys) = (floats(x)?, floats(&cols[1])?);
            let c = n as f64;
            let (mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0);
            for (a, b) in xs.iter().zip(&ys) {
                sx += a;
                sy += b;
                sxx += a * a;
                sxy += a * b;
            }
            let div = sxx * c - sx * sx;
            let k = if div == 0.0 {
                f64::NAN
            } else {
                (sxy * c - sx * sy) / div
            };
            let b = if n == 0 { f64::NAN } else { (sy - k * sx) / c };
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(datafusion::arrow::array::Float64Array::from(vec![k])),
                Arc::new(datafusion::arrow::array::Float64Array::from(vec![b])),
            ];
            let s =
                datafusion::arrow::array::StructArray::try_new(regression_fields(), arrays, None)?;
            Ok(ScalarValue::Struct(Arc::new(s)))
        }
        RowsKind::MovingSum(w) | RowsKind::MovingAvg(w) => {
            let avg = matches!(kind, RowsKind::MovingAvg(_));
            let win = w.unwrap_or(usize::MAX);
            let divisor = w.unwrap_or(n) as f64;
            let item = match out {
                DataType::List(f) => f.data_type().clone(),
                _ => return exec_err!("groupArrayMoving: unexpected type {out}"),
            };
            let values: Vec<ScalarValue> = match nums(x)? {
                Nums::I(v) => moving(&v, win, 0i64, i64::wrapping_add, i64::wrapping_sub)
                    .into_iter()
                    .map(|s| {
                        if avg {
                            ScalarValue::Float64(Some(s as f64 / divisor))
                        } else {
                            ScalarValue::Int64(Some(s))
                        }
                    })
                    .collect(),
                Nums::U(v) => moving(&v, win, 0u64, u64::wrapping_add, u64::wrapping_sub)
                    .into_iter()
                    .map(|s| {
                        if avg {
                            ScalarValue::Float64(Some(s as f64 / divisor))
                        } else {
                            ScalarValue::UInt64(Some(s))
                        }
                    })
                    .collect(),
                Nums::F(v) => moving(&v, win, 0f64, |a, b| a + b, |a, b| a - b)
                    .into_iter()
                    .map(|s| ScalarValue::Float64(Some(if avg { s / divisor } else { s })))
                    .collect(),
            };
            let arr = if values.is_empty() {
                new_empty_array(&item)
            } else {
                ScalarValue::iter_to_array(values)?
            };
            Ok(list_scalar(arr))
        }
        RowsKind::InsertAt { default, size } => {
            let pos = match nums(&cols[1])? {
                Nums::U(v) => v,
                Nums::I(v) => {
                    if v.iter().any(|p| *p < 0) {
                        return exec_err!("groupArrayInsertAt: a position is negative");
                    }
                    v.into_iter().map(|p| p as u64).collect()
                }
                Nums::F(_) => return exec_err!("groupArrayInsertAt: positions must be integers"),
            };
            const MAX: u64 = 0xFF_FFFF;
            if let Some(p) = pos.iter().find(|p| **p > MAX) {
                return exec_err!("groupArrayInsertAt: position {p} is too large (at most {MAX})");
            }
            let len = match size {
                Some(s) => *s,
                None => pos.iter().max().map_or(0, |m| *m as usize + 1),
            };
            // For each slot, the first row put there.
            let mut slot: Vec<Option<u32>> = vec![None; len];
            for (row, p) in pos.iter().enumerate() {
                if let Some(s) = slot.get_mut(*p as usize)
                    && s.is_none()
                {
                    *s = Some(row as u32);
                }
            }
            let fill = match default {
                Some(d) => d.cast_to(t)?,
                None => default_value(t),
            };
            let mut items = Vec::with_capacity(len);
            for s in slot {
                items.push(match s {
                    Some(r) => ScalarValue::try_from_array(x, r as usize)?,
                    None => fill.clone(),
                });
            }
            let arr = if items.is_empty() {
                new_empty_array(t)
            } else {
                ScalarValue::iter_to_array(items)?
            };
            Ok(list_scalar(arr))
        }
        RowsKind::MaxIntersections | RowsKind::MaxIntersectionsPosition => {
            // (point, +1 start / −1 end), an end before a start at the same point.
            let (s, e) = (floats(x)?, floats(&cols[1])?);
            let mut events: Vec<(f64, i8, usize)> = Vec::with_capacity(2 * n);
            for i in 0..n {
                events.push((s[i], 1, i));
                events.push((e[i], -1, i));
            }
            events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let (mut cur, mut best, mut at) = (0i64, 0i64, None);
            for (_, d, i) in &events {
                cur += *d as i64;
                if cur > best {
                    best = cur;
                    at = Some(*i);
                }
            }
            if *kind == RowsKind::MaxIntersections {
                Ok(ScalarValue::UInt64(Some(best as u64)))
            } else {
                match at {
                    Some(i) => ScalarValue::try_from_array(x, i),
                    None => Ok(default_value(t)),
                }
            }
        }
        RowsKind::KeyedMap { op, map_out } => super::keyed::keyed_map(*op, *map_out, cols, out),
        RowsKind::BitmapAgg(op) => {
            let bitmaps = super::bitmaps::read(x)?;
            let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
            for b in &bitmaps {
                for v in b.values() {
                    *counts.entry(*v).or_default() += 1;
                }
            }
            let card = match op {
                BitmapOp::And => counts.values().filter(|c| **c == bitmaps.len()).count(),
                BitmapOp::Or => counts.len(),
                BitmapOp::Xor => counts.values().filter(|c| *c % 2 == 1).count(),
            };
            from_u64(card as u64, out)
        }
        RowsKind::Contingency
        | RowsKind::CramersV
        | RowsKind::CramersVBiasCorrected
        | RowsKind::TheilsU => Ok(ScalarValue::Float64(Some(super::crosstab::statistic(
            kind, x, &cols[1],
        )?))),
    }
}

/// A weight column as u64 (non-negative integers only).
fn weights(a: &ArrayRef, name: &str) -> Result<Vec<u64>> {
    match nums(a)? {
        Nums::U(v) => Ok(v),
        Nums::I(v) if v.iter().all(|w| *w >= 0) => Ok(v.into_iter().map(|w| w as u64).collect()),
        _ => exec_err!("{name}: weights must be non-negative integers"),
    }
}

/// Running sums of the last `win` values.
fn moving<T: Copy>(
    v: &[T],
    win: usize,
    zero: T,
    add: impl Fn(T, T) -> T,
    sub: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    let mut s = zero;
    for i in 0..v.len() {
        s = add(s, v[i]);
        if i >= win {
            s = sub(s, v[i - win]);
        }
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Table, col, lit};
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{Expr, cast};
    use std::sync::Arc;

    /// n: 1 3 2 5 1 4 (not Nullable); f: the same as floats with two NULLs; s: strings.
    fn table() -> Table {
        let n: ArrayRef = Arc::new(Int64Array::from(vec![1, 3, 2, 5, 1, 4]));
        let f: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            None,
            Some(2.0),
            Some(5.0),
            None,
            Some(4.0),
        ]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "x", "y", "x", "y", "y"]));
        Table::new(vec![("n", n, false), ("f", f, true), ("s", s, false)])
    }

    /// Values (checked against chdb) over one partition, and over 1–3 partitions for the
    /// order-independent ones (the states merge).
    fn check(t: &Table, cases: Vec<(Expr, &str)>, order_independent: bool) {
        let parts: &[usize] = if order_independent { &[1, 2, 3] } else { &[1] };
        for &p in parts {
            let out = t.agg_parts(p, cases.iter().map(|c| c.0.clone()).collect());
            for (i, (e, want)) in cases.iter().enumerate() {
                let got = out[i].one();
                // Floats summed in another order differ in the last bits.
                let close = match (got.parse::<f64>(), want.parse::<f64>()) {
                    (Ok(a), Ok(b)) => (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                    _ => false,
                };
                assert!(
                    got == *want || close,
                    "{e} ({p} partitions): {got} != {want}"
                );
            }
        }
    }

    #[test]
    fn bits_and_sums() {
        let t = table();
        let none = col("n").gt(lit(100));
        check(
            &t,
            vec![
                (t.f("groupBitAnd", vec![col("n")]), "0"),
                (t.f("groupBitOr", vec![col("n")]), "7"),
                (t.f("groupBitXor", vec![col("n")]), "0"),
                (t.f("groupBitAndIf", vec![col("n"), none]), "-1"),
                (
                    t.f("sumWithOverflow", vec![cast(col("n"), DataType::Int8)]),
                    "16",
                ),
                (t.f("sumWithOverflow", vec![col("f")]), "12.0"),
            ],
            true,
        );
        let none = col("n").gt(lit(100));
        let u8n = cast(col("n"), DataType::UInt8);
        check(
            &t,
            vec![(t.f("groupBitAndIf", vec![u8n, none]), "255")],
            true,
        );
        // 20·(1+3+2+5+1+4) = 320 wraps in Int8 to 64
        let big = cast(col("n") * lit(20i64), DataType::Int8);
        check(&t, vec![(t.f("sumWithOverflow", vec![big]), "64")], true);
    }

    #[test]
    fn order_dependent() {
        let t = table();
        check(
            &t,
            vec![
                (t.f("deltaSum", vec![col("n")]), "8"),
                (t.f("deltaSum", vec![col("f")]), "4.0"),
                (t.f("deltaSumTimestamp", vec![col("n"), col("n")]), "8"),
                (t.f("anyHeavy", vec![col("s")]), "x"),
                (t.f("anyHeavy", vec![col("n")]), "1"),
                (
                    t.p("groupArrayMovingSum", vec![lit(2)], vec![col("n")]),
                    "[1, 4, 5, 7, 6, 5]",
                ),
                (
                    t.f("groupArrayMovingAvg", vec![col("f")]),
                    "[0.25, 0.75, 2.0, 3.0]",
                ),
                (
                    t.f(
                        "groupArrayInsertAt",
                        vec![col("s"), cast(col("n"), DataType::UInt32)],
                    ),
                    "[, x, y, x, y, x]",
                ),
                (
                    t.p(
                        "groupArrayInsertAt",
                        vec![lit("-"), lit(3)],
                        vec![col("s"), cast(col("n"), DataType::UInt32)],
                    ),
                    "[-, x, y]",
                ),
            ],
            false,
        );
    }

    #[test]
    fn medians_and_statistics() {
        let t = table();
        check(
            &t,
            vec![
                (t.f("medianExactLow", vec![col("n")]), "2"),
                (t.f("medianExactHigh", vec![col("n")]), "3"),
                (t.f("medianExactLow", vec![col("f")]), "2.0"),
                (t.f("medianExactHigh", vec![col("f")]), "4.0"),
                (
                    t.f("medianExactLowIf", vec![col("f"), col("n").gt(lit(100))]),
                    "NULL",
                ),
                (
                    t.f(
                        "medianExactWeighted",
                        vec![col("n"), cast(col("n"), DataType::UInt64)],
                    ),
                    "4",
                ),
                (t.f("medianBFloat16", vec![col("n") * lit(33i64)]), "66.0"),
                (t.f("medianDeterministic", vec![col("n"), lit(1)]), "2.5"),
                (t.f("medianTiming", vec![col("n")]), "3.0"),
                (
                    t.f("medianTiming", vec![col("n") * lit(10000i64)]),
                    "30000.0",
                ),
                (
                    t.f(
                        "medianTimingWeighted",
                        vec![col("n"), cast(col("n"), DataType::UInt8)],
                    ),
                    "4.0",
                ),
                (
                    t.f("medianTimingIf", vec![col("f"), col("n").gt(lit(100))]),
                    "NULL",
                ),
                (
                    t.f("simpleLinearRegression", vec![col("n"), col("f")]),
                    "{k: 1.0, b: 0.0}",
                ),
                (
                    t.f("maxIntersections", vec![col("n"), col("n") + lit(1i64)]),
                    "2",
                ),
                (
                    t.f(
                        "maxIntersectionsPosition",
                        vec![col("n"), col("n") + lit(1i64)],
                    ),
                    "1",
                ),
                (
                    t.f("cramersV", vec![col("n"), col("s")]),
                    "0.816496580927726",
                ),
                (t.f("theilsU", vec![col("s"), col("s")]), "1.0"),
                (t.f("theilsU", vec![lit(1), col("s")]), "0.0"),
            ],
            true,
        );
    }

    #[test]
    fn keyed_maps() {
        let t = table();
        let arr = |e: Expr| t.f("array", vec![e]);
        check(
            &t,
            vec![
                (
                    t.f("sumMap", vec![arr(col("s")), arr(col("n"))]),
                    "{c0: [x, y], c1: [9, 7]}",
                ),
                (
                    t.f("minMap", vec![arr(col("s")), arr(col("f"))]),
                    "{c0: [x, y], c1: [1.0, 2.0]}",
                ),
                (
                    t.f("maxMap", vec![arr(col("s")), arr(col("n"))]),
                    "{c0: [x, y], c1: [5, 4]}",
                ),
            ],
            true,
        );
        // a zero sum drops its key; a Map argument answers a Map and keeps it
        let zero = col("n") - col("n");
        check(
            &t,
            vec![(
                t.f("sumMap", vec![arr(col("s")), arr(zero.clone())]),
                "{c0: [], c1: []}",
            )],
            true,
        );
        let m = t.f("map", vec![col("s"), zero]);
        check(&t, vec![(t.f("sumMap", vec![m]), "{x: 0, y: 0}")], true);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let t = table();
        let arg = |e: Expr| super::super::super::Arg::Expr(e);
        for (name, params, args) in [
            ("groupBitOr", vec![], vec![col("s")]),
            ("deltaSum", vec![], vec![col("s")]),
            ("medianExactWeighted", vec![], vec![col("n"), col("f")]),
            ("groupArrayMovingSum", vec![lit(0)], vec![col("n")]),
            ("groupArrayInsertAt", vec![], vec![col("n"), col("s")]),
            ("maxIntersections", vec![], vec![col("n"), col("f")]),
            ("medianDeterministic", vec![], vec![col("n"), col("s")]),
            ("sumMap", vec![], vec![col("n")]),
        ] {
            let r = t.try_call(name, params, args.into_iter().map(arg).collect(), false);
            assert!(r.is_err(), "{name}");
        }
    }
}
