//! The query API on the real binary: refresh modes, cache, async runs, cancel, log, errors,
//! limits, upgrade/draft/async-check, project isolation, and `hedgerow query`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

async fn capture(srv: &Server, token: &str, events: Vec<Value>) {
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": token, "batch": events}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn ev(name: &str, i: usize) -> Value {
    json!({"event": name, "distinct_id": format!("u{}", i % 7),
           "properties": {"$browser": if i.is_multiple_of(2) { "Chrome" } else { "Safari" }, "n": i}})
}

async fn post(srv: &Server, project: i64, body: Value) -> (u16, Value) {
    let r = client()
        .post(srv.url(&format!("/api/projects/{project}/query/")))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn get(srv: &Server, path: &str) -> (u16, Value) {
    let r = client()
        .get(srv.url(path))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn hogql(q: &str) -> Value {
    json!({"kind": "HogQLQuery", "query": q})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_modes_cache_and_response_shape() {
    let srv = Server::start(&["--flush-interval", "1h"]);
    capture(&srv, TOKEN, (0..10).map(|i| ev("$pageview", i)).collect()).await;
    let q = "SELECT properties.$browser AS browser, count() FROM events GROUP BY browser ORDER BY browser";

    // Blocking: computed, and the events captured a moment ago are visible.
    let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([["Chrome", 5], ["Safari", 5]]));
    assert_eq!(r["columns"], json!(["browser", "count()"]));
    assert_eq!(
        r["types"],
        json!([["browser", "Nullable(String)"], ["count()", "UInt64"]])
    );
    for f in [
        "results",
        "columns",
        "types",
        "hogql",
        "clickhouse",
        "timings",
        "error",
        "hasMore",
        "limit",
        "offset",
        "modifiers",
        "is_cached",
        "last_refresh",
        "next_allowed_client_refresh",
        "cache_key",
        "timezone",
        "query_status",
    ] {
        assert!(r.get(f).is_some(), "response lacks {f}: {r}");
    }
    assert_eq!(r["is_cached"], false);
    assert_eq!(r["hasMore"], false);
    assert_eq!(r["timezone"], "UTC");
    assert!(r["hogql"].as_str().unwrap().contains("GROUP BY"), "{r}");
    assert!(
        r["timings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["k"] == "./execute")
    );
    assert_eq!(r["query_status"]["complete"], true);

    // Unchanged data: an exact cache hit.
    let (_, r2) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(r2["is_cached"], true);
    assert_eq!(r2["results"], r["results"]);
    // force_blocking always computes.
    let (_, r3) = post(
        &srv,
        1,
        json!({"query": hogql(q), "refresh": "force_blocking"}),
    )
    .await;
    assert_eq!(r3["is_cached"], false);

    // New data: blocking recomputes (very fresh = 0s by default) ...
    capture(&srv, TOKEN, vec![ev("$pageview", 2)]).await;
    let (_, r4) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(r4["is_cached"], false);
    assert_eq!(r4["results"], json!([["Chrome", 6], ["Safari", 5]]));
    // ... lazy_async serves the somewhat-fresh (1 min) entry on changed data.
    capture(&srv, TOKEN, vec![ev("$pageview", 4)]).await;
    let (st, r5) = post(&srv, 1, json!({"query": hogql(q), "refresh": "lazy_async"})).await;
    assert_eq!((st, &r5["is_cached"]), (200, &json!(true)));
    assert_eq!(r5["results"], json!([["Chrome", 6], ["Safari", 5]]));
    // force_cache: a hit, and a miss that completes at once without computing.
    let (st, r6) = post(
        &srv,
        1,
        json!({"query": hogql(q), "refresh": "force_cache"}),
    )
    .await;
    assert_eq!((st, &r6["is_cached"]), (200, &json!(true)));
    let (st, r7) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 42"), "refresh": "force_cache"}),
    )
    .await;
    assert_eq!(st, 200);
    assert!(r7["results"].is_null(), "{r7}");
    assert_eq!(r7["is_cached"], false);
    assert_eq!(r7["query_status"]["complete"], true);
    let (_, r8) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 42"), "refresh": "force_cache"}),
    )
    .await;
    assert!(
        r8["results"].is_null(),
        "force_cache must never compute: {r8}"
    );

    // Placeholders from `values`.
    let (st, r) = post(
        &srv,
        1,
        json!({"query": {"kind": "HogQLQuery", "query": "SELECT count() FROM events WHERE properties.$browser = {b}", "values": {"b": "Safari"}}}),
    )
    .await;
    assert_eq!((st, &r["results"]), (200, &json!([[5]])), "{r}");

    // The query log is a table too.
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT count() > 0 FROM query_log WHERE status = 'completed'")}),
    )
    .await;
    assert_eq!((st, &r["results"]), (200, &json!([[true]])), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_runs_poll_cancel_and_log() {
    let srv = Server::start(&[]);
    capture(&srv, TOKEN, (0..200).map(|i| ev("e", i)).collect()).await;

    // async: 202 at once, then poll until done.
    let (st, r) = post(&srv, 1, json!({"query": hogql("SELECT count() FROM events"), "refresh": "async", "client_query_id": "my-count", "name": "count them"})).await;
    assert_eq!(st, 202, "{r}");
    assert_eq!(r["query_status"]["complete"], false);
    assert_eq!(r["query_status"]["id"], "my-count");
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let (st, r) = get(&srv, "/api/projects/1/query/my-count/").await;
        match st {
            200 => break r,
            202 => assert_eq!(r["query_status"]["complete"], false),
            other => panic!("status {other}: {r}"),
        }
        assert!(Instant::now() < deadline, "async query never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["query_status"]["complete"], true);
    assert_eq!(done["query_status"]["results"]["results"], json!([[200]]));

    // Its log entry.
    let (st, log) = get(&srv, "/api/projects/1/query/my-count/log/").await;
    assert_eq!(st, 200, "{log}");
    assert_eq!(log["status"], "completed");
    assert_eq!(log["name"], "count them");
    assert_eq!(log["result_rows"], 1);
    assert_eq!(log["query"], "SELECT count() FROM events");
    let (st, _) = get(&srv, "/api/projects/1/query/nope/log/").await;
    assert_eq!(st, 404);
    let (st, b) = get(&srv, "/api/projects/1/query/nope/").await;
    assert_eq!((st, b["type"].as_str()), (404, Some("not_found")));

    // Cancel a query that would run for minutes: DELETE stops it.
    let slow = "SELECT count() FROM events a CROSS JOIN events b CROSS JOIN events c CROSS JOIN events d WHERE toInt(a.properties.n) + toInt(b.properties.n) = toInt(c.properties.n) + toInt(d.properties.n)";
    let (st, _) = post(
        &srv,
        1,
        json!({"query": hogql(slow), "refresh": "force_async", "client_query_id": "slow"}),
    )
    .await;
    assert_eq!(st, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (st, r) = get(&srv, "/api/projects/1/query/slow/").await;
    assert_eq!(st, 202, "the slow query should still be running: {r}");
    let r = client()
        .delete(srv.url("/api/projects/1/query/slow/"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (st, r) = get(&srv, "/api/projects/1/query/slow/").await;
        if st == 400 {
            assert_eq!(r["query_status"]["error"], true, "{r}");
            assert!(
                r["query_status"]["error_message"]
                    .as_str()
                    .unwrap()
                    .contains("cancelled"),
                "{r}"
            );
            break;
        }
        assert_eq!(st, 202);
        assert!(Instant::now() < deadline, "cancel did not stop the query");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, log) = get(&srv, "/api/projects/1/query/slow/log/").await;
    assert_eq!(log["status"], "cancelled", "{log}");
    // The server is still answering quickly after the cancel.
    let (st, r) = post(&srv, 1, json!({"query": hogql("SELECT 1")})).await;
    assert_eq!((st, &r["results"]), (200, &json!([[1]])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_limits_and_isolation() {
    let srv = Server::start(&[]);
    capture(&srv, TOKEN, (0..150).map(|i| ev("e", i)).collect()).await;

    let (st, r) = post(&srv, 1, json!({"query": hogql("SELECT event FROM events")})).await;
    assert_eq!(st, 200);
    assert_eq!(r["results"].as_array().unwrap().len(), 100);
    assert_eq!(
        (r["hasMore"].as_bool(), r["limit"].as_u64()),
        (Some(true), Some(100))
    );
    let (_, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT event FROM events LIMIT 120")}),
    )
    .await;
    assert_eq!(r["results"].as_array().unwrap().len(), 120);
    assert_eq!(r["hasMore"], false);
    let (_, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT event FROM events LIMIT 1000000")}),
    )
    .await;
    assert_eq!(
        (r["results"].as_array().unwrap().len(), r["limit"].as_u64()),
        (150, Some(50_000))
    );

    let err = |st: u16, r: &Value, code: &str| {
        assert_eq!(st, 400, "{r}");
        assert_eq!(r["type"], "validation_error", "{r}");
        assert_eq!(r["code"], code, "{r}");
        assert!(r.get("attr").is_some());
    };
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT count( FROM events")}),
    )
    .await;
    err(st, &r, "hogql_syntax_error");
    assert!(
        r["detail"].as_str().unwrap().contains("line 1, column"),
        "{r}"
    );
    // A blocking query that fails carries its status, as an async one's poll shows it.
    let status = &r["query_status"];
    assert_eq!(
        (
            &status["error"],
            &status["complete"],
            &status["query_async"]
        ),
        (&json!(true), &json!(true), &json!(false)),
        "{r}"
    );
    assert_eq!(status["error_message"], r["detail"], "{r}");
    assert_eq!(status["team_id"], 1, "{r}");
    let id = status["id"].as_str().unwrap();
    let (st, polled) = get(&srv, &format!("/api/projects/1/query/{id}/")).await;
    assert_eq!(st, 400, "{polled}");
    assert_eq!(polled["query_status"]["error_message"], r["detail"]);
    let (st, r) = post(&srv, 1, json!({"query": hogql("SELECT nope(1)")})).await;
    err(st, &r, "hogql_query_error");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("Unknown function `nope`"),
        "{r}"
    );
    for q in [
        "SELECT * FROM file('/etc/passwd')",
        "SELECT * FROM system.tables",
        "SELECT * FROM url('http://x')",
    ] {
        let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
        err(st, &r, "hogql_query_error");
    }
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 1"), "name": "x".repeat(129)}),
    )
    .await;
    err(st, &r, "invalid_input");
    assert_eq!(r["attr"], "name");
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 1"), "name": "x".repeat(128)}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 1"), "refresh": "sometimes"}),
    )
    .await;
    err(st, &r, "invalid_input");
    assert_eq!(r["attr"], "refresh");
    let (st, r) = post(&srv, 1, json!({"query": hogql("SELECT 1"), "refresh": 2})).await;
    err(st, &r, "invalid_input");
    assert_eq!(r["attr"], "refresh");
    let (st, r) = post(&srv, 1, json!({"query": {"kind": "TrendsQuery"}})).await;
    err(st, &r, "invalid_input");
    let (st, r) = post(&srv, 1, json!({})).await;
    err(st, &r, "required");
    assert_eq!(r["attr"], "query");
    let (st, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT 1"), "client_query_id": ""}),
    )
    .await;
    err(st, &r, "invalid_input");
    assert_eq!(r["attr"], "client_query_id");
    let (st, _) = post(&srv, 99, json!({"query": hogql("SELECT 1")})).await;
    assert_eq!(st, 404);

    // Another project's events never show.
    let r = client()
        .post(srv.url("/api/projects/"))
        .bearer_auth(KEY)
        .json(&json!({"name": "other"}))
        .send()
        .await
        .unwrap();
    let other: Value = r.json().await.unwrap();
    let token = other["api_token"].as_str().unwrap().to_string();
    capture(&srv, &token, vec![ev("secret", 1)]).await;
    let (_, r) = post(
        &srv,
        1,
        json!({"query": hogql("SELECT count() FROM events WHERE event = 'secret'")}),
    )
    .await;
    assert_eq!(r["results"], json!([[0]]));
    let (_, r) = post(
        &srv,
        other["id"].as_i64().unwrap(),
        json!({"query": hogql("SELECT count(), any(event) FROM events")}),
    )
    .await;
    assert_eq!(r["results"], json!([[1, "secret"]]));

    // upgrade, check_auth_for_async, draft_sql.
    let r = client()
        .post(srv.url("/api/projects/1/query/upgrade/"))
        .bearer_auth(KEY)
        .json(&json!({"query": {"kind": "EventsNode", "event": "$pageview"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let up: Value = r.json().await.unwrap();
    assert_eq!(up["query"]["version"], 1);
    assert!(up["query"]["math"].is_null() && up["query"].get("math").is_some());
    // An older trend (kind-less series, hidden legend indexes) comes back at its latest
    // version, and the upgraded node runs.
    let r = client()
        .post(srv.url("/api/projects/1/query/upgrade/"))
        .bearer_auth(KEY)
        .json(
            &json!({"query": {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery",
            "series": [{"event": "$pageview"}], "trendsFilter": {"hiddenLegendIndexes": [0]}}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let up: Value = r.json().await.unwrap();
    let source = &up["query"]["source"];
    assert_eq!(
        (&source["version"], &source["series"][0]["kind"]),
        (&json!(5), &json!("EventsNode"))
    );
    assert_eq!(
        source["trendsFilter"]["resultCustomizations"]["0"]["hidden"],
        true
    );
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": up["query"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = client()
        .post(srv.url("/api/projects/1/query/check_auth_for_async/"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = client()
        .post(srv.url("/api/projects/1/query/check_auth_for_async/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (st, d) = get(
        &srv,
        "/api/projects/1/query/draft_sql/?prompt=daily%20users%20by%20browser",
    )
    .await;
    assert_eq!(st, 200, "{d}");
    let sql = d["sql"].as_str().unwrap();
    assert!(sql.contains("properties.$browser"), "{sql}");
    // The draft runs.
    let (st, r) = post(&srv, 1, json!({"query": hogql(sql)})).await;
    assert_eq!(st, 200, "{r}");
    // The same endpoint as an environment's, as newer PostHog clients call it.
    let r = client()
        .post(srv.url("/api/environments/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": hogql("SELECT 1 + 1")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["results"], json!([[2]]));
    // No prompt (the spec shows none required): the top event per day, which runs too.
    let (st, d) = get(&srv, "/api/projects/1/query/draft_sql/").await;
    assert_eq!(st, 200, "{d}");
    let sql = d["sql"].as_str().unwrap();
    assert!(sql.contains("toStartOfDay(timestamp)"), "{sql}");
    assert!(sql.contains("AND event = "), "{sql}");
    let (st, r) = post(&srv, 1, json!({"query": hogql(sql)})).await;
    assert_eq!(st, 200, "{r}");
}

#[test]
fn query_command_prints_tables_csv_json_and_plans() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let mut srv = Server::start_in(tmp.path(), &[]);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(capture(
            &srv,
            TOKEN,
            (0..4).map(|i| ev("$pageview", i)).collect(),
        ));
        srv.stop();
    }
    let run = |fmt: &str| {
        let out = std::process::Command::new(bin())
            .args(["query", "--format", fmt, "--data-dir"])
            .arg(tmp.path())
            .arg("SELECT properties.$browser AS b, count() AS c FROM events GROUP BY b ORDER BY b")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run("table");
    assert!(table.contains("Chrome | 2"), "{table}");
    assert!(table.contains("(2 rows)"), "{table}");
    assert_eq!(run("csv"), "b,c\nChrome,2\nSafari,2\n");
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(json["results"], json!([["Chrome", 2], ["Safari", 2]]));
    let explained = std::process::Command::new(bin())
        .args(["query", "--explain", "--data-dir"])
        .arg(tmp.path())
        .arg("SELECT count() FROM events WHERE event = '$pageview'")
        .output()
        .unwrap();
    assert!(explained.status.success());
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains("-- physical plan, with metrics") && text.contains("output_rows"),
        "{text}"
    );
    let bad = std::process::Command::new(bin())
        .args(["query", "--data-dir"])
        .arg(tmp.path())
        .arg("SELECT nope()")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Unknown function"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_request_id() {
    let srv = Server::start(&[]);
    let r = client().get(srv.url("/_health")).send().await.unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "{id}");
    // A client's own id is kept (so its logs and ours line up); a bad one is replaced.
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .header("x-request-id", "trace-abc-123")
        .json(&json!({"query": hogql("SELECT 1")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "trace-abc-123");
    let r = client()
        .get(srv.url("/nope"))
        .header("x-request-id", "x".repeat(500))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["x-request-id"].len(), 32);
}

/// A property promoted since the last flush has its column in the buffer only: queries on
/// it, filters included, read it there, and read it from the JSON of the files' rows (whose
/// table has no such column yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_property_promoted_after_the_last_flush_is_read_from_the_buffer() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = |i: usize, plan: &str| json!({"event": "e", "distinct_id": format!("u{i}"), "properties": {"plan": plan}});
    // No columns at all: `plan` stays in the JSON of the flushed files.
    let mut first = Server::start_in(tmp.path(), &["--property-columns-max", "0"]);
    capture(&first, TOKEN, vec![plan(0, "pro"), plan(1, "free")]).await;
    first.stop();
    // Every property promoted at once; nothing flushed while the test runs.
    let srv = Server::start_in(
        tmp.path(),
        &[
            "--flush-interval",
            "1h",
            "--property-columns-every",
            "1",
            "--property-columns-min-share",
            "0",
        ],
    );
    capture(
        &srv,
        TOKEN,
        vec![plan(2, "pro"), plan(3, "pro"), plan(4, "free")],
    )
    .await;
    for (q, want) in [
        (
            "SELECT count() FROM events WHERE properties.plan = 'pro'",
            json!([[3]]),
        ),
        (
            "SELECT properties.plan AS p, count() FROM events GROUP BY p ORDER BY p",
            json!([["free", 2], ["pro", 3]]),
        ),
        (
            "SELECT count() FROM events WHERE JSONExtractString(properties, 'plan') = 'free'",
            json!([[2]]),
        ),
    ] {
        let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
        assert_eq!(st, 200, "{q}: {r}");
        assert_eq!(r["results"], want, "{q}");
    }
}

/// A dashboard's `filters_override` and `variables_override` reach a HogQL query through
/// `{filters}` and `{variables.name}`, merged with the query's own; what cannot apply is a
/// 400 that says why, never a silent drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_and_variables_apply_through_placeholders() {
    let srv = Server::start(&[]);
    let now = chrono::Utc::now();
    let at =
        |days: i64| (now - chrono::Duration::days(days) - chrono::Duration::hours(1)).to_rfc3339();
    // u0 is on the pro plan from 20 days ago; then 10 events, one a day, i days ago.
    let mut events = vec![
        json!({"event": "$identify", "distinct_id": "u0", "timestamp": at(20),
                                 "properties": {"$set": {"plan": "pro"}}}),
    ];
    for i in 0..10i64 {
        events.push(
            json!({"event": "e", "distinct_id": format!("u{}", i % 3), "timestamp": at(i),
            "properties": {"$browser": if i % 2 == 0 { "Chrome" } else { "Safari" }, "n": i}}),
        );
    }
    capture(&srv, TOKEN, events).await;
    let count = |body: Value| {
        let srv = &srv;
        async move {
            let (st, r) = post(srv, 1, body).await;
            assert_eq!(st, 200, "{r}");
            r["results"][0][0].as_i64().unwrap()
        }
    };
    let q = |text: &str| json!({"kind": "HogQLQuery", "query": text});
    let filtered = "SELECT count() FROM events WHERE event = 'e' AND {filters}";
    assert_eq!(
        count(json!({"query": q(filtered)})).await,
        10,
        "no filters: {{filters}} is true"
    );
    assert_eq!(
        count(json!({"query": q(filtered), "filters_override": {"date_from": "-5d"}})).await,
        5
    );
    assert_eq!(
        count(
            json!({"query": q(filtered), "filters_override": {"date_from": "-5d",
            "properties": [{"key": "$browser", "value": "Chrome"}]}})
        )
        .await,
        3
    );
    // The query's own filters and the override's properties both apply.
    let own = json!({"kind": "HogQLQuery", "query": filtered,
                     "filters": {"properties": [{"key": "plan", "value": "pro", "type": "person"}]}});
    assert_eq!(
        count(json!({"query": own})).await,
        4,
        "u0's events: i = 0, 3, 6, 9"
    );
    assert_eq!(
        count(json!({"query": own, "filters_override": {"date_to": "-4d",
            "properties": [{"key": "n", "value": 5, "operator": "gt"}]}}))
        .await,
        2,
        "u0's, older than 4 days, n > 5: i = 6, 9"
    );
    // `{filters.dateRange.from}`: a bound, or true in its comparison when unset.
    let bound =
        "SELECT count() FROM events WHERE event = 'e' AND timestamp >= {filters.dateRange.from}";
    assert_eq!(count(json!({"query": q(bound)})).await, 10);
    assert_eq!(
        count(json!({"query": q(bound), "filters_override": {"date_from": "-2d"}})).await,
        2
    );
    // Filters with nowhere to go, and ones that cannot apply.
    let (st, r) = post(
        &srv,
        1,
        json!({"query": q("SELECT count() FROM events"),
               "filters_override": {"properties": [{"key": "a", "value": 1}]}}),
    )
    .await;
    assert_eq!(st, 400, "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("{filters} placeholder"),
        "{r}"
    );
    let (st, r) = post(
        &srv,
        1,
        json!({"query": q(filtered), "filters_override": {"breakdown_filter": {"breakdown": "$browser"}}}),
    )
    .await;
    assert_eq!(
        (st, r["attr"].as_str()),
        (400, Some("filters_override")),
        "{r}"
    );

    // Variables: the query's value, then the override's.
    let var = json!({"kind": "HogQLQuery",
        "query": "SELECT count() FROM events WHERE event = 'e' AND toInt(properties.n) < {variables.cut}",
        "variables": {"v1": {"variableId": "v1", "code_name": "cut", "value": 3}}});
    assert_eq!(count(json!({"query": var})).await, 3);
    assert_eq!(
        count(json!({"query": var, "variables_override": {"v1": {"value": 7}}})).await,
        7
    );
    let (st, r) = post(&srv, 1, json!({"query": q("SELECT {variables.cut}")})).await;
    assert_eq!(st, 400, "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("Variable cut has no value"),
        "{r}"
    );
    let (st, r) = post(
        &srv,
        1,
        json!({"query": var, "variables_override": {"v9": {"value": 1}}}),
    )
    .await;
    assert_eq!(
        (st, r["attr"].as_str()),
        (400, Some("variables_override")),
        "{r}"
    );
}

/// A Map answers as PostHog's API answers a ClickHouse Map: a JSON object (keys as strings,
/// a repeated key keeping its last value), typed `Map(K, V)` with integer constants in their
/// narrow type, as ClickHouse's (array elements are Nullable here, as every array's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_is_a_json_object() {
    let srv = Server::start(&["--flush-interval", "1h"]);
    let q = "SELECT map('a', 1, 'b', 2, 'a', 3) AS m, map(1, [1.5]) AS n, mapKeys(m) AS k";
    let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r["results"],
        json!([[{"a": 3, "b": 2}, {"1": [1.5]}, ["a", "b", "a"]]])
    );
    assert_eq!(
        r["types"],
        json!([
            ["m", "Map(String, UInt8)"],
            ["n", "Map(UInt8, Array(Nullable(Float64)))"],
            ["k", "Array(Nullable(String))"]
        ])
    );
}

/// Integers answer as JSON numbers, as PostHog's API answers ClickHouse's: a constant in its
/// narrow ClickHouse type (wrapped there), a UInt64 above 2^63 - 1, and an array or a union
/// mixing a UInt64 with a signed value (Int64, not a Decimal printed as strings). A UInt64
/// above Int64's range with a signed branch has no common type and is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_answer_as_json_numbers() {
    let srv = Server::start(&["--flush-interval", "1h"]);
    let q = "SELECT -intDiv(-128, 1) AS a, coalesce(NULL, 1) + 9223372036854775807 AS b, \
             [length('ab'), -1] AS c";
    let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r["results"],
        json!([[-128, 9_223_372_036_854_775_808u64, [2, -1]]])
    );
    let q = "SELECT x FROM (SELECT length('ab') AS x UNION ALL SELECT -1 AS x) ORDER BY x";
    let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["results"], json!([[-1], [2]]));
    let q = "SELECT if(1 = 1, 9223372036854775807 + 1000, -1)";
    let (st, r) = post(&srv, 1, json!({"query": hogql(q)})).await;
    assert_eq!(st, 400, "{r}");
    assert!(
        r.to_string()
            .contains("There is no supertype for the UInt64"),
        "{r}"
    );
}
