//! The person store: persons, distinct ids, person-id overrides, groups, ingestion warnings,
//! the person activity log and deletion tasks.
//!
//! [`PersonStore`] is what the processor and the API need; [`SqliteStore`] implements it in
//! the data directory's SQLite file (a PostgreSQL store can implement it later). A commit
//! writes a batch of changes and the last WAL sequence they cover in one transaction, so a
//! replay after a crash starts right after what is stored and applies nothing twice.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::Person;
use crate::error::{ErrorKind, HasKind};
use crate::model::TeamId;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("person store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Invalid(String),
}

impl HasKind for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Sqlite(_) => ErrorKind::Internal,
            StoreError::Invalid(_) => ErrorKind::InvalidInput,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A person's stored row (distinct ids live in their own table).
#[derive(Debug, Clone, PartialEq)]
pub struct PersonRow {
    pub id: i64,
    pub team: TeamId,
    pub uuid: Uuid,
    pub created_at: DateTime<Utc>,
    pub properties: Map<String, Value>,
    pub is_identified: bool,
    pub version: i64,
}

impl PersonRow {
    /// The person as the API shows it, with its distinct ids.
    pub fn into_person(self, distinct_ids: Vec<String>) -> Person {
        Person {
            id: self.id,
            team: self.team,
            uuid: self.uuid,
            created_at: self.created_at,
            properties: self.properties,
            is_identified: self.is_identified,
            distinct_ids,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRow {
    pub team: TeamId,
    pub index: u8,
    pub key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub properties: Map<String, Value>,
}

/// One change, applied in order inside a commit (person rows are written last, in their
/// final state).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    SetDistinct {
        team: TeamId,
        distinct_id: String,
        person_id: i64,
    },
    /// Deletes the person, its distinct ids, and its activity entries (they may hold
    /// property values).
    DeletePerson {
        team: TeamId,
        id: i64,
    },
    /// `from` was merged into `to`: its distinct ids and activity move, its row goes.
    MergePerson {
        team: TeamId,
        from: i64,
        to: i64,
    },
    /// Events stored under `old` answer as `new` from now on (chains are followed).
    Override {
        team: TeamId,
        old: Uuid,
        new: Uuid,
    },
    /// A new person took the uuid `old`: its events are its own again.
    ClearOverride {
        team: TeamId,
        old: Uuid,
    },
    Group(GroupRow),
    Warning {
        team: TeamId,
        kind: String,
        details: Value,
        at: DateTime<Utc>,
    },
    Activity(Activity),
    Task(NewTask),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activity {
    #[serde(skip)]
    pub team: TeamId,
    pub person_id: i64,
    pub person_uuid: Uuid,
    /// created, updated, merged, split, deleted, events_deletion_queued,
    /// recordings_deletion_queued, events_deleted.
    pub activity: String,
    /// Who did it: `api:<key label>` or `event:<event name>`.
    pub actor: String,
    pub detail: Value,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub team: TeamId,
    /// `events` or `recordings`.
    pub kind: String,
    pub person_id: i64,
    pub person_uuid: Uuid,
    /// Every person_id the person's events may carry (its uuid, merged persons' uuids, the
    /// personless ids of its distinct ids).
    pub event_person_ids: Vec<String>,
    /// The person's distinct ids and text property values, kept only until the task ran:
    /// the run removes them from warnings and the query log.
    pub scrub: Vec<String>,
    pub actor: String,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub id: i64,
    #[serde(skip)]
    pub team: TeamId,
    pub kind: String,
    pub person_id: i64,
    pub person_uuid: Uuid,
    #[serde(skip)]
    pub event_person_ids: Vec<String>,
    #[serde(skip)]
    pub scrub: Vec<String>,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub rows_deleted: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WarningRow {
    pub team_id: i64,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub details: Value,
    pub timestamp: DateTime<Utc>,
}

/// A changed person as a commit writes it (properties already JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct PersonWrite {
    pub id: i64,
    pub team: TeamId,
    pub uuid: Uuid,
    pub created_at: DateTime<Utc>,
    pub properties: std::sync::Arc<str>,
    pub is_identified: bool,
    pub version: i64,
}

impl From<&PersonRow> for PersonWrite {
    fn from(p: &PersonRow) -> Self {
        Self {
            id: p.id,
            team: p.team,
            uuid: p.uuid,
            created_at: p.created_at,
            properties: Value::Object(p.properties.clone()).to_string().into(),
            is_identified: p.is_identified,
            version: p.version,
        }
    }
}

/// What a commit writes.
#[derive(Debug, Default, Clone)]
pub struct ChangeSet {
    pub persons: BTreeMap<i64, PersonWrite>,
    pub ops: Vec<Op>,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        self.persons.is_empty() && self.ops.is_empty()
    }
}

/// A person-property filter of the persons list (`{key, value, operator, type}`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct PropertyFilter {
    pub key: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default = "default_operator")]
    pub operator: String,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

