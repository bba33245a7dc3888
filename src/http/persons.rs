//! `/api/projects/{project_id}/persons/…`: spec §4.1 endpoints 1–13.
//!
//! Reads come from the person store once it has applied everything acknowledged so far.
//! Changes go through the ingest pipeline: PATCH and update_property capture a `$set`
//! event, delete_property a `$delete_person_property` event, and delete, split and the
//! deletion requests travel as WAL commands, so the API and capture can never disagree.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hedgerow_engine::error::ErrorKind;
use hedgerow_engine::ingest::TeamId;
use hedgerow_engine::persons::store::{Activity, PersonFilter, PropertyFilter};
use hedgerow_engine::persons::{Person, PersonCommand};
use serde_json::{Map, Value, json};

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

fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

pub fn person_json(p: &Person) -> Value {
    json!({
        "id": p.id,
        "uuid": p.uuid,
        "name": p.name(),
        "distinct_ids": p.distinct_ids,
        "properties": p.properties,
        "created_at": iso(p.created_at),
        "is_identified": p.is_identified,
    })
}

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

/// Flattens nested objects and arrays into `a.b` / `a.0` columns.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), x, out);
            }
        }
        Value::Null => {
            out.insert(prefix.to_owned(), String::new());
        }
        Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// Whether `s` is a plain decimal number (`-5`, `1.5e-3`): a spreadsheet reads it as that
