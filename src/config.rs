//! Command-line flags. Every setting is a flag and a `HEDGEROW_*` environment variable;
//! sizes read as `64MiB`, durations as `10s` or `500ms`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hedgerow_engine::CaptureLimits;
use hedgerow_engine::EngineConfig;
use hedgerow_engine::{FlushConfig, MaintenanceConfig, PropertyColumnsConfig};
use url::Url;

fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("'{s}' is not a size like 64MiB: {e}"))
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a share between 0 and 1")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("'{s}' is not a duration like 10s: {e}"))
}

#[derive(Debug, Parser)]
#[command(
    name = "hedgerow",
    version,
    about = "PostHog-compatible product analytics in one binary. With no subcommand, runs `serve`.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service (the default).
    Serve(Box<ServeArgs>),
    /// Manage personal API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Print the events table's Arrow schema as JSON (the contract in schemas/).
    Schema,
    /// Run a HogQL query and print its result (against the data directory, or a running
    /// server with --url).
    Query(QueryArgs),
    /// Background tasks: `tasks run` runs the queued person deletions now.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// Generate a deterministic benchmark data set of PostHog web and product events:
    /// `/batch/` bodies (batches.jsonl.gz) and the same events as events.parquet.
    Gen(GenArgs),
}

#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// How many events.
    #[arg(long)]
    pub events: u64,
    /// The same (events, seed, start, days, key) always gives the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// First day of the events' time window (UTC).
    #[arg(long, default_value = "2024-01-01")]
    pub start: chrono::NaiveDate,
    /// Length of the time window in days.
    #[arg(long, default_value_t = 90)]
    pub days: u32,
    /// The `api_key` of every batch body.
    #[arg(long, default_value = "phc_bench0000000000000000000000000000000000")]
    pub project_api_key: String,
    /// Events per `/batch/` body.
    #[arg(long, default_value_t = 500)]
    pub batch_size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct QueryArgs {
    /// The HogQL text, e.g. "SELECT event, count() FROM events GROUP BY event".
    pub hogql: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Project id.
    #[arg(long, default_value_t = 1)]
    pub project: i64,
    /// Ask this running server instead of opening the data directory.
    #[arg(long, env = "HEDGEROW_URL")]
    pub url: Option<Url>,
    /// Personal API key for --url.
    #[arg(long, env = "HEDGEROW_PERSONAL_API_KEY", hide_env_values = true)]
    pub personal_api_key: Option<String>,
    #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
    pub data_dir: PathBuf,
    /// Run the query and print how it ran instead of its rows: the optimized plan and each
    /// operator's metrics (files and row groups pruned, rows, time). Data directory only.
    #[arg(long, conflicts_with = "url")]
    pub explain: bool,
    /// With --explain: run the query this many times and show the last run, so the
    /// metadata cache is warm as on a running server (the first run opens every file cold).
    #[arg(long, default_value_t = 1, requires = "explain", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub explain_runs: u32,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Run every queued deletion task now (events of deleted persons, recordings), instead
    /// of waiting for the weekly schedule. Prints what was done as JSON.
    Run {
        /// Ask this running server to do it (needs a person:write key for all projects).
        #[arg(long, env = "HEDGEROW_URL")]
        url: Option<Url>,
        #[arg(long, env = "HEDGEROW_PERSONAL_API_KEY", hide_env_values = true)]
        personal_api_key: Option<String>,
        /// Open this data directory (no server may be running on it).
        #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
        data_dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a personal API key; prints the secret once.
    Create {
        /// Comma-separated scopes, e.g. `person:read,query:read`; `*` for all.
        #[arg(long, value_delimiter = ',', required = true)]
        scopes: Vec<String>,
        /// Comma-separated project ids the key may use; all projects when omitted.
        #[arg(long, value_delimiter = ',')]
        projects: Vec<i64>,
        #[arg(long, default_value = "cli")]
        label: String,
        #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
        data_dir: PathBuf,
    },
    /// List the personal API keys (id, label, masked secret, scopes, projects).
    List {
        #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
        data_dir: PathBuf,
    },
    /// Revoke a personal API key by its id (from `keys list`); a running server refuses it
    /// from its next request on.
    Revoke {
        id: i64,
        #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
        data_dir: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, env = "HEDGEROW_ADDR", default_value = "127.0.0.1:8000")]
    pub addr: SocketAddr,
    /// Local directory for SQLite, the write-ahead log and, by default, the events table.
    #[arg(long, env = "HEDGEROW_DATA_DIR", default_value = "./hedgerow-data")]
    pub data_dir: PathBuf,
    /// Where the events table lives: `s3://bucket/prefix` or `file:///path`. The table is
    /// `<url>/events`. Default: `<data-dir>/events` on local disk.
    #[arg(long, env = "HEDGEROW_STORAGE_URL")]
    pub storage_url: Option<Url>,
    #[command(flatten)]
    pub s3: S3Args,
    /// Fix project 1's project API key (`phc_…`) instead of generating one.
    #[arg(long, env = "HEDGEROW_PROJECT_API_KEY")]
    pub project_api_key: Option<String>,
    /// Make sure this personal API key (`phx_…`) exists, with every scope.
    #[arg(long, env = "HEDGEROW_PERSONAL_API_KEY", hide_env_values = true)]
    pub personal_api_key: Option<String>,
    /// Flush the buffer to Parquet when it holds this many rows.
    #[arg(long, env = "HEDGEROW_FLUSH_ROWS", default_value_t = 500_000)]
    pub flush_rows: usize,
    /// … or this many bytes of Arrow data.
    #[arg(long, env = "HEDGEROW_FLUSH_BYTES", default_value = "256MiB", value_parser = parse_size)]
    pub flush_bytes: u64,
    /// … or when its oldest event is this old.
    #[arg(long, env = "HEDGEROW_FLUSH_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub flush_interval: Duration,
    /// When queued person-event deletions run: `<weekday> <HH:MM>` in UTC, or `off`.
    #[arg(long, env = "HEDGEROW_DELETION_SCHEDULE", default_value = "sun 05:00")]
    pub deletion_schedule: String,
    /// How often every dynamic cohort's members are calculated again (`0s`: never; they
    /// are still calculated when a cohort is saved and on `POST …/recalculate/`).
    #[arg(long, env = "HEDGEROW_COHORT_INTERVAL", default_value = "1h", value_parser = parse_duration)]
    pub cohort_interval: Duration,
    /// `off`: no person profiles are made or changed and every event is personless (as if it
    /// carried `$process_person_profile: false`); groups are still kept.
    #[arg(long, env = "HEDGEROW_PERSON_PROCESSING", default_value = "on", value_parser = ["on", "off"])]
    pub person_processing: String,
    /// Person changes are written to the person store when ingestion goes idle, every 2048
    /// WAL records, or, when this is set, at most this often (write-behind). Queries and the
    /// persons API wait (up to 10 s) for the store to cover what was acknowledged, so keep
    /// it short; it exists for tests and tuning.
    #[arg(long, env = "HEDGEROW_PERSONS_COMMIT_INTERVAL", default_value = "0s", value_parser = parse_duration)]
    pub persons_commit_interval: Duration,
    /// How often the files are swept for merged persons' old ids: files where they are at
    /// least --override-fold-share of the rows are rewritten with the merged-into id, and
    /// overrides no file holds any more are forgotten. Elsewhere queries map them at read
    /// time, and compaction folds them when it rewrites a file anyway.
    #[arg(long, env = "HEDGEROW_OVERRIDE_FOLD_INTERVAL", default_value = "24h", value_parser = parse_duration)]
    pub override_fold_interval: Duration,
    /// The share (0–1) of a file's rows holding merged-away person ids above which the fold
    /// sweep rewrites the file.
    #[arg(long, env = "HEDGEROW_OVERRIDE_FOLD_SHARE", default_value_t = 0.1, value_parser = parse_share)]
    pub override_fold_share: f64,
    /// Buffered bytes above which ingestion waits for a flush (back-pressure).
    #[arg(long, env = "HEDGEROW_BUFFER_LIMIT", default_value = "512MiB", value_parser = parse_size)]
    pub buffer_limit: u64,
    /// Size at which the write-ahead log starts a new segment file.
    #[arg(long, env = "HEDGEROW_WAL_SEGMENT_SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub wal_segment_size: u64,
    /// Rows per Parquet row group.
    #[arg(long, env = "HEDGEROW_ROW_GROUP_ROWS", default_value_t = 128 * 1024)]
    pub row_group_rows: usize,
    /// Most rows per Parquet data page. Smaller pages let the page index skip more of a
    /// column for a filter on the sort order (event, timestamp), at some compression.
    #[arg(long, env = "HEDGEROW_PAGE_ROWS", default_value_t = 20_000)]
    pub page_rows: usize,
    /// Compaction's target Parquet file size.
    #[arg(long, env = "HEDGEROW_TARGET_FILE_SIZE", default_value = "128MiB", value_parser = parse_size)]
    pub target_file_size: u64,
    /// How often small files are looked for and compacted.
    #[arg(long, env = "HEDGEROW_COMPACTION_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub compaction_interval: Duration,
    /// Most event properties a project stores as typed columns (0: none; every property
    /// stays in the `properties` JSON).
    #[arg(long, env = "HEDGEROW_PROPERTY_COLUMNS_MAX", default_value_t = 100)]
    pub property_columns_max: usize,
    /// The share of a project's recent events a property must appear in to become a column.
    #[arg(
        long,
        env = "HEDGEROW_PROPERTY_COLUMNS_MIN_SHARE",
        default_value_t = 0.001
    )]
    pub property_columns_min_share: f64,
    /// How many of a project's events are counted between two decisions on columns.
    #[arg(long, env = "HEDGEROW_PROPERTY_COLUMNS_EVERY", default_value_t = 1000)]
    pub property_columns_every: u64,
    /// A partition is compacted once it has this many small files.
    #[arg(long, env = "HEDGEROW_COMPACTION_MIN_FILES", default_value_t = 8)]
    pub compaction_min_files: usize,
    /// Files replaced by compaction are deleted after this long (readers of older
    /// snapshots need them until then).
    #[arg(long, env = "HEDGEROW_VACUUM_RETENTION", default_value = "1h", value_parser = parse_duration)]
    pub vacuum_retention: Duration,
    /// Largest capture request body, after decompression.
    #[arg(long, env = "HEDGEROW_MAX_BODY_SIZE", default_value = "20MiB", value_parser = parse_size)]
    pub max_body_size: u64,
    /// Most JSON values (objects, arrays, strings, numbers, booleans, nulls) in one capture
    /// body, counted before it is parsed: a parsed value costs 30–100× its text. More is a
    /// 413 saying the limit.
    #[arg(long, env = "HEDGEROW_MAX_JSON_VALUES", default_value_t = 1_000_000)]
    pub max_json_values: usize,
    /// Most properties of one captured event, and most keys in each of its `$set`,
    /// `$set_once`, `$unset`, `$group_set` and `$groups`. More is a 413 naming the event.
    #[arg(long, env = "HEDGEROW_MAX_EVENT_PROPERTIES", default_value_t = 10_000)]
    pub max_event_properties: usize,
    /// Estimated memory all capture requests being decoded may hold together. A request
    /// needing more than all of it is a 413; one that finds it taken by others waits
    /// (--capture-memory-wait), then gets a 503 with Retry-After.
    #[arg(long, env = "HEDGEROW_CAPTURE_MEMORY", default_value = "512MiB", value_parser = parse_size)]
    pub capture_memory: u64,
    /// How long a capture request waits for its share of --capture-memory before a 503.
    #[arg(long, env = "HEDGEROW_CAPTURE_MEMORY_WAIT", default_value = "2s", value_parser = parse_duration)]
    pub capture_memory_wait: Duration,
    /// Capture bodies larger than this, and every compressed or encoded one, are decoded,
    /// parsed and normalized on the blocking thread pool instead of the async workers.
    #[arg(long, env = "HEDGEROW_CAPTURE_BLOCKING_THRESHOLD", default_value = "64KiB", value_parser = parse_size)]
    pub capture_blocking_threshold: u64,
    /// The table's writer lease is taken over after this long without a heartbeat.
    #[arg(long, env = "HEDGEROW_LEASE_TTL", default_value = "30s", value_parser = parse_duration)]
    pub lease_ttl: Duration,
    /// Memory all running queries may hold together; beyond it operators spill to disk.
    #[arg(long, env = "HEDGEROW_QUERY_MEMORY_LIMIT", default_value = "2GiB", value_parser = parse_size)]
    pub query_memory_limit: u64,
    /// `blocking`/`async` serve a cached result on changed data while it is younger than this
    /// (on unchanged data a cached result is always served).
    #[arg(long, env = "HEDGEROW_QUERY_VERY_FRESH", default_value = "0s", value_parser = parse_duration)]
    pub query_very_fresh: Duration,
    /// `lazy_async` serves a cached result on changed data while it is younger than this.
    #[arg(long, env = "HEDGEROW_QUERY_SOMEWHAT_FRESH", default_value = "1m", value_parser = parse_duration)]
    pub query_somewhat_fresh: Duration,
    /// Query results kept in the cache.
    #[arg(long, env = "HEDGEROW_QUERY_CACHE_ENTRIES", default_value_t = 1000)]
    pub query_cache_entries: u64,
    /// A query still running after this long (waiting for a slot included) is stopped and
    /// answers `query_timeout`.
    #[arg(long, env = "HEDGEROW_QUERY_TIMEOUT", default_value = "2m", value_parser = parse_duration)]
    pub query_timeout: Duration,
    /// Queries that run at once over all projects; more wait for a slot. Default: the
    /// number of cores (at least 2).
    #[arg(long, env = "HEDGEROW_QUERY_CONCURRENCY")]
    pub query_concurrency: Option<usize>,
    /// Queries one project may have running or waiting; more are refused with a 429.
    #[arg(
        long,
        env = "HEDGEROW_QUERY_CONCURRENCY_PER_PROJECT",
        default_value_t = 8
    )]
    pub query_concurrency_per_project: usize,
    /// Query API requests a project may make per minute (a burst); more are a 429 with
    /// `Retry-After`. 0: no limit.
    #[arg(long, env = "HEDGEROW_QUERY_RATE_PER_MINUTE", default_value_t = 240)]
    pub query_rate_per_minute: u32,
    /// Query API requests a project may make per hour (sustained). 0: no limit.
    #[arg(long, env = "HEDGEROW_QUERY_RATE_PER_HOUR", default_value_t = 2400)]
    pub query_rate_per_hour: u32,
    /// Log filter (tracing's env-filter syntax).
    #[arg(long, env = "HEDGEROW_LOG", default_value = "info")]
    pub log: String,
}

