//! CORS on every response, so a web page on any origin can call every route a browser
//! SDK calls (capture, `/flags`, remote config) and read the answer, errors and 404s
//! included: a browser hides the status and body of a response without these headers, and
//! posthog-js then reports a network failure instead of the error.
//!
//! As PostHog's public endpoints answer: the request's `Origin` is echoed (not `*`, which
//! a request with credentials may not use) with `Access-Control-Allow-Credentials: true`,
//! and a preflight (any `OPTIONS`) is answered 200 on every path with the headers the
//! browser asked to send.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Methods a browser may use on some route.
const METHODS: &str = "GET, POST, PATCH, PUT, DELETE, OPTIONS";
/// Headers allowed when a preflight does not list the ones it wants.
const DEFAULT_HEADERS: &str = "Content-Type, Content-Encoding, Authorization";
/// Headers a page's script may read from a response.
const EXPOSED: &str = "Retry-After, X-Request-Id";
/// How long a browser may reuse a preflight's answer, in seconds.
const MAX_AGE: &str = "86400";

pub(super) async fn layer(req: Request, next: Next) -> Response {
    let headers = req.headers().clone();
    let preflight = req.method() == Method::OPTIONS;
    let mut resp = if preflight {
        StatusCode::OK.into_response()
    } else {
        next.run(req).await
    };
    add_headers(&headers, &mut resp, preflight);
    resp
}

fn add_headers(req: &HeaderMap, resp: &mut Response, preflight: bool) {
    let h = resp.headers_mut();
    match req.get(header::ORIGIN) {
        Some(origin) => {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            h.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
            h.append(header::VARY, HeaderValue::from_static("Origin"));
        }
        None => {
            h.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
        }
    }
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(METHODS),
        );
        let allow = req
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or(HeaderValue::from_static(DEFAULT_HEADERS));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allow);
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE),
        );
    }
}
