//! Criterion micro-benchmarks of the hot paths: capture decode + normalize, WAL append,
//! Arrow conversion + buffer append, person processing, and HogQL parse + plan.
//!
//! `cargo bench --bench micro` (add `-- <filter>` for one). Each benchmark first checks that
//! its output is right, so a fast wrong answer cannot pass for a speed-up.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::Write;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use hedgerow_engine::internals::EventBuffer;
use hedgerow_engine::internals::SqliteStore;
use hedgerow_engine::internals::decode::{RawBody, decode_body};
use hedgerow_engine::internals::functions::WeekStart;
use hedgerow_engine::internals::normalize::{NormalizeContext, Outcome, normalize_event};
use hedgerow_engine::internals::overrides::PersonsMode;
use hedgerow_engine::internals::payload::parse_payload;
use hedgerow_engine::internals::person_input;
use hedgerow_engine::internals::schema::Catalog;
use hedgerow_engine::internals::wal::{Wal, WalConfig};
use hedgerow_engine::internals::{Persons, RecordCtx};
use hedgerow_engine::internals::{events_schema, events_to_batch};
use hedgerow_engine::internals::{parser, planner, print};
use hedgerow_engine::model::{Event, TeamId};
use serde_json::{Value, json};

const TOKEN: &str = "phc_benchtoken00000000000000000000000000000";
const EVENTS: usize = 500;

/// What posthog-js sends for a pageview, with the usual ~30 properties.
fn web_event(i: usize) -> Value {
    let browser = ["Chrome", "Safari", "Firefox"][i % 3];
    json!({
        "event": if i.is_multiple_of(5) { "$autocapture" } else { "$pageview" },
        "distinct_id": format!("anon-{}", i % 97),
        "timestamp": format!("2024-05-01T10:{:02}:{:02}.123Z", (i / 60) % 60, i % 60),
        "uuid": format!("0190a0e4-7b1c-7{:03x}-8000-{:012x}", i % 4096, i),
        "properties": {
            "$current_url": format!("https://shop.example.com/p/{}?utm_source=news", i % 40),
            "$pathname": format!("/p/{}", i % 40), "$host": "shop.example.com",
            "$browser": browser, "$browser_version": 124,
            "$os": "Mac OS X", "$os_version": "14.4.1", "$device_type": "Desktop",
            "$screen_height": 1117, "$screen_width": 1728, "$viewport_height": 1000,
            "$viewport_width": 1700, "$lib": "web", "$lib_version": "1.130.0",
            "$insert_id": format!("ins{i}"), "$time": 1714557600.123,
            "$referrer": "https://www.google.com/", "$referring_domain": "www.google.com",
            "$session_id": format!("sess-{}", i % 13), "$window_id": format!("win-{}", i % 13),
            "$pageview_id": format!("pv-{i}"), "utm_source": "news", "$is_identified": false,
            "$device_id": format!("dev-{}", i % 97), "title": "Product page",
            "$set": {"$browser": "Chrome"}, "$set_once": {"$initial_os": "Mac OS X"},
            "$groups": {"company": format!("c{}", i % 5)}, "price": (i % 50) as f64 * 1.5,
            "$process_person_profile": true, "token": TOKEN,
        }
    })
}

fn gzip_body() -> Vec<u8> {
    let batch: Vec<Value> = (0..EVENTS).map(web_event).collect();
    let body = json!({"api_key": TOKEN, "batch": batch}).to_string();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body.as_bytes()).unwrap();
    enc.finish().unwrap()
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn decode_normalize(body: &[u8]) -> Vec<Event> {
    let raw = RawBody {
        body,
        content_type: Some("application/json"),
        content_encoding: Some("gzip"),
        compression: None,
        data_param: None,
    };
    let value = decode_body(&raw, 20 << 20).unwrap();
    let payload = parse_payload(value, None).unwrap();
    let ctx = NormalizeContext {
        team_id: TeamId(1),
        now: now(),
        sent_at: payload.sent_at,
    };
    payload
        .events
        .into_iter()
        .filter_map(|e| match normalize_event(e, &ctx).unwrap() {
            Outcome::Event(e) => Some(e),
            Outcome::Skipped(_) => None,
        })
        .collect()
}

fn capture(c: &mut Criterion) {
    let body = gzip_body();
    let events = decode_normalize(&body);
    assert_eq!(events.len(), EVENTS);
    assert_eq!(events[3].distinct_id, "anon-3");
    assert_eq!(events[0].event, "$autocapture");
    assert!(events[1].properties.contains_key("$set"));
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.bench_function("decode_gzip_and_normalize_500", |b| {
        b.iter(|| black_box(decode_normalize(black_box(&body))))
    });
    g.finish();
}

