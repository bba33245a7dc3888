//! `/api/projects/{project_id}/persons/…`: spec §4.1 endpoints 1–13.
//!
//! Each handler decodes the request, calls one persons operation of the engine
//! (`engine/src/api/persons.rs`, which waits for the store before reading, sends changes
//! through the WAL and keeps query caches honest) and encodes the answer in PostHog's
//! shapes (`wire::persons`), as JSON or, with `format=csv`, as CSV.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hedgerow_engine::error::ErrorKind;
use hedgerow_engine::model::DistinctId;
use hedgerow_engine::persons::PersonKey;
use hedgerow_engine::persons::{PersonFilter, PropertyFilter};
use serde_json::Value;

use super::wire::persons as wire;
use super::{App, Caller, limit_offset, page_links};
use crate::error::ApiError;

/// Most ids one bulk_delete may name, per list (spec §8).
pub const MAX_BULK_IDS: usize = 1000;
/// Largest page of the persons list.
const MAX_LIMIT: usize = 1000;

type Params = Vec<(String, String)>;

fn param<'a>(q: &'a Params, name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[derive(Clone, Copy)]
enum Format {
    Json,
    Csv,
}

fn format(q: &Params) -> Result<Format, ApiError> {
    match param(q, "format") {
        None | Some("json") | Some("") => Ok(Format::Json),
        Some("csv") => Ok(Format::Csv),
        Some(other) => Err(ApiError::invalid(
            "invalid_input",
            format!("format must be json or csv, not '{other}'"),
        )
        .with_attr("format")),
    }
}

/// A JSON body, or the CSV of `rows` when `format=csv`.
fn respond(format: Format, body: Value, rows: impl FnOnce(&Value) -> Vec<Value>) -> Response {
    match format {
        Format::Csv => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            wire::to_csv(&rows(&body)),
        )
            .into_response(),
        Format::Json => Json(body).into_response(),
    }
}

/// A list envelope, or the CSV of its results.
fn respond_page(format: Format, body: Value) -> Response {
    respond(format, body, |b| {
        b["results"].as_array().cloned().unwrap_or_default()
    })
}

fn empty_ok() -> Response {
    StatusCode::OK.into_response()
}

/// `{id}`: an integer person id or a person uuid.
fn person_key(raw: &str) -> Result<PersonKey, ApiError> {
    PersonKey::parse(raw).ok_or_else(|| {
        ApiError::invalid(
            "invalid_input",
            format!("person id must be an integer or a UUID, not '{raw}'"),
        )
        .with_attr("id")
    })
}

fn body_json(body: &Bytes) -> Result<Option<Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| ApiError::invalid("parse_error", format!("the body is not JSON: {e}")))
}

fn parse_bool(q: &Params, body: Option<&Value>, name: &str) -> Result<bool, ApiError> {
    if let Some(v) = body.and_then(|b| b.get(name)) {
        return match v {
            Value::Bool(b) => Ok(*b),
            Value::String(s) => parse_bool_text(s, name),
            Value::Null => Ok(false),
            _ => Err(
                ApiError::invalid("invalid_input", format!("{name} must be true or false"))
                    .with_attr(name),
            ),
        };
    }
    match param(q, name) {
        None => Ok(false),
        Some(s) => parse_bool_text(s, name),
    }
}

fn parse_bool_text(s: &str, name: &str) -> Result<bool, ApiError> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" | "" => Ok(false),
        _ => Err(ApiError::invalid(
            "invalid_input",
            format!("{name} must be true or false, not '{s}'"),
        )
        .with_attr(name)),
    }
}

// ---------------------------------------------------------------------------------------
// 1. list

pub async fn list(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let properties: Vec<PropertyFilter> = match param(&q, "properties") {
        None | Some("") => Vec::new(),
        Some(s) => serde_json::from_str(s).map_err(|e| {
            ApiError::invalid(
                "invalid_input",
                format!("properties must be a JSON array of {{key, value, operator, type}}: {e}"),
            )
            .with_attr("properties")
        })?,
    };
    let filter = PersonFilter {
        distinct_id: param(&q, "distinct_id")
            .filter(|s| !s.is_empty())
            .map(DistinctId::from),
        email: param(&q, "email")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        search: param(&q, "search")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        properties,
    };
    let page = app
        .engine
        .list_persons(team, &filter, limit, offset)
        .await?;
    // The path as addressed: `/api/environments/…` pages stay there.
    let path = uri.path();
    let (next, previous) = page_links(&headers, path, &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::person).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}

// 2. retrieve, 3. PATCH, 4. DELETE