fn default_operator() -> String {
    "exact".into()
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersonFilter {
    pub distinct_id: Option<String>,
    pub email: Option<String>,
    pub search: Option<String>,
    pub properties: Vec<PropertyFilter>,
}

pub trait PersonStore: Send + Sync {
    /// The last WAL sequence whose person changes are stored.
    fn last_seq(&self) -> u64;
    /// Bumped by every commit (readers cache on it).
    fn version(&self) -> u64;
    fn commit(&self, changes: &ChangeSet, seq: u64, next_person_id: i64) -> Result<()>;
    fn next_person_id(&self) -> Result<i64>;

    fn person_id_of(&self, team: TeamId, distinct_id: &str) -> Result<Option<i64>>;
    fn person(&self, team: TeamId, id: i64) -> Result<Option<PersonRow>>;
    fn person_by_uuid(&self, team: TeamId, uuid: Uuid) -> Result<Option<PersonRow>>;
    fn distinct_ids(&self, team: TeamId, id: i64) -> Result<Vec<String>>;
    /// Persons whose events were merged into `uuid` (the overrides pointing at it).
    fn merged_into(&self, team: TeamId, uuid: Uuid) -> Result<Vec<Uuid>>;
    fn group(&self, team: TeamId, index: u8, key: &str) -> Result<Option<GroupRow>>;

    fn list(
        &self,
        team: TeamId,
        filter: &PersonFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Person>, u64)>;
    fn full_person(&self, team: TeamId, id: i64) -> Result<Option<Person>>;
    /// Old person_id → current one, for the team.
    fn overrides(&self, team: TeamId) -> Result<HashMap<String, String>>;
    /// Projects with overrides made at or before WAL seq `seq`, and those overrides: what
    /// can be folded into the files once the table covers `seq`.
    fn overrides_through(&self, seq: u64) -> Result<Vec<(TeamId, HashMap<String, String>)>>;
    /// Forgets overrides that were folded into the files (only those still mapping as given).
    fn forget_overrides(&self, team: TeamId, folded: &HashMap<String, String>) -> Result<()>;
    fn activity(
        &self,
        team: TeamId,
        person: Option<i64>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Activity>, u64)>;
    fn warnings(&self, team: TeamId) -> Result<Vec<WarningRow>>;
    /// The project's persons as the `persons` table shows them: (uuid, created_at in
    /// microseconds, properties JSON text, is_identified).
    fn persons_rows(&self, team: TeamId) -> Result<Vec<(String, i64, String, bool)>>;
    fn distinct_id_rows(&self, team: TeamId) -> Result<Vec<(String, Uuid)>>;
    fn group_rows(&self, team: TeamId) -> Result<Vec<GroupRow>>;

    fn pending_tasks(&self) -> Result<Vec<Task>>;
    /// Marks a task done, forgets its person ids, and logs the outcome.
    fn finish_task(&self, task: &Task, rows_deleted: u64, at: DateTime<Utc>) -> Result<()>;
    fn tasks(&self, team: TeamId) -> Result<Vec<Task>>;
    /// Removes every trace of these distinct ids from warnings and the query log, then
    /// rewrites the file so no deleted byte remains in it.
    fn scrub(&self, team: TeamId, needles: &[String]) -> Result<()>;
}

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

fn parse_uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap_or_default()
}

