//! PostHog's `EventsQuery` (the events explorer's list) compiled to one HogQL query, and
//! its rows shaped as PostHog returns them: `*` as the event object, `person` as the
//! person object, any other entry as its HogQL value (a `-- label` suffix is a label).

use serde_json::{Map, Value, json};

use super::filters::{FilterContext, properties_expr, quote};
use super::{FilterError, dates};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// Rows a page holds when the query does not say, and at most.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 50_000;

/// One entry of `select`, and the result columns it reads.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    /// `*`: uuid, event, properties, timestamp, distinct_id, elements_chain, created_at.
    Star,
    /// `person`: person_id, distinct_id, person.properties, person.created_at.
    Person,
    Expr,
}

impl Column {
    fn width(&self) -> usize {
        match self {
            Column::Star => 7,
            Column::Person => 4,
            Column::Expr => 1,
        }
    }
}

/// An `EventsQuery`, compiled.
#[derive(Debug, Clone)]
pub struct EventsList {
    /// The select list as the request wrote it (the response's `columns`).
    pub select: Vec<String>,
    columns: Vec<Column>,
    /// The HogQL text to run.
    pub hogql: String,
    pub limit: usize,
    pub offset: usize,
}

/// The expression of a select entry without its `-- label`.
fn expression(entry: &str) -> &str {
    entry.split(" -- ").next().unwrap_or(entry).trim()
}

impl EventsList {
    pub fn from_value(v: &Value, cx: &FilterContext) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("an EventsQuery must be an object"))?;
        for k in ["actionId", "personId", "fixedProperties_actions"] {
            if q.get(k).is_some_and(|v| !v.is_null()) {
                return Err(bad(format!("EventsQuery.{k} is not supported yet")));
            }
        }
        let strings = |k: &str| super::text_list(q, "EventsQuery", k);
        let select = strings("select")?;
        if select.is_empty() {
            return Err(bad(
                "an EventsQuery needs select, e.g. [\"*\", \"event\", \"timestamp\"]",
            ));
        }
        if select.len() > 200 {
            return Err(bad("an EventsQuery selects at most 200 columns"));
        }
        let mut columns = Vec::new();
        let mut exprs = Vec::new();
        for entry in &select {
            match expression(entry) {
                "*" => {
                    columns.push(Column::Star);
                    exprs.extend(
                        [
                            "uuid",
                            "event",
                            "properties",
                            "timestamp",
                            "distinct_id",
                            "elements_chain",
                            "created_at",
                        ]
                        .map(String::from),
                    );
                }
                "person" => {
                    columns.push(Column::Person);
                    exprs.extend(
                        [
                            "person_id",
                            "distinct_id",
                            "person.properties",
                            "person.created_at",
                        ]
                        .map(String::from),
                    );
                }
                "" => return Err(bad("an empty entry in select")),
                e => {
                    columns.push(Column::Expr);
                    exprs.push(format!("({e})"));
                }
            }
        }
        let mut conds = Vec::new();
        if let Some(e) = q.get("event").and_then(Value::as_str) {
            conds.push(format!("event = {}", quote(e)));
        }
        for (k, op) in [("after", ">"), ("before", "<")] {
            if let Some(t) = q.get(k).and_then(Value::as_str) {
                conds.push(format!("timestamp {op} {}", dates::date_literal(t, cx)?));
            }
        }
        for k in ["properties", "fixedProperties"] {
            if let Some(p) = q.get(k).filter(|v| !v.is_null())
                && let Some(c) = properties_expr(p, cx)?
            {
                conds.push(format!("({c})"));
            }
        }
        for w in strings("where")? {
            conds.push(format!("({w})"));
        }
        let order = strings("orderBy")?;
        let order = match order.is_empty() {
            true => "timestamp DESC".to_string(),
            false => order.join(", "),
        };
        let count = |k: &str, default: usize| -> Result<usize, FilterError> {
            match q.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_u64()
                    .map(|n| n as usize)
                    .ok_or_else(|| bad(format!("EventsQuery.{k} must be a count"))),
            }
        };
        let limit = count("limit", DEFAULT_LIMIT)?.clamp(1, MAX_LIMIT);
        let offset = count("offset", 0)?.min(1 << 40);
        let filter = match conds.is_empty() {
            true => String::new(),
            false => format!(" WHERE {}", conds.join(" AND ")),
        };
        let hogql = format!(
            "SELECT {} FROM events{filter} ORDER BY {order} LIMIT {} OFFSET {offset}",
            exprs.join(", "),
            limit + 1
        );
        Ok(EventsList {
            select,
            columns,
            hogql,
            limit,
            offset,
        })
    }

    /// The response rows from the run's rows (at most `limit`), and whether there are more.
    pub fn shape(&self, rows: &[Value]) -> (Vec<Value>, bool) {
        let has_more = rows.len() > self.limit;
        let out = rows
            .iter()
            .take(self.limit)
            .map(|r| {
                let cells = r.as_array().cloned().unwrap_or_default();
                let mut at = 0;
                let mut out = Vec::with_capacity(self.columns.len());
                for c in &self.columns {
                    let get = |i: usize| cells.get(at + i).cloned().unwrap_or(Value::Null);
                    out.push(match c {
                        Column::Star => json!({
                            "uuid": get(0),
                            "event": get(1),
                            "properties": parse_json(get(2)),
                            "timestamp": get(3),
                            "distinct_id": get(4),
                            "elements_chain": get(5),
                            "created_at": get(6),
                        }),
                        Column::Person => json!({
                            "uuid": get(0),
                            "distinct_id": get(1),
                            "properties": parse_json(get(2)),
                            "created_at": get(3),
                        }),
                        Column::Expr => get(0),
                    });
                    at += c.width();
                }
                Value::Array(out)
            })
            .collect();
        (out, has_more)
    }
}

