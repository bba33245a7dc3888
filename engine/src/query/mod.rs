//! Running queries: the HogQL runner, refresh modes over a cache, async tasks with
//! cancellation, and the query log.
//!
//! A query runs on a DataFusion session that shares one runtime (memory pool with spilling,
//! object stores) with every other query, so memory stays bounded however many run at once.
//! The cache key is (project, normalized query, values, modifiers); each entry records the
//! project's data version it was computed on, so a hit on unchanged data is exact. The
//! "very fresh" / "somewhat fresh" ages of PostHog's refresh modes apply on top: an entry on
//! older data is still served while younger than those ages.

pub mod exec;
pub mod persons_tables;
pub mod pool;
pub mod provider;
pub mod result;
pub mod upgrade;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::error::{ErrorKind, HasKind};
use crate::hogql::overrides::{OverrideMap, PersonsMode};
use crate::hogql::{ast, functions::WeekStart, parser, planner, print, schema::Catalog};
use crate::meta::{MetaStore, Project, QueryLogEntry};
use crate::model::TeamId;
use crate::persons::store::PersonStore;
use crate::storage::buffer::EventBuffer;
use crate::storage::table::EventsTable;

/// Rows a query without LIMIT returns (PostHog's default).
pub const DEFAULT_LIMIT: usize = 100;
/// The most rows any query returns; an explicit LIMIT above it is lowered to it.
pub const MAX_LIMIT: usize = 50_000;
/// Longest accepted query name (spec §8).
pub const MAX_NAME_CHARS: usize = 128;
/// Longest accepted `client_query_id`: it names the query in URLs, the task registry and
/// the query log.
pub const MAX_CLIENT_QUERY_ID_CHARS: usize = 256;
/// How long a query's log entry can be read back (spec §8).
pub const LOG_RETENTION: chrono::TimeDelta = chrono::TimeDelta::hours(24);

#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Memory all running queries may hold together; operators spill to disk beyond it.
    pub memory_limit: usize,
    /// Where spill files go.
    pub spill_dir: PathBuf,
    /// Parallelism of one query.
    pub target_partitions: usize,
    /// `blocking`/`async` serve a cached result younger than this even if data changed.
    pub very_fresh: Duration,
    /// `lazy_async` serves a cached result younger than this even if data changed.
    pub somewhat_fresh: Duration,
    /// Cached results kept (least recently used go first).
    pub cache_entries: u64,
    /// How long a finished async query's status stays readable.
    pub task_ttl: Duration,
    /// Concurrency, per-project admission, time limit and threads of the query runtime.
    pub limits: exec::QueryLimits,
}