/// A property's value as PostHog's filters read it: strings as they are, other scalars as
/// JSON text, JSON null as absent.
fn property_text(props: &str, key: &str) -> Option<String> {
    let v: Value = serde_json::from_str(props).ok()?;
    match v.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("hr_prop", 2, flags, |ctx| {
        let props: Option<String> = ctx.get(0)?;
        let key: String = ctx.get(1)?;
        Ok(props.and_then(|p| property_text(&p, &key)))
    })?;
    conn.create_scalar_function("hr_regex", 2, flags, |ctx| {
        let text: Option<String> = ctx.get(0)?;
        let pattern: String = ctx.get(1)?;
        let re = regex::Regex::new(&pattern)
            .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))?;
        Ok(text.map(|t| re.is_match(&t)))
    })?;
    conn.create_scalar_function("hr_icontains", 2, flags, |ctx| {
        let text: Option<String> = ctx.get(0)?;
        let needle: String = ctx.get(1)?;
        Ok(text.map(|t| t.to_lowercase().contains(&needle.to_lowercase())))
    })?;
    Ok(())
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

fn json_path(key: &str) -> Result<String> {
    if key.contains('"') {
        return Err(StoreError::Invalid(format!(
            "property filter key {key:?} contains a double quote, which is not supported"
        )));
    }
    Ok(format!("$.\"{key}\""))
}

