//! Projects and personal API keys, kept in SQLite in the data directory.
//!
//! Owns the `projects` and `personal_api_keys` tables. Personal keys are stored as SHA-256
//! hashes (they are 256-bit random secrets, so a fast hash is enough); the secret itself is
//! shown once, when it is made. Persons live elsewhere (`persons`), in their own tables.

use std::path::Path;
use std::sync::Mutex;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::{ErrorKind, HasKind};
use crate::ingest::TeamId;

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("metadata store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
}

impl HasKind for MetaError {
    fn kind(&self) -> ErrorKind {
        match self {
            MetaError::Sqlite(_) => ErrorKind::Internal,
            MetaError::Invalid(_) => ErrorKind::InvalidInput,
            MetaError::Conflict(_) => ErrorKind::Conflict,
        }
    }
}

pub type Result<T, E = MetaError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Project {
    pub id: TeamId,
    pub uuid: Uuid,
    pub name: String,
    pub api_token: String,
    pub timezone: String,
    pub created_at: DateTime<Utc>,
}

/// Scopes PostHog's personal API keys use. `*` grants all; `x:write` implies `x:read`.
pub const KNOWN_SCOPES: &[&str] = &[
    "*",
    "project:read",
    "project:write",
    "person:read",
    "person:write",
    "query:read",
    "activity_log:read",
    "cohort:read",
];

/// What a personal API key may do.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyGrant {
    pub key_id: i64,
    pub label: String,
    pub scopes: Vec<String>,
    /// `None`: every project.
    pub projects: Option<Vec<TeamId>>,
}

impl KeyGrant {
    pub fn allows(&self, scope: &str) -> bool {
        let (object, action) = scope.split_once(':').unwrap_or((scope, ""));
        self.scopes.iter().any(|s| {
            s == "*"
                || s == scope
                || (action == "read" && s.split_once(':') == Some((object, "write")))
        })
    }

    pub fn sees(&self, team: TeamId) -> bool {
        self.projects.as_ref().is_none_or(|p| p.contains(&team))
    }
}

/// What the first start made, for the binary to print once.
#[derive(Debug, Default)]
pub struct Bootstrap {
    pub created_project: Option<Project>,
    pub created_personal_key: Option<String>,
}

/// A project has at most this many group types (`$group_0..4`).
pub const MAX_GROUP_TYPES: u8 = 5;

pub struct MetaStore {
    conn: Mutex<Connection>,
    /// Group type → index, per project. Mappings never change once made, so a hit is final.
    group_types: Mutex<std::collections::HashMap<(TeamId, String), Option<u8>>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    api_token TEXT NOT NULL UNIQUE,
    timezone TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS group_types (
    team_id INTEGER NOT NULL,
    group_type TEXT NOT NULL,
    idx INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (team_id, group_type),
    UNIQUE (team_id, idx)
);
CREATE TABLE IF NOT EXISTS query_log (
    query_id TEXT NOT NULL,
    team_id INTEGER NOT NULL,
    name TEXT,
    query TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    is_cached INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_ms REAL,
    result_rows INTEGER,
    read_bytes INTEGER,
    timings TEXT,
    PRIMARY KEY (team_id, query_id, started_at)
);
CREATE INDEX IF NOT EXISTS query_log_started ON query_log (team_id, started_at);
CREATE TABLE IF NOT EXISTS personal_api_keys (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    mask TEXT NOT NULL,
    scopes TEXT NOT NULL,
    projects TEXT,
    created_at TEXT NOT NULL
);
";

fn random_token(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let body: String = (0..43)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{body}")
}

fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: String) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

pub fn validate_timezone(tz: &str) -> Result<()> {
    tz.parse::<chrono_tz::Tz>()
        .map(|_| ())
        .map_err(|_| MetaError::Invalid(format!("'{tz}' is not an IANA time zone name")))
}

pub fn validate_project_token(token: &str) -> Result<()> {
    crate::ingest::payload::check_token(token).map_err(|e| MetaError::Invalid(e.to_string()))
}

