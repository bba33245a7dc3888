//! PostHog's `PathsQuery`: the most travelled edges between consecutive steps of the
//! persons' paths (`i_<step>` → `i+1_<step>`), a path being a person's steps in time order
//! split where 30 minutes pass without one, repeats of the same step folded, cut at
//! `stepLimit` steps and at the start and end points when given.
//!
//! One HogQL query gives each person's (time, step) list; the edges are counted here.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, properties_expr, quote};
use super::trends::{Interval, Period, resolve_period};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// `text` with every regular-expression metacharacter escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A gap this long (seconds) starts a new path, as PostHog's sessions.
const SESSION_GAP: i64 = 30 * 60;

/// A `PathsQuery`, read.
#[derive(Debug, Clone)]
pub struct Paths {
    pub node: Map<String, Value>,
    /// `$pageview` (by URL), `$screen` (by screen name), `custom_event` (by event name).
    pub kinds: Vec<String>,
    pub step_limit: usize,
    pub edge_limit: usize,
    pub start: Option<String>,
    pub end: Option<String>,
    pub exclude: Vec<String>,
    /// `localPathCleaningFilters`: `(regex, alias)`, each applied to every step in turn.
    pub cleaning: Vec<(String, String)>,
    /// `pathGroupings`: a step matching one of these patterns (`*` any text) becomes the
    /// pattern itself.
    pub groupings: Vec<String>,
}