impl QueryConfig {
    pub fn new(spill_dir: PathBuf) -> Self {
        Self {
            memory_limit: 2 << 30,
            spill_dir,
            target_partitions: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            very_fresh: Duration::from_secs(0),
            somewhat_fresh: Duration::from_secs(60),
            cache_entries: 1000,
            task_ttl: Duration::from_secs(3600),
            limits: exec::QueryLimits::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Syntax(String),
    #[error("{0}")]
    Query(String),
    #[error("{0}")]
    Invalid(String),
    /// A field of the request is invalid: the field (PostHog's `attr`) and why.
    #[error("{1}")]
    InvalidField(&'static str, String),
    #[error("{0}")]
    NotFound(String),
    #[error("Query {0} was cancelled")]
    Cancelled(String),
    #[error("The query needs more memory than the limit allows even with spilling: {0}")]
    Memory(String),
    #[error("The query took longer than the limit of {} s (--query-timeout) and was stopped", .0.as_secs_f64())]
    Timeout(Duration),
    /// Over the project's concurrency or request rate; retry after this many seconds.
    #[error("{0}")]
    Throttled(String, u64),
    #[error("{0}")]
    Internal(String),
}

impl HasKind for QueryError {
    fn kind(&self) -> ErrorKind {
        match self {
            QueryError::Syntax(_)
            | QueryError::Query(_)
            | QueryError::Invalid(_)
            | QueryError::InvalidField(..)
            | QueryError::Cancelled(_)
            | QueryError::Memory(_)
            | QueryError::Timeout(_) => ErrorKind::InvalidInput,
            QueryError::Throttled(..) => ErrorKind::TooManyRequests,
            QueryError::NotFound(_) => ErrorKind::NotFound,
            QueryError::Internal(_) => ErrorKind::Internal,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            QueryError::Syntax(_) => "hogql_syntax_error",
            QueryError::Query(_) => "hogql_query_error",
            QueryError::Cancelled(_) => "query_cancelled",
            QueryError::Memory(_) => "query_memory_limit",
            QueryError::Timeout(_) => "query_timeout",
            QueryError::Throttled(..) => "throttled",
            QueryError::Invalid(_) | QueryError::InvalidField(..) => "invalid_input",
            QueryError::NotFound(_) => "not_found",
            QueryError::Internal(_) => "error",
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            QueryError::InvalidField(field, _) => Some(field.to_string()),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            QueryError::Throttled(_, secs) => Some(*secs),
            _ => None,
        }
    }
}

fn from_df(e: datafusion::error::DataFusionError) -> QueryError {
    use datafusion::error::DataFusionError as D;
    match e.find_root() {
        D::ResourcesExhausted(m) => QueryError::Memory(m.clone()),
        _ => QueryError::Query(e.strip_backtrace().to_string()),
    }
}

/// The refresh modes of PostHog's query API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    Blocking,
    Async,
    LazyAsync,
    ForceBlocking,
    ForceAsync,
    ForceCache,
}

impl Refresh {
    pub fn parse(s: Option<&str>) -> Result<Self, QueryError> {
        Ok(match s.unwrap_or("blocking") {
            "blocking" | "true" => Refresh::Blocking,
            "async" => Refresh::Async,
            "lazy_async" => Refresh::LazyAsync,
            "force_blocking" => Refresh::ForceBlocking,
            "force_async" => Refresh::ForceAsync,
            "force_cache" | "false" => Refresh::ForceCache,
            other => {
                return Err(QueryError::Invalid(format!(
                    "refresh must be one of blocking, async, lazy_async, force_blocking, force_async, force_cache; got '{other}'"
                )));
            }
        })
    }
    fn is_async(self) -> bool {
        matches!(
            self,
            Refresh::Async | Refresh::LazyAsync | Refresh::ForceAsync
        )
    }
}

/// One request to the query endpoint.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    /// The query node (`{"kind": "HogQLQuery", "query": …, "values"?, "modifiers"?}`).
    pub query: Value,
    pub refresh: Refresh,
    pub client_query_id: Option<String>,
    pub name: Option<String>,
}

/// What the endpoint answers.
#[derive(Debug, Clone)]
pub enum QueryOutcome {
    /// A complete response (computed now or from the cache).
    Done(Value),
    /// Running in the background: a response whose `query_status.complete` is false.
    Running(Value),
}

/// A planned HogQL query, ready to run.
struct Planned {
    ctx: SessionContext,
    plan: LogicalPlan,
    limit: usize,
    offset: usize,
    probe: Option<usize>,
    hogql: String,
}

/// A finished HogQL run, before it is shaped into a response.
pub struct HogQLRun {
    pub columns: Vec<String>,
    pub types: Vec<(String, String)>,
    pub batches: Vec<RecordBatch>,
    pub results: Vec<Value>,
    pub has_more: bool,
    pub limit: usize,
    pub offset: usize,
    pub hogql: String,
    pub timings: Vec<(String, f64)>,
    pub read_bytes: u64,
    pub scan: ScanStats,
}

#[derive(Clone)]
struct CacheEntry {
    response: Value,
    data_version: u64,
    computed: Instant,
    computed_at: DateTime<Utc>,
}

enum TaskState {
    Running,
    Done(Value),
    Failed(String),
}

struct Task {
    team: TeamId,
    state: TaskState,
    cancel: CancellationToken,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
    finished: Option<Instant>,
}

pub struct QueryService {
    cfg: QueryConfig,
    runtime: Arc<RuntimeEnv>,
    /// The runtime queries run on, apart from HTTP and capture.
    exec: exec::Executor,
    meta: Arc<MetaStore>,
    table: Arc<EventsTable>,
    buffer: Arc<EventBuffer>,
    clock: SharedClock,
    cache: moka::future::Cache<String, CacheEntry>,
    tasks: Arc<Mutex<HashMap<String, Task>>>,
    /// The last acknowledged WAL seq: a query waits until the buffer has applied it, so an
    /// event that got its 200 is visible to the next query.
    acked: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Bumped by anything that changes data without new events (deletions).
    epoch: std::sync::atomic::AtomicU64,
    persons: Arc<dyn PersonStore>,
    /// Each project's person-id overrides, with the store version they were read at.
    overrides: Arc<Mutex<OverrideCache>>,
}

impl QueryService {
    pub fn new(
        cfg: QueryConfig,
        meta: Arc<MetaStore>,
        table: Arc<EventsTable>,
        buffer: Arc<EventBuffer>,
        clock: SharedClock,
        acked: Arc<dyn Fn() -> u64 + Send + Sync>,
        persons: Arc<dyn PersonStore>,
    ) -> Result<Self, QueryError> {
        std::fs::create_dir_all(&cfg.spill_dir)
            .map_err(|e| QueryError::Internal(format!("cannot create spill directory: {e}")))?;
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(pool::HeadroomPool::new(cfg.memory_limit)))
            .with_disk_manager_builder(
                DiskManagerBuilder::default()
                    .with_mode(DiskManagerMode::Directories(vec![cfg.spill_dir.clone()])),
            )
            .build_arc()
            .map_err(|e| QueryError::Internal(e.to_string()))?;
        let cache = moka::future::Cache::builder()
            .max_capacity(cfg.cache_entries)
            .build();
        let exec = exec::Executor::new(cfg.limits.clone(), Some(runtime.memory_pool.clone()))
            .map_err(|e| QueryError::Internal(format!("cannot start the query runtime: {e}")))?;
        Ok(Self {
            cfg,
            runtime,
            exec,
            meta,
            table,
            buffer,
            clock,
            cache,
            tasks: Arc::new(Mutex::new(HashMap::new())),
            acked,
            epoch: Default::default(),
            persons,
            overrides: Default::default(),
        })
    }

    pub fn config(&self) -> &QueryConfig {
        &self.cfg
    }

    /// The project's data version: changes whenever its events change.
    pub fn data_version(&self, team: TeamId) -> u64 {
        self.buffer.team_seq(team)
            ^ (self.epoch.load(std::sync::atomic::Ordering::Relaxed) << 48)
            ^ (self.persons.version() << 24)
    }

