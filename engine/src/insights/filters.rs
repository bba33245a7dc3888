//! PostHog's property filters (`{key, value, operator, type}`, and groups of them under
//! `{type: AND|OR, values}`) as HogQL text, with PostHog's meaning of each operator: a
//! missing property never matches a positive operator (`exact`, `icontains`, `gt`…) and
//! always matches a negated one (`is_not`, `not_icontains`, `not_regex`…).

use serde_json::Value;

use super::FilterError;
use super::dates::date_literal;

/// What the filters' dates are read against, and which table's rows they filter.
pub struct FilterContext {
    pub timezone: chrono_tz::Tz,
    pub now: chrono::DateTime<chrono::Utc>,
    pub scope: Scope,
}

impl FilterContext {
    /// Filters of events' rows.
    pub fn events(timezone: chrono_tz::Tz, now: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            timezone,
            now,
            scope: Scope::Events,
        }
    }
}

/// The rows filters are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `events`: a person filter reads `person.properties`, a cohort one `person_id`.
    Events,
    /// `persons` (a cohort's definition): a person filter reads `properties`, a cohort one
    /// `id`, and a behavioral one asks `events` whether the person did something.
    Persons,
}

/// The HogQL condition of a property filter value: a list (all must match), a group
/// `{type: "AND"|"OR", values: […]}` (nested to any depth PostHog sends), or one filter.
/// `None` when there is nothing to filter on (an empty list or group).
pub fn properties_expr(v: &Value, cx: &FilterContext) -> Result<Option<String>, FilterError> {
    properties_at(v, cx, 0)
}

/// How deep groups of groups may nest.
const MAX_DEPTH: usize = 16;

fn properties_at(
    v: &Value,
    cx: &FilterContext,
    depth: usize,
) -> Result<Option<String>, FilterError> {
    if depth > MAX_DEPTH {
        return Err(FilterError(format!(
            "property filter groups nest deeper than {MAX_DEPTH}"
        )));
    }
    match v {
        Value::Null => Ok(None),
        Value::Array(items) => join(items, "AND", cx, depth),
        Value::Object(m) if m.contains_key("values") && !m.contains_key("key") => {
            let op = match m.get("type").and_then(Value::as_str) {
                None | Some("AND") => "AND",
                Some("OR") => "OR",
                Some(other) => {
                    return Err(FilterError(format!(
                        "a property group's type must be AND or OR, got '{other}'"
                    )));
                }
            };
            match m.get("values") {
                Some(Value::Array(items)) => join(items, op, cx, depth),
                _ => Err(FilterError(
                    "a property group's values must be a list".into(),
                )),
            }
        }
        Value::Object(_) => property_filter(v, cx).map(Some),
        other => Err(FilterError(format!(
            "properties must be a list of filters or a group of them, got {other}"
        ))),
    }
}

fn join(
    items: &[Value],
    op: &str,
    cx: &FilterContext,
    depth: usize,
) -> Result<Option<String>, FilterError> {
    let mut parts = Vec::new();
    for i in items {
        if let Some(p) = properties_at(i, cx, depth + 1)? {
            parts.push(format!("({p})"));
        }
    }
    Ok(match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(parts.join(&format!(" {op} "))),
    })
}

/// A HogQL string literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `base.key`, or `base['key']` for keys that are not plain names.
fn field(base: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    match plain {
        true => format!("{base}.{key}"),
        false => format!("{base}[{}]", quote(key)),
    }
}

