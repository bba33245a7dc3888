//! The oracle a fuzzer drives (`fuzz/`, `scripts/fuzz`) and the unit tests replay: any bytes
//! either fail to parse with a [`SyntaxError`](crate::lexer::SyntaxError), or parse to a
//! tree whose canonical text parses back to a tree that prints the same. A panic, a stack
//! overflow or a broken round trip is a bug; the input that caused it becomes a test here.

use crate::parser::{parse_expr, parse_query};
use crate::print;

/// Checks `data` as a query and as an expression; panics on a broken round trip.
pub fn check(data: &[u8]) {
    // The parser takes text; invalid UTF-8 never reaches it (the HTTP layer refuses it).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = parse_query(text) {
        let printed = print::query(&q);
        let again = parse_query(&printed)
            .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which fails: {e}"));
        assert_eq!(
            print::query(&again),
            printed,
            "{text:?}: the printed query does not print back the same"
        );
    }
    if let Ok(e) = parse_expr(text) {
        let printed = print::expr(&e);
        let again = parse_expr(&printed)
            .unwrap_or_else(|err| panic!("{text:?} printed as {printed:?}, which fails: {err}"));
        assert_eq!(
            print::expr(&again),
            printed,
            "{text:?}: the printed expression does not print back the same"
        );
    }
}

#[cfg(test)]
mod tests {
    /// The seed corpus of `fuzz/corpus/hogql` (every query of the `.slt` files, and deep
    /// and wide inputs of issue 17, one per file), each checked as the fuzzer checks it.
    #[test]
    fn the_seed_corpus_round_trips() {
        // The directory as cargo gives it when the test runs: the compile-time one is the
        // checkout that built it, which a target directory shared between clones reuses.
        let dir = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../../fuzz/corpus/hogql");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/hogql") {
            let path = entry.unwrap().path();
            super::check(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n > 100, "{n} seeds in {}", dir.display());
    }
}
