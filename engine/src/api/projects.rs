//! Projects and personal API keys: who may do what, the projects a key sees, making
//! projects and keys, the first start, and which project a capture token names.
//! See [the module docs](super).
//!
//! The rules live here, so no caller can skip one:
//! - a personal key must hold the scope asked for (`x:write` implies `x:read`, `*` all),
//!   and sees only its projects: a project it may not see is answered as missing;
//! - `@current` names the key's first project, or project 1 for a key of every project;
//! - a key limited to some projects cannot make projects; a new project needs a name and
//!   is in UTC unless told otherwise;
//! - capture's token → project cache is forgotten by every operation that changes a
//!   project's token or time zone, so capture never routes events by a stale token.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::Engine;
use crate::error::{ErrorKind, HasKind};
use crate::meta::{Bootstrap, KeyGrant, KeyInfo, MetaError, MetaStore, Project, ProjectSettings};
use crate::model::TeamId;

/// Why a projects or keys operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ProjectsError {
    /// No personal key has this secret.
    #[error("Personal API key found in request Authorization header is invalid.")]
    UnknownKey,
    /// The key lacks the scope the operation needs.
    #[error("API key missing required scope '{0}'")]
    MissingScope(String),
    /// A project id that is neither a number nor `@current`.
    #[error("no project '{0}'")]
    BadProjectId(String),
    /// No such project, or one the key may not see.
    #[error("no project {0}")]
    NoProject(TeamId),
    #[error("a key limited to some projects cannot create projects")]
    LimitedKeyCreatesProject,
    #[error("name is required")]
    NameRequired,
    /// A field of a project change that cannot be taken: which, and why.
    #[error("{message}")]
    Invalid { attr: String, message: String },
    /// The data directory could not be made, or (for the key commands) holds no hedgerow
    /// metadata.
    #[error("{0}")]
    DataDir(#[source] std::io::Error),
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl HasKind for ProjectsError {
    fn kind(&self) -> ErrorKind {
        match self {
            ProjectsError::UnknownKey => ErrorKind::Unauthorized,
            ProjectsError::MissingScope(_) | ProjectsError::LimitedKeyCreatesProject => {
                ErrorKind::Forbidden
            }
            ProjectsError::BadProjectId(_) | ProjectsError::NoProject(_) => ErrorKind::NotFound,
            ProjectsError::NameRequired | ProjectsError::Invalid { .. } => ErrorKind::InvalidInput,
            ProjectsError::DataDir(_) => ErrorKind::Internal,
            ProjectsError::Meta(e) => e.kind(),
        }
    }
    fn code(&self) -> &'static str {
        match self {
            ProjectsError::UnknownKey => "authentication_failed",
            ProjectsError::MissingScope(_) | ProjectsError::LimitedKeyCreatesProject => {
                "permission_denied"
            }
            ProjectsError::BadProjectId(_) | ProjectsError::NoProject(_) => "not_found",
            ProjectsError::NameRequired => "required",
            ProjectsError::Invalid { .. } => "invalid_input",
            ProjectsError::DataDir(_) => "error",
            ProjectsError::Meta(e) => e.code(),
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            ProjectsError::MissingScope(_) => Some("scopes".into()),
            ProjectsError::NameRequired => Some("name".into()),
            ProjectsError::Invalid { attr, .. } => Some(attr.clone()),
            ProjectsError::Meta(e) => e.attr(),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            ProjectsError::Meta(e) => e.retry_after(),
            _ => None,
        }
    }
}

type Result<T, E = ProjectsError> = std::result::Result<T, E>;

/// What a caller may do: its key's grant, and the project it named, checked.
#[derive(Debug, Clone)]
pub struct Access {
    pub grant: KeyGrant,
    /// The project the request names, when it names one; the key may see it.
    pub project: Option<Project>,
}

