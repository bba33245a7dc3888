//! `/api/projects/{project_id}/query/…`: run, poll, cancel, log, upgrade, async check,
//! draft SQL. Decode, one engine call, encode: the work is the engine's (`api/query.rs`),
//! PostHog's JSON is [`wire::query`].

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hedgerow_engine::query::{QueryBody, QueryOutcome, QueryState, RequestError};
use serde::Deserialize;
use serde_json::Value;

use super::wire;
use super::{App, Caller};
use crate::error::ApiError;

fn outcome(o: QueryOutcome) -> Response {
    match o {
        QueryOutcome::Done(r) => (StatusCode::OK, Json(wire::query::response(r))).into_response(),
        QueryOutcome::Running(r) => {
            (StatusCode::ACCEPTED, Json(wire::query::response(r))).into_response()
        }
        // PostHog's error body, with the query's status as an async poll would show it.
        QueryOutcome::Failed { error, status } => ApiError::from(error)
            .with_field("query_status", wire::query::status(*status))
            .into_response(),
    }
}

pub(super) async fn run(
    State(app): State<App>,
    caller: Caller,
    body: Result<Json<QueryBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    let project = caller.project()?;
    let req = body.into_request().map_err(|e| {
        let code = match e {
            RequestError::Required(_) => "required",
            _ => "invalid_input",
        };
        let err = ApiError::invalid(code, e.detail());
        match e.attr() {
            Some(attr) => err.with_attr(attr),
            None => err,
        }
    })?;
    Ok(outcome(app.engine.run_query(project, req).await?))
}

pub(super) async fn status(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let st = app.engine.query_status(caller.team()?, &id)?;
    // A failed query is a 400 with its status, as PostHog answers.
    let code = match st.state {
        QueryState::Running => StatusCode::ACCEPTED,
        QueryState::Complete => StatusCode::OK,
        QueryState::Failed(_) => StatusCode::BAD_REQUEST,
    };
    Ok((code, Json(wire::query::status_body(st))).into_response())
}

pub(super) async fn cancel(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    app.engine.cancel_query(caller.team()?, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn log(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let e = app.engine.query_log_entry(caller.team()?, &id)?;
    Ok(Json(
        wire::query::log_entry(&e).map_err(ApiError::internal)?,
    ))
}

/// Whether the caller may run async queries: any key that may query may, so this answers
/// 200 with no body (and the auth layer answers 401/403 otherwise).
pub(super) async fn check_auth_for_async(caller: Caller) -> Result<StatusCode, ApiError> {
    caller.team()?;
    Ok(StatusCode::OK)
}

#[derive(Debug, Deserialize)]
pub(super) struct Draft {
    prompt: Option<String>,
}

pub(super) async fn draft_sql(
    State(app): State<App>,
    caller: Caller,
    Query(q): Query<Draft>,
) -> Result<Json<Value>, ApiError> {
    let project = caller.project()?;
    // The spec shows no required parameter: without a prompt the draft is the project's
    // most frequent event per day.
    let prompt = q.prompt.unwrap_or_default();
    let sql = app.engine.draft_sql(project, &prompt).await?;
    Ok(Json(wire::query::draft_sql(sql)))
}

#[derive(Debug, Deserialize)]
pub(super) struct UpgradeBody {
    query: Option<Value>,
}

pub(super) async fn upgrade(
    State(app): State<App>,
    caller: Caller,
    body: Result<Json<UpgradeBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    caller.team()?;
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    let q = body
        .query
        .ok_or_else(|| ApiError::invalid("required", "query is required").with_attr("query"))?;
    let upgraded = app.engine.upgrade_query(q)?;
    Ok(Json(wire::query::upgraded(upgraded)))
}
