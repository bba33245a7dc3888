//! Capture bodies sent with the public project key must never stall or kill the service:
//! a gzip body that inflates into millions of tiny JSON values, many of them at once, an
//! event with 200 000 properties. Each is refused (or handled) quickly, the server's peak
//! memory stays bounded, and `/_health` keeps answering meanwhile.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The server's peak resident memory so far (VmHWM), in MiB.
fn peak_rss_mib(srv: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.child.id())).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kb / 1024
}

/// The ceiling the tests hold the server to. Without the limits the amplification body
/// alone took 1.8 GB.
const MAX_PEAK_MIB: u64 = 600;

/// `n` copies of `{"a":0}` in a JSON array, `prefix`/`suffix` around it, gzipped: 8 bytes
/// of text per object, ~700 bytes once parsed.
fn tiny_objects_gzip(prefix: &str, n: usize, suffix: &str) -> (usize, Vec<u8>) {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let chunk = "{\"a\":0},".repeat(10_000);
    enc.write_all(prefix.as_bytes()).unwrap();
    enc.write_all(b"[").unwrap();
    let mut len = prefix.len() + 1;
    let mut left = n - 1;
    while left > 0 {
        let k = left.min(10_000);
        enc.write_all(&chunk.as_bytes()[..k * 8]).unwrap();
        len += k * 8;
        left -= k;
    }
    enc.write_all(b"{\"a\":0}]").unwrap();
    enc.write_all(suffix.as_bytes()).unwrap();
    len += 8 + suffix.len();
    (len, enc.finish().unwrap())
}

