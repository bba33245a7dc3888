//! The one place an error becomes an HTTP status and PostHog's error body.
//!
//! Every engine error knows its [`ErrorKind`]; [`ApiError`] carries kind, code and detail,
//! and `IntoResponse` turns the kind into a status in a single `match`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hedgerow_engine::error::{ErrorKind, HasKind};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub code: &'static str,
    pub detail: String,
    pub attr: Option<String>,
    /// `Retry-After` seconds, when the error knows them.
    pub retry_after: Option<u64>,
    /// More fields of the body, after PostHog's four (a failed query's `query_status`).
    pub extra: Vec<(&'static str, serde_json::Value)>,
}

impl ApiError {
    pub fn new(kind: ErrorKind, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            kind,
            code,
            detail: detail.into(),
            attr: None,
            retry_after: None,
            extra: Vec::new(),
        }
    }
    pub fn invalid(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, code, detail)
    }
    pub fn with_attr(mut self, attr: impl Into<String>) -> Self {
        self.attr = Some(attr.into());
        self
    }
    pub fn with_field(mut self, name: &'static str, value: serde_json::Value) -> Self {
        self.extra.push((name, value));
        self
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, "not_found", detail)
    }
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, "error", detail.to_string())
    }
}

impl<E: HasKind + std::fmt::Display> From<E> for ApiError {
    fn from(e: E) -> Self {
        Self {
            attr: e.attr(),
            retry_after: e.retry_after(),
            ..Self::new(e.kind(), e.code(), e.to_string())
        }
    }
}

/// Status and PostHog's `type` for each kind.
pub fn status_of(kind: ErrorKind) -> (StatusCode, &'static str) {
    match kind {
        ErrorKind::InvalidInput => (StatusCode::BAD_REQUEST, "validation_error"),
        ErrorKind::Unauthorized => (StatusCode::UNAUTHORIZED, "authentication_error"),
        ErrorKind::Forbidden => (StatusCode::FORBIDDEN, "permission_denied"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        ErrorKind::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "invalid_request"),
        ErrorKind::Conflict => (StatusCode::CONFLICT, "validation_error"),
        ErrorKind::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "validation_error"),
        ErrorKind::TooManyRequests => (StatusCode::TOO_MANY_REQUESTS, "throttled_error"),
        ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "server_error"),
        ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, ty) = status_of(self.kind);
        if status.is_server_error() {
            tracing::error!(code = self.code, detail = %self.detail, "request failed");
        }
        // An internal error's text can name files, paths and internals: it goes to the log
        // (inside the request's span, with its id), and the client gets PostHog's generic
        // message. Other 5xx (503: out of room, disk full) say what to do.
        let detail = if status == StatusCode::INTERNAL_SERVER_ERROR {
            "A server error occurred.".to_string()
        } else {
            self.detail
        };
        let mut body = json!({"type": ty, "code": self.code, "detail": detail, "attr": self.attr});
        for (name, value) in self.extra {
            body[name] = value;
        }
        let mut resp = (status, Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(self.retry_after.unwrap_or(5)),
            );
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn answer(e: ApiError) -> (StatusCode, Option<String>, serde_json::Value) {
        let resp = e.into_response();
        let status = resp.status();
        let retry = resp
            .headers()
            .get(axum::http::header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, retry, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn internal_text_stays_in_the_log_and_retries_say_when() {
        let (st, _, body) =
            answer(ApiError::internal("open /srv/data/events/x.parquet: EIO")).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["detail"], "A server error occurred.");
        assert_eq!(body["type"], "server_error");

        let busy = ApiError::new(ErrorKind::Unavailable, "capture_overloaded", "retry later");
        let (st, retry, body) = answer(busy).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry.as_deref(), Some("5"));
        assert_eq!(body["detail"], "retry later");

        let mut throttled = ApiError::new(ErrorKind::TooManyRequests, "throttled", "slow down");
        throttled.retry_after = Some(17);
        let (st, retry, body) = answer(throttled).await;
        assert_eq!(st, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(retry.as_deref(), Some("17"));
        assert_eq!(body["type"], "throttled_error");
    }
}
