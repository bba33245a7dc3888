//! Codecs: `base58Encode`/`base58Decode`/`tryBase58Decode` (Bitcoin's alphabet; leading zero
//! bytes are `1`s; `base58Decode` fails on a character outside the alphabet, the `try` form
//! gives ''), `geohashEncode(lon, lat[, precision])` (Float arguments; a precision outside
//! 1..=12 means 12; a coordinate at or above a cell's middle takes the upper half, nan the
//! lower) and `geohashDecode(hash)` (the centre of the cell as a `(longitude, latitude)` tuple;
//! at most 12 characters read, a character outside the alphabet read as `z`), as ClickHouse.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, StringBuilder, StructArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::Expr;

use super::udf::{Nulls, call};
use super::{FnContext, FunctionError, invalid, is_string, type_of};

const B58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const B32: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    match name {
        "base58Encode" | "base58Decode" | "tryBase58Decode" => {
            let t = type_of(&args[0], ctx)?;
            if !(is_string(&t) || t == DataType::Null) {
                return Err(invalid(format!(
                    "Illegal type {t} of argument of function `{name}`, expected a String"
                )));
            }
            let mode = match name {
                "base58Encode" => 0,
                "base58Decode" => 1,
                _ => 2,
            };
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let mut b = StringBuilder::new();
                for v in s.as_string::<i32>().iter() {
                    match v {
                        None => b.append_null(),
                        Some(v) if mode == 0 => b.append_value(base58_encode(v.as_bytes())),
                        Some(v) => match base58_decode(v) {
                            Some(d) => b.append_value(String::from_utf8_lossy(&d)),
                            None if mode == 2 => b.append_value(""),
                            None => {
                                return Err(DataFusionError::Execution(format!(
                                    "Invalid base58Decode value ({v}), cannot be decoded"
                                )));
                            }
                        },
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            Ok(call(name, "", DataType::Utf8, Nulls::FromFirst, args, k))
        }
        "geohashEncode" => {
            for (i, what) in ["longitude", "latitude"].iter().enumerate() {
                let t = type_of(&args[i], ctx)?;
                if !(t.is_floating() || t == DataType::Null) {
                    return Err(invalid(format!(
                        "A value of illegal type was provided as argument '{what}' to function \
                         `geohashEncode`. Expected: Float*, got: {t}"
                    )));
                }
            }
            if let Some(p) = args.get(2) {
                let t = type_of(p, ctx)?;
                if !(t.is_integer() || t == DataType::Null) {
                    return Err(invalid(format!(
                        "The precision of `geohashEncode` must be an integer, got {t}"
                    )));
                }
            }
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let lon = cast(&a[0], &DataType::Float64)?;
                let lat = cast(&a[1], &DataType::Float64)?;
                let (lon, lat) = (
                    lon.as_primitive::<Float64Type>(),
                    lat.as_primitive::<Float64Type>(),
                );
                let prec: Option<ArrayRef> = match a.get(2) {
                    Some(p) => Some(cast(p, &DataType::Int64)?),
                    None => None,
                };
                let prec = prec.as_ref().map(|p| p.as_primitive::<Int64Type>());
                let mut b = StringBuilder::new();
                for r in 0..rows {
                    let p = match prec {
                        Some(p) if p.is_null(r) => None,
                        Some(p) => Some(p.value(r)),
                        None => Some(12),
                    };
                    match p {
                        Some(p) if !lon.is_null(r) && !lat.is_null(r) => {
                            b.append_value(geohash_encode(lon.value(r), lat.value(r), p))
                        }
                        _ => b.append_null(),
                    }
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            Ok(call(name, "", DataType::Utf8, Nulls::FromArgs, args, k))
        }
        "geohashDecode" => {
            let t = type_of(&args[0], ctx)?;
            if !(is_string(&t) || t == DataType::Null) {
                return Err(invalid(format!(
                    "Illegal type {t} of argument of function `geohashDecode`, expected a String"
                )));
            }
            let fields = Fields::from(vec![
                Field::new("longitude", DataType::Float64, false),
                Field::new("latitude", DataType::Float64, false),
            ]);
            let ret = DataType::Struct(fields.clone());
            let k = Arc::new(move |a: &[ArrayRef], _n: usize| -> Result<ArrayRef> {
                let s = cast(&a[0], &DataType::Utf8)?;
                let s = s.as_string::<i32>();
                let (mut lo, mut la) = (Float64Builder::new(), Float64Builder::new());
                for v in s.iter() {
                    let (x, y) = geohash_decode(v.unwrap_or(""));
                    lo.append_value(x);
                    la.append_value(y);
                }
                let cols: Vec<ArrayRef> = vec![Arc::new(lo.finish()), Arc::new(la.finish())];
                let out = StructArray::try_new(fields.clone(), cols, s.nulls().cloned())?;
                Ok(Arc::new(out) as ArrayRef)
            });
            Ok(call(name, "", ret, Nulls::FromFirst, args, k))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

fn base58_encode(bytes: &[u8]) -> String {
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    // Base-58 digits, least significant first.
    let mut digits: Vec<u8> = vec![];
    for &byte in &bytes[zeros..] {
        let mut carry = u32::from(byte);
        for d in digits.iter_mut() {
            carry += u32::from(*d) << 8;
            *d = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let mut out = String::with_capacity(zeros + digits.len());
    out.extend(std::iter::repeat_n('1', zeros));
    out.extend(digits.iter().rev().map(|&d| B58[d as usize] as char));
    out
}

fn base58_decode(s: &str) -> Option<Vec<u8>> {
    let ones = s.bytes().take_while(|&c| c == b'1').count();
    // Bytes, least significant first.
    let mut bytes: Vec<u8> = vec![];
    for c in s.bytes().skip(ones) {
        let mut carry = B58.iter().position(|&a| a == c)? as u32;
        for b in bytes.iter_mut() {
            carry += u32::from(*b) * 58;
            *b = (carry & 0xff) as u8;
            carry >>= 8;
        }
        while carry > 0 {
            bytes.push((carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    let mut out = vec![0u8; ones];
    out.extend(bytes.iter().rev());
    Some(out)
}

fn geohash_encode(lon: f64, lat: f64, precision: i64) -> String {
    let len = if (1..=12).contains(&precision) {
        precision as usize
    } else {
        12
    };
    let (mut lon_r, mut lat_r) = ((-180.0f64, 180.0f64), (-90.0f64, 90.0f64));
    let mut out = String::with_capacity(len);
    let mut even = true;
    for _ in 0..len {
        let mut code = 0usize;
        for _ in 0..5 {
            let (v, r) = if even {
                (lon, &mut lon_r)
            } else {
                (lat, &mut lat_r)
            };
            let mid = (r.0 + r.1) / 2.0;
            code <<= 1;
            if v >= mid {
                code |= 1;
                r.0 = mid;
            } else {
                r.1 = mid;
            }
            even = !even;
        }
        out.push(B32[code] as char);
    }
    out
}

fn geohash_decode(s: &str) -> (f64, f64) {
    let (mut lon_r, mut lat_r) = ((-180.0f64, 180.0f64), (-90.0f64, 90.0f64));
    let mut even = true;
    for c in s.bytes().take(12) {
        let code = B32.iter().position(|&a| a == c).unwrap_or(31);
        for bit in (0..5).rev() {
            let r = if even { &mut lon_r } else { &mut lat_r };
            let mid = (r.0 + r.1) / 2.0;
            if (code >> bit) & 1 == 1 {
                r.0 = mid;
            } else {
                r.1 = mid;
            }
            even = !even;
        }
    }
    ((lon_r.0 + lon_r.1) / 2.0, (lat_r.0 + lat_r.1) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::{base58_decode, base58_encode, geohash_decode, geohash_encode};
    use datafusion::logical_expr::Expr;

    #[test]
    fn base58_like_clickhouse() {
        assert_eq!(base58_encode(b"Hello World"), "JxF12TrwUP45BMd");
        assert_eq!(base58_encode(&[0, 0, 0xff]), "115Q");
        assert_eq!(base58_encode(b""), "");
        assert_eq!(base58_decode("JxF12TrwUP45BMd").unwrap(), b"Hello World");
        assert_eq!(base58_decode("11").unwrap(), vec![0, 0]);
        assert_eq!(base58_decode("115Q").unwrap(), vec![0, 0, 0xff]);
        assert!(base58_decode("0OIl").is_none());
        check(vec![
            (call("tryBase58Decode", vec![s("0")]), ""),
            (
                call("base58Encode", vec![s("Hello World")]),
                "JxF12TrwUP45BMd",
            ),
        ]);
        assert!(rows_err(call("base58Decode", vec![s("0")])));
    }

    fn rows_err(e: Expr) -> bool {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rows(e))).is_err()
    }

    #[test]
    fn geohash_like_clickhouse() {
        assert_eq!(
            geohash_encode(-5.60302734375, 42.593994140625, 0),
            "ezs42d000000"
        );
        assert_eq!(geohash_encode(-5.6, 42.6, 5), "ezs42");
        assert_eq!(geohash_encode(-5.6, 42.6, 13), "ezs42e44yx96");
        assert_eq!(geohash_encode(180.0, 90.0, 12), "zzzzzzzzzzzz");
        assert_eq!(geohash_encode(181.0, 0.0, 3), "xbp");
        assert_eq!(geohash_encode(f64::NAN, 0.0, 3), "800");
        assert_eq!(geohash_decode("ezs42"), (-5.60302734375, 42.60498046875));
        assert_eq!(geohash_decode(""), (0.0, 0.0));
        assert_eq!(geohash_decode("ezs4a"), (-5.29541015625, 42.69287109375));
        assert_eq!(geohash_decode("abc"), (170.859375, 49.921875));
        assert_eq!(
            geohash_decode("ezs42e44yx96ezs"),
            (-5.599999967962503, 42.6000000257045)
        );
    }
}
