use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::datatypes::DataType;
use chrono::{TimeZone, Utc};
use datafusion::prelude::SessionContext;
use serde_json::json;

use super::maintain::DataFile;
use super::*;
use crate::model::Event;
use crate::model::person_uuid;
use crate::storage::inspect::{files_under, grep_dir, parquet_values_containing};
use crate::storage::layout::{FixedLayouts, Layouts, PropertyColumn};
use crate::storage::schema::events_to_batch;

/// Sorts first, so it is every file's minimum `distinct_id` in the log's statistics.
const VICTIM: &str = "aaaa-victim-7f3";
/// Sorts last: a maximum.
const VICTIM2: &str = "zzzz-victim-2";
const SECRET: &str = "victim-secret-91c";

fn pid(team: i64, distinct_id: &str) -> String {
    person_uuid(TeamId(team), distinct_id)
        .hyphenated()
        .to_string()
}

fn event(distinct_id: &str, day: u32, i: usize, props: &serde_json::Value) -> Event {
    event_at(distinct_id, day, 10, i, props)
}

/// [`event`] at hour `hour` of the day.
fn event_at(distinct_id: &str, day: u32, hour: u32, i: usize, props: &serde_json::Value) -> Event {
    Event {
        uuid: uuid::Uuid::now_v7(),
        event: format!("e{}", i % 3),
        distinct_id: distinct_id.into(),
        timestamp: Utc
            .with_ymd_and_hms(2024, 3, day, hour, (i % 60) as u32, 0)
            .unwrap(),
        created_at: Utc::now(),
        properties: props.as_object().unwrap().clone(),
    }
}

fn batch(events: &[(i64, Event)]) -> RecordBatch {
    events_to_batch(
        events.iter().map(|(t, e)| (TeamId(*t), e)),
        |_, _| None,
        &Default::default(),
    )
}

/// `b` with every row's `person_id` set to `person`.
fn with_person_id(b: RecordBatch, person: &str) -> RecordBatch {
    let idx = b.schema().index_of("person_id").unwrap();
    let mut cols = b.columns().to_vec();
    let text = StringArray::from(vec![person; b.num_rows()]);
    cols[idx] = Arc::new(crate::storage::ids::to_uuid(&text).unwrap()) as ArrayRef;
    RecordBatch::try_new(b.schema(), cols).unwrap()
}

async fn open(dir: &std::path::Path) -> EventsTable {
    let url = Url::from_directory_path(dir.join("events")).unwrap();
    let mut cfg = TableConfig::new(url);
    cfg.row_group_rows = 16;
    EventsTable::open(cfg).await.unwrap()
}

