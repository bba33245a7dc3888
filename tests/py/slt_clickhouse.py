#!/usr/bin/env python3
"""Runs the HogQL semantics corpus (tests/slt/*.slt) against ClickHouse (chdb) over the fixture.

The same .slt files are run by hedgerow's Rust runner against hedgerow's engine; this module
proves that every expected row in them is what ClickHouse answers. Expected rows therefore come
from chdb (`--fill`), never from guessing.

File format (kept deliberately small; the Rust runner implements exactly this):

    # free comment
    # clickhouse: SELECT ...          ClickHouse form of the next case (continuation lines
    # clickhouse: ...                 repeat the prefix), when the HogQL text does not run
    #                                 as-is in ClickHouse
    # clickhouse: skip <reason>       the next case cannot be checked in ClickHouse
    query <letters> [rowsort|nosort]
    SELECT ...                        HogQL, one or more lines
    ----
    cell<TAB>cell
                                      a blank line ends the case
    query error <substring of the error message>
    SELECT ...

The ClickHouse side sees one table, `events`, holding team 1's events of
tests/slt/fixture/events.jsonl (team 2's rows are not loaded: HogQL never sees them), with the
session time zone America/New_York. Property access in the query text (`properties.$x`,
`e.properties.a.b`, `properties['x']`) is rewritten to `hogql_prop*(...)` calls, SQL functions
created here that give HogQL's property semantics. The rewrite is also applied to
`# clickhouse:` forms, so they can use the same sugar. HogQL function names that ClickHouse lacks
and that PostHog compiles by a plain rename or cast exist here as SQL functions of the same name
(HOGQL_RENAMES: toInt, toFloat, toIntOrZero, toFloatOrZero); every other HogQL-only behaviour is
written out in the case's `# clickhouse:` form.

Typed properties: as PostHog, a top-level event property whose definition is Numeric, Boolean
or DateTime is read through a cast. The definitions are derived here from the fixture with
PostHog's detection rules (`property_types`), independently of hedgerow's code, and the
rewrite wraps `properties.x` accordingly (a hand-written `hogql_prop(...)` stays untyped).

Usage:
    python tests/py/slt_clickhouse.py                      check every tests/slt/*.slt
    python tests/py/slt_clickhouse.py tests/slt/x.slt      check some files
    python tests/py/slt_clickhouse.py --fill tests/slt/x.slt
                                   rewrite the expected rows (and the column letters) of the
                                   given files from chdb; for authoring only
"""

from __future__ import annotations

import json
import math
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SLT_DIR = REPO_ROOT / "tests" / "slt"
FIXTURE = SLT_DIR / "fixture" / "events.jsonl"

TEAM_ID = 1
PROJECT_TZ = "America/New_York"
PERSON_NAMESPACE = uuid.UUID("932979b4-65c3-4424-8467-0b66ec27bc22")
CREATED_AT_UTC = "2024-06-15 12:00:00"
# a HogQL query without LIMIT returns at most this many rows
DEFAULT_ROW_LIMIT = 100

CH_PREFIX = "# clickhouse:"

EVENTS_COLUMNS = [
    ("uuid", "String"),
    ("event", "String"),
    ("distinct_id", "String"),
    ("properties", "String"),
    ("timestamp", f"DateTime64(6, '{PROJECT_TZ}')"),
    ("created_at", f"DateTime64(6, '{PROJECT_TZ}')"),
    ("person_id", "UUID"),
    ("elements_chain", "String"),
    ("$session_id", "Nullable(String)"),
    ("$window_id", "Nullable(String)"),
    ("$group_0", "Nullable(String)"),
    ("$group_1", "Nullable(String)"),
    ("$group_2", "Nullable(String)"),
    ("$group_3", "Nullable(String)"),
    ("$group_4", "Nullable(String)"),
]

# HogQL property semantics: missing key, JSON null and "" are NULL; strings are themselves
# (JSON escapes decoded); numbers, booleans, objects and arrays are their JSON text.
MAX_PROP_DEPTH = 4


# HogQL-only names PostHog compiles to a ClickHouse call (posthog/hogql/functions/clickhouse/
# conversions.py): defined as SQL functions of the same name in the chdb session.
HOGQL_RENAMES = {
    "toInt": "(x) -> accurateCastOrNull(x, 'Int64')",
    "toFloat": "(x) -> accurateCastOrNull(x, 'Float64')",
    "toIntOrZero": "(x) -> toInt64OrZero(x)",
    "toFloatOrZero": "(x) -> toFloat64OrZero(x)",
}


