//! `hedgerowFunnel(window, 'ordered' | 'strict' | 'unordered', steps[, optional])(timestamp,
//! step conditions…, exclusion conditions…)`: the per-person half of PostHog's funnels, which
//! ClickHouse answers with PostHog's own `aggregate_funnel` UDF and plain ClickHouse cannot.
//! Not in PostHog's HogQL function list: the `FunnelsQuery` compiler calls it, and HogQL users
//! may too.
//!
//! Arguments: the event time, one condition per step (`steps` of them), and optionally one
//! exclusion condition per step after the first (`steps − 1`: the i-th holds for an event that
//! must not come between step i−1 and step i). The answer is a tuple: `.1` the furthest step
//! reached, 0-based (−1: the first step never happened, or the best path crossed an
//! exclusion, and PostHog then leaves the person out), `.2` the seconds between consecutive
//! steps of that path (`.2[1]` from the first step to the second), `.3` and `.4` the times
//! of its first and its last step (NULL without a path), `.5` the steps the path holds (bit
//! k: 0-based step k).
//!
//! `optional` (ordered and strict funnels) is a bit mask of the steps that may be skipped
//! (bit k: 0-based step k; never the first), as PostHog's `optionalInFunnel`: a step's event
//! may follow the closest step before it that the path holds, going back over optional steps
//! it does not hold (or holds outside the window); an optional step adds no time to the
//! path (`.2` spans the required steps only); `.1` then counts the required steps only
//! (the furthest step less the optional steps up to it), and `.5` tells which steps the path
//! holds.
//!
//! `hedgerowFunnelTrends(window, order, steps, from_step)(timestamp, bucket, conditions…)`
//! answers funnel trends instead: per time bucket (`bucket`, the start of the event's
//! interval) in which the person did the first step, `(bucket, 1)` when an entry of that
//! bucket reached the last step within the window and `(bucket, −1)` when it reached step
//! `from_step` (0-based) or further but not the last; a list, buckets ascending.
//!
//! The rules, as PostHog's funnels behave:
//! - **ordered**: events in time order; each step-1 event starts a path; a step-k event moves
//!   a path that reached step k−1 to step k if it is within `window` seconds of the path's
//!   start (inclusive). A path that reached step k−1 is not moved again by another event of
//!   the same start. Events at the same instant that match different steps are tried step by
//!   step, lowest first, and one event moves a path at most one step (exclusions are not
//!   applied among them, as in PostHog).
//! - **strict**: as ordered, but any event that does not match step k breaks every path
//!   waiting for step k (the query gives it every event of the person, not only steps).
//! - **unordered**: the steps may come in any order: the most distinct steps whose events
//!   fall within one window; an event matching several steps counts for the one whose last
//!   event is oldest. A path is excluded when an exclusion event falls between its first and
//!   its last event (PostHog allows only whole-funnel exclusions in unordered funnels).
//! - An exclusion event between step k−1 and step k of a path within the window marks the
//!   path excluded; the person is left out when their furthest path is excluded and no clean
//!   path goes as far.

use super::groups::{GroupStates, HeapSize};
use super::{FnContext, FunctionError, literal_i64, to_predicate, type_of};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int8Array, Int64Array, ListArray,
    StructArray, UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Fields, Int64Type, TimeUnit, UInt32Type,
};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, Expr, GroupsAccumulator, Signature,
    Volatility, cast,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Most steps a funnel may have (the step and exclusion sets are bit masks).
pub(super) const MAX_STEPS: usize = 31;

/// How the steps must follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Order {
    Ordered,
    Strict,
    Unordered,
}

/// One event: its time (in the argument's unit), the steps it matches (bit k: step k,
/// 0-based) and the exclusions it matches (bit k: between step k−1 and step k).
type Event = (i64, u32, u32);

/// An event as the accumulators keep it: [`Event`] and the start of its time bucket (funnel
/// trends; 0 otherwise).
type Stored = (i64, u32, u32, i64);

/// What one person's events answer: the furthest step (0-based, −1 none or excluded) and
/// the time of each step of its path, in the argument's unit.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Outcome {
    pub(super) level: i8,
    pub(super) times: Vec<i64>,
    /// The steps the path holds (bit k: 0-based step k).
    pub(super) bits: u32,
}

impl Outcome {
    fn gaps(&self) -> impl Iterator<Item = i64> + '_ {
        self.times.windows(2).map(|w| w[1] - w[0])
    }
}

/// A path being followed: when its first step happened, whether an exclusion broke it, the
/// time of each step reached and the events (indexes into the sorted list) it used.
#[derive(Debug, Clone, Default)]
struct Path {
    start: Option<i64>,
    excluded: bool,
    times: Vec<i64>,
    used: Vec<usize>,
    /// The steps the path holds (bit k: 0-based step k).
    bits: u32,
}

/// The answer for `events` (sorted here) of a funnel of `steps` steps, `optional` the steps
/// that may be skipped (bit k: 0-based step k; ordered and strict funnels).
pub(super) fn evaluate(
    events: &mut [Event],
    window: i64,
    steps: usize,
    order: Order,
    optional: u32,
) -> Outcome {
    events.sort_unstable();
    let (reached, best) = match order {
        Order::Unordered => {
            let (reached, mut best) = unordered(events, window, steps);
            best.bits = (1u32 << reached) - 1;
            (reached, best)
        }
        _ => ordered(events, window, steps, order == Order::Strict, optional),
    };
    if best.excluded || reached == 0 {
        return Outcome {
            level: -1,
            times: vec![],
            bits: 0,
        };
    }
    let skippable_before = (optional & ((1u32 << reached) - 1)).count_ones() as usize;
    Outcome {
        level: (reached - skippable_before) as i8 - 1,
        times: best.times,
        bits: best.bits,
    }
}

