//! Opening a data directory and shutting the engine down.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, watch};
use tracing::info;
use url::Url;

use crate::clock::SharedClock;
use crate::error::{ErrorKind, HasKind};
use crate::ingest::limits::DecodeBudget;
use crate::ingest::wal::WalError;
use crate::ingest::wal::{Wal, WalConfig};
use crate::meta::MetaError;
use crate::meta::MetaStore;
use crate::metrics::Metrics;
use crate::model::IngestBatch;
use crate::persons::process::Persons;
use crate::persons::store::StoreError;
use crate::persons::store::{PersonStore, SqliteStore};
use crate::query::QueryService;
use crate::storage::buffer::EventBuffer;
use crate::storage::lease::WriterLease;
use crate::storage::table::StorageError;
use crate::storage::table::{EventsTable, TableConfig};
use crate::write::{Pipeline, QueueBudget, apply, to_arrow};
use crate::{Engine, EngineConfig};

/// What opening the engine, or its own background work, can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Persons(#[from] StoreError),
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// A file or directory of the data directory could not be used.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The data directory's path cannot be a table URL.
    #[error("bad data directory path: {0}")]
    BadPath(std::path::PathBuf),
    /// A WAL record acknowledged earlier does not decode: the WAL is damaged.
    #[error("WAL record {seq} does not decode: {source}")]
    BadWalRecord {
        seq: u64,
        #[source]
        source: serde_json::Error,
    },
    /// Work the engine handed to another task failed there (it panicked or was cancelled).
    #[error("{what}: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// A deletion run could not get the buffer written out in time; its tasks stay queued.
    #[error(
        "deletion: the buffer was not written out within 10 minutes (table at WAL seq \
         {committed}, need {target}); the tasks stay queued"
    )]
    FlushTimeout { committed: u64, target: u64 },
    /// Another process holds the data directory.
    #[error("{0} is in use by another hedgerow process")]
    Locked(std::path::PathBuf),
    /// `HEDGEROW_FAILPOINTS` does not parse.
    #[error("{0}")]
    Failpoints(String),
}

impl HasKind for EngineError {
    fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Meta(e) => e.kind(),
            EngineError::Storage(e) => e.kind(),
            EngineError::Wal(e) => e.kind(),
            EngineError::Persons(e) => e.kind(),
            EngineError::Query(e) => e.kind(),
            EngineError::Io { .. }
            | EngineError::BadPath(_)
            | EngineError::BadWalRecord { .. }
            | EngineError::Task { .. }
            | EngineError::FlushTimeout { .. } => ErrorKind::Internal,
            EngineError::Locked(_) => ErrorKind::Conflict,
            EngineError::Failpoints(_) => ErrorKind::InvalidInput,
        }
    }
}

/// An I/O error in the data directory, with what was being done.
fn io(what: &str) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        what: what.to_owned(),
        source,
    }
}

/// The data directory's stable id, made on first use: the table lease's owner.
fn writer_id(data_dir: &std::path::Path) -> Result<String, EngineError> {
    let path = data_dir.join("writer-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            let id = uuid::Uuid::new_v4().to_string();
            std::fs::write(&path, &id).map_err(io("cannot write writer-id"))?;
            Ok(id)
        }
    }
}