def _prop_function(depth: int) -> str:
    name = "hogql_prop" if depth == 1 else f"hogql_prop{depth}"
    keys = ", ".join(f"k{i}" for i in range(1, depth + 1))
    return (
        f"CREATE FUNCTION {name} AS (j, {keys}) -> "
        f"if(JSONType(j, {keys}) = 'String', nullIf(JSONExtractString(j, {keys}), ''), "
        f"if(JSONType(j, {keys}) = 'Null', NULL, JSONExtractRaw(j, {keys})))"
    )


# --------------------------------------------------------------------------------------------
# Parsing


class SltError(Exception):
    """A malformed .slt file."""


@dataclass
class Case:
    path: str
    line: int  # 1-based line of the `query` header
    kind: str  # "query" or "error"
    sql: str
    letters: str = ""
    sort: str = "nosort"
    expected: list[str] = field(default_factory=list)
    clickhouse: str | None = None
    skip: str | None = None
    error: str | None = None
    # 0-based line span [start, end) of the expected rows, for --fill
    rows_span: tuple[int, int] = (0, 0)
    header_index: int = 0

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse_slt(text: str, path: str = "<text>") -> list[Case]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    cases: list[Case] = []
    pending_ch: list[str] = []
    pending_line = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(CH_PREFIX):
            if not pending_ch:
                pending_line = i + 1
            rest = line[len(CH_PREFIX):]
            pending_ch.append(rest[1:] if rest.startswith(" ") else rest)
            i += 1
            continue
        if line.startswith("#") or line.strip() == "":
            i += 1
            continue
        if not line.startswith("query"):
            raise SltError(f"{path}:{i + 1}: expected 'query', a comment or a blank line: {line!r}")
        header = line.split()
        if header[0] != "query":
            raise SltError(f"{path}:{i + 1}: bad header {line!r}")
        case = Case(path=path, line=i + 1, kind="query", sql="", header_index=i)
        if len(header) >= 2 and header[1] == "error":
            case.kind = "error"
            case.error = line.split(None, 2)[2].strip() if len(header) >= 3 else ""
            if not case.error:
                raise SltError(f"{path}:{i + 1}: 'query error' needs a message substring")
        else:
            if len(header) < 2 or not re.fullmatch(r"[A-Za-z]+", header[1]) or header[1] in (
                "rowsort", "nosort"):
                raise SltError(f"{path}:{i + 1}: 'query' needs column letters: {line!r}")
            case.letters = header[1]
            if len(header) >= 3:
                if header[2] not in ("rowsort", "nosort") or len(header) > 3:
                    raise SltError(f"{path}:{i + 1}: unknown sort mode in {line!r}")
                case.sort = header[2]
        if pending_ch:
            first = pending_ch[0].strip()
            if first == "skip" or first.startswith("skip "):
                case.skip = first[4:].strip()
                if len(case.skip) < 10:
                    raise SltError(f"{path}:{pending_line}: a skip needs a specific reason")
                if len(pending_ch) > 1:
                    raise SltError(f"{path}:{pending_line}: 'skip' takes one line")
            else:
                case.clickhouse = "\n".join(pending_ch).strip()
            if case.kind == "error" and case.clickhouse is not None:
                raise SltError(f"{path}:{pending_line}: an error case has no ClickHouse form")
            pending_ch = []
        i += 1
        sql: list[str] = []
        while i < len(lines) and lines[i].strip() != "" and lines[i] != "----":
            sql.append(lines[i])
            i += 1
        if not sql:
            raise SltError(f"{path}:{case.line}: case without query text")
        case.sql = "\n".join(sql)
        if case.kind == "query":
            if i >= len(lines) or lines[i] != "----":
                raise SltError(f"{path}:{case.line}: query without '----' line")
            i += 1
            start = i
            while i < len(lines) and lines[i] != "":
                case.expected.append(lines[i])
                i += 1
            case.rows_span = (start, i)
        elif i < len(lines) and lines[i] == "----":
            raise SltError(f"{path}:{case.line}: an error case has no result rows")
        cases.append(case)
    if pending_ch:
        raise SltError(f"{path}:{pending_line}: '# clickhouse:' lines not followed by a case")
    return cases


# --------------------------------------------------------------------------------------------
# HogQL property access -> ClickHouse


