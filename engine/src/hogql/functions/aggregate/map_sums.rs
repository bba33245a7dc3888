//! `mapAdd` and `mapSubtract`: one entry per key (sorted), the values summed (the first map's
//! minus the others') in the 64-bit type, wrapping as ClickHouse.

use super::maps::{as_map, build_map, kv, ranges_of_map};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, MapArray, UInt64Array, new_empty_array,
};
use datafusion::arrow::compute::{cast, concat};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, exec_err};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A sum per key: (the key's first index into the keys, the running value).
enum Acc {
    I(i64),
    U(u64),
    F(f64),
}

pub(super) fn add_maps(subtract: bool, args: &[ArrayRef], ret: &DataType) -> Result<ArrayRef> {
    let Some((_, vf)) = kv(ret) else {
        return exec_err!("expected a Map type, got {ret}");
    };
    let wide = vf.data_type().clone();
    let maps = args
        .iter()
        .map(as_map)
        .collect::<Result<Vec<&MapArray>>>()?;
    let key_parts: Vec<&dyn Array> = maps.iter().map(|m| m.keys().as_ref()).collect();
    let keys = concat(&key_parts)?;
    let value_parts = maps
        .iter()
        .map(|m| cast(m.values(), &wide))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let value_refs: Vec<&dyn Array> = value_parts.iter().map(|a| a.as_ref()).collect();
    let values = concat(&value_refs)?;
    let conv = RowConverter::new(vec![SortField::new(keys.data_type().clone())])?;
    let rows = conv.convert_columns(std::slice::from_ref(&keys))?;
    let mut offsets = vec![0usize];
    for m in &maps {
        offsets.push(offsets.last().copied().unwrap_or(0) + m.keys().len());
    }
    let ranges: Vec<Vec<(usize, usize)>> = maps.iter().map(|m| ranges_of_map(m)).collect();
    let n = maps[0].len();
    let mut key_idx = vec![];
    let mut out_values: Vec<Acc> = vec![];
    let mut lengths = vec![];
    for row in 0..n {
        let mut acc: BTreeMap<_, (u32, Acc)> = BTreeMap::new();
        for (mi, r) in ranges.iter().enumerate() {
            let (a, b) = r[row];
            for j in (a..b).map(|j| j + offsets[mi]) {
                if values.is_null(j) {
                    continue;
                }
                let neg = subtract && mi > 0;
                let v = match &wide {
                    DataType::Int64 => Acc::I(values.as_primitive::<Int64Type>().value(j)),
                    DataType::UInt64 => Acc::U(
                        values
                            .as_primitive::<datafusion::arrow::datatypes::UInt64Type>()
                            .value(j),
                    ),
                    _ => Acc::F(
                        values
                            .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
                            .value(j),
                    ),
                };
                let e = acc.entry(rows.row(j)).or_insert((
                    j as u32,
                    match v {
                        Acc::I(_) => Acc::I(0),
                        Acc::U(_) => Acc::U(0),
                        Acc::F(_) => Acc::F(0.0),
                    },
                ));
                e.1 = match (&e.1, v) {
                    (Acc::I(s), Acc::I(x)) if neg => Acc::I(s.wrapping_sub(x)),
                    (Acc::I(s), Acc::I(x)) => Acc::I(s.wrapping_add(x)),
                    (Acc::U(s), Acc::U(x)) if neg => Acc::U(s.wrapping_sub(x)),
                    (Acc::U(s), Acc::U(x)) => Acc::U(s.wrapping_add(x)),
                    (Acc::F(s), Acc::F(x)) if neg => Acc::F(s - x),
                    (Acc::F(s), Acc::F(x)) => Acc::F(s + x),
                    _ => return exec_err!("mapAdd: mixed value types"),
                };
            }
        }
        lengths.push(acc.len());
        for (_, (j, v)) in acc {
            key_idx.push(j);
            out_values.push(v);
        }
    }
    let vals: ArrayRef = match &wide {
        DataType::Int64 => Arc::new(Int64Array::from(
            out_values
                .iter()
                .map(|v| if let Acc::I(x) = v { *x } else { 0 })
                .collect::<Vec<_>>(),
        )),
        DataType::UInt64 => Arc::new(UInt64Array::from(
            out_values
                .iter()
                .map(|v| if let Acc::U(x) = v { *x } else { 0 })
                .collect::<Vec<_>>(),
        )),
        _ => Arc::new(Float64Array::from(
            out_values
                .iter()
                .map(|v| if let Acc::F(x) = v { *x } else { 0.0 })
                .collect::<Vec<_>>(),
        )),
    };
    let value_idx: Vec<Option<u32>> = (0..vals.len() as u32).map(Some).collect();
    if key_idx.is_empty() {
        let empty = new_empty_array(keys.data_type());
        return build_map(ret, &empty, &[], &vals, &[], lengths);
    }
    build_map(ret, &keys, &key_idx, &vals, &value_idx, lengths)
}
