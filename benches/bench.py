#!/usr/bin/env python3
"""End-to-end benchmark: hedgerow against ClickHouse (chdb; JSON properties, and again with the hot
properties materialized into columns as PostHog Cloud runs it) and DuckDB on the same events.

    scripts/bench --events 1000000 --out bench-out/          (builds --release, then this)
    python benches/bench.py --bin target/release/hedgerow --events 1000000 --out bench-out/

Steps (each reported in <out>/report.md and <out>/report.json):
  1. `hedgerow gen` writes the data set into a cache directory keyed by (events, seed) and
     reuses it on the next run.
  2. `hedgerow serve` (a fresh data directory, fixed keys) ingests every `/batch/` body over
     HTTP from several concurrent clients (gzip bodies, durable acks): events/s and MB/s.
  3. Bytes per event of the committed Parquet files once every acknowledged event is
     committed, then again after compaction (the server is restarted with a short
     compaction interval and zero vacuum retention, and we wait until compaction stops).
  4. Freshness: time from the 200 of one new event to a HogQL query that returns it.
  5. The query suite: every query has a HogQL form (POST /api/projects/1/query/ with
     refresh=force_blocking), a ClickHouse form (chdb; MergeTree ordered like PostHog's events
     table, properties a JSON String), a ClickHouse-mat form derived from it (the same table
     plus a MATERIALIZED column per property the queries read, which the queries read
     instead of JSONExtract) and a DuckDB form (native table). 1 warm-up and --runs timed
     runs each; the median is reported. Rows are compared across the four engines after
     normalisation (rows sorted, floats to 6 significant digits, timestamps to
     one text form, JSON text parsed).
  6. report.md and report.json in --out, with the peak RSS (VmHWM) of the hedgerow process.

Needs the Python packages of tests/py/requirements.txt (chdb, duckdb, deltalake, pyarrow,
requests): scripts/bench uses the venv scripts/test maintains.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
PROJECT_KEY = "phc_bench0000000000000000000000000000000000"
PERSONAL_KEY = "phx_bench0000000000000000000000000000000000"
# hedgerow's person namespace: person_id = UUIDv5("<team>:<distinct_id>") before merges.
PERSON_NAMESPACE = uuid.UUID("932979b4-65c3-4424-8467-0b66ec27bc22")
# manifest.json's "version" of the data `hedgerow gen` writes; bump both together when the
# generated data changes, so cached data sets are not reused across versions.
GENERATOR_VERSION = 2


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------
# Queries


@dataclass
class Query:
    name: str
    what: str
    hogql: str
    clickhouse: str
    duckdb: str
    # the answer depends on person_id, i.e. on $identify merges (issue 4)
    persons: bool = False
    # result columns not compared (by index), with the reason
    ignore: tuple[int, ...] = ()
    ignore_why: str = ""
    # a known reason the engines may differ, printed with a difference
    note: str = ""
    # a structured query node run instead of `hogql` (its HogQL text is then a description),
    # and how its results become the rows the peers' SQL answers
    node: dict | None = None
    flatten: Callable[[object], list] | None = None


def ch_prop(*keys: str) -> str:
    """HogQL's `properties.a.b` for a string property, in ClickHouse."""
    path = ", ".join("'" + k.replace("'", "\\'") + "'" for k in keys)
    return f"nullIf(JSONExtractString(properties, {path}), '')"


def dk_prop(*keys: str) -> str:
    """HogQL's `properties.a.b` for a string property, in DuckDB."""
    path = "$." + ".".join('"' + k + '"' for k in keys)
    return f"nullif(json_extract_string(properties, '{path}'), '')"


# The ClickHouse-mat peer: PostHog Cloud materializes hot properties into typed columns
# (`mat_$pathname String MATERIALIZED JSONExtractString(properties, '$pathname')`), so its
# queries read a column instead of parsing the JSON. The columns are every property
# expression the ClickHouse forms read, collected from their texts, with the type the query
# reads: each expression below (and no other JSONExtract) is replaced by its column.
_CH_KEY = r"'(?:[^'\\]|\\.)*'"
_CH_MAT_FORMS = (
    # (pattern over the ClickHouse text, column type)
    (re.compile(rf"JSONExtractString\(properties, ({_CH_KEY}(?:, {_CH_KEY})*)\)"), "String"),
    (re.compile(rf"JSONExtractFloat\(properties, ({_CH_KEY})\)"), "Float64"),
    (re.compile(rf"toFloat64OrNull\(JSONExtractRaw\(properties, ({_CH_KEY})\)\)"), "Nullable(Float64)"),
)


@dataclass
class MatColumn:
    name: str  # `mat_<key>`, nested keys joined by "__"
    type: str
    expr: str  # the expression the column is materialized from (as the ClickHouse form has it)


def _mat_name(path: str) -> str:
    keys = [k.strip()[1:-1].replace("\\'", "'") for k in path.split(", ")]
    return "mat_" + "__".join(keys)


def ch_mat_columns(suite: list[Query]) -> list[MatColumn]:
    """The materialized columns the suite's ClickHouse forms need, in order of first use."""
    cols: dict[str, MatColumn] = {}
    for q in suite:
        for pattern, typ in _CH_MAT_FORMS:
            for m in pattern.finditer(q.clickhouse):
                name = _mat_name(m.group(1))
                if name in cols and cols[name].type != typ:
                    raise ValueError(f"{name} is read both as {cols[name].type} and as {typ}")
                cols.setdefault(name, MatColumn(name, typ, m.group(0)))
    return list(cols.values())


def ch_mat_sql(q: Query) -> str:
    """The ClickHouse form reading the materialized columns of `events_mat`."""
    sql = q.clickhouse
    for pattern, _ in _CH_MAT_FORMS:
        sql = pattern.sub(lambda m: f"`{_mat_name(m.group(1))}`", sql)
    if "JSONExtract" in sql:
        raise ValueError(f"{q.name}: a JSONExtract form the materialized columns do not cover: {sql}")
    return re.sub(r"\bFROM events\b", "FROM events_mat", sql)


