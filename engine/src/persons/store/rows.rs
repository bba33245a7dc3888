//! What the store keeps and what a commit writes: rows of persons, groups, activity,
//! deletion tasks and warnings, and the ordered changes of one commit.

use std::collections::BTreeMap;

use crate::model::{DistinctId, PersonUuid, TeamId};
use crate::persons::Person;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// A person's stored row (distinct ids live in their own table).
#[derive(Debug, Clone, PartialEq)]
pub struct PersonRow {
    pub id: i64,
    pub team: TeamId,
    pub uuid: PersonUuid,
    pub created_at: DateTime<Utc>,
    pub properties: Map<String, Value>,
    pub is_identified: bool,
    pub version: i64,
}

impl PersonRow {
    /// The person as the API shows it, with its distinct ids.
    pub fn into_person(self, distinct_ids: Vec<DistinctId>) -> Person {
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

/// A group: its type's index, its key and its properties.
#[derive(Debug, Clone, PartialEq)]
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
        distinct_id: DistinctId,
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
        old: PersonUuid,
        new: PersonUuid,
    },
    /// `distinct_id` sent events without person processing while it had no person: they
    /// are stored under its derived uuid, which an identify must later point at its person.
    Personless {
        team: TeamId,
        distinct_id: DistinctId,
    },
    /// `distinct_id`'s personless events were adopted by a person (an [`Op::Override`]
    /// says whose): it is no longer recorded as personless.
    Adopted {
        team: TeamId,
        distinct_id: DistinctId,
    },
    /// A new person took the uuid `old`: its events are its own again.
    ClearOverride {
        team: TeamId,
        old: PersonUuid,
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

/// An entry of a person's activity log.
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    pub team: TeamId,
    pub person_id: i64,
    pub person_uuid: PersonUuid,
    /// created, updated, merged, split, deleted, events_deletion_queued,
    /// recordings_deletion_queued, events_deleted.
    pub activity: String,
    /// Who did it: `api:<key label>` or `event:<event name>`.
    pub actor: String,
    pub detail: Value,
    pub at: DateTime<Utc>,
}

/// A deletion task to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub team: TeamId,
    /// `events` or `recordings`.
    pub kind: String,
    pub person_id: i64,
    pub person_uuid: PersonUuid,
    /// Every person_id the person's events may carry (its uuid, merged persons' uuids, the
    /// personless ids of its distinct ids).
    pub event_person_ids: Vec<String>,
    /// The person's distinct ids and text property values, kept only until the task ran:
    /// the run removes them from warnings and the query log.
    pub scrub: Vec<String>,
    pub actor: String,
    pub at: DateTime<Utc>,
}

/// A queued or finished deletion task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: i64,
    pub team: TeamId,
    pub kind: String,
    pub person_id: i64,
    pub person_uuid: PersonUuid,
    pub event_person_ids: Vec<String>,
    pub scrub: Vec<String>,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub rows_deleted: Option<u64>,
}

/// An ingestion warning as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WarningRow {
    pub team_id: i64,
    pub source: String,
    pub kind: String,
    pub details: Value,
    pub timestamp: DateTime<Utc>,
}

/// A changed person as a commit writes it (properties already JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct PersonWrite {
    pub id: i64,
    pub team: TeamId,
    pub uuid: PersonUuid,
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
