//! JSON functions with ClickHouse's (simdjson) semantics: path arguments are keys or 1-based
//! indexes (negative from the end; an index also picks an object's n-th member), the first
//! of duplicate keys wins, invalid JSON or a missing path gives the type's default (''/0),
//! `JSONExtractString` of a non-string gives its JSON text, `JSONExtractRaw` is minified
//! with numbers reprinted. Path arguments must be constants.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray, UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::Expr;

use super::convert::format_float;
use super::strings::list_of_strings;
use super::udf::{Nulls, call};
use super::{FnContext, FunctionError, invalid, lit_str};

/// A parsed JSON value that keeps object member order and numbers' text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn value(&mut self, depth: usize) -> Option<J> {
        if depth > 512 {
            return None;
        }
        self.ws();
        match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut m = vec![];
                if self.eat(b'}').is_some() {
                    return Some(J::Obj(m));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.eat(b':')?;
                    let v = self.value(depth + 1)?;
                    m.push((k, v));
                    if self.eat(b',').is_some() {
                        continue;
                    }
                    self.eat(b'}')?;
                    return Some(J::Obj(m));
                }
            }
            b'[' => {
                self.i += 1;
                let mut a = vec![];
                if self.eat(b']').is_some() {
                    return Some(J::Arr(a));
                }
                loop {
                    a.push(self.value(depth + 1)?);
                    if self.eat(b',').is_some() {
                        continue;
                    }
                    self.eat(b']')?;
                    return Some(J::Arr(a));
                }
            }
            b'"' => self.string().map(J::Str),
            b't' => self.word("true", J::Bool(true)),
            b'f' => self.word("false", J::Bool(false)),
            b'n' => self.word("null", J::Null),
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && matches!(
                        self.b[self.i],
                        b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
                    )
                {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.b[start..self.i]).ok()?;
                t.parse::<f64>().ok()?;
                Some(J::Num(t.to_string()))
            }
        }
    }

    fn word(&mut self, w: &str, v: J) -> Option<J> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Some(v)
        } else {
            None
        }
    }

    fn string(&mut self) -> Option<String> {
        if self.b.get(self.i) != Some(&b'"') {
            return None;
        }
        self.i += 1;
        let mut out: Vec<u8> = vec![];
        loop {
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.b.get(self.i)?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp)
                                && self.b.get(self.i) == Some(&b'\\')
                                && self.b.get(self.i + 1) == Some(&b'u')
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo.checked_sub(0xDC00)?);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return None,
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let s = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        self.i += 4;
        u32::from_str_radix(s, 16).ok()
    }
}

pub(crate) fn parse(s: &str) -> Option<J> {
    let mut p = Parser {
        b: s.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    (p.i == p.b.len()).then_some(v)
}

fn num_text(t: &str) -> String {
    if !t.contains(['.', 'e', 'E']) {
        if let Ok(v) = t.parse::<i64>() {
            return v.to_string();
        }
        if let Ok(v) = t.parse::<u64>() {
            return v.to_string();
        }
    }
    format_float(t.parse::<f64>().unwrap_or(f64::NAN))
}

/// Minified JSON text.
pub(crate) fn raw(j: &J) -> String {
    let mut out = String::new();
    write_raw(j, &mut out);
    out
}

fn write_raw(j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(t) => out.push_str(&num_text(t)),
        J::Str(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        J::Arr(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_raw(v, out);
            }
            out.push(']');
        }
        J::Obj(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write_raw(v, out);
            }
            out.push('}');
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Step {
    Key(String),
    Index(i64),
}

fn walk<'a>(mut j: &'a J, path: &[Step]) -> Option<&'a J> {
    for s in path {
        j = match (s, j) {
            (Step::Key(k), J::Obj(m)) => &m.iter().find(|(mk, _)| mk == k)?.1,
            (Step::Index(i), J::Arr(a)) => a.get(index(*i, a.len())?)?,
            (Step::Index(i), J::Obj(m)) => &m.get(index(*i, m.len())?)?.1,
            _ => return None,
        };
    }
    Some(j)
}

