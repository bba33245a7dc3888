"""The HogQL semantics corpus (tests/slt/*.slt) holds in ClickHouse (chdb).

One test per .slt file: every checked case's expected rows must be what ClickHouse answers for
the case's ClickHouse form over the fixture. Plus tests of the fixture, the parser, the property
rewrite and the cell rendering that the corpus relies on. Nothing here fills expected rows.

Run: ~/.cache/hedgerow/venv/bin/python -m pytest tests/py/test_slt_clickhouse.py -q
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import slt_clickhouse as slt  # noqa: E402

SLT_FILES = sorted(slt.SLT_DIR.glob("*.slt"))

REQUIRED_FILES = [
    "functions_datetime", "functions_string", "functions_url", "functions_json",
    "functions_conversion", "functions_math", "functions_conditional", "functions_array",
    "aggregates", "window", "nulls", "timezone", "select", "properties", "product", "errors",
]

# Every one of these must be called by at least one case's HogQL text.
REQUIRED_FUNCTIONS = """
count countIf uniq uniqIf uniqExact countDistinct sum avg min max sumIf avgIf minIf maxIf any
anyLast argMax argMin median quantile quantiles groupArray groupUniqArray topK windowFunnel
stddevPop stddevSamp varPop varSamp corr now today yesterday toStartOfDay toStartOfWeek
toStartOfMonth toStartOfQuarter toStartOfYear toStartOfHour toStartOfMinute toStartOfFiveMinutes
toStartOfFifteenMinutes toStartOfInterval toMonday dateTrunc toDate toDateTime toTimeZone dateDiff
dateAdd dateSub addDays addHours addMinutes addSeconds addWeeks addMonths addYears subtractDays
subtractHours subtractMinutes subtractSeconds subtractWeeks subtractMonths subtractYears
toIntervalSecond toIntervalMinute toIntervalHour toIntervalDay toIntervalWeek toIntervalMonth
toYear toQuarter toMonth toDayOfMonth toHour toMinute toSecond toDayOfWeek toYYYYMM toYYYYMMDD
formatDateTime toUnixTimestamp fromUnixTimestamp toString toInt toFloat toIntOrZero toFloatOrZero
toBool toUUID toJSONString parseDateTimeBestEffort coalesce ifNull nullIf isNull isNotNull if
multiIf transform lower upper concat length substring left right trim ltrim rtrim replaceOne
replaceAll replaceRegexpOne replaceRegexpAll extract extractAll match like ilike position
startsWith endsWith splitByChar splitByString concatWithSeparator domain path protocol
extractURLParameter has hasAny hasAll indexOf arrayElement arrayJoin arrayMap arrayFilter
arrayExists arrayAll arrayCount arraySort arrayDistinct arrayReverse arraySlice
arrayStringConcat range arraySum empty notEmpty JSONExtractString JSONExtractInt
JSONExtractFloat JSONExtractBool JSONExtractRaw JSONExtractArrayRaw JSONExtractKeys JSONHas
JSONLength JSONExtract round floor ceil abs pow sqrt exp log ln log2 log10 intDiv modulo
greatest least row_number rank dense_rank lag lead first_value last_value nth_value
""".split()

MIN_CASES = 350


# --------------------------------------------------------------------------------------------
# The corpus against ClickHouse


@pytest.fixture(scope="module")
def ch() -> slt.ClickHouse:
    return slt.clickhouse()


@pytest.mark.parametrize("path", SLT_FILES, ids=[p.name for p in SLT_FILES])
def test_slt_file(ch: slt.ClickHouse, path: Path) -> None:
    res = slt.check_file(path, ch)
    summary = (f"{res.path}: {res.passed}/{res.checked} checked cases pass, "
               f"{res.errors} error cases, {res.skipped} skipped")
    print(summary)
    assert res.checked > 0, f"{res.path}: no case was checked in ClickHouse"
    if path.stem == "errors":
        assert res.errors > 0, f"{res.path} has no `query error` case"
    assert not res.failures, summary + "\n\n" + "\n\n".join(res.failures)


def test_corpus_files_and_size() -> None:
    names = {p.stem for p in SLT_FILES}
    assert not set(REQUIRED_FILES) - names, f"missing .slt files: {set(REQUIRED_FILES) - names}"
    total = sum(len(slt.parse_slt(p.read_text(encoding="utf-8"), p.name)) for p in SLT_FILES)
    assert total >= MIN_CASES, f"{total} cases, expected at least {MIN_CASES}"


def test_every_required_function_has_a_case() -> None:
    called: set[str] = set()
    for p in SLT_FILES:
        for case in slt.parse_slt(p.read_text(encoding="utf-8"), p.name):
            called |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", case.sql))
    missing = [f for f in REQUIRED_FUNCTIONS if f not in called]
    assert not missing, f"functions without a case: {missing}"


def test_skips_have_specific_reasons() -> None:
    for p in SLT_FILES:
        for case in slt.parse_slt(p.read_text(encoding="utf-8"), p.name):
            if case.skip is not None:
                assert len(case.skip.split()) >= 3, f"{case.where}: vague skip {case.skip!r}"


# --------------------------------------------------------------------------------------------
# The fixture


def _load_generator():
    path = slt.SLT_DIR / "fixture" / "generate.py"
    spec = importlib.util.spec_from_file_location("slt_fixture_generate", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_fixture_is_the_generator_output() -> None:
    committed = slt.FIXTURE.read_text(encoding="utf-8")
    assert committed == _load_generator().generate(), (
        "tests/slt/fixture/events.jsonl differs from generate.py's output; "
        "run `python tests/slt/fixture/generate.py`")


def test_fixture_shape() -> None:
    events = [json.loads(line) for line in slt.FIXTURE.read_text(encoding="utf-8").splitlines()]
    teams = Counter(e["team"] for e in events)
    assert 280 <= teams[1] <= 330 and teams[2] == 20 and set(teams) == {1, 2}
    for e in events:
        assert set(e) == {"team", "uuid", "event", "distinct_id", "timestamp", "properties"}
        assert re.fullmatch(r"2024-0[1-6]-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", e["timestamp"])
        assert "2024-01-01" <= e["timestamp"][:10] <= "2024-06-14"
        banned = {"$set", "$set_once", "$unset", "$elements"}
        assert not banned & set(e["properties"]), e
        assert e["event"] not in ("$identify", "$create_alias")
    t1 = [e for e in events if e["team"] == 1]
    names = Counter(e["event"] for e in t1)
    for name in ("$pageview", "$autocapture", "$screen", "$pageleave", "signed up", "purchase"):
        assert names[name] > 0, name
    # team 2 carries values no team 1 answer may show
    t2_values = {json.dumps(e["properties"]) for e in events if e["team"] == 2}
    assert any("LeakBrowser" in v for v in t2_values)
    assert not any("LeakBrowser" in json.dumps(e) or "team2_secret" in json.dumps(e) for e in t1)


def test_only_team_1_is_loaded(ch: slt.ClickHouse) -> None:
    t1 = sum(1 for line in slt.FIXTURE.read_text().splitlines() if json.loads(line)["team"] == 1)
    assert ch.query_rows("SELECT count() FROM events") == [[str(t1)]]
    assert ch.query_rows("SELECT count() FROM events WHERE properties LIKE '%Leak%'") == [["0"]]


def test_table_columns(ch: slt.ClickHouse) -> None:
    names, types, _ = slt.parse_tsv_with_names_and_types(ch.query("SELECT * FROM events LIMIT 1"))
    assert list(zip(names, types)) == slt.EVENTS_COLUMNS
    rows = ch.query_rows(
        "SELECT toString(min(created_at)), toString(toTimeZone(min(created_at), 'UTC')), "
        "toString(min(timestamp)) FROM events")
    assert rows == [["2024-06-15 08:00:00.000000", "2024-06-15 12:00:00.000000",
                     "2023-12-31 19:00:00.000000"]]


# --------------------------------------------------------------------------------------------
# Property semantics in ClickHouse


def _expected_prop(value) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_property_access_matches_hogql_rules_for_every_fixture_value(ch: slt.ClickHouse) -> None:
    """hogql_prop*(…) against a Python reading of every top-level and nested key."""
    got = {}
    res = ch.s.query(
        "SELECT uuid, properties FROM events ORDER BY uuid", "JSONCompact").bytes().decode()
    rows = json.loads(res)["data"]
    checked = 0
    for uuid_, props_text in rows:
        props = json.loads(props_text)
        paths: list[tuple[list[str], object]] = []
        for k, v in props.items():
            paths.append(([k], v))
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    paths.append(([k, k2], v2))
                    if isinstance(v2, dict):
                        paths += [([k, k2, k3], v3) for k3, v3 in v2.items()]
        paths.append((["no_such_key"], None))
        exprs = []
        for keys, _ in paths:
            fn = "hogql_prop" if len(keys) == 1 else f"hogql_prop{len(keys)}"
            exprs.append(f"{fn}(properties, {', '.join(slt.ch_string(k) for k in keys)})")
        q = f"SELECT [{', '.join(exprs)}] FROM events WHERE uuid = {slt.ch_string(uuid_)}"
        got = json.loads(ch.s.query(q, "JSONCompact").bytes().decode())["data"][0][0]
        for (keys, value), g in zip(paths, got):
            assert g == _expected_prop(value), (uuid_, keys, value, g)
            checked += 1
    assert checked > 2000


def test_property_sugar_reads_escaped_and_nested_values(ch: slt.ClickHouse) -> None:
    q = slt.rewrite_properties(
        "SELECT properties.note, properties['coupon'], properties.cart.coupon, "
        "properties.gift_message, properties.items, properties.is_trial, properties.tags, "
        "properties.meta FROM events WHERE event = 'purchase' AND properties.plan = 'enterprise' "
        "AND properties.gift_message IS NOT NULL")
    rows, _ = slt.render_rows(ch.query(q))
    # is_trial is a Boolean property (its first value was a JSON boolean): read as a Bool.
    assert rows == ['He said "hi" \\\\ then left\tSPRING\\\\24\tSPRING\\\\24\tGrüße 🎁 日本\t'
                    '["sku-ü","sku-\\\\"q\\\\""]\t1\t[]\t{}']


def test_property_types_follow_posthogs_detection() -> None:
    now = 1_718_452_800  # 2024-06-15 12:00:00 UTC
    t = slt.detect_property_type
    assert t("revenue", 49, now) == "Numeric" and t("score", 0.5, now) == "Numeric"
    assert t("flag", False, now) == "Boolean" and t("flag", " TRUE ", now) == "Boolean"
    assert t("when", "2024-01-31", now) == "DateTime"
    assert t("when", "2024-01-31T13:05:00Z", now) == "DateTime"
    assert t("when", "31-01-2024", now) == "String"
    assert t("created_at", now - 3600, now) == "DateTime"
    assert t("created_at", now - 40_000_000, now) == "Numeric"
    assert t("utm_source", 5, now) == "String" and t("$feature/x", True, now) == "String"
    assert t("nps", None, now) is None and t("cart", {"a": 1}, now) is None
    types = slt.property_types()
    assert types["revenue"] == "Numeric" and types["is_trial"] == "Boolean"
    assert "nps" not in types and "$groups" not in types


# --------------------------------------------------------------------------------------------
# The rewrite, the parser and the rendering


@pytest.mark.parametrize("hogql, clickhouse", [
    ("SELECT properties.$browser FROM events",
     "SELECT hogql_prop(properties, '$browser') FROM events"),
    ("SELECT e.properties.cart.total FROM events e",
     "SELECT hogql_prop2(e.properties, 'cart', 'total') FROM events e"),
    ("SELECT properties['$os'], properties['a']['b']",
     "SELECT hogql_prop(properties, '$os'), hogql_prop2(properties, 'a', 'b')"),
    ("SELECT properties.cart['total']", "SELECT hogql_prop2(properties, 'cart', 'total')"),
    ("SELECT 'properties.x', `properties.y`", "SELECT 'properties.x', `properties.y`"),
    ("SELECT 'it''s properties.x' || properties.x",
     "SELECT 'it''s properties.x' || hogql_prop(properties, 'x')"),
    ("SELECT myproperties.x, person.properties.email, properties",
     "SELECT myproperties.x, person.properties.email, properties"),
    ("SELECT x -- properties.y\n, properties.z",
     "SELECT x -- properties.y\n, hogql_prop(properties, 'z')"),
])
def test_rewrite_properties(hogql: str, clickhouse: str) -> None:
    assert slt.rewrite_properties(hogql) == clickhouse


def test_parse_cases_and_clickhouse_forms() -> None:
    text = (
        "# comment\n"
        "# clickhouse: SELECT 1\n"
        "# clickhouse: UNION ALL SELECT 2\n"
        "query I rowsort\n"
        "SELECT a\n"
        "FROM b\n"
        "----\n"
        "1\n"
        "2\n"
        "\n"
        "query error Unknown function\n"
        "SELECT nope()\n"
        "\n"
        "# clickhouse: skip the fixed clock cannot be expressed here\n"
        "query T\n"
        "SELECT now()\n"
        "----\n"
        "x\ty z\n"
    )
    cases = slt.parse_slt(text, "t.slt")
    assert [c.kind for c in cases] == ["query", "error", "query"]
    a, b, c = cases
    assert (a.line, a.sort, a.sql, a.expected) == (4, "rowsort", "SELECT a\nFROM b", ["1", "2"])
    assert a.clickhouse == "SELECT 1\nUNION ALL SELECT 2"
    assert (b.error, b.sql) == ("Unknown function", "SELECT nope()")
    assert c.skip == "the fixed clock cannot be expressed here" and c.expected == ["x\ty z"]


@pytest.mark.parametrize("text", [
    "query\nSELECT 1\n----\n1\n",                      # no letters
    "query I sorted\nSELECT 1\n----\n1\n",             # unknown sort mode
    "query I\nSELECT 1\n1\n",                          # no ----
    "query error\nSELECT 1\n",                         # no message
    "query error boom\nSELECT 1\n----\n1\n",           # rows on an error case
    "SELECT 1\n",                                      # stray text
    "# clickhouse: SELECT 1\n",                        # dangling ClickHouse form
    "# clickhouse: skip no\nquery I\nSELECT 1\n----\n1\n",  # vague skip
])
def test_parse_rejects_malformed(text: str) -> None:
    with pytest.raises(slt.SltError):
        slt.parse_slt(text)


@pytest.mark.parametrize("raw, ch_type, cell", [
    ("\\N", "Nullable(String)", "NULL"),
    ("", "String", "(empty)"),
    ("a\\tb\\\\c\\'d", "String", "a\\tb\\\\c'd"),
    ("true", "Bool", "1"),
    ("[true,false]", "Array(Bool)", "[1,0]"),
    ("['true','x\\'y']", "Array(String)", "['true','x\\'y']"),
    ("0.30000000000000004", "Float64", "0.30000000000000004"),
    ("-nan", "Float64", "nan"),
    ("2024-01-31 13:05:00.123456", "DateTime64(6, 'America/New_York')",
     "2024-01-31 13:05:00.123456"),
])
def test_render_cell(raw: str, ch_type: str, cell: str) -> None:
    assert slt.render_cell(raw, ch_type) == cell


def test_cells_compare_numbers_with_tolerance() -> None:
    assert slt.cells_equal("0.30000000000000004", "0.3")
    assert slt.cells_equal("1e21", "1000000000000000000000")
    assert slt.cells_equal("nan", "nan") and slt.cells_equal("inf", "inf")
    assert not slt.cells_equal("1", "1.0001")
    assert not slt.cells_equal("inf", "-inf")
    assert not slt.cells_equal("NULL", "0")
    assert not slt.rows_equal(["1\t2"], ["1"])


def test_case_failure_is_reported_with_location(ch: slt.ClickHouse) -> None:
    case = slt.parse_slt("query I\nSELECT 1 + 1\n----\n3\n", "tests/slt/x.slt")[0]
    failure = slt.check_case(ch, case)
    assert failure is not None and "tests/slt/x.slt:1" in failure and "'2'" in failure
    ok = slt.parse_slt("query I\nSELECT 1 + 1\n----\n2\n", "x.slt")[0]
    assert slt.check_case(ch, ok) is None


def test_unlimited_queries_over_100_rows_fail(ch: slt.ClickHouse) -> None:
    case = slt.parse_slt("query T rowsort\nSELECT uuid FROM events\n----\n", "x.slt")[0]
    assert "at most 100" in (slt.check_case(ch, case) or "")


def test_file_without_checked_cases_fails(tmp_path: Path, ch: slt.ClickHouse) -> None:
    f = tmp_path / "empty.slt"
    f.write_text("# clickhouse: skip nothing can be checked in this file\n"
                 "query I\nSELECT 1\n----\n1\n")
    res = slt.check_file(f, ch)
    assert res.checked == 0 and res.skipped == 1
    assert slt.main([str(f)]) == 1
