//! ClickHouse's bitmaps (`bitmapBuild`, `bitmapToArray`, `bitmapAnd`, …) with the answers
//! ClickHouse gives, including the order `bitmapToArray` lists the values in.
//!
//! ClickHouse's bitmap is a small set of up to 32 values kept in insertion order, which turns
//! into a roaring bitmap (values in ascending order of their unsigned bits) when a 33rd value
//! arrives or an operation needs one (`bitmapXor`, `bitmapTransform`, an Or with a roaring
//! bitmap). So a bitmap here is a tuple `(large, values)`: whether it is the roaring form and
//! its values in the order ClickHouse iterates them. Every operation follows ClickHouse's
//! rules for each form, so `bitmapToArray` and the other observable answers are ClickHouse's.
//! A bitmap itself prints as that tuple (ClickHouse prints its binary state).
//!
//! Values are unsigned integers or Int64 (whose order is that of their unsigned bits, as in
//! ClickHouse); Int8/Int16/Int32 bitmaps are refused, since ClickHouse compares their values
//! one way in the small form and another in the roaring form.
//!
//! `bitmapSubsetLimit` of a small bitmap with more values from the start than the limit
//! answers ClickHouse's selection in an order ClickHouse leaves to its selection algorithm:
//! that case fails with an error naming the function rather than guess the order.

use super::{FunctionError, type_of};
use crate::hogql::functions::FnContext;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, ListArray, StructArray, UInt64Array, UInt64Builder,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type, UInt64Type};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// The scalar functions translated here.
pub(super) const NAMES: &[&str] = &[
    "bitmapBuild",
    "bitmapToArray",
    "bitmapSubsetInRange",
    "bitmapSubsetLimit",
    "subBitmap",
    "bitmapContains",
    "bitmapHasAny",
    "bitmapHasAll",
    "bitmapCardinality",
    "bitmapMin",
    "bitmapMax",
    "bitmapTransform",
    "bitmapAnd",
    "bitmapOr",
    "bitmapXor",
    "bitmapAndnot",
    "bitmapAndCardinality",
    "bitmapOrCardinality",
    "bitmapXorCardinality",
    "bitmapAndnotCardinality",
];

/// Values a small bitmap holds before it turns into a roaring one.
const SMALL: usize = 32;

const LARGE_FIELD: &str = "bitmap_large";
const VALUES_FIELD: &str = "bitmap_values";

/// The tuple type of a bitmap of `t` values.
pub(super) fn bitmap_type(t: &DataType) -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new(LARGE_FIELD, DataType::Boolean, false),
        Field::new(VALUES_FIELD, list_of(t.clone()), false),
    ]))
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(t, true)))
}

