//! Queries that used to kill or stall the whole service (issue 17): deep nesting, a long
//! IN list, string functions that allocate without bound, one expensive query holding every
//! core. Each must answer (a result or a clear error) while the server stays up and keeps
//! serving `/_health` and capture.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

async fn query(srv: &Server, q: &str) -> (u16, Value) {
    query_with(srv, json!({"query": {"kind": "HogQLQuery", "query": q}})).await
}

async fn query_with(srv: &Server, body: Value) -> (u16, Value) {
    let r = post_query(srv, body).await;
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// POSTs to the query endpoint and hands back the whole response (status, headers).
async fn post_query(srv: &Server, body: Value) -> reqwest::Response {
    long_client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn long_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap()
}

/// The server is alive and answers `/_health` within `within`.
async fn healthy(srv: &Server, within: Duration) {
    let r = reqwest::Client::builder()
        .timeout(within)
        .build()
        .unwrap()
        .get(srv.url("/_health"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("/_health did not answer within {within:?}: {e}"));
    assert_eq!(r.status(), 200);
}

async fn capture_n(srv: &Server, n: usize) {
    let batch: Vec<Value> = (0..n)
        .map(|i| json!({"event": "e", "distinct_id": format!("u{i}"), "properties": {"i": i}}))
        .collect();
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn nest(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_and_wide_queries_answer_instead_of_crashing() {
    // What is checked is that these answer, not how fast: with two fuzzers on the same
    // 2 cores one of them once answered non-200 (the message was lost); the default
    // 2-minute query timeout is the likeliest cause, so it is taken out of the picture.
    let srv = Server::start(&["--query-timeout", "1h"]);
    capture_n(&srv, 10).await;

    // An ordinary "these 3 000 ids" query.
    let ids: Vec<String> = (0..3000).map(|i| format!("'u{i}'")).collect();
    let (st, r) = query(
        &srv,
        &format!(
            "SELECT count() FROM events WHERE distinct_id IN ({})",
            ids.join(", ")
        ),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([[10]]));
    let nums: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
    let (st, r) = query(
        &srv,
        &format!(
            "SELECT countIf(toInt(properties.i) NOT IN ({})) FROM events",
            nums[3..].join(", ")
        ),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([[3]]));

    // Nesting up to the parser's limits answers; past them is a clear 400.
    let cases = [
        (format!("SELECT {}", nest("abs(", "1", ")", 500)), "1"),
        (format!("SELECT {}", nest("(", "1", ")", 500)), "1"),
        (format!("SELECT {}", nest("(1 + ", "1", ")", 250)), "251"),
        (format!("SELECT {}", vec!["1"; 500].join(" + ")), "500"),
        (format!("SELECT {}", nest("(SELECT ", "1", ")", 10)), "1"),
        (
            format!(
                "SELECT count() FROM events WHERE {}",
                nest(
                    "distinct_id IN (SELECT distinct_id FROM events WHERE ",
                    "1 = 1",
                    ")",
                    10
                )
            ),
            "10",
        ),
        (
            format!(
                "SELECT count() FROM {}",
                nest("(SELECT * FROM ", "events", ")", 99)
            ),
            "10",
        ),
        (
            format!(
                "SELECT sum(x) FROM (SELECT 1 AS x{})",
                " UNION ALL SELECT 1".repeat(499)
            ),
            "500",
        ),
    ];
    for (q, want) in &cases {
        let (st, r) = query(&srv, q).await;
        assert_eq!(st, 200, "{}…: {r}", &q[..60.min(q.len())]);
        assert_eq!(r["results"][0][0].to_string(), *want, "{}…", &q[..60]);
    }
    for q in [
        format!("SELECT {}", nest("abs(", "1", ")", 600)),
        format!("SELECT {}", nest("(SELECT ", "1", ")", 11)),
        format!(
            "SELECT count() FROM events WHERE {}",
            nest(
                "distinct_id IN (SELECT distinct_id FROM events WHERE ",
                "1 = 1",
                ")",
                11
            )
        ),
        format!("SELECT {}", nest("(SELECT ", "1", ")", 500)),
        format!(
            "SELECT count() FROM {}",
            nest("(SELECT * FROM ", "events", ")", 500)
        ),
        format!("SELECT {}", vec!["1"; 20_000].join(" + ")),
    ] {
        let (st, r) = query(&srv, &q).await;
        assert_eq!(st, 400, "{r}");
        assert!(
            r["detail"].as_str().unwrap().contains("nested too deeply"),
            "{r}"
        );
    }
    healthy(&srv, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_functions_refuse_huge_results_with_a_clear_error() {
    // A small pool, so the pool is what refuses the nested concats.
    let srv = Server::start(&["--query-memory-limit", "256MiB"]);
    capture_n(&srv, 4).await;
    let refused = [
        // ClickHouse's own limits, with its messages.
        ("SELECT leftPad('a', 1000000000000)", "New padded length"),
        (
            "SELECT rightPad('a', 1000000000000, 'xy')",
            "New padded length",
        ),
        (
            "SELECT repeat('a', 1000000000000)",
            "Too many times to repeat",
        ),
        (
            "SELECT repeat(repeat('a', 1048576), 1048576)",
            "Too many times to repeat",
        ),
        // Within ClickHouse's per-call limits but not within memory.
        (
            "SELECT length(repeat(repeat('a', 1000000), 1000000))",
            "query_memory_limit",
        ),
        (
            "SELECT replaceAll(repeat('a', 1000000), 'a', repeat('b', 1000000))",
            "query_memory_limit",
        ),
        (
            "SELECT replaceRegexpAll(repeat('a', 1000000), 'a', repeat('b', 1000000))",
            "query_memory_limit",
        ),
        // Doubling by nesting: 1 MB, 2 MB, … 512 MB, past the 256 MiB pool.
        (
            "WITH repeat('x', 1000000) AS a, concat(a, a) AS b, concat(b, b) AS c, \
             concat(c, c) AS d, concat(d, d) AS e, concat(e, e) AS f, concat(f, f) AS g, \
             concat(g, g) AS h, concat(h, h) AS i, concat(i, i) AS j SELECT length(j) FROM events",
            "query_memory_limit",
        ),
        (
            "SELECT length(arrayStringConcat(range(1000000), repeat('x', 1000000)))",
            "query_memory_limit",
        ),
    ];
    for (q, want) in refused {
        let t = Instant::now();
        let (st, r) = query(&srv, q).await;
        assert_eq!(st, 400, "{q}: {r}");
        let text = r.to_string();
        assert!(text.contains(want), "{q}: {r}");
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{q} took {:?}",
            t.elapsed()
        );
        healthy(&srv, Duration::from_secs(5)).await;
    }
    // The same functions at ordinary sizes still answer.
    let (st, r) = query(
        &srv,
        "SELECT length(repeat('ab', 1000000)), length(leftPad('a', 1000000)), length(replaceAll(repeat('a', 1000), 'a', 'bb'))",
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([[2000000, 1000000, 2000]]));
    // An index at the edge of Int64 is an ordinary out-of-range index (ClickHouse: the
    // default), not a panic.
    let (st, r) = query(
        &srv,
        "SELECT [1, 2][-9223372036854775808], [1, 2][9223372036854775807], right('abc', -9223372036854775807)",
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([[0, 0, ""]]));
    let (st, r) = query(&srv, "SELECT right('abc', -9223372036854775808)").await;
    assert_eq!(st, 400, "{r}");
    assert!(
        r["detail"].as_str().unwrap().contains("out of bound"),
        "{r}"
    );
}

/// Waits (up to 30 s) until the project may run a query again: refused with 429 until
/// then, and `held` says what still holds the places after that.
async fn places_come_back(srv: &Server, held: &str) {
    let t = Instant::now();
    loop {
        // Not `SELECT 1`: the test asks that too, and it must not come from the result cache.
        let (st, r) = query_with(
            srv,
            json!({"query": {"kind": "HogQLQuery", "query": "SELECT 2"}, "refresh": "force_blocking"}),
        )
        .await;
        if st == 200 {
            return;
        }
        assert_eq!(st, 429, "{r}");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{held} after {:?}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heavy_query_does_not_stall_the_service_and_stops_at_its_limits() {
    let srv = Server::start(&[
        "--query-timeout",
        "3s",
        "--query-concurrency-per-project",
        "2",
    ]);
    capture_n(&srv, 1000).await;
    // A triple self cross join: 10⁹ rows, minutes of CPU.
    let heavy = "SELECT count() FROM events a CROSS JOIN events b CROSS JOIN events c \
                 WHERE a.distinct_id != concat(b.distinct_id, c.distinct_id)";

    // Blocking: stopped at the time limit with a clear error; health and capture are
    // answered meanwhile.
    let srv_url = srv.url("/api/projects/1/query/");
    let blocking = tokio::spawn(async move {
        let t = Instant::now();
        let r = long_client()
            .post(srv_url)
            .bearer_auth(KEY)
            .json(&json!({"query": {"kind": "HogQLQuery", "query": heavy}}))
            .send()
            .await
            .unwrap();
        (
            t.elapsed(),
            r.status().as_u16(),
            r.json::<Value>().await.unwrap(),
        )
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..5 {
        healthy(&srv, Duration::from_secs(2)).await;
        let t = Instant::now();
        capture_n(&srv, 10).await;
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "capture took {:?}",
            t.elapsed()
        );
    }
    let (took, st, r) = blocking.await.unwrap();
    assert_eq!(st, 400, "{r}");
    assert_eq!(r["code"], "query_timeout", "{r}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // The caller is answered at the deadline; the query's place is given back when its
    // task next returns to the scheduler (within 128 batches of the join), which under a
    // loaded machine can come after the answer. Wait for it, so the counts below are of
    // the async queries alone.
    places_come_back(&srv, "the timed-out query still holds its place").await;

    // Async: DELETE stops it; its status says cancelled.
    let (st, r) = query_with(
        &srv,
        json!({"query": {"kind": "HogQLQuery", "query": heavy}, "refresh": "async", "client_query_id": "heavy-1"}),
    )
    .await;
    assert_eq!(st, 202, "{r}");
    // A third query of this project while two run is refused with a 429.
    let (st2, r2) = query_with(
        &srv,
        json!({"query": {"kind": "HogQLQuery", "query": heavy}, "refresh": "async", "client_query_id": "heavy-2"}),
    )
    .await;
    assert_eq!(st2, 202, "{r2}");
    let r = post_query(
        &srv,
        json!({"query": {"kind": "HogQLQuery", "query": "SELECT 1"}}),
    )
    .await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "throttled_error", "{body}");
    for id in ["heavy-1", "heavy-2"] {
        let r = client()
            .delete(srv.url(&format!("/api/projects/1/query/{id}/")))
            .bearer_auth(KEY)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }
    // Slots come back once the cancelled queries stop.
    places_come_back(&srv, "the cancelled queries still hold their slots").await;

    // A blocking client that goes away cancels its query.
    let r = long_client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .timeout(Duration::from_millis(700))
        .json(&json!({"query": {"kind": "HogQLQuery", "query": heavy}, "client_query_id": "gone"}))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up first");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = client()
            .get(srv.url("/api/projects/1/query/gone/log/"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        let log: Value = r.json().await.unwrap();
        if log["status"] == "cancelled" {
            break;
        }
        assert!(Instant::now() < deadline, "still {log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    healthy(&srv, Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_client_query_id_is_refused() {
    let srv = Server::start(&[]);
    let (st, r) = query_with(
        &srv,
        json!({"query": {"kind": "HogQLQuery", "query": "SELECT 1"}, "client_query_id": "x".repeat(100_000)}),
    )
    .await;
    assert_eq!(st, 400, "{r}");
    assert_eq!(r["attr"], "client_query_id", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_requests_over_the_rate_are_throttled_with_retry_after() {
    let srv = Server::start(&["--query-rate-per-minute", "3"]);
    for _ in 0..3 {
        let (st, r) = query(&srv, "SELECT 1").await;
        assert_eq!(st, 200, "{r}");
    }
    let r = post_query(
        &srv,
        json!({"query": {"kind": "HogQLQuery", "query": "SELECT 1"}}),
    )
    .await;
    assert_eq!(r.status(), 429);
    // 3 a minute refill one every 20 s.
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&wait), "{wait}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "throttled_error", "{body}");
    assert_eq!(body["code"], "throttled", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("3 query requests per minute"),
        "{body}"
    );
    // Reading a query's status or log is not a query request.
    let r = client()
        .get(srv.url("/api/projects/1/query/nope/"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}
