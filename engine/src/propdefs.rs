//! Property definitions: the type each property name was first seen with, per project.
//!
//! Ingestion records, for every event, person (`$set`/`$set_once`) and group (`$group_set`)
//! property, the type its value suggests, following PostHog's detection rules: a number is
//! Numeric, a boolean (or the string `true`/`false`) Boolean, a date-looking string DateTime,
//! a number in a time-named property (`…_at`, `…time…`, `…date…`) recent enough to be a
//! Unix timestamp DateTime, anything else String. `utm_*`, `$feature/*`,
//! `$feature_flag_response` and `$survey_response*` are always String. JSON null, objects and
//! arrays say nothing; the first value that does decides, and a decided type never changes.
//!
//! HogQL reads a Numeric, Boolean or DateTime property through a cast (`toFloat`, a
//! `'true'`/`'false'` test, `toDateTime`), as PostHog does. Pure: no I/O.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Whose property a definition describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PropertyKind {
    Event,
    Person,
    /// A group's property, by group type index (0–4).
    Group(u8),
}

impl PropertyKind {
    /// PostHog's `type` code (1 event, 2 person, 3 group) and the group type index (-1 for
    /// none): how the metadata store keys a definition.
    pub fn code(self) -> (i64, i64) {
        match self {
            PropertyKind::Event => (1, -1),
            PropertyKind::Person => (2, -1),
            PropertyKind::Group(i) => (3, i64::from(i)),
        }
    }

    pub fn from_code(kind: i64, group: i64) -> Option<Self> {
        match (kind, group) {
            (1, _) => Some(PropertyKind::Event),
            (2, _) => Some(PropertyKind::Person),
            (3, g @ 0..=4) => Some(PropertyKind::Group(g as u8)),
            _ => None,
        }
    }
}

/// A property's type, as PostHog names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropertyType {
    String,
    Numeric,
    Boolean,
    DateTime,
}

impl PropertyType {
    pub fn as_str(self) -> &'static str {
        match self {
            PropertyType::String => "String",
            PropertyType::Numeric => "Numeric",
            PropertyType::Boolean => "Boolean",
            PropertyType::DateTime => "DateTime",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "String" => PropertyType::String,
            "Numeric" => PropertyType::Numeric,
            "Boolean" => PropertyType::Boolean,
            "DateTime" => PropertyType::DateTime,
            _ => return None,
        })
    }
}

/// Event properties that are not properties of the event (they carry person and group
/// updates); they get no event definition.
pub(crate) const NOT_EVENT_PROPERTIES: &[&str] = &[
    "$set",
    "$set_once",
    "$unset",
    "$groups",
    "$group_0",
    "$group_1",
    "$group_2",
    "$group_3",
    "$group_4",
];

/// Words in a property name that make a recent Unix timestamp a DateTime.
const TIME_NAME_WORDS: &[&str] = &[
    "time",
    "timestamp",
    "date",
    "_at",
    "-at",
    "createdat",
    "updatedat",
];

/// How far back (seconds) a number in a time-named property may be to count as a timestamp.
const SIX_MONTHS_SECS: u64 = 15_768_000;

/// The type `value` suggests for a property named `key`; `None` for null, objects, arrays.
pub(crate) fn detect(key: &str, value: &Value, now: DateTime<Utc>) -> Option<PropertyType> {
    let key = key.to_lowercase();
    if key.starts_with("utm_")
        || key.starts_with("$feature/")
        || key == "$feature_flag_response"
        || key.starts_with("$survey_response")
    {
        return Some(PropertyType::String);
    }
    if TIME_NAME_WORDS.iter().any(|w| key.contains(w)) {
        let recent = |n: &serde_json::Number| {
            let floor = (now.timestamp().max(0) as u64).saturating_sub(SIX_MONTHS_SECS);
            n.as_u64().is_some_and(|v| v >= floor)
        };
        match value {
            Value::String(s) if likely_date(s) => return Some(PropertyType::DateTime),
            Value::Number(n) if recent(n) => return Some(PropertyType::DateTime),
            _ => {}
        }
    }
    match value {
        Value::String(s) => {
            let t = s.trim();
            Some(if matches!(t, "true" | "false" | "TRUE" | "FALSE") {
                PropertyType::Boolean
            } else if likely_date(t) {
                PropertyType::DateTime
            } else {
                PropertyType::String
            })
        }
        Value::Number(_) => Some(PropertyType::Numeric),
        Value::Bool(_) => Some(PropertyType::Boolean),
        _ => None,
    }
}

/// RFC 3339, RFC 2822, or a date `YYYY-MM-DD` / `YYYY/MM/DD` / `DD-MM-YYYY` /
/// `DD/MM/YYYY` optionally followed by ` HH:MM:SS…` or `THH:MM:SS…`.
fn likely_date(s: &str) -> bool {
    DateTime::parse_from_rfc3339(s).is_ok()
        || DateTime::parse_from_rfc2822(s).is_ok()
        || date_prefixed(s.as_bytes())
}

