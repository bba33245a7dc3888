//! Appending: Parquet writer settings, the sort order, and commits that record their WAL
//! sequence, made durable on local disk.

use super::*;

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

/// What one append wrote.
#[derive(Debug, Clone, Default)]
pub struct AppendStats {
    /// The table version this append created.
    pub version: i64,
    pub rows: u64,
    pub files: u64,
    pub bytes: u64,
}
impl EventsTable {
    /// The Parquet settings of every data file; `sorted`: the file's rows are in the
    /// table's sort order, which its metadata then claims.
    pub(super) fn writer_properties(&self, sorted: bool) -> WriterProperties {
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
        // and time alone).
        for c in file_cols {
            if matches!(c, "timestamp" | "created_at") {
                let col = ColumnPath::from(c);
                b = b
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_encoding(col.clone(), Encoding::DELTA_BINARY_PACKED)
                    .set_column_compression(col, Compression::LZ4_RAW);
            } else if LZ4_COLUMNS.contains(&c) {
                b = b.set_column_compression(ColumnPath::from(c), Compression::LZ4_RAW);
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
        sorted: bool,
    ) -> Result<deltalake::datafile::writer::WriterConfig, StorageError> {
        use deltalake::table::config::TablePropertiesExt;
        Ok(deltalake::datafile::writer::WriterConfig::new(
            schema,
            PARTITION_COLUMNS.iter().map(|c| c.to_string()).collect(),
            Some(self.writer_properties(sorted)),
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
        if let Some(b) = sorted.batches.first() {
            self.ensure_columns(&mut guard, &b.schema()).await?;
        }
        let table_schema =
            crate::storage::ids::file_schema(&guard.snapshot()?.snapshot().arrow_schema());
        let started = Instant::now();
        let store = guard.log_store().object_store(None);
        let config = self.writer_config(&guard, table_schema.clone(), true)?;
        let mut adds = Vec::new();
        for range in sorted.partitions() {
            let mut writer = DeltaWriter::new(store.clone(), config.clone());
            for start in range.clone().step_by(WRITE_CHUNK_ROWS) {
                let end = (start + WRITE_CHUNK_ROWS).min(range.end);
                writer
                    .write(&conform(&sorted.rows(start..end)?, &table_schema)?)
                    .await?;
            }
            adds.extend(writer.close().await?);
        }
        let new: Vec<(String, i64)> = adds.iter().map(|a| (a.path.clone(), a.size)).collect();
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
        let mut table = guard.clone();
        table.update_incremental(None).await?;
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
        *guard = table;
        self.publish(&guard);
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
        self.fsync_local(files, Vec::new()).await
    }

    /// On local disk, fsyncs `files`, then every directory from theirs and `dirs` up to the
    /// table root (paths relative to the root, as the log or the store spells them), so new
    /// files and deletions in those directories are durable. A no-op on object stores.
    pub(super) async fn fsync_local(
        &self,
        files: Vec<String>,
        dirs: Vec<String>,
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
                std::fs::File::open(p)?.sync_all()?;
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