/// `(team_id, distinct_id, person_id)` of every row, read through the table's DataFusion
/// provider as queries read it, sorted.
async fn rows(table: &EventsTable) -> Vec<(i64, String, String)> {
    let t = table.current().await;
    let ctx = SessionContext::new();
    t.update_datafusion_session(&ctx.state()).unwrap();
    ctx.register_table("events", t.table_provider().await.unwrap())
        .unwrap();
    let batches = ctx
        .sql("SELECT team_id, distinct_id, person_id FROM events")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in batches {
        let text = |i: usize| {
            let c = crate::storage::ids::to_text(b.column(i).as_ref()).unwrap();
            c.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let teams = arrow::compute::cast(b.column(0), &DataType::Int64).unwrap();
        let teams = teams.as_primitive::<arrow::datatypes::Int64Type>();
        for ((t, d), p) in teams.values().iter().zip(text(1)).zip(text(2)) {
            out.push((*t, d, p));
        }
    }
    out.sort();
    out
}

fn log_dir_names(root: &std::path::Path) -> Vec<String> {
    files_under(&root.join("_delta_log"))
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_people_leaves_no_trace_in_files_or_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("events");
    let table = open(dir.path()).await;
    let secret = json!({"note": SECRET, "$browser": "Firefox"});
    let plain = json!({"$browser": "Chrome"});
    for round in 0..4usize {
        let mut evs = Vec::new();
        for i in 0..10 {
            let (day, n) = (1 + (i % 2) as u32, round * 10 + i);
            evs.push((1, event(VICTIM, day, n, &secret)));
            evs.push((1, event(&format!("user-{i}"), day, n, &plain)));
            evs.push((2, event(&format!("t2-user-{i}"), day, n, &plain)));
        }
        if round == 2 {
            evs.push((1, event(VICTIM2, 1, 0, &plain)));
        }
        table.append(batch(&evs), round as u64 + 1).await.unwrap();
    }
    // Compaction replaces the small files; the replaced ones, victim rows and all, stay
    // on disk (and in the log) until a vacuum.
    let compacted = table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert!(compacted.files_removed >= 8, "{compacted:?}");
    let late = [
        (1, event(VICTIM, 1, 59, &secret)),
        (1, event("user-late", 2, 58, &plain)),
    ];
    table.append(batch(&late), 5).await.unwrap();
    // Another project's row that happens to carry the victim's person id: not the
    // victim's data (the delete is per project), so it stays.
    let other = with_person_id(
        batch(&[(2, event("t2-same-pid", 1, 0, &plain))]),
        &pid(1, VICTIM),
    );
    table.append(other, 6).await.unwrap();
    assert_eq!(table.committed_seq().await.unwrap(), 6);

    // The helpers find the victim first: as raw text in the log's statistics, and as
    // decoded values in the (zstd) data files.
    let needles = [VICTIM, VICTIM2, SECRET];
    let raw = grep_dir(&root, &needles);
    assert!(
        raw.iter()
            .any(|(p, n)| n == VICTIM && p.to_string_lossy().contains("_delta_log")),
        "{raw:?}"
    );
    let decoded = parquet_values_containing(&root, &needles);
    for n in needles {
        assert!(decoded.iter().any(|(_, v)| v.contains(n)), "{n} not found");
    }
    let before = rows(&table).await;
    // What a crash mid-append leaves: a data file no commit names. And the writer lease,
    // which lives beside the log and must survive.
    let data_file = files_under(&root)
        .into_iter()
        .find(|p| p.to_string_lossy().contains("team_id=1/"))
        .unwrap();
    let orphan = data_file.with_file_name("part-left-by-a-crash.zstd.parquet");
    std::fs::copy(&data_file, &orphan).unwrap();
    let lease = root.join("_hedgerow/writer.json");
    std::fs::create_dir_all(lease.parent().unwrap()).unwrap();
    std::fs::write(&lease, "{}").unwrap();

    let ids = [pid(1, VICTIM), pid(1, VICTIM2), "nobody".to_owned()];
    // One id per delete, so the chunking is exercised.
    let stats = table
        .delete_person_events_chunked(TeamId(1), &ids, 1)
        .await
        .unwrap();
    assert_eq!(stats.rows_deleted, 4 * 10 + 1 + 1, "{stats:?}");
    assert!(stats.files_rewritten >= 2, "{stats:?}");
    assert!(stats.files_vacuumed >= stats.files_rewritten, "{stats:?}");
    assert!(stats.log_files_removed >= 8, "{stats:?}");

    // Nothing left anywhere: not as raw bytes, not in any Parquet value (data files,
    // files no longer in the snapshot, checkpoints), and no log entry of the deletes.
    assert_eq!(grep_dir(&root, &needles), vec![]);
    assert_eq!(parquet_values_containing(&root, &needles), vec![]);
    assert_eq!(grep_dir(&root.join("_delta_log"), &["DELETE"]), vec![]);
    assert!(!orphan.exists());
    assert_eq!(std::fs::read(&lease).unwrap(), b"{}");
    let log = log_dir_names(&root);
    assert!(log.iter().all(|n| !n.ends_with(".tmp")), "{log:?}");
    assert_eq!(
        log.iter().filter(|n| n.ends_with(".json")).count(),
        1,
        "{log:?}"
    );

    // Everyone else's rows are all still there, read the way queries read them.
    let after = rows(&table).await;
    let expected: Vec<_> = before
        .iter()
        .filter(|(t, d, _)| !(*t == 1 && (d == VICTIM || d == VICTIM2)))
        .cloned()
        .collect();
    assert_eq!(after.len(), before.len() - 42);
    assert_eq!(after, expected);
    assert!(after.iter().any(|(t, d, _)| *t == 2 && d == "t2-same-pid"));
    // The files the delete rewrote do not claim the sort order (its scan may read a file
    // in ranges, in parallel); the files it left alone still do.
    let guard = table.table.lock().await.clone();
    let store = guard.log_store().object_store(None);
    let mut claims = (0, 0);
    for f in partition_files(&guard).unwrap().into_values().flatten() {
        let bytes = fetch(&store, &f.path).await.unwrap();
        if super::merge::file_claims_sort_order(&bytes) {
            claims.0 += 1;
        } else {
            claims.1 += 1;
        }
    }
    assert!(
        claims.0 >= 1 && claims.1 as u64 >= stats.files_rewritten.min(2),
        "{claims:?}"
    );
    assert_eq!(table.committed_seq().await.unwrap(), 6);

    // The table keeps working: appends, compaction, a reopen.
    let more = [(1, event("user-after", 1, 0, &plain))];
    table.append(batch(&more), 7).await.unwrap();
    assert_eq!(table.committed_seq().await.unwrap(), 7);
    table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!(rows(&table).await.len(), after.len() + 1);
    drop(table);
    let table = open(dir.path()).await;
    assert_eq!(table.committed_seq().await.unwrap(), 7);
    assert_eq!(rows(&table).await.len(), after.len() + 1);

    // Erasing again finds nothing, still cleans up, twice in a row (nothing new to
    // commit the second time), and the position still holds.
    for _ in 0..2 {
        let again = table
            .delete_person_events(TeamId(1), &[pid(1, VICTIM)])
            .await
            .unwrap();
        assert_eq!(again.rows_deleted, 0);
        assert_eq!(table.committed_seq().await.unwrap(), 7);
    }
    assert_eq!(rows(&table).await.len(), after.len() + 1);
    table.append(batch(&more), 8).await.unwrap();
    assert_eq!(table.committed_seq().await.unwrap(), 8);
    assert_eq!(grep_dir(&root, &needles), vec![]);
}

/// The fold sweep rewrites only the files where merged-away ids are at least the given
/// share of the rows, reports the ids the other files still hold, and leaves other
/// projects' rows alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fold_sweep_rewrites_only_files_dense_in_merged_ids() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({});
    let day1: Vec<_> = ["a", "b", "c", "d", "a", "b"]
        .iter()
        .enumerate()
        .map(|(i, d)| (1, event(d, 1, i, &p)))
        .collect();
    table.append(batch(&day1), 1).await.unwrap();
    let day2: Vec<_> = ["a", "d", "c"]
        .iter()
        .enumerate()
        .map(|(i, d)| (1, event(d, 2, i, &p)))
        .collect();
    table.append(batch(&day2), 2).await.unwrap();
    // Project 2 has a row with project 1's person id for "a": not project 1's to fold.
    let other = with_person_id(batch(&[(2, event("x", 1, 0, &p))]), &pid(1, "a"));
    table.append(other, 3).await.unwrap();

    let (pa, pb, pc, pd) = (pid(1, "a"), pid(1, "b"), pid(1, "c"), pid(1, "d"));
    // b merged into a, then a into c: the chain ends at c. An identity changes nothing.
    let map = HashMap::from([
        (pb.clone(), pa.clone()),
        (pa.clone(), pc.clone()),
        (pd.clone(), pd.clone()),
    ]);
    let layouts = FixedLayouts(Layouts::default());
    // Day 1 has 4 merged-away rows of 6, day 2 one of 3: at a half only day 1 is rewritten.
    let stats = table
        .fold_overrides(TeamId(1), &map, 0.5, &layouts)
        .await
        .unwrap();
    assert_eq!(
        (stats.files_read, stats.rows_read, stats.rows_overridden),
        (2, 9, 5),
        "{stats:?}"
    );
    assert_eq!(
        (stats.files_rewritten, stats.rows_folded),
        (1, 4),
        "{stats:?}"
    );
    assert_eq!(stats.still_present, HashSet::from([pa.clone()]));
    // Day 2's "a" row keeps a's id until its file is folded.
    let check = |got: Vec<(i64, String, String)>, unfolded: usize| {
        assert_eq!(got.len(), 10);
        let mut left = 0;
        for (t, d, person) in &got {
            let want = match (*t, d.as_str()) {
                (1, "a") if *person == pa => {
                    left += 1;
                    continue;
                }
                (1, "a" | "b" | "c") => &pc,
                (1, "d") => &pd,
                (2, _) => &pa,
                other => panic!("unexpected row {other:?}"),
            };
            assert_eq!(person, want, "{t} {d}");
        }
        assert_eq!(left, unfolded);
    };
    check(rows(&table).await, 1);
    assert_eq!(table.committed_seq().await.unwrap(), 3);

    // Any merged-away row: day 2 too; then no file holds one.
    let stats = table
        .fold_overrides(TeamId(1), &map, 0.0, &layouts)
        .await
        .unwrap();
    assert_eq!(
        (stats.files_rewritten, stats.rows_folded),
        (1, 1),
        "{stats:?}"
    );
    assert!(stats.still_present.is_empty());
    check(rows(&table).await, 0);

    // Nothing left: no commit.
    let version = table.current().await.version();
    let none = table
        .fold_overrides(TeamId(1), &map, 0.0, &layouts)
        .await
        .unwrap();
    assert_eq!((none.rows_overridden, none.files_rewritten), (0, 0));
    assert_eq!(table.current().await.version(), version);
    // A cycle is refused.
    let cycle = HashMap::from([(pa.clone(), pd.clone()), (pd.clone(), pa.clone())]);
    assert!(matches!(
        table.fold_overrides(TeamId(1), &cycle, 0.0, &layouts).await,
        Err(StorageError::Config(_))
    ));
    // The table still takes appends.
    table
        .append(batch(&[(1, event("e", 1, 0, &p))]), 4)
        .await
        .unwrap();
    assert_eq!(rows(&table).await.len(), 11);
    assert_eq!(table.committed_seq().await.unwrap(), 4);
}

