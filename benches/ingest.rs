//! Capture throughput, bytes per event on disk and flush latency, against the real binary.
//!
//! `cargo bench --bench ingest -- [--events N] [--clients C] [--batch B] [--gzip]`
//!
//! Starts `hedgerow serve` (release build) on a fresh data directory, sends PostHog-shaped
//! web events (what posthog-js sends for `$pageview`, `$autocapture` and custom events)
//! through `/batch/` from C concurrent clients with durable acks, then reports events/s,
//! MB/s, the WAL fsyncs that served them, bytes per event in committed Parquet, and the time
//! from a 200 to the event being in a committed file at the default flush settings. Checks
//! that every acknowledged event was committed (row count from the metrics).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const TOKEN: &str = "phc_benchtoken00000000000000000000000000000";

struct Args {
    events: usize,
    clients: usize,
    batch: usize,
    gzip: bool,
    flush_interval: String,
}

fn args() -> Args {
    let mut a = Args {
        events: 200_000,
        clients: 4,
        batch: 100,
        gzip: false,
        flush_interval: "10s".into(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--events" => a.events = v.parse().expect("--events N"),
            "--clients" => a.clients = v.parse().expect("--clients N"),
            "--batch" => a.batch = v.parse().expect("--batch N"),
            "--flush-interval" => a.flush_interval = v,
            "--gzip" => {
                a.gzip = true;
                i -= 1;
            }
            _ => {
                i -= 1; // cargo passes --bench; ignore unknown flags
            }
        }
        i += 2;
    }
    a
}

const PATHS: &[&str] = &[
    "/",
    "/pricing",
    "/docs",
    "/docs/getting-started",
    "/blog",
    "/blog/launch",
    "/signup",
    "/login",
    "/app",
    "/app/settings",
    "/app/dashboard",
    "/features",
    "/about",
    "/careers",
    "/contact",
];
const BROWSERS: &[(&str, f64)] = &[
    ("Chrome", 0.64),
    ("Safari", 0.19),
    ("Firefox", 0.06),
    ("Microsoft Edge", 0.05),
    ("Samsung Internet", 0.03),
    ("Opera", 0.03),
];
const OSES: &[&str] = &["Windows", "Mac OS X", "iOS", "Android", "Linux"];
const REFERRERS: &[&str] = &[
    "$direct",
    "https://www.google.com/",
    "https://news.ycombinator.com/",
    "https://twitter.com/",
    "https://www.bing.com/",
    "https://github.com/",
];

