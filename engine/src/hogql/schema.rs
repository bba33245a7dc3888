//! The virtual schema a HogQL query sees, and the catalog that provides its tables.
//!
//! Tables are named here and nowhere else: a name that is not in [`TABLES`] cannot be read,
//! whatever the query says. The catalog hands out providers already limited to the caller's
//! project (see `query::provider`).

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use crate::propdefs::{PropertyKind, PropertyType};

/// Every table a HogQL query may name.
pub const TABLES: &[&str] = &[
    "events",
    "persons",
    "person_distinct_ids",
    "groups",
    "sessions",
    "query_log",
    "ingestion_warnings",
    "cohort_people",
];

/// The columns `SELECT *` gives for `events`, in order (compat.md's list). Other columns are
/// reachable by name (`person.properties`, …) but never expanded.
pub const EVENTS_COLUMNS: &[&str] = &[
    "uuid",
    "event",
    "properties",
    "timestamp",
    "distinct_id",
    "elements_chain",
    "created_at",
    "$session_id",
    "$window_id",
    "person_id",
    "$group_0",
    "$group_1",
    "$group_2",
    "$group_3",
    "$group_4",
];

/// Joins that a field of `events` can bring in: `person.…`, `pdi.…`, `session.…`,
/// `group_N.…`.
pub const EVENTS_LAZY_JOINS: &[&str] = &[
    "person", "pdi", "session", "group_0", "group_1", "group_2", "group_3", "group_4",
];

/// Where a query's tables come from. Implementations return providers limited to one project.
pub trait Catalog: Send + Sync {
    /// The provider of a stored table (`events`, `persons`, `person_distinct_ids`, `groups`,
    /// `query_log`). `sessions` is derived from `events` by the planner.
    fn table(&self, name: &str) -> Option<Arc<dyn TableProvider>>;

    /// The project's person-id overrides, when it has any.
    fn person_overrides(&self) -> Option<Arc<super::overrides::OverrideMap>> {
        None
    }

    /// The project's event or person properties stored as columns (`storage::layout`).
    fn property_layout(
        &self,
        family: crate::storage::layout::Family,
    ) -> Arc<crate::storage::layout::TeamLayout> {
        let _ = family;
        Arc::default()
    }

    /// How many of [`Catalog::property_layout`]'s columns of `family` every row of the
    /// project's events holds: those are read from their column alone (no per-row check,
    /// and pruning works).
    fn properties_held_by_every_row(&self, family: crate::storage::layout::Family) -> usize {
        let _ = family;
        0
    }

    /// The type the project's property definitions give a property, if any.
    fn property_type(&self, kind: PropertyKind, name: &str) -> Option<PropertyType> {
        let _ = (kind, name);
        None
    }
}

/// The HogQL text `sessions` stands for: one row per `$session_id` of the project's events,
/// with compat.md's session-level columns. A session is a bounce when it has exactly one
/// pageview, no autocapture and lasts under 10 s; NULL when it has no pageview, screen or
/// autocapture.
pub const SESSIONS_QUERY: &str = r#"
SELECT
    `$session_id` AS session_id,
    `$session_id` AS id,
    argMin(distinct_id, timestamp) AS distinct_id,
    argMin(person_id, timestamp) AS person_id,
    min(timestamp) AS `$start_timestamp`,
    max(timestamp) AS `$end_timestamp`,
    dateDiff('second', min(timestamp), max(timestamp)) AS `$session_duration`,
    dateDiff('second', min(timestamp), max(timestamp)) AS duration,
    arrayDistinct(groupArrayIf(properties.$current_url, event = '$pageview' AND properties.$current_url IS NOT NULL)) AS `$urls`,
    uniqIf(properties.$current_url, event = '$pageview') AS `$num_uniq_urls`,
    argMinIf(properties.$current_url, timestamp, event = '$pageview' AND properties.$current_url IS NOT NULL) AS `$entry_current_url`,
    argMinIf(properties.$pathname, timestamp, event = '$pageview' AND properties.$pathname IS NOT NULL) AS `$entry_pathname`,
    argMaxIf(properties.$current_url, timestamp, event = '$pageview' AND properties.$current_url IS NOT NULL) AS `$end_current_url`,
    argMaxIf(properties.$pathname, timestamp, event = '$pageview' AND properties.$pathname IS NOT NULL) AS `$end_pathname`,
    argMinIf(properties.$referring_domain, timestamp, properties.$referring_domain IS NOT NULL) AS `$entry_referring_domain`,
    argMinIf(properties.utm_source, timestamp, properties.utm_source IS NOT NULL) AS `$entry_utm_source`,
    argMinIf(properties.utm_campaign, timestamp, properties.utm_campaign IS NOT NULL) AS `$entry_utm_campaign`,
    argMinIf(properties.utm_medium, timestamp, properties.utm_medium IS NOT NULL) AS `$entry_utm_medium`,
    argMinIf(properties.utm_term, timestamp, properties.utm_term IS NOT NULL) AS `$entry_utm_term`,
    argMinIf(properties.utm_content, timestamp, properties.utm_content IS NOT NULL) AS `$entry_utm_content`,
    countIf(event = '$pageview') AS `$pageview_count`,
    countIf(event = '$autocapture') AS `$autocapture_count`,
    countIf(event = '$screen') AS `$screen_count`,
    multiIf(
        `$entry_utm_source` IS NULL AND `$entry_referring_domain` IS NULL, 'Direct',
        `$entry_utm_medium` IN ('cpc', 'ppc', 'paid', 'paidsearch'), 'Paid Search',
        `$entry_utm_medium` = 'email', 'Email',
        `$entry_utm_source` IS NOT NULL, 'Referral',
        match(coalesce(`$entry_referring_domain`, ''), 'google|bing|duckduckgo|yahoo|yandex|baidu'), 'Organic Search',
        'Referral') AS `$channel_type`,
    if(`$pageview_count` + `$screen_count` + `$autocapture_count` = 0, NULL,
       `$pageview_count` = 1 AND `$autocapture_count` = 0 AND `$session_duration` < 10) AS `$is_bounce`
FROM events
WHERE `$session_id` IS NOT NULL
GROUP BY `$session_id`
"#;
