//! Function calls and windows: HogQL names onto [`crate::hogql::functions`], window
//! specifications and frames.

use super::*;

impl Planner<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call(
        &self,
        whole: &ast::Expr,
        name: &str,
        params: Option<&[ast::Expr]>,
        args: &[ast::Expr],
        distinct: bool,
        over: Option<&ast::Over>,
        scope: &Scope<'_>,
    ) -> PResult<Expr> {
        // Names of PostHog's list that it prints as other ClickHouse calls.
        if let Some(rewritten) = posthog_spelling(whole, name, params, args, distinct, over) {
            return self.expr(&rewritten, scope);
        }
        // `RESPECT NULLS` applies to this call only, not to calls among its arguments.
        let respect = self.respect_nulls.replace(false);
        // arrayJoin was computed before grouping.
        if name == "arrayJoin" {
            return scope
                .array_joins
                .iter()
                .find(|(e, _)| e == whole)
                .map(|(_, c)| Expr::Column(Column::from_name(c.clone())))
                .ok_or_else(|| {
                    PlanError::new(
                        "arrayJoin is only supported in the SELECT list",
                        Some(whole.span),
                    )
                });
        }
        if name == "untuple" {
            return err(
                "untuple(…) expands a tuple into columns of the SELECT list or into a call's \
                 arguments; it is not a value of its own",
                whole.span,
            );
        }
        // `*COLUMNS(…)` and `untuple(…)` among the arguments: what they expand to, in place.
        let spread;
        let args: &[ast::Expr] = if args.iter().any(expands) {
            spread = self.spread_args(args, scope)?;
            &spread
        } else {
            args
        };
        // Operator spellings.
        let binop = match name {
            "equals" => Some(BinaryOp::Eq),
            "notEquals" => Some(BinaryOp::NotEq),
            "less" => Some(BinaryOp::Lt),
            "lessOrEquals" => Some(BinaryOp::LtEq),
            "greater" => Some(BinaryOp::Gt),
            "greaterOrEquals" => Some(BinaryOp::GtEq),
            "plus" => Some(BinaryOp::Add),
            "minus" => Some(BinaryOp::Sub),
            "multiply" => Some(BinaryOp::Mul),
            "divide" => Some(BinaryOp::Div),
            // PostHog reads these as the comparison operators (with their NULL rules).
            "like" => Some(BinaryOp::Like),
            "ilike" => Some(BinaryOp::ILike),
            "notLike" => Some(BinaryOp::NotLike),
            "notILike" => Some(BinaryOp::NotILike),
            _ => None,
        };
        if let Some(op) = binop {
            if args.len() != 2 {
                return err(
                    format!("Function `{name}` takes 2 arguments, got {}", args.len()),
                    whole.span,
                );
            }
            return self.binary(op, &args[0], &args[1], scope, whole.span);
        }
        match name {
            "and" | "or" if args.len() >= 2 => {
                let mut it = args
                    .iter()
                    .map(|a| self.expr(a, scope).and_then(|v| to_bool(v, &scope.schema)));
                let first = it.next().expect("two args")?;
                return it.try_fold(first, |acc, x| {
                    Ok(if name == "and" {
                        acc.and(x?)
                    } else {
                        acc.or(x?)
                    })
                });
            }
            // xor(a, b, …): true when an odd number of arguments are; NULL if any is.
            "xor" => {
                if args.len() < 2 {
                    return err(
                        format!(
                            "Function `xor` expects at least 2 arguments, found {}",
                            args.len()
                        ),
                        whole.span,
                    );
                }
                let mut it = args
                    .iter()
                    .map(|a| self.expr(a, scope).and_then(|v| to_bool(v, &scope.schema)));
                let first = it.next().expect("two args")?;
                return it.try_fold(first, |acc, x| {
                    Ok(datafusion::logical_expr::binary_expr(
                        acc,
                        datafusion::logical_expr::Operator::NotEq,
                        x?,
                    ))
                });
            }
            // tupleElement(t, n[, default]): the n-th (1-based) element; a default stands in
            // for an index the tuple does not have.
            "tupleElement" => {
                if !(2..=3).contains(&args.len()) {
                    return err(
                        format!(
                            "Function `tupleElement` expects 2 or 3 arguments, found {}",
                            args.len()
                        ),
                        whole.span,
                    );
                }
                let base = self.expr(&args[0], scope)?;
                let index = match &args[1].kind {
                    ExprKind::Literal(ast::Literal::Int(n)) if *n >= 1 => *n as usize,
                    _ => {
                        return err(
                            "The index argument of `tupleElement` must be a constant integer from 1",
                            args[1].span,
                        );
                    }
                };
                return match self.tuple_field(base, index, args[0].span, scope)? {
                    Some(f) => Ok(f),
                    None => match args.get(2) {
                        Some(d) => self.expr(d, scope),
                        None => err(
                            format!("Tuple doesn't have element with index '{index}'"),
                            args[1].span,
                        ),
                    },
                };
            }
            "not" if args.len() == 1 => {
                return Ok(Expr::Not(Box::new(to_bool(
                    self.expr(&args[0], scope)?,
                    &scope.schema,
                )?)));
            }
            "tuple" => {
                return self.expr(
                    &ast::Expr::new(ExprKind::Tuple(args.to_vec()), whole.span),
                    scope,
                );
            }
            "in" | "notIn" if args.len() == 2 => {
                let list = ast::InList::Expr(Box::new(args[1].clone()));
                return self.in_expr(&args[0], &list, name == "notIn", scope);
            }
            _ => {}
        }
        let info = functions::lookup(name);
        if let Some(info) = info
            && info.kind == FnKind::Aggregate
            && over.is_none()
        {
            for a in args {
                if let Some((inner, span)) = find_aggregate_call(a) {
                    return err(
                        format!(
                            "Aggregation `{inner}` cannot be nested inside another aggregation `{name}`"
                        ),
                        span,
                    );
                }
            }
        }
        if info.is_some_and(|i| i.kind == FnKind::Window) && over.is_none() {
            return err(
                format!("Window function `{name}` needs OVER (…)"),
                whole.span,
            );
        }
        let params = params
            .unwrap_or(&[])
            .iter()
            .map(|p| self.expr(p, scope))
            .collect::<PResult<Vec<_>>>()?;
        // Arguments: plain ones first, then lambdas typed by the arrays beside them.
        let mut translated: Vec<Option<Arg>> = Vec::with_capacity(args.len());
        let mut array_types = Vec::new();
        for a in args {
            match &a.kind {
                ExprKind::Lambda { .. } => translated.push(None),
                ExprKind::Star(None) if args.len() == 1 => {}
                _ => {
                    let v = self.expr(a, scope)?;
                    let t = v.get_type(&scope.schema).map_err(df)?;
                    if let DataType::List(f) | DataType::LargeList(f) = &t {
                        array_types.push(f.data_type().clone());
                    } else if let DataType::Map(f, _) = &t
                        && let DataType::Struct(kv) = f.data_type()
                    {
                        // A map's lambda (mapApply, mapFilter) takes (key, value).
                        array_types.extend(kv.iter().map(|f| f.data_type().clone()));
                    } else {
                        array_types.push(t);
                    }
                    translated.push(Some(Arg::Expr(v)));
                }
            }
        }
        let mut final_args = Vec::with_capacity(translated.len());
        for (a, t) in args.iter().zip(
            translated
                .into_iter()
                .chain(std::iter::repeat_with(|| None)),
        ) {
            match (&a.kind, t) {
                (_, Some(x)) => final_args.push(x),
                (ExprKind::Lambda { params, body }, None) => {
                    let typed: Vec<(String, DataType)> = params
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            (
                                p.clone(),
                                array_types.get(i).cloned().unwrap_or(DataType::Null),
                            )
                        })
                        .collect();
                    let fields: Vec<datafusion::arrow::datatypes::Field> = typed
                        .iter()
                        .map(|(n, t)| datafusion::arrow::datatypes::Field::new(n, t.clone(), true))
                        .collect();
                    let lschema = Arc::new(
                        DFSchema::try_from(datafusion::arrow::datatypes::Schema::new(fields))
                            .map_err(df)?,
                    );
                    let inner = Scope {
                        relations: vec![],
                        extra: HashSet::new(),
                        aliases: HashMap::new(),
                        expanding: Default::default(),
                        lambda: params.clone(),
                        ctes: scope.ctes,
                        schema: lschema,
                        array_joins: vec![],
                        windows: scope.windows,
                    };
                    let body = self.expr(body, &inner)?;
                    final_args.push(Arg::Lambda {
                        params: typed,
                        body,
                    });
                }
                _ => {}
            }
        }
        let null_arg = final_args
            .iter()
            .any(|a| matches!(a, Arg::Expr(Expr::Literal(ScalarValue::Null, _))));
        let v = self.call_translated(name, params, final_args, distinct, scope, whole.span)?;
        // A NULL literal given to a function with ClickHouse's default NULL handling makes
        // its result a NULL of no type, which callers type as the literal (see
        // `functions::null_literal_gives_null`). Translated first: its errors stay errors.
        let v = if null_arg && over.is_none() && functions::null_literal_gives_null(name) {
            Expr::Literal(ScalarValue::Null, None)
        } else {
            v
        };
        let v = if respect {
            respect_nulls(v).map_err(df)?
        } else {
            v
        };
        match over {
            None => Ok(v),
            Some(o) => {
                let spec = self.window_spec(o, scope.windows, whole.span)?;
                let partition = spec
                    .partition_by
                    .iter()
                    .map(|p| self.expr(p, scope))
                    .collect::<PResult<Vec<_>>>()?;
                let order = spec
                    .order_by
                    .iter()
                    .map(|o| {
                        // NULLs last unless NULLS FIRST, for DESC too (as ClickHouse).
                        Ok(Sort::new(
                            self.expr(&o.expr, scope)?,
                            !o.desc,
                            o.nulls_first.unwrap_or(false),
                        ))
                    })
                    .collect::<PResult<Vec<_>>>()?;
                let keys = order
                    .iter()
                    .map(|s| s.expr.get_type(&scope.schema).map_err(df))
                    .collect::<PResult<Vec<_>>>()?;
                let frame = spec
                    .frame
                    .as_ref()
                    .map(|f| self.frame(f, &keys, whole.span))
                    .transpose()?;
                let key_nullable = match order.as_slice() {
                    [k] => k.expr.nullable(&scope.schema).map_err(df)?,
                    _ => false,
                };
                frames::clickhouse_window(v, partition, order, frame, key_nullable).map_err(df)
            }
        }
    }

    /// The window an `OVER` means: inline, a name from the WINDOW clause, or a named window
    /// extended (`OVER (w ORDER BY …)`, SQL's rules: the base's PARTITION BY, its ORDER BY
    /// unless it has none, the frame of the extension when it gives one).
    /// `args` with each `*COLUMNS(…)` replaced by the columns it names (PostHog's resolver
    /// unpacks them into the call's arguments): those of the FROM clause whose names match a
    /// regex, `*`'s (less EXCLUDE, with REPLACE's values), or a list as written.
    pub(super) fn spread_args(
        &self,
        args: &[ast::Expr],
        scope: &Scope<'_>,
    ) -> PResult<Vec<ast::Expr>> {
        let mut out = Vec::new();
        for a in args {
            if let Some(t) = untuple_arg(a) {
                out.extend(self.untuple_items(t, scope)?.into_iter().map(|(e, _)| e));
                continue;
            }
            let ExprKind::Spread(inner) = &a.kind else {
                out.push(a.clone());
                continue;
            };
            let ExprKind::Columns(cols) = &inner.kind else {
                return err("`*` unpacks COLUMNS(…) into a call's arguments", a.span);
            };
            let field = |alias: &str, col: &str| {
                ast::Expr::new(
                    ExprKind::Field(vec![alias.to_string(), col.to_string()]),
                    a.span,
                )
            };
            let before = out.len();
            match &cols.source {
                ast::ColumnsSource::List(list) => out.extend(list.iter().cloned()),
                ast::ColumnsSource::Regex(re) => {
                    let rx = regex::Regex::new(re).map_err(|e| {
                        PlanError::new(
                            format!("Invalid regular expression in COLUMNS: {e}"),
                            Some(a.span),
                        )
                    })?;
                    for r in &scope.relations {
                        for col in r.visible.iter().filter(|c| rx.is_match(c)) {
                            out.push(field(&r.alias, col));
                        }
                    }
                }
                ast::ColumnsSource::Star(qual) => {
                    for r in &scope.relations {
                        if qual.as_ref().is_some_and(|q| q.join(".") != r.alias) {
                            continue;
                        }
                        for col in r.visible.iter().filter(|c| !cols.exclude.contains(c)) {
                            match cols.replace.iter().find(|(_, n)| n == col) {
                                Some((e, _)) => out.push(e.clone()),
                                None => out.push(field(&r.alias, col)),
                            }
                        }
                    }
                }
            }
            if out.len() == before {
                return err("*COLUMNS(…) matches no column", a.span);
            }
        }
        Ok(out)
    }

    /// The `index`-th (from 1) element of the tuple `base`, by position: a tuple a function
    /// made may name its fields (`geohashDecode`'s `longitude`, `latitude`, a named tuple of
    /// JSONExtract). None past its last element.
    pub(super) fn tuple_field(
        &self,
        base: Expr,
        index: usize,
        base_span: Span,
        scope: &Scope<'_>,
    ) -> PResult<Option<Expr>> {
        let fields = match base.get_type(&scope.schema).map_err(df)? {
            DataType::Struct(f) => f,
            t => {
                return err(
                    format!("Only a tuple has elements, not a value of type {t}"),
                    base_span,
                );
            }
        };
        if index == 0 || index > fields.len() {
            return Ok(None);
        }
        let name = fields[index - 1].name().clone();
        Ok(Some(core_fn::get_field(base, name)))
    }

    /// `untuple(t)`'s items: `t.1`, `t.2`, … (as AST, to plan where they stand) with
    /// ClickHouse's column names, `tupleElement(t, '1')` (a named element by its name).
    pub(super) fn untuple_items(
        &self,
        t: &ast::Expr,
        scope: &Scope<'_>,
    ) -> PResult<Vec<(ast::Expr, String)>> {
        let ty = self.expr(t, scope)?.get_type(&scope.schema).map_err(df)?;
        let DataType::Struct(fields) = ty else {
            return err(
                format!("untuple(…) expands a tuple, not a value of type {ty}"),
                t.span,
            );
        };
        let text = column_name(t, self.ctx.print);
        Ok(fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                // Unnamed elements are `c0`, `c1`, … (`ExprKind::Tuple`'s struct).
                let label = if f.name() == &format!("c{i}") {
                    (i + 1).to_string()
                } else {
                    f.name().clone()
                };
                let e = ast::Expr::new(
                    ExprKind::TupleElement {
                        base: Box::new(t.clone()),
                        index: i as u64 + 1,
                        null_safe: false,
                    },
                    t.span,
                );
                (e, format!("tupleElement({text}, '{label}')"))
            })
            .collect())
    }

    pub(super) fn window_spec(
        &self,
        o: &ast::Over,
        windows: &[(String, ast::WindowSpec)],
        span: Span,
    ) -> PResult<ast::WindowSpec> {
        let named = |name: &str| {
            windows
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, w)| w.clone())
                .ok_or_else(|| {
                    PlanError::new(
                        format!("Window `{name}` is not defined in this SELECT's WINDOW clause"),
                        Some(span),
                    )
                })
        };
        let mut spec = match o {
            ast::Over::Named(name) => ast::WindowSpec {
                base: Some(name.clone()),
                ..Default::default()
            },
            ast::Over::Spec(s) => s.clone(),
        };
        // Resolve the chain of bases (bounded: a window may not refer to itself).
        for _ in 0..=windows.len() {
            let Some(base_name) = spec.base.take() else {
                return Ok(spec);
            };
            let base = named(&base_name)?;
            if !spec.partition_by.is_empty() {
                return err(
                    format!("A window based on `{base_name}` cannot add PARTITION BY"),
                    span,
                );
            }
            if !spec.order_by.is_empty() && !base.order_by.is_empty() {
                return err(
                    format!("Window `{base_name}` already has an ORDER BY"),
                    span,
                );
            }
            spec = ast::WindowSpec {
                base: base.base,
                partition_by: base.partition_by,
                order_by: if spec.order_by.is_empty() {
                    base.order_by
                } else {
                    spec.order_by
                },
                frame: spec.frame.or(base.frame),
            };
        }
        err("Named windows refer to each other in a cycle", span)
    }

    /// A window frame; `keys` are the types of the window's ORDER BY keys. A RANGE frame
    /// with an offset works as in ClickHouse: one ORDER BY key, a number of the key's units
    /// (days for a Date, seconds for a DateTime), a non-negative 32-bit integer.
    pub(super) fn frame(
        &self,
        f: &ast::WindowFrame,
        keys: &[DataType],
        span: Span,
    ) -> PResult<WindowFrame> {
        let units = match f.units {
            ast::FrameUnits::Rows => WindowFrameUnits::Rows,
            ast::FrameUnits::Range => WindowFrameUnits::Range,
        };
        let offset = |e: &ast::Expr| -> PResult<ScalarValue> {
            let n = const_usize(e, "a frame offset")?;
            if f.units == ast::FrameUnits::Rows {
                return Ok(ScalarValue::UInt64(Some(n as u64)));
            }
            if n > u32::MAX as usize {
                return err(
                    "The offset of a RANGE frame must be a non-negative 32-bit integer",
                    e.span,
                );
            }
            let [key] = keys else {
                return err(
                    format!(
                        "The RANGE OFFSET window frame requires exactly one ORDER BY column, {} \
                         given",
                        keys.len()
                    ),
                    span,
                );
            };
            let n = n as i64;
            match key {
                t if t.is_integer() || t.is_floating() => {
                    ScalarValue::Int64(Some(n)).cast_to(t).map_err(df)
                }
                DataType::Date32 => Ok(ScalarValue::new_interval_mdn(0, n as i32, 0)),
                DataType::Timestamp(TimeUnit::Second, _) => {
                    Ok(ScalarValue::new_interval_mdn(0, 0, n * 1_000_000_000))
                }
                t => err(
                    format!(
                        "The RANGE OFFSET frame is not implemented for an ORDER BY column of \
                         type {t} (ClickHouse has it for numbers, Date and DateTime only)"
                    ),
                    span,
                ),
            }
        };
        let bound = |b: &ast::FrameBound| -> PResult<WindowFrameBound> {
            Ok(match b {
                ast::FrameBound::UnboundedPreceding => {
                    WindowFrameBound::Preceding(ScalarValue::UInt64(None))
                }
                ast::FrameBound::UnboundedFollowing => {
                    WindowFrameBound::Following(ScalarValue::UInt64(None))
                }
                ast::FrameBound::CurrentRow => WindowFrameBound::CurrentRow,
                ast::FrameBound::Preceding(e) => WindowFrameBound::Preceding(offset(e)?),
                ast::FrameBound::Following(e) => WindowFrameBound::Following(offset(e)?),
            })
        };
        let start = bound(&f.start)?;
        let end = match &f.end {
            Some(e) => bound(e)?,
            None => WindowFrameBound::CurrentRow,
        };
        Ok(WindowFrame::new_bounds(units, start, end))
    }

    pub(super) fn call_translated(
        &self,
        name: &str,
        params: Vec<Expr>,
        args: Vec<Arg>,
        distinct: bool,
        scope: &Scope<'_>,
        span: Span,
    ) -> PResult<Expr> {
        let mut args = self.uuid_args(name, args, &scope.schema)?;
        // min/max of UUIDs in ClickHouse's order: the order key swaps the halves, so the key
        // of the least key is the least UUID.
        let uuid_extreme = matches!(name, "min" | "max" | "minIf" | "maxIf")
            && matches!(args.first(), Some(Arg::Expr(e))
                if e.get_type(&scope.schema).is_ok_and(|t| ids::is_uuid(&t)));
        if uuid_extreme && let Some(Arg::Expr(e)) = args.first_mut() {
            *e = functions::uuid_order_key(e.clone());
        }
        let fctx = self.fn_ctx(&scope.schema);
        let v = functions::translate(name, params, args, distinct, &fctx)
            .map_err(|e| PlanError::new(e.to_string(), Some(span)))?;
        Ok(if uuid_extreme {
            functions::uuid_order_key(v)
        } else {
            v
        })
    }

    // ---------------------------------------------------------------------------------
    // Names
    // ---------------------------------------------------------------------------------
}

