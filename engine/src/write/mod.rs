//! The write path: the one consumer of the WAL (persons, then the buffer, then flush and
//! commit, compaction and override folding). Orchestrates `persons` and `storage`; nothing
//! below depends on it.
//!
//! Takes durable records in WAL order, appends their events to the Arrow buffer, and flushes
//! the buffer to the events table when it is big or old enough. A flush runs in its own task
//! so consumption goes on meanwhile; only one runs at a time, and a failed one is retried
//! with the same rows (the WAL still holds them). After a commit, WAL segments it covers are
//! deleted. Compaction runs here too, between flushes' commits, on its own timer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use std::collections::HashMap;

use arrow::array::{Int32Array, RecordBatch, StringBuilder};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::ingest::wal::Wal;
use crate::meta::MetaStore;
use crate::metrics::Metrics;
use crate::model::CommandRecord;
use crate::model::{IngestBatch, TeamId};
use crate::persons::process::{Persons, RecordCtx, Stamp};
use crate::persons::{PersonInput, person_input};
use crate::storage::buffer::{EventBuffer, Part};
use crate::storage::layout::{
    Cell, Family, PERSON_LAYOUT_COLUMN, TypedBuilder, arrow_type, conform, split,
};
use crate::storage::schema::{batch_schema, events_to_batch};
use crate::storage::table::{AppendStats, EventsTable, PersonMaps, StorageError};

/// When the buffer is written out. Any one condition triggers a flush.
#[derive(Debug, Clone)]
pub struct FlushConfig {
    pub max_rows: usize,
    pub max_bytes: usize,
    pub max_age: Duration,
    /// Above this many buffered bytes (active + being flushed) the pipeline stops taking
    /// records until the flush finishes; the WAL writer, then capture, wait in turn.
    pub hard_limit_bytes: usize,
    /// Zero: person changes are stored when ingestion goes idle (or every 2048 records).
    /// Otherwise at most this often.
    pub persons_commit_interval: Duration,
}

impl Default for FlushConfig {
    fn default() -> Self {
        Self {
            max_rows: 500_000,
            max_bytes: 256 << 20,
            max_age: Duration::from_secs(10),
            hard_limit_bytes: 512 << 20,
            persons_commit_interval: Duration::ZERO,
        }
    }
}

/// When the table is kept in shape: compaction, vacuum and folding person-id overrides.
/// Separate from [`FlushConfig`]: flushing is on the ingest path, maintenance is not.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    pub compaction_interval: Duration,
    pub compaction_min_files: usize,
    /// Files removed by compaction are deleted once no snapshot this young needs them.
    pub vacuum_retention: Duration,
    /// How often the fold sweep runs (with a compaction tick): it reads every file's
    /// `person_id` and rewrites the files where merged-away ids are dense.
    pub override_fold_interval: Duration,
    /// The share of a file's rows holding merged-away person ids above which the sweep
    /// rewrites it; below it the ids are mapped at read time (and folded when compaction
    /// rewrites the file anyway).
    pub override_fold_share: f64,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            compaction_interval: Duration::from_secs(300),
            compaction_min_files: 8,
            vacuum_retention: Duration::from_secs(3600),
            override_fold_interval: Duration::from_secs(24 * 3600),
            override_fold_share: 0.1,
        }
    }
}

