//! The JSON shape of a capture request, and its project token.
//!
//! Owns the three body shapes PostHog accepts (a batch object, a single event object, a bare
//! array of events), where the project token may be found, and the token validity rule.
//! Pure: it takes an already decoded `serde_json::Value` (see [`crate::decode`]) and does no
//! I/O. Per-event rules live in [`crate::normalize`].

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::CaptureError;
use crate::normalize::{describe_json, parse_timestamp};

pub use crate::model::MAX_TOKEN_CHARS;

/// One capture request's payload, shape-checked, with its token found.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturePayload {
    /// The request's one project token.
    pub token: String,
    pub sent_at: Option<DateTime<Utc>>,
    pub historical_migration: bool,
    /// Raw event objects in request order.
    pub events: Vec<Map<String, Value>>,
}

/// Checks the body's shape and finds its token. `query_sent_at`: the `?_=` query parameter
/// (milliseconds since epoch) already parsed by the caller, used when the body has no sent_at.
pub fn parse_payload(
    value: Value,
    query_sent_at: Option<DateTime<Utc>>,
) -> Result<CapturePayload, CaptureError> {
    // `single`: the body is one event, which is then also its own envelope (sent_at ...).
    let (envelope, events, single) = match value {
        Value::Array(items) => (None, objects(items, "the array")?, false),
        Value::Object(mut map) => match map.remove("batch") {
            Some(Value::Array(items)) => {
                let events = objects(items, "`batch`")?;
                (Some(map), events, false)
            }
            Some(other) => {
                return Err(CaptureError::InvalidPayload(format!(
                    "`batch` must be an array of events, not {}",
                    describe_json(&other)
                )));
            }
            None => (None, vec![map], true),
        },
        other => {
            return Err(CaptureError::InvalidPayload(format!(
                "the payload must be a JSON object or an array of events, not {}",
                describe_json(&other)
            )));
        }
    };

    let token = match envelope.as_ref().map(envelope_token).transpose()?.flatten() {
        Some(token) => token,
        None => events_token(&events)?,
    };
    check_token(&token)?;

    let header = if single {
        events.first()
    } else {
        envelope.as_ref()
    };
    let sent_at = match header.and_then(|h| h.get("sent_at")) {
        None | Some(Value::Null) => query_sent_at,
        Some(Value::String(s)) => parse_timestamp(s),
        Some(_) => None,
    };
    let historical_migration = header
        .and_then(|h| h.get("historical_migration"))
        .is_some_and(|v| v == &Value::Bool(true));

    Ok(CapturePayload {
        token,
        sent_at,
        historical_migration,
        events,
    })
}

/// Every item must be an event object; `what` names the container for the message.
fn objects(items: Vec<Value>, what: &str) -> Result<Vec<Map<String, Value>>, CaptureError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(map) => Ok(map),
            other => Err(CaptureError::InvalidPayload(format!(
                "item {i} of {what} must be an event object, not {}",
                describe_json(&other)
            ))),
        })
        .collect()
}

/// The batch object's own token: `api_key`, else `token`.
fn envelope_token(envelope: &Map<String, Value>) -> Result<Option<String>, CaptureError> {
    first_token(envelope, &["api_key", "token"])
}

/// The first of `keys` present and non-null in `map`, which must then be a string.
fn first_token(map: &Map<String, Value>, keys: &[&str]) -> Result<Option<String>, CaptureError> {
    for key in keys {
        match map.get(*key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s.clone())),
            Some(other) => {
                return Err(CaptureError::InvalidToken(format!(
                    "the project token (`{key}`) must be a string, not {}",
                    describe_json(other)
                )));
            }
        }
    }
    Ok(None)
}

/// One event's token: `api_key`, `token`, `$token`, then `properties.token`.
fn event_token(event: &Map<String, Value>) -> Result<Option<String>, CaptureError> {
    if let Some(token) = first_token(event, &["api_key", "token", "$token"])? {
        return Ok(Some(token));
    }
    match event.get("properties") {
        Some(Value::Object(props)) => first_token(props, &["token"]),
        _ => Ok(None),
    }
}

