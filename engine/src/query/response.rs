//! What the query endpoint answers, typed. PostHog's JSON for these (field names, nulls,
//! which fields appear when) is the HTTP layer's business, not the engine's.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::model::TeamId;

/// What a request of the query endpoint gets.
#[derive(Debug)]
pub enum QueryOutcome {
    /// A complete response (computed now or from the cache).
    Done(QueryResponse),
    /// Running in the background: no results yet, and a status that is not complete.
    Running(QueryResponse),
    /// A blocking request whose query started and failed (or was cancelled): the error, and
    /// the query's status (`error: true` with the message), as `GET /query/{id}/` shows it.
    Failed {
        error: super::QueryError,
        status: Box<super::QueryStatus>,
    },
}

/// One answer of the query endpoint: the results once there are some, and how they were
/// served.
#[derive(Debug, Clone)]
pub struct QueryResponse {
    /// `None` while the query runs in the background, and on a `force_cache` miss.
    pub results: Option<QueryResults>,
    /// The request's `modifiers`, as sent (`{}` when it sent none).
    pub modifiers: Value,
    /// Served from the cache rather than computed for this request.
    pub is_cached: bool,
    pub cache_key: String,
    /// When the results were computed.
    pub last_refresh: Option<DateTime<Utc>>,
    /// A client should not ask for a refresh before this.
    pub next_allowed_client_refresh: Option<DateTime<Utc>>,
    /// The project's timezone when the results were computed.
    pub timezone: String,
    pub status: QueryStatus,
}

/// The results of one HogQL query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResults {
    pub columns: Vec<String>,
    /// Each column's name and ClickHouse type.
    pub types: Vec<(String, String)>,
    /// One JSON array per row.
    pub rows: Vec<Value>,
    /// A result that is one object rather than rows (a funnel's time to convert): shown as
    /// `results` instead of `rows`.
    pub object: Option<Value>,
    /// The query as it ran (LIMIT rules applied), printed back as HogQL.
    pub hogql: String,
    /// Seconds each stage took, by stage name (`./plan`, `./execute`, `./total`).
    pub timings: Vec<(String, f64)>,
    /// More rows than `limit` matched.
    pub has_more: bool,
    pub limit: usize,
    pub offset: usize,
}

/// Where one query is: PostHog's `query_status`.
#[derive(Debug, Clone)]
pub struct QueryStatus {
    /// The query's id: the client's `client_query_id`, or one made up.
    pub id: String,
    pub team: TeamId,
    /// Read from the task registry (`GET /query/{id}/`, or a query started in the
    /// background) rather than the status of a response computed or served for the request.
    pub query_async: bool,
    pub state: QueryState,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// The full response, in the status of a finished query read from the task registry.
    pub results: Option<Box<QueryResponse>>,
}

/// Whether a query runs, finished, or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryState {
    Running,
    Complete,
    /// Failed or cancelled, and why.
    Failed(String),
}

impl QueryStatus {
    /// The status of results served at once, computed at `computed_at`.
    pub(super) fn served(id: &str, team: TeamId, computed_at: DateTime<Utc>) -> Self {
        Self {
            id: id.to_string(),
            team,
            query_async: false,
            state: QueryState::Complete,
            started_at: Some(computed_at),
            ended_at: Some(computed_at),
            results: None,
        }
    }

    /// The status of an answer with no results that is complete at once (a `force_cache`
    /// miss).
    pub(super) fn nothing_to_run(id: &str, team: TeamId) -> Self {
        Self {
            started_at: None,
            ended_at: None,
            ..Self::served(id, team, DateTime::UNIX_EPOCH)
        }
    }

    /// The status of a query running in the background since `started_at`.
    pub(super) fn running(id: &str, team: TeamId, started_at: DateTime<Utc>) -> Self {
        Self {
            id: id.to_string(),
            team,
            query_async: true,
            state: QueryState::Running,
            started_at: Some(started_at),
            ended_at: None,
            results: None,
        }
    }

    pub fn is_complete(&self) -> bool {
        self.state != QueryState::Running
    }
}