/// The calls PostHog's list spells one way and prints (or ClickHouse defines) as others,
/// as those others: `btrim` is `trim`, `current_date` `today`, `array_agg` `groupArray`,
/// `arrayRotateLeft(a, n)` the slices of `a` at `n` modulo its length swapped
/// (`arrayRotateRight` by `-n`), `arrayWithConstant(n, x)` `[x]` resized to `n` with `x`,
/// `date_subtract` `date_sub`, `timezone(tz, t)` `toTimeZone(t, tz)`, `string_agg(x, sep)`
/// `arrayStringConcat(groupArray(x), sep)`, `every(x)` `toBool(min(x))`.
/// None for every other call, and for a wrong number of arguments (the target's error
/// would name the wrong function).
fn posthog_spelling(
    whole: &ast::Expr,
    name: &str,
    params: Option<&[ast::Expr]>,
    args: &[ast::Expr],
    distinct: bool,
    over: Option<&ast::Over>,
) -> Option<ast::Expr> {
    let span = whole.span;
    let call = |name: &str, args: Vec<ast::Expr>| {
        ast::Expr::new(
            ExprKind::Call {
                name: name.to_string(),
                params: None,
                args,
                distinct: false,
                over: None,
            },
            span,
        )
    };
    let int = |n: i128| ast::Expr::new(ExprKind::Literal(ast::Literal::Int(n)), span);
    let renamed = |to: &str| {
        ast::Expr::new(
            ExprKind::Call {
                name: to.to_string(),
                params: params.map(<[ast::Expr]>::to_vec),
                args: args.to_vec(),
                distinct,
                over: over.cloned(),
            },
            span,
        )
    };
    match (name.to_ascii_lowercase().as_str(), args) {
        ("btrim", [_] | [_, _]) => Some(renamed("trim")),
        ("current_date", []) if name == "current_date" => Some(renamed("today")),
        ("array_agg", [_]) if name == "array_agg" => Some(renamed("groupArray")),
        ("arrayrotateleft" | "arrayrotateright", [a, n])
            if matches!(name, "arrayRotateLeft" | "arrayRotateRight") =>
        {
            let n = if name == "arrayRotateRight" {
                call("negate", vec![n.clone()])
            } else {
                n.clone()
            };
            let len = call("length", vec![a.clone()]);
            let k = call(
                "if",
                vec![
                    call("equals", vec![len.clone(), int(0)]),
                    int(0),
                    call("positiveModulo", vec![n, len]),
                ],
            );
            Some(call(
                "arrayConcat",
                vec![
                    call(
                        "arraySlice",
                        vec![a.clone(), call("plus", vec![k.clone(), int(1)])],
                    ),
                    call("arraySlice", vec![a.clone(), int(1), k]),
                ],
            ))
        }
        ("arraywithconstant", [n, x]) if name == "arrayWithConstant" => Some(call(
            "arrayResize",
            vec![call("array", vec![x.clone()]), n.clone(), x.clone()],
        )),
        ("date_subtract", [_, _]) if name == "date_subtract" => Some(renamed("date_sub")),
        ("timezone", [tz, t]) if name == "timezone" => {
            Some(call("toTimeZone", vec![t.clone(), tz.clone()]))
        }
        ("string_agg", [x, sep]) if name == "string_agg" && over.is_none() => Some(call(
            "arrayStringConcat",
            vec![call("groupArray", vec![x.clone()]), sep.clone()],
        )),
        ("every", [x]) if name == "every" && over.is_none() => {
            Some(call("toBool", vec![call("min", vec![x.clone()])]))
        }
        _ => None,
    }
}

/// `t` of an argument `untuple(t)`.
pub(super) fn untuple_arg(a: &ast::Expr) -> Option<&ast::Expr> {
    match &a.kind {
        ExprKind::Call {
            name,
            args,
            params: None,
            distinct: false,
            over: None,
        } if name == "untuple" && args.len() == 1 => Some(&args[0]),
        _ => None,
    }
}

/// Whether an argument expands into several (`*COLUMNS(…)`, `untuple(…)`).
fn expands(a: &ast::Expr) -> bool {
    matches!(a.kind, ExprKind::Spread(_)) || untuple_arg(a).is_some()
}