/// The value type of a bitmap type.
pub(super) fn bitmap_item(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Struct(fs)
            if fs.len() == 2 && fs[0].name() == LARGE_FIELD && fs[1].name() == VALUES_FIELD =>
        {
            match fs[1].data_type() {
                DataType::List(f) => Some(f.data_type().clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

fn allowed_item(t: &DataType) -> bool {
    t.is_unsigned_integer() || *t == DataType::Int64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Build,
    ToArray,
    SubsetInRange,
    SubsetLimit,
    SubBitmap,
    Contains,
    HasAny,
    HasAll,
    Cardinality,
    Min,
    Max,
    Transform,
    And,
    Or,
    Xor,
    Andnot,
    AndCardinality,
    OrCardinality,
    XorCardinality,
    AndnotCardinality,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BitmapUdf {
    op: Op,
    name: &'static str,
    /// The bitmap's value type.
    item: DataType,
    ret: DataType,
    signature: Signature,
}

impl ScalarUDFImpl for BitmapUdf {
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
        Ok(ColumnarValue::Array(eval(self, &arrays, args.number_rows)?))
    }
}

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let name_static = NAMES
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("bitmap");
    let types = args
        .iter()
        .map(|a| type_of(a, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let invalid = |m: String| Err(FunctionError::Invalid(m));
    let bitmap_arg = |i: usize| -> Result<DataType, FunctionError> {
        bitmap_item(&types[i]).ok_or_else(|| {
            FunctionError::Invalid(format!(
                "Function `{name}` needs a bitmap (from bitmapBuild) as argument {}, got {}",
                i + 1,
                types[i]
            ))
        })
    };
    let int_arg = |i: usize, what: &str| -> Result<Expr, FunctionError> {
        if types[i].is_integer() {
            Ok(datafusion::logical_expr::cast(
                args[i].clone(),
                DataType::Int64,
            ))
        } else {
            Err(FunctionError::Invalid(format!(
                "The {what} of `{name}` must be an integer, got {}",
                types[i]
            )))
        }
    };
    let (op, item, ret, call_args) = match name {
        "bitmapBuild" => {
            let item = match &types[0] {
                DataType::List(f) => f.data_type().clone(),
                t => return invalid(format!("Function `bitmapBuild` needs an array, got {t}")),
            };
            if !allowed_item(&item) {
                return invalid(format!(
                    "Function `bitmapBuild` needs an array of unsigned integers or Int64, got {}",
                    types[0]
                ));
            }
            (Op::Build, item.clone(), bitmap_type(&item), args)
        }
        "bitmapToArray" | "bitmapCardinality" | "bitmapMin" | "bitmapMax" => {
            let item = bitmap_arg(0)?;
            let (op, ret) = match name {
                "bitmapToArray" => (Op::ToArray, list_of(item.clone())),
                "bitmapCardinality" => (Op::Cardinality, DataType::UInt64),
                "bitmapMin" => (Op::Min, DataType::UInt64),
                _ => (Op::Max, DataType::UInt64),
            };
            (op, item, ret, args)
        }
        "bitmapSubsetInRange" | "bitmapSubsetLimit" | "subBitmap" => {
            let item = bitmap_arg(0)?;
            let a = int_arg(1, "second argument")?;
            let b = int_arg(2, "third argument")?;
            let op = match name {
                "bitmapSubsetInRange" => Op::SubsetInRange,
                "bitmapSubsetLimit" => Op::SubsetLimit,
                _ => Op::SubBitmap,
            };
            (
                op,
                item.clone(),
                bitmap_type(&item),
                vec![args[0].clone(), a, b],
            )
        }
        "bitmapContains" => {
            let item = bitmap_arg(0)?;
            let x = int_arg(1, "value")?;
            (
                Op::Contains,
                item,
                DataType::Boolean,
                vec![args[0].clone(), x],
            )
        }
        "bitmapTransform" => {
            let item = bitmap_arg(0)?;
            let mut call_args = vec![args[0].clone()];
            for i in 1..3 {
                match &types[i] {
                    DataType::List(f) if f.data_type().is_integer() => {
                        call_args.push(datafusion::logical_expr::cast(
                            args[i].clone(),
                            list_of(DataType::Int64),
                        ));
                    }
                    t => {
                        return invalid(format!(
                            "Function `bitmapTransform` needs arrays of integers, got {t}"
                        ));
                    }
                }
            }
            (Op::Transform, item.clone(), bitmap_type(&item), call_args)
        }
        _ => {
            let item = bitmap_arg(0)?;
            let other = bitmap_arg(1)?;
            if item != other {
                return invalid(format!(
                    "The bitmaps of `{name}` must hold one type, got {item} and {other}"
                ));
            }
            let (op, ret) = match name {
                "bitmapHasAny" => (Op::HasAny, DataType::Boolean),
                "bitmapHasAll" => (Op::HasAll, DataType::Boolean),
                "bitmapAnd" => (Op::And, bitmap_type(&item)),
                "bitmapOr" => (Op::Or, bitmap_type(&item)),
                "bitmapXor" => (Op::Xor, bitmap_type(&item)),
                "bitmapAndnot" => (Op::Andnot, bitmap_type(&item)),
                "bitmapAndCardinality" => (Op::AndCardinality, DataType::UInt64),
                "bitmapOrCardinality" => (Op::OrCardinality, DataType::UInt64),
                "bitmapXorCardinality" => (Op::XorCardinality, DataType::UInt64),
                "bitmapAndnotCardinality" => (Op::AndnotCardinality, DataType::UInt64),
                _ => return Err(FunctionError::Unknown(name.to_string())),
            };
            (op, item, ret, args)
        }
    };
    Ok(ScalarUDF::from(BitmapUdf {
        op,
        name: name_static,
        item,
        ret,
        signature: Signature::variadic_any(Volatility::Immutable),
    })
    .call(call_args))
}

/// One bitmap: small (insertion order, at most [`SMALL`] values) or large (ascending).
/// Values are their unsigned 64-bit patterns.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Bitmap {
    large: bool,
    values: Vec<u64>,
}

impl Bitmap {
    /// The values in ClickHouse's iteration order.
    pub(super) fn values(&self) -> &[u64] {
        &self.values
    }

    fn contains(&self, x: u64) -> bool {
        if self.large {
            self.values.binary_search(&x).is_ok()
        } else {
            self.values.contains(&x)
        }
    }

    fn add(&mut self, x: u64) {
        if self.large {
            if let Err(at) = self.values.binary_search(&x) {
                self.values.insert(at, x);
            }
        } else if !self.values.contains(&x) {
            if self.values.len() < SMALL {
                self.values.push(x);
            } else {
                self.make_large();
                self.add(x);
            }
        }
    }

    fn remove(&mut self, x: u64) -> bool {
        match self.values.iter().position(|v| *v == x) {
            Some(i) => {
                self.values.remove(i);
                true
            }
            None => false,
        }
    }

    fn make_large(&mut self) {
        if !self.large {
            self.values.sort_unstable();
            self.large = true;
        }
    }

    fn build(values: impl IntoIterator<Item = u64>) -> Self {
        let mut b = Bitmap::default();
        for v in values {
            b.add(v);
        }
        b
    }

    fn or(mut self, r: &Bitmap) -> Self {
        if r.large {
            self.make_large();
        }
        for &x in &r.values {
            self.add(x);
        }
        self
    }

    /// Small when either is (in the order of the small one, this one first), else large.
    fn and(&self, r: &Bitmap) -> Self {
        if !self.large {
            Bitmap {
                large: false,
                values: self
                    .values
                    .iter()
                    .copied()
                    .filter(|x| r.contains(*x))
                    .collect(),
            }
        } else if !r.large {
            Bitmap {
                large: false,
                values: r
                    .values
                    .iter()
                    .copied()
                    .filter(|x| self.contains(*x))
                    .collect(),
            }
        } else {
            Bitmap {
                large: true,
                values: self
                    .values
                    .iter()
                    .copied()
                    .filter(|x| r.contains(*x))
                    .collect(),
            }
        }
    }

    /// Always large.
    fn xor(&self, r: &Bitmap) -> Self {
        let mut out: Vec<u64> = self
            .values
            .iter()
            .copied()
            .filter(|x| !r.contains(*x))
            .chain(r.values.iter().copied().filter(|x| !self.contains(*x)))
            .collect();
        out.sort_unstable();
        Bitmap {
            large: true,
            values: out,
        }
    }

    /// Keeps this one's form and order.
    fn andnot(&self, r: &Bitmap) -> Self {
        Bitmap {
            large: self.large,
            values: self
                .values
                .iter()
                .copied()
                .filter(|x| !r.contains(*x))
                .collect(),
        }
    }
}

/// The value at `row` of a list of `item` as u64 patterns (NULL rows: empty).
fn list_values(l: &ListArray, row: usize) -> Result<Vec<u64>> {
    if l.is_null(row) {
        return Ok(vec![]);
    }
    let v = l.value(row);
    if v.null_count() > 0 {
        return exec_err!("A bitmap cannot hold NULL");
    }
    Ok(match v.data_type() {
        DataType::Int64 => v
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|x| *x as u64)
            .collect(),
        DataType::Null => vec![],
        _ => cast(&v, &DataType::UInt64)?
            .as_primitive::<UInt64Type>()
            .values()
            .to_vec(),
    })
}

/// The bitmaps of a bitmap column.
pub(super) fn read(a: &ArrayRef) -> Result<Vec<Bitmap>> {
    let s = a.as_struct();
    let large = s.column(0).as_boolean();
    let values = s.column(1).as_list::<i32>();
    (0..s.len())
        .map(|i| {
            Ok(Bitmap {
                large: s.is_valid(i) && large.value(i),
                values: if s.is_valid(i) {
                    list_values(values, i)?
                } else {
                    vec![]
                },
            })
        })
        .collect()
}

/// u64 patterns as an array of `item`.
fn to_items(v: Vec<u64>, item: &DataType) -> Result<ArrayRef> {
    let a: ArrayRef = if *item == DataType::Int64 {
        Arc::new(datafusion::arrow::array::Int64Array::from(
            v.into_iter().map(|x| x as i64).collect::<Vec<_>>(),
        ))
    } else {
        Arc::new(UInt64Array::from(v))
    };
    Ok(if a.data_type() == item {
        a
    } else {
        cast(&a, item)?
    })
}

fn values_list(bitmaps: &[Bitmap], item: &DataType) -> Result<ArrayRef> {
    let lengths: Vec<usize> = bitmaps.iter().map(|b| b.values.len()).collect();
    let all: Vec<u64> = bitmaps
        .iter()
        .flat_map(|b| b.values.iter().copied())
        .collect();
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(item.clone(), true)),
        OffsetBuffer::from_lengths(lengths),
        to_items(all, item)?,
        None,
    )?))
}

