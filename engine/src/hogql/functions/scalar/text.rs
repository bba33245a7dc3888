//! More string functions, as ClickHouse answers them:
//! - `ngrams(s, n)`: the n-character (UTF-8) substrings at each position; n at least 1.
//! - `tokens(s[, tokenizer[, param]])`: by default (`splitByNonAlpha`) the runs of ASCII
//!   letters and digits and non-ASCII bytes; `array` the whole text, `ngrams` n-character
//!   grams, `splitByString` the pieces between separators.
//! - `extractAllGroups(s, re)` (= `extractAllGroupsVertical`): per match, its groups (an
//!   unmatched group is ''); `extractAllGroupsHorizontal`: per group, its values in every
//!   match. Matches are searched from where the previous one ended (one past an empty one)
//!   while that is before the end; a pattern without groups is an error.
//! - `multiMatchAnyIndex(s, [re…])`: the 1-based index of the pattern whose earliest match
//!   ends first (the lower index on a tie), 0 for none; `multiMatchAllIndices` every
//!   matching index in that order (Hyperscan's order of reports).
//! - `multiSearchAllPositionsUTF8(s, [needle…])`: each needle's first position in
//!   characters (1-based, 0 when absent).
//! - `formatReadableTimeDelta(seconds[, max_unit[, min_unit]])`: years of 365 days and
//!   months of 30.5 days down to nanoseconds; zero units left out but for "0 seconds" when
//!   nothing larger is shown.
//! - `bar(x, min, max[, width])`: a bar of `█` with eighths (`▏`…`▉`) for the fraction,
//!   rounded down, x clamped to [min, max], width 1 to 1000 (80 by default).
//! - `extractTextFromHTML`, `ngramDistance`/`ngramSearch` and the `multiFuzzyMatch*` family
//!   (literal patterns only; a pattern with regex syntax is refused by name): see their
//!   functions below.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, ListBuilder, StringBuilder, UInt64Builder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, ExprSchemable};
use regex::Regex;

use super::udf::{Nulls, call};
use super::{FnContext, FunctionError, invalid, is_string, lit_str, type_of};
use crate::hogql::functions::budget::Output;

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", t, true)))
}

fn exec(msg: impl Into<String>) -> DataFusionError {
    DataFusionError::Execution(msg.into())
}

fn need_string(name: &str, e: &Expr, ctx: &FnContext<'_>) -> Result<(), FunctionError> {
    let t = type_of(e, ctx)?;
    if is_string(&t) || t == DataType::Null {
        Ok(())
    } else {
        Err(invalid(format!(
            "Illegal type {t} of argument of function `{name}`, expected a String"
        )))
    }
}