def queries(start: str, end: str, top_distinct_id: str) -> list[Query]:
    """The suite. `start`/`end` bound the generated data ('YYYY-MM-DD', end exclusive);
    literals are read in the project's time zone by all three engines."""
    hr = f"timestamp >= '{start}' AND timestamp < '{end}'"
    ch = hr
    dk = f"timestamp >= TIMESTAMPTZ '{start} 00:00:00' AND timestamp < TIMESTAMPTZ '{end} 00:00:00'"
    dk_week = "CAST(timestamp AS DATE) - CAST(dayofweek(timestamp) AS INTEGER)"
    q: list[Query] = []

    q.append(Query(
        "count_uniq", "total events, distinct ids (uniq), sessions, pageviews",
        "SELECT count() AS events, uniq(distinct_id) AS distinct_ids, count(DISTINCT `$session_id`) AS sessions, "
        "countIf(event = '$pageview') AS pageviews FROM events",
        "SELECT count(), uniq(distinct_id), count(DISTINCT `$session_id`), countIf(event = '$pageview') FROM events",
        "SELECT count(*), count(DISTINCT distinct_id), count(DISTINCT \"$session_id\"), "
        "count(*) FILTER (WHERE event = '$pageview') FROM events",
        note="ClickHouse's uniq() is approximate above about 65 536 distinct values (hedgerow's and DuckDB's "
             "counts are exact), so column 1 may differ on large data sets",
    ))
    q.append(Query(
        "trend_pageviews_daily", "trends: pageviews per day",
        f"SELECT toStartOfDay(timestamp) AS day, count() AS pageviews FROM events "
        f"WHERE event = '$pageview' AND {hr} GROUP BY day ORDER BY day LIMIT 1000",
        f"SELECT toStartOfDay(timestamp) AS day, count() FROM events "
        f"WHERE event = '$pageview' AND {ch} GROUP BY day ORDER BY day",
        f"SELECT date_trunc('day', timestamp) AS day, count(*) FROM events "
        f"WHERE event = '$pageview' AND {dk} GROUP BY day ORDER BY day",
    ))
    q.append(Query(
        "dau", "daily active users (persons with a pageview)",
        f"SELECT toStartOfDay(timestamp) AS day, count(DISTINCT person_id) AS users FROM events "
        f"WHERE event = '$pageview' AND {hr} GROUP BY day ORDER BY day LIMIT 1000",
        f"SELECT toStartOfDay(timestamp) AS day, count(DISTINCT person_id) FROM events "
        f"WHERE event = '$pageview' AND {ch} GROUP BY day ORDER BY day",
        f"SELECT date_trunc('day', timestamp) AS day, count(DISTINCT person_id) FROM events "
        f"WHERE event = '$pageview' AND {dk} GROUP BY day ORDER BY day",
        persons=True,
    ))
    q.append(Query(
        "wau", "weekly active users (weeks start on Sunday)",
        f"SELECT toStartOfWeek(timestamp) AS week, count(DISTINCT person_id) AS users FROM events "
        f"WHERE {hr} GROUP BY week ORDER BY week LIMIT 1000",
        f"SELECT toStartOfWeek(timestamp) AS week, count(DISTINCT person_id) FROM events "
        f"WHERE {ch} GROUP BY week ORDER BY week",
        f"SELECT {dk_week} AS week, count(DISTINCT person_id) FROM events "
        f"WHERE {dk} GROUP BY week ORDER BY week",
        persons=True,
    ))
    q.append(Query(
        "mau", "monthly active users",
        "SELECT toStartOfMonth(timestamp) AS month, count(DISTINCT person_id) AS users FROM events "
        "GROUP BY month ORDER BY month LIMIT 1000",
        "SELECT toStartOfMonth(timestamp) AS month, count(DISTINCT person_id) FROM events "
        "GROUP BY month ORDER BY month",
        "SELECT CAST(date_trunc('month', timestamp) AS DATE) AS month, count(DISTINCT person_id) FROM events "
        "GROUP BY month ORDER BY month",
        persons=True,
    ))
    q.append(Query(
        "breakdown_browser", "pageviews and visitors by browser",
        "SELECT properties.$browser AS browser, count() AS pageviews, count(DISTINCT distinct_id) AS visitors "
        "FROM events WHERE event = '$pageview' GROUP BY browser ORDER BY pageviews DESC, browser LIMIT 50",
        f"SELECT {ch_prop('$browser')} AS browser, count() AS c, count(DISTINCT distinct_id) FROM events "
        "WHERE event = '$pageview' GROUP BY browser ORDER BY c DESC, browser LIMIT 50",
        f"SELECT {dk_prop('$browser')} AS browser, count(*) AS c, count(DISTINCT distinct_id) FROM events "
        "WHERE event = '$pageview' GROUP BY browser ORDER BY c DESC, browser LIMIT 50",
    ))
    q.append(Query(
        "top_pages", "top 20 paths of the marketing site",
        "SELECT properties.$pathname AS path, count() AS views, count(DISTINCT distinct_id) AS visitors FROM events "
        "WHERE event = '$pageview' AND properties.$host = 'example.com' GROUP BY path "
        "ORDER BY views DESC, path LIMIT 20",
        f"SELECT {ch_prop('$pathname')} AS path, count() AS views, count(DISTINCT distinct_id) FROM events "
        f"WHERE event = '$pageview' AND {ch_prop('$host')} = 'example.com' GROUP BY path "
        "ORDER BY views DESC, path LIMIT 20",
        f"SELECT {dk_prop('$pathname')} AS path, count(*) AS views, count(DISTINCT distinct_id) FROM events "
        f"WHERE event = '$pageview' AND {dk_prop('$host')} = 'example.com' GROUP BY path "
        "ORDER BY views DESC, path LIMIT 20",
    ))
    funnel_steps = "event = '$pageview' AND properties.$pathname = '/pricing', event = 'added_to_cart', event = 'purchase'"
    q.append(Query(
        "funnel", "windowFunnel (1 day): /pricing pageview -> added_to_cart -> purchase, persons per level",
        "SELECT level, count() AS persons FROM (SELECT person_id, "
        f"windowFunnel(86400)(toDateTime(timestamp), {funnel_steps}) AS level FROM events "
        f"WHERE event IN ('$pageview', 'added_to_cart', 'purchase') AND {hr} GROUP BY person_id) "
        "GROUP BY level ORDER BY level",
        "SELECT level, count() FROM (SELECT person_id, "
        f"windowFunnel(86400)(toDateTime(timestamp), event = '$pageview' AND {ch_prop('$pathname')} = '/pricing', "
        "event = 'added_to_cart', event = 'purchase') AS level FROM events "
        f"WHERE event IN ('$pageview', 'added_to_cart', 'purchase') AND {ch} GROUP BY person_id) "
        "GROUP BY level ORDER BY level",
        # DuckDB has no windowFunnel: level k is reached when steps 1..k occur in order with
        # the last within 86400 s (whole seconds, as toDateTime) of the first.
        "WITH ev AS (SELECT person_id, CAST(epoch(date_trunc('second', timestamp)) AS BIGINT) AS t, "
        f"CASE WHEN event = '$pageview' AND {dk_prop('$pathname')} = '/pricing' THEN 1 "
        "WHEN event = 'added_to_cart' THEN 2 WHEN event = 'purchase' THEN 3 ELSE 0 END AS step FROM events "
        f"WHERE event IN ('$pageview', 'added_to_cart', 'purchase') AND {dk}), "
        "l1 AS (SELECT DISTINCT person_id FROM ev WHERE step = 1), "
        "l2 AS (SELECT DISTINCT a.person_id FROM ev a JOIN ev b ON a.person_id = b.person_id AND a.step = 1 "
        "AND b.step = 2 AND b.t >= a.t AND b.t <= a.t + 86400), "
        "l3 AS (SELECT DISTINCT a.person_id FROM ev a JOIN ev b ON a.person_id = b.person_id AND a.step = 1 "
        "AND b.step = 2 AND b.t >= a.t JOIN ev c ON c.person_id = a.person_id AND c.step = 3 AND c.t >= b.t "
        "AND c.t <= a.t + 86400), "
        "lv AS (SELECT p.person_id, CASE WHEN l3.person_id IS NOT NULL THEN 3 WHEN l2.person_id IS NOT NULL THEN 2 "
        "WHEN l1.person_id IS NOT NULL THEN 1 ELSE 0 END AS level FROM (SELECT DISTINCT person_id FROM ev) p "
        "LEFT JOIN l1 ON l1.person_id = p.person_id LEFT JOIN l2 ON l2.person_id = p.person_id "
        "LEFT JOIN l3 ON l3.person_id = p.person_id) "
        "SELECT level, count(*) FROM lv GROUP BY level ORDER BY level",
        persons=True,
    ))
    q.append(Query(
        "retention_weekly", "weekly cohorts by first pageview, persons active k weeks later",
        "SELECT f.cohort AS cohort, dateDiff('week', f.cohort, a.week) AS week_number, count() AS persons "
        "FROM (SELECT person_id, toStartOfWeek(timestamp) AS week FROM events "
        f"WHERE event = '$pageview' AND {hr} GROUP BY person_id, week) AS a "
        "INNER JOIN (SELECT person_id, min(toStartOfWeek(timestamp)) AS cohort FROM events "
        f"WHERE event = '$pageview' AND {hr} GROUP BY person_id) AS f ON a.person_id = f.person_id "
        "GROUP BY cohort, week_number ORDER BY cohort, week_number LIMIT 1000",
        "SELECT f.cohort AS cohort, dateDiff('week', f.cohort, a.week) AS week_number, count() "
        "FROM (SELECT person_id, toStartOfWeek(timestamp) AS week FROM events "
        f"WHERE event = '$pageview' AND {ch} GROUP BY person_id, week) AS a "
        "INNER JOIN (SELECT person_id, min(toStartOfWeek(timestamp)) AS cohort FROM events "
        f"WHERE event = '$pageview' AND {ch} GROUP BY person_id) AS f ON a.person_id = f.person_id "
        "GROUP BY cohort, week_number ORDER BY cohort, week_number",
        "SELECT f.cohort AS cohort, CAST((a.week - f.cohort) / 7 AS BIGINT) AS week_number, count(*) "
        f"FROM (SELECT person_id, {dk_week} AS week FROM events "
        f"WHERE event = '$pageview' AND {dk} GROUP BY person_id, week) AS a "
        f"INNER JOIN (SELECT person_id, min({dk_week}) AS cohort FROM events "
        f"WHERE event = '$pageview' AND {dk} GROUP BY person_id) AS f ON a.person_id = f.person_id "
        "GROUP BY cohort, week_number ORDER BY cohort, week_number",
        persons=True,
    ))
    q.append(Query(
        "session_duration_daily", "sessions per day of their start and their average duration (s)",
        "SELECT toStartOfDay(start) AS day, count() AS sessions, round(avg(duration), 3) AS avg_duration FROM "
        "(SELECT `$session_id` AS sid, min(timestamp) AS start, dateDiff('second', min(timestamp), max(timestamp)) "
        "AS duration FROM events WHERE `$session_id` IS NOT NULL GROUP BY sid) GROUP BY day ORDER BY day LIMIT 1000",
        "SELECT toStartOfDay(start) AS day, count(), round(avg(duration), 3) FROM "
        "(SELECT `$session_id` AS sid, min(timestamp) AS start, dateDiff('second', min(timestamp), max(timestamp)) "
        "AS duration FROM events WHERE `$session_id` IS NOT NULL GROUP BY sid) GROUP BY day ORDER BY day",
        "SELECT date_trunc('day', start) AS day, count(*), round(avg(duration), 3) FROM "
        "(SELECT \"$session_id\" AS sid, min(timestamp) AS start, date_diff('second', min(timestamp), max(timestamp)) "
        "AS duration FROM events WHERE \"$session_id\" IS NOT NULL GROUP BY sid) GROUP BY day ORDER BY day",
    ))
    q.append(Query(
        "sessions_bounce_by_entry", "the sessions table: sessions, bounces, duration by entry path",
        "SELECT `$entry_pathname` AS entry, count() AS sessions, countIf(`$is_bounce`) AS bounces, "
        "round(avg(`$session_duration`), 3) AS avg_duration FROM sessions GROUP BY entry "
        "ORDER BY sessions DESC, entry LIMIT 20",
        "SELECT entry, count() AS sessions, countIf(is_bounce) AS bounces, round(avg(duration), 3) FROM ("
        f"SELECT `$session_id`, argMinIf({ch_prop('$pathname')}, timestamp, event = '$pageview' AND "
        f"{ch_prop('$pathname')} IS NOT NULL) AS entry, dateDiff('second', min(timestamp), max(timestamp)) AS duration, "
        "countIf(event = '$pageview') AS pv, countIf(event = '$autocapture') AS ac, "
        "if(pv + ac = 0, NULL, pv = 1 AND ac = 0 AND duration < 10) AS is_bounce "
        "FROM events WHERE `$session_id` IS NOT NULL GROUP BY `$session_id`) "
        "GROUP BY entry ORDER BY sessions DESC, entry LIMIT 20",
        "SELECT entry, count(*) AS sessions, count(*) FILTER (WHERE is_bounce) AS bounces, round(avg(duration), 3) FROM ("
        f"SELECT \"$session_id\", arg_min({dk_prop('$pathname')}, timestamp) FILTER (WHERE event = '$pageview' AND "
        f"{dk_prop('$pathname')} IS NOT NULL) AS entry, date_diff('second', min(timestamp), max(timestamp)) AS duration, "
        "count(*) FILTER (WHERE event = '$pageview') AS pv, count(*) FILTER (WHERE event = '$autocapture') AS ac, "
        "CASE WHEN pv + ac = 0 THEN NULL ELSE pv = 1 AND ac = 0 AND duration < 10 END AS is_bounce "
        "FROM events WHERE \"$session_id\" IS NOT NULL GROUP BY \"$session_id\") "
        "GROUP BY entry ORDER BY sessions DESC, entry LIMIT 20",
    ))
    q.append(Query(
        "plan_filter", "person-property-style filter: events of users whose $identify set plan = 'pro' "
        "(the filter reads properties.$set.plan of $identify, so both peers can answer it from the events alone)",
        "SELECT count() AS events, count(DISTINCT distinct_id) AS users FROM events WHERE distinct_id IN "
        "(SELECT distinct_id FROM events WHERE event = '$identify' AND properties.$set.plan = 'pro')",
        "SELECT count(), count(DISTINCT distinct_id) FROM events WHERE distinct_id IN "
        f"(SELECT distinct_id FROM events WHERE event = '$identify' AND {ch_prop('$set', 'plan')} = 'pro')",
        "SELECT count(*), count(DISTINCT distinct_id) FROM events WHERE distinct_id IN "
        f"(SELECT distinct_id FROM events WHERE event = '$identify' AND {dk_prop('$set', 'plan')} = 'pro')",
    ))
    q.append(Query(
        "point_lookup", "the latest 100 events of one distinct_id",
        f"SELECT uuid, event, timestamp, properties.$pathname AS path FROM events WHERE distinct_id = '{top_distinct_id}' "
        "ORDER BY timestamp DESC, uuid LIMIT 100",
        f"SELECT uuid, event, timestamp, {ch_prop('$pathname')} FROM events WHERE distinct_id = '{top_distinct_id}' "
        "ORDER BY timestamp DESC, uuid LIMIT 100",
        f"SELECT uuid, event, timestamp, {dk_prop('$pathname')} FROM events WHERE distinct_id = '{top_distinct_id}' "
        "ORDER BY timestamp DESC, uuid LIMIT 100",
    ))
    q.append(Query(
        "events_list", "SELECT * FROM events ORDER BY timestamp DESC LIMIT 100",
        "SELECT * FROM events ORDER BY timestamp DESC LIMIT 100",
        "SELECT uuid, event, properties, timestamp, distinct_id, elements_chain, NULL, `$session_id`, "
        "`$window_id`, person_id, `$group_0`, NULL, NULL, NULL, NULL FROM events ORDER BY timestamp DESC LIMIT 100",
        "SELECT uuid, event, properties, timestamp, distinct_id, elements_chain, NULL, \"$session_id\", "
        "\"$window_id\", person_id, \"$group_0\", NULL, NULL, NULL, NULL FROM events ORDER BY timestamp DESC LIMIT 100",
        persons=True, ignore=(6,), ignore_why="created_at is the ingestion time; the peers' data has none",
        note="person_id can differ in a few of these latest rows from run to run: the concurrent clients "
             "may deliver a new user's $identify before the batch with their first anonymous events, and "
             "then the person is created under the identified id (as PostHog does) instead of the first "
             "anonymous id the generator assumes",
    ))
    q.append(Query(
        "revenue_by_month", "purchase revenue and count by month and currency",
        "SELECT toStartOfMonth(timestamp) AS month, properties.currency AS currency, "
        "round(sum(toFloat(properties.revenue)), 2) AS revenue, count() AS purchases FROM events "
        "WHERE event = 'purchase' GROUP BY month, currency ORDER BY month, currency LIMIT 1000",
        f"SELECT toStartOfMonth(timestamp) AS month, {ch_prop('currency')} AS currency, "
        "round(sum(JSONExtractFloat(properties, 'revenue')), 2), count() FROM events "
        "WHERE event = 'purchase' GROUP BY month, currency ORDER BY month, currency",
        f"SELECT CAST(date_trunc('month', timestamp) AS DATE) AS month, {dk_prop('currency')} AS currency, "
        "round(sum(CAST(json_extract(properties, '$.revenue') AS DOUBLE)), 2), count(*) FROM events "
        "WHERE event = 'purchase' GROUP BY month, currency ORDER BY month, currency",
    ))
    q.append(Query(
        "utm_breakdown", "landing pageviews by utm_source / utm_medium / utm_campaign",
        "SELECT properties.utm_source AS source, properties.utm_medium AS medium, properties.utm_campaign AS campaign, "
        "count() AS pageviews FROM events WHERE event = '$pageview' AND properties.utm_source IS NOT NULL "
        "GROUP BY source, medium, campaign ORDER BY pageviews DESC, source, medium, campaign LIMIT 50",
        f"SELECT {ch_prop('utm_source')} AS source, {ch_prop('utm_medium')} AS medium, {ch_prop('utm_campaign')} AS campaign, "
        f"count() AS c FROM events WHERE event = '$pageview' AND {ch_prop('utm_source')} IS NOT NULL "
        "GROUP BY source, medium, campaign ORDER BY c DESC, source, medium, campaign LIMIT 50",
        f"SELECT {dk_prop('utm_source')} AS source, {dk_prop('utm_medium')} AS medium, {dk_prop('utm_campaign')} AS campaign, "
        f"count(*) AS c FROM events WHERE event = '$pageview' AND {dk_prop('utm_source')} IS NOT NULL "
        "GROUP BY source, medium, campaign ORDER BY c DESC, source, medium, campaign LIMIT 50",
    ))
    last_week = (dt.date.fromisoformat(end) - dt.timedelta(days=7)).isoformat()
    q.append(Query(
        "hourly_last_week", "events per hour over the last 7 days of data (a narrow time range)",
        f"SELECT toStartOfHour(timestamp) AS hour, count() AS events FROM events "
        f"WHERE timestamp >= '{last_week}' AND timestamp < '{end}' GROUP BY hour ORDER BY hour LIMIT 1000",
        f"SELECT toStartOfHour(timestamp) AS hour, count() FROM events "
        f"WHERE timestamp >= '{last_week}' AND timestamp < '{end}' GROUP BY hour ORDER BY hour",
        f"SELECT date_trunc('hour', timestamp) AS hour, count(*) FROM events "
        f"WHERE timestamp >= TIMESTAMPTZ '{last_week} 00:00:00' AND timestamp < TIMESTAMPTZ '{end} 00:00:00' "
        "GROUP BY hour ORDER BY hour",
    ))
    q.append(Query(
        "autocapture_add_to_cart", "autocapture clicks on 'Add to cart' (elements_chain LIKE) by page",
        "SELECT properties.$pathname AS path, count() AS clicks FROM events WHERE event = '$autocapture' "
        "AND elements_chain LIKE '%text=\"Add to cart\"%' GROUP BY path ORDER BY clicks DESC, path LIMIT 20",
        f"SELECT {ch_prop('$pathname')} AS path, count() AS c FROM events WHERE event = '$autocapture' "
        "AND elements_chain LIKE '%text=\"Add to cart\"%' GROUP BY path ORDER BY c DESC, path LIMIT 20",
        f"SELECT {dk_prop('$pathname')} AS path, count(*) AS c FROM events WHERE event = '$autocapture' "
        "AND elements_chain LIKE '%text=\"Add to cart\"%' GROUP BY path ORDER BY c DESC, path LIMIT 20",
    ))
    q.append(Query(
        "survey_responses", "survey answers and the average numeric response per survey",
        "SELECT properties.$survey_name AS survey, count() AS responses, "
        "round(avg(toFloat(properties.$survey_response)), 4) AS average FROM events WHERE event = 'survey sent' "
        "GROUP BY survey ORDER BY survey LIMIT 100",
        f"SELECT {ch_prop('$survey_name')} AS survey, count(), "
        "round(avg(toFloat64OrNull(JSONExtractRaw(properties, '$survey_response'))), 4) FROM events "
        "WHERE event = 'survey sent' GROUP BY survey ORDER BY survey",
        f"SELECT {dk_prop('$survey_name')} AS survey, count(*), "
        "round(avg(TRY_CAST(json_extract(properties, '$.\"$survey_response\"') AS DOUBLE)), 4) FROM events "
        "WHERE event = 'survey sent' GROUP BY survey ORDER BY survey",
    ))
    q.extend(node_queries(start, end))
    q.append(Query(
        "group_breakdown", "top companies ($group_0) by events and users",
        "SELECT `$group_0` AS company, count() AS events, count(DISTINCT distinct_id) AS users FROM events "
        "WHERE `$group_0` IS NOT NULL GROUP BY company ORDER BY events DESC, company LIMIT 20",
        "SELECT `$group_0` AS company, count() AS c, count(DISTINCT distinct_id) FROM events "
        "WHERE `$group_0` IS NOT NULL GROUP BY company ORDER BY c DESC, company LIMIT 20",
        "SELECT \"$group_0\" AS company, count(*) AS c, count(DISTINCT distinct_id) FROM events "
        "WHERE \"$group_0\" IS NOT NULL GROUP BY company ORDER BY c DESC, company LIMIT 20",
    ))
    return q


