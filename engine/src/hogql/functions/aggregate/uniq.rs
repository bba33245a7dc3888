//! `count(DISTINCT id)` (and `uniq…(id)`) of a 16-byte id: one hash set of 128-bit keys per
//! group, as ClickHouse's `uniqExact` keeps one.
//!
//! DataFusion plans a lone `count(DISTINCT x) … GROUP BY g` as a group-by on `(g, x)`
//! followed by a count: every row is hashed into one table of all (group, id) pairs, which
//! at 2M events was the largest cost of daily active users (191 ms of partial aggregation
//! for 1.07M rows into 273 000 pairs). Here a row finds its group (the group-by already did)
//! and inserts 16 bytes into that group's set; the rows of one batch mostly share a day (the
//! files are daily), so the set it touches stays in cache. Partial states travel as one
//! binary value per group: the group's ids back to back.
//!
//! Strings are counted the same way, by a 128-bit hash of their bytes (XXH3-128), as
//! ClickHouse's `uniqExact` (what HogQL's `count(DISTINCT)` runs as) keeps a 128-bit hash
//! (SipHash) of each string. DataFusion's distinct count kept the strings themselves: 2.27 s of
//! partial aggregation for `uniq(distinct_id)` and `count(DISTINCT $session_id)` over 10M
//! events. Two distinct strings share a key with a probability of about n²/2¹²⁹ (10⁻²¹
//! for a billion distinct strings).

use std::collections::HashSet;
use std::sync::Arc;

use super::groups::{GroupStates, HeapSize};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, LargeBinaryArray, LargeBinaryBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

type IdSet = HashSet<u128, foldhash::fast::RandomState>;

/// The aggregate: the number of distinct non-NULL values of a `FixedSizeBinary(16)` or
/// string argument.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct UniqId {
    signature: Signature,
}

impl UniqId {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::one_of(
                [
                    DataType::FixedSizeBinary(16),
                    DataType::Utf8View,
                    DataType::Utf8,
                    DataType::LargeUtf8,
                ]
                .into_iter()
                .map(|t| datafusion::logical_expr::TypeSignature::Exact(vec![t]))
                .collect(),
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for UniqId {
    fn name(&self) -> &str {
        "hogql_uniq_id"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn default_value(&self, _: &DataType) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(0)))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "ids"),
            DataType::LargeBinary,
            true,
        ))])
    }

    fn accumulator(&self, _: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(UniqIdAcc::default()))
    }

    fn groups_accumulator_supported(&self, _: AccumulatorArgs<'_>) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(UniqIdGroups::default()))
    }
}

fn key(v: &[u8]) -> u128 {
    u128::from_le_bytes(v.try_into().expect("16-byte values"))
}

/// Calls `f` with each counted id of `values` (non-NULL, kept by `filter`) and its row.
fn each_id(
    values: &ArrayRef,
    filter: Option<&BooleanArray>,
    mut f: impl FnMut(usize, u128),
) -> Result<()> {
    match values.data_type() {
        DataType::FixedSizeBinary(16) => {
            each_key(values.as_fixed_size_binary().iter(), key, filter, &mut f)
        }
        DataType::Utf8View => each_key(values.as_string_view().iter(), string_key, filter, &mut f),
        DataType::Utf8 => each_key(values.as_string::<i32>().iter(), string_key, filter, &mut f),
        DataType::LargeUtf8 => {
            each_key(values.as_string::<i64>().iter(), string_key, filter, &mut f)
        }
        other => return exec_err!("hogql_uniq_id takes 16-byte ids or strings, not {other}"),
    }
    Ok(())
}

/// [`each_id`] over one array's values: a row's key is worked out only when it is counted,
/// and a value equal to the last counted one reuses its key (the files hold each event's
/// rows sorted by person, so a person's id comes in runs: at 10M events 63 % of the rows
/// repeat the row before, and hashing a string costs more than comparing it).
fn each_key<T: PartialEq + Copy>(
    values: impl Iterator<Item = Option<T>>,
    key_of: impl Fn(T) -> u128,
    filter: Option<&BooleanArray>,
    f: &mut impl FnMut(usize, u128),
) {
    let mut last: Option<(T, u128)> = None;
    for (row, v) in values.enumerate() {
        if let Some(v) = v
            && filter.is_none_or(|m| m.is_valid(row) && m.value(row))
        {
            let key = match last {
                Some((l, k)) if l == v => k,
                _ => {
                    let k = key_of(v);
                    last = Some((v, k));
                    k
                }
            };
            f(row, key);
        }
    }
}

