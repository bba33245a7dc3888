//! Feature flags over HTTP: the REST API (`/api/projects/{id}/feature_flags/`), `/flags`
//! and `/decide` as every PostHog SDK calls them, the definitions server SDKs poll for
//! local evaluation, and posthog-js's remote config (`/array/<token>/config[.js]`).

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hedgerow_engine::error::ErrorKind;
use hedgerow_engine::flags::FeatureFlag;
use hedgerow_engine::model::TeamId;
use hedgerow_engine::{CaptureBody, FlagFields};
use serde::Deserialize;
use serde_json::Value;

use super::{App, Caller, page_links, wire};
use crate::error::ApiError;

// ---------------------------------------------------------------------------------------
// The REST API.

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    limit: Option<String>,
    offset: Option<String>,
    /// `true` or `false`: only active or only inactive flags.
    active: Option<String>,
    /// Part of the key or name, any case.
    search: Option<String>,
}

pub(super) async fn list(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = super::limit_offset(q.limit.as_deref(), q.offset.as_deref(), 1000)?;
    let team = caller.team()?;
    let active = match q.active.as_deref() {
        None | Some("") => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return Err(ApiError::invalid(
                "invalid_input",
                format!("active must be true or false, not '{other}'"),
            )
            .with_attr("active"));
        }
    };
    let search = q.search.as_deref().map(str::to_lowercase);
    let all = app.engine.flags(team)?;
    // Newest first, as PostHog lists them.
    let matching: Vec<&FeatureFlag> = all
        .iter()
        .rev()
        .filter(|f| active.is_none_or(|a| f.active == a))
        .filter(|f| {
            search.as_deref().is_none_or(|s| {
                f.key.to_lowercase().contains(s) || f.name.to_lowercase().contains(s)
            })
        })
        .collect();
    let count = matching.len();
    let shown: Vec<&FeatureFlag> = matching.into_iter().skip(offset).take(limit).collect();
    let path = format!("/api/projects/{}/feature_flags/", team.0);
    let mut extra = Vec::new();
    if let Some(a) = &q.active {
        extra.push(("active".to_owned(), a.clone()));
    }
    if let Some(s) = &q.search {
        extra.push(("search".to_owned(), s.clone()));
    }
    let (next, previous) = page_links(&headers, &path, &extra, limit, offset, count);
    Ok(Json(wire::flags::page(count, next, previous, &shown)))
}

/// A create or update body: PostHog's fields, each optional.
#[derive(Debug, Deserialize)]
pub(super) struct FlagBody {
    key: Option<String>,
    name: Option<String>,
    filters: Option<Value>,
    active: Option<bool>,
    deleted: Option<bool>,
    ensure_experience_continuity: Option<bool>,
    rollout_percentage: Option<f64>,
}

impl From<FlagBody> for FlagFields {
    fn from(b: FlagBody) -> Self {
        FlagFields {
            key: b.key,
            name: b.name,
            filters: b.filters,
            active: b.active,
            deleted: b.deleted,
            ensure_experience_continuity: b.ensure_experience_continuity,
            rollout_percentage: b.rollout_percentage,
        }
    }
}

type JsonBody = Result<Json<FlagBody>, axum::extract::rejection::JsonRejection>;

fn body_of(body: JsonBody) -> Result<FlagFields, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    Ok(body.into())
}

pub(super) async fn create(
    State(app): State<App>,
    caller: Caller,
    body: JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let f = app.engine.create_flag(caller.team()?, body_of(body)?)?;
    Ok((StatusCode::CREATED, Json(wire::flags::flag(&f))))
}

fn flag_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("no feature flag {raw}")))
}

pub(super) async fn get(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let f = app.engine.flag(caller.team()?, flag_id(&id)?)?;
    Ok(Json(wire::flags::flag(&f)))
}

pub(super) async fn update(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    body: JsonBody,
) -> Result<Json<Value>, ApiError> {
    let f = app
        .engine
        .update_flag(caller.team()?, flag_id(&id)?, body_of(body)?)?;
    Ok(Json(wire::flags::flag(&f)))
}

/// PostHog does not delete a flag with DELETE (405): a flag is deleted by
/// `PATCH {"deleted": true}`, which keeps its history.
pub(super) async fn delete() -> ApiError {
    ApiError::new(
        ErrorKind::MethodNotAllowed,
        "method_not_allowed",
        "Method \"DELETE\" not allowed. Delete a feature flag with PATCH {\"deleted\": true}.",
    )
}

// ---------------------------------------------------------------------------------------
// Local evaluation.

#[derive(Debug, Deserialize)]
pub(super) struct DefinitionsQuery {
    token: Option<String>,
}

