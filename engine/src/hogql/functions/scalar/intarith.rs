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

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
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

/// Unsigned in ClickHouse's typing: an unsigned integer type, or a non-negative literal.
fn unsigned(e: &Expr, t: &DataType) -> bool {
    t.is_unsigned_integer() || int_literal(e).is_some_and(|v| v >= 0)
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
    if let (Some(a), Some(b)) = (int_literal(&l), int_literal(&r)) {
        let v = op.apply(a, b).ok_or_else(division_by_zero)?;
        let v = wrap(v, &ret);
        let value = match i64::try_from(v) {
            Ok(x) => ScalarValue::Int64(Some(x)),
            Err(_) => ScalarValue::UInt64(Some(v as u64)),
        };
        return Ok(Some(Expr::Literal(value, None)));
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
pub(crate) fn int_negate(e: Expr, t: &DataType) -> Result<Option<Expr>> {
    if !t.is_integer() {
        return Ok(None);
    }
    int_arith(
        IntOp::Sub,
        Expr::Literal(ScalarValue::Int64(Some(0)), None),
        e,
        &DataType::Int64,
        t,
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
