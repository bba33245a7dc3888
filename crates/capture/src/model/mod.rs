//! The shared nouns: project ids, person uuids, events, the batch the WAL records, and
//! person commands. Depends on nothing else in the engine; every other module may use it.

mod command;
mod event;
mod ids;

pub use command::{CommandRecord, PersonCommand};
pub use event::process_person_profile;
pub use event::{Event, IngestBatch};
pub use ids::{
    DistinctId, MAX_TOKEN_CHARS, PERSON_UUID_NAMESPACE, PersonUuid, TeamId, person_uuid,
    token_problem,
};

/// A project has at most this many group types (`$group_0` … `$group_4`).
pub const MAX_GROUP_TYPES: u8 = 5;
