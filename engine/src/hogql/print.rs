//! Print a syntax tree back as normalized HogQL: keywords upper-case, names quoted with
//! backticks only when they must be, the fewest parentheses the parser needs. Pure (std only).
//!
//! `parse(print(tree)) == tree` holds for every tree the parser produces.

use crate::hogql::ast::*;
use crate::hogql::lexer::is_plain_identifier;
use crate::hogql::parser::{WINDOW_WORDS, is_reserved, prec};

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

/// A name standing on its own (column, alias, table, CTE): backticks when it is not a plain
/// identifier or is a reserved word.
pub fn ident(name: &str) -> String {
    if is_plain_identifier(name) && !is_reserved(name) {
        name.to_string()
    } else {
        quote(name)
    }
}

/// A name after a `.`: any plain identifier is fine there, keywords included.
fn part(name: &str) -> String {
    if is_plain_identifier(name) {
        name.to_string()
    } else {
        quote(name)
    }
}

/// A function name: special forms (`CAST(`, `NOT(`, `tuple(` …) must be quoted to stay calls.
fn call_name(name: &str) -> String {
    const SPECIAL: &[&str] = &[
        "CAST", "CASE", "INTERVAL", "EXISTS", "NOT", "NULL", "TRUE", "FALSE", "INF", "NAN",
    ];
    if is_plain_identifier(name)
        && name != "tuple"
        && !SPECIAL.iter().any(|s| s.eq_ignore_ascii_case(name))
    {
        name.to_string()
    } else {
        quote(name)
    }
}

fn escape_into(out: &mut String, s: &str, quote: char) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
}

fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('`');
    escape_into(&mut out, name, '`');
    out.push('`');
    out
}

/// A string literal in single quotes with ClickHouse escapes.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    escape_into(&mut out, s, '\'');
    out.push('\'');
    out
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
        ExprKind::Index { .. } | ExprKind::TupleElement { .. } => prec::POSTFIX,
        _ => prec::PRIMARY,
    }
}

fn is_number(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Literal(Literal::Int(_) | Literal::Float(_))
    )
}

/// Nesting levels printed on one stack before printing moves to a fresh thread.
const SEGMENT: usize = 32;
const SEGMENT_STACK: usize = 16 << 20;

#[derive(Default)]
struct Printer {
    out: String,
    depth: usize,
}

impl Printer {
    /// Run one level deeper; every [`SEGMENT`] levels continue on a fresh stack (the
    /// parser allows trees 512 levels deep, more than a small stack holds in debug builds).
    fn deeper(&mut self, f: impl FnOnce(&mut Self) + Send) {
        self.depth += 1;
        if self.depth.is_multiple_of(SEGMENT) {
            std::thread::scope(|scope| {
                let spawned = std::thread::Builder::new()
                    .name("hogql-print".into())
                    .stack_size(SEGMENT_STACK)
                    .spawn_scoped(scope, || f(self));
                match spawned {
                    Ok(handle) => {
                        if let Err(panic) = handle.join() {
                            std::panic::resume_unwind(panic);
                        }
                    }
                    Err(e) => panic!("cannot start a thread to print a deep query: {e}"),
                }
            });
        } else {
            f(self);
        }
        self.depth -= 1;
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
            Query::SetOp { op, left, right } => {
                let level = |op: SetOp| if op == SetOp::Intersect { 2 } else { 1 };
                let mine = level(*op);
                let needs = |q: &Query, right: bool| match q {
                    Query::SetOp { op, .. } => level(*op) < mine || (right && level(*op) == mine),
                    Query::Select(_) => false,
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
            self.s(" GROUP BY ");
            self.exprs(&g.exprs);
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
                self.s(&part(name));
                self.s("}");
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
            ExprKind::Index { base, index } => {
                self.postfix_base(base);
                self.s("[");
                self.expr(index, prec::ALIAS);
                self.s("]");
            }
            ExprKind::TupleElement { base, index } => {
                self.postfix_base(base);
                self.s(&format!(".{index}"));
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
                    InList::Expr(e) => match &e.kind {
                        // `(…)` right after IN reads as a list: spell tuples as tuple(…).
                        ExprKind::Tuple(items) => {
                            self.s("tuple(");
                            self.exprs(items);
                            self.s(")");
                        }
                        _ => self.expr(e, prec::COMPARE + 1),
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
                self.s(&part(name));
                self.s("}");
            }
            ExprKind::Subquery(q) => self.subquery(q),
            ExprKind::Exists(q) => {
                self.s("EXISTS ");
                self.subquery(q);
            }
        }
    }

    /// The base of `x[i]` / `x.1`: a number literal needs parentheses (`(1).1`, `(-1)[1]`).
    fn postfix_base(&mut self, base: &Expr) {
        if is_number(base) {
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
