//! The oracle a fuzzer drives (`fuzz/`, `scripts/fuzz`) and the unit tests replay: recovery
//! of a log directory holding arbitrary bytes. Whatever the segments hold, [`Wal::open`]
//! either refuses with an error (damage before the last segment's tail is lost
//! acknowledged data) or replays records with consecutive seqs from 1, cuts what it could
//! not read, and then behaves as a log: reopening replays the same records, and a record
//! appended after them replays with the next seq. A panic, a hang or a broken step is a bug.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use crate::{Wal, WalConfig, WalRecord, segment_path};

/// Splits the input into segments: the first starts at seq 1, and each later one at the
/// seq in the 8 bytes (little endian) after a separator.
pub const SEGMENT_SEPARATOR: &[u8] = b"\n--segment--\n";

/// Checks recovery of a log whose segments hold `data`; panics on a broken promise.
pub fn check(data: &[u8]) {
    let dir = Scratch::new();
    let mut first = 1u64;
    let mut rest = data;
    loop {
        let (segment, next) = match find(rest, SEGMENT_SEPARATOR) {
            Some(i) => (&rest[..i], Some(&rest[i + SEGMENT_SEPARATOR.len()..])),
            None => (rest, None),
        };
        std::fs::write(segment_path(&dir.0, first), segment).expect("writing a segment");
        let Some(next) = next else { break };
        let Some((seq, tail)) = next.split_first_chunk::<8>() else {
            break;
        };
        // Bounded so a name stays a valid seq and later segments sort after earlier ones.
        first = first
            .max(u64::from_le_bytes(*seq) % 1_000_000)
            .saturating_add(1);
        rest = tail;
    }
    let cfg = WalConfig {
        dir: dir.0.clone(),
        segment_bytes: 1 << 20,
        max_group_bytes: 1 << 20,
    };
    let Some(replayed) = open(&cfg) else {
        return;
    };
    for (i, r) in replayed.iter().enumerate() {
        let want = replayed[0].seq + i as u64;
        assert_eq!(r.seq, want, "replayed seqs run on without a gap");
    }
    assert_eq!(
        open(&cfg).as_ref(),
        Some(&replayed),
        "recovering twice replays the same records"
    );
    let next = replayed.last().map_or(1, |r| r.seq + 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let (tx, _rx) = mpsc::channel(4);
    let (wal, _) = Wal::<()>::open(cfg.clone(), 0, tx).expect("reopens");
    // Records before the replayed ones were cut as covered; appends go on after the rest.
    let seq = rt
        .block_on(wal.append(b"after".to_vec(), ()))
        .expect("appends after recovery");
    wal.close();
    assert!(
        seq >= next,
        "appended at seq {seq}, after the replayed {next}"
    );
    let again = open(&cfg).expect("reopens after an append");
    assert_eq!(
        again.last().map(|r| (r.seq, &r.payload[..])),
        Some((seq, &b"after"[..]))
    );
}

/// Opens and closes the log, with its replayed records; `None` if recovery refused.
fn open(cfg: &WalConfig) -> Option<Vec<WalRecord>> {
    let (tx, _rx) = mpsc::channel(4);
    let (wal, replayed) = Wal::<()>::open(cfg.clone(), 0, tx).ok()?;
    wal.close();
    Some(replayed)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A fresh directory under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hedgerow-wal-fuzz-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(Path::new(&self.0));
    }
}

#[cfg(test)]
mod tests {
    /// The seed corpus of `fuzz/corpus/wal` (segments written by the log itself, torn,
    /// flipped and split), each checked as the fuzzer checks it.
    #[test]
    fn the_seed_corpus_recovers_as_a_log() {
        // The directory as cargo gives it when the test runs: the compile-time one is the
        // checkout that built it, which a target directory shared between clones reuses.
        let dir = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../../fuzz/corpus/wal");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/wal") {
            super::check(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 8, "{n} seeds in {}", dir.display());
    }
}
