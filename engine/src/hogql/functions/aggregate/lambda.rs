//! Higher-order array functions.
use super::super::{Arg, FnContext};
use super::FunctionError;
use datafusion::logical_expr::Expr;

pub(super) fn is_higher_order(name: &str) -> bool {
    name.starts_with("arrayMap")
}

pub(super) fn translate(
    name: &str,
    args: Vec<Arg>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let _ = (args, ctx);
    Err(FunctionError::Unknown(name.to_string()))
}
