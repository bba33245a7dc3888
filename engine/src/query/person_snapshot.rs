//! `persons`, `person_distinct_ids` and `groups` as columnar snapshots kept current with the
//! person store, so a query over 10⁷ persons reads Parquet columns instead of every SQLite
//! row.
//!
//! Per project, a *base*: one Parquet file per table under the data directory's
//! `person_snapshots/`, written at a store revision (`PersonStore::snapshot_changes`). The
//! persons file holds, beside the whole `properties` JSON, the project's hot person
//! properties (its person property columns, `storage::layout`) as typed hidden columns
//! `__pp_…`, which `properties.x` reads instead of parsing the JSON. A query sees the base
//! minus the persons and group keys changed since its revision, plus those rows as they are
//! now (the *delta*, read from the store and kept while the store's version stays the same).
//! When the delta passes [`REBUILD_ROWS`], a person was erased, or the project's person
//! columns changed, a background thread writes a new base: the old one's rows still current
//! plus the delta. The first query of a project after a start builds its base at once.
//!
//! An erased person's properties leave the snapshot with that rebuild; the deletion-task run
//! rebuilds the projects it erased in and deletes their old files at once
//! ([`PersonSnapshots::refresh`]). Replaced files of ordinary rebuilds are deleted after the
//! query time limit, so a query that planned with them can still read them.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, BooleanBuilder, FixedSizeBinaryBuilder, Int64Builder,
    RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::{Column as PhysColumn, in_list, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::UnionExec;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::{Map, Value};

use super::QueryError;
use super::persons_tables::ts;
use crate::model::TeamId;
use crate::persons::store::{PersonStore, SnapshotSink, StoreError};
use crate::storage::ids::{self, uuid_field};
use crate::storage::layout::{
    PropertyColumn, TeamLayout, arrow_type, encode, snapshot_person_column,
};

/// A delta of more rows than this (persons, distinct ids and groups together) starts a
/// rebuild of the project's base. Every query reads the delta again from SQLite after a
/// change, so it stays small; a rebuild reads and writes the whole base in the background.
pub(crate) const REBUILD_ROWS: usize = 50_000;

/// Rows per batch in the snapshot files and the delta.
const BATCH_ROWS: usize = 64 * 1024;

/// The three tables, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SnapTable {
    Persons = 0,
    DistinctIds = 1,
    Groups = 2,
}

impl SnapTable {
    const ALL: [SnapTable; 3] = [
        SnapTable::Persons,
        SnapTable::DistinctIds,
        SnapTable::Groups,
    ];

    fn file_suffix(self) -> &'static str {
        match self {
            SnapTable::Persons => "persons",
            SnapTable::DistinctIds => "person_distinct_ids",
            SnapTable::Groups => "groups",
        }
    }

    /// The column a change is keyed by: a base row whose key changed is dropped.
    fn key(self) -> &'static str {
        match self {
            SnapTable::Persons => "id",
            SnapTable::DistinctIds => "person_id",
            SnapTable::Groups => "key",
        }
    }
}

/// The 16 bytes of a person id the store holds as text.
fn id_bytes(id: &str) -> Result<[u8; 16], StoreError> {
    ids::parse(id).ok_or_else(|| StoreError::Snapshot(format!("person id {id:?} is not a UUID")))
}

fn snapshot_error(e: datafusion::arrow::error::ArrowError) -> StoreError {
    StoreError::Snapshot(e.to_string())
}

fn schema_of(table: SnapTable, layout: &[PropertyColumn]) -> SchemaRef {
    let mut fields = match table {
        SnapTable::Persons => vec![
            uuid_field("id", false),
            Field::new("created_at", ts(), false),
            Field::new("team_id", DataType::Int64, false),
            Field::new("properties", DataType::Utf8, false),
            Field::new("is_identified", DataType::Boolean, false),
        ],
        SnapTable::DistinctIds => vec![
            Field::new("distinct_id", DataType::Utf8, false),
            uuid_field("person_id", false),
            Field::new("team_id", DataType::Int64, false),
        ],
        SnapTable::Groups => vec![
            Field::new("index", DataType::Int64, false),
            Field::new("key", DataType::Utf8, false),
            Field::new("created_at", ts(), false),
            Field::new("updated_at", ts(), false),
            Field::new("team_id", DataType::Int64, false),
            Field::new("properties", DataType::Utf8, false),
        ],
    };
    if table == SnapTable::Persons {
        fields.extend(layout.iter().map(|pc| {
            Field::new(
                snapshot_person_column(&pc.key, pc.ty),
                arrow_type(pc.ty),
                true,
            )
        }));
    }
    Arc::new(Schema::new(fields))
}

/// Where finished batches go: memory (a delta) or a base's files.
enum Out {
    Memory([Vec<RecordBatch>; 3]),
    Files(Box<[ArrowWriter<File>; 3]>),
}

impl Out {
    fn push(&mut self, table: SnapTable, batch: RecordBatch) -> Result<(), StoreError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        match self {
            Out::Memory(m) => m[table as usize].push(batch),
            Out::Files(w) => w[table as usize]
                .write(&batch)
                .map_err(|e| StoreError::Snapshot(e.to_string()))?,
        }
        Ok(())
    }
}

