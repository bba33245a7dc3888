//! What a client asks of the query endpoint (`POST /api/projects/{id}/query/`): the JSON
//! body read into a [`QueryRequest`], its [`Refresh`] mode, and the [`HogQLNode`] it
//! carries. Pure serde: the engine plans and runs what this reads, the HTTP layer only
//! hands it the body, and `fuzz/` feeds it arbitrary bytes ([`fuzzing::check`]).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

pub mod fuzzing;

/// Longest accepted query name (spec §8).
pub const MAX_NAME_CHARS: usize = 128;
/// Longest accepted `client_query_id`: it names the query in URLs, the task registry and
/// the query log.
pub const MAX_CLIENT_QUERY_ID_CHARS: usize = 256;

/// Why a request is refused: each is a 400 `invalid_input` (or `required`), naming the
/// field when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// A required field is missing.
    Required(&'static str),
    /// The request is malformed as a whole.
    Invalid(String),
    /// One field is malformed.
    InvalidField(&'static str, String),
}

impl RequestError {
    /// The field the error is about.
    pub fn attr(&self) -> Option<&'static str> {
        match self {
            RequestError::Required(f) | RequestError::InvalidField(f, _) => Some(f),
            RequestError::Invalid(_) => None,
        }
    }

    /// What a client is told.
    pub fn detail(&self) -> String {
        match self {
            RequestError::Required(f) => format!("{f} is required"),
            RequestError::Invalid(m) | RequestError::InvalidField(_, m) => m.clone(),
        }
    }
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail())
    }
}

impl std::error::Error for RequestError {}

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
    /// Reads a mode by its name (`None`: the default, blocking). PostHog's older boolean
    /// form is accepted as the strings `"true"` (blocking) and `"false"` (the cache only).
    pub fn parse(s: Option<&str>) -> Result<Self, RequestError> {
        Ok(match s.unwrap_or("blocking") {
            "blocking" | "true" => Refresh::Blocking,
            "async" => Refresh::Async,
            "lazy_async" => Refresh::LazyAsync,
            "force_blocking" => Refresh::ForceBlocking,
            "force_async" => Refresh::ForceAsync,
            "force_cache" | "false" => Refresh::ForceCache,
            other => {
                return Err(RequestError::InvalidField(
                    "refresh",
                    format!(
                        "refresh must be one of blocking, async, lazy_async, force_blocking, force_async, force_cache; got '{other}'"
                    ),
                ));
            }
        })
    }

    /// The mode's name, as [`Refresh::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Refresh::Blocking => "blocking",
            Refresh::Async => "async",
            Refresh::LazyAsync => "lazy_async",
            Refresh::ForceBlocking => "force_blocking",
            Refresh::ForceAsync => "force_async",
            Refresh::ForceCache => "force_cache",
        }
    }

    /// Whether the query runs in the background while the request is answered at once.
    pub fn is_async(self) -> bool {
        matches!(
            self,
            Refresh::Async | Refresh::LazyAsync | Refresh::ForceAsync
        )
    }
}

/// The endpoint's JSON body as it arrives.
#[derive(Debug, Deserialize)]
pub struct QueryBody {
    query: Option<Value>,
    refresh: Option<Value>,
    client_query_id: Option<String>,
    name: Option<String>,
    /// PostHog's older flag: `async: true` means `refresh: "async"`.
    #[serde(rename = "async")]
    is_async: Option<bool>,
    /// A dashboard's filters on top of the query's own: `date_from`/`date_to` replace its
    /// date range, `properties` are added to its property filters.
    filters_override: Option<Value>,
    /// New values for the query's variables, by variable id.
    variables_override: Option<Value>,
}