fn index(i: i64, len: usize) -> Option<usize> {
    match i {
        0 => None,
        i if i > 0 => Some(i as usize - 1),
        i => len.checked_sub(i.unsigned_abs() as usize),
    }
}

fn as_string(j: &J) -> Option<String> {
    match j {
        J::Str(s) => Some(s.clone()),
        J::Null => None,
        other => Some(raw(other)),
    }
}

fn as_f64(j: &J) -> Option<f64> {
    match j {
        J::Num(t) => t.parse().ok(),
        J::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn as_i64(j: &J) -> Option<i64> {
    match j {
        J::Num(t) if !t.contains(['.', 'e', 'E']) => t.parse().ok(),
        J::Str(s) if s.trim().parse::<i64>().is_ok() => s.trim().parse().ok(),
        _ => {
            let f = as_f64(j)?.trunc();
            (-9.223372036854776e18..9.223372036854776e18)
                .contains(&f)
                .then_some(f as i64)
        }
    }
}

fn as_bool(j: &J) -> Option<bool> {
    match j {
        J::Bool(b) => Some(*b),
        _ => None,
    }
}

/// What a call extracts.
#[derive(Debug, Clone, PartialEq)]
enum Want {
    Str,
    Int,
    UInt,
    Float,
    /// JSONExtractBool: UInt8 1/0.
    BoolInt,
    /// JSONExtract(..., 'Bool').
    Bool,
    /// JSONExtract(..., 'Tuple(T1, T2)') / 'Tuple(a T1, b T2)': the elements of a JSON array
    /// by position, or of an object by position (unnamed) or by name (named).
    Tuple(Vec<(Option<String>, Want)>),
    Raw,
    ArrayRaw,
    Keys,
    Has,
    Length,
    /// JSONArrayLength's value (under Nullable: NULL when not an array).
    ArrayLength,
    /// JSONType: the value's kind as ClickHouse names it (an Enum8 there, a string here).
    Type,
    Array(Box<Want>),
    Nullable(Box<Want>),
    /// An integer type narrower than Int64 (cast after extraction).
    Cast(Box<Want>, DataType),
}

impl Want {
    fn ret(&self) -> DataType {
        match self {
            Want::Str | Want::Raw | Want::Type => DataType::Utf8,
            Want::Int => DataType::Int64,
            Want::UInt | Want::Length | Want::ArrayLength => DataType::UInt64,
            Want::Float => DataType::Float64,
            Want::BoolInt => DataType::UInt8,
            Want::Bool | Want::Has => DataType::Boolean,
            Want::ArrayRaw | Want::Keys => list_of_strings(),
            Want::Array(inner) => DataType::List(Arc::new(Field::new("item", inner.ret(), true))),
            Want::Nullable(inner) => inner.ret(),
            Want::Cast(_, t) => t.clone(),
            Want::Tuple(elems) => DataType::Struct(
                elems
                    .iter()
                    .enumerate()
                    .map(|(i, (name, w))| {
                        let name = name.clone().unwrap_or_else(|| format!("c{i}"));
                        Field::new(name, w.ret(), true)
                    })
                    .collect(),
            ),
        }
    }

    fn from_type_name(t: &str) -> Option<Want> {
        let t = t.trim();
        if let Some(inner) = t
            .strip_prefix("Nullable(")
            .and_then(|r| r.strip_suffix(')'))
        {
            return Some(Want::Nullable(Box::new(Want::from_type_name(inner)?)));
        }
        if let Some(inner) = t
            .strip_prefix("LowCardinality(")
            .and_then(|r| r.strip_suffix(')'))
        {
            return Want::from_type_name(inner);
        }
        if let Some(inner) = t.strip_prefix("Array(").and_then(|r| r.strip_suffix(')')) {
            return Some(Want::Array(Box::new(Want::from_type_name(inner)?)));
        }
        if let Some(inner) = t.strip_prefix("Tuple(").and_then(|r| r.strip_suffix(')')) {
            let mut elems = Vec::new();
            for e in split_top_level(inner) {
                let e = e.trim();
                // `name Type` (a named element) or `Type`: a name comes before any '('.
                let named = e.split_once(' ').filter(|(n, _)| {
                    !n.contains('(') && n.chars().all(|c| c.is_alphanumeric() || c == '_')
                });
                elems.push(match named {
                    Some((n, ty)) => (Some(n.to_string()), Want::from_type_name(ty)?),
                    None => (None, Want::from_type_name(e)?),
                });
            }
            let names: Vec<_> = elems.iter().filter(|(n, _)| n.is_some()).collect();
            if elems.is_empty() || !(names.is_empty() || names.len() == elems.len()) {
                return None;
            }
            return Some(Want::Tuple(elems));
        }
        Some(match t {
            "String" => Want::Str,
            "Int64" => Want::Int,
            "UInt64" => Want::UInt,
            "Float64" => Want::Float,
            "Float32" => Want::Cast(Box::new(Want::Float), DataType::Float32),
            "Bool" | "Boolean" => Want::Bool,
            "Int8" => Want::Cast(Box::new(Want::Int), DataType::Int8),
            "Int16" => Want::Cast(Box::new(Want::Int), DataType::Int16),
            "Int32" => Want::Cast(Box::new(Want::Int), DataType::Int32),
            "UInt8" => Want::Cast(Box::new(Want::UInt), DataType::UInt8),
            "UInt16" => Want::Cast(Box::new(Want::UInt), DataType::UInt16),
            "UInt32" => Want::Cast(Box::new(Want::UInt), DataType::UInt32),
            _ => return None,
        })
    }
}

/// One extracted value, before it goes into an array of the result type.
#[derive(Debug)]
enum V {
    Null,
    S(String),
    I(i64),
    U(u64),
    F(f64),
    B(bool),
    L(Vec<V>),
    /// A tuple's elements.
    T(Vec<V>),
}

/// The value for `want` at the found node (None: path missing or invalid JSON).
fn extract(want: &Want, node: Option<&J>) -> V {
    match want {
        Want::Str => V::S(node.and_then(as_string).unwrap_or_default()),
        Want::Raw => V::S(node.map(raw).unwrap_or_default()),
        Want::Int => V::I(node.and_then(as_i64).unwrap_or(0)),
        Want::UInt => V::U(
            node.and_then(|j| match j {
                J::Num(t) if !t.contains(['.', 'e', 'E']) => t.parse::<u64>().ok(),
                _ => as_i64(j).and_then(|v| u64::try_from(v).ok()),
            })
            .unwrap_or(0),
        ),
        Want::Float => V::F(node.and_then(as_f64).unwrap_or(0.0)),
        // ClickHouse: `true`, or a non-zero integer (written without '.' or exponent; any
        // float, even 2.0, is 0).
        Want::BoolInt => V::U(u64::from(match node {
            Some(J::Bool(b)) => *b,
            Some(J::Num(t)) if !t.contains(['.', 'e', 'E']) => {
                t.trim_start_matches('-').bytes().any(|c| c != b'0')
            }
            _ => false,
        })),
        Want::Bool => V::B(
            node.and_then(|j| as_bool(j).or_else(|| as_f64(j).map(|f| f != 0.0)))
                .unwrap_or(false),
        ),
        Want::Has => V::B(node.is_some()),
        Want::ArrayLength => match node {
            Some(J::Arr(a)) => V::U(a.len() as u64),
            _ => V::Null,
        },
        Want::Type => V::S(
            match node {
                None | Some(J::Null) => "Null",
                Some(J::Bool(_)) => "Bool",
                Some(J::Str(_)) => "String",
                Some(J::Arr(_)) => "Array",
                Some(J::Obj(_)) => "Object",
                Some(J::Num(t)) if t.contains(['.', 'e', 'E']) => "Double",
                Some(J::Num(t)) if t.parse::<i64>().is_ok() => "Int64",
                Some(J::Num(t)) if t.parse::<u64>().is_ok() => "UInt64",
                Some(J::Num(_)) => "Double",
            }
            .to_string(),
        ),
        Want::Length => V::U(match node {
            Some(J::Arr(a)) => a.len() as u64,
            Some(J::Obj(m)) => m.len() as u64,
            _ => 0,
        }),
        Want::ArrayRaw => V::L(match node {
            Some(J::Arr(a)) => a.iter().map(|v| V::S(raw(v))).collect(),
            _ => vec![],
        }),
        Want::Keys => V::L(match node {
            Some(J::Obj(m)) => m.iter().map(|(k, _)| V::S(k.clone())).collect(),
            _ => vec![],
        }),
        Want::Array(inner) => V::L(match node {
            Some(J::Arr(a)) => a.iter().map(|v| extract(inner, Some(v))).collect(),
            _ => vec![],
        }),
        Want::Nullable(inner) => match node {
            None | Some(J::Null) => V::Null,
            Some(j) => {
                let ok = match inner.as_ref() {
                    Want::Int | Want::UInt | Want::Cast(..) => as_i64(j).is_some(),
                    Want::Float => as_f64(j).is_some(),
                    Want::Bool => as_bool(j).is_some(),
                    Want::ArrayLength => matches!(j, J::Arr(_)),
                    _ => true,
                };
                if ok { extract(inner, node) } else { V::Null }
            }
        },
        Want::Cast(inner, _) => extract(inner, node),
        Want::Tuple(elems) => V::T(
            elems
                .iter()
                .enumerate()
                .map(|(i, (name, w))| {
                    let at = match (node, name) {
                        (Some(J::Arr(a)), _) => a.get(i),
                        (Some(J::Obj(m)), Some(n)) => {
                            m.iter().find(|(k, _)| k == n).map(|(_, v)| v)
                        }
                        (Some(J::Obj(m)), None) => m.get(i).map(|(_, v)| v),
                        _ => None,
                    };
                    extract(w, at)
                })
                .collect(),
        ),
    }
}

/// `s` split at its commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut from, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

fn build(want: &Want, vals: Vec<Option<V>>) -> Result<ArrayRef> {
    let base = match want {
        Want::Nullable(inner) | Want::Cast(inner, _) => inner.as_ref(),
        w => w,
    };
    let arr: ArrayRef = match base {
        Want::Array(_) | Want::ArrayRaw | Want::Keys => {
            let inner = match base {
                Want::Array(i) => i.as_ref().clone(),
                _ => Want::Str,
            };
            let mut offsets = vec![0i32];
            let mut flat = vec![];
            let mut valid = vec![];
            for v in vals {
                match v {
                    Some(V::L(items)) => {
                        flat.extend(items.into_iter().map(Some));
                        valid.push(true);
                    }
                    _ => valid.push(false),
                }
                offsets.push(flat.len() as i32);
            }
            let values = build(&inner, flat)?;
            let field = Arc::new(Field::new("item", values.data_type().clone(), true));
            Arc::new(datafusion::arrow::array::ListArray::try_new(
                field,
                datafusion::arrow::buffer::OffsetBuffer::new(offsets.into()),
                values,
                Some(valid.into()),
            )?)
        }
        Want::Str | Want::Raw | Want::Type => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Some(V::S(s)) => Some(s),
                    _ => None,
                })
                .collect::<StringArray>(),
        ),
        Want::Int => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Some(V::I(x)) => Some(x),
                    _ => None,
                })
                .collect::<Int64Array>(),
        ),
        Want::UInt | Want::Length | Want::BoolInt | Want::ArrayLength => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Some(V::U(x)) => Some(x),
                    _ => None,
                })
                .collect::<UInt64Array>(),
        ),
        Want::Float => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Some(V::F(x)) => Some(x),
                    _ => None,
                })
                .collect::<Float64Array>(),
        ),
        Want::Bool | Want::Has => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Some(V::B(x)) => Some(x),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        Want::Tuple(elems) => {
            let n = vals.len();
            let mut columns: Vec<Vec<Option<V>>> =
                elems.iter().map(|_| Vec::with_capacity(n)).collect();
            let mut valid = Vec::with_capacity(n);
            for v in vals {
                match v {
                    Some(V::T(items)) => {
                        valid.push(true);
                        for (c, item) in columns.iter_mut().zip(items) {
                            c.push(Some(item));
                        }
                    }
                    _ => {
                        valid.push(false);
                        columns.iter_mut().for_each(|c| c.push(None));
                    }
                }
            }
            let arrays = elems
                .iter()
                .zip(columns)
                .map(|((_, w), c)| build(w, c))
                .collect::<Result<Vec<_>>>()?;
            let DataType::Struct(fields) = base.ret() else {
                unreachable!("a tuple is a struct")
            };
            Arc::new(datafusion::arrow::array::StructArray::try_new(
                fields,
                arrays,
                Some(valid.into()),
            )?)
        }
        Want::Nullable(_) | Want::Cast(..) => unreachable!("unwrapped above"),
    };
    let ret = want.ret();
    Ok(if arr.data_type() == &ret {
        arr
    } else {
        cast(&arr, &ret)?
    })
}

