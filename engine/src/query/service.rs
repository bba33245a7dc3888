//! The query service, and the query endpoint on top of it: a request's refresh mode decides
//! between the cache and a run; a run is a task (so it can be polled and cancelled), in the
//! background for the async modes; each query is logged when it starts and when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::cache::{ResultCache, cache_key};
use super::catalog::OverrideCache;
use super::log::{self, LogStatus};
use super::tasks::{TaskState, Tasks};
use super::{
    HogQLNode, HogQLRun, QueryConfig, QueryError, QueryOutcome, QueryRequest, QueryResponse,
    QueryStatus, Refresh, exec, pool,
};
use crate::clock::SharedClock;
use crate::meta::{MetaStore, Project};
use crate::model::TeamId;
use crate::persons::store::PersonStore;
use crate::storage::buffer::EventBuffer;
use crate::storage::table::EventsTable;

/// How long a client should wait before asking again for results just computed.
const CLIENT_REFRESH_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(3);

pub struct QueryService {
    pub(super) cfg: QueryConfig,
    pub(super) runtime: Arc<RuntimeEnv>,
    /// The runtime queries run on, apart from HTTP and capture.
    pub(super) exec: exec::Executor,
    pub(super) meta: Arc<MetaStore>,
    pub(super) table: Arc<EventsTable>,
    pub(super) buffer: Arc<EventBuffer>,
    pub(super) clock: SharedClock,
    pub(super) cache: ResultCache,
    pub(super) tasks: Tasks,
    /// The last acknowledged WAL seq: a query waits until the buffer has applied it, so an
    /// event that got its 200 is visible to the next query.
    pub(super) acked: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Bumped by anything that changes data without new events (deletions).
    pub(super) epoch: std::sync::atomic::AtomicU64,
    pub(super) persons: Arc<dyn PersonStore>,
    /// Each project's person-id overrides, with the store version they were read at.
    pub(super) overrides: Arc<Mutex<OverrideCache>>,
    /// `persons`, `person_distinct_ids` and `groups` as columnar snapshots.
    pub(super) snapshots: Arc<super::person_snapshot::PersonSnapshots>,
    /// What scans derive from the cached footers (`files::FooterDerived`).
    pub(super) footers: Arc<super::files::FooterDerived>,
}

/// One request of the endpoint that is being answered: the project, the node, and what
/// names its answer.
pub(super) struct Job {
    pub(super) project: Project,
    pub(super) node: HogQLNode,
    /// An insight node (its JSON), when the request is one rather than HogQL.
    pub(super) insight: Option<Value>,
    /// The request's `name`.
    pub(super) name: Option<String>,
    pub(super) query_id: String,
    pub(super) key: String,
    /// The project's data version when the request came.
    pub(super) version: u64,
}

