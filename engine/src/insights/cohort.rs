//! A dynamic cohort's definition as the HogQL query whose first column is its members'
//! person ids: PostHog's cohort `filters` (person properties, behavioral filters, other
//! cohorts, in AND/OR groups, each possibly negated) over `persons`, or a HogQL query of
//! its own.

use serde_json::{Map, Value};

use super::filters::{FilterContext, Scope, properties_expr, quote};
use super::{FilterError, dates};

/// The query that lists a cohort's members (person uuids, first column). `filters` is
/// PostHog's `{properties: <group>}`; `query` a `{kind: "HogQLQuery", query}` node. One
/// of the two, not both.
pub fn definition_query(
    filters: Option<&Value>,
    query: Option<&Value>,
    cx: &FilterContext,
) -> Result<String, FilterError> {
    let cx = FilterContext {
        timezone: cx.timezone,
        now: cx.now,
        scope: Scope::Persons,
    };
    match (filters, query) {
        (Some(_), Some(_)) => Err(FilterError(
            "a cohort is defined by filters or by a query, not both".into(),
        )),
        (None, None) => Err(FilterError(
            "a dynamic cohort needs filters (properties) or a query".into(),
        )),
        (None, Some(q)) => {
            let kind = q.get("kind").and_then(Value::as_str);
            let text = q.get("query").and_then(Value::as_str);
            match (kind, text) {
                (Some("HogQLQuery"), Some(t)) if !t.trim().is_empty() => Ok(t.to_owned()),
                _ => Err(FilterError(
                    "a cohort's query must be {\"kind\": \"HogQLQuery\", \"query\": \"SELECT person_id …\"}"
                        .into(),
                )),
            }
        }
        (Some(f), None) => {
            let props = match f {
                Value::Object(m) => m
                    .get("properties")
                    .ok_or_else(|| FilterError("a cohort's filters need properties".into()))?,
                other => {
                    return Err(FilterError(format!(
                        "a cohort's filters must be an object with properties, got {other}"
                    )));
                }
            };
            let condition = properties_expr(props, &cx)?.ok_or_else(|| {
                FilterError("a cohort's filters must hold at least one filter".into())
            })?;
            Ok(format!("SELECT id FROM persons WHERE {condition}"))
        }
    }
}

/// A behavioral filter (`{type: "behavioral", key: <event>, value: <what>, time_value,
/// time_interval | explicit_datetime, operator?, operator_value?}`) as a condition on
/// `persons.id`: `performed_event` (at least once in the window) and
/// `performed_event_multiple` (a count compared with `operator_value`).
pub(super) fn behavioral(
    m: &Map<String, Value>,
    cx: &FilterContext,
) -> Result<String, FilterError> {
    let what = m.get("value").and_then(Value::as_str).unwrap_or("");
    if let Some(Value::String(t)) = m.get("event_type")
        && t != "events"
    {
        return Err(FilterError(format!(
            "behavioral filters on '{t}' are not supported; use event_type events"
        )));
    }
    let mut conds = Vec::new();
    match m.get("key") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) => conds.push(format!("event = {}", quote(e))),
        Some(other) => {
            return Err(FilterError(format!(
                "a behavioral filter's key is an event name, got {other}"
            )));
        }
    }
    if let Some(since) = window_start(m, cx)? {
        conds.push(format!("timestamp >= {since}"));
    }
    if let Some(Value::Array(props)) = m.get("event_filters")
        && !props.is_empty()
    {
        let ev = FilterContext::events(cx.timezone, cx.now);
        if let Some(c) = properties_expr(&Value::Array(props.clone()), &ev)? {
            conds.push(format!("({c})"));
        }
    }
    let filter = match conds.is_empty() {
        true => String::new(),
        false => format!(" WHERE {}", conds.join(" AND ")),
    };
    let people = format!("SELECT person_id FROM events{filter}");
    match what {
        "performed_event" => Ok(format!("id IN ({people})")),
        "performed_event_multiple" => {
            let n = match m.get("operator_value") {
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
                _ => None,
            }
            .ok_or_else(|| {
                FilterError("performed_event_multiple needs operator_value, a count".into())
            })?;
            let having =
                |op: &str, n: u64| format!("{people} GROUP BY person_id HAVING count() {op} {n}");
            // Persons who never did it have a count of 0: "at most"/"exactly 0" counts them.
            Ok(
                match m.get("operator").and_then(Value::as_str).unwrap_or("gte") {
                    "gte" => format!("id IN ({})", having(">=", n)),
                    "gt" => format!("id IN ({})", having(">", n)),
                    "exact" if n == 0 => format!("id NOT IN ({people})"),
                    "exact" => format!("id IN ({})", having("=", n)),
                    "lte" => format!("id NOT IN ({})", having(">", n)),
                    "lt" if n == 0 => "false".to_string(),
                    "lt" => format!("id NOT IN ({})", having(">=", n)),
                    other => {
                        return Err(FilterError(format!(
                            "performed_event_multiple's operator must be gte, gt, exact, lte or lt, got '{other}'"
                        )));
                    }
                },
            )
        }
        other => Err(FilterError(format!(
            "behavioral filter '{other}' is not supported; use performed_event or performed_event_multiple"
        ))),
    }
}