fn step_of(e: &Expr) -> Option<Step> {
    if let Some(s) = lit_str(e) {
        return Some(Step::Key(s));
    }
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::Int16(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::Int32(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::Int64(Some(x)) => Some(Step::Index(*x)),
            ScalarValue::UInt8(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::UInt16(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::UInt32(Some(x)) => Some(Step::Index(*x as i64)),
            ScalarValue::UInt64(Some(x)) => i64::try_from(*x).ok().map(Step::Index),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    _ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    if name == "JSONExtractKeysAndValuesRaw" {
        return keys_and_values_raw(args);
    }
    let want = match name {
        "JSONExtractString" => Want::Str,
        "JSONExtractInt" => Want::Int,
        "JSONExtractUInt" => Want::UInt,
        "JSONExtractFloat" => Want::Float,
        "JSONExtractBool" => Want::BoolInt,
        "JSONExtractRaw" => Want::Raw,
        "JSONExtractArrayRaw" => Want::ArrayRaw,
        "JSONExtractKeys" => Want::Keys,
        // isValidJSON(s) is JSONHas(s) with no path: whether the document parses.
        "JSONHas" | "isValidJSON" => Want::Has,
        "JSONLength" => Want::Length,
        // The length of an array, NULL for anything else.
        "JSONArrayLength" => Want::Nullable(Box::new(Want::ArrayLength)),
        "JSONType" => Want::Type,
        "JSONExtract" => {
            let t = args.pop().expect("at least 2 args");
            let t = lit_str(&t).ok_or_else(|| {
                invalid("The type argument of `JSONExtract` must be a constant string")
            })?;
            Want::from_type_name(&t)
                .ok_or_else(|| invalid(format!("`JSONExtract` does not support the type {t}")))?
        }
        _ => return Err(FunctionError::Unknown(name.to_string())),
    };
    let json = args.remove(0);
    let path = args
        .iter()
        .map(|e| {
            step_of(e).ok_or_else(|| {
                invalid(format!(
                    "The path arguments of `{name}` must be constant keys or indexes"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let nulls = if matches!(want, Want::Nullable(_)) {
        Nulls::Always
    } else {
        Nulls::FromFirst
    };
    let key = format!("{want:?}/{path:?}");
    let ret = want.ret();
    // The path goes along as (unread) arguments so that two calls on different paths have
    // different names: `JSONHas(p, 'a')` and `JSONHas(p, 'b')` in one SELECT.
    let mut call_args = vec![json];
    call_args.extend(args);
    let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
        let s = cast(&a[0], &DataType::Utf8)?;
        let vals: Vec<Option<V>> = s
            .as_string::<i32>()
            .iter()
            .map(|s| {
                let s = s?;
                let doc = parse(s);
                Some(extract(&want, doc.as_ref().and_then(|d| walk(d, &path))))
            })
            .collect();
        build(&want, vals)
    });
    Ok(call(name, key, ret, nulls, call_args, k))
}

/// `JSONExtractKeysAndValuesRaw(json[, path…])`: an object's members as (key, raw value)
/// tuples in document order; anything but an object (or invalid JSON) gives [].
fn keys_and_values_raw(mut args: Vec<Expr>) -> Result<Expr, FunctionError> {
    use datafusion::arrow::array::{ListBuilder, StringBuilder, StructBuilder};
    use datafusion::arrow::datatypes::Fields;
    let json = args.remove(0);
    let path = args
        .iter()
        .map(|e| {
            step_of(e).ok_or_else(|| {
                invalid(
                    "The path arguments of `JSONExtractKeysAndValuesRaw` must be constant keys \
                     or indexes",
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let fields = Fields::from(vec![
        Field::new("c0", DataType::Utf8, true),
        Field::new("c1", DataType::Utf8, true),
    ]);
    let item = Arc::new(Field::new("item", DataType::Struct(fields.clone()), true));
    let ret = DataType::List(item.clone());
    let key = format!("{path:?}");
    let mut call_args = vec![json];
    call_args.extend(args);
    let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
        let s = cast(&a[0], &DataType::Utf8)?;
        let mut b = ListBuilder::new(StructBuilder::new(
            fields.clone(),
            vec![
                Box::new(StringBuilder::new()),
                Box::new(StringBuilder::new()),
            ],
        ))
        .with_field(item.clone());
        for v in s.as_string::<i32>().iter() {
            let Some(v) = v else {
                b.append(false);
                continue;
            };
            let doc = parse(v);
            if let Some(J::Obj(m)) = doc.as_ref().and_then(|d| walk(d, &path)) {
                for (key, val) in m {
                    let st = b.values();
                    st.field_builder::<StringBuilder>(0)
                        .expect("key builder")
                        .append_value(key);
                    st.field_builder::<StringBuilder>(1)
                        .expect("value builder")
                        .append_value(raw(val));
                    st.append(true);
                }
            }
            b.append(true);
        }
        Ok(Arc::new(b.finish()) as ArrayRef)
    });
    Ok(call(
        "JSONExtractKeysAndValuesRaw",
        key,
        ret,
        Nulls::FromFirst,
        call_args,
        k,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::arrow::datatypes::DataType;

    #[test]
    fn keys_and_values_raw_like_clickhouse() {
        let doc = r#"{"a": [-100, 200.0], "b": {"c": {"d": "hello", "f": "world"}}}"#;
        check(vec![
            (
                call("JSONExtractKeysAndValuesRaw", vec![s(doc)]),
                r#"[{c0: a, c1: [-100,200]}, {c0: b, c1: {"c":{"d":"hello","f":"world"}}}]"#,
            ),
            (
                call("JSONExtractKeysAndValuesRaw", vec![s(doc), s("b")]),
                r#"[{c0: c, c1: {"d":"hello","f":"world"}}]"#,
            ),
            (call("JSONExtractKeysAndValuesRaw", vec![s("[1,2]")]), "[]"),
        ]);
    }

    const DOC: &str = r#"{"a":"x","b":1,"c":[1,2.50,{"d":true}], "e":null, "f":"12", "g":{"h":"deep","i":[5,6]}}"#;

    #[test]
    fn json_like_clickhouse() {
        check(vec![
            (call("JSONExtractString", vec![s(DOC), s("a")]), "x"),
            (call("JSONExtractString", vec![s(DOC), s("b")]), "1"),
            (call("JSONExtractString", vec![s(DOC), s("e")]), ""),
            (
                call("JSONExtractString", vec![s(DOC), s("g")]),
                r#"{"h":"deep","i":[5,6]}"#,
            ),
            (
                call("JSONExtractString", vec![s(DOC), s("g"), s("h")]),
                "deep",
            ),
            (call("JSONExtractString", vec![s(DOC), s("zz")]), ""),
            (call("JSONExtractString", vec![s("not json"), s("a")]), ""),
            (
                call("JSONExtractString", vec![s(r#"{"a":"x","a":"y"}"#), s("a")]),
                "x",
            ),
            (
                call("JSONExtractString", vec![s(r#"{"a":"\u00e9\n"}"#), s("a")]),
                "é\n",
            ),
            (
                call(
                    "JSONExtractString",
                    vec![s(r#"{"c":["p","q"]}"#), s("c"), i(-1)],
                ),
                "q",
            ),
            (
                call("JSONExtractString", vec![s(r#"{"a":1.50}"#), s("a")]),
                "1.5",
            ),
            (
                call("JSONExtractInt", vec![s(DOC), s("g"), s("i"), i(1)]),
                "5",
            ),
            (call("JSONExtractInt", vec![s(r#"{"b":1.9}"#), s("b")]), "1"),
            (call("JSONExtractInt", vec![s(DOC), s("f")]), "12"),
            (
                call("JSONExtractInt", vec![s(r#"{"a":"1.5"}"#), s("a")]),
                "1",
            ),
            (
                call("JSONExtractInt", vec![s(r#"{"a":true}"#), s("a")]),
                "0",
            ),
            (
                call("JSONExtractInt", vec![s(r#"{"a":1e3}"#), s("a")]),
                "1000",
            ),
            (
                call(
                    "JSONExtractInt",
                    vec![s(r#"{"a":99999999999999999999}"#), s("a")],
                ),
                "0",
            ),
            (call("JSONExtractUInt", vec![s(r#"{"a":-1}"#), s("a")]), "0"),
            (call("JSONExtractFloat", vec![s(DOC), s("b")]), "1"),
            (
                call("JSONExtractFloat", vec![s(r#"{"a":"1.5"}"#), s("a")]),
                "1.5",
            ),
            (
                call("JSONExtractBool", vec![s(DOC), s("c"), i(3), s("d")]),
                "1",
            ),
            (
                call("JSONExtractBool", vec![s(r#"{"a":"true"}"#), s("a")]),
                "0",
            ),
            // ClickHouse's answers (chdb 4.4): integers by being non-zero, floats never
            (call("JSONExtractBool", vec![s(r#"{"a":2}"#), s("a")]), "1"),
            (call("JSONExtractBool", vec![s(r#"{"a":-1}"#), s("a")]), "1"),
            (call("JSONExtractBool", vec![s(r#"{"a":0}"#), s("a")]), "0"),
            (call("JSONExtractBool", vec![s(r#"{"a":-0}"#), s("a")]), "0"),
            (
                call("JSONExtractBool", vec![s(r#"{"a":2.0}"#), s("a")]),
                "0",
            ),
            (
                call("JSONExtractBool", vec![s(r#"{"a":1e3}"#), s("a")]),
                "0",
            ),
            (
                call(
                    "JSONExtractBool",
                    vec![s(r#"{"a":18446744073709551615}"#), s("a")],
                ),
                "1",
            ),
            (
                call(
                    "JSONExtractRaw",
                    vec![s(r#"{"c":[1, 2.50, {"d": true}]}"#), s("c")],
                ),
                r#"[1,2.5,{"d":true}]"#,
            ),
            (
                call("JSONExtractRaw", vec![s(r#"{"a":"x"}"#), s("a")]),
                r#""x""#,
            ),
            (
                call("JSONExtractRaw", vec![s(r#"{"a":1.0e2}"#), s("a")]),
                "100",
            ),
            (call("JSONExtractRaw", vec![s(r#"{"a":1}"#), s("b")]), ""),
            (call("JSONExtractRaw", vec![s("[1,2]")]), "[1,2]"),
            (
                call(
                    "JSONExtractRaw",
                    vec![s(r#"{"a" : { "x" : "é" }}"#), s("a")],
                ),
                r#"{"x":"é"}"#,
            ),
            (
                call(
                    "JSONExtractArrayRaw",
                    vec![s(r#"{"c":[1, "x", {"d": true}]}"#), s("c")],
                ),
                r#"[1, "x", {"d":true}]"#,
            ),
            (
                call("JSONExtractArrayRaw", vec![s(r#"{"a":1}"#), s("a")]),
                "[]",
            ),
            (
                call("JSONExtractKeys", vec![s(r#"{"b":1,"a":{}}"#)]),
                "[b, a]",
            ),
            (call("JSONExtractKeys", vec![s("[1]")]), "[]"),
            (call("JSONHas", vec![s(DOC), s("a")]), "true"),
            (call("JSONHas", vec![s(DOC), s("zz")]), "false"),
            (
                call("JSONHas", vec![s(r#"{"a":[1,2]}"#), s("a"), i(2)]),
                "true",
            ),
            (
                call("JSONHas", vec![s(r#"{"a":[1,2]}"#), s("a"), i(3)]),
                "false",
            ),
            (call("JSONLength", vec![s(r#"{"a":1,"b":2}"#)]), "2"),
            (call("JSONLength", vec![s("[1,2,3]")]), "3"),
            (call("JSONLength", vec![s("1")]), "0"),
            (
                call("JSONExtract", vec![s(DOC), s("a"), s("Nullable(String)")]),
                "x",
            ),
            (
                call("JSONExtract", vec![s(DOC), s("zz"), s("Nullable(String)")]),
                "\\N",
            ),
            (
                call(
                    "JSONExtract",
                    vec![s(r#"{"a":["x","y"]}"#), s("a"), s("Array(String)")],
                ),
                "[x, y]",
            ),
            (
                call(
                    "JSONExtract",
                    vec![s(r#"{"a":[1,2]}"#), s("a"), s("Array(Int64)")],
                ),
                "[1, 2]",
            ),
            (
                call("JSONExtract", vec![s(r#"{"a":5}"#), s("a"), s("Int64")]),
                "5",
            ),
            (
                call("JSONExtract", vec![s(r#"{"a":5}"#), s("a"), s("Float64")]),
                "5",
            ),
            (
                call("JSONExtract", vec![s(r#"{"a":5}"#), s("a"), s("String")]),
                "5",
            ),
            (
                call(
                    "JSONExtract",
                    vec![s(r#"{"a":"5"}"#), s("a"), s("Nullable(Int64)")],
                ),
                "5",
            ),
            (
                call("JSONExtract", vec![s(r#"{"a":true}"#), s("a"), s("Bool")]),
                "true",
            ),
            (
                call("JSONExtract", vec![s(r#"{"a":1}"#), s("a"), s("UInt8")]),
                "1",
            ),
        ]);
        assert_eq!(typ(call("JSONExtractBool", vec![s("{}")])), DataType::UInt8);
        assert_eq!(
            typ(call("JSONExtract", vec![s("{}"), s("a"), s("UInt8")])),
            DataType::UInt8
        );
        assert_eq!(
            rows(call("JSONExtractString", vec![c("s"), s("a")])),
            ["", "", "", "\\N"]
        );
        assert!(try_call("JSONExtractString", vec![s("{}"), c("s")]).is_err());
    }
}
