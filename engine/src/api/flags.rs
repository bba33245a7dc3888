//! Feature flags: the definitions' CRUD, evaluation for `/flags`, and the definitions
//! server SDKs evaluate locally.
//!
//! The rules, kept here for every caller:
//! - a definition is validated whole (`flags::validate_key`, `flags::validate_filters`)
//!   before it is stored, on create and on every update; a live key is unique per project;
//! - filters without `groups` are PostHog's older form: one condition set with the
//!   document's `properties` and the flag's top-level `rollout_percentage`, made explicit
//!   when stored;
//! - deleting is soft (the row stays, `deleted: true`, the key is free again), as PostHog;
//! - evaluation reads the project's flags from the in-memory snapshot, the person's
//!   stored properties (the request's on top), and each group's; a deleted or inactive flag
//!   is not evaluated.

use std::collections::HashMap;

use chrono::Utc;
use serde_json::{Map, Value};

use crate::error::{ErrorKind, HasKind};
use crate::flags::eval::{Evaluation, Subject, evaluate};
use crate::flags::{self, Condition, FeatureFlag, Filters, Invalid};
use crate::ingest::CaptureError;
use crate::meta::{MetaError, NewFlag, Project};
use crate::model::{DistinctId, TeamId};
use crate::persons::store::StoreError;
use crate::{CaptureBody, Engine};

/// Why a flags operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    #[error("Not found.")]
    NoFlag(i64),
    #[error("{0}")]
    Invalid(#[from] Invalid),
    /// `/flags` named no project token, or one no project has.
    #[error("Project API key invalid. You can find your project API key in your project settings.")]
    UnknownToken,
    /// The `/flags` body could not be read.
    #[error(transparent)]
    Body(#[from] CaptureError),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl HasKind for FlagsError {
    fn kind(&self) -> ErrorKind {
        match self {
            FlagsError::NoFlag(_) => ErrorKind::NotFound,
            FlagsError::Invalid(_) => ErrorKind::InvalidInput,
            FlagsError::UnknownToken => ErrorKind::Unauthorized,
            FlagsError::Body(e) => e.kind(),
            FlagsError::BadRequest(_) => ErrorKind::InvalidInput,
            FlagsError::Meta(e) => e.kind(),
            FlagsError::Store(e) => e.kind(),
        }
    }
    fn code(&self) -> &'static str {
        match self {
            FlagsError::UnknownToken => "invalid_api_key",
            FlagsError::Body(e) => e.code(),
            FlagsError::BadRequest(_) => "invalid_payload",
            FlagsError::Meta(e) => e.code(),
            FlagsError::Store(e) => e.code(),
            other => other.kind().default_code(),
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            FlagsError::Invalid(e) => Some(e.attr.to_owned()),
            FlagsError::Body(e) => e.attr(),
            FlagsError::Meta(e) => e.attr(),
            FlagsError::Store(e) => e.attr(),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            FlagsError::Meta(e) => e.retry_after(),
            FlagsError::Store(e) => e.retry_after(),
            _ => None,
        }
    }
}

type Result<T, E = FlagsError> = std::result::Result<T, E>;

/// The fields a create or an update sends; an update changes only the ones present.
#[derive(Debug, Clone, Default)]
pub struct FlagFields {
    pub key: Option<String>,
    pub name: Option<String>,
    pub filters: Option<Value>,
    pub active: Option<bool>,
    pub deleted: Option<bool>,
    pub ensure_experience_continuity: Option<bool>,
    /// PostHog's older top-level rollout, for filters without condition sets.
    pub rollout_percentage: Option<f64>,
}

/// Largest `/flags` body once decoded: a person's and groups' properties, far below
/// capture's limit since nothing is stored from it.
pub const MAX_FLAGS_BODY: usize = 2 << 20;

/// What `/flags` is asked: who, with which properties and groups, and which flags.
#[derive(Debug, Clone, Default)]
pub struct FlagsRequest {
    /// The project token the body names (`token`, `api_key` or `$token`).
    pub token: String,
    pub distinct_id: String,
    /// Group type → group key.
    pub groups: Map<String, Value>,
    pub person_properties: Map<String, Value>,
    /// Group type → that group's properties.
    pub group_properties: Map<String, Value>,
    /// Only these flags, when given.
    pub only: Option<Vec<String>>,
}

/// One flag's answer at `/flags`.
#[derive(Debug, Clone)]
pub struct FlagAnswer {
    pub id: i64,
    pub key: String,
    pub version: i64,
    pub name: String,
    pub evaluation: Evaluation,
}

