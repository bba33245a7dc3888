//! HogQL's lexer, parser and printer on arbitrary bytes: the oracle is
//! `hedgerow_hogql_syntax::fuzzing::check` (no panic, a round trip that holds).
fn main() {
    afl::fuzz!(|data: &[u8]| hedgerow_hogql_syntax::fuzzing::check(data));
}