    /// Marks every project's data as changed (after deletions).
    pub fn bump_epoch(&self) {
        self.epoch
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn session(&self) -> SessionContext {
        let mut config = SessionConfig::new()
            .with_target_partitions(self.cfg.target_partitions.max(1))
            .with_information_schema(false);
        let opts = config.options_mut();
        opts.execution.parquet.pushdown_filters = true;
        opts.execution.parquet.reorder_filters = true;
        // Every sort keeps this much back to merge its spill files (DataFusion's default is
        // 10 MB per sorter): scaled down with the pool, or a small pool cannot sort at all.
        let partitions = self.cfg.target_partitions.max(1);
        opts.execution.sort_spill_reservation_bytes =
            (self.cfg.memory_limit / (8 * partitions)).clamp(256 << 10, 10 << 20);
        SessionContext::new_with_config_rt(config, self.runtime.clone())
    }

    /// The providers a project's query may read.
    /// Read your writes: waits (briefly) for the pipeline and the person store to apply what
    /// was acknowledged.
    async fn caught_up(&self) {
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

    async fn catalog(&self, team: TeamId, ctx: &SessionContext) -> Result<TeamCatalog, QueryError> {
        self.caught_up().await;
        // Buffer first, then the table: see EventBuffer::snapshot_parts.
        let parts = self.buffer.snapshot_parts(team);
        let (table, committed) = self
            .table
            .snapshot_with_seq()
            .await
            .map_err(|e| QueryError::Internal(e.to_string()))?;
        table
            .update_datafusion_session(&ctx.state())
            .map_err(|e| QueryError::Internal(e.to_string()))?;
        let files = table
            .table_provider()
            .await
            .map_err(|e| QueryError::Internal(e.to_string()))?;
        let buffered: Vec<RecordBatch> = parts
            .into_iter()
            .filter(|(seq, _)| *seq > committed)
            .flat_map(|(_, b)| b)
            .collect();
        let events = provider::EventsProvider::new(team, files, buffered).map_err(from_df)?;
        Ok(TeamCatalog {
            events: Arc::new(events),
            meta: self.meta.clone(),
            team,
            log_since: self.clock.now() - LOG_RETENTION,
            persons: self.persons.clone(),
            overrides: self.overrides.clone(),
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
    let rows = meta
        .query_log(team, since, None)
        .map_err(|e| QueryError::Internal(e.to_string()))?;
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
    .map_err(|e| QueryError::Internal(e.to_string()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(from_df)
}

impl QueryService {
    /// Parses, plans and runs one HogQL query for `project` on the query runtime, under its
    /// admission rules and time limit (see [`exec`]). Stops (and returns
    /// [`QueryError::Cancelled`]) as soon as `cancel` fires.
    pub async fn run_hogql(
        self: &Arc<Self>,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let admitted = self.exec.admit(project.id)?;
        self.run_hogql_admitted(admitted, project, text, values, modifiers, cancel)
            .await
    }

    async fn run_hogql_admitted(
        self: &Arc<Self>,
        admitted: exec::Admitted,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let (this, project2, text, values) = (
            self.clone(),
            project.clone(),
            text.to_string(),
            values.clone(),
        );
        self.exec
            .run_admitted(admitted, cancel, async move {
                this.run_hogql_here(&project2, &text, &values, modifiers)
                    .await
            })
            .await
    }

    /// [`Self::run_hogql`] on the calling task.
    async fn run_hogql_here(
        &self,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
    ) -> Result<HogQLRun, QueryError> {
        let mut timings = Vec::new();
        let t0 = Instant::now();
        let planned = self.plan_hogql(project, text, values, modifiers).await?;
        let Planned {
            ctx,
            plan,
            limit,
            offset,
            probe,
            hogql,
        } = planned;
        timings.push(("./plan".to_string(), t0.elapsed().as_secs_f64()));

        let t2 = Instant::now();
        let (_, physical, batches) = self.execute(&ctx, plan).await?;
        let schema = physical.schema();
        let mut scan = ScanStats::default();
        scan_stats(physical.as_ref(), &mut scan);
        timings.push(("./execute".to_string(), t2.elapsed().as_secs_f64()));

        let mut results = result::json_rows(&batches);
        let mut has_more = false;
        if let Some(n) = probe
            && results.len() > n
        {
            results.truncate(n);
            has_more = true;
        }
        let batches = truncate_batches(batches, results.len());
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let types = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), result::clickhouse_type(f)))
            .collect();
        timings.push(("./total".to_string(), t0.elapsed().as_secs_f64()));
        Ok(HogQLRun {
            columns,
            types,
            batches,
            results,
            has_more,
            limit,
            offset,
            hogql,
            timings,
            read_bytes: scan.bytes,
            scan,
        })
    }

    /// Parses and plans a HogQL query of `project` (LIMIT rules applied).
    async fn plan_hogql(
        &self,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
    ) -> Result<Planned, QueryError> {
        let mut query = parser::parse_query(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        // LIMIT rules: none → 100 (one more fetched to know hasMore); above 50 000 → 50 000.
        let (limit, offset, probe) = limit_rules(&mut query);
        let hogql = print::query(&query);
        let ctx = self.session();
        let catalog = self.catalog(project.id, &ctx).await?;
        let parse = |t: &str| parser::parse_query(t).map_err(|e| e.to_string());
        let print_expr = |e: &ast::Expr| print::expr(e);
        let plan = {
            let pctx = planner::PlanContext {
                catalog: &catalog,
                timezone: project.timezone.clone(),
                week_start: modifiers.week_start,
                persons_mode: modifiers.persons_mode,
                now: self.clock.now(),
                values: values.clone(),
                parse: &parse,
                print: &print_expr,
            };
            planner::plan_query(&query, &pctx).map_err(|e| {
                let msg = match e.span {
                    Some(s) => format!("{} (at {})", e.message, position(text, s.start)),
                    None => e.message,
                };
                QueryError::Query(msg)
            })?
        };
        let plan = if let Some(n) = probe {
            datafusion::logical_expr::LogicalPlanBuilder::from(plan)
                .limit(0, Some(n + 1))
                .and_then(|b| b.build())
                .map_err(from_df)?
        } else {
            plan
        };
        Ok(Planned {
            ctx,
            plan,
            limit,
            offset,
            probe,
            hogql,
        })
    }

    /// Runs a HogQL query and describes how it ran: the optimized DataFusion logical plan and
    /// the physical plan with each operator's metrics (rows, time, bytes scanned, files and
    /// row groups pruned). What `hedgerow query --explain` prints.
    pub async fn explain_hogql(
        self: &Arc<Self>,
        project: &Project,
        text: &str,
    ) -> Result<String, QueryError> {
        let (this, project2, text) = (self.clone(), project.clone(), text.to_string());
        self.exec
            .run(project.id, &CancellationToken::new(), async move {
                this.explain_here(&project2, &text).await
            })
            .await
    }

    async fn explain_here(&self, project: &Project, text: &str) -> Result<String, QueryError> {
        let p = self
            .plan_hogql(project, text, &HashMap::new(), Modifiers::default())
            .await?;
        let (plan, physical, _) = self.execute(&p.ctx, p.plan).await?;
        let shown = datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(
            physical.as_ref(),
        )
        .indent(true)
        .to_string();
        Ok(format!(
            "-- HogQL\n{}\n\n-- optimized logical plan\n{}\n\n-- physical plan, with metrics\n{}",
            p.hogql,
            plan.display_indent(),
            shown
        ))
    }

    /// Optimizes, plans and runs `plan`: the optimized logical plan, the finished physical
    /// plan (its metrics filled in) and the result.
    async fn execute(
        &self,
        ctx: &SessionContext,
        plan: LogicalPlan,
    ) -> Result<(LogicalPlan, Arc<dyn ExecutionPlan>, Vec<RecordBatch>), QueryError> {
        let state = ctx.state();
        let plan = state.optimize(&plan).map_err(from_df)?;
        let physical = state.create_physical_plan(&plan).await.map_err(from_df)?;
        let batches = collect(physical.clone(), ctx.task_ctx())
            .await
            .map_err(from_df)?;
        Ok((plan, physical, batches))
    }

    /// A draft HogQL query for a plain-language `prompt`, built from the project's own event
    /// names and property keys: the prompt's words are matched against them (an event named
    /// in the prompt becomes the filter, "by `<property>`" a breakdown, "per day/week/month" a
    /// time bucket, "users" a unique-person count). A starting point to edit, not an answer.
    pub async fn draft_sql(
        self: &Arc<Self>,
        project: &Project,
        prompt: &str,
    ) -> Result<String, QueryError> {
        let cancel = CancellationToken::new();
        let none = HashMap::new();
        let events = self
            .run_hogql(
                project,
                "SELECT event, count() AS c FROM events GROUP BY event ORDER BY c DESC LIMIT 200",
                &none,
                Modifiers::default(),
                &cancel,
            )
            .await?;
        let names: Vec<String> = events
            .results
            .iter()
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_string))
            .collect();
        let sample = self
            .run_hogql(
                project,
                "SELECT properties FROM events ORDER BY timestamp DESC LIMIT 500",
                &none,
                Modifiers::default(),
                &cancel,
            )
            .await?;
        let mut keys: Vec<String> = Vec::new();
        for r in &sample.results {
            if let Some(Value::Object(m)) = r
                .get(0)
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
            {
                for k in m.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
        }
        Ok(draft_from(prompt, &names, &keys))
    }

    // ---------------------------------------------------------------------------------
    // The query endpoint: refresh modes, cache, tasks, log
    // ---------------------------------------------------------------------------------

    /// Answers one request of the query endpoint.
    pub async fn query(
        self: &Arc<Self>,
        project: &Project,
        req: QueryRequest,
    ) -> Result<QueryOutcome, QueryError> {
        if let Some(n) = &req.name
            && n.chars().count() > MAX_NAME_CHARS
        {
            return Err(QueryError::InvalidField(
                "name",
                format!(
                    "name must be at most {MAX_NAME_CHARS} characters, got {}",
                    n.chars().count()
                ),
            ));
        }
        self.exec.count_request(project.id)?;
        if let Some(id) = &req.client_query_id
            && (id.chars().count() > MAX_CLIENT_QUERY_ID_CHARS || id.is_empty())
        {
            return Err(QueryError::InvalidField(
                "client_query_id",
                format!(
                    "client_query_id must be 1 to {MAX_CLIENT_QUERY_ID_CHARS} characters, got {}",
                    id.chars().count()
                ),
            ));
        }
        let node = HogQLNode::from_value(&req.query)?;
        let key = cache_key(project.id, &node);
        self.caught_up().await;
        let version = self.data_version(project.id);
        let query_id = req
            .client_query_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());

        let cached = self.cache.get(&key).await;
        let fresh_for = |max_age: Duration| {
            cached
                .as_ref()
                .filter(|c| c.data_version == version || c.computed.elapsed() < max_age)
        };
        let hit = match req.refresh {
            Refresh::Blocking | Refresh::Async => fresh_for(self.cfg.very_fresh),
            Refresh::LazyAsync => fresh_for(self.cfg.somewhat_fresh),
            Refresh::ForceCache => cached.as_ref(),
            Refresh::ForceBlocking | Refresh::ForceAsync => None,
        };
        if let Some(c) = hit {
            let mut resp = c.response.clone();
            mark_cached(&mut resp, c, &query_id, project.id, true);
            self.log_cached(project, &node, &req, &query_id);
            return Ok(QueryOutcome::Done(resp));
        }
        if req.refresh == Refresh::ForceCache {
            // A cache miss: complete at once, with no results.
            let mut resp = json!({
                "results": null, "columns": null, "types": null, "hogql": null,
                "clickhouse": null, "timings": [], "error": null, "hasMore": null,
                "limit": null, "offset": null, "modifiers": node.modifiers.clone(),
                "is_cached": false, "cache_key": key, "last_refresh": null,
                "next_allowed_client_refresh": null, "timezone": project.timezone,
                "cache_target_age": null,
            });
            resp["query_status"] =
                status_json(&query_id, project.id, false, true, false, None, None, None);
            return Ok(QueryOutcome::Done(resp));
        }

        // Over the project's concurrency: refused now (429), for async requests too.
        let admitted = self.exec.admit(project.id)?;
        let cancel = CancellationToken::new();
        let started_at = self.clock.now();
        {
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            prune_tasks(&mut tasks, self.cfg.task_ttl);
            if let Some(t) = tasks.get(&query_id)
                && matches!(t.state, TaskState::Running)
            {
                return Err(QueryError::Invalid(format!(
                    "a query with id {query_id} is already running"
                )));
            }
            tasks.insert(
                query_id.clone(),
                Task {
                    team: project.id,
                    state: TaskState::Running,
                    cancel: cancel.clone(),
                    started_at,
                    ended_at: None,
                    finished: None,
                },
            );
        }
        self.write_log(&self.entry(
            project, &node, &req, &query_id, started_at, None, "running", None,
        ));

        // A blocking request whose client goes away (the handler's future is dropped) cancels
        // its query rather than leaving it to run for nobody.
        let client_gone = cancel.clone().drop_guard();
        let this = self.clone();
        let project2 = project.clone();
        let node2 = node.clone();
        let req2 = req.clone();
        let qid = query_id.clone();
        let work = async move {
            let run = this
                .run_hogql_admitted(
                    admitted,
                    &project2,
                    &node2.query,
                    &node2.values,
                    Modifiers {
                        week_start: WeekStart::Sunday,
                        persons_mode: node2.persons_mode,
                    },
                    &cancel,
                )
                .await;
            this.finish(
                &project2, &node2, &req2, &qid, started_at, key, version, run,
            )
            .await
        };
        if req.refresh.is_async() {
            client_gone.disarm();
            tokio::spawn(work);
            let mut resp = json!({
                "results": null, "columns": null, "types": null, "hogql": null,
                "clickhouse": null, "timings": [], "error": null, "hasMore": null,
                "limit": null, "offset": null, "modifiers": node.modifiers.clone(),
                "is_cached": false, "cache_key": cache_key(project.id, &node),
                "last_refresh": null, "next_allowed_client_refresh": null,
                "timezone": project.timezone,
            });
            resp["query_status"] = status_json(
                &query_id,
                project.id,
                true,
                false,
                false,
                None,
                Some(started_at),
                None,
            );
            return Ok(QueryOutcome::Running(resp));
        }
        // Blocking: run here, but as a task so DELETE can still cancel it.
        let handle = tokio::spawn(work);
        let r = match handle.await {
            Ok(r) => r.map(QueryOutcome::Done),
            Err(e) => Err(QueryError::Internal(format!("query task failed: {e}"))),
        };
        client_gone.disarm();
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        project: &Project,
        node: &HogQLNode,
        req: &QueryRequest,
        query_id: &str,
        started_at: DateTime<Utc>,
        key: String,
        version: u64,
        run: Result<HogQLRun, QueryError>,
    ) -> Result<Value, QueryError> {
        let ended_at = self.clock.now();
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                let (status, msg) = match &e {
                    QueryError::Cancelled(_) => {
                        ("cancelled", format!("Query {query_id} was cancelled"))
                    }
                    other => ("failed", other.to_string()),
                };
                self.write_log(&self.entry(
                    project,
                    node,
                    req,
                    query_id,
                    started_at,
                    Some(ended_at),
                    status,
                    Some(&msg),
                ));
                self.set_task(query_id, TaskState::Failed(msg.clone()), ended_at);
                return Err(match e {
                    QueryError::Cancelled(_) => QueryError::Cancelled(query_id.to_string()),
                    other => other,
                });
            }
        };
        let timings: Vec<Value> = run
            .timings
            .iter()
            .map(|(k, t)| json!({"k": k, "t": t}))
            .collect();
        let mut resp = json!({
            "results": run.results,
            "columns": run.columns,
            "types": run.types.iter().map(|(n, t)| json!([n, t])).collect::<Vec<_>>(),
            "hogql": run.hogql,
            "clickhouse": null,
            "timings": timings,
            "error": null,
            "hasMore": run.has_more,
            "limit": run.limit,
            "offset": run.offset,
            "modifiers": node.modifiers.clone(),
            "is_cached": false,
            "cache_key": key,
            "last_refresh": iso_utc(ended_at),
            "next_allowed_client_refresh": iso_utc(ended_at + chrono::TimeDelta::seconds(3)),
            "cache_target_age": null,
            "timezone": project.timezone,
            "query_status": null,
        });
        let entry = CacheEntry {
            response: resp.clone(),
            data_version: version,
            computed: Instant::now(),
            computed_at: ended_at,
        };
        self.cache.insert(key, entry.clone()).await;
        mark_cached(&mut resp, &entry, query_id, project.id, false);
        let mut logged = self.entry(
            project,
            node,
            req,
            query_id,
            started_at,
            Some(ended_at),
            "completed",
            None,
        );
        logged.result_rows = Some(run.results.len() as i64);
        logged.read_bytes = Some(run.read_bytes as i64);
        logged.timings = Some(resp["timings"].clone());
        self.write_log(&logged);
        self.set_task(query_id, TaskState::Done(resp.clone()), ended_at);
        Ok(resp)
    }

    fn set_task(&self, query_id: &str, state: TaskState, ended_at: DateTime<Utc>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tasks.get_mut(query_id) {
            t.state = state;
            t.ended_at = Some(ended_at);
            t.finished = Some(Instant::now());
        }
    }

    /// `GET /query/{id}/`: the status, with the full response once done.
    pub fn status(&self, team: TeamId, query_id: &str) -> Result<QueryOutcome, QueryError> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        prune_tasks(&mut tasks, self.cfg.task_ttl);
        let t = tasks
            .get(query_id)
            .filter(|t| t.team == team)
            .ok_or_else(|| QueryError::NotFound(format!("No query with id {query_id}")))?;
        Ok(match &t.state {
            TaskState::Running => QueryOutcome::Running(json!({
                "query_status": status_json(query_id, team, true, false, false, None, Some(t.started_at), None)
            })),
            TaskState::Done(resp) => {
                let mut st = status_json(
                    query_id,
                    team,
                    true,
                    true,
                    false,
                    None,
                    Some(t.started_at),
                    t.ended_at,
                );
                st["results"] = resp.clone();
                QueryOutcome::Done(json!({ "query_status": st }))
            }
            TaskState::Failed(msg) => return Err(QueryError::Query(msg.clone())),
        })
    }

