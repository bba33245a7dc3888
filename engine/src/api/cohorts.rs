//! Cohorts: their CRUD, their members, and their calculation.
//!
//! The rules, kept here for every caller:
//! - a static cohort's members are the persons added to it (by person id or uuid, by
//!   distinct id, or from a CSV of either); it is never calculated;
//! - a dynamic cohort is defined by PostHog's `filters` (person properties, behavioral
//!   filters, other cohorts) or by a HogQL `query`; the definition is checked when stored
//!   (it must compile and plan), and its members are calculated at once, on demand
//!   (`recalculate_cohort`) and on a schedule;
//! - a calculation replaces the members whole, unless the definition changed meanwhile;
//!   a failed one keeps the old members and counts in `errors_calculating`;
//! - deleting is soft (`deleted: true`, members dropped), as PostHog.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::Engine;
use crate::error::{ErrorKind, HasKind};
use crate::insights::{self, FilterContext};
use crate::meta::{Cohort, MetaError, NewCohort, Project};
use crate::model::{DistinctId, TeamId};
use crate::persons::store::StoreError;
use crate::persons::{Page, Person, PersonKey};
use crate::query::{Modifiers, QueryError};

/// Why a cohort operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CohortsError {
    #[error("Not found.")]
    NoCohort(i64),
    /// A field is invalid: which, and why.
    #[error("{1}")]
    Invalid(&'static str, String),
    /// The definition does not run: why, as the query said.
    #[error("The cohort's definition does not run: {0}")]
    Definition(#[source] QueryError),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl HasKind for CohortsError {
    fn kind(&self) -> ErrorKind {
        match self {
            CohortsError::NoCohort(_) => ErrorKind::NotFound,
            CohortsError::Invalid(..) => ErrorKind::InvalidInput,
            CohortsError::Definition(e) => match e.kind() {
                ErrorKind::Internal => ErrorKind::Internal,
                ErrorKind::Unavailable | ErrorKind::TooManyRequests => e.kind(),
                _ => ErrorKind::InvalidInput,
            },
            CohortsError::Meta(e) => e.kind(),
            CohortsError::Store(e) => e.kind(),
        }
    }
    fn code(&self) -> &'static str {
        match self {
            CohortsError::Definition(_) => "invalid_input",
            CohortsError::Meta(e) => e.code(),
            CohortsError::Store(e) => e.code(),
            other => other.kind().default_code(),
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            CohortsError::Invalid(a, _) => Some((*a).to_owned()),
            CohortsError::Definition(_) => Some("filters".into()),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            CohortsError::Definition(e) => e.retry_after(),
            CohortsError::Meta(e) => e.retry_after(),
            _ => None,
        }
    }
}

type Result<T, E = CohortsError> = std::result::Result<T, E>;

/// Longest cohort name, as PostHog's model.
pub const MAX_COHORT_NAME: usize = 400;
/// Most persons one request adds to a static cohort.
pub const MAX_STATIC_ADD: usize = 100_000;

/// The fields a create or an update sends; an update changes only the ones present.
#[derive(Debug, Clone, Default)]
pub struct CohortFields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub filters: Option<Value>,
    pub query: Option<Value>,
    pub is_static: Option<bool>,
    pub deleted: Option<bool>,
    /// Static cohorts: persons to add, by integer id or uuid.
    pub person_ids: Option<Vec<Value>>,
    /// Static cohorts: persons to add, by distinct id.
    pub distinct_ids: Option<Vec<String>>,
    /// Static cohorts: a CSV of persons to add (one per row: a distinct id, or a person
    /// uuid in a column headed `person_id`).
    pub csv: Option<String>,
}

impl CohortFields {
    fn adds_members(&self) -> bool {
        self.person_ids.is_some() || self.distinct_ids.is_some() || self.csv.is_some()
    }
}

/// What a cohort's members are made of, once the fields are read.
struct Additions {
    person_ids: Vec<Value>,
    distinct_ids: Vec<String>,
}

