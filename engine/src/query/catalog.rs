//! What a query sees: its DataFusion session on the shared runtime, and one project's
//! tables (events from the table and the buffer, the query log, the person store's tables),
//! read only after the writes acknowledged so far are applied.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::person_snapshot::PersonSnapshots;
use super::{LOG_RETENTION, QueryError, QueryService, files, persons_tables, provider};
use crate::hogql::overrides::OverrideMap;
use crate::hogql::schema::Catalog;
use crate::meta::{MetaStore, QueryLogEntry};
use crate::model::TeamId;
use crate::persons::store::PersonStore;
use crate::storage::layout::{Family, TeamLayout};

/// Each project's person-id overrides, with the person-store version they were read at.
pub(super) type OverrideCache = HashMap<TeamId, (u64, Option<Arc<OverrideMap>>)>;

impl QueryService {
    /// A session for one query on the shared runtime (memory pool, spill directories).
    pub(super) fn session(&self) -> SessionContext {
        let mut config = SessionConfig::new()
            .with_target_partitions(self.cfg.target_partitions.max(1))
            .with_information_schema(false)
            .with_extension(self.footers.clone());
        let opts = config.options_mut();
        opts.execution.parquet.pushdown_filters = true;
        opts.execution.parquet.reorder_filters = true;
        // Every sort keeps this much back to merge its spill files (DataFusion's default is
        // 10 MB per sorter): scaled down with the pool, or a small pool cannot sort at all.
        let partitions = self.cfg.target_partitions.max(1);
        opts.execution.sort_spill_reservation_bytes =
            (self.cfg.memory_limit / (8 * partitions)).clamp(256 << 10, 10 << 20);
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(self.runtime.clone())
            .with_default_features()
            .with_physical_optimizer_rules(super::late_projection::physical_rules())
            .build();
        SessionContext::new_with_state(state)
    }

    /// Read your writes: waits (briefly) for the pipeline and the person store to apply what
    /// was acknowledged.
    pub(super) async fn caught_up(&self) {
        // Read your writes: wait (briefly) for the pipeline to apply what was acknowledged.
        let target = (self.acked)();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.buffer.applied_seq() < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        while self.persons.last_seq() < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if self.buffer.applied_seq() < target {
            tracing::warn!(
                applied = self.buffer.applied_seq(),
                acknowledged = target,
                "the ingest pipeline is behind by more than 10 s; the query runs without the newest events"
            );
        }
    }

