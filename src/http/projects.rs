//! `/api/projects/`: list, get, create.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use hedgerow_engine::meta::Project;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller, page_links};
use crate::error::ApiError;

fn project_json(p: &Project) -> Value {
    json!({
        "id": p.id.0,
        "uuid": p.uuid,
        "name": p.name,
        "api_token": p.api_token,
        "timezone": p.timezone,
        "created_at": p.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    })
}

#[derive(Debug, Deserialize)]
pub struct Page {
    limit: Option<String>,
    offset: Option<String>,
}

/// Parses `limit`/`offset` with PostHog's defaults (100, 0); junk is a 400 naming it.
pub fn page(p: &Page, max_limit: usize) -> Result<(usize, usize), ApiError> {
    super::limit_offset(p.limit.as_deref(), p.offset.as_deref(), max_limit)
}

pub async fn list(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = page(&q, 1000)?;
    let visible: Vec<Project> = app
        .engine
        .meta()
        .projects()?
        .into_iter()
        .filter(|p| caller.grant.sees(p.id))
        .collect();
    let count = visible.len();
    let results: Vec<Value> = visible
        .iter()
        .skip(offset)
        .take(limit)
        .map(project_json)
        .collect();
    let (next, previous) = page_links(&headers, "/api/projects/", &[], limit, offset, count);
    Ok(Json(
        json!({"count": count, "next": next, "previous": previous, "results": results}),
    ))
}

pub async fn get(State(app): State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let p = app
        .engine
        .meta()
        .project(caller.team()?)?
        .ok_or_else(|| ApiError::not_found("no such project"))?;
    Ok(Json(project_json(&p)))
}

#[derive(Debug, Deserialize)]
pub struct NewProject {
    name: Option<String>,
    timezone: Option<String>,
}

pub async fn create(
    State(app): State<App>,
    caller: Caller,
    body: Result<Json<NewProject>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    if caller.grant.projects.is_some() {
        return Err(ApiError::new(
            hedgerow_engine::error::ErrorKind::Forbidden,
            "permission_denied",
            "a key limited to some projects cannot create projects",
        ));
    }
    let name = body
        .name
        .ok_or_else(|| ApiError::invalid("required", "name is required").with_attr("name"))?;
    let tz = body.timezone.unwrap_or_else(|| "UTC".into());
    let p = app
        .engine
        .meta()
        .create_project(&name, &tz, app.engine.clock().now())?;
    Ok((StatusCode::CREATED, Json(project_json(&p))))
}