impl Engine {
    /// Checks a personal key for `scope` and, when `project` is given (a project id, or
    /// `@current`), that the project exists and the key may see it.
    pub fn authorize(&self, secret: &str, scope: &str, project: Option<&str>) -> Result<Access> {
        let grant = self
            .meta
            .key_grant(secret)?
            .ok_or(ProjectsError::UnknownKey)?;
        if !grant.allows(scope) {
            return Err(ProjectsError::MissingScope(scope.to_owned()));
        }
        let project = match project {
            None => None,
            Some(raw) => {
                let id = if raw == "@current" {
                    grant
                        .projects
                        .as_ref()
                        .and_then(|p| p.first().copied())
                        .unwrap_or(TeamId(1))
                } else {
                    raw.parse::<i64>()
                        .map(TeamId)
                        .map_err(|_| ProjectsError::BadProjectId(raw.to_owned()))?
                };
                match self.meta.project(id)? {
                    Some(p) if grant.sees(id) => Some(p),
                    _ => return Err(ProjectsError::NoProject(id)),
                }
            }
        };
        Ok(Access { grant, project })
    }

    /// One project, by id (for callers that hold no key: the CLI, tests).
    pub fn project(&self, team: TeamId) -> Result<Option<Project>, MetaError> {
        self.meta.project(team)
    }

    /// The projects `grant` may see, by id.
    pub fn projects(&self, grant: &KeyGrant) -> Result<Vec<Project>> {
        Ok(self
            .meta
            .projects()?
            .into_iter()
            .filter(|p| grant.sees(p.id))
            .collect())
    }

    /// Makes a project with a fresh capture token, in `timezone` (UTC when `None`).
    pub fn create_project(
        &self,
        grant: &KeyGrant,
        name: Option<&str>,
        timezone: Option<&str>,
    ) -> Result<Project> {
        if grant.projects.is_some() {
            return Err(ProjectsError::LimitedKeyCreatesProject);
        }
        let name = name.ok_or(ProjectsError::NameRequired)?;
        let timezone = timezone.unwrap_or("UTC");
        Ok(self.meta.create_project(name, timezone, self.clock.now())?)
    }

    /// A new secret key for the project, replacing its old one; returned once.
    pub fn rotate_project_secret(&self, team: TeamId) -> Result<String> {
        Ok(self.meta.rotate_project_secret(team, self.clock.now())?)
    }

    /// The project's settings for browser SDKs (remote config).
    pub fn project_settings(&self, team: TeamId) -> Result<ProjectSettings> {
        Ok(self.meta.project_settings(team)?)
    }

    /// Changes what `patch` names: `name`, `timezone`, and the remote-config settings
    /// (booleans, by PostHog's field names). A PostHog setting for something hedgerow does
    /// not do (session recordings, surveys, console logs) is refused when turned on, so
    /// nobody believes it is served; turning it off changes nothing. Other fields are
    /// ignored, as PostHog's API ignores fields it does not know.
    pub fn update_project(
        &self,
        team: TeamId,
        patch: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(Project, ProjectSettings)> {
        use serde_json::Value;
        let mut settings = self.meta.project_settings(team)?;
        for (field, value) in patch {
            let flag = |v: &Value| {
                v.as_bool().ok_or_else(|| ProjectsError::Invalid {
                    attr: field.clone(),
                    message: "Must be a valid boolean.".into(),
                })
            };
            match field.as_str() {
                "name" | "timezone" => {}
                "autocapture_opt_out" => settings.autocapture_opt_out = flag(value)?,
                "autocapture_exceptions_opt_in" => {
                    settings.autocapture_exceptions_opt_in = flag(value)?
                }
                "autocapture_web_vitals_opt_in" => {
                    settings.autocapture_web_vitals_opt_in = flag(value)?
                }
                "capture_performance_opt_in" => settings.capture_performance_opt_in = flag(value)?,
                "capture_dead_clicks" => settings.capture_dead_clicks = flag(value)?,
                "heatmaps_opt_in" => settings.heatmaps_opt_in = flag(value)?,
                "session_recording_opt_in" | "surveys_opt_in" | "capture_console_log_opt_in"
                    if value.as_bool() != Some(false) =>
                {
                    return Err(ProjectsError::Invalid {
                        attr: field.clone(),
                        message: format!(
                            "{field} cannot be turned on: hedgerow does not serve session \
                             recordings, surveys or console logs"
                        ),
                    });
                }
                _ => {}
            }
        }
        let text = |f: &str| -> Result<Option<&str>> {
            match patch.get(f) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(ProjectsError::Invalid {
                    attr: f.to_owned(),
                    message: "Not a valid string.".into(),
                }),
            }
        };
        let (name, timezone) = (text("name")?, text("timezone")?);
        if let Some(tz) = timezone {
            crate::meta::validate_timezone(tz)?;
        }
        if let Some(name) = name {
            self.meta.set_project_name(team, name)?;
        }
        if let Some(tz) = timezone {
            self.set_project_timezone(team, tz)?;
        }
        self.meta.set_project_settings(team, &settings)?;
        // The token cache holds whole projects.
        self.forget_tokens();
        let project = self
            .meta
            .project(team)?
            .ok_or(ProjectsError::NoProject(team))?;
        Ok((project, settings))
    }

