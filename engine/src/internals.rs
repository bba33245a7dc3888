//! The engine's inner stages, for its own micro-benchmarks (`benches/`) and the
//! integration tests that look inside (stored files, the buffer). Not an API: nothing
//! here is stable, and the binary uses none of it.

pub use crate::hogql::{functions, overrides, planner, schema};
pub use crate::ingest::{decode, normalize, payload};
pub use crate::persons::person_input;
pub use crate::persons::process::{Persons, RecordCtx};
pub use crate::persons::store::SqliteStore;
pub use crate::query::result::text_value;
pub use crate::storage::buffer::EventBuffer;
pub use crate::storage::inspect;
pub use crate::storage::schema::{events_schema, events_to_batch};
pub use hedgerow_hogql_syntax::{ast, parser, print};
pub use hedgerow_wal as wal;
