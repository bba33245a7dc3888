//! Keeping the table in shape: compaction of small files and of files in an older property
//! layout, and vacuum of replaced ones.

use deltalake::datafile::writer::DeltaWriter;
use deltalake::kernel::Action;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::protocol::DeltaOperation;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};

use super::merge::{Input, Prepare, merge_sorted};
use super::write::Distinct;
use super::*;
use crate::storage::layout::{Family, LayoutSource, Layouts};
use crate::storage::schema::{batch_schema, date32_of_micros};

/// Bytes of files in an older layout rewritten per compaction run (small-file compactions
/// do not count): a property promoted late makes every older file stale, and the rewrite
/// proceeds over several runs instead of all at once.
const RELAYOUT_BYTES_PER_RUN: i64 = 2 << 30;

/// Most bytes of files merged into one sorted run by a rewrite: their compressed bytes are
/// held while they are merged (decoded rows are not, see `merge`). A partition with more
/// files to rewrite is written as several runs.
const MERGE_BYTES: i64 = 512 << 20;

/// One project's person-id overrides, old id → the id it went into (chains followed).
pub(crate) type PersonMap = HashMap<String, String>;
/// Every project's [`PersonMap`] (projects without overrides are absent).
pub(crate) type PersonMaps = HashMap<TeamId, Arc<PersonMap>>;

/// The files [`EventsTable::write_rewrite`] wrote, not yet committed.
pub(super) struct Written {
    pub(super) adds: Vec<deltalake::kernel::Add>,
    rows_folded: u64,
}

/// What [`EventsTable::rewrite_files`] committed.
pub(super) struct Rewritten {
    pub(super) added: usize,
    pub(super) rows_folded: u64,
}

/// `batch` with every `person_id` that `map` holds replaced by its value, and how many
/// rows changed; `None` when none did.
pub(super) fn fold_person_ids(
    batch: &RecordBatch,
    map: &PersonMap,
) -> Result<Option<(RecordBatch, u64)>, arrow::error::ArrowError> {
    use arrow::array::{Array, AsArray, StringBuilder};
    let Some(idx) = batch.schema().index_of("person_id").ok() else {
        return Ok(None);
    };
    let ids = crate::storage::ids::to_text(batch.column(idx).as_ref())?;
    let ids = ids.as_string::<i32>();
    let hits = ids
        .iter()
        .filter(|id| id.is_some_and(|id| map.contains_key(id)))
        .count() as u64;
    if hits == 0 {
        return Ok(None);
    }
    let mut out = StringBuilder::with_capacity(ids.len(), ids.value_data().len());
    for id in ids.iter() {
        out.append_option(id.map(|id| map.get(id).map_or(id, String::as_str)));
    }
    let mut cols = batch.columns().to_vec();
    let out: arrow::array::ArrayRef = Arc::new(out.finish());
    cols[idx] = crate::storage::ids::convert(&out, batch.column(idx).data_type())
        .unwrap_or_else(|| arrow::compute::cast(&out, batch.column(idx).data_type()))?;
    Ok(Some((RecordBatch::try_new(batch.schema(), cols)?, hits)))
}

/// One data file as compaction sees it.
pub(super) struct DataFile {
    pub(super) path: Path,
    pub(super) size: i64,
    /// The least `props_layout` of its rows; `None` when some row has none (a file from
    /// before storage v2, or one whose statistics do not say).
    pub(super) layout: Option<i64>,
    /// The same for `person_props_layout`.
    pub(super) person_layout: Option<i64>,
    /// Its least timestamp, when its statistics say.
    pub(super) min_time: Option<String>,
    /// Its greatest timestamp, when its statistics say.
    pub(super) max_time: Option<String>,
    remove: Action,
}

impl DataFile {
    /// The file's least layout of `family`.
    fn layout_of(&self, family: Family) -> Option<i64> {
        match family {
            Family::Event => self.layout,
            Family::Person => self.person_layout,
        }
    }

    /// Whether some row holds fewer of `team`'s promoted properties than it has now. Event
    /// layouts are missing only in files from before storage v2, which are rewritten even
    /// when nothing is promoted (once: rewritten rows have a layout). Person layouts are
    /// missing wherever persons were not processed, so only columns to fill make a file
    /// stale.
    fn stale(&self, layouts: &Layouts, team: TeamId) -> bool {
        Family::ALL.into_iter().any(|family| {
            let target = layouts.of(family, team).columns.len() as i64;
            match (family, self.layout_of(family)) {
                (_, Some(l)) => l < target,
                (Family::Event, None) => true,
                (Family::Person, None) => target > 0,
            }
        })
    }
}

