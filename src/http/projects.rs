//! `/api/projects/`: list, get, create, and change a project (name, time zone, remote config).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::{App, Caller, page_links, wire};
use crate::error::ApiError;

#[derive(Debug, Deserialize)]
pub(super) struct Page {
    limit: Option<String>,
    offset: Option<String>,
}

/// Parses `limit`/`offset` with PostHog's defaults (100, 0); junk is a 400 naming it.
pub(super) fn page(p: &Page, max_limit: usize) -> Result<(usize, usize), ApiError> {
    super::limit_offset(p.limit.as_deref(), p.offset.as_deref(), max_limit)
}

pub(super) async fn list(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = page(&q, 1000)?;
    let visible = app.engine.projects(&caller.grant)?;
    let count = visible.len();
    let shown: Vec<_> = visible.into_iter().skip(offset).take(limit).collect();
    let (next, previous) = page_links(&headers, "/api/projects/", &[], limit, offset, count);
    Ok(Json(wire::projects::page(count, next, previous, &shown)))
}

/// A project with its remote-config settings.
pub(super) async fn get(State(app): State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let p = caller.project()?;
    let s = app.engine.project_settings(p.id)?;
    Ok(Json(wire::projects::with_settings(p, &s)))
}

/// `/api/projects/{id}/rotate_secret_token/`: a new project secret key (`phs_…`), shown in
/// `secret_api_token` this once (it is stored hashed); the old one stops working.
pub(super) async fn rotate_secret(
    State(app): State<App>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let p = caller.project()?;
    let secret = app.engine.rotate_project_secret(p.id)?;
    let s = app.engine.project_settings(p.id)?;
    let mut v = wire::projects::with_settings(p, &s);
    v["secret_api_token"] = Value::String(secret);
    Ok(Json(v))
}

/// `PATCH /api/projects/{id}/`: name, time zone and remote-config settings.
pub(super) async fn patch(
    State(app): State<App>,
    caller: Caller,
    body: Result<Json<serde_json::Map<String, Value>>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    let (p, s) = app.engine.update_project(caller.team()?, &body)?;
    Ok(Json(wire::projects::with_settings(&p, &s)))
}

#[derive(Debug, Deserialize)]
pub(super) struct NewProject {
    name: Option<String>,
    timezone: Option<String>,
}

pub(super) async fn create(
    State(app): State<App>,
    caller: Caller,
    body: Result<Json<NewProject>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    let p = app.engine.create_project(
        &caller.grant,
        body.name.as_deref(),
        body.timezone.as_deref(),
    )?;
    Ok((StatusCode::CREATED, Json(wire::projects::project(&p))))
}