/// Compaction folds the overrides it is given into the rows it rewrites anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_folds_merged_ids_of_the_rows_it_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({});
    for (seq, d) in [(1, "a"), (2, "b"), (3, "a")] {
        table
            .append(batch(&[(1, event(d, 1, seq as usize, &p))]), seq)
            .await
            .unwrap();
    }
    let (pa, pb) = (pid(1, "a"), pid(1, "b"));
    let persons: PersonMaps = HashMap::from([(
        TeamId(1),
        Arc::new(HashMap::from([(pa.clone(), pb.clone())])),
    )]);
    let stats = table
        .compact(2, &FixedLayouts(Layouts::default()), &persons)
        .await
        .unwrap();
    assert_eq!(
        (stats.files_removed, stats.rows_folded),
        (3, 2),
        "{stats:?}"
    );
    let got = rows(&table).await;
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|(_, _, person)| *person == pb), "{got:?}");
}

/// A rewrite reads and writes without holding the table: appends commit meanwhile, and a
/// rewrite whose files were erased meanwhile is dropped (its copies deleted) rather than
/// bringing the erased rows back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_whose_files_went_meanwhile_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("events");
    let table = open(dir.path()).await;
    let secret = json!({"note": SECRET});
    for seq in 1..=3u64 {
        let evs = [
            (1, event(VICTIM, 1, seq as usize, &secret)),
            (1, event("user", 1, seq as usize, &json!({}))),
        ];
        table.append(batch(&evs), seq).await.unwrap();
    }
    let files = partition_files(&table.table.lock().await.clone())
        .unwrap()
        .remove(&("1".to_owned(), "2024-03-01".to_owned()))
        .unwrap();
    let refs: Vec<&DataFile> = files.iter().collect();
    let current = Arc::new(Layouts::default());
    let written = table
        .write_rewrite(TeamId(1), "2024-03-01", &refs, &current, None, None)
        .await
        .unwrap();
    let copies: Vec<String> = written.adds.iter().map(|a| a.path.clone()).collect();
    assert_eq!(copies.len(), 1);
    assert!(root.join(&copies[0]).exists());
    // Meanwhile: an append commits (the rewrite does not hold the table) and the victim's
    // rows are erased (their files replaced). The late row is not newer than the others:
    // two files of the newest day the second of which is all newer would be a day's main
    // file and its tail, which compaction leaves alone.
    table
        .append(batch(&[(1, event("late", 1, 2, &json!({})))]), 4)
        .await
        .unwrap();
    let erased = table
        .delete_person_events(TeamId(1), &[pid(1, VICTIM)])
        .await
        .unwrap();
    assert_eq!(erased.rows_deleted, 3);
    let committed = table
        .commit_rewrite(TeamId(1), "2024-03-01", &refs, written)
        .await
        .unwrap();
    assert!(committed.is_none());
    assert!(
        !root.join(&copies[0]).exists(),
        "the dropped copy is deleted"
    );
    let got = rows(&table).await;
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.iter().all(|(_, d, _)| d != VICTIM), "{got:?}");
    // With nothing gone meanwhile, the same rewrite commits.
    let stats = table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!(
        (stats.partitions, stats.partitions_abandoned),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(rows(&table).await, got);
}

