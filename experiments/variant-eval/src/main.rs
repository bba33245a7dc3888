//! Storage v2's question: a project's frequent properties as plain typed columns plus a
//! residual JSON string (what hedgerow does), or `properties` as one Parquet VARIANT column
//! shredded on the same keys (the parquet-variant crates of the Arrow 59 family)? Measures,
//! on the generator's events, the bytes of the property columns each way and the time to read
//! one string property, one numeric property and the whole properties back as JSON.
//!
//! `cargo run --release -- <events.parquet written by hedgerow gen> [out dir]`

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, RecordBatch, StringArray,
    StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet_variant::{VariantPath, VariantPathElement};
use parquet_variant_compute::{
    GetOptions, VariantArray, json_to_variant, shred_variant, unshred_variant, variant_get,
};
use parquet_variant_json::VariantToJson;
use serde_json::{Map, Value};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Ty {
    Str,
    Num,
    Bool,
}

fn props() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
        .set_max_row_group_row_count(Some(128 * 1024))
        .build()
}

fn write(path: &str, batch: &RecordBatch) -> u64 {
    let f = File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(f, batch.schema(), Some(props())).unwrap();
    for off in (0..batch.num_rows()).step_by(65536) {
        w.write(&batch.slice(off, 65536.min(batch.num_rows() - off)))
            .unwrap();
    }
    w.close().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Reads the leaf columns whose path starts with one of `prefixes`, `runs` times; the best time.
fn read(path: &str, prefixes: &[&str], runs: usize) -> (f64, Vec<RecordBatch>) {
    let mut best = f64::MAX;
    let mut out = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let b = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let descr = b.parquet_schema();
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|i| {
                let p = descr.column(*i).path().string();
                prefixes.iter().any(|x| {
                    p == *x
                        || p.starts_with(&format!("{x}."))
                        || (x.ends_with('_') && p.starts_with(x))
                })
            })
            .collect();
        let mask = ProjectionMask::leaves(descr, leaves);
        out = b
            .with_projection(mask)
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let input = &args[1];
    let out = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "/tmp/variant-eval".into());
    std::fs::create_dir_all(&out).unwrap();
    let batches: Vec<RecordBatch> =
        ParquetRecordBatchReaderBuilder::try_new(File::open(input).unwrap())
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
    let mut json: Vec<String> = Vec::new();
    for b in &batches {
        let c = b.column_by_name("properties").unwrap();
        let c = arrow::compute::cast(c, &DataType::Utf8).unwrap();
        json.extend(c.as_string::<i32>().iter().map(|s| s.unwrap().to_owned()));
    }
    let n = json.len();
    let maps: Vec<Map<String, Value>> = json
        .iter()
        .map(|s| match serde_json::from_str(s).unwrap() {
            Value::Object(m) => m,
            _ => Map::new(),
        })
        .collect();
    // The keys in at least 0.1% of events, typed by their first scalar value (hedgerow's
    // defaults; objects are never promoted).
    let mut count: HashMap<&str, usize> = HashMap::new();
    let mut ty: HashMap<&str, Ty> = HashMap::new();
    for m in &maps {
        for (k, v) in m {
            *count.entry(k).or_default() += 1;
            let t = match v {
                Value::String(_) => Some(Ty::Str),
                Value::Number(_) => Some(Ty::Num),
                Value::Bool(_) => Some(Ty::Bool),
                _ => None,
            };
            if let Some(t) = t {
                ty.entry(k).or_insert(t);
            }
        }
    }
    let mut hot: Vec<(&str, Ty)> = count
        .iter()
        .filter(|(k, c)| **c * 1000 >= n && ty.contains_key(*k))
        .map(|(k, _)| (*k, ty[k]))
        .collect();
    hot.sort();
    println!("{n} events, {} keys, {} promoted", count.len(), hot.len());

    // A: typed columns + residual JSON (clean values leave the JSON; simplified: a value of
    // the column's type moves, anything else stays).
    let mut residual = StringBuilder::new();
    let mut cols: Vec<(String, ArrayRef)> = Vec::new();
    let mut sb: Vec<StringBuilder> = hot.iter().map(|_| StringBuilder::new()).collect();
    let mut nb: Vec<Float64Builder> = hot.iter().map(|_| Float64Builder::new()).collect();
    let mut bb: Vec<BooleanBuilder> = hot.iter().map(|_| BooleanBuilder::new()).collect();
    for m in &maps {
        let mut rest = m.clone();
        for (i, (k, t)) in hot.iter().enumerate() {
            let v = m.get(*k);
            let moved = match (t, v) {
                (Ty::Str, Some(Value::String(s))) if !s.is_empty() => {
                    sb[i].append_value(s);
                    true
                }
                (Ty::Num, Some(Value::Number(x)))
                    if x.is_i64() || x.as_f64().is_some_and(|f| f.fract() != 0.0) =>
                {
                    nb[i].append_value(x.as_f64().unwrap());
                    true
                }
                (Ty::Bool, Some(Value::Bool(b))) => {
                    bb[i].append_value(*b);
                    true
                }
                _ => false,
            };
            match t {
                Ty::Str if !moved => sb[i].append_null(),
                Ty::Num if !moved => nb[i].append_null(),
                Ty::Bool if !moved => bb[i].append_null(),
                _ => {}
            }
            if moved {
                rest.remove(*k);
            }
        }
        residual.append_value(serde_json::to_string(&rest).unwrap());
    }
    cols.push(("properties".into(), Arc::new(residual.finish())));
    for (i, (k, t)) in hot.iter().enumerate() {
        let a: ArrayRef = match t {
            Ty::Str => Arc::new(sb[i].finish()),
            Ty::Num => Arc::new(nb[i].finish()),
            Ty::Bool => Arc::new(bb[i].finish()),
        };
        cols.push((format!("p_{k}"), a));
    }
    let schema = Arc::new(Schema::new(
        cols.iter()
            .map(|(n, a)| Field::new(n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let typed = RecordBatch::try_new(schema, cols.into_iter().map(|(_, a)| a).collect()).unwrap();
    let path_a = format!("{out}/typed.parquet");
    let bytes_a = write(&path_a, &typed);

    // B: one VARIANT column, shredded on the same keys with the same types.
    let text: ArrayRef = Arc::new(StringArray::from(json.clone()));
    let t = Instant::now();
    let variant = json_to_variant(&text).unwrap();
    let shred_fields: Vec<Field> = hot
        .iter()
        .map(|(k, t)| {
            Field::new(
                *k,
                match t {
                    Ty::Str => DataType::Utf8,
                    Ty::Num => DataType::Float64,
                    Ty::Bool => DataType::Boolean,
                },
                true,
            )
        })
        .collect();
    let shredded = shred_variant(&variant, &DataType::Struct(shred_fields.into())).unwrap();
    let encode_s = t.elapsed().as_secs_f64();
    let write_variant = |name: &str, v: &VariantArray| {
        let field = v.field("properties");
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![field])),
            vec![ArrayRef::from(v.clone())],
        )
        .unwrap();
        let p = format!("{out}/{name}.parquet");
        (write(&p, &batch), p)
    };
    let (bytes_b, path_b) = write_variant("variant_shredded", &shredded);
    let (bytes_c, _) = write_variant("variant_unshredded", &variant);
    let per = |b: u64| b as f64 / n as f64;
    println!("bytes/event of the properties: JSON string alone {:.1}", {
        let only: ArrayRef = Arc::new(StringArray::from(json.clone()));
        let b = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "properties",
                DataType::Utf8,
                false,
            )])),
            vec![only],
        )
        .unwrap();
        per(write(&format!("{out}/json.parquet"), &b))
    });
    println!(
        "typed + residual {:.1}; VARIANT shredded {:.1}; VARIANT unshredded {:.1} (encode+shred {:.2}s)",
        per(bytes_a),
        per(bytes_b),
        per(bytes_c),
        encode_s
    );

    // Reads: one string property, one numeric property, the whole properties.
    let (s_key, n_key) = ("utm_source", "revenue");
    let (ta, ba) = read(&path_a, &[&format!("p_{s_key}")], 5);
    let non_null_a: usize = ba
        .iter()
        .map(|b| b.column(0).len() - b.column(0).null_count())
        .sum();
    let (tb, bb2) = read(
        &path_b,
        &[
            "properties.metadata",
            &format!("properties.typed_value.{s_key}"),
        ],
        5,
    );
    let t2 = Instant::now();
    let mut non_null_b = 0;
    for b in &bb2 {
        let v = variant_get(
            b.column(0),
            GetOptions::new_with_path(VariantPath::new(vec![VariantPathElement::field(s_key)]))
                .with_as_type(Some(Arc::new(Field::new(s_key, DataType::Utf8, true)))),
        )
        .unwrap();
        non_null_b += v.len() - v.null_count();
    }
    let tb_get = t2.elapsed().as_secs_f64();
    println!(
        "{s_key}: typed column {:.1} ms ({non_null_a} values); VARIANT {:.1} ms read + {:.1} ms variant_get ({non_null_b} values)",
        ta * 1e3,
        tb * 1e3,
        tb_get * 1e3
    );
    let (ta, _) = read(&path_a, &[&format!("p_{n_key}")], 5);
    let (tb, bb3) = read(
        &path_b,
        &[
            "properties.metadata",
            &format!("properties.typed_value.{n_key}"),
        ],
        5,
    );
    let t3 = Instant::now();
    for b in &bb3 {
        let _ = variant_get(
            b.column(0),
            GetOptions::new_with_path(VariantPath::new(vec![VariantPathElement::field(n_key)]))
                .with_as_type(Some(Arc::new(Field::new(n_key, DataType::Float64, true)))),
        )
        .unwrap();
    }
    println!(
        "{n_key}: typed column {:.1} ms; VARIANT {:.1} ms read + {:.1} ms variant_get",
        ta * 1e3,
        tb * 1e3,
        t3.elapsed().as_secs_f64() * 1e3
    );
    // Whole properties back as JSON text.
    let (ta, ba) = read(&path_a, &["properties", "p_"], 1);
    let t4 = Instant::now();
    let mut total = 0usize;
    for b in &ba {
        let res = b.column(0).as_string::<i32>();
        for i in 0..b.num_rows() {
            let mut m: Map<String, Value> = serde_json::from_str(res.value(i)).unwrap();
            for (j, (k, _)) in hot.iter().enumerate() {
                let c = b.column(j + 1);
                if c.is_valid(i) {
                    let v = match c.data_type() {
                        DataType::Float64 => serde_json::json!(
                            c.as_primitive::<arrow::datatypes::Float64Type>().value(i)
                        ),
                        DataType::Boolean => Value::Bool(c.as_boolean().value(i)),
                        _ => Value::String(c.as_string::<i32>().value(i).to_owned()),
                    };
                    m.entry(k.to_string()).or_insert(v);
                }
            }
            total += serde_json::to_string(&m).unwrap().len();
        }
    }
    let rebuild_a = t4.elapsed().as_secs_f64();
    let (tb, bb4) = read(&path_b, &["properties"], 1);
    let t5 = Instant::now();
    let mut total_b = 0usize;
    for b in &bb4 {
        // Unshredded first (value(i) of a shredded object reads null in 59.3), then row by row.
        let shredded = VariantArray::try_new(b.column(0)).unwrap();
        let shredded = unshred_variant(&shredded).unwrap();
        let mut buf = Vec::new();
        for i in 0..shredded.len() {
            buf.clear();
            shredded.value(i).to_json(&mut buf).unwrap();
            total_b += buf.len();
        }
    }
    println!(
        "whole properties: typed+residual {:.0} ms read + {:.0} ms rebuild ({total} bytes); VARIANT {:.0} ms read + {:.0} ms to JSON ({total_b} bytes)",
        ta * 1e3,
        rebuild_a * 1e3,
        tb * 1e3,
        t5.elapsed().as_secs_f64() * 1e3
    );
}
