//! The persons API's bodies as PostHog sends them (`spec/api.md` §2, `spec/compat.md`,
//! Persons): persons, activity entries, list envelopes, the properties timeline, and the
//! CSV a `format=csv` request gets instead of JSON.

use std::collections::{BTreeMap, HashSet};

use hedgerow_engine::persons::Activity;
use hedgerow_engine::persons::{Person, PropertiesTimeline, TimelinePoint};
use serde_json::{Value, json};

fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A person: `{id, uuid, name, distinct_ids, properties, created_at, is_identified}`.
pub(crate) fn person(p: &Person) -> Value {
    json!({
        "id": p.id,
        "uuid": p.uuid,
        "name": p.name(),
        "distinct_ids": p.distinct_ids,
        "properties": p.properties,
        "created_at": iso(p.created_at),
        "is_identified": p.is_identified,
    })
}

/// An entry of a person's activity log.
pub(crate) fn activity(a: &Activity) -> Value {
    json!({
        "activity": a.activity,
        "scope": "Person",
        "item_id": a.person_id.to_string(),
        "person_uuid": a.person_uuid,
        "user": a.actor,
        "detail": a.detail,
        "created_at": iso(a.at),
    })
}

/// The paginated list envelope: `{count, next, previous, results}`.
pub(crate) fn page(
    count: u64,
    next: Option<String>,
    previous: Option<String>,
    results: Vec<Value>,
) -> Value {
    json!({"count": count, "next": next, "previous": previous, "results": results})
}

fn timeline_point(p: &TimelinePoint) -> Value {
    json!({
        "timestamp": p.timestamp,
        "properties": p.properties,
        "relevant_event_count": p.relevant_event_count,
    })
}

/// `properties_timeline`: the points, and the span of events they cover.
pub(crate) fn properties_timeline(t: &PropertiesTimeline) -> Value {
    json!({
        "points": t.points.iter().map(timeline_point).collect::<Vec<_>>(),
        "crucial_property_keys": [],
        "effective_date_from": t.effective_date_from,
        "effective_date_to": t.effective_date_to,
        "truncated": t.truncated,
    })
}

/// Flattens nested objects and arrays into `a.b` / `a.0` columns.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), x, out);
            }
        }
        Value::Null => {
            out.insert(prefix.to_owned(), String::new());
        }
        Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// Whether `s` is a plain decimal number (`-5`, `1.5e-3`): a spreadsheet reads it as that
/// number, never as a formula, so it keeps its sign unescaped.
fn is_number(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// One CSV cell. A cell that a spreadsheet would read as a formula (it starts with `=`,
/// `+`, `-`, `@`, a tab or a carriage return, and is not a plain number) gets a leading
/// `'`, as OWASP recommends against CSV injection: person properties come from public
/// capture, so `=HYPERLINK(…)` in an export is anyone's input. Then the usual quoting.
fn csv_cell(s: &str) -> String {
    let escaped;
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_number(s) {
        escaped = format!("'{s}");
        escaped.as_str()
    } else {
        s
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Rows as CSV: one column per flattened field, in first-seen order of a sorted header.
pub(crate) fn to_csv(rows: &[Value]) -> String {
    let flat: Vec<BTreeMap<String, String>> = rows
        .iter()
        .map(|r| {
            let mut m = BTreeMap::new();
            flatten("", r, &mut m);
            m
        })
        .collect();
    // A set beside the list: property names come from public capture, and a scan of the
    // header per key was quadratic in the number of columns.
    let mut header: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for r in &flat {
        for k in r.keys() {
            if seen.insert(k) {
                header.push(k.clone());
            }
        }
    }
    let mut out = header
        .iter()
        .map(|h| csv_cell(h))
        .collect::<Vec<_>>()
        .join(",");
    out.push_str("\r\n");
    for r in &flat {
        let line: Vec<String> = header
            .iter()
            .map(|h| csv_cell(r.get(h).map_or("", String::as_str)))
            .collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_flattens_and_escapes() {
        let rows = vec![
            json!({"id": 1, "properties": {"email": "a@x.io", "n": 2}, "distinct_ids": ["a", "b"]}),
            json!({"id": 2, "properties": {"quote": "say \"hi\", ok"}, "distinct_ids": []}),
        ];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "distinct_ids.0,distinct_ids.1,id,properties.email,properties.n,distinct_ids,properties.quote"
        );
        assert_eq!(lines[1], "a,b,1,a@x.io,2,,");
        assert_eq!(lines[2], ",,2,,,[],\"say \"\"hi\"\", ok\"");
    }

    #[test]
    fn csv_cells_that_would_be_formulas_get_a_quote() {
        let rows = vec![json!({"properties": {
            "a": "=HYPERLINK(\"http://evil.example\",\"click\")",
            "b": "+1+cmd|' /C calc'!A0",
            "c": "-2+3",
            "d": "@SUM(A1:A9)",
            "e": "\tx",
            "f": "\rx",
            "g": -5,
            "h": "-1.5e3",
            "i": "plain = fine",
            "j": "-",
        }})];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "properties.a,properties.b,properties.c,properties.d,properties.e,properties.f,properties.g,properties.h,properties.i,properties.j"
        );
        let cells = [
            "\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"click\"\")\"",
            "'+1+cmd|' /C calc'!A0",
            "'-2+3",
            "'@SUM(A1:A9)",
            "'\tx",
            "\"'\rx\"",
            "-5",
            "-1.5e3",
            "plain = fine",
            "'-",
        ];
        assert_eq!(lines[1], cells.join(","));
    }

    #[test]
    fn timeline_shape() {
        let t = PropertiesTimeline {
            points: vec![TimelinePoint {
                timestamp: json!("2024-01-01T00:00:00Z"),
                properties: json!({"a": 1}),
                relevant_event_count: 3,
            }],
            effective_date_from: Some(json!("2024-01-01T00:00:00Z")),
            effective_date_to: None,
            truncated: false,
        };
        assert_eq!(
            properties_timeline(&t),
            json!({
                "points": [{"timestamp": "2024-01-01T00:00:00Z", "properties": {"a": 1}, "relevant_event_count": 3}],
                "crucial_property_keys": [],
                "effective_date_from": "2024-01-01T00:00:00Z",
                "effective_date_to": null,
                "truncated": false,
            })
        );
    }
}
