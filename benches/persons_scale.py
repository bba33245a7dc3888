"""The persons tables at scale: filters, breakdowns and joins over N persons (default 10^7).

    ~/.cache/hedgerow/venv/bin/python benches/persons_scale.py --bin target/release/hedgerow
    ~/.cache/hedgerow/venv/bin/python benches/persons_scale.py --persons 1000000 --bin … --keep

Sends one `$identify` per person (distinct id `user-<i>`, `$set` {plan, email, country, seats})
and a `purchase` for every 10th person, through `/batch/` (gzip, 4 clients, durable acks), waits
until everything is committed, then times each query (hot median of --runs after one warm-up,
through the HTTP API) and checks each answer against the one the generator's own arithmetic
gives. A benchmark, not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402

PLANS = ["free", "pro", "team"]
COUNTRIES = ["DE", "FR", "GB", "US", "NL", "SE", "ES", "IT", "PL", "CA"]
BATCH = 2000


def bodies(persons: int):
    """The gzip `/batch/` bodies, one `$identify` per person and a purchase every 10th."""
    t0 = 1_700_000_000
    batch: list[dict] = []
    for i in range(persons):
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0 + i // 100))
        batch.append({"event": "$identify", "distinct_id": f"user-{i}", "timestamp": ts,
                      "properties": {"$set": {"plan": PLANS[i % 3], "email": f"user{i}@example.com",
                                              "country": COUNTRIES[i % 10], "seats": i % 50}}})
        if i % 10 == 0:
            batch.append({"event": "purchase", "distinct_id": f"user-{i}", "timestamp": ts,
                          "properties": {"revenue": i % 100}})
        if len(batch) >= BATCH:
            yield gzip.compress(json.dumps({"api_key": bench.PROJECT_KEY, "batch": batch}).encode(), 1), len(batch)
            batch = []
    if batch:
        yield gzip.compress(json.dumps({"api_key": bench.PROJECT_KEY, "batch": batch}).encode(), 1), len(batch)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--persons", type=int, default=10_000_000)
    ap.add_argument("--bin", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--work", type=Path, help="data directory (kept; reused when it holds the data)")
    args = ap.parse_args()
    n = args.persons
    work = args.work or Path(tempfile.mkdtemp(prefix="hedgerow-persons-scale-"))
    data_dir = work / "data"
    fresh = not data_dir.exists()
    server = bench.Server(args.bin, data_dir, [], work / "hedgerow.log")
    try:
        if fresh:
            gen = bodies(n)
            lock = threading.Lock()
            state = {"sent": 0, "error": None}

            def worker():
                s = requests.Session()
                headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
                while not state["error"]:
                    with lock:
                        item = next(gen, None)
                    if item is None:
                        return
                    body, count = item
                    r = s.post(server.base + "/batch/", data=body, headers=headers, timeout=600)
                    if r.status_code != 200:
                        state["error"] = f"HTTP {r.status_code} {r.text[:300]}"
                    with lock:
                        state["sent"] += count

            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if state["error"]:
                raise RuntimeError(state["error"])
            took = time.perf_counter() - t0
            bench.log(f"sent {state['sent']:,} events in {took:.0f} s ({state['sent'] / took:,.0f}/s)")
            server.wait_committed(timeout=3600)
            bench.log("all committed")
        purchases = (n + 9) // 10
        per_plan = {p: sum(1 for i in range(0, n, 10) if PLANS[i % 3] == p) for p in PLANS}
        cases = [
            ("count() of persons", "SELECT count() FROM persons", [[n]]),
            ("persons where properties.plan = 'pro'",
             "SELECT count() FROM persons WHERE properties.plan = 'pro'", [[sum(1 for i in range(n) if i % 3 == 1)]]),
            ("persons by properties.country",
             "SELECT properties.country AS c, count() FROM persons GROUP BY c ORDER BY c",
             [[c, sum(1 for i in range(COUNTRIES.index(c), n, 10))] for c in sorted(COUNTRIES)]),
            ("purchases ⋈ persons by p.properties.plan",
             "SELECT p.properties.plan AS plan, count() FROM events e JOIN persons p ON e.person_id = p.id "
             "WHERE e.event = 'purchase' GROUP BY plan ORDER BY plan",
             [[p, per_plan[p]] for p in sorted(PLANS)]),
            ("purchases by person.properties.plan, joined persons mode",
             {"kind": "HogQLQuery", "query": "SELECT person.properties.plan AS plan, count() FROM events "
              "WHERE event = 'purchase' GROUP BY plan ORDER BY plan",
              "modifiers": {"personsOnEventsMode": "person_id_override_properties_joined"}},
             [[p, per_plan[p]] for p in sorted(PLANS)]),
        ]
        def post(node: dict) -> dict:
            r = requests.post(f"{server.base}/api/projects/1/query/",
                              json={"query": node, "refresh": "force_blocking"},
                              headers={"Authorization": f"Bearer {bench.PERSONAL_KEY}"}, timeout=3600)
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:500]}")
            return r.json()

        print(f"\n{n:,} persons, {purchases:,} purchases; hot median of {args.runs} after a warm-up\n")
        print("| query | median | runs | answer |")
        print("|---|---:|---|---|")
        failed = False
        for name, q, want in cases:
            node = q if isinstance(q, dict) else {"kind": "HogQLQuery", "query": q}
            t0 = time.perf_counter()
            first = post(node)
            cold = time.perf_counter() - t0
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                post(node)
                times.append(time.perf_counter() - t0)
            got = first["results"]
            ok = got == want
            failed |= not ok
            print(f"| {name} | {statistics.median(times) * 1000:,.0f} ms | first {cold * 1000:,.0f} ms, "
                  f"then {', '.join(f'{t * 1000:,.0f}' for t in times)} ms | {'as expected' if ok else f'**{got} != {want}**'} |")
        print(f"\npeak RSS of the server (VmHWM): {server.vm_hwm() / 2**20:,.0f} MiB")
        return 1 if failed else 0
    finally:
        server.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