/// Every file, by its (project, date) partition.
pub(super) fn partition_files(
    table: &DeltaTable,
) -> Result<BTreeMap<(String, String), Vec<DataFile>>, StorageError> {
    partition_files_where(table, |_, _| true)
}

/// The files of the partition of project `team` on `date`.
pub(super) fn files_of(
    table: &DeltaTable,
    team: &str,
    date: &str,
) -> Result<Vec<DataFile>, StorageError> {
    Ok(partition_files_where(table, |t, d| t == team && d == date)?
        .into_values()
        .flatten()
        .collect())
}

/// The files of the partitions `keep(team, date)` accepts, by partition; only theirs have
/// their statistics parsed.
pub(super) fn partition_files_where(
    table: &DeltaTable,
    keep: impl Fn(&str, &str) -> bool,
) -> Result<BTreeMap<(String, String), Vec<DataFile>>, StorageError> {
    let mut out: BTreeMap<(String, String), Vec<DataFile>> = BTreeMap::new();
    for f in table.snapshot()?.log_data().iter() {
        let pv = f.partition_values_map();
        let get = |k: &str| pv.get(k).cloned().flatten().unwrap_or_default();
        let (team, date) = (get("team_id"), get("event_date"));
        if !keep(&team, &date) {
            continue;
        }
        let stats: Option<serde_json::Value> =
            f.stats().and_then(|s| serde_json::from_str(&s).ok());
        let [layout, person_layout] = layouts_of(stats.as_ref());
        out.entry((team, date)).or_default().push(DataFile {
            path: f.object_store_path(),
            size: f.size(),
            layout,
            person_layout,
            min_time: bound_time(stats.as_ref(), "minValues"),
            max_time: bound_time(stats.as_ref(), "maxValues"),
            remove: Action::Remove(f.remove_action(false)),
        });
    }
    Ok(out)
}

/// A data file's least (`minValues`) or greatest (`maxValues`) timestamp by its Delta
/// statistics (RFC 3339 text, UTC, so text order is time order).
fn bound_time(stats: Option<&serde_json::Value>, bound: &str) -> Option<String> {
    Some(stats?.get(bound)?.get("timestamp")?.as_str()?.to_owned())
}

/// The newest rows of a project's newest day are written to a file of their own when
/// compaction rewrites that day: the rows of the last [`TAIL_MICROS`] before its newest
/// row. Rows are sorted by event and person inside a file, so the newest events of a day
/// are spread over all of its pages, and the events list (`ORDER BY timestamp DESC LIMIT
/// n`) decoded the whole day to keep 100 rows; with the tail in a file of its own, the
/// top-k reads that file first (files are read newest first) and its threshold then skips
/// the day's main file by its statistics. Measured: docs/architecture.md, "The newest
/// hour in a file of its own".
pub(super) const TAIL_MICROS: i64 = 3600 * 1_000_000;

/// Microseconds from 1970 of a statistics timestamp ([`bound_time`]).
pub(super) fn micros_of(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// Whether `files` (a newest partition's) are already a day's main file and its tail: two
/// files, not stale, the second's rows all newer than the first's and within
/// [`TAIL_MICROS`] of each other. Compaction leaves such a pair alone while the day stays
/// the newest (two flushes of which the second is such a tail count too), and merges it
/// once a newer day exists.
fn is_main_and_tail(files: &[DataFile], current: &Layouts, team: TeamId) -> bool {
    let [a, b] = files else {
        return false;
    };
    let (old, new) = if a.min_time <= b.min_time {
        (a, b)
    } else {
        (b, a)
    };
    let micros = |t: &Option<String>| t.as_deref().and_then(micros_of);
    let (Some(old_end), Some(new_start), Some(new_end)) = (
        micros(&old.max_time),
        micros(&new.min_time),
        micros(&new.max_time),
    ) else {
        return false;
    };
    !a.stale(current, team)
        && !b.stale(current, team)
        && old_end < new_start
        && new_end - new_start <= TAIL_MICROS
}

/// The least layout of each family (`Family::ALL`'s order) of a data file's rows, by its
/// Delta statistics (parsed once); `None` when some row has none or the statistics do not
/// say.
fn layouts_of(stats: Option<&serde_json::Value>) -> [Option<i64>; 2] {
    Family::ALL.map(|family| {
        let v = stats?;
        let column = family.layout_column();
        let nulls = v.get("nullCount")?.get(column)?.as_i64()?;
        (nulls == 0).then(|| v.get("minValues")?.get(column)?.as_i64())?
    })
}

/// A data file of the snapshot as a query's scan opens it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScanFile {
    /// Its path under the table's root (the store `EventsTable::store_url` names).
    pub location: object_store::path::Path,
    pub size: u64,
    /// When it was written, in milliseconds since the epoch (the log's `modificationTime`).
    pub modified_ms: i64,
    /// Its `event_date` partition: days since the epoch.
    pub event_date: Option<i32>,
    /// Its Delta statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`).
    pub stats: Option<Arc<serde_json::Value>>,
}