fn need_number(name: &str, e: &Expr, ctx: &FnContext<'_>) -> Result<(), FunctionError> {
    let t = type_of(e, ctx)?;
    if t.is_numeric() || matches!(t, DataType::Null | DataType::Boolean) {
        Ok(())
    } else {
        Err(invalid(format!(
            "Illegal type {t} of argument of function `{name}`, expected a number"
        )))
    }
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    match name {
        "ngrams" => {
            need_string(name, &args[0], ctx)?;
            let n = super::datetime::const_int(&args[1]).ok_or_else(|| {
                invalid("The ngram length of `ngrams` must be a constant integer")
            })?;
            if n < 1 {
                return Err(invalid(format!(
                    "Incorrect parameter of `ngrams`: ngram length must be at least 1, but got {n}"
                )));
            }
            let n = n as usize;
            args.truncate(1);
            string_lists(name, format!("{n}"), args, move |s, out| {
                let starts: Vec<usize> =
                    s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
                for w in starts.windows(n + 1) {
                    out.push(&s[w[0]..w[n]]);
                }
            })
        }
        "tokens" => {
            need_string(name, &args[0], ctx)?;
            let tokenizer = match args.get(1) {
                None => "splitByNonAlpha".to_string(),
                Some(t) => lit_str(t).ok_or_else(|| {
                    invalid("The tokenizer of `tokens` must be a constant string")
                })?,
            };
            let param = args.get(2).cloned();
            args.truncate(1);
            match tokenizer.as_str() {
                "splitByNonAlpha" if param.is_none() => {
                    string_lists(name, tokenizer, args, |s, out| {
                        let b = s.as_bytes();
                        let word = |c: u8| c.is_ascii_alphanumeric() || c >= 0x80;
                        let mut i = 0;
                        while i < b.len() {
                            if !word(b[i]) {
                                i += 1;
                                continue;
                            }
                            let start = i;
                            while i < b.len() && word(b[i]) {
                                i += 1;
                            }
                            out.push(&s[start..i]);
                        }
                    })
                }
                // The whole text as one token ('' as none).
                "array" if param.is_none() => string_lists(name, tokenizer, args, |s, out| {
                    if !s.is_empty() {
                        out.push(s);
                    }
                }),
                // n-character grams, 3 by default.
                "ngrams" => {
                    let n = match &param {
                        None => 3,
                        Some(p) => super::datetime::const_int(p).ok_or_else(|| {
                            invalid("The ngram length of `tokens` must be a constant integer")
                        })?,
                    };
                    if n < 1 {
                        return Err(invalid(format!(
                            "Incorrect parameter of tokenizer 'ngrams': ngram length must be at \
                             least 1, but got {n}"
                        )));
                    }
                    let n = n as usize;
                    string_lists(name, format!("ngrams/{n}"), args, move |s, out| {
                        let starts: Vec<usize> =
                            s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
                        for w in starts.windows(n + 1) {
                            out.push(&s[w[0]..w[n]]);
                        }
                    })
                }
                // Split at any of the separators (tried in their order; ' ' by default),
                // empty pieces left out.
                "splitByString" => {
                    let seps: Vec<String> = match &param {
                        None => vec![" ".to_string()],
                        Some(p) => const_strings(p).ok_or_else(|| {
                            invalid(
                                "The separators of `tokens(…, 'splitByString', …)` must be a \
                                 constant array of strings",
                            )
                        })?,
                    };
                    let key = format!("splitByString/{seps:?}");
                    string_lists(name, key, args, move |s, out| {
                        let mut start = 0;
                        let mut i = 0;
                        while i < s.len() {
                            match seps
                                .iter()
                                .find(|sep| !sep.is_empty() && s[i..].starts_with(sep.as_str()))
                            {
                                Some(sep) => {
                                    if i > start {
                                        out.push(&s[start..i]);
                                    }
                                    i += sep.len();
                                    start = i;
                                }
                                None => {
                                    i += s[i..].chars().next().map_or(1, char::len_utf8);
                                }
                            }
                        }
                        if s.len() > start {
                            out.push(&s[start..]);
                        }
                    })
                }
                t => Err(invalid(format!(
                    "hedgerow's `tokens` supports the tokenizers 'splitByNonAlpha', 'array', \
                     'ngrams' and 'splitByString', got '{t}'"
                ))),
            }
        }
        "extractAllGroups" | "extractAllGroupsVertical" | "extractAllGroupsHorizontal" => {
            need_string(name, &args[0], ctx)?;
            need_string(name, &args[1], ctx)?;
            if let Some(p) = lit_str(&args[1]) {
                let re = Regex::new(&p)
                    .map_err(|e| invalid(format!("Invalid regular expression: {e}")))?;
                if re.captures_len() < 2 {
                    return Err(invalid(format!("There are no groups in regexp: {p}")));
                }
            }
            extract_groups(name, args, name == "extractAllGroupsHorizontal")
        }
        "multiMatchAnyIndex" | "multiMatchAllIndices" | "multiSearchAllPositionsUTF8" => {
            need_string(name, &args[0], ctx)?;
            let t = type_of(&args[1], ctx)?;
            if !matches!(&t, DataType::List(f) if is_string(f.data_type())) {
                return Err(invalid(format!(
                    "The second argument of `{name}` must be an array of strings, got {t}"
                )));
            }
            let needles = args.pop().expect("2 args");
            args.push(
                needles
                    .cast_to(&list_of(DataType::Utf8), ctx.schema)
                    .map_err(|e| invalid(e.to_string()))?,
            );
            multi(name, args)
        }
        "formatReadableTimeDelta" => {
            need_number(name, &args[0], ctx)?;
            let unit = |i: usize, default: Unit| -> Result<Unit, FunctionError> {
                match args.get(i) {
                    None => Ok(default),
                    Some(e) => {
                        let s = lit_str(e).ok_or_else(|| {
                            invalid("The unit arguments of `formatReadableTimeDelta` must be constant strings")
                        })?;
                        Unit::parse(&s).ok_or_else(|| {
                            invalid(format!(
                                "Unexpected value of {} unit argument ({s}) for function \
                                 `formatReadableTimeDelta`, the allowed values are: 'nanoseconds', \
                                 'microseconds', 'milliseconds', 'seconds', 'minutes', 'hours', \
                                 'days', 'months', 'years'",
                                if i == 1 { "maximum" } else { "minimum" }
                            ))
                        })
                    }
                }
            };
            let max = unit(1, Unit::Years)?;
            let min = unit(2, Unit::Seconds)?;
            if min > max {
                return Err(invalid(format!(
                    "Explicitly specified value of minimum unit argument ({}) for function \
                     `formatReadableTimeDelta` must not be greater than maximum unit value ({})",
                    min.name(),
                    max.name()
                )));
            }
            args.truncate(1);
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let v = cast(&a[0], &DataType::Float64)?;
                let mut b = StringBuilder::new();
                for x in v.as_primitive::<Float64Type>().iter() {
                    match x {
                        Some(x) => b.append_value(time_delta(x, max, min)),
                        None => b.append_null(),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            Ok(call(
                name,
                format!("{max:?}/{min:?}"),
                DataType::Utf8,
                Nulls::FromFirst,
                args,
                k,
            ))
        }
        "bar" => {
            for a in &args {
                need_number(name, a, ctx)?;
            }
            let width = match args.get(3) {
                None => 80.0,
                Some(e) => {
                    let v = const_f64(e)
                        .ok_or_else(|| invalid("The width of `bar` must be a constant"))?;
                    if v < 1.0 {
                        return Err(invalid("Argument 'max_width' of `bar` must be >= 1"));
                    }
                    if v > 1000.0 {
                        return Err(invalid("Argument 'max_width' of `bar` must be <= 1000"));
                    }
                    v
                }
            };
            args.truncate(3);
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let cols = a
                    .iter()
                    .map(|c| cast(c, &DataType::Float64))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let cols: Vec<_> = cols
                    .iter()
                    .map(|c| c.as_primitive::<Float64Type>())
                    .collect();
                let mut b = StringBuilder::new();
                for r in 0..rows {
                    if cols.iter().any(|c| c.is_null(r)) {
                        b.append_null();
                        continue;
                    }
                    let (x, lo, hi) = (cols[0].value(r), cols[1].value(r), cols[2].value(r));
                    b.append_value(bar(x, lo, hi, width));
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            Ok(call(
                name,
                format!("{width}"),
                DataType::Utf8,
                Nulls::FromArgs,
                args,
                k,
            ))
        }
        "multiFuzzyMatchAny" | "multiFuzzyMatchAnyIndex" | "multiFuzzyMatchAllIndices" => {
            need_string(name, &args[0], ctx)?;
            let d = super::datetime::const_int(&args[1])
                .filter(|d| *d >= 0)
                .ok_or_else(|| {
                    invalid(format!(
                        "The distance argument of `{name}` must be a constant unsigned integer"
                    ))
                })? as usize;
            let t = type_of(&args[2], ctx)?;
            if !matches!(&t, DataType::List(f) if is_string(f.data_type())) {
                return Err(invalid(format!(
                    "The third argument of `{name}` must be an array of strings, got {t}"
                )));
            }
            let needles = args.pop().expect("3 args");
            let needles = needles
                .cast_to(&list_of(DataType::Utf8), ctx.schema)
                .map_err(|e| invalid(e.to_string()))?;
            let hay = args.swap_remove(0);
            fuzzy(name, vec![hay, needles], d)
        }
        "ngramDistance" | "ngramSearch" => {
            need_string(name, &args[0], ctx)?;
            need_string(name, &args[1], ctx)?;
            if lit_str(&args[1]).is_some_and(|n| n.len() > NGRAM_MAX) {
                return Err(invalid(format!(
                    "String size of needle is too big for function `{name}`. Should be at most \
                     {NGRAM_MAX}"
                )));
            }
            let search = name == "ngramSearch";
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let h = cast(&a[0], &DataType::Utf8)?;
                let n = cast(&a[1], &DataType::Utf8)?;
                let (h, n) = (h.as_string::<i32>(), n.as_string::<i32>());
                let v: datafusion::arrow::array::Float32Array = (0..rows)
                    .map(|r| {
                        if h.is_null(r) || n.is_null(r) {
                            return None;
                        }
                        Some(ngram_score(
                            h.value(r).as_bytes(),
                            n.value(r).as_bytes(),
                            search,
                        ))
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(name, "", DataType::Float32, Nulls::FromArgs, args, k))
        }
        "extractTextFromHTML" => {
            need_string(name, &args[0], ctx)?;
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let mut b = StringBuilder::new();
                for v in s.as_string::<i32>().iter() {
                    match v {
                        Some(v) => b.append_value(html_text(v)),
                        None => b.append_null(),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            Ok(call(name, "", DataType::Utf8, Nulls::FromFirst, args, k))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

/// Whether a pattern is a plain literal (no regex syntax): the only patterns hedgerow's
/// approximate matching reads.
fn literal_pattern(p: &str) -> bool {
    !p.contains([
        '.', '^', '$', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '\\',
    ])
}

/// The end (in bytes) of the earliest substring of `h` within edit distance `d` of `p`
/// (Levenshtein over bytes, as Hyperscan's approximate matching), by Sellers' algorithm.
fn fuzzy_end(h: &[u8], p: &[u8], d: usize) -> Option<usize> {
    let m = p.len();
    let mut col: Vec<usize> = (0..=m).collect();
    for (j, &c) in h.iter().enumerate() {
        let mut diag = col[0];
        col[0] = 0;
        for i in 1..=m {
            let up = col[i];
            col[i] = (diag + usize::from(p[i - 1] != c))
                .min(up + 1)
                .min(col[i - 1] + 1);
            diag = up;
        }
        if col[m] <= d {
            return Some(j + 1);
        }
    }
    None
}

/// multiFuzzyMatchAny / AnyIndex / AllIndices over literal patterns: a pattern matches where
/// a substring is within `d` edits; the indices in the order of the matches' earliest ends
/// (the lower index on a tie). A pattern no longer than `d` could match nothing and is an
/// error, as in Hyperscan.
fn fuzzy(name: &str, args: Vec<Expr>, d: usize) -> Result<Expr, FunctionError> {
    let which = name.to_string();
    let ret = match name {
        "multiFuzzyMatchAny" => DataType::UInt8,
        "multiFuzzyMatchAnyIndex" => DataType::UInt64,
        _ => list_of(DataType::UInt64),
    };
    let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        use datafusion::arrow::array::UInt8Builder;
        let h = cast(&a[0], &DataType::Utf8)?;
        let h = h.as_string::<i32>();
        let l = a[1].as_list::<i32>();
        let vals = cast(l.values(), &DataType::Utf8)?;
        let vals = vals.as_string::<i32>();
        let offs = l.value_offsets();
        let mut any = UInt8Builder::new();
        let mut index = UInt64Builder::new();
        let mut lists = ListBuilder::new(UInt64Builder::new());
        for r in 0..rows {
            if h.is_null(r) || l.is_null(r) {
                any.append_null();
                index.append_null();
                lists.append(false);
                continue;
            }
            let mut ends: Vec<(usize, u64)> = vec![];
            for (i, j) in (offs[r] as usize..offs[r + 1] as usize).enumerate() {
                let p = vals.value(j);
                if !literal_pattern(p) {
                    return Err(exec(format!(
                        "{which}: hedgerow supports literal patterns only, got '{p}'"
                    )));
                }
                if p.len() <= d {
                    return Err(exec(format!(
                        "{which}: pattern '{p}' failed: approximate matching patterns that \
                         reduce to vacuous patterns are disallowed"
                    )));
                }
                if let Some(e) = fuzzy_end(h.value(r).as_bytes(), p.as_bytes(), d) {
                    ends.push((e, i as u64 + 1));
                }
            }
            ends.sort_unstable();
            any.append_value(u8::from(!ends.is_empty()));
            index.append_value(ends.first().map_or(0, |e| e.1));
            for (_, i) in &ends {
                lists.values().append_value(*i);
            }
            lists.append(true);
        }
        Ok(match which.as_str() {
            "multiFuzzyMatchAny" => Arc::new(any.finish()) as ArrayRef,
            "multiFuzzyMatchAnyIndex" => Arc::new(index.finish()) as ArrayRef,
            _ => Arc::new(lists.finish()) as ArrayRef,
        })
    });
    Ok(call(name, format!("{d}"), ret, Nulls::FromArgs, args, k))
}

/// The longest string the ngram functions read (a longer one gives distance 1, search 0).
const NGRAM_MAX: usize = 1 << 15;

/// CRC-32C (Castagnoli), reflected, as the SSE4.2 instruction computes it (no final xor).
fn crc32c_u64(mut crc: u32, v: u64) -> u32 {
    for byte in v.to_le_bytes() {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// ClickHouse counts a string's 4-grams (bytes) by a 16-bit key, the low bits of the CRC-32C
/// of the gram read as a UInt64, so two grams with one key count as one (as there).
fn ngram_keys(s: &[u8]) -> impl Iterator<Item = u16> + '_ {
    s.windows(4).map(|g| {
        let v = u64::from(u32::from_le_bytes([g[0], g[1], g[2], g[3]]));
        (crc32c_u64(0xFFFF_FFFF, v) & 0xFFFF) as u16
    })
}

/// `ngramDistance`: the symmetric difference of the two multisets of 4-grams over their
/// total size (0 for two strings without grams); `ngramSearch`: the share of the needle's
/// grams found in the haystack (1 for a needle without grams).
fn ngram_score(h: &[u8], n: &[u8], search: bool) -> f32 {
    if h.len() > NGRAM_MAX || n.len() > NGRAM_MAX {
        return if search { 0.0 } else { 1.0 };
    }
    let mut counts: std::collections::HashMap<u16, i64> = std::collections::HashMap::new();
    let mut needle = 0i64;
    for k in ngram_keys(n) {
        *counts.entry(k).or_default() += 1;
        needle += 1;
    }
    if search {
        if needle == 0 {
            return 1.0;
        }
        let mut found = 0i64;
        for k in ngram_keys(h) {
            if let Some(c) = counts.get_mut(&k)
                && *c > 0
            {
                *c -= 1;
                found += 1;
            }
        }
        return (found as f64 / needle as f64) as f32;
    }
    let mut hay = 0i64;
    for k in ngram_keys(h) {
        *counts.entry(k).or_default() -= 1;
        hay += 1;
    }
    if needle + hay == 0 {
        return 0.0;
    }
    let diff: i64 = counts.values().map(|c| c.abs()).sum();
    (diff as f64 / (needle + hay) as f64) as f32
}

/// `extractTextFromHTML`, by ClickHouse's documented rules: comments skipped, CDATA copied
/// verbatim, `script`/`style` elements (lowercase names) dropped with their content, other
/// tags dropped (a tag without its `>` drops the rest), entities kept, whitespace collapsed
/// and trimmed, and a space between text that elements separate.
fn html_text(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    let mut pos = 0;
    let find = |from: usize, pat: &str| s.get(from..).and_then(|r| r.find(pat)).map(|i| from + i);
    while pos < b.len() {
        let rest = &s[pos..];
        if rest.starts_with("<!--") {
            pos = match find(pos + 4, "-->") {
                Some(e) => e + 3,
                None => pos + 4,
            };
            space = true;
        } else if rest.starts_with("<![CDATA[") {
            let (content, next) = match find(pos + 9, "]]>") {
                Some(e) => (&s[pos + 9..e], e + 3),
                None => (&s[pos + 9..], b.len()),
            };
            if space && !out.is_empty() && !content.is_empty() {
                out.push(' ');
            }
            out.push_str(content);
            space = true;
            pos = next;
        } else if let Some(tag) = ["script", "style"].into_iter().find(|t| {
            rest.strip_prefix('<')
                .and_then(|r| r.strip_prefix(t))
                .is_some_and(|r| {
                    r.starts_with(|c: char| c == '>' || c == '/' || c.is_ascii_whitespace())
                })
        }) {
            let close = format!("</{tag}");
            let mut at = pos + 1 + tag.len();
            pos = loop {
                let Some(c) = find(at, &close) else {
                    break b.len();
                };
                let after = c + close.len();
                let tail = &s[after..];
                let trimmed = tail.trim_start_matches(|c: char| c.is_ascii_whitespace());
                if trimmed.starts_with('>') {
                    break after + (tail.len() - trimmed.len()) + 1;
                }
                at = after;
            };
            space = true;
        } else if rest.starts_with('<') {
            pos = match find(pos + 1, ">") {
                Some(e) => e + 1,
                None => b.len(),
            };
            space = true;
        } else {
            let c = rest.chars().next().expect("not at the end");
            if c.is_ascii_whitespace() {
                space = true;
            } else {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                out.push(c);
            }
            pos += c.len_utf8();
        }
    }
    out
}

/// The values of a constant array of strings (`['a', 'b']`).
fn const_strings(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::ScalarFunction(sf) if sf.name() == "make_array" => {
            sf.args.iter().map(lit_str).collect()
        }
        Expr::Literal(datafusion::common::ScalarValue::List(arr), _) => {
            if arr.is_empty() || arr.is_null(0) {
                return Some(vec![]);
            }
            let values = cast(&arr.value(0), &DataType::Utf8).ok()?;
            let values = values.as_string::<i32>();
            values.iter().map(|v| v.map(str::to_string)).collect()
        }
        Expr::Cast(c) => const_strings(&c.expr),
        Expr::Alias(a) => const_strings(&a.expr),
        _ => None,
    }
}

fn const_f64(e: &Expr) -> Option<f64> {
    match e {
        Expr::Literal(v, _) => match v.cast_to(&DataType::Float64).ok()? {
            datafusion::common::ScalarValue::Float64(Some(f)) => Some(f),
            _ => None,
        },
        Expr::Cast(c) => const_f64(&c.expr),
        Expr::Negative(inner) => const_f64(inner).map(|v| -v),
        _ => None,
    }
}

/// A per-row function of one string giving an array of its substrings.
fn string_lists(
    name: &str,
    key: String,
    args: Vec<Expr>,
    f: impl for<'a> Fn(&'a str, &mut Vec<&'a str>) + Send + Sync + 'static,
) -> Result<Expr, FunctionError> {
    let fname = name.to_string();
    let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
        let s = cast(&a[0], &DataType::Utf8)?;
        let mut out = Output::new(&fname);
        let mut b = ListBuilder::new(StringBuilder::new());
        let mut items = vec![];
        for v in s.as_string::<i32>().iter() {
            match v {
                Some(v) => {
                    items.clear();
                    f(v, &mut items);
                    for i in &items {
                        out.take(i.len() + 4)?;
                        b.values().append_value(i);
                    }
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        Ok(Arc::new(b.finish()) as ArrayRef)
    });
    // Volatile: ngrams of a long string is quadratic in it; built per batch under the budget
    // rather than folded into the plan.
    Ok(super::udf::call_with(
        name,
        key,
        list_of(DataType::Utf8),
        Nulls::FromFirst,
        args,
        k,
        datafusion::logical_expr::Volatility::Volatile,
    ))
}

/// The groups of each match, searched as ClickHouse does.
fn all_groups(re: &Regex, s: &str) -> Vec<Vec<String>> {
    let mut out = vec![];
    let mut pos = 0;
    while pos < s.len() {
        let Some(c) = re.captures_at(s, pos) else {
            break;
        };
        let m = c.get(0).expect("group 0 is the match");
        out.push(
            (1..c.len())
                .map(|g| c.get(g).map_or(String::new(), |m| m.as_str().to_string()))
                .collect(),
        );
        pos = if m.end() > m.start() {
            m.end()
        } else {
            // One character past an empty match.
            m.start() + s[m.start()..].chars().next().map_or(1, char::len_utf8)
        };
    }
    out
}

fn extract_groups(name: &str, args: Vec<Expr>, horizontal: bool) -> Result<Expr, FunctionError> {
    let fname = name.to_string();
    let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        let s = cast(&a[0], &DataType::Utf8)?;
        let p = cast(&a[1], &DataType::Utf8)?;
        let (s, p) = (s.as_string::<i32>(), p.as_string::<i32>());
        let mut out = Output::new(&fname);
        let mut b = ListBuilder::new(ListBuilder::new(StringBuilder::new()));
        let mut cache: Option<(String, Regex)> = None;
        for r in 0..rows {
            if s.is_null(r) || p.is_null(r) {
                b.append(false);
                continue;
            }
            let pat = p.value(r);
            let re = match &cache {
                Some((k, re)) if k == pat => re.clone(),
                _ => {
                    let re = Regex::new(pat)
                        .map_err(|e| exec(format!("Invalid regular expression: {e}")))?;
                    if re.captures_len() < 2 {
                        return Err(exec(format!("There are no groups in regexp: {pat}")));
                    }
                    cache = Some((pat.to_string(), re.clone()));
                    re
                }
            };
            let found = all_groups(&re, s.value(r));
            let groups = re.captures_len() - 1;
            let rowset: Vec<Vec<&str>> = if horizontal {
                (0..groups)
                    .map(|g| found.iter().map(|m| m[g].as_str()).collect())
                    .collect()
            } else {
                found
                    .iter()
                    .map(|m| m.iter().map(String::as_str).collect())
                    .collect()
            };
            for inner in rowset {
                for v in inner {
                    out.take(v.len() + 4)?;
                    b.values().values().append_value(v);
                }
                b.values().append(true);
            }
            b.append(true);
        }
        Ok(Arc::new(b.finish()) as ArrayRef)
    });
    Ok(call(
        name,
        "",
        list_of(list_of(DataType::Utf8)),
        Nulls::FromArgs,
        args,
        k,
    ))
}

fn multi(name: &str, args: Vec<Expr>) -> Result<Expr, FunctionError> {
    let which = name.to_string();
    let ret = if name == "multiMatchAnyIndex" {
        DataType::UInt64
    } else {
        list_of(DataType::UInt64)
    };
    let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        let h = cast(&a[0], &DataType::Utf8)?;
        let h = h.as_string::<i32>();
        let l = a[1].as_list::<i32>();
        let vals = cast(l.values(), &DataType::Utf8)?;
        let vals = vals.as_string::<i32>();
        let offs = l.value_offsets();
        let mut scalar = UInt64Builder::new();
        let mut lists = ListBuilder::new(UInt64Builder::new());
        let mut cache: Vec<(String, Regex)> = vec![];
        for r in 0..rows {
            if h.is_null(r) || l.is_null(r) {
                scalar.append_null();
                lists.append(false);
                continue;
            }
            let hs = h.value(r);
            let needles: Vec<&str> = (offs[r] as usize..offs[r + 1] as usize)
                .map(|j| vals.value(j))
                .collect();
            if which == "multiSearchAllPositionsUTF8" {
                for nd in needles {
                    let p = hs
                        .find(nd)
                        .map_or(0, |b| hs[..b].chars().count() as u64 + 1);
                    lists.values().append_value(p);
                }
                lists.append(true);
                continue;
            }
            if cache.len() != needles.len() || cache.iter().zip(&needles).any(|(c, n)| c.0 != *n) {
                cache = needles
                    .iter()
                    .map(|p| {
                        Regex::new(p)
                            .map(|re| (p.to_string(), re))
                            .map_err(|e| exec(format!("Invalid regular expression: {e}")))
                    })
                    .collect::<Result<Vec<_>>>()?;
            }
            // (end of the earliest match, 1-based index) of each matching pattern.
            let mut ends: Vec<(usize, u64)> = cache
                .iter()
                .enumerate()
                .filter_map(|(i, (_, re))| re.shortest_match(hs).map(|e| (e, i as u64 + 1)))
                .collect();
            ends.sort_unstable();
            if which == "multiMatchAnyIndex" {
                scalar.append_value(ends.first().map_or(0, |e| e.1));
            } else {
                for (_, i) in ends {
                    lists.values().append_value(i);
                }
                lists.append(true);
            }
        }
        Ok(if which == "multiMatchAnyIndex" {
            Arc::new(scalar.finish()) as ArrayRef
        } else {
            Arc::new(lists.finish()) as ArrayRef
        })
    });
    Ok(call(name, "", ret, Nulls::FromArgs, args, k))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Minutes,
    Hours,
    Days,
    Months,
    Years,
}

impl Unit {
    const ALL: [Unit; 9] = [
        Unit::Years,
        Unit::Months,
        Unit::Days,
        Unit::Hours,
        Unit::Minutes,
        Unit::Seconds,
        Unit::Milliseconds,
        Unit::Microseconds,
        Unit::Nanoseconds,
    ];

    fn name(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "nanoseconds",
            Unit::Microseconds => "microseconds",
            Unit::Milliseconds => "milliseconds",
            Unit::Seconds => "seconds",
            Unit::Minutes => "minutes",
            Unit::Hours => "hours",
            Unit::Days => "days",
            Unit::Months => "months",
            Unit::Years => "years",
        }
    }

    fn parse(s: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.name() == s)
    }

    /// Seconds in one unit (whole units only).
    fn seconds(self) -> f64 {
        match self {
            Unit::Years => 365.0 * 86400.0,
            Unit::Months => 30.5 * 86400.0,
            Unit::Days => 86400.0,
            Unit::Hours => 3600.0,
            Unit::Minutes => 60.0,
            _ => 1.0,
        }
    }
}

fn time_delta(x: f64, max: Unit, min: Unit) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let a = x.abs();
    let mut rest = a.floor();
    let nanos = ((a - a.floor()) * 1e9).round().min(999_999_999.0) as u64;
    let mut parts: Vec<String> = vec![];
    let push = |parts: &mut Vec<String>, n: u64, u: Unit| {
        let unit = u.name();
        let unit = if n == 1 {
            &unit[..unit.len() - 1]
        } else {
            unit
        };
        parts.push(format!("{n} {unit}"));
    };
    // From 2^53 seconds on (where a double stops holding every second) only the largest
    // unit is shown.
    let only_max = a >= 9007199254740992.0;
    for u in Unit::ALL {
        if u > max || u < min || (only_max && u != max) {
            continue;
        }
        let n = match u {
            Unit::Milliseconds => nanos / 1_000_000,
            Unit::Microseconds => nanos / 1000 % 1000,
            Unit::Nanoseconds => nanos % 1000,
            _ => {
                let n = (rest / u.seconds()).floor();
                rest -= n * u.seconds();
                n as u64
            }
        };
        let shown_zero = u == Unit::Seconds && parts.is_empty();
        if n > 0 || shown_zero {
            push(&mut parts, n, u);
        }
    }
    let body = match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n => {
            let last = parts.remove(n - 1);
            format!("{} and {last}", parts.join(", "))
        }
    };
    if x < 0.0 { format!("-{body}") } else { body }
}

