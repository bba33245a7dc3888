//! Queries and their clauses: set operations, SELECT, WITH, FROM and joins, GROUP BY,
//! windows, ORDER BY and LIMIT.

use super::*;

/// The most PIVOT / UNPIVOT on one table (each nests the table one level deeper).
const MAX_PIVOTS: usize = 16;

impl Parser<'_> {
    // ---- queries ----

    pub(super) fn query(&mut self) -> PResult<Query> {
        self.deeper(|p| {
            let (first, h) = p.measured(|p| p.select_operand())?;
            let q = p.set_ops(first, h)?;
            // `(SELECT …) OFFSET n`, as PostHog's grammar reads it.
            if p.is_kw("OFFSET") && p.pos > 0 && p.toks[p.pos - 1].kind == TokenKind::RParen {
                p.bump();
                let offset = p.expr()?;
                return Ok(Query::Offset {
                    query: Box::new(q),
                    offset: Box::new(offset),
                });
            }
            Ok(q)
        })
    }

    /// Continue set operations after `first` (INTERSECT binds tighter than UNION/EXCEPT).
    pub(super) fn set_ops(&mut self, first: Query, height: usize) -> PResult<Query> {
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
        } else if self.is(&TokenKind::LBrace) {
            Ok(Query::Placeholder(self.placeholder()?))
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
            if s.from.is_none() {
                return Err(
                    self.err_here("Using ARRAY JOIN without a FROM clause is not permitted")
                );
            }
            s.array_join = Some(self.array_join()?);
            if self.array_join_ahead() {
                return Err(self.err_here("only one ARRAY JOIN clause is supported"));
            }
        }
        if self.eat_kw("PREWHERE") {
            s.prewhere = Some(self.expr()?);
            self.select_sample(&mut s, true)?;
        }
        if self.eat_kw("WHERE") {
            s.where_ = Some(self.expr()?);
            self.select_sample(&mut s, true)?;
        }
        if self.eat_kw("GROUP") {
            s.group_by = Some(self.group_by()?);
            self.select_sample(&mut s, false)?;
        } else if self.is_kw("WITH") && self.nth_kw(1, "TOTALS") {
            // `WITH TOTALS` without GROUP BY, as PostHog's grammar reads it.
            self.bump();
            self.bump();
            s.group_by = Some(GroupBy {
                exprs: Vec::new(),
                modifier: GroupByModifier::None,
                with_totals: true,
            });
        }
        if self.eat_kw("HAVING") {
            s.having = Some(self.expr()?);
            self.select_sample(&mut s, false)?;
        }
        if self.eat_kw("WINDOW") {
            s.window = self.window_clause()?;
            self.select_sample(&mut s, false)?;
        }
        if self.eat_kw("QUALIFY") {
            s.qualify = Some(self.expr()?);
            self.select_sample(&mut s, false)?;
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

    /// `[USING] SAMPLE ratio [OFFSET ratio]` after a clause (see [`Select::sample`]); without
    /// USING only after PREWHERE and WHERE (`bare`), as PostHog's grammar reads it.
    fn select_sample(&mut self, s: &mut Select, bare: bool) -> PResult<()> {
        let using = self.is_kw("USING") && self.nth_kw(1, "SAMPLE");
        if !(using || (bare && self.is_kw("SAMPLE"))) {
            return Ok(());
        }
        if s.sample.is_some() {
            return Err(self.err_here("only one SAMPLE clause is allowed"));
        }
        if using {
            self.bump();
        }
        self.bump();
        let ratio = self.bp(0)?;
        let offset = if self.eat_kw("OFFSET") {
            Some(self.bp(0)?)
        } else {
            None
        };
        s.sample = Some(Sample { ratio, offset });
        Ok(())
    }

    fn ctes(&mut self) -> PResult<Vec<Cte>> {
        let mut out = Vec::new();
        loop {
            let start = self.tok().start;
            // `name AS [NOT] MATERIALIZED (…)`: the hint changes how ClickHouse runs the CTE,
            // not its answer, so it is read and dropped.
            let hint = if self.nth_kw(2, "MATERIALIZED") {
                1
            } else if self.nth_kw(2, "NOT") && self.nth_kw(3, "MATERIALIZED") {
                2
            } else {
                0
            };
            if self.at_keyword_name(0)
                && self.nth_kw(1, "AS")
                && self.nth_is(2 + hint, &TokenKind::LParen)
            {
                self.check_alias()?;
                let name = self.keyword_name("a name")?;
                self.bump();
                for _ in 0..hint {
                    self.bump();
                }
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
                let name = self.alias_name("a name after AS", false)?;
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
        let last_from = self.last_from();
        loop {
            if out.is_empty() && self.is_kw("FROM") && self.at_name(1) {
                // `SELECT FROM t`: no column named `from` aliased `t` (PostHog refuses it too).
                return Err(self.expected("an expression"));
            }
            let mut e = self.expr()?;
            self.refuse_from_then_name(&e)?;
            if self.at_name(0) {
                self.check_alias()?;
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
            if self.clause_after_comma(last_from) {
                return Ok(out);
            }
        }
    }

    /// `SELECT a + FROM t`, `count( FROM t`: a column `from` followed by a name is a clause
    /// the expression before it left unfinished, not `from` aliased `t` (PostHog refuses it).
    pub(super) fn refuse_from_then_name(&self, e: &Expr) -> PResult<()> {
        let Some(at) = ends_with_from(e).filter(|_| self.at_name(0)) else {
            return Ok(());
        };
        let i = self.toks.iter().position(|t| t.start == at).unwrap_or(0);
        let prev = match i.checked_sub(1) {
            Some(p) => format!(" after '{}'", self.token_text(&self.toks[p])),
            None => String::new(),
        };
        let t = &self.toks[i];
        let msg = format!("expected an expression{prev}, found {}", self.describe(t));
        Err(self.err_at(t, msg))
    }

    /// After a comma in the select list: whether the list ends here (a trailing comma before
    /// a clause, `)` or the end) rather than going on with a column named by a keyword.
    /// A clause word opens its clause only when a body for it follows, as in PostHog's
    /// grammar: `select a, where b` is one column and a WHERE clause, `select a, where` two
    /// columns.
    fn clause_after_comma(&self, last_from: Option<usize>) -> bool {
        use TokenKind as T;
        let TokenKind::Word(w) = &self.tok().kind else {
            return matches!(self.tok().kind, T::Eof | T::RParen);
        };
        match w.to_ascii_uppercase().as_str() {
            "UNION" | "EXCEPT" | "INTERSECT" => true,
            "GROUP" | "ORDER" => self.nth_kw(1, "BY"),
            "WINDOW" => {
                self.at_keyword_name(1) && self.nth_kw(2, "AS") && self.nth_is(3, &T::LParen)
            }
            // Only the last FROM of the SELECT opens the clause; one before it is a column.
            "FROM" if last_from != Some(self.pos) => false,
            "FROM" => match &self.nth(1).kind {
                T::Word(_) | T::QuotedIdent(_) | T::LBrace => true,
                T::LParen => !self.nth_is(2, &T::RParen),
                _ => false,
            },
            // `format('{}', x)` is the function.
            "SETTINGS" | "FORMAT" => !self.nth_is(1, &T::LParen),
            "PREWHERE" | "WHERE" | "HAVING" | "QUALIFY" | "LIMIT" | "OFFSET" => self.body_starts(1),
            _ => false,
        }
    }

    /// The token index of the last FROM of this SELECT (outside brackets, before a set
    /// operator or the bracket that closes the SELECT). One scan per select list.
    fn last_from(&self) -> Option<usize> {
        use TokenKind as T;
        let mut depth = 0usize;
        let mut last = None;
        for (i, t) in self.toks.iter().enumerate().skip(self.pos) {
            match &t.kind {
                T::LParen | T::LBracket | T::LBrace => depth += 1,
                T::RParen | T::RBracket | T::RBrace if depth == 0 => break,
                T::RParen | T::RBracket | T::RBrace => depth -= 1,
                T::Word(w) if depth == 0 => {
                    if w.eq_ignore_ascii_case("FROM") {
                        last = Some(i);
                    } else if ["UNION", "EXCEPT", "INTERSECT"]
                        .iter()
                        .any(|k| w.eq_ignore_ascii_case(k))
                    {
                        break;
                    }
                }
                _ => {}
            }
        }
        last
    }

    /// Whether token `n` can begin a clause's expression (not an operator continuing a
    /// column named by the clause word).
    pub(super) fn body_starts(&self, n: usize) -> bool {
        use TokenKind as T;
        match &self.nth(n).kind {
            // Not an operator word, nor a word that opens the next clause.
            T::Word(w) => !matches!(
                w.to_ascii_uppercase().as_str(),
                "AND"
                    | "OR"
                    | "LIKE"
                    | "ILIKE"
                    | "IN"
                    | "IS"
                    | "BETWEEN"
                    | "MOD"
                    | "AS"
                    | "FROM"
                    | "ARRAY"
                    | "PREWHERE"
                    | "WHERE"
                    | "GROUP"
                    | "HAVING"
                    | "WINDOW"
                    | "QUALIFY"
                    | "ORDER"
                    | "LIMIT"
                    | "OFFSET"
                    | "UNION"
                    | "EXCEPT"
                    | "INTERSECT"
                    | "SETTINGS"
                    | "FORMAT"
            ),
            T::Number(_)
            | T::String(_)
            | T::QuotedIdent(_)
            | T::LBracket
            | T::LBrace
            | T::Minus
            | T::Plus => true,
            // `where ()` calls `where`; `where () -> 1` is a clause with a lambda.
            T::LParen => !self.nth_is(n + 1, &T::RParen) || self.nth_is(n + 2, &T::Arrow),
            // `where * r` multiplies `where`; `where * columns(…)`, `where * ?. x` are clauses.
            T::Star => match &self.nth(n + 1).kind {
                T::Word(w) => w.eq_ignore_ascii_case("COLUMNS"),
                T::Number(_)
                | T::String(_)
                | T::QuotedIdent(_)
                | T::LParen
                | T::LBracket
                | T::LBrace
                | T::Minus
                | T::Plus => false,
                _ => true,
            },
            _ => false,
        }
    }

    fn parse_from(&mut self) -> PResult<From> {
        let first = self.table_expr()?;
        self.join_chain(first)
    }

    /// The joins after `first`.
    fn join_chain(&mut self, mut first: TableExpr) -> PResult<From> {
        let mut joins = Vec::new();
        loop {
            let start = self.tok().start;
            // A join's ON or USING list may end in a comma (PostHog's grammar reads both
            // as expression lists): `… JOIN b ON x,` before the end of the FROM clause.
            if self.is(&TokenKind::Comma)
                && joins.last().is_some_and(|j: &Join| j.constraint.is_some())
                && (self.nth_is(1, &TokenKind::Eof) || self.nth_is(1, &TokenKind::RParen))
            {
                self.bump();
                break;
            }
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
            // `a JOIN b ON x PIVOT (…)`: the PIVOT takes the whole chain.
            if joins.last().is_some_and(|j: &Join| j.constraint.is_some())
                && (self.is_kw("PIVOT") || self.is_kw("UNPIVOT"))
                && self.nth_is(1, &TokenKind::LParen)
            {
                let start = first.span.start;
                let chain = From {
                    first,
                    joins: std::mem::take(&mut joins),
                };
                let (source, alias) =
                    self.pivots(start, TableSource::Joined(Box::new(chain)), None)?;
                first = TableExpr {
                    source,
                    alias,
                    sample: None,
                    is_final: false,
                    span: self.span(start),
                };
            }
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
            let parens = self.eat(&TokenKind::LParen);
            // Column names, the usual case; else any expressions (`USING 1`), read again.
            let save = self.pos;
            let mut names = Vec::new();
            let mut plain = true;
            loop {
                if !self.at_name(0) {
                    plain = false;
                    break;
                }
                names.push(self.name("a column name")?);
                if parens {
                    if !self.eat(&TokenKind::Comma) {
                        break;
                    }
                } else if !(self.is(&TokenKind::Comma) && self.at_name(1)) {
                    // `USING a, b`: a list, as ClickHouse and PostHog read it.
                    break;
                } else {
                    self.bump();
                }
            }
            let plain = plain && (!parens || self.is(&TokenKind::RParen));
            let constraint = if plain {
                JoinConstraint::Using(names)
            } else {
                self.pos = save;
                let mut exprs = Vec::new();
                loop {
                    exprs.push(self.expr()?);
                    if parens {
                        if !self.eat(&TokenKind::Comma) || self.is(&TokenKind::RParen) {
                            break;
                        }
                    } else if !(self.is(&TokenKind::Comma) && self.body_starts(1)) {
                        break;
                    } else {
                        self.bump();
                    }
                }
                JoinConstraint::UsingExprs(exprs)
            };
            if parens {
                self.expect(&TokenKind::RParen, "',' or ')' in the USING list")?;
            }
            Some(constraint)
        } else {
            // PostHog's grammar reads a JOIN without a constraint; the engine refuses it,
            // as ClickHouse does.
            None
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
            TokenKind::Lt if self.tag_ahead(0) => TableSource::Tag(Box::new(self.tag()?)),
            TokenKind::LParen if !self.select_ahead(0) => {
                // `(t)`, `(t PIVOT (…) FINAL)`: a table in parentheses is that table.
                self.bump();
                if !(self.at_keyword_name(0)
                    || self.is(&TokenKind::LBrace)
                    || self.is(&TokenKind::LParen)
                    || self.tag_ahead(0))
                {
                    return Err(self.expected("a subquery (SELECT …)"));
                }
                let chain = self.deeper(|p| {
                    let first = p.table_expr()?;
                    p.join_chain(first)
                })?;
                self.expect(&TokenKind::RParen, "')' after the table")?;
                if !chain.joins.is_empty() {
                    let source = TableSource::Joined(Box::new(chain));
                    let alias = self.table_alias()?;
                    let (source, alias) = self.pivots(start, source, alias)?;
                    return Ok(TableExpr {
                        source,
                        alias,
                        sample: None,
                        is_final: false,
                        span: self.span(start),
                    });
                }
                let t = chain.first;
                let plain = t.alias.is_none()
                    && !t.is_final
                    && t.sample.is_none()
                    && !matches!(t.source, TableSource::Pivot { .. });
                if !plain {
                    return Ok(t);
                }
                t.source
            }
            TokenKind::LParen => {
                self.bump();
                let q = self.query()?;
                self.expect(&TokenKind::RParen, "')' to close the subquery")?;
                TableSource::Subquery(Box::new(q))
            }
            // Where a table must stand, a keyword names one (`FROM final`), as in PostHog.
            _ if self.at_keyword_name(0) => {
                let name = self.keyword_name("a table name")?;
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
        let alias = self.table_alias()?;
        let (source, alias) = self.pivots(start, source, alias)?;
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

    /// The PIVOTs and UNPIVOTs on a table (each with its alias).
    fn pivots(
        &mut self,
        start: usize,
        mut source: TableSource,
        mut alias: Option<String>,
    ) -> PResult<(TableSource, Option<String>)> {
        let mut pivots = 0;
        while (self.is_kw("PIVOT") || self.is_kw("UNPIVOT")) && self.nth_is(1, &TokenKind::LParen) {
            pivots += 1;
            if pivots > MAX_PIVOTS {
                return Err(self.err_here(format!("more than {MAX_PIVOTS} PIVOTs on one table")));
            }
            let pivot = self.pivot()?;
            let base = TableExpr {
                source,
                alias,
                sample: None,
                is_final: false,
                span: self.span(start),
            };
            source = TableSource::Pivot {
                base: Box::new(base),
                pivot: Box::new(pivot),
            };
            alias = self.table_alias()?;
        }
        Ok((source, alias))
    }

    fn table_alias(&mut self) -> PResult<Option<String>> {
        Ok(if self.eat_kw("AS") {
            Some(self.alias_name("an alias after AS", false)?)
        } else if self.at_name(0) {
            self.check_alias()?;
            Some(self.name("an alias")?)
        } else {
            None
        })
    }

    /// `PIVOT (values FOR column IN (list))` or `UNPIVOT (…)`.
    fn pivot(&mut self) -> PResult<Pivot> {
        let unpivot = self.bump().is_word("UNPIVOT");
        self.expect(&TokenKind::LParen, "'('")?;
        let mut values = vec![self.expr()?];
        while self.eat(&TokenKind::Comma) {
            values.push(self.expr()?);
        }
        self.expect_kw("FOR")?;
        // `column IN (list)` reads as one IN expression; its last IN is PIVOT's (the column
        // may hold an IN of its own: `FOR n IN p IN (r)`).
        let e = self.expr_no_alias()?;
        let (column, list) = match e.kind {
            ExprKind::In {
                expr,
                list: InList::List(list),
                negated: false,
            } => (*expr, list),
            _ => return Err(self.expected("IN (…) after the PIVOT column")),
        };
        self.expect(&TokenKind::RParen, "')' to close PIVOT")?;
        Ok(Pivot {
            unpivot,
            values,
            column,
            list,
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
        // As PostHog: every array needs a name (`ARRAY JOIN arr AS a`).
        if let Some(e) = exprs
            .iter()
            .find(|e| !matches!(e.kind, ExprKind::Alias { .. }))
        {
            return Err(SyntaxError::at(
                self.text,
                e.span.start,
                e.span.end,
                "ARRAY JOIN arrays must have an alias",
            ));
        }
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
            let name = self.keyword_name("a window name")?;
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
    pub(super) fn window_spec(&mut self) -> PResult<WindowSpec> {
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
            let save = self.pos;
            let between = if self.eat_kw("BETWEEN") {
                let both = self.frame_bound().and_then(|s| {
                    self.expect_kw("AND")?;
                    Ok((s, Some(self.frame_bound()?)))
                });
                match both {
                    Ok(b) => Some(b),
                    // `RANGE between PRECEDING`: a column named `between` as the offset, as
                    // PostHog's grammar reads it.
                    Err(e) => {
                        self.pos = save;
                        if !self.nth_kw(1, "PRECEDING") && !self.nth_kw(1, "FOLLOWING") {
                            return Err(e);
                        }
                        None
                    }
                }
            } else {
                None
            };
            let (start, end) = match between {
                Some(b) => b,
                None => (self.frame_bound()?, None),
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

    pub(super) fn order_list(&mut self) -> PResult<Vec<OrderExpr>> {
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

    /// After LIMIT: `n`, `m, n`, `n OFFSET m`, with an optional `%` (a percentage) and an
    /// optional WITH TIES. The flags are (WITH TIES, %).
    fn limit_body(&mut self) -> PResult<(Expr, Option<Expr>, (bool, bool))> {
        let a = self.expr()?;
        if self.eat(&TokenKind::Comma) {
            let b = self.expr()?;
            let percent = self.eat(&TokenKind::Percent);
            let ties = self.eat_with_ties();
            return Ok((b, Some(a), (ties, percent)));
        }
        let percent = self.eat(&TokenKind::Percent);
        let mut ties = self.eat_with_ties();
        let offset = if self.eat_kw("OFFSET") {
            Some(self.expr()?)
        } else {
            None
        };
        if !ties {
            ties = self.eat_with_ties();
        }
        Ok((a, offset, (ties, percent)))
    }

    fn limits(&mut self, s: &mut Select) -> PResult<()> {
        if self.eat_kw("LIMIT") {
            let (limit, offset, (ties, percent)) = self.limit_body()?;
            if self.is_kw("BY") {
                if ties {
                    return Err(self.err_here("WITH TIES cannot be used with LIMIT … BY"));
                }
                if percent {
                    return Err(self.err_here("LIMIT … % cannot be used with LIMIT … BY"));
                }
                self.bump();
                let by = self.expr_list()?;
                s.limit_by = Some(LimitBy { limit, offset, by });
                if self.eat_kw("LIMIT") {
                    let (limit, offset, (ties, percent)) = self.limit_body()?;
                    if self.is_kw("BY") {
                        return Err(self.err_here("only one LIMIT … BY is supported"));
                    }
                    s.limit = Some(limit);
                    s.offset = offset;
                    s.with_ties = ties;
                    s.limit_percent = percent;
                }
            } else {
                s.limit = Some(limit);
                s.offset = offset;
                s.with_ties = ties;
                s.limit_percent = percent;
            }
        }
        if s.offset.is_none() && self.eat_kw("OFFSET") {
            s.offset = Some(self.expr()?);
        }
        Ok(())
    }
}

/// Where the rightmost operand of `e` starts, if it is a bare `from` column.
fn ends_with_from(e: &Expr) -> Option<usize> {
    match &e.kind {
        ExprKind::Field(parts) if parts.len() == 1 && parts[0].eq_ignore_ascii_case("FROM") => {
            Some(e.span.start)
        }
        ExprKind::Binary { right, .. } => ends_with_from(right),
        ExprKind::Unary { expr, .. } => ends_with_from(expr),
        _ => None,
    }
}
