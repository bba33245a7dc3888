"""Reading hedgerow's events table without hedgerow: pyarrow (through delta-rs) and DuckDB.

The table is Delta Lake over Parquet (docs/architecture.md, "Storage"). A project's frequent
event properties are stored as typed columns named `p_<key>` (text), `p_<key>__num`
(Float64) or `p_<key>__bool` (Boolean); each such column carries its property key in its
field metadata `hedgerow.property` (in the Delta schema and in every file's Arrow schema).
The `properties` column keeps every other key (the residual JSON). A row's full properties
are the residual plus, for every promoted column that is not NULL in that row and whose key
the residual does not have, that key with the column's value. (When a value could not be
given back exactly by its column, e.g. the number 5 sent for a text property, the residual
keeps it, and the residual wins.)

    python docs/examples/read_events.py <table path or URI>

prints each event's uuid and full properties. `tests/py/test_open_formats.py` runs both
readers against a live table and checks them against what was sent.
"""

from __future__ import annotations

import json
import sys

PROPERTY_KEY = b"hedgerow.property"
MAX_EXACT_INT = 2**53


def property_columns(schema) -> list[tuple[str, str]]:
    """(column, property key) of every promoted column of a pyarrow schema."""
    out = []
    for field in schema:
        meta = field.metadata or {}
        if PROPERTY_KEY in meta:
            out.append((field.name, meta[PROPERTY_KEY].decode()))
    return out


def full_properties(table) -> list[str]:
    """Each row's full `properties` JSON text, for a pyarrow Table read from the events table
    (e.g. `deltalake.DeltaTable(uri).to_pyarrow_table()`)."""
    columns = property_columns(table.schema)
    residual = table.column("properties").to_pylist()
    values = {name: table.column(name).to_pylist() for name, _ in columns}
    out = []
    for i, text in enumerate(residual):
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


def duckdb_properties_sql(schema, table_alias: str = "e") -> str:
    """A DuckDB SQL expression giving each row's full properties as JSON, for the columns of
    `schema` (a pyarrow schema of the table). Residual keys win; NULL columns add nothing:

        json_merge_patch(e.properties, json_merge_patch('{}', json_object(
            'k', CASE WHEN json_exists(e.properties, '$."k"') THEN NULL ELSE e."p_k" END, …)))

    (the inner merge drops the NULL members, the outer one adds the rest to the residual and
    keeps the residual's own members, `null` ones included)."""
    columns = property_columns(schema)
    if not columns:
        return f"{table_alias}.properties"

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
        members.append(f"{lit(key)}, CASE WHEN json_exists({table_alias}.properties, "
                       f"{path(key)}) THEN NULL ELSE {value} END")
    return (f"json_merge_patch({table_alias}.properties, json_merge_patch('{{}}', "
            f"json_object({', '.join(members)})))")


def main(uri: str) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(uri).to_pyarrow_table()
    for uuid, props in zip(table.column("uuid").to_pylist(), full_properties(table)):
        print(uuid, props)


if __name__ == "__main__":
    main(sys.argv[1])