    /// The status object of a failed task (for the 400 body of `GET /query/{id}/`).
    pub fn failed_status(&self, team: TeamId, query_id: &str) -> Option<Value> {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let t = tasks.get(query_id).filter(|t| t.team == team)?;
        match &t.state {
            TaskState::Failed(msg) => Some(status_json(
                query_id,
                team,
                true,
                true,
                true,
                Some(msg),
                Some(t.started_at),
                t.ended_at,
            )),
            _ => None,
        }
    }

    /// `DELETE /query/{id}/`: stops a running query. Unknown ids are 404; a finished query
    /// is left as it is.
    pub fn cancel(&self, team: TeamId, query_id: &str) -> Result<(), QueryError> {
        let tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let t = tasks
            .get(query_id)
            .filter(|t| t.team == team)
            .ok_or_else(|| QueryError::NotFound(format!("No query with id {query_id}")))?;
        t.cancel.cancel();
        Ok(())
    }

    /// `GET /query/{id}/log/`: the newest log entry of that query in the last 24 hours.
    pub fn log_entry(&self, team: TeamId, query_id: &str) -> Result<QueryLogEntry, QueryError> {
        let since = self.clock.now() - LOG_RETENTION;
        self.meta
            .query_log(team, since, Some(query_id))
            .map_err(|e| QueryError::Internal(e.to_string()))?
            .into_iter()
            .next()
            .ok_or_else(|| {
                QueryError::NotFound(format!(
                    "No query with id {query_id} in the query log of the last 24 hours"
                ))
            })
    }

