//! ClickHouse's maps on Arrow's Map type: `map(k1, v1, …)`, `mapFromArrays`, `m[key]`,
//! `mapKeys`, `mapValues`, `mapContains`, `mapContainsKeyLike`, `mapExtractKeyLike`,
//! `mapAdd`, `mapSubtract`, `mapPopulateSeries`, `mapUpdate`, `mapApply`, `mapFilter`.
//!
//! A ClickHouse map is a list of (key, value) entries in the order given, duplicates kept
//! (`map('a', 1, 'a', 2)` has two entries; `m['a']` reads the first). Arrow's Map is the same
//! list of entries, so entries keep their order here too. A missing key reads the value
//! type's default (`0`, `''`), or NULL when the map's values are Nullable: `map(…)` marks
//! them Nullable when a value argument is, `mapFromArrays` always (an array's elements are
//! Nullable here whatever ClickHouse's type), so `mapFromArrays(['a'], [1])['z']` is NULL
//! where ClickHouse answers 0.
//!
//! Results print as ClickHouse's text `{'a':1,'b':2}` and, in the query API, as a JSON object
//! (as PostHog returns a ClickHouse Map), keys as strings.

use super::super::{Arg, FnContext};
use super::{FunctionError, default_value, lit, nullable, type_of};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder, Int64Array, ListArray, MapArray,
    Scalar, StringArray, StructArray, UInt32Array, make_comparator,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{SortOptions, cast, concat, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Int64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::functions_nested::expr_fn::make_array;
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::cmp::Ordering;
use std::sync::Arc;

/// The functions translated here.
pub(super) const NAMES: &[&str] = &[
    "map",
    "mapFromArrays",
    "mapKeys",
    "mapValues",
    "mapContains",
    "mapContainsKeyLike",
    "mapExtractKeyLike",
    "mapAdd",
    "mapSubtract",
    "mapPopulateSeries",
    "mapUpdate",
    "mapApply",
    "mapFilter",
];

/// At most this many entries in one map that `mapPopulateSeries` makes.
const MAX_SERIES: i64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    /// (keys array, values array) → map.
    FromArrays,
    /// array of (key, value) tuples → map.
    FromEntries,
    Keys,
    Values,
    /// (map, key) → whether an entry has the key.
    Contains,
    /// (map, key, default) → the first entry's value, else the default.
    Element,
    /// (map, pattern) → whether a key is LIKE the pattern / the entries whose key is.
    ContainsLike,
    ExtractLike,
    /// maps → one entry per key (sorted), the values summed / the first minus the others.
    Add,
    Subtract,
    /// (map, max) → keys from the least to max (NULL: the greatest key), missing ones with
    /// the default value.
    Populate,
    /// (map, map) → the first's entries whose key the second lacks, then the second's.
    Update,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MapUdf {
    op: Op,
    name: &'static str,
    ret: DataType,
    signature: Signature,
}

fn call(op: Op, name: &'static str, ret: DataType, args: Vec<Expr>) -> Expr {
    ScalarUDF::from(MapUdf {
        op,
        name,
        ret,
        signature: Signature::variadic_any(Volatility::Immutable),
    })
    .call(args)
}

impl ScalarUDFImpl for MapUdf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.ret.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = super::arg_arrays(&args)?;
        Ok(ColumnarValue::Array(eval(self.op, &arrays, &self.ret)?))
    }
}

/// The Map type with keys `k` and values `v` (Nullable or not).
pub(super) fn map_type(k: DataType, v: DataType, v_nullable: bool) -> DataType {
    DataType::Map(
        Arc::new(Field::new("entries", entries(k, v, v_nullable), false)),
        false,
    )
}

fn entries(k: DataType, v: DataType, v_nullable: bool) -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("key", k, false),
        Field::new("value", v, v_nullable),
    ]))
}

