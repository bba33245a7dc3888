//! PostHog's insight vocabulary compiled to HogQL text: property filters, date ranges, and
//! a HogQL query's `filters` (what its `{filters}` placeholder stands for). Pure: no
//! DataFusion and no I/O; the query service parses what this writes and plans it like any
//! other HogQL, so a filter is as fast as the same condition written by hand.

pub mod cohort;
pub mod correlation;
pub mod dates;
pub mod events;
pub mod filters;
pub mod funnels;
pub mod lifecycle;
pub mod paths;
pub mod retention;
pub mod trends;

use serde_json::Value;

pub use filters::{FilterContext, Scope, properties_expr, property_filter, quote};

/// The list of text at `m[key]` (absent or null: empty); `owner.key` names it in the error.
pub fn text_list(
    m: &serde_json::Map<String, Value>,
    owner: &str,
    key: &str,
) -> Result<Vec<String>, FilterError> {
    let bad = || FilterError(format!("{owner}.{key} must be a list of text"));
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// Why a filter or a date cannot be read; the message names the part and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError(pub String);

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FilterError {}

/// A HogQL query's `filters` (`{properties, dateRange: {date_from, date_to},
/// filterTestAccounts}`) as the condition `{filters}` stands for, on `timestamp`:
/// `date_to` is an exclusive upper bound, `date_from` (unless `all`) an inclusive lower
/// one, as PostHog writes them. `None`: nothing to filter (`{filters}` is then `true`).
/// `filterTestAccounts` adds nothing: hedgerow has no test-account filters to apply.
pub fn hogql_filters(filters: &Value, cx: &FilterContext) -> Result<Option<String>, FilterError> {
    let m = match filters {
        Value::Null => return Ok(None),
        Value::Object(m) => m,
        other => {
            return Err(FilterError(format!(
                "filters must be an object with properties and dateRange, got {other}"
            )));
        }
    };
    for key in m.keys() {
        if !matches!(
            key.as_str(),
            "properties" | "dateRange" | "filterTestAccounts"
        ) {
            return Err(FilterError(format!(
                "filters.{key} is not supported; filters take properties, dateRange and filterTestAccounts"
            )));
        }
    }
    let mut parts = Vec::new();
    if let Some(p) = m.get("properties")
        && let Some(e) = properties_expr(p, cx)?
    {
        parts.push(format!("({e})"));
    }
    let (from, to) = date_range(filters, cx)?;
    if let Some(to) = to {
        parts.push(format!("timestamp < {to}"));
    }
    if let Some(from) = from {
        parts.push(format!("timestamp >= {from}"));
    }
    Ok(match parts.is_empty() {
        true => None,
        false => Some(parts.join(" AND ")),
    })
}

/// The context the tests of filters are written against: UTC, 2024-03-31 12:00.
#[cfg(test)]
pub(crate) fn test_cx() -> FilterContext {
    FilterContext::events(
        chrono_tz::UTC,
        chrono::DateTime::parse_from_rfc3339("2024-03-31T12:00:00Z")
            .expect("a date")
            .into(),
    )
}

/// The bounds of `filters.dateRange` as HogQL DateTime literals: `(date_from, date_to)`,
/// each `None` when not set (`date_from: "all"` is no bound).
pub fn date_range(
    filters: &Value,
    cx: &FilterContext,
) -> Result<(Option<String>, Option<String>), FilterError> {
    let range = match filters.get("dateRange") {
        None | Some(Value::Null) => return Ok((None, None)),
        Some(Value::Object(r)) => r,
        Some(other) => {
            return Err(FilterError(format!(
                "filters.dateRange must be an object, got {other}"
            )));
        }
    };
    let bound = |name: &str| -> Result<Option<String>, FilterError> {
        match range.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if name == "date_from" && s == "all" => Ok(None),
            Some(Value::String(s)) => dates::date_literal(s, cx).map(Some),
            Some(other) => Err(FilterError(format!(
                "dateRange.{name} must be a date text, got {other}"
            ))),
        }
    };
    Ok((bound("date_from")?, bound("date_to")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_are_properties_and_a_range_on_timestamp() {
        let cx = FilterContext::events(
            "Europe/Berlin".parse().unwrap(),
            chrono::DateTime::parse_from_rfc3339("2024-03-31T12:00:00Z")
                .unwrap()
                .into(),
        );
        let f = json!({
            "properties": [{"key": "$browser", "value": "Chrome"}],
            // A day back over the change to summer time is a day of wall-clock time, as
            // PostHog's zone-aware arithmetic: 14:00 CEST back to 14:00 CET.
            "dateRange": {"date_from": "2024-03-01", "date_to": "-1d"},
            "filterTestAccounts": true,
        });
        assert_eq!(
            hogql_filters(&f, &cx).unwrap().unwrap(),
            "((ifNull(toString(properties.$browser) = 'Chrome', false))) \
             AND timestamp < toDateTime64('2024-03-30 13:00:00.000000', 6, 'UTC') \
             AND timestamp >= toDateTime64('2024-02-29 23:00:00.000000', 6, 'UTC')"
        );
        let all = json!({"dateRange": {"date_from": "all"}, "properties": []});
        assert_eq!(hogql_filters(&all, &cx).unwrap(), None);
        assert_eq!(hogql_filters(&Value::Null, &cx).unwrap(), None);
        assert!(hogql_filters(&json!({"breakdown": "x"}), &cx).is_err());
        assert!(hogql_filters(&json!({"dateRange": {"date_from": "soon"}}), &cx).is_err());
    }
}
