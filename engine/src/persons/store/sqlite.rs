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

use super::filter::{filter_sql, register_functions};
use super::{
    Activity, ChangeSet, GroupRow, Op, PersonFilter, PersonRow, PersonStore, Result, SnapshotSink,
    Task, WarningRow,
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
    version INTEGER NOT NULL,
    -- The store revision (`persons_state.rev`) that last wrote the row or moved a distinct
    -- id to or from it: what a persons snapshot built at an older revision must read again.
    rev INTEGER NOT NULL DEFAULT 0
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
-- Distinct ids that sent personless events while they had no person (PostHog keeps the
-- same list): an identify adopts those events with an override only for these, not for
-- every distinct id it links. A row goes once its events are adopted.
CREATE TABLE IF NOT EXISTS personless_distinct_ids (
    team_id INTEGER NOT NULL,
    distinct_id TEXT NOT NULL,
    PRIMARY KEY (team_id, distinct_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS groups (
    team_id INTEGER NOT NULL,
    group_type_index INTEGER NOT NULL,
    group_key TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    properties TEXT NOT NULL,
    rev INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, group_type_index, group_key)
);
-- Persons deleted (erased = 1) or merged away (0), by revision: what a persons snapshot
-- built before must drop. Forgotten once a snapshot at a later revision holds the change.
CREATE TABLE IF NOT EXISTS person_removals (
    team_id INTEGER NOT NULL,
    uuid TEXT NOT NULL,
    rev INTEGER NOT NULL,
    erased INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS removals_by_rev ON person_removals (team_id, rev);
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

/// Rewrites the database and empties SQLite's own WAL file, so no freed page or old page
/// image keeps deleted bytes; then no rewrite is pending.
fn rewrite_file(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "VACUUM; PRAGMA wal_checkpoint(TRUNCATE);
         DELETE FROM persons_state WHERE key = 'rewrite_pending';",
    )?;
    Ok(())
}

/// What a store written before persons snapshots lacks (`rev` columns), then their indexes.
fn migrate(conn: &Connection) -> Result<()> {
    for table in ["persons", "groups"] {
        let has: bool = conn
            .prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = 'rev'"
            ))?
            .exists([])?;
        if !has {
            conn.execute_batch(&format!(
                "ALTER TABLE {table} ADD COLUMN rev INTEGER NOT NULL DEFAULT 0"
            ))?;
        }
    }
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS persons_by_rev ON persons (team_id, rev);
         CREATE INDEX IF NOT EXISTS groups_by_rev ON groups (team_id, rev);",
    )?;
    Ok(())
}

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
    /// The last revision a commit with changes wrote (`persons_state.rev`), persisted.
    rev: AtomicU64,
}

