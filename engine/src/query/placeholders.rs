//! PostHog's reserved placeholders, substituted into the parsed query before it is planned
//! (so the joins they need, `person.…` or `session.…`, are found like any written field):
//! `{filters}` (the query's `filters`, or `filters_override`: properties and a date range
//! on `timestamp`), `{filters.dateRange.from}` and `{filters.dateRange.to}`; and
//! `IN COHORT x`, which becomes a subquery of the cohort's members. Variables
//! (`{variables.name}`) and the query's own `values` are constants the planner reads.

use std::collections::HashMap;

use serde_json::Value;

use crate::hogql::ast::{self, BinaryOp, ExprKind, Literal};
use crate::hogql::planner::PlanError;
use crate::hogql::{parser, visit};
use crate::insights::{self, FilterContext};

/// The values key the query's `filters` arrive under (as PostHog's `{filters}` does).
pub(super) const FILTERS: &str = "filters";

/// Substitutes `{filters}` and its date bounds in `query`. Filters that say something but
/// have no `{filters}` placeholder to go to are refused: they are never dropped silently.
pub(super) fn substitute(
    query: &mut ast::Query,
    values: &HashMap<String, Value>,
    cx: &FilterContext,
    cohorts: &(dyn Fn() -> Result<Vec<(i64, String)>, PlanError> + Sync),
) -> Result<(), PlanError> {
    let filters = values.get(FILTERS).unwrap_or(&Value::Null);
    let bad = |e: insights::FilterError| PlanError::new(format!("filters: {e}"), None);
    let condition = insights::hogql_filters(filters, cx)
        .map_err(bad)?
        .map(|text| {
            parser::parse_expr(&text)
                .map_err(|e| PlanError::new(format!("filters do not make a condition: {e}"), None))
        })
        .transpose()?;
    let (from, to) = insights::date_range(filters, cx).map_err(bad)?;
    let literal =
        |t: Option<String>| t.map(|text| parser::parse_expr(&text).expect("a date literal parses"));
    let (from, to) = (literal(from), literal(to));

    let mut used = false;
    let mut failure: Option<PlanError> = None;
    let truth = || ast::Expr::new(ExprKind::Literal(Literal::Bool(true)), ast::Span::default());
    visit::rewrite_exprs(query, &mut |e: &mut ast::Expr| {
        let bound_of = |name: &str| match name {
            "filters.dateRange.from" => Some(&from),
            "filters.dateRange.to" => Some(&to),
            _ => None,
        };
        // A comparison with an unset bound compares with nothing: it is `true`, as in
        // PostHog (`timestamp >= {filters.dateRange.from}` without a start).
        if let ExprKind::Binary { op, left, right } = &e.kind
            && matches!(
                op,
                BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::Eq
            )
        {
            let unset = [left, right].iter().any(|side| match &side.kind {
                ExprKind::Placeholder(p) => bound_of(p).is_some_and(|b| b.is_none()),
                _ => false,
            });
            if unset {
                *e = truth();
                return;
            }
        }
        let ExprKind::Placeholder(name) = &e.kind else {
            return;
        };
        if name == FILTERS {
            used = true;
            *e = match &condition {
                Some(c) => wrap(c.clone(), e.span),
                None => truth(),
            };
        } else if let Some(b) = bound_of(name) {
            used = true;
            match b {
                Some(x) => *e = x.clone(),
                None => {
                    failure.get_or_insert(PlanError::new(
                        format!(
                            "{{{name}}} is not set by the filters' dateRange: use it directly in a comparison (timestamp >= {{{name}}}), which is then true"
                        ),
                        Some(e.span),
                    ));
                    *e = truth();
                }
            }
        } else if name.starts_with("filters.") {
            failure.get_or_insert(PlanError::new(
                format!(
                    "unsupported placeholder {{{name}}}: use {{filters}}, {{filters.dateRange.from}} or {{filters.dateRange.to}}"
                ),
                Some(e.span),
            ));
            *e = truth();
        }
    });
    if let Some(f) = failure {
        return Err(f);
    }
    // After `{filters}`, whose cohort filters are `IN COHORT` too.
    resolve_cohorts(query, cohorts)?;
    let says_something = condition.is_some() || from.is_some() || to.is_some();
    if says_something && !used {
        return Err(PlanError::new(
            "the query's filters (or filters_override) apply through a {filters} placeholder, \
             and the query has none: add WHERE {filters} where they belong",
            None,
        ));
    }
    Ok(())
}