/// One PostHog-shaped event, as posthog-js sends it.
fn web_event(rng: &mut StdRng, i: usize) -> Value {
    let person = (rng.random::<f64>().powi(3) * 20_000.0) as usize; // heavy-tailed activity
    let session = format!(
        "0190{:04x}-{:04x}-7000-8000-{:012x}",
        person % 65536,
        i / 50 % 65536,
        person
    );
    let path = PATHS[rng.random_range(0..PATHS.len())];
    let mut roll = rng.random::<f64>();
    let browser = BROWSERS
        .iter()
        .find(|(_, p)| {
            roll -= p;
            roll <= 0.0
        })
        .map_or("Chrome", |b| b.0);
    let os = OSES[rng.random_range(0..OSES.len())];
    let mobile = matches!(os, "iOS" | "Android");
    let referrer = REFERRERS[rng.random_range(0..REFERRERS.len())];
    let kind = rng.random_range(0..10);
    let event = match kind {
        0..=5 => "$pageview",
        6..=7 => "$autocapture",
        8 => "$pageleave",
        _ => "purchase",
    };
    let mut props = json!({
        "$os": os, "$os_version": "14.4.1", "$browser": browser, "$browser_version": 124,
        "$device_type": if mobile { "Mobile" } else { "Desktop" },
        "$current_url": format!("https://example.com{path}"), "$host": "example.com", "$pathname": path,
        "$raw_user_agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
        "$browser_language": "en-US", "$screen_height": 1117, "$screen_width": 1728,
        "$viewport_height": 959, "$viewport_width": 1728, "$lib": "web", "$lib_version": "1.130.0",
        "$insert_id": format!("{:016x}", rng.random::<u64>()), "$time": 1_714_557_600.123 + i as f64,
        "$device_id": format!("018f{:04x}-aaaa-7bbb-8ccc-{:012x}", person % 65536, person),
        "$referrer": referrer, "$referring_domain": referrer.trim_start_matches("https://").trim_end_matches('/'),
        "$session_id": session, "$window_id": format!("0190{:04x}-0000-7000-8000-000000000001", person % 65536),
        "$pageview_id": format!("{:032x}", rng.random::<u128>()), "$is_identified": person.is_multiple_of(3),
        "$process_person_profile": true, "token": TOKEN,
        "$configured_session_timeout_ms": 1_800_000, "$session_entry_url": "https://example.com/",
    });
    if rng.random_range(0..4) == 0 {
        props["utm_source"] = json!("newsletter");
        props["utm_medium"] = json!("email");
        props["utm_campaign"] = json!(format!("spring-{}", rng.random_range(0..5)));
    }
    if event == "$autocapture" {
        props["$event_type"] = json!("click");
        props["$elements"] = json!([{"tag_name": "button", "classes": ["btn", "btn-primary"], "$el_text": "Get started", "nth_child": 2, "nth_of_type": 1, "attr__class": "btn btn-primary"}, {"tag_name": "div", "classes": ["hero"], "nth_child": 1, "nth_of_type": 1}]);
    }
    if event == "purchase" {
        props["revenue"] = json!((rng.random_range(500..20_000) as f64) / 100.0);
        props["currency"] = json!("USD");
        props["plan"] = json!(["free", "pro", "team"][rng.random_range(0..3)]);
    }
    json!({
        "event": event, "distinct_id": format!("user-{person}"), "properties": props,
        "uuid": uuid::Uuid::now_v7().to_string(),
        "timestamp": (chrono::Utc::now() - chrono::Duration::seconds(rng.random_range(0..3600))).to_rfc3339(),
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn dir_bytes(path: &std::path::Path, ext: &str) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                total += dir_bytes(&p, ext);
            } else if p.extension().is_some_and(|x| x == ext) {
                total += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    total
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn get_metrics(http: &reqwest::Client, base: &str) -> String {
    let r = http.get(format!("{base}/metrics")).send().await.unwrap();
    r.text().await.unwrap()
}

#[tokio::main]
async fn main() {
    let a = args();
    let tmp = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_hedgerow");
    let mut child = Command::new(bin)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--log",
            "warn",
            "--project-api-key",
            TOKEN,
            "--flush-interval",
            &a.flush_interval,
            "--data-dir",
        ])
        .arg(tmp.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let base = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("hedgerow listening on ").map(str::to_owned))
        .expect("hedgerow started");

    // Pre-build the request bodies so the client measures the server, not JSON encoding.
    let mut rng = StdRng::seed_from_u64(42);
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut json_bytes = 0usize;
    for start in (0..a.events).step_by(a.batch) {
        let batch: Vec<Value> = (start..(start + a.batch).min(a.events))
            .map(|i| web_event(&mut rng, i))
            .collect();
        let body = serde_json::to_vec(
            &json!({"api_key": TOKEN, "batch": batch, "sent_at": chrono::Utc::now().to_rfc3339()}),
        )
        .unwrap();
        json_bytes += body.len();
        bodies.push(if a.gzip { gzip(&body) } else { body });
    }
    let wire_bytes: usize = bodies.iter().map(Vec::len).sum();
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    let http = reqwest::Client::builder()
        .no_gzip()
        .pool_max_idle_per_host(a.clients)
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.clients {
        let (bodies, next, http, url, gz) = (
            bodies.clone(),
            next.clone(),
            http.clone(),
            format!("{base}/batch/"),
            a.gzip,
        );
        tasks.push(tokio::spawn(async move {
            let mut ok = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let mut req = http
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .body(body.clone());
                if gz {
                    req = req.header("Content-Encoding", "gzip");
                }
                let r = req.send().await.expect("request");
                assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
                ok += 1;
            }
            ok
        }));
    }
    let mut requests = 0;
    for t in tasks {
        requests += t.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let m = get_metrics(&http, &base).await;
    let fsyncs = metric(&m, "hedgerow_wal_fsyncs_total");
    assert_eq!(
        metric(&m, "hedgerow_events_accepted_total") as usize,
        a.events,
        "every event acknowledged"
    );

    // Freshness: one more event, then wait for a commit that covers it.
    let t0 = Instant::now();
    let r = http
        .post(format!("{base}/i/v0/e/"))
        .json(&json!({"api_key": TOKEN, "event": "fresh", "distinct_id": "f"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let health: Value = http
        .get(format!("{base}/_health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let target = health["last_wal_seq"].as_u64().unwrap();
    loop {
        let h: Value = http
            .get(format!("{base}/_health"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if h["committed_wal_seq"].as_u64().unwrap() >= target {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let freshness = t0.elapsed().as_secs_f64();
    let m = get_metrics(&http, &base).await;
    let rows = metric(&m, "hedgerow_flushed_rows_total");
    assert_eq!(
        rows as usize,
        a.events + 1,
        "every acknowledged event is in a committed file"
    );
    let parquet = dir_bytes(&tmp.path().join("events"), "parquet");
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();

    println!(
        "hedgerow ingest: {} events, {} clients, batches of {}{}",
        a.events,
        a.clients,
        a.batch,
        if a.gzip { ", gzip" } else { "" }
    );
    println!("  events/s          {:.0}", a.events as f64 / elapsed);
    println!(
        "  requests/s        {:.0}  ({requests} requests, {fsyncs} WAL fsyncs)",
        requests as f64 / elapsed
    );
    println!(
        "  MB/s on the wire  {:.1}  (JSON {:.1} MB/s)",
        wire_bytes as f64 / elapsed / 1e6,
        json_bytes as f64 / elapsed / 1e6
    );
    println!(
        "  JSON bytes/event  {:.0}",
        json_bytes as f64 / a.events as f64
    );
    println!(
        "  Parquet bytes/event {:.1}  ({} bytes for {} rows)",
        parquet as f64 / rows as f64,
        parquet,
        rows
    );
    println!(
        "  200 → committed   {:.2} s  (flush interval {})",
        freshness, a.flush_interval
    );
}