/// What a query of one project needs from the table's snapshot, read in one pass over its
/// files.
pub(crate) struct TeamFiles {
    /// The names (last path segment, unique by their uuid) of the project's files, by the
    /// log's partition values: what the project guard lets a scan of that project open.
    pub names: Arc<std::collections::HashSet<String>>,
    /// The project's files, in the log's order.
    pub files: Vec<ScanFile>,
    /// Per family (`Family::ALL`'s order), the least number of promoted columns any of the
    /// project's rows in the files holds: `None` when some row holds none or a file's
    /// statistics do not say (a file from before storage v2); `i64::MAX` without files.
    /// Queries read a property's column alone when this covers it.
    pub min_layout: [Option<i64>; 2],
}

pub(crate) fn team_files(table: &DeltaTable, team: TeamId) -> Result<TeamFiles, StorageError> {
    team_files_with(table, team, &mut |f, _| parse_stats(f))
}

fn parse_stats(f: &deltalake::kernel::LogicalFileView) -> Option<Arc<serde_json::Value>> {
    f.stats()
        .and_then(|s| serde_json::from_str(&s).ok())
        .map(Arc::new)
}

/// [`team_files`], each file's parsed statistics from `stats_of` (given the file and its
/// path).
fn team_files_with(
    table: &DeltaTable,
    team: TeamId,
    stats_of: &mut dyn FnMut(
        &deltalake::kernel::LogicalFileView,
        &str,
    ) -> Option<Arc<serde_json::Value>>,
) -> Result<TeamFiles, StorageError> {
    let team = team.0.to_string();
    let mut names = std::collections::HashSet::new();
    let mut out = TeamFiles {
        names: Default::default(),
        files: Vec::new(),
        min_layout: [Some(i64::MAX); 2],
    };
    for f in table.snapshot()?.log_data().iter() {
        let partition = f.partition_values_map();
        if partition.get("team_id").cloned().flatten().as_deref() != Some(team.as_str()) {
            continue;
        }
        let path = f.path();
        names.insert(path.rsplit('/').next().unwrap_or(&path).to_string());
        let stats = stats_of(&f, &path);
        for (min, layout) in out.min_layout.iter_mut().zip(layouts_of(stats.as_deref())) {
            *min = min.zip(layout).map(|(m, l)| m.min(l));
        }
        let event_date = partition
            .get("event_date")
            .cloned()
            .flatten()
            .and_then(|d| chrono::NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok())
            .map(|d| (d - chrono::NaiveDate::default()).num_days() as i32);
        out.files.push(ScanFile {
            location: f.object_store_path(),
            size: u64::try_from(f.size()).unwrap_or(0),
            modified_ms: f.modification_time(),
            event_date,
            stats,
        });
    }
    out.names = Arc::new(names);
    Ok(out)
}

/// [`EventsTable`]'s cache of what queries derive from its latest snapshot.
#[derive(Default)]
pub(super) struct ReadCache {
    /// The version `seq` and `teams` are of.
    version: Option<deltalake::kernel::Version>,
    seq: Option<u64>,
    teams: std::collections::HashMap<TeamId, Arc<TeamFiles>>,
    /// Each live file's parsed statistics, by path: a file never changes once written, so
    /// a new version parses only its new files. Dropped with the file.
    pub(super) stats: std::collections::HashMap<String, Option<Arc<serde_json::Value>>>,
    /// The version `stats` was last trimmed to.
    stats_version: Option<deltalake::kernel::Version>,
}

