"""SIGKILL never loses an acknowledged event, and the WAL replays exactly once.

Four client threads post `/batch/` requests (50–200 events with fresh uuids, some gzipped)
non-stop. The server is SIGKILLed at a seeded-random moment 0.5–3 s after it starts
listening, then restarted on the same data dir (clients follow it to its new port), for
several rounds; flush settings change from round to round so that kills land before, during
and after flushes. Finally the server is stopped with SIGTERM and the table must hold:

  * every event of every request that got HTTP 200, exactly once;
  * no uuid more than once, and nothing that was never sent;
  * for each stored event, the name and distinct_id that were sent.

Requests that failed or were cut by a kill may or may not be stored (never twice). A batch
is never re-sent: its outcome is unknown, and a re-send would legitimately duplicate it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import random
import threading
import time
import uuid
from collections import Counter

import requests

from conftest import PROJECT_API_KEY, EventChecks, new_server, read_table, utcnow

SEED = int(os.environ.get("HEDGEROW_CRASH_SEED", "1105"))
ROUNDS = 6
THREADS = 4
# (flush interval, HEDGEROW_FLUSH_ROWS or None) per start; rows-based flushes happen
# mid-stream, long intervals leave everything in the WAL when the kill comes.
FLUSH_SETTINGS = [("500ms", None), ("5s", None), ("200ms", "300"), ("2s", None), ("1s", "2000")]


class Target:
    """Where clients send: the current server's URL, or None while it is being restarted."""

    def __init__(self):
        self._lock = threading.Lock()
        self._url: str | None = None
        self.generation = 0

    def set(self, url: str | None) -> None:
        with self._lock:
            self._url = url
            self.generation += 1

    def get(self) -> tuple[str | None, int]:
        with self._lock:
            return self._url, self.generation


class Client(threading.Thread):
    def __init__(self, idx: int, target: Target, stop: threading.Event):
        super().__init__(name=f"crash-client-{idx}", daemon=True)
        self.idx = idx
        self.rng = random.Random(SEED * 100 + idx)
        self.target = target
        self.stop = stop
        self.sent: dict[str, tuple[str, str]] = {}  # uuid -> (event, distinct_id), all attempts
        self.acked: list[list[str]] = []            # uuids of each acknowledged batch
        self.acked_generations: Counter = Counter()
        self.failures = Counter()
        self.bad_bodies: list[str] = []

    def batch(self) -> list[dict]:
        now = utcnow()
        events = []
        for k in range(self.rng.randint(50, 200)):
            u = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            name = f"crash_{self.rng.randint(0, 4)}"
            distinct_id = f"crash-user-{self.idx}-{self.rng.randint(0, 49)}"
            ev = {"event": name, "uuid": u,
                  "timestamp": (now - dt.timedelta(milliseconds=k)).isoformat(),
                  "properties": {"client": self.idx, "k": k}}
            if self.rng.random() < 0.2:
                ev["properties"]["distinct_id"] = distinct_id  # batch items may carry it here
            else:
                ev["distinct_id"] = distinct_id
            events.append(ev)
            self.sent[u] = (name, distinct_id)
        return events

    def run(self) -> None:
        session = requests.Session()
        while not self.stop.is_set():
            url, generation = self.target.get()
            if url is None:
                time.sleep(0.02)
                continue
            events = self.batch()
            body = json.dumps({"api_key": PROJECT_API_KEY, "batch": events}).encode()
            headers = {"Content-Type": "application/json"}
            if self.rng.random() < 0.35:
                body = gzip.compress(body)
                headers["Content-Encoding"] = "gzip"
            try:
                r = session.post(url + "/batch/", data=body, headers=headers, timeout=(3, 30))
            except requests.RequestException as exc:
                self.failures[type(exc).__name__] += 1
                session.close()
                session = requests.Session()
                time.sleep(0.02)
                continue
            if r.status_code == 200:
                self.acked.append([e["uuid"] for e in events])
                self.acked_generations[generation] += 1
                if r.text.strip() and _json_or_none(r.text) != {"status": 1}:
                    self.bad_bodies.append(r.text[:200])
            else:
                self.failures[f"HTTP {r.status_code}"] += 1
                time.sleep(0.02)


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def test_sigkill_loses_no_acknowledged_event(tmp_path):
    rng = random.Random(SEED)
    server = new_server(tmp_path, "hedgerow-crash")
    target, stop = Target(), threading.Event()
    clients = [Client(i, target, stop) for i in range(THREADS)]
    generations: list[int] = []

    def start(round_no: int):
        interval, rows = FLUSH_SETTINGS[round_no % len(FLUSH_SETTINGS)]
        server.flush_interval = interval
        server.start(env_overrides={"HEDGEROW_FLUSH_ROWS": rows} if rows else None)
        target.set(server.url)
        generations.append(target.get()[1])

    try:
        start(0)
        for c in clients:
            c.start()
        for round_no in range(ROUNDS):
            time.sleep(rng.uniform(0.5, 3.0))
            server.kill()
            target.set(None)
            start(round_no + 1)
        time.sleep(1.5)  # traffic against the last incarnation too
        stop.set()
        for c in clients:
            c.join(60)
            assert not c.is_alive(), f"{c.name} is stuck"
        server.stop_cleanly()
        rows = read_table(str(server.data_dir / "events"))

        # A clean restart with no traffic must not replay anything again.
        server.flush_interval = "200ms"
        server.start()
        time.sleep(1.5)
        server.stop_cleanly()
        rows_after_restart = read_table(str(server.data_dir / "events"))
    finally:
        stop.set()
        if server.alive:
            server.kill()

    sent: dict[str, tuple[str, str]] = {}
    for c in clients:
        sent.update(c.sent)
    acked = [u for c in clients for b in c.acked for u in b]
    per_generation = Counter()
    for c in clients:
        per_generation.update(c.acked_generations)
    failures = sum((c.failures for c in clients), Counter())
    summary = (f"sent {len(sent)} events, {len(acked)} acknowledged in "
               f"{sum(len(c.acked) for c in clients)} batches; acknowledged batches per server "
               f"start: {[per_generation[g] for g in generations]}; failed requests: "
               f"{dict(failures)}; rows {len(rows)}")
    print(summary)

    # The test must have exercised something in most incarnations of the server.
    assert len(acked) >= 2000, summary
    assert sum(1 for g in generations if per_generation[g] > 0) >= (ROUNDS + 1) // 2, summary
    assert not [b for c in clients for b in c.bad_bodies], "200 responses without {\"status\": 1}"

    counts = Counter(r["uuid"] for r in rows)
    problems = [f"uuid {u} stored {n} times" for u, n in counts.items() if n > 1]
    problems += [f"acknowledged uuid {u} is missing" for u in acked if u not in counts]
    problems += [f"uuid {u} was never sent" for u in counts if u not in sent]
    for r in rows:
        if r["uuid"] in sent and (r["event"], r["distinct_id"]) != sent[r["uuid"]]:
            problems.append(f"{r['uuid']}: stored ({r['event']!r}, {r['distinct_id']!r}), sent "
                            f"{sent[r['uuid']]}")
    EventChecks.fail_on(problems, f"after {ROUNDS} SIGKILLs ({summary})")

    again = Counter(r["uuid"] for r in rows_after_restart)
    assert again == counts, (
        f"a clean restart changed the table: {sum(again.values())} rows instead of "
        f"{sum(counts.values())}; duplicated: {[u for u, n in again.items() if n > 1][:5]}")
