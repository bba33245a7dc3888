//! Insight nodes on the real binary: a `TrendsQuery`'s series checked against numbers
//! computed here from the same generated events (a plain reference, independent of the
//! HogQL the node compiles to).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::*;

const BROWSERS: [Option<&str>; 6] = [
    Some("Chrome"),
    Some("Chrome"),
    Some("Safari"),
    Some("Safari"),
    Some("Firefox"),
    None,
];

struct Ev {
    event: &'static str,
    user: usize,
    /// Days before today (UTC; the project's zone).
    ago: i64,
    amount: i64,
}

fn events() -> Vec<Ev> {
    let mut out = Vec::new();
    for ago in 0..12 {
        for user in 0..6 {
            if !(ago as usize + user).is_multiple_of(3) {
                out.push(Ev {
                    event: "$pageview",
                    user,
                    ago,
                    amount: 0,
                });
            }
            if user % 2 == 0 && ago % 2 == 0 {
                out.push(Ev {
                    event: "buy",
                    user,
                    ago,
                    amount: ago * 10 + user as i64,
                });
            }
        }
    }
    out
}

async fn trends(srv: &Server, query: Value) -> Value {
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": query}))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(st, 200, "{v}");
    v
}

/// A paths answer's edges (`source -> target`) with what `f` reads of each.
fn edges_by<T>(v: &Value, f: impl Fn(&Value) -> T) -> BTreeMap<String, T> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let (a, b) = (e["source"].as_str().unwrap(), e["target"].as_str().unwrap());
            (format!("{a} -> {b}"), f(e))
        })
        .collect()
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn data(series: &Value) -> Vec<f64> {
    series["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trends_series_match_a_reference() {
    let srv = Server::start(&[]);
    let today = chrono::Utc::now().date_naive();
    let evs = events();
    // Oldest first, so each person is created by their first event.
    let mut ordered: Vec<&Ev> = evs.iter().collect();
    ordered.sort_by_key(|e| -e.ago);
    let batch: Vec<Value> = ordered
        .into_iter()
        .map(|e| {
            let at = (today - chrono::Duration::days(e.ago))
                .and_hms_opt(0, 30, 0)
                .unwrap()
                .and_utc();
            let mut props =
                json!({"amount": e.amount, "$session_id": format!("s{}-{}", e.user, e.ago)});
            if let Some(b) = BROWSERS[e.user] {
                props["$browser"] = json!(b);
            }
            json!({"event": e.event, "distinct_id": format!("u{}", e.user),
                   "timestamp": at.to_rfc3339(), "properties": props})
        })
        .collect();
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // The reference: per day of the last 8 (index 7 - ago).
    let per_day = |f: &dyn Fn(&[&Ev]) -> f64, range: std::ops::RangeInclusive<i64>| -> Vec<f64> {
        range
            .rev()
            .map(|ago| {
                let day: Vec<&Ev> = evs.iter().filter(|e| e.ago == ago).collect();
                f(&day)
            })
            .collect()
    };
    let count =
        |event: &'static str| move |d: &[&Ev]| d.iter().filter(|e| e.event == event).count() as f64;
    let users = |d: &[&Ev]| {
        d.iter()
            .filter(|e| e.event == "$pageview")
            .map(|e| e.user)
            .collect::<BTreeSet<_>>()
            .len() as f64
    };
    let spent = |d: &[&Ev]| {
        d.iter()
            .filter(|e| e.event == "buy")
            .map(|e| e.amount as f64)
            .sum()
    };

    // Totals, daily, the last 7 days (8 buckets), with PostHog's fields.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}),
    )
    .await;
    let s = &v["results"][0];
    assert_eq!(data(s), per_day(&count("$pageview"), 0..=7), "{s}");
    assert_eq!(s["days"].as_array().unwrap().len(), 8);
    assert_eq!(s["days"][7], today.format("%Y-%m-%d").to_string());
    assert_eq!(s["labels"][7], today.format("%-d-%b-%Y").to_string());
    assert_eq!(
        s["count"].as_f64().unwrap(),
        per_day(&count("$pageview"), 0..=7).iter().sum::<f64>()
    );
    assert_eq!(
        (&s["label"], &s["action"]["math"]),
        (&json!("$pageview"), &json!("total"))
    );
    assert!(v["hogql"].as_str().unwrap().contains("FROM events"), "{v}");

    // Two series at once: unique users, and the sum of a property.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "dateRange": {"date_from": "-7d"}, "series": [
            {"kind": "EventsNode", "event": "$pageview", "math": "dau"},
            {"kind": "EventsNode", "event": "buy", "math": "sum", "math_property": "amount"}]}),
    )
    .await;
    assert_eq!(data(&v["results"][0]), per_day(&users, 0..=7));
    assert_eq!(data(&v["results"][1]), per_day(&spent, 0..=7));
    assert_eq!(v["results"][1]["action"]["order"], 1);

    // A breakdown by browser, two values shown: the rest are "other"; no browser is null.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}],
               "breakdownFilter": {"breakdown": "$browser", "breakdown_type": "event", "breakdown_limit": 2}}),
    )
    .await;
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    for e in evs.iter().filter(|e| e.event == "$pageview" && e.ago <= 7) {
        let b = BROWSERS[e.user].unwrap_or("$$_posthog_breakdown_null_$$");
        *totals.entry(b.to_owned()).or_default() += 1.0;
    }
    let mut ranked: Vec<(String, f64)> = totals.clone().into_iter().collect();
    ranked.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    let shown: Vec<String> = ranked.iter().take(2).map(|(b, _)| b.clone()).collect();
    let other: f64 = ranked.iter().skip(2).map(|(_, n)| n).sum();
    let got: BTreeMap<String, f64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["breakdown_value"].as_str().unwrap().to_owned(),
                s["count"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut want: BTreeMap<String, f64> = shown.iter().map(|b| (b.clone(), totals[b])).collect();
    want.insert("$$_posthog_breakdown_other_$$".into(), other);
    assert_eq!(got, want, "{v}");
    assert_eq!(v["hasMore"], true);

    // Compared with the previous period: the 8 days before.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}],
               "compareFilter": {"compare": true}}),
    )
    .await;
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (&r[0]["compare_label"], &r[1]["compare_label"]),
        (&json!("current"), &json!("previous"))
    );
    assert_eq!(data(&r[1]), per_day(&count("$pageview"), 8..=15));
    // Two breakdowns at once: each value a list, labelled with both.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "buy"}],
               "breakdownFilter": {"breakdown_limit": 100, "breakdowns": [
                   {"property": "$browser", "type": "event"}, {"property": "amount", "type": "event"}]}}),
    )
    .await;
    let mut want: BTreeMap<(String, String), f64> = BTreeMap::new();
    for e in evs.iter().filter(|e| e.event == "buy" && e.ago <= 7) {
        let browser = BROWSERS[e.user].unwrap_or("$$_posthog_breakdown_null_$$");
        *want
            .entry((browser.to_owned(), e.amount.to_string()))
            .or_default() += 1.0;
    }
    let mut got: BTreeMap<(String, String), f64> = BTreeMap::new();
    for r in v["results"].as_array().unwrap() {
        let b = r["breakdown_value"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"));
        let key = (
            b[0].as_str().unwrap().to_owned(),
            b[1].as_str().unwrap().to_owned(),
        );
        assert_eq!(r["label"], format!("{}::{}", key.0, key.1));
        got.insert(key, r["count"].as_f64().unwrap());
    }
    assert_eq!(got, want, "{v}");

    // Compared with a chosen earlier period: the same 8 days, 3 days back.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}],
               "compareFilter": {"compare": true, "compare_to": "-3d"}}),
    )
    .await;
    assert_eq!(
        data(&v["results"][1]),
        per_day(&count("$pageview"), 3..=10),
        "{v}"
    );
    // Several formulas over two series, each answered in turn with its name.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"},
                                                 {"kind": "EventsNode", "event": "buy"}],
               "trendsFilter": {"formulaNodes": [{"formula": "A + B", "custom_name": "all"},
                                                 {"formula": "A - B"}]}}),
    )
    .await;
    let (views, buys) = (
        per_day(&count("$pageview"), 0..=7),
        per_day(&count("buy"), 0..=7),
    );
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2, "{v}");
    assert_eq!(r[0]["label"], "all");
    let zip = |f: fn(f64, f64) -> f64| -> Vec<f64> {
        views.iter().zip(&buys).map(|(a, b)| f(*a, *b)).collect()
    };
    assert_eq!(data(&r[0]), zip(|a, b| a + b));
    assert_eq!(data(&r[1]), zip(|a, b| a - b));

    // Filters on the series and on the query, weekly buckets, and a dashboard's dates.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "interval": "week", "dateRange": {"date_from": "-30d"},
               "properties": [{"key": "$browser", "value": ["Chrome", "Safari"], "operator": "exact"}],
               "series": [{"kind": "EventsNode", "event": "$pageview",
                           "properties": [{"key": "$browser", "value": "Safari", "operator": "is_not"}]}]}),
    )
    .await;
    let chrome = evs
        .iter()
        .filter(|e| e.event == "$pageview" && BROWSERS[e.user] == Some("Chrome"))
        .count() as f64;
    assert_eq!(v["results"][0]["count"].as_f64().unwrap(), chrome, "{v}");
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]},
                      "filters_override": {"date_from": "-2d"}}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        data(&v["results"][0]),
        per_day(&count("$pageview"), 0..=2),
        "{v}"
    );

    // All time: from the project's first event (11 days ago), daily.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "dateRange": {"date_from": "all"},
               "series": [{"kind": "EventsNode", "event": "$pageview"}]}),
    )
    .await;
    assert_eq!(
        data(&v["results"][0]),
        per_day(&count("$pageview"), 0..=11),
        "{v}"
    );

    // Weekly active users: a day counts who was active in the 7 days ending with it.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview", "math": "weekly_active"}]}),
    )
    .await;
    let want: Vec<f64> = (0..=7)
        .rev()
        .map(|ago| {
            evs.iter()
                .filter(|e| e.event == "$pageview" && e.ago >= ago && e.ago <= ago + 6)
                .map(|e| e.user)
                .collect::<BTreeSet<_>>()
                .len() as f64
        })
        .collect();
    assert_eq!(data(&v["results"][0]), want, "{v}");

    // One number per series (a BoldNumber or a pie), with a breakdown.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "trendsFilter": {"display": "ActionsPie"},
               "series": [{"kind": "EventsNode", "event": "buy", "math": "sum", "math_property": "amount"}],
               "breakdownFilter": {"breakdown": "$browser"}}),
    )
    .await;
    let mut spent_by: BTreeMap<String, f64> = BTreeMap::new();
    for e in evs.iter().filter(|e| e.event == "buy" && e.ago <= 7) {
        let b = BROWSERS[e.user].unwrap_or("$$_posthog_breakdown_null_$$");
        *spent_by.entry(b.to_owned()).or_default() += e.amount as f64;
    }
    let got: BTreeMap<String, f64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["breakdown_value"].as_str().unwrap().to_owned(),
                s["aggregated_value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, spent_by, "{v}");

    // A formula over two series, per day.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "trendsFilter": {"formula": "(A + B) * 2"},
               "series": [{"kind": "EventsNode", "event": "$pageview"}, {"kind": "EventsNode", "event": "buy"}]}),
    )
    .await;
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 1, "{v}");
    assert_eq!(r[0]["label"], "Formula ((A + B) * 2)");
    let pv = per_day(&count("$pageview"), 0..=7);
    let buys = per_day(&count("buy"), 0..=7);
    let want: Vec<f64> = pv.iter().zip(&buys).map(|(a, b)| (a + b) * 2.0).collect();
    assert_eq!(data(&r[0]), want);

    // The events explorer's list: the event and person objects, an expression with a
    // label, newest first, paged.
    let list = |offset: usize| {
        json!({"kind": "EventsQuery", "event": "buy", "limit": 3, "offset": offset,
               "select": ["*", "event", "person", "toInt(properties.amount) -- Amount"],
               "orderBy": ["timestamp DESC", "toInt(properties.amount) DESC"],
               "where": ["toInt(properties.amount) > 0"]})
    };
    let mut buys: Vec<&Ev> = evs
        .iter()
        .filter(|e| e.event == "buy" && e.amount > 0)
        .collect();
    buys.sort_by_key(|e| (e.ago, -e.amount));
    let v = trends(&srv, list(0)).await;
    assert_eq!(v["columns"], list(0)["select"], "{v}");
    assert_eq!(
        (v["hasMore"].as_bool(), v["limit"].as_u64()),
        (Some(true), Some(3))
    );
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for (row, e) in rows.iter().zip(&buys) {
        assert_eq!(row[0]["event"], "buy");
        assert_eq!(row[0]["distinct_id"], format!("u{}", e.user));
        assert_eq!(row[0]["properties"]["amount"], e.amount, "{row}");
        assert_eq!(row[2]["distinct_id"], format!("u{}", e.user));
        assert_eq!(row[3], e.amount);
    }
    let v = trends(&srv, list(3)).await;
    assert_eq!(v["results"][0][3], buys[3].amount, "{v}");

    // Lifecycle of pageviews, daily: new (first seen), returning, resurrecting, dormant.
    let v = trends(
        &srv,
        json!({"kind": "LifecycleQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}),
    )
    .await;
    let active = |u: usize, ago: i64| {
        evs.iter()
            .any(|e| e.event == "$pageview" && e.user == u && e.ago == ago)
    };
    let created = |u: usize| {
        evs.iter()
            .filter(|e| e.user == u)
            .map(|e| e.ago)
            .max()
            .unwrap()
    };
    let mut want: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for status in ["new", "returning", "resurrecting", "dormant"] {
        want.insert(status, vec![0; 8]);
    }
    for (i, ago) in (0..=7).rev().enumerate() {
        for u in 0..6 {
            let status = match (active(u, ago), active(u, ago + 1)) {
                (true, _) if created(u) == ago => "new",
                (true, true) => "returning",
                (true, false) => "resurrecting",
                (false, true) => "dormant",
                (false, false) => continue,
            };
            want.get_mut(status).unwrap()[i] += if status == "dormant" { -1 } else { 1 };
        }
    }
    let got: BTreeMap<&str, Vec<i64>> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["status"].as_str().unwrap(),
                s["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(got, want, "{v}");

    // The persons behind one point (spec §4.1, 19), by node or by PostHog's older
    // parameters, paged; it needs person:read and query:read.
    let point = |ago: i64, status: &str| -> BTreeSet<String> {
        (0..6)
            .filter(|&u| {
                let s = match (active(u, ago), active(u, ago + 1)) {
                    (true, _) if created(u) == ago => "new",
                    (true, true) => "returning",
                    (true, false) => "resurrecting",
                    (false, true) => "dormant",
                    (false, false) => "",
                };
                s == status
            })
            .map(|u| format!("u{u}"))
            .collect()
    };
    let day = (today - chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    let node =
        json!({"kind": "LifecycleQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]});
    for status in ["returning", "resurrecting", "dormant"] {
        for url in [
            format!(
                "/api/projects/1/persons/lifecycle/?query={}&target_date={day}&lifecycle_type={status}",
                urlencode(&node.to_string())
            ),
            format!(
                "/api/projects/1/persons/lifecycle/?events={}&date_from=-7d&target_date={day}&lifecycle_type={status}&limit=1000",
                urlencode(r#"[{"id": "$pageview", "type": "events"}]"#)
            ),
        ] {
            let r = client()
                .get(srv.url(&url))
                .bearer_auth(KEY)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let v: Value = r.json().await.unwrap();
            let ids: BTreeSet<String> = v["results"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| p["distinct_ids"].as_array().unwrap().clone())
                .map(|d| d.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(ids, point(2, status), "{status}: {v}");
            assert_eq!(v["count"].as_u64().unwrap() as usize, ids.len());
        }
    }
    let reader = create_key(&srv.data_dir, "person:read", None);
    let r = client()
        .get(srv.url(&format!(
            "/api/projects/1/persons/lifecycle/?target_date={day}&lifecycle_type=new"
        )))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = client()
        .get(srv.url("/api/projects/1/persons/lifecycle/?lifecycle_type=new"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "target_date is required");

    // A funnel, pageview then buy within 14 days, the first step in the last 7 days. Both
    // events of a day share a timestamp, so whether a same-day buy converts is left open:
    // step 2 lies between the strict and the lenient count.
    let v = trends(
        &srv,
        json!({"kind": "FunnelsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"},
                                                   {"kind": "EventsNode", "event": "buy"}]}),
    )
    .await;
    let viewers: BTreeSet<usize> = evs
        .iter()
        .filter(|e| e.event == "$pageview" && e.ago <= 7)
        .map(|e| e.user)
        .collect();
    let converts = |u: usize, same_day: bool| {
        evs.iter()
            .filter(|a| a.user == u && a.event == "$pageview" && a.ago <= 7)
            .any(|a| {
                evs.iter().any(|b| {
                    b.user == u
                        && b.event == "buy"
                        && (b.ago < a.ago || (same_day && b.ago == a.ago))
                })
            })
    };
    let strict = viewers.iter().filter(|u| converts(**u, false)).count() as i64;
    let lenient = viewers.iter().filter(|u| converts(**u, true)).count() as i64;
    let steps = v["results"].as_array().unwrap();
    assert_eq!(
        steps[0]["count"].as_i64(),
        Some(viewers.len() as i64),
        "{v}"
    );
    let second = steps[1]["count"].as_i64().unwrap();
    assert!(
        strict <= second && second <= lenient,
        "{strict} <= {second} <= {lenient}: {v}"
    );
    assert_eq!(
        (&steps[1]["name"], &steps[1]["order"]),
        (&json!("buy"), &json!(1))
    );
    // The persons behind the steps (spec §4.1, 15 and 16): who reached step 2 and who
    // dropped off before it split the first step's persons.
    let persons = |body: Value| {
        let srv = &srv;
        async move {
            let r = client()
                .post(srv.url("/api/projects/1/persons/funnel/?limit=1000"))
                .bearer_auth(KEY)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let v: Value = r.json().await.unwrap();
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| p["distinct_ids"].as_array().unwrap().clone())
                .map(|d| d.as_str().unwrap().to_owned())
                .collect::<BTreeSet<String>>()
        }
    };
    let funnel = json!({"kind": "FunnelsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"},
                                                            {"kind": "EventsNode", "event": "buy"}]});
    let first = persons(json!({"query": funnel, "funnel_step": 1})).await;
    let reached = persons(json!({"query": funnel, "funnel_step": 2})).await;
    let dropped = persons(
        json!({"events": [{"id": "$pageview", "order": 0}, {"id": "buy", "order": 1}],
                                 "date_from": "-7d", "funnel_step": -2}),
    )
    .await;
    assert_eq!(
        first,
        viewers
            .iter()
            .map(|u| format!("u{u}"))
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(reached.len() as i64, second);
    assert!(reached.is_disjoint(&dropped));
    assert_eq!(
        reached.union(&dropped).cloned().collect::<BTreeSet<_>>(),
        first
    );
    let r = client()
        .get(srv.url(&format!(
            "/api/projects/1/persons/funnel/?query={}&funnel_step=9",
            urlencode(&funnel.to_string())
        )))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a step the funnel does not have");

    // Retention, daily, 8 periods: who viewed in a period, and of them who bought k
    // periods later; recurring and first time.
    for first_time in [false, true] {
        // First time over 12 days: everyone's first view is 10 or 11 days ago.
        let n: i64 = if first_time { 12 } else { 8 };
        let v = trends(
            &srv,
            json!({"kind": "RetentionQuery", "retentionFilter": {
                "period": "Day", "totalIntervals": n,
                "retentionType": if first_time { "retention_first_time" } else { "retention_recurring" },
                "targetEntity": {"id": "$pageview", "type": "events"},
                "returningEntity": {"id": "buy", "type": "events"}}}),
        )
        .await;
        let first_view = |u: usize| {
            evs.iter()
                .filter(|e| e.user == u && e.event == "$pageview")
                .map(|e| e.ago)
                .max()
        };
        let rows = v["results"].as_array().unwrap();
        assert_eq!(rows.len() as i64, n, "{v}");
        let mut cohorts = 0;
        for (i, row) in rows.iter().enumerate() {
            let ago = n - 1 - i as i64;
            let cohort: Vec<usize> = (0..6)
                .filter(|&u| match first_time {
                    true => first_view(u) == Some(ago),
                    false => active(u, ago),
                })
                .collect();
            let got: Vec<i64> = row["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["count"].as_i64().unwrap())
                .collect();
            cohorts += cohort.len();
            let mut want = vec![cohort.len() as i64];
            for k in 1..(n - i as i64) {
                let back = cohort
                    .iter()
                    .filter(|&&u| {
                        evs.iter()
                            .any(|e| e.user == u && e.event == "buy" && e.ago == ago - k)
                    })
                    .count();
                want.push(back as i64);
            }
            assert_eq!(got, want, "first_time {first_time}, row {i}: {row}");
        }
        assert!(cohorts > 0);

        // Broken down by browser (the first view's for first-time retention, the person's
        // for recurring): each value's table is the same count over that browser's users.
        let breakdown = match first_time {
            true => json!({"breakdown": "$browser", "breakdown_type": "event"}),
            false => json!({"breakdown": "$browser", "breakdown_type": "person"}),
        };
        let v = trends(
            &srv,
            json!({"kind": "RetentionQuery", "breakdownFilter": breakdown, "retentionFilter": {
                "period": "Day", "totalIntervals": n,
                "retentionType": if first_time { "retention_first_time" } else { "retention_recurring" },
                "targetEntity": {"id": "$pageview", "type": "events"},
                "returningEntity": {"id": "buy", "type": "events"}}}),
        )
        .await;
        let mut by_value: BTreeMap<String, Vec<Vec<i64>>> = BTreeMap::new();
        for row in v["results"].as_array().unwrap() {
            by_value
                .entry(row["breakdown_value"].as_str().unwrap().to_owned())
                .or_default()
                .push(
                    row["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x["count"].as_i64().unwrap())
                        .collect(),
                );
        }
        for (value, table) in &by_value {
            assert_eq!(table.len() as i64, n, "{value}: {v}");
            for (i, got) in table.iter().enumerate() {
                let ago = n - 1 - i as i64;
                let cohort: Vec<usize> = (0..6)
                    .filter(|&u| {
                        BROWSERS[u].unwrap_or("$$_posthog_breakdown_null_$$") == value
                            && match first_time {
                                true => first_view(u) == Some(ago),
                                false => active(u, ago),
                            }
                    })
                    .collect();
                assert_eq!(got[0], cohort.len() as i64, "{value}, row {i}: {v}");
            }
        }
        assert!(
            by_value.contains_key("Chrome") && by_value.len() >= 3,
            "{v}"
        );
    }

    // Stickiness: persons by how many of the last 8 days they viewed a page.
    let v = trends(
        &srv,
        json!({"kind": "StickinessQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}),
    )
    .await;
    let mut want = vec![0i64; 8];
    for u in 0..6 {
        let days = (0..=7).filter(|&ago| active(u, ago)).count();
        if days > 0 {
            want[days - 1] += 1;
        }
    }
    let s = &v["results"][0];
    assert_eq!(s["data"], json!(want), "{v}");
    assert_eq!(
        (&s["labels"][0], &s["labels"][1]),
        (&json!("1 day"), &json!("2 days"))
    );

    // The persons behind one point (ActorsQuery over an InsightActorsQuery): a trend's day
    // and breakdown value, a lifecycle status, a funnel step, a stickiness count.
    let actors = |insight: Value, point: Value| {
        let srv = &srv;
        async move {
            let mut source = json!({"kind": "InsightActorsQuery", "source": insight});
            for (k, v) in point.as_object().unwrap() {
                source[k] = v.clone();
            }
            let v = trends(
                srv,
                json!({"kind": "ActorsQuery", "source": source, "limit": 1000}),
            )
            .await;
            assert_eq!(v["columns"], json!(["actor"]), "{v}");
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r[0]["distinct_ids"].as_array().unwrap().clone())
                .map(|d| d.as_str().unwrap().to_owned())
                .collect::<BTreeSet<String>>()
        }
    };
    let ids = |users: Vec<usize>| {
        users
            .into_iter()
            .map(|u| format!("u{u}"))
            .collect::<BTreeSet<_>>()
    };
    let trend = json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}],
                       "breakdownFilter": {"breakdown": "$browser"}});
    assert_eq!(
        actors(
            trend,
            json!({"day": day, "series": 0, "breakdown": "Chrome"})
        )
        .await,
        ids((0..6)
            .filter(|&u| active(u, 2) && BROWSERS[u] == Some("Chrome"))
            .collect())
    );
    assert_eq!(
        actors(node.clone(), json!({"day": day, "status": "dormant"})).await,
        point(2, "dormant")
    );
    assert_eq!(
        actors(funnel.clone(), json!({"funnelStep": 1})).await,
        first
    );
    let retention = json!({"kind": "RetentionQuery", "retentionFilter": {"period": "Day", "totalIntervals": 8,
        "targetEntity": {"id": "$pageview", "type": "events"}, "returningEntity": {"id": "buy", "type": "events"}}});
    assert_eq!(
        actors(retention, json!({"interval": 5})).await,
        ids((0..6).filter(|&u| active(u, 2)).collect()),
        "cohort row 5 is 2 days ago"
    );
    let sticky = json!({"kind": "StickinessQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]});
    for k in 1..=8 {
        assert_eq!(
            actors(sticky.clone(), json!({"day": k})).await,
            ids((0..6)
                .filter(|&u| (0..=7).filter(|&ago| active(u, ago)).count() == k as usize)
                .collect()),
            "{k} days"
        );
    }

    // What is not computed yet is refused by name.
    let r = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": {"kind": "TrendsQuery", "series": [{"kind": "ActionsNode", "id": 1}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["detail"].as_str().unwrap().contains("ActionsNode"), "{v}");
    // Smoothing: a trailing mean over 3 days.
    let v = trends(
        &srv,
        json!({"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}],
               "trendsFilter": {"smoothingIntervals": 3}}),
    )
    .await;
    let raw = per_day(&count("$pageview"), 0..=7);
    let want: Vec<f64> = (0..raw.len())
        .map(|i| {
            let w = &raw[i.saturating_sub(2)..=i];
            w.iter().sum::<f64>() / w.len() as f64
        })
        .collect();
    let got = data(&v["results"][0]);
    assert!(
        got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-9),
        "{got:?} {want:?}"
    );
    // Paths of pages: three visitors an hour ago (the other pageviews have no URL).
    let t0 = chrono::Utc::now() - chrono::Duration::hours(1);
    let visits = [
        ("p1", vec!["/a", "/b", "/c"]),
        ("p2", vec!["/a", "/c"]),
        ("p3", vec!["/a", "/b", "/b"]),
    ];
    let batch: Vec<Value> = visits
        .iter()
        .flat_map(|(who, pages)| {
            pages.iter().enumerate().map(move |(i, page)| {
                json!({"event": "$pageview", "distinct_id": who,
                       "timestamp": (t0 + chrono::Duration::seconds(10 * i as i64)).to_rfc3339(),
                       "properties": {"$current_url": page}})
            })
        })
        .collect();
    let r = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": batch}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v = trends(
        &srv,
        json!({"kind": "PathsQuery", "pathsFilter": {"includeEventTypes": ["$pageview"]}}),
    )
    .await;
    let edges: BTreeMap<(String, String), i64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                (
                    e["source"].as_str().unwrap().to_owned(),
                    e["target"].as_str().unwrap().to_owned(),
                ),
                e["value"].as_i64().unwrap(),
            )
        })
        .collect();
    let want: BTreeMap<(String, String), i64> = [
        (("1_/a", "2_/b"), 2),
        (("2_/b", "3_/c"), 1),
        (("1_/a", "2_/c"), 1),
    ]
    .into_iter()
    .map(|((a, b), n)| ((a.to_owned(), b.to_owned()), n))
    .collect();
    assert_eq!(edges, want, "{v}");
    // Each edge's average seconds between its steps, a step timed by the last event of its
    // run: /a → /b took 10 s for p1 and 20 s for p3 (/b, /b), the others 10 s.
    assert_eq!(
        edges_by(&v, |e| e["average_conversion_time"].as_f64().unwrap()),
        BTreeMap::from([
            ("1_/a -> 2_/b".to_string(), 15.0),
            ("1_/a -> 2_/c".to_string(), 10.0),
            ("2_/b -> 3_/c".to_string(), 10.0)
        ]),
        "{v}"
    );
    // Cleaned (/b and /c become /bc, then folded) and grouped (/b* holds /b).
    let paths = |filter: Value| {
        let srv = &srv;
        async move {
            let v = trends(srv, json!({"kind": "PathsQuery", "pathsFilter": filter})).await;
            edges_by(&v, |e| e["value"].as_i64().unwrap())
        }
    };
    let edges = |list: &[(&str, i64)]| -> BTreeMap<String, i64> {
        list.iter().map(|(e, n)| (e.to_string(), *n)).collect()
    };
    assert_eq!(
        paths(json!({"includeEventTypes": ["$pageview"],
            "localPathCleaningFilters": [{"regex": "^/(b|c)$", "alias": "/bc"}]}))
        .await,
        edges(&[("1_/a -> 2_/bc", 3)])
    );
    assert_eq!(
        paths(
            json!({"includeEventTypes": ["$pageview"], "pathGroupings": ["/b*"],
            "pathReplacements": true})
        )
        .await,
        edges(&[
            ("1_/a -> 2_/b*", 2),
            ("2_/b* -> 3_/c", 1),
            ("1_/a -> 2_/c", 1)
        ])
    );
    // The persons behind an edge, a step reached and a drop-off.
    let path_persons = |point: Value| {
        let srv = &srv;
        async move {
            let mut source = json!({"kind": "InsightActorsQuery",
                "source": {"kind": "PathsQuery", "pathsFilter": {"includeEventTypes": ["$pageview"]}}});
            for (k, v) in point.as_object().unwrap() {
                source[k] = v.clone();
            }
            let v = trends(srv, json!({"kind": "ActorsQuery", "source": source})).await;
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r[0]["distinct_ids"].as_array().unwrap().clone())
                .map(|d| d.as_str().unwrap().to_owned())
                .collect::<BTreeSet<String>>()
        }
    };
    let who = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        path_persons(json!({"pathStartKey": "1_/a", "pathEndKey": "2_/b"})).await,
        who(&["p1", "p3"])
    );
    assert_eq!(
        path_persons(json!({"pathEndKey": "3_/c"})).await,
        who(&["p1"])
    );
    assert_eq!(
        path_persons(json!({"pathDropoffKey": "2_/b"})).await,
        who(&["p3"])
    );

    // The run is in the query log under its kind.
    let (_, log) = {
        let r = client()
            .post(srv.url("/api/projects/1/query/"))
            .bearer_auth(KEY)
            .json(&json!({"query": {"kind": "HogQLQuery",
                "query": "SELECT count() FROM query_log WHERE kind = 'TrendsQuery' AND status = 'completed'"}}))
            .send()
            .await
            .unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    assert!(log["results"][0][0].as_i64().unwrap() >= 5, "{log}");
}