_IDENT_START = re.compile(r"[A-Za-z_$]")
_PROP_RE = re.compile(
    r"""(?P<prefix>(?:[A-Za-z_][A-Za-z0-9_]*\.)?)properties
        (?P<chain>(?:\.[A-Za-z0-9_$]+|\[\s*'(?:[^'\\]|\\.)*'\s*\])+)""",
    re.VERBOSE,
)
_CHAIN_PART = re.compile(r"\.(?P<name>[A-Za-z0-9_$]+)|\[\s*(?P<lit>'(?:[^'\\]|\\.)*')\s*\]")


# PostHog's property type detection (property-defs-rs): the first value that says something
# decides a property's type.
_ALWAYS_STRING_PREFIXES = ("utm_", "$feature/", "$survey_response")
_TIME_WORDS = ("time", "timestamp", "date", "_at", "-at", "createdat", "updatedat")
_NOT_EVENT_PROPERTIES = {"$set", "$set_once", "$unset", "$groups",
                         "$group_0", "$group_1", "$group_2", "$group_3", "$group_4"}
_DATE_PREFIX = re.compile(r"^((\d{4}[/-][0-2]\d[/-][0-3]\d)|([0-2]\d[/-][0-3]\d[/-]\d{4}))"
                          r"([ T][0-2]\d:[0-6]\d:[0-6]\d.*)?$")
_SIX_MONTHS_S = 15_768_000


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _likely_date(s: str) -> bool:
    from email.utils import parsedate_to_datetime
    if _RFC3339.match(s) or _DATE_PREFIX.match(s):
        return True
    try:
        parsedate_to_datetime(s)
        return True
    except (TypeError, ValueError, IndexError):
        return False


def detect_property_type(key: str, value, now_s: int) -> str | None:
    key = key.lower()
    if key.startswith(_ALWAYS_STRING_PREFIXES) or key == "$feature_flag_response":
        return "String"
    if any(w in key for w in _TIME_WORDS):
        if isinstance(value, str) and _likely_date(value):
            return "DateTime"
        if (isinstance(value, int) and not isinstance(value, bool) and value >= 0
                and value >= now_s - _SIX_MONTHS_S):
            return "DateTime"
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, (int, float)):
        return "Numeric"
    if isinstance(value, str):
        t = value.strip()
        if t in ("true", "false", "TRUE", "FALSE"):
            return "Boolean"
        return "DateTime" if _likely_date(t) else "String"
    return None


def property_types(path: Path | None = None, team: int = TEAM_ID) -> dict[str, str]:
    """Event property name -> type, for the fixture's team in capture order."""
    from datetime import datetime, timezone
    now_s = int(datetime.fromisoformat(CREATED_AT_UTC).replace(tzinfo=timezone.utc).timestamp())
    types: dict[str, str | None] = {}
    for line in (path or FIXTURE).read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if e["team"] != team:
            continue
        for k, v in e["properties"].items():
            if k in _NOT_EVENT_PROPERTIES or types.get(k) is not None:
                continue
            types[k] = detect_property_type(k, v, now_s)
    return {k: t for k, t in types.items() if t is not None}


def typed_property(call: str, ty: str | None) -> str:
    """The ClickHouse form of HogQL's cast for a typed property (PostHog's PropertySwapper:
    toFloat, toDateTime, toBool(transform(toString(x), ['true','false'], [1,0], NULL)))."""
    if ty == "Numeric":
        return f"accurateCastOrNull({call}, 'Float64')"
    if ty == "DateTime":
        return f"parseDateTime64BestEffortOrNull({call}, 6, '{PROJECT_TZ}')"
    if ty == "Boolean":
        return f"toBool(transform(toString({call}), ['true', 'false'], [1, 0], NULL))"
    return call


_PROPERTY_TYPES: dict[str, str] | None = None


def _property_type(name: str) -> str | None:
    global _PROPERTY_TYPES
    if _PROPERTY_TYPES is None:
        _PROPERTY_TYPES = property_types()
    return _PROPERTY_TYPES.get(name)


def ch_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _unquote(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: m.group(1), body)


