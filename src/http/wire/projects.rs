//! The projects API's bodies as PostHog sends them (`spec/api.md`, Projects).

use hedgerow_engine::meta::{Project, ProjectSettings};
use serde_json::{Value, json};

/// A project: `{id, uuid, name, api_token, timezone, created_at}`.
pub(crate) fn project(p: &Project) -> Value {
    json!({
        "id": p.id.0,
        "uuid": p.uuid,
        "name": p.name,
        "api_token": p.api_token,
        "timezone": p.timezone,
        "created_at": p.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    })
}

/// A project with its remote-config settings (PostHog's field names; the settings for
/// what hedgerow does not serve are always off).
pub(crate) fn with_settings(p: &Project, s: &ProjectSettings) -> Value {
    let mut v = project(p);
    if let (Value::Object(m), Ok(Value::Object(extra))) = (&mut v, serde_json::to_value(s)) {
        m.extend(extra);
        m.insert("session_recording_opt_in".into(), json!(false));
        m.insert("surveys_opt_in".into(), json!(false));
        m.insert("capture_console_log_opt_in".into(), json!(false));
    }
    v
}

/// One page of the project list, in the list envelope `{count, next, previous, results}`.
pub(crate) fn page(
    count: usize,
    next: Option<String>,
    previous: Option<String>,
    projects: &[Project],
) -> Value {
    let results = projects.iter().map(project).collect();
    super::persons::page(count as u64, next, previous, results)
}

#[cfg(test)]
mod tests {
    use hedgerow_engine::model::TeamId;

    use super::*;

    #[test]
    fn a_project_and_a_page_of_them() {
        let p = Project {
            id: TeamId(2),
            uuid: "0190a000-0000-7000-8000-000000000002".parse().unwrap(),
            name: "Second".into(),
            api_token: "phc_two".into(),
            timezone: "Europe/Berlin".into(),
            created_at: "2024-06-15T12:00:00.5Z".parse().unwrap(),
        };
        let want = json!({
            "id": 2,
            "uuid": "0190a000-0000-7000-8000-000000000002",
            "name": "Second",
            "api_token": "phc_two",
            "timezone": "Europe/Berlin",
            "created_at": "2024-06-15T12:00:00.500000Z",
        });
        assert_eq!(project(&p), want);
        assert_eq!(
            page(3, Some("n".into()), None, std::slice::from_ref(&p)),
            json!({"count": 3, "next": "n", "previous": null, "results": [want]})
        );
    }
}