/// number, never as a formula, so it keeps its sign unescaped.
fn is_number(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// One CSV cell. A cell that a spreadsheet would read as a formula (it starts with `=`,
/// `+`, `-`, `@`, a tab or a carriage return, and is not a plain number) gets a leading
/// `'`, as OWASP recommends against CSV injection: person properties come from public
/// capture, so `=HYPERLINK(…)` in an export is anyone's input. Then the usual quoting.
fn csv_cell(s: &str) -> String {
    let escaped;
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_number(s) {
        escaped = format!("'{s}");
        escaped.as_str()
    } else {
        s
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Rows as CSV: one column per flattened field, in first-seen order of a sorted header.
pub fn to_csv(rows: &[Value]) -> String {
    let flat: Vec<BTreeMap<String, String>> = rows
        .iter()
        .map(|r| {
            let mut m = BTreeMap::new();
            flatten("", r, &mut m);
            m
        })
        .collect();
    // A set beside the list: property names come from public capture, and a scan of the
    // header per key was quadratic in the number of columns.
    let mut header: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for r in &flat {
        for k in r.keys() {
            if seen.insert(k) {
                header.push(k.clone());
            }
        }
    }
    let mut out = header
        .iter()
        .map(|h| csv_cell(h))
        .collect::<Vec<_>>()
        .join(",");
    out.push_str("\r\n");
    for r in &flat {
        let line: Vec<String> = header
            .iter()
            .map(|h| csv_cell(r.get(h).map_or("", String::as_str)))
            .collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// A JSON body, or the CSV of `rows` when `format=csv`.
fn respond(q: &Params, body: Value, rows: impl FnOnce(&Value) -> Vec<Value>) -> Response {
    match format(q) {
        Ok(Format::Csv) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            to_csv(&rows(&body)),
        )
            .into_response(),
        Ok(Format::Json) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

fn empty_ok() -> Response {
    StatusCode::OK.into_response()
}

fn actor(caller: &Caller) -> String {
    format!("api:{}", caller.grant.label)
}

/// `{id}`: an integer person id or a person uuid.
fn find(app: &App, team: TeamId, raw: &str) -> Result<Person, ApiError> {
    let store = app.engine.persons();
    let id = if let Ok(n) = raw.parse::<i64>() {
        n
    } else if let Ok(u) = uuid::Uuid::parse_str(raw) {
        store
            .person_by_uuid(team, u)?
            .map(|p| p.id)
            .ok_or_else(|| ApiError::not_found(format!("no person with uuid {u}")))?
    } else {
        return Err(ApiError::invalid(
            "invalid_input",
            format!("person id must be an integer or a UUID, not '{raw}'"),
        )
        .with_attr("id"));
    };
    store
        .full_person(team, id)?
        .ok_or_else(|| ApiError::not_found(format!("no person {id}")))
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
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
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
            .map(str::to_owned),
        email: param(&q, "email")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        search: param(&q, "search")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        properties,
    };
    app.engine.persons_settled().await;
    let (persons, count) = app.engine.persons().list(team, &filter, limit, offset)?;
    let path = format!("/api/projects/{}/persons/", team.0);
    let (next, previous) = page_links(&headers, &path, &q, limit, offset, count as usize);
    let results: Vec<Value> = persons.iter().map(person_json).collect();
    let body = json!({"count": count, "next": next, "previous": previous, "results": results});
    Ok(respond(&q, body, |b| {
        b["results"].as_array().cloned().unwrap_or_default()
    }))
}

// 2. retrieve, 3. PATCH, 4. DELETE

pub async fn get(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    Ok(respond(&q, person_json(&p), |b| vec![b.clone()]))
}

pub async fn patch(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(&q)?;
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
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    set_properties(&app, &caller, &p, props).await?;
    let p = find(&app, team, &p.id.to_string())?;
    Ok(respond(&q, person_json(&p), |b| vec![b.clone()]))
}

async fn set_properties(
    app: &App,
    caller: &Caller,
    p: &Person,
    set: Map<String, Value>,
) -> Result<(), ApiError> {
    let did = p.distinct_ids.first().ok_or_else(|| {
        ApiError::new(
            ErrorKind::Conflict,
            "person_without_distinct_id",
            "this person has no distinct id to send the change as",
        )
    })?;
    let mut props = Map::new();
    props.insert("$set".into(), Value::Object(set));
    app.engine
        .person_event(p.team, did, "$set", props, &actor(caller))
        .await?;
    Ok(())
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
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    app.engine
        .person_command(
            team,
            PersonCommand::Delete {
                ids: vec![p.id],
                distinct_ids: Vec::new(),
                delete_events,
            },
            &actor(&caller),
        )
        .await?;
    app.engine.bump_query_epoch();
    Ok(StatusCode::NO_CONTENT.into_response())
}

// 5. and 12. activity

pub async fn activity(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    app.engine.persons_settled().await;
    // A deleted person's activity stays readable by its integer id.
    let person = match id.parse::<i64>() {
        Ok(n) => n,
        Err(_) => find(&app, team, &id)?.id,
    };
    activity_page(
        &app,
        team,
        Some(person),
        &headers,
        &q,
        &format!("/api/projects/{}/persons/{id}/activity/", team.0),
    )
}

pub async fn project_activity(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    app.engine.persons_settled().await;
    activity_page(
        &app,
        team,
        None,
        &headers,
        &q,
        &format!("/api/projects/{}/persons/activity/", team.0),
    )
}

fn activity_json(a: &Activity) -> Value {
    json!({
        "activity": a.activity,
        "scope": "Person",
        "item_id": a.person_id.to_string(),
        "person_uuid": a.person_uuid,
        "user": a.actor,
        "detail": a.detail,
        "created_at": iso(a.at),
    })
}

fn activity_page(
    app: &App,
    team: TeamId,
    person: Option<i64>,
    headers: &HeaderMap,
    q: &Params,
    path: &str,
) -> Result<Response, ApiError> {
    format(q)?;
    let (limit, offset) = limit_offset(param(q, "limit"), param(q, "offset"), MAX_LIMIT)?;
    let (rows, count) = app.engine.persons().activity(team, person, limit, offset)?;
    if let Some(p) = person
        && count == 0
        && app.engine.persons().full_person(team, p)?.is_none()
    {
        return Err(ApiError::not_found(format!("no person {p}")));
    }
    let (next, previous) = page_links(headers, path, q, limit, offset, count as usize);
    let results: Vec<Value> = rows.iter().map(activity_json).collect();
    let body = json!({"count": count, "next": next, "previous": previous, "results": results});
    Ok(respond(q, body, |b| {
        b["results"].as_array().cloned().unwrap_or_default()
    }))
}

// 6. delete_events, 8. delete_recordings, 10. split

async fn command_on(
    app: &App,
    caller: &Caller,
    id: &str,
    q: &Params,
    make: impl FnOnce(i64) -> PersonCommand,
) -> Result<Response, ApiError> {
    let team = caller.team()?;
    format(q)?;
    app.engine.persons_settled().await;
    let p = find(app, team, id)?;
    app.engine
        .person_command(team, make(p.id), &actor(caller))
        .await?;
    Ok(empty_ok())
}

pub async fn delete_events(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    command_on(&app, &caller, &id, &q, |id| PersonCommand::DeleteEvents {
        id,
    })
    .await
}

pub async fn delete_recordings(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    command_on(&app, &caller, &id, &q, |id| {
        PersonCommand::DeleteRecordings { id }
    })
    .await
}

pub async fn split(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let r = command_on(&app, &caller, &id, &q, |id| PersonCommand::Split { id }).await;
    app.engine.bump_query_epoch();
    r
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
    let key = required_key(&q, body.as_ref(), "$unset", "the property to delete")?;
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    let did = p.distinct_ids.first().cloned().unwrap_or_default();
    let mut props = Map::new();
    props.insert("$unset".into(), json!([key]));
    app.engine
        .person_event(
            team,
            &did,
            "$delete_person_property",
            props,
            &actor(&caller),
        )
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
    let key = required_key(&q, body.as_ref(), "key", "the property")?;
    let Some(value) = text_arg(&q, body.as_ref(), "value") else {
        return Err(ApiError::invalid(
            "invalid_input",
            "give the property's new value with value (query parameter or body field)",
        )
        .with_attr("value"));
    };
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    let mut set = Map::new();
    set.insert(key, value);
    set_properties(&app, &caller, &p, set).await?;
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
    format(&q)?;
    app.engine.persons_settled().await;
    let p = find(&app, team, &id)?;
    let project = app
        .engine
        .meta()
        .project(team)?
        .ok_or_else(|| ApiError::not_found("no such project"))?;
    let timeline = app.engine.properties_timeline(&project, p.uuid).await?;
    Ok(respond(&q, timeline, |b| {
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
    for (k, v) in q
        .iter()
        .filter(|(k, _)| k == name || k == &format!("{name}[]"))
    {
        let _ = k;
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
    app.engine.persons_settled().await;
    let mut ids = Vec::new();
    for v in &ids_raw {
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
        match find(&app, team, &raw) {
            Ok(p) => ids.push(p.id),
            // Unknown ids are skipped, as PostHog does: the call deletes what exists.
            Err(e) if e.kind == ErrorKind::NotFound => {}
            Err(e) => return Err(e.with_attr("ids")),
        }
    }
    let distinct_ids: Vec<String> = dids_raw
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    app.engine
        .person_command(
            team,
            PersonCommand::Delete {
                ids,
                distinct_ids,
                delete_events,
            },
            &actor(&caller),
        )
        .await?;
    app.engine.bump_query_epoch();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_flattens_and_escapes() {
        let rows = vec![
            json!({"id": 1, "properties": {"email": "a@x.io", "n": 2}, "distinct_ids": ["a", "b"]}),
            json!({"id": 2, "properties": {"quote": "say \"hi\", ok"}, "distinct_ids": []}),
        ];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "distinct_ids.0,distinct_ids.1,id,properties.email,properties.n,distinct_ids,properties.quote"
        );
        assert_eq!(lines[1], "a,b,1,a@x.io,2,,");
        assert_eq!(lines[2], ",,2,,,[],\"say \"\"hi\"\", ok\"");
    }

    #[test]
    fn csv_cells_that_would_be_formulas_get_a_quote() {
        let rows = vec![json!({"properties": {
            "a": "=HYPERLINK(\"http://evil.example\",\"click\")",
            "b": "+1+cmd|' /C calc'!A0",
            "c": "-2+3",
            "d": "@SUM(A1:A9)",
            "e": "\tx",
            "f": "\rx",
            "g": -5,
            "h": "-1.5e3",
            "i": "plain = fine",
            "j": "-",
        }})];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "properties.a,properties.b,properties.c,properties.d,properties.e,properties.f,properties.g,properties.h,properties.i,properties.j"
        );
        let cells = [
            "\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"click\"\")\"",
            "'+1+cmd|' /C calc'!A0",
            "'-2+3",
            "'@SUM(A1:A9)",
            "'\tx",
            "\"'\rx\"",
            "-5",
            "-1.5e3",
            "plain = fine",
            "'-",
        ];
        assert_eq!(lines[1], cells.join(","));
    }
}
