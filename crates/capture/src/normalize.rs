//! Per-event normalization: turns one raw event object of a capture request into an
//! [`Event`], or says why it is skipped or refused.
//!
//! Owns the event-name and distinct_id rules, the lifting of top-level `$set`/`$set_once`
//! into properties, uuid handling, timestamp parsing and clock-skew correction, and the
//! person uuid derivation. Everything here is pure: the current time arrives in
//! [`NormalizeContext::now`]; nothing reads a clock or does I/O.

pub use crate::model::{PERSON_UUID_NAMESPACE, person_uuid, process_person_profile};
use chrono::{DateTime, NaiveDate, NaiveDateTime, SubsecRound, TimeDelta, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::CaptureError;
use crate::model::{Event, TeamId};

/// Longest event name and distinct_id kept, in characters; longer ones are cut.
pub const MAX_NAME_CHARS: usize = 200;

/// How far in the future an event may claim to be before it is pulled back to `now`.
const MAX_FUTURE: TimeDelta = TimeDelta::hours(23);

/// What normalization of one request needs to know besides the event itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormalizeContext {
    pub team_id: TeamId,
    /// When the request was received; `created_at` and the reference for skew correction.
    pub now: DateTime<Utc>,
    /// The request's `sent_at`, when the client sent one.
    pub sent_at: Option<DateTime<Utc>>,
}

/// The result of normalizing one event that is not outright invalid.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Event(Event),
    /// Dropped without failing the request, as PostHog does; counted by reason.
    Skipped(SkipReason),
}

/// Why an event was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    MissingEventName,
    MissingDistinctId,
}

impl SkipReason {
    /// A stable label, e.g. for metrics and ingestion warnings.
    pub fn as_str(&self) -> &'static str {
        match self {
            SkipReason::MissingEventName => "missing_event_name",
            SkipReason::MissingDistinctId => "missing_distinct_id",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Normalizes one raw event object. `Err` only for an event that is malformed in a way
/// that makes the whole request suspect (properties not an object, a bad uuid); a missing
/// name or distinct_id is a skip.
pub fn normalize_event(
    mut raw: Map<String, Value>,
    ctx: &NormalizeContext,
) -> Result<Outcome, CaptureError> {
    let event = match raw.get("event") {
        Some(Value::String(name)) if !name.is_empty() => truncate_chars(name, MAX_NAME_CHARS),
        _ => return Ok(Outcome::Skipped(SkipReason::MissingEventName)),
    };

    let mut properties = match raw.remove("properties") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(CaptureError::InvalidPayload(format!(
                "event `{event}`: `properties` must be a JSON object, not {}",
                describe_json(&other)
            )));
        }
    };

    let Some(distinct_id) = extract_distinct_id(&raw, &properties) else {
        return Ok(Outcome::Skipped(SkipReason::MissingDistinctId));
    };

    // Top-level $set/$set_once are an older SDK spelling of the same thing; lifting them
    // means everything downstream looks only at properties.
    for key in ["$set", "$set_once"] {
        if let Some(Value::Object(top)) = raw.remove(key) {
            lift_into(&mut properties, key, top);
        }
    }

    let uuid = match raw.get("uuid") {
        None | Some(Value::Null) => new_v7_at(ctx.now),
        Some(Value::String(s)) => Uuid::parse_str(s.trim()).map_err(|_| {
            CaptureError::InvalidPayload(format!(
                "event `{event}`: `uuid` \"{}\" is not a valid UUID",
                truncate_chars(s, 64)
            ))
        })?,
        Some(other) => {
            return Err(CaptureError::InvalidPayload(format!(
                "event `{event}`: `uuid` must be a UUID string, not {}",
                describe_json(other)
            )));
        }
    };

    let ignore_sent_at = properties.get("$ignore_sent_at") == Some(&Value::Bool(true));
    let timestamp = resolve_timestamp(
        raw.get("timestamp"),
        raw.get("offset"),
        ctx.sent_at,
        ignore_sent_at,
        ctx.now,
    );

