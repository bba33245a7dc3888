//! HogQL's parser: tokens to [`crate::ast`]. Pure (std only).
//!
//! A recursive-descent parser for queries and a Pratt parser for expressions, with
//! ClickHouse's operator priorities (see [`prec`]). `??` (PostHog's null coalescing) sits where
//! PostHog's grammar puts it: below comparisons and `IS NULL`, above `NOT`.
//!
//! Nesting is bounded: a tree deeper than [`MAX_DEPTH`] levels is a [`SyntaxError`], so
//! neither parsing nor later recursion over the tree can overflow the stack.

use crate::ast::*;
pub use crate::grammar::{
    MAX_DEPTH, MAX_SUBQUERY_DEPTH, WINDOW_WORDS, is_never_name, is_reserved, is_reserved_alias,
    prec,
};
use crate::grammar::{ident, string};
use crate::lexer::{Token, TokenKind, tokenize};
use crate::nesting::{Nested, Nesting, deeper};

pub use crate::lexer::SyntaxError;

/// Parse a whole query: one SELECT or a set operation; one trailing `;` is allowed.
pub fn parse_query(text: &str) -> Result<Query, SyntaxError> {
    parse_whole(text, |p| {
        let q = p.query()?;
        p.eat(&TokenKind::Semicolon);
        p.expect_end("end of query")?;
        Ok(q)
    })
}

/// Parse a single expression (aliases allowed).
pub fn parse_expr(text: &str) -> Result<Expr, SyntaxError> {
    parse_whole(text, |p| {
        let e = match p.bare_lambda_ahead() {
            Some(n) => p.lambda(n)?,
            None => p.expr()?,
        };
        p.expect_end("end of expression")?;
        Ok(e)
    })
}

/// Run `whole` over the tokens of `text`; its error goes through [`blame_unclosed`].
fn parse_whole<T>(text: &str, whole: fn(&mut Parser<'_>) -> PResult<T>) -> PResult<T> {
    let mut p = Parser::new(text, tokenize(text)?);
    match whole(&mut p) {
        Ok(v) => Ok(v),
        Err(e) => Err(blame_unclosed(text, p.toks, e, whole)),
    }
}

/// The closing token of an opening one.
fn closer(open: &TokenKind) -> Option<TokenKind> {
    match open {
        TokenKind::LParen => Some(TokenKind::RParen),
        TokenKind::LBracket => Some(TokenKind::RBracket),
        TokenKind::LBrace => Some(TokenKind::RBrace),
        _ => None,
    }
}

/// The brackets of `toks` that are never closed: for each, its index and the index where
/// its reach ends (a closer of an outer bracket, or the end).
fn unclosed_brackets(toks: &[Token]) -> Vec<(usize, usize)> {
    let mut open: Vec<usize> = Vec::new();
    let mut unclosed = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if closer(&t.kind).is_some() {
            open.push(i);
        } else if let Some(at) = open
            .iter()
            .rposition(|&o| closer(&toks[o].kind).as_ref() == Some(&t.kind))
        {
            // The brackets opened inside this pair and not closed before its closer.
            unclosed.extend(open.drain(at + 1..).map(|o| (o, i)));
            open.pop();
        }
    }
    unclosed.extend(open.into_iter().map(|o| (o, toks.len())));
    unclosed
}

/// A syntax error that brackets never closed caused is reported at the innermost of them,
/// as PostHog reports it: the parser only notices at a later token, often lines further
/// (`count(` at the end of a line, `FROM` on the next). The brackets left open at the error
/// are to blame when closing them right there gets the parse past the error; every other
/// error keeps its position. The message keeps what the parser expected, and where.
fn blame_unclosed<T>(
    text: &str,
    mut toks: Vec<Token>,
    err: SyntaxError,
    whole: fn(&mut Parser<'_>) -> PResult<T>,
) -> SyntaxError {
    let Some(at) = toks.iter().position(|t| t.start >= err.start) else {
        return err;
    };
    let mut open: Vec<usize> = unclosed_brackets(&toks)
        .into_iter()
        .filter(|&(o, reach)| o < at && at <= reach)
        .map(|(o, _)| o)
        .collect();
    // Innermost first.
    open.sort_unstable_by(|a, b| b.cmp(a));
    let Some(&innermost) = open.first() else {
        return err;
    };
    let opener = toks[innermost].clone();
    let start = toks[at].start;
    let closers: Vec<Token> = open
        .iter()
        .map(|&o| Token {
            kind: closer(&toks[o].kind).expect("an opening bracket"),
            start,
            end: start,
        })
        .collect();
    toks.splice(at..at, closers);
    let repaired = match whole(&mut Parser::new(text, toks)) {
        Ok(_) => true,
        Err(again) => again.start > err.start,
    };
    if !repaired {
        return err;
    }
    let bracket = &text[opener.start..opener.end];
    SyntaxError::at(
        text,
        opener.start,
        opener.end,
        format!(
            "'{bracket}' is never closed (at line {}, column {}: {})",
            err.line, err.column, err.message
        ),
    )
}

type PResult<T> = Result<T, SyntaxError>;

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    pos: usize,
    /// Current recursion depth, bounded by [`MAX_DEPTH`].
    nest: Nesting,
    /// The deepest absolute tree level reached by what was parsed since the last reset.
    hw: usize,
    /// SELECTs open around the current position.
    selects: usize,
    /// The INTERVAL token at this position names a column (`INTERVAL interval SECOND`).
    interval_name_at: Option<usize>,
    /// The next INTERVAL takes `'5 day'` as its whole value even before a unit.
    interval_string_first: bool,
    /// Readings of `INTERVAL INTERVAL …` tried so far, bounded against blow-up.
    interval_tries: u32,
}