/// A string's key: the XXH3-128 of its bytes. SipHash-2-4-128 (what ClickHouse keeps) cost
/// 14–16 % more CPU in count_uniq; a count needs equal keys for equal strings and rare
/// collisions, not SipHash's resistance to chosen ones (docs/architecture.md).
fn string_key(v: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(v.as_bytes())
}

/// Calls `f` with each id of each row's state (the ids back to back).
fn each_state_id(states: &ArrayRef, mut f: impl FnMut(usize, u128)) -> Result<()> {
    let Some(states) = states.as_binary_opt::<i64>() else {
        return exec_err!(
            "hogql_uniq_id's state is binary, not {}",
            states.data_type()
        );
    };
    for row in 0..states.len() {
        if states.is_valid(row) {
            let bytes = states.value(row);
            if bytes.len() % 16 != 0 {
                return exec_err!("hogql_uniq_id's state holds {} bytes", bytes.len());
            }
            for id in bytes.chunks_exact(16) {
                f(row, key(id));
            }
        }
    }
    Ok(())
}

fn state_value(set: &IdSet, out: &mut LargeBinaryBuilder) {
    let mut bytes = Vec::with_capacity(set.len() * 16);
    for id in set {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    out.append_value(bytes);
}

impl HeapSize for IdSet {
    /// A set's table: a key and a control byte a slot.
    fn heap_size(&self) -> usize {
        self.capacity() * (size_of::<u128>() + 1)
    }
}

/// Ranges of the key space a [`SpreadSet`] keeps apart.
const SPREAD_PARTS: usize = 64;
/// Keys a [`SpreadSet`] holds back per range before inserting them together.
const SPREAD_PENDING: usize = 256;
/// Keys a group's set holds before it becomes a [`SpreadSet`] (its table, ~1 MiB, then
/// outgrows a core's cache; a day's active users of the bench's 10M events are ~20 000,
/// a week's ~100 000, a month's ~300 000).
const SPREAD_FROM: usize = 1 << 16;

/// A set of ids that can outgrow the caches: `uniq(distinct_id)` and
/// `count(DISTINCT $session_id)` over the bench's 10M events hold 2.3M ids, and every probe
/// of one table that size is a cache miss. Here a key waits in a short buffer of its range
/// of the key space (one of [`SPREAD_PARTS`], by its bits) and goes into that range's own
/// set with the rest of the buffer, so the part of a table an insert touches was touched a
/// moment before.
#[derive(Debug)]
struct SpreadSet {
    sets: Vec<IdSet>,
    pending: Vec<Vec<u128>>,
    /// The heap bytes of `sets` and `pending`, kept as they grow.
    heap: usize,
}

impl Default for SpreadSet {
    fn default() -> Self {
        SpreadSet {
            sets: (0..SPREAD_PARTS).map(|_| IdSet::default()).collect(),
            pending: vec![Vec::new(); SPREAD_PARTS],
            heap: SPREAD_PARTS * (size_of::<IdSet>() + size_of::<Vec<u128>>()),
        }
    }
}

impl SpreadSet {
    /// `key`'s range: the top bits of a multiplicative hash of all its bits (a UUIDv7's
    /// low bytes are its time, so its own top bits would put a day's ids in one range).
    fn part(key: u128) -> usize {
        let folded = (key as u64) ^ ((key >> 64) as u64);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SPREAD_PARTS.trailing_zeros()))
            as usize
    }

    fn insert(&mut self, key: u128) {
        let p = Self::part(key);
        let buf = &mut self.pending[p];
        if buf.capacity() == 0 {
            buf.reserve_exact(SPREAD_PENDING);
            self.heap += buf.capacity() * size_of::<u128>();
        }
        buf.push(key);
        if buf.len() == SPREAD_PENDING {
            self.settle_part(p);
        }
    }

    fn settle_part(&mut self, p: usize) {
        let set = &mut self.sets[p];
        let before = set.heap_size();
        set.extend(self.pending[p].drain(..));
        self.heap = self.heap + set.heap_size() - before;
    }

    /// Every held-back key into its set.
    fn settle(&mut self) {
        for p in 0..SPREAD_PARTS {
            self.settle_part(p);
        }
    }

    /// The distinct keys (settles first).
    fn len(&mut self) -> usize {
        self.settle();
        self.sets.iter().map(|s| s.len()).sum()
    }

    /// The keys back to back (settles first).
    fn state_bytes(&mut self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len() * 16);
        for id in self.sets.iter().flatten() {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        bytes
    }
}

