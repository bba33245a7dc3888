//! PostHog's `FunnelCorrelationQuery`: which events, person properties, or properties of
//! chosen events make finishing a funnel more or less likely. The persons (or groups) who
//! entered the funnel are split into those who finished it (success) and the others
//! (failure); for each event name (or `property::value`, or `event::property::value`), the
//! persons with it on each side give an odds ratio, PostHog's way:
//! `((s + 1) · (F − f + 1)) / ((S − s + 1) · (f + 1))` with `s`, `f` the persons with it
//! and `S`, `F` all of each side. An event counts for a person when it happened after their
//! first step and before their last one (before the end of the window when they did not
//! finish), is not a step of the funnel and is not excluded. Names held by fewer persons
//! than min(25, 2% of the funnel's) are left out, then the ten strongest of each direction
//! are shown. HogQL text; the query service runs it.

use serde_json::{Map, Value, json};

use super::FilterError;
use super::filters::{FilterContext, quote};
use super::funnels::Funnel;
use super::text_list;
use super::trends::Period;

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// Fewest persons a name must have to be shown, and as a share of the funnel's persons
/// (the smaller of the two applies); the prior count added to each cell.
const MIN_PERSONS: f64 = 25.0;
const MIN_SHARE: f64 = 0.02;
const PRIOR: f64 = 1.0;
/// Names shown per direction.
const SHOWN: usize = 10;
/// What separates the parts of a property name.
const SEP: &str = "::";

/// What is correlated.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Event names.
    Events,
    /// Person (or group) properties: these names, or every one with `$all`.
    Properties {
        names: Vec<String>,
        exclude: Vec<String>,
    },
    /// The properties of these events.
    EventWithProperties {
        events: Vec<String>,
        exclude: Vec<String>,
    },
}

/// A `FunnelCorrelationQuery`, read.
#[derive(Debug, Clone)]
pub struct Correlation {
    pub funnel: Funnel,
    /// The funnel step whose persons are correlated (PostHog's `funnelStep`, 1 = all who
    /// entered the funnel).
    pub step: i64,
    pub kind: Kind,
    pub exclude_events: Vec<String>,
}

