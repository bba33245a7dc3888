//! Failpoints: named places on the write paths (flush, commit, compaction, the fold sweep,
//! erasure) where a test makes the process die as a power cut or the OOM killer would, to
//! check what the next start finds (`tests/py/test_faults.py`).
//!
//! Off unless `HEDGEROW_FAILPOINTS` is set when the engine opens; then it is a list of
//! `name=action` separated by `;`, where the action is `kill` (SIGKILL at the first hit),
//! `kill@N` (at the N-th) or `log` (an `info` line per hit, to learn which points a workload
//! reaches), and `*` names every point. A name not in [`POINTS`] refuses the start, so a
//! misspelled point never makes a trial that cannot fire.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The variable the server reads.
pub const ENV: &str = "HEDGEROW_FAILPOINTS";

/// Every point, in the order of the paths they sit on.
pub const POINTS: &[&str] = &[
    // Capture: the request's events are durable in the WAL, the answer not yet sent.
    "capture.durable",
    // A flush: the new files are written, not yet committed; committed, not yet synced.
    "flush.written",
    "flush.committed",
    // The WAL segments a flush's commit covers, about to be deleted.
    "wal.truncate",
    // The persons' write-behind transaction, about to commit; committed.
    "persons.commit",
    "persons.committed",
    // A rewrite (compaction or the override fold): its files written, not committed;
    // committed, not yet synced.
    "rewrite.written",
    "rewrite.committed",
    // The fold sweep, about to forget the overrides no file holds any more.
    "fold.forget",
    // The vacuum of replaced files.
    "vacuum",
    // A deletion run: its persons' events left the buffer; the WAL holding them is
    // deleted; the table's rows are deleted, not yet vacuumed; vacuumed, the log history
    // not yet erased; the table is done; warnings and the query log are scrubbed, the tasks
    // not yet finished; the tasks are finished, the person store not yet rewritten.
    "erase.buffer",
    "erase.wal",
    "erase.deleted",
    "erase.vacuumed",
    "erase.table",
    "erase.scrubbed",
    "erase.finished",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// SIGKILL at this hit.
    Kill(u64),
    Log,
}

#[derive(Debug, Default)]
struct Armed {
    actions: HashMap<&'static str, Action>,
    hits: Mutex<HashMap<&'static str, u64>>,
}

static ARMED: OnceLock<Option<Armed>> = OnceLock::new();

/// Reads [`ENV`] once; an engine calls it when it opens. Errors name what is wrong.
pub fn init() -> Result<(), String> {
    let spec = std::env::var(ENV).ok().filter(|s| !s.trim().is_empty());
    let armed = match spec {
        Some(spec) => Some(parse(&spec)?),
        None => None,
    };
    if let Some(a) = &armed {
        tracing::warn!(
            points = a.actions.len(),
            "{ENV} is set: failpoints are armed"
        );
    }
    // A second engine in the same process (tests) keeps the first reading.
    let _ = ARMED.set(armed);
    Ok(())
}

fn parse(spec: &str) -> Result<Armed, String> {
    let mut actions = HashMap::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, action) = item
            .split_once('=')
            .ok_or_else(|| format!("{ENV}: '{item}' is not name=action"))?;
        let action = match action.trim() {
            "kill" => Action::Kill(1),
            "log" => Action::Log,
            a => match a.strip_prefix("kill@").map(str::parse::<u64>) {
                Some(Ok(n)) if n > 0 => Action::Kill(n),
                _ => {
                    return Err(format!(
                        "{ENV}: '{a}' is not an action (kill, kill@N with N ≥ 1, log)"
                    ));
                }
            },
        };
        let name = name.trim();
        if name == "*" {
            for p in POINTS {
                actions.insert(*p, action);
            }
        } else {
            let p = POINTS.iter().find(|p| **p == name).ok_or_else(|| {
                format!("{ENV}: no failpoint is named '{name}' (known: {POINTS:?})")
            })?;
            actions.insert(*p, action);
        }
    }
    Ok(Armed {
        actions,
        hits: Mutex::default(),
    })
}

/// A failpoint: does nothing unless armed.
pub(crate) fn point(name: &'static str) {
    debug_assert!(POINTS.contains(&name), "unlisted failpoint {name}");
    let Some(Some(armed)) = ARMED.get() else {
        return;
    };
    let Some(action) = armed.actions.get(name).copied() else {
        return;
    };
    let hit = {
        let mut hits = armed.hits.lock().unwrap_or_else(|e| e.into_inner());
        let n = hits.entry(name).or_default();
        *n += 1;
        *n
    };
    match action {
        Action::Log => tracing::info!(failpoint = name, hit, "failpoint reached"),
        Action::Kill(at) if at == hit => {
            // Straight to stderr: the kill leaves no time for a log writer to flush.
            eprintln!("failpoint {name}: SIGKILL at hit {hit}");
            // SAFETY: kill(2) on our own pid; no memory is involved.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            // The signal is delivered before kill returns for the calling thread; never
            // go on past a failpoint that fired.
            loop {
                std::thread::park();
            }
        }
        Action::Kill(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_or_say_why_not() {
        let a = parse("flush.written=kill@3; erase.wal=kill ;vacuum=log").unwrap();
        assert_eq!(a.actions["flush.written"], Action::Kill(3));
        assert_eq!(a.actions["erase.wal"], Action::Kill(1));
        assert_eq!(a.actions["vacuum"], Action::Log);
        assert_eq!(parse("*=log").unwrap().actions.len(), POINTS.len());
        let e = parse("flush.writen=kill").err().unwrap();
        assert!(e.contains("no failpoint is named 'flush.writen'"), "{e}");
        for bad in ["flush.written", "flush.written=kill@0", "vacuum=explode"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn points_are_unique() {
        let set: std::collections::HashSet<_> = POINTS.iter().collect();
        assert_eq!(set.len(), POINTS.len());
    }
}