/// Compaction merges a partition's files by their sort order: the one file it writes holds
/// every row once, sorted by (event, person_id, timestamp) across what were separate
/// files, and says so in its footer; a file whose ids were folded (so its rows moved) is
/// sorted before it joins the merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_merges_files_into_one_sorted_run() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({"$browser": "Firefox"});
    let mut n = 0;
    for seq in 1..=5u64 {
        // Every file holds every event name and interleaving persons and times.
        let evs: Vec<(i64, Event)> = (0..40)
            .map(|i| {
                n += 1;
                let who = format!("u{}", (i * 7 + seq as usize * 3) % 11);
                (1, event(&who, 1, n * 13 % 60 + i, &p))
            })
            .collect();
        table.append(batch(&evs), seq).await.unwrap();
    }
    let folded_from = pid(1, "u3");
    let folded_to = pid(1, "u0");
    let persons: PersonMaps = HashMap::from([(
        TeamId(1),
        Arc::new(HashMap::from([(folded_from.clone(), folded_to.clone())])),
    )]);
    let stats = table
        .compact(2, &FixedLayouts(Layouts::default()), &persons)
        .await
        .unwrap();
    assert_eq!(
        (stats.files_removed, stats.files_added),
        (5, 1),
        "{stats:?}"
    );
    assert!(stats.rows_folded > 0, "{stats:?}");
    let guard = table.table.lock().await.clone();
    let files: Vec<DataFile> = partition_files(&guard)
        .unwrap()
        .into_values()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1);
    let store = guard.log_store().object_store(None);
    let bytes = fetch(&store, &files[0].path).await.unwrap();
    assert!(super::merge::file_claims_sort_order(&bytes));
    let keys = sort_keys(bytes, &files[0].path);
    assert_eq!(keys.len(), 200);
    assert!(
        keys.is_sorted(),
        "rows are in sort order across the former files"
    );
    assert!(keys.iter().all(|(_, p, _)| *p != folded_from));
    assert_eq!(rows(&table).await.len(), 200);
}

/// A vacuum deletes the files compaction replaced once; the next ones find only files it
/// already deleted (their tombstones stay in the log) and commit nothing.
#[tokio::test]
async fn a_vacuum_with_nothing_new_to_delete_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({});
    for seq in 1..=3u64 {
        let evs: Vec<(i64, Event)> = (0..10)
            .map(|i| (1, event(&format!("u{i}"), 1, seq as usize * 10 + i, &p)))
            .collect();
        table.append(batch(&evs), seq).await.unwrap();
    }
    table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    let version = || async { table.table.lock().await.version() };
    let retention = chrono::Duration::seconds(-1);
    assert_eq!(
        table.vacuum(retention).await.unwrap(),
        3,
        "the replaced files"
    );
    let after_first = version().await;
    for _ in 0..3 {
        assert_eq!(table.vacuum(retention).await.unwrap(), 0);
    }
    assert_eq!(version().await, after_first, "no VACUUM START/END commits");
    // A newer replacement is deleted by the next vacuum.
    for seq in 4..=5u64 {
        let evs = vec![(1, event("u1", 1, seq as usize * 10, &p))];
        table.append(batch(&evs), seq).await.unwrap();
    }
    let stats = table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert!(stats.files_removed > 0, "{stats:?}");
    assert_eq!(
        table.vacuum(retention).await.unwrap(),
        stats.files_removed as usize
    );
    assert!(version().await > after_first);
    assert_eq!(rows(&table).await.len(), 32);
}

