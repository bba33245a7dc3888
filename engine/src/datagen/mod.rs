//! `hedgerow gen`: a deterministic generator of PostHog web and product events for the
//! benchmark (`benches/bench.py`).
//!
//! The same `(events, seed, start, days, project API key)` always gives the same bytes. The
//! generator first simulates people, their devices and their sessions on a timeline (one
//! [`StdRng`] drawn in a fixed order, no hash-map iteration anywhere), then sorts the events
//! by time and renders each one as posthog-js sends it.
//!
//! The model:
//! - `events / 25` persons (at least one) with a Pareto(α = 1.2) activity weight capped at
//!   1000; a person's share of the events is proportional to it (largest-remainder rounding,
//!   so the total is exactly `events`). Heavy users start early in the window and stay.
//!   Every event falls inside `[start, start + days)`: what a person cannot fit before the
//!   end goes to the next person (after the last one, to extra light persons).
//! - A person's events come in sessions of about 8 events. Inside a session events are 1 s –
//!   20 min apart; between two sessions of the same person there are at least 30 minutes, so
//!   posthog-js' session rule gives exactly our `$session_id`s. A session can have a second
//!   tab (`$window_id`).
//! - Every session starts with a `$pageview` of a landing page chosen by its referrer; some
//!   session starts carry UTM tags. Then pageviews, `$autocapture` clicks (with an
//!   `elements_chain`), `feature_used`, the shop funnel (`/pricing` → `added_to_cart` →
//!   `/checkout` → `purchase` with `revenue` and `currency`), surveys (`survey shown`, then
//!   `survey sent` with `$survey_response` or `survey dismissed`), and a closing
//!   `$pageleave`.
//! - Some persons sign up: `$identify` (distinct_id becomes `user-…`, `$anon_distinct_id` is
//!   the device's anonymous id, `$set` email/plan/name), `signed_up`, and for most of them
//!   `$groupidentify` of their company, whose key is then in `$groups` of every later event.
//!   A signed-up person may use a second device; its first session logs in (`$identify`
//!   again) and the device's anonymous id joins the same person.
//!
//! `person_id` (Parquet only; capture bodies never carry it) is the person a distinct_id
//! finally belongs to after every `$identify` of the data set: UUIDv5 of
//! `"1:<the person's first anonymous distinct_id>"` in hedgerow's person namespace
//! ([`person_uuid`] for project 1). That is the id hedgerow gives the first distinct_id of
//! the person, and PostHog keeps the person of that first id when later ids are merged
//! into it. A second device's anonymous id that never logs in stays its own person.
//!
//! Output files in the output directory:
//! - `batches.jsonl.gz`: one `/batch/` body per line (`{"api_key", "historical_migration":
//!   true, "batch": [...]}`), in time order. Every line is its own gzip member, so the file
//!   is one valid gzip stream and each member, cut out with `batches.idx`, is a ready gzip
//!   request body.
//! - `batches.idx`: one line per body: `offset<TAB>length<TAB>events` of its gzip member.
//! - `events.parquet`: the same events, one row each, with the columns of
//!   [`parquet_schema`]; `properties` is the JSON text hedgerow stores (top-level `$set`
//!   and `$set_once` lifted into it).
//! - `manifest.json`: the parameters and counts (events per name, persons, sessions, time
//!   range, a heavy user's distinct_id).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::TeamId;
use crate::model::person_uuid;
use arrow::array::{ArrayRef, RecordBatch, StringBuilder, TimestampMicrosecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use uuid::Uuid;

mod output;
mod render;
mod rng;
mod site;
#[cfg(test)]
mod tests;
mod world;

pub use output::*;
use render::*;
use rng::*;
use site::*;
use world::*;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    pub events: u64,
    pub seed: u64,
    /// First day of the time window (UTC).
    pub start: NaiveDate,
    /// Length of the window in days.
    pub days: u32,
    pub api_key: String,
    /// Events per `/batch/` body.
    pub batch_size: usize,
}

/// What was generated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GenSummary {
    pub events: u64,
    pub persons: u64,
    pub sessions: u64,
    pub batches: u64,
    pub json_bytes: u64,
    pub gzip_bytes: u64,
    pub first_timestamp: String,
    pub last_timestamp: String,
    /// Events per event name.
    pub event_counts: std::collections::BTreeMap<String, u64>,
    /// The distinct_id with the most events (for point lookups).
    pub top_distinct_id: String,
}

const SESSION_GAP_MS: i64 = 30 * 60 * 1000;
const MEAN_SESSION_EVENTS: f64 = 8.0;
const EVENTS_PER_PERSON: u64 = 25;
const PARETO_ALPHA: f64 = 1.2;
const MAX_WEIGHT: f64 = 1000.0;
const LIB_VERSION: &str = "1.194.3";