fn ordered(
    events: &[Event],
    window: i64,
    steps: usize,
    strict: bool,
    optional: u32,
) -> (usize, Path) {
    // entered[k]: the path that reached step k (1-based); entered[0] is "now", the start a
    // step-1 event gives.
    let mut entered: Vec<Path> = vec![Path::default(); steps + 1];
    let mut best = (0usize, Path::default());
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        let end = i + events[i..].iter().take_while(|e| e.0 == t).count();
        entered[0] = Path {
            start: Some(t),
            ..Path::default()
        };
        let group = &events[i..end];
        if group.iter().all(|e| (e.1, e.2) == (group[0].1, group[0].2)) {
            for (k, e) in group.iter().enumerate() {
                step_event(
                    &mut entered,
                    &mut best,
                    e,
                    (i + k, false),
                    window,
                    steps,
                    optional,
                );
                if strict {
                    for (s, p) in entered.iter_mut().enumerate().skip(1) {
                        if e.1 & (1 << (s - 1)) == 0 {
                            *p = Path::default();
                        }
                    }
                }
            }
        } else {
            // Different steps at one instant: each step on its own, lowest first.
            let mut singles: Vec<(u32, usize)> = group
                .iter()
                .enumerate()
                .flat_map(|(k, e)| {
                    (0..steps)
                        .filter(move |s| e.1 & (1 << s) != 0)
                        .map(move |s| (s as u32, i + k))
                })
                .collect();
            singles.sort_unstable();
            for (s, idx) in singles {
                let e = (t, 1 << s, 0);
                step_event(
                    &mut entered,
                    &mut best,
                    &e,
                    (idx, true),
                    window,
                    steps,
                    optional,
                );
            }
        }
        if entered[steps].start.is_some() {
            break;
        }
        i = end;
    }
    (best.0, best.1)
}

/// Applies one event (`at`: its index in the sorted list, and whether it is one of several
/// events at one instant matching different steps) to the paths: its exclusions first, then
/// its steps, highest first (so an event moves a path one step at most).
fn step_event(
    entered: &mut [Path],
    best: &mut (usize, Path),
    e: &Event,
    at: (usize, bool),
    window: i64,
    steps: usize,
    optional: u32,
) {
    let (idx, same_instant) = at;
    let (t, matched, excluded) = *e;
    let within = |p: &Path| p.start.is_some_and(|s| t.saturating_sub(s) <= window);
    // The path a step after 1-based step `prev` follows: the one that reached `prev`, or
    // going back over optional steps no path within the window reached.
    let previous = |entered: &[Path], mut prev: usize| {
        while prev > 0 && !within(&entered[prev]) && optional & (1 << (prev - 1)) != 0 {
            prev -= 1;
        }
        prev
    };
    for s in (1..steps).rev().filter(|s| excluded & (1 << s) != 0) {
        // An exclusion before (0-based) step s: between 1-based steps s and s + 1.
        let (prev, this) = (previous(entered, s), s + 1);
        let p = &entered[prev];
        let already = entered[this].start.is_some() && entered[this].start == p.start;
        if within(p) && !already && !p.excluded {
            entered[prev].excluded = true;
            if best.0 == prev && within(&best.1) {
                best.1.excluded = true;
            }
        }
    }
    for s in (0..steps).rev().filter(|s| matched & (1 << s) != 0) {
        let (prev, this) = (previous(entered, s), s + 1);
        let p = &entered[prev];
        let already = entered[this].start.is_some() && entered[this].start == p.start;
        if !within(p) || already || (same_instant && p.used.contains(&idx)) {
            continue;
        }
        let mut next = p.clone();
        if optional & (1 << s) == 0 {
            next.times.push(t);
            next.used.push(idx);
        }
        next.bits |= 1 << s;
        if this > best.0 || (this == best.0 && best.1.excluded) {
            *best = (this, next.clone());
        }
        if !next.excluded {
            entered[this] = next;
        }
    }
}

fn unordered(events: &[Event], window: i64, steps: usize) -> (usize, Path) {
    let mut by_step: Vec<VecDeque<i64>> = vec![VecDeque::new(); steps];
    let exclusions: Vec<i64> = events.iter().filter(|e| e.2 != 0).map(|e| e.0).collect();
    let mut best = (0usize, Path::default());
    for &(t, matched, _) in events {
        if matched == 0 {
            continue;
        }
        // The matched step whose latest event is oldest (none yet counts as oldest).
        let s = (0..steps)
            .filter(|s| matched & (1 << s) != 0)
            .min_by_key(|&s| by_step[s].back().copied().unwrap_or(i64::MIN))
            .expect("an event with a step");
        by_step[s].push_back(t);
        for q in by_step.iter_mut() {
            while q.front().is_some_and(|&f| t.saturating_sub(f) > window) {
                q.pop_front();
            }
        }
        let done = by_step.iter().filter(|q| !q.is_empty()).count();
        let mut firsts: Vec<i64> = by_step.iter().filter_map(|q| q.front().copied()).collect();
        firsts.sort_unstable();
        let start = firsts[0];
        let excluded = exclusions.iter().any(|&x| x >= start && x <= t);
        if done > best.0 || (done == best.0 && best.1.excluded && !excluded) {
            best = (
                done,
                Path {
                    start: Some(start),
                    excluded,
                    times: firsts,
                    used: vec![],
                    bits: 0,
                },
            );
        }
    }
    best
}

