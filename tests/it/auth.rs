//! `/api/` authentication, scopes and the projects endpoints.

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_scopes_and_projects() {
    let srv = Server::start(&[]);
    let c = client();
    let get = |path: &str, key: Option<&str>| {
        let mut r = c.get(srv.url(path));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    async fn body(r: reqwest::Response) -> (u16, Value) {
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    let (st, b) = body(get("/api/projects/", None).await.unwrap()).await;
    assert_eq!(
        (st, b["type"].as_str(), b["code"].as_str()),
        (401, Some("authentication_error"), Some("not_authenticated"))
    );
    let (st, b) = body(get("/api/projects/", Some("phx_wrong")).await.unwrap()).await;
    assert_eq!(
        (st, b["code"].as_str()),
        (401, Some("authentication_failed"))
    );

    let (st, b) = body(get("/api/projects/", Some(KEY)).await.unwrap()).await;
    assert_eq!(st, 200);
    assert_eq!(b["count"], 1);
    let p = &b["results"][0];
    assert_eq!(
        (
            p["id"].as_i64(),
            p["api_token"].as_str(),
            p["timezone"].as_str()
        ),
        (Some(1), Some(TOKEN), Some("UTC"))
    );
    for f in ["uuid", "name", "created_at"] {
        assert!(p[f].is_string(), "{f}");
    }
    assert_eq!(b["next"], Value::Null);
    assert_eq!(b["previous"], Value::Null);

    // Create two more projects; paginate.
    for name in ["Second", "Third"] {
        let r = c
            .post(srv.url("/api/projects/"))
            .bearer_auth(KEY)
            .json(&json!({"name": name, "timezone": "Europe/Berlin"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let p: Value = r.json().await.unwrap();
        assert!(p["api_token"].as_str().unwrap().starts_with("phc_"));
        assert_eq!(p["timezone"], "Europe/Berlin");
    }
    let (st, b) = body(
        get("/api/projects/?limit=1&offset=1", Some(KEY))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["count"], 3);
    assert_eq!(b["results"][0]["name"], "Second");
    let next = b["next"].as_str().unwrap();
    assert!(
        next.starts_with("http://127.0.0.1:") && next.ends_with("/api/projects/?limit=1&offset=2"),
        "{next}"
    );
    assert!(b["previous"].as_str().unwrap().ends_with("offset=0"));
    let (st, b) = body(get("/api/projects/?limit=abc", Some(KEY)).await.unwrap()).await;
    assert_eq!((st, b["attr"].as_str()), (400, Some("limit")));

    let r = c
        .post(srv.url("/api/projects/"))
        .bearer_auth(KEY)
        .json(&json!({"name": "Bad", "timezone": "Mars/Base"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = c
        .post(srv.url("/api/projects/"))
        .bearer_auth(KEY)
        .body("nope")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // A key for project 2 with a read scope only.
    let limited = create_key(&srv.data_dir, "project:read", Some("2"));
    assert!(limited.starts_with("phx_"));
    let (st, b) = body(get("/api/projects/", Some(&limited)).await.unwrap()).await;
    assert_eq!((st, b["count"].as_i64()), (200, Some(1)));
    assert_eq!(
        body(get("/api/projects/2/", Some(&limited)).await.unwrap())
            .await
            .0,
        200
    );
    assert_eq!(
        body(
            get("/api/projects/@current/", Some(&limited))
                .await
                .unwrap()
        )
        .await
        .1["id"],
        2
    );
    let (st, b) = body(get("/api/projects/1/", Some(&limited)).await.unwrap()).await;
    assert_eq!(
        (st, b["type"].as_str()),
        (404, Some("not_found")),
        "a project the key may not see is a 404"
    );
    assert_eq!(
        body(get("/api/projects/99/", Some(KEY)).await.unwrap())
            .await
            .0,
        404
    );
    assert_eq!(
        body(get("/api/projects/abc/", Some(KEY)).await.unwrap())
            .await
            .0,
        404
    );
    let r = c
        .post(srv.url("/api/projects/"))
        .bearer_auth(&limited)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    let (st, b) = body(r).await;
    assert_eq!(
        (st, b["type"].as_str(), b["code"].as_str()),
        (403, Some("permission_denied"), Some("permission_denied"))
    );
    assert!(b["detail"].as_str().unwrap().contains("project:write"));

    // A key with only a scope of the spec (query:read) finds its projects, and reads one;
    // it cannot change them.
    let other = create_key(&srv.data_dir, "query:read", Some("2"));
    let (st, b) = body(get("/api/projects/", Some(&other)).await.unwrap()).await;
    assert_eq!((st, b["count"].as_i64()), (200, Some(1)), "{b}");
    assert_eq!(b["results"][0]["id"], 2);
    assert_eq!(
        body(get("/api/projects/2/", Some(&other)).await.unwrap())
            .await
            .0,
        200
    );
    assert_eq!(
        body(get("/api/projects/1/", Some(&other)).await.unwrap())
            .await
            .0,
        404
    );
    let r = c
        .patch(srv.url("/api/projects/2/"))
        .bearer_auth(&other)
        .json(&json!({"name": "renamed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Unknown paths answer in the same shape.
    let (st, b) = body(get("/api/nothing/", Some(KEY)).await.unwrap()).await;
    assert_eq!((st, b["type"].as_str()), (404, Some("not_found")));
    // Capture tokens of new projects work at once.
    let (_, b) = body(get("/api/projects/2/", Some(KEY)).await.unwrap()).await;
    let tok = b["api_token"].as_str().unwrap();
    let r = c
        .post(srv.url("/i/v0/e/"))
        .json(&json!({"api_key": tok, "event": "e", "distinct_id": "d"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn first_start_prints_generated_keys_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let mut child = std::process::Command::new(bin())
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--log",
                "warn",
                "--data-dir",
            ])
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let done = line.starts_with("hedgerow listening on");
            lines.push(line);
            if done {
                break;
            }
        }
        let _ = std::process::Command::new("kill")
            .arg(child.id().to_string())
            .status();
        assert!(child.wait().unwrap().success());
        lines
    };
    let first = run();
    assert!(
        first.iter().any(|l| l.contains("project API key: phc_")),
        "{first:?}"
    );
    assert!(
        first.iter().any(|l| l.contains("shown once): phx_")),
        "{first:?}"
    );
    let second = run();
    assert_eq!(second.len(), 1, "nothing printed again: {second:?}");
}

/// The engine keeps capture's token → project cache right by itself: once project 1's
/// token is replaced, the old one is refused at once and the new one works, with no step
/// left to the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_token_is_forgotten_at_once() {
    use std::sync::Arc;

    use hedgerow_engine::CapturePayload;
    use hedgerow_engine::clock::FixedClock;
    use hedgerow_engine::error::{ErrorKind, HasKind};
    use hedgerow_engine::{Engine, EngineConfig};

    let tmp = tempfile::tempdir().unwrap();
    let now = "2024-06-15T12:00:00Z".parse().unwrap();
    let engine = Engine::open(
        EngineConfig::new(tmp.path()),
        Arc::new(FixedClock::new(now)),
    )
    .await
    .unwrap();
    let (old, new) = (
        "phc_token_before_00000000000000000000000000",
        "phc_token_after_000000000000000000000000000",
    );
    let capture = |token: &str| {
        engine.capture(CapturePayload {
            token: token.into(),
            sent_at: None,
            historical_migration: false,
            events: vec![
                json!({"event": "e", "distinct_id": "d"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ],
        })
    };
    engine.bootstrap(Some(old), None).unwrap();
    assert_eq!(capture(old).await.unwrap().accepted, 1, "and now cached");
    engine.bootstrap(Some(new), None).unwrap();
    let refused = capture(old).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unauthorized, "{refused}");
    assert_eq!(capture(new).await.unwrap().accepted, 1);
    engine.shutdown().await;
}

/// Runs `hedgerow keys <args> --data-dir <data_dir>` beside the server.
fn keys_cmd(data_dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin())
        .arg("keys")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap()
}

/// How a request of the matrix authenticates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Caller<'a> {
    NoKey,
    /// A raw `Authorization` header that is not `Bearer <key>`.
    Malformed(&'a str),
    WrongKey,
    /// The project's public capture token sent as if it were a personal key.
    ProjectKeyAsBearer,
    Revoked(&'a str),
    /// A personal key that lacks the route's scope.
    WithoutScope,
    /// An all-scopes key limited to project 2.
    OtherProject(&'a str),
    /// The all-scopes bootstrap key: the request must get past authentication.
    Allowed,
}

/// One route of the matrix.
struct Route {
    method: reqwest::Method,
    path: String,
    scope: &'static str,
    body: Option<Value>,
}

/// Every `/api/` route × every kind of caller, with the answer each cell must get written
/// here (issue 17): no key 401 `not_authenticated`; a malformed header, an unknown,
/// revoked or capture key 401 `authentication_failed`; a key without the scope 403
/// `permission_denied`; a key of another project 404 (PostHog hides projects a key cannot
/// see), or 403 where the route is about every project; the right key gets through. Then
/// the other project's key asks project 2's routes for project 1's person and query by id,
/// and HogQL tries to reach past its project; nothing of project 1 may show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_caller_as_written() {
    use reqwest::Method;

    let srv = Server::start(&[]);
    let c = client();
    let send = |method: Method, path: &str, auth: Option<String>, body: Option<Value>| {
        let mut r = c.request(method, srv.url(path));
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let r = r.send().await.unwrap();
            let st = r.status().as_u16();
            let text = r.text().await.unwrap();
            (st, text)
        }
    };
    let bearer = |k: &str| Some(format!("Bearer {k}"));

    // Project 1 holds a person and a finished query; project 2 holds a secret event.
    let marker = "matrix-secret-of-project-two";
    let (st, _) = send(
        Method::POST,
        "/batch/",
        None,
        Some(json!({"api_key": TOKEN, "batch": [
            {"event": "$identify", "distinct_id": "alice", "properties": {"$set": {"email": "a@example.com"}}}
        ]})),
    )
    .await;
    assert_eq!(st, 200);
    let (st, text) = send(
        Method::POST,
        "/api/projects/",
        bearer(KEY),
        Some(json!({"name": "other"})),
    )
    .await;
    assert_eq!(st, 201, "{text}");
    let other: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(other["id"], 2);
    let (st, _) = send(
        Method::POST,
        "/batch/",
        None,
        Some(json!({"api_key": other["api_token"], "batch": [
            {"event": marker, "distinct_id": "mallory", "properties": {"$set": {"secret": marker}}}
        ]})),
    )
    .await;
    assert_eq!(st, 200);
    let person = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (_, text) = send(
                Method::GET,
                "/api/projects/1/persons/?distinct_id=alice",
                bearer(KEY),
                None,
            )
            .await;
            let v: Value = serde_json::from_str(&text).unwrap();
            if let Some(uuid) = v["results"][0]["uuid"].as_str() {
                break uuid.to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "no person: {v}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let hogql = |q: &str| json!({"query": {"kind": "HogQLQuery", "query": q}});
    let (st, text) = send(
        Method::POST,
        "/api/projects/1/query/",
        bearer(KEY),
        Some(json!({"query": {"kind": "HogQLQuery", "query": "SELECT 1"}, "client_query_id": "matrix-query"})),
    )
    .await;
    assert_eq!(st, 200, "{text}");
    // A cohort of project 1 holding alice, for the cohort routes.
    let (st, text) = send(
        Method::POST,
        "/api/projects/1/cohorts/",
        bearer(KEY),
        Some(json!({"name": "matrix", "is_static": true, "distinct_ids": ["alice"]})),
    )
    .await;
    assert_eq!(st, 201, "{text}");
    let cohort = serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_i64()
        .unwrap();
    let c = format!("/api/projects/1/cohorts/{cohort}");

    // Keys: one limited to project 2, one that lacks the routes' scopes (any key may list
    // and read projects), one revoked by the CLI.
    let other_key = create_key(&srv.data_dir, "*", Some("2"));
    let project_read_only = create_key(&srv.data_dir, "project:read", None);
    let revoked = {
        let out = keys_cmd(
            &srv.data_dir,
            &["create", "--scopes", "*", "--label", "to-revoke"],
        );
        assert!(out.status.success());
        let secret = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let list = keys_cmd(&srv.data_dir, &["list"]);
        let list = String::from_utf8(list.stdout).unwrap();
        assert!(!list.contains(&secret), "keys list shows no secret: {list}");
        let id = list
            .lines()
            .find(|l| l.split('\t').nth(1) == Some("to-revoke"))
            .and_then(|l| l.split('\t').next())
            .unwrap_or_else(|| panic!("{list}"))
            .to_owned();
        // Works until revoked, refused from the next request on.
        assert_eq!(
            send(Method::GET, "/api/projects/", bearer(&secret), None)
                .await
                .0,
            200
        );
        let out = keys_cmd(&srv.data_dir, &["revoke", &id]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let again = keys_cmd(&srv.data_dir, &["revoke", &id]);
        assert_eq!(
            again.status.code(),
            Some(2),
            "revoking twice names the missing id"
        );
        assert!(String::from_utf8_lossy(&again.stderr).contains(&format!("id {id}")));
        secret
    };

    // Project 1's objects, asked for through project 2 with project 2's key.
    for path in [
        format!("/api/projects/2/persons/{person}/"),
        "/api/projects/2/query/matrix-query/".to_owned(),
    ] {
        let (st, text) = send(Method::GET, &path, bearer(&other_key), None).await;
        assert_eq!((st, text.contains("alice")), (404, false), "{path}: {text}");
    }

    let p = format!("/api/projects/1/persons/{person}");
    let route = |method: Method, path: &str, scope: &'static str, body: Option<Value>| Route {
        method,
        path: path.to_owned(),
        scope,
        body,
    };
    // In an order the right key can run them: reads first, deletions last.
    let routes = vec![
        // Any valid key finds the projects it reaches (no scope: ANY_SCOPE).
        route(Method::GET, "/api/projects/", "", None),
        route(
            Method::POST,
            "/api/projects/",
            "project:write",
            Some(json!({"name": "made"})),
        ),
        route(Method::GET, "/api/projects/1/", "", None),
        route(Method::GET, "/api/projects/@current/", "", None),
        route(
            Method::POST,
            "/api/projects/1/query/",
            "query:read",
            Some(hogql("SELECT count() FROM events")),
        ),
        route(
            Method::POST,
            "/api/projects/1/query/check_auth_for_async/",
            "query:read",
            None,
        ),
        route(
            Method::GET,
            "/api/projects/1/query/draft_sql/?prompt=x",
            "query:read",
            None,
        ),
        route(
            Method::POST,
            "/api/projects/1/query/upgrade/",
            "query:read",
            Some(hogql("SELECT 1")),
        ),
        route(
            Method::GET,
            "/api/projects/1/query/matrix-query/",
            "query:read",
            None,
        ),
        route(
            Method::GET,
            "/api/projects/1/query/matrix-query/log/",
            "query:read",
            None,
        ),
        // The same query as an environment's (newer clients).
        route(
            Method::POST,
            "/api/environments/1/query/",
            "query:read",
            Some(hogql("SELECT 1")),
        ),
        route(
            Method::POST,
            "/api/projects/1/query/",
            "query:read",
            Some(json!({"query": {"kind": "TrendsQuery",
                "series": [{"kind": "EventsNode", "event": "$pageview"}]}})),
        ),
        route(
            Method::PATCH,
            "/api/projects/1/",
            "project:write",
            Some(json!({"autocapture_opt_out": false})),
        ),
        route(
            Method::POST,
            "/api/projects/1/rotate_secret_token/",
            "project:write",
            None,
        ),
        route(
            Method::GET,
            "/api/projects/1/feature_flags/",
            "feature_flag:read",
            None,
        ),
        route(
            Method::POST,
            "/api/projects/1/feature_flags/",
            "feature_flag:write",
            Some(
                json!({"key": "matrix-made", "filters": {"groups": [{"rollout_percentage": 10}]}}),
            ),
        ),
        route(
            Method::GET,
            "/api/projects/1/feature_flags/local_evaluation/",
            "feature_flag:read",
            None,
        ),
        route(Method::GET, "/api/projects/1/cohorts/", "cohort:read", None),
        route(
            Method::POST,
            "/api/projects/1/cohorts/",
            "cohort:write",
            Some(json!({"name": "made", "is_static": true})),
        ),
        route(Method::GET, &format!("{c}/"), "cohort:read", None),
        route(
            Method::PATCH,
            &format!("{c}/"),
            "cohort:write",
            Some(json!({"description": "d"})),
        ),
        // Scope pairs: the matrix's key without scopes lacks both.
        route(Method::GET, &format!("{c}/persons/"), "cohort:read", None),
        route(
            Method::POST,
            &format!("{c}/recalculate/"),
            "cohort:write",
            None,
        ),
        route(
            Method::PATCH,
            &format!("{c}/add_persons_to_static_cohort/"),
            "cohort:write",
            Some(json!({"distinct_ids": ["alice"]})),
        ),
        route(
            Method::GET,
            &format!("/api/projects/1/persons/cohorts/?person_id={person}"),
            "person:read",
            None,
        ),
        route(
            Method::POST,
            "/api/projects/1/persons/funnel/",
            "query:read",
            Some(json!({"events": [{"id": "a"}, {"id": "b"}], "funnel_step": 1})),
        ),
        route(
            Method::POST,
            "/api/projects/1/persons/funnel/correlation/",
            "query:read",
            Some(json!({"events": [{"id": "a"}, {"id": "b"}],
                        "funnel_correlation_person_entity": {"id": "x", "type": "events"}})),
        ),
        route(
            Method::GET,
            "/api/projects/1/persons/lifecycle/?target_date=dStart&lifecycle_type=new",
            "query:read",
            None,
        ),
        route(Method::GET, "/api/projects/1/persons/", "person:read", None),
        route(
            Method::GET,
            "/api/projects/1/persons/?format=csv",
            "person:read",
            None,
        ),
        route(
            Method::GET,
            "/api/projects/1/persons/activity/",
            "activity_log:read",
            None,
        ),
        route(Method::GET, &format!("{p}/"), "person:read", None),
        route(
            Method::GET,
            &format!("{p}/activity/"),
            "activity_log:read",
            None,
        ),
        route(
            Method::GET,
            &format!("{p}/properties_timeline/"),
            "person:read",
            None,
        ),
        route(
            Method::PATCH,
            &format!("{p}/"),
            "person:write",
            Some(json!({"properties": {"x": 1}})),
        ),
        route(
            Method::POST,
            &format!("{p}/update_property/"),
            "person:write",
            Some(json!({"key": "y", "value": 2})),
        ),
        route(
            Method::POST,
            &format!("{p}/delete_property/"),
            "person:write",
            Some(json!({"$unset": "y"})),
        ),
        route(Method::POST, &format!("{p}/split/"), "person:write", None),
        route(
            Method::POST,
            &format!("{p}/delete_recordings/"),
            "person:write",
            None,
        ),
        route(
            Method::DELETE,
            "/api/projects/1/query/matrix-query/",
            "query:read",
            None,
        ),
        route(
            Method::POST,
            "/api/projects/1/persons/bulk_delete/",
            "person:write",
            Some(json!({"distinct_ids": ["nobody"]})),
        ),
        route(
            Method::POST,
            &format!("{p}/delete_events/"),
            "person:write",
            None,
        ),
        route(Method::DELETE, &format!("{p}/"), "person:write", None),
        route(
            Method::POST,
            "/api/deletion_tasks/run/",
            "person:write",
            None,
        ),
    ];
    let callers = [
        Caller::NoKey,
        Caller::Malformed("Token abc"),
        Caller::Malformed("Bearer"),
        Caller::Malformed("Basic cGh4X3Rlc3Q6"),
        Caller::Malformed(KEY),
        Caller::WrongKey,
        Caller::ProjectKeyAsBearer,
        Caller::Revoked(&revoked),
        Caller::WithoutScope,
        Caller::OtherProject(&other_key),
        Caller::Allowed,
    ];
    let mut cells = 0;
    for caller in callers {
        for r in &routes {
            let auth = match caller {
                Caller::NoKey => None,
                Caller::Malformed(h) => Some(h.to_owned()),
                Caller::WrongKey => bearer("phx_not_a_key_of_this_server"),
                Caller::ProjectKeyAsBearer => bearer(TOKEN),
                Caller::Revoked(k) | Caller::OtherProject(k) => bearer(k),
                Caller::WithoutScope => bearer(&project_read_only),
                Caller::Allowed => bearer(KEY),
            };
            let (st, text) = send(r.method.clone(), &r.path, auth, r.body.clone()).await;
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let cell = format!("{caller:?} {} {}: {st} {text}", r.method, r.path);
            // `@current` is the key's own (first) project.
            let about_one_project = (r.path.starts_with("/api/projects/")
                && r.path.len() > "/api/projects/".len()
                || r.path.starts_with("/api/environments/"))
                && !r.path.contains("@current");
            let expected: Option<(u16, &str)> = match caller {
                Caller::NoKey => Some((401, "not_authenticated")),
                Caller::Malformed(_)
                | Caller::WrongKey
                | Caller::ProjectKeyAsBearer
                | Caller::Revoked(_) => Some((401, "authentication_failed")),
                Caller::WithoutScope if r.scope.is_empty() => None,
                Caller::WithoutScope => Some((403, "permission_denied")),
                Caller::OtherProject(_) if about_one_project => Some((404, "not_found")),
                // Listing shows only project 2; making projects and running every
                // project's deletions need a key for all projects.
                Caller::OtherProject(_) if r.method == Method::GET => None,
                Caller::OtherProject(_) => Some((403, "permission_denied")),
                Caller::Allowed => None,
            };
            match expected {
                Some((status, code)) => {
                    assert_eq!((st, v["code"].as_str()), (status, Some(code)), "{cell}");
                    assert!(
                        v["detail"].as_str().is_some_and(|d| !d.is_empty()),
                        "{cell}"
                    );
                }
                None => assert!(
                    matches!(st, 200..=204),
                    "the right key gets through: {cell}"
                ),
            }
            assert!(!text.contains(marker), "{cell}");
            cells += 1;
        }
    }
    assert_eq!(cells, routes.len() * callers.len());

    // The other project's key lists only its own project.
    let (_, text) = send(Method::GET, "/api/projects/", bearer(&other_key), None).await;
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed["results"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["results"][0]["id"], 2, "{listed}");

    // Capture takes only project tokens: a personal key, a revoked one or garbage is 401.
    for token in [KEY, revoked.as_str(), "phc_not_a_token", ""] {
        for path in [
            "/i/v0/e/",
            "/batch/",
            "/e/",
            "/capture/",
            "/track/",
            "/engage/",
        ] {
            let (st, text) = send(
                Method::POST,
                path,
                None,
                Some(json!({"api_key": token, "event": "e", "distinct_id": "d", "batch": [{"event": "e", "distinct_id": "d"}]})),
            )
            .await;
            assert_eq!(st, 401, "{path} with {token:?}: {text}");
        }
    }

    // HogQL run in project 1 tries to reach other projects' rows, files, URLs, the
    // catalog and DataFusion's own statements: each is refused (400) or answers from
    // project 1 alone; never a 5xx, never project 2's marker, never a file's bytes.
    let data_dir = srv.data_dir.canonicalize().unwrap();
    let data_dir = data_dir.to_str().unwrap();
    // `true`: answers from project 1's rows; `false`: refused with a 400.
    let escapes = [
        (false, "SELECT * FROM events WHERE team_id = 2"),
        (
            true,
            "SELECT count() FROM events WHERE properties.secret != ''",
        ),
        (
            true,
            "SELECT count() FROM events WHERE event = 'matrix-secret-of-project-two'",
        ),
        (true, "SELECT properties FROM persons"),
        (
            true,
            "SELECT * FROM person_distinct_ids WHERE distinct_id = 'mallory'",
        ),
        (true, "SELECT * FROM person_distinct_ids WHERE team_id = 2"),
        (true, "SELECT * FROM groups"),
        (true, "SELECT * FROM sessions"),
        (
            true,
            "SELECT event FROM events UNION ALL SELECT event FROM events",
        ),
        (
            false,
            "SELECT event FROM (SELECT event, team_id FROM events)",
        ),
        (
            true,
            "SELECT e.event FROM events AS e JOIN events AS f ON e.uuid = f.uuid",
        ),
        (
            true,
            "SELECT event FROM events WHERE distinct_id IN (SELECT distinct_id FROM events)",
        ),
        (false, "SELECT * FROM raw_events"),
        (false, "SELECT * FROM events.events"),
        (false, "SELECT * FROM hedgerow.events"),
        (false, "SELECT * FROM datafusion.public.events"),
        (false, "SELECT * FROM file('/etc/passwd')"),
        (false, "SELECT * FROM url('http://127.0.0.1:1/')"),
        (false, "SELECT * FROM s3('http://127.0.0.1:1/b/k')"),
        (false, "SELECT * FROM read_parquet('events/*.parquet')"),
        (false, "SELECT * FROM delta_scan('events')"),
        (false, "SELECT * FROM read_csv('/etc/passwd')"),
        (
            false,
            "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
        ),
        (
            false,
            "COPY (SELECT * FROM events) TO '/tmp/hedgerow-escape.parquet'",
        ),
        (false, "SET datafusion.execution.target_partitions = 1"),
        (false, "SHOW TABLES"),
        (false, "SHOW COLUMNS FROM events"),
        (false, "DESCRIBE events"),
        (false, "EXPLAIN SELECT 1"),
        (false, "SELECT * FROM information_schema.tables"),
        (false, "SELECT * FROM information_schema.columns"),
        (false, "SELECT * FROM system.tables"),
        (false, "SELECT 1; SELECT * FROM events"),
        (false, "SELECT * FROM events SETTINGS readonly = 0"),
        (true, "SELECT * FROM events -- ' OR 1=1"),
        (false, "SELECT file('/etc/passwd')"),
        (false, "SELECT read_file('/etc/passwd')"),
    ];
    for (answers, q) in escapes {
        let (st, text) = send(
            Method::POST,
            "/api/projects/1/query/",
            bearer(KEY),
            Some(hogql(q)),
        )
        .await;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(st, if answers { 200 } else { 400 }, "{q}: {text}");
        let rows = v["results"].to_string();
        assert!(
            !rows.contains(marker) && !rows.contains("mallory"),
            "{q}: {text}"
        );
        assert!(
            !text.contains("root:x:0:0") && !text.contains(data_dir),
            "{q}: {text}"
        );
    }
    assert!(!std::path::Path::new("/tmp/hedgerow-escape.parquet").exists());
    // Placeholders are values, never SQL.
    for value in ["x' OR 1=1 --", "matrix-secret-of-project-two", "') OR (1=1"] {
        let (st, text) = send(
            Method::POST,
            "/api/projects/1/query/",
            bearer(KEY),
            Some(json!({"query": {"kind": "HogQLQuery",
                "query": "SELECT count() FROM events WHERE event = {e}", "values": {"e": value}}})),
        )
        .await;
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((st, &v["results"]), (200, &json!([[0]])), "{value}: {text}");
    }

    // The key commands read an existing data directory only; a mistyped one is an error.
    let missing = srv.data_dir.join("no-such-dir");
    let out = keys_cmd(&missing, &["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!missing.exists());
}
