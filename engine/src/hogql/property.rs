//! Reading a property out of a JSON text column: `properties.$browser`, `properties.a.b`,
//! `properties['x']`.
//!
//! The answer is compat.md's: a nullable String where a missing key, JSON `null` and `""` are
//! NULL, strings are themselves (unescaped), and numbers, booleans, objects and arrays are
//! their JSON text. It is the same rule ingestion uses for promoted property columns
//! ([`crate::storage::layout::property_as_string`]), so either source gives one answer.
//!
//! Evaluation does not parse whole documents: `find_path` walks the text, skipping values it
//! does not need, and only the value found is decoded.

use std::sync::Arc;

use crate::storage::layout::{json_string_end as string_end, json_value_end as value_end};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DFResult, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// `hogql_property(json, key, …)`: the property at the path of literal keys.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct PropertyUdf {
    signature: Signature,
}

impl PropertyUdf {
    fn new() -> Self {
        PropertyUdf {
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

/// The expression reading `path` out of the JSON text `json`.
pub(crate) fn property(json: Expr, path: &[String]) -> Expr {
    let mut args = vec![json];
    args.extend(
        path.iter()
            .map(|k| Expr::Literal(ScalarValue::Utf8(Some(k.clone())), None)),
    );
    Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(PropertyUdf::new())),
        args,
    ))
}

impl ScalarUDFImpl for PropertyUdf {
    fn name(&self) -> &str {
        "hogql_property"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DFResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let mut path = Vec::with_capacity(args.args.len().saturating_sub(1));
        for a in &args.args[1..] {
            match a {
                ColumnarValue::Scalar(s) => match s.try_as_str() {
                    Some(Some(k)) => path.push(k.to_string()),
                    _ => return exec_err!("property keys must be strings"),
                },
                ColumnarValue::Array(_) => return exec_err!("property keys must be constants"),
            }
        }
        let json = args.args[0].to_array(args.number_rows)?;
        let json = match json.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                datafusion::arrow::compute::cast(&json, &DataType::Utf8)?
            }
            DataType::Null => {
                return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)));
            }
            other => return exec_err!("cannot read properties out of a {other} value"),
        };
        let json = json.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(json.len(), json.len() * 8);
        for i in 0..json.len() {
            if json.is_null(i) {
                out.append_null();
                continue;
            }
            out.append_option(read_property(json.value(i), &path));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// `hogql_properties(residual, column…)`: the events table's whole `properties` text, the
/// residual JSON with each promoted column's value put back (`storage::layout::rebuild`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct RebuildUdf {
    signature: Signature,
    /// The property key of each column argument after the first.
    keys: Vec<String>,
}

/// The expression giving the full `properties` from the residual `json` and the promoted
/// `columns` (key, column).
pub(crate) fn rebuild_properties(json: Expr, columns: Vec<(String, Expr)>) -> Expr {
    let (keys, cols): (Vec<String>, Vec<Expr>) = columns.into_iter().unzip();
    let mut args = vec![json];
    args.extend(cols);
    Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(RebuildUdf {
            signature: Signature::variadic_any(Volatility::Immutable),
            keys,
        })),
        args,
    ))
}

