//! Per-project Arrow buffers: events that are durable in the WAL but not yet in Parquet.
//!
//! The pipeline appends in WAL order; a flush freezes the whole active part (all projects at
//! once, so the WAL position a commit records is a true prefix) and writes it while new
//! events go to a fresh part. Readers see frozen ∪ active, so an event is visible from the
//! moment it is acknowledged until the moment its file is committed, and never twice.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;

use super::schema::events_schema;
use crate::ingest::TeamId;

/// Small batches are merged once a project has this many, to bound per-batch overhead.
const COALESCE_AT: usize = 256;

#[derive(Debug, Default)]
pub struct Part {
    pub teams: HashMap<TeamId, Vec<RecordBatch>>,
    pub rows: usize,
    pub bytes: usize,
    /// The highest WAL sequence whose events are in this part (or an earlier one).
    pub last_seq: u64,
    pub oldest: Option<Instant>,
}

impl Part {
    /// Every project's rows as one batch (unsorted).
    pub fn concat(&self) -> Result<RecordBatch, arrow::error::ArrowError> {
        let all: Vec<&RecordBatch> = self.teams.values().flatten().collect();
        concat_batches(&events_schema(), all)
    }
}

#[derive(Debug, Default)]
struct State {
    active: Part,
    frozen: Option<Arc<Part>>,
    /// Per project, the last WAL seq that added rows: the project's data version.
    team_seq: HashMap<TeamId, u64>,
}

#[derive(Debug, Default)]
pub struct EventBuffer {
    state: RwLock<State>,
}

/// Sizes the flush policy looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct BufferStats {
    pub rows: usize,
    pub bytes: usize,
    pub age: Option<Duration>,
    pub frozen_rows: usize,
    pub frozen_bytes: usize,
}

impl EventBuffer {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the events of WAL record `seq` (which must be above every seq seen before).
    pub fn append(&self, team: TeamId, batch: RecordBatch, seq: u64) {
        let mut st = self.write();
        st.team_seq.insert(team, seq);
        let part = &mut st.active;
        part.rows += batch.num_rows();
        part.bytes += batch.get_array_memory_size();
        part.last_seq = part.last_seq.max(seq);
        part.oldest.get_or_insert_with(Instant::now);
        let list = part.teams.entry(team).or_default();
        list.push(batch);
        if list.len() >= COALESCE_AT
            && let Ok(one) = concat_batches(&events_schema(), list.iter())
        {
            let before: usize = list.iter().map(RecordBatch::get_array_memory_size).sum();
            part.bytes = part.bytes + one.get_array_memory_size() - before;
            *list = vec![one];
        }
    }

    /// Records that WAL records up to `seq` were seen even if they added no rows here.
    pub fn note_seq(&self, seq: u64) {
        let mut st = self.write();
        st.active.last_seq = st.active.last_seq.max(seq);
    }

    pub fn stats(&self) -> BufferStats {
        let st = self.read();
        BufferStats {
            rows: st.active.rows,
            bytes: st.active.bytes,
            age: st.active.oldest.map(|t| t.elapsed()),
            frozen_rows: st.frozen.as_ref().map_or(0, |p| p.rows),
            frozen_bytes: st.frozen.as_ref().map_or(0, |p| p.bytes),
        }
    }

    /// The part to flush: the one already frozen (a retry), else the active part, frozen
    /// now. `None` when there is nothing new to write.
    pub fn freeze(&self, last_committed: u64) -> Option<Arc<Part>> {
        let mut st = self.write();
        if let Some(f) = &st.frozen {
            return Some(f.clone());
        }
        if st.active.rows == 0 && st.active.last_seq <= last_committed {
            return None;
        }
        let part = Arc::new(std::mem::take(&mut st.active));
        st.active.last_seq = part.last_seq;
        st.frozen = Some(part.clone());
        Some(part)
    }

    /// The frozen part is committed: drop it.
    pub fn flushed(&self) {
        self.write().frozen = None;
    }

    /// A project's unflushed rows (frozen part, then active) by part, each with the part's last WAL seq. A reader that
    /// takes this *before* the table snapshot keeps exactly the parts whose seq is above the
    /// snapshot's committed seq: a part is committed whole, so it is then in one place only.
    pub fn snapshot_parts(&self, team: TeamId) -> Vec<(u64, Vec<RecordBatch>)> {
        let st = self.read();
        let mut out = Vec::new();
        if let Some(f) = &st.frozen {
            out.push((f.last_seq, f.teams.get(&team).cloned().unwrap_or_default()));
        }
        out.push((
            st.active.last_seq,
            st.active.teams.get(&team).cloned().unwrap_or_default(),
        ));
        out
    }

    /// The last WAL seq the pipeline has applied here.
    pub fn applied_seq(&self) -> u64 {
        self.read().active.last_seq
    }

    /// The last WAL seq that added rows for `team` (0: none since start). Together with the
    /// deletion counter it is the project's data version for the query cache.
    pub fn team_seq(&self, team: TeamId) -> u64 {
        self.read().team_seq.get(&team).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Event;
    use crate::storage::schema::events_to_batch;

    fn snapshot(b: &EventBuffer, team: TeamId) -> Vec<RecordBatch> {
        b.snapshot_parts(team)
            .into_iter()
            .flat_map(|(_, x)| x)
            .collect()
    }

    fn batch(n: usize) -> RecordBatch {
        let events: Vec<Event> = (0..n)
            .map(|i| Event {
                uuid: uuid::Uuid::now_v7(),
                event: format!("e{i}"),
                distinct_id: "d".into(),
                timestamp: chrono::Utc::now(),
                created_at: chrono::Utc::now(),
                properties: Default::default(),
            })
            .collect();
        events_to_batch(events.iter().map(|e| (TeamId(1), e)), |_, _| None)
    }

    #[test]
    fn freeze_flush_and_snapshot() {
        let b = EventBuffer::default();
        assert!(b.freeze(0).is_none());
        b.append(TeamId(1), batch(3), 1);
        b.append(TeamId(2), batch(2), 2);
        let f = b.freeze(0).unwrap();
        assert_eq!((f.rows, f.last_seq), (5, 2));
        // New rows go to the active part; readers see both.
        b.append(TeamId(1), batch(1), 3);
        let rows = |t| {
            snapshot(&b, TeamId(t))
                .iter()
                .map(|x| x.num_rows())
                .sum::<usize>()
        };
        assert_eq!((rows(1), rows(2)), (4, 2));
        // A retry gets the same frozen part.
        assert!(Arc::ptr_eq(&f, &b.freeze(0).unwrap()));
        b.flushed();
        assert_eq!((rows(1), rows(2)), (1, 0));
        assert_eq!(f.concat().unwrap().num_rows(), 5);
        // A record that added no rows still moves the position to commit.
        let g = b.freeze(2).unwrap();
        b.flushed();
        b.note_seq(9);
        assert_eq!(b.freeze(g.last_seq).unwrap().last_seq, 9);
    }

    #[test]
    fn coalesces_small_batches() {
        let b = EventBuffer::default();
        for seq in 1..=(COALESCE_AT as u64 + 10) {
            b.append(TeamId(1), batch(1), seq);
        }
        let snap = snapshot(&b, TeamId(1));
        assert!(snap.len() < 20, "{} batches", snap.len());
        assert_eq!(
            snap.iter().map(|x| x.num_rows()).sum::<usize>(),
            COALESCE_AT + 10
        );
    }
}