    if !process_person_profile(&properties) {
        // A personless event must not change any person, whatever it carries.
        for key in ["$set", "$set_once", "$unset"] {
            properties.remove(key);
        }
    }

    Ok(Outcome::Event(Event {
        uuid,
        event,
        distinct_id,
        timestamp: whole_micros(timestamp),
        created_at: whole_micros(ctx.now),
        properties,
    }))
}

/// `t` to the microsecond, as it is stored. A leap second (`23:59:60.5`, which chrono
/// keeps as a second 59 with more than a second of fraction) becomes the instant it is
/// stored as, the next second's start plus its fraction: the event reads back from the WAL
/// and the table as it was written (a fuzzed `10:00:60.123456Z` read back as `10:01:00`).
fn whole_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or_else(|| t.trunc_subsecs(6))
}

/// The first present, non-null of `distinct_id`, `$distinct_id`, `properties.distinct_id`;
/// `None` when that one is unusable.
fn extract_distinct_id(
    raw: &Map<String, Value>,
    properties: &Map<String, Value>,
) -> Option<String> {
    let value = [
        raw.get("distinct_id"),
        raw.get("$distinct_id"),
        properties.get("distinct_id"),
    ]
    .into_iter()
    .flatten()
    .find(|v| !v.is_null())?;
    let id = match value {
        Value::String(s) => s.clone(),
        // Numeric ids are common (database keys); PostHog keeps their decimal form.
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    if id.trim().is_empty() {
        return None;
    }
    Some(truncate_chars(&id, MAX_NAME_CHARS))
}

/// Merges `top` into `properties[key]` key by key; the top-level value wins a clash.
fn lift_into(properties: &mut Map<String, Value>, key: &str, top: Map<String, Value>) {
    match properties.get_mut(key) {
        Some(Value::Object(existing)) => existing.extend(top),
        // Missing, or something that is not an object and so cannot be merged into.
        _ => {
            properties.insert(key.to_owned(), Value::Object(top));
        }
    }
}

/// A v7 uuid stamped with the request's `now` rather than a clock read, keeping this
/// module free of hidden time sources.
fn new_v7_at(now: DateTime<Utc>) -> Uuid {
    let secs = u64::try_from(now.timestamp()).unwrap_or(0);
    let ts = uuid::Timestamp::from_unix(uuid::NoContext, secs, now.timestamp_subsec_nanos());
    Uuid::new_v7(ts)
}

/// The first `max` characters of `s` (never splitting a character).
fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => s[..cut].to_owned(),
        None => s.to_owned(),
    }
}

/// "a string", "an array" ...: for error messages.
pub fn describe_json(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses the timestamp spellings SDKs send: RFC 3339 (`Z` or an offset, any number of
/// fraction digits), `YYYY-MM-DDTHH:MM:SS[.f]` or `YYYY-MM-DD HH:MM:SS[.f]` without a zone
/// (taken as UTC), and a bare `YYYY-MM-DD` (midnight UTC).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    // Everything accepted is ASCII; checking once keeps the byte slicing below safe.
    if s.is_empty() || !s.is_ascii() {
        return None;
    }
    let s = limit_fraction_digits(s);
    let s = s.as_str();

    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.to_utc());
    }
    // Offsets without a colon (+0000), a space separator with a zone, lowercase z ...
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z"] {
        if let Ok(dt) = DateTime::parse_from_str(s, fmt) {
            return Some(dt.to_utc());
        }
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(dt.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|dt| dt.and_utc())
}

