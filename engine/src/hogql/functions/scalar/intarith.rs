//! Integer `+`, `-`, `*`, `%` and unary minus with ClickHouse's result types.
//!
//! ClickHouse types a non-negative integer literal as the smallest unsigned type that holds
//! it, and an operation on 64-bit integers wraps in its result type: `plus` and `multiply`
//! of two unsigned values are UInt64, of a signed and any other Int64; `minus` and `negate`
//! are always signed (Int64); `modulo` keeps the dividend's sign. So
//! `9223372036854775807 + 1` is the UInt64 9223372036854775808 where an Int64 sum wraps, and
//! `length(a) - 5` is a negative Int64 rather than a wrapped UInt64. hedgerow reads integer
//! literals as Int64, so a non-negative literal counts as unsigned here; an operation on
//! two literals is computed while planning (its result an Int64 literal when it fits, a
//! UInt64 one above). DataFusion's own operators would take a Decimal for Int64 with UInt64
//! and wrap a UInt64 difference.
//!
//! Constants keep ClickHouse's narrow types: a literal is the smallest type holding it
//! (UInt8 … UInt64 when non-negative, Int8 … Int64 when negative), and an operation on
//! constants answers in ClickHouse's result type ([`ConstInt`]), carried on the folded
//! literal's metadata because hedgerow's literals are Int64. Where the narrow type does not
//! widen the result wraps as in ClickHouse: `-intDiv(-128, 1)` is the Int8 -128. A literal
//! array of integer constants holds them in their common type (`[-128]` is a List of Int8,
//! so `-arrayJoin([-128])` wraps too), and its element at a constant index is such a
//! constant. A column of a narrow signed type negates in it too, and `bitNot` keeps any
//! column's own type.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, Operator};

use super::udf::{Nulls, call};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntOp {
    Add,
    Sub,
    Mul,
    Mod,
}

impl IntOp {
    fn name(self) -> &'static str {
        match self {
            IntOp::Add => "plus",
            IntOp::Sub => "minus",
            IntOp::Mul => "multiply",
            IntOp::Mod => "modulo",
        }
    }

    fn operator(self) -> Operator {
        match self {
            IntOp::Add => Operator::Plus,
            IntOp::Sub => Operator::Minus,
            IntOp::Mul => Operator::Multiply,
            IntOp::Mod => Operator::Modulo,
        }
    }

    /// `a op b` in i128, wrapped to 64 bits by the caller; None for a zero divisor.
    fn apply(self, a: i128, b: i128) -> Option<i128> {
        match self {
            IntOp::Add => Some(a.wrapping_add(b)),
            IntOp::Sub => Some(a.wrapping_sub(b)),
            IntOp::Mul => Some(a.wrapping_mul(b)),
            IntOp::Mod => (b != 0).then(|| a % b),
        }
    }

    /// ClickHouse's result type of the operation on two integer constants: `plus` and
    /// `multiply` widen to the next size (signed when either is), `minus` too and is always
    /// signed, `modulo` takes the divisor's size (unsigned for an unsigned dividend, else
    /// signed and one size up).
    fn const_type(self, a: ConstInt, b: ConstInt) -> ConstInt {
        match self {
            IntOp::Add | IntOp::Mul => ConstInt::new(a.signed || b.signed, a.bits.max(b.bits) * 2),
            IntOp::Sub => ConstInt::new(true, a.bits.max(b.bits) * 2),
            IntOp::Mod if a.signed => ConstInt::new(true, b.bits * 2),
            IntOp::Mod => ConstInt::new(false, b.bits),
        }
    }
}

/// ClickHouse's type of an integer constant: its signedness and width in bits (8 … 64;
/// wider results stop at 64 bits, as ClickHouse's do for these operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConstInt {
    signed: bool,
    bits: u32,
}

/// The metadata key of a folded constant's ClickHouse type, where its value alone would
/// give another (`1 + 1` is a UInt16 2, not a UInt8).
const CLICKHOUSE_TYPE: &str = "hedgerow.clickhouse_int";

impl ConstInt {
    fn new(signed: bool, bits: u32) -> Self {
        ConstInt {
            signed,
            bits: bits.min(64),
        }
    }

