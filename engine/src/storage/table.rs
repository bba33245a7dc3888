//! The events table: a Delta Lake table of zstd Parquet files, on local disk or S3.
//!
//! Owns every byte of event data that reaches storage; all I/O goes through `object_store`
//! (via delta-rs). Each append commit records, as a Delta application transaction, the last
//! WAL sequence it covers, so recovery knows exactly where to resume and never stores an
//! event twice. Commits are serialized in-process (one writer per table, see `lease`): the
//! stores we support do not all enforce put-if-absent (Garage ignores If-None-Match).

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU64;
use std::sync::{Arc, Once};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, SortOptions, lexsort_to_indices, take_record_batch};
use datafusion::logical_expr::{Case, Expr, col, lit};
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig, default_logstore,
    logstore_factories, object_store_factories,
};
use deltalake::operations::vacuum::VacuumMode;
use deltalake::parquet::basic::{Compression, Encoding, ZstdLevel};
use deltalake::parquet::file::metadata::SortingColumn;
use deltalake::parquet::file::properties::{EnabledStatistics, WriterProperties};
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::protocol::SaveMode;
use deltalake::protocol::checkpoints::create_checkpoint;
use deltalake::{DeltaResult, DeltaTable, DeltaTableBuilder, DeltaTableError};
use futures::StreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use tokio::sync::Mutex;
use tracing::{debug, info};
use url::Url;

use super::schema::{PARTITION_COLUMNS, SHREDDED_PREFIX, SORT_COLUMNS, events_schema};
use crate::error::{ErrorKind, HasKind};
use crate::model::TeamId;

/// The Delta application-transaction id under which appends record their WAL sequence.
pub const WAL_APP_ID: &str = "hedgerow-wal";

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("events table: {0}")]
    Delta(#[from] DeltaTableError),
    #[error("events table: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    #[error("{0}")]
    Config(String),
    #[error("events table I/O: {0}")]
    Io(String),
    #[error("{0}")]
    Lease(String),
}

impl HasKind for StorageError {
    fn kind(&self) -> ErrorKind {
        match self {
            StorageError::Config(_) => ErrorKind::InvalidInput,
            StorageError::Lease(_) => ErrorKind::Conflict,
            StorageError::ObjectStore(_) | StorageError::Io(_) => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }
}

/// Where the table lives and how its files are written.
#[derive(Debug, Clone)]
pub struct TableConfig {
    /// `file:///abs/path/events` or `s3://bucket/prefix/events`.
    pub url: Url,
    /// object_store options (`aws_endpoint`, `aws_region`, `aws_access_key_id`, …).
    pub options: HashMap<String, String>,
    /// Rows per Parquet row group: smaller groups prune better, larger ones compress better.
    pub row_group_rows: usize,
    /// Most rows per data page: the page index's granularity.
    pub page_rows: usize,
    pub zstd_level: i32,
    /// Compaction's target file size.
    pub target_file_bytes: u64,
}

impl TableConfig {
    pub fn new(url: Url) -> Self {
        Self {
            url,
            options: HashMap::new(),
            row_group_rows: 128 * 1024,
            page_rows: 20_000,
            zstd_level: 3,
            target_file_bytes: 128 * 1024 * 1024,
        }
    }
}

/// Hot, small columns written with LZ4 instead of zstd (see `writer_properties`), with the
/// shredded `mat_*` columns and the time columns.
const LZ4_COLUMNS: &[&str] = &[
    "event",
    "distinct_id",
    "person_id",
    "$session_id",
    "$group_0",
    "$group_1",
    "$group_2",
    "$group_3",
    "$group_4",
];

/// What one append wrote.
#[derive(Debug, Clone, Default)]
pub struct AppendStats {
    /// The table version this append created.
    pub version: i64,
    pub rows: u64,
    pub files: u64,
    pub bytes: u64,
}

/// What one compaction pass did.
#[derive(Debug, Clone, Default)]
pub struct CompactStats {
    pub partitions: u64,
    pub files_removed: u64,
    pub files_added: u64,
}

/// What erasing people's events did ([`EventsTable::delete_person_events`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EraseStats {
    pub rows_deleted: u64,
    /// Files the deletes removed from the snapshot (rewritten without the rows, or dropped).
    pub files_rewritten: u64,
    /// Files no longer in the snapshot that were deleted from storage (the rewritten ones,
    /// files older operations had replaced, and uncommitted leftovers).
    pub files_vacuumed: u64,
    /// Log entries (commits, older checkpoints, temporary files) deleted.
    pub log_files_removed: u64,
}

/// What folding person ids did ([`EventsTable::rewrite_person_ids`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewriteStats {
    pub rows_rewritten: u64,
    /// Files replaced by rewritten copies.
    pub files_rewritten: u64,
    pub files_written: u64,
    /// Commits made (one per chunk of the map that matched rows).
    pub commits: u64,
}