fn bar(x: f64, lo: f64, hi: f64, width: f64) -> String {
    let w = if x.is_nan() || x <= lo {
        0.0
    } else if x >= hi {
        width
    } else {
        (x - lo) * width / (hi - lo)
    };
    let eighths = (w * 8.0).floor().max(0.0) as usize;
    let mut s = "█".repeat(eighths / 8);
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    s.push_str(PARTS[eighths % 8]);
    s
}

#[cfg(test)]
mod tests {
    use super::{Unit, all_groups, bar, time_delta};
    use regex::Regex;

    #[test]
    fn time_delta_like_clickhouse() {
        let d = |x: f64| time_delta(x, Unit::Years, Unit::Seconds);
        assert_eq!(d(100.0), "1 minute and 40 seconds");
        assert_eq!(
            d(12345678.0),
            "4 months, 20 days, 21 hours, 21 minutes and 18 seconds"
        );
        assert_eq!(d(-5.5), "-5 seconds");
        assert_eq!(d(0.0), "0 seconds");
        assert_eq!(d(-0.5), "-0 seconds");
        assert_eq!(d(-100.0), "-1 minute and 40 seconds");
        assert_eq!(d(31536000.0), "1 year");
        assert_eq!(d(3600.0 * 24.0 * 31.0), "1 month and 12 hours");
        assert_eq!(d(1e20), "3170979198376 years");
        assert_eq!(d(f64::NAN), "nan");
        assert_eq!(d(9007199254740992.0), "285616414 years");
        assert_eq!(
            d(9007199254740991.0),
            "285616414 years, 8 months, 20 days, 7 hours, 36 minutes and 31 seconds"
        );
        assert_eq!(
            time_delta(432546534.0, Unit::Minutes, Unit::Seconds),
            "7209108 minutes and 54 seconds"
        );
        assert_eq!(time_delta(30.0, Unit::Years, Unit::Minutes), "");
        assert_eq!(
            time_delta(1.5, Unit::Years, Unit::Milliseconds),
            "1 second and 500 milliseconds"
        );
        assert_eq!(
            time_delta(1.001, Unit::Years, Unit::Nanoseconds),
            "1 second and 1 millisecond"
        );
        assert_eq!(
            time_delta(-61.25, Unit::Years, Unit::Milliseconds),
            "-1 minute, 1 second and 250 milliseconds"
        );
        assert_eq!(time_delta(40000000.0, Unit::Years, Unit::Years), "1 year");
        assert_eq!(
            time_delta(0.0005, Unit::Years, Unit::Milliseconds),
            "0 seconds"
        );
    }