/// A Map type's (key, value) fields.
pub(super) fn kv(t: &DataType) -> Option<(FieldRef, FieldRef)> {
    match t {
        DataType::Map(f, _) => match f.data_type() {
            DataType::Struct(fs) if fs.len() == 2 => Some((fs[0].clone(), fs[1].clone())),
            _ => None,
        },
        _ => None,
    }
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

fn need_map(name: &str, t: &DataType) -> Result<(FieldRef, FieldRef), FunctionError> {
    kv(t).ok_or_else(|| FunctionError::Invalid(format!("Function `{name}` needs a Map, got {t}")))
}

fn cast_to(e: Expr, from: &DataType, to: &DataType) -> Expr {
    if from == to {
        e
    } else {
        datafusion::logical_expr::cast(e, to.clone())
    }
}

/// ClickHouse's sum type of `mapAdd`'s values: Int64, UInt64 or Float64.
fn wide(t: &DataType) -> Option<DataType> {
    if t.is_floating() {
        Some(DataType::Float64)
    } else if t.is_unsigned_integer() {
        Some(DataType::UInt64)
    } else if t.is_integer() {
        Some(DataType::Int64)
    } else {
        None
    }
}

/// A map's keys and values as two arrays (for the aggregates of maps).
pub(super) fn keys_and_values(m: Expr, ctx: &FnContext<'_>) -> Result<(Expr, Expr), FunctionError> {
    let (kf, vf) = need_map("sumMap", &type_of(&m, ctx)?)?;
    Ok(split(m, &kf, &vf))
}

/// `mapKeys(m)` and `mapValues(m)` of a map whose key and value fields are `kf` and `vf`.
fn split(m: Expr, kf: &FieldRef, vf: &FieldRef) -> (Expr, Expr) {
    let keys = call(
        Op::Keys,
        "mapKeys",
        list_of(kf.data_type().clone()),
        vec![m.clone()],
    );
    let values = call(
        Op::Values,
        "mapValues",
        list_of(vf.data_type().clone()),
        vec![m],
    );
    (keys, values)
}

/// `m[k]`: the value of the first entry with key `k`, else the value type's default (NULL
/// when the values are Nullable).
pub(super) fn element(m: Expr, k: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let (kf, vf) = need_map("arrayElement", &type_of(&m, ctx)?)?;
    let kt = type_of(&k, ctx)?;
    let k = cast_to(k, &kt, kf.data_type());
    let default = if vf.is_nullable() {
        ScalarValue::try_from(vf.data_type()).map_err(super::df_err)?
    } else {
        default_value(vf.data_type())
    };
    Ok(call(
        Op::Element,
        "arrayElement",
        vf.data_type().clone(),
        vec![m, k, lit(default)],
    ))
}

pub(super) fn translate(
    name: &str,
    args: Vec<Arg>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    if matches!(name, "mapApply" | "mapFilter") {
        return higher_order(name, args, ctx);
    }
    let args = super::exprs_only(name, args)?;
    let name_static = NAMES.iter().find(|n| **n == name).copied().unwrap_or("map");
    let types = args
        .iter()
        .map(|a| type_of(a, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    match name {
        "map" => {
            if args.len() % 2 != 0 {
                return Err(FunctionError::Invalid(format!(
                    "Function `map` needs an even number of arguments, got {}",
                    args.len()
                )));
            }
            if args.is_empty() {
                let ret = map_type(DataType::Utf8, DataType::Utf8, false);
                let empty = lit(ScalarValue::List(ScalarValue::new_list_nullable(
                    &[],
                    &DataType::Utf8,
                )));
                return Ok(call(Op::FromArrays, "map", ret, vec![empty.clone(), empty]));
            }
            let mut keys = vec![];
            let mut values = vec![];
            let mut v_nullable = false;
            for (i, a) in args.into_iter().enumerate() {
                if i % 2 == 0 {
                    if types[i] == DataType::Null {
                        return Err(FunctionError::Invalid(
                            "A key of `map` cannot be NULL".to_string(),
                        ));
                    }
                    keys.push((a, types[i].clone()));
                } else {
                    v_nullable |= types[i] == DataType::Null || nullable(&a, ctx);
                    values.push((a, types[i].clone()));
                }
            }
            // Integer constants keep their common narrow type, as in an array literal
            // (`map('a', -128)` holds Int8 values).
            let narrow = |items: Vec<(Expr, DataType)>| -> Vec<(Expr, DataType)> {
                let exprs: Vec<Expr> = items.iter().map(|(e, _)| e.clone()).collect();
                match super::super::narrow_const_items(&exprs) {
                    Some(n) => n
                        .into_iter()
                        .zip(items)
                        .map(|(e, (_, t))| {
                            let t = match &e {
                                Expr::Literal(v, _) => v.data_type(),
                                _ => t,
                            };
                            (e, t)
                        })
                        .collect(),
                    None => items,
                }
            };
            let (keys, values) = (narrow(keys), narrow(values));
            // Keys (and values) take their common type, as in an array literal.
            let common = |items: &[(Expr, DataType)], what: &str| {
                let ts: Vec<DataType> = items.iter().map(|(_, t)| t.clone()).collect();
                type_union_resolution(&ts).ok_or_else(|| {
                    FunctionError::Invalid(format!(
                        "The {what} of `map` have no common type: {}",
                        ts.iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            };
            // Strings as Utf8 whatever their column's layout (a map prints one way).
            let plain = |t: DataType| match t {
                DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
                t => t,
            };
            let kt = plain(common(&keys, "keys")?);
            let vt = plain(common(&values, "values")?);
            let k = make_array(keys.into_iter().map(|(e, t)| cast_to(e, &t, &kt)).collect());
            let v = make_array(
                values
                    .into_iter()
                    .map(|(e, t)| cast_to(e, &t, &vt))
                    .collect(),
            );
            Ok(call(
                Op::FromArrays,
                "map",
                map_type(kt, vt, v_nullable),
                vec![k, v],
            ))
        }
        "mapFromArrays" => {
            let (kt, vt) = match (&types[0], &types[1]) {
                (DataType::List(k), DataType::List(v)) => {
                    (k.data_type().clone(), v.data_type().clone())
                }
                (a, b) => {
                    return Err(FunctionError::Invalid(format!(
                        "Function `mapFromArrays` needs two arrays, got {a} and {b}"
                    )));
                }
            };
            if kt == DataType::Null {
                return Err(FunctionError::Invalid(
                    "The keys of `mapFromArrays` cannot be NULL".to_string(),
                ));
            }
            Ok(call(
                Op::FromArrays,
                "mapFromArrays",
                map_type(kt, vt, true),
                args,
            ))
        }
        "mapKeys" | "mapValues" => {
            let (kf, vf) = need_map(name, &types[0])?;
            let (op, t) = if name == "mapKeys" {
                (Op::Keys, kf.data_type().clone())
            } else {
                (Op::Values, vf.data_type().clone())
            };
            Ok(call(op, name_static, list_of(t), args))
        }
        "mapContains" => {
            let (kf, _) = need_map(name, &types[0])?;
            let mut args = args;
            let k = args.pop().expect("arity");
            let k = cast_to(k, &types[1], kf.data_type());
            args.push(k);
            Ok(call(Op::Contains, "mapContains", DataType::Boolean, args))
        }
        "mapContainsKeyLike" | "mapExtractKeyLike" => {
            let (kf, _) = need_map(name, &types[0])?;
            if !matches!(
                kf.data_type(),
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
            ) {
                return Err(FunctionError::Invalid(format!(
                    "Function `{name}` needs a Map with String keys, got {}",
                    types[0]
                )));
            }
            if !matches!(&args[1], Expr::Literal(ScalarValue::Utf8(Some(_)), _)) {
                return Err(FunctionError::Invalid(format!(
                    "The pattern of `{name}` must be a constant String"
                )));
            }
            let (op, ret) = if name == "mapContainsKeyLike" {
                (Op::ContainsLike, DataType::Boolean)
            } else {
                (Op::ExtractLike, types[0].clone())
            };
            Ok(call(op, name_static, ret, args))
        }
        "mapAdd" | "mapSubtract" => {
            let (kf, vf) = need_map(name, &types[0])?;
            let mut wide_t = None;
            for t in &types {
                let (k, v) = need_map(name, t)?;
                if k.data_type() != kf.data_type() {
                    return Err(FunctionError::Invalid(format!(
                        "The keys of `{name}`'s maps must have one type, got {} and {}",
                        kf.data_type(),
                        k.data_type()
                    )));
                }
                let w = wide(v.data_type()).ok_or_else(|| {
                    FunctionError::Invalid(format!(
                        "The values of `{name}`'s maps must be numbers, got {}",
                        v.data_type()
                    ))
                })?;
                if wide_t
                    .as_ref()
                    .is_some_and(|x: &DataType| x.is_floating() != w.is_floating())
                {
                    return Err(FunctionError::Invalid(format!(
                        "The values of `{name}`'s maps must be all integers or all floats"
                    )));
                }
                if wide_t.is_none() || w == DataType::Int64 {
                    wide_t = Some(w);
                }
            }
            let _ = vf;
            let w = wide_t.expect("at least one map");
            let op = if name == "mapAdd" {
                Op::Add
            } else {
                Op::Subtract
            };
            Ok(call(
                op,
                name_static,
                map_type(kf.data_type().clone(), w, false),
                args,
            ))
        }
        "mapPopulateSeries" => {
            let (kf, vf) = need_map(name, &types[0])?;
            if !kf.data_type().is_integer() || !vf.data_type().is_integer() {
                return Err(FunctionError::Invalid(format!(
                    "Function `{name}` needs a Map of integers to integers, got {}",
                    types[0]
                )));
            }
            let mut args = args;
            let max = if args.len() == 2 {
                let m = args.pop().expect("arity");
                if !(types[1].is_integer() || types[1] == DataType::Null) {
                    return Err(FunctionError::Invalid(format!(
                        "The maximum of `{name}` must be an integer, got {}",
                        types[1]
                    )));
                }
                cast_to(m, &types[1], &DataType::Int64)
            } else {
                lit(ScalarValue::Int64(None))
            };
            args.push(max);
            args.push(lit(default_value(vf.data_type())));
            Ok(call(Op::Populate, name_static, types[0].clone(), args))
        }
        "mapUpdate" => {
            let (k1, v1) = need_map(name, &types[0])?;
            let (k2, v2) = need_map(name, &types[1])?;
            if k1.data_type() != k2.data_type() || v1.data_type() != v2.data_type() {
                return Err(FunctionError::Invalid(format!(
                    "The maps of `{name}` must have one type, got {} and {}",
                    types[0], types[1]
                )));
            }
            let ret = map_type(
                k1.data_type().clone(),
                v1.data_type().clone(),
                v1.is_nullable() || v2.is_nullable(),
            );
            Ok(call(Op::Update, name_static, ret, args))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

/// `mapFilter((k, v) -> cond, m)` and `mapApply((k, v) -> (k2, v2), m)`, through the array
/// lambdas over the map's keys and values.
fn higher_order(name: &str, args: Vec<Arg>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let mut it = args.into_iter();
    let (params, body) = match it.next() {
        Some(Arg::Lambda { params, body }) => (params, body),
        _ => {
            return Err(FunctionError::Invalid(format!(
                "Function `{name}` needs a lambda (k, v) -> … as its first argument"
            )));
        }
    };
    let m = match it.next() {
        Some(Arg::Expr(e)) => e,
        _ => {
            return Err(FunctionError::Invalid(format!(
                "Function `{name}` needs a Map as its second argument"
            )));
        }
    };
    let mt = type_of(&m, ctx)?;
    let (kf, vf) = need_map(name, &mt)?;
    if params.len() != 2 {
        return Err(FunctionError::Invalid(format!(
            "The lambda of `{name}` takes two parameters (key, value), got {}",
            params.len()
        )));
    }
    let (keys, values) = split(m, &kf, &vf);
    if name == "mapFilter" {
        let k2 = super::lambda::build(
            "arrayFilter",
            params.clone(),
            body.clone(),
            vec![Arg::Expr(keys.clone()), Arg::Expr(values.clone())],
            ctx,
        )?;
        // The values filtered by the same condition: the parameters bound the other way.
        let swapped = vec![params[1].clone(), params[0].clone()];
        let v2 = super::lambda::build(
            "arrayFilter",
            swapped,
            body,
            vec![Arg::Expr(values), Arg::Expr(keys)],
            ctx,
        )?;
        return Ok(call(Op::FromArrays, "mapFilter", mt, vec![k2, v2]));
    }
    let pairs = super::lambda::build(
        "arrayMap",
        params,
        body,
        vec![Arg::Expr(keys), Arg::Expr(values)],
        ctx,
    )?;
    let ret = match type_of(&pairs, ctx)? {
        DataType::List(f) => match f.data_type() {
            DataType::Struct(fs) if fs.len() == 2 => map_type(
                fs[0].data_type().clone(),
                fs[1].data_type().clone(),
                fs[1].is_nullable(),
            ),
            t => {
                return Err(FunctionError::Invalid(format!(
                    "The lambda of `mapApply` must return a tuple (key, value), got {t}"
                )));
            }
        },
        t => {
            return Err(FunctionError::Invalid(format!(
                "`mapApply`: unexpected type {t}"
            )));
        }
    };
    Ok(call(Op::FromEntries, "mapApply", ret, vec![pairs]))
}

/// A list column's rows as (start, end) child ranges (NULL rows empty).
fn ranges_of_list(l: &ListArray) -> Vec<(usize, usize)> {
    let o = l.value_offsets();
    (0..l.len())
        .map(|i| {
            if l.is_null(i) {
                (o[i] as usize, o[i] as usize)
            } else {
                (o[i] as usize, o[i + 1] as usize)
            }
        })
        .collect()
}

pub(super) fn ranges_of_map(m: &MapArray) -> Vec<(usize, usize)> {
    let o = m.value_offsets();
    (0..m.len())
        .map(|i| {
            if m.is_null(i) {
                (o[i] as usize, o[i] as usize)
            } else {
                (o[i] as usize, o[i + 1] as usize)
            }
        })
        .collect()
}

pub(super) fn as_map(a: &ArrayRef) -> Result<&MapArray> {
    match a.data_type() {
        DataType::Map(..) => Ok(a.as_map()),
        t => exec_err!("expected a Map, got {t}"),
    }
}

/// A map column of `ret`'s type from its entries: per row a run of `keys`/`values` indices.
pub(super) fn build_map(
    ret: &DataType,
    keys: &ArrayRef,
    key_idx: &[u32],
    values: &ArrayRef,
    value_idx: &[Option<u32>],
    lengths: Vec<usize>,
) -> Result<ArrayRef> {
    let DataType::Map(entries_field, sorted) = ret else {
        return exec_err!("expected a Map type, got {ret}");
    };
    let DataType::Struct(fields) = entries_field.data_type() else {
        return exec_err!("expected Map entries, got {}", entries_field.data_type());
    };
    let k = take(keys, &UInt32Array::from(key_idx.to_vec()), None)?;
    let v = take(values, &UInt32Array::from(value_idx.to_vec()), None)?;
    let k = if k.data_type() == fields[0].data_type() {
        k
    } else {
        cast(&k, fields[0].data_type())?
    };
    let v = if v.data_type() == fields[1].data_type() {
        v
    } else {
        cast(&v, fields[1].data_type())?
    };
    if k.null_count() > 0 {
        return exec_err!("A map key cannot be NULL");
    }
    let v = if v.null_count() > 0 && !fields[1].is_nullable() {
        return exec_err!("A value of a map of non-Nullable values is NULL");
    } else {
        v
    };
    let entries = StructArray::try_new(fields.clone(), vec![k, v], None)?;
    let m = MapArray::try_new(
        entries_field.clone(),
        OffsetBuffer::from_lengths(lengths),
        entries,
        None,
        *sorted,
    )?;
    Ok(Arc::new(m))
}

/// Whether `keys[j]` equals `probe[i]`, for any j and i.
fn equal_fn(
    keys: &dyn Array,
    probe: &dyn Array,
) -> Result<Box<dyn Fn(usize, usize) -> bool + Send + Sync>> {
    let cmp = make_comparator(keys, probe, SortOptions::default())?;
    Ok(Box::new(move |j, i| cmp(j, i) == Ordering::Equal))
}

fn eval(op: Op, args: &[ArrayRef], ret: &DataType) -> Result<ArrayRef> {
    match op {
        Op::FromArrays => {
            let (k, v) = (args[0].as_list::<i32>(), args[1].as_list::<i32>());
            let (kr, vr) = (ranges_of_list(k), ranges_of_list(v));
            let mut key_idx = vec![];
            let mut value_idx = vec![];
            let mut lengths = vec![];
            for (a, b) in kr.iter().zip(&vr) {
                if a.1 - a.0 != b.1 - b.0 {
                    return exec_err!("The keys and values arrays of a map must have equal sizes");
                }
                key_idx.extend((a.0..a.1).map(|j| j as u32));
                value_idx.extend((b.0..b.1).map(|j| Some(j as u32)));
                lengths.push(a.1 - a.0);
            }
            build_map(ret, k.values(), &key_idx, v.values(), &value_idx, lengths)
        }
        Op::FromEntries => {
            let l = args[0].as_list::<i32>();
            let s = l.values().as_struct();
            let (k, v) = (s.column(0), s.column(1));
            let mut key_idx = vec![];
            let mut lengths = vec![];
            for (a, b) in ranges_of_list(l) {
                key_idx.extend((a..b).map(|j| j as u32));
                lengths.push(b - a);
            }
            let value_idx: Vec<Option<u32>> = key_idx.iter().map(|j| Some(*j)).collect();
            build_map(ret, k, &key_idx, v, &value_idx, lengths)
        }
        Op::Keys | Op::Values => {
            let m = as_map(&args[0])?;
            let child = if op == Op::Keys {
                m.keys().clone()
            } else {
                m.values().clone()
            };
            let DataType::List(item) = ret else {
                return exec_err!("expected a list type");
            };
            let child = if child.data_type() == item.data_type() {
                child
            } else {
                cast(&child, item.data_type())?
            };
            let ranges = ranges_of_map(m);
            let idx: Vec<u32> = ranges
                .iter()
                .flat_map(|(a, b)| (*a..*b).map(|j| j as u32))
                .collect();
            let child = take(&child, &UInt32Array::from(idx), None)?;
            Ok(Arc::new(ListArray::try_new(
                item.clone(),
                OffsetBuffer::from_lengths(ranges.iter().map(|(a, b)| b - a)),
                child,
                None,
            )?))
        }
        Op::Contains | Op::Element => {
            let m = as_map(&args[0])?;
            let probe = &args[1];
            let eq = equal_fn(m.keys().as_ref(), probe.as_ref())?;
            let found: Vec<Option<usize>> = ranges_of_map(m)
                .iter()
                .enumerate()
                .map(|(i, (a, b))| {
                    if probe.is_null(i) {
                        None
                    } else {
                        (*a..*b).find(|&j| eq(j, i))
                    }
                })
                .collect();
            if op == Op::Contains {
                let mut out = BooleanBuilder::with_capacity(found.len());
                for f in found {
                    out.append_value(f.is_some());
                }
                return Ok(Arc::new(out.finish()));
            }
            // The values, then the default at index `n`.
            let default = args[2].slice(0, 1);
            let values = m.values();
            let values = if values.data_type() == default.data_type() {
                values.clone()
            } else {
                cast(values, default.data_type())?
            };
            let all = concat(&[values.as_ref(), default.as_ref()])?;
            let n = values.len() as u32;
            let idx = UInt32Array::from(
                found
                    .into_iter()
                    .map(|f| f.map_or(n, |j| j as u32))
                    .collect::<Vec<_>>(),
            );
            let out = take(&all, &idx, None)?;
            Ok(if out.data_type() == ret {
                out
            } else {
                cast(&out, ret)?
            })
        }
        Op::ContainsLike | Op::ExtractLike => {
            let m = as_map(&args[0])?;
            let pattern = args[1].as_string::<i32>();
            if pattern.is_empty() || pattern.is_null(0) {
                return exec_err!("The pattern of a map function is NULL");
            }
            let p = StringArray::from(vec![pattern.value(0)]);
            let keys = cast(m.keys(), &DataType::Utf8)?;
            let hits: BooleanArray =
                datafusion::arrow::compute::kernels::comparison::like(&keys, &Scalar::new(&p))?;
            let ranges = ranges_of_map(m);
            if op == Op::ContainsLike {
                let mut out = BooleanBuilder::with_capacity(ranges.len());
                for (a, b) in ranges {
                    out.append_value((a..b).any(|j| hits.value(j)));
                }
                return Ok(Arc::new(out.finish()));
            }
            let mut idx = vec![];
            let mut lengths = vec![];
            for (a, b) in ranges {
                let before = idx.len();
                idx.extend((a..b).filter(|&j| hits.value(j)).map(|j| j as u32));
                lengths.push(idx.len() - before);
            }
            let value_idx: Vec<Option<u32>> = idx.iter().map(|j| Some(*j)).collect();
            build_map(ret, m.keys(), &idx, m.values(), &value_idx, lengths)
        }
        Op::Add | Op::Subtract => super::map_sums::add_maps(op == Op::Subtract, args, ret),
        Op::Populate => {
            let m = as_map(&args[0])?;
            let max = args[1].as_primitive::<Int64Type>();
            let keys = cast(m.keys(), &DataType::Int64)?;
            let keys = keys.as_primitive::<Int64Type>();
            let default = args[2].slice(0, 1);
            let n = m.values().len() as u32;
            let values = concat(&[m.values().as_ref(), default.as_ref()])?;
            let mut out_keys: Vec<i64> = vec![];
            let mut value_idx = vec![];
            let mut lengths = vec![];
            // A series can outgrow its map: reserve it before building it.
            let mut budget = crate::hogql::functions::budget::Output::new("mapPopulateSeries");
            let entry_bytes = 16 + m.values().data_type().primitive_width().unwrap_or(8);
            for (i, (a, b)) in ranges_of_map(m).into_iter().enumerate() {
                if a == b {
                    lengths.push(0);
                    continue;
                }
                let lo = (a..b).map(|j| keys.value(j)).min().unwrap_or(0);
                let hi = if max.is_null(i) {
                    (a..b).map(|j| keys.value(j)).max().unwrap_or(0)
                } else {
                    max.value(i)
                };
                if hi.saturating_sub(lo) >= MAX_SERIES {
                    return exec_err!(
                        "mapPopulateSeries: a series of more than {MAX_SERIES} keys is too long"
                    );
                }
                let before = out_keys.len();
                if hi >= lo {
                    budget.take((hi - lo + 1) as usize * entry_bytes)?;
                }
                let mut k = lo;
                while k <= hi {
                    out_keys.push(k);
                    let at = (a..b).find(|&j| keys.value(j) == k);
                    value_idx.push(Some(at.map_or(n, |j| j as u32)));
                    k += 1;
                }
                lengths.push(out_keys.len() - before);
            }
            let key_arr: ArrayRef = Arc::new(Int64Array::from(out_keys));
            let key_idx: Vec<u32> = (0..key_arr.len() as u32).collect();
            build_map(ret, &key_arr, &key_idx, &values, &value_idx, lengths)
        }
        Op::Update => {
            let (m1, m2) = (as_map(&args[0])?, as_map(&args[1])?);
            let keys = concat(&[m1.keys().as_ref(), m2.keys().as_ref()])?;
            let values = concat(&[m1.values().as_ref(), m2.values().as_ref()])?;
            let off = m1.keys().len();
            let eq = equal_fn(keys.as_ref(), keys.as_ref())?;
            let mut key_idx = vec![];
            let mut value_idx = vec![];
            let mut lengths = vec![];
            for ((a1, b1), (a2, b2)) in ranges_of_map(m1).into_iter().zip(ranges_of_map(m2)) {
                let before = key_idx.len();
                let kept = (a1..b1).filter(|&j| !(a2..b2).any(|x| eq(x + off, j)));
                for j in kept.chain((a2..b2).map(|x| x + off)) {
                    key_idx.push(j as u32);
                    value_idx.push(Some(j as u32));
                }
                lengths.push(key_idx.len() - before);
            }
            build_map(ret, &keys, &key_idx, &values, &value_idx, lengths)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::Arg;
    use super::super::testutil::{Table, col, lit};
    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
    use datafusion::logical_expr::Expr;
    use std::sync::Arc;

    fn table() -> Table {
        let k: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        let v: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
        Table::new(vec![("k", k, false), ("v", v, true)])
    }

    /// Each expression's rows, printed by Arrow.
    fn rows(t: &Table, e: Expr) -> Vec<String> {
        t.project(vec![e]).remove(0).rows
    }

    #[test]
    fn build_read_and_combine() {
        let t = table();
        let m = t.f("map", vec![col("k"), col("v"), lit("z"), lit(7i64)]);
        assert_eq!(rows(&t, m.clone()), vec!["{a: 1, z: 7}", "{b: NULL, z: 7}"]);
        // values Nullable: a missing key reads NULL
        let get = |key: &str| t.f("arrayElement", vec![m.clone(), lit(key)]);
        assert_eq!(rows(&t, get("z")), vec!["7", "7"]);
        assert_eq!(rows(&t, get("a")), vec!["1", "NULL"]);
        let plain = t.f("map", vec![lit("x"), lit(1i64), lit("x"), lit(2i64)]);
        let get = |key: &str| t.f("arrayElement", vec![plain.clone(), lit(key)]);
        assert_eq!(
            rows(&t, get("x")),
            vec!["1", "1"],
            "the first of a repeated key"
        );
        assert_eq!(
            rows(&t, get("q")),
            vec!["0", "0"],
            "the default for a missing key"
        );
        assert_eq!(
            rows(&t, t.f("mapKeys", vec![plain.clone()])),
            vec!["[x, x]", "[x, x]"]
        );
        assert_eq!(
            rows(&t, t.f("mapContains", vec![m.clone(), col("k")])),
            vec!["true", "true"]
        );
        let one = t.f("map", vec![col("k"), lit(1i64)]);
        let add = t.f("mapAdd", vec![one.clone(), plain.clone(), one.clone()]);
        assert_eq!(rows(&t, add), vec!["{a: 2, x: 3}", "{b: 2, x: 3}"]);
        // the literals' values are UInt8, so the difference is a UInt64 and wraps (ClickHouse)
        let sub = t.f("mapSubtract", vec![one.clone(), plain.clone()]);
        assert_eq!(
            rows(&t, sub),
            vec![
                "{a: 1, x: 18446744073709551613}",
                "{b: 1, x: 18446744073709551613}"
            ]
        );
        let upd = t.f("mapUpdate", vec![plain, one]);
        assert_eq!(
            rows(&t, upd),
            vec!["{x: 1, x: 2, a: 1}", "{x: 1, x: 2, b: 1}"]
        );
        let like = t.f("mapExtractKeyLike", vec![m, lit("_")]);
        assert_eq!(rows(&t, like), vec!["{a: 1, z: 7}", "{b: NULL, z: 7}"]);
    }

    #[test]
    fn series_and_errors() {
        let t = table();
        let m = t.f("map", vec![lit(3i64), lit(30i64), lit(1i64), lit(10i64)]);
        assert_eq!(
            rows(&t, t.f("mapPopulateSeries", vec![m.clone()]))[0],
            "{1: 10, 2: 0, 3: 30}"
        );
        assert_eq!(
            rows(&t, t.f("mapPopulateSeries", vec![m.clone(), lit(1i64)]))[0],
            "{1: 10}"
        );
        let arg = Arg::Expr;
        for (name, args) in [
            ("map", vec![lit("a")]),
            ("mapKeys", vec![col("k")]),
            ("mapAdd", vec![m.clone(), col("k")]),
            ("mapContainsKeyLike", vec![m.clone(), lit("%")]),
            (
                "mapPopulateSeries",
                vec![t.f("map", vec![lit(1i64), lit("x")])],
            ),
        ] {
            let r = t.try_call(name, vec![], args.into_iter().map(arg).collect(), false);
            assert!(r.is_err(), "{name}");
        }
        // unequal arrays are an error of the query, not a panic
        let keys: ArrayRef = Arc::new(datafusion::arrow::array::ListArray::from_iter_primitive::<
            datafusion::arrow::datatypes::Int64Type,
            _,
            _,
        >(vec![Some(vec![Some(1), Some(2)])]));
        let values: ArrayRef =
            Arc::new(datafusion::arrow::array::ListArray::from_iter_primitive::<
                datafusion::arrow::datatypes::Int64Type,
                _,
                _,
            >(vec![Some(vec![Some(1)])]));
        let ret = super::map_type(
            datafusion::arrow::datatypes::DataType::Int64,
            datafusion::arrow::datatypes::DataType::Int64,
            true,
        );
        let r = super::eval(super::Op::FromArrays, &[keys, values], &ret);
        assert!(r.unwrap_err().to_string().contains("equal sizes"));
    }
}
