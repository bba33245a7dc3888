"""A soak: mixed traffic against one data directory for minutes, with SIGKILLs, and checks.

Three capture clients send SDK-shaped `/batch/` bodies (pageviews with sessions, `$identify`
with `$set`/`$set_once`, custom events; a third of them gzipped), one client runs HogQL
queries and persons API calls, and every `kill_every` seconds the server is SIGKILLed and
started again on the same directory. A sampler reads the server's RSS, open file
descriptors and the data directory's size every second. At the end the server stops with
SIGTERM and the run checks:

  * every event of every acknowledged request is stored exactly once, and nothing else;
  * no query or persons call answered a 5xx;
  * RSS stayed under `max_rss_mib`, file descriptors under `max_fds` (a leak grows them);
  * after the clean stop the WAL holds no more than one segment's worth of bytes;
  * p50/p99 latencies per kind of request are reported (never asserted: timing is not a
    test's business here).

`scripts/soak --minutes N` runs it against the release binary; `tests/py/test_soak.py` runs
a bounded form in the suite. The report is JSON (`--report`), with the RSS/fd curve.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import PERSONAL_API_KEY, PROJECT_API_KEY, Hedgerow, iso, read_table, utcnow  # noqa: E402

QUERIES = [
    "SELECT count() FROM events",
    "SELECT toStartOfDay(timestamp) AS d, count(DISTINCT person_id) FROM events GROUP BY d ORDER BY d",
    "SELECT properties.$browser AS b, count() FROM events GROUP BY b ORDER BY count() DESC LIMIT 10",
    "SELECT event, count() FROM events WHERE timestamp > now() - INTERVAL 1 HOUR GROUP BY event",
    "SELECT * FROM events ORDER BY timestamp DESC LIMIT 100",
    "SELECT properties.email, count() FROM persons GROUP BY properties.email LIMIT 20",
]
BROWSERS = ["Chrome", "Firefox", "Safari", "Edge"]


class Target:
    """The current server's URL and incarnation, or None while it restarts."""

    def __init__(self):
        self._lock = threading.Lock()
        self.url: str | None = None
        self.generation = 0

    def set(self, url: str | None) -> None:
        with self._lock:
            self.url = url
            self.generation += 1

    def get(self) -> tuple[str | None, int]:
        with self._lock:
            return self.url, self.generation


