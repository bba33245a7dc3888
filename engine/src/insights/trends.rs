//! PostHog's `TrendsQuery` compiled to HogQL, and its rows shaped into PostHog's series.
//!
//! A trend is, per series (an `EventsNode`) and period (the range, and the one before it
//! when comparing), one HogQL query: the series' math per time bucket (and per breakdown
//! value), over the events the series' event and filters select in the range. With a
//! breakdown, a first query per series finds its top values by the same math over the
//! whole range; the rest become `$$_posthog_breakdown_other_$$`. Buckets without events
//! are zeros. Pure: the query service runs the text this writes.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use serde_json::{Map, Value, json};

use super::filters::{FilterContext, properties_expr, quote};
use super::{FilterError, dates};

/// PostHog's breakdown value of events without the property.
pub const BREAKDOWN_NULL: &str = "$$_posthog_breakdown_null_$$";
/// PostHog's breakdown value of the values past the limit.
pub const BREAKDOWN_OTHER: &str = "$$_posthog_breakdown_other_$$";
/// Most breakdown values shown when the query does not say (PostHog's default).
pub const DEFAULT_BREAKDOWN_LIMIT: usize = 25;
/// Most buckets one series may have (an hourly trend over ~4 years).
pub const MAX_BUCKETS: usize = 35_000;

fn bad(m: impl Into<String>) -> FilterError {
    FilterError(m.into())
}

/// How events are bucketed in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Hour,
    Day,
    Week,
    Month,
}

impl Interval {
    pub(super) fn parse(v: Option<&Value>) -> Result<Self, FilterError> {
        Ok(match v.and_then(Value::as_str).unwrap_or("day") {
            "hour" => Interval::Hour,
            "day" => Interval::Day,
            "week" => Interval::Week,
            "month" => Interval::Month,
            other => {
                return Err(bad(format!(
                    "interval must be hour, day, week or month, got '{other}'"
                )));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Interval::Hour => "hour",
            Interval::Day => "day",
            Interval::Week => "week",
            Interval::Month => "month",
        }
    }

    /// The HogQL function that starts a bucket (in the project's zone; weeks on Sunday).
    pub(super) fn start_fn(self) -> &'static str {
        match self {
            Interval::Hour => "toStartOfHour(timestamp)",
            Interval::Day => "toStartOfDay(timestamp)",
            Interval::Week => "toStartOfWeek(timestamp, 0)",
            Interval::Month => "toStartOfMonth(timestamp)",
        }
    }

    /// The start of the bucket holding local time `t`.
    fn floor(self, t: NaiveDateTime) -> NaiveDateTime {
        let day = t.date();
        match self {
            Interval::Hour => day.and_hms_opt(t.hour(), 0, 0).expect("valid"),
            Interval::Day => day.and_time(chrono::NaiveTime::MIN),
            Interval::Week => {
                let back = i64::from(day.weekday().num_days_from_sunday());
                (day - Duration::days(back)).and_time(chrono::NaiveTime::MIN)
            }
            Interval::Month => NaiveDate::from_ymd_opt(day.year(), day.month(), 1)
                .expect("valid")
                .and_time(chrono::NaiveTime::MIN),
        }
    }

    fn next(self, t: NaiveDateTime) -> NaiveDateTime {
        match self {
            Interval::Hour => t + Duration::hours(1),
            Interval::Day => t + Duration::days(1),
            Interval::Week => t + Duration::weeks(1),
            Interval::Month => {
                let (y, m) = match t.month() {
                    12 => (t.year() + 1, 1),
                    m => (t.year(), m + 1),
                };
                NaiveDate::from_ymd_opt(y, m, 1)
                    .expect("valid")
                    .and_time(chrono::NaiveTime::MIN)
            }
        }
    }
}

/// The period a trend covers: `[from, to]` (instants), and each bucket's local start.
#[derive(Debug, Clone, PartialEq)]
pub struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub buckets: Vec<NaiveDateTime>,
}

fn local(t: DateTime<Utc>, tz: chrono_tz::Tz) -> NaiveDateTime {
    t.with_timezone(&tz).naive_local()
}

/// The instant local time `t` in `tz` is (a time skipped by a DST change: the hour after).
pub fn instant_of(t: NaiveDateTime, tz: chrono_tz::Tz) -> DateTime<Utc> {
    instant(t, tz)
}

fn instant(t: NaiveDateTime, tz: chrono_tz::Tz) -> DateTime<Utc> {
    tz.from_local_datetime(&t)
        .earliest()
        .or_else(|| tz.from_local_datetime(&(t + Duration::hours(1))).earliest())
        .map_or_else(|| t.and_utc(), |x| x.with_timezone(&Utc))
}

fn period_of(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    interval: Interval,
    tz: chrono_tz::Tz,
) -> Result<Period, FilterError> {
    if to < from {
        return Err(bad("dateRange ends before it starts"));
    }
    let mut buckets = Vec::new();
    let mut b = interval.floor(local(from, tz));
    let end = local(to, tz);
    while b <= end {
        if buckets.len() == MAX_BUCKETS {
            return Err(bad(format!(
                "the date range holds more than {MAX_BUCKETS} {}s: use a longer interval",
                interval.name()
            )));
        }
        buckets.push(b);
        b = interval.next(b);
    }
    Ok(Period { from, to, buckets })
}