def rewrite_properties(sql: str) -> str:
    """Rewrites `properties.a.b` / `x.properties['a']` outside string literals and quoted
    identifiers into hogql_prop*(x.properties, 'a', 'b')."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'`\"":
            j = i + 1
            while j < n:
                if sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # doubled quote
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
            continue
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
            continue
        prev = sql[i - 1] if i > 0 else " "
        if (_IDENT_START.match(c) and not (prev.isalnum() or prev in "_$.")):
            m = _PROP_RE.match(sql, i)
            if m and m.group("prefix") != "person.":
                keys = []
                raw_keys = []
                for part in _CHAIN_PART.finditer(m.group("chain")):
                    keys.append(ch_string(part.group("name")) if part.group("name")
                                else part.group("lit"))
                    raw_keys.append(part.group("name") if part.group("name")
                                    else _unquote(part.group("lit")))
                if len(keys) > MAX_PROP_DEPTH:
                    raise SltError(f"property path deeper than {MAX_PROP_DEPTH}: {m.group(0)}")
                name = "hogql_prop" if len(keys) == 1 else f"hogql_prop{len(keys)}"
                call = f"{name}({m.group('prefix')}properties, {', '.join(keys)})"
                if len(raw_keys) == 1:
                    call = typed_property(call, _property_type(raw_keys[0]))
                out.append(call)
                i = m.end()
                continue
            # copy the whole identifier so that we never start matching mid-word
            m2 = re.compile(r"[A-Za-z0-9_$]+").match(sql, i)
            out.append(m2.group(0))
            i = m2.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def clickhouse_sql(case: Case) -> str:
    return rewrite_properties(case.clickhouse if case.clickhouse is not None else case.sql)


# --------------------------------------------------------------------------------------------
# Rendering ClickHouse TSV the way the corpus writes cells


def _strip_wrappers(t: str) -> str:
    changed = True
    while changed:
        changed = False
        for w in ("Nullable(", "LowCardinality("):
            if t.startswith(w) and t.endswith(")"):
                t = t[len(w):-1]
                changed = True
    return t


_TSV_UNESCAPE = {"t": "\t", "n": "\n", "\\": "\\", "'": "'", "0": "\0", "b": "\b", "f": "\f",
                 "r": "\r", "a": "\a", "v": "\v", '"': '"'}


def tsv_unescape(cell: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(cell):
        c = cell[i]
        if c == "\\" and i + 1 < len(cell):
            out.append(_TSV_UNESCAPE.get(cell[i + 1], cell[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def escape_cell(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _bools_to_ints(text: str) -> str:
    """true/false outside quotes -> 1/0 (arrays and tuples holding Bool)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "'":
            j = i + 1
            while j < len(text) and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        if text.startswith("true", i):
            out.append("1")
            i += 4
        elif text.startswith("false", i):
            out.append("0")
            i += 5
        else:
            out.append(c)
            i += 1
    return "".join(out)


def render_cell(raw: str, ch_type: str) -> str:
    if raw == "\\N":
        return "NULL"
    t = _strip_wrappers(ch_type)
    if t in ("String",) or t.startswith("FixedString(") or t.startswith("Enum"):
        value = tsv_unescape(raw)
        return "(empty)" if value == "" else escape_cell(value)
    if t == "Bool":
        return {"true": "1", "false": "0"}.get(raw, raw)
    if t.startswith(("Array(", "Tuple(", "Map(")):
        return _bools_to_ints(raw) if "Bool" in t else raw
    if t.startswith("Float"):
        return {"-nan": "nan", "+nan": "nan", "+inf": "inf"}.get(raw, raw)
    return raw


def parse_tsv_with_names_and_types(text: str) -> tuple[list[str], list[str], list[list[str]]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise ValueError(f"unexpected TSVWithNamesAndTypes output: {text!r}")
    names = lines[0].split("\t")
    types = [tsv_unescape(t) for t in lines[1].split("\t")]
    rows = [line.split("\t") for line in lines[2:]]
    return names, types, rows


def render_rows(text: str) -> tuple[list[str], list[str]]:
    """ClickHouse TSVWithNamesAndTypes -> (rendered rows, types)."""
    _names, types, rows = parse_tsv_with_names_and_types(text)
    out = []
    for row in rows:
        if len(row) != len(types):
            raise ValueError(f"row has {len(row)} cells, {len(types)} types: {row!r}")
        out.append("\t".join(render_cell(c, t) for c, t in zip(row, types)))
    return out, types


def letters_for(types: list[str]) -> str:
    out = []
    for t in types:
        t = _strip_wrappers(t)
        if re.fullmatch(r"U?Int\d+|Bool", t):
            out.append("I")
        elif t.startswith(("Float", "Decimal")):
            out.append("R")
        else:
            out.append("T")
    return "".join(out) or "T"


# --------------------------------------------------------------------------------------------
# Comparing


def _as_number(cell: str) -> float | None:
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", cell):
        return None
    return float(cell)


def cells_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=0.0) or x == y


