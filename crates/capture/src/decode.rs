//! Byte-level decoding of a capture request body: undoes the transport encodings the
//! PostHog SDKs use (gzip, base64, `application/x-www-form-urlencoded` with a `data=`
//! field, the legacy `?data=` query parameter) and parses the JSON underneath.
//!
//! Everything here is pure: it takes the request's bytes and headers as values and returns
//! a `serde_json::Value` or a [`CaptureError`]. No I/O, no clock. The shape of the JSON
//! (batch, single event, array) is [`crate::payload`]'s business, not this module's.

use std::borrow::Cow;
use std::io::Read;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::CaptureError;

/// The default bound on a body's size once every encoding is undone.
pub const DEFAULT_MAX_DECODED: usize = 20 * 1024 * 1024;

/// The first two bytes of every gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// One capture request as it came off the wire, before any decoding.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBody<'a> {
    pub body: &'a [u8],
    pub content_type: Option<&'a str>,
    pub content_encoding: Option<&'a str>,
    /// `?compression=` query parameter (gzip, gzip-js, base64, lz64 ...)
    pub compression: Option<&'a str>,
    /// `?data=` query parameter of a legacy GET request, used when the body is empty
    pub data_param: Option<&'a str>,
}

/// What a `compression` hint (query parameter or form field) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    None,
    Gzip,
    Base64,
}

/// Undo the transport encodings and parse JSON. `max_decoded` bounds the decompressed size
/// ([`DEFAULT_MAX_DECODED`], 20 MB, by default): exceeding it is [`CaptureError::TooLarge`]
/// with a message saying the limit.
///
/// This builds the whole `serde_json::Value` with no other bound: capture itself goes through
/// [`decode_transport`], `ingest::scan` and [`parse_json`] so the shape is checked first.
pub fn decode_body(
    raw: &RawBody<'_>,
    max_decoded: usize,
) -> Result<serde_json::Value, CaptureError> {
    parse_json(&decode_transport(raw, max_decoded)?)
}

/// Undo the transport encodings only: the JSON text of the body (a UTF-8 byte order mark
/// removed), borrowed from the body when it was plain JSON. At most `max_decoded` bytes
/// come out; more is [`CaptureError::TooLarge`] saying the limit.
pub fn decode_transport<'a>(
    raw: &RawBody<'a>,
    max_decoded: usize,
) -> Result<Cow<'a, [u8]>, CaptureError> {
    let out = transport(raw, max_decoded)?;
    if out.len() > max_decoded {
        return Err(too_large(max_decoded));
    }
    Ok(strip_bom(out))
}

fn strip_bom(bytes: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    match bytes {
        Cow::Borrowed(b) => Cow::Borrowed(b.strip_prefix(BOM).unwrap_or(b)),
        Cow::Owned(mut v) => {
            if v.starts_with(BOM) {
                v.drain(..BOM.len());
            }
            Cow::Owned(v)
        }
    }
}

fn transport<'a>(raw: &RawBody<'a>, max_decoded: usize) -> Result<Cow<'a, [u8]>, CaptureError> {
    let query_hint = compression_hint(raw.compression)?;
    let header_gzip = content_encoding_is_gzip(raw.content_encoding)?;

    if is_blank(raw.body) {
        // Legacy GET requests carry the payload in the query string instead of the body.
        return match raw.data_param {
            Some(data) if !data.trim().is_empty() => {
                decode_data_field(Cow::Borrowed(data), query_hint, max_decoded)
            }
            _ => Err(CaptureError::InvalidPayload(
                "empty request body".to_owned(),
            )),
        };
    }

    // Gzip is recognised by its magic bytes before anything else: posthog-node gzips by
    // default and some clients label the result with a misleading Content-Type.
    if raw.body.starts_with(&GZIP_MAGIC) {
        return decode_bytes(raw.body, Hint::Gzip, max_decoded);
    }

    if is_form(raw.content_type) || raw.body.starts_with(b"data=") {
        return decode_form(raw.body, query_hint, max_decoded);
    }

    let hint = if header_gzip { Hint::Gzip } else { query_hint };
    decode_bytes(raw.body, hint, max_decoded)
}