fn write(bitmaps: Vec<Bitmap>, item: &DataType) -> Result<ArrayRef> {
    let DataType::Struct(fields) = bitmap_type(item) else {
        return exec_err!("bitmap type");
    };
    let large = datafusion::arrow::array::BooleanArray::from(
        bitmaps.iter().map(|b| b.large).collect::<Vec<_>>(),
    );
    let values = values_list(&bitmaps, item)?;
    Ok(Arc::new(StructArray::try_new(
        fields,
        vec![Arc::new(large), values],
        None,
    )?))
}

fn u64s(bitmaps: impl Iterator<Item = u64>) -> ArrayRef {
    let mut b = UInt64Builder::new();
    for x in bitmaps {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

fn bools(values: impl Iterator<Item = bool>) -> ArrayRef {
    let mut b = BooleanBuilder::new();
    for x in values {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

/// A constant-or-column Int64 argument's value at `row`, not negative.
fn non_negative(a: &ArrayRef, row: usize, name: &str) -> Result<u64> {
    let a = a.as_primitive::<Int64Type>();
    if a.is_null(row) {
        return exec_err!("`{name}`: an argument is NULL");
    }
    let v = a.value(row);
    if v < 0 {
        return exec_err!("`{name}`: the range and limit arguments must not be negative, got {v}");
    }
    Ok(v as u64)
}

fn eval(udf: &BitmapUdf, args: &[ArrayRef], n: usize) -> Result<ArrayRef> {
    let item = &udf.item;
    let name = udf.name;
    match udf.op {
        Op::Build => {
            let l = args[0].as_list::<i32>();
            let out = (0..n)
                .map(|i| Ok(Bitmap::build(list_values(l, i)?)))
                .collect::<Result<Vec<_>>>()?;
            write(out, item)
        }
        Op::ToArray => values_list(&read(&args[0])?, item),
        Op::Cardinality => Ok(u64s(read(&args[0])?.iter().map(|b| b.values.len() as u64))),
        Op::Min => {
            let empty = if item.primitive_width().is_some_and(|w| w <= 4) {
                u32::MAX as u64
            } else {
                u64::MAX
            };
            Ok(u64s(
                read(&args[0])?
                    .iter()
                    .map(|b| b.values.iter().copied().min().unwrap_or(empty)),
            ))
        }
        Op::Max => Ok(u64s(
            read(&args[0])?
                .iter()
                .map(|b| b.values.iter().copied().max().unwrap_or(0)),
        )),
        Op::Contains => {
            let x = args[1].as_primitive::<Int64Type>();
            let bms = read(&args[0])?;
            Ok(bools(bms.iter().enumerate().map(|(i, b)| {
                x.is_valid(i) && b.contains(x.value(i) as u64)
            })))
        }
        Op::HasAny | Op::HasAll => {
            let (a, b) = (read(&args[0])?, read(&args[1])?);
            Ok(bools(a.iter().zip(&b).map(|(a, b)| {
                if udf.op == Op::HasAny {
                    b.values.iter().any(|x| a.contains(*x))
                } else {
                    b.values.iter().all(|x| a.contains(*x))
                }
            })))
        }
        Op::And | Op::Or | Op::Xor | Op::Andnot => {
            let (a, b) = (read(&args[0])?, read(&args[1])?);
            let out = a
                .into_iter()
                .zip(&b)
                .map(|(a, b)| match udf.op {
                    Op::And => a.and(b),
                    Op::Or => a.or(b),
                    Op::Xor => a.xor(b),
                    _ => a.andnot(b),
                })
                .collect();
            write(out, item)
        }
        Op::AndCardinality | Op::OrCardinality | Op::XorCardinality | Op::AndnotCardinality => {
            let (a, b) = (read(&args[0])?, read(&args[1])?);
            Ok(u64s(a.into_iter().zip(&b).map(|(a, b)| {
                (match udf.op {
                    Op::AndCardinality => a.and(b),
                    Op::OrCardinality => a.or(b),
                    Op::XorCardinality => a.xor(b),
                    _ => a.andnot(b),
                })
                .values
                .len() as u64
            })))
        }
        Op::SubsetInRange | Op::SubsetLimit | Op::SubBitmap => {
            let bms = read(&args[0])?;
            let mut out = Vec::with_capacity(bms.len());
            for (i, b) in bms.into_iter().enumerate() {
                let p = non_negative(&args[1], i, name)?;
                let q = non_negative(&args[2], i, name)?;
                out.push(match udf.op {
                    // [p, q)
                    Op::SubsetInRange => {
                        if p >= q {
                            Bitmap::default()
                        } else {
                            Bitmap::build(b.values.iter().copied().filter(|x| *x >= p && *x < q))
                        }
                    }
                    // the first q values from p on
                    Op::SubsetLimit => {
                        let from: Vec<u64> = b.values.iter().copied().filter(|x| *x >= p).collect();
                        if q == 0 {
                            Bitmap::default()
                        } else if b.large || from.len() as u64 <= q {
                            Bitmap::build(from.into_iter().take(q as usize))
                        } else {
                            return exec_err!(
                                "`bitmapSubsetLimit` of a bitmap of at most 32 values with more \
                                 values from the start than the limit is not supported: \
                                 ClickHouse's order of the values kept is not defined"
                            );
                        }
                    }
                    // q values from the p-th, in value order (a small bitmap sorts its
                    // values as numbers of its type first)
                    _ => {
                        if q == 0 || p >= b.values.len() as u64 {
                            Bitmap::default()
                        } else {
                            let mut v = b.values.clone();
                            if !b.large {
                                if *item == DataType::Int64 {
                                    v.sort_unstable_by_key(|x| *x as i64);
                                } else {
                                    v.sort_unstable();
                                }
                            }
                            Bitmap::build(v.into_iter().skip(p as usize).take(q as usize))
                        }
                    }
                });
            }
            write(out, item)
        }
        Op::Transform => {
            let bms = read(&args[0])?;
            let (from, to) = (args[1].as_list::<i32>(), args[2].as_list::<i32>());
            let mut out = Vec::with_capacity(bms.len());
            for (i, mut b) in bms.into_iter().enumerate() {
                let (f, t) = (list_values(from, i)?, list_values(to, i)?);
                if f.len() != t.len() {
                    return exec_err!("`bitmapTransform`: the from and to arrays differ in size");
                }
                b.make_large();
                for (x, y) in f.into_iter().zip(t) {
                    if x != y && b.remove(x) {
                        b.add(y);
                    }
                }
                out.push(b);
            }
            write(out, item)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Table, col, lit};
    use super::Bitmap;
    use datafusion::arrow::array::{ArrayRef, UInt32Array};
    use datafusion::logical_expr::Expr;
    use std::sync::Arc;

    #[test]
    fn functions_through_a_query() {
        let x: ArrayRef = Arc::new(UInt32Array::from(vec![20, 10, 7, 5, 1]));
        let t = Table::new(vec![("x", x, false)]);
        let bm = t.f(
            "bitmapBuild",
            vec![t.f("array", vec![col("x"), lit(3u32), col("x")])],
        );
        let arr = |e: Expr| t.f("bitmapToArray", vec![e]);
        let out = t.project(vec![
            arr(bm.clone()),
            t.f("bitmapCardinality", vec![bm.clone()]),
            arr(t.f("subBitmap", vec![bm.clone(), lit(1i64), lit(5i64)])),
            arr(t.f(
                "bitmapTransform",
                vec![
                    bm.clone(),
                    t.f("array", vec![lit(3i64)]),
                    t.f("array", vec![lit(4i64)]),
                ],
            )),
            t.f("bitmapMin", vec![bm.clone()]),
        ]);
        assert_eq!(out[0].rows[0], "[20, 3]");
        assert_eq!(out[1].rows[0], "2");
        assert_eq!(out[2].rows[0], "[20]", "small: sorted before the offset");
        assert_eq!(out[3].rows[0], "[4, 20]", "transform makes it roaring");
        assert_eq!(out[4].rows[0], "3");
        assert_eq!(out[4].rows[4], "1");
        let refused = t.try_call(
            "bitmapBuild",
            vec![],
            vec![super::super::super::Arg::Expr(t.f("array", vec![lit("a")]))],
            false,
        );
        assert!(refused.is_err());
    }

    fn small(v: &[u64]) -> Bitmap {
        Bitmap::build(v.iter().copied())
    }

    #[test]
    fn forms_and_orders_follow_clickhouse() {
        // insertion order, duplicates dropped
        assert_eq!(small(&[3, 1, 2, 3]).values, vec![3, 1, 2]);
        // a 33rd value makes it large (sorted)
        let big = Bitmap::build((0..33).rev());
        assert!(big.large);
        assert_eq!(big.values, (0..33).collect::<Vec<_>>());
        let small32 = Bitmap::build((0..32).rev());
        assert!(!small32.large);
        let (a, b) = (small(&[1, 5, 7]), small(&[5, 6, 7]));
        assert_eq!(a.clone().or(&b).values, vec![1, 5, 7, 6]);
        assert_eq!(a.and(&b).values, vec![5, 7]);
        assert_eq!(a.xor(&b).values, vec![1, 6]);
        assert_eq!(a.andnot(&b).values, vec![1]);
        // a large operand: Or sorts; And keeps the small one's order
        let x = small(&[3, 1]).xor(&small(&[9]));
        assert_eq!(x.clone().or(&small(&[2])).values, vec![1, 2, 3, 9]);
        assert_eq!(x.and(&small(&[3, 9, 1])).values, vec![3, 9, 1]);
        assert_eq!(small(&[9, 1]).and(&x).values, vec![9, 1]);
    }
}
