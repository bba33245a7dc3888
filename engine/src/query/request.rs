//! What a client asks of the query endpoint: read by `hedgerow-query-request` (the body,
//! its refresh mode and its HogQLQuery node, fuzzed alone), planned here with the
//! [`Modifiers`] a node asks for.

pub use hedgerow_query_request::{
    HogQLNode, MAX_CLIENT_QUERY_ID_CHARS, MAX_NAME_CHARS, QueryBody, QueryRequest, Refresh,
    RequestError,
};

use super::QueryError;
use crate::hogql::functions::WeekStart;
use crate::hogql::overrides::PersonsMode;

impl From<RequestError> for QueryError {
    fn from(e: RequestError) -> Self {
        match e.attr() {
            Some(field) => QueryError::InvalidField(field, e.detail()),
            None => QueryError::Invalid(e.detail()),
        }
    }
}

/// The modifiers the endpoint plans `node` with (weeks start on Sunday, as PostHog's
/// default).
pub(super) fn plan_modifiers(node: &HogQLNode) -> Modifiers {
    Modifiers {
        week_start: WeekStart::Sunday,
        persons_mode: node.persons_mode,
        whole: false,
    }
}

/// The query modifiers that change how a query is planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modifiers {
    pub week_start: WeekStart,
    pub persons_mode: PersonsMode,
    /// An internal run that needs every row (a cohort's members): no LIMIT rules, and the
    /// rows stay in `batches` (no JSON `results`).
    pub whole: bool,
}
