//! Persons and groups: built from events, in WAL order, inside the ingest pipeline.
//!
//! Capture turns each event into a [`PersonInput`] on the request's own thread (what the
//! event asks of its person: property operations, a merge, a group update); the pipeline
//! hands the inputs, in WAL order, to the [`process::Persons`] state machine, which reads and
//! changes persons through a cache and writes the changes behind, in one SQLite transaction
//! per batch of WAL records together with the last sequence applied
//! (`store::PersonStore`). Each event leaves with its person's id and a snapshot of the
//! person's properties (persons on events).
//!
//! The rules are PostHog's (see `spec/compat.md`, Persons): `$set_once`, then `$set`, then
//! `$unset`; automatic properties from the event; merges only on `$identify` with
//! `$anon_distinct_id` and on `$create_alias`/`$merge_dangerously` with `alias`, never on
//! the forbidden ids, never taking in an identified person (except `$merge_dangerously`).

pub(crate) mod facade;
pub(crate) mod process;
pub(crate) mod store;

pub use facade::{Page, PersonKey, PropertiesTimeline, TimelinePoint};
pub use store::filter::{PersonFilter, PropertyFilter};
pub use store::rows::Activity;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::model::process_person_profile;
use crate::model::{DistinctId, Event, PersonUuid, TeamId};

/// Longest `$group_type` and `$group_key`, in characters (spec §8).
pub const MAX_GROUP_FIELD_CHARS: usize = 400;

/// Event properties copied onto the person (`$set`) and, as `$initial_<name>`, `$set_once`.
pub const AUTO_PERSON_PROPERTIES: &[&str] = &[
    "$app_build",
    "$app_name",
    "$app_namespace",
    "$app_version",
    "$browser",
    "$browser_version",
    "$device_type",
    "$current_url",
    "$pathname",
    "$os",
    "$os_version",
    "$referring_domain",
    "$referrer",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_content",
    "utm_name",
    "utm_term",
    "gclid",
    "gad_source",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "fbclid",
    "msclkid",
    "twclid",
    "li_fat_id",
    "mc_cid",
    "igshid",
    "ttclid",
    "rdt_cid",
];

/// Whether a distinct id may take part in a merge. PostHog refuses these: they are what
/// broken clients send for every user, and merging on them would fold everyone together.
pub fn is_mergeable_id(id: &str) -> bool {
    let t = id.trim();
    if t.is_empty() {
        return false;
    }
    const ANY_CASE: &[&str] = &[
        "anonymous",
        "guest",
        "distinct_id",
        "id",
        "not_authenticated",
        "email",
        "undefined",
        "true",
        "false",
    ];
    const EXACT: &[&str] = &["null", "None", "none", "NaN", "0", "[object Object]"];
    !(ANY_CASE.iter().any(|b| t.eq_ignore_ascii_case(b)) || EXACT.contains(&t))
}

/// What one event asks of persons and groups.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PersonAction {
    /// Find or create the person; apply the property operations.
    #[default]
    Plain,
    /// `$identify` with `$anon_distinct_id`, `$create_alias` or `$merge_dangerously`:
    /// `other` joins the event's distinct id, or for `$create_alias` (`into_other`) the
    /// event's distinct id joins `other`, the alias, which becomes the main id (spec §6).
    Merge {
        other: DistinctId,
        /// `$merge_dangerously`: an identified person is merged too.
        dangerous: bool,
        /// `$create_alias`: the alias (`other`) is the target.
        into_other: bool,
        /// The event's name, for warnings.
        event: &'static str,
    },
    /// `$groupidentify`.
    Group {
        /// `None` when the project has five other group types already.
        index: Option<u8>,
        group_type: String,
        key: String,
        set: Map<String, Value>,
    },
}

/// One event's share of person processing, taken from the event at capture.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PersonInput {
    pub distinct_id: DistinctId,
    pub timestamp: DateTime<Utc>,
    /// False for `$process_person_profile: false`: no person is read or written.
    pub process: bool,
    pub action: PersonAction,
    pub set: Map<String, Value>,
    pub set_once: Map<String, Value>,
    pub unset: Vec<String>,
    /// The event carried `$set`/`$set_once`/`$unset` itself (not only automatic properties):
    /// such changes go to the activity log.
    pub explicit: bool,
    /// Why parts of the event were ignored (bad group fields…), for the ingestion warnings.
    pub warnings: Vec<Warning>,
}

