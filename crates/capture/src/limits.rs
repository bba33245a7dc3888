//! What one capture request may cost, and what all of them together may hold.
//!
//! Capture is public: the project API key is in every website's JavaScript, so whatever a
//! body can make the service do, anyone can. These limits bound it; each refusal says
//! which limit, its value and what the body had, in PostHog's error shape.
//!
//! - **Decoded size** (`max_body`, `--max-body-size`, 20 MiB): the body once gzip, base64
//!   and forms are undone (in [`crate::decode`]).
//! - **JSON values per request** (`max_json_values`, 1 000 000): counted by the pre-scan
//!   ([`crate::scan`]) before anything is parsed. A parsed value costs 30–100 times its text
//!   (`{"a":0}`: 7 bytes of text, ~700 bytes parsed), so the byte limit alone let 18 MB of
//!   `[{"a":0},…]`, 27 KB gzipped, take 1.8 GB. PostHog-shaped events (`hedgerow gen`) carry
//!   one value per ~35 bytes, so a full 20 MiB batch of them has ~600 000.
//! - **Nesting** ([`MAX_JSON_DEPTH`], 128, serde_json's own recursion limit), said by the scan.
//! - **Properties** (`max_properties`, 10 000): per event, and per `$set`, `$set_once`,
//!   `$unset`, `$group_set` and `$groups`. Every property name becomes a property
//!   definition and a key of the person or group; PostHog's own SDKs send a few hundred at
//!   most.
//! - **Decode memory** ([`DecodeBudget`], 512 MiB): every request takes an estimate of
//!   what it will hold ([`decode_cost`]) from one process-wide budget before it is parsed,
//!   and gives it back when it is answered. A request that needs more than the whole
//!   budget is a 413 (it can never fit); one that finds the budget taken by others waits
//!   up to `budget_wait` (2 s), then gets a 503 with `Retry-After`. 503, not 429: it is
//!   the service that is busy, not this client that sent too much, and PostHog's SDKs
//!   retry a 503 (posthog-js retries any status other than 200 outside 400–499, and drops a
//!   429; posthog-python retries both).
//! - **Off the async workers**: decoding, parsing and normalizing a body bigger than
//!   `blocking_threshold` (64 KiB), or one that may inflate (gzip, base64, forms), run on
//!   tokio's blocking pool, bounded by the budget, so `/_health` and other requests keep
//!   being served by the worker threads.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::CaptureError;
use crate::model::Event;
use crate::scan::{JsonShape, ScanError};

/// Deepest nesting of objects and arrays accepted: serde_json's own recursion limit, said
/// up front by the scan.
pub const MAX_JSON_DEPTH: usize = 128;

/// The capture limits (see the module docs). The server fills it from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureLimits {
    /// Largest body once every transport encoding is undone.
    pub max_body: usize,
    /// Most JSON values (objects, arrays, strings, numbers, literals) in one body.
    pub max_json_values: usize,
    /// Most properties of an event, and most keys of each of its `$set`, `$set_once`,
    /// `$unset`, `$group_set` and `$groups`.
    pub max_properties: usize,
    /// Estimated memory all capture requests being decoded may hold together.
    pub decode_memory: usize,
    /// How long a request waits for its share of `decode_memory` before a 503.
    pub budget_wait: Duration,
    /// Bodies above this (decoded) size, and every body that may inflate, are decoded,
    /// parsed and normalized on the blocking pool.
    pub blocking_threshold: usize,
}

impl Default for CaptureLimits {
    fn default() -> Self {
        Self {
            max_body: crate::decode::DEFAULT_MAX_DECODED,
            max_json_values: 1_000_000,
            max_properties: 10_000,
            decode_memory: 512 << 20,
            budget_wait: Duration::from_secs(2),
            blocking_threshold: 64 << 10,
        }
    }
}

/// What a parsed `Value` costs beyond its text, measured with a counting allocator
/// (`decode_cost_covers_what_parsing_allocates` below checks the estimate against it):
/// a non-empty object is a B-tree leaf of 11 slots (~630 bytes);
const OBJECT_BYTES: usize = 640;
/// every value is a 32-byte `Value` in its parent (an array's vector may have grown to
/// twice its length), and a member's key is a `String` of its own (24 bytes and a heap
/// block, which the allocator rounds up);
const VALUE_BYTES: usize = 64;
const MEMBER_BYTES: usize = 96;