impl Job {
    /// A response to this job with no results (yet), in `status`.
    fn response(&self, status: QueryStatus) -> QueryResponse {
        QueryResponse {
            results: None,
            modifiers: self.node.modifiers.clone(),
            is_cached: false,
            cache_key: self.key.clone(),
            last_refresh: None,
            next_allowed_client_refresh: None,
            timezone: self.project.timezone.clone(),
            status,
        }
    }
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
        std::fs::create_dir_all(&cfg.spill_dir).map_err(|source| QueryError::Io {
            what: "cannot create spill directory",
            source,
        })?;
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(pool::HeadroomPool::new(cfg.memory_limit)))
            .with_disk_manager_builder(
                DiskManagerBuilder::default()
                    .with_mode(DiskManagerMode::Directories(vec![cfg.spill_dir.clone()])),
            )
            .build_arc()
            .map_err(QueryError::DataFusionInternal)?;
        let cache = moka::future::Cache::builder()
            .max_capacity(cfg.cache_entries)
            .build();
        let exec = exec::Executor::new(cfg.limits.clone(), Some(runtime.memory_pool.clone()))
            .map_err(|source| QueryError::Io {
                what: "cannot start the query runtime",
                source,
            })?;
        // A replaced snapshot file stays while a query planned with it may still run.
        let snapshots = Arc::new(super::person_snapshot::PersonSnapshots::new(
            cfg.snapshot_dir.clone(),
            persons.clone(),
            cfg.limits.timeout + Duration::from_secs(60),
        )?);
        Ok(Self {
            snapshots,
            footers: Default::default(),
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

    /// Rewrites the persons snapshots of `teams`, and of every project whose persons were
    /// erased since its snapshot was written, and deletes the files they replace: no
    /// snapshot file keeps an erased person's properties after this.
    pub async fn refresh_person_snapshots(&self, teams: &[TeamId]) -> Result<(), QueryError> {
        let snapshots = self.snapshots.clone();
        let meta = self.meta.clone();
        let mut teams = teams.to_vec();
        tokio::task::spawn_blocking(move || {
            teams.extend(snapshots.erased_since_base()?);
            teams.sort();
            teams.dedup();
            for team in teams {
                let layout = meta
                    .layouts()
                    .of(crate::storage::layout::Family::Person, team);
                snapshots.refresh(team, &layout)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| QueryError::Io {
            what: "the persons snapshot rewrite stopped",
            source: std::io::Error::other(e),
        })?
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

    /// Answers one request of the query endpoint.
    pub async fn query(
        self: &Arc<Self>,
        project: &Project,
        req: QueryRequest,
    ) -> Result<QueryOutcome, QueryError> {
        req.check_name()?;
        self.exec.count_request(project.id)?;
        req.check_client_query_id()?;
        // An insight node (TrendsQuery, EventsQuery) runs as HogQL of its own making; its
        // JSON stands for it in the cache key and the log, with the minute it is asked in
        // (its relative dates move with the clock even when the data does not).
        let insight =
            match super::insight::is_insight(req.query.get("kind").and_then(Value::as_str)) {
                true => {
                    super::insight::check(&req.query)?;
                    Some(req.query.clone())
                }
                false => None,
            };
        let node = match &insight {
            Some(q) => HogQLNode {
                query: q.to_string(),
                values: HashMap::from([(
                    "now".to_string(),
                    Value::String(self.clock.now().format("%Y-%m-%d %H:%M").to_string()),
                )]),
                modifiers: q
                    .get("modifiers")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({})),
                persons_mode: Default::default(),
            },
            None => HogQLNode::from_value(&req.query)?,
        };
        let key = cache_key(project.id, &node);
        self.caught_up().await;
        let version = self.data_version(project.id);
        let query_id = req
            .client_query_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let job = Job {
            project: project.clone(),
            node,
            insight,
            name: req.name,
            query_id,
            key,
            version,
        };

        if let Some(hit) = self.cached(&job.key, req.refresh, version).await {
            self.log_cached(&job);
            return Ok(QueryOutcome::Done(hit.response_for(
                &job.query_id,
                project.id,
                true,
            )));
        }
        if req.refresh == Refresh::ForceCache {
            // A cache miss: complete at once, with no results.
            let status = QueryStatus::nothing_to_run(&job.query_id, project.id);
            return Ok(QueryOutcome::Done(job.response(status)));
        }

        // Over the project's concurrency: refused now (429), for async requests too.
        let admitted = self.exec.admit(project.id)?;
        let cancel = CancellationToken::new();
        let started_at = self.clock.now();
        self.start_task(&job.query_id, project.id, cancel.clone(), started_at)?;
        self.write_log(&log::entry(
            &job,
            started_at,
            None,
            LogStatus::Running,
            None,
        ));

        // A blocking request whose client goes away (the handler's future is dropped) cancels
        // its query rather than leaving it to run for nobody.
        let client_gone = cancel.clone().drop_guard();
        let pending = req
            .refresh
            .is_async()
            .then(|| job.response(QueryStatus::running(&job.query_id, project.id, started_at)));
        let this = self.clone();
        let job_id = job.query_id.clone();
        let work = async move {
            let node = &job.node;
            let run = match &job.insight {
                Some(q) => {
                    this.run_insight_admitted(admitted, &job.project, q, &cancel)
                        .await
                }
                None => {
                    this.run_hogql_admitted(
                        admitted,
                        &job.project,
                        &node.query,
                        &node.values,
                        super::request::plan_modifiers(node),
                        &cancel,
                    )
                    .await
                }
            };
            this.finish(&job, started_at, run).await
        };
        if let Some(pending) = pending {
            client_gone.disarm();
            tokio::spawn(work);
            return Ok(QueryOutcome::Running(pending));
        }
        // Blocking: run here, but as a task so DELETE can still cancel it.
        let handle = tokio::spawn(work);
        let r = match handle.await {
            Ok(Ok(r)) => Ok(QueryOutcome::Done(r)),
            // The task holds why it ended; a status that has gone (pruned) leaves the bare
            // error.
            Ok(Err(error)) => match self.status(project.id, &job_id) {
                Ok(status) => Ok(QueryOutcome::Failed {
                    error,
                    status: Box::new(QueryStatus {
                        query_async: false,
                        ..status
                    }),
                }),
                Err(_) => Err(error),
            },
            Err(e) => Err(QueryError::TaskFailed(e)),
        };
        client_gone.disarm();
        r
    }

    /// Records how `job`'s run ended (cache, log, task) and answers with its response.
    async fn finish(
        &self,
        job: &Job,
        started_at: DateTime<Utc>,
        run: Result<HogQLRun, QueryError>,
    ) -> Result<QueryResponse, QueryError> {
        let ended_at = self.clock.now();
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                let (status, msg) = match &e {
                    QueryError::Cancelled(_) => (
                        LogStatus::Cancelled,
                        format!("Query {} was cancelled", job.query_id),
                    ),
                    other => (LogStatus::Failed, other.to_string()),
                };
                self.write_log(&log::entry(
                    job,
                    started_at,
                    Some(ended_at),
                    status,
                    Some(&msg),
                ));
                self.end_task(&job.query_id, TaskState::Failed(msg), ended_at);
                return Err(match e {
                    QueryError::Cancelled(_) => QueryError::Cancelled(job.query_id.clone()),
                    other => other,
                });
            }
        };
        let mut logged = log::entry(job, started_at, Some(ended_at), LogStatus::Completed, None);
        logged.result_rows = Some(run.results.len() as i64);
        logged.read_bytes = Some(run.read_bytes as i64);
        logged.timings = Some(log::timings(&run.timings));
        let computed = QueryResponse {
            results: Some(run.into_results()),
            last_refresh: Some(ended_at),
            next_allowed_client_refresh: Some(ended_at + CLIENT_REFRESH_AFTER),
            ..job.response(QueryStatus::served(&job.query_id, job.project.id, ended_at))
        };
        let entry = self
            .remember(job.key.clone(), computed, job.version, ended_at)
            .await;
        let resp = entry.response_for(&job.query_id, job.project.id, false);
        self.write_log(&logged);
        self.end_task(
            &job.query_id,
            TaskState::Done(Box::new(resp.clone())),
            ended_at,
        );
        Ok(resp)
    }
}
