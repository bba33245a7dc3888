//! Cohorts as PostHog's REST API shows them.

use chrono::SecondsFormat;
use hedgerow_engine::meta::Cohort;
use serde_json::{Value, json};

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A cohort object. `last_error` (why the last calculation failed) is hedgerow's own.
pub(crate) fn cohort(c: &Cohort) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "description": c.description,
        "groups": [],
        "filters": c.filters.clone().unwrap_or_else(|| json!({"properties": {"type": "AND", "values": []}})),
        "query": c.query,
        "deleted": c.deleted,
        "is_static": c.is_static,
        "is_calculating": c.is_calculating,
        "count": c.count,
        "created_by": null,
        "created_at": time(c.created_at),
        "last_calculation": c.last_calculation.map(time),
        "errors_calculating": c.errors_calculating,
        "last_error": c.last_error,
        "version": c.version,
        "experiment_set": [],
    })
}

/// One page of cohorts in the list envelope.
pub(crate) fn page(
    count: usize,
    next: Option<String>,
    previous: Option<String>,
    cohorts: &[Cohort],
) -> Value {
    let results = cohorts.iter().map(cohort).collect();
    super::persons::page(count as u64, next, previous, results)
}
