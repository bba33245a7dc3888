//! Running queries: the HogQL runner, refresh modes over a cache, async tasks with
//! cancellation, and the query log.
//!
//! A query runs on a DataFusion session that shares one runtime (memory pool with spilling,
//! object stores) with every other query, so memory stays bounded however many run at once.
//!
//! - `service`: [`QueryService`], and the query endpoint: refresh modes, runs as tasks.
//! - `request` / `response`: what the endpoint is asked and answers, typed ([`QueryRequest`],
//!   [`QueryResponse`], [`QueryStatus`]); PostHog's JSON for them is the HTTP layer's.
//! - `run`: one HogQL query, parsed, limited, planned, optimized and executed.
//! - `catalog`: what a query sees (its session, the project's tables).
//! - `cache`, `tasks`, `log`: the result cache, the task registry, the query log.
//! - `draft`: draft SQL for a plain-language prompt.
//! - `exec`: the query runtime and its admission rules; `provider`, `person_snapshot`,
//!   `persons_tables`: the tables; `result`: Arrow to JSON cells and ClickHouse types; `pool`: the memory
//!   pool; `upgrade`: old query nodes to current ones.

mod cache;
mod catalog;
mod draft;
mod error;
pub(crate) mod exec;
mod files;
mod insight;
mod late_projection;
mod local_read;
mod log;
mod page_index;
mod person_snapshot;
pub(crate) mod persons_tables;
mod placeholders;
pub(crate) mod pool;
pub(crate) mod provider;
mod request;
mod response;
pub(crate) mod result;
mod run;
mod scan_predicates;
mod service;
mod set_joins;
mod tasks;
pub(crate) mod upgrade;
mod yield_points;

use std::path::PathBuf;
use std::time::Duration;

pub use draft::draft_from;
pub use error::QueryError;
pub use log::LOG_RETENTION;
pub use request::{
    HogQLNode, MAX_CLIENT_QUERY_ID_CHARS, MAX_NAME_CHARS, Modifiers, QueryBody, QueryRequest,
    Refresh, RequestError,
};
pub use response::{QueryOutcome, QueryResponse, QueryResults, QueryState, QueryStatus};
pub use run::{DEFAULT_LIMIT, HogQLRun, MAX_LIMIT, ScanStats, position};
pub use service::QueryService;

#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Memory all running queries may hold together; operators spill to disk beyond it.
    pub memory_limit: usize,
    /// Where spill files go.
    pub spill_dir: PathBuf,
    /// Where the persons tables' snapshots go (`person_snapshot`).
    pub snapshot_dir: PathBuf,
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
            snapshot_dir: PathBuf::from("person_snapshots"),
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