    /// Drops log entries older than the retention (with a day's margin).
    pub fn prune_log(&self) {
        let before = self.clock.now() - LOG_RETENTION - chrono::TimeDelta::hours(24);
        if let Err(e) = self.meta.prune_query_log(before) {
            tracing::warn!(error = %e, "cannot prune the query log");
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &self,
        project: &Project,
        node: &HogQLNode,
        req: &QueryRequest,
        query_id: &str,
        started_at: DateTime<Utc>,
        ended_at: Option<DateTime<Utc>>,
        status: &str,
        error: Option<&str>,
    ) -> QueryLogEntry {
        QueryLogEntry {
            query_id: query_id.to_string(),
            team_id: project.id.0,
            name: req.name.clone(),
            query: node.query.clone(),
            kind: "HogQLQuery".into(),
            status: status.into(),
            error: error.map(str::to_string),
            is_cached: false,
            started_at,
            ended_at,
            duration_ms: ended_at
                .map(|e| (e - started_at).num_microseconds().unwrap_or(0) as f64 / 1000.0),
            result_rows: None,
            read_bytes: None,
            timings: None,
        }
    }

    /// Writes a log entry; a failure to log never fails the query.
    fn write_log(&self, e: &QueryLogEntry) {
        if let Err(e) = self.meta.log_query(e) {
            tracing::warn!(error = %e, "cannot write the query log");
        }
    }

    fn log_cached(&self, project: &Project, node: &HogQLNode, req: &QueryRequest, query_id: &str) {
        let now = self.clock.now();
        let mut e = self.entry(
            project,
            node,
            req,
            query_id,
            now,
            Some(now),
            "completed",
            None,
        );
        e.is_cached = true;
        self.write_log(&e);
    }
}

/// A HogQLQuery node, read from the request.
#[derive(Debug, Clone)]
pub struct HogQLNode {
    pub query: String,
    pub values: HashMap<String, Value>,
    pub modifiers: Value,
    /// `modifiers.personsOnEventsMode`.
    pub persons_mode: PersonsMode,
}

impl HogQLNode {
    pub fn from_value(v: &Value) -> Result<Self, QueryError> {
        let obj = v
            .as_object()
            .ok_or_else(|| QueryError::Invalid("query must be an object with a kind".into()))?;
        match obj.get("kind").and_then(Value::as_str) {
            Some("HogQLQuery") => {}
            Some(other) => {
                return Err(QueryError::Invalid(format!(
                    "query kind '{other}' is not supported; use HogQLQuery"
                )));
            }
            None => return Err(QueryError::Invalid("query.kind is required".into())),
        }
        let query = obj
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| QueryError::Invalid("query.query must be the HogQL text".into()))?
            .to_string();
        let values = match obj.get("values") {
            None | Some(Value::Null) => HashMap::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => return Err(QueryError::Invalid("query.values must be an object".into())),
        };
        let modifiers = obj.get("modifiers").cloned().unwrap_or_else(|| json!({}));
        let persons_mode = match modifiers.get("personsOnEventsMode") {
            None | Some(Value::Null) => PersonsMode::default(),
            Some(Value::String(m)) => PersonsMode::parse(m).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "modifiers.personsOnEventsMode '{m}' is not supported; use one of: {}",
                    PersonsMode::NAMES.join(", ")
                ))
            })?,
            Some(_) => {
                return Err(QueryError::Invalid(
                    "modifiers.personsOnEventsMode must be a string".into(),
                ));
            }
        };
        Ok(Self {
            query,
            values,
            modifiers,
            persons_mode,
        })
    }
}

