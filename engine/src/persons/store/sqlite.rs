//! [`SqliteStore`]: the person store in the data directory's SQLite file, beside the
//! metadata store's tables. Two connections: the pipeline's writer and one reader for the
//! API and queries (WAL mode lets it read while the writer writes).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::filter::{filter_sql, register_functions};
use super::{
    Activity, ChangeSet, GroupRow, Op, PersonFilter, PersonRow, PersonStore, Result, Task,
    WarningRow,
};
use crate::model::{DistinctId, PersonUuid, TeamId};
use crate::persons::Person;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS persons (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    uuid TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    properties TEXT NOT NULL,
    is_identified INTEGER NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS persons_by_team ON persons (team_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS persons_by_uuid ON persons (team_id, uuid);
CREATE TABLE IF NOT EXISTS person_distinct_ids (
    team_id INTEGER NOT NULL,
    distinct_id TEXT NOT NULL,
    person_id INTEGER NOT NULL,
    PRIMARY KEY (team_id, distinct_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pdi_by_person ON person_distinct_ids (person_id);
CREATE TABLE IF NOT EXISTS person_overrides (
    team_id INTEGER NOT NULL,
    old_person_id TEXT NOT NULL,
    override_person_id TEXT NOT NULL,
    -- The WAL seq of the commit that made it: events stored under old_person_id all come
    -- from records at or before it.
    seq INTEGER NOT NULL,
    PRIMARY KEY (team_id, old_person_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS overrides_by_target ON person_overrides (team_id, override_person_id);
CREATE TABLE IF NOT EXISTS groups (
    team_id INTEGER NOT NULL,
    group_type_index INTEGER NOT NULL,
    group_key TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    properties TEXT NOT NULL,
    PRIMARY KEY (team_id, group_type_index, group_key)
);
CREATE TABLE IF NOT EXISTS ingestion_warnings (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    type TEXT NOT NULL,
    details TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS person_activity (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    person_id INTEGER NOT NULL,
    person_uuid TEXT NOT NULL,
    activity TEXT NOT NULL,
    actor TEXT NOT NULL,
    detail TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS activity_by_person ON person_activity (team_id, person_id);
CREATE TABLE IF NOT EXISTS deletion_tasks (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    person_id INTEGER NOT NULL,
    person_uuid TEXT NOT NULL,
    event_person_ids TEXT NOT NULL,
    scrub TEXT NOT NULL,
    actor TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER,
    rows_deleted INTEGER
);
CREATE TABLE IF NOT EXISTS persons_state (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
";

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn from_micros(m: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(m).unwrap_or_default()
}

fn parse_map(s: &str) -> Map<String, Value> {
    match serde_json::from_str(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn parse_uuid(s: &str) -> PersonUuid {
    s.parse().unwrap_or_default()
}

fn open_conn(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Deleted rows are overwritten, not left in free pages (GDPR deletion).
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    register_functions(&conn)?;
    Ok(conn)
}

pub struct SqliteStore {
    path: std::path::PathBuf,
    /// The pipeline's connection: lookups on a cache miss and commits.
    writer: Mutex<Connection>,
    /// The API's and queries' connection (WAL mode lets it read while the writer writes).
    reader: Mutex<Connection>,
    seq: AtomicU64,
    version: AtomicU64,
}

fn lock(m: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn person_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PersonRow> {
    Ok(PersonRow {
        id: r.get(0)?,
        team: TeamId(r.get(1)?),
        uuid: parse_uuid(&r.get::<_, String>(2)?),
        created_at: from_micros(r.get(3)?),
        properties: parse_map(&r.get::<_, String>(4)?),
        is_identified: r.get(5)?,
        version: r.get(6)?,
    })
}

const PERSON_COLS: &str = "id, team_id, uuid, created_at, properties, is_identified, version";

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    Ok(Task {
        id: r.get(0)?,
        team: TeamId(r.get(1)?),
        kind: r.get(2)?,
        person_id: r.get(3)?,
        person_uuid: parse_uuid(&r.get::<_, String>(4)?),
        event_person_ids: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
        status: r.get(6)?,
        created_at: from_micros(r.get(7)?),
        finished_at: r.get::<_, Option<i64>>(8)?.map(from_micros),
        rows_deleted: r.get::<_, Option<i64>>(9)?.map(|n| n as u64),
        scrub: serde_json::from_str(&r.get::<_, String>(10)?).unwrap_or_default(),
    })
}

const TASK_COLS: &str = "id, team_id, kind, person_id, person_uuid, event_person_ids, status, created_at, finished_at, rows_deleted, scrub";

impl SqliteStore {
    pub fn open(path: &Path) -> Result<Self> {
        let writer = open_conn(path)?;
        writer.execute_batch(SCHEMA)?;
        let reader = open_conn(path)?;
        let seq: i64 = writer
            .query_row(
                "SELECT value FROM persons_state WHERE key = 'last_seq'",
                [],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        Ok(Self {
            path: path.to_owned(),
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            seq: AtomicU64::new(seq.max(0) as u64),
            version: AtomicU64::new(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn distinct_ids_on(
        conn: &Connection,
        team: TeamId,
        ids: &[i64],
    ) -> Result<HashMap<i64, Vec<DistinctId>>> {
        let mut out: HashMap<i64, Vec<DistinctId>> = HashMap::new();
        for chunk in ids.chunks(500) {
            let sql = format!(
                "SELECT person_id, distinct_id FROM person_distinct_ids WHERE team_id = ? AND person_id IN ({})",
                vec!["?"; chunk.len()].join(", ")
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut args: Vec<i64> = vec![team.0];
            args.extend_from_slice(chunk);
            let rows = stmt.query_map(params_from_iter(args), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?;
            for row in rows {
                let (p, d) = row?;
                out.entry(p).or_default().push(DistinctId::from(d));
            }
        }
        for v in out.values_mut() {
            v.sort();
            Person::sort_distinct_ids(v);
        }
        Ok(out)
    }

    fn apply(tx: &rusqlite::Transaction<'_>, changes: &ChangeSet, seq: u64) -> Result<()> {
        for op in &changes.ops {
            match op {
                Op::SetDistinct {
                    team,
                    distinct_id,
                    person_id,
                } => {
                    tx.prepare_cached(
                        "INSERT INTO person_distinct_ids (team_id, distinct_id, person_id) VALUES (?1, ?2, ?3)
                         ON CONFLICT (team_id, distinct_id) DO UPDATE SET person_id = excluded.person_id",
                    )?
                    .execute(params![team.0, distinct_id.as_str(), person_id])?;
                }
                Op::DeletePerson { team, id } => {
                    tx.execute(
                        "DELETE FROM person_distinct_ids WHERE team_id = ?1 AND person_id = ?2",
                        params![team.0, id],
                    )?;
                    tx.execute(
                        "DELETE FROM persons WHERE team_id = ?1 AND id = ?2",
                        params![team.0, id],
                    )?;
                    tx.execute(
                        "DELETE FROM person_activity WHERE team_id = ?1 AND person_id = ?2",
                        params![team.0, id],
                    )?;
                }
                Op::MergePerson { team, from, to } => {
                    tx.prepare_cached(
                        "UPDATE person_distinct_ids SET person_id = ?3 WHERE team_id = ?1 AND person_id = ?2",
                    )?
                    .execute(params![team.0, from, to])?;
                    tx.prepare_cached(
                        "UPDATE person_activity SET person_id = ?3 WHERE team_id = ?1 AND person_id = ?2",
                    )?
                    .execute(params![team.0, from, to])?;
                    tx.prepare_cached("DELETE FROM persons WHERE team_id = ?1 AND id = ?2")?
                        .execute(params![team.0, from])?;
                }
                Op::Override { team, old, new } => {
                    let (old, new) = (old.to_string(), new.to_string());
                    tx.prepare_cached(
                        "UPDATE person_overrides SET override_person_id = ?3 WHERE team_id = ?1 AND override_person_id = ?2",
                    )?
                    .execute(params![team.0, old, new])?;
                    tx.prepare_cached(
                        "INSERT INTO person_overrides (team_id, old_person_id, override_person_id, seq) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (team_id, old_person_id) DO UPDATE SET override_person_id = excluded.override_person_id,
                           seq = excluded.seq",
                    )?
                    .execute(params![team.0, old, new, seq as i64])?;
                }
                Op::ClearOverride { team, old } => {
                    tx.prepare_cached(
                        "DELETE FROM person_overrides WHERE team_id = ?1 AND old_person_id = ?2",
                    )?
                    .execute(params![team.0, old.to_string()])?;
                }
                Op::Group(g) => {
                    tx.prepare_cached(
                        "INSERT INTO groups (team_id, group_type_index, group_key, created_at, updated_at, properties)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                         ON CONFLICT (team_id, group_type_index, group_key) DO UPDATE SET
                           updated_at = excluded.updated_at, properties = excluded.properties,
                           created_at = excluded.created_at",
                    )?
                    .execute(params![
                        g.team.0,
                        g.index,
                        g.key,
                        micros(g.created_at),
                        micros(g.updated_at),
                        Value::Object(g.properties.clone()).to_string()
                    ])?;
                }
                Op::Warning {
                    team,
                    kind,
                    details,
                    at,
                } => {
                    tx.prepare_cached(
                        "INSERT INTO ingestion_warnings (team_id, type, details, at) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![team.0, kind, details.to_string(), micros(*at)])?;
                }
                Op::Activity(a) => {
                    tx.prepare_cached(
                        "INSERT INTO person_activity (team_id, person_id, person_uuid, activity, actor, detail, at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(params![
                        a.team.0,
                        a.person_id,
                        a.person_uuid.to_string(),
                        a.activity,
                        a.actor,
                        a.detail.to_string(),
                        micros(a.at)
                    ])?;
                }
                Op::Task(t) => {
                    tx.execute(
                        "INSERT INTO deletion_tasks (team_id, kind, person_id, person_uuid, event_person_ids, scrub, actor, status, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8)",
                        params![
                            t.team.0,
                            t.kind,
                            t.person_id,
                            t.person_uuid.to_string(),
                            serde_json::to_string(&t.event_person_ids).unwrap_or_default(),
                            serde_json::to_string(&t.scrub).unwrap_or_default(),
                            t.actor,
                            micros(t.at)
                        ],
                    )?;
                }
            }
        }
        for p in changes.persons.values() {
            tx.prepare_cached(
                "INSERT INTO persons (id, team_id, uuid, created_at, properties, is_identified, version)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at,
                   properties = excluded.properties, is_identified = excluded.is_identified,
                   version = excluded.version",
            )?
            .execute(params![
                p.id,
                p.team.0,
                p.uuid.to_string(),
                micros(p.created_at),
                &*p.properties,
                p.is_identified,
                p.version
            ])?;
        }
        Ok(())
    }
}

impl PersonStore for SqliteStore {
    fn last_seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn commit(&self, changes: &ChangeSet, seq: u64, next_person_id: i64) -> Result<()> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        Self::apply(&tx, changes, seq)?;
        tx.prepare_cached(
            "INSERT INTO persons_state (key, value) VALUES ('last_seq', ?1), ('next_person_id', ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![seq as i64, next_person_id])?;
        tx.commit()?;
        self.seq.store(seq, Ordering::Release);
        if !changes.is_empty() {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    fn next_person_id(&self) -> Result<i64> {
        let conn = lock(&self.writer);
        let stored: Option<i64> = conn
            .query_row(
                "SELECT value FROM persons_state WHERE key = 'next_person_id'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let max: i64 = conn.query_row("SELECT coalesce(max(id), 0) + 1 FROM persons", [], |r| {
            r.get(0)
        })?;
        Ok(stored.unwrap_or(1).max(max))
    }

    fn person_id_of(&self, team: TeamId, distinct_id: &DistinctId) -> Result<Option<i64>> {
        let conn = lock(&self.writer);
        Ok(conn
            .prepare_cached(
                "SELECT person_id FROM person_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
            )?
            .query_row(params![team.0, distinct_id.as_str()], |r| r.get(0))
            .optional()?)
    }

    fn person(&self, team: TeamId, id: i64) -> Result<Option<PersonRow>> {
        let conn = lock(&self.writer);
        Ok(conn
            .prepare_cached(&format!(
                "SELECT {PERSON_COLS} FROM persons WHERE team_id = ?1 AND id = ?2"
            ))?
            .query_row(params![team.0, id], person_row)
            .optional()?)
    }

    fn person_by_uuid(&self, team: TeamId, uuid: PersonUuid) -> Result<Option<PersonRow>> {
        let conn = lock(&self.reader);
        Ok(conn
            .prepare_cached(&format!(
                "SELECT {PERSON_COLS} FROM persons WHERE team_id = ?1 AND uuid = ?2"
            ))?
            .query_row(params![team.0, uuid.to_string()], person_row)
            .optional()?)
    }

    fn distinct_ids(&self, team: TeamId, id: i64) -> Result<Vec<DistinctId>> {
        let conn = lock(&self.writer);
        Ok(Self::distinct_ids_on(&conn, team, &[id])?
            .remove(&id)
            .unwrap_or_default())
    }

    fn merged_into(&self, team: TeamId, uuid: PersonUuid) -> Result<Vec<PersonUuid>> {
        let conn = lock(&self.writer);
        let mut stmt = conn.prepare_cached(
            "SELECT old_person_id FROM person_overrides WHERE team_id = ?1 AND override_person_id = ?2",
        )?;
        let rows = stmt.query_map(params![team.0, uuid.to_string()], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(parse_uuid(&r?));
        }
        Ok(out)
    }

    fn group(&self, team: TeamId, index: u8, key: &str) -> Result<Option<GroupRow>> {
        let conn = lock(&self.writer);
        Ok(conn
            .prepare_cached(
                "SELECT created_at, updated_at, properties FROM groups WHERE team_id = ?1 AND group_type_index = ?2 AND group_key = ?3",
            )?
            .query_row(params![team.0, index, key], |r| {
                Ok(GroupRow {
                    team,
                    index,
                    key: key.to_owned(),
                    created_at: from_micros(r.get(0)?),
                    updated_at: from_micros(r.get(1)?),
                    properties: parse_map(&r.get::<_, String>(2)?),
                })
            })
            .optional()?)
    }

    fn list(
        &self,
        team: TeamId,
        filter: &PersonFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Person>, u64)> {
        let (clause, args) = filter_sql(team, filter)?;
        let conn = lock(&self.reader);
        let count: i64 = conn.query_row(
            &format!("SELECT count(*) FROM persons p WHERE {clause}"),
            params_from_iter(args.iter()),
            |r| r.get(0),
        )?;
        let mut page_args = args.clone();
        page_args.push(rusqlite::types::Value::Integer(limit as i64));
        page_args.push(rusqlite::types::Value::Integer(offset as i64));
        let mut stmt = conn.prepare(&format!(
            "SELECT {} FROM persons p WHERE {clause} ORDER BY p.created_at DESC, p.id DESC LIMIT ? OFFSET ?",
            PERSON_COLS
                .split(", ")
                .map(|c| format!("p.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))?;
        let rows: Vec<PersonRow> = stmt
            .query_map(params_from_iter(page_args.iter()), person_row)?
            .collect::<rusqlite::Result<_>>()?;
        let ids: Vec<i64> = rows.iter().map(|p| p.id).collect();
        let mut dids = Self::distinct_ids_on(&conn, team, &ids)?;
        let persons = rows
            .into_iter()
            .map(|p| {
                let ids = dids.remove(&p.id).unwrap_or_default();
                p.into_person(ids)
            })
            .collect();
        Ok((persons, count.max(0) as u64))
    }

    fn full_person(&self, team: TeamId, id: i64) -> Result<Option<Person>> {
        let conn = lock(&self.reader);
        let Some(p) = conn
            .prepare_cached(&format!(
                "SELECT {PERSON_COLS} FROM persons WHERE team_id = ?1 AND id = ?2"
            ))?
            .query_row(params![team.0, id], person_row)
            .optional()?
        else {
            return Ok(None);
        };
        let mut dids = Self::distinct_ids_on(&conn, team, &[p.id])?;
        let ids = dids.remove(&p.id).unwrap_or_default();
        Ok(Some(p.into_person(ids)))
    }

    fn overrides(&self, team: TeamId) -> Result<HashMap<String, String>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT old_person_id, override_person_id FROM person_overrides WHERE team_id = ?1",
        )?;
        let rows = stmt.query_map(params![team.0], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn overrides_through(&self, seq: u64) -> Result<Vec<(TeamId, HashMap<String, String>)>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT team_id, old_person_id, override_person_id FROM person_overrides WHERE seq <= ?1 ORDER BY team_id",
        )?;
        // Sequences are stored as SQLite integers: u64::MAX (every override) is i64::MAX.
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![seq], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out: Vec<(TeamId, HashMap<String, String>)> = Vec::new();
        for row in rows {
            let (team, old, new) = row?;
            match out.last_mut() {
                Some((t, m)) if t.0 == team => {
                    m.insert(old, new);
                }
                _ => out.push((TeamId(team), HashMap::from([(old, new)]))),
            }
        }
        Ok(out)
    }

    fn forget_overrides(&self, team: TeamId, folded: &HashMap<String, String>) -> Result<()> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for (old, new) in folded {
            tx.prepare_cached(
                "DELETE FROM person_overrides WHERE team_id = ?1 AND old_person_id = ?2 AND override_person_id = ?3",
            )?
            .execute(params![team.0, old, new])?;
        }
        tx.commit()?;
        drop(conn);
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn activity(
        &self,
        team: TeamId,
        person: Option<i64>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Activity>, u64)> {
        let conn = lock(&self.reader);
        let (clause, args): (&str, Vec<i64>) = match person {
            Some(p) => ("team_id = ? AND person_id = ?", vec![team.0, p]),
            None => ("team_id = ?", vec![team.0]),
        };
        let count: i64 = conn.query_row(
            &format!("SELECT count(*) FROM person_activity WHERE {clause}"),
            params_from_iter(args.iter()),
            |r| r.get(0),
        )?;
        let mut page = args.clone();
        page.push(limit as i64);
        page.push(offset as i64);
        let mut stmt = conn.prepare(&format!(
            "SELECT person_id, person_uuid, activity, actor, detail, at FROM person_activity
             WHERE {clause} ORDER BY at DESC, id DESC LIMIT ? OFFSET ?"
        ))?;
        let rows = stmt.query_map(params_from_iter(page.iter()), |r| {
            Ok(Activity {
                team,
                person_id: r.get(0)?,
                person_uuid: parse_uuid(&r.get::<_, String>(1)?),
                activity: r.get(2)?,
                actor: r.get(3)?,
                detail: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or(Value::Null),
                at: from_micros(r.get(5)?),
            })
        })?;
        Ok((rows.collect::<rusqlite::Result<_>>()?, count.max(0) as u64))
    }

    fn warnings(&self, team: TeamId) -> Result<Vec<WarningRow>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT type, details, at FROM ingestion_warnings WHERE team_id = ?1 ORDER BY at DESC, id DESC",
        )?;
        let rows = stmt.query_map(params![team.0], |r| {
            Ok(WarningRow {
                team_id: team.0,
                source: "hedgerow-ingest".into(),
                kind: r.get(0)?,
                details: serde_json::from_str(&r.get::<_, String>(1)?).unwrap_or(Value::Null),
                timestamp: from_micros(r.get(2)?),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn persons_rows(&self, team: TeamId) -> Result<Vec<(String, i64, String, bool)>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT uuid, created_at, properties, is_identified FROM persons WHERE team_id = ?1",
        )?;
        let rows = stmt.query_map(params![team.0], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn distinct_id_rows(&self, team: TeamId) -> Result<Vec<(String, Uuid)>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT d.distinct_id, p.uuid FROM person_distinct_ids d JOIN persons p ON p.id = d.person_id
             WHERE d.team_id = ?1",
        )?;
        let rows = stmt.query_map(params![team.0], |r| {
            Ok((
                r.get::<_, String>(0)?,
                *parse_uuid(&r.get::<_, String>(1)?).as_uuid(),
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn group_rows(&self, team: TeamId) -> Result<Vec<GroupRow>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT group_type_index, group_key, created_at, updated_at, properties FROM groups WHERE team_id = ?1",
        )?;
        let rows = stmt.query_map(params![team.0], |r| {
            Ok(GroupRow {
                team,
                index: r.get(0)?,
                key: r.get(1)?,
                created_at: from_micros(r.get(2)?),
                updated_at: from_micros(r.get(3)?),
                properties: parse_map(&r.get::<_, String>(4)?),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn pending_tasks(&self) -> Result<Vec<Task>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare(&format!(
            "SELECT {TASK_COLS} FROM deletion_tasks WHERE status = 'queued' ORDER BY id"
        ))?;
        let rows = stmt.query_map([], task_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn finish_task(&self, task: &Task, rows_deleted: u64, at: DateTime<Utc>) -> Result<()> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE deletion_tasks SET status = 'done', finished_at = ?2, rows_deleted = ?3, event_person_ids = '[]', scrub = '[]' WHERE id = ?1",
            params![task.id, micros(at), rows_deleted as i64],
        )?;
        let detail = serde_json::json!({"task_id": task.id, "kind": task.kind, "rows_deleted": rows_deleted});
        tx.execute(
            "INSERT INTO person_activity (team_id, person_id, person_uuid, activity, actor, detail, at)
             VALUES (?1, ?2, ?3, ?4, 'task:deletion', ?5, ?6)",
            params![
                task.team.0,
                task.person_id,
                task.person_uuid.to_string(),
                if task.kind == "events" { "events_deleted" } else { "recordings_deleted" },
                detail.to_string(),
                micros(at)
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn tasks(&self, team: TeamId) -> Result<Vec<Task>> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare(&format!(
            "SELECT {TASK_COLS} FROM deletion_tasks WHERE team_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![team.0], task_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn scrub(&self, team: TeamId, needles: &[String]) -> Result<()> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for n in needles.iter().filter(|n| !n.is_empty()) {
            tx.execute(
                "DELETE FROM ingestion_warnings WHERE team_id = ?1 AND instr(details, ?2) > 0",
                params![team.0, n],
            )?;
            // The query log is the metadata store's table; it may hold a query that named
            // the person.
            tx.execute(
                "DELETE FROM query_log WHERE team_id = ?1 AND (instr(query, ?2) > 0 OR instr(coalesce(error, ''), ?2) > 0)",
                params![team.0, n],
            )?;
        }
        tx.commit()?;
        // Rewrite the database and empty SQLite's own WAL file: no freed page or old page
        // image keeps the deleted bytes.
        conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorKind, HasKind};
    use serde_json::json;

    fn row(id: i64, props: Value, at: i64) -> PersonRow {
        PersonRow {
            id,
            team: TeamId(1),
            uuid: Uuid::from_u128(id as u128).into(),
            created_at: from_micros(at),
            properties: props.as_object().unwrap().clone(),
            is_identified: false,
            version: 0,
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("meta.sqlite")).unwrap();
        s.writer
            .lock()
            .unwrap()
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS query_log (team_id INTEGER, query TEXT, error TEXT)",
            )
            .unwrap();
        (dir, s)
    }

    fn seed(s: &SqliteStore) {
        let mut c = ChangeSet::default();
        let people = [
            (
                1,
                json!({"email": "Alice@Example.com", "age": 31, "plan": "pro"}),
                10,
                "alice",
            ),
            (
                2,
                json!({"email": "bob@example.com", "age": 25, "vip": true}),
                20,
                "bob",
            ),
            (
                3,
                json!({"name": "carol", "age": "40", "nothing": null}),
                30,
                "carol",
            ),
        ];
        for (id, props, at, did) in people {
            c.persons.insert(id, (&row(id, props, at)).into());
            c.ops.push(Op::SetDistinct {
                team: TeamId(1),
                distinct_id: did.into(),
                person_id: id,
            });
        }
        c.ops.push(Op::SetDistinct {
            team: TeamId(1),
            distinct_id: "0190a0e4-7b1c-7000-8000-000000000001".into(),
            person_id: 1,
        });
        s.commit(&c, 7, 4).unwrap();
    }

    fn ids(s: &SqliteStore, f: PersonFilter) -> Vec<i64> {
        s.list(TeamId(1), &f, 100, 0)
            .unwrap()
            .0
            .iter()
            .map(|p| p.id)
            .collect()
    }

    fn props(filters: Value) -> PersonFilter {
        PersonFilter {
            properties: serde_json::from_value(filters).unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn commit_records_the_sequence_and_survives_reopen() {
        let (dir, s) = store();
        seed(&s);
        assert_eq!(s.last_seq(), 7);
        assert_eq!(s.next_person_id().unwrap(), 4);
        drop(s);
        let s = SqliteStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(s.last_seq(), 7);
        assert_eq!(s.person_id_of(TeamId(1), &"bob".into()).unwrap(), Some(2));
        let alice = s.full_person(TeamId(1), 1).unwrap().unwrap();
        assert_eq!(alice.distinct_ids[0], "alice", "non-uuid ids first");
        assert_eq!(alice.distinct_ids.len(), 2);
    }

    #[test]
    fn list_filters_and_order() {
        let (_d, s) = store();
        seed(&s);
        assert_eq!(
            ids(&s, PersonFilter::default()),
            vec![3, 2, 1],
            "newest first"
        );
        let (page, count) = s.list(TeamId(1), &PersonFilter::default(), 1, 1).unwrap();
        assert_eq!((page[0].id, count), (2, 3));
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    distinct_id: Some("bob".into()),
                    ..Default::default()
                }
            ),
            vec![2]
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    email: Some("bob@example.com".into()),
                    ..Default::default()
                }
            ),
            vec![2]
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    email: Some("BOB@example.com".into()),
                    ..Default::default()
                }
            ),
            Vec::<i64>::new()
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    search: Some("ALICE@".into()),
                    ..Default::default()
                }
            ),
            vec![1]
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    search: Some("carol".into()),
                    ..Default::default()
                }
            ),
            vec![3],
            "exact distinct id"
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    search: Some("caro".into()),
                    ..Default::default()
                }
            ),
            Vec::<i64>::new(),
            "distinct ids match exactly"
        );
        assert_eq!(
            ids(
                &s,
                PersonFilter {
                    search: Some(Uuid::from_u128(2).to_string()),
                    ..Default::default()
                }
            ),
            vec![2]
        );
        assert_eq!(
            ids(
                &s,
                props(
                    json!([{"key": "plan", "value": "pro", "operator": "exact", "type": "person"}])
                )
            ),
            vec![1]
        );
        assert_eq!(
            ids(&s, props(json!([{"key": "plan", "value": ["pro", "x"]}]))),
            vec![1]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "plan", "value": "pro", "operator": "is_not"}]))
            ),
            vec![3, 2]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "email", "value": "EXAMPLE", "operator": "icontains"}]))
            ),
            vec![2, 1]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "email", "value": "bob", "operator": "not_icontains"}]))
            ),
            vec![3, 1]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "email", "value": "^b.b@", "operator": "regex"}]))
            ),
            vec![2]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "age", "value": 30, "operator": "gt"}]))
            ),
            vec![3, 1]
        );
        assert_eq!(
            ids(
                &s,
                props(json!([{"key": "age", "value": "30", "operator": "lt"}]))
            ),
            vec![2]
        );
        assert_eq!(
            ids(&s, props(json!([{"key": "vip", "value": true}]))),
            vec![2]
        );
        assert_eq!(
            ids(&s, props(json!([{"key": "nothing", "operator": "is_set"}]))),
            Vec::<i64>::new(),
            "null is not set"
        );
        assert_eq!(
            ids(&s, props(json!([{"key": "vip", "operator": "is_not_set"}]))),
            vec![3, 1]
        );
        assert_eq!(
            ids(
                &s,
                props(
                    json!([{"key": "age", "value": 20, "operator": "gt"}, {"key": "plan", "operator": "is_not_set"}])
                )
            ),
            vec![3, 2]
        );
        for bad in [
            json!([{"key": "a", "value": 1, "operator": "between"}]),
            json!([{"key": "a", "value": "(", "operator": "regex"}]),
            json!([{"key": "a", "value": "x", "operator": "gt"}]),
            json!([{"key": "a", "value": 1, "type": "event"}]),
        ] {
            let e = s.list(TeamId(1), &props(bad.clone()), 10, 0).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
        }
        let e = s
            .list(
                TeamId(1),
                &props(json!([{"key": "a", "value": "(", "operator": "regex"}])),
                10,
                0,
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("property filter on \"a\": bad regular expression: "),
            "{e}"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "the regex error is kept"
        );
    }

    #[test]
    fn overrides_follow_chains_and_deletes_clear_everything() {
        let (_d, s) = store();
        seed(&s);
        let u = |n| PersonUuid::from(Uuid::from_u128(n));
        let mut c = ChangeSet::default();
        c.ops.push(Op::Override {
            team: TeamId(1),
            old: u(10),
            new: u(11),
        });
        c.ops.push(Op::Override {
            team: TeamId(1),
            old: u(11),
            new: u(12),
        });
        s.commit(&c, 8, 4).unwrap();
        let o = s.overrides(TeamId(1)).unwrap();
        assert_eq!(o.get(&u(10).to_string()), Some(&u(12).to_string()));
        assert_eq!(o.get(&u(11).to_string()), Some(&u(12).to_string()));
        // Made at seq 8: not covered through 7, covered through 8 and through "everything".
        assert!(s.overrides_through(7).unwrap().is_empty());
        for seq in [8, u64::MAX] {
            let through = s.overrides_through(seq).unwrap();
            assert_eq!(through.len(), 1, "{seq}");
            assert_eq!(through[0].1, o, "{seq}");
        }
        let mut c = ChangeSet::default();
        c.ops.push(Op::ClearOverride {
            team: TeamId(1),
            old: u(10),
        });
        c.ops.push(Op::DeletePerson {
            team: TeamId(1),
            id: 2,
        });
        s.commit(&c, 9, 4).unwrap();
        assert_eq!(s.overrides(TeamId(1)).unwrap().len(), 1);
        assert!(s.full_person(TeamId(1), 2).unwrap().is_none());
        assert_eq!(s.person_id_of(TeamId(1), &"bob".into()).unwrap(), None);
    }
}
