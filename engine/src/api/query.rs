//! Queries: the query API (run, status, cancel, log, draft SQL, upgrade) and HogQL runs.
//! See [the module docs](super).

use std::collections::HashMap;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Engine;
use crate::meta::{Project, QueryLogEntry};
use crate::model::TeamId;
use crate::query::{HogQLRun, Modifiers, QueryError, QueryOutcome, QueryRequest, QueryStatus};

impl Engine {
    fn query_project(&self, team: TeamId) -> Result<Project, QueryError> {
        self.project(team)?
            .ok_or_else(|| QueryError::NotFound(format!("no project {team}")))
    }

    /// `POST /query/`: answers one request for `project` (as the caller's key resolved
    /// it), from the cache or by running it (in the background for the async refresh
    /// modes).
    pub async fn run_query(
        &self,
        project: &Project,
        req: QueryRequest,
    ) -> Result<QueryOutcome, QueryError> {
        self.query.query(project, req).await
    }

    /// `GET /query/{id}/`: where a query of `team` is; once done, with its response.
    pub fn query_status(&self, team: TeamId, query_id: &str) -> Result<QueryStatus, QueryError> {
        self.query.status(team, query_id)
    }

    /// `DELETE /query/{id}/`: stops a running query of `team`.
    pub fn cancel_query(&self, team: TeamId, query_id: &str) -> Result<(), QueryError> {
        self.query.cancel(team, query_id)
    }

    /// `GET /query/{id}/log/`: the newest log entry of a query of `team`.
    pub fn query_log_entry(
        &self,
        team: TeamId,
        query_id: &str,
    ) -> Result<QueryLogEntry, QueryError> {
        self.query.log_entry(team, query_id)
    }

    /// `GET /query/draft_sql/`: a draft HogQL query for a plain-language prompt, from the
    /// project's own event names and property keys.
    pub async fn draft_sql(&self, project: &Project, prompt: &str) -> Result<String, QueryError> {
        self.query.draft_sql(project, prompt).await
    }

    /// `POST /query/upgrade/`: an older query node in its current form.
    pub fn upgrade_query(&self, query: Value) -> Result<Value, QueryError> {
        crate::query::upgrade::upgrade(query)
    }

    /// Runs one HogQL query of `team` on the query runtime, under its admission rules and
    /// time limit, without the endpoint's cache, tasks or log.
    pub async fn run_hogql(
        &self,
        team: TeamId,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let project = self.query_project(team)?;
        self.query
            .run_hogql(&project, text, values, modifiers, cancel)
            .await
    }

    /// `GET /persons/lifecycle/`: one page of the persons with `status` on `target` in a
    /// `LifecycleQuery` (a person merged away shows as the person it went into).
    #[allow(clippy::too_many_arguments)]
    pub async fn lifecycle_persons(
        &self,
        project: &Project,
        node: &Value,
        target: &str,
        status: &str,
        limit: usize,
        offset: usize,
    ) -> Result<crate::persons::Page<crate::persons::Person>, QueryError> {
        let ids = self
            .query
            .lifecycle_persons(project, node, target, status)
            .await?;
        self.persons_page(project.id, ids, limit, offset)
    }

    /// `GET|POST /persons/funnel/correlation/`: one page of the persons behind a funnel
    /// correlation result. `point` holds a `FunnelCorrelationActorsQuery`'s fields
    /// (`funnelCorrelationPersonEntity` or `funnelCorrelationPropertyValues`, and
    /// `funnelCorrelationPersonConverted` for the successes or failures alone).
    pub async fn correlation_persons(
        &self,
        project: &Project,
        node: &Value,
        point: &serde_json::Map<String, Value>,
        limit: usize,
        offset: usize,
    ) -> Result<crate::persons::Page<crate::persons::Person>, QueryError> {
        let ids = self.query.correlation_persons(project, node, point).await?;
        self.persons_page(project.id, ids, limit, offset)
    }

    /// `GET|POST /persons/funnel/`: one page of the persons who reached a funnel step
    /// (`step` n > 0) or dropped off before it (n < 0).
    pub async fn funnel_persons(
        &self,
        project: &Project,
        node: &Value,
        step: i64,
        breakdown: Option<Value>,
        limit: usize,
        offset: usize,
    ) -> Result<crate::persons::Page<crate::persons::Person>, QueryError> {
        let ids = self
            .query
            .funnel_persons(project, node, step, breakdown)
            .await?;
        self.persons_page(project.id, ids, limit, offset)
    }

    /// One page (newest person first) of the persons with these uuids; a uuid merged away
    /// answers as the person it went into, once.
    fn persons_page(
        &self,
        team: TeamId,
        ids: Vec<String>,
        limit: usize,
        offset: usize,
    ) -> Result<crate::persons::Page<crate::persons::Person>, QueryError> {
        let store = &self.person_store;
        let mut people = Vec::with_capacity(ids.len());
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            let Ok(uuid) = id.parse() else { continue };
            if let Some(row) = store
                .person_by_uuid(team, uuid)
                .map_err(QueryError::PersonStore)?
                && seen.insert(row.id)
            {
                people.push((row.id, row.created_at));
            }
        }
        // Newest first, as the persons list.
        people.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let count = people.len() as u64;
        let mut results = Vec::new();
        for (id, _) in people.into_iter().skip(offset).take(limit) {
            if let Some(p) = store
                .full_person(team, id)
                .map_err(QueryError::PersonStore)?
            {
                results.push(p);
            }
        }
        Ok(crate::persons::Page { results, count })
    }

    /// Runs a HogQL query of `team` and describes how it ran: the optimized logical plan
    /// and the physical plan with each operator's metrics (`hedgerow query --explain`).
    pub async fn explain_hogql(
        &self,
        team: TeamId,
        text: &str,
        runs: u32,
    ) -> Result<String, QueryError> {
        let project = self.query_project(team)?;
        self.query.explain_hogql(&project, text, runs).await
    }
}