impl Paths {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a PathsQuery must be an object"))?;
        let f = q
            .get("pathsFilter")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let strings = |k: &str| super::text_list(&f, "pathsFilter", k);
        let mut kinds = strings("includeEventTypes")?;
        if kinds.is_empty() {
            kinds.push("$pageview".into());
        }
        for k in &kinds {
            if !matches!(k.as_str(), "$pageview" | "$screen" | "custom_event") {
                return Err(bad(format!(
                    "includeEventTypes holds $pageview, $screen or custom_event, got '{k}'"
                )));
            }
        }
        // `pathReplacements` applies the project's path cleaning rules: hedgerow's projects
        // have none, so there is nothing to apply.
        let mut cleaning = Vec::new();
        match f.get("localPathCleaningFilters") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for c in list {
                    let regex = c.get("regex").and_then(Value::as_str);
                    let alias = c.get("alias").and_then(Value::as_str);
                    match (regex, alias) {
                        (Some(r), Some(a)) if !r.is_empty() => {
                            cleaning.push((r.to_owned(), a.to_owned()))
                        }
                        _ => {
                            return Err(bad(
                                "each of pathsFilter.localPathCleaningFilters needs regex and alias",
                            ));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(bad(
                    "pathsFilter.localPathCleaningFilters must be a list of {regex, alias}",
                ));
            }
        }
        let groupings = strings("pathGroupings")?;
        for k in ["funnelPaths"] {
            if f.get(k)
                .is_some_and(|v| !v.is_null() && v != &json!(false) && v != &json!([]))
            {
                return Err(bad(format!("pathsFilter.{k} is not supported yet")));
            }
        }
        if q.get("funnelPathsFilter").is_some_and(|v| !v.is_null()) {
            return Err(bad("funnelPathsFilter is not supported yet"));
        }
        let count = |k: &str, default: usize, max: usize| match f.get(k) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| {
                    (2..=max as u64).contains(n)
                        || (k == "edgeLimit" && *n >= 1 && *n <= max as u64)
                })
                .map(|n| n as usize)
                .ok_or_else(|| bad(format!("pathsFilter.{k} must be a count up to {max}"))),
        };
        let text = |k: &str| {
            f.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Ok(Paths {
            node: q.clone(),
            kinds,
            step_limit: count("stepLimit", 5, 20)?,
            edge_limit: count("edgeLimit", 50, 10_000)?,
            start: text("startPoint"),
            end: text("endPoint"),
            exclude: strings("excludeEvents")?,
            cleaning,
            groupings,
        })
    }

    pub fn period(&self, cx: &FilterContext) -> Result<Period, FilterError> {
        resolve_period(
            self.node.get("dateRange").filter(|v| !v.is_null()),
            Interval::Day,
            cx,
            None,
        )
    }

    /// Each person's steps: `[person_id, [unix seconds, …], [step, …]]`.
    pub fn query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let mut step = Vec::new();
        let mut which = Vec::new();
        for k in &self.kinds {
            match k.as_str() {
                "$pageview" => {
                    which.push("event = '$pageview'".to_string());
                    step.push("event = '$pageview', toString(properties.$current_url)".to_string());
                }
                "$screen" => {
                    which.push("event = '$screen'".to_string());
                    step.push("event = '$screen', toString(properties.$screen_name)".to_string());
                }
                _ => which.push("NOT startsWith(event, '$')".to_string()),
            }
        }
        let mut step = match step.is_empty() {
            true => "event".to_string(),
            false => format!("multiIf({}, event)", step.join(", ")),
        };
        for (regex, alias) in &self.cleaning {
            step = format!(
                "replaceRegexpAll({step}, {}, {})",
                quote(regex),
                quote(alias)
            );
        }
        if !self.groupings.is_empty() {
            let mut arms = Vec::new();
            for g in &self.groupings {
                let pattern: String = g
                    .split('*')
                    .map(regex_escape)
                    .collect::<Vec<_>>()
                    .join(".*");
                arms.push(format!(
                    "match({step}, {}), {}",
                    quote(&format!("^{pattern}$")),
                    quote(g)
                ));
            }
            step = format!("multiIf({}, {step})", arms.join(", "));
        }
        let mut conds = vec![
            format!("timestamp >= {}", lit(p.from)),
            format!("timestamp <= {}", lit(p.to)),
            format!("({})", which.join(" OR ")),
        ];
        for e in &self.exclude {
            conds.push(format!("event != {}", quote(e)));
        }
        if let Some(props) = self.node.get("properties")
            && let Some(x) = properties_expr(props, cx)?
        {
            conds.push(format!("({x})"));
        }
        Ok(format!(
            "SELECT person_id, groupArray(toUnixTimestamp(timestamp)) AS at, groupArray({step}) AS steps \
             FROM events WHERE {} GROUP BY person_id",
            conds.join(" AND ")
        ))
    }

    /// One person's paths from their row (`[person_id, [unix seconds…], [step…]]`): split
    /// into sessions, repeats folded, cut at the start and end points and at `stepLimit`.
    fn paths_of(&self, r: &Value) -> Vec<Vec<String>> {
        let list = |i: usize| {
            r.get(i)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut steps: Vec<(i64, String)> = list(1)
            .iter()
            .zip(list(2).iter())
            .filter_map(|(t, s)| Some((t.as_i64()?, s.as_str()?.to_owned())))
            .collect();
        steps.sort();
        let mut out = Vec::new();
        let mut path: Vec<String> = Vec::new();
        let mut last_at: Option<i64> = None;
        let mut flush = |path: &mut Vec<String>| {
            let mut p: &[String] = path;
            if let Some(s) = &self.start {
                match p.iter().position(|x| x == s) {
                    Some(i) => p = &p[i..],
                    None => p = &[],
                }
            }
            if let Some(e) = &self.end {
                match p.iter().position(|x| x == e) {
                    Some(i) => p = &p[..=i],
                    None => p = &[],
                }
            }
            let p = &p[..p.len().min(self.step_limit)];
            if !p.is_empty() {
                out.push(p.to_vec());
            }
            path.clear();
        };
        for (at, s) in steps {
            if last_at.is_some_and(|l| at - l > SESSION_GAP) {
                flush(&mut path);
            }
            last_at = Some(at);
            if path.last() != Some(&s) {
                path.push(s);
            }
        }
        flush(&mut path);
        out
    }

    /// The persons (first column of the rows) behind a point of the paths, as PostHog's
    /// paths actors ask: with `start` and `end` (`i_<step>` keys) those who went from one
    /// to the other; with `end` alone those who reached it; with `dropoff` those whose path
    /// ended there.
    pub fn persons_on(
        &self,
        rows: &[Value],
        start: Option<&str>,
        end: Option<&str>,
        dropoff: Option<&str>,
    ) -> Result<Vec<String>, FilterError> {
        if start.is_none() && end.is_none() && dropoff.is_none() {
            return Err(bad(
                "the persons of a path need pathStartKey and pathEndKey, pathEndKey or pathDropoffKey",
            ));
        }
        let key = |i: usize, step: &str| format!("{}_{step}", i + 1);
        let mut out = Vec::new();
        for r in rows {
            let hit = self.paths_of(r).iter().any(|p| {
                let edge = |a: &str, b: &str| {
                    p.windows(2)
                        .enumerate()
                        .any(|(i, w)| key(i, &w[0]) == a && key(i + 1, &w[1]) == b)
                };
                let reached = |k: &str| p.iter().enumerate().any(|(i, s)| key(i, s) == k);
                let ended = |k: &str| p.last().is_some_and(|s| key(p.len() - 1, s) == k);
                let at_point = match (start, end) {
                    (Some(a), Some(b)) => edge(a, b),
                    (None, Some(b)) => reached(b),
                    (Some(a), None) => reached(a),
                    (None, None) => true,
                };
                at_point && dropoff.is_none_or(ended)
            });
            if hit && let Some(id) = r.get(0).and_then(Value::as_str) {
                out.push(id.to_owned());
            }
        }
        Ok(out)
    }

    /// The edges `{source, target, value}`, most travelled first, at most `edgeLimit`.
    pub fn shape(&self, rows: &[Value]) -> Vec<Value> {
        let mut edges: HashMap<(String, String), i64> = HashMap::new();
        for r in rows {
            for p in self.paths_of(r) {
                for (i, w) in p.windows(2).enumerate() {
                    let key = (format!("{}_{}", i + 1, w[0]), format!("{}_{}", i + 2, w[1]));
                    *edges.entry(key).or_default() += 1;
                }
            }
        }
        let mut edges: Vec<((String, String), i64)> = edges.into_iter().collect();
        edges.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        edges
            .into_iter()
            .take(self.edge_limit)
            .map(|((source, target), value)| {
                json!({"source": source, "target": target, "value": value, "average_conversion_time": null})
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn paths_are_split_folded_and_counted() {
        let p = Paths::from_value(&json!({"kind": "PathsQuery", "pathsFilter": {"stepLimit": 3}}))
            .unwrap();
        let period = p.period(&cx()).unwrap();
        crate::hogql::parser::parse_query(&p.query(&period, &cx()).unwrap()).unwrap();
        let rows = vec![
            // /a → /b → /b (folded) → /c → /d (cut at 3 steps); an hour later /a → /c.
            json!([
                "p1",
                [0, 10, 20, 30, 40, 4000, 4010],
                ["/a", "/b", "/b", "/c", "/d", "/a", "/c"]
            ]),
            json!(["p2", [6, 5], ["/b", "/a"]]),
        ];
        let e = p.shape(&rows);
        let get = |s: &str, t: &str| {
            e.iter()
                .find(|x| x["source"] == s && x["target"] == t)
                .map(|x| x["value"].as_i64().unwrap())
        };
        assert_eq!(get("1_/a", "2_/b"), Some(2));
        assert_eq!(get("2_/b", "3_/c"), Some(1));
        assert_eq!(get("3_/c", "4_/d"), None);
        assert_eq!(get("1_/a", "2_/c"), Some(1));
        assert_eq!(e[0]["source"], "1_/a");
        let start = Paths::from_value(&json!({"pathsFilter": {"startPoint": "/b"}})).unwrap();
        let e = start.shape(&rows);
        assert!(
            e.iter()
                .all(|x| x["source"].as_str().unwrap().starts_with("1_/b")
                    || !x["source"].as_str().unwrap().starts_with("1_"))
        );
        assert!(
            Paths::from_value(&json!({"pathsFilter": {"includeEventTypes": ["hogql"]}})).is_err()
        );
        let cleaned = Paths::from_value(&json!({"pathsFilter": {
            "localPathCleaningFilters": [{"regex": "/item/\\d+", "alias": "/item/:id"}],
            "pathGroupings": ["/docs/*", "/a.b"]}}))
        .unwrap();
        let p = cleaned.period(&cx()).unwrap();
        let q = cleaned.query(&p, &cx()).unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        assert!(q.contains("replaceRegexpAll("), "{q}");
        assert!(
            q.contains(r"'^/docs/.*$'") && q.contains(r"'^/a\\.b$'"),
            "{q}"
        );
        assert!(
            Paths::from_value(
                &json!({"pathsFilter": {"localPathCleaningFilters": [{"regex": "x"}]}})
            )
            .is_err()
        );
    }
}
