//! Feature flag definitions, per project. A deleted flag stays as a row (`deleted = 1`),
//! as PostHog keeps it, and frees its key; every change bumps `version`.
//!
//! `/flags` evaluates every active flag of a project on each call, so the project's flags
//! are kept in memory as one snapshot, loaded on first use and replaced by each write.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

use super::{MetaError, MetaStore, Result, parse_ts, ts};
use crate::flags::{FeatureFlag, Filters};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS feature_flags (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    filters TEXT NOT NULL,
    active INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    ensure_experience_continuity INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS feature_flags_live_key
    ON feature_flags (team_id, key) WHERE deleted = 0;
";

const COLUMNS: &str = "id, team_id, key, name, filters, active, deleted, \
                       ensure_experience_continuity, version, created_at, updated_at";

/// Each project's live (not deleted) flags, in id order.
pub(super) type FlagSnapshots = RwLock<HashMap<TeamId, Arc<Vec<FeatureFlag>>>>;

fn row_to_flag(r: &rusqlite::Row<'_>) -> rusqlite::Result<FeatureFlag> {
    let filters: String = r.get(4)?;
    Ok(FeatureFlag {
        id: r.get(0)?,
        team: TeamId(r.get(1)?),
        key: r.get(2)?,
        name: r.get(3)?,
        // Stored by this module from a validated `Filters`, so it reads back; a file
        // edited by hand reads as a flag without conditions rather than failing the project.
        filters: serde_json::from_str::<Filters>(&filters).unwrap_or_default(),
        active: r.get(5)?,
        deleted: r.get(6)?,
        ensure_experience_continuity: r.get(7)?,
        version: r.get(8)?,
        created_at: parse_ts(r.get(9)?),
        updated_at: parse_ts(r.get(10)?),
    })
}

/// A new flag's fields.
#[derive(Debug, Clone)]
pub struct NewFlag {
    pub key: String,
    pub name: String,
    pub filters: Filters,
    pub active: bool,
    pub ensure_experience_continuity: bool,
}

impl MetaStore {
    /// Stores a new flag; [`MetaError::FlagKeyTaken`] if a live flag of the project has the
    /// key. The caller validated the fields.
    pub fn insert_flag(
        &self,
        team: TeamId,
        f: &NewFlag,
        now: DateTime<Utc>,
    ) -> Result<FeatureFlag> {
        let filters = serde_json::to_string(&f.filters).expect("filters serialize");
        let id = {
            let conn = self.conn();
            let res = conn.execute(
                "INSERT INTO feature_flags (team_id, key, name, filters, active, deleted,
                     ensure_experience_continuity, version, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, 1, ?7, ?7)",
                params![
                    team.0,
                    f.key,
                    f.name,
                    filters,
                    f.active,
                    f.ensure_experience_continuity,
                    ts(now)
                ],
            );
            match res {
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
                {
                    return Err(MetaError::FlagKeyTaken(f.key.clone()));
                }
                r => r?,
            };
            conn.last_insert_rowid()
        };
        self.forget_flags(team);
        Ok(self.flag(team, id)?.expect("the flag just stored"))
    }

    /// Replaces a flag's fields (a deleted flag's key stays reserved by nobody), bumping its
    /// version.
    pub fn update_flag(&self, f: &FeatureFlag, now: DateTime<Utc>) -> Result<FeatureFlag> {
        let filters = serde_json::to_string(&f.filters).expect("filters serialize");
        {
            let conn = self.conn();
            let res = conn.execute(
                "UPDATE feature_flags SET key = ?1, name = ?2, filters = ?3, active = ?4,
                     deleted = ?5, ensure_experience_continuity = ?6, version = version + 1,
                     updated_at = ?7
                 WHERE id = ?8 AND team_id = ?9",
                params![
                    f.key,
                    f.name,
                    filters,
                    f.active,
                    f.deleted,
                    f.ensure_experience_continuity,
                    ts(now),
                    f.id,
                    f.team.0
                ],
            );
            match res {
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
                {
                    return Err(MetaError::FlagKeyTaken(f.key.clone()));
                }
                r => r?,
            };
        }
        self.forget_flags(f.team);
        Ok(self.flag(f.team, f.id)?.expect("the flag just updated"))
    }

    /// A flag of the project, deleted or not.
    pub fn flag(&self, team: TeamId, id: i64) -> Result<Option<FeatureFlag>> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM feature_flags WHERE team_id = ?1 AND id = ?2"),
                params![team.0, id],
                row_to_flag,
            )
            .optional()?)
    }

    /// The project's live flags, in id order, from the snapshot.
    pub fn live_flags(&self, team: TeamId) -> Result<Arc<Vec<FeatureFlag>>> {
        if let Some(s) = self
            .flags
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&team)
        {
            return Ok(Arc::clone(s));
        }
        let flags = {
            let conn = self.conn();
            let mut stmt = conn.prepare(&format!(
                "SELECT {COLUMNS} FROM feature_flags WHERE team_id = ?1 AND deleted = 0 ORDER BY id"
            ))?;
            let rows = stmt.query_map(params![team.0], row_to_flag)?;
            Arc::new(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        };
        self.flags
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(team, Arc::clone(&flags));
        Ok(flags)
    }

    fn forget_flags(&self, team: TeamId) {
        self.flags
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&team);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::meta::test_store;

    fn new(key: &str) -> NewFlag {
        NewFlag {
            key: key.into(),
            name: format!("{key} flag"),
            filters: serde_json::from_value(json!({"groups": [{"rollout_percentage": 30}]}))
                .unwrap(),
            active: true,
            ensure_experience_continuity: false,
        }
    }

    #[test]
    fn flags_are_stored_versioned_and_soft_deleted() {
        let (dir, s) = test_store();
        let now = Utc::now();
        let a = s.insert_flag(TeamId(1), &new("beta"), now).unwrap();
        assert_eq!((a.version, a.active, a.deleted), (1, true, false));
        assert_eq!(a.filters.groups[0].rollout_percentage, Some(30.0));
        // One live flag per key and project; another project may use the key.
        assert!(matches!(
            s.insert_flag(TeamId(1), &new("beta"), now),
            Err(MetaError::FlagKeyTaken(k)) if k == "beta"
        ));
        s.insert_flag(TeamId(2), &new("beta"), now).unwrap();
        assert_eq!(s.live_flags(TeamId(1)).unwrap().len(), 1);

        let mut off = a.clone();
        off.active = false;
        let off = s.update_flag(&off, now).unwrap();
        assert_eq!((off.version, off.active), (2, false));
        assert!(
            !s.live_flags(TeamId(1)).unwrap()[0].active,
            "the snapshot follows"
        );

        let mut gone = off.clone();
        gone.deleted = true;
        s.update_flag(&gone, now).unwrap();
        assert!(s.live_flags(TeamId(1)).unwrap().is_empty());
        assert!(s.flag(TeamId(1), a.id).unwrap().unwrap().deleted);
        assert_eq!(
            s.flag(TeamId(2), a.id).unwrap(),
            None,
            "another project's id"
        );
        // The deleted flag frees its key.
        let again = s.insert_flag(TeamId(1), &new("beta"), now).unwrap();
        assert_ne!(again.id, a.id);

        // Everything is in the file.
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        let live = s.live_flags(TeamId(1)).unwrap();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].key, "beta");
        assert_eq!(live[0].id, again.id);
    }
}
