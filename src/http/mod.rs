//! The HTTP API (axum): the route table, shared state and small wire helpers.

mod auth;
mod capture;
mod cohorts;
mod cors;
mod flags;
pub mod persons;
mod projects;
mod query;
pub(crate) mod wire;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, patch, post};
use hedgerow_engine::Engine;
use hedgerow_engine::meta::ANY_SCOPE;

use crate::error::ApiError;
pub use auth::Caller;
use auth::scoped;

#[derive(Clone)]
pub struct App {
    pub engine: Arc<Engine>,
    /// Largest capture body, after decompression.
    pub max_body: usize,
}

impl App {
    pub fn new(engine: Arc<Engine>, max_body: usize) -> Self {
        Self { engine, max_body }
    }
}

/// Every route, on one screen. Management routes declare the scope they need; the auth
/// layer checks the key, the scope and the project in one place.
pub fn router(app: App) -> Router {
    let capture = post(capture::capture).get(capture::capture);
    let mut r = Router::new();
    for path in ["/i/v0/e", "/batch", "/e", "/capture", "/track", "/engage"] {
        r = r
            .route(path, capture.clone())
            .route(&format!("{path}/"), capture.clone());
    }
    // What browser and server SDKs call with the project token (or, for definitions, a
    // personal key): flags, remote config, local evaluation.
    let evaluate = post(flags::evaluate).get(flags::evaluate);
    for path in ["/flags", "/flags/", "/decide", "/decide/"] {
        r = r.route(path, evaluate.clone());
    }
    for path in [
        "/flags/definitions",
        "/flags/definitions/",
        "/api/feature_flag/local_evaluation",
        "/api/feature_flag/local_evaluation/",
    ] {
        r = r.route(
            path,
            scoped(&app, "feature_flag:read", get(flags::definitions)),
        );
    }
    r.route("/array/{token}/config", get(flags::config))
        .route("/array/{token}/config.js", get(flags::config_js))
        .route("/_health", get(health))
        .route("/metrics", get(metrics))
        .route(
            "/api/projects/",
            scoped(&app, ANY_SCOPE, get(projects::list)).merge(scoped(
                &app,
                "project:write",
                post(projects::create),
            )),
        )
        .route(
            "/api/projects/{project_id}/",
            scoped(&app, ANY_SCOPE, get(projects::get)).merge(scoped(
                &app,
                "project:write",
                patch(projects::patch),
            )),
        )
        .route(
            "/api/projects/{project_id}/rotate_secret_token/",
            scoped(
                &app,
                "project:write",
                patch(projects::rotate_secret).post(projects::rotate_secret),
            ),
        )
        .route(
            "/api/deletion_tasks/run/",
            scoped(&app, "person:write", post(persons::run_deletion_tasks)),
        )
        .merge(project_routes(&app, "/api/projects"))
        // Newer PostHog clients address a project's resources as an environment's.
        .merge(project_routes(&app, "/api/environments"))
        .fallback(not_found)
        .with_state(app)
        .layer(axum::middleware::from_fn(cors::layer))
        .layer(axum::middleware::from_fn(request_span))
}

