//! A project's settings for what browser SDKs capture, served to posthog-js as remote
//! config: one JSON document per project, PostHog's field names and defaults.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{MetaStore, Result};
use crate::model::TeamId;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS project_settings (
    team_id INTEGER PRIMARY KEY,
    settings TEXT NOT NULL
);
";

/// What posthog-js may capture on the project's sites. Defaults as PostHog's: autocapture
/// and network timing on, the rest off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProjectSettings {
    pub autocapture_opt_out: bool,
    pub autocapture_exceptions_opt_in: bool,
    pub autocapture_web_vitals_opt_in: bool,
    pub capture_performance_opt_in: bool,
    pub capture_dead_clicks: bool,
    pub heatmaps_opt_in: bool,
}

impl Default for ProjectSettings {
    fn default() -> Self {
        Self {
            autocapture_opt_out: false,
            autocapture_exceptions_opt_in: false,
            autocapture_web_vitals_opt_in: false,
            capture_performance_opt_in: true,
            capture_dead_clicks: false,
            heatmaps_opt_in: false,
        }
    }
}

impl MetaStore {
    pub fn project_settings(&self, team: TeamId) -> Result<ProjectSettings> {
        let doc: Option<String> = self
            .conn()
            .query_row(
                "SELECT settings FROM project_settings WHERE team_id = ?1",
                params![team.0],
                |r| r.get(0),
            )
            .optional()?;
        // Written by this module only; a document it cannot read is the defaults.
        Ok(doc
            .and_then(|d| serde_json::from_str(&d).ok())
            .unwrap_or_default())
    }

    pub fn set_project_settings(&self, team: TeamId, s: &ProjectSettings) -> Result<()> {
        let doc = serde_json::to_string(s).expect("settings serialize");
        self.conn().execute(
            "INSERT INTO project_settings (team_id, settings) VALUES (?1, ?2)
             ON CONFLICT (team_id) DO UPDATE SET settings = excluded.settings",
            params![team.0, doc],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::test_store;

    #[test]
    fn settings_default_as_posthog_and_persist() {
        let (dir, s) = test_store();
        let d = s.project_settings(TeamId(1)).unwrap();
        assert!(!d.autocapture_opt_out && d.capture_performance_opt_in && !d.heatmaps_opt_in);
        let changed = ProjectSettings {
            autocapture_opt_out: true,
            heatmaps_opt_in: true,
            ..d
        };
        s.set_project_settings(TeamId(1), &changed).unwrap();
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        assert_eq!(s.project_settings(TeamId(1)).unwrap(), changed);
        assert_eq!(
            s.project_settings(TeamId(2)).unwrap(),
            ProjectSettings::default()
        );
    }
}