/// Each row's (event, person_id, timestamp) in a data file, in file order.
fn sort_keys(bytes: bytes::Bytes, path: &Path) -> Vec<(String, String, i64)> {
    let mut keys = Vec::new();
    for b in decode(bytes, path, 1, 0).unwrap() {
        let b = b.unwrap();
        let text = |c: &str| {
            let a = crate::storage::ids::to_text(b.column_by_name(c).unwrap().as_ref()).unwrap();
            a.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let ts =
            arrow::compute::cast(b.column_by_name("timestamp").unwrap(), &DataType::Int64).unwrap();
        let ts = ts.as_primitive::<arrow::datatypes::Int64Type>();
        for ((e, p), t) in text("event")
            .into_iter()
            .zip(text("person_id"))
            .zip(ts.values())
        {
            keys.push((e, p, *t));
        }
    }
    keys
}

/// Compaction writes the newest hour of a project's newest day to a file of its own (the
/// events list then reads that file alone), leaves such a pair alone while the day is the
/// newest, and merges it into one file once a newer day exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_hour_of_the_newest_day_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({"$browser": "Firefox"});
    let mut seq = 0u64;
    let mut append_day = async |table: &EventsTable, day: u32| {
        for part in 0..3usize {
            let evs: Vec<(i64, Event)> = (0..24 * 4)
                .map(|i| {
                    let hour = (i / 4) as u32;
                    let who = format!("u{}", (i * 5 + part) % 7);
                    (1, event_at(&who, day, hour, i * 3 + part * 17, &p))
                })
                .collect();
            seq += 1;
            table.append(batch(&evs), seq).await.unwrap();
        }
    };
    let compact = async |table: &EventsTable| {
        table
            .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
            .await
            .unwrap()
    };
    // (date, [(rows, least time, greatest time)] by least time) of every file, and checks
    // that each holds one run in the sort order, claimed.
    let layout = async |table: &EventsTable| {
        let guard = table.table.lock().await.clone();
        let store = guard.log_store().object_store(None);
        let mut out = Vec::new();
        for ((_, date), files) in partition_files(&guard).unwrap() {
            let mut shape = Vec::new();
            for f in files {
                let bytes = fetch(&store, &f.path).await.unwrap();
                assert!(super::merge::file_claims_sort_order(&bytes));
                let keys = sort_keys(bytes, &f.path);
                assert!(keys.is_sorted(), "one sorted run");
                let times = keys.iter().map(|k| k.2);
                shape.push((
                    keys.len(),
                    times.clone().min().unwrap(),
                    times.max().unwrap(),
                ));
            }
            shape.sort_by_key(|s| s.1);
            out.push((date, shape));
        }
        out
    };
    let hour = 3_600_000_000i64;
    let day_start = |day: u32| {
        Utc.with_ymd_and_hms(2024, 3, day, 0, 0, 0)
            .unwrap()
            .timestamp_micros()
    };

    append_day(&table, 1).await;
    append_day(&table, 2).await;
    let first = compact(&table).await;
    assert_eq!(first.partitions, 2, "{first:?}");
    let shape = layout(&table).await;
    assert_eq!(shape.len(), 2);
    assert_eq!(shape[0].1.len(), 1, "an older day is one file: {shape:?}");
    // The newest row is at 23:59 of day 2: the tail holds 23:00 to 23:59 (12 rows, 4 an
    // hour from each of 3 appends), the main file the rest.
    let newest = &shape[1].1;
    assert_eq!(newest.len(), 2, "{shape:?}");
    let (main, tail) = (newest[0], newest[1]);
    assert_eq!((main.0, tail.0), (24 * 12 - 12, 12), "{shape:?}");
    assert!(
        main.2 < tail.1,
        "the tail is newer than every row of the main file"
    );
    assert!(tail.1 >= tail.2 - hour && tail.1 >= day_start(2) + 23 * hour);
    assert_eq!(rows(&table).await.len(), 2 * 24 * 12);

    // Nothing to do while the day stays the newest.
    assert_eq!(compact(&table).await.partitions, 0);

    // A newer day: the former newest day's pair is merged, also when compaction waits for
    // more small files than it has (the default 8; the new day's 3 files wait), and the new
    // day's newest hour gets the tail.
    append_day(&table, 3).await;
    let eight = table
        .compact(8, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!(
        eight.partitions, 1,
        "the former newest day's pair: {eight:?}"
    );
    let again = compact(&table).await;
    assert_eq!(again.partitions, 1, "the new day: {again:?}");
    let shape = layout(&table).await;
    let files: Vec<usize> = shape.iter().map(|(_, s)| s.len()).collect();
    assert_eq!(files, vec![1, 1, 2], "{shape:?}");
    assert_eq!(shape[1].1[0].0, 24 * 12);
    assert_eq!(rows(&table).await.len(), 3 * 24 * 12);
    assert_eq!(compact(&table).await.partitions, 0);

    // A fold of merged ids rewrites the newest day's files as compaction writes them: its
    // last hour still in a file of its own.
    let map = HashMap::from([(pid(1, "u1"), pid(1, "u0"))]);
    let folded = table
        .fold_overrides(TeamId(1), &map, 0.0, &FixedLayouts(Layouts::default()))
        .await
        .unwrap();
    assert_eq!(folded.files_rewritten, 4, "{folded:?}");
    let after = layout(&table).await;
    let files: Vec<usize> = after.iter().map(|(_, s)| s.len()).collect();
    assert_eq!(files, vec![1, 1, 2], "{after:?}");
    assert_eq!(
        after[2].1, shape[2].1,
        "the same rows in the main file and the tail"
    );
    assert_eq!(compact(&table).await.partitions, 0);
}

/// Opening after a crash between a write's files and its commit deletes those files, and
/// only those: files of the current version and files a compaction replaced (an older
/// version still names them until vacuum) stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_no_version_names_are_deleted_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({"$browser": "Firefox"});
    for seq in 1..=3u64 {
        let evs: Vec<(i64, Event)> = (0..20)
            .map(|i| (1, event(&format!("u{i}"), 1, i, &p)))
            .collect();
        table.append(batch(&evs), seq).await.unwrap();
    }
    let replaced = files_under(&dir.path().join("events"));
    table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    let data = |p: &std::path::Path| p.extension().is_some_and(|e| e == "parquet");
    let before: Vec<_> = files_under(&dir.path().join("events"))
        .into_iter()
        .filter(|p| data(p))
        .collect();
    assert!(replaced.iter().filter(|p| data(p)).all(|p| p.exists()));
    let orphan = before[0].with_file_name("part-left-by-a-crash.zstd.parquet");
    std::fs::copy(&before[0], &orphan).unwrap();
    drop(table);

    let table = open(dir.path()).await;
    assert_eq!(table.delete_uncommitted_files().await.unwrap(), 1);
    assert!(!orphan.exists());
    let after: Vec<_> = files_under(&dir.path().join("events"))
        .into_iter()
        .filter(|p| data(p))
        .collect();
    assert_eq!(after.len(), before.len());
    assert_eq!(rows(&table).await.len(), 60);
    assert_eq!(table.delete_uncommitted_files().await.unwrap(), 0);
}

