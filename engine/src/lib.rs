//! hedgerow's engine: everything that is not HTTP.
//!
//! One facade, [`Engine`], owns the metadata store (projects, keys), the write-ahead log,
//! the ingest pipeline, the Arrow buffer and the events table. The binary's HTTP layer
//! decodes requests, calls one method here, and encodes the answer; nothing in this crate
//! knows about axum, hyper or HTTP statuses (errors carry an [`error::ErrorKind`]).

mod api;
pub mod clock;
pub mod datagen;
pub mod error;
pub mod hogql;
pub mod ingest;
pub mod meta;
pub mod metrics;
pub mod model;
pub mod persons;
pub mod propdefs;
pub mod query;
pub mod schedule;
pub mod storage;
#[cfg(test)]
mod testalloc;
pub mod write;

pub use api::{Access, PersonsError, ProjectsError};

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::TimeDelta;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};
use url::Url;

use crate::clock::SharedClock;
use crate::error::{ErrorKind, HasKind};
use crate::ingest::decode::{RawBody, decode_transport, decoded_bound, may_inflate, parse_json};
use crate::ingest::limits::{
    CaptureLimits, DecodeBudget, MAX_JSON_DEPTH, check_event_limits, decode_cost, scan_refusal,
};
use crate::ingest::normalize::{NormalizeContext, Outcome, normalize_event};
use crate::ingest::payload::{CapturePayload, parse_payload};
use crate::ingest::scan::{JsonShape, scan};
use crate::ingest::wal::{Wal, WalConfig, WalError};
use crate::ingest::{CaptureError, IngestBatch};
use crate::meta::{MetaError, MetaStore, Project};
use crate::metrics::Metrics;
use crate::model::TeamId;
use crate::persons::process::Persons;
use crate::persons::store::{PersonStore, SqliteStore, StoreError};
use crate::query::{QueryConfig, QueryService};
use crate::storage::buffer::EventBuffer;
use crate::storage::lease::WriterLease;
use crate::storage::table::{EventsTable, StorageError, TableConfig};
use crate::write::{FlushConfig, Ingested, Pipeline, apply, to_arrow};

/// How old an event of a `historical_migration` batch must be (spec §4.4 rule 3).
pub const HISTORICAL_MIN_AGE: TimeDelta = TimeDelta::hours(48);

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Local directory for SQLite, the WAL and (by default) the events table.
    pub data_dir: PathBuf,
    /// Where the events table lives; `None` is `<data_dir>/events` on local disk.
    pub table_url: Option<Url>,
    /// object_store options for `table_url` (S3 endpoint, region, credentials…).
    pub storage_options: HashMap<String, String>,
    pub wal_segment_bytes: u64,
    pub flush: FlushConfig,
    pub row_group_rows: usize,
    /// Most rows per Parquet data page.
    pub page_rows: usize,
    pub target_file_bytes: u64,
    /// A writer lease older than this is taken over.
    pub lease_ttl: Duration,
    /// Query memory, cache ages and parallelism. Its `spill_dir` is relative to `data_dir`
    /// when not absolute.
    pub query: QueryConfig,
    /// False: no person is made or changed; every event is personless.
    pub person_processing: bool,
    /// What one capture request may cost, and all of them together.
    pub capture: CaptureLimits,
}

impl EngineConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            table_url: None,
            storage_options: HashMap::new(),
            wal_segment_bytes: 64 << 20,
            flush: FlushConfig::default(),
            row_group_rows: 128 * 1024,
            page_rows: 20_000,
            target_file_bytes: 128 << 20,
            lease_ttl: Duration::from_secs(30),
            query: QueryConfig::new(PathBuf::from("spill")),
            person_processing: true,
            capture: CaptureLimits::default(),
        }
    }
}

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
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Locked(String),
}

impl HasKind for EngineError {
    fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Meta(e) => e.kind(),
            EngineError::Storage(e) => e.kind(),
            EngineError::Wal(e) => e.kind(),
            EngineError::Persons(e) => e.kind(),
            EngineError::Io(_) => ErrorKind::Internal,
            EngineError::Locked(_) => ErrorKind::Conflict,
        }
    }
}

/// What a deletion run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeletionRun {
    pub event_tasks: u64,
    pub recording_tasks: u64,
    pub rows_deleted: u64,
    pub files_rewritten: u64,
    pub files_vacuumed: u64,
}

/// What a capture call accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureReceipt {
    pub accepted: usize,
    pub skipped: usize,
    /// WAL sequence of the record, when anything was written.
    pub seq: Option<u64>,
}