/// Filters as stored: the document validated, the older form made explicit.
fn filters_of(doc: Value, rollout: Option<f64>) -> Result<Filters> {
    let has_groups = doc.get("groups").is_some();
    let mut f: Filters = serde_json::from_value(doc).map_err(|e| Invalid {
        attr: "filters",
        message: format!("filters are not valid: {e}"),
    })?;
    if !has_groups {
        let properties = match f.extra.remove("properties") {
            Some(p) => serde_json::from_value(p).map_err(|e| Invalid {
                attr: "filters",
                message: format!("filters are not valid: {e}"),
            })?,
            None => Vec::new(),
        };
        f.groups = vec![Condition {
            properties,
            rollout_percentage: rollout,
            ..Default::default()
        }];
    }
    if f.groups.is_empty() {
        return Err(Invalid {
            attr: "filters",
            message: "Feature flag filters must contain at least one condition set".into(),
        }
        .into());
    }
    flags::prepare_filters(&mut f)?;
    Ok(f)
}

fn name_of(name: Option<String>) -> Result<String> {
    let name = name.unwrap_or_default();
    if name.chars().count() > flags::MAX_NAME_LEN {
        return Err(Invalid {
            attr: "name",
            message: format!(
                "Ensure this field has no more than {} characters.",
                flags::MAX_NAME_LEN
            ),
        }
        .into());
    }
    Ok(name)
}

/// The first of `names` that `doc` holds.
fn field<'a>(doc: &'a Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| doc.get(*n).filter(|v| !v.is_null()))
}

fn object(doc: &Map<String, Value>, names: &[&str]) -> Result<Map<String, Value>> {
    match field(doc, names) {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(other) => Err(FlagsError::BadRequest(format!(
            "{} must be an object, not {}",
            names[0],
            crate::ingest::normalize::describe_json(other)
        ))),
    }
}

/// A `/flags` (or `/decide`) body, in any encoding posthog-js and the server SDKs send:
/// JSON, gzip, base64 or a form's `data=`, with the field names PostHog accepts.
pub fn read_flags_body(body: &CaptureBody) -> Result<FlagsRequest> {
    let doc = crate::ingest::decode::decode_body(&body.raw(), MAX_FLAGS_BODY)?;
    let Value::Object(doc) = doc else {
        return Err(FlagsError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    };
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let token = field(&doc, &["token", "api_key", "$token"])
        .and_then(text)
        .unwrap_or_default();
    let distinct_id = match field(&doc, &["distinct_id", "$distinct_id"]) {
        None => {
            return Err(FlagsError::BadRequest(
                "The distinct_id field is missing from the request".into(),
            ));
        }
        Some(v) => text(v).ok_or_else(|| {
            FlagsError::BadRequest("distinct_id must be a string or a number".into())
        })?,
    };
    if distinct_id.trim().is_empty() {
        return Err(FlagsError::BadRequest("distinct_id is empty".into()));
    }
    // As PostHog: an id is at most 200 characters.
    let distinct_id: String = distinct_id.chars().take(200).collect();
    let only = match field(&doc, &["flag_keys_to_evaluate", "flag_keys"]) {
        None => None,
        Some(Value::Array(keys)) => Some(keys.iter().filter_map(text).collect()),
        Some(_) => {
            return Err(FlagsError::BadRequest(
                "flag_keys_to_evaluate must be a list of flag keys".into(),
            ));
        }
    };
    Ok(FlagsRequest {
        token,
        distinct_id,
        groups: object(&doc, &["groups", "$groups"])?,
        person_properties: object(&doc, &["person_properties", "$properties"])?,
        group_properties: object(&doc, &["group_properties", "$group_properties"])?,
        only,
    })
}

/// What posthog-js is told on load: the project's settings and whether it has flags.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub project: Project,
    pub settings: crate::meta::ProjectSettings,
    /// Whether any flag is active (posthog-js skips `/flags` when none is).
    pub has_flags: bool,
}

/// Experience continuity needs hash-key overrides kept per person, which hedgerow does not
/// keep: refused rather than stored and ignored.
fn continuity(on: Option<bool>) -> Result<bool> {
    match on {
        Some(true) => Err(Invalid {
            attr: "ensure_experience_continuity",
            message: "ensure_experience_continuity is not supported yet: hedgerow keeps no \
                      hash key overrides across identify"
                .into(),
        }
        .into()),
        other => Ok(other.unwrap_or(false)),
    }
}

impl Engine {
    /// The remote config of the project `token` names.
    pub fn remote_config(&self, token: &str) -> Result<RemoteConfig> {
        let project = self.project_of_token(token)?;
        Ok(RemoteConfig {
            settings: self.meta.project_settings(project.id)?,
            has_flags: self.meta.live_flags(project.id)?.iter().any(|f| f.active),
            project,
        })
    }

