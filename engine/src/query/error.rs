//! What can go wrong with a query, and what kind of failure each is.

use std::time::Duration;

use crate::error::{ErrorKind, HasKind};

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Syntax(String),
    #[error("{0}")]
    Query(String),
    #[error("{0}")]
    Invalid(String),
    /// A field of the request is invalid: the field (PostHog's `attr`) and why.
    #[error("{1}")]
    InvalidField(&'static str, String),
    #[error("{0}")]
    NotFound(String),
    #[error("Query {0} was cancelled")]
    Cancelled(String),
    #[error("The query needs more memory than the limit allows even with spilling: {0}")]
    Memory(String),
    #[error("The query took longer than the limit of {} s (--query-timeout) and was stopped", .0.as_secs_f64())]
    Timeout(Duration),
    /// Over the project's concurrency or request rate; retry after this many seconds.
    #[error("{0}")]
    Throttled(String, u64),
    #[error("{0}")]
    Internal(String),
}

impl HasKind for QueryError {
    fn kind(&self) -> ErrorKind {
        match self {
            QueryError::Syntax(_)
            | QueryError::Query(_)
            | QueryError::Invalid(_)
            | QueryError::InvalidField(..)
            | QueryError::Cancelled(_)
            | QueryError::Memory(_)
            | QueryError::Timeout(_) => ErrorKind::InvalidInput,
            QueryError::Throttled(..) => ErrorKind::TooManyRequests,
            QueryError::NotFound(_) => ErrorKind::NotFound,
            QueryError::Internal(_) => ErrorKind::Internal,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            QueryError::Syntax(_) => "hogql_syntax_error",
            QueryError::Query(_) => "hogql_query_error",
            QueryError::Cancelled(_) => "query_cancelled",
            QueryError::Memory(_) => "query_memory_limit",
            QueryError::Timeout(_) => "query_timeout",
            QueryError::Throttled(..) => "throttled",
            QueryError::Invalid(_) | QueryError::InvalidField(..) => "invalid_input",
            QueryError::NotFound(_) => "not_found",
            QueryError::Internal(_) => "error",
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            QueryError::InvalidField(field, _) => Some(field.to_string()),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            QueryError::Throttled(_, secs) => Some(*secs),
            _ => None,
        }
    }
}

pub(super) fn from_df(e: datafusion::error::DataFusionError) -> QueryError {
    use datafusion::error::DataFusionError as D;
    match e.find_root() {
        D::ResourcesExhausted(m) => QueryError::Memory(m.clone()),
        _ => QueryError::Query(e.strip_backtrace().to_string()),
    }
}
