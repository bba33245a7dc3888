//! The person store: persons, distinct ids, person-id overrides, groups, ingestion warnings,
//! the person activity log and deletion tasks.
//!
//! [`PersonStore`] is what the processor and the API need; [`SqliteStore`] implements it in
//! the data directory's SQLite file (a PostgreSQL store can implement it later). A commit
//! writes a batch of changes and the last WAL sequence they cover in one transaction, so a
//! replay after a crash starts right after what is stored and applies nothing twice.
//!
//! - `rows`: what is stored and what a commit writes ([`PersonRow`], [`Op`], [`ChangeSet`]…).
//! - `filter`: the persons list's filters and their SQL.
//! - `sqlite`: [`SqliteStore`].

pub(super) mod filter;
pub(super) mod rows;
mod sqlite;

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::Person;
use crate::error::{ErrorKind, HasKind};
use crate::model::{DistinctId, PersonUuid, TeamId};

pub(crate) use filter::PersonFilter;
pub(crate) use rows::{
    Activity, ChangeSet, GroupRow, NewTask, Op, PersonRow, PersonWrite, Task, WarningRow,
};
pub use sqlite::SqliteStore;

/// Why the person store failed or refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("person store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A filter the store cannot run (unknown operator, missing value…).
    #[error("{0}")]
    Invalid(String),
    /// A persons snapshot could not take the rows it was given (`SnapshotSink`).
    #[error("persons snapshot: {0}")]
    Snapshot(String),
    /// A `regex`/`not_regex` property filter whose pattern does not compile.
    #[error("property filter on {key:?}: bad regular expression: {source}")]
    BadRegex {
        key: String,
        #[source]
        source: regex::Error,
    },
}

impl HasKind for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Sqlite(_) | StoreError::Snapshot(_) => ErrorKind::Internal,
            StoreError::Invalid(_) | StoreError::BadRegex { .. } => ErrorKind::InvalidInput,
        }
    }
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Takes the rows a persons snapshot needs as the store reads them
/// ([`PersonStore::snapshot_changes`]); times are microseconds.
pub trait SnapshotSink {
    fn person(
        &mut self,
        uuid: &str,
        created_at: i64,
        properties: &str,
        is_identified: bool,
    ) -> Result<()>;
    fn distinct_id(&mut self, distinct_id: &str, person_uuid: &str) -> Result<()>;
    fn group(
        &mut self,
        index: i64,
        key: &str,
        created_at: i64,
        updated_at: i64,
        properties: &str,
    ) -> Result<()>;
    /// A person whose rows (and distinct ids) an older snapshot holds are stale: changed
    /// (its current rows come through `person`/`distinct_id`) or removed (`erased`: deleted,
    /// not merged away).
    fn changed_person(&mut self, uuid: &str, erased: bool);
    /// A group key whose rows (of any group type) an older snapshot holds are stale; the
    /// current rows of every group with this key come through `group`.
    fn changed_group(&mut self, key: &str);
}

pub trait PersonStore: Send + Sync {
    /// The last WAL sequence whose person changes are stored.
    fn last_seq(&self) -> u64;
    /// Bumped by every commit (readers cache on it).
    fn version(&self) -> u64;
    fn commit(&self, changes: &ChangeSet, seq: u64, next_person_id: i64) -> Result<()>;
    fn next_person_id(&self) -> Result<i64>;

    fn person_id_of(&self, team: TeamId, distinct_id: &DistinctId) -> Result<Option<i64>>;
    /// Whether `distinct_id` sent personless events while it had no person, not yet
    /// adopted by one ([`Op::Personless`]).
    fn was_personless(&self, team: TeamId, distinct_id: &DistinctId) -> Result<bool>;
    fn person(&self, team: TeamId, id: i64) -> Result<Option<PersonRow>>;
    fn person_by_uuid(&self, team: TeamId, uuid: PersonUuid) -> Result<Option<PersonRow>>;
    fn distinct_ids(&self, team: TeamId, id: i64) -> Result<Vec<DistinctId>>;
    /// Persons whose events were merged into `uuid` (the overrides pointing at it).
    fn merged_into(&self, team: TeamId, uuid: PersonUuid) -> Result<Vec<PersonUuid>>;
    fn group(&self, team: TeamId, index: u8, key: &str) -> Result<Option<GroupRow>>;

    fn list(
        &self,
        team: TeamId,
        filter: &PersonFilter,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Person>, u64)>;
    fn full_person(&self, team: TeamId, id: i64) -> Result<Option<Person>>;
    /// Old person_id → current one, for the team. Person ids here and in the rows below
    /// are text and plain uuids, as the events table and the query engine take them.
    fn overrides(&self, team: TeamId) -> Result<HashMap<String, String>>;
    /// Projects with overrides made at or before WAL seq `seq`, and those overrides: what
    /// can be folded into the files once the table covers `seq`.
    fn overrides_through(&self, seq: u64) -> Result<Vec<(TeamId, HashMap<String, String>)>>;
    /// Forgets overrides that were folded into the files (only those still mapping as given).
    fn forget_overrides(&self, team: TeamId, folded: &HashMap<String, String>) -> Result<()>;
    fn activity(
        &self,
        team: TeamId,
        person: Option<i64>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<Activity>, u64)>;
    fn warnings(&self, team: TeamId) -> Result<Vec<WarningRow>>;
    /// Streams to `sink` what changed in the project's persons, distinct ids and groups
    /// after revision `since` (a revision an earlier call returned), or every row when
    /// `since` is None, all as of one instant; returns that instant's revision.
    fn snapshot_changes(
        &self,
        team: TeamId,
        since: Option<u64>,
        sink: &mut dyn SnapshotSink,
    ) -> Result<u64>;
    /// Forgets the project's person removals at or before revision `through` (a snapshot
    /// built at `through` holds them).
    fn forget_removals(&self, team: TeamId, through: u64) -> Result<()>;
    fn group_rows(&self, team: TeamId) -> Result<Vec<GroupRow>>;

    fn pending_tasks(&self) -> Result<Vec<Task>>;
    /// Marks a task done, forgets its person ids, and logs the outcome.
    fn finish_task(&self, task: &Task, rows_deleted: u64, at: DateTime<Utc>) -> Result<()>;
    fn tasks(&self, team: TeamId) -> Result<Vec<Task>>;
    /// Removes every trace of these distinct ids from warnings, the query log and the
    /// personless ids, and marks the file for [`PersonStore::rewrite_file`] (which opening
    /// the store does if a rewrite is still pending).
    fn scrub(&self, team: TeamId, needles: &[String]) -> Result<()>;
    /// Rewrites the file so that no deleted byte remains in it (free pages, SQLite's WAL).
    fn rewrite_file(&self) -> Result<()>;
}
