//! Appending: Parquet writer settings, the sort order, and commits that record their WAL
//! sequence, made durable on local disk.

use super::*;
use crate::storage::layout::PROPERTY_KEY_METADATA;
use arrow::datatypes::DataType;

/// Hot, small columns written with LZ4 instead of zstd (see `writer_properties`), with the
/// time columns.
pub(super) const LZ4_COLUMNS: &[&str] = &[
    "event",
    "distinct_id",
    "person_id",
    "$session_id",
    "$group_0",
    "$group_1",
    "$group_2",
    "$group_3",
    "$group_4",
    "props_layout",
];

/// Rows copied out of a [`SortedRows`] at a time when writing: the writer encodes them into
/// its row group, so memory holds the unsorted rows, the encoded row group and this much.
pub(super) const WRITE_CHUNK_ROWS: usize = 16 * 1024;

/// How many runs of rows [`SortedRows::sample`] takes, and how long each is.
pub(super) const SAMPLE_WINDOWS: usize = 8;
pub(super) const SAMPLE_ROWS: usize = 1024;

/// The share of a sample's non-null values that must be distinct for a column to be
/// written without a dictionary. On the bench's 2M events, dictionary encoding still won
/// at 0.2–0.3 (a session's ids: `$session_id` 4.28 against 4.80 bytes/event without) and
/// at 0.86 (`$pageview_id`, 10.78 against 11.12), and lost at 1.0.
const DISTINCT_SHARE: f64 = 0.9;

/// The fewest non-null sampled values a column needs to be judged; sparser columns keep
/// the dictionary.
const DISTINCT_MIN_VALUES: usize = 256;

/// Below this share of non-null values in the sample a column is written with LZ4 rather
/// than zstd. Such a column chunk is a few KB whatever the codec (at 10M events, 22 of the
/// 81 property columns of a day's file were under 6 KB, and zstd made most of them no
/// smaller than they were), but a reader sets up a zstd context pair for every zstd column
/// chunk it opens: a tenth of the CPU of a query over a rare event, which reads such
/// columns of every daily file (docs/architecture.md, "LZ4 for sparse columns").
const SPARSE_SHARE: f64 = 0.05;

/// How the columns of one file are written, judged by a sample of its rows
/// (`writer_properties`): the columns whose values are mostly distinct, with their types,
/// go without a dictionary; the sparse ones with LZ4.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Distinct {
    pub(crate) distinct: Vec<(String, DataType)>,
    pub(crate) sparse: Vec<String>,
}

impl Distinct {
    /// Judges each text, float and fixed-size binary column by `sample` (batches of one
    /// schema): the distinct share is counted within each batch and summed, so a value
    /// must repeat near itself to count as repeated, as it must for a dictionary of a
    /// row group to pay.
    pub(crate) fn of(sample: &[RecordBatch]) -> Distinct {
        let Some(first) = sample.first() else {
            return Distinct::default();
        };
        let mut out = Distinct::default();
        let rows: usize = sample.iter().map(|b| b.num_rows()).sum();
        for (i, field) in first.schema().fields().iter().enumerate() {
            let non_null: usize = sample
                .iter()
                .map(|b| b.column(i).len() - b.column(i).null_count())
                .sum();
            if rows > 0 && (non_null as f64) < SPARSE_SHARE * rows as f64 {
                out.sparse.push(field.name().clone());
            }
            let ty = field.data_type();
            if !matches!(
                ty,
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
                    | DataType::Float64
                    | DataType::FixedSizeBinary(_)
            ) {
                continue;
            }
            let (mut values, mut distinct) = (0usize, 0usize);
            for b in sample {
                let (v, d) = distinct_values(b.column(i).as_ref());
                values += v;
                distinct += d;
            }
            if values >= DISTINCT_MIN_VALUES && distinct as f64 > DISTINCT_SHARE * values as f64 {
                out.distinct.push((field.name().clone(), ty.clone()));
            }
        }
        out
    }
}

