//! `argMin`/`argMax` over many groups when the key is an integer or a time: each group's
//! best key as an `i64`, its value as a row of a kept chunk, no `ScalarValue`s.
//!
//! The general form ([`super::udaf`]'s `ArgGroups`) keeps a `(ScalarValue, ScalarValue)` per
//! group: building, comparing, sizing and dropping them per group and per batch, and
//! turning 1.7M of them back into arrays, was most of the sessions table's aggregation
//! (`argMinIf($pathname, timestamp, …)` per session) at 10M events.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{cast, interleave, take};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};

/// Whether a key of this type is compared as its `i64` (cast keeps the order).
pub(super) fn key_fits_i64(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Duration(_)
    )
}

/// No best row yet.
const NONE: (u32, u32) = (u32::MAX, u32::MAX);

pub(super) struct ArgBestI64 {
    max: bool,
    key_type: DataType,
    /// What a group without a row gives.
    empty: ScalarValue,
    /// Per group: its best key, and (chunk, row) of its value (`NONE`: no row yet).
    key: Vec<i64>,
    at: Vec<(u32, u32)>,
    /// Values of rows that were a group's best when their batch was read.
    chunks: Vec<ArrayRef>,
    chunk_rows: usize,
    chunk_bytes: usize,
    /// Scratch: the best row of the batch being read per group (`u32::MAX`: none).
    batch_best: Vec<u32>,
}

impl ArgBestI64 {
    pub(super) fn new(max: bool, key_type: DataType, empty: ScalarValue) -> Self {
        ArgBestI64 {
            max,
            key_type,
            empty,
            key: vec![],
            at: vec![],
            chunks: vec![],
            chunk_rows: 0,
            chunk_bytes: 0,
            batch_best: vec![],
        }
    }

    fn better(&self, a: i64, b: i64) -> bool {
        if self.max { a > b } else { a < b }
    }

    /// Takes the rows of (`vals`, `keys`) kept by `filter` (non-NULL both) into their
    /// groups; on equal keys the earlier row stays.
    fn add(
        &mut self,
        vals: &ArrayRef,
        keys: &ArrayRef,
        group_indices: &[usize],
        filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.key.resize(total_num_groups, 0);
        self.at.resize(total_num_groups, NONE);
        self.batch_best.resize(total_num_groups, u32::MAX);
        let keys = cast(keys, &DataType::Int64)?;
        let k = keys.as_primitive::<Int64Type>();
        let kv = k.values();
        let mut touched = Vec::new();
        for (row, &g) in group_indices.iter().enumerate() {
            if k.is_null(row)
                || vals.is_null(row)
                || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row))
            {
                continue;
            }
            let b = self.batch_best[g];
            if b == u32::MAX {
                touched.push(g);
                self.batch_best[g] = row as u32;
            } else if self.better(kv[row], kv[b as usize]) {
                self.batch_best[g] = row as u32;
            }
        }
        // The rows that beat their group's best so far: their values become a chunk.
        let mut rows = Vec::new();
        let chunk = self.chunks.len() as u32;
        for g in touched {
            let row = self.batch_best[g] as usize;
            self.batch_best[g] = u32::MAX;
            if self.at[g] == NONE || self.better(kv[row], self.key[g]) {
                self.key[g] = kv[row];
                self.at[g] = (chunk, rows.len() as u32);
                rows.push(row as u32);
            }
        }
        if !rows.is_empty() {
            let values = take(vals, &UInt32Array::from(rows), None)?;
            self.chunk_rows += values.len();
            self.chunk_bytes += values.get_array_memory_size();
            self.chunks.push(values);
        }
        // Values that lost their group's place still sit in their chunks: once they are
        // most of what is kept, the current ones are gathered into one chunk.
        if self.chunk_rows > 65_536 && self.chunk_rows > 2 * self.at.len() {
            self.compact()?;
        }
        Ok(())
    }

    /// The values of groups `at` as one array (`empty` where a group has none).
    fn gather(&self, at: &[(u32, u32)]) -> Result<ArrayRef> {
        let empty = self.empty.to_array_of_size(1)?;
        let mut arrays: Vec<&dyn Array> = self.chunks.iter().map(|c| c.as_ref()).collect();
        let empty_at = arrays.len();
        arrays.push(empty.as_ref());
        let idx: Vec<(usize, usize)> = at
            .iter()
            .map(|&(c, r)| {
                if (c, r) == NONE {
                    (empty_at, 0)
                } else {
                    (c as usize, r as usize)
                }
            })
            .collect();
        Ok(interleave(&arrays, &idx)?)
    }

    fn compact(&mut self) -> Result<()> {
        let values = self.gather(&self.at)?;
        for (g, at) in self.at.iter_mut().enumerate() {
            if *at != NONE {
                *at = (0, g as u32);
            }
        }
        self.chunk_rows = values.len();
        self.chunk_bytes = values.get_array_memory_size();
        self.chunks = vec![values];
        Ok(())
    }

    /// Groups `emit_to` names, taken out: (their values, their keys, whether each has a row).
    fn take_groups(&mut self, emit_to: EmitTo) -> Result<(ArrayRef, Vec<i64>, Vec<bool>)> {
        let n = match emit_to {
            EmitTo::All => self.at.len(),
            EmitTo::First(n) => n.min(self.at.len()),
        };
        let at: Vec<(u32, u32)> = self.at.drain(..n).collect();
        let keys: Vec<i64> = self.key.drain(..n).collect();
        self.batch_best.truncate(self.at.len());
        let values = self.gather(&at)?;
        if self.at.is_empty() {
            self.chunks.clear();
            self.chunk_rows = 0;
            self.chunk_bytes = 0;
        }
        let has = at.iter().map(|&a| a != NONE).collect();
        Ok((values, keys, has))
    }
}