/// `x IN COHORT 5` / `IN COHORT 'name'` becomes `x IN (SELECT person_id FROM cohort_people
/// WHERE cohort_id = 5)`: the members as last calculated (or added, for a static cohort).
/// The project's cohorts are read only when the query names one.
fn resolve_cohorts(
    query: &mut ast::Query,
    cohorts: &(dyn Fn() -> Result<Vec<(i64, String)>, PlanError> + Sync),
) -> Result<(), PlanError> {
    let mut named = false;
    visit::rewrite_exprs(query, &mut |e: &mut ast::Expr| {
        if let ExprKind::In {
            list: ast::InList::Cohort(_),
            ..
        } = &e.kind
        {
            named = true;
        }
    });
    if !named {
        return Ok(());
    }
    let known = cohorts()?;
    let mut failure: Option<PlanError> = None;
    visit::rewrite_exprs(query, &mut |e: &mut ast::Expr| {
        let ExprKind::In { list, .. } = &mut e.kind else {
            return;
        };
        let ast::InList::Cohort(which) = list else {
            return;
        };
        let id = match &which.kind {
            ExprKind::Literal(Literal::Int(n)) => known
                .iter()
                .find(|(id, _)| i128::from(*id) == *n)
                .map(|(id, _)| *id)
                .ok_or_else(|| format!("There is no cohort with id {n} in this project")),
            ExprKind::Literal(Literal::String(name)) => {
                let found: Vec<i64> = known
                    .iter()
                    .filter(|(_, n)| n == name)
                    .map(|(id, _)| *id)
                    .collect();
                match found.as_slice() {
                    [id] => Ok(*id),
                    [] => Err(format!("There is no cohort named '{name}' in this project")),
                    _ => Err(format!(
                        "{} cohorts are named '{name}': name one by its id ({:?})",
                        found.len(),
                        found
                    )),
                }
            }
            _ => Err("IN COHORT takes a cohort id or a cohort name".to_string()),
        };
        match id {
            Ok(id) => {
                let q = parser::parse_query(&format!(
                    "SELECT person_id FROM cohort_people WHERE cohort_id = {id}"
                ))
                .expect("the members' query parses");
                *list = ast::InList::Subquery(Box::new(q));
            }
            Err(m) => {
                failure.get_or_insert(PlanError::new(m, Some(which.span)));
            }
        }
    });
    match failure {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// The condition in parentheses, at the placeholder's position.
fn wrap(c: ast::Expr, span: ast::Span) -> ast::Expr {
    ast::Expr::new(c.kind, span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hogql::print;
    use serde_json::json;

    fn run(sql: &str, filters: Value) -> Result<String, String> {
        let cx = crate::insights::test_cx();
        let mut q = parser::parse_query(sql).unwrap();
        let values = HashMap::from([(FILTERS.to_string(), filters)]);
        let cohorts = || {
            Ok(vec![
                (3, "Pro".to_string()),
                (4, "Twin".into()),
                (5, "Twin".into()),
            ])
        };
        substitute(&mut q, &values, &cx, &cohorts).map_err(|e| e.to_string())?;
        Ok(print::query(&q))
    }

    #[test]
    fn cohorts_by_id_or_name_become_their_members() {
        assert_eq!(
            run(
                "SELECT 1 FROM events WHERE person_id IN COHORT 3 OR person_id NOT IN COHORT 'Pro'",
                Value::Null
            )
            .unwrap(),
            "SELECT 1 FROM events WHERE person_id IN (SELECT person_id FROM cohort_people WHERE cohort_id = 3) \
             OR person_id NOT IN (SELECT person_id FROM cohort_people WHERE cohort_id = 3)"
        );
        // A cohort filter of `{filters}` too.
        let f = json!({"properties": [{"key": "id", "value": 3, "type": "cohort"}]});
        assert!(
            run("SELECT 1 FROM events WHERE {filters}", f)
                .unwrap()
                .contains("WHERE cohort_id = 3")
        );
        for (sql, says) in [
            ("SELECT 1 IN COHORT 9", "no cohort with id 9"),
            ("SELECT 1 IN COHORT 'Nope'", "no cohort named 'Nope'"),
            ("SELECT 1 IN COHORT 'Twin'", "2 cohorts are named 'Twin'"),
        ] {
            let e = run(sql, Value::Null).unwrap_err();
            assert!(e.contains(says), "{sql}: {e}");
        }
    }

    #[test]
    fn filters_become_the_condition_and_bounds_literals() {
        let f = json!({"properties": [{"key": "plan", "value": "pro", "type": "person"}],
                       "dateRange": {"date_from": "-7d"}});
        assert_eq!(
            run(
                "SELECT count() FROM events WHERE {filters} AND event = 'x'",
                f.clone()
            )
            .unwrap(),
            "SELECT count() FROM events WHERE ifNull(toString(person.properties.plan) = 'pro', FALSE) \
             AND timestamp >= toDateTime64('2024-03-24 12:00:00.000000', 6, 'UTC') AND event = 'x'"
        );
        // No filters: `{filters}` is true, and a comparison with an unset bound too.
        assert_eq!(
            run(
                "SELECT 1 FROM events WHERE {filters} AND timestamp < {filters.dateRange.to}",
                Value::Null
            )
            .unwrap(),
            "SELECT 1 FROM events WHERE TRUE AND TRUE"
        );
        assert_eq!(
            run(
                "SELECT 1 FROM events WHERE timestamp >= {filters.dateRange.from}",
                f.clone()
            )
            .unwrap(),
            "SELECT 1 FROM events WHERE timestamp >= toDateTime64('2024-03-24 12:00:00.000000', 6, 'UTC')"
        );
        // In a subquery too.
        assert!(
            run(
                "SELECT * FROM (SELECT 1 FROM events WHERE {filters})",
                f.clone()
            )
            .unwrap()
            .contains("person.properties.plan")
        );
    }

    #[test]
    fn filters_that_cannot_apply_are_refused() {
        let f = json!({"properties": [{"key": "a", "value": 1}]});
        let e = run("SELECT 1 FROM events", f.clone()).unwrap_err();
        assert!(e.contains("{filters} placeholder"), "{e}");
        // Empty filters say nothing, so they need no placeholder.
        run("SELECT 1 FROM events", json!({"properties": []})).unwrap();
        let e = run("SELECT toDate({filters.dateRange.from})", Value::Null).unwrap_err();
        assert!(e.contains("directly in a comparison"), "{e}");
        let e = run("SELECT {filters.nope}", f.clone()).unwrap_err();
        assert!(e.contains("unsupported placeholder"), "{e}");
        let e = run(
            "SELECT 1 WHERE {filters}",
            json!({"properties": [{"key": "a", "operator": "??"}]}),
        )
        .unwrap_err();
        assert!(e.contains("operator '??'"), "{e}");
    }
}
