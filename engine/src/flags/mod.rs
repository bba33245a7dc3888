//! Feature flags: what a flag is, the rules a definition must follow, and how a flag is
//! evaluated for one person or group (`eval`).
//!
//! A flag's `filters` keep PostHog's JSON shape, so the definitions the API takes, the ones
//! `/api/feature_flag/local_evaluation` hands to server SDKs and the ones the SDKs evaluate
//! are the same document: condition sets (`groups`), each with property filters, a rollout
//! percentage and an optional variant override; `multivariate.variants` with their
//! percentages; `payloads` by `"true"` or variant key; `aggregation_group_type_index` for a
//! flag that rolls out by group rather than by person. Keys this version does not read are
//! kept as they came (`extra`) and handed back unchanged.
//!
//! Pure: no storage, no I/O. The metadata store keeps the definitions
//! (`meta::feature_flags`) and `api::flags` applies the rules below on every write.

pub mod eval;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::TeamId;

/// Longest flag key, as PostHog's model allows.
pub const MAX_KEY_LEN: usize = 400;
/// Longest flag name (PostHog's `name` is a free-text description).
pub const MAX_NAME_LEN: usize = 65_536;
/// Most condition sets, property filters per set, and variants one flag may hold: far
/// above what PostHog's UI builds, and a bound on the work of evaluating one flag.
pub const MAX_CONDITIONS: usize = 100;
pub const MAX_PROPERTIES: usize = 100;
pub const MAX_VARIANTS: usize = 100;

/// A stored flag.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureFlag {
    pub id: i64,
    pub team: TeamId,
    pub key: String,
    pub name: String,
    pub filters: Filters,
    pub active: bool,
    pub deleted: bool,
    pub ensure_experience_continuity: bool,
    /// Bumped on every change, as PostHog's `version`; `$feature_flag_called` carries it.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A flag's `filters`, in PostHog's shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pub groups: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multivariate: Option<Multivariate>,
    /// Payload by `"true"` (a boolean flag) or variant key. PostHog stores each as the JSON
    /// text of the payload; either form is taken and kept as given.
    #[serde(default)]
    pub payloads: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregation_group_type_index: Option<u8>,
    /// Every other key of the document, handed back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One condition set: every property filter matches, then the rollout percentage decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(default)]
    pub properties: Vec<PropertyFilter>,
    /// `None` is everyone who matches the properties.
    #[serde(default)]
    pub rollout_percentage: Option<f64>,
    /// A variant every match of this set gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PropertyFilter {
    pub key: String,
    #[serde(default)]
    pub value: Value,
    /// `None` is `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// `person`, `group` or `cohort`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_type_index: Option<u8>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The cohort a cohort condition names (its `value`: an id, or an id as text).
