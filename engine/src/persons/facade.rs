//! What the persons operations (`Engine`'s methods in `api/persons.rs`) take and give back:
//! how a caller names a person, a page of results, a person's properties over time.
//!
//! Typed, never JSON shapes: the binary builds PostHog's response bodies from these.

use serde_json::Value;

use crate::model::PersonUuid;

/// How a caller names a person: `{id}` of a person path, an integer id or a uuid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonKey {
    Id(i64),
    Uuid(PersonUuid),
}

impl PersonKey {
    /// An integer id, else a uuid; `None` when `raw` is neither.
    pub fn parse(raw: &str) -> Option<Self> {
        if let Ok(n) = raw.parse::<i64>() {
            Some(Self::Id(n))
        } else {
            raw.parse().ok().map(Self::Uuid)
        }
    }
}

/// One page of a limit/offset list, and how many there are in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub results: Vec<T>,
    pub count: u64,
}

/// A person's properties over time, rebuilt from the snapshots its events carry.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertiesTimeline {
    /// One point per run of events with the same properties.
    pub points: Vec<TimelinePoint>,
    /// The first event's timestamp, as the query gave it.
    pub effective_date_from: Option<Value>,
    /// The last event's timestamp, as the query gave it.
    pub effective_date_to: Option<Value>,
    /// The person has more events than were read.
    pub truncated: bool,
}

/// A run of a person's events that carried the same properties.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    /// The run's first timestamp, as the query gave it.
    pub timestamp: Value,
    /// The properties, parsed (JSON null when the snapshot does not parse).
    pub properties: Value,
    pub relevant_event_count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn keys_are_integers_then_uuids() {
        assert_eq!(PersonKey::parse("42"), Some(PersonKey::Id(42)));
        assert_eq!(PersonKey::parse("-1"), Some(PersonKey::Id(-1)));
        let u = "0190a0e4-7b1c-7000-8000-000000000000";
        assert_eq!(
            PersonKey::parse(u),
            Some(PersonKey::Uuid(Uuid::parse_str(u).unwrap().into()))
        );
        assert_eq!(PersonKey::parse("bob"), None);
        assert_eq!(PersonKey::parse("1.5"), None);
    }
}
