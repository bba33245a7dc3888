//! `POST /query/upgrade/`: brings every node of a query to its kind's latest `version`
//! without running it.
//!
//! A node is any JSON object with a `kind`. A node's `version` (absent: 1) is raised one
//! step at a time through the migrations PostHog's schema has had, each the same change of
//! shape PostHog makes; then its children are upgraded (a migration may give a child its
//! `kind`). Kinds without migrations are at version 1, and every `EventsNode` carries every
//! field PostHog's schema lists (null when absent), so clients see one stable shape.
//! Unknown kinds are kept as they are.
//!
//! The migrations, by the version they start from:
//! - `RetentionQuery` 1: `retentionFilter.showMean` (a boolean) becomes
//!   `meanRetentionCalculation` (`simple` or `none`), unless that is already set.
//! - `TrendsQuery` 1: `trendsFilter.hiddenLegendIndexes` become hidden
//!   `resultCustomizations` by position (dropped when the customizations are by value).
//! - `TrendsQuery`, `StickinessQuery` 2: customizations keyed per compared period merge into
//!   their series' key (by value: the `compare_label` leaves the key and the current
//!   period's entry wins; by position, with compare on and no breakdown: the previous
//!   period's positions shift back onto their series').
//! - `TrendsQuery`, `StickinessQuery` 3, `LifecycleQuery`, `FunnelsQuery` and
//!   `CalendarHeatmapQuery` 1: series items and funnel exclusions without a `kind` get one
//!   (`ActionsNode` for an `id` without an `event`, the data warehouse node for a
//!   `table_name`, `EventsNode` otherwise).
//! - `TrendsQuery`, `StickinessQuery` 4: customizations not of the mode in
//!   `resultCustomizationBy` (default by value) are dropped.
//! - `DataVisualizationNode` 1: `chartSettings.showPieTotal` moves to
//!   `chartSettings.pie.showTotal` (an existing `showTotal` wins).

use serde_json::{Map, Value, json};

use super::QueryError;

