//! Insight nodes (`TrendsQuery`, `FunnelsQuery`, `RetentionQuery`, `LifecycleQuery`,
//! `StickinessQuery`, `EventsQuery`) run as HogQL: the node compiles to queries
//! (`insights::trends`), each runs here like any HogQL query, and the rows are shaped into
//! PostHog's series. One admission slot and one time limit cover the whole node.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::exec;
use super::run::HogQLRun;
use super::{Modifiers, QueryError, QueryService};
use crate::insights::correlation::Correlation;
use crate::insights::events::EventsList;
use crate::insights::funnels::{Funnel, Viz};
use crate::insights::lifecycle::Lifecycle;
use crate::insights::paths::Paths;
use crate::insights::retention::Retention;
use crate::insights::trends::{self, BREAKDOWN_OTHER, Trends};
use crate::insights::{FilterContext, FilterError, quote};
use crate::meta::Project;

/// A node the query endpoint runs besides HogQLQuery.
pub(super) fn is_insight(kind: Option<&str>) -> bool {
    matches!(
        kind,
        Some(
            "TrendsQuery"
                | "EventsQuery"
                | "LifecycleQuery"
                | "FunnelsQuery"
                | "RetentionQuery"
                | "StickinessQuery"
                | "PathsQuery"
                | "ActorsQuery"
                | "InsightActorsQuery"
                | "FunnelsActorsQuery"
                | "FunnelCorrelationQuery"
        )
    )
}

fn kind(node: &Value) -> Option<&str> {
    node.get("kind").and_then(Value::as_str)
}

fn invalid(e: FilterError) -> QueryError {
    QueryError::InvalidField("query", e.0)
}

/// A node's answer: its results (series, steps, a table) in place of the rows of the last
/// HogQL run, which keeps its text, timings and bytes read.
fn series_run(run: HogQLRun, results: Vec<Value>) -> HogQLRun {
    HogQLRun {
        results,
        object: None,
        batches: Vec::new(),
        columns: Vec::new(),
        types: Vec::new(),
        has_more: false,
        limit: 0,
        offset: 0,
        ..run
    }
}

/// An `ActorsQuery` over an `InsightActorsQuery` (or the latter alone): the persons
/// behind one point of an insight.
#[derive(Debug, Clone)]
struct Actors {
    /// The insight node.
    insight: Value,
    /// `InsightActorsQuery`'s fields (day, series, breakdown, status, funnelStep).
    point: serde_json::Map<String, Value>,
    limit: usize,
    offset: usize,
}

