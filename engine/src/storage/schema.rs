//! The events table's Arrow schema, and turning normalized events into record batches.
//!
//! The column list is a contract: `schemas/events.arrow.json` is generated from
//! [`events_schema`] and a test checks the two agree. Hot properties are "shredded" into
//! typed `mat_*` columns at this point so common filters never parse JSON; a shredded value
//! is exactly what reading the key from the JSON text gives (see [`property_as_string`]).

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Date32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::Value;

use crate::model::person_uuid;
use crate::model::{Event, TeamId};

/// Hot properties shredded into their own columns, named `mat_<property>` as PostHog names
/// its materialized columns.
pub(crate) const SHREDDED_PROPERTIES: &[&str] = &[
    "$browser",
    "$os",
    "$device_type",
    "$current_url",
    "$pathname",
    "$host",
    "$referring_domain",
];

/// The name prefix of a shredded property's column (`mat_$browser`).
pub(crate) const SHREDDED_PREFIX: &str = "mat_";

/// The table's partition columns, in order.
pub(crate) const PARTITION_COLUMNS: &[&str] = &["team_id", "event_date"];

/// The order rows take inside every file we write.
pub(crate) const SORT_COLUMNS: &[&str] = &["event", "timestamp"];

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let s = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    let mut fields = vec![
        s("uuid", false),
        s("event", false),
        s("distinct_id", false),
        Field::new("timestamp", utc_micros(), false),
        Field::new("created_at", utc_micros(), false),
        Field::new("team_id", DataType::Int64, false),
        s("person_id", false),
        s("properties", false),
        s("person_properties", true),
        s("$session_id", true),
        s("$window_id", true),
        s("elements_chain", true),
    ];
    for i in 0..5 {
        fields.push(s(&format!("$group_{i}"), true));
    }
    for p in SHREDDED_PROPERTIES {
        fields.push(s(&format!("{SHREDDED_PREFIX}{p}"), true));
    }
    // UTC date of `timestamp`; a partition column, so it lives in the path, not the file.
    fields.push(Field::new("event_date", DataType::Date32, false));
    Arc::new(Schema::new(fields))
});

/// The full logical schema of the events table, partition columns included.
pub fn events_schema() -> SchemaRef {
    SCHEMA.clone()
}

/// The string a property reads as: a missing key, JSON null and `""` are NULL; strings are
/// themselves; numbers, booleans, objects and arrays are their JSON text. HogQL's property
/// access gives the same answer, so a shredded column and the JSON agree.
pub(crate) fn property_as_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn str_prop<'a>(props: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    props
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// PostHog's `elements_chain` text for autocapture's `$elements` list: one element per
/// `;`-separated part, `tag.class1.class2:` then `key="value"` pairs (text, href, id,
/// nth-child, nth-of-type, then every `attr__*`), quotes escaped.
pub(crate) fn elements_chain(elements: &[Value]) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let mut parts = Vec::with_capacity(elements.len());
    for el in elements {
        let Some(el) = el.as_object() else { continue };
        let mut part = el
            .get("tag_name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let classes: Vec<String> = match el.get("classes").or_else(|| el.get("attr__class")) {
            Some(Value::Array(a)) => a.iter().filter_map(scalar).collect(),
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            _ => vec![],
        };
        for c in &classes {
            part.push('.');
            part.push_str(&c.replace('"', ""));
        }
        part.push(':');
        let named = [
            ("$el_text", "text"),
            ("text", "text"),
            ("attr__href", "href"),
            ("href", "href"),
            ("attr__id", "attr_id"),
            ("attr_id", "attr_id"),
            ("nth_child", "nth-child"),
            ("nth_of_type", "nth-of-type"),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (key, out) in named {
            if let Some(v) = el.get(key).and_then(scalar)
                && seen.insert(out)
            {
                part.push_str(&format!("{out}=\"{}\"", esc(&v)));
            }
        }
        let mut attrs: Vec<(&String, &Value)> =
            el.iter().filter(|(k, _)| k.starts_with("attr__")).collect();
        attrs.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in attrs {
            if let Some(v) = scalar(v) {
                part.push_str(&format!("{k}=\"{}\"", esc(&v)));
            }
        }
        parts.push(part);
    }
    parts.join(";")
}

