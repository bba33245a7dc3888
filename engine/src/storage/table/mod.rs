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
use arrow::compute::{SortColumn, SortOptions, lexsort_to_indices};
use datafusion::logical_expr::{col, lit};
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
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use tokio::sync::Mutex;
use tracing::{debug, info};
use url::Url;

use super::layout::conform;
use super::schema::{PARTITION_COLUMNS, SORT_COLUMNS, events_schema};
use crate::error::{ErrorKind, HasKind};
use crate::model::TeamId;

mod erase;
mod maintain;
mod merge;
#[cfg(test)]
pub(crate) use maintain::team_files;
pub(crate) use maintain::{PersonMaps, ScanFile, TeamFiles};
#[cfg(test)]
use maintain::{decode, fetch, partition_files};
mod rewrite;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use write::AppendStats;

/// The Delta application-transaction id under which appends record their WAL sequence.
pub(crate) const WAL_APP_ID: &str = "hedgerow-wal";

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
    /// Local files of a commit could not be made durable.
    #[error("events table I/O: cannot fsync the committed files: {0}")]
    Fsync(#[source] std::io::Error),
    /// A blocking task the table handed work to failed (it panicked or was cancelled).
    #[error("events table I/O: {what} task failed: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// A step left the table other than it must be; the operation stopped there.
    #[error("events table I/O: {0}")]
    Invariant(String),
    #[error("{0}")]
    Lease(String),
}

impl HasKind for StorageError {
    fn kind(&self) -> ErrorKind {
        match self {
            StorageError::Config(_) => ErrorKind::InvalidInput,
            StorageError::Lease(_) => ErrorKind::Conflict,
            StorageError::ObjectStore(_)
            | StorageError::Fsync(_)
            | StorageError::Task { .. }
            | StorageError::Invariant(_) => ErrorKind::Unavailable,
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

/// What one compaction pass did.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompactStats {
    pub partitions: u64,
    pub files_removed: u64,
    pub files_added: u64,
    /// Rows whose merged-away person id was replaced by the one it went into.
    pub rows_folded: u64,
    /// Partitions whose rewrite was dropped because a file it replaced went meanwhile.
    pub partitions_abandoned: u64,
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

/// Person ids per delete commit: bounds the predicate's size.
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
    /// Projects whose stored person properties compaction already counted keys of in this
    /// process: a table ingested without person processing has no person layouts in any new
    /// file, and must not be sampled again at every compaction.
    person_keys_sampled: std::sync::Mutex<std::collections::HashSet<TeamId>>,
    /// Files and log entries of commits that landed but were not made durable (their fsync
    /// or the snapshot's update after them failed): written again and fsynced before the
    /// next commit, and the snapshot brought up to date first ([`EventsTable::settle`]).
    in_doubt: std::sync::Mutex<Vec<String>>,
    /// What queries derive from a snapshot, kept for the latest version read: its WAL seq
    /// and each project's files. Every query asked the log for the seq (a read of the log)
    /// and parsed every file's statistics JSON again: 10–25 ms per query at 131 files.
    reads: std::sync::Mutex<maintain::ReadCache>,
    /// Files this process's vacuums already deleted. delta-rs's vacuum takes its candidates
    /// from the log's tombstones, which outlive the files by a week: without this every
    /// compaction tick "deleted" the same files again and committed a VACUUM START/END pair
    /// for it (about 700 log entries in a 6-minute bench).
    vacuumed: std::sync::Mutex<std::collections::HashSet<String>>,
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
            Err(e) => return Err(damaged_log_entry(&table, e.into()).await),
        }
        Ok(Self {
            cfg,
            latest: std::sync::RwLock::new(table.clone()),
            person_keys_sampled: Default::default(),
            in_doubt: Default::default(),
            reads: Default::default(),
            vacuumed: Default::default(),
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

    /// The last WAL sequence covered by a commit (0 when none). Loading the table reads
    /// the protocol and the metadata; the actions are read here first (the engine asks
    /// at start), so a damaged log entry is named here.
    pub async fn committed_seq(&self) -> Result<u64, StorageError> {
        let table = self.latest();
        match seq_of(&table).await {
            Ok(seq) => Ok(seq),
            Err(e) => Err(damaged_log_entry(&table, e).await),
        }
    }

    /// A clone of the current snapshot's table handle and the WAL seq its commits cover.
    pub async fn snapshot_with_seq(&self) -> Result<(DeltaTable, u64), StorageError> {
        let table = self.latest();
        let version = table.version();
        if let Some(seq) = self.reads().seq_at(version) {
            return Ok((table, seq));
        }
        let seq = seq_of(&table).await?;
        self.reads().keep_seq(version, seq);
        Ok((table, seq))
    }

    /// `team`'s files in `table` (a snapshot this table handed out), parsed once per
    /// version; a file's statistics once per file.
    pub(crate) fn team_files(
        &self,
        table: &DeltaTable,
        team: TeamId,
    ) -> Result<Arc<TeamFiles>, StorageError> {
        self.reads().team_files(table, team)
    }

    fn reads(&self) -> std::sync::MutexGuard<'_, maintain::ReadCache> {
        self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A clone of the current snapshot's table handle, for readers.
    pub async fn current(&self) -> DeltaTable {
        self.latest()
    }

    /// Re-reads the log (another process may have compacted or vacuumed).
    pub async fn refresh(&self) -> Result<(), StorageError> {
        let mut guard = self.table.lock().await;
        guard.update_state().await?;
        self.publish(&guard);
        Ok(())
    }

    /// The table loaded afresh from storage.
    async fn load_fresh(&self) -> Result<DeltaTable, StorageError> {
        let mut table = DeltaTableBuilder::from_url(self.cfg.url.clone())?
            .with_storage_options(self.cfg.options.clone())
            .build()?;
        table.load().await?;
        Ok(table)
    }
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

/// `e`, the failure to load the table, naming the log entry that does not parse when one
/// does not: the kernel's message (`Json error: Encountered unexpected ' ' whilst parsing
/// escape sequence`) says what, not where.
async fn damaged_log_entry(table: &DeltaTable, e: StorageError) -> StorageError {
    let store = table.log_store().object_store(None);
    let Ok(mut entries) = store
        .list(Some(&Path::from("_delta_log")))
        .map_ok(|m| m.location)
        .try_collect::<Vec<_>>()
        .await
    else {
        return e;
    };
    entries.retain(|p| p.as_ref().ends_with(".json"));
    entries.sort();
    for entry in entries {
        let Ok(got) = store.get(&entry).await else {
            continue;
        };
        let Ok(bytes) = got.bytes().await else {
            continue;
        };
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Err(parse) = serde_json::from_slice::<serde_json::Value>(line) {
                let what = parse.to_string();
                let what = what.split(" at line ").next().unwrap_or_default();
                return StorageError::Config(format!(
                    "events table: the log entry {entry} is damaged (line {}, column {}: \
                     {what}), so the table cannot be read; restore that file from a backup. \
                     The reader said: {e}",
                    i + 1,
                    parse.column()
                ));
            }
        }
    }
    e
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
