//! URL functions with ClickHouse's lenient, non-decoding reading of URLs: the host needs a
//! dot and no user info, `queryString` starts at the first `?` anywhere, URL parameters
//! are read after the first `?` or `#`, values are not percent-decoded.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, ListBuilder, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::Expr;

use super::strings::list_of_strings;
use super::udf::{Nulls, call};
use super::{FnContext, FunctionError};

fn scheme(u: &str) -> Option<&str> {
    let i = u.find(':')?;
    let s = &u[..i];
    let mut chars = s.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(s)
}

/// Where the part after the scheme starts, and whether it has an authority (`//`).
fn after_scheme(u: &str) -> (usize, bool) {
    if u.starts_with("//") {
        return (2, true);
    }
    match scheme(u) {
        Some(s) if u[s.len()..].starts_with("://") => (s.len() + 3, true),
        Some(s) => (s.len() + 1, false),
        None => (0, true),
    }
}

pub(crate) fn protocol(u: &str) -> &str {
    scheme(u).unwrap_or("")
}

pub(crate) fn domain(u: &str) -> &str {
    let (start, authority) = after_scheme(u);
    if !authority {
        return "";
    }
    let rest = &u[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host_port = &rest[..end];
    let host = match host_port.rfind(':') {
        Some(i) if host_port[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host_port[..i],
        _ => host_port,
    };
    let valid = !host.is_empty()
        && host.contains('.')
        && !host.ends_with('.')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') || b >= 0x80);
    if valid { host } else { "" }
}

fn path_start(u: &str) -> Option<usize> {
    let (start, authority) = after_scheme(u);
    let rest = &u[start..];
    if authority {
        let stop = rest.find(['?', '#']).unwrap_or(rest.len());
        rest[..stop].find('/').map(|i| start + i)
    } else {
        None
    }
}

pub(crate) fn path(u: &str) -> &str {
    match path_start(u) {
        Some(s) => {
            let rest = &u[s..];
            &rest[..rest.find(['?', '#']).unwrap_or(rest.len())]
        }
        None => "",
    }
}

pub(crate) fn path_full(u: &str) -> &str {
    path_start(u).map(|s| &u[s..]).unwrap_or("")
}

pub(crate) fn query_string(u: &str) -> &str {
    match u.find('?') {
        Some(q) => {
            let rest = &u[q + 1..];
            &rest[..rest.find('#').unwrap_or(rest.len())]
        }
        None => "",
    }
}

pub(crate) fn fragment(u: &str) -> &str {
    u.find('#').map(|i| &u[i + 1..]).unwrap_or("")
}

/// `name=value` pairs after the first `?` or `#` (pairs without `=` are skipped).
/// `extractURLParameters`: after the first `?` or `#`, the tokens ended by `&` or `#`; a
/// token with `=` runs to the next `&`/`#` (or the end), one without `=` counts only when a
/// `&`/`#` ends it, and a `?` before the `=` starts the token over (ClickHouse's reading).
fn parameters(u: &str) -> Vec<&str> {
    let b = u.as_bytes();
    let mut out = vec![];
    let Some(q) = u.find(['?', '#']) else {
        return out;
    };
    let mut pos = q + 1;
    'tokens: loop {
        let mut begin = pos;
        let stop = loop {
            match b[pos..]
                .iter()
                .position(|c| matches!(c, b'=' | b'&' | b'#' | b'?'))
            {
                None => break 'tokens,
                Some(i) if b[pos + i] == b'?' => {
                    pos += i + 1;
                    begin = pos;
                }
                Some(i) => break pos + i,
            }
        };
        if b[stop] == b'=' {
            let end = b[stop..]
                .iter()
                .position(|c| matches!(c, b'&' | b'#'))
                .map_or(b.len(), |i| stop + i);
            out.push(&u[begin..end]);
            if end == b.len() {
                break;
            }
            pos = end + 1;
        } else {
            out.push(&u[begin..stop]);
            pos = stop + 1;
        }
    }
    out
}

/// `URLHierarchy` (`path_only` false) and `URLPathHierarchy`: the URL cut after each `/`,
/// `?` or `#` of its path (a run of them counting once), the first piece being the scheme and
/// host (URLHierarchy) or the path from its first delimiter (URLPathHierarchy). Only a URL
/// with a lowercase/digit scheme, `://` and something after it has a hierarchy: any other
/// text is its own one piece (URLHierarchy) or none (URLPathHierarchy), as ClickHouse.
fn url_hierarchy(u: &str, path_only: bool) -> Vec<&str> {
    let b = u.as_bytes();
    let delim = |c: u8| matches!(c, b'/' | b'?' | b'#');
    let scheme = b
        .iter()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .count();
    let mut out = vec![];
    if scheme == 0 || !b[scheme..].starts_with(b"://") || scheme + 3 >= b.len() {
        if !path_only && !u.is_empty() {
            out.push(u);
        }
        return out;
    }
    let mut pos = scheme + 3;
    while pos < b.len() && !delim(b[pos]) {
        pos += 1;
    }
    let begin = if path_only {
        if pos == b.len() {
            return out;
        }
        pos
    } else {
        if pos < b.len() {
            pos += 1;
        }
        out.push(&u[..pos]);
        0
    };
    loop {
        while pos < b.len() && delim(b[pos]) {
            pos += 1;
        }
        if pos == b.len() {
            return out;
        }
        while pos < b.len() && !delim(b[pos]) {
            pos += 1;
        }
        if pos < b.len() {
            pos += 1;
        }
        out.push(&u[begin..pos]);
    }
}

/// The `name=value` pieces `extractURLParameter` looks through.
fn valued_parameters(u: &str) -> Vec<&str> {
    match u.find(['?', '#']) {
        Some(i) => u[i + 1..]
            .split(['&', '#', '?'])
            .filter(|p| p.contains('='))
            .collect(),
        None => vec![],
    }
}

pub(crate) fn parameter<'a>(u: &'a str, name: &str) -> &'a str {
    valued_parameters(u)
        .into_iter()
        .find_map(|p| {
            let (k, v) = p.split_once('=')?;
            (k == name).then_some(v)
        })
        .unwrap_or("")
}

