//! Feature flags and remote config as PostHog sends them: the flag object of the REST API,
//! `/flags` answers (the detailed `v=2` map and the older value map), the definitions
//! server SDKs evaluate locally, and posthog-js's remote config.

use chrono::SecondsFormat;
use hedgerow_engine::flags::FeatureFlag;
use hedgerow_engine::meta::ProjectSettings;
use hedgerow_engine::{FlagAnswer, RemoteConfig};
use serde_json::{Map, Value, json};

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A flag as the REST API shows it.
pub(crate) fn flag(f: &FeatureFlag) -> Value {
    let filters = serde_json::to_value(&f.filters).unwrap_or_default();
    // The older top-level field PostHog still shows: the rollout of a flag whose only
    // condition set has no property filters.
    let rollout = match &f.filters.groups[..] {
        [only] if only.properties.is_empty() => json!(only.rollout_percentage),
        _ => Value::Null,
    };
    json!({
        "id": f.id,
        "team_id": f.team.0,
        "name": f.name,
        "key": f.key,
        "filters": filters,
        "deleted": f.deleted,
        "active": f.active,
        "created_by": null,
        "created_at": time(f.created_at),
        "updated_at": time(f.updated_at),
        "version": f.version,
        "ensure_experience_continuity": f.ensure_experience_continuity,
        "rollout_percentage": rollout,
        "is_simple_flag": f.filters.multivariate.is_none()
            && f.filters.aggregation_group_type_index.is_none()
            && f.filters.groups.len() == 1
            && f.filters.groups[0].properties.is_empty(),
        "tags": [],
        "evaluation_runtime": "all",
        "status": if f.deleted { "DELETED" } else { "ACTIVE" },
    })
}

/// One page of flags in the list envelope.
pub(crate) fn page(
    count: usize,
    next: Option<String>,
    previous: Option<String>,
    flags: &[&FeatureFlag],
) -> Value {
    let results = flags.iter().map(|f| flag(f)).collect();
    super::persons::page(count as u64, next, previous, results)
}

/// A flag in the definitions for local evaluation.
fn definition(f: &FeatureFlag) -> Value {
    json!({
        "id": f.id,
        "team_id": f.team.0,
        "name": f.name,
        "key": f.key,
        "filters": serde_json::to_value(&f.filters).unwrap_or_default(),
        "deleted": f.deleted,
        "active": f.active,
        "ensure_experience_continuity": f.ensure_experience_continuity,
        "version": f.version,
        "evaluation_runtime": "all",
        "has_encrypted_payloads": false,
    })
}

/// `/flags/definitions` (and `/api/feature_flag/local_evaluation`): every live flag, the
/// group type mapping, and cohorts (none: hedgerow has no cohorts yet).
pub(crate) fn definitions(
    flags: &[FeatureFlag],
    group_types: &[(String, u8)],
    cohorts: Map<String, Value>,
) -> Value {
    let mapping: Map<String, Value> = group_types
        .iter()
        .map(|(name, i)| (i.to_string(), Value::String(name.clone())))
        .collect();
    json!({
        "flags": flags.iter().map(definition).collect::<Vec<_>>(),
        "group_type_mapping": mapping,
        "cohorts": cohorts,
    })
}

/// The detailed answer (`/flags?v=2`, `/decide?v=4`): a record per flag.
pub(crate) fn flags_v2(
    answers: &[FlagAnswer],
    request_id: &str,
    evaluated_at_ms: i64,
) -> Map<String, Value> {
    let flags: Map<String, Value> = answers
        .iter()
        .map(|a| {
            let e = &a.evaluation;
            let record = json!({
                "key": a.key,
                "enabled": e.enabled,
                "variant": e.variant,
                "reason": {
                    "code": e.reason.code,
                    "condition_index": e.reason.condition_index,
                    "description": e.reason.description,
                },
                "metadata": {
                    "id": a.id,
                    "version": a.version,
                    "payload": e.payload,
                    "description": if a.name.is_empty() { Value::Null } else { json!(a.name) },
                },
            });
            (a.key.clone(), record)
        })
        .collect();
    let mut out = Map::new();
    out.insert("flags".into(), Value::Object(flags));
    out.insert("errorsWhileComputingFlags".into(), json!(false));
    out.insert("requestId".into(), json!(request_id));
    out.insert("evaluatedAt".into(), json!(evaluated_at_ms));
    out
}

/// The older answer (`/flags`, `/flags?v=1`, `/decide?v=3`): values and payloads by key.
pub(crate) fn flags_v1(answers: &[FlagAnswer], request_id: &str) -> Map<String, Value> {
    let values: Map<String, Value> = answers
        .iter()
        .map(|a| (a.key.clone(), a.evaluation.value()))
        .collect();
    let payloads: Map<String, Value> = answers
        .iter()
        .filter_map(|a| Some((a.key.clone(), a.evaluation.payload.clone()?)))
        .collect();
    let mut out = Map::new();
    out.insert("featureFlags".into(), Value::Object(values));
    out.insert("featureFlagPayloads".into(), Value::Object(payloads));
    out.insert("errorsWhileComputingFlags".into(), json!(false));
    out.insert("requestId".into(), json!(request_id));
    out
}

/// posthog-js's remote config (`/array/<token>/config`, and the fields `/flags?config=true`
/// and `/decide` add).
pub(crate) fn remote_config(c: &RemoteConfig) -> Map<String, Value> {
    let s: &ProjectSettings = &c.settings;
    let performance = if s.capture_performance_opt_in || s.autocapture_web_vitals_opt_in {
        json!({
            "network_timing": s.capture_performance_opt_in,
            "web_vitals": s.autocapture_web_vitals_opt_in,
            "web_vitals_allowed_metrics": null,
        })
    } else {
        json!(false)
    };
    let v = json!({
        "token": c.project.api_token,
        "supportedCompression": ["gzip", "gzip-js"],
        "hasFeatureFlags": c.has_flags,
        "captureDeadClicks": s.capture_dead_clicks,
        "capturePerformance": performance,
        "autocapture_opt_out": s.autocapture_opt_out,
        "autocaptureExceptions": s.autocapture_exceptions_opt_in,
        "analytics": {"endpoint": "/i/v0/e/"},
        "elementsChainAsString": true,
        "errorTracking": {
            "autocaptureExceptions": s.autocapture_exceptions_opt_in,
            "suppressionRules": [],
        },
        "sessionRecording": false,
        "heatmaps": s.heatmaps_opt_in,
        "surveys": false,
        "defaultIdentifiedOnly": true,
        "siteApps": [],
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!("an object literal"),
    }
}

/// `config.js`: registers the config on `window._POSTHOG_REMOTE_CONFIG[token]`, where
/// posthog-js looks for it.
pub(crate) fn remote_config_js(c: &RemoteConfig) -> String {
    let mut config = remote_config(c);
    config.remove("siteApps");
    // JSON is valid JavaScript; `</` is escaped so the text cannot close a script tag.
    let token = serde_json::to_string(&c.project.api_token)
        .unwrap_or_default()
        .replace("</", "<\\/");
    let config = serde_json::to_string(&config)
        .unwrap_or_default()
        .replace("</", "<\\/");
    format!(
        "(function() {{\n  window._POSTHOG_REMOTE_CONFIG = window._POSTHOG_REMOTE_CONFIG || {{}};\n  window._POSTHOG_REMOTE_CONFIG[{token}] = {{\n    config: {config},\n    siteApps: []\n  }};\n}})();\n"
    )
}