/// Builds the three tables' batches from the store's rows.
struct Rows {
    team: TeamId,
    layout: Arc<[PropertyColumn]>,
    schemas: [SchemaRef; 3],
    out: Out,
    p_id: FixedSizeBinaryBuilder,
    p_created: TimestampMicrosecondBuilder,
    p_props: StringBuilder,
    p_identified: BooleanBuilder,
    p_typed: Vec<crate::storage::layout::TypedBuilder>,
    p_rows: usize,
    d_id: StringBuilder,
    d_person: FixedSizeBinaryBuilder,
    d_rows: usize,
    g_index: Int64Builder,
    g_key: StringBuilder,
    g_created: TimestampMicrosecondBuilder,
    g_updated: TimestampMicrosecondBuilder,
    g_props: StringBuilder,
    g_rows: usize,
    changed_persons: HashSet<String>,
    changed_groups: HashSet<String>,
    erased: bool,
    rows: [usize; 3],
}

impl Rows {
    fn new(team: TeamId, layout: Arc<[PropertyColumn]>, out: Out) -> Self {
        let typed = || {
            layout
                .iter()
                .map(|pc| crate::storage::layout::TypedBuilder::new(&arrow_type(pc.ty), 0))
                .collect()
        };
        Rows {
            team,
            schemas: SnapTable::ALL.map(|t| schema_of(t, &layout)),
            p_typed: typed(),
            layout,
            out,
            p_id: FixedSizeBinaryBuilder::new(16),
            p_created: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            p_props: StringBuilder::new(),
            p_identified: BooleanBuilder::new(),
            p_rows: 0,
            d_id: StringBuilder::new(),
            d_person: FixedSizeBinaryBuilder::new(16),
            d_rows: 0,
            g_index: Int64Builder::new(),
            g_key: StringBuilder::new(),
            g_created: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            g_updated: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            g_props: StringBuilder::new(),
            g_rows: 0,
            changed_persons: HashSet::new(),
            changed_groups: HashSet::new(),
            erased: false,
            rows: [0; 3],
        }
    }

    fn batch(&self, table: SnapTable, cols: Vec<ArrayRef>) -> Result<RecordBatch, StoreError> {
        RecordBatch::try_new(self.schemas[table as usize].clone(), cols)
            .map_err(|e| StoreError::Snapshot(e.to_string()))
    }

    fn finish_persons(&mut self) -> Result<(), StoreError> {
        let n = std::mem::take(&mut self.p_rows);
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.p_id.finish()),
            Arc::new(self.p_created.finish()),
            Arc::new(datafusion::arrow::array::Int64Array::from_value(
                self.team.0,
                n,
            )),
            Arc::new(self.p_props.finish()),
            Arc::new(self.p_identified.finish()),
        ];
        cols.extend(self.p_typed.iter_mut().map(|b| b.finish()));
        let batch = self.batch(SnapTable::Persons, cols)?;
        self.out.push(SnapTable::Persons, batch)
    }

    fn finish_distinct_ids(&mut self) -> Result<(), StoreError> {
        let n = std::mem::take(&mut self.d_rows);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.d_id.finish()),
            Arc::new(self.d_person.finish()),
            Arc::new(datafusion::arrow::array::Int64Array::from_value(
                self.team.0,
                n,
            )),
        ];
        let batch = self.batch(SnapTable::DistinctIds, cols)?;
        self.out.push(SnapTable::DistinctIds, batch)
    }

    fn finish_groups(&mut self) -> Result<(), StoreError> {
        let n = std::mem::take(&mut self.g_rows);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.g_index.finish()),
            Arc::new(self.g_key.finish()),
            Arc::new(self.g_created.finish()),
            Arc::new(self.g_updated.finish()),
            Arc::new(datafusion::arrow::array::Int64Array::from_value(
                self.team.0,
                n,
            )),
            Arc::new(self.g_props.finish()),
        ];
        let batch = self.batch(SnapTable::Groups, cols)?;
        self.out.push(SnapTable::Groups, batch)
    }

    /// Writes what is still in the builders.
    fn finish(mut self) -> Result<Out, StoreError> {
        self.finish_persons()?;
        self.finish_distinct_ids()?;
        self.finish_groups()?;
        Ok(self.out)
    }
}

impl SnapshotSink for Rows {
    fn person(
        &mut self,
        uuid: &str,
        created_at: i64,
        properties: &str,
        is_identified: bool,
    ) -> Result<(), StoreError> {
        self.p_id
            .append_value(id_bytes(uuid)?)
            .map_err(snapshot_error)?;
        self.p_created.append_value(created_at);
        self.p_props.append_value(properties);
        self.p_identified.append_value(is_identified);
        if !self.layout.is_empty() {
            let map: Map<String, Value> = match serde_json::from_str(properties) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            for (pc, b) in self.layout.iter().zip(&mut self.p_typed) {
                b.append(map.get(&pc.key).and_then(|v| encode(pc.ty, v).0));
            }
        }
        self.p_rows += 1;
        self.rows[0] += 1;
        if self.p_rows >= BATCH_ROWS {
            self.finish_persons()?;
        }
        Ok(())
    }