pub(crate) fn cut_query_string(u: &str) -> String {
    match u.find('?') {
        Some(q) => {
            let end = u[q..].find('#').map(|i| q + i).unwrap_or(u.len());
            format!("{}{}", &u[..q], &u[end..])
        }
        None => u.to_string(),
    }
}

/// `cutWWW`: a leading `www.` of the host removed when the URL spells its authority (`//`).
/// ClickHouse's cutURLParameter: the first `name=value` of the query string (not the
/// fragment) removed with one `&` next to it (the following one, else the preceding one).
fn cut_url_parameter(u: &str, name: &str) -> String {
    let Some(q) = u.find('?') else {
        return u.to_string();
    };
    let end = u[q..].find('#').map_or(u.len(), |i| q + i);
    let key = format!("{name}=");
    let mut from = q + 1;
    while from <= end {
        let Some(i) = u[from..end].find(&key) else {
            break;
        };
        let p = from + i;
        if p == q + 1 || u.as_bytes()[p - 1] == b'&' {
            let value_end = u[p..end].find('&').map_or(end, |i| p + i);
            let (cut_from, cut_to) = if value_end < end {
                (p, value_end + 1)
            } else if p > q + 1 {
                (p - 1, value_end)
            } else {
                (p, value_end)
            };
            return format!("{}{}", &u[..cut_from], &u[cut_to..]);
        }
        from = p + 1;
    }
    u.to_string()
}

fn cut_www(u: &str) -> String {
    let (start, authority) = after_scheme(u);
    if authority && u[..start].ends_with("//") && u[start..].starts_with("www.") {
        format!("{}{}", &u[..start], &u[start + 4..])
    } else {
        u.to_string()
    }
}