/// PostHog's date range of an insight: `date_from` (default `-7d`) starts at its
/// interval's start; `date_to` (default now) ends at the end of its interval unless
/// `explicitDate`. `all` starts at `earliest` (the project's first event).
pub fn resolve_period(
    range: Option<&Value>,
    interval: Interval,
    cx: &FilterContext,
    earliest: Option<DateTime<Utc>>,
) -> Result<Period, FilterError> {
    let get = |k: &str| range.and_then(|r| r.get(k)).and_then(Value::as_str);
    let explicit = range
        .and_then(|r| r.get("explicitDate"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tz = cx.timezone;
    let from = match get("date_from").unwrap_or("-7d") {
        "all" => earliest.unwrap_or(cx.now),
        text => dates::parse_date(text, tz, cx.now)?,
    };
    let to = match get("date_to") {
        Some(text) => dates::parse_date(text, tz, cx.now)?,
        None => cx.now,
    };
    let (from, to) = match explicit {
        true => (from, to),
        false => {
            let f = interval.floor(local(from, tz));
            let t = interval.next(interval.floor(local(to, tz))) - Duration::microseconds(1);
            (instant(f, tz), instant(t, tz))
        }
    };
    period_of(from, to, interval, tz)
}

/// The bucket just before `p`'s first: its local start and that instant.
pub fn bucket_before(
    p: &Period,
    interval: Interval,
    tz: chrono_tz::Tz,
) -> (NaiveDateTime, DateTime<Utc>) {
    let first = p
        .buckets
        .first()
        .copied()
        .unwrap_or_else(|| local(p.from, tz));
    let before = interval.floor(first - Duration::microseconds(1));
    (before, instant(before, tz))
}

/// The period before `p`, of the same length (PostHog's "compare to previous period").
pub fn previous_period(
    p: &Period,
    interval: Interval,
    tz: chrono_tz::Tz,
) -> Result<Period, FilterError> {
    let length = p.to - p.from;
    let to = p.from - Duration::microseconds(1);
    let from = to - length;
    let from = instant(interval.floor(local(from, tz)), tz);
    period_of(from, to, interval, tz)
}

/// `compareFilter.compare_to` (`-1w`, `-3m`, …): how far back the compared period lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    pub n: u32,
    /// `h`, `d`, `w`, `m`, `q` or `y`.
    pub unit: char,
}

impl Shift {
    fn parse(text: &str) -> Result<Self, FilterError> {
        let bad_shift = || {
            bad(format!(
                "compareFilter.compare_to must be a relative date like -1w, -3m or -1y, got '{text}'"
            ))
        };
        let rest = text.trim().strip_prefix('-').ok_or_else(bad_shift)?;
        let unit = rest.chars().last().ok_or_else(bad_shift)?;
        let n: u32 = rest[..rest.len() - unit.len_utf8()]
            .parse()
            .ok()
            .filter(|n| (1..=10_000).contains(n))
            .ok_or_else(bad_shift)?;
        match unit {
            'h' | 'd' | 'w' | 'm' | 'q' | 'y' => Ok(Shift { n, unit }),
            _ => Err(bad_shift()),
        }
    }

    /// Local time `t`, this far back.
    fn back(self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let n = self.n as i64;
        match self.unit {
            'h' => Some(t - Duration::hours(n)),
            'd' => Some(t - Duration::days(n)),
            'w' => Some(t - Duration::weeks(n)),
            'm' => t.checked_sub_months(chrono::Months::new(self.n)),
            'q' => t.checked_sub_months(chrono::Months::new(self.n * 3)),
            _ => t.checked_sub_months(chrono::Months::new(self.n * 12)),
        }
    }
}

/// `p` moved back by `shift` (PostHog's "compare to" a chosen earlier period).
pub fn shifted_period(
    p: &Period,
    interval: Interval,
    tz: chrono_tz::Tz,
    shift: Shift,
) -> Result<Period, FilterError> {
    let too_early = || bad("compareFilter.compare_to reaches before the calendar's start");
    let from = instant(shift.back(local(p.from, tz)).ok_or_else(too_early)?, tz);
    let to = instant(shift.back(local(p.to, tz)).ok_or_else(too_early)?, tz);
    period_of(from, to, interval, tz)
}

/// One series of the query (an `EventsNode`), read.
#[derive(Debug, Clone)]
pub struct Series {
    pub node: Map<String, Value>,
    pub event: Option<String>,
    /// The HogQL aggregate of one bucket.
    pub math: String,
    /// `weekly_active` (7) / `monthly_active` (30): a day's value counts the persons active
    /// in the window of this many days that ends with it.
    pub active_days: Option<i64>,
}

/// A `TrendsQuery`, read and checked.
#[derive(Debug, Clone)]
pub struct Trends {
    pub series: Vec<Series>,
    pub interval: Interval,
    pub date_range: Option<Value>,
    /// The query's own property filters (all series).
    pub properties: Option<Value>,
    pub breakdown: Option<Breakdown>,
    pub compare: bool,
    /// `compareFilter.compare_to`: the compared period lies this far back (instead of just
    /// before).
    pub compare_to: Option<Shift>,
    /// A cohort breakdown: each series once per cohort (persons may be in several).
    pub cohorts: Vec<CohortPick>,
    /// A display of one value per series (`BoldNumber`, `ActionsPie`, `ActionsTable`,
    /// `ActionsBarValue`, `WorldMap`): `aggregated_value` over the range, no buckets.
    pub aggregate: bool,
    /// The formulas over the series (`A` the first): `trendsFilter.formula`, or each of
    /// `formulas` / `formulaNodes` (with its `custom_name`), shown in that order.
    pub formulas: Vec<FormulaNode>,
    /// `trendsFilter.smoothingIntervals`: each value the mean of it and the n − 1 before
    /// it (fewer at the start of the range).
    pub smoothing: usize,
}

/// A breakdown: the HogQL text of its value and how many values are shown. With several
/// breakdowns (`breakdownFilter.breakdowns`), the value joins each one's with
/// [`BREAKDOWN_JOIN`] and `parts` says how many.
#[derive(Debug, Clone)]
pub struct Breakdown {
    pub value: String,
    pub limit: usize,
    pub hide_other: bool,
    pub parts: usize,
}

/// One cohort of a cohort breakdown (`breakdown_type: "cohort"`): a cohort by id, or
/// everyone (`all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CohortPick {
    All,
    Id(i64),
}

impl CohortPick {
    fn parse(v: &Value) -> Result<Self, FilterError> {
        match v {
            Value::String(s) if s == "all" => Ok(CohortPick::All),
            Value::String(s) => s.parse().map(CohortPick::Id).map_err(|_| {
                bad(format!(
                    "a cohort breakdown takes cohort ids or 'all', got '{s}'"
                ))
            }),
            Value::Number(n) => n
                .as_i64()
                .map(CohortPick::Id)
                .ok_or_else(|| bad(format!("a cohort id is a whole number, got {n}"))),
            other => Err(bad(format!(
                "a cohort breakdown takes cohort ids or 'all', got {other}"
            ))),
        }
    }

    /// The breakdown value PostHog shows: the cohort's id, or `all`.
    pub fn value(self) -> Value {
        match self {
            CohortPick::All => json!("all"),
            CohortPick::Id(i) => json!(i),
        }
    }
}

/// What joins the values of several breakdowns into one key (ASCII's unit separator).
pub const BREAKDOWN_JOIN: char = '\u{1f}';

/// Most breakdowns one node may have (PostHog's interface allows three).
const MAX_BREAKDOWNS: usize = 3;

impl Breakdown {
    /// A row's breakdown key as PostHog shows it: the value, or the list of values of
    /// several breakdowns (other: the other marker in each place).
    pub fn shown(&self, key: &str) -> Value {
        if self.parts <= 1 {
            return json!(key);
        }
        if key == BREAKDOWN_OTHER {
            return json!(vec![BREAKDOWN_OTHER; self.parts]);
        }
        json!(key.split(BREAKDOWN_JOIN).collect::<Vec<_>>())
    }

    /// The key of a value as PostHog shows it (a list for several breakdowns).
    pub fn key_of(&self, v: &Value) -> String {
        let text = |x: &Value| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match v {
            Value::Array(a) if a.len() > 1 && a.iter().all(|x| x == BREAKDOWN_OTHER) => {
                BREAKDOWN_OTHER.to_string()
            }
            Value::Array(a) if self.parts > 1 || a.len() == 1 => a
                .iter()
                .map(text)
                .collect::<Vec<_>>()
                .join(&BREAKDOWN_JOIN.to_string()),
            other => text(other),
        }
    }
}