impl ReadCache {
    pub(super) fn seq_at(&self, version: Option<deltalake::kernel::Version>) -> Option<u64> {
        self.seq.filter(|_| self.version == version)
    }

    pub(super) fn keep_seq(&mut self, version: Option<deltalake::kernel::Version>, seq: u64) {
        if self.at(version) {
            self.seq = Some(seq);
        }
    }

    /// Moves to `version` when it is newer; whether the cache is of `version` now (a reader
    /// of an older snapshot is answered, not cached).
    fn at(&mut self, version: Option<deltalake::kernel::Version>) -> bool {
        if version > self.version {
            self.version = version;
            self.seq = None;
            self.teams.clear();
        }
        self.version == version
    }

    pub(super) fn team_files(
        &mut self,
        table: &DeltaTable,
        team: TeamId,
    ) -> Result<Arc<TeamFiles>, StorageError> {
        let version = table.version();
        if !self.at(version) {
            return Ok(Arc::new(team_files(table, team)?));
        }
        if let Some(files) = self.teams.get(&team) {
            return Ok(files.clone());
        }
        if self.stats_version != version {
            self.stats_version = version;
            let live: std::collections::HashSet<String> = table
                .snapshot()?
                .log_data()
                .iter()
                .map(|f| f.path().to_string())
                .collect();
            self.stats.retain(|path, _| live.contains(path));
        }
        let stats = &mut self.stats;
        let files = Arc::new(team_files_with(table, team, &mut |f, path| {
            stats
                .entry(path.to_string())
                .or_insert_with(|| parse_stats(f))
                .clone()
        })?);
        self.teams.insert(team, files.clone());
        Ok(files)
    }
}

