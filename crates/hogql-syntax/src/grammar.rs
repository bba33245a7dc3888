//! What the parser and the printer share: operator priorities, reserved words, how names
//! and strings are quoted, and the bounds on nesting. The parser reads text by these rules
//! and the printer writes text by the same ones, so neither depends on the other.

use crate::lexer::is_plain_identifier;

/// The deepest tree (and the deepest parser recursion) a query may produce.
pub const MAX_DEPTH: usize = 512;

/// The most SELECTs nested inside one another (ClickHouse's `max_subquery_depth`). Each
/// level is several plan nodes for the planner and DataFusion's optimizer, which recurse
/// over them; the query runtime's stack is sized for this bound.
pub const MAX_SUBQUERY_DEPTH: usize = 100;

/// Binding powers, lowest first (ClickHouse's priorities, scaled by ten).
pub mod prec {
    pub const ALIAS: u8 = 0;
    pub const LAMBDA: u8 = 10;
    pub const TERNARY: u8 = 20;
    pub const OR: u8 = 30;
    pub const AND: u8 = 40;
    pub const NOT: u8 = 50;
    pub const COALESCE: u8 = 55;
    pub const IS_NULL: u8 = 60;
    pub const BETWEEN: u8 = 70;
    pub const COMPARE: u8 = 90;
    pub const CONCAT: u8 = 100;
    pub const ADD: u8 = 110;
    pub const MUL: u8 = 120;
    pub const NEG: u8 = 130;
    pub const POSTFIX: u8 = 140;
    pub const PRIMARY: u8 = 150;
}

/// Words that never stand alone as identifiers, never become implicit aliases and are
/// printed quoted when used as names. (`left(…)`, `any(…)` etc. still call functions.)
const RESERVED: &[&str] = &[
    "ALL",
    "AND",
    "ANTI",
    "ANY",
    "ARRAY",
    "AS",
    "ASC",
    "ASCENDING",
    "ASOF",
    "BETWEEN",
    "BY",
    "CASE",
    "CAST",
    "CATCH",
    "CROSS",
    "DESC",
    "DESCENDING",
    "DISTINCT",
    "ELSE",
    "END",
    "EXCEPT",
    "EXISTS",
    "FALSE",
    "FINAL",
    "FINALLY",
    "FN",
    "FORMAT",
    "FROM",
    "FULL",
    "FUN",
    "GLOBAL",
    "GROUP",
    "HAVING",
    "ILIKE",
    "IN",
    "INF",
    "INNER",
    "INTERSECT",
    "INTERVAL",
    "IS",
    "JOIN",
    "LEFT",
    "LET",
    "LIKE",
    "LIMIT",
    "MATERIALIZED",
    "MOD",
    "NAN",
    "NOT",
    "NULL",
    "NULLS",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "OVER",
    "PIVOT",
    "PREWHERE",
    "QUALIFY",
    "RIGHT",
    "SAMPLE",
    "SELECT",
    "SEMI",
    "SETTINGS",
    "THEN",
    "THROW",
    "TRUE",
    "TRY",
    "UNION",
    "UNPIVOT",
    "USING",
    "WHEN",
    "WHERE",
    "WHILE",
    "WINDOW",
    "WITH",
    "WITHIN",
];

/// Reserved words that PostHog's grammar never takes as a name, not even as a column or
/// after a dot: Hog's statement words, WITHIN and MATERIALIZED, the set operators, and the
/// literal words. Every other reserved word can name a column (`select a, where`), a CTE or
/// a window where a name is expected and no clause can start.
const NEVER_NAMES: &[&str] = &[
    "CATCH",
    "EXCEPT",
    "FINALLY",
    "FN",
    "FUN",
    "INF",
    "INTERSECT",
    "LET",
    "MATERIALIZED",
    "NAN",
    "NULL",
    "THROW",
    "TRY",
    "WHILE",
    "WITHIN",
];

/// Whether `word` can never be a name (case-insensitive): see `NEVER_NAMES`.
pub fn is_never_name(word: &str) -> bool {
    NEVER_NAMES.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// Words PostHog refuses as an alias unless quoted (`SELECT 0 AS true`).
const RESERVED_ALIASES: &[&str] = &["TRUE", "FALSE", "NULL", "TEAM_ID"];

/// Whether `word`, unquoted, is refused as an alias: see `RESERVED_ALIASES` and
/// `NEVER_NAMES`.
pub fn is_reserved_alias(word: &str) -> bool {
    RESERVED_ALIASES
        .iter()
        .any(|r| r.eq_ignore_ascii_case(word))
        || is_never_name(word)
}

/// Whether `word` is reserved (case-insensitive): see `RESERVED`.
pub fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// Words that open the parts of a window specification (never a base window name).
pub const WINDOW_WORDS: &[&str] = &["PARTITION", "ORDER", "ROWS", "RANGE"];

/// A name standing on its own (column, alias, table, CTE): backticks when it is not a plain
/// identifier, is a reserved word or is refused as a bare alias (`team_id`).
pub fn ident(name: &str) -> String {
    if is_plain_identifier(name) && !is_reserved(name) && !is_reserved_alias(name) {
        name.to_string()
    } else {
        quote(name)
    }
}

pub(crate) fn escape_into(out: &mut String, s: &str, quote: char) {
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

pub(crate) fn quote(name: &str) -> String {
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
