//! `FunnelsQuery` on the real binary: ordered, strict and unordered funnels, exclusions,
//! breakdowns with each attribution, conversion times and time to convert, and the persons
//! behind a step of a breakdown value. The data is eight hand-made persons whose answers
//! are worked out by hand below, one case each, so no number comes from the code under test.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::*;

/// `(person, seconds after the start, event, $browser)`.
const EVENTS: &[(&str, i64, &str, Option<&str>)] = &[
    // p1: A, B 10 min later, C 10 min after that: the whole funnel.
    ("p1", 0, "A", Some("Chrome")),
    ("p1", 600, "B", Some("Chrome")),
    ("p1", 1200, "C", Some("Chrome")),
    // p2: A then B.
    ("p2", 0, "A", Some("Chrome")),
    ("p2", 300, "B", Some("Chrome")),
    // p3: A, C, B: in order only A → B; unordered all three.
    ("p3", 0, "A", Some("Safari")),
    ("p3", 100, "C", Some("Safari")),
    ("p3", 200, "B", Some("Safari")),
    // p4: A, another event, B, C: converts unless strict.
    ("p4", 0, "A", Some("Firefox")),
    ("p4", 50, "X", Some("Firefox")),
    ("p4", 100, "B", Some("Firefox")),
    ("p4", 150, "C", Some("Firefox")),
    // p5: B comes after the hour's window.
    ("p5", 0, "A", Some("Safari")),
    ("p5", 4000, "B", Some("Safari")),
    // p6: A, the excluded L, B, C; no browser.
    ("p6", 0, "A", None),
    ("p6", 10, "L", None),
    ("p6", 20, "B", None),
    ("p6", 30, "C", None),
    // p7: B alone.
    ("p7", 0, "B", Some("Chrome")),
    // p8: A on Chrome, A on Safari, B on Safari.
    ("p8", 0, "A", Some("Chrome")),
    ("p8", 100, "A", Some("Safari")),
    ("p8", 200, "B", Some("Safari")),
];

async fn query(srv: &Server, q: Value) -> Value {
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": q}))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(st, 200, "{v}");
    v
}

fn funnel(filter: Value, breakdown: Value) -> Value {
    json!({"kind": "FunnelsQuery",
           "series": [{"kind": "EventsNode", "event": "A"}, {"kind": "EventsNode", "event": "B"},
                      {"kind": "EventsNode", "event": "C"}],
           "dateRange": {"date_from": "-7d"},
           "funnelsFilter": filter, "breakdownFilter": breakdown})
}

/// `(count, average, median)` of each step.
fn steps(v: &Value) -> Vec<(i64, Value, Value)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["count"].as_i64().unwrap(),
                s["average_conversion_time"].clone(),
                s["median_conversion_time"].clone(),
            )
        })
        .collect()
}

