//! Projects: id, name, capture token and time zone.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use uuid::Uuid;

use super::{MetaError, MetaStore, Result, parse_ts, random_token, ts};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    api_token TEXT NOT NULL UNIQUE,
    timezone TEXT NOT NULL,
    created_at TEXT NOT NULL
);
";

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: TeamId,
    pub uuid: Uuid,
    pub name: String,
    pub api_token: String,
    pub timezone: String,
    pub created_at: DateTime<Utc>,
}

pub fn validate_timezone(tz: &str) -> Result<()> {
    tz.parse::<chrono_tz::Tz>()
        .map(|_| ())
        .map_err(|source| MetaError::UnknownTimezone {
            name: tz.to_owned(),
            source,
        })
}

pub fn validate_project_token(token: &str) -> Result<()> {
    match crate::model::token_problem(token) {
        None => Ok(()),
        Some(reason) => Err(MetaError::InvalidProjectToken(reason)),
    }
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

impl MetaStore {
    pub(super) fn insert_project(
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
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(MetaError::ProjectExists(e));
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
            return Err(MetaError::ProjectName);
        }
        self.insert_project(None, name, &random_token("phc_"), timezone, now)
    }

    /// Changes a project's time zone (an IANA name).
    pub fn set_project_timezone(&self, id: TeamId, tz: &str) -> Result<()> {
        validate_timezone(tz)?;
        self.conn().execute(
            "UPDATE projects SET timezone = ?1 WHERE id = ?2",
            params![tz, id.0],
        )?;
        Ok(())
    }

    /// Renames a project (1 to 200 characters, trimmed).
    pub fn set_project_name(&self, id: TeamId, name: &str) -> Result<()> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(MetaError::ProjectName);
        }
        self.conn().execute(
            "UPDATE projects SET name = ?1 WHERE id = ?2",
            params![name, id.0],
        )?;
        Ok(())
    }

    /// Changes a project's capture token. Callers that cache tokens must forget them.
    pub(super) fn set_project_token(&self, id: TeamId, token: &str) -> Result<()> {
        self.conn().execute(
            "UPDATE projects SET api_token = ?1 WHERE id = ?2",
            params![token, id.0],
        )?;
        Ok(())
    }

    pub fn project(&self, id: TeamId) -> Result<Option<Project>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, uuid, name, api_token, timezone, created_at FROM projects WHERE id = ?1",
                params![id.0],
                row_to_project,
            )
            .optional()?)
    }

    pub fn project_by_token(&self, token: &str) -> Result<Option<Project>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, uuid, name, api_token, timezone, created_at FROM projects WHERE api_token = ?1",
                params![token],
                row_to_project,
            )
            .optional()?)
    }

    pub fn projects(&self) -> Result<Vec<Project>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, uuid, name, api_token, timezone, created_at FROM projects ORDER BY id",
        )?;
        let rows = stmt.query_map([], row_to_project)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
