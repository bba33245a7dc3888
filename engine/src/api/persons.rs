//! Persons: list, read, change, delete and split them; their activity and their
//! properties over time (spec §4.1 endpoints 1–13).
//!
//! Every operation keeps the rules itself, so a caller cannot forget one:
//! - a read first waits (up to 10 s) until the person changes of every record acknowledged
//!   so far are stored, so the API reads its own writes and capture's;
//! - a change travels through the WAL like capture does, in order with events, and the
//!   call returns once it is applied: property changes as events (`$set`,
//!   `$delete_person_property`) sent as the person's first distinct id, deletion and split
//!   as commands;
//! - a change to which persons exist (deletion, split) moves the query epoch, so no cached
//!   query result shows the persons as they were.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};
use tracing::warn;
use uuid::Uuid;

use crate::Engine;
use crate::error::{ErrorKind, HasKind};
use crate::ingest::CaptureError;
use crate::meta::{MetaError, Project};
use crate::model::{
    CommandRecord, DistinctId, Event, IngestBatch, PersonCommand, PersonUuid, TeamId,
};
use crate::persons::Person;
use crate::persons::facade::{Page, PersonKey, PropertiesTimeline, TimelinePoint};
use crate::persons::store::{Activity, PersonFilter, StoreError};
use crate::query::{self, QueryError};

/// Why a persons operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PersonsError {
    #[error("no person {0}")]
    NoPerson(i64),
    #[error("no person with uuid {0}")]
    NoPersonWithUuid(PersonUuid),
    #[error("no such project")]
    NoProject(TeamId),
    /// A property change is sent as one of the person's distinct ids, and it has none.
    #[error("this person has no distinct id to send the change as")]
    NoDistinctId(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl HasKind for PersonsError {
    fn kind(&self) -> ErrorKind {
        match self {
            PersonsError::NoPerson(_)
            | PersonsError::NoPersonWithUuid(_)
            | PersonsError::NoProject(_) => ErrorKind::NotFound,
            PersonsError::NoDistinctId(_) => ErrorKind::Conflict,
            PersonsError::Store(e) => e.kind(),
            PersonsError::Capture(e) => e.kind(),
            PersonsError::Query(e) => e.kind(),
            PersonsError::Meta(e) => e.kind(),
        }
    }
    fn code(&self) -> &'static str {
        match self {
            PersonsError::NoDistinctId(_) => "person_without_distinct_id",
            PersonsError::Store(e) => e.code(),
            PersonsError::Capture(e) => e.code(),
            PersonsError::Query(e) => e.code(),
            PersonsError::Meta(e) => e.code(),
            PersonsError::NoPerson(_)
            | PersonsError::NoPersonWithUuid(_)
            | PersonsError::NoProject(_) => "not_found",
        }
    }
    fn attr(&self) -> Option<String> {
        match self {
            PersonsError::Store(e) => e.attr(),
            PersonsError::Capture(e) => e.attr(),
            PersonsError::Query(e) => e.attr(),
            PersonsError::Meta(e) => e.attr(),
            _ => None,
        }
    }
    fn retry_after(&self) -> Option<u64> {
        match self {
            PersonsError::Store(e) => e.retry_after(),
            PersonsError::Capture(e) => e.retry_after(),
            PersonsError::Query(e) => e.retry_after(),
            PersonsError::Meta(e) => e.retry_after(),
            _ => None,
        }
    }
}

type Result<T, E = PersonsError> = std::result::Result<T, E>;

/// Who made a change through the API, for the activity log: the key's label.
fn api_actor(key_label: &str) -> String {
    format!("api:{key_label}")
}

/// Most events the properties timeline reads.
const TIMELINE_MAX_EVENTS: usize = 50_000;

impl Engine {
    /// Waits (up to 10 s) until the person changes of every record acknowledged so far are
    /// stored: the persons API reads its own and capture's writes.
    pub(super) async fn persons_settled(&self) -> bool {
        let target = self.wal.last_seq();
        self.persons_through(target).await
    }