/// How a funnel trends entry stands: not excluded, an exclusion after its furthest step
/// (partial), or an exclusion passed on the way to it (full).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Excluded {
    Not,
    Partial,
    Full,
}

/// One time bucket's entry into a funnel (for funnel trends): per step (1-based), the start
/// of the path that reached it and whether an exclusion broke it; the furthest step and
/// when it was reached.
#[derive(Debug, Clone)]
struct Entry {
    steps: Vec<Option<(i64, bool)>>,
    furthest: (usize, i64, Excluded),
}

/// Funnel trends: for each time bucket in which the person entered the funnel (did step 1),
/// 1 if an entry of that bucket went on to the last step within the window, −1 if it reached
/// step `from + 1` (1-based) and stopped; buckets ascending. Each bucket's entry is followed
/// on its own, with the rules of [`evaluate`]; when an exclusion broke a path that still
/// went further, the person counts nowhere but in buckets that converted.
pub(super) fn evaluate_trends(
    events: &mut [Stored],
    window: i64,
    steps: usize,
    from: usize,
    strict: bool,
) -> Vec<(i64, i8)> {
    events.sort_unstable();
    let mut entries: std::collections::BTreeMap<i64, Entry> = Default::default();
    let mut results: std::collections::BTreeMap<i64, i8> = Default::default();
    for &(t, matched, excluded, bucket) in events.iter() {
        let within =
            |start: Option<(i64, bool)>| start.is_some_and(|s| t.saturating_sub(s.0) <= window);
        // Exclusions first, then the steps, highest first.
        let order = (1..steps)
            .rev()
            .filter(|s| excluded & (1 << s) != 0)
            .map(|s| (s + 1, true))
            .chain(
                (0..steps)
                    .rev()
                    .filter(|s| matched & (1 << s) != 0)
                    .map(|s| (s + 1, false)),
            );
        for (step, exclusion) in order {
            if step == 1 {
                if results.contains_key(&bucket) {
                    continue;
                }
                match entries.get_mut(&bucket) {
                    Some(e) if !(e.furthest.0 == 1 && e.furthest.2 != Excluded::Not) => {
                        e.steps[1] = Some((t, false));
                    }
                    _ => {
                        let mut s = vec![None; steps + 1];
                        s[1] = Some((t, false));
                        entries.insert(
                            bucket,
                            Entry {
                                steps: s,
                                furthest: (1, t, Excluded::Not),
                            },
                        );
                    }
                }
                continue;
            }
            let mut done = Vec::new();
            for (&b, e) in entries.iter_mut() {
                let prev = e.steps[step - 1];
                let already =
                    e.steps[step].is_some() && e.steps[step].map(|s| s.0) == prev.map(|s| s.0);
                if !within(prev) || already {
                    continue;
                }
                let (start, prev_excluded) = prev.expect("within a window");
                if exclusion {
                    if !prev_excluded {
                        e.steps[step - 1] = Some((start, true));
                        if e.furthest.0 == step - 1 && t.saturating_sub(e.furthest.1) <= window {
                            e.furthest.2 = Excluded::Partial;
                        }
                    }
                    continue;
                }
                if !prev_excluded {
                    e.steps[step] = Some((start, false));
                }
                if e.steps[steps].is_some() {
                    results.insert(b, 1);
                    done.push(b);
                } else if step > e.furthest.0
                    || (step == e.furthest.0 && e.furthest.2 == Excluded::Partial)
                {
                    e.furthest = (
                        step,
                        t,
                        if prev_excluded {
                            Excluded::Full
                        } else {
                            Excluded::Not
                        },
                    );
                }
            }
            for b in done {
                entries.remove(&b);
            }
        }
        if strict {
            for e in entries.values_mut() {
                for (s, slot) in e.steps.iter_mut().enumerate().skip(1) {
                    if matched & (1 << (s - 1)) == 0 {
                        *slot = None;
                    }
                }
            }
        }
    }
    if !entries.values().any(|e| e.furthest.2 == Excluded::Full) {
        for (b, e) in &entries {
            if !results.contains_key(b) && e.furthest.0 > from && e.furthest.2 != Excluded::Partial
            {
                results.insert(*b, -1);
            }
        }
    }
    results.into_iter().collect()
}

