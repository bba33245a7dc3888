//! NULL handling and conditionals, on DataFusion's own expressions (CASE, coalesce, nullif).
//! Conditions that are not Boolean (ClickHouse's UInt8 0/1, other numbers) are true when
//! non-zero.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::functions::expr_fn as f;
use datafusion::logical_expr::{Expr, ExprSchemable, when};

use super::{FnContext, FunctionError, invalid, type_of};

/// A condition as a Boolean: numbers are true when non-zero, NULL is false.
fn condition(e: Expr, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let ty = type_of(&e, ctx)?;
    Ok(match ty {
        DataType::Boolean => e,
        DataType::Null => Expr::Literal(ScalarValue::Boolean(None), None),
        t if t.is_numeric() => {
            let zero = Expr::Literal(ScalarValue::Int64(Some(0)), None)
                .cast_to(&t, ctx.schema)
                .map_err(|e| invalid(e.to_string()))?;
            e.not_eq(zero)
        }
        t => return Err(invalid(format!("Illegal type {t} of a condition"))),
    })
}

/// ClickHouse's booleans are UInt8, so `ifNull(a = b, 0)` (as PostHog prints every
/// comparison) mixes a Boolean with 0 or 1: among Boolean arguments, the integer literals
/// 0 and 1 are `false` and `true`.
fn bool_literals(args: Vec<Expr>, ctx: &FnContext<'_>) -> Vec<Expr> {
    if !args
        .iter()
        .any(|a| matches!(type_of(a, ctx), Ok(DataType::Boolean)))
    {
        return args;
    }
    args.into_iter()
        .map(|a| match &a {
            Expr::Literal(v, _) if v.data_type().is_integer() => {
                match v.cast_to(&DataType::Int64) {
                    Ok(ScalarValue::Int64(Some(n @ (0 | 1)))) => {
                        Expr::Literal(ScalarValue::Boolean(Some(n == 1)), None)
                    }
                    _ => a,
                }
            }
            _ => a,
        })
        .collect()
}

/// The elements of a constant array argument (`[1, 2]`, as a List literal or make_array).
fn array_items(e: &Expr) -> Option<Vec<Expr>> {
    match e {
        Expr::Literal(ScalarValue::List(arr), _) => {
            if arr.is_empty() || arr.is_null(0) {
                return Some(vec![]);
            }
            let values = arr.value(0);
            (0..values.len())
                .map(|i| {
                    ScalarValue::try_from_array(&values, i)
                        .ok()
                        .map(|v| Expr::Literal(v, None))
                })
                .collect()
        }
        Expr::ScalarFunction(sf) if sf.name() == "make_array" => Some(sf.args.clone()),
        Expr::Cast(c) => array_items(&c.expr),
        _ => None,
    }
}

use datafusion::arrow::array::Array as _;

/// ClickHouse's common supertype of numeric branch values (`if`, `multiIf`, `CASE`, and the
/// elements of an array): any float makes Float64 (Float32 stays among Float32s), integers
/// widen to hold every branch (signed when any is, a signed type wider than the widest
/// unsigned one, at most 64 bits); Bool counts as UInt8 among numbers. None when the values
/// are not all numbers (NULLs aside) or already agree: DataFusion's own coercion handles
/// those.
pub(crate) fn numeric_supertype(types: &[DataType]) -> Option<DataType> {
    let ts: Vec<&DataType> = types.iter().filter(|t| **t != DataType::Null).collect();
    let first = *ts.first()?;
    if ts.iter().all(|t| *t == first) {
        return None;
    }
    if !ts.iter().all(|t| {
        t.is_numeric() && !matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
            || **t == DataType::Boolean
    }) {
        return None;
    }
    if ts.iter().any(|t| t.is_floating()) {
        return Some(if ts.iter().all(|t| **t == DataType::Float32) {
            DataType::Float32
        } else {
            DataType::Float64
        });
    }
    let width = |t: &DataType| match t {
        DataType::Int8 | DataType::UInt8 | DataType::Boolean => 8,
        DataType::Int16 | DataType::UInt16 => 16,
        DataType::Int32 | DataType::UInt32 => 32,
        _ => 64,
    };
    let signed = ts.iter().any(|t| t.is_signed_integer());
    let max_signed = ts
        .iter()
        .filter(|t| t.is_signed_integer())
        .map(|t| width(t))
        .max()
        .unwrap_or(0);
    let max_unsigned = ts
        .iter()
        .filter(|t| !t.is_signed_integer())
        .map(|t| width(t))
        .max()
        .unwrap_or(0);
    Some(if signed {
        match max_signed.max(if max_unsigned > 0 {
            max_unsigned * 2
        } else {
            0
        }) {
            8 => DataType::Int8,
            16 => DataType::Int16,
            32 => DataType::Int32,
            _ => DataType::Int64,
        }
    } else {
        match max_unsigned {
            8 => DataType::UInt8,
            16 => DataType::UInt16,
            32 => DataType::UInt32,
            _ => DataType::UInt64,
        }
    })
}