pub async fn get(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let format = format(&q)?;
    let p = app.engine.person(team, person_key(&id)?).await?;
    Ok(respond(format, wire::person(&p), |b| vec![b.clone()]))
}

pub async fn patch(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let format = format(&q)?;
    let body = body_json(&body)?.unwrap_or(Value::Null);
    let props = match body.get("properties") {
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(
                ApiError::invalid("invalid_input", "properties must be an object")
                    .with_attr("properties"),
            );
        }
        None => {
            return Err(ApiError::invalid(
                "invalid_input",
                "send {\"properties\": {...}}: the properties to set on the person",
            )
            .with_attr("properties"));
        }
    };
    let key = person_key(&id)?;
    let p = app
        .engine
        .update_person(team, key, props, &caller.grant.label)
        .await?;
    Ok(respond(format, wire::person(&p), |b| vec![b.clone()]))
}

pub async fn delete(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let delete_events = parse_bool(&q, None, "delete_events")?;
    let key = person_key(&id)?;
    app.engine
        .delete_person(team, key, delete_events, &caller.grant.label)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// 5. and 12. activity

pub async fn activity(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let key = person_key(&id)?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let page = app.engine.person_activity(team, key, limit, offset).await?;
    // The path as addressed: `/api/environments/…` pages stay there.
    let path = uri.path();
    let (next, previous) = page_links(&headers, path, &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::activity).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}

pub async fn project_activity(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let page = app.engine.persons_activity(team, limit, offset).await?;
    // The path as addressed: `/api/environments/…` pages stay there.
    let path = uri.path();
    let (next, previous) = page_links(&headers, path, &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::activity).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}

// 6. delete_events, 8. delete_recordings, 10. split

pub async fn delete_events(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let key = person_key(&id)?;
    app.engine
        .queue_event_deletion(team, key, &caller.grant.label)
        .await?;
    Ok(empty_ok())
}

pub async fn delete_recordings(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let key = person_key(&id)?;
    app.engine
        .queue_recording_deletion(team, key, &caller.grant.label)
        .await?;
    Ok(empty_ok())
}

pub async fn split(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let key = person_key(&id)?;
    app.engine
        .split_person(team, key, &caller.grant.label)
        .await?;
    Ok(empty_ok())
}

// 7. delete_property, 11. update_property

fn text_arg(q: &Params, body: Option<&Value>, name: &str) -> Option<Value> {
    body.and_then(|b| b.get(name))
        .filter(|v| !v.is_null())
        .cloned()
        .or_else(|| param(q, name).map(|s| Value::String(s.to_owned())))
}

/// A non-empty text argument, from the body or the query string.
fn required_key(
    q: &Params,
    body: Option<&Value>,
    name: &str,
    what: &str,
) -> Result<String, ApiError> {
    match text_arg(q, body, name) {
        Some(Value::String(k)) if !k.is_empty() => Ok(k),
        _ => Err(ApiError::invalid(
            "invalid_input",
            format!("name {what} with {name} (query parameter or body field)"),
        )
        .with_attr(name)),
    }
}

pub async fn delete_property(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let body = body_json(&body)?;
    let name = required_key(&q, body.as_ref(), "$unset", "the property to delete")?;
    let key = person_key(&id)?;
    app.engine
        .delete_person_property(team, key, name, &caller.grant.label)
        .await?;
    Ok(empty_ok())
}

pub async fn update_property(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let body = body_json(&body)?;
    let name = required_key(&q, body.as_ref(), "key", "the property")?;
    let Some(value) = text_arg(&q, body.as_ref(), "value") else {
        return Err(ApiError::invalid(
            "invalid_input",
            "give the property's new value with value (query parameter or body field)",
        )
        .with_attr("value"));
    };
    let key = person_key(&id)?;
    app.engine
        .set_person_property(team, key, name, value, &caller.grant.label)
        .await?;
    Ok(empty_ok())
}

// 9. properties_timeline

pub async fn properties_timeline(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    let format = format(&q)?;
    let key = person_key(&id)?;
    let timeline = app.engine.person_properties_timeline(team, key).await?;
    Ok(respond(format, wire::properties_timeline(&timeline), |b| {
        b["points"].as_array().cloned().unwrap_or_default()
    }))
}

// 13. bulk_delete

fn id_list(q: &Params, body: Option<&Value>, name: &str) -> Result<Vec<Value>, ApiError> {
    let bad = || {
        ApiError::invalid(
            "invalid_input",
            format!("{name} must be a list (a JSON array, or repeated / comma-separated query parameters)"),
        )
        .with_attr(name)
    };
    if let Some(v) = body.and_then(|b| b.get(name)) {
        return match v {
            Value::Array(a) => Ok(a.clone()),
            Value::Null => Ok(Vec::new()),
            _ => Err(bad()),
        };
    }
    let mut out = Vec::new();
    for (_, v) in q
        .iter()
        .filter(|(k, _)| k == name || k == &format!("{name}[]"))
    {
        let v = v.trim();
        if v.starts_with('[') {
            match serde_json::from_str::<Value>(v) {
                Ok(Value::Array(a)) => out.extend(a),
                _ => return Err(bad()),
            }
        } else {
            out.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_owned())),
            );
        }
    }
    Ok(out)
}