/// Funnel trends of an unordered funnel: the events in time order, each step's events
/// within the window kept; each time the oldest kept event leaves (out of the window of a
/// newer one, the funnel complete, or the events over), its bucket records how many
/// distinct steps were kept then, the most for that bucket winning; an exclusion clears
/// everything. A bucket that reached every step answers 1, one that reached step `from`
/// (0-based) or further −1.
pub(super) fn evaluate_unordered_trends(
    events: &mut [Stored],
    window: i64,
    steps: usize,
    from: usize,
) -> Vec<(i64, i8)> {
    events.sort_unstable();
    let mut kept: Vec<VecDeque<(i64, i64)>> = vec![VecDeque::new(); steps];
    let mut best: std::collections::BTreeMap<i64, usize> = Default::default();
    let drain = |kept: &mut Vec<VecDeque<(i64, i64)>>,
                 best: &mut std::collections::BTreeMap<i64, usize>,
                 now: i64,
                 all: bool| {
        loop {
            let oldest = kept
                .iter()
                .enumerate()
                .filter_map(|(i, q)| q.front().map(|e| (e.0, i, e.1)))
                .min();
            let Some((t, i, bucket)) = oldest else { break };
            let done = kept.iter().filter(|q| !q.is_empty()).count();
            if !(all || done >= steps || t.saturating_add(window) < now) {
                break;
            }
            let b = best.entry(bucket).or_insert(0);
            *b = (*b).max(done);
            kept[i].pop_front();
        }
    };
    for &(t, matched, excluded, bucket) in events.iter() {
        drain(&mut kept, &mut best, t, false);
        if matched == 0 {
            if excluded != 0 {
                kept.iter_mut().for_each(VecDeque::clear);
            }
            continue;
        }
        let s = (0..steps)
            .filter(|s| matched & (1 << s) != 0)
            .min_by_key(|&s| kept[s].back().map_or(i64::MIN, |e| e.0))
            .expect("an event with a step");
        kept[s].push_back((t, bucket));
    }
    drain(&mut kept, &mut best, i64::MAX, true);
    best.into_iter()
        .filter(|(_, reached)| *reached > from)
        .map(|(b, reached)| (b, if reached >= steps { 1 } else { -1 }))
        .collect()
}

/// The aggregate: see the module's documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Funnel {
    /// The window in the timestamp argument's unit.
    window: i64,
    /// Units of the timestamp argument per second.
    scale: i64,
    steps: usize,
    exclusions: bool,
    order: Order,
    /// The steps that may be skipped (bit k: 0-based step k).
    optional: u32,
    /// Funnel trends from this step (0-based): `hedgerowFunnelTrends`.
    trends: Option<usize>,
    /// The bucket argument's type (funnel trends answer their buckets in it).
    bucket_type: DataType,
    /// The timestamp argument's type (the answer's first and last step times have it).
    ts_type: DataType,
    name: String,
    signature: Signature,
}

/// The answer's fields: level, gaps in seconds, the path's first and last step times (of the
/// timestamp argument's type; NULL without a path), and the steps the path holds.
fn out_fields(ts: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("c0", DataType::Int8, false),
        Field::new(
            "c1",
            DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
            false,
        ),
        Field::new("c2", ts.clone(), true),
        Field::new("c3", ts.clone(), true),
        Field::new("c4", DataType::Int64, false),
    ])
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

impl AggregateUDFImpl for Funnel {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match self.trends {
            None => DataType::Struct(out_fields(&self.ts_type)),
            Some(_) => trends_type(&self.bucket_type),
        })
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn default_value(&self, _: &DataType) -> Result<ScalarValue> {
        if self.trends.is_some() {
            let a = trends_array(&self.bucket_type, vec![vec![]])?;
            return ScalarValue::try_from_array(&a, 0);
        }
        Ok(ScalarValue::Struct(Arc::new(self.outcomes(vec![
            Outcome {
                level: -1,
                times: vec![],
                bits: 0,
            },
        ])?)))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        Ok(["ts", "steps", "exclusions", "bucket"]
            .into_iter()
            .zip([
                DataType::Int64,
                DataType::UInt32,
                DataType::UInt32,
                DataType::Int64,
            ])
            .map(|(n, t)| {
                Arc::new(Field::new(
                    format_state_name(args.name, n),
                    list_of(t),
                    true,
                ))
            })
            .collect())
    }

    fn accumulator(&self, _: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(FunnelAcc {
            f: self.shape(),
            types: (self.ts_type.clone(), self.bucket_type.clone()),
            events: vec![],
        }))
    }

    fn groups_accumulator_supported(&self, _: AccumulatorArgs<'_>) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(FunnelGroups {
            f: self.shape(),
            types: (self.ts_type.clone(), self.bucket_type.clone()),
            events: GroupStates::default(),
        }))
    }
}

/// What the accumulators need of a [`Funnel`].
#[derive(Debug, Clone, Copy)]
struct Shape {
    window: i64,
    scale: i64,
    steps: usize,
    exclusions: bool,
    order: Order,
    optional: u32,
    trends: Option<usize>,
}

impl Shape {
    /// Calls `f(row, event)` for each row kept by `filter` with a time and a step or an
    /// exclusion (NULL conditions are false).
    fn each_event(
        &self,
        values: &[ArrayRef],
        filter: Option<&BooleanArray>,
        mut f: impl FnMut(usize, Stored),
    ) -> Result<()> {
        let first = 1 + usize::from(self.trends.is_some());
        let want = first + self.steps + if self.exclusions { self.steps - 1 } else { 0 };
        if values.len() != want {
            return exec_err!("hedgerowFunnel: expected {want} arguments");
        }
        let ts = values[0].as_primitive::<Int64Type>();
        let bucket = self.trends.map(|_| values[1].as_primitive::<Int64Type>());
        let conds: Vec<&BooleanArray> = values[first..].iter().map(|c| c.as_boolean()).collect();
        for row in 0..ts.len() {
            if ts.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            let (mut steps, mut excl) = (0u32, 0u32);
            for (k, c) in conds.iter().enumerate() {
                if c.is_valid(row) && c.value(row) {
                    match k < self.steps {
                        true => steps |= 1 << k,
                        false => excl |= 1 << (k - self.steps + 1),
                    }
                }
            }
            if steps != 0 || excl != 0 || self.order == Order::Strict {
                let b = bucket.map_or(0, |b| if b.is_null(row) { 0 } else { b.value(row) });
                f(row, (ts.value(row), steps, excl, b));
            }
        }
        Ok(())
    }
}

