//! The oracle of the `query` fuzz target (`fuzz/`, `scripts/fuzz`): any bytes, read as the
//! endpoint reads a body, either are refused with a named error or give a request whose
//! every promise holds.

use serde_json::Value;

use super::{
    HogQLNode, MAX_CLIENT_QUERY_ID_CHARS, MAX_NAME_CHARS, PersonsMode, QueryBody, QueryRequest,
    RequestError,
};

/// Reads `data` as the endpoint reads a body (JSON into [`QueryBody`], then
/// [`QueryBody::into_request`], the name and `client_query_id` checks, then
/// [`HogQLNode::from_value`]) and checks, panicking where a promise breaks:
/// - every refusal has a message, and names its field where it has one;
/// - an accepted name has at most [`MAX_NAME_CHARS`] characters and an accepted
///   `client_query_id` 1 to [`MAX_CLIENT_QUERY_ID_CHARS`];
/// - an accepted request written back as a body ([`QueryRequest::to_body`]) reads back as
///   the same request;
/// - an accepted node is a `HogQLQuery` whose text, values and persons mode are the ones
///   the body holds.
pub fn check(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<QueryBody>(data) else {
        return;
    };
    let req = match body.into_request() {
        Ok(r) => r,
        Err(e) => return refused(&e),
    };
    if let Err(e) = req.check_name() {
        refused(&e);
    } else if let Some(n) = &req.name {
        assert!(n.chars().count() <= MAX_NAME_CHARS, "{n:?} accepted");
    }
    if let Err(e) = req.check_client_query_id() {
        refused(&e);
    } else if let Some(id) = &req.client_query_id {
        let n = id.chars().count();
        assert!(
            (1..=MAX_CLIENT_QUERY_ID_CHARS).contains(&n),
            "{id:?} accepted"
        );
    }
    let again: QueryRequest = serde_json::from_value::<QueryBody>(req.to_body())
        .expect("a written-back body is JSON of the body's shape")
        .into_request()
        .expect("a written-back body is accepted");
    assert_eq!(
        again, req,
        "the request written back reads back differently"
    );

    match HogQLNode::from_value(&req.query) {
        Err(e) => refused(&e),
        Ok(node) => {
            let q = &req.query;
            assert_eq!(q["kind"], "HogQLQuery");
            assert_eq!(q["query"].as_str(), Some(node.query.as_str()));
            // The node's values are the body's, the filters (`{filters}`) and each
            // variable (`{variables.<code_name>}`).
            if let Some(Value::Object(m)) = q.get("values") {
                assert!(m.keys().all(|k| node.values.contains_key(k)));
            }
            if let Some(f @ Value::Object(_)) = q.get("filters") {
                assert_eq!(node.values.get("filters"), Some(f));
            }
            if let Some(Value::Object(vars)) = q.get("variables") {
                for v in vars.values() {
                    let code = v["code_name"]
                        .as_str()
                        .expect("accepted variables are named");
                    assert!(node.values.contains_key(&format!("variables.{code}")));
                }
            }
            let extra = usize::from(matches!(q.get("filters"), Some(Value::Object(_))))
                + q.get("variables")
                    .and_then(Value::as_object)
                    .map_or(0, |v| v.len());
            let own = q
                .get("values")
                .and_then(Value::as_object)
                .map_or(0, |v| v.len());
            assert!(node.values.len() <= own + extra);
            let mode = q
                .get("modifiers")
                .and_then(|m| m.get("personsOnEventsMode"))
                .and_then(Value::as_str);
            assert_eq!(
                node.persons_mode,
                mode.and_then(PersonsMode::parse).unwrap_or_default()
            );
        }
    }
}

fn refused(e: &RequestError) {
    assert!(!e.detail().is_empty(), "{e:?} says nothing");
    if let Some(attr) = e.attr() {
        assert!(!attr.is_empty());
    }
}

#[cfg(test)]
mod tests {
    /// The seed corpus of `fuzz/corpus/query` (bodies as clients send them, and malformed
    /// ones), each checked as the fuzzer checks it.
    #[test]
    fn the_seed_corpus_holds() {
        // The directory as cargo gives it when the test runs: the compile-time one is the
        // checkout that built it, which a target directory shared between clones reuses.
        let dir = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../../fuzz/corpus/query");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/query") {
            let path = entry.unwrap().path();
            super::check(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n >= 20, "{n} seeds in {}", dir.display());
    }