/// The definitions of the project the `token` names (or, without one, the key's project),
/// which the key must see. An `ETag` lets the SDKs' 30-second polls end in a 304.
pub(super) async fn definitions(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<DefinitionsQuery>,
) -> Result<Response, ApiError> {
    let team = match (
        &caller.project,
        q.token.as_deref().filter(|t| !t.is_empty()),
    ) {
        (Some(p), _) => p.id,
        (None, Some(token)) => app.engine.project_of_token(token)?.id,
        (None, None) => caller
            .grant
            .projects
            .as_ref()
            .and_then(|p| p.first().copied())
            .unwrap_or(TeamId(1)),
    };
    if !caller.grant.sees(team) {
        return Err(ApiError::not_found(format!("no project {}", team.0)));
    }
    let flags = app.engine.flags(team)?;
    let groups = app.engine.group_type_mapping(team)?;
    let cohorts = app.engine.local_cohorts(team, &flags)?;
    let body = wire::flags::definitions(&flags, &groups, cohorts);
    let text = body.to_string();
    let etag = {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same definitions give the same tag, run after run.
        let mut h = std::hash::DefaultHasher::new();
        text.hash(&mut h);
        format!("W/\"{:016x}\"", h.finish())
    };
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let bare = |s: &str| {
                s.trim()
                    .trim_start_matches("W/")
                    .trim_matches('"')
                    .to_owned()
            };
            v.split(',').any(|one| bare(one) == bare(&etag))
        });
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], text).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, must-revalidate"),
    );
    Ok(resp)
}

// ---------------------------------------------------------------------------------------
// `/flags` and `/decide`.

#[derive(Debug, Default)]
struct FlagsQuery {
    version: Option<u32>,
    config: bool,
    compression: Option<String>,
    data: Option<String>,
}

fn parse_query(q: Option<&str>) -> FlagsQuery {
    let mut out = FlagsQuery::default();
    for (k, v) in url::form_urlencoded::parse(q.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "v" => out.version = v.parse().ok(),
            "config" => out.config = v == "true" || v == "1",
            "compression" => out.compression = Some(v.into_owned()),
            "data" => out.data = Some(v.into_owned()),
            _ => {}
        }
    }
    out
}

/// `/flags` and `/decide`: every active flag evaluated for the body's person. `/flags?v=2`
/// (and up) answers a record per flag, `/flags` and `/flags?v=1` the older map of values;
/// `/decide` answers as PostHog's did (the value map, a record per flag from `v=4`) with
/// the remote config, which `/flags?config=true` adds too.
pub(super) async fn evaluate(State(app): State<App>, req: Request) -> Result<Response, ApiError> {
    let decide = req.uri().path().starts_with("/decide");
    let (parts, body) = req.into_parts();
    let query = parse_query(parts.uri.query());
    let header_str = |name| super::capture::header_text(&parts.headers, name);
    let limit = app.max_body.min(hedgerow_engine::MAX_FLAGS_BODY);
    let bytes = super::capture::read_limited(body, limit, |limit| {
        ApiError::new(
            ErrorKind::TooLarge,
            "payload_too_large",
            format!("the request body is over the {limit}-byte limit of /flags"),
        )
    })
    .await?;
    let body = CaptureBody {
        body: bytes,
        content_type: header_str(header::CONTENT_TYPE),
        content_encoding: header_str(header::CONTENT_ENCODING),
        compression: query.compression.clone(),
        data_param: query.data.clone(),
        sent_at: None,
    };
    let request = hedgerow_engine::read_flags_body(&body)?;
    let project = app.engine.project_of_token(&request.token)?;
    let answers = app.engine.evaluate_flags(project.id, &request)?;
    let request_id = uuid::Uuid::new_v4().to_string();
    let detailed = match (decide, query.version) {
        (true, v) => v.unwrap_or(0) >= 4,
        (false, v) => v.unwrap_or(1) >= 2,
    };
    let mut out = if detailed {
        wire::flags::flags_v2(&answers, &request_id, chrono::Utc::now().timestamp_millis())
    } else {
        wire::flags::flags_v1(&answers, &request_id)
    };
    if decide || query.config {
        let config = app.engine.remote_config(&request.token)?;
        for (k, v) in wire::flags::remote_config(&config) {
            out.entry(k).or_insert(v);
        }
    }
    Ok(Json(Value::Object(out)).into_response())
}

// ---------------------------------------------------------------------------------------
// Remote config.

/// `/array/<token>/config`: the JSON.
pub(super) async fn config(
    State(app): State<App>,
    Path(token): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let c = app.engine.remote_config(&token)?;
    Ok(Json(Value::Object(wire::flags::remote_config(&c))))
}

/// `/array/<token>/config.js`: the script that registers it.
pub(super) async fn config_js(
    State(app): State<App>,
    Path(token): Path<String>,
) -> Result<Response, ApiError> {
    let c = app.engine.remote_config(&token)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/javascript; charset=utf-8",
        )],
        wire::flags::remote_config_js(&c),
    )
        .into_response())
}