/// The HogQL aggregate of a series' math.
fn math_of(node: &Map<String, Value>) -> Result<String, FilterError> {
    let math = node.get("math").and_then(Value::as_str).unwrap_or("total");
    let prop = || -> Result<String, FilterError> {
        match node.get("math_property").and_then(Value::as_str) {
            Some(p) if !p.is_empty() => Ok(format!("toFloat(properties[{}])", quote(p))),
            _ => Err(bad(format!("math {math} needs math_property"))),
        }
    };
    let agg = match math {
        "total" => "count()".to_string(),
        "dau" | "weekly_active" | "monthly_active" => "count(DISTINCT person_id)".to_string(),
        "unique_session" => "count(DISTINCT nullIf(toString(`$session_id`), ''))".to_string(),
        "unique_group" => {
            let i = node
                .get("math_group_type_index")
                .and_then(Value::as_u64)
                .filter(|i| *i < 5)
                .ok_or_else(|| bad("math unique_group needs math_group_type_index 0 to 4"))?;
            format!("count(DISTINCT nullIf(toString(`$group_{i}`), ''))")
        }
        "sum" => format!("sum({})", prop()?),
        "avg" => format!("avg({})", prop()?),
        "min" => format!("min({})", prop()?),
        "max" => format!("max({})", prop()?),
        "median" => format!("quantile(0.5)({})", prop()?),
        "p75" => format!("quantile(0.75)({})", prop()?),
        "p90" => format!("quantile(0.9)({})", prop()?),
        "p95" => format!("quantile(0.95)({})", prop()?),
        "p99" => format!("quantile(0.99)({})", prop()?),
        "hogql" => match node.get("math_hogql").and_then(Value::as_str) {
            Some(h) if !h.trim().is_empty() => format!("({h})"),
            _ => return Err(bad("math hogql needs math_hogql")),
        },
        other => {
            return Err(bad(format!(
                "math '{other}' is not supported; use total, dau, weekly_active, monthly_active, unique_session, unique_group, sum, avg, min, max, median, p75, p90, p95, p99 or hogql"
            )));
        }
    };
    Ok(match node.get("math_multiplier").and_then(Value::as_f64) {
        Some(m) if m != 1.0 => format!("({agg}) * {m:?}"),
        _ => agg,
    })
}

/// One breakdown's HogQL value (before NULL and empty values become the null marker).
fn breakdown_value(key: &str, ty: &str, group: Option<&Value>) -> Result<String, FilterError> {
    let field = |base: &str| format!("{base}[{}]", quote(key));
    Ok(match ty {
        "event" => field("properties"),
        "person" => field("person.properties"),
        "group" => {
            let i = group
                .and_then(Value::as_u64)
                .filter(|i| *i < 5)
                .ok_or_else(|| bad("a group breakdown needs its group type index, 0 to 4"))?;
            field(&format!("group_{i}.properties"))
        }
        "session" => format!("session.`{}`", key.replace('`', "\\`")),
        "hogql" => format!("({key})"),
        other => {
            return Err(bad(format!(
                "breakdown_type '{other}' is not supported; use event, person, group, session or hogql"
            )));
        }
    })
}

/// A node's `breakdownFilter` (one breakdown), read; `None` when it has none.
pub(super) fn breakdown_of(q: &Map<String, Value>) -> Result<Option<Breakdown>, FilterError> {
    let Some(f) = q.get("breakdownFilter").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let null = |v: String| {
        format!(
            "ifNull(nullIf(toString({v}), ''), {})",
            quote(BREAKDOWN_NULL)
        )
    };
    let several = f
        .get("breakdowns")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    let (value, parts) = match several {
        Some(list) => {
            if list.len() > MAX_BREAKDOWNS {
                return Err(bad(format!(
                    "breakdownFilter.breakdowns holds at most {MAX_BREAKDOWNS} breakdowns"
                )));
            }
            let mut values = Vec::new();
            for b in list {
                let key = match b.get("property") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => return Err(bad("each of breakdownFilter.breakdowns needs property")),
                };
                let ty = b.get("type").and_then(Value::as_str).unwrap_or("event");
                values.push(null(breakdown_value(&key, ty, b.get("group_type_index"))?));
            }
            let join = quote(&BREAKDOWN_JOIN.to_string());
            (
                format!("concat({})", values.join(&format!(", {join}, "))),
                list.len(),
            )
        }
        None => {
            let key = match f.get("breakdown") {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(other) => {
                    return Err(bad(format!(
                        "breakdown must be a property name, got {other}"
                    )));
                }
            };
            let ty = f
                .get("breakdown_type")
                .and_then(Value::as_str)
                .unwrap_or("event");
            let value = breakdown_value(&key, ty, f.get("breakdown_group_type_index"))?;
            (null(value), 1)
        }
    };
    let limit = match f.get("breakdown_limit") {
        None | Some(Value::Null) => DEFAULT_BREAKDOWN_LIMIT,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=10_000).contains(n))
            .ok_or_else(|| bad("breakdown_limit must be 1 to 10000"))? as usize,
    };
    Ok(Some(Breakdown {
        value,
        parts,
        limit,
        hide_other: f
            .get("breakdown_hide_other_aggregation")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }))
}