impl Funnel {
    fn shape(&self) -> Shape {
        Shape {
            window: self.window,
            scale: self.scale,
            steps: self.steps,
            exclusions: self.exclusions,
            order: self.order,
            optional: self.optional,
            trends: self.trends,
        }
    }

    fn outcomes(&self, outcomes: Vec<Outcome>) -> Result<StructArray> {
        outcome_array(self.scale, &self.ts_type, outcomes)
    }
}

fn outcome_array(scale: i64, ts: &DataType, outcomes: Vec<Outcome>) -> Result<StructArray> {
    let levels = Int8Array::from_iter_values(outcomes.iter().map(|o| o.level));
    let gaps = Float64Array::from_iter_values(
        outcomes
            .iter()
            .flat_map(|o| o.gaps().map(|g| g as f64 / scale as f64)),
    );
    let offsets =
        OffsetBuffer::from_lengths(outcomes.iter().map(|o| o.times.len().saturating_sub(1)));
    let first = Int64Array::from_iter(outcomes.iter().map(|o| o.times.first().copied()));
    let last = Int64Array::from_iter(outcomes.iter().map(|o| o.times.last().copied()));
    let first = datafusion::arrow::compute::cast(&first, ts)?;
    let last = datafusion::arrow::compute::cast(&last, ts)?;
    let bits = Int64Array::from_iter_values(outcomes.iter().map(|o| i64::from(o.bits)));
    let list = ListArray::new(
        Arc::new(Field::new_list_field(DataType::Float64, true)),
        offsets,
        Arc::new(gaps),
        None,
    );
    Ok(StructArray::new(
        out_fields(ts),
        vec![
            Arc::new(levels) as ArrayRef,
            Arc::new(list),
            first,
            last,
            Arc::new(bits),
        ],
        None,
    ))
}

/// The list type of funnel trends' answer: `(bucket start, 1 converted / −1 not)`.
fn trends_type(ts: &DataType) -> DataType {
    list_of(DataType::Struct(trends_fields(ts)))
}

fn trends_fields(ts: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("c0", ts.clone(), false),
        Field::new("c1", DataType::Int8, false),
    ])
}

/// Funnel trends' answers as a list array, one list per group.
fn trends_array(ts: &DataType, answers: Vec<Vec<(i64, i8)>>) -> Result<ArrayRef> {
    let offsets = OffsetBuffer::from_lengths(answers.iter().map(Vec::len));
    let buckets = Int64Array::from_iter_values(answers.iter().flatten().map(|a| a.0));
    let marks = Int8Array::from_iter_values(answers.iter().flatten().map(|a| a.1));
    let buckets = match ts {
        DataType::Date32 => {
            let days = datafusion::arrow::compute::cast(&buckets, &DataType::Int32)?;
            datafusion::arrow::compute::cast(&days, ts)?
        }
        _ => datafusion::arrow::compute::cast(&buckets, ts)?,
    };
    let items = StructArray::new(trends_fields(ts), vec![buckets, Arc::new(marks)], None);
    Ok(Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(
            DataType::Struct(trends_fields(ts)),
            true,
        )),
        offsets,
        Arc::new(items),
        None,
    )))
}

impl Shape {
    /// The answers of many groups' events (sorted here) as one array.
    fn answer(&self, types: &(DataType, DataType), groups: Vec<Vec<Stored>>) -> Result<ArrayRef> {
        let (ts, bucket) = types;
        match self.trends {
            Some(from) => {
                let strict = self.order == Order::Strict;
                let answers = groups
                    .into_iter()
                    .map(|mut g| match self.order {
                        Order::Unordered => {
                            evaluate_unordered_trends(&mut g, self.window, self.steps, from)
                        }
                        _ => evaluate_trends(&mut g, self.window, self.steps, from, strict),
                    })
                    .collect();
                trends_array(bucket, answers)
            }
            None => {
                let outcomes = groups
                    .into_iter()
                    .map(|g| {
                        let mut e: Vec<Event> = g.iter().map(|s| (s.0, s.1, s.2)).collect();
                        evaluate(&mut e, self.window, self.steps, self.order, self.optional)
                    })
                    .collect();
                Ok(Arc::new(outcome_array(self.scale, ts, outcomes)?))
            }
        }
    }
}

/// Events of many states as the state's four list columns.
fn state_of<'a>(groups: impl Iterator<Item = &'a [Stored]>) -> Vec<ArrayRef> {
    let (mut lengths, mut ts, mut steps, mut excl, mut bucket) =
        (vec![], vec![], vec![], vec![], vec![]);
    for events in groups {
        lengths.push(events.len());
        for e in events {
            ts.push(e.0);
            steps.push(e.1);
            excl.push(e.2);
            bucket.push(e.3);
        }
    }
    let offsets = OffsetBuffer::from_lengths(lengths);
    let list = |values: ArrayRef| -> ArrayRef {
        let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
        Arc::new(ListArray::new(field, offsets.clone(), values, None))
    };
    vec![
        list(Arc::new(Int64Array::from(ts))),
        list(Arc::new(UInt32Array::from(steps))),
        list(Arc::new(UInt32Array::from(excl))),
        list(Arc::new(Int64Array::from(bucket))),
    ]
}

