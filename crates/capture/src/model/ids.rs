//! Ids: projects, distinct ids, and the person uuids PostHog derives from distinct ids.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A project's numeric id (PostHog's `team_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TeamId(pub i64);

impl std::fmt::Display for TeamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A distinct id: what a client sends events as, and what persons are found by.
///
/// Its text, compared and hashed as such; JSON and the WAL see a plain string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DistinctId(String);

impl DistinctId {
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn into_string(self) -> String {
        self.0
    }
}

impl From<String> for DistinctId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl From<&str> for DistinctId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl PartialEq<str> for DistinctId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for DistinctId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl AsRef<str> for DistinctId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DistinctId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A person's uuid: the `person_id` its events carry. A new person's is derived from the
/// distinct id it was made for ([`PersonUuid::of`]); a merge keeps the surviving person's.
///
/// JSON and the WAL see the hyphenated text.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct PersonUuid(Uuid);

impl PersonUuid {
    pub const fn new(uuid: Uuid) -> Self {
        Self(uuid)
    }
    /// The uuid PostHog gives the person first made for `distinct_id` ([`person_uuid`]).
    pub fn of(team: TeamId, distinct_id: &DistinctId) -> Self {
        Self(person_uuid(team, distinct_id.as_str()))
    }
    pub const fn as_uuid(&self) -> &Uuid {
        &self.0
    }
}

impl From<Uuid> for PersonUuid {
    fn from(uuid: Uuid) -> Self {
        Self(uuid)
    }
}

impl std::str::FromStr for PersonUuid {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl std::fmt::Display for PersonUuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Namespace of the UUIDv5 person ids, so a (team, distinct_id) pair maps to the same
/// person uuid PostHog would give it.
pub const PERSON_UUID_NAMESPACE: Uuid = Uuid::from_u128(0x932979b4_65c3_4424_8467_0b66ec27bc22);

/// UUIDv5 of "<team_id>:<distinct_id>" in PERSON_UUID_NAMESPACE (PostHog's person uuid)
pub fn person_uuid(team: TeamId, distinct_id: &str) -> Uuid {
    Uuid::new_v5(
        &PERSON_UUID_NAMESPACE,
        format!("{}:{distinct_id}", team.0).as_bytes(),
    )
}

/// Longest accepted project token, in characters.
pub const MAX_TOKEN_CHARS: usize = 64;

/// Why `token` cannot be a project API key, or `None` when it can: empty, non-ASCII,
/// longer than [`MAX_TOKEN_CHARS`], or a personal API key (`phx_`). The token itself is
/// never echoed: a `phx_` key is a secret sent to the wrong place.
pub fn token_problem(token: &str) -> Option<String> {
    Some(if token.is_empty() {
        "the project token is empty".to_owned()
    } else if !token.is_ascii() {
        "the project token contains non-ASCII characters".to_owned()
    } else if token.starts_with("phx_") {
        "a personal API key (phx_...) was sent where a project API key (phc_...) is needed; use the project's API key from its settings".to_owned()
    } else if token.len() > MAX_TOKEN_CHARS {
        format!("the project token is longer than {MAX_TOKEN_CHARS} characters")
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_text_in_json() {
        let d = DistinctId::from("user-1");
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"user-1\"");
        assert_eq!(serde_json::from_str::<DistinctId>("\"user-1\"").unwrap(), d);
        assert_eq!(d.to_string(), "user-1");
        let u = PersonUuid::of(TeamId(1), &d);
        assert_eq!(*u.as_uuid(), person_uuid(TeamId(1), "user-1"));
        let text = u.as_uuid().hyphenated().to_string();
        assert_eq!(u.to_string(), text);
        assert_eq!(serde_json::to_string(&u).unwrap(), format!("\"{text}\""));
        assert_eq!(text.parse::<PersonUuid>().unwrap(), u);
    }
}