/// A JSON column read as text becomes its object; an object stays one.
fn parse_json(v: Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Value::Null => Value::Object(Map::new()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn the_explorers_query_compiles_and_shapes() {
        let q = EventsList::from_value(
            &json!({"kind": "EventsQuery", "select": ["*", "event", "person",
                "coalesce(properties.$current_url, properties.$screen_name) -- Url / Screen", "timestamp"],
                "event": "$pageview", "after": "-24h", "limit": 2,
                "properties": [{"key": "$browser", "value": "Chrome"}],
                "where": ["distinct_id != 'x'"]}),
            &cx(),
        )
        .unwrap();
        crate::hogql::parser::parse_query(&q.hogql).unwrap();
        assert!(
            q.hogql
                .contains("timestamp > toDateTime64('2024-03-30 12:00:00.000000', 6, 'UTC')"),
            "{}",
            q.hogql
        );
        assert!(
            q.hogql
                .ends_with("ORDER BY timestamp DESC LIMIT 3 OFFSET 0"),
            "{}",
            q.hogql
        );
        let row = json!([
            "u1",
            "$pageview",
            "{\"a\":1}",
            "2024-03-31T10:00:00Z",
            "d1",
            "",
            "2024-03-31T10:00:01Z",
            "$pageview",
            "p1",
            "d1",
            "{\"plan\":\"pro\"}",
            "2024-01-01T00:00:00Z",
            "https://x",
            "2024-03-31T10:00:00Z"
        ]);
        let (rows, more) = q.shape(&[row.clone(), row.clone(), row]);
        assert!(more);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][0]["properties"], json!({"a": 1}));
        assert_eq!(rows[0][2]["properties"], json!({"plan": "pro"}));
        assert_eq!(rows[0][3], "https://x");
        for (v, says) in [
            (json!({"select": []}), "needs select"),
            (json!({"select": ["*"], "actionId": 3}), "actionId"),
            (json!({"select": ["*"], "after": "soon"}), "not a date"),
            (json!({"select": ["*"], "limit": -1}), "a count"),
        ] {
            let e = EventsList::from_value(&v, &cx()).unwrap_err();
            assert!(e.0.contains(says), "{v}: {e}");
        }
    }
}