/// The memory a body will hold while it is decoded, parsed, normalized and written to the
/// WAL, estimated from its size on the wire and its shape: the wire bytes and the decoded
/// text (both held until the parse), the parsed tree, then the WAL record's JSON and the
/// Arrow rows' property text, each about as long as the decoded text.
pub fn decode_cost(wire: usize, shape: &JsonShape) -> usize {
    let tree = shape
        .objects
        .saturating_mul(OBJECT_BYTES)
        .saturating_add(shape.values.saturating_mul(VALUE_BYTES))
        .saturating_add(shape.members.saturating_mul(MEMBER_BYTES))
        .saturating_add(shape.bytes);
    wire.saturating_add(shape.bytes.saturating_mul(3))
        .saturating_add(tree)
}

/// `20 MiB`, `512 KiB`, `300 bytes`: sizes in refusals.
pub fn human_bytes(n: usize) -> String {
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    const GIB: usize = 1 << 30;
    if n >= GIB && n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else if n >= MIB {
        if n.is_multiple_of(MIB) {
            format!("{} MiB", n / MIB)
        } else {
            format!("{:.1} MiB", n as f64 / MIB as f64)
        }
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// The refusal for a scan that stopped.
pub fn scan_refusal(e: ScanError) -> CaptureError {
    match e {
        ScanError::TooManyValues { limit, seen } => CaptureError::OverLimit {
            code: "too_many_json_values",
            detail: format!(
                "the request body holds more than {limit} JSON values (objects, arrays, strings, numbers, booleans and nulls; {seen} counted before stopping); send fewer events or fewer properties per request"
            ),
            attr: None,
        },
        ScanError::TooDeep { limit } => CaptureError::InvalidPayload(format!(
            "the request body nests objects and arrays deeper than {limit} levels"
        )),
    }
}

/// Refuses an event with more properties, or more keys in one of its person or group
/// operations, than `max`. `index` is the event's position in the request.
pub fn check_event_limits(index: usize, event: &Event, max: usize) -> Result<(), CaptureError> {
    let refuse = |what: &str, attr: String, n: usize| CaptureError::OverLimit {
        code: "too_many_properties",
        detail: format!(
            "event {index} (`{}`) has {n} {what}; at most {max} are accepted",
            event.event
        ),
        attr: Some(attr),
    };
    let props = &event.properties;
    if props.len() > max {
        return Err(refuse("properties", "properties".into(), props.len()));
    }
    for key in ["$set", "$set_once", "$unset", "$group_set", "$groups"] {
        let n = match props.get(key) {
            Some(Value::Object(m)) => m.len(),
            Some(Value::Array(a)) => a.len(),
            _ => continue,
        };
        if n > max {
            return Err(refuse(
                &format!("keys in `{key}`"),
                format!("properties.{key}"),
                n,
            ));
        }
    }
    Ok(())
}

/// Why a request got no share of the decode budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetError {
    /// It needs more than the whole budget: it could never run.
    OverBudget { needed: usize, total: usize },
    /// Other requests held the budget for all of `waited`.
    Busy {
        needed: usize,
        total: usize,
        waited: Duration,
    },
}

impl From<BudgetError> for CaptureError {
    fn from(e: BudgetError) -> Self {
        match e {
            BudgetError::OverBudget { needed, total } => CaptureError::OverLimit {
                code: "capture_memory_limit",
                detail: format!(
                    "decoding this request body would take an estimated {} of memory, more than the {} all capture requests may use together; send fewer events per request",
                    human_bytes(needed),
                    human_bytes(total)
                ),
                attr: None,
            },
            BudgetError::Busy {
                needed,
                total,
                waited,
            } => CaptureError::Overloaded(format!(
                "capture is at its memory limit ({} for requests being decoded; this one needs an estimated {}): still busy after {} ms; retry later",
                human_bytes(total),
                human_bytes(needed),
                waited.as_millis()
            )),
        }
    }
}

/// The budget is counted in units of this many bytes (a semaphore counts in `u32`).
const UNIT: usize = 1024;

fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT)
}

/// The process-wide budget of memory for capture requests being decoded: a weighted
/// semaphore, in KiB. FIFO: a large request at the head of the queue is not starved by
/// small ones behind it.
#[derive(Debug, Clone)]
pub struct DecodeBudget {
    sem: Arc<Semaphore>,
    total_units: usize,
    wait: Duration,
}

impl DecodeBudget {
    pub fn new(total_bytes: usize, wait: Duration) -> Self {
        let total_units = units(total_bytes)
            .clamp(1, u32::MAX as usize)
            .min(Semaphore::MAX_PERMITS);
        Self {
            sem: Arc::new(Semaphore::new(total_units)),
            total_units,
            wait,
        }
    }

