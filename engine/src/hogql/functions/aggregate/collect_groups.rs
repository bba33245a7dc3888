//! `groupArray` and `groupUniqArray` per group without an accumulator object per group.
//!
//! DataFusion runs an aggregate that has only a row [`Accumulator`] through an adapter that
//! keeps one boxed accumulator per group, slices every batch per group and asks each
//! accumulator its size after every update: for the per-person arrays of the retention,
//! lifecycle and paths insights (10⁵–10⁶ groups) that bookkeeping cost more than the
//! aggregation itself (the retention node spent a fifth of its CPU in `size` alone at 10M
//! events). Here a batch's kept values are stored once, as a chunk, and each kept row is an
//! entry (group, chunk, row); emitting gathers each group's entries in arrival order with one
//! `interleave`.
//!
//! [`Accumulator`]: datafusion::logical_expr::Accumulator

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, UInt32Array, new_empty_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{interleave, take};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::Result;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use std::collections::HashSet;
use std::sync::Arc;

/// What the arrays keep: every value in order, or each distinct value once (first
/// occurrence first); at most `limit` of them when given.
#[derive(Debug, Clone, Copy)]
pub(super) struct CollectRule {
    pub unique: bool,
    pub limit: Option<usize>,
}

/// Below this many entries a `groupUniqArray` never drops its duplicates early.
const DEDUP_FROM: usize = 1 << 16;

pub(super) struct CollectGroups {
    rule: CollectRule,
    dt: DataType,
    /// The values kept, a chunk per batch; an entry names a chunk and a row of it.
    chunks: Vec<ArrayRef>,
    chunk_bytes: usize,
    /// Per entry, in arrival order: its group, and (chunk, row) of its value.
    groups: Vec<u32>,
    at: Vec<(u32, u32)>,
    /// Entries per group.
    counts: Vec<u32>,
    /// Entries after the last early drop of duplicates (`unique` only).
    deduped: usize,
}

impl CollectGroups {
    pub(super) fn new(rule: CollectRule, dt: DataType) -> Self {
        CollectGroups {
            rule,
            dt,
            chunks: vec![],
            chunk_bytes: 0,
            groups: vec![],
            at: vec![],
            counts: vec![],
            deduped: 0,
        }
    }

    fn item_field(&self) -> Arc<Field> {
        Arc::new(Field::new_list_field(self.dt.clone(), true))
    }

    /// Whether group `g` takes one more value (a limit counts entries; for `unique` the
    /// limit applies to distinct values, so only when emitting).
    fn has_room(&self, g: usize) -> bool {
        match self.rule.limit {
            Some(n) if !self.rule.unique => (self.counts[g] as usize) < n,
            _ => true,
        }
    }

    /// Adds `values`' rows `rows` (each with its group, already counted) as one chunk.
    fn add_chunk(&mut self, values: &ArrayRef, rows: &[u32], groups: &[u32]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        // A chunk holds only the rows kept: a whole batch for a few of its rows would be
        // memory held for nothing.
        let chunk = if rows.len() == values.len() {
            values.clone()
        } else {
            take(values, &UInt32Array::from(rows.to_vec()), None)?
        };
        let c = self.chunks.len() as u32;
        self.chunk_bytes += chunk.get_array_memory_size();
        self.chunks.push(chunk);
        for (i, &g) in groups.iter().enumerate() {
            self.groups.push(g);
            self.at.push((c, i as u32));
        }
        if self.rule.unique && self.groups.len() >= DEDUP_FROM.max(2 * self.deduped) {
            self.drop_duplicates()?;
        }
        Ok(())
    }

    /// Entries of groups `< n`, each group's in arrival order (a counting sort by group).
    fn gather_order(&self, n: usize) -> Vec<usize> {
        let mut start = vec![0usize; n + 1];
        for g in 0..n {
            start[g + 1] = start[g] + self.counts[g] as usize;
        }
        let mut order = vec![0usize; start[n]];
        let mut next = start;
        for (e, &g) in self.groups.iter().enumerate() {
            let g = g as usize;
            if g < n {
                order[next[g]] = e;
                next[g] += 1;
            }
        }
        order
    }

    /// The values of `entries`, gathered.
    fn values_of(&self, entries: &[usize]) -> Result<ArrayRef> {
        if entries.is_empty() {
            return Ok(new_empty_array(&self.dt));
        }
        let refs: Vec<&dyn Array> = self.chunks.iter().map(|c| c.as_ref()).collect();
        let idx: Vec<(usize, usize)> = entries
            .iter()
            .map(|&e| (self.at[e].0 as usize, self.at[e].1 as usize))
            .collect();
        Ok(interleave(&refs, &idx)?)
    }