    #[test]
    fn html_text_like_clickhouse() {
        let cases = [
            ("<p>Hello <b>world</b></p>", "Hello world"),
            (
                "<script>var x = 1;</script>text<style>p{}</style> more",
                "text more",
            ),
            ("a<!-- comment -->b", "a b"),
            ("a<![CDATA[<b>x</b>]]>b", "a<b>x</b> b"),
            ("  lots   of\n\n  space  ", "lots of space"),
            ("a &amp; b &lt; c", "a &amp; b &lt; c"),
            ("a<br>b", "a b"),
            ("a<b", "a"),
            ("x<scriptfoo>y</scriptfoo>z", "x y z"),
            ("x<SCRIPT>y</SCRIPT>z", "x y z"),
            ("<a href=\"x>y\">link</a>", "y\">link"),
            ("a<!-- unclosed", "a unclosed"),
            ("<script>unclosed", ""),
            (" <p> a </p> ", "a"),
            ("<script>x</script >y", "y"),
        ];
        for (html, want) in cases {
            assert_eq!(super::html_text(html), want, "{html}");
        }
    }

    #[test]
    fn tokenizers_like_clickhouse() {
        use super::super::tests::{call, check, i, s};
        let arr = |v: Vec<&str>| {
            datafusion::functions_nested::expr_fn::make_array(v.into_iter().map(s).collect())
        };
        check(vec![
            (
                call("tokens", vec![s("héllo wörld_x")]),
                "[héllo, wörld, x]",
            ),
            (
                call("tokens", vec![s("abc def"), s("ngrams"), i(2)]),
                "[ab, bc, c ,  d, de, ef]",
            ),
            (
                call(
                    "tokens",
                    vec![s("a,b;;c"), s("splitByString"), arr(vec![",", ";"])],
                ),
                "[a, b, c]",
            ),
            (
                call(
                    "tokens",
                    vec![s("abab"), s("splitByString"), arr(vec!["ab", "b"])],
                ),
                "[]",
            ),
            (call("tokens", vec![s(""), s("array")]), "[]"),
        ]);
        assert!(super::super::tests::try_call("tokens", vec![s("x"), s("nope")]).is_err());
    }

