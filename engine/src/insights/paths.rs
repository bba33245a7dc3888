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
    /// Path items (URLs, screen names, event names) left out before paths are built.
    pub exclude: Vec<String>,
    /// `pathsHogQLExpression`: the step of the events `hogql` includes.
    pub hogql: Option<String>,
    /// `minEdgeWeight` / `maxEdgeWeight`: edges travelled fewer / more times are left out.
    pub min_weight: Option<u64>,
    pub max_weight: Option<u64>,
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
        // No types: every event, pageviews by URL and screens by name, as PostHog reads it.
        let kinds = strings("includeEventTypes")?;
        for k in &kinds {
            if !matches!(
                k.as_str(),
                "$pageview" | "$screen" | "custom_event" | "hogql"
            ) {
                return Err(bad(format!(
                    "includeEventTypes holds $pageview, $screen, custom_event or hogql, got '{k}'"
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
        let weight = |k: &str| match f.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(format!("pathsFilter.{k} must be a count"))),
        };
        let hogql = text("pathsHogQLExpression");
        if kinds.iter().any(|k| k == "hogql") && hogql.is_none() {
            return Err(bad(
                "includeEventTypes hogql needs pathsFilter.pathsHogQLExpression",
            ));
        }
        Ok(Paths {
            node: q.clone(),
            kinds,
            step_limit: count("stepLimit", 5, 20)?,
            edge_limit: count("edgeLimit", 50, 10_000)?,
            start: text("startPoint"),
            end: text("endPoint"),
            exclude: strings("excludeEvents")?,
            hogql,
            min_weight: weight("minEdgeWeight")?,
            max_weight: weight("maxEdgeWeight")?,
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
        // PostHog's path item: the event name, or the HogQL expression, then a pageview's
        // URL without one trailing slash and a screen's name, for the types asked (all of
        // them when none is); a missing value is an empty step.
        let asked = |k: &str| match self.kinds.is_empty() {
            true => !self.exclude.iter().any(|e| e == k),
            false => self.kinds.iter().any(|x| x == k),
        };
        let mut step = "event".to_string();
        if asked("hogql")
            && let Some(x) = &self.hogql
        {
            step = format!("({x})");
        }
        if asked("$pageview") {
            step = format!(
                "if(event = '$pageview', replaceRegexpAll(ifNull(toString(properties.$current_url), ''), '(.)/$', '\\\\1'), {step})"
            );
        }
        if asked("$screen") {
            step = format!("if(event = '$screen', toString(properties.$screen_name), {step})");
        }
        let mut step = format!("ifNull(toString({step}), '')");
        let mut which = Vec::new();
        for k in &self.kinds {
            match k.as_str() {
                "$pageview" => which.push("event = '$pageview'"),
                "$screen" => which.push("event = '$screen'"),
                "custom_event" => which.push("NOT startsWith(event, '$')"),
                _ => {}
            }
        }
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
                // Unanchored, as PostHog's multiMatchAnyIndex: `/docs/*` groups full URLs.
                arms.push(format!("match({step}, {}), {}", quote(&pattern), quote(g)));
            }
            step = format!("multiIf({}, {step})", arms.join(", "));
        }
        let mut conds = vec![
            format!("timestamp >= {}", lit(p.from)),
            format!("timestamp <= {}", lit(p.to)),
        ];
        if !which.is_empty() {
            conds.push(format!("({})", which.join(" OR ")));
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

    /// One person's paths from their row (`[person_id, [unix seconds…], [step…]]`), as
    /// PostHog builds them: excluded items dropped, split into sessions (a gap of 30 minutes
    /// or more starts a new one), repeats folded (each step keeping the time of the last
    /// event of its run, as PostHog times the edges), then cut: from the first start point
    /// on (the first `stepLimit` steps), up to the first end point (the last `stepLimit`),
    /// or between both (the first and last `stepLimit / 2` around a `...` step when longer);
    /// a session without its point(s) is no path.
    fn paths_of(&self, r: &Value) -> Vec<Vec<(String, i64)>> {
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
            .filter(|(_, s)| !self.exclude.contains(s))
            .collect();
        steps.sort();
        let mut sessions: Vec<Vec<(String, i64)>> = Vec::new();
        let mut last_at: Option<i64> = None;
        for (at, s) in steps {
            if last_at.is_none_or(|l| at - l >= SESSION_GAP) {
                sessions.push(Vec::new());
            }
            last_at = Some(at);
            let path = sessions.last_mut().expect("a session was started");
            match path.last_mut() {
                Some(last) if last.0 == s => last.1 = at,
                _ => path.push((s, at)),
            }
        }
        let n = self.step_limit;
        let trimmed = |p: &str| match p.len() > 1 && p.ends_with('/') {
            true => p[..p.len() - 1].to_owned(),
            false => p.to_owned(),
        };
        let index_of = |p: &[(String, i64)], x: &str| p.iter().position(|s| s.0 == x);
        let mut out = Vec::new();
        for p in sessions {
            let cut: Vec<(String, i64)> = match (&self.start, &self.end) {
                (Some(a), Some(b)) => {
                    let Some(i) = index_of(&p, a) else { continue };
                    let from = &p[i..];
                    let Some(j) = index_of(from, b) else { continue };
                    let both = &from[..=j];
                    match both.len() > n {
                        false => both.to_vec(),
                        true => {
                            let half = n / 2;
                            let mut v = both[..half].to_vec();
                            v.push(("...".to_owned(), both[half].1));
                            v.extend_from_slice(&both[both.len() - half..]);
                            v
                        }
                    }
                }
                (Some(a), None) => {
                    let Some(i) = index_of(&p, &trimmed(a)) else {
                        continue;
                    };
                    p[i..].iter().take(n).cloned().collect()
                }
                (None, Some(b)) => {
                    let Some(j) = index_of(&p, &trimmed(b)) else {
                        continue;
                    };
                    p[(j + 1).saturating_sub(n)..=j].to_vec()
                }
                (None, None) => p.into_iter().take(n).collect(),
            };
            if !cut.is_empty() {
                out.push(cut);
            }
        }
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
                        .any(|(i, w)| key(i, &w[0].0) == a && key(i + 1, &w[1].0) == b)
                };
                let reached = |k: &str| p.iter().enumerate().any(|(i, s)| key(i, &s.0) == k);
                let ended = |k: &str| p.last().is_some_and(|s| key(p.len() - 1, &s.0) == k);
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

    /// The edges `{source, target, value, average_conversion_time}` (seconds between the
    /// two steps, averaged over the edge's travels), most travelled first, at most
    /// `edgeLimit`.
    pub fn shape(&self, rows: &[Value]) -> Vec<Value> {
        let mut edges: HashMap<(String, String), (i64, i64)> = HashMap::new();
        for r in rows {
            for p in self.paths_of(r) {
                for (i, w) in p.windows(2).enumerate() {
                    let key = (
                        format!("{}_{}", i + 1, w[0].0),
                        format!("{}_{}", i + 2, w[1].0),
                    );
                    let e = edges.entry(key).or_default();
                    e.0 += 1;
                    e.1 += w[1].1 - w[0].1;
                }
            }
        }
        let mut edges: Vec<((String, String), (i64, i64))> = edges
            .into_iter()
            .filter(|(_, (value, _))| {
                self.min_weight.is_none_or(|m| *value as u64 >= m)
                    && self.max_weight.is_none_or(|m| *value as u64 <= m)
            })
            .collect();
        edges.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(&b.0)));
        edges.truncate(self.edge_limit);
        // As PostHog: only edges reachable from a first step among those kept.
        let mut reached: std::collections::HashSet<&str> = edges
            .iter()
            .map(|((source, _), _)| source.as_str())
            .filter(|s| s.starts_with("1_"))
            .collect();
        let mut stack: Vec<&str> = reached.iter().copied().collect();
        while let Some(node) = stack.pop() {
            for ((source, target), _) in &edges {
                if source == node && reached.insert(target) {
                    stack.push(target);
                }
            }
        }
        let reached: std::collections::HashSet<String> =
            reached.into_iter().map(str::to_owned).collect();
        edges
            .into_iter()
            .filter(|((source, _), _)| reached.contains(source))
            .map(|((source, target), (value, seconds))| {
                json!({"source": source, "target": target, "value": value,
                    "average_conversion_time": seconds as f64 / value as f64})
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
        assert!(q.contains(r"'/docs/.*'") && q.contains(r"'/a\\.b'"), "{q}");
        assert!(
            Paths::from_value(
                &json!({"pathsFilter": {"localPathCleaningFilters": [{"regex": "x"}]}})
            )
            .is_err()
        );
    }

    /// The edges of `p` over `rows` as `source -> target: value @ average seconds`.
    fn edges_of(p: &Paths, rows: &[Value]) -> Vec<String> {
        p.shape(rows)
            .iter()
            .map(|e| {
                format!(
                    "{} -> {}: {} @ {}",
                    e["source"].as_str().unwrap(),
                    e["target"].as_str().unwrap(),
                    e["value"],
                    e["average_conversion_time"]
                )
            })
            .collect()
    }

    fn paths(filter: Value) -> Paths {
        Paths::from_value(&json!({"kind": "PathsQuery", "pathsFilter": filter})).unwrap()
    }

    #[test]
    fn edges_are_timed_from_the_last_event_of_each_run() {
        // /a at 0 and 20 (folded: the step's time is 20), /b at 50, /c at 110; /a → /b took
        // 30 s and /b → /c 60 s for p1; p2 went /a → /b in 10 s. A gap of exactly 30 minutes
        // starts a new session (PostHog splits unless the gap is under 1800 s).
        let rows = vec![
            json!(["p1", [0, 20, 50, 110], ["/a", "/a", "/b", "/c"]]),
            json!(["p2", [1000, 1010, 2810], ["/a", "/b", "/c"]]),
        ];
        assert_eq!(
            edges_of(&paths(json!({})), &rows),
            vec!["1_/a -> 2_/b: 2 @ 20.0", "2_/b -> 3_/c: 1 @ 60.0"]
        );
        // Excluded items are dropped before the paths are built: /b gone, /a → /c.
        assert_eq!(
            edges_of(&paths(json!({"excludeEvents": ["/b"]})), &rows),
            vec!["1_/a -> 2_/c: 1 @ 90.0"]
        );
        // Edge weights bound what is shown.
        assert_eq!(
            edges_of(&paths(json!({"minEdgeWeight": 2})), &rows),
            vec!["1_/a -> 2_/b: 2 @ 20.0"]
        );
        assert_eq!(
            edges_of(&paths(json!({"maxEdgeWeight": 1})), &rows),
            Vec::<String>::new(),
            "2_/b -> 3_/c alone is not reachable from a first step"
        );
    }

    #[test]
    fn paths_are_cut_at_their_points_as_posthog_cuts_them() {
        let rows = vec![json!([
            "p1",
            [0, 1, 2, 3, 4, 5, 6],
            ["/s", "/a", "/b", "/c", "/d", "/e", "/f"]
        ])];
        // An end point keeps the last stepLimit steps up to it (a trailing slash of the
        // point is ignored, as URLs lose theirs).
        assert_eq!(
            edges_of(&paths(json!({"endPoint": "/e/", "stepLimit": 3})), &rows),
            vec!["1_/c -> 2_/d: 1 @ 1.0", "2_/d -> 3_/e: 1 @ 1.0"]
        );
        // A start point keeps the first stepLimit steps from it.
        assert_eq!(
            edges_of(&paths(json!({"startPoint": "/b", "stepLimit": 3})), &rows),
            vec!["1_/b -> 2_/c: 1 @ 1.0", "2_/c -> 3_/d: 1 @ 1.0"]
        );
        // Both: the steps between them, the middle folded into `...` when longer than
        // stepLimit (the first and last stepLimit / 2 kept).
        assert_eq!(
            edges_of(
                &paths(json!({"startPoint": "/a", "endPoint": "/f", "stepLimit": 4})),
                &rows
            ),
            vec![
                "1_/a -> 2_/b: 1 @ 1.0",
                "2_/b -> 3_...: 1 @ 1.0",
                "3_... -> 4_/e: 1 @ 2.0",
                "4_/e -> 5_/f: 1 @ 1.0"
            ]
        );
        // A session without the point is no path.
        assert!(edges_of(&paths(json!({"startPoint": "/x"})), &rows).is_empty());
    }
}
