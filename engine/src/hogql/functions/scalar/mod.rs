//! HogQL functions: scalar part. See `super` for the contract.

use super::{Arg, FnContext, FnInfo, FunctionError};
use datafusion::logical_expr::Expr;

pub fn lookup(name: &str) -> Option<FnInfo> {
    let _ = name;
    None
}

pub fn translate(
    name: &str,
    params: Vec<Expr>,
    args: Vec<Arg>,
    distinct: bool,
    ctx: &FnContext<'_>,
) -> Result<Expr, FunctionError> {
    let _ = (params, args, distinct, ctx);
    Err(FunctionError::Unknown(name.to_string()))
}