impl Trends {
    /// Reads a `TrendsQuery` node.
    pub fn from_value(v: &Value) -> Result<Self, FilterError> {
        let q = v
            .as_object()
            .ok_or_else(|| bad("a TrendsQuery must be an object"))?;
        let series = match q.get("series") {
            Some(Value::Array(s)) if !s.is_empty() => s,
            _ => return Err(bad("a TrendsQuery needs series, a list of EventsNode")),
        };
        if series.len() > 50 {
            return Err(bad("a TrendsQuery holds at most 50 series"));
        }
        let series = series
            .iter()
            .map(|s| {
                let node = s
                    .as_object()
                    .ok_or_else(|| bad("each series must be an EventsNode object"))?;
                match node.get("kind").and_then(Value::as_str) {
                    None | Some("EventsNode") => {}
                    Some(other) => {
                        return Err(bad(format!(
                            "series of kind {other} are not supported; use EventsNode"
                        )));
                    }
                }
                let active_days = match node.get("math").and_then(Value::as_str) {
                    Some("weekly_active") => Some(7),
                    Some("monthly_active") => Some(30),
                    _ => None,
                };
                Ok(Series {
                    event: node.get("event").and_then(Value::as_str).map(str::to_owned),
                    math: math_of(node)?,
                    node: node.clone(),
                    active_days,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let display = q
            .get("trendsFilter")
            .and_then(|f| f.get("display"))
            .and_then(Value::as_str);
        let aggregate = match display {
            None
            | Some(
                "ActionsLineGraph"
                | "ActionsBar"
                | "ActionsAreaGraph"
                | "ActionsLineGraphCumulative",
            ) => false,
            Some("BoldNumber" | "ActionsPie" | "ActionsTable" | "ActionsBarValue" | "WorldMap") => {
                true
            }
            Some(d) => {
                return Err(bad(format!(
                    "trendsFilter.display '{d}' is not supported; use ActionsLineGraph, ActionsBar, \
                     ActionsAreaGraph, ActionsLineGraphCumulative, BoldNumber, ActionsPie, \
                     ActionsTable, ActionsBarValue or WorldMap"
                )));
            }
        };
        let formulas = formulas_of(q.get("trendsFilter"), series.len())?;
        let interval = Interval::parse(q.get("interval"))?;
        let by_cohort = q
            .get("breakdownFilter")
            .and_then(|f| f.get("breakdown_type"))
            .and_then(Value::as_str)
            == Some("cohort");
        let (breakdown, cohorts) = match by_cohort {
            false => (breakdown_of(q)?, Vec::new()),
            true => {
                let picks = match q.get("breakdownFilter").and_then(|f| f.get("breakdown")) {
                    Some(Value::Array(a)) if !a.is_empty() => a
                        .iter()
                        .map(CohortPick::parse)
                        .collect::<Result<Vec<_>, _>>()?,
                    Some(v) if !v.is_null() && !v.is_array() => vec![CohortPick::parse(v)?],
                    _ => {
                        return Err(bad(
                            "a cohort breakdown needs breakdown: cohort ids or 'all'",
                        ));
                    }
                };
                (None, picks)
            }
        };
        for s in &series {
            if s.active_days.is_some() {
                if interval != Interval::Day || aggregate {
                    return Err(bad(
                        "weekly_active and monthly_active need interval day and a graph display",
                    ));
                }
                if breakdown.is_some() {
                    return Err(bad(
                        "weekly_active and monthly_active with a breakdown are not supported yet",
                    ));
                }
            }
        }
        Ok(Trends {
            series,
            interval,
            date_range: q.get("dateRange").filter(|v| !v.is_null()).cloned(),
            properties: q.get("properties").filter(|v| !v.is_null()).cloned(),
            breakdown,
            compare: q
                .get("compareFilter")
                .and_then(|c| c.get("compare"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            cohorts,
            compare_to: match q.get("compareFilter").and_then(|c| c.get("compare_to")) {
                None | Some(Value::Null) => None,
                Some(Value::String(t)) if t.is_empty() => None,
                Some(Value::String(t)) => Some(Shift::parse(t)?),
                Some(other) => {
                    return Err(bad(format!(
                        "compareFilter.compare_to must be a relative date like -1w, got {other}"
                    )));
                }
            },
            aggregate,
            formulas,
            smoothing: match q
                .get("trendsFilter")
                .and_then(|f| f.get("smoothingIntervals"))
            {
                None | Some(Value::Null) => 1,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| bad("smoothingIntervals must be 1 to 1000"))?
                    as usize,
            },
        })
    }

    /// This trend restricted to one cohort of its cohort breakdown (no breakdown left).
    pub fn in_cohort(&self, pick: CohortPick) -> Trends {
        let mut t = self.clone();
        t.cohorts = Vec::new();
        if let CohortPick::Id(id) = pick {
            let f = json!({"type": "cohort", "key": "id", "value": id});
            t.properties = Some(match t.properties.take() {
                None => json!([f]),
                Some(Value::Array(mut a)) => {
                    a.push(f);
                    Value::Array(a)
                }
                Some(group) => {
                    json!({"type": "AND", "values": [group, {"type": "AND", "values": [f]}]})
                }
            });
        }
        t
    }

    /// The condition of one series' events in `p`.
    pub fn where_of(
        &self,
        s: &Series,
        p: &Period,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let lit = super::dates::instant_literal;
        let mut parts = vec![
            format!("timestamp >= {}", lit(p.from)),
            format!("timestamp <= {}", lit(p.to)),
        ];
        if let Some(e) = &s.event {
            parts.push(format!("event = {}", quote(e)));
        }
        for props in [
            self.properties.as_ref(),
            s.node.get("properties"),
            s.node.get("fixedProperties"),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(c) = properties_expr(props, cx)? {
                parts.push(format!("({c})"));
            }
        }
        Ok(parts.join(" AND "))
    }

    /// The query of a series' top breakdown values in `p` (one more than shown, to know
    /// whether there are others).
    pub fn top_values_query(
        &self,
        s: &Series,
        p: &Period,
        cx: &FilterContext,
    ) -> Option<Result<String, FilterError>> {
        let b = self.breakdown.as_ref()?;
        Some(self.where_of(s, p, cx).map(|w| {
            format!(
                "SELECT {} AS value, {} AS m FROM events WHERE {w} GROUP BY value ORDER BY m DESC, value ASC LIMIT {}",
                b.value,
                s.math,
                b.limit + 1
            )
        }))
    }

    /// The query of a series in `p`: bucket (as local text), breakdown value, total.
    /// `top` is the breakdown values shown (the others are grouped as other).
    pub fn series_query(
        &self,
        s: &Series,
        p: &Period,
        top: &[String],
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        if let Some(n) = s.active_days {
            // Each person's active days, from n - 1 days before the range; each counts
            // for the n days that end with it.
            let wider = Period {
                from: p.from - Duration::days(n - 1),
                to: p.to,
                buckets: Vec::new(),
            };
            let lit = super::dates::instant_literal;
            let w = self.where_of(s, &wider, cx)?;
            return Ok(format!(
                "SELECT formatDateTime(b, '%Y-%m-%d %H:%i:%S') AS bucket, total FROM (\
                 SELECT toStartOfDay(addDays(day, o)) AS b, count(DISTINCT person_id) AS total \
                 FROM (SELECT person_id, toStartOfDay(timestamp) AS day FROM events WHERE {w} \
                 GROUP BY person_id, day) ARRAY JOIN range(0, {n}) AS o \
                 WHERE addDays(day, o) >= {} AND addDays(day, o) <= {} GROUP BY b)",
                lit(p.from),
                lit(p.to)
            ));
        }
        let w = self.where_of(s, p, cx)?;
        // Grouped by the bucket's start and formatted after: formatting every event's
        // bucket as text cost twice the aggregation itself.
        let (bucket, outer) = match self.aggregate {
            true => ("''".to_string(), "b"),
            false => (
                self.interval.start_fn().to_string(),
                "formatDateTime(b, '%Y-%m-%d %H:%i:%S')",
            ),
        };
        Ok(match &self.breakdown {
            None => format!(
                "SELECT {outer} AS bucket, total FROM (\
                 SELECT {bucket} AS b, {} AS total FROM events WHERE {w} GROUP BY b)",
                s.math
            ),
            Some(b) => {
                let shown = top.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ");
                let value = match top.is_empty() {
                    true => quote(BREAKDOWN_OTHER),
                    false => format!(
                        "if({} IN ({shown}), {}, {})",
                        b.value,
                        b.value,
                        quote(BREAKDOWN_OTHER)
                    ),
                };
                format!(
                    "SELECT {outer} AS bucket, breakdown_value, total FROM (\
                     SELECT {bucket} AS b, {value} AS breakdown_value, {} AS total \
                     FROM events WHERE {w} GROUP BY b, breakdown_value)",
                    s.math
                )
            }
        })
    }
}

/// One formula of a trend: what it computes, its text and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct FormulaNode {
    pub formula: Formula,
    pub text: String,
    pub custom_name: Option<String>,
}

/// A trend's formulas: `formulaNodes` (`[{formula, custom_name}]`), else `formulas` (texts),
/// else `formula`; empty texts are skipped, as PostHog's editor leaves them.
fn formulas_of(f: Option<&Value>, series: usize) -> Result<Vec<FormulaNode>, FilterError> {
    let Some(f) = f.filter(|f| !f.is_null()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut add = |text: &str, name: Option<String>| -> Result<(), FilterError> {
        if !text.trim().is_empty() {
            out.push(FormulaNode {
                formula: Formula::parse(text, series)?,
                text: text.to_string(),
                custom_name: name,
            });
        }
        Ok(())
    };
    let list = |k: &str| match f.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if a.is_empty() => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a.clone())),
        Some(other) => Err(bad(format!("trendsFilter.{k} must be a list, got {other}"))),
    };
    if let Some(nodes) = list("formulaNodes")? {
        for n in nodes {
            let text = n
                .get("formula")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("each of trendsFilter.formulaNodes needs formula, the text"))?;
            let name = n
                .get("custom_name")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            add(text, name)?;
        }
    } else if let Some(texts) = list("formulas")? {
        for t in texts {
            let text = t
                .as_str()
                .ok_or_else(|| bad("trendsFilter.formulas must be a list of text"))?;
            add(text, None)?;
        }
    } else {
        match f.get("formula") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => add(text, None)?,
            Some(other) => {
                return Err(bad(format!(
                    "trendsFilter.formula must be text, got {other}"
                )));
            }
        }
    }
    Ok(out)
}

