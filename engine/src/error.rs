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

/// Implemented by every engine error so the server can map it without knowing the module.
pub trait HasKind {
    fn kind(&self) -> ErrorKind;
    /// A stable machine-readable code (PostHog's `code` field), e.g. `invalid_api_key`.
    fn code(&self) -> &'static str {
        match self.kind() {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Unauthorized => "authentication_failed",
            ErrorKind::Forbidden => "permission_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::TooManyRequests => "throttled",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "error",
        }
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

/// What opening the engine, or its own background work, can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Persons(#[from] StoreError),
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// A file or directory of the data directory could not be used.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The data directory's path cannot be a table URL.
    #[error("bad data directory path: {0}")]
    BadPath(std::path::PathBuf),
    /// A WAL record acknowledged earlier does not decode: the WAL is damaged.
    #[error("WAL record {seq} does not decode: {source}")]
    BadWalRecord {
        seq: u64,
        #[source]
        source: serde_json::Error,
    },
    /// Work the engine handed to another task failed there (it panicked or was cancelled).
    #[error("{what}: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// A deletion run could not get the buffer written out in time; its tasks stay queued.
    #[error(
        "deletion: the buffer was not written out within 10 minutes (table at WAL seq \
         {committed}, need {target}); the tasks stay queued"
    )]
    FlushTimeout { committed: u64, target: u64 },
    /// Another process holds the data directory.
    #[error("{0} is in use by another hedgerow process")]
    Locked(std::path::PathBuf),
}

use crate::ingest::wal::WalError;
use crate::meta::MetaError;
use crate::persons::store::StoreError;
use crate::storage::table::StorageError;

impl HasKind for EngineError {
    fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Meta(e) => e.kind(),
            EngineError::Storage(e) => e.kind(),
            EngineError::Wal(e) => e.kind(),
            EngineError::Persons(e) => e.kind(),
            EngineError::Query(e) => e.kind(),
            EngineError::Io { .. }
            | EngineError::BadPath(_)
            | EngineError::BadWalRecord { .. }
            | EngineError::Task { .. }
            | EngineError::FlushTimeout { .. } => ErrorKind::Internal,
            EngineError::Locked(_) => ErrorKind::Conflict,
        }
    }
}