NULL_BREAKDOWN = "$$_posthog_breakdown_null_$$"


def _trend_rows(results) -> list:
    return [(day, s["breakdown_value"], x) for s in results for day, x in zip(s["days"], s["data"]) if x]


def _funnel_rows(results) -> list:
    return [(i + 1, step["count"]) for i, step in enumerate(results)]


def _retention_rows(results) -> list:
    return [(c["date"][:10], k, v["count"]) for c in results for k, v in enumerate(c["values"]) if v["count"]]


def _lifecycle_rows(results) -> list:
    return [(day, s["status"], x) for s in results for day, x in zip(s["days"], s["data"]) if x]


def node_queries(start: str, end: str) -> list[Query]:
    """Insight nodes (issue 14) as the app sends them, each checked against the same question
    written by hand for ClickHouse and DuckDB."""
    last = (dt.date.fromisoformat(end) - dt.timedelta(days=1)).isoformat()
    d30 = (dt.date.fromisoformat(end) - dt.timedelta(days=30)).isoformat()
    d31 = (dt.date.fromisoformat(end) - dt.timedelta(days=31)).isoformat()
    dk = lambda a, b: f"timestamp >= TIMESTAMPTZ '{a} 00:00:00' AND timestamp < TIMESTAMPTZ '{b} 00:00:00'"
    ch = lambda a, b: f"timestamp >= '{a}' AND timestamp < '{b}'"
    dk_week = "CAST(timestamp AS DATE) - CAST(dayofweek(timestamp) AS INTEGER)"
    q: list[Query] = []

    q.append(Query(
        "node_trend_breakdown", "TrendsQuery: pageviews per day of the last 30 days by browser",
        "TrendsQuery (node)", 
        f"SELECT formatDateTime(toStartOfDay(timestamp), '%Y-%m-%d') AS day, "
        f"ifNull({ch_prop('$browser')}, '{NULL_BREAKDOWN}') AS b, count() FROM events "
        f"WHERE event = '$pageview' AND {ch(d30, end)} GROUP BY day, b",
        f"SELECT strftime(date_trunc('day', timestamp), '%Y-%m-%d') AS day, "
        f"coalesce({dk_prop('$browser')}, '{NULL_BREAKDOWN}') AS b, count(*) FROM events "
        f"WHERE event = '$pageview' AND {dk(d30, end)} GROUP BY day, b",
        node={"kind": "TrendsQuery", "interval": "day",
              "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
              "dateRange": {"date_from": d30, "date_to": last},
              "breakdownFilter": {"breakdown": "$browser", "breakdown_type": "event", "breakdown_limit": 50}},
        flatten=_trend_rows,
    ))

    steps = [("event = '$pageview'", "/pricing"), ("event = 'added_to_cart'", None),
             ("event = '$pageview'", "/checkout"), ("event = 'purchase'", None)]
    ch_steps = [c + (f" AND {ch_prop('$pathname')} = '{p}'" if p else "") for c, p in steps]
    dk_steps = [c + (f" AND {dk_prop('$pathname')} = '{p}'" if p else "") for c, p in steps]
    ch_first = f"({ch_steps[0]}) AND timestamp < '{end}'"
    dk_cases = " ".join(f"WHEN {c} THEN {i + 1}" for i, c in enumerate(dk_steps))
    dk_chain = []
    for k in range(2, 5):
        prev = "s1" if k == 2 else f"s{k - 1}"
        dk_chain.append(
            f"s{k} AS (SELECT p.person_id, p.t1, min(e.t) AS t{k} FROM {prev} AS p JOIN ev AS e "
            f"ON e.person_id = p.person_id AND e.step = {k} AND e.t >= p.t{k - 1} "
            f"AND e.t <= p.t1 + INTERVAL 1 DAY GROUP BY p.person_id, p.t1)")
    q.append(Query(
        "node_funnel_4", "FunnelsQuery: /pricing -> added_to_cart -> /checkout -> purchase within a day",
        "FunnelsQuery (node)",
        "SELECT s, countIf(level >= s) FROM (SELECT person_id, windowFunnel(86400000000)"
        f"(toUInt64(toUnixTimestamp64Micro(timestamp)), {ch_first}, {', '.join(ch_steps[1:])}) AS level "
        f"FROM events WHERE event IN ('$pageview', 'added_to_cart', 'purchase') AND timestamp >= '{start}' "
        "GROUP BY person_id) ARRAY JOIN [1, 2, 3, 4] AS s GROUP BY s",
        f"WITH ev AS (SELECT person_id, timestamp AS t, CASE {dk_cases} END AS step FROM events "
        f"WHERE event IN ('$pageview', 'added_to_cart', 'purchase') AND timestamp >= TIMESTAMPTZ '{start} 00:00:00'), "
        f"s1 AS (SELECT person_id, t AS t1 FROM ev WHERE step = 1 AND t < TIMESTAMPTZ '{end} 00:00:00'), "
        + ", ".join(dk_chain) +
        " SELECT 1, count(DISTINCT person_id) FROM s1 UNION ALL SELECT 2, count(DISTINCT person_id) FROM s2 "
        "UNION ALL SELECT 3, count(DISTINCT person_id) FROM s3 UNION ALL SELECT 4, count(DISTINCT person_id) FROM s4",
        node={"kind": "FunnelsQuery",
              "series": [{"kind": "EventsNode", "event": "$pageview", "properties": [
                             {"key": "$pathname", "value": "/pricing", "operator": "exact", "type": "event"}]},
                         {"kind": "EventsNode", "event": "added_to_cart"},
                         {"kind": "EventsNode", "event": "$pageview", "properties": [
                             {"key": "$pathname", "value": "/checkout", "operator": "exact", "type": "event"}]},
                         {"kind": "EventsNode", "event": "purchase"}],
              "dateRange": {"date_from": start, "date_to": last},
              "funnelsFilter": {"funnelWindowInterval": 1, "funnelWindowIntervalUnit": "day"}},
        flatten=_funnel_rows, persons=True,
    ))

    weeks = 13
    q.append(Query(
        "node_retention_weekly", "RetentionQuery: first-time weekly retention of pageviews, 13 weeks",
        "RetentionQuery (node)",
        "SELECT f.cohort, dateDiff('week', f.cohort, a.week) AS k, count() FROM "
        f"(SELECT person_id, toStartOfWeek(timestamp) AS week FROM events WHERE event = '$pageview' "
        f"AND {ch(start, end)} GROUP BY person_id, week) AS a INNER JOIN "
        f"(SELECT person_id, min(toStartOfWeek(timestamp)) AS cohort FROM events WHERE event = '$pageview' "
        f"AND {ch(start, end)} GROUP BY person_id) AS f ON a.person_id = f.person_id GROUP BY f.cohort, k",
        f"WITH a AS (SELECT DISTINCT person_id, {dk_week} AS week FROM events WHERE event = '$pageview' "
        f"AND {dk(start, end)}), f AS (SELECT person_id, min(week) AS cohort FROM a GROUP BY person_id) "
        "SELECT f.cohort, CAST((a.week - f.cohort) / 7 AS INTEGER) AS k, count(*) FROM a "
        "JOIN f ON a.person_id = f.person_id GROUP BY f.cohort, k",
        node={"kind": "RetentionQuery", "dateRange": {"date_to": last},
              "retentionFilter": {"period": "Week", "totalIntervals": weeks,
                                  "retentionType": "retention_first_time",
                                  "targetEntity": {"id": "$pageview", "type": "events"},
                                  "returningEntity": {"id": "$pageview", "type": "events"}}},
        flatten=_retention_rows, persons=True,
    ))

    # Lifecycle: a person is new on the day of their first event, returning when active the
    # day before too, resurrecting when not; dormant (negative) the day after their last
    # active day.
    ch_life = (
        f"WITH a AS (SELECT DISTINCT person_id, toStartOfDay(timestamp) AS d FROM events "
        f"WHERE event = '$pageview' AND {ch(d31, end)}), "
        "c AS (SELECT person_id, toStartOfDay(min(timestamp)) AS cd FROM events GROUP BY person_id) "
        "SELECT formatDateTime(day, '%Y-%m-%d') AS day, status, sum(n) FROM ("
        "SELECT a.d AS day, multiIf(c.cd = a.d, 'new', (a.person_id, a.d - INTERVAL 1 DAY) IN (SELECT person_id, d FROM a), "
        "'returning', 'resurrecting') AS status, 1 AS n FROM a JOIN c ON a.person_id = c.person_id "
        "UNION ALL SELECT a.d + INTERVAL 1 DAY AS day, 'dormant' AS status, -1 AS n FROM a "
        "WHERE (a.person_id, a.d + INTERVAL 1 DAY) NOT IN (SELECT person_id, d FROM a)) "
        f"WHERE day >= '{d30}' AND day < '{end}' GROUP BY day, status"
    )
    dk_life = (
        f"WITH a AS (SELECT DISTINCT person_id, date_trunc('day', timestamp) AS d FROM events "
        f"WHERE event = '$pageview' AND {dk(d31, end)}), "
        "c AS (SELECT person_id, date_trunc('day', min(timestamp)) AS cd FROM events GROUP BY person_id), "
        "x AS (SELECT a.d AS day, CASE WHEN c.cd = a.d THEN 'new' WHEN EXISTS (SELECT 1 FROM a AS b "
        "WHERE b.person_id = a.person_id AND b.d = a.d - INTERVAL 1 DAY) THEN 'returning' ELSE 'resurrecting' END "
        "AS status, 1 AS n FROM a JOIN c ON a.person_id = c.person_id "
        "UNION ALL SELECT a.d + INTERVAL 1 DAY, 'dormant', -1 FROM a WHERE NOT EXISTS (SELECT 1 FROM a AS b "
        "WHERE b.person_id = a.person_id AND b.d = a.d + INTERVAL 1 DAY)) "
        "SELECT strftime(day, '%Y-%m-%d') AS day, status, sum(n) FROM x "
        f"WHERE day >= TIMESTAMPTZ '{d30} 00:00:00' AND day < TIMESTAMPTZ '{end} 00:00:00' GROUP BY day, status"
    )
    q.append(Query(
        "node_lifecycle_daily", "LifecycleQuery: pageview lifecycle per day of the last 30 days",
        "LifecycleQuery (node)", ch_life, dk_life,
        node={"kind": "LifecycleQuery", "interval": "day",
              "series": [{"kind": "EventsNode", "event": "$pageview"}],
              "dateRange": {"date_from": d30, "date_to": last}},
        flatten=_lifecycle_rows, persons=True,
        note="new counts persons by the day of their first event; hedgerow's person.created_at is the time of "
             "the first event it processed for them, which the concurrent clients may deliver out of order",
    ))
    return q


