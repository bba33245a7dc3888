//! `toJSONString` of arrays, tuples and maps, as ClickHouse writes them.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;

/// Appends the JSON text of `a[row]`: tuples as arrays, maps as objects (every entry, keys as
/// strings), NULL as `null`, nan and infinities as `null`, dates and times as their text.
pub(super) fn json_text(a: &ArrayRef, row: usize, out: &mut String) {
    use std::fmt::Write;
    if a.is_null(row) || a.data_type() == &DataType::Null {
        out.push_str("null");
        return;
    }
    let quoted = |s: &str, out: &mut String| {
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    };
    match a.data_type() {
        DataType::Boolean => out.push_str(if a.as_boolean().value(row) {
            "true"
        } else {
            "false"
        }),
        t if t.is_integer() => out.push_str(&plain_text(a, row)),
        DataType::Float32 => {
            let f = a
                .as_primitive::<datafusion::arrow::datatypes::Float32Type>()
                .value(row);
            if f.is_finite() {
                let s = format!("{f}");
                out.push_str(s.strip_suffix(".0").unwrap_or(&s));
            } else {
                out.push_str("null");
            }
        }
        t if t.is_floating() => {
            let f = match cast(&a.slice(row, 1), &DataType::Float64) {
                Ok(x) => x
                    .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
                    .value(0),
                Err(_) => f64::NAN,
            };
            if f.is_finite() {
                out.push_str(&float_text(f));
            } else {
                out.push_str("null");
            }
        }
        DataType::List(_) | DataType::LargeList(_) => {
            let l = match a.data_type() {
                DataType::List(_) => a.as_list::<i32>().value(row),
                _ => a.as_list::<i64>().value(row),
            };
            out.push('[');
            for i in 0..l.len() {
                if i > 0 {
                    out.push(',');
                }
                json_text(&l, i, out);
            }
            out.push(']');
        }
        DataType::Struct(_) => {
            let st = a.as_struct();
            out.push('[');
            for (i, c) in st.columns().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_text(c, row, out);
            }
            out.push(']');
        }
        DataType::Map(..) => {
            let entries = a.as_map().value(row);
            let (k, v) = (entries.column(0), entries.column(1));
            out.push('{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(',');
                }
                match k.data_type() {
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                        json_text(k, i, out)
                    }
                    _ => quoted(&plain_text(k, i), out),
                }
                out.push(':');
                json_text(v, i, out);
            }
            out.push('}');
        }
        DataType::Utf8 => quoted(a.as_string::<i32>().value(row), out),
        DataType::LargeUtf8 => quoted(a.as_string::<i64>().value(row), out),
        DataType::Utf8View => quoted(a.as_string_view().value(row), out),
        _ => {
            let text = plain_text(a, row);
            let _ = write!(out, "{}", serde_json::to_string(&text).unwrap_or_default());
        }
    }
}

/// A finite float as ClickHouse prints it: the shortest round-trip text, no trailing `.0`.
fn float_text(f: f64) -> String {
    let s = format!("{f}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A scalar's text as ClickHouse prints it: dates `2024-01-31`, DateTimes in their own zone
/// with their precision's digits, UUIDs hyphenated, others as Arrow prints them.
fn plain_text(a: &ArrayRef, row: usize) -> String {
    use chrono::TimeZone;
    use datafusion::arrow::datatypes::{
        Date32Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
        TimestampNanosecondType, TimestampSecondType,
    };
    match a.data_type() {
        DataType::Date32 => {
            let days = a.as_primitive::<Date32Type>().value(row);
            chrono::NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|d| d.checked_add_signed(chrono::TimeDelta::days(days as i64)))
                .map(|d| d.format("%Y-%m-%d").to_string())
                .unwrap_or_default()
        }
        DataType::Timestamp(unit, tz) => {
            let (micros, fmt) = match unit {
                TimeUnit::Second => (
                    a.as_primitive::<TimestampSecondType>().value(row) * 1_000_000,
                    "%Y-%m-%d %H:%M:%S",
                ),
                TimeUnit::Millisecond => (
                    a.as_primitive::<TimestampMillisecondType>().value(row) * 1000,
                    "%Y-%m-%d %H:%M:%S%.3f",
                ),
                TimeUnit::Microsecond => (
                    a.as_primitive::<TimestampMicrosecondType>().value(row),
                    "%Y-%m-%d %H:%M:%S%.6f",
                ),
                TimeUnit::Nanosecond => (
                    a.as_primitive::<TimestampNanosecondType>().value(row) / 1000,
                    "%Y-%m-%d %H:%M:%S%.6f",
                ),
            };
            let zone: chrono_tz::Tz = tz
                .as_deref()
                .and_then(|z| z.parse().ok())
                .unwrap_or(chrono_tz::UTC);
            chrono::DateTime::from_timestamp_micros(micros)
                .map(|t| {
                    zone.from_utc_datetime(&t.naive_utc())
                        .format(fmt)
                        .to_string()
                })
                .unwrap_or_default()
        }
        DataType::FixedSizeBinary(16) => crate::storage::ids::id_at(a.as_ref(), row)
            .map(|id| uuid::Uuid::from_bytes(id).hyphenated().to_string())
            .unwrap_or_default(),
        _ => datafusion::arrow::util::display::array_value_to_string(a, row).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::json_text;
    use datafusion::arrow::array::{
        Array, ArrayRef, Date32Array, Float64Array, ListArray, StringArray, StructArray,
        TimestampMicrosecondArray,
    };
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type};
    use std::sync::Arc;

    fn text(a: ArrayRef) -> String {
        let mut s = String::new();
        json_text(&a, 0, &mut s);
        s
    }

    #[test]
    fn values_as_clickhouse_writes_them() {
        let l = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![
            Some(1),
            None,
            Some(-3),
        ])]);
        assert_eq!(text(Arc::new(l)), "[1,null,-3]");
        let f = Float64Array::from(vec![1.5, f64::NAN]);
        assert_eq!(text(Arc::new(f.clone())), "1.5");
        let mut s = String::new();
        json_text(&(Arc::new(f) as ArrayRef), 1, &mut s);
        assert_eq!(s, "null");
        let ts = TimestampMicrosecondArray::from(vec![1_704_067_200_123_456])
            .with_timezone("America/New_York");
        let st = StructArray::from(vec![
            (
                Arc::new(Field::new("c0", DataType::Utf8, false)),
                Arc::new(StringArray::from(vec!["a\"b"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c1", ts.data_type().clone(), false)),
                Arc::new(ts) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c2", DataType::Date32, false)),
                Arc::new(Date32Array::from(vec![19723])) as ArrayRef,
            ),
        ]);
        assert_eq!(
            text(Arc::new(st)),
            r#"["a\"b","2023-12-31 19:00:00.123456","2024-01-01"]"#
        );
    }
}