/// Latest schema version of each node kind we know.
pub(crate) const LATEST_VERSIONS: &[(&str, u64)] = &[
    ("ActionsNode", 1),
    ("CalendarHeatmapQuery", 2),
    ("DataTableNode", 1),
    ("DataVisualizationNode", 2),
    ("EventsNode", 1),
    ("EventsQuery", 1),
    ("FunnelCorrelationQuery", 1),
    ("FunnelsQuery", 2),
    ("HogQLQuery", 1),
    ("InsightVizNode", 1),
    ("LifecycleQuery", 2),
    ("PathsQuery", 1),
    ("PersonsNode", 1),
    ("RetentionQuery", 2),
    ("StickinessQuery", 5),
    ("TrendsQuery", 5),
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

/// A node first (its migrations may give children their kind), then its children.
fn walk(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let m = match m.get("kind").and_then(Value::as_str).map(str::to_string) {
                Some(kind) => migrate(&kind, m),
                None => m,
            };
            Value::Object(m.into_iter().map(|(k, v)| (k, walk(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(walk).collect()),
        other => other,
    }
}

fn migrate(kind: &str, mut node: Map<String, Value>) -> Map<String, Value> {
    let Some(&(_, latest)) = LATEST_VERSIONS.iter().find(|(k, _)| *k == kind) else {
        return node;
    };
    let mut version = node
        .get("version")
        .and_then(Value::as_u64)
        .filter(|v| *v >= 1)
        .unwrap_or(1);
    while version < latest {
        step(kind, version, &mut node);
        version += 1;
    }
    node.insert("version".into(), Value::from(version.max(latest)));
    if kind == "EventsNode" {
        for f in EVENTS_NODE_FIELDS {
            node.entry(f.to_string()).or_insert(Value::Null);
        }
    }
    node
}

/// The migration of `kind` from `version` to the next.
fn step(kind: &str, version: u64, node: &mut Map<String, Value>) {
    match (kind, version) {
        ("RetentionQuery", 1) => retention_show_mean(node),
        ("TrendsQuery", 1) => hidden_legend_indexes(node),
        ("TrendsQuery" | "StickinessQuery", 2) => customizations_per_series(kind, node),
        ("TrendsQuery" | "StickinessQuery", 3)
        | ("LifecycleQuery" | "FunnelsQuery" | "CalendarHeatmapQuery", 1) => {
            entity_kinds(kind, node)
        }
        ("TrendsQuery" | "StickinessQuery", 4) => customizations_of_one_mode(kind, node),
        ("DataVisualizationNode", 1) => pie_total(node),
        _ => {}
    }
}

fn retention_show_mean(node: &mut Map<String, Value>) {
    let Some(Value::Object(f)) = node.get_mut("retentionFilter") else {
        return;
    };
    if let Some(show) = f.remove("showMean")
        && !f.contains_key("meanRetentionCalculation")
    {
        let mean = match show.as_bool() == Some(true) {
            true => "simple",
            false => "none",
        };
        f.insert("meanRetentionCalculation".into(), json!(mean));
    }
}

fn hidden_legend_indexes(node: &mut Map<String, Value>) {
    let Some(Value::Object(f)) = node.get_mut("trendsFilter") else {
        return;
    };
    let hidden = match f.get("hiddenLegendIndexes") {
        Some(Value::Array(a)) if !a.is_empty() => a.clone(),
        _ => return,
    };
    f.remove("hiddenLegendIndexes");
    let mut custom = match f.get("resultCustomizations") {
        Some(Value::Object(c)) => c.clone(),
        _ => Map::new(),
    };
    let by_value = custom
        .values()
        .any(|v| v.get("assignmentBy").and_then(Value::as_str) == Some("value"));
    let mode = f.get("resultCustomizationBy").and_then(Value::as_str);
    if by_value && mode.is_none_or(|m| m == "value") {
        return;
    }
    for i in hidden {
        let key = match &i {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let entry = custom
            .entry(key)
            .or_insert_with(|| json!({"assignmentBy": "position"}));
        if let Value::Object(e) = entry {
            e.insert("hidden".into(), json!(true));
        }
    }
    f.insert("resultCustomizationBy".into(), json!("position"));
    f.insert("resultCustomizations".into(), Value::Object(custom));
}

fn filter_key(kind: &str) -> &'static str {
    match kind {
        "StickinessQuery" => "stickinessFilter",
        _ => "trendsFilter",
    }
}

fn compare_on(node: &Map<String, Value>) -> bool {
    node.get("compareFilter")
        .and_then(|c| c.get("compare"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn customizations_per_series(kind: &str, node: &mut Map<String, Value>) {
    let compare = compare_on(node);
    let breakdown = node.get("breakdownFilter").is_some_and(|b| {
        let set = |k: &str| b.get(k).is_some_and(|v| !v.is_null() && v != "");
        (set("breakdown_type") && set("breakdown"))
            || b.get("breakdowns")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    });
    let series = node
        .get("series")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let Some(Value::Object(f)) = node.get_mut(filter_key(kind)) else {
        return;
    };
    let custom = match f.get("resultCustomizations") {
        Some(Value::Object(c)) if !c.is_empty() => c.clone(),
        _ => return,
    };
    let merged = match f.get("resultCustomizationBy").and_then(Value::as_str) {
        Some("position") => {
            if !compare || breakdown {
                return;
            }
            let formulas = |k: &str| f.get(k).and_then(Value::as_array).map_or(0, Vec::len);
            let base = match (formulas("formulaNodes"), formulas("formulas")) {
                (n, _) if n > 0 => n,
                (_, n) if n > 0 => n,
                _ if f
                    .get("formula")
                    .is_some_and(|x| x.as_str().is_some_and(|s| !s.is_empty())) =>
                {
                    1
                }
                _ => series,
            };
            if base == 0 {
                return;
            }
            let mut out = Map::new();
            let mut shifted = Vec::new();
            for (k, v) in custom {
                match k.parse::<usize>() {
                    Ok(p) if p >= base => shifted.push((p - base, v)),
                    _ => {
                        out.insert(k, v);
                    }
                }
            }
            for (p, v) in shifted {
                out.entry(p.to_string()).or_insert(v);
            }
            out
        }
        _ => {
            let mut out = Map::new();
            for (k, v) in custom {
                match serde_json::from_str::<Value>(&k) {
                    Ok(Value::Object(mut key)) if key.contains_key("compare_label") => {
                        let label = key.remove("compare_label");
                        if label.as_ref().and_then(Value::as_str) != Some("current") {
                            continue;
                        }
                        let base = Value::Object(key).to_string();
                        if out.contains_key(&base) && !compare {
                            continue;
                        }
                        out.insert(base, v);
                    }
                    _ => {
                        if out.contains_key(&k) && compare {
                            continue;
                        }
                        out.insert(k, v);
                    }
                }
            }
            out
        }
    };
    f.insert("resultCustomizations".into(), Value::Object(merged));
}

fn entity_kinds(kind: &str, node: &mut Map<String, Value>) {
    let warehouse = match kind {
        "FunnelsQuery" => "FunnelsDataWarehouseNode",
        _ => "DataWarehouseNode",
    };
    let stamp = |item: &mut Value, warehouse: Option<&str>| {
        let Value::Object(m) = item else { return };
        if m.contains_key("kind") {
            return;
        }
        let k = match warehouse {
            Some(w) if m.contains_key("table_name") => w,
            _ if m.contains_key("id") && !m.contains_key("event") => "ActionsNode",
            _ => "EventsNode",
        };
        m.insert("kind".into(), json!(k));
    };
    if let Some(Value::Array(series)) = node.get_mut("series") {
        series.iter_mut().for_each(|s| stamp(s, Some(warehouse)));
    }
    if kind == "FunnelsQuery"
        && let Some(Value::Array(x)) = node
            .get_mut("funnelsFilter")
            .and_then(|f| f.get_mut("exclusions"))
    {
        x.iter_mut().for_each(|s| stamp(s, None));
    }
}

fn customizations_of_one_mode(kind: &str, node: &mut Map<String, Value>) {
    let Some(Value::Object(f)) = node.get_mut(filter_key(kind)) else {
        return;
    };
    let mode = f
        .get("resultCustomizationBy")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or("value")
        .to_string();
    if let Some(Value::Object(c)) = f.get_mut("resultCustomizations") {
        c.retain(|_, v| {
            v.get("assignmentBy")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or("value")
                == mode
        });
    }
}

fn pie_total(node: &mut Map<String, Value>) {
    let Some(Value::Object(c)) = node.get_mut("chartSettings") else {
        return;
    };
    let Some(show) = c.remove("showPieTotal") else {
        return;
    };
    let pie = c.entry("pie").or_insert_with(|| json!({}));
    if let Value::Object(p) = pie {
        p.entry("showTotal").or_insert(show);
    }
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
        assert_eq!(u["source"]["version"], 5);
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

    #[test]
    fn older_shapes_migrate_as_posthogs_schema_did() {
        // A version-1 trend: hidden legend indexes, kind-less series, mixed customizations.
        let u = upgrade(
            json!({"kind": "TrendsQuery", "series": [{"event": "$pageview"}, {"id": 7}],
            "trendsFilter": {"hiddenLegendIndexes": [1]}}),
        )
        .unwrap();
        assert_eq!(u["version"], 5);
        assert_eq!(u["series"][0]["kind"], "EventsNode");
        assert_eq!(u["series"][0]["version"], 1);
        assert!(
            u["series"][0]["math"].is_null(),
            "the stamped node is upgraded too"
        );
        assert_eq!(u["series"][1]["kind"], "ActionsNode");
        assert_eq!(
            u["trendsFilter"],
            json!({"resultCustomizationBy": "position",
                   "resultCustomizations": {"1": {"assignmentBy": "position", "hidden": true}}})
        );
        // Compared periods by value merge into their series' key; the previous one goes.
        let cur = r#"{"series":0,"compare_label":"current"}"#;
        let prev = r#"{"series":0,"compare_label":"previous"}"#;
        let u = upgrade(json!({"kind": "TrendsQuery", "version": 2, "series": [],
            "compareFilter": {"compare": true},
            "trendsFilter": {"resultCustomizations": {
                cur: {"assignmentBy": "value", "color": "a"},
                prev: {"assignmentBy": "value", "hidden": true}}}}))
        .unwrap();
        assert_eq!(
            u["trendsFilter"]["resultCustomizations"],
            json!({r#"{"series":0}"#: {"assignmentBy": "value", "color": "a"}})
        );
        // By position with compare on: the previous period's positions shift back.
        let u = upgrade(json!({"kind": "StickinessQuery", "version": 2,
            "series": [{"kind": "EventsNode"}, {"kind": "EventsNode"}],
            "compareFilter": {"compare": true},
            "stickinessFilter": {"resultCustomizationBy": "position", "resultCustomizations": {
                "0": {"assignmentBy": "position", "color": "a"},
                "3": {"assignmentBy": "position", "color": "b"}}}}))
        .unwrap();
        assert_eq!(
            u["stickinessFilter"]["resultCustomizations"],
            json!({"0": {"assignmentBy": "position", "color": "a"},
                   "1": {"assignmentBy": "position", "color": "b"}})
        );
        // Version 4: only the customizations of the chosen mode stay.
        let u = upgrade(json!({"kind": "TrendsQuery", "version": 4, "series": [],
            "trendsFilter": {"resultCustomizations": {
                "0": {"assignmentBy": "position"}, "x": {"assignmentBy": "value"}}}}))
        .unwrap();
        assert_eq!(
            u["trendsFilter"]["resultCustomizations"],
            json!({"x": {"assignmentBy": "value"}})
        );
        // Retention's mean, funnel exclusions, the pie's total.
        let u = upgrade(json!({"kind": "RetentionQuery", "retentionFilter": {"showMean": true}}))
            .unwrap();
        assert_eq!(
            u["retentionFilter"],
            json!({"meanRetentionCalculation": "simple"})
        );
        let u = upgrade(json!({"kind": "FunnelsQuery", "series": [{}, {"event": "b"}],
            "funnelsFilter": {"exclusions": [{"event": "x", "funnelFromStep": 0, "funnelToStep": 1}]}}))
        .unwrap();
        assert_eq!(u["version"], 2);
        assert_eq!(u["series"][0]["kind"], "EventsNode");
        assert_eq!(u["funnelsFilter"]["exclusions"][0]["kind"], "EventsNode");
        let u = upgrade(json!({"kind": "DataVisualizationNode",
            "source": {"kind": "HogQLQuery", "query": "SELECT 1"},
            "chartSettings": {"showPieTotal": false, "pie": {"showTotal": true}}}))
        .unwrap();
        assert_eq!(u["chartSettings"], json!({"pie": {"showTotal": true}}));
        assert_eq!(u["source"]["version"], 1);
        // Idempotent, and a node already newer than we know keeps its version.
        assert_eq!(upgrade(u.clone()).unwrap(), u);
        let u = upgrade(json!({"kind": "TrendsQuery", "version": 9, "series": []})).unwrap();
        assert_eq!(u["version"], 9);
    }
}