/// A capture request's body and the transport hints that say how to decode it, owned so
/// the work can move to the blocking pool.
#[derive(Debug, Clone, Default)]
pub struct CaptureBody {
    pub body: bytes::Bytes,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// `?compression=`.
    pub compression: Option<String>,
    /// `?data=` of a legacy GET request.
    pub data_param: Option<String>,
    /// `?_=` (milliseconds), used when the body has no `sent_at`.
    pub sent_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl CaptureBody {
    fn raw(&self) -> RawBody<'_> {
        RawBody {
            body: &self.body,
            content_type: self.content_type.as_deref(),
            content_encoding: self.content_encoding.as_deref(),
            compression: self.compression.as_deref(),
            data_param: self.data_param.as_deref(),
        }
    }
}

/// A WAL record made ready off the async path: its bytes and its Arrow rows.
struct WalRecord {
    events: u64,
    bytes: Vec<u8>,
    ingested: Ingested,
}

/// A normalized capture request, ready for the WAL (`None`: nothing to write).
struct PreparedCapture {
    record: Option<(WalRecord, usize)>,
    skipped: usize,
}

/// Runs `f` on tokio's blocking pool when `blocking`, else right here.
async fn off_worker<T: Send + 'static>(
    blocking: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CaptureError> {
    if !blocking {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CaptureError::Unavailable(format!("the capture task failed: {e}")))
}

pub struct Engine {
    cfg: EngineConfig,
    query: Arc<QueryService>,
    clock: SharedClock,
    meta: Arc<MetaStore>,
    metrics: Arc<Metrics>,
    wal: Wal<Ingested>,
    buffer: Arc<EventBuffer>,
    table: Arc<EventsTable>,
    lease: Arc<WriterLease>,
    person_store: Arc<dyn PersonStore>,
    /// The last WAL seq whose person changes are stored.
    persons_seq: watch::Receiver<u64>,
    flush_now: Arc<std::sync::atomic::AtomicBool>,
    deletion_lock: tokio::sync::Mutex<()>,
    tokens: RwLock<HashMap<String, Project>>,
    /// Memory for capture requests being decoded (`CaptureLimits::decode_memory`).
    budget: DecodeBudget,
    shutdown: watch::Sender<bool>,
    pipeline: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    _dir_lock: File,
}

fn io(what: &str, e: std::io::Error) -> EngineError {
    EngineError::Io(format!("{what}: {e}"))
}

/// The data directory's stable id, made on first use: the table lease's owner.
fn writer_id(data_dir: &std::path::Path) -> Result<String, EngineError> {
    let path = data_dir.join("writer-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            let id = uuid::Uuid::new_v4().to_string();
            std::fs::write(&path, &id).map_err(|e| io("cannot write writer-id", e))?;
            Ok(id)
        }
    }
}

