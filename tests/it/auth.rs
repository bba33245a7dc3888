//! `/api/` authentication, scopes and the projects endpoints.

use serde_json::{Value, json};

use crate::support::*;

fn create_key(data_dir: &std::path::Path, scopes: &str, projects: Option<&str>) -> String {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["keys", "create", "--scopes", scopes, "--data-dir"])
        .arg(data_dir);
    if let Some(p) = projects {
        cmd.args(["--projects", p]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

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

    // A key without project:read.
    let other = create_key(&srv.data_dir, "query:read", None);
    assert_eq!(
        body(get("/api/projects/", Some(&other)).await.unwrap())
            .await
            .0,
        403
    );

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
