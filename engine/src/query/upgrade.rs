//! `POST /query/upgrade/`: brings every node of a query to its kind's latest `version`
//! without running it.
//!
//! A node is any JSON object with a `kind`. Nodes of kinds we know get their latest version
//! and, for `EventsNode`, every field PostHog's schema lists (null when absent), so clients
//! see one stable shape. Unknown kinds are kept as they are, with the version they had.

use serde_json::{Map, Value};

use super::QueryError;

/// Latest schema version of each node kind we know. No kind has had a breaking migration
/// yet, so all are at 1; a migration adds a step in `migrate` and bumps its number here.
pub(crate) const LATEST_VERSIONS: &[(&str, u64)] = &[
    ("ActionsNode", 1),
    ("DataTableNode", 1),
    ("DataVisualizationNode", 1),
    ("EventsNode", 1),
    ("EventsQuery", 1),
    ("FunnelsQuery", 1),
    ("HogQLQuery", 1),
    ("InsightVizNode", 1),
    ("LifecycleQuery", 1),
    ("PathsQuery", 1),
    ("PersonsNode", 1),
    ("RetentionQuery", 1),
    ("StickinessQuery", 1),
    ("TrendsQuery", 1),
];

/// Fields an `EventsNode` always carries after an upgrade (spec §2.4).
pub(crate) const EVENTS_NODE_FIELDS: &[&str] = &[
    "custom_name",
    "event",
    "fixedProperties",
    "limit",
    "math",
    "math_group_type_index",
    "math_hogql",
    "math_multiplier",
    "math_property",
    "math_property_revenue_currency",
    "math_property_type",
    "name",
    "optionalInFunnel",
    "orderBy",
    "properties",
    "response",
    "version",
];

pub(crate) fn upgrade(query: Value) -> Result<Value, QueryError> {
    match &query {
        Value::Object(m) if m.get("kind").is_some_and(Value::is_string) => Ok(walk(query)),
        _ => Err(QueryError::Invalid(
            "query must be a query node: an object with a string `kind`".into(),
        )),
    }
}

fn walk(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let m: Map<String, Value> = m.into_iter().map(|(k, v)| (k, walk(v))).collect();
            match m.get("kind").and_then(Value::as_str).map(str::to_string) {
                Some(kind) => Value::Object(migrate(&kind, m)),
                None => Value::Object(m),
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(walk).collect()),
        other => other,
    }
}

fn migrate(kind: &str, mut node: Map<String, Value>) -> Map<String, Value> {
    let Some(&(_, latest)) = LATEST_VERSIONS.iter().find(|(k, _)| *k == kind) else {
        return node;
    };
    let from = node.get("version").and_then(Value::as_u64).unwrap_or(0);
    // Migrations from `from` to `latest` go here, one step per version.
    if from < latest {
        node.insert("version".into(), Value::from(latest));
    }
    if kind == "EventsNode" {
        for f in EVENTS_NODE_FIELDS {
            node.entry(f.to_string()).or_insert(Value::Null);
        }
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nodes_get_latest_versions_and_full_shapes() {
        let q = json!({
            "kind": "InsightVizNode",
            "source": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}
        });
        let u = upgrade(q).unwrap();
        assert_eq!(u["version"], 1);
        assert_eq!(u["source"]["version"], 1);
        let node = &u["source"]["series"][0];
        assert_eq!(node["event"], "$pageview");
        assert_eq!(node["version"], 1);
        for f in EVENTS_NODE_FIELDS {
            assert!(node.get(*f).is_some(), "{f} missing");
        }
        assert!(node["math"].is_null());
        // Idempotent.
        assert_eq!(upgrade(u.clone()).unwrap(), u);
        // Unknown kinds are left alone.
        let u = upgrade(json!({"kind": "SomethingNew", "x": 1})).unwrap();
        assert_eq!(u, json!({"kind": "SomethingNew", "x": 1}));
        assert!(upgrade(json!([1])).is_err());
        assert!(upgrade(json!({"query": "x"})).is_err());
    }
}