impl EventsTable {
    /// Rewrites, one partition per commit (appends wait for at most one partition), every
    /// partition that has at least `min_files` files smaller than half the target size, and
    /// files whose rows hold fewer promoted property columns than their project has now
    /// (`layouts`; up to [`RELAYOUT_BYTES_PER_RUN`] per run, the newest partitions chosen
    /// first), so a
    /// table written before a property was promoted, or before storage v2, moves to the
    /// current layout. Rows of a v1 table are counted for promotion first. Readers see
    /// either the old files or the new ones, never both and never none: the removes and
    /// the adds are one Delta commit.
    ///
    /// Rewritten rows of merged persons get the id they went into (`persons`: each
    /// project's overrides): a merge is folded into a file when the file is rewritten
    /// anyway, and [`EventsTable::fold_overrides`] folds the rest only where a file's share
    /// of them makes it worth a rewrite.
    pub(crate) async fn compact(
        &self,
        min_files: usize,
        layouts: &dyn LayoutSource,
        persons: &PersonMaps,
    ) -> Result<CompactStats, StorageError> {
        let candidates: Vec<(String, String, bool)> = {
            let guard = self.table.lock().await;
            let current = layouts.layouts();
            let mut budget = RELAYOUT_BYTES_PER_RUN;
            let mut picked = Vec::new();
            let mut seen_team: Option<String> = None;
            for ((team, date), files) in partition_files(&guard)?.into_iter().rev() {
                let Ok(team_id) = team.parse::<i64>().map(TeamId) else {
                    continue;
                };
                // Partitions come newest first within a project.
                let newest = seen_team.as_deref() != Some(team.as_str());
                seen_team = Some(team.clone());
                // A day's main file and tail stay while the day is the newest; once a newer
                // day exists they are merged, whatever `min_files` says.
                let pair = is_main_and_tail(&files, &current, team_id);
                let small = if newest && pair {
                    0
                } else if pair {
                    usize::MAX
                } else {
                    files
                        .iter()
                        .filter(|f| (f.size as u64) < self.cfg.target_file_bytes / 2)
                        .count()
                };
                let stale: i64 = files
                    .iter()
                    .filter(|f| f.stale(&current, team_id))
                    .map(|f| f.size)
                    .sum();
                if small >= min_files.max(2) {
                    picked.push((team, date, newest));
                } else if stale > 0 && budget > 0 {
                    budget -= stale;
                    picked.push((team, date, newest));
                }
            }
            // Chosen newest first (the budget favours recent data), committed oldest first,
            // as the optimize-based compaction did: the order of the scan's files follows
            // the log, and an `ORDER BY timestamp DESC LIMIT n` top-k prunes other files by
            // their statistics only once it has read the newest rows (at 1M events the
            // events list read 13 of 90 daily files; see issue 13's note).
            picked.reverse();
            picked
        };
        let mut stats = CompactStats::default();
        for (team, date, newest) in candidates {
            let Ok(team_id) = team.parse::<i64>().map(TeamId) else {
                continue;
            };
            let files = {
                let guard = self.table.lock().await;
                let files = files_of(&guard, &team, &date)?;
                if files.is_empty() {
                    continue;
                }
                // Rows from before their family's columns existed (a table from before
                // storage v2, or before person properties had columns): their keys decide
                // what becomes a column. Person keys once per project and process: files
                // without person layouts keep coming when persons are not processed.
                for family in Family::ALL {
                    if files.iter().any(|f| f.layout_of(family).is_none())
                        && layouts.layouts().of(family, team_id).columns.is_empty()
                        && (family == Family::Event
                            || self
                                .person_keys_sampled
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(team_id))
                    {
                        self.sample_keys(&guard, team_id, family, &files, layouts)
                            .await?;
                    }
                }
                files
            };
            let current = layouts.layouts();
            let small: Vec<&DataFile> = files
                .iter()
                .filter(|f| (f.size as u64) < self.cfg.target_file_bytes / 2)
                .collect();
            // Small files join a rewrite the partition has anyway: one run, not several. A
            // former newest day's main file and tail are merged.
            let any_stale = files.iter().any(|f| f.stale(&current, team_id));
            let pair = !newest && is_main_and_tail(&files, &current, team_id);
            let rewrite: Vec<&DataFile> = files
                .iter()
                .filter(|f| {
                    f.stale(&current, team_id)
                        || pair
                        || ((any_stale || small.len() >= min_files.max(2))
                            && (f.size as u64) < self.cfg.target_file_bytes / 2)
                })
                .collect();
            if rewrite.is_empty() || (rewrite.len() == 1 && !rewrite[0].stale(&current, team_id)) {
                continue;
            }
            // The newest day's newest hour goes to a file of its own.
            let tail_from = newest
                .then(|| {
                    rewrite
                        .iter()
                        .filter_map(|f| f.max_time.as_deref().and_then(micros_of))
                        .max()
                })
                .flatten()
                .map(|t| t - TAIL_MICROS);
            let Some(written) = self
                .rewrite_files(
                    team_id,
                    &date,
                    &rewrite,
                    &current,
                    persons.get(&team_id),
                    tail_from,
                )
                .await?
            else {
                stats.partitions_abandoned += 1;
                continue;
            };
            stats.rows_folded += written.rows_folded;
            stats.partitions += 1;
            stats.files_removed += rewrite.len() as u64;
            stats.files_added += written.added as u64;
        }
        Ok(stats)
    }

    /// Replaces `files` of `team`'s partition `date` with rewritten copies in one commit:
    /// rows moved to the current property layout (`current`) and, when `persons` is given,
    /// merged persons' ids replaced by the id they went into (old → current, chains
    /// followed). The files are merged by their sort order (`merge`), in runs of at most
    /// [`MERGE_BYTES`], each written to files of its own, which claim the order.
    ///
    /// The table lock is held only to add columns and to commit, not while the files are
    /// read and written: appends (and so ingestion, whose buffer waits for them) go on
    /// meanwhile. `None` when one of `files` went in the meantime (erased, or folded by
    /// another rewrite): the copies are deleted, since committing them would bring back
    /// what replaced the file had dropped.
    pub(super) async fn rewrite_files(
        &self,
        team_id: TeamId,
        date: &str,
        files: &[&DataFile],
        current: &Arc<Layouts>,
        persons: Option<&Arc<PersonMap>>,
        tail_from: Option<i64>,
    ) -> Result<Option<Rewritten>, StorageError> {
        let written = self
            .write_rewrite(team_id, date, files, current, persons, tail_from)
            .await?;
        self.commit_rewrite(team_id, date, files, written).await
    }