    fn distinct_id(&mut self, distinct_id: &str, person_uuid: &str) -> Result<(), StoreError> {
        self.d_id.append_value(distinct_id);
        self.d_person
            .append_value(id_bytes(person_uuid)?)
            .map_err(snapshot_error)?;
        self.d_rows += 1;
        self.rows[1] += 1;
        if self.d_rows >= BATCH_ROWS {
            self.finish_distinct_ids()?;
        }
        Ok(())
    }

    fn group(
        &mut self,
        index: i64,
        key: &str,
        created_at: i64,
        updated_at: i64,
        properties: &str,
    ) -> Result<(), StoreError> {
        self.g_index.append_value(index);
        self.g_key.append_value(key);
        self.g_created.append_value(created_at);
        self.g_updated.append_value(updated_at);
        self.g_props.append_value(properties);
        self.g_rows += 1;
        self.rows[2] += 1;
        if self.g_rows >= BATCH_ROWS {
            self.finish_groups()?;
        }
        Ok(())
    }

    fn changed_person(&mut self, uuid: &str, erased: bool) {
        self.erased |= erased;
        if !self.changed_persons.contains(uuid) {
            self.changed_persons.insert(uuid.to_owned());
        }
    }

    fn changed_group(&mut self, key: &str) {
        if !self.changed_groups.contains(key) {
            self.changed_groups.insert(key.to_owned());
        }
    }
}

/// A project's snapshot files, written at a store revision.
#[derive(Debug)]
pub(crate) struct Base {
    rev: u64,
    layout: Arc<[PropertyColumn]>,
    paths: [PathBuf; 3],
    rows: [usize; 3],
}

/// What changed since a base, as of one store revision.
#[derive(Debug, Default)]
pub(crate) struct Delta {
    batches: [Vec<RecordBatch>; 3],
    /// Persons (uuids) whose base rows are stale.
    changed_persons: Arc<[String]>,
    /// Group keys whose base rows are stale.
    changed_groups: Arc<[String]>,
    erased: bool,
    rows: usize,
}

#[derive(Default)]
struct TeamState {
    base: Option<Arc<Base>>,
    /// The delta over `base`, with the store version it was read at.
    delta: Option<(u64, Arc<Delta>)>,
    rebuilding: bool,
}

/// Every project's persons snapshot (see the module's text).
pub(crate) struct PersonSnapshots {
    dir: PathBuf,
    store: Arc<dyn PersonStore>,
    teams: Mutex<HashMap<TeamId, Arc<Mutex<TeamState>>>>,
    /// Files of replaced bases and when they were replaced.
    retired: Mutex<Vec<(Instant, TeamId, PathBuf)>>,
    /// How long a replaced file stays for the queries planned with it.
    keep_retired: Duration,
    generation: AtomicU64,
    /// Rebuilds run one at a time.
    build_lock: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> QueryError {
    move |source| QueryError::Io { what, source }
}

impl PersonSnapshots {
    /// Snapshots under `dir`; what a previous run left there is deleted (bases are built
    /// again on first use).
    pub(crate) fn new(
        dir: PathBuf,
        store: Arc<dyn PersonStore>,
        keep_retired: Duration,
    ) -> Result<Self, QueryError> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(io("cannot create the persons snapshot directory"))?;
        Ok(PersonSnapshots {
            dir,
            store,
            teams: Mutex::new(HashMap::new()),
            retired: Mutex::new(Vec::new()),
            keep_retired,
            generation: AtomicU64::new(0),
            build_lock: Mutex::new(()),
        })
    }

    fn state(&self, team: TeamId) -> Arc<Mutex<TeamState>> {
        lock(&self.teams).entry(team).or_default().clone()
    }

    /// The project's three tables as of now, for one query.
    pub(crate) fn tables(
        self: &Arc<Self>,
        team: TeamId,
        layout: &TeamLayout,
    ) -> Result<[Arc<dyn TableProvider>; 3], QueryError> {
        let state = self.state(team);
        let mut st = lock(&state);
        let base = match &st.base {
            Some(b) => b.clone(),
            None => {
                let b = Arc::new(self.build(team, None, &layout.columns)?);
                self.store
                    .forget_removals(team, b.rev)
                    .map_err(QueryError::PersonStore)?;
                st.base = Some(b.clone());
                b
            }
        };
        let delta = self.cached_delta(team, &base, &mut st)?;
        if !st.rebuilding
            && (delta.erased || delta.rows > REBUILD_ROWS || *base.layout != *layout.columns)
        {
            st.rebuilding = true;
            let this = self.clone();
            let layout = layout.columns.clone();
            std::thread::spawn(move || {
                if let Err(e) = this.rebuild(team, &layout, false) {
                    tracing::warn!(error = %e, team = team.0, "cannot rebuild the persons snapshot; queries read the older one and the changes since");
                }
            });
        }
        drop(st);
        let make = |t: SnapTable| -> Result<Arc<dyn TableProvider>, QueryError> {
            let drop_keys = match t {
                SnapTable::Groups => delta.changed_groups.clone(),
                _ => delta.changed_persons.clone(),
            };
            Ok(Arc::new(SnapshotTable::new(
                t,
                &base,
                delta.batches[t as usize].clone(),
                drop_keys,
            )?))
        };
        Ok([
            make(SnapTable::Persons)?,
            make(SnapTable::DistinctIds)?,
            make(SnapTable::Groups)?,
        ])
    }