/// The fold sweep: folds each project's overrides into the files where they are dense
/// (at least `share` of a file's rows), then forgets the overrides no file holds any more
/// and whose events the table holds all of (made at or before the WAL position it covers:
/// later records are stamped with the merged-into id already).
/// `all`: every override the store holds, as compaction read them just before.
async fn fold_overrides(
    table: &EventsTable,
    store: &dyn crate::persons::store::PersonStore,
    all: &PersonMaps,
    layouts: &MetaStore,
    share: f64,
) {
    let committed = match table.committed_seq().await {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "cannot read the table's WAL position");
            return;
        }
    };
    let covered: HashMap<TeamId, HashMap<String, String>> = match store.overrides_through(committed)
    {
        Ok(covered) => covered.into_iter().collect(),
        Err(e) => {
            warn!(error = %e, "cannot read person-id overrides");
            return;
        }
    };
    for (&team, map) in all {
        let stats = match table.fold_overrides(team, map, share, layouts).await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "folding person-id overrides failed; will try again");
                continue;
            }
        };
        // Only overrides the sweep looked for: one made after `all` was read may be
        // covered by now, but no file was searched for its old id.
        let gone: HashMap<String, String> = covered
            .get(&team)
            .into_iter()
            .flatten()
            .filter(|(old, _)| map.contains_key(*old) && !stats.still_present.contains(*old))
            .map(|(old, new)| (old.clone(), new.clone()))
            .collect();
        crate::faults::point("fold.forget");
        if let Err(e) = store.forget_overrides(team, &gone) {
            warn!(error = %e, "cannot forget folded person-id overrides; they stay (harmless)");
        }
        info!(
            team_id = team.0,
            overrides = map.len(),
            forgotten = gone.len(),
            files_read = stats.files_read,
            rows_overridden = stats.rows_overridden,
            files_rewritten = stats.files_rewritten,
            rows_folded = stats.rows_folded,
            "folded person-id overrides"
        );
    }
}

/// A WAL record's events, already in Arrow form, with what they ask of persons: capture
/// builds it on the request's own thread, so the single pipeline only processes persons and
/// appends (the conversion is the costly part).
#[derive(Debug)]
pub(crate) struct Ingested {
    pub team_id: TeamId,
    /// `None` for a record with no events.
    pub batch: Option<RecordBatch>,
    /// One per row of `batch`.
    pub persons: Vec<PersonInput>,
    pub names: Vec<String>,
    pub command: Option<CommandRecord>,
    pub actor: Option<String>,
    pub received: DateTime<Utc>,
    /// Its share of the [`QueueBudget`] while it waits for the pipeline (none in a replay).
    pub queued: Option<tokio::sync::OwnedSemaphorePermit>,
}

pub(crate) type Record = (u64, Ingested);

/// How long a capture waits for the pipeline to take records before a 503: long enough for
/// a flush of the whole buffer on a slow disk, short of a client's timeout.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(30);

/// Why [`QueueBudget::hold`] gave no share.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum QueueFull {
    /// Shutting down.
    Closed,
    /// The pipeline took nothing for this long.
    Waited(Duration),
}

/// Memory for records made durable in the WAL but not yet applied by the pipeline (their
/// Arrow rows and person inputs). Capture takes a record's share before the WAL append and
/// the pipeline gives it back once it has applied the record, so when the pipeline falls
/// behind (a flush, a slow disk) capture waits, up to [`QUEUE_WAIT`]; past it the request
/// is refused with a 503 before anything was written, so the client's retry loses nothing.
/// Without it the queue was bounded only by its 1 024 records: at 500 events a record, half
/// a million events' rows and person inputs, which made most of a 2M-event ingest's peak
/// heap (heaptrack).
#[derive(Debug, Clone)]
pub(crate) struct QueueBudget {
    wait: Duration,
    sem: Arc<tokio::sync::Semaphore>,
    total: usize,
}

impl QueueBudget {
    pub(crate) fn new(total: usize) -> Self {
        let total = total.clamp(1 << 20, u32::MAX as usize);
        Self {
            wait: QUEUE_WAIT,
            sem: Arc::new(tokio::sync::Semaphore::new(total)),
            total,
        }
    }

    /// Waits for `bytes` (at most the whole budget, so any record passes alone).
    pub(crate) async fn hold(
        &self,
        bytes: usize,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, QueueFull> {
        let n = bytes.clamp(1, self.total) as u32;
        match tokio::time::timeout(self.wait, self.sem.clone().acquire_many_owned(n)).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(QueueFull::Closed),
            Err(_) => Err(QueueFull::Waited(self.wait)),
        }
    }

    /// Refuses every later `hold` and wakes the waiting ones.
    pub(crate) fn close(&self) {
        self.sem.close();
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.total - self.sem.available_permits()
    }
}

