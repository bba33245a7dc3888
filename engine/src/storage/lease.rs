//! One writer per table: a lease object beside the table's log.
//!
//! Delta commits rely on put-if-absent, which Garage (and some other S3-compatible stores)
//! silently ignore, so two writers could overwrite each other's commits. A writer therefore
//! holds `<table>/_hedgerow/writer.json`, refreshes it every `ttl / 3`, and a second writer
//! refuses to start while the lease is fresh. The check is re-read after a pause so two
//! writers starting together cannot both win. A holder that finds someone else's lease
//! stops committing.
//!
//! A holder also stops committing while its lease is stale: when no refresh has landed
//! for two thirds of the ttl (the store did not answer), another writer may be about to
//! take the lease over, and a commit of ours then could overwrite its commits. The next
//! refresh that lands makes the lease fresh again.
//!
//! A writer is identified by its data directory's id, not by its process: the directory is
//! `flock`ed, so when a process starts on the same directory, the previous holder is dead and
//! the lease is retaken at once (a crash-restart need not wait for the lease to expire).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use chrono::Utc;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tracing::warn;
use url::Url;

use super::table::StorageError;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct LeaseBody {
    writer: String,
    host: String,
    pid: u32,
    heartbeat_ms: i64,
}

pub(crate) struct WriterLease {
    store: Arc<dyn ObjectStore>,
    path: Path,
    body: LeaseBody,
    lost: Arc<AtomicBool>,
    /// The heartbeat stamp of the last refresh that landed (ms since the epoch).
    renewed_ms: Arc<AtomicI64>,
    ttl: Duration,
    _heartbeat: AbortOnDrop,
}

/// Whether a lease last refreshed at `renewed_ms` is still ours to commit under at `now_ms`:
/// another writer takes it `ttl` after the stamp, and a third of the ttl is left for clock
/// skew and for a commit under way.
fn fresh(now_ms: i64, renewed_ms: i64, ttl: Duration) -> bool {
    now_ms - renewed_ms < (ttl.as_millis() as i64) * 2 / 3
}

impl std::fmt::Debug for WriterLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterLease")
            .field("path", &self.path)
            .field("writer", &self.body.writer)
            .finish()
    }
}

async fn read(store: &dyn ObjectStore, path: &Path) -> Result<Option<LeaseBody>, StorageError> {
    match store.get(path).await {
        Ok(r) => {
            let bytes = r.bytes().await?;
            Ok(serde_json::from_slice(&bytes).ok())
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn write(store: &dyn ObjectStore, path: &Path, body: &LeaseBody) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec(body).expect("lease serializes");
    store.put(path, PutPayload::from(bytes)).await?;
    Ok(())
}

impl WriterLease {
    /// Takes the lease of the table at `table_url`, or says who holds it.
    pub(crate) async fn acquire(
        writer_id: &str,
        table_url: &Url,
        options: &std::collections::HashMap<String, String>,
        ttl: Duration,
    ) -> Result<Self, StorageError> {
        let (store, prefix) = object_store::parse_url_opts(table_url, options.iter())?;
        let store: Arc<dyn ObjectStore> = Arc::from(store);
        let path = prefix.clone().join("_hedgerow").join("writer.json");
        let now = || Utc::now().timestamp_millis();
        let body = LeaseBody {
            writer: writer_id.to_owned(),
            host: std::env::var("HOSTNAME").unwrap_or_default(),
            pid: std::process::id(),
            heartbeat_ms: now(),
        };
        let held_by_other = |b: &LeaseBody| {
            b.writer != body.writer && now() - b.heartbeat_ms < ttl.as_millis() as i64
        };
        if let Some(other) = read(store.as_ref(), &path).await?
            && held_by_other(&other)
        {
            return Err(refusal(table_url, &other, ttl));
        }
        write(store.as_ref(), &path, &body).await?;
        // Two writers that both saw no lease both wrote one; the later write wins. Wait,
        // read back, and let the loser refuse.
        tokio::time::sleep(Duration::from_millis(300)).await;
        match read(store.as_ref(), &path).await? {
            Some(b) if b.writer == body.writer => {}
            Some(other) => return Err(refusal(table_url, &other, ttl)),
            None => write(store.as_ref(), &path, &body).await?,
        }
        let lost = Arc::new(AtomicBool::new(false));
        let renewed_ms = Arc::new(AtomicI64::new(body.heartbeat_ms));
        let heartbeat = {
            let (store, path, mut body, lost, renewed) = (
                store.clone(),
                path.clone(),
                body.clone(),
                lost.clone(),
                renewed_ms.clone(),
            );
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(ttl / 3).await;
                    match read(store.as_ref(), &path).await {
                        Ok(Some(b)) if b.writer != body.writer => {
                            warn!(other = %b.writer, "another writer took the table's lease; this process stops committing");
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            warn!(error = %e, "cannot read the writer lease");
                            continue;
                        }
                    }
                    body.heartbeat_ms = Utc::now().timestamp_millis();
                    match write(store.as_ref(), &path, &body).await {
                        Ok(()) => renewed.store(body.heartbeat_ms, Ordering::SeqCst),
                        Err(e) => warn!(error = %e, "cannot refresh the writer lease"),
                    }
                }
            })
        };
        Ok(Self {
            store,
            path,
            body,
            lost,
            renewed_ms,
            ttl,
            _heartbeat: AbortOnDrop(heartbeat),
        })
    }

    /// False once another writer has taken over, and while the lease is stale ([`fresh`]):
    /// commits must stop.
    pub(crate) fn is_held(&self) -> bool {
        !self.lost.load(Ordering::SeqCst)
            && fresh(
                Utc::now().timestamp_millis(),
                self.renewed_ms.load(Ordering::SeqCst),
                self.ttl,
            )
    }

    /// Gives the lease up (clean shutdown), so the next writer need not wait for it to expire.
    pub(crate) async fn release(&self) {
        if let Ok(Some(b)) = read(self.store.as_ref(), &self.path).await
            && b.writer == self.body.writer
        {
            let _ = self.store.delete(&self.path).await;
        }
    }
}

fn refusal(url: &Url, other: &LeaseBody, ttl: Duration) -> StorageError {
    let age = (Utc::now().timestamp_millis() - other.heartbeat_ms).max(0) / 1000;
    StorageError::Lease(format!(
        "another writer holds the events table at {url} (pid {} on '{}', heartbeat {age}s ago); \
         only one hedgerow may write a table. Stop it, or wait {}s after it stopped uncleanly.",
        other.pid,
        other.host,
        ttl.as_secs()
    ))
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the default 30 s ttl (a refresh every 10 s), a lease is fresh for 20 s after its
    /// last refresh landed: one late refresh is tolerated, an outage of a ttl is not.
    #[test]
    fn a_lease_is_fresh_for_two_thirds_of_its_ttl() {
        let ttl = Duration::from_secs(30);
        assert!(fresh(1_000, 1_000, ttl));
        assert!(fresh(1_000 + 19_999, 1_000, ttl));
        assert!(!fresh(1_000 + 20_000, 1_000, ttl));
        assert!(!fresh(1_000 + 30_000, 1_000, ttl));
    }
}