impl QueryBody {
    /// The request the body asks for. Its name and `client_query_id` are checked by
    /// [`QueryRequest::check_name`] and [`QueryRequest::check_client_query_id`], and its
    /// node by [`HogQLNode::from_value`], where the engine answers them.
    pub fn into_request(self) -> Result<QueryRequest, RequestError> {
        let query = self.query.ok_or(RequestError::Required("query"))?;
        let refresh = match &self.refresh {
            None | Some(Value::Null) => {
                if self.is_async == Some(true) {
                    Refresh::Async
                } else {
                    Refresh::Blocking
                }
            }
            Some(Value::String(s)) => Refresh::parse(Some(s))?,
            Some(Value::Bool(b)) => Refresh::parse(Some(if *b { "true" } else { "false" }))?,
            Some(other) => {
                return Err(RequestError::InvalidField(
                    "refresh",
                    format!("refresh must be a string, got {other}"),
                ));
            }
        };
        let mut query = unwrap_display(query);
        if let Some(o) = self.filters_override.filter(|v| !v.is_null()) {
            apply_filters_override(&mut query, o)?;
        }
        if let Some(o) = self.variables_override.filter(|v| !v.is_null()) {
            apply_variables_override(&mut query, o)?;
        }
        Ok(QueryRequest {
            query,
            refresh,
            client_query_id: self.client_query_id,
            name: self.name,
        })
    }
}

/// The query a display node shows (`InsightVizNode`, `DataTableNode`,
/// `DataVisualizationNode` hold it in `source`), as PostHog's app sends them.
fn unwrap_display(mut query: Value) -> Value {
    for _ in 0..4 {
        let wrapper = matches!(
            query.get("kind").and_then(Value::as_str),
            Some("InsightVizNode" | "DataTableNode" | "DataVisualizationNode")
        );
        match query.get("source") {
            Some(Value::Object(_)) if wrapper => {
                query = query.get("source").cloned().expect("a source");
            }
            _ => break,
        }
    }
    query
}

/// `filters_override` (a dashboard's filters: `date_from`, `date_to`, `properties`,
/// `explicitDate`) applied to the node's `filters` as PostHog applies them to a
/// HogQLQuery: the dates replace its `dateRange`, the properties join its own. Anything
/// else (a breakdown) has nowhere to go in a HogQLQuery and is refused, not dropped.
fn apply_filters_override(query: &mut Value, o: Value) -> Result<(), RequestError> {
    let bad = |m: String| RequestError::InvalidField("filters_override", m);
    let Value::Object(o) = o else {
        return Err(bad(format!("filters_override must be an object, got {o}")));
    };
    let hogql = query.get("kind").and_then(Value::as_str) == Some("HogQLQuery");
    for (k, v) in &o {
        match k.as_str() {
            "date_from" | "date_to" | "properties" | "explicitDate" => {}
            "breakdown_filter" if !hogql => {}
            _ if v.is_null() => {}
            other => {
                return Err(bad(format!(
                    "filters_override.{other} does not apply to this query; it takes date_from, date_to, properties (and breakdown_filter for insights)"
                )));
            }
        }
    }
    let Some(node) = query.as_object_mut() else {
        return Ok(()); // the node itself is refused where it is read
    };
    if node.get("kind").and_then(Value::as_str) != Some("HogQLQuery") {
        return override_insight(node, o);
    }
    let filters = node
        .entry("filters")
        .or_insert_with(|| Value::Object(Default::default()));
    if filters.is_null() {
        *filters = Value::Object(Default::default());
    }
    let Some(filters) = filters.as_object_mut() else {
        return Err(RequestError::Invalid(
            "query.filters must be an object".into(),
        ));
    };
    apply_dashboard(filters, &o)
}

/// A dashboard's dates and properties onto `target` (a HogQLQuery's `filters`, or an
/// insight node): the dates replace `dateRange`, the properties join `properties` (a group
/// on either side kept whole under AND).
fn apply_dashboard(
    target: &mut serde_json::Map<String, Value>,
    o: &serde_json::Map<String, Value>,
) -> Result<(), RequestError> {
    let bad = |m: String| RequestError::InvalidField("filters_override", m);
    let (from, to) = (o.get("date_from"), o.get("date_to"));
    if from.is_some_and(|v| !v.is_null()) || to.is_some_and(|v| !v.is_null()) {
        let mut range = serde_json::Map::new();
        for (k, v) in [("date_from", from), ("date_to", to)] {
            match v {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => {
                    range.insert(k.into(), Value::String(s.clone()));
                }
                Some(other) => {
                    return Err(bad(format!(
                        "filters_override.{k} must be a date text, got {other}"
                    )));
                }
            }
        }
        if let Some(e) = o.get("explicitDate").filter(|v| !v.is_null()) {
            range.insert("explicitDate".into(), e.clone());
        }
        target.insert("dateRange".into(), Value::Object(range));
    }
    match o.get("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Array(extra)) if extra.is_empty() => {}
        Some(extra @ (Value::Array(_) | Value::Object(_))) => {
            let merged = match target.remove("properties") {
                None | Some(Value::Null) => extra.clone(),
                Some(Value::Array(mut own)) if extra.is_array() => {
                    own.extend(extra.as_array().expect("an array").iter().cloned());
                    Value::Array(own)
                }
                Some(own) => json!({"type": "AND", "values": [own, extra]}),
            };
            target.insert("properties".into(), merged);
        }
        Some(other) => {
            return Err(bad(format!(
                "filters_override.properties must be a list of property filters, got {other}"
            )));
        }
    }
    Ok(())
}

