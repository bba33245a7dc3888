//! The result cache behind the refresh modes.
//!
//! The key is (project, normalized query, values, modifiers); each entry records the
//! project's data version it was computed on, so a hit on unchanged data is exact. The
//! "very fresh" / "somewhat fresh" ages of PostHog's refresh modes apply on top: an entry on
//! older data is still served while younger than those ages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{HogQLNode, QueryResponse, QueryService, QueryStatus, Refresh};
use crate::model::TeamId;

/// The cache of computed responses, by [`cache_key`].
pub(super) type ResultCache = moka::future::Cache<String, CacheEntry>;

/// One computed response.
#[derive(Clone)]
pub(super) struct CacheEntry {
    response: Arc<QueryResponse>,
    /// The project's data version the response was computed on.
    data_version: u64,
    computed: Instant,
    computed_at: DateTime<Utc>,
}

impl CacheEntry {
    /// The response to the request with id `query_id`: as computed, with the status of
    /// results served at once.
    pub(super) fn response_for(&self, query_id: &str, team: TeamId, cached: bool) -> QueryResponse {
        QueryResponse {
            is_cached: cached,
            last_refresh: Some(self.computed_at),
            status: QueryStatus::served(query_id, team, self.computed_at),
            ..QueryResponse::clone(&self.response)
        }
    }
}

/// The cache key of `node` in project `team`.
pub(super) fn cache_key(team: TeamId, node: &HogQLNode) -> String {
    use sha2::{Digest, Sha256};
    let mut values: Vec<_> = node.values.iter().collect();
    values.sort_by(|a, b| a.0.cmp(b.0));
    let text = json!([team.0, node.query.trim(), values, node.modifiers]).to_string();
    format!(
        "cache_{}",
        hex::encode(&Sha256::digest(text.as_bytes())[..16])
    )
}

impl QueryService {
    /// The cached response a request with `refresh` may be answered with, the project's
    /// data being at `version` now.
    pub(super) async fn cached(
        &self,
        key: &str,
        refresh: Refresh,
        version: u64,
    ) -> Option<CacheEntry> {
        let entry = self.cache.get(key).await?;
        let fresh_for =
            |max_age: Duration| entry.data_version == version || entry.computed.elapsed() < max_age;
        let serves = match refresh {
            Refresh::Blocking | Refresh::Async => fresh_for(self.cfg.very_fresh),
            Refresh::LazyAsync => fresh_for(self.cfg.somewhat_fresh),
            Refresh::ForceCache => true,
            Refresh::ForceBlocking | Refresh::ForceAsync => false,
        };
        serves.then_some(entry)
    }

    /// Keeps `response`, computed at `computed_at` on data `version`, under `key`.
    pub(super) async fn remember(
        &self,
        key: String,
        response: QueryResponse,
        version: u64,
        computed_at: DateTime<Utc>,
    ) -> CacheEntry {
        let entry = CacheEntry {
            response: Arc::new(response),
            data_version: version,
            computed: Instant::now(),
            computed_at,
        };
        self.cache.insert(key, entry.clone()).await;
        entry
    }
}