/// A running flush: the part being written and how the write went.
type FlushTask = JoinHandle<(Arc<Part>, Result<AppendStats, StorageError>)>;

pub(crate) struct Pipeline {
    pub buffer: Arc<EventBuffer>,
    pub table: Arc<EventsTable>,
    /// Compaction reads the property layouts here.
    pub meta: Arc<MetaStore>,
    pub wal: Wal<Ingested>,
    pub metrics: Arc<Metrics>,
    pub cfg: FlushConfig,
    pub maintenance: MaintenanceConfig,
    /// Set while this process may commit (the writer lease is held).
    pub may_commit: Arc<dyn Fn() -> bool + Send + Sync>,
    pub persons: Persons,
    /// Told the last WAL seq whose person changes are stored.
    pub persons_seq: watch::Sender<u64>,
    /// The last WAL record applied.
    pub applied: u64,
    /// Set by whoever needs the buffer written now (a deletion run); the next tick flushes.
    pub flush_now: Arc<std::sync::atomic::AtomicBool>,
}

/// Turns a WAL record's events into Arrow. Group type indexes are assigned here, in order
/// of first use; they are stored before the record is acknowledged, so a replay finds the
/// same ones. Property definitions are recorded here too (a replay records nothing new).
pub(crate) fn to_arrow(meta: &MetaStore, batch: &IngestBatch) -> Ingested {
    let received = batch
        .events
        .first()
        .map(|e| e.created_at)
        .or(batch.command.as_ref().map(|c| c.at))
        .unwrap_or_default();
    let mut out = Ingested {
        team_id: batch.team_id,
        batch: None,
        persons: Vec::new(),
        names: Vec::new(),
        command: batch.command.clone(),
        actor: batch.actor.clone(),
        received,
        queued: None,
    };
    if batch.events.is_empty() {
        return out;
    }
    if let Err(e) = meta.observe_properties(batch.team_id, &batch.events) {
        error!(error = %e, team_id = batch.team_id.0, "cannot record property definitions; queries read these properties as strings until a later event records them");
    }
    if let Err(e) = meta.observe_property_columns(batch.team_id, &batch.events) {
        error!(error = %e, team_id = batch.team_id.0, "cannot store promoted property columns; the properties stay in the JSON");
    }
    let now = batch.events[0].created_at;
    let group_index = |team: TeamId, ty: &str| match meta.group_type_index(team, ty, now) {
        Ok(i) => i,
        Err(e) => {
            error!(error = %e, team_id = team.0, group_type = ty, "cannot read or make a group type; the event keeps its $groups property only");
            None
        }
    };
    out.batch = Some(events_to_batch(
        batch.events.iter().map(|e| (batch.team_id, e)),
        |team, ty| group_index(team, ty).map(usize::from),
        &meta.layouts(),
    ));
    out.persons = batch
        .events
        .iter()
        .map(|e| person_input(e, |ty| group_index(batch.team_id, ty)))
        .collect();
    out.names = batch.events.iter().map(|e| e.event.clone()).collect();
    out
}

