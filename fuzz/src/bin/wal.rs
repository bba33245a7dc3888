//! WAL recovery of segments holding arbitrary bytes: the oracle is
//! `hedgerow_wal::fuzzing::check` (refused or replayed as a log, never a panic).
fn main() {
    afl::fuzz!(|data: &[u8]| hedgerow_wal::fuzzing::check(data));
}
