//! A cheap pre-scan of a capture body's JSON text: counts its values and measures its
//! nesting without building anything, so a body whose parsed form would be huge is refused
//! before `serde_json` allocates a single node of it.
//!
//! A `serde_json::Value` costs far more than its text: `{"a":0}` is 7 bytes of JSON and
//! about 700 bytes parsed (a B-tree leaf per object, a heap string per key). 27 KB of gzip
//! inflating to 18 MB of `[{"a":0},…]` cost 1.8 GB before this scan existed. The scanner
//! reads the bytes once, skips strings with `memchr`, allocates nothing, and stops as soon
//! as the count is over the limit. It does not validate: malformed JSON is left to the
//! parser, which says where it is wrong.

/// What a body holds, by count. `values` is what the per-request limit is about; the rest
/// feed the memory estimate ([`crate::limits::decode_cost`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonShape {
    /// Length of the JSON text.
    pub bytes: usize,
    /// Every value: objects, arrays, strings that are not object keys, numbers, `true`,
    /// `false`, `null`.
    pub values: usize,
    pub objects: usize,
    pub arrays: usize,
    /// Object members (key–value pairs).
    pub members: usize,
    /// Strings, keys included.
    pub strings: usize,
    /// Deepest nesting of objects and arrays (a bare scalar is 0, `[]` is 1).
    pub depth: usize,
}

/// Why a body was refused by the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanError {
    /// More than `limit` values; `seen` is how many were counted when the scan stopped
    /// (the scan stops early, so the body may hold more).
    TooManyValues { limit: usize, seen: usize },
    /// Nested deeper than `limit` objects and arrays.
    TooDeep { limit: usize },
}

/// Whether `b` ends a number or a literal (`true`, `false`, `null`).
fn ends_scalar(b: u8) -> bool {
    matches!(
        b,
        b',' | b']' | b'}' | b':' | b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'{' | b'['
    )
}

/// The index just past the string whose opening quote is at `start - 1` (or the end of the
/// text for an unterminated string). Escapes are skipped two bytes at a time: `\"` and `\\`
/// do not end or start anything, and `\uXXXX` holds no quote or backslash.
fn skip_string(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
            None => return bytes.len(),
            Some(at) if bytes[i + at] == b'"' => return i + at + 1,
            Some(at) => i += at + 2,
        }
    }
    bytes.len()
}