impl ScalarUDFImpl for RebuildUdf {
    fn name(&self) -> &str {
        "hogql_properties"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DFResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let n = args.number_rows;
        let mut arrays = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<DFResult<Vec<ArrayRef>>>()?
            .into_iter();
        let residual = datafusion::arrow::compute::cast(
            &arrays.next().expect("the residual argument"),
            &DataType::Utf8,
        )?;
        let residual = residual.as_string::<i32>();
        let cols: Vec<(ArrayRef, String)> = arrays
            .map(|a| match a.data_type() {
                DataType::Utf8View | DataType::LargeUtf8 => {
                    datafusion::arrow::compute::cast(&a, &DataType::Utf8)
                }
                _ => Ok(a),
            })
            .zip(self.keys.iter().cloned())
            .map(|(a, k)| a.map(|a| (a, k)))
            .collect::<Result<_, _>>()?;
        let mut out = StringBuilder::with_capacity(n, residual.value_data().len() + n * 32);
        for i in 0..n {
            if residual.is_null(i) {
                out.append_null();
                continue;
            }
            out.append_value(crate::storage::layout::rebuild(
                residual.value(i),
                crate::storage::layout::row_cells(&cols, i),
            ));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// The property at `path` in the JSON text `doc`, by compat.md's rule.
pub(crate) fn read_property(doc: &str, path: &[String]) -> Option<String> {
    let raw = find_path(doc.as_bytes(), path)?;
    let raw = std::str::from_utf8(raw).ok()?;
    match raw.as_bytes().first()? {
        b'"' => {
            let s: String = serde_json::from_str(raw).ok()?;
            (!s.is_empty()).then_some(s)
        }
        b'n' if raw == "null" => None,
        // Numbers, booleans, objects and arrays: their JSON text, compact as stored.
        b'{' | b'[' => serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .map(|v| v.to_string()),
        _ => Some(raw.to_string()),
    }
}

/// The raw text of the value at `path` (object keys; arrays indexed by 1-based integer keys).
fn find_path<'a>(doc: &'a [u8], path: &[String]) -> Option<&'a [u8]> {
    let mut value = trim(doc);
    for key in path {
        value = match value.first()? {
            b'{' => object_member(value, key)?,
            b'[' => {
                let idx: usize = key.parse().ok().filter(|i| *i > 0)?;
                array_element(value, idx)?
            }
            _ => return None,
        };
    }
    Some(value)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn key_matches(raw: &[u8], key: &str) -> bool {
    // raw includes the quotes.
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return inner == key.as_bytes();
    }
    std::str::from_utf8(raw)
        .ok()
        .and_then(|r| serde_json::from_str::<String>(r).ok())
        .is_some_and(|k| k == key)
}

fn object_member<'a>(s: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut i = skip_ws(s, 1);
    let mut found = None;
    while i < s.len() && s[i] != b'}' {
        if s[i] != b'"' {
            return None;
        }
        let kend = string_end(s, i)?;
        let is_key = key_matches(&s[i..kend], key);
        i = skip_ws(s, kend);
        if s.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(s, i + 1);
        let vend = value_end(s, i)?;
        if is_key {
            // The last duplicate wins, as serde_json and ClickHouse's parser agree.
            found = Some(&s[i..vend]);
        }
        i = skip_ws(s, vend);
        if s.get(i) == Some(&b',') {
            i = skip_ws(s, i + 1);
        }
    }
    found
}

fn array_element(s: &[u8], idx: usize) -> Option<&[u8]> {
    let mut i = skip_ws(s, 1);
    let mut n = 1;
    while i < s.len() && s[i] != b']' {
        let vend = value_end(s, i)?;
        if n == idx {
            return Some(&s[i..vend]);
        }
        n += 1;
        i = skip_ws(s, vend);
        if s.get(i) == Some(&b',') {
            i = skip_ws(s, i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::layout::property_as_string;

    fn p(doc: &str, path: &[&str]) -> Option<String> {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        read_property(doc, &path)
    }

    #[test]
    fn compat_rules() {
        let doc = r#"{"s":"x","e":"","n":null,"i":42,"f":1.5,"b":true,"o":{"a":{"b":"deep"},"z":[1,2]},"a":[1,"two",{"k":3}],"q":"say \"hi\" \\ é","$browser":"Chrome"}"#;
        assert_eq!(p(doc, &["s"]).as_deref(), Some("x"));
        assert_eq!(p(doc, &["e"]), None);
        assert_eq!(p(doc, &["n"]), None);
        assert_eq!(p(doc, &["missing"]), None);
        assert_eq!(p(doc, &["i"]).as_deref(), Some("42"));
        assert_eq!(p(doc, &["f"]).as_deref(), Some("1.5"));
        assert_eq!(p(doc, &["b"]).as_deref(), Some("true"));
        assert_eq!(
            p(doc, &["o"]).as_deref(),
            Some(r#"{"a":{"b":"deep"},"z":[1,2]}"#)
        );
        assert_eq!(p(doc, &["o", "a", "b"]).as_deref(), Some("deep"));
        assert_eq!(p(doc, &["a", "2"]).as_deref(), Some("two"));
        assert_eq!(p(doc, &["a", "3", "k"]).as_deref(), Some("3"));
        assert_eq!(p(doc, &["a", "0"]), None);
        assert_eq!(p(doc, &["q"]).as_deref(), Some("say \"hi\" \\ é"));
        assert_eq!(p(doc, &["$browser"]).as_deref(), Some("Chrome"));
        assert_eq!(p(doc, &["s", "x"]), None);
        assert_eq!(p("not json", &["s"]), None);
        assert_eq!(p(r#"{"s":"#, &["s"]), None);
    }

    #[test]
    fn agrees_with_the_shredding_rule() {
        let doc: serde_json::Value = serde_json::json!({
            "a": "x", "b": "", "c": null, "d": 3, "e": [1, {"x": "y"}], "f": {"g": false}, "h": -0.25e2
        });
        let text = doc.to_string();
        for key in ["a", "b", "c", "d", "e", "f", "h", "zz"] {
            assert_eq!(
                p(&text, &[key]),
                property_as_string(doc.get(key)),
                "key {key}"
            );
        }
    }
}
