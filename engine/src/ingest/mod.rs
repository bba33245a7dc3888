//! Ingestion: from a decoded capture payload to durable, ordered events.
//!
//! Owns normalization (pure functions, no I/O), the write-ahead log and the ingest pipeline
//! that feeds storage in WAL order. It knows nothing of HTTP: the server hands it a
//! [`payload::CapturePayload`] already decoded from the wire.

pub mod decode;
pub(crate) mod limits;
pub mod normalize;
pub mod payload;
pub(crate) mod scan;
pub(crate) use hedgerow_wal as wal;

use crate::error::{ErrorKind, HasKind};

/// Why a capture request, or one event of it, was refused.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{0}")]
    InvalidPayload(String),
    #[error("{0}")]
    InvalidToken(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("could not make the events durable: {0}")]
    Unavailable(String),
    /// The project of the request's token could not be read.
    #[error("could not make the events durable: {0}")]
    ProjectLookup(#[source] crate::meta::MetaError),
    /// The blocking task decoding the request failed (it panicked or was cancelled).
    #[error("could not make the events durable: the capture task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// Over one of the capture limits (`limits`): 413, saying the limit and what was found.
    #[error("{detail}")]
    OverLimit {
        code: &'static str,
        detail: String,
        /// The field at fault, e.g. `properties.$set`.
        attr: Option<String>,
    },
    /// The capture memory budget stayed taken by other requests: 503, try again later.
    #[error("{0}")]
    Overloaded(String),
}

impl HasKind for CaptureError {
    fn kind(&self) -> ErrorKind {
        match self {
            CaptureError::InvalidPayload(_) => ErrorKind::InvalidInput,
            CaptureError::InvalidToken(_) => ErrorKind::Unauthorized,
            CaptureError::TooLarge(_) => ErrorKind::TooLarge,
            CaptureError::Unavailable(_)
            | CaptureError::ProjectLookup(_)
            | CaptureError::Task(_)
            | CaptureError::Overloaded(_) => ErrorKind::Unavailable,
            CaptureError::OverLimit { .. } => ErrorKind::TooLarge,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            CaptureError::InvalidPayload(_) => "invalid_payload",
            CaptureError::InvalidToken(_) => "invalid_api_key",
            CaptureError::TooLarge(_) => "payload_too_large",
            CaptureError::Unavailable(_)
            | CaptureError::ProjectLookup(_)
            | CaptureError::Task(_) => "unavailable",
            CaptureError::OverLimit { code, .. } => code,
            CaptureError::Overloaded(_) => "capture_overloaded",
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            CaptureError::OverLimit { attr, .. } => attr.clone(),
            _ => None,
        }
    }
}

impl crate::error::HasKind for wal::WalError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            wal::WalError::Io(_) | wal::WalError::Closed => ErrorKind::Unavailable,
            wal::WalError::Corrupt { .. } => ErrorKind::Internal,
            wal::WalError::TooLarge(_) => ErrorKind::TooLarge,
        }
    }
}

#[cfg(test)]
mod wal_error_tests {
    use crate::error::{ErrorKind, HasKind};
    use crate::ingest::wal::WalError;

    #[test]
    fn wal_errors_map_to_kinds() {
        // A failed write or fsync is retryable (503); lost acknowledged data is internal.
        let io = WalError::Io(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
        assert_eq!(io.kind(), ErrorKind::Unavailable);
        assert_eq!(WalError::Closed.kind(), ErrorKind::Unavailable);
        assert_eq!(WalError::TooLarge(1).kind(), ErrorKind::TooLarge);
        let corrupt = WalError::Corrupt {
            segment: "00000000000000000001.wal".into(),
            offset: 0,
            reason: "bad checksum".into(),
        };
        assert_eq!(corrupt.kind(), ErrorKind::Internal);
    }
}