/// Column `i` of `r` as text, borrowed.
fn text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str> {
    Ok(r.get_ref(i)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })?)
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
        migrate(&writer)?;
        let reader = open_conn(path)?;
        let state = |key: &str| -> Result<i64> {
            Ok(writer
                .query_row(
                    "SELECT value FROM persons_state WHERE key = ?1",
                    [key],
                    |r| r.get(0),
                )
                .optional()?
                .unwrap_or(0))
        };
        let seq = state("last_seq")?;
        let rev = state("rev")?;
        if state("rewrite_pending")? != 0 {
            // A deletion run stopped between its scrub and the rewrite.
            tracing::info!("rewriting the person store left unrewritten by a deletion run");
            rewrite_file(&writer)?;
        }
        Ok(Self {
            path: path.to_owned(),
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            seq: AtomicU64::new(seq.max(0) as u64),
            version: AtomicU64::new(1),
            rev: AtomicU64::new(rev.max(0) as u64),
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

    /// Writes `changes` as revision `rev`: every person row written, and every person a
    /// distinct id joins or leaves, gets `rev`; removed persons are logged under it.
    fn apply(
        tx: &rusqlite::Transaction<'_>,
        changes: &ChangeSet,
        seq: u64,
        rev: u64,
    ) -> Result<()> {
        let rev = rev as i64;
        let touch = |team: TeamId, id: i64| -> Result<()> {
            tx.prepare_cached("UPDATE persons SET rev = ?3 WHERE team_id = ?1 AND id = ?2")?
                .execute(params![team.0, id, rev])?;
            Ok(())
        };
        let removed = |team: TeamId, id: i64, erased: bool| -> Result<()> {
            tx.prepare_cached(
                "INSERT INTO person_removals (team_id, uuid, rev, erased)
                 SELECT team_id, uuid, ?3, ?4 FROM persons WHERE team_id = ?1 AND id = ?2",
            )?
            .execute(params![team.0, id, rev, erased])?;
            Ok(())
        };
        for op in &changes.ops {
            match op {
                Op::SetDistinct {
                    team,
                    distinct_id,
                    person_id,
                } => {
                    let before: Option<i64> = tx
                        .prepare_cached(
                            "SELECT person_id FROM person_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
                        )?
                        .query_row(params![team.0, distinct_id.as_str()], |r| r.get(0))
                        .optional()?;
                    if let Some(before) = before.filter(|b| b != person_id) {
                        touch(*team, before)?;
                    }
                    touch(*team, *person_id)?;
                    tx.prepare_cached(
                        "INSERT INTO person_distinct_ids (team_id, distinct_id, person_id) VALUES (?1, ?2, ?3)
                         ON CONFLICT (team_id, distinct_id) DO UPDATE SET person_id = excluded.person_id",
                    )?
                    .execute(params![team.0, distinct_id.as_str(), person_id])?;
                }
                Op::DeletePerson { team, id } => {
                    removed(*team, *id, true)?;
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
                    removed(*team, *from, false)?;
                    touch(*team, *to)?;
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
                Op::Personless { team, distinct_id } => {
                    tx.prepare_cached(
                        "INSERT OR IGNORE INTO personless_distinct_ids (team_id, distinct_id) VALUES (?1, ?2)",
                    )?
                    .execute(params![team.0, distinct_id.as_str()])?;
                }
                Op::Adopted { team, distinct_id } => {
                    tx.prepare_cached(
                        "DELETE FROM personless_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
                    )?
                    .execute(params![team.0, distinct_id.as_str()])?;
                }
                Op::ClearOverride { team, old } => {
                    tx.prepare_cached(
                        "DELETE FROM person_overrides WHERE team_id = ?1 AND old_person_id = ?2",
                    )?
                    .execute(params![team.0, old.to_string()])?;
                }
                Op::Group(g) => {
                    tx.prepare_cached(
                        "INSERT INTO groups (team_id, group_type_index, group_key, created_at, updated_at, properties, rev)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (team_id, group_type_index, group_key) DO UPDATE SET
                           updated_at = excluded.updated_at, properties = excluded.properties,
                           created_at = excluded.created_at, rev = excluded.rev",
                    )?
                    .execute(params![
                        g.team.0,
                        g.index,
                        g.key,
                        micros(g.created_at),
                        micros(g.updated_at),
                        Value::Object(g.properties.clone()).to_string(),
                        rev
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
                "INSERT INTO persons (id, team_id, uuid, created_at, properties, is_identified, version, rev)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at,
                   properties = excluded.properties, is_identified = excluded.is_identified,
                   version = excluded.version, rev = excluded.rev",
            )?
            .execute(params![
                p.id,
                p.team.0,
                p.uuid.to_string(),
                micros(p.created_at),
                &*p.properties,
                p.is_identified,
                p.version,
                rev
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
        // Only the pipeline commits (one writer), so the counter is read and set here alone.
        let rev = self.rev.load(Ordering::Acquire) + u64::from(!changes.is_empty());
        Self::apply(&tx, changes, seq, rev)?;
        tx.prepare_cached(
            "INSERT INTO persons_state (key, value) VALUES ('last_seq', ?1), ('next_person_id', ?2), ('rev', ?3)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![seq as i64, next_person_id, rev as i64])?;
        tx.commit()?;
        self.seq.store(seq, Ordering::Release);
        self.rev.store(rev, Ordering::Release);
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

    fn was_personless(&self, team: TeamId, distinct_id: &DistinctId) -> Result<bool> {
        let conn = lock(&self.writer);
        Ok(conn
            .prepare_cached(
                "SELECT 1 FROM personless_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
            )?
            .exists(params![team.0, distinct_id.as_str()])?)
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

    fn snapshot_changes(
        &self,
        team: TeamId,
        since: Option<u64>,
        sink: &mut dyn SnapshotSink,
    ) -> Result<u64> {
        let mut conn = lock(&self.reader);
        // One read transaction: every row and the revision as of one commit.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
        let rev: i64 = tx
            .query_row(
                "SELECT value FROM persons_state WHERE key = 'rev'",
                [],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0);
        // Everything is newer than -1 (rows of a store older than revisions have rev 0).
        let after = since.map_or(-1, |s| s as i64);
        {
            let mut stmt = tx.prepare_cached(
                "SELECT uuid, created_at, properties, is_identified FROM persons
                 WHERE team_id = ?1 AND rev > ?2",
            )?;
            let mut rows = stmt.query(params![team.0, after])?;
            while let Some(r) = rows.next()? {
                let uuid = text(r, 0)?;
                sink.person(uuid, r.get(1)?, text(r, 2)?, r.get(3)?)?;
                if since.is_some() {
                    sink.changed_person(uuid, false);
                }
            }
        }
        {
            let mut stmt = tx.prepare_cached(
                "SELECT d.distinct_id, p.uuid FROM persons p
                 JOIN person_distinct_ids d ON d.person_id = p.id
                 WHERE p.team_id = ?1 AND p.rev > ?2",
            )?;
            let mut rows = stmt.query(params![team.0, after])?;
            while let Some(r) = rows.next()? {
                sink.distinct_id(text(r, 0)?, text(r, 1)?)?;
            }
        }
        {
            let mut stmt = tx.prepare_cached(
                "SELECT group_type_index, group_key, created_at, updated_at, properties FROM groups
                 WHERE team_id = ?1 AND group_key IN
                   (SELECT group_key FROM groups WHERE team_id = ?1 AND rev > ?2)",
            )?;
            let mut rows = stmt.query(params![team.0, after])?;
            while let Some(r) = rows.next()? {
                let key = text(r, 1)?;
                sink.group(r.get(0)?, key, r.get(2)?, r.get(3)?, text(r, 4)?)?;
                if since.is_some() {
                    sink.changed_group(key);
                }
            }
        }
        if since.is_some() {
            let mut stmt = tx.prepare_cached(
                "SELECT uuid, erased FROM person_removals WHERE team_id = ?1 AND rev > ?2",
            )?;
            let mut rows = stmt.query(params![team.0, after])?;
            while let Some(r) = rows.next()? {
                sink.changed_person(text(r, 0)?, r.get(1)?);
            }
        }
        tx.commit()?;
        Ok(rev.max(0) as u64)
    }

    fn forget_removals(&self, team: TeamId, through: u64) -> Result<()> {
        let conn = lock(&self.writer);
        conn.prepare_cached("DELETE FROM person_removals WHERE team_id = ?1 AND rev <= ?2")?
            .execute(params![team.0, through as i64])?;
        Ok(())
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
                "DELETE FROM personless_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
                params![team.0, n],
            )?;
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
        tx.execute(
            "INSERT INTO persons_state (key, value) VALUES ('rewrite_pending', 1)
             ON CONFLICT (key) DO UPDATE SET value = 1",
            [],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn rewrite_file(&self) -> Result<()> {
        let conn = lock(&self.writer);
        rewrite_file(&conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorKind, HasKind};
    use serde_json::json;
    use uuid::Uuid;

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

    #[test]
    fn personless_ids_are_recorded_adopted_and_erased() {
        let (_d, s) = store();
        let t = TeamId(1);
        let note = |did: &str| Op::Personless {
            team: t,
            distinct_id: did.into(),
        };
        let mut c = ChangeSet::default();
        c.ops.extend([note("a"), note("a"), note("b"), note("c")]);
        s.commit(&c, 1, 1).unwrap();
        let was = |did: &str| s.was_personless(t, &did.into()).unwrap();
        assert!(was("a") && was("b") && was("c") && !was("d"));
        assert!(!s.was_personless(TeamId(2), &"a".into()).unwrap());
        let mut c = ChangeSet::default();
        c.ops.push(Op::Adopted {
            team: t,
            distinct_id: "a".into(),
        });
        s.commit(&c, 2, 1).unwrap();
        assert!(!was("a") && was("b"));
        // Erasure forgets a personless id with everything else that names it.
        s.scrub(t, &["b".to_string()]).unwrap();
        assert!(!was("b") && was("c"));
        // The scrub left the file to rewrite; a store opened before the rewrite does it.
        let pending = |s: &SqliteStore| -> bool {
            s.writer
                .lock()
                .unwrap()
                .query_row(
                    "SELECT count(*) FROM persons_state WHERE key = 'rewrite_pending'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
                > 0
        };
        assert!(pending(&s));
        let reopened = SqliteStore::open(&s.path).unwrap();
        assert!(!pending(&reopened));
        s.scrub(t, &["c".to_string()]).unwrap();
        s.rewrite_file().unwrap();
        assert!(!pending(&s));
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

    struct Collect(Vec<String>);
    impl SnapshotSink for Collect {
        fn person(&mut self, uuid: &str, _: i64, props: &str, _: bool) -> Result<()> {
            self.0.push(format!("person {uuid} {props}"));
            Ok(())
        }
        fn distinct_id(&mut self, d: &str, p: &str) -> Result<()> {
            self.0.push(format!("did {d} {p}"));
            Ok(())
        }
        fn group(&mut self, i: i64, k: &str, _: i64, _: i64, _: &str) -> Result<()> {
            self.0.push(format!("group {i} {k}"));
            Ok(())
        }
        fn changed_person(&mut self, uuid: &str, erased: bool) {
            self.0.push(format!("changed {uuid} {erased}"));
        }
        fn changed_group(&mut self, key: &str) {
            self.0.push(format!("changed group {key}"));
        }
    }

    /// A store written before snapshots (no `rev` columns) opens, reads whole, and gives
    /// the changes of later commits.
    #[test]
    fn a_store_without_revisions_opens_and_reports_changes() {
        let (dir, s) = store();
        seed(&s);
        drop(s);
        let path = dir.path().join("meta.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP INDEX persons_by_rev; DROP INDEX groups_by_rev;
             ALTER TABLE persons DROP COLUMN rev; ALTER TABLE groups DROP COLUMN rev;
             DELETE FROM persons_state WHERE key = 'rev';",
        )
        .unwrap();
        drop(conn);
        let s = SqliteStore::open(&path).unwrap();
        let mut all = Collect(vec![]);
        let rev = s.snapshot_changes(TeamId(1), None, &mut all).unwrap();
        assert_eq!(rev, 0);
        assert_eq!(all.0.iter().filter(|l| l.starts_with("person ")).count(), 3);
        assert_eq!(all.0.iter().filter(|l| l.starts_with("did ")).count(), 4);
        let mut c = ChangeSet::default();
        c.ops.push(Op::MergePerson {
            team: TeamId(1),
            from: 2,
            to: 1,
        });
        s.commit(&c, 8, 4).unwrap();
        let mut since = Collect(vec![]);
        assert_eq!(
            s.snapshot_changes(TeamId(1), Some(rev), &mut since)
                .unwrap(),
            1
        );
        let (u1, u2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut got = since.0.clone();
        got.sort();
        assert_eq!(
            got,
            vec![
                format!("changed {u1} false"),
                format!("changed {u2} false"),
                format!("did 0190a0e4-7b1c-7000-8000-000000000001 {u1}"),
                format!("did alice {u1}"),
                format!("did bob {u1}"),
                format!(
                    "person {u1} {{\"age\":31,\"email\":\"Alice@Example.com\",\"plan\":\"pro\"}}"
                ),
            ]
        );
        s.forget_removals(TeamId(1), 1).unwrap();
        let mut after = Collect(vec![]);
        s.snapshot_changes(TeamId(1), Some(rev), &mut after)
            .unwrap();
        assert!(
            !after.0.iter().any(|l| l.contains(&u2.to_string())),
            "{:?}",
            after.0
        );
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
