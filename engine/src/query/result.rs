//! Turning Arrow results into what PostHog's clients read: JSON rows, ClickHouse type names,
//! and ClickHouse's text rendering (for the CLI and the .slt tests).

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use serde_json::{Number, Value};

/// ClickHouse's name for a column's type, e.g. `UInt64`, `Nullable(String)`,
/// `DateTime64(6, 'UTC')`.
pub(crate) fn clickhouse_type(field: &Field) -> String {
    let inner = clickhouse_data_type(field.data_type());
    let nullable_ok = !matches!(
        field.data_type(),
        DataType::List(_) | DataType::Struct(_) | DataType::Map(..)
    );
    if field.is_nullable() && nullable_ok && field.data_type() != &DataType::Null {
        format!("Nullable({inner})")
    } else {
        inner
    }
}

fn clickhouse_data_type(t: &DataType) -> String {
    match t {
        DataType::Null => "Nullable(Nothing)".into(),
        DataType::Boolean => "Bool".into(),
        DataType::Int8 => "Int8".into(),
        DataType::Int16 => "Int16".into(),
        DataType::Int32 => "Int32".into(),
        DataType::Int64 => "Int64".into(),
        DataType::UInt8 => "UInt8".into(),
        DataType::UInt16 => "UInt16".into(),
        DataType::UInt32 => "UInt32".into(),
        DataType::UInt64 => "UInt64".into(),
        DataType::Float16 | DataType::Float32 => "Float32".into(),
        DataType::Float64 => "Float64".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "String".into(),
        DataType::FixedSizeBinary(16) => "UUID".into(),
        DataType::Date32 | DataType::Date64 => "Date".into(),
        DataType::Timestamp(TimeUnit::Second, tz) => {
            format!("DateTime('{}')", tz.as_deref().unwrap_or("UTC"))
        }
        DataType::Timestamp(unit, tz) => {
            let p = match unit {
                TimeUnit::Millisecond => 3,
                TimeUnit::Microsecond => 6,
                _ => 9,
            };
            format!("DateTime64({p}, '{}')", tz.as_deref().unwrap_or("UTC"))
        }
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("Array({})", clickhouse_type(f))
        }
        DataType::Struct(fields) => format!(
            "Tuple({})",
            fields
                .iter()
                .map(|f| clickhouse_type(f))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Map(f, _) => match f.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!(
                    "Map({}, {})",
                    clickhouse_type(&kv[0]),
                    clickhouse_type(&kv[1])
                )
            }
            other => other.to_string(),
        },
        DataType::Interval(_) => "IntervalSecond".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("Decimal({p}, {s})"),
        other => other.to_string(),
    }
}

fn tz_of(t: &DataType) -> Option<chrono_tz::Tz> {
    match t {
        DataType::Timestamp(_, Some(tz)) => tz.parse().ok(),
        _ => None,
    }
}