/// An element of bulk_delete's `ids`: an integer or a uuid, as a JSON string or number.
fn bulk_key(v: &Value) -> Result<PersonKey, ApiError> {
    let raw = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => {
            return Err(ApiError::invalid(
                "invalid_input",
                format!("ids must be integers or UUIDs, not {v}"),
            )
            .with_attr("ids"));
        }
    };
    person_key(&raw).map_err(|e| e.with_attr("ids"))
}

pub async fn bulk_delete(
    State(app): State<App>,
    caller: Caller,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    let body = body_json(&body)?;
    let ids_raw = id_list(&q, body.as_ref(), "ids")?;
    let dids_raw = id_list(&q, body.as_ref(), "distinct_ids")?;
    for (name, n) in [("ids", ids_raw.len()), ("distinct_ids", dids_raw.len())] {
        if n > MAX_BULK_IDS {
            return Err(ApiError::invalid(
                "too_many_ids",
                format!("{name} holds {n} entries; bulk_delete takes at most {MAX_BULK_IDS} ids and at most {MAX_BULK_IDS} distinct_ids per call"),
            )
            .with_attr(name));
        }
    }
    if ids_raw.is_empty() && dids_raw.is_empty() {
        return Err(ApiError::invalid(
            "invalid_input",
            "give ids (person ids or uuids) or distinct_ids to delete",
        ));
    }
    let delete_events = parse_bool(&q, body.as_ref(), "delete_events")?;
    let keys = ids_raw
        .iter()
        .map(bulk_key)
        .collect::<Result<Vec<_>, _>>()?;
    let distinct_ids: Vec<DistinctId> = dids_raw
        .iter()
        .map(|v| match v {
            Value::String(s) => DistinctId::from(s.as_str()),
            other => DistinctId::from(other.to_string()),
        })
        .collect();
    app.engine
        .delete_persons(
            team,
            &keys,
            distinct_ids,
            delete_events,
            &caller.grant.label,
        )
        .await?;
    Ok(empty_ok())
}

/// `POST /api/deletion_tasks/run/` (hedgerow's own): runs every queued deletion task now, as
/// `hedgerow tasks run --url` does. It touches every project, so the key must see them all.
pub async fn run_deletion_tasks(
    State(app): State<App>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    if caller.grant.projects.is_some() {
        return Err(ApiError::new(
            ErrorKind::Forbidden,
            "permission_denied",
            "running deletion tasks needs a key for all projects",
        ));
    }
    let run = app.engine.run_deletion_tasks().await?;
    Ok(Json(serde_json::to_value(run).unwrap_or_default()))
}

// 19. lifecycle

/// `GET /persons/lifecycle/`: the persons of one lifecycle status (`lifecycle_type`) on one
/// date (`target_date`), in the persons list envelope. The lifecycle is a `LifecycleQuery`
/// in `query` (JSON), or PostHog's older parameters: `events` (`[{"id": "$pageview"}]`),
/// `date_from`, `date_to`, `interval`, `properties`.
pub async fn lifecycle(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let project = caller.project()?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let json_param = |name: &'static str| -> Result<Option<Value>, ApiError> {
        param(&q, name)
            .filter(|s| !s.is_empty())
            .map(|s| {
                serde_json::from_str::<Value>(s).map_err(|e| {
                    ApiError::invalid("invalid_input", format!("{name} is not JSON: {e}"))
                        .with_attr(name)
                })
            })
            .transpose()
    };
    let node = match json_param("query")? {
        Some(n) => n,
        None => {
            let event = match json_param("events")? {
                Some(Value::Array(e)) => e
                    .first()
                    .and_then(|x| x.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                Some(other) => {
                    return Err(ApiError::invalid(
                        "invalid_input",
                        format!("events must be a list of {{\"id\": <event>}}, got {other}"),
                    )
                    .with_attr("events"));
                }
                None => None,
            };
            let mut range = serde_json::Map::new();
            for k in ["date_from", "date_to"] {
                if let Some(v) = param(&q, k).filter(|s| !s.is_empty()) {
                    range.insert(k.into(), Value::String(v.into()));
                }
            }
            serde_json::json!({
                "kind": "LifecycleQuery",
                "series": [{"kind": "EventsNode", "event": event}],
                "interval": param(&q, "interval").unwrap_or("day"),
                "dateRange": range,
                "properties": json_param("properties")?,
            })
        }
    };
    let required = |name: &'static str| {
        param(&q, name).filter(|s| !s.is_empty()).ok_or_else(|| {
            ApiError::invalid("required", format!("{name} is required")).with_attr(name)
        })
    };
    let target = required("target_date")?;
    let status = required("lifecycle_type")?;
    let page = app
        .engine
        .lifecycle_persons(project, &node, target, status, limit, offset)
        .await?;
    let (next, previous) = page_links(&headers, uri.path(), &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::person).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}