impl HeapSize for SpreadSet {
    fn heap_size(&self) -> usize {
        self.heap
    }
}

/// One group's ids: one table while it is small, a [`SpreadSet`] from [`SPREAD_FROM`]
/// keys on (64 sets and their buffers would cost a small group more than they save).
#[derive(Debug)]
enum GroupSet {
    One(IdSet),
    Spread(Box<SpreadSet>),
}

impl Default for GroupSet {
    fn default() -> Self {
        GroupSet::One(IdSet::default())
    }
}

impl GroupSet {
    fn insert(&mut self, key: u128) {
        match self {
            GroupSet::One(set) => {
                set.insert(key);
                if set.len() >= SPREAD_FROM {
                    let mut spread = SpreadSet::default();
                    for k in set.drain() {
                        spread.insert(k);
                    }
                    *self = GroupSet::Spread(Box::new(spread));
                }
            }
            GroupSet::Spread(spread) => spread.insert(key),
        }
    }

    fn len(&mut self) -> usize {
        match self {
            GroupSet::One(set) => set.len(),
            GroupSet::Spread(spread) => spread.len(),
        }
    }

    fn append_state(&mut self, out: &mut LargeBinaryBuilder) {
        match self {
            GroupSet::One(set) => state_value(set, out),
            GroupSet::Spread(spread) => out.append_value(spread.state_bytes()),
        }
    }
}

impl HeapSize for GroupSet {
    fn heap_size(&self) -> usize {
        match self {
            GroupSet::One(set) => set.heap_size(),
            GroupSet::Spread(spread) => size_of::<SpreadSet>() + spread.heap_size(),
        }
    }
}

/// The one set of a query without GROUP BY: a [`GroupSet`], so it spreads once it is big.
#[derive(Debug, Default)]
struct UniqIdAcc {
    set: GroupSet,
}

impl Accumulator for UniqIdAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        // A run of one id (the files are sorted by person) is one probe.
        let mut last = None;
        each_id(&values[0], None, |_, id| {
            if last != Some(id) {
                last = Some(id);
                self.set.insert(id);
            }
        })
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        each_state_id(&states[0], |_, id| self.set.insert(id))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut b = LargeBinaryBuilder::new();
        self.set.append_state(&mut b);
        Ok(vec![ScalarValue::try_from_array(&b.finish(), 0)?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Int64(Some(self.set.len() as i64)))
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.set.heap_size()
    }
}

#[derive(Default)]
struct UniqIdGroups {
    sets: GroupStates<GroupSet>,
}

impl UniqIdGroups {
    fn insert(&mut self, group: usize, id: u128) {
        self.sets.update(group, |set| set.insert(id));
    }
}

