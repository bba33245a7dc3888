//! Background and scheduled work: deletion tasks and their schedule, metrics, and what
//! the write path has done so far.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::info;

use crate::Engine;
use crate::EngineError;
use crate::model::TeamId;
use crate::schedule;
use crate::storage::buffer::BufferStats;

/// What a deletion run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeletionRun {
    pub event_tasks: u64,
    pub recording_tasks: u64,
    pub rows_deleted: u64,
    pub files_rewritten: u64,
    pub files_vacuumed: u64,
}

impl Engine {
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
        crate::faults::point("erase.buffer");
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
                return Err(EngineError::FlushTimeout { committed, target });
            }
            self.flush_now.store(true, Ordering::Release);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wal = self.wal.clone();
        tokio::task::spawn_blocking(move || wal.truncate_through(through))
            .await
            .map_err(|source| EngineError::Task {
                what: "WAL truncation",
                source,
            })??;
        crate::faults::point("erase.wal");
        // 3. The table: the rows, the replaced files and the log history.
        for (team, ids) in &by_team {
            let list: Vec<String> = ids.iter().cloned().collect();
            let stats = self.table.delete_person_events(*team, &list).await?;
            run.files_rewritten += stats.files_rewritten;
            run.files_vacuumed += stats.files_vacuumed;
            *rows_by_team.entry(*team).or_default() += stats.rows_deleted;
        }
        self.query.bump_epoch();
        crate::faults::point("erase.table");
        // 4. The metadata: warnings and query log, then the tasks, then SQLite is rewritten
        //    (a run stopped before the tasks are done does it all again; one stopped after,
        //    has the store rewritten when it opens next).
        let mut scrub: std::collections::BTreeMap<TeamId, Vec<String>> = Default::default();
        for t in &events {
            scrub
                .entry(t.team)
                .or_default()
                .extend(t.scrub.iter().cloned());
        }
        for (team, terms) in &scrub {
            self.person_store.scrub(*team, terms)?;
        }
        crate::faults::point("erase.scrubbed");
        for t in &events {
            // Rows are counted per project; each task of the project reports the total.
            let rows = rows_by_team.get(&t.team).copied().unwrap_or(0);
            self.person_store.finish_task(t, rows, now)?;
            run.event_tasks += 1;
        }
        crate::faults::point("erase.finished");
        self.person_store.rewrite_file()?;
        // The persons snapshots: the erased persons' rows leave their files.
        let teams: Vec<TeamId> = by_team.keys().copied().collect();
        self.query.refresh_person_snapshots(&teams).await?;
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

    /// What the Arrow buffer holds now (rows, batches, bytes).
    pub fn buffered(&self) -> BufferStats {
        self.buffer.stats()
    }

    /// The last WAL sequence whose events are in the buffer or the table.
    pub fn applied_seq(&self) -> u64 {
        self.buffer.applied_seq()
    }
}
