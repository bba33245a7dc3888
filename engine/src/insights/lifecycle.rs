//! PostHog's `LifecycleQuery`: per interval, the persons who are new (first seen in it),
//! returning (active in it and the one before), resurrecting (active in it, not in the one
//! before, seen earlier) and dormant (active in the one before, not in it; negative).
//!
//! One HogQL query: per person active in the range or the interval before it, the buckets
//! they were active in and the bucket their person was created in; then, with one `ARRAY
//! JOIN` over those buckets, each active bucket's status (and `dormant` in the bucket after
//! one the person left) counted per bucket. Only the counts leave the engine, however many
//! persons there are; the persons of one status in one bucket are the same query filtered.

use std::collections::HashMap;

use chrono::NaiveDateTime;
use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, properties_expr, quote};
use super::trends::{Interval, Period};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// The statuses in PostHog's order.
pub const STATUSES: [&str; 4] = ["new", "returning", "resurrecting", "dormant"];

/// A `LifecycleQuery`, read.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub node: Map<String, Value>,
    pub series: Map<String, Value>,
    pub interval: Interval,
    pub date_range: Option<Value>,
    /// Statuses to answer (`lifecycleFilter.toggledLifecycles`), all by default.
    pub toggled: Vec<String>,
}

const FORMAT: &str = "%Y-%m-%d %H:%M:%S";

