//! Feature flags, `/flags`, local-evaluation definitions, remote config and CORS, against
//! the real binary.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::*;

async fn body(r: reqwest::Response) -> (u16, Value) {
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// PostHog's hash, as the reference the server must agree with.
fn reference_hash(key: &str, id: &str, salt: &str) -> f64 {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("{key}.{id}{salt}").as_bytes());
    let hex = h.digest().to_string();
    u64::from_str_radix(&hex[..15], 16).unwrap() as f64 / 0xFFF_FFFF_FFFF_FFFFu64 as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feature_flags_rest_api() {
    let srv = Server::start(&[]);
    let c = client();
    let flags = srv.url("/api/projects/1/feature_flags/");
    let post = |b: Value| c.post(&flags).bearer_auth(KEY).json(&b).send();

    let (st, a) = body(
        post(json!({"key": "beta", "name": "Beta", "filters": {"groups": [{"properties": [], "rollout_percentage": 30}]}}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 201, "{a}");
    assert_eq!(
        (
            a["key"].as_str(),
            a["version"].as_i64(),
            a["active"].as_bool()
        ),
        (Some("beta"), Some(1), Some(true))
    );
    assert_eq!(a["rollout_percentage"], 30.0);
    let id = a["id"].as_i64().unwrap();

    // Only a top-level rollout: PostHog's older form, one condition set.
    let (st, b) = body(
        post(json!({"key": "legacy", "rollout_percentage": 10}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    assert_eq!(
        b["filters"]["groups"],
        json!([{"properties": [], "rollout_percentage": 10.0}])
    );

    // Refusals name their field.
    for (doc, attr, code) in [
        (json!({"key": "has space"}), "key", "invalid_input"),
        (json!({"name": "no key"}), "key", "invalid_input"),
        (json!({"key": "beta"}), "key", "unique"),
        (
            json!({"key": "mv", "filters": {"groups": [{}], "multivariate": {"variants": [{"key": "a", "rollout_percentage": 40}]}}}),
            "filters",
            "invalid_input",
        ),
        (
            json!({"key": "empty", "filters": {"groups": []}}),
            "filters",
            "invalid_input",
        ),
        (
            json!({"key": "sticky", "ensure_experience_continuity": true}),
            "ensure_experience_continuity",
            "invalid_input",
        ),
    ] {
        let (st, e) = body(post(doc.clone()).await.unwrap()).await;
        assert_eq!(
            (st, e["attr"].as_str(), e["code"].as_str()),
            (400, Some(attr), Some(code)),
            "{doc}: {e}"
        );
    }

    // Newest first.
    let (st, list) = body(c.get(&flags).bearer_auth(KEY).send().await.unwrap()).await;
    assert_eq!(st, 200);
    assert_eq!(list["count"], 2);
    assert_eq!(list["results"][0]["key"], "legacy");
    let (_, found) = body(
        c.get(format!("{flags}?search=BET"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found["count"], 1);

    let one = srv.url(&format!("/api/projects/1/feature_flags/{id}/"));
    let (st, p) = body(
        c.patch(&one)
            .bearer_auth(KEY)
            .json(&json!({"active": false}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (st, p["active"].as_bool(), p["version"].as_i64()),
        (200, Some(false), Some(2))
    );
    let (_, inactive) = body(
        c.get(format!("{flags}?active=false"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(inactive["count"], 1);
    // Filters without condition sets keep the flag's; a rollout alone changes a simple
    // flag, and is refused (not dropped) for another.
    let patch = |url: String, b: Value| c.patch(url).bearer_auth(KEY).json(&b).send();
    let (st, p) = body(
        patch(one.clone(), json!({"filters": {"payloads": {"true": 7}}}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["filters"]["groups"][0]["rollout_percentage"], 30.0);
    assert_eq!(p["filters"]["payloads"]["true"], "7");
    let (st, p) = body(
        patch(one.clone(), json!({"rollout_percentage": 60}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, &p["rollout_percentage"]), (200, &json!(60.0)), "{p}");
    let (st, e) = body(
        patch(one.clone(), json!({"filters": {"groups": []}}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, e["attr"].as_str()), (400, Some("filters")), "{e}");
    let legacy = srv.url(&format!("/api/projects/1/feature_flags/{}/", b["id"]));
    let two_sets =
        json!({"filters": {"groups": [{"properties": [{"key": "a", "value": "1"}]}, {}]}});
    let (st, e) = body(patch(legacy.clone(), two_sets).await.unwrap()).await;
    assert_eq!(st, 200, "{e}");
    let (st, e) = body(
        patch(legacy, json!({"rollout_percentage": 5}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (st, e["attr"].as_str()),
        (400, Some("rollout_percentage")),
        "{e}"
    );

    // DELETE is PostHog's 405; deleting is a PATCH, and frees the key.
    let (st, e) = body(c.delete(&one).bearer_auth(KEY).send().await.unwrap()).await;
    assert_eq!(
        (st, e["code"].as_str()),
        (405, Some("method_not_allowed")),
        "{e}"
    );
    let (st, d) = body(
        c.patch(&one)
            .bearer_auth(KEY)
            .json(&json!({"deleted": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, d["deleted"].as_bool()), (200, Some(true)));
    let (_, list) = body(c.get(&flags).bearer_auth(KEY).send().await.unwrap()).await;
    assert_eq!(list["count"], 1);
    let (st, _) = body(c.get(&one).bearer_auth(KEY).send().await.unwrap()).await;
    assert_eq!(st, 200, "a deleted flag is still read by id");
    let (st, _) = body(post(json!({"key": "beta"})).await.unwrap()).await;
    assert_eq!(st, 201);
    let (st, _) = body(
        c.get(srv.url("/api/projects/1/feature_flags/999/"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 404);

    // Scopes: feature_flag:read lists but does not write.
    let out = std::process::Command::new(bin())
        .args([
            "keys",
            "create",
            "--scopes",
            "feature_flag:read",
            "--data-dir",
        ])
        .arg(&srv.data_dir)
        .output()
        .unwrap();
    let reader = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (st, _) = body(c.get(&flags).bearer_auth(&reader).send().await.unwrap()).await;
    assert_eq!(st, 200);
    let (st, e) = body(
        c.post(&flags)
            .bearer_auth(&reader)
            .json(&json!({"key": "x"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((st, e["code"].as_str()), (403, Some("permission_denied")));
    let (st, _) = body(c.get(&flags).send().await.unwrap()).await;
    assert_eq!(st, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_endpoint_definitions_remote_config_and_cors() {
    let srv = Server::start(&[]);
    let c = client();
    let flags = srv.url("/api/projects/1/feature_flags/");
    let create = |b: Value| c.post(&flags).bearer_auth(KEY).json(&b).send();
    for doc in [
        json!({"key": "half", "filters": {"groups": [{"rollout_percentage": 50}], "payloads": {"true": {"n": 1}}}}),
        json!({"key": "split", "filters": {
            "groups": [{"rollout_percentage": 100}],
            "multivariate": {"variants": [{"key": "control", "rollout_percentage": 50},
                                          {"key": "test", "rollout_percentage": 50}]}}}),
        json!({"key": "pro-only", "filters": {"groups": [{"properties": [
            {"key": "plan", "value": ["pro", "enterprise"], "operator": "exact", "type": "person"}]}]}}),
        json!({"key": "big-orgs", "filters": {"aggregation_group_type_index": 0, "groups": [{"properties": [
            {"key": "seats", "value": "100", "operator": "gte", "type": "group", "group_type_index": 0}]}]}}),
        json!({"key": "off", "active": false}),
    ] {
        let (st, b) = body(create(doc).await.unwrap()).await;
        assert_eq!(st, 201, "{b}");
    }

    // A person with a stored plan, and the group type `company` (index 0).
    let batch = json!({"api_key": TOKEN, "batch": [
        {"event": "$identify", "distinct_id": "u-pro", "properties": {"$set": {"plan": "Pro"}}},
        {"event": "$groupidentify", "distinct_id": "u-pro", "properties": {
            "$group_type": "company", "$group_key": "acme", "$group_set": {"seats": 250}}},
    ]});
    let r = c
        .post(srv.url("/batch/"))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The persons API waits for persons to be stored.
    let (st, _) = body(
        c.get(srv.url("/api/projects/1/persons/?distinct_id=u-pro"))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);

    let ask = |path: &str, b: Value| c.post(srv.url(path)).json(&b).send();
    let (st, v2) = body(
        ask(
            "/flags/?v=2",
            json!({"token": TOKEN, "distinct_id": "u-pro", "groups": {"company": "acme"}}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{v2}");
    let f = &v2["flags"];
    assert_eq!(
        f["half"]["enabled"],
        reference_hash("half", "u-pro", "") <= 0.5
    );
    let want_variant = if reference_hash("split", "u-pro", "variant") < 0.5 {
        "control"
    } else {
        "test"
    };
    assert_eq!(f["split"]["variant"], want_variant);
    assert_eq!(
        f["pro-only"]["enabled"], true,
        "the stored plan, compared ignoring case"
    );
    assert_eq!(
        f["pro-only"]["reason"],
        json!({"code": "condition_match", "condition_index": 0, "description": "Matched condition set 1"})
    );
    assert_eq!(f["big-orgs"]["enabled"], true, "the stored group's seats");
    assert!(f.get("off").is_none(), "inactive flags are not answered");
    assert_eq!(f["split"]["metadata"]["version"], 1);
    assert!(v2["requestId"].is_string() && v2["errorsWhileComputingFlags"] == false);

    // The request's properties win over the stored ones; no group, no group flag.
    let (_, v2) = body(
        ask(
            "/flags/?v=2",
            json!({"api_key": TOKEN, "distinct_id": "u-pro",
        "person_properties": {"plan": "free"}}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(v2["flags"]["pro-only"]["enabled"], false);
    assert_eq!(
        v2["flags"]["pro-only"]["reason"]["code"],
        "no_condition_match"
    );
    assert_eq!(v2["flags"]["big-orgs"]["reason"]["code"], "no_group_type");

    // The older value map, with payloads as JSON text, for ids in and out of the rollout.
    let mut seen = (false, false);
    for i in 0..40 {
        let id = format!("anon-{i}");
        let (st, v1) = body(
            ask("/flags", json!({"token": TOKEN, "distinct_id": id}))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(st, 200);
        let on = reference_hash("half", &id, "") <= 0.5;
        assert_eq!(v1["featureFlags"]["half"], on, "{id}");
        if on {
            assert_eq!(v1["featureFlagPayloads"]["half"], "{\"n\":1}");
            seen.0 = true;
        } else {
            assert!(v1["featureFlagPayloads"].get("half").is_none());
            seen.1 = true;
        }
        assert_eq!(v1["featureFlags"]["pro-only"], false, "no stored plan");
    }
    assert_eq!(seen, (true, true));

    // posthog-js's encoding: a form with base64 JSON; and gzip; and /decide with config.
    let doc = json!({"token": TOKEN, "distinct_id": "u-pro", "$anon_distinct_id": "x"});
    let b64 = base64::engine::general_purpose::STANDARD.encode(doc.to_string());
    let form = format!(
        "data={}",
        url::form_urlencoded::byte_serialize(b64.as_bytes()).collect::<String>()
    );
    let r = c
        .post(srv.url("/flags/?v=2&compression=base64"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    let (st, v) = body(r).await;
    assert_eq!(
        (st, v["flags"]["pro-only"]["enabled"].as_bool()),
        (200, Some(true)),
        "{v}"
    );
    let r = c
        .post(srv.url("/flags/?v=2&config=true"))
        .header("content-encoding", "gzip")
        .body(gzip(doc.to_string().as_bytes()))
        .send()
        .await
        .unwrap();
    let (st, v) = body(r).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (
            v["hasFeatureFlags"].as_bool(),
            v["autocapture_opt_out"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let (st, d) = body(ask("/decide/?v=3", doc.clone()).await.unwrap()).await;
    assert_eq!(
        (
            st,
            d["featureFlags"]["pro-only"].as_bool(),
            d["supportedCompression"].is_array()
        ),
        (200, Some(true), true)
    );
    let (_, d) = body(ask("/decide/?v=4", doc.clone()).await.unwrap()).await;
    assert_eq!(d["flags"]["pro-only"]["enabled"], true);

    // Refusals in PostHog's shape.
    let (st, e) = body(
        ask(
            "/flags/?v=2",
            json!({"token": "phc_nobody", "distinct_id": "a"}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (st, e["code"].as_str(), e["type"].as_str()),
        (401, Some("invalid_api_key"), Some("authentication_error"))
    );
    let (st, e) = body(ask("/flags/?v=2", json!({"token": TOKEN})).await.unwrap()).await;
    assert_eq!(
        (st, e["detail"].as_str()),
        (
            400,
            Some("The distinct_id field is missing from the request")
        )
    );
    let (st, _) = body(
        c.post(srv.url("/flags/?v=2"))
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 400);

    // Definitions for local evaluation: every live flag, inactive too; a 304 for a poll
    // that has them already.
    for path in [
        "/flags/definitions?token=",
        "/api/feature_flag/local_evaluation?token=",
    ] {
        let r = c
            .get(srv.url(&format!("{path}{TOKEN}&send_cohorts")))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let etag = r.headers()["etag"].to_str().unwrap().to_owned();
        let (_, defs) = body(r).await;
        let keys: Vec<&str> = defs["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["half", "split", "pro-only", "big-orgs", "off"]);
        assert_eq!(defs["group_type_mapping"], json!({"0": "company"}));
        assert_eq!(defs["cohorts"], json!({}));
        let r = c
            .get(srv.url(&format!("{path}{TOKEN}")))
            .bearer_auth(KEY)
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304);
        let r = c
            .get(srv.url(&format!("{path}{TOKEN}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "definitions need a key");
    }

    // A project secret key reads that project's definitions and nothing else; rotating
    // it retires the old one.
    let rotate = || {
        c.post(srv.url("/api/projects/1/rotate_secret_token/"))
            .bearer_auth(KEY)
            .send()
    };
    let (st, p) = body(rotate().await.unwrap()).await;
    let phs = p["secret_api_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(st == 200 && phs.starts_with("phs_"), "{p}");
    let defs = |key: String| {
        c.get(srv.url(&format!("/flags/definitions?token={TOKEN}")))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(defs(phs.clone()).await.unwrap().status(), 200);
    let r = c
        .get(srv.url("/api/projects/1/persons/"))
        .bearer_auth(&phs)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let (_, again) = body(rotate().await.unwrap()).await;
    assert_eq!(defs(phs).await.unwrap().status(), 401);
    let fresh = again["secret_api_token"].as_str().unwrap().to_owned();
    assert_eq!(defs(fresh).await.unwrap().status(), 200);

    // Remote config follows the project's settings.
    let (st, cfg) = body(
        c.get(srv.url(&format!("/array/{TOKEN}/config")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        (
            cfg["token"].as_str(),
            cfg["autocapture_opt_out"].as_bool(),
            cfg["sessionRecording"].as_bool()
        ),
        (Some(TOKEN), Some(false), Some(false))
    );
    assert_eq!(cfg["capturePerformance"]["network_timing"], true);
    let (st, p) = body(c.patch(srv.url("/api/projects/1/")).bearer_auth(KEY)
        .json(&json!({"autocapture_opt_out": true, "heatmaps_opt_in": true, "capture_performance_opt_in": false}))
        .send().await.unwrap()).await;
    assert_eq!(
        (st, p["autocapture_opt_out"].as_bool()),
        (200, Some(true)),
        "{p}"
    );
    let js = c
        .get(srv.url(&format!("/array/{TOKEN}/config.js")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        js.headers()["content-type"],
        "application/javascript; charset=utf-8"
    );
    let js = js.text().await.unwrap();
    assert!(
        js.contains(&format!("window._POSTHOG_REMOTE_CONFIG[\"{TOKEN}\"]")),
        "{js}"
    );
    assert!(
        js.contains("\"autocapture_opt_out\":true") && js.contains("\"capturePerformance\":false"),
        "{js}"
    );
    let (st, e) = body(
        c.patch(srv.url("/api/projects/1/"))
            .bearer_auth(KEY)
            .json(&json!({"session_recording_opt_in": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (st, e["attr"].as_str()),
        (400, Some("session_recording_opt_in")),
        "{e}"
    );
    let (st, _) = body(
        c.get(srv.url("/array/phc_nobody/config"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 401);

    // CORS on every answer a browser reads: a preflight anywhere, errors and 404s.
    let pre = c
        .request(reqwest::Method::OPTIONS, srv.url("/flags/?v=2"))
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, traceparent",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 200);
    assert_eq!(
        pre.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    assert_eq!(
        pre.headers()["access-control-allow-headers"],
        "content-type, traceparent"
    );
    assert_eq!(pre.headers()["access-control-allow-credentials"], "true");
    for r in [
        c.get(srv.url("/no/such/route"))
            .header("origin", "https://shop.example")
            .send()
            .await
            .unwrap(),
        c.post(srv.url("/flags/?v=2"))
            .header("origin", "https://shop.example")
            .json(&json!({"token": "phc_nobody", "distinct_id": "a"}))
            .send()
            .await
            .unwrap(),
        c.get(srv.url(&format!("/array/{TOKEN}/config.js")))
            .header("origin", "https://shop.example")
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(
            r.headers()["access-control-allow-origin"],
            "https://shop.example",
            "{}",
            r.url()
        );
    }
}