impl Correlation {
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a FunnelCorrelationQuery must be an object"))?;
        let actors = q
            .get("source")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("a FunnelCorrelationQuery needs source: a FunnelsActorsQuery"))?;
        let funnel = actors
            .get("source")
            .ok_or_else(|| bad("a FunnelsActorsQuery needs source: a FunnelsQuery"))?;
        let funnel = Funnel::from_value(funnel)?;
        let n = funnel.steps.len() as i64;
        let step = match actors.get("funnelStep") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_i64()
                .filter(|s| (1..=n).contains(s))
                .ok_or_else(|| bad(format!("funnelStep must be 1 to {n}")))?,
        };
        let list = |k: &str| text_list(q, "FunnelCorrelationQuery", k);
        let kind = match q.get("funnelCorrelationType").and_then(Value::as_str) {
            None | Some("events") => Kind::Events,
            Some("properties") => {
                let names = list("funnelCorrelationNames")?;
                if names.is_empty() {
                    return Err(bad(
                        "property correlation needs funnelCorrelationNames (property names, or $all)",
                    ));
                }
                Kind::Properties {
                    names,
                    exclude: list("funnelCorrelationExcludeNames")?,
                }
            }
            Some("event_with_properties") => {
                let events = list("funnelCorrelationEventNames")?;
                if events.is_empty() {
                    return Err(bad(
                        "event property correlation needs funnelCorrelationEventNames",
                    ));
                }
                Kind::EventWithProperties {
                    events,
                    exclude: list("funnelCorrelationEventExcludePropertyNames")?,
                }
            }
            Some(o) => {
                return Err(bad(format!(
                    "funnelCorrelationType must be events, properties or event_with_properties, got '{o}'"
                )));
            }
        };
        Ok(Correlation {
            funnel,
            step,
            kind,
            exclude_events: list("funnelCorrelationExcludeEventNames")?,
        })
    }

    /// The funnel's persons at `step` or beyond: `target`, `success` (finished the funnel),
    /// `first_ts` (their first step) and `final_ts` (their last step when they finished).
    pub fn actors_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        // Who holds the last step finished; `step` counts as reached when the path holds
        // it (optional steps skipped are not held).
        let holds = super::funnels::holds_step;
        let last = holds(self.funnel.steps.len() - 1);
        Ok(format!(
            "SELECT target, {last} AS success, f.3 AS first_ts, \
             if({last}, f.4, NULL) AS final_ts FROM ({}) WHERE f.1 >= 0 AND {}",
            self.funnel.persons_query(p, cx)?,
            holds(self.step.max(1) as usize - 1)
        ))
    }

    /// `[successes, failures]` of the funnel's persons.
    pub fn totals_query(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        Ok(format!(
            "SELECT countIf(success), countIf(NOT success) FROM ({})",
            self.actors_query(p, cx)?
        ))
    }

    /// The events of each person within their time in the funnel: `e` the event, `a` the
    /// person's row of [`Correlation::actors_query`].
    fn events_in_funnel(&self, p: &Period, cx: &FilterContext) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let mut skip: Vec<String> = self
            .funnel
            .steps
            .iter()
            .filter_map(|s| s.get("event").and_then(Value::as_str).map(quote))
            .collect();
        skip.extend(self.exclude_events.iter().map(|e| quote(e)));
        let not_in = match skip.is_empty() {
            true => String::new(),
            false => format!(" AND e.event NOT IN ({})", skip.join(", ")),
        };
        Ok(format!(
            "FROM events AS e INNER JOIN ({actors}) AS a ON e.{target} = a.target \
             WHERE e.timestamp >= {from} AND e.timestamp <= {to} AND e.timestamp > a.first_ts \
             AND e.timestamp < coalesce(a.final_ts, addSeconds(a.first_ts, {window})){not_in}",
            actors = self.actors_query(p, cx)?,
            target = self.funnel.target,
            from = lit(p.from),
            to = lit(p.to + chrono::Duration::seconds(self.funnel.window)),
            window = self.funnel.window,
        ))
    }

    /// The keys to ask for first, when the names are not known in advance: every person
    /// property (`$all`), or every property of the chosen events. `None`: none needed.
    pub fn keys_query(
        &self,
        p: &Period,
        cx: &FilterContext,
    ) -> Result<Option<String>, FilterError> {
        Ok(match &self.kind {
            Kind::Events => None,
            Kind::Properties { names, .. } => match names.iter().any(|n| n == "$all") {
                false => None,
                true => Some(format!(
                    "SELECT DISTINCT arrayJoin(JSONExtractKeys(properties)) AS k FROM {} ORDER BY k",
                    self.properties_table()
                )),
            },
            Kind::EventWithProperties { events, .. } => Some(format!(
                "SELECT DISTINCT arrayJoin(JSONExtractKeys(e.properties)) AS k {} AND e.event IN ({}) ORDER BY k",
                self.events_in_funnel(p, cx)?,
                events
                    .iter()
                    .map(|e| quote(e))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        })
    }

    fn properties_table(&self) -> String {
        match self.funnel.target.as_str() {
            "person_id" => "persons".to_string(),
            g => {
                let index = g.trim_matches('`').trim_start_matches("$group_");
                format!("(SELECT key AS id, properties FROM groups WHERE index = {index})")
            }
        }
    }

    /// The properties a query reads: the names asked for (with `$all`, the `keys` found),
    /// less the excluded ones.
    fn property_names(&self, keys: &[String]) -> Vec<String> {
        let (names, exclude) = match &self.kind {
            Kind::Events => return Vec::new(),
            Kind::Properties { names, exclude } => (names.clone(), exclude),
            Kind::EventWithProperties { exclude, .. } => (keys.to_vec(), exclude),
        };
        let mut out: Vec<String> = Vec::new();
        for n in names {
            let expanded = match n == "$all" {
                true => keys.to_vec(),
                false => vec![n],
            };
            for k in expanded {
                if !exclude.contains(&k) && !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }

    /// Rows `[name, successes, failures]`, one per name; `keys` answers
    /// [`Correlation::keys_query`] (empty when it is `None`). `None`: nothing to ask (no
    /// property to read).
    pub fn query(
        &self,
        p: &Period,
        cx: &FilterContext,
        keys: &[String],
    ) -> Result<Option<String>, FilterError> {
        let count = |inner: String, having: &str| {
            format!(
                "SELECT name, countIf(success) AS s, countIf(NOT success) AS f FROM ({inner}) GROUP BY name{having}"
            )
        };
        Ok(Some(match &self.kind {
            Kind::Events => count(
                format!(
                    "SELECT DISTINCT e.event AS name, a.target AS target, a.success AS success {}",
                    self.events_in_funnel(p, cx)?
                ),
                "",
            ),
            Kind::Properties { .. } => {
                let names = self.property_names(keys);
                if names.is_empty() {
                    return Ok(None);
                }
                let actors = self.actors_query(p, cx)?;
                let table = self.properties_table();
                let parts: Vec<String> = names
                    .iter()
                    .map(|k| {
                        format!(
                            "SELECT concat({}, ifNull(toString(p.properties[{}]), '')) AS name, a.target AS target, a.success AS success \
                             FROM ({actors}) AS a INNER JOIN {table} AS p ON p.id = a.target",
                            quote(&format!("{k}{SEP}")),
                            quote(k),
                        )
                    })
                    .collect();
                count(parts.join(" UNION ALL "), "")
            }
            Kind::EventWithProperties { events, .. } => {
                let names = self.property_names(keys);
                if names.is_empty() {
                    return Ok(None);
                }
                let only = events
                    .iter()
                    .map(|e| quote(e))
                    .collect::<Vec<_>>()
                    .join(", ");
                let inner = self.events_in_funnel(p, cx)?;
                let parts: Vec<String> = names
                    .iter()
                    .map(|k| {
                        format!(
                            "SELECT DISTINCT concat(e.event, {}, ifNull(toString(e.properties[{}]), '')) AS name, \
                             a.target AS target, a.success AS success {inner} AND e.event IN ({only})",
                            quote(&format!("{SEP}{k}{SEP}")),
                            quote(k)
                        )
                    })
                    .collect();
                // Rare values say little: PostHog keeps those of more than two persons.
                count(parts.join(" UNION ALL "), " HAVING s + f > 2")
            }
        }))
    }

    /// PostHog's result: `{events: [...], skewed}` from the totals and the rows.
    pub fn shape(&self, totals: &[Value], rows: &[Value]) -> Value {
        let n = |r: &Value, i: usize| r.get(i).and_then(Value::as_f64).unwrap_or(0.0);
        let (success_total, failure_total) =
            totals.first().map_or((0.0, 0.0), |t| (n(t, 0), n(t, 1)));
        if success_total == 0.0 || failure_total == 0.0 {
            return json!({"events": [], "skewed": true});
        }
        let skewed = success_total / failure_total > 10.0 || failure_total / success_total > 10.0;
        let floor = MIN_PERSONS.min(MIN_SHARE * (success_total + failure_total));
        let mut up = Vec::new();
        let mut down = Vec::new();
        for r in rows {
            let (s, f) = (n(r, 1), n(r, 2));
            if s + f < floor {
                continue;
            }
            let odds = ((s + PRIOR) * (failure_total - f + PRIOR))
                / ((success_total - s + PRIOR) * (f + PRIOR));
            let name = r.get(0).and_then(Value::as_str).unwrap_or("").to_owned();
            let mut event = Map::new();
            event.insert("event".into(), json!(name));
            event.insert("properties".into(), json!({}));
            event.insert("elements".into(), json!([]));
            let item = json!({
                "event": event,
                "success_count": s as i64,
                "failure_count": f as i64,
                "odds_ratio": odds,
                "correlation_type": if odds > 1.0 { "success" } else { "failure" },
            });
            match odds > 1.0 {
                true => up.push((odds, name, item)),
                false => down.push((odds, name, item)),
            }
        }
        up.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        down.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let events: Vec<Value> = up
            .into_iter()
            .take(SHOWN)
            .chain(down.into_iter().take(SHOWN))
            .map(|x| x.2)
            .collect();
        json!({"events": events, "skewed": skewed})
    }

    /// The condition on a correlated name's persons (the persons behind one result): did
    /// the event (`event`), or has the property values (`properties`: `key::value` names,
    /// as the results show them). `converted`: only the successes (or failures).
    pub fn persons_query(
        &self,
        p: &Period,
        cx: &FilterContext,
        name: &str,
        converted: Option<bool>,
    ) -> Result<String, FilterError> {
        let side = match converted {
            None => String::new(),
            Some(true) => " AND success".to_string(),
            Some(false) => " AND NOT success".to_string(),
        };
        let rows = match &self.kind {
            Kind::Events => format!(
                "SELECT DISTINCT a.target AS target, a.success AS success {} AND e.event = {}",
                self.events_in_funnel(p, cx)?,
                quote(name)
            ),
            Kind::Properties { .. } => {
                let (k, v) = name.split_once(SEP).ok_or_else(|| {
                    bad(format!(
                        "a property correlation's name is property{SEP}value, got '{name}'"
                    ))
                })?;
                format!(
                    "SELECT a.target AS target, a.success AS success FROM ({}) AS a INNER JOIN {} AS p \
                     ON p.id = a.target WHERE ifNull(toString(p.properties[{}]), '') = {}",
                    self.actors_query(p, cx)?,
                    self.properties_table(),
                    quote(k),
                    quote(v)
                )
            }
            Kind::EventWithProperties { .. } => {
                let mut parts = name.splitn(3, SEP);
                let (Some(e), Some(k), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
                    return Err(bad(format!(
                        "an event property correlation's name is event{SEP}property{SEP}value, got '{name}'"
                    )));
                };
                format!(
                    "SELECT DISTINCT a.target AS target, a.success AS success {} AND e.event = {} \
                     AND ifNull(toString(e.properties[{}]), '') = {}",
                    self.events_in_funnel(p, cx)?,
                    quote(e),
                    quote(k),
                    quote(v)
                )
            }
        };
        Ok(format!(
            "SELECT DISTINCT target FROM ({rows}) WHERE true{side}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    fn node(extra: Value) -> Value {
        let mut q = json!({"kind": "FunnelCorrelationQuery", "source": {"kind": "FunnelsActorsQuery",
            "source": {"kind": "FunnelsQuery", "series": [{"event": "a"}, {"event": "b"}]}}});
        for (k, v) in extra.as_object().unwrap() {
            q[k] = v.clone();
        }
        q
    }

    #[test]
    fn odds_ratios_as_posthog_computes_them() {
        let c = Correlation::from_value(&node(json!({}))).unwrap();
        let p = c.funnel.period(&cx()).unwrap();
        for q in [
            c.query(&p, &cx(), &[]).unwrap().unwrap(),
            c.totals_query(&p, &cx()).unwrap(),
            c.persons_query(&p, &cx(), "x", Some(true)).unwrap(),
        ] {
            crate::hogql::parser::parse_query(&q).unwrap();
        }
        // 30 successes and 70 failures; "video" by 20 of the first and 10 of the second.
        let r = c.shape(
            &[json!([30, 70])],
            &[
                json!(["video", 20, 10]),
                json!(["rare", 1, 0]),
                json!(["bounce", 2, 40]),
            ],
        );
        let events = r["events"].as_array().unwrap();
        assert_eq!(events.len(), 2, "{r}");
        assert_eq!(events[0]["event"]["event"], "video");
        let odds = (21.0 * 61.0) / (11.0 * 11.0);
        assert!((events[0]["odds_ratio"].as_f64().unwrap() - odds).abs() < 1e-12);
        assert_eq!(events[0]["correlation_type"], "success");
        assert_eq!(events[1]["correlation_type"], "failure");
        assert_eq!(r["skewed"], false);
        assert_eq!(
            c.shape(&[json!([0, 5])], &[])["skewed"],
            true,
            "no successes: nothing to compare"
        );
    }

    #[test]
    fn properties_and_event_properties_need_names() {
        for (extra, says) in [
            (
                json!({"funnelCorrelationType": "properties"}),
                "funnelCorrelationNames",
            ),
            (
                json!({"funnelCorrelationType": "event_with_properties"}),
                "funnelCorrelationEventNames",
            ),
            (json!({"funnelCorrelationType": "x"}), "events, properties"),
        ] {
            let e = Correlation::from_value(&node(extra)).unwrap_err();
            assert!(e.0.contains(says), "{e}");
        }
        let c = Correlation::from_value(&node(json!({"funnelCorrelationType": "properties",
            "funnelCorrelationNames": ["$all"], "funnelCorrelationExcludeNames": ["email"]})))
        .unwrap();
        let p = c.funnel.period(&cx()).unwrap();
        assert!(c.keys_query(&p, &cx()).unwrap().is_some());
        let q = c
            .query(&p, &cx(), &["email".into(), "plan".into()])
            .unwrap()
            .unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        assert!(q.contains("'plan::'") && !q.contains("'email::'"), "{q}");
    }
}
