//! delta-rs's log reader (1.1, as the engine opens its table) on damaged logs. The input
//! is split at each line `--` into the commit files 0, 1, 2, … of `_delta_log/` (at most
//! 16) in an in-memory store; the table is loaded, every file action is read as the
//! engine reads them (`storage::table::team_files`: path, size, time, partition values,
//! statistics as JSON) and the WAL's application transaction as the engine reads it on
//! open. A load that fails is the expected answer to damage; a panic, an abort, a stack
//! overflow or a hang is a finding. Seeds: the v1 fixture's log (`tests/fixtures/v1`)
//! whole, torn and with one action damaged.
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    afl::fuzz!(|data: &[u8]| rt.block_on(check(data)));
}

/// The commit files `data` holds: its parts between lines `--`.
fn commits(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(4).position(|w| w == b"\n--\n") {
        out.push(&rest[..at + 1]);
        rest = &rest[at + 4..];
    }
    out.push(rest);
    out.truncate(16);
    out
}

async fn check(data: &[u8]) {
    let store = Arc::new(InMemory::new());
    for (i, commit) in commits(data).into_iter().enumerate() {
        store
            .put(
                &Path::from(format!("_delta_log/{i:020}.json")),
                PutPayload::from(commit.to_vec()),
            )
            .await
            .expect("an in-memory put");
    }
    let url = url::Url::parse("memory:///").expect("a url");
    let Ok(builder) = deltalake::DeltaTableBuilder::from_url(url.clone()) else {
        return;
    };
    let Ok(mut table) = builder.with_storage_backend(store, url).build() else {
        return;
    };
    if table.load().await.is_err() {
        return;
    }
    let Ok(snapshot) = table.snapshot() else {
        return;
    };
    let mut files = 0;
    for f in snapshot.log_data().iter() {
        let partition = f.partition_values_map();
        let _ = partition.get("team_id");
        let _ = (f.path(), f.object_store_path(), f.size(), f.modification_time());
        if let Some(stats) = f.stats() {
            let _ = serde_json::from_str::<serde_json::Value>(&stats);
        }
        files += 1;
    }
    let wal = snapshot
        .transaction_version(table.log_store().as_ref(), "hedgerow-wal")
        .await;
    // `DELTA_FUZZ_SHOW=1 target < input` says what an input loads to (AFL leaves it unset).
    if std::env::var_os("DELTA_FUZZ_SHOW").is_some() {
        eprintln!("loaded: {files} files, WAL transaction {wal:?}");
    }
}
