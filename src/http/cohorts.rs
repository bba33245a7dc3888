//! Cohorts over HTTP: `/api/projects/{id}/cohorts/…` (list, create, get, update, their
//! members, recalculation, static cohorts' persons) and `/persons/cohorts/` (the cohorts
//! of one person). A create or update takes JSON, or a form (`multipart/form-data`) with a
//! `csv` file of persons, as PostHog's app uploads a static cohort.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use hedgerow_engine::CohortFields;
use hedgerow_engine::error::ErrorKind;
use hedgerow_engine::persons::PersonKey;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{App, Caller, limit_offset, page_links, wire};
use crate::error::ApiError;

/// Largest create or update body: a CSV of about 100 000 distinct ids.
pub(super) const MAX_COHORT_BODY: usize = 16 << 20;

#[derive(Debug, Deserialize)]
pub(super) struct Page {
    limit: Option<String>,
    offset: Option<String>,
}

pub(super) async fn list(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = limit_offset(q.limit.as_deref(), q.offset.as_deref(), 1000)?;
    let all = app.engine.cohorts(caller.team()?)?;
    let count = all.len();
    let shown: Vec<_> = all.into_iter().skip(offset).take(limit).collect();
    let (next, previous) = page_links(&headers, uri.path(), &[], limit, offset, count);
    Ok(Json(wire::cohorts::page(count, next, previous, &shown)))
}

/// A boolean of a JSON body or a form field (`"true"`, `"false"`).
fn flag(v: &Value, name: &'static str) -> Result<Option<bool>, ApiError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        other => Err(ApiError::invalid(
            "invalid_input",
            format!("{name} must be true or false, got {other}"),
        )
        .with_attr(name)),
    }
}

/// The fields of a JSON object body (or of a form's fields, as strings).
fn fields_of(doc: serde_json::Map<String, Value>) -> Result<CohortFields, ApiError> {
    let text = |name: &'static str| -> Result<Option<String>, ApiError> {
        match doc.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ApiError::invalid(
                "invalid_input",
                format!("{name} must be a string, got {other}"),
            )
            .with_attr(name)),
        }
    };
    let json_field = |name: &'static str| -> Result<Option<Value>, ApiError> {
        match doc.get(name) {
            None | Some(Value::Null) => Ok(None),
            // A form sends JSON fields as text.
            Some(Value::String(s)) => serde_json::from_str(s).map(Some).map_err(|e| {
                ApiError::invalid("invalid_input", format!("{name} is not JSON: {e}"))
                    .with_attr(name)
            }),
            Some(v) => Ok(Some(v.clone())),
        }
    };
    let list = |name: &'static str| -> Result<Option<Vec<Value>>, ApiError> {
        match json_field(name)? {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(other) => Err(ApiError::invalid(
                "invalid_input",
                format!("{name} must be a list, got {other}"),
            )
            .with_attr(name)),
        }
    };
    let distinct_ids = match list("distinct_ids")? {
        None => None,
        Some(a) => Some(
            a.into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    Value::Number(n) => Ok(n.to_string()),
                    other => Err(ApiError::invalid(
                        "invalid_input",
                        format!("a distinct id is a string, got {other}"),
                    )
                    .with_attr("distinct_ids")),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    Ok(CohortFields {
        name: text("name")?,
        description: text("description")?,
        filters: json_field("filters")?,
        query: json_field("query")?,
        is_static: flag(doc.get("is_static").unwrap_or(&Value::Null), "is_static")?,
        deleted: flag(doc.get("deleted").unwrap_or(&Value::Null), "deleted")?,
        person_ids: list("person_ids")?,
        distinct_ids,
        csv: text("csv")?,
    })
}

/// A create or update body: JSON, or `multipart/form-data` whose fields are the JSON's
/// (as text) and whose `csv` file lists the persons of a static cohort.
fn read_body(headers: &HeaderMap, body: &Bytes) -> Result<CohortFields, ApiError> {
    if body.len() > MAX_COHORT_BODY {
        return Err(ApiError::new(
            ErrorKind::TooLarge,
            "too_large",
            format!("A cohort body is at most {MAX_COHORT_BODY} bytes"),
        ));
    }
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let doc = if ctype.starts_with("multipart/form-data") {
        let boundary = ctype
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("boundary="))
            .next()
            .map(|b| b.trim_matches('"'))
            .filter(|b| !b.is_empty())
            .ok_or_else(|| {
                ApiError::invalid("invalid_input", "multipart/form-data needs a boundary")
            })?;
        let mut doc = serde_json::Map::new();
        for (name, value) in multipart(body, boundary)? {
            let text = String::from_utf8(value).map_err(|_| {
                ApiError::invalid("invalid_input", format!("form field {name} is not UTF-8"))
                    .with_attr(name.clone())
            })?;
            doc.insert(name, Value::String(text));
        }
        doc
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(ApiError::invalid(
                    "invalid_input",
                    "the body must be a JSON object",
                ));
            }
            Err(e) => {
                return Err(ApiError::invalid(
                    "invalid_input",
                    format!("the body is not JSON: {e}"),
                ));
            }
        }
    };
    fields_of(doc)
}

