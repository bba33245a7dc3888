"""Reading hedgerow's events table without hedgerow: pyarrow (through delta-rs) and DuckDB.

The table is Delta Lake over Parquet (docs/architecture.md, "Storage"). A project's frequent
event properties are stored as typed columns named `p_<key>` (text), `p_<key>__num`
(Float64) or `p_<key>__bool` (Boolean); each such column carries its property key in its
field metadata `hedgerow.property` (in the Delta schema and in every file's Arrow schema).
The `properties` column keeps every other key (the residual JSON). The person properties
stamped on each event work the same way: columns `pp_<key>`, `pp_<key>__num`,
`pp_<key>__bool` with the metadata `hedgerow.person_property`, and the residual
`person_properties` (NULL for events without a person). The events' own `$session_id` and
`$window_id` columns declare their key the same way: the residual keeps those two only when
their column cannot give them back (a value that is not a non-empty string), or in rows
written before they left it. A row's full properties
are the residual plus, for every promoted column that is not NULL in that row and whose key
the residual does not have, that key with the column's value. (When a value could not be
given back exactly by its column, e.g. the number 5 sent for a text property, the residual
keeps it, and the residual wins.)

    python docs/examples/read_events.py <table path or URI>

`uuid` and `person_id` are 16-byte values (Parquet FIXED_LEN_BYTE_ARRAY(16); Delta's schema
calls them `binary`): `ids` turns them into PostHog's text, and in DuckDB
`CAST(uuid AS UUID)` does (its text is the lowercase hyphenated form). A table
created before hedgerow stored ids in 16 bytes keeps them as text, which `ids` leaves as is.

prints each event's uuid, full properties and full person properties. `tests/py/test_open_formats.py` runs both
readers against a live table and checks them against what was sent.
"""

from __future__ import annotations

import json
import sys

# The field metadata naming a promoted column's key, by the residual JSON column.
PROPERTY_KEY = {"properties": b"hedgerow.property", "person_properties": b"hedgerow.person_property"}
MAX_EXACT_INT = 2**53


def ids(table, column: str = "uuid") -> list[str | None]:
    """An id column (`uuid`, `person_id`) of a pyarrow table as lowercase hyphenated text."""
    import uuid

    return [None if v is None else str(uuid.UUID(bytes=v)) if isinstance(v, bytes) else v
            for v in table.column(column).to_pylist()]


def property_columns(schema, json_column: str = "properties") -> list[tuple[str, str]]:
    """(column, property key) of every promoted column of `json_column` in a pyarrow schema."""
    key_meta = PROPERTY_KEY[json_column]
    out = []
    for field in schema:
        meta = field.metadata or {}
        if key_meta in meta:
            out.append((field.name, meta[key_meta].decode()))
    return out


def full_properties(table, json_column: str = "properties") -> list[str | None]:
    """Each row's full `properties` (or `person_properties`) JSON text, for a pyarrow Table
    read from the events table (e.g. `deltalake.DeltaTable(uri).to_pyarrow_table()`)."""
    columns = property_columns(table.schema, json_column)
    residual = table.column(json_column).to_pylist()
    values = {name: table.column(name).to_pylist() for name, _ in columns}
    out: list[str | None] = []
    for i, text in enumerate(residual):
        if text is None:
            out.append(None)
            continue
        props = json.loads(text)
        for name, key in columns:
            v = values[name][i]
            if v is None or key in props:
                continue
            # Numbers are Float64 in their column; whole numbers were sent as integers.
            if isinstance(v, float) and v.is_integer() and abs(v) <= MAX_EXACT_INT:
                v = int(v)
            props[key] = v
        out.append(json.dumps(props, separators=(",", ":"), sort_keys=True, ensure_ascii=False))
    return out


def duckdb_properties_sql(schema, table_alias: str = "e", json_column: str = "properties") -> str:
    """A DuckDB SQL expression giving each row's full properties (or person properties) as
    JSON, for the columns of `schema` (a pyarrow schema of the table). Residual keys win; NULL
    columns add nothing:

        json_merge_patch(e.properties, json_merge_patch('{}', json_object(
            'k', CASE WHEN json_exists(e.properties, '$."k"') THEN NULL ELSE e."p_k" END, …)))

    (the inner merge drops the NULL members, the outer one adds the rest to the residual and
    keeps the residual's own members, `null` ones included)."""
    columns = property_columns(schema, json_column)
    residual = f"{table_alias}.{json_column}"
    if not columns:
        return residual

    def lit(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    def path(key: str) -> str:
        return lit('$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"')

    members = []
    for name, key in columns:
        col = f'{table_alias}."' + name.replace('"', '""') + '"'
        value = col
        if name.endswith("__num"):
            # Whole numbers back as integers, as they were sent.
            value = (f"CASE WHEN {col} = trunc({col}) AND abs({col}) <= {MAX_EXACT_INT} "
                     f"THEN to_json(CAST({col} AS BIGINT)) ELSE to_json({col}) END")
        members.append(f"{lit(key)}, CASE WHEN json_exists({residual}, "
                       f"{path(key)}) THEN NULL ELSE {value} END")
    return (f"CASE WHEN {residual} IS NULL THEN NULL ELSE json_merge_patch({residual}, "
            f"json_merge_patch('{{}}', json_object({', '.join(members)}))) END")


def main(uri: str) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(uri).to_pyarrow_table()
    rows = zip(ids(table), full_properties(table),
               full_properties(table, "person_properties"))
    for uuid, props, person_props in rows:
        print(uuid, props, person_props)


if __name__ == "__main__":
    main(sys.argv[1])
