#!/usr/bin/env python3
"""Generated-expression differential testing of HogQL: hedgerow against ClickHouse (chdb).

A seeded generator builds random, well-typed HogQL expressions (integers including the Int64
edge values, floats, strings, NULLs, dates and DateTimes, arrays; arithmetic, comparisons,
conditionals and the string, date, math and array functions hedgerow knows) over a small
table of four rows, `t`, written as a subquery of literals so that the same text defines it in
both engines. Each expression is printed twice from one tree: as HogQL (for hedgerow) and as
the ClickHouse SQL PostHog would run (HogQL mostly runs as-is; comparisons and pattern
operators get PostHog's printer's `ifNull(…)` wrappers, HogQL-only names get their ClickHouse
form). Both engines evaluate `SELECT id, e1, …, eK FROM t ORDER BY id` in batches (a batch
that fails is retried expression by expression); per expression, the four rows must agree,
or both engines must refuse it.

What "agree" means: integers exactly, floats with a relative tolerance of 1e-9 (NaN equals
NaN), Bool and UInt8 0/1 alike, Date/DateTime values by their wall-clock text (the session
zone is UTC on both sides; a DateTime and a DateTime64 of the same instant agree), arrays and
tuples element-wise. Types are not compared (hedgerow reads every integer as Int64 and gives
DateTime64(6) where ClickHouse gives DateTime: see tests/slt/known_failures.txt).

Classes a generator option keeps out, each with its reason, are in EXCLUDED below.

Usage (a server must be running; the pytest file tests/py/test_hogql_differential.py boots one):
    python tests/py/hogql_diff.py --url http://127.0.0.1:8000 --seed 7 --count 3000
    python tests/py/hogql_diff.py --print --seed 7 --count 10     only print expressions
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

PERSONAL_API_KEY = "phx_test_hedgerow_personal_0123456789abcdef"

# --------------------------------------------------------------------------------------------
# The table: four rows, one column per type, nullable columns holding NULL in some rows.

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808

_ROWS = [
    # id, i, ni, f, s, ns, d, dt, arr
    (1, "0", "NULL", "0.5", "''", "'x'", "2024-02-29", "2024-02-29 23:59:59", "[1, 2]"),
    (2, str(INT64_MAX), "42", "-2.75", "'Hello'", "NULL", "2000-01-03", "2024-03-10 02:30:00",
     "[]"),
    (3, "-9223372036854775807 - 1", "-1", "1e300", "'ünï code'", "''", "2038-01-19",
     "2000-01-01 00:00:00", "[-5]"),
    (4, "-7", "NULL", "-0.0", "' pad '", "'Hello'", "2024-12-31", "2024-12-31 12:00:00",
     "[3, 9223372036854775807, 0]"),
]


def table_sql() -> str:
    parts = []
    for n, (id_, i, ni, f, s, ns, d, dt, arr) in enumerate(_ROWS):
        if n == 0:
            parts.append(
                f"SELECT toInt64({id_}) AS id, toInt64({i}) AS i, toInt64OrNull(toString({ni})) "
                f"AS ni, toFloat64({f}) AS f, toString({s}) AS s, toNullable(toString({ns})) "
                f"AS ns, toDate('{d}') AS d, toDateTime('{dt}') AS dt, "
                f"arrayMap(x -> toInt64(x), {arr}) AS arr")
        else:
            parts.append(
                f"SELECT toInt64({id_}), toInt64({i}), toInt64OrNull(toString({ni})), "
                f"toFloat64({f}), toString({s}), toNullable(toString({ns})), toDate('{d}'), "
                f"toDateTime('{dt}'), arrayMap(x -> toInt64(x), {arr})")
    return "(" + " UNION ALL ".join(parts) + ")"


# --------------------------------------------------------------------------------------------
# Expression trees, printed as HogQL and as ClickHouse SQL

INT, FLOAT, STR, BOOL, DATE, DT, ARR = "int", "float", "str", "bool", "date", "dt", "arr"


@dataclass
class E:
    hog: str
    ch: str
    ty: str
    nullable: bool = False
    # only as a whole expression: may hold invalid UTF-8 in ClickHouse (a byte-wise cut of a
    # non-ASCII string), or is an edge-literal operation (EDGE_INTS)
    cut: bool = False


# ClickHouse's left/right/substring/reverse work on bytes: a cut inside a character gives
# invalid UTF-8, which ClickHouse keeps and compares byte-wise, while hedgerow's strings
# (Arrow's) are UTF-8 and hold U+FFFD there. So such a result is only compared as the
# expression's own value (with runs of U+FFFD as one), never fed to another function.
BYTE_CUTS = {"left", "right", "substring", "reverse"}


def _ascii_literal(e: E) -> bool:
    return e.hog.startswith("'") and e.hog.isascii()


def lit(text: str, ty: str, nullable: bool = False) -> E:
    return E(text, text, ty, nullable)


def call(name: str, ty: str, *args: E, ch_name: str | None = None,
         nullable: bool | None = None) -> E:
    n = any(a.nullable for a in args) if nullable is None else nullable
    cut = any(a.cut for a in args) or (
        name in BYTE_CUTS and args[0].ty == STR and not _ascii_literal(args[0]))
    return E(f"{name}({', '.join(a.hog for a in args)})",
             f"{ch_name or name}({', '.join(a.ch for a in args)})", ty, n, cut)


def concat(*args: E) -> E:
    """PostHog's printer makes concat null-safe: a NULL constant is '', a string constant
    stays, any other argument is `ifNull(toString(x), '')`."""
    parts = []
    for a in args:
        if a.ch == "NULL":
            parts.append("''")
        elif a.ch.startswith("'"):
            parts.append(a.ch)
        elif a.ch.startswith("toString(") and _balanced_call(a.ch):
            parts.append(f"ifNull({a.ch}, '')")
        else:
            parts.append(f"ifNull(toString({a.ch}), '')")
    return E(f"concat({', '.join(a.hog for a in args)})", f"concat({', '.join(parts)})", STR,
             False, any(a.cut for a in args))


def _balanced_call(text: str) -> bool:
    """`text` is one call `f(…)` (not `f(…) || g(…)`)."""
    depth = 0
    for k, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return k == len(text) - 1
    return False


def infix(op: str, ty: str, a: E, b: E, nullable: bool | None = None) -> E:
    n = (a.nullable or b.nullable) if nullable is None else nullable
    return E(f"({a.hog} {op} {b.hog})", f"({a.ch} {op} {b.ch})", ty, n, a.cut or b.cut)


def compare(op: str, a: E, b: E) -> E:
    """PostHog's printer: `=` and `!=` are null-safe (NULL = NULL is true), the others and the
    pattern operators give 0 (negated ones 1) when an operand is NULL."""
    hog = f"({a.hog} {op} {b.hog})"
    raw = f"({a.ch} {op} {b.ch})"
    if op == "=":
        ch = f"ifNull({raw}, isNull({a.ch}) AND isNull({b.ch}))"
    elif op == "!=":
        ch = f"ifNull({raw}, isNotNull({a.ch}) OR isNotNull({b.ch}))"
    elif op.startswith("NOT "):
        ch = f"ifNull({raw}, 1)"
    else:
        ch = f"ifNull({raw}, 0)"
    return E(hog, ch, BOOL, False, a.cut or b.cut)


# Values a generator draws from. Integers include the edges of the narrower types ClickHouse
# gives small literals (UInt8 … UInt32); the Int64 edges are the table's `i` and EDGE_INTS.
INT_LITERALS = ["0", "1", "2", "3", "7", "10", "100", "127", "128", "255", "256", "1000",
                "32767", "65535", "65536", "2147483647", "2147483648", "4294967295",
                "4294967296"]
# The edges where Int64 arithmetic wraps and ClickHouse's unsigned literal types do not.
# Only as two literals of one operation, and that only as a whole expression (`top_only`):
# a literal's type through a function hedgerow does not fold
# (`if(c, 9223372036854775807, 1) * 2`; literal arrays keep it) is a known gap, and a UInt64
# above 2^63 - 1 as a branch with signed values has no common type in ClickHouse (an error,
# or a Variant from 26.1; known_failures.txt, differential.slt). Literals above Int64's range
# (18446744073709551615) are not generated: hedgerow reads them as UInt64 and its Int64
# functions (intDiv, the comparisons with Int64) do not take them yet.
EDGE_INTS = [str(INT64_MAX), str(INT64_MAX - 1), "4611686018427387904", "4294967296",
             "4294967295", "3037000500"]
SMALL_INTS = ["0", "1", "2", "3", "5", "7", "10", "12", "31", "100"]
FLOAT_LITERALS = ["0.5", "1.5", "2.25", "3.0", "0.1", "100.125", "1e10", "1e-5", "123.456"]
STRINGS = ["''", "'a'", "'abc'", "'Hello World'", "'ünï'", "' pad '", "'a,b,c'", "'42'",
           "'-3.5'", "'2024-05-06'", "'x%y_z'", "'HeLLo'", "'o'"]
PATTERNS = ["'%'", "'a%'", "'%o%'", "'H_llo'", "'%l%o'", "''", "'\\\\%'", "'ü%'"]
# Dates stay in 2000…2060 and date steps are small: ClickHouse's DateTime is 32-bit seconds
# (1970 … 2106) and hedgerow's DateTime is not held to that range. Its Date (16-bit days,
# 1970-01-01 … 2149-06-06) is: the dates hedgerow computes wrap and clamp as ClickHouse's
# do, a class functions_datetime_range.slt covers case by case.
DATES = ["2024-01-01", "2024-02-29", "2023-12-31", "2000-01-01", "2060-02-29", "2024-07-15"]
DATE_STEPS = ["0", "1", "2", "3", "7", "12", "31"]
YEAR_STEPS = ["0", "1", "2", "5"]
DATETIMES = ["2024-01-01 00:00:00", "2024-02-29 12:34:56", "2023-12-31 23:59:59",
             "2024-03-10 02:30:00", "2024-11-03 01:30:00", "2001-09-09 01:46:40"]
UNITS = ["'second'", "'minute'", "'hour'", "'day'", "'week'", "'month'", "'quarter'", "'year'"]


class Gen:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def pick(self, xs):
        return self.r.choice(xs)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    # -- leaves ----------------------------------------------------------------------------

    def leaf(self, ty: str) -> E:
        r = self.r
        if ty == INT:
            c = r.random()
            if c < 0.25:
                return E("i", "i", INT)
            if c < 0.4:
                return E("ni", "ni", INT, True)
            if c < 0.45:
                return E("id", "id", INT)
            if c < 0.55:
                return lit(f"-{self.pick(INT_LITERALS)}", INT)
            return lit(self.pick(INT_LITERALS), INT)
        if ty == FLOAT:
            c = r.random()
            if c < 0.3:
                return E("f", "f", FLOAT)
            v = self.pick(FLOAT_LITERALS)
            return lit(f"-{v}" if self.chance(0.3) else v, FLOAT)
        if ty == STR:
            c = r.random()
            if c < 0.25:
                return E("s", "s", STR)
            if c < 0.4:
                return E("ns", "ns", STR, True)
            return lit(self.pick(STRINGS), STR)
        if ty == BOOL:
            return self.gen(BOOL, 0)
        if ty == DATE:
            if self.chance(0.4):
                return E("d", "d", DATE)
            return lit(f"toDate('{self.pick(DATES)}')", DATE)
        if ty == DT:
            if self.chance(0.4):
                return E("dt", "dt", DT)
            return lit(f"toDateTime('{self.pick(DATETIMES)}')", DT)
        if ty == ARR:
            if self.chance(0.5):
                return E("arr", "arr", ARR)
            # not `[]`: ClickHouse's Array(Nothing) cannot be a result column
            n = r.randint(1, 4)
            items = [self.pick(SMALL_INTS) for _ in range(n)]
            return lit(f"[{', '.join(items)}]", ARR)
        raise ValueError(ty)

    # -- nodes -----------------------------------------------------------------------------

    def gen(self, ty: str, depth: int, top: bool = False) -> E:
        for _ in range(8):
            e = self._gen(ty, depth)
            if top or not e.cut:
                return e
        return self.leaf(ty) if ty != BOOL else _cmp_leaf(self)

    def _gen(self, ty: str, depth: int) -> E:
        if depth <= 0 and ty != BOOL:
            return self.leaf(ty)
        if ty != BOOL and self.chance(0.25):
            return self.leaf(ty)
        if self.chance(0.04):
            # a bare NULL where a value of the type goes
            return lit("NULL", ty, True)
        makers = RULES[ty]
        weights = [w for w, _ in makers]
        _, maker = self.r.choices(makers, weights=weights)[0]
        return maker(self, depth - 1)

    def small_int(self) -> E:
        return lit(self.pick(SMALL_INTS), INT)


def _i(g: Gen, d: int) -> E:
    return g.gen(INT, d)


def _f(g: Gen, d: int) -> E:
    return g.gen(FLOAT, d)


def _n(g: Gen, d: int) -> E:
    """A number: integer or float."""
    return g.gen(INT if g.chance(0.6) else FLOAT, d)


def _s(g: Gen, d: int) -> E:
    return g.gen(STR, d)


def _b(g: Gen, d: int) -> E:
    return g.gen(BOOL, max(d, 0)) if d > 0 else _cmp_leaf(g)


def _cmp_leaf(g: Gen) -> E:
    ty = g.pick([INT, FLOAT, STR, DATE])
    return compare(g.pick(["=", "!=", "<", ">", "<=", ">="]), g.leaf(ty), g.leaf(ty))


def _if(ty: str) -> Callable[[Gen, int], E]:
    def make(g: Gen, d: int) -> E:
        c, a, b = _b(g, d), g.gen(ty, d), g.gen(ty, d)
        return E(f"if({c.hog}, {a.hog}, {b.hog})", f"if({c.ch}, {a.ch}, {b.ch})", ty,
                 a.nullable or b.nullable, c.cut or a.cut or b.cut)
    return make


def _multiif(ty: str) -> Callable[[Gen, int], E]:
    def make(g: Gen, d: int) -> E:
        c1, a, c2, b, e = _b(g, d), g.gen(ty, d), _b(g, d), g.gen(ty, d), g.gen(ty, d)
        return E(f"multiIf({c1.hog}, {a.hog}, {c2.hog}, {b.hog}, {e.hog})",
                 f"multiIf({c1.ch}, {a.ch}, {c2.ch}, {b.ch}, {e.ch})", ty,
                 a.nullable or b.nullable or e.nullable,
                 any(x.cut for x in (c1, a, c2, b, e)))
    return make


def _coalesce(ty: str) -> Callable[[Gen, int], E]:
    def make(g: Gen, d: int) -> E:
        # integer literals too: ClickHouse folds coalesce(4294967295, x) to the literal, typed
        # UInt32 (coalesce(NULL, 1) is a UInt8), which then decides whether an enclosing sum
        # or product wraps; hedgerow answers the literal, with its type, as well
        a, b = g.gen(ty, d), g.gen(ty, d)
        name = g.pick(["coalesce", "ifNull"])
        return call(name, ty, a, b, nullable=a.nullable and b.nullable)
    return make


def _arith(op: str) -> Callable[[Gen, int], E]:
    def make(g: Gen, d: int) -> E:
        return infix(op, INT, _i(g, d), _i(g, d))
    return make


def _farith(op: str) -> Callable[[Gen, int], E]:
    def make(g: Gen, d: int) -> E:
        a, b = _n(g, d), _n(g, d)
        if a.ty == INT and b.ty == INT and op != "/":
            a = _f(g, d)
        return infix(op, FLOAT, a, b)
    return make


def _unary(name: str, ty: str, arg: Callable[[Gen, int], E]) -> Callable[[Gen, int], E]:
    return lambda g, d: call(name, ty, arg(g, d))


RULES: dict[str, list[tuple[float, Callable[[Gen, int], E]]]] = {
    INT: [
        (3, _arith("+")), (3, _arith("-")), (3, _arith("*")),
        (1, lambda g, d: _neg(g, d)),
        # two literals at the edges: where ClickHouse's UInt64 does not wrap at 2^63
        (1, lambda g, d: _edge_arith(g)),
        # a positive literal divisor: ClickHouse's intDiv/modulo of two literals of
        # different signedness convert the divisor to the dividend's type first
        # (intDiv(-255, 65535) is 255 there), a ClickHouse quirk no engine should copy
        (1, lambda g, d: call("intDiv", INT, _i(g, d), lit(g.pick(SMALL_INTS[1:]), INT))),
        (1, lambda g, d: infix("%", INT, _i(g, d), lit(g.pick(SMALL_INTS[1:]), INT))),
        # whole expressions only: abs(-9223372036854775808) is the UInt64 2^63, and with it a
        # literal's ClickHouse type decides the sum (`abs(i) + if(c, 10, 7)` is a UInt64
        # there, an Int64 in hedgerow): the gap of a literal's unsigned type through a
        # function (if, tuples, maps; literal arrays keep their elements' narrow type)
        (1, lambda g, d: _top_only(call("abs", INT, _i(g, d)))),
        (1, _unary("length", INT, _s)),
        (1, _unary("lengthUTF8", INT, _s)),
        (1, lambda g, d: call("position", INT, _s(g, d), _s(g, d))),
        (1, _unary("toYear", INT, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toMonth", INT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toDayOfMonth", INT, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toDayOfWeek", INT, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toHour", INT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toMinute", INT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toYYYYMM", INT, lambda g, d: g.gen(DATE, d))),
        (1, lambda g, d: call("dateDiff", INT, lit(g.pick(UNITS), STR), g.gen(DT, d),
                              g.gen(DT, d))),
        (1, lambda g, d: call("dateDiff", INT, lit(g.pick(UNITS[3:]), STR), g.gen(DATE, d),
                              g.gen(DATE, d))),
        (1, _unary("toUnixTimestamp", INT, lambda g, d: g.gen(DT, d))),
        (1, _unary("length", INT, lambda g, d: g.gen(ARR, d))),
        (1, lambda g, d: call("greatest", INT, _no_null(g, d), _no_null(g, d))),
        (1, lambda g, d: call("least", INT, _no_null(g, d), _no_null(g, d))),
        (1, _unary("toInt", INT, _f)),
        (1, _unary("toInt", INT, _s)),
        (1, _unary("toIntOrZero", INT, _s)),
        (1, _unary("arraySum", INT, lambda g, d: g.gen(ARR, d))),
        (1, lambda g, d: call("indexOf", INT, g.gen(ARR, d), _i(g, d))),
        # indexes from 1: arrayElement(a, 0) is the default for a constant array and an
        # error ("Array indices are 1-based") for a column in ClickHouse
        (1, lambda g, d: call("arrayElement", INT, g.gen(ARR, d),
                              lit(g.pick(SMALL_INTS[1:]), INT))),
        (1, lambda g, d: call("countMatches", INT, _s(g, d),
                              lit(g.pick(["'l+'", "'[aeiou]'", "'o'", "'.'"]), STR))),
        (1, lambda g, d: call("positionCaseInsensitiveUTF8", INT, _s(g, d), _s(g, d))),
        (1, lambda g, d: call("multiSearchFirstIndex", INT, _s(g, d),
                              lit(g.pick(["['l', 'x']", "['x', 'e']", "['ü']"]), ARR))),
        (1, _unary("roundDuration", INT, _i)),
        (1, _unary("roundAge", INT, _i)),
        (1, _if(INT)), (1, _multiif(INT)), (1, _coalesce(INT)),
    ],
    FLOAT: [
        (2, _farith("+")), (2, _farith("-")), (2, _farith("*")), (3, _farith("/")),
        (1, _unary("sqrt", FLOAT, _n)),
        (1, _unary("exp", FLOAT, lambda g, d: g.gen(FLOAT, 0))),
        (1, _unary("log", FLOAT, _n)),
        (1, _unary("log2", FLOAT, _n)),
        (1, _unary("log10", FLOAT, _n)),
        (1, lambda g, d: call("pow", FLOAT, _n(g, d), g.small_int())),
        (1, lambda g, d: call("round", FLOAT, _f(g, d), g.small_int())),
        (1, _unary("round", FLOAT, _f)),
        (1, _unary("floor", FLOAT, _f)),
        (1, _unary("ceil", FLOAT, _f)),
        (1, _unary("abs", FLOAT, _f)),
        (1, _unary("toFloat", FLOAT, _i)),
        (1, _unary("toFloat", FLOAT, _s)),
        (1, _unary("toFloatOrZero", FLOAT, _s)),
        (1, _unary("L2Norm", FLOAT, lambda g, d: g.gen(ARR, d))),
        (1, lambda g, d: call("dotProduct", FLOAT, g.gen(ARR, 0), g.gen(ARR, 0))),
        (1, _if(FLOAT)), (1, _coalesce(FLOAT)),
    ],
    STR: [
        (2, lambda g, d: concat(_s(g, d), _s(g, d))),
        (1, lambda g, d: concat(_s(g, d), _s(g, d), _s(g, d))),
        (1, lambda g, d: concat(_s(g, d), _n(g, d))),
        (1, _unary("lower", STR, _s)), (1, _unary("upper", STR, _s)),
        (1, _unary("reverse", STR, _s)),
        (1, _unary("trim", STR, _s)),
        # offsets from 1: substring(s, 0, n) is '' in ClickHouse for a constant s and an
        # error ("Indices in strings are 1-based") for a column, a ClickHouse inconsistency
        (1, lambda g, d: call("substring", STR, _s(g, d), lit(g.pick(SMALL_INTS[1:]), INT),
                              g.small_int())),
        (1, lambda g, d: call("left", STR, _s(g, d), g.small_int())),
        (1, lambda g, d: call("right", STR, _s(g, d), g.small_int())),
        (1, lambda g, d: call("replaceAll", STR, _s(g, d), lit(g.pick(STRINGS[1:]), STR),
                              _s(g, d))),
        (1, lambda g, d: call("repeat", STR, _s(g, d), lit(g.pick(["0", "1", "3"]), INT))),
        (1, _unary("toString", STR, _i)),
        (1, _unary("toString", STR, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toString", STR, lambda g, d: g.gen(DT, d))),
        (1, lambda g, d: call("concatWithSeparator", STR, lit(g.pick(STRINGS), STR), _s(g, d),
                              _s(g, d))),
        (1, lambda g, d: call("formatDateTime", STR, g.gen(DT, d),
                              lit(g.pick(["'%Y-%m-%d'", "'%H:%M:%S'", "'%F %T'", "'%j %u'"]),
                                  STR))),
        (1, lambda g, d: call("arrayStringConcat", STR, call(
            "arrayMap", ARR, E("x -> toString(x)", "x -> toString(x)", STR),
            g.gen(ARR, d)), lit("','", STR))),
        (1, _unary("formatReadableSize", STR, _i)),
        (1, _unary("formatReadableQuantity", STR, lambda g, d: g.gen(FLOAT, 0))),
        (1, lambda g, d: call("translateUTF8", STR, _s(g, d), lit("'lo'", STR),
                              lit("'LO'", STR))),
        (1, _unary("regexpQuoteMeta", STR, _s)),
        (1, _unary("encodeXMLComponent", STR, _s)),
        (1, _if(STR)), (1, _multiif(STR)), (1, _coalesce(STR)),
    ],
    BOOL: [
        (4, lambda g, d: _cmp(g, d)),
        (1, lambda g, d: infix("AND", BOOL, _b(g, d), _b(g, d))),
        (1, lambda g, d: infix("OR", BOOL, _b(g, d), _b(g, d))),
        (1, lambda g, d: (lambda x: E(f"(NOT {x.hog})", f"(NOT {x.ch})", BOOL, x.nullable,
                                      x.cut))(
            _b(g, d))),
        (1, lambda g, d: compare(g.pick(["LIKE", "ILIKE", "NOT LIKE", "NOT ILIKE"]), _s(g, d),
                                 lit(g.pick(PATTERNS), STR))),
        (1, lambda g, d: call("startsWith", BOOL, _s(g, d), _s(g, d))),
        (1, lambda g, d: call("endsWith", BOOL, _s(g, d), _s(g, d))),
        (1, lambda g, d: call("empty", BOOL, _s(g, d))),
        (1, lambda g, d: call("isNull", BOOL, g.gen(g.pick([INT, STR]), d), nullable=False)),
        (1, lambda g, d: call("isNotNull", BOOL, g.gen(g.pick([INT, STR]), d), nullable=False)),
        (1, lambda g, d: call("has", BOOL, g.gen(ARR, d), _i(g, d))),
        (1, lambda g, d: call("multiSearchAny", BOOL, _s(g, d),
                              lit(g.pick(["['l', 'x']", "['Wor', 'pad']"]), ARR))),
        (1, lambda g, d: call("multiMatchAny", BOOL, _s(g, d),
                              lit(g.pick(["['^H', 'o$']", "['[0-9]']"]), ARR))),
        (1, lambda g, d: _in(g, d)),
    ],
    DATE: [
        (1, lambda g, d: call(g.pick(["addDays", "subtractDays", "addMonths", "addWeeks",
                                      "subtractMonths", "subtractWeeks"]), DATE,
                              g.gen(DATE, d), lit(g.pick(DATE_STEPS), INT))),
        (1, lambda g, d: call(g.pick(["addYears", "subtractYears"]), DATE, g.gen(DATE, d),
                              lit(g.pick(YEAR_STEPS), INT))),
        (1, _unary("toStartOfMonth", DATE, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toStartOfYear", DATE, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toStartOfQuarter", DATE, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toMonday", DATE, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toStartOfWeek", DATE, lambda g, d: g.gen(DATE, d))),
        (1, _unary("toDate", DATE, lambda g, d: g.gen(DT, d))),
        (1, _if(DATE)),
    ],
    DT: [
        (1, lambda g, d: call(g.pick(["addHours", "addMinutes", "addSeconds", "subtractHours",
                                      "addDays", "subtractMinutes"]), DT, g.gen(DT, d),
                              g.small_int())),
        (1, _unary("toStartOfHour", DT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toStartOfDay", DT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toStartOfFifteenMinutes", DT, lambda g, d: g.gen(DT, d))),
        (1, _unary("toStartOfMinute", DT, lambda g, d: g.gen(DT, d))),
        (1, _if(DT)),
    ],
    ARR: [
        (1, lambda g, d: call("arrayMap", ARR, E("x -> x * 2", "x -> x * 2", INT),
                              g.gen(ARR, d))),
        (1, lambda g, d: call("arrayFilter", ARR, E("x -> x > 1", "x -> x > 1", INT),
                              g.gen(ARR, d))),
        (1, _unary("arrayReverse", ARR, lambda g, d: g.gen(ARR, d))),
        (1, _unary("arraySort", ARR, lambda g, d: g.gen(ARR, d))),
        (1, _unary("arrayDistinct", ARR, lambda g, d: g.gen(ARR, d))),
        (1, lambda g, d: call("arraySlice", ARR, g.gen(ARR, d), lit("1", INT),
                              lit(g.pick(["1", "2"]), INT))),
        (1, lambda g, d: call("range", ARR, lit(g.pick(["0", "1", "3"]), INT))),
    ],
}


def _edge_arith(g: Gen) -> E:
    return _top_only(infix(g.pick(["+", "*", "-"]), INT,
                           lit(g.pick(EDGE_INTS + INT_LITERALS), INT),
                           lit(g.pick(EDGE_INTS + INT_LITERALS), INT)))


def _top_only(e: E) -> E:
    e.cut = True
    return e


def _no_null(g: Gen, d: int) -> E:
    """An integer argument of greatest/least without a NULL literal inside: ClickHouse types a
    function of a NULL literal as Nothing (positionCaseInsensitiveUTF8(NULL, s) is a NULL of no
    type), hedgerow keeps the function's type (UInt64), and greatest of a UInt64 and a
    signed value is a UInt64 (known gap: functions of a NULL literal keep their type)."""
    for _ in range(8):
        x = _i(g, d)
        if "NULL" not in x.hog:
            return x
    return E("i", "i", INT)


def _neg(g: Gen, d: int) -> E:
    # of an expression over a column: a literal's narrow ClickHouse type through a function
    # hedgerow does not fold wraps where hedgerow's Int64 does not (`-if(c, -128, -1)` is
    # the Int8 -128 there; literal arrays keep their elements' narrow type, as ClickHouse)
    x = _i(g, d)
    for _ in range(8):
        if re.search(r"\b(i|ni|id)\b", x.hog):
            break
        x = _i(g, d)
    else:
        x = E("i", "i", INT)
    return E(f"(-{x.hog})", f"(-{x.ch})", INT, x.nullable, x.cut)


def _cmp(g: Gen, d: int) -> E:
    ty = g.pick([INT, INT, FLOAT, STR, DATE, DT])
    if ty == FLOAT:
        a, b = _n(g, d), _n(g, d)
    else:
        a, b = g.gen(ty, d), g.gen(ty, d)
    return compare(g.pick(["=", "!=", "<", ">", "<=", ">="]), a, b)


def _in(g: Gen, d: int) -> E:
    if g.chance(0.5):
        a = _i(g, d)
        items = [g.pick(SMALL_INTS) for _ in range(g.r.randint(1, 3))]
    else:
        a = _s(g, d)
        items = [g.pick(STRINGS) for _ in range(g.r.randint(1, 3))]
    op = g.pick(["IN", "NOT IN"])
    return compare(op, a, E(f"({', '.join(items)})", f"({', '.join(items)})", STR))


def generate(seed: int, count: int, depth: int = 3) -> list[E]:
    g = Gen(seed)
    out = []
    for _ in range(count):
        if g.chance(0.03):
            out.append(_edge_arith(g))
            continue
        ty = g.pick([INT, INT, FLOAT, STR, STR, BOOL, BOOL, DATE, DT, ARR])
        out.append(g.gen(ty, g.r.randint(1, depth), top=True))
    return out


# --------------------------------------------------------------------------------------------
# Evaluating


@dataclass
class Outcome:
    rows: list | None = None  # one value per table row
    error: str | None = None
    type: str = ""


_DT_RE = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:\.(\d+))?(?:Z|[+-]\d\d:\d\d)?$")


def _norm(v, temporal: bool):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, list):
        return [_norm(x, temporal) for x in v]
    if isinstance(v, str) and temporal:
        m = _DT_RE.match(v)
        if m:
            frac = (m.group(3) or "").rstrip("0")
            return f"{m.group(1)} {m.group(2)}" + (f".{frac}" if frac else "")
        if v in ("nan", "inf", "-inf", "-nan", "+inf"):
            return float(v.replace("+", "").replace("-nan", "nan"))
    if isinstance(v, str) and v in ("nan", "-nan", "inf", "-inf", "+inf"):
        return float(v.replace("-nan", "nan"))
    if isinstance(v, str) and "\ufffd" in v:
        # invalid UTF-8 (a byte-wise reverse or cut): ClickHouse writes one U+FFFD per bad
        # sequence, hedgerow's JSON (Rust's lossy decoding) one per bad byte
        return re.sub("\ufffd+", "\ufffd", v)
    return v


def _temporal(type_name: str) -> bool:
    return "Date" in type_name or "Float" in type_name


def values_equal(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if math.isinf(fa) or math.isinf(fb):
            return fa == fb
        return fa == fb or math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-300)
    return a == b


class ClickHouseSide:
    def __init__(self) -> None:
        from chdb import session

        self.s = session.Session()
        self.s.query("SET session_timezone = 'UTC'")
        self.s.query("SET transform_null_in = 1")
        # as a ClickHouse server: no Variant as the common type of if/multiIf branches
        self.s.query("SET use_variant_as_common_type = 0")
        self.s.query("SET output_format_json_quote_64bit_integers = 0")
        self.s.query("SET output_format_json_validate_utf8 = 0")
        # NaN and ±inf are JSON null, as in PostHog's API (and hedgerow's)
        self.s.query("SET output_format_json_quote_denormals = 0")
        # HogQL-only names, as PostHog compiles them (the same as tests/py/slt_clickhouse.py)
        for name, body in {
            "toInt": "(x) -> accurateCastOrNull(x, 'Int64')",
            "toFloat": "(x) -> accurateCastOrNull(x, 'Float64')",
            "toIntOrZero": "(x) -> toInt64OrZero(x)",
            "toFloatOrZero": "(x) -> toFloat64OrZero(x)",
        }.items():
            self.s.query(f"DROP FUNCTION IF EXISTS {name}")
            self.s.query(f"CREATE FUNCTION {name} AS {body}")

    def run(self, exprs: list[str]) -> tuple[list[list], list[str]]:
        cols = ", ".join(f"{e} AS c{k}" for k, e in enumerate(exprs))
        sql = f"SELECT id, {cols} FROM {table_sql()} AS t ORDER BY id"
        res = self.s.query(sql, "JSONCompact")
        # invalid UTF-8 (byte-wise reverse, substring) decoded as hedgerow's JSON has it
        text = res.bytes().decode("utf-8", errors="replace")
        # after a failed query chdb can leave that query's partial output in front of the next
        # one's: read the last complete result
        data = json.loads(text[text.rfind('{\n\t"meta"'):])
        types = [m["type"] for m in data["meta"]][1:]
        return [row[1:] for row in data["data"]], types


class HedgerowSide:
    def __init__(self, url: str, session=None) -> None:
        import requests

        self.url = url.rstrip("/")
        self.http = session or requests.Session()

    def run(self, exprs: list[str]) -> tuple[list[list], list[str]]:
        cols = ", ".join(f"{e} AS c{k}" for k, e in enumerate(exprs))
        sql = f"SELECT id, {cols} FROM {table_sql()} AS t ORDER BY id"
        r = self.http.post(
            f"{self.url}/api/projects/1/query/",
            headers={"Authorization": f"Bearer {PERSONAL_API_KEY}"},
            json={"query": {"kind": "HogQLQuery", "query": sql}}, timeout=120)
        body = r.json()
        if r.status_code != 200 or body.get("error"):
            raise RuntimeError(body.get("detail") or body.get("error") or r.text[:500])
        types = [t[1] for t in body["types"]][1:]
        return [row[1:] for row in body["results"]], types


def evaluate(side, exprs: list[str], batch: int = 25) -> list[Outcome]:
    out: list[Outcome] = []
    for start in range(0, len(exprs), batch):
        chunk = exprs[start:start + batch]
        try:
            rows, types = side.run(chunk)
            for k in range(len(chunk)):
                t = _temporal(types[k])
                out.append(Outcome(rows=[_norm(r[k], t) for r in rows], type=types[k]))
        except Exception:  # noqa: BLE001 - retried one by one to find which one fails
            for e in chunk:
                try:
                    rows, types = side.run([e])
                    t = _temporal(types[0])
                    out.append(Outcome(rows=[_norm(r[0], t) for r in rows], type=types[0]))
                except Exception as exc:  # noqa: BLE001
                    out.append(Outcome(error=str(exc).split("\n")[0][:300]))
    return out


# ClickHouse refusals hedgerow need not copy: an expression the generator cannot type the
# way ClickHouse does (it has no type for the UInt64 results of length/position/indexOf
# mixed with Int64 in greatest/least/if: "There is no supertype for types UInt64, Int64";
# hedgerow takes Int64 as ClickHouse does for a literal there). Counted, not compared.
CLICKHOUSE_ONLY_ERRORS = ("Code: 386.",)
# ClickHouse answers in 128/256-bit integers where a signed value meets a UInt64 (its type
# for a literal above 2^63 - 1 or an unsigned sum with a narrower signed one:
# `greatest(-255, 9223372036854775807)` is Int128); hedgerow has 64-bit integers only.
# Counted, not compared.
CLICKHOUSE_ONLY_TYPES = ("Int128", "Int256")


@dataclass
class Report:
    seed: int
    count: int
    agreed: int = 0
    excluded: int = 0
    both_refused: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run(url: str, seed: int, count: int, ch: ClickHouseSide | None = None,
        session=None) -> Report:
    t0 = time.monotonic()
    exprs = generate(seed, count)
    ch = ch or ClickHouseSide()
    hs = HedgerowSide(url, session)
    want = evaluate(ch, [e.ch for e in exprs])
    got = evaluate(hs, [e.hog for e in exprs])
    rep = Report(seed=seed, count=count)
    for e, w, g in zip(exprs, want, got):
        if w.error is not None and any(code in w.error for code in CLICKHOUSE_ONLY_ERRORS):
            rep.excluded += 1
        elif any(t in w.type for t in CLICKHOUSE_ONLY_TYPES):
            rep.excluded += 1
        elif w.error is not None and g.error is not None:
            rep.both_refused += 1
        elif w.error is None and g.error is None and values_equal(w.rows, g.rows):
            rep.agreed += 1
        else:
            ch_part = f"\n    clickhouse: {e.ch}" if e.ch != e.hog else ""
            rep.mismatches.append(
                f"HogQL: {e.hog}{ch_part}\n    ClickHouse: {w.error or w.rows}\n"
                f"    hedgerow:   {g.error or g.rows}")
    rep.seconds = time.monotonic() - t0
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running hedgerow server")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--print", action="store_true", help="only print the expressions")
    ap.add_argument("--show", type=int, default=40, help="mismatches to print")
    args = ap.parse_args(argv)
    if args.print:
        for e in generate(args.seed, args.count):
            print(e.hog if e.hog == e.ch else f"{e.hog}\n  -- clickhouse: {e.ch}")
        return 0
    if not args.url:
        ap.error("--url is required (or --print)")
    rep = run(args.url, args.seed, args.count)
    for m in rep.mismatches[:args.show]:
        print(m + "\n")
    print(f"seed {rep.seed}: {rep.count} expressions, {rep.agreed} agree, {rep.both_refused} "
          f"refused by both, {rep.excluded} excluded, {len(rep.mismatches)} differ ({rep.seconds:.1f}s)")
    return 1 if rep.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