impl Actors {
    fn from_value(node: &Value) -> Result<Self, FilterError> {
        let bad = |m: &str| FilterError(m.to_owned());
        let (outer, point) = match kind(node) {
            Some("ActorsQuery") => (
                node,
                node.get("source")
                    .ok_or_else(|| bad("an ActorsQuery needs source: an InsightActorsQuery"))?,
            ),
            _ => (node, node),
        };
        // PostHog's per-kind actor nodes carry the same fields.
        if !matches!(
            kind(point),
            Some(
                "InsightActorsQuery"
                    | "FunnelsActorsQuery"
                    | "StickinessActorsQuery"
                    | "FunnelCorrelationActorsQuery"
            )
        ) {
            return Err(bad(
                "an ActorsQuery's source must be an InsightActorsQuery or FunnelsActorsQuery (listing all persons is GET /persons/)",
            ));
        }
        let insight = point
            .get("source")
            .filter(|s| s.is_object())
            .cloned()
            .ok_or_else(|| bad("an InsightActorsQuery needs source: the insight node"))?;
        let count = |k: &str, default: usize| match outer.get(k) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| FilterError(format!("{k} must be a count"))),
        };
        Ok(Actors {
            insight,
            point: point.as_object().cloned().unwrap_or_default(),
            limit: count("limit", 100)?.clamp(1, 10_000),
            offset: count("offset", 0)?.min(1 << 40),
        })
    }

    fn text(&self, k: &str) -> Option<String> {
        match self.point.get(k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// A `StickinessQuery` read as trends without breakdown, formula or compare (which it
/// does not take).
fn stickiness_of(node: &Value) -> Result<Trends, FilterError> {
    let t = Trends::from_value(node)?;
    if t.breakdown.is_some() || !t.formulas.is_empty() || t.compare || t.aggregate {
        return Err(FilterError(
            "a StickinessQuery takes no breakdown, formula, compare or display".into(),
        ));
    }
    if t.series.iter().any(|s| s.math != "count()") {
        return Err(FilterError(
            "a StickinessQuery counts persons: its series take no math".into(),
        ));
    }
    Ok(t)
}

/// The name of the correlation result a `FunnelCorrelationActorsQuery` asks for, as the
/// results show it: `funnelCorrelationPersonEntity` (an event, with one property filter for
/// `event::property::value`) or `funnelCorrelationPropertyValues` (`property::value`).
fn correlation_name(point: &serde_json::Map<String, Value>) -> Result<String, FilterError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Array(a) if a.len() == 1 => a[0].as_str().map_or(a[0].to_string(), str::to_owned),
        other => other.to_string(),
    };
    if let Some(e) = point
        .get("funnelCorrelationPersonEntity")
        .filter(|v| !v.is_null())
    {
        let event = e
            .get("event")
            .or_else(|| e.get("id"))
            .and_then(Value::as_str)
            .ok_or_else(|| FilterError("funnelCorrelationPersonEntity needs its event".into()))?;
        return Ok(
            match e
                .get("properties")
                .and_then(Value::as_array)
                .and_then(|p| p.first())
            {
                Some(p) => format!(
                    "{event}::{}::{}",
                    p.get("key").map(text).unwrap_or_default(),
                    p.get("value").map(text).unwrap_or_default()
                ),
                None => event.to_owned(),
            },
        );
    }
    if let Some(p) = point
        .get("funnelCorrelationPropertyValues")
        .and_then(Value::as_array)
        .and_then(|p| p.first())
    {
        return Ok(format!(
            "{}::{}",
            p.get("key").map(text).unwrap_or_default(),
            p.get("value").map(text).unwrap_or_default()
        ));
    }
    Err(FilterError(
        "the persons of a correlation need funnelCorrelationPersonEntity or funnelCorrelationPropertyValues".into(),
    ))
}

/// Reads an insight node, refusing what it cannot compute (before it is queued or cached).
pub(super) fn check(node: &Value) -> Result<(), QueryError> {
    match kind(node) {
        Some("EventsQuery") => {
            let cx = FilterContext::events(chrono_tz::UTC, chrono::Utc::now());
            EventsList::from_value(node, &cx).map(|_| ())
        }
        Some("LifecycleQuery") => Lifecycle::from_value(node).map(|_| ()),
        Some("FunnelsQuery") => Funnel::from_value(node).map(|_| ()),
        Some("FunnelCorrelationQuery") => Correlation::from_value(node).map(|_| ()),
        Some("RetentionQuery") => Retention::from_value(node).map(|_| ()),
        Some("StickinessQuery") => stickiness_of(node).map(|_| ()),
        Some("PathsQuery") => Paths::from_value(node).map(|_| ()),
        Some("ActorsQuery" | "InsightActorsQuery" | "FunnelsActorsQuery") => {
            Actors::from_value(node).map(|_| ())
        }
        _ => Trends::from_value(node).map(|_| ()),
    }
    .map_err(invalid)
}

impl QueryService {
    /// Runs an insight node under an admission slot already taken.
    pub(super) async fn run_insight_admitted(
        self: &Arc<Self>,
        admitted: exec::Admitted,
        project: &Project,
        node: &Value,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let (this, project, node) = (self.clone(), project.clone(), node.clone());
        self.exec
            .run_admitted(admitted, cancel, async move {
                match kind(&node) {
                    Some("EventsQuery") => this.run_events_here(&project, &node).await,
                    Some("LifecycleQuery") => this.run_lifecycle_here(&project, &node).await,
                    Some("FunnelsQuery") => this.run_funnel_here(&project, &node).await,
                    Some("FunnelCorrelationQuery") => {
                        this.run_correlation_here(&project, &node).await
                    }
                    Some("RetentionQuery") => this.run_retention_here(&project, &node).await,
                    Some("StickinessQuery") => this.run_stickiness_here(&project, &node).await,
                    Some("PathsQuery") => this.run_paths_here(&project, &node).await,
                    Some("ActorsQuery" | "InsightActorsQuery" | "FunnelsActorsQuery") => {
                        this.run_actors_here(&project, &node).await
                    }
                    _ => this.run_trends_here(&project, &node).await,
                }
            })
            .await
    }