    #[test]
    fn fuzzy_like_clickhouse() {
        use super::fuzzy_end as f;
        assert!(f(b"hello", b"hallo", 1).is_some());
        assert!(f(b"hello", b"hxllx", 1).is_none());
        assert!(f(b"hello", b"hxllx", 2).is_some());
        assert!(f(b"xxhelloxx", b"helo", 1).is_some());
        assert!(f(b"abc", b"xyz", 2).is_none());
        assert!(f("héllo".as_bytes(), b"hello", 1).is_none());
        assert!(f(b"", b"ab", 1).is_none());
        assert_eq!(f(b"hello world", b"helo", 1), Some(3));
        assert_eq!(f(b"hello world", b"wrld", 1), Some(11));
        assert_eq!(f(b"aaa", b"ab", 1), Some(1));
        assert!(super::literal_pattern("hello") && !super::literal_pattern("a.c"));
    }

    #[test]
    fn ngrams_like_clickhouse() {
        use super::ngram_score as g;
        let d = |a: &str, b: &str| g(a.as_bytes(), b.as_bytes(), false);
        let s = |a: &str, b: &str| g(a.as_bytes(), b.as_bytes(), true);
        assert_eq!(d("ClickHouse", "ClickHose"), 0.3846154);
        assert_eq!(d("abc", "abcd"), 1.0);
        assert_eq!(d("", ""), 0.0);
        assert_eq!(d("aaaaaa", "aaaa"), 0.5);
        assert_eq!(d("héllo wörld", "hello world"), 0.7777778);
        assert_eq!(s("Hello World", "World Hello"), 0.5);
        assert_eq!(s("abc", "xyz"), 1.0);
        assert_eq!(s("abcd", ""), 1.0);
        // Grams whose 16-bit keys collide count as one, as in ClickHouse.
        assert_eq!(d("orcD", "=BF."), 0.0);
        assert_eq!(d("bx7C", "yAWx"), 0.0);
        assert_eq!(d("abcd", "abce"), 1.0);
        let long = "a".repeat(32766);
        assert_eq!(d(&long, "aaaa"), 0.99993896);
        assert_eq!(d(&"a".repeat(40000), "aaaa"), 1.0);
    }