/// Each project's person-id overrides, with the person-store version they were read at.
type OverrideCache = HashMap<TeamId, (u64, Option<Arc<OverrideMap>>)>;

/// The query modifiers that change how a query is planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modifiers {
    pub week_start: WeekStart,
    pub persons_mode: PersonsMode,
}

fn cache_key(team: TeamId, node: &HogQLNode) -> String {
    use sha2::{Digest, Sha256};
    let mut values: Vec<_> = node.values.iter().collect();
    values.sort_by(|a, b| a.0.cmp(b.0));
    let text = json!([team.0, node.query.trim(), values, node.modifiers]).to_string();
    format!(
        "cache_{}",
        hex::encode(&Sha256::digest(text.as_bytes())[..16])
    )
}

fn iso_utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn mark_cached(resp: &mut Value, c: &CacheEntry, query_id: &str, team: TeamId, cached: bool) {
    resp["is_cached"] = Value::Bool(cached);
    resp["last_refresh"] = Value::String(iso_utc(c.computed_at));
    resp["query_status"] = status_json(
        query_id,
        team,
        false,
        true,
        false,
        None,
        Some(c.computed_at),
        Some(c.computed_at),
    );
}

#[allow(clippy::too_many_arguments)]
fn status_json(
    id: &str,
    team: TeamId,
    query_async: bool,
    complete: bool,
    error: bool,
    error_message: Option<&str>,
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
) -> Value {
    json!({
        "id": id,
        "team_id": team.0,
        "query_async": query_async,
        "complete": complete,
        "error": error,
        "error_message": error_message,
        "dashboard_id": null,
        "end_time": end.map(iso_utc),
        "expiration_time": null,
        "insight_id": null,
        "labels": null,
        "pickup_time": start.map(iso_utc),
        "query_progress": null,
        "results": null,
        "start_time": start.map(iso_utc),
        "task_id": null,
    })
}

