//! Array functions.
use super::super::FnContext;
use super::FunctionError;
use datafusion::logical_expr::Expr;

pub(super) fn translate(
    name: &str,
    args: Vec<Expr>,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let _ = (args, ctx);
    Err(FunctionError::Unknown(name.to_string()))
}
