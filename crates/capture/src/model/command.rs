//! Persons API commands as the WAL records them, applied in order with events.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::DistinctId;

/// What the API asks of persons; it travels through the WAL like events so that it is
/// applied in order with them, exactly once, and replayed after a crash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum PersonCommand {
    /// Deletes persons (and their distinct ids); with `delete_events`, queues the deletion
    /// of their events.
    Delete {
        ids: Vec<i64>,
        #[serde(default)]
        distinct_ids: Vec<DistinctId>,
        delete_events: bool,
    },
    /// Queues the deletion of a person's events (the person stays).
    DeleteEvents { id: i64 },
    /// Queues the deletion of a person's recordings.
    DeleteRecordings { id: i64 },
    /// Gives each distinct id its own person; the id the person was made from keeps it.
    Split { id: i64 },
}

/// An API command as the WAL records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub command: PersonCommand,
    /// `api:<key label>`.
    pub actor: String,
    #[serde(with = "chrono::serde::ts_microseconds")]
    pub at: DateTime<Utc>,
}
