//! An event after normalization, and the batch the WAL records.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{CommandRecord, TeamId};

/// One event after normalization: what the WAL records and storage keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub uuid: Uuid,
    pub event: String,
    pub distinct_id: String,
    /// When the event happened, after sent_at/offset skew correction and the 23 h clamp.
    #[serde(with = "chrono::serde::ts_microseconds")]
    pub timestamp: DateTime<Utc>,
    /// When hedgerow received it.
    #[serde(with = "chrono::serde::ts_microseconds")]
    pub created_at: DateTime<Utc>,
    /// Properties, with top-level `$set`/`$set_once` already lifted in.
    pub properties: serde_json::Map<String, serde_json::Value>,
}

/// One accepted request: the unit the WAL writes, fsyncs and replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestBatch {
    pub team_id: TeamId,
    /// Sent with `historical_migration: true`.
    #[serde(default)]
    pub historical: bool,
    pub events: Vec<Event>,
    /// A persons API command (then `events` is empty): it travels through the WAL so it is
    /// applied in order with events, once, and replayed after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandRecord>,
    /// Who sent the events when it was the persons API (`api:<key label>`), for the
    /// activity log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// Whether the event may create or change a person: false only when
/// `properties.$process_person_profile` is JSON `false`.
pub fn process_person_profile(props: &serde_json::Map<String, serde_json::Value>) -> bool {
    props.get("$process_person_profile") != Some(&serde_json::Value::Bool(false))
}