fn prune_tasks(tasks: &mut HashMap<String, Task>, ttl: Duration) {
    tasks.retain(|_, t| t.finished.is_none_or(|f| f.elapsed() < ttl));
}

/// Applies the LIMIT rules to the outermost query; returns (limit, offset, probe) where probe
/// is the row count whose overflow means `hasMore`.
fn limit_rules(q: &mut ast::Query) -> (usize, usize, Option<usize>) {
    let lit_usize = |e: &Option<ast::Expr>| match e.as_ref().map(|e| &e.kind) {
        Some(ast::ExprKind::Literal(ast::Literal::Int(i))) if *i >= 0 => Some(*i as usize),
        _ => None,
    };
    match q {
        ast::Query::Select(s) => {
            let offset = lit_usize(&s.offset).unwrap_or(0);
            match lit_usize(&s.limit) {
                None if s.limit.is_none() => (DEFAULT_LIMIT, offset, Some(DEFAULT_LIMIT)),
                Some(n) if n > MAX_LIMIT => {
                    let span = s.limit.as_ref().map(|e| e.span).unwrap_or_default();
                    s.limit = Some(ast::Expr::new(
                        ast::ExprKind::Literal(ast::Literal::Int(MAX_LIMIT as i128)),
                        span,
                    ));
                    (MAX_LIMIT, offset, Some(MAX_LIMIT))
                }
                Some(n) => (n, offset, None),
                None => (MAX_LIMIT, offset, Some(MAX_LIMIT)),
            }
        }
        // Set operations: the outer LIMIT applies to the whole result.
        ast::Query::SetOp { .. } => (DEFAULT_LIMIT, 0, Some(DEFAULT_LIMIT)),
    }
}

fn truncate_batches(batches: Vec<RecordBatch>, mut rows: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for b in batches {
        if rows == 0 {
            break;
        }
        let n = b.num_rows().min(rows);
        out.push(b.slice(0, n));
        rows -= n;
    }
    out
}

/// What a query read from Parquet, summed over its scans: files opened, row groups kept after
/// statistics, bloom filter and page index pruning (of how many), rows and bytes; and what
/// its operators spilled to disk when the memory pool ran short.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    pub files: u64,
    pub row_groups_total: u64,
    pub row_groups_read: u64,
    pub rows: u64,
    pub bytes: u64,
    pub spilled_bytes: u64,
}

