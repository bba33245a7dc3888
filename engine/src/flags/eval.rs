//! Evaluating a flag for one person (or group), as PostHog does, so the same id gets the
//! same answer from hedgerow, from PostHog and from a server SDK evaluating locally.
//!
//! - **The hash.** An id's place in a rollout is the first 15 hex digits of
//!   SHA-1(`"<flag key>.<id><salt>"`) over 0xFFFFFFFFFFFFFFF, a number in [0, 1]. A
//!   condition set with rollout `p` % takes the ids whose hash is at most `p / 100`; the
//!   variant is picked by the hash with the salt `variant` from the variants' cumulative
//!   ranges (`[min, max)`, in their order). The id is the distinct id, or for a flag
//!   aggregated by group, the key of the request's group of that type.
//! - **Condition sets** are tried in their stored order (PostHog's SDKs stopped moving
//!   sets with a variant override to the front in python 6.7.6 and node 5.8.7); the first
//!   set whose property filters all match and whose rollout takes the id decides (with
//!   `early_exit`, the first whose filters match decides, in or out). A set without filters
//!   and without a rollout matches all. When none matches, the reason is
//!   `out_of_rollout_bound` if some set's filters matched, else `no_condition_match`.
//! - **Properties.** The person's stored properties with the request's
//!   `person_properties` on top (a group flag: the group's). A filter on a property the
//!   subject does not have is PostHog's server rule: the negated operators (`is_not`,
//!   `not_icontains`, `not_regex`, `is_not_set`) match, the others do not (an SDK evaluating
//!   locally instead asks the server when a property is missing). Text comparisons ignore
//!   (ASCII) case; `exact` compares `true`/`false` by truthiness; `gt`/`lt` and their `e`
//!   forms compare numbers (a side that is not one does not match).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};
use regex::Regex;
use serde_json::{Map, Value};

use super::{Condition, FeatureFlag, PropertyFilter};

/// 15 hex digits' largest value, as a float: the hash's denominator.
const LONG_SCALE: f64 = 0xFFF_FFFF_FFFF_FFFFu64 as f64;

/// The flag hash of `id` for `key`, in [0, 1].
pub fn hash(key: &str, id: &str, salt: &str) -> f64 {
    let mut h = sha1_smol::Sha1::new();
    h.update(key.as_bytes());
    h.update(b".");
    h.update(id.as_bytes());
    h.update(salt.as_bytes());
    let digest = h.digest().bytes();
    // The first 15 hex digits: the first 7.5 bytes, the high 60 bits.
    let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) >> 4;
    head as f64 / LONG_SCALE
}

/// What a flag evaluates the subject to.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub enabled: bool,
    pub variant: Option<String>,
    pub reason: Reason,
    /// The payload of the value the flag evaluated to, as stored.
    pub payload: Option<Value>,
}

impl Evaluation {
    /// The value SDKs see: the variant, else whether the flag is on.
    pub fn value(&self) -> Value {
        match &self.variant {
            Some(v) if self.enabled => Value::String(v.clone()),
            _ => Value::Bool(self.enabled),
        }
    }
}

/// Why a flag evaluated as it did, in PostHog's codes.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    pub code: &'static str,
    /// The (0-based) condition set that matched or last decided.
    pub condition_index: Option<usize>,
    pub description: String,
}

/// Who a flag is evaluated for.
#[derive(Debug, Clone, Default)]
pub struct Subject<'a> {
    pub distinct_id: &'a str,
    pub person_properties: Map<String, Value>,
    /// By group type index: the request's group key of that type and the group's
    /// properties.
    pub groups: HashMap<u8, (String, Map<String, Value>)>,
    /// "Now", for relative dates (`-7d`) in date filters.
    pub now: DateTime<Utc>,
    /// The cohorts the person belongs to (read only when a flag has a cohort condition).
    pub cohorts: std::collections::HashSet<i64>,
}