fn arrow_and_buffer(c: &mut Criterion) {
    let events = decode_normalize(&gzip_body());
    let groups = |_: TeamId, ty: &str| (ty == "company").then_some(0);
    let none = Default::default();
    let batch = events_to_batch(events.iter().map(|e| (TeamId(1), e)), groups, &none);
    assert_eq!(batch.num_rows(), EVENTS);
    assert_eq!(batch.schema(), events_schema());
    let mut g = c.benchmark_group("arrow");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.bench_function("events_to_batch_500", |b| {
        b.iter(|| {
            black_box(events_to_batch(
                events.iter().map(|e| (TeamId(1), e)),
                groups,
                &none,
            ))
        })
    });
    g.bench_function("buffer_append_500", |b| {
        b.iter_batched(
            EventBuffer::default,
            |buf| {
                buf.append(TeamId(1), batch.clone(), 1);
                assert_eq!(buf.stats().rows, EVENTS);
                buf
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn persons(c: &mut Criterion) {
    let events = decode_normalize(&gzip_body());
    let inputs: Vec<_> = events
        .iter()
        .map(|e| person_input(e, |ty| (ty == "company").then_some(0)))
        .collect();
    let names: Vec<String> = events.iter().map(|e| e.event.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("meta.sqlite")).unwrap());
    let mut p = Persons::open(store).unwrap();
    let ctx = RecordCtx {
        team: TeamId(1),
        received: now(),
        actor: None,
        event_names: &names,
    };
    let stamps = p.process(1, &ctx, &inputs).unwrap();
    assert_eq!(stamps.len(), EVENTS);
    assert!(
        stamps[0]
            .properties
            .as_deref()
            .unwrap()
            .contains_key("$initial_os")
    );
    p.commit(1).unwrap();
    let mut seq = 1;
    let mut g = c.benchmark_group("persons");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.bench_function("process_and_commit_500", |b| {
        b.iter(|| {
            seq += 1;
            let s = p.process(seq, &ctx, &inputs).unwrap();
            p.commit(seq).unwrap();
            black_box(s)
        })
    });
    g.finish();
}

fn wal(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, ())>(1 << 16);
    let cfg = WalConfig {
        dir: dir.path().join("wal"),
        ..WalConfig::default()
    };
    let (wal, replay) = Wal::<()>::open(cfg, 0, tx).unwrap();
    assert!(replay.is_empty());
    rt.spawn(async move { while rx.recv().await.is_some() {} });
    let payload = vec![7u8; 64 << 10];
    let first = rt.block_on(wal.append(payload.clone(), ())).unwrap();
    assert_eq!(first, 1);
    let mut g = c.benchmark_group("wal");
    g.throughput(Throughput::Bytes(16 * payload.len() as u64));
    // 16 concurrent appends of 64 KiB (a gzip batch body's worth of JSON each): they share
    // fsyncs (group commit), as concurrent capture requests do.
    g.bench_function("append_16x64KiB_durable", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut hs = Vec::new();
                for _ in 0..16 {
                    let w = wal.clone();
                    let p = payload.clone();
                    hs.push(tokio::spawn(async move { w.append(p, ()).await.unwrap() }));
                }
                let mut seqs = Vec::new();
                for h in hs {
                    seqs.push(h.await.unwrap());
                }
                seqs.sort_unstable();
                assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
            })
        })
    });
    g.finish();
    wal.close();
}

struct BenchCatalog {
    events: Arc<dyn TableProvider>,
}

impl Catalog for BenchCatalog {
    fn table(&self, name: &str) -> Option<Arc<dyn TableProvider>> {
        (name == "events").then(|| self.events.clone())
    }
}

const QUERIES: &[(&str, &str)] = &[
    (
        "trend",
        "SELECT toStartOfDay(timestamp) AS day, count() FROM events WHERE event = '$pageview' \
         AND timestamp >= '2024-01-01' AND timestamp < '2024-04-01' GROUP BY day ORDER BY day",
    ),
    (
        "breakdown",
        "SELECT properties.$browser AS browser, uniq(person_id) AS users, count() AS c FROM events \
         WHERE event IN ('$pageview', '$autocapture') GROUP BY browser ORDER BY c DESC LIMIT 20",
    ),
    (
        "funnel",
        "SELECT countIf(steps >= 1), countIf(steps >= 2) FROM (SELECT person_id, \
         windowFunnel(86400)(timestamp, event = '$pageview', event = 'purchase') AS steps \
         FROM events GROUP BY person_id)",
    ),
];

fn hogql(c: &mut Criterion) {
    let events: Arc<dyn TableProvider> =
        Arc::new(MemTable::try_new(events_schema(), vec![vec![]]).unwrap());
    let catalog = BenchCatalog { events };
    let parse = |t: &str| parser::parse_query(t).map_err(|e| e.to_string());
    let print_expr = |e: &hedgerow_engine::internals::ast::Expr| print::expr(e);
    let ctx = planner::PlanContext {
        catalog: &catalog,
        timezone: "UTC".into(),
        week_start: WeekStart::Sunday,
        now: now(),
        values: HashMap::new(),
        parse: &parse,
        print: &print_expr,
        persons_mode: PersonsMode::default(),
    };
    let mut g = c.benchmark_group("hogql");
    for (name, text) in QUERIES {
        let q = parser::parse_query(text).unwrap();
        let plan = planner::plan_query(&q, &ctx).unwrap();
        assert!(!plan.schema().fields().is_empty());
        if *name == "breakdown" {
            let cols: Vec<&str> = plan
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            assert_eq!(cols, ["browser", "users", "c"]);
        }
        g.bench_function(format!("parse_and_plan_{name}"), |b| {
            b.iter(|| {
                let q = parser::parse_query(black_box(text)).unwrap();
                black_box(planner::plan_query(&q, &ctx).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, capture, arrow_and_buffer, persons, wal, hogql);
criterion_main!(benches);
