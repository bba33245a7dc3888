//! The task registry: every query the endpoint runs, blocking or not, by id, so its status
//! can be read and it can be cancelled. A finished task stays readable for `task_ttl`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::{QueryError, QueryResponse, QueryService, QueryState, QueryStatus};
use crate::model::TeamId;

/// The tasks, by query id.
pub(super) type Tasks = Arc<Mutex<HashMap<String, Task>>>;

pub(super) enum TaskState {
    Running,
    Done(Box<QueryResponse>),
    Failed(String),
}

pub(super) struct Task {
    team: TeamId,
    state: TaskState,
    cancel: CancellationToken,
    started_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
    finished: Option<Instant>,
}

fn prune_tasks(tasks: &mut HashMap<String, Task>, ttl: Duration) {
    tasks.retain(|_, t| t.finished.is_none_or(|f| f.elapsed() < ttl));
}

impl QueryService {
    /// Registers query `query_id` of `team` as running since `started_at`, cancelled by
    /// `cancel`. Refused while a query with the same id runs.
    pub(super) fn start_task(
        &self,
        query_id: &str,
        team: TeamId,
        cancel: CancellationToken,
        started_at: DateTime<Utc>,
    ) -> Result<(), QueryError> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        prune_tasks(&mut tasks, self.cfg.task_ttl);
        if let Some(t) = tasks.get(query_id)
            && matches!(t.state, TaskState::Running)
        {
            return Err(QueryError::Invalid(format!(
                "a query with id {query_id} is already running"
            )));
        }
        tasks.insert(
            query_id.to_string(),
            Task {
                team,
                state: TaskState::Running,
                cancel,
                started_at,
                ended_at: None,
                finished: None,
            },
        );
        Ok(())
    }

    /// Records how query `query_id` ended.
    pub(super) fn end_task(&self, query_id: &str, state: TaskState, ended_at: DateTime<Utc>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tasks.get_mut(query_id) {
            t.state = state;
            t.ended_at = Some(ended_at);
            t.finished = Some(Instant::now());
        }
    }

    /// `GET /query/{id}/`: where the query is; once done, with its full response, and if it
    /// failed, why.
    pub fn status(&self, team: TeamId, query_id: &str) -> Result<QueryStatus, QueryError> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        prune_tasks(&mut tasks, self.cfg.task_ttl);
        let t = tasks
            .get(query_id)
            .filter(|t| t.team == team)
            .ok_or_else(|| QueryError::NotFound(format!("No query with id {query_id}")))?;
        let (state, results) = match &t.state {
            TaskState::Running => (QueryState::Running, None),
            TaskState::Done(resp) => (QueryState::Complete, Some(resp.clone())),
            TaskState::Failed(msg) => (QueryState::Failed(msg.clone()), None),
        };
        Ok(QueryStatus {
            id: query_id.to_string(),
            team,
            query_async: true,
            state,
            started_at: Some(t.started_at),
            ended_at: t.ended_at,
            results,
        })
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
}
