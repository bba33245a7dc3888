//! Cohorts on the real binary: each kind (person properties, behavioral, nested, HogQL,
//! static by distinct ids, person ids and CSV), their members through HogQL `IN COHORT`,
//! `{filters}` and the persons endpoints, recalculation, deletion and scopes. Expected
//! members are known by construction of the events.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

struct Api<'a> {
    srv: &'a Server,
    key: &'a str,
}

impl Api<'_> {
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = client()
            .request(method, self.srv.url(path))
            .bearer_auth(self.key);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (st, v) = self.send(method.clone(), path, body).await;
        assert!((200..300).contains(&st), "{method} {path}: {st} {v}");
        v
    }
    async fn create(&self, body: Value) -> Value {
        let (st, v) = self
            .send(Method::POST, "/api/projects/1/cohorts/", Some(body))
            .await;
        assert_eq!(st, 201, "{v}");
        v
    }
    async fn hogql(&self, q: &str) -> (u16, Value) {
        self.send(
            Method::POST,
            "/api/projects/1/query/",
            Some(json!({"query": {"kind": "HogQLQuery", "query": q}})),
        )
        .await
    }
    async fn one(&self, q: &str) -> Value {
        let (st, v) = self.hogql(q).await;
        assert_eq!(st, 200, "{q}: {v}");
        v["results"][0][0].clone()
    }
    /// The distinct ids of a cohort's members, from `/cohorts/{id}/persons/`.
    async fn members(&self, id: i64) -> BTreeSet<String> {
        let v = self
            .ok(
                Method::GET,
                &format!("/api/projects/1/cohorts/{id}/persons/?limit=1000"),
                None,
            )
            .await;
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["distinct_ids"].as_array().unwrap().clone())
            .map(|d| d.as_str().unwrap().to_owned())
            .collect()
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_cohort_and_its_members() {
    let srv = Server::start(&["--cohort-interval", "0s"]);
    let api = Api {
        srv: &srv,
        key: KEY,
    };
    // u0..u9: even ones on the pro plan; u0..u4 purchased (u0 three times, 40 days ago
    // once); u9 only ever browsed, 60 days ago.
    let now = chrono::Utc::now();
    let ago = |days: i64| (now - chrono::Duration::days(days)).to_rfc3339();
    let mut batch = Vec::new();
    for i in 0..10 {
        let plan = if i % 2 == 0 { "pro" } else { "free" };
        batch.push(json!({"event": "$pageview", "distinct_id": format!("u{i}"),
            "timestamp": ago(if i == 9 { 60 } else { 2 }),
            "properties": {"$set": {"plan": plan, "email": format!("u{i}@shop.io")}}}));
    }
    for i in 0..5 {
        batch.push(
            json!({"event": "purchase", "distinct_id": format!("u{i}"), "timestamp": ago(1),
                          "properties": {"total": 10 * i}}),
        );
    }
    batch.push(json!({"event": "purchase", "distinct_id": "u0", "timestamp": ago(3)}));
    batch.push(json!({"event": "purchase", "distinct_id": "u0", "timestamp": ago(40)}));
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Person properties.
    let pros = api
        .create(
            json!({"name": "Pros", "filters": {"properties": {"type": "AND", "values": [
            {"key": "plan", "value": "pro", "type": "person"}]}}}),
        )
        .await;
    assert_eq!(
        (&pros["count"], &pros["is_calculating"], &pros["is_static"]),
        (&json!(5), &json!(false), &json!(false)),
        "{pros}"
    );
    let pros_id = pros["id"].as_i64().unwrap();
    assert_eq!(
        api.members(pros_id).await,
        set(&["u0", "u2", "u4", "u6", "u8"])
    );

    // Behavioral: once in 30 days; three times in 60 days (u0 only: its third is 40 days ago).
    let buyers = api
        .create(
            json!({"name": "Buyers", "filters": {"properties": {"type": "OR", "values": [
            {"key": "purchase", "type": "behavioral", "value": "performed_event",
             "time_value": 30, "time_interval": "day"}]}}}),
        )
        .await;
    assert_eq!(buyers["count"], 5, "{buyers}");
    let buyers_id = buyers["id"].as_i64().unwrap();
    let loyal = api
        .create(json!({"name": "Loyal", "filters": {"properties": [
            {"key": "purchase", "type": "behavioral", "value": "performed_event_multiple",
             "operator": "gte", "operator_value": 3, "time_value": 60, "time_interval": "day"}]}}))
        .await;
    assert_eq!(
        api.members(loyal["id"].as_i64().unwrap()).await,
        set(&["u0"])
    );
    // Nested and negated: pros who did not buy.
    let idle_pros = api
        .create(
            json!({"name": "Idle pros", "filters": {"properties": {"type": "AND", "values": [
            {"key": "id", "type": "cohort", "value": pros_id},
            {"key": "id", "type": "cohort", "value": buyers_id, "negation": true}]}}}),
        )
        .await;
    assert_eq!(
        api.members(idle_pros["id"].as_i64().unwrap()).await,
        set(&["u6", "u8"])
    );
    // A HogQL query.
    let big = api
        .create(json!({"name": "Big spenders", "query": {"kind": "HogQLQuery",
            "query": "SELECT person_id FROM events WHERE event = 'purchase' AND toInt(properties.total) >= 30"}}))
        .await;
    assert_eq!(
        api.members(big["id"].as_i64().unwrap()).await,
        set(&["u3", "u4"])
    );

    // Static: by distinct ids, then person ids and a CSV added.
    let fixed = api
        .create(json!({"name": "Hand picked", "is_static": true, "distinct_ids": ["u1", "u3"]}))
        .await;
    assert_eq!(fixed["count"], 2, "{fixed}");
    let fixed_id = fixed["id"].as_i64().unwrap();
    let u5 = api
        .ok(Method::GET, "/api/projects/1/persons/?distinct_id=u5", None)
        .await["results"][0]
        .clone();
    let v = api
        .ok(
            Method::PATCH,
            &format!("/api/projects/1/cohorts/{fixed_id}/add_persons_to_static_cohort/"),
            Some(json!({"person_ids": [u5["uuid"]]})),
        )
        .await;
    assert_eq!(v["count"], 3, "{v}");

    // A trend broken down by cohorts: purchases of the last week by the pros (u0 twice, u2,
    // u4), by the hand-picked (u1, u3; u5 bought nothing) and by everyone.
    let (st, v) = api
        .send(
            Method::POST,
            "/api/projects/1/query/",
            Some(json!({"query": {"kind": "TrendsQuery",
                "series": [{"kind": "EventsNode", "event": "purchase"}],
                "breakdownFilter": {"breakdown_type": "cohort", "breakdown": [pros_id, fixed_id, "all"]}}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let got: Vec<(Value, Value, f64)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["breakdown_value"].clone(),
                r["label"].clone(),
                r["count"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (json!(pros_id), json!("Pros"), 4.0),
            (json!(fixed_id), json!("Hand picked"), 2.0),
            (json!("all"), json!("all users"), 6.0),
        ],
        "{v}"
    );
    // The persons behind the hand-picked cohort's value.
    let (st, v) = api
        .send(
            Method::POST,
            "/api/projects/1/query/",
            Some(json!({"query": {"kind": "ActorsQuery", "source": {"kind": "InsightActorsQuery",
                "breakdown": fixed_id,
                "source": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "purchase"}],
                    "breakdownFilter": {"breakdown_type": "cohort", "breakdown": [pros_id, fixed_id]}}}}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let ids: BTreeSet<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r[0]["distinct_ids"].as_array().unwrap().clone())
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, set(&["u1", "u3"]));
    // A form as PostHog's app uploads it.
    let form = "--b0undary\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nFrom a file\r\n\
                --b0undary\r\nContent-Disposition: form-data; name=\"is_static\"\r\n\r\ntrue\r\n\
                --b0undary\r\nContent-Disposition: form-data; name=\"csv\"; filename=\"p.csv\"\r\n\
                Content-Type: text/csv\r\n\r\ndistinct_id\nu7\nu9\n\r\n--b0undary--\r\n";
    let r = client()
        .post(srv.url("/api/projects/1/cohorts/"))
        .bearer_auth(KEY)
        .header("content-type", "multipart/form-data; boundary=b0undary")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let csv: Value = r.json().await.unwrap();
    assert_eq!(
        api.members(csv["id"].as_i64().unwrap()).await,
        set(&["u7", "u9"])
    );
    // Unknown persons are refused by name, and nothing is added.
    let (st, v) = api
        .send(
            Method::PATCH,
            &format!("/api/projects/1/cohorts/{fixed_id}/add_persons_to_static_cohort/"),
            Some(json!({"distinct_ids": ["u0", "ghost"]})),
        )
        .await;
    assert_eq!((st, v["attr"].as_str()), (400, Some("distinct_ids")), "{v}");
    assert!(v["detail"].as_str().unwrap().contains("ghost"), "{v}");
    assert_eq!(api.members(fixed_id).await, set(&["u1", "u3", "u5"]));
    let before = api.ok(Method::GET, "/api/projects/1/cohorts/", None).await["count"].clone();
    let (st, _) = api
        .send(
            Method::POST,
            "/api/projects/1/cohorts/",
            Some(json!({"name": "Ghosts", "is_static": true, "distinct_ids": ["ghost"]})),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(
        api.ok(Method::GET, "/api/projects/1/cohorts/", None).await["count"],
        before,
        "a refused create stores no cohort"
    );

    // HogQL: IN COHORT by id and by name, and a cohort filter through {filters}.
    assert_eq!(
        api.one(&format!(
            "SELECT count(DISTINCT person_id) FROM events WHERE person_id IN COHORT {pros_id}"
        ))
        .await,
        5
    );
    assert_eq!(
        api.one(
            "SELECT count() FROM events WHERE event = 'purchase' AND person_id NOT IN COHORT 'Pros'"
        )
        .await,
        2,
        "u1's and u3's purchases"
    );
    assert_eq!(
        api.one(&format!(
            "SELECT count() FROM persons WHERE id IN COHORT {fixed_id}"
        ))
        .await,
        3
    );
    let (st, v) = api
        .send(
            Method::POST,
            "/api/projects/1/query/",
            Some(json!({"query": {"kind": "HogQLQuery",
                "query": "SELECT count() FROM events WHERE event = 'purchase' AND {filters}",
                "filters": {"properties": [{"key": "id", "type": "cohort", "value": buyers_id, "operator": "in"},
                                           {"key": "plan", "value": "pro", "type": "person"}]}}})),
        )
        .await;
    assert_eq!(
        (st, &v["results"]),
        (200, &json!([[5]])),
        "u0 ×3, u2, u4: {v}"
    );
    // A cohort filter in an insight node: purchases of the pros over the last 7 days.
    let (st, v) = api
        .send(
            Method::POST,
            "/api/projects/1/query/",
            Some(json!({"query": {"kind": "TrendsQuery",
                "series": [{"kind": "EventsNode", "event": "purchase"}],
                "properties": [{"key": "id", "type": "cohort", "value": pros_id}]}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["results"][0]["count"], 4.0,
        "u0 twice, u2, u4 (u0's third is 40 days ago): {v}"
    );
    let (st, v) = api
        .hogql("SELECT 1 FROM events WHERE person_id IN COHORT 'Nobody'")
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("no cohort named 'Nobody'"),
        "{v}"
    );

    // The cohorts of one person (spec §4.1, 14).
    let u0 = api
        .ok(Method::GET, "/api/projects/1/persons/?distinct_id=u0", None)
        .await["results"][0]
        .clone();
    let v = api
        .ok(
            Method::GET,
            &format!("/api/projects/1/persons/cohorts/?person_id={}", u0["id"]),
            None,
        )
        .await;
    let names: BTreeSet<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, set(&["Buyers", "Loyal", "Pros"]));

    // Pagination of members.
    let v = api
        .ok(
            Method::GET,
            &format!("/api/projects/1/cohorts/{pros_id}/persons/?limit=2&offset=2"),
            None,
        )
        .await;
    assert_eq!(
        (v["count"].as_u64(), v["results"].as_array().unwrap().len()),
        (Some(5), 2)
    );
    assert!(v["next"].as_str().unwrap().contains("offset=4"), "{v}");

    // New events, then a recalculation.
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": [
            {"event": "purchase", "distinct_id": "u6", "timestamp": ago(0)}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        api.members(buyers_id).await.len(),
        5,
        "not yet recalculated"
    );
    let v = api
        .ok(
            Method::POST,
            &format!("/api/projects/1/cohorts/{buyers_id}/recalculate/"),
            None,
        )
        .await;
    assert_eq!(v["count"], 6, "{v}");
    // A changed definition is calculated at once.
    let v = api
        .ok(
            Method::PATCH,
            &format!("/api/projects/1/cohorts/{pros_id}/"),
            Some(json!({"filters": {"properties": [{"key": "plan", "value": "free", "type": "person"}]}})),
        )
        .await;
    assert_eq!(
        (v["count"].as_i64(), v["version"].as_i64()),
        (Some(5), Some(2)),
        "{v}"
    );
    assert_eq!(
        api.members(pros_id).await,
        set(&["u1", "u3", "u5", "u7", "u9"])
    );

    // Feature flags on cohort membership, answered at /flags as an SDK asks.
    let (st, flag) = api
        .send(
            Method::POST,
            "/api/projects/1/feature_flags/",
            Some(json!({"key": "for-buyers", "filters": {"groups": [{"properties": [
                {"key": "id", "type": "cohort", "value": buyers_id}], "rollout_percentage": 100}]}})),
        )
        .await;
    assert_eq!(st, 201, "{flag}");
    for (who, on) in [("u0", true), ("u6", true), ("u5", false), ("nobody", false)] {
        let r = client()
            .post(srv.url("/flags/?v=2"))
            .json(&json!({"token": TOKEN, "distinct_id": who}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["flags"]["for-buyers"]["enabled"], on, "{who}: {v}");
    }
    let (st, v) = api
        .send(
            Method::POST,
            "/api/projects/1/feature_flags/",
            Some(
                json!({"key": "no-such-cohort", "filters": {"groups": [{"properties": [
                {"key": "id", "type": "cohort", "value": 9999}]}]}}),
            ),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("no cohort 9999"),
        "{v}"
    );

    // A definition that cannot run is refused, saying why.
    for (body, attr) in [
        (
            json!({"name": "x", "filters": {"properties": [{"key": "a", "type": "event", "value": 1}]}}),
            "filters",
        ),
        (
            json!({"name": "x", "query": {"kind": "HogQLQuery", "query": "SELECT nope(1)"}}),
            "filters",
        ),
        (
            json!({"name": "", "filters": {"properties": [{"key": "plan", "value": "x", "type": "person"}]}}),
            "name",
        ),
        (
            json!({"name": "x", "is_static": true, "query": {"kind": "HogQLQuery", "query": "SELECT 1"}}),
            "is_static",
        ),
    ] {
        let (st, v) = api
            .send(Method::POST, "/api/projects/1/cohorts/", Some(body.clone()))
            .await;
        assert_eq!((st, v["attr"].as_str()), (400, Some(attr)), "{body}: {v}");
    }

    // Deleting is PATCH {deleted: true}; DELETE is PostHog's 405.
    let (st, _) = api
        .send(
            Method::DELETE,
            &format!("/api/projects/1/cohorts/{fixed_id}/"),
            None,
        )
        .await;
    assert_eq!(st, 405);
    api.ok(
        Method::PATCH,
        &format!("/api/projects/1/cohorts/{fixed_id}/"),
        Some(json!({"deleted": true})),
    )
    .await;
    let list = api.ok(Method::GET, "/api/projects/1/cohorts/", None).await;
    assert_eq!(list["count"], 6, "{list}");
    assert!(
        list["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != fixed_id)
    );
    let (st, _) = api
        .hogql(&format!(
            "SELECT 1 FROM events WHERE person_id IN COHORT {fixed_id}"
        ))
        .await;
    assert_eq!(st, 400);

    // Scopes: cohort:read lists but does not write; /persons/cohorts/ needs person:read too.
    let reader = create_key(&srv.data_dir, "cohort:read", None);
    let r = Api {
        srv: &srv,
        key: &reader,
    };
    assert_eq!(
        r.send(Method::GET, "/api/projects/1/cohorts/", None)
            .await
            .0,
        200
    );
    let (st, v) = r
        .send(
            Method::POST,
            "/api/projects/1/cohorts/",
            Some(json!({"name": "n", "is_static": true})),
        )
        .await;
    assert_eq!(st, 403, "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("cohort:write"),
        "{v}"
    );
    let path = format!("/api/projects/1/persons/cohorts/?person_id={}", u0["id"]);
    assert_eq!(r.send(Method::GET, &path, None).await.0, 403);
    let person_reader = create_key(&srv.data_dir, "person:read", None);
    let pr = Api {
        srv: &srv,
        key: &person_reader,
    };
    assert_eq!(pr.send(Method::GET, &path, None).await.0, 403);
    let both = create_key(&srv.data_dir, "person:read,cohort:read", None);
    let b = Api {
        srv: &srv,
        key: &both,
    };
    assert_eq!(b.send(Method::GET, &path, None).await.0, 200);
    // The environments path answers the same.
    assert_eq!(
        api.ok(Method::GET, "/api/environments/1/cohorts/", None)
            .await["count"],
        6
    );
}
