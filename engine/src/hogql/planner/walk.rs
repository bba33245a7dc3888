//! Walks over the HogQL tree: a SELECT's expressions, aliases, lazy fields, ARRAY JOIN calls
//! and aggregates.

use super::*;

/// Every expression of a SELECT that may name fields (for finding lazy joins).
pub(super) fn select_exprs(s: &ast::Select) -> Vec<&ast::Expr> {
    let mut v: Vec<&ast::Expr> = s.columns.iter().collect();
    v.extend(s.prewhere.iter());
    v.extend(s.where_.iter());
    v.extend(s.having.iter());
    v.extend(s.qualify.iter());
    if let Some(g) = &s.group_by {
        v.extend(g.exprs.iter());
    }
    v.extend(s.order_by.iter().map(|o| &o.expr));
    if let Some(aj) = &s.array_join {
        v.extend(aj.exprs.iter());
    }
    if let Some(f) = &s.from {
        for j in &f.joins {
            if let Some(ast::JoinConstraint::On(e)) = &j.constraint {
                v.push(e);
            }
        }
    }
    for c in &s.with {
        if let ast::Cte::Expr { expr, .. } = c {
            v.push(expr);
        }
    }
    v
}

/// Calls `f` on `e` and every expression below it (not into subqueries).
pub(super) fn walk<'a>(e: &'a ast::Expr, f: &mut dyn FnMut(&'a ast::Expr)) {
    f(e);
    let mut go = |x: &'a ast::Expr| walk(x, f);
    match &e.kind {
        ExprKind::Index { base, index, .. } => {
            go(base);
            go(index);
        }
        ExprKind::TupleElement { base, .. } => go(base),
        ExprKind::Call {
            params, args, over, ..
        } => {
            for p in params.iter().flatten() {
                go(p);
            }
            for a in args {
                go(a);
            }
            if let Some(ast::Over::Spec(s)) = over {
                for p in &s.partition_by {
                    go(p);
                }
                for o in &s.order_by {
                    go(&o.expr);
                }
            }
        }
        ExprKind::Lambda { body, .. } => go(body),
        ExprKind::Binary { left, right, .. } => {
            go(left);
            go(right);
        }
        ExprKind::Unary { expr, .. }
        | ExprKind::IsNull { expr, .. }
        | ExprKind::Cast { expr, .. }
        | ExprKind::Alias { expr, .. } => go(expr),
        ExprKind::Interval { value, .. } => go(value),
        ExprKind::Between {
            expr, low, high, ..
        } => {
            go(expr);
            go(low);
            go(high);
        }
        ExprKind::In { expr, list, .. } => {
            go(expr);
            match list {
                ast::InList::List(items) => items.iter().for_each(&mut go),
                ast::InList::Expr(x) | ast::InList::Cohort(x) => go(x),
                ast::InList::Subquery(_) => {}
            }
        }
        ExprKind::Case {
            operand,
            whens,
            else_,
        } => {
            if let Some(o) = operand {
                go(o);
            }
            for (a, b) in whens {
                go(a);
                go(b);
            }
            if let Some(x) = else_ {
                go(x);
            }
        }
        ExprKind::Ternary { cond, then, else_ } => {
            go(cond);
            go(then);
            go(else_);
        }
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter().for_each(go),
        ExprKind::NullsAction { expr, .. } => go(expr),
        ExprKind::WithinGroup { call, order_by } => {
            go(call);
            order_by.iter().for_each(|o| go(&o.expr));
        }
        ExprKind::ExprCall { callee, args } => {
            go(callee);
            args.iter().for_each(go);
        }
        ExprKind::Columns(c) => {
            if let ast::ColumnsSource::List(list) = &c.source {
                list.iter().for_each(&mut go);
            }
            c.replace.iter().for_each(|(e, _)| go(e));
        }
        ExprKind::Literal(_)
        | ExprKind::Field(_)
        | ExprKind::Star(_)
        | ExprKind::Placeholder(_)
        | ExprKind::PositionalRef(_)
        | ExprKind::Block(_)
        | ExprKind::Tag(_)
        | ExprKind::Spread(_)
        | ExprKind::PlaceholderExpr(_)
        | ExprKind::Subquery(_)
        | ExprKind::Exists(_) => {}
    }
}

pub(super) fn collect_aliases(e: &ast::Expr, out: &mut HashMap<String, ast::Expr>) {
    walk(e, &mut |x| {
        if let ExprKind::Alias { expr, name } = &x.kind {
            out.entry(name.clone()).or_insert_with(|| (**expr).clone());
        }
    });
}

pub(super) fn collect_lazy(e: &ast::Expr, out: &mut HashSet<String>) {
    walk(e, &mut |x| {
        if let ExprKind::Field(p) = &x.kind {
            // `person.id` is the event's own column and `person.properties` its snapshot
            // (unless the persons mode joins): they are marked apart from the join.
            let key = |name: &str, next: Option<&String>| match (name, next.map(String::as_str)) {
                ("person", Some("id")) => None,
                ("person", Some("properties")) => Some("person.properties".to_string()),
                _ => Some(name.to_string()),
            };
            if p.len() > 1
                && EVENTS_LAZY_JOINS.contains(&p[0].as_str())
                && let Some(k) = key(&p[0], p.get(1))
            {
                out.insert(format!(".{k}"));
            }
            if p.len() > 2
                && EVENTS_LAZY_JOINS.contains(&p[1].as_str())
                && let Some(k) = key(&p[1], p.get(2))
            {
                out.insert(format!("{}.{k}", p[0]));
            }
        }
    });
}

pub(super) fn collect_array_join_calls(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    walk(e, &mut |x| {
        if let ExprKind::Call { name, .. } = &x.kind
            && name == "arrayJoin"
            && !out.contains(x)
        {
            out.push(x.clone());
        }
    });
}

pub(super) fn is_aggregate_name(name: &str) -> bool {
    functions::lookup(name).is_some_and(|i| i.kind == FnKind::Aggregate)
}

/// The first aggregate call in `e` that has no OVER, with its position.
pub(super) fn find_aggregate_call(e: &ast::Expr) -> Option<(String, Span)> {
    let mut found = None;
    walk(e, &mut |x| {
        if found.is_none()
            && let ExprKind::Call {
                name, over: None, ..
            } = &x.kind
            && is_aggregate_name(name)
        {
            found = Some((name.clone(), x.span));
        }
    });
    found
}

pub(super) fn contains_aggregate(e: &ast::Expr) -> bool {
    find_aggregate_call(e).is_some()
}
