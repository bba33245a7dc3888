//! HogQL's parser: tokens to [`crate::ast`]. Pure (std only).
//!
//! A recursive-descent parser for queries and a Pratt parser for expressions, with
//! ClickHouse's operator priorities (see [`prec`]). `??` (PostHog's null coalescing) sits where
//! PostHog's grammar puts it: below comparisons and `IS NULL`, above `NOT`.
//!
//! Nesting is bounded: a tree deeper than [`MAX_DEPTH`] levels is a [`SyntaxError`], so
//! neither parsing nor later recursion over the tree can overflow the stack.

use crate::ast::*;
pub use crate::grammar::{MAX_DEPTH, MAX_SUBQUERY_DEPTH, WINDOW_WORDS, is_reserved, prec};
use crate::grammar::{ident, string};
use crate::lexer::{Token, TokenKind, tokenize};

pub use crate::lexer::SyntaxError;

/// Recursion levels run on one stack before the descent moves to a fresh thread.
const SEGMENT: usize = 16;
/// Stack of each such thread (virtual memory; only what is touched is committed).
const SEGMENT_STACK: usize = 16 << 20;

/// Words that may end a SELECT list after a trailing comma.
const CLAUSE_WORDS: &[&str] = &[
    "FROM",
    "PREWHERE",
    "WHERE",
    "GROUP",
    "HAVING",
    "WINDOW",
    "QUALIFY",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "SETTINGS",
    "FORMAT",
];

/// Parse a whole query: one SELECT or a set operation; one trailing `;` is allowed.
pub fn parse_query(text: &str) -> Result<Query, SyntaxError> {
    let mut p = Parser::new(text)?;
    let q = p.query()?;
    p.eat(&TokenKind::Semicolon);
    p.expect_end("end of query")?;
    Ok(q)
}

/// Parse a single expression (aliases allowed).
pub fn parse_expr(text: &str) -> Result<Expr, SyntaxError> {
    let mut p = Parser::new(text)?;
    let e = p.expr()?;
    p.expect_end("end of expression")?;
    Ok(e)
}

type PResult<T> = Result<T, SyntaxError>;

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    pos: usize,
    /// Current recursion depth.
    depth: usize,
    /// The deepest absolute tree level reached by what was parsed since the last reset.
    hw: usize,
    /// SELECTs open around the current position.
    selects: usize,
}

/// What a parenthesized group held.
enum Group {
    Query(Query),
    /// The items, and whether it is a tuple (a comma was seen, or it was empty).
    Exprs(Vec<Expr>, bool),
}

enum Infix {
    Binary(BinaryOp, u8),
    Ternary,
    IsNull,
    Between,
    In,
    Index,
    Cast,
    Dot,
}

const UNITS: &[(&str, IntervalUnit)] = &[
    ("SECOND", IntervalUnit::Second),
    ("MINUTE", IntervalUnit::Minute),
    ("HOUR", IntervalUnit::Hour),
    ("DAY", IntervalUnit::Day),
    ("WEEK", IntervalUnit::Week),
    ("MONTH", IntervalUnit::Month),
    ("QUARTER", IntervalUnit::Quarter),
    ("YEAR", IntervalUnit::Year),
];

fn interval_unit(word: &str) -> Option<IntervalUnit> {
    let w = word.strip_suffix(['s', 'S']).unwrap_or(word);
    UNITS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(w))
        .map(|(_, u)| *u)
}