/// Puts each event's person id and person-properties snapshot into its row. The snapshot is
/// split as capture splits event properties: the project's promoted person properties into
/// their columns, the rest into the residual `person_properties` (serde_json's compact text,
/// keys sorted, as the whole snapshot was written before). Its keys are counted for
/// promotion first, so a key promoted now is a column of these rows already.
fn stamp(
    meta: &MetaStore,
    team: TeamId,
    batch: &RecordBatch,
    stamps: &[Stamp],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let n = batch.num_rows();
    // Each distinct snapshot once: a person's events in a record share it until it changes.
    let mut seen: HashMap<*const Map<String, Value>, usize> = HashMap::new();
    let mut maps: Vec<(&Map<String, Value>, u64)> = Vec::new();
    let row_map: Vec<Option<usize>> = stamps
        .iter()
        .map(|s| {
            let p = s.properties.as_ref()?;
            let at = *seen.entry(Arc::as_ptr(p)).or_insert_with(|| {
                maps.push((p, 0));
                maps.len() - 1
            });
            maps[at].1 += 1;
            Some(at)
        })
        .collect();
    if !maps.is_empty()
        && let Err(e) =
            meta.observe_person_property_columns(team, maps.iter().copied(), chrono::Utc::now())
    {
        error!(error = %e, team_id = team.0, "cannot store promoted person property columns; they stay in the JSON");
    }
    let layouts = meta.layouts();
    let team_layout = layouts.of(Family::Person, team);
    let splits: Vec<(String, Vec<Option<Cell>>)> = maps
        .iter()
        .map(|(m, _)| split(m, &team_layout, Family::Person))
        .collect();

    let mut ids = arrow::array::FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut props = StringBuilder::with_capacity(n, n * 64);
    let mut typed: Vec<TypedBuilder> = team_layout
        .columns
        .iter()
        .map(|c| TypedBuilder::new(&arrow_type(c.ty), n))
        .collect();
    for (s, m) in stamps.iter().zip(&row_map) {
        ids.append_value(s.person_id.as_uuid().as_bytes())?;
        match m.map(|i| &splits[i]) {
            Some((residual, cells)) => {
                props.append_value(residual);
                for (b, c) in typed.iter_mut().zip(cells) {
                    b.append_ref(c.as_ref());
                }
            }
            None => {
                // Personless.
                props.append_null();
                for b in &mut typed {
                    b.append(None);
                }
            }
        }
    }
    let schema = batch_schema(&layouts);
    let batch = conform(batch, &schema)?;
    let mut cols = batch.columns().to_vec();
    cols[schema.index_of("person_id")?] = Arc::new(ids.finish());
    cols[schema.index_of("person_properties")?] = Arc::new(props.finish());
    cols[schema.index_of(PERSON_LAYOUT_COLUMN)?] =
        Arc::new(Int32Array::from(vec![team_layout.columns.len() as i32; n]));
    for (c, b) in team_layout.columns.iter().zip(&mut typed) {
        cols[schema.index_of(&c.column)?] = b.finish();
    }
    RecordBatch::try_new(schema, cols)
}

/// Applies one durable WAL record: persons first, then the stamped rows to the buffer.
/// `in_table`: the table already holds this record's rows (a replay after a crash between
/// the table's commit and the person store's), so only persons are processed.
pub(crate) fn apply(
    meta: &MetaStore,
    buffer: &EventBuffer,
    persons: &mut Persons,
    metrics: &Metrics,
    seq: u64,
    rec: Ingested,
    in_table: bool,
) {
    if let Some(cmd) = &rec.command {
        if let Err(e) = persons.command(seq, rec.team_id, cmd) {
            metrics.person_failures.fetch_add(1, Ordering::Relaxed);
            persons.skip(seq);
            error!(error = %e, seq, "a persons command failed; it is not applied");
        }
        if !in_table {
            buffer.note_seq(seq);
        }
        return;
    }
    let Some(rb) = rec.batch else {
        if !in_table {
            buffer.note_seq(seq);
        }
        return;
    };
    let ctx = RecordCtx {
        team: rec.team_id,
        received: rec.received,
        actor: rec.actor.as_deref(),
        event_names: &rec.names,
    };
    let rb = match persons.process(seq, &ctx, &rec.persons) {
        Ok(stamps) if stamps.len() == rb.num_rows() => match stamp(meta, rec.team_id, &rb, &stamps)
        {
            Ok(b) => b,
            Err(e) => {
                error!(error = %e, seq, "cannot stamp persons on events; they keep their distinct-id person ids");
                rb
            }
        },
        Ok(_) => rb,
        Err(e) => {
            // The events are kept (they were acknowledged); their person changes are not.
            metrics.person_failures.fetch_add(1, Ordering::Relaxed);
            persons.skip(seq);
            error!(error = %e, seq, "person processing failed; the events keep their distinct-id person ids");
            rb
        }
    };
    if !in_table {
        buffer.append(rec.team_id, rb, seq);
    }
}

