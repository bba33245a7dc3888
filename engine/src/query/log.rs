//! The query log: one row per query the endpoint answers (written when it starts and again
//! when it ends), read back by `GET /query/{id}/log/` and as the `query_log` table.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::service::Job;
use super::{QueryError, QueryService};
use crate::meta::QueryLogEntry;
use crate::model::TeamId;

/// How long a query's log entry can be read back (spec §8).
pub const LOG_RETENTION: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Where a logged query is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LogStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl LogStatus {
    fn as_str(self) -> &'static str {
        match self {
            LogStatus::Running => "running",
            LogStatus::Completed => "completed",
            LogStatus::Failed => "failed",
            LogStatus::Cancelled => "cancelled",
        }
    }
}

/// The log entry of `job`, started at `started_at`, in `status`.
pub(super) fn entry(
    job: &Job,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
    status: LogStatus,
    error: Option<&str>,
) -> QueryLogEntry {
    QueryLogEntry {
        query_id: job.query_id.clone(),
        team_id: job.project.id.0,
        name: job.name.clone(),
        query: job.node.query.clone(),
        kind: job
            .insight
            .as_ref()
            .and_then(|q| q.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("HogQLQuery")
            .into(),
        status: status.as_str().into(),
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

/// Stage timings as the log keeps them: `[{"k": stage, "t": seconds}, …]`.
pub(super) fn timings(timings: &[(String, f64)]) -> Value {
    Value::Array(
        timings
            .iter()
            .map(|(k, t)| json!({"k": k, "t": t}))
            .collect(),
    )
}

impl QueryService {
    /// Writes a log entry; a failure to log never fails the query.
    pub(super) fn write_log(&self, e: &QueryLogEntry) {
        if let Err(e) = self.meta.log_query(e) {
            tracing::warn!(error = %e, "cannot write the query log");
        }
    }

    /// Logs `job` as answered from the cache, now.
    pub(super) fn log_cached(&self, job: &Job) {
        let now = self.clock.now();
        let mut e = entry(job, now, Some(now), LogStatus::Completed, None);
        e.is_cached = true;
        self.write_log(&e);
    }

    /// `GET /query/{id}/log/`: the newest log entry of that query in the last 24 hours.
    pub fn log_entry(&self, team: TeamId, query_id: &str) -> Result<QueryLogEntry, QueryError> {
        let since = self.clock.now() - LOG_RETENTION;
        self.meta
            .query_log(team, since, Some(query_id))?
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
}
