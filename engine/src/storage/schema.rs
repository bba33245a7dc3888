//! The events table's Arrow schema, and turning normalized events into record batches.
//!
//! The base column list is a contract: `schemas/events.arrow.json` is generated from
//! [`events_schema`] and a test checks the two agree. After the base columns come each
//! project's promoted properties as typed columns (see `storage::layout`); which exist is
//! the table's, not the contract's.

use std::sync::{Arc, LazyLock};

use std::collections::HashMap;

use arrow::array::{
    ArrayRef, Date32Builder, FixedSizeBinaryBuilder, Int32Builder, Int64Builder, RecordBatch,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::Value;

use super::layout::{
    COLUMN_PROPERTIES, Cell, Family, LAYOUT_COLUMN, Layouts, PERSON_LAYOUT_COLUMN,
    PROPERTY_KEY_METADATA, TableColumn, TeamLayout, TypedBuilder, property_as_string, split,
};
use crate::model::person_uuid;
use crate::model::{Event, TeamId};

/// The table's partition columns, in order: a project's events of one UTC day share a
/// partition. (Month partitions were measured and not kept: docs/architecture.md,
/// "Partitions by month, measured and not kept".)
pub(crate) const PARTITION_COLUMNS: &[&str] = &["team_id", "event_date"];

/// The order rows take inside every file we write: by event (trends filter on it, and
/// its row groups and pages are skipped by their statistics), then by person (per-person
/// questions read a person's rows together, and the person columns compress better), then
/// by time. Measured against (event, timestamp) and (event, $session_id, timestamp) at 2M
/// events: docs/architecture.md, "Sort order".
pub(crate) const SORT_COLUMNS: &[&str] = &["event", "person_id", "timestamp"];

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let s = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    let mut fields = vec![
        super::ids::uuid_field("uuid", false),
        s("event", false),
        s("distinct_id", false),
        Field::new("timestamp", utc_micros(), false),
        Field::new("created_at", utc_micros(), false),
        Field::new("team_id", DataType::Int64, false),
        super::ids::uuid_field("person_id", false),
        s("properties", false),
        s("person_properties", true),
        s("$session_id", true),
        s("$window_id", true),
        s("elements_chain", true),
    ];
    // The columns that hold an event property for the residual JSON declare its key, as
    // promoted columns do (storage::layout::COLUMN_PROPERTIES).
    for f in fields.iter_mut() {
        if COLUMN_PROPERTIES.contains(&f.name().as_str()) {
            *f = f.clone().with_metadata(HashMap::from([(
                PROPERTY_KEY_METADATA.to_string(),
                f.name().clone(),
            )]));
        }
    }
    for i in 0..5 {
        fields.push(s(&format!("$group_{i}"), true));
    }
    // How many of the project's promoted event and person properties the row holds
    // (storage::layout).
    fields.push(Field::new(LAYOUT_COLUMN, DataType::Int32, true));
    fields.push(Field::new(PERSON_LAYOUT_COLUMN, DataType::Int32, true));
    // UTC date of `timestamp`; a partition column, so it lives in the path, not the file.
    fields.push(Field::new("event_date", DataType::Date32, false));
    Arc::new(Schema::new(fields))
});