    /// The type ClickHouse gives a literal of value `v`: the smallest that holds it.
    fn of_value(v: i128) -> Self {
        let signed = v < 0;
        let bits = [8, 16, 32, 64]
            .into_iter()
            .find(|b| ConstInt { signed, bits: *b }.holds(v))
            .unwrap_or(64);
        ConstInt { signed, bits }
    }

    /// The type of an Arrow integer type.
    fn of_type(t: &DataType) -> Option<Self> {
        let (signed, bits) = match t {
            DataType::Int8 => (true, 8),
            DataType::Int16 => (true, 16),
            DataType::Int32 => (true, 32),
            DataType::Int64 => (true, 64),
            DataType::UInt8 => (false, 8),
            DataType::UInt16 => (false, 16),
            DataType::UInt32 => (false, 32),
            DataType::UInt64 => (false, 64),
            _ => return None,
        };
        Some(ConstInt { signed, bits })
    }

    fn of_name(name: &str) -> Option<Self> {
        let (signed, bits) = match name.strip_prefix('U') {
            Some(rest) => (false, rest.strip_prefix("Int")?),
            None => (true, name.strip_prefix("Int")?),
        };
        let bits: u32 = bits.parse().ok()?;
        [8, 16, 32, 64]
            .contains(&bits)
            .then_some(ConstInt { signed, bits })
    }

    fn name(self) -> String {
        format!("{}Int{}", if self.signed { "" } else { "U" }, self.bits)
    }

    fn holds(self, v: i128) -> bool {
        let (lo, hi) = if self.signed {
            (-(1i128 << (self.bits - 1)), (1i128 << (self.bits - 1)) - 1)
        } else {
            (0, (1i128 << self.bits) - 1)
        };
        (lo..=hi).contains(&v)
    }

    /// `v` wrapped into the type (its low bits, sign-extended when signed).
    fn wrap(self, v: i128) -> i128 {
        let low = v & ((1i128 << self.bits) - 1);
        if self.signed && low >= 1i128 << (self.bits - 1) {
            low - (1i128 << self.bits)
        } else {
            low
        }
    }
}

/// The value and ClickHouse type of an integer constant: a literal's own narrow type, the
/// type of its value for hedgerow's Int64/UInt64 literals unless a fold recorded another.
fn const_int(e: &Expr) -> Option<(i128, ConstInt)> {
    let Expr::Literal(v, meta) = e else {
        return None;
    };
    let x = int_literal(e)?;
    if let Some(t) = meta
        .as_ref()
        .and_then(|m| m.inner().get(CLICKHOUSE_TYPE))
        .and_then(|n| ConstInt::of_name(n))
    {
        return Some((x, t));
    }
    Some((
        x,
        match v {
            ScalarValue::Int64(_) | ScalarValue::UInt64(_) => ConstInt::of_value(x),
            other => ConstInt::of_type(&other.data_type())?,
        },
    ))
}

/// The constant `v` of ClickHouse type `t`, wrapped into it: an Int64 literal (a UInt64 one
/// above Int64's range), with `t` recorded when the value alone would give another type.
fn const_literal(v: i128, t: ConstInt) -> Expr {
    let (v, meta) = typed(v, t);
    let value = match i64::try_from(v) {
        Ok(x) => ScalarValue::Int64(Some(x)),
        Err(_) => ScalarValue::UInt64(Some(v as u64)),
    };
    Expr::Literal(value, meta)
}

/// `v` wrapped into `t`, and the metadata recording `t` where the value would give another.
fn typed(v: i128, t: ConstInt) -> (i128, Option<FieldMetadata>) {
    let v = t.wrap(v);
    let meta = (ConstInt::of_value(v) != t).then(|| {
        FieldMetadata::new(std::collections::BTreeMap::from([(
            CLICKHOUSE_TYPE.to_string(),
            t.name(),
        )]))
    });
    (v, meta)
}

/// `intDiv(a, b)` of two integer constants in ClickHouse's type (signed when either is, the
/// dividend's size). Only where both operands and the quotient fit that type: ClickHouse
/// converts the operands to it first (`intDiv(-255, 65535)` is 255 there, a quirk not
/// copied) and refuses the minimum divided by -1; those, and a zero divisor, are left to
/// the column kernel.
pub(crate) fn const_int_div(a: &Expr, b: &Expr) -> Option<Expr> {
    let ((x, xt), (y, yt)) = (const_int(a)?, const_int(b)?);
    let t = ConstInt::new(xt.signed || yt.signed, xt.bits);
    let q = (y != 0 && t.holds(x) && t.holds(y)).then(|| x / y)?;
    t.holds(q).then(|| const_literal(q, t))
}

