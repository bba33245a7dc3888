//! The query log: one row per query run (its start, then its end), kept for a day.

use chrono::{DateTime, Utc};

use super::{MetaStore, Result, parse_ts, ts};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS query_log (
    query_id TEXT NOT NULL,
    team_id INTEGER NOT NULL,
    name TEXT,
    query TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    is_cached INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_ms REAL,
    result_rows INTEGER,
    read_bytes INTEGER,
    timings TEXT,
    PRIMARY KEY (team_id, query_id, started_at)
);
CREATE INDEX IF NOT EXISTS query_log_started ON query_log (team_id, started_at);
";

/// One row of the query log: what ran, for whom, how it ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueryLogEntry {
    pub query_id: String,
    pub team_id: i64,
    pub name: Option<String>,
    pub query: String,
    pub kind: String,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub error: Option<String>,
    pub is_cached: bool,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<f64>,
    pub result_rows: Option<i64>,
    pub read_bytes: Option<i64>,
    /// `[{k, t}]` as the query response gives them.
    pub timings: Option<serde_json::Value>,
}

impl MetaStore {
    /// Records a query's start or end (the row of `(team, id, started_at)` is replaced).
    pub fn log_query(&self, e: &QueryLogEntry) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO query_log (query_id, team_id, name, query, kind, status, error,
                is_cached, started_at, ended_at, duration_ms, result_rows, read_bytes, timings)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            rusqlite::params![
                e.query_id,
                e.team_id,
                e.name,
                e.query,
                e.kind,
                e.status,
                e.error,
                e.is_cached,
                ts(e.started_at),
                e.ended_at.map(ts),
                e.duration_ms,
                e.result_rows,
                e.read_bytes,
                e.timings.as_ref().map(|t| t.to_string()),
            ],
        )?;
        Ok(())
    }

    /// A project's log entries started at or after `since`, newest first; only `query_id`
    /// when given.
    pub fn query_log(
        &self,
        team: TeamId,
        since: DateTime<Utc>,
        query_id: Option<&str>,
    ) -> Result<Vec<QueryLogEntry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT query_id, team_id, name, query, kind, status, error, is_cached, started_at,
                    ended_at, duration_ms, result_rows, read_bytes, timings
             FROM query_log WHERE team_id = ?1 AND started_at >= ?2 AND (?3 IS NULL OR query_id = ?3)
             ORDER BY started_at DESC",
        )?;
        let rows = stmt.query_map(rusqlite::params![team.0, ts(since), query_id], |r| {
            Ok(QueryLogEntry {
                query_id: r.get(0)?,
                team_id: r.get(1)?,
                name: r.get(2)?,
                query: r.get(3)?,
                kind: r.get(4)?,
                status: r.get(5)?,
                error: r.get(6)?,
                is_cached: r.get(7)?,
                started_at: parse_ts(r.get(8)?),
                ended_at: r.get::<_, Option<String>>(9)?.map(parse_ts),
                duration_ms: r.get(10)?,
                result_rows: r.get(11)?,
                read_bytes: r.get(12)?,
                timings: r
                    .get::<_, Option<String>>(13)?
                    .and_then(|t| serde_json::from_str(&t).ok()),
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Forgets log entries started before `before` (the log keeps 24 hours and a margin).
    pub fn prune_query_log(&self, before: DateTime<Utc>) -> Result<usize> {
        Ok(self
            .conn()
            .execute("DELETE FROM query_log WHERE started_at < ?1", [ts(before)])?)
    }
}
