//! Acknowledged events survive SIGKILL (WAL replay, exactly once), and a disk that
//! refuses writes gets 503 with nothing acknowledged lost.

use serde_json::json;

use crate::support::*;

fn batch(start: usize, n: usize, pad: usize) -> serde_json::Value {
    let events: Vec<_> = (start..start + n)
        .map(|i| json!({"event": "e", "distinct_id": format!("d{}", i % 7), "uuid": format!("00000000-0000-4000-8000-{i:012}"), "properties": {"i": i, "pad": "p".repeat(pad)}}))
        .collect();
    json!({"api_key": TOKEN, "batch": events})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_before_flush_then_replay_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let c = client();
    // Nothing is flushed by age: every event is only in the WAL when the process dies.
    let mut srv = Server::start_in(dir.path(), &["--flush-interval", "1h"]);
    for k in 0..5 {
        let r = c
            .post(srv.url("/batch/"))
            .json(&batch(k * 100, 100, 10))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    srv.kill9();
    assert!(
        read_table(dir.path()).await.is_empty(),
        "nothing was committed before the kill"
    );
    // Restart, add more, kill again mid-way, then stop cleanly.
    let mut srv = Server::start_in(dir.path(), &["--flush-interval", "1h"]);
    let r = c
        .post(srv.url("/batch/"))
        .json(&batch(500, 100, 10))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    srv.kill9();
    let mut srv = Server::start_in(dir.path(), &[]);
    srv.stop();
    let stored = read_table(dir.path()).await;
    assert_eq!(stored.len(), 600);
    let mut ids: Vec<_> = stored.iter().map(|s| s.uuid.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 600, "no event stored twice");
    // The WAL was trimmed after the commit that covers it.
    let mut srv = Server::start_in(dir.path(), &[]);
    srv.stop();
    assert_eq!(
        read_table(dir.path()).await.len(),
        600,
        "a replay after commit adds nothing"
    );
}

/// A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes writes fail with EFBIG once
/// the WAL segment reaches it: the same path as a full disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_failure_is_503_and_acknowledged_events_survive() {
    let dir = tempfile::tempdir().unwrap();
    let c = client();
    let mut cmd = std::process::Command::new("bash");
    // 2048 blocks of 1 KiB: the WAL segment can't grow past 2 MiB.
    cmd.args([
        "-c",
        "trap '' XFSZ; ulimit -f 2048; exec \"$0\" \"$@\"",
        bin(),
    ]);
    let mut srv = Server::start_with(
        cmd,
        dir.path(),
        &["--flush-interval", "1h", "--wal-segment-size", "1GiB"],
    );
    let mut acked = 0usize;
    let mut refused = None;
    for k in 0..40 {
        let r = c
            .post(srv.url("/batch/"))
            .json(&batch(k * 100, 100, 1000))
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => acked += 100,
            503 => {
                refused = Some(r.json::<serde_json::Value>().await.unwrap());
                break;
            }
            s => panic!("unexpected status {s}"),
        }
    }
    let body = refused.expect("the size limit was reached and refused with 503");
    assert_eq!(body["type"], "server_error");
    assert!(acked > 0);
    // Still alive; a later request may succeed (e.g. in a fresh segment) or be refused,
    // but never be acknowledged and then lost.
    let r = c
        .post(srv.url("/batch/"))
        .json(&batch(90_000, 100, 1000))
        .send()
        .await
        .unwrap();
    match r.status().as_u16() {
        200 => acked += 100,
        503 => {}
        s => panic!("unexpected status {s}"),
    }
    assert_eq!(
        c.get(srv.url("/_health")).send().await.unwrap().status(),
        200
    );
    srv.kill9();
    let mut srv = Server::start_in(dir.path(), &[]);
    srv.stop();
    let stored = read_table(dir.path()).await;
    assert_eq!(
        stored.len(),
        acked,
        "every acknowledged event, nothing refused"
    );
}