/// Person ids per delete or update commit: bounds the predicate's size.
const IDS_PER_COMMIT: usize = 1000;

struct S3Factory;

impl ObjectStoreFactory for S3Factory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let (store, path) = object_store::parse_url_opts(url, config.raw.iter())?;
        Ok((Arc::from(store), path))
    }
}

impl LogStoreFactory for S3Factory {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        // Commits use put-if-absent. Where the server does not enforce it (Garage), the
        // single-writer lease and the in-process commit lock are what keep commits unique.
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// Teaches delta-rs the `s3://` scheme through object_store's own S3 client, without the
/// AWS SDK (which deltalake's `s3` feature would pull in only for DynamoDB locking).
fn register_s3() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let url = Url::parse("s3://").expect("static url");
        object_store_factories().insert(url.clone(), Arc::new(S3Factory));
        logstore_factories().insert(url, Arc::new(S3Factory));
    });
}

pub struct EventsTable {
    cfg: TableConfig,
    /// The latest snapshot we know of. Also the commit lock: whoever commits holds it.
    table: Mutex<DeltaTable>,
    /// The same snapshot for readers, published after each commit: a query never waits
    /// for a compaction, a fold or an erasure that holds the commit lock.
    latest: std::sync::RwLock<DeltaTable>,
}

