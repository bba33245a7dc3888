//! Which event and person properties each project stores as typed columns
//! (`storage::layout`): counted over recent events, promoted once frequent, kept in SQLite
//! before any row uses them.
//!
//! Capture counts each key of each event (one hash lookup); the write path counts the keys
//! of the person properties it stamps on each event. Each family has its own list and its
//! own counts, under the same settings. When a project has seen
//! `min_events` events since its last decision, every typed key whose share of those events
//! is at least `min_share` is promoted, most frequent first, up to `max_columns` per
//! project. Promotion is append-only: a row's layout number counts a prefix of the list,
//! so a promoted key is never dropped. The list is stored before the batch that triggered
//! it is built, so no stored row holds a column the list does not name.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{Connection, params};
use serde_json::{Map, Value};

use super::{MetaStore, Result, ts};
use crate::model::{Event, TeamId};
use crate::propdefs::{NOT_EVENT_PROPERTIES, PropertyType};
use crate::storage::layout::{Family, LayoutSource, Layouts, NEVER_PROMOTED, PropertyColumn};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS property_columns (
    team_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    key TEXT NOT NULL,
    property_type TEXT NOT NULL,
    column_name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    family TEXT NOT NULL DEFAULT 'event',
    PRIMARY KEY (team_id, position)
);
";

/// When properties become columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropertyColumnsConfig {
    /// The share of a project's recent events a key must appear in (0–1).
    pub min_share: f64,
    /// The most promoted properties per project.
    pub max_columns: usize,
    /// Events counted between two decisions.
    pub min_events: u64,
}

impl Default for PropertyColumnsConfig {
    fn default() -> Self {
        Self {
            min_share: 0.001,
            max_columns: 100,
            min_events: 1000,
        }
    }
}

/// Distinct keys counted per project between two decisions; more are not counted (a
/// project sending random keys must not grow memory).
const MAX_COUNTED_KEYS: usize = 10_000;

/// Key counts since a project's last decision.
#[derive(Debug, Default)]
pub(super) struct KeyCounts {
    events: u64,
    keys: HashMap<String, u64>,
}