/// (non-null values, distinct values) of a text, float or fixed-size binary column.
fn distinct_values(col: &dyn arrow::array::Array) -> (usize, usize) {
    use arrow::array::AsArray;
    use std::hash::BuildHasher;
    let hasher = foldhash::fast::FixedState::with_seed(0);
    let mut seen = std::collections::HashSet::with_capacity(col.len());
    let mut values = 0;
    let mut add = |bytes: &[u8]| {
        values += 1;
        seen.insert(hasher.hash_one(bytes));
    };
    let n = col.len();
    let valid = |i: usize| col.is_valid(i);
    match col.data_type() {
        DataType::Utf8 => {
            let a = col.as_string::<i32>();
            (0..n)
                .filter(|&i| valid(i))
                .for_each(|i| add(a.value(i).as_bytes()));
        }
        DataType::LargeUtf8 => {
            let a = col.as_string::<i64>();
            (0..n)
                .filter(|&i| valid(i))
                .for_each(|i| add(a.value(i).as_bytes()));
        }
        DataType::Utf8View => {
            let a = col.as_string_view();
            (0..n)
                .filter(|&i| valid(i))
                .for_each(|i| add(a.value(i).as_bytes()));
        }
        DataType::Float64 => {
            let a = col.as_primitive::<arrow::datatypes::Float64Type>();
            (0..n)
                .filter(|&i| valid(i))
                .for_each(|i| add(&a.value(i).to_bits().to_le_bytes()));
        }
        DataType::FixedSizeBinary(_) => {
            let a = col.as_fixed_size_binary();
            (0..n).filter(|&i| valid(i)).for_each(|i| add(a.value(i)));
        }
        _ => {}
    }
    (values, seen.len())
}

/// What one append wrote.
#[derive(Debug, Clone, Default)]
pub struct AppendStats {
    /// The table version this append created.
    pub version: i64,
    pub rows: u64,
    pub files: u64,
    pub bytes: u64,
}
/// The largest dictionary page a column chunk keeps its dictionary for.
const DICTIONARY_PAGE_BYTES: usize = 8 << 20;

