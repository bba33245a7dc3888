//! Filters: null-safe comparisons that keep pruning, implied time ranges, literal coercion.

use super::*;

impl Planner<'_> {
    /// A condition in a filtering position (WHERE, HAVING, ON, QUALIFY): a NULL result and
    /// false mean the same there, so comparisons keep their plain form (which prunes files
    /// and row groups); elsewhere they are null-safe.
    pub(super) fn predicate(&self, e: &ast::Expr, scope: &Scope<'_>, join: bool) -> PResult<Expr> {
        match &e.kind {
            ExprKind::Binary {
                op: BinaryOp::And,
                left,
                right,
            } => Ok(self
                .predicate(left, scope, join)?
                .and(self.predicate(right, scope, join)?)),
            ExprKind::Binary {
                op: BinaryOp::Or,
                left,
                right,
            } => Ok(self
                .predicate(left, scope, join)?
                .or(self.predicate(right, scope, join)?)),
            ExprKind::Binary { op, left, right }
                if matches!(
                    op,
                    BinaryOp::Eq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq
                ) =>
            {
                let (l, r) = self.comparison_operands(left, right, scope)?;
                // `NULL = NULL` is true in HogQL; outside joins keep that when either side is
                // a NULL literal.
                if !join
                    && *op == BinaryOp::Eq
                    && (is_null_lit(&l)
                        || is_null_lit(&r)
                        || (l.nullable(&scope.schema).map_err(df)?
                            && r.nullable(&scope.schema).map_err(df)?))
                {
                    return self.expr(e, scope);
                }
                let (l0, r0) = (l.clone(), r.clone());
                let cmp = Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(l),
                    binary_operator(*op),
                    Box::new(r),
                ));
                let cmp = ieee_float_cmp(cmp, *op, &l0, &r0, &scope.schema)?;
                Ok(match self.implied_range(*op, left, right, scope)? {
                    Some(range) => cmp.and(range),
                    None => cmp,
                })
            }
            ExprKind::Alias { expr, name } => {
                scope.expanding.borrow_mut().push(name.clone());
                let r = self.predicate(expr, scope, join);
                scope.expanding.borrow_mut().pop();
                r
            }
            ExprKind::In {
                expr,
                list: ast::InList::Subquery(q),
                negated,
            } => {
                // A filter takes the subquery as a semi/anti join.
                let (v, plan) = self.in_subquery_operands(expr, q, scope)?;
                let nullable = v.nullable(&scope.schema).map_err(df)?;
                Ok(if *negated {
                    let not_in = datafusion::logical_expr::expr_fn::not_in_subquery(
                        v.clone(),
                        Arc::new(plan),
                    );
                    if nullable {
                        v.is_null().or(not_in)
                    } else {
                        not_in
                    }
                } else {
                    datafusion::logical_expr::expr_fn::in_subquery(v, Arc::new(plan))
                })
            }
            _ => {
                let v = self.expr(e, scope)?;
                to_bool(v, &scope.schema)
            }
        }
    }

    /// `toDate(t) >= '2024-03-01'` (also `toStartOfDay`, any comparison, either side) says
    /// `t >= '2024-03-01 00:00:00'`: that range on the DateTime column itself is added to the
    /// filter so files and row groups are pruned by `t`'s statistics; the original comparison
    /// stays, so the answer is unchanged. Only for a date literal (a day boundary) and a
    /// DateTime or Date argument.
    pub(super) fn implied_range(
        &self,
        op: BinaryOp,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
    ) -> PResult<Option<Expr>> {
        let flip = |op: BinaryOp| match op {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            o => o,
        };
        let (call, lit_side, op) = match (&left.kind, &right.kind) {
            (ExprKind::Call { .. }, ExprKind::Literal(Literal::String(_))) => (left, right, op),
            (ExprKind::Literal(Literal::String(_)), ExprKind::Call { .. }) => {
                (right, left, flip(op))
            }
            _ => return Ok(None),
        };
        let (
            ExprKind::Call {
                name,
                params: None,
                args,
                distinct: false,
                over: None,
            },
            ExprKind::Literal(Literal::String(day)),
        ) = (&call.kind, &lit_side.kind)
        else {
            return Ok(None);
        };
        if !matches!(name.as_str(), "toDate" | "toStartOfDay") || args.len() != 1 {
            return Ok(None);
        }
        let day = day.trim();
        let day = day.strip_suffix(" 00:00:00").unwrap_or(day);
        let Ok(d) = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d") else {
            return Ok(None);
        };
        let arg = &args[0];
        let t = self.expr(arg, scope)?.get_type(&scope.schema).map_err(df)?;
        if !matches!(t, DataType::Timestamp(..) | DataType::Date32) {
            return Ok(None);
        }
        let bound = |op: BinaryOp, d: chrono::NaiveDate| -> PResult<Expr> {
            let at = ast::Expr {
                kind: ExprKind::Literal(Literal::String(format!("{d} 00:00:00"))),
                span: lit_side.span,
            };
            let (l, r) = self.comparison_operands(arg, &at, scope)?;
            Ok(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(l),
                binary_operator(op),
                Box::new(r),
            )))
        };
        let Some(next) = d.succ_opt() else {
            return Ok(None);
        };
        Ok(Some(match op {
            BinaryOp::GtEq => bound(BinaryOp::GtEq, d)?,
            BinaryOp::Gt => bound(BinaryOp::GtEq, next)?,
            BinaryOp::Lt => bound(BinaryOp::Lt, d)?,
            BinaryOp::LtEq => bound(BinaryOp::Lt, next)?,
            BinaryOp::Eq => bound(BinaryOp::GtEq, d)?.and(bound(BinaryOp::Lt, next)?),
            _ => return Ok(None),
        }))
    }

    pub(super) fn comparison_operands(
        &self,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
    ) -> PResult<(Expr, Expr)> {
        let l = self.expr(left, scope)?;
        let r = self.expr(right, scope)?;
        let lt = l.get_type(&scope.schema).map_err(df)?;
        let rt = r.get_type(&scope.schema).map_err(df)?;
        // A string compared with a DateTime is read in the project's time zone.
        let l = self.coerce_literal_to(&l, &rt)?.unwrap_or(l);
        let r = self.coerce_literal_to(&r, &lt)?.unwrap_or(r);
        let mut both = self.uuid_agree(vec![l, r], &scope.schema)?.into_iter();
        Ok((both.next().expect("two"), both.next().expect("two")))
    }

    /// A string literal compared with a date or DateTime becomes one (in the project zone);
    /// with a Bool or a number, it becomes that.
    pub(super) fn coerce_literal_to(&self, e: &Expr, other: &DataType) -> PResult<Option<Expr>> {
        let Expr::Literal(ScalarValue::Utf8(Some(s)), _) = e else {
            return Ok(None);
        };
        match other {
            // A UUID in any spelling; other text is compared as text.
            t if ids::is_uuid(t) => Ok(crate::storage::ids::parse(s.trim())
                .map(|b| Expr::Literal(ScalarValue::FixedSizeBinary(16, Some(b.to_vec())), None))),
            DataType::Timestamp(unit, tz) => {
                let tz_name = tz.as_deref().unwrap_or(&self.ctx.timezone);
                let Some(instant) = parse_datetime_in(s, tz_name) else {
                    return Ok(None);
                };
                let v = match unit {
                    TimeUnit::Second => {
                        ScalarValue::TimestampSecond(Some(instant.timestamp()), tz.clone())
                    }
                    TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(
                        Some(instant.timestamp_millis()),
                        tz.clone(),
                    ),
                    TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(
                        Some(instant.timestamp_micros()),
                        tz.clone(),
                    ),
                    TimeUnit::Nanosecond => {
                        ScalarValue::TimestampNanosecond(instant.timestamp_nanos_opt(), tz.clone())
                    }
                };
                Ok(Some(Expr::Literal(v, None)))
            }
            DataType::Date32 => {
                let Ok(d) = chrono::NaiveDate::parse_from_str(s.get(..10).unwrap_or(s), "%Y-%m-%d")
                else {
                    return Ok(None);
                };
                let days =
                    (d - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days();
                // As ClickHouse reads text as a Date: the nearest end outside its range.
                let days = crate::hogql::functions::ch_date(
                    days,
                    crate::hogql::functions::DateRange::Clamp,
                );
                Ok(Some(Expr::Literal(ScalarValue::Date32(Some(days)), None)))
            }
            // As ClickHouse reads a string as a Bool (typed boolean properties compare with
            // 'true').
            DataType::Boolean => Ok(match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" | "t" | "y" | "enable" => Some(lit(true)),
                "false" | "0" | "no" | "off" | "f" | "n" | "disable" => Some(lit(false)),
                _ => None,
            }),
            // A number in a string compared with a number is that number (typed numeric
            // properties compare with '49').
            t if t.is_integer() => Ok(s.trim().parse::<i64>().ok().map(lit)),
            t if t.is_floating() => Ok(s.trim().parse::<f64>().ok().map(lit)),
            _ => Ok(None),
        }
    }
}
