//! Print a syntax tree back as normalized HogQL: keywords upper-case, names quoted with
//! backticks only when they must be, the fewest parentheses the parser needs. Pure (std only).
//!
//! `parse(print(tree)) == tree` holds for every tree the parser produces.

use crate::ast::*;
use crate::grammar::{WINDOW_WORDS, prec, quote};
pub use crate::grammar::{ident, string};
use crate::lexer::is_plain_identifier;
use crate::nesting::{Nested, Nesting, deeper};

/// A whole query as HogQL text.
pub fn query(q: &Query) -> String {
    let mut p = Printer::default();
    p.query(q);
    p.out
}

/// An expression as HogQL text.
pub fn expr(e: &Expr) -> String {
    let mut p = Printer::default();
    p.expr(e, prec::ALIAS);
    p.out
}

/// A name after a `.`: any plain identifier is fine there, keywords included.
fn part(name: &str) -> String {
    if is_plain_identifier(name) && !crate::grammar::is_never_name(name) {
        name.to_string()
    } else {
        quote(name)
    }
}

/// A placeholder's name: a dotted chain of plain names as written (`variables.limit`),
/// anything else quoted whole (which reads back as the same name).
fn placeholder(name: &str) -> String {
    if name.split('.').all(is_plain_identifier) {
        name.to_string()
    } else {
        quote(name)
    }
}

/// A function name: special forms (`CAST(`, `NOT(`, `tuple(` …) must be quoted to stay calls.
fn call_name(name: &str) -> String {
    // SELECT and WITH: a call of that name right after `(` would read back as a subquery
    // (found by fuzzing: `SELECT(1)[2] IN (…)` printed inside parentheses).
    // A clause word before `(` after a comma in the select list opens its clause
    // (`SELECT a, from(b)`); COLUMNS( is the columns form; the words PostHog never takes as
    // names are refused bare.
    const SPECIAL: &[&str] = &[
        "CAST",
        "CASE",
        "INTERVAL",
        "EXISTS",
        "NOT",
        "NULL",
        "TRUE",
        "FALSE",
        "INF",
        "NAN",
        "SELECT",
        "WITH",
        "FROM",
        "PREWHERE",
        "WHERE",
        "HAVING",
        "QUALIFY",
        "LIMIT",
        "OFFSET",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "COLUMNS",
    ];
    if is_plain_identifier(name)
        && name != "tuple"
        && !SPECIAL.iter().any(|s| s.eq_ignore_ascii_case(name))
        && !crate::grammar::is_never_name(name)
    {
        name.to_string()
    } else {
        quote(name)
    }
}

/// Whether `text`, which opens with `(`, is one parenthesized group: the `(` closes at the
/// last character. Quoted strings and names are skipped, escapes and all.
fn one_group(text: &str) -> bool {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1 == text.len();
                }
            }
            _ => {}
        }
    }
    false
}

fn float(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        // Debug always shows a '.' or an exponent, so the text reads back as a float.
        format!("{v:?}")
    }
}

fn binary_op(op: BinaryOp) -> (&'static str, u8) {
    use BinaryOp::*;
    match op {
        And => ("AND", prec::AND),
        Or => ("OR", prec::OR),
        Eq => ("=", prec::COMPARE),
        NotEq => ("!=", prec::COMPARE),
        Lt => ("<", prec::COMPARE),
        LtEq => ("<=", prec::COMPARE),
        Gt => (">", prec::COMPARE),
        GtEq => (">=", prec::COMPARE),
        Add => ("+", prec::ADD),
        Sub => ("-", prec::ADD),
        Mul => ("*", prec::MUL),
        Div => ("/", prec::MUL),
        Mod => ("%", prec::MUL),
        Concat => ("||", prec::CONCAT),
        Coalesce => ("??", prec::COALESCE),
        Like => ("LIKE", prec::COMPARE),
        NotLike => ("NOT LIKE", prec::COMPARE),
        ILike => ("ILIKE", prec::COMPARE),
        NotILike => ("NOT ILIKE", prec::COMPARE),
        Regex => ("=~", prec::COMPARE),
        NotRegex => ("!~", prec::COMPARE),
        IRegex => ("=~*", prec::COMPARE),
        NotIRegex => ("!~*", prec::COMPARE),
    }
}

/// How tightly an expression's printed form binds.
fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Alias { .. } => prec::ALIAS,
        ExprKind::Lambda { .. } => prec::LAMBDA,
        ExprKind::Ternary { .. } => prec::TERNARY,
        ExprKind::Binary { op, .. } => binary_op(*op).1,
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => prec::NOT,
        ExprKind::Unary {
            op: UnaryOp::Neg, ..
        } => prec::NEG,
        ExprKind::IsNull { .. } => prec::IS_NULL,
        ExprKind::Between { .. } => prec::BETWEEN,
        ExprKind::In { .. } => prec::COMPARE,
        ExprKind::Index { .. }
        | ExprKind::TupleElement { .. }
        | ExprKind::ExprCall { .. }
        | ExprKind::NullsAction { .. }
        | ExprKind::WithinGroup { .. } => prec::POSTFIX,
        _ => prec::PRIMARY,
    }
}

fn is_number(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Literal(Literal::Int(_) | Literal::Float(_))
    )
}

struct Printer {
    out: String,
    /// Levels printed so far. Unbounded: the parser bounds what it reads, and the engine's
    /// rewrites of a tree add only a few levels.
    nest: Nesting,
}

impl Default for Printer {
    fn default() -> Self {
        Self {
            out: String::new(),
            nest: Nesting::new(usize::MAX),
        }
    }
}

impl Nested for Printer {
    fn nesting(&mut self) -> &mut Nesting {
        &mut self.nest
    }
}

impl Printer {
    /// Run one level deeper (see [`crate::nesting`]): on a fresh stack every few levels,
    /// so the deepest tree the parser allows prints on any stack.
    fn deeper(&mut self, f: impl FnOnce(&mut Self) + Send) {
        if deeper(self, f).is_err() {
            // The count is unbounded, so only a failure to start a thread gets here.
            panic!("cannot start a thread to print a deeply nested query");
        }
    }