    /// Changes a project's time zone (an IANA name).
    pub fn set_project_timezone(&self, team: TeamId, timezone: &str) -> Result<()> {
        let changed = self.meta.set_project_timezone(team, timezone);
        // The cache holds whole projects.
        self.forget_tokens();
        Ok(changed?)
    }

    /// Makes sure project 1 and an all-scopes personal key exist, using the given token and
    /// key when there are (a fixed project token replaces project 1's); what was made is
    /// returned once, to be shown.
    pub fn bootstrap(
        &self,
        project_token: Option<&str>,
        personal_key: Option<&str>,
    ) -> Result<Bootstrap> {
        let made = self
            .meta
            .bootstrap(project_token, personal_key, self.clock.now());
        // Project 1's token may have changed, even when a later step failed.
        self.forget_tokens();
        Ok(made?)
    }

    /// Makes a personal API key in the data directory `data_dir`, limited to `projects`
    /// when given; the secret is returned once and stored only hashed. Needs no open
    /// engine: it works while a server runs on the directory (SQLite, in WAL mode, lets
    /// the two write), and the server sees the key at once.
    pub fn create_personal_key(
        data_dir: &Path,
        label: &str,
        scopes: &[String],
        projects: Option<&[TeamId]>,
        now: DateTime<Utc>,
    ) -> Result<String> {
        let (secret, _) =
            Self::meta_of(data_dir, true)?.create_key(label, scopes, projects, now)?;
        Ok(secret)
    }

    /// Every personal API key of the data directory `data_dir` (masked; the secrets are
    /// stored only hashed). Needs no open engine, as [`Engine::create_personal_key`].
    pub fn personal_keys(data_dir: &Path) -> Result<Vec<KeyInfo>> {
        Ok(Self::meta_of(data_dir, false)?.keys()?)
    }

    /// Revokes the personal API key `id` of the data directory `data_dir`: a server running
    /// on it refuses the key from its next request on (grants are not cached). `None`: no
    /// key has that id.
    pub fn revoke_personal_key(data_dir: &Path, id: i64) -> Result<Option<KeyInfo>> {
        Ok(Self::meta_of(data_dir, false)?.revoke_key(id)?)
    }

    /// The metadata store of the data directory `data_dir`, for the key commands; made
    /// when `create`, else it must exist (listing a mistyped directory makes nothing).
    fn meta_of(data_dir: &Path, create: bool) -> Result<MetaStore> {
        let path = data_dir.join("meta.sqlite");
        if create {
            std::fs::create_dir_all(data_dir).map_err(ProjectsError::DataDir)?;
        } else if !path.exists() {
            return Err(ProjectsError::DataDir(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} does not exist", path.display()),
            )));
        }
        Ok(MetaStore::open(&path)?)
    }

    /// The project a capture token belongs to (cached; a miss asks SQLite).
    pub(crate) fn project_for_token(&self, token: &str) -> Result<Option<Project>, MetaError> {
        let generation = {
            let cache = self.tokens.read().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = cache.projects.get(token) {
                return Ok(Some(p.clone()));
            }
            cache.generation
        };
        let found = self.meta.project_by_token(token)?;
        if let Some(p) = &found {
            let mut cache = self.tokens.write().unwrap_or_else(|e| e.into_inner());
            // A token change since the read above may have made `p` stale: keep it out.
            if cache.generation == generation {
                cache.projects.insert(token.to_owned(), p.clone());
            }
        }
        Ok(found)
    }

    /// Forgets cached tokens: every change to a project's token or time zone calls this.
    fn forget_tokens(&self) {
        let mut cache = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        cache.projects.clear();
        cache.generation += 1;
    }
}

/// Projects by capture token, as read from the metadata store. `generation` counts the
/// times it was cleared, so a read that raced a token change is not cached.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    projects: HashMap<String, Project>,
    generation: u64,
}