/// Keeps at most 9 fraction digits: nanoseconds are all chrono can hold, and some
/// clients send more (e.g. .NET's 7, or 12 from a bad formatter).
fn limit_fraction_digits(s: &str) -> String {
    let Some(dot) = s.find('.') else {
        return s.to_owned();
    };
    let digits_start = dot + 1;
    let digits = s[digits_start..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    if digits <= 9 {
        return s.to_owned();
    }
    format!("{}{}", &s[..digits_start + 9], &s[digits_start + digits..])
}

/// When the event happened, per PostHog's rules:
///
/// - a `timestamp` (ISO string or milliseconds since epoch) is corrected for the client's
///   clock skew as `now + (timestamp − sent_at)` when `sent_at` is known and not ignored,
///   and taken as is otherwise;
/// - else an `offset` (milliseconds before sending) gives `now − offset`;
/// - else `now`.
///
/// A timestamp that does not parse, an arithmetic overflow, or a result more than 23 hours
/// after `now` all give `now`: a wrong time is worse than the receive time.
pub fn resolve_timestamp(
    timestamp: Option<&Value>,
    offset_ms: Option<&Value>,
    sent_at: Option<DateTime<Utc>>,
    ignore_sent_at: bool,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let resolved = match timestamp {
        // JS SDKs treat an empty timestamp as no timestamp at all.
        Some(ts) if !ts.is_null() && ts.as_str() != Some("") => {
            let sent_at = sent_at.filter(|_| !ignore_sent_at);
            timestamp_value(ts).and_then(|ts| match sent_at {
                Some(sent_at) => now.checked_add_signed(ts.signed_duration_since(sent_at)),
                None => Some(ts),
            })
        }
        _ => match offset_ms.and_then(millis_delta) {
            Some(offset) => now.checked_sub_signed(offset),
            None => Some(now),
        },
    };
    match resolved {
        Some(t) if t.signed_duration_since(now) <= MAX_FUTURE => t,
        _ => now,
    }
}

/// A timestamp given as an ISO string or as milliseconds since the epoch.
fn timestamp_value(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::String(s) => parse_timestamp(s),
        Value::Number(_) => {
            let delta = millis_delta(v)?;
            DateTime::UNIX_EPOCH.checked_add_signed(delta)
        }
        _ => None,
    }
}