/// Days since the Unix epoch of the UTC date of `micros`.
pub(crate) fn date32_of_micros(micros: i64) -> i32 {
    micros.div_euclid(86_400_000_000) as i32
}

/// Builds one record batch (in the order given) from events of possibly several projects.
/// Consumes `$elements` (turned into `elements_chain`, as PostHog does). `group_index`
/// gives a project's index (0–4) of a group type, for `$groups` → `$group_N`.
pub fn events_to_batch<'a>(
    events: impl IntoIterator<Item = (TeamId, &'a Event)>,
    mut group_index: impl FnMut(TeamId, &str) -> Option<usize>,
) -> RecordBatch {
    let events: Vec<(TeamId, &Event)> = events.into_iter().collect();
    let n = events.len();
    let str_builder = || StringBuilder::with_capacity(n, n * 16);
    let mut uuid = StringBuilder::with_capacity(n, n * 36);
    let mut event = str_builder();
    let mut distinct_id = str_builder();
    let mut timestamp = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut created_at = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut team_id = Int64Builder::with_capacity(n);
    let mut person_id = StringBuilder::with_capacity(n, n * 36);
    let mut properties = StringBuilder::with_capacity(n, n * 256);
    let mut person_properties = str_builder();
    let mut session_id = str_builder();
    let mut window_id = str_builder();
    let mut chain = str_builder();
    let mut groups: Vec<StringBuilder> = (0..5).map(|_| str_builder()).collect();
    let mut shredded: Vec<StringBuilder> =
        SHREDDED_PROPERTIES.iter().map(|_| str_builder()).collect();
    let mut event_date = Date32Builder::with_capacity(n);

    let mut uuid_buf = uuid::Uuid::encode_buffer();
    for (team, e) in events {
        uuid.append_value(e.uuid.hyphenated().encode_lower(&mut uuid_buf));
        event.append_value(&e.event);
        distinct_id.append_value(&e.distinct_id);
        let ts = e.timestamp.timestamp_micros();
        timestamp.append_value(ts);
        created_at.append_value(e.created_at.timestamp_micros());
        team_id.append_value(team.0);
        person_id.append_value(
            person_uuid(team, &e.distinct_id)
                .hyphenated()
                .encode_lower(&mut uuid_buf),
        );
        let props = &e.properties;
        match props.get("$elements").and_then(Value::as_array) {
            Some(els) => {
                let mut without = props.clone();
                without.remove("$elements");
                properties.append_value(Value::Object(without).to_string());
                chain.append_option(
                    str_prop(props, "$elements_chain")
                        .map(str::to_owned)
                        .or_else(|| Some(elements_chain(els)).filter(|c| !c.is_empty())),
                );
            }
            None => {
                properties.append_value(serde_json::to_string(props).unwrap_or_default());
                chain.append_option(str_prop(props, "$elements_chain"));
            }
        }
        person_properties.append_null();
        session_id.append_option(str_prop(props, "$session_id"));
        window_id.append_option(str_prop(props, "$window_id"));
        let mut group_keys: [Option<String>; 5] = Default::default();
        if let Some(Value::Object(gs)) = props.get("$groups") {
            for (ty, key) in gs {
                if let Some(i) = group_index(team, ty).filter(|i| *i < 5) {
                    group_keys[i] = property_as_string(Some(key));
                }
            }
        }
        for (b, key) in groups.iter_mut().zip(group_keys) {
            b.append_option(key);
        }
        for (b, key) in shredded.iter_mut().zip(SHREDDED_PROPERTIES) {
            b.append_option(property_as_string(props.get(*key)));
        }
        event_date.append_value(date32_of_micros(ts));
    }

    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(uuid.finish()),
        Arc::new(event.finish()),
        Arc::new(distinct_id.finish()),
        Arc::new(timestamp.finish()),
        Arc::new(created_at.finish()),
        Arc::new(team_id.finish()),
        Arc::new(person_id.finish()),
        Arc::new(properties.finish()),
        Arc::new(person_properties.finish()),
        Arc::new(session_id.finish()),
        Arc::new(window_id.finish()),
        Arc::new(chain.finish()),
    ];
    columns.extend(groups.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    columns.extend(
        shredded
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef),
    );
    columns.push(Arc::new(event_date.finish()));
    RecordBatch::try_new(events_schema(), columns).expect("columns match the events schema")
}

