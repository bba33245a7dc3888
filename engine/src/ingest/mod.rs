//! Ingestion: from a decoded capture payload to durable, ordered events.
//!
//! Decoding, checks and normalization are pure functions in `hedgerow-capture` (re-exported
//! here); the write-ahead log is `hedgerow-wal`. This module maps their errors to kinds.
//! It knows nothing of HTTP: the server hands it a [`payload::CapturePayload`] already
//! decoded from the wire.

pub use hedgerow_capture::{CaptureError, decode, normalize, payload};
pub(crate) use hedgerow_capture::{limits, scan};
pub(crate) use hedgerow_wal as wal;

use crate::error::{ErrorKind, HasKind};

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
mod kind_tests {
    use crate::error::{ErrorKind, HasKind};
    use crate::ingest::wal::WalError;

    #[test]
    fn budget_refusals_become_413_and_503() {
        use crate::error::{ErrorKind, HasKind};
        use crate::ingest::CaptureError;
        use crate::ingest::limits::{BudgetError, human_bytes};
        use std::time::Duration;
        let e: CaptureError = BudgetError::OverBudget {
            needed: 600 << 20,
            total: 512 << 20,
        }
        .into();
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert_eq!(e.code(), "capture_memory_limit");
        assert!(e.to_string().contains("512 MiB"), "{e}");
        let e: CaptureError = BudgetError::Busy {
            needed: 1 << 20,
            total: 512 << 20,
            waited: Duration::from_secs(2),
        }
        .into();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.to_string().contains("2000 ms"), "{e}");
        assert_eq!(human_bytes(20 << 20), "20 MiB");
        assert_eq!(human_bytes(1536 << 10), "1.5 MiB");
        assert_eq!(human_bytes(300), "300 bytes");
    }

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