/// A backquoted identifier.
fn ident(name: &str) -> String {
    format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`"))
}

/// One filter `{key, value, operator, type}` as a HogQL condition.
pub fn property_filter(f: &Value, cx: &FilterContext) -> Result<String, FilterError> {
    let m = f
        .as_object()
        .ok_or_else(|| FilterError(format!("a property filter must be an object, got {f}")))?;
    let ty = m.get("type").and_then(Value::as_str).unwrap_or("event");
    let key = match m.get("key") {
        Some(Value::String(k)) => k.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(FilterError(format!("a property filter needs a key: {f}"))),
    };
    let operator = m.get("operator").and_then(Value::as_str);
    let value = m.get("value").unwrap_or(&Value::Null);
    let persons = cx.scope == Scope::Persons;
    let condition = match (ty, persons) {
        ("behavioral", true) => Some(super::cohort::behavioral(m, cx)?),
        ("behavioral", false) => {
            return Err(FilterError(
                "behavioral filters belong to a cohort's definition".into(),
            ));
        }
        ("event" | "group" | "session" | "event_metadata", true) => {
            return Err(FilterError(format!(
                "a cohort's filters are on persons: a filter of type '{ty}' goes inside a behavioral filter"
            )));
        }
        _ => None,
    };
    // `negation: true` (cohort definitions) turns the condition around.
    let negate = |c: String| match m.get("negation") {
        Some(Value::Bool(true)) => format!("NOT ({c})"),
        _ => c,
    };
    if let Some(c) = condition {
        return Ok(negate(c));
    }
    let person_id = if persons { "id" } else { "person_id" };
    let target = match ty {
        "event" => field("properties", &key),
        "person" if persons => field("properties", &key),
        "person" => field("person.properties", &key),
        "group" => {
            let index = m
                .get("group_type_index")
                .and_then(Value::as_u64)
                .filter(|i| *i < 5)
                .ok_or_else(|| {
                    FilterError(format!(
                        "a group property filter needs group_type_index 0 to 4: {f}"
                    ))
                })?;
            field(&format!("group_{index}.properties"), &key)
        }
        "session" => format!("session.{}", ident(&key)),
        "event_metadata" => ident(&key),
        "hogql" => {
            // The key is the condition itself.
            return Ok(key);
        }
        "cohort" => {
            let id = match value {
                Value::Number(n) if n.as_i64().is_some() => n.to_string(),
                Value::String(s) if s.parse::<i64>().is_ok() => s.clone(),
                _ => {
                    return Err(FilterError(format!(
                        "a cohort filter's value must be the cohort id: {f}"
                    )));
                }
            };
            return Ok(negate(match operator {
                Some("not_in") => format!("{person_id} NOT IN COHORT {id}"),
                None | Some("in") | Some("exact") => format!("{person_id} IN COHORT {id}"),
                Some(o) => {
                    return Err(FilterError(format!(
                        "a cohort filter's operator is in or not_in, got '{o}'"
                    )));
                }
            }));
        }
        other => {
            return Err(FilterError(format!(
                "property filters of type '{other}' are not supported; use event, person, group, session, event_metadata, hogql or cohort"
            )));
        }
    };
    operator_expr(&target, operator.unwrap_or("exact"), value, cx).map(negate)
}

/// A JSON scalar as a HogQL literal.
fn literal(v: &Value) -> Result<String, FilterError> {
    Ok(match v {
        Value::String(s) => quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => quote(if *b { "true" } else { "false" }),
        Value::Null => "NULL".into(),
        other => {
            return Err(FilterError(format!(
                "a filter value must be a scalar, got {other}"
            )));
        }
    })
}

/// A filter value as a number (numbers, and strings that hold one).
fn number(v: &Value, operator: &str) -> Result<String, FilterError> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|n| n.is_finite())
    .ok_or_else(|| FilterError(format!("operator {operator} needs a number, got {v}")))?;
    Ok(format!("{n:?}"))
}

/// The values of `exact`/`is_not`: a list or one value, compared as text (a number or a
/// boolean matches the property's text, as PostHog compares JSON values).
fn text_values(v: &Value) -> Result<Vec<String>, FilterError> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    items
        .into_iter()
        .map(|i| match i {
            Value::Number(n) => Ok(quote(&n.to_string())),
            other => literal(other),
        })
        .collect()
}

fn operator_expr(
    target: &str,
    operator: &str,
    value: &Value,
    cx: &FilterContext,
) -> Result<String, FilterError> {
    let text = format!("toString({target})");
    let num = format!("toFloat({target})");
    let one_text = |v: &Value| -> Result<String, FilterError> {
        match v {
            Value::Array(a) if a.len() == 1 => literal(&a[0]),
            Value::Array(_) => Err(FilterError(format!(
                "operator {operator} takes one value, got {v}"
            ))),
            Value::Null => Err(FilterError(format!("operator {operator} needs a value"))),
            other => literal(other),
        }
    };
    let date = |v: &Value| -> Result<String, FilterError> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Array(a) if a.len() == 1 && a[0].is_string() => {
                a[0].as_str().expect("string").to_owned()
            }
            other => {
                return Err(FilterError(format!(
                    "operator {operator} needs a date, got {other}"
                )));
            }
        };
        date_literal(&s, cx)
    };
    let parsed_date = format!("parseDateTime64BestEffortOrNull({text}, 6, 'UTC')");
    let range = |v: &Value| -> Result<(String, String), FilterError> {
        match v {
            Value::Array(a) if a.len() == 2 => {
                Ok((number(&a[0], operator)?, number(&a[1], operator)?))
            }
            other => Err(FilterError(format!(
                "operator {operator} needs [low, high], got {other}"
            ))),
        }
    };
    Ok(match operator {
        "exact" | "is_not" => {
            let values = text_values(value)?;
            let negated = operator == "is_not";
            let cmp = match values.len() {
                0 => return Ok(if negated { "true" } else { "false" }.into()),
                1 => format!("{text} {} {}", if negated { "!=" } else { "=" }, values[0]),
                _ => format!(
                    "{text} {}IN ({})",
                    if negated { "NOT " } else { "" },
                    values.join(", ")
                ),
            };
            format!("ifNull({cmp}, {negated})")
        }
        "icontains" => format!("ifNull({text} ILIKE {}, false)", like(value, operator)?),
        "not_icontains" => format!("ifNull({text} NOT ILIKE {}, true)", like(value, operator)?),
        "regex" => format!("ifNull(match({text}, {}), false)", one_text(value)?),
        "not_regex" => format!("ifNull(NOT match({text}, {}), true)", one_text(value)?),
        "gt" => format!("ifNull({num} > {}, false)", number(value, operator)?),
        "gte" | "min" => format!("ifNull({num} >= {}, false)", number(value, operator)?),
        "lt" => format!("ifNull({num} < {}, false)", number(value, operator)?),
        "lte" | "max" => format!("ifNull({num} <= {}, false)", number(value, operator)?),
        "between" => {
            let (lo, hi) = range(value)?;
            format!("ifNull({num} >= {lo} AND {num} <= {hi}, false)")
        }
        "not_between" => {
            let (lo, hi) = range(value)?;
            format!("ifNull({num} < {lo} OR {num} > {hi}, true)")
        }
        "is_set" => format!("{target} IS NOT NULL"),
        "is_not_set" => format!("{target} IS NULL"),
        "is_date_exact" => format!(
            "ifNull(toDate({parsed_date}) = toDate({}), false)",
            date(value)?
        ),
        "is_date_before" => format!("ifNull({parsed_date} < {}, false)", date(value)?),
        "is_date_after" => format!("ifNull({parsed_date} > {}, false)", date(value)?),
        other => {
            return Err(FilterError(format!(
                "operator '{other}' is not supported; use exact, is_not, icontains, not_icontains, regex, not_regex, gt, gte, lt, lte, min, max, between, not_between, is_set, is_not_set, is_date_exact, is_date_before or is_date_after"
            )));
        }
    })
}

/// `'%value%'` for `icontains`: PostHog puts the value between `%` as it is.
fn like(v: &Value, operator: &str) -> Result<String, FilterError> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) if a.len() == 1 => return like(&a[0], operator),
        other => {
            return Err(FilterError(format!(
                "operator {operator} needs a text value, got {other}"
            )));
        }
    };
    Ok(quote(&format!("%{s}%")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::insights::test_cx as cx;

    fn one(f: Value) -> String {
        property_filter(&f, &cx()).unwrap()
    }

    #[test]
    fn each_type_reads_its_field() {
        assert_eq!(
            one(json!({"key": "$browser", "value": "Chrome"})),
            "ifNull(toString(properties.$browser) = 'Chrome', false)"
        );
        assert_eq!(
            one(
                json!({"key": "plan", "value": ["a", "b"], "operator": "is_not", "type": "person"})
            ),
            "ifNull(toString(person.properties.plan) NOT IN ('a', 'b'), true)"
        );
        assert_eq!(
            one(
                json!({"key": "odd key's", "value": 5, "operator": "gt", "type": "group", "group_type_index": 2})
            ),
            "ifNull(toFloat(group_2.properties['odd key\\'s']) > 5.0, false)"
        );
        assert_eq!(
            one(
                json!({"key": "$session_duration", "value": 30, "operator": "lt", "type": "session"})
            ),
            "ifNull(toFloat(session.`$session_duration`) < 30.0, false)"
        );
        assert_eq!(
            one(json!({"key": "distinct_id", "value": "u1", "type": "event_metadata"})),
            "ifNull(toString(`distinct_id`) = 'u1', false)"
        );
        assert_eq!(
            one(json!({"key": "event = 'x' OR 1 = 1", "type": "hogql"})),
            "event = 'x' OR 1 = 1"
        );
        assert_eq!(
            one(json!({"key": "id", "value": 7, "type": "cohort"})),
            "person_id IN COHORT 7"
        );
        assert_eq!(
            one(json!({"key": "id", "value": "7", "operator": "not_in", "type": "cohort"})),
            "person_id NOT IN COHORT 7"
        );
    }

    #[test]
    fn operators_and_their_missing_value_rule() {
        let f = |op: &str, v: Value| one(json!({"key": "k", "operator": op, "value": v}));
        assert_eq!(
            f("icontains", json!("ab")),
            "ifNull(toString(properties.k) ILIKE '%ab%', false)"
        );
        assert_eq!(
            f("not_icontains", json!("ab")),
            "ifNull(toString(properties.k) NOT ILIKE '%ab%', true)"
        );
        assert_eq!(
            f("regex", json!("^a")),
            "ifNull(match(toString(properties.k), '^a'), false)"
        );
        assert_eq!(
            f("not_regex", json!("^a")),
            "ifNull(NOT match(toString(properties.k), '^a'), true)"
        );
        assert_eq!(
            f("gte", json!("2.5")),
            "ifNull(toFloat(properties.k) >= 2.5, false)"
        );
        assert_eq!(
            f("between", json!([1, 3])),
            "ifNull(toFloat(properties.k) >= 1.0 AND toFloat(properties.k) <= 3.0, false)"
        );
        assert_eq!(
            f("not_between", json!([1, 3])),
            "ifNull(toFloat(properties.k) < 1.0 OR toFloat(properties.k) > 3.0, true)"
        );
        assert_eq!(f("is_set", json!(null)), "properties.k IS NOT NULL");
        assert_eq!(f("is_not_set", json!(null)), "properties.k IS NULL");
        assert_eq!(
            f("is_date_before", json!("-7d")),
            "ifNull(parseDateTime64BestEffortOrNull(toString(properties.k), 6, 'UTC') < toDateTime64('2024-03-24 12:00:00.000000', 6, 'UTC'), false)"
        );
        assert_eq!(
            f("exact", json!(true)),
            "ifNull(toString(properties.k) = 'true', false)"
        );
        assert_eq!(f("exact", json!([])), "false");
        assert_eq!(f("is_not", json!([])), "true");
        for (op, v) in [
            ("gt", json!("many")),
            ("between", json!([1])),
            ("regex", json!(["a", "b"])),
            ("is_date_after", json!("soon")),
            ("is_cleaned_path_exact", json!("/a")),
        ] {
            let e = property_filter(&json!({"key": "k", "operator": op, "value": v}), &cx());
            assert!(e.is_err(), "{op} {v}");
        }
    }

    #[test]
    fn lists_and_groups_combine() {
        let v = json!({"type": "OR", "values": [
            {"type": "AND", "values": [{"key": "a", "value": 1}, {"key": "b", "value": 2}]},
            [{"key": "c", "value": "x", "type": "person"}],
            {"type": "AND", "values": []},
        ]});
        assert_eq!(
            properties_expr(&v, &cx()).unwrap().unwrap(),
            "((ifNull(toString(properties.a) = '1', false)) AND (ifNull(toString(properties.b) = '2', false))) OR ((ifNull(toString(person.properties.c) = 'x', false)))"
        );
        assert_eq!(properties_expr(&json!([]), &cx()).unwrap(), None);
        assert!(properties_expr(&json!({"type": "XOR", "values": []}), &cx()).is_err());
        assert!(properties_expr(&json!([{"key": "a", "type": "element"}]), &cx()).is_err());
        let mut deep = json!([]);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert!(properties_expr(&deep, &cx()).is_err());
        // Every filter this module writes parses as HogQL.
        let every = json!([
            {"key": "$browser", "value": ["a", "b"], "operator": "exact"},
            {"key": "k", "value": "-1dStart", "operator": "is_date_after", "type": "person"},
            {"key": "k", "value": [1, 2], "operator": "not_between", "type": "group", "group_type_index": 0},
            {"key": "id", "value": 3, "type": "cohort", "operator": "not_in"},
            {"key": "x y", "value": "v", "operator": "not_icontains", "type": "session"},
        ]);
        let text = properties_expr(&every, &cx()).unwrap().unwrap();
        crate::hogql::parser::parse_expr(&text).unwrap();
    }
}
