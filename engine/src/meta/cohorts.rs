//! Cohorts, per project: their definitions (`cohorts`) and their members
//! (`cohort_people`: person uuids). A static cohort's members are the ones added to it; a
//! dynamic cohort's are replaced whole by each calculation. A deleted cohort stays as a row
//! (`deleted = 1`) without members, as PostHog keeps it.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{MetaStore, Result, parse_ts, ts};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cohorts (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    filters TEXT,
    query TEXT,
    is_static INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    count INTEGER,
    is_calculating INTEGER NOT NULL DEFAULT 0,
    last_calculation TEXT,
    errors_calculating INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cohort_people (
    team_id INTEGER NOT NULL,
    cohort_id INTEGER NOT NULL,
    person_id TEXT NOT NULL,
    PRIMARY KEY (cohort_id, person_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cohort_people_person ON cohort_people (team_id, person_id);
";

const COLUMNS: &str = "id, team_id, name, description, filters, query, is_static, deleted, count, \
                       is_calculating, last_calculation, errors_calculating, last_error, version, \
                       created_at, updated_at";

/// A cohort as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Cohort {
    pub id: i64,
    pub team: TeamId,
    pub name: String,
    pub description: String,
    /// A dynamic cohort's definition (PostHog's `filters: {properties: …}`), as validated.
    pub filters: Option<Value>,
    /// A dynamic cohort defined by a HogQL query (`{kind: "HogQLQuery", query}`).
    pub query: Option<Value>,
    pub is_static: bool,
    pub deleted: bool,
    /// Members at the last calculation (or of a static cohort); `None` before the first.
    pub count: Option<i64>,
    pub is_calculating: bool,
    pub last_calculation: Option<DateTime<Utc>>,
    /// Calculations that failed since the last one that did not.
    pub errors_calculating: i64,
    pub last_error: Option<String>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A new cohort's fields (the caller validated them).
#[derive(Debug, Clone, Default)]
pub struct NewCohort {
    pub name: String,
    pub description: String,
    pub filters: Option<Value>,
    pub query: Option<Value>,
    pub is_static: bool,
}

fn json_col(s: Option<String>) -> Option<Value> {
    s.and_then(|t| serde_json::from_str(&t).ok())
}

fn row_to_cohort(r: &rusqlite::Row<'_>) -> rusqlite::Result<Cohort> {
    Ok(Cohort {
        id: r.get(0)?,
        team: TeamId(r.get(1)?),
        name: r.get(2)?,
        description: r.get(3)?,
        filters: json_col(r.get(4)?),
        query: json_col(r.get(5)?),
        is_static: r.get(6)?,
        deleted: r.get(7)?,
        count: r.get(8)?,
        is_calculating: r.get(9)?,
        last_calculation: r.get::<_, Option<String>>(10)?.map(parse_ts),
        errors_calculating: r.get(11)?,
        last_error: r.get(12)?,
        version: r.get(13)?,
        created_at: parse_ts(r.get(14)?),
        updated_at: parse_ts(r.get(15)?),
    })
}

/// Adds members (ids already members stay once).
fn insert_members(
    tx: &rusqlite::Transaction<'_>,
    team: TeamId,
    id: i64,
    people: &[String],
) -> Result<()> {
    let mut ins = tx.prepare(
        "INSERT OR IGNORE INTO cohort_people (team_id, cohort_id, person_id) VALUES (?1, ?2, ?3)",
    )?;
    for p in people {
        ins.execute(params![team.0, id, p])?;
    }
    Ok(())
}

fn text(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(Value::to_string)
}

impl MetaStore {
    pub fn insert_cohort(&self, team: TeamId, c: &NewCohort, now: DateTime<Utc>) -> Result<Cohort> {
        let id = {
            let conn = self.conn();
            conn.execute(
                "INSERT INTO cohorts (team_id, name, description, filters, query, is_static,
                     count, is_calculating, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                params![
                    team.0,
                    c.name,
                    c.description,
                    text(&c.filters),
                    text(&c.query),
                    c.is_static,
                    c.is_static.then_some(0i64),
                    !c.is_static,
                    ts(now)
                ],
            )?;
            conn.last_insert_rowid()
        };
        Ok(self.cohort(team, id)?.expect("the cohort just stored"))
    }

    /// Replaces a cohort's definition (name, description, filters, query, deleted),
    /// bumping its version; a deleted cohort loses its members.
    pub fn update_cohort(&self, c: &Cohort, now: DateTime<Utc>) -> Result<Cohort> {
        {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            tx.execute(
                "UPDATE cohorts SET name = ?1, description = ?2, filters = ?3, query = ?4,
                     deleted = ?5, is_calculating = ?6, version = version + 1, updated_at = ?7
                 WHERE id = ?8 AND team_id = ?9",
                params![
                    c.name,
                    c.description,
                    text(&c.filters),
                    text(&c.query),
                    c.deleted,
                    c.is_calculating,
                    ts(now),
                    c.id,
                    c.team.0
                ],
            )?;
            if c.deleted {
                tx.execute(
                    "DELETE FROM cohort_people WHERE cohort_id = ?1",
                    params![c.id],
                )?;
                tx.execute("UPDATE cohorts SET count = 0 WHERE id = ?1", params![c.id])?;
            }
            tx.commit()?;
        }
        Ok(self.cohort(c.team, c.id)?.expect("the cohort just updated"))
    }

    /// A cohort of the project, deleted or not.
    pub fn cohort(&self, team: TeamId, id: i64) -> Result<Option<Cohort>> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM cohorts WHERE team_id = ?1 AND id = ?2"),
                params![team.0, id],
                row_to_cohort,
            )
            .optional()?)
    }

    /// The project's live cohorts, newest first.
    pub fn cohorts(&self, team: TeamId) -> Result<Vec<Cohort>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM cohorts WHERE team_id = ?1 AND deleted = 0 ORDER BY id DESC"
        ))?;
        let rows = stmt.query_map(params![team.0], row_to_cohort)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Every project's live dynamic cohorts (what the schedule recalculates).
    pub fn dynamic_cohorts(&self) -> Result<Vec<Cohort>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM cohorts WHERE deleted = 0 AND is_static = 0 ORDER BY id"
        ))?;
        let rows = stmt.query_map([], row_to_cohort)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A calculation of the cohort at `version` found these members: they replace the old
    /// ones, unless the definition changed meanwhile (then `false`, nothing written).
    pub fn set_cohort_people(
        &self,
        team: TeamId,
        id: i64,
        version: i64,
        people: &[String],
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let current: Option<(i64, bool)> = tx
            .query_row(
                "SELECT version, deleted FROM cohorts WHERE id = ?1 AND team_id = ?2",
                params![id, team.0],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if current != Some((version, false)) {
            return Ok(false);
        }
        tx.execute(
            "DELETE FROM cohort_people WHERE cohort_id = ?1",
            params![id],
        )?;
        insert_members(&tx, team, id, people)?;
        let count: i64 = tx.query_row(
            "SELECT count(*) FROM cohort_people WHERE cohort_id = ?1",
            params![id],
            |r| r.get(0),
        )?;
        tx.execute(
            "UPDATE cohorts SET count = ?1, is_calculating = 0, last_calculation = ?2,
                 errors_calculating = 0, last_error = NULL WHERE id = ?3",
            params![count, ts(now), id],
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// A calculation failed: counted, and why kept for the API.
    pub fn cohort_failed(&self, team: TeamId, id: i64, why: &str) -> Result<()> {
        self.conn().execute(
            "UPDATE cohorts SET is_calculating = 0, errors_calculating = errors_calculating + 1,
                 last_error = ?1 WHERE id = ?2 AND team_id = ?3",
            params![why, id, team.0],
        )?;
        Ok(())
    }

    /// Adds members to a static cohort (ids already members stay once); the new count.
    pub fn add_cohort_people(
        &self,
        team: TeamId,
        id: i64,
        people: &[String],
        now: DateTime<Utc>,
    ) -> Result<i64> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        insert_members(&tx, team, id, people)?;
        let count = Self::recount(&tx, id, now)?;
        tx.commit()?;
        Ok(count)
    }

    /// Removes one member of a static cohort; whether it was one.
    pub fn remove_cohort_person(
        &self,
        team: TeamId,
        id: i64,
        person: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let n = tx.execute(
            "DELETE FROM cohort_people WHERE team_id = ?1 AND cohort_id = ?2 AND person_id = ?3",
            params![team.0, id, person],
        )?;
        Self::recount(&tx, id, now)?;
        tx.commit()?;
        Ok(n > 0)
    }

    fn recount(tx: &rusqlite::Transaction<'_>, id: i64, now: DateTime<Utc>) -> Result<i64> {
        let count: i64 = tx.query_row(
            "SELECT count(*) FROM cohort_people WHERE cohort_id = ?1",
            params![id],
            |r| r.get(0),
        )?;
        tx.execute(
            "UPDATE cohorts SET count = ?1, last_calculation = ?2 WHERE id = ?3",
            params![count, ts(now), id],
        )?;
        Ok(count)
    }

    /// One page of a cohort's members (person uuids, in order) and how many it has.
    pub fn cohort_members(
        &self,
        team: TeamId,
        id: i64,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<String>, u64)> {
        let conn = self.conn();
        let count: i64 = conn.query_row(
            "SELECT count(*) FROM cohort_people WHERE team_id = ?1 AND cohort_id = ?2",
            params![team.0, id],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(
            "SELECT person_id FROM cohort_people WHERE team_id = ?1 AND cohort_id = ?2
             ORDER BY person_id LIMIT ?3 OFFSET ?4",
        )?;
        let rows = stmt.query_map(
            params![
                team.0,
                id,
                i64::try_from(limit).unwrap_or(i64::MAX),
                i64::try_from(offset).unwrap_or(i64::MAX)
            ],
            |r| r.get::<_, String>(0),
        )?;
        Ok((
            rows.collect::<rusqlite::Result<Vec<_>>>()?,
            count.max(0) as u64,
        ))
    }

    /// Members of the project's live cohorts, as `(cohort id, person uuid)`.
    pub fn cohort_people(&self, team: TeamId) -> Result<Vec<(i64, String)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT p.cohort_id, p.person_id FROM cohort_people p
             JOIN cohorts c ON c.id = p.cohort_id
             WHERE p.team_id = ?1 AND c.deleted = 0 ORDER BY p.cohort_id, p.person_id",
        )?;
        let rows = stmt.query_map(params![team.0], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The live cohorts one of `uuids` (a person's uuid, and the uuids merged into it)
    /// belongs to, by id.
    pub fn cohorts_of_person(&self, team: TeamId, uuids: &[String]) -> Result<Vec<i64>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT DISTINCT p.cohort_id FROM cohort_people p
             JOIN cohorts c ON c.id = p.cohort_id
             WHERE p.team_id = ?1 AND p.person_id = ?2 AND c.deleted = 0",
        )?;
        let mut out = Vec::new();
        for u in uuids {
            let rows = stmt.query_map(params![team.0, u], |r| r.get::<_, i64>(0))?;
            for id in rows {
                out.push(id?);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::meta::test_store;

    #[test]
    fn cohorts_keep_members_by_version_and_lose_them_when_deleted() {
        let (dir, s) = test_store();
        let now = Utc::now();
        let t = TeamId(1);
        let dynamic = s
            .insert_cohort(
                t,
                &NewCohort {
                    name: "pros".into(),
                    filters: Some(json!({"properties": {"type": "AND", "values": []}})),
                    ..NewCohort::default()
                },
                now,
            )
            .unwrap();
        assert_eq!((dynamic.count, dynamic.is_calculating), (None, true));
        let people = vec!["a".to_string(), "b".to_string(), "a".to_string()];
        assert!(s.set_cohort_people(t, dynamic.id, 1, &people, now).unwrap());
        let c = s.cohort(t, dynamic.id).unwrap().unwrap();
        assert_eq!((c.count, c.is_calculating), (Some(2), false));
        // A calculation of an older definition writes nothing.
        let changed = s.update_cohort(&c, now).unwrap();
        assert_eq!(changed.version, 2);
        assert!(
            !s.set_cohort_people(t, dynamic.id, 1, &["z".into()], now)
                .unwrap()
        );
        s.cohort_failed(t, dynamic.id, "boom").unwrap();
        let c = s.cohort(t, dynamic.id).unwrap().unwrap();
        assert_eq!(
            (c.errors_calculating, c.last_error.as_deref()),
            (1, Some("boom"))
        );

        let fixed = s
            .insert_cohort(
                t,
                &NewCohort {
                    name: "list".into(),
                    is_static: true,
                    ..NewCohort::default()
                },
                now,
            )
            .unwrap();
        assert_eq!(fixed.count, Some(0));
        assert_eq!(
            s.add_cohort_people(t, fixed.id, &["b".into(), "c".into()], now)
                .unwrap(),
            2
        );
        assert_eq!(
            s.add_cohort_people(t, fixed.id, &["c".into()], now)
                .unwrap(),
            2
        );
        assert_eq!(
            s.cohorts_of_person(t, &["b".into()]).unwrap(),
            vec![dynamic.id, fixed.id]
        );
        assert!(s.remove_cohort_person(t, fixed.id, "b", now).unwrap());
        assert!(!s.remove_cohort_person(t, fixed.id, "b", now).unwrap());
        assert_eq!(s.cohort_people(TeamId(2)).unwrap(), vec![]);

        let mut gone = s.cohort(t, dynamic.id).unwrap().unwrap();
        gone.deleted = true;
        s.update_cohort(&gone, now).unwrap();
        assert_eq!(s.cohorts(t).unwrap().len(), 1);
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(
            s.cohort_people(t).unwrap(),
            vec![(fixed.id, "c".to_string())]
        );
        assert_eq!(s.cohort(t, dynamic.id).unwrap().unwrap().count, Some(0));
    }
}
