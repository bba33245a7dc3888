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
        ExprKind::Index {
            base,
            index,
            null_safe,
        } => format!(
            "({} {} {})",
            if *null_safe { "?[]" } else { "[]" },
            sx(base),
            sx(index)
        ),
        ExprKind::TupleElement {
            base,
            index,
            null_safe,
        } => format!(
            "({} {} {index})",
            if *null_safe { "?." } else { "." },
            sx(base)
        ),
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
                InList::Cohort(e) => format!("(cohort {})", sx(e)),
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
        ExprKind::Columns(c) => format!(
            "(columns {:?} -{:?} {})",
            c.source,
            c.exclude,
            c.replace.len()
        ),
        ExprKind::NullsAction { expr, respect } => format!(
            "({} {})",
            if *respect {
                "RespectNulls"
            } else {
                "IgnoreNulls"
            },
            sx(expr)
        ),
        ExprKind::ExprCall { callee, args } => format!("(call {} [{}])", sx(callee), list(args)),
        ExprKind::WithinGroup { call, order_by } => format!(
            "(within-group {} [{}])",
            sx(call),
            order_by
                .iter()
                .map(|o| sx(&o.expr))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        ExprKind::PositionalRef(n) => format!("#{n}"),
        ExprKind::Block(text) => format!("{{{text}}}"),
        ExprKind::Tag(t) => format!("<{}>", t.name),
        ExprKind::Spread(c) => format!("(spread {})", sx(c)),
        ExprKind::PlaceholderExpr(e) => format!("{{{}}}", sx(e)),
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
        ("x IN COHORT 5", "(In x (cohort 5))"),
        (
            "x not in cohort 'Power users'",
            "(NotIn x (cohort 'Power users'))",
        ),
        ("x IN cohort", "(In x cohort)"),
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
        ("{variables.limit}", "{variables.limit}"),
        ("{ filters . dateRange . from }", "{filters.dateRange.from}"),
        ("{`a.b`.c}", "{a.b.c}"),
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
    let s =
        q("SELECT a b, c FROM t x JOIN u y ON x.id = y.id WHERE 1 GROUP BY a ORDER BY b LIMIT 1");
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
            Query::Placeholder(_) | Query::Offset { .. } => panic!(),
        };
        assert_eq!(sx(&s.columns[0]), "a", "{kw}");
    }
    for kw in [
        "LEFT JOIN u ON 1",
        "FINAL",
        "SAMPLE 0.1",
        "ARRAY JOIN a AS b",
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
                Query::Placeholder(name) => format!("{{{name}}}"),
                Query::Offset { query, .. } => format!("(offset {})", go(query)),
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
        // An error a bracket never closed caused is the bracket's (PostHog's position),
        // with what was expected where.
        (
            "SELECT count( FROM t",
            1,
            13,
            "'(' is never closed (at line 1, column 15: expected an expression after '(', found 'FROM')",
        ),
        (
            "SELECT\n  event,\n  count(\nFROM events",
            3,
            8,
            "'(' is never closed (at line 4, column 1:",
        ),
        ("SELECT [1, (2]", 1, 12, "'(' is never closed"),
        ("SELECT f(1, [2, 3)", 1, 13, "'[' is never closed"),
        ("SELECT f(1,\n  [2, 3\nFROM t", 2, 3, "'[' is never closed"),
        // An open bracket that closing would not help is not to blame.
        (
            "SELECT (1 +, 2",
            1,
            12,
            "expected an expression after '+', found ','",
        ),
        (
            "SELECT (SELECT 1 FROM t WHERE",
            1,
            30,
            "expected an expression after 'WHERE', found end of input",
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
            8,
            "'(' is never closed (at line 1, column 13: expected ',' or ')' after '2', found end of input)",
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
            9,
            "expected ']' after '1', found 'FROM'",
        ),
        ("SELECT é", 1, 8, "unexpected character 'é'"),
        ("SELECT f(x) OVER", 1, 17, "expected a window name or '('"),
        (
            "SELECT {}",
            1,
            9,
            "expected a placeholder name after '{', found '}'",
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
        "(", ")", "[", "]", "{", "}", ",", ".", "'", "`", "\"", "-", "--", "/*", "*/", "::", "?",
        ":", "->", "SELECT", "FROM", "AS", "NOT", "IN", "BETWEEN", "AND", "CASE", "END",
        "INTERVAL", "1", ".5", "0x", "\\", "é", " ", "\n", "UNION", "JOIN", "ON", "OVER", "LIMIT",
        "BY", "WITH", "e",
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

#[test]
fn template_strings() {
    let e = |s: &str| parse_expr(s).map(|e| sx(&e));
    assert_eq!(
        e("f'hello {event}!'").unwrap(),
        "(concat 'hello ' event '!')"
    );
    assert_eq!(e("f'{event}'").unwrap(), "event");
    assert_eq!(e("f''").unwrap(), "''");
    assert_eq!(e(r"f'a\{b\' {1}'").unwrap(), "(concat 'a{b' ' 1)");
    assert_eq!(e("f'a{f'b{c}'}'").unwrap(), "(concat 'a' (concat 'b' c))");
    assert_eq!(e("f'{ {a} }'").unwrap(), "{a}");
    for bad in ["f'", "f'{'", "f'{}'", "f'{1'", "f'a{f'b'", "f'}'x"] {
        assert!(parse_expr(bad).is_err(), "{bad}");
    }
}

#[test]
fn join_without_constraint_parses() {
    // PostHog's grammar reads it; the engine refuses it (ClickHouse needs ON or USING).
    let s = q("SELECT a FROM t LEFT JOIN u");
    let from = s.from.unwrap();
    assert_eq!(from.joins.len(), 1);
    assert_eq!(from.joins[0].constraint, None);
}

#[test]
fn never_names_quoted_round_trip() {
    for text in [
        "SELECT properties.`let`, e.`within`.`try`, `fn`.* FROM events AS `fn`",
        "SELECT `materialized`(1), `catch`, COLUMNS(`finally`.*)",
    ] {
        let q = parse_query(text).unwrap();
        let printed = crate::print::query(&q);
        assert_eq!(parse_query(&printed).unwrap(), q, "{printed}");
    }
}

/// A tag's text children are kept as written (PostHog's parser keeps them), except text of
/// whitespace alone across a line break.
#[test]
fn tag_text_is_kept_as_written() {
    use crate::ast::TagChild;
    let children = |text: &str| -> Vec<String> {
        let e = parse_expr(text).unwrap();
        let ExprKind::Tag(t) = e.kind else {
            panic!("{text}: not a tag")
        };
        t.children
            .iter()
            .map(|c| match c {
                TagChild::Text(s) => format!("{s:?}"),
                TagChild::Expr(e) => sx(e),
                TagChild::Tag(t) => format!("<{}>", t.name),
            })
            .collect()
    };
    assert_eq!(children("<p> hi there </p>"), [r#"" hi there ""#]);
    assert_eq!(
        children("<p><b>x</b> <i>y</i></p>"),
        ["<b>", r#"" ""#, "<i>"]
    );
    assert_eq!(
        children("<div>\n  <b>x</b>\n  tail {1}\n</div>"),
        ["<b>", r#""\n  tail ""#, "1"]
    );
    assert_eq!(children("<p>a{1}b</p>"), [r#""a""#, "1", r#""b""#]);
}