def rows_equal(expected: list[str], got: list[str]) -> bool:
    if len(expected) != len(got):
        return False
    for e, g in zip(expected, got):
        ec, gc = e.split("\t"), g.split("\t")
        if len(ec) != len(gc) or not all(cells_equal(a, b) for a, b in zip(ec, gc)):
            return False
    return True


def has_limit(sql: str) -> bool:
    return re.search(r"\bLIMIT\b", sql, re.IGNORECASE) is not None


# --------------------------------------------------------------------------------------------
# chdb


def fixture_rows(path: Path = FIXTURE, team: int = TEAM_ID) -> list[dict]:
    """The events table rows (as hedgerow stores them) of one team."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        if e["team"] != team:
            continue
        p = e["properties"]
        groups = p.get("$groups") if isinstance(p.get("$groups"), dict) else {}
        rows.append({
            "uuid": e["uuid"],
            "event": e["event"],
            "distinct_id": e["distinct_id"],
            "properties": json.dumps(p, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
            "ts": e["timestamp"],
            "person_id": str(uuid.uuid5(PERSON_NAMESPACE, f"{team}:{e['distinct_id']}")),
            "elements_chain": p.get("$elements_chain") or "",
            "session_id": p.get("$session_id"),
            "window_id": p.get("$window_id"),
            "group_0": groups.get("company"),
        })
    return rows


class ClickHouse:
    """One chdb session holding the fixture as the `events` table."""

    def __init__(self) -> None:
        from chdb import session  # imported here so that parsing works without chdb

        self.s = session.Session()
        self.s.query(f"SET session_timezone = '{PROJECT_TZ}'")
        # as PostHog sets for every HogQL query: NULL IN (…, NULL, …) is true
        self.s.query("SET transform_null_in = 1")
        for depth in range(1, MAX_PROP_DEPTH + 1):
            name = "hogql_prop" if depth == 1 else f"hogql_prop{depth}"
            self.s.query(f"DROP FUNCTION IF EXISTS {name}")
            self.s.query(_prop_function(depth))
        for name, body in HOGQL_RENAMES.items():
            self.s.query(f"DROP FUNCTION IF EXISTS {name}")
            self.s.query(f"CREATE FUNCTION {name} AS {body}")
        self.s.query("DROP TABLE IF EXISTS events")
        cols = ", ".join(f"`{n}` {t}" for n, t in EVENTS_COLUMNS)
        self.s.query(f"CREATE TABLE events ({cols}) ENGINE = Memory")
        self.rows = fixture_rows()
        data = "\n".join(json.dumps(r, ensure_ascii=False) for r in self.rows)
        if "$$" in data:
            raise ValueError("fixture text must not contain $$")
        structure = ("uuid String, event String, distinct_id String, properties String, "
                     "ts String, person_id UUID, elements_chain String, "
                     "session_id Nullable(String), window_id Nullable(String), "
                     "group_0 Nullable(String)")
        self.s.query(
            "INSERT INTO events SELECT uuid, event, distinct_id, properties, "
            f"toTimeZone(parseDateTime64BestEffort(ts, 6, 'UTC'), '{PROJECT_TZ}'), "
            f"toTimeZone(toDateTime64('{CREATED_AT_UTC}', 6, 'UTC'), '{PROJECT_TZ}'), "
            "person_id, elements_chain, session_id, window_id, group_0, NULL, NULL, NULL, NULL "
            f"FROM format(JSONEachRow, '{structure}', $${data}$$)"
        )
        got = self.query_rows("SELECT count() FROM events")[0]
        if got != [str(len(self.rows))]:
            raise RuntimeError(f"fixture load: {got} rows, expected {len(self.rows)}")

    def query(self, sql: str) -> str:
        res = self.s.query(sql, "TSVWithNamesAndTypes")
        return res.bytes().decode("utf-8") if hasattr(res, "bytes") else str(res)

    def query_rows(self, sql: str) -> list[list[str]]:
        return parse_tsv_with_names_and_types(self.query(sql))[2]

    def run(self, case: Case) -> tuple[list[str], list[str]]:
        """(rendered rows, types) of the case's ClickHouse form; rowsort applied."""
        rows, types = render_rows(self.query(clickhouse_sql(case)))
        if case.sort == "rowsort":
            rows = sorted(rows)
        return rows, types


_CH: ClickHouse | None = None


def clickhouse() -> ClickHouse:
    global _CH
    if _CH is None:
        _CH = ClickHouse()
    return _CH


# --------------------------------------------------------------------------------------------
# Checking and filling


