//! The metadata store: projects, personal API keys, group types, property definitions
//! and the query log, kept in SQLite (`meta.sqlite`) in the data directory.
//!
//! One [`MetaStore`] owns one connection; each file below is an `impl MetaStore` block with
//! its table and row types:
//! - `projects`: projects, their tokens and time zones;
//! - `keys`: personal API keys, stored as SHA-256 hashes (they are 256-bit random secrets,
//!   so a fast hash is enough; the secret itself is shown once, when it is made);
//! - `bootstrap`: what the first start makes (project 1 and an all-scopes key);
//! - `group_types`: group type → index (0–4), per project;
//! - `property_definitions`: the type each property name was first seen with (the rules
//!   themselves are `crate::propdefs`, pure, which HogQL reads too);
//! - `property_columns`: which event properties each project stores as typed columns;
//! - `query_log`: what ran, for whom, how it ended;
//! - `feature_flags`: flag definitions, with each project's live flags kept in memory;
//! - `project_settings`: what browser SDKs capture, served as remote config.
//!
//! Persons live elsewhere (`persons`), in their own tables of the same file.

use std::path::Path;
use std::sync::{Mutex, RwLock};

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use rusqlite::Connection;

use crate::error::{ErrorKind, HasKind};
use crate::model::TeamId;

mod bootstrap;
mod cohorts;
mod feature_flags;
mod group_types;
mod keys;
mod project_settings;
mod projects;
mod property_columns;
mod property_definitions;
mod query_log;

pub use bootstrap::Bootstrap;
pub use cohorts::{Cohort, NewCohort};
pub use feature_flags::NewFlag;
pub use group_types::MAX_GROUP_TYPES;
pub use keys::{ANY_SCOPE, KNOWN_SCOPES, KeyGrant, KeyInfo};
pub use project_settings::ProjectSettings;
pub use projects::{Project, validate_project_token, validate_timezone};
pub use property_columns::PropertyColumnsConfig;
pub use property_definitions::PropertyDefinition;
pub use query_log::QueryLogEntry;

/// Why a metadata operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// SQLite failed: opening the file, a statement, a transaction.
    #[error("metadata store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("'{name}' is not an IANA time zone name")]
    UnknownTimezone {
        name: String,
        #[source]
        source: chrono_tz::ParseError,
    },
    /// A project token the capture token rules refuse; why.
    #[error("{0}")]
    InvalidProjectToken(String),
    #[error("a personal API key must start with phx_")]
    PersonalKeyPrefix,
    #[error("name must be 1 to 200 characters")]
    ProjectName,
    #[error("unknown scope '{0}'; known scopes: {known}", known = KNOWN_SCOPES.join(", "))]
    UnknownScope(String),
    #[error("a key needs at least one scope")]
    NoScopes,
    /// A key was to be limited to a project that does not exist.
    #[error("there is no project {0}")]
    NoSuchProject(TeamId),
    /// The id or the capture token of a new project is taken.
    #[error("a project with this id or API token exists already")]
    ProjectExists(#[source] rusqlite::Error),
    /// A live flag of the project has this key.
    #[error("There is already a feature flag with the key '{0}'")]
    FlagKeyTaken(String),
}

impl HasKind for MetaError {
    fn kind(&self) -> ErrorKind {
        match self {
            MetaError::Sqlite(_) => ErrorKind::Internal,
            MetaError::UnknownTimezone { .. }
            | MetaError::InvalidProjectToken(_)
            | MetaError::PersonalKeyPrefix
            | MetaError::ProjectName
            | MetaError::UnknownScope(_)
            | MetaError::NoScopes
            | MetaError::NoSuchProject(_) => ErrorKind::InvalidInput,
            MetaError::ProjectExists(_) => ErrorKind::Conflict,
            MetaError::FlagKeyTaken(_) => ErrorKind::InvalidInput,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            MetaError::FlagKeyTaken(_) => "unique",
            other => other.kind().default_code(),
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            MetaError::FlagKeyTaken(_) => Some("key".into()),
            _ => None,
        }
    }
}

