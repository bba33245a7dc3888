//! PostHog's `RetentionQuery`: for each period of the range, the persons who did the
//! target event in it (recurring) or for the first time ever in it (first time), and how
//! many of them did the returning event in each later period.
//!
//! One HogQL query lists, per person, the periods they did the target event in, the
//! periods they did the returning event in, and the period of their first target event
//! ever; the table is counted from that here.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, properties_expr, quote};
use super::trends::{
    BREAKDOWN_NULL, BREAKDOWN_OTHER, Breakdown, Interval, Period, breakdown_of, resolve_period,
};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

const FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// A `RetentionQuery`, read.
#[derive(Debug, Clone)]
pub struct Retention {
    pub node: Map<String, Value>,
    pub interval: Interval,
    /// Cohort periods, and the periods after each that are counted.
    pub total: usize,
    pub first_time: bool,
    pub target: Option<String>,
    pub returning: Option<String>,
    pub date_range: Option<Value>,
    /// A breakdown: each person counts under the value of their first target event
    /// (first-time retention) or their latest value of a person property (recurring).
    pub breakdown: Option<Breakdown>,
}

fn entity_event(v: Option<&Value>) -> Result<Option<String>, FilterError> {
    match v {
        None | Some(Value::Null) => Ok(Some("$pageview".into())),
        Some(Value::Object(m)) => {
            match m.get("type").and_then(Value::as_str) {
                None | Some("events") => {}
                Some(other) => {
                    return Err(bad(format!(
                        "retention entities of type {other} are not supported; use events"
                    )));
                }
            }
            Ok(m.get("id").and_then(Value::as_str).map(str::to_owned))
        }
        Some(other) => Err(bad(format!(
            "a retention entity must be an object, got {other}"
        ))),
    }
}