/// The rows of an uploaded CSV: distinct ids, or person ids when the header names
/// `person_id` (or `uuid`); an optional header row of `distinct_id` is skipped.
fn read_csv(text: &str) -> Result<Additions> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut add = Additions {
        person_ids: Vec::new(),
        distinct_ids: Vec::new(),
    };
    let first = lines.next();
    let cell = |l: &str| {
        l.split(',')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"')
            .to_owned()
    };
    let (by_person, skip_first) = match first.map(cell).as_deref() {
        Some("person_id") | Some("uuid") | Some("id") => (true, true),
        Some("distinct_id") | Some("distinct_ids") => (false, true),
        _ => (false, false),
    };
    for l in first.filter(|_| !skip_first).into_iter().chain(lines) {
        let c = cell(l);
        if c.is_empty() {
            continue;
        }
        match by_person {
            true => add.person_ids.push(Value::String(c)),
            false => add.distinct_ids.push(c),
        }
    }
    Ok(add)
}

fn name_of(name: Option<String>) -> Result<String> {
    let name = name.map(|n| n.trim().to_owned()).unwrap_or_default();
    if name.is_empty() {
        return Err(CohortsError::Invalid(
            "name",
            "This field is required.".into(),
        ));
    }
    if name.chars().count() > MAX_COHORT_NAME {
        return Err(CohortsError::Invalid(
            "name",
            format!("Ensure this field has no more than {MAX_COHORT_NAME} characters."),
        ));
    }
    Ok(name)
}