/// The WHERE clause (over `persons p`) and its parameters for a persons filter.
fn filter_sql(team: TeamId, f: &PersonFilter) -> Result<(String, Vec<rusqlite::types::Value>)> {
    use rusqlite::types::Value as V;
    let mut sql = String::from("p.team_id = ?");
    let mut args = vec![V::Integer(team.0)];
    if let Some(d) = &f.distinct_id {
        sql.push_str(" AND EXISTS (SELECT 1 FROM person_distinct_ids d WHERE d.team_id = p.team_id AND d.person_id = p.id AND d.distinct_id = ?)");
        args.push(V::Text(d.clone()));
    }
    if let Some(e) = &f.email {
        sql.push_str(" AND hr_prop(p.properties, 'email') = ?");
        args.push(V::Text(e.clone()));
    }
    if let Some(s) = f.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        sql.push_str(" AND (hr_icontains(hr_prop(p.properties, 'email'), ?) OR p.uuid = ? OR EXISTS (SELECT 1 FROM person_distinct_ids d WHERE d.team_id = p.team_id AND d.person_id = p.id AND d.distinct_id = ?))");
        args.push(V::Text(s.to_owned()));
        args.push(V::Text(s.to_lowercase()));
        args.push(V::Text(s.to_owned()));
    }
    for pf in &f.properties {
        if let Some(k) = pf.kind.as_deref()
            && k != "person"
        {
            return Err(StoreError::Invalid(format!(
                "property filter type {k:?} is not supported here; persons are filtered by type \"person\""
            )));
        }
        json_path(&pf.key)?;
        let prop = "hr_prop(p.properties, ?)";
        args.push(V::Text(pf.key.clone()));
        let values: Vec<String> = match &pf.value {
            Value::Array(a) => a.iter().filter_map(value_text).collect(),
            v => value_text(v).into_iter().collect(),
        };
        let one = |args: &mut Vec<V>| -> Result<()> {
            let v = values.first().cloned().ok_or_else(|| {
                StoreError::Invalid(format!(
                    "property filter on {:?} with operator {} needs a value",
                    pf.key, pf.operator
                ))
            })?;
            args.push(V::Text(v));
            Ok(())
        };
        let num = |args: &mut Vec<V>| -> Result<()> {
            let v = values
                .first()
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "property filter on {:?} with operator {} needs a numeric value",
                        pf.key, pf.operator
                    ))
                })?;
            args.push(V::Real(v));
            Ok(())
        };
        let placeholders = |n: usize| vec!["?"; n].join(", ");
        let clause = match pf.operator.as_str() {
            "exact" => {
                if values.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "property filter on {:?} needs a value",
                        pf.key
                    )));
                }
                let c = format!("{prop} IN ({})", placeholders(values.len()));
                args.extend(values.iter().cloned().map(V::Text));
                c
            }
            "is_not" => {
                if values.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "property filter on {:?} needs a value",
                        pf.key
                    )));
                }
                let c = format!(
                    "coalesce({prop} NOT IN ({}), 1)",
                    placeholders(values.len())
                );
                args.extend(values.iter().cloned().map(V::Text));
                c
            }
            "icontains" => {
                one(&mut args)?;
                format!("coalesce(hr_icontains({prop}, ?), 0)")
            }
            "not_icontains" => {
                one(&mut args)?;
                format!("coalesce(NOT hr_icontains({prop}, ?), 1)")
            }
            "regex" | "not_regex" => {
                let v = values.first().cloned().unwrap_or_default();
                if let Err(e) = regex::Regex::new(&v) {
                    return Err(StoreError::Invalid(format!(
                        "property filter on {:?}: bad regular expression: {e}",
                        pf.key
                    )));
                }
                args.push(V::Text(v));
                if pf.operator == "regex" {
                    format!("coalesce(hr_regex({prop}, ?), 0)")
                } else {
                    format!("coalesce(NOT hr_regex({prop}, ?), 1)")
                }
            }
            op @ ("gt" | "lt" | "gte" | "lte") => {
                num(&mut args)?;
                let sym = match op {
                    "gt" => ">",
                    "lt" => "<",
                    "gte" => ">=",
                    _ => "<=",
                };
                format!("CAST({prop} AS REAL) {sym} ?")
            }
            "is_set" => format!("{prop} IS NOT NULL"),
            "is_not_set" => format!("{prop} IS NULL"),
            other => {
                return Err(StoreError::Invalid(format!(
                    "property filter operator {other:?} is not supported; use exact, is_not, icontains, not_icontains, regex, not_regex, gt, gte, lt, lte, is_set or is_not_set"
                )));
            }
        };
        sql.push_str(" AND ");
        sql.push_str(&clause);
    }
    Ok((sql, args))
}

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
    ) -> Result<HashMap<i64, Vec<String>>> {
        let mut out: HashMap<i64, Vec<String>> = HashMap::new();
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
                out.entry(p).or_default().push(d);
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
                    .execute(params![team.0, distinct_id, person_id])?;
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

    fn person_id_of(&self, team: TeamId, distinct_id: &str) -> Result<Option<i64>> {
        let conn = lock(&self.writer);
        Ok(conn
            .prepare_cached(
                "SELECT person_id FROM person_distinct_ids WHERE team_id = ?1 AND distinct_id = ?2",
            )?
            .query_row(params![team.0, distinct_id], |r| r.get(0))
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

    fn person_by_uuid(&self, team: TeamId, uuid: Uuid) -> Result<Option<PersonRow>> {
        let conn = lock(&self.reader);
        Ok(conn
            .prepare_cached(&format!(
                "SELECT {PERSON_COLS} FROM persons WHERE team_id = ?1 AND uuid = ?2"
            ))?
            .query_row(params![team.0, uuid.to_string()], person_row)
            .optional()?)
    }

    fn distinct_ids(&self, team: TeamId, id: i64) -> Result<Vec<String>> {
        let conn = lock(&self.writer);
        Ok(Self::distinct_ids_on(&conn, team, &[id])?
            .remove(&id)
            .unwrap_or_default())
    }

    fn merged_into(&self, team: TeamId, uuid: Uuid) -> Result<Vec<Uuid>> {
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
        let rows = stmt.query_map(params![seq as i64], |r| {
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
            Ok((r.get::<_, String>(0)?, parse_uuid(&r.get::<_, String>(1)?)))
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
    use serde_json::json;

    fn row(id: i64, props: Value, at: i64) -> PersonRow {
        PersonRow {
            id,
            team: TeamId(1),
            uuid: Uuid::from_u128(id as u128),
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
        assert_eq!(s.person_id_of(TeamId(1), "bob").unwrap(), Some(2));
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
            assert!(matches!(e, StoreError::Invalid(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn overrides_follow_chains_and_deletes_clear_everything() {
        let (_d, s) = store();
        seed(&s);
        let u = Uuid::from_u128;
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
        assert_eq!(s.person_id_of(TeamId(1), "bob").unwrap(), None);
    }
}
