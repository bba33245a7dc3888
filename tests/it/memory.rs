//! Queries run under the memory pool: over a small limit, a big aggregation spills to disk and
//! answers; what cannot spill fails with `query_memory_limit`, and the service goes on.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use hedgerow_engine::CapturePayload;
use hedgerow_engine::clock::FixedClock;
use hedgerow_engine::model::TeamId;
use hedgerow_engine::query::{HogQLRun, QueryError};
use hedgerow_engine::{Engine, EngineConfig};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "phc_memory_test_000000000000000000000000000";
const EVENTS: usize = 120_000;
/// Bytes of unique text per event.
const WIDTH: usize = 200;

async fn run(engine: &Engine, q: &str) -> Result<HogQLRun, QueryError> {
    engine
        .run_hogql(
            TeamId(1),
            q,
            &Default::default(),
            hedgerow_engine::query::Modifiers::default(),
            &CancellationToken::new(),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_queries_spill_or_fail_cleanly_under_the_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let now: DateTime<Utc> = "2024-06-15T12:00:00Z".parse().unwrap();
    let mut cfg = EngineConfig::new(tmp.path());
    cfg.query.memory_limit = 32 << 20;
    let engine = Engine::open(cfg, Arc::new(FixedClock::new(now)))
        .await
        .unwrap();
    engine.bootstrap(Some(TOKEN), None).unwrap();

    // 120 000 events carrying 200 bytes of unique text each: ~24 MB of keys to group or sort,
    // in batches (8192 rows) far smaller than the pool.
    let events: Vec<Map<String, Value>> = (0..EVENTS)
        .map(|i| {
            json!({"event": "e", "distinct_id": format!("u{}", i % 500),
                   "properties": {"text": format!("{i:0>WIDTH$}")}})
            .as_object()
            .unwrap()
            .clone()
        })
        .collect();
    for chunk in events.chunks(5000) {
        engine
            .capture(CapturePayload {
                token: TOKEN.into(),
                sent_at: None,
                historical_migration: false,
                events: chunk.to_vec(),
            })
            .await
            .unwrap();
    }

    // A high-cardinality GROUP BY: the hash table spills its sorted runs.
    let grouped = run(
        &engine,
        "SELECT count() FROM (SELECT properties.text AS t, count() AS c FROM events GROUP BY t HAVING c > 1)",
    )
    .await
    .expect("the aggregation spills and answers");
    assert_eq!(grouped.results[0][0], json!(0));
    assert!(
        grouped.scan.spilled_bytes > 0,
        "nothing spilled: {:?}",
        grouped.scan
    );

    // One array of everything cannot spill: a clear error, not a crash.
    let err = run(
        &engine,
        "SELECT length(groupArray(concat(properties, properties, properties))) FROM events",
    )
    .await
    .err()
    .expect("an 80 MB array does not fit in 32 MiB");
    assert!(matches!(err, QueryError::Memory(_)), "{err:?}");
    assert!(err.to_string().contains("memory"), "{err}");

    // And the next query runs as usual.
    let after = run(&engine, "SELECT count() FROM events").await.unwrap();
    assert_eq!(after.results[0][0], json!(EVENTS));
    engine.shutdown().await;
}
