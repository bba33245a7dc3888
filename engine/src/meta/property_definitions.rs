//! Property definitions: the type each event, person and group property was first seen
//! with, per project. The detection rules are `crate::propdefs` (pure); this file keeps
//! what they decided, in SQLite and in memory.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::{MetaStore, Result, ts};
use crate::model::{Event, TeamId};
use crate::propdefs::{self, NOT_EVENT_PROPERTIES, PropertyKind, PropertyType};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS property_definitions (
    team_id INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    group_type_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    property_type TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (team_id, kind, group_type_index, name)
);
";

/// Property name → its type (`None`: only null/object/array values seen so far).
pub(super) type PropDefs = HashMap<(TeamId, PropertyKind), HashMap<String, Option<PropertyType>>>;

/// One property definition, as listed for a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyDefinition {
    pub name: String,
    pub kind: PropertyKind,
    pub property_type: Option<&'static str>,
}

/// Every stored definition, read when the store opens.
pub(super) fn load(conn: &Connection) -> Result<PropDefs> {
    let mut defs = PropDefs::new();
    let mut stmt = conn.prepare(
        "SELECT team_id, kind, group_type_index, name, property_type FROM property_definitions",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, Option<String>>(4)?,
        ))
    })?;
    for row in rows {
        let (team, kind, group, name, ty) = row?;
        if let Some(kind) = PropertyKind::from_code(kind, group) {
            defs.entry((TeamId(team), kind))
                .or_default()
                .insert(name, ty.as_deref().and_then(PropertyType::parse));
        }
    }
    Ok(defs)
}

