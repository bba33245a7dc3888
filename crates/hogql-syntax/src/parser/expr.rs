//! Expressions: a Pratt parser with ClickHouse's priorities, calls, CASE, CAST,
//! INTERVAL, lambdas and type names.

use super::*;

impl Parser<'_> {
    // ---- expressions ----

    /// Comma-separated expressions (aliases allowed), at least one.
    pub(super) fn expr_list(&mut self) -> PResult<Vec<Expr>> {
        let mut out = vec![self.expr()?];
        while self.eat(&TokenKind::Comma) {
            out.push(self.expr()?);
        }
        Ok(out)
    }

    /// An expression with an optional `AS alias`.
    pub(super) fn expr(&mut self) -> PResult<Expr> {
        let e = self.expr_no_alias()?;
        if self.eat_kw("AS") {
            let name = self.alias_name("an alias after AS", true)?;
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
    pub(super) fn expr_no_alias(&mut self) -> PResult<Expr> {
        if let Some(n) = self.lambda_ahead() {
            return self.lambda(n);
        }
        self.bp(0)
    }

    /// A lambda's body: an expression, or a block of Hog statements in braces (what is not
    /// a `{placeholder}`), kept as written.
    fn lambda_body(&mut self) -> PResult<Expr> {
        if self.is(&TokenKind::LBrace) {
            let save = self.pos;
            if self.placeholder().is_ok() {
                self.pos = save;
            } else {
                self.pos = save;
                let start = self.tok().start;
                self.bump();
                let from = self.tok().start;
                // Statements, `;` between them: `return [expr]`, `let name [:= expr]`, or
                // an expression.
                while !self.is(&TokenKind::RBrace) {
                    if self.eat(&TokenKind::Semicolon) {
                        continue;
                    }
                    if self.eat_kw("RETURN") {
                        if !self.is(&TokenKind::Semicolon) && !self.is(&TokenKind::RBrace) {
                            self.deeper(|p| p.expr())?;
                        }
                    } else if self.eat_kw("LET") {
                        self.any_name("a variable name", false)?;
                        if self.eat(&TokenKind::Colon) {
                            self.expect(&TokenKind::Eq, "':=' in LET")?;
                            self.deeper(|p| p.expr())?;
                        }
                    } else {
                        self.deeper(|p| p.expr())?;
                    }
                    if !self.is(&TokenKind::RBrace) {
                        self.expect(&TokenKind::Semicolon, "';' or '}' after the statement")?;
                    }
                }
                let text = self.text[from..self.tok().start].trim().to_string();
                self.bump();
                return Ok(Expr::new(ExprKind::Block(text), self.span(start)));
            }
        }
        self.deeper(|p| p.expr_no_alias())
    }

    /// `x, y -> body` (parameters without parentheses), which PostHog's grammar reads where
    /// a whole expression stands: how many tokens make up the parameters and the arrow.
    pub(super) fn bare_lambda_ahead(&self) -> Option<usize> {
        let is_param = |t: &Token| matches!(t.kind, TokenKind::Word(_) | TokenKind::QuotedIdent(_));
        let mut i = 0;
        let mut names = 0;
        loop {
            if !is_param(self.nth(i)) {
                break;
            }
            names += 1;
            i += 1;
            if !self.nth_is(i, &TokenKind::Comma) {
                break;
            }
            i += 1;
        }
        (names >= 2 && self.nth_is(i, &TokenKind::Arrow)).then_some(i + 1)
    }

    /// A lambda whose parameters and arrow are the next `n` tokens: in parentheses or bare
    /// (see [`Self::lambda_ahead`] and [`Self::bare_lambda_ahead`]).
    pub(super) fn lambda(&mut self, n: usize) -> PResult<Expr> {
        let start = self.tok().start;
        let mut params = Vec::new();
        for _ in 0..n {
            if let TokenKind::Word(w) | TokenKind::QuotedIdent(w) = self.bump().kind {
                params.push(w);
            }
        }
        let body = self.lambda_body()?;
        Ok(Expr::new(
            ExprKind::Lambda {
                params,
                body: Box::new(body),
            },
            self.span(start),
        ))
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
            // `LIMIT n % WITH TIES`: a `%` that ends the LIMIT is its percent mark.
            T::Percent if self.percent_mark() => return None,
            T::Percent => (prec::MUL, Infix::Binary(BinaryOp::Mod, 1)),
            T::LBracket => (prec::POSTFIX, Infix::Index),
            T::DoubleColon => (prec::POSTFIX, Infix::Cast),
            T::Dot => (prec::POSTFIX, Infix::Dot(false)),
            T::LParen => (prec::POSTFIX, Infix::Call),
            T::Word(w)
                if (w.eq_ignore_ascii_case("IGNORE") || w.eq_ignore_ascii_case("RESPECT"))
                    && self.nth_kw(1, "NULLS") =>
            {
                (prec::POSTFIX, Infix::Nulls)
            }
            T::NullDot => (prec::POSTFIX, Infix::Dot(true)),
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

    /// Whether the `%` here ends a LIMIT (`LIMIT 10 %`, then the end, `)`, OFFSET, WITH
    /// TIES or a set operator) rather than taking a right operand.
    fn percent_mark(&self) -> bool {
        match &self.nth(1).kind {
            TokenKind::Eof | TokenKind::RParen | TokenKind::Semicolon => true,
            TokenKind::Word(w) => match w.to_ascii_uppercase().as_str() {
                "WITH" => self.nth_kw(2, "TIES"),
                "OFFSET" | "UNION" | "EXCEPT" | "INTERSECT" | "SETTINGS" | "FORMAT" | "BY" => true,
                _ => false,
            },
            _ => false,
        }
    }

    /// Parse an operand at binding power `min`, measuring its height.
    fn operand(&mut self, min: u8) -> PResult<(Expr, usize)> {
        self.measured(|p| p.bp(min))
    }

    /// The Pratt loop: an expression whose operators all bind at least as tightly as `min`.
    pub(super) fn bp(&mut self, min: u8) -> PResult<Expr> {
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
                    // `IN COHORT 5`, `IN COHORT 'name'` (a column named `cohort` stays one).
                    let cohort = self.is_kw("COHORT")
                        && matches!(
                            self.nth(1).kind,
                            TokenKind::Number(_) | TokenKind::String(_)
                        );
                    let (list, h) = if cohort {
                        self.bump();
                        let (e, h) = self.operand(prec::COMPARE + 1)?;
                        (InList::Cohort(Box::new(e)), h)
                    } else if self.is(&TokenKind::LParen) {
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
                        null_safe: false,
                    };
                    (kind, h)
                }
                Infix::Dot(true) if self.nth_is(1, &TokenKind::LBracket) => {
                    // `base?.[index]`
                    self.bump();
                    self.bump();
                    let (index, h) = self.measured(|p| p.expr())?;
                    self.expect(&TokenKind::RBracket, "']'")?;
                    let kind = ExprKind::Index {
                        base: Box::new(left),
                        index: Box::new(index),
                        null_safe: true,
                    };
                    (kind, h)
                }
                Infix::Nulls => {
                    let respect = self.bump().is_word("RESPECT");
                    self.bump();
                    let kind = ExprKind::NullsAction {
                        expr: Box::new(left),
                        respect,
                    };
                    (kind, 0)
                }
                Infix::Call => {
                    // `(x -> x * 2)(3)`, `a.b(1)`: a call on an expression.
                    self.bump();
                    let (args, h) = self.measured(|p| p.args_until_rparen("the call"))?;
                    let kind = ExprKind::ExprCall {
                        callee: Box::new(left),
                        args,
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
                Infix::Dot(null_safe) => {
                    self.bump();
                    if let TokenKind::Word(w) = &self.tok().kind
                        && is_never_name(w)
                    {
                        return Err(self.err_here(format!(
                            "\"{w}\" cannot be an alias or identifier, as it's a reserved keyword"
                        )));
                    }
                    let t = self.bump();
                    let kind = match (t.kind, left.kind) {
                        (TokenKind::Number(n), kind) => {
                            // A decimal index; a leading zero reads as octal in PostHog's
                            // grammar, which has no octal tuple index (`a.08` is fine).
                            let octal = n.len() > 1
                                && n.starts_with('0')
                                && n.bytes().all(|b| (b'0'..=b'7').contains(&b));
                            let index = match n.parse::<u64>() {
                                Ok(i) if !octal => i,
                                _ => return Err(self.err_at(&op_tok, "invalid tuple index")),
                            };
                            let base = Box::new(Expr::new(kind, left.span));
                            ExprKind::TupleElement {
                                base,
                                index,
                                null_safe,
                            }
                        }
                        (TokenKind::Star, ExprKind::Field(parts)) if !null_safe => {
                            self.star_modifiers(Some(parts), start, false)?.kind
                        }
                        (TokenKind::Star, _) => {
                            return Err(self.err_at(&op_tok, "'.*' must follow a table name"));
                        }
                        (
                            TokenKind::Word(name) | TokenKind::QuotedIdent(name),
                            ExprKind::Field(mut parts),
                        ) if !null_safe => {
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
                            ExprKind::Index {
                                base,
                                index,
                                null_safe,
                            }
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
        self.hw = self.hw.max(self.depth() + height);
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
            TokenKind::Positional(digits) => {
                // As PostHog's lexer: `#017` is `#` and an octal literal, which is no position.
                if digits.len() > 1
                    && digits.starts_with('0')
                    && digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
                {
                    return Err(self.err_at(
                        &t,
                        format!("invalid position '#{digits}': write it without leading zeros"),
                    ));
                }
                let n = digits
                    .parse::<u64>()
                    .map_err(|_| self.err_at(&t, format!("invalid position '#{digits}'")))?;
                self.bump();
                Ok(Expr::new(ExprKind::PositionalRef(n), self.span(start)))
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
                let save = self.pos;
                match self.placeholder() {
                    Ok(name) => Ok(Expr::new(ExprKind::Placeholder(name), self.span(start))),
                    Err(e) => {
                        // `{1 ? a : b}`: an expression in braces, as PostHog's grammar reads it.
                        self.pos = save;
                        self.bump();
                        if self.is(&TokenKind::RBrace) {
                            return Err(e);
                        }
                        let inner = self.deeper(|p| p.expr())?;
                        self.expect(&TokenKind::RBrace, "'}' to close the placeholder")?;
                        Ok(Expr::new(
                            ExprKind::PlaceholderExpr(Box::new(inner)),
                            self.span(start),
                        ))
                    }
                }
            }
            TokenKind::Star if self.nth_kw(1, "COLUMNS") && self.nth_is(2, &TokenKind::LParen) => {
                self.bump();
                let cols = self.deeper(|p| p.prefix())?;
                Ok(Expr::new(
                    ExprKind::Spread(Box::new(cols)),
                    self.span(start),
                ))
            }
            TokenKind::Star => {
                self.bump();
                self.star_modifiers(None, start, false)
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
            TokenKind::TemplateOpen => self.template(start),
            TokenKind::Lt if self.tag_ahead(0) => {
                let tag = self.tag()?;
                Ok(Expr::new(ExprKind::Tag(Box::new(tag)), self.span(start)))
            }
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
            // `not < 2`: a column named `not`, as PostHog reads it (`not <a/>` negates a tag).
            "NOT" if self.nth_is(1, &TokenKind::Lt) && !self.tag_ahead(1) => {
                self.bump();
                return Ok(Expr::new(ExprKind::Field(vec![w]), self.span(start)));
            }
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
            "COLUMNS" if call_follows && !self.nth_is(2, &TokenKind::RParen) => {
                return self.columns(start);
            }
            "TRIM"
                if call_follows
                    && ["LEADING", "TRAILING", "BOTH"]
                        .iter()
                        .any(|k| self.nth_kw(2, k))
                    && !matches!(self.nth(3).kind, TokenKind::RParen | TokenKind::Comma) =>
            {
                return self.trim_from(start);
            }
            "CAST" if call_follows => return self.cast(start),
            "INTERVAL" if self.interval_name_at != Some(self.pos) => {
                return self.interval(start);
            }
            "EXISTS" if call_follows && self.select_ahead(2) => {
                self.bump();
                self.bump();
                let q = self.query()?;
                self.expect(&TokenKind::RParen, "')' to close the EXISTS subquery")?;
                return Ok(Expr::new(ExprKind::Exists(Box::new(q)), self.span(start)));
            }
            _ => {}
        }
        // A keyword names a column where an expression is expected (`select a, where`), as
        // in PostHog's grammar, except the words it never takes as names.
        let set_op = ["UNION", "EXCEPT", "INTERSECT"].contains(&up.as_str());
        if is_never_name(&w) || set_op {
            return Err(self.expected_expr());
        }
        if call_follows {
            self.bump();
            return self.call(w, start, false);
        }
        self.bump();
        Ok(Expr::new(ExprKind::Field(vec![w]), self.span(start)))
    }

    /// `{name}`, or a dotted chain such as `{variables.limit}` or
    /// `{filters.dateRange.from}` (its parts joined by `.`).
    pub(super) fn placeholder(&mut self) -> PResult<String> {
        self.expect(&TokenKind::LBrace, "'{'")?;
        let mut name = String::new();
        loop {
            match &self.tok().kind {
                TokenKind::Word(w) | TokenKind::QuotedIdent(w) => name.push_str(w),
                _ => return Err(self.expected("a placeholder name")),
            }
            self.bump();
            if !self.eat(&TokenKind::Dot) {
                break;
            }
            name.push('.');
        }
        self.expect(&TokenKind::RBrace, "'}' to close the placeholder")?;
        Ok(name)
    }

    /// `( … )` in an expression: a subquery, a parenthesized expression or a tuple.
    fn paren_group(&mut self) -> PResult<Group> {
        self.expect(&TokenKind::LParen, "'('")?;
        if self.star_ahead(0) {
            // `(* EXCLUDE (a) REPLACE (x AS y))`: REPLACE is allowed in this wrapper.
            // Else read again as an expression (see `columns`).
            let save = self.pos;
            let e = self.star_form()?;
            if self.eat(&TokenKind::RParen) {
                return Ok(Group::Exprs(vec![e], false));
            }
            self.pos = save;
        }
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
            let h = self.hw.saturating_sub(self.depth());
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
    pub(super) fn args_until_rparen(&mut self, name: &str) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        while !self.is(&TokenKind::RParen) {
            let query = (self.is_kw("SELECT") || self.is_kw("WITH"))
                && !matches!(
                    self.nth(1).kind,
                    TokenKind::Dot | TokenKind::RParen | TokenKind::Comma | TokenKind::LParen
                );
            if query {
                // `sql(SELECT 1)`: a query as an argument, as PostHog reads it.
                let start = self.tok().start;
                let q = self.query()?;
                args.push(Expr::new(ExprKind::Subquery(Box::new(q)), self.span(start)));
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
                continue;
            }
            let e = self.expr()?;
            self.refuse_from_then_name(&e)?;
            args.push(e);
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
        // `f(x) WITHIN GROUP (ORDER BY …)`
        let within = if self.is_kw("WITHIN")
            && self.nth_kw(1, "GROUP")
            && self.nth_is(2, &TokenKind::LParen)
        {
            self.bump();
            self.bump();
            self.bump();
            if !(self.eat_kw("ORDER") && self.eat_kw("BY")) {
                return Err(self.expected("ORDER BY after WITHIN GROUP ("));
            }
            let order = self.order_list()?;
            self.expect(&TokenKind::RParen, "')' to close WITHIN GROUP")?;
            Some(order)
        } else {
            None
        };
        // `f(x) IGNORE NULLS OVER (…)`: the same tree as `f(x) OVER (…) IGNORE NULLS`.
        let nulls = if (self.is_kw("IGNORE") || self.is_kw("RESPECT")) && self.nth_kw(1, "NULLS") {
            let respect = self.bump().is_word("RESPECT");
            self.bump();
            Some(respect)
        } else {
            None
        };
        let over = if self.eat_kw("OVER") {
            if self.eat(&TokenKind::LParen) {
                let spec = self.window_spec()?;
                self.expect(&TokenKind::RParen, "')' to close the window")?;
                Some(Over::Spec(spec))
            } else if self.at_keyword_name(0) {
                Some(Over::Named(self.keyword_name("a window name")?))
            } else {
                return Err(self.expected("a window name or '('"));
            }
        } else {
            None
        };
        let span = self.span(start);
        let call = if !quoted && name == "tuple" && params.is_none() && !distinct && over.is_none()
        {
            Expr::new(ExprKind::Tuple(args), span)
        } else {
            Expr::new(
                ExprKind::Call {
                    name,
                    params,
                    args,
                    distinct,
                    over,
                },
                span,
            )
        };
        let call = match within {
            Some(order_by) => Expr::new(
                ExprKind::WithinGroup {
                    call: Box::new(call),
                    order_by,
                },
                span,
            ),
            None => call,
        };
        Ok(match nulls {
            Some(respect) => Expr::new(
                ExprKind::NullsAction {
                    expr: Box::new(call),
                    respect,
                },
                span,
            ),
            None => call,
        })
    }

    /// Whether a star form (`*`, `t.*`, `db.t.*`) starts at token `n`.
    fn star_ahead(&self, n: usize) -> bool {
        let mut i = n;
        loop {
            match &self.nth(i).kind {
                TokenKind::Star => return true,
                TokenKind::Word(_) | TokenKind::QuotedIdent(_)
                    if self.nth_is(i + 1, &TokenKind::Dot) =>
                {
                    i += 2
                }
                _ => return false,
            }
        }
    }

    /// A star form with EXCLUDE and REPLACE, inside `COLUMNS(…)` or `( … )`.
    fn star_form(&mut self) -> PResult<Expr> {
        let start = self.tok().start;
        let mut parts = Vec::new();
        while !self.is(&TokenKind::Star) {
            parts.push(self.any_name("a table name", false)?);
            self.expect(&TokenKind::Dot, "'.'")?;
        }
        self.bump();
        self.star_modifiers((!parts.is_empty()).then_some(parts), start, true)
    }

    /// `EXCLUDE (names)` and (when `replace_ok`) `REPLACE (expr AS name, …)` after a star.
    fn star_modifiers(
        &mut self,
        qual: Option<Vec<String>>,
        start: usize,
        replace_ok: bool,
    ) -> PResult<Expr> {
        let mut exclude = Vec::new();
        let mut replace = Vec::new();
        if self.eat_kw("EXCLUDE") {
            if self.eat(&TokenKind::LParen) {
                loop {
                    exclude.push(self.keyword_name("a column name")?);
                    if !self.eat(&TokenKind::Comma) || self.is(&TokenKind::RParen) {
                        break;
                    }
                }
                self.expect(&TokenKind::RParen, "',' or ')' in EXCLUDE")?;
            } else {
                exclude.push(self.keyword_name("a column name or '(' after EXCLUDE")?);
            }
        }
        if self.is_kw("REPLACE") && self.nth_is(1, &TokenKind::LParen) {
            if !replace_ok {
                return Err(self.err_here(
                    "REPLACE after a star needs COLUMNS(* REPLACE (…)) or (* REPLACE (…))",
                ));
            }
            self.bump();
            self.bump();
            loop {
                // `x + 1 AS x`; the value may carry an alias of its own (`a AS b AS c`).
                let e = self.expr()?;
                let (e, name) = if self.eat_kw("AS") {
                    (e, self.any_name("a column name after AS", false)?)
                } else if let ExprKind::Alias { expr, name } = e.kind {
                    (*expr, name)
                } else {
                    return Err(self.expected("AS and a column name"));
                };
                replace.push((e, name));
                if !self.eat(&TokenKind::Comma) || self.is(&TokenKind::RParen) {
                    break;
                }
            }
            self.expect(&TokenKind::RParen, "',' or ')' in REPLACE")?;
        }
        let kind = if exclude.is_empty() && replace.is_empty() {
            ExprKind::Star(qual)
        } else {
            ExprKind::Columns(Box::new(Columns {
                source: ColumnsSource::Star(qual),
                exclude,
                replace,
            }))
        };
        Ok(Expr::new(kind, self.span(start)))
    }

    /// `COLUMNS('regex')`, `COLUMNS(a, b)`, `COLUMNS(* EXCLUDE … REPLACE …)`.
    fn columns(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        self.bump();
        // `COLUMNS(t.*(x))`, `COLUMNS(a.* + 1)`: a list whose item continues the star; it is
        // read again as a list, where a REPLACE is refused before its expressions are read,
        // so no part of the text is read more than twice.
        let save = self.pos;
        let star = if self.star_ahead(0) {
            let e = self.star_form()?;
            if self.is(&TokenKind::RParen) {
                Some(e)
            } else {
                self.pos = save;
                None
            }
        } else {
            None
        };
        let columns = if let Some(star) = star {
            match star.kind {
                ExprKind::Columns(c) => *c,
                ExprKind::Star(q) => Columns {
                    source: ColumnsSource::Star(q),
                    exclude: Vec::new(),
                    replace: Vec::new(),
                },
                _ => unreachable!("star_form builds a star"),
            }
        } else if let TokenKind::String(re) = &self.tok().kind
            && self.nth_is(1, &TokenKind::RParen)
        {
            let re = re.clone();
            self.bump();
            Columns {
                source: ColumnsSource::Regex(re),
                exclude: Vec::new(),
                replace: Vec::new(),
            }
        } else {
            let mut list = vec![self.expr()?];
            while self.eat(&TokenKind::Comma) && !self.is(&TokenKind::RParen) {
                list.push(self.expr()?);
            }
            Columns {
                source: ColumnsSource::List(list),
                exclude: Vec::new(),
                replace: Vec::new(),
            }
        };
        self.expect(&TokenKind::RParen, "')' to close COLUMNS")?;
        Ok(Expr::new(
            ExprKind::Columns(Box::new(columns)),
            self.span(start),
        ))
    }

    /// `f'text {expr} text'`, as PostHog reads it: `concat('text ', expr, ' text')`; one
    /// piece alone is that piece, none is `''`.
    fn template(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        let mut pieces = Vec::new();
        loop {
            let t = self.bump();
            match t.kind {
                TokenKind::TemplateText(s) => pieces.push(Expr::new(
                    ExprKind::Literal(Literal::String(s)),
                    Span::new(t.start, t.end),
                )),
                TokenKind::TemplateExprOpen => {
                    let e = self.deeper(|p| p.expr())?;
                    self.expect(&TokenKind::TemplateExprClose, "'}' in the template string")?;
                    pieces.push(e);
                }
                TokenKind::TemplateClose => break,
                _ => {
                    self.pos -= 1;
                    return Err(self.expected("the rest of the template string"));
                }
            }
        }
        let span = self.span(start);
        Ok(match pieces.len() {
            0 => Expr::new(ExprKind::Literal(Literal::String(String::new())), span),
            1 => pieces.remove(0),
            _ => Expr::new(
                ExprKind::Call {
                    name: "concat".into(),
                    params: None,
                    args: pieces,
                    distinct: false,
                    over: None,
                },
                span,
            ),
        })
    }

    /// `trim(LEADING|TRAILING|BOTH chars FROM s)`: `trimLeft(s, chars)`, `trimRight(s, chars)`,
    /// `trim(s, chars)`, as PostHog reads it.
    fn trim_from(&mut self, start: usize) -> PResult<Expr> {
        self.bump();
        self.bump();
        let name = match self.bump().kind {
            TokenKind::Word(w) if w.eq_ignore_ascii_case("LEADING") => "trimLeft",
            TokenKind::Word(w) if w.eq_ignore_ascii_case("TRAILING") => "trimRight",
            _ => "trim",
        };
        let chars = self.expr_no_alias()?;
        self.expect_kw("FROM")?;
        let s = self.expr_no_alias()?;
        self.expect(&TokenKind::RParen, "')' to close trim")?;
        Ok(Expr::new(
            ExprKind::Call {
                name: name.to_string(),
                params: None,
                args: vec![s, chars],
                distinct: false,
                over: None,
            },
            self.span(start),
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
        let string_first = std::mem::take(&mut self.interval_string_first);
        let t = self.tok().clone();
        if let TokenKind::String(s) = &t.kind
            && (string_first || self.at_unit(1).is_none())
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
        let value = if self.is_kw("INTERVAL") {
            self.interval_value()?
        } else {
            self.operand(0)?.0
        };
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

    /// The value of `INTERVAL INTERVAL …`, read as PostHog's grammar reads it: a nested
    /// interval followed by the outer unit (`INTERVAL INTERVAL '5 day' MONTH`), else a column
    /// or function named `interval` (`INTERVAL interval - x SECOND`, `INTERVAL interval(1)
    /// SECOND`).
    fn interval_value(&mut self) -> PResult<Expr> {
        let save = self.pos;
        for string_first in [false, true] {
            if self.interval_tries >= 64 {
                break;
            }
            self.interval_tries += 1;
            self.pos = save;
            self.interval_string_first = string_first;
            let nested = self.operand(0);
            self.interval_string_first = false;
            if let Ok((v, _)) = nested
                && self.at_unit(0).is_some()
            {
                return Ok(v);
            }
        }
        self.pos = save;
        self.interval_name_at = Some(save);
        let value = self.operand(0);
        self.interval_name_at = None;
        Ok(value?.0)
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
            TokenKind::Word(_) | TokenKind::QuotedIdent(_) => self.type_name(),
            // Any other parameter is an expression in PostHog's grammar (`d(#1)`, `d([1])`),
            // but for a parenthesized one (`d(())` is refused).
            TokenKind::LParen => Err(self.expected("a type")),
            _ => {
                let e = self.expr()?;
                Ok(crate::print::expr(&e))
            }
        }
    }
}

/// Normalize a type written as a string (`CAST(x, 'Nullable(String)')`).
fn normalize_type(text: &str) -> PResult<String> {
    let mut p = Parser::new(text, tokenize(text)?);
    let ty = p.type_name()?;
    p.expect_end("end of the type")?;
    Ok(ty)
}

impl Parser<'_> {
    /// Whether a HogQLX tag (`<name …`) starts at token `n`: `<`, a name, then `/`, `>`
    /// or an attribute name.
    pub(super) fn tag_ahead(&self, n: usize) -> bool {
        self.nth_is(n, &TokenKind::Lt)
            && self.at_keyword_name(n + 1)
            && (matches!(self.nth(n + 2).kind, TokenKind::Slash | TokenKind::Gt)
                || self.at_keyword_name(n + 2))
    }

    /// A HogQLX tag; the current token is its `<`.
    pub(super) fn tag(&mut self) -> PResult<Tag> {
        self.deeper(|p| p.tag_inner())
    }

    fn tag_inner(&mut self) -> PResult<Tag> {
        self.expect(&TokenKind::Lt, "'<'")?;
        let name = self.keyword_name("a tag name")?;
        let mut attrs = Vec::new();
        while self.at_keyword_name(0) {
            let attr = self.keyword_name("an attribute name")?;
            let value = if self.eat(&TokenKind::Eq) {
                match self.tok().kind.clone() {
                    TokenKind::String(s) => {
                        self.bump();
                        TagValue::String(s)
                    }
                    TokenKind::LBrace => {
                        self.bump();
                        let e = self.expr()?;
                        self.expect(&TokenKind::RBrace, "'}' after the attribute's value")?;
                        TagValue::Expr(e)
                    }
                    _ => return Err(self.expected("a string or {expression} as the value")),
                }
            } else {
                TagValue::Flag
            };
            attrs.push((attr, value));
        }
        if self.eat(&TokenKind::Slash) {
            self.expect(&TokenKind::Gt, "'>' to close the tag")?;
            return Ok(Tag {
                name,
                attrs,
                children: vec![],
            });
        }
        self.expect(&TokenKind::Gt, "'>' or '/>' to close the tag")?;
        let mut children = Vec::new();
        // Text is kept as written (PostHog's), except text of whitespace alone across a line
        // break, which is indentation.
        let text_child = |children: &mut Vec<TagChild>, text: &str| {
            let indentation = text.trim().is_empty() && text.contains(['\n', '\r']);
            if !text.is_empty() && !indentation {
                children.push(TagChild::Text(text.to_string()));
            }
        };
        // Where the text since the last child began.
        let mut text_from = self.prev_end();
        loop {
            if matches!(self.tok().kind, TokenKind::Lt | TokenKind::LBrace) {
                text_child(&mut children, &self.text[text_from..self.tok().start]);
            }
            match self.tok().kind.clone() {
                TokenKind::Lt if self.nth_is(1, &TokenKind::Slash) => {
                    self.bump();
                    self.bump();
                    let t = self.tok().clone();
                    let close = self.keyword_name("the tag's name")?;
                    if close != name {
                        return Err(self.err_at(&t, format!("</{close}> does not close <{name}>")));
                    }
                    self.expect(&TokenKind::Gt, "'>' to close the tag")?;
                    break;
                }
                TokenKind::Lt => {
                    children.push(TagChild::Tag(self.tag()?));
                    text_from = self.prev_end();
                }
                TokenKind::LBrace => {
                    self.bump();
                    let e = self.expr()?;
                    self.expect(&TokenKind::RBrace, "'}' after the expression")?;
                    children.push(TagChild::Expr(e));
                    text_from = self.prev_end();
                }
                TokenKind::Eof => return Err(self.expected(&format!("</{name}>"))),
                _ => {
                    // Text: everything up to the next tag or `{` (taken there).
                    while !matches!(
                        self.tok().kind,
                        TokenKind::Lt | TokenKind::LBrace | TokenKind::Eof
                    ) {
                        self.bump();
                    }
                }
            }
        }
        if !children.is_empty() && attrs.iter().any(|(a, _)| a == "children") {
            return Err(self.err_here(format!(
                "<{name}> has both children and a `children` attribute"
            )));
        }
        Ok(Tag {
            name,
            attrs,
            children,
        })
    }
}