    /// Groups `< n` as lists, and each group's entry count kept (duplicates dropped and the
    /// limit applied as the rule says).
    fn lists(&self, n: usize) -> Result<(ArrayRef, Vec<u32>)> {
        let order = self.gather_order(n);
        let values = self.values_of(&order)?;
        let mut lens: Vec<u32> = self.counts[..n].to_vec();
        let values = if self.rule.unique {
            let (keep, kept_lens) = first_of_each(&values, &lens, self.rule.limit)?;
            lens = kept_lens;
            take(&values, &UInt32Array::from(keep), None)?
        } else {
            values
        };
        let list = ListArray::new(
            self.item_field(),
            OffsetBuffer::from_lengths(lens.iter().map(|&l| l as usize)),
            values,
            None,
        );
        Ok((Arc::new(list), lens))
    }

    /// Takes groups `emit_to` names out as lists; the others stay, renumbered from 0.
    fn emit(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let n = match emit_to {
            EmitTo::All => self.counts.len(),
            EmitTo::First(n) => n.min(self.counts.len()),
        };
        let (lists, _) = self.lists(n)?;
        if n == self.counts.len() {
            self.clear();
        } else {
            // The groups left are rebuilt into one chunk of their own.
            let rest: Vec<usize> = (0..self.groups.len())
                .filter(|&e| self.groups[e] as usize >= n)
                .collect();
            let chunk = self.values_of(&rest)?;
            let groups: Vec<u32> = rest.iter().map(|&e| self.groups[e] - n as u32).collect();
            let counts = self.counts.split_off(n);
            self.clear();
            self.counts = counts;
            self.chunk_bytes = chunk.get_array_memory_size();
            self.at = (0..rest.len() as u32).map(|r| (0, r)).collect();
            self.chunks.push(chunk);
            self.groups = groups;
            self.deduped = self.groups.len();
        }
        Ok(lists)
    }

    /// Everything dropped, memory too.
    fn clear(&mut self) {
        *self = CollectGroups::new(self.rule, self.dt.clone());
    }

    /// `groupUniqArray` over many rows per group: the duplicates so far are dropped, every
    /// group's first occurrences kept in order, so memory follows the distinct values.
    fn drop_duplicates(&mut self) -> Result<()> {
        let n = self.counts.len();
        let order = self.gather_order(n);
        let values = self.values_of(&order)?;
        let (keep, lens) = first_of_each(&values, &self.counts, None)?;
        let chunk = take(&values, &UInt32Array::from(keep), None)?;
        self.groups = lens
            .iter()
            .enumerate()
            .flat_map(|(g, &l)| std::iter::repeat_n(g as u32, l as usize))
            .collect();
        self.at = (0..self.groups.len() as u32).map(|r| (0, r)).collect();
        self.counts = lens;
        self.chunk_bytes = chunk.get_array_memory_size();
        self.chunks = vec![chunk];
        self.deduped = self.groups.len();
        Ok(())
    }
}

/// In `values` laid out group after group (`lens` each), the rows of each value's first
/// occurrence in its group, at most `limit` per group, and how many each group keeps.
fn first_of_each(
    values: &ArrayRef,
    lens: &[u32],
    limit: Option<usize>,
) -> Result<(Vec<u32>, Vec<u32>)> {
    let conv = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    let rows = conv.convert_columns(std::slice::from_ref(values))?;
    let mut keep = Vec::new();
    let mut kept = Vec::with_capacity(lens.len());
    let mut seen = HashSet::new();
    let mut at = 0usize;
    for &len in lens {
        seen.clear();
        let mut k = 0u32;
        for i in at..at + len as usize {
            if limit.is_some_and(|n| k as usize >= n) {
                break;
            }
            if seen.insert(rows.row(i)) {
                keep.push(i as u32);
                k += 1;
            }
        }
        kept.push(k);
        at += len as usize;
    }
    Ok((keep, kept))
}

