//! Per-project Arrow buffers: events that are durable in the WAL but not yet in Parquet.
//!
//! The pipeline appends in WAL order; a flush freezes the whole active part (all projects at
//! once, so the WAL position a commit records is a true prefix) and writes it while new
//! events go to a fresh part. Readers see frozen ∪ active, so an event is visible from the
//! moment it is acknowledged until the moment its file is committed, and never twice.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;

use super::layout::{concat_conformed, conform, union_schema};
use crate::model::TeamId;

/// Small batches are merged once a project has this many, to bound per-batch overhead.
const COALESCE_AT: usize = 256;

#[derive(Debug, Default, Clone)]
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
    #[cfg(test)]
    pub fn concat(&self) -> Result<RecordBatch, arrow::error::ArrowError> {
        concat_conformed(self.teams.values().flatten())
    }

    /// Every project's rows (unsorted), as batches of one schema, without copying them.
    pub fn conformed(&self) -> Result<Vec<RecordBatch>, arrow::error::ArrowError> {
        let batches: Vec<&RecordBatch> = self.teams.values().flatten().collect();
        let schema = union_schema(batches.iter().map(|b| b.schema_ref().as_ref()));
        batches.into_iter().map(|b| conform(b, &schema)).collect()
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
            && let Ok(one) = concat_conformed(list.iter())
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

    /// Drops project `team`'s rows whose `person_id` is in `person_ids` from the active and
    /// the frozen part; returns how many rows went. Each part keeps its WAL position
    /// (`last_seq`) and age, so it is still committed (and its WAL records then deleted) as
    /// before, just without those rows; row and byte counts shrink. `team_seq` is left alone:
    /// the deletion counter is what tells caches the data changed.
    ///
    /// A flush already under way has its own copy of the frozen part and may still commit
    /// the dropped rows: delete them from the table once the table covers
    /// [`Self::frozen_seq`] (the commit lock orders the two).
    pub fn remove_person_events(&self, team: TeamId, person_ids: &HashSet<String>) -> usize {
        if person_ids.is_empty() {
            return 0;
        }
        // Ids are 16 bytes in the buffer; one that is not a UUID matches no row.
        let person_ids: HashSet<[u8; 16]> = person_ids
            .iter()
            .filter_map(|id| crate::storage::ids::parse(id))
            .collect();
        let person_ids = &person_ids;
        let mut st = self.write();
        let mut removed = remove_from_part(&mut st.active, team, person_ids);
        if let Some(frozen) = &st.frozen {
            let mut copy = Part::clone(frozen);
            let n = remove_from_part(&mut copy, team, person_ids);
            if n > 0 {
                removed += n;
                st.frozen = Some(Arc::new(copy));
            }
        }
        removed
    }

    /// The WAL position of the part being flushed, if a flush is under way.
    pub fn frozen_seq(&self) -> Option<u64> {
        self.read().frozen.as_ref().map(|p| p.last_seq)
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

/// Drops `team`'s rows of `person_ids` from `part`, fixing its row and byte counts.
fn remove_from_part(part: &mut Part, team: TeamId, person_ids: &HashSet<[u8; 16]>) -> usize {
    let Some(batches) = part.teams.get_mut(&team) else {
        return 0;
    };
    let mut removed = 0;
    for batch in batches.iter_mut() {
        let Some(keep) = keep_mask(batch, person_ids) else {
            continue;
        };
        let kept = keep.true_count();
        if kept == batch.num_rows() {
            continue;
        }
        let Ok(filtered) = filter_record_batch(batch, &keep) else {
            // Filtering a valid batch with a mask of its length cannot fail; if it did,
            // keeping rows is the safe failure only if someone notices: say so.
            tracing::error!("could not drop erased rows from a buffered batch");
            continue;
        };
        removed += batch.num_rows() - kept;
        part.bytes = (part.bytes + filtered.get_array_memory_size())
            .saturating_sub(batch.get_array_memory_size());
        *batch = filtered;
    }
    batches.retain(|b| b.num_rows() > 0);
    if batches.is_empty() {
        part.teams.remove(&team);
    }
    part.rows -= removed;
    removed
}

/// `true` for the rows to keep, `None` when the batch has no `person_id` column.
fn keep_mask(batch: &RecordBatch, drop: &HashSet<[u8; 16]>) -> Option<BooleanArray> {
    let col = batch.column_by_name("person_id")?;
    Some(
        (0..col.len())
            .map(|row| {
                Some(
                    !crate::storage::ids::id_at(col.as_ref(), row)
                        .is_some_and(|id| drop.contains(&id)),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;
    use crate::storage::schema::events_to_batch;
    use arrow::array::AsArray;

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
        events_to_batch(
            events.iter().map(|e| (TeamId(1), e)),
            |_, _| None,
            &Default::default(),
        )
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

    fn people(team: i64, distinct_ids: &[&str]) -> RecordBatch {
        let events: Vec<Event> = distinct_ids
            .iter()
            .map(|d| Event {
                uuid: uuid::Uuid::now_v7(),
                event: "e".into(),
                distinct_id: (*d).into(),
                timestamp: chrono::Utc::now(),
                created_at: chrono::Utc::now(),
                properties: Default::default(),
            })
            .collect();
        events_to_batch(
            events.iter().map(|e| (TeamId(team), e)),
            |_, _| None,
            &Default::default(),
        )
    }

    fn pid(team: i64, distinct_id: &str) -> String {
        crate::model::person_uuid(TeamId(team), distinct_id).to_string()
    }

    fn distinct_ids(b: &EventBuffer, team: TeamId) -> Vec<String> {
        let mut out: Vec<String> = snapshot(b, team)
            .iter()
            .flat_map(|x| {
                let c = x.column_by_name("distinct_id").unwrap().as_string::<i32>();
                c.iter().map(|v| v.unwrap().to_owned()).collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn removes_a_persons_rows_from_active_and_frozen_parts() {
        let b = EventBuffer::default();
        b.append(TeamId(1), people(1, &["v", "x", "v"]), 1);
        b.append(TeamId(2), people(2, &["v"]), 2);
        let in_flight = b.freeze(0).unwrap();
        b.append(TeamId(1), people(1, &["v", "y"]), 3);
        let before = b.stats();

        let victim = HashSet::from([pid(1, "v")]);
        assert_eq!(b.remove_person_events(TeamId(1), &victim), 3);
        assert_eq!(distinct_ids(&b, TeamId(1)), vec!["x", "y"]);
        // Another project's "v" is another person.
        assert_eq!(distinct_ids(&b, TeamId(2)), vec!["v"]);
        let after = b.stats();
        assert_eq!((after.rows, after.frozen_rows), (1, 2));
        assert!(after.bytes < before.bytes && after.frozen_bytes < before.frozen_bytes);
        assert_eq!(b.remove_person_events(TeamId(1), &victim), 0);

        // The WAL positions are untouched; a retried flush gets the part without the rows,
        // while the flush already under way keeps its own copy (hence `frozen_seq`).
        assert_eq!(b.applied_seq(), 3);
        assert_eq!(b.team_seq(TeamId(1)), 3);
        assert_eq!(b.frozen_seq(), Some(2));
        let retry = b.freeze(0).unwrap();
        assert_eq!((retry.rows, retry.last_seq), (2, 2));
        assert_eq!(retry.concat().unwrap().num_rows(), 2);
        assert_eq!(in_flight.rows, 4);
        b.flushed();
        assert_eq!(b.frozen_seq(), None);

        // A part left with no rows still carries its WAL position to commit.
        assert_eq!(
            b.remove_person_events(TeamId(1), &HashSet::from([pid(1, "y")])),
            1
        );
        assert_eq!(b.stats().rows, 0);
        assert!(snapshot(&b, TeamId(1)).is_empty());
        let last = b.freeze(2).unwrap();
        assert_eq!((last.rows, last.last_seq), (0, 3));
        assert_eq!(last.concat().unwrap().num_rows(), 0);
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