/// A JSON number of milliseconds as a duration, with sub-millisecond fractions kept to the
/// microsecond; `None` for non-numbers and values out of range.
fn millis_delta(v: &Value) -> Option<TimeDelta> {
    if let Some(ms) = v.as_i64() {
        return TimeDelta::try_milliseconds(ms);
    }
    let ms = v.as_f64()?;
    let micros = (ms * 1000.0).trunc();
    // i64::MAX as f64 rounds up to 2^63, so the bound must be strict.
    if !micros.is_finite() || micros.abs() >= i64::MAX as f64 {
        return None;
    }
    Some(TimeDelta::microseconds(micros as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 6, 1, 12, 0, 0).unwrap()
    }

    fn ctx() -> NormalizeContext {
        NormalizeContext {
            team_id: TeamId(1),
            now: now(),
            sent_at: None,
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    fn normalize(v: Value) -> Result<Outcome, CaptureError> {
        normalize_event(obj(v), &ctx())
    }

    fn event(v: Value) -> Event {
        match normalize(v) {
            Ok(Outcome::Event(e)) => e,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    fn skipped(v: Value) -> SkipReason {
        match normalize(v) {
            Ok(Outcome::Skipped(r)) => r,
            other => panic!("expected a skip, got {other:?}"),
        }
    }

    fn invalid(v: Value) -> String {
        match normalize(v) {
            Err(CaptureError::InvalidPayload(m)) => m,
            other => panic!("expected InvalidPayload, got {other:?}"),
        }
    }

    #[test]
    fn a_leap_second_is_stored_as_the_next_seconds_start() {
        let e = event(
            json!({"event": "e", "distinct_id": "d", "timestamp": "2024-06-01T10:00:60.123456Z"}),
        );
        let want =
            Utc.with_ymd_and_hms(2024, 6, 1, 10, 1, 0).unwrap() + TimeDelta::microseconds(123_456);
        assert_eq!(e.timestamp, want);
        // What the WAL writes reads back the same.
        let back: Event = serde_json::from_slice(&serde_json::to_vec(&e).unwrap()).unwrap();
        assert_eq!(back.timestamp, e.timestamp);
    }

    // ---- event name ----

    #[test]
    fn event_name_must_be_a_non_empty_string() {
        assert_eq!(
            skipped(json!({"distinct_id": "d"})),
            SkipReason::MissingEventName
        );
        assert_eq!(
            skipped(json!({"event": "", "distinct_id": "d"})),
            SkipReason::MissingEventName
        );
        assert_eq!(
            skipped(json!({"event": null, "distinct_id": "d"})),
            SkipReason::MissingEventName
        );
        assert_eq!(
            skipped(json!({"event": 5, "distinct_id": "d"})),
            SkipReason::MissingEventName
        );
        assert_eq!(
            event(json!({"event": "$pageview", "distinct_id": "d"})).event,
            "$pageview"
        );
    }

    #[test]
    fn skip_reason_labels() {
        assert_eq!(SkipReason::MissingEventName.as_str(), "missing_event_name");
        assert_eq!(
            SkipReason::MissingDistinctId.as_str(),
            "missing_distinct_id"
        );
        assert_eq!(
            SkipReason::MissingDistinctId.to_string(),
            "missing_distinct_id"
        );
    }

    #[test]
    fn long_event_name_is_cut_on_a_char_boundary() {
        let name = "é".repeat(250);
        let e = event(json!({"event": name, "distinct_id": "d"}));
        assert_eq!(e.event.chars().count(), 200);
        assert_eq!(e.event, "é".repeat(200));
        let exact = "😀".repeat(200);
        assert_eq!(
            event(json!({"event": exact, "distinct_id": "d"})).event,
            exact
        );
    }

    // ---- distinct_id ----

    #[test]
    fn distinct_id_locations_in_order() {
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "top"})).distinct_id,
            "top"
        );
        assert_eq!(
            event(json!({"event": "e", "$distinct_id": "dollar"})).distinct_id,
            "dollar"
        );
        assert_eq!(
            event(json!({"event": "e", "properties": {"distinct_id": "prop"}})).distinct_id,
            "prop"
        );
        let all = json!({"event": "e", "distinct_id": "top", "$distinct_id": "dollar", "properties": {"distinct_id": "prop"}});
        assert_eq!(event(all).distinct_id, "top");
        let two =
            json!({"event": "e", "$distinct_id": "dollar", "properties": {"distinct_id": "prop"}});
        assert_eq!(event(two).distinct_id, "dollar");
        let null_top = json!({"event": "e", "distinct_id": null, "$distinct_id": "dollar"});
        assert_eq!(event(null_top).distinct_id, "dollar");
    }

    #[test]
    fn numeric_distinct_id_becomes_its_decimal_string() {
        assert_eq!(
            event(json!({"event": "e", "distinct_id": 12345})).distinct_id,
            "12345"
        );
        assert_eq!(
            event(json!({"event": "e", "distinct_id": -7})).distinct_id,
            "-7"
        );
        assert_eq!(
            event(json!({"event": "e", "distinct_id": 1.5})).distinct_id,
            "1.5"
        );
        assert_eq!(
            event(json!({"event": "e", "distinct_id": u64::MAX})).distinct_id,
            u64::MAX.to_string()
        );
    }

    #[test]
    fn unusable_distinct_id_is_skipped() {
        for bad in [
            json!(""),
            json!("   "),
            json!(true),
            json!([1]),
            json!({"a": 1}),
        ] {
            assert_eq!(
                skipped(json!({"event": "e", "distinct_id": bad})),
                SkipReason::MissingDistinctId
            );
        }
        assert_eq!(
            skipped(json!({"event": "e"})),
            SkipReason::MissingDistinctId
        );
        assert_eq!(
            skipped(json!({"event": "e", "distinct_id": null})),
            SkipReason::MissingDistinctId
        );
    }

    #[test]
    fn distinct_id_kept_as_is_and_cut_to_200_chars() {
        assert_eq!(
            event(json!({"event": "e", "distinct_id": " a b "})).distinct_id,
            " a b "
        );
        let long = "ü".repeat(300);
        let id = event(json!({"event": "e", "distinct_id": long})).distinct_id;
        assert_eq!(id, "ü".repeat(200));
    }

    // ---- properties ----

    #[test]
    fn properties_missing_or_null_are_empty() {
        assert!(
            event(json!({"event": "e", "distinct_id": "d"}))
                .properties
                .is_empty()
        );
        assert!(
            event(json!({"event": "e", "distinct_id": "d", "properties": null}))
                .properties
                .is_empty()
        );
    }

    #[test]
    fn properties_not_an_object_is_invalid() {
        let m = invalid(json!({"event": "e", "distinct_id": "d", "properties": "x"}));
        assert!(m.contains("properties") && m.contains("a string"), "{m}");
        let m = invalid(json!({"event": "e", "distinct_id": "d", "properties": [1]}));
        assert!(m.contains("an array"), "{m}");
    }

    #[test]
    fn properties_are_kept() {
        let e = event(
            json!({"event": "e", "distinct_id": "d", "properties": {"a": 1, "$current_url": "u"}}),
        );
        assert_eq!(e.properties.get("a"), Some(&json!(1)));
        assert_eq!(e.properties.get("$current_url"), Some(&json!("u")));
    }

    #[test]
    fn top_level_set_and_set_once_are_lifted_and_win_clashes() {
        let e = event(json!({
            "event": "e",
            "distinct_id": "d",
            "$set": {"a": "top", "b": "top"},
            "$set_once": {"first": "top"},
            "properties": {"$set": {"a": "prop", "c": "prop"}}
        }));
        assert_eq!(
            e.properties.get("$set"),
            Some(&json!({"a": "top", "b": "top", "c": "prop"}))
        );
        assert_eq!(
            e.properties.get("$set_once"),
            Some(&json!({"first": "top"}))
        );
    }

    #[test]
    fn lifting_over_a_non_object_replaces_it() {
        let e = event(json!({
            "event": "e", "distinct_id": "d",
            "$set": {"a": 1},
            "properties": {"$set": "junk"}
        }));
        assert_eq!(e.properties.get("$set"), Some(&json!({"a": 1})));
    }

    #[test]
    fn non_object_top_level_set_is_ignored() {
        let e = event(json!({
            "event": "e", "distinct_id": "d",
            "$set": "junk",
            "properties": {"$set": {"a": 1}}
        }));
        assert_eq!(e.properties.get("$set"), Some(&json!({"a": 1})));
    }

    #[test]
    fn personless_events_drop_person_updates() {
        let e = event(json!({
            "event": "e", "distinct_id": "d",
            "$set": {"a": 1},
            "$set_once": {"b": 1},
            "properties": {"$process_person_profile": false, "$unset": ["c"], "keep": true}
        }));
        assert!(!e.properties.contains_key("$set"));
        assert!(!e.properties.contains_key("$set_once"));
        assert!(!e.properties.contains_key("$unset"));
        assert_eq!(e.properties.get("keep"), Some(&json!(true)));
        assert_eq!(
            e.properties.get("$process_person_profile"),
            Some(&json!(false))
        );
    }

    #[test]
    fn process_person_profile_is_false_only_for_json_false() {
        assert!(process_person_profile(&Map::new()));
        assert!(process_person_profile(&obj(
            json!({"$process_person_profile": true})
        )));
        assert!(process_person_profile(&obj(
            json!({"$process_person_profile": "false"})
        )));
        assert!(process_person_profile(&obj(
            json!({"$process_person_profile": null})
        )));
        assert!(!process_person_profile(&obj(
            json!({"$process_person_profile": false})
        )));
    }

    // ---- uuid ----

    #[test]
    fn client_uuid_is_kept_whatever_its_version() {
        let v4 = "8f2b0b4e-2d7c-4e0a-9f6a-0d5b1c3e7a11";
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "d", "uuid": v4})).uuid,
            Uuid::parse_str(v4).unwrap()
        );
        let v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846";
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "d", "uuid": v1})).uuid,
            Uuid::parse_str(v1).unwrap()
        );
        let simple = "8f2b0b4e2d7c4e0a9f6a0d5b1c3e7a11";
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "d", "uuid": simple})).uuid,
            Uuid::parse_str(v4).unwrap()
        );
    }

    #[test]
    fn missing_uuid_is_generated_as_v7_at_now() {
        for raw in [
            json!({"event": "e", "distinct_id": "d"}),
            json!({"event": "e", "distinct_id": "d", "uuid": null}),
        ] {
            let e = event(raw);
            assert_eq!(e.uuid.get_version_num(), 7);
            let (secs, _) = e.uuid.get_timestamp().unwrap().to_unix();
            assert_eq!(secs as i64, now().timestamp());
        }
        let a = event(json!({"event": "e", "distinct_id": "d"})).uuid;
        let b = event(json!({"event": "e", "distinct_id": "d"})).uuid;
        assert_ne!(a, b);
    }

    #[test]
    fn bad_uuid_is_an_error_naming_it() {
        let m = invalid(json!({"event": "e", "distinct_id": "d", "uuid": "not-a-uuid"}));
        assert!(m.contains("not-a-uuid"), "{m}");
        let m = invalid(json!({"event": "e", "distinct_id": "d", "uuid": 42}));
        assert!(m.contains("uuid") && m.contains("a number"), "{m}");
    }

    // ---- timestamps ----

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn parse_timestamp_formats() {
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00Z"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00.5Z"),
            Some(at("2024-06-01T10:00:00.500Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00.123456789Z"),
            Some(at("2024-06-01T10:00:00.123456789Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00.123456789123Z"),
            Some(at("2024-06-01T10:00:00.123456789Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T12:00:00+02:00"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T12:00:00.250-01:30"),
            Some(at("2024-06-01T13:30:00.250Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T12:00:00+0200"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01 12:00:00+02:00"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01T10:00:00.1234567"),
            Some(at("2024-06-01T10:00:00.1234567Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01 10:00:00"),
            Some(at("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01 10:00:00.042"),
            Some(at("2024-06-01T10:00:00.042Z"))
        );
        assert_eq!(
            parse_timestamp("2024-06-01"),
            Some(at("2024-06-01T00:00:00Z"))
        );
        assert_eq!(
            parse_timestamp("  2024-06-01T10:00:00Z "),
            Some(at("2024-06-01T10:00:00Z"))
        );
    }

    #[test]
    fn parse_timestamp_rejects_garbage() {
        for bad in [
            "",
            "yesterday",
            "2024-13-01",
            "2024-02-30T00:00:00Z",
            "2024-06-01T25:00:00Z",
            "1717243200000",
            "2024-06-01T10:00:00Zjunk",
            "2024-06-01T10:00:00.é",
            "99999-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamp_without_sent_at_is_taken_as_is() {
        let ts = json!("2024-06-01T10:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&ts), None, None, false, now()),
            at("2024-06-01T10:00:00Z")
        );
    }

    #[test]
    fn numeric_timestamp_is_milliseconds() {
        let ms = at("2024-06-01T10:00:00.123Z").timestamp_millis();
        assert_eq!(
            resolve_timestamp(Some(&json!(ms)), None, None, false, now()),
            at("2024-06-01T10:00:00.123Z")
        );
        assert_eq!(
            resolve_timestamp(Some(&json!(ms as f64 + 0.5)), None, None, false, now()),
            at("2024-06-01T10:00:00.1235Z")
        );
    }

    #[test]
    fn sent_at_corrects_clock_skew() {
        // The client's clock runs an hour ahead: it stamped the event at 12:59:00 and sent
        // it at 13:00:00 by its clock; we received it at 12:00:00. It happened a minute ago.
        let ts = json!("2024-06-01T12:59:00Z");
        let sent_at = at("2024-06-01T13:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&ts), None, Some(sent_at), false, now()),
            at("2024-06-01T11:59:00Z")
        );
        // A clock behind by 2 h, event 30 s before sending.
        let ts = json!("2024-06-01T09:59:30Z");
        let sent_at = at("2024-06-01T10:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&ts), None, Some(sent_at), false, now()),
            at("2024-06-01T11:59:30Z")
        );
    }

    #[test]
    fn ignore_sent_at_takes_timestamp_as_is() {
        let ts = json!("2024-06-01T10:00:00Z");
        let sent_at = Some(at("2024-06-01T13:00:00Z"));
        assert_eq!(
            resolve_timestamp(Some(&ts), None, sent_at, true, now()),
            at("2024-06-01T10:00:00Z")
        );
    }

    #[test]
    fn ignore_sent_at_through_normalize_event() {
        let c = NormalizeContext {
            sent_at: Some(at("2024-06-01T13:00:00Z")),
            ..ctx()
        };
        let raw = json!({"event": "e", "distinct_id": "d", "timestamp": "2024-06-01T10:00:00Z",
            "properties": {"$ignore_sent_at": true}});
        let Outcome::Event(e) = normalize_event(obj(raw), &c).unwrap() else {
            panic!()
        };
        assert_eq!(e.timestamp, at("2024-06-01T10:00:00Z"));

        let raw = json!({"event": "e", "distinct_id": "d", "timestamp": "2024-06-01T12:59:00Z"});
        let Outcome::Event(e) = normalize_event(obj(raw), &c).unwrap() else {
            panic!()
        };
        assert_eq!(e.timestamp, at("2024-06-01T11:59:00Z"));
    }

    #[test]
    fn offset_counts_back_from_now() {
        assert_eq!(
            resolve_timestamp(None, Some(&json!(1500)), None, false, now()),
            at("2024-06-01T11:59:58.500Z")
        );
        // sent_at plays no part for offsets.
        assert_eq!(
            resolve_timestamp(
                None,
                Some(&json!(60_000)),
                Some(at("2020-01-01T00:00:00Z")),
                false,
                now()
            ),
            at("2024-06-01T11:59:00Z")
        );
        // A timestamp takes precedence over an offset.
        let ts = json!("2024-06-01T10:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&ts), Some(&json!(1000)), None, false, now()),
            at("2024-06-01T10:00:00Z")
        );
        // A non-numeric offset is ignored.
        assert_eq!(
            resolve_timestamp(None, Some(&json!("1000")), None, false, now()),
            now()
        );
    }

    #[test]
    fn nothing_means_now() {
        assert_eq!(resolve_timestamp(None, None, None, false, now()), now());
        assert_eq!(
            resolve_timestamp(Some(&Value::Null), None, None, false, now()),
            now()
        );
        assert_eq!(
            resolve_timestamp(Some(&json!("")), Some(&json!(1000)), None, false, now()),
            at("2024-06-01T11:59:59Z")
        );
    }

    #[test]
    fn unparseable_timestamp_is_now() {
        for bad in [
            json!("not a date"),
            json!(true),
            json!({"a": 1}),
            json!("2024-02-30"),
        ] {
            assert_eq!(
                resolve_timestamp(Some(&bad), Some(&json!(5000)), Some(now()), false, now()),
                now(),
                "{bad}"
            );
        }
    }

    #[test]
    fn future_clamp_at_23_hours() {
        let kept = now() + TimeDelta::hours(22) + TimeDelta::minutes(59);
        let clamped = now() + TimeDelta::hours(23) + TimeDelta::minutes(1);
        let ts = |t: DateTime<Utc>| json!(t.to_rfc3339());
        assert_eq!(
            resolve_timestamp(Some(&ts(kept)), None, None, false, now()),
            kept
        );
        assert_eq!(
            resolve_timestamp(Some(&ts(clamped)), None, None, false, now()),
            now()
        );
        let exactly = now() + TimeDelta::hours(23);
        assert_eq!(
            resolve_timestamp(Some(&ts(exactly)), None, None, false, now()),
            exactly
        );
        // Negative offsets and skew corrections are clamped the same way.
        let minus_23h01 = json!(-(23 * 3_600_000 + 60_000));
        assert_eq!(
            resolve_timestamp(None, Some(&minus_23h01), None, false, now()),
            now()
        );
        let skewed = resolve_timestamp(
            Some(&json!("2024-06-03T00:00:00Z")),
            None,
            Some(at("2024-06-01T00:00:00Z")),
            false,
            now(),
        );
        assert_eq!(skewed, now());
    }

    #[test]
    fn the_past_is_not_clamped() {
        let old = json!("2001-01-01T00:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&old), None, None, false, now()),
            at("2001-01-01T00:00:00Z")
        );
    }

    #[test]
    fn overflow_never_panics() {
        let huge = [
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1e300),
            json!(-1e300),
            json!(9.3e18),
        ];
        for v in &huge {
            assert_eq!(
                resolve_timestamp(None, Some(v), None, false, now()),
                now(),
                "offset {v}"
            );
            assert_eq!(
                resolve_timestamp(Some(v), None, None, false, now()),
                now(),
                "ts {v}"
            );
            assert_eq!(
                resolve_timestamp(Some(v), None, Some(now()), false, now()),
                now(),
                "ts {v} with sent_at"
            );
        }
        let far = json!("99999-01-01T00:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&far), None, Some(now()), false, now()),
            now()
        );
        let max_ts = json!("+262142-12-31T23:59:59Z");
        let min_sent = DateTime::<Utc>::MIN_UTC;
        assert_eq!(
            resolve_timestamp(Some(&max_ts), None, Some(min_sent), false, now()),
            now()
        );
        let late = json!("9999-12-31T23:59:59Z");
        assert_eq!(
            resolve_timestamp(Some(&late), None, Some(min_sent), false, now()),
            now()
        );
        // Representable, if absurd, results are kept: only overflow falls back to now.
        let early = json!("0001-01-01T00:00:00Z");
        let max_sent = DateTime::<Utc>::MAX_UTC;
        assert!(resolve_timestamp(Some(&early), None, Some(max_sent), false, now()) < now());
        let early = json!("-200000-01-01T00:00:00Z");
        assert_eq!(
            resolve_timestamp(Some(&early), None, Some(max_sent), false, now()),
            now()
        );
    }

    #[test]
    fn timestamps_have_microsecond_precision() {
        let c = NormalizeContext {
            now: at("2024-06-01T12:00:00.123456789Z"),
            ..ctx()
        };
        let raw = json!({"event": "e", "distinct_id": "d", "timestamp": "2024-06-01T10:00:00.987654321Z"});
        let Outcome::Event(e) = normalize_event(obj(raw), &c).unwrap() else {
            panic!()
        };
        assert_eq!(e.timestamp, at("2024-06-01T10:00:00.987654Z"));
        assert_eq!(e.created_at, at("2024-06-01T12:00:00.123456Z"));
    }

    #[test]
    fn created_at_is_now() {
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "d"})).created_at,
            now()
        );
        assert_eq!(
            event(json!({"event": "e", "distinct_id": "d"})).timestamp,
            now()
        );
    }

    // ---- person uuid ----

    #[test]
    fn person_uuid_is_v5_of_team_and_distinct_id() {
        let ns = Uuid::parse_str("932979b4-65c3-4424-8467-0b66ec27bc22").unwrap();
        assert_eq!(PERSON_UUID_NAMESPACE, ns);
        let expected = Uuid::new_v5(&ns, b"1:test");
        assert_eq!(person_uuid(TeamId(1), "test"), expected);
        assert_eq!(person_uuid(TeamId(1), "test").get_version_num(), 5);
        assert_ne!(person_uuid(TeamId(2), "test"), expected);
        assert_eq!(
            person_uuid(TeamId(1), "test"),
            person_uuid(TeamId(1), "test")
        );
    }
}