    /// Writes a new base for the project now (from its current one and what changed) and
    /// deletes the files it replaces at once: the deletion-task run calls this so an erased
    /// person's properties leave the snapshot with the run.
    pub(crate) fn refresh(&self, team: TeamId, layout: &TeamLayout) -> Result<(), QueryError> {
        self.rebuild(team, &layout.columns, true)
    }

    /// The delta over `base` (the state's base), read again only when the store's version
    /// moved since the cached one.
    fn cached_delta(
        &self,
        team: TeamId,
        base: &Base,
        st: &mut TeamState,
    ) -> Result<Arc<Delta>, QueryError> {
        // The version before the read: a commit in between makes the next query read again.
        let version = self.store.version();
        if let Some((v, d)) = &st.delta
            && *v == version
        {
            return Ok(d.clone());
        }
        let d = Arc::new(self.delta(team, base)?);
        st.delta = Some((version, d.clone()));
        Ok(d)
    }

    /// The projects with a base whose persons were erased since it was written.
    pub(crate) fn erased_since_base(&self) -> Result<Vec<TeamId>, QueryError> {
        let teams: Vec<(TeamId, Arc<Mutex<TeamState>>)> = lock(&self.teams)
            .iter()
            .map(|(t, s)| (*t, s.clone()))
            .collect();
        let mut out = Vec::new();
        for (team, state) in teams {
            let mut st = lock(&state);
            let Some(base) = st.base.clone() else {
                continue;
            };
            if self.cached_delta(team, &base, &mut st)?.erased {
                out.push(team);
            }
        }
        Ok(out)
    }

    fn rebuild(
        &self,
        team: TeamId,
        layout: &[PropertyColumn],
        delete_now: bool,
    ) -> Result<(), QueryError> {
        let _one_at_a_time = lock(&self.build_lock);
        let state = self.state(team);
        // A project without a base has no file to replace (its first query builds one).
        let Some(old) = lock(&state).base.clone() else {
            lock(&state).rebuilding = false;
            return Ok(());
        };
        let built = self.build(team, Some(&old), layout);
        let mut st = lock(&state);
        st.rebuilding = false;
        let new = Arc::new(built?);
        if !st.base.as_ref().is_some_and(|b| Arc::ptr_eq(b, &old)) {
            // Replaced meanwhile (not by a rebuild: they wait for each other); keep that one.
            drop(st);
            for p in &new.paths {
                let _ = std::fs::remove_file(p);
            }
            return Ok(());
        }
        st.base = Some(new.clone());
        st.delta = None;
        // Under the lock: no query reads a delta over the old base after this.
        self.store
            .forget_removals(team, new.rev)
            .map_err(QueryError::PersonStore)?;
        drop(st);
        let mut retired = lock(&self.retired);
        let now = Instant::now();
        retired.extend(old.paths.iter().map(|p| (now, team, p.clone())));
        retired.retain(|(at, t, path)| {
            let due = (delete_now && *t == team) || at.elapsed() >= self.keep_retired;
            if due {
                let _ = std::fs::remove_file(path);
            }
            !due
        });
        Ok(())
    }

    /// The rows changed since `base`, in memory.
    fn delta(&self, team: TeamId, base: &Base) -> Result<Delta, QueryError> {
        let mut rows = Rows::new(team, base.layout.clone(), Out::Memory(Default::default()));
        self.store
            .snapshot_changes(team, Some(base.rev), &mut rows)
            .map_err(QueryError::PersonStore)?;
        let owned = |s: &mut HashSet<String>| -> Arc<[String]> {
            std::mem::take(s).into_iter().collect::<Vec<_>>().into()
        };
        let changed_persons = owned(&mut rows.changed_persons);
        let changed_groups = owned(&mut rows.changed_groups);
        let erased = rows.erased;
        let n = rows.rows.iter().sum();
        let Out::Memory(batches) = rows.finish().map_err(QueryError::PersonStore)? else {
            unreachable!("a delta is built in memory");
        };
        Ok(Delta {
            batches,
            changed_persons,
            changed_groups,
            erased,
            rows: n,
        })
    }