impl MetaStore {
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self {
            conn: Mutex::new(conn),
            group_types: Mutex::new(Default::default()),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes sure project 1 and an all-scopes personal key exist. Given keys are used as
    /// they are (a fixed project token replaces project 1's); otherwise fresh ones are made.
    pub fn bootstrap(
        &self,
        project_token: Option<&str>,
        personal_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Bootstrap> {
        let mut out = Bootstrap::default();
        if let Some(t) = project_token {
            validate_project_token(t)?;
        }
        if let Some(k) = personal_key
            && !k.starts_with("phx_")
        {
            return Err(MetaError::Invalid(
                "a personal API key must start with phx_".into(),
            ));
        }
        match self.project(TeamId(1))? {
            None => {
                let token = project_token
                    .map(str::to_owned)
                    .unwrap_or_else(|| random_token("phc_"));
                let p = self.insert_project(Some(1), "Default project", &token, "UTC", now)?;
                out.created_project = Some(p);
            }
            Some(p) => {
                if let Some(t) = project_token
                    && p.api_token != t
                {
                    self.conn().execute(
                        "UPDATE projects SET api_token = ?1 WHERE id = 1",
                        params![t],
                    )?;
                }
            }
        }
        match personal_key {
            Some(k) => {
                if self.key_grant(k)?.is_none() {
                    self.insert_key("bootstrap (fixed)", k, &["*".to_owned()], None, now)?;
                }
            }
            None => {
                let n: i64 =
                    self.conn()
                        .query_row("SELECT count(*) FROM personal_api_keys", [], |r| r.get(0))?;
                if n == 0 {
                    let k = random_token("phx_");
                    self.insert_key("bootstrap", &k, &["*".to_owned()], None, now)?;
                    out.created_personal_key = Some(k);
                }
            }
        }
        Ok(out)
    }

    fn insert_project(
        &self,
        id: Option<i64>,
        name: &str,
        token: &str,
        timezone: &str,
        now: DateTime<Utc>,
    ) -> Result<Project> {
        validate_timezone(timezone)?;
        let uuid = Uuid::now_v7();
        let conn = self.conn();
        let res = conn.execute(
            "INSERT INTO projects (id, uuid, name, api_token, timezone, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, uuid.to_string(), name, token, timezone, ts(now)],
        );
        match res {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                return Err(MetaError::Conflict(
                    "a project with this id or API token exists already".into(),
                ));
            }
            r => r?,
        };
        Ok(Project {
            id: TeamId(conn.last_insert_rowid()),
            uuid,
            name: name.to_owned(),
            api_token: token.to_owned(),
            timezone: timezone.to_owned(),
            created_at: parse_ts(ts(now)),
        })
    }

    pub fn create_project(
        &self,
        name: &str,
        timezone: &str,
        now: DateTime<Utc>,
    ) -> Result<Project> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(MetaError::Invalid(
                "name must be 1 to 200 characters".into(),
            ));
        }
        self.insert_project(None, name, &random_token("phc_"), timezone, now)
    }

    fn row_to_project(r: &rusqlite::Row<'_>) -> rusqlite::Result<Project> {
        Ok(Project {
            id: TeamId(r.get(0)?),
            uuid: r.get::<_, String>(1)?.parse().unwrap_or_default(),
            name: r.get(2)?,
            api_token: r.get(3)?,
            timezone: r.get(4)?,
            created_at: parse_ts(r.get(5)?),
        })
    }

    /// Changes a project's time zone (an IANA name).
    pub fn set_project_timezone(&self, id: TeamId, tz: &str) -> Result<()> {
        validate_timezone(tz)?;
        self.conn().execute(
            "UPDATE projects SET timezone = ?1 WHERE id = ?2",
            rusqlite::params![tz, id.0],
        )?;
        Ok(())
    }

    pub fn project(&self, id: TeamId) -> Result<Option<Project>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, uuid, name, api_token, timezone, created_at FROM projects WHERE id = ?1",
                params![id.0],
                Self::row_to_project,
            )
            .optional()?)
    }

    pub fn project_by_token(&self, token: &str) -> Result<Option<Project>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, uuid, name, api_token, timezone, created_at FROM projects WHERE api_token = ?1",
                params![token],
                Self::row_to_project,
            )
            .optional()?)
    }

    pub fn projects(&self) -> Result<Vec<Project>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, uuid, name, api_token, timezone, created_at FROM projects ORDER BY id",
        )?;
        let rows = stmt.query_map([], Self::row_to_project)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn insert_key(
        &self,
        label: &str,
        secret: &str,
        scopes: &[String],
        projects: Option<&[TeamId]>,
        now: DateTime<Utc>,
    ) -> Result<KeyGrant> {
        for s in scopes {
            if !KNOWN_SCOPES.contains(&s.as_str()) {
                return Err(MetaError::Invalid(format!(
                    "unknown scope '{s}'; known scopes: {}",
                    KNOWN_SCOPES.join(", ")
                )));
            }
        }
        if scopes.is_empty() {
            return Err(MetaError::Invalid("a key needs at least one scope".into()));
        }
        let projects_json = projects.map(|p| {
            serde_json::to_string(&p.iter().map(|t| t.0).collect::<Vec<_>>()).unwrap_or_default()
        });
        let mask = format!(
            "{}...{}",
            &secret[..secret.len().min(4)],
            &secret[secret.len().saturating_sub(4)..]
        );
        let conn = self.conn();
        conn.execute(
            "INSERT INTO personal_api_keys (label, secret_sha256, mask, scopes, projects, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                label,
                sha256_hex(secret),
                mask,
                serde_json::to_string(scopes).unwrap_or_default(),
                projects_json,
                ts(now)
            ],
        )?;
        Ok(KeyGrant {
            key_id: conn.last_insert_rowid(),
            label: label.to_owned(),
            scopes: scopes.to_vec(),
            projects: projects.map(<[TeamId]>::to_vec),
        })
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
            return Ok(*hit);
        }
        let mut conn = self.conn();
        let tx = conn.transaction()?;
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
        self.group_types
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, idx);
        Ok(idx)
    }

    /// Makes a new personal API key; the secret is returned once and stored only hashed.
    pub fn create_key(
        &self,
        label: &str,
        scopes: &[String],
        projects: Option<&[TeamId]>,
        now: DateTime<Utc>,
    ) -> Result<(String, KeyGrant)> {
        if let Some(ps) = projects {
            for p in ps {
                if self.project(*p)?.is_none() {
                    return Err(MetaError::Invalid(format!("there is no project {p}")));
                }
            }
        }
        let secret = random_token("phx_");
        let grant = self.insert_key(label, &secret, scopes, projects, now)?;
        Ok((secret, grant))
    }

    /// The grant of a personal key, looked up by its hash.
    pub fn key_grant(&self, secret: &str) -> Result<Option<KeyGrant>> {
        let row = self
            .conn()
            .query_row(
                "SELECT id, label, scopes, projects FROM personal_api_keys WHERE secret_sha256 = ?1",
                params![sha256_hex(secret)],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()?;
        Ok(row.map(|(key_id, label, scopes, projects)| KeyGrant {
            key_id,
            label,
            scopes: serde_json::from_str(&scopes).unwrap_or_default(),
            projects: projects.map(|p| {
                serde_json::from_str::<Vec<i64>>(&p)
                    .unwrap_or_default()
                    .into_iter()
                    .map(TeamId)
                    .collect()
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, MetaStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        (dir, s)
    }

    #[test]
    fn bootstrap_creates_once_and_respects_fixed_keys() {
        let (dir, s) = store();
        let now = Utc::now();
        let b = s.bootstrap(None, None, now).unwrap();
        let p = b.created_project.expect("project made");
        assert_eq!(p.id, TeamId(1));
        assert!(p.api_token.starts_with("phc_"));
        let k = b.created_personal_key.expect("key made");
        assert!(k.starts_with("phx_"));
        assert!(s.key_grant(&k).unwrap().unwrap().allows("person:write"));
        // A second start makes nothing new.
        let b2 = s.bootstrap(None, None, now).unwrap();
        assert!(b2.created_project.is_none() && b2.created_personal_key.is_none());
        // Fixed keys replace the token and add the key; reopening keeps them (a real file).
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        s.bootstrap(Some("phc_fixed"), Some("phx_fixed"), now)
            .unwrap();
        assert_eq!(
            s.project_by_token("phc_fixed").unwrap().unwrap().id,
            TeamId(1)
        );
        assert!(s.project_by_token(&p.api_token).unwrap().is_none());
        assert!(s.key_grant("phx_fixed").unwrap().is_some());
        assert!(s.key_grant(&k).unwrap().is_some());
        // The secret is not stored in clear.
        let raw = std::fs::read(dir.path().join("meta.sqlite")).unwrap();
        let wal = std::fs::read(dir.path().join("meta.sqlite-wal")).unwrap_or_default();
        for bytes in [raw, wal] {
            assert!(!bytes.windows(k.len()).any(|w| w == k.as_bytes()));
        }
    }

    #[test]
    fn scopes_and_projects() {
        let (_d, s) = store();
        let now = Utc::now();
        s.bootstrap(None, None, now).unwrap();
        let p2 = s.create_project("Second", "Europe/Berlin", now).unwrap();
        assert_eq!(p2.id, TeamId(2));
        let (secret, g) = s
            .create_key("ro", &["person:read".into()], Some(&[p2.id]), now)
            .unwrap();
        let g2 = s.key_grant(&secret).unwrap().unwrap();
        assert_eq!(g, g2);
        assert!(g.allows("person:read"));
        assert!(!g.allows("person:write"));
        assert!(!g.allows("query:read"));
        assert!(g.sees(p2.id) && !g.sees(TeamId(1)));
        assert!(
            s.create_key("rw", &["query:write".into()], None, now)
                .is_err()
        );
        let (_, w) = s
            .create_key("rw", &["person:write".into()], None, now)
            .unwrap();
        assert!(w.allows("person:read") && w.sees(TeamId(99)));
        assert!(s.create_key("x", &["bogus".into()], None, now).is_err());
        assert!(
            s.create_key("x", &["*".into()], Some(&[TeamId(42)]), now)
                .is_err()
        );
        assert!(s.create_project("Bad tz", "Mars/Olympus", now).is_err());
        assert!(s.create_project("  ", "UTC", now).is_err());
        assert!(s.key_grant("phx_nope").unwrap().is_none());
    }

    #[test]
    fn group_types_in_order_of_first_use_at_most_five() {
        let (dir, s) = store();
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
    }
}

/// One row of the query log: what ran, for whom, how it ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueryLogEntry {
    pub query_id: String,
    pub team_id: i64,
    pub name: Option<String>,
    pub query: String,
    pub kind: String,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub error: Option<String>,
    pub is_cached: bool,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<f64>,
    pub result_rows: Option<i64>,
    pub read_bytes: Option<i64>,
    /// `[{k, t}]` as the query response gives them.
    pub timings: Option<serde_json::Value>,
}

impl MetaStore {
    /// Records a query's start or end (the row of `(team, id, started_at)` is replaced).
    pub fn log_query(&self, e: &QueryLogEntry) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO query_log (query_id, team_id, name, query, kind, status, error,
                is_cached, started_at, ended_at, duration_ms, result_rows, read_bytes, timings)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            rusqlite::params![
                e.query_id,
                e.team_id,
                e.name,
                e.query,
                e.kind,
                e.status,
                e.error,
                e.is_cached,
                ts(e.started_at),
                e.ended_at.map(ts),
                e.duration_ms,
                e.result_rows,
                e.read_bytes,
                e.timings.as_ref().map(|t| t.to_string()),
            ],
        )?;
        Ok(())
    }

    /// A project's log entries started at or after `since`, newest first; only `query_id`
    /// when given.
    pub fn query_log(
        &self,
        team: TeamId,
        since: DateTime<Utc>,
        query_id: Option<&str>,
    ) -> Result<Vec<QueryLogEntry>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT query_id, team_id, name, query, kind, status, error, is_cached, started_at,
                    ended_at, duration_ms, result_rows, read_bytes, timings
             FROM query_log WHERE team_id = ?1 AND started_at >= ?2 AND (?3 IS NULL OR query_id = ?3)
             ORDER BY started_at DESC",
        )?;
        let rows = stmt.query_map(rusqlite::params![team.0, ts(since), query_id], |r| {
            Ok(QueryLogEntry {
                query_id: r.get(0)?,
                team_id: r.get(1)?,
                name: r.get(2)?,
                query: r.get(3)?,
                kind: r.get(4)?,
                status: r.get(5)?,
                error: r.get(6)?,
                is_cached: r.get(7)?,
                started_at: parse_ts(r.get(8)?),
                ended_at: r.get::<_, Option<String>>(9)?.map(parse_ts),
                duration_ms: r.get(10)?,
                result_rows: r.get(11)?,
                read_bytes: r.get(12)?,
                timings: r
                    .get::<_, Option<String>>(13)?
                    .and_then(|t| serde_json::from_str(&t).ok()),
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Forgets log entries started before `before` (the log keeps 24 hours and a margin).
    pub fn prune_query_log(&self, before: DateTime<Utc>) -> Result<usize> {
        Ok(self
            .conn()
            .execute("DELETE FROM query_log WHERE started_at < ?1", [ts(before)])?)
    }
}