// 15, 16. funnel

/// A persons endpoint's JSON body (empty: no fields).
fn body_fields(body: &Bytes) -> Result<serde_json::Map<String, Value>, ApiError> {
    match body.is_empty() {
        true => Ok(serde_json::Map::new()),
        false => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(ApiError::invalid(
                "invalid_input",
                "the body must be a JSON object",
            )),
        },
    }
}

/// A field of the body, else of the query string (JSON where it parses, else text).
fn field(doc: &serde_json::Map<String, Value>, q: &Params, name: &str) -> Option<Value> {
    doc.get(name).filter(|v| !v.is_null()).cloned().or_else(|| {
        param(q, name)
            .filter(|s| !s.is_empty())
            .map(|s| serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned())))
    })
}

/// A funnel as `/persons/funnel/` takes it: a `FunnelsQuery` in `query`, or PostHog's older
/// filter (`events` in order, `date_from`, `date_to`, `funnel_window_days` or
/// `funnel_window_interval` with `funnel_window_interval_unit`, `funnel_order_type`,
/// `exclusions` with `funnel_from_step`/`funnel_to_step`, `breakdown`, `breakdown_type`,
/// `breakdown_attribution_type`, `properties`).
fn funnel_node(get: &dyn Fn(&str) -> Option<Value>) -> Result<Value, ApiError> {
    if let Some(q) = get("query") {
        return Ok(q);
    }
    let events = match get("events") {
        Some(Value::Array(e)) if e.len() >= 2 => e,
        _ => {
            return Err(ApiError::invalid(
                "required",
                "a funnel needs query (a FunnelsQuery) or events (2 or more steps)",
            )
            .with_attr("events"));
        }
    };
    let mut events = events;
    events.sort_by_key(|e| e.get("order").and_then(Value::as_i64).unwrap_or(0));
    let series: Vec<Value> = events
        .iter()
        .map(|e| {
            serde_json::json!({"kind": "EventsNode", "event": e.get("id").cloned().unwrap_or(Value::Null),
                               "properties": e.get("properties").cloned().unwrap_or(Value::Null)})
        })
        .collect();
    let mut range = serde_json::Map::new();
    for k in ["date_from", "date_to"] {
        if let Some(v) = get(k) {
            range.insert(k.into(), v);
        }
    }
    let exclusions: Vec<Value> = match get("exclusions") {
        Some(Value::Array(x)) => x
            .iter()
            .map(|e| {
                serde_json::json!({"kind": "EventsNode", "event": e.get("id").cloned().unwrap_or(Value::Null),
                                   "properties": e.get("properties").cloned().unwrap_or(Value::Null),
                                   "funnelFromStep": e.get("funnel_from_step").cloned().unwrap_or(Value::Null),
                                   "funnelToStep": e.get("funnel_to_step").cloned().unwrap_or(Value::Null)})
            })
            .collect(),
        _ => Vec::new(),
    };
    let (window, unit) = match get("funnel_window_interval") {
        Some(n) => (
            Some(n),
            get("funnel_window_interval_unit").unwrap_or(Value::from("day")),
        ),
        None => (get("funnel_window_days"), Value::from("day")),
    };
    Ok(serde_json::json!({
        "kind": "FunnelsQuery",
        "series": series,
        "dateRange": range,
        "properties": get("properties"),
        "breakdownFilter": {"breakdown": get("breakdown"), "breakdown_type": get("breakdown_type")},
        "funnelsFilter": {"funnelWindowInterval": window, "funnelWindowIntervalUnit": unit,
                          "funnelOrderType": get("funnel_order_type"), "exclusions": exclusions,
                          "breakdownAttributionType": get("breakdown_attribution_type")},
    }))
}

