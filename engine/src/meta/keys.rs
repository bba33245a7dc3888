//! Personal API keys: what each may do, stored by the SHA-256 of its secret; and each
//! project's secret key (`phs_…`), which server SDKs may use instead of a personal key to
//! read that project's flag definitions, and nothing else.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{MetaError, MetaStore, Result, random_token, ts};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS personal_api_keys (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    mask TEXT NOT NULL,
    scopes TEXT NOT NULL,
    projects TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS project_secret_keys (
    team_id INTEGER PRIMARY KEY,
    secret_sha256 TEXT NOT NULL UNIQUE,
    mask TEXT NOT NULL,
    created_at TEXT NOT NULL
);
";

/// What a project secret key may do: read its project's flag definitions.
pub(super) const PROJECT_SECRET_SCOPES: &[&str] = &["feature_flag:read"];

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
    "cohort:write",
    "feature_flag:read",
    "feature_flag:write",
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

/// A key as lists show it: its first and last four characters (characters, not bytes: a
/// fixed `--personal-api-key` may hold any text).
fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    let head: String = chars.iter().take(4).collect();
    let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
    format!("{head}...{tail}")
}

/// The scope of the routes any valid personal key may call: the projects a key reaches
/// (`GET /api/projects/` and one project), which the spec's own scopes (person, query,
/// cohort, activity log) need to find their `project_id`.
pub const ANY_SCOPE: &str = "";

impl KeyGrant {
    pub fn allows(&self, scope: &str) -> bool {
        if scope == ANY_SCOPE {
            return true;
        }
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

/// A key as `keys list` shows it: never its secret, which is stored only hashed.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    pub id: i64,
    pub label: String,
    /// The secret's first and last four characters.
    pub mask: String,
    pub scopes: Vec<String>,
    /// `None`: every project.
    pub projects: Option<Vec<TeamId>>,
    pub created_at: String,
}

fn parse_projects(projects: Option<String>) -> Option<Vec<TeamId>> {
    projects.map(|p| {
        serde_json::from_str::<Vec<i64>>(&p)
            .unwrap_or_default()
            .into_iter()
            .map(TeamId)
            .collect()
    })
}

fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl MetaStore {
    pub(super) fn insert_key(
        &self,
        label: &str,
        secret: &str,
        scopes: &[String],
        projects: Option<&[TeamId]>,
        now: DateTime<Utc>,
    ) -> Result<KeyGrant> {
        for s in scopes {
            if !KNOWN_SCOPES.contains(&s.as_str()) {
                return Err(MetaError::UnknownScope(s.clone()));
            }
        }
        if scopes.is_empty() {
            return Err(MetaError::NoScopes);
        }
        let projects_json = projects.map(|p| {
            serde_json::to_string(&p.iter().map(|t| t.0).collect::<Vec<_>>()).unwrap_or_default()
        });
        let mask = mask(secret);
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

    /// How many personal keys exist.
    pub(super) fn key_count(&self) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("SELECT count(*) FROM personal_api_keys", [], |r| r.get(0))?)
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
                    return Err(MetaError::NoSuchProject(*p));
                }
            }
        }
        let secret = random_token("phx_");
        let grant = self.insert_key(label, &secret, scopes, projects, now)?;
        Ok((secret, grant))
    }

    /// Makes a new secret key for the project (`phs_…`), replacing the one it had; the
    /// secret is returned once and stored only hashed.
    pub fn rotate_project_secret(&self, team: TeamId, now: DateTime<Utc>) -> Result<String> {
        if self.project(team)?.is_none() {
            return Err(MetaError::NoSuchProject(team));
        }
        let secret = random_token("phs_");
        self.conn().execute(
            "INSERT INTO project_secret_keys (team_id, secret_sha256, mask, created_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (team_id) DO UPDATE SET secret_sha256 = excluded.secret_sha256,
                 mask = excluded.mask, created_at = excluded.created_at",
            params![team.0, sha256_hex(&secret), mask(&secret), ts(now)],
        )?;
        Ok(secret)
    }

    /// The grant of a personal key, or of a project secret key (its project, and
    /// `feature_flag:read`), looked up by its hash.
    pub fn key_grant(&self, secret: &str) -> Result<Option<KeyGrant>> {
        if secret.starts_with("phs_") {
            let team: Option<i64> = self
                .conn()
                .query_row(
                    "SELECT team_id FROM project_secret_keys WHERE secret_sha256 = ?1",
                    params![sha256_hex(secret)],
                    |r| r.get(0),
                )
                .optional()?;
            return Ok(team.map(|t| KeyGrant {
                key_id: 0,
                label: format!("project {t} secret key"),
                scopes: PROJECT_SECRET_SCOPES
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                projects: Some(vec![TeamId(t)]),
            }));
        }
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
            projects: parse_projects(projects),
        }))
    }

    /// Every personal key, oldest first.
    pub fn keys(&self) -> Result<Vec<KeyInfo>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, label, mask, scopes, projects, created_at FROM personal_api_keys ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(KeyInfo {
                id: r.get(0)?,
                label: r.get(1)?,
                mask: r.get(2)?,
                scopes: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
                projects: parse_projects(r.get(4)?),
                created_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Deletes the personal key `id`; its next request is refused as an unknown key (the
    /// grant is read from SQLite on every request, nothing caches it). `None`: no such key.
    pub fn revoke_key(&self, id: i64) -> Result<Option<KeyInfo>> {
        let Some(info) = self.keys()?.into_iter().find(|k| k.id == id) else {
            return Ok(None);
        };
        self.conn()
            .execute("DELETE FROM personal_api_keys WHERE id = ?1", params![id])?;
        Ok(Some(info))
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    #[test]
    fn masks_count_characters_not_bytes() {
        assert_eq!(super::mask("phx_abcdefgh"), "phx_...efgh");
        assert_eq!(super::mask("ab"), "ab...ab");
        // Four bytes from either end would cut a character in two.
        assert_eq!(super::mask("é€-key-é€"), "é€-k...y-é€");
    }

    use super::super::test_store;
    use crate::model::TeamId;

    #[test]
    fn scopes_and_projects() {
        let (_d, s) = test_store();
        let now = Utc::now();
        s.bootstrap(None, None, now).unwrap();
        let p2 = s.create_project("Second", "Europe/Berlin", now).unwrap();
        assert_eq!(p2.id, TeamId(2));
        let (secret, g) = s
            .create_key("ro", &["person:read".into()], Some(&[p2.id]), now)
            .unwrap();
        let g2 = s.key_grant(&secret).unwrap().unwrap();
        assert_eq!(g, g2);
        let listed = s.keys().unwrap();
        let info = listed.iter().find(|k| k.id == g.key_id).unwrap();
        assert_eq!(
            (info.label.as_str(), &info.scopes, &info.projects),
            ("ro", &g.scopes, &Some(vec![p2.id]))
        );
        assert!(info.mask.starts_with("phx_") && !info.mask.contains(&secret[4..]));
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

        let revoked = s.revoke_key(g.key_id).unwrap().unwrap();
        assert_eq!(revoked.label, "ro");
        assert!(s.key_grant(&secret).unwrap().is_none());
        assert!(s.keys().unwrap().iter().all(|k| k.id != g.key_id));
        assert!(s.revoke_key(g.key_id).unwrap().is_none());
    }
}