impl GroupsAccumulator for ArgBestI64 {
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
        Ok(self.take_groups(emit_to)?.0)
    }

    /// (value, key) per group; the key NULL for a group without a row (such a state is
    /// skipped when merged).
    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (values, keys, has) = self.take_groups(emit_to)?;
        let nulls = datafusion::arrow::buffer::NullBuffer::from(has);
        let keys = datafusion::arrow::array::Int64Array::new(keys.into(), Some(nulls));
        Ok(vec![values, cast(&keys, &self.key_type)?])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        super::udaf::arg_states(values, opt_filter)
    }

    fn size(&self) -> usize {
        self.chunk_bytes
            + self.key.capacity() * size_of::<i64>()
            + self.at.capacity() * size_of::<(u32, u32)>()
            + self.batch_best.capacity() * size_of::<u32>()
            + self.chunks.capacity() * size_of::<ArrayRef>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};

    struct Batch {
        vals: Vec<Option<String>>,
        keys: Vec<Option<i64>>,
        groups: Vec<usize>,
        filter: Vec<bool>,
    }

    fn batches(seed: u64, n: usize, rows: usize, groups: usize) -> Vec<Batch> {
        let mut next = super::super::testutil::xorshift(seed);
        (0..n)
            .map(|_| {
                let mut b = Batch {
                    vals: vec![],
                    keys: vec![],
                    groups: vec![],
                    filter: vec![],
                };
                for _ in 0..rows {
                    let v = next();
                    b.vals
                        .push((!v.is_multiple_of(13)).then(|| format!("v{}", v % 1000)));
                    // Few distinct keys, so ties are common.
                    b.keys
                        .push((!v.is_multiple_of(17)).then_some((next() % 50) as i64 - 20));
                    b.groups.push((next() % groups as u64) as usize);
                    b.filter.push(!next().is_multiple_of(4));
                }
                b
            })
            .collect()
    }

    /// Each group's value by the definition: the first row of the best key.
    fn model(bs: &[&Batch], max: bool, groups: usize) -> Vec<Option<String>> {
        let mut best: Vec<Option<(i64, String)>> = vec![None; groups];
        for b in bs {
            for i in 0..b.vals.len() {
                let (Some(v), Some(k), true) = (&b.vals[i], b.keys[i], b.filter[i]) else {
                    continue;
                };
                let g = &mut best[b.groups[i]];
                let better = match g {
                    None => true,
                    Some((cur, _)) => {
                        if max {
                            k > *cur
                        } else {
                            k < *cur
                        }
                    }
                };
                if better {
                    *g = Some((k, v.clone()));
                }
            }
        }
        best.into_iter().map(|b| b.map(|(_, v)| v)).collect()
    }

    fn acc(max: bool) -> ArgBestI64 {
        ArgBestI64::new(
            max,
            DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None),
            ScalarValue::Utf8(None),
        )
    }

    fn update(a: &mut ArgBestI64, b: &Batch, groups: usize) {
        let vals: ArrayRef = Arc::new(StringArray::from(b.vals.clone()));
        let keys: ArrayRef = Arc::new(TimestampMicrosecondArray::from(b.keys.clone()));
        let filter = BooleanArray::from(b.filter.clone());
        a.update_batch(&[vals, keys], &b.groups, Some(&filter), groups)
            .unwrap();
    }

    fn text(a: &ArrayRef) -> Vec<Option<String>> {
        a.as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_owned))
            .collect()
    }

    use std::sync::Arc;

    #[test]
    fn one_phase_and_merged_states_equal_the_definition() {
        for max in [false, true] {
            let bs = batches(3, 8, 500, 37);
            let all: Vec<&Batch> = bs.iter().collect();
            let mut one = acc(max);
            for b in &bs {
                update(&mut one, b, 37);
            }
            assert_eq!(
                text(&one.evaluate(EmitTo::All).unwrap()),
                model(&all, max, 37)
            );
            // Two partial accumulators, merged first-half first: ties keep the first half's.
            let (first, second) = bs.split_at(4);
            let mut total = acc(max);
            let groups: Vec<usize> = (0..37).collect();
            for half in [first, second] {
                let mut part = acc(max);
                for b in half {
                    update(&mut part, b, 37);
                }
                total
                    .merge_batch(&part.state(EmitTo::All).unwrap(), &groups, 37)
                    .unwrap();
            }
            assert_eq!(
                text(&total.evaluate(EmitTo::All).unwrap()),
                model(&all, max, 37)
            );
        }
    }

    #[test]
    fn first_groups_emitted_and_chunks_compacted() {
        let bs = batches(9, 60, 4096, 5);
        let all: Vec<&Batch> = bs.iter().collect();
        let mut a = acc(true);
        for b in &bs {
            update(&mut a, b, 5);
        }
        // 245 760 rows into 5 groups: the chunks were gathered back to the 5 values.
        assert!(a.chunk_rows <= 65_536 + 5 * 60, "{}", a.chunk_rows);
        let want = model(&all, true, 5);
        assert_eq!(text(&a.evaluate(EmitTo::First(2)).unwrap()), want[..2]);
        assert_eq!(text(&a.evaluate(EmitTo::All).unwrap()), want[2..]);
        assert_eq!(a.chunk_bytes, 0);
    }

    #[test]
    fn groups_without_rows_give_the_empty_value_and_a_null_key() {
        let mut a = ArgBestI64::new(false, DataType::Int64, ScalarValue::Int64(Some(0)));
        let vals: ArrayRef = Arc::new(Int64Array::from(vec![Some(7), None, Some(9)]));
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(2), Some(1), Some(1)]));
        a.update_batch(&[vals, keys], &[0, 0, 0], None, 3).unwrap();
        let state = a.state(EmitTo::All).unwrap();
        let v = state[0].as_primitive::<Int64Type>();
        let k = state[1].as_primitive::<Int64Type>();
        assert_eq!(
            (v.value(0), k.value(0)),
            (9, 1),
            "the NULL value's row is skipped"
        );
        assert!(k.is_null(1) && k.is_null(2));
        let keys_for_type = cast(&state[1], &DataType::Int64).unwrap();
        assert_eq!(keys_for_type.len(), 3);
    }
}
