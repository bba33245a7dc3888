//! Ids: projects and the person uuids PostHog derives from distinct ids.

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