    /// A new base: `old`'s rows still current and what changed since (every row of the
    /// store when there is no `old`), with `layout`'s hidden columns.
    fn build(
        &self,
        team: TeamId,
        old: Option<&Base>,
        layout: &[PropertyColumn],
    ) -> Result<Base, QueryError> {
        let dir = self.dir.join(format!("team-{}", team.0));
        std::fs::create_dir_all(&dir)
            .map_err(io("cannot create the persons snapshot directory"))?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let layout: Arc<[PropertyColumn]> = layout.into();
        let paths =
            SnapTable::ALL.map(|t| dir.join(format!("{generation}.{}.parquet", t.file_suffix())));
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap_or_default()))
            .set_max_row_group_row_count(Some(BATCH_ROWS * 4))
            .build();
        let mut writers = Vec::with_capacity(3);
        for (t, path) in SnapTable::ALL.iter().zip(&paths) {
            let file = File::create(path).map_err(io("cannot write a persons snapshot file"))?;
            let schema = schema_of(*t, &layout);
            writers.push(
                ArrowWriter::try_new(file, schema, Some(props.clone()))
                    .map_err(|e| QueryError::PersonStore(StoreError::Snapshot(e.to_string())))?,
            );
        }
        let writers: [ArrowWriter<File>; 3] = writers
            .try_into()
            .unwrap_or_else(|_| unreachable!("three writers"));
        let mut rows = Rows::new(team, layout.clone(), Out::Files(Box::new(writers)));
        let rev = self
            .store
            .snapshot_changes(team, old.map(|b| b.rev), &mut rows)
            .map_err(QueryError::PersonStore)?;
        if let Some(old) = old {
            // Distinct-id rows are keyed by their person, like persons rows.
            let persons = std::mem::take(&mut rows.changed_persons);
            let groups = std::mem::take(&mut rows.changed_groups);
            for t in SnapTable::ALL {
                let stale = if t == SnapTable::Groups {
                    &groups
                } else {
                    &persons
                };
                copy_current(&old.paths[t as usize], t, stale, &old.layout, &mut rows)?;
            }
        }
        let counts = rows.rows;
        let Out::Files(writers) = rows.finish().map_err(QueryError::PersonStore)? else {
            unreachable!("a base is built into files");
        };
        for w in *writers {
            w.close()
                .map_err(|e| QueryError::PersonStore(StoreError::Snapshot(e.to_string())))?;
        }
        tracing::debug!(
            team = team.0,
            rev,
            persons = counts[0],
            distinct_ids = counts[1],
            groups = counts[2],
            "persons snapshot written"
        );
        Ok(Base {
            rev,
            layout,
            paths,
            rows: counts,
        })
    }
}

/// Copies the rows of an old base file whose key is not in `changed` into `rows`: as they
/// are when the layout is the same, through the person sink (typed columns anew) when not.
fn copy_current(
    path: &Path,
    table: SnapTable,
    changed: &HashSet<String>,
    old_layout: &[PropertyColumn],
    rows: &mut Rows,
) -> Result<(), QueryError> {
    let snap =
        |e: &dyn std::fmt::Display| QueryError::PersonStore(StoreError::Snapshot(e.to_string()));
    let file = File::open(path).map_err(io("cannot read a persons snapshot file"))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
        .map_err(|e| snap(&e))?;
    let same_layout = *rows.layout == *old_layout;
    for batch in reader {
        let batch = batch.map_err(|e| snap(&e))?;
        let batch = if changed.is_empty() {
            batch
        } else {
            let key = batch
                .column_by_name(table.key())
                .ok_or_else(|| snap(&format!("no column {}", table.key())))?;
            let key = ids::to_text(key.as_ref()).map_err(|e| snap(&e))?;
            let key = key.as_string::<i32>();
            let keep: BooleanArray = key
                .iter()
                .map(|k| Some(!changed.contains(k.unwrap_or(""))))
                .collect();
            filter_record_batch(&batch, &keep).map_err(|e| snap(&e))?
        };
        let n = batch.num_rows();
        match table {
            SnapTable::Persons if !same_layout => {
                let col = |name: &str| batch.column_by_name(name).cloned();
                let (Some(id), Some(created), Some(props), Some(identified)) = (
                    col("id"),
                    col("created_at"),
                    col("properties"),
                    col("is_identified"),
                ) else {
                    return Err(snap(&"a persons snapshot file lacks a column"));
                };
                let id = ids::to_text(id.as_ref()).map_err(|e| snap(&e))?;
                let (id, props) = (id.as_string::<i32>(), props.as_string::<i32>());
                let created = created
                    .as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
                let identified = identified.as_boolean();
                for i in 0..n {
                    rows.person(
                        id.value(i),
                        created.value(i),
                        props.value(i),
                        identified.value(i),
                    )
                    .map_err(QueryError::PersonStore)?;
                }
            }
            t => {
                // Same schema as the writer's (same table, same layout).
                let batch = RecordBatch::try_new(
                    rows.schemas[t as usize].clone(),
                    batch.columns().to_vec(),
                )
                .map_err(|e| snap(&e))?;
                rows.rows[t as usize] += n;
                rows.out.push(t, batch).map_err(QueryError::PersonStore)?;
            }
        }
    }
    Ok(())
}

/// One snapshot table for one query: the base file minus its stale rows, plus the delta.
#[derive(Debug)]
struct SnapshotTable {
    table: SnapTable,
    schema: SchemaRef,
    file: Option<Arc<ListingTable>>,
    delta: Vec<RecordBatch>,
    stale: Arc<[String]>,
}