/// `netloc`: ClickHouse's reading of the authority (user info, host, port). Without user
/// info the authority ends at the first `?`, the last `/` or after the last reserved
/// character, whichever comes first; a `#` always ends it.
fn netloc(u: &str) -> &str {
    let b = u.as_bytes();
    let start = if u.starts_with("//") {
        2
    } else {
        let scheme_end = b.len().min(16);
        let mut p = 1;
        while p < scheme_end && (b[p].is_ascii_alphanumeric() || matches!(b[p], b'.' | b'-' | b'+'))
        {
            p += 1;
        }
        if p + 2 < scheme_end && &b[p..p + 3] == b"://" {
            p + 3
        } else {
            0
        }
    };
    let (mut ident, mut host_end, mut question, mut slash) = (false, None, None, None);
    for (i, &c) in b.iter().enumerate().skip(start) {
        match c {
            b'/' | b'?' if ident => return &u[start..i],
            b'/' => slash = Some(i),
            b'?' => {
                question.get_or_insert(i);
            }
            b'#' => return &u[start..i],
            b'@' => {
                ident = true;
                host_end = None;
            }
            b';' | b'=' | b'&' | b'~' | b'%' | b' ' | b'\t' | b'<' | b'>' | b'{' | b'}' | b'|'
            | b'\\' | b'^' | b'[' | b']' => {
                if ident {
                    return &u[start..i];
                }
                host_end = Some(i);
            }
            _ => {}
        }
    }
    let end = [question, slash, host_end]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(b.len());
    &u[start..end]
}

/// The first significant subdomain of `host` as a byte range: the part before the top-level
/// domain, or the one before that when it is `com`, `net`, `org`, `biz`, `gov`, `mil`, `edu`
/// or `co` (ClickHouse's list); None without a dot.
fn significant(host: &str) -> Option<(usize, usize)> {
    let dots: Vec<usize> = host.match_indices('.').map(|(i, _)| i).collect();
    let n = dots.len();
    let last = *dots.last()?;
    let prev = n.checked_sub(2).map(|i| dots[i]);
    let second = (prev.map_or(0, |p| p + 1), last);
    if let Some(p) = prev
        && matches!(
            &host[p + 1..last],
            "com" | "net" | "org" | "biz" | "gov" | "mil" | "edu" | "co"
        )
    {
        let start = n.checked_sub(3).map_or(0, |i| dots[i] + 1);
        return Some((start, p));
    }
    Some(second)
}

fn without_www(d: &str) -> &str {
    d.strip_prefix("www.").unwrap_or(d)
}

/// `cutQueryStringAndFragment`: everything from the first `?` removed, or from the first
/// `#` when there is no `?` (a `#` before a `?` stays, as in ClickHouse).
fn cut_query_and_fragment(u: &str) -> &str {
    &u[..u.find('?').or_else(|| u.find('#')).unwrap_or(u.len())]
}

