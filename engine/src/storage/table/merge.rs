//! Rewriting files as one sorted run without holding their rows: a k-way merge of the
//! files' own sorted orders.
//!
//! Every file hedgerow writes is sorted by [`SORT_COLUMNS`] and says so in its footer
//! (`sorting_columns`). A rewrite (compaction, the fold sweep) decodes its input files
//! batch by batch, moves each batch to the current property layout, and merges them by the
//! sort key, copying rows out [`WRITE_CHUNK_ROWS`] at a time: memory holds the inputs'
//! compressed bytes, one decoded batch per input and one output chunk, whatever the
//! partition's size. Before, a partition was sorted whole up to 64 MB of files (decoded,
//! about ten times that) and rewritten file by file beyond, losing the partition's order.
//!
//! An input is sorted in memory first (bounded by that one file) when its footer does not
//! claim the order (a file written by an older version). Rows whose `person_id` a merge
//! folds move when it changes: an input holding such rows is read twice, once for those
//! rows alone (they join the merge sorted, as one more input held in memory: after a
//! day of sign-ups, a minority) and once streaming the rest, which is still in order.

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use bytes::Bytes;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};

use super::StorageError;
use super::maintain::{PersonMap, decode_with, fold_person_ids, read_footer};
use super::write::{SortedRows, WRITE_CHUNK_ROWS};
use crate::model::TeamId;
use crate::storage::layout::{Family, Layouts, conform, relayout};
use crate::storage::schema::SORT_COLUMNS;

/// One input file of a merge: its path (for errors) and bytes.
pub(super) struct Input {
    pub(super) path: Path,
    pub(super) bytes: Bytes,
}

/// What every rewritten batch goes through before the merge.
pub(super) struct Prepare<'a> {
    pub(super) team: TeamId,
    pub(super) date32: i32,
    pub(super) layouts: &'a Layouts,
    pub(super) persons: Option<&'a PersonMap>,
    /// The table's schema: every batch is conformed to it, so batches of files in older
    /// layouts merge with the others.
    pub(super) schema: &'a SchemaRef,
}

/// Which rows of a batch [`Prepare::batch`] keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    All,
    /// Rows whose person id is not folded (they keep their place in the file's order).
    Unfolded,
    /// Rows whose person id is folded (they move).
    Folded,
}

impl Prepare<'_> {
    /// The rows of `b` that `keep` names, in the current layout with merged persons' ids
    /// folded, conformed; and how many ids were folded.
    fn batch(&self, b: RecordBatch, keep: Keep) -> Result<(RecordBatch, u64), StorageError> {
        let mut b = b;
        if keep != Keep::All
            && let Some(map) = self.persons
        {
            let mask = folded_mask(&b, map)?;
            let mask = if keep == Keep::Unfolded {
                arrow::compute::not(&mask)?
            } else {
                mask
            };
            b = arrow::compute::filter_record_batch(&b, &mask)?;
        }
        for family in Family::ALL {
            b = relayout(
                &b,
                family,
                &self.layouts.of(family, self.team),
                self.layouts,
            )?;
        }
        let mut folded = 0;
        if let Some(map) = self.persons
            && let Some((changed, n)) = fold_person_ids(&b, map)?
        {
            b = changed;
            folded = n;
        }
        Ok((conform(&b, self.schema)?, folded))
    }
}

/// Which rows of `b` hold a `person_id` that `map` folds.
fn folded_mask(
    b: &RecordBatch,
    map: &PersonMap,
) -> Result<arrow::array::BooleanArray, StorageError> {
    let Some(col) = b.column_by_name("person_id") else {
        return Ok(arrow::array::BooleanArray::from(vec![false; b.num_rows()]));
    };
    let col = crate::storage::ids::to_text(col.as_ref())?;
    Ok(col
        .as_string::<i32>()
        .iter()
        .map(|id| Some(id.is_some_and(|id| map.contains_key(id))))
        .collect())
}

/// Whether the file's footer says its rows are in [`SORT_COLUMNS`] order (every row
/// group's `sorting_columns` naming exactly those columns, ascending).
fn claims_sort_order(meta: &ArrowReaderMetadata) -> bool {
    let md = meta.metadata();
    let schema = md.file_metadata().schema_descr();
    md.num_row_groups() > 0
        && md.row_groups().iter().all(|rg| {
            rg.sorting_columns().is_some_and(|cols| {
                cols.len() == SORT_COLUMNS.len()
                    && cols.iter().zip(SORT_COLUMNS).all(|(c, name)| {
                        !c.descending
                            && (c.column_idx as usize) < schema.num_columns()
                            && schema.column(c.column_idx as usize).name() == *name
                    })
            })
        })
}