/// Evaluates an active flag for `s`.
pub fn evaluate(flag: &FeatureFlag, s: &Subject<'_>) -> Evaluation {
    let off = |code, condition_index, description: &str| Evaluation {
        enabled: false,
        variant: None,
        reason: Reason {
            code,
            condition_index,
            description: description.to_owned(),
        },
        payload: None,
    };
    let (id, props) = match flag.filters.aggregation_group_type_index {
        None => (s.distinct_id, &s.person_properties),
        Some(i) => match s.groups.get(&i) {
            Some((key, props)) => (key.as_str(), props),
            None => {
                return off("no_group_type", None, "No group type");
            }
        },
    };
    let mut out_of_rollout: Option<usize> = None;
    for (i, c) in flag.filters.groups.iter().enumerate() {
        match condition_match(flag, c, id, props, s) {
            Match::Yes => {
                let variant = c
                    .variant
                    .clone()
                    .filter(|v| variants(flag).iter().any(|x| &x.key == v))
                    .or_else(|| matching_variant(flag, id));
                let payload_key = variant.clone().unwrap_or_else(|| "true".to_owned());
                return Evaluation {
                    enabled: true,
                    payload: flag.filters.payloads.get(&payload_key).cloned(),
                    variant,
                    reason: Reason {
                        code: "condition_match",
                        condition_index: Some(i),
                        description: format!("Matched condition set {}", i + 1),
                    },
                };
            }
            Match::OutOfRollout => {
                // `early_exit`: a set whose filters matched decides, in or out.
                if flag.filters.extra.get("early_exit") == Some(&Value::Bool(true)) {
                    return off("out_of_rollout_bound", Some(i), "Out of rollout bound");
                }
                out_of_rollout.get_or_insert(i);
            }
            Match::No => {}
        }
    }
    match out_of_rollout {
        Some(i) => off("out_of_rollout_bound", Some(i), "Out of rollout bound"),
        None => off("no_condition_match", None, "No matching condition set"),
    }
}

enum Match {
    Yes,
    /// The properties matched; the rollout did not take the id.
    OutOfRollout,
    No,
}

fn condition_match(
    flag: &FeatureFlag,
    c: &Condition,
    id: &str,
    props: &Map<String, Value>,
    s: &Subject<'_>,
) -> Match {
    for p in &c.properties {
        if p.kind.as_deref() == Some("cohort") {
            let member = super::cohort_id(&p.value).is_some_and(|id| s.cohorts.contains(&id));
            if member == (p.operator.as_deref() == Some("not_in")) {
                return Match::No;
            }
            continue;
        }
        // A group filter on a person flag reads that group's properties.
        let values = match (p.kind.as_deref(), p.group_type_index) {
            (Some("group"), Some(i)) if flag.filters.aggregation_group_type_index != Some(i) => {
                match s.groups.get(&i) {
                    Some((_, g)) => g,
                    None => return Match::No,
                }
            }
            _ => props,
        };
        if !property_matches(p, values, s.now) {
            return Match::No;
        }
    }
    match c.rollout_percentage {
        Some(p) if hash(&flag.key, id, "") > p / 100.0 => Match::OutOfRollout,
        _ => Match::Yes,
    }
}

fn variants(flag: &FeatureFlag) -> &[super::Variant] {
    flag.filters
        .multivariate
        .as_ref()
        .map_or(&[][..], |m| &m.variants[..])
}

/// The variant `id` falls in by the variant hash, if the flag has variants.
pub fn matching_variant(flag: &FeatureFlag, id: &str) -> Option<String> {
    let vs = variants(flag);
    if vs.is_empty() {
        return None;
    }
    let h = hash(&flag.key, id, "variant");
    let mut min = 0.0;
    for v in vs {
        let max = min + v.rollout_percentage / 100.0;
        if h >= min && h < max {
            return Some(v.key.clone());
        }
        min = max;
    }
    None
}

/// A value as text: a string as itself, anything else as its JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// Whether `p` matches `values` (the server's rule: a missing property matches only the
/// negated operators).
pub fn property_matches(
    p: &PropertyFilter,
    values: &Map<String, Value>,
    now: DateTime<Utc>,
) -> bool {
    let op = p.operator.as_deref().unwrap_or("exact");
    let Some(have) = values.get(&p.key) else {
        return matches!(op, "is_not" | "not_icontains" | "not_regex" | "is_not_set");
    };
    let want = &p.value;
    match op {
        "exact" => exact(want, have),
        "is_not" => !exact(want, have),
        "is_set" => true,
        "is_not_set" => false,
        "icontains" | "not_icontains" => {
            let hit = text(have)
                .to_ascii_lowercase()
                .contains(&text(want).to_ascii_lowercase());
            hit == (op == "icontains")
        }
        "regex" | "not_regex" => match regex_of(want) {
            Ok(re) => re.is_match(&text(have)) == (op == "regex"),
            Err(_) => false,
        },
        "gt" | "gte" | "lt" | "lte" => {
            let Some(ord) = number(have)
                .zip(number(want))
                .and_then(|(a, b)| a.partial_cmp(&b))
            else {
                return false;
            };
            match op {
                "gt" => ord.is_gt(),
                "gte" => ord.is_ge(),
                "lt" => ord.is_lt(),
                _ => ord.is_le(),
            }
        }
        "is_date_before" | "is_date_after" | "is_date_exact" => {
            let (Some(a), Some(b)) = (date_of(have, now), date_of(want, now)) else {
                return false;
            };
            match op {
                "is_date_before" => a < b,
                "is_date_after" => a > b,
                _ => a == b,
            }
        }
        _ => false,
    }
}