/// With no batch-level token, the events' tokens decide; a request speaks for exactly one
/// project, so events naming different ones are refused rather than split.
fn events_token(events: &[Map<String, Value>]) -> Result<String, CaptureError> {
    let mut found: Option<String> = None;
    for event in events {
        let Some(token) = event_token(event)? else {
            continue;
        };
        match &found {
            None => found = Some(token),
            Some(first) if *first == token => {}
            Some(_) => {
                return Err(CaptureError::InvalidToken(
                    "events carry different project tokens".to_owned(),
                ));
            }
        }
    }
    found.ok_or_else(|| {
        CaptureError::InvalidToken(
            "no project token found: send it as `api_key` or `token` in the request body, or as `api_key`, `token`, `$token` or `properties.token` on each event".to_owned(),
        )
    })
}

/// Token validity rule: empty, longer than 64 characters, non-ASCII, or starting with "phx_"
/// (a personal API key) is invalid.
pub fn check_token(token: &str) -> Result<(), CaptureError> {
    match crate::model::token_problem(token) {
        None => Ok(()),
        Some(reason) => Err(CaptureError::InvalidToken(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn parse(v: Value) -> CapturePayload {
        parse_payload(v, None).unwrap()
    }

    fn invalid_payload(v: Value) -> String {
        match parse_payload(v, None) {
            Err(CaptureError::InvalidPayload(m)) => m,
            other => panic!("expected InvalidPayload, got {other:?}"),
        }
    }

    fn invalid_token(v: Value) -> String {
        match parse_payload(v, None) {
            Err(CaptureError::InvalidToken(m)) => m,
            other => panic!("expected InvalidToken, got {other:?}"),
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    // ---- shapes ----

    #[test]
    fn batch_object() {
        let p = parse(json!({
            "api_key": "phc_abc",
            "batch": [{"event": "a", "distinct_id": "1"}, {"event": "b", "distinct_id": "2"}],
        }));
        assert_eq!(p.token, "phc_abc");
        assert_eq!(p.events.len(), 2);
        assert_eq!(p.events[0]["event"], "a");
        assert_eq!(p.events[1]["event"], "b");
        assert_eq!(p.sent_at, None);
        assert!(!p.historical_migration);
    }

    #[test]
    fn empty_batch_is_fine() {
        let p = parse(json!({"token": "phc_abc", "batch": []}));
        assert!(p.events.is_empty());
        assert_eq!(p.token, "phc_abc");
    }

    #[test]
    fn single_event_object() {
        let p = parse(json!({"api_key": "phc_abc", "event": "a", "distinct_id": "1"}));
        assert_eq!(p.token, "phc_abc");
        assert_eq!(p.events.len(), 1);
        assert_eq!(p.events[0]["event"], "a");
    }

    #[test]
    fn bare_array_of_events() {
        let p = parse(json!([
            {"event": "a", "distinct_id": "1", "token": "phc_abc"},
            {"event": "b", "distinct_id": "2"},
        ]));
        assert_eq!(p.token, "phc_abc");
        assert_eq!(p.events.len(), 2);
    }

    #[test]
    fn other_shapes_are_invalid() {
        assert!(invalid_payload(json!(42)).contains("a number"));
        assert!(invalid_payload(json!("events")).contains("a string"));
        assert!(invalid_payload(json!(null)).contains("null"));
        assert!(invalid_payload(json!(true)).contains("a boolean"));
        let m = invalid_payload(json!({"api_key": "phc_abc", "batch": {"event": "a"}}));
        assert!(m.contains("`batch`") && m.contains("an object"), "{m}");
        let m = invalid_payload(json!({"api_key": "phc_abc", "batch": null}));
        assert!(m.contains("`batch`"), "{m}");
        let m = invalid_payload(json!({"api_key": "phc_abc", "batch": [{"event": "a"}, 3]}));
        assert!(m.contains("item 1") && m.contains("a number"), "{m}");
        let m = invalid_payload(json!([{"event": "a", "token": "phc_abc"}, "x"]));
        assert!(m.contains("item 1") && m.contains("a string"), "{m}");
    }

    // ---- token locations ----

    #[test]
    fn batch_level_token_locations() {
        assert_eq!(
            parse(json!({"api_key": "phc_a", "batch": []})).token,
            "phc_a"
        );
        assert_eq!(parse(json!({"token": "phc_t", "batch": []})).token, "phc_t");
        assert_eq!(
            parse(json!({"api_key": "phc_a", "token": "phc_t", "batch": []})).token,
            "phc_a"
        );
        assert_eq!(
            parse(json!({"api_key": null, "token": "phc_t", "batch": []})).token,
            "phc_t"
        );
    }

    #[test]
    fn batch_level_token_wins_over_event_tokens() {
        let p = parse(json!({"api_key": "phc_batch", "batch": [
            {"event": "a", "token": "phc_other"},
            {"event": "b", "token": "phc_third"},
        ]}));
        assert_eq!(p.token, "phc_batch");
    }

    #[test]
    fn event_level_token_locations() {
        for event in [
            json!({"event": "a", "api_key": "phc_x"}),
            json!({"event": "a", "token": "phc_x"}),
            json!({"event": "a", "$token": "phc_x"}),
            json!({"event": "a", "properties": {"token": "phc_x"}}),
        ] {
            assert_eq!(parse(json!([event.clone()])).token, "phc_x", "{event}");
            assert_eq!(
                parse(json!({"batch": [event.clone()]})).token,
                "phc_x",
                "{event}"
            );
            assert_eq!(parse(event.clone()).token, "phc_x", "{event}");
        }
    }

    #[test]
    fn event_token_order() {
        let event = json!({"event": "a", "token": "phc_2", "$token": "phc_3", "properties": {"token": "phc_4"}});
        assert_eq!(parse(json!([event])).token, "phc_2");
        let event = json!({"event": "a", "$token": "phc_3", "properties": {"token": "phc_4"}});
        assert_eq!(parse(json!([event])).token, "phc_3");
        let event = json!({"event": "a", "api_key": "phc_1", "token": "phc_2"});
        assert_eq!(parse(json!([event])).token, "phc_1");
    }

    #[test]
    fn events_with_the_same_token_or_none_are_fine() {
        let p = parse(json!([
            {"event": "a", "token": "phc_x"},
            {"event": "b"},
            {"event": "c", "properties": {"token": "phc_x"}},
        ]));
        assert_eq!(p.token, "phc_x");
        assert_eq!(p.events.len(), 3);
    }

    #[test]
    fn mixed_tokens_are_refused() {
        let m = invalid_token(json!([
            {"event": "a", "token": "phc_x"},
            {"event": "b", "api_key": "phc_y"},
        ]));
        assert_eq!(m, "events carry different project tokens");
        let m = invalid_token(json!({"batch": [
            {"event": "a", "$token": "phc_x"},
            {"event": "b", "properties": {"token": "phc_y"}},
        ]}));
        assert_eq!(m, "events carry different project tokens");
    }

    #[test]
    fn missing_token_says_where_to_put_it() {
        for v in [
            json!({"batch": [{"event": "a"}]}),
            json!({"batch": []}),
            json!([{"event": "a"}]),
            json!({"event": "a", "properties": {}}),
        ] {
            let m = invalid_token(v);
            assert!(
                m.contains("api_key") && m.contains("properties.token"),
                "{m}"
            );
        }
    }

    #[test]
    fn non_string_token_is_refused() {
        let m = invalid_token(json!({"api_key": 123, "batch": []}));
        assert!(m.contains("api_key") && m.contains("a number"), "{m}");
    }

    // ---- token validity ----

    #[test]
    fn check_token_rules() {
        assert!(check_token("phc_abcdef0123456789").is_ok());
        assert!(check_token(&"a".repeat(64)).is_ok());
        let reason = |t: &str| match check_token(t) {
            Err(CaptureError::InvalidToken(m)) => m,
            other => panic!("expected InvalidToken for {t:?}, got {other:?}"),
        };
        assert!(reason("").contains("empty"));
        assert!(reason(&"a".repeat(65)).contains("longer than 64"));
        assert!(reason("phc_abcé").contains("non-ASCII"));
        let m = reason("phx_abcdef");
        assert!(
            m.contains("personal API key") && m.contains("project API key"),
            "{m}"
        );
        assert!(!m.contains("abcdef"), "the key must not be echoed: {m}");
    }

    #[test]
    fn invalid_tokens_fail_the_payload() {
        let m = invalid_token(json!({"api_key": "phx_secret", "batch": []}));
        assert!(m.contains("personal API key"), "{m}");
        let m = invalid_token(json!([{"event": "a", "token": "x".repeat(65)}]));
        assert!(m.contains("64"), "{m}");
        let m = invalid_token(json!({"event": "a", "api_key": "phc_ü"}));
        assert!(m.contains("non-ASCII"), "{m}");
        let m = invalid_token(json!({"token": "", "batch": []}));
        assert!(m.contains("empty"), "{m}");
    }

    // ---- sent_at, historical_migration ----

    #[test]
    fn sent_at_from_body() {
        let p =
            parse(json!({"api_key": "phc_a", "batch": [], "sent_at": "2024-06-01T10:00:00.123Z"}));
        assert_eq!(p.sent_at, Some(at("2024-06-01T10:00:00.123Z")));
        let p = parse(json!({"api_key": "phc_a", "event": "a", "sent_at": "2024-06-01T10:00:00Z"}));
        assert_eq!(p.sent_at, Some(at("2024-06-01T10:00:00Z")));
    }

    #[test]
    fn sent_at_unparseable_is_none() {
        let query = Some(Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap());
        let p = parse_payload(
            json!({"api_key": "phc_a", "batch": [], "sent_at": "soon"}),
            query,
        )
        .unwrap();
        assert_eq!(p.sent_at, None);
        let p = parse_payload(
            json!({"api_key": "phc_a", "batch": [], "sent_at": 5}),
            query,
        )
        .unwrap();
        assert_eq!(p.sent_at, None);
    }

    #[test]
    fn sent_at_falls_back_to_the_query_parameter() {
        let query = Some(Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap());
        let p = parse_payload(json!({"api_key": "phc_a", "batch": []}), query).unwrap();
        assert_eq!(p.sent_at, query);
        let p = parse_payload(
            json!({"api_key": "phc_a", "batch": [], "sent_at": null}),
            query,
        )
        .unwrap();
        assert_eq!(p.sent_at, query);
        let p = parse_payload(json!([{"event": "a", "token": "phc_a"}]), query).unwrap();
        assert_eq!(p.sent_at, query);
        // An event inside an array is not an envelope: its own sent_at is not the request's.
        let event = json!({"event": "a", "token": "phc_a", "sent_at": "2024-06-01T10:00:00Z", "historical_migration": true});
        let p = parse_payload(json!([event]), query).unwrap();
        assert_eq!(p.sent_at, query);
        assert!(!p.historical_migration);
        let p = parse_payload(
            json!({"api_key": "phc_a", "batch": [], "sent_at": "2024-06-01T10:00:00Z"}),
            query,
        )
        .unwrap();
        assert_eq!(p.sent_at, Some(at("2024-06-01T10:00:00Z")));
    }

    #[test]
    fn historical_migration_only_when_true() {
        let hm = |v: Value| {
            parse(json!({"api_key": "phc_a", "batch": [], "historical_migration": v}))
                .historical_migration
        };
        assert!(hm(json!(true)));
        assert!(!hm(json!(false)));
        assert!(!hm(json!("true")));
        assert!(!hm(json!(1)));
        assert!(!hm(Value::Null));
        assert!(!parse(json!({"api_key": "phc_a", "batch": []})).historical_migration);
    }

    #[test]
    fn events_keep_their_fields_untouched() {
        let event =
            json!({"event": "a", "token": "phc_x", "properties": {"token": "phc_x", "k": 1}});
        let p = parse(json!([event.clone()]));
        assert_eq!(Value::Object(p.events[0].clone()), event);
    }
}