impl EventsTable {
    /// The Parquet settings of every data file. A file written sorted (an append, a merge)
    /// claims the table's sort order in its footer (`sorted`); a file rewritten by
    /// delta-rs (erasure's delete) does not, since its scan may split the file into byte
    /// ranges read in parallel, and a merge then sorts it before it joins.
    pub(super) fn writer_properties(&self, distinct: &Distinct, sorted: bool) -> WriterProperties {
        let schema = events_schema();
        let file_cols: Vec<&str> = schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| !PARTITION_COLUMNS.contains(n))
            .collect();
        let sorting = SORT_COLUMNS
            .iter()
            .map(|c| SortingColumn {
                column_idx: file_cols.iter().position(|n| n == c).expect("sort column") as i32,
                descending: false,
                nulls_first: false,
            })
            .collect();
        let mut b = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(self.cfg.zstd_level).unwrap_or_default(),
            ))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(self.cfg.row_group_rows.max(1)))
            .set_data_page_row_count_limit(self.cfg.page_rows.max(1))
            // A column chunk whose dictionary outgrows this limit goes on without one
            // (PLAIN), which compresses poorly. Parquet's default, 1 MiB, is ~26 000
            // session ids: a full 128 Ki-row row group of the bench's 10M events holds
            // 28 500, and on month partitions `$session_id`, `$window_id` and `distinct_id`
            // took 23.4 bytes/event with the default against 22.1 with this limit
            // (docs/architecture.md, "Dictionaries up to 8 MiB").
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
            .set_sorting_columns(sorted.then_some(sorting))
            // A bloom filter on distinct_id: files are sorted by event first, so min/max
            // statistics skip little for a person's events; the filter lets a point lookup
            // skip every row group the id is not in. Sized for one distinct id
            // per 8 rows (persons average ~25 events), at 1% false positives.
            .set_column_bloom_filter_enabled(ColumnPath::from("distinct_id"), true)
            .set_column_bloom_filter_max_ndv(
                ColumnPath::from("distinct_id"),
                (self.cfg.row_group_rows as u64 / 8).max(1024),
            )
            .set_column_bloom_filter_fpp(ColumnPath::from("distinct_id"), 0.01);
        // The columns most queries read are small once dictionary- or delta-encoded, and
        // zstd gains them little; but a reader makes a zstd context pair for every column
        // chunk it opens, which was a quarter of the CPU of a daily trend over 90 daily
        // files. LZ4 costs nothing to set up. Time columns are sorted within each event and
        // person: delta-encoded they were smaller than zstd made their dictionary (45 KB
        // against 72 KB for a day of 12 656 events, measured when files were sorted by event
        // and time alone). `timestamp`'s deltas within a person are as random as the times
        // of their events: LZ4 left them as they were (4.76 bytes/event against 4.74
        // uncompressed at 10M events) and only cost a pass over them, so the pages are
        // stored as they are; `created_at` (ingest batches) still gains a fifth from LZ4.
        for c in file_cols {
            if matches!(c, "timestamp" | "created_at") {
                let col = ColumnPath::from(c);
                let codec = match c {
                    "timestamp" => Compression::UNCOMPRESSED,
                    _ => Compression::LZ4_RAW,
                };
                b = b
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_encoding(col.clone(), Encoding::DELTA_BINARY_PACKED)
                    .set_column_compression(col, codec);
            } else if LZ4_COLUMNS.contains(&c) {
                b = b.set_column_compression(ColumnPath::from(c), Compression::LZ4_RAW);
            }
        }
        // The sparse columns of this file, property columns among them (they are not in
        // the events schema).
        for c in &distinct.sparse {
            if !matches!(c.as_str(), "timestamp" | "created_at") {
                b = b.set_column_compression(ColumnPath::from(c.as_str()), Compression::LZ4_RAW);
            }
        }
        // Columns of mostly distinct values (`uuid`, `$insert_id`, `$time`) are not
        // dictionary-encoded: the dictionary holds every value once more and the
        // indices cost on top. Text is then length-prefixed in a block of its own
        // (DELTA_LENGTH_BYTE_ARRAY), so zstd sees the characters without a 4-byte length
        // between each two, and floats are split into byte streams (BYTE_STREAM_SPLIT), so
        // the sign, exponent and high mantissa bytes that repeat sit together. Measured on
        // the bench's 2M events, bytes/event: uuid 16.99 → 15.11, `$insert_id` 14.29 →
        // 11.96, `$time` 6.93 → 4.78 (docs/architecture.md, "Encodings by cardinality").
        for (name, ty) in &distinct.distinct {
            let col = ColumnPath::from(name.as_str());
            b = b.set_column_dictionary_enabled(col.clone(), false);
            match ty {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    b = b.set_column_encoding(col, Encoding::DELTA_LENGTH_BYTE_ARRAY);
                }
                DataType::Float64 => {
                    b = b.set_column_encoding(col, Encoding::BYTE_STREAM_SPLIT);
                }
                _ => {}
            }
        }
        b.build()
    }

    /// How delta-rs's writer writes this table's files: `schema` (the table's), partitioned,
    /// with our writer properties, target size and the table's statistics columns.
    pub(super) fn writer_config(
        &self,
        table: &DeltaTable,
        schema: arrow::datatypes::SchemaRef,
        distinct: &Distinct,
    ) -> Result<deltalake::datafile::writer::WriterConfig, StorageError> {
        use deltalake::table::config::TablePropertiesExt;
        Ok(deltalake::datafile::writer::WriterConfig::new(
            schema,
            PARTITION_COLUMNS.iter().map(|c| c.to_string()).collect(),
            Some(self.writer_properties(distinct, true)),
            NonZeroU64::new(self.cfg.target_file_bytes),
            None,
            table
                .snapshot()?
                .snapshot()
                .table_properties()
                .num_indexed_cols(),
            None,
        ))
    }

    /// Writes `batch` (any order) as sorted Parquet files, one per (team, date) partition,
    /// in one commit that records `last_seq` as the WAL position it covers.
    ///
    /// Partitions are written one after the other, each by a writer of its own that is
    /// closed before the next starts: a writer holds a row group's encoded pages and a
    /// dictionary per column until it closes, and delta-rs's write kept one open for every
    /// partition of the batch at once (a flush of events over 90 days, with 100 columns,
    /// held 90 × 100 of them; at 1M events writing one at a time took peak ingest RSS from
    /// 2 343 to 1 964 MiB).
    pub async fn append(
        &self,
        batch: RecordBatch,
        last_seq: u64,
    ) -> Result<AppendStats, StorageError> {
        self.append_batches(vec![batch], last_seq).await
    }

    /// [`EventsTable::append`] of the rows of `batches` (one schema), which are not copied
    /// but for a chunk at a time.
    pub async fn append_batches(
        &self,
        batches: Vec<RecordBatch>,
        last_seq: u64,
    ) -> Result<AppendStats, StorageError> {
        use deltalake::datafile::writer::DeltaWriter;
        use deltalake::kernel::Action;
        use deltalake::kernel::transaction::CommitBuilder;
        use deltalake::protocol::DeltaOperation;

        // The unsorted rows are kept (the buffer keeps its parts for a retry anyway) and
        // copied out sorted a chunk at a time.
        let sorted = SortedRows::new(batches)?;
        let rows = sorted.len() as u64;
        let mut guard = self.table.lock().await;
        // Only a try whose commit landed leaves a commit in doubt, so only then can these
        // rows be in the table already.
        if self.settle(&mut guard).await? && last_seq <= super::seq_of(&guard).await? {
            // An earlier try of these rows was committed, and is durable now (`settle`).
            info!(
                wal_seq = last_seq,
                "the rows were committed by an earlier try"
            );
            return Ok(AppendStats {
                version: guard.version().map_or(0, |v| v as i64),
                rows,
                files: 0,
                bytes: 0,
            });
        }
        if let Some(b) = sorted.batches.first() {
            self.ensure_columns(&mut guard, &b.schema()).await?;
        }
        let table_schema =
            crate::storage::ids::file_schema(&guard.snapshot()?.snapshot().arrow_schema());
        let started = Instant::now();
        let store = guard.log_store().object_store(None);
        let mut adds = Vec::new();
        for range in sorted.partitions() {
            let distinct = Distinct::of(&sorted.sample(range.clone())?);
            let config = self.writer_config(&guard, table_schema.clone(), &distinct)?;
            let mut writer = DeltaWriter::new(store.clone(), config);
            for start in range.clone().step_by(WRITE_CHUNK_ROWS) {
                let end = (start + WRITE_CHUNK_ROWS).min(range.end);
                writer
                    .write(&conform(&sorted.rows(start..end)?, &table_schema)?)
                    .await?;
            }
            adds.extend(writer.close().await?);
        }
        let new: Vec<(String, i64)> = adds.iter().map(|a| (a.path.clone(), a.size)).collect();
        crate::faults::point("flush.written");
        let commit = CommitBuilder::from(
            CommitProperties::default()
                .with_application_transaction(Transaction::new(WAL_APP_ID, last_seq as i64)),
        )
        .with_actions(adds.into_iter().map(Action::Add).collect())
        .build(
            Some(guard.snapshot()?),
            guard.log_store(),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: Some(PARTITION_COLUMNS.iter().map(|c| c.to_string()).collect()),
                predicate: None,
            },
        )
        .await?;
        let version = commit.version() as i64;
        crate::faults::point("flush.committed");
        // The commit landed: from here on a failure leaves it in doubt, and the retry of
        // these rows settles it instead of appending them again.
        let mut table = guard.clone();
        if let Err(e) = table.update_incremental(None).await {
            let mut files: Vec<String> = new.iter().map(|(p, _)| p.clone()).collect();
            files.push(log_entry(version));
            self.doubt(files, version);
            return Err(e.into());
        }
        *guard = table;
        self.publish(&guard);
        self.sync_local(new.iter().map(|(p, _)| p.as_str()), version)
            .await?;
        let stats = AppendStats {
            version,
            rows,
            files: new.len() as u64,
            bytes: new.iter().map(|(_, s)| s).sum::<i64>() as u64,
        };
        debug!(
            ?stats,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "appended"
        );
        Ok(stats)
    }

    /// Adds to the table's schema every column of `schema` it lacks (promoted properties,
    /// and `props_layout` on a table from before storage v2), in one commit.
    pub(super) async fn ensure_columns(
        &self,
        guard: &mut DeltaTable,
        schema: &arrow::datatypes::Schema,
    ) -> Result<(), StorageError> {
        let have = guard.snapshot()?.snapshot().arrow_schema();
        let missing = schema
            .fields()
            .iter()
            .filter(|f| have.field_with_name(f.name()).is_err())
            .map(|f| {
                let ty = match f.data_type() {
                    arrow::datatypes::DataType::Utf8 => deltalake::kernel::DataType::STRING,
                    arrow::datatypes::DataType::Float64 => deltalake::kernel::DataType::DOUBLE,
                    arrow::datatypes::DataType::Boolean => deltalake::kernel::DataType::BOOLEAN,
                    arrow::datatypes::DataType::Int32 => deltalake::kernel::DataType::INTEGER,
                    other => {
                        return Err(StorageError::Invariant(format!(
                            "cannot add column {} of type {other} to the events table",
                            f.name()
                        )));
                    }
                };
                Ok(deltalake::kernel::StructField::new(f.name(), ty, true)
                    .with_metadata(f.metadata().clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A column the table has that lacks the property key `schema` declares for it: a
        // base column holding an event property (`layout::COLUMN_PROPERTIES`) of a table
        // made before it declared one. Declared before any row leaves the residual for it.
        let undeclared: Vec<(String, String)> = schema
            .fields()
            .iter()
            .filter_map(|f| {
                let key = f.metadata().get(PROPERTY_KEY_METADATA)?;
                let have = have.field_with_name(f.name()).ok()?;
                (have.metadata().get(PROPERTY_KEY_METADATA) != Some(key))
                    .then(|| (f.name().clone(), key.clone()))
            })
            .collect();
        for (name, key) in undeclared {
            let table = guard
                .clone()
                .update_field_metadata()
                .with_field_name(&name)
                .with_metadata(HashMap::from([(
                    PROPERTY_KEY_METADATA.to_string(),
                    deltalake::kernel::MetadataValue::String(key),
                )]))
                .await?;
            let version = table.version().map_or(-1, |v| v as i64);
            self.sync_local(std::iter::empty(), version).await?;
            info!(
                column = name,
                version, "declared the property a column of the events table holds"
            );
            *guard = table;
            self.publish(guard);
        }
        if missing.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = missing.iter().map(|f| f.name().to_string()).collect();
        let table = guard.clone().add_columns().with_fields(missing).await?;
        let version = table.version().map_or(-1, |v| v as i64);
        self.sync_local(std::iter::empty(), version).await?;
        info!(columns = ?names, version, "added columns to the events table");
        *guard = table;
        self.publish(guard);
        Ok(())
    }

    /// On local disk, fsyncs a commit's data files, its log entry and their directories.
    /// The caller deletes WAL segments once a commit returns, so the commit must survive a
    /// power cut, not only a process crash; object_store's local backend does not fsync.
    /// (An S3 PUT that succeeded is durable by the store's contract.)
    pub(super) async fn sync_local<'a>(
        &self,
        files: impl Iterator<Item = &'a str>,
        version: i64,
    ) -> Result<(), StorageError> {
        let mut files: Vec<String> = files.map(str::to_owned).collect();
        files.push(log_entry(version));
        let result = self.fsync_local(files.clone(), Vec::new()).await;
        if result.is_err() {
            self.doubt(files, version);
        }
        result
    }

    /// Records commit `version`'s `files` (data files and log entry) as in doubt: landed,
    /// not known durable.
    fn doubt(&self, files: Vec<String>, version: i64) {
        let mut d = self.in_doubt.lock().unwrap_or_else(|e| e.into_inner());
        d.extend(files);
        d.sort();
        d.dedup();
        tracing::warn!(
            version,
            files = d.len(),
            "a commit landed but was not made durable; it is written again before the next commit"
        );
    }

    /// Makes the commits in doubt durable before anything else is committed: brings the
    /// snapshot up to date (their commit is in the log), then writes each of their files
    /// again with its own bytes and fsyncs it. Writing again, not only fsyncing: after a
    /// failed fsync Linux may have marked the pages clean without writing them, so a second
    /// fsync can succeed with the data still not on disk (PostgreSQL's "fsyncgate"); the
    /// page cache still has the bytes.
    pub(super) async fn settle(&self, guard: &mut DeltaTable) -> Result<bool, StorageError> {
        let files = self
            .in_doubt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if files.is_empty() {
            return Ok(false);
        }
        guard.update_incremental(None).await?;
        self.publish(guard);
        self.sync_paths(files.clone(), Vec::new(), true).await?;
        let mut d = self.in_doubt.lock().unwrap_or_else(|e| e.into_inner());
        d.retain(|f| !files.contains(f));
        info!(files = files.len(), "the commits in doubt are durable");
        Ok(true)
    }

    /// On local disk, fsyncs `files`, then every directory from theirs and `dirs` up to the
    /// table root (paths relative to the root, as the log or the store spells them), so new
    /// files and deletions in those directories are durable. A no-op on object stores.
    pub(super) async fn fsync_local(
        &self,
        files: Vec<String>,
        dirs: Vec<String>,
    ) -> Result<(), StorageError> {
        self.sync_paths(files, dirs, false).await
    }

    /// [`Self::fsync_local`]; with `rewrite`, each file is first written again with its own
    /// bytes ([`Self::settle`]).
    async fn sync_paths(
        &self,
        files: Vec<String>,
        dirs: Vec<String>,
        rewrite: bool,
    ) -> Result<(), StorageError> {
        if self.cfg.url.scheme() != "file" {
            return Ok(());
        }
        let root = self
            .cfg
            .url
            .to_file_path()
            .map_err(|_| StorageError::Config(format!("bad table path {}", self.cfg.url)))?;
        let files: Vec<std::path::PathBuf> =
            files.iter().map(|f| root.join(percent_decode(f))).collect();
        let dirs: Vec<std::path::PathBuf> =
            dirs.iter().map(|d| root.join(percent_decode(d))).collect();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut to_sync = std::collections::BTreeSet::new();
            to_sync.insert(root.clone());
            let mut add_ancestors = |start: Option<&std::path::Path>| {
                let mut d = start;
                while let Some(dir) = d {
                    if !dir.starts_with(&root) || !to_sync.insert(dir.to_path_buf()) {
                        break;
                    }
                    d = dir.parent();
                }
            };
            for p in &files {
                if rewrite {
                    use std::io::Write;
                    let bytes = std::fs::read(p)?;
                    let mut f = std::fs::OpenOptions::new().write(true).open(p)?;
                    f.write_all(&bytes)?;
                    f.sync_all()?;
                } else {
                    std::fs::File::open(p)?.sync_all()?;
                }
                add_ancestors(p.parent());
            }
            for d in &dirs {
                add_ancestors(Some(d));
            }
            for d in to_sync {
                match std::fs::File::open(&d) {
                    Ok(f) => f.sync_all()?,
                    // A directory only named because files in it were deleted may be gone.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
        .await
        .map_err(|source| StorageError::Task {
            what: "fsync",
            source,
        })?
        .map_err(StorageError::Fsync)
    }
}

/// Rows of a run of batches (one schema) in the table's order, to be copied out a chunk at
/// a time: only the sort columns are concatenated to sort, so sorting `n` bytes of rows
/// costs `n` plus a chunk, not `2n` (a concatenated copy) plus `n` (the sorted copy).
pub(crate) struct SortedRows {
    batches: Vec<RecordBatch>,
    /// (batch, row) in sorted order.
    order: Vec<(usize, usize)>,
    /// Where each (team, date) partition's rows start and end in `order`.
    partitions: Vec<std::ops::Range<usize>>,
}

impl SortedRows {
    pub(crate) fn new(batches: Vec<RecordBatch>) -> Result<Self, arrow::error::ArrowError> {
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        let column = |name: &str| -> Result<arrow::array::ArrayRef, arrow::error::ArrowError> {
            let parts: Vec<&dyn arrow::array::Array> = batches
                .iter()
                .map(|b| b.column_by_name(name).expect("events column").as_ref())
                .collect();
            arrow::compute::concat(&parts)
        };
        let mut starts = Vec::with_capacity(batches.len());
        let mut total = 0;
        for b in &batches {
            starts.push(total);
            total += b.num_rows();
        }
        if total == 0 {
            return Ok(Self {
                batches,
                order: Vec::new(),
                partitions: Vec::new(),
            });
        }
        let keys: Vec<SortColumn> = PARTITION_COLUMNS
            .iter()
            .chain(SORT_COLUMNS)
            .map(|name| {
                Ok(SortColumn {
                    values: column(name)?,
                    options: Some(SortOptions::default()),
                })
            })
            .collect::<Result<_, arrow::error::ArrowError>>()?;
        let idx = lexsort_to_indices(&keys, None)?;
        let partition_keys: Vec<arrow::array::ArrayRef> = keys[..PARTITION_COLUMNS.len()]
            .iter()
            .map(|k| arrow::compute::take(&k.values, &idx, None))
            .collect::<Result<_, _>>()?;
        drop(keys);
        let partitions = arrow::compute::partition(&partition_keys)?.ranges();
        let order = idx
            .values()
            .iter()
            .map(|&i| {
                let i = i as usize;
                let b = starts.partition_point(|&s| s <= i) - 1;
                (b, i - starts[b])
            })
            .collect();
        Ok(Self {
            batches,
            order,
            partitions,
        })
    }

    /// Each (team, date) partition's range of sorted positions, in order.
    pub(crate) fn partitions(&self) -> &[std::ops::Range<usize>] {
        &self.partitions
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Rows of `range` to judge its columns by ([`Distinct::of`]): up to
    /// [`SAMPLE_WINDOWS`] runs of [`SAMPLE_ROWS`] consecutive rows, spread evenly. Runs,
    /// not single rows: a value repeated over a few neighbouring rows (a session's events)
    /// shows as repeated.
    pub(crate) fn sample(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<RecordBatch>, arrow::error::ArrowError> {
        let len = range.len();
        if len <= SAMPLE_WINDOWS * SAMPLE_ROWS {
            return Ok(vec![self.rows(range)?]);
        }
        let step = len / SAMPLE_WINDOWS;
        (0..SAMPLE_WINDOWS)
            .map(|i| {
                let start = range.start + i * step;
                self.rows(start..start + SAMPLE_ROWS)
            })
            .collect()
    }

    /// The sorted rows in `range`, copied out.
    pub(crate) fn rows(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<RecordBatch, arrow::error::ArrowError> {
        let refs: Vec<&RecordBatch> = self.batches.iter().collect();
        arrow::compute::interleave_record_batch(&refs, &self.order[range])
    }
}

/// Sorts by partition, then by the in-file sort order, so every file is written sorted.
#[cfg(test)]
pub(crate) fn sort_for_write(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let cols: Vec<SortColumn> = PARTITION_COLUMNS
        .iter()
        .chain(SORT_COLUMNS)
        .map(|name| SortColumn {
            values: batch.column_by_name(name).expect("events column").clone(),
            options: Some(SortOptions::default()),
        })
        .collect();
    let idx = lexsort_to_indices(&cols, None)?;
    arrow::compute::take_record_batch(batch, &idx)
}