/// The named parts of a `multipart/form-data` body (RFC 7578): each part's
/// `Content-Disposition` name and its bytes.
fn multipart(body: &[u8], boundary: &str) -> Result<Vec<(String, Vec<u8>)>, ApiError> {
    let bad = |m: &str| ApiError::invalid("invalid_input", format!("the form is malformed: {m}"));
    let delim = format!("--{boundary}");
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay.get(from..)?
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
    };
    let mut at = find(body, delim.as_bytes(), 0).ok_or_else(|| bad("no boundary"))?;
    let mut parts = Vec::new();
    loop {
        at += delim.len();
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        // The line break after the boundary.
        at = find(body, b"\r\n", at).ok_or_else(|| bad("a part has no headers"))? + 2;
        let head_end =
            find(body, b"\r\n\r\n", at).ok_or_else(|| bad("a part's headers do not end"))?;
        let head =
            std::str::from_utf8(&body[at..head_end]).map_err(|_| bad("headers are not UTF-8"))?;
        let name = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
            .and_then(|l| {
                l.split(';').find_map(|p| {
                    p.trim()
                        .strip_prefix("name=")
                        .map(|n| n.trim_matches('"').to_owned())
                })
            })
            .ok_or_else(|| bad("a part has no name"))?;
        let start = head_end + 4;
        let end_delim = format!("\r\n{delim}");
        let end =
            find(body, end_delim.as_bytes(), start).ok_or_else(|| bad("a part does not end"))?;
        parts.push((name, body[start..end].to_vec()));
        at = end + 2;
    }
}

pub(super) async fn create(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let f = read_body(&headers, &body)?;
    let c = app.engine.create_cohort(caller.project()?, f).await?;
    Ok((StatusCode::CREATED, Json(wire::cohorts::cohort(&c))))
}

fn cohort_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("no cohort {raw}")))
}

pub(super) async fn get(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let c = app.engine.cohort(caller.team()?, cohort_id(&id)?)?;
    Ok(Json(wire::cohorts::cohort(&c)))
}