    /// The tables a query of `team` may read, on `ctx`.
    pub(super) async fn catalog(
        &self,
        team: TeamId,
        ctx: &SessionContext,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<TeamCatalog, QueryError> {
        let mut t = Instant::now();
        let mut stage = |name: &str, t: &mut Instant| {
            timings.push((format!("./plan/catalog/{name}"), t.elapsed().as_secs_f64()));
            *t = Instant::now();
        };
        self.caught_up().await;
        stage("caught_up", &mut t);
        // Buffer first, then the table: see EventBuffer::snapshot_parts.
        let parts = self.buffer.snapshot_parts(team);
        let (table, committed) = self
            .table
            .snapshot_with_seq()
            .await
            .map_err(QueryError::Storage)?;
        stage("snapshot", &mut t);
        // The files are read through the table's store, rooted at the table (the paths in
        // the log are relative to it), registered once on the shared runtime.
        let log_store = table.log_store();
        let store_url = deltalake::logstore::LogStore::object_store_url(log_store.as_ref());
        let runtime = ctx.runtime_env();
        if runtime.object_store(&store_url).is_err() {
            runtime.register_object_store(store_url.as_ref(), log_store.object_store(None));
        }
        let buffered: Vec<RecordBatch> = parts
            .into_iter()
            .filter(|(seq, _)| *seq > committed)
            .flat_map(|(_, b)| b)
            .collect();
        // How many promoted columns of each family every row read here holds (files by
        // their statistics).
        let team_files = self
            .table
            .team_files(&table, team)
            .map_err(QueryError::Storage)?;
        let (names, files, min_layout) = (
            team_files.names.clone(),
            team_files.files.clone(),
            team_files.min_layout,
        );
        let delta_schema = table
            .snapshot()
            .map_err(QueryError::Delta)?
            .snapshot()
            .arrow_schema();
        let local_root = log_store
            .root_url()
            .to_file_path()
            .ok()
            .filter(|_| log_store.root_url().scheme() == "file");
        let files = Arc::new(
            files::FilesProvider::new(team, &delta_schema, store_url, files)
                .with_local_root(local_root),
        );
        stage("files", &mut t);
        let held = Family::ALL.map(|family| {
            let mut held = min_layout[family as usize];
            for b in &buffered {
                let least = b
                    .column_by_name(family.layout_column())
                    .filter(|c| c.null_count() == 0)
                    .and_then(|c| {
                        datafusion::arrow::compute::min(
                            c.as_primitive::<datafusion::arrow::datatypes::Int32Type>(),
                        )
                    });
                held = match (held, least) {
                    (Some(h), Some(l)) => Some(h.min(i64::from(l))),
                    _ if b.num_rows() == 0 => held,
                    _ => None,
                };
            }
            held.map_or(0, |h| h.clamp(0, i64::from(u32::MAX)) as usize)
        });
        let events = provider::EventsProvider::new(team, files, names, buffered)?;
        // After the rows: the lists only grow, so they name every column the rows hold.
        let layouts = self.meta.layouts();
        stage("provider", &mut t);
        Ok(TeamCatalog {
            events: Arc::new(events),
            layout: Family::ALL.map(|family| layouts.of(family, team)),
            held,
            meta: self.meta.clone(),
            team,
            log_since: self.clock.now() - LOG_RETENTION,
            persons: self.persons.clone(),
            overrides: self.overrides.clone(),
            snapshots: self.snapshots.clone(),
            person_tables: std::sync::OnceLock::new(),
        })
    }
}

/// The `query_log` table of a project: its entries since `since`. Read only when a query
/// names the table.
fn query_log_table(
    meta: &MetaStore,
    team: TeamId,
    since: DateTime<Utc>,
) -> Result<MemTable, QueryError> {
    use datafusion::arrow::array::{
        BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    let rows = meta.query_log(team, since, None)?;
    let ts = || {
        DataType::Timestamp(
            datafusion::arrow::datatypes::TimeUnit::Microsecond,
            Some("UTC".into()),
        )
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("query_id", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("exception", DataType::Utf8, true),
        Field::new("is_cached", DataType::Boolean, false),
        Field::new("query_start_time", ts(), false),
        Field::new("event_time", ts(), true),
        Field::new("query_duration_ms", DataType::Float64, true),
        Field::new("result_rows", DataType::Int64, true),
        Field::new("read_bytes", DataType::Int64, true),
    ]));
    let s = |f: &dyn Fn(&QueryLogEntry) -> Option<String>| {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>())) as _
    };
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            s(&|e| Some(e.query_id.clone())),
            s(&|e| e.name.clone()),
            s(&|e| Some(e.query.clone())),
            s(&|e| Some(e.kind.clone())),
            s(&|e| Some(e.status.clone())),
            s(&|e| e.error.clone()),
            Arc::new(BooleanArray::from(
                rows.iter().map(|e| e.is_cached).collect::<Vec<_>>(),
            )),
            Arc::new(
                TimestampMicrosecondArray::from(
                    rows.iter()
                        .map(|e| e.started_at.timestamp_micros())
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(
                TimestampMicrosecondArray::from(
                    rows.iter()
                        .map(|e| e.ended_at.map(|t| t.timestamp_micros()))
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Float64Array::from(
                rows.iter().map(|e| e.duration_ms).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|e| e.result_rows).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|e| e.read_bytes).collect::<Vec<_>>(),
            )),
        ],
    )
    .map_err(QueryError::Arrow)?;
    Ok(MemTable::try_new(schema, vec![vec![batch]])?)
}

/// The tables of one project.
pub(super) struct TeamCatalog {
    events: Arc<dyn TableProvider>,
    /// Per family (`Family::ALL` order): the project's promoted properties.
    layout: [Arc<TeamLayout>; 2],
    /// Per family: every row read holds at least this many of `layout`'s columns.
    held: [usize; 2],
    meta: Arc<MetaStore>,
    team: TeamId,
    log_since: DateTime<Utc>,
    persons: Arc<dyn PersonStore>,
    overrides: Arc<Mutex<OverrideCache>>,
    snapshots: Arc<PersonSnapshots>,
    /// `persons`, `person_distinct_ids`, `groups`: taken from the snapshots once per query.
    person_tables: std::sync::OnceLock<Option<[Arc<dyn TableProvider>; 3]>>,
}