    #[test]
    fn bars_like_clickhouse() {
        assert_eq!(bar(5.0, 0.0, 10.0, 20.0), "█".repeat(10));
        assert_eq!(bar(-1.0, 0.0, 10.0, 20.0), "");
        assert_eq!(bar(3.3, 0.0, 10.0, 7.0), "██▎");
        assert_eq!(bar(0.99, 0.0, 1.0, 1.0), "▉");
        assert_eq!(bar(0.2, 0.0, 1.0, 3.0), "▌");
        assert_eq!(bar(5.0, 10.0, 0.0, 20.0), "");
        assert_eq!(bar(5.0, 5.0, 5.0, 2.0), "");
        assert_eq!(bar(5.0, 0.0, 10.0, 1.5), "▊");
    }

    #[test]
    fn groups_like_clickhouse() {
        let g = |s: &str, p: &str| all_groups(&Regex::new(p).unwrap(), s);
        assert_eq!(g("abc", "(x?)"), vec![vec![""], vec![""], vec![""]]);
        assert_eq!(g("aab", "(a?)"), vec![vec!["a"], vec!["a"], vec![""]]);
        assert_eq!(g("aaa", "(a*)"), vec![vec!["aaa"]]);
        assert_eq!(g("aXbX", "(a|b)?X"), vec![vec!["a"], vec!["b"]]);
        assert_eq!(g("abc", "(x)?b"), vec![vec![""]]);
    }
}
