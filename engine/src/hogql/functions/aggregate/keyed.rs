//! `sumMap`, `minMap` and `maxMap` over the rows a [`super::rows::Rows`] aggregate kept.

use super::default_value;
use super::rows::{KeyedOp, wide_type};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array, new_empty_array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, UInt64Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue, exec_err};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A list column's flattened values and each row's range into them.
fn flat(a: &ArrayRef) -> Result<(ArrayRef, Vec<(usize, usize)>)> {
    let l = a.as_list::<i32>();
    let o = l.value_offsets();
    let ranges = (0..l.len())
        .map(|i| (o[i] as usize, o[i + 1] as usize))
        .collect();
    Ok((l.values().clone(), ranges))
}

/// See [`RowsKind::KeyedMap`].
pub(super) fn keyed_map(
    op: KeyedOp,
    map_out: bool,
    cols: &[ArrayRef],
    out: &DataType,
) -> Result<ScalarValue> {
    let (keys, key_ranges) = flat(&cols[0])?;
    let conv = RowConverter::new(vec![SortField::new(keys.data_type().clone())])?;
    let key_rows = conv.convert_columns(std::slice::from_ref(&keys))?;
    let mut values = vec![];
    for c in &cols[1..] {
        let (v, r) = flat(c)?;
        let v = if op == KeyedOp::Sum {
            cast(&v, &wide_type(v.data_type()))?
        } else {
            v
        };
        values.push((v, r));
    }
    // key → (its first index into `keys`, per value column: the best index, or the sum)
    enum Best {
        Index(Option<usize>),
        I(i64),
        U(u64),
        F(f64),
    }
    let mut acc: BTreeMap<_, (usize, Vec<Best>)> = BTreeMap::new();
    let cmps = values
        .iter()
        .map(|(v, _)| {
            datafusion::arrow::array::make_comparator(v.as_ref(), v.as_ref(), Default::default())
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    for (row, &(ka, kb)) in key_ranges.iter().enumerate() {
        if values.iter().any(|(_, r)| r[row].1 - r[row].0 != kb - ka) {
            return exec_err!("Sizes of keys and values arrays do not match");
        }
        // A NULL key is a key of its own (sorted first, as in ClickHouse).
        for (n, ki) in (ka..kb).enumerate() {
            let entry = acc.entry(key_rows.row(ki)).or_insert_with(|| {
                let init = values
                    .iter()
                    .map(|(v, _)| match (op, v.data_type()) {
                        (KeyedOp::Sum, DataType::Int64) => Best::I(0),
                        (KeyedOp::Sum, DataType::UInt64) => Best::U(0),
                        (KeyedOp::Sum, _) => Best::F(0.0),
                        _ => Best::Index(None),
                    })
                    .collect();
                (ki, init)
            });
            for (((v, r), best), cmp) in values.iter().zip(entry.1.iter_mut()).zip(&cmps) {
                let vi = r[row].0 + n;
                if v.is_null(vi) {
                    continue;
                }
                match best {
                    Best::I(s) => *s = s.wrapping_add(v.as_primitive::<Int64Type>().value(vi)),
                    Best::U(s) => *s = s.wrapping_add(v.as_primitive::<UInt64Type>().value(vi)),
                    Best::F(s) => *s += v.as_primitive::<Float64Type>().value(vi),
                    Best::Index(b) => {
                        let better = match b {
                            None => true,
                            Some(cur) => {
                                let o = cmp(vi, *cur);
                                if op == KeyedOp::Min {
                                    o.is_lt()
                                } else {
                                    o.is_gt()
                                }
                            }
                        };
                        if better {
                            *b = Some(vi);
                        }
                    }
                }
            }
        }
    }
    let value_types: Vec<DataType> = values.iter().map(|(v, _)| v.data_type().clone()).collect();
    let mut key_idx = vec![];
    let mut cols_out: Vec<Vec<ScalarValue>> = vec![vec![]; values.len()];
    for (_, (ki, bests)) in acc {
        let all_zero = bests.iter().all(|b| match b {
            Best::I(x) => *x == 0,
            Best::U(x) => *x == 0,
            Best::F(x) => *x == 0.0,
            Best::Index(_) => false,
        });
        if op == KeyedOp::Sum && !map_out && all_zero {
            continue;
        }
        key_idx.push(ki as u32);
        for (c, (b, (v, _))) in bests.into_iter().zip(&values).enumerate() {
            cols_out[c].push(match b {
                Best::I(x) => ScalarValue::Int64(Some(x)),
                Best::U(x) => ScalarValue::UInt64(Some(x)),
                Best::F(x) => ScalarValue::Float64(Some(x)),
                Best::Index(Some(i)) => ScalarValue::try_from_array(v, i)?,
                Best::Index(None) => default_value(v.data_type()),
            });
        }
    }
    let out_keys = take(&keys, &UInt32Array::from(key_idx), None)?;
    let out_values = cols_out
        .into_iter()
        .zip(&value_types)
        .map(|(vals, t)| {
            if vals.is_empty() {
                Ok(new_empty_array(t))
            } else {
                ScalarValue::iter_to_array(vals)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    if map_out {
        let DataType::Map(entries_field, _) = out else {
            return exec_err!("sumMap: expected a Map type, got {out}");
        };
        let DataType::Struct(fields) = entries_field.data_type() else {
            return exec_err!("sumMap: expected Map entries");
        };
        let n = out_keys.len();
        let entries = datafusion::arrow::array::StructArray::try_new(
            fields.clone(),
            vec![
                cast(&out_keys, fields[0].data_type())?,
                out_values[0].clone(),
            ],
            None,
        )?;
        let m = datafusion::arrow::array::MapArray::try_new(
            entries_field.clone(),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([n]),
            entries,
            None,
            false,
        )?;
        return ScalarValue::try_from_array(&(Arc::new(m) as ArrayRef), 0);
    }
    let DataType::Struct(fields) = out else {
        return exec_err!("sumMap: expected a tuple type, got {out}");
    };
    let mut arrays: Vec<ArrayRef> = vec![];
    for (i, a) in std::iter::once(out_keys).chain(out_values).enumerate() {
        let target = match fields[i].data_type() {
            DataType::List(f) => f.data_type().clone(),
            t => t.clone(),
        };
        let a = if a.data_type() == &target {
            a
        } else {
            cast(&a, &target)?
        };
        arrays.push(scalar_list_array(a));
    }
    let st = datafusion::arrow::array::StructArray::try_new(fields.clone(), arrays, None)?;
    Ok(ScalarValue::Struct(Arc::new(st)))
}

/// `values` as a one-row list array.
fn scalar_list_array(values: ArrayRef) -> ArrayRef {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    Arc::new(datafusion::arrow::array::ListArray::new(
        field,
        datafusion::arrow::buffer::OffsetBuffer::from_lengths([values.len()]),
        values,
        None,
    ))
}