    /// The writing half of [`EventsTable::rewrite_files`]: the new files, not committed.
    /// Rows at or after `tail_from` (microseconds from 1970), if given, go to files of their
    /// own ([`TAIL_MICROS`]); each file still holds one sorted run.
    pub(super) async fn write_rewrite(
        &self,
        team_id: TeamId,
        date: &str,
        files: &[&DataFile],
        current: &Arc<Layouts>,
        persons: Option<&Arc<PersonMap>>,
        tail_from: Option<i64>,
    ) -> Result<Written, StorageError> {
        // Files merged together, in groups of at most MERGE_BYTES: each group is one
        // sorted run. Taken by their least timestamp, so the runs of a partition hold
        // consecutive times as far as the files allow, and their files' time ranges overlap
        // little (a query's time filter then skips more of them).
        let mut by_time: Vec<&DataFile> = files.to_vec();
        by_time.sort_by(|a, b| a.min_time.cmp(&b.min_time));
        let mut groups: Vec<Vec<&DataFile>> = vec![Vec::new()];
        let mut group_bytes = 0i64;
        for f in by_time {
            if group_bytes > 0 && group_bytes + f.size > MERGE_BYTES {
                groups.push(Vec::new());
                group_bytes = 0;
            }
            group_bytes += f.size;
            groups.last_mut().expect("one group").push(f);
        }
        let (table_schema, store) = {
            let mut guard = self.table.lock().await;
            self.settle(&mut guard).await?;
            // The columns the rewritten rows need exist before the writer starts.
            self.ensure_columns(&mut guard, &batch_schema(current))
                .await?;
            let table_schema =
                crate::storage::ids::file_schema(&guard.snapshot()?.snapshot().arrow_schema());
            (table_schema, guard.log_store().object_store(None))
        };
        let date32 = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d")
            .map(|d| {
                date32_of_micros(
                    d.and_hms_opt(0, 0, 0)
                        .expect("midnight")
                        .and_utc()
                        .timestamp_micros(),
                )
            })
            .map_err(|e| StorageError::Invariant(format!("bad partition date {date}: {e}")))?;
        let mut adds = Vec::new();
        let mut rows_folded = 0u64;
        for group in groups {
            // One per run, so each file holds one sorted run; made at the run's first chunk,
            // which judges the columns' encodings (`Distinct`).
            // The run's rows before `tail_from`, and at or after it.
            let mut writers: [Option<DeltaWriter>; 2] = [None, None];
            let mut inputs = Vec::with_capacity(group.len());
            for f in group {
                inputs.push(Input {
                    path: f.path.clone(),
                    bytes: fetch(&store, &f.path).await?,
                });
            }
            // Decoding, moving keys, folding ids and merging run on the blocking pool,
            // handing chunks over a short channel: the async workers stay free for
            // capture and queries.
            let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordBatch>(2);
            let (current, persons, schema) =
                (current.clone(), persons.cloned(), table_schema.clone());
            let task = tokio::task::spawn_blocking(move || {
                let prep = Prepare {
                    team: team_id,
                    date32,
                    layouts: &current,
                    persons: persons.as_deref(),
                    schema: &schema,
                };
                merge_sorted(inputs, &prep, |b| tx.blocking_send(b).is_ok())
            });
            while let Some(b) = rx.recv().await {
                for (part, b) in split_at_time(b, tail_from)?.into_iter().enumerate() {
                    if b.num_rows() == 0 {
                        continue;
                    }
                    let w = match &mut writers[part] {
                        Some(w) => w,
                        None => {
                            let distinct = Distinct::of(std::slice::from_ref(&b));
                            let guard = self.table.lock().await;
                            let config =
                                self.writer_config(&guard, table_schema.clone(), &distinct)?;
                            writers[part].insert(DeltaWriter::new(store.clone(), config))
                        }
                    };
                    w.write(&b).await?;
                }
            }
            rows_folded += task.await.map_err(|source| StorageError::Task {
                what: "compaction",
                source,
            })??;
            for w in writers.into_iter().flatten() {
                adds.extend(w.close().await?);
            }
        }
        Ok(Written { adds, rows_folded })
    }

