//! What a client asks of the query endpoint: the request, its refresh mode and its
//! HogQLQuery node.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::QueryError;
use crate::hogql::functions::WeekStart;
use crate::hogql::overrides::PersonsMode;

/// Longest accepted query name (spec §8).
pub const MAX_NAME_CHARS: usize = 128;
/// Longest accepted `client_query_id`: it names the query in URLs, the task registry and
/// the query log.
pub const MAX_CLIENT_QUERY_ID_CHARS: usize = 256;

/// The refresh modes of PostHog's query API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    Blocking,
    Async,
    LazyAsync,
    ForceBlocking,
    ForceAsync,
    ForceCache,
}

impl Refresh {
    pub fn parse(s: Option<&str>) -> Result<Self, QueryError> {
        Ok(match s.unwrap_or("blocking") {
            "blocking" | "true" => Refresh::Blocking,
            "async" => Refresh::Async,
            "lazy_async" => Refresh::LazyAsync,
            "force_blocking" => Refresh::ForceBlocking,
            "force_async" => Refresh::ForceAsync,
            "force_cache" | "false" => Refresh::ForceCache,
            other => {
                return Err(QueryError::Invalid(format!(
                    "refresh must be one of blocking, async, lazy_async, force_blocking, force_async, force_cache; got '{other}'"
                )));
            }
        })
    }

    /// Whether the query runs in the background while the request is answered at once.
    pub(super) fn is_async(self) -> bool {
        matches!(
            self,
            Refresh::Async | Refresh::LazyAsync | Refresh::ForceAsync
        )
    }
}

/// One request to the query endpoint.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    /// The query node (`{"kind": "HogQLQuery", "query": …, "values"?, "modifiers"?}`).
    pub query: Value,
    pub refresh: Refresh,
    pub client_query_id: Option<String>,
    pub name: Option<String>,
}

impl QueryRequest {
    /// The name is at most [`MAX_NAME_CHARS`] characters.
    pub(super) fn check_name(&self) -> Result<(), QueryError> {
        match &self.name {
            Some(n) if n.chars().count() > MAX_NAME_CHARS => Err(QueryError::InvalidField(
                "name",
                format!(
                    "name must be at most {MAX_NAME_CHARS} characters, got {}",
                    n.chars().count()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// A `client_query_id` has 1 to [`MAX_CLIENT_QUERY_ID_CHARS`] characters.
    pub(super) fn check_client_query_id(&self) -> Result<(), QueryError> {
        match &self.client_query_id {
            Some(id) if id.chars().count() > MAX_CLIENT_QUERY_ID_CHARS || id.is_empty() => {
                Err(QueryError::InvalidField(
                    "client_query_id",
                    format!(
                        "client_query_id must be 1 to {MAX_CLIENT_QUERY_ID_CHARS} characters, got {}",
                        id.chars().count()
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A HogQLQuery node, read from the request.
#[derive(Debug, Clone)]
pub struct HogQLNode {
    pub query: String,
    pub values: HashMap<String, Value>,
    pub modifiers: Value,
    /// `modifiers.personsOnEventsMode`.
    pub persons_mode: PersonsMode,
}

impl HogQLNode {
    pub fn from_value(v: &Value) -> Result<Self, QueryError> {
        let obj = v
            .as_object()
            .ok_or_else(|| QueryError::Invalid("query must be an object with a kind".into()))?;
        match obj.get("kind").and_then(Value::as_str) {
            Some("HogQLQuery") => {}
            Some(other) => {
                return Err(QueryError::Invalid(format!(
                    "query kind '{other}' is not supported; use HogQLQuery"
                )));
            }
            None => return Err(QueryError::Invalid("query.kind is required".into())),
        }
        let query = obj
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| QueryError::Invalid("query.query must be the HogQL text".into()))?
            .to_string();
        let values = match obj.get("values") {
            None | Some(Value::Null) => HashMap::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => return Err(QueryError::Invalid("query.values must be an object".into())),
        };
        let modifiers = obj.get("modifiers").cloned().unwrap_or_else(|| json!({}));
        let persons_mode = match modifiers.get("personsOnEventsMode") {
            None | Some(Value::Null) => PersonsMode::default(),
            Some(Value::String(m)) => PersonsMode::parse(m).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "modifiers.personsOnEventsMode '{m}' is not supported; use one of: {}",
                    PersonsMode::NAMES.join(", ")
                ))
            })?,
            Some(_) => {
                return Err(QueryError::Invalid(
                    "modifiers.personsOnEventsMode must be a string".into(),
                ));
            }
        };
        Ok(Self {
            query,
            values,
            modifiers,
            persons_mode,
        })
    }

    /// The modifiers the endpoint plans this node with (weeks start on Sunday, as
    /// PostHog's default).
    pub(super) fn plan_modifiers(&self) -> Modifiers {
        Modifiers {
            week_start: WeekStart::Sunday,
            persons_mode: self.persons_mode,
        }
    }
}

/// The query modifiers that change how a query is planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modifiers {
    pub week_start: WeekStart,
    pub persons_mode: PersonsMode,
}
