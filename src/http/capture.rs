//! The capture endpoints: `/i/v0/e/`, `/batch/` and PostHog's legacy paths.
//!
//! Reads the body under the size limit, undoes the transport encodings, and hands the
//! payload to the engine, which answers once the events are durable. Success is
//! `{"status": 1}` (204 for `?beacon=1`); errors are PostHog's `{type, code, detail, attr}`.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hedgerow_engine::CaptureBody;
use hedgerow_engine::error::ErrorKind;
use serde_json::json;

use super::App;
use crate::error::ApiError;

#[derive(Debug, Default)]
struct CaptureQuery {
    compression: Option<String>,
    sent_at_ms: Option<i64>,
    beacon: bool,
    data: Option<String>,
}

fn parse_query(q: Option<&str>) -> CaptureQuery {
    let mut out = CaptureQuery::default();
    for (k, v) in url::form_urlencoded::parse(q.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "compression" => out.compression = Some(v.into_owned()),
            "_" => out.sent_at_ms = v.parse().ok(),
            "beacon" => out.beacon = v == "1" || v == "true",
            "data" => out.data = Some(v.into_owned()),
            _ => {}
        }
    }
    out
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorKind::TooLarge,
        "payload_too_large",
        format!("the request body is over the {limit}-byte limit; send fewer events per request"),
    )
}

pub(super) async fn capture(State(app): State<App>, req: Request) -> Response {
    match handle(&app, req).await {
        Ok(resp) => resp,
        Err(e) => {
            let code = e.code;
            if e.kind != ErrorKind::Unauthorized || code != "invalid_api_key" {
                app.engine.metrics().reject(code, 1);
            }
            e.into_response()
        }
    }
}

async fn handle(app: &App, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let query = parse_query(parts.uri.query());
    let header_str = |name| header_text(&parts.headers, name);
    if let Some(len) = header_str(header::CONTENT_LENGTH).and_then(|l| l.parse::<usize>().ok())
        && len > app.max_body
    {
        return Err(too_large(app.max_body));
    }
    let bytes = read_limited(body, app.max_body, too_large).await?;
    let content_type = header_str(header::CONTENT_TYPE);
    let content_encoding = header_str(header::CONTENT_ENCODING);
    if parts.method == Method::GET && query.data.is_none() && bytes.is_empty() {
        return Err(ApiError::invalid(
            "invalid_payload",
            "a GET capture needs a data= query parameter",
        ));
    }
    let body = CaptureBody {
        body: bytes,
        content_type,
        content_encoding,
        compression: query.compression,
        data_param: query.data,
        sent_at: query
            .sent_at_ms
            .and_then(chrono::DateTime::from_timestamp_millis),
    };
    app.engine.capture_body(body).await?;
    if query.beacon {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(Json(json!({"status": 1})).into_response())
}

/// A header's value as text, if it has one that is.
pub(super) fn header_text(
    headers: &axum::http::HeaderMap,
    name: header::HeaderName,
) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads the body, refusing (413, with `over`'s error) at `limit` bytes instead of
/// buffering without bound.
pub(super) async fn read_limited(
    body: Body,
    limit: usize,
    over: impl FnOnce(usize) -> ApiError,
) -> Result<bytes::Bytes, ApiError> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(over(limit)),
        Err(e) => Err(ApiError::invalid(
            "invalid_payload",
            format!("could not read the request body: {e}"),
        )),
    }
}