/// The members' uuids of a calculation's result: the first column, in any id form.
fn member_ids(run: &crate::query::HogQLRun) -> Vec<String> {
    let mut out = Vec::new();
    for b in &run.batches {
        if b.num_columns() == 0 {
            continue;
        }
        let col = b.column(0);
        for row in 0..col.len() {
            if let Some(bytes) = crate::storage::ids::id_at(col.as_ref(), row) {
                out.push(uuid::Uuid::from_bytes(bytes).to_string());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl Engine {
    fn filter_cx(&self, project: &Project) -> FilterContext {
        FilterContext::events(
            project.timezone.parse().unwrap_or(chrono_tz::UTC),
            self.clock.now(),
        )
    }

    /// The project's live cohorts, newest first.
    pub fn cohorts(&self, team: TeamId) -> Result<Vec<Cohort>> {
        Ok(self.meta.cohorts(team)?)
    }

    /// A cohort of the project; a deleted one too (with `deleted: true`).
    pub fn cohort(&self, team: TeamId, id: i64) -> Result<Cohort> {
        self.meta
            .cohort(team, id)?
            .ok_or(CohortsError::NoCohort(id))
    }

    /// Makes a cohort. A dynamic one's definition must compile and plan, and its members
    /// are calculated before this returns; a static one takes the persons given.
    pub async fn create_cohort(&self, project: &Project, f: CohortFields) -> Result<Cohort> {
        let is_static = f.is_static.unwrap_or(false);
        let (filters, query) = (f.filters.clone(), f.query.clone());
        if is_static {
            if filters.as_ref().is_some_and(|v| !is_empty_filters(v)) || query.is_some() {
                return Err(CohortsError::Invalid(
                    "is_static",
                    "A static cohort has members, not filters or a query".into(),
                ));
            }
        } else {
            if f.adds_members() {
                return Err(CohortsError::Invalid(
                    "is_static",
                    "Only a static cohort takes persons, distinct ids or a CSV".into(),
                ));
            }
            self.check_definition(project, filters.as_ref(), query.as_ref())
                .await?;
        }
        let new = NewCohort {
            name: name_of(f.name.clone())?,
            description: f.description.clone().unwrap_or_default(),
            filters: (!is_static).then_some(filters).flatten(),
            query: (!is_static).then_some(query).flatten(),
            is_static,
        };
        // Every person named is found before anything is stored.
        let members = self.members_of(project.id, self.additions(&f)?).await?;
        let c = self
            .meta
            .insert_cohort(project.id, &new, self.clock.now())?;
        if is_static {
            self.store_members(project.id, c.id, &members)?;
            return self.cohort(project.id, c.id);
        }
        self.calculate(project, &c).await;
        self.cohort(project.id, c.id)
    }

    /// Changes the fields given, each checked as on create; a changed definition is
    /// calculated again at once. Persons given to a static cohort are added to it.
    pub async fn update_cohort(
        &self,
        project: &Project,
        id: i64,
        f: CohortFields,
    ) -> Result<Cohort> {
        let mut c = self.cohort(project.id, id)?;
        if let Some(s) = f.is_static
            && s != c.is_static
        {
            return Err(CohortsError::Invalid(
                "is_static",
                "A cohort cannot change between static and dynamic".into(),
            ));
        }
        if let Some(n) = f.name.clone() {
            c.name = name_of(Some(n))?;
        }
        if let Some(d) = f.description.clone() {
            c.description = d;
        }
        let mut redefined = false;
        if !c.is_static && (f.filters.is_some() || f.query.is_some()) {
            // One or the other defines the cohort: giving one drops the other.
            let (filters, query) = match (&f.filters, &f.query) {
                (Some(fl), None) => (Some(fl.clone()), None),
                (None, Some(q)) => (None, Some(q.clone())),
                (fl, q) => (fl.clone(), q.clone()),
            };
            self.check_definition(project, filters.as_ref(), query.as_ref())
                .await?;
            c.filters = filters;
            c.query = query;
            redefined = true;
        } else if c.is_static
            && (f.query.is_some() || f.filters.as_ref().is_some_and(|v| !is_empty_filters(v)))
        {
            return Err(CohortsError::Invalid(
                "is_static",
                "A static cohort has members, not filters or a query".into(),
            ));
        }
        if !c.is_static && f.adds_members() {
            return Err(CohortsError::Invalid(
                "is_static",
                "Only a static cohort takes persons, distinct ids or a CSV".into(),
            ));
        }
        if let Some(d) = f.deleted {
            c.deleted = d;
        }
        c.is_calculating = redefined && !c.deleted;
        let members = self.members_of(project.id, self.additions(&f)?).await?;
        let c = self.meta.update_cohort(&c, self.clock.now())?;
        if c.is_static && !c.deleted {
            self.store_members(project.id, c.id, &members)?;
        } else if redefined && !c.deleted {
            self.calculate(project, &c).await;
        }
        self.cohort(project.id, c.id)
    }

    /// Calculates a dynamic cohort's members now (a static cohort is returned as it is).
    pub async fn recalculate_cohort(&self, project: &Project, id: i64) -> Result<Cohort> {
        let c = self.cohort(project.id, id)?;
        if c.deleted {
            return Err(CohortsError::NoCohort(id));
        }
        if !c.is_static {
            self.calculate(project, &c).await;
        }
        self.cohort(project.id, id)
    }

    /// Adds persons to a static cohort.
    pub async fn add_to_static_cohort(
        &self,
        team: TeamId,
        id: i64,
        f: CohortFields,
    ) -> Result<Cohort> {
        let c = self.cohort(team, id)?;
        if c.deleted {
            return Err(CohortsError::NoCohort(id));
        }
        if !c.is_static {
            return Err(CohortsError::Invalid(
                "is_static",
                "Only a static cohort takes persons".into(),
            ));
        }
        let members = self.members_of(team, self.additions(&f)?).await?;
        self.store_members(team, id, &members)?;
        self.cohort(team, id)
    }

    /// Removes one person (by id or uuid) from a static cohort.
    pub async fn remove_from_static_cohort(
        &self,
        team: TeamId,
        id: i64,
        person: &str,
    ) -> Result<Cohort> {
        let c = self.cohort(team, id)?;
        if !c.is_static || c.deleted {
            return Err(CohortsError::Invalid(
                "person_id",
                "Only a static cohort's persons can be removed one by one".into(),
            ));
        }
        let uuid = self.member_uuid(team, &Value::String(person.to_owned()))?;
        let gone = self
            .meta
            .remove_cohort_person(team, id, &uuid, self.clock.now())?;
        if !gone {
            return Err(CohortsError::Invalid(
                "person_id",
                format!("Person {person} is not in cohort {id}"),
            ));
        }
        self.cohort(team, id)
    }

    /// One page of a cohort's members, as persons (a member whose person has been merged
    /// away shows as the person it went into).
    pub async fn cohort_persons(
        &self,
        team: TeamId,
        id: i64,
        limit: usize,
        offset: usize,
    ) -> Result<Page<Person>> {
        let c = self.cohort(team, id)?;
        if c.deleted {
            return Err(CohortsError::NoCohort(id));
        }
        self.persons_settled().await;
        let (uuids, count) = self.meta.cohort_members(team, id, limit, offset)?;
        let overrides = self.person_store.overrides(team)?;
        let mut results: Vec<Person> = Vec::with_capacity(uuids.len());
        for u in uuids {
            let current = overrides.get(&u).cloned().unwrap_or(u);
            let Some(uuid) = current.parse().ok() else {
                continue;
            };
            if let Some(row) = self.person_store.person_by_uuid(team, uuid)?
                && let Some(p) = self.person_store.full_person(team, row.id)?
                && !results.iter().any(|r| r.id == p.id)
            {
                results.push(p);
            }
        }
        Ok(Page { results, count })
    }

    /// The live cohorts a person (by integer id or uuid) belongs to, counting the persons
    /// merged into it.
    pub async fn cohorts_of_person(&self, team: TeamId, key: PersonKey) -> Result<Vec<Cohort>> {
        let person = self
            .person(team, key)
            .await
            .map_err(|e| CohortsError::Invalid("person_id", e.to_string()))?;
        let mut uuids = vec![person.uuid.to_string()];
        uuids.extend(
            self.person_store
                .merged_into(team, person.uuid)?
                .into_iter()
                .map(|u| u.to_string()),
        );
        let ids = self.meta.cohorts_of_person(team, &uuids)?;
        let mut out = Vec::new();
        for id in ids {
            if let Some(c) = self.meta.cohort(team, id)?
                && !c.deleted
            {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Recalculates every live dynamic cohort, every `every`, until the engine shuts down.
    pub fn spawn_cohort_scheduler(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut stop = self.shutdown.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
                let Some(engine) = weak.upgrade() else { return };
                let n = engine.recalculate_cohorts().await;
                info!(cohorts = n, "dynamic cohorts recalculated");
            }
        })
    }

    /// Recalculates every live dynamic cohort of every project; how many were.
    pub async fn recalculate_cohorts(&self) -> usize {
        let cohorts = match self.meta.dynamic_cohorts() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the cohorts to recalculate");
                return 0;
            }
        };
        let mut projects: HashMap<TeamId, Option<Project>> = HashMap::new();
        let mut n = 0;
        for c in cohorts {
            let project = projects
                .entry(c.team)
                .or_insert_with(|| self.project(c.team).ok().flatten());
            if let Some(p) = project.clone() {
                self.calculate(&p, &c).await;
                n += 1;
            }
        }
        n
    }

    /// The definition compiles and plans (a query that runs with `LIMIT 0`).
    async fn check_definition(
        &self,
        project: &Project,
        filters: Option<&Value>,
        query: Option<&Value>,
    ) -> Result<()> {
        let text = insights::cohort::definition_query(filters, query, &self.filter_cx(project))
            .map_err(|e| {
                CohortsError::Invalid(
                    if query.is_some() { "query" } else { "filters" },
                    e.to_string(),
                )
            })?;
        let probe = format!("SELECT * FROM ({text}) LIMIT 0");
        let cancel = CancellationToken::new();
        self.query
            .run_hogql(
                project,
                &probe,
                &HashMap::new(),
                Modifiers::default(),
                &cancel,
            )
            .await
            .map_err(CohortsError::Definition)?;
        Ok(())
    }

    /// Calculates `c`'s members and stores them; a failure is logged and counted on the
    /// cohort (its old members stay).
    async fn calculate(&self, project: &Project, c: &Cohort) {
        let result = async {
            let text = insights::cohort::definition_query(
                c.filters.as_ref(),
                c.query.as_ref(),
                &self.filter_cx(project),
            )
            .map_err(|e| e.to_string())?;
            let cancel = CancellationToken::new();
            let whole = Modifiers {
                whole: true,
                ..Modifiers::default()
            };
            let run = self
                .query
                .run_hogql(project, &text, &HashMap::new(), whole, &cancel)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(member_ids(&run))
        }
        .await;
        let stored = match result {
            Ok(people) => self
                .meta
                .set_cohort_people(c.team, c.id, c.version, &people, self.clock.now())
                .map(|_| ()),
            Err(why) => {
                tracing::warn!(cohort = c.id, error = %why, "a cohort's calculation failed");
                self.meta.cohort_failed(c.team, c.id, &why)
            }
        };
        if let Err(e) = stored {
            tracing::error!(cohort = c.id, error = %e, "cannot store a cohort's calculation");
        }
        // Queries that read the cohort's members must not be answered from the cache.
        self.query.bump_epoch();
    }

    fn additions(&self, f: &CohortFields) -> Result<Additions> {
        let mut add = Additions {
            person_ids: f.person_ids.clone().unwrap_or_default(),
            distinct_ids: f.distinct_ids.clone().unwrap_or_default(),
        };
        if let Some(csv) = &f.csv {
            let more = read_csv(csv)?;
            add.person_ids.extend(more.person_ids);
            add.distinct_ids.extend(more.distinct_ids);
        }
        let n = add.person_ids.len() + add.distinct_ids.len();
        if n > MAX_STATIC_ADD {
            return Err(CohortsError::Invalid(
                "person_ids",
                format!("At most {MAX_STATIC_ADD} persons can be added at once, got {n}"),
            ));
        }
        Ok(add)
    }

    /// A person's uuid from an integer id or a uuid; unknown ones are refused by name.
    fn member_uuid(&self, team: TeamId, v: &Value) -> Result<String> {
        let raw = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(CohortsError::Invalid(
                    "person_ids",
                    format!("a person is named by its id or uuid, got {other}"),
                ));
            }
        };
        let unknown = || CohortsError::Invalid("person_ids", format!("There is no person {raw}"));
        let row = match PersonKey::parse(&raw).ok_or_else(unknown)? {
            PersonKey::Id(id) => self.person_store.person(team, id)?,
            PersonKey::Uuid(u) => self.person_store.person_by_uuid(team, u)?,
        };
        Ok(row.ok_or_else(unknown)?.uuid.to_string())
    }

    /// The uuids of the persons named: every one must exist (a distinct id without a
    /// person is refused by name, not dropped).
    async fn members_of(&self, team: TeamId, add: Additions) -> Result<Vec<String>> {
        if add.person_ids.is_empty() && add.distinct_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.persons_settled().await;
        let mut uuids = Vec::with_capacity(add.person_ids.len() + add.distinct_ids.len());
        for p in &add.person_ids {
            uuids.push(self.member_uuid(team, p)?);
        }
        let mut missing = Vec::new();
        for d in &add.distinct_ids {
            match self
                .person_store
                .person_id_of(team, &DistinctId::from(d.as_str()))?
                .map(|pid| self.person_store.person(team, pid))
                .transpose()?
                .flatten()
            {
                Some(p) => uuids.push(p.uuid.to_string()),
                None => missing.push(d.clone()),
            }
        }
        if !missing.is_empty() {
            let shown: Vec<&String> = missing.iter().take(10).collect();
            return Err(CohortsError::Invalid(
                "distinct_ids",
                format!(
                    "{} distinct ids have no person (none was added): {shown:?}{}",
                    missing.len(),
                    if missing.len() > 10 { " …" } else { "" }
                ),
            ));
        }
        Ok(uuids)
    }

    /// Adds members to a static cohort.
    fn store_members(&self, team: TeamId, id: i64, uuids: &[String]) -> Result<()> {
        if uuids.is_empty() {
            return Ok(());
        }
        self.meta
            .add_cohort_people(team, id, uuids, self.clock.now())?;
        self.query.bump_epoch();
        Ok(())
    }
}