impl GroupsAccumulator for CollectGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.counts.resize(total_num_groups, 0);
        let values = &values[0];
        let mut rows = Vec::new();
        let mut groups = Vec::new();
        for (i, &g) in group_indices.iter().enumerate() {
            let passes = opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
            if passes && values.is_valid(i) && self.has_room(g) {
                rows.push(i as u32);
                groups.push(g as u32);
                self.counts[g] += 1;
            }
        }
        self.add_chunk(values, &rows, &groups)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.counts.resize(total_num_groups, 0);
        let lists = values[0].as_list::<i32>();
        let items = lists.values();
        let offsets = lists.value_offsets();
        let mut rows = Vec::new();
        let mut groups = Vec::new();
        for (i, &g) in group_indices.iter().enumerate() {
            if lists.is_null(i) {
                continue;
            }
            for r in offsets[i] as usize..offsets[i + 1] as usize {
                if !self.has_room(g) {
                    break;
                }
                rows.push(r as u32);
                groups.push(g as u32);
                self.counts[g] += 1;
            }
        }
        self.add_chunk(items, &rows, &groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.emit(emit_to)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.emit(emit_to)?])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = &values[0];
        let kept: Vec<u32> = (0..values.len())
            .filter(|&i| {
                values.is_valid(i)
                    && opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i))
                    && self.rule.limit != Some(0)
            })
            .map(|i| i as u32)
            .collect();
        let mut lens = vec![0usize; values.len()];
        for &i in &kept {
            lens[i as usize] = 1;
        }
        let items = take(values, &UInt32Array::from(kept), None)?;
        Ok(vec![Arc::new(ListArray::new(
            self.item_field(),
            OffsetBuffer::from_lengths(lens),
            items,
            None,
        ))])
    }

    fn size(&self) -> usize {
        self.chunk_bytes
            + self.chunks.capacity() * size_of::<ArrayRef>()
            + self.groups.capacity() * size_of::<u32>()
            + self.at.capacity() * size_of::<(u32, u32)>()
            + self.counts.capacity() * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};

    /// A batch: values (NULL where `None`), each row's group, and the FILTER mask.
    struct Batch {
        values: Vec<Option<i64>>,
        groups: Vec<usize>,
        filter: Vec<bool>,
    }

    fn batches(seed: u64, n_batches: usize, rows: usize, n_groups: usize) -> Vec<Batch> {
        let mut next = super::super::testutil::xorshift(seed);
        (0..n_batches)
            .map(|_| {
                let mut b = Batch {
                    values: vec![],
                    groups: vec![],
                    filter: vec![],
                };
                for _ in 0..rows {
                    let v = next();
                    b.values
                        .push((!v.is_multiple_of(11)).then_some((v >> 8) as i64 % 7));
                    b.groups.push((next() % n_groups as u64) as usize);
                    b.filter.push(!next().is_multiple_of(5));
                }
                b
            })
            .collect()
    }

    /// What each group's array must be, by the rule's definition.
    fn model(bs: &[Batch], rule: CollectRule, n_groups: usize, filtered: bool) -> Vec<Vec<i64>> {
        let mut out = vec![vec![]; n_groups];
        for b in bs {
            for i in 0..b.values.len() {
                let (Some(v), true) = (b.values[i], !filtered || b.filter[i]) else {
                    continue;
                };
                let g: &mut Vec<i64> = &mut out[b.groups[i]];
                if rule.unique && g.contains(&v) {
                    continue;
                }
                if rule.limit.is_none_or(|n| g.len() < n) {
                    g.push(v);
                }
            }
        }
        out
    }

    fn update(acc: &mut CollectGroups, b: &Batch, n_groups: usize, filtered: bool) {
        let values: ArrayRef = Arc::new(Int64Array::from(b.values.clone()));
        let filter = BooleanArray::from(b.filter.clone());
        acc.update_batch(&[values], &b.groups, filtered.then_some(&filter), n_groups)
            .unwrap();
    }

    fn rows(lists: &ArrayRef) -> Vec<Vec<i64>> {
        let lists = lists.as_list::<i32>();
        (0..lists.len())
            .map(|i| {
                let v = lists.value(i);
                let v = v.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                v.values().to_vec()
            })
            .collect()
    }

    const RULES: [CollectRule; 4] = [
        CollectRule {
            unique: false,
            limit: None,
        },
        CollectRule {
            unique: false,
            limit: Some(3),
        },
        CollectRule {
            unique: true,
            limit: None,
        },
        CollectRule {
            unique: true,
            limit: Some(2),
        },
    ];

    #[test]
    fn one_phase_equals_the_definition() {
        for rule in RULES {
            for filtered in [false, true] {
                let bs = batches(7, 5, 300, 17);
                let mut acc = CollectGroups::new(rule, DataType::Int64);
                for b in &bs {
                    update(&mut acc, b, 17, filtered);
                }
                let got = rows(&acc.evaluate(EmitTo::All).unwrap());
                assert_eq!(got, model(&bs, rule, 17, filtered), "{rule:?}");
                assert_eq!(acc.size(), 0, "emptied after emitting all");
            }
        }
    }

    #[test]
    fn partial_states_merge_to_the_definition() {
        for rule in RULES {
            let bs = batches(11, 6, 250, 9);
            // Two partial accumulators (odd and even batches), merged in batch order
            // would interleave; merge the first's groups then the second's, so compare
            // against the model of the batches in that order.
            let (first, second): (Vec<_>, Vec<_>) =
                bs.iter().enumerate().partition(|(i, _)| i % 2 == 0);
            let mut a = CollectGroups::new(rule, DataType::Int64);
            let mut b = CollectGroups::new(rule, DataType::Int64);
            for (_, x) in &first {
                update(&mut a, x, 9, true);
            }
            for (_, x) in &second {
                update(&mut b, x, 9, true);
            }
            let mut total = CollectGroups::new(rule, DataType::Int64);
            let groups: Vec<usize> = (0..9).collect();
            total
                .merge_batch(&a.state(EmitTo::All).unwrap(), &groups, 9)
                .unwrap();
            total
                .merge_batch(&b.state(EmitTo::All).unwrap(), &groups, 9)
                .unwrap();
            let ordered: Vec<Batch> = first
                .iter()
                .chain(second.iter())
                .map(|(_, x)| Batch {
                    values: x.values.clone(),
                    groups: x.groups.clone(),
                    filter: x.filter.clone(),
                })
                .collect();
            let got = rows(&total.evaluate(EmitTo::All).unwrap());
            assert_eq!(got, model(&ordered, rule, 9, true), "{rule:?}");
        }
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_others() {
        for rule in RULES {
            let bs = batches(3, 4, 200, 12);
            let mut acc = CollectGroups::new(rule, DataType::Int64);
            for b in &bs[..2] {
                update(&mut acc, b, 12, false);
            }
            let want = model(&bs, rule, 12, false);
            let first = rows(&acc.evaluate(EmitTo::First(5)).unwrap());
            assert_eq!(first, model(&bs[..2], rule, 12, false)[..5].to_vec());
            // The rest go on as groups 0.. (DataFusion renumbers them so).
            for b in &bs[2..] {
                let shifted = Batch {
                    values: b
                        .values
                        .iter()
                        .zip(&b.groups)
                        .filter(|(_, g)| **g >= 5)
                        .map(|(v, _)| *v)
                        .collect(),
                    groups: b
                        .groups
                        .iter()
                        .filter(|g| **g >= 5)
                        .map(|g| g - 5)
                        .collect(),
                    filter: vec![true; b.groups.iter().filter(|g| **g >= 5).count()],
                };
                update(&mut acc, &shifted, 7, false);
            }
            let rest = rows(&acc.evaluate(EmitTo::All).unwrap());
            assert_eq!(rest, want[5..].to_vec(), "{rule:?}");
        }
    }

    #[test]
    fn rows_passed_on_as_states_merge_to_the_definition() {
        for rule in RULES {
            let bs = batches(5, 3, 100, 4);
            let acc = CollectGroups::new(rule, DataType::Int64);
            let mut total = CollectGroups::new(rule, DataType::Int64);
            for b in &bs {
                let values: ArrayRef = Arc::new(Int64Array::from(b.values.clone()));
                let filter = BooleanArray::from(b.filter.clone());
                let states = acc.convert_to_state(&[values], Some(&filter)).unwrap();
                total.merge_batch(&states, &b.groups, 4).unwrap();
            }
            let got = rows(&total.evaluate(EmitTo::All).unwrap());
            assert_eq!(got, model(&bs, rule, 4, true), "{rule:?}");
        }
    }

    #[test]
    fn unique_arrays_drop_duplicates_as_they_grow() {
        let rule = RULES[2];
        let bs = batches(13, 40, 8192, 3);
        let mut acc = CollectGroups::new(rule, DataType::Int64);
        for b in &bs {
            update(&mut acc, b, 3, false);
        }
        // 327 680 rows of 7 values in 3 groups: held as at most 21 entries after a drop.
        assert!(acc.groups.len() < DEDUP_FROM, "{}", acc.groups.len());
        let got = rows(&acc.evaluate(EmitTo::All).unwrap());
        assert_eq!(got, model(&bs, rule, 3, false));
    }

    #[test]
    fn strings_and_empty_groups() {
        let mut acc = CollectGroups::new(
            CollectRule {
                unique: false,
                limit: None,
            },
            DataType::Utf8,
        );
        let values: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("b")]));
        acc.update_batch(&[values], &[2, 2, 0], None, 4).unwrap();
        let out = acc.evaluate(EmitTo::All).unwrap();
        let lists = out.as_list::<i32>();
        let text = |i: usize| {
            let v = lists.value(i);
            v.as_string::<i32>()
                .iter()
                .map(|s| s.unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(lists.len(), 4);
        assert_eq!(
            lists.null_count(),
            0,
            "a group without values is an empty array"
        );
        assert_eq!(text(0), ["b"]);
        assert!(text(1).is_empty() && text(3).is_empty());
        assert_eq!(text(2), ["a"]);
    }
}
