//! PostHog's `FunnelsQuery`: per person (or group), the furthest step reached within the
//! conversion window — ordered, strict or unordered, with exclusions — and the time between
//! steps, by `hedgerowFunnel` (the engine's funnel aggregate, PostHog's rules); then per
//! breakdown value the persons at each step and the average and median conversion times
//! (the steps view), or a histogram of the time from one step to another (time to convert).
//! HogQL text; the query service runs it.

use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, properties_expr, quote};
use super::trends::{BREAKDOWN_NULL, BREAKDOWN_OTHER, Breakdown, Interval, Period};
use super::trends::{breakdown_of, resolve_period};

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// Most steps a funnel may have (PostHog allows 30 in its interface).
pub const MAX_STEPS: usize = 30;

/// An event that must not happen between two steps.
#[derive(Debug, Clone)]
pub struct Exclusion {
    pub node: Map<String, Value>,
    /// 0-based steps: the exclusion applies after `from` and before `to`.
    pub from: usize,
    pub to: usize,
}

/// Which breakdown value a person counts under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribution {
    /// The value of the person's first event that has one (PostHog's default).
    FirstTouch,
    /// The value of their last event that has one.
    LastTouch,
    /// Each value separately, over only the events that carry it.
    AllEvents,
    /// Each value the person's events of this step (0-based) carry: that step counts only
    /// events with the value (PostHog's step attribution).
    Step(usize),
}

/// What the funnel answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viz {
    /// Persons per step, with conversion times.
    Steps,
    /// A histogram of the time from `from` to `to` (0-based steps) of who converted.
    TimeToConvert {
        from: usize,
        to: usize,
        bins: Option<usize>,
    },
    /// Per interval of entering the funnel, the share of the entries that reached step
    /// `from` (0-based) and went on to `to`.
    Trends { from: usize, to: usize },
}

/// A `FunnelsQuery`, read.
#[derive(Debug, Clone)]
pub struct Funnel {
    pub node: Map<String, Value>,
    pub steps: Vec<Map<String, Value>>,
    /// The conversion window, in seconds.
    pub window: i64,
    /// `ordered`, `strict` or `unordered`.
    pub order: &'static str,
    pub exclusions: Vec<Exclusion>,
    pub breakdown: Option<Breakdown>,
    pub attribution: Attribution,
    /// Who converts: `person_id`, or `$group_N` when the funnel aggregates by groups.
    pub target: String,
    pub viz: Viz,
    /// The steps that may be skipped (`optionalInFunnel`; bit k: 0-based step k).
    pub optional: u32,
    /// The buckets of funnel trends.
    pub interval: Interval,
    pub date_range: Option<Value>,
}

fn events_node(x: &Value, what: &str) -> Result<Map<String, Value>, FilterError> {
    let m = x
        .as_object()
        .cloned()
        .ok_or_else(|| bad(format!("each {what} must be an EventsNode object")))?;
    match m.get("kind").and_then(Value::as_str) {
        None | Some("EventsNode") => {}
        Some(other) => {
            return Err(bad(format!(
                "{what}s of kind {other} are not supported; use EventsNode"
            )));
        }
    }
    Ok(m)
}

/// Whether a step is optional (`optionalInFunnel`).
fn is_optional(node: &Map<String, Value>) -> bool {
    node.get("optionalInFunnel").and_then(Value::as_bool) == Some(true)
}

/// A step's property filters as comparable texts (PostHog's `type: key operator value`),
/// of `properties` and of `fixedProperties`.
fn filter_texts(node: &Map<String, Value>) -> [Vec<String>; 2] {
    ["properties", "fixedProperties"].map(|k| {
        let mut out: Vec<String> = node
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("key").is_some())
            .map(|p| {
                let f = |k: &str| p.get(k).cloned().unwrap_or(Value::Null).to_string();
                format!(
                    "{}: {} {} {}",
                    f("type"),
                    f("key"),
                    f("operator"),
                    f("value")
                )
            })
            .collect();
        out.sort();
        out
    })
}