/// Values that are all integer constants (NULL literals aside) as literals of their common
/// narrow type, as ClickHouse types them: `if(c, -128, -1)` is an Int8 (so its negation
/// wraps to -128), `multiIf(c, 1, d, 300, 2)` a UInt16. None otherwise, or where the
/// constants have no common type (a UInt64 above Int64's range with a signed value).
fn narrow_constants(values: &[Expr]) -> Option<Vec<Expr>> {
    let is_null = |v: &Expr| matches!(v, Expr::Literal(ScalarValue::Null, _));
    let consts: Vec<Expr> = values.iter().filter(|v| !is_null(v)).cloned().collect();
    if consts.is_empty() {
        return None;
    }
    let mut narrow = super::intarith::narrow_const_items(&consts)?.into_iter();
    Some(
        values
            .iter()
            .map(|v| {
                if is_null(v) {
                    v.clone()
                } else {
                    narrow.next().expect("one per constant")
                }
            })
            .collect(),
    )
}

/// The branch values cast to [`numeric_supertype`] where they need one.
///
/// A non-negative integer literal counts as ClickHouse types it, the smallest unsigned type
/// holding it (hedgerow reads it as Int64): `if(c, 9223372036854775807 + 3, 5)` is UInt64.
/// A UInt64 constant above Int64's range with a signed value has no common type: ClickHouse
/// refuses it before 26.1 (PostHog runs 25.8) or with `use_variant_as_common_type = 0`, and
/// answers a Variant holding each value from 26.1 on (never an Int128); hedgerow refuses, as
/// PostHog does.
pub(crate) fn agree_numeric(
    values: Vec<Expr>,
    schema: &datafusion::common::DFSchema,
) -> Result<Vec<Expr>, FunctionError> {
    if let Some(narrow) = narrow_constants(&values) {
        return Ok(narrow);
    }
    let types: Vec<DataType> = values
        .iter()
        .map(|v| v.get_type(schema).unwrap_or(DataType::Null))
        .collect();
    let ch_types: Vec<DataType> = values
        .iter()
        .zip(&types)
        .map(|(v, t)| match v {
            Expr::Literal(ScalarValue::Int64(Some(x)), _) if *x >= 0 => match *x {
                0..=0xFF => DataType::UInt8,
                0x100..=0xFFFF => DataType::UInt16,
                0x1_0000..=0xFFFF_FFFF => DataType::UInt32,
                _ => DataType::UInt64,
            },
            _ => t.clone(),
        })
        .collect();
    let numbers = ch_types.iter().filter(|t| **t != DataType::Null);
    let same_ch_type = numbers
        .clone()
        .all(|t| Some(t) == ch_types.iter().find(|t| **t != DataType::Null));
    let super_type = match numeric_supertype(&ch_types) {
        Some(t) => Some(t),
        // `greatest(9223372036854775807, length(s))`: a literal and a UInt64, both UInt64 in
        // ClickHouse's typing
        None if same_ch_type && numbers.clone().any(|t| t.is_integer()) => {
            ch_types.iter().find(|t| **t != DataType::Null).cloned()
        }
        None => None,
    }
    // all literals of one width, or all agreeing: leave them as they are
    .filter(|t| !types.iter().all(|x| x == t || *x == DataType::Null));
    let super_type = super_type.map(|t| {
        // a literal's own width is not a type to cast others to: Int64 holds every literal
        if types
            .iter()
            .all(|x| *x == DataType::Int64 || *x == DataType::Null)
        {
            DataType::Int64
        } else {
            t
        }
    });
    let above_int64 = |v: &Expr| match v {
        Expr::Literal(ScalarValue::UInt64(Some(x)), _) if i64::try_from(*x).is_err() => Some(*x),
        _ => None,
    };
    if let Some(t) = &super_type
        && t.is_signed_integer()
        && let Some(big) = values.iter().find_map(above_int64)
    {
        return Err(invalid(format!(
            "There is no supertype for the UInt64 {big} and a signed integer (ClickHouse's \
             Code 386, NO_COMMON_TYPE, as PostHog's ClickHouse 25.8 answers; from 26.1 \
             ClickHouse answers a Variant, a type HogQL does not have)"
        )));
    }
    Ok(match super_type {
        Some(t) => values
            .into_iter()
            .zip(types)
            .map(|(v, vt)| {
                if vt == t || vt == DataType::Null {
                    v
                } else {
                    Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(v), t.clone()))
                }
            })
            .collect(),
        None => values,
    })
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let build = |r: datafusion::common::Result<Expr>| r.map_err(|e| invalid(e.to_string()));
    if matches!(name, "coalesce" | "ifNull") {
        // A NULL literal never answers, and ClickHouse types the call without it:
        // `coalesce(NULL, 1)` is the literal 1, a UInt8, whose sum with a UInt64 is a UInt64.
        let is_null = |a: &Expr| matches!(a, Expr::Literal(ScalarValue::Null, _));
        if args.iter().any(|a| !is_null(a)) {
            args.retain(|a| !is_null(a));
        }
    }
    match name {
        // ClickHouse answers a first argument that cannot be NULL as it is (its type too:
        // `ifNull(abs(x), x)` is the UInt64 abs, not a common type of both)
        "coalesce" | "ifNull"
            if args
                .first()
                .is_some_and(|a| !a.nullable(ctx.schema).unwrap_or(true)) =>
        {
            Ok(args.swap_remove(0))
        }
        "coalesce" | "ifNull" => Ok(f::coalesce(agree_numeric(
            bool_literals(args, ctx),
            ctx.schema,
        )?)),
        "nullIf" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            Ok(f::nullif(a, b))
        }
        "isNull" => Ok(args.remove(0).is_null()),
        "isNotNull" => Ok(args.remove(0).is_not_null()),
        "assumeNotNull" | "toNullable" => Ok(args.remove(0)),
        "if" => {
            let mut values = agree_numeric(args.split_off(1), ctx.schema)?.into_iter();
            let then = values.next().expect("3 args");
            let else_ = values.next().expect("3 args");
            let cond = condition(args.pop().expect("3 args"), ctx)?;
            build(when(cond, then).otherwise(else_))
        }
        "multiIf" => {
            if args.len().is_multiple_of(2) {
                return Err(FunctionError::Arity(format!(
                    "Function `multiIf` takes an odd number of arguments, got {}",
                    args.len()
                )));
            }
            // Values (every second argument and the last) agree on a numeric supertype.
            let n = args.len();
            let values: Vec<Expr> = args
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == 1 || *i == n - 1)
                .map(|(_, v)| v.clone())
                .collect();
            let mut values = agree_numeric(values, ctx.schema)?.into_iter();
            let args: Vec<Expr> = args
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    if i % 2 == 1 || i == n - 1 {
                        values.next().expect("a value")
                    } else {
                        a
                    }
                })
                .collect();
            let mut args = args;
            let else_ = args.pop().expect("odd count");
            let mut it = args.into_iter();
            let mut case = None::<datafusion::logical_expr::conditional_expressions::CaseBuilder>;
            while let (Some(c), Some(v)) = (it.next(), it.next()) {
                let c = condition(c, ctx)?;
                case = Some(match case {
                    None => when(c, v),
                    Some(mut b) => b.when(c, v),
                });
            }
            build(case.expect("at least one branch").otherwise(else_))
        }
        "transform" => {
            let default = if args.len() == 4 { args.pop() } else { None };
            let to = args.pop().expect("3 args");
            let from = args.pop().expect("3 args");
            let x = args.pop().expect("3 args");
            let (from, to) = match (array_items(&from), array_items(&to)) {
                (Some(a), Some(b)) if a.len() == b.len() => (a, b),
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "The second and third arguments of `transform` must have the same size",
                    ));
                }
                _ => {
                    return Err(invalid(
                        "The second and third arguments of `transform` must be constant arrays",
                    ));
                }
            };
            let otherwise = default.unwrap_or_else(|| x.clone());
            if from.is_empty() {
                return Ok(otherwise);
            }
            // The values and the default agree as `if` branches do (a literal array's narrow
            // element type meets the default's).
            let mut values = agree_numeric([to, vec![otherwise]].concat(), ctx.schema)?;
            let otherwise = values.pop().expect("the default");
            let to = values;
            let mut case = None::<datafusion::logical_expr::conditional_expressions::CaseBuilder>;
            for (k, v) in from.into_iter().zip(to) {
                let c = x.clone().eq(k);
                case = Some(match case {
                    None => when(c, v),
                    Some(mut b) => b.when(c, v),
                });
            }
            build(case.expect("non-empty").otherwise(otherwise))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Expr;

    fn list(items: Vec<ScalarValue>) -> Expr {
        Expr::Literal(
            ScalarValue::List(ScalarValue::new_list_nullable(
                &items,
                &items[0].data_type(),
            )),
            None,
        )
    }

    #[test]
    fn conditionals() {
        check(vec![
            (call("coalesce", vec![null(), s("b")]), "b"),
            (call("ifNull", vec![null(), s("x")]), "x"),
            // A comparison with ClickHouse's 0 and 1 for false and true.
            (
                call("ifNull", vec![call("isNull", vec![i(1)]), i(1)]),
                "false",
            ),
            (
                call(
                    "ifNull",
                    vec![
                        call(
                            "nullIf",
                            vec![call("isNull", vec![null()]), call("isNull", vec![null()])],
                        ),
                        i(1),
                    ],
                ),
                "true",
            ),
            (call("nullIf", vec![s("a"), s("a")]), "\\N"),
            (call("nullIf", vec![s("a"), s("b")]), "a"),
            (call("isNull", vec![null()]), "true"),
            (call("isNotNull", vec![null()]), "false"),
            (call("if", vec![i(1), s("y"), s("n")]), "y"),
            (call("if", vec![i(0), s("y"), s("n")]), "n"),
            (
                call("if", vec![call("isNull", vec![null()]), i(1), i(2)]),
                "1",
            ),
            (
                call("multiIf", vec![i(0), s("a"), i(1), s("b"), s("c")]),
                "b",
            ),
            (
                call("multiIf", vec![i(0), s("a"), i(0), s("b"), s("c")]),
                "c",
            ),
            (
                call(
                    "transform",
                    vec![
                        i(2),
                        list(vec![
                            ScalarValue::Int64(Some(1)),
                            ScalarValue::Int64(Some(2)),
                        ]),
                        list(vec![ScalarValue::from("one"), ScalarValue::from("two")]),
                        s("other"),
                    ],
                ),
                "two",
            ),
            (
                call(
                    "transform",
                    vec![
                        i(3),
                        list(vec![
                            ScalarValue::Int64(Some(1)),
                            ScalarValue::Int64(Some(2)),
                        ]),
                        list(vec![ScalarValue::from("one"), ScalarValue::from("two")]),
                        s("other"),
                    ],
                ),
                "other",
            ),
            (
                call(
                    "transform",
                    vec![
                        i(3),
                        list(vec![ScalarValue::Int64(Some(1))]),
                        list(vec![ScalarValue::Int64(Some(10))]),
                    ],
                ),
                "3",
            ),
        ]);
        assert_eq!(
            rows(call("if", vec![c("i"), s("y"), s("n")])),
            ["y", "y", "n", "n"]
        );
        assert_eq!(
            rows(call("coalesce", vec![c("s"), s("z")])),
            ["Hello", "", "héllo wörld", "z"]
        );
    }

    /// A UInt64 above Int64's range with a signed value has no common type short of
    /// ClickHouse's Variant: refused while planning, not a failed cast later. Within one
    /// signedness, or with a float, the values still agree.
    #[test]
    fn no_supertype_of_a_large_uint64_and_a_signed_value() {
        let big = || Expr::Literal(ScalarValue::UInt64(Some(9_223_372_036_854_776_807)), None);
        for name in ["if", "multiIf"] {
            let e = try_call(name, vec![i(1), big(), i(-1)]).unwrap_err();
            assert!(
                e.to_string()
                    .contains("no supertype for the UInt64 9223372036854776807"),
                "{name}: {e}"
            );
        }
        assert_eq!(
            typ(call("if", vec![i(1), big(), i(5)])),
            datafusion::arrow::datatypes::DataType::UInt64
        );
        assert_eq!(
            typ(call("if", vec![i(0), big(), fl(1.5)])),
            datafusion::arrow::datatypes::DataType::Float64
        );
    }
}

#[cfg(test)]
mod supertype_tests {
    use super::numeric_supertype;
    use datafusion::arrow::datatypes::DataType::*;

    /// ClickHouse's `toTypeName(if(…))` for these pairs (chdb).
    #[test]
    fn numeric_supertypes() {
        assert_eq!(numeric_supertype(&[Int64, Float64]), Some(Float64));
        assert_eq!(numeric_supertype(&[UInt8, Int16]), Some(Int16));
        assert_eq!(numeric_supertype(&[UInt8, UInt32]), Some(UInt32));
        assert_eq!(numeric_supertype(&[Int8, UInt16]), Some(Int32));
        assert_eq!(numeric_supertype(&[Float32, Float32, Null]), None);
        assert_eq!(numeric_supertype(&[Int64, Null]), None);
        assert_eq!(numeric_supertype(&[Utf8, Int64]), None);
        assert_eq!(numeric_supertype(&[Boolean, Int64]), Some(Int64));
    }
}