impl SnapshotTable {
    fn new(
        table: SnapTable,
        base: &Base,
        delta: Vec<RecordBatch>,
        stale: Arc<[String]>,
    ) -> Result<Self, QueryError> {
        let schema = schema_of(table, &base.layout);
        let file = if base.rows[table as usize] == 0 {
            None
        } else {
            let path = &base.paths[table as usize];
            let url = ListingTableUrl::parse(path.to_string_lossy())
                .map_err(QueryError::DataFusionInternal)?;
            let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
                .with_file_extension(".parquet");
            let config = ListingTableConfig::new(url)
                .with_listing_options(options)
                .with_schema(schema.clone());
            Some(Arc::new(
                ListingTable::try_new(config).map_err(QueryError::DataFusionInternal)?,
            ))
        };
        Ok(SnapshotTable {
            table,
            schema,
            file,
            delta,
            stale,
        })
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let wanted: Vec<usize> = projection.cloned().unwrap_or(all);
        let mut inputs: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        if let Some(file) = &self.file {
            let key = self.schema.index_of(self.table.key())?;
            let mut cols = wanted.clone();
            if !self.stale.is_empty() && !cols.contains(&key) {
                cols.push(key);
            }
            let mut plan = file.scan(state, Some(&cols), filters, None).await?;
            if !self.stale.is_empty() {
                let scan_schema = plan.schema();
                let at = cols.iter().position(|c| *c == key).unwrap_or_default();
                let list = self
                    .stale
                    .iter()
                    .map(|k| match ids::parse(k) {
                        // Persons and distinct ids are keyed by a 16-byte person id.
                        Some(id) if self.table != SnapTable::Groups => {
                            lit(ScalarValue::FixedSizeBinary(16, Some(id.to_vec())))
                        }
                        _ => lit(ScalarValue::Utf8(Some(k.clone()))),
                    })
                    .collect();
                let predicate = in_list(
                    Arc::new(PhysColumn::new(self.table.key(), at)),
                    list,
                    &true,
                    &scan_schema,
                )?;
                plan = Arc::new(FilterExec::try_new(predicate, plan)?);
                if cols.len() != wanted.len() {
                    let exprs = wanted
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let name = self.schema.field(*c).name().clone();
                            (
                                Arc::new(PhysColumn::new(&name, i))
                                    as Arc<dyn datafusion::physical_expr::PhysicalExpr>,
                                name,
                            )
                        })
                        .collect::<Vec<_>>();
                    plan = Arc::new(ProjectionExec::try_new(exprs, plan)?);
                }
            }
            inputs.push(plan);
        }
        if !self.delta.is_empty() || inputs.is_empty() {
            inputs.push(MemorySourceConfig::try_new_exec(
                std::slice::from_ref(&self.delta),
                self.schema.clone(),
                Some(wanted.clone()),
            )?);
        }
        UnionExec::try_new(inputs)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::DateTime;
    use datafusion::prelude::SessionContext;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::persons::store::{ChangeSet, GroupRow, Op, PersonWrite, SqliteStore};
    use crate::propdefs::PropertyType;
    use crate::storage::layout::{Family, PropertyColumn};

    const T: TeamId = TeamId(1);

    fn uuid(id: i64) -> String {
        Uuid::from_u128(id as u128).to_string()
    }

    fn write(id: i64, props: &Value) -> PersonWrite {
        PersonWrite {
            id,
            team: T,
            uuid: Uuid::from_u128(id as u128).into(),
            created_at: DateTime::from_timestamp(id, 0).unwrap(),
            properties: props.to_string().into(),
            is_identified: id % 2 == 0,
            version: 0,
        }
    }

    fn layout() -> TeamLayout {
        TeamLayout {
            columns: vec![
                PropertyColumn::of(Family::Person, "plan", PropertyType::String),
                PropertyColumn::of(Family::Person, "age", PropertyType::Numeric),
            ],
        }
    }

    /// The three tables through the snapshot, as sorted text rows.
    /// (Without `age` while the snapshot's layout lacks it: its rebuild runs in the background.)
    async fn seen(snaps: &Arc<PersonSnapshots>, layout: &TeamLayout) -> ([Vec<String>; 3], bool) {
        let [p, d, g] = snaps.tables(T, layout).unwrap();
        let with_age = p.schema().index_of("__pp_age__num").is_ok();
        let ctx = SessionContext::new();
        ctx.register_table("persons", p).unwrap();
        ctx.register_table("pdi", d).unwrap();
        ctx.register_table("grp", g).unwrap();
        let q = |sql: &'static str| {
            let ctx = ctx.clone();
            async move {
                let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
                let mut out = Vec::new();
                for b in &batches {
                    for i in 0..b.num_rows() {
                        let cells: Vec<String> = b
                            .columns()
                            .iter()
                            .map(|c| match c.data_type() {
                                // Person ids in 16 bytes, read as their text.
                                DataType::FixedSizeBinary(16) => ids::to_text(c.as_ref())
                                    .unwrap()
                                    .as_string::<i32>()
                                    .value(i)
                                    .to_string(),
                                _ => datafusion::arrow::util::display::array_value_to_string(c, i)
                                    .unwrap(),
                            })
                            .collect();
                        out.push(cells.join("|"));
                    }
                }
                out.sort();
                out
            }
        };
        let persons = if with_age {
            q("SELECT id, created_at, properties, is_identified, \"__pp_plan\", \"__pp_age__num\" FROM persons").await
        } else {
            q("SELECT id, created_at, properties, is_identified, \"__pp_plan\", '' FROM persons")
                .await
        };
        (
            [
                persons,
                q("SELECT distinct_id, person_id FROM pdi").await,
                q("SELECT index, key, properties FROM grp").await,
            ],
            with_age,
        )
    }

    /// The same rows read straight from the store's SQLite file.
    fn truth(path: &Path, with_age: bool) -> [Vec<String>; 3] {
        let conn = rusqlite::Connection::open(path).unwrap();
        let q = |sql: &str, f: &dyn Fn(&rusqlite::Row<'_>) -> String| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let mut out: Vec<String> = stmt
                .query_map([], |r| Ok(f(r)))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            out.sort();
            out
        };
        let persons = q(
            "SELECT uuid, created_at, properties, is_identified FROM persons WHERE team_id = 1",
            &|r| {
                let props: String = r.get(2).unwrap();
                let map: Value = serde_json::from_str(&props).unwrap();
                let plan = map
                    .get("plan")
                    .and_then(|v| encode(PropertyType::String, v).0)
                    .map_or(String::new(), |c| match c {
                        crate::storage::layout::Cell::Str(s) => s,
                        _ => unreachable!(),
                    });
                let age = map
                    .get("age")
                    .filter(|_| with_age)
                    .and_then(|v| encode(PropertyType::Numeric, v).0)
                    .map_or(String::new(), |c| match c {
                        crate::storage::layout::Cell::Num(x) => format!("{x:.1}"),
                        _ => unreachable!(),
                    });
                let at = DateTime::from_timestamp_micros(r.get(1).unwrap()).unwrap();
                format!(
                    "{}|{}|{}|{}|{}|{}",
                    r.get::<_, String>(0).unwrap(),
                    at.format("%Y-%m-%dT%H:%M:%SZ"),
                    props,
                    r.get::<_, bool>(3).unwrap(),
                    plan,
                    age
                )
            },
        );
        let pdi = q(
            "SELECT d.distinct_id, p.uuid FROM person_distinct_ids d JOIN persons p ON p.id = d.person_id WHERE d.team_id = 1",
            &|r| {
                format!(
                    "{}|{}",
                    r.get::<_, String>(0).unwrap(),
                    r.get::<_, String>(1).unwrap()
                )
            },
        );
        let groups = q(
            "SELECT group_type_index, group_key, properties FROM groups WHERE team_id = 1",
            &|r| {
                format!(
                    "{}|{}|{}",
                    r.get::<_, i64>(0).unwrap(),
                    r.get::<_, String>(1).unwrap(),
                    r.get::<_, String>(2).unwrap()
                )
            },
        );
        [persons, pdi, groups]
    }

    fn open() -> (tempfile::TempDir, Arc<SqliteStore>, Arc<PersonSnapshots>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("meta.sqlite")).unwrap());
        let snaps = Arc::new(
            PersonSnapshots::new(
                dir.path().join("snap"),
                store.clone(),
                Duration::from_secs(3600),
            )
            .unwrap(),
        );
        (dir, store, snaps)
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// Random changes (new persons, property updates, distinct ids added and moved, merges,
    /// deletions, groups), committed one set at a time: after each, the snapshot (base, delta,
    /// rebuilds at random, and a layout change halfway) reads exactly what the store holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshot_reads_what_the_store_holds_through_every_kind_of_change() {
        let (dir, store, snaps) = open();
        let store_path = dir.path().join("meta.sqlite");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut alive: BTreeMap<i64, Value> = BTreeMap::new();
        let mut dids: BTreeMap<String, i64> = BTreeMap::new();
        let mut next = 1i64;
        let mut layout = TeamLayout {
            columns: layout().columns[..1].to_vec(),
        };
        let plans = ["free", "pro", "team", ""];
        for step in 0..120u64 {
            let mut c = ChangeSet::default();
            for _ in 0..1 + rng.below(4) {
                match rng.below(7) {
                    0 | 1 if !alive.is_empty() => {
                        // Update a person's properties.
                        let id = *alive
                            .keys()
                            .nth(rng.below(alive.len() as u64) as usize)
                            .unwrap();
                        let props = json!({"plan": plans[rng.below(4) as usize], "age": rng.below(90), "n": step});
                        alive.insert(id, props.clone());
                        c.persons.insert(id, write(id, &props));
                    }
                    2 if !alive.is_empty() && !dids.is_empty() => {
                        // Move a distinct id to another person.
                        let d = dids
                            .keys()
                            .nth(rng.below(dids.len() as u64) as usize)
                            .unwrap()
                            .clone();
                        let to = *alive
                            .keys()
                            .nth(rng.below(alive.len() as u64) as usize)
                            .unwrap();
                        dids.insert(d.clone(), to);
                        c.ops.push(Op::SetDistinct {
                            team: T,
                            distinct_id: d.as_str().into(),
                            person_id: to,
                        });
                    }
                    3 if alive.len() > 2 && c.persons.is_empty() => {
                        // Merge one person into another.
                        let from = *alive
                            .keys()
                            .nth(rng.below(alive.len() as u64) as usize)
                            .unwrap();
                        let to = *alive.keys().find(|k| **k != from).unwrap();
                        alive.remove(&from);
                        for v in dids.values_mut() {
                            if *v == from {
                                *v = to;
                            }
                        }
                        c.ops.push(Op::MergePerson { team: T, from, to });
                    }
                    4 if alive.len() > 2 && c.persons.is_empty() => {
                        let id = *alive
                            .keys()
                            .nth(rng.below(alive.len() as u64) as usize)
                            .unwrap();
                        alive.remove(&id);
                        dids.retain(|_, v| *v != id);
                        c.ops.push(Op::DeletePerson { team: T, id });
                    }
                    5 => {
                        c.ops.push(Op::Group(GroupRow {
                            team: T,
                            index: rng.below(2) as u8,
                            key: format!("g{}", rng.below(5)),
                            created_at: DateTime::from_timestamp(1, 0).unwrap(),
                            updated_at: DateTime::from_timestamp(step as i64, 0).unwrap(),
                            properties: json!({"step": step}).as_object().unwrap().clone(),
                        }));
                    }
                    _ => {
                        // A new person with a distinct id or two.
                        let id = next;
                        next += 1;
                        let props = json!({"plan": plans[rng.below(4) as usize], "age": format!("{}", rng.below(90))});
                        alive.insert(id, props.clone());
                        c.persons.insert(id, write(id, &props));
                        for k in 0..1 + rng.below(2) {
                            let d = format!("d{id}-{k}");
                            dids.insert(d.clone(), id);
                            c.ops.push(Op::SetDistinct {
                                team: T,
                                distinct_id: d.as_str().into(),
                                person_id: id,
                            });
                        }
                    }
                }
            }
            store.commit(&c, step + 1, next).unwrap();
            if step == 60 {
                layout = super::tests::layout();
            }
            if rng.below(10) == 0 {
                snaps
                    .rebuild(T, &layout.columns, rng.below(2) == 0)
                    .unwrap();
            }
            let (rows, with_age) = seen(&snaps, &layout).await;
            assert_eq!(rows, truth(&store_path, with_age), "after step {step}");
        }
        // The new layout's column is there after a rebuild.
        snaps.rebuild(T, &layout.columns, false).unwrap();
        let (rows, with_age) = seen(&snaps, &layout).await;
        assert!(with_age);
        assert_eq!(rows, truth(&store_path, true));
        // The model agrees with the store too (the test's changes did what it meant).
        assert_eq!(rows[0].len(), alive.len());
        assert_eq!(rows[1].len(), dids.len());
    }

    /// Erasure: after `refresh`, no file of the project's snapshot holds the erased person,
    /// and the files it replaced are gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refresh_leaves_no_file_with_an_erased_person() {
        let (dir, store, snaps) = open();
        let mut c = ChangeSet::default();
        for id in 1..=3 {
            c.persons.insert(
                id,
                write(
                    id,
                    &json!({"plan": "pro", "email": format!("p{id}@example.com")}),
                ),
            );
        }
        store.commit(&c, 1, 4).unwrap();
        let layout = layout();
        assert_eq!(seen(&snaps, &layout).await.0[0].len(), 3);
        let first: Vec<PathBuf> = lock(&snaps.state(T)).base.as_ref().unwrap().paths.to_vec();
        let mut c = ChangeSet::default();
        c.ops.push(Op::DeletePerson { team: T, id: 2 });
        store.commit(&c, 2, 4).unwrap();
        // Read at once (the delta drops the row) …
        assert_eq!(seen(&snaps, &layout).await.0[0].len(), 2);
        // … and out of the files with the refresh.
        snaps.refresh(T, &layout).unwrap();
        assert!(
            first.iter().all(|p| !p.exists()),
            "replaced files are deleted"
        );
        let team_dir = dir.path().join("snap").join("team-1");
        for entry in std::fs::read_dir(&team_dir).unwrap() {
            let path = entry.unwrap().path();
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                for col in batch.columns() {
                    // Person ids are 16 bytes: read them as text too.
                    let col = match col.data_type() {
                        DataType::FixedSizeBinary(16) => ids::to_text(col.as_ref()).unwrap(),
                        _ => col.clone(),
                    };
                    if let Some(s) = col.as_string_opt::<i32>() {
                        for v in s.iter().flatten() {
                            assert!(
                                !v.contains("p2@example.com") && v != uuid(2),
                                "{path:?} holds the erased person"
                            );
                        }
                    }
                }
            }
        }
        let (rows, with_age) = seen(&snaps, &layout).await;
        assert_eq!(rows, truth(&dir.path().join("meta.sqlite"), with_age));
        assert_eq!(rows[0].len(), 2);
    }
}