pub type Result<T, E = MetaError> = std::result::Result<T, E>;

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
    prop_defs: RwLock<property_definitions::PropDefs>,
    /// Every project's promoted property columns; replaced whole on each promotion.
    layouts: RwLock<std::sync::Arc<crate::storage::layout::Layouts>>,
    columns_cfg: RwLock<PropertyColumnsConfig>,
    /// Each project's live feature flags, loaded on first use, dropped by every write.
    flags: feature_flags::FlagSnapshots,
    key_counts: Mutex<
        std::collections::HashMap<
            (TeamId, crate::storage::layout::Family),
            property_columns::KeyCounts,
        >,
    >,
}

/// Every table, in the order they were first made. `IF NOT EXISTS`: opening an existing
/// file changes nothing.
const SCHEMA: &[&str] = &[
    projects::SCHEMA,
    group_types::SCHEMA,
    property_definitions::SCHEMA,
    property_columns::SCHEMA,
    query_log::SCHEMA,
    keys::SCHEMA,
    feature_flags::SCHEMA,
    project_settings::SCHEMA,
    cohorts::SCHEMA,
];

/// A random secret: `prefix` and 43 alphanumerics (256 bits).
fn random_token(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let body: String = (0..43)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{body}")
}

/// How a time is stored: RFC 3339 in UTC, microseconds.
fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: String) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

impl MetaStore {
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        for table in SCHEMA {
            conn.execute_batch(table)?;
        }
        let defs = property_definitions::load(&conn)?;
        let layouts = property_columns::load(&conn)?;
        Ok(Self {
            conn: Mutex::new(conn),
            group_types: Mutex::new(Default::default()),
            full_teams: Mutex::new(Default::default()),
            prop_defs: RwLock::new(defs),
            layouts: RwLock::new(std::sync::Arc::new(layouts)),
            columns_cfg: RwLock::new(PropertyColumnsConfig::default()),
            key_counts: Mutex::new(Default::default()),
            flags: Default::default(),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
fn test_store() -> (tempfile::TempDir, MetaStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
    (dir, s)
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use chrono::Utc;

    use super::*;

    /// The typed errors say what the strings used to, with the same kinds and codes; the
    /// ones caused by another error carry it as their source.
    #[test]
    fn errors_keep_their_text_kind_and_code() {
        let (_d, s) = test_store();
        let now = Utc::now();
        s.bootstrap(None, None, now).unwrap();
        let cases: Vec<(MetaError, &str, ErrorKind, bool)> = vec![
            (
                s.create_project("x", "Mars/Olympus", now).unwrap_err(),
                "'Mars/Olympus' is not an IANA time zone name",
                ErrorKind::InvalidInput,
                true,
            ),
            (
                s.create_project(" ", "UTC", now).unwrap_err(),
                "name must be 1 to 200 characters",
                ErrorKind::InvalidInput,
                false,
            ),
            (
                s.bootstrap(None, Some("key"), now).unwrap_err(),
                "a personal API key must start with phx_",
                ErrorKind::InvalidInput,
                false,
            ),
            (
                s.create_key("k", &["bogus".into()], None, now).unwrap_err(),
                "unknown scope 'bogus'; known scopes: *, project:read, project:write, \
                 person:read, person:write, query:read, activity_log:read, cohort:read, \
                 cohort:write, feature_flag:read, feature_flag:write",
                ErrorKind::InvalidInput,
                false,
            ),
            (
                s.create_key("k", &[], None, now).unwrap_err(),
                "a key needs at least one scope",
                ErrorKind::InvalidInput,
                false,
            ),
            (
                s.create_key("k", &["*".into()], Some(&[TeamId(9)]), now)
                    .unwrap_err(),
                "there is no project 9",
                ErrorKind::InvalidInput,
                false,
            ),
            (
                s.insert_project(Some(1), "again", "phc_other", "UTC", now)
                    .unwrap_err(),
                "a project with this id or API token exists already",
                ErrorKind::Conflict,
                true,
            ),
        ];
        for (e, text, kind, has_source) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(e.kind(), kind, "{text}");
            let code = match kind {
                ErrorKind::Conflict => "conflict",
                _ => "invalid_input",
            };
            assert_eq!((e.code(), e.attr()), (code, None), "{text}");
            assert_eq!(e.source().is_some(), has_source, "{text}");
        }
        let bad_token = s
            .bootstrap(Some("phx_not_a_project_token"), None, now)
            .unwrap_err();
        assert_eq!(
            bad_token.to_string(),
            crate::model::token_problem("phx_not_a_project_token").unwrap()
        );
        assert_eq!(bad_token.kind(), ErrorKind::InvalidInput);
    }
}