/// Whether undoing the transport encodings of `raw` may make more bytes than it has (gzip,
/// possibly inside base64 or a form field): the decoded size is then unknown until it is
/// inflated, bounded only by the limit.
pub fn may_inflate(raw: &RawBody<'_>) -> bool {
    let body = raw.body;
    let hinted = matches!(compression_hint(raw.compression), Ok(Hint::Gzip))
        || matches!(content_encoding_is_gzip(raw.content_encoding), Ok(true));
    // Plain JSON is the only shape that cannot hide gzip (base64 and forms can carry it).
    hinted || !looks_like_json(body) || is_form(raw.content_type) || is_blank(body)
}

/// The most bytes decoding `raw` can make, given the limit: deflate cannot expand more than
/// 1032:1, so a compressed body bounds its own output; anything else decodes to at most
/// its own size (base64 and percent-decoding shrink).
pub fn decoded_bound(raw: &RawBody<'_>, max_decoded: usize) -> usize {
    let wire = raw.body.len() + raw.data_param.map_or(0, str::len);
    if may_inflate(raw) {
        wire.saturating_mul(1032)
            .saturating_add(1024)
            .min(max_decoded)
    } else {
        wire.min(max_decoded)
    }
}

/// Maps a `compression` value to what it asks for; lz64 is refused outright so the client
/// learns why rather than getting a confusing JSON error.
fn compression_hint(compression: Option<&str>) -> Result<Hint, CaptureError> {
    let Some(value) = compression else {
        return Ok(Hint::None);
    };
    let value = value.trim().to_ascii_lowercase();
    match value.as_str() {
        "gzip" | "gzip-js" => Ok(Hint::Gzip),
        "base64" | "b64" => Ok(Hint::Base64),
        "lz64" | "lz-string" | "lzstring" => Err(CaptureError::InvalidPayload(
            "lz64 compression is not supported; send the body gzip-compressed (compression=gzip-js) or base64-encoded (compression=base64) instead".to_owned(),
        )),
        // Unknown or "none"-like hints are ignored: the body itself still has to decode,
        // and its own shape (magic bytes, JSON, base64) decides.
        _ => Ok(Hint::None),
    }
}

/// Only gzip is a supported Content-Encoding; anything else would make the body
/// undecodable, so it is refused with a message naming the encoding.
fn content_encoding_is_gzip(encoding: Option<&str>) -> Result<bool, CaptureError> {
    let Some(encoding) = encoding else {
        return Ok(false);
    };
    let mut gzip = false;
    // A list such as "gzip, identity" names the encodings in the order they were applied.
    for part in encoding.split(',') {
        match part.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => {}
            "gzip" | "x-gzip" => gzip = true,
            other => {
                return Err(CaptureError::InvalidPayload(format!(
                    "unsupported Content-Encoding `{other}`; send the body uncompressed or gzip-compressed"
                )));
            }
        }
    }
    Ok(gzip)
}

fn is_form(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|essence| {
            essence
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// A form body: the payload is its `data` field, optionally with its own `compression`.
fn decode_form<'a>(
    body: &'a [u8],
    query_hint: Hint,
    max_decoded: usize,
) -> Result<Cow<'a, [u8]>, CaptureError> {
    let mut data = None;
    let mut form_compression = None;
    for (key, value) in form_urlencoded::parse(body) {
        match key.as_ref() {
            "data" if data.is_none() => data = Some(value),
            "compression" if form_compression.is_none() => form_compression = Some(value),
            _ => {}
        }
    }
    // The form's own compression field describes its own data field, so it wins over the
    // query parameter.
    let hint = match form_compression.as_deref() {
        Some(c) => compression_hint(Some(c))?,
        None => query_hint,
    };
    match data {
        Some(data) if data.trim().is_empty() => Err(CaptureError::InvalidPayload(
            "the form's `data` field is empty".to_owned(),
        )),
        Some(data) => decode_data_field(data, hint, max_decoded),
        // Some clients label a plain JSON body as a form; accept it rather than refuse.
        None if looks_like_json(body) => decode_bytes(body, Hint::None, max_decoded),
        None => Err(CaptureError::InvalidPayload(
            "form-encoded body has no `data` field; send the events as data=<base64 or JSON>"
                .to_owned(),
        )),
    }
}