# ------------------------------------------------------------------------------------------
# Result normalisation


_TS = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def norm_ts(s: str) -> str:
    t = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    out = t.strftime("%Y-%m-%d %H:%M:%S.%f")
    return out[:-7] if out.endswith(".000000") else out


def norm(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        return float(f"{float(v):.6g}")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return norm_ts(v.isoformat())
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (list, tuple)):
        return tuple(norm(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    if hasattr(v, "__float__") and not isinstance(v, str):  # Decimal
        return float(f"{float(v):.6g}")
    s = str(v)
    if _TS.match(s):
        try:
            return norm_ts(s)
        except ValueError:
            return s
    if s.startswith("{") and s.endswith("}"):
        try:
            return json.dumps(json.loads(s), sort_keys=True)
        except ValueError:
            return s
    return s


def normalise(rows, ignore: tuple[int, ...]) -> list[tuple]:
    out = []
    for r in rows:
        out.append(tuple(norm(c) for i, c in enumerate(r) if i not in ignore))
    return sorted(out, key=lambda r: json.dumps(r, default=str))


def first_difference(a: list[tuple], b: list[tuple]) -> str:
    if len(a) != len(b):
        extra_a = [r for r in a if r not in set(b)][:2]
        extra_b = [r for r in b if r not in set(a)][:2]
        return f"{len(a)} rows vs {len(b)}; only left: {extra_a}; only right: {extra_b}"
    diffs = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if not diffs:
        return ""
    x, y = a[diffs[0]], b[diffs[0]]
    cols = [j for j, (p, q) in enumerate(zip(x, y)) if p != q]
    cells = "; ".join(f"column {j}: {clip(repr(x[j]), 150)} vs {clip(repr(y[j]), 150)}" for j in cols[:3])
    return f"{len(diffs)} of {len(a)} rows differ; first (row {diffs[0]} after sorting) {cells}"


def clip(s: str, n: int = 600) -> str:
    return s if len(s) <= n else s[:n] + "…"


# ------------------------------------------------------------------------------------------
# hedgerow process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary: Path, data_dir: Path, extra: list[str], log_path: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_file = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", str(data_dir),
             "--project-api-key", PROJECT_KEY, "--personal-api-key", PERSONAL_KEY, "--log", "warn",
             # A benchmark asks more than PostHog's 240 queries a minute, and its heaviest
             # query at 100M events may pass the default 2-minute limit.
             "--query-rate-per-minute", "0", "--query-rate-per-hour", "0", "--query-timeout", "1h",
             *extra],
            stdout=self.log_file, stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hedgerow exited with {self.proc.returncode}; see {log_path}")
            try:
                if requests.get(self.base + "/_health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("hedgerow did not start within 120 s")

    def health(self) -> dict:
        return requests.get(self.base + "/_health", timeout=30).json()

    def metrics(self) -> dict[str, float]:
        out = {}
        for line in requests.get(self.base + "/metrics", timeout=30).text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            k, v = line.rsplit(" ", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def vm_rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def vm_hwm(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def wait_committed(self, timeout: float = 600) -> float:
        """Waits until the table covers every acknowledged WAL record; returns seconds."""
        t0 = time.time()
        target = self.health()["last_wal_seq"]
        while time.time() - t0 < timeout:
            if self.health()["committed_wal_seq"] >= target:
                return time.time() - t0
            time.sleep(0.05)
        raise RuntimeError("events not committed in time")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()

    def query(self, hogql: str, project: int = 1, timeout: float = 1800) -> tuple[float, dict]:
        body = {"query": {"kind": "HogQLQuery", "query": hogql}, "refresh": "force_blocking"}
        t0 = time.perf_counter()
        r = requests.post(f"{self.base}/api/projects/{project}/query/", json=body,
                          headers={"Authorization": f"Bearer {PERSONAL_KEY}"}, timeout=timeout)
        elapsed = time.perf_counter() - t0
        try:
            j = r.json()
        except ValueError:
            j = {"detail": r.text}
        if r.status_code != 200:
            raise QueryError(f"HTTP {r.status_code}: {j.get('detail') or j}")
        return elapsed, j


class QueryError(Exception):
    pass


def run_node(server: "Server", q: Query) -> tuple[float, dict]:
    """Runs `q.node` and gives its results as the peers' rows (`results` replaced)."""
    body = {"query": q.node, "refresh": "force_blocking"}
    t0 = time.perf_counter()
    r = requests.post(f"{server.base}/api/projects/1/query/", json=body,
                      headers={"Authorization": f"Bearer {PERSONAL_KEY}"}, timeout=1800)
    elapsed = time.perf_counter() - t0
    try:
        j = r.json()
    except ValueError:
        j = {"detail": r.text}
    if r.status_code != 200:
        raise QueryError(f"HTTP {r.status_code}: {j.get('detail') or j}")
    j = dict(j)
    j["results"] = q.flatten(j["results"])
    return elapsed, j


# ------------------------------------------------------------------------------------------
# Steps


def generate(binary: Path, events: int, seed: int, cache: Path) -> Path:
    d = cache / f"gen-v{GENERATOR_VERSION}-{events}-seed{seed}"
    if (d / "manifest.json").exists():
        log(f"reusing generated data in {d}")
        return d
    tmp = cache / f".gen-v{GENERATOR_VERSION}-{events}-seed{seed}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"generating {events} events (seed {seed}) into {d}")
    subprocess.run([str(binary), "gen", "--events", str(events), "--seed", str(seed), "--out", str(tmp),
                    "--project-api-key", PROJECT_KEY], check=True)
    version = json.loads((tmp / "manifest.json").read_text())["version"]
    if version != GENERATOR_VERSION:
        raise RuntimeError(f"hedgerow gen wrote data version {version}; bench.py expects {GENERATOR_VERSION}")
    tmp.rename(d)
    return d


def ingest(server: Server, data: Path, clients: int) -> dict:
    gz = (data / "batches.jsonl.gz").read_bytes()
    bodies = []
    events = 0
    for line in (data / "batches.idx").read_text().splitlines():
        off, ln, n = map(int, line.split("\t"))
        bodies.append(gz[off:off + ln])
        events += n
    json_bytes = json.loads((data / "manifest.json").read_text())["summary"]["json_bytes"]
    lock = threading.Lock()
    state = {"next": 0, "error": None}

    def worker():
        s = requests.Session()
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(bodies) or state["error"]:
                return
            try:
                r = s.post(server.base + "/batch/", data=bodies[i], headers=headers, timeout=600)
                if r.status_code != 200:
                    state["error"] = f"batch {i}: HTTP {r.status_code} {r.text[:300]}"
            except requests.RequestException as e:
                state["error"] = f"batch {i}: {e}"

    # What the server held at its highest sampled RSS (every 0.5 s): the buffers, and
    # whether a maintenance pass (compaction) ran, whose memory is outside them.
    peak: dict = {}
    sampling = threading.Event()

    def sampler():
        while not sampling.wait(0.5):
            try:
                rss = server.vm_rss()
                if rss <= peak.get("rss_bytes", 0):
                    continue
                m = server.metrics()
                peak.update({
                    "seconds": round(time.perf_counter() - t0, 1), "rss_bytes": rss,
                    "buffer_bytes": int(m.get("hedgerow_buffer_bytes", 0)),
                    "maintenance_running": int(m.get("hedgerow_maintenance_running", 0)),
                    "compactions": int(m.get("hedgerow_compactions_total", 0)),
                    "events_accepted": int(m.get("hedgerow_events_accepted_total", 0)),
                })
            except (requests.RequestException, OSError, ValueError):
                pass

    log(f"ingesting {events} events in {len(bodies)} gzip bodies with {clients} clients")
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    watcher = threading.Thread(target=sampler)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    sampling.set()
    watcher.join()
    if state["error"]:
        raise RuntimeError(state["error"])
    m = server.metrics()
    accepted = int(m.get("hedgerow_events_accepted_total", -1))
    if accepted != events:
        raise RuntimeError(f"{accepted} events accepted, {events} sent")
    to_commit = server.wait_committed()
    flushed = int(server.metrics().get("hedgerow_flushed_rows_total", -1))
    if flushed != events:
        raise RuntimeError(f"{flushed} rows committed, {events} acknowledged")
    log(f"ingested in {elapsed:.1f}s ({events / elapsed:,.0f} events/s); all committed {to_commit:.1f}s later")
    return {
        "events": events,
        "requests": len(bodies),
        "clients": clients,
        "seconds": elapsed,
        "events_per_s": events / elapsed,
        "mb_per_s": sum(map(len, bodies)) / elapsed / 1e6,
        "json_mb_per_s": json_bytes / elapsed / 1e6,
        "wire_bytes": sum(map(len, bodies)),
        "json_bytes": json_bytes,
        "ack_to_committed_s": to_commit,
        "rss_peak_sample": peak,
    }


def table_files(data_dir: Path) -> tuple[int, int]:
    """(files, bytes) of the Parquet files in the events table's current snapshot."""
    try:
        import deltalake
        import pyarrow as pa
        t = deltalake.DeltaTable(str(data_dir / "events"))
        actions = pa.table(t.get_add_actions(flatten=True))
        sizes = actions.column("size_bytes").to_pylist()
        return len(sizes), int(sum(sizes))
    except Exception as e:  # the Delta log is the truth; the directory is the fallback
        log(f"deltalake could not read the table ({e}); summing *.parquet files instead")
        files = list((data_dir / "events").rglob("*.parquet"))
        return len(files), sum(f.stat().st_size for f in files)


HEDGEROW_GROUPS = {
    "ids": ("uuid", "distinct_id", "person_id", "$session_id", "$window_id",
            "$group_0", "$group_1", "$group_2", "$group_3", "$group_4"),
    "time": ("timestamp", "created_at"),
    "event": ("event",),
    "properties residual": ("properties",),
    "person properties residual": ("person_properties",),
    "elements_chain": ("elements_chain",),
}


def hedgerow_column_bytes(data_dir: Path) -> dict:
    """Compressed bytes of the live files' column chunks by column group (promoted property
    columns `p_*` are "properties typed", promoted person property columns `pp_*` "person
    properties typed"), and by column; what is left of the file sizes is footers, page
    indexes and bloom filters."""
    import deltalake
    import pyarrow.parquet as pq
    t = deltalake.DeltaTable(str(data_dir / "events"))
    out = {"groups": {g: 0 for g in [*HEDGEROW_GROUPS, "properties typed", "person properties typed",
                                     "other"]},
           "columns": {}}
    for uri in t.file_uris():
        md = pq.ParquetFile(uri.removeprefix("file://")).metadata
        for rg in range(md.num_row_groups):
            g = md.row_group(rg)
            for c in range(g.num_columns):
                col = g.column(c)
                name = col.path_in_schema
                out["columns"][name] = out["columns"].get(name, 0) + col.total_compressed_size
                group = next((k for k, names in HEDGEROW_GROUPS.items() if name in names),
                             "properties typed" if name.startswith("p_") else
                             "person properties typed" if name.startswith("pp_") else "other")
                out["groups"][group] += col.total_compressed_size
    return out


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def pending_partitions(data_dir: Path, min_files: int, small_bytes: int) -> int | None:
    """Partitions of the snapshot with at least `min_files` files under `small_bytes`: what
    compaction still has to do. A project's newest day kept as its main file and the file of
    its newest hour (two files, the second all newer and spanning at most an hour) is done,
    as compaction judges it. None when the snapshot cannot be read."""
    try:
        import deltalake
        import pyarrow as pa
        a = pa.table(deltalake.DeltaTable(str(data_dir / "events")).get_add_actions(flatten=True))
    except Exception:  # noqa: BLE001
        return None
    keys = [n for n in a.column_names if n.startswith("partition.")]
    files: dict[tuple, list] = {}
    sizes = a.column("size_bytes").to_pylist()
    lo, hi = a.column("min.timestamp").to_pylist(), a.column("max.timestamp").to_pylist()
    parts = list(zip(*(a.column(k).to_pylist() for k in keys)))
    for key, size, start, end in zip(parts, sizes, lo, hi):
        files.setdefault(key, []).append((size, start, end))
    team_at, date_at = keys.index("partition.team_id"), keys.index("partition.event_date")
    newest: dict = {}
    for key in files:
        t = key[team_at]
        if t not in newest or key[date_at] > newest[t][date_at]:
            newest[t] = key
    pending = 0
    for key, fs in files.items():
        if newest[key[team_at]] == key and len(fs) == 2:
            (_, _, old_end), (_, new_start, new_end) = sorted(fs, key=lambda f: f[1])
            if old_end < new_start and (new_end - new_start).total_seconds() <= 3600:
                continue
        if sum(1 for f in fs if f[0] < small_bytes) >= min_files:
            pending += 1
    return pending


def wait_compaction(server: Server, data_dir: Path, min_files: int, timeout: float = 3600) -> dict:
    """Waits until no partition of the snapshot has `min_files` small files left (compaction's
    own rule, with the default 128 MiB target), then until the compaction metrics are still."""
    t0 = time.time()
    small = 64 * 2**20
    first = pending_partitions(data_dir, min_files, small)
    pending = first
    while time.time() - t0 < timeout:
        pending = pending_partitions(data_dir, min_files, small)
        if pending == 0:
            break
        time.sleep(2)
    done = time.time() - t0
    last, stable_since = None, time.time()
    while time.time() - stable_since < 3 and time.time() - t0 < timeout:
        m = server.metrics()
        cur = (m.get("hedgerow_compactions_total", 0), m.get("hedgerow_compaction_files_removed_total", 0))
        if cur != last:
            last, stable_since = cur, time.time()
        time.sleep(0.5)
    return {"compactions": int(last[0]), "files_removed": int(last[1]), "seconds": done,
            "partitions_to_compact": first, "partitions_left": pending}


def second_project(server: Server) -> tuple[int, str]:
    """A second project (id, token), so events the benchmark sends itself never change the
    generated data set of project 1."""
    r = requests.post(server.base + "/api/projects/", json={"name": "bench side project", "timezone": "UTC"},
                      headers={"Authorization": f"Bearer {PERSONAL_KEY}"}, timeout=30)
    if r.status_code not in (200, 201):
        raise RuntimeError(f"cannot create a project: {r.status_code} {r.text[:200]}")
    return r.json()["id"], r.json()["api_token"]


def restart_penalty(server: Server, token: str) -> dict:
    """After a restart whose WAL was fully committed, every query first waits for the ingest
    pipeline to apply the last acknowledged WAL record; nothing is left to apply, so it waits
    out its 10 s deadline (seen in hedgerow at e97a3b3). Measures that, then captures one
    event into the side project, after which the pipeline has applied the newest record and
    queries stop waiting. The penalty is reported, never hidden."""
    t, _ = server.query("SELECT count() FROM events")
    r = requests.post(server.base + "/i/v0/e/", json={"api_key": token, "event": "bench restart",
                                                       "distinct_id": "bench"}, timeout=30)
    assert r.status_code == 200, r.text
    t2, _ = server.query("SELECT count() FROM events")
    return {"first_query_after_restart_s": t, "after_one_new_event_s": t2,
            "note": "hedgerow bug: after a restart with a fully committed WAL, every query waits 10 s for the "
                    "ingest pipeline to reach the last acknowledged WAL seq (buffer applied_seq starts at 0) "
                    "until a new event arrives" if t > 5 else "no restart penalty"}


def freshness(server: Server, pid: int, token: str, rounds: int = 5) -> dict:
    """Time from the 200 of one captured event (in the side project) to a HogQL query
    returning it."""
    samples = []
    for i in range(rounds):
        did = f"fresh-{uuid.uuid4()}"
        t0 = time.perf_counter()
        r = requests.post(server.base + "/i/v0/e/", json={"api_key": token, "event": "fresh", "distinct_id": did},
                          timeout=30)
        assert r.status_code == 200, r.text
        acked = time.perf_counter()
        polls = 0
        while True:
            polls += 1
            _, j = server.query(f"SELECT count() FROM events WHERE distinct_id = '{did}'", project=pid)
            if j["results"][0][0] == 1:
                break
            if time.perf_counter() - acked > 120:
                raise RuntimeError("the fresh event never became visible")
        samples.append({"ms": (time.perf_counter() - acked) * 1000, "polls": polls,
                        "capture_ms": (acked - t0) * 1000})
    return {"ms": statistics.median(s["ms"] for s in samples), "samples": samples}


class Peers:
    """chdb and DuckDB loaded with events.parquet; chdb also gets person_id_today, hedgerow's
    person id before merges, for the merge check. The ClickHouse-mat peer is a second chdb
    table, events_mat: the same columns and order, plus `mat_columns` computed at insert."""

    def __init__(self, data: Path, work: Path, tz: str, mat_columns: list[MatColumn],
                 duckdb_source: str = "table"):
        import chdb.session
        import duckdb
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.tz = tz
        pq_path = data / "events.parquet"
        # person_id as hedgerow stores it today (no merges): UUIDv5 of "1:<distinct_id>".
        dids = pq.read_table(pq_path, columns=["distinct_id"]).column(0).unique().to_pylist()
        mapping = pa.table({"distinct_id": dids,
                            "person_id_today": [str(uuid.uuid5(PERSON_NAMESPACE, f"1:{d}")) for d in dids]})
        map_path = work / "person_id_today.parquet"
        pq.write_table(mapping, map_path)

        log("loading ClickHouse (chdb) MergeTree")
        t0 = time.perf_counter()
        self.ch = chdb.session.Session(str(work / "chdb"))
        self.ch.query("SET output_format_json_quote_64bit_integers = 0")
        self.ch.query(f"SET session_timezone = '{tz}'")
        cols = ("uuid UUID, event String, distinct_id String, "
                f"timestamp DateTime64(6, '{tz}'), properties String, elements_chain String, "
                "`$session_id` Nullable(String), `$window_id` Nullable(String), person_id UUID, "
                "`$group_0` Nullable(String)")
        for t in ("events", "events_mat", "events_raw", "person_id_today"):
            self.ch.query(f"DROP TABLE IF EXISTS {t} SYNC")
        # min_bytes_for_wide_part = 0: every part Wide (one file per column, as large tables are
        # anyway), so system.columns knows each column's size on small data sets too.
        self.ch.query(
            f"CREATE TABLE events ({cols}, person_id_today UUID) ENGINE = MergeTree "
            "ORDER BY (toDate(timestamp), event, cityHash64(distinct_id), cityHash64(uuid)) "
            "SETTINGS old_parts_lifetime = 1, min_bytes_for_wide_part = 0"
        )
        # (chdb drops the values of a Parquet file() joined in the same INSERT: stage first.)
        self.ch.query(f"CREATE TABLE events_raw ({cols}) ENGINE = MergeTree ORDER BY tuple() "
                      "SETTINGS old_parts_lifetime = 1")
        self.ch.query(f"INSERT INTO events_raw SELECT * FROM file('{pq_path}', Parquet)")
        self.ch.query("CREATE TABLE person_id_today (distinct_id String, person_id_today String) ENGINE = Memory")
        self.ch.query(f"INSERT INTO person_id_today SELECT * FROM file('{map_path}', Parquet)")
        self.ch.query(
            "INSERT INTO events SELECT r.uuid, r.event, r.distinct_id, r.timestamp, r.properties, r.elements_chain, "
            "r.`$session_id`, r.`$window_id`, r.person_id, r.`$group_0`, m.person_id_today "
            "FROM events_raw AS r LEFT JOIN person_id_today AS m ON r.distinct_id = m.distinct_id"
        )
        # SYNC: an Atomic database otherwise keeps a dropped table's files for 8 minutes
        self.ch.query("DROP TABLE events_raw SYNC")
        self.ch.query("DROP TABLE person_id_today SYNC")
        self.ch.query("OPTIMIZE TABLE events FINAL")
        self.ch_load_s = time.perf_counter() - t0
        log(f"chdb loaded in {self.ch_load_s:.1f}s")

        # ClickHouse-mat: the hot properties as MATERIALIZED columns, filled from `properties`
        # as the rows are inserted and stored like any column (PostHog Cloud's layout).
        log(f"loading ClickHouse-mat (chdb) MergeTree with {len(mat_columns)} materialized columns")
        t0 = time.perf_counter()
        self.mat_columns = mat_columns
        mat = "".join(f", `{c.name}` {c.type} MATERIALIZED {c.expr}" for c in mat_columns)
        self.ch.query(
            f"CREATE TABLE events_mat ({cols}{mat}) ENGINE = MergeTree "
            "ORDER BY (toDate(timestamp), event, cityHash64(distinct_id), cityHash64(uuid)) "
            "SETTINGS old_parts_lifetime = 1, min_bytes_for_wide_part = 0"
        )
        names = ("uuid, event, distinct_id, timestamp, properties, elements_chain, `$session_id`, `$window_id`, "
                 "person_id, `$group_0`")
        self.ch.query(f"INSERT INTO events_mat ({names}) SELECT {names} FROM events")
        self.ch.query("OPTIMIZE TABLE events_mat FINAL")
        self.ch_mat_load_s = time.perf_counter() - t0
        log(f"chdb events_mat loaded in {self.ch_mat_load_s:.1f}s")

        self.duckdb_source = duckdb_source
        t0 = time.perf_counter()
        db = work / "duck.db"
        if db.exists():
            db.unlink()
        self.dk = duckdb.connect(str(db))
        self.dk.execute(f"SET TimeZone = '{tz}'")
        if duckdb_source == "parquet":
            log("DuckDB reads events.parquet through a view (--duckdb-source parquet)")
            self.dk.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{pq_path}')")
        else:
            log("loading DuckDB native table")
            self.dk.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{pq_path}')")
            self.dk.execute("CHECKPOINT")
        self.dk_load_s = time.perf_counter() - t0
        log(f"DuckDB loaded in {self.dk_load_s:.1f}s")

    def clickhouse(self, sql: str) -> tuple[float, list]:
        t0 = time.perf_counter()
        res = self.ch.query(sql, "JSONCompact")
        elapsed = time.perf_counter() - t0
        return elapsed, json.loads(res.bytes())["data"]

    def duckdb(self, sql: str) -> tuple[float, list]:
        t0 = time.perf_counter()
        table = self.dk.sql(sql).to_arrow_table()
        elapsed = time.perf_counter() - t0
        # (rows as Python objects outside the timing; fetchall would need pytz for TIMESTAMPTZ)
        return elapsed, list(zip(*(c.to_pylist() for c in table.columns)))

    def close(self) -> None:
        # (before the work directory is removed: open connections write files on exit)
        self.dk.close()
        self.ch.close()

    def disk_bytes(self, work: Path) -> dict:
        ch = self.clickhouse(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = currentDatabase() "
            "AND table = 'events'")[1][0][0]
        # without the person_id_today column, which only the merge check reads
        extra = self.clickhouse(
            "SELECT sum(column_bytes_on_disk) FROM system.parts_columns WHERE active AND database = currentDatabase() "
            "AND table = 'events' AND column = 'person_id_today'")[1][0][0]
        mat = self.clickhouse(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = currentDatabase() "
            "AND table = 'events_mat'")[1][0][0]
        duck = (work / "duck.db").stat().st_size if self.duckdb_source == "table" else None
        return {"clickhouse": int(ch or 0) - int(extra or 0), "clickhouse_mat": int(mat or 0), "duckdb": duck}

    def mat_column_bytes(self) -> dict:
        """events_mat's compressed data bytes (system.columns' data_compressed_bytes: no marks
        or primary index) by column group, and by column."""
        rows = self.clickhouse(
            "SELECT name, data_compressed_bytes, data_uncompressed_bytes FROM system.columns "
            "WHERE database = currentDatabase() AND table = 'events_mat'")[1]
        mat = {c.name for c in self.mat_columns}
        groups = {"ids": ("uuid", "distinct_id", "person_id", "$session_id", "$window_id", "$group_0"),
                  "time": ("timestamp",), "event": ("event",), "properties JSON": ("properties",),
                  "elements_chain": ("elements_chain",), "materialized columns": tuple(sorted(mat))}
        out = {"groups": {g: 0 for g in groups}, "columns": {}}
        for name, comp, uncomp in rows:
            out["columns"][name] = {"compressed": int(comp), "uncompressed": int(uncomp)}
            group = next((g for g, names in groups.items() if name in names), "other")
            out["groups"][group] = out["groups"].get(group, 0) + int(comp)
        out["groups_columns"] = {g: list(names) for g, names in groups.items()}
        return out


def timed(fn, runs: int) -> tuple[float | None, list[float], object, str | None]:
    """1 warm-up + `runs` timed calls; (median, samples, last result, error)."""
    try:
        _, result = fn()
        samples = []
        for _ in range(runs):
            t, result = fn()
            samples.append(t)
        return statistics.median(samples), samples, result, None
    except Exception as e:  # noqa: BLE001 - every failure is reported, never hidden
        return None, [], None, clip(str(e).strip().replace("\n", " "), 800)


def run_queries(server: Server, peers: Peers, suite: list[Query], runs: int) -> dict:
    out = {}
    for q in suite:
        log(f"query {q.name}")
        if q.node is not None:
            h_med, h_s, h_res, h_err = timed(lambda: run_node(server, q), runs)
        else:
            h_med, h_s, h_res, h_err = timed(lambda: server.query(q.hogql), runs)
        c_med, c_s, c_rows, c_err = timed(lambda: peers.clickhouse(q.clickhouse), runs)
        mat_sql = ch_mat_sql(q)
        m_med, m_s, m_rows, m_err = timed(lambda: peers.clickhouse(mat_sql), runs)
        d_med, d_s, d_rows, d_err = timed(lambda: peers.duckdb(q.duckdb), runs)
        h_rows = h_res["results"] if h_res else None
        entry = {
            "what": q.what,
            "hogql": q.hogql if q.node is None else json.dumps(q.node),
            "clickhouse_mat_sql": mat_sql,
            "hedgerow_s": h_med, "clickhouse_s": c_med, "clickhouse_mat_s": m_med, "duckdb_s": d_med,
            "hedgerow_runs_s": h_s, "clickhouse_runs_s": c_s, "clickhouse_mat_runs_s": m_s, "duckdb_runs_s": d_s,
            "rows": len(h_rows) if h_rows is not None else None,
            "clickhouse_rows": len(c_rows) if c_rows is not None else None,
            "clickhouse_mat_rows": len(m_rows) if m_rows is not None else None,
            "duckdb_rows": len(d_rows) if d_rows is not None else None,
            "errors": {k: v for k, v in (("hedgerow", h_err), ("clickhouse", c_err), ("clickhouse_mat", m_err),
                                         ("duckdb", d_err)) if v},
            "depends_on_person_merges": q.persons,
        }
        if q.note:
            entry["note"] = q.note
        if h_res is not None and h_res.get("hasMore"):
            entry["errors"]["hedgerow_truncated"] = "hasMore: the result was cut at the row limit"
        if q.ignore:
            entry["ignored_columns"] = {"columns": list(q.ignore), "why": q.ignore_why}
        n_h = normalise(h_rows, q.ignore) if h_rows is not None else None
        n_c = normalise(c_rows, q.ignore) if c_rows is not None else None
        n_d = normalise(d_rows, q.ignore) if d_rows is not None else None
        n_m = normalise(m_rows, q.ignore) if m_rows is not None else None
        entry["peers_agree"] = n_c is not None and n_c == n_d and n_c == n_m
        if n_c is not None and n_d is not None and n_c != n_d:
            entry["peers_difference"] = clip(first_difference(n_c, n_d))
        if n_c is not None and n_m is not None and n_c != n_m:
            entry["clickhouse_mat_difference"] = clip(first_difference(n_c, n_m))
        entry["same_rows"] = n_h is not None and n_h == n_c and n_h == n_d and n_h == n_m
        entry["same_as_clickhouse"] = n_h is not None and n_h == n_c
        entry["same_as_clickhouse_mat"] = n_h is not None and n_h == n_m
        entry["same_as_duckdb"] = n_h is not None and n_h == n_d
        if n_h is not None and n_c is not None and n_h != n_c:
            entry["difference_vs_clickhouse"] = clip(first_difference(n_h, n_c))
        if n_h is not None and n_m is not None and n_h != n_m and n_m != n_c:
            entry["difference_vs_clickhouse_mat"] = clip(first_difference(n_h, n_m))
        if q.persons and n_h is not None:
            # The same question with the peers reading hedgerow's current (pre-merge) person
            # ids: tells a person-merge difference from any other.
            alt = re.sub(r"\bperson_id\b", "person_id_today", q.clickhouse)
            try:
                _, rows = peers.clickhouse(alt)
                n_alt = normalise(rows, q.ignore)
                entry["same_rows_with_unmerged_person_ids"] = n_h == n_alt
                if n_h != n_alt:
                    entry["difference_with_unmerged_person_ids"] = clip(first_difference(n_h, n_alt))
            except Exception as e:  # noqa: BLE001
                entry["same_rows_with_unmerged_person_ids"] = None
                entry["errors"]["clickhouse_unmerged"] = clip(str(e))
        if h_med and c_med:
            entry["ratio_clickhouse"] = h_med / c_med
        if h_med and m_med:
            entry["ratio_clickhouse_mat"] = h_med / m_med
        if h_med and d_med:
            entry["ratio_duckdb"] = h_med / d_med
        status = "same" if entry["same_rows"] else ("FAILED" if h_err else "DIFFERENT")
        log(f"  hedgerow {fmt_s(h_med)}  clickhouse {fmt_s(c_med)}  clickhouse-mat {fmt_s(m_med)}  "
            f"duckdb {fmt_s(d_med)}  rows {entry['rows']}  {status}")
        out[q.name] = entry
    return out


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def fmt_s(x) -> str:
    if x is None:
        return "—"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def fmt_r(x) -> str:
    return "—" if x is None else f"{x:.2f}×"


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cores": os.cpu_count(), "ram_bytes": mem, "cpu_model": cpu, "kernel": platform.release(),
            "python": platform.python_version()}


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ------------------------------------------------------------------------------------------
# Report


def write_report(out: Path, rep: dict) -> None:
    (out / "report.json").write_text(json.dumps(rep, indent=2, default=str) + "\n")
    ing, st, q = rep["ingest"], rep["storage"], rep["queries"]
    L = []
    L.append(f"# hedgerow benchmark — {rep['events']:,} events")
    L.append("")
    m = rep["machine"]
    L.append(f"{rep['date']}, hedgerow {rep['hedgerow_commit']}, chdb {rep['versions']['chdb']}, "
             f"duckdb {rep['versions']['duckdb']}; {m['cores']} cores ({m['cpu_model']}), "
             f"{m['ram_bytes'] / 2**30:.1f} GiB RAM. Seed {rep['seed']}, project time zone {rep['timezone']}. "
             f"Load average (1/5/15 min) before ingest {rep['loadavg']['before_ingest']}, before the queries "
             f"{rep['loadavg'].get('before_queries', '?')}, after them {rep['loadavg'].get('after_queries', '?')}: "
             "the machine is shared, so other work shows in the numbers.")
    L.append("")
    L.append("## Ingest")
    L.append("")
    L.append(f"- {ing['events']:,} events in {ing['requests']:,} gzip `/batch/` bodies from {ing['clients']} "
             f"concurrent clients, durable acks: **{ing['events_per_s']:,.0f} events/s**, "
             f"{ing['mb_per_s']:.1f} MB/s on the wire ({ing['json_mb_per_s']:.1f} MB/s of JSON), "
             f"{ing['seconds']:.1f} s. The clients run on the same machine.")
    L.append(f"- Last ack → everything committed to Parquet: {ing['ack_to_committed_s']:.1f} s.")
    wo = rep.get("ingest_without_persons")
    if wo:
        L.append(f"- The same bodies into a fresh server with `--person-processing off`: "
                 f"{wo['events_per_s']:,.0f} events/s, so person processing keeps "
                 f"**{ing['events_per_s'] / wo['events_per_s']:.0%}** of the rate without it.")
    L.append("")
    L.append("## Storage")
    L.append("")
    L.append(f"- After flush: **{st['bytes_per_event']:.1f} bytes/event** of Parquet "
             f"({st['after_flush']['files']} files, {st['after_flush']['bytes'] / 1e6:.1f} MB); "
             f"the whole data directory {st['after_flush']['data_dir_bytes'] / rep['events']:.1f} bytes/event.")
    if st.get("after_compaction"):
        c = st["after_compaction"]
        L.append(f"- After compaction: **{st['bytes_per_event_after_compaction']:.1f} bytes/event** "
                 f"({c['files']} files, {c['bytes'] / 1e6:.1f} MB; {c['compactions']} partition compactions, "
                 f"{c['files_removed']} files replaced, {c['seconds']:.0f} s after the restart"
                 + (f"; {c['partitions_left']} partitions still had small files" if c.get("partitions_left") else "")
                 + ").")
    else:
        L.append(f"- After compaction: {st.get('compaction_note', 'not measured')}.")
    duck = st["peers"]["duckdb"]
    duck = f"DuckDB file {duck / rep['events']:.1f} bytes/event" if duck else "DuckDB reads the Parquet file"
    L.append(f"- Peers: ClickHouse MergeTree {st['peers']['clickhouse'] / rep['events']:.1f} bytes/event, "
             f"ClickHouse-mat MergeTree {st['peers']['clickhouse_mat'] / rep['events']:.1f} bytes/event, "
             f"{duck}. The generator's JSON is {ing['json_bytes'] / rep['events']:.0f} bytes/event, its "
             f"events.parquet (zstd) {rep['data']['parquet_bytes'] / rep['events']:.1f} bytes/event.")
    hc = st.get("hedgerow_columns")
    if hc:
        total = sum(hc["groups"].values())
        final = st.get("after_compaction", st["after_flush"])["bytes"]
        typed = sorted(((n, b) for n, b in hc["columns"].items() if n.startswith(("p_", "pp_"))),
                       key=lambda x: -x[1])
        L.append("- hedgerow by column group (compressed column chunks of the live files): " + ", ".join(
            f"{g} {b / rep['events']:.1f}" for g, b in hc["groups"].items())
            + f", footers, page indexes and bloom filters {(final - total) / rep['events']:.1f} bytes/event. "
            f"{len(typed)} property columns; the biggest: " + ", ".join(
                f"`{n}` {b / rep['events']:.2f}" for n, b in typed[:8]) + " bytes/event.")
    elif st.get("hedgerow_columns_error"):
        L.append(f"- hedgerow by column group: not measured ({st['hedgerow_columns_error']}).")
    mc = st.get("clickhouse_mat_columns")
    if mc:
        L.append("- ClickHouse-mat by column group (compressed data bytes from `system.columns`, without marks "
                 "and primary index): " + ", ".join(
                     f"{g} {b / rep['events']:.1f}" for g, b in mc["groups"].items()) + " bytes/event. "
                 f"{len(rep['clickhouse_mat_columns'])} materialized columns: " + ", ".join(
                     f"`{c['name']}` {c['type']} {mc['columns'].get(c['name'], {}).get('compressed', 0) / rep['events']:.2f}"
                     for c in rep["clickhouse_mat_columns"]) + " bytes/event.")
    L.append("")
    L.append("## Freshness")
    L.append("")
    f = rep["freshness"]
    L.append(f"- 200 of a captured event → a HogQL query returns it: **{rep['freshness_ms']:.0f} ms** (median of "
             f"{len(f['samples'])}: " + ", ".join(f"{s['ms']:.0f}" for s in f["samples"]) + " ms).")
    L.append("")
    r = rep.get("restart", {})
    if r.get("first_query_after_restart_s", 0) > 5:
        L.append("## Restart penalty (a hedgerow bug)")
        L.append("")
        L.append(f"- The first query after the restart (for compaction) took "
                 f"**{r['first_query_after_restart_s']:.1f} s**, and so would every later one: {r['note']}. "
                 f"After one event captured into a side project: {fmt_s(r['after_one_new_event_s'])}. "
                 "The query timings below are taken after that event.")
        L.append("")
    L.append("## Queries")
    L.append("")
    L.append(f"Hot medians of {rep['runs']} runs after 1 warm-up. hedgerow through `POST /api/projects/1/query/` "
             "(`refresh: force_blocking`, HTTP and JSON included), ClickHouse through chdb (JSONCompact output "
             "included), DuckDB through its Python API (result as Arrow included). Ratio = hedgerow ÷ peer (lower is "
             "better for hedgerow). ClickHouse reads every property with JSONExtract from the properties String; "
             "ClickHouse-mat is the same chdb with every property the queries read materialized into a typed "
             "`mat_*` column at insert, as PostHog Cloud runs its hot properties, and its queries read those "
             "columns (hedgerow stores each project's frequent properties as typed columns, chosen by their share of its events).")
    if rep.get("duckdb_source") == "parquet":
        L.append("")
        L.append("**DuckDB read `events.parquet` through a view in this run (`--duckdb-source parquet`), not a "
                 "native table.**")
    L.append("")
    L.append("| query | hedgerow | ClickHouse | ClickHouse-mat | DuckDB | ÷ CH | ÷ CH-mat | ÷ DuckDB | rows "
             "| same rows |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, e in q.items():
        same = "yes" if e["same_rows"] else ("**error**" if e["errors"].get("hedgerow") else "**no**")
        if not e["same_rows"] and e.get("same_rows_with_unmerged_person_ids"):
            same = "no: person merges only"
        if not e["same_rows"] and e.get("same_as_duckdb") and e.get("note"):
            same = "= DuckDB; " + ("ClickHouse differs" if e.get("same_as_clickhouse_mat")
                                   else "ClickHouse and CH-mat differ") + " (known, see below)"
        elif not e["peers_agree"]:
            same += " (peers disagree)"
        L.append(f"| {name} | {fmt_s(e['hedgerow_s'])} | {fmt_s(e['clickhouse_s'])} | "
                 f"{fmt_s(e.get('clickhouse_mat_s'))} | {fmt_s(e['duckdb_s'])} | "
                 f"{fmt_r(e.get('ratio_clickhouse'))} | {fmt_r(e.get('ratio_clickhouse_mat'))} | "
                 f"{fmt_r(e.get('ratio_duckdb'))} | "
                 f"{e['rows'] if e['rows'] is not None else '—'} | {same} |")
    g = rep["geomean_ratio"]
    L.append(f"| **geomean** ({g['queries']} queries) | | | | | **{fmt_r(g['clickhouse'])}** | "
             f"**{fmt_r(g.get('clickhouse_mat'))}** | **{fmt_r(g['duckdb'])}** | | |")
    L.append("")
    L.append(f"Peak RSS of hedgerow (VmHWM): {rep['peak_rss_bytes'] / 2**20:.0f} MiB "
             f"(ingest process {rep['peak_rss']['ingest'] / 2**20:.0f} MiB, query process "
             f"{rep['peak_rss']['queries'] / 2**20:.0f} MiB).")
    pk = rep["ingest"].get("rss_peak_sample") or {}
    if pk:
        L.append(f"While ingesting, the highest RSS sampled (every 0.5 s) was {pk['rss_bytes'] / 2**20:.0f} MiB, "
                 f"{pk['seconds']} s in ({pk['events_accepted']:,} events accepted), with "
                 f"{pk['buffer_bytes'] / 2**20:.0f} MiB in the buffers and "
                 + ("a maintenance pass (compaction) running" if pk["maintenance_running"]
                    else "no maintenance pass running")
                 + f" ({pk['compactions']} partition compactions so far).")
    L.append("")
    notes = []
    for name, e in q.items():
        if e["same_rows"] and not e["errors"]:
            continue
        parts = []
        for k, v in e["errors"].items():
            parts.append(f"{k} error: `{v}`")
        if e.get("difference_vs_clickhouse"):
            parts.append(f"vs ClickHouse: {e['difference_vs_clickhouse']}")
        if e.get("depends_on_person_merges"):
            if e.get("same_rows_with_unmerged_person_ids"):
                parts.append("equal to the peers' answer with unmerged person ids: hedgerow did not merge "
                             "these persons")
            elif e.get("difference_with_unmerged_person_ids"):
                parts.append(f"also differs with unmerged person ids: {e['difference_with_unmerged_person_ids']}")
        if e.get("difference_vs_clickhouse_mat"):
            parts.append(f"vs ClickHouse-mat: {e['difference_vs_clickhouse_mat']}")
        if e.get("peers_difference"):
            parts.append(f"ClickHouse vs DuckDB: {e['peers_difference']}")
        if e.get("clickhouse_mat_difference"):
            parts.append(f"ClickHouse vs ClickHouse-mat: {e['clickhouse_mat_difference']}")
        if e.get("note"):
            parts.append(f"known: {e['note']}")
        notes.append(f"- **{name}**: " + "; ".join(parts))
    if notes:
        L.append("### Differences and failures")
        L.append("")
        L.extend(notes)
        L.append("")
    L.append("### The queries (HogQL)")
    L.append("")
    for name, e in q.items():
        L.append(f"- **{name}** — {e['what']}: `{e['hogql']}`")
    L.append("")
    (out / "report.md").write_text("\n".join(L))


# ------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True, help="report directory")
    ap.add_argument("--bin", type=Path, default=None, help="the hedgerow binary (release build)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent ingest clients")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per query (after 1 warm-up)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="generated data sets (default $HEDGEROW_CACHE/bench or ~/.cache/hedgerow/bench)")
    ap.add_argument("--work", type=Path, default=None,
                    help="hedgerow data dirs and peer databases (default <cache>/work; removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--skip-no-persons", action="store_true",
                    help="skip the second ingest run with person processing off")
    ap.add_argument("--queries", default="", help="comma-separated query names to run (default all)")
    ap.add_argument("--duckdb-source", choices=("table", "parquet"), default="table",
                    help="DuckDB's events: a native table (default; ~1.2 KB/event on disk) or a view over "
                         "events.parquet (when disk is short)")
    args = ap.parse_args()

    cache = args.cache or Path(os.environ.get("HEDGEROW_CACHE", Path.home() / ".cache" / "hedgerow")) / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    binary = args.bin or Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "hedgerow"
    if not binary.exists():
        print(f"no hedgerow binary at {binary}; build with cargo build --release or pass --bin", file=sys.stderr)
        return 2
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or cache / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server_log = out / "hedgerow.log"
    server_log.write_bytes(b"")

    import chdb
    import duckdb

    rep: dict = {
        "events": args.events, "seed": args.seed,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "hedgerow_commit": git_commit(), "runs": args.runs,
        "versions": {"chdb": chdb.__version__, "duckdb": duckdb.__version__},
        "machine": machine(),
    }

    data = generate(binary, args.events, args.seed, cache)
    manifest = json.loads((data / "manifest.json").read_text())
    rep["data"] = {"dir": str(data), "persons": manifest["summary"]["persons"],
                   "sessions": manifest["summary"]["sessions"], "event_counts": manifest["summary"]["event_counts"],
                   "parquet_bytes": (data / "events.parquet").stat().st_size}

    # Ingest with default settings.
    data_dir = work / "hedgerow-data"
    rep["loadavg"] = {"before_ingest": loadavg()}
    server = Server(binary, data_dir, [], server_log)
    try:
        rep["ingest"] = ingest(server, data, args.clients)
        hwm_ingest = server.vm_hwm()
    finally:
        server.stop()
    # The same bodies again, person processing off, into a directory of its own.
    if not args.skip_no_persons:
        np_dir = work / "hedgerow-no-persons"
        server = Server(binary, np_dir, ["--person-processing", "off"], server_log)
        try:
            rep["ingest_without_persons"] = ingest(server, data, args.clients)
        finally:
            server.stop()
        shutil.rmtree(np_dir, ignore_errors=True)
        rep["ingest"]["ratio_to_without_persons"] = (
            rep["ingest"]["events_per_s"] / rep["ingest_without_persons"]["events_per_s"])
        log(f"ingest without persons: {rep['ingest_without_persons']['events_per_s']:,.0f} events/s")
    files, size = table_files(data_dir)
    storage = {"after_flush": {"files": files, "bytes": size, "data_dir_bytes": dir_bytes(data_dir)},
               "bytes_per_event": size / args.events}
    log(f"after flush: {files} files, {size / args.events:.1f} bytes/event")

    # Restart with compaction every second and no vacuum retention; wait until it settles.
    server = Server(binary, data_dir, ["--compaction-interval", "1s", "--compaction-min-files", "2",
                                       "--vacuum-retention", "0s"], server_log)
    try:
        c = wait_compaction(server, data_dir, 2)
        files, size = table_files(data_dir)
        if c["partitions_left"]:
            log(f"compaction left {c['partitions_left']} partitions with small files")
        if c["compactions"] > 0:
            storage["after_compaction"] = {"files": files, "bytes": size, **c}
            storage["bytes_per_event_after_compaction"] = size / args.events
            log(f"after compaction: {files} files, {size / args.events:.1f} bytes/event")
        try:
            storage["hedgerow_columns"] = hedgerow_column_bytes(data_dir)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            storage["hedgerow_columns_error"] = str(e)
        else:
            storage["compaction_note"] = "nothing to compact (every partition had fewer than 2 small files)"
        side_id, side_token = second_project(server)
        rep["restart"] = restart_penalty(server, side_token)
        log(f"restart: first query {rep['restart']['first_query_after_restart_s']:.2f}s, after one new event "
            f"{rep['restart']['after_one_new_event_s']:.3f}s")
        tz_probe = server.query("SELECT 1")[1]
        tz = tz_probe.get("timezone") or "UTC"
        rep["timezone"] = tz

        start = manifest["start"]
        end = (dt.date.fromisoformat(start) + dt.timedelta(days=manifest["days"])).isoformat()
        suite = queries(start, end, manifest["summary"]["top_distinct_id"])
        if args.queries:
            wanted = set(args.queries.split(","))
            suite = [q for q in suite if q.name in wanted]

        mat_columns = ch_mat_columns(suite)
        peers = Peers(data, work, tz, mat_columns, args.duckdb_source)
        rep["duckdb_source"] = args.duckdb_source
        rep["clickhouse_mat_columns"] = [{"name": c.name, "type": c.type, "materialized": c.expr}
                                         for c in mat_columns]
        storage["peers"] = peers.disk_bytes(work)
        storage["peers_bytes_per_event"] = {k: (v / args.events if v else None)
                                            for k, v in storage["peers"].items()}
        storage["clickhouse_mat_columns"] = peers.mat_column_bytes()
        storage["peers_load_s"] = {"clickhouse": peers.ch_load_s, "clickhouse_mat": peers.ch_mat_load_s,
                                   "duckdb": peers.dk_load_s}
        rep["storage"] = storage

        # The queries run on a server with the default maintenance settings: the 1-second
        # compaction tick above settles the layout fast, but costs every query 5-25% (the
        # 10M data of benches/results/10m-v2f served alone) and is not what a user runs.
        server.stop()
        server = Server(binary, data_dir, [], server_log)
        rep["loadavg"]["before_queries"] = loadavg()
        rep["queries"] = run_queries(server, peers, suite, args.runs)
        rep["loadavg"]["after_queries"] = loadavg()
        rep["freshness"] = freshness(server, side_id, side_token)
        rep["freshness_ms"] = rep["freshness"]["ms"]
        hwm_query = server.vm_hwm()
        peers.close()
    finally:
        server.stop()

    rep["peak_rss"] = {"ingest": hwm_ingest, "queries": hwm_query}
    rep["peak_rss_bytes"] = max(hwm_ingest, hwm_query)
    ok = [e for e in rep["queries"].values()
          if e["hedgerow_s"] and e["clickhouse_s"] and e["clickhouse_mat_s"] and e["duckdb_s"]]
    rep["geomean_ratio"] = {
        "clickhouse": geomean([e["hedgerow_s"] / e["clickhouse_s"] for e in ok]),
        "clickhouse_mat": geomean([e["hedgerow_s"] / e["clickhouse_mat_s"] for e in ok]),
        "duckdb": geomean([e["hedgerow_s"] / e["duckdb_s"] for e in ok]),
        "queries": len(ok),
    }
    rep["same_rows"] = sum(1 for e in rep["queries"].values() if e["same_rows"])
    write_report(out, rep)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    log(f"report: {out / 'report.md'}")
    print((out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