impl Retention {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a RetentionQuery must be an object"))?;
        let f = q
            .get("retentionFilter")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let interval = match f.get("period").and_then(Value::as_str).unwrap_or("Day") {
            "Hour" => Interval::Hour,
            "Day" => Interval::Day,
            "Week" => Interval::Week,
            "Month" => Interval::Month,
            other => {
                return Err(bad(format!(
                    "retentionFilter.period must be Hour, Day, Week or Month, got '{other}'"
                )));
            }
        };
        let total = match f.get("totalIntervals") {
            None | Some(Value::Null) => 11,
            Some(v) => {
                v.as_u64()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| bad("totalIntervals must be 1 to 500"))? as usize
            }
        };
        let first_time = match f.get("retentionType").and_then(Value::as_str) {
            None | Some("retention_recurring") => false,
            Some("retention_first_time") => true,
            Some(other) => {
                return Err(bad(format!(
                    "retentionType '{other}' is not supported; use retention_recurring or retention_first_time"
                )));
            }
        };
        let breakdown = breakdown_of(q)?;
        if breakdown.is_some() && !first_time {
            let types: Vec<&str> = match q
                .get("breakdownFilter")
                .and_then(|b| b.get("breakdowns"))
                .and_then(Value::as_array)
            {
                Some(list) => list
                    .iter()
                    .map(|b| b.get("type").and_then(Value::as_str).unwrap_or("event"))
                    .collect(),
                None => vec![
                    q.get("breakdownFilter")
                        .and_then(|b| b.get("breakdown_type"))
                        .and_then(Value::as_str)
                        .unwrap_or("event"),
                ],
            };
            if types.iter().any(|t| *t != "person") {
                return Err(bad(
                    "recurring retention breaks down by person properties only; an event property needs retention_first_time",
                ));
            }
        }
        Ok(Retention {
            node: q.clone(),
            interval,
            total,
            first_time,
            target: entity_event(f.get("targetEntity"))?,
            returning: entity_event(f.get("returningEntity"))?,
            date_range: q.get("dateRange").filter(|v| !v.is_null()).cloned(),
            breakdown,
        })
    }

    /// The cohort periods: the last `totalIntervals` periods, unless a range is given.
    pub fn period(&self, cx: &FilterContext) -> Result<Period, FilterError> {
        let back = (self.total - 1) as i64;
        let default = json!({"date_from": format!("-{}{}", back, match self.interval {
            Interval::Hour => "h",
            Interval::Day => "d",
            Interval::Week => "w",
            Interval::Month => "m",
        })});
        // A range with only its end: the `totalIntervals` periods that end there, as PostHog
        // reads it.
        let mut range = self.date_range.clone().unwrap_or(default);
        let end = range
            .get("date_to")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let start = range.get("date_from").filter(|v| !v.is_null());
        if let (Some(end), None) = (end, start) {
            let to = super::dates::parse_date(&end, cx.timezone, cx.now)?
                .with_timezone(&cx.timezone)
                .naive_local();
            let from = match self.interval {
                Interval::Hour => to - chrono::Duration::hours(back),
                Interval::Day => to - chrono::Duration::days(back),
                Interval::Week => to - chrono::Duration::weeks(back),
                Interval::Month => to
                    .checked_sub_months(chrono::Months::new(back as u32))
                    .ok_or_else(|| bad("dateRange.date_to is too early"))?,
            };
            range["date_from"] = json!(from.format("%Y-%m-%d %H:%M:%S").to_string());
        }
        let mut p = resolve_period(Some(&range), self.interval, cx, None)?;
        p.buckets.truncate(self.total);
        Ok(p)
    }

    /// Per person: target periods, returning periods, the period of the first target event
    /// ever (for first-time retention; the scan then covers all time). Periods stay
    /// DateTimes (period starts in the project's zone) until the counted rows: formatting
    /// them per event took half the query's time.
    pub fn query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let is = |e: &Option<String>| match e {
            Some(e) => format!("event = {}", quote(e)),
            None => "true".into(),
        };
        let (target, returning) = (is(&self.target), is(&self.returning));
        let bucket = match self.interval {
            Interval::Hour => "toStartOfHour(timestamp)",
            Interval::Day => "toStartOfDay(timestamp)",
            Interval::Week => "toStartOfWeek(timestamp, 0)",
            Interval::Month => "toStartOfMonth(timestamp)",
        };
        let in_range = format!(
            "timestamp >= {} AND timestamp <= {}",
            lit(p.from),
            lit(p.to)
        );
        let mut conds = vec![
            format!("(({target}) OR ({returning}))"),
            format!("timestamp <= {}", lit(p.to)),
        ];
        if !self.first_time {
            conds.push(format!("timestamp >= {}", lit(p.from)));
        }
        if let Some(props) = self.node.get("properties")
            && let Some(x) = properties_expr(props, cx)?
        {
            conds.push(format!("({x})"));
        }
        let value = match &self.breakdown {
            None => "''".to_string(),
            Some(b) => {
                let pick = match self.first_time {
                    true => format!("argMinIf({}, timestamp, {target})", b.value),
                    false => format!("argMax({}, timestamp)", b.value),
                };
                let null = quote(BREAKDOWN_NULL);
                format!("ifNull(nullIf({pick}, ''), {null})")
            }
        };
        if self.breakdown.is_none() {
            // Per (person, period) first, as a hand-written retention groups: that
            // aggregation is vectorized, and the per-person arrays are then built from a few
            // rows per person instead of every event (docs/architecture.md has the numbers).
            return Ok(format!(
                "SELECT person_id, groupArrayIf(b, t) AS targets, groupArrayIf(b, r) AS returns, \
                 minIf(b, f) AS first, '' AS breakdown FROM (\
                 SELECT person_id, {bucket} AS b, \
                 countIf(({target}) AND {in_range}) > 0 AS t, \
                 countIf(({returning}) AND {in_range}) > 0 AS r, \
                 countIf({target}) > 0 AS f \
                 FROM events WHERE {} GROUP BY person_id, b) GROUP BY person_id",
                conds.join(" AND ")
            ));
        }
        Ok(format!(
            "SELECT person_id, \
             groupUniqArrayIf({bucket}, ({target}) AND {in_range}) AS targets, \
             groupUniqArrayIf({bucket}, ({returning}) AND {in_range}) AS returns, \
             minIf({bucket}, {target}) AS first, \
             {value} AS breakdown \
             FROM events WHERE {} GROUP BY person_id",
            conds.join(" AND ")
        ))
    }

    /// The instant of period start `b` (local to the project), as a HogQL literal.
    fn period_literal(b: &chrono::NaiveDateTime, cx: &FilterContext) -> String {
        super::dates::instant_literal(super::trends::instant_of(*b, cx.timezone))
    }

    /// Each person's cohorts in `p` (`person_id`, `c` the cohort period, `returns` their
    /// returning periods): the period of their first target event (first-time) or every
    /// period they did it in (recurring). Every period start in the range's first to last
    /// bucket is one of its buckets, so the range is the membership test.
    fn cohorts_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let cohorts = match self.first_time {
            true => "[first]",
            false => "targets",
        };
        let (Some(first), Some(last)) = (p.buckets.first(), p.buckets.last()) else {
            return Err(bad("the date range holds no period"));
        };
        Ok(format!(
            "SELECT person_id, c, returns, breakdown FROM ({}) ARRAY JOIN {cohorts} AS c \
             WHERE c >= {} AND c <= {}",
            self.query(p, cx)?,
            Self::period_literal(first, cx),
            Self::period_literal(last, cx),
        ))
    }

    /// `[cohort period, returning period, persons]` with both periods as text: the
    /// cohort's size (the returning period equal to the cohort's) and its persons who
    /// returned in each later period, counted in HogQL (only these rows leave the engine).
    pub fn counts_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        Ok(format!(
            "SELECT formatDateTime(c, '%Y-%m-%d %H:%i:%S'), formatDateTime(r, '%Y-%m-%d %H:%i:%S'), \
             count(), breakdown FROM ({}) \
             ARRAY JOIN arrayDistinct(arrayConcat([c], returns)) AS r \
             WHERE r >= c GROUP BY c, r, breakdown",
            self.cohorts_query(p, cx)?
        ))
    }

    /// The persons of cohort row `i`.
    pub fn members_query(
        &self,
        p: &Period,
        cx: &FilterContext,
        i: usize,
        breakdown: Option<&Value>,
    ) -> Result<String, FilterError> {
        let of_value = match (breakdown.filter(|v| !v.is_null()), &self.breakdown) {
            (Some(v), Some(b)) => {
                let key = b.key_of(v);
                if key == BREAKDOWN_OTHER {
                    return Err(bad(
                        "the persons of the other breakdown values are not listed yet",
                    ));
                }
                format!(" AND breakdown = {}", quote(&key))
            }
            (Some(_), None) => return Err(bad("the insight has no breakdown")),
            (None, _) => String::new(),
        };
        let start = p.buckets.get(i).ok_or_else(|| {
            bad(format!(
                "interval must be 0 to {}",
                p.buckets.len().saturating_sub(1)
            ))
        })?;
        Ok(format!(
            "SELECT DISTINCT person_id FROM ({}) WHERE c = {}{of_value}",
            self.cohorts_query(p, cx)?,
            Self::period_literal(start, cx)
        ))
    }

    /// PostHog's table: one row per cohort period, `values[k]` the persons of the cohort
    /// who returned `k` periods later (`k = 0`: the cohort itself), from the rows of
    /// [`Retention::counts_query`]; with a breakdown, the table of each value in turn (the
    /// most persons first, past `breakdown_limit` summed as other: a person has one value,
    /// so the sums are exact), each row with its `breakdown_value`.
    pub fn shape(&self, p: &Period, rows: &[Value], tz: chrono_tz::Tz) -> Vec<Value> {
        let position: HashMap<String, usize> = p
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (b.format(FORMAT).to_string(), i))
            .collect();
        let n = p.buckets.len();
        let mut tables: Vec<(String, Vec<Vec<i64>>)> = Vec::new();
        for r in rows {
            let cell = |i: usize| r.get(i).and_then(Value::as_str);
            let (Some(c), Some(back)) = (cell(0).and_then(|c| position.get(c)), cell(1)) else {
                continue;
            };
            let k = match position.get(back) {
                Some(&j) if j >= *c => j - c,
                _ => continue,
            };
            let value = cell(3).unwrap_or("").to_owned();
            let at = match tables.iter().position(|(v, _)| *v == value) {
                Some(i) => i,
                None => {
                    tables.push((value, vec![vec![0i64; n]; n]));
                    tables.len() - 1
                }
            };
            tables[at].1[*c][k] += r.get(2).and_then(Value::as_i64).unwrap_or(0);
        }
        if tables.is_empty() {
            tables.push((String::new(), vec![vec![0i64; n]; n]));
        }
        if let Some(b) = &self.breakdown {
            let size = |t: &Vec<Vec<i64>>| t.iter().map(|row| row[0]).sum::<i64>();
            tables.retain(|(v, _)| !v.is_empty());
            tables.sort_by(|a, b| size(&b.1).cmp(&size(&a.1)).then_with(|| a.0.cmp(&b.0)));
            if tables.len() > b.limit {
                let rest = tables.split_off(b.limit);
                if !b.hide_other {
                    let mut other = vec![vec![0i64; n]; n];
                    for (_, t) in rest {
                        for (i, row) in t.iter().enumerate() {
                            for (k, x) in row.iter().enumerate() {
                                other[i][k] += x;
                            }
                        }
                    }
                    tables.push((BREAKDOWN_OTHER.to_string(), other));
                }
            }
        }
        let unit = match self.interval {
            Interval::Hour => "Hour",
            Interval::Day => "Day",
            Interval::Week => "Week",
            Interval::Month => "Month",
        };
        let mut out = Vec::new();
        for (value, table) in tables {
            for (i, start) in p.buckets.iter().enumerate() {
                let date = crate::insights::trends::instant_of(*start, tz);
                let mut row = json!({
                    "date": date.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    "label": format!("{unit} {i}"),
                    "values": (0..n - i)
                        .map(|k| json!({"count": table[i][k], "label": format!("{unit} {k}")}))
                        .collect::<Vec<_>>(),
                });
                if let Some(b) = &self.breakdown {
                    row["breakdown_value"] = b.shown(&value);
                }
                out.push(row);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn a_range_with_only_its_end_holds_the_last_periods() {
        let r = Retention::from_value(&json!({"kind": "RetentionQuery",
            "dateRange": {"date_to": "2024-03-30"},
            "retentionFilter": {"period": "Week", "totalIntervals": 13}}))
        .unwrap();
        let p = r.period(&cx()).unwrap();
        let days: Vec<String> = p
            .buckets
            .iter()
            .map(|b| b.format("%Y-%m-%d").to_string())
            .collect();
        assert_eq!(days.len(), 13, "{days:?}");
        assert_eq!(
            (days[0].as_str(), days[12].as_str()),
            ("2023-12-31", "2024-03-24")
        );
    }

    #[test]
    fn cohorts_and_their_returns() {
        let r = Retention::from_value(&json!({"kind": "RetentionQuery",
            "retentionFilter": {"totalIntervals": 3, "period": "Day",
                "targetEntity": {"id": "signup", "type": "events"},
                "returningEntity": {"id": "use", "type": "events"}}}))
        .unwrap();
        let p = r.period(&cx()).unwrap();
        assert_eq!(p.buckets.len(), 3);
        crate::hogql::parser::parse_query(&r.query(&p, &cx()).unwrap()).unwrap();
        crate::hogql::parser::parse_query(&r.counts_query(&p, &cx()).unwrap()).unwrap();
        crate::hogql::parser::parse_query(&r.members_query(&p, &cx(), 1, None).unwrap()).unwrap();
        assert!(r.members_query(&p, &cx(), 3, None).is_err());
        let d = |day: u32| format!("2024-03-{day:02} 00:00:00");
        // Cohort of the 29th: a and b, a back on the 30th, both on the 31st; of the 30th: b,
        // back on the 31st; of the 31st: c. A return outside the table is ignored.
        let rows = vec![
            json!([d(29), d(29), 2]),
            json!([d(29), d(30), 1]),
            json!([d(29), d(31), 2]),
            json!([d(30), d(30), 1]),
            json!([d(30), d(31), 1]),
            json!([d(31), d(31), 1]),
            json!([d(31), d(28), 5]),
        ];
        let t = r.shape(&p, &rows, chrono_tz::UTC);
        let counts = |row: usize| -> Vec<i64> {
            t[row]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["count"].as_i64().unwrap())
                .collect()
        };
        assert_eq!(counts(0), vec![2, 1, 2]);
        assert_eq!(counts(1), vec![1, 1]);
        assert_eq!(counts(2), vec![1]);
        assert_eq!(t[0]["label"], "Day 0");
        assert_eq!(t[1]["values"][1]["label"], "Day 1");
        // First time: each person's cohort is their first target period.
        let first = Retention {
            first_time: true,
            ..r
        };
        let q = first.counts_query(&p, &cx()).unwrap();
        assert!(q.contains("ARRAY JOIN [first] AS c"), "{q}");
        assert!(Retention::from_value(&json!({"retentionFilter": {"period": "Year"}})).is_err());
        // Breakdowns: a table per value, the largest first, then other.
        let b = Retention::from_value(&json!({"retentionFilter": {"totalIntervals": 2,
            "retentionType": "retention_first_time"},
            "breakdownFilter": {"breakdown": "$browser", "breakdown_limit": 1}}))
        .unwrap();
        let p2 = b.period(&cx()).unwrap();
        let (x, y) = (
            p2.buckets[0].format(FORMAT).to_string(),
            p2.buckets[1].format(FORMAT).to_string(),
        );
        let rows = vec![
            json!([x, x, 1, "Safari"]),
            json!([x, x, 2, "Chrome"]),
            json!([x, y, 1, "Chrome"]),
            json!([y, y, 1, "Firefox"]),
        ];
        let t = b.shape(&p2, &rows, chrono_tz::UTC);
        let row = |i: usize| {
            (
                t[i]["breakdown_value"].clone(),
                t[i]["values"][0]["count"].clone(),
            )
        };
        assert_eq!(t.len(), 4);
        assert_eq!(row(0), (json!("Chrome"), json!(2)));
        assert_eq!(t[0]["values"][1]["count"], 1);
        assert_eq!(row(2), (json!(BREAKDOWN_OTHER), json!(1)));
        assert_eq!(
            row(3),
            (json!(BREAKDOWN_OTHER), json!(1)),
            "Safari's and Firefox's"
        );
        let q = b.counts_query(&p2, &cx()).unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        let e = Retention::from_value(&json!({"breakdownFilter": {"breakdown": "$browser"}}))
            .unwrap_err();
        assert!(e.0.contains("person properties only"), "{e}");
        assert!(
            Retention::from_value(
                &json!({"breakdownFilter": {"breakdown": "plan", "breakdown_type": "person"}})
            )
            .is_ok()
        );
    }
}
