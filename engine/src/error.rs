//! Error kinds shared by every engine module.
//!
//! Each module has its own `thiserror` enum; each of those knows its [`ErrorKind`]. The
//! server turns a kind into an HTTP status in exactly one `match` (`src/error.rs`). Nothing
//! here knows about HTTP.

/// What kind of failure an error is, independent of where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The caller sent something unreadable or invalid.
    InvalidInput,
    /// No credential, or one that is unknown.
    Unauthorized,
    /// A valid credential without the right to do this.
    Forbidden,
    NotFound,
    /// The route exists; the method is not one it takes.
    MethodNotAllowed,
    Conflict,
    /// A request or payload over a documented limit.
    TooLarge,
    /// Over a rate or concurrency limit: the same request may succeed later (429 with
    /// `Retry-After`).
    TooManyRequests,
    /// The service cannot do it now (disk full, fsync failed, shutting down).
    Unavailable,
    Internal,
}

impl ErrorKind {
    /// The code of an error of this kind that has no more specific one.
    pub fn default_code(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Unauthorized => "authentication_failed",
            ErrorKind::Forbidden => "permission_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::Conflict => "conflict",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::TooManyRequests => "throttled",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "error",
        }
    }
}

/// Implemented by every engine error so the server can map it without knowing the module.
pub trait HasKind {
    fn kind(&self) -> ErrorKind;
    /// A stable machine-readable code (PostHog's `code` field), e.g. `invalid_api_key`.
    fn code(&self) -> &'static str {
        self.kind().default_code()
    }
    /// The field the error is about (PostHog's `attr`), when there is one.
    fn attr(&self) -> Option<String> {
        None
    }
    /// When the same request may succeed, in whole seconds (`Retry-After`), for errors that
    /// know (a rate limit); others that are worth retrying say 5.
    fn retry_after(&self) -> Option<u64> {
        None
    }
}
