"""Persons built by hedgerow from a generated data set, against the generator's own answer.

    ~/.cache/hedgerow/venv/bin/python benches/persons_check.py --events 1000000 --bin target/release/hedgerow

Generates (or reuses) `hedgerow gen --events N --seed S`, ingests its `/batch/` bodies into a
fresh server, and compares hedgerow's persons count and `count(DISTINCT person_id)` over the
events with the number of distinct person ids in the generator's events.parquet (its own model
of who merged into whom), read by DuckDB. Exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
import duckdb  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bin", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "hedgerow" / "bench")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    data = bench.generate(args.bin, args.events, args.seed, args.cache)
    work = Path(tempfile.mkdtemp(prefix="hedgerow-persons-check-"))
    server = bench.Server(args.bin, work / "data", [], work / "hedgerow.log")
    try:
        bench.ingest(server, data, 4)
        q = lambda text: server.query(text)[1]["results"][0][0]  # noqa: E731
        persons = q("SELECT count() FROM persons")
        identified = q("SELECT count() FROM persons WHERE is_identified")
        uniq = q("SELECT count(DISTINCT person_id) FROM events")
        identifies = q("SELECT countIf(event = '$identify') FROM events")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    expected = duckdb.sql(
        f"SELECT count(DISTINCT person_id) FROM read_parquet('{data / 'events.parquet'}')").fetchall()[0][0]
    print(f"hedgerow: {persons} persons ({identified} identified), {uniq} distinct person_id over the "
          f"events, {identifies} $identify events; generator: {expected} distinct persons")
    return 0 if persons == uniq == expected else 1


if __name__ == "__main__":
    sys.exit(main())