/// The routes under `{prefix}/{project_id}/`: flags, cohorts, queries and persons, each
/// with the scope it needs.
fn project_routes(app: &App, prefix: &str) -> Router<App> {
    let p = prefix;
    let cohort_body = axum::extract::DefaultBodyLimit::max(cohorts::MAX_COHORT_BODY);
    Router::new()
        .route(
            &format!("{p}/{{project_id}}/feature_flags/"),
            scoped(app, "feature_flag:read", get(flags::list)).merge(scoped(
                app,
                "feature_flag:write",
                post(flags::create),
            )),
        )
        .route(
            &format!("{p}/{{project_id}}/feature_flags/local_evaluation/"),
            scoped(app, "feature_flag:read", get(flags::definitions)),
        )
        .route(
            &format!("{p}/{{project_id}}/feature_flags/{{id}}/"),
            scoped(app, "feature_flag:read", get(flags::get)).merge(scoped(
                app,
                "feature_flag:write",
                patch(flags::update)
                    .put(flags::update)
                    .delete(flags::delete),
            )),
        )
        .route(
            &format!("{p}/{{project_id}}/query/"),
            scoped(app, "query:read", post(query::run)),
        )
        .route(
            &format!("{p}/{{project_id}}/query/check_auth_for_async/"),
            scoped(app, "query:read", post(query::check_auth_for_async)),
        )
        .route(
            &format!("{p}/{{project_id}}/query/draft_sql/"),
            scoped(app, "query:read", get(query::draft_sql)),
        )
        .route(
            &format!("{p}/{{project_id}}/query/upgrade/"),
            scoped(app, "query:read", post(query::upgrade)),
        )
        .route(
            &format!("{p}/{{project_id}}/query/{{id}}/"),
            scoped(app, "query:read", get(query::status).delete(query::cancel)),
        )
        .route(
            &format!("{p}/{{project_id}}/query/{{id}}/log/"),
            scoped(app, "query:read", get(query::log)),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/"),
            scoped(app, "cohort:read", get(cohorts::list)).merge(scoped(
                app,
                "cohort:write",
                post(cohorts::create).layer(cohort_body),
            )),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/{{id}}/"),
            scoped(app, "cohort:read", get(cohorts::get)).merge(scoped(
                app,
                "cohort:write",
                patch(cohorts::update)
                    .put(cohorts::update)
                    .delete(cohorts::delete)
                    .layer(cohort_body),
            )),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/{{id}}/persons/"),
            scoped(
                app,
                "cohort:read",
                scoped(app, "person:read", get(cohorts::persons)),
            ),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/{{id}}/recalculate/"),
            scoped(app, "cohort:write", post(cohorts::recalculate)),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/{{id}}/add_persons_to_static_cohort/"),
            scoped(
                app,
                "cohort:write",
                patch(cohorts::add_persons)
                    .post(cohorts::add_persons)
                    .layer(cohort_body),
            ),
        )
        .route(
            &format!("{p}/{{project_id}}/cohorts/{{id}}/remove_person_from_static_cohort/"),
            scoped(
                app,
                "cohort:write",
                patch(cohorts::remove_person).post(cohorts::remove_person),
            ),
        )
        // Spec §4.1 endpoints 15 and 16: they read events and persons, so both scopes.
        .route(
            &format!("{p}/{{project_id}}/persons/funnel/"),
            scoped(
                app,
                "person:read",
                scoped(
                    app,
                    "query:read",
                    get(persons::funnel).post(persons::funnel),
                ),
            ),
        )
        // Spec §4.1 endpoints 17 and 18: as 15 and 16.
        .route(
            &format!("{p}/{{project_id}}/persons/funnel/correlation/"),
            scoped(
                app,
                "person:read",
                scoped(
                    app,
                    "query:read",
                    get(persons::funnel_correlation).post(persons::funnel_correlation),
                ),
            ),
        )
        // Spec §4.1 endpoint 19: it reads events and persons, so both scopes.
        .route(
            &format!("{p}/{{project_id}}/persons/lifecycle/"),
            scoped(
                app,
                "person:read",
                scoped(app, "query:read", get(persons::lifecycle)),
            ),
        )
        // Spec §4.1 endpoint 14: both scopes.
        .route(
            &format!("{p}/{{project_id}}/persons/cohorts/"),
            scoped(
                app,
                "person:read",
                scoped(app, "cohort:read", get(cohorts::of_person)),
            ),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/"),
            scoped(app, "person:read", get(persons::list)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/activity/"),
            scoped(app, "activity_log:read", get(persons::project_activity)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/bulk_delete/"),
            scoped(app, "person:write", post(persons::bulk_delete)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/"),
            scoped(app, "person:read", get(persons::get)).merge(scoped(
                app,
                "person:write",
                patch(persons::patch).delete(persons::delete),
            )),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/activity/"),
            scoped(app, "activity_log:read", get(persons::activity)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/properties_timeline/"),
            scoped(app, "person:read", get(persons::properties_timeline)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/delete_events/"),
            scoped(app, "person:write", post(persons::delete_events)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/delete_recordings/"),
            scoped(app, "person:write", post(persons::delete_recordings)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/delete_property/"),
            scoped(app, "person:write", post(persons::delete_property)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/update_property/"),
            scoped(app, "person:write", post(persons::update_property)),
        )
        .route(
            &format!("{p}/{{project_id}}/persons/{{id}}/split/"),
            scoped(app, "person:write", post(persons::split)),
        )
}

/// Every request runs inside a span with a request id (the client's `X-Request-Id` when it
/// sends a sane one, else a new one), method and path, so each log line of a request can
/// be found; the id is sent back in `X-Request-Id`.
async fn request_span(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %req.uri().path()
    );
    let mut resp = next.run(req).instrument(span).await;
    if let Ok(v) = axum::http::HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

async fn health(axum::extract::State(app): axum::extract::State<App>) -> impl IntoResponse {
    let committed = app
        .engine
        .metrics()
        .committed_seq
        .load(std::sync::atomic::Ordering::Relaxed);
    let last = app.engine.last_wal_seq();
    axum::Json(
        serde_json::json!({"status": "ok", "last_wal_seq": last, "committed_wal_seq": committed}),
    )
}

async fn metrics(axum::extract::State(app): axum::extract::State<App>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.engine.render_metrics(),
    )
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no endpoint at {}", uri.path()))
}

/// The absolute URL of `path_and_query` as the client addressed this server, for
/// pagination links.
pub fn absolute_url(headers: &HeaderMap, path_and_query: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let proto = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("http");
    format!("{proto}://{host}{path_and_query}")
}

/// The largest offset a list takes. Any offset past the end is an empty page; clamping
/// keeps `offset + limit` and the stores' signed 64-bit `OFFSET` from overflowing (an
/// `offset` of 2^64 − 1 used to wrap to −1, which SQLite reads as no offset at all).
pub const MAX_OFFSET: usize = 1 << 53;

/// A `limit` or `offset` query parameter: absent or empty is `default`; digits are a
/// count, however many (a number too big for 64 bits reads as the largest); anything else
/// is a 400 naming the parameter. The caller clamps.
pub fn count_param(name: &str, value: Option<&str>, default: usize) -> Result<usize, ApiError> {
    match value.map(str::trim) {
        None | Some("") => Ok(default),
        Some(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(s.parse::<usize>().unwrap_or(usize::MAX))
        }
        Some(s) => Err(ApiError::invalid(
            "invalid_input",
            format!("{name} must be a non-negative integer, got '{s}'"),
        )
        .with_attr(name)),
    }
}

/// `limit` (default 100, clamped to 1..=`max_limit`) and `offset` (default 0, clamped to
/// [`MAX_OFFSET`]).
pub fn limit_offset(
    limit: Option<&str>,
    offset: Option<&str>,
    max_limit: usize,
) -> Result<(usize, usize), ApiError> {
    let limit = count_param("limit", limit, 100)?.clamp(1, max_limit);
    let offset = count_param("offset", offset, 0)?.min(MAX_OFFSET);
    Ok((limit, offset))
}

/// `next` and `previous` links of a limit/offset page.
pub fn page_links(
    headers: &HeaderMap,
    path: &str,
    extra_query: &[(String, String)],
    limit: usize,
    offset: usize,
    count: usize,
) -> (Option<String>, Option<String>) {
    let link = |off: usize| {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in extra_query {
            if k != "limit" && k != "offset" {
                q.append_pair(k, v);
            }
        }
        q.append_pair("limit", &limit.to_string());
        q.append_pair("offset", &off.to_string());
        absolute_url(headers, &format!("{path}?{}", q.finish()))
    };
    let end = offset.saturating_add(limit);
    let next = (end < count).then(|| link(end));
    let previous = (offset > 0).then(|| link(offset.saturating_sub(limit)));
    (next, previous)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_counts_clamp_and_junk_is_a_400() {
        let u64_max = "18446744073709551615";
        assert_eq!(
            limit_offset(Some(u64_max), Some(u64_max), 1000).unwrap(),
            (1000, MAX_OFFSET)
        );
        assert_eq!(
            limit_offset(None, Some("999999999999999999999999999"), 1000).unwrap(),
            (100, MAX_OFFSET)
        );
        assert_eq!(limit_offset(Some(""), Some(" 7 "), 1000).unwrap(), (100, 7));
        assert_eq!(limit_offset(Some("0"), None, 1000).unwrap(), (1, 0));
        for bad in ["-1", "1e3", "ten", "+5", "5x"] {
            let e = limit_offset(None, Some(bad), 1000).unwrap_err();
            assert_eq!(e.attr.as_deref(), Some("offset"), "{bad}");
            assert!(e.detail.contains(bad), "{}", e.detail);
            let e = limit_offset(Some(bad), None, 1000).unwrap_err();
            assert_eq!(e.attr.as_deref(), Some("limit"), "{bad}");
        }
        let h = HeaderMap::new();
        let (next, prev) = page_links(&h, "/p/", &[], 1000, MAX_OFFSET, 3);
        assert_eq!(next, None);
        assert!(
            prev.unwrap()
                .ends_with(&format!("offset={}", MAX_OFFSET - 1000))
        );
        // Even unclamped values cannot overflow.
        let (next, _) = page_links(&h, "/p/", &[], usize::MAX, usize::MAX, 3);
        assert_eq!(next, None);
    }
}