/// `GET|POST /persons/funnel/?funnel_step=n`: the persons who reached step n (n > 0) or
/// dropped off before step |n| (n < 0), in the persons list envelope; with a breakdown,
/// `funnel_step_breakdown` picks the value's persons.
pub async fn funnel(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let project = caller.project()?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let doc = body_fields(&body)?;
    let get = |name: &str| field(&doc, &q, name);
    let node = funnel_node(&get)?;
    let step = match get("funnel_step") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::invalid(
            "required",
            "funnel_step is required: n reached step n, -n dropped off before it",
        )
        .with_attr("funnel_step")
    })?;
    let breakdown = get("funnel_step_breakdown");
    let page = app
        .engine
        .funnel_persons(project, &node, step, breakdown, limit, offset)
        .await?;
    let (next, previous) = page_links(&headers, uri.path(), &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::person).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}

// 17, 18. funnel/correlation

/// `GET|POST /persons/funnel/correlation/`: the persons behind one funnel correlation
/// result, in the persons list envelope. The correlation is a `FunnelCorrelationQuery` in
/// `query` (or a `FunnelsQuery` there, or PostHog's older funnel filter, with
/// `funnel_correlation_type`, `funnel_correlation_names`, `funnel_correlation_exclude_names`,
/// `funnel_correlation_exclude_event_names`, `funnel_correlation_event_names` and
/// `funnel_correlation_event_exclude_property_names`); the result is
/// `funnel_correlation_person_entity` (`{"id": event}`, with one property filter for an
/// event's property) or `funnel_correlation_property_values` (`[{"key", "value"}]`), and
/// `funnel_correlation_person_converted` (true or false, in any case) keeps the persons who
/// finished the funnel or those who did not.
pub async fn funnel_correlation(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let project = caller.project()?;
    let format = format(&q)?;
    let (limit, offset) = limit_offset(param(&q, "limit"), param(&q, "offset"), MAX_LIMIT)?;
    let doc = body_fields(&body)?;
    let get = |name: &str| field(&doc, &q, name);
    let node = match get("query") {
        Some(n) if n.get("kind").and_then(Value::as_str) == Some("FunnelCorrelationQuery") => n,
        _ => {
            let funnel = funnel_node(&get)?;
            let mut c = serde_json::json!({"kind": "FunnelCorrelationQuery",
                "source": {"kind": "FunnelsActorsQuery", "source": funnel}});
            for (from, to) in [
                ("funnel_correlation_type", "funnelCorrelationType"),
                ("funnel_correlation_names", "funnelCorrelationNames"),
                (
                    "funnel_correlation_exclude_names",
                    "funnelCorrelationExcludeNames",
                ),
                (
                    "funnel_correlation_exclude_event_names",
                    "funnelCorrelationExcludeEventNames",
                ),
                (
                    "funnel_correlation_event_names",
                    "funnelCorrelationEventNames",
                ),
                (
                    "funnel_correlation_event_exclude_property_names",
                    "funnelCorrelationEventExcludePropertyNames",
                ),
            ] {
                if let Some(v) = get(from) {
                    c[to] = v;
                }
            }
            c
        }
    };
    let mut point = serde_json::Map::new();
    if let Some(e) = get("funnel_correlation_person_entity") {
        point.insert("funnelCorrelationPersonEntity".into(), e);
    }
    if let Some(v) = get("funnel_correlation_property_values") {
        point.insert("funnelCorrelationPropertyValues".into(), v);
    }
    match get("funnel_correlation_person_converted") {
        None => {}
        Some(Value::Bool(b)) => {
            point.insert("funnelCorrelationPersonConverted".into(), Value::Bool(b));
        }
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => {
            point.insert("funnelCorrelationPersonConverted".into(), Value::Bool(true));
        }
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => {
            point.insert(
                "funnelCorrelationPersonConverted".into(),
                Value::Bool(false),
            );
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_input",
                "funnel_correlation_person_converted must be true or false",
            )
            .with_attr("funnel_correlation_person_converted"));
        }
    }
    let page = app
        .engine
        .correlation_persons(project, &node, &point, limit, offset)
        .await?;
    let (next, previous) = page_links(&headers, uri.path(), &q, limit, offset, page.count as usize);
    let results = page.results.iter().map(wire::person).collect();
    Ok(respond_page(
        format,
        wire::page(page.count, next, previous, results),
    ))
}
