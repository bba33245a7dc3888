//! PostHog's `LifecycleQuery`: per interval, the persons who are new (first seen in it),
//! returning (active in it and the one before), resurrecting (active in it, not in the one
//! before, seen earlier) and dormant (active in the one before, not in it; negative).
//!
//! One HogQL query lists, per person active in the range or the interval before it, the
//! buckets they were active in and the bucket their person was created in; the statuses
//! are counted from that here.

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
        Ok(format!(
            "SELECT person_id, groupUniqArray(formatDateTime({}, '%Y-%m-%d %H:%i:%S')) AS active, \
             formatDateTime({}, '%Y-%m-%d %H:%i:%S') AS created \
             FROM events WHERE {} GROUP BY person_id",
            bucket("timestamp"),
            bucket("min(person.created_at)"),
            conds.join(" AND ")
        ))
    }

    /// The status of one person's row in bucket `i` of `p` (`None`: no status).
    fn status_of(&self, p: &Period, before: &str, row: &Value, i: usize) -> Option<&'static str> {
        let cells = row.as_array()?;
        let active = |b: &str| {
            cells
                .get(1)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(b)))
        };
        let created = cells.get(2).and_then(Value::as_str).unwrap_or("");
        let bucket = p.buckets.get(i)?.format(FORMAT).to_string();
        let prev = match i {
            0 => before.to_owned(),
            _ => p.buckets[i - 1].format(FORMAT).to_string(),
        };
        match (active(&bucket), active(&prev)) {
            (true, _) if created == bucket => Some("new"),
            (true, true) => Some("returning"),
            (true, false) => Some("resurrecting"),
            (false, true) => Some("dormant"),
            (false, false) => None,
        }
    }

    /// The person ids (first column of the rows) with `status` in the bucket that holds
    /// local time `target`.
    pub fn persons_with(
        &self,
        p: &Period,
        previous: NaiveDateTime,
        rows: &[Value],
        target: NaiveDateTime,
        status: &str,
    ) -> Result<Vec<String>, FilterError> {
        if !STATUSES.contains(&status) {
            return Err(bad(format!(
                "lifecycle_type must be new, returning, resurrecting or dormant, got '{status}'"
            )));
        }
        let i = p
            .buckets
            .iter()
            .rposition(|b| *b <= target)
            .ok_or_else(|| bad("target_date is before the date range"))?;
        let before = previous.format(FORMAT).to_string();
        Ok(rows
            .iter()
            .filter(|r| self.status_of(p, &before, r, i) == Some(status))
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
            .collect())
    }

    /// The four series from the rows `[person_id, [active buckets], created bucket]`.
    pub fn shape(&self, p: &Period, previous: NaiveDateTime, rows: &[Value]) -> Vec<Value> {
        let n = p.buckets.len();
        let mut counts: HashMap<&str, Vec<i64>> =
            STATUSES.iter().map(|s| (*s, vec![0; n])).collect();
        let before = previous.format(FORMAT).to_string();
        for r in rows {
            for i in 0..n {
                if let Some(status) = self.status_of(p, &before, r, i) {
                    let delta = if status == "dormant" { -1 } else { 1 };
                    counts.get_mut(status).expect("a status")[i] += delta;
                }
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
        let d = |day: u32| format!("2024-03-{day:02} 00:00:00");
        let rows = vec![
            // New on the 29th, back the next day, gone on the 31st.
            json!(["a", [d(29), d(30)], d(29)]),
            // Seen before the range (the 28th), skipped the 29th, back on the 30th.
            json!(["b", [d(28), d(30)], d(1)]),
            // Active every day from before the range.
            json!(["c", [d(28), d(29), d(30), d(31)], d(1)]),
        ];
        let s = l.shape(&p, prev, &rows);
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