fn scan_stats(plan: &dyn ExecutionPlan, out: &mut ScanStats) {
    use datafusion::physical_plan::metrics::MetricValue;
    if let Some(m) = plan.metrics() {
        let count = |name: &str| m.sum_by_name(name).map_or(0, |v| v.as_usize() as u64);
        out.spilled_bytes += m.spilled_bytes().unwrap_or(0) as u64;
        // Scans report one metric set per file: sum them.
        let pruning = |name: &str| {
            let mut found = None;
            for metric in m.iter() {
                if let MetricValue::PruningMetrics {
                    name: n,
                    pruning_metrics: p,
                } = metric.value()
                    && n == name
                {
                    let (t, k) = found.unwrap_or((0u64, 0u64));
                    found = Some((
                        t + (p.pruned() + p.matched()) as u64,
                        k + p.matched() as u64,
                    ));
                }
            }
            found
        };
        if let Some((total, after_stats)) = pruning("row_groups_pruned_statistics") {
            out.files += count("files_opened");
            out.bytes += count("bytes_scanned");
            out.rows += m.output_rows().unwrap_or(0) as u64;
            // Bloom filters are consulted after statistics, on what statistics kept.
            let kept = pruning("row_groups_pruned_bloom_filter")
                .filter(|(t, _)| *t == after_stats)
                .map_or(after_stats, |(_, m)| m);
            out.row_groups_total += total;
            out.row_groups_read += kept;
        }
    }
    for c in plan.children() {
        scan_stats(c.as_ref(), out);
    }
}

/// `line L, column C` of a byte offset.
pub fn position(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {col}")
}

/// The tables of one project.
struct TeamCatalog {
    events: Arc<dyn TableProvider>,
    meta: Arc<MetaStore>,
    team: TeamId,
    log_since: DateTime<Utc>,
    persons: Arc<dyn PersonStore>,
    overrides: Arc<Mutex<OverrideCache>>,
}

impl TeamCatalog {
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
            Ok(map) => Some(Arc::new(OverrideMap { version, map })),
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
            "persons" => self.store_table(persons_tables::persons),
            "person_distinct_ids" => self.store_table(persons_tables::distinct_ids),
            "groups" => self.store_table(persons_tables::groups),
            "ingestion_warnings" => self.store_table(persons_tables::warnings),
            _ => None,
        }
    }
}

fn normalize_word(s: &str) -> String {
    s.trim_start_matches('$')
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The draft for `prompt` given the project's event names and property keys.
pub fn draft_from(prompt: &str, events: &[String], keys: &[String]) -> String {
    let p = normalize_word(prompt);
    let words: Vec<&str> = p.split(' ').collect();
    let mentions = |name: &str| {
        let n = normalize_word(name);
        !n.is_empty()
            && (format!(" {p} ").contains(&format!(" {n} "))
                || (n == "pageview" && p.contains("page view")))
    };
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    let event = events.iter().find(|e| mentions(e));
    let breakdown = words
        .windows(2)
        .filter(|w| w[0] == "by" || w[0] == "per")
        .find_map(|w| {
            keys.iter()
                .find(|k| normalize_word(k).split(' ').next_back() == Some(w[1]))
        });
    let bucket = if p.contains("per hour") || p.contains("hourly") {
        Some("toStartOfHour(timestamp)")
    } else if p.contains("per week") || p.contains("weekly") {
        Some("toStartOfWeek(timestamp)")
    } else if p.contains("per month") || p.contains("monthly") {
        Some("toStartOfMonth(timestamp)")
    } else if p.contains("per day")
        || p.contains("daily")
        || p.contains("over time")
        || p.contains("trend")
    {
        Some("toStartOfDay(timestamp)")
    } else {
        None
    };
    let measure = if words
        .iter()
        .any(|w| matches!(*w, "users" | "people" | "persons" | "visitors" | "unique"))
    {
        "count(DISTINCT person_id) AS users"
    } else {
        "count() AS events"
    };
    let mut select = Vec::new();
    let mut group = Vec::new();
    if let Some(b) = bucket {
        select.push(format!("{b} AS period"));
        group.push("period".to_string());
    }
    if let Some(k) = breakdown {
        let field = if k
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            format!("properties.{k}")
        } else {
            format!("properties[{}]", quote(k))
        };
        select.push(format!("{field} AS breakdown"));
        group.push("breakdown".to_string());
    }
    if event.is_none() && bucket.is_none() && breakdown.is_none() {
        select.push("event".to_string());
        group.push("event".to_string());
    }
    select.push(measure.to_string());
    let mut sql = format!(
        "SELECT {}\nFROM events\nWHERE timestamp > now() - INTERVAL 30 DAY",
        select.join(", ")
    );
    if let Some(e) = event {
        sql.push_str(&format!("\n  AND event = {}", quote(e)));
    }
    if !group.is_empty() {
        sql.push_str(&format!("\nGROUP BY {}", group.join(", ")));
    }
    let order = if bucket.is_some() {
        "period".to_string()
    } else {
        measure.rsplit(' ').next().unwrap_or("1").to_string() + " DESC"
    };
    sql.push_str(&format!("\nORDER BY {order}\nLIMIT 100"));
    sql
}

#[cfg(test)]
mod draft_tests {
    use super::draft_from;

    #[test]
    fn drafts_use_the_projects_names() {
        let events = vec!["$pageview".to_string(), "signed up".to_string()];
        let keys = vec!["$browser".to_string(), "plan".to_string()];
        let d = draft_from("daily users who signed up by plan", &events, &keys);
        assert!(d.contains("toStartOfDay(timestamp) AS period"), "{d}");
        assert!(d.contains("AND event = 'signed up'"), "{d}");
        assert!(d.contains("properties.plan AS breakdown"), "{d}");
        assert!(d.contains("count(DISTINCT person_id)"), "{d}");
        let d = draft_from("pageviews by browser", &events, &keys);
        assert!(d.contains("properties.$browser AS breakdown"), "{d}");
        let d = draft_from("what happened", &events, &keys);
        assert!(d.contains("SELECT event, count() AS events"), "{d}");
    }
}
