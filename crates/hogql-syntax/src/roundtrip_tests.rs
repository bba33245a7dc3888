//! Property test: any expression tree the generator builds prints to text that parses back
//! to the same tree. The generator builds trees in the parser's canonical form (a negative
//! number is a negative literal, a one-element tuple is a call of `tuple`), so a mismatch is
//! a printer or parser bug: a missing parenthesis, a quoting slip, a lost keyword.

use crate::ast::*;
use crate::parser::parse_expr;
use crate::print;

/// A small deterministic generator: a failing case is replayed by its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::default())
}

fn b(x: Expr) -> Box<Expr> {
    Box::new(x)
}

const NAMES: &[&str] = &[
    "event",
    "x",
    "$browser",
    "weird name",
    "select",
    "from",
    "a`b",
    "é",
    "_1",
    "properties",
];
const FUNCTIONS: &[&str] = &["toString", "plus", "if", "count", "coalesce", "lower", "f"];
const OPS: &[BinaryOp] = &[
    BinaryOp::And,
    BinaryOp::Or,
    BinaryOp::Eq,
    BinaryOp::NotEq,
    BinaryOp::Lt,
    BinaryOp::LtEq,
    BinaryOp::Gt,
    BinaryOp::GtEq,
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Mod,
    BinaryOp::Concat,
    BinaryOp::Coalesce,
    BinaryOp::Like,
    BinaryOp::NotLike,
    BinaryOp::ILike,
    BinaryOp::NotILike,
    BinaryOp::Regex,
    BinaryOp::NotRegex,
    BinaryOp::IRegex,
    BinaryOp::NotIRegex,
];
const UNITS: &[IntervalUnit] = &[
    IntervalUnit::Second,
    IntervalUnit::Minute,
    IntervalUnit::Hour,
    IntervalUnit::Day,
    IntervalUnit::Week,
    IntervalUnit::Month,
    IntervalUnit::Quarter,
    IntervalUnit::Year,
];

fn literal(r: &mut Rng) -> Literal {
    match r.below(6) {
        0 => Literal::Null,
        1 => Literal::Bool(r.below(2) == 0),
        2 => Literal::Int(r.below(1_000_000) as i128 - 500_000),
        3 => Literal::Float((r.below(2000) as f64 - 1000.0) / 8.0 + 0.5),
        4 => Literal::Int(u64::MAX as i128 - r.below(3) as i128),
        _ => {
            let chars = [
                'a', '\'', '\\', '\n', '\t', 'é', '"', '`', ' ', '{', '}', '\0',
            ];
            Literal::String((0..r.below(6)).map(|_| *r.pick(&chars)).collect())
        }
    }
}

fn list(r: &mut Rng, depth: u32, min: u64) -> Vec<Expr> {
    (0..min + r.below(3)).map(|_| expr(r, depth + 1)).collect()
}

fn expr(r: &mut Rng, depth: u32) -> Expr {
    if depth >= 5 {
        return match r.below(2) {
            0 => e(ExprKind::Literal(literal(r))),
            _ => e(ExprKind::Field(vec![r.pick(NAMES).to_string()])),
        };
    }
    let d = depth + 1;
    e(match r.below(19) {
        0 => ExprKind::Literal(literal(r)),
        1 => ExprKind::Field(
            (0..1 + r.below(3))
                .map(|_| r.pick(NAMES).to_string())
                .collect(),
        ),
        2 => ExprKind::Call {
            name: r.pick(FUNCTIONS).to_string(),
            params: None,
            args: list(r, depth, 0),
            distinct: false,
            over: None,
        },
        3..=5 => ExprKind::Binary {
            op: *r.pick(OPS),
            left: b(expr(r, d)),
            right: b(expr(r, d)),
        },
        6 => ExprKind::Unary {
            op: UnaryOp::Not,
            expr: b(expr(r, d)),
        },
        7 => {
            // A minus before a number literal is the literal itself: only before others.
            let inner = match expr(r, d) {
                x if matches!(
                    x.kind,
                    ExprKind::Literal(Literal::Int(_) | Literal::Float(_))
                ) =>
                {
                    e(ExprKind::Field(vec!["x".into()]))
                }
                x => x,
            };
            ExprKind::Unary {
                op: UnaryOp::Neg,
                expr: b(inner),
            }
        }
        8 => ExprKind::Between {
            expr: b(expr(r, d)),
            low: b(expr(r, d)),
            high: b(expr(r, d)),
            negated: r.below(2) == 0,
        },
        9 => ExprKind::In {
            expr: b(expr(r, d)),
            list: InList::List(list(r, depth, 1)),
            negated: r.below(2) == 0,
        },
        10 => ExprKind::IsNull {
            expr: b(expr(r, d)),
            negated: r.below(2) == 0,
        },
        11 => ExprKind::Case {
            operand: (r.below(2) == 0).then(|| b(expr(r, d))),
            whens: (0..1 + r.below(2))
                .map(|_| (expr(r, d), expr(r, d)))
                .collect(),
            else_: (r.below(2) == 0).then(|| b(expr(r, d))),
        },
        12 => ExprKind::Ternary {
            cond: b(expr(r, d)),
            then: b(expr(r, d)),
            else_: b(expr(r, d)),
        },
        13 => ExprKind::Array(list(r, depth, 0)),
        14 => ExprKind::Tuple(list(r, depth, 2)),
        15 => ExprKind::Index {
            base: b(expr(r, d)),
            index: b(expr(r, d)),
            null_safe: r.below(2) == 0,
        },
        17 => ExprKind::ExprCall {
            callee: b(expr(r, d)),
            args: list(r, depth, 0),
        },
        16 => ExprKind::Cast {
            expr: b(expr(r, d)),
            ty: r
                .pick(&[
                    "String",
                    "Int64",
                    "Nullable(String)",
                    "DateTime64(6, 'UTC')",
                ])
                .to_string(),
        },
        _ => ExprKind::Interval {
            value: b(e(ExprKind::Literal(Literal::Int(r.below(100) as i128)))),
            unit: *r.pick(UNITS),
        },
    })
}

#[test]
fn generated_expressions_print_and_parse_back() {
    let mut failures = Vec::new();
    for seed in 1..=3000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let tree = expr(&mut r, 0);
        let text = print::expr(&tree);
        match parse_expr(&text) {
            Ok(back) if back == tree => {}
            Ok(back) => failures.push(format!(
                "seed {seed}: {text}\n  reprinted as {}",
                print::expr(&back)
            )),
            Err(err) => failures.push(format!("seed {seed}: {text}\n  {err}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 3000 trees did not round-trip; the first:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}
