//! Group types: each project's group type names and their indexes (0–4), assigned in
//! order of first use and never changed.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

use super::{MetaStore, Result, ts};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS group_types (
    team_id INTEGER NOT NULL,
    group_type TEXT NOT NULL,
    idx INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (team_id, group_type),
    UNIQUE (team_id, idx)
);
";

pub use crate::model::MAX_GROUP_TYPES;

impl MetaStore {
    /// The project's group types and their indexes, in index order.
    pub fn group_types_of(&self, team: TeamId) -> Result<Vec<(String, u8)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT group_type, idx FROM group_types WHERE team_id = ?1 ORDER BY idx",
        )?;
        let rows = stmt.query_map(params![team.0], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The index (0–4) of a project's group type, assigned in order of first use. `None`
    /// once the project has five other group types.
    pub fn group_type_index(
        &self,
        team: TeamId,
        group_type: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<u8>> {
        let key = (team, group_type.to_owned());
        if let Some(hit) = self
            .group_types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(Some(*hit));
        }
        if self
            .full_teams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&team)
        {
            return Ok(None);
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let existing: Option<u8> = tx
            .query_row(
                "SELECT idx FROM group_types WHERE team_id = ?1 AND group_type = ?2",
                params![team.0, group_type],
                |r| r.get(0),
            )
            .optional()?;
        let idx = match existing {
            Some(i) => Some(i),
            None => {
                let used: u8 = tx.query_row(
                    "SELECT count(*) FROM group_types WHERE team_id = ?1",
                    params![team.0],
                    |r| r.get(0),
                )?;
                if used >= MAX_GROUP_TYPES {
                    None
                } else {
                    tx.execute(
                        "INSERT INTO group_types (team_id, group_type, idx, created_at) VALUES (?1, ?2, ?3, ?4)",
                        params![team.0, group_type, used, ts(now)],
                    )?;
                    Some(used)
                }
            }
        };
        tx.commit()?;
        drop(conn);
        match idx {
            Some(i) => {
                self.group_types
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, i);
            }
            None => {
                self.full_teams
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(team);
            }
        }
        Ok(idx)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::super::{MetaStore, test_store};
    use crate::model::TeamId;

    #[test]
    fn group_types_in_order_of_first_use_at_most_five() {
        let (dir, s) = test_store();
        let now = Utc::now();
        let t = TeamId(1);
        assert_eq!(s.group_type_index(t, "company", now).unwrap(), Some(0));
        assert_eq!(s.group_type_index(t, "team", now).unwrap(), Some(1));
        assert_eq!(s.group_type_index(t, "company", now).unwrap(), Some(0));
        assert_eq!(
            s.group_type_index(TeamId(2), "team", now).unwrap(),
            Some(0),
            "per project"
        );
        for (i, ty) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(s.group_type_index(t, ty, now).unwrap(), Some(i as u8 + 2));
        }
        assert_eq!(s.group_type_index(t, "sixth", now).unwrap(), None);
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(
            s.group_type_index(t, "team", now).unwrap(),
            Some(1),
            "kept across restarts"
        );
        assert_eq!(s.group_type_index(t, "sixth", now).unwrap(), None);
        // Unknown names of a full project are answered without SQLite and are not cached:
        // a request can name thousands of them.
        for i in 0..10_000 {
            assert_eq!(s.group_type_index(t, &format!("x{i}"), now).unwrap(), None);
        }
        assert!(s.group_types.lock().unwrap().len() <= 5);
        assert_eq!(s.group_type_index(t, "team", now).unwrap(), Some(1));
    }
}