/// Every promoted column, read when the store opens. A store from before person properties
/// had columns gets the `family` column (its rows are event properties).
pub(super) fn load(conn: &Connection) -> Result<Layouts> {
    let has_family = conn
        .prepare("SELECT 1 FROM pragma_table_info('property_columns') WHERE name = 'family'")?
        .exists([])?;
    if !has_family {
        conn.execute_batch(
            "ALTER TABLE property_columns ADD COLUMN family TEXT NOT NULL DEFAULT 'event'",
        )?;
    }
    // A team's positions count both families' columns, in promotion order.
    let mut stmt = conn.prepare(
        "SELECT team_id, key, property_type, family FROM property_columns ORDER BY rowid, team_id, position",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut layouts = Layouts::default();
    for row in rows {
        let (team, key, ty, family) = row?;
        let ty = PropertyType::parse(&ty).unwrap_or(PropertyType::String);
        let family = if family == Family::Person.as_str() {
            Family::Person
        } else {
            Family::Event
        };
        layouts.push(TeamId(team), PropertyColumn::of(family, &key, ty));
    }
    Ok(layouts)
}

impl MetaStore {
    /// The promoted columns of every project, as of now.
    pub fn layouts(&self) -> Arc<Layouts> {
        self.layouts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets when properties become columns (the store starts with the defaults).
    pub fn set_property_columns(&self, cfg: PropertyColumnsConfig) {
        *self.columns_cfg.write().unwrap_or_else(|e| e.into_inner()) = cfg;
    }

    /// Counts the keys of a batch of `team`'s events and, when enough events were counted,
    /// promotes the frequent typed ones. Call after [`MetaStore::observe_properties`], so
    /// new keys have their types.
    pub fn observe_property_columns(&self, team: TeamId, events: &[Event]) -> Result<()> {
        let now = events.first().map(|e| e.created_at).unwrap_or_default();
        self.count_keys(
            team,
            Family::Event,
            events.iter().map(|e| (&e.properties, 1)),
            now,
            false,
        )
    }

    /// Counts the keys of the person properties stamped on a batch of `team`'s events
    /// (each distinct snapshot with the number of events carrying it; personless events
    /// have none) and, when enough events were counted, promotes the frequent typed ones.
    pub(crate) fn observe_person_property_columns<'r>(
        &self,
        team: TeamId,
        snapshots: impl Iterator<Item = (&'r Map<String, Value>, u64)>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        self.count_keys(team, Family::Person, snapshots, now, false)
    }

    /// Counts the keys of `rows` (one project's properties of `family`, each with the
    /// number of events it stands for) and decides when due, or at once with `decide_now`.
    fn count_keys<'r>(
        &self,
        team: TeamId,
        family: Family,
        rows: impl Iterator<Item = (&'r Map<String, Value>, u64)>,
        now: chrono::DateTime<chrono::Utc>,
        decide_now: bool,
    ) -> Result<()> {
        let cfg = *self.columns_cfg.read().unwrap_or_else(|e| e.into_inner());
        if cfg.max_columns == 0 {
            return Ok(());
        }
        let mut counts = self.key_counts.lock().unwrap_or_else(|e| e.into_inner());
        let c = counts.entry((team, family)).or_default();
        for (props, events) in rows {
            c.events += events;
            for k in props.keys() {
                if let Some(n) = c.keys.get_mut(k) {
                    *n += events;
                } else if c.keys.len() < MAX_COUNTED_KEYS {
                    c.keys.insert(k.clone(), events);
                }
            }
        }
        if c.events == 0 || (c.events < cfg.min_events.max(1) && !decide_now) {
            return Ok(());
        }
        let counted = std::mem::take(c);
        // Deciding under the counts lock serializes promotions of concurrent batches.
        let current = self.layouts();
        let team_layout = current.of(family, team);
        // Positions are the team's, across both families.
        let first_position = Family::ALL
            .iter()
            .map(|f| current.of(*f, team).columns.len())
            .sum::<usize>();
        let room = cfg.max_columns.saturating_sub(team_layout.columns.len());
        if room == 0 {
            return Ok(());
        }
        let threshold = (cfg.min_share * counted.events as f64).max(1.0);
        let mut candidates: Vec<(&String, u64, PropertyType)> = counted
            .keys
            .iter()
            .filter(|(k, n)| {
                **n as f64 >= threshold
                    && (family == Family::Person
                        || !NEVER_PROMOTED.contains(&k.as_str())
                            && !NOT_EVENT_PROPERTIES.contains(&k.as_str()))
                    && team_layout.find(k).is_none()
            })
            .filter_map(|(k, n)| {
                self.property_type(team, family.kind(), k)
                    .map(|t| (k, *n, t))
            })
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        candidates.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        candidates.truncate(room);
        let mut next = (*current).clone();
        {
            let mut conn = self.conn();
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO property_columns (team_id, position, key, property_type, column_name, created_at, family)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for (i, (key, _, ty)) in candidates.iter().enumerate() {
                    let col = PropertyColumn::of(family, key, *ty);
                    let position = first_position + i;
                    insert.execute(params![
                        team.0,
                        position as i64,
                        key,
                        ty.as_str(),
                        col.column,
                        ts(now),
                        family.as_str(),
                    ])?;
                    next.push(team, col);
                }
            }
            tx.commit()?;
        }
        tracing::info!(
            team_id = team.0,
            family = family.as_str(),
            promoted = ?candidates.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
            "properties stored as columns from now on"
        );
        *self.layouts.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(())
    }
}

impl LayoutSource for MetaStore {
    fn layouts(&self) -> Arc<Layouts> {
        MetaStore::layouts(self)
    }

    fn observe_rows(&self, team: TeamId, family: Family, rows: &[Map<String, Value>]) {
        // A sample of stored rows: decide on it at once, however few.
        if let Err(e) = self.count_keys(
            team,
            family,
            rows.iter().map(|r| (r, 1)),
            chrono::Utc::now(),
            true,
        ) {
            tracing::error!(error = %e, team_id = team.0, "cannot store promoted property columns; the properties stay in the JSON");
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::meta::test_store;

    fn event(props: serde_json::Value) -> Event {
        Event {
            uuid: uuid::Uuid::now_v7(),
            event: "e".into(),
            distinct_id: "d".into(),
            timestamp: Utc::now(),
            created_at: Utc::now(),
            properties: props.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn frequent_typed_keys_are_promoted_once_and_survive_reopen() {
        let (dir, s) = test_store();
        s.set_property_columns(PropertyColumnsConfig {
            min_share: 0.5,
            max_columns: 2,
            min_events: 4,
        });
        let t = TeamId(1);
        let mut events: Vec<Event> = (0..3)
            .map(|i| {
                event(json!({"a": "x", "b": i, "c": true, "obj": {"k": 1}, "$session_id": "s"}))
            })
            .collect();
        events.push(event(json!({"rare": 1})));
        s.observe_properties(t, &events).unwrap();
        s.observe_property_columns(t, &events[..3]).unwrap();
        assert!(
            s.layouts().team(t).columns.is_empty(),
            "3 of 4 events counted"
        );
        s.observe_property_columns(t, &events[3..]).unwrap();
        let l = s.layouts().team(t);
        let keys: Vec<&str> = l.columns.iter().map(|c| c.key.as_str()).collect();
        // a, b and c are in 3 of 4 events; two fit; objects and $session_id never.
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(l.columns[1].ty, PropertyType::Numeric);
        assert!(s.layouts().team(TeamId(2)).columns.is_empty());
        // The cap holds: nothing more is promoted.
        s.observe_property_columns(t, &events).unwrap();
        assert_eq!(s.layouts().team(t).columns.len(), 2);
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(*s.layouts().team(t), *l);
        let cols: Vec<(String, arrow::datatypes::DataType, String)> = s
            .layouts()
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty.clone(), c.key.clone()))
            .collect();
        assert_eq!(
            cols,
            [
                ("p_a".into(), arrow::datatypes::DataType::Utf8, "a".into()),
                (
                    "p_b__num".into(),
                    arrow::datatypes::DataType::Float64,
                    "b".into()
                )
            ]
        );
    }

    /// Person properties have their own list: counted per stamped event, typed by the
    /// person property definitions, positioned after the team's event columns, and kept
    /// across a reopen.
    #[test]
    fn person_properties_are_promoted_in_a_list_of_their_own() {
        let (dir, s) = test_store();
        s.set_property_columns(PropertyColumnsConfig {
            min_share: 0.5,
            max_columns: 5,
            min_events: 2,
        });
        let t = TeamId(1);
        let set = vec![event(json!({"$set": {"plan": "pro", "age": 30}, "a": "x"}))];
        s.observe_properties(t, &set).unwrap();
        s.observe_property_columns(t, &[set[0].clone(), set[0].clone()])
            .unwrap();
        let person = json!({"plan": "pro", "age": 30, "untyped": 1});
        let rows = vec![person.as_object().unwrap().clone(); 2];
        s.observe_person_property_columns(t, rows.iter().map(|r| (r, 1)), Utc::now())
            .unwrap();
        let l = s.layouts();
        let keys = |f: Family| -> Vec<(String, String)> {
            l.of(f, t)
                .columns
                .iter()
                .map(|c| (c.key.clone(), c.column.clone()))
                .collect()
        };
        assert!(keys(Family::Event).iter().any(|(k, _)| k == "a"));
        assert!(
            !keys(Family::Event).iter().any(|(k, _)| k == "plan"),
            "a person property is not an event column"
        );
        assert_eq!(
            keys(Family::Person),
            [
                ("age".to_string(), "pp_age__num".to_string()),
                ("plan".to_string(), "pp_plan".to_string())
            ],
            "typed keys only, most frequent then by name"
        );
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(*s.layouts().of(Family::Person, t), *l.of(Family::Person, t));
        assert_eq!(*s.layouts().of(Family::Event, t), *l.of(Family::Event, t));
    }

    /// A store written before person properties had columns opens with its event columns.
    #[test]
    fn a_store_without_families_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.sqlite");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE property_columns (
                    team_id INTEGER NOT NULL, position INTEGER NOT NULL, key TEXT NOT NULL,
                    property_type TEXT NOT NULL, column_name TEXT NOT NULL,
                    created_at TEXT NOT NULL, PRIMARY KEY (team_id, position));
                 INSERT INTO property_columns VALUES (1, 0, '$browser', 'String', 'p_$browser', '2024-01-01T00:00:00Z');",
            )
            .unwrap();
        }
        let s = MetaStore::open(&path).unwrap();
        let l = s.layouts();
        assert_eq!(
            l.of(Family::Event, TeamId(1)).columns[0].column,
            "p_$browser"
        );
        assert!(l.of(Family::Person, TeamId(1)).columns.is_empty());
    }
}