@dataclass
class FileResult:
    path: str
    checked: int = 0
    passed: int = 0
    errors: int = 0  # `query error` cases (not run in ClickHouse)
    skipped: int = 0
    failures: list[str] = field(default_factory=list)


def _diff(case: Case, sql: str, expected: list[str], got: list[str], note: str = "") -> str:
    exp = sorted(expected) if case.sort == "rowsort" else expected
    lines = [f"{case.where}: {note or 'rows differ'}", "  query:"]
    lines += [f"    {x}" for x in case.sql.split("\n")]
    if case.clickhouse is not None or sql != case.sql:
        lines.append("  ran in ClickHouse:")
        lines += [f"    {x}" for x in sql.split("\n")]
    width = max(len(exp), len(got))
    lines.append("  expected | got:")
    for k in range(width):
        e = exp[k] if k < len(exp) else "<none>"
        g = got[k] if k < len(got) else "<none>"
        mark = "  " if k < len(exp) and k < len(got) and rows_equal([e], [g]) else "!!"
        lines.append(f"  {mark} {e!r} | {g!r}")
    return "\n".join(lines)


def check_case(ch: ClickHouse, case: Case) -> str | None:
    """None when the case holds in ClickHouse, else a readable failure."""
    sql = clickhouse_sql(case)
    try:
        got, _types = ch.run(case)
    except Exception as exc:  # chdb raises its own error types
        return f"{case.where}: ClickHouse error: {exc}\n  ran: {sql}"
    if not has_limit(case.sql) and len(got) > DEFAULT_ROW_LIMIT:
        return (f"{case.where}: ClickHouse returned {len(got)} rows for a query without LIMIT; "
                f"HogQL returns at most {DEFAULT_ROW_LIMIT} (give a ClickHouse form with LIMIT)")
    if case.sort == "nosort" and len(got) > 1 and not re.search(
            r"\bORDER\s+BY\b", case.sql, re.IGNORECASE):
        return f"{case.where}: several rows without ORDER BY need 'rowsort'"
    expected = sorted(case.expected) if case.sort == "rowsort" else case.expected
    if not rows_equal(expected, got):
        return _diff(case, sql, case.expected, got)
    return None


def check_file(path: Path, ch: ClickHouse | None = None) -> FileResult:
    try:
        rel = str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        rel = str(path)
    cases = parse_slt(path.read_text(encoding="utf-8"), rel)
    res = FileResult(rel)
    for case in cases:
        if case.kind == "error":
            res.errors += 1
            continue
        if case.skip is not None:
            res.skipped += 1
            continue
        ch = ch or clickhouse()
        res.checked += 1
        failure = check_case(ch, case)
        if failure is None:
            res.passed += 1
        else:
            res.failures.append(failure)
    return res


def fill_file(path: Path, ch: ClickHouse | None = None) -> list[str]:
    """Rewrites the expected rows of a file from chdb. Returns the cases that failed to run."""
    text = path.read_text(encoding="utf-8")
    cases = parse_slt(text, str(path))
    lines = text.split("\n")
    problems = []
    # replace from the bottom so that earlier spans stay valid
    for case in reversed(cases):
        if case.kind == "error" or case.skip is not None:
            continue
        ch = ch or clickhouse()
        try:
            got, types = ch.run(case)
        except Exception as exc:
            problems.append(f"{case.where}: ClickHouse error: {exc}")
            continue
        if not has_limit(case.sql) and len(got) > DEFAULT_ROW_LIMIT:
            problems.append(f"{case.where}: {len(got)} rows without LIMIT")
        start, end = case.rows_span
        lines[start:end] = got
        header = lines[case.header_index].split()
        header[1] = letters_for(types)
        lines[case.header_index] = " ".join(header)
    path.write_text("\n".join(lines), encoding="utf-8")
    return problems


def main(argv: list[str]) -> int:
    fill = "--fill" in argv
    files = [Path(a).resolve() for a in argv if a != "--fill"]
    if not files:
        if fill:
            print("--fill needs the .slt files to rewrite", file=sys.stderr)
            return 2
        files = sorted(SLT_DIR.glob("*.slt"))
    status = 0
    for f in files:
        if fill:
            problems = fill_file(f)
            for p in problems:
                print(p)
            status |= bool(problems)
        res = check_file(f)
        for failure in res.failures:
            print(failure)
            print()
        print(f"{res.path}: {res.passed}/{res.checked} checked cases pass, "
              f"{res.errors} error cases, {res.skipped} skipped")
        status |= bool(res.failures) or res.checked == 0
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
