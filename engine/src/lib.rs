//! hedgerow's engine: everything that is not HTTP.
//!
//! One facade, [`Engine`], owns the metadata store (projects, keys), the write-ahead log,
//! the ingest pipeline, the Arrow buffer and the events table. The binary's HTTP layer
//! decodes requests, calls one method here, and encodes the answer; nothing in this crate
//! knows about axum, hyper or HTTP statuses (errors carry an [`error::ErrorKind`]).

mod api;
pub mod clock;
mod config;
pub mod datagen;
pub mod error;
pub mod faults;
pub mod flags;
pub(crate) mod hogql;
pub(crate) mod ingest;
pub mod insights;
#[doc(hidden)]
pub mod internals;
#[cfg(test)]
mod layering_tests;
mod lifecycle;
pub mod meta;
pub(crate) mod metrics;
pub mod model;
pub mod persons;
pub(crate) mod propdefs;
pub mod query;
pub mod schedule;
pub(crate) mod storage;
pub(crate) mod write;

pub use api::{
    Access, CaptureBody, CaptureReceipt, CohortFields, CohortsError, DeletionRun, FlagAnswer,
    FlagFields, FlagsError, FlagsRequest, MAX_COHORT_NAME, MAX_FLAGS_BODY, MAX_STATIC_ADD,
    PersonsError, ProjectsError, RemoteConfig, read_flags_body,
};
pub use config::{EngineConfig, HISTORICAL_MIN_AGE};
pub use ingest::CaptureError;
pub use ingest::limits::CaptureLimits;
pub use ingest::payload::CapturePayload;
pub use lifecycle::EngineError;
pub use meta::PropertyColumnsConfig;
pub use storage::schema::schema_json;
pub use write::{FlushConfig, MaintenanceConfig};

use std::fs::File;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::SharedClock;
use crate::ingest::limits::DecodeBudget;
use crate::ingest::wal::Wal;
use crate::meta::MetaStore;
use crate::metrics::Metrics;
use crate::persons::store::PersonStore;
use crate::query::QueryService;
use crate::storage::buffer::EventBuffer;
use crate::storage::lease::WriterLease;
use crate::storage::table::EventsTable;
use crate::write::Ingested;

/// The engine: one per data directory, opened with [`Engine::open`]. Its operations are in
/// `api/` (capture, query, persons, projects, tasks), one file each.
pub struct Engine {
    cfg: EngineConfig,
    query: Arc<QueryService>,
    clock: SharedClock,
    meta: Arc<MetaStore>,
    metrics: Arc<Metrics>,
    wal: Wal<Ingested>,
    buffer: Arc<EventBuffer>,
    table: Arc<EventsTable>,
    lease: Arc<WriterLease>,
    person_store: Arc<dyn PersonStore>,
    /// The last WAL seq whose person changes are stored.
    persons_seq: watch::Receiver<u64>,
    flush_now: Arc<std::sync::atomic::AtomicBool>,
    deletion_lock: tokio::sync::Mutex<()>,
    tokens: RwLock<api::TokenCache>,
    /// Memory for capture requests being decoded (`CaptureLimits::decode_memory`).
    budget: DecodeBudget,
    /// Memory for records between the WAL and the pipeline.
    queue: write::QueueBudget,
    shutdown: watch::Sender<bool>,
    pipeline: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    _dir_lock: File,
}

impl Engine {
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }
}
