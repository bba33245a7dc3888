//! The engine's configuration.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::TimeDelta;
use url::Url;

use crate::ingest::limits::CaptureLimits;
use crate::meta::PropertyColumnsConfig;
use crate::query::QueryConfig;
use crate::write::{FlushConfig, MaintenanceConfig};

/// How old an event of a `historical_migration` batch must be (spec §4.4 rule 3).
pub const HISTORICAL_MIN_AGE: TimeDelta = TimeDelta::hours(48);

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Local directory for SQLite, the WAL and (by default) the events table.
    pub data_dir: PathBuf,
    /// Where the events table lives; `None` is `<data_dir>/events` on local disk.
    pub table_url: Option<Url>,
    /// object_store options for `table_url` (S3 endpoint, region, credentials…).
    pub storage_options: HashMap<String, String>,
    pub wal_segment_bytes: u64,
    /// When buffered events are written to the table.
    pub flush: FlushConfig,
    /// When the table is compacted, vacuumed and has person overrides folded in.
    pub maintenance: MaintenanceConfig,
    pub row_group_rows: usize,
    /// Most rows per Parquet data page.
    pub page_rows: usize,
    pub target_file_bytes: u64,
    /// A writer lease older than this is taken over.
    pub lease_ttl: Duration,
    /// Query memory, cache ages and parallelism. Its `spill_dir` is relative to `data_dir`
    /// when not absolute.
    pub query: QueryConfig,
    /// False: no person is made or changed; every event is personless.
    pub person_processing: bool,
    /// What one capture request may cost, and all of them together.
    pub capture: CaptureLimits,
    /// When event properties become typed columns.
    pub property_columns: PropertyColumnsConfig,
}

impl EngineConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            table_url: None,
            storage_options: HashMap::new(),
            wal_segment_bytes: 64 << 20,
            flush: FlushConfig::default(),
            maintenance: MaintenanceConfig::default(),
            row_group_rows: 128 * 1024,
            page_rows: 20_000,
            target_file_bytes: 128 << 20,
            lease_ttl: Duration::from_secs(30),
            query: QueryConfig::new(PathBuf::from("spill")),
            person_processing: true,
            capture: CaptureLimits::default(),
            property_columns: PropertyColumnsConfig::default(),
        }
    }
}
