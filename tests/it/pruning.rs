//! Filters on `timestamp` and `event` skip files and row groups: measured by the files and
//! row groups a query opens (DataFusion's scan metrics) with and without the filter, over 91
//! daily partitions written in row groups of 50 rows (sorted by event, then timestamp, inside
//! every file). The project's zone is not UTC, so the zone relabelling of `timestamp` is on
//! the way.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use hedgerow_engine::CapturePayload;
use hedgerow_engine::clock::FixedClock;
use hedgerow_engine::model::TeamId;
use hedgerow_engine::query::HogQLRun;
use hedgerow_engine::{Engine, EngineConfig};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "phc_pruning_test_00000000000000000000000000";
const PER_DAY: i64 = 200;

async fn run(engine: &Engine, q: &str) -> HogQLRun {
    engine
        .run_hogql(
            TeamId(1),
            q,
            &Default::default(),
            hedgerow_engine::query::Modifiers::default(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_and_event_filters_skip_files_and_row_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let now: DateTime<Utc> = "2024-06-15T12:00:00Z".parse().unwrap();
    let mut cfg = EngineConfig::new(tmp.path());
    cfg.row_group_rows = 50;
    cfg.flush.max_rows = 5_000;
    cfg.flush.max_age = Duration::from_millis(100);
    cfg.maintenance.compaction_interval = Duration::from_secs(3600);
    let engine = Engine::open(cfg, Arc::new(FixedClock::new(now)))
        .await
        .unwrap();
    engine.bootstrap(Some(TOKEN), None).unwrap();
    engine
        .set_project_timezone(TeamId(1), "America/New_York")
        .unwrap();

    // 91 days (2024-01-01 … 2024-03-31) of 200 events; one `rare` event a day, the last of
    // its file's rows by the sort order.
    let start: DateTime<Utc> = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut events: Vec<Map<String, Value>> = Vec::new();
    for day in 0..91i64 {
        for i in 0..PER_DAY {
            let ts =
                start + TimeDelta::days(day) + TimeDelta::hours(6) + TimeDelta::seconds(i * 300);
            let name = if i == 7 { "rare" } else { "$pageview" };
            let v = json!({
                "event": name,
                "distinct_id": format!("user-{}", (day * PER_DAY + i) % 97),
                "timestamp": ts.to_rfc3339(),
                "properties": {"$browser": "Chrome", "text": format!("{:0>120}", day * PER_DAY + i)},
            });
            events.push(v.as_object().unwrap().clone());
        }
    }
    for chunk in events.chunks(1000) {
        engine
            .capture(CapturePayload {
                token: TOKEN.into(),
                sent_at: None,
                historical_migration: true,
                events: chunk.to_vec(),
            })
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = engine.buffered();
        if s.rows == 0 && s.frozen_rows == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the buffer did not flush: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let cols = "count(), max(distinct_id), max(properties.text)";
    let all = run(&engine, &format!("SELECT {cols} FROM events")).await;
    assert_eq!(all.results[0][0], json!(91 * PER_DAY));
    assert!(all.read_bytes > 0, "nothing read from Parquet");

    // One month of three: the other months' files are never opened.
    let march = run(
        &engine,
        &format!(
            "SELECT {cols} FROM events WHERE timestamp >= '2024-03-01' AND timestamp < '2024-04-01'"
        ),
    )
    .await;
    assert_eq!(march.results[0][0], json!(31 * PER_DAY));
    if std::env::var_os("PRUNING_EXPLAIN").is_some() {
        let e = engine
            .explain_hogql(
                TeamId(1),
                &format!("SELECT {cols} FROM events WHERE timestamp >= '2024-03-01' AND timestamp < '2024-04-01'"),
                1,
            )
            .await
            .unwrap();
        eprintln!("{e}");
        let e = engine
            .explain_hogql(TeamId(1), &format!("SELECT {cols} FROM events"), 1)
            .await
            .unwrap();
        eprintln!("{e}");
    }
    // The same through a function of the column PostHog queries use.
    let march_day = run(
        &engine,
        &format!("SELECT {cols} FROM events WHERE toDate(timestamp) >= '2024-03-01'"),
    )
    .await;
    assert_eq!(march_day.results[0][0], json!(31 * PER_DAY));
    // One event name of two: in every file only the row group holding it is read.
    let rare = run(
        &engine,
        &format!("SELECT {cols} FROM events WHERE event = 'rare'"),
    )
    .await;
    assert_eq!(rare.results[0][0], json!(91));
    eprintln!(
        "scans: all {:?}\nmarch {:?}\ntoDate(march) {:?}\nevent=rare {:?}",
        all.scan, march.scan, march_day.scan, rare.scan
    );
    // Every day is its own partition: 91 files (and more row groups) for everything.
    assert!(all.scan.files >= 91, "{:?}", all.scan);
    assert_eq!(all.scan.rows, 91 * PER_DAY as u64);
    // One month of three: only March's files are opened.
    assert!(
        march.scan.files <= 31 + 1,
        "a timestamp filter for March opened {} of {} files",
        march.scan.files,
        all.scan.files
    );
    assert!(
        march_day.scan.files <= 31 + 1,
        "toDate(timestamp) >= '2024-03-01' opened {} of {} files",
        march_day.scan.files,
        all.scan.files
    );
    // One event name of two: files are sorted by event, so in every file only the row
    // group(s) holding `rare` are read.
    assert!(
        rare.scan.row_groups_read * 3 < all.scan.row_groups_read,
        "event = 'rare' read {} of {} row groups",
        rare.scan.row_groups_read,
        all.scan.row_groups_read
    );
    // A distinct id inside every file's min/max range but in none of them: only the
    // distinct_id bloom filters can skip the row groups.
    let nobody = run(
        &engine,
        &format!("SELECT {cols} FROM events WHERE distinct_id = 'user-500'"),
    )
    .await;
    assert_eq!(nobody.results[0][0], json!(0));
    assert!(
        nobody.scan.row_groups_read * 10 < all.scan.row_groups_read,
        "distinct_id = 'user-500' read {} of {} row groups",
        nobody.scan.row_groups_read,
        all.scan.row_groups_read
    );
    // The stored strings reach filters, hashes and joins as read (Utf8View), not copied
    // into another string layout first: such a cast ran over every row a filter saw
    // (`CAST(distinct_id AS Utf8)` inside a join's dynamic filter, 10M rows for
    // plan_filter in the bench).
    let plan = engine
        .explain_hogql(
            TeamId(1),
            "SELECT count() FROM events WHERE distinct_id IN (SELECT distinct_id FROM events \
             WHERE event = 'rare') AND properties.$browser IS NOT NULL",
            1,
        )
        .await
        .unwrap();
    assert!(
        !plan.contains("AS Utf8)"),
        "a stored string column is cast before use:\n{plan}"
    );
    // Each filter is evaluated once by the scan, though it reaches the scan twice (from the
    // logical plan, and again from the FilterExec above by the physical pushdown).
    let plan = engine
        .explain_hogql(
            TeamId(1),
            "SELECT count() FROM events WHERE event = 'rare' AND properties.$browser IS NOT NULL",
            1,
        )
        .await
        .unwrap();
    let scan = plan
        .lines()
        .find(|l| l.contains("DataSourceExec") && l.contains(", predicate="))
        .unwrap_or_else(|| panic!("no scan with a predicate:\n{plan}"));
    let predicate = scan
        .split(", predicate=")
        .nth(1)
        .and_then(|p| p.split(", pruning_predicate=").next())
        .unwrap();
    let conjuncts: Vec<&str> = predicate.split(" AND ").collect();
    let distinct: HashSet<&str> = conjuncts.iter().copied().collect();
    assert_eq!(
        conjuncts.len(),
        distinct.len(),
        "a conjunct is evaluated twice: {predicate}"
    );
    assert_eq!(conjuncts.len(), 2, "{predicate}");
    file_layout(&tmp.path().join("events"));
    engine.shutdown().await;
    drop(engine);

    // Reopened on the same files (nothing left to replay), queries do not wait for WAL
    // records that will never be applied: the buffer counts as caught up at once.
    let mut cfg = EngineConfig::new(tmp.path());
    cfg.row_group_rows = 50;
    let engine = Engine::open(cfg, Arc::new(FixedClock::new(now)))
        .await
        .unwrap();
    assert!(engine.last_wal_seq() > 0);
    assert!(
        engine.applied_seq() >= engine.last_wal_seq(),
        "applied {} < acknowledged {}",
        engine.applied_seq(),
        engine.last_wal_seq()
    );
    let again = run(&engine, "SELECT count() FROM events").await;
    assert_eq!(again.results[0][0], json!(91 * PER_DAY));
    engine.shutdown().await;
}

/// Each column's encoding and codec in a written file, as `writer_properties` chooses them:
/// LZ4 for the hot columns (a zstd reader context per column chunk costs more than it saves
/// there), delta-encoded time columns, zstd for the big text ones, a bloom filter on
/// distinct_id.
fn file_layout(table: &std::path::Path) {
    use parquet::basic::{Compression, Encoding};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut dirs = vec![table.to_path_buf()];
    let mut file = None;
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                file = Some(p);
            }
        }
    }
    let file = file.expect("a Parquet file in the table");
    let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let rg = reader.metadata().row_group(0);
    let col = |name: &str| {
        (0..rg.num_columns())
            .map(|i| rg.column(i))
            .find(|c| c.column_path().string() == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    // `timestamp`'s delta-packed pages are stored as they are (LZ4 left them so),
    // `created_at`'s are LZ4.
    for (c, codec) in [
        ("timestamp", Compression::UNCOMPRESSED),
        ("created_at", Compression::LZ4_RAW),
    ] {
        assert_eq!(col(c).compression(), codec, "{c}");
        assert!(
            col(c)
                .encodings()
                .any(|e| e == Encoding::DELTA_BINARY_PACKED),
            "{c}"
        );
        assert!(
            col(c).dictionary_page_offset().is_none(),
            "{c} has a dictionary"
        );
    }
    for c in [
        "event",
        "distinct_id",
        "person_id",
        "$session_id",
        "props_layout",
    ] {
        assert_eq!(col(c).compression(), Compression::LZ4_RAW, "{c}");
    }
    // The others zstd, but LZ4 where the file has values in under 5 % of its rows
    // (judged on a sample, so only clear cases are checked here).
    for c in ["properties", "person_properties", "uuid", "elements_chain"] {
        let rows = rg.num_rows() as f64;
        let values = rows
            - col(c)
                .statistics()
                .and_then(|s| s.null_count_opt())
                .unwrap() as f64;
        match values / rows {
            share if share > 0.2 => {
                assert!(matches!(col(c).compression(), Compression::ZSTD(_)), "{c}")
            }
            share if share < 0.01 => {
                assert_eq!(col(c).compression(), Compression::LZ4_RAW, "{c}")
            }
            _ => {}
        }
    }
    assert!(matches!(col("uuid").compression(), Compression::ZSTD(_)));
    assert!(col("distinct_id").bloom_filter_offset().is_some());
}