    pub fn total_bytes(&self) -> usize {
        self.total_units * UNIT
    }

    /// What no request holds now.
    #[cfg(test)]
    pub fn available_bytes(&self) -> usize {
        self.sem.available_permits() * UNIT
    }

    /// Takes `bytes` of the budget, waiting up to the configured time for it.
    pub async fn acquire(&self, bytes: usize) -> Result<BudgetPermit, BudgetError> {
        let mut permit = BudgetPermit {
            sem: self.sem.clone(),
            units: 0,
        };
        permit.resize(self, bytes).await?;
        Ok(permit)
    }
}

/// A share of the [`DecodeBudget`], given back when dropped.
#[derive(Debug)]
pub struct BudgetPermit {
    sem: Arc<Semaphore>,
    units: usize,
}

impl BudgetPermit {
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.units * UNIT
    }

    /// Makes this share `bytes`: a smaller one gives the rest back at once, a larger one
    /// waits (up to the budget's wait) for the difference. On an error the share is as
    /// before.
    pub async fn resize(&mut self, budget: &DecodeBudget, bytes: usize) -> Result<(), BudgetError> {
        let want = units(bytes);
        if want > budget.total_units {
            return Err(BudgetError::OverBudget {
                needed: bytes,
                total: budget.total_bytes(),
            });
        }
        if want <= self.units {
            self.sem.add_permits(self.units - want);
            self.units = want;
            return Ok(());
        }
        // At most u32::MAX units in all (see `new`), so the difference fits.
        let more = (want - self.units) as u32;
        let busy = || BudgetError::Busy {
            needed: bytes,
            total: budget.total_bytes(),
            waited: budget.wait,
        };
        let got = if budget.wait.is_zero() {
            self.sem.try_acquire_many(more).map_err(|_| busy())?
        } else {
            match tokio::time::timeout(budget.wait, self.sem.acquire_many(more)).await {
                Ok(Ok(p)) => p,
                // The semaphore is never closed; a timeout is the busy case.
                _ => return Err(busy()),
            }
        };
        got.forget();
        self.units = want;
        Ok(())
    }
}