    /// The committing half of [`EventsTable::rewrite_files`].
    pub(super) async fn commit_rewrite(
        &self,
        team_id: TeamId,
        date: &str,
        files: &[&DataFile],
        written: Written,
    ) -> Result<Option<Rewritten>, StorageError> {
        let mut guard = self.table.lock().await;
        self.settle(&mut guard).await?;
        let store = guard.log_store().object_store(None);
        let added: Vec<String> = written.adds.iter().map(|a| a.path.clone()).collect();
        let now: std::collections::HashSet<Path> = files_of(&guard, &team_id.0.to_string(), date)?
            .into_iter()
            .map(|f| f.path)
            .collect();
        if files.iter().any(|f| !now.contains(&f.path)) {
            drop(guard);
            for path in &added {
                if let Err(e) = store.delete(&Path::from(path.as_str())).await {
                    // Unreferenced, so vacuum deletes it later.
                    tracing::warn!(path, error = %e, "cannot delete an abandoned rewrite's file");
                }
            }
            debug!(
                team = team_id.0,
                date, "a rewritten file went meanwhile; rewrite abandoned"
            );
            return Ok(None);
        }
        let mut actions: Vec<Action> = files.iter().map(|f| f.remove.clone()).collect();
        actions.extend(written.adds.into_iter().map(|mut a| {
            a.data_change = false;
            Action::Add(a)
        }));
        let team = team_id.0;
        crate::faults::point("rewrite.written");
        let commit = CommitBuilder::default()
            .with_actions(actions)
            .build(
                Some(guard.snapshot()?),
                guard.log_store(),
                DeltaOperation::Optimize {
                    predicate: Some(format!("team_id = {team} AND event_date = '{date}'")),
                    target_size: self.cfg.target_file_bytes as i64,
                },
            )
            .await?;
        let version = commit.version() as i64;
        crate::faults::point("rewrite.committed");
        let mut table = guard.clone();
        table.update_incremental(None).await?;
        self.sync_local(added.iter().map(String::as_str), version)
            .await?;
        *guard = table;
        self.publish(&guard);
        Ok(Some(Rewritten {
            added: added.len(),
            rows_folded: written.rows_folded,
        }))
    }

    /// Counts the keys of up to a few thousand rows of `files` (the JSON column of `family`
    /// only) for `team`'s promotion decision.
    async fn sample_keys(
        &self,
        guard: &DeltaTable,
        team: TeamId,
        family: Family,
        files: &[DataFile],
        layouts: &dyn LayoutSource,
    ) -> Result<(), StorageError> {
        const SAMPLE_ROWS: usize = 10_000;
        let store = guard.log_store().object_store(None);
        let mut rows: Vec<serde_json::Map<String, serde_json::Value>> = Vec::new();
        for f in files.iter().filter(|f| f.layout_of(family).is_none()) {
            let bytes = fetch(&store, &f.path).await?;
            for b in decode(bytes, &f.path, team.0, 0)? {
                let b = b?;
                let Some(p) = b.column_by_name(family.json_column()) else {
                    continue;
                };
                let p = arrow::compute::cast(p, &arrow::datatypes::DataType::Utf8)?;
                for s in arrow::array::AsArray::as_string::<i32>(&p).iter().flatten() {
                    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(s) {
                        rows.push(m);
                    }
                }
                if rows.len() >= SAMPLE_ROWS {
                    break;
                }
            }
            if rows.len() >= SAMPLE_ROWS {
                break;
            }
        }
        layouts.observe_rows(team, family, &rows);
        Ok(())
    }

    /// Deletes files no snapshot younger than `retention` refers to. A dry run first: when
    /// every candidate is a file an earlier vacuum of this process deleted (their tombstones
    /// stay in the log for a week), nothing is deleted and nothing committed.
    pub async fn vacuum(&self, retention: chrono::Duration) -> Result<usize, StorageError> {
        let mut guard = self.table.lock().await;
        self.settle(&mut guard).await?;
        crate::faults::point("vacuum");
        let vacuum = |dry_run: bool| {
            guard
                .clone()
                .vacuum()
                .with_retention_period(retention)
                .with_enforce_retention_duration(false)
                .with_dry_run(dry_run)
        };
        let (_, planned) = vacuum(true).await?;
        let candidates: std::collections::HashSet<String> = planned
            .files_deleted
            .iter()
            .map(|f| self.relative_path(f))
            .collect();
        {
            let mut done = self.vacuumed.lock().expect("vacuumed");
            // A tombstone gone from the log will not come back: forget its file.
            done.retain(|f| candidates.contains(f));
            if candidates.iter().all(|f| done.contains(f)) {
                return Ok(0);
            }
        }
        let (table, metrics) = vacuum(false).await?;
        *guard = table;
        self.publish(&guard);
        let mut done = self.vacuumed.lock().expect("vacuumed");
        let deleted = metrics
            .files_deleted
            .iter()
            .filter(|f| done.insert(self.relative_path(f)))
            .count();
        Ok(deleted)
    }