/// `filters_override` on an insight node, as PostHog applies a dashboard's filters: the
/// dates replace `dateRange`, the properties join `properties`, a breakdown replaces
/// `breakdownFilter`.
fn override_insight(
    node: &mut serde_json::Map<String, Value>,
    o: serde_json::Map<String, Value>,
) -> Result<(), RequestError> {
    apply_dashboard(node, &o)?;
    if let Some(b) = o.get("breakdown_filter").filter(|v| !v.is_null()) {
        node.insert("breakdownFilter".into(), b.clone());
    }
    Ok(())
}

/// `variables_override` (`{id: {value, code_name?, variableId?}}`) applied to the node's
/// `variables`: a variable the query has gets the new value; one it lacks is added when
/// the override names its `code_name`, and refused otherwise (PostHog drops it silently).
fn apply_variables_override(query: &mut Value, o: Value) -> Result<(), RequestError> {
    let bad = |m: String| RequestError::InvalidField("variables_override", m);
    let Value::Object(o) = o else {
        return Err(bad(format!(
            "variables_override must be an object of variable id → {{value}}, got {o}"
        )));
    };
    let Some(node) = query.as_object_mut() else {
        return Ok(());
    };
    let vars = node
        .entry("variables")
        .or_insert_with(|| Value::Object(Default::default()));
    if vars.is_null() {
        *vars = Value::Object(Default::default());
    }
    let Some(vars) = vars.as_object_mut() else {
        return Err(RequestError::Invalid(
            "query.variables must be an object".into(),
        ));
    };
    for (id, over) in o {
        let Value::Object(over) = over else {
            return Err(bad(format!(
                "variables_override.{id} must be an object with a value, got {over}"
            )));
        };
        let value = over.get("value").cloned().unwrap_or(Value::Null);
        match vars.get_mut(&id) {
            Some(Value::Object(own)) => {
                own.insert("value".into(), value);
            }
            _ => match over.get("code_name") {
                Some(Value::String(code)) => {
                    vars.insert(
                        id.clone(),
                        json!({"variableId": id, "code_name": code, "value": value}),
                    );
                }
                _ => {
                    return Err(bad(format!(
                        "variables_override.{id} names no variable of the query; give its code_name to add it"
                    )));
                }
            },
        }
    }
    Ok(())
}

/// One request to the query endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRequest {
    /// The query node (`{"kind": "HogQLQuery", "query": …, "values"?, "modifiers"?}`).
    pub query: Value,
    pub refresh: Refresh,
    pub client_query_id: Option<String>,
    pub name: Option<String>,
}