/// `trendsFilter.formula`: arithmetic (`+ - * /`, parentheses, numbers) over the series,
/// `A` the first; evaluated per bucket. A division by zero is 0, as PostHog shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Formula {
    Number(f64),
    Series(usize),
    Neg(Box<Formula>),
    Op(char, Box<Formula>, Box<Formula>),
}

/// Deepest nesting a formula may have.
const MAX_FORMULA_DEPTH: usize = 64;

impl Formula {
    pub fn parse(text: &str, series: usize) -> Result<Self, FilterError> {
        let chars: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
        let mut at = 0;
        let f = Self::sum(&chars, &mut at, series, 0)?;
        if at != chars.len() {
            return Err(bad(format!("formula '{text}': unexpected '{}'", chars[at])));
        }
        Ok(f)
    }

    fn sum(c: &[char], at: &mut usize, n: usize, depth: usize) -> Result<Self, FilterError> {
        let mut left = Self::product(c, at, n, depth)?;
        while let Some(&op @ ('+' | '-')) = c.get(*at) {
            *at += 1;
            let right = Self::product(c, at, n, depth)?;
            left = Formula::Op(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn product(c: &[char], at: &mut usize, n: usize, depth: usize) -> Result<Self, FilterError> {
        let mut left = Self::atom(c, at, n, depth)?;
        while let Some(&op @ ('*' | '/')) = c.get(*at) {
            *at += 1;
            let right = Self::atom(c, at, n, depth)?;
            left = Formula::Op(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn atom(c: &[char], at: &mut usize, n: usize, depth: usize) -> Result<Self, FilterError> {
        if depth > MAX_FORMULA_DEPTH {
            return Err(bad("the formula nests too deep"));
        }
        match c.get(*at) {
            Some('(') => {
                *at += 1;
                let f = Self::sum(c, at, n, depth + 1)?;
                if c.get(*at) != Some(&')') {
                    return Err(bad("the formula misses a ')'"));
                }
                *at += 1;
                Ok(f)
            }
            Some('-') => {
                *at += 1;
                Ok(Formula::Neg(Box::new(Self::atom(c, at, n, depth + 1)?)))
            }
            Some(l) if l.is_ascii_alphabetic() => {
                let i = (l.to_ascii_uppercase() as u8 - b'A') as usize;
                *at += 1;
                if i >= n {
                    return Err(bad(format!(
                        "the formula names series {l}, and there are {n}"
                    )));
                }
                Ok(Formula::Series(i))
            }
            Some(d) if d.is_ascii_digit() || *d == '.' => {
                let start = *at;
                while c.get(*at).is_some_and(|x| x.is_ascii_digit() || *x == '.') {
                    *at += 1;
                }
                let text: String = c[start..*at].iter().collect();
                text.parse()
                    .map(Formula::Number)
                    .map_err(|_| bad(format!("'{text}' in the formula is not a number")))
            }
            Some(other) => Err(bad(format!("unexpected '{other}' in the formula"))),
            None => Err(bad("the formula ends early")),
        }
    }

    /// The value with `values[i]` for series `i`.
    pub fn eval(&self, values: &[f64]) -> f64 {
        let v = match self {
            Formula::Number(x) => *x,
            Formula::Series(i) => values.get(*i).copied().unwrap_or(0.0),
            Formula::Neg(f) => -f.eval(values),
            Formula::Op(op, a, b) => {
                let (a, b) = (a.eval(values), b.eval(values));
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => a / b,
                }
            }
        };
        if v.is_finite() { v } else { 0.0 }
    }
}

/// Series results (as [`shape_series`] made them, `order` in `action`) combined by the
/// formula: one result per compare period and breakdown value, labelled `Formula (…)` (or
/// the formula's name); with several formulas, each one's results in turn.
pub fn apply_formulas(t: &Trends, results: Vec<Value>) -> Vec<Value> {
    if t.formulas.is_empty() {
        return results;
    }
    t.formulas
        .iter()
        .enumerate()
        .flat_map(|(i, f)| apply_formula(t, f, i, &results))
        .collect()
}

fn apply_formula(t: &Trends, node: &FormulaNode, index: usize, results: &[Value]) -> Vec<Value> {
    let (f, text) = (&node.formula, &node.text);
    let key = |r: &Value| {
        (
            r.get("compare_label")
                .cloned()
                .unwrap_or(Value::Null)
                .to_string(),
            r.get("breakdown_value")
                .cloned()
                .unwrap_or(Value::Null)
                .to_string(),
        )
    };
    let field = if t.aggregate {
        "aggregated_value"
    } else {
        "data"
    };
    let mut groups: Vec<((String, String), Vec<Value>)> = Vec::new();
    for r in results.iter().cloned() {
        let k = key(&r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    let mut out = Vec::new();
    for (_, members) in groups {
        let mut base = members[0].clone();
        let width = base[field].as_array().map_or(1, Vec::len);
        let series_value = |i: usize, slot: usize| -> f64 {
            members
                .iter()
                .find(|m| m["action"]["order"].as_u64() == Some(i as u64))
                .map_or(0.0, |m| match &m[field] {
                    Value::Array(a) => a.get(slot).map_or(0.0, number),
                    v => number(v),
                })
        };
        let computed: Vec<f64> = (0..width)
            .map(|slot| {
                let values: Vec<f64> = (0..t.series.len()).map(|i| series_value(i, slot)).collect();
                f.eval(&values)
            })
            .collect();
        match t.aggregate {
            true => base["aggregated_value"] = json_number(computed.iter().sum()),
            false => {
                base["count"] = json!(computed.iter().sum::<f64>());
                base["data"] = json!(computed.into_iter().map(json_number).collect::<Vec<_>>());
            }
        }
        let label = node
            .custom_name
            .clone()
            .unwrap_or_else(|| format!("Formula ({text})"));
        let shown = match base.get("breakdown_value") {
            Some(Value::String(v)) => Some(v.clone()),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join("::"),
            ),
            _ => None,
        };
        base["label"] = json!(match shown {
            Some(v) => format!("{label} - {v}"),
            None => label,
        });
        base["action"] = Value::Null;
        if t.formulas.len() > 1 {
            base["formula_index"] = json!(index);
        }
        out.push(base);
    }
    out
}

/// Smooths each result's `data` (after formulas): the mean of each value and the n − 1
/// before it; `count` stays the sum of what is shown.
pub fn smooth(t: &Trends, results: &mut [Value]) {
    let n = t.smoothing;
    if n <= 1 || t.aggregate {
        return;
    }
    for r in results.iter_mut() {
        let Some(d) = r["data"].as_array() else {
            continue;
        };
        let d: Vec<f64> = d.iter().map(number).collect();
        let smoothed: Vec<f64> = (0..d.len())
            .map(|i| {
                let from = (i + 1).saturating_sub(n);
                let w = &d[from..=i];
                w.iter().sum::<f64>() / w.len() as f64
            })
            .collect();
        r["count"] = json!(smoothed.iter().sum::<f64>());
        r["data"] = json!(smoothed.into_iter().map(json_number).collect::<Vec<_>>());
    }
}

/// A number of a result row as JSON (integers stay integers).
fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn json_number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// PostHog's label of a bucket: `1-Jan-2024`, with the time for hourly buckets.
pub(super) fn label(b: NaiveDateTime, interval: Interval) -> String {
    match interval {
        Interval::Hour => b.format("%-d-%b-%Y %H:%M").to_string(),
        _ => b.format("%-d-%b-%Y").to_string(),
    }
}

pub(super) fn day(b: NaiveDateTime, interval: Interval) -> String {
    match interval {
        Interval::Hour => b.format("%Y-%m-%d %H:%M:%S").to_string(),
        _ => b.format("%Y-%m-%d").to_string(),
    }
}

/// One series' result objects from its rows (`[bucket, total]`, or `[bucket, breakdown
/// value, total]`), in PostHog's shape, every bucket of `p` present.
#[allow(clippy::too_many_arguments)]
pub fn shape_series(
    t: &Trends,
    index: usize,
    p: &Period,
    rows: &[Value],
    top: &[String],
    compare_label: Option<&str>,
    cx: &FilterContext,
) -> Vec<Value> {
    let s = &t.series[index];
    let position: std::collections::HashMap<String, usize> = p
        .buckets
        .iter()
        .enumerate()
        .map(|(i, b)| (b.format("%Y-%m-%d %H:%M:%S").to_string(), i))
        .collect();
    // Breakdown value → data, in the order values were found (top first).
    let mut by_value: Vec<(Option<String>, Vec<f64>)> = Vec::new();
    if t.breakdown.is_none() {
        by_value.push((None, vec![0.0; p.buckets.len()]));
    } else {
        for v in top {
            by_value.push((Some(v.clone()), vec![0.0; p.buckets.len()]));
        }
    }
    // One value per series (and breakdown value) when the display aggregates.
    let slots = if t.aggregate { 1 } else { p.buckets.len() };
    for (_, d) in by_value.iter_mut() {
        d.resize(slots, 0.0);
    }
    for r in rows {
        let Some(cells) = r.as_array() else { continue };
        let bucket = cells.first().and_then(Value::as_str).unwrap_or("");
        let at = match t.aggregate {
            true => 0,
            false => match position.get(bucket) {
                Some(&at) => at,
                None => continue,
            },
        };
        let (value, total) = match t.breakdown {
            None => (None, cells.get(1)),
            Some(_) => (
                cells.get(1).and_then(Value::as_str).map(str::to_owned),
                cells.get(2),
            ),
        };
        let total = total.map_or(0.0, number);
        let slot = match by_value.iter().position(|(v, _)| *v == value) {
            Some(i) => i,
            None => {
                by_value.push((value, vec![0.0; slots]));
                by_value.len() - 1
            }
        };
        by_value[slot].1[at] += total;
    }
    let name = s.event.clone();
    let days: Vec<String> = p.buckets.iter().map(|b| day(*b, t.interval)).collect();
    let labels: Vec<String> = p.buckets.iter().map(|b| label(*b, t.interval)).collect();
    let filter = json!({
        "insight": "TRENDS",
        "interval": t.interval.name(),
        "date_from": p.from.with_timezone(&cx.timezone).to_rfc3339(),
        "date_to": p.to.with_timezone(&cx.timezone).to_rfc3339(),
    });
    let mut out = Vec::new();
    for (value, data) in by_value {
        if let (Some(v), Some(b)) = (&value, &t.breakdown)
            && v == BREAKDOWN_OTHER
            && b.hide_other
        {
            continue;
        }
        let count: f64 = data.iter().sum();
        let base_label = name.clone().unwrap_or_else(|| "All events".into());
        let mut o = json!({
            "data": data.iter().map(|x| json_number(*x)).collect::<Vec<_>>(),
            "labels": labels,
            "days": days,
            "count": count,
            "label": base_label,
            "filter": filter,
            "action": {
                "days": days,
                "id": name,
                "type": "events",
                "order": index,
                "name": name.clone().unwrap_or_else(|| "All events".into()),
                "custom_name": s.node.get("custom_name").cloned().unwrap_or(Value::Null),
                "math": s.node.get("math").cloned().unwrap_or(json!("total")),
                "math_property": s.node.get("math_property").cloned().unwrap_or(Value::Null),
                "math_hogql": s.node.get("math_hogql").cloned().unwrap_or(Value::Null),
                "math_group_type_index": s.node.get("math_group_type_index").cloned().unwrap_or(Value::Null),
                "properties": {},
            },
        });
        if t.aggregate {
            o["aggregated_value"] = json_number(data.first().copied().unwrap_or(0.0));
            o["data"] = json!([]);
            o["labels"] = json!([]);
            o["count"] = json!(0);
        }
        if let (Some(v), Some(b)) = (value, &t.breakdown) {
            let v_label = v.replace(BREAKDOWN_JOIN, "::");
            o["label"] = json!(match t.series.len() {
                1 => v_label,
                _ => format!("{base_label} - {v_label}"),
            });
            o["breakdown_value"] = b.shown(&v);
        }
        if let Some(c) = compare_label {
            o["compare"] = json!(true);
            o["compare_label"] = json!(c);
        }
        out.push(o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insights::test_cx as cx;

    #[test]
    fn periods_are_posthogs() {
        // Now: 2024-03-31 12:00 UTC. -7d by day: 24 March 00:00 to 31 March 23:59:59.999999,
        // eight buckets.
        let p = resolve_period(None, Interval::Day, &cx(), None).unwrap();
        assert_eq!(p.buckets.len(), 8);
        assert_eq!(p.from.to_rfc3339(), "2024-03-24T00:00:00+00:00");
        assert_eq!(p.to.to_rfc3339(), "2024-03-31T23:59:59.999999+00:00");
        let prev = previous_period(&p, Interval::Day, chrono_tz::UTC).unwrap();
        assert_eq!(prev.buckets.len(), 8);
        assert_eq!(prev.to.to_rfc3339(), "2024-03-23T23:59:59.999999+00:00");
        // compare_to: a week back, the same eight days; a month back by the calendar (the
        // end clamps to 29 February, as PostHog's relativedelta does).
        let shift = |to: &str| {
            Trends::from_value(&json!({"series": [{}],
                "compareFilter": {"compare": true, "compare_to": to}}))
            .unwrap()
            .compare_to
            .unwrap()
        };
        let back = shifted_period(&p, Interval::Day, chrono_tz::UTC, shift("-1w")).unwrap();
        assert_eq!(back.buckets.len(), 8);
        assert_eq!(back.from.to_rfc3339(), "2024-03-17T00:00:00+00:00");
        let back = shifted_period(&p, Interval::Day, chrono_tz::UTC, shift("-1m")).unwrap();
        assert_eq!(back.from.to_rfc3339(), "2024-02-24T00:00:00+00:00");
        assert_eq!(back.to.to_rfc3339(), "2024-02-29T23:59:59.999999+00:00");
        for bad_to in ["1w", "-w", "-2x", "-0d"] {
            let e = Trends::from_value(
                &json!({"series": [{}], "compareFilter": {"compare_to": bad_to}}),
            )
            .unwrap_err();
            assert!(e.0.contains("compare_to"), "{bad_to}: {e}");
        }
        // Weeks start on Sunday; 31 March 2024 is one.
        let w = resolve_period(
            Some(&json!({"date_from": "-14d"})),
            Interval::Week,
            &cx(),
            None,
        )
        .unwrap();
        assert_eq!(w.buckets.len(), 3);
        assert_eq!(w.from.to_rfc3339(), "2024-03-17T00:00:00+00:00");
        let m = resolve_period(
            Some(&json!({"date_from": "2024-01-15", "date_to": "2024-03-01"})),
            Interval::Month,
            &cx(),
            None,
        )
        .unwrap();
        assert_eq!(m.buckets.len(), 3);
        let h = resolve_period(
            Some(&json!({"date_from": "-2h", "explicitDate": true})),
            Interval::Hour,
            &cx(),
            None,
        )
        .unwrap();
        assert_eq!(h.from.to_rfc3339(), "2024-03-31T10:00:00+00:00");
        assert_eq!(h.buckets.len(), 3);
        let e = resolve_period(
            Some(&json!({"date_from": "-20y"})),
            Interval::Hour,
            &cx(),
            None,
        )
        .unwrap_err();
        assert!(e.0.contains("more than"), "{e}");
    }

    #[test]
    fn nodes_are_read_and_what_is_not_computed_is_refused() {
        let t = Trends::from_value(&json!({"kind": "TrendsQuery", "series": [
            {"kind": "EventsNode", "event": "$pageview", "math": "dau"},
            {"kind": "EventsNode", "event": "buy", "math": "sum", "math_property": "total", "math_multiplier": 0.01},
        ], "interval": "week", "breakdownFilter": {"breakdown": "$browser", "breakdown_limit": 3}}))
        .unwrap();
        assert_eq!(t.series[0].math, "count(DISTINCT person_id)");
        assert_eq!(
            t.series[1].math,
            "(sum(toFloat(properties['total']))) * 0.01"
        );
        assert_eq!(t.breakdown.as_ref().unwrap().limit, 3);
        for (q, says) in [
            (json!({"series": []}), "needs series"),
            (
                json!({"series": [{"math": "daily_active"}]}),
                "not supported",
            ),
            (
                json!({"series": [{"math": "weekly_active"}], "interval": "week"}),
                "interval day",
            ),
            (json!({"series": [{"math": "sum"}]}), "needs math_property"),
            (
                json!({"series": [{}], "trendsFilter": {"formula": "A+B"}}),
                "there are 1",
            ),
            (
                json!({"series": [{}], "trendsFilter": {"formula": "A+"}}),
                "ends early",
            ),
            (
                json!({"series": [{}], "trendsFilter": {"formulas": "A"}}),
                "formulas must be a list",
            ),
            (
                json!({"series": [{}], "trendsFilter": {"formulaNodes": [{"formula": "B"}]}}),
                "there are 1",
            ),
            (
                json!({"series": [{}], "trendsFilter": {"smoothingIntervals": "a"}}),
                "smoothingIntervals",
            ),
            (
                json!({"series": [{}], "trendsFilter": {"display": "ActionsStackedBar"}}),
                "ActionsStackedBar",
            ),
            (json!({"series": [{}], "interval": "minute"}), "interval"),
            (
                json!({"series": [{"kind": "ActionsNode", "id": 1}]}),
                "ActionsNode",
            ),
            (
                json!({"series": [{}], "breakdownFilter": {"breakdown": "x", "breakdown_type": "cohort"}}),
                "cohort",
            ),
        ] {
            let e = Trends::from_value(&q).unwrap_err();
            assert!(e.0.contains(says), "{q}: {e}");
        }
    }

    #[test]
    fn smoothing_is_a_trailing_mean() {
        let t =
            Trends::from_value(&json!({"series": [{}], "trendsFilter": {"smoothingIntervals": 2}}))
                .unwrap();
        let mut r = vec![json!({"data": [2, 4, 6, 1], "count": 13})];
        smooth(&t, &mut r);
        assert_eq!(r[0]["data"], json!([2, 3, 5, 3.5]));
        assert!(
            Trends::from_value(&json!({"series": [{}], "trendsFilter": {"smoothingIntervals": 0}}))
                .is_err()
        );
    }

    #[test]
    fn formulas_are_arithmetic_over_the_series() {
        let f = Formula::parse("(A + B) * 2 - c / 4", 3).unwrap();
        assert_eq!(f.eval(&[1.0, 2.0, 8.0]), 4.0);
        assert_eq!(Formula::parse("A/B", 2).unwrap().eval(&[1.0, 0.0]), 0.0);
        assert_eq!(Formula::parse("-A + 0.5", 1).unwrap().eval(&[2.0]), -1.5);
        let deep = format!("{}A{}", "(".repeat(100), ")".repeat(100));
        assert!(Formula::parse(&deep, 1).is_err());
        assert!(Formula::parse("A B", 2).is_err());
        assert!(Formula::parse("1..2", 1).is_err());
    }

    #[test]
    fn several_formulas_each_give_their_results_in_turn() {
        let t = Trends::from_value(&json!({"series": [{"event": "a"}, {"event": "b"}],
            "trendsFilter": {"formulaNodes": [{"formula": "A+B", "custom_name": "Both"},
                                               {"formula": "A/B"}, {"formula": " "}]}}))
        .unwrap();
        assert_eq!(t.formulas.len(), 2, "the empty one is skipped");
        let series = |order: u64, data: Vec<f64>| json!({"action": {"order": order}, "data": data, "label": "x", "count": 0});
        let out = apply_formulas(
            &t,
            vec![series(0, vec![2.0, 4.0]), series(1, vec![1.0, 2.0])],
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            (&out[0]["label"], &out[0]["data"]),
            (&json!("Both"), &json!([3, 6]))
        );
        assert_eq!(
            (&out[1]["label"], &out[1]["data"], &out[1]["formula_index"]),
            (&json!("Formula (A/B)"), &json!([2, 2]), &json!(1))
        );
        // `formulas` (texts) as well.
        let t = Trends::from_value(&json!({"series": [{"event": "a"}],
            "trendsFilter": {"formulas": ["A*2", "A+1"]}}))
        .unwrap();
        assert_eq!(t.formulas.len(), 2);
    }

    #[test]
    fn rows_become_series_with_every_bucket() {
        let t = Trends::from_value(&json!({"series": [{"event": "e"}],
            "breakdownFilter": {"breakdown": "b", "breakdown_limit": 1}}))
        .unwrap();
        let p = resolve_period(
            Some(&json!({"date_from": "-2d"})),
            Interval::Day,
            &cx(),
            None,
        )
        .unwrap();
        let q = t
            .series_query(&t.series[0], &p, &["x".into()], &cx())
            .unwrap();
        crate::hogql::parser::parse_query(&q).unwrap();
        let rows = vec![
            json!(["2024-03-29 00:00:00", "x", 2]),
            json!(["2024-03-31 00:00:00", "x", 1]),
            json!(["2024-03-30 00:00:00", BREAKDOWN_OTHER, 5]),
        ];
        let s = shape_series(&t, 0, &p, &rows, &["x".into()], None, &cx());
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["data"], json!([2, 0, 1]));
        assert_eq!(s[0]["breakdown_value"], "x");
        assert_eq!(
            s[0]["labels"],
            json!(["29-Mar-2024", "30-Mar-2024", "31-Mar-2024"])
        );
        assert_eq!(
            s[0]["days"],
            json!(["2024-03-29", "2024-03-30", "2024-03-31"])
        );
        assert_eq!(s[1]["data"], json!([0, 5, 0]));
        assert_eq!(s[1]["count"], 5.0);
    }
}

/// The persons of series `s` in the bucket holding `day` (the whole range without one), of
/// one breakdown value when given (not "other", whose members depend on the ranking).
pub fn actors_query(
    t: &Trends,
    s: &Series,
    p: &Period,
    day: Option<&str>,
    breakdown: Option<&Value>,
    cx: &FilterContext,
) -> Result<String, FilterError> {
    let period = match day {
        None => p.clone(),
        Some(d) => {
            let at = dates::parse_date(d, cx.timezone, cx.now)?;
            let start = t.interval.floor(local(at, cx.timezone));
            let end = t.interval.next(start);
            Period {
                from: instant(start, cx.timezone),
                to: instant(end, cx.timezone) - Duration::microseconds(1),
                buckets: vec![start],
            }
        }
    };
    // A cohort breakdown's value is a cohort: its members' condition replaces the value's.
    let in_cohort;
    let (t, breakdown) = match (breakdown.filter(|v| !v.is_null()), t.cohorts.is_empty()) {
        (Some(v), false) => {
            let pick = CohortPick::parse(v)?;
            if !t.cohorts.contains(&pick) {
                return Err(bad(format!("the breakdown has no cohort {v}")));
            }
            in_cohort = t.in_cohort(pick);
            (&in_cohort, None)
        }
        (b, _) => (t, b),
    };
    let mut w = t.where_of(s, &period, cx)?;
    match (breakdown, &t.breakdown) {
        (None, _) => {}
        (Some(_), None) => return Err(bad("the insight has no breakdown")),
        (Some(v), Some(b)) => {
            let v = b.key_of(v);
            if v == BREAKDOWN_OTHER {
                return Err(bad(
                    "the persons of the other breakdown values are not listed yet",
                ));
            }
            w = format!("{w} AND {} = {}", b.value, quote(&v));
        }
    }
    Ok(format!("SELECT DISTINCT person_id FROM events WHERE {w}"))
}

/// PostHog's `StickinessQuery`, compiled with the trends machinery: per series, how many
/// persons did the event in exactly 1, 2, … n of the range's intervals.
pub mod stickiness {
    use super::*;

    /// The query of `[intervals active, persons]` for series `s` of `t` in `p`.
    pub fn query(
        t: &Trends,
        s: &Series,
        p: &Period,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let w = t.where_of(s, p, cx)?;
        Ok(format!(
            "SELECT n, count() FROM (SELECT person_id, count(DISTINCT {}) AS n FROM events \
             WHERE {w} GROUP BY person_id) GROUP BY n",
            t.interval.start_fn()
        ))
    }

    /// The persons of series `s` active in exactly `k` intervals of `p`.
    pub fn persons_query(
        t: &Trends,
        s: &Series,
        p: &Period,
        k: i64,
        cx: &FilterContext,
    ) -> Result<String, FilterError> {
        let w = t.where_of(s, p, cx)?;
        Ok(format!(
            "SELECT person_id FROM (SELECT person_id, count(DISTINCT {}) AS n FROM events \
             WHERE {w} GROUP BY person_id) WHERE n = {k}",
            t.interval.start_fn()
        ))
    }

    /// One series object: `data[k - 1]` the persons active in exactly `k` intervals.
    pub fn shape(t: &Trends, index: usize, p: &Period, rows: &[Value]) -> Value {
        let n = p.buckets.len();
        let mut data = vec![0i64; n];
        for r in rows {
            let k = r.get(0).and_then(Value::as_i64).unwrap_or(0);
            let persons = r.get(1).and_then(Value::as_i64).unwrap_or(0);
            if (1..=n as i64).contains(&k) {
                data[k as usize - 1] += persons;
            }
        }
        let s = &t.series[index];
        let unit = t.interval.name();
        let name = s.event.clone();
        json!({
            "data": data,
            "count": data.iter().sum::<i64>() as f64,
            "days": (1..=n).collect::<Vec<_>>(),
            "labels": (1..=n).map(|k| format!("{k} {unit}{}", if k == 1 { "" } else { "s" })).collect::<Vec<_>>(),
            "label": name.clone().unwrap_or_else(|| "All events".into()),
            "action": {
                "id": name,
                "type": "events",
                "order": index,
                "name": name.clone().unwrap_or_else(|| "All events".into()),
                "custom_name": s.node.get("custom_name").cloned().unwrap_or(Value::Null),
                "math": "total",
                "properties": {},
            },
        })
    }
}