pub(super) async fn update(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Path((_, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let f = read_body(&headers, &body)?;
    let c = app
        .engine
        .update_cohort(caller.project()?, cohort_id(&id)?, f)
        .await?;
    Ok(Json(wire::cohorts::cohort(&c)))
}

/// As PostHog: a cohort is deleted by `PATCH {"deleted": true}`, not by DELETE.
pub(super) async fn delete() -> ApiError {
    ApiError::new(
        ErrorKind::MethodNotAllowed,
        "method_not_allowed",
        "Method \"DELETE\" not allowed. Delete a cohort with PATCH {\"deleted\": true}.",
    )
}

/// `POST /cohorts/{id}/recalculate/` (hedgerow's): a dynamic cohort's members, now.
pub(super) async fn recalculate(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let c = app
        .engine
        .recalculate_cohort(caller.project()?, cohort_id(&id)?)
        .await?;
    Ok(Json(wire::cohorts::cohort(&c)))
}

/// `PATCH /cohorts/{id}/add_persons_to_static_cohort/` with `person_ids` (ids or uuids)
/// and/or `distinct_ids`.
pub(super) async fn add_persons(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Path((_, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let f = read_body(&headers, &body)?;
    let c = app
        .engine
        .add_to_static_cohort(caller.team()?, cohort_id(&id)?, f)
        .await?;
    Ok(Json(wire::cohorts::cohort(&c)))
}

#[derive(Debug, Deserialize)]
pub(super) struct RemoveBody {
    person_id: Value,
}

/// `PATCH /cohorts/{id}/remove_person_from_static_cohort/` with `person_id`.
pub(super) async fn remove_person(
    State(app): State<App>,
    caller: Caller,
    Path((_, id)): Path<(String, String)>,
    body: Result<Json<RemoveBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body.map_err(|e| ApiError::invalid("invalid_input", e.body_text()))?;
    let person = match b.person_id {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        other => {
            return Err(ApiError::invalid(
                "invalid_input",
                format!("person_id is a person's id or uuid, got {other}"),
            )
            .with_attr("person_id"));
        }
    };
    let c = app
        .engine
        .remove_from_static_cohort(caller.team()?, cohort_id(&id)?, &person)
        .await?;
    Ok(Json(wire::cohorts::cohort(&c)))
}

/// `GET /cohorts/{id}/persons/`: the members, in the persons list envelope.
pub(super) async fn persons(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    uri: Uri,
    Path((_, id)): Path<(String, String)>,
    Query(q): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = limit_offset(q.limit.as_deref(), q.offset.as_deref(), 1000)?;
    let page = app
        .engine
        .cohort_persons(caller.team()?, cohort_id(&id)?, limit, offset)
        .await?;
    let (next, previous) = page_links(
        &headers,
        uri.path(),
        &[],
        limit,
        offset,
        page.count as usize,
    );
    let results = page.results.iter().map(wire::persons::person).collect();
    Ok(Json(wire::persons::page(
        page.count, next, previous, results,
    )))
}

#[derive(Debug, Deserialize)]
pub(super) struct OfPerson {
    person_id: Option<String>,
}

/// `GET /persons/cohorts/?person_id=`: the cohorts the person (id or uuid) belongs to.
pub(super) async fn of_person(
    State(app): State<App>,
    caller: Caller,
    Query(q): Query<OfPerson>,
) -> Result<Json<Value>, ApiError> {
    let raw = q.person_id.filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::invalid("required", "person_id is required").with_attr("person_id")
    })?;
    let key =
        PersonKey::parse(&raw).ok_or_else(|| ApiError::not_found(format!("no person {raw}")))?;
    let cohorts = app.engine.cohorts_of_person(caller.team()?, key).await?;
    let results: Vec<Value> = cohorts.iter().map(wire::cohorts::cohort).collect();
    Ok(Json(json!({"results": results})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_reads_into_fields() {
        let body = "--XyZ\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nVIPs\r\n\
                    --XyZ\r\nContent-Disposition: form-data; name=\"is_static\"\r\n\r\ntrue\r\n\
                    --XyZ\r\nContent-Disposition: form-data; name=\"csv\"; filename=\"a.csv\"\r\n\
                    Content-Type: text/csv\r\n\r\ndistinct_id\r\nu1\r\nu2\r\n\r\n--XyZ--\r\n";
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            "multipart/form-data; boundary=XyZ".parse().unwrap(),
        );
        let f = read_body(&h, &Bytes::from(body)).unwrap();
        assert_eq!(f.name.as_deref(), Some("VIPs"));
        assert_eq!(f.is_static, Some(true));
        assert_eq!(f.csv.as_deref(), Some("distinct_id\r\nu1\r\nu2\r\n"));
        for bad in [
            "--XyZ\r\nnope",
            "no boundary here",
            "--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--",
        ] {
            assert!(read_body(&h, &Bytes::from(bad)).is_err(), "{bad}");
        }
        let json = read_body(
            &HeaderMap::new(),
            &Bytes::from(r#"{"name": "x", "person_ids": [1, "u"], "is_static": "true"}"#),
        )
        .unwrap();
        assert_eq!(json.person_ids.unwrap().len(), 2);
        assert!(read_body(&HeaderMap::new(), &Bytes::from(r#"{"is_static": 3}"#)).is_err());
    }
}
