//! Rewrites a parsed query in place: [`rewrite_exprs`] hands every expression of a query,
//! its subqueries, CTEs and joins included, to a function that may replace it (how the
//! engine substitutes `{filters}` and other placeholders before planning).

use crate::ast::*;
use crate::nesting::{Nested, Nesting, deeper};

/// How deep the rewrite descends; deeper than any tree the parser builds.
const MAX_DEPTH: usize = 100_000;

/// Calls `f` on each expression of `q`, parents before their children. An expression `f`
/// replaces is then walked as replaced (so a replacement may itself hold placeholders);
/// `f` must not replace an expression with one that holds it, or the walk never ends.
pub fn rewrite_exprs(q: &mut Query, f: &mut (dyn FnMut(&mut Expr) + Send)) {
    let mut w = Walker {
        f,
        nest: Nesting::new(MAX_DEPTH),
    };
    w.query(q);
}

struct Walker<'f> {
    f: &'f mut (dyn FnMut(&mut Expr) + Send),
    nest: Nesting,
}

impl Nested for Walker<'_> {
    fn nesting(&mut self) -> &mut Nesting {
        &mut self.nest
    }
}

impl Walker<'_> {
    fn deeper(&mut self, g: impl FnOnce(&mut Self) + Send) {
        if deeper(self, g).is_err() {
            panic!("cannot start a thread to walk a deeply nested query");
        }
    }

    fn query(&mut self, q: &mut Query) {
        self.deeper(|w| match q {
            Query::Select(s) => w.select(s),
            Query::Placeholder(_) => {}
            Query::Offset { query, offset } => {
                w.query(query);
                w.expr(offset);
            }
            Query::SetOp { left, right, .. } => {
                w.query(left);
                w.query(right);
            }
        });
    }

    fn exprs(&mut self, v: &mut [Expr]) {
        for e in v {
            self.expr(e);
        }
    }

    fn tag(&mut self, t: &mut Tag) {
        for (_, v) in &mut t.attrs {
            if let TagValue::Expr(e) = v {
                self.expr(e);
            }
        }
        for c in &mut t.children {
            match c {
                TagChild::Expr(e) => self.expr(e),
                TagChild::Tag(inner) => self.deeper(|w| w.tag(inner)),
                TagChild::Text(_) => {}
            }
        }
    }

    fn opt(&mut self, e: &mut Option<Expr>) {
        if let Some(e) = e {
            self.expr(e);
        }
    }

    fn order(&mut self, v: &mut [OrderExpr]) {
        for o in v {
            self.expr(&mut o.expr);
        }
    }

    fn window(&mut self, s: &mut WindowSpec) {
        self.exprs(&mut s.partition_by);
        self.order(&mut s.order_by);
        if let Some(frame) = &mut s.frame {
            for b in std::iter::once(&mut frame.start).chain(frame.end.iter_mut()) {
                if let FrameBound::Preceding(e) | FrameBound::Following(e) = b {
                    self.expr(e);
                }
            }
        }
    }

    fn table(&mut self, t: &mut TableExpr) {
        match &mut t.source {
            TableSource::Subquery(q) => self.query(q),
            TableSource::Function { args, .. } => self.exprs(args),
            TableSource::Table(_) | TableSource::Placeholder(_) => {}
            TableSource::Tag(tag) => self.tag(tag),
            TableSource::Joined(from) => {
                let from = &mut **from;
                self.deeper(|w| {
                    w.table(&mut from.first);
                    for j in &mut from.joins {
                        w.table(&mut j.table);
                        if let Some(JoinConstraint::On(e)) = &mut j.constraint {
                            w.expr(e);
                        }
                    }
                });
            }
            TableSource::Pivot { base, pivot } => {
                self.table(base);
                self.exprs(&mut pivot.values);
                self.expr(&mut pivot.column);
                self.exprs(&mut pivot.list);
            }
        }
        if let Some(s) = &mut t.sample {
            self.expr(&mut s.ratio);
            self.opt(&mut s.offset);
        }
    }

    fn select(&mut self, s: &mut Select) {
        for c in &mut s.with {
            match c {
                Cte::Subquery { query, .. } => self.query(query),
                Cte::Expr { expr, .. } => self.expr(expr),
            }
        }
        self.exprs(&mut s.columns);
        if let Some(from) = &mut s.from {
            self.table(&mut from.first);
            for j in &mut from.joins {
                self.table(&mut j.table);
                if let Some(JoinConstraint::On(e)) = &mut j.constraint {
                    self.expr(e);
                }
            }
        }
        if let Some(aj) = &mut s.array_join {
            self.exprs(&mut aj.exprs);
        }
        self.opt(&mut s.prewhere);
        self.opt(&mut s.where_);
        if let Some(g) = &mut s.group_by {
            self.exprs(&mut g.exprs);
        }
        self.opt(&mut s.having);
        for (_, w) in &mut s.window {
            self.window(w);
        }
        self.opt(&mut s.qualify);
        if let Some(smp) = &mut s.sample {
            self.expr(&mut smp.ratio);
            self.opt(&mut smp.offset);
        }
        self.order(&mut s.order_by);
        if let Some(lb) = &mut s.limit_by {
            self.expr(&mut lb.limit);
            self.opt(&mut lb.offset);
            self.exprs(&mut lb.by);
        }
        self.opt(&mut s.limit);
        self.opt(&mut s.offset);
    }

    fn expr(&mut self, e: &mut Expr) {
        (self.f)(e);
        self.deeper(|w| match &mut e.kind {
            ExprKind::Literal(_)
            | ExprKind::Field(_)
            | ExprKind::Star(_)
            | ExprKind::Placeholder(_)
            | ExprKind::PositionalRef(_)
            | ExprKind::Block(_) => {}
            ExprKind::WithinGroup { call, order_by } => {
                w.expr(call);
                w.order(order_by);
            }
            ExprKind::Tag(tag) => w.tag(tag),
            ExprKind::Spread(cols) => w.expr(cols),
            ExprKind::PlaceholderExpr(inner) => w.expr(inner),
            ExprKind::Index { base, index, .. } => {
                w.expr(base);
                w.expr(index);
            }
            ExprKind::TupleElement { base, .. } => w.expr(base),
            ExprKind::Call {
                params, args, over, ..
            } => {
                if let Some(p) = params {
                    w.exprs(p);
                }
                w.exprs(args);
                if let Some(Over::Spec(s)) = over {
                    w.window(s);
                }
            }
            ExprKind::Lambda { body, .. } => w.expr(body),
            ExprKind::NullsAction { expr, .. } => w.expr(expr),
            ExprKind::ExprCall { callee, args } => {
                w.expr(callee);
                w.exprs(args);
            }
            ExprKind::Columns(c) => {
                if let ColumnsSource::List(list) = &mut c.source {
                    w.exprs(list);
                }
                for (e, _) in &mut c.replace {
                    w.expr(e);
                }
            }
            ExprKind::Binary { left, right, .. } => {
                w.expr(left);
                w.expr(right);
            }
            ExprKind::Unary { expr, .. }
            | ExprKind::IsNull { expr, .. }
            | ExprKind::Cast { expr, .. }
            | ExprKind::Alias { expr, .. } => w.expr(expr),
            ExprKind::Interval { value, .. } => w.expr(value),
            ExprKind::Between {
                expr, low, high, ..
            } => {
                w.expr(expr);
                w.expr(low);
                w.expr(high);
            }
            ExprKind::In { expr, list, .. } => {
                w.expr(expr);
                match list {
                    InList::List(v) => w.exprs(v),
                    InList::Subquery(q) => w.query(q),
                    InList::Expr(x) | InList::Cohort(x) => w.expr(x),
                }
            }
            ExprKind::Case {
                operand,
                whens,
                else_,
            } => {
                if let Some(o) = operand {
                    w.expr(o);
                }
                for (c, r) in whens {
                    w.expr(c);
                    w.expr(r);
                }
                if let Some(x) = else_ {
                    w.expr(x);
                }
            }
            ExprKind::Ternary { cond, then, else_ } => {
                w.expr(cond);
                w.expr(then);
                w.expr(else_);
            }
            ExprKind::Array(v) | ExprKind::Tuple(v) => w.exprs(v),
            ExprKind::Subquery(q) | ExprKind::Exists(q) => w.query(q),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{parse_expr, parse_query};
    use crate::print;

    #[test]
    fn every_placeholder_is_reached_and_replacements_are_walked() {
        let mut q = parse_query(
            "WITH {a} AS c, s AS (SELECT {a} FROM t) \
             SELECT {a}, f({a})[{a}], x IN ({a}), CASE WHEN {a} THEN {a} ELSE {a} END, \
             count() OVER (PARTITION BY {a} ORDER BY {a}) \
             FROM t SAMPLE {a} JOIN (SELECT {a}) AS u ON {a} ARRAY JOIN {a} AS arr \
             PREWHERE {a} WHERE {b} AND (SELECT {a}) GROUP BY {a} HAVING {a} \
             ORDER BY {a} LIMIT {a} BY {a} LIMIT {a} OFFSET {a} \
             UNION ALL SELECT [{a}, ({a}, 1)], -{a}, {a} BETWEEN {a} AND {a}, EXISTS (SELECT {a})",
        )
        .unwrap();
        let mut n = 0;
        rewrite_exprs(&mut q, &mut |e| match &e.kind {
            ExprKind::Placeholder(p) if p == "a" => {
                n += 1;
                *e = parse_expr("1").unwrap();
            }
            // A replacement that holds a placeholder: it is walked too.
            ExprKind::Placeholder(p) if p == "b" => *e = parse_expr("{a} = 2").unwrap(),
            _ => {}
        });
        let text = print::query(&q);
        assert!(!text.contains('{'), "{text}");
        assert_eq!(n, 32, "{text}");
    }
}