impl Lifecycle {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a LifecycleQuery must be an object"))?;
        let series = match q.get("series") {
            Some(Value::Array(s)) if s.len() == 1 => s[0]
                .as_object()
                .cloned()
                .ok_or_else(|| bad("the series must be an EventsNode object"))?,
            _ => return Err(bad("a LifecycleQuery needs series: one EventsNode")),
        };
        match series.get("kind").and_then(Value::as_str) {
            None | Some("EventsNode") => {}
            Some(other) => {
                return Err(bad(format!(
                    "series of kind {other} are not supported; use EventsNode"
                )));
            }
        }
        let interval = match q.get("interval").and_then(Value::as_str).unwrap_or("day") {
            "hour" => Interval::Hour,
            "day" => Interval::Day,
            "week" => Interval::Week,
            "month" => Interval::Month,
            other => {
                return Err(bad(format!(
                    "interval must be hour, day, week or month, got '{other}'"
                )));
            }
        };
        let toggled = match q
            .get("lifecycleFilter")
            .and_then(|f| f.get("toggledLifecycles"))
        {
            None | Some(Value::Null) => STATUSES.iter().map(|s| s.to_string()).collect(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| match s.as_str() {
                    Some(x) if STATUSES.contains(&x) => Ok(x.to_owned()),
                    _ => Err(bad(format!(
                        "toggledLifecycles holds new, returning, resurrecting or dormant, got {s}"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(bad(format!(
                    "toggledLifecycles must be a list, got {other}"
                )));
            }
        };
        Ok(Lifecycle {
            node: q.clone(),
            series,
            interval,
            date_range: q.get("dateRange").filter(|v| !v.is_null()).cloned(),
            toggled,
        })
    }

    /// The start of the bucket before / after the one starting at `x` (a HogQL expression):
    /// the start of the bucket holding a moment just before it / well inside the next one.
    fn neighbour(&self, x: &str, after: bool) -> String {
        let (f, shift) = match (self.interval, after) {
            (Interval::Hour, false) => ("toStartOfHour", "-1"),
            (Interval::Day, false) => ("toStartOfDay", "-1"),
            (Interval::Week, false) => ("toStartOfWeek", "-1"),
            (Interval::Month, false) => ("toStartOfMonth", "-1"),
            (Interval::Hour, true) => ("toStartOfHour", "5400"),
            (Interval::Day, true) => ("toStartOfDay", "129600"),
            (Interval::Week, true) => ("toStartOfWeek", "777600"),
            (Interval::Month, true) => ("toStartOfMonth", "3456000"),
        };
        match self.interval {
            Interval::Week => format!("{f}(addSeconds({x}, {shift}), 0)"),
            _ => format!("{f}(addSeconds({x}, {shift}))"),
        }
    }

    /// `[bucket, status, persons]` of every status in every bucket of `p` (dormant counts
    /// positive here; the shape makes them negative).
    pub fn counts_query(
        &self,
        p: &Period,
        before: chrono::DateTime<chrono::Utc>,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        Ok(format!(
            "SELECT formatDateTime(b, '%Y-%m-%d %H:%i:%S') AS bucket, status, n \
             FROM (SELECT b, status, count() AS n FROM ({}) GROUP BY b, status)",
            self.statuses_query(p, before, cx)?
        ))
    }

    /// One row per person and status they have in a bucket of `p`: `person_id`, `b` (the
    /// bucket's start) and `status`.
    fn statuses_query(
        &self,
        p: &Period,
        before: chrono::DateTime<chrono::Utc>,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let (prev, next) = (self.neighbour("x", false), self.neighbour("x", true));
        Ok(format!(
            "SELECT person_id, if(here, x, {next}) AS b, \
             if(here, multiIf(x = created, 'new', has(active, {prev}), 'returning', 'resurrecting'), 'dormant') AS status \
             FROM (SELECT person_id, active, created, both[i] AS x, i <= length(active) AS here \
                   FROM (SELECT person_id, active, created, arrayConcat(active, active) AS both FROM ({})) \
                   ARRAY JOIN arrayEnumerate(both) AS i) \
             WHERE (here OR NOT has(active, {next})) AND b >= {} AND b <= {}",
            self.query(p, before, cx)?,
            lit(p.from),
            lit(p.to)
        ))
    }

    /// The person ids with `status` in the bucket of `p` that holds local time `target`.
    pub fn persons_query(
        &self,
        p: &Period,
        before: chrono::DateTime<chrono::Utc>,
        cx: &FilterContext,
        target: NaiveDateTime,
        status: &str,
    ) -> Result<String, FilterError> {
        if !STATUSES.contains(&status) {
            return Err(bad(format!(
                "lifecycle_type must be new, returning, resurrecting or dormant, got '{status}'"
            )));
        }
        let b = p
            .buckets
            .iter()
            .rev()
            .find(|b| **b <= target)
            .ok_or_else(|| bad("target_date is before the date range"))?;
        Ok(format!(
            "SELECT DISTINCT person_id FROM ({}) WHERE status = {} \
             AND formatDateTime(b, '%Y-%m-%d %H:%i:%S') = {}",
            self.statuses_query(p, before, cx)?,
            quote(status),
            quote(&b.format(FORMAT).to_string())
        ))
    }

    /// The query of each person's active buckets (from one interval before `p`) and the
    /// bucket of their creation.
    pub fn query(
        &self,
        p: &Period,
        before: chrono::DateTime<chrono::Utc>,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let mut conds = vec![
            format!("timestamp >= {}", lit(before)),
            format!("timestamp <= {}", lit(p.to)),
        ];
        if let Some(e) = self.series.get("event").and_then(Value::as_str) {
            conds.push(format!("event = {}", quote(e)));
        }
        for props in [
            self.node.get("properties"),
            self.series.get("properties"),
            self.series.get("fixedProperties"),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(c) = properties_expr(props, cx)? {
                conds.push(format!("({c})"));
            }
        }
        let bucket = |t: &str| match self.interval {
            Interval::Hour => format!("toStartOfHour({t})"),
            Interval::Day => format!("toStartOfDay({t})"),
            Interval::Week => format!("toStartOfWeek({t}, 0)"),
            Interval::Month => format!("toStartOfMonth({t})"),
        };
        // Per (person, bucket) first, then per person: the first aggregation is the
        // vectorized one, and the arrays are built from a row per active bucket.
        Ok(format!(
            "SELECT person_id, groupArray(a) AS active, {} AS created FROM (\
             SELECT person_id, {} AS a, min(person.created_at) AS c \
             FROM events WHERE {} GROUP BY person_id, a) GROUP BY person_id",
            bucket("min(c)"),
            bucket("timestamp"),
            conds.join(" AND ")
        ))
    }

    /// The four series from the rows `[bucket, status, persons]` of
    /// [`Lifecycle::counts_query`].
    pub fn shape(&self, p: &Period, rows: &[Value]) -> Vec<Value> {
        let n = p.buckets.len();
        let mut counts: HashMap<&str, Vec<i64>> =
            STATUSES.iter().map(|s| (*s, vec![0; n])).collect();
        let position: HashMap<String, usize> = p
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (b.format(FORMAT).to_string(), i))
            .collect();
        for r in rows {
            let cell = |i: usize| r.get(i).and_then(Value::as_str);
            let (Some(bucket), Some(status)) = (cell(0), cell(1)) else {
                continue;
            };
            let persons = r.get(2).and_then(Value::as_i64).unwrap_or(0);
            if let (Some(&i), Some(&status)) = (
                position.get(bucket),
                STATUSES.iter().find(|s| **s == status),
            ) {
                let delta = if status == "dormant" {
                    -persons
                } else {
                    persons
                };
                counts.get_mut(status).expect("a status")[i] += delta;
            }
        }
        let event = self.series.get("event").and_then(Value::as_str);
        let name = event.unwrap_or("All events");
        let days: Vec<String> = p
            .buckets
            .iter()
            .map(|b| b.format("%Y-%m-%d").to_string())
            .collect();
        let labels: Vec<String> = p
            .buckets
            .iter()
            .map(|b| match self.interval {
                Interval::Hour => b.format("%-d-%b-%Y %H:%M").to_string(),
                _ => b.format("%-d-%b-%Y").to_string(),
            })
            .collect();
        STATUSES
            .iter()
            .filter(|s| self.toggled.iter().any(|t| t == *s))
            .map(|s| {
                let data = &counts[s];
                json!({
                    "data": data,
                    "count": data.iter().sum::<i64>() as f64,
                    "labels": labels,
                    "days": days,
                    "label": format!("{name} - {s}"),
                    "status": s,
                    "action": {
                        "id": event,
                        "type": "events",
                        "order": 0,
                        "name": name,
                        "custom_name": self.series.get("custom_name").cloned().unwrap_or(Value::Null),
                        "math": "total",
                        "properties": {},
                        "days": days,
                    },
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;
    use crate::insights::trends::resolve_period;

    #[test]
    fn statuses_follow_each_persons_buckets() {
        let l = Lifecycle::from_value(&json!({"kind": "LifecycleQuery",
            "series": [{"kind": "EventsNode", "event": "e"}],
            "dateRange": {"date_from": "-2d"}}))
        .unwrap();
        let p = resolve_period(l.date_range.as_ref(), l.interval, &cx(), None).unwrap();
        let prev = p.buckets[0] - chrono::Duration::days(1);
        crate::hogql::parser::parse_query(&l.query(&p, p.from, &cx()).unwrap()).unwrap();
        crate::hogql::parser::parse_query(&l.counts_query(&p, p.from, &cx()).unwrap()).unwrap();
        let target = p.buckets[1];
        crate::hogql::parser::parse_query(
            &l.persons_query(&p, p.from, &cx(), target, "dormant")
                .unwrap(),
        )
        .unwrap();
        assert!(l.persons_query(&p, p.from, &cx(), target, "gone").is_err());
        let _ = prev;
        let d = |day: u32| format!("2024-03-{day:02} 00:00:00");
        let rows = vec![
            json!([d(29), "new", 1]),
            json!([d(29), "returning", 1]),
            json!([d(29), "dormant", 1]),
            json!([d(30), "returning", 2]),
            json!([d(30), "resurrecting", 1]),
            json!([d(31), "returning", 1]),
            json!([d(31), "dormant", 2]),
            json!([d(28), "new", 9]),
        ];
        let s = l.shape(&p, &rows);
        let by: HashMap<&str, &Value> = s
            .iter()
            .map(|x| (x["status"].as_str().unwrap(), &x["data"]))
            .collect();
        assert_eq!(by["new"], &json!([1, 0, 0]));
        assert_eq!(by["returning"], &json!([1, 2, 1]));
        assert_eq!(by["resurrecting"], &json!([0, 1, 0]));
        assert_eq!(by["dormant"], &json!([-1, 0, -2]));
        assert_eq!(s[0]["label"], "e - new");
        assert!(Lifecycle::from_value(&json!({"series": []})).is_err());
        assert!(
            Lifecycle::from_value(
                &json!({"series": [{}], "lifecycleFilter": {"toggledLifecycles": ["gone"]}})
            )
            .is_err()
        );
    }
}