/// Whether the file at `bytes` claims the sort order (for tests).
#[cfg(test)]
pub(super) fn file_claims_sort_order(bytes: &Bytes) -> bool {
    ArrowReaderMetadata::load(bytes, Default::default()).is_ok_and(|m| claims_sort_order(&m))
}

/// Whether some `person_id` of the file is one `map` folds (only that column is decoded).
fn holds_merged_ids(
    input: &Input,
    meta: &ArrowReaderMetadata,
    map: &PersonMap,
) -> Result<bool, StorageError> {
    let builder =
        ParquetRecordBatchReaderBuilder::new_with_metadata(input.bytes.clone(), meta.clone());
    let mask = ProjectionMask::columns(builder.parquet_schema(), ["person_id"]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| StorageError::Invariant(format!("cannot read {}: {e}", input.path)))?;
    for b in reader {
        if folded_mask(&b?, map)?.true_count() > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Where a cursor's batches come from.
enum Source {
    /// The file decoded as it is read (it is sorted), with the rows to keep of it.
    Stream(Box<dyn Iterator<Item = Result<(RecordBatch, Keep), StorageError>> + Send>),
    /// The file's rows sorted in memory, copied out a chunk at a time.
    Sorted { rows: SortedRows, next: usize },
}

/// One input's place in the merge: its current batch, that batch's sort keys and the next
/// row.
struct Cursor {
    source: Source,
    /// Index of the current batch in the merge's arena; `None` once exhausted.
    at: Option<usize>,
    keys: Option<Rows>,
    row: usize,
    len: usize,
}

/// The sort-key columns of a conformed batch.
fn key_columns(b: &RecordBatch) -> Vec<ArrayRef> {
    SORT_COLUMNS
        .iter()
        .map(|c| b.column_by_name(c).expect("events column").clone())
        .collect()
}

/// Merges `inputs` into one run sorted by [`SORT_COLUMNS`], handing `emit` batches of up
/// to [`WRITE_CHUNK_ROWS`] rows (conformed to `prep.schema`) until it returns `false`.
/// Returns the number of person ids folded. Runs on the caller's thread (the blocking
/// pool): it decodes and compares rows.
pub(super) fn merge_sorted(
    inputs: Vec<Input>,
    prep: &Prepare<'_>,
    mut emit: impl FnMut(RecordBatch) -> bool,
) -> Result<u64, StorageError> {
    let fields = SORT_COLUMNS
        .iter()
        .map(|c| {
            Ok(SortField::new(
                prep.schema
                    .field_with_name(c)
                    .map_err(StorageError::from)?
                    .data_type()
                    .clone(),
            ))
        })
        .collect::<Result<Vec<_>, StorageError>>()?;
    let converter = RowConverter::new(fields)?;
    let mut folded = 0u64;
    let mut arena: Vec<RecordBatch> = Vec::new();
    let mut cursors: Vec<Cursor> = Vec::with_capacity(inputs.len());
    // Rows of every input whose person id is folded, sorted together as one more input.
    let mut moved: Vec<RecordBatch> = Vec::new();
    for input in inputs {
        // The footer is parsed once for every read of the file below.
        let meta = read_footer(&input.bytes, &input.path)?;
        let decode =
            |bytes: Bytes| decode_with(bytes, meta.clone(), &input.path, prep.team.0, prep.date32);
        let folds = prep
            .persons
            .is_some_and(|map| holds_merged_ids(&input, &meta, map).unwrap_or(true));
        let source = if !claims_sort_order(&meta) {
            let mut held = Vec::new();
            for b in decode(input.bytes.clone())? {
                let (b, n) = prep.batch(b?, Keep::All)?;
                folded += n;
                held.push(b);
            }
            Source::Sorted {
                rows: SortedRows::new(held)?,
                next: 0,
            }
        } else {
            if folds {
                for b in decode(input.bytes.clone())? {
                    let (b, n) = prep.batch(b?, Keep::Folded)?;
                    folded += n;
                    moved.push(b);
                }
            }
            let keep = if folds { Keep::Unfolded } else { Keep::All };
            let batches = decode(input.bytes.clone())?;
            Source::Stream(Box::new(batches.map(move |b| b.map(|b| (b, keep)))))
        };
        cursors.push(Cursor {
            source,
            at: None,
            keys: None,
            row: 0,
            len: 0,
        });
    }
    if !moved.is_empty() {
        cursors.push(Cursor {
            source: Source::Sorted {
                rows: SortedRows::new(moved)?,
                next: 0,
            },
            at: None,
            keys: None,
            row: 0,
            len: 0,
        });
    }
    // Loads the cursor's next non-empty batch into the arena (or marks it exhausted).
    let advance = |c: &mut Cursor,
                   arena: &mut Vec<RecordBatch>,
                   folded: &mut u64|
     -> Result<(), StorageError> {
        c.at = None;
        c.keys = None;
        loop {
            let next = match &mut c.source {
                Source::Stream(it) => match it.next() {
                    None => None,
                    Some(b) => {
                        let (b, keep) = b?;
                        let (b, n) = prep.batch(b, keep)?;
                        *folded += n;
                        Some(b)
                    }
                },
                Source::Sorted { rows, next } => {
                    if *next >= rows.len() {
                        None
                    } else {
                        let end = (*next + WRITE_CHUNK_ROWS).min(rows.len());
                        let b = rows.rows(*next..end)?;
                        *next = end;
                        Some(b)
                    }
                }
            };
            let Some(b) = next else {
                return Ok(());
            };
            if b.num_rows() == 0 {
                continue;
            }
            c.keys = Some(converter.convert_columns(&key_columns(&b))?);
            c.row = 0;
            c.len = b.num_rows();
            c.at = Some(arena.len());
            arena.push(b);
            return Ok(());
        }
    };
    for c in &mut cursors {
        advance(c, &mut arena, &mut folded)?;
    }
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(WRITE_CHUNK_ROWS);
    loop {
        // The least current row and the runner-up; ties go to the earlier input (the
        // merge is stable).
        let mut best: Option<usize> = None;
        let mut second: Option<usize> = None;
        let row_of = |i: usize| {
            let c = &cursors[i];
            c.keys.as_ref().expect("current").row(c.row)
        };
        for (i, c) in cursors.iter().enumerate() {
            if c.keys.is_none() {
                continue;
            }
            match best {
                None => best = Some(i),
                Some(b) if row_of(i) < row_of(b) => {
                    second = best;
                    best = Some(i);
                }
                Some(_) => {
                    if second.is_none_or(|s| row_of(i) < row_of(s)) {
                        second = Some(i);
                    }
                }
            }
        }
        let done = best.is_none();
        if let Some(i) = best {
            // The winner's rows are taken while they stay ahead of the runner-up's current
            // row (inputs are sorted, so often a long run), up to the chunk's end or the
            // batch's.
            let bound = second.map(|j| {
                (
                    cursors[j]
                        .keys
                        .as_ref()
                        .expect("current")
                        .row(cursors[j].row)
                        .owned(),
                    j,
                )
            });
            let c = &mut cursors[i];
            let keys = c.keys.as_ref().expect("current");
            let at = c.at.expect("current");
            loop {
                picks.push((at, c.row));
                c.row += 1;
                if c.row == c.len || picks.len() == WRITE_CHUNK_ROWS {
                    break;
                }
                let next = keys.row(c.row);
                let ahead = bound
                    .as_ref()
                    .is_none_or(|(r, j)| next < r.row() || (next == r.row() && i < *j));
                if !ahead {
                    break;
                }
            }
            if c.row == c.len {
                advance(c, &mut arena, &mut folded)?;
            }
        }
        if picks.len() == WRITE_CHUNK_ROWS || (done && !picks.is_empty()) {
            let refs: Vec<&RecordBatch> = arena.iter().collect();
            let out = arrow::compute::interleave_record_batch(&refs, &picks)?;
            picks.clear();
            if !emit(out) {
                return Ok(folded);
            }
            // Keep only the batches cursors still read from.
            let mut kept = Vec::new();
            for c in &mut cursors {
                if let Some(at) = c.at {
                    c.at = Some(kept.len());
                    kept.push(arena[at].clone());
                }
            }
            arena = kept;
        }
        if done {
            return Ok(folded);
        }
    }
}