fn date_prefixed(b: &[u8]) -> bool {
    let d = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let digit_in = |i: usize, hi: u8| b.get(i).is_some_and(|c| (b'0'..=hi).contains(c));
    let sep = |i: usize| matches!(b.get(i), Some(b'-' | b'/'));
    // Year first (2024-01-31) or last (01-31-2024); the two-digit groups are range-checked
    // by their first digit only, as PostHog's rule does.
    let year_first = d(0)
        && d(1)
        && d(2)
        && d(3)
        && sep(4)
        && digit_in(5, b'2')
        && d(6)
        && sep(7)
        && digit_in(8, b'3')
        && d(9);
    let year_last = digit_in(0, b'2')
        && d(1)
        && sep(2)
        && digit_in(3, b'3')
        && d(4)
        && sep(5)
        && d(6)
        && d(7)
        && d(8)
        && d(9);
    if !(year_first || year_last) {
        return false;
    }
    let rest = &b[10..];
    if rest.is_empty() {
        return true;
    }
    let t = |i: usize, hi: u8| rest.get(i).is_some_and(|c| (b'0'..=hi).contains(c));
    let td = |i: usize| rest.get(i).is_some_and(u8::is_ascii_digit);
    matches!(rest[0], b' ' | b'T')
        && t(1, b'2')
        && td(2)
        && rest.get(3) == Some(&b':')
        && t(4, b'6')
        && td(5)
        && rest.get(6) == Some(&b':')
        && t(7, b'6')
        && td(8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2024-06-15T12:00:00Z".parse().unwrap()
    }

    fn ty(key: &str, v: Value) -> Option<&'static str> {
        detect(key, &v, now()).map(PropertyType::as_str)
    }

    #[test]
    fn values_decide_the_type() {
        assert_eq!(ty("revenue", json!(49)), Some("Numeric"));
        assert_eq!(ty("score", json!(0.5)), Some("Numeric"));
        assert_eq!(ty("flag", json!(false)), Some("Boolean"));
        assert_eq!(ty("flag", json!(" TRUE ")), Some("Boolean"));
        assert_eq!(ty("flag", json!("True")), Some("String"));
        assert_eq!(ty("plan", json!("pro")), Some("String"));
        assert_eq!(ty("plan", json!("12")), Some("String"));
        assert_eq!(ty("x", json!(null)), None);
        assert_eq!(ty("x", json!({"a": 1})), None);
        assert_eq!(ty("x", json!([1])), None);
    }

    #[test]
    fn dates_by_shape() {
        for s in [
            "2024-01-31",
            "2024/01/31",
            "01-31-2024",
            "12/31/2024",
            "2024-01-31 13:05:00",
            "2024-01-31T13:05:00.123Z",
            "2024-01-31T13:05:00+02:00",
            "Wed, 31 Jan 2024 13:05:00 +0000",
        ] {
            assert_eq!(ty("when", json!(s)), Some("DateTime"), "{s}");
        }
        for s in [
            "31-01-2024",
            "2024-1-31",
            "2024-13-45",
            "20240131",
            "2024-01-31 1:05",
            "Jan 31",
        ] {
            assert_eq!(ty("when", json!(s)), Some("String"), "{s}");
        }
    }

    #[test]
    fn recent_numbers_in_time_named_properties_are_timestamps() {
        let recent = now().timestamp() - 3600;
        assert_eq!(ty("created_at", json!(recent)), Some("DateTime"));
        assert_eq!(ty("signupTime", json!(recent * 1000)), Some("DateTime"));
        // A year old is too old to be taken for a timestamp; a count stays a number.
        assert_eq!(
            ty("created_at", json!(recent - 31_536_000)),
            Some("Numeric")
        );
        assert_eq!(ty("visits", json!(recent)), Some("Numeric"));
        assert_eq!(ty("duration_time", json!(12.5)), Some("Numeric"));
    }

    #[test]
    fn names_that_are_always_strings() {
        assert_eq!(ty("utm_source", json!(5)), Some("String"));
        assert_eq!(ty("UTM_term", json!(true)), Some("String"));
        assert_eq!(ty("$feature/beta", json!(true)), Some("String"));
        assert_eq!(ty("$feature_flag_response", json!(false)), Some("String"));
        assert_eq!(ty("$survey_response_2", json!(3)), Some("String"));
    }

    #[test]
    fn kind_codes_round_trip() {
        for k in [
            PropertyKind::Event,
            PropertyKind::Person,
            PropertyKind::Group(0),
            PropertyKind::Group(4),
        ] {
            let (a, b) = k.code();
            assert_eq!(PropertyKind::from_code(a, b), Some(k));
        }
        assert_eq!(PropertyKind::from_code(3, 5), None);
    }
}