/// A number literal's value; `negative` applies a leading minus.
fn number_value(text: &str, negative: bool) -> Option<Literal> {
    let lower = text.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        Some(u128::from_str_radix(h, 16).ok())
    } else if let Some(b) = lower.strip_prefix("0b") {
        Some(u128::from_str_radix(b, 2).ok())
    } else if lower.contains(['.', 'e']) {
        None
    } else {
        Some(lower.parse::<u128>().ok())
    };
    let float = |t: &str| -> Option<f64> {
        let v: f64 = if let Some(h) = t.strip_prefix("0x") {
            h.chars()
                .try_fold(0f64, |acc, c| c.to_digit(16).map(|d| acc * 16.0 + d as f64))?
        } else if let Some(b) = t.strip_prefix("0b") {
            b.chars()
                .try_fold(0f64, |acc, c| c.to_digit(2).map(|d| acc * 2.0 + d as f64))?
        } else {
            t.parse().ok()?
        };
        Some(if negative { -v } else { v })
    };
    match int {
        Some(Some(v)) if !negative && v <= u64::MAX as u128 => Some(Literal::Int(v as i128)),
        Some(Some(v)) if negative && v <= 1u128 << 63 => Some(Literal::Int(-(v as i128))),
        _ => float(&lower).map(Literal::Float),
    }
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> PResult<Self> {
        Ok(Parser {
            text,
            toks: tokenize(text)?,
            pos: 0,
            depth: 0,
            hw: 0,
            selects: 0,
        })
    }

    // ---- token helpers ----

    fn tok(&self) -> &Token {
        &self.toks[self.pos]
    }

    fn nth(&self, n: usize) -> &Token {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn is(&self, k: &TokenKind) -> bool {
        &self.tok().kind == k
    }

    fn nth_is(&self, n: usize, k: &TokenKind) -> bool {
        &self.nth(n).kind == k
    }

    fn eat(&mut self, k: &TokenKind) -> bool {
        if self.is(k) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.tok().is_word(kw)
    }

    fn nth_kw(&self, n: usize, kw: &str) -> bool {
        self.nth(n).is_word(kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn prev_end(&self) -> usize {
        if self.pos == 0 {
            0
        } else {
            self.toks[self.pos - 1].end
        }
    }

    fn span(&self, start: usize) -> Span {
        Span::new(start, self.prev_end().max(start))
    }

    fn token_text(&self, t: &Token) -> String {
        let s = &self.text[t.start..t.end];
        if s.chars().count() > 40 {
            let cut: String = s.chars().take(40).collect();
            format!("{cut}…")
        } else {
            s.to_string()
        }
    }

    fn describe(&self, t: &Token) -> String {
        if t.kind == TokenKind::Eof {
            "end of input".to_string()
        } else {
            format!("'{}'", self.token_text(t))
        }
    }

    fn err_at(&self, t: &Token, msg: impl Into<String>) -> SyntaxError {
        SyntaxError::at(self.text, t.start, t.end, msg)
    }

    fn err_here(&self, msg: impl Into<String>) -> SyntaxError {
        self.err_at(self.tok(), msg)
    }

    /// "expected {what} after '{previous token}', found {current token}".
    fn expected(&self, what: &str) -> SyntaxError {
        let found = self.describe(self.tok());
        let msg = if self.pos == 0 {
            format!("expected {what}, found {found}")
        } else {
            let prev = self.token_text(&self.toks[self.pos - 1]);
            format!("expected {what} after '{prev}', found {found}")
        };
        self.err_here(msg)
    }

    fn expect(&mut self, k: &TokenKind, what: &str) -> PResult<Token> {
        if self.is(k) {
            Ok(self.bump())
        } else {
            Err(self.expected(what))
        }
    }

    fn expect_kw(&mut self, kw: &str) -> PResult<Token> {
        if self.is_kw(kw) {
            Ok(self.bump())
        } else {
            Err(self.expected(kw))
        }
    }

    fn expect_end(&self, what: &str) -> PResult<()> {
        if self.is(&TokenKind::Eof) {
            Ok(())
        } else {
            Err(self.err_here(format!(
                "expected {what}, found {}",
                self.describe(self.tok())
            )))
        }
    }

    // ---- depth ----

    fn too_deep(&self) -> SyntaxError {
        self.err_here(format!(
            "the query is nested too deeply (more than {MAX_DEPTH} levels)"
        ))
    }

    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.depth += 1;
        self.hw = self.hw.max(self.depth);
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Run one level deeper. Every [`SEGMENT`] levels the rest of the descent continues on
    /// a fresh thread with its own stack, so deep (but allowed) nesting cannot exhaust the
    /// caller's stack whatever the build's frame sizes.
    fn deeper<T: Send>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T> + Send) -> PResult<T> {
        self.enter()?;
        let r = if self.depth.is_multiple_of(SEGMENT) {
            let refused = self.too_deep();
            std::thread::scope(|scope| {
                let spawned = std::thread::Builder::new()
                    .name("hogql-parse".into())
                    .stack_size(SEGMENT_STACK)
                    .spawn_scoped(scope, || f(self));
                match spawned {
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    Err(_) => Err(refused),
                }
            })
        } else {
            f(self)
        };
        self.leave();
        r
    }

    /// Run `f` and report how many tree levels below the current depth it produced.
    fn measured<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<(T, usize)> {
        let saved = self.hw;
        self.hw = self.depth;
        let r = f(self)?;
        let h = self.hw - self.depth;
        self.hw = saved.max(self.hw);
        Ok((r, h))
    }

    /// A chain (`a + b + c`, `q UNION q UNION q`) has grown to `height` levels here.
    fn check_height(&mut self, height: usize) -> PResult<()> {
        if self.depth + height > MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.hw = self.hw.max(self.depth + height);
        Ok(())
    }

    // ---- names ----

    /// A bare word that may stand as an identifier, or a quoted identifier.
    fn at_name(&self, n: usize) -> bool {
        match &self.nth(n).kind {
            TokenKind::Word(w) => !is_reserved(w),
            TokenKind::QuotedIdent(_) => true,
            _ => false,
        }
    }

    /// A name where keywords cannot appear (aliases without AS, table names, …).
    fn name(&mut self, what: &str) -> PResult<String> {
        if self.at_name(0) {
            match self.bump().kind {
                TokenKind::Word(w) | TokenKind::QuotedIdent(w) => Ok(w),
                _ => unreachable!("at_name checked the token"),
            }
        } else {
            Err(self.expected(what))
        }
    }

    /// A name where any word is fine (after `.` or `AS`); string literals too after AS.
    fn any_name(&mut self, what: &str, strings: bool) -> PResult<String> {
        match &self.tok().kind {
            TokenKind::Word(w) | TokenKind::QuotedIdent(w) => {
                let w = w.clone();
                self.bump();
                Ok(w)
            }
            TokenKind::String(s) if strings => {
                let s = s.clone();
                self.bump();
                Ok(s)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Whether a query (possibly parenthesized) starts at token `i` from here.
    fn select_ahead(&self, mut i: usize) -> bool {
        while self.nth_is(i, &TokenKind::LParen) {
            i += 1;
        }
        self.nth_kw(i, "SELECT") || self.nth_kw(i, "WITH")
    }

    // ---- queries ----

    fn query(&mut self) -> PResult<Query> {
        self.deeper(|p| {
            let (first, h) = p.measured(|p| p.select_operand())?;
            p.set_ops(first, h)
        })
    }

    /// Continue set operations after `first` (INTERSECT binds tighter than UNION/EXCEPT).
    fn set_ops(&mut self, first: Query, height: usize) -> PResult<Query> {
        let (mut left, mut height) = self.intersects(first, height)?;
        loop {
            let op = if self.eat_kw("UNION") {
                if self.eat_kw("ALL") {
                    SetOp::UnionAll
                } else {
                    self.eat_kw("DISTINCT");
                    SetOp::UnionDistinct
                }
            } else if self.eat_kw("EXCEPT") {
                if self.is_kw("ALL") {
                    return Err(self.err_here("EXCEPT ALL is not supported; use EXCEPT"));
                }
                self.eat_kw("DISTINCT");
                SetOp::Except
            } else {
                break;
            };
            let (right, hr) = self.measured(|p| p.select_operand())?;
            let (right, hr) = self.intersects(right, hr)?;
            height = (height + 1).max(hr);
            self.check_height(height)?;
            left = Query::SetOp {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok(left)
    }

    fn intersects(&mut self, mut left: Query, mut height: usize) -> PResult<(Query, usize)> {
        while self.eat_kw("INTERSECT") {
            if self.is_kw("ALL") {
                return Err(self.err_here("INTERSECT ALL is not supported; use INTERSECT"));
            }
            self.eat_kw("DISTINCT");
            let (right, hr) = self.measured(|p| p.select_operand())?;
            height = (height + 1).max(hr);
            self.check_height(height)?;
            left = Query::SetOp {
                op: SetOp::Intersect,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok((left, height))
    }

    fn select_operand(&mut self) -> PResult<Query> {
        if self.is(&TokenKind::LParen) {
            self.bump();
            let q = self.query()?;
            self.expect(&TokenKind::RParen, "')' to close the subquery")?;
            Ok(q)
        } else if self.is_kw("SELECT") || self.is_kw("WITH") {
            self.select()
        } else {
            Err(self.expected("SELECT"))
        }
    }

    fn select(&mut self) -> PResult<Query> {
        if self.selects >= MAX_SUBQUERY_DEPTH {
            return Err(self.err_here(format!(
                "subqueries are nested too deeply (more than {MAX_SUBQUERY_DEPTH} levels)"
            )));
        }
        self.selects += 1;
        let r = self.select_body();
        self.selects -= 1;
        r
    }

    fn select_body(&mut self) -> PResult<Query> {
        let start = self.tok().start;
        let mut s = Select::default();
        if self.eat_kw("WITH") {
            s.with = self.ctes()?;
        }
        self.expect_kw("SELECT")?;
        s.distinct = self.eat_kw("DISTINCT");
        s.columns = self.select_list()?;
        if self.eat_kw("FROM") {
            s.from = Some(self.parse_from()?);
        }
        if self.array_join_ahead() {
            s.array_join = Some(self.array_join()?);
            if self.array_join_ahead() {
                return Err(self.err_here("only one ARRAY JOIN clause is supported"));
            }
        }
        if self.eat_kw("PREWHERE") {
            s.prewhere = Some(self.expr()?);
        }
        if self.eat_kw("WHERE") {
            s.where_ = Some(self.expr()?);
        }
        if self.eat_kw("GROUP") {
            s.group_by = Some(self.group_by()?);
        }
        if self.eat_kw("HAVING") {
            s.having = Some(self.expr()?);
        }
        if self.eat_kw("WINDOW") {
            s.window = self.window_clause()?;
        }
        if self.eat_kw("QUALIFY") {
            s.qualify = Some(self.expr()?);
        }
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            s.order_by = self.order_list()?;
        }
        self.limits(&mut s)?;
        for kw in ["SETTINGS", "FORMAT"] {
            if self.is_kw(kw) {
                return Err(self.err_here(format!("{kw} is not supported in HogQL")));
            }
        }
        s.span = self.span(start);
        Ok(Query::Select(Box::new(s)))
    }

    fn ctes(&mut self) -> PResult<Vec<Cte>> {
        let mut out = Vec::new();
        loop {
            let start = self.tok().start;
            if self.at_name(0) && self.nth_kw(1, "AS") && self.nth_is(2, &TokenKind::LParen) {
                let name = self.name("a name")?;
                self.bump();
                if !self.select_ahead(0) {
                    self.bump();
                    return Err(self.expected("a subquery (SELECT …)"));
                }
                self.bump();
                let query = self.query()?;
                self.expect(&TokenKind::RParen, "')' to close the WITH subquery")?;
                out.push(Cte::Subquery {
                    name,
                    query: Box::new(query),
                    span: self.span(start),
                });
            } else {
                let expr = self.expr_no_alias()?;
                if !self.is_kw("AS") {
                    return Err(self.expected("AS and a name for the WITH expression"));
                }
                self.bump();
                let name = self.any_name("a name after AS", false)?;
                out.push(Cte::Expr {
                    name,
                    expr,
                    span: self.span(start),
                });
            }
            if !self.eat(&TokenKind::Comma) {
                return Ok(out);
            }
        }
    }

    fn select_list(&mut self) -> PResult<Vec<Expr>> {
        let mut out = Vec::new();
        loop {
            let mut e = self.expr()?;
            if self.at_name(0) {
                let name = self.name("an alias")?;
                let span = self.span(e.span.start);
                e = Expr::new(
                    ExprKind::Alias {
                        expr: Box::new(e),
                        name,
                    },
                    span,
                );
            }
            out.push(e);
            if !self.eat(&TokenKind::Comma) {
                return Ok(out);
            }
            let trailing = self.is(&TokenKind::Eof)
                || self.is(&TokenKind::RParen)
                || CLAUSE_WORDS.iter().any(|w| self.is_kw(w));
            if trailing {
                return Ok(out);
            }
        }
    }

    fn parse_from(&mut self) -> PResult<From> {
        let first = self.table_expr()?;
        let mut joins = Vec::new();
        loop {
            let start = self.tok().start;
            if self.eat(&TokenKind::Comma) {
                let table = self.table_expr()?;
                joins.push(Join {
                    kind: JoinKind::Cross,
                    strictness: None,
                    global: false,
                    table,
                    constraint: None,
                    span: self.span(start),
                });
                continue;
            }
            if self.array_join_ahead() {
                break;
            }
            const JOIN_WORDS: &[&str] = &[
                "GLOBAL", "ANY", "ALL", "SEMI", "ANTI", "ASOF", "INNER", "LEFT", "RIGHT", "FULL",
                "CROSS", "OUTER", "JOIN",
            ];
            if !JOIN_WORDS.iter().any(|w| self.is_kw(w)) {
                break;
            }
            joins.push(self.join()?);
        }
        Ok(From { first, joins })
    }

    fn join(&mut self) -> PResult<Join> {
        let start = self.tok().start;
        let global = self.eat_kw("GLOBAL");
        let mut strictness = None;
        let mut kind = None;
        loop {
            let t = self.tok().clone();
            let TokenKind::Word(w) = &t.kind else {
                return Err(self.expected("JOIN"));
            };
            let s = match w.to_ascii_uppercase().as_str() {
                "ANY" => Some(JoinStrictness::Any),
                "ALL" => Some(JoinStrictness::All),
                "SEMI" => Some(JoinStrictness::Semi),
                "ANTI" => Some(JoinStrictness::Anti),
                "ASOF" => Some(JoinStrictness::Asof),
                _ => None,
            };
            let k = match w.to_ascii_uppercase().as_str() {
                "INNER" => Some(JoinKind::Inner),
                "LEFT" => Some(JoinKind::Left),
                "RIGHT" => Some(JoinKind::Right),
                "FULL" => Some(JoinKind::Full),
                "CROSS" => Some(JoinKind::Cross),
                _ => None,
            };
            if let Some(s) = s {
                if strictness.is_some() {
                    return Err(self.err_at(
                        &t,
                        format!("unexpected '{w}': the join already has a strictness"),
                    ));
                }
                strictness = Some(s);
                self.bump();
            } else if let Some(k) = k {
                if kind.is_some() {
                    return Err(
                        self.err_at(&t, format!("unexpected '{w}': the join already has a kind"))
                    );
                }
                kind = Some(k);
                self.bump();
                if matches!(k, JoinKind::Left | JoinKind::Right | JoinKind::Full) {
                    self.eat_kw("OUTER");
                }
            } else if w.eq_ignore_ascii_case("JOIN") {
                self.bump();
                break;
            } else {
                return Err(self.expected("JOIN"));
            }
        }
        let kind = kind.unwrap_or(JoinKind::Inner);
        if kind == JoinKind::Cross && strictness.is_some() {
            return Err(self.err_at(
                &self.toks[self.pos - 1],
                "CROSS JOIN takes no strictness (ANY, ALL, SEMI, ANTI, ASOF)",
            ));
        }
        let table = self.table_expr()?;
        let constraint = if kind == JoinKind::Cross {
            if self.is_kw("ON") || self.is_kw("USING") {
                return Err(self.err_here("CROSS JOIN takes no ON or USING"));
            }
            None
        } else if self.eat_kw("ON") {
            Some(JoinConstraint::On(self.expr()?))
        } else if self.eat_kw("USING") {
            let mut names = Vec::new();
            if self.eat(&TokenKind::LParen) {
                loop {
                    names.push(self.name("a column name")?);
                    if !self.eat(&TokenKind::Comma) {
                        break;
                    }
                }
                self.expect(&TokenKind::RParen, "',' or ')' in the USING list")?;
            } else {
                names.push(self.name("a column name")?);
            }
            Some(JoinConstraint::Using(names))
        } else {
            return Err(self.expected("ON or USING after the joined table"));
        };
        Ok(Join {
            kind,
            strictness,
            global,
            table,
            constraint,
            span: self.span(start),
        })
    }

    fn table_expr(&mut self) -> PResult<TableExpr> {
        let start = self.tok().start;
        let source = match self.tok().kind.clone() {
            TokenKind::LBrace => TableSource::Placeholder(self.placeholder()?),
            TokenKind::LParen => {
                if !self.select_ahead(0) {
                    self.bump();
                    return Err(self.expected("a subquery (SELECT …)"));
                }
                self.bump();
                let q = self.query()?;
                self.expect(&TokenKind::RParen, "')' to close the subquery")?;
                TableSource::Subquery(Box::new(q))
            }
            _ if self.at_name(0) => {
                let name = self.name("a table name")?;
                if self.is(&TokenKind::LParen) {
                    self.bump();
                    let args = self.args_until_rparen(&name)?;
                    TableSource::Function { name, args }
                } else {
                    let mut parts = vec![name];
                    while self.eat(&TokenKind::Dot) {
                        parts.push(self.any_name("a name after '.'", false)?);
                    }
                    TableSource::Table(parts)
                }
            }
            _ => return Err(self.expected("a table name, subquery or table function")),
        };
        let alias = if self.eat_kw("AS") {
            Some(self.any_name("an alias after AS", false)?)
        } else if self.at_name(0) {
            Some(self.name("an alias")?)
        } else {
            None
        };
        let is_final = self.eat_kw("FINAL");
        let sample = if self.eat_kw("SAMPLE") {
            let ratio = self.bp(0)?;
            let offset = if self.eat_kw("OFFSET") {
                Some(self.bp(0)?)
            } else {
                None
            };
            Some(Sample { ratio, offset })
        } else {
            None
        };
        Ok(TableExpr {
            source,
            alias,
            sample,
            is_final,
            span: self.span(start),
        })
    }

    fn array_join_ahead(&self) -> bool {
        (self.is_kw("ARRAY") && self.nth_kw(1, "JOIN"))
            || ((self.is_kw("LEFT") || self.is_kw("INNER"))
                && self.nth_kw(1, "ARRAY")
                && self.nth_kw(2, "JOIN"))
    }

    fn array_join(&mut self) -> PResult<ArrayJoin> {
        let start = self.tok().start;
        let left = self.eat_kw("LEFT");
        if !left {
            self.eat_kw("INNER");
        }
        self.expect_kw("ARRAY")?;
        self.expect_kw("JOIN")?;
        let exprs = self.expr_list()?;
        Ok(ArrayJoin {
            left,
            exprs,
            span: self.span(start),
        })
    }

    fn group_by(&mut self) -> PResult<GroupBy> {
        self.expect_kw("BY")?;
        let mut g = GroupBy {
            exprs: Vec::new(),
            modifier: GroupByModifier::None,
            with_totals: false,
        };
        if (self.is_kw("ROLLUP") || self.is_kw("CUBE")) && self.nth_is(1, &TokenKind::LParen) {
            g.modifier = if self.is_kw("ROLLUP") {
                GroupByModifier::Rollup
            } else {
                GroupByModifier::Cube
            };
            self.bump();
            self.bump();
            g.exprs = self.expr_list()?;
            self.expect(&TokenKind::RParen, "',' or ')'")?;
        } else {
            g.exprs = self.expr_list()?;
        }
        while self.is_kw("WITH") {
            let m = if self.nth_kw(1, "ROLLUP") {
                GroupByModifier::Rollup
            } else if self.nth_kw(1, "CUBE") {
                GroupByModifier::Cube
            } else if self.nth_kw(1, "TOTALS") {
                if g.with_totals {
                    return Err(self.err_at(self.nth(1), "WITH TOTALS is given twice"));
                }
                self.bump();
                self.bump();
                g.with_totals = true;
                continue;
            } else {
                break;
            };
            if g.modifier != GroupByModifier::None {
                return Err(self.err_at(self.nth(1), "GROUP BY already has ROLLUP or CUBE"));
            }
            g.modifier = m;
            self.bump();
            self.bump();
        }
        Ok(g)
    }

    fn window_clause(&mut self) -> PResult<Vec<(String, WindowSpec)>> {
        let mut out = Vec::new();
        loop {
            let name = self.name("a window name")?;
            self.expect_kw("AS")?;
            self.expect(&TokenKind::LParen, "'('")?;
            let spec = self.window_spec()?;
            self.expect(&TokenKind::RParen, "')' to close the window")?;
            out.push((name, spec));
            if !self.eat(&TokenKind::Comma) {
                return Ok(out);
            }
        }
    }

    /// The inside of `( … )` after OVER or in WINDOW.
    fn window_spec(&mut self) -> PResult<WindowSpec> {
        let mut spec = WindowSpec::default();
        let base = match &self.tok().kind {
            TokenKind::QuotedIdent(_) => true,
            TokenKind::Word(w) => {
                !is_reserved(w) && !WINDOW_WORDS.iter().any(|k| k.eq_ignore_ascii_case(w))
            }
            _ => false,
        };
        if base {
            spec.base = Some(self.any_name("a window name", false)?);
        }
        if self.eat_kw("PARTITION") {
            self.expect_kw("BY")?;
            spec.partition_by = self.expr_list()?;
        }
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            spec.order_by = self.order_list()?;
        }
        let units = if self.eat_kw("ROWS") {
            Some(FrameUnits::Rows)
        } else if self.eat_kw("RANGE") {
            Some(FrameUnits::Range)
        } else {
            None
        };
        if let Some(units) = units {
            let (start, end) = if self.eat_kw("BETWEEN") {
                let s = self.frame_bound()?;
                self.expect_kw("AND")?;
                (s, Some(self.frame_bound()?))
            } else {
                (self.frame_bound()?, None)
            };
            spec.frame = Some(WindowFrame { units, start, end });
        }
        Ok(spec)
    }

    fn frame_bound(&mut self) -> PResult<FrameBound> {
        if self.eat_kw("UNBOUNDED") {
            if self.eat_kw("PRECEDING") {
                return Ok(FrameBound::UnboundedPreceding);
            }
            if self.eat_kw("FOLLOWING") {
                return Ok(FrameBound::UnboundedFollowing);
            }
            return Err(self.expected("PRECEDING or FOLLOWING"));
        }
        if self.eat_kw("CURRENT") {
            self.expect_kw("ROW")?;
            return Ok(FrameBound::CurrentRow);
        }
        if self.is(&TokenKind::Eof) || self.is(&TokenKind::RParen) {
            return Err(
                self.expected("a frame bound (UNBOUNDED, CURRENT ROW or n PRECEDING/FOLLOWING)")
            );
        }
        let e = self.bp(0)?;
        if self.eat_kw("PRECEDING") {
            Ok(FrameBound::Preceding(Box::new(e)))
        } else if self.eat_kw("FOLLOWING") {
            Ok(FrameBound::Following(Box::new(e)))
        } else {
            Err(self.expected("PRECEDING or FOLLOWING"))
        }
    }

    fn order_list(&mut self) -> PResult<Vec<OrderExpr>> {
        let mut out = Vec::new();
        loop {
            let expr = self.expr()?;
            let desc = if self.eat_kw("DESC") || self.eat_kw("DESCENDING") {
                true
            } else {
                let _ = self.eat_kw("ASC") || self.eat_kw("ASCENDING");
                false
            };
            let nulls_first = if self.eat_kw("NULLS") {
                if self.eat_kw("FIRST") {
                    Some(true)
                } else if self.eat_kw("LAST") {
                    Some(false)
                } else {
                    return Err(self.expected("FIRST or LAST"));
                }
            } else {
                None
            };
            if self.is_kw("COLLATE") {
                return Err(self.err_here("COLLATE is not supported"));
            }
            if self.is_kw("WITH") && self.nth_kw(1, "FILL") {
                return Err(self.err_here("WITH FILL is not supported"));
            }
            out.push(OrderExpr {
                expr,
                desc,
                nulls_first,
            });
            if !self.eat(&TokenKind::Comma) {
                return Ok(out);
            }
        }
    }

    fn eat_with_ties(&mut self) -> bool {
        if self.is_kw("WITH") && self.nth_kw(1, "TIES") {
            self.bump();
            self.bump();
            true
        } else {
            false
        }
    }

    /// After LIMIT: `n`, `m, n`, `n OFFSET m`, with an optional WITH TIES.
    fn limit_body(&mut self) -> PResult<(Expr, Option<Expr>, bool)> {
        let a = self.expr()?;
        if self.eat(&TokenKind::Comma) {
            let b = self.expr()?;
            let ties = self.eat_with_ties();
            return Ok((b, Some(a), ties));
        }
        let mut ties = self.eat_with_ties();
        let offset = if self.eat_kw("OFFSET") {
            Some(self.expr()?)
        } else {
            None
        };
        if !ties {
            ties = self.eat_with_ties();
        }
        Ok((a, offset, ties))
    }

    fn limits(&mut self, s: &mut Select) -> PResult<()> {
        if self.eat_kw("LIMIT") {
            let (limit, offset, ties) = self.limit_body()?;
            if self.is_kw("BY") {
                if ties {
                    return Err(self.err_here("WITH TIES cannot be used with LIMIT … BY"));
                }
                self.bump();
                let by = self.expr_list()?;
                s.limit_by = Some(LimitBy { limit, offset, by });
                if self.eat_kw("LIMIT") {
                    let (limit, offset, ties) = self.limit_body()?;
                    if self.is_kw("BY") {
                        return Err(self.err_here("only one LIMIT … BY is supported"));
                    }
                    s.limit = Some(limit);
                    s.offset = offset;
                    s.with_ties = ties;
                }
            } else {
                s.limit = Some(limit);
                s.offset = offset;
                s.with_ties = ties;
            }
        }
        if s.offset.is_none() && self.eat_kw("OFFSET") {
            s.offset = Some(self.expr()?);
        }
        Ok(())
    }

    // ---- expressions ----

    /// Comma-separated expressions (aliases allowed), at least one.
    fn expr_list(&mut self) -> PResult<Vec<Expr>> {
        let mut out = vec![self.expr()?];
        while self.eat(&TokenKind::Comma) {
            out.push(self.expr()?);
        }
        Ok(out)
    }

    /// An expression with an optional `AS alias`.
    fn expr(&mut self) -> PResult<Expr> {
        let e = self.expr_no_alias()?;
        if self.eat_kw("AS") {
            let name = self.any_name("an alias after AS", true)?;
            let span = self.span(e.span.start);
            return Ok(Expr::new(
                ExprKind::Alias {
                    expr: Box::new(e),
                    name,
                },
                span,
            ));
        }
        Ok(e)
    }

    /// An expression without a trailing alias: a lambda or an operator expression.
    fn expr_no_alias(&mut self) -> PResult<Expr> {
        if let Some(n) = self.lambda_ahead() {
            let start = self.tok().start;
            let mut params = Vec::new();
            for _ in 0..n {
                if let TokenKind::Word(w) | TokenKind::QuotedIdent(w) = self.bump().kind {
                    params.push(w);
                }
            }
            let body = self.deeper(|p| p.expr_no_alias())?;
            let span = self.span(start);
            return Ok(Expr::new(
                ExprKind::Lambda {
                    params,
                    body: Box::new(body),
                },
                span,
            ));
        }
        self.bp(0)
    }

    /// If a lambda starts here, how many tokens make up its parameters and arrow.
    fn lambda_ahead(&self) -> Option<usize> {
        let is_param = |t: &Token| matches!(t.kind, TokenKind::Word(_) | TokenKind::QuotedIdent(_));
        if is_param(self.tok()) && self.nth_is(1, &TokenKind::Arrow) {
            return Some(2);
        }
        if !self.is(&TokenKind::LParen) {
            return None;
        }
        let mut i = 1;
        if !self.nth_is(i, &TokenKind::RParen) {
            loop {
                if !is_param(self.nth(i)) {
                    return None;
                }
                i += 1;
                if self.nth_is(i, &TokenKind::Comma) {
                    i += 1;
                    if self.nth_is(i, &TokenKind::RParen) {
                        break;
                    }
                } else if self.nth_is(i, &TokenKind::RParen) {
                    break;
                } else {
                    return None;
                }
            }
        }
        if self.nth_is(i + 1, &TokenKind::Arrow) {
            Some(i + 2)
        } else {
            None
        }
    }

    fn infix(&self) -> Option<(u8, Infix)> {
        use TokenKind as T;
        let t = self.tok();
        Some(match &t.kind {
            T::Question => (prec::TERNARY, Infix::Ternary),
            T::Coalesce => (prec::COALESCE, Infix::Binary(BinaryOp::Coalesce, 1)),
            T::Eq => (prec::COMPARE, Infix::Binary(BinaryOp::Eq, 1)),
            T::NotEq => (prec::COMPARE, Infix::Binary(BinaryOp::NotEq, 1)),
            T::Lt => (prec::COMPARE, Infix::Binary(BinaryOp::Lt, 1)),
            T::LtEq => (prec::COMPARE, Infix::Binary(BinaryOp::LtEq, 1)),
            T::Gt => (prec::COMPARE, Infix::Binary(BinaryOp::Gt, 1)),
            T::GtEq => (prec::COMPARE, Infix::Binary(BinaryOp::GtEq, 1)),
            T::Regex => (prec::COMPARE, Infix::Binary(BinaryOp::Regex, 1)),
            T::NotRegex => (prec::COMPARE, Infix::Binary(BinaryOp::NotRegex, 1)),
            T::IRegex => (prec::COMPARE, Infix::Binary(BinaryOp::IRegex, 1)),
            T::NotIRegex => (prec::COMPARE, Infix::Binary(BinaryOp::NotIRegex, 1)),
            T::Concat => (prec::CONCAT, Infix::Binary(BinaryOp::Concat, 1)),
            T::Plus => (prec::ADD, Infix::Binary(BinaryOp::Add, 1)),
            T::Minus => (prec::ADD, Infix::Binary(BinaryOp::Sub, 1)),
            T::Star => (prec::MUL, Infix::Binary(BinaryOp::Mul, 1)),
            T::Slash => (prec::MUL, Infix::Binary(BinaryOp::Div, 1)),
            T::Percent => (prec::MUL, Infix::Binary(BinaryOp::Mod, 1)),
            T::LBracket => (prec::POSTFIX, Infix::Index),
            T::DoubleColon => (prec::POSTFIX, Infix::Cast),
            T::Dot => (prec::POSTFIX, Infix::Dot),
            T::Word(w) => {
                let w = w.to_ascii_uppercase();
                let next = |kw: &str| self.nth_kw(1, kw);
                match w.as_str() {
                    "OR" => (prec::OR, Infix::Binary(BinaryOp::Or, 1)),
                    "AND" => (prec::AND, Infix::Binary(BinaryOp::And, 1)),
                    "MOD" => (prec::MUL, Infix::Binary(BinaryOp::Mod, 1)),
                    "IS" => (prec::IS_NULL, Infix::IsNull),
                    "BETWEEN" => (prec::BETWEEN, Infix::Between),
                    "LIKE" => (prec::COMPARE, Infix::Binary(BinaryOp::Like, 1)),
                    "ILIKE" => (prec::COMPARE, Infix::Binary(BinaryOp::ILike, 1)),
                    "IN" => (prec::COMPARE, Infix::In),
                    "GLOBAL" if next("IN") || (next("NOT") && self.nth_kw(2, "IN")) => {
                        (prec::COMPARE, Infix::In)
                    }
                    "NOT" if next("BETWEEN") => (prec::BETWEEN, Infix::Between),
                    "NOT" if next("LIKE") => (prec::COMPARE, Infix::Binary(BinaryOp::NotLike, 2)),
                    "NOT" if next("ILIKE") => (prec::COMPARE, Infix::Binary(BinaryOp::NotILike, 2)),
                    "NOT" if next("IN") => (prec::COMPARE, Infix::In),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// Parse an operand at binding power `min`, measuring its height.
    fn operand(&mut self, min: u8) -> PResult<(Expr, usize)> {
        self.measured(|p| p.bp(min))
    }

    /// The Pratt loop: an expression whose operators all bind at least as tightly as `min`.
    fn bp(&mut self, min: u8) -> PResult<Expr> {
        self.deeper(|p| p.bp_inner(min))
    }

    fn bp_inner(&mut self, min: u8) -> PResult<Expr> {
        let (mut left, mut height) = self.measured(|p| p.prefix())?;
        while let Some((lbp, op)) = self.infix() {
            if lbp < min {
                break;
            }
            let start = left.span.start;
            let op_tok = self.tok().clone();
            let (kind, h) = match op {
                Infix::Binary(op, ntoks) => {
                    for _ in 0..ntoks {
                        self.bump();
                    }
                    let (right, h) = self.operand(lbp + 1)?;
                    let kind = ExprKind::Binary {
                        op,
                        left: Box::new(left),
                        right: Box::new(right),
                    };
                    (kind, h)
                }
                Infix::Ternary => {
                    self.bump();
                    let (then, h1) = self.operand(0)?;
                    self.expect(&TokenKind::Colon, "':' of the ?: operator")?;
                    let (else_, h2) = self.operand(prec::TERNARY)?;
                    let kind = ExprKind::Ternary {
                        cond: Box::new(left),
                        then: Box::new(then),
                        else_: Box::new(else_),
                    };
                    (kind, h1.max(h2))
                }
                Infix::IsNull => {
                    self.bump();
                    let negated = self.eat_kw("NOT");
                    self.expect_kw("NULL")?;
                    let kind = ExprKind::IsNull {
                        expr: Box::new(left),
                        negated,
                    };
                    (kind, 0)
                }
                Infix::Between => {
                    let negated = self.eat_kw("NOT");
                    self.bump();
                    let (low, h1) = self.operand(prec::BETWEEN + 1)?;
                    self.expect_kw("AND")?;
                    let (high, h2) = self.operand(prec::BETWEEN + 1)?;
                    let kind = ExprKind::Between {
                        expr: Box::new(left),
                        low: Box::new(low),
                        high: Box::new(high),
                        negated,
                    };
                    (kind, h1.max(h2))
                }
                Infix::In => {
                    self.eat_kw("GLOBAL");
                    let negated = self.eat_kw("NOT");
                    self.bump();
                    let (list, h) = if self.is(&TokenKind::LParen) {
                        let (g, h) = self.measured(|p| p.paren_group())?;
                        let list = match g {
                            Group::Query(q) => InList::Subquery(Box::new(q)),
                            Group::Exprs(items, _) => InList::List(items),
                        };
                        (list, h)
                    } else {
                        let (e, h) = self.operand(prec::COMPARE + 1)?;
                        (InList::Expr(Box::new(e)), h)
                    };
                    let kind = ExprKind::In {
                        expr: Box::new(left),
                        list,
                        negated,
                    };
                    (kind, h)
                }
                Infix::Index => {
                    self.bump();
                    let (index, h) = self.measured(|p| p.expr())?;
                    self.expect(&TokenKind::RBracket, "']'")?;
                    let kind = ExprKind::Index {
                        base: Box::new(left),
                        index: Box::new(index),
                    };
                    (kind, h)
                }
                Infix::Cast => {
                    self.bump();
                    let (ty, h) = self.measured(|p| p.type_name())?;
                    let kind = ExprKind::Cast {
                        expr: Box::new(left),
                        ty,
                    };
                    (kind, h)
                }
                Infix::Dot => {
                    self.bump();
                    let t = self.bump();
                    let kind = match (t.kind, left.kind) {
                        (TokenKind::Number(n), kind) => {
                            let Ok(index) = n.parse::<u64>() else {
                                return Err(self.err_at(&op_tok, "invalid tuple index"));
                            };
                            let base = Box::new(Expr::new(kind, left.span));
                            ExprKind::TupleElement { base, index }
                        }
                        (TokenKind::Star, ExprKind::Field(parts)) => ExprKind::Star(Some(parts)),
                        (TokenKind::Star, _) => {
                            return Err(self.err_at(&op_tok, "'.*' must follow a table name"));
                        }
                        (
                            TokenKind::Word(name) | TokenKind::QuotedIdent(name),
                            ExprKind::Field(mut parts),
                        ) => {
                            parts.push(name);
                            left = Expr::new(ExprKind::Field(parts), self.span(start));
                            continue;
                        }
                        (TokenKind::Word(name) | TokenKind::QuotedIdent(name), kind) => {
                            let base = Box::new(Expr::new(kind, left.span));
                            let index = Box::new(Expr::new(
                                ExprKind::Literal(Literal::String(name)),
                                Span::new(t.start, t.end),
                            ));
                            ExprKind::Index { base, index }
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.expected("a name or a tuple index"));
                        }
                    };
                    (kind, 0)
                }
            };
            height = (height + 1).max(h);
            self.check_height(height)?;
            left = Expr::new(kind, self.span(start));
        }
        self.hw = self.hw.max(self.depth + height);
        Ok(left)
    }

    fn expected_expr(&self) -> SyntaxError {
        self.expected("an expression")
    }

    fn literal(&mut self, lit: Literal, start: usize) -> PResult<Expr> {
        Ok(Expr::new(ExprKind::Literal(lit), self.span(start)))
    }

    fn number(&mut self, negative: bool) -> PResult<Literal> {
        let t = self.bump();
        let TokenKind::Number(text) = &t.kind else {
            return Err(self.err_at(&t, "expected a number"));
        };
        number_value(text, negative)
            .ok_or_else(|| self.err_at(&t, format!("invalid number '{text}'")))
    }

    fn prefix(&mut self) -> PResult<Expr> {
        let t = self.tok().clone();
        let start = t.start;
        match &t.kind {
            TokenKind::Number(_) => {
                let lit = self.number(false)?;
                self.literal(lit, start)
            }
            TokenKind::String(s) => {
                self.bump();
                self.literal(Literal::String(s.clone()), start)
            }
            TokenKind::Minus | TokenKind::Plus => {
                let negative = t.kind == TokenKind::Minus;
                if matches!(self.nth(1).kind, TokenKind::Number(_)) {
                    self.bump();
                    let lit = self.number(negative)?;
                    return self.literal(lit, start);
                }
                for (word, v) in [("INF", f64::INFINITY), ("NAN", f64::NAN)] {
                    if self.nth_kw(1, word) && !self.nth_is(2, &TokenKind::LParen) {
                        self.bump();
                        self.bump();
                        return self.literal(Literal::Float(if negative { -v } else { v }), start);
                    }
                }
                if !negative {
                    return Err(self.expected_expr());
                }
                self.bump();
                let (e, _) = self.operand(prec::NEG)?;
                Ok(Expr::new(
                    ExprKind::Unary {
                        op: UnaryOp::Neg,
                        expr: Box::new(e),
                    },
                    self.span(start),
                ))
            }
            TokenKind::LParen => match self.paren_group()? {
                Group::Query(q) => Ok(Expr::new(ExprKind::Subquery(Box::new(q)), self.span(start))),
                Group::Exprs(mut items, false) if items.len() == 1 => Ok(items.remove(0)),
                Group::Exprs(items, _) => Ok(Expr::new(ExprKind::Tuple(items), self.span(start))),
            },
            TokenKind::LBracket => {
                self.bump();
                let mut items = Vec::new();
                while !self.is(&TokenKind::RBracket) {
                    items.push(self.expr()?);
                    if !self.eat(&TokenKind::Comma) {
                        break;
                    }
                }
                self.expect(&TokenKind::RBracket, "',' or ']' in the array")?;
                Ok(Expr::new(ExprKind::Array(items), self.span(start)))
            }
            TokenKind::LBrace => {
                let name = self.placeholder()?;
                Ok(Expr::new(ExprKind::Placeholder(name), self.span(start)))
            }
            TokenKind::Star => {
                self.bump();
                Ok(Expr::new(ExprKind::Star(None), self.span(start)))
            }
            TokenKind::QuotedIdent(name) => {
                self.bump();
                if self.is(&TokenKind::LParen) {
                    return self.call(name.clone(), start, true);
                }
                Ok(Expr::new(
                    ExprKind::Field(vec![name.clone()]),
                    self.span(start),
                ))
            }
            TokenKind::Word(w) => self.word(w.clone(), start),
            _ => Err(self.expected_expr()),
        }
    }

    fn word(&mut self, w: String, start: usize) -> PResult<Expr> {
        let up = w.to_ascii_uppercase();
        let call_follows = self.nth_is(1, &TokenKind::LParen);
        let lit = match up.as_str() {
            "NULL" => Some(Literal::Null),
            "TRUE" => Some(Literal::Bool(true)),
            "FALSE" => Some(Literal::Bool(false)),
            "INF" if !call_follows => Some(Literal::Float(f64::INFINITY)),
            "NAN" if !call_follows => Some(Literal::Float(f64::NAN)),
            _ => None,
        };
        if let Some(lit) = lit {
            self.bump();
            return self.literal(lit, start);
        }
        match up.as_str() {
            "NOT" => {
                self.bump();
                let (e, _) = self.operand(prec::NOT)?;
                return Ok(Expr::new(
                    ExprKind::Unary {
                        op: UnaryOp::Not,
                        expr: Box::new(e),
                    },
                    self.span(start),
                ));
            }
            "CASE" => return self.case(start),
            "CAST" if call_follows => return self.cast(start),
            "INTERVAL" => return self.interval(start),
            "EXISTS" if call_follows && self.select_ahead(2) => {
                self.bump();
                self.bump();
                let q = self.query()?;
                self.expect(&TokenKind::RParen, "')' to close the EXISTS subquery")?;
                return Ok(Expr::new(ExprKind::Exists(Box::new(q)), self.span(start)));
            }
            _ => {}
        }
        if call_follows {
            self.bump();
            return self.call(w, start, false);
        }
        if is_reserved(&w) {
            return Err(self.expected_expr());
        }
        self.bump();
        Ok(Expr::new(ExprKind::Field(vec![w]), self.span(start)))
    }

    fn placeholder(&mut self) -> PResult<String> {
        self.expect(&TokenKind::LBrace, "'{'")?;
        let name = match &self.tok().kind {
            TokenKind::Word(w) | TokenKind::QuotedIdent(w) => w.clone(),
            _ => return Err(self.expected("a placeholder name")),
        };
        self.bump();
        self.expect(&TokenKind::RBrace, "'}' to close the placeholder")?;
        Ok(name)
    }

    /// `( … )` in an expression: a subquery, a parenthesized expression or a tuple.
    fn paren_group(&mut self) -> PResult<Group> {
        self.expect(&TokenKind::LParen, "'('")?;
        if self.is_kw("SELECT") || self.is_kw("WITH") {
            let q = self.query()?;
            self.expect(&TokenKind::RParen, "')' to close the subquery")?;
            return Ok(Group::Query(q));
        }
        if self.eat(&TokenKind::RParen) {
            return Ok(Group::Exprs(Vec::new(), true));
        }
        let first = self.expr()?;
        let set_op = ["UNION", "EXCEPT", "INTERSECT"]
            .iter()
            .any(|w| self.is_kw(w));
        if set_op && let ExprKind::Subquery(q) = first.kind {
            // `((SELECT …) UNION ALL (SELECT …))`
            let h = self.hw.saturating_sub(self.depth);
            let q = self.set_ops(*q, h)?;
            self.expect(&TokenKind::RParen, "')' to close the subquery")?;
            return Ok(Group::Query(q));
        }
        let mut items = vec![first];
        let mut tuple = false;
        while self.eat(&TokenKind::Comma) {
            tuple = true;
            if self.is(&TokenKind::RParen) {
                break;
            }
            items.push(self.expr()?);
        }
        self.expect(&TokenKind::RParen, "',' or ')'")?;
        Ok(Group::Exprs(items, tuple))
    }

    /// Arguments after `(` up to and including `)`; a trailing comma is allowed.
    fn args_until_rparen(&mut self, name: &str) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        while !self.is(&TokenKind::RParen) {
            args.push(self.expr()?);
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        self.expect(
            &TokenKind::RParen,
            &format!("',' or ')' in the arguments of {name}"),
        )?;
        Ok(args)
    }

    /// `(DISTINCT? args)` of a call.
    fn call_args(&mut self, name: &str) -> PResult<(bool, Vec<Expr>)> {
        self.expect(&TokenKind::LParen, "'('")?;
        let distinct = self.is_kw("DISTINCT")
            && !self.nth_is(1, &TokenKind::RParen)
            && !self.nth_is(1, &TokenKind::Comma);
        if distinct {
            self.bump();
        }
        Ok((distinct, self.args_until_rparen(name)?))
    }

    /// A call; the current token is the `(` after the name.
    fn call(&mut self, name: String, start: usize, quoted: bool) -> PResult<Expr> {
        let (d1, a1) = self.call_args(&name)?;
        let (params, args, distinct) = if self.is(&TokenKind::LParen) {
            if d1 {
                return Err(self.err_here("DISTINCT belongs in the arguments, not the parameters"));
            }
            let (d2, a2) = self.call_args(&name)?;
            (Some(a1), a2, d2)
        } else {
            (None, a1, d1)
        };
        let over = if self.eat_kw("OVER") {
            if self.eat(&TokenKind::LParen) {
                let spec = self.window_spec()?;
                self.expect(&TokenKind::RParen, "')' to close the window")?;
                Some(Over::Spec(spec))
            } else if self.at_name(0) {
                Some(Over::Named(self.name("a window name")?))
            } else {
                return Err(self.expected("a window name or '('"));
            }
        } else {
            None
        };
        let span = self.span(start);
        if !quoted && name == "tuple" && params.is_none() && !distinct && over.is_none() {
            return Ok(Expr::new(ExprKind::Tuple(args), span));
        }
        Ok(Expr::new(
            ExprKind::Call {
                name,
                params,
                args,
                distinct,
                over,
            },
            span,
        ))
    }

    fn case(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        let operand = if self.is_kw("WHEN") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut whens = Vec::new();
        while self.eat_kw("WHEN") {
            let cond = self.expr()?;
            self.expect_kw("THEN")?;
            let then = self.expr()?;
            whens.push((cond, then));
        }
        if whens.is_empty() {
            return Err(self.expected("WHEN"));
        }
        let else_ = if self.eat_kw("ELSE") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        if !self.is_kw("END") {
            return Err(self.expected(if else_.is_some() {
                "END"
            } else {
                "WHEN, ELSE or END"
            }));
        }
        self.bump();
        Ok(Expr::new(
            ExprKind::Case {
                operand,
                whens,
                else_,
            },
            self.span(start),
        ))
    }

    fn cast(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        self.bump();
        let expr = self.expr_no_alias()?;
        let ty = if self.eat_kw("AS") {
            self.type_name()?
        } else if self.eat(&TokenKind::Comma) {
            let t = self.tok().clone();
            let TokenKind::String(s) = &t.kind else {
                return Err(self.expected("a type name in quotes"));
            };
            self.bump();
            normalize_type(s).map_err(|e| {
                self.err_at(&t, format!("invalid type '{s}' in CAST: {}", e.message))
            })?
        } else {
            return Err(self.expected("AS and a type"));
        };
        self.expect(&TokenKind::RParen, "')' to close CAST")?;
        Ok(Expr::new(
            ExprKind::Cast {
                expr: Box::new(expr),
                ty,
            },
            self.span(start),
        ))
    }

    fn at_unit(&self, n: usize) -> Option<IntervalUnit> {
        match &self.nth(n).kind {
            TokenKind::Word(w) => interval_unit(w),
            _ => None,
        }
    }

    fn interval(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        let t = self.tok().clone();
        if let TokenKind::String(s) = &t.kind
            && self.at_unit(1).is_none()
        {
            // INTERVAL '1 day'
            self.bump();
            let mut parts = s.split_whitespace();
            let (n, unit) = match (parts.next(), parts.next(), parts.next()) {
                (Some(n), Some(u), None) => (n.parse::<i64>().ok(), interval_unit(u)),
                _ => (None, None),
            };
            let (Some(n), Some(unit)) = (n, unit) else {
                return Err(self.err_at(
                    &t,
                    format!(
                        "invalid interval '{s}': expected a whole number and a unit, e.g. '1 day'"
                    ),
                ));
            };
            let value = Expr::new(
                ExprKind::Literal(Literal::Int(n as i128)),
                Span::new(t.start, t.end),
            );
            return Ok(Expr::new(
                ExprKind::Interval {
                    value: Box::new(value),
                    unit,
                },
                self.span(start),
            ));
        }
        let (value, _) = self.operand(0)?;
        let Some(unit) = self.at_unit(0) else {
            return Err(self.expected(
                "an interval unit (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR)",
            ));
        };
        self.bump();
        Ok(Expr::new(
            ExprKind::Interval {
                value: Box::new(value),
                unit,
            },
            self.span(start),
        ))
    }

    /// A type after `AS` in CAST or after `::`, normalized: `Nullable(String)`,
    /// `DateTime64(6, 'UTC')`, `Tuple(a String, b Int64)`, `Enum8('a' = 1)`.
    fn type_name(&mut self) -> PResult<String> {
        self.deeper(|p| p.type_name_inner())
    }

    fn type_name_inner(&mut self) -> PResult<String> {
        let mut out = match &self.tok().kind {
            TokenKind::Word(w) => w.clone(),
            TokenKind::QuotedIdent(w) => ident(w),
            _ => return Err(self.expected("a type name")),
        };
        self.bump();
        if self.eat(&TokenKind::LParen) {
            out.push('(');
            let mut first = true;
            while !self.is(&TokenKind::RParen) {
                if !first {
                    out.push_str(", ");
                }
                first = false;
                let arg = self.type_arg()?;
                out.push_str(&arg);
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
            }
            self.expect(&TokenKind::RParen, "',' or ')' in the type")?;
            out.push(')');
        }
        Ok(out)
    }

    fn type_arg(&mut self) -> PResult<String> {
        let t = self.tok().clone();
        match &t.kind {
            TokenKind::Number(n) => {
                self.bump();
                Ok(n.clone())
            }
            TokenKind::Minus if matches!(self.nth(1).kind, TokenKind::Number(_)) => {
                self.bump();
                let TokenKind::Number(n) = self.bump().kind else {
                    unreachable!("checked above")
                };
                Ok(format!("-{n}"))
            }
            TokenKind::String(s) => {
                self.bump();
                let mut out = string(s);
                if self.eat(&TokenKind::Eq) {
                    let neg = self.eat(&TokenKind::Minus);
                    let TokenKind::Number(n) = &self.tok().kind else {
                        return Err(self.expected("a number"));
                    };
                    out = format!("{out} = {}{n}", if neg { "-" } else { "" });
                    self.bump();
                }
                Ok(out)
            }
            TokenKind::Word(_) | TokenKind::QuotedIdent(_)
                if matches!(
                    self.nth(1).kind,
                    TokenKind::Word(_) | TokenKind::QuotedIdent(_)
                ) =>
            {
                let name = match self.bump().kind {
                    TokenKind::Word(w) | TokenKind::QuotedIdent(w) => w,
                    _ => unreachable!("checked above"),
                };
                let ty = self.type_name()?;
                Ok(format!("{} {ty}", ident(&name)))
            }
            _ => self.type_name(),
        }
    }
}

/// Normalize a type written as a string (`CAST(x, 'Nullable(String)')`).
fn normalize_type(text: &str) -> PResult<String> {
    let mut p = Parser::new(text)?;
    let ty = p.type_name()?;
    p.expect_end("end of the type")?;
    Ok(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact S-expression of an expression's shape, for precedence and shape checks.
    fn sx(e: &Expr) -> String {
        let list = |items: &[Expr]| items.iter().map(sx).collect::<Vec<_>>().join(" ");
        match &e.kind {
            ExprKind::Literal(Literal::Null) => "NULL".into(),
            ExprKind::Literal(Literal::Bool(b)) => b.to_string(),
            ExprKind::Literal(Literal::Int(i)) => i.to_string(),
            ExprKind::Literal(Literal::Float(f)) => format!("{f:?}"),
            ExprKind::Literal(Literal::String(s)) => format!("'{s}'"),
            ExprKind::Field(parts) => parts.join("."),
            ExprKind::Star(None) => "*".into(),
            ExprKind::Star(Some(p)) => format!("{}.*", p.join(".")),
            ExprKind::Index { base, index } => format!("([] {} {})", sx(base), sx(index)),
            ExprKind::TupleElement { base, index } => format!("(. {} {index})", sx(base)),
            ExprKind::Call {
                name,
                params,
                args,
                distinct,
                over,
            } => {
                let mut s = format!("({name}");
                if let Some(p) = params {
                    s += &format!(" [{}]", list(p));
                }
                if *distinct {
                    s += " DISTINCT";
                }
                if !args.is_empty() {
                    s += &format!(" {}", list(args));
                }
                match over {
                    Some(Over::Named(n)) => s += &format!(" OVER {n}"),
                    Some(Over::Spec(_)) => s += " OVER (…)",
                    None => {}
                }
                s + ")"
            }
            ExprKind::Lambda { params, body } => {
                format!("(-> ({}) {})", params.join(" "), sx(body))
            }
            ExprKind::Binary { op, left, right } => {
                format!("({op:?} {} {})", sx(left), sx(right))
            }
            ExprKind::Unary { op, expr } => format!("({op:?} {})", sx(expr)),
            ExprKind::Between {
                expr,
                low,
                high,
                negated,
            } => format!(
                "({}Between {} {} {})",
                if *negated { "Not" } else { "" },
                sx(expr),
                sx(low),
                sx(high)
            ),
            ExprKind::In {
                expr,
                list: l,
                negated,
            } => {
                let rhs = match l {
                    InList::List(items) => format!("[{}]", list(items)),
                    InList::Subquery(_) => "(query)".into(),
                    InList::Expr(e) => sx(e),
                };
                format!(
                    "({}In {} {rhs})",
                    if *negated { "Not" } else { "" },
                    sx(expr)
                )
            }
            ExprKind::IsNull { expr, negated } => {
                format!(
                    "({} {})",
                    if *negated { "IsNotNull" } else { "IsNull" },
                    sx(expr)
                )
            }
            ExprKind::Case {
                operand,
                whens,
                else_,
            } => {
                let mut s = "(case".to_string();
                if let Some(o) = operand {
                    s += &format!(" {}", sx(o));
                }
                for (w, t) in whens {
                    s += &format!(" ({} {})", sx(w), sx(t));
                }
                if let Some(e) = else_ {
                    s += &format!(" (else {})", sx(e));
                }
                s + ")"
            }
            ExprKind::Cast { expr, ty } => format!("(cast {} {ty})", sx(expr)),
            ExprKind::Interval { value, unit } => format!("(interval {} {unit:?})", sx(value)),
            ExprKind::Ternary { cond, then, else_ } => {
                format!("(? {} {} {})", sx(cond), sx(then), sx(else_))
            }
            ExprKind::Array(items) => format!("[{}]", list(items)),
            ExprKind::Tuple(items) => format!("(tuple {})", list(items)),
            ExprKind::Alias { expr, name } => format!("(as {} {name})", sx(expr)),
            ExprKind::Placeholder(n) => format!("{{{n}}}"),
            ExprKind::Subquery(_) => "(subquery)".into(),
            ExprKind::Exists(_) => "(exists)".into(),
        }
    }

    fn e(text: &str) -> String {
        match parse_expr(text) {
            Ok(e) => sx(&e),
            Err(err) => panic!("{text}: {err}"),
        }
    }

    fn q(text: &str) -> Select {
        match parse_query(text) {
            Ok(Query::Select(s)) => *s,
            Ok(other) => panic!("{text}: not a single SELECT: {other:?}"),
            Err(err) => panic!("{text}: {err}"),
        }
    }

    fn err(text: &str) -> SyntaxError {
        match parse_query(text) {
            Ok(q) => panic!("{text}: parsed, expected an error: {q:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn precedence_follows_clickhouse() {
        let cases = [
            ("1 + 2 * 3", "(Add 1 (Mul 2 3))"),
            ("1 - 2 - 3", "(Sub (Sub 1 2) 3)"),
            ("a || b + c", "(Concat a (Add b c))"),
            ("a || b = c", "(Eq (Concat a b) c)"),
            ("a = b = c", "(Eq (Eq a b) c)"),
            ("1 = 1 IS NULL", "(IsNull (Eq 1 1))"),
            ("1 IS NULL = 0", "(Eq (IsNull 1) 0)"),
            ("a BETWEEN 1 AND 2 = 1", "(Between a 1 (Eq 2 1))"),
            ("a = b BETWEEN 1 AND 2", "(Between (Eq a b) 1 2)"),
            ("a BETWEEN b AND c AND d", "(And (Between a b c) d)"),
            (
                "a BETWEEN b AND c BETWEEN d AND e",
                "(Between (Between a b c) d e)",
            ),
            ("x NOT BETWEEN 1 AND 2", "(NotBetween x 1 2)"),
            ("NOT a IN b", "(Not (In a b))"),
            ("NOT a = b AND c", "(And (Not (Eq a b)) c)"),
            ("NOT a IS NULL", "(Not (IsNull a))"),
            ("a OR b AND c", "(Or a (And b c))"),
            ("a AND NOT b OR c", "(Or (And a (Not b)) c)"),
            ("a OR b ? c : d", "(? (Or a b) c d)"),
            ("a ? b : c ? d : e", "(? a b (? c d e))"),
            ("a ? b ? c : d : e", "(? a (? b c d) e)"),
            ("a ?? b = c", "(Coalesce a (Eq b c))"),
            ("a ?? b ?? c", "(Coalesce (Coalesce a b) c)"),
            ("NOT a ?? b", "(Not (Coalesce a b))"),
            ("-a.1", "(Neg (. a 1))"),
            ("-x * 2", "(Mul (Neg x) 2)"),
            ("-1::Int8", "(cast -1 Int8)"),
            ("a::String || 'x'", "(Concat (cast a String) 'x')"),
            ("a MOD 3", "(Mod a 3)"),
            (
                "x =~ 'a' AND y !~* 'b'",
                "(And (Regex x 'a') (NotIRegex y 'b'))",
            ),
            (
                "x NOT LIKE 'a%' OR y ILIKE 'b' ",
                "(Or (NotLike x 'a%') (ILike y 'b'))",
            ),
            ("a NOT ILIKE b", "(NotILike a b)"),
            ("a <> b", "(NotEq a b)"),
            ("a == b", "(Eq a b)"),
            ("x GLOBAL NOT IN (1, 2)", "(NotIn x [1 2])"),
            ("x IN (1)", "(In x [1])"),
            ("x IN ()", "(In x [])"),
            ("x IN ((1, 2))", "(In x [(tuple 1 2)])"),
            ("x IN tuple(1, 2)", "(In x (tuple 1 2))"),
            ("x IN cohort_ids", "(In x cohort_ids)"),
            ("x IN (SELECT 1)", "(In x (query))"),
            ("x IN ((SELECT 1) UNION ALL (SELECT 2))", "(In x (query))"),
            ("x NOT IN (SELECT 1) AND y", "(And (NotIn x (query)) y)"),
            ("a IS NOT NULL", "(IsNotNull a)"),
        ];
        for (text, want) in cases {
            assert_eq!(e(text), want, "{text}");
        }
    }

    #[test]
    fn literals() {
        let cases = [
            ("-1", "-1"),
            ("- 1", "-1"),
            ("+1", "1"),
            ("- -1", "(Neg -1)"),
            ("-(1)", "(Neg 1)"),
            ("1.5", "1.5"),
            (".5", "0.5"),
            ("1e3", "1000.0"),
            ("1.5e-3", "0.0015"),
            ("0x1F", "31"),
            ("0b101", "5"),
            ("-0x10", "-16"),
            ("inf", "inf"),
            ("-inf", "-inf"),
            ("INF", "inf"),
            ("18446744073709551615", "18446744073709551615"),
            ("18446744073709551616", "1.8446744073709552e19"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("-9223372036854775809", "-9.223372036854776e18"),
            ("NULL", "NULL"),
            ("null", "NULL"),
            ("True", "true"),
            ("FALSE", "false"),
            (r"'it''s \'x\' \n'", "'it's 'x' \n'"),
        ];
        for (text, want) in cases {
            assert_eq!(e(text), want, "{text}");
        }
        assert!(matches!(
            parse_expr("nan").unwrap().kind,
            ExprKind::Literal(Literal::Float(f)) if f.is_nan()
        ));
    }

    #[test]
    fn shapes() {
        let cases = [
            ("(1)", "1"),
            ("(1,)", "(tuple 1)"),
            ("(1, 'a')", "(tuple 1 'a')"),
            ("tuple(1, 'a')", "(tuple 1 'a')"),
            ("()", "(tuple )"),
            ("TUPLE(1)", "(TUPLE 1)"),
            ("[1, 2]", "[1 2]"),
            ("[]", "[]"),
            ("a[1]", "([] a 1)"),
            ("properties['$browser']", "([] properties '$browser')"),
            ("properties.$browser", "properties.$browser"),
            ("person.properties.email", "person.properties.email"),
            ("properties.a.b", "properties.a.b"),
            ("e.properties.from", "e.properties.from"),
            ("t.1", "(. t 1)"),
            ("t.1.2", "(. (. t 1) 2)"),
            ("(1, 2).1", "(. (tuple 1 2) 1)"),
            ("f(x).name", "([] (f x) 'name')"),
            ("a[1].b", "([] ([] a 1) 'b')"),
            ("t.*", "t.*"),
            ("*", "*"),
            ("$session_id", "$session_id"),
            ("`$col`", "$col"),
            ("\"my col\"", "my col"),
            ("`a``b`", "a`b"),
            ("{name}", "{name}"),
            ("count(*)", "(count *)"),
            ("count()", "(count)"),
            ("count(DISTINCT x)", "(count DISTINCT x)"),
            ("quantile(0.9)(x)", "(quantile [0.9] x)"),
            ("f(x,)", "(f x)"),
            ("toStartOfDay(timestamp)", "(toStartOfDay timestamp)"),
            ("left(s, 2)", "(left s 2)"),
            ("any(x)", "(any x)"),
            ("x -> x + 1", "(-> (x) (Add x 1))"),
            ("(x, y) -> x * y", "(-> (x y) (Mul x y))"),
            ("() -> 1", "(-> () 1)"),
            (
                "arrayMap(x -> x * 2, arr)",
                "(arrayMap (-> (x) (Mul x 2)) arr)",
            ),
            (
                "arrayFilter((x, i) -> i > 1, a, b)",
                "(arrayFilter (-> (x i) (Gt i 1)) a b)",
            ),
            ("a ? b : c", "(? a b c)"),
            ("CASE WHEN a THEN 1 ELSE 2 END", "(case (a 1) (else 2))"),
            (
                "CASE x WHEN 1 THEN 'a' WHEN 2 THEN 'b' END",
                "(case x (1 'a') (2 'b'))",
            ),
            ("CAST(x AS Nullable(String))", "(cast x Nullable(String))"),
            ("CAST(x, 'Nullable( String )')", "(cast x Nullable(String))"),
            ("x::DateTime64(6,'UTC')", "(cast x DateTime64(6, 'UTC'))"),
            ("x :: Array(Int64)", "(cast x Array(Int64))"),
            (
                "CAST(x AS Tuple(a String, b Nullable(Int64)))",
                "(cast x Tuple(a String, b Nullable(Int64)))",
            ),
            (
                "CAST(x AS Enum8('a' = 1, 'b' = -2))",
                "(cast x Enum8('a' = 1, 'b' = -2))",
            ),
            ("INTERVAL 1 DAY", "(interval 1 Day)"),
            ("INTERVAL 2 weeks", "(interval 2 Week)"),
            ("INTERVAL '1 day'", "(interval 1 Day)"),
            ("INTERVAL '3 Months'", "(interval 3 Month)"),
            ("INTERVAL '2' DAY", "(interval '2' Day)"),
            ("INTERVAL 1 + 1 HOUR", "(interval (Add 1 1) Hour)"),
            (
                "now() - INTERVAL 7 DAY + x",
                "(Add (Sub (now) (interval 7 Day)) x)",
            ),
            (
                "toStartOfInterval(t, INTERVAL 15 minute)",
                "(toStartOfInterval t (interval 15 Minute))",
            ),
            ("EXISTS (SELECT 1)", "(exists)"),
            ("exists(x)", "(exists x)"),
            ("(SELECT max(t) FROM e)", "(subquery)"),
            ("((SELECT 1) UNION ALL (SELECT 2))", "(subquery)"),
            ("((SELECT 1) + 1)", "(Add (subquery) 1)"),
            ("(1 + 2 AS x) * x", "(Mul (as (Add 1 2) x) x)"),
            ("f(a AS b)", "(f (as a b))"),
            ("x AS `from`", "(as x from)"),
            ("sum(x) OVER w", "(sum x OVER w)"),
            (
                "row_number() OVER (PARTITION BY a ORDER BY b)",
                "(row_number OVER (…))",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(e(text), want, "{text}");
        }
    }

    #[test]
    fn windows() {
        let s = q(
            "SELECT sum(x) OVER (w ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), \
                   lag(x, 1) OVER (PARTITION BY a, b ORDER BY t DESC RANGE BETWEEN 3 PRECEDING AND 2 FOLLOWING), \
                   first_value(x) OVER (ROWS UNBOUNDED FOLLOWING) \
                   FROM t WINDOW w AS (PARTITION BY person_id), w2 AS (w ORDER BY t) QUALIFY r = 1",
        );
        let ExprKind::Call {
            over: Some(Over::Spec(spec)),
            ..
        } = &s.columns[0].kind
        else {
            panic!("{:?}", s.columns[0])
        };
        assert_eq!(spec.base.as_deref(), Some("w"));
        assert_eq!(spec.order_by.len(), 1);
        let f = spec.frame.as_ref().unwrap();
        assert_eq!(f.units, FrameUnits::Rows);
        assert_eq!(f.start, FrameBound::UnboundedPreceding);
        assert_eq!(f.end, Some(FrameBound::CurrentRow));
        let ExprKind::Call {
            over: Some(Over::Spec(spec)),
            ..
        } = &s.columns[1].kind
        else {
            panic!()
        };
        assert_eq!(spec.base, None);
        assert_eq!(spec.partition_by.len(), 2);
        assert!(spec.order_by[0].desc);
        let f = spec.frame.as_ref().unwrap();
        assert_eq!(f.units, FrameUnits::Range);
        assert!(matches!(&f.start, FrameBound::Preceding(e) if sx(e) == "3"));
        assert!(matches!(&f.end, Some(FrameBound::Following(e)) if sx(e) == "2"));
        let ExprKind::Call {
            over: Some(Over::Spec(spec)),
            ..
        } = &s.columns[2].kind
        else {
            panic!()
        };
        let f = spec.frame.as_ref().unwrap();
        assert_eq!((&f.start, &f.end), (&FrameBound::UnboundedFollowing, &None));
        assert_eq!(s.window.len(), 2);
        assert_eq!(s.window[0].0, "person_id".replace("person_id", "w"));
        assert_eq!(s.window[1].1.base.as_deref(), Some("w"));
        assert!(s.qualify.is_some());
    }

    #[test]
    fn select_clauses() {
        let s = q(
            "WITH a AS (SELECT 1), 1 + 2 AS b, (SELECT 3) AS c, x AS (SELECT 4 UNION ALL SELECT 5) \
                   SELECT DISTINCT count() c, count() AS d, *, e.* FROM events AS e FINAL SAMPLE 0.1 OFFSET 0.5 \
                   LEFT ARRAY JOIN arr AS x, [1, 2] AS y PREWHERE a WHERE b GROUP BY a, b WITH ROLLUP WITH TOTALS \
                   HAVING c > 1 ORDER BY a ASC NULLS FIRST, b DESC NULLS LAST, c LIMIT 10 WITH TIES;",
        );
        assert_eq!(s.with.len(), 4);
        assert!(matches!(&s.with[0], Cte::Subquery { name, .. } if name == "a"));
        assert!(
            matches!(&s.with[1], Cte::Expr { name, expr, .. } if name == "b" && sx(expr) == "(Add 1 2)")
        );
        assert!(
            matches!(&s.with[2], Cte::Expr { name, expr, .. } if name == "c" && sx(expr) == "(subquery)")
        );
        assert!(matches!(&s.with[3], Cte::Subquery { name, query, .. }
            if name == "x" && matches!(**query, Query::SetOp { op: SetOp::UnionAll, .. })));
        assert!(s.distinct);
        let cols: Vec<_> = s.columns.iter().map(sx).collect();
        assert_eq!(cols, ["(as (count) c)", "(as (count) d)", "*", "e.*"]);
        let from = s.from.as_ref().unwrap();
        assert_eq!(from.first.source, TableSource::Table(vec!["events".into()]));
        assert_eq!(from.first.alias.as_deref(), Some("e"));
        assert!(from.first.is_final);
        let sample = from.first.sample.as_ref().unwrap();
        assert_eq!(sx(&sample.ratio), "0.1");
        assert_eq!(sample.offset.as_ref().map(sx).as_deref(), Some("0.5"));
        let aj = s.array_join.as_ref().unwrap();
        assert!(aj.left);
        assert_eq!(
            aj.exprs.iter().map(sx).collect::<Vec<_>>(),
            ["(as arr x)", "(as [1 2] y)"]
        );
        assert_eq!(s.prewhere.as_ref().map(sx).as_deref(), Some("a"));
        assert_eq!(s.where_.as_ref().map(sx).as_deref(), Some("b"));
        let g = s.group_by.as_ref().unwrap();
        assert_eq!(g.exprs.len(), 2);
        assert_eq!(g.modifier, GroupByModifier::Rollup);
        assert!(g.with_totals);
        assert!(s.having.is_some());
        let o: Vec<_> = s
            .order_by
            .iter()
            .map(|o| (sx(&o.expr), o.desc, o.nulls_first))
            .collect();
        assert_eq!(
            o,
            [
                ("a".to_string(), false, Some(true)),
                ("b".to_string(), true, Some(false)),
                ("c".to_string(), false, None)
            ]
        );
        assert_eq!(s.limit.as_ref().map(sx).as_deref(), Some("10"));
        assert!(s.with_ties);
        assert!(s.offset.is_none());

        let s = q("SELECT a FROM t GROUP BY CUBE(a, b)");
        assert_eq!(s.group_by.unwrap().modifier, GroupByModifier::Cube);
        let s = q("SELECT a FROM t GROUP BY ROLLUP(a, b)");
        let g = s.group_by.unwrap();
        assert_eq!((g.modifier, g.exprs.len()), (GroupByModifier::Rollup, 2));
        let s = q("SELECT a FROM t GROUP BY a WITH CUBE");
        assert_eq!(s.group_by.unwrap().modifier, GroupByModifier::Cube);
        // Trailing comma in the select list; a query may start with '('.
        assert_eq!(q("SELECT a, b, FROM t").columns.len(), 2);
        assert_eq!(q("((SELECT 1))").columns.len(), 1);
    }

    #[test]
    fn aliases_do_not_swallow_keywords() {
        let s = q(
            "SELECT a b, c FROM t x JOIN u y ON x.id = y.id WHERE 1 GROUP BY a ORDER BY b LIMIT 1",
        );
        assert_eq!(
            s.columns.iter().map(sx).collect::<Vec<_>>(),
            ["(as a b)", "c"]
        );
        let from = s.from.unwrap();
        assert_eq!(from.first.alias.as_deref(), Some("x"));
        assert_eq!(from.joins[0].table.alias.as_deref(), Some("y"));
        for kw in [
            "FROM t",
            "WHERE 1",
            "LIMIT 1",
            "ORDER BY a",
            "GROUP BY a",
            "UNION ALL SELECT 2",
            "HAVING 1",
        ] {
            let s = match parse_query(&format!("SELECT a {kw}")).unwrap() {
                Query::Select(s) => *s,
                Query::SetOp { left, .. } => match *left {
                    Query::Select(s) => *s,
                    _ => panic!(),
                },
            };
            assert_eq!(sx(&s.columns[0]), "a", "{kw}");
        }
        for kw in [
            "LEFT JOIN u ON 1",
            "FINAL",
            "SAMPLE 0.1",
            "ARRAY JOIN a",
            "WHERE 1",
            "INNER JOIN u USING a",
        ] {
            let s = q(&format!("SELECT 1 FROM t {kw}"));
            assert_eq!(s.from.unwrap().first.alias, None, "{kw}");
        }
        // Words that are not reserved make fine names.
        let s = q("SELECT toStartOfDay(timestamp) day, count() total FROM events GROUP BY day");
        assert_eq!(sx(&s.columns[0]), "(as (toStartOfDay timestamp) day)");
    }

    #[test]
    fn joins() {
        let s = q("SELECT 1 FROM a \
                   JOIN b ON a.x = b.x \
                   INNER JOIN c USING (x, y) \
                   LEFT OUTER JOIN d USING x \
                   RIGHT JOIN e ON 1 \
                   FULL OUTER JOIN f ON 1 \
                   CROSS JOIN g \
                   GLOBAL ANY LEFT JOIN h ON 1 \
                   LEFT SEMI JOIN i ON 1 \
                   ANTI RIGHT JOIN j ON 1 \
                   ASOF JOIN k ON 1 \
                   ALL INNER JOIN (SELECT 1) AS l ON 1, m, numbers(10) n, {tbl}");
        let joins = s.from.unwrap().joins;
        let got: Vec<_> = joins
            .iter()
            .map(|j| (j.kind, j.strictness, j.global, j.constraint.is_some()))
            .collect();
        use JoinKind::*;
        use JoinStrictness as S;
        assert_eq!(
            got,
            [
                (Inner, None, false, true),
                (Inner, None, false, true),
                (Left, None, false, true),
                (Right, None, false, true),
                (Full, None, false, true),
                (Cross, None, false, false),
                (Left, Some(S::Any), true, true),
                (Left, Some(S::Semi), false, true),
                (Right, Some(S::Anti), false, true),
                (Inner, Some(S::Asof), false, true),
                (Inner, Some(S::All), false, true),
                (Cross, None, false, false),
                (Cross, None, false, false),
                (Cross, None, false, false),
            ]
        );
        assert_eq!(
            joins[1].constraint,
            Some(JoinConstraint::Using(vec!["x".into(), "y".into()]))
        );
        assert_eq!(
            joins[2].constraint,
            Some(JoinConstraint::Using(vec!["x".into()]))
        );
        assert!(matches!(joins[10].table.source, TableSource::Subquery(_)));
        assert_eq!(joins[10].table.alias.as_deref(), Some("l"));
        assert!(
            matches!(&joins[12].table.source, TableSource::Function { name, args } if name == "numbers" && args.len() == 1)
        );
        assert_eq!(joins[12].table.alias.as_deref(), Some("n"));
        assert_eq!(
            joins[13].table.source,
            TableSource::Placeholder("tbl".into())
        );
        let s = q("SELECT 1 FROM db.events");
        assert_eq!(
            s.from.unwrap().first.source,
            TableSource::Table(vec!["db".into(), "events".into()])
        );
    }

    #[test]
    fn limits() {
        let lim = |text: &str| {
            let s = q(text);
            let by = s.limit_by.map(|l| {
                (
                    sx(&l.limit),
                    l.offset.as_ref().map(sx),
                    l.by.iter().map(sx).collect::<Vec<_>>().join(","),
                )
            });
            (
                by,
                s.limit.as_ref().map(sx),
                s.offset.as_ref().map(sx),
                s.with_ties,
            )
        };
        let some = |s: &str| Some(s.to_string());
        assert_eq!(lim("SELECT 1 LIMIT 10"), (None, some("10"), None, false));
        assert_eq!(
            lim("SELECT 1 LIMIT 10 OFFSET 5"),
            (None, some("10"), some("5"), false)
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 5, 10"),
            (None, some("10"), some("5"), false)
        );
        assert_eq!(lim("SELECT 1 OFFSET 5"), (None, None, some("5"), false));
        assert_eq!(
            lim("SELECT 1 LIMIT 10 WITH TIES"),
            (None, some("10"), None, true)
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 10 BY a, b"),
            (Some(("10".into(), None, "a,b".into())), None, None, false)
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 10 OFFSET 2 BY a"),
            (
                Some(("10".into(), some("2"), "a".into())),
                None,
                None,
                false
            )
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 2, 10 BY a LIMIT 100"),
            (
                Some(("10".into(), some("2"), "a".into())),
                some("100"),
                None,
                false
            )
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 1 BY a LIMIT 5 OFFSET 3"),
            (
                Some(("1".into(), None, "a".into())),
                some("5"),
                some("3"),
                false
            )
        );
        assert_eq!(
            lim("SELECT 1 LIMIT 1 BY a OFFSET 3"),
            (Some(("1".into(), None, "a".into())), None, some("3"), false)
        );
    }

    #[test]
    fn set_operations() {
        let shape = |text: &str| {
            fn go(q: &Query) -> String {
                match q {
                    Query::Select(s) => sx(&s.columns[0]),
                    Query::SetOp { op, left, right } => {
                        format!("({op:?} {} {})", go(left), go(right))
                    }
                }
            }
            go(&parse_query(text).unwrap())
        };
        assert_eq!(
            shape("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3"),
            "(UnionAll (UnionAll 1 2) 3)"
        );
        assert_eq!(shape("SELECT 1 UNION SELECT 2"), "(UnionDistinct 1 2)");
        assert_eq!(
            shape("SELECT 1 UNION DISTINCT SELECT 2"),
            "(UnionDistinct 1 2)"
        );
        assert_eq!(shape("SELECT 1 EXCEPT SELECT 2"), "(Except 1 2)");
        assert_eq!(shape("SELECT 1 EXCEPT DISTINCT SELECT 2"), "(Except 1 2)");
        assert_eq!(
            shape("SELECT 1 INTERSECT DISTINCT SELECT 2"),
            "(Intersect 1 2)"
        );
        assert_eq!(
            shape("SELECT 1 UNION ALL SELECT 2 INTERSECT SELECT 3"),
            "(UnionAll 1 (Intersect 2 3))"
        );
        assert_eq!(
            shape("SELECT 1 INTERSECT SELECT 2 EXCEPT SELECT 3"),
            "(Except (Intersect 1 2) 3)"
        );
        assert_eq!(
            shape("(SELECT 1) UNION ALL (SELECT 2 UNION ALL SELECT 3)"),
            "(UnionAll 1 (UnionAll 2 3))"
        );
        assert_eq!(
            shape("(SELECT 1 LIMIT 1) UNION ALL (SELECT 2)"),
            "(UnionAll 1 2)"
        );
        assert_eq!(shape("SELECT 1;"), "1");
    }

    #[test]
    fn error_positions() {
        let cases: &[(&str, usize, usize, &str)] = &[
            (
                "SELECT a FROM t WHERE",
                1,
                22,
                "expected an expression after 'WHERE', found end of input",
            ),
            (
                "SELECT FROM t",
                1,
                8,
                "expected an expression after 'SELECT', found 'FROM'",
            ),
            (
                "SELECT a,\n  b +\nFROM t",
                3,
                1,
                "expected an expression after '+', found 'FROM'",
            ),
            (
                "SELECT count( FROM t",
                1,
                15,
                "expected an expression after '(', found 'FROM'",
            ),
            (
                "SELECT a FROM t GROUP a",
                1,
                23,
                "expected BY after 'GROUP', found 'a'",
            ),
            (
                "SELECT (1, 2",
                1,
                13,
                "expected ',' or ')' after '2', found end of input",
            ),
            (
                "SELECT a FROM t LEFT JOIN u",
                1,
                28,
                "expected ON or USING after the joined table after 'u'",
            ),
            ("SELECT 'abc", 1, 8, "unterminated string literal"),
            (
                "SELECT a\nFROM t\nWHERE x = 1 2",
                3,
                13,
                "expected end of query, found '2'",
            ),
            (
                "SELECT CASE WHEN a THEN b",
                1,
                26,
                "expected WHEN, ELSE or END after 'b', found end of input",
            ),
            (
                "SELECT INTERVAL 1 FORTNIGHT",
                1,
                19,
                "expected an interval unit",
            ),
            (
                "SELECT x FROM t ORDER BY x NULLS",
                1,
                33,
                "expected FIRST or LAST",
            ),
            (
                "SELECT a FROM t SETTINGS max_threads = 1",
                1,
                17,
                "SETTINGS is not supported",
            ),
            ("SELECT # x", 1, 8, "unexpected character '#'"),
            (
                "SELECT 1 UNION ALL",
                1,
                19,
                "expected SELECT after 'ALL', found end of input",
            ),
            (
                "SELECT a[1 FROM t",
                1,
                12,
                "expected ']' after '1', found 'FROM'",
            ),
            ("SELECT é", 1, 8, "unexpected character 'é'"),
            ("SELECT f(x) OVER", 1, 17, "expected a window name or '('"),
            (
                "SELECT {1}",
                1,
                9,
                "expected a placeholder name after '{', found '1'",
            ),
            (
                "SELECT 1 FROM t CROSS JOIN u ON 1",
                1,
                30,
                "CROSS JOIN takes no ON or USING",
            ),
            (
                "SELECT x IS 1",
                1,
                13,
                "expected NULL after 'IS', found '1'",
            ),
            (
                "SELECT t.'a'",
                1,
                10,
                "expected a name or a tuple index after '.'",
            ),
            (
                "WITH x SELECT 1",
                1,
                8,
                "expected AS and a name for the WITH expression",
            ),
        ];
        for (text, line, column, msg) in cases {
            let e = err(text);
            assert!(e.message.contains(msg), "{text}: {e}");
            assert_eq!((e.line, e.column), (*line, *column), "{text}: {e}");
            assert!(e.start <= e.end && e.end <= text.len(), "{text}: {e:?}");
        }
        assert_eq!(
            err("SELECT a FROM t WHERE").to_string(),
            "Syntax error at line 1, column 22: expected an expression after 'WHERE', found end of input"
        );
        assert!(parse_expr("1 +").is_err());
        assert!(parse_expr("").is_err());
        assert!(parse_query("").is_err());
    }

    /// Nest `open` … `close` `n` times around `inner`.
    fn nest(open: &str, inner: &str, close: &str, n: usize) -> String {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let too_deep = |text: String| {
            let e = parse_query(&text).expect_err("too deep");
            assert!(e.message.contains("nested too deeply"), "{e}");
        };
        let n = 20_000;
        too_deep(format!("SELECT {}", nest("(", "1", ")", n)));
        too_deep(format!("SELECT {}", nest("[", "1", "]", n)));
        too_deep(format!("SELECT {}", nest("f(", "1", ")", n)));
        too_deep(format!("SELECT {}1", "- ".repeat(n)));
        too_deep(format!("SELECT {}1", "NOT ".repeat(n)));
        too_deep(format!("SELECT {}", nest("(SELECT ", "1", ")", n)));
        too_deep(nest("(", "SELECT 1", ")", n));
        too_deep(format!(
            "SELECT 1 FROM {}",
            nest("(SELECT * FROM ", "t", ")", n)
        ));
        too_deep(format!("SELECT {}", vec!["1"; n].join(" + ")));
        too_deep(format!("SELECT {}", vec!["a"; n].join(" AND ")));
        too_deep(vec!["SELECT 1"; n].join(" UNION ALL "));
        too_deep(format!("SELECT x{}", "[1]".repeat(n)));
        too_deep(format!("SELECT {}", "x -> ".repeat(n) + "1"));
        too_deep(format!("SELECT {}", "a ? b : ".repeat(n) + "c"));
        too_deep(format!(
            "SELECT CAST(x AS {})",
            nest("Array(", "Int8", ")", n)
        ));
        too_deep(format!(
            "SELECT {}",
            nest("CASE WHEN ", "1", " THEN 1 END", n)
        ));
        // Chains and nesting add up: deep operands inside a long chain are caught too.
        let inner = nest("(", "1", ")", 300);
        too_deep(format!("SELECT {}", vec![inner.as_str(); 300].join(" + ")));
        too_deep(format!(
            "SELECT {} + 1",
            nest("(", &vec!["1"; 300].join(" + "), ")", 300)
        ));
    }

    #[test]
    fn subqueries_nest_up_to_clickhouses_depth() {
        let depth = |n: usize| parse_query(&format!("SELECT {}", nest("(SELECT ", "1", ")", n)));
        assert!(depth(MAX_SUBQUERY_DEPTH - 1).is_ok());
        let e = depth(MAX_SUBQUERY_DEPTH).expect_err("one level too many");
        assert!(
            e.message.contains("subqueries are nested too deeply"),
            "{e}"
        );
        // Siblings are not nesting: a long UNION chain or many subqueries side by side parse.
        assert!(parse_query(&vec!["SELECT 1"; 300].join(" UNION ALL ")).is_ok());
        let side_by_side = vec!["(SELECT 1)"; 300].join(" + ");
        assert!(parse_query(&format!("SELECT {side_by_side}")).is_ok());
    }

    #[test]
    fn nesting_up_to_the_limit_parses() {
        // Run on a thread with the default 2 MiB stack, as tokio workers have.
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let ok = |text: String| {
                    let q = parse_query(&text).unwrap_or_else(|e| panic!("{e}"));
                    let printed = crate::print::query(&q);
                    assert_eq!(parse_query(&printed).unwrap(), q);
                };
                ok(format!("SELECT {}", nest("(", "1", ")", 500)));
                ok(format!("SELECT {}", nest("[", "1", "]", 500)));
                ok(format!("SELECT {}", nest("f(", "1", ")", 500)));
                ok(format!("SELECT {}", nest("(1 + ", "1", ")", 250)));
                ok(format!("SELECT {}", nest("-(", "1", ")", 250)));
                ok(format!("SELECT {}", vec!["1"; 500].join(" + ")));
                ok(format!(
                    "SELECT {}",
                    nest("(SELECT ", "1", ")", MAX_SUBQUERY_DEPTH - 1)
                ));
                ok(format!(
                    "SELECT 1 FROM {}",
                    nest("(SELECT * FROM ", "t", ")", MAX_SUBQUERY_DEPTH - 1)
                ));
                ok(format!(
                    "SELECT {}",
                    nest("CASE WHEN x THEN ", "1", " END", 250)
                ));
                ok(vec!["SELECT 1"; 500].join(" UNION ALL "));
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// A tiny deterministic generator (xorshift) for the fuzz test.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    #[test]
    fn fuzz_never_panics() {
        const SAMPLES: &[&str] = &[
            "SELECT count() AS c, properties.$browser FROM events e WHERE timestamp > now() - INTERVAL 7 DAY GROUP BY 2 ORDER BY c DESC LIMIT 10",
            "WITH x AS (SELECT 1 AS a) SELECT a, [1, 2][1], (1, 'b').2, t.* FROM x LEFT JOIN y USING (a) ARRAY JOIN arr AS z",
            "SELECT CASE WHEN a THEN 'x' ELSE 'y' END, CAST(b AS Nullable(String)), c::Int64, x -> x + 1, {p} FROM t LIMIT 1, 2 BY a",
            "(SELECT 1) UNION ALL (SELECT 2) INTERSECT SELECT quantile(0.9)(x) OVER (PARTITION BY a ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
            "SELECT a ? b : c, NOT a IN (SELECT 1), x BETWEEN 1 AND 2, 'it''s', `q``x`, \"dq\", 0x1F, 1e-3, -inf /* c */ -- d",
        ];
        const PIECES: &[&str] = &[
            "(", ")", "[", "]", "{", "}", ",", ".", "'", "`", "\"", "-", "--", "/*", "*/", "::",
            "?", ":", "->", "SELECT", "FROM", "AS", "NOT", "IN", "BETWEEN", "AND", "CASE", "END",
            "INTERVAL", "1", ".5", "0x", "\\", "é", " ", "\n", "UNION", "JOIN", "ON", "OVER",
            "LIMIT", "BY", "WITH", "e",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut parsed = 0;
        for sample in SAMPLES {
            assert!(parse_query(sample).is_ok(), "{sample}");
            for _ in 0..600 {
                let mut text: Vec<char> = sample.chars().collect();
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(text.len() + 1);
                    match rng.below(4) {
                        0 => text.truncate(at),
                        1 if at < text.len() => {
                            let end = (at + 1 + rng.below(8)).min(text.len());
                            text.drain(at..end);
                        }
                        2 => {
                            let piece = PIECES[rng.below(PIECES.len())];
                            for (i, c) in piece.chars().enumerate() {
                                text.insert(at + i, c);
                            }
                        }
                        _ => {
                            let from = rng.below(text.len());
                            let end = (from + rng.below(12)).min(text.len());
                            let chunk: Vec<char> = text[from..end].to_vec();
                            let at = at.min(text.len());
                            for (i, c) in chunk.into_iter().enumerate() {
                                text.insert(at + i, c);
                            }
                        }
                    }
                }
                let text: String = text.into_iter().collect();
                match parse_query(&text) {
                    Ok(q) => {
                        parsed += 1;
                        let printed = crate::print::query(&q);
                        let again = parse_query(&printed)
                            .unwrap_or_else(|e| panic!("{text}\n=> {printed}\n{e}"));
                        assert_eq!(crate::print::query(&again), printed, "{text}");
                    }
                    Err(e) => {
                        assert!(
                            e.start <= text.len() && e.line >= 1 && e.column >= 1,
                            "{text}: {e:?}"
                        );
                        let _ = e.to_string();
                    }
                }
                let _ = parse_expr(&text);
            }
        }
        assert!(
            parsed > 50,
            "the fuzz test should also produce valid queries ({parsed})"
        );
    }
}
