//! Tuple functions, element by element as ClickHouse: `tuplePlus`, `tupleMinus`,
//! `tupleMultiply` (integer arithmetic as the operators), `tupleDivide` (float division),
//! `tupleNegate`, `tupleMultiplyByNumber`, `tupleDivideByNumber` (float), the tuples of equal
//! size; `tupleHammingDistance` (how many positions differ, NULL when a pair compares to
//! NULL); `tupleToNameValuePairs` (an array of (name, value), an unnamed tuple's names being
//! its positions '1', '2', …, the values of one type).

use datafusion::arrow::datatypes::{DataType, Fields};
use datafusion::common::ScalarValue;
use datafusion::functions::core::expr_fn as core_fn;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, cast};

use super::intarith::{IntOp, int_arith};
use super::{FnContext, FunctionError, invalid, type_of};

fn lit(s: String) -> Expr {
    Expr::Literal(ScalarValue::Utf8(Some(s)), None)
}

/// The fields of a tuple argument.
fn fields_of(name: &str, e: &Expr, ctx: &FnContext<'_>) -> Result<Fields, FunctionError> {
    match type_of(e, ctx)? {
        DataType::Struct(f) => Ok(f),
        t => Err(invalid(format!(
            "Function `{name}` needs a tuple argument, got {t}"
        ))),
    }
}

fn elements(e: &Expr, fields: &Fields) -> Vec<Expr> {
    fields
        .iter()
        .map(|f| core_fn::get_field(e.clone(), f.name().clone()))
        .collect()
}

/// A tuple of `items`, named as hedgerow names tuple elements (c0, c1, …).
fn tuple(items: Vec<Expr>) -> Expr {
    let mut args = vec![];
    for (i, it) in items.into_iter().enumerate() {
        args.push(lit(format!("c{i}")));
        args.push(it);
    }
    core_fn::named_struct(args)
}

fn numeric(name: &str, t: &DataType) -> Result<(), FunctionError> {
    if t.is_numeric() || matches!(t, DataType::Null | DataType::Boolean) {
        Ok(())
    } else {
        Err(invalid(format!(
            "Illegal type {t} of a tuple element in function `{name}`, expected a number"
        )))
    }
}

fn arith(
    name: &str,
    op: Operator,
    l: Expr,
    r: Expr,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let (lt, rt) = (type_of(&l, ctx)?, type_of(&r, ctx)?);
    numeric(name, &lt)?;
    numeric(name, &rt)?;
    if op == Operator::Divide {
        return Ok(cast(l, DataType::Float64) / cast(r, DataType::Float64));
    }
    let int_op = match op {
        Operator::Plus => IntOp::Add,
        Operator::Minus => IntOp::Sub,
        _ => IntOp::Mul,
    };
    if let Some(e) =
        int_arith(int_op, l.clone(), r.clone(), &lt, &rt).map_err(|e| invalid(e.to_string()))?
    {
        return Ok(e);
    }
    Ok(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(l),
        op,
        Box::new(r),
    )))
}

pub(super) fn translate(
    name: &str,
    mut args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    match name {
        "tuplePlus" | "tupleMinus" | "tupleMultiply" | "tupleDivide" | "tupleHammingDistance" => {
            let b = args.pop().expect("2 args");
            let a = args.pop().expect("2 args");
            let (fa, fb) = (fields_of(name, &a, ctx)?, fields_of(name, &b, ctx)?);
            if fa.len() != fb.len() {
                return Err(invalid(format!(
                    "Expected tuples of the same size as arguments of function `{name}`, got {} \
                     and {} elements",
                    fa.len(),
                    fb.len()
                )));
            }
            let pairs = elements(&a, &fa).into_iter().zip(elements(&b, &fb));
            if name == "tupleHammingDistance" {
                let mut sum: Option<Expr> = None;
                for (x, y) in pairs {
                    let ne = cast(
                        Expr::BinaryExpr(BinaryExpr::new(
                            Box::new(x),
                            Operator::NotEq,
                            Box::new(y),
                        )),
                        DataType::UInt64,
                    );
                    sum = Some(match sum {
                        Some(s) => s + ne,
                        None => ne,
                    });
                }
                return Ok(sum.unwrap_or_else(|| Expr::Literal(ScalarValue::UInt64(Some(0)), None)));
            }
            let op = match name {
                "tuplePlus" => Operator::Plus,
                "tupleMinus" => Operator::Minus,
                "tupleMultiply" => Operator::Multiply,
                _ => Operator::Divide,
            };
            let items = pairs
                .map(|(x, y)| arith(name, op, x, y, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(tuple(items))
        }
        "tupleMultiplyByNumber" | "tupleDivideByNumber" => {
            let n = args.pop().expect("2 args");
            numeric(name, &type_of(&n, ctx)?)?;
            let a = args.pop().expect("2 args");
            let fa = fields_of(name, &a, ctx)?;
            let op = if name == "tupleMultiplyByNumber" {
                Operator::Multiply
            } else {
                Operator::Divide
            };
            let items = elements(&a, &fa)
                .into_iter()
                .map(|x| arith(name, op, x, n.clone(), ctx))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(tuple(items))
        }
        "tupleNegate" => {
            let a = args.pop().expect("1 arg");
            let fa = fields_of(name, &a, ctx)?;
            let items = elements(&a, &fa)
                .into_iter()
                .map(|x| {
                    let t = type_of(&x, ctx)?;
                    numeric(name, &t)?;
                    let zero = Expr::Literal(ScalarValue::Int64(Some(0)), None);
                    arith(name, Operator::Minus, zero, x, ctx)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(tuple(items))
        }
        "tupleToNameValuePairs" => {
            let a = args.pop().expect("1 arg");
            let fa = fields_of(name, &a, ctx)?;
            let Some(first) = fa.first() else {
                return Err(invalid(
                    "The argument tuple for function `tupleToNameValuePairs` must not be empty",
                ));
            };
            let t = first.data_type().clone();
            if fa.iter().any(|f| f.data_type() != &t) {
                return Err(invalid(
                    "The argument tuple for function `tupleToNameValuePairs` must contain just \
                     one type",
                ));
            }
            let items: Vec<Expr> = fa
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let name = match f.name().strip_prefix('c') {
                        Some(n) if n.parse::<usize>() == Ok(i) => (i + 1).to_string(),
                        _ => f.name().clone(),
                    };
                    tuple(vec![
                        lit(name),
                        core_fn::get_field(a.clone(), f.name().clone()),
                    ])
                })
                .collect();
            Ok(datafusion::functions_nested::expr_fn::make_array(items))
        }
        _ => Err(FunctionError::Unknown(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::tuple;

    #[test]
    fn tuples_like_clickhouse() {
        let t = |a: i64, b: f64| tuple(vec![i(a), fl(b)]);
        check(vec![
            (
                call("tuplePlus", vec![t(1, 2.0), t(3, 4.5)]),
                "{c0: 4, c1: 6.5}",
            ),
            (
                call("tupleDivideByNumber", vec![t(1, 2.0), i(0)]),
                "{c0: inf, c1: inf}",
            ),
            (call("tupleNegate", vec![t(1, -2.0)]), "{c0: -1, c1: 2.0}"),
            (
                call("tupleHammingDistance", vec![t(1, 2.0), t(1, 3.0)]),
                "1",
            ),
        ]);
        assert!(try_call("tuplePlus", vec![t(1, 2.0), tuple(vec![i(1)])]).is_err());
        assert!(try_call("tupleToNameValuePairs", vec![t(1, 2.0)]).is_err());
    }
}
