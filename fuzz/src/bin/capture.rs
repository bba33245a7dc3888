//! One capture request, transport hints and body, through decoding, the JSON pre-scan,
//! the payload and normalization: the oracle is `hedgerow_capture::fuzzing::check` (each
//! step refuses or keeps its promise to the next, never a panic).
fn main() {
    afl::fuzz!(|data: &[u8]| hedgerow_capture::fuzzing::check(data));
}
