//! How soon the allocator gives freed memory back to the system.
//!
//! The binary allocates with mimalloc (`src/main.rs`). mimalloc 3 keeps freed pages for a
//! second (`purge_delay` = 1000 ms) before it returns them, in case they are wanted again.
//! While ingesting, memory turns over faster than that: a flush frees a few hundred MB of
//! sorted rows and Parquet pages every few seconds, and a compaction pass frees its input
//! files and batches. Measured on the bench's 10M events, one hedgerow-only ingest after
//! the other (docs/architecture.md, "Memory while ingesting"): with mimalloc's default the
//! resting RSS rose from ~0.8 to ~1.3 GiB after the first compaction tick and the ingest
//! peaked at 1 720 MiB (28 911 events/s); with a 10 ms delay (mimalloc 2's default) at
//! 1 426 MiB (26 546 events/s); returning pages at once, at 1 197 MiB (26 693 events/s).
//! The peak bound is worth the ~8 % of ingest speed on this machine.
//!
//! `MIMALLOC_PURGE_DELAY` in the environment still wins: mimalloc reads it itself.

use std::ffi::{c_int, c_long};

/// The delay this binary runs with, in milliseconds.
pub const PURGE_DELAY_MS: c_long = 0;

/// `mi_option_purge_delay` in `mimalloc.h` (the same index in mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_option_get(option: c_int) -> c_long;
}

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`] unless the environment sets it.
pub fn purge_promptly() {
    // Keeps mimalloc linked into every binary that calls this, the test binary included.
    let _ = &mimalloc::MiMalloc;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's option setter takes any option index and value; this one is
        // read whenever freed pages are considered for purging.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

/// The purge delay mimalloc runs with now.
pub fn purge_delay_ms() -> c_long {
    // SAFETY: reading an option has no preconditions.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_mimallocs_and_is_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            panic!("unset MIMALLOC_PURGE_DELAY to run this test: it checks mimalloc's default");
        }
        // mimalloc 3's own default for the option at this index: no other option defaults
        // to 1000, so the index is the purge delay's.
        assert_eq!(purge_delay_ms(), 1000);
        purge_promptly();
        assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
    }
}
