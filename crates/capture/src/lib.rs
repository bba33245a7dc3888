//! Capture's pure half: a request body in, checked events out, with no I/O.
//!
//! - [`decode`]: transport encodings (gzip, base64, form fields, `?data=`), bounded.
//! - [`scan`]: the pre-scan that counts a body's JSON values and depth before it is parsed.
//! - [`payload`]: the body's shapes (single event, `batch`, array, envelope) and its token.
//! - [`normalize`]: one event as PostHog would store it (ids, timestamps, skew, names).
//! - [`limits`]: what a request may cost, alone and with all others (the decode budget).
//! - [`model`]: the nouns the rest of hedgerow shares (events, ids, person commands).
//!
//! The engine (`hedgerow-engine`) adds the WAL, persons and storage; the fuzz target
//! `capture` (`fuzz/`, `scripts/fuzz`) drives [`fuzzing::check`].

pub mod decode;
pub mod fuzzing;
pub mod limits;
pub mod model;
pub mod normalize;
pub mod payload;
pub mod scan;
#[cfg(test)]
mod testalloc;

/// Why a capture request, or one event of it, was refused. The engine maps each to an
/// HTTP status and PostHog's error `code` (its `HasKind`).
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
    ProjectLookup(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The blocking task decoding the request failed (it panicked or was cancelled).
    #[error("could not make the events durable: the capture task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// Over one of the capture limits ([`limits`]): 413, saying the limit and what was found.
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