/// `abs(a)` of an integer constant: the unsigned type of its size, held as a UInt64 literal
/// (the type `abs` gives a column).
pub(crate) fn const_abs(a: &Expr) -> Option<Expr> {
    let (x, t) = const_int(a)?;
    let (v, meta) = typed(x.abs(), ConstInt::new(false, t.bits));
    Some(Expr::Literal(ScalarValue::UInt64(Some(v as u64)), meta))
}

/// `bitAnd`, `bitOr`, `bitXor` and `bitNot` of integer constants in ClickHouse's type: the
/// widest operand's size, signed when any is (`bitNot(1 + 1)` is the UInt16 65533). Bits of
/// the two's complement do not depend on the width, so the wide result wrapped is exact.
pub(crate) fn const_bits(name: &str, args: &[Expr]) -> Option<Expr> {
    let consts = args.iter().map(const_int).collect::<Option<Vec<_>>>()?;
    let t = ConstInt::new(
        consts.iter().any(|(_, c)| c.signed),
        consts.iter().map(|(_, c)| c.bits).max()?,
    );
    let v = match (name, consts.as_slice()) {
        ("bitNot", [(a, _)]) => !a,
        ("bitAnd", [(a, _), (b, _)]) => a & b,
        ("bitOr", [(a, _), (b, _)]) => a | b,
        ("bitXor", [(a, _), (b, _)]) => a ^ b,
        _ => return None,
    };
    Some(const_literal(v, t))
}

/// ClickHouse's least common type of integer constants' types: the widest, and when
/// signed and unsigned mix a signed type wider than every unsigned one (`[200, -1]` is an
/// Array(Int16)); None where none exists (a UInt64 with a signed value).
fn common_const_type(types: &[ConstInt]) -> Option<ConstInt> {
    let widest = |signed: bool| {
        types
            .iter()
            .filter(|t| t.signed == signed)
            .map(|t| t.bits)
            .max()
    };
    Some(match (widest(true), widest(false)) {
        (Some(_), Some(u)) if u >= 64 => return None,
        (Some(s), Some(u)) => ConstInt::new(true, s.max(u * 2)),
        (Some(s), None) => ConstInt::new(true, s),
        (None, Some(u)) => ConstInt::new(false, u),
        (None, None) => return None,
    })
}

/// `arrayElement(a, i)` of a literal array of integer constants (`items`) at a constant
/// index, as ClickHouse types it: the element in the array's element type, the constants'
/// common type (`[-128]` is an Array(Int8), so `-[-128][1]` wraps to -128), counted from 1,
/// from the end when negative, the type's 0 out of range.
pub(crate) fn const_array_element(items: &[Expr], i: &Expr) -> Option<Expr> {
    let consts = items.iter().map(const_int).collect::<Option<Vec<_>>>()?;
    let t = common_const_type(&consts.iter().map(|(_, t)| *t).collect::<Vec<_>>())?;
    let i = int_literal(i)?;
    let n = consts.len() as i128;
    let at = if (1..=n).contains(&i) {
        Some(i - 1)
    } else if (-n..0).contains(&i) {
        Some(n + i)
    } else {
        None
    };
    let v = at.map_or(0, |k| consts[k as usize].0);
    Some(const_literal(v, t))
}

/// A literal array's integer constants as literals of ClickHouse's element type, their
/// common narrow type (`[-128]` an Array(Int8), `[1, 300]` an Array(UInt16)); None unless
/// every item is an integer constant with such a type.
pub(crate) fn narrow_const_items(items: &[Expr]) -> Option<Vec<Expr>> {
    let consts = items.iter().map(const_int).collect::<Option<Vec<_>>>()?;
    let t = common_const_type(&consts.iter().map(|(_, t)| *t).collect::<Vec<_>>())?;
    consts
        .into_iter()
        .map(|(v, _)| {
            let v = t.wrap(v);
            let s = match (t.signed, t.bits) {
                (true, 8) => ScalarValue::Int8(Some(v as i8)),
                (true, 16) => ScalarValue::Int16(Some(v as i16)),
                (true, 32) => ScalarValue::Int32(Some(v as i32)),
                (true, _) => ScalarValue::Int64(Some(v as i64)),
                (false, 8) => ScalarValue::UInt8(Some(v as u8)),
                (false, 16) => ScalarValue::UInt16(Some(v as u16)),
                (false, 32) => ScalarValue::UInt32(Some(v as u32)),
                (false, _) => ScalarValue::UInt64(Some(v as u64)),
            };
            Some(Expr::Literal(s, None))
        })
        .collect()
}