/// Per breakdown value: the value and the step counts.
fn by_value(v: &Value) -> Vec<(String, Vec<i64>)> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let b = b.as_array().unwrap();
            (
                b[0]["breakdown_value"].as_str().unwrap().to_owned(),
                b.iter().map(|s| s["count"].as_i64().unwrap()).collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn funnels_answer_the_hand_worked_cases() {
    let srv = Server::start(&[]);
    let start = chrono::Utc::now() - chrono::Duration::days(2);
    let batch: Vec<Value> = EVENTS
        .iter()
        .map(|(who, at, event, browser)| {
            let mut props = json!({});
            if let Some(b) = browser {
                props["$browser"] = json!(b);
            }
            json!({"event": event, "distinct_id": who, "properties": props,
                   "timestamp": (start + chrono::Duration::seconds(*at)).to_rfc3339()})
        })
        .collect();
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let hour = json!({"funnelWindowInterval": 1, "funnelWindowIntervalUnit": "hour"});
    let with = |extra: Value| {
        let mut f = hour.clone();
        for (k, v) in extra.as_object().unwrap() {
            f[k] = v.clone();
        }
        f
    };

    // Ordered. Step 2 (A → B): p1 600 s, p2 300, p3 200, p4 100, p6 20, p8 100 (from its
    // second A): mean 220, median 150. Step 3 (B → C): p1 600, p4 50, p6 10.
    let v = query(&srv, funnel(hour.clone(), Value::Null)).await;
    assert_eq!(
        steps(&v["results"]),
        vec![
            (7, Value::Null, Value::Null),
            (6, json!(220.0), json!(150.0)),
            (3, json!(220.0), json!(50.0)),
        ],
        "{v}"
    );
    assert_eq!(v["results"][1]["name"], "B");

    // Excluding L between A and B leaves p6 out.
    let excluded = with(json!({"exclusions": [{"kind": "EventsNode", "event": "L",
                                               "funnelFromStep": 0, "funnelToStep": 1}]}));
    let v = query(&srv, funnel(excluded, Value::Null)).await;
    assert_eq!(
        steps(&v["results"]),
        vec![
            (6, Value::Null, Value::Null),
            (5, json!(260.0), json!(200.0)),
            (2, json!(325.0), json!(325.0)),
        ],
        "{v}"
    );

    // Strict: p3's C, p4's X and p6's L break their paths; p8's second A restarts it.
    let v = query(
        &srv,
        funnel(with(json!({"funnelOrderType": "strict"})), Value::Null),
    )
    .await;
    let counts: Vec<i64> = steps(&v["results"]).iter().map(|s| s.0).collect();
    assert_eq!(counts, vec![7, 3, 1], "{v}");

    // Unordered: p7's lone B counts as a first step; p3 does all three. First gaps: p1 600,
    // p2 300, p3 100, p4 100, p6 20, p8 200 (its first A to B); second: p1 600, p3 100,
    // p4 50, p6 10.
    let v = query(
        &srv,
        funnel(with(json!({"funnelOrderType": "unordered"})), Value::Null),
    )
    .await;
    assert_eq!(
        steps(&v["results"]),
        vec![
            (8, Value::Null, Value::Null),
            (6, json!(220.0), json!(150.0)),
            (4, json!(190.0), json!(75.0)),
        ],
        "{v}"
    );

    // Breakdown by browser, first touch: Chrome p1 p2 p8, Safari p3 p5, Firefox p4, none
    // p6; ranked by the last step, then the one before.
    let browser = json!({"breakdown": "$browser", "breakdown_type": "event"});
    let v = query(&srv, funnel(hour.clone(), browser.clone())).await;
    let null = "$$_posthog_breakdown_null_$$";
    assert_eq!(
        by_value(&v),
        vec![
            ("Chrome".to_owned(), vec![3, 3, 1]),
            (null.to_owned(), vec![1, 1, 1]),
            ("Firefox".to_owned(), vec![1, 1, 1]),
            ("Safari".to_owned(), vec![2, 1, 0]),
        ],
        "{v}"
    );
    assert_eq!(v["results"][0][1]["breakdown"], "Chrome");
    // Two values shown; Firefox and Safari's persons as other.
    let mut limited = browser.clone();
    limited["breakdown_limit"] = json!(2);
    let v = query(&srv, funnel(hour.clone(), limited.clone())).await;
    assert_eq!(
        by_value(&v),
        vec![
            ("Chrome".to_owned(), vec![3, 3, 1]),
            (null.to_owned(), vec![1, 1, 1]),
            ("$$_posthog_breakdown_other_$$".to_owned(), vec![3, 2, 1]),
        ],
        "{v}"
    );
    // Last touch: p8 is Safari's.
    let v = query(
        &srv,
        funnel(
            with(json!({"breakdownAttributionType": "last_touch"})),
            browser.clone(),
        ),
    )
    .await;
    let values = by_value(&v);
    assert!(
        values.contains(&("Chrome".to_owned(), vec![2, 2, 1])),
        "{v}"
    );
    assert!(
        values.contains(&("Safari".to_owned(), vec![3, 2, 0])),
        "{v}"
    );
    // Two breakdowns at once: each value a list.
    let v = query(
        &srv,
        funnel(
            hour.clone(),
            json!({"breakdowns": [{"property": "$browser", "type": "event"},
                                  {"property": "event", "type": "hogql"}]}),
        ),
    )
    .await;
    let first = &v["results"][0];
    assert_eq!(first[0]["breakdown_value"], json!(["Chrome", "A"]), "{v}");
    assert_eq!(
        first
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["count"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![3, 3, 1]
    );
    // Step attribution to B: each person under the values of their B events (p7 did no A).
    let v = query(
        &srv,
        funnel(
            with(json!({"breakdownAttributionType": "step", "breakdownAttributionValue": 1})),
            browser.clone(),
        ),
    )
    .await;
    assert_eq!(
        by_value(&v),
        vec![
            ("Chrome".to_owned(), vec![2, 2, 1]),
            (null.to_owned(), vec![1, 1, 1]),
            ("Firefox".to_owned(), vec![1, 1, 1]),
            ("Safari".to_owned(), vec![3, 2, 0]),
        ],
        "{v}"
    );
    // All events: p8 counts under both, only Safari's events converting.
    let v = query(
        &srv,
        funnel(
            with(json!({"breakdownAttributionType": "all_events"})),
            browser.clone(),
        ),
    )
    .await;
    let values = by_value(&v);
    assert!(
        values.contains(&("Chrome".to_owned(), vec![3, 2, 1])),
        "{v}"
    );
    assert!(
        values.contains(&("Safari".to_owned(), vec![3, 2, 0])),
        "{v}"
    );

    // Time to convert from A to C: p6 30 s, p4 150, p1 1200; ∛3 → 2 bins of 585 s from 30.
    let v = query(
        &srv,
        funnel(
            with(json!({"funnelVizType": "time_to_convert"})),
            Value::Null,
        ),
    )
    .await;
    assert_eq!(
        v["results"],
        json!({"bins": [[30, 2], [615, 0], [1200, 1]], "average_conversion_time": 460.0}),
        "{v}"
    );

    // Funnel trends by day from A to C: every entry was on the same day; p1, p4 and p6
    // converted of the seven who entered: 42.86%.
    let mut trend = funnel(with(json!({"funnelVizType": "trends"})), Value::Null);
    trend["interval"] = json!("day");
    let v = query(&srv, trend).await;
    let series = &v["results"][0];
    let data: Vec<f64> = series["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let day = (start.date_naive()).format("%Y-%m-%d").to_string();
    let at = series["days"]
        .as_array()
        .unwrap()
        .iter()
        .position(|d| d.as_str() == Some(day.as_str()))
        .unwrap_or_else(|| panic!("{day} in {v}"));
    assert_eq!(data[at], 42.86, "{v}");
    assert_eq!(data.iter().filter(|x| **x != 0.0).count(), 1, "{v}");
    // From B to C: of the six entries that reached B, three went on.
    let mut trend = funnel(
        with(json!({"funnelVizType": "trends", "funnelFromStep": 1})),
        Value::Null,
    );
    trend["interval"] = json!("day");
    let v = query(&srv, trend).await;
    assert_eq!(v["results"][0]["data"][at], 50.0, "{v}");

    // Aggregated by a HogQL expression: by browser, Chrome's A, B and C came within the
    // hour (p1), as did Firefox's (p4); Safari's B came after its C.
    let v = query(
        &srv,
        funnel(
            with(json!({"funnelAggregateByHogQL": "properties.$browser"})),
            Value::Null,
        ),
    )
    .await;
    let counts: Vec<i64> = steps(&v["results"]).iter().map(|s| s.0).collect();
    assert_eq!(counts, vec![3, 3, 2], "{v}");
    // Funnel trends by browser (first touch): Chrome 1 of 3 (p1; not p2, p8), Safari 0 of
    // 2, Firefox and none 1 of 1.
    let mut trend = funnel(with(json!({"funnelVizType": "trends"})), browser.clone());
    trend["interval"] = json!("day");
    let v = query(&srv, trend).await;
    let rates: BTreeSet<(String, String)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["breakdown_value"].as_str().unwrap().to_owned(),
                s["data"][at].to_string(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String)> = [
        ("Chrome", "33.33"),
        ("Safari", "0.0"),
        ("Firefox", "100.0"),
        (null, "100.0"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(rates, want, "{v}");
    // Unordered funnel trends: p1, p3, p4 and p6 did all three within the hour; p2, p5, p7
    // and p8 did not: 50%.
    let mut trend = funnel(
        with(json!({"funnelVizType": "trends", "funnelOrderType": "unordered"})),
        Value::Null,
    );
    trend["interval"] = json!("day");
    let v = query(&srv, trend).await;
    assert_eq!(v["results"][0]["data"][at], 50.0, "{v}");

    // The persons behind a step of one breakdown value, and of other.
    let actors = |funnel: Value, point: Value| {
        let srv = &srv;
        async move {
            let mut q = json!({"kind": "ActorsQuery", "source": {"kind": "FunnelsActorsQuery", "source": funnel}});
            for (k, v) in point.as_object().unwrap() {
                q["source"][k] = v.clone();
            }
            ids_of(&query(srv, q).await, true)
        }
    };
    let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        actors(
            funnel(hour.clone(), browser.clone()),
            json!({"funnelStep": 2, "funnelStepBreakdown": "Safari"})
        )
        .await,
        set(&["p3"])
    );
    assert_eq!(
        actors(
            funnel(hour.clone(), limited),
            json!({"funnelStep": 1, "funnelStepBreakdown": "$$_posthog_breakdown_other_$$"})
        )
        .await,
        set(&["p3", "p4", "p5"])
    );
    // Dropped off before C, unordered: p2 and p8 (p7 did one step only).
    assert_eq!(
        actors(
            funnel(with(json!({"funnelOrderType": "unordered"})), Value::Null),
            json!({"funnelStep": -3})
        )
        .await,
        set(&["p2", "p8"])
    );
    // The persons endpoint takes PostHog's older filter with the same options.
    let r = client()
        .post(srv.url("/api/projects/1/persons/funnel/"))
        .bearer_auth(KEY)
        .json(&json!({"events": [{"id": "A", "order": 0}, {"id": "B", "order": 1}, {"id": "C", "order": 2}],
                      "date_from": "-7d", "funnel_window_interval": 1, "funnel_window_interval_unit": "hour",
                      "funnel_order_type": "strict", "funnel_step": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(ids_of(&v, false), set(&["p1", "p2", "p8"]), "{v}");

    // B optional (PostHog's optionalInFunnel): C may follow A directly. Paths: p1 A B C,
    // p2 A B, p3 A C (its B comes after C), p4 A B C, p5 A (B past the window), p6 A B C,
    // p8 A B (from its second A); p7 has no A. A step counts the persons whose path holds
    // it: A 7, B 5, C 4. An optional step adds no time, so the gaps are A → C: p1 1200 s,
    // p3 100, p4 150, p6 30 (mean 370, median 125), reported at the second step as PostHog
    // pairs them; there is no second gap.
    let mut optional = funnel(hour.clone(), Value::Null);
    optional["series"][1]["optionalInFunnel"] = json!(true);
    let v = query(&srv, optional.clone()).await;
    assert_eq!(
        steps(&v["results"]),
        vec![
            (7, Value::Null, Value::Null),
            (5, json!(370.0), json!(125.0)),
            (4, Value::Null, Value::Null),
        ],
        "{v}"
    );
    // Reached C; dropped off before C (held A, the required step before it, and not C).
    assert_eq!(
        actors(optional.clone(), json!({"funnelStep": 3})).await,
        set(&["p1", "p3", "p4", "p6"])
    );
    assert_eq!(
        actors(optional.clone(), json!({"funnelStep": -3})).await,
        set(&["p2", "p5", "p8"])
    );
    assert_eq!(
        actors(optional, json!({"funnelStep": 2})).await,
        set(&["p1", "p2", "p4", "p6", "p8"])
    );
}

/// The persons' distinct ids in a persons list or an actors response.
fn ids_of(v: &Value, actors: bool) -> BTreeSet<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            let p = if actors { &r[0] } else { r };
            p["distinct_ids"].as_array().unwrap().clone()
        })
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn funnel_correlation_matches_hand_worked_odds() {
    let srv = Server::start(&[]);
    let start = chrono::Utc::now() - chrono::Duration::days(2);
    // (person, seconds, event, plan set on them, V's quality)
    let events: &[(&str, i64, &str, &str, Option<&str>)] = &[
        ("c1", 0, "S1", "pro", None),
        ("c1", 10, "V", "pro", Some("hd")),
        ("c1", 20, "S2", "pro", None),
        ("c2", 0, "S1", "pro", None),
        ("c2", 10, "V", "pro", Some("hd")),
        ("c2", 30, "S2", "pro", None),
        ("c3", 0, "S1", "free", None),
        ("c3", 10, "V", "free", Some("hd")),
        ("c4", 0, "S1", "free", None),
        ("c4", 10, "Z", "free", None),
        ("c5", 0, "S1", "free", None),
        ("c5", 10, "Z", "free", None),
        // c6 watches after finishing: that V does not count.
        ("c6", 0, "S1", "pro", None),
        ("c6", 5, "S2", "pro", None),
        ("c6", 100, "V", "pro", Some("hd")),
    ];
    let batch: Vec<Value> = events
        .iter()
        .map(|(who, at, event, plan, quality)| {
            let mut props = json!({"$set": {"plan": plan}});
            if let Some(q) = quality {
                props["quality"] = json!(q);
            }
            json!({"event": event, "distinct_id": who, "properties": props,
                   "timestamp": (start + chrono::Duration::seconds(*at)).to_rfc3339()})
        })
        .collect();
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let funnel = json!({"kind": "FunnelsQuery", "series": [{"kind": "EventsNode", "event": "S1"},
                                                            {"kind": "EventsNode", "event": "S2"}],
                        "dateRange": {"date_from": "-7d"},
                        "funnelsFilter": {"funnelWindowInterval": 1, "funnelWindowIntervalUnit": "hour"}});
    let correlation = |extra: Value| {
        let mut q = json!({"kind": "FunnelCorrelationQuery",
                           "source": {"kind": "FunnelsActorsQuery", "source": funnel.clone()}});
        for (k, v) in extra.as_object().unwrap() {
            q[k] = v.clone();
        }
        q
    };
    let odds = |v: &Value| -> Vec<(String, i64, i64, f64, String)> {
        v["results"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["event"]["event"].as_str().unwrap().to_owned(),
                    e["success_count"].as_i64().unwrap(),
                    e["failure_count"].as_i64().unwrap(),
                    e["odds_ratio"].as_f64().unwrap(),
                    e["correlation_type"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    // Successes c1 c2 c6, failures c3 c4 c5. V: 2 and 1, odds (3·3)/(2·2) = 2.25; Z: 0
    // and 2, odds (1·2)/(4·3).
    let v = query(&srv, correlation(json!({}))).await;
    assert_eq!(v["results"]["skewed"], false, "{v}");
    assert_eq!(
        odds(&v),
        vec![
            ("V".to_owned(), 2, 1, 2.25, "success".to_owned()),
            ("Z".to_owned(), 0, 2, 2.0 / 12.0, "failure".to_owned()),
        ],
        "{v}"
    );
    // Person properties: plan::pro 3 and 0, odds (4·4)/(1·1); plan::free 0 and 3, 1/16.
    let v = query(
        &srv,
        correlation(
            json!({"funnelCorrelationType": "properties", "funnelCorrelationNames": ["plan"]}),
        ),
    )
    .await;
    assert_eq!(
        odds(&v),
        vec![
            ("plan::pro".to_owned(), 3, 0, 16.0, "success".to_owned()),
            (
                "plan::free".to_owned(),
                0,
                3,
                1.0 / 16.0,
                "failure".to_owned()
            ),
        ],
        "{v}"
    );
    let v = query(
        &srv,
        correlation(
            json!({"funnelCorrelationType": "properties", "funnelCorrelationNames": ["$all"]}),
        ),
    )
    .await;
    assert!(odds(&v).iter().any(|e| e.0 == "plan::pro"), "{v}");
    // The properties of V: quality hd, 2 and 1.
    let v = query(
        &srv,
        correlation(json!({"funnelCorrelationType": "event_with_properties",
                           "funnelCorrelationEventNames": ["V"]})),
    )
    .await;
    assert!(
        odds(&v).contains(&(
            "V::quality::hd".to_owned(),
            2,
            1,
            2.25,
            "success".to_owned()
        )),
        "{v}"
    );

    // The persons behind a result: through the query API and the persons endpoint.
    let v = query(
        &srv,
        json!({"kind": "ActorsQuery", "source": {"kind": "FunnelCorrelationActorsQuery",
               "source": correlation(json!({})),
               "funnelCorrelationPersonEntity": {"kind": "EventsNode", "event": "Z"},
               "funnelCorrelationPersonConverted": false}}),
    )
    .await;
    let set = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(ids_of(&v, true), set(&["c4", "c5"]));
    let persons = |body: Value| {
        let srv = &srv;
        async move {
            let r = client()
                .post(srv.url("/api/projects/1/persons/funnel/correlation/"))
                .bearer_auth(KEY)
                .json(&body)
                .send()
                .await
                .unwrap();
            let st = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            assert_eq!(st, 200, "{v}");
            ids_of(&v, false)
        }
    };
    let older = json!({"events": [{"id": "S1", "order": 0}, {"id": "S2", "order": 1}], "date_from": "-7d",
                       "funnel_window_interval": 1, "funnel_window_interval_unit": "hour"});
    let with = |extra: Value| {
        let mut b = older.clone();
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let entity = json!({"id": "V", "type": "events"});
    assert_eq!(
        persons(with(json!({"funnel_correlation_person_entity": entity,
                            "funnel_correlation_person_converted": "TrUe"})))
        .await,
        set(&["c1", "c2"])
    );
    assert_eq!(
        persons(with(json!({"funnel_correlation_person_entity": entity,
                            "funnel_correlation_person_converted": "false"})))
        .await,
        set(&["c3"])
    );
    assert_eq!(
        persons(with(json!({"funnel_correlation_person_entity": entity}))).await,
        set(&["c1", "c2", "c3"])
    );
    assert_eq!(
        persons(with(json!({"funnel_correlation_type": "properties",
                            "funnel_correlation_names": ["plan"],
                            "funnel_correlation_property_values": [{"key": "plan", "value": "free", "type": "person"}]})))
        .await,
        set(&["c3", "c4", "c5"])
    );
    let r = client()
        .post(srv.url("/api/projects/1/persons/funnel/correlation/"))
        .bearer_auth(KEY)
        .json(&with(json!({"funnel_correlation_person_entity": entity,
                           "funnel_correlation_person_converted": "maybe"})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["attr"], "funnel_correlation_person_converted", "{v}");
}