    pub fn create_flag(&self, team: TeamId, f: FlagFields) -> Result<FeatureFlag> {
        let key = f.key.ok_or(Invalid {
            attr: "key",
            message: "This field is required.".into(),
        })?;
        flags::validate_key(&key)?;
        let filters = filters_of(
            f.filters.unwrap_or_else(|| Value::Object(Map::new())),
            f.rollout_percentage,
        )?;
        let new = NewFlag {
            key,
            name: name_of(f.name)?,
            filters,
            active: f.active.unwrap_or(true),
            ensure_experience_continuity: continuity(f.ensure_experience_continuity)?,
        };
        self.check_cohorts(team, &new.filters)?;
        Ok(self.meta.insert_flag(team, &new, self.clock.now())?)
    }

    /// Every cohort a flag's conditions name is a live cohort of the project.
    fn check_cohorts(&self, team: TeamId, f: &Filters) -> Result<()> {
        for id in flags::cohorts_named(f) {
            match self.meta.cohort(team, id)? {
                Some(c) if !c.deleted => {}
                _ => {
                    return Err(Invalid {
                        attr: "filters",
                        message: format!("There is no cohort {id} in this project"),
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// A flag of the project; a deleted one too (PostHog shows it with `deleted: true`).
    pub fn flag(&self, team: TeamId, id: i64) -> Result<FeatureFlag> {
        self.meta.flag(team, id)?.ok_or(FlagsError::NoFlag(id))
    }

    /// The project's live flags, in id order.
    pub fn flags(&self, team: TeamId) -> Result<std::sync::Arc<Vec<FeatureFlag>>> {
        Ok(self.meta.live_flags(team)?)
    }

    /// Changes the fields given, each checked as on create. Filters without `groups` keep
    /// the flag's condition sets (as PostHog's PATCH does) and replace the rest; a
    /// top-level `rollout_percentage` alone changes a flag whose one condition set has no
    /// property filters, and is refused for any other.
    pub fn update_flag(&self, team: TeamId, id: i64, f: FlagFields) -> Result<FeatureFlag> {
        let mut flag = self.flag(team, id)?;
        if let Some(key) = f.key {
            flags::validate_key(&key)?;
            flag.key = key;
        }
        if let Some(name) = f.name {
            flag.name = name_of(Some(name))?;
        }
        if let Some(mut doc) = f.filters {
            if let Value::Object(m) = &mut doc
                && !m.contains_key("groups")
            {
                let kept = serde_json::to_value(&flag.filters.groups).unwrap_or_default();
                m.insert("groups".into(), kept);
            }
            flag.filters = filters_of(doc, None)?;
            self.check_cohorts(team, &flag.filters)?;
        }
        if let Some(r) = f.rollout_percentage {
            match &mut flag.filters.groups[..] {
                [only] if only.properties.is_empty() => only.rollout_percentage = Some(r),
                _ => {
                    return Err(Invalid {
                        attr: "rollout_percentage",
                        message: "rollout_percentage alone changes only a flag with one \
                                  condition set without property filters; send filters instead"
                            .into(),
                    }
                    .into());
                }
            }
            flags::prepare_filters(&mut flag.filters)?;
        }
        if let Some(a) = f.active {
            flag.active = a;
        }
        if let Some(d) = f.deleted {
            flag.deleted = d;
        }
        if f.ensure_experience_continuity.is_some() {
            flag.ensure_experience_continuity = continuity(f.ensure_experience_continuity)?;
        }
        Ok(self.meta.update_flag(&flag, self.clock.now())?)
    }

    /// Soft-deletes a flag: it stops being evaluated and frees its key.
    pub fn delete_flag(&self, team: TeamId, id: i64) -> Result<FeatureFlag> {
        self.update_flag(
            team,
            id,
            FlagFields {
                deleted: Some(true),
                ..Default::default()
            },
        )
    }

    /// The project a `/flags` or remote-config token names.
    pub fn project_of_token(&self, token: &str) -> Result<Project> {
        if token.is_empty() {
            return Err(FlagsError::UnknownToken);
        }
        self.project_for_token(token)?
            .ok_or(FlagsError::UnknownToken)
    }

    /// Group type name → index, for the types the project has seen.
    pub fn group_type_mapping(&self, team: TeamId) -> Result<Vec<(String, u8)>> {
        Ok(self.meta.group_types_of(team)?)
    }

    /// The cohorts `flags` name (and the cohorts those name) that an SDK can evaluate
    /// itself, as the local-evaluation definitions carry them (PostHog's `cohorts`): id →
    /// the cohort's property group. Only dynamic cohorts defined by person properties and
    /// other cohorts qualify; a static, query or behavioural cohort is left out, so an SDK
    /// asks `/flags` for the flags that name it.
    pub fn local_cohorts(&self, team: TeamId, flags: &[FeatureFlag]) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        let mut queue: Vec<i64> = flags
            .iter()
            .flat_map(|f| flags::cohorts_named(&f.filters))
            .collect();
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = queue.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(c) = self.meta.cohort(team, id)? else {
                continue;
            };
            let group = c
                .filters
                .as_ref()
                .and_then(|f| f.get("properties"))
                .filter(|g| !g.is_null());
            let (Some(group), false, true, false) =
                (group, c.is_static, c.query.is_none(), c.deleted)
            else {
                continue;
            };
            let mut named = Vec::new();
            if locally_evaluable(group, &mut named) {
                queue.extend(named);
                out.insert(id.to_string(), group.clone());
            }
        }
        Ok(out)
    }

    /// Every active flag of the project (or the ones asked for) evaluated for the request's
    /// person and groups.
    pub fn evaluate_flags(&self, team: TeamId, req: &FlagsRequest) -> Result<Vec<FlagAnswer>> {
        let all = self.meta.live_flags(team)?;
        let wanted = |f: &&FeatureFlag| {
            f.active
                && req
                    .only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|k| k == &f.key))
        };
        let flags: Vec<&FeatureFlag> = all.iter().filter(wanted).collect();
        if flags.is_empty() {
            return Ok(Vec::new());
        }
        let mut person_properties = Map::new();
        let needs_person = flags
            .iter()
            .any(|f| f.filters.groups.iter().any(|c| !c.properties.is_empty()));
        if needs_person && !req.distinct_id.is_empty() {
            let id = DistinctId::new(req.distinct_id.clone());
            if let Some(pid) = self.person_store.person_id_of(team, &id)?
                && let Some(p) = self.person_store.person(team, pid)?
            {
                person_properties = p.properties;
            }
        }
        person_properties.extend(req.person_properties.clone());
        let mut groups = HashMap::new();
        if !req.groups.is_empty() {
            for (name, index) in self.meta.group_types_of(team)? {
                let Some(key) = req.groups.get(&name) else {
                    continue;
                };
                let key = match key {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut props = self
                    .person_store
                    .group(team, index, &key)?
                    .map(|g| g.properties)
                    .unwrap_or_default();
                if let Some(Value::Object(over)) = req.group_properties.get(&name) {
                    props.extend(over.clone());
                }
                groups.insert(index, (key, props));
            }
        }
        // The person's cohorts, when a flag asks (with the persons merged into it).
        let mut cohorts = std::collections::HashSet::new();
        let asks_cohorts = flags
            .iter()
            .any(|f| !flags::cohorts_named(&f.filters).is_empty());
        if asks_cohorts
            && let Some(pid) = self
                .person_store
                .person_id_of(team, &DistinctId::new(req.distinct_id.clone()))?
            && let Some(p) = self.person_store.person(team, pid)?
        {
            let mut uuids = vec![p.uuid.to_string()];
            uuids.extend(
                self.person_store
                    .merged_into(team, p.uuid)?
                    .into_iter()
                    .map(|u| u.to_string()),
            );
            cohorts.extend(self.meta.cohorts_of_person(team, &uuids)?);
        }
        let subject = Subject {
            distinct_id: &req.distinct_id,
            person_properties,
            groups,
            now: Utc::now(),
            cohorts,
        };
        Ok(flags
            .into_iter()
            .map(|f| FlagAnswer {
                id: f.id,
                key: f.key.clone(),
                version: f.version,
                name: f.name.clone(),
                evaluation: evaluate(f, &subject),
            })
            .collect())
    }
}

/// Whether an SDK can evaluate a cohort's property group itself: groups of person-property
/// filters and cohort references (whose ids go to `named`).
fn locally_evaluable(group: &Value, named: &mut Vec<i64>) -> bool {
    match group.get("values") {
        Some(Value::Array(values)) => values.iter().all(|v| locally_evaluable(v, named)),
        Some(_) => false,
        None => match group.get("type").and_then(Value::as_str) {
            Some("person") | None => group.get("key").is_some_and(Value::is_string),
            Some("cohort") => match flags::cohort_id(group.get("value").unwrap_or(&Value::Null)) {
                Some(id) => {
                    named.push(id);
                    true
                }
                None => false,
            },
            Some(_) => false,
        },
    }
}