    /// A `LifecycleQuery`: each active person's buckets, counted into the four statuses.
    async fn run_lifecycle_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let l = Lifecycle::from_value(node).map_err(invalid)?;
        let tz: chrono_tz::Tz = project.timezone.parse().unwrap_or(chrono_tz::UTC);
        let cx = FilterContext::events(tz, self.clock.now());
        let p = trends::resolve_period(l.date_range.as_ref(), l.interval, &cx, None)
            .map_err(invalid)?;
        let (_, before_at) = trends::bucket_before(&p, l.interval, tz);
        let text = l.counts_query(&p, before_at, &cx).map_err(invalid)?;
        let (rows, run) = self.rows(project, text).await?;
        Ok(series_run(run, l.shape(&p, &rows)))
    }

    /// A `FunnelsQuery`: how many persons reached each step, in order, within the window.
    async fn run_funnel_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let f = Funnel::from_value(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let p = f.period(&cx).map_err(invalid)?;
        if let Viz::Trends { .. } = f.viz {
            let text = f.trends_query(&p, &cx).map_err(invalid)?;
            let (rows, run) = self.rows(project, text).await?;
            return Ok(series_run(run, f.trends_shape(&p, &rows)));
        }
        if let Viz::TimeToConvert { .. } = f.viz {
            let text = f.histogram_params_query(&p, &cx).map_err(invalid)?;
            let (params, _) = self.rows(project, text).await?;
            let params = params
                .first()
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let bins = f.bins(&params);
            let text = f
                .histogram_query(&p, &cx, bins.0, bins.1)
                .map_err(invalid)?;
            let (rows, run) = self.rows(project, text).await?;
            let average = params.get(2).cloned().unwrap_or(Value::Null);
            return Ok(HogQLRun {
                object: Some(f.histogram(bins, average, &rows)),
                ..series_run(run, Vec::new())
            });
        }
        let text = f.steps_query(&p, &cx, None).map_err(invalid)?;
        let (rows, run) = self.rows(project, text).await?;
        let (mut rows, other) = f.rank(rows);
        if other {
            let shown: Vec<String> = rows
                .iter()
                .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                .collect();
            let text = f.steps_query(&p, &cx, Some(&shown)).map_err(invalid)?;
            let (more, _) = self.rows(project, text).await?;
            rows.extend(more);
        }
        let results = match f.shape(&rows) {
            Value::Array(a) => a,
            other => vec![other],
        };
        Ok(series_run(run, results))
    }

    /// A `FunnelCorrelationQuery`: the odds ratios of events or properties against
    /// finishing the funnel.
    async fn run_correlation_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let c = Correlation::from_value(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let p = c.funnel.period(&cx).map_err(invalid)?;
        let keys: Vec<String> = match c.keys_query(&p, &cx).map_err(invalid)? {
            None => Vec::new(),
            Some(text) => self
                .rows(project, text)
                .await?
                .0
                .iter()
                .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                .collect(),
        };
        let (totals, run) = self
            .rows(project, c.totals_query(&p, &cx).map_err(invalid)?)
            .await?;
        let rows = match c.query(&p, &cx, &keys).map_err(invalid)? {
            None => Vec::new(),
            Some(text) => self.rows(project, text).await?.0,
        };
        Ok(HogQLRun {
            object: Some(c.shape(&totals, &rows)),
            ..series_run(run, Vec::new())
        })
    }

    /// The persons behind one result of a `FunnelCorrelationQuery`: `name` as the result
    /// shows it (an event, `property::value` or `event::property::value`); `converted`
    /// picks the successes or the failures.
    async fn correlation_ids(
        &self,
        project: &Project,
        node: &Value,
        name: &str,
        converted: Option<bool>,
    ) -> Result<Vec<String>, QueryError> {
        let c = Correlation::from_value(node).map_err(invalid)?;
        if c.funnel.target != "person_id" {
            return Err(invalid(FilterError(
                "the groups or values behind a funnel aggregated by groups or by a HogQL expression are not listed yet".into(),
            )));
        }
        let cx = self.filter_cx(project);
        let p = c.funnel.period(&cx).map_err(invalid)?;
        let text = c.persons_query(&p, &cx, name, converted).map_err(invalid)?;
        let (rows, _) = self.rows(project, text).await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
            .collect())
    }

    /// The persons behind a correlation result (as `correlation_ids`; `point` holds a
    /// `FunnelCorrelationActorsQuery`'s fields), under an admission slot of its own
    /// (`/persons/funnel/correlation/`).
    pub async fn correlation_persons(
        self: &Arc<Self>,
        project: &Project,
        node: &Value,
        point: &serde_json::Map<String, Value>,
    ) -> Result<Vec<String>, QueryError> {
        let name = correlation_name(point)
            .map_err(|e| QueryError::InvalidField("funnel_correlation_person_entity", e.0))?;
        let converted = point
            .get("funnelCorrelationPersonConverted")
            .and_then(Value::as_bool);
        let admitted = self.exec.admit(project.id)?;
        let cancel = CancellationToken::new();
        let (this, project, node) = (self.clone(), project.clone(), node.clone());
        self.exec
            .run_admitted(admitted, &cancel, async move {
                this.correlation_ids(&project, &node, &name, converted)
                    .await
            })
            .await
    }

    /// A `RetentionQuery`: each cohort period's persons and their returns.
    async fn run_retention_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let r = Retention::from_value(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let p = r.period(&cx).map_err(invalid)?;
        let text = r.counts_query(&p, &cx).map_err(invalid)?;
        let (rows, run) = self.rows(project, text).await?;
        Ok(series_run(run, r.shape(&p, &rows, cx.timezone)))
    }

    /// A `StickinessQuery`: per series, persons by the number of intervals they were active.
    async fn run_stickiness_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let t = stickiness_of(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let p = trends::resolve_period(t.date_range.as_ref(), t.interval, &cx, None)
            .map_err(invalid)?;
        let mut results = Vec::new();
        let mut last = None;
        for (i, s) in t.series.iter().enumerate() {
            let text = trends::stickiness::query(&t, s, &p, &cx).map_err(invalid)?;
            let (rows, run) = self.rows(project, text).await?;
            results.push(trends::stickiness::shape(&t, i, &p, &rows));
            last = Some(run);
        }
        let run = last.expect("a stickiness query has a series");
        Ok(series_run(run, results))
    }

    /// The persons behind one point of an insight (`ActorsQuery` / `InsightActorsQuery`),
    /// one page of them as PostHog's actor objects.
    async fn run_actors_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let a = Actors::from_value(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let field = |k: &'static str, m: String| QueryError::InvalidField(k, m);
        let ids: Vec<String> = match kind(&a.insight) {
            Some("LifecycleQuery") => {
                let day = a
                    .text("day")
                    .ok_or_else(|| field("day", "day is required".into()))?;
                let status = a
                    .text("status")
                    .ok_or_else(|| field("status", "status is required".into()))?;
                self.lifecycle_ids(project, &a.insight, &day, &status)
                    .await?
            }
            Some("FunnelCorrelationQuery") => {
                let name = correlation_name(&a.point).map_err(invalid)?;
                let converted = a
                    .point
                    .get("funnelCorrelationPersonConverted")
                    .and_then(Value::as_bool);
                self.correlation_ids(project, &a.insight, &name, converted)
                    .await?
            }
            Some("FunnelsQuery") => {
                let step = a
                    .point
                    .get("funnelStep")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| field("funnelStep", "funnelStep is required".into()))?;
                let breakdown = a.point.get("funnelStepBreakdown").cloned();
                self.funnel_ids(project, &a.insight, step, breakdown)
                    .await?
            }
            Some("RetentionQuery") => {
                let i = a
                    .point
                    .get("interval")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| {
                        field("interval", "interval (the cohort row) is required".into())
                    })?;
                let r = Retention::from_value(&a.insight).map_err(invalid)?;
                let p = r.period(&cx).map_err(invalid)?;
                let text = r
                    .members_query(&p, &cx, i as usize, a.point.get("breakdown"))
                    .map_err(|e| field("interval", e.0))?;
                let (rows, _) = self.rows(project, text).await?;
                rows.iter()
                    .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                    .collect()
            }
            Some("TrendsQuery") | Some("StickinessQuery") => {
                let sticky = kind(&a.insight) == Some("StickinessQuery");
                let t = match sticky {
                    true => stickiness_of(&a.insight),
                    false => Trends::from_value(&a.insight),
                }
                .map_err(invalid)?;
                let i = a.point.get("series").and_then(Value::as_u64).unwrap_or(0) as usize;
                let s = t
                    .series
                    .get(i)
                    .ok_or_else(|| field("series", format!("the insight has no series {i}")))?;
                if s.active_days.is_some() || !t.formulas.is_empty() {
                    return Err(invalid(FilterError(
                        "the persons of weekly or monthly active users and of formulas are not listed yet".into(),
                    )));
                }
                let p = trends::resolve_period(t.date_range.as_ref(), t.interval, &cx, None)
                    .map_err(invalid)?;
                let text = match sticky {
                    true => {
                        let k = a.point.get("day").and_then(Value::as_i64).ok_or_else(|| {
                            field("day", "day (the count of intervals) is required".into())
                        })?;
                        trends::stickiness::persons_query(&t, s, &p, k, &cx).map_err(invalid)?
                    }
                    false => trends::actors_query(
                        &t,
                        s,
                        &p,
                        a.text("day").as_deref(),
                        a.point.get("breakdown"),
                        &cx,
                    )
                    .map_err(invalid)?,
                };
                let (rows, _) = self.rows(project, text).await?;
                rows.iter()
                    .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                    .collect()
            }
            Some("PathsQuery") => {
                let paths = Paths::from_value(&a.insight).map_err(invalid)?;
                let p = paths.period(&cx).map_err(invalid)?;
                let (rows, _) = self
                    .rows(project, paths.query(&p, &cx).map_err(invalid)?)
                    .await?;
                let key = |k: &str| a.text(k);
                paths
                    .persons_on(
                        &rows,
                        key("pathStartKey").as_deref(),
                        key("pathEndKey").as_deref(),
                        key("pathDropoffKey").as_deref(),
                    )
                    .map_err(|e| field("pathEndKey", e.0))?
            }
            other => {
                return Err(invalid(FilterError(format!(
                    "the persons of a {} are not listed yet; trends, stickiness, funnels, paths, retention and lifecycle are",
                    other.unwrap_or("node without a kind")
                ))));
            }
        };
        let (people, count) = self.actor_page(project, ids, a.limit, a.offset)?;
        let mut run = HogQLRun {
            columns: vec!["actor".into()],
            types: vec![("actor".into(), "Tuple".into())],
            batches: Vec::new(),
            results: people.into_iter().map(|p| Value::Array(vec![p])).collect(),
            object: None,
            has_more: a.offset + a.limit < count,
            limit: a.limit,
            offset: a.offset,
            hogql: String::new(),
            timings: Vec::new(),
            read_bytes: 0,
            scan: super::ScanStats::default(),
        };
        run.hogql = format!("-- the persons of a {}", kind(&a.insight).unwrap_or(""));
        Ok(run)
    }

    /// One page (newest first) of the persons with these uuids, as PostHog's actor objects,
    /// and how many there are.
    fn actor_page(
        &self,
        project: &Project,
        ids: Vec<String>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Value>, usize), QueryError> {
        let mut seen = std::collections::HashSet::new();
        let mut rows = Vec::new();
        for id in ids {
            let Ok(uuid) = id.parse() else { continue };
            if let Some(row) = self
                .persons
                .person_by_uuid(project.id, uuid)
                .map_err(QueryError::PersonStore)?
                && seen.insert(row.id)
            {
                rows.push((row.id, row.created_at));
            }
        }
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let count = rows.len();
        let mut out = Vec::new();
        for (id, _) in rows.into_iter().skip(offset).take(limit) {
            if let Some(p) = self
                .persons
                .full_person(project.id, id)
                .map_err(QueryError::PersonStore)?
            {
                out.push(serde_json::json!({
                    "id": p.uuid,
                    "distinct_ids": p.distinct_ids,
                    "properties": p.properties,
                    "created_at": p.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                    "is_identified": p.is_identified,
                }));
            }
        }
        Ok((out, count))
    }

    /// A `PathsQuery`: the edges between consecutive steps of the persons' paths.
    async fn run_paths_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let paths = Paths::from_value(node).map_err(invalid)?;
        let cx = self.filter_cx(project);
        let p = paths.period(&cx).map_err(invalid)?;
        let text = paths.query(&p, &cx).map_err(invalid)?;
        let (rows, run) = self.rows(project, text).await?;
        Ok(series_run(run, paths.shape(&rows)))
    }

    fn filter_cx(&self, project: &Project) -> FilterContext {
        let tz: chrono_tz::Tz = project.timezone.parse().unwrap_or(chrono_tz::UTC);
        FilterContext::events(tz, self.clock.now())
    }

    /// The person ids behind one step of a `FunnelsQuery`: `step` n > 0 reached step n,
    /// n < 0 reached step |n| − 1 and dropped off before step |n| (PostHog's `funnel_step`);
    /// with a breakdown, of one value (`funnelStepBreakdown`, PostHog's other included).
    async fn funnel_ids(
        &self,
        project: &Project,
        node: &Value,
        step: i64,
        breakdown: Option<Value>,
    ) -> Result<Vec<String>, QueryError> {
        let f = Funnel::from_value(node).map_err(invalid)?;
        if f.target != "person_id" {
            return Err(invalid(crate::insights::FilterError(
                "the groups or values behind a funnel aggregated by groups or by a HogQL expression are not listed yet".into(),
            )));
        }
        let n = f.steps.len() as i64;
        // As PostHog: reached step s when the path holds it; dropped off before step |s|
        // when the path holds the last required step before it and not step |s| itself.
        let holds = |k: i64| crate::insights::funnels::holds_step(k as usize);
        let mut condition = match step {
            s if (1..=n).contains(&s) => holds(s - 1),
            s if (-n..=-2).contains(&s) => {
                let target = -s - 1;
                let before = (0..target)
                    .rev()
                    .find(|k| f.optional & (1 << k) == 0)
                    .unwrap_or(0);
                format!("{} AND NOT {}", holds(before), holds(target))
            }
            _ => {
                return Err(QueryError::InvalidField(
                    "funnel_step",
                    format!(
                        "funnel_step is 1 to {n} (reached) or -2 to -{n} (dropped off before it)"
                    ),
                ));
            }
        };
        let cx = self.filter_cx(project);
        let p = f.period(&cx).map_err(invalid)?;
        let value = breakdown.filter(|v| !v.is_null());
        if let (Some(v), Some(b)) = (value, &f.breakdown) {
            let v = b.key_of(&v);
            condition = match v == BREAKDOWN_OTHER {
                false => format!("{condition} AND breakdown = {}", quote(&v)),
                true => {
                    let text = f.steps_query(&p, &cx, None).map_err(invalid)?;
                    let (rows, _) = self.rows(project, text).await?;
                    let shown: Vec<String> = f
                        .rank(rows)
                        .0
                        .iter()
                        .filter_map(|r| r.get(0).and_then(Value::as_str).map(quote))
                        .collect();
                    match shown.is_empty() {
                        true => condition,
                        false => format!("{condition} AND breakdown NOT IN ({})", shown.join(", ")),
                    }
                }
            };
        }
        let persons = f.persons_query(&p, &cx).map_err(invalid)?;
        let text = format!("SELECT DISTINCT target FROM ({persons}) WHERE {condition}");
        let (rows, _) = self.rows(project, text).await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
            .collect())
    }

    /// The person ids with `status` (new, returning, resurrecting, dormant) in the bucket
    /// of a `LifecycleQuery` that holds `target` (the persons behind one point).
    async fn lifecycle_ids(
        &self,
        project: &Project,
        node: &Value,
        target: &str,
        status: &str,
    ) -> Result<Vec<String>, QueryError> {
        let l = Lifecycle::from_value(node).map_err(invalid)?;
        let tz: chrono_tz::Tz = project.timezone.parse().unwrap_or(chrono_tz::UTC);
        let cx = FilterContext::events(tz, self.clock.now());
        let at = crate::insights::dates::parse_date(target, tz, cx.now)
            .map_err(|e| QueryError::InvalidField("target_date", e.0))?;
        let p = trends::resolve_period(l.date_range.as_ref(), l.interval, &cx, None)
            .map_err(invalid)?;
        let (_, before_at) = trends::bucket_before(&p, l.interval, tz);
        let local = at.with_timezone(&tz).naive_local();
        let text = l
            .persons_query(&p, before_at, &cx, local, status)
            .map_err(|e| QueryError::InvalidField("lifecycle_type", e.0))?;
        let (rows, _) = self.rows(project, text).await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
            .collect())
    }

    /// The persons behind a funnel step (as `funnel_ids`), under an admission slot of its
    /// own (`/persons/funnel/`).
    pub async fn funnel_persons(
        self: &Arc<Self>,
        project: &Project,
        node: &Value,
        step: i64,
        breakdown: Option<Value>,
    ) -> Result<Vec<String>, QueryError> {
        let admitted = self.exec.admit(project.id)?;
        let cancel = CancellationToken::new();
        let (this, project, node) = (self.clone(), project.clone(), node.clone());
        self.exec
            .run_admitted(admitted, &cancel, async move {
                this.funnel_ids(&project, &node, step, breakdown).await
            })
            .await
    }

    /// The persons of a lifecycle status (as `lifecycle_ids`), under an admission slot of
    /// its own (`/persons/lifecycle/`).
    pub async fn lifecycle_persons(
        self: &Arc<Self>,
        project: &Project,
        node: &Value,
        target: &str,
        status: &str,
    ) -> Result<Vec<String>, QueryError> {
        let admitted = self.exec.admit(project.id)?;
        let cancel = CancellationToken::new();
        let (this, project, node) = (self.clone(), project.clone(), node.clone());
        let (target, status) = (target.to_owned(), status.to_owned());
        self.exec
            .run_admitted(admitted, &cancel, async move {
                this.lifecycle_ids(&project, &node, &target, &status).await
            })
            .await
    }

    /// An `EventsQuery`: one HogQL query, its rows shaped as the explorer reads them.
    async fn run_events_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let tz: chrono_tz::Tz = project.timezone.parse().unwrap_or(chrono_tz::UTC);
        let cx = FilterContext::events(tz, self.clock.now());
        let list = EventsList::from_value(node, &cx).map_err(invalid)?;
        let mut run = self
            .run_hogql_here(project, &list.hogql, &HashMap::new(), Modifiers::default())
            .await?;
        let (rows, has_more) = list.shape(&run.results);
        run.results = rows;
        run.has_more = has_more || run.has_more;
        run.limit = list.limit;
        run.offset = list.offset;
        run.batches = Vec::new();
        // One type per selected entry: the event and person objects are tuples.
        let mut types = Vec::new();
        let mut at = 0;
        for entry in &list.select {
            let e = entry.split(" -- ").next().unwrap_or(entry).trim();
            let (width, ty) = match e {
                "*" => (7, "Tuple".to_string()),
                "person" => (4, "Tuple".to_string()),
                _ => (
                    1,
                    run.types
                        .get(at)
                        .map_or_else(|| "String".into(), |(_, t)| t.clone()),
                ),
            };
            types.push((entry.clone(), ty));
            at += width;
        }
        run.columns = list.select.clone();
        run.types = types;
        Ok(run)
    }

    async fn run_trends_here(
        &self,
        project: &Project,
        node: &Value,
    ) -> Result<HogQLRun, QueryError> {
        let t = Trends::from_value(node).map_err(invalid)?;
        let tz: chrono_tz::Tz = project.timezone.parse().unwrap_or(chrono_tz::UTC);
        let cx = FilterContext::events(tz, self.clock.now());
        let mut timings = Vec::new();
        let run = |text: String| self.rows(project, text);
        let all_time = t
            .date_range
            .as_ref()
            .and_then(|r| r.get("date_from"))
            .and_then(Value::as_str)
            == Some("all");
        let earliest = match all_time {
            true => {
                let (rows, _) = run("SELECT min(timestamp) FROM events".into()).await?;
                rows.first()
                    .and_then(|r| r.get(0))
                    .and_then(Value::as_str)
                    .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                    .map(|d| d.with_timezone(&chrono::Utc))
            }
            false => None,
        };
        let current = trends::resolve_period(t.date_range.as_ref(), t.interval, &cx, earliest)
            .map_err(invalid)?;
        let mut periods = vec![(current.clone(), t.compare.then_some("current"))];
        if t.compare {
            let previous = match t.compare_to {
                None => trends::previous_period(&current, t.interval, tz),
                Some(shift) => trends::shifted_period(&current, t.interval, tz, shift),
            }
            .map_err(invalid)?;
            periods.push((previous, Some("previous")));
        }
        let mut results = Vec::new();
        let mut hogql = String::new();
        let mut has_more = false;
        let mut read_bytes = 0;
        let mut scan = super::ScanStats::default();
        // A cohort breakdown runs the trend once per cohort: a person may be in several.
        let variants: Vec<(Trends, Option<(Value, String)>)> = match t.cohorts.is_empty() {
            true => vec![(t.clone(), None)],
            false => {
                let mut v = Vec::new();
                for pick in &t.cohorts {
                    let name = match pick {
                        trends::CohortPick::All => "all users".to_string(),
                        trends::CohortPick::Id(id) => {
                            self.meta
                                .cohort(project.id, *id)
                                .map_err(|e| QueryError::Internal(e.to_string()))?
                                .ok_or_else(|| {
                                    invalid(FilterError(format!(
                                        "There is no cohort with id {id} in this project"
                                    )))
                                })?
                                .name
                        }
                    };
                    v.push((t.in_cohort(*pick), Some((pick.value(), name))));
                }
                v
            }
        };
        for (period, compare) in &periods {
            for (t, cohort) in &variants {
                for (i, s) in t.series.iter().enumerate() {
                    // The breakdown's top values come from the current period for both.
                    let top = match t.top_values_query(s, &current, &cx) {
                        None => Vec::new(),
                        Some(q) => {
                            let (rows, r) = run(q.map_err(invalid)?).await?;
                            timings.extend(r.timings.iter().cloned());
                            let mut values: Vec<String> = rows
                                .iter()
                                .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_owned))
                                .collect();
                            let limit = t.breakdown.as_ref().map_or(0, |b| b.limit);
                            if values.len() > limit {
                                values.truncate(limit);
                                has_more = true;
                            }
                            values
                        }
                    };
                    let text = t.series_query(s, period, &top, &cx).map_err(invalid)?;
                    let (rows, r) = run(text).await?;
                    if hogql.is_empty() {
                        hogql = r.hogql.clone();
                    }
                    timings.extend(r.timings.iter().cloned());
                    read_bytes += r.read_bytes;
                    scan.add(&r.scan);
                    let mut shaped = trends::shape_series(t, i, period, &rows, &top, *compare, &cx);
                    if let Some((value, name)) = cohort {
                        for r in &mut shaped {
                            r["breakdown_value"] = value.clone();
                            r["label"] = json!(match t.series.len() {
                                1 => name.clone(),
                                _ => format!("{} - {name}", r["label"].as_str().unwrap_or("")),
                            });
                        }
                    }
                    results.extend(shaped);
                }
            }
        }
        results = trends::apply_formulas(&t, results);
        trends::smooth(&t, &mut results);
        if t.breakdown.as_ref().is_some_and(|b| b.hide_other) {
            results.retain(|r| {
                let v = r.get("breakdown_value");
                v.and_then(Value::as_str) != Some(BREAKDOWN_OTHER)
                    && !v
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.iter().all(|x| x == BREAKDOWN_OTHER))
            });
        }
        Ok(HogQLRun {
            columns: Vec::new(),
            types: Vec::new(),
            batches: Vec::new(),
            results,
            object: None,
            has_more,
            limit: 0,
            offset: 0,
            hogql,
            timings,
            read_bytes,
            scan,
        })
    }
}

impl QueryService {
    /// Runs one query of a node, every row (`Modifiers::whole` keeps them in batches).
    async fn rows(
        &self,
        project: &Project,
        text: String,
    ) -> Result<(Vec<Value>, HogQLRun), QueryError> {
        let whole = Modifiers {
            whole: true,
            ..Modifiers::default()
        };
        let r = self
            .run_hogql_here(project, &text, &HashMap::new(), whole)
            .await?;
        Ok((super::result::json_rows(&r.batches), r))
    }
}