/// An ingestion warning: the event was kept, something it asked for was not done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// PostHog's warning type, e.g. `cannot_merge_already_identified`.
    pub kind: String,
    pub details: Value,
}

fn warning(kind: &str, details: Value) -> Warning {
    Warning {
        kind: kind.to_owned(),
        details,
    }
}

fn string_keys(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        Value::Object(o) => o.keys().cloned().collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn merge_target(props: &Map<String, Value>, key: &str) -> Option<DistinctId> {
    match props.get(key)? {
        Value::String(s) => Some(DistinctId::from(s.as_str())),
        Value::Number(n) => Some(DistinctId::from(n.to_string())),
        _ => None,
    }
}

/// Each of [`AUTO_PERSON_PROPERTIES`] with the name it is set once as (`$initial_<name>`).
pub static AUTO_PERSON_PROPERTY_NAMES: std::sync::LazyLock<Vec<(&'static str, String)>> =
    std::sync::LazyLock::new(|| {
        AUTO_PERSON_PROPERTIES
            .iter()
            .map(|k| (*k, format!("$initial_{}", k.trim_start_matches('$'))))
            .collect()
    });

/// Reads what an event asks of persons. `group_index` gives (and, for a new group type,
/// assigns) the project's index of a group type.
pub fn person_input(e: &Event, mut group_index: impl FnMut(&str) -> Option<u8>) -> PersonInput {
    let props = &e.properties;
    let mut input = PersonInput {
        distinct_id: DistinctId::from(e.distinct_id.as_str()),
        timestamp: e.timestamp,
        process: process_person_profile(props),
        ..PersonInput::default()
    };
    let explicit_set = props.get("$set").and_then(Value::as_object);
    let explicit_once = props.get("$set_once").and_then(Value::as_object);
    let explicit_unset = props.get("$unset").map(string_keys).unwrap_or_default();
    input.explicit = explicit_set.is_some_and(|m| !m.is_empty())
        || explicit_once.is_some_and(|m| !m.is_empty())
        || !explicit_unset.is_empty();
    for (key, initial) in AUTO_PERSON_PROPERTY_NAMES.iter() {
        if let Some(v) = props.get(*key) {
            input.set.insert((*key).to_owned(), v.clone());
            input.set_once.insert(initial.clone(), v.clone());
        }
    }
    // What the event says itself wins over what is derived from it.
    if let Some(m) = explicit_set {
        input
            .set
            .extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(m) = explicit_once {
        input
            .set_once
            .extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    input.unset = explicit_unset;

    let merge = match e.event.as_str() {
        "$identify" => {
            merge_target(props, "$anon_distinct_id").map(|o| (o, false, false, "$identify"))
        }
        "$create_alias" => merge_target(props, "alias").map(|o| (o, false, true, "$create_alias")),
        "$merge_dangerously" => {
            merge_target(props, "alias").map(|o| (o, true, false, "$merge_dangerously"))
        }
        _ => None,
    };
    if let Some((other, dangerous, into_other, event)) = merge {
        input.action = PersonAction::Merge {
            other,
            dangerous,
            into_other,
            event,
        };
    } else if e.event == "$groupidentify" {
        input.action = group_action(props, &mut group_index, &mut input.warnings);
    }
    if let Some(Value::Object(groups)) = props.get("$groups") {
        // One warning per event, however many types it names: `$groups` comes from public
        // capture and may hold thousands of keys.
        let unlinked: Vec<&String> = groups
            .keys()
            .filter(|ty| group_index(ty).is_none())
            .collect();
        match unlinked.as_slice() {
            [] => {}
            [ty] => input.warnings.push(warning(
                "group_type_limit_exceeded",
                serde_json::json!({"groupType": ty, "reason": "the project has 5 group types already; $groups of this type is not linked"}),
            )),
            many => input.warnings.push(warning(
                "group_type_limit_exceeded",
                serde_json::json!({
                    "groupTypes": many.iter().take(10).collect::<Vec<_>>(),
                    "count": many.len(),
                    "reason": "the project has 5 group types already; $groups of these types are not linked",
                }),
            )),
        }
    }
    input
}

fn group_action(
    props: &Map<String, Value>,
    group_index: &mut impl FnMut(&str) -> Option<u8>,
    warnings: &mut Vec<Warning>,
) -> PersonAction {
    let text = |k: &str| match props.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let (Some(group_type), Some(key)) = (text("$group_type"), text("$group_key")) else {
        warnings.push(warning(
            "group_identify_invalid",
            serde_json::json!({"reason": "$groupidentify needs string properties $group_type and $group_key"}),
        ));
        return PersonAction::Plain;
    };
    for (field, v) in [("$group_type", &group_type), ("$group_key", &key)] {
        let n = v.chars().count();
        if n > MAX_GROUP_FIELD_CHARS || n == 0 {
            warnings.push(warning(
                "group_identify_invalid",
                serde_json::json!({"field": field, "length": n, "reason": format!("{field} must be 1 to {MAX_GROUP_FIELD_CHARS} characters")}),
            ));
            return PersonAction::Plain;
        }
    }
    let set = match props.get("$group_set") {
        Some(Value::Object(m)) => m.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            warnings.push(warning(
                "group_identify_invalid",
                serde_json::json!({"field": "$group_set", "reason": "$group_set must be an object; the group is updated without properties"}),
            ));
            Map::new()
        }
    };
    let index = group_index(&group_type);
    if index.is_none() {
        warnings.push(warning(
            "group_type_limit_exceeded",
            serde_json::json!({"groupType": group_type, "reason": "a project has at most 5 group types; this group was not created"}),
        ));
    }
    PersonAction::Group {
        index,
        group_type,
        key,
        set,
    }
}

/// Applies `$set_once`, then `$set`, then `$unset`. Returns whether anything changed.
pub fn apply_property_ops(
    props: &mut Map<String, Value>,
    set_once: &Map<String, Value>,
    set: &Map<String, Value>,
    unset: &[String],
) -> bool {
    let mut changed = false;
    for (k, v) in set_once {
        if !props.contains_key(k) {
            props.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    for (k, v) in set {
        if props.get(k) != Some(v) {
            props.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    for k in unset {
        changed |= props.remove(k).is_some();
    }
    changed
}

/// A person as the API shows it (`spec/api.md` §2.1 plus `is_identified`).
#[derive(Debug, Clone, PartialEq)]
pub struct Person {
    pub id: i64,
    pub team: TeamId,
    pub uuid: PersonUuid,
    pub created_at: DateTime<Utc>,
    pub properties: Map<String, Value>,
    pub is_identified: bool,
    pub distinct_ids: Vec<DistinctId>,
}

impl Person {
    /// The email property when there is one, else the first distinct id.
    pub fn name(&self) -> String {
        match self.properties.get("email") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => self
                .distinct_ids
                .first()
                .map(|d| d.as_str().to_owned())
                .unwrap_or_default(),
        }
    }

    /// Distinct ids that do not look like UUIDs first (they are the ones people chose).
    pub fn sort_distinct_ids(ids: &mut [DistinctId]) {
        ids.sort_by_key(|d| Uuid::parse_str(d.as_str()).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(name: &str, props: Value) -> Event {
        Event {
            uuid: Uuid::nil(),
            event: name.into(),
            distinct_id: "d1".into(),
            timestamp: DateTime::UNIX_EPOCH,
            created_at: DateTime::UNIX_EPOCH,
            properties: props.as_object().unwrap().clone(),
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn forbidden_ids() {
        for bad in [
            "",
            "  ",
            "anonymous",
            "Anonymous",
            "GUEST",
            "distinct_id",
            "id",
            "ID",
            "not_authenticated",
            "email",
            "undefined",
            "true",
            "FALSE",
            "null",
            "None",
            "none",
            "NaN",
            "0",
            "[object Object]",
        ] {
            assert!(!is_mergeable_id(bad), "{bad:?} must not merge");
        }
        for ok in ["NULL", "nan", "user-1", "00", "alice@example.com", "idx"] {
            assert!(is_mergeable_id(ok), "{ok:?} may merge");
        }
    }

    #[test]
    fn property_ops_in_order() {
        let mut p = obj(json!({"a": 1, "n": null}));
        let changed = apply_property_ops(
            &mut p,
            &obj(json!({"a": 2, "n": 3, "b": 4, "c": 5})),
            &obj(json!({"c": 6, "d": 7})),
            &["d".into(), "zz".into()],
        );
        assert!(changed);
        // set_once: a and n (null counts as present) stay; b new; c set_once then set → 6;
        // d set then unset → gone.
        assert_eq!(Value::Object(p), json!({"a": 1, "n": null, "b": 4, "c": 6}));
        let mut q = obj(json!({"a": 1}));
        assert!(!apply_property_ops(
            &mut q,
            &obj(json!({"a": 9})),
            &obj(json!({"a": 1})),
            &["x".into()]
        ));
    }

    #[test]
    fn automatic_properties_and_explicit_win() {
        let e = event(
            "$pageview",
            json!({"$browser": "Chrome", "utm_source": "x", "$set": {"$browser": "Mine"},
                   "$set_once": {"$initial_browser": "First"}, "$unset": ["gone"]}),
        );
        let i = person_input(&e, |_| Some(0));
        assert!(i.process && i.explicit);
        assert_eq!(
            Value::Object(i.set),
            json!({"$browser": "Mine", "utm_source": "x"})
        );
        assert_eq!(
            Value::Object(i.set_once),
            json!({"$initial_browser": "First", "$initial_utm_source": "x"})
        );
        assert_eq!(i.unset, vec!["gone".to_string()]);
        let plain = person_input(&event("x", json!({"$browser": "Safari"})), |_| Some(0));
        assert!(!plain.explicit);
    }

    #[test]
    fn merges_and_groups_are_recognised() {
        let i = person_input(
            &event("$identify", json!({"$anon_distinct_id": "anon"})),
            |_| None,
        );
        assert_eq!(
            i.action,
            PersonAction::Merge {
                other: "anon".into(),
                dangerous: false,
                into_other: false,
                event: "$identify"
            }
        );
        let i = person_input(&event("$identify", json!({"$set": {"a": 1}})), |_| None);
        assert_eq!(i.action, PersonAction::Plain);
        let i = person_input(&event("$merge_dangerously", json!({"alias": 5})), |_| None);
        assert_eq!(
            i.action,
            PersonAction::Merge {
                other: "5".into(),
                dangerous: true,
                into_other: false,
                event: "$merge_dangerously"
            }
        );
        let i = person_input(
            &event(
                "$groupidentify",
                json!({"$group_type": "company", "$group_key": "acme", "$group_set": {"plan": "pro"}}),
            ),
            |_| Some(2),
        );
        assert_eq!(
            i.action,
            PersonAction::Group {
                index: Some(2),
                group_type: "company".into(),
                key: "acme".into(),
                set: obj(json!({"plan": "pro"}))
            }
        );
        let long = "k".repeat(401);
        let i = person_input(
            &event(
                "$groupidentify",
                json!({"$group_type": "company", "$group_key": long}),
            ),
            |_| Some(0),
        );
        assert_eq!(i.action, PersonAction::Plain);
        assert_eq!(i.warnings[0].kind, "group_identify_invalid");
        let ok = "é".repeat(400);
        let i = person_input(
            &event(
                "$groupidentify",
                json!({"$group_type": "company", "$group_key": ok}),
            ),
            |_| Some(0),
        );
        assert!(
            matches!(i.action, PersonAction::Group { .. }),
            "400 characters are allowed"
        );
        let i = person_input(
            &event(
                "$groupidentify",
                json!({"$group_type": "sixth", "$group_key": "k"}),
            ),
            |_| None,
        );
        assert_eq!(i.warnings[0].kind, "group_type_limit_exceeded");
        // However many unknown types `$groups` names, one warning.
        let groups: Map<String, Value> = (0..1000).map(|i| (format!("t{i}"), json!("k"))).collect();
        let i = person_input(&event("x", json!({"$groups": groups})), |_| None);
        assert_eq!(i.warnings.len(), 1);
        assert_eq!(i.warnings[0].details["count"], 1000);
        assert_eq!(
            i.warnings[0].details["groupTypes"]
                .as_array()
                .unwrap()
                .len(),
            10
        );
        let i = person_input(
            &event("x", json!({"$process_person_profile": false})),
            |_| None,
        );
        assert!(!i.process);
    }

    #[test]
    fn name_and_id_order() {
        let mut ids: Vec<DistinctId> = vec![
            "0190a0e4-7b1c-7000-8000-000000000000".into(),
            "alice".into(),
        ];
        Person::sort_distinct_ids(&mut ids);
        assert_eq!(ids[0], "alice");
        let p = Person {
            id: 1,
            team: TeamId(1),
            uuid: PersonUuid::default(),
            created_at: DateTime::UNIX_EPOCH,
            properties: obj(json!({"email": "a@x.io"})),
            is_identified: false,
            distinct_ids: ids,
        };
        assert_eq!(p.name(), "a@x.io");
    }
}
