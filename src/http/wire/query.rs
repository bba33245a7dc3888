//! PostHog's JSON for the query API: the response of `POST /query/`, the `query_status` of
//! `GET /query/{id}/`, and the small bodies around them. The engine answers with typed
//! values ([`QueryResponse`], [`QueryStatus`]); the field names, the nulls and which fields
//! appear when are decided here only.
//!
//! Bodies are `serde_json::Value`s, whose objects keep their keys sorted, so the bytes sent
//! do not depend on the order fields are written in below.

use chrono::{DateTime, Utc};
use hedgerow_engine::meta::QueryLogEntry;
use hedgerow_engine::query::{QueryResponse, QueryState, QueryStatus};
use serde_json::{Value, json};

/// PostHog's time format in query responses: RFC 3339, UTC, microseconds.
fn iso_utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A query response. Before there are results (a query running in the background, a
/// `force_cache` miss) the result fields are null and `timings` is empty. `clickhouse` and
/// `error` are always null: there is no ClickHouse SQL, and a failed query is an error
/// response, not this one. `cache_target_age` (null) is sent once the query is complete.
pub(crate) fn response(r: QueryResponse) -> Value {
    let complete = r.status.is_complete();
    let (results, columns, types, hogql, timings, has_more, limit, offset) = match r.results {
        Some(q) => (
            q.object.unwrap_or(Value::Array(q.rows)),
            json!(q.columns),
            Value::Array(q.types.iter().map(|(n, t)| json!([n, t])).collect()),
            Value::String(q.hogql),
            Value::Array(
                q.timings
                    .iter()
                    .map(|(k, t)| json!({"k": k, "t": t}))
                    .collect(),
            ),
            Value::Bool(q.has_more),
            json!(q.limit),
            json!(q.offset),
        ),
        None => (
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            json!([]),
            Value::Null,
            Value::Null,
            Value::Null,
        ),
    };
    let mut body = json!({
        "results": results,
        "columns": columns,
        "types": types,
        "hogql": hogql,
        "clickhouse": null,
        "timings": timings,
        "error": null,
        "hasMore": has_more,
        "limit": limit,
        "offset": offset,
        "modifiers": r.modifiers,
        "is_cached": r.is_cached,
        "cache_key": r.cache_key,
        "last_refresh": r.last_refresh.map(iso_utc),
        "next_allowed_client_refresh": r.next_allowed_client_refresh.map(iso_utc),
        "timezone": r.timezone,
        "query_status": status(r.status),
    });
    if complete {
        body["cache_target_age"] = Value::Null;
    }
    body
}

/// A `query_status` object. `pickup_time` is the start; the fields hedgerow has no notion
/// of (dashboards, insights, labels, progress, expiry, Celery task ids) are null.
pub(crate) fn status(s: QueryStatus) -> Value {
    let complete = s.is_complete();
    let (error, error_message) = match s.state {
        QueryState::Failed(msg) => (true, Some(msg)),
        QueryState::Running | QueryState::Complete => (false, None),
    };
    json!({
        "id": s.id,
        "team_id": s.team.0,
        "query_async": s.query_async,
        "complete": complete,
        "error": error,
        "error_message": error_message,
        "dashboard_id": null,
        "end_time": s.ended_at.map(iso_utc),
        "expiration_time": null,
        "insight_id": null,
        "labels": null,
        "pickup_time": s.started_at.map(iso_utc),
        "query_progress": null,
        "results": s.results.map(|r| response(*r)),
        "start_time": s.started_at.map(iso_utc),
        "task_id": null,
    })
}

/// The body of `GET /query/{id}/`.
pub(crate) fn status_body(s: QueryStatus) -> Value {
    json!({ "query_status": status(s) })
}

/// The body of `GET /query/{id}/log/`: the entry's fields, under their own names.
pub(crate) fn log_entry(e: &QueryLogEntry) -> Result<Value, serde_json::Error> {
    serde_json::to_value(e)
}

/// The body of `GET /query/draft_sql/`.
pub(crate) fn draft_sql(sql: String) -> Value {
    json!({ "sql": sql })
}

/// The body of `POST /query/upgrade/`.
pub(crate) fn upgraded(query: Value) -> Value {
    json!({ "query": query })
}

#[cfg(test)]
mod tests {
    use hedgerow_engine::model::TeamId;
    use hedgerow_engine::query::QueryResults;

    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn served(id: &str, t: DateTime<Utc>) -> QueryStatus {
        QueryStatus {
            id: id.into(),
            team: TeamId(7),
            query_async: false,
            state: QueryState::Complete,
            started_at: Some(t),
            ended_at: Some(t),
            results: None,
        }
    }

    fn computed() -> QueryResponse {
        let t = at("2024-06-15T12:00:00.123456Z");
        QueryResponse {
            results: Some(QueryResults {
                columns: vec!["event".into(), "c".into()],
                types: vec![
                    ("event".into(), "String".into()),
                    ("c".into(), "UInt64".into()),
                ],
                rows: vec![json!(["$pageview", 3])],
                object: None,
                hogql: "SELECT event, count() AS c FROM events GROUP BY event LIMIT 100".into(),
                timings: vec![("./plan".into(), 0.5), ("./total".into(), 1.25)],
                has_more: false,
                limit: 100,
                offset: 0,
            }),
            modifiers: json!({"personsOnEventsMode": "person_id_override_properties_on_events"}),
            is_cached: true,
            cache_key: "cache_abc".into(),
            last_refresh: Some(t),
            next_allowed_client_refresh: Some(at("2024-06-15T12:00:03.123456Z")),
            timezone: "Europe/Paris".into(),
            status: served("q1", t),
        }
    }

    /// Every field of a computed response, as PostHog's clients read it.
    const COMPUTED: &str = r#"{
        "cache_key": "cache_abc",
        "cache_target_age": null,
        "clickhouse": null,
        "columns": ["event", "c"],
        "error": null,
        "hasMore": false,
        "hogql": "SELECT event, count() AS c FROM events GROUP BY event LIMIT 100",
        "is_cached": true,
        "last_refresh": "2024-06-15T12:00:00.123456Z",
        "limit": 100,
        "modifiers": {"personsOnEventsMode": "person_id_override_properties_on_events"},
        "next_allowed_client_refresh": "2024-06-15T12:00:03.123456Z",
        "offset": 0,
        "query_status": {
            "complete": true,
            "dashboard_id": null,
            "end_time": "2024-06-15T12:00:00.123456Z",
            "error": false,
            "error_message": null,
            "expiration_time": null,
            "id": "q1",
            "insight_id": null,
            "labels": null,
            "pickup_time": "2024-06-15T12:00:00.123456Z",
            "query_async": false,
            "query_progress": null,
            "results": null,
            "start_time": "2024-06-15T12:00:00.123456Z",
            "task_id": null,
            "team_id": 7
        },
        "results": [["$pageview", 3]],
        "timezone": "Europe/Paris",
        "timings": [{"k": "./plan", "t": 0.5}, {"k": "./total", "t": 1.25}],
        "types": [["event", "String"], ["c", "UInt64"]]
    }"#;

    fn parsed(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn a_computed_response_has_every_field() {
        let body = response(computed());
        assert_eq!(body, parsed(COMPUTED));
        // Keys are sorted on the wire whatever the order above.
        let text = body.to_string();
        assert!(text.starts_with(r#"{"cache_key":"cache_abc","cache_target_age":null,"#));
    }

    #[test]
    fn before_results_the_result_fields_are_null() {
        // A force_cache miss: complete at once, no times.
        let miss = QueryResponse {
            results: None,
            modifiers: json!({}),
            is_cached: false,
            cache_key: "cache_abc".into(),
            last_refresh: None,
            next_allowed_client_refresh: None,
            timezone: "UTC".into(),
            status: QueryStatus {
                started_at: None,
                ended_at: None,
                ..served("q2", at("2024-06-15T12:00:00Z"))
            },
        };
        let body = response(miss.clone());
        assert_eq!(
            body,
            json!({
                "results": null, "columns": null, "types": null, "hogql": null,
                "clickhouse": null, "timings": [], "error": null, "hasMore": null,
                "limit": null, "offset": null, "modifiers": {}, "is_cached": false,
                "cache_key": "cache_abc", "last_refresh": null,
                "next_allowed_client_refresh": null, "timezone": "UTC",
                "cache_target_age": null,
                "query_status": {
                    "id": "q2", "team_id": 7, "query_async": false, "complete": true,
                    "error": false, "error_message": null, "dashboard_id": null,
                    "end_time": null, "expiration_time": null, "insight_id": null,
                    "labels": null, "pickup_time": null, "query_progress": null,
                    "results": null, "start_time": null, "task_id": null,
                },
            })
        );

        // Started in the background: no cache_target_age yet.
        let start = at("2024-06-15T12:00:01Z");
        let running = QueryResponse {
            status: QueryStatus {
                query_async: true,
                state: QueryState::Running,
                started_at: Some(start),
                ended_at: None,
                ..served("q3", start)
            },
            ..miss
        };
        let body = response(running);
        let obj = body.as_object().unwrap();
        assert!(!obj.contains_key("cache_target_age"), "{body}");
        assert_eq!(obj.len(), 17, "{body}");
        assert_eq!(body["timings"], json!([]));
        assert_eq!(
            body["query_status"],
            json!({
                "id": "q3", "team_id": 7, "query_async": true, "complete": false,
                "error": false, "error_message": null, "dashboard_id": null,
                "end_time": null, "expiration_time": null, "insight_id": null,
                "labels": null, "pickup_time": "2024-06-15T12:00:01.000000Z",
                "query_progress": null, "results": null,
                "start_time": "2024-06-15T12:00:01.000000Z", "task_id": null,
            })
        );
    }

    #[test]
    fn a_status_carries_the_response_or_the_error() {
        let start = at("2024-06-15T11:59:59Z");
        let end = at("2024-06-15T12:00:00.123456Z");
        let task = |state, results| QueryStatus {
            id: "my-count".into(),
            team: TeamId(7),
            query_async: true,
            state,
            started_at: Some(start),
            ended_at: Some(end),
            results,
        };
        let done = status_body(task(QueryState::Complete, Some(Box::new(computed()))));
        let want = json!({
            "query_status": {
                "id": "my-count", "team_id": 7, "query_async": true, "complete": true,
                "error": false, "error_message": null, "dashboard_id": null,
                "end_time": "2024-06-15T12:00:00.123456Z", "expiration_time": null,
                "insight_id": null, "labels": null,
                "pickup_time": "2024-06-15T11:59:59.000000Z", "query_progress": null,
                "results": parsed(COMPUTED), "start_time": "2024-06-15T11:59:59.000000Z",
                "task_id": null,
            }
        });
        assert_eq!(done, want);

        let failed = status_body(task(
            QueryState::Failed("Query my-count was cancelled".into()),
            None,
        ));
        let st = &failed["query_status"];
        assert_eq!(
            (
                &st["complete"],
                &st["error"],
                &st["error_message"],
                &st["results"]
            ),
            (
                &json!(true),
                &json!(true),
                &json!("Query my-count was cancelled"),
                &Value::Null
            )
        );
        assert_eq!(st.as_object().unwrap().len(), 16);
    }
}