impl Drop for BudgetPermit {
    fn drop(&mut self) {
        self.sem.add_permits(self.units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(props: Value) -> Event {
        Event {
            uuid: uuid::Uuid::nil(),
            event: "e".into(),
            distinct_id: "d".into(),
            timestamp: chrono::DateTime::UNIX_EPOCH,
            created_at: chrono::DateTime::UNIX_EPOCH,
            properties: props.as_object().unwrap().clone(),
        }
    }

    fn many(n: usize) -> serde_json::Map<String, Value> {
        (0..n).map(|i| (format!("k{i}"), json!(i))).collect()
    }

    fn refusal(r: Result<(), CaptureError>) -> (String, Option<String>) {
        match r {
            Err(CaptureError::OverLimit { code, detail, attr }) => {
                assert_eq!(code, "too_many_properties");
                (detail, attr)
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn property_limits_per_event_and_per_operation() {
        let at_limit = event(Value::Object(many(10)));
        assert!(check_event_limits(0, &at_limit, 10).is_ok());
        let (detail, attr) = refusal(check_event_limits(3, &event(Value::Object(many(11))), 10));
        assert!(
            detail.contains("event 3") && detail.contains("11 properties") && detail.contains("10"),
            "{detail}"
        );
        assert_eq!(attr.as_deref(), Some("properties"));
        for key in ["$set", "$set_once", "$group_set", "$groups"] {
            let ok = event(json!({key: Value::Object(many(10))}));
            assert!(check_event_limits(0, &ok, 10).is_ok(), "{key}");
            let bad = event(json!({key: Value::Object(many(11))}));
            let (detail, attr) = refusal(check_event_limits(0, &bad, 10));
            assert!(detail.contains(key) && detail.contains("11"), "{detail}");
            assert_eq!(attr, Some(format!("properties.{key}")));
        }
        let keys: Vec<String> = (0..11).map(|i| format!("k{i}")).collect();
        let (detail, _) = refusal(check_event_limits(0, &event(json!({"$unset": keys})), 10));
        assert!(detail.contains("$unset"), "{detail}");
        // Other nested objects are not property lists.
        let nested = event(json!({"blob": Value::Object(many(50))}));
        assert!(check_event_limits(0, &nested, 10).is_ok());
    }

    #[test]
    fn cost_grows_with_objects_and_values() {
        let text = |n: usize| {
            let mut s = "[".to_owned();
            s.push_str(&vec![r#"{"a":0}"#; n].join(","));
            s.push(']');
            s
        };
        let shape = |t: &str| crate::scan::scan(t.as_bytes(), usize::MAX, 128).unwrap();
        let small = decode_cost(0, &shape(&text(10)));
        let big = decode_cost(0, &shape(&text(10_000)));
        assert!(big > 900 * small, "{small} {big}");
        // 8 bytes of text per object, yet the estimate is hundreds of bytes per object.
        assert!(big > 10_000 * 700, "{big}");
    }

    /// Checks the estimate against what parsing really allocates, measured by the
    /// allocation counter in `crate::testalloc` (the test binary's global allocator).
    #[test]
    fn decode_cost_covers_what_parsing_allocates() {
        let cases = [
            "[".to_owned() + &vec![r#"{"a":0}"#; 20_000].join(",") + "]",
            "[".to_owned() + &vec!["0"; 100_000].join(",") + "]",
            serde_json::to_string(&json!({"batch": (0..2000).map(|i| json!({
                "event": "$pageview", "distinct_id": format!("user-{i}"),
                "properties": {"$current_url": "https://example.com/some/long/path?x=1", "$browser": "Firefox", "n": i, "$set": {"email": "a@b.c"}}
            })).collect::<Vec<_>>()}))
            .unwrap(),
            serde_json::to_string(&Value::Object(many(50_000))).unwrap(),
        ];
        for text in &cases {
            let shape = crate::scan::scan(text.as_bytes(), usize::MAX, 128).unwrap();
            let before = crate::testalloc::allocated();
            let value: Value = serde_json::from_str(text).unwrap();
            let used = crate::testalloc::allocated().saturating_sub(before);
            let estimate = decode_cost(0, &shape) - 3 * shape.bytes;
            drop(value);
            eprintln!("{}…: estimate {estimate}, allocated {used}", &text[..20]);
            assert!(
                estimate >= used,
                "estimate {estimate} < measured {used} for {}…",
                &text[..40]
            );
            assert!(
                estimate <= 2 * used + 4096,
                "estimate {estimate} is far above measured {used} for {}…",
                &text[..40]
            );
        }
    }

    #[tokio::test]
    async fn budget_shares_refusals_and_release() {
        let budget = DecodeBudget::new(100 * UNIT, Duration::from_millis(50));
        assert_eq!(budget.total_bytes(), 100 * UNIT);
        let mut a = budget.acquire(60 * UNIT).await.unwrap();
        assert_eq!(budget.available_bytes(), 40 * UNIT);
        // More than the whole budget: refused at once, whatever is free.
        assert_eq!(
            budget.acquire(101 * UNIT).await.unwrap_err(),
            BudgetError::OverBudget {
                needed: 101 * UNIT,
                total: 100 * UNIT
            }
        );
        // More than what is free: waits, then busy.
        let started = std::time::Instant::now();
        match budget.acquire(50 * UNIT).await {
            Err(BudgetError::Busy { needed, .. }) => assert_eq!(needed, 50 * UNIT),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(
            budget.available_bytes(),
            40 * UNIT,
            "a failed wait takes nothing"
        );
        // Shrinking gives back at once; growing takes the difference.
        a.resize(&budget, 10 * UNIT).await.unwrap();
        assert_eq!(budget.available_bytes(), 90 * UNIT);
        let b = budget.acquire(50 * UNIT).await.unwrap();
        a.resize(&budget, 50 * UNIT).await.unwrap();
        assert_eq!(budget.available_bytes(), 0);
        assert!(a.resize(&budget, 51 * UNIT).await.is_err());
        assert_eq!(a.bytes(), 50 * UNIT, "unchanged after a failed resize");
        drop(b);
        drop(a);
        assert_eq!(budget.available_bytes(), 100 * UNIT);
        // A waiter gets its share when another request finishes within the wait.
        let budget = DecodeBudget::new(10 * UNIT, Duration::from_secs(5));
        let held = budget.acquire(10 * UNIT).await.unwrap();
        let b2 = budget.clone();
        let waiter = tokio::spawn(async move { b2.acquire(4 * UNIT).await.map(|p| p.bytes()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert_eq!(waiter.await.unwrap().unwrap(), 4 * UNIT);
        // Sizes round up to whole units.
        let p = budget.acquire(1).await.unwrap();
        assert_eq!(p.bytes(), UNIT);
    }
}
