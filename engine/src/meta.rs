//! Projects and personal API keys, kept in SQLite in the data directory.
//!
//! Owns the `projects` and `personal_api_keys` tables. Personal keys are stored as SHA-256
//! hashes (they are 256-bit random secrets, so a fast hash is enough); the secret itself is
//! shown once, when it is made. Persons live elsewhere (`persons`), in their own tables.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::{ErrorKind, HasKind};
use crate::model::{Event, TeamId};
use crate::propdefs::{self, NOT_EVENT_PROPERTIES, PropertyKind, PropertyType};

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
    /// Only assigned types are cached: an unknown name of a project with five types is
    /// answered from `full_teams` without SQLite and without growing this map (a request can
    /// name thousands of group types).
    group_types: Mutex<std::collections::HashMap<(TeamId, String), u8>>,
    /// Projects known to have all five group types.
    full_teams: Mutex<std::collections::HashSet<TeamId>>,
    /// Every property definition, loaded at open and kept in step with the table: ingestion
    /// checks each property name here and writes only what is new.
    prop_defs: RwLock<PropDefs>,
}

/// Property name → its type (`None`: only null/object/array values seen so far).
type PropDefs = HashMap<(TeamId, PropertyKind), HashMap<String, Option<PropertyType>>>;

/// One property definition, as listed for a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PropertyDefinition {
    pub name: String,
    #[serde(skip)]
    pub kind: PropertyKind,
    pub property_type: Option<&'static str>,
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
CREATE TABLE IF NOT EXISTS property_definitions (
    team_id INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    group_type_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    property_type TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (team_id, kind, group_type_index, name)
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
    match crate::model::token_problem(token) {
        None => Ok(()),
        Some(reason) => Err(MetaError::Invalid(reason)),
    }
}

impl MetaStore {
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        let mut defs = PropDefs::new();
        {
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
        }
        Ok(Self {
            conn: Mutex::new(conn),
            group_types: Mutex::new(Default::default()),
            full_teams: Mutex::new(Default::default()),
            prop_defs: RwLock::new(defs),
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

    /// Records the property types a batch of a project's events suggests (see
    /// [`crate::propdefs`]): event properties, person properties from `$set`/`$set_once`,
    /// and group properties from `$groupidentify`'s `$group_set`. A name whose type is known
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
    fn property_types_first_decided_value_wins_and_survive_reopen() {
        use serde_json::json;
        let (dir, s) = store();
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
        // Unknown names of a full project are answered without SQLite and are not cached:
        // a request can name thousands of them.
        for i in 0..10_000 {
            assert_eq!(s.group_type_index(t, &format!("x{i}"), now).unwrap(), None);
        }
        assert!(s.group_types.lock().unwrap().len() <= 5);
        assert_eq!(s.group_type_index(t, "team", now).unwrap(), Some(1));
    }

    #[test]
    fn many_new_property_names_in_one_batch_take_linear_time() {
        use serde_json::{Map, Value, json};
        let (_d, s) = store();
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
