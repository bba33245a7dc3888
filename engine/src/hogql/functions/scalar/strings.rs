//! String functions with ClickHouse's semantics: positions are 1-based with 0 for "not
//! found", `length`/`substring`/`left`/`position`/`reverse`/pads count bytes (the `UTF8`
//! variants count characters), `lower`/`upper` change ASCII letters only, `concat` is NULL
//! when any argument is, `trim` removes spaces only, regular expressions are RE2-like
//! (Rust `regex`).

use std::sync::Arc;

use base64::Engine;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListBuilder, StringArray, StringBuilder, UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::functions::expr_fn as f;
use datafusion::logical_expr::{Expr, ExprSchemable};
use regex::Regex;

use super::udf::{Nulls, call, call_with, kernel};
use super::{FnContext, FunctionError, invalid, type_of};
use crate::hogql::functions::budget::{self, OutBytes, Output};
use datafusion::logical_expr::Volatility;

fn utf8(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(cast(a, &DataType::Utf8)?)
}

fn int64(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(cast(a, &DataType::Int64)?)
}

/// A per-row string function of one string and any number of integer arguments.
/// `f` is told the row's output so far and takes what it will allocate before allocating.
fn str_ints(
    name: &str,
    args: Vec<Expr>,
    f: impl Fn(&str, &[i64], &mut Output) -> Result<String> + Send + Sync + 'static,
) -> Expr {
    let grows = name == "repeat";
    let fname = name.to_string();
    let k = kernel(move |a, _| {
        let s = utf8(&a[0])?;
        let s = s.as_string::<i32>();
        let ints = a[1..].iter().map(int64).collect::<Result<Vec<_>>>()?;
        let ints: Vec<_> = ints.iter().map(|x| x.as_primitive::<Int64Type>()).collect();
        let mut budget = Output::new(&fname);
        let mut out = StringBuilder::new();
        let mut vals = Vec::with_capacity(ints.len());
        for r in 0..s.len() {
            vals.clear();
            vals.extend(ints.iter().map(|x| (!x.is_null(r)).then(|| x.value(r))));
            match vals.iter().copied().collect::<Option<Vec<i64>>>() {
                Some(v) if !s.is_null(r) => out.append_value(f(s.value(r), &v, &mut budget)?),
                _ => out.append_null(),
            }
        }
        Ok(Arc::new(out.finish()) as ArrayRef)
    });
    let volatility = if grows {
        Volatility::Volatile
    } else {
        Volatility::Immutable
    };
    call_with(
        name,
        "",
        DataType::Utf8,
        Nulls::FromArgs,
        args,
        k,
        volatility,
    )
}

/// A string function whose result can be much longer than its arguments: `size` says how
/// long the row's result will be, which is taken from the budget before `f` allocates it.
fn growing_fn(
    name: &str,
    args: Vec<Expr>,
    size: fn(&[&str]) -> usize,
    f: fn(&[&str]) -> String,
) -> Expr {
    let fname = name.to_string();
    let k = kernel(move |a, n| {
        let cols = a.iter().map(utf8).collect::<Result<Vec<_>>>()?;
        let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
        let mut budget = Output::new(&fname);
        let mut out = StringBuilder::new();
        let mut row: Vec<&str> = Vec::with_capacity(cols.len());
        for r in 0..n {
            if cols.iter().any(|c| c.is_null(r)) {
                out.append_null();
                continue;
            }
            row.clear();
            row.extend(cols.iter().map(|c| c.value(r)));
            budget.take(size(&row))?;
            out.append_value(f(&row));
        }
        Ok(Arc::new(out.finish()) as ArrayRef)
    });
    call(name, "", DataType::Utf8, Nulls::FromArgs, args, k)
}

/// Refuses a regular-expression replacement whose result could pass the per-batch bound,
/// before it is built: each match becomes at most the template plus, per group reference,
/// the whole input.
fn check_replaced_size(re: &Regex, s: &str, template: &str, all: bool) -> Result<()> {
    let refs = template.matches('\\').count();
    let (len, tlen) = (s.len(), template.len());
    let bound = |matches: usize| {
        len.saturating_mul(1 + refs)
            .saturating_add(matches.saturating_mul(tlen))
    };
    let most_matches = if all { len + 1 } else { 1 };
    if bound(most_matches) <= 1 << 20 {
        return Ok(());
    }
    let matches = if all { re.find_iter(s).count() } else { 1 };
    if bound(matches) > budget::MAX_BATCH_BYTES {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "replacing {matches} matches in a string of {len} bytes could produce more than {} MiB",
            budget::MAX_BATCH_BYTES >> 20
        )));
    }
    Ok(())
}

/// Length of `s` with every `from` replaced by `to` (at most `limit` times).
fn replaced_len(s: &str, from: &str, to: &str, limit: usize) -> usize {
    if from.is_empty() || to.len() <= from.len() {
        return s.len();
    }
    let n = s.matches(from).take(limit).count();
    s.len()
        .saturating_add(n.saturating_mul(to.len() - from.len()))
}

/// A per-row function of string arguments (all cast to strings); NULL when any is.
fn strs_fn<T: OutBytes + Send + Sync + 'static>(
    name: &str,
    key: String,
    ret: DataType,
    args: Vec<Expr>,
    build: fn(Vec<Option<T>>) -> ArrayRef,
    f: impl Fn(&[&str]) -> Option<T> + Send + Sync + 'static,
) -> Expr {
    let fname = name.to_string();
    let k = kernel(move |a, n| {
        let cols = a.iter().map(utf8).collect::<Result<Vec<_>>>()?;
        let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
        let mut budget = Output::new(&fname);
        let mut out = Vec::with_capacity(n);
        let mut row: Vec<&str> = Vec::with_capacity(cols.len());
        for r in 0..n {
            row.clear();
            if cols.iter().any(|c| c.is_null(r)) {
                out.push(None);
                continue;
            }
            row.extend(cols.iter().map(|c| c.value(r)));
            let v = f(&row);
            // These functions make at most a small multiple of their input per row; nested
            // ones (hex(hex(…)), base64Encode(…)) are bounded per batch here.
            budget.take(v.as_ref().map_or(0, OutBytes::out_bytes))?;
            out.push(v);
        }
        Ok(build(out))
    });
    call(name, key, ret, Nulls::FromArgs, args, k)
}

fn build_str(v: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}