/// Where a behavioral filter's window starts: `explicit_datetime` (a date or a relative
/// date), or `time_value` × `time_interval` back from now; `None`: all time.
fn window_start(m: &Map<String, Value>, cx: &FilterContext) -> Result<Option<String>, FilterError> {
    if let Some(Value::String(at)) = m.get("explicit_datetime") {
        return dates::date_literal(at, cx).map(Some);
    }
    let n = match m.get("time_value") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
    .filter(|n| *n <= 100_000)
    .ok_or_else(|| FilterError("time_value must be a count of time_interval".into()))?;
    let unit = match m
        .get("time_interval")
        .and_then(Value::as_str)
        .unwrap_or("day")
    {
        "hour" => "HOUR",
        "day" => "DAY",
        "week" => "WEEK",
        "month" => "MONTH",
        "year" => "YEAR",
        other => {
            return Err(FilterError(format!(
                "time_interval must be hour, day, week, month or year, got '{other}'"
            )));
        }
    };
    Ok(Some(format!("now() - INTERVAL {n} {unit}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::insights::test_cx as cx;

    #[test]
    fn filters_become_a_query_over_persons() {
        let f = json!({"properties": {"type": "OR", "values": [
            {"type": "AND", "values": [
                {"key": "email", "value": "@shop.io", "operator": "icontains", "type": "person"},
                {"key": "$pageview", "type": "behavioral", "value": "performed_event",
                 "time_value": 30, "time_interval": "day"},
            ]},
            {"type": "AND", "values": [
                {"key": "id", "value": 4, "type": "cohort", "negation": true},
                {"key": "buy", "type": "behavioral", "value": "performed_event_multiple",
                 "operator": "gte", "operator_value": 2, "explicit_datetime": "-7d"},
            ]},
        ]}});
        let q = definition_query(Some(&f), None, &cx()).unwrap();
        assert_eq!(
            q,
            "SELECT id FROM persons WHERE \
             ((ifNull(toString(properties.email) ILIKE '%@shop.io%', false)) AND \
             (id IN (SELECT person_id FROM events WHERE event = '$pageview' AND timestamp >= now() - INTERVAL 30 DAY))) OR \
             ((NOT (id IN COHORT 4)) AND \
             (id IN (SELECT person_id FROM events WHERE event = 'buy' AND timestamp >= toDateTime64('2024-03-24 12:00:00.000000', 6, 'UTC') GROUP BY person_id HAVING count() >= 2)))"
        );
        crate::hogql::parser::parse_query(&q).unwrap();
    }

    #[test]
    fn counts_of_zero_include_who_never_did_it() {
        let b = |op: &str, n: u64| {
            let f = json!({"properties": [{"key": "e", "type": "behavioral",
                "value": "performed_event_multiple", "operator": op, "operator_value": n}]});
            definition_query(Some(&f), None, &cx()).unwrap()
        };
        assert!(b("lte", 1).ends_with(
            "(id NOT IN (SELECT person_id FROM events WHERE event = 'e' GROUP BY person_id HAVING count() > 1))"
        ));
        assert!(
            b("exact", 0).ends_with("(id NOT IN (SELECT person_id FROM events WHERE event = 'e'))")
        );
        assert!(b("lt", 0).ends_with("WHERE (false)"));
    }

    #[test]
    fn what_cannot_define_a_cohort_says_why() {
        let q = json!({"kind": "HogQLQuery", "query": "SELECT person_id FROM events"});
        assert_eq!(
            definition_query(None, Some(&q), &cx()).unwrap(),
            "SELECT person_id FROM events"
        );
        for (f, q, says) in [
            (None, None, "needs filters"),
            (Some(json!({"properties": []})), Some(q.clone()), "not both"),
            (Some(json!({"properties": []})), None, "at least one filter"),
            (Some(json!({"x": 1})), None, "need properties"),
            (None, Some(json!({"kind": "EventsQuery"})), "HogQLQuery"),
            (
                Some(json!({"properties": [{"key": "$browser", "value": "x", "type": "event"}]})),
                None,
                "inside a behavioral filter",
            ),
            (
                Some(
                    json!({"properties": [{"key": "e", "type": "behavioral", "value": "stopped_performing_event"}]}),
                ),
                None,
                "not supported",
            ),
            (
                Some(
                    json!({"properties": [{"key": "e", "type": "behavioral", "value": "performed_event", "time_value": 3, "time_interval": "fortnight"}]}),
                ),
                None,
                "time_interval",
            ),
            (
                Some(
                    json!({"properties": [{"key": 1, "type": "behavioral", "value": "performed_event", "event_type": "actions"}]}),
                ),
                None,
                "not supported",
            ),
        ] {
            let e = definition_query(f.as_ref(), q.as_ref(), &cx()).unwrap_err();
            assert!(e.0.contains(says), "{f:?} {q:?}: {e}");
        }
    }
}