impl Engine {
    /// Opens the data directory: takes its lock and the table's writer lease, opens
    /// SQLite, the table and the WAL, replays what the table does not cover yet, and starts
    /// the ingest pipeline.
    pub async fn open(cfg: EngineConfig, clock: SharedClock) -> Result<Self, EngineError> {
        std::fs::create_dir_all(&cfg.data_dir)
            .map_err(|e| io("cannot create the data directory", e))?;
        let data_dir = cfg
            .data_dir
            .canonicalize()
            .map_err(|e| io("cannot resolve the data directory", e))?;
        let lock = File::create(data_dir.join("LOCK")).map_err(|e| io("cannot create LOCK", e))?;
        if lock.try_lock().is_err() {
            return Err(EngineError::Locked(format!(
                "{} is in use by another hedgerow process",
                data_dir.display()
            )));
        }
        let meta = Arc::new(MetaStore::open(&data_dir.join("meta.sqlite"))?);
        let table_url = match &cfg.table_url {
            Some(u) => u.clone(),
            None => Url::from_directory_path(data_dir.join("events"))
                .map_err(|_| EngineError::Io("bad data directory path".into()))?,
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
            let batch: IngestBatch = serde_json::from_slice(&rec.payload).map_err(|e| {
                EngineError::Io(format!("WAL record {} does not decode: {e}", rec.seq))
            })?;
            replayed += batch.events.len();
            apply(
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
                wal: wal.clone(),
                metrics: metrics.clone(),
                cfg: cfg.flush.clone(),
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
        // Spill files of a previous run are garbage.
        let _ = std::fs::remove_dir_all(&qcfg.spill_dir);
        let query = Arc::new(
            QueryService::new(
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
            )
            .map_err(|e| EngineError::Io(e.to_string()))?,
        );
        query.prune_log();
        let budget = DecodeBudget::new(cfg.capture.decode_memory, cfg.capture.budget_wait);
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
            tokens: RwLock::new(HashMap::new()),
            budget,
            shutdown,
            pipeline: tokio::sync::Mutex::new(Some(handle)),
            _dir_lock: lock,
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }
    pub fn table(&self) -> &Arc<EventsTable> {
        &self.table
    }
    pub fn buffer(&self) -> &Arc<EventBuffer> {
        &self.buffer
    }

    /// The highest WAL sequence made durable (acknowledged) so far.
    pub fn last_wal_seq(&self) -> u64 {
        self.wal.last_seq()
    }

    /// Refreshes WAL counters into the metrics and renders them.
    pub fn render_metrics(&self) -> String {
        let s = self.wal.stats();
        self.metrics.wal_fsyncs.store(s.fsyncs, Ordering::Relaxed);
        self.metrics
            .wal_bytes
            .store(s.bytes_written, Ordering::Relaxed);
        self.metrics.wal_records.store(s.records, Ordering::Relaxed);
        self.metrics.render()
    }

    /// Decodes, checks and stores one capture request's body, within the capture limits
    /// (`ingest::limits`): the body's decoding may take memory only from the shared budget;
    /// its JSON is counted by the pre-scan before it is parsed; events over the property
    /// limits refuse the request. A big body, or one that may inflate, is decoded, parsed
    /// and normalized on the blocking pool, so the async workers keep serving other
    /// requests. Returns once the events are durable.
    pub async fn capture_body(
        self: &Arc<Self>,
        body: CaptureBody,
    ) -> Result<CaptureReceipt, CaptureError> {
        let limits = &self.cfg.capture;
        let (wire, bound, inflates) = {
            let raw = body.raw();
            let wire = raw.body.len() + raw.data_param.map_or(0, str::len);
            (
                wire,
                decoded_bound(&raw, limits.max_body),
                may_inflate(&raw),
            )
        };
        // What decoding can allocate before the scan knows better: the wire bytes and the
        // most the decoded text can be. Capped by the budget so a small budget still lets
        // one request at a time through.
        let first = (wire + bound).min(self.budget.total_bytes());
        let mut permit = self.budget.acquire(first).await?;
        let (max_body, max_values) = (limits.max_body, limits.max_json_values);
        let sent_at = body.sent_at;
        let (json, shape) = off_worker(inflates || wire > limits.blocking_threshold, move || {
            let decoded = decode_transport(&body.raw(), max_body)?;
            let shape = scan(&decoded, max_values, MAX_JSON_DEPTH).map_err(scan_refusal)?;
            let json = match decoded {
                std::borrow::Cow::Borrowed(b) => body.body.slice_ref(b),
                std::borrow::Cow::Owned(v) => bytes::Bytes::from(v),
            };
            Ok::<(bytes::Bytes, JsonShape), CaptureError>((json, shape))
        })
        .await??;
        permit
            .resize(&self.budget, decode_cost(wire, &shape))
            .await?;
        let this = self.clone();
        let prepared = off_worker(json.len() > limits.blocking_threshold, move || {
            let value = parse_json(&json)?;
            drop(json);
            this.prepare_capture(parse_payload(value, sent_at)?)
        })
        .await??;
        let receipt = self.commit_capture(prepared).await;
        drop(permit);
        receipt
    }

    /// Normalizes a decoded capture request and makes it durable. Returns once the events
    /// are fsynced in the WAL: the caller may then acknowledge them. Runs on the caller's
    /// thread and takes nothing from the capture budget: [`Engine::capture_body`] is the
    /// way in for request bodies.
    pub async fn capture(&self, payload: CapturePayload) -> Result<CaptureReceipt, CaptureError> {
        let prepared = self.prepare_capture(payload)?;
        self.commit_capture(prepared).await
    }

    /// Everything of a capture up to the WAL append, synchronously (it may run on the
    /// blocking pool): the token's project, normalization, the property limits, the WAL
    /// record's bytes and the Arrow rows.
    fn prepare_capture(&self, payload: CapturePayload) -> Result<PreparedCapture, CaptureError> {
        let project = self
            .project_for_token(&payload.token)
            .map_err(|e| CaptureError::Unavailable(e.to_string()))?
            .ok_or_else(|| {
                self.metrics.reject("invalid_api_key", 1);
                CaptureError::InvalidToken(
                    "Project API key invalid: no project has this token. Find your project API key in the project's settings (GET /api/projects/).".into(),
                )
            })?;
        let now = self.clock.now();
        let ctx = NormalizeContext {
            team_id: project.id,
            now,
            sent_at: payload.sent_at,
        };
        let max_properties = self.cfg.capture.max_properties;
        let mut events = Vec::with_capacity(payload.events.len());
        let mut skipped = 0usize;
        for (i, raw) in payload.events.into_iter().enumerate() {
            match normalize_event(raw, &ctx) {
                Ok(Outcome::Event(e)) => {
                    check_event_limits(i, &e, max_properties)?;
                    events.push(e)
                }
                Ok(Outcome::Skipped(reason)) => {
                    skipped += 1;
                    self.metrics.reject(reason.as_str(), 1);
                }
                Err(e) => {
                    self.metrics.reject("invalid_payload", 1);
                    return Err(e);
                }
            }
        }
        if payload.historical_migration {
            let too_recent = events
                .iter()
                .filter(|e| now - e.timestamp < HISTORICAL_MIN_AGE)
                .count();
            if too_recent > 0 {
                // Kept, as live events: refusing them would lose data the caller was told
                // is stored; the counter and the log say it happened.
                self.metrics
                    .historical_too_recent
                    .fetch_add(too_recent as u64, Ordering::Relaxed);
                warn!(
                    team_id = project.id.0,
                    events = too_recent,
                    "historical_migration events younger than 48 h, ingested as live events"
                );
            }
        }
        if events.is_empty() {
            return Ok(PreparedCapture {
                record: None,
                skipped,
            });
        }
        let accepted = events.len();
        let batch = IngestBatch {
            team_id: project.id,
            historical: payload.historical_migration,
            events,
            command: None,
            actor: None,
        };
        let record = self.prepare_record(&batch)?;
        Ok(PreparedCapture {
            record: Some((record, accepted)),
            skipped,
        })
    }

    /// Appends a prepared capture to the WAL and waits until it is durable.
    async fn commit_capture(&self, p: PreparedCapture) -> Result<CaptureReceipt, CaptureError> {
        let Some((record, accepted)) = p.record else {
            return Ok(CaptureReceipt {
                accepted: 0,
                skipped: p.skipped,
                seq: None,
            });
        };
        let seq = self.append_record(record).await?;
        self.metrics
            .events_accepted
            .fetch_add(accepted as u64, Ordering::Relaxed);
        self.metrics
            .requests_accepted
            .fetch_add(1, Ordering::Relaxed);
        Ok(CaptureReceipt {
            accepted,
            skipped: p.skipped,
            seq: Some(seq),
        })
    }

    /// Makes one record durable in the WAL; the pipeline applies it in order.
    async fn append_batch(&self, batch: &IngestBatch) -> Result<u64, CaptureError> {
        let record = self.prepare_record(batch)?;
        self.append_record(record).await
    }

    /// A WAL record's bytes and its Arrow rows. The Arrow conversion runs here, on the
    /// request's thread (a worker, or the blocking pool for a big body), so it spreads over
    /// all cores instead of loading the single pipeline consumer.
    fn prepare_record(&self, batch: &IngestBatch) -> Result<WalRecord, CaptureError> {
        let bytes =
            serde_json::to_vec(batch).map_err(|e| CaptureError::InvalidPayload(e.to_string()))?;
        Ok(WalRecord {
            events: batch.events.len() as u64,
            bytes,
            ingested: to_arrow(&self.meta, batch),
        })
    }

    async fn append_record(&self, r: WalRecord) -> Result<u64, CaptureError> {
        self.wal
            .append(r.bytes, r.ingested)
            .await
            .map_err(|e| match e {
                e @ WalError::TooLarge(_) => CaptureError::TooLarge(e.to_string()),
                other => {
                    self.metrics.reject("unavailable", r.events);
                    CaptureError::Unavailable(other.to_string())
                }
            })
    }

    /// Runs every queued deletion task now (the scheduler calls this weekly; `hedgerow tasks
    /// run` on demand). For event tasks, every event of the persons is removed from the
    /// table (a Delta delete, then a vacuum and log cleanup so no old file or log entry keeps
    /// them), from the WAL (the buffer is flushed and every segment holding older records is
    /// deleted) and from the Arrow buffer; the persons' distinct ids and text values are then
    /// scrubbed from the ingestion warnings and the query log, and SQLite is rewritten.
    /// Recording tasks complete at once: this service stores no recordings.
    pub async fn run_deletion_tasks(&self) -> Result<DeletionRun, EngineError> {
        let _one_at_a_time = self.deletion_lock.lock().await;
        let tasks = self.person_store.pending_tasks()?;
        let mut run = DeletionRun::default();
        if tasks.is_empty() {
            return Ok(run);
        }
        let now = self.clock.now();
        let (events, recordings): (Vec<_>, Vec<_>) =
            tasks.into_iter().partition(|t| t.kind == "events");
        for t in &recordings {
            self.person_store.finish_task(t, 0, now)?;
            run.recording_tasks += 1;
        }
        if events.is_empty() {
            return Ok(run);
        }
        let mut by_team: std::collections::BTreeMap<TeamId, std::collections::HashSet<String>> =
            Default::default();
        for t in &events {
            by_team
                .entry(t.team)
                .or_default()
                .extend(t.event_person_ids.iter().cloned());
        }
        // 1. Out of the buffer first: a flush under way holds its own copy of its rows, so
        //    the table delete below must come after that flush (hence `frozen_seq`).
        let mut rows_by_team: HashMap<TeamId, u64> = HashMap::new();
        for (team, ids) in &by_team {
            *rows_by_team.entry(*team).or_default() +=
                self.buffer.remove_person_events(*team, ids) as u64;
        }
        // 2. Everything acknowledged so far goes to the table, and the WAL segments that held
        //    it are deleted.
        let through = self.wal.rotate()?;
        let target = through.max(self.buffer.frozen_seq().unwrap_or(0));
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        loop {
            let committed = self.metrics.committed_seq.load(Ordering::Acquire);
            if committed >= target && self.person_store.last_seq() >= through {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(EngineError::Io(format!(
                    "deletion: the buffer was not written out within 10 minutes (table at WAL seq {committed}, need {target}); the tasks stay queued"
                )));
            }
            self.flush_now.store(true, Ordering::Release);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wal = self.wal.clone();
        tokio::task::spawn_blocking(move || wal.truncate_through(through))
            .await
            .map_err(|e| EngineError::Io(format!("WAL truncation task: {e}")))??;
        // 3. The table: the rows, the replaced files and the log history.
        for (team, ids) in &by_team {
            let list: Vec<String> = ids.iter().cloned().collect();
            let stats = self.table.delete_person_events(*team, &list).await?;
            run.files_rewritten += stats.files_rewritten;
            run.files_vacuumed += stats.files_vacuumed;
            *rows_by_team.entry(*team).or_default() += stats.rows_deleted;
        }
        self.query.bump_epoch();
        // 4. The metadata: warnings and query log, then the tasks, then SQLite is rewritten.
        let mut scrub: std::collections::BTreeMap<TeamId, Vec<String>> = Default::default();
        for t in &events {
            scrub
                .entry(t.team)
                .or_default()
                .extend(t.scrub.iter().cloned());
        }
        for t in &events {
            // Rows are counted per project; each task of the project reports the total.
            let rows = rows_by_team.get(&t.team).copied().unwrap_or(0);
            self.person_store.finish_task(t, rows, now)?;
            run.event_tasks += 1;
        }
        for (team, terms) in &scrub {
            self.person_store.scrub(*team, terms)?;
        }
        run.rows_deleted = rows_by_team.values().sum();
        info!(?run, "deletion tasks done");
        Ok(run)
    }

    /// Runs the deletion tasks at every occurrence of `when` (by the engine's clock) until
    /// the engine shuts down. A failed run is logged; its tasks stay queued for the next.
    pub fn spawn_deletion_scheduler(self: &Arc<Self>, when: schedule::Weekly) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut stop = self.shutdown.subscribe();
        tokio::spawn(async move {
            loop {
                let Some(engine) = weak.upgrade() else { return };
                let now = engine.clock.now();
                let next = when.next_after(now);
                drop(engine);
                info!(next_run = %next, "deletion tasks scheduled");
                let wait = (next - now).to_std().unwrap_or_default();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                let Some(engine) = weak.upgrade() else { return };
                if let Err(e) = engine.run_deletion_tasks().await {
                    tracing::error!(error = %e, "the scheduled deletion run failed; its tasks stay queued");
                }
            }
        })
    }

    /// Stops taking events, writes everything buffered to the table, gives up the lease.
    pub async fn shutdown(&self) {
        // Closing joins the WAL writer thread after it drains: keep it off the runtime.
        let wal = self.wal.clone();
        let _ = tokio::task::spawn_blocking(move || wal.close()).await;
        let _ = self.shutdown.send(true);
        if let Some(h) = self.pipeline.lock().await.take() {
            let _ = h.await;
        }
        self.lease.release().await;
    }
}