/// S3-compatible object store settings, used with an `s3://` storage URL.
#[derive(Debug, Clone, Args)]
pub struct S3Args {
    /// e.g. `http://127.0.0.1:3900`; AWS when omitted.
    #[arg(long, env = "HEDGEROW_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "HEDGEROW_S3_REGION")]
    pub s3_region: Option<String>,
    #[arg(long, env = "HEDGEROW_S3_ACCESS_KEY_ID")]
    pub s3_access_key_id: Option<String>,
    #[arg(long, env = "HEDGEROW_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub s3_secret_access_key: Option<String>,
    /// Allow plain http to the endpoint.
    #[arg(long, env = "HEDGEROW_S3_ALLOW_HTTP")]
    pub s3_allow_http: bool,
    /// Use virtual-hosted-style requests (bucket in the host name) instead of path style.
    #[arg(long, env = "HEDGEROW_S3_VIRTUAL_HOSTED")]
    pub s3_virtual_hosted: bool,
}

impl ServeArgs {
    pub fn engine_config(&self) -> Result<EngineConfig, String> {
        let mut cfg = EngineConfig::new(&self.data_dir);
        if let Some(url) = &self.storage_url {
            let mut table = url.clone();
            if !table.path().ends_with('/') {
                table.set_path(&format!("{}/", table.path()));
            }
            let table = table
                .join("events")
                .map_err(|e| format!("bad storage URL {url}: {e}"))?;
            match table.scheme() {
                "s3" | "s3a" | "file" => {}
                other => {
                    return Err(format!(
                        "storage URL scheme '{other}' is not supported: use s3:// or file://"
                    ));
                }
            }
            cfg.table_url = Some(table);
            cfg.storage_options = self.s3.options();
        }
        cfg.wal_segment_bytes = self.wal_segment_size;
        cfg.row_group_rows = self.row_group_rows;
        cfg.page_rows = self.page_rows;
        cfg.target_file_bytes = self.target_file_size;
        cfg.lease_ttl = self.lease_ttl;
        cfg.query.memory_limit = self.query_memory_limit as usize;
        cfg.query.very_fresh = self.query_very_fresh;
        cfg.query.somewhat_fresh = self.query_somewhat_fresh;
        cfg.query.cache_entries = self.query_cache_entries;
        cfg.query.limits.timeout = self.query_timeout;
        if let Some(n) = self.query_concurrency {
            cfg.query.limits.concurrency = n.max(1);
        }
        cfg.query.limits.per_project = self.query_concurrency_per_project.max(1);
        cfg.query.limits.per_minute = self.query_rate_per_minute;
        cfg.query.limits.per_hour = self.query_rate_per_hour;
        cfg.person_processing = self.person_processing == "on";
        cfg.capture = CaptureLimits {
            max_body: self.max_body_size as usize,
            max_json_values: self.max_json_values,
            max_properties: self.max_event_properties,
            decode_memory: self.capture_memory as usize,
            budget_wait: self.capture_memory_wait,
            blocking_threshold: self.capture_blocking_threshold as usize,
        };
        cfg.flush = FlushConfig {
            max_rows: self.flush_rows,
            max_bytes: self.flush_bytes as usize,
            max_age: self.flush_interval,
            hard_limit_bytes: self.buffer_limit as usize,
            persons_commit_interval: self.persons_commit_interval,
        };
        if !(0.0..=1.0).contains(&self.property_columns_min_share) {
            return Err(format!(
                "--property-columns-min-share must be between 0 and 1, got {}",
                self.property_columns_min_share
            ));
        }
        cfg.property_columns = PropertyColumnsConfig {
            min_share: self.property_columns_min_share,
            max_columns: self.property_columns_max,
            min_events: self.property_columns_every.max(1),
        };
        cfg.maintenance = MaintenanceConfig {
            compaction_interval: self.compaction_interval,
            compaction_min_files: self.compaction_min_files,
            vacuum_retention: self.vacuum_retention,
            override_fold_interval: self.override_fold_interval,
            override_fold_share: self.override_fold_share,
        };
        Ok(cfg)
    }
}