impl GroupsAccumulator for UniqIdGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.sets.resize(total_num_groups);
        // The files hold each event's rows sorted by person: a row with the group and id
        // of the row before it adds nothing, and skipping it skips a hash-set probe (a
        // fifth of a weekly-active-users query's CPU at 10M events).
        let mut last = None;
        each_id(&values[0], opt_filter, |row, id| {
            let key = (group_indices[row], id);
            if last != Some(key) {
                last = Some(key);
                self.insert(key.0, id);
            }
        })
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.sets.resize(total_num_groups);
        each_state_id(&values[0], |row, id| self.insert(group_indices[row], id))
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let mut taken = self.sets.take(emit_to);
        Ok(Arc::new(Int64Array::from_iter_values(
            taken.iter_mut().map(|s| s.len() as i64),
        )))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let mut taken = self.sets.take(emit_to);
        let lens: Vec<usize> = taken.iter_mut().map(|s| s.len()).collect();
        let mut b =
            LargeBinaryBuilder::with_capacity(taken.len(), lens.iter().map(|n| n * 16).sum());
        for set in &mut taken {
            set.append_state(&mut b);
        }
        Ok(vec![Arc::new(b.finish())])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut rows: Vec<Option<[u8; 16]>> = vec![None; values[0].len()];
        each_id(&values[0], opt_filter, |row, id| {
            rows[row] = Some(id.to_le_bytes())
        })?;
        let states: LargeBinaryArray = rows
            .iter()
            .map(|r| Some(r.as_ref().map_or(&[][..], |b| &b[..])))
            .collect();
        Ok(vec![Arc::new(states)])
    }

    fn size(&self) -> usize {
        self.sets.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::FixedSizeBinaryArray;

    fn ids(values: &[Option<u8>]) -> ArrayRef {
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                values.iter().map(|v| v.map(|b| [b; 16])),
                16,
            )
            .unwrap(),
        )
    }

    /// Each group's count after `g`'s states are merged into a fresh accumulator, group by
    /// group.
    fn merged_counts(g: &mut UniqIdGroups) -> Vec<i64> {
        let state = g.state(EmitTo::All).unwrap();
        let n = state[0].len();
        let mut total = UniqIdGroups::default();
        let groups: Vec<usize> = (0..n).collect();
        total.merge_batch(&state, &groups, n).unwrap();
        let counts = total.evaluate(EmitTo::All).unwrap();
        counts
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .values()
            .to_vec()
    }

    #[test]
    fn strings_count_by_their_bytes_in_every_string_layout() {
        use datafusion::arrow::array::{LargeStringArray, StringArray, StringViewArray};
        let values = [
            Some("user-1"),
            Some("user-2"),
            Some("user-1"),
            None,
            Some(""),
            Some("a long distinct id past the twelve inline bytes of a view"),
            Some("a long distinct id past the twelve inline bytes of a view"),
        ];
        let layouts: [ArrayRef; 3] = [
            Arc::new(StringViewArray::from(values.to_vec())),
            Arc::new(StringArray::from(values.to_vec())),
            Arc::new(LargeStringArray::from(values.to_vec())),
        ];
        for a in layouts {
            // One group: {user-1, user-2, "", the long one}; NULL not counted.
            let mut one = UniqIdAcc::default();
            one.update_batch(std::slice::from_ref(&a)).unwrap();
            assert_eq!(one.evaluate().unwrap(), ScalarValue::Int64(Some(4)));
            // Two groups, one row filtered out, and back through a state and a merge.
            let mut g = UniqIdGroups::default();
            g.update_batch(
                std::slice::from_ref(&a),
                &[0, 1, 1, 0, 1, 0, 0],
                Some(&BooleanArray::from(vec![
                    true, true, true, true, true, true, false,
                ])),
                2,
            )
            .unwrap();
            // group 0: user-1, the long one; group 1: user-2, user-1, "".
            assert_eq!(merged_counts(&mut g), [2, 3]);
        }
        // Keys differ where the strings do, including by one byte past the inline part.
        assert_ne!(
            string_key("a long distinct id past the twelve inline bytes of a view"),
            string_key("a long distinct id past the twelve inline bytes of a viex")
        );
    }

    #[test]
    fn a_group_past_the_spread_threshold_counts_and_accounts_as_before() {
        use datafusion::arrow::array::FixedSizeBinaryArray;
        let n = SPREAD_FROM + 5_000;
        // Group 0: n distinct ids, each twice (not in a row); group 1: three ids.
        let mut values: Vec<[u8; 16]> = Vec::new();
        let mut groups: Vec<usize> = Vec::new();
        for round in 0..2 {
            for i in 0..n as u128 {
                values.push((i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C) | 1).to_le_bytes());
                groups.push(0);
            }
            for i in 0..3u128 + round {
                values.push((i << 100).to_le_bytes());
                groups.push(1);
            }
        }
        let ids: ArrayRef =
            Arc::new(FixedSizeBinaryArray::try_from_iter(values.iter().map(|v| &v[..])).unwrap());
        let mut g = UniqIdGroups::default();
        for at in (0..values.len()).step_by(8192) {
            let len = 8192.min(values.len() - at);
            g.update_batch(&[ids.slice(at, len)], &groups[at..at + len], None, 2)
                .unwrap();
        }
        assert!(matches!(g.sets.get(0), GroupSet::Spread(_)));
        assert!(matches!(g.sets.get(1), GroupSet::One(_)));
        let counted: usize = (0..2).map(|i| g.sets.get(i).heap_size()).sum();
        assert_eq!(
            g.sets.heap_bytes(),
            counted,
            "the memory is kept up to date"
        );
        assert_eq!(merged_counts(&mut g), [n as i64, 4]);
    }

    #[test]
    fn a_spread_set_holds_what_one_set_holds() {
        // Enough keys to fill every range's buffer many times, each inserted up to three
        // times and some only held back when counted; UUIDv7-like keys share their low
        // (time) bytes.
        let keys: Vec<u128> = (0..200_000u128)
            .map(|i| (i.wrapping_mul(0x2545_F491_4F6C_DD1D) << 64) | 0x0190_1234)
            .collect();
        let mut spread = SpreadSet::default();
        let mut one = IdSet::default();
        for (i, k) in keys.iter().enumerate() {
            for _ in 0..=(i % 3) {
                spread.insert(*k);
                one.insert(*k);
            }
        }
        spread.insert(keys[7]);
        assert_eq!(spread.len(), one.len());
        assert_eq!(one.len(), keys.len());
        let used = spread.sets.iter().filter(|s| !s.is_empty()).count();
        assert_eq!(used, SPREAD_PARTS, "the keys spread over every range");
        // Its state holds each key once, and merges into an equal count.
        let bytes = spread.state_bytes();
        assert_eq!(bytes.len(), keys.len() * 16);
        let mut acc = UniqIdAcc::default();
        let state: ArrayRef = Arc::new(LargeBinaryArray::from_vec(vec![&bytes[..]]));
        acc.merge_batch(std::slice::from_ref(&state)).unwrap();
        acc.merge_batch(&[state]).unwrap();
        assert_eq!(
            acc.evaluate().unwrap(),
            ScalarValue::Int64(Some(keys.len() as i64))
        );
        assert!(acc.size() > keys.len() * 16, "its memory is counted");
    }

    #[test]
    fn runs_of_one_id_count_once_in_each_of_their_groups() {
        // Rows sorted by person come as runs of one id; a run crossing groups (or broken
        // by a filtered or NULL row) still counts in every group it reaches.
        let mut a = UniqIdGroups::default();
        a.update_batch(
            &[ids(&[
                Some(1),
                Some(1),
                Some(1),
                None,
                Some(1),
                Some(2),
                Some(2),
            ])],
            &[0, 0, 1, 1, 0, 2, 2],
            Some(&BooleanArray::from(vec![
                true, true, true, true, true, false, true,
            ])),
            3,
        )
        .unwrap();
        let counts = a.evaluate(EmitTo::All).unwrap();
        let counts = counts.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        assert_eq!(counts.values(), &[1, 1, 1]);
        let mut one = UniqIdAcc::default();
        one.update_batch(&[ids(&[Some(1), Some(1), Some(2), Some(1), None])])
            .unwrap();
        assert_eq!(one.evaluate().unwrap(), ScalarValue::Int64(Some(2)));
    }

    #[test]
    fn groups_count_distinct_ids_through_states_and_merges() {
        // Two partial accumulators, as two partitions; their states merged into a third.
        let mut a = UniqIdGroups::default();
        a.update_batch(
            &[ids(&[Some(1), Some(1), None, Some(2), Some(3)])],
            &[0, 0, 0, 1, 1],
            Some(&BooleanArray::from(vec![true, true, true, true, false])),
            2,
        )
        .unwrap();
        assert!(a.size() > a.sets.size() - a.sets.heap_bytes());
        let mut b = UniqIdGroups::default();
        b.update_batch(&[ids(&[Some(1), Some(4), Some(2)])], &[0, 0, 1], None, 2)
            .unwrap();
        let converted = b.convert_to_state(&[ids(&[Some(5), None])], None).unwrap();
        let mut total = UniqIdGroups::default();
        total
            .merge_batch(&a.state(EmitTo::All).unwrap(), &[0, 1], 2)
            .unwrap();
        total
            .merge_batch(&b.state(EmitTo::First(1)).unwrap(), &[0], 2)
            .unwrap();
        total
            .merge_batch(&b.state(EmitTo::All).unwrap(), &[1], 2)
            .unwrap();
        total.merge_batch(&converted, &[1, 0], 2).unwrap();
        // group 0: {1, 4}; group 1: {2, 5} (3 filtered out, NULLs not counted).
        let counts = total.evaluate(EmitTo::All).unwrap();
        assert_eq!(
            counts
                .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                .values(),
            &[2, 2]
        );
        assert_eq!(total.sets.heap_bytes(), 0);
    }

    #[test]
    fn one_accumulator_counts_and_merges() {
        let mut a = UniqIdAcc::default();
        a.update_batch(&[ids(&[Some(7), Some(7), None, Some(8)])])
            .unwrap();
        let state = a.state().unwrap();
        let mut b = UniqIdAcc::default();
        b.update_batch(&[ids(&[Some(9), Some(8)])]).unwrap();
        b.merge_batch(&[state[0].to_array().unwrap()]).unwrap();
        assert_eq!(b.evaluate().unwrap(), ScalarValue::Int64(Some(3)));
    }
}