/// PostHog sends `filters: {properties: {type: "AND", values: []}}` with static cohorts:
/// groups (and lists) holding no filter at any depth.
fn is_empty_filters(v: &Value) -> bool {
    fn empty(p: &Value) -> bool {
        match p {
            Value::Null => true,
            Value::Array(a) => a.iter().all(empty),
            Value::Object(o) if !o.contains_key("key") => o.get("values").is_none_or(empty),
            _ => false,
        }
    }
    v.get("properties").is_none_or(empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_rows_are_distinct_ids_or_person_ids_by_header() {
        let a = read_csv("distinct_id\nu1\n\"u2\", ignored\n\nu3\n").unwrap();
        assert_eq!(a.distinct_ids, vec!["u1", "u2", "u3"]);
        let a = read_csv("u1\nu2").unwrap();
        assert_eq!(a.distinct_ids, vec!["u1", "u2"]);
        let a = read_csv("person_id\n0190a1b2-0000-7000-8000-000000000001\n").unwrap();
        assert_eq!(
            a.person_ids,
            vec![json!("0190a1b2-0000-7000-8000-000000000001")]
        );
        assert!(a.distinct_ids.is_empty());
    }

    #[test]
    fn posthogs_empty_filters_of_a_static_cohort_are_empty() {
        assert!(is_empty_filters(&json!({})));
        assert!(is_empty_filters(&json!({"properties": []})));
        assert!(is_empty_filters(
            &json!({"properties": {"type": "AND", "values": []}})
        ));
        assert!(is_empty_filters(
            &json!({"properties": {"type": "OR", "values": [{"type": "AND", "values": []}]}})
        ));
        assert!(!is_empty_filters(
            &json!({"properties": [{"key": "a", "value": 1}]})
        ));
        assert!(!is_empty_filters(
            &json!({"properties": {"type": "OR", "values": [{"key": "a", "value": 1}]}})
        ));
    }
}