impl MetaStore {
    /// Records the property types a batch of a project's events suggests (see
    /// `crate::propdefs`): event properties, person properties from `$set`/`$set_once` and
    /// the event properties persons take on their own, and group properties from `$groupidentify`'s `$group_set`. A name whose type is known
    /// costs one hash lookup; only new names, or names whose values were all null so far,
    /// reach SQLite. The first type seen wins, also across concurrent batches.
    pub fn observe_properties<'e>(&self, team: TeamId, events: &'e [Event]) -> Result<()> {
        // Group properties are keyed by the group type's index, which may need a write:
        // resolve those first, outside the definitions lock.
        let mut group_sets = Vec::new();
        for e in events {
            if e.event == "$groupidentify"
                && let Some(serde_json::Value::String(group_type)) = e.properties.get("$group_type")
                && let Some(serde_json::Value::Object(set)) = e.properties.get("$group_set")
                && let Some(idx) = self.group_type_index(team, group_type, e.created_at)?
            {
                group_sets.push((PropertyKind::Group(idx), set, e.created_at));
            }
        }
        // New names in first-seen order, with a hash index into it: one lookup per property,
        // so a request with many new names costs linear time (a scan per name was quadratic:
        // 200 000 new names took over a minute on the request's worker).
        let mut new: Vec<(PropertyKind, String, Option<PropertyType>)> = Vec::new();
        let mut index: HashMap<(PropertyKind, &'e str), usize> = HashMap::new();
        {
            let defs = self.prop_defs.read().unwrap_or_else(|e| e.into_inner());
            let mut consider = |kind: PropertyKind,
                                key: &'e str,
                                value: &serde_json::Value,
                                now: DateTime<Utc>| {
                let known = defs.get(&(team, kind)).and_then(|m| m.get(key));
                if matches!(known, Some(Some(_))) {
                    return;
                }
                let ty = propdefs::detect(key, value, now);
                if known.is_some() && ty.is_none() {
                    return;
                }
                match index.entry((kind, key)) {
                    Entry::Occupied(at) => {
                        let seen = &mut new[*at.get()].2;
                        if seen.is_none() {
                            *seen = ty;
                        }
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(new.len());
                        new.push((kind, key.to_owned(), ty));
                    }
                }
            };
            // The auto person properties already given a type in this batch.
            let mut auto_done = vec![false; crate::persons::AUTO_PERSON_PROPERTY_NAMES.len()];
            for e in events {
                for (k, v) in &e.properties {
                    if !NOT_EVENT_PROPERTIES.contains(&k.as_str()) {
                        consider(PropertyKind::Event, k, v, e.created_at);
                    }
                }
                for set in ["$set", "$set_once"] {
                    if let Some(serde_json::Value::Object(m)) = e.properties.get(set) {
                        for (k, v) in m {
                            consider(PropertyKind::Person, k, v, e.created_at);
                        }
                    }
                }
                // The event properties persons take on their own (`$browser` and
                // `$initial_browser`, …) are person properties too, as in PostHog, whose
                // ingestion adds them to the event's `$set` and `$set_once`.
                for (done, (key, initial)) in auto_done
                    .iter_mut()
                    .zip(crate::persons::AUTO_PERSON_PROPERTY_NAMES.iter())
                {
                    if !*done && let Some(v) = e.properties.get(*key) {
                        consider(PropertyKind::Person, key, v, e.created_at);
                        consider(PropertyKind::Person, initial, v, e.created_at);
                        // A null decides nothing: later events may.
                        *done = !v.is_null();
                    }
                }
            }
            for (kind, set, now) in &group_sets {
                for (k, v) in *set {
                    consider(*kind, k, v, *now);
                }
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let now = events.first().map(|e| e.created_at).unwrap_or_default();
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut stored = Vec::with_capacity(new.len());
        {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO property_definitions (team_id, kind, group_type_index, name, property_type, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (team_id, kind, group_type_index, name)
                 DO UPDATE SET property_type = excluded.property_type WHERE property_type IS NULL
                 RETURNING property_type",
            )?;
            let mut read = tx.prepare_cached(
                "SELECT property_type FROM property_definitions
                 WHERE team_id = ?1 AND kind = ?2 AND group_type_index = ?3 AND name = ?4",
            )?;
            for (kind, name, ty) in new {
                let (k, g) = kind.code();
                let args = params![team.0, k, g, name, ty.map(PropertyType::as_str), ts(now)];
                // No row comes back when the stored type was already decided: read it.
                let now_ty: Option<Option<String>> =
                    upsert.query_row(args, |r| r.get(0)).optional()?;
                let now_ty = match now_ty {
                    Some(t) => t,
                    None => read.query_row(params![team.0, k, g, name], |r| r.get(0))?,
                };
                stored.push((kind, name, now_ty.as_deref().and_then(PropertyType::parse)));
            }
        }
        tx.commit()?;
        drop(conn);
        let mut defs = self.prop_defs.write().unwrap_or_else(|e| e.into_inner());
        for (kind, name, ty) in stored {
            defs.entry((team, kind)).or_default().insert(name, ty);
        }
        Ok(())
    }

    /// The type of a project's property, when one was decided.
    pub fn property_type(
        &self,
        team: TeamId,
        kind: PropertyKind,
        name: &str,
    ) -> Option<PropertyType> {
        let defs = self.prop_defs.read().unwrap_or_else(|e| e.into_inner());
        defs.get(&(team, kind))
            .and_then(|m| m.get(name))
            .copied()
            .flatten()
    }

    /// A project's property definitions of one kind, by name.
    pub fn property_definitions(
        &self,
        team: TeamId,
        kind: PropertyKind,
    ) -> Vec<PropertyDefinition> {
        let defs = self.prop_defs.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<PropertyDefinition> = defs
            .get(&(team, kind))
            .into_iter()
            .flatten()
            .map(|(name, ty)| PropertyDefinition {
                name: name.clone(),
                kind,
                property_type: ty.map(PropertyType::as_str),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::super::{MetaStore, test_store};
    use super::*;

    fn event(name: &str, props: serde_json::Value) -> Event {
        Event {
            uuid: Uuid::new_v4(),
            event: name.into(),
            distinct_id: "u".into(),
            timestamp: "2024-06-15T12:00:00Z".parse().unwrap(),
            created_at: "2024-06-15T12:00:00Z".parse().unwrap(),
            properties: props.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn the_event_properties_persons_take_are_person_properties() {
        use serde_json::json;
        let (_dir, s) = test_store();
        let t = TeamId(1);
        s.observe_properties(
            t,
            &[event(
                "$pageview",
                json!({"$browser": "Chrome", "$screen_height": 800}),
            )],
        )
        .unwrap();
        let ty = |n| s.property_type(t, PropertyKind::Person, n);
        assert_eq!(ty("$browser"), Some(PropertyType::String));
        assert_eq!(ty("$initial_browser"), Some(PropertyType::String));
        assert_eq!(ty("$screen_height"), None, "not one persons take");
    }

    #[test]
    fn property_types_first_decided_value_wins_and_survive_reopen() {
        use serde_json::json;
        let (dir, s) = test_store();
        let t = TeamId(1);
        let ty = |s: &MetaStore, k, n| s.property_type(t, k, n).map(PropertyType::as_str);
        s.observe_properties(
            t,
            &[
                event(
                    "a",
                    json!({"revenue": 10, "nps": null, "$set": {"age": 31}}),
                ),
                event(
                    "b",
                    json!({"revenue": "ten", "flag": true, "$set_once": {"vip": "true"}}),
                ),
            ],
        )
        .unwrap();
        assert_eq!(ty(&s, PropertyKind::Event, "revenue"), Some("Numeric"));
        assert_eq!(ty(&s, PropertyKind::Event, "flag"), Some("Boolean"));
        assert_eq!(ty(&s, PropertyKind::Event, "nps"), None);
        assert_eq!(ty(&s, PropertyKind::Event, "$set"), None);
        assert_eq!(ty(&s, PropertyKind::Person, "age"), Some("Numeric"));
        assert_eq!(ty(&s, PropertyKind::Person, "vip"), Some("Boolean"));
        // Another project has its own definitions.
        assert_eq!(
            s.property_type(TeamId(2), PropertyKind::Event, "revenue"),
            None
        );
        // A decided type stays; an undecided one takes the first real value.
        s.observe_properties(t, &[event("c", json!({"revenue": "x", "nps": 9}))])
            .unwrap();
        assert_eq!(ty(&s, PropertyKind::Event, "revenue"), Some("Numeric"));
        assert_eq!(ty(&s, PropertyKind::Event, "nps"), Some("Numeric"));
        // Group properties are keyed by the group type's index.
        s.observe_properties(
            t,
            &[event(
                "$groupidentify",
                json!({"$group_type": "company", "$group_key": "acme", "$group_set": {"seats": 5}}),
            )],
        )
        .unwrap();
        assert_eq!(ty(&s, PropertyKind::Group(0), "seats"), Some("Numeric"));
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(ty(&s, PropertyKind::Event, "revenue"), Some("Numeric"));
        assert_eq!(ty(&s, PropertyKind::Event, "nps"), Some("Numeric"));
        assert_eq!(ty(&s, PropertyKind::Group(0), "seats"), Some("Numeric"));
        let names: Vec<_> = s
            .property_definitions(t, PropertyKind::Event)
            .into_iter()
            .map(|d| (d.name, d.property_type))
            .collect();
        assert_eq!(
            names,
            vec![
                ("$group_key".to_string(), Some("String")),
                ("$group_set".to_string(), None),
                ("$group_type".to_string(), Some("String")),
                ("flag".to_string(), Some("Boolean")),
                ("nps".to_string(), Some("Numeric")),
                ("revenue".to_string(), Some("Numeric")),
            ]
        );
    }

    #[test]
    fn many_new_property_names_in_one_batch_take_linear_time() {
        use serde_json::{Map, Value, json};
        let (_d, s) = test_store();
        let t = TeamId(1);
        // A name repeated across events: its first non-null value decides.
        let mut first: Map<String, Value> = (0..100_000)
            .map(|i| (format!("p{i}"), Value::Null))
            .collect();
        first.insert("$set".into(), json!({"age": null}));
        let mut second: Map<String, Value> =
            (0..100_000).map(|i| (format!("p{i}"), json!(i))).collect();
        second.insert("$set".into(), json!({"age": "31"}));
        let events = [
            event("a", Value::Object(first)),
            event("b", Value::Object(second)),
        ];
        let started = std::time::Instant::now();
        s.observe_properties(t, &events).unwrap();
        let took = started.elapsed();
        // A scan of the new names per property (the old way) is 10^10 comparisons here.
        assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
        let defs = s.property_definitions(t, PropertyKind::Event);
        assert_eq!(defs.len(), 100_000);
        assert!(defs.iter().all(|d| d.property_type == Some("Numeric")));
        assert_eq!(
            s.property_type(t, PropertyKind::Person, "age"),
            Some(PropertyType::String)
        );
    }
}