/// A file whose footer does not claim the sort order (written by an older version, or by
/// another tool) is sorted before it joins the merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_sorts_inputs_that_do_not_claim_the_order() {
    use super::merge::{Input, Prepare, merge_sorted};
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({});
    let evs: Vec<(i64, Event)> = (0..30)
        .map(|i| (1, event(&format!("u{}", i % 7), 1, i, &p)))
        .collect();
    table.append(batch(&evs[..15]), 1).await.unwrap();
    let guard = table.table.lock().await.clone();
    let schema = guard.snapshot().unwrap().snapshot().arrow_schema();
    let file = partition_files(&guard)
        .unwrap()
        .into_values()
        .flatten()
        .next()
        .unwrap();
    let store = guard.log_store().object_store(None);
    let sorted_bytes = fetch(&store, &file.path).await.unwrap();
    // The other half, written in reverse order by a plain Parquet writer (no
    // `sorting_columns`), without the partition columns, as files hold them.
    let rest = batch(&evs[15..]);
    let rev = arrow::array::UInt32Array::from_iter_values((0..15u32).rev());
    let rest = arrow::compute::take_record_batch(&rest, &rev).unwrap();
    let keep: Vec<usize> = (0..rest.num_columns())
        .filter(|&i| !["team_id", "event_date"].contains(&rest.schema().field(i).name().as_str()))
        .collect();
    let rest = rest.project(&keep).unwrap();
    let mut unsorted = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut unsorted, rest.schema(), None).unwrap();
    w.write(&rest).unwrap();
    w.close().unwrap();
    let unsorted = bytes::Bytes::from(unsorted);
    assert!(super::merge::file_claims_sort_order(&sorted_bytes));
    assert!(!super::merge::file_claims_sort_order(&unsorted));
    let layouts = Layouts::default();
    let date32 = crate::storage::schema::date32_of_micros(
        Utc.with_ymd_and_hms(2024, 3, 1, 0, 0, 0)
            .unwrap()
            .timestamp_micros(),
    );
    let prep = Prepare {
        team: TeamId(1),
        date32,
        layouts: &layouts,
        persons: None,
        schema: &schema,
    };
    let inputs = vec![
        Input {
            path: file.path.clone(),
            bytes: sorted_bytes,
        },
        Input {
            path: Path::from("unsorted.parquet"),
            bytes: unsorted,
        },
    ];
    let mut out = Vec::new();
    merge_sorted(inputs, &prep, |b| {
        out.push(b);
        true
    })
    .unwrap();
    let all = arrow::compute::concat_batches(&schema, &out).unwrap();
    assert_eq!(all.num_rows(), 30);
    let resorted = super::write::sort_for_write(&all).unwrap();
    assert_eq!(all, resorted, "the merge's output is in sort order");
}

