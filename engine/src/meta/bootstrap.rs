//! The first start: project 1 and an all-scopes personal key.

use chrono::{DateTime, Utc};

use super::{MetaError, MetaStore, Project, Result, random_token, validate_project_token};
use crate::model::TeamId;

/// What the first start made, for the binary to print once.
#[derive(Debug, Default)]
pub struct Bootstrap {
    pub created_project: Option<Project>,
    pub created_personal_key: Option<String>,
}

impl MetaStore {
    /// Makes sure project 1 and an all-scopes personal key exist. Given keys are used as
    /// they are (a fixed project token replaces project 1's); otherwise fresh ones are made.
    /// Callers that cache tokens must forget them.
    pub fn bootstrap(
        &self,
        project_token: Option<&str>,
        personal_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Bootstrap> {
        let mut out = Bootstrap::default();
        if let Some(t) = project_token {
            validate_project_token(t)?;
        }
        if let Some(k) = personal_key
            && !k.starts_with("phx_")
        {
            return Err(MetaError::PersonalKeyPrefix);
        }
        match self.project(TeamId(1))? {
            None => {
                let token = project_token
                    .map(str::to_owned)
                    .unwrap_or_else(|| random_token("phc_"));
                let p = self.insert_project(Some(1), "Default project", &token, "UTC", now)?;
                out.created_project = Some(p);
            }
            Some(p) => {
                if let Some(t) = project_token
                    && p.api_token != t
                {
                    self.set_project_token(TeamId(1), t)?;
                }
            }
        }
        match personal_key {
            Some(k) => {
                if self.key_grant(k)?.is_none() {
                    self.insert_key("bootstrap (fixed)", k, &["*".to_owned()], None, now)?;
                }
            }
            None => {
                if self.key_count()? == 0 {
                    let k = random_token("phx_");
                    self.insert_key("bootstrap", &k, &["*".to_owned()], None, now)?;
                    out.created_personal_key = Some(k);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::super::{MetaStore, test_store};
    use crate::model::TeamId;

    #[test]
    fn bootstrap_creates_once_and_respects_fixed_keys() {
        let (dir, s) = test_store();
        let now = Utc::now();
        let b = s.bootstrap(None, None, now).unwrap();
        let p = b.created_project.expect("project made");
        assert_eq!(p.id, TeamId(1));
        assert!(p.api_token.starts_with("phc_"));
        let k = b.created_personal_key.expect("key made");
        assert!(k.starts_with("phx_"));
        assert!(s.key_grant(&k).unwrap().unwrap().allows("person:write"));
        // A second start makes nothing new.
        let b2 = s.bootstrap(None, None, now).unwrap();
        assert!(b2.created_project.is_none() && b2.created_personal_key.is_none());
        // Fixed keys replace the token and add the key; reopening keeps them (a real file).
        drop(s);
        let s = MetaStore::open(&dir.path().join("meta.sqlite")).unwrap();
        s.bootstrap(Some("phc_fixed"), Some("phx_fixed"), now)
            .unwrap();
        assert_eq!(
            s.project_by_token("phc_fixed").unwrap().unwrap().id,
            TeamId(1)
        );
        assert!(s.project_by_token(&p.api_token).unwrap().is_none());
        assert!(s.key_grant("phx_fixed").unwrap().is_some());
        assert!(s.key_grant(&k).unwrap().is_some());
        // The secret is not stored in clear.
        let raw = std::fs::read(dir.path().join("meta.sqlite")).unwrap();
        let wal = std::fs::read(dir.path().join("meta.sqlite-wal")).unwrap_or_default();
        for bytes in [raw, wal] {
            assert!(!bytes.windows(k.len()).any(|w| w == k.as_bytes()));
        }
    }
}
