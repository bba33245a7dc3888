//! The shared nouns: project ids, person uuids, events, the batch the WAL records, and
//! person commands. They live in `hedgerow-capture` (capture produces them, and that crate
//! builds and fuzzes without the engine); every engine module may use them from here.

pub use hedgerow_capture::model::*;