fn timestamp_at(a: &ArrayRef, row: usize) -> Option<(DateTime<Utc>, TimeUnit)> {
    let (v, unit) = match a.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => (
            a.as_primitive::<TimestampSecondType>().value(row) * 1_000_000,
            TimeUnit::Second,
        ),
        DataType::Timestamp(TimeUnit::Millisecond, _) => (
            a.as_primitive::<TimestampMillisecondType>().value(row) * 1000,
            TimeUnit::Millisecond,
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => (
            a.as_primitive::<TimestampMicrosecondType>().value(row),
            TimeUnit::Microsecond,
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => (
            a.as_primitive::<TimestampNanosecondType>().value(row) / 1000,
            TimeUnit::Nanosecond,
        ),
        _ => return None,
    };
    Some((DateTime::from_timestamp_micros(v)?, unit))
}

fn float_json(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// One cell as JSON, as PostHog's API returns it: DateTimes as ISO 8601 in the column's zone.
pub(crate) fn json_value(a: &ArrayRef, row: usize) -> Value {
    if a.is_null(row) || a.data_type() == &DataType::Null {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Boolean => Value::Bool(a.as_boolean().value(row)),
        DataType::Int8 => a.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(row).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(row).into(),
        DataType::Float32 => float_json(a.as_primitive::<Float32Type>().value(row) as f64),
        DataType::Float64 => float_json(a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::String(a.as_string::<i32>().value(row).to_string()),
        DataType::LargeUtf8 => Value::String(a.as_string::<i64>().value(row).to_string()),
        DataType::Utf8View => Value::String(a.as_string_view().value(row).to_string()),
        DataType::FixedSizeBinary(16) => Value::String(uuid_text(a, row)),
        DataType::Date32 => Value::String(date32(a.as_primitive::<Date32Type>().value(row))),
        DataType::Timestamp(..) => match timestamp_at(a, row) {
            Some((t, _)) => Value::String(iso(t, tz_of(a.data_type()))),
            None => Value::Null,
        },
        DataType::List(_) => {
            let l = a.as_list::<i32>().value(row);
            Value::Array((0..l.len()).map(|i| json_value(&l, i)).collect())
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>().value(row);
            Value::Array((0..l.len()).map(|i| json_value(&l, i)).collect())
        }
        DataType::Struct(_) => {
            let s = a.as_struct();
            Value::Array(s.columns().iter().map(|c| json_value(c, row)).collect())
        }
        // A JSON object, as PostHog's API returns a ClickHouse Map (its driver makes a dict of
        // the entries): keys as strings, a repeated key keeps its last value.
        DataType::Map(..) => {
            let entries = a.as_map().value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            let mut obj = serde_json::Map::new();
            for i in 0..entries.len() {
                let key = match json_value(keys, i) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                obj.insert(key, json_value(values, i));
            }
            Value::Object(obj)
        }
        _ => match datafusion::arrow::util::display::array_value_to_string(a, row) {
            Ok(s) => Value::String(s),
            Err(_) => Value::Null,
        },
    }
}

/// A UUID (HogQL's 16-byte UUID type) as PostHog shows it.
fn uuid_text(a: &ArrayRef, row: usize) -> String {
    crate::storage::ids::id_at(a.as_ref(), row)
        .map(|id| uuid::Uuid::from_bytes(id).hyphenated().to_string())
        .unwrap_or_default()
}

fn date32(days: i32) -> String {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|d| d.checked_add_signed(chrono::TimeDelta::days(days as i64)))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// `2024-01-31T13:05:00.123000-05:00`, `Z` for UTC (as PostHog's API writes DateTimes).
fn iso(t: DateTime<Utc>, tz: Option<chrono_tz::Tz>) -> String {
    match tz {
        Some(tz) if tz != chrono_tz::UTC => tz
            .from_utc_datetime(&t.naive_utc())
            .format("%Y-%m-%dT%H:%M:%S%.6f%:z")
            .to_string(),
        _ => t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    }
}

/// One cell as ClickHouse's TSV output writes it, except NULL (`NULL`), the empty string
/// (`(empty)`) and booleans (`1`/`0`) — the rendering the .slt files use.
pub fn text_value(a: &ArrayRef, row: usize) -> String {
    if a.is_null(row) || a.data_type() == &DataType::Null {
        return "NULL".into();
    }
    let s = text_inner(a, row, false);
    if s.is_empty() { "(empty)".into() } else { s }
}

fn escape_tsv(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

fn quote(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Shortest round-trip text without a trailing `.0`, `inf`/`-inf`/`nan` as ClickHouse.
pub(crate) fn float_text(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        let s = format!("{f}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    }
}

/// A Float32 as ClickHouse writes one: its own shortest round-trip text (0.3846154, not the
/// widened double's 0.38461539149284363).
fn float32_text(f: f32) -> String {
    if f.is_finite() {
        let s = format!("{f}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    } else {
        float_text(f as f64)
    }
}

fn text_inner(a: &ArrayRef, row: usize, nested: bool) -> String {
    if a.is_null(row) || a.data_type() == &DataType::Null {
        return "NULL".into();
    }
    let string = |s: &str| if nested { quote(s) } else { escape_tsv(s) };
    match a.data_type() {
        DataType::Boolean => if a.as_boolean().value(row) { "1" } else { "0" }.into(),
        DataType::Float32 => float32_text(a.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => float_text(a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => string(a.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => string(a.as_string::<i64>().value(row)),
        DataType::Utf8View => string(a.as_string_view().value(row)),
        DataType::FixedSizeBinary(16) => {
            let s = uuid_text(a, row);
            if nested { quote(&s) } else { s }
        }
        DataType::Date32 => {
            let d = date32(a.as_primitive::<Date32Type>().value(row));
            if nested { quote(&d) } else { d }
        }
        DataType::Timestamp(..) => {
            let Some((t, unit)) = timestamp_at(a, row) else {
                return "NULL".into();
            };
            let tz = tz_of(a.data_type()).unwrap_or(chrono_tz::UTC);
            let local = tz.from_utc_datetime(&t.naive_utc());
            let s = match unit {
                TimeUnit::Second => local.format("%Y-%m-%d %H:%M:%S").to_string(),
                TimeUnit::Millisecond => local.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
                _ => local.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
            };
            if nested { quote(&s) } else { s }
        }
        DataType::List(_) | DataType::LargeList(_) => {
            let l = match a.data_type() {
                DataType::List(_) => a.as_list::<i32>().value(row),
                _ => a.as_list::<i64>().value(row),
            };
            let items: Vec<String> = (0..l.len()).map(|i| text_inner(&l, i, true)).collect();
            format!("[{}]", items.join(","))
        }
        DataType::Struct(_) => {
            let s = a.as_struct();
            let items: Vec<String> = s
                .columns()
                .iter()
                .map(|c| text_inner(c, row, true))
                .collect();
            format!("({})", items.join(","))
        }
        // {'a':1,'b':2}
        DataType::Map(..) => {
            let entries = a.as_map().value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            let items: Vec<String> = (0..entries.len())
                .map(|i| {
                    format!(
                        "{}:{}",
                        text_inner(keys, i, true),
                        text_inner(values, i, true)
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        // ClickHouse prints decimals without trailing zeros (`12`, `1.5`).
        DataType::Decimal128(..) | DataType::Decimal256(..) => {
            let s =
                datafusion::arrow::util::display::array_value_to_string(a, row).unwrap_or_default();
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            }
        }
        _ => datafusion::arrow::util::display::array_value_to_string(a, row).unwrap_or_default(),
    }
}

/// All rows of `batches` as JSON arrays.
pub(crate) fn json_rows(batches: &[RecordBatch]) -> Vec<Value> {
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            rows.push(Value::Array(
                b.columns().iter().map(|c| json_value(c, r)).collect(),
            ));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BooleanArray, Float64Array, ListArray, StringArray, TimestampMicrosecondArray,
        TimestampSecondArray,
    };
    use datafusion::arrow::datatypes::Int64Type;
    use std::sync::Arc;

    #[test]
    fn types_are_clickhouse_names() {
        let f = Field::new("c", DataType::UInt64, false);
        assert_eq!(clickhouse_type(&f), "UInt64");
        let f = Field::new("c", DataType::Utf8, true);
        assert_eq!(clickhouse_type(&f), "Nullable(String)");
        let f = Field::new(
            "c",
            DataType::Timestamp(TimeUnit::Microsecond, Some("America/New_York".into())),
            false,
        );
        assert_eq!(clickhouse_type(&f), "DateTime64(6, 'America/New_York')");
        let f = Field::new("c", DataType::new_list(DataType::Utf8, true), false);
        assert_eq!(clickhouse_type(&f), "Array(Nullable(String))");
    }

    #[test]
    fn float32_text_is_its_own_shortest_form() {
        let a: ArrayRef = Arc::new(datafusion::arrow::array::Float32Array::from(vec![
            0.3846154f32,
            1.0,
            f32::NAN,
        ]));
        assert_eq!(text_value(&a, 0), "0.3846154");
        assert_eq!(text_value(&a, 1), "1");
        assert_eq!(text_value(&a, 2), "nan");
    }

    #[test]
    fn text_and_json_rendering() {
        let ts: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![1_704_067_200_123_456])
                .with_timezone("America/New_York"),
        );
        assert_eq!(text_value(&ts, 0), "2023-12-31 19:00:00.123456");
        assert_eq!(
            json_value(&ts, 0),
            Value::String("2023-12-31T19:00:00.123456-05:00".into())
        );
        let sec: ArrayRef = Arc::new(TimestampSecondArray::from(vec![0]).with_timezone("UTC"));
        assert_eq!(text_value(&sec, 0), "1970-01-01 00:00:00");
        assert_eq!(
            json_value(&sec, 0),
            Value::String("1970-01-01T00:00:00.000000Z".into())
        );
        let s: ArrayRef = Arc::new(StringArray::from(vec![Some(""), None, Some("a\tb")]));
        assert_eq!(text_value(&s, 0), "(empty)");
        assert_eq!(text_value(&s, 1), "NULL");
        assert_eq!(text_value(&s, 2), "a\\tb");
        let f32s: ArrayRef = Arc::new(datafusion::arrow::array::Float32Array::from(vec![
            19.05f32,
            2.0,
            f32::NEG_INFINITY,
        ]));
        assert_eq!(text_value(&f32s, 0), "19.05");
        assert_eq!(text_value(&f32s, 1), "2");
        assert_eq!(text_value(&f32s, 2), "-inf");
        let f: ArrayRef = Arc::new(Float64Array::from(vec![3.0, 0.1 + 0.2, f64::NAN]));
        assert_eq!(text_value(&f, 0), "3");
        assert_eq!(text_value(&f, 1), "0.30000000000000004");
        assert_eq!(text_value(&f, 2), "nan");
        assert_eq!(json_value(&f, 2), Value::Null);
        let b: ArrayRef = Arc::new(BooleanArray::from(vec![true]));
        assert_eq!(text_value(&b, 0), "1");
        let l: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None, Some(3)]),
        ]));
        assert_eq!(text_value(&l, 0), "[1,NULL,3]");
        assert_eq!(json_value(&l, 0), serde_json::json!([1, null, 3]));
    }

    #[test]
    fn maps_print_as_clickhouse_and_json_objects() {
        use datafusion::arrow::array::{Int64Array, MapArray, StructArray};
        use datafusion::arrow::buffer::OffsetBuffer;
        use datafusion::arrow::datatypes::Fields;
        // {'a':1,'b':NULL,'a':3} and {}
        let fields = Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Int64, true),
        ]);
        let entries = StructArray::new(
            fields.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "a"])) as ArrayRef,
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
            ],
            None,
        );
        let entries_field = Arc::new(Field::new("entries", DataType::Struct(fields), false));
        let m: ArrayRef = Arc::new(MapArray::new(
            entries_field,
            OffsetBuffer::from_lengths([3, 0]),
            entries,
            None,
            false,
        ));
        assert_eq!(text_value(&m, 0), "{'a':1,'b':NULL,'a':3}");
        assert_eq!(text_value(&m, 1), "{}");
        assert_eq!(json_value(&m, 0), serde_json::json!({"a": 3, "b": null}));
        assert_eq!(json_value(&m, 1), serde_json::json!({}));
        let f = Field::new("m", m.data_type().clone(), false);
        assert_eq!(clickhouse_type(&f), "Map(String, Nullable(Int64))");
    }
}