/// Calls `f(row, event)` for each event of each row's state.
fn each_state_event(states: &[ArrayRef], mut f: impl FnMut(usize, Stored)) {
    let ts = states[0].as_list::<i32>();
    let steps = states[1].as_list::<i32>();
    let excl = states[2].as_list::<i32>();
    let bucket = states[3].as_list::<i32>();
    for i in 0..ts.len() {
        if ts.is_null(i) {
            continue;
        }
        let (t, s, x, b) = (ts.value(i), steps.value(i), excl.value(i), bucket.value(i));
        let t = t.as_primitive::<Int64Type>();
        let s = s.as_primitive::<UInt32Type>();
        let x = x.as_primitive::<UInt32Type>();
        let b = b.as_primitive::<Int64Type>();
        for k in 0..t.len() {
            f(i, (t.value(k), s.value(k), x.value(k), b.value(k)));
        }
    }
}

impl HeapSize for Vec<Stored> {
    fn heap_size(&self) -> usize {
        self.capacity() * size_of::<Stored>()
    }
}

#[derive(Debug)]
struct FunnelAcc {
    f: Shape,
    /// The timestamp's and the bucket's types.
    types: (DataType, DataType),
    events: Vec<Stored>,
}

impl Accumulator for FunnelAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.f.each_event(values, None, |_, e| self.events.push(e))
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        each_state_event(states, |_, e| self.events.push(e));
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        state_of(std::iter::once(self.events.as_slice()))
            .iter()
            .map(|a| ScalarValue::try_from_array(a, 0))
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let events = std::mem::take(&mut self.events);
        let a = self.f.answer(&self.types, vec![events])?;
        ScalarValue::try_from_array(&a, 0)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.events.heap_size()
    }
}

/// [`FunnelAcc`] for many groups at once, each group's events filled straight from the batch.
struct FunnelGroups {
    f: Shape,
    types: (DataType, DataType),
    events: GroupStates<Vec<Stored>>,
}

impl GroupsAccumulator for FunnelGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.events.resize(total_num_groups);
        let f = self.f;
        f.each_event(values, opt_filter, |row, e| {
            self.events.update(group_indices[row], |v| v.push(e))
        })
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.events.resize(total_num_groups);
        each_state_event(values, |row, e| {
            self.events.update(group_indices[row], |v| v.push(e))
        });
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let taken = self.events.take(emit_to);
        self.f.answer(&self.types, taken)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let taken = self.events.take(emit_to);
        Ok(state_of(taken.iter().map(Vec::as_slice)))
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut rows: Vec<Vec<Stored>> = vec![Vec::new(); values[0].len()];
        self.f
            .each_event(values, opt_filter, |row, e| rows[row].push(e))?;
        Ok(state_of(rows.iter().map(Vec::as_slice)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.events.size()
    }
}

/// Reads a constant string parameter.
fn literal_text(name: &str, e: &Expr) -> Result<String, FunctionError> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), _)
        | Expr::Literal(ScalarValue::LargeUtf8(Some(s)), _)
        | Expr::Literal(ScalarValue::Utf8View(Some(s)), _) => Ok(s.clone()),
        _ => Err(FunctionError::Invalid(format!(
            "Function `{name}` needs a constant string, got {e}"
        ))),
    }
}