impl Pipeline {
    fn update_gauges(&self) {
        let s = self.buffer.stats();
        self.metrics
            .buffer_rows
            .store((s.rows + s.frozen_rows) as i64, Ordering::Relaxed);
        self.metrics
            .buffer_bytes
            .store((s.bytes + s.frozen_bytes) as i64, Ordering::Relaxed);
    }

    fn due(&self) -> bool {
        let s = self.buffer.stats();
        // A flush asked for (a deletion run waits for the table to cover the WAL) is due
        // also with no rows when records without events (person commands) moved the WAL
        // position past the table's: the commit records the position. Without it, a
        // deletion run right after `delete_events` waited for an event, or 10 minutes.
        let behind = s.rows > 0
            || self.buffer.applied_seq() > self.metrics.committed_seq.load(Ordering::Acquire);
        (behind && self.flush_now.swap(false, Ordering::AcqRel))
            || s.rows >= self.cfg.max_rows
            || s.bytes >= self.cfg.max_bytes
            || s.age.is_some_and(|a| a >= self.cfg.max_age)
    }

    fn start_flush(&self, committed: u64) -> Option<FlushTask> {
        if !(self.may_commit)() {
            warn!(
                "not flushing: this process does not hold a fresh writer lease (another writer took it, or the store has not taken a refresh for 2/3 of its ttl); the rows stay in the WAL"
            );
            return None;
        }
        let part = self.buffer.freeze(committed)?;
        let table = self.table.clone();
        Some(tokio::spawn(async move {
            let res = match part.conformed() {
                Ok(batches) => table.append_batches(batches, part.last_seq).await,
                Err(e) => Err(e.into()),
            };
            (part, res)
        }))
    }

    /// Stores pending person changes; on failure they stay pending and the WAL keeps the
    /// records.
    fn commit_persons(&mut self) {
        if self.persons.records_pending() > 0
            && let Err(e) = self.persons.commit(self.applied)
        {
            self.metrics.person_failures.fetch_add(1, Ordering::Relaxed);
            error!(error = %e, "cannot store person changes; retrying with the next batch");
        }
        // Commands commit themselves: tell waiters whatever is stored now.
        let stored = self.persons.stored_seq();
        self.persons_seq.send_if_modified(|v| {
            let moved = stored > *v;
            *v = (*v).max(stored);
            moved
        });
    }

    fn finish_flush(
        &self,
        part: &Part,
        res: Result<AppendStats, StorageError>,
        committed: &mut u64,
    ) -> bool {
        match res {
            Ok(stats) => {
                self.buffer.flushed();
                *committed = part.last_seq;
                let m = &self.metrics;
                m.flushes.fetch_add(1, Ordering::Relaxed);
                m.flushed_rows.fetch_add(stats.rows, Ordering::Relaxed);
                m.bytes_written.fetch_add(stats.bytes, Ordering::Relaxed);
                m.files_written.fetch_add(stats.files, Ordering::Relaxed);
                m.committed_seq.store(part.last_seq, Ordering::Relaxed);
                info!(
                    rows = stats.rows,
                    files = stats.files,
                    bytes = stats.bytes,
                    version = stats.version,
                    wal_seq = part.last_seq,
                    "flushed"
                );
                // Deleting segments is blocking file I/O (and may wait on an fsync).
                // A segment goes only once the person store covers it too.
                let seq = part.last_seq.min(self.persons.stored_seq());
                let wal = self.wal.clone();
                tokio::task::spawn_blocking(move || {
                    crate::faults::point("wal.truncate");
                    if let Err(e) = wal.truncate_through(seq) {
                        warn!(error = %e, "could not delete covered WAL segments; will retry after the next flush");
                    }
                });
                true
            }
            Err(e) => {
                self.metrics.flush_failures.fetch_add(1, Ordering::Relaxed);
                error!(error = %e, rows = part.rows, "flush failed; the rows stay buffered and in the WAL, retrying");
                false
            }
        }
    }

