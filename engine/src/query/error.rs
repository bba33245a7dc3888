//! What can go wrong with a query, and what kind of failure each is.
//!
//! Errors from below (DataFusion, Arrow, the Delta table, SQLite, I/O) are kept as their
//! [`source`](std::error::Error::source). Their text stays in the message too, because the
//! message is what reaches the query's author (a 400's `detail`) or the log (a 500).

use std::time::Duration;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use deltalake::DeltaTableError;

use crate::error::{ErrorKind, HasKind};
use crate::hogql::lexer::SyntaxError;
use crate::hogql::planner::PlanError;
use crate::meta::MetaError;
use crate::persons::store::StoreError;
use crate::storage::table::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The HogQL text does not parse.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// The query parses but cannot be planned; `at` is where in the text (`line L, column
    /// C`), when the planner knows.
    #[error("{}", plan_message(.source, .at.as_deref()))]
    Plan {
        #[source]
        source: PlanError,
        at: Option<String>,
    },
    /// DataFusion refused or failed the query while optimizing or running it.
    #[error("{}", store_failure(.0).map_or_else(|| .0.strip_backtrace(), unavailable))]
    DataFusion(#[source] DataFusionError),
    /// The query needs more memory than the pool has, even spilling.
    #[error("The query needs more memory than the limit allows even with spilling: {}", exhausted(.0))]
    Memory(#[source] DataFusionError),
    #[error("{0}")]
    Invalid(String),
    /// A field of the request is invalid: the field (PostHog's `attr`) and why.
    #[error("{1}")]
    InvalidField(&'static str, String),
    #[error("{0}")]
    NotFound(String),
    #[error("Query {0} was cancelled")]
    Cancelled(String),
    #[error("The query took longer than the limit of {} s (--query-timeout) and was stopped", .0.as_secs_f64())]
    Timeout(Duration),
    /// Over the project's concurrency or request rate; retry after this many seconds.
    #[error("{0}")]
    Throttled(String, u64),
    /// Reading a project or the query log; the kind is the metadata store's.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// Files and threads the service needs: `what` could not be done.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// DataFusion failed at something that is not the query's fault: building the runtime
    /// (memory pool, spill directories), listing the table's files, an in-memory table.
    #[error("{}", store_or(.0))]
    DataFusionInternal(#[source] DataFusionError),
    /// The events table's snapshot could not be read.
    #[error("{}", store_or(.0))]
    Storage(#[source] StorageError),
    /// The Delta table could not be made readable by the query's session.
    #[error("{}", store_or(.0))]
    Delta(#[source] DeltaTableError),
    /// A table built in memory (query log, persons) has columns that do not fit its schema.
    #[error("{0}")]
    Arrow(#[source] ArrowError),
    /// The person store could not be read.
    #[error("{0}")]
    PersonStore(#[source] StoreError),
    /// The task running a blocking query ended without an answer.
    #[error("query task failed: {0}")]
    TaskFailed(#[source] tokio::task::JoinError),
    #[error("{0}")]
    Internal(String),
}

/// When the object store holding the table failed (did not answer, refused, timed out;
/// not an object that is missing), the innermost cause, which names no URL or path: the
/// query may succeed later, so it is a 503 saying so, not a 500.
fn store_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut at = Some(e);
    let mut store = false;
    let mut innermost = e;
    while let Some(x) = at {
        let os = x.downcast_ref::<object_store::Error>().or_else(|| {
            // The kernel's error does not give the store's error as its source.
            match x.downcast_ref::<delta_kernel::Error>() {
                Some(delta_kernel::Error::ObjectStore(os)) => Some(os),
                _ => None,
            }
        });
        if let Some(os) = os {
            if matches!(os, object_store::Error::NotFound { .. }) {
                return None;
            }
            store = true;
            innermost = os;
            at = std::error::Error::source(os);
            continue;
        }
        innermost = x;
        at = x.source();
    }
    store.then(|| innermost.to_string())
}

fn unavailable(cause: String) -> String {
    format!("The events table's storage could not be read ({cause}); retry later")
}

fn store_or(e: &(dyn std::error::Error + 'static)) -> String {
    store_failure(e).map_or_else(|| e.to_string(), unavailable)
}

fn plan_message(e: &PlanError, at: Option<&str>) -> String {
    match at {
        Some(at) => format!("{} (at {at})", e.message),
        None => e.message.clone(),
    }
}

/// The pool's own words about what it could not grant.
fn exhausted(e: &DataFusionError) -> String {
    match e.find_root() {
        DataFusionError::ResourcesExhausted(m) => m.clone(),
        other => other.strip_backtrace(),
    }
}

impl From<DataFusionError> for QueryError {
    /// Out of memory (anywhere in the chain) is [`QueryError::Memory`]; anything else
    /// DataFusion says about a query is the query's problem.
    fn from(e: DataFusionError) -> Self {
        match e.find_root() {
            DataFusionError::ResourcesExhausted(_) => QueryError::Memory(e),
            _ => QueryError::DataFusion(e),
        }
    }
}

/// Whether reading a Parquet file failed under `e` (a damaged or unreadable data file):
/// the table's fault, not the query's.
fn file_unreadable(e: &DataFusionError) -> bool {
    if matches!(e.find_root(), DataFusionError::ParquetError(_)) {
        return true;
    }
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = at {
        if x.is::<parquet::errors::ParquetError>() {
            return true;
        }
        at = x.source();
    }
    false
}

/// Whether a task of the query panicked under `e`. DataFusion runs scans and exchanges as
/// tasks of their own and reports a panic in one as an error of the query (`Join Error …
/// task 63 panicked with message …`); the reader of a damaged data file does panic (the
/// `parquet` fuzz target finds such footers in seconds). Never the query's fault.
fn task_panicked(e: &DataFusionError) -> bool {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = at {
        // (a RepartitionExec hands its input task's failure to every output as an
        // `Arc<JoinError>`)
        if let Some(j) = x.downcast_ref::<tokio::task::JoinError>() {
            return j.is_panic();
        }
        if let Some(j) = x.downcast_ref::<std::sync::Arc<tokio::task::JoinError>>() {
            return j.is_panic();
        }
        at = x.source();
    }
    false
}

impl QueryError {
    /// The table's object store failed under this query ([`store_failure`]).
    fn store_failed(&self) -> bool {
        match self {
            QueryError::DataFusion(e) | QueryError::DataFusionInternal(e) => {
                store_failure(e).is_some()
            }
            QueryError::Storage(e) => store_failure(e).is_some(),
            QueryError::Delta(e) => store_failure(e).is_some(),
            _ => false,
        }
    }
}

impl HasKind for QueryError {
    fn kind(&self) -> ErrorKind {
        if self.store_failed() {
            return ErrorKind::Unavailable;
        }
        if let QueryError::DataFusion(e) = self
            && (file_unreadable(e) || task_panicked(e))
        {
            // The server log has the file's error; the client gets a 500.
            return ErrorKind::Internal;
        }
        match self {
            QueryError::Syntax(_)
            | QueryError::Plan { .. }
            | QueryError::DataFusion(_)
            | QueryError::Invalid(_)
            | QueryError::InvalidField(..)
            | QueryError::Cancelled(_)
            | QueryError::Memory(_)
            | QueryError::Timeout(_) => ErrorKind::InvalidInput,
            QueryError::Throttled(..) => ErrorKind::TooManyRequests,
            QueryError::NotFound(_) => ErrorKind::NotFound,
            QueryError::Meta(e) => e.kind(),
            QueryError::Io { .. }
            | QueryError::DataFusionInternal(_)
            | QueryError::Storage(_)
            | QueryError::Delta(_)
            | QueryError::Arrow(_)
            | QueryError::PersonStore(_)
            | QueryError::TaskFailed(_)
            | QueryError::Internal(_) => ErrorKind::Internal,
        }
    }
    fn code(&self) -> &'static str {
        if self.store_failed() {
            return "storage_unavailable";
        }
        if let QueryError::DataFusion(e) = self {
            if file_unreadable(e) {
                return "data_file_unreadable";
            }
            if task_panicked(e) {
                return "error";
            }
        }
        match self {
            QueryError::Syntax(_) => "hogql_syntax_error",
            QueryError::Plan { .. } | QueryError::DataFusion(_) => "hogql_query_error",
            QueryError::Cancelled(_) => "query_cancelled",
            QueryError::Memory(_) => "query_memory_limit",
            QueryError::Timeout(_) => "query_timeout",
            QueryError::Throttled(..) => "throttled",
            QueryError::Invalid(_) | QueryError::InvalidField(..) => "invalid_input",
            QueryError::NotFound(_) => "not_found",
            QueryError::Meta(e) => e.code(),
            QueryError::Io { .. }
            | QueryError::DataFusionInternal(_)
            | QueryError::Storage(_)
            | QueryError::Delta(_)
            | QueryError::Arrow(_)
            | QueryError::PersonStore(_)
            | QueryError::TaskFailed(_)
            | QueryError::Internal(_) => "error",
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            QueryError::InvalidField(field, _) => Some(field.to_string()),
            QueryError::Meta(e) => e.attr(),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            QueryError::Throttled(_, secs) => Some(*secs),
            QueryError::Meta(e) => e.retry_after(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn datafusion_errors_keep_their_source_and_their_kind() {
        let e = QueryError::from(DataFusionError::Plan("no such column".into()));
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.code(), "hogql_query_error");
        assert_eq!(e.to_string(), "Error during planning: no such column");
        assert!(e.source().is_some());

        let inner = DataFusionError::ResourcesExhausted("Failed to allocate 1 MB".into());
        let e = QueryError::from(DataFusionError::Context("sort".into(), Box::new(inner)));
        assert_eq!(e.code(), "query_memory_limit");
        assert_eq!(
            e.to_string(),
            "The query needs more memory than the limit allows even with spilling: Failed to allocate 1 MB"
        );
        assert!(e.source().is_some());
    }

    /// An object store that does not answer is a 503 naming the cause but no URL; a missing
    /// object stays what it was.
    #[test]
    fn a_failing_store_is_unavailable_and_says_why() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let os = object_store::Error::Generic {
            store: "S3",
            source: Box::new(io),
        };
        let e = QueryError::Storage(StorageError::Delta(DeltaTableError::ObjectStore {
            source: os,
        }));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert_eq!(e.code(), "storage_unavailable");
        assert_eq!(
            e.to_string(),
            "The events table's storage could not be read (connection refused); retry later"
        );
        let df = QueryError::from(DataFusionError::ObjectStore(Box::new(
            object_store::Error::Generic {
                store: "S3",
                source: "timed out".into(),
            },
        )));
        assert_eq!(df.kind(), ErrorKind::Unavailable);
        assert!(df.to_string().contains("(timed out)"), "{df}");
        // As the table's snapshot fails when its log cannot be read.
        let kernel = QueryError::Storage(StorageError::Delta(DeltaTableError::KernelError(
            delta_kernel::Error::ObjectStore(object_store::Error::Generic {
                store: "S3",
                source: "error sending request".into(),
            }),
        )));
        assert_eq!(kernel.kind(), ErrorKind::Unavailable);
        assert!(
            kernel.to_string().contains("(error sending request)"),
            "{kernel}"
        );
        let missing = QueryError::from(DataFusionError::ObjectStore(Box::new(
            object_store::Error::NotFound {
                path: "x".into(),
                source: "gone".into(),
            },
        )));
        assert_eq!(missing.kind(), ErrorKind::InvalidInput);
    }

    /// A data file that does not decode is the server's problem (500), not the query's.
    #[test]
    fn an_unreadable_data_file_is_not_the_querys_fault() {
        let damaged = parquet::errors::ParquetError::General("Unexpected list element".into());
        let e = QueryError::from(DataFusionError::ParquetError(Box::new(damaged)));
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(e.code(), "data_file_unreadable");
        let wrapped = QueryError::from(DataFusionError::Context(
            "scan".into(),
            Box::new(DataFusionError::External(Box::new(
                parquet::errors::ParquetError::EOF("eof".into()),
            ))),
        ));
        assert_eq!(wrapped.kind(), ErrorKind::Internal);
    }

    /// A panic in one of DataFusion's tasks (as a damaged footer's schema gives in
    /// arrow-ipc) is a 500, not a `hogql_query_error` blaming the query.
    #[tokio::test]
    async fn a_panicked_task_is_not_the_querys_fault() {
        let join = || async {
            tokio::spawn(async { panic!("Type <UNKNOWN 86> not supported") })
                .await
                .unwrap_err()
        };
        for e in [
            DataFusionError::ExecutionJoin(Box::new(join().await)),
            // As RepartitionExec sends it.
            DataFusionError::Context(
                "Join Error".into(),
                Box::new(DataFusionError::External(Box::new(std::sync::Arc::new(
                    join().await,
                )))),
            ),
        ] {
            let e = QueryError::from(e);
            assert_eq!((e.kind(), e.code()), (ErrorKind::Internal, "error"), "{e}");
        }
        // A task that was cancelled, not one that panicked, stays as it was.
        let cancelled = tokio::spawn(std::future::pending::<()>());
        cancelled.abort();
        let e = QueryError::from(DataFusionError::ExecutionJoin(Box::new(
            cancelled.await.unwrap_err(),
        )));
        assert_eq!(e.code(), "hogql_query_error");
    }

    #[test]
    fn plan_errors_say_where() {
        let source = PlanError {
            message: "unknown column x".into(),
            span: None,
        };
        let e = QueryError::Plan {
            source: source.clone(),
            at: Some("line 1, column 8".into()),
        };
        assert_eq!(e.to_string(), "unknown column x (at line 1, column 8)");
        assert_eq!(e.code(), "hogql_query_error");
        let e = QueryError::Plan { source, at: None };
        assert_eq!(e.to_string(), "unknown column x");
    }

    #[test]
    fn internal_failures_are_internal() {
        let io = std::io::Error::other("disk gone");
        let e = QueryError::Io {
            what: "cannot create spill directory",
            source: io,
        };
        assert_eq!(e.to_string(), "cannot create spill directory: disk gone");
        assert_eq!((e.kind(), e.code()), (ErrorKind::Internal, "error"));
        assert!(e.source().is_some());
        let e = QueryError::Meta(MetaError::NoScopes);
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
}