    fn s(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn list<T>(&mut self, items: &[T], mut f: impl FnMut(&mut Self, &T)) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.s(", ");
            }
            f(self, item);
        }
    }

    fn exprs(&mut self, items: &[Expr]) {
        self.list(items, |p, e| p.expr(e, prec::ALIAS));
    }

    // ---- queries ----

    fn query(&mut self, q: &Query) {
        self.deeper(|p| p.query_inner(q));
    }

    fn query_inner(&mut self, q: &Query) {
        match q {
            Query::Select(s) => self.select(s),
            Query::Placeholder(name) => {
                self.s("{");
                self.s(&placeholder(name));
                self.s("}");
            }
            Query::Offset { query, offset } => {
                self.s("(");
                self.query_inner(query);
                self.s(") OFFSET ");
                self.expr(offset, prec::ALIAS);
            }
            Query::SetOp { op, left, right } => {
                let level = |op: SetOp| if op == SetOp::Intersect { 2 } else { 1 };
                let mine = level(*op);
                let needs = |q: &Query, right: bool| match q {
                    Query::SetOp { op, .. } => level(*op) < mine || (right && level(*op) == mine),
                    Query::Select(_) | Query::Placeholder(_) | Query::Offset { .. } => false,
                };
                self.set_operand(left, needs(left, false));
                self.s(match op {
                    SetOp::UnionAll => " UNION ALL ",
                    SetOp::UnionDistinct => " UNION DISTINCT ",
                    SetOp::Intersect => " INTERSECT ",
                    SetOp::Except => " EXCEPT ",
                });
                self.set_operand(right, needs(right, true));
            }
        }
    }

    fn set_operand(&mut self, q: &Query, parens: bool) {
        if parens {
            self.s("(");
            self.query(q);
            self.s(")");
        } else {
            self.query(q);
        }
    }

    fn subquery(&mut self, q: &Query) {
        self.s("(");
        self.query(q);
        self.s(")");
    }

    fn select(&mut self, s: &Select) {
        if !s.with.is_empty() {
            self.s("WITH ");
            self.list(&s.with, |p, cte| match cte {
                Cte::Subquery { name, query, .. } => {
                    p.s(&ident(name));
                    p.s(" AS ");
                    p.subquery(query);
                }
                Cte::Expr { name, expr, .. } => {
                    p.expr(expr, prec::LAMBDA);
                    p.s(" AS ");
                    p.s(&ident(name));
                }
            });
            self.s(" ");
        }
        self.s("SELECT ");
        if s.distinct {
            self.s("DISTINCT ");
        }
        self.exprs(&s.columns);
        if let Some(from) = &s.from {
            self.s(" FROM ");
            self.table(&from.first);
            for j in &from.joins {
                self.join(j);
            }
        }
        if let Some(aj) = &s.array_join {
            self.s(if aj.left {
                " LEFT ARRAY JOIN "
            } else {
                " ARRAY JOIN "
            });
            self.exprs(&aj.exprs);
        }
        for (kw, e) in [(" PREWHERE ", &s.prewhere), (" WHERE ", &s.where_)] {
            if let Some(e) = e {
                self.s(kw);
                self.expr(e, prec::ALIAS);
            }
        }
        if let Some(g) = &s.group_by {
            if !g.exprs.is_empty() {
                self.s(" GROUP BY ");
                self.exprs(&g.exprs);
            }
            match g.modifier {
                GroupByModifier::None => {}
                GroupByModifier::Rollup => self.s(" WITH ROLLUP"),
                GroupByModifier::Cube => self.s(" WITH CUBE"),
            }
            if g.with_totals {
                self.s(" WITH TOTALS");
            }
        }
        if let Some(e) = &s.having {
            self.s(" HAVING ");
            self.expr(e, prec::ALIAS);
        }
        if !s.window.is_empty() {
            self.s(" WINDOW ");
            self.list(&s.window, |p, (name, spec)| {
                p.s(&ident(name));
                p.s(" AS (");
                p.window_spec(spec);
                p.s(")");
            });
        }
        if let Some(e) = &s.qualify {
            self.s(" QUALIFY ");
            self.expr(e, prec::ALIAS);
        }
        if let Some(smp) = &s.sample {
            self.s(" USING SAMPLE ");
            self.expr(&smp.ratio, prec::ALIAS);
            if let Some(o) = &smp.offset {
                self.s(" OFFSET ");
                self.expr(o, prec::ALIAS);
            }
        }
        if !s.order_by.is_empty() {
            self.s(" ORDER BY ");
            self.order_list(&s.order_by);
        }
        if let Some(lb) = &s.limit_by {
            self.s(" LIMIT ");
            self.expr(&lb.limit, prec::ALIAS);
            if let Some(o) = &lb.offset {
                self.s(" OFFSET ");
                self.expr(o, prec::ALIAS);
            }
            self.s(" BY ");
            self.exprs(&lb.by);
        }
        if let Some(l) = &s.limit {
            self.s(" LIMIT ");
            self.expr(l, prec::ALIAS);
            if s.limit_percent {
                self.s(" %");
            }
            if s.with_ties {
                self.s(" WITH TIES");
            }
        }
        if let Some(o) = &s.offset {
            self.s(" OFFSET ");
            self.expr(o, prec::ALIAS);
        }
    }

    fn table(&mut self, t: &TableExpr) {
        match &t.source {
            TableSource::Table(parts) => self.dotted(parts),
            TableSource::Subquery(q) => self.subquery(q),
            TableSource::Function { name, args } => {
                self.s(&ident(name));
                self.s("(");
                self.exprs(args);
                self.s(")");
            }
            TableSource::Placeholder(name) => {
                self.s("{");
                self.s(&placeholder(name));
                self.s("}");
            }
            TableSource::Tag(tag) => self.tag(tag),
            TableSource::Joined(from) => {
                self.s("(");
                self.table(&from.first);
                for j in &from.joins {
                    self.join(j);
                }
                self.s(")");
            }
            TableSource::Pivot { base, pivot } => {
                self.table(base);
                self.s(if pivot.unpivot {
                    " UNPIVOT ("
                } else {
                    " PIVOT ("
                });
                self.exprs(&pivot.values);
                self.s(" FOR ");
                self.expr(&pivot.column, prec::COMPARE + 1);
                self.s(" IN (");
                self.exprs(&pivot.list);
                self.s("))");
            }
        }
        if let Some(a) = &t.alias {
            self.s(" AS ");
            self.s(&ident(a));
        }
        if t.is_final {
            self.s(" FINAL");
        }
        if let Some(sample) = &t.sample {
            self.s(" SAMPLE ");
            self.expr(&sample.ratio, prec::TERNARY);
            if let Some(o) = &sample.offset {
                self.s(" OFFSET ");
                self.expr(o, prec::TERNARY);
            }
        }
    }

    fn join(&mut self, j: &Join) {
        self.s(" ");
        if j.global {
            self.s("GLOBAL ");
        }
        if let Some(st) = j.strictness {
            self.s(match st {
                JoinStrictness::Any => "ANY ",
                JoinStrictness::All => "ALL ",
                JoinStrictness::Semi => "SEMI ",
                JoinStrictness::Anti => "ANTI ",
                JoinStrictness::Asof => "ASOF ",
            });
        }
        self.s(match j.kind {
            JoinKind::Inner => "INNER JOIN ",
            JoinKind::Left => "LEFT JOIN ",
            JoinKind::Right => "RIGHT JOIN ",
            JoinKind::Full => "FULL JOIN ",
            JoinKind::Cross => "CROSS JOIN ",
        });
        self.table(&j.table);
        match &j.constraint {
            None => {}
            Some(JoinConstraint::On(e)) => {
                self.s(" ON ");
                self.expr(e, prec::ALIAS);
            }
            Some(JoinConstraint::UsingExprs(exprs)) => {
                self.s(" USING (");
                self.exprs(exprs);
                self.s(")");
            }
            Some(JoinConstraint::Using(names)) => {
                self.s(" USING (");
                self.list(names, |p, n| p.s(&ident(n)));
                self.s(")");
            }
        }
    }

    fn order_list(&mut self, items: &[OrderExpr]) {
        self.list(items, |p, o| {
            p.expr(&o.expr, prec::ALIAS);
            if o.desc {
                p.s(" DESC");
            }
            match o.nulls_first {
                Some(true) => p.s(" NULLS FIRST"),
                Some(false) => p.s(" NULLS LAST"),
                None => {}
            }
        });
    }

    fn window_spec(&mut self, w: &WindowSpec) {
        let mut sep = "";
        if let Some(base) = &w.base {
            if WINDOW_WORDS.iter().any(|k| k.eq_ignore_ascii_case(base)) {
                self.s(&quote(base));
            } else {
                self.s(&ident(base));
            }
            sep = " ";
        }
        if !w.partition_by.is_empty() {
            self.s(sep);
            self.s("PARTITION BY ");
            self.exprs(&w.partition_by);
            sep = " ";
        }
        if !w.order_by.is_empty() {
            self.s(sep);
            self.s("ORDER BY ");
            self.order_list(&w.order_by);
            sep = " ";
        }
        if let Some(f) = &w.frame {
            self.s(sep);
            self.s(match f.units {
                FrameUnits::Rows => "ROWS ",
                FrameUnits::Range => "RANGE ",
            });
            match &f.end {
                Some(end) => {
                    self.s("BETWEEN ");
                    self.bound(&f.start);
                    self.s(" AND ");
                    self.bound(end);
                }
                None => self.bound(&f.start),
            }
        }
    }

    fn bound(&mut self, b: &FrameBound) {
        let (e, word) = match b {
            FrameBound::UnboundedPreceding => return self.s("UNBOUNDED PRECEDING"),
            FrameBound::UnboundedFollowing => return self.s("UNBOUNDED FOLLOWING"),
            FrameBound::CurrentRow => return self.s("CURRENT ROW"),
            FrameBound::Preceding(e) => (e, " PRECEDING"),
            FrameBound::Following(e) => (e, " FOLLOWING"),
        };
        // A column named like the bound words must not read as them.
        let clash = matches!(&e.kind, ExprKind::Field(parts)
            if parts[0].eq_ignore_ascii_case("UNBOUNDED") || parts[0].eq_ignore_ascii_case("CURRENT"));
        if clash {
            self.s("(");
            self.expr(e, prec::ALIAS);
            self.s(")");
        } else {
            self.expr(e, prec::TERNARY);
        }
        self.s(word);
    }

    fn dotted(&mut self, parts: &[String]) {
        for (i, name) in parts.iter().enumerate() {
            if i == 0 {
                self.s(&ident(name));
            } else {
                self.s(".");
                self.s(&part(name));
            }
        }
    }

    // ---- expressions ----

    /// Print `e`, in parentheses when it binds less tightly than `min`.
    fn expr(&mut self, e: &Expr, min: u8) {
        self.deeper(|p| {
            if precedence(e) < min {
                p.s("(");
                p.bare(e);
                p.s(")");
            } else {
                p.bare(e);
            }
        });
    }

    fn bare(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Literal(l) => self.literal(l),
            ExprKind::Field(parts) => self.dotted(parts),
            ExprKind::Star(None) => self.s("*"),
            ExprKind::Star(Some(parts)) => {
                self.dotted(parts);
                self.s(".*");
            }
            ExprKind::Index {
                base,
                index,
                null_safe,
            } => {
                self.postfix_base(base);
                self.s(if *null_safe { "?.[" } else { "[" });
                self.expr(index, prec::ALIAS);
                self.s("]");
            }
            ExprKind::TupleElement {
                base,
                index,
                null_safe,
            } => {
                self.postfix_base(base);
                self.s(if *null_safe { "?." } else { "." });
                self.s(&index.to_string());
            }
            ExprKind::Call {
                name,
                params,
                args,
                distinct,
                over,
            } => {
                self.s(&call_name(name));
                if let Some(params) = params {
                    self.s("(");
                    self.exprs(params);
                    self.s(")");
                }
                self.s("(");
                if *distinct {
                    self.s("DISTINCT ");
                }
                self.exprs(args);
                self.s(")");
                match over {
                    None => {}
                    Some(Over::Named(n)) => {
                        self.s(" OVER ");
                        self.s(&ident(n));
                    }
                    Some(Over::Spec(spec)) => {
                        self.s(" OVER (");
                        self.window_spec(spec);
                        self.s(")");
                    }
                }
            }
            ExprKind::Lambda { params, body } => {
                if params.len() == 1 {
                    self.s(&ident(&params[0]));
                } else {
                    self.s("(");
                    self.list(params, |p, n| p.s(&ident(n)));
                    self.s(")");
                }
                self.s(" -> ");
                self.expr(body, prec::LAMBDA);
            }
            ExprKind::Binary { op, left, right } => {
                let (text, p) = binary_op(*op);
                self.expr(left, p);
                self.s(" ");
                self.s(text);
                self.s(" ");
                self.expr(right, p + 1);
            }
            ExprKind::Unary {
                op: UnaryOp::Not,
                expr,
            } => {
                self.s("NOT ");
                self.expr(expr, prec::NOT);
            }
            ExprKind::Unary {
                op: UnaryOp::Neg,
                expr,
            } => {
                self.s("-");
                // `-(1)` must not read back as the literal -1, nor `--` as a comment.
                if is_number(expr)
                    || matches!(
                        expr.kind,
                        ExprKind::Unary {
                            op: UnaryOp::Neg,
                            ..
                        }
                    )
                {
                    self.s("(");
                    self.bare(expr);
                    self.s(")");
                } else {
                    self.expr(expr, prec::NEG);
                }
            }
            ExprKind::Between {
                expr,
                low,
                high,
                negated,
            } => {
                self.expr(expr, prec::BETWEEN);
                self.s(if *negated {
                    " NOT BETWEEN "
                } else {
                    " BETWEEN "
                });
                self.expr(low, prec::BETWEEN + 1);
                self.s(" AND ");
                self.expr(high, prec::BETWEEN + 1);
            }
            ExprKind::In {
                expr,
                list,
                negated,
            } => {
                self.expr(expr, prec::COMPARE);
                self.s(if *negated { " NOT IN " } else { " IN " });
                match list {
                    InList::List(items) => {
                        self.s("(");
                        self.exprs(items);
                        self.s(")");
                    }
                    InList::Subquery(q) => self.subquery(q),
                    InList::Cohort(e) => {
                        self.s("COHORT ");
                        self.expr(e, prec::COMPARE + 1);
                    }
                    InList::Expr(e) => match &e.kind {
                        // `(…)` right after IN reads as a list: spell tuples as tuple(…).
                        ExprKind::Tuple(items) => {
                            self.s("tuple(");
                            self.exprs(items);
                            self.s(")");
                        }
                        // Text that opens with `(` right after IN reads back as a list, and
                        // what follows the list (`(a).1`) would apply to the whole IN (found
                        // by fuzzing): such an operand goes in parentheses of its own, unless
                        // one pair already encloses all of it (`(NOT y)`, a list of one).
                        _ => {
                            let start = self.out.len();
                            self.expr(e, prec::COMPARE + 1);
                            if self.out[start..].starts_with('(') && !one_group(&self.out[start..])
                            {
                                self.out.insert(start, '(');
                                self.s(")");
                            }
                        }
                    },
                }
            }
            ExprKind::IsNull { expr, negated } => {
                self.expr(expr, prec::IS_NULL);
                self.s(if *negated { " IS NOT NULL" } else { " IS NULL" });
            }
            ExprKind::Case {
                operand,
                whens,
                else_,
            } => {
                self.s("CASE");
                if let Some(o) = operand {
                    self.s(" ");
                    self.expr(o, prec::ALIAS);
                }
                for (w, t) in whens {
                    self.s(" WHEN ");
                    self.expr(w, prec::ALIAS);
                    self.s(" THEN ");
                    self.expr(t, prec::ALIAS);
                }
                if let Some(e) = else_ {
                    self.s(" ELSE ");
                    self.expr(e, prec::ALIAS);
                }
                self.s(" END");
            }
            ExprKind::Cast { expr, ty } => {
                self.s("CAST(");
                self.expr(expr, prec::LAMBDA);
                self.s(" AS ");
                self.s(ty);
                self.s(")");
            }
            ExprKind::Interval { value, unit } => {
                self.s("INTERVAL ");
                let simple = matches!(
                    value.kind,
                    ExprKind::Literal(_)
                        | ExprKind::Field(_)
                        | ExprKind::Call { .. }
                        | ExprKind::Placeholder(_)
                );
                if simple {
                    self.bare(value);
                } else {
                    self.s("(");
                    self.bare(value);
                    self.s(")");
                }
                self.s(match unit {
                    IntervalUnit::Second => " SECOND",
                    IntervalUnit::Minute => " MINUTE",
                    IntervalUnit::Hour => " HOUR",
                    IntervalUnit::Day => " DAY",
                    IntervalUnit::Week => " WEEK",
                    IntervalUnit::Month => " MONTH",
                    IntervalUnit::Quarter => " QUARTER",
                    IntervalUnit::Year => " YEAR",
                });
            }
            ExprKind::Ternary { cond, then, else_ } => {
                self.expr(cond, prec::TERNARY + 1);
                self.s(" ? ");
                self.expr(then, prec::TERNARY);
                self.s(" : ");
                self.expr(else_, prec::TERNARY);
            }
            ExprKind::Array(items) => {
                self.s("[");
                self.exprs(items);
                self.s("]");
            }
            ExprKind::Tuple(items) => {
                if items.len() < 2 {
                    self.s("tuple(");
                    self.exprs(items);
                    self.s(")");
                } else {
                    self.s("(");
                    self.exprs(items);
                    self.s(")");
                }
            }
            ExprKind::Alias { expr, name } => {
                self.expr(expr, prec::LAMBDA);
                self.s(" AS ");
                self.s(&ident(name));
            }
            ExprKind::Placeholder(name) => {
                self.s("{");
                self.s(&placeholder(name));
                self.s("}");
            }
            ExprKind::Subquery(q) => self.subquery(q),
            ExprKind::Exists(q) => {
                self.s("EXISTS ");
                self.subquery(q);
            }
            ExprKind::Columns(c) => {
                self.s("COLUMNS(");
                match &c.source {
                    ColumnsSource::Star(None) => self.s("*"),
                    ColumnsSource::Star(Some(parts)) => {
                        self.dotted(parts);
                        self.s(".*");
                    }
                    ColumnsSource::Regex(re) => self.s(&string(re)),
                    ColumnsSource::List(list) => self.exprs(list),
                }
                if !c.exclude.is_empty() {
                    self.s(" EXCLUDE (");
                    for (i, n) in c.exclude.iter().enumerate() {
                        if i > 0 {
                            self.s(", ");
                        }
                        self.s(&ident(n));
                    }
                    self.s(")");
                }
                if !c.replace.is_empty() {
                    self.s(" REPLACE (");
                    for (i, (e, n)) in c.replace.iter().enumerate() {
                        if i > 0 {
                            self.s(", ");
                        }
                        self.expr(e, prec::LAMBDA);
                        self.s(" AS ");
                        self.s(&ident(n));
                    }
                    self.s(")");
                }
                self.s(")");
            }
            ExprKind::PositionalRef(n) => self.s(&format!("#{n}")),
            ExprKind::Block(text) => {
                self.s("{ ");
                self.s(text);
                self.s(" }");
            }
            ExprKind::Tag(tag) => self.tag(tag),
            ExprKind::PlaceholderExpr(inner) => {
                self.s("{");
                self.expr(inner, prec::ALIAS);
                self.s("}");
            }
            ExprKind::Spread(cols) => {
                self.s("*");
                match &cols.kind {
                    // A plain call of that name (`*COLUMNS()`): bare, as the spread reads it
                    // (a call printed as `columns` quoted would not; found by fuzzing).
                    ExprKind::Call {
                        name,
                        params: None,
                        args,
                        distinct: false,
                        over: None,
                    } if name.eq_ignore_ascii_case("COLUMNS") => {
                        self.s("COLUMNS(");
                        self.exprs(args);
                        self.s(")");
                    }
                    _ => self.expr(cols, prec::POSTFIX),
                }
            }
            ExprKind::WithinGroup { call, order_by } => {
                self.postfix_base(call);
                self.s(" WITHIN GROUP (ORDER BY ");
                self.order_list(order_by);
                self.s(")");
            }
            ExprKind::NullsAction { expr, respect } => {
                self.postfix_base(expr);
                self.s(if *respect {
                    " RESPECT NULLS"
                } else {
                    " IGNORE NULLS"
                });
            }
            ExprKind::ExprCall { callee, args } => {
                // A name or a call before `(` would read back as a (parametric) call.
                let wrap = match &callee.kind {
                    ExprKind::Field(parts) => parts.len() == 1,
                    ExprKind::Call { .. } | ExprKind::Tuple(_) => true,
                    _ => false,
                };
                if wrap {
                    self.s("(");
                    self.bare(callee);
                    self.s(")");
                } else {
                    self.postfix_base(callee);
                }
                self.s("(");
                self.exprs(args);
                self.s(")");
            }
        }
    }

    /// A HogQLX tag, its names as identifiers (a quoted one stays quoted: found by fuzzing,
    /// ``<`a b` />``).
    fn tag(&mut self, t: &Tag) {
        self.s("<");
        self.s(&part(&t.name));
        for (name, value) in &t.attrs {
            self.s(" ");
            self.s(&part(name));
            match value {
                TagValue::String(v) => {
                    self.s("=");
                    self.s(&string(v));
                }
                TagValue::Expr(e) => {
                    self.s("={");
                    self.expr(e, prec::ALIAS);
                    self.s("}");
                }
                TagValue::Flag => {}
            }
        }
        if t.children.is_empty() {
            self.s(" />");
            return;
        }
        self.s(">");
        for c in &t.children {
            match c {
                TagChild::Text(text) => self.s(text),
                TagChild::Expr(e) => {
                    self.s("{");
                    self.expr(e, prec::ALIAS);
                    self.s("}");
                }
                TagChild::Tag(inner) => self.tag(inner),
            }
        }
        self.s("</");
        self.s(&part(&t.name));
        self.s(">");
    }

    /// The base of `x[i]` / `x.1`: a number literal needs parentheses (`(1).1`, `(-1)[1]`).
    fn postfix_base(&mut self, base: &Expr) {
        // A star too: `*.10` would read back as `*` and the number `.10` (found by fuzzing).
        if is_number(base) || matches!(base.kind, ExprKind::Star(_)) {
            self.s("(");
            self.bare(base);
            self.s(")");
        } else {
            self.expr(base, prec::POSTFIX);
        }
    }

    fn literal(&mut self, l: &Literal) {
        match l {
            Literal::Null => self.s("NULL"),
            Literal::Bool(true) => self.s("TRUE"),
            Literal::Bool(false) => self.s("FALSE"),
            Literal::Int(i) => self.s(&i.to_string()),
            Literal::Float(f) => self.s(&float(*f)),
            Literal::String(s) => self.s(&string(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{parse_expr, parse_query};

    /// Queries that must survive parse → print → parse unchanged.
    const CORPUS: &[&str] = &[
        // Basics and every clause.
        "SELECT 1",
        "select event, count() from events group by event",
        "SELECT DISTINCT distinct_id FROM events WHERE event = '$pageview' LIMIT 100",
        "SELECT *, e.* FROM events AS e",
        "SELECT count() c, count() AS d FROM events",
        "SELECT count(*), count(DISTINCT person_id), uniqExact(distinct_id) FROM events",
        "SELECT quantile(0.9)(properties.$session_duration), quantiles(0.5, 0.9)(x) FROM events",
        "SELECT properties.$browser, properties['$os'], person.properties.email, properties.a.b FROM events",
        "SELECT `$session_id`, $window_id, \"my col\", `a``b` FROM events",
        "SELECT (1 + 2 AS x) * x, -1, - 1, -x, -(1), - -1, a.1, t.1.2, (1, 2).1, (1).1",
        "SELECT (1), (1,), (1, 'a'), tuple(1, 'a'), tuple(), (), [1, 2], [], [[1], [2, 3]]",
        "SELECT 1.5, .5, 1e3, 1.5e-3, 0x1F, 0b101, inf, -inf, 18446744073709551616, -9223372036854775808",
        "SELECT NULL, TRUE, false, 'it''s', 'a\\'b', '\\n\\t\\\\', '\\x41', '€'",
        "SELECT x -> x + 1, (x, y) -> x * y, () -> 1, arrayMap(x -> x * 2, [1, 2])",
        "SELECT a ? b : c, a ? b : c ? d : e, (a ? b : c) ? d : e, a OR b ? c : d",
        "SELECT a ?? b, a ?? b = c, (a ?? b) = c, NOT a ?? b",
        "SELECT NOT a IN b, (NOT a) IN b, NOT a = b AND c, NOT (a AND b)",
        "SELECT a BETWEEN 1 AND 2, a NOT BETWEEN 1 AND 2 = 1, (a BETWEEN 1 AND 2) = 1",
        "SELECT a BETWEEN b AND c BETWEEN d AND e, a BETWEEN (b BETWEEN c AND d) AND e",
        "SELECT 1 = 1 IS NULL, 1 IS NULL = 0, a IS NOT NULL, (a = b) IS NULL, a = (b IS NULL)",
        "SELECT x IN (1, 2), x NOT IN (SELECT 1), x GLOBAL IN (1), x IN tuple(1, 2), x IN ((1, 2)), x IN arr, x IN ()",
        "SELECT x IN (SELECT 1 UNION ALL SELECT 2), x IN ((SELECT 1) UNION ALL (SELECT 2))",
        "SELECT a LIKE 'x%', a NOT LIKE 'x', a ILIKE 'y', a NOT ILIKE 'z', a =~ 'r', a !~ 'r', a =~* 'r', a !~* 'r', a ~ 'r'",
        "SELECT a = b, a == b, a != b, a <> b, a < b, a <= b, a > b, a >= b, a || b || c, a % b, a MOD b",
        "SELECT 1 - 2 - 3, 1 - (2 - 3), 2 * (3 + 4), (2 * 3) + 4, a / b / c, a / (b / c), -a.1, (-a).1",
        "SELECT CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END, CASE x WHEN 1 THEN 'a' END",
        "SELECT CAST(x AS Nullable(String)), x::DateTime64(6, 'UTC'), x::Array(Int64), CAST(x, 'Float64')",
        "SELECT CAST(x AS Tuple(a String, b Nullable(Int64))), CAST(x AS Enum8('a' = 1, 'b' = -2)), -1::Int8",
        "SELECT INTERVAL 1 DAY, INTERVAL 2 WEEKS, INTERVAL '1 day', INTERVAL '2' DAY, INTERVAL 1 + 1 HOUR, INTERVAL x MONTH",
        "SELECT now() - INTERVAL 7 DAY, toStartOfInterval(timestamp, INTERVAL 15 minute)",
        "SELECT EXISTS (SELECT 1), exists(x), (SELECT max(timestamp) FROM events), ((SELECT 1) + 1)",
        "SELECT {placeholder}, f({x}) FROM {tbl} WHERE {filter}",
        "SELECT left(s, 2), right(s, 1), any(x), if(a, b, c), not(x), `tuple`(1)(2)",
        "SELECT x AS `from`, y AS `select`, z AS `1x`, w AS \"a b\"",
        "SELECT 1 AS x, x + 1 AS y ORDER BY y",
        "SELECT a FROM t WHERE a AS b",
        "SELECT f(a AS b), [c AS d], (e AS f), (a AS b) AS c",
        "SELECT a, b, FROM t",
        "(SELECT 1)",
        "((SELECT 1))",
        "SELECT 1;",
        // FROM, joins, array join.
        "SELECT 1 FROM events FINAL",
        "SELECT 1 FROM events AS e FINAL SAMPLE 0.1 OFFSET 0.5",
        "SELECT 1 FROM events SAMPLE 1 / 10",
        "SELECT 1 FROM db.events e",
        "SELECT 1 FROM numbers(10) AS n",
        "SELECT 1 FROM (SELECT 1) AS s",
        "SELECT 1 FROM ((SELECT 1) UNION ALL (SELECT 2)) s",
        "SELECT 1 FROM a, b, c",
        "SELECT 1 FROM a JOIN b ON a.x = b.x INNER JOIN c USING (x, y) LEFT OUTER JOIN d USING x",
        "SELECT 1 FROM a RIGHT JOIN e ON 1 FULL OUTER JOIN f ON 1 CROSS JOIN g",
        "SELECT 1 FROM a GLOBAL ANY LEFT JOIN h ON 1 LEFT SEMI JOIN i ON 1 ANTI RIGHT JOIN j ON 1",
        "SELECT 1 FROM a ASOF JOIN k ON a.t >= k.t ALL INNER JOIN (SELECT 1) AS l ON 1",
        "SELECT x FROM t ARRAY JOIN arr AS x",
        "SELECT x, y FROM t LEFT ARRAY JOIN arr AS x, [1, 2] AS y",
        "SELECT x FROM t INNER ARRAY JOIN arr AS x",
        // Grouping, windows, ordering, limits.
        "SELECT a FROM t PREWHERE a WHERE b",
        "SELECT a, count() FROM t GROUP BY a WITH TOTALS HAVING count() > 1",
        "SELECT a, b FROM t GROUP BY ROLLUP(a, b)",
        "SELECT a, b FROM t GROUP BY CUBE(a, b) WITH TOTALS",
        "SELECT a, b FROM t GROUP BY a, b WITH ROLLUP",
        "SELECT sum(x) OVER w, avg(x) OVER (w ORDER BY t) FROM t WINDOW w AS (PARTITION BY a)",
        "SELECT row_number() OVER (PARTITION BY a, b ORDER BY t DESC NULLS LAST) FROM t",
        "SELECT sum(x) OVER (ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM t",
        "SELECT sum(x) OVER (ORDER BY t RANGE BETWEEN 3 PRECEDING AND 2 FOLLOWING) FROM t",
        "SELECT sum(x) OVER (ROWS UNBOUNDED FOLLOWING), sum(x) OVER (ROWS 1 PRECEDING) FROM t",
        "SELECT sum(x) OVER (ROWS BETWEEN `current` PRECEDING AND CURRENT ROW) FROM t",
        "SELECT sum(x) OVER (`rows` ORDER BY t) FROM t WINDOW `rows` AS (), w2 AS (w ORDER BY t)",
        "SELECT a, row_number() OVER (PARTITION BY a ORDER BY b) AS r FROM t QUALIFY r = 1",
        "SELECT a FROM t ORDER BY a ASC NULLS FIRST, b DESC, c",
        "SELECT a FROM t LIMIT 10",
        "SELECT a FROM t LIMIT 10 OFFSET 5",
        "SELECT a FROM t LIMIT 5, 10",
        "SELECT a FROM t OFFSET 5",
        "SELECT a FROM t ORDER BY a LIMIT 10 WITH TIES",
        "SELECT a FROM t LIMIT 10 BY a, b",
        "SELECT a FROM t LIMIT 2, 10 BY a LIMIT 100",
        "SELECT a FROM t LIMIT 1 OFFSET 2 BY a LIMIT 5 OFFSET 3",
        "SELECT a FROM t LIMIT 1 BY a OFFSET 3",
        // Set operations and CTEs.
        "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3",
        "SELECT 1 UNION SELECT 2 UNION DISTINCT SELECT 3",
        "SELECT 1 UNION ALL SELECT 2 INTERSECT SELECT 3 EXCEPT SELECT 4",
        "(SELECT 1) UNION ALL (SELECT 2 UNION ALL SELECT 3)",
        "(SELECT 1 UNION ALL SELECT 2) INTERSECT (SELECT 3 EXCEPT SELECT 4)",
        "(SELECT a FROM t ORDER BY a LIMIT 1) UNION ALL (SELECT b FROM u)",
        "WITH a AS (SELECT 1), 1 + 2 AS b, (SELECT 3) AS c SELECT a, b, c",
        "WITH x AS (SELECT 1 UNION ALL SELECT 2), y AS (SELECT * FROM x) SELECT * FROM y",
        "WITH [1, 2] AS arr, x -> x + 1 AS f SELECT arrayMap(f, arr)",
        // PostHog product-analytics shapes.
        "SELECT toStartOfDay(timestamp) AS day, count() AS total FROM events \
         WHERE event = '$pageview' AND timestamp >= toStartOfDay(now() - INTERVAL 7 DAY) \
         GROUP BY day ORDER BY day",
        "SELECT arrayJoin(arrayMap(n -> toStartOfDay(now()) - toIntervalDay(n), range(0, 7))) AS day_start, \
         sum(count) FROM (SELECT count() AS count, toStartOfDay(timestamp) AS day_start FROM events GROUP BY day_start) \
         GROUP BY day_start ORDER BY day_start",
        "SELECT properties.$browser AS breakdown_value, count() FROM events \
         WHERE event = '$pageview' AND properties.$browser IS NOT NULL \
         GROUP BY breakdown_value ORDER BY count() DESC LIMIT 25",
        "SELECT countIf(steps = 1) AS step_1, countIf(steps = 2) AS step_2 FROM (\
         SELECT person_id, windowFunnel(1209600)(toDateTime(timestamp), event = 'signup', event = 'purchase') AS steps \
         FROM events WHERE event IN ('signup', 'purchase') GROUP BY person_id)",
        "SELECT person_id, arraySort(x -> x.1, groupArray((timestamp, event))) AS events_ordered \
         FROM events GROUP BY person_id HAVING length(events_ordered) > 1",
        "SELECT dateDiff('week', first_seen, timestamp) AS week, uniq(person_id) FROM events \
         INNER JOIN (SELECT person_id, min(timestamp) AS first_seen FROM events GROUP BY person_id) AS f \
         ON events.person_id = f.person_id GROUP BY week ORDER BY week",
        "SELECT start_of_period, countIf(status = 'new') AS new, countIf(status = 'returning') AS returning, \
         -countIf(status = 'dormant') AS dormant FROM (SELECT person_id, toStartOfWeek(timestamp) AS start_of_period, \
         if(start_of_period = toStartOfWeek(person.created_at), 'new', 'returning') AS status FROM events) \
         GROUP BY start_of_period ORDER BY start_of_period",
        "SELECT path, count() FROM (SELECT $session_id, groupArray(properties.$current_url) AS path FROM \
         (SELECT * FROM events WHERE event = '$pageview' ORDER BY timestamp) GROUP BY $session_id) \
         GROUP BY path ORDER BY count() DESC LIMIT 50",
        "SELECT e.event, p.properties.email FROM events e LEFT JOIN persons p ON e.person_id = p.id \
         WHERE p.properties.email ILIKE '%@posthog.com' AND e.timestamp > '2024-01-01'",
        "SELECT session.$session_duration, session.$is_bounce, count() FROM events \
         WHERE $session_id IS NOT NULL GROUP BY 1, 2",
        "SELECT multiIf(x < 10, 'small', x < 100, 'medium', 'large') AS bucket, count() FROM t GROUP BY bucket",
        "SELECT replaceRegexpAll(properties.$current_url, '\\\\?.*$', '') AS url FROM events LIMIT 10",
        "SELECT toStartOfHour(timestamp), countIf(event = '$pageview') / count() * 100 AS pct FROM events GROUP BY 1",
        "SELECT JSONExtractString(properties, 'plan') AS plan, sumIf(toFloat(properties.amount), event = 'paid') FROM events GROUP BY plan",
        "SELECT $group_0, group_0.properties.name, count() FROM events WHERE $group_0 != '' GROUP BY 1, 2",
        "SELECT distinct_id FROM events WHERE person_id IN (SELECT id FROM persons WHERE properties.plan = 'pro')",
        "SELECT lagInFrame(timestamp) OVER (PARTITION BY person_id ORDER BY timestamp ASC \
         ROWS BETWEEN 1 PRECEDING AND 1 PRECEDING) AS prev FROM events",
        "SELECT event, properties.$browser ?? 'unknown', coalesce(properties.$os, 'none') FROM events",
    ];

    fn roundtrip(text: &str) -> String {
        let q = parse_query(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        let printed = query(&q);
        let again = parse_query(&printed).unwrap_or_else(|e| panic!("{text}\n=> {printed}\n{e}"));
        assert_eq!(again, q, "{text}\n=> {printed}");
        assert_eq!(query(&again), printed, "printing is not stable for {text}");
        printed
    }

    #[test]
    fn corpus_round_trips() {
        assert!(CORPUS.len() >= 80, "{}", CORPUS.len());
        for text in CORPUS {
            roundtrip(text);
        }
    }

    #[test]
    fn normalized_text() {
        let cases = [
            (
                "select count() c from events e where x=1 group by y order by c desc limit 10",
                "SELECT count() AS c FROM events AS e WHERE x = 1 GROUP BY y ORDER BY c DESC LIMIT 10",
            ),
            (
                "SELECT (1, 2), (1,), tuple(), (1)",
                "SELECT (1, 2), tuple(1), tuple(), 1",
            ),
            (
                "SELECT a == b, a <> b, a MOD b",
                "SELECT a = b, a != b, a % b",
            ),
            (
                "SELECT x::Nullable( String )",
                "SELECT CAST(x AS Nullable(String))",
            ),
            (
                "SELECT INTERVAL '3 days', interval 1 + 1 hour",
                "SELECT INTERVAL 3 DAY, INTERVAL (1 + 1) HOUR",
            ),
            ("SELECT -(1), - -1, -x", "SELECT -(1), -(-1), -x"),
            (
                "SELECT 1.0, 1e300, 1e-7, 0.1",
                "SELECT 1.0, 1e300, 1e-7, 0.1",
            ),
            ("SELECT 'a\\nb''c'", "SELECT 'a\\nb\\'c'"),
            (
                "SELECT `from`, \"$x\", `my col`, `a.b`",
                "SELECT `from`, $x, `my col`, `a.b`",
            ),
            ("SELECT 1 FROM a, b", "SELECT 1 FROM a CROSS JOIN b"),
            (
                "SELECT 1 FROM a LEFT OUTER JOIN b USING x",
                "SELECT 1 FROM a LEFT JOIN b USING (x)",
            ),
            (
                "SELECT a FROM t LIMIT 5, 10",
                "SELECT a FROM t LIMIT 10 OFFSET 5",
            ),
            (
                "SELECT a FROM t GROUP BY ROLLUP(a)",
                "SELECT a FROM t GROUP BY a WITH ROLLUP",
            ),
            (
                "SELECT 1 UNION SELECT 2",
                "SELECT 1 UNION DISTINCT SELECT 2",
            ),
            ("((SELECT 1))", "SELECT 1"),
            ("SELECT (1 + 2 AS x) * x", "SELECT (1 + 2 AS x) * x"),
            (
                "SELECT 1 FROM events WHERE person_id in cohort 5 AND person_id NOT IN COHORT 'a b'",
                "SELECT 1 FROM events WHERE person_id IN COHORT 5 AND person_id NOT IN COHORT 'a b'",
            ),
            (
                "SELECT {variables.n} FROM t WHERE { filters }",
                "SELECT {variables.n} FROM t WHERE {filters}",
            ),
            ("SELECT {`a b`.c}", "SELECT {`a b.c`}"),
            ("SELECT a ? b : c", "SELECT a ? b : c"),
            ("SELECT f(x).name, (1).1", "SELECT f(x)['name'], (1).1"),
            (
                "SELECT NOT (a AND b), NOT a AND b",
                "SELECT NOT (a AND b), NOT a AND b",
            ),
            (
                "SELECT (a + b) * c, a + b * c",
                "SELECT (a + b) * c, a + b * c",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(roundtrip(text), want, "{text}");
        }
    }

    #[test]
    fn hand_built_trees_print_and_reparse() {
        // Trees the parser never builds this way still print as text that reads back the same.
        let sp = Span::default();
        let lit = |i: i128| Expr::new(ExprKind::Literal(Literal::Int(i)), sp);
        let field = |s: &str| Expr::new(ExprKind::Field(vec![s.into()]), sp);
        let b = |e: ExprKind| Box::new(Expr::new(e, sp));
        let trees = [
            ExprKind::Unary {
                op: UnaryOp::Neg,
                expr: b(ExprKind::Literal(Literal::Float(f64::INFINITY))),
            },
            ExprKind::TupleElement {
                base: Box::new(lit(-3)),
                index: 2,
                null_safe: false,
            },
            ExprKind::TupleElement {
                base: Box::new(lit(-3)),
                index: 2,
                null_safe: true,
            },
            ExprKind::Index {
                base: Box::new(lit(1)),
                index: Box::new(lit(1)),
                null_safe: false,
            },
            ExprKind::Index {
                base: Box::new(field("a")),
                index: Box::new(lit(1)),
                null_safe: true,
            },
            ExprKind::Call {
                name: "CAST".into(),
                params: None,
                args: vec![field("x")],
                distinct: false,
                over: None,
            },
            ExprKind::Call {
                name: "tuple".into(),
                params: None,
                args: vec![lit(1)],
                distinct: true,
                over: None,
            },
            ExprKind::Field(vec!["select".into(), "from".into()]),
            ExprKind::Field(vec!["interval".into()]),
            ExprKind::Binary {
                op: BinaryOp::Add,
                left: b(ExprKind::Lambda {
                    params: vec!["x".into()],
                    body: Box::new(field("x")),
                }),
                right: Box::new(lit(1)),
            },
            ExprKind::Interval {
                value: b(ExprKind::Binary {
                    op: BinaryOp::Concat,
                    left: b(ExprKind::Literal(Literal::String("1".into()))),
                    right: b(ExprKind::Literal(Literal::String("2".into()))),
                }),
                unit: IntervalUnit::Day,
            },
            ExprKind::Literal(Literal::String("\u{1}\u{7f}\r\0`'\\".into())),
            ExprKind::Columns(Box::new(Columns {
                source: ColumnsSource::Star(Some(vec!["t".into(), "from".into()])),
                exclude: vec!["a".into(), "where".into()],
                replace: vec![(field("x"), "as".into()), (lit(1), "y".into())],
            })),
            ExprKind::Columns(Box::new(Columns {
                source: ColumnsSource::Regex("^a.*'".into()),
                exclude: vec![],
                replace: vec![],
            })),
            ExprKind::Columns(Box::new(Columns {
                source: ColumnsSource::List(vec![field("a"), lit(2)]),
                exclude: vec![],
                replace: vec![],
            })),
            ExprKind::Columns(Box::new(Columns {
                source: ColumnsSource::Star(None),
                exclude: vec![],
                replace: vec![],
            })),
            ExprKind::ExprCall {
                callee: b(ExprKind::Field(vec!["f".into()])),
                args: vec![lit(1)],
            },
            ExprKind::ExprCall {
                callee: b(ExprKind::Call {
                    name: "f".into(),
                    params: None,
                    args: vec![],
                    distinct: false,
                    over: None,
                }),
                args: vec![],
            },
            ExprKind::Alias {
                expr: Box::new(field("x")),
                name: "a`b".into(),
            },
        ];
        for kind in trees {
            let e = Expr::new(kind, sp);
            let text = expr(&e);
            let back = parse_expr(&text).unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(back, e, "{text}");
        }
    }
}