    /// Runs until `shutdown` turns true or the WAL side hangs up, then writes everything
    /// left. `committed` is the WAL position the table already covers.
    pub(crate) async fn run(
        mut self,
        mut rx: mpsc::Receiver<Record>,
        mut shutdown: watch::Receiver<bool>,
        mut committed: u64,
    ) {
        let tick_every =
            (self.cfg.max_age / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut compact_tick = tokio::time::interval(self.maintenance.compaction_interval);
        compact_tick.tick().await;
        let mut flush: Option<FlushTask> = None;
        let mut compaction: Option<JoinHandle<()>> = None;
        let mut backoff = Duration::ZERO;
        let mut persons_committed_at = tokio::time::Instant::now();
        let mut last_fold = tokio::time::Instant::now();
        let mut retry_at = tokio::time::Instant::now();
        loop {
            let s = self.buffer.stats();
            let full = s.bytes + s.frozen_bytes >= self.cfg.hard_limit_bytes;
            tokio::select! {
                rec = rx.recv(), if !full => match rec {
                    Some((seq, batch)) => {
                        let rec_is_command = batch.command.is_some();
                        apply(&self.meta, &self.buffer, &mut self.persons, &self.metrics, seq, batch, false);
                        self.applied = seq;
                        // Write-behind: one person-store transaction per burst of records.
                        let interval = self.cfg.persons_commit_interval;
                        let due = if interval.is_zero() {
                            rx.is_empty() || self.persons.records_pending() >= 2048
                        } else {
                            persons_committed_at.elapsed() >= interval
                        };
                        if due || rec_is_command {
                            self.commit_persons();
                            persons_committed_at = tokio::time::Instant::now();
                        }
                        self.update_gauges();
                        if flush.is_none() && self.due() && tokio::time::Instant::now() >= retry_at {
                            flush = self.start_flush(committed);
                        }
                    }
                    None => break,
                },
                done = async { flush.as_mut().expect("guarded").await }, if flush.is_some() => {
                    flush = None;
                    match done {
                        Ok((part, res)) => {
                            if self.finish_flush(&part, res, &mut committed) {
                                backoff = Duration::ZERO;
                            } else {
                                backoff = (backoff * 2).clamp(Duration::from_millis(200), Duration::from_secs(30));
                                retry_at = tokio::time::Instant::now() + backoff;
                            }
                        }
                        Err(e) => error!(error = %e, "flush task panicked"),
                    }
                    self.update_gauges();
                }
                _ = tick.tick() => {
                    if persons_committed_at.elapsed() >= self.cfg.persons_commit_interval {
                        self.commit_persons();
                        persons_committed_at = tokio::time::Instant::now();
                    }
                    if flush.is_none() && tokio::time::Instant::now() >= retry_at
                        && (self.due() || self.buffer.stats().frozen_rows > 0)
                    {
                        flush = self.start_flush(committed);
                    }
                }
                _ = compact_tick.tick() => {
                    if compaction.as_ref().is_none_or(|c| c.is_finished()) && (self.may_commit)() {
                        let fold = last_fold.elapsed() >= self.maintenance.override_fold_interval;
                        if fold {
                            last_fold = tokio::time::Instant::now();
                        }
                        compaction = Some(self.spawn_compaction(fold));
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
        // Shutdown: take what is already durable, then write it all.
        while let Ok((seq, batch)) = rx.try_recv() {
            apply(
                &self.meta,
                &self.buffer,
                &mut self.persons,
                &self.metrics,
                seq,
                batch,
                false,
            );
            self.applied = seq;
        }
        self.commit_persons();
        if let Some(c) = compaction {
            c.abort();
        }
        for attempt in 0..5 {
            if let Some(f) = flush.take()
                && let Ok((part, res)) = f.await
                && !self.finish_flush(&part, res, &mut committed)
            {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            flush = self.start_flush(committed);
            if flush.is_none() {
                break;
            }
        }
        if let Some(f) = flush {
            f.abort();
            warn!("giving up flushing at shutdown; the WAL keeps the rows for the next start");
        }
        self.update_gauges();
    }

    fn spawn_compaction(&self, fold: bool) -> JoinHandle<()> {
        let table = self.table.clone();
        let meta = self.meta.clone();
        let metrics = self.metrics.clone();
        let min_files = self.maintenance.compaction_min_files;
        let retention = self.maintenance.vacuum_retention;
        let share = self.maintenance.override_fold_share;
        let store = self.persons.store().clone();
        tokio::spawn(async move {
            /// Clears the gauge however the pass ends.
            struct Running(Arc<Metrics>);
            impl Drop for Running {
                fn drop(&mut self) {
                    self.0.maintenance_running.store(0, Ordering::Relaxed);
                }
            }
            metrics.maintenance_running.store(1, Ordering::Relaxed);
            let _running = Running(metrics.clone());
            // Every override the store holds: rows compaction rewrites anyway get the
            // merged-into person's id (right whenever the merge was).
            let persons: PersonMaps = match store.overrides_through(u64::MAX) {
                Ok(teams) => teams
                    .into_iter()
                    .map(|(team, map)| (team, Arc::new(map)))
                    .collect(),
                Err(e) => {
                    warn!(error = %e, "cannot read person-id overrides; compaction does not fold them this time");
                    PersonMaps::new()
                }
            };
            match table.compact(min_files, meta.as_ref(), &persons).await {
                Ok(s) if s.partitions > 0 || s.partitions_abandoned > 0 => {
                    metrics
                        .compactions
                        .fetch_add(s.partitions, Ordering::Relaxed);
                    metrics
                        .compaction_files_removed
                        .fetch_add(s.files_removed, Ordering::Relaxed);
                    info!(
                        partitions = s.partitions,
                        removed = s.files_removed,
                        added = s.files_added,
                        person_ids_folded = s.rows_folded,
                        abandoned = s.partitions_abandoned,
                        "compacted"
                    );
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "compaction failed; will try again"),
            }
            if fold {
                fold_overrides(&table, store.as_ref(), &persons, meta.as_ref(), share).await;
            }
            let retention =
                chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::hours(1));
            if let Err(e) = table.vacuum(retention).await {
                warn!(error = %e, "vacuum failed; will try again");
            }
        })
    }
}

#[cfg(test)]
mod queue_tests {
    use std::time::Duration;

    use super::{QueueBudget, QueueFull};

    /// A record waits while the records ahead of it hold the budget, goes once one is
    /// applied (its permit dropped), passes alone when bigger than the whole budget, and is
    /// refused once the budget is closed.
    #[tokio::test]
    async fn records_wait_for_the_pipeline_by_bytes() {
        let q = QueueBudget::new(4 << 20);
        let a = q.hold(3 << 20).await.unwrap();
        assert_eq!(q.used(), 3 << 20);
        let waiting = tokio::time::timeout(Duration::from_millis(50), q.hold(2 << 20)).await;
        assert!(waiting.is_err(), "over the budget: waits");
        let next = tokio::spawn({
            let q = q.clone();
            async move { q.hold(2 << 20).await }
        });
        drop(a);
        let b = next.await.unwrap().unwrap();
        assert_eq!(q.used(), 2 << 20);
        drop(b);
        let huge = q.hold(64 << 20).await.unwrap();
        assert_eq!(q.used(), 4 << 20, "capped at the whole budget");
        let blocked = tokio::spawn({
            let q = q.clone();
            async move { q.hold(1).await }
        });
        q.close();
        assert_eq!(
            blocked.await.unwrap().unwrap_err(),
            QueueFull::Closed,
            "closing wakes and refuses waiters"
        );
        drop(huge);
        assert_eq!(q.hold(1).await.unwrap_err(), QueueFull::Closed);
    }

    /// A pipeline that takes nothing gets its capture a refusal after the wait, not a hang.
    #[tokio::test]
    async fn a_stalled_pipeline_refuses_after_the_wait() {
        let mut q = QueueBudget::new(1 << 20);
        q.wait = Duration::from_millis(20);
        let _held = q.hold(1 << 20).await.unwrap();
        assert_eq!(
            q.hold(1).await.unwrap_err(),
            QueueFull::Waited(Duration::from_millis(20))
        );
    }
}