/// A `data` value (form field or query parameter): plain JSON, or base64 of JSON or of gzip.
fn decode_data_field<'a>(
    data: Cow<'a, str>,
    hint: Hint,
    max_decoded: usize,
) -> Result<Cow<'a, [u8]>, CaptureError> {
    if looks_like_json(data.trim().as_bytes()) {
        return Ok(match data {
            Cow::Borrowed(s) => Cow::Borrowed(s.trim().as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.trim().as_bytes().to_vec()),
        });
    }
    match decode_base64(data.trim()) {
        Some(bytes) => Ok(Cow::Owned(
            decode_bytes(&bytes, hint, max_decoded)?.into_owned(),
        )),
        None => Err(CaptureError::InvalidPayload(
            "the `data` field is neither JSON nor valid base64".to_owned(),
        )),
    }
}

/// Bytes with no form wrapping: gzip, base64 or plain JSON.
fn decode_bytes<'a>(
    bytes: &'a [u8],
    hint: Hint,
    max_decoded: usize,
) -> Result<Cow<'a, [u8]>, CaptureError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        return gunzip_bounded(bytes, max_decoded).map(Cow::Owned);
    }
    if hint == Hint::Gzip && !looks_like_json(bytes) {
        // Declared gzip yet neither gzip nor JSON. A body that is already JSON is accepted:
        // a proxy may have inflated it without dropping the hint.
        return Err(CaptureError::InvalidPayload(
            "the body was declared gzip-compressed but is not gzip data (it lacks the 1f 8b gzip header)".to_owned(),
        ));
    }
    if looks_like_json(bytes) {
        return Ok(Cow::Borrowed(bytes));
    }

    // Not JSON on its face: try base64, which is how several SDKs send bodies, with or
    // without an explicit compression=base64.
    let decoded = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| decode_base64(s.trim()));
    if let Some(decoded) = decoded {
        if decoded.starts_with(&GZIP_MAGIC) {
            return gunzip_bounded(&decoded, max_decoded).map(Cow::Owned);
        }
        if hint == Hint::Base64 || looks_like_json(&decoded) {
            return Ok(Cow::Owned(decoded));
        }
    } else if hint == Hint::Base64 {
        return Err(CaptureError::InvalidPayload(
            "the body was declared base64 (compression=base64) but is not valid base64".to_owned(),
        ));
    }
    // Neither gzip nor base64 of JSON: parse the original so the error message points at
    // what the client actually sent (a bare number or string is valid JSON and is left to
    // the payload shape check).
    Ok(Cow::Borrowed(bytes))
}