impl S3Args {
    /// object_store's option names for these settings.
    pub fn options(&self) -> HashMap<String, String> {
        let mut o = HashMap::new();
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                o.insert(k.to_owned(), v.clone());
            }
        };
        put("aws_endpoint", &self.s3_endpoint);
        put("aws_region", &self.s3_region);
        put("aws_access_key_id", &self.s3_access_key_id);
        put("aws_secret_access_key", &self.s3_secret_access_key);
        o.insert("aws_allow_http".into(), self.s3_allow_http.to_string());
        o.insert(
            "aws_virtual_hosted_style_request".into(),
            self.s3_virtual_hosted.to_string(),
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's configuration table names exactly the flags of `hedgerow serve --help`
    /// (and each with the environment variable clap reads, where the row gives one).
    #[test]
    fn readme_flag_table_matches_help() {
        use clap::CommandFactory;
        let readme = include_str!("../README.md");
        let table: Vec<&str> = readme
            .split("## Configuration")
            .nth(1)
            .expect("a Configuration section")
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .collect();
        let mut in_readme = std::collections::BTreeSet::new();
        let mut envs = std::collections::BTreeSet::new();
        for row in &table {
            let cells: Vec<&str> = row.split('|').collect();
            for (i, cell) in cells.iter().enumerate() {
                for part in cell.split('`').skip(1).step_by(2) {
                    if i == 1 && part.starts_with("--") {
                        in_readme.insert(part.to_string());
                    }
                    if i == 2 && part.starts_with("HEDGEROW_") && !part.contains('*') {
                        envs.insert(part.to_string());
                    }
                }
            }
        }
        let cmd = Cli::command();
        let mut in_help = std::collections::BTreeSet::new();
        let mut help_envs = std::collections::BTreeSet::new();
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long()
                && !matches!(long, "help" | "version")
            {
                in_help.insert(format!("--{long}"));
            }
            if let Some(env) = arg.get_env() {
                help_envs.insert(env.to_string_lossy().into_owned());
            }
        }
        let missing: Vec<_> = in_help.difference(&in_readme).collect();
        let stale: Vec<_> = in_readme.difference(&in_help).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "README flag table out of date: not in the README {missing:?}; not a flag {stale:?}"
        );
        let wrong: Vec<_> = envs.difference(&help_envs).collect();
        assert!(
            wrong.is_empty(),
            "README names env vars clap does not read: {wrong:?}"
        );
    }

    #[test]
    fn bare_invocation_is_serve_with_defaults() {
        let cli = Cli::try_parse_from(["hedgerow"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.serve.addr.to_string(), "127.0.0.1:8000");
        assert_eq!(cli.serve.flush_interval, Duration::from_secs(10));
        assert_eq!(cli.serve.max_body_size, 20 * 1024 * 1024);
        let cfg = cli.serve.engine_config().unwrap();
        assert_eq!(cfg.capture, CaptureLimits::default());
    }

    #[test]
    fn capture_limits() {
        let cli = Cli::try_parse_from([
            "hedgerow",
            "--max-body-size",
            "1MiB",
            "--max-json-values",
            "5000",
            "--max-event-properties",
            "100",
            "--capture-memory",
            "64MiB",
            "--capture-memory-wait",
            "250ms",
            "--capture-blocking-threshold",
            "8KiB",
        ])
        .unwrap();
        let c = cli.serve.engine_config().unwrap().capture;
        assert_eq!(c.max_body, 1 << 20);
        assert_eq!(c.max_json_values, 5000);
        assert_eq!(c.max_properties, 100);
        assert_eq!(c.decode_memory, 64 << 20);
        assert_eq!(c.budget_wait, Duration::from_millis(250));
        assert_eq!(c.blocking_threshold, 8 << 10);
    }

    #[test]
    fn storage_url_and_sizes() {
        let cli = Cli::try_parse_from([
            "hedgerow",
            "serve",
            "--storage-url",
            "s3://bucket/pre",
            "--s3-endpoint",
            "http://127.0.0.1:3900",
            "--s3-allow-http",
            "--flush-bytes",
            "8MiB",
            "--flush-interval",
            "250ms",
        ])
        .unwrap();
        let Some(Command::Serve(args)) = cli.command else {
            panic!("serve")
        };
        let cfg = args.engine_config().unwrap();
        assert_eq!(cfg.table_url.unwrap().as_str(), "s3://bucket/pre/events");
        assert_eq!(cfg.storage_options["aws_endpoint"], "http://127.0.0.1:3900");
        assert_eq!(cfg.storage_options["aws_allow_http"], "true");
        assert_eq!(cfg.flush.max_bytes, 8 << 20);
        assert_eq!(cfg.flush.max_age, Duration::from_millis(250));
        assert!(Cli::try_parse_from(["hedgerow", "--flush-bytes", "lots"]).is_err());
        let bad = Cli::try_parse_from(["hedgerow", "--storage-url", "gs://b/x"]).unwrap();
        assert!(bad.serve.engine_config().is_err());
    }
}
