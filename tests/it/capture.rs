//! Capture over HTTP: every path, encoding and token rule, the skip-with-200 cases, and
//! the 400/401/413 answers. Events are read back from the table after a clean stop.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::*;

fn ev(uuid: &str, name: &str, did: &str) -> Value {
    json!({"event": name, "distinct_id": did, "uuid": uuid, "properties": {"n": uuid}, "timestamp": "2024-05-01T10:00:00Z"})
}

fn uid(i: u32) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_encoding_and_token_location_is_stored() {
    let mut srv = Server::start(&[]);
    let c = client();
    let mut expect: Vec<(String, &str)> = Vec::new();
    let mut n = 0u32;
    let mut next = || {
        n += 1;
        uid(n)
    };

    // Every path, with and without the trailing slash, plain JSON.
    for path in [
        "/i/v0/e/",
        "/i/v0/e",
        "/e/",
        "/e",
        "/capture/",
        "/capture",
        "/track/",
        "/track",
        "/batch/",
        "/batch",
        "/engage/",
    ] {
        let u = next();
        let body = if path.starts_with("/batch") {
            json!({"api_key": TOKEN, "batch": [ev(&u, "path", path)]})
        } else {
            let mut e = ev(&u, "path", path);
            e["api_key"] = json!(TOKEN);
            e
        };
        let r = c.post(srv.url(path)).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"status": 1}));
        expect.push((u, "path"));
    }

    // Token locations: batch token, event api_key, token, $token, properties.token.
    let with = |u: &str, key: &str| {
        let mut e = ev(u, "tok", "a");
        if key == "properties.token" {
            e["properties"]["token"] = json!(TOKEN);
        } else {
            e[key] = json!(TOKEN);
        }
        json!([e])
    };
    type Make = Box<dyn Fn(&str) -> Value>;
    let locs: Vec<Make> = vec![
        Box::new(|u| json!({"token": TOKEN, "batch": [ev(u, "tok", "a")]})),
        Box::new(move |u| with(u, "api_key")),
        Box::new(move |u| with(u, "token")),
        Box::new(move |u| with(u, "$token")),
        Box::new(move |u| with(u, "properties.token")),
    ];
    for make in &locs {
        let u = next();
        let r = c
            .post(srv.url("/batch/"))
            .json(&make(&u))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        expect.push((u, "tok"));
    }

    let batch_of =
        |u: &str, name: &str| json!({"api_key": TOKEN, "batch": [ev(u, name, "enc")]}).to_string();
    // Every transport encoding: (name, path, headers, body, expected status).
    type Case = (
        &'static str,
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<u8>,
        u16,
    );
    let mut cases: Vec<(String, Case)> = Vec::new();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let u = next();
    // gzip announced by header.
    cases.push((
        u.clone(),
        (
            "gz-header",
            "/batch/",
            vec![("Content-Encoding", "gzip")],
            gzip(batch_of(&u, "gz-header").as_bytes()),
            200,
        ),
    ));
    // gzip with no hint at all (posthog-node): recognised by its magic bytes.
    let u = next();
    cases.push((
        u.clone(),
        (
            "gz-magic",
            "/batch/",
            vec![("Content-Type", "application/json")],
            gzip(batch_of(&u, "gz-magic").as_bytes()),
            200,
        ),
    ));
    // gzip announced by ?compression=gzip-js (posthog-js).
    let u = next();
    cases.push((
        u.clone(),
        (
            "gz-js",
            "/e/?compression=gzip-js&ver=1.0",
            vec![("Content-Type", "text/plain")],
            gzip(batch_of(&u, "gz-js").as_bytes()),
            200,
        ),
    ));
    // Form body data=<base64 JSON>.
    let u = next();
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("data", &b64(batch_of(&u, "form")))
        .finish();
    cases.push((
        u.clone(),
        (
            "form",
            "/e/",
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            form.into_bytes(),
            200,
        ),
    ));
    // A base64 body.
    let u = next();
    cases.push((
        u.clone(),
        (
            "b64",
            "/batch/?compression=base64",
            vec![],
            b64(batch_of(&u, "b64")).into_bytes(),
            200,
        ),
    ));
    // beacon=1 answers 204 and still stores.
    let u = next();
    cases.push((
        u.clone(),
        (
            "beacon",
            "/e/?beacon=1",
            vec![],
            batch_of(&u, "beacon").into_bytes(),
            204,
        ),
    ));
    for (u, (name, path, headers, body, status)) in cases {
        let mut r = c.post(srv.url(path)).body(body);
        for (k, v) in headers {
            r = r.header(k, v);
        }
        assert_eq!(r.send().await.unwrap().status(), status, "{name}");
        expect.push((u, name));
    }
    // A bare array of events, each with its token.
    let (u1, u2) = (next(), next());
    let mut a = ev(&u1, "bare", "x");
    a["api_key"] = json!(TOKEN);
    let mut b = ev(&u2, "bare", "y");
    b["api_key"] = json!(TOKEN);
    let r = c
        .post(srv.url("/batch/"))
        .json(&json!([a, b]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    expect.push((u1, "bare"));
    expect.push((u2, "bare"));
    // Legacy GET with data=.
    let u = next();
    let data = base64::engine::general_purpose::STANDARD.encode(batch_of(&u, "get"));
    let r = c
        .get(srv.url("/e/"))
        .query(&[("data", data.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    expect.push((u, "get"));

    // Skipped events: the request still gets 200, the other events are kept.
    let u = next();
    let r = c
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": [
            {"distinct_id": "no-name", "properties": {}},
            {"event": "", "distinct_id": "empty-name"},
            {"event": "no-did", "properties": {}},
            {"event": "empty-did", "distinct_id": ""},
            {"event": "empty-did2", "properties": {"distinct_id": ""}},
            ev(&u, "kept", "k"),
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    expect.push((u, "kept"));
    // A single event that is skipped is still a 200.
    let r = c
        .post(srv.url("/i/v0/e/"))
        .json(&json!({"api_key": TOKEN, "event": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let metrics = c
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("hedgerow_events_rejected_total{reason=\"missing_distinct_id\"} 4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hedgerow_events_rejected_total{reason=\"missing_event_name\"} 2"),
        "{metrics}"
    );

    srv.stop();
    let stored = read_table(&srv.data_dir).await;
    assert_eq!(
        stored.len(),
        expect.len(),
        "exactly the accepted events are stored"
    );
    for (u, name) in &expect {
        let rows: Vec<_> = stored.iter().filter(|s| &s.uuid == u).collect();
        assert_eq!(rows.len(), 1, "{u} stored once");
        assert_eq!(rows[0].event, *name);
        assert_eq!(rows[0].team_id, 1);
        assert_eq!(
            rows[0].timestamp_us, 1_714_557_600_000_000,
            "2024-05-01T10:00:00Z kept (no sent_at)"
        );
    }
    let mut path_ids: Vec<&str> = Vec::new();
    for s in stored.iter().filter(|s| s.event == "path") {
        assert_eq!(s.properties["n"], json!(s.uuid));
        path_ids.push(&s.distinct_id);
    }
    path_ids.sort();
    let mut want = vec![
        "/i/v0/e/",
        "/i/v0/e",
        "/e/",
        "/e",
        "/capture/",
        "/capture",
        "/track/",
        "/track",
        "/batch/",
        "/batch",
        "/engage/",
    ];
    want.sort();
    assert_eq!(path_ids, want, "distinct ids kept");
}

async fn status_and_body(r: reqwest::Response) -> (u16, Value) {
    let st = r.status().as_u16();
    (st, r.json::<Value>().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_have_posthog_error_shape() {
    let srv = Server::start(&["--max-body-size", "64KiB"]);
    let c = client();
    let post = |body: Value| c.post(srv.url("/batch/")).json(&body).send();
    let one = |tok: Value| json!({"api_key": tok, "batch": [{"event": "e", "distinct_id": "d"}]});

    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"batch": [{"event": "e", "distinct_id": "d"}]}),
            "no token",
        ),
        (one(json!("")), "empty"),
        (one(json!("phc_unknown")), "unknown project"),
        (one(json!(KEY)), "personal key"),
        (one(json!(format!("phc_{}", "a".repeat(61)))), "65 chars"),
        (one(json!("phc_ünïcode")), "non-ascii"),
        (
            json!([{"api_key": TOKEN, "event": "e", "distinct_id": "d"}, {"api_key": "phc_other", "event": "e", "distinct_id": "d"}]),
            "mixed tokens",
        ),
    ];
    for (body, what) in cases {
        let (st, b) = status_and_body(post(body).await.unwrap()).await;
        assert_eq!(st, 401, "{what}: {b}");
        assert_eq!(b["type"], "authentication_error", "{what}");
        assert!(
            b["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{what}"
        );
        assert!(b.get("attr").is_some(), "{what}");
    }

    // Unreadable payloads: 400.
    for (body, what) in [
        ("{not json".to_owned(), "bad json"),
        ("42".to_owned(), "a number"),
        (json!({"api_key": TOKEN, "batch": {"event": "e"}}).to_string(), "batch not a list"),
        (json!({"api_key": TOKEN, "batch": [{"event": "e", "distinct_id": "d", "uuid": "not-a-uuid"}]}).to_string(), "bad uuid"),
        (String::new(), "empty body"),
    ] {
        let r = c.post(srv.url("/batch/")).header("Content-Type", "application/json").body(body).send().await.unwrap();
        let (st, b) = status_and_body(r).await;
        assert_eq!(st, 400, "{what}: {b}");
        assert_eq!(b["type"], "validation_error", "{what}");
    }
    let r = c
        .post(srv.url("/batch/"))
        .header("Content-Encoding", "gzip")
        .body(vec![0x1f, 0x8b, 1, 2, 3])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "broken gzip");

    // Too large: over the limit as sent, and over it only once decompressed.
    let big = json!({"api_key": TOKEN, "batch": [{"event": "e", "distinct_id": "d", "properties": {"pad": "x".repeat(70_000)}}]}).to_string();
    let (st, b) = status_and_body(
        c.post(srv.url("/batch/"))
            .body(big.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 413, "{b}");
    assert_eq!(b["code"], "payload_too_large");
    let zipped = gzip(big.as_bytes());
    assert!(zipped.len() < 64 * 1024);
    // A fresh client: the server closes a connection whose oversized body it did not read,
    // and a pooled client may otherwise hand out that closing connection.
    let (st, _) = status_and_body(
        client()
            .post(srv.url("/batch/"))
            .header("Content-Encoding", "gzip")
            .body(zipped)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 413, "decompressed size counts");

    // Nothing above was stored, and the server is still fine.
    let r = c.get(srv.url("/_health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let m = c
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("hedgerow_events_accepted_total 0"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sent_at_skew_and_historical_migration() {
    let mut srv = Server::start(&[]);
    let c = client();
    let now = chrono::Utc::now();
    // The client's clock is one hour fast: its timestamp and sent_at are both +1h.
    let fast = now + chrono::Duration::hours(1);
    let r = c
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "sent_at": fast.to_rfc3339(), "batch": [
            {"event": "skewed", "distinct_id": "d", "uuid": uid(1), "timestamp": (fast - chrono::Duration::minutes(5)).to_rfc3339()},
            {"event": "offset", "distinct_id": "d", "uuid": uid(2), "offset": 60_000},
            {"event": "future", "distinct_id": "d", "uuid": uid(3), "timestamp": (now + chrono::Duration::hours(30)).to_rfc3339(), "properties": {"$ignore_sent_at": true}},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // historical_migration: old events are kept as sent; a young one is kept too (as a
    // live event) and counted.
    let old = now - chrono::Duration::days(400);
    let r = c
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "historical_migration": true, "batch": [
            {"event": "old", "distinct_id": "h", "uuid": uid(4), "timestamp": old.to_rfc3339()},
            {"event": "young", "distinct_id": "h", "uuid": uid(5), "timestamp": (now - chrono::Duration::hours(1)).to_rfc3339()},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m = c
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("hedgerow_historical_events_too_recent_total 1"),
        "{m}"
    );
    srv.stop();
    let stored = read_table(&srv.data_dir).await;
    let ts = |u: u32| {
        stored
            .iter()
            .find(|s| s.uuid == uid(u))
            .unwrap()
            .timestamp_us
    };
    let near = |got: i64, want: chrono::DateTime<chrono::Utc>| {
        (got - want.timestamp_micros()).abs() < 10_000_000
    };
    assert!(
        near(ts(1), now - chrono::Duration::minutes(5)),
        "skew corrected"
    );
    assert!(
        near(ts(2), now - chrono::Duration::minutes(1)),
        "offset applied"
    );
    assert!(near(ts(3), now), "over 23 h ahead is clamped to now");
    assert_eq!(
        ts(4),
        old.timestamp_micros(),
        "historical timestamps kept to the microsecond"
    );
    assert!(
        stored.iter().any(|s| s.uuid == uid(5)),
        "young historical event kept"
    );
}

/// Junk never panics the server or gets a 5xx: each answer is a 2xx or a 4xx in PostHog's
/// shape, and the server still takes good events afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_input_is_refused_cleanly() {
    use rand::{Rng, SeedableRng};
    let srv = Server::start(&["--max-body-size", "1MiB"]);
    let c = client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let mut bodies: Vec<(Vec<u8>, Option<&str>)> = vec![
        (deep.into_bytes(), None),
        (b"\x00\x01\x02\xff\xfe".to_vec(), None),
        (vec![0x1f, 0x8b], Some("gzip")),
        (b"data=%%%".to_vec(), None),
        (b"data=!!!!".to_vec(), None),
        (br#"{"api_key": "phc_x", "batch": [null, 1, "s"]}"#.to_vec(), None),
        (br#"{"api_key": 5, "batch": []}"#.to_vec(), None),
        (br#"{"api_key": "phc_x", "batch": [{"event": "e", "distinct_id": "d", "timestamp": "99999-99-99"}]}"#.to_vec(), None),
        (format!(r#"{{"api_key": "{TOKEN}", "batch": [{{"event": "e", "distinct_id": "d", "offset": 1e300, "timestamp": 1e300}}]}}"#).into_bytes(), None),
        (format!(r#"{{"api_key": "{TOKEN}", "batch": [{{"event": {{"a": 1}}, "distinct_id": ["x"]}}]}}"#).into_bytes(), None),
        (format!(r#"{{"api_key": "{TOKEN}", "batch": [{{"event": "e", "distinct_id": "d", "properties": [1, 2]}}]}}"#).into_bytes(), None),
        (b"{\"api_key\": \"\xc3\x28\"}".to_vec(), None),
    ];
    for _ in 0..40 {
        let n = rng.random_range(0..2000);
        bodies.push(((0..n).map(|_| rng.random::<u8>()).collect(), None));
    }
    for (body, enc) in bodies {
        for path in ["/batch/", "/e/", "/i/v0/e/"] {
            let mut r = c.post(srv.url(path)).body(body.clone());
            if let Some(e) = enc {
                r = r.header("Content-Encoding", e);
            }
            let r = r.send().await.unwrap();
            let st = r.status().as_u16();
            assert!(
                (200..500).contains(&st),
                "{path}: {st} for {:?}",
                String::from_utf8_lossy(&body[..body.len().min(80)])
            );
            if st >= 400 {
                let b: Value = r.json().await.expect("error body is JSON");
                assert!(b["type"].is_string() && b["detail"].is_string(), "{b}");
            }
        }
    }
    let r = c
        .post(srv.url("/i/v0/e/"))
        .json(&json!({"api_key": TOKEN, "event": "after", "distinct_id": "d"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
