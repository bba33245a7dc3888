//! The oracle a fuzzer drives (`fuzz/`, `scripts/fuzz`) and the unit tests replay: one
//! capture request, from its transport hints and body to normalized events, through the
//! same steps, in the same order, as the engine's `capture_body`. Every step may refuse;
//! none may panic, hang or break its promise to the next:
//!
//! - the decoded text is never longer than the limit, nor than `decoded_bound` (what the
//!   decode budget is charged before decoding);
//! - the scan's shape of JSON that parses covers it: at least its depth, values and
//!   objects (a duplicate key's last value replaces the earlier, perhaps deeper, one), and
//!   never "too deep" for JSON serde_json accepted;
//! - a payload that parses has a token that passes the token check;
//! - a normalized event has a name and a distinct id within 200 characters, a timestamp
//!   at most 23 hours ahead of the request, `created_at` the request's time, no person
//!   operations when it is personless, and goes through the WAL's JSON form unchanged in
//!   its ids and times.
//!
//! Input layout: byte 0 picks the content type, byte 1 the content encoding, byte 2 the
//! `?compression=` hint, byte 3 whether the body is sent as `?data=` (legacy GET) and
//! whether `?_=` is set; the rest is the body.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use crate::decode::{RawBody, decode_transport, decoded_bound, parse_json};
use crate::limits::{MAX_JSON_DEPTH, check_event_limits, decode_cost};
use crate::model::{Event, TeamId, process_person_profile, token_problem};
use crate::normalize::{MAX_NAME_CHARS, NormalizeContext, Outcome, normalize_event};
use crate::payload::parse_payload;
use crate::scan::{ScanError, scan};

const CONTENT_TYPES: &[Option<&str>] = &[
    None,
    Some("application/json"),
    Some("text/plain"),
    Some("application/x-www-form-urlencoded"),
    Some("application/json; charset=utf-8"),
    Some("multipart/form-data"),
];
const ENCODINGS: &[Option<&str>] = &[None, Some("gzip"), Some("identity"), Some("br")];
const COMPRESSIONS: &[Option<&str>] = &[
    None,
    Some("gzip"),
    Some("gzip-js"),
    Some("base64"),
    Some("lz64"),
    Some("zstd"),
];

/// Small enough that a fuzzer's inputs reach it through gzip.
const MAX_DECODED: usize = 1 << 20;
const MAX_VALUES: usize = 100_000;
const MAX_PROPERTIES: usize = 1_000;

fn pick<T: Copy>(options: &[T], byte: Option<&u8>) -> T {
    options[usize::from(byte.copied().unwrap_or(0)) % options.len()]
}

/// Checks one capture request built from `data`; panics on a broken promise.
pub fn check(data: &[u8]) {
    let flags = data.get(3).copied().unwrap_or(0);
    let body = data.get(4..).unwrap_or_default();
    let as_param = flags & 1 == 1;
    let data_param = if as_param {
        std::str::from_utf8(body).ok()
    } else {
        None
    };
    let raw = RawBody {
        body: if data_param.is_some() { b"" } else { body },
        content_type: pick(CONTENT_TYPES, data.first()),
        content_encoding: pick(ENCODINGS, data.get(1)),
        compression: pick(COMPRESSIONS, data.get(2)),
        data_param,
    };
    let now: DateTime<Utc> = DateTime::from_timestamp(1_735_000_000, 123_456_789).expect("a time");
    let query_sent_at = (flags & 2 == 2).then(|| now - TimeDelta::seconds(5));

    let bound = decoded_bound(&raw, MAX_DECODED);
    let text = match decode_transport(&raw, MAX_DECODED) {
        Ok(text) => text,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "a refusal says why");
            return;
        }
    };
    assert!(text.len() <= MAX_DECODED, "decoded past the limit");
    assert!(
        text.len() <= bound,
        "decoded {} bytes, more than the bound {bound} charged before decoding",
        text.len()
    );

    let shape = scan(&text, MAX_VALUES, MAX_JSON_DEPTH);
    let parsed = parse_json(&text);
    let value = match (shape, parsed) {
        (Err(ScanError::TooDeep { .. }), Ok(v)) => {
            panic!("the scan called JSON too deep that serde_json parsed: {v}")
        }
        (Err(_), _) | (Ok(_), Err(_)) => return,
        (Ok(shape), Ok(value)) => {
            let mut seen = Counts::default();
            seen.add(&value, 0);
            assert_eq!(shape.bytes, text.len(), "the scan measured the text");
            assert!(shape.depth >= seen.depth, "{shape:?} vs {seen:?}");
            assert!(shape.values >= seen.values, "{shape:?} vs {seen:?}");
            assert!(shape.objects >= seen.objects, "{shape:?} vs {seen:?}");
            assert!(
                decode_cost(0, &shape) >= text.len(),
                "the cost covers the text"
            );
            value
        }
    };

    let Ok(payload) = parse_payload(value, query_sent_at) else {
        return;
    };
    assert!(
        token_problem(&payload.token).is_none(),
        "an accepted token passes the check"
    );
    let ctx = NormalizeContext {
        team_id: TeamId(1),
        now,
        sent_at: payload.sent_at,
    };
    for (i, raw_event) in payload.events.into_iter().enumerate() {
        match normalize_event(raw_event, &ctx) {
            Ok(Outcome::Event(e)) => {
                check_event(&e, now);
                let _ = check_event_limits(i, &e, MAX_PROPERTIES);
            }
            Ok(Outcome::Skipped(_)) | Err(_) => {}
        }
    }
}