impl Nested for Parser<'_> {
    fn nesting(&mut self) -> &mut Nesting {
        &mut self.nest
    }
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
    /// `.`, or `?.` (null-safe) when true.
    Dot(bool),
    /// `(` after an expression: a call on it.
    Call,
    /// `IGNORE NULLS` / `RESPECT NULLS`
    Nulls,
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

mod expr;
#[cfg(test)]
mod posthog_inputs;
mod query;
#[cfg(test)]
mod tests;

impl<'a> Parser<'a> {
    fn new(text: &'a str, toks: Vec<Token>) -> Self {
        Parser {
            text,
            toks,
            pos: 0,
            nest: Nesting::new(MAX_DEPTH),
            hw: 0,
            selects: 0,
            interval_name_at: None,
            interval_string_first: false,
            interval_tries: 0,
        }
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

    /// Run one level deeper (see [`crate::nesting`]): refused past [`MAX_DEPTH`], on a
    /// fresh stack every few levels.
    fn deeper<T: Send>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T> + Send) -> PResult<T> {
        let r = deeper(self, |p| {
            p.hw = p.hw.max(p.depth());
            f(p)
        });
        r.unwrap_or_else(|_| Err(self.too_deep()))
    }

    fn depth(&self) -> usize {
        self.nest.depth()
    }

    /// Run `f` and report how many tree levels below the current depth it produced.
    fn measured<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<(T, usize)> {
        let saved = self.hw;
        self.hw = self.depth();
        let r = f(self)?;
        let h = self.hw - self.depth();
        self.hw = saved.max(self.hw);
        Ok((r, h))
    }

    /// A chain (`a + b + c`, `q UNION q UNION q`) has grown to `height` levels here.
    fn check_height(&mut self, height: usize) -> PResult<()> {
        if self.depth() + height > MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.hw = self.hw.max(self.depth() + height);
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

    /// A word that may name a column, CTE or window where no clause can start: any word
    /// but those PostHog never takes as a name, or a quoted identifier.
    fn at_keyword_name(&self, n: usize) -> bool {
        match &self.nth(n).kind {
            TokenKind::Word(w) => !is_never_name(w),
            TokenKind::QuotedIdent(_) => true,
            _ => false,
        }
    }

    /// A name that may be a keyword (see [`Self::at_keyword_name`]).
    fn keyword_name(&mut self, what: &str) -> PResult<String> {
        if self.at_keyword_name(0) {
            match self.bump().kind {
                TokenKind::Word(w) | TokenKind::QuotedIdent(w) => Ok(w),
                _ => unreachable!("at_keyword_name checked the token"),
            }
        } else {
            Err(self.expected(what))
        }
    }

    /// PostHog's refusal of an unquoted reserved word as an alias (`SELECT 0 AS true`).
    fn check_alias(&self) -> PResult<()> {
        match &self.tok().kind {
            TokenKind::Word(w) if is_reserved_alias(w) => Err(self.err_here(format!(
                "\"{w}\" cannot be an alias or identifier, as it's a reserved keyword"
            ))),
            _ => Ok(()),
        }
    }

    /// An alias after `AS`: a name, a keyword other than the refused ones, or (when
    /// `strings`) a string literal.
    fn alias_name(&mut self, what: &str, strings: bool) -> PResult<String> {
        self.check_alias()?;
        self.any_name(what, strings)
    }

    /// A name where any word is fine (after `.` or `AS`); string literals too after AS.
    /// The words PostHog never takes as names are refused.
    fn any_name(&mut self, what: &str, strings: bool) -> PResult<String> {
        match &self.tok().kind {
            TokenKind::Word(w) if is_never_name(w) => Err(self.err_here(format!(
                "\"{w}\" cannot be an alias or identifier, as it's a reserved keyword"
            ))),
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
}