class Latencies:
    def __init__(self):
        self._lock = threading.Lock()
        self.by_kind: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, Counter] = defaultdict(Counter)

    def add(self, kind: str, seconds: float | None, status: str) -> None:
        with self._lock:
            if seconds is not None:
                self.by_kind[kind].append(seconds)
            self.statuses[kind][status] += 1

    def summary(self) -> dict:
        out = {}
        for kind, xs in sorted(self.by_kind.items()):
            xs = sorted(xs)
            out[kind] = {
                "n": len(xs),
                "p50_ms": round(1000 * xs[len(xs) // 2], 1) if xs else None,
                "p99_ms": round(1000 * xs[min(len(xs) - 1, int(len(xs) * 0.99))], 1) if xs else None,
                "statuses": dict(self.statuses[kind]),
            }
        return out


class CaptureClient(threading.Thread):
    def __init__(self, idx: int, target: Target, stop: threading.Event, lat: Latencies, seed: int):
        super().__init__(name=f"soak-capture-{idx}", daemon=True)
        self.idx, self.target, self.stop, self.lat = idx, target, stop, lat
        self.rng = random.Random(seed * 100 + idx)
        self.sent: set[str] = set()
        self.acked: list[str] = []

    def event(self, now) -> dict:
        user = self.rng.randint(0, 199)
        distinct_id = f"soak-{self.idx}-{user}"
        u = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.sent.add(u)
        props = {"$lib": "posthog-python", "$session_id": f"s-{self.idx}-{user}-{int(time.time()) // 300}",
                 "$browser": self.rng.choice(BROWSERS), "$current_url": f"https://shop.example/p/{self.rng.randint(0, 50)}"}
        roll = self.rng.random()
        if roll < 0.1:
            name = "$identify"
            props["$set"] = {"email": f"{distinct_id}@example.com", "plan": self.rng.choice(["free", "pro"])}
            props["$set_once"] = {"first_seen": iso(now)}
        elif roll < 0.7:
            name = "$pageview"
        else:
            name = self.rng.choice(["signed_up", "added_to_cart", "purchased"])
            props["revenue"] = round(self.rng.uniform(1, 100), 2)
        return {"event": name, "distinct_id": distinct_id, "uuid": u, "timestamp": iso(now),
                "properties": props}

    def run(self) -> None:
        session = requests.Session()
        while not self.stop.is_set():
            url, _ = self.target.get()
            if url is None:
                time.sleep(0.02)
                continue
            now = utcnow()
            events = [self.event(now) for _ in range(self.rng.randint(20, 120))]
            body = json.dumps({"api_key": PROJECT_API_KEY, "batch": events}).encode()
            headers = {"Content-Type": "application/json"}
            if self.rng.random() < 0.33:
                body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
            started = time.monotonic()
            try:
                r = session.post(url + "/batch/", data=body, headers=headers, timeout=(3, 30))
            except requests.RequestException as exc:
                self.lat.add("capture", None, type(exc).__name__)
                session = requests.Session()
                time.sleep(0.05)
                continue
            self.lat.add("capture", time.monotonic() - started, str(r.status_code))
            if r.status_code == 200:
                self.acked.extend(e["uuid"] for e in events)
            else:
                time.sleep(0.05)


class QueryClient(threading.Thread):
    def __init__(self, target: Target, stop: threading.Event, lat: Latencies, seed: int):
        super().__init__(name="soak-query", daemon=True)
        self.target, self.stop, self.lat = target, stop, lat
        self.rng = random.Random(seed)
        self.server_errors: list[str] = []

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {PERSONAL_API_KEY}"
        while not self.stop.is_set():
            url, _ = self.target.get()
            if url is None:
                time.sleep(0.05)
                continue
            roll = self.rng.random()
            if roll < 0.6:
                kind = "query"
                call = lambda: session.post(url + "/api/projects/1/query/", timeout=(3, 120), json={
                    "query": {"kind": "HogQLQuery", "query": self.rng.choice(QUERIES)},
                    "refresh": "force_blocking"})
            elif roll < 0.8:
                kind = "persons_list"
                call = lambda: session.get(url + "/api/projects/1/persons/?limit=20", timeout=(3, 60))
            else:
                kind = "person_by_distinct_id"
                d = f"soak-{self.rng.randint(0, 2)}-{self.rng.randint(0, 199)}"
                call = lambda: session.get(url + f"/api/projects/1/persons/?distinct_id={d}", timeout=(3, 60))
            started = time.monotonic()
            try:
                r = call()
            except requests.RequestException as exc:
                self.lat.add(kind, None, type(exc).__name__)
                session.close()
                session = requests.Session()
                session.headers["Authorization"] = f"Bearer {PERSONAL_API_KEY}"
                time.sleep(0.05)
                continue
            self.lat.add(kind, time.monotonic() - started, str(r.status_code))
            if r.status_code >= 500:
                self.server_errors.append(f"{kind}: {r.status_code} {r.text[:300]}")
            time.sleep(0.05)


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def proc_sample(pid: int) -> tuple[int, int] | None:
    """(RSS in KiB, open file descriptors) of `pid`, or None if it is gone."""
    try:
        rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds
    except (OSError, StopIteration):
        return None


def run_soak(*, seconds: float, workdir: Path, kill_every: float, seed: int = 7,
             max_rss_mib: int = 3072, max_fds: int = 1024) -> dict:
    rng = random.Random(seed)
    server = Hedgerow(data_dir=workdir / "data", log_dir=workdir / "logs", name="soak",
                      flush_interval="1s")
    target, stop, lat = Target(), threading.Event(), Latencies()
    captures = [CaptureClient(i, target, stop, lat, seed) for i in range(3)]
    queries = QueryClient(target, stop, lat, seed)
    samples: list[dict] = []
    kills = 0
    started = time.monotonic()

    def sampler():
        while not stop.is_set():
            proc = server.proc
            s = proc_sample(proc.pid) if proc is not None and proc.poll() is None else None
            if s is not None:
                samples.append({"t": round(time.monotonic() - started, 1), "rss_mib": round(s[0] / 1024, 1),
                                "fds": s[1], "incarnation": server.starts,
                                "data_mib": round(dir_bytes(server.data_dir) / 2**20, 1)})
            time.sleep(1)

    server.start()
    target.set(server.url)
    for t in [*captures, queries, threading.Thread(target=sampler, daemon=True)]:
        t.start()
    try:
        next_kill = started + kill_every * rng.uniform(0.7, 1.3)
        while time.monotonic() - started < seconds:
            time.sleep(0.2)
            if kill_every > 0 and time.monotonic() >= next_kill:
                server.kill()
                target.set(None)
                kills += 1
                server.start()
                target.set(server.url)
                next_kill = time.monotonic() + kill_every * rng.uniform(0.7, 1.3)
        stop.set()
        for t in [*captures, queries]:
            t.join(150)
            assert not t.is_alive(), f"{t.name} is stuck"
        final = proc_sample(server.proc.pid)
        server.stop_cleanly()
        rows = read_table(str(server.data_dir / "events"))
        wal_bytes = dir_bytes(server.data_dir / "wal")
        data_bytes = dir_bytes(server.data_dir)
    finally:
        stop.set()
        if server.alive:
            server.kill()

    acked = [u for c in captures for u in c.acked]
    sent = set().union(*(c.sent for c in captures))
    counts = Counter(r["uuid"] for r in rows)
    problems = [f"acknowledged uuid {u} is missing" for u in acked if u not in counts]
    problems += [f"uuid {u} stored {n} times" for u, n in counts.items() if n > 1]
    problems += [f"uuid {u} was never sent" for u in counts if u not in sent]
    problems += queries.server_errors
    rss = [s["rss_mib"] for s in samples]
    fds = [s["fds"] for s in samples]
    if rss and max(rss) > max_rss_mib:
        problems.append(f"RSS reached {max(rss)} MiB (bound {max_rss_mib})")
    if fds and max(fds) > max_fds:
        problems.append(f"{max(fds)} open file descriptors (bound {max_fds})")
    # One segment (64 MiB by default) may stay; more means the WAL is not trimmed.
    if wal_bytes > 80 * 2**20:
        problems.append(f"the WAL holds {wal_bytes} bytes after a clean stop")
    curve = [s for i, s in enumerate(samples) if i % 10 == 0]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "kills": kills,
        "acknowledged_events": len(acked),
        "stored_events": len(rows),
        "sent_events": len(sent),
        "events_per_second_acked": round(len(acked) / max(1.0, seconds), 1),
        "latency": lat.summary(),
        "rss_mib": {"max": max(rss, default=None), "median": statistics.median(rss) if rss else None,
                    "at_end": round(final[0] / 1024, 1) if final else None},
        "fds": {"max": max(fds, default=None), "at_end": final[1] if final else None},
        "data_dir_bytes_per_event": round(data_bytes / max(1, len(rows)), 1),
        "wal_bytes_after_stop": wal_bytes,
        "curve_every_10s": curve,
        "problems": problems[:50],
        "problem_count": len(problems),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--kill-every", type=float, default=60, help="seconds between SIGKILLs (0: none)")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--report", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    report = run_soak(seconds=args.minutes * 60, workdir=args.workdir, kill_every=args.kill_every,
                      seed=args.seed)
    text = json.dumps(report, indent=2)
    if args.report:
        args.report.write_text(text)
    summary = {k: v for k, v in report.items() if k not in ("curve_every_10s",)}
    print(json.dumps(summary, indent=2))
    if report["problem_count"]:
        print(f"soak: {report['problem_count']} problems", file=sys.stderr)
        return 1
    print("soak: every acknowledged event stored exactly once; bounds held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
