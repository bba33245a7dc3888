//! PostHog's wire shapes, built from the engine's typed results.

pub(crate) mod persons;