/// Files written before a property was promoted are rewritten by compaction into the
/// current layout, even when they are not small-file candidates: afterwards every file's
/// statistics say its rows hold the project's columns, and the rows hold the values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_moves_older_rows_into_the_current_layout() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let props = json!({"$browser": "Firefox", "n": 3});
    let evs: Vec<(i64, Event)> = (0..6)
        .map(|i| (1, event(&format!("u{i}"), 1 + (i % 2) as u32, i, &props)))
        .collect();
    table.append(batch(&evs), 1).await.unwrap();
    let mut layouts = Layouts::default();
    layouts.push(
        TeamId(1),
        PropertyColumn::new("$browser", crate::propdefs::PropertyType::String),
    );
    let before = partition_files(&table.table.lock().await.clone()).unwrap();
    assert!(before.values().flatten().all(|f| f.layout == Some(0)));
    // One file per partition: no small-file compaction, only the layout moves them.
    let stats = table
        .compact(8, &FixedLayouts(layouts.clone()), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!((stats.partitions, stats.files_removed), (2, 2), "{stats:?}");
    let guard = table.table.lock().await.clone();
    let after = partition_files(&guard).unwrap();
    assert!(after.values().flatten().all(|f| f.layout == Some(1)));
    let store = guard.log_store().object_store(None);
    let mut rows = 0;
    for f in after.values().flatten() {
        let bytes = fetch(&store, &f.path).await.unwrap();
        for b in decode(bytes, &f.path, 1, 0).unwrap() {
            let b = b.unwrap();
            rows += b.num_rows();
            let browser = b.column_by_name("p_$browser").unwrap();
            let browser = arrow::compute::cast(browser, &DataType::Utf8).unwrap();
            assert!(
                browser
                    .as_string::<i32>()
                    .iter()
                    .all(|v| v == Some("Firefox"))
            );
            let p = arrow::compute::cast(b.column_by_name("properties").unwrap(), &DataType::Utf8)
                .unwrap();
            assert!(p.as_string::<i32>().iter().all(|v| v == Some(r#"{"n":3}"#)));
        }
    }
    assert_eq!(rows, 6);
    // Nothing left to do.
    let again = table
        .compact(8, &FixedLayouts(layouts), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!(again.partitions, 0);
}

/// Rows copied out of `SortedRows` a range at a time are the rows of the batches, sorted as
/// `sort_for_write` sorts their concatenation, and its partitions are the (team, date) runs.
#[test]
fn sorted_rows_sort_across_batches_like_one_sort() {
    use super::write::{SortedRows, sort_for_write};
    let p = json!({"k": 1});
    let part = |team: i64, names: &[(&str, u32)]| {
        batch(
            &names
                .iter()
                .enumerate()
                .map(|(i, (d, day))| (team, event(d, *day, i * 7 % 5, &p)))
                .collect::<Vec<_>>(),
        )
    };
    let batches = vec![
        part(2, &[("z", 3), ("a", 1), ("m", 3)]),
        part(1, &[("q", 2), ("b", 2), ("b", 1), ("c", 3)]),
        RecordBatch::new_empty(batch(&[]).schema()),
        part(1, &[("a", 3), ("y", 1)]),
    ];
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    let want = sort_for_write(&arrow::compute::concat_batches(&batches[0].schema(), refs).unwrap())
        .unwrap();
    let sorted = SortedRows::new(batches).unwrap();
    assert_eq!(sorted.len(), 9);
    let mut got = Vec::new();
    for start in (0..sorted.len()).step_by(4) {
        got.push(sorted.rows(start..(start + 4).min(sorted.len())).unwrap());
    }
    let got = arrow::compute::concat_batches(&want.schema(), &got).unwrap();
    assert_eq!(got, want);
    // Partitions: (1, day 1), (1, day 2), (1, day 3), (2, day 1), (2, day 3).
    let sizes: Vec<usize> = sorted.partitions().iter().map(|r| r.len()).collect();
    assert_eq!(sizes, vec![2, 2, 2, 1, 2]);
    assert_eq!(SortedRows::new(Vec::new()).unwrap().len(), 0);
}

/// A column of mostly distinct values is written without a dictionary (text as
/// DELTA_LENGTH_BYTE_ARRAY), by an append and by compaction alike; a column of repeated
/// values keeps its dictionary; and the rows read back the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mostly_distinct_columns_are_written_without_a_dictionary() {
    use deltalake::parquet::basic::Encoding;
    use deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    for seq in 1..=2u64 {
        // Each event's residual `properties` holds a value of its own.
        let evs: Vec<(i64, Event)> = (0..400)
            .map(|i| {
                let p = json!({"$insert_id": format!("{seq}-{i}-{}", i * 7919 % 400)});
                (1, event(&format!("u{}", i % 5), 1, i, &p))
            })
            .collect();
        table.append(batch(&evs), seq).await.unwrap();
    }
    let check = |bytes: bytes::Bytes| {
        let reader = SerializedFileReader::new(bytes).unwrap();
        let md = reader.metadata();
        let chunk = |name: &str| {
            let schema = md.file_metadata().schema_descr();
            let i = (0..schema.num_columns())
                .find(|&i| schema.column(i).name() == name)
                .unwrap();
            md.row_group(0).column(i).clone()
        };
        let props = chunk("properties");
        assert!(props.dictionary_page_offset().is_none(), "{props:?}");
        assert!(
            props
                .encodings()
                .any(|e| e == Encoding::DELTA_LENGTH_BYTE_ARRAY),
            "{props:?}"
        );
        assert!(chunk("uuid").dictionary_page_offset().is_none());
        assert!(chunk("distinct_id").dictionary_page_offset().is_some());
        // Dense columns are zstd, columns without values (sparse) LZ4, `timestamp` as it is.
        assert!(matches!(chunk("uuid").compression(), Compression::ZSTD(_)));
        assert_eq!(chunk("timestamp").compression(), Compression::UNCOMPRESSED);
        let rg = md.row_group(0);
        let empty: Vec<_> = rg
            .columns()
            .iter()
            .filter(|c| {
                c.statistics()
                    .and_then(|s| s.null_count_opt())
                    .is_some_and(|n| n as i64 == rg.num_rows())
            })
            .collect();
        assert!(!empty.is_empty());
        for c in empty {
            assert_eq!(c.compression(), Compression::LZ4_RAW, "{c:?}");
        }
    };
    let files = |guard: &DeltaTable| -> Vec<DataFile> {
        partition_files(guard)
            .unwrap()
            .into_values()
            .flatten()
            .collect()
    };
    let guard = table.table.lock().await.clone();
    let store = guard.log_store().object_store(None);
    assert_eq!(files(&guard).len(), 2);
    for f in files(&guard) {
        check(fetch(&store, &f.path).await.unwrap());
    }
    let before = rows(&table).await;
    let stats = table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::new())
        .await
        .unwrap();
    assert_eq!(stats.files_added, 1, "{stats:?}");
    let guard = table.table.lock().await.clone();
    for f in files(&guard) {
        check(fetch(&store, &f.path).await.unwrap());
    }
    assert_eq!(rows(&table).await, before);
    assert_eq!(before.len(), 800);
}

/// `Distinct` judges a column by the share of distinct values within each sampled batch,
/// and leaves sparse columns alone.
#[test]
fn distinct_judges_columns_by_their_share_of_distinct_values() {
    use super::write::Distinct;
    use arrow::array::Float64Array;
    let sample = |offset: usize| {
        let unique: StringArray = (0..300)
            .map(|i| Some(format!("id-{}", i + offset)))
            .collect();
        let repeated: StringArray = (0..300).map(|i| Some(format!("s{}", i / 4))).collect();
        let floats: Float64Array = (0..300).map(|i| Some(i as f64 + 0.5)).collect();
        let sparse: StringArray = (0..300)
            .map(|i| (i % 2 == 0).then(|| format!("x{i}")))
            .collect();
        RecordBatch::try_from_iter([
            ("unique", Arc::new(unique) as ArrayRef),
            ("repeated", Arc::new(repeated) as ArrayRef),
            ("floats", Arc::new(floats) as ArrayRef),
            ("sparse", Arc::new(sparse) as ArrayRef),
        ])
        .unwrap()
    };
    let names = |d: Distinct| d.distinct.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(names(Distinct::of(&[sample(0)])), ["unique", "floats"]);
    // Two batches of 150 sparse values each: 300 values, all distinct.
    assert_eq!(
        names(Distinct::of(&[sample(0), sample(1000)])),
        ["unique", "floats", "sparse"]
    );
    assert!(Distinct::of(&[]).distinct.is_empty());
}

/// A column with under 5% non-null values in the sample is sparse (written with LZ4).
#[test]
fn columns_with_few_values_are_sparse() {
    use super::write::Distinct;
    let batch = |every: usize| {
        let a: StringArray = (0..1000)
            .map(|i| (i % every == 0).then(|| format!("v{}", i % 3)))
            .collect();
        RecordBatch::try_from_iter([("a", Arc::new(a) as ArrayRef)]).unwrap()
    };
    assert_eq!(Distinct::of(&[batch(100)]).sparse, ["a"], "1%");
    assert!(Distinct::of(&[batch(10)]).sparse.is_empty(), "10%");
    assert!(Distinct::of(&[batch(1)]).sparse.is_empty());
}

/// Sparse columns are written with LZ4, property columns (not in the events schema) too;
/// the others keep zstd.
#[tokio::test]
async fn sparse_columns_are_written_with_lz4() {
    use super::write::Distinct;
    use deltalake::parquet::basic::Compression;
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let judged = Distinct {
        distinct: vec![],
        sparse: vec!["p_survey".into(), "person_properties".into()],
    };
    let props = table.writer_properties(&judged, true);
    let codec = |c: &str| props.compression(&ColumnPath::from(c));
    assert_eq!(codec("p_survey"), Compression::LZ4_RAW);
    assert_eq!(codec("person_properties"), Compression::LZ4_RAW);
    assert!(matches!(codec("p_other"), Compression::ZSTD(_)));
    assert!(matches!(codec("uuid"), Compression::ZSTD(_)));
    assert_eq!(codec("timestamp"), Compression::UNCOMPRESSED);
}

/// A log entry that does not parse is refused when the table is read, naming the entry (the
/// kernel's own message says what is wrong, not where).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_entry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let evs = vec![(1, event("d", 1, 0, &json!({})))];
    table.append(batch(&evs), 1).await.unwrap();
    drop(table);
    let entry = dir
        .path()
        .join("events/_delta_log/00000000000000000001.json");
    // The `add` action's line no longer JSON (damage inside a string, such as its stats,
    // still parses).
    let text = std::fs::read_to_string(&entry).unwrap();
    std::fs::write(&entry, text.replacen("{\"add\":", "#\"add\":", 1)).unwrap();
    let url = Url::from_directory_path(dir.path().join("events")).unwrap();
    // The engine reads the WAL position right after opening; either step may refuse.
    let err = match EventsTable::open(TableConfig::new(url)).await {
        Ok(t) => match t.committed_seq().await {
            Ok(_) => panic!("a damaged log was read"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("_delta_log/00000000000000000001.json is damaged (line 2, column 1: "),
        "{err}"
    );
}

/// What queries derive from a snapshot is worked out once per version: the same version
/// hands out the same files; an append adds its file and parses only that file's
/// statistics; a compaction's removed files leave the cache; the WAL seq follows every
/// commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_a_snapshot_are_derived_once_per_version() {
    let dir = tempfile::tempdir().unwrap();
    let table = open(dir.path()).await;
    let p = json!({"$browser": "Firefox"});
    let day = || -> RecordBatch {
        let evs: Vec<(i64, Event)> = (0..20)
            .map(|i| (1, event(&format!("u{i}"), 1, i, &p)))
            .collect();
        batch(&evs)
    };
    table.append(day(), 1).await.unwrap();
    let (t1, seq1) = table.snapshot_with_seq().await.unwrap();
    assert_eq!(seq1, 1);
    let a = table.team_files(&t1, TeamId(1)).unwrap();
    let b = table.team_files(&t1, TeamId(1)).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the same version is worked out again");
    assert_eq!(a.files.len(), 1);
    assert!(table.team_files(&t1, TeamId(2)).unwrap().files.is_empty());

    table.append(day(), 2).await.unwrap();
    let (t2, seq2) = table.snapshot_with_seq().await.unwrap();
    assert_eq!(seq2, 2, "the seq of the new version, not the cached one");
    let c = table.team_files(&t2, TeamId(1)).unwrap();
    assert_eq!(c.files.len(), 2);
    let first = c
        .files
        .iter()
        .find(|f| f.location == a.files[0].location)
        .unwrap();
    assert!(
        Arc::ptr_eq(
            first.stats.as_ref().unwrap(),
            a.files[0].stats.as_ref().unwrap()
        ),
        "an unchanged file's statistics are parsed again"
    );
    // A reader still on the older snapshot gets that snapshot's files.
    assert_eq!(table.team_files(&t1, TeamId(1)).unwrap().files.len(), 1);
    assert!(Arc::ptr_eq(&c, &table.team_files(&t2, TeamId(1)).unwrap()));
    assert_eq!(c.files, team_files(&t2, TeamId(1)).unwrap().files);

    table
        .compact(2, &FixedLayouts(Layouts::default()), &PersonMaps::default())
        .await
        .unwrap();
    let (t3, seq3) = table.snapshot_with_seq().await.unwrap();
    assert_eq!(seq3, 2);
    let d = table.team_files(&t3, TeamId(1)).unwrap();
    assert_eq!(d.files.len(), 1);
    assert_eq!(d.files, team_files(&t3, TeamId(1)).unwrap().files);
    let cached: Vec<String> = table.reads().stats.keys().cloned().collect();
    assert_eq!(cached.len(), 1, "removed files are dropped: {cached:?}");
}