/// The value of an integer literal, if `e` is one.
fn int_literal(e: &Expr) -> Option<i128> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(x)) => Some(i128::from(*x)),
            ScalarValue::Int16(Some(x)) => Some(i128::from(*x)),
            ScalarValue::Int32(Some(x)) => Some(i128::from(*x)),
            ScalarValue::Int64(Some(x)) => Some(i128::from(*x)),
            ScalarValue::UInt8(Some(x)) => Some(i128::from(*x)),
            ScalarValue::UInt16(Some(x)) => Some(i128::from(*x)),
            ScalarValue::UInt32(Some(x)) => Some(i128::from(*x)),
            ScalarValue::UInt64(Some(x)) => Some(i128::from(*x)),
            _ => None,
        },
        _ => None,
    }
}

/// Unsigned in ClickHouse's typing: an unsigned integer type, or a constant of one (a
/// non-negative literal).
fn unsigned(e: &Expr, t: &DataType) -> bool {
    match const_int(e) {
        Some((_, c)) => !c.signed,
        None => t.is_unsigned_integer(),
    }
}

fn result_type(op: IntOp, l_unsigned: bool, r_unsigned: bool) -> DataType {
    match op {
        IntOp::Sub => DataType::Int64,
        IntOp::Add | IntOp::Mul | IntOp::Mod if l_unsigned && r_unsigned => DataType::UInt64,
        _ => DataType::Int64,
    }
}

fn wrap(v: i128, t: &DataType) -> i128 {
    if *t == DataType::UInt64 {
        i128::from(v as u64)
    } else {
        i128::from(v as i64)
    }
}

fn division_by_zero() -> DataFusionError {
    DataFusionError::Execution("Division by zero".into())
}

/// `l op r` for two integer operands (`lt`, `rt` their types); None when either is not an
/// integer (the caller's DataFusion operator handles floats and the rest).
pub(crate) fn int_arith(
    op: IntOp,
    l: Expr,
    r: Expr,
    lt: &DataType,
    rt: &DataType,
) -> Result<Option<Expr>> {
    if !lt.is_integer() || !rt.is_integer() {
        return Ok(None);
    }
    let (lu, ru) = (unsigned(&l, lt), unsigned(&r, rt));
    let ret = result_type(op, lu, ru);
    if let (Some((a, at)), Some((b, bt))) = (const_int(&l), const_int(&r)) {
        let v = op.apply(a, b).ok_or_else(division_by_zero)?;
        return Ok(Some(const_literal(v, op.const_type(at, bt))));
    }
    let signed = |t: &DataType| t.is_signed_integer();
    // Both signed: DataFusion's Int64 operator already wraps like ClickHouse.
    if signed(lt) && signed(rt) && !(lu && ru && ret == DataType::UInt64) {
        let c = |e: Expr, t: &DataType| {
            if *t == DataType::Int64 {
                e
            } else {
                Expr::Cast(Cast::new(Box::new(e), DataType::Int64))
            }
        };
        return Ok(Some(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(c(l, lt)),
            op.operator(),
            Box::new(c(r, rt)),
        ))));
    }
    let out = ret.clone();
    let kernel = Arc::new(
        move |arrays: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
            let (a, b) = (wide(&arrays[0], rows)?, wide(&arrays[1], rows)?);
            let mut vals = Vec::with_capacity(rows);
            for (x, y) in a.into_iter().zip(b) {
                vals.push(match (x, y) {
                    (Some(x), Some(y)) => {
                        Some(wrap(op.apply(x, y).ok_or_else(division_by_zero)?, &out))
                    }
                    _ => None,
                });
            }
            Ok(if out == DataType::UInt64 {
                Arc::new(
                    vals.into_iter()
                        .map(|v| v.map(|v| v as u64))
                        .collect::<UInt64Array>(),
                ) as ArrayRef
            } else {
                Arc::new(
                    vals.into_iter()
                        .map(|v| v.map(|v| v as i64))
                        .collect::<Int64Array>(),
                ) as ArrayRef
            })
        },
    );
    Ok(Some(call(
        op.name(),
        format!("{op:?}"),
        ret,
        Nulls::FromArgs,
        vec![l, r],
        kernel,
    )))
}