impl QueryRequest {
    /// The name is at most [`MAX_NAME_CHARS`] characters.
    pub fn check_name(&self) -> Result<(), RequestError> {
        match &self.name {
            Some(n) if n.chars().count() > MAX_NAME_CHARS => Err(RequestError::InvalidField(
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
    pub fn check_client_query_id(&self) -> Result<(), RequestError> {
        match &self.client_query_id {
            Some(id) if id.chars().count() > MAX_CLIENT_QUERY_ID_CHARS || id.is_empty() => {
                Err(RequestError::InvalidField(
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

    /// The request as a body that reads back as the same request.
    pub fn to_body(&self) -> Value {
        let mut body = json!({"query": self.query, "refresh": self.refresh.name()});
        if let Some(id) = &self.client_query_id {
            body["client_query_id"] = json!(id);
        }
        if let Some(n) = &self.name {
            body["name"] = json!(n);
        }
        body
    }
}

/// How `person_id` and `person.properties` of events are read (PostHog's
/// `personsOnEventsMode` modifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum PersonsMode {
    /// The event's own person id, the event-time snapshot of properties.
    IdNoOverridePropertiesOnEvents,
    /// Merged persons' events answer as the merged-into person; event-time properties.
    #[default]
    IdOverridePropertiesOnEvents,
    /// Overrides applied, and `person.properties` are the person's current properties.
    IdOverridePropertiesJoined,
}

impl PersonsMode {
    pub const NAMES: &[&str] = &[
        "person_id_no_override_properties_on_events",
        "person_id_override_properties_on_events",
        "person_id_override_properties_joined",
        "disabled",
    ];

    /// Reads the modifier; `disabled` (persons read from the persons tables) is answered as
    /// the joined mode, which gives the same persons.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "person_id_no_override_properties_on_events" => {
                Some(Self::IdNoOverridePropertiesOnEvents)
            }
            "person_id_override_properties_on_events" => Some(Self::IdOverridePropertiesOnEvents),
            "person_id_override_properties_joined" | "disabled" => {
                Some(Self::IdOverridePropertiesJoined)
            }
            _ => None,
        }
    }

    pub fn overrides(self) -> bool {
        self != Self::IdNoOverridePropertiesOnEvents
    }

    pub fn joined_properties(self) -> bool {
        self == Self::IdOverridePropertiesJoined
    }
}

/// A HogQLQuery node, read from the request.
#[derive(Debug, Clone, PartialEq)]
pub struct HogQLNode {
    pub query: String,
    pub values: HashMap<String, Value>,
    pub modifiers: Value,
    /// `modifiers.personsOnEventsMode`.
    pub persons_mode: PersonsMode,
}

impl HogQLNode {
    pub fn from_value(v: &Value) -> Result<Self, RequestError> {
        let obj = v
            .as_object()
            .ok_or_else(|| RequestError::Invalid("query must be an object with a kind".into()))?;
        match obj.get("kind").and_then(Value::as_str) {
            Some("HogQLQuery") => {}
            Some(other) => {
                return Err(RequestError::Invalid(format!(
                    "query kind '{other}' is not supported; use HogQLQuery or TrendsQuery"
                )));
            }
            None => return Err(RequestError::Invalid("query.kind is required".into())),
        }
        let query = obj
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| RequestError::Invalid("query.query must be the HogQL text".into()))?
            .to_string();
        let values = match obj.get("values") {
            None | Some(Value::Null) => HashMap::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                return Err(RequestError::Invalid(
                    "query.values must be an object".into(),
                ));
            }
        };
        let mut values = values;
        // `{filters}` stands for the node's filters (the engine compiles them), and
        // `{variables.<code_name>}` for each variable's value.
        match obj.get("filters") {
            None | Some(Value::Null) => {}
            Some(f @ Value::Object(_)) => {
                values.insert("filters".into(), f.clone());
            }
            Some(other) => {
                return Err(RequestError::Invalid(format!(
                    "query.filters must be an object with properties and dateRange, got {other}"
                )));
            }
        }
        match obj.get("variables") {
            None | Some(Value::Null) => {}
            Some(Value::Object(vars)) => {
                for (id, var) in vars {
                    let code = var.get("code_name").and_then(Value::as_str).filter(|c| {
                        !c.is_empty()
                            && c.chars()
                                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '$')
                    });
                    let Some(code) = code else {
                        return Err(RequestError::Invalid(format!(
                            "query.variables.{id} needs a code_name of letters, digits and _"
                        )));
                    };
                    let value = var.get("value").cloned().unwrap_or(Value::Null);
                    values.insert(format!("variables.{code}"), value);
                }
            }
            Some(other) => {
                return Err(RequestError::Invalid(format!(
                    "query.variables must be an object of variable id → {{code_name, value}}, got {other}"
                )));
            }
        }
        let modifiers = obj.get("modifiers").cloned().unwrap_or_else(|| json!({}));
        let persons_mode = match modifiers.get("personsOnEventsMode") {
            None | Some(Value::Null) => PersonsMode::default(),
            Some(Value::String(m)) => PersonsMode::parse(m).ok_or_else(|| {
                RequestError::Invalid(format!(
                    "modifiers.personsOnEventsMode '{m}' is not supported; use one of: {}",
                    PersonsMode::NAMES.join(", ")
                ))
            })?,
            Some(_) => {
                return Err(RequestError::Invalid(
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
}
