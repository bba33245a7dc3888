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
        "pointInPolygon" => super::polygon::translate(args, ctx),
        // pointInEllipses(x, y, x0, y0, a, b, …): inside (or on) any of the ellipses.
        "pointInEllipses" => {
            if args.len() < 6 || !(args.len() - 2).is_multiple_of(4) {
                return Err(FunctionError::Arity(format!(
                    "Incorrect number of arguments of function `pointInEllipses`: 2 for the \
                     point plus 4 for each ellipse (x, y, a, b), found {}",
                    args.len()
                )));
            }
            for a in &args {
                let t = type_of(a, ctx)?;
                if !(t.is_floating() || t == DataType::Null) {
                    return Err(invalid(format!(
                        "Illegal type {t} of an argument of function `pointInEllipses`, must be \
                         Float64"
                    )));
                }
            }
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                let c = a
                    .iter()
                    .map(|x| cast(x, &DataType::Float64))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let c: Vec<_> = c.iter().map(|x| x.as_primitive::<Float64Type>()).collect();
                let v: datafusion::arrow::array::UInt8Array = (0..rows)
                    .map(|r| {
                        if c.iter().any(|x| x.is_null(r)) {
                            return None;
                        }
                        let (x, y) = (c[0].value(r), c[1].value(r));
                        let inside = c[2..].chunks(4).any(|e| {
                            let dx = (x - e[0].value(r)) / e[2].value(r);
                            let dy = (y - e[1].value(r)) / e[3].value(r);
                            dx * dx + dy * dy <= 1.0
                        });
                        Some(u8::from(inside))
                    })
                    .collect();
                Ok(Arc::new(v) as ArrayRef)
            });
            Ok(call(name, "", DataType::UInt8, Nulls::FromArgs, args, k))
        }
        "geohashesInBox" => {
            for a in &args[..4] {
                let t = type_of(a, ctx)?;
                if !(t.is_floating() || t == DataType::Null) {
                    return Err(invalid(format!(
                        "The coordinates of `geohashesInBox` must be Float, got {t}"
                    )));
                }
            }
            let t = type_of(&args[4], ctx)?;
            if !(t.is_integer() || t == DataType::Null) {
                return Err(invalid(format!(
                    "The precision of `geohashesInBox` must be an integer, got {t}"
                )));
            }
            let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
                use datafusion::arrow::array::ListBuilder;
                let c = a[..4]
                    .iter()
                    .map(|x| cast(x, &DataType::Float64))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let c: Vec<_> = c.iter().map(|x| x.as_primitive::<Float64Type>()).collect();
                let p = cast(&a[4], &DataType::Int64)?;
                let p = p.as_primitive::<Int64Type>();
                let mut b = ListBuilder::new(StringBuilder::new());
                for r in 0..rows {
                    if c.iter().any(|x| x.is_null(r)) || p.is_null(r) {
                        b.append(false);
                        continue;
                    }
                    let cells = geohashes_in_box(
                        [c[0].value(r), c[1].value(r), c[2].value(r), c[3].value(r)],
                        p.value(r),
                    )?;
                    for h in cells {
                        b.values().append_value(h);
                    }
                    b.append(true);
                }
                Ok(Arc::new(b.finish()) as ArrayRef)
            });
            // Volatile: small arguments can make a large array, built per batch under the
            // budget rather than folded into the plan.
            Ok(super::udf::call_with(
                name,
                "",
                super::strings::list_of_strings(),
                Nulls::FromArgs,
                args,
                k,
                datafusion::logical_expr::Volatility::Volatile,
            ))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

/// ClickHouse's most array elements of `geohashesInBox`.
const MAX_GEOHASHES: f64 = 10_000_000.0;

/// The cells of `precision` (1..=12, else 12) covering [lon_min, lon_max) x [lat_min,
/// lat_max), coordinates clamped to the globe, by longitude then latitude; a box that aligns
/// to no whole cell in one direction gives the one cell at its corner.
fn geohashes_in_box(b: [f64; 4], precision: i64) -> Result<Vec<String>> {
    let len = if (1..=12).contains(&precision) {
        precision
    } else {
        12
    };
    let bits = 5 * len as u32;
    let (lon_bits, lat_bits) = (bits.div_ceil(2), bits / 2);
    let lon_step = 360.0 / 2f64.powi(lon_bits as i32);
    let lat_step = 180.0 / 2f64.powi(lat_bits as i32);
    let lon_min = b[0].clamp(-180.0, 180.0);
    let lat_min = b[1].clamp(-90.0, 90.0);
    let lon_max = b[2].clamp(-180.0, 180.0);
    let lat_max = b[3].clamp(-90.0, 90.0);
    let lon0 = (lon_min / lon_step).floor() * lon_step;
    let lat0 = (lat_min / lat_step).floor() * lat_step;
    let lon1 = (lon_max / lon_step).ceil() * lon_step;
    let lat1 = (lat_max / lat_step).ceil() * lat_step;
    let n_lon = ((lon1 - lon0) / lon_step).round();
    let n_lat = ((lat1 - lat0) / lat_step).round();
    if !(n_lon >= 0.0 && n_lat >= 0.0) {
        return Ok(vec![]);
    }
    if n_lon == 0.0 || n_lat == 0.0 {
        return Ok(vec![geohash_encode(lon0, lat0, len)]);
    }
    if n_lon * n_lat > MAX_GEOHASHES {
        return Err(DataFusionError::Execution(format!(
            "geohashesInBox would produce {} array elements, which is bigger than the allowed \
             maximum of {MAX_GEOHASHES}",
            n_lon * n_lat
        )));
    }
    // Up to 10^7 cells: counted against the query's memory as they are made.
    let mut budget = crate::hogql::functions::budget::Output::new("geohashesInBox");
    let mut out = vec![];
    for i in 0..n_lon as i64 {
        for j in 0..n_lat as i64 {
            budget.take(len as usize + 28)?;
            out.push(geohash_encode(
                lon0 + lon_step * i as f64,
                lat0 + lat_step * j as f64,
                len,
            ));
        }
    }
    Ok(out)
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
    fn geohashes_in_box_like_clickhouse() {
        let g = |b: [f64; 4], p: i64| super::geohashes_in_box(b, p).unwrap();
        assert_eq!(
            g([24.48, 40.56, 24.785, 40.81], 4),
            ["sx1q", "sx1r", "sx32", "sx1w", "sx1x", "sx38"]
        );
        assert_eq!(g([-1.0, -1.0, 1.0, 1.0], 2), ["7z", "eb", "kp", "s0"]);
        assert_eq!(g([0.0, 0.0, 11.25, 5.625], 2), ["s0"]);
        assert_eq!(g([11.25, 0.0, 11.25, 0.0], 2), ["s2"]);
        assert_eq!(g([170.0, 80.0, 180.0, 90.0], 2), ["zy", "zz"]);
        assert_eq!(g([190.0, 80.0, 200.0, 90.0], 2), ["zy"]);
        assert_eq!(g([10.0, 10.0, 0.0, 0.0], 3), Vec::<String>::new());
        assert_eq!(g([f64::NAN, 0.0, 1.0, 1.0], 2), Vec::<String>::new());
        assert_eq!(g([-180.0, -90.0, 180.0, 90.0], 1).len(), 32);
        assert!(super::geohashes_in_box([0.0, 0.0, 1.0, 1.0], 0).is_err());
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