/// Counts the values of `bytes` (JSON text), refusing more than `max_values` values or
/// nesting deeper than `max_depth`.
pub fn scan(bytes: &[u8], max_values: usize, max_depth: usize) -> Result<JsonShape, ScanError> {
    let mut shape = JsonShape {
        bytes: bytes.len(),
        ..JsonShape::default()
    };
    let mut scalars = 0usize;
    let mut depth = 0usize;
    // Candidates counts every string as a value; a key's colon takes it back. So the count
    // can run one ahead (a key whose colon is not read yet): refuse early only past that.
    let over = |shape: &JsonShape, scalars: usize| {
        let candidates = shape.objects + shape.arrays + shape.strings + scalars;
        candidates.saturating_sub(shape.members) > max_values.saturating_add(1)
    };
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                shape.strings += 1;
                i = skip_string(bytes, i + 1);
                if over(&shape, scalars) {
                    break;
                }
                continue;
            }
            b'{' | b'[' => {
                if bytes[i] == b'{' {
                    shape.objects += 1;
                } else {
                    shape.arrays += 1;
                }
                depth += 1;
                if depth > max_depth {
                    return Err(ScanError::TooDeep { limit: max_depth });
                }
                shape.depth = shape.depth.max(depth);
                if over(&shape, scalars) {
                    break;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' => shape.members += 1,
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                scalars += 1;
                i += 1;
                while i < bytes.len() && !ends_scalar(bytes[i]) {
                    i += 1;
                }
                if over(&shape, scalars) {
                    break;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let candidates = shape.objects + shape.arrays + shape.strings + scalars;
    shape.values = candidates.saturating_sub(shape.members);
    if shape.values > max_values {
        return Err(ScanError::TooManyValues {
            limit: max_values,
            seen: shape.values,
        });
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const ANY: usize = usize::MAX;

    fn shape(text: &str) -> JsonShape {
        scan(text.as_bytes(), ANY, 1000).unwrap()
    }

    /// The number of values of a parsed document, counted the slow way.
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(m) => m.values().map(count).sum(),
            _ => 0,
        }
    }

    #[test]
    fn counts_match_the_parsed_document() {
        for text in [
            r#"{"api_key": "phc_x", "batch": [{"event": "e", "properties": {"a": 1, "b": [1, 2.5e3, -4], "c": null, "d": true, "e": false}}]}"#,
            r#"[{"a":0},{"a":0},{"a":0}]"#,
            r#"  [ ]  "#,
            r#"{}"#,
            r#""just a string""#,
            r#"-12.5E+7"#,
            r#"[[[[[]]]],{"k":{"k":{"k":[null]}}}]"#,
            r#"{"":""}"#,
        ] {
            let parsed: Value = serde_json::from_str(text).unwrap();
            assert_eq!(shape(text).values, count(&parsed), "{text}");
        }
    }

    #[test]
    fn shape_fields() {
        let s = shape(r#"{"a": [1, "x", {"b": null}], "c": "d"}"#);
        assert_eq!(s.objects, 2);
        assert_eq!(s.arrays, 1);
        assert_eq!(s.members, 3);
        assert_eq!(s.strings, 5);
        assert_eq!(s.depth, 3);
        // object, array, 1, "x", inner object, null, "d"
        assert_eq!(s.values, 7);
        assert_eq!(shape("7").depth, 0);
        assert_eq!(shape("[]").depth, 1);
    }

    #[test]
    fn strings_hide_brackets_colons_and_escaped_quotes() {
        let text = r#"{"k{[:,": "v]}\"{[:,\\", "x": "\u0022[", "y": "\\"}"#;
        let parsed: Value = serde_json::from_str(text).unwrap();
        let s = shape(text);
        assert_eq!(s.values, count(&parsed));
        assert_eq!(s.values, 4);
        assert_eq!(s.objects, 1);
        assert_eq!(s.arrays, 0);
        assert_eq!(s.members, 3);
        assert_eq!(s.depth, 1);
    }

    #[test]
    fn unicode_and_long_strings_are_skipped_whole() {
        let long = "é[{".repeat(10_000);
        let text = format!(r#"["{long}", "ü", 1]"#);
        let s = shape(&text);
        assert_eq!((s.values, s.strings, s.arrays, s.depth), (4, 2, 1, 1));
    }

    #[test]
    fn value_limit_is_exact_and_stops_early() {
        let text = r#"[{"a":0},{"a":0}]"#; // 5 values
        assert_eq!(scan(text.as_bytes(), 5, 10).unwrap().values, 5);
        assert_eq!(
            scan(text.as_bytes(), 4, 10),
            Err(ScanError::TooManyValues { limit: 4, seen: 5 })
        );
        // A key just read (its colon not yet) must not tip a body at the limit over.
        assert_eq!(scan(br#"{"a":1}"#, 2, 10).unwrap().values, 2);
        // Stops long before the end of a huge body.
        let mut big = String::from("[");
        big.push_str(&"{\"a\":0},".repeat(1_000_000));
        big.push_str("{\"a\":0}]");
        match scan(big.as_bytes(), 1000, 10) {
            Err(ScanError::TooManyValues { limit: 1000, seen }) => {
                assert!(seen <= 1003, "the scan went on to {seen}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nesting_limit() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            scan(deep.as_bytes(), ANY, 64),
            Err(ScanError::TooDeep { limit: 64 })
        );
        assert_eq!(scan(deep.as_bytes(), ANY, 65).unwrap().depth, 65);
        // Depth is nesting, not the number of containers.
        assert_eq!(scan(b"[[],[],[],[]]", ANY, 2).unwrap().depth, 2);
        let objects = r#"{"a":{"b":{"c":{}}}}"#;
        assert_eq!(
            scan(objects.as_bytes(), ANY, 3),
            Err(ScanError::TooDeep { limit: 3 })
        );
    }

    #[test]
    fn malformed_text_does_not_panic() {
        for text in [
            "]]]]}}}",
            "\"unterminated",
            "\"ends with a backslash\\",
            "[1,,,:::]",
            "{\"a\" 1}",
            "",
            "nul",
            "\u{feff}[1]",
        ] {
            let _ = scan(text.as_bytes(), 100, 10);
        }
    }
}