/// `decodeURLComponent`: `%XX` sequences decoded (invalid ones kept as they are), `+` kept;
/// bytes that are not UTF-8 are replaced.
fn decode_url_component(u: &str, plus_is_space: bool) -> String {
    let b = u.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `extractURLParameterNames`: the names of the parameters after the first `?` or `#`, as
/// ClickHouse reads them: a name ends at `=`, `&` or `#` (a name ending the URL is not one),
/// a `?` starts the next name.
fn parameter_names(u: &str) -> Vec<&str> {
    let b = u.as_bytes();
    let mut out = vec![];
    let Some(mut pos) = u.find(['?', '#']) else {
        return out;
    };
    loop {
        if pos + 1 >= b.len() {
            break;
        }
        pos += 1;
        let Some(te) = b[pos..]
            .iter()
            .position(|c| matches!(c, b'=' | b'&' | b'#' | b'?'))
            .map(|i| pos + i)
        else {
            break;
        };
        let name = &u[pos..te];
        pos = te;
        if b[te] == b'?' {
            continue;
        }
        out.push(name);
        match b[pos..]
            .iter()
            .position(|c| matches!(c, b'&' | b'#'))
            .map(|i| pos + i)
        {
            Some(p) => pos = p,
            None => break,
        }
    }
    out
}

/// `queryStringAndFragment`: after the first `?`; without one, the fragment with its `#`.
fn query_and_fragment(u: &str) -> &str {
    match u.find('?') {
        Some(q) => &u[q + 1..],
        None => u.find('#').map(|h| &u[h..]).unwrap_or(""),
    }
}

/// `encodeURLComponent`: every byte but `A-Z a-z 0-9 - _ . ~` as `%XX`; the form variant
/// writes a space as `+`.
fn encode_url_component(u: &str, form: bool) -> String {
    let mut out = String::with_capacity(u.len());
    for &b in u.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else if form && b == b' ' {
            out.push('+');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `port`: the port after the host (ClickHouse reads it where `domain` finds a host), else 0.
fn port(u: &str) -> Option<u16> {
    let host = domain(u);
    let at = if host.is_empty() {
        // `a.com:99`: a host read as a scheme.
        let s = scheme(u).filter(|s| s.contains('.'))?;
        s.len()
    } else {
        u.find(host)? + host.len()
    };
    let rest = u[at..].strip_prefix(':')?;
    let digits: &str = &rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())];
    digits.parse().ok()
}

fn str_kernel(name: &str, args: Vec<Expr>, f: fn(&[&str]) -> String) -> Expr {
    let k = Arc::new(move |a: &[ArrayRef], n: usize| -> Result<ArrayRef> {
        let cols = a
            .iter()
            .map(|c| cast(c, &DataType::Utf8))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
        let v: StringArray = (0..n)
            .map(|r| {
                if cols.iter().any(|c| c.is_null(r)) {
                    return None;
                }
                let row: Vec<&str> = cols.iter().map(|c| c.value(r)).collect();
                Some(f(&row))
            })
            .collect();
        Ok(Arc::new(v) as ArrayRef)
    });
    call(name, "", DataType::Utf8, Nulls::FromArgs, args, k)
}

use datafusion::arrow::array::Array as _;

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    Ok(match name {
        "protocol" => str_kernel(name, args, |v| protocol(v[0]).to_string()),
        "domain" => str_kernel(name, args, |v| domain(v[0]).to_string()),
        "domainWithoutWWW" => str_kernel(name, args, |v| {
            let d = domain(v[0]);
            d.strip_prefix("www.").unwrap_or(d).to_string()
        }),
        "topLevelDomain" => str_kernel(name, args, |v| {
            let d = domain(v[0]);
            match d.rfind('.') {
                Some(i) if !d[i + 1..].bytes().all(|b| b.is_ascii_digit()) => {
                    d[i + 1..].to_string()
                }
                _ => String::new(),
            }
        }),
        "path" => str_kernel(name, args, |v| path(v[0]).to_string()),
        "pathFull" => str_kernel(name, args, |v| path_full(v[0]).to_string()),
        "queryString" => str_kernel(name, args, |v| query_string(v[0]).to_string()),
        "fragment" => str_kernel(name, args, |v| fragment(v[0]).to_string()),
        "extractURLParameter" => str_kernel(name, args, |v| parameter(v[0], v[1]).to_string()),
        "cutQueryString" => str_kernel(name, args, |v| cut_query_string(v[0])),
        "cutURLParameter" => {
            if matches!(
                super::type_of(&args[1], ctx)?,
                DataType::List(_) | DataType::LargeList(_)
            ) {
                return Err(super::invalid(
                    "`cutURLParameter` with an array of names is not supported; cut them one by one",
                ));
            }
            str_kernel(name, args, |v| cut_url_parameter(v[0], v[1]))
        }
        "cutWWW" => str_kernel(name, args, |v| cut_www(v[0])),
        "firstSignificantSubdomain" => str_kernel(name, args, |v| {
            let d = without_www(domain(v[0]));
            significant(d).map_or(String::new(), |(s, e)| d[s..e].to_string())
        }),
        "cutToFirstSignificantSubdomain" => str_kernel(name, args, |v| {
            let d = without_www(domain(v[0]));
            significant(d).map_or(String::new(), |(s, _)| d[s..].to_string())
        }),
        "cutToFirstSignificantSubdomainWithWWW" => str_kernel(name, args, |v| {
            let d = domain(v[0]);
            significant(d).map_or(String::new(), |(s, _)| d[s..].to_string())
        }),
        "cutFragment" => str_kernel(name, args, |v| {
            v[0][..v[0].find('#').unwrap_or(v[0].len())].to_string()
        }),
        "queryStringAndFragment" => {
            str_kernel(name, args, |v| query_and_fragment(v[0]).to_string())
        }
        "encodeURLComponent" => str_kernel(name, args, |v| encode_url_component(v[0], false)),
        "encodeURLFormComponent" => str_kernel(name, args, |v| encode_url_component(v[0], true)),
        "port" => {
            let k = Arc::new(|a: &[ArrayRef], n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let s = s.as_string::<i32>();
                let d = match a.get(1) {
                    Some(d) => Some(cast(d, &DataType::UInt16)?),
                    None => None,
                };
                let d = d
                    .as_ref()
                    .map(|d| d.as_primitive::<datafusion::arrow::datatypes::UInt16Type>());
                let v: datafusion::arrow::array::UInt16Array = (0..n)
                    .map(|r| {
                        if s.is_null(r) {
                            return None;
                        }
                        let default = d.map_or(Some(0), |d| d.is_valid(r).then(|| d.value(r)));
                        port(s.value(r)).or(default)
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            call(name, "", DataType::UInt16, Nulls::FromArgs, args, k)
        }
        "netloc" => str_kernel(name, args, |v| netloc(v[0]).to_string()),
        "cutQueryStringAndFragment" => {
            str_kernel(name, args, |v| cut_query_and_fragment(v[0]).to_string())
        }
        "decodeURLComponent" => str_kernel(name, args, |v| decode_url_component(v[0], false)),
        "decodeURLFormComponent" => str_kernel(name, args, |v| decode_url_component(v[0], true)),
        "URLHierarchy" | "URLPathHierarchy" => {
            let path_only = name == "URLPathHierarchy";
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let mut b = ListBuilder::new(StringBuilder::new());
                for u in s.as_string::<i32>().iter() {
                    match u {
                        Some(u) => {
                            for p in url_hierarchy(u, path_only) {
                                b.values().append_value(p);
                            }
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            call(name, "", list_of_strings(), Nulls::FromArgs, args, k)
        }
        "extractURLParameters" | "extractURLParameterNames" => {
            let names = name == "extractURLParameterNames";
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let mut b = ListBuilder::new(StringBuilder::new());
                for u in s.as_string::<i32>().iter() {
                    match u {
                        Some(u) => {
                            let items = if names {
                                parameter_names(u)
                            } else {
                                parameters(u)
                            };
                            for p in items {
                                b.values().append_value(p);
                            }
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            call(name, "", list_of_strings(), Nulls::FromArgs, args, k)
        }
        _ => return Err(FunctionError::Unknown(name.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;

    /// (url, protocol, domain, domainWithoutWWW, topLevelDomain, path, pathFull, queryString,
    /// fragment, extractURLParameter(u, 'x'), extractURLParameters, cutQueryString) from
    /// ClickHouse.
    const CASES: &[[&str; 12]] = &[
        [
            "https://www.Example.com:8080/a/b?x=1&y=2&x=3#frag",
            "https",
            "www.Example.com",
            "Example.com",
            "com",
            "/a/b",
            "/a/b?x=1&y=2&x=3#frag",
            "x=1&y=2&x=3",
            "frag",
            "1",
            "[x=1, y=2, x=3]",
            "https://www.Example.com:8080/a/b#frag",
        ],
        [
            "example.com/path?q",
            "",
            "example.com",
            "example.com",
            "com",
            "/path",
            "/path?q",
            "q",
            "",
            "",
            "[]",
            "example.com/path",
        ],
        [
            "//cdn.example.co.uk/x",
            "",
            "cdn.example.co.uk",
            "cdn.example.co.uk",
            "uk",
            "/x",
            "/x",
            "",
            "",
            "",
            "[]",
            "//cdn.example.co.uk/x",
        ],
        [
            "http://user:pw@host.io",
            "http",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "[]",
            "http://user:pw@host.io",
        ],
        [
            "mailto:someone@x.com",
            "mailto",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "[]",
            "mailto:someone@x.com",
        ],
        ["", "", "", "", "", "", "", "", "", "", "[]", ""],
        [
            "not a url",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "[]",
            "not a url",
        ],
        [
            "https://example.com/p#h?x=1",
            "https",
            "example.com",
            "example.com",
            "com",
            "/p",
            "/p#h?x=1",
            "x=1",
            "h?x=1",
            "1",
            "[x=1]",
            "https://example.com/p#h",
        ],
        [
            "https://a.b.c.d.example.com./",
            "https",
            "",
            "",
            "",
            "/",
            "/",
            "",
            "",
            "",
            "[]",
            "https://a.b.c.d.example.com./",
        ],
        [
            "https://x.com/?a=1#x=2",
            "https",
            "x.com",
            "x.com",
            "com",
            "/",
            "/?a=1#x=2",
            "a=1",
            "x=2",
            "2",
            "[a=1, x=2]",
            "https://x.com/#x=2",
        ],
        [
            "http://localhost:3000/x",
            "http",
            "",
            "",
            "",
            "/x",
            "/x",
            "",
            "",
            "",
            "[]",
            "http://localhost:3000/x",
        ],
        [
            "https://192.168.0.1/",
            "https",
            "192.168.0.1",
            "192.168.0.1",
            "",
            "/",
            "/",
            "",
            "",
            "",
            "[]",
            "https://192.168.0.1/",
        ],
        [
            "https://x.com/?a=1&a=2&b=&=c&d",
            "https",
            "x.com",
            "x.com",
            "com",
            "/",
            "/?a=1&a=2&b=&=c&d",
            "a=1&a=2&b=&=c&d",
            "",
            "",
            "[a=1, a=2, b=, =c]",
            "https://x.com/",
        ],
        [
            "HTTPS://WWW.X.COM",
            "HTTPS",
            "WWW.X.COM",
            "WWW.X.COM",
            "COM",
            "",
            "",
            "",
            "",
            "",
            "[]",
            "HTTPS://WWW.X.COM",
        ],
    ];

    #[test]
    fn url_hierarchy_like_clickhouse() {
        let h = |u| super::url_hierarchy(u, false);
        let p = |u| super::url_hierarchy(u, true);
        let u = "https://example.com/browse/CONV-6788?x=1#f";
        assert_eq!(
            h(u),
            [
                "https://example.com/",
                "https://example.com/browse/",
                "https://example.com/browse/CONV-6788?",
                "https://example.com/browse/CONV-6788?x=1#",
                u
            ]
        );
        assert_eq!(
            p(u),
            [
                "/browse/",
                "/browse/CONV-6788?",
                "/browse/CONV-6788?x=1#",
                "/browse/CONV-6788?x=1#f"
            ]
        );
        assert_eq!(
            h("https://example.com/a//b?x"),
            [
                "https://example.com/",
                "https://example.com/a/",
                "https://example.com/a//b?",
                "https://example.com/a//b?x"
            ]
        );
        assert_eq!(h("https://example.com//"), ["https://example.com/"]);
        assert_eq!(h("https://example.com"), ["https://example.com"]);
        assert_eq!(h("HTTPS://x/y"), ["HTTPS://x/y"]);
        assert_eq!(h("https://"), ["https://"]);
        assert_eq!(h(""), Vec::<&str>::new());
        assert_eq!(h("z://x/y"), ["z://x/", "z://x/y"]);
        assert_eq!(p("https://example.com?x=1"), ["?x=1"]);
        assert_eq!(p("https://example.com/?"), Vec::<&str>::new());
        assert_eq!(p("/a/b/c"), Vec::<&str>::new());
        assert_eq!(p("a://x/y"), ["/y"]);
    }

    #[test]
    fn url_parameters_like_clickhouse() {
        // From ClickHouse: a token without `=` counts when `&`/`#` ends it.
        let cases: &[(&str, &[&str])] = &[
            ("example.com/path?q", &[]),
            ("https://e.com/a?x=1&z", &["x=1"]),
            ("https://e.com/a?z&x=1", &["z", "x=1"]),
            ("https://e.com/a?x=1&z#f", &["x=1", "z"]),
            ("https://e.com/a?x=1&&y=2", &["x=1", "", "y=2"]),
            ("https://e.com/a?=1&y", &["=1"]),
            ("https://e.com/a?x=1&z&", &["x=1", "z"]),
            ("https://e.com/a#x=1&z", &["x=1"]),
            ("https://e.com/a?x=1#f&y=2&z", &["x=1", "f", "y=2"]),
            ("https://e.com/a?b?c=1&d", &["c=1"]),
        ];
        for (u, want) in cases {
            assert_eq!(super::parameters(u), *want, "{u}");
        }
    }

    #[test]
    fn urls_like_clickhouse() {
        let fns = [
            "protocol",
            "domain",
            "domainWithoutWWW",
            "topLevelDomain",
            "path",
            "pathFull",
            "queryString",
            "fragment",
            "extractURLParameter",
            "extractURLParameters",
            "cutQueryString",
        ];
        for case in CASES {
            let mut cases = vec![];
            for (k, f) in fns.iter().enumerate() {
                let mut args = vec![s(case[0])];
                if *f == "extractURLParameter" {
                    args.push(s("x"));
                }
                cases.push((call(f, args), case[k + 1]));
            }
            check(cases);
        }
    }
}