/// Whether step `a` matches every event step `b` matches, as PostHog judges it for optional
/// steps: the same event, and `a`'s filters the same as `b`'s or a subset of them.
fn covers(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    if a.get("event") != b.get("event") {
        return false;
    }
    let subset = |x: &[String], y: &[String]| {
        let mut y = y.to_vec();
        x.iter().all(|v| match y.iter().position(|w| w == v) {
            Some(i) => {
                y.swap_remove(i);
                true
            }
            None => false,
        })
    };
    let (fa, fb) = (filter_texts(a), filter_texts(b));
    subset(&fa[0], &fb[0]) && subset(&fa[1], &fb[1])
}

/// The condition that a person's path (`f`, `hedgerowFunnel`'s answer) holds 0-based step
/// `k`: PostHog's `bitTest(steps_bitfield, k)`.
pub fn holds_step(k: usize) -> String {
    format!("bitAnd(f.5, {}) != 0", 1u64 << k)
}

impl Funnel {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a FunnelsQuery must be an object"))?;
        let steps: Vec<Map<String, Value>> = match q.get("series") {
            Some(Value::Array(s)) if s.len() >= 2 && s.len() <= MAX_STEPS => s
                .iter()
                .map(|x| events_node(x, "step"))
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(bad(format!(
                    "a FunnelsQuery needs series: 2 to {MAX_STEPS} EventsNode steps"
                )));
            }
        };
        let n = steps.len();
        let f = q.get("funnelsFilter").and_then(Value::as_object);
        let get = |k: &str| f.and_then(|f| f.get(k)).filter(|v| !v.is_null());
        let order = match get("funnelOrderType").and_then(Value::as_str) {
            None | Some("ordered") => "ordered",
            Some("strict") => "strict",
            Some("unordered") => "unordered",
            Some(o) => {
                return Err(bad(format!(
                    "funnelOrderType must be ordered, strict or unordered, got '{o}'"
                )));
            }
        };
        let step_index = |k: &str, default: usize| -> Result<usize, FilterError> {
            match get(k) {
                None => Ok(default),
                Some(v) => v
                    .as_u64()
                    .map(|x| x as usize)
                    .filter(|x| *x < n)
                    .ok_or_else(|| bad(format!("{k} must be a step index, 0 to {}", n - 1))),
            }
        };
        let viz = match get("funnelVizType").and_then(Value::as_str) {
            None | Some("steps") => Viz::Steps,
            Some("time_to_convert") => {
                let from = step_index("funnelFromStep", 0)?;
                let to = step_index("funnelToStep", n - 1)?;
                if to == 0 || from >= to {
                    return Err(bad(format!(
                        "time to convert needs funnelFromStep before funnelToStep, and funnelToStep 1 to {}",
                        n - 1
                    )));
                }
                let bins = match get("binCount") {
                    None => None,
                    Some(v) => Some(
                        v.as_i64()
                            .ok_or_else(|| bad("binCount must be a number"))?
                            .clamp(1, 90) as usize,
                    ),
                };
                Viz::TimeToConvert { from, to, bins }
            }
            Some("trends") => {
                let from = step_index("funnelFromStep", 0)?;
                let to = step_index("funnelToStep", n - 1)?;
                if from >= to {
                    return Err(bad("funnel trends need funnelFromStep before funnelToStep"));
                }
                Viz::Trends { from, to }
            }
            Some(o) => {
                return Err(bad(format!(
                    "funnelVizType must be steps, time_to_convert or trends, got '{o}'"
                )));
            }
        };
        let mut exclusions = Vec::new();
        if let Some(list) = get("exclusions") {
            let list = list
                .as_array()
                .ok_or_else(|| bad("funnelsFilter.exclusions must be a list"))?;
            for x in list {
                let node = events_node(x, "exclusion")?;
                let at = |k: &str| {
                    node.get(k)
                        .and_then(Value::as_u64)
                        .map(|x| x as usize)
                        .ok_or_else(|| bad(format!("an exclusion needs {k}, a step index")))
                };
                let (from, to) = (at("funnelFromStep")?, at("funnelToStep")?);
                if from >= to || to >= n {
                    return Err(bad(format!(
                        "an exclusion's funnelFromStep must come before its funnelToStep, both 0 to {}",
                        n - 1
                    )));
                }
                if order == "unordered" && (from != 0 || to != n - 1) {
                    return Err(bad(
                        "partial exclusions are not allowed in unordered funnels: exclude from step 0 to the last step",
                    ));
                }
                exclusions.push(Exclusion { node, from, to });
            }
        }
        let optional = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| is_optional(s))
            .fold(0u32, |m, (k, _)| m | 1 << k);
        if optional != 0 {
            // PostHog's rules for optional steps.
            if viz != Viz::Steps || order == "unordered" {
                return Err(bad(
                    "Optional funnel steps are only supported in funnels with step order Sequential or Strict and the graph type \"Conversion Steps\".",
                ));
            }
            if optional & 1 != 0 {
                return Err(bad("The first step of a funnel cannot be optional."));
            }
            for k in 1..n {
                let (prev, this) = (&steps[k - 1], &steps[k]);
                if is_optional(prev) && !is_optional(this) && covers(this, prev) {
                    return Err(bad(
                        "An optional step cannot be the same as the following required step.",
                    ));
                }
            }
        }
        let breakdown = breakdown_of(q)?;
        let attribution = match get("breakdownAttributionType").and_then(Value::as_str) {
            None | Some("first_touch") => Attribution::FirstTouch,
            Some("last_touch") => Attribution::LastTouch,
            Some("all_events") => Attribution::AllEvents,
            Some("step") => {
                let k = match get("breakdownAttributionValue") {
                    None => 0,
                    Some(v) => v
                        .as_u64()
                        .map(|k| k as usize)
                        .filter(|k| *k < n)
                        .ok_or_else(|| {
                            bad(format!(
                                "breakdownAttributionValue must be a step index, 0 to {}",
                                n - 1
                            ))
                        })?,
                };
                if order == "unordered" && k != 0 {
                    return Err(bad(
                        "only the first step can be used for breakdown attribution in unordered funnels",
                    ));
                }
                Attribution::Step(k)
            }
            Some(o) => {
                return Err(bad(format!(
                    "breakdownAttributionType must be first_touch, last_touch, all_events or step, got '{o}'"
                )));
            }
        };
        let window = match get("funnelWindowInterval") {
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
        let by_hogql = get("funnelAggregateByHogQL")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "person_id");
        let target = match (q.get("aggregation_group_type_index"), by_hogql) {
            (None | Some(Value::Null), None) => "person_id".to_string(),
            // What converts is any HogQL expression (a session, a device…).
            (None | Some(Value::Null), Some(expr)) => format!("({expr})"),
            (Some(v), None) => {
                let i = v
                    .as_u64()
                    .filter(|i| *i < 5)
                    .ok_or_else(|| bad("aggregation_group_type_index must be 0 to 4"))?;
                format!("`$group_{i}`")
            }
            (Some(_), Some(_)) => {
                return Err(bad(
                    "aggregation_group_type_index and funnelAggregateByHogQL cannot both be set",
                ));
            }
        };
        Ok(Funnel {
            node: q.clone(),
            steps,
            window: window * unit,
            order,
            exclusions,
            breakdown,
            attribution,
            target,
            viz,
            optional,
            interval: Interval::parse(q.get("interval"))?,
            date_range: q.get("dateRange").filter(|v| !v.is_null()).cloned(),
        })
    }

    /// The range the first step must fall in (PostHog's default `-7d`; by the query's
    /// interval for funnel trends, by day otherwise).
    pub fn period(&self, cx: &FilterContext) -> Result<Period, FilterError> {
        let interval = match self.viz {
            Viz::Trends { .. } => self.interval,
            _ => Interval::Day,
        };
        resolve_period(self.date_range.as_ref(), interval, cx, None)
    }

    /// The condition an event meets to be `node`'s event (its event name and filters).
    fn condition(node: &Map<String, Value>, cx: &FilterContext) -> Result<String, FilterError> {
        let mut c = Vec::new();
        if let Some(e) = node.get("event").and_then(Value::as_str) {
            c.push(format!("event = {}", quote(e)));
        }
        for props in [node.get("properties"), node.get("fixedProperties")]
            .into_iter()
            .flatten()
        {
            if let Some(x) = properties_expr(props, cx)? {
                c.push(format!("({x})"));
            }
        }
        Ok(match c.is_empty() {
            true => "true".to_string(),
            false => format!("({})", c.join(" AND ")),
        })
    }

    /// One row per person (or group, and per breakdown value with `all_events`):
    /// `target`, `breakdown` (`''` without a breakdown) and `f`, `hedgerowFunnel`'s answer
    /// (`f.1` the 0-based step reached, −1 none or excluded; `f.2` the seconds between
    /// steps).
    pub fn persons_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        self.per_target(p, cx, None)
    }

    /// [`Funnel::persons_query`], or with `trends` (`(from, to)` steps) `f` is
    /// `hedgerowFunnelTrends`' list of `(bucket, 1 | −1)` over the steps up to `to`.
    fn per_target(
        &self,
        p: &Period,
        cx: &FilterContext,
        trends: Option<(usize, usize)>,
    ) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let used = trends.map_or(self.steps.len(), |(_, to)| to + 1);
        let mut steps = Vec::new();
        for s in &self.steps[..used] {
            steps.push(Self::condition(s, cx)?);
        }
        // Exclusion k (k = 1..n-1): an excluded event between step k-1 and step k.
        let mut excluded = Vec::new();
        if self.exclusions.iter().any(|x| x.from + 1 < used) {
            let mut per_step: Vec<Vec<String>> = vec![Vec::new(); used];
            for x in &self.exclusions {
                let c = Self::condition(&x.node, cx)?;
                for slot in per_step.iter_mut().take(x.to + 1).skip(x.from + 1) {
                    slot.push(c.clone());
                }
            }
            for slot in per_step.iter().skip(1) {
                excluded.push(match slot.is_empty() {
                    true => "false".to_string(),
                    false => format!("({})", slot.join(" OR ")),
                });
            }
        }
        let mut conds = vec![
            format!("timestamp >= {}", lit(p.from)),
            // Later steps may come within the window after the range's end.
            format!(
                "timestamp <= {}",
                lit(p.to + chrono::Duration::seconds(self.window))
            ),
        ];
        if self.order != "strict" {
            // A strict funnel sees every event: any other event breaks a path.
            let any: Vec<&String> = steps.iter().chain(excluded.iter()).collect();
            conds.push(format!(
                "({})",
                any.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" OR ")
            ));
        }
        if self.target != "person_id" {
            // Events without a group (or without the expression's value) convert nothing.
            conds.push(format!("ifNull(toString({}), '') != ''", self.target));
        }
        if let Some(props) = self.node.get("properties")
            && let Some(x) = properties_expr(props, cx)?
        {
            conds.push(format!("({x})"));
        }
        // The first step must happen in the range itself.
        let mut args = steps.clone();
        args[0] = format!("({} AND timestamp <= {})", steps[0], lit(p.to));
        args.extend(excluded);
        let mut join = String::new();
        let (breakdown, group) = match (&self.breakdown, self.attribution) {
            (None, _) => ("''".to_string(), String::new()),
            (Some(b), Attribution::AllEvents) => (b.value.clone(), ", breakdown".to_string()),
            (Some(b), Attribution::Step(k)) if k < used => {
                // Each value the person's step-k events carry, and the funnel once per value
                // with step k holding only that value's events.
                join = format!(
                    " INNER JOIN (SELECT DISTINCT {target} AS attributed_to, {v} AS attributed \
                     FROM events WHERE {step} AND {conds}) AS attribution \
                     ON {target} = attribution.attributed_to",
                    target = self.target,
                    v = b.value,
                    step = args[k],
                    conds = conds.join(" AND "),
                );
                args[k] = format!("({} AND {} = attribution.attributed)", args[k], b.value);
                (
                    "attribution.attributed".to_string(),
                    ", breakdown".to_string(),
                )
            }
            (Some(b), a) => {
                let pick = match a {
                    Attribution::LastTouch => "argMaxIf",
                    _ => "argMinIf",
                };
                let null = quote(BREAKDOWN_NULL);
                (
                    format!(
                        "ifNull(nullIf({pick}({v}, timestamp, {v} != {null}), ''), {null})",
                        v = b.value
                    ),
                    String::new(),
                )
            }
        };
        let call = match trends {
            None if self.optional != 0 => format!(
                "hedgerowFunnel({}, '{}', {used}, {})(timestamp, ",
                self.window, self.order, self.optional
            ),
            None => format!(
                "hedgerowFunnel({}, '{}', {used})(timestamp, ",
                self.window, self.order
            ),
            Some((from, _)) => format!(
                "hedgerowFunnelTrends({}, '{}', {used}, {from})(timestamp, {}, ",
                self.window,
                self.order,
                self.interval.start_fn()
            ),
        };
        Ok(format!(
            "SELECT {target} AS target, {breakdown} AS breakdown, {call}{args}) AS f \
             FROM events{join} WHERE {conds} GROUP BY target{group}",
            target = self.target,
            args = args.join(", "),
            conds = conds.join(" AND "),
        ))
    }

    /// Funnel trends: `[bucket, entries that converted, entries]` per interval of entry.
    pub fn trends_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let Viz::Trends { from, to } = self.viz else {
            return Err(bad("not a funnel trends query"));
        };
        Ok(format!(
            "SELECT formatDateTime(r.1, '%Y-%m-%d %H:%i:%S') AS bucket, countIf(r.2 = 1), count(), \
             breakdown FROM ({}) ARRAY JOIN f AS r GROUP BY bucket, breakdown",
            self.per_target(p, cx, Some((from, to)))?
        ))
    }

    /// Funnel trends in PostHog's shape: a series (per breakdown value: the most entries
    /// first, past `breakdown_limit` summed as other — exact, entries being counts), each
    /// interval's conversion rate in percent (0 where nobody entered).
    pub fn trends_shape(&self, p: &Period, rows: &[Value]) -> Vec<Value> {
        let position: std::collections::HashMap<String, usize> = p
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (b.format("%Y-%m-%d %H:%M:%S").to_string(), i))
            .collect();
        let n = p.buckets.len();
        // Per value: (converted, entered) per bucket.
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for r in rows {
            let Some(&at) = r
                .get(0)
                .and_then(Value::as_str)
                .and_then(|b| position.get(b))
            else {
                continue;
            };
            let num = |i: usize| r.get(i).and_then(Value::as_f64).unwrap_or(0.0);
            let value = r.get(3).and_then(Value::as_str).unwrap_or("").to_owned();
            let slot = match series.iter().position(|(v, _)| *v == value) {
                Some(i) => i,
                None => {
                    series.push((value, vec![(0.0, 0.0); n]));
                    series.len() - 1
                }
            };
            series[slot].1[at].0 += num(1);
            series[slot].1[at].1 += num(2);
        }
        if series.is_empty() && self.breakdown.is_none() {
            series.push((String::new(), vec![(0.0, 0.0); n]));
        }
        if let Some(b) = &self.breakdown {
            let entered = |s: &Vec<(f64, f64)>| s.iter().map(|x| x.1).sum::<f64>();
            series.sort_by(|x, y| {
                entered(&y.1)
                    .total_cmp(&entered(&x.1))
                    .then_with(|| x.0.cmp(&y.0))
            });
            if series.len() > b.limit {
                let rest = series.split_off(b.limit);
                if !b.hide_other {
                    let mut other = vec![(0.0, 0.0); n];
                    for (_, s) in rest {
                        for (o, x) in other.iter_mut().zip(s) {
                            o.0 += x.0;
                            o.1 += x.1;
                        }
                    }
                    series.push((BREAKDOWN_OTHER.to_string(), other));
                }
            }
        }
        let days: Vec<Value> = p
            .buckets
            .iter()
            .map(|b| json!(super::trends::day(*b, self.interval)))
            .collect();
        let labels: Vec<Value> = p
            .buckets
            .iter()
            .map(|b| json!(super::trends::label(*b, self.interval)))
            .collect();
        series
            .into_iter()
            .map(|(value, counts)| {
                let data: Vec<Value> = counts
                    .iter()
                    .map(|(converted, entered)| {
                        json!(match *entered > 0.0 {
                            true => (converted / entered * 10_000.0).round() / 100.0,
                            false => 0.0,
                        })
                    })
                    .collect();
                let mut o =
                    json!({"count": data.len(), "data": data, "days": days, "labels": labels});
                if let Some(b) = &self.breakdown {
                    o["breakdown_value"] = b.shown(&value);
                }
                o
            })
            .collect()
    }

    /// The steps view per breakdown value: `[breakdown, persons at step 0.., then per
    /// step k ≥ 1: (conversions with a positive time, their mean, their median)]`.
    /// `rest`: the values shown (the query then answers one row for all the others).
    pub fn steps_query(
        &self,
        p: &Period,
        cx: &FilterContext,
        rest: Option<&[String]>,
    ) -> Result<String, FilterError> {
        let persons = self.persons_query(p, cx)?;
        let n = self.steps.len();
        let mut cols = vec![];
        // A person counts at each step their path holds (`f.5`, bit k: step k), which is
        // every step up to the furthest but the optional ones skipped; a conversion time is
        // the k-th gap between the path's required steps, as PostHog pairs them.
        for k in 0..n {
            cols.push(format!("countIf({})", holds_step(k)));
        }
        for k in 1..n {
            let c = format!("length(f.2) >= {k} AND f.2[{k}] > 0");
            cols.push(format!("countIf({c})"));
            cols.push(format!("avgIf(f.2[{k}], {c})"));
            cols.push(format!("medianIf(f.2[{k}], {c})"));
        }
        let (value, only) = match rest {
            None => ("breakdown".to_string(), String::new()),
            Some(shown) => (
                quote(BREAKDOWN_OTHER),
                match shown.is_empty() {
                    true => String::new(),
                    false => format!(
                        " AND breakdown NOT IN ({})",
                        shown
                            .iter()
                            .map(|v| quote(v))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
            ),
        };
        Ok(format!(
            "SELECT {value} AS value, {} FROM ({persons}) WHERE f.1 >= 0{only} GROUP BY value",
            cols.join(", ")
        ))
    }

    /// The rows of [`Funnel::steps_query`] in the order PostHog shows them (most persons
    /// at the last step first, then the step before, …), cut to the breakdown limit; and
    /// whether values were left out (then the caller adds their row as other).
    pub fn rank(&self, mut rows: Vec<Value>) -> (Vec<Value>, bool) {
        let n = self.steps.len();
        let count = |r: &Value, k: usize| r.get(1 + k).and_then(Value::as_i64).unwrap_or(0);
        rows.sort_by(|a, b| {
            (0..n)
                .rev()
                .map(|k| count(b, k).cmp(&count(a, k)))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| {
                    let v = |r: &Value| r.get(0).and_then(Value::as_str).unwrap_or("").to_owned();
                    v(a).cmp(&v(b))
                })
        });
        match &self.breakdown {
            Some(b) if rows.len() > b.limit => {
                rows.truncate(b.limit);
                (rows, !b.hide_other)
            }
            _ => (rows, false),
        }
    }

    /// The steps in PostHog's shape: a list of steps, or with a breakdown a list of them
    /// per value.
    pub fn shape(&self, rows: &[Value]) -> Value {
        let n = self.steps.len();
        let number = |r: &Value, i: usize| -> Value {
            match r.get(i).and_then(Value::as_f64) {
                Some(x) if x.is_finite() => json!(x),
                _ => Value::Null,
            }
        };
        let one = |r: &Value| -> Vec<Value> {
            self.steps
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let name = s.get("event").and_then(Value::as_str);
                    let (avg, median) = match i {
                        0 => (Value::Null, Value::Null),
                        k => (
                            number(r, 1 + n + 3 * (k - 1) + 1),
                            number(r, 1 + n + 3 * (k - 1) + 2),
                        ),
                    };
                    let mut step = json!({
                        "action_id": name,
                        "name": name.unwrap_or("All events"),
                        "custom_name": s.get("custom_name").cloned().unwrap_or(Value::Null),
                        "order": i,
                        "type": "events",
                        "count": r.get(1 + i).and_then(Value::as_i64).unwrap_or(0),
                        "people": [],
                        "average_conversion_time": avg,
                        "median_conversion_time": median,
                    });
                    if let Some(b) = &self.breakdown {
                        let key = r.get(0).and_then(Value::as_str).unwrap_or("");
                        let v = b.shown(key);
                        step["breakdown"] = v.clone();
                        step["breakdown_value"] = v;
                    }
                    step
                })
                .collect()
        };
        match self.breakdown {
            None => {
                let empty = json!([""]);
                Value::Array(one(rows.first().unwrap_or(&empty)))
            }
            Some(_) => Value::Array(rows.iter().map(|r| Value::Array(one(r))).collect()),
        }
    }

    /// Time to convert: each converted person's seconds from `from` to `to`.
    fn conversion_times(
        &self,
        p: &Period,
        cx: &FilterContext,
        from: usize,
        to: usize,
    ) -> Result<String, FilterError> {
        let sum = (from + 1..=to)
            .map(|k| format!("f.2[{k}]"))
            .collect::<Vec<_>>()
            .join(" + ");
        Ok(format!(
            "SELECT {sum} AS t FROM ({}) WHERE f.1 >= {to}",
            self.persons_query(p, cx)?
        ))
    }

    /// Time to convert, first query: `[from_seconds, to_seconds, average, samples]`.
    pub fn histogram_params_query(
        &self,
        p: &Period,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let Viz::TimeToConvert { from, to, .. } = self.viz else {
            return Err(bad("not a time to convert funnel"));
        };
        Ok(format!(
            "SELECT floor(min(t)), ceil(max(t)), round(avg(t), 2), count() FROM ({})",
            self.conversion_times(p, cx, from, to)?
        ))
    }

    /// The histogram's bins from its parameters: `(first bin's start, width, bins)`, as
    /// PostHog bins (an automatic count of ∛samples, 1 to 60; a width of whole seconds, 60
    /// when all samples are equal).
    pub fn bins(&self, params: &[Value]) -> (f64, f64, usize) {
        let Viz::TimeToConvert { bins, .. } = self.viz else {
            return (0.0, 60.0, 1);
        };
        let num = |i: usize| {
            params
                .get(i)
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite())
        };
        let from = num(0).unwrap_or(0.0);
        let to = num(1).unwrap_or(1.0);
        let samples = num(3).unwrap_or(0.0);
        let count = bins.unwrap_or_else(|| samples.cbrt().ceil().clamp(1.0, 60.0) as usize);
        let raw = ((to - from) / count as f64).ceil();
        (from, if raw > 0.0 { raw } else { 60.0 }, count)
    }

    /// Time to convert, second query: persons per bin (`[bin start, persons]`).
    pub fn histogram_query(
        &self,
        p: &Period,
        cx: &FilterContext,
        from_seconds: f64,
        width: f64,
    ) -> Result<String, FilterError> {
        let Viz::TimeToConvert { from, to, .. } = self.viz else {
            return Err(bad("not a time to convert funnel"));
        };
        Ok(format!(
            "SELECT {from_seconds} + floor((t - {from_seconds}) / {width}) * {width} AS bin, count() \
             FROM ({}) GROUP BY bin",
            self.conversion_times(p, cx, from, to)?
        ))
    }

    /// The time to convert result: every bin (empty ones with 0 persons) and the average.
    pub fn histogram(
        &self,
        (start, width, count): (f64, f64, usize),
        average: Value,
        rows: &[Value],
    ) -> Value {
        let bins: Vec<Value> = (0..=count)
            .map(|k| {
                let at = start + k as f64 * width;
                let persons = rows
                    .iter()
                    .find(|r| r.get(0).and_then(Value::as_f64) == Some(at))
                    .and_then(|r| r.get(1).and_then(Value::as_i64))
                    .unwrap_or(0);
                json!([at as i64, persons])
            })
            .collect();
        let average = match average.as_f64() {
            Some(x) if x.is_finite() => json!(x),
            _ => Value::Null,
        };
        json!({"bins": bins, "average_conversion_time": average})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn steps_compile_to_one_funnel_aggregate_per_person() {
        let f = Funnel::from_value(&json!({"kind": "FunnelsQuery", "series": [
            {"kind": "EventsNode", "event": "view"},
            {"kind": "EventsNode", "event": "buy", "properties": [{"key": "total", "value": 5, "operator": "gt"}]}],
            "funnelsFilter": {"funnelWindowInterval": 2, "funnelWindowIntervalUnit": "hour",
                "exclusions": [{"kind": "EventsNode", "event": "leave", "funnelFromStep": 0, "funnelToStep": 1}]}}))
        .unwrap();
        assert_eq!(f.window, 7200);
        let p = f.period(&cx()).unwrap();
        let q = f.steps_query(&p, &cx(), None).unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        assert!(q.contains("hedgerowFunnel(7200, 'ordered', 2)"), "{q}");
        assert!(q.contains("event = 'leave'"), "{q}");
        let rows = vec![json!(["", 7, 3, 3, 60.0, 30.0])];
        let s = f.shape(&rows);
        assert_eq!(
            (s[0]["count"].as_i64(), s[1]["count"].as_i64()),
            (Some(7), Some(3))
        );
        assert_eq!(s[1]["average_conversion_time"], json!(60.0));
        assert_eq!(s[0]["median_conversion_time"], Value::Null);
    }

    #[test]
    fn strict_funnels_see_every_event_and_breakdowns_rank_by_the_last_step() {
        let f = Funnel::from_value(&json!({"series": [{"event": "a"}, {"event": "b"}],
            "funnelsFilter": {"funnelOrderType": "strict"},
            "breakdownFilter": {"breakdown": "$browser", "breakdown_limit": 2}}))
        .unwrap();
        let p = f.period(&cx()).unwrap();
        let q = f.persons_query(&p, &cx()).unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        assert!(!q.contains("OR"), "strict: no step filter: {q}");
        assert!(q.contains("argMinIf("), "{q}");
        let (rows, other) = f.rank(vec![
            json!(["x", 9, 1]),
            json!(["y", 2, 2]),
            json!(["z", 5, 2]),
        ]);
        assert!(other);
        assert_eq!(rows, vec![json!(["z", 5, 2]), json!(["y", 2, 2])]);
    }

    #[test]
    fn time_to_convert_bins_as_posthog_does() {
        let f = Funnel::from_value(
            &json!({"series": [{"event": "a"}, {"event": "b"}, {"event": "c"}],
            "funnelsFilter": {"funnelVizType": "time_to_convert", "funnelFromStep": 1}}),
        )
        .unwrap();
        assert_eq!(
            f.viz,
            Viz::TimeToConvert {
                from: 1,
                to: 2,
                bins: None
            }
        );
        // 27 samples from 10 to 100 s: 3 bins of 30 s.
        let b = f.bins(&[json!(10.0), json!(100.0), json!(40.5), json!(27)]);
        assert_eq!(b, (10.0, 30.0, 3));
        let h = f.histogram(b, json!(40.5), &[json!([10.0, 20]), json!([70.0, 7])]);
        assert_eq!(
            h,
            json!({"bins": [[10, 20], [40, 0], [70, 7], [100, 0]], "average_conversion_time": 40.5})
        );
        // One sample: a 60 s bin.
        assert_eq!(
            f.bins(&[json!(5.0), json!(5.0), json!(5.0), json!(1)]),
            (5.0, 60.0, 1)
        );
    }

    #[test]
    fn what_is_not_computed_is_refused() {
        for (v, says) in [
            (json!({"series": [{"event": "a"}]}), "2 to 30"),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"funnelOrderType": "any"}}),
                "ordered, strict or unordered",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"funnelVizType": "pie"}}),
                "steps, time_to_convert or trends",
            ),
            (
                json!({"series": [{}, {}, {}], "funnelsFilter": {"funnelOrderType": "unordered",
                    "exclusions": [{"event": "x", "funnelFromStep": 0, "funnelToStep": 1}]}}),
                "partial exclusions",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"exclusions": [{"event": "x", "funnelFromStep": 1, "funnelToStep": 1}]}}),
                "before its funnelToStep",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"breakdownAttributionType": "step",
                    "breakdownAttributionValue": 2}}),
                "breakdownAttributionValue",
            ),
            (
                json!({"series": [{}, {}], "funnelsFilter": {"funnelOrderType": "unordered",
                    "breakdownAttributionType": "step", "breakdownAttributionValue": 1}}),
                "only the first step",
            ),
            (
                json!({"series": [{"optionalInFunnel": true}, {}]}),
                "The first step of a funnel cannot be optional",
            ),
            (
                json!({"series": [{}, {"optionalInFunnel": true}], "funnelsFilter": {"funnelOrderType": "unordered"}}),
                "only supported in funnels with step order Sequential or Strict",
            ),
            (
                json!({"series": [{}, {"optionalInFunnel": true}], "funnelsFilter": {"funnelVizType": "trends"}}),
                "graph type \"Conversion Steps\"",
            ),
            (
                json!({"series": [{"event": "a"}, {"event": "b", "optionalInFunnel": true,
                    "properties": [{"key": "x", "value": "1", "operator": "exact", "type": "event"}]},
                    {"event": "b"}]}),
                "An optional step cannot be the same as the following required step",
            ),
        ] {
            let e = Funnel::from_value(&v).unwrap_err();
            assert!(e.0.contains(says), "{v}: {e}");
        }
    }
}