/// The schema as JSON (`schemas/events.arrow.json`): name, Arrow type and nullability of
/// each column, and which are partition columns.
pub fn schema_json() -> Value {
    let cols: Vec<Value> = events_schema()
        .fields()
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name(),
                "type": f.data_type().to_string(),
                "nullable": f.is_nullable(),
            })
        })
        .collect();
    serde_json::json!({
        "table": "events",
        "format": "delta",
        "partition_columns": PARTITION_COLUMNS,
        "sort_within_file": SORT_COLUMNS,
        "columns": cols,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use chrono::{TimeZone, Utc};
    use serde_json::json;

    fn ev(props: Value) -> Event {
        Event {
            uuid: uuid::Uuid::now_v7(),
            event: "$pageview".into(),
            distinct_id: "d1".into(),
            timestamp: Utc.with_ymd_and_hms(2024, 3, 1, 23, 59, 59).unwrap(),
            created_at: Utc.with_ymd_and_hms(2024, 3, 2, 0, 0, 1).unwrap(),
            properties: props.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn schema_file_matches_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/events.arrow.json");
        let on_disk: Value = serde_json::from_str(
            &std::fs::read_to_string(path).expect("schemas/events.arrow.json exists"),
        )
        .unwrap();
        assert_eq!(
            on_disk,
            schema_json(),
            "schemas/events.arrow.json is stale: regenerate it with `hedgerow schema`"
        );
    }

    #[test]
    fn batch_columns_and_shredding() {
        let e = ev(json!({
            "$browser": "Firefox", "$os": "", "$device_type": null, "$current_url": 5,
            "$session_id": "s1", "$pathname": {"a": 1}, "$groups": {"company": "acme", "unknown": "x"},
            "$elements": [{"tag_name": "a", "classes": ["btn", "x"], "$el_text": "Go \"now\"", "attr__href": "/go", "nth_child": 1}]
        }));
        let b = events_to_batch([(TeamId(7), &e)], |_, ty| (ty == "company").then_some(3));
        assert_eq!(b.schema(), events_schema());
        let col = |name: &str| b.column_by_name(name).unwrap().as_string::<i32>().clone();
        assert_eq!(col("mat_$browser").value(0), "Firefox");
        assert!(col("mat_$os").is_null(0), "empty string reads as NULL");
        assert!(
            col("mat_$device_type").is_null(0),
            "JSON null reads as NULL"
        );
        assert_eq!(
            col("mat_$current_url").value(0),
            "5",
            "numbers read as their JSON text"
        );
        assert_eq!(col("mat_$pathname").value(0), r#"{"a":1}"#);
        assert!(col("mat_$host").is_null(0), "missing key reads as NULL");
        assert_eq!(col("$session_id").value(0), "s1");
        assert_eq!(col("$group_3").value(0), "acme");
        for i in [0, 1, 2, 4] {
            assert!(col(&format!("$group_{i}")).is_null(0));
        }
        assert!(col("$window_id").is_null(0));
        assert_eq!(
            col("elements_chain").value(0),
            r#"a.btn.x:text="Go \"now\""href="/go"nth-child="1"attr__href="/go""#
        );
        let props: Value = serde_json::from_str(col("properties").value(0)).unwrap();
        assert!(
            props.get("$elements").is_none(),
            "$elements is folded into elements_chain"
        );
        assert_eq!(
            col("person_id").value(0),
            person_uuid(TeamId(7), "d1").to_string()
        );
        let date = b
            .column_by_name("event_date")
            .unwrap()
            .as_primitive::<arrow::datatypes::Date32Type>();
        // 2024-03-01 is day 19783 since 1970-01-01.
        assert_eq!(date.value(0), 19783);
        assert_eq!(date32_of_micros(-1), -1, "before the epoch rounds down");
    }
}
