//! PostHog's `FunnelsQuery` (ordered steps, the steps view): per person, the furthest step
//! reached in order within the conversion window (`windowFunnel`, ClickHouse's default
//! mode), counted per step. One HogQL query.

use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, properties_expr, quote};
use super::trends::{Interval, Period, resolve_period};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// A `FunnelsQuery`, read.
#[derive(Debug, Clone)]
pub struct Funnel {
    pub node: Map<String, Value>,
    pub steps: Vec<Map<String, Value>>,
    /// The conversion window, in seconds.
    pub window: i64,
    pub date_range: Option<Value>,
}

impl Funnel {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a FunnelsQuery must be an object"))?;
        let steps: Vec<Map<String, Value>> = match q.get("series") {
            Some(Value::Array(s)) if s.len() >= 2 && s.len() <= 30 => s
                .iter()
                .map(|x| {
                    let m = x
                        .as_object()
                        .cloned()
                        .ok_or_else(|| bad("each step must be an EventsNode object"))?;
                    match m.get("kind").and_then(Value::as_str) {
                        None | Some("EventsNode") => Ok(m),
                        Some(other) => Err(bad(format!(
                            "steps of kind {other} are not supported; use EventsNode"
                        ))),
                    }
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(bad("a FunnelsQuery needs series: 2 to 30 EventsNode steps")),
        };
        let f = q.get("funnelsFilter").and_then(Value::as_object);
        let get = |k: &str| f.and_then(|f| f.get(k)).filter(|v| !v.is_null());
        if let Some(o) = get("funnelOrderType").and_then(Value::as_str)
            && o != "ordered"
        {
            return Err(bad(format!(
                "funnelOrderType '{o}' is not supported yet; ordered funnels are"
            )));
        }
        if let Some(o) = get("funnelVizType").and_then(Value::as_str)
            && o != "steps"
        {
            return Err(bad(format!(
                "funnelVizType '{o}' is not supported yet; the steps view is"
            )));
        }
        if get("exclusions").is_some_and(|e| e.as_array().is_none_or(|a| !a.is_empty())) {
            return Err(bad("funnel exclusions are not supported yet"));
        }
        if q.get("breakdownFilter")
            .and_then(|b| b.get("breakdown"))
            .is_some_and(|b| !b.is_null())
        {
            return Err(bad("funnel breakdowns are not supported yet"));
        }
        let n = match get("funnelWindowInterval") {
            None => 14,
            Some(v) => v
                .as_i64()
                .filter(|n| (1..=100_000).contains(n))
                .ok_or_else(|| bad("funnelWindowInterval must be a positive count"))?,
        };
        let unit = match get("funnelWindowIntervalUnit")
            .and_then(Value::as_str)
            .unwrap_or("day")
        {
            "second" => 1,
            "minute" => 60,
            "hour" => 3_600,
            "day" => 86_400,
            "week" => 7 * 86_400,
            "month" => 30 * 86_400,
            other => {
                return Err(bad(format!(
                    "funnelWindowIntervalUnit must be second, minute, hour, day, week or month, got '{other}'"
                )));
            }
        };
        Ok(Funnel {
            node: q.clone(),
            steps,
            window: n * unit,
            date_range: q.get("dateRange").filter(|v| !v.is_null()).cloned(),
        })
    }

    /// The range the first step must fall in (PostHog's default `-7d`, by day).
    pub fn period(&self, cx: &FilterContext) -> Result<Period, FilterError> {
        resolve_period(self.date_range.as_ref(), Interval::Day, cx, None)
    }

    /// Each person's furthest step (`level`, 1 = the first) in `p`.
    pub fn levels_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let mut steps = Vec::new();
        for s in &self.steps {
            let mut c = Vec::new();
            if let Some(e) = s.get("event").and_then(Value::as_str) {
                c.push(format!("event = {}", quote(e)));
            }
            for props in [s.get("properties"), s.get("fixedProperties")]
                .into_iter()
                .flatten()
            {
                if let Some(x) = properties_expr(props, cx)? {
                    c.push(format!("({x})"));
                }
            }
            steps.push(match c.is_empty() {
                true => "true".to_string(),
                false => format!("({})", c.join(" AND ")),
            });
        }
        let mut conds = vec![
            format!("timestamp >= {}", lit(p.from)),
            // Later steps may come within the window after the range's end.
            format!(
                "timestamp <= {}",
                lit(p.to + chrono::Duration::seconds(self.window))
            ),
            format!("({})", steps.join(" OR ")),
        ];
        if let Some(props) = self.node.get("properties")
            && let Some(x) = properties_expr(props, cx)?
        {
            conds.push(format!("({x})"));
        }
        // The first step must happen in the range itself.
        let mut first = steps.clone();
        first[0] = format!("({} AND timestamp <= {})", steps[0], lit(p.to));
        Ok(format!(
            "SELECT person_id, windowFunnel({})(toDateTime(timestamp), {}) AS level \
             FROM events WHERE {} GROUP BY person_id",
            self.window,
            first.join(", "),
            conds.join(" AND ")
        ))
    }

    /// The steps from the rows `[level, persons]`, in PostHog's shape.
    pub fn shape(&self, rows: &[Value]) -> Vec<Value> {
        let mut reached = vec![0i64; self.steps.len()];
        for r in rows {
            let level = r.get(0).and_then(Value::as_i64).unwrap_or(0);
            let n = r.get(1).and_then(Value::as_i64).unwrap_or(0);
            for (i, slot) in reached.iter_mut().enumerate() {
                if level > i as i64 {
                    *slot += n;
                }
            }
        }
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = s.get("event").and_then(Value::as_str);
                json!({
                    "action_id": name,
                    "name": name.unwrap_or("All events"),
                    "custom_name": s.get("custom_name").cloned().unwrap_or(Value::Null),
                    "order": i,
                    "type": "events",
                    "count": reached[i],
                    "people": [],
                    // Conversion times are not computed yet.
                    "average_conversion_time": null,
                    "median_conversion_time": null,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn steps_count_who_reached_them() {
        let f = Funnel::from_value(&json!({"kind": "FunnelsQuery", "series": [
            {"kind": "EventsNode", "event": "view"},
            {"kind": "EventsNode", "event": "buy", "properties": [{"key": "total", "value": 5, "operator": "gt"}]}],
            "funnelsFilter": {"funnelWindowInterval": 2, "funnelWindowIntervalUnit": "hour"}}))
        .unwrap();
        assert_eq!(f.window, 7200);
        let p = f.period(&cx()).unwrap();
        let q = f.levels_query(&p, &cx()).unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        assert!(q.contains("windowFunnel(7200)"), "{q}");
        let s = f.shape(&[json!([1, 4]), json!([2, 3])]);
        assert_eq!(
            (s[0]["count"].as_i64(), s[1]["count"].as_i64()),
            (Some(7), Some(3))
        );
        for (v, says) in [
            (json!({"series": [{"event": "a"}]}), "2 to 30"),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"funnelOrderType": "strict"}}),
                "strict",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"funnelVizType": "trends"}}),
                "trends",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"exclusions": [{"event": "x"}]}}),
                "exclusions",
            ),
            (
                json!({"series": [{}, {}], "breakdownFilter": {"breakdown": "$browser"}}),
                "breakdowns",
            ),
        ] {
            let e = Funnel::from_value(&v).unwrap_err();
            assert!(e.0.contains(says), "{v}: {e}");
        }
    }
}