fn build_u8(v: Vec<Option<u8>>) -> ArrayRef {
    Arc::new(datafusion::arrow::array::UInt8Array::from(v))
}

fn utf8_array(a: &ArrayRef) -> Result<ArrayRef> {
    utf8(a)
}

/// XML entities: the five named ones and numeric `&#N;` / `&#xH;`; anything else is kept.
fn decode_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail.find(';').filter(|e| *e <= 12);
        let decoded = end.and_then(|e| {
            let ent = &tail[1..e];
            let c = match ent {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = ent.strip_prefix('#')?;
                    let v = match num.strip_prefix(['x', 'X']) {
                        Some(h) => u32::from_str_radix(h, 16).ok()?,
                        None => num.parse::<u32>().ok()?,
                    };
                    char::from_u32(v)
                }
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &tail[e + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn build_u64(v: Vec<Option<u64>>) -> ArrayRef {
    Arc::new(UInt64Array::from(v))
}

fn build_bool(v: Vec<Option<bool>>) -> ArrayRef {
    Arc::new(BooleanArray::from(v))
}

fn build_list(v: Vec<Option<Vec<String>>>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for row in v {
        match row {
            Some(items) => {
                for i in items {
                    b.values().append_value(i);
                }
                b.append(true);
            }
            None => b.append(false),
        }
    }
    Arc::new(b.finish())
}

pub(crate) fn list_of_strings() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

/// Bytes `[start, end)` of `s` as a string (invalid UTF-8 at the cut is replaced).
fn bytes_str(s: &str, start: usize, end: usize) -> String {
    let b = &s.as_bytes()[start.min(s.len())..end.min(s.len()).max(start.min(s.len()))];
    String::from_utf8_lossy(b).into_owned()
}

/// ClickHouse's substring window over `len` units: 1-based offset (negative counts from
/// the end, 0 is empty), optional length (negative leaves that many off the end).
fn window(len: i64, offset: i64, length: Option<i64>) -> (usize, usize) {
    if offset == 0 {
        return (0, 0);
    }
    let start = if offset > 0 { offset - 1 } else { len + offset };
    let end = match length {
        None => len,
        Some(l) if l >= 0 => start.saturating_add(l),
        Some(l) => len + l,
    };
    let (s, e) = (start.clamp(0, len), end.clamp(0, len));
    if e <= s || start >= len {
        (0, 0)
    } else {
        (s as usize, e as usize)
    }
}

fn char_slice(s: &str, start: usize, end: usize) -> String {
    s.chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

/// ClickHouse replacement strings: `\0`..`\9` are groups, `\\` a backslash.
fn rust_replacement(r: &str) -> String {
    let mut out = String::new();
    let mut it = r.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.peek() {
                Some(d) if d.is_ascii_digit() => {
                    out.push_str(&format!("${{{d}}}"));
                    it.next();
                }
                Some('\\') => {
                    out.push('\\');
                    it.next();
                }
                _ => out.push('\\'),
            },
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

fn regex_of(p: &str) -> Result<Regex> {
    Regex::new(p)
        .map_err(|e| DataFusionError::Execution(format!("Invalid regular expression: {e}")))
}

/// Compiles constant patterns once; others per row.
fn cached_regex(cache: &mut Option<(String, Regex)>, p: &str) -> Result<Regex> {
    if let Some((k, r)) = cache
        && k == p
    {
        return Ok(r.clone());
    }
    let r = regex_of(p)?;
    *cache = Some((p.to_string(), r.clone()));
    Ok(r)
}

fn regex_fn<T: OutBytes + Send + Sync + 'static>(
    name: &str,
    ret: DataType,
    args: Vec<Expr>,
    build: fn(Vec<Option<T>>) -> ArrayRef,
    f: impl Fn(&Regex, &[&str]) -> Result<Option<T>> + Send + Sync + 'static,
) -> Expr {
    let fname = name.to_string();
    let k = kernel(move |a, n| {
        let cols = a.iter().map(utf8).collect::<Result<Vec<_>>>()?;
        let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
        let mut cache = None;
        let mut budget = Output::new(&fname);
        let mut out = Vec::with_capacity(n);
        for r in 0..n {
            if cols.iter().any(|c| c.is_null(r)) {
                out.push(None);
                continue;
            }
            let row: Vec<&str> = cols.iter().map(|c| c.value(r)).collect();
            let re = cached_regex(&mut cache, row[1])?;
            let v = f(&re, &row)?;
            budget.take(v.as_ref().map_or(0, OutBytes::out_bytes))?;
            out.push(v);
        }
        Ok(build(out))
    });
    call(name, "", ret, Nulls::FromArgs, args, k)
}

fn ascii_find(h: &str, n: &str, from: usize, ci: bool) -> Option<usize> {
    if from > h.len() {
        return None;
    }
    if n.is_empty() {
        return Some(from);
    }
    let (hb, nb) = (h.as_bytes(), n.as_bytes());
    (from..=hb.len().saturating_sub(nb.len())).find(|&i| {
        i + nb.len() <= hb.len()
            && if ci {
                hb[i..i + nb.len()].eq_ignore_ascii_case(nb)
            } else {
                &hb[i..i + nb.len()] == nb
            }
    })
}

/// `position(haystack, needle[, start])`: 1-based byte (or character) position, 0 if absent.
fn position(name: &str, args: Vec<Expr>, ci: bool, utf8_chars: bool) -> Expr {
    let k = kernel(move |a, n| {
        let h = utf8(&a[0])?;
        let nd = utf8(&a[1])?;
        let (h, nd) = (h.as_string::<i32>(), nd.as_string::<i32>());
        let start = a.get(2).map(int64).transpose()?;
        let start = start.as_ref().map(|s| s.as_primitive::<Int64Type>());
        let out: UInt64Array = (0..n)
            .map(|r| {
                if h.is_null(r) || nd.is_null(r) || start.is_some_and(|s| s.is_null(r)) {
                    return None;
                }
                let (hs, ns) = (h.value(r), nd.value(r));
                let st = start.map(|s| s.value(r)).unwrap_or(1).max(1) as usize - 1;
                Some(if utf8_chars {
                    let from = hs
                        .char_indices()
                        .nth(st)
                        .map(|(b, _)| b)
                        .unwrap_or(hs.len());
                    if st > hs.chars().count() {
                        0
                    } else {
                        match ascii_find(hs, ns, from, ci) {
                            Some(b) => hs[..b].chars().count() as u64 + 1,
                            None => 0,
                        }
                    }
                } else {
                    ascii_find(hs, ns, st, ci)
                        .map(|b| b as u64 + 1)
                        .unwrap_or(0)
                })
            })
            .collect();
        Ok(Arc::new(out) as ArrayRef)
    });
    call(
        name,
        format!("{ci}/{utf8_chars}"),
        DataType::UInt64,
        Nulls::FromArgs,
        args,
        k,
    )
}

fn split(name: &str, mut args: Vec<Expr>, by_char: bool) -> Result<Expr, FunctionError> {
    let max = match args.len() {
        3 => Some(
            super::datetime::const_int(&args.pop().expect("3 args")).ok_or_else(|| {
                invalid(format!(
                    "The max_substrings argument of `{name}` must be a constant"
                ))
            })?,
        ),
        _ => None,
    };
    Ok(strs_fn(
        name,
        format!("{by_char}/{max:?}"),
        list_of_strings(),
        args,
        build_list,
        move |v| {
            let (sep, s) = (v[0], v[1]);
            let mut parts: Vec<String> = if sep.is_empty() {
                s.chars().map(String::from).collect()
            } else {
                s.split(sep).map(String::from).collect()
            };
            if let Some(m) = max
                && m > 0
            {
                parts.truncate(m as usize);
            }
            Some(parts)
        },
    ))
}

fn pad(name: &str, args: Vec<Expr>, left: bool) -> Expr {
    pad_with(name, args, left, false)
}

/// `leftPad`/`rightPad` count bytes (as ClickHouse), the `UTF8` forms characters.
fn pad_with(name: &str, args: Vec<Expr>, left: bool, chars: bool) -> Expr {
    let fname = name.to_string();
    let k = kernel(move |a, n| {
        let s = utf8(&a[0])?;
        let s = s.as_string::<i32>();
        let l = int64(&a[1])?;
        let l = l.as_primitive::<Int64Type>();
        let p = a.get(2).map(utf8).transpose()?;
        let p = p.as_ref().map(|p| p.as_string::<i32>());
        let mut budget = Output::new(&fname);
        let mut out = StringBuilder::new();
        for r in 0..n {
            if s.is_null(r) || l.is_null(r) || p.is_some_and(|p| p.is_null(r)) {
                out.append_null();
                continue;
            }
            budget::check_pad(l.value(r))?;
            if chars {
                let sv: Vec<char> = s.value(r).chars().collect();
                let want = l.value(r).max(0) as usize;
                let pv: Vec<char> = p.map(|p| p.value(r)).unwrap_or(" ").chars().collect();
                if sv.len() >= want || pv.is_empty() {
                    out.append_value(sv[..want.min(sv.len())].iter().collect::<String>());
                    continue;
                }
                budget.take(want.saturating_mul(4))?;
                let fill: String = pv.iter().cycle().take(want - sv.len()).collect();
                let sv: String = sv.into_iter().collect();
                out.append_value(if left { fill + &sv } else { sv + &fill });
                continue;
            }
            let (sv, want) = (s.value(r).as_bytes(), l.value(r).max(0) as usize);
            let pv = p.map(|p| p.value(r)).unwrap_or(" ").as_bytes();
            if sv.len() >= want || pv.is_empty() {
                out.append_value(String::from_utf8_lossy(&sv[..want.min(sv.len())]));
                continue;
            }
            budget.take(want)?;
            let fill: Vec<u8> = pv.iter().cycle().take(want - sv.len()).copied().collect();
            let bytes = if left {
                [fill.as_slice(), sv].concat()
            } else {
                [sv, fill.as_slice()].concat()
            };
            out.append_value(String::from_utf8_lossy(&bytes));
        }
        Ok(Arc::new(out.finish()) as ArrayRef)
    });
    call_with(
        name,
        format!("{left}/{chars}"),
        DataType::Utf8,
        Nulls::FromArgs,
        args,
        k,
        Volatility::Volatile,
    )
}

/// `format(pattern, …)` as a chain of `||` (NULL in, NULL out) over the pattern's pieces.
fn format_pattern(pattern: &str, values: Vec<Expr>) -> Result<Expr, FunctionError> {
    use datafusion::logical_expr::{Operator, binary_expr, lit};
    let mut parts: Vec<Expr> = Vec::new();
    let mut text = String::new();
    let mut next = 0usize;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut index = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(d) if d.is_ascii_digit() => index.push(d),
                        _ => {
                            return Err(invalid("format: invalid pattern, expected '{}' or '{n}'"));
                        }
                    }
                }
                let i = if index.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    index
                        .parse::<usize>()
                        .map_err(|_| invalid("format: invalid argument index"))?
                };
                let Some(v) = values.get(i) else {
                    return Err(invalid(format!(
                        "format: the pattern refers to argument {i}, but only {} are given",
                        values.len()
                    )));
                };
                if !text.is_empty() {
                    parts.push(lit(std::mem::take(&mut text)));
                }
                parts.push(v.clone());
            }
            '}' => return Err(invalid("format: unmatched '}' in the pattern")),
            c => text.push(c),
        }
    }
    if !text.is_empty() || parts.is_empty() {
        parts.push(lit(text));
    }
    let mut it = parts.into_iter();
    let first = it.next().unwrap_or_else(|| lit(""));
    Ok(it.fold(first, |acc, p| binary_expr(acc, Operator::StringConcat, p)))
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let one = |args: &mut Vec<Expr>| args.remove(0);
    Ok(match name {
        "lower" | "lcase" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            Some(v[0].to_ascii_lowercase())
        }),
        "upper" | "ucase" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            Some(v[0].to_ascii_uppercase())
        }),
        "lowerUTF8" => f::lower(one(&mut args)),
        "upperUTF8" => f::upper(one(&mut args)),
        "concat" => {
            // As PostHog prints it: every argument through ifNull(toString(x), ''), so a
            // NULL reads as '' and concat never answers NULL.
            let args = args
                .into_iter()
                .map(|a| {
                    super::convert::to_string_expr(a, None, ctx).map(|s| {
                        datafusion::functions::core::expr_fn::nvl(
                            s,
                            datafusion::logical_expr::lit(""),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            growing_fn(
                name,
                args,
                |v| v.iter().map(|s| s.len()).sum(),
                |v| v.concat(),
            )
        }
        "format" => {
            // ClickHouse's format(pattern, s0, s1, …): `{}` takes the next argument, `{n}`
            // the n-th (0-based), `{{` and `}}` are braces. A NULL argument makes it NULL.
            let pattern = super::lit_str(&args[0])
                .ok_or_else(|| invalid("format: the pattern must be a constant string"))?;
            let values = args
                .split_off(1)
                .into_iter()
                .map(|a| super::convert::to_string_expr(a, None, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            format_pattern(&pattern, values)?
        }
        "concatWithSeparator" | "concat_ws" => {
            let args = args
                .into_iter()
                .map(|a| super::convert::to_string_expr(a, None, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            growing_fn(
                name,
                args,
                |v| {
                    let parts: usize = v[1..].iter().map(|s| s.len()).sum();
                    parts.saturating_add(v[0].len().saturating_mul(v.len().saturating_sub(2)))
                },
                |v| v[1..].join(v[0]),
            )
        }
        "length" => {
            let a = one(&mut args);
            let ty = type_of(&a, ctx)?;
            match ty {
                DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
                    Expr::Cast(datafusion::logical_expr::Cast::new(
                        Box::new(datafusion::functions_nested::expr_fn::cardinality(a)),
                        DataType::UInt64,
                    ))
                }
                _ => strs_fn(
                    name,
                    String::new(),
                    DataType::UInt64,
                    vec![a],
                    build_u64,
                    |v| Some(v[0].len() as u64),
                ),
            }
        }
        "lengthUTF8" | "char_length" | "character_length" => strs_fn(
            name,
            String::new(),
            DataType::UInt64,
            args,
            build_u64,
            |v| Some(v[0].chars().count() as u64),
        ),
        "empty" | "notEmpty" => {
            let a = one(&mut args);
            let want_empty = name == "empty";
            match type_of(&a, ctx)? {
                DataType::List(_) | DataType::LargeList(_) => {
                    let n = datafusion::functions_nested::expr_fn::cardinality(a);
                    if want_empty {
                        n.eq(super::lit_i64(0)
                            .cast_to(&DataType::UInt64, ctx.schema)
                            .map_err(|e| invalid(e.to_string()))?)
                    } else {
                        n.gt(super::lit_i64(0)
                            .cast_to(&DataType::UInt64, ctx.schema)
                            .map_err(|e| invalid(e.to_string()))?)
                    }
                }
                _ => strs_fn(
                    name,
                    String::new(),
                    DataType::Boolean,
                    vec![a],
                    build_bool,
                    move |v| Some(v[0].is_empty() == want_empty),
                ),
            }
        }
        "substring" | "substr" | "mid" => str_ints(name, args, |s, v, _| {
            let (a, b) = window(s.len() as i64, v[0], v.get(1).copied());
            Ok(bytes_str(s, a, b))
        }),
        "substringUTF8" => str_ints(name, args, |s, v, _| {
            let len = s.chars().count() as i64;
            let (a, b) = window(len, v[0], v.get(1).copied());
            Ok(char_slice(s, a, b))
        }),
        // PostHog prints left/right as ClickHouse's left/right, which count bytes (a cut
        // inside a character leaves invalid UTF-8, read here as U+FFFD).
        "left" => str_ints(name, args, |s, v, _| {
            let n = v[0];
            let len = s.len() as i64;
            let end = if n >= 0 { n.min(len) } else { (len + n).max(0) };
            Ok(bytes_str(s, 0, end as usize))
        }),
        "right" => str_ints(name, args, |s, v, _| {
            let n = v[0];
            let len = s.len() as i64;
            if n == i64::MIN {
                // ClickHouse refuses the one count it cannot negate.
                return Err(DataFusionError::Execution(format!(
                    "Argument of function right is out of bound: {n}"
                )));
            }
            let start = if n >= 0 {
                (len - n).max(0)
            } else {
                (-n).min(len)
            };
            Ok(bytes_str(s, start as usize, len as usize))
        }),
        // trim(s[, chars]): without `chars`, spaces (ClickHouse's trim removes only ' ').
        "trim" | "trimBoth" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            let set = v.get(1).copied().unwrap_or(" ");
            Some(v[0].trim_matches(|c| set.contains(c)).to_string())
        }),
        "ltrim" | "trimLeft" => {
            strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
                let set = v.get(1).copied().unwrap_or(" ");
                Some(v[0].trim_start_matches(|c| set.contains(c)).to_string())
            })
        }
        "rtrim" | "trimRight" => {
            strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
                let set = v.get(1).copied().unwrap_or(" ");
                Some(v[0].trim_end_matches(|c| set.contains(c)).to_string())
            })
        }
        "replaceOne" => growing_fn(
            name,
            args,
            |v| replaced_len(v[0], v[1], v[2], 1),
            |v| {
                if v[1].is_empty() {
                    v[0].to_string()
                } else {
                    v[0].replacen(v[1], v[2], 1)
                }
            },
        ),
        "replaceAll" | "replace" => growing_fn(
            name,
            args,
            |v| replaced_len(v[0], v[1], v[2], usize::MAX),
            |v| {
                if v[1].is_empty() {
                    v[0].to_string()
                } else {
                    v[0].replace(v[1], v[2])
                }
            },
        ),
        "replaceRegexpOne" | "replaceRegexpAll" | "regexp_replace" => {
            let all = name != "replaceRegexpOne";
            regex_fn(name, DataType::Utf8, args, build_str, move |re, v| {
                if re.as_str().is_empty() {
                    return Ok(Some(v[0].to_string()));
                }
                let rep = rust_replacement(v[2]);
                check_replaced_size(re, v[0], v[2], all)?;
                Ok(Some(if all {
                    re.replace_all(v[0], rep.as_str()).into_owned()
                } else {
                    re.replace(v[0], rep.as_str()).into_owned()
                }))
            })
        }
        "extract" => regex_fn(name, DataType::Utf8, args, build_str, |re, v| {
            Ok(Some(match re.captures(v[0]) {
                Some(c) => c
                    .get(if c.len() > 1 { 1 } else { 0 })
                    .map(|m| m.as_str().to_string())
                    .unwrap_or_default(),
                None => String::new(),
            }))
        }),
        // The group's match (group 1 by default, 0 the whole match), '' without a match.
        "regexpExtract" => regex_fn(name, DataType::Utf8, args, build_str, |re, v| {
            let group = v.get(2).and_then(|g| g.parse::<usize>().ok()).unwrap_or(1);
            Ok(Some(match re.captures(v[0]) {
                Some(c) if group < c.len() => c
                    .get(group)
                    .map(|m| m.as_str().to_string())
                    .unwrap_or_default(),
                Some(_) => {
                    return Err(datafusion::error::DataFusionError::Execution(format!(
                        "The index {group} of function regexpExtract is out of the pattern's groups"
                    )));
                }
                None => String::new(),
            }))
        }),
        "extractAll" => regex_fn(name, list_of_strings(), args, build_list, |re, v| {
            Ok(Some(
                re.captures_iter(v[0])
                    .map(|c| {
                        c.get(if c.len() > 1 { 1 } else { 0 })
                            .map(|m| m.as_str().to_string())
                            .unwrap_or_default()
                    })
                    .collect(),
            ))
        }),
        "match" => regex_fn(name, DataType::Boolean, args, build_bool, |re, v| {
            Ok(Some(re.is_match(v[0])))
        }),
        "like" | "ilike" | "notLike" | "notILike" => {
            let pattern = args.pop().expect("2 args");
            let expr = args.pop().expect("2 args");
            let negated = name.starts_with("not");
            let ci = name.to_ascii_lowercase().contains("ilike");
            Expr::Like(datafusion::logical_expr::Like::new(
                negated,
                Box::new(expr),
                Box::new(pattern),
                Some('\\'),
                ci,
            ))
        }
        "position" => position(name, args, false, false),
        "positionCaseInsensitive" => position(name, args, true, false),
        "positionUTF8" => position(name, args, false, true),
        "locate" => {
            // MySQL order: locate(needle, haystack[, start]).
            args.swap(0, 1);
            position(name, args, false, false)
        }
        "startsWith" => strs_fn(
            name,
            String::new(),
            DataType::Boolean,
            args,
            build_bool,
            |v| Some(v[0].starts_with(v[1])),
        ),
        "endsWith" => strs_fn(
            name,
            String::new(),
            DataType::Boolean,
            args,
            build_bool,
            |v| Some(v[0].ends_with(v[1])),
        ),
        "splitByChar" => split(name, args, true)?,
        "splitByString" => split(name, args, false)?,
        "reverse" => {
            let a = one(&mut args);
            match type_of(&a, ctx)? {
                DataType::List(_) | DataType::LargeList(_) => {
                    datafusion::functions_nested::expr_fn::array_reverse(a)
                }
                _ => strs_fn(
                    name,
                    String::new(),
                    DataType::Utf8,
                    vec![a],
                    build_str,
                    |v| {
                        let mut b = v[0].as_bytes().to_vec();
                        b.reverse();
                        Some(String::from_utf8_lossy(&b).into_owned())
                    },
                ),
            }
        }
        "reverseUTF8" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            Some(v[0].chars().rev().collect())
        }),
        "repeat" => str_ints(name, args, |s, v, budget| {
            budget::check_repeat(v[0])?;
            let times = v[0].max(0) as usize;
            budget.take(s.len().saturating_mul(times))?;
            Ok(s.repeat(times))
        }),
        // The first byte's code, 0 for ''.
        "ascii" => {
            let a = strs_fn(
                name,
                String::new(),
                DataType::UInt64,
                args,
                build_u64,
                |v| Some(v[0].bytes().next().map_or(0, u64::from)),
            );
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(a),
                DataType::Int32,
            ))
        }
        "appendTrailingCharIfAbsent" => {
            strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
                Some(if v[0].is_empty() || v[0].ends_with(v[1]) {
                    v[0].to_string()
                } else {
                    format!("{}{}", v[0], v[1])
                })
            })
        }
        // Non-overlapping occurrences, from a 1-based byte position when given.
        "countSubstrings" => strs_fn(
            name,
            String::new(),
            DataType::UInt64,
            args,
            build_u64,
            |v| {
                let from = v
                    .get(2)
                    .and_then(|p| p.parse::<usize>().ok())
                    .unwrap_or(1)
                    .max(1)
                    - 1;
                let h = v[0].get(from..).unwrap_or("");
                Some(if v[1].is_empty() {
                    0
                } else {
                    h.matches(v[1]).count() as u64
                })
            },
        ),
        // Words split at ASCII whitespace / at bytes that are not ASCII letters or digits,
        // at most `max` of them when given.
        "splitByWhitespace" | "splitByNonAlpha" => {
            let alpha = name == "splitByNonAlpha";
            strs_fn(
                name,
                String::new(),
                list_of_strings(),
                args,
                build_list,
                move |v| {
                    let max = v
                        .get(1)
                        .and_then(|m| m.parse::<i64>().ok())
                        .filter(|m| *m > 0);
                    let words = v[0]
                        .split(|c: char| {
                            if alpha {
                                c.is_ascii() && !c.is_ascii_alphanumeric()
                            } else {
                                c.is_ascii_whitespace()
                            }
                        })
                        .filter(|w| !w.is_empty())
                        .map(str::to_string);
                    Some(match max {
                        Some(m) => words.take(m as usize).collect(),
                        None => words.collect(),
                    })
                },
            )
        }
        "leftPadUTF8" => pad_with(name, args, true, true),
        "rightPadUTF8" => pad_with(name, args, false, true),
        "leftPad" | "lpad" => pad(name, args, true),
        "rightPad" | "rpad" => pad(name, args, false),
        // Case-insensitive counts: ASCII letters only, or every character (…UTF8).
        "countSubstringsCaseInsensitive" | "countSubstringsCaseInsensitiveUTF8" => {
            let utf8 = name.ends_with("UTF8");
            strs_fn(
                name,
                String::new(),
                DataType::UInt64,
                args,
                build_u64,
                move |v| {
                    let fold = |x: &str| {
                        if utf8 {
                            x.to_lowercase()
                        } else {
                            x.to_ascii_lowercase()
                        }
                    };
                    let (h, n) = (fold(v[0]), fold(v[1]));
                    let from = v
                        .get(2)
                        .and_then(|p| p.parse::<usize>().ok())
                        .unwrap_or(1)
                        .max(1)
                        - 1;
                    let h = h.get(from..).unwrap_or("");
                    Some(if n.is_empty() {
                        0
                    } else {
                        h.matches(n.as_str()).count() as u64
                    })
                },
            )
        }
        // Non-overlapping matches of a regular expression (an empty match advances by one).
        "countMatches" => regex_fn(name, DataType::UInt64, args, build_u64, |re, v| {
            Ok(Some(re.find_iter(v[0]).count() as u64))
        }),
        // A backslash before each of \0 \ | ( ) ^ $ . [ ] ? * + { : - (ClickHouse's list).
        "regexpQuoteMeta" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            let mut out = String::with_capacity(v[0].len());
            for c in v[0].chars() {
                match c {
                    '\0' => out.push_str("\\0"),
                    '\\' | '|' | '(' | ')' | '^' | '$' | '.' | '[' | ']' | '?' | '*' | '+'
                    | '{' | ':' | '-' => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            Some(out)
        }),
        // Each character of `from` becomes the one at its place in `to`; characters of
        // `from` past the end of `to` are deleted. translate is for ASCII (ClickHouse refuses
        // other bytes in from/to), translateUTF8 maps characters.
        "translate" | "translateUTF8" => {
            let utf8 = name == "translateUTF8";
            let k = kernel(move |a, n| {
                let cols = a.iter().map(utf8_array).collect::<Result<Vec<_>>>()?;
                let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
                let mut out = Vec::with_capacity(n);
                for r in 0..n {
                    if cols.iter().any(|c| c.is_null(r)) {
                        out.push(None);
                        continue;
                    }
                    let (s, from, to) = (cols[0].value(r), cols[1].value(r), cols[2].value(r));
                    if !(utf8 || from.is_ascii() && to.is_ascii()) {
                        return Err(DataFusionError::Execution(
                            "translate: the from and to strings must be ASCII (use translateUTF8)"
                                .into(),
                        ));
                    }
                    let to: Vec<char> = to.chars().collect();
                    let map: Vec<(char, Option<char>)> = from
                        .chars()
                        .enumerate()
                        .map(|(i, c)| (c, to.get(i).copied()))
                        .collect();
                    let mut o = String::with_capacity(s.len());
                    for c in s.chars() {
                        match map.iter().find(|(f, _)| *f == c) {
                            Some((_, Some(t))) => o.push(*t),
                            Some((_, None)) => {}
                            None => o.push(c),
                        }
                    }
                    out.push(Some(o));
                }
                Ok(build_str(out))
            });
            call(name, "", DataType::Utf8, Nulls::FromArgs, args, k)
        }
        // hedgerow's strings are UTF-8 (invalid bytes were read as U+FFFD).
        "isValidUTF8" => strs_fn(name, String::new(), DataType::UInt8, args, build_u8, |_| {
            Some(1)
        }),
        "toValidUTF8" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            Some(v[0].to_string())
        }),
        "encodeXMLComponent" => {
            strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
                let mut out = String::with_capacity(v[0].len());
                for c in v[0].chars() {
                    match c {
                        '<' => out.push_str("&lt;"),
                        '>' => out.push_str("&gt;"),
                        '&' => out.push_str("&amp;"),
                        '"' => out.push_str("&quot;"),
                        '\'' => out.push_str("&apos;"),
                        c => out.push(c),
                    }
                }
                Some(out)
            })
        }
        "decodeXMLComponent" => {
            strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
                Some(decode_xml(v[0]))
            })
        }
        // Runs of ASCII letters, at most `max` of them when given.
        "alphaTokens" => strs_fn(
            name,
            String::new(),
            list_of_strings(),
            args,
            build_list,
            |v| {
                let max = v
                    .get(1)
                    .and_then(|m| m.parse::<i64>().ok())
                    .filter(|m| *m > 0);
                let words = v[0]
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .filter(|w| !w.is_empty())
                    .map(str::to_string);
                Some(match max {
                    Some(m) => words.take(m as usize).collect(),
                    None => words.collect(),
                })
            },
        ),
        // splitByRegexp(re, s[, max]): the pieces between matches; an empty expression splits
        // into characters.
        "splitByRegexp" => {
            let k = kernel(move |a, n| {
                let cols = a.iter().map(utf8_array).collect::<Result<Vec<_>>>()?;
                let cols: Vec<_> = cols.iter().map(|c| c.as_string::<i32>()).collect();
                let mut cache = None;
                let mut out = Vec::with_capacity(n);
                for r in 0..n {
                    if cols.iter().any(|c| c.is_null(r)) {
                        out.push(None);
                        continue;
                    }
                    let (p, s) = (cols[0].value(r), cols[1].value(r));
                    let max = cols
                        .get(2)
                        .and_then(|m| m.value(r).parse::<i64>().ok())
                        .filter(|m| *m > 0)
                        .map(|m| m as usize);
                    let mut parts: Vec<String> = if p.is_empty() {
                        s.chars().map(String::from).collect()
                    } else {
                        let re = cached_regex(&mut cache, p)?;
                        re.split(s).map(str::to_string).collect()
                    };
                    if let Some(m) = max {
                        parts.truncate(m);
                    }
                    out.push(Some(parts));
                }
                Ok(build_list(out))
            });
            call(name, "", list_of_strings(), Nulls::FromArgs, args, k)
        }
        // Case-insensitive (every character) 1-based character position, 0 if absent.
        "positionCaseInsensitiveUTF8" => {
            let k = kernel(move |a, n| {
                let h = utf8(&a[0])?;
                let nd = utf8(&a[1])?;
                let (h, nd) = (h.as_string::<i32>(), nd.as_string::<i32>());
                let out: UInt64Array = (0..n)
                    .map(|r| {
                        if h.is_null(r) || nd.is_null(r) {
                            return None;
                        }
                        let hs: Vec<char> =
                            h.value(r).chars().flat_map(char::to_lowercase).collect();
                        let ns: Vec<char> =
                            nd.value(r).chars().flat_map(char::to_lowercase).collect();
                        if ns.is_empty() {
                            return Some(1);
                        }
                        Some(
                            hs.windows(ns.len())
                                .position(|w| w == ns.as_slice())
                                .map_or(0, |p| p as u64 + 1),
                        )
                    })
                    .collect();
                Ok(Arc::new(out) as ArrayRef)
            });
            call(name, "", DataType::UInt64, Nulls::FromArgs, args, k)
        }
        // Searches for several needles (a constant array) at once: any found, the first
        // needle (in the array's order) found, the leftmost position of any, each one's
        // 1-based byte position; multiMatchAny with regular expressions.
        "multiSearchAny"
        | "multiSearchFirstIndex"
        | "multiSearchFirstPosition"
        | "multiSearchAllPositions"
        | "multiMatchAny" => {
            let t = type_of(&args[1], ctx)?;
            if !matches!(t, DataType::List(_) | DataType::LargeList(_)) {
                return Err(invalid(format!(
                    "The second argument of `{name}` must be an array of strings, got {t}"
                )));
            }
            let mut args = args;
            let needles = args.pop().expect("2 args");
            args.push(
                needles
                    .cast_to(&list_of_strings(), ctx.schema)
                    .map_err(|e| invalid(e.to_string()))?,
            );
            let which = name.to_string();
            let (ret, build_list_out) = match name {
                "multiSearchAllPositions" => (
                    DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
                    true,
                ),
                "multiSearchAny" | "multiMatchAny" => (DataType::UInt8, false),
                _ => (DataType::UInt64, false),
            };
            let k = kernel(move |a, n| {
                let h = utf8(&a[0])?;
                let h = h.as_string::<i32>();
                let l = a[1].as_list::<i32>();
                let vals = utf8(l.values())?;
                let vals = vals.as_string::<i32>();
                let offs = l.value_offsets();
                let mut scalars: Vec<Option<u64>> = Vec::with_capacity(n);
                let mut lists: Vec<Option<Vec<u64>>> = Vec::with_capacity(n);
                let mut cache: Vec<Option<Regex>> = Vec::new();
                for r in 0..n {
                    if h.is_null(r) || l.is_null(r) {
                        scalars.push(None);
                        lists.push(None);
                        continue;
                    }
                    let hs = h.value(r);
                    let needles: Vec<&str> = (offs[r] as usize..offs[r + 1] as usize)
                        .map(|j| vals.value(j))
                        .collect();
                    let pos = |nd: &str| hs.find(nd).map_or(0, |b| b as u64 + 1);
                    match which.as_str() {
                        "multiSearchAllPositions" => {
                            lists.push(Some(needles.iter().map(|nd| pos(nd)).collect()));
                            scalars.push(None);
                        }
                        "multiSearchAny" => {
                            scalars.push(Some(u64::from(needles.iter().any(|nd| pos(nd) > 0))));
                        }
                        "multiSearchFirstIndex" => scalars.push(Some(
                            needles
                                .iter()
                                .position(|nd| pos(nd) > 0)
                                .map_or(0, |i| i as u64 + 1),
                        )),
                        "multiSearchFirstPosition" => scalars.push(Some(
                            needles
                                .iter()
                                .map(|nd| pos(nd))
                                .filter(|p| *p > 0)
                                .min()
                                .unwrap_or(0),
                        )),
                        _ => {
                            if cache.len() != needles.len() {
                                cache = needles
                                    .iter()
                                    .map(|p| regex_of(p).map(Some))
                                    .collect::<Result<Vec<_>>>()?;
                            }
                            let mut any = false;
                            for (i, p) in needles.iter().enumerate() {
                                let re = match &cache[i] {
                                    Some(re) if re.as_str() == *p => re.clone(),
                                    _ => {
                                        let re = regex_of(p)?;
                                        cache[i] = Some(re.clone());
                                        re
                                    }
                                };
                                if re.is_match(hs) {
                                    any = true;
                                    break;
                                }
                            }
                            scalars.push(Some(u64::from(any)));
                        }
                    }
                }
                Ok(if build_list_out {
                    let mut b = datafusion::arrow::array::ListBuilder::new(
                        datafusion::arrow::array::UInt64Builder::new(),
                    );
                    for row in lists {
                        match row {
                            Some(items) => {
                                b.values().append_slice(&items);
                                b.append(true);
                            }
                            None => b.append(false),
                        }
                    }
                    Arc::new(b.finish()) as ArrayRef
                } else if which == "multiSearchAny" || which == "multiMatchAny" {
                    Arc::new(datafusion::arrow::array::UInt8Array::from(
                        scalars
                            .into_iter()
                            .map(|v| v.map(|v| v as u8))
                            .collect::<Vec<_>>(),
                    )) as ArrayRef
                } else {
                    Arc::new(UInt64Array::from(scalars)) as ArrayRef
                })
            });
            call(name, "", ret, Nulls::FromArgs, args, k)
        }
        "base64Encode" => strs_fn(name, String::new(), DataType::Utf8, args, build_str, |v| {
            Some(base64::engine::general_purpose::STANDARD.encode(v[0]))
        }),
        // Whitespace inside the text is skipped, as ClickHouse; text that is not base64 fails
        // base64Decode ("Invalid base64Decode value") and gives '' from tryBase64Decode.
        "base64Decode" | "tryBase64Decode" => {
            let strict = name == "base64Decode";
            let k = kernel(move |a, _n| {
                let s = utf8(&a[0])?;
                let mut b = datafusion::arrow::array::StringBuilder::new();
                for v in s.as_string::<i32>().iter() {
                    let Some(v) = v else {
                        b.append_null();
                        continue;
                    };
                    let text: String = v.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                    match base64::engine::general_purpose::STANDARD.decode(&text) {
                        Ok(d) => b.append_value(String::from_utf8_lossy(&d)),
                        Err(_) if strict => {
                            return Err(DataFusionError::Execution(format!(
                                "Invalid base64Decode value ({v}), cannot be decoded"
                            )));
                        }
                        Err(_) => b.append_value(""),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            call(name, "", DataType::Utf8, Nulls::FromArgs, args, k)
        }
        _ => return Err(FunctionError::Unknown(name.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::arrow::datatypes::DataType;
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Expr;

    #[test]
    fn strings_like_clickhouse() {
        check(vec![
            (call("substring", vec![s("hello"), i(2), i(100)]), "ello"),
            (call("substring", vec![s("hello"), i(2), i(2)]), "el"),
            (call("substring", vec![s("hello"), i(-3), i(3)]), "llo"),
            (call("substring", vec![s("hello"), i(-3), i(2)]), "ll"),
            (call("substring", vec![s("hello"), i(0), i(1)]), ""),
            (call("substring", vec![s("hello"), i(10), i(1)]), ""),
            (call("substring", vec![s("hello"), i(2), i(-1)]), "ell"),
            (call("substring", vec![s("hello"), i(-10), i(3)]), ""),
            (call("substringUTF8", vec![s("héllo"), i(2), i(2)]), "él"),
            (call("left", vec![s("hello"), i(2)]), "he"),
            (call("left", vec![s("hello"), i(-2)]), "hel"),
            (call("right", vec![s("hello"), i(2)]), "lo"),
            (call("right", vec![s("hello"), i(-2)]), "llo"),
            // bytes, as ClickHouse's left/right
            (call("left", vec![s("Grüße"), i(4)]), "Grü"),
            (call("left", vec![s("Grüße"), i(3)]), "Gr\u{fffd}"),
            (call("right", vec![s("日本語"), i(6)]), "本語"),
            (call("trim", vec![s("xxhixx"), s("x")]), "hi"),
            (call("ltrim", vec![s("xyhi"), s("yx")]), "hi"),
            (call("rtrim", vec![s("  hi  ")]), "  hi"),
            (call("trim", vec![s("  a b \t")]), "a b \t"),
            (call("ltrim", vec![s("  a ")]), "a "),
            (call("rtrim", vec![s("  a ")]), "  a"),
            // PostHog prints concat(x) arguments as ifNull(toString(x), '').
            (call("concat", vec![s("a"), null(), s("b")]), "ab"),
            (call("concat", vec![s("a"), i(1), fl(2.5)]), "a12.5"),
            (
                call("concatWithSeparator", vec![s("-"), s("a"), s("b")]),
                "a-b",
            ),
            (call("position", vec![s("hello"), s("l")]), "3"),
            (call("position", vec![s("hello"), s("")]), "1"),
            (call("position", vec![s("hello"), s("l"), i(4)]), "4"),
            (call("position", vec![s("hello"), s("z")]), "0"),
            (call("locate", vec![s("l"), s("hello")]), "3"),
            (
                call("positionCaseInsensitive", vec![s("HELLO"), s("l")]),
                "3",
            ),
            (call("position", vec![s("héllo"), s("l")]), "4"),
            (call("positionUTF8", vec![s("héllo"), s("l")]), "3"),
            (call("lower", vec![s("ÉA")]), "Éa"),
            (call("lowerUTF8", vec![s("ÉA")]), "éa"),
            (call("upper", vec![s("héllo")]), "HéLLO"),
            (call("length", vec![s("héllo")]), "6"),
            (call("lengthUTF8", vec![s("héllo")]), "5"),
            (call("reverse", vec![s("abc")]), "cba"),
            (call("leftPad", vec![s("abc"), i(5)]), "  abc"),
            (call("leftPad", vec![s("abc"), i(2)]), "ab"),
            (call("rightPad", vec![s("abc"), i(6), s("xy")]), "abcxyx"),
            (call("replaceOne", vec![s("aaa"), s("a"), s("b")]), "baa"),
            (call("replaceAll", vec![s("aaa"), s(""), s("b")]), "aaa"),
            (call("replace", vec![s("aaa"), s("a"), s("b")]), "bbb"),
            (
                call(
                    "replaceRegexpOne",
                    vec![s("abc-abc"), s("(b)(c)"), s("\\2\\1")],
                ),
                "acb-abc",
            ),
            (
                call("replaceRegexpAll", vec![s("abc-abc"), s("b"), s("[\\0]")]),
                "a[b]c-a[b]c",
            ),
            (
                call("replaceRegexpAll", vec![s("abc"), s(""), s("x")]),
                "abc",
            ),
            (call("extract", vec![s("foo123bar456"), s("\\d+")]), "123"),
            (call("extract", vec![s("foo123bar456"), s("o(\\d)")]), "1"),
            (call("extract", vec![s("abc"), s("z")]), ""),
            (
                call("extractAll", vec![s("foo123bar456"), s("\\d+")]),
                "[123, 456]",
            ),
            (
                call("extractAll", vec![s("a1b2"), s("([a-z])\\d")]),
                "[a, b]",
            ),
            (call("match", vec![s("abc"), s("^a")]), "true"),
            (call("like", vec![s("abc"), s("a%")]), "true"),
            (call("ilike", vec![s("ABC"), s("a%")]), "true"),
            (call("notLike", vec![s("abc"), s("a%")]), "false"),
            (call("notILike", vec![s("ABC"), s("b%")]), "true"),
            (
                call("splitByChar", vec![s(","), s("a,b,,c")]),
                "[a, b, , c]",
            ),
            (
                call("splitByChar", vec![s(","), s("a,b,c"), i(2)]),
                "[a, b]",
            ),
            (
                call("splitByString", vec![s(", "), s("a, b, c")]),
                "[a, b, c]",
            ),
            (call("splitByString", vec![s(""), s("abc")]), "[a, b, c]"),
            (call("repeat", vec![s("ab"), i(3)]), "ababab"),
            (call("repeat", vec![s("ab"), i(0)]), ""),
            (call("base64Encode", vec![s("hello")]), "aGVsbG8="),
            (call("base64Decode", vec![s("aGVsbG8=")]), "hello"),
            (call("tryBase64Decode", vec![s("!!")]), ""),
            (call("tryBase64Decode", vec![s("aGk")]), ""),
            (call("base64Decode", vec![s("aG k=\n")]), "hi"),
            (call("empty", vec![s("")]), "true"),
            (call("notEmpty", vec![s("a")]), "true"),
            (call("startsWith", vec![s("abc"), s("")]), "true"),
            (call("endsWith", vec![s("abc"), s("bc")]), "true"),
        ]);
        let arr = Expr::Literal(
            ScalarValue::List(ScalarValue::new_list_nullable(
                &[
                    ScalarValue::Int64(Some(1)),
                    ScalarValue::Int64(Some(2)),
                    ScalarValue::Int64(Some(3)),
                ],
                &DataType::Int64,
            )),
            None,
        );
        check(vec![(call("length", vec![arr]), "3")]);
        assert_eq!(typ(call("length", vec![s("a")])), DataType::UInt64);
        assert_eq!(
            rows(call("upper", vec![c("s")])),
            ["HELLO", "", "HéLLO WöRLD", "\\N"]
        );
        assert_eq!(rows(call("length", vec![c("s")])), ["5", "0", "13", "\\N"]);
        assert_eq!(
            rows(call("concat", vec![c("s"), s("!")])),
            ["Hello!", "!", "héllo wörld!", "!"]
        );
    }
}