/// `-e` for an integer `e`: signed, wrapping (`-9223372036854775808` is Int64's minimum).
/// A constant keeps a signed type's size and takes the next signed size of an unsigned one,
/// so `-(-128)` is the Int8 -128 and `-(128)` the Int16 -128.
pub(crate) fn int_negate(e: Expr, t: &DataType) -> Result<Option<Expr>> {
    if !t.is_integer() {
        return Ok(None);
    }
    if let Some((v, c)) = const_int(&e) {
        let bits = if c.signed { c.bits } else { c.bits * 2 };
        return Ok(Some(const_literal(-v, ConstInt::new(true, bits))));
    }
    if matches!(t, DataType::Int8 | DataType::Int16 | DataType::Int32) {
        return Ok(Some(in_own_type("negate", e, t, |v| -v)));
    }
    int_arith(
        IntOp::Sub,
        Expr::Literal(ScalarValue::Int64(Some(0)), None),
        e,
        &DataType::Int64,
        t,
    )
}

/// `bitNot(e)` of an integer column in its own type, as ClickHouse's: `bitNot(toUInt8(1))` is
/// 254, of a UInt64 1 18446744073709551614. None for Int64, where the caller's Int64 kernel
/// already answers so, and for other types.
pub(crate) fn int_bit_not(e: Expr, t: &DataType) -> Option<Expr> {
    (t.is_integer() && *t != DataType::Int64).then(|| in_own_type("bitNot", e, t, |v| !v))
}

/// `f` of an integer column computed wide and wrapped into the column's own type, which is
/// the result's (ClickHouse's negate of a signed type, bitNot).
fn in_own_type(name: &str, e: Expr, t: &DataType, f: fn(i128) -> i128) -> Expr {
    let c = ConstInt::of_type(t).expect("an integer type");
    let out = t.clone();
    let kernel = Arc::new(
        move |arrays: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
            let vals = wide(&arrays[0], rows)?
                .into_iter()
                .map(|v| v.map(|v| c.wrap(f(v))));
            let wide: ArrayRef = if c.signed {
                Arc::new(vals.map(|v| v.map(|v| v as i64)).collect::<Int64Array>())
            } else {
                Arc::new(vals.map(|v| v.map(|v| v as u64)).collect::<UInt64Array>())
            };
            Ok(cast(&wide, &out)?)
        },
    );
    call(
        name,
        format!("own {t}"),
        t.clone(),
        Nulls::FromArgs,
        vec![e],
        kernel,
    )
}

/// `greatest`/`least` of integers mixing UInt64 with signed values, as ClickHouse: the
/// greatest is a UInt64 (a UInt64 argument bounds it from below by 0), the least an Int64
/// (a signed argument bounds it from above); NULLs are skipped (NULL when all are). None for
/// other argument types.
pub(crate) fn int_extreme(greatest: bool, args: &[Expr], types: &[DataType]) -> Option<Expr> {
    let ints = types.iter().all(|t| t.is_integer() || *t == DataType::Null);
    let has_u64 = types.contains(&DataType::UInt64);
    let has_signed = args
        .iter()
        .zip(types)
        .any(|(a, t)| t.is_signed_integer() && int_literal(a).is_none_or(|v| v < 0));
    if !(ints && has_u64 && has_signed) {
        return None;
    }
    let ret = if greatest {
        DataType::UInt64
    } else {
        DataType::Int64
    };
    let out = ret.clone();
    let kernel = Arc::new(
        move |arrays: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
            let mut best: Vec<Option<i128>> = vec![None; rows];
            for a in arrays {
                if *a.data_type() == DataType::Null {
                    continue;
                }
                let vals = wide(a, rows)?;
                for (i, v) in vals.into_iter().enumerate() {
                    if let Some(v) = v {
                        best[i] = Some(match best[i] {
                            None => v,
                            Some(b) if greatest => b.max(v),
                            Some(b) => b.min(v),
                        })
                    }
                }
            }
            let vals = best.into_iter();
            Ok(if out == DataType::UInt64 {
                Arc::new(vals.map(|v| v.map(|v| v as u64)).collect::<UInt64Array>()) as ArrayRef
            } else {
                Arc::new(vals.map(|v| v.map(|v| v as i64)).collect::<Int64Array>()) as ArrayRef
            })
        },
    );
    Some(call(
        if greatest { "greatest" } else { "least" },
        "mixed",
        ret,
        Nulls::Always,
        args.to_vec(),
        kernel,
    ))
}

