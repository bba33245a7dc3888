//! HogQL's syntax tree. Pure data: no DataFusion, no I/O.
//!
//! Every node that can be named in an error carries a [`Span`] (byte offsets into the query
//! text). Spans compare equal to each other so that two trees that differ only in positions
//! are equal: the parser's round-trip tests rely on it.

/// Byte offsets `[start, end)` into the query text.
#[derive(Debug, Clone, Copy, Default, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl PartialEq for Span {
    /// Positions never make two trees different.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A whole query: one SELECT or a set operation over queries.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Select(Box<Select>),
    /// `left UNION ALL right` etc. Left-associative, as ClickHouse reads it.
    SetOp {
        op: SetOp,
        left: Box<Query>,
        right: Box<Query>,
    },
    /// `(query) OFFSET n`: an OFFSET after a parenthesized query (PostHog's grammar;
    /// ClickHouse refuses it).
    Offset {
        query: Box<Query>,
        offset: Box<Expr>,
    },
    /// `{name}` standing for a whole query (PostHog's grammar; its placeholders can hold
    /// queries, hedgerow's `values` cannot).
    Placeholder(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    UnionAll,
    UnionDistinct,
    Intersect,
    Except,
}

/// One `SELECT … FROM … WHERE …` block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Select {
    pub with: Vec<Cte>,
    pub distinct: bool,
    /// Select list; aliases appear as [`ExprKind::Alias`], stars as [`ExprKind::Star`].
    pub columns: Vec<Expr>,
    pub from: Option<From>,
    pub array_join: Option<ArrayJoin>,
    pub prewhere: Option<Expr>,
    pub where_: Option<Expr>,
    pub group_by: Option<GroupBy>,
    pub having: Option<Expr>,
    /// `WINDOW name AS (spec), …`
    pub window: Vec<(String, WindowSpec)>,
    pub qualify: Option<Expr>,
    /// `[USING] SAMPLE ratio` after PREWHERE, WHERE, GROUP BY or QUALIFY (DuckDB's form,
    /// which PostHog's grammar reads); the table form is [`TableExpr::sample`].
    pub sample: Option<Sample>,
    pub order_by: Vec<OrderExpr>,
    /// `LIMIT n [OFFSET m] BY exprs`
    pub limit_by: Option<LimitBy>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
    /// `LIMIT n WITH TIES`
    pub with_ties: bool,
    /// `LIMIT n %`: a percentage of the rows (PostHog's grammar).
    pub limit_percent: bool,
    pub span: Span,
}

/// A `WITH` entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Cte {
    /// `WITH name AS (SELECT …)`
    Subquery {
        name: String,
        query: Box<Query>,
        span: Span,
    },
    /// `WITH expr AS name`
    Expr {
        name: String,
        expr: Expr,
        span: Span,
    },
}

