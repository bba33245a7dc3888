//! Folding person-id overrides into the files: merged people's events get the surviving
//! person's id, where a file holds enough of them to be worth rewriting.

use std::collections::HashSet;

use std::ops::Range;

use futures::FutureExt;
use futures::future::BoxFuture;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::maintain::{
    DataFile, PersonMap, TAIL_MICROS, files_of, micros_of, partition_files_where,
};
use super::*;
use crate::storage::layout::LayoutSource;

/// What one fold sweep of a project did ([`EventsTable::fold_overrides`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct FoldStats {
    /// Files whose `person_id` column was read, and their rows.
    pub files_read: u64,
    pub rows_read: u64,
    /// Rows holding a merged-away id, in every file read.
    pub rows_overridden: u64,
    /// Files replaced by folded copies, the copies, and the rows that changed.
    pub files_rewritten: u64,
    pub files_written: u64,
    pub rows_folded: u64,
    /// Merged-away ids some file still holds after the sweep (their overrides must stay).
    pub still_present: HashSet<String>,
}

/// How many of a file's rows hold a merged-away id, and which ids.
struct Hits {
    rows: u64,
    hits: u64,
    ids: HashSet<String>,
}

impl EventsTable {
    /// Folds project `team`'s person-id overrides (`map`, old → current) into the files
    /// where they are dense: reads every file's `person_id` column alone, rewrites (with
    /// compaction's writer, one commit per partition) the files in which at least `share`
    /// of the rows hold a merged-away id, and reports the ids other files still hold.
    /// Files below the share keep their rows as written; queries map them at read time,
    /// and compaction folds them whenever it rewrites the file for another reason. So a
    /// merge never rewrites the table: after a day of sign-ups the anonymous events
    /// before them are spread over every partition, and rewriting each file that held
    /// one (the first version) rewrote most of the table.
    pub(crate) async fn fold_overrides(
        &self,
        team: TeamId,
        map: &HashMap<String, String>,
        share: f64,
        layouts: &dyn LayoutSource,
    ) -> Result<FoldStats, StorageError> {
        let resolved: Arc<PersonMap> = Arc::new(
            resolve_person_map(map)?
                .into_iter()
                .map(|(old, new)| (old.to_owned(), new.to_owned()))
                .collect(),
        );
        let mut stats = FoldStats::default();
        if resolved.is_empty() {
            return Ok(stats);
        }
        let key = team.0.to_string();
        let (files, store) = {
            let guard = self.table.lock().await;
            let files: Vec<(String, DataFile)> = partition_files_where(&guard, |t, _| t == key)?
                .into_iter()
                .flat_map(|((_, date), files)| files.into_iter().map(move |f| (date.clone(), f)))
                .collect();
            (files, guard.log_store().object_store(None))
        };
        // The project's newest day: its last hour goes to a file of its own when it is
        // rewritten, as compaction writes it.
        let newest_date = files.iter().map(|(date, _)| date.clone()).max();
        // Partition date → paths of the files to rewrite there.
        let mut chosen: BTreeMap<String, HashMap<Path, HashSet<String>>> = BTreeMap::new();
        for (date, f) in &files {
            let hits = count_hits(&store, f, &resolved).await?;
            stats.files_read += 1;
            stats.rows_read += hits.rows;
            stats.rows_overridden += hits.hits;
            if hits.hits > 0 && hits.hits as f64 >= share * hits.rows as f64 {
                chosen
                    .entry(date.clone())
                    .or_default()
                    .insert(f.path.clone(), hits.ids);
            } else {
                stats.still_present.extend(hits.ids);
            }
        }
        for (date, mut paths) in chosen {
            let now = {
                let guard = self.table.lock().await;
                files_of(&guard, &key, &date)?
            };
            let mut rewrite: Vec<&DataFile> = Vec::new();
            let mut rewritten_ids: Vec<HashSet<String>> = Vec::new();
            for f in &now {
                if let Some(ids) = paths.remove(&f.path) {
                    rewrite.push(f);
                    rewritten_ids.push(ids);
                }
            }
            // Files that went meanwhile (compacted or erased): whatever replaced them may
            // hold their ids still.
            for (_, ids) in paths {
                stats.still_present.extend(ids);
            }
            if rewrite.is_empty() {
                continue;
            }
            let current = layouts.layouts();
            let tail_from = (Some(&date) == newest_date.as_ref())
                .then(|| {
                    now.iter()
                        .filter_map(|f| f.max_time.as_deref().and_then(micros_of))
                        .max()
                })
                .flatten()
                .map(|t| t - TAIL_MICROS);
            let Some(written) = self
                .rewrite_files(team, &date, &rewrite, &current, Some(&resolved), tail_from)
                .await?
            else {
                // A file went while it was rewritten: its ids may be anywhere now.
                stats
                    .still_present
                    .extend(rewritten_ids.into_iter().flatten());
                continue;
            };
            stats.files_rewritten += rewrite.len() as u64;
            stats.files_written += written.added as u64;
            stats.rows_folded += written.rows_folded;
        }
        debug!(team = team.0, ?stats.files_read, ?stats.files_rewritten, ?stats.rows_folded, "folded person ids");
        Ok(stats)
    }
}