fn check_event(e: &Event, now: DateTime<Utc>) {
    let chars = |s: &str| s.chars().count();
    assert!(
        !e.event.is_empty() && chars(&e.event) <= MAX_NAME_CHARS,
        "name"
    );
    assert!(
        !e.distinct_id.trim().is_empty() && chars(&e.distinct_id) <= MAX_NAME_CHARS,
        "distinct id {:?}",
        e.distinct_id
    );
    assert!(
        e.timestamp <= now + TimeDelta::hours(23),
        "timestamp {} too far ahead",
        e.timestamp
    );
    assert_eq!(e.created_at.timestamp_micros(), now.timestamp_micros());
    assert_eq!(
        e.timestamp.timestamp_subsec_nanos() % 1000,
        0,
        "microseconds"
    );
    if !process_person_profile(&e.properties) {
        for key in ["$set", "$set_once", "$unset"] {
            assert!(!e.properties.contains_key(key), "personless with {key}");
        }
    }
    let json = serde_json::to_vec(e).expect("an event serializes");
    let back: Event = serde_json::from_slice(&json).expect("and reads back");
    assert_eq!(
        (
            back.uuid,
            &back.event,
            &back.distinct_id,
            back.timestamp,
            back.created_at
        ),
        (e.uuid, &e.event, &e.distinct_id, e.timestamp, e.created_at)
    );
    assert_eq!(back.properties.len(), e.properties.len());
}

/// What a parsed value holds, counted as the scan counts text.
#[derive(Debug, Default)]
struct Counts {
    values: usize,
    objects: usize,
    depth: usize,
}

impl Counts {
    fn add(&mut self, v: &Value, depth: usize) {
        self.values += 1;
        match v {
            Value::Object(m) => {
                self.objects += 1;
                self.depth = self.depth.max(depth + 1);
                m.values().for_each(|c| self.add(c, depth + 1));
            }
            Value::Array(a) => {
                self.depth = self.depth.max(depth + 1);
                a.iter().for_each(|c| self.add(c, depth + 1));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed corpus of `fuzz/corpus/capture` (requests as the SDKs send them, in every
    /// encoding), replayed: each must pass the oracle.
    #[test]
    fn the_seed_corpus_passes() {
        // The directory as cargo gives it when the test runs (a target directory shared
        // between clones reuses the compile-time one).
        let dir = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../../fuzz/corpus/capture");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/capture") {
            let path = entry.expect("an entry").path();
            check(&std::fs::read(&path).expect("a seed"));
            n += 1;
        }
        assert!(n >= 10, "{n} seeds in {}", dir.display());
    }

    #[test]
    fn short_and_odd_inputs() {
        for input in [
            &b""[..],
            b"\x01",
            b"\x01\x00\x00\x00",
            b"\x01\x00\x00\x00[]",
            b"\x00\x01\x00\x00\x1f\x8b",
        ] {
            check(input);
        }
        check(b"\x01\x00\x00\x00{\"api_key\":\"phc_x\",\"event\":\"e\",\"distinct_id\":\"d\",\"timestamp\":\"9999-12-31T23:59:59Z\"}");
    }
}