/// The full logical schema of the events table, partition columns included.
pub fn events_schema() -> SchemaRef {
    SCHEMA.clone()
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

/// The schema of batches built under `layouts`: the base columns, then every promoted
/// column of the table.
pub(crate) fn batch_schema(layouts: &Layouts) -> SchemaRef {
    if layouts.columns.is_empty() {
        return events_schema();
    }
    let mut fields: Vec<Field> = SCHEMA.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(layouts.columns.iter().map(TableColumn::field));
    Arc::new(Schema::new(fields))
}

/// Builds one record batch (in the order given) from events of possibly several projects,
/// each row in its project's current layout (`layouts`): promoted properties in their
/// columns, the rest in the residual `properties`. Consumes `$elements` (turned into
/// `elements_chain`, as PostHog does). `group_index` gives a project's index (0–4) of a
/// group type, for `$groups` → `$group_N`.
pub fn events_to_batch<'a>(
    events: impl IntoIterator<Item = (TeamId, &'a Event)>,
    mut group_index: impl FnMut(TeamId, &str) -> Option<usize>,
    layouts: &Layouts,
) -> RecordBatch {
    let events: Vec<(TeamId, &Event)> = events.into_iter().collect();
    let n = events.len();
    let str_builder = || StringBuilder::with_capacity(n, n * 16);
    let mut uuid = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut event = str_builder();
    let mut distinct_id = str_builder();
    let mut timestamp = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut created_at = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut team_id = Int64Builder::with_capacity(n);
    let mut person_id = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut properties = StringBuilder::with_capacity(n, n * 64);
    let mut person_properties = str_builder();
    let mut session_id = str_builder();
    let mut window_id = str_builder();
    let mut chain = str_builder();
    let mut groups: Vec<StringBuilder> = (0..5).map(|_| str_builder()).collect();
    let mut layout = Int32Builder::with_capacity(n);
    // Person properties and their columns are stamped after persons are processed.
    let mut person_layout = Int32Builder::with_capacity(n);
    let mut event_date = Date32Builder::with_capacity(n);
    let mut typed: Vec<TypedBuilder> = layouts
        .columns
        .iter()
        .map(|c| TypedBuilder::new(&c.ty, n))
        .collect();
    // Per project: the table column of each of its promoted properties.
    let mut positions: HashMap<TeamId, (Arc<TeamLayout>, Vec<usize>)> = HashMap::new();
    let mut row_cells: Vec<Option<Cell>> = vec![None; typed.len()];

    for (team, e) in events {
        let (team_layout, at) = positions.entry(team).or_insert_with(|| {
            let l = layouts.team(team);
            let at = l
                .columns
                .iter()
                .map(|c| {
                    layouts
                        .columns
                        .iter()
                        .position(|t| t.name == c.column)
                        .expect("a project's columns are the table's")
                })
                .collect();
            (l, at)
        });
        uuid.append_value(e.uuid.as_bytes()).expect("16 bytes");
        event.append_value(&e.event);
        distinct_id.append_value(&e.distinct_id);
        let ts = e.timestamp.timestamp_micros();
        timestamp.append_value(ts);
        created_at.append_value(e.created_at.timestamp_micros());
        team_id.append_value(team.0);
        person_id
            .append_value(person_uuid(team, &e.distinct_id).as_bytes())
            .expect("16 bytes");
        let props = &e.properties;
        let without_elements;
        let (kept, chain_value) = match props.get("$elements").and_then(Value::as_array) {
            Some(els) => {
                let mut m = props.clone();
                m.remove("$elements");
                without_elements = m;
                (
                    &without_elements,
                    str_prop(props, "$elements_chain")
                        .map(str::to_owned)
                        .or_else(|| Some(elements_chain(els)).filter(|c| !c.is_empty())),
                )
            }
            None => (props, str_prop(props, "$elements_chain").map(str::to_owned)),
        };
        chain.append_option(chain_value);
        let (residual, cells) = split(kept, team_layout, Family::Event);
        properties.append_value(residual);
        for (cell, i) in cells.into_iter().zip(at.iter()) {
            row_cells[*i] = cell;
        }
        for (b, cell) in typed.iter_mut().zip(row_cells.iter_mut()) {
            b.append(cell.take());
        }
        layout.append_value(team_layout.columns.len() as i32);
        person_properties.append_null();
        person_layout.append_null();
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
    columns.push(Arc::new(layout.finish()));
    columns.push(Arc::new(person_layout.finish()));
    columns.push(Arc::new(event_date.finish()));
    columns.extend(typed.iter_mut().map(TypedBuilder::finish));
    RecordBatch::try_new(batch_schema(layouts), columns).expect("columns match the batch schema")
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
        "promoted_columns": "after these, each project's frequent event properties: p_<key> (Utf8), p_<key>__num (Float64), p_<key>__bool (Boolean), and its frequent person properties: pp_<key>, pp_<key>__num, pp_<key>__bool; props_layout and person_props_layout say how many of its project's a row holds (docs/architecture.md, Storage)",
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
        let path = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../schemas/events.arrow.json");
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
    fn batch_columns() {
        let e = ev(json!({
            "$browser": "Firefox", "$os": "", "$device_type": null, "$current_url": 5,
            "$session_id": "s1", "$pathname": {"a": 1}, "$groups": {"company": "acme", "unknown": "x"},
            "$elements": [{"tag_name": "a", "classes": ["btn", "x"], "$el_text": "Go \"now\"", "attr__href": "/go", "nth_child": 1}]
        }));
        let b = events_to_batch(
            [(TeamId(7), &e)],
            |_, ty| (ty == "company").then_some(3),
            &Layouts::default(),
        );
        assert_eq!(b.schema(), events_schema());
        let col = |name: &str| b.column_by_name(name).unwrap().as_string::<i32>().clone();
        assert_eq!(col("$session_id").value(0), "s1");
        assert_eq!(col("$group_3").value(0), "acme");
        for i in [0, 1, 2, 4] {
            assert!(col(&format!("$group_{i}")).is_null(0));
        }
        assert_eq!(
            col("elements_chain").value(0),
            r#"a.btn.x:text="Go \"now\""href="/go"nth-child="1"attr__href="/go""#
        );
        let props: Value = serde_json::from_str(col("properties").value(0)).unwrap();
        assert!(
            props.get("$elements").is_none(),
            "$elements is folded into elements_chain"
        );
        // Ids in 16 bytes (Parquet's UUID type).
        let ids = b
            .column_by_name("person_id")
            .unwrap()
            .as_fixed_size_binary();
        assert_eq!(ids.value(0), person_uuid(TeamId(7), "d1").as_bytes());
        let uuids = b.column_by_name("uuid").unwrap().as_fixed_size_binary();
        assert_eq!(uuids.value(0), e.uuid.as_bytes());
        let date = b
            .column_by_name("event_date")
            .unwrap()
            .as_primitive::<arrow::datatypes::Date32Type>();
        // 2024-03-01 is day 19783 since 1970-01-01.
        assert_eq!(date.value(0), 19783);
        assert_eq!(date32_of_micros(-1), -1, "before the epoch rounds down");
    }

    #[test]
    fn promoted_properties_get_columns_per_project() {
        use crate::propdefs::PropertyType;
        use crate::storage::layout::PropertyColumn;
        let mut layouts = Layouts::default();
        layouts.push(
            TeamId(1),
            PropertyColumn::new("$browser", PropertyType::String),
        );
        layouts.push(TeamId(2), PropertyColumn::new("n", PropertyType::Numeric));
        layouts.push(
            TeamId(2),
            PropertyColumn::new("$browser", PropertyType::String),
        );
        let a = ev(json!({"$browser": "Firefox", "n": 5}));
        let b = ev(json!({"$browser": 7, "n": 5, "x": true}));
        let batch = events_to_batch([(TeamId(1), &a), (TeamId(2), &b)], |_, _| None, &layouts);
        assert_eq!(batch.schema(), batch_schema(&layouts));
        let s = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap()
                .as_string::<i32>()
                .clone()
        };
        assert_eq!(
            s("properties").value(0),
            r#"{"n":5}"#,
            "team 1 holds $browser only"
        );
        assert_eq!(s("properties").value(1), r#"{"$browser":7,"x":true}"#);
        assert_eq!(s("p_$browser").value(0), "Firefox");
        assert_eq!(s("p_$browser").value(1), "7", "the column has the reading");
        let num = batch
            .column_by_name("p_n__num")
            .unwrap()
            .as_primitive::<arrow::datatypes::Float64Type>();
        assert!(num.is_null(0), "team 1 does not hold n");
        assert_eq!(num.value(1), 5.0);
        let layout = batch
            .column_by_name(LAYOUT_COLUMN)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!((layout.value(0), layout.value(1)), (1, 2));
    }
}
