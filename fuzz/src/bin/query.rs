//! The query endpoint's request on arbitrary bytes: the body read as the endpoint reads
//! it, its refresh mode and its HogQLQuery node; the oracle is
//! `hedgerow_query_request::fuzzing::check`.
fn main() {
    afl::fuzz!(|data: &[u8]| hedgerow_query_request::fuzzing::check(data));
}