impl TeamCatalog {
    fn snapshot_table(&self, which: usize) -> Option<Arc<dyn TableProvider>> {
        self.person_tables
            .get_or_init(|| {
                let layout = &self.layout[Family::Person as usize];
                match self.snapshots.tables(self.team, layout) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the persons snapshot");
                        None
                    }
                }
            })
            .as_ref()
            .map(|t| t[which].clone())
    }

    fn store_table(
        &self,
        build: fn(&dyn PersonStore, TeamId) -> Result<MemTable, QueryError>,
    ) -> Option<Arc<dyn TableProvider>> {
        match build(self.persons.as_ref(), self.team) {
            Ok(t) => Some(Arc::new(t)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the person store");
                None
            }
        }
    }
}

impl Catalog for TeamCatalog {
    fn person_overrides(&self) -> Option<Arc<OverrideMap>> {
        let version = self.persons.version();
        let mut cache = self.overrides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((v, m)) = cache.get(&self.team)
            && *v == version
        {
            return m.clone();
        }
        let map = match self.persons.overrides(self.team) {
            Ok(m) if m.is_empty() => None,
            Ok(map) => Some(Arc::new(OverrideMap::from_text(version, &map))),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read person-id overrides; merged persons' older events keep their old person id in this query");
                None
            }
        };
        cache.insert(self.team, (version, map.clone()));
        map
    }

    fn property_type(
        &self,
        kind: crate::propdefs::PropertyKind,
        name: &str,
    ) -> Option<crate::propdefs::PropertyType> {
        self.meta.property_type(self.team, kind, name)
    }

    fn property_layout(&self, family: Family) -> Arc<TeamLayout> {
        self.layout[family as usize].clone()
    }

    fn properties_held_by_every_row(&self, family: Family) -> usize {
        self.held[family as usize]
    }

    fn table(&self, name: &str) -> Option<Arc<dyn TableProvider>> {
        match name {
            "events" => Some(self.events.clone()),
            "query_log" => match query_log_table(&self.meta, self.team, self.log_since) {
                Ok(t) => Some(Arc::new(t)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the query log");
                    None
                }
            },
            "persons" => self.snapshot_table(0),
            "person_distinct_ids" => self.snapshot_table(1),
            "groups" => self.snapshot_table(2),
            "ingestion_warnings" => self.store_table(persons_tables::warnings),
            "cohort_people" => match self.cohort_people() {
                Ok(t) => Some(Arc::new(t)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the cohorts' members");
                    None
                }
            },
            _ => None,
        }
    }
}

impl TeamCatalog {
    /// `cohort_people (cohort_id, person_id)`: the members of the project's live cohorts,
    /// person ids in 16 bytes as `events.person_id` and `persons.id` hold them, each read
    /// through the overrides (a member merged into another person is that person now).
    fn cohort_people(&self) -> Result<MemTable, QueryError> {
        use datafusion::arrow::array::{FixedSizeBinaryBuilder, Int64Builder};
        let rows = self.meta.cohort_people(self.team)?;
        let overrides = self.person_overrides();
        let mut cohort = Int64Builder::with_capacity(rows.len());
        let mut person = FixedSizeBinaryBuilder::with_capacity(rows.len(), 16);
        for (id, uuid) in &rows {
            let Some(mut bytes) = crate::storage::ids::parse(uuid) else {
                continue;
            };
            if let Some(m) = &overrides
                && let Some(to) = m.map.get(&bytes)
            {
                bytes = *to;
            }
            cohort.append_value(*id);
            person.append_value(bytes).map_err(QueryError::Arrow)?;
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("cohort_id", DataType::Int64, false),
            Field::new("person_id", DataType::FixedSizeBinary(16), false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(cohort.finish()), Arc::new(person.finish())],
        )
        .map_err(QueryError::Arrow)?;
        Ok(MemTable::try_new(schema, vec![vec![batch]])?)
    }
}