/// Whether the first non-blank byte opens a JSON object or array.
fn looks_like_json(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    matches!(
        bytes.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{') | Some(b'[')
    )
}

/// Parses the JSON text [`decode_transport`] gave.
pub fn parse_json(bytes: &[u8]) -> Result<serde_json::Value, CaptureError> {
    serde_json::from_slice(bytes)
        .map_err(|e| CaptureError::InvalidPayload(format!("invalid JSON in request body: {e}")))
}

/// Inflates gzip (possibly several concatenated members) reading at most `max + 1` bytes,
/// so a small compressed bomb can never make us allocate more than the limit.
fn gunzip_bounded(bytes: &[u8], max: usize) -> Result<Vec<u8>, CaptureError> {
    let decoder = flate2::read::MultiGzDecoder::new(bytes);
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(max));
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    decoder.take(limit).read_to_end(&mut out).map_err(|e| {
        CaptureError::InvalidPayload(format!("the body is not valid gzip data: {e}"))
    })?;
    if out.len() > max {
        return Err(too_large(max));
    }
    Ok(out)
}

fn too_large(max: usize) -> CaptureError {
    CaptureError::TooLarge(format!(
        "the request body is larger than the {} limit once decoded",
        human_size(max)
    ))
}

fn human_size(bytes: usize) -> String {
    const MB: usize = 1024 * 1024;
    const KB: usize = 1024;
    if bytes >= MB && bytes.is_multiple_of(MB) {
        format!("{} MB", bytes / MB)
    } else if bytes >= KB && bytes.is_multiple_of(KB) {
        format!("{} KB", bytes / KB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Padding may be present or not, and non-canonical trailing bits are tolerated: SDKs
/// differ and none of them should be refused over it.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes base64 in either alphabet. A `+` that was not percent-encoded in a form or
/// query string arrives as a space after URL-decoding, so spaces are read as `+`; line
/// breaks (MIME-style wrapping) are dropped.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut normalized: String = s
        .chars()
        .filter(|c| !matches!(c, '\r' | '\n' | '\t'))
        .map(|c| match c {
            ' ' => '+',
            '-' => '+',
            '_' => '/',
            other => other,
        })
        .collect();
    // Trailing padding is optional; dropping it lets a wrong amount of it pass too.
    while normalized.ends_with('=') {
        normalized.pop();
    }
    if normalized.is_empty() {
        return None;
    }
    LENIENT_BASE64.decode(normalized.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::json;
    use std::io::Write;

    const MAX: usize = DEFAULT_MAX_DECODED;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    fn body(bytes: &[u8]) -> RawBody<'_> {
        RawBody {
            body: bytes,
            ..RawBody::default()
        }
    }

    fn sample() -> serde_json::Value {
        json!({"api_key": "phc_x", "batch": [{"event": "e", "distinct_id": "d"}]})
    }

    fn invalid_message(r: Result<serde_json::Value, CaptureError>) -> String {
        match r {
            Err(CaptureError::InvalidPayload(m)) => m,
            other => panic!("expected InvalidPayload, got {other:?}"),
        }
    }

    /// JSON whose standard base64 contains both `+` and `/`, the characters that form and
    /// URL encodings mangle.
    fn awkward_json() -> Vec<u8> {
        for n in 0..64 {
            let candidate =
                serde_json::to_vec(&json!({"k": "~".repeat(n) + "?>?>", "batch": []})).unwrap();
            let encoded = STANDARD.encode(&candidate);
            if encoded.contains('+') && encoded.contains('/') && encoded.ends_with('=') {
                return candidate;
            }
        }
        panic!("no awkward candidate found");
    }

    #[test]
    fn plain_json() {
        let bytes = serde_json::to_vec(&sample()).unwrap();
        assert_eq!(decode_body(&body(&bytes), MAX).unwrap(), sample());
    }

    #[test]
    fn gzip_via_content_encoding_header() {
        let gz = gzip(&serde_json::to_vec(&sample()).unwrap());
        let raw = RawBody {
            content_encoding: Some("gzip"),
            ..body(&gz)
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), sample());
    }

    #[test]
    fn gzip_via_compression_gzip_js() {
        let gz = gzip(&serde_json::to_vec(&sample()).unwrap());
        let raw = RawBody {
            compression: Some("gzip-js"),
            content_type: Some("text/plain"),
            ..body(&gz)
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), sample());
    }

    #[test]
    fn gzip_via_magic_bytes_only() {
        let gz = gzip(&serde_json::to_vec(&sample()).unwrap());
        let raw = RawBody {
            content_type: Some("application/json"),
            ..body(&gz)
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), sample());
    }

    #[test]
    fn gzip_bomb_over_limit_is_too_large() {
        let bomb = gzip(&vec![b' '; 3 * 1024 * 1024]);
        assert!(bomb.len() < 64 * 1024);
        match decode_body(&body(&bomb), 1024 * 1024) {
            Err(CaptureError::TooLarge(m)) => assert!(m.contains("1 MB"), "{m}"),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn gzip_exactly_at_limit_is_accepted() {
        let json = serde_json::to_vec(&sample()).unwrap();
        let gz = gzip(&json);
        assert_eq!(decode_body(&body(&gz), json.len()).unwrap(), sample());
        assert!(matches!(
            decode_body(&body(&gz), json.len() - 1),
            Err(CaptureError::TooLarge(_))
        ));
    }

    #[test]
    fn default_limit_message_says_20_mb() {
        match too_large(DEFAULT_MAX_DECODED) {
            CaptureError::TooLarge(m) => assert!(m.contains("20 MB"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_body_over_limit_is_too_large() {
        let bytes = serde_json::to_vec(&sample()).unwrap();
        assert!(matches!(
            decode_body(&body(&bytes), 10),
            Err(CaptureError::TooLarge(_))
        ));
    }

    #[test]
    fn bad_gzip_is_invalid_payload() {
        let mut gz = gzip(&serde_json::to_vec(&sample()).unwrap());
        gz.truncate(gz.len() / 2);
        let m = invalid_message(decode_body(&body(&gz), MAX));
        assert!(m.contains("gzip"), "{m}");

        let m = invalid_message(decode_body(&body(&[0x1f, 0x8b, 1, 2, 3, 4, 5]), MAX));
        assert!(m.contains("gzip"), "{m}");
    }

    #[test]
    fn declared_gzip_but_not_gzip() {
        let raw = RawBody {
            compression: Some("gzip"),
            ..body(b"definitely not gzip")
        };
        let m = invalid_message(decode_body(&raw, MAX));
        assert!(m.contains("gzip"), "{m}");
        // Already-inflated JSON with a stale hint is accepted.
        let bytes = serde_json::to_vec(&sample()).unwrap();
        let raw = RawBody {
            content_encoding: Some("gzip"),
            ..body(&bytes)
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), sample());
    }

    #[test]
    fn unsupported_content_encoding_is_refused() {
        let raw = RawBody {
            content_encoding: Some("br"),
            ..body(b"{}")
        };
        let m = invalid_message(decode_body(&raw, MAX));
        assert!(m.contains("br"), "{m}");
    }

    fn form(data_value: &str, compression: Option<&str>) -> Vec<u8> {
        let mut s = format!("data={data_value}");
        if let Some(c) = compression {
            s.push_str("&compression=");
            s.push_str(c);
        }
        s.into_bytes()
    }

    fn form_body(bytes: &[u8]) -> RawBody<'_> {
        RawBody {
            content_type: Some("application/x-www-form-urlencoded; charset=utf-8"),
            ..body(bytes)
        }
    }

    fn awkward_value() -> serde_json::Value {
        serde_json::from_slice(&awkward_json()).unwrap()
    }

    #[test]
    fn form_base64_with_raw_plus_and_slash() {
        // '+' left unencoded in a form turns into a space when the form is decoded.
        let encoded = STANDARD.encode(awkward_json());
        let f = form(&encoded, None);
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), awkward_value());
    }

    #[test]
    fn form_base64_percent_encoded() {
        let encoded = STANDARD.encode(awkward_json());
        let escaped: String = form_urlencoded::byte_serialize(encoded.as_bytes()).collect();
        assert!(escaped.contains("%2B") && escaped.contains("%2F"));
        let f = form(&escaped, Some("base64"));
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), awkward_value());
    }

    #[test]
    fn form_base64_url_safe_without_padding() {
        let encoded = URL_SAFE_NO_PAD.encode(awkward_json());
        assert!(encoded.contains('-') && encoded.contains('_'));
        let f = form(&encoded, None);
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), awkward_value());
    }

    #[test]
    fn form_base64_standard_with_padding_missing() {
        let encoded = STANDARD.encode(awkward_json());
        let unpadded = encoded.trim_end_matches('=');
        assert_ne!(unpadded.len(), encoded.len());
        let escaped: String = form_urlencoded::byte_serialize(unpadded.as_bytes()).collect();
        let f = form(&escaped, None);
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), awkward_value());
    }

    #[test]
    fn form_base64_of_gzip_with_form_compression_field() {
        let encoded = STANDARD.encode(gzip(&serde_json::to_vec(&sample()).unwrap()));
        let escaped: String = form_urlencoded::byte_serialize(encoded.as_bytes()).collect();
        let f = form(&escaped, Some("gzip-js"));
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), sample());
    }

    #[test]
    fn form_plain_json_in_data() {
        let json = serde_json::to_string(&sample()).unwrap();
        let escaped: String = form_urlencoded::byte_serialize(json.as_bytes()).collect();
        let f = form(&escaped, None);
        assert_eq!(decode_body(&form_body(&f), MAX).unwrap(), sample());
    }

    #[test]
    fn form_without_content_type_is_recognised() {
        let encoded = STANDARD.encode(serde_json::to_vec(&sample()).unwrap());
        let escaped: String = form_urlencoded::byte_serialize(encoded.as_bytes()).collect();
        let f = form(&escaped, None);
        assert_eq!(decode_body(&body(&f), MAX).unwrap(), sample());
    }

    #[test]
    fn form_without_data_field() {
        let m = invalid_message(decode_body(&form_body(b"foo=bar"), MAX));
        assert!(m.contains("`data`"), "{m}");
        let m = invalid_message(decode_body(&form_body(b"data="), MAX));
        assert!(m.contains("empty"), "{m}");
    }

    #[test]
    fn form_data_not_base64_nor_json() {
        let m = invalid_message(decode_body(&form_body(b"data=%21%21%21"), MAX));
        assert!(m.contains("base64"), "{m}");
    }

    #[test]
    fn form_lz64_refused() {
        let m = invalid_message(decode_body(&form_body(b"data=abcd&compression=lz64"), MAX));
        assert!(
            m.contains("lz64") && m.contains("gzip") && m.contains("base64"),
            "{m}"
        );
    }

    #[test]
    fn lz64_query_param_refused() {
        let raw = RawBody {
            compression: Some("lz64"),
            ..body(b"N4IgLgpgTgtghgSwHYQ")
        };
        let m = invalid_message(decode_body(&raw, MAX));
        assert!(m.contains("lz64") && m.contains("not supported"), "{m}");
    }

    #[test]
    fn base64_body_with_and_without_hint() {
        let encoded = STANDARD.encode(awkward_json());
        assert_eq!(
            decode_body(&body(encoded.as_bytes()), MAX).unwrap(),
            awkward_value()
        );
        let raw = RawBody {
            compression: Some("base64"),
            ..body(encoded.as_bytes())
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), awkward_value());
    }

    #[test]
    fn base64_body_declared_but_invalid() {
        let raw = RawBody {
            compression: Some("base64"),
            ..body(b"!!!not base64!!!")
        };
        let m = invalid_message(decode_body(&raw, MAX));
        assert!(m.contains("base64"), "{m}");
    }

    #[test]
    fn legacy_get_data_param() {
        // Query strings are URL-decoded by the caller, which turns '+' into ' '.
        let encoded = STANDARD.encode(awkward_json()).replace('+', " ");
        let raw = RawBody {
            data_param: Some(&encoded),
            ..body(b"")
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), awkward_value());

        let json = serde_json::to_string(&sample()).unwrap();
        let raw = RawBody {
            data_param: Some(&json),
            ..body(b"")
        };
        assert_eq!(decode_body(&raw, MAX).unwrap(), sample());
    }

    #[test]
    fn empty_body() {
        assert_eq!(
            invalid_message(decode_body(&body(b""), MAX)),
            "empty request body"
        );
        assert_eq!(
            invalid_message(decode_body(&body(b" \n"), MAX)),
            "empty request body"
        );
        let raw = RawBody {
            data_param: Some(""),
            ..body(b"")
        };
        assert_eq!(
            invalid_message(decode_body(&raw, MAX)),
            "empty request body"
        );
    }

    #[test]
    fn invalid_json_message_has_line_and_column() {
        let m = invalid_message(decode_body(&body(b"{\"batch\": [1,}"), MAX));
        assert!(m.contains("invalid JSON"), "{m}");
        assert!(m.contains("line 1 column"), "{m}");
    }

    #[test]
    fn garbage_that_is_neither_json_nor_base64() {
        let m = invalid_message(decode_body(&body(b"hello, world"), MAX));
        assert!(m.contains("invalid JSON"), "{m}");
    }

    #[test]
    fn bare_scalars_are_left_to_the_shape_check() {
        assert_eq!(decode_body(&body(b"42"), MAX).unwrap(), json!(42));
        assert_eq!(decode_body(&body(b"\"hi\""), MAX).unwrap(), json!("hi"));
    }

    #[test]
    fn byte_order_mark_is_tolerated() {
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(serde_json::to_vec(&sample()).unwrap());
        assert_eq!(decode_body(&body(&bytes), MAX).unwrap(), sample());
    }

    #[test]
    fn base64_decoder_is_robust() {
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("aGk").unwrap(), b"hi");
        assert_eq!(decode_base64("aG\r\nk=").unwrap(), b"hi");
        assert_eq!(decode_base64("+/8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode_base64(" /8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode_base64("-_8").unwrap(), [0xfb, 0xff]);
        assert!(decode_base64("").is_none());
        assert!(decode_base64("a").is_none());
        assert!(decode_base64("a!b#").is_none());
    }
}