/// Asks `/_health` every 100 ms until `stop`; returns the slowest answer. Panics on a
/// failure or an answer slower than `bound`.
fn watch_health(
    srv: &Server,
    stop: Arc<AtomicBool>,
    bound: Duration,
) -> tokio::task::JoinHandle<Duration> {
    let url = srv.url("/_health");
    tokio::spawn(async move {
        let c = reqwest::Client::builder().timeout(bound).build().unwrap();
        let mut slowest = Duration::ZERO;
        let mut answers = 0;
        while !stop.load(Ordering::Relaxed) || answers == 0 {
            let t = Instant::now();
            let r = c.get(&url).send().await;
            let took = t.elapsed();
            match r {
                Ok(r) if r.status() == 200 => {}
                other => panic!("/_health did not answer within {bound:?}: {other:?}"),
            }
            answers += 1;
            slowest = slowest.max(took);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        slowest
    })
}

async fn post_gzip(c: &reqwest::Client, url: &str, body: Vec<u8>) -> (u16, Option<String>, Value) {
    let r = c
        .post(url)
        .header("Content-Encoding", "gzip")
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_amplification_body_is_refused_before_parsing() {
    let srv = Server::start(&[]);
    let c = client();
    // 27 KB of gzip, 18 MB of JSON (under the 20 MiB body limit), 4.5 million values.
    let (len, gz) = tiny_objects_gzip("", 2_250_000, "");
    assert!(len > 17_000_000 && len < 20 << 20, "{len}");
    assert!(gz.len() < 100_000, "{}", gz.len());
    let stop = Arc::new(AtomicBool::new(false));
    let health = watch_health(&srv, stop.clone(), Duration::from_secs(5));
    let started = Instant::now();
    let (status, _, body) = post_gzip(&c, &srv.url("/batch/"), gz).await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    health.await.unwrap();
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["type"], "validation_error");
    assert_eq!(body["code"], "too_many_json_values");
    assert_eq!(body["attr"], Value::Null);
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("1000000"),
        "the refusal says the limit: {detail}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let peak = peak_rss_mib(&srv);
    assert!(peak < MAX_PEAK_MIB, "peak RSS {peak} MiB");
    // Still serving capture.
    let ok = c
        .post(srv.url("/i/v0/e/"))
        .json(&json!({"api_key": TOKEN, "event": "after", "distinct_id": "d"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_eight_amplification_bodies_at_once() {
    // Once with the value limit (refused by the scan), once with it out of the way so the
    // memory budget is what refuses them (each would need ~2 GB parsed).
    for extra in [&[][..], &["--max-json-values", "100000000"][..]] {
        let srv = Server::start(extra);
        let (_, gz) = tiny_objects_gzip("", 2_250_000, "");
        let stop = Arc::new(AtomicBool::new(false));
        let health = watch_health(&srv, stop.clone(), Duration::from_secs(5));
        let mut posts = Vec::new();
        for _ in 0..8 {
            let (url, gz) = (srv.url("/batch/"), gz.clone());
            posts.push(tokio::spawn(
                async move { post_gzip(&client(), &url, gz).await },
            ));
        }
        for p in posts {
            let (status, _, body) = p.await.unwrap();
            assert_eq!(status, 413, "{extra:?}: {body}");
            let code = body["code"].as_str().unwrap();
            if extra.is_empty() {
                assert_eq!(code, "too_many_json_values");
            } else {
                assert_eq!(code, "capture_memory_limit", "{body}");
                let detail = body["detail"].as_str().unwrap();
                assert!(detail.contains("512 MiB"), "{detail}");
            }
        }
        stop.store(true, Ordering::Relaxed);
        let slowest = health.await.unwrap();
        let peak = peak_rss_mib(&srv);
        assert!(peak < MAX_PEAK_MIB, "{extra:?}: peak RSS {peak} MiB");
        eprintln!("{extra:?}: peak RSS {peak} MiB, slowest /_health {slowest:?}");
        let r = client().get(srv.url("/_health")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_heavy_bodies_wait_for_the_memory_budget() {
    // Each body fits the budget alone (~270 MB estimated) but not two at once: the others
    // wait 100 ms, then get a 503 with Retry-After, which PostHog's SDKs retry.
    let srv = Server::start(&[
        "--capture-memory",
        "400MiB",
        "--capture-memory-wait",
        "100ms",
    ]);
    let prefix = format!(r#"{{"api_key": "{TOKEN}", "batch": "#);
    let (_, gz) = tiny_objects_gzip(&prefix, 300_000, "}");
    let stop = Arc::new(AtomicBool::new(false));
    let health = watch_health(&srv, stop.clone(), Duration::from_secs(5));
    let mut posts = Vec::new();
    for _ in 0..8 {
        let (url, gz) = (srv.url("/batch/"), gz.clone());
        posts.push(tokio::spawn(
            async move { post_gzip(&client(), &url, gz).await },
        ));
    }
    let mut ok = 0;
    for p in posts {
        match p.await.unwrap() {
            // The events have no name: skipped, and the request is still a 200 (spec §7).
            (200, _, _) => ok += 1,
            (503, retry, body) => {
                assert_eq!(retry.as_deref(), Some("5"));
                assert_eq!(body["code"], "capture_overloaded", "{body}");
                assert!(
                    body["detail"].as_str().unwrap().contains("400 MiB"),
                    "{body}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(ok >= 1, "at least the first one runs");
    stop.store(true, Ordering::Relaxed);
    health.await.unwrap();
    let peak = peak_rss_mib(&srv);
    assert!(peak < MAX_PEAK_MIB, "peak RSS {peak} MiB");
    eprintln!("{ok} of 8 ran, peak RSS {peak} MiB");
}

fn wide_event(n: usize) -> Vec<u8> {
    let mut s =
        format!(r#"{{"api_key": "{TOKEN}", "event": "wide", "distinct_id": "w", "properties": {{"#);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(r#""property_{i:07}":{i}"#));
    }
    s.push_str("}}");
    s.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_200k_properties_refused_or_handled_quickly() {
    let body = wide_event(200_000);
    assert!(body.len() > 3_500_000, "{}", body.len());
    // Default limits: refused, saying which limit and how many there were.
    {
        let srv = Server::start(&[]);
        let stop = Arc::new(AtomicBool::new(false));
        let health = watch_health(&srv, stop.clone(), Duration::from_secs(5));
        let started = Instant::now();
        let r = client()
            .post(srv.url("/i/v0/e/"))
            .header("Content-Type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        health.await.unwrap();
        assert_eq!(r.status(), 413);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["type"], "validation_error");
        assert_eq!(v["code"], "too_many_properties");
        assert_eq!(v["attr"], "properties");
        let detail = v["detail"].as_str().unwrap();
        assert!(
            detail.contains("200000 properties") && detail.contains("10000"),
            "{detail}"
        );
        assert!(took < Duration::from_secs(20), "took {took:?}");
    }
    // With the limit raised, it is stored, and property definitions take linear time (a
    // scan per new name took over a minute on the request's worker).
    let mut srv = Server::start(&["--max-event-properties", "300000"]);
    let stop = Arc::new(AtomicBool::new(false));
    let health = watch_health(&srv, stop.clone(), Duration::from_secs(5));
    let started = Instant::now();
    let r = client()
        .post(srv.url("/i/v0/e/"))
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let slowest = health.await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    assert!(took < Duration::from_secs(30), "took {took:?}");
    eprintln!("200 000 properties stored in {took:?}, slowest /_health {slowest:?}");
    srv.stop();
    let rows = read_table(&srv.data_dir).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].properties.as_object().unwrap().len(), 200_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_sdk_sized_batches_are_unaffected() {
    let mut srv = Server::start(&[]);
    let c = client();
    let mut n = 0;
    for round in 0..5 {
        // posthog-js shape, gzipped like posthog-js and posthog-node send it.
        let batch: Vec<Value> = (0..100)
            .map(|i| {
                n += 1;
                json!({
                    "event": "$pageview",
                    "distinct_id": format!("user-{}", i % 7),
                    "uuid": format!("00000000-0000-4000-8000-{n:012}"),
                    "timestamp": "2024-05-01T10:00:00Z",
                    "properties": {
                        "$current_url": format!("https://example.com/page/{i}"),
                        "$browser": "Firefox", "$os": "Linux", "$device_type": "Desktop",
                        "$session_id": format!("s-{round}"), "$lib": "web", "n": i,
                        "$set": {"plan": "free"}, "$set_once": {"first_seen": "2024-05-01"},
                    }
                })
            })
            .collect();
        let body = serde_json::to_vec(&json!({"api_key": TOKEN, "batch": batch})).unwrap();
        let r = if round % 2 == 0 {
            post_gzip(&c, &srv.url("/batch/?compression=gzip-js"), gzip(&body)).await
        } else {
            let r = c
                .post(srv.url("/batch/"))
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), None, r.json().await.unwrap())
        };
        assert_eq!((r.0, &r.2), (200, &json!({"status": 1})));
    }
    srv.stop();
    let rows = read_table(&srv.data_dir).await;
    assert_eq!(rows.len(), 500);
    assert!(rows.iter().all(|r| r.properties["$browser"] == "Firefox"));
}
