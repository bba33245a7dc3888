//! The table on disk: sorted, partitioned zstd Parquet with statistics; compaction that
//! never shows an event twice or zero times; the WAL trimmed behind commits.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

fn parquet_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    // A partition directory may vanish while it is walked (vacuum); it then holds nothing.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(parquet_files(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out
}

/// `q`'s results in project 1, computed now (not from the cache).
async fn results(srv: &Server, q: &str) -> serde_json::Value {
    results_with(srv, q, json!({})).await
}

/// A query's rows, run with these query modifiers.
async fn results_with(srv: &Server, q: &str, modifiers: serde_json::Value) -> serde_json::Value {
    let r: serde_json::Value = client()
        .post(srv.url("/api/projects/1/query/"))
        .bearer_auth(KEY)
        .json(&json!({"query": {"kind": "HogQLQuery", "query": q, "modifiers": modifiers}, "refresh": "force_blocking"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["results"].clone()
}

/// The leaf column names of the Parquet file at `path`, or `None` when it is gone or not
/// readable (yet).
fn column_names(path: &std::path::Path) -> Option<Vec<String>> {
    use parquet::file::reader::FileReader;
    let r = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(path).ok()?,
    )
    .ok()?;
    Some(
        r.metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect(),
    )
}

/// Waits (up to a minute) until every live file of the events table at `table` has all of
/// `columns`.
async fn wait_for_live_files_with(table: &std::path::Path, columns: &[&str], failure: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The snapshot first, then the directory: a file is written before the commit that
        // makes it live, so every live file is on disk by the time it is listed. A live file
        // that is gone anyway (compacted and vacuumed in between) only means "look again".
        let live = deltalake::open_table(
            url::Url::from_directory_path(table.canonicalize().unwrap()).unwrap(),
        )
        .await
        .unwrap();
        let live: Vec<String> = live.get_file_uris().unwrap().collect();
        let files = parquet_files(table);
        let done = live.iter().all(|uri| {
            files
                .iter()
                .find(|f| uri.ends_with(f.file_name().unwrap().to_str().unwrap()))
                .and_then(|f| column_names(f))
                .is_some_and(|names| columns.iter().all(|c| names.iter().any(|n| n == c)))
        });
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "{failure}: {live:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_sorted_partitioned_and_compacted_without_gaps_or_doubles() {
    let srv = Server::start(&[
        "--flush-interval",
        "50ms",
        "--compaction-interval",
        "1s",
        "--compaction-min-files",
        "4",
    ]);
    let c = client();
    // Two projects' worth of days: events across 2 dates, sent in many small requests so
    // each flush makes small files.
    let mut sent = 0usize;
    for k in 0..30 {
        let events: Vec<_> = (0..20)
            .map(|i| {
                let n = k * 20 + i;
                let name = ["b", "a", "c"][n % 3];
                json!({"event": name, "distinct_id": format!("d{n}"), "uuid": format!("00000000-0000-4000-8000-{n:012}"),
                       "timestamp": format!("2024-05-0{}T{:02}:00:00Z", 1 + n % 2, 23 - n % 24), "properties": {"$browser": "Firefox"}})
            })
            .collect();
        let r = c
            .post(srv.url("/batch/"))
            .json(&json!({"api_key": TOKEN, "batch": events}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        sent += 20;
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    // Read continuously while compaction runs: the count only grows to `sent`, no doubles.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut compacted = false;
    let mut reads = 0;
    while Instant::now() < deadline {
        // Rows committed before the read began must all be visible to it.
        let m = c
            .get(srv.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let committed_before = metric(&m, "hedgerow_flushed_rows_total") as usize;
        let compactions_before = metric(&m, "hedgerow_compactions_total");
        let stored = read_table(&srv.data_dir).await;
        reads += 1;
        let mut ids: Vec<_> = stored.iter().map(|s| s.uuid.as_str()).collect();
        ids.sort();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "a reader saw an event twice");
        assert!(
            n >= committed_before,
            "a reader saw {n} events, {committed_before} were committed"
        );
        if compactions_before > 0 && n == sent {
            compacted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        compacted,
        "compaction ran and every event is readable ({reads} reads)"
    );

    // Partitions by team and date, zstd, statistics and page index, sorted within a file.
    let table = deltalake::open_table(
        url::Url::from_directory_path(srv.data_dir.canonicalize().unwrap().join("events")).unwrap(),
    )
    .await
    .unwrap();
    let live: Vec<String> = table.get_file_uris().unwrap().collect();
    assert!(
        live.iter()
            .all(|f| f.contains("team_id=1/event_date=2024-05-0")),
        "{live:?}"
    );
    for uri in &live {
        let path = url::Url::parse(uri)
            .map(|u| u.to_file_path().unwrap())
            .unwrap_or_else(|_| uri.into());
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap();
        use parquet::file::reader::FileReader;
        let meta = reader.metadata();
        let rg = meta.row_group(0);
        // zstd, or LZ4 for the hot and the sparse columns (tests/it/pruning.rs checks
        // which); raw only for `timestamp`, whose delta-packed pages LZ4 left as they were.
        for col in rg.columns() {
            let raw = col.column_path().string() == "timestamp";
            assert!(
                match col.compression() {
                    parquet::basic::Compression::ZSTD(_) | parquet::basic::Compression::LZ4_RAW =>
                        !raw,
                    parquet::basic::Compression::UNCOMPRESSED => raw,
                    _ => false,
                },
                "{}",
                col.column_path()
            );
        }
        let ev = rg
            .columns()
            .iter()
            .find(|c| c.column_path().string() == "event")
            .unwrap();
        assert!(ev.statistics().is_some(), "statistics written");
        for col in rg.columns() {
            assert!(
                col.column_index_offset().is_some() && col.offset_index_offset().is_some(),
                "page index of {}",
                col.column_path()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_file_is_sorted_and_the_wal_is_trimmed() {
    let mut srv = Server::start(&["--flush-interval", "1h", "--wal-segment-size", "4KiB"]);
    let c = client();
    let events: Vec<_> = (0..300)
        .map(|n| (n, ["b", "a", "c"][n % 3]))
        .map(|(n, name)| json!({"event": name, "distinct_id": format!("d{}", n % 7), "timestamp": format!("2024-05-01T{:02}:{:02}:00Z", 23 - n % 24, n % 60)}))
        .collect();
    for chunk in events.chunks(30) {
        let r = c
            .post(srv.url("/batch/"))
            .json(&json!({"api_key": TOKEN, "batch": chunk}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let wal = srv.data_dir.join("wal");
    let segments = std::fs::read_dir(&wal).unwrap().count();
    assert!(segments > 3, "small segments roll: {segments}");
    srv.stop();
    // After the commit, the covered segments are gone.
    let left: u64 = std::fs::read_dir(&wal)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(left, 0, "no covered WAL bytes left");
    let files = parquet_files(&srv.data_dir.join("events"));
    assert_eq!(files.len(), 1);
    let bytes = bytes::Bytes::from(std::fs::read(&files[0]).unwrap());
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
    // Ids are 16 bytes (no UUID logical type: pyarrow through delta-rs refuses one under
    // Delta's `binary`).
    let descr = builder.metadata().file_metadata().schema_descr_ptr();
    for id in ["uuid", "person_id"] {
        let col = descr
            .columns()
            .iter()
            .find(|c| c.name() == id)
            .unwrap_or_else(|| panic!("no column {id}"));
        assert_eq!(
            col.physical_type(),
            parquet::basic::Type::FIXED_LEN_BYTE_ARRAY,
            "{id}"
        );
        assert_eq!(col.type_length(), 16, "{id}");
        assert_eq!(col.logical_type_ref(), None, "{id}");
    }
    let reader = builder.build().unwrap();
    let mut rows: Vec<(String, String, i64)> = Vec::new();
    for b in reader {
        let b = b.unwrap();
        use arrow::array::AsArray;
        let text = |name: &str| -> Vec<String> { text_column(b.column_by_name(name).unwrap()) };
        let ts = b
            .column_by_name("timestamp")
            .unwrap()
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
            .clone();
        rows.extend(
            text("event")
                .into_iter()
                .zip(text("person_id"))
                .zip(ts.values().iter().copied())
                .map(|((e, p), t)| (e, p, t)),
        );
    }
    assert_eq!(rows.len(), 300);
    let mut sorted = rows.clone();
    sorted.sort();
    assert_eq!(
        rows, sorted,
        "rows are sorted by (event, person_id, timestamp) within the file"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A data directory written before storage v2 (`tests/fixtures/v1`, made by f8e02c5 with
/// every property in the JSON and the old `mat_*` columns) opens under the current layout
/// and answers exactly as it did; compaction then rewrites it into the current layout
/// (its frequent properties promoted from its own rows), and it still answers the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_data_directory_opens_answers_alike_and_moves_to_property_columns() {
    let fixture = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/fixtures/v1");
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture.join("data"), tmp.path());
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("expected.json")).unwrap())
            .unwrap();
    let srv = Server::start_in(
        tmp.path(),
        &["--compaction-interval", "1s", "--flush-interval", "50ms"],
    );
    // Not from the cache: compaction does not change the data version.
    let answers_match = |when: &'static str| {
        let expected = expected.clone();
        let srv = &srv;
        async move {
            for (name, case) in expected.as_object().unwrap() {
                let got = results(srv, case["query"].as_str().unwrap()).await;
                assert_eq!(got, case["results"], "{name} {when}");
            }
        }
    };
    answers_match("before compaction").await;
    wait_for_live_files_with(
        &tmp.path().join("events"),
        &["props_layout", "p_$browser"],
        "compaction did not rewrite the v1 files",
    )
    .await;
    answers_match("after compaction").await;

    // The table holds its ids as text (from before 16-byte ids): new events are written to
    // it as text, and read, joined and compared as UUIDs like the old ones.
    let sent_uuid = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let resp = client()
        .post(srv.url("/batch/"))
        .json(&json!({"api_key": TOKEN, "batch": [
            {"event": "after upgrade", "distinct_id": "v1-new", "uuid": sent_uuid.to_uppercase(),
             "timestamp": "2024-01-02T10:00:00Z",
             "properties": {"$set": {"plan": "new"}, "$session_id": "s-new"}}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stored = read_table(&srv.data_dir).await;
        if let Some(s) = stored.iter().find(|s| s.distinct_id == "v1-new") {
            assert_eq!(
                s.uuid, sent_uuid,
                "the text table got the event's uuid as text"
            );
            // The old table's `$session_id` column declared its key before the new row
            // left the residual for it.
            assert!(
                s.properties.get("$session_id").is_none(),
                "{:?}",
                s.properties
            );
            break;
        }
        assert!(Instant::now() < deadline, "the new event was not flushed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let q = format!(
        "SELECT e.uuid = '{}', toString(e.uuid), p.properties.plan FROM events e JOIN persons p ON e.person_id = p.id WHERE e.distinct_id = 'v1-new'",
        sent_uuid.to_uppercase()
    );
    assert_eq!(results(&srv, &q).await, json!([[true, sent_uuid, "new"]]));
    let q = "SELECT properties.$session_id, JSONExtractString(properties, '$session_id'), $session_id FROM events WHERE distinct_id = 'v1-new'";
    assert_eq!(results(&srv, q).await, json!([["s-new", "s-new", "s-new"]]));
    let table = deltalake::open_table(
        url::Url::from_directory_path(srv.data_dir.canonicalize().unwrap().join("events")).unwrap(),
    )
    .await
    .unwrap();
    let schema = table.snapshot().unwrap().snapshot().arrow_schema();
    for key in ["$session_id", "$window_id"] {
        assert_eq!(
            schema
                .field_with_name(key)
                .unwrap()
                .metadata()
                .get("hedgerow.property"),
            Some(&key.to_string()),
            "{key}"
        );
    }
}

/// Person properties stamped on events are stored as event properties are: the frequent
/// ones in `pp_` columns, the rest in the residual `person_properties`. Rows written before
/// any column existed (in files), rows written after (in the buffer), and the old rows once
/// compaction has moved them to the new layout all answer alike, through
/// `person.properties.x`, the whole `person_properties`, and JSON functions on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn person_properties_read_alike_from_columns_json_and_compacted_files() {
    let tmp = tempfile::tempdir().unwrap();
    let c = client();
    let capture = |srv: &Server, events: serde_json::Value| {
        let req = c
            .post(srv.url("/batch/"))
            .json(&json!({"api_key": TOKEN, "batch": events}));
        async move { assert_eq!(req.send().await.unwrap().status(), 200) }
    };
    let identify = |i: usize, plan: &str| {
        json!({"event": "$identify", "distinct_id": format!("u{i}"),
               "timestamp": format!("2024-01-0{}T10:00:00Z", 1 + i % 3),
               "properties": {"$set": {"plan": plan, "seats": i, "vip": i.is_multiple_of(2), "code": if i == 1 { json!(7) } else { json!(format!("c{i}")) }}}})
    };
    let event = |i: usize| {
        json!({"event": "e", "distinct_id": format!("u{i}"),
               "timestamp": format!("2024-01-0{}T11:00:00Z", 1 + i % 3)})
    };
    let promote_all = [
        "--property-columns-every",
        "1",
        "--property-columns-min-share",
        "0",
    ];
    // No columns at all: the person properties of these rows stay in the JSON.
    let mut first = Server::start_in(tmp.path(), &["--property-columns-max", "0"]);
    capture(
        &first,
        json!([identify(0, "pro"), event(0), identify(1, "free"), event(1)]),
    )
    .await;
    first.stop();
    let queries = [
        (
            "SELECT person.properties.plan AS p, count() FROM events GROUP BY p ORDER BY p",
            json!([["free", 2], ["pro", 5]]),
        ),
        (
            "SELECT sum(person.properties.seats) = 6, countIf(person.properties.vip) FROM events",
            json!([[true, 5]]),
        ),
        (
            "SELECT count() FROM events WHERE JSONExtractString(person_properties, 'plan') = 'pro'",
            json!([[5]]),
        ),
        (
            "SELECT distinct_id, person.properties.code, person.properties FROM events WHERE event = '$identify' ORDER BY distinct_id",
            json!([
                [
                    "u0",
                    "c0",
                    r#"{"code":"c0","plan":"pro","seats":0,"vip":true}"#
                ],
                [
                    "u1",
                    "7",
                    r#"{"code":7,"plan":"free","seats":1,"vip":false}"#
                ],
                [
                    "u2",
                    "c2",
                    r#"{"code":"c2","plan":"pro","seats":2,"vip":true}"#
                ]
            ]),
        ),
    ];
    // The persons table (its snapshot's typed columns once promoted), alone and joined.
    let joined = json!({"personsOnEventsMode": "person_id_override_properties_joined"});
    let persons_queries = [
        (
            "SELECT properties.plan AS p, count() FROM persons GROUP BY p ORDER BY p",
            json!({}),
            json!([["free", 1], ["pro", 2]]),
        ),
        (
            "SELECT sum(properties.seats) = 3, countIf(properties.vip), countIf(properties.code = '7') FROM persons",
            json!({}),
            json!([[true, 2, 1]]),
        ),
        (
            "SELECT p.properties.plan AS plan, count() FROM events e JOIN persons p ON e.person_id = p.id GROUP BY plan ORDER BY plan",
            json!({}),
            json!([["free", 2], ["pro", 5]]),
        ),
        (
            "SELECT person.properties.plan AS p, sum(person.properties.seats), count() FROM events GROUP BY p ORDER BY p",
            joined.clone(),
            json!([["free", 2.0, 2], ["pro", 4.0, 5]]),
        ),
    ];
    async fn check(srv: &Server, queries: &[(&str, serde_json::Value)], when: &str) {
        for (q, want) in queries {
            assert_eq!(&results(srv, q).await, want, "{when}: {q}");
        }
    }
    async fn check_persons(
        srv: &Server,
        queries: &[(&str, serde_json::Value, serde_json::Value)],
        when: &str,
    ) {
        for (q, modifiers, want) in queries {
            assert_eq!(
                &results_with(srv, q, modifiers.clone()).await,
                want,
                "{when}: {q}"
            );
        }
    }
    // Every property promoted at once; nothing flushed while these are read.
    let mut second = Server::start_in(
        tmp.path(),
        &[&["--flush-interval", "1h"][..], &promote_all[..]].concat(),
    );
    capture(&second, json!([identify(2, "pro"), event(2), event(0)])).await;
    check(
        &second,
        &queries,
        "files without columns and the buffer with them",
    )
    .await;
    check_persons(&second, &persons_queries, "persons with columns").await;
    let star = results(&second, "SELECT * FROM persons LIMIT 1").await;
    assert_eq!(
        star[0].as_array().map(Vec::len),
        Some(5),
        "the snapshot's typed columns stay out of *: {star}"
    );
    second.stop();
    let third = Server::start_in(
        tmp.path(),
        &[
            &["--compaction-interval", "1s", "--compaction-min-files", "2"][..],
            &promote_all[..],
        ]
        .concat(),
    );
    wait_for_live_files_with(
        &tmp.path().join("events"),
        &[
            "person_props_layout",
            "pp_plan",
            "pp_seats__num",
            "pp_vip__bool",
        ],
        "compaction did not move the old rows' person properties to columns",
    )
    .await;
    check(&third, &queries, "after compaction").await;
    check_persons(&third, &persons_queries, "persons after a restart").await;
}