pub fn cohort_id(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The cohorts a flag's conditions name.
pub fn cohorts_named(f: &Filters) -> Vec<i64> {
    f.groups
        .iter()
        .flat_map(|c| &c.properties)
        .filter(|p| p.kind.as_deref() == Some("cohort"))
        .filter_map(|p| cohort_id(&p.value))
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Multivariate {
    #[serde(default)]
    pub variants: Vec<Variant>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub rollout_percentage: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The operators a property filter may use.
pub const OPERATORS: &[&str] = &[
    "exact",
    "is_not",
    "is_set",
    "is_not_set",
    "icontains",
    "not_icontains",
    "regex",
    "not_regex",
    "gt",
    "gte",
    "lt",
    "lte",
    "is_date_before",
    "is_date_after",
    "is_date_exact",
];

/// Why a flag definition is refused: the message, and the field it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    pub attr: &'static str,
    pub message: String,
}

fn invalid(attr: &'static str, message: impl Into<String>) -> Invalid {
    Invalid {
        attr,
        message: message.into(),
    }
}

/// A flag key: 1 to [`MAX_KEY_LEN`] letters, digits, `-` and `_`, as PostHog allows.
pub fn validate_key(key: &str) -> Result<(), Invalid> {
    if key.is_empty() {
        return Err(invalid("key", "This field may not be blank."));
    }
    if key.chars().count() > MAX_KEY_LEN {
        return Err(invalid(
            "key",
            format!("Ensure this field has no more than {MAX_KEY_LEN} characters."),
        ));
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid(
            "key",
            "Only letters, numbers, hyphens (-) & underscores (_) are allowed.",
        ));
    }
    Ok(())
}

fn percentage(p: f64, what: &str) -> Result<(), Invalid> {
    if p.is_finite() && (0.0..=100.0).contains(&p) {
        Ok(())
    } else {
        Err(invalid(
            "filters",
            format!("{what} must be a number from 0 to 100, not {p}"),
        ))
    }
}

/// Filters as stored: payloads as JSON text (PostHog stores an object payload as its text,
/// and SDKs parse the text), then every rule of [`validate_filters`].
pub fn prepare_filters(f: &mut Filters) -> Result<(), Invalid> {
    let variants: Vec<&str> = f.multivariate.as_ref().map_or(Vec::new(), |m| {
        m.variants.iter().map(|v| v.key.as_str()).collect()
    });
    for (key, value) in f.payloads.iter_mut() {
        let allowed = if variants.is_empty() {
            key == "true"
        } else {
            variants.contains(&key.as_str())
        };
        if !allowed {
            return Err(invalid(
                "filters",
                if variants.is_empty() {
                    format!("payload key '{key}': a boolean flag's payload is under \"true\"")
                } else {
                    format!("payload key '{key}' is not one of the flag's variants")
                },
            ));
        }
        match value {
            Value::String(text) => {
                if serde_json::from_str::<Value>(text).is_err() {
                    return Err(invalid(
                        "filters",
                        format!("the payload of '{key}' is not valid JSON text"),
                    ));
                }
            }
            other => *other = Value::String(other.to_string()),
        }
    }
    validate_filters(f)
}

/// The rules a flag's filters follow; a flag that breaks one is refused, not stored.
pub fn validate_filters(f: &Filters) -> Result<(), Invalid> {
    if f.groups.len() > MAX_CONDITIONS {
        return Err(invalid(
            "filters",
            format!("a flag holds at most {MAX_CONDITIONS} condition sets"),
        ));
    }
    let variants = f.multivariate.as_ref().map_or(&[][..], |m| &m.variants[..]);
    if variants.len() > MAX_VARIANTS {
        return Err(invalid(
            "filters",
            format!("a flag holds at most {MAX_VARIANTS} variants"),
        ));
    }
    if !variants.is_empty() {
        let mut seen = std::collections::HashSet::new();
        for v in variants {
            validate_key(&v.key).map_err(|e| invalid("filters", format!("variant key: {e}")))?;
            if !seen.insert(v.key.as_str()) {
                return Err(invalid(
                    "filters",
                    format!("variant key '{}' appears twice", v.key),
                ));
            }
            percentage(v.rollout_percentage, "a variant's rollout_percentage")?;
        }
        let sum: f64 = variants.iter().map(|v| v.rollout_percentage).sum();
        if (sum - 100.0).abs() > 1e-9 {
            return Err(invalid(
                "filters",
                "Invalid variant definitions: Variant rollout percentages must sum to 100.",
            ));
        }
    }
    // PostHog features hedgerow does not evaluate are refused rather than stored and
    // ignored.
    for key in ["holdout", "holdout_groups", "super_groups"] {
        match f.extra.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(_) => {
                return Err(invalid(
                    "filters",
                    format!(
                        "{key} is not supported yet: hedgerow evaluates no holdouts or \
                         early-access groups"
                    ),
                ));
            }
        }
    }
    if let Some(v) = f.extra.get("early_exit")
        && !v.is_boolean()
        && !v.is_null()
    {
        return Err(invalid("filters", "early_exit must be true or false"));
    }
    if let Some(i) = f.aggregation_group_type_index
        && i >= crate::model::MAX_GROUP_TYPES
    {
        return Err(invalid(
            "filters",
            format!(
                "aggregation_group_type_index must be below {}",
                crate::model::MAX_GROUP_TYPES
            ),
        ));
    }
    for c in &f.groups {
        if let Some(p) = c.rollout_percentage {
            percentage(p, "rollout_percentage")?;
        }
        if let Some(v) = &c.variant
            && !variants.iter().any(|x| &x.key == v)
        {
            return Err(invalid(
                "filters",
                format!("Filters are not valid (variant override '{v}' does not exist on flag)"),
            ));
        }
        if c.properties.len() > MAX_PROPERTIES {
            return Err(invalid(
                "filters",
                format!("a condition set holds at most {MAX_PROPERTIES} property filters"),
            ));
        }
        for p in &c.properties {
            if p.key.is_empty() {
                return Err(invalid("filters", "a property filter needs a key"));
            }
            let op = p.operator.as_deref().unwrap_or("exact");
            if !OPERATORS.contains(&op) {
                return Err(invalid(
                    "filters",
                    format!(
                        "unknown operator '{op}'; known operators: {}",
                        OPERATORS.join(", ")
                    ),
                ));
            }
            match (p.kind.as_deref(), f.aggregation_group_type_index) {
                (None | Some("person"), None) => {}
                (Some("group"), Some(i)) if p.group_type_index.is_none_or(|g| g == i) => {}
                (Some("group"), None) => {
                    return Err(invalid(
                        "filters",
                        "Filters are not valid (can only use person and cohort properties)",
                    ));
                }
                (None | Some("person") | Some("group"), Some(_)) => {
                    return Err(invalid(
                        "filters",
                        "Filters are not valid (can only use group properties)",
                    ));
                }
                (Some("cohort"), None) => {
                    if cohort_id(&p.value).is_none() {
                        return Err(invalid(
                            "filters",
                            "a cohort condition's value is the cohort's id",
                        ));
                    }
                    if !matches!(
                        p.operator.as_deref(),
                        None | Some("in" | "exact" | "not_in")
                    ) {
                        return Err(invalid(
                            "filters",
                            "a cohort condition's operator is in or not_in",
                        ));
                    }
                }
                (Some("cohort"), Some(_)) => {
                    return Err(invalid(
                        "filters",
                        "Filters are not valid (can only use group properties)",
                    ));
                }
                (Some(other), _) => {
                    return Err(invalid(
                        "filters",
                        format!("unknown property type '{other}'; use person or group"),
                    ));
                }
            }
            if matches!(op, "regex" | "not_regex")
                && let Err(e) = eval::regex_of(&p.value)
            {
                return Err(invalid("filters", format!("invalid regex: {e}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filters(v: Value) -> Filters {
        serde_json::from_value(v).unwrap()
    }

    /// Payloads are stored as JSON text, as PostHog stores them and SDKs read them.
    #[test]
    fn payloads_become_json_text() {
        let mut f = filters(json!({
            "multivariate": {"variants": [{"key": "a", "rollout_percentage": 50},
                                          {"key": "b", "rollout_percentage": 50}]},
            "payloads": {"a": {"color": "red"}, "b": "\"hi\""}
        }));
        prepare_filters(&mut f).unwrap();
        assert_eq!(f.payloads["a"], json!("{\"color\":\"red\"}"));
        assert_eq!(f.payloads["b"], json!("\"hi\""));
    }

    #[test]
    fn keys_follow_posthogs_rule() {
        assert!(validate_key("beta-feature_2").is_ok());
        for bad in ["", "has space", "dots.are.not", "ü"] {
            assert_eq!(validate_key(bad).unwrap_err().attr, "key", "{bad:?}");
        }
        assert!(validate_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
        assert!(validate_key(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
    }

    /// A document round-trips through the typed filters, keys this version does not read
    /// included.
    #[test]
    fn filters_keep_unknown_keys() {
        let doc = json!({
            "groups": [{"properties": [{"key": "email", "value": ["a@x.io"], "operator": "exact",
                         "type": "person", "negation": false}],
                        "rollout_percentage": 50, "sort_key": "abc"}],
            "multivariate": {"variants": [{"key": "a", "rollout_percentage": 100}]},
            "payloads": {"a": "{\"x\": 1}"},
            "super_groups": []
        });
        let f = filters(doc.clone());
        let back = serde_json::to_value(&f).unwrap();
        assert_eq!(back["super_groups"], json!([]));
        assert_eq!(back["groups"][0]["sort_key"], "abc");
        assert_eq!(back["groups"][0]["properties"][0]["negation"], false);
        assert_eq!(back["groups"][0]["rollout_percentage"], 50.0);
        assert_eq!(back["payloads"], doc["payloads"]);
    }

    #[test]
    fn filters_are_validated() {
        let ok = filters(json!({"groups": [{"properties": [], "rollout_percentage": 10}]}));
        assert!(validate_filters(&ok).is_ok());
        let cases = [
            (
                json!({"groups": [{"rollout_percentage": 101}]}),
                "rollout_percentage must be a number from 0 to 100, not 101",
            ),
            (
                json!({"multivariate": {"variants": [{"key": "a", "rollout_percentage": 60},
                                                     {"key": "b", "rollout_percentage": 30}]}}),
                "Invalid variant definitions: Variant rollout percentages must sum to 100.",
            ),
            (
                json!({"multivariate": {"variants": [{"key": "a", "rollout_percentage": 50},
                                                     {"key": "a", "rollout_percentage": 50}]}}),
                "variant key 'a' appears twice",
            ),
            (
                json!({"groups": [{"variant": "z"}],
                       "multivariate": {"variants": [{"key": "a", "rollout_percentage": 100}]}}),
                "Filters are not valid (variant override 'z' does not exist on flag)",
            ),
            (
                json!({"groups": [{"properties": [{"key": "x", "value": 1, "operator": "near"}]}]}),
                "unknown operator 'near'",
            ),
            (
                json!({"groups": [{"properties": [{"key": "x", "value": "(", "operator": "regex"}]}]}),
                "invalid regex",
            ),
            (
                json!({"groups": [{"properties": [{"key": "id", "value": "three", "type": "cohort"}]}]}),
                "a cohort condition's value is the cohort's id",
            ),
            (
                json!({"aggregation_group_type_index": 5}),
                "aggregation_group_type_index must be below 5",
            ),
            (
                json!({"groups": [{"properties": [{"key": "plan", "value": "x", "type": "group",
                                                   "group_type_index": 0}]}]}),
                "Filters are not valid (can only use person and cohort properties)",
            ),
            (
                json!({"aggregation_group_type_index": 1,
                       "groups": [{"properties": [{"key": "plan", "value": "x", "type": "group",
                                                   "group_type_index": 0}]}]}),
                "Filters are not valid (can only use group properties)",
            ),
            (
                json!({"holdout": {"id": 1, "exclusion_percentage": 10}}),
                "holdout is not supported yet",
            ),
            (
                json!({"super_groups": [{"properties": []}]}),
                "super_groups is not supported yet",
            ),
            (
                json!({"payloads": {"control": "1"}}),
                "payload key 'control': a boolean flag's payload is under \"true\"",
            ),
            (
                json!({"payloads": {"true": "not json"}}),
                "the payload of 'true' is not valid JSON text",
            ),
        ];
        for (doc, want) in cases {
            let e = prepare_filters(&mut filters(doc.clone())).unwrap_err();
            assert!(e.message.starts_with(want), "{doc}: {}", e.message);
            assert_eq!(e.attr, "filters");
        }
    }
}