impl EventsTable {
    /// Opens the table, creating it (with no files) when there is none.
    pub async fn open(cfg: TableConfig) -> Result<Self, StorageError> {
        register_s3();
        if cfg.url.scheme() == "file" {
            let path = cfg
                .url
                .to_file_path()
                .map_err(|_| StorageError::Config(format!("bad table path {}", cfg.url)))?;
            std::fs::create_dir_all(&path).map_err(|e| {
                StorageError::Config(format!("cannot create {}: {e}", path.display()))
            })?;
        }
        let mut table = DeltaTableBuilder::from_url(cfg.url.clone())?
            .with_storage_options(cfg.options.clone())
            .build()?;
        // Ask the store first: loading a table that is not there logs errors in delta-rs.
        let log_prefix = Path::from("_delta_log");
        let exists = table
            .log_store()
            .object_store(None)
            .list(Some(&log_prefix))
            .next()
            .await
            .transpose()?
            .is_some();
        match if exists {
            table.load().await
        } else {
            Err(DeltaTableError::NotATable(String::new()))
        } {
            Ok(()) => {}
            Err(DeltaTableError::NotATable(_)) => {
                info!(url = %cfg.url, "creating the events table");
                let empty = RecordBatch::new_empty(events_schema());
                table = table
                    .write(vec![empty])
                    .with_save_mode(SaveMode::Append)
                    .with_partition_columns(PARTITION_COLUMNS.iter().copied())
                    .with_table_name("events")
                    .with_configuration([("delta.logRetentionDuration", Some("interval 7 days"))])
                    .await?;
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Self {
            cfg,
            latest: std::sync::RwLock::new(table.clone()),
            table: Mutex::new(table),
        })
    }

    pub fn url(&self) -> &Url {
        &self.cfg.url
    }

    fn publish(&self, table: &DeltaTable) {
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = table.clone();
    }

    fn latest(&self) -> DeltaTable {
        self.latest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The last WAL sequence covered by a commit (0 when none).
    pub async fn committed_seq(&self) -> Result<u64, StorageError> {
        seq_of(&self.latest()).await
    }

    /// A clone of the current snapshot's table handle and the WAL seq its commits cover.
    pub async fn snapshot_with_seq(&self) -> Result<(DeltaTable, u64), StorageError> {
        let table = self.latest();
        let seq = seq_of(&table).await?;
        Ok((table, seq))
    }

    /// A clone of the current snapshot's table handle, for readers.
    pub async fn current(&self) -> DeltaTable {
        self.latest()
    }

    fn writer_properties(&self) -> WriterProperties {
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
            .set_sorting_columns(Some(sorting))
            // A bloom filter on distinct_id: files are sorted by event and time, so min/max
            // statistics cannot skip anything for a person's events; the filter lets a
            // point lookup skip every row group the id is not in. Sized for one distinct id
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
        // files. LZ4 costs nothing to set up. Time columns are sorted within each event:
        // delta-encoded they are smaller than zstd made their dictionary (45 KB against
        // 72 KB for a day of 12 656 events).
        for c in file_cols {
            if matches!(c, "timestamp" | "created_at") {
                let col = ColumnPath::from(c);
                b = b
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_encoding(col.clone(), Encoding::DELTA_BINARY_PACKED)
                    .set_column_compression(col, Compression::LZ4_RAW);
            } else if LZ4_COLUMNS.contains(&c) || c.starts_with(SHREDDED_PREFIX) {
                b = b.set_column_compression(ColumnPath::from(c), Compression::LZ4_RAW);
            }
        }
        b.build()
    }

    /// Writes `batch` (any order) as sorted Parquet files, one per (team, date) partition,
    /// in one commit that records `last_seq` as the WAL position it covers.
    pub async fn append(
        &self,
        batch: RecordBatch,
        last_seq: u64,
    ) -> Result<AppendStats, StorageError> {
        let rows = batch.num_rows() as u64;
        let sorted = sort_for_write(&batch)?;
        let mut guard = self.table.lock().await;
        let before: BTreeMap<String, i64> = file_sizes(&guard)?;
        let started = Instant::now();
        let table = guard
            .clone()
            .write(vec![sorted])
            .with_save_mode(SaveMode::Append)
            .with_partition_columns(PARTITION_COLUMNS.iter().copied())
            .with_writer_properties(self.writer_properties())
            .with_target_file_size(NonZeroU64::new(self.cfg.target_file_bytes))
            .with_commit_properties(
                CommitProperties::default()
                    .with_application_transaction(Transaction::new(WAL_APP_ID, last_seq as i64)),
            )
            .await?;
        let after = file_sizes(&table)?;
        let new: Vec<(&String, i64)> = after
            .iter()
            .filter(|(p, _)| !before.contains_key(*p))
            .map(|(p, s)| (p, *s))
            .collect();
        let version = table.version().map_or(-1, |v| v as i64);
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

    /// On local disk, fsyncs a commit's data files, its log entry and their directories.
    /// The caller deletes WAL segments once a commit returns, so the commit must survive a
    /// power cut, not only a process crash; object_store's local backend does not fsync.
    /// (An S3 PUT that succeeded is durable by the store's contract.)
    async fn sync_local<'a>(
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
    async fn fsync_local(&self, files: Vec<String>, dirs: Vec<String>) -> Result<(), StorageError> {
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
        .map_err(|e| StorageError::Io(format!("fsync task failed: {e}")))?
        .map_err(|e| StorageError::Io(format!("cannot fsync the committed files: {e}")))
    }

    /// Re-reads the log (another process may have compacted or vacuumed).
    pub async fn refresh(&self) -> Result<(), StorageError> {
        let mut guard = self.table.lock().await;
        guard.update_state().await?;
        self.publish(&guard);
        Ok(())
    }

    /// Compacts every partition that has at least `min_files` files smaller than the target
    /// size, one partition per commit so appends wait at most one partition's rewrite.
    /// Readers see either the small files or the compacted one, never both and never none:
    /// the removes and the add are one Delta commit.
    pub async fn compact(&self, min_files: usize) -> Result<CompactStats, StorageError> {
        let candidates: Vec<(String, String)> = {
            let guard = self.table.lock().await;
            let mut small: BTreeMap<(String, String), usize> = BTreeMap::new();
            for f in guard.snapshot()?.log_data().iter() {
                if (f.size() as u64) >= self.cfg.target_file_bytes / 2 {
                    continue;
                }
                let pv = f.partition_values_map();
                let get = |k: &str| pv.get(k).cloned().flatten().unwrap_or_default();
                *small
                    .entry((get("team_id"), get("event_date")))
                    .or_default() += 1;
            }
            small
                .into_iter()
                .filter(|(_, n)| *n >= min_files.max(2))
                .map(|(k, _)| k)
                .collect()
        };
        let mut stats = CompactStats::default();
        for (team, date) in candidates {
            let mut guard = self.table.lock().await;
            let filters = [
                (
                    "team_id",
                    deltalake::kernel::schema::partitions::FilterOp::Eq,
                    deltalake::kernel::schema::partitions::FilterValue::Scalar(team.as_str()),
                ),
                (
                    "event_date",
                    deltalake::kernel::schema::partitions::FilterOp::Eq,
                    deltalake::kernel::schema::partitions::FilterValue::Scalar(date.as_str()),
                ),
            ];
            let (table, metrics) = guard
                .clone()
                .optimize()
                .with_filters(&filters)
                .with_target_size(NonZeroU64::new(self.cfg.target_file_bytes).expect("nonzero"))
                .with_writer_properties(self.writer_properties())
                .await?;
            *guard = table;
            self.publish(&guard);
            stats.partitions += 1;
            stats.files_removed += metrics.num_files_removed;
            stats.files_added += metrics.num_files_added;
        }
        Ok(stats)
    }

    /// Deletes files no snapshot younger than `retention` refers to.
    pub async fn vacuum(&self, retention: chrono::Duration) -> Result<usize, StorageError> {
        let mut guard = self.table.lock().await;
        let (table, metrics) = guard
            .clone()
            .vacuum()
            .with_retention_period(retention)
            .with_enforce_retention_duration(false)
            .await?;
        *guard = table;
        self.publish(&guard);
        Ok(metrics.files_deleted.len())
    }

    /// Erases every event of `person_ids` in project `team` from storage, with its history:
    ///
    /// 1. deletes the rows (`team_id = team AND person_id IN (…)`, one Delta delete per
    ///    `IDS_PER_COMMIT` ids) under the commit lock, rewriting the files that held them;
    /// 2. deletes, now, every file the snapshot no longer references: the rewritten ones,
    ///    files earlier compactions replaced, uncommitted leftovers (a vacuum with no
    ///    retention, then a sweep of whatever it left);
    /// 3. writes a checkpoint of the new version and deletes every other log entry, so no
    ///    commit, checkpoint or temporary file still carries the deleted files' statistics
    ///    (min/max values) or the delete's own predicate.
    ///
    /// The WAL position the table covers ([`Self::committed_seq`]) is unchanged. Idempotent:
    /// run again after a failure, steps 2–3 finish what an earlier run left, even when no row
    /// is left to delete. Readers holding an older snapshot may fail on a file deleted under
    /// them; their query errors rather than showing erased data.
    pub async fn delete_person_events(
        &self,
        team: TeamId,
        person_ids: &[String],
    ) -> Result<EraseStats, StorageError> {
        self.delete_person_events_chunked(team, person_ids, IDS_PER_COMMIT)
            .await
    }

    async fn delete_person_events_chunked(
        &self,
        team: TeamId,
        person_ids: &[String],
        ids_per_commit: usize,
    ) -> Result<EraseStats, StorageError> {
        let mut ids: Vec<&str> = person_ids.iter().map(String::as_str).collect();
        ids.sort_unstable();
        ids.dedup();
        let started = Instant::now();
        let mut guard = self.table.lock().await;
        let seq_before = seq_of(&guard).await?;
        let files_before = file_sizes(&guard)?;
        let mut stats = EraseStats::default();
        for chunk in ids.chunks(ids_per_commit.max(1)) {
            let predicate = col("team_id")
                .eq(lit(team.0))
                .and(col("person_id").in_list(chunk.iter().map(|id| lit(*id)).collect(), false));
            let (table, metrics) = guard
                .clone()
                .delete()
                .with_predicate(predicate)
                .with_writer_properties(self.writer_properties())
                .await?;
            *guard = table;
            self.publish(&guard);
            stats.rows_deleted += metrics.num_deleted_rows.unwrap_or(0) as u64;
            stats.files_rewritten += metrics.num_removed_files as u64;
        }

        // Tombstones expire when older than now minus the retention: a negative retention
        // expires those made this very millisecond too, and tolerates some clock skew.
        let (table, metrics) = guard
            .clone()
            .vacuum()
            .with_mode(VacuumMode::Full)
            .with_retention_period(chrono::Duration::days(-1))
            .with_enforce_retention_duration(false)
            .await?;
        *guard = table;
        self.publish(&guard);
        let mut deleted = metrics.files_deleted;
        deleted.extend(self.delete_unreferenced_files(&guard).await?);
        stats.files_vacuumed = deleted.len() as u64;

        let (removed, kept) = self.erase_log_history(&guard).await?;
        stats.log_files_removed = removed;
        // The handle's log segment names the entries just deleted: start from the checkpoint.
        *guard = self.load_fresh().await?;
        self.publish(&guard);

        let new_files: Vec<String> = file_sizes(&guard)?
            .into_keys()
            .filter(|p| !files_before.contains_key(p))
            .chain(kept)
            .collect();
        let mut dirs: Vec<String> = deleted
            .iter()
            .filter_map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.push("_delta_log".to_owned());
        self.fsync_local(new_files, dirs).await?;

        let seq_after = seq_of(&guard).await?;
        if seq_after != seq_before {
            return Err(StorageError::Io(format!(
                "the erasure changed the committed WAL position from {seq_before} to {seq_after}"
            )));
        }
        info!(
            team = team.0,
            people = ids.len(),
            ?stats,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "erased people's events"
        );
        Ok(stats)
    }

    /// Deletes every object the snapshot does not reference, outside the log and other
    /// `_`/`.` directories (the writer lease lives in `_hedgerow`). The caller holds the commit
    /// lock, so no write of ours is in flight. Returns the deleted paths.
    async fn delete_unreferenced_files(
        &self,
        table: &DeltaTable,
    ) -> Result<Vec<String>, StorageError> {
        let live: std::collections::HashSet<String> = table
            .snapshot()?
            .log_data()
            .iter()
            .flat_map(|f| {
                let p = f.path().into_owned();
                [percent_decode(&p), p]
            })
            .collect();
        let store = table.log_store().object_store(None);
        let mut listing = store.list(None);
        let mut doomed = Vec::new();
        while let Some(meta) = listing.next().await.transpose()? {
            let loc = meta.location.as_ref();
            let top = loc.split('/').next().unwrap_or_default();
            if top.starts_with('_') || top.starts_with('.') {
                continue;
            }
            if live.contains(loc) || live.contains(&percent_decode(loc)) {
                continue;
            }
            doomed.push(meta.location);
        }
        drop(listing);
        for p in &doomed {
            match store.delete(p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(doomed.iter().map(|p| p.to_string()).collect())
    }

    /// Writes a checkpoint of `table`'s version `v`, then deletes every log entry except
    /// `v`'s commit and checkpoint and `_last_checkpoint` (and anything newer, which the
    /// commit lock rules out). Subdirectories of the log are left alone. Returns how many
    /// entries were deleted and the paths of those kept.
    async fn erase_log_history(
        &self,
        table: &DeltaTable,
    ) -> Result<(u64, Vec<String>), StorageError> {
        let version = table.snapshot()?.version();
        create_checkpoint(table, None).await?;
        let commit = format!("{version:020}.json");
        let checkpoint = format!("{version:020}.checkpoint.parquet");
        let store = table.log_store().object_store(None);
        let log_dir = Path::from("_delta_log");
        let mut listing = store.list(Some(&log_dir));
        let (mut doomed, mut kept) = (Vec::new(), Vec::new());
        while let Some(meta) = listing.next().await.transpose()? {
            let Some(name) = meta.location.as_ref().strip_prefix("_delta_log/") else {
                continue;
            };
            if name.contains('/') {
                continue;
            }
            let newer = name
                .get(..20)
                .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
                .is_some_and(|v| v > version);
            if name == commit || name == checkpoint || name == "_last_checkpoint" || newer {
                kept.push(meta.location.to_string());
            } else {
                doomed.push(meta.location);
            }
        }
        drop(listing);
        if !kept.iter().any(|k| k.ends_with(&checkpoint)) {
            return Err(StorageError::Io(format!(
                "checkpoint {checkpoint} is not in the log after writing it; log history kept"
            )));
        }
        for p in &doomed {
            match store.delete(p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok((doomed.len() as u64, kept))
    }

    /// The table loaded afresh from storage.
    async fn load_fresh(&self) -> Result<DeltaTable, StorageError> {
        let mut table = DeltaTableBuilder::from_url(self.cfg.url.clone())?
            .with_storage_options(self.cfg.options.clone())
            .build()?;
        table.load().await?;
        Ok(table)
    }

    /// Rewrites `person_id` from each key of `map` to its value in project `team`'s rows
    /// (how person merges are folded into the files). Chains in the map are followed (a→b,
    /// b→c rewrites a to c); identities are ignored; a cycle is refused. One Delta update
    /// (`CASE person_id WHEN old THEN new … END`) per `IDS_PER_COMMIT` entries, each
    /// rewriting only the files holding one of its old ids. The replaced files stay until
    /// the normal vacuum.
    pub async fn rewrite_person_ids(
        &self,
        team: TeamId,
        map: &HashMap<String, String>,
    ) -> Result<RewriteStats, StorageError> {
        self.rewrite_person_ids_chunked(team, map, IDS_PER_COMMIT)
            .await
    }

    async fn rewrite_person_ids_chunked(
        &self,
        team: TeamId,
        map: &HashMap<String, String>,
        ids_per_commit: usize,
    ) -> Result<RewriteStats, StorageError> {
        let resolved: Vec<(&str, &str)> = resolve_person_map(map)?.into_iter().collect();
        let mut stats = RewriteStats::default();
        if resolved.is_empty() {
            return Ok(stats);
        }
        let mut guard = self.table.lock().await;
        let files_before = file_sizes(&guard)?;
        let version_before = guard.version().map_or(-1, |v| v as i64);
        for chunk in resolved.chunks(ids_per_commit.max(1)) {
            let olds: Vec<Expr> = chunk.iter().map(|(old, _)| lit(*old)).collect();
            let predicate = col("team_id")
                .eq(lit(team.0))
                .and(col("person_id").in_list(olds, false));
            let rewrite = Expr::Case(Case::new(
                Some(Box::new(col("person_id"))),
                chunk
                    .iter()
                    .map(|(old, new)| (Box::new(lit(*old)), Box::new(lit(*new))))
                    .collect(),
                Some(Box::new(col("person_id"))),
            ));
            let v0 = guard.version();
            let (table, metrics) = guard
                .clone()
                .update()
                .with_predicate(predicate)
                .with_update("person_id", rewrite)
                .with_writer_properties(self.writer_properties())
                .await?;
            *guard = table;
            self.publish(&guard);
            if guard.version() != v0 {
                stats.commits += 1;
            }
            stats.rows_rewritten += metrics.num_updated_rows as u64;
            stats.files_rewritten += metrics.num_removed_files as u64;
            stats.files_written += metrics.num_added_files as u64;
        }
        let version_after = guard.version().map_or(-1, |v| v as i64);
        let files: Vec<String> = file_sizes(&guard)?
            .into_keys()
            .filter(|p| !files_before.contains_key(p))
            .chain((version_before + 1..=version_after).map(log_entry))
            .collect();
        self.fsync_local(files, Vec::new()).await?;
        debug!(team = team.0, ?stats, "rewrote person ids");
        Ok(stats)
    }
}

/// `map` with chains followed (a→b and b→c give a→c) and identities dropped, sorted.
fn resolve_person_map(map: &HashMap<String, String>) -> Result<BTreeMap<&str, &str>, StorageError> {
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

/// Undoes the percent-encoding Delta uses in file paths (partition values).
fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_owned())
}

/// The WAL seq `table`'s commits cover (0 when none).
async fn seq_of(table: &DeltaTable) -> Result<u64, StorageError> {
    let v = table
        .snapshot()?
        .transaction_version(table.log_store().as_ref(), WAL_APP_ID)
        .await?;
    Ok(v.unwrap_or(0).max(0) as u64)
}

/// The log entry of commit `version`, relative to the table root.
fn log_entry(version: i64) -> String {
    format!("_delta_log/{version:020}.json")
}

fn file_sizes(table: &DeltaTable) -> Result<BTreeMap<String, i64>, StorageError> {
    Ok(table
        .snapshot()?
        .log_data()
        .iter()
        .map(|f| (f.path().into_owned(), f.size()))
        .collect())
}

/// Sorts by partition, then by the in-file sort order, so every file is written sorted.
pub fn sort_for_write(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let cols: Vec<SortColumn> = PARTITION_COLUMNS
        .iter()
        .chain(SORT_COLUMNS)
        .map(|name| SortColumn {
            values: batch.column_by_name(name).expect("events column").clone(),
            options: Some(SortOptions::default()),
        })
        .collect();
    let idx = lexsort_to_indices(&cols, None)?;
    take_record_batch(batch, &idx)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, AsArray, StringArray};
    use arrow::datatypes::DataType;
    use chrono::{TimeZone, Utc};
    use datafusion::prelude::SessionContext;
    use serde_json::json;

    use super::*;
    use crate::model::Event;
    use crate::model::person_uuid;
    use crate::storage::inspect::{files_under, grep_dir, parquet_values_containing};
    use crate::storage::schema::events_to_batch;

    /// Sorts first, so it is every file's minimum `distinct_id` in the log's statistics.
    const VICTIM: &str = "aaaa-victim-7f3";
    /// Sorts last: a maximum.
    const VICTIM2: &str = "zzzz-victim-2";
    const SECRET: &str = "victim-secret-91c";

    fn pid(team: i64, distinct_id: &str) -> String {
        person_uuid(TeamId(team), distinct_id)
            .hyphenated()
            .to_string()
    }

    fn event(distinct_id: &str, day: u32, i: usize, props: &serde_json::Value) -> Event {
        Event {
            uuid: uuid::Uuid::now_v7(),
            event: format!("e{}", i % 3),
            distinct_id: distinct_id.into(),
            timestamp: Utc
                .with_ymd_and_hms(2024, 3, day, 10, (i % 60) as u32, 0)
                .unwrap(),
            created_at: Utc::now(),
            properties: props.as_object().unwrap().clone(),
        }
    }

    fn batch(events: &[(i64, Event)]) -> RecordBatch {
        events_to_batch(events.iter().map(|(t, e)| (TeamId(*t), e)), |_, _| None)
    }

    /// `b` with every row's `person_id` set to `person`.
    fn with_person_id(b: RecordBatch, person: &str) -> RecordBatch {
        let idx = b.schema().index_of("person_id").unwrap();
        let mut cols = b.columns().to_vec();
        cols[idx] = Arc::new(StringArray::from(vec![person; b.num_rows()])) as ArrayRef;
        RecordBatch::try_new(b.schema(), cols).unwrap()
    }

    async fn open(dir: &std::path::Path) -> EventsTable {
        let url = Url::from_directory_path(dir.join("events")).unwrap();
        let mut cfg = TableConfig::new(url);
        cfg.row_group_rows = 16;
        EventsTable::open(cfg).await.unwrap()
    }

    /// `(team_id, distinct_id, person_id)` of every row, read through the table's DataFusion
    /// provider as queries read it, sorted.
    async fn rows(table: &EventsTable) -> Vec<(i64, String, String)> {
        let t = table.current().await;
        let ctx = SessionContext::new();
        t.update_datafusion_session(&ctx.state()).unwrap();
        ctx.register_table("events", t.table_provider().await.unwrap())
            .unwrap();
        let batches = ctx
            .sql("SELECT team_id, distinct_id, person_id FROM events")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut out = Vec::new();
        for b in batches {
            let text = |i: usize| {
                let c = arrow::compute::cast(b.column(i), &DataType::Utf8).unwrap();
                c.as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap().to_owned())
                    .collect::<Vec<_>>()
            };
            let teams = arrow::compute::cast(b.column(0), &DataType::Int64).unwrap();
            let teams = teams.as_primitive::<arrow::datatypes::Int64Type>();
            for ((t, d), p) in teams.values().iter().zip(text(1)).zip(text(2)) {
                out.push((*t, d, p));
            }
        }
        out.sort();
        out
    }

    fn log_dir_names(root: &std::path::Path) -> Vec<String> {
        files_under(&root.join("_delta_log"))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn erasing_people_leaves_no_trace_in_files_or_log() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("events");
        let table = open(dir.path()).await;
        let secret = json!({"note": SECRET, "$browser": "Firefox"});
        let plain = json!({"$browser": "Chrome"});
        for round in 0..4usize {
            let mut evs = Vec::new();
            for i in 0..10 {
                let (day, n) = (1 + (i % 2) as u32, round * 10 + i);
                evs.push((1, event(VICTIM, day, n, &secret)));
                evs.push((1, event(&format!("user-{i}"), day, n, &plain)));
                evs.push((2, event(&format!("t2-user-{i}"), day, n, &plain)));
            }
            if round == 2 {
                evs.push((1, event(VICTIM2, 1, 0, &plain)));
            }
            table.append(batch(&evs), round as u64 + 1).await.unwrap();
        }
        // Compaction replaces the small files; the replaced ones, victim rows and all, stay
        // on disk (and in the log) until a vacuum.
        let compacted = table.compact(2).await.unwrap();
        assert!(compacted.files_removed >= 8, "{compacted:?}");
        let late = [
            (1, event(VICTIM, 1, 59, &secret)),
            (1, event("user-late", 2, 58, &plain)),
        ];
        table.append(batch(&late), 5).await.unwrap();
        // Another project's row that happens to carry the victim's person id: not the
        // victim's data (the delete is per project), so it stays.
        let other = with_person_id(
            batch(&[(2, event("t2-same-pid", 1, 0, &plain))]),
            &pid(1, VICTIM),
        );
        table.append(other, 6).await.unwrap();
        assert_eq!(table.committed_seq().await.unwrap(), 6);

        // The helpers find the victim first: as raw text in the log's statistics, and as
        // decoded values in the (zstd) data files.
        let needles = [VICTIM, VICTIM2, SECRET];
        let raw = grep_dir(&root, &needles);
        assert!(
            raw.iter()
                .any(|(p, n)| n == VICTIM && p.to_string_lossy().contains("_delta_log")),
            "{raw:?}"
        );
        let decoded = parquet_values_containing(&root, &needles);
        for n in needles {
            assert!(decoded.iter().any(|(_, v)| v.contains(n)), "{n} not found");
        }
        let before = rows(&table).await;
        // What a crash mid-append leaves: a data file no commit names. And the writer lease,
        // which lives beside the log and must survive.
        let data_file = files_under(&root)
            .into_iter()
            .find(|p| p.to_string_lossy().contains("team_id=1/"))
            .unwrap();
        let orphan = data_file.with_file_name("part-left-by-a-crash.zstd.parquet");
        std::fs::copy(&data_file, &orphan).unwrap();
        let lease = root.join("_hedgerow/writer.json");
        std::fs::create_dir_all(lease.parent().unwrap()).unwrap();
        std::fs::write(&lease, "{}").unwrap();

        let ids = [pid(1, VICTIM), pid(1, VICTIM2), "nobody".to_owned()];
        // One id per delete, so the chunking is exercised.
        let stats = table
            .delete_person_events_chunked(TeamId(1), &ids, 1)
            .await
            .unwrap();
        assert_eq!(stats.rows_deleted, 4 * 10 + 1 + 1, "{stats:?}");
        assert!(stats.files_rewritten >= 2, "{stats:?}");
        assert!(stats.files_vacuumed >= stats.files_rewritten, "{stats:?}");
        assert!(stats.log_files_removed >= 8, "{stats:?}");

        // Nothing left anywhere: not as raw bytes, not in any Parquet value (data files,
        // files no longer in the snapshot, checkpoints), and no log entry of the deletes.
        assert_eq!(grep_dir(&root, &needles), vec![]);
        assert_eq!(parquet_values_containing(&root, &needles), vec![]);
        assert_eq!(grep_dir(&root.join("_delta_log"), &["DELETE"]), vec![]);
        assert!(!orphan.exists());
        assert_eq!(std::fs::read(&lease).unwrap(), b"{}");
        let log = log_dir_names(&root);
        assert!(log.iter().all(|n| !n.ends_with(".tmp")), "{log:?}");
        assert_eq!(
            log.iter().filter(|n| n.ends_with(".json")).count(),
            1,
            "{log:?}"
        );

        // Everyone else's rows are all still there, read the way queries read them.
        let after = rows(&table).await;
        let expected: Vec<_> = before
            .iter()
            .filter(|(t, d, _)| !(*t == 1 && (d == VICTIM || d == VICTIM2)))
            .cloned()
            .collect();
        assert_eq!(after.len(), before.len() - 42);
        assert_eq!(after, expected);
        assert!(after.iter().any(|(t, d, _)| *t == 2 && d == "t2-same-pid"));
        assert_eq!(table.committed_seq().await.unwrap(), 6);

        // The table keeps working: appends, compaction, a reopen.
        let more = [(1, event("user-after", 1, 0, &plain))];
        table.append(batch(&more), 7).await.unwrap();
        assert_eq!(table.committed_seq().await.unwrap(), 7);
        table.compact(2).await.unwrap();
        assert_eq!(rows(&table).await.len(), after.len() + 1);
        drop(table);
        let table = open(dir.path()).await;
        assert_eq!(table.committed_seq().await.unwrap(), 7);
        assert_eq!(rows(&table).await.len(), after.len() + 1);

        // Erasing again finds nothing, still cleans up, twice in a row (nothing new to
        // commit the second time), and the position still holds.
        for _ in 0..2 {
            let again = table
                .delete_person_events(TeamId(1), &[pid(1, VICTIM)])
                .await
                .unwrap();
            assert_eq!(again.rows_deleted, 0);
            assert_eq!(table.committed_seq().await.unwrap(), 7);
        }
        assert_eq!(rows(&table).await.len(), after.len() + 1);
        table.append(batch(&more), 8).await.unwrap();
        assert_eq!(table.committed_seq().await.unwrap(), 8);
        assert_eq!(grep_dir(&root, &needles), vec![]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rewriting_person_ids_folds_merged_people() {
        let dir = tempfile::tempdir().unwrap();
        let table = open(dir.path()).await;
        let p = json!({});
        let day1: Vec<_> = ["a", "b", "c", "d", "a", "b"]
            .iter()
            .enumerate()
            .map(|(i, d)| (1, event(d, 1, i, &p)))
            .collect();
        table.append(batch(&day1), 1).await.unwrap();
        let day2: Vec<_> = ["a", "d", "c"]
            .iter()
            .enumerate()
            .map(|(i, d)| (1, event(d, 2, i, &p)))
            .collect();
        table.append(batch(&day2), 2).await.unwrap();
        // Project 2 has a row with project 1's person id for "a": not project 1's to fold.
        let other = with_person_id(batch(&[(2, event("x", 1, 0, &p))]), &pid(1, "a"));
        table.append(other, 3).await.unwrap();

        let (pa, pb, pc, pd) = (pid(1, "a"), pid(1, "b"), pid(1, "c"), pid(1, "d"));
        // b merged into a, then a into c: the chain ends at c. An identity changes nothing.
        let map = HashMap::from([
            (pb.clone(), pa.clone()),
            (pa.clone(), pc.clone()),
            (pd.clone(), pd.clone()),
        ]);
        let stats = table
            .rewrite_person_ids_chunked(TeamId(1), &map, 1)
            .await
            .unwrap();
        assert_eq!(stats.rows_rewritten, 5, "{stats:?}");
        assert_eq!(stats.commits, 2, "{stats:?}");
        assert!(stats.files_rewritten >= 2 && stats.files_written >= 2);
        let got = rows(&table).await;
        assert_eq!(got.len(), 10);
        for (t, d, person) in &got {
            let want = match (*t, d.as_str()) {
                (1, "a" | "b" | "c") => &pc,
                (1, "d") => &pd,
                (2, _) => &pa,
                other => panic!("unexpected row {other:?}"),
            };
            assert_eq!(person, want, "{t} {d}");
        }
        assert_eq!(table.committed_seq().await.unwrap(), 3);

        // Nothing matching: no commit.
        let version = table.current().await.version();
        let none = table
            .rewrite_person_ids(TeamId(1), &HashMap::from([(pb.clone(), pd.clone())]))
            .await
            .unwrap();
        assert_eq!(none.rows_rewritten, 0);
        assert_eq!(table.current().await.version(), version);
        // A cycle is refused.
        let cycle = HashMap::from([(pa.clone(), pd.clone()), (pd.clone(), pa.clone())]);
        assert!(matches!(
            table.rewrite_person_ids(TeamId(1), &cycle).await,
            Err(StorageError::Config(_))
        ));
        // The table still takes appends.
        table
            .append(batch(&[(1, event("e", 1, 0, &p))]), 4)
            .await
            .unwrap();
        assert_eq!(rows(&table).await.len(), 11);
    }
}
