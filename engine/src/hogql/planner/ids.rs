//! HogQL's UUID type. `uuid`, `person_id`, `persons.id` and `person_distinct_ids.person_id`
//! are 16-byte values (`FixedSizeBinary(16)`), as ClickHouse's UUID columns are: hashing,
//! grouping, `count(DISTINCT …)` and joins work on the 16 bytes, and results show PostHog's
//! lowercase hyphenated text (`query::result`).
//!
//! Where a UUID meets text, ClickHouse's rules: a string literal compared with a UUID is
//! read as one; anything else that needs text (string functions, LIKE, a comparison with a
//! string column, a CASE whose other branches are strings, a UNION with a string column)
//! gets the UUID's text.

use super::*;

pub(super) fn is_uuid(t: &DataType) -> bool {
    *t == crate::storage::ids::UUID_TYPE
}

/// Whether a value of type `a` meets text when compared or merged with one of type `b`: `a`
/// is a UUID and `b` is neither a UUID nor NULL.
fn uuid_meets_text(a: &DataType, b: &DataType) -> bool {
    is_uuid(a) && !is_uuid(b) && *b != DataType::Null
}

/// The functions that take a UUID as it is: they compare, hash, count, pick or move values
/// without reading them as text. Every other function gets the UUID's text.
const TAKE_UUID: &[&str] = &[
    "count",
    "countIf",
    "uniq",
    "uniqIf",
    "uniqExact",
    "uniqExactIf",
    "uniqHLL12",
    "uniqCombined",
    "uniqCombined64",
    "uniqTheta",
    "any",
    "anyIf",
    "anyLast",
    "anyLastIf",
    "argMax",
    "argMaxIf",
    "argMin",
    "argMinIf",
    "min",
    "max",
    "minIf",
    "maxIf",
    "groupArray",
    "groupArrayIf",
    "groupUniqArray",
    "isNull",
    "isNotNull",
    "assumeNotNull",
    "toUUID",
    "toString",
    "lagInFrame",
    "leadInFrame",
    "first_value",
    "last_value",
    "nth_value",
    "has",
];

/// The functions whose arguments become one value: a mix of UUIDs and text is text.
const MERGE_VALUES: &[&str] = &[
    "if", "multiIf", "coalesce", "ifNull", "nullIf", "greatest", "least", "array",
];

impl Planner<'_> {
    /// `e` as text when it is a UUID.
    pub(super) fn uuid_as_text(&self, e: Expr, schema: &DFSchema) -> PResult<Expr> {
        Ok(if is_uuid(&e.get_type(schema).map_err(df)?) {
            functions::uuid_text(e)
        } else {
            e
        })
    }

    /// A sort key as ClickHouse orders it: UUIDs by [`functions::uuid_order_key`] (min and max
    /// follow the same order: `call_translated`).
    pub(super) fn order_key(&self, e: Expr, schema: &DFSchema) -> Expr {
        match e.get_type(schema) {
            Ok(t) if is_uuid(&t) => functions::uuid_order_key(e),
            _ => e,
        }
    }

    /// Values that meet (both sides of a comparison, the branches of a CASE, an IN list):
    /// when some are UUIDs and others are neither UUIDs nor NULL, the UUIDs become text.
    pub(super) fn uuid_agree(&self, exprs: Vec<Expr>, schema: &DFSchema) -> PResult<Vec<Expr>> {
        let types = exprs
            .iter()
            .map(|e| e.get_type(schema).map_err(df))
            .collect::<PResult<Vec<_>>>()?;
        let mixed =
            types.iter().any(is_uuid) && types.iter().any(|t| !is_uuid(t) && *t != DataType::Null);
        if !mixed {
            return Ok(exprs);
        }
        Ok(exprs
            .into_iter()
            .zip(types)
            .map(|(e, t)| {
                if is_uuid(&t) {
                    functions::uuid_text(e)
                } else {
                    e
                }
            })
            .collect())
    }

    /// The arguments of function `name` under the UUID rules above.
    pub(super) fn uuid_args(
        &self,
        name: &str,
        args: Vec<Arg>,
        schema: &DFSchema,
    ) -> PResult<Vec<Arg>> {
        let mut any_uuid = false;
        for a in &args {
            if let Arg::Expr(e) = a
                && is_uuid(&e.get_type(schema).map_err(df)?)
            {
                any_uuid = true;
                break;
            }
        }
        if !any_uuid {
            return Ok(args);
        }
        if MERGE_VALUES.contains(&name) {
            // Conditions stay as they are; the values agree.
            let values: Vec<usize> = match name {
                "if" => vec![1, 2],
                "multiIf" => (0..args.len())
                    .filter(|i| i % 2 == 1 || *i == args.len() - 1)
                    .collect(),
                _ => (0..args.len()).collect(),
            };
            let mut args = args;
            let picked: Vec<Expr> = values
                .iter()
                .filter_map(|i| match args.get(*i) {
                    Some(Arg::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            if picked.len() == values.len() {
                let agreed = self.uuid_agree(picked, schema)?;
                for (i, e) in values.into_iter().zip(agreed) {
                    args[i] = Arg::Expr(e);
                }
            }
            return Ok(args);
        }
        if TAKE_UUID.contains(&name) {
            return Ok(args);
        }
        args.into_iter()
            .map(|a| match a {
                Arg::Expr(e) => Ok(Arg::Expr(self.uuid_as_text(e, schema)?)),
                other => Ok(other),
            })
            .collect()
    }

    /// `v IN (plan)` (one column) with both sides as text when one is a UUID and the other
    /// text.
    pub(super) fn uuid_subquery_agree(
        &self,
        v: Expr,
        plan: LogicalPlan,
        scope: &Scope<'_>,
    ) -> PResult<(Expr, LogicalPlan)> {
        let vt = v.get_type(&scope.schema).map_err(df)?;
        let (q, f) = plan.schema().qualified_field(0);
        let pt = f.data_type();
        if uuid_meets_text(&vt, pt) {
            return Ok((functions::uuid_text(v), plan));
        }
        if !uuid_meets_text(pt, &vt) {
            return Ok((v, plan));
        }
        let name = f.name().clone();
        let c = Expr::Column(Column::new(q.cloned(), f.name()));
        let plan = LogicalPlanBuilder::from(plan)
            .project(vec![functions::uuid_text(c).alias(name)])
            .and_then(|b| b.build())
            .map_err(df)?;
        Ok((v, plan))
    }

    /// The two sides of a set operation with every column where one is a UUID and the other
    /// text as text on both.
    pub(super) fn uuid_set_op_agree(
        &self,
        l: LogicalPlan,
        r: LogicalPlan,
    ) -> PResult<(LogicalPlan, LogicalPlan)> {
        set_op_agree(l, r, uuid_meets_text, |f, c| {
            is_uuid(f.data_type()).then(|| functions::uuid_text(c))
        })
    }
}
