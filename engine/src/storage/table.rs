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
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig, default_logstore,
    logstore_factories, object_store_factories,
};
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::metadata::SortingColumn;
use deltalake::parquet::file::properties::{EnabledStatistics, WriterProperties};
use deltalake::protocol::SaveMode;
use deltalake::{DeltaResult, DeltaTable, DeltaTableBuilder, DeltaTableError};
use futures::StreamExt;
use object_store::path::Path;
use tokio::sync::Mutex;
use tracing::{debug, info};
use url::Url;

use super::schema::{PARTITION_COLUMNS, SORT_COLUMNS, events_schema};
use crate::error::{ErrorKind, HasKind};

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
            zstd_level: 3,
            target_file_bytes: 128 * 1024 * 1024,
        }
    }
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

/// What one compaction pass did.
#[derive(Debug, Clone, Default)]
pub struct CompactStats {
    pub partitions: u64,
    pub files_removed: u64,
    pub files_added: u64,
}

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
            table: Mutex::new(table),
        })
    }

    pub fn url(&self) -> &Url {
        &self.cfg.url
    }

    /// The last WAL sequence covered by a commit (0 when none).
    pub async fn committed_seq(&self) -> Result<u64, StorageError> {
        let table = self.table.lock().await;
        let v = table
            .snapshot()?
            .transaction_version(table.log_store().as_ref(), WAL_APP_ID)
            .await?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// A clone of the current snapshot's table handle and the WAL seq its commits cover.
    pub async fn snapshot_with_seq(&self) -> Result<(DeltaTable, u64), StorageError> {
        let table = self.table.lock().await.clone();
        let v = table
            .snapshot()?
            .transaction_version(table.log_store().as_ref(), WAL_APP_ID)
            .await?;
        Ok((table, v.unwrap_or(0).max(0) as u64))
    }

    /// A clone of the current snapshot's table handle, for readers.
    pub async fn current(&self) -> DeltaTable {
        self.table.lock().await.clone()
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
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(self.cfg.zstd_level).unwrap_or_default(),
            ))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(self.cfg.row_group_rows.max(1)))
            .set_sorting_columns(Some(sorting))
            .build()
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
        if self.cfg.url.scheme() != "file" {
            return Ok(());
        }
        let root = self
            .cfg
            .url
            .to_file_path()
            .map_err(|_| StorageError::Config(format!("bad table path {}", self.cfg.url)))?;
        let mut paths: Vec<std::path::PathBuf> = files
            .map(|f| {
                let decoded = percent_decode(f);
                root.join(decoded)
            })
            .collect();
        paths.push(root.join("_delta_log").join(format!("{version:020}.json")));
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut dirs = std::collections::BTreeSet::new();
            for p in &paths {
                std::fs::File::open(p)?.sync_all()?;
                let mut d = p.parent();
                while let Some(dir) = d {
                    if !dirs.insert(dir.to_path_buf()) || dir == root {
                        break;
                    }
                    d = dir.parent();
                }
            }
            dirs.insert(root.clone());
            for d in dirs {
                std::fs::File::open(&d)?.sync_all()?;
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
        Ok(metrics.files_deleted.len())
    }
}

/// Undoes the percent-encoding Delta uses in file paths (partition values).
fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_owned())
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