/// An integer column's `rows` values widened to i128 (unsigned read as UInt64, the rest as
/// Int64), so signed and unsigned values compare and add without wrapping.
fn wide(a: &ArrayRef, rows: usize) -> Result<Vec<Option<i128>>> {
    Ok(if a.data_type().is_unsigned_integer() {
        let c = cast(a, &DataType::UInt64)?;
        let c = c.as_primitive::<UInt64Type>();
        (0..rows)
            .map(|i| (!c.is_null(i)).then(|| i128::from(c.value(i))))
            .collect()
    } else {
        let c = cast(a, &DataType::Int64)?;
        let c = c.as_primitive::<Int64Type>();
        (0..rows)
            .map(|i| (!c.is_null(i)).then(|| i128::from(c.value(i))))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{call, check, i};
    use super::*;

    fn t(name: &str) -> ConstInt {
        ConstInt::of_name(name).expect("an integer type name")
    }

    /// The value of a folded constant and its ClickHouse type.
    fn folded(e: &Expr) -> (i128, String) {
        let (v, c) = const_int(e).expect("a constant");
        (v, c.name())
    }

    /// chdb: `toTypeName([…])` of literal arrays and their elements at constant indexes.
    #[test]
    fn literal_array_elements() {
        let arr = |xs: &[i64]| -> Vec<Expr> {
            xs.iter()
                .map(|x| Expr::Literal(ScalarValue::Int64(Some(*x)), None))
                .collect()
        };
        let at = |xs: &[i64], i: i64| {
            let e =
                const_array_element(&arr(xs), &Expr::Literal(ScalarValue::Int64(Some(i)), None))
                    .expect("folded");
            folded(&e)
        };
        assert_eq!(at(&[-128], 1), (-128, "Int8".into()));
        assert_eq!(at(&[200, -1], 1), (200, "Int16".into()));
        assert_eq!(at(&[70000, -1], -1), (-1, "Int64".into()));
        assert_eq!(at(&[255, 1], -1), (1, "UInt8".into()));
        assert_eq!(at(&[1, 300], 1), (1, "UInt16".into()));
        assert_eq!(at(&[i64::MAX], 1), (i128::from(i64::MAX), "UInt64".into()));
        // Out of range and 0: the element type's default.
        assert_eq!(at(&[-128], 0), (0, "Int8".into()));
        assert_eq!(at(&[-128], 2), (0, "Int8".into()));
        assert_eq!(at(&[-128], -2), (0, "Int8".into()));
        // A UInt64 with a signed value has no common type: not folded.
        let big = [Expr::Literal(ScalarValue::UInt64(Some(u64::MAX)), None)];
        let mixed = [big.to_vec(), arr(&[-1])].concat();
        assert!(
            const_array_element(&mixed, &Expr::Literal(ScalarValue::Int64(Some(1)), None))
                .is_none()
        );
        // A column index or element: not folded.
        let col = datafusion::logical_expr::col("i");
        assert!(const_array_element(&arr(&[1]), &col).is_none());
        assert!(
            const_array_element(
                std::slice::from_ref(&col),
                &Expr::Literal(ScalarValue::Int64(Some(1)), None)
            )
            .is_none()
        );
    }

    /// chdb: `toTypeName([-128])` is Array(Int8), `[1, 300]` Array(UInt16), `[1 + 1]`
    /// Array(UInt16), `[4294967295, -1]` Array(Int64).
    #[test]
    fn literal_arrays_hold_their_common_type() {
        let lit = |v: i64| Expr::Literal(ScalarValue::Int64(Some(v)), None);
        let types = |xs: Vec<Expr>| -> Vec<ScalarValue> {
            narrow_const_items(&xs)
                .expect("narrowed")
                .into_iter()
                .map(|e| match e {
                    Expr::Literal(v, _) => v,
                    other => panic!("not a literal: {other}"),
                })
                .collect()
        };
        assert_eq!(types(vec![lit(-128)]), vec![ScalarValue::Int8(Some(-128))]);
        assert_eq!(
            types(vec![lit(1), lit(300)]),
            vec![ScalarValue::UInt16(Some(1)), ScalarValue::UInt16(Some(300))]
        );
        let two = const_literal(2, t("UInt16"));
        assert_eq!(types(vec![two]), vec![ScalarValue::UInt16(Some(2))]);
        assert_eq!(
            types(vec![lit(4294967295), lit(-1)]),
            vec![
                ScalarValue::Int64(Some(4294967295)),
                ScalarValue::Int64(Some(-1))
            ]
        );
        assert_eq!(
            types(vec![lit(i64::MAX)]),
            vec![ScalarValue::UInt64(Some(i64::MAX as u64))]
        );
        // Not all integer constants: left as they are.
        let col = datafusion::logical_expr::col("i");
        assert!(narrow_const_items(&[lit(1), col]).is_none());
        assert!(
            narrow_const_items(&[lit(1), Expr::Literal(ScalarValue::Int64(None), None)]).is_none()
        );
    }

    /// ClickHouse's `toTypeName` of literals of these types (chdb).
    #[test]
    fn literal_types() {
        assert_eq!(ConstInt::of_value(0), t("UInt8"));
        assert_eq!(ConstInt::of_value(255), t("UInt8"));
        assert_eq!(ConstInt::of_value(256), t("UInt16"));
        assert_eq!(ConstInt::of_value(4_294_967_296), t("UInt64"));
        assert_eq!(ConstInt::of_value(-128), t("Int8"));
        assert_eq!(ConstInt::of_value(-129), t("Int16"));
        assert_eq!(ConstInt::of_value(-2_147_483_649), t("Int64"));
        assert_eq!(ConstInt::of_name("Int128"), None);
        assert_eq!(ConstInt::of_name("Float64"), None);
    }

    /// ClickHouse's result types of `plus`, `minus`, `multiply` and `modulo` on constants
    /// (chdb's `toTypeName(op(a, b))`).
    #[test]
    fn operation_types() {
        let cases = [
            (IntOp::Add, "UInt8", "UInt8", "UInt16"),
            (IntOp::Add, "UInt16", "Int8", "Int32"),
            (IntOp::Add, "UInt32", "Int8", "Int64"),
            (IntOp::Add, "UInt64", "UInt8", "UInt64"),
            (IntOp::Add, "UInt64", "Int8", "Int64"),
            (IntOp::Mul, "Int8", "UInt8", "Int16"),
            (IntOp::Sub, "UInt8", "UInt8", "Int16"),
            (IntOp::Sub, "UInt64", "UInt64", "Int64"),
            (IntOp::Mod, "UInt16", "UInt8", "UInt8"),
            (IntOp::Mod, "UInt8", "Int32", "UInt32"),
            (IntOp::Mod, "Int8", "Int8", "Int16"),
            (IntOp::Mod, "Int64", "UInt8", "Int16"),
            (IntOp::Mod, "Int8", "UInt32", "Int64"),
        ];
        for (op, a, b, want) in cases {
            assert_eq!(op.const_type(t(a), t(b)), t(want), "{op:?}({a}, {b})");
        }
    }

    #[test]
    fn wrapping() {
        assert_eq!(t("Int8").wrap(128), -128);
        assert_eq!(t("Int16").wrap(-128), -128);
        assert_eq!(t("UInt8").wrap(-1), 255);
        assert_eq!(t("UInt64").wrap(-1), i128::from(u64::MAX));
        assert_eq!(t("Int64").wrap(1i128 << 63), i128::from(i64::MIN));
    }

    /// Folded constants keep ClickHouse's type, so a later operation wraps where it does
    /// (values and types from chdb).
    #[test]
    fn constants_fold_in_clickhouse_types() {
        let neg = |e: Expr| int_negate(e, &DataType::Int64).unwrap().unwrap();
        let arith = |op, a: Expr, b: Expr| {
            int_arith(op, a, b, &DataType::Int64, &DataType::Int64)
                .unwrap()
                .unwrap()
        };
        // -(-128) and -intDiv(-128, 1): Int8, wrapping to -128
        assert_eq!(folded(&neg(i(-128))), (-128, "Int8".into()));
        let quotient = const_int_div(&i(-128), &i(1)).unwrap();
        assert_eq!(folded(&quotient), (-128, "Int8".into()));
        assert_eq!(folded(&neg(quotient)), (-128, "Int8".into()));
        // -(128) is an Int16, -(0 - 128) too (minus of two UInt8s)
        assert_eq!(folded(&neg(i(128))), (-128, "Int16".into()));
        let diff = arith(IntOp::Sub, i(0), i(128));
        assert_eq!(folded(&neg(diff)), (128, "Int16".into()));
        // 1 + 1 is a UInt16; 5 - 2 a signed Int16, which makes a sum with a UInt64 an Int64
        assert_eq!(folded(&arith(IntOp::Add, i(1), i(1))), (2, "UInt16".into()));
        let three = arith(IntOp::Sub, i(5), i(2));
        assert_eq!(folded(&three), (3, "Int16".into()));
        assert!(!unsigned(&three, &DataType::Int64));
        assert!(unsigned(&i(3), &DataType::Int64));
        // abs of a signed constant is the unsigned type of its size
        let abs = const_abs(&i(-128)).unwrap();
        assert_eq!(folded(&abs), (128, "UInt8".into()));
        assert_eq!(folded(&neg(abs)), (-128, "Int16".into()));
        // 64 bits: the UInt64 sum does not wrap at 2^63, the Int64 one does
        let big = arith(IntOp::Add, i(i64::MAX), i(1));
        assert_eq!(folded(&big), (1i128 << 63, "UInt64".into()));
        let wrapped = arith(IntOp::Sub, i(i64::MIN), i(1));
        assert_eq!(folded(&wrapped), (i128::from(i64::MAX), "Int64".into()));
    }

    /// Bit operations on constants wrap in ClickHouse's type (chdb).
    #[test]
    fn bit_constants() {
        let sum = int_arith(IntOp::Add, i(1), i(1), &DataType::Int64, &DataType::Int64)
            .unwrap()
            .unwrap();
        assert_eq!(
            folded(&const_bits("bitNot", &[sum]).unwrap()),
            (65533, "UInt16".into())
        );
        assert_eq!(
            folded(&const_bits("bitNot", &[i(0)]).unwrap()),
            (255, "UInt8".into())
        );
        assert_eq!(
            folded(&const_bits("bitAnd", &[i(-1), i(255)]).unwrap()),
            (-1, "Int8".into())
        );
        assert_eq!(
            folded(&const_bits("bitOr", &[i(256), i(-1)]).unwrap()),
            (-1, "Int16".into())
        );
        assert!(const_bits("bitShiftLeft", &[i(1), i(2)]).is_none());
        check(vec![(call("bitNot", vec![i(1)]), "254")]);
    }

    /// A narrow column negates and bit-inverts in its own type, as ClickHouse's (chdb).
    #[test]
    fn narrow_columns_keep_their_type() {
        let col = |e: Expr, t: DataType| Expr::Cast(Cast::new(Box::new(e), t));
        let neg = int_negate(col(i(-128), DataType::Int8), &DataType::Int8)
            .unwrap()
            .unwrap();
        check(vec![
            (neg.clone(), "-128"),
            (
                int_bit_not(col(i(1), DataType::UInt8), &DataType::UInt8).unwrap(),
                "254",
            ),
            (
                int_bit_not(col(i(1), DataType::UInt64), &DataType::UInt64).unwrap(),
                "18446744073709551614",
            ),
            (
                int_bit_not(col(i(5), DataType::Int16), &DataType::Int16).unwrap(),
                "-6",
            ),
        ]);
        assert_eq!(super::super::tests::typ(neg), DataType::Int8);
        assert!(int_bit_not(i(1), &DataType::Int64).is_none());
    }

    /// intDiv folds only where ClickHouse's conversion of both operands to its result type
    /// changes nothing; the rest stays with the column kernel.
    #[test]
    fn int_div_constants() {
        assert!(const_int_div(&i(-128), &i(-1)).is_none());
        assert!(const_int_div(&i(200), &i(-3)).is_none());
        assert!(const_int_div(&i(7), &i(0)).is_none());
        assert_eq!(
            folded(&const_int_div(&i(-200), &i(3)).unwrap()),
            (-66, "Int16".into())
        );
        check(vec![
            (call("intDiv", vec![i(-128), i(1)]), "-128"),
            (
                call("negate", vec![call("intDiv", vec![i(-128), i(1)])]),
                "-128",
            ),
            (call("negate", vec![call("abs", vec![i(-128)])]), "-128"),
        ]);
    }
}
