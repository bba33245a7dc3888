//! PostHog's JSON shapes: what the engine's typed answers look like on the wire.

pub(crate) mod cohorts;
pub(crate) mod flags;
pub(crate) mod persons;
pub(crate) mod projects;
pub(crate) mod query;