impl Engine {
    /// Opens the data directory: takes its lock and the table's writer lease, opens
    /// SQLite, the table and the WAL, replays what the table does not cover yet, and starts
    /// the ingest pipeline.
    pub async fn open(cfg: EngineConfig, clock: SharedClock) -> Result<Self, EngineError> {
        crate::faults::init().map_err(EngineError::Failpoints)?;
        ignore_file_size_signal();
        std::fs::create_dir_all(&cfg.data_dir).map_err(io("cannot create the data directory"))?;
        let data_dir = cfg
            .data_dir
            .canonicalize()
            .map_err(io("cannot resolve the data directory"))?;
        let lock = File::create(data_dir.join("LOCK")).map_err(io("cannot create LOCK"))?;
        if lock.try_lock().is_err() {
            return Err(EngineError::Locked(data_dir));
        }
        let meta = Arc::new(MetaStore::open(&data_dir.join("meta.sqlite"))?);
        meta.set_property_columns(cfg.property_columns);
        let table_url = match &cfg.table_url {
            Some(u) => u.clone(),
            None => Url::from_directory_path(data_dir.join("events"))
                .map_err(|_| EngineError::BadPath(data_dir.clone()))?,
        };
        let writer_id = writer_id(&data_dir)?;
        let lease = Arc::new(
            WriterLease::acquire(&writer_id, &table_url, &cfg.storage_options, cfg.lease_ttl)
                .await?,
        );
        let mut tcfg = TableConfig::new(table_url);
        tcfg.options = cfg.storage_options.clone();
        tcfg.row_group_rows = cfg.row_group_rows;
        tcfg.page_rows = cfg.page_rows;
        tcfg.target_file_bytes = cfg.target_file_bytes;
        let table = Arc::new(EventsTable::open(tcfg).await?);
        let committed = table.committed_seq().await?;
        // A write that died between its files and its commit (a kill, a power cut) left
        // files no version of the log names; with the lease held nothing of ours is in
        // flight, so they go now.
        let leftovers = table.delete_uncommitted_files().await?;
        if leftovers > 0 {
            tracing::info!(
                files = leftovers,
                "deleted data files an interrupted write left uncommitted"
            );
        }
        let metrics = Arc::new(Metrics::default());
        metrics.committed_seq.store(committed, Ordering::Relaxed);

        let person_store: Arc<dyn PersonStore> =
            Arc::new(SqliteStore::open(&data_dir.join("meta.sqlite"))?);
        let mut persons = Persons::open(person_store.clone())?;
        persons.set_enabled(cfg.person_processing);
        let persons_seq = persons.stored_seq();

        let (tx, rx) = mpsc::channel(1024);
        let wal_cfg = WalConfig {
            dir: data_dir.join("wal"),
            segment_bytes: cfg.wal_segment_bytes,
            ..WalConfig::default()
        };
        // Replay from the older of the two positions: the table's rows and the person store's
        // changes are each applied once (see `apply`'s `in_table`).
        let (wal, replay) = Wal::open(wal_cfg, committed.min(persons_seq), tx)?;
        let buffer = Arc::new(EventBuffer::default());
        let mut replayed = 0usize;
        for rec in &replay {
            let batch: IngestBatch = serde_json::from_slice(&rec.payload).map_err(|source| {
                EngineError::BadWalRecord {
                    seq: rec.seq,
                    source,
                }
            })?;
            replayed += batch.events.len();
            apply(
                &meta,
                &buffer,
                &mut persons,
                &metrics,
                rec.seq,
                to_arrow(&meta, &batch),
                rec.seq <= committed,
            );
        }
        // Everything up to the WAL's end is applied now (a data directory from before person
        // processing, or a WAL with nothing new, moves the store's position up to it too).
        let applied = replay
            .last()
            .map_or(persons_seq, |r| r.seq.max(persons_seq))
            .max(wal.last_seq());
        persons.skip(applied);
        persons.commit(applied)?;
        let (persons_seq_tx, persons_seq_rx) = watch::channel(person_store.last_seq());
        // Everything up to the WAL's end is now in the table or the buffer: queries waiting to
        // read their writes compare against this.
        buffer.note_seq(committed.max(wal.last_seq()));
        if !replay.is_empty() {
            info!(
                records = replay.len(),
                events = replayed,
                from_seq = committed + 1,
                "replayed the WAL"
            );
        }

        let (shutdown, shutdown_rx) = watch::channel(false);
        let flush_now = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pipeline = {
            let lease = lease.clone();
            Pipeline {
                buffer: buffer.clone(),
                table: table.clone(),
                meta: meta.clone(),
                wal: wal.clone(),
                metrics: metrics.clone(),
                cfg: cfg.flush.clone(),
                maintenance: cfg.maintenance.clone(),
                may_commit: Arc::new(move || lease.is_held()),
                persons,
                persons_seq: persons_seq_tx,
                applied,
                flush_now: flush_now.clone(),
            }
        };
        let handle = tokio::spawn(pipeline.run(rx, shutdown_rx, committed));
        let mut qcfg = cfg.query.clone();
        qcfg.spill_dir = data_dir.join(&qcfg.spill_dir);
        qcfg.snapshot_dir = data_dir.join(&qcfg.snapshot_dir);
        // Spill files of a previous run are garbage.
        let _ = std::fs::remove_dir_all(&qcfg.spill_dir);
        let query = Arc::new(QueryService::new(
            qcfg,
            meta.clone(),
            table.clone(),
            buffer.clone(),
            clock.clone(),
            {
                let wal = wal.clone();
                Arc::new(move || wal.last_seq())
            },
            person_store.clone(),
        )?);
        query.prune_log();
        let budget = DecodeBudget::new(cfg.capture.decode_memory, cfg.capture.budget_wait);
        // A quarter of the buffer's hard limit for records waiting for the pipeline.
        let queue = QueueBudget::new(cfg.flush.hard_limit_bytes / 4);
        Ok(Self {
            query,
            cfg: EngineConfig { data_dir, ..cfg },
            clock,
            meta,
            metrics,
            wal,
            buffer,
            table,
            lease,
            person_store,
            persons_seq: persons_seq_rx,
            flush_now,
            deletion_lock: tokio::sync::Mutex::new(()),
            tokens: RwLock::default(),
            budget,
            queue,
            shutdown,
            pipeline: tokio::sync::Mutex::new(Some(handle)),
            _dir_lock: lock,
        })
    }

    /// Stops taking events, writes everything buffered to the table, gives up the lease.
    pub async fn shutdown(&self) {
        // Closing joins the WAL writer thread after it drains: keep it off the runtime.
        let wal = self.wal.clone();
        self.queue.close();
        let _ = tokio::task::spawn_blocking(move || wal.close()).await;
        let _ = self.shutdown.send(true);
        if let Some(h) = self.pipeline.lock().await.take() {
            let _ = h.await;
        }
        self.lease.release().await;
    }
}

/// A write past the process's file-size limit (`ulimit -f`, RLIMIT_FSIZE) raises SIGXFSZ,
/// whose default action kills the process, and would take every acknowledged-but-unflushed
/// request's answer with it. Ignored, the write fails with EFBIG instead and is handled as
/// the I/O error it is (a 503 for capture, a retried flush), as PostgreSQL does.
/// (`tests/py/test_faults.py::test_a_file_size_limit_fails_writes_not_the_process`: the
/// server died by SIGXFSZ before.)
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler and touches no
    // memory of ours; it is process-wide and idempotent.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