/// `exact`: equal as text ignoring case; a list matches any of its items. A filter of
/// `true`/`false` (booleans or text in any case, or a list of them) compares truthiness:
/// `true` or `"true"` in any case is true, anything else false.
fn exact(want: &Value, have: &Value) -> bool {
    fn boolish(v: &Value) -> bool {
        match v {
            Value::Bool(_) => true,
            Value::String(s) => s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false"),
            _ => false,
        }
    }
    fn truthy(v: &Value) -> bool {
        match v {
            Value::Bool(b) => *b,
            Value::String(s) => s.eq_ignore_ascii_case("true"),
            _ => false,
        }
    }
    let items: &[Value] = match want {
        Value::Array(items) => items,
        w => std::slice::from_ref(w),
    };
    if !items.is_empty() && items.iter().all(boolish) {
        return items.iter().any(|w| truthy(w) == truthy(have));
    }
    let have = text(have).to_lowercase();
    items.iter().any(|w| text(w).to_lowercase() == have)
}

/// A date filter's value: RFC 3339, a date, a date and time, Unix seconds, or relative to
/// now (`-7d`, `-24h`, `-2w`, `-6m` months, `-1y`; the sign optional, under 10 000).
fn date_of(v: &Value, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Value::Number(n) = v {
        let secs = n.as_f64()?;
        return DateTime::from_timestamp_micros((secs * 1e6) as i64);
    }
    let s = text(v);
    let s = s.trim();
    let rel = s.strip_prefix('-').unwrap_or(s);
    if rel.len() >= 2 && rel.is_char_boundary(rel.len() - 1) {
        let (n, unit) = rel.split_at(rel.len() - 1);
        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            let n = n.parse::<u32>().ok().filter(|n| *n < 10_000)?;
            return match unit {
                "h" => now.checked_sub_signed(Duration::hours(n.into())),
                "d" => now.checked_sub_signed(Duration::days(n.into())),
                "w" => now.checked_sub_signed(Duration::weeks(n.into())),
                "m" => now.checked_sub_months(chrono::Months::new(n)),
                "y" => now.checked_sub_months(chrono::Months::new(n * 12)),
                _ => None,
            };
        }
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// The compiled regex of a filter's value, from a small cache (a flag's regex is matched
/// on every evaluation). Compiled size is bounded, so a filter cannot make a huge
/// automaton.
pub fn regex_of(v: &Value) -> Result<Arc<Regex>, regex::Error> {
    static CACHE: Mutex<Option<HashMap<String, Arc<Regex>>>> = Mutex::new(None);
    let pattern = text(v);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(re) = map.get(&pattern) {
        return Ok(Arc::clone(re));
    }
    let re = Arc::new(
        regex::RegexBuilder::new(&pattern)
            .size_limit(1 << 20)
            .build()?,
    );
    if map.len() >= 1024 {
        map.clear();
    }
    map.insert(pattern, Arc::clone(&re));
    Ok(re)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::flags::Filters;
    use crate::model::TeamId;

    fn flag(key: &str, filters: Value) -> FeatureFlag {
        FeatureFlag {
            id: 1,
            team: TeamId(1),
            key: key.into(),
            name: String::new(),
            filters: serde_json::from_value::<Filters>(filters).unwrap(),
            active: true,
            deleted: false,
            ensure_experience_continuity: false,
            version: 1,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn subject(id: &str, props: Value) -> Subject<'_> {
        Subject {
            distinct_id: id,
            person_properties: props.as_object().cloned().unwrap_or_default(),
            groups: HashMap::new(),
            now: "2026-11-27T12:00:00Z".parse().unwrap(),
            cohorts: Default::default(),
        }
    }

    #[test]
    fn cohort_conditions_ask_for_membership() {
        let f = flag(
            "in-cohort",
            json!({"groups": [
                {"properties": [{"key": "id", "value": 7, "type": "cohort"}]},
                {"properties": [{"key": "id", "value": "8", "type": "cohort", "operator": "not_in"},
                                {"key": "plan", "value": "pro"}]},
            ]}),
        );
        let mut s = subject("u", json!({"plan": "free"}));
        assert!(!evaluate(&f, &s).enabled);
        s.cohorts.insert(7);
        assert_eq!(evaluate(&f, &s).reason.condition_index, Some(0));
        let mut pro = subject("u", json!({"plan": "pro"}));
        assert_eq!(evaluate(&f, &pro).reason.condition_index, Some(1));
        pro.cohorts.insert(8);
        assert!(!evaluate(&f, &pro).enabled);
    }

    /// The hash is PostHog's: values computed independently with Python's hashlib
    /// (`int(sha1(f"{key}.{id}{salt}").hexdigest()[:15], 16) / 0xFFFFFFFFFFFFFFF`).
    #[test]
    fn the_hash_is_posthogs() {
        let cases = [
            ("simple-flag", "some-distinct-id", "", 0.477755795905271),
            ("simple-flag", "test-identifier", "", 0.32780449028443037),
            (
                "simple-flag",
                "some-distinct-id",
                "variant",
                0.7770474308392754,
            ),
        ];
        for (key, id, salt, want) in cases {
            let got = hash(key, id, salt);
            assert!(
                (got - want).abs() < 1e-15,
                "{key} {id} {salt}: {got} != {want}"
            );
        }
    }

    #[test]
    fn rollout_takes_ids_at_or_below_the_percentage() {
        let f = flag(
            "simple-flag",
            json!({"groups": [{"rollout_percentage": 50}]}),
        );
        let (mut on, n) = (0, 10_000);
        for i in 0..n {
            let id = format!("id-{i}");
            let e = evaluate(&f, &subject(&id, json!({})));
            assert_eq!(e.enabled, hash("simple-flag", &id, "") <= 0.5);
            if e.enabled {
                assert_eq!(e.reason.code, "condition_match");
                assert_eq!(e.payload, None);
                on += 1;
            } else {
                assert_eq!(e.reason.code, "out_of_rollout_bound");
            }
        }
        assert!((4_700..5_300).contains(&on), "{on} of {n}");
    }

    #[test]
    fn variants_split_by_the_variant_hash_and_sets_go_in_order() {
        let f = flag(
            "multi",
            json!({
                "groups": [{"rollout_percentage": 100},
                           {"properties": [{"key": "email", "value": "vip@x.io", "type": "person"}],
                            "variant": "second"}],
                "multivariate": {"variants": [{"key": "first", "rollout_percentage": 50},
                                              {"key": "second", "rollout_percentage": 25},
                                              {"key": "third", "rollout_percentage": 25}]},
                "payloads": {"third": "{\"color\": \"red\"}"}
            }),
        );
        for i in 0..2_000 {
            let id = format!("user-{i}");
            let h = hash("multi", &id, "variant");
            let want = if h < 0.5 {
                "first"
            } else if h < 0.75 {
                "second"
            } else {
                "third"
            };
            let e = evaluate(&f, &subject(&id, json!({"email": "a@x.io"})));
            assert_eq!(e.variant.as_deref(), Some(want), "{id}");
            assert_eq!(e.reason.condition_index, Some(0));
            assert_eq!(e.payload.is_some(), want == "third");
            // Sets go in their stored order: the first matches everyone, so the override
            // of the second is never reached.
            let vip = evaluate(&f, &subject(&id, json!({"email": "VIP@x.io"})));
            assert_eq!(vip.variant.as_deref(), Some(want));
            assert_eq!(vip.reason.condition_index, Some(0));
        }
        let mut f = f;
        f.filters.groups.swap(0, 1);
        for i in 0..200 {
            let id = format!("user-{i}");
            let vip = evaluate(&f, &subject(&id, json!({"email": "VIP@x.io"})));
            assert_eq!(vip.variant.as_deref(), Some("second"));
            assert_eq!(vip.reason.condition_index, Some(0));
            assert_eq!(vip.value(), json!("second"));
            let other = evaluate(&f, &subject(&id, json!({"email": "a@x.io"})));
            assert_eq!(other.reason.condition_index, Some(1));
        }
    }

    #[test]
    fn group_flags_hash_the_group_key() {
        let f = flag(
            "org-flag",
            json!({"aggregation_group_type_index": 0,
                   "groups": [{"properties": [{"key": "plan", "value": "enterprise",
                                               "type": "group", "group_type_index": 0}],
                               "rollout_percentage": 100}]}),
        );
        let mut s = subject("someone", json!({"plan": "enterprise"}));
        assert_eq!(evaluate(&f, &s).reason.code, "no_group_type");
        s.groups.insert(
            0,
            (
                "acme".into(),
                json!({"plan": "Enterprise"}).as_object().cloned().unwrap(),
            ),
        );
        assert!(evaluate(&f, &s).enabled);
        s.groups
            .get_mut(&0)
            .unwrap()
            .1
            .insert("plan".into(), json!("free"));
        assert_eq!(evaluate(&f, &s).reason.code, "no_condition_match");
    }

    #[test]
    fn operators() {
        let now = "2026-11-27T12:00:00Z".parse().unwrap();
        let props = json!({
            "email": "Ann@Example.com", "age": 31, "score": "7", "name": "b",
            "signed_up": "2026-11-20T00:00:00Z", "beta": true, "none": null
        });
        let props = props.as_object().unwrap();
        let m = |key: &str, op: &str, value: Value| {
            let p = PropertyFilter {
                key: key.into(),
                value,
                operator: Some(op.into()),
                ..Default::default()
            };
            property_matches(&p, props, now)
        };
        assert!(m("email", "exact", json!("ann@example.com")));
        assert!(m("email", "exact", json!(["x", "ANN@EXAMPLE.COM"])));
        assert!(!m("email", "is_not", json!("ann@example.com")));
        assert!(m("email", "is_not", json!("bob@example.com")));
        assert!(m("email", "icontains", json!("EXAMPLE")));
        assert!(m("email", "not_icontains", json!("posthog")));
        assert!(m("email", "regex", json!("^Ann@")));
        assert!(m("email", "not_regex", json!("^ann@")));
        assert!(
            !m("email", "regex", json!("(")),
            "a bad regex matches nothing"
        );
        assert!(m("age", "gt", json!("30")) && m("age", "gte", json!(31)));
        assert!(!m("age", "lt", json!(31)) && m("age", "lte", json!("31")));
        assert!(!m("score", "gt", json!(10)) && m("score", "lt", json!(10)));
        assert!(!m("name", "gt", json!("a")), "text is not a number");
        assert!(m("beta", "exact", json!("TRUE")) && m("beta", "exact", json!(true)));
        assert!(m("beta", "exact", json!(["true"])) && !m("beta", "exact", json!(false)));
        assert!(
            m("name", "exact", json!(false)),
            "truthiness: \"b\" is not true"
        );
        assert!(m("none", "is_set", json!(null)));
        for op in ["is_not", "not_icontains", "not_regex", "is_not_set"] {
            assert!(m("missing", op, json!("x")), "missing property with {op}");
        }
        for op in [
            "exact",
            "is_set",
            "icontains",
            "regex",
            "gt",
            "lte",
            "is_date_after",
        ] {
            assert!(!m("missing", op, json!("x")), "missing property with {op}");
        }
        assert!(m("signed_up", "is_date_after", json!("-14d")));
        assert!(!m("signed_up", "is_date_after", json!("-1d")));
        assert!(m("signed_up", "is_date_before", json!("2026-11-21")));
        assert!(m("signed_up", "is_date_exact", json!("2026-11-20")));
        assert!(
            m("signed_up", "is_date_after", json!("1m")),
            "a month before now"
        );
        assert!(
            !m("signed_up", "is_date_after", json!("-10000d")),
            "out of range"
        );
    }

    /// `early_exit`: an id out of the first matching set's rollout is off, though a later
    /// set would take it.
    #[test]
    fn early_exit_stops_at_the_first_matching_set() {
        let doc = |early: bool| {
            json!({"groups": [{"rollout_percentage": 0}, {"rollout_percentage": 100}],
                   "early_exit": early})
        };
        let e = evaluate(&flag("x", doc(false)), &subject("id", json!({})));
        assert_eq!((e.enabled, e.reason.condition_index), (true, Some(1)));
        let e = evaluate(&flag("x", doc(true)), &subject("id", json!({})));
        assert_eq!((e.enabled, e.reason.code), (false, "out_of_rollout_bound"));
    }

    #[test]
    fn a_set_without_filters_or_rollout_matches_everyone() {
        let f = flag(
            "all",
            json!({"groups": [{"properties": []}], "payloads": {"true": 5}}),
        );
        let e = evaluate(&f, &subject("x", json!({})));
        assert!(e.enabled);
        assert_eq!(e.payload, Some(json!(5)));
        assert_eq!(e.value(), json!(true));
        let none = flag("none", json!({"groups": []}));
        assert_eq!(
            evaluate(&none, &subject("x", json!({}))).reason.code,
            "no_condition_match"
        );
    }
}