    /// A file's path below the table's root. delta-rs names a tombstone's file relative to
    /// the root after the commit that made it, and by its absolute path once the log is
    /// read back (the same file twice in one vacuum's list).
    fn relative_path(&self, path: &str) -> String {
        let path = path.split_once("://").map_or(path, |(_, rest)| {
            rest.find('/').map_or(rest, |slash| &rest[slash..])
        });
        let root = self.cfg.url.path().trim_end_matches('/');
        let path = path.strip_prefix(root).unwrap_or(path);
        path.trim_start_matches('/').to_string()
    }
}

/// One data file's bytes (at most about the target file size).
pub(super) async fn fetch(
    store: &ObjectStoreRef,
    path: &Path,
) -> Result<bytes::Bytes, StorageError> {
    Ok(store.get(path).await?.bytes().await?)
}

/// The rows of one data file, batch by batch as they are decoded, with its partition's
/// `team_id` and `event_date` (which live in the path, not the file).
pub(super) fn decode(
    bytes: bytes::Bytes,
    path: &Path,
    team: i64,
    date32: i32,
) -> Result<impl Iterator<Item = Result<RecordBatch, StorageError>> + use<>, StorageError> {
    let meta = read_footer(&bytes, path)?;
    decode_with(bytes, meta, path, team, date32)
}

/// A data file's footer, parsed.
pub(super) fn read_footer(
    bytes: &bytes::Bytes,
    path: &Path,
) -> Result<ArrowReaderMetadata, StorageError> {
    ArrowReaderMetadata::load(bytes, Default::default())
        .map_err(|e| StorageError::Invariant(format!("cannot read {path}: {e}")))
}

/// [`decode`] of a file whose footer is parsed already.
/// The rows of `b` before `from` and at or after it (microseconds from 1970, by
/// `timestamp`), each in `b`'s order; all rows before when `from` is `None`.
fn split_at_time(b: RecordBatch, from: Option<i64>) -> Result<[RecordBatch; 2], StorageError> {
    let Some(from) = from else {
        let empty = b.slice(0, 0);
        return Ok([b, empty]);
    };
    // Conformed batches hold the table's `timestamp`: microseconds, UTC.
    let t = b
        .column_by_name("timestamp")
        .and_then(|t| {
            arrow::array::AsArray::as_primitive_opt::<arrow::datatypes::TimestampMicrosecondType>(
                t.as_ref(),
            )
        })
        .ok_or_else(|| StorageError::Invariant("a batch without a µs timestamp".into()))?;
    let late: arrow::array::BooleanArray = t
        .iter()
        .map(|t| Some(t.is_some_and(|t| t >= from)))
        .collect();
    let early = arrow::compute::not(&late)?;
    Ok([
        arrow::compute::filter_record_batch(&b, &early)?,
        arrow::compute::filter_record_batch(&b, &late)?,
    ])
}

pub(super) fn decode_with(
    bytes: bytes::Bytes,
    meta: ArrowReaderMetadata,
    path: &Path,
    team: i64,
    date32: i32,
) -> Result<impl Iterator<Item = Result<RecordBatch, StorageError>> + use<>, StorageError> {
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta)
        .build()
        .map_err(|e| StorageError::Invariant(format!("cannot read {path}: {e}")))?;
    Ok(reader.map(move |b| {
        let b = b?;
        let n = b.num_rows();
        let mut fields: Vec<arrow::datatypes::FieldRef> =
            b.schema().fields().iter().cloned().collect();
        let mut cols = b.columns().to_vec();
        fields.push(Arc::new(arrow::datatypes::Field::new(
            "team_id",
            arrow::datatypes::DataType::Int64,
            false,
        )));
        cols.push(Arc::new(arrow::array::Int64Array::from(vec![team; n])));
        fields.push(Arc::new(arrow::datatypes::Field::new(
            "event_date",
            arrow::datatypes::DataType::Date32,
            false,
        )));
        cols.push(Arc::new(arrow::array::Date32Array::from(vec![date32; n])));
        RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), cols)
            .map_err(StorageError::from)
    }))
}
