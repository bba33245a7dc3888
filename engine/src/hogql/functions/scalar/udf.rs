//! One generic `ScalarUDFImpl` for all our own scalar functions: a named kernel over whole
//! arrays, with the result type fixed when the call is translated (we know the argument
//! types then) and any constant parameters (time zone, unit, …) captured in the kernel and
//! spelled out in `key`, which is what makes two instances equal.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The array kernel: all arguments as arrays of equal length (`rows`), one result array.
pub(crate) type Kernel = Arc<dyn Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync>;

/// A kernel from a closure over the argument arrays and the batch's row count.
pub(crate) fn kernel(
    k: impl Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync + 'static,
) -> Kernel {
    Arc::new(k)
}

/// Whether the result may be NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Nulls {
    /// Nullable when any argument is.
    FromArgs,
    /// Nullable when the first argument is.
    FromFirst,
    Always,
}

pub(crate) struct KernelUdf {
    name: String,
    key: String,
    signature: Signature,
    ret: DataType,
    nulls: Nulls,
    kernel: Kernel,
}

impl fmt::Debug for KernelUdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelUdf")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("ret", &self.ret)
            .finish()
    }
}

impl PartialEq for KernelUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.key == other.key
            && self.ret == other.ret
            && self.nulls == other.nulls
    }
}

impl Eq for KernelUdf {}

impl Hash for KernelUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.key.hash(state);
        self.ret.hash(state);
    }
}

impl ScalarUDFImpl for KernelUdf {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The column name: `name(args)`, with the captured constants (`key`) when there are any,
    /// so two calls that differ only in them (`age('day', a, b)`, `age('month', a, b)`) are
    /// two columns, not a duplicate name in an aggregate's output.
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        let args = args
            .iter()
            .map(|a| a.schema_name().to_string())
            .collect::<Vec<_>>()
            .join(",");
        Ok(if self.key.is_empty() {
            format!("{}({args})", self.name)
        } else {
            format!("{}[{}]({args})", self.name, self.key)
        })
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.ret.clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let nullable = match self.nulls {
            Nulls::Always => true,
            Nulls::FromArgs => args.arg_fields.iter().any(|f| f.is_nullable()),
            Nulls::FromFirst => args.arg_fields.first().is_some_and(|f| f.is_nullable()),
        };
        Ok(Arc::new(Field::new(&self.name, self.ret.clone(), nullable)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if all_scalar {
            let arrays = args
                .args
                .iter()
                .map(|a| a.to_array(1))
                .collect::<Result<Vec<_>>>()?;
            let out = (self.kernel)(&arrays, 1)?;
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            let arrays = ColumnarValue::values_to_arrays(&args.args)?;
            let out = (self.kernel)(&arrays, args.number_rows)?;
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// Builds the call `name(args)` of a kernel. `key` must name every constant the kernel
/// captured.
pub(crate) fn call(
    name: &str,
    key: impl Into<String>,
    ret: DataType,
    nulls: Nulls,
    args: Vec<Expr>,
    kernel: Kernel,
) -> Expr {
    call_with(name, key, ret, nulls, args, kernel, Volatility::Immutable)
}

/// [`call`] with a volatility. `Volatility::Volatile` is for functions that make large
/// values from small arguments (`repeat`, the pads): never folded into a literal while
/// planning. A folded literal lives in the plan, outside the memory pool, and is copied
/// with it: `WITH repeat('x', 1000000) AS a, concat(a, a) AS b, …` folded 2^k copies of
/// megabyte strings and took 8 GB at 64 MB of result before this. Evaluated per batch
/// instead, under the output budget.
pub(crate) fn call_with(
    name: &str,
    key: impl Into<String>,
    ret: DataType,
    nulls: Nulls,
    args: Vec<Expr>,
    kernel: Kernel,
    volatility: Volatility,
) -> Expr {
    let udf = KernelUdf {
        name: name.to_string(),
        key: key.into(),
        signature: Signature::variadic_any(volatility),
        ret,
        nulls,
        kernel,
    };
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(udf)),
        args,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_differing_in_captured_constants_have_different_names() {
        let k: Kernel = Arc::new(|a: &[ArrayRef], _| Ok(a[0].clone()));
        let x = datafusion::prelude::col("x");
        let a = call(
            "f",
            "day",
            DataType::Int64,
            Nulls::FromArgs,
            vec![x.clone()],
            k.clone(),
        );
        let b = call(
            "f",
            "month",
            DataType::Int64,
            Nulls::FromArgs,
            vec![x.clone()],
            k.clone(),
        );
        let c = call("f", "", DataType::Int64, Nulls::FromArgs, vec![x], k);
        assert_eq!(a.schema_name().to_string(), "f[day](x)");
        assert_ne!(a.schema_name().to_string(), b.schema_name().to_string());
        assert_eq!(c.schema_name().to_string(), "f(x)");
    }
}