/// A data file read by ranges (its footer, then the column chunks a projection needs).
/// parquet's own `ParquetObjectReader` does this but is deprecated in parquet 59, which
/// asks for an `AsyncFileReader` of one's own.
struct StoreFile {
    store: ObjectStoreRef,
    path: Path,
    size: u64,
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(
        &mut self,
        range: Range<u64>,
    ) -> BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<bytes::Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let meta = ParquetMetaDataReader::new()
                .with_prefetch_hint(Some(64 << 10))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(meta))
        }
        .boxed()
    }
}

/// Reads one file's `person_id` column (only its column chunks are fetched) and counts the
/// rows whose id `map` holds.
async fn count_hits(
    store: &ObjectStoreRef,
    f: &DataFile,
    map: &PersonMap,
) -> Result<Hits, StorageError> {
    use arrow::array::AsArray;
    let bad = |e: parquet::errors::ParquetError| {
        StorageError::Invariant(format!("cannot read {}: {e}", f.path))
    };
    let reader = StoreFile {
        store: store.clone(),
        path: f.path.clone(),
        size: f.size as u64,
    };
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(bad)?;
    let rows = builder.metadata().file_metadata().num_rows() as u64;
    let mask = ProjectionMask::columns(builder.parquet_schema(), ["person_id"]);
    let mut stream = builder.with_projection(mask).build().map_err(bad)?;
    let mut out = Hits {
        rows,
        hits: 0,
        ids: HashSet::new(),
    };
    while let Some(b) = stream.next().await {
        let b = b.map_err(bad)?;
        let Some(col) = b.column_by_name("person_id") else {
            break;
        };
        let col = crate::storage::ids::to_text(col.as_ref())?;
        for id in col.as_string::<i32>().iter().flatten() {
            if map.contains_key(id) {
                out.hits += 1;
                if !out.ids.contains(id) {
                    out.ids.insert(id.to_owned());
                }
            }
        }
    }
    Ok(out)
}

/// `map` with chains followed (a→b and b→c give a→c) and identities dropped, sorted.
pub(super) fn resolve_person_map(
    map: &HashMap<String, String>,
) -> Result<BTreeMap<&str, &str>, StorageError> {
    let mut out = BTreeMap::new();
    for (old, new) in map {
        let mut target = new.as_str();
        let mut hops = 0;
        while let Some(next) = map.get(target) {
            if next == target {
                break;
            }
            target = next;
            hops += 1;
            if hops > map.len() {
                return Err(StorageError::Config(format!(
                    "the person id map has a cycle through {old}"
                )));
            }
        }
        if target != old {
            out.insert(old.as_str(), target);
        }
    }
    Ok(out)
}
