//! The engine's public surface: the operations users do, one file each.
//!
//! Every method here is an `impl Engine` block and enforces its own rules (reads that
//! must see earlier writes wait for them; writes that change what queries see move the
//! query epoch), so the HTTP layer only decodes, calls one method and encodes.
//!
//! - `capture`: bodies and payloads in, durable receipts out.
//! - `query`: HogQL and the query API (status, cancel, log).
//! - `persons`: persons, groups, activity, merges, deletion.
//! - `projects`: projects, keys and tokens.
//! - `cohorts`: cohorts, their members and their calculation.
//! - `flags`: feature flag definitions and their evaluation.
//! - `tasks`: scheduled and background work (deletion tasks, metrics).

mod capture;
mod cohorts;
mod flags;
mod persons;
mod projects;
mod query;
mod tasks;

pub use capture::{CaptureBody, CaptureReceipt};
pub use cohorts::{CohortFields, CohortsError, MAX_COHORT_NAME, MAX_STATIC_ADD};
pub use flags::{
    FlagAnswer, FlagFields, FlagsError, FlagsRequest, MAX_FLAGS_BODY, RemoteConfig, read_flags_body,
};
pub use persons::PersonsError;
pub(crate) use projects::TokenCache;
pub use projects::{Access, ProjectsError};
pub use tasks::DeletionRun;