    async fn persons_through(&self, seq: u64) -> bool {
        let mut rx = self.persons_seq.clone();
        let ok = matches!(
            tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| *s >= seq)).await,
            Ok(Ok(_))
        );
        if !ok {
            warn!(
                seq,
                "person processing is more than 10 s behind; answering from what is stored"
            );
        }
        ok
    }

    /// Captures an event for the persons API (a `$set` or a `$delete_person_property`),
    /// through the same pipeline as capture, and waits until it is applied.
    async fn person_event(
        &self,
        team: TeamId,
        distinct_id: &DistinctId,
        event: &str,
        properties: Map<String, Value>,
        actor: &str,
    ) -> Result<u64, CaptureError> {
        let now = self.clock.now();
        let batch = IngestBatch {
            team_id: team,
            historical: false,
            events: vec![Event {
                uuid: Uuid::now_v7(),
                event: event.to_owned(),
                distinct_id: distinct_id.as_str().to_owned(),
                timestamp: now,
                created_at: now,
                properties,
            }],
            command: None,
            actor: Some(actor.to_owned()),
        };
        let seq = self.append_batch(&batch).await?;
        self.persons_through(seq).await;
        Ok(seq)
    }

    /// Applies a persons API command through the WAL, in order with events, and waits until
    /// it is applied.
    async fn person_command(
        &self,
        team: TeamId,
        command: PersonCommand,
        actor: &str,
    ) -> Result<u64, CaptureError> {
        let batch = IngestBatch {
            team_id: team,
            historical: false,
            events: Vec::new(),
            command: Some(CommandRecord {
                command,
                actor: actor.to_owned(),
                at: self.clock.now(),
            }),
            actor: None,
        };
        let seq = self.append_batch(&batch).await?;
        self.persons_through(seq).await;
        Ok(seq)
    }

    /// The person `key` names, as stored now (callers wait for the store first).
    fn find_person(&self, team: TeamId, key: PersonKey) -> Result<Person> {
        let store = &self.person_store;
        let id = match key {
            PersonKey::Id(n) => n,
            PersonKey::Uuid(u) => store
                .person_by_uuid(team, u)?
                .map(|p| p.id)
                .ok_or(PersonsError::NoPersonWithUuid(u))?,
        };
        store
            .full_person(team, id)?
            .ok_or(PersonsError::NoPerson(id))
    }

    /// Sends `set` as a `$set` event of the person's first distinct id.
    async fn set_properties(
        &self,
        p: &Person,
        set: Map<String, Value>,
        key_label: &str,
    ) -> Result<()> {
        let did = p
            .distinct_ids
            .first()
            .ok_or(PersonsError::NoDistinctId(p.id))?;
        let mut props = Map::new();
        props.insert("$set".into(), Value::Object(set));
        self.person_event(p.team, did, "$set", props, &api_actor(key_label))
            .await?;
        Ok(())
    }

    /// Sends a command about the person `key` names.
    async fn command_on(
        &self,
        team: TeamId,
        key: PersonKey,
        key_label: &str,
        make: impl FnOnce(i64) -> PersonCommand,
    ) -> Result<()> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        self.person_command(team, make(p.id), &api_actor(key_label))
            .await?;
        Ok(())
    }

    /// A page of the project's persons, newest first.
    pub async fn list_persons(
        &self,
        team: TeamId,
        filter: &PersonFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Page<Person>> {
        self.persons_settled().await;
        let (results, count) = self.person_store.list(team, filter, limit, offset)?;
        Ok(Page { results, count })
    }

    /// One person.
    pub async fn person(&self, team: TeamId, key: PersonKey) -> Result<Person> {
        self.persons_settled().await;
        self.find_person(team, key)
    }

    /// Sets properties on a person (PATCH: as a `$set` event) and returns the person after.
    pub async fn update_person(
        &self,
        team: TeamId,
        key: PersonKey,
        set: Map<String, Value>,
        key_label: &str,
    ) -> Result<Person> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        self.set_properties(&p, set, key_label).await?;
        self.find_person(team, PersonKey::Id(p.id))
    }

    /// Sets one property on a person (as a `$set` event).
    pub async fn set_person_property(
        &self,
        team: TeamId,
        key: PersonKey,
        name: String,
        value: Value,
        key_label: &str,
    ) -> Result<()> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        let mut set = Map::new();
        set.insert(name, value);
        self.set_properties(&p, set, key_label).await
    }

    /// Removes one property from a person (as a `$delete_person_property` event with
    /// `$unset`).
    pub async fn delete_person_property(
        &self,
        team: TeamId,
        key: PersonKey,
        name: String,
        key_label: &str,
    ) -> Result<()> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        let did = p.distinct_ids.first().cloned().unwrap_or_default();
        let mut props = Map::new();
        props.insert("$unset".into(), Value::Array(vec![Value::String(name)]));
        self.person_event(
            team,
            &did,
            "$delete_person_property",
            props,
            &api_actor(key_label),
        )
        .await?;
        Ok(())
    }

    /// Deletes a person and its distinct ids; with `delete_events`, queues the deletion of
    /// its events.
    pub async fn delete_person(
        &self,
        team: TeamId,
        key: PersonKey,
        delete_events: bool,
        key_label: &str,
    ) -> Result<()> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        let command = PersonCommand::Delete {
            ids: vec![p.id],
            distinct_ids: Vec::new(),
            delete_events,
        };
        self.person_command(team, command, &api_actor(key_label))
            .await?;
        self.query.bump_epoch();
        Ok(())
    }

    /// Deletes the persons `keys` name and those of `distinct_ids`. Persons that do not
    /// exist are skipped, as PostHog does: the call deletes what exists.
    pub async fn delete_persons(
        &self,
        team: TeamId,
        keys: &[PersonKey],
        distinct_ids: Vec<DistinctId>,
        delete_events: bool,
        key_label: &str,
    ) -> Result<()> {
        self.persons_settled().await;
        let mut ids = Vec::new();
        for key in keys {
            match self.find_person(team, *key) {
                Ok(p) => ids.push(p.id),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let command = PersonCommand::Delete {
            ids,
            distinct_ids,
            delete_events,
        };
        self.person_command(team, command, &api_actor(key_label))
            .await?;
        self.query.bump_epoch();
        Ok(())
    }

    /// Queues the deletion of a person's events (the person stays).
    pub async fn queue_event_deletion(
        &self,
        team: TeamId,
        key: PersonKey,
        key_label: &str,
    ) -> Result<()> {
        self.command_on(team, key, key_label, |id| PersonCommand::DeleteEvents {
            id,
        })
        .await
    }

    /// Queues the deletion of a person's recordings.
    pub async fn queue_recording_deletion(
        &self,
        team: TeamId,
        key: PersonKey,
        key_label: &str,
    ) -> Result<()> {
        self.command_on(team, key, key_label, |id| PersonCommand::DeleteRecordings {
            id,
        })
        .await
    }

    /// Gives each of a person's distinct ids its own person; the id the person was made
    /// from keeps it.
    pub async fn split_person(&self, team: TeamId, key: PersonKey, key_label: &str) -> Result<()> {
        let r = self
            .command_on(team, key, key_label, |id| PersonCommand::Split { id })
            .await;
        self.query.bump_epoch();
        r
    }

    /// A page of one person's activity, newest first. A deleted person's activity stays
    /// readable by its integer id.
    pub async fn person_activity(
        &self,
        team: TeamId,
        key: PersonKey,
        limit: usize,
        offset: usize,
    ) -> Result<Page<Activity>> {
        self.persons_settled().await;
        let person = match key {
            PersonKey::Id(n) => n,
            PersonKey::Uuid(_) => self.find_person(team, key)?.id,
        };
        let store = &self.person_store;
        let (results, count) = store.activity(team, Some(person), limit, offset)?;
        if count == 0 && store.full_person(team, person)?.is_none() {
            return Err(PersonsError::NoPerson(person));
        }
        Ok(Page { results, count })
    }

    /// A page of the activity of all the project's persons, newest first.
    pub async fn persons_activity(
        &self,
        team: TeamId,
        limit: usize,
        offset: usize,
    ) -> Result<Page<Activity>> {
        self.persons_settled().await;
        let (results, count) = self.person_store.activity(team, None, limit, offset)?;
        Ok(Page { results, count })
    }

    /// A person's properties over time (see [`PropertiesTimeline`]).
    pub async fn person_properties_timeline(
        &self,
        team: TeamId,
        key: PersonKey,
    ) -> Result<PropertiesTimeline> {
        self.persons_settled().await;
        let p = self.find_person(team, key)?;
        let project = self
            .meta
            .project(team)?
            .ok_or(PersonsError::NoProject(team))?;
        Ok(self.properties_timeline(&project, p.uuid).await?)
    }

    /// Rebuilds the timeline from the snapshots the person's events carry: one point per
    /// run of events with the same properties, with the run's first timestamp and its event
    /// count. Reads at most the person's first [`TIMELINE_MAX_EVENTS`] events with
    /// properties.
    async fn properties_timeline(
        &self,
        project: &Project,
        person: PersonUuid,
    ) -> Result<PropertiesTimeline, QueryError> {
        let text = format!(
            "SELECT timestamp, person.properties FROM events WHERE person_id = '{person}' \
             AND person.properties IS NOT NULL ORDER BY timestamp, uuid LIMIT {TIMELINE_MAX_EVENTS}"
        );
        let run = self
            .query
            .run_hogql(
                project,
                &text,
                &HashMap::new(),
                query::Modifiers::default(),
                &tokio_util::sync::CancellationToken::new(),
            )
            .await?;
        let mut points: Vec<TimelinePoint> = Vec::new();
        let mut last: Option<&str> = None;
        for row in &run.results {
            let (Some(ts), Some(props)) = (row.get(0), row.get(1).and_then(Value::as_str)) else {
                continue;
            };
            if last == Some(props) {
                if let Some(p) = points.last_mut() {
                    p.relevant_event_count += 1;
                }
                continue;
            }
            last = Some(props);
            points.push(TimelinePoint {
                timestamp: ts.clone(),
                properties: serde_json::from_str(props).unwrap_or(Value::Null),
                relevant_event_count: 1,
            });
        }
        Ok(PropertiesTimeline {
            points,
            effective_date_from: run.results.first().and_then(|r| r.get(0)).cloned(),
            effective_date_to: run.results.last().and_then(|r| r.get(0)).cloned(),
            truncated: run.results.len() >= TIMELINE_MAX_EVENTS,
        })
    }
}