    #[test]
    fn overrides_go_into_the_node() {
        use super::super::*;
        let read = |s: &str| serde_json::from_str::<QueryBody>(s).unwrap().into_request();
        let req = read(
            r#"{"query": {"kind": "HogQLQuery", "query": "select {variables.n} where {filters}",
                  "filters": {"properties": [{"key": "a", "value": 1}],
                              "dateRange": {"date_from": "-30d"}},
                  "variables": {"v1": {"variableId": "v1", "code_name": "n", "value": 1}}},
                "filters_override": {"date_from": "-7d", "date_to": null,
                                     "properties": [{"key": "b", "value": 2}]},
                "variables_override": {"v1": {"value": 5},
                                       "v2": {"code_name": "m", "value": "x"}}}"#,
        )
        .unwrap();
        let node = HogQLNode::from_value(&req.query).unwrap();
        assert_eq!(
            node.values["filters"],
            json!({"properties": [{"key": "a", "value": 1}, {"key": "b", "value": 2}],
                   "dateRange": {"date_from": "-7d"}})
        );
        assert_eq!(node.values["variables.n"], 5);
        assert_eq!(node.values["variables.m"], "x");
        // A filter group on either side is kept whole under AND.
        let req = read(
            r#"{"query": {"kind": "HogQLQuery", "query": "",
                  "filters": {"properties": {"type": "OR", "values": []}}},
                "filters_override": {"properties": [{"key": "b", "value": 2}]}}"#,
        )
        .unwrap();
        assert_eq!(
            req.query["filters"]["properties"],
            json!({"type": "AND", "values": [{"type": "OR", "values": []},
                                              [{"key": "b", "value": 2}]]})
        );
        // What cannot apply is refused, naming the field.
        for (body, says) in [
            (
                r#"{"query": {"kind": "HogQLQuery", "query": ""}, "filters_override": {"breakdown_filter": {"breakdown": "$browser"}}}"#,
                "breakdown_filter does not apply",
            ),
            (
                r#"{"query": {"kind": "HogQLQuery", "query": ""}, "filters_override": [1]}"#,
                "must be an object",
            ),
            (
                r#"{"query": {"kind": "HogQLQuery", "query": ""}, "variables_override": {"v9": {"value": 1}}}"#,
                "names no variable",
            ),
            (
                r#"{"query": {"kind": "HogQLQuery", "query": ""}, "filters_override": {"date_from": 7}}"#,
                "must be a date text",
            ),
        ] {
            let e = read(body).unwrap_err();
            assert!(e.detail().contains(says), "{body}: {e}");
            assert!(e.attr().is_some_and(|a| a.ends_with("_override")), "{body}");
        }
        let bad_var = json!({"kind": "HogQLQuery", "query": "",
                             "variables": {"v": {"code_name": "a b", "value": 1}}});
        assert!(HogQLNode::from_value(&bad_var).is_err());
    }

    #[test]
    fn display_nodes_run_their_source() {
        use super::super::*;
        let body: QueryBody = serde_json::from_value(json!({"query": {"kind": "DataTableNode",
            "source": {"kind": "HogQLQuery", "query": "SELECT 1"}}}))
        .unwrap();
        let req = body.into_request().unwrap();
        assert_eq!(req.query["kind"], "HogQLQuery");
        let body: QueryBody = serde_json::from_value(json!({"query": {"kind": "InsightVizNode",
            "source": {"kind": "TrendsQuery", "series": []}},
            "filters_override": {"date_from": "-3d"}}))
        .unwrap();
        let req = body.into_request().unwrap();
        assert_eq!(req.query["dateRange"]["date_from"], "-3d");
    }

    #[test]
    fn a_body_reads_into_a_request_and_a_node() {
        use super::super::*;
        let body: QueryBody = serde_json::from_str(
            r#"{"query": {"kind": "HogQLQuery", "query": "select {x}", "values": {"x": 1},
                "modifiers": {"personsOnEventsMode": "disabled"}}, "refresh": true,
                "client_query_id": "q1", "name": "n"}"#,
        )
        .unwrap();
        let req = body.into_request().unwrap();
        assert_eq!(req.refresh, Refresh::Blocking);
        assert_eq!(req.client_query_id.as_deref(), Some("q1"));
        let node = HogQLNode::from_value(&req.query).unwrap();
        assert_eq!(node.query, "select {x}");
        assert_eq!(node.values["x"], 1);
        assert_eq!(node.persons_mode, PersonsMode::IdOverridePropertiesJoined);
        // The older flag, a missing query, a bad refresh.
        let read = |s: &str| serde_json::from_str::<QueryBody>(s).unwrap().into_request();
        assert_eq!(
            read(r#"{"query": {}, "async": true}"#).unwrap().refresh,
            Refresh::Async
        );
        assert_eq!(read("{}"), Err(RequestError::Required("query")));
        assert_eq!(
            read(r#"{"query": {}, "refresh": 3}"#).unwrap_err().attr(),
            Some("refresh")
        );
        assert!(read(r#"{"query": {}, "refresh": "soon"}"#).is_err());
        // Node errors.
        for (q, says) in [
            (json!([]), "an object with a kind"),
            (json!({"kind": "TrendsQuery"}), "not supported"),
            (json!({"kind": "HogQLQuery"}), "HogQL text"),
            (
                json!({"kind": "HogQLQuery", "query": "", "values": 1}),
                "values must be an object",
            ),
            (
                json!({"kind": "HogQLQuery", "query": "", "modifiers": {"personsOnEventsMode": "x"}}),
                "not supported",
            ),
        ] {
            let e = HogQLNode::from_value(&q).unwrap_err();
            assert!(e.detail().contains(says), "{q}: {e}");
        }
    }
}