/// `FROM first [JOIN …]*`
#[derive(Debug, Clone, PartialEq)]
pub struct From {
    pub first: TableExpr,
    pub joins: Vec<Join>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableExpr {
    pub source: TableSource,
    pub alias: Option<String>,
    /// `SAMPLE ratio [OFFSET offset]`
    pub sample: Option<Sample>,
    /// `FINAL`
    pub is_final: bool,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TableSource {
    /// `events`, `db.table`: the dotted parts.
    Table(Vec<String>),
    Subquery(Box<Query>),
    /// `name(args)` in FROM. Parsed so the error can be precise; never executed.
    Function {
        name: String,
        args: Vec<Expr>,
    },
    /// `{name}` in FROM.
    Placeholder(String),
    /// A join chain as one table: in parentheses (`FROM (a JOIN b ON …)`) or under a PIVOT
    /// (`FROM a JOIN b ON … PIVOT (…)`). Parsed so the error can be precise.
    Joined(Box<From>),
    /// A HogQLX tag in FROM (`FROM <HogQLQuery query='…' />`). Parsed so the error can be
    /// precise; never executed.
    Tag(Box<Tag>),
    /// `base PIVOT (…)` / `base UNPIVOT (…)` (DuckDB's and Snowflake's form, which PostHog's
    /// grammar reads). Parsed so the error can be precise; ClickHouse has no PIVOT.
    Pivot {
        base: Box<TableExpr>,
        pivot: Box<Pivot>,
    },
}

/// A HogQLX tag (PostHog's JSX-like syntax): `<Name attr='text' other={expr} flag />` or
/// `<Name …>children</Name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    pub name: String,
    pub attrs: Vec<(String, TagValue)>,
    pub children: Vec<TagChild>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TagValue {
    /// `attr='text'`
    String(String),
    /// `attr={expr}`
    Expr(Expr),
    /// `attr` alone
    Flag,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TagChild {
    /// Text between tags as written (PostHog keeps it; whitespace alone across a line
    /// break, indentation, is dropped).
    Text(String),
    /// `{expr}`
    Expr(Expr),
    Tag(Tag),
}

/// The inside of `PIVOT (values FOR column IN (list))`; for UNPIVOT, `values` names the
/// value column(s).
#[derive(Debug, Clone, PartialEq)]
pub struct Pivot {
    pub unpivot: bool,
    pub values: Vec<Expr>,
    pub column: Expr,
    pub list: Vec<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub ratio: Expr,
    pub offset: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    Inner,
    Left,
    Right,
    Full,
    Cross,
}

/// ClickHouse's join strictness words (`ANY`, `ALL`, `SEMI`, `ANTI`, `ASOF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinStrictness {
    Any,
    All,
    Semi,
    Anti,
    Asof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    pub kind: JoinKind,
    pub strictness: Option<JoinStrictness>,
    pub global: bool,
    pub table: TableExpr,
    pub constraint: Option<JoinConstraint>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JoinConstraint {
    On(Expr),
    Using(Vec<String>),
    /// `USING` with expressions that are not column names (`USING 1`): PostHog's grammar
    /// reads a list of expressions; ClickHouse takes names only.
    UsingExprs(Vec<Expr>),
}

/// `[LEFT] ARRAY JOIN expr AS alias, …` (PostHog requires the alias)
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayJoin {
    pub left: bool,
    pub exprs: Vec<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupBy {
    pub exprs: Vec<Expr>,
    pub modifier: GroupByModifier,
    pub with_totals: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupByModifier {
    #[default]
    None,
    /// `GROUP BY ROLLUP(a, b)` or `GROUP BY a, b WITH ROLLUP`
    Rollup,
    /// `GROUP BY CUBE(a, b)` or `GROUP BY a, b WITH CUBE`
    Cube,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderExpr {
    pub expr: Expr,
    pub desc: bool,
    /// `NULLS FIRST` → Some(true), `NULLS LAST` → Some(false).
    pub nulls_first: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LimitBy {
    pub limit: Expr,
    pub offset: Option<Expr>,
    pub by: Vec<Expr>,
}

/// `OVER (…)`, `OVER name`, or a `WINDOW` clause entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WindowSpec {
    /// `OVER (w ORDER BY …)`: a named window this one extends.
    pub base: Option<String>,
    pub partition_by: Vec<Expr>,
    pub order_by: Vec<OrderExpr>,
    pub frame: Option<WindowFrame>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Over {
    Named(String),
    Spec(WindowSpec),
}

#[derive(Debug, Clone, PartialEq)]
pub struct WindowFrame {
    pub units: FrameUnits,
    pub start: FrameBound,
    /// `BETWEEN start AND end`; None for the single-bound form.
    pub end: Option<FrameBound>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameUnits {
    Rows,
    Range,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(Box<Expr>),
    CurrentRow,
    Following(Box<Expr>),
    UnboundedFollowing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Self {
        Expr { kind, span }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    /// Integers up to UInt64's range (and down to Int64's).
    Int(i128),
    Float(f64),
    String(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    And,
    Or,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// `||` string concatenation
    Concat,
    /// `??` null coalescing
    Coalesce,
    Like,
    NotLike,
    ILike,
    NotILike,
    /// `=~` regex match
    Regex,
    /// `!~`
    NotRegex,
    /// `=~*` case-insensitive regex match
    IRegex,
    /// `!~*`
    NotIRegex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalUnit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InList {
    /// `x IN (1, 2, 3)`
    List(Vec<Expr>),
    /// `x IN (SELECT …)`
    Subquery(Box<Query>),
    /// `x IN some_array_or_tuple_expr` / `x IN cte_name`
    Expr(Box<Expr>),
    /// `person_id IN COHORT 5` / `IN COHORT 'name'`: the members of a cohort, by id or name.
    Cohort(Box<Expr>),
}

/// The columns of [`ExprKind::Columns`].
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    pub source: ColumnsSource,
    /// `EXCLUDE (names)`: names left out (ClickHouse's `* EXCEPT`).
    pub exclude: Vec<String>,
    /// `REPLACE (expr AS name, …)`: a column's value replaced, its name kept.
    pub replace: Vec<(Expr, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ColumnsSource {
    /// `*` (None) or `t.*`.
    Star(Option<Vec<String>>),
    /// `COLUMNS('regex')`: the columns whose names match.
    Regex(String),
    /// `COLUMNS(a, b)`
    List(Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Literal(Literal),
    /// A dotted name as written: `event`, `e.event`, `properties.$browser`,
    /// `person.properties.email`. Resolution decides what each part is.
    Field(Vec<String>),
    /// `*` (None) or `t.*` (Some(["t"])).
    Star(Option<Vec<String>>),
    /// `base[index]`, including `properties['$browser']`; `base?.[index]` and `base?.name`
    /// when `null_safe` (PostHog's null-safe access: NULL when `base` is NULL, as ClickHouse's
    /// `base[index]` already is).
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        null_safe: bool,
    },
    /// `t.1`: 1-based tuple element; `t?.1` when `null_safe`.
    TupleElement {
        base: Box<Expr>,
        index: u64,
        null_safe: bool,
    },
    /// `name(args)`, `name(params)(args)` (parametric aggregates such as `quantile(0.9)(x)`),
    /// `count(DISTINCT x)`, `count(*)` (args = [Star(None)]), optionally `OVER …`.
    Call {
        name: String,
        params: Option<Vec<Expr>>,
        args: Vec<Expr>,
        distinct: bool,
        over: Option<Over>,
    },
    /// `* EXCLUDE (a)`, `t.* EXCLUDE (a)`, `COLUMNS('regex')`, `COLUMNS(a, b)`,
    /// `COLUMNS(* EXCLUDE (a) REPLACE (x + 1 AS x))`, `(* REPLACE (…))`: several columns of the
    /// select list at once.
    Columns(Box<Columns>),
    /// `f(x) IGNORE NULLS` (`respect` false) / `f(x) RESPECT NULLS`, also written before OVER.
    NullsAction {
        expr: Box<Expr>,
        respect: bool,
    },
    /// `f(x) WITHIN GROUP (ORDER BY …)`: an ordered-set aggregate (PostHog's grammar; its
    /// ClickHouse dialect refuses it).
    WithinGroup {
        call: Box<Expr>,
        order_by: Vec<OrderExpr>,
    },
    /// A HogQLX tag used as a value.
    Tag(Box<Tag>),
    /// `*COLUMNS('regex')`: the matching columns spread into a call's arguments (PostHog's
    /// grammar).
    Spread(Box<Expr>),
    /// `#3`: the 3rd column, by position (PostHog's grammar, for DuckDB-like databases).
    PositionalRef(u64),
    /// A call on an expression rather than a function name: `(x -> x * 2)(3)`, `a.b(1)`,
    /// `a['b'](1)` (PostHog's grammar reads them; ClickHouse has no such call).
    ExprCall {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    /// A Hog statement block as a lambda's body (`x -> { return x * 2 }`), kept as written
    /// between its braces: PostHog's grammar reads it, its HogQL refuses it.
    Block(String),
    /// `x -> body`, `(x, y) -> body`
    Lambda {
        params: Vec<String>,
        body: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    In {
        expr: Box<Expr>,
        list: InList,
        negated: bool,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        else_: Option<Box<Expr>>,
    },
    /// `CAST(x AS T)` and `x::T`; `ty` is the type as written, e.g. `Nullable(String)`.
    Cast {
        expr: Box<Expr>,
        ty: String,
    },
    /// `INTERVAL 1 DAY`, `INTERVAL '1 day'`
    Interval {
        value: Box<Expr>,
        unit: IntervalUnit,
    },
    /// `a ? b : c`
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        else_: Box<Expr>,
    },
    /// `[a, b]`
    Array(Vec<Expr>),
    /// `(a, b)` and `tuple(a, b)`
    Tuple(Vec<Expr>),
    /// `expr AS name` (ClickHouse allows it anywhere an expression stands).
    Alias {
        expr: Box<Expr>,
        name: String,
    },
    /// `{name}`: filled from the request's `values` before resolution.
    Placeholder(String),
    /// `{expr}`: a placeholder holding an expression (PostHog's templates), which values by
    /// name cannot fill.
    PlaceholderExpr(Box<Expr>),
    /// `(SELECT …)` used as a value.
    Subquery(Box<Query>),
    /// `EXISTS (SELECT …)`
    Exists(Box<Query>),
}
