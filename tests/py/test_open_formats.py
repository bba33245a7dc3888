"""The events table read without hedgerow, as `docs/examples/read_events.py` documents:
pyarrow through delta-rs, and DuckDB's SQL over the Parquet files. Every property sent comes
back from both, whether it went to a typed column or stayed in the residual JSON; so does every
person property stamped on an event."""

from __future__ import annotations

import json
import uuid

from conftest import (PROJECT_API_KEY, full_properties, json_same, property_columns,
                      wait_for_events)
from read_events import duckdb_properties_sql, ids

# Values of every kind, in properties whose types are decided by their first value: some
# later values do not fit their column and stay in the JSON.
VALUES = {
    "text": ["a", "b", "", None, 5, {"x": 1}, "ünïcödé \"quoted\""],
    "num": [1, 2.5, -7, 3.0, "5", "abc", None, 9007199254740993, 1e300],
    "flag": [True, False, "true", None, 1],
    "when": ["2024-01-02T03:04:05Z", "2024-01-02 03:04:05", "not a date"],
    "Mixed Case Key": ["x", "y"],
    # Held by the events' own columns (non-empty strings), which declare their key as
    # promoted columns do; other values stay in the JSON.
    "$session_id": ["0192a4f1-7c3e-7d2a-9b1c-4e5f6a7b8c9d", "s-2", "", 5, None],
    "$window_id": ["w-1", {"x": 1}, "0192a4f1-7c3e-7d2a-9b1c-000000000001"],
}


def _events(n: int = 1200) -> list[dict]:
    out = []
    for i in range(n):
        # `$insert_id` and `$time` differ on every event, so the files write them without a
        # dictionary (DELTA_LENGTH_BYTE_ARRAY, BYTE_STREAM_SPLIT), which both readers read.
        props = {"$browser": ["Chrome", "Firefox"][i % 2], "seq": i,
                 "$insert_id": uuid.uuid4().hex[:16], "$time": 1706745600.0 + i * 0.137}
        person: dict = {}
        for key, values in VALUES.items():
            if i % 4 != 3:  # a quarter of the events lack each key
                props[key] = values[i % len(values)]
            if i % 4 != 1:  # and a quarter set no person property of it
                person[f"person {key}"] = values[(i + 1) % len(values)]
        props["$set"] = person
        out.append({"event": "e", "distinct_id": f"d{i % 5}", "uuid": str(uuid.uuid4()),
                    "timestamp": f"2024-02-0{1 + i % 3}T10:{i % 60:02d}:00Z",
                    "properties": props})
    return out


def test_pyarrow_and_duckdb_rebuild_every_property(server_factory):
    import duckdb
    from deltalake import DeltaTable

    server = server_factory("hedgerow-open").start()
    events = _events()
    for chunk in (events[:20], events[20:]):
        server.post_ok("/batch/", {"api_key": PROJECT_API_KEY, "historical_migration": True,
                                   "batch": chunk})
    table_uri = str(server.data_dir / "events")
    wait_for_events(table_uri, [e["uuid"] for e in events], server=server)
    server.stop_cleanly()

    sent = {e["uuid"]: e["properties"] for e in events}
    table = DeltaTable(table_uri).to_pyarrow_table()
    promoted = dict(property_columns(table.schema))
    assert {"$browser", "text", "num", "flag", "when", "Mixed Case Key"} <= set(promoted.values()), \
        promoted
    assert promoted["p_num__num"] == "num" and promoted["p_flag__bool"] == "flag"

    def check(got: dict[str, str], reader: str, want: dict[str, dict] = sent) -> None:
        """Every key of `want[uuid]` is in the rebuilt document `got[uuid]`, same value."""
        problems = []
        for u, props in want.items():
            stored = json.loads(got[u])
            for k, v in props.items():
                if k not in stored:
                    problems.append(f"{u}: {k!r} missing")
                elif not json_same(stored[k], v):
                    problems.append(f"{u}: {k!r} is {stored[k]!r}, sent {v!r}")
        assert not problems, f"{reader}: {len(problems)} problems: {problems[:10]}"

    by_pyarrow = dict(zip(ids(table), full_properties(table)))
    check(by_pyarrow, "pyarrow")
    # The residual really lost the promoted keys (the columns are not decoration).
    residual = dict(zip(ids(table), table.column("properties").to_pylist()))
    assert all("$browser" not in json.loads(r) for r in residual.values())
    assert {"$session_id", "$window_id"} <= set(promoted.values()), promoted
    for u, props in sent.items():
        for key in ("$session_id", "$window_id"):
            if key not in props:
                continue
            held = isinstance(props.get(key), str) and props[key] != ""
            assert (key in json.loads(residual[u])) != held, (u, key, props.get(key))

    files = [f.removeprefix("file://") for f in DeltaTable(table_uri).file_uris()]
    import pyarrow.parquet as pq
    encodings = set()
    for f in files:
        md = pq.ParquetFile(f).metadata
        for g in range(md.num_row_groups):
            for c in range(md.num_columns):
                encodings.update(md.row_group(g).column(c).encodings)
    assert {"DELTA_LENGTH_BYTE_ARRAY", "BYTE_STREAM_SPLIT"} <= encodings, encodings
    con = duckdb.connect()
    sql = (f"SELECT CAST(CAST(uuid AS UUID) AS VARCHAR), {duckdb_properties_sql(table.schema)} AS props "
           f"FROM read_parquet(?, union_by_name = true) AS e")
    by_duckdb = {u: p for u, p in con.execute(sql, [files]).fetchall()}
    assert len(by_duckdb) == len(events)
    check(by_duckdb, "duckdb")
    # Same documents from both readers.
    for u in sent:
        assert json.loads(by_duckdb[u]) == json.loads(by_pyarrow[u]), u

    # Person properties: each event carries its person's properties after its own `$set`
    # (events are processed in the order sent), rebuilt from `pp_` columns and the residual.
    person_promoted = dict(property_columns(table.schema, "person_properties"))
    assert {"person text", "person num", "person flag"} <= set(person_promoted.values()), \
        person_promoted
    assert not set(person_promoted) & set(promoted), "the families' columns are apart"
    state: dict[str, dict] = {}
    expected: dict[str, dict] = {}
    for e in events:
        person = state.setdefault(e["distinct_id"], {})
        person.update(e["properties"]["$set"])
        expected[e["uuid"]] = dict(person)

    person_by_pyarrow = dict(zip(ids(table),
                                 full_properties(table, "person_properties")))
    check(person_by_pyarrow, "pyarrow, person properties", expected)
    person_residual = table.column("person_properties").to_pylist()
    # (Its values are all non-empty strings, so its column gives every one back exactly.)
    assert all("person Mixed Case Key" not in json.loads(r) for r in person_residual if r), \
        "promoted person properties leave the residual"
    sql = (f"SELECT CAST(CAST(uuid AS UUID) AS VARCHAR), {duckdb_properties_sql(table.schema, 'e', 'person_properties')} "
           f"FROM read_parquet(?, union_by_name = true) AS e")
    person_by_duckdb = {u: p for u, p in con.execute(sql, [files]).fetchall()}
    check(person_by_duckdb, "duckdb, person properties", expected)
    for u in sent:
        assert json.loads(person_by_duckdb[u]) == json.loads(person_by_pyarrow[u]), u