/// `hedgerowFunnel(window, order, steps)(timestamp, conditions…)` and
/// `hedgerowFunnelTrends(window, order, steps, from_step)(timestamp, bucket, conditions…)`
/// planned.
pub(super) fn plan(
    called: &str,
    params: Vec<Expr>,
    args: Vec<Expr>,
    filter: Option<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let invalid = |m: String| FunctionError::Invalid(format!("`{called}`: {m}"));
    let window = literal_i64(called, &params[0])?;
    if window < 0 {
        return Err(invalid("the window must not be negative".into()));
    }
    let order = match literal_text(called, &params[1])?.as_str() {
        "ordered" => Order::Ordered,
        "strict" => Order::Strict,
        "unordered" => Order::Unordered,
        other => {
            return Err(invalid(format!(
                "the order is 'ordered', 'strict' or 'unordered', got '{other}'"
            )));
        }
    };
    let steps = literal_i64(called, &params[2])?;
    if !(1..=MAX_STEPS as i64).contains(&steps) {
        return Err(invalid(format!("a funnel has 1 to {MAX_STEPS} steps")));
    }
    let steps = steps as usize;
    let is_trends = called.eq_ignore_ascii_case("hedgerowFunnelTrends");
    let mut optional = 0u32;
    if let (false, Some(p)) = (is_trends, params.get(3)) {
        let mask = literal_i64(called, p)?;
        if mask < 0 || mask >= 1 << steps || mask & 1 != 0 {
            return Err(invalid(format!(
                "the optional steps are a bit mask of steps 1 to {} (bit k: 0-based step k; never the first)",
                steps - 1
            )));
        }
        if order == Order::Unordered && mask != 0 {
            return Err(invalid(
                "optional steps are for ordered and strict funnels".into(),
            ));
        }
        optional = mask as u32;
    }
    let trends = match params.get(3).filter(|_| is_trends) {
        None => None,
        Some(p) => {
            let from = literal_i64(called, p)?;
            if !(0..steps as i64 - 1).contains(&from) {
                return Err(invalid(format!(
                    "the from step is 0 to {}, before the last step",
                    steps as i64 - 2
                )));
            }
            Some(from as usize)
        }
    };
    let lead = 1 + usize::from(trends.is_some());
    if args.len() < lead {
        return Err(invalid("too few arguments".into()));
    }
    let conditions = args.len() - lead;
    let exclusions = match conditions {
        c if c == steps => false,
        c if c == 2 * steps - 1 && steps > 1 => true,
        c => {
            return Err(invalid(format!(
                "expected a timestamp and {steps} step conditions (and optionally {} exclusion conditions), got {c} conditions",
                steps - 1
            )));
        }
    };
    let mut it = args.into_iter();
    let ts = it.next().expect("arity");
    let ts_type = type_of(&ts, ctx)?;
    let (ts, scale) = match &ts_type {
        DataType::Timestamp(unit, _) => {
            let scale = match unit {
                TimeUnit::Second => 1,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            (cast(ts, DataType::Int64), scale)
        }
        t => {
            return Err(invalid(format!(
                "the first argument must be a DateTime, got {t}"
            )));
        }
    };
    let window = window
        .checked_mul(scale)
        .ok_or_else(|| invalid("the window is too large".into()))?;
    let mut all = vec![ts];
    let mut bucket_type = ts_type.clone();
    if trends.is_some() {
        let bucket = it.next().expect("arity");
        bucket_type = type_of(&bucket, ctx)?;
        all.push(match &bucket_type {
            DataType::Timestamp(..) => cast(bucket, DataType::Int64),
            DataType::Date32 => cast(cast(bucket, DataType::Int32), DataType::Int64),
            t => {
                return Err(invalid(format!(
                    "the bucket must be a Date or a DateTime, got {t}"
                )));
            }
        });
    }
    for c in it {
        all.push(to_predicate(c, ctx)?);
    }
    let udaf = Funnel {
        ts_type,
        window,
        scale,
        steps,
        exclusions,
        order,
        optional,
        trends,
        bucket_type,
        name: format!("{called}({window}, {order:?}, {steps}, {trends:?}, {optional})"),
        signature: Signature::any(all.len(), Volatility::Immutable),
    };
    Ok(Expr::AggregateFunction(AggregateFunction::new_udf(
        Arc::new(AggregateUDF::from(udaf)),
        all,
        false,
        filter.map(Box::new),
        vec![],
        None,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S0: u32 = 1;
    const S1: u32 = 2;
    const S2: u32 = 4;

    fn run(events: &[Event], window: i64, steps: usize, order: Order) -> (i8, Vec<i64>) {
        let mut e = events.to_vec();
        let o = evaluate(&mut e, window, steps, order, 0);
        let gaps = o.gaps().collect();
        (o.level, gaps)
    }

    /// `(level, gaps, steps held)` with `optional` steps.
    fn run_optional(events: &[Event], steps: usize, optional: u32) -> (i8, Vec<i64>, u32) {
        let mut e = events.to_vec();
        let o = evaluate(&mut e, 100, steps, Order::Ordered, optional);
        let gaps = o.gaps().collect();
        (o.level, gaps, o.bits)
    }

    #[test]
    fn optional_steps_may_be_skipped_and_add_no_time() {
        const S3: u32 = 8;
        // Steps 0, 1 (optional), 2. Skipping step 1: 0 → 2 converts; the level counts the
        // required steps (2 of them: level 1), the held steps are 0 and 2.
        assert_eq!(
            run_optional(&[(0, S0, 0), (7, S2, 0)], 3, S1),
            (1, vec![7], S0 | S2)
        );
        // Taking it: all three held, the time spans the required steps only.
        assert_eq!(
            run_optional(&[(0, S0, 0), (3, S1, 0), (7, S2, 0)], 3, S1),
            (1, vec![7], S0 | S1 | S2)
        );
        // Only the optional step after the first: level 0 (one required step), held 0 and 1.
        assert_eq!(
            run_optional(&[(0, S0, 0), (3, S1, 0)], 3, S1),
            (0, vec![], S0 | S1)
        );
        // Without the mask, skipping step 1 stops at step 0.
        assert_eq!(
            run_optional(&[(0, S0, 0), (7, S2, 0)], 3, 0),
            (0, vec![], S0)
        );
        // Two optional steps in a row (1 and 2) before step 3, both skipped.
        assert_eq!(
            run_optional(&[(0, S0, 0), (9, S3, 0)], 4, S1 | S2),
            (1, vec![9], S0 | S3)
        );
        // The window still binds: step 2 at 150 is past the 100-second window of the start.
        assert_eq!(
            run_optional(&[(0, S0, 0), (150, S2, 0)], 3, S1),
            (0, vec![], S0)
        );
    }

    #[test]
    fn ordered_paths_move_within_the_window_of_their_start() {
        let o = Order::Ordered;
        assert_eq!(
            run(&[(0, S0, 0), (5, S1, 0), (9, S2, 0)], 10, 3, o),
            (2, vec![5, 4])
        );
        // Step 3 comes too late for the path that started at 0; the one at 4 makes it.
        assert_eq!(
            run(
                &[(0, S0, 0), (2, S1, 0), (4, S0, 0), (6, S1, 0), (12, S2, 0)],
                10,
                3,
                o
            ),
            (2, vec![2, 6])
        );
        // Out of order: step 2 before step 1 does not count.
        assert_eq!(run(&[(0, S1, 0), (1, S0, 0)], 10, 2, o), (0, vec![]));
        assert_eq!(run(&[(0, S1, 0)], 10, 2, o), (-1, vec![]));
        // One event matching two steps moves a path one step only.
        assert_eq!(run(&[(0, S0 | S1, 0)], 10, 2, o), (0, vec![]));
        assert_eq!(
            run(&[(0, S0 | S1, 0), (3, S0 | S1, 0)], 10, 2, o),
            (1, vec![3])
        );
        // The window is inclusive.
        assert_eq!(run(&[(0, S0, 0), (10, S1, 0)], 10, 2, o).0, 1);
        assert_eq!(run(&[(0, S0, 0), (11, S1, 0)], 10, 2, o).0, 0);
        // Different steps at one instant: tried in step order.
        assert_eq!(run(&[(0, S1, 0), (0, S0, 0)], 10, 2, o), (1, vec![0]));
    }

    #[test]
    fn strict_paths_break_on_any_other_event() {
        let s = Order::Strict;
        assert_eq!(run(&[(0, S0, 0), (1, 0, 0), (2, S1, 0)], 10, 2, s).0, 0);
        assert_eq!(run(&[(0, S0, 0), (2, S1, 0), (3, 0, 0)], 10, 2, s).0, 1);
        assert_eq!(
            run(&[(0, S0, 0), (1, 0, 0), (2, S1, 0)], 10, 2, Order::Ordered).0,
            1
        );
    }

    #[test]
    fn exclusions_drop_the_person_when_they_break_the_furthest_path() {
        let o = Order::Ordered;
        // An exclusion between step 1 and step 2 (bit 1).
        assert_eq!(
            run(&[(0, S0, 0), (1, 0, 2), (2, S1, 0)], 10, 2, o),
            (-1, vec![])
        );
        // After the path converted it does not matter.
        assert_eq!(
            run(&[(0, S0, 0), (2, S1, 0), (3, 0, 2)], 10, 2, o),
            (1, vec![2])
        );
        // A clean later path replaces the excluded one.
        assert_eq!(
            run(
                &[(0, S0, 0), (1, 0, 2), (2, S1, 0), (20, S0, 0), (25, S1, 0)],
                10,
                2,
                o
            ),
            (1, vec![5])
        );
        // Outside the window of the path it does not break it.
        assert_eq!(run(&[(0, S0, 0), (11, 0, 2)], 10, 2, o), (0, vec![]));
    }

    #[test]
    fn trends_follow_each_buckets_entry() {
        let ev = |t: i64, s: u32, b: i64| (t, s, 0u32, b);
        let events = [
            ev(0, S0, 100),
            ev(5, S1, 100),
            ev(8, S2, 100),
            ev(20, S0, 200),
            ev(25, S1, 200),
            ev(40, S0, 300),
        ];
        let run = |from| evaluate_trends(&mut events.to_vec(), 10, 3, from, false);
        assert_eq!(run(0), vec![(100, 1), (200, -1), (300, -1)]);
        assert_eq!(run(1), vec![(100, 1), (200, -1)]);
        // A path from an earlier bucket converting later counts for its own bucket.
        let late = [
            ev(0, S0, 100),
            ev(15, S0, 200),
            ev(16, S1, 200),
            ev(18, S2, 200),
        ];
        assert_eq!(
            evaluate_trends(&mut late.to_vec(), 20, 3, 0, false),
            vec![(100, 1), (200, 1)]
        );
        // Strict: another event breaks the path.
        let broken = [
            ev(0, S0, 100),
            ev(1, 0, 100),
            ev(2, S1, 100),
            ev(3, S2, 100),
        ];
        assert_eq!(
            evaluate_trends(&mut broken.to_vec(), 10, 3, 0, true),
            vec![(100, -1)]
        );
    }

    #[test]
    fn unordered_trends_count_the_steps_kept_with_each_buckets_oldest_event() {
        let ev = |t: i64, s: u32, b: i64| (t, s, 0u32, b);
        // Bucket 100: C then A then B within the window: converted. Bucket 200: B alone.
        let events = [
            ev(0, S2, 100),
            ev(3, S0, 100),
            ev(5, S1, 100),
            ev(40, S1, 200),
        ];
        assert_eq!(
            evaluate_unordered_trends(&mut events.to_vec(), 10, 3, 0),
            vec![(100, 1), (200, -1)]
        );
        assert_eq!(
            evaluate_unordered_trends(&mut events.to_vec(), 10, 3, 1),
            vec![(100, 1)]
        );
        // An exclusion clears what was kept.
        let cut = [
            ev(0, S0, 100),
            (1, 0, 2, 100),
            ev(2, S1, 100),
            ev(3, S2, 100),
        ];
        assert_eq!(
            evaluate_unordered_trends(&mut cut.to_vec(), 10, 3, 0),
            vec![(100, -1)]
        );
    }

    #[test]
    fn unordered_counts_distinct_steps_within_one_window() {
        let u = Order::Unordered;
        assert_eq!(
            run(&[(0, S2, 0), (3, S0, 0), (5, S1, 0)], 10, 3, u),
            (2, vec![3, 2])
        );
        assert_eq!(
            run(&[(0, S2, 0), (11, S0, 0), (12, S1, 0)], 10, 3, u),
            (1, vec![1])
        );
        assert_eq!(run(&[(0, S1, 0)], 10, 3, u), (0, vec![]));
        assert_eq!(
            run(&[(0, S1, 0), (1, 0, 6), (2, S0, 0)], 10, 2, u),
            (-1, vec![])
        );
    }
}
