"""Real faults: SIGKILL at the write paths' failpoints, a full disk, the S3 store stopped.

Nothing acknowledged is lost, persons and the Delta log come out as a clean run leaves
them, capture answers 503 while it cannot be durable and recovers by itself, and queries
answer a clear error while the store is away. docs/architecture.md, "Fault injection".

## SIGKILL at a failpoint

The server is built with failpoints (`engine/src/faults.rs`): `HEDGEROW_FAILPOINTS=<point>=kill@N`
makes it SIGKILL itself at the N-th time it reaches `<point>` — between a flush's files
and its commit, after the commit, before WAL segments are deleted, around the person
store's transaction, between a compaction's or fold's files and their commit, before the
fold forgets overrides, at vacuum, and at each step of a person-event erasure.

One workload, the same in every trial: posthog-js-shaped batches for a dozen users
(anonymous pageviews, personless events, `$identify` merges, `$set`/`$set_once`, an alias
merge of two identified users), a queued event deletion for one of them and a deletion run
midway, with flushes, compaction and the override fold forced to run often. It runs once
cleanly (the reference), then once per trial with a failpoint armed; when the server dies,
it restarts on the same data directory without failpoints and the workload goes on, the
interrupted step sent again (capture with fresh uuids: its first outcome is unknown).

Each trial then checks, after a clean stop and start:
  * every event of every acknowledged request is stored exactly once, unless the reference
    erased it; nothing never sent is stored; what the reference erased is absent;
  * every logical event of the reference is present, with the same person_id;
  * the persons API lists the same persons (uuid, distinct ids, properties);
  * every file the Delta log names exists, and every data file on disk is named by the
    log (current, or removed and awaiting vacuum): no orphan, no missing file.

TRIALS (`HEDGEROW_FAULT_TRIALS`; 17 by default, one per point) cycles through the points
with kill@1, then @2, @3… (the erasure points and the fold's forget only to @2: the workload
reaches them twice), so kills also land in later flushes and rewrites; every point a trial
arms must fire.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import random
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq
import requests

from conftest import (PERSONAL_API_KEY, PROJECT_API_KEY, TEAM_ID, Garage, Hedgerow, garage_bin,
                      new_server)

# scripts/test runs each point once; the documented run is 50 (docs/testing.md).
TRIALS = int(os.environ.get("HEDGEROW_FAULT_TRIALS", "17"))
SEED = int(os.environ.get("HEDGEROW_FAULT_SEED", "1709"))
POINTS = [
    "capture.durable", "flush.written", "flush.committed", "wal.truncate",
    "persons.commit", "persons.committed", "rewrite.written", "rewrite.committed",
    "fold.forget", "vacuum", "erase.buffer", "erase.wal", "erase.deleted",
    "erase.vacuumed", "erase.table", "erase.scrubbed", "erase.finished",
]
# Flushes every few batches, compaction and the fold every second, vacuum of what they
# replace right away: every point is reached within the workload.
SERVER_ENV = {
    "HEDGEROW_FLUSH_ROWS": "120",
    "HEDGEROW_COMPACTION_INTERVAL": "1s",
    "HEDGEROW_COMPACTION_MIN_FILES": "2",
    "HEDGEROW_OVERRIDE_FOLD_INTERVAL": "1s",
    "HEDGEROW_OVERRIDE_FOLD_SHARE": "0",
    "HEDGEROW_VACUUM_RETENTION": "0s",
    "HEDGEROW_DELETION_SCHEDULE": "off",
}
AUTH = {"Authorization": f"Bearer {PERSONAL_API_KEY}"}
BASE = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)
USERS = 12
STEPS = 30


def workload(erasure: bool) -> list[tuple]:
    """The steps: ("batch", [events]) with logical ids in `lid`, ("delete_events", did)
    (queue the deletion of that user's events), ("run_deletions",), ("pause", seconds).
    Without `erasure`, no deletion: a deletion run deletes every file the log does not name,
    which would hide the files an interrupted write left."""
    rng = random.Random(SEED)
    steps: list[tuple] = []
    n = 0
    for step in range(STEPS):
        events = []
        for k in range(rng.randint(20, 60)):
            u = rng.randrange(USERS)
            anon, user = f"anon-{u}", f"user-{u}"
            identified = step * 2 > u
            props = {"$current_url": f"https://example.com/{rng.randint(0, 9)}"}
            name = "$pageview"
            did = user if identified else anon
            roll = rng.random()
            if not identified and roll < 0.3:
                props["$process_person_profile"] = False
            elif identified and step * 2 == u + 1 and roll < 0.5:
                name = "$identify"
                props |= {"$anon_distinct_id": anon, "$set": {"plan": rng.choice(["free", "pro"])},
                          "$set_once": {"first_step": step}}
            elif roll < 0.2:
                props["$set"] = {"last_step": step, "score": rng.randint(0, 100)}
            n += 1
            props["lid"] = f"{step}-{k}"
            ts = BASE + dt.timedelta(minutes=step * 7, seconds=k)
            events.append({"event": name, "distinct_id": did, "properties": props,
                           "timestamp": ts.isoformat()})
        steps.append(("batch", events))
        if step == 18:
            # Two identified users become one.
            ts = BASE + dt.timedelta(minutes=step * 7, seconds=59)
            steps.append(("batch", [{"event": "$merge_dangerously", "distinct_id": "user-0",
                                     "properties": {"alias": "user-1", "lid": "alias"},
                                     "timestamp": ts.isoformat()}]))
        if step == 12 and erasure:
            steps.append(("delete_events", "user-3"))
            steps.append(("pause", 1.5))
            steps.append(("run_deletions",))
        if step % 6 == 5:
            steps.append(("pause", 1.2))
    if erasure:
        steps.append(("delete_events", "user-5"))
        steps.append(("run_deletions",))
    return steps


class Run:
    """One pass of the workload against a server that may die at a failpoint."""

    def __init__(self, tmp: Path, name: str, failpoint: str | None, erasure: bool):
        self.server = new_server(tmp, name, flush_interval="300ms", env=SERVER_ENV)
        self.failpoint = failpoint
        self.erasure = erasure
        self.acked: list[str] = []      # uuids of acknowledged events
        self.sent: set[str] = set()      # every uuid ever sent
        self.lid_of: dict[str, str] = {}  # uuid -> logical id
        self.kills = 0

    def start(self, armed: bool) -> None:
        env = {"HEDGEROW_FAILPOINTS": self.failpoint} if armed and self.failpoint else None
        self.server.start(env_overrides=env)

    def died(self) -> bool:
        try:
            self.server.proc.wait(5)
        except Exception:
            return False
        return True

    def recover(self, what: str) -> None:
        """The server is dead (or dying at its failpoint): restart it unarmed."""
        assert self.died(), f"{what} failed but the server is alive:\n{self.server.stderr_tail()}"
        assert self.server.proc.returncode == -9, (
            f"the server exited with {self.server.proc.returncode}, not SIGKILL at "
            f"{self.failpoint}:\n{self.server.stderr_tail()}")
        self.kills += 1
        self.start(armed=False)

    def step(self, s: tuple) -> None:
        while True:
            if not self.server.alive:
                self.recover(s[0])
            try:
                if self._do(s):
                    return
            except requests.RequestException:
                pass
            self.recover(s[0])

    def _do(self, s: tuple) -> bool:
        url = self.server.url
        kind = s[0]
        if kind == "pause":
            time.sleep(s[1])
            return True
        if kind == "batch":
            batch = [dict(e, uuid=str(uuid.uuid4())) for e in s[1]]
            self.sent.update(e["uuid"] for e in batch)
            self.lid_of.update((e["uuid"], e["properties"]["lid"]) for e in batch)
            r = requests.post(f"{url}/batch/", json={"api_key": PROJECT_API_KEY, "batch": batch},
                              timeout=60)
            if r.status_code != 200:
                assert r.status_code >= 500, r.text
                return False
            self.acked.extend(e["uuid"] for e in batch)
            return True
        if kind == "delete_events":
            person = self.person_of(s[1])
            r = requests.post(f"{url}/api/projects/{TEAM_ID}/persons/{person}/delete_events/",
                              headers=AUTH, timeout=60)
            return r.status_code in (200, 201, 202)
        if kind == "run_deletions":
            r = requests.post(f"{url}/api/deletion_tasks/run/", headers=AUTH, timeout=600)
            return r.status_code == 200
        raise AssertionError(kind)

    def person_of(self, did: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = requests.get(f"{self.server.url}/api/projects/{TEAM_ID}/persons/",
                             params={"distinct_id": did}, headers=AUTH, timeout=30)
            r.raise_for_status()
            found = r.json()["results"]
            if found:
                return found[0]["uuid"]
            time.sleep(0.1)
        raise AssertionError(f"no person for {did}")

    def run(self) -> None:
        self.start(armed=True)
        for s in workload(self.erasure):
            self.step(s)
        # Whatever was armed and not reached stays armed; a clean stop and an unarmed start
        # give the state every check reads.
        code = self.server.terminate()
        assert code in (0, -9), f"exit code {code} after SIGTERM:\n{self.server.stderr_tail()}"
        self.kills += code == -9
        self.start(armed=False)

    def outcome(self) -> dict:
        url = self.server.url
        persons = []
        nxt = f"{url}/api/projects/{TEAM_ID}/persons/?limit=100"
        while nxt:
            r = requests.get(nxt, headers=AUTH, timeout=30)
            r.raise_for_status()
            body = r.json()
            persons += body["results"]
            nxt = body.get("next")
        r = _hogql(url, "SELECT toString(uuid), properties.lid, toString(person_id) "
                        "FROM events LIMIT 100000")
        assert r.status_code == 200, r.text
        rows = r.json()["results"]
        return {
            "persons": sorted((p["uuid"], sorted(p["distinct_ids"]),
                               json.dumps(p["properties"], sort_keys=True)) for p in persons),
            "rows": rows,
        }


# How often the workload reaches a point: two deletion runs, and about two fold sweeps
# that find overrides to forget. Other points are reached at least a handful of times.
REACH = {p: 2 for p in POINTS if p.startswith("erase.")} | {"fold.forget": 2}


def schedule(n: int) -> list[tuple[str, int]]:
    """`n` trials: the points in turn, each at its next hit (kill@1, then @2…) while the
    workload reaches it that often."""
    out: list[tuple[str, int]] = []
    nth: Counter = Counter()
    while len(out) < n:
        for p in POINTS:
            if len(out) < n and nth[p] < REACH.get(p, 1 << 30):
                nth[p] += 1
                out.append((p, nth[p]))
    return out


def log_problems(table: Path) -> list[str]:
    """Files the log names that are missing; data files on disk the log does not name."""
    current = {f for f in read_table_files(table)}
    named: set[str] = set(current)
    for f in sorted((table / "_delta_log").iterdir()):
        if f.name.endswith(".json"):
            for line in f.read_text().splitlines():
                a = json.loads(line)
                for k in ("add", "remove"):
                    if k in a:
                        named.add(a[k]["path"])
        elif f.name.endswith(".checkpoint.parquet"):
            t = pq.read_table(f).to_pylist()
            for a in t:
                for k in ("add", "remove"):
                    if a.get(k):
                        named.add(a[k]["path"])
    named = {unquote(p) for p in named}
    current = {unquote(p) for p in current}
    on_disk = {str(p.relative_to(table)) for p in table.rglob("*.parquet")
               if not str(p.relative_to(table)).startswith("_")}
    problems = [f"missing: {p}" for p in sorted(current - on_disk)]
    problems += [f"orphan: {p}" for p in sorted(on_disk - named)]
    return problems


def read_table_files(table: Path) -> list[str]:
    from deltalake import DeltaTable
    return [os.path.relpath(u.removeprefix("file://"), table)
            for u in DeltaTable(str(table)).file_uris()]


def check(run: Run, ref: dict, got: dict) -> list[str]:
    problems: list[str] = []
    ref_lids = Counter(r[1] for r in ref["rows"])
    ref_person = {r[1]: r[2] for r in ref["rows"]}
    stored = Counter(r[0] for r in got["rows"])
    lids = Counter(r[1] for r in got["rows"])
    by_uuid = {r[0]: r for r in got["rows"]}
    for u, n in stored.items():
        if n != 1:
            problems.append(f"uuid {u} stored {n} times")
        if u not in run.sent:
            problems.append(f"uuid {u} was never sent")
    for u in run.acked:
        if u not in by_uuid and run.lid_of[u] in ref_lids:
            # Only what the reference erased may be missing.
            problems.append(f"acknowledged uuid {u} ({run.lid_of[u]}) is missing")
    for u, r in by_uuid.items():
        lid = r[1]
        if lid not in ref_lids:
            problems.append(f"{lid} ({u}) is stored but the reference erased it")
        elif ref_person[lid] != r[2]:
            problems.append(f"{lid}: person_id {r[2]}, the reference has {ref_person[lid]}")
    for lid in ref_lids:
        if lid not in lids:
            problems.append(f"{lid} is missing")
    if got["persons"] != ref["persons"]:
        a, b = set(got["persons"]), set(ref["persons"])
        problems.append(f"persons differ: only here {sorted(a - b)[:3]}, only in the "
                        f"reference {sorted(b - a)[:3]}")
    problems += log_problems(run.server.data_dir / "events")
    return problems


def test_sigkill_at_every_failpoint(tmp_path):
    refs = {}
    for erasure in (False, True):
        ref_run = Run(tmp_path, f"reference-{erasure}", None, erasure)
        ref_run.run()
        refs[erasure] = ref_run.outcome()
        ref_run.server.stop_cleanly()
        assert refs[erasure]["rows"] and refs[erasure]["persons"]
    # With erasure, the reference erased user-3's and user-5's events of before their runs.
    assert len(refs[True]["rows"]) < len(refs[False]["rows"])
    trials = schedule(TRIALS)
    report, failures, fired = [], [], Counter()
    for i, (point, nth) in enumerate(trials):
        erasure = point.startswith("erase.")
        run = Run(tmp_path, f"trial{i}", f"{point}=kill@{nth}", erasure)
        run.run()
        got = run.outcome()
        problems = check(run, refs[erasure], got)
        run.server.stop_cleanly()
        fired[point] += run.kills > 0
        report.append(f"{point}=kill@{nth}: {run.kills} kill(s), {len(run.acked)} acked, "
                      f"{len(problems)} problem(s)")
        if problems:
            failures.append(f"{point}=kill@{nth}:\n  " + "\n  ".join(problems[:10]))
    print("\n".join(report))
    assert not failures, "\n".join(failures)
    print(f"{sum(fired.values())} of {len(trials)} trials killed the server")
    never = [p for p in POINTS if p in dict(trials) and not fired[p]]
    assert not never, f"failpoints the workload never reached: {never}\n" + "\n".join(report)


# --------------------------------------------------------------------------------------------
# A full disk.

def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, (
        f"cannot mount a {size} tmpfs at {path} for the disk-full test ({r.stderr.strip()}); "
        "it needs root (or CAP_SYS_ADMIN), which scripts/test's machines have")


def _fill(path: Path) -> int:
    """Writes `path` until the file system is full; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1 << 8, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written += f.write(block)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    return written


def _batch(tag: str, n: int) -> list[dict]:
    return [{"event": "disk", "distinct_id": f"d-{tag}-{i % 7}", "uuid": str(uuid.uuid4()),
             "properties": {"tag": tag, "pad": "x" * 200}} for i in range(n)]


def _capture(url: str, tag: str, acked: list[str]) -> requests.Response:
    """Sends a batch of 50 events; their uuids join `acked` if it is answered 200."""
    batch = _batch(tag, 50)
    r = requests.post(f"{url}/batch/", timeout=60,
                      json={"api_key": PROJECT_API_KEY, "batch": batch})
    if r.status_code == 200:
        acked.extend(e["uuid"] for e in batch)
    return r


def _hogql(url: str, sql: str, timeout: float = 600) -> requests.Response:
    return requests.post(f"{url}/api/projects/{TEAM_ID}/query/", headers=AUTH, timeout=timeout,
                         json={"query": {"kind": "HogQLQuery", "query": sql}})


ALL_UUIDS = "SELECT toString(uuid) FROM events LIMIT 100000"


def _assert_stored_once(r: requests.Response, acked: list[str], *, nothing_else: bool = False):
    """`r` answered ALL_UUIDS: every acknowledged uuid is there exactly once (and, with
    `nothing_else`, no other)."""
    assert r.status_code == 200, r.text
    stored = Counter(row[0] for row in r.json()["results"])
    missing = set(acked) - set(stored)
    twice = [u for u, n in stored.items() if n > 1]
    extra = set(stored) - set(acked) if nothing_else else set()
    assert not missing and not twice and not extra, (
        f"{len(missing)} acknowledged missing, {len(twice)} stored twice, "
        f"{len(extra)} stored but never acknowledged")


def _fault_server(data_dir: Path, tmp_path: Path, name: str, wal_segment: str) -> Hedgerow:
    """A server for a disk fault: quick flushes, small WAL segments (so a fault soon meets
    a new segment), no deletion runs."""
    return Hedgerow(data_dir=data_dir, log_dir=tmp_path / "logs", name=name,
                    flush_interval="200ms",
                    env={"HEDGEROW_WAL_SEGMENT_SIZE": wal_segment,
                         "HEDGEROW_DELETION_SCHEDULE": "off"})


def _capture_under_fault(srv: Hedgerow, what: str, tag: str, n: int,
                         acked: list[str]) -> tuple[Counter, dict]:
    """Sends `n` batches while `what` lasts: the server stays up, each is answered 200 or
    503, at least one is refused, and a refusal is a `server_error` with `Retry-After`.
    Returns the statuses and the first refusal's body."""
    statuses: Counter = Counter()
    refusals = []
    for i in range(n):
        r = _capture(srv.url, f"{tag}-{i}", acked)
        statuses[r.status_code] += 1
        if r.status_code != 200:
            refusals.append(r)
    assert srv.alive, f"the server died on {what}:\n{srv.stderr_tail()}"
    assert set(statuses) <= {200, 503}, f"{statuses}: {[r.text[:200] for r in refusals]}"
    assert refusals, f"{n} batches on {what}, none refused: {statuses}"
    body = refusals[0].json()
    assert body.get("type") == "server_error", body
    assert refusals[0].headers.get("Retry-After"), refusals[0].headers
    return statuses, body


def _capture_recovers(url: str, acked: list[str], timeout: float) -> bool:
    """Whether capture answers 200 again within `timeout`; until then it answers 503."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = _capture(url, "after", acked)
        if r.status_code == 200:
            return True
        assert r.status_code == 503, r.text
        time.sleep(0.5)
    return False


def test_a_full_disk_answers_503_and_recovers_by_itself(tmp_path):
    """The data directory on a 24 MiB tmpfs that a ballast file fills: capture answers 503
    saying why (never 200 for what it could not make durable, never a crash), queries go on
    answering, and once space is freed capture takes events again without a restart. Every
    acknowledged event is stored exactly once. (A read-only directory is the next test.)"""
    mnt = tmp_path / "small-disk"
    _mount_tmpfs(mnt, "24m")
    try:
        srv = _fault_server(mnt / "data", tmp_path, "diskfull", "1MiB")
        srv.start()
        acked: list[str] = []

        def send(tag: str) -> requests.Response:
            return _capture(srv.url, tag, acked)

        for i in range(5):
            assert send(f"before-{i}").status_code == 200
        ballast = mnt / "ballast"
        filled = _fill(ballast)
        statuses, body = _capture_under_fault(
            srv, f"a full disk ({filled} bytes of ballast)", "full", 40, acked)
        assert body["detail"] == ("could not make the events durable: the write-ahead log could "
                                  "not be written (no storage space)"), body
        q = _hogql(srv.url, "SELECT count() FROM events")
        assert q.status_code in (200, 503), q.text
        ballast.unlink()
        # Space is back: capture takes events again by itself.
        assert _capture_recovers(srv.url, acked, 60), "capture did not recover"
        for i in range(5):
            assert send(f"after-{i}").status_code == 200
        srv.stop_cleanly()
        srv.start()
        _assert_stored_once(_hogql(srv.url, ALL_UUIDS), acked)
        print(f"disk full: {filled} bytes of ballast, capture answers {dict(statuses)}; "
              f"{len(acked)} acknowledged events all stored once")
        srv.stop_cleanly()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _chattr(flag: str, path: Path) -> None:
    r = subprocess.run(["chattr", "-R", flag, str(path)], capture_output=True, text=True)
    assert r.returncode == 0, (
        f"chattr -R {flag} {path} failed ({r.stderr.strip()}): the read-only test needs root "
        "and a file system with the immutable flag (tmpfs has it since Linux 6.0)")


def test_a_read_only_data_directory_answers_503_and_recovers_by_itself(tmp_path):
    """The immutable flag (`chattr -R +i`, which binds root too) makes a directory read-only
    under the running server: files can be neither created, renamed nor deleted in it. (A
    read-only remount is refused while the server holds files open for writing.)

    First the events table alone: capture goes on answering 200 (the WAL holds the events),
    flushes fail and are retried, queries answer. Then the whole data directory (WAL,
    SQLite, table): once the WAL needs a new segment capture answers 503 saying why, never
    200 for what it could not make durable, and the server stays up. When the flag is
    lifted, everything catches up without a restart, and every acknowledged event is stored
    exactly once."""
    mnt = tmp_path / "disk"
    _mount_tmpfs(mnt, "256m")
    data = mnt / "data"
    try:
        srv = _fault_server(data, tmp_path, "readonly", "256KiB")
        srv.start()
        acked: list[str] = []
        for i in range(3):
            assert _capture(srv.url, f"before-{i}", acked).status_code == 200
        _assert_stored_once(_wait_for_rows(srv.url, len(acked)), acked, nothing_else=True)

        # 1. The table read-only.
        table = data / "events"
        _chattr("+i", table)
        try:
            for i in range(20):
                r = _capture(srv.url, f"table-ro-{i}", acked)
                assert r.status_code == 200, r.text
            deadline = time.monotonic() + 30
            while _flush_failures(srv.url) == 0:
                assert time.monotonic() < deadline, "no flush failed into a read-only table"
                time.sleep(0.2)
            assert srv.alive, f"the server died on a read-only table:\n{srv.stderr_tail()}"
            q = _hogql(srv.url, "SELECT count() FROM events")
            assert q.status_code == 200, q.text
        finally:
            _chattr("-i", table)
        _assert_stored_once(_wait_for_rows(srv.url, len(acked)), acked, nothing_else=True)

        # 2. The whole data directory read-only.
        _chattr("+i", data)
        try:
            statuses, body = _capture_under_fault(
                srv, "a read-only data directory", "all-ro", 60, acked)
            assert "write-ahead log" in body["detail"] and "permission" in body["detail"].lower(), body
        finally:
            _chattr("-i", data)
        assert _capture_recovers(srv.url, acked, 60), "capture did not recover"
        _assert_stored_once(_wait_for_rows(srv.url, len(acked)), acked, nothing_else=True)
        srv.stop_cleanly()
        srv.start()
        _assert_stored_once(_hogql(srv.url, ALL_UUIDS), acked, nothing_else=True)
        print(f"read-only: table phase all 200; whole directory {dict(statuses)}; "
              f"{len(acked)} acknowledged events all stored once")
        srv.stop_cleanly()
    finally:
        subprocess.run(["chattr", "-R", "-i", str(data)], capture_output=True)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


class _LoopDisk:
    """An ext4 file system on a loop device whose sparse backing file sits on a small
    tmpfs. Filling that tmpfs with a ballast file fails every later write of the device to
    a block not yet written: the file system above sees real I/O errors, so `fsync` answers
    EIO (device-mapper's error target would be the usual tool; this kernel has none)."""

    def __init__(self, root: Path, size_mb: int):
        self.backing_dir = root / "backing"
        _mount_tmpfs(self.backing_dir, f"{size_mb}m")
        self.backing = self.backing_dir / "disk.img"
        with open(self.backing, "wb") as f:
            f.truncate(size_mb << 20)
        self.ballast = self.backing_dir / "ballast"
        r = subprocess.run(["losetup", "-f", "--show", str(self.backing)],
                           capture_output=True, text=True)
        assert r.returncode == 0, (
            f"losetup failed ({r.stderr.strip()}): the failing-fsync test needs root and loop "
            "devices")
        self.device = r.stdout.strip()
        self.mnt = root / "disk"
        self.mnt.mkdir()
        for cmd in (["mkfs.ext4", "-q", self.device], ["mount", self.device, str(self.mnt)]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == 0, f"{cmd}: {r.stderr.strip()}"

    def fail_writes(self, on: bool) -> None:
        if on:
            _fill(self.ballast)
        else:
            self.ballast.unlink()

    def remount(self) -> None:
        """What an operator does after I/O errors: unmount, check, mount again."""
        for cmd in (["umount", str(self.mnt)], ["e2fsck", "-fy", self.device],
                    ["mount", self.device, str(self.mnt)]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            # e2fsck: 0 clean, 1 errors corrected
            assert r.returncode in ((0, 1) if cmd[0] == "e2fsck" else (0,)), (
                f"{cmd}: {r.returncode} {r.stderr.strip()}")

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", self.device], capture_output=True)
        subprocess.run(["umount", "-l", str(self.backing_dir)], capture_output=True)


def test_a_failing_fsync_is_never_acknowledged(tmp_path):
    """The data directory on a disk whose writes start failing (`_LoopDisk`): the WAL's
    fsync gets EIO. Capture answers 503 for what it could not make durable, never 200, and
    the server stays up. When the disk works again the server either recovers by itself or,
    if ext4 gave up on its journal, is stopped, the file system checked and mounted again,
    and the server started, as an operator would. Either way every acknowledged event is
    stored exactly once."""
    disk = _LoopDisk(tmp_path, 256)
    try:
        data = disk.mnt / "data"
        srv = _fault_server(data, tmp_path, "fsync", "256KiB")
        srv.start()
        acked: list[str] = []
        for i in range(5):
            assert _capture(srv.url, f"before-{i}", acked).status_code == 200
        _wait_for_rows(srv.url, len(acked))
        disk.fail_writes(True)
        try:
            statuses, body = _capture_under_fault(srv, "failing fsyncs", "eio", 30, acked)
        finally:
            disk.fail_writes(False)
        assert "write-ahead log" in body["detail"], body
        recovered = _capture_recovers(srv.url, acked, 20)
        if recovered:
            # The flushes catch up by themselves too: a commit that landed while its fsync
            # failed is settled, not appended again on a stale snapshot.
            _wait_flushed(srv.url)
            _assert_stored_once(_hogql(srv.url, ALL_UUIDS), acked)
            srv.stop_cleanly()
        else:
            srv.kill()
            disk.remount()
        srv.start()
        for i in range(3):
            assert _capture(srv.url, f"restarted-{i}", acked).status_code == 200
        _assert_stored_once(_wait_for_rows(srv.url, len(acked)), acked)
        print(f"failing fsync: capture answered {dict(statuses)} while writes failed; "
              f"{'recovered by itself' if recovered else 'recovered after a remount'}; "
              f"{len(acked)} acknowledged events all stored once")
        srv.stop_cleanly()
    finally:
        disk.close()


def _metric(url: str, name: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=10).text
    line = next(ln for ln in text.splitlines() if ln.split(" ")[0].split("{")[0] == name)
    return float(line.split()[-1])


def _flush_failures(url: str) -> int:
    return int(_metric(url, "hedgerow_flush_failures_total"))


def _wait_flushed(url: str, timeout: float = 60) -> None:
    """Waits until the buffer is empty: everything applied is committed to the table."""
    deadline = time.monotonic() + timeout
    while _metric(url, "hedgerow_buffer_rows") > 0:
        assert time.monotonic() < deadline, (
            f"the flushes did not catch up: {_metric(url, 'hedgerow_buffer_rows'):.0f} rows "
            f"still buffered, {_flush_failures(url)} flush failures")
        time.sleep(0.3)


def _wait_for_rows(url: str, n: int, timeout: float = 60) -> requests.Response:
    """ALL_UUIDS once the table holds at least `n` rows (flushes run in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        r = _hogql(url, ALL_UUIDS)
        if r.status_code == 200 and len(r.json()["results"]) >= n:
            return r
        assert time.monotonic() < deadline, f"the table did not reach {n} rows: {r.text[:300]}"
        time.sleep(0.3)


# --------------------------------------------------------------------------------------------
# The object store goes away.

def test_s3_stopped_mid_ingest_and_mid_query(tmp_path):
    """Garage (the table's S3 store) is stopped for longer than the writer lease under
    ingest and a query, then started again: capture keeps answering 200 (the WAL is local),
    a query answers a clear error while the store is away, no commit is tried while the
    lease is stale, flushes resume by themselves when it is back, and every acknowledged
    event is in the table exactly once."""
    g = Garage(garage_bin(), tmp_path / "garage-own")
    g.start()
    try:
        # A 3 s lease: the outage below outlasts it, so commits must stop while the lease
        # is stale (another writer could take the table over) and resume once it is fresh.
        srv = Hedgerow(data_dir=tmp_path / "s3-data", log_dir=tmp_path / "logs", name="s3down",
                       flush_interval="300ms", extra_args=g.hedgerow_args("outage"),
                       env={"HEDGEROW_DELETION_SCHEDULE": "off", "HEDGEROW_LEASE_TTL": "3s"})
        srv.start()
        acked: list[str] = []

        def send(tag: str) -> requests.Response:
            return _capture(srv.url, tag, acked)

        def query(sql: str) -> requests.Response:
            return _hogql(srv.url, sql)

        for i in range(5):
            assert send(f"up-{i}").status_code == 200
        time.sleep(1.5)  # flushed to the store
        g.stop()
        statuses = Counter(send(f"down-{i}").status_code for i in range(10))
        assert statuses == Counter({200: 10}), statuses
        started = time.monotonic()
        q = query("SELECT count() FROM events")
        took = time.monotonic() - started
        assert q.status_code != 200 or q.json()["results"], q.text
        if q.status_code != 200:
            body = q.json()
            assert q.status_code == 503 and body["code"] == "storage_unavailable", q.text
            assert "storage could not be read" in body["detail"], q.text
            assert "http://" not in body["detail"], q.text
            assert q.headers.get("Retry-After"), q.headers
        assert srv.alive
        # Longer than the lease: the next flush the pipeline tries (it backs off after
        # failures, up to 30 s) is held back.
        deadline = time.monotonic() + 90
        while "does not hold a fresh writer lease" not in srv.log_path.read_text():
            assert time.monotonic() < deadline, "no commit was held back while the lease was stale"
            time.sleep(0.5)
        g.start()
        for i in range(5):
            assert send(f"back-{i}").status_code == 200
        # Flushes resume by themselves: the buffer drains to the store.
        deadline = time.monotonic() + 120
        while True:
            r = query("SELECT count() FROM events")
            if r.status_code == 200 and r.json()["results"][0][0] == len(acked):
                break
            assert time.monotonic() < deadline, f"not all events became readable: {r.text}"
            time.sleep(1)
        srv.stop_cleanly()
        srv.start()
        _assert_stored_once(query(ALL_UUIDS), acked, nothing_else=True)
        print(f"S3 away: capture {dict(statuses)}, a query answered {q.status_code} in "
              f"{took:.1f} s ({q.text[:160]}); {len(acked)} acknowledged events stored once")
        srv.stop_cleanly()
    finally:
        g.stop()


class FaultyLink:
    """A TCP proxy in front of the S3 server that makes the network slow and unreliable:
    every chunk waits `delay` seconds each way, and a share `reset` of the connections is
    cut (RST) after their first chunk, in the middle of a request or its answer."""

    def __init__(self, upstream_port: int, delay: float, reset: float, seed: int = 7,
                 lose_commit_answers: int = 0):
        import socket
        import threading
        self.upstream = ("127.0.0.1", upstream_port)
        self.delay, self.reset = delay, reset
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.connections = self.cut = 0
        # The next this many Delta commits (PUT of _delta_log/N.json) reach the server,
        # and their answer is lost: the client cannot know whether its commit landed.
        self.lose_commit_answers = lose_commit_answers
        self.commit_answers_lost = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += 1
                cut = self.rng.random() < self.reset
                self.cut += cut
            threading.Thread(target=self._pump, args=(client, server, cut, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, cut, False),
                             daemon=True).start()

    def _pump(self, src, dst, cut: bool, upstream: bool) -> None:
        import re
        import socket
        import struct
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                time.sleep(self.delay)
                dst.sendall(data)
                if upstream and re.match(rb"PUT \S*/_delta_log/\d+\.json", data):
                    with self.lock:
                        lose = self.commit_answers_lost < self.lose_commit_answers
                        self.commit_answers_lost += lose
                    if lose:
                        time.sleep(0.5)  # the server takes the commit; its answer is lost
                        cut = True
                if cut:
                    # SO_LINGER 0: close sends a reset, as a dropped link or a dying proxy.
                    for s in (src, dst):
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def test_a_slow_and_unreliable_store(tmp_path):
    """The table's S3 server behind a link that delays every chunk by 50 ms each way and
    resets one connection in eight mid-request: capture answers 200 throughout (the WAL is
    local), flushes, compaction and queries retry their way through, and every
    acknowledged event is in the table exactly once. Latencies are printed, not asserted."""
    g = Garage(garage_bin(), tmp_path / "garage-slow")
    g.start()
    link = FaultyLink(g.s3_port, delay=0.05, reset=0.125)
    try:
        args = g.hedgerow_args("slow")
        args[args.index("--s3-endpoint") + 1] = link.endpoint
        srv = Hedgerow(data_dir=tmp_path / "slow-data", log_dir=tmp_path / "logs", name="slow",
                       flush_interval="300ms", extra_args=args,
                       env={"HEDGEROW_DELETION_SCHEDULE": "off",
                            "HEDGEROW_COMPACTION_INTERVAL": "1s",
                            "HEDGEROW_COMPACTION_MIN_FILES": "2"})
        srv.start()
        acked: list[str] = []
        capture_s, query_s, queries = [], [], Counter()
        for i in range(30):
            t = time.monotonic()
            r = _capture(srv.url, f"slow-{i}", acked)
            capture_s.append(time.monotonic() - t)
            assert r.status_code == 200, r.text
            if i % 5 == 4:
                t = time.monotonic()
                q = _hogql(srv.url, "SELECT count() FROM events")
                query_s.append(time.monotonic() - t)
                queries[q.status_code] += 1
                assert q.status_code in (200, 503), q.text
                if q.status_code == 503:
                    assert q.json()["code"] == "storage_unavailable", q.text
            time.sleep(0.2)
        srv.stop_cleanly()
        srv.start()
        deadline = time.monotonic() + 300
        while (r := _hogql(srv.url, ALL_UUIDS)).status_code != 200:
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
        _assert_stored_once(r, acked, nothing_else=True)
        srv.stop_cleanly()
        capture_s.sort()
        print(f"slow store: {link.connections} connections, {link.cut} reset; capture max "
              f"{capture_s[-1] * 1000:.0f} ms, median {capture_s[len(capture_s) // 2] * 1000:.0f} ms; "
              f"queries {dict(queries)} in {[round(q, 2) for q in query_s]} s; "
              f"{len(acked)} acknowledged events stored once")
    finally:
        link.close()
        g.stop()


def test_a_commit_whose_answer_is_lost_is_not_applied_twice(tmp_path):
    """The S3 server takes a Delta commit (the PUT of `_delta_log/N.json`) and the answer
    never reaches hedgerow, three times: the client retries into "already exists", and
    must neither lose the commit nor apply its files twice."""
    g = Garage(garage_bin(), tmp_path / "garage-lost")
    g.start()
    link = FaultyLink(g.s3_port, delay=0, reset=0, lose_commit_answers=3)
    try:
        args = g.hedgerow_args("lost")
        args[args.index("--s3-endpoint") + 1] = link.endpoint
        srv = Hedgerow(data_dir=tmp_path / "lost-data", log_dir=tmp_path / "logs", name="lost",
                       flush_interval="300ms", extra_args=args,
                       env={"HEDGEROW_DELETION_SCHEDULE": "off"})
        srv.start()
        acked: list[str] = []
        for i in range(12):
            r = _capture(srv.url, f"lost-{i}", acked)
            assert r.status_code == 200, r.text
            time.sleep(0.5)
        srv.stop_cleanly()
        assert link.commit_answers_lost >= 3, link.commit_answers_lost
        srv.start()
        _assert_stored_once(_hogql(srv.url, ALL_UUIDS), acked)
        srv.stop_cleanly()
    finally:
        link.close()
        g.stop()


# --------------------------------------------------------------------------------------------
# A damaged data file.

def test_a_damaged_data_file_fails_only_the_queries_that_read_it(tmp_path):
    """One day's Parquet file has garbage written over its pages (its footer intact), as a
    bad disk or a broken copy leaves it: the server starts, a query that reads the
    file answers an error (never a crash or a hang), queries of the other days answer
    right, and capture goes on."""
    srv = Hedgerow(data_dir=tmp_path / "damaged-data", log_dir=tmp_path / "logs",
                   name="damaged", flush_interval="200ms",
                   env={"HEDGEROW_DELETION_SCHEDULE": "off",
                        "HEDGEROW_COMPACTION_INTERVAL": "1h"})
    srv.start()
    days = ["2026-02-01", "2026-02-02", "2026-02-03"]
    for day in days:
        batch = [{"event": "d", "distinct_id": f"u{i % 9}", "uuid": str(uuid.uuid4()),
                  "timestamp": f"{day}T12:{i % 60:02d}:00Z",
                  "properties": {"n": i, "text": f"value {i} " * 20}} for i in range(3000)]
        r = requests.post(f"{srv.url}/batch/", timeout=60,
                          json={"api_key": PROJECT_API_KEY, "batch": batch})
        assert r.status_code == 200, r.text
    srv.stop_cleanly()
    files = sorted((srv.data_dir / "events").rglob("event_date=2026-02-02/*.parquet"))
    assert len(files) == 1, files
    # Garbage over every page (after the leading magic, up to the footer): any column read
    # fails, while the footer and its statistics still parse.
    data = bytearray(files[0].read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    start, end = 4, len(data) - 8 - footer
    rng = random.Random(3)
    data[start:end] = bytes(rng.randrange(256) for _ in range(end - start))
    files[0].write_bytes(bytes(data))

    srv.start()

    def count(where: str) -> requests.Response:
        return _hogql(srv.url, "SELECT count(), sum(properties.n), max(length(properties.text)) "
                               f"FROM events WHERE {where}")

    bad = count("toDate(timestamp) = '2026-02-02'")
    # Not the query's fault: a 500 (its detail, which names files, stays in the log).
    assert bad.status_code == 500 and bad.json()["code"] == "data_file_unreadable", bad.text
    assert srv.alive, f"a damaged file killed the server:\n{srv.stderr_tail()}"
    for day in ("2026-02-01", "2026-02-03"):
        ok = count(f"toDate(timestamp) = '{day}'")
        assert ok.status_code == 200, ok.text
        assert ok.json()["results"][0][:2] == [3000, sum(range(3000))], ok.text
    r = requests.post(f"{srv.url}/batch/", timeout=60, json={
        "api_key": PROJECT_API_KEY, "batch": [{"event": "after", "distinct_id": "u"}]})
    assert r.status_code == 200, r.text
    print(f"damaged file: the query reading it answered {bad.status_code} {bad.text[:200]}")
    srv.stop_cleanly()


# --------------------------------------------------------------------------------------------
# A file-size limit.

class _SizeLimited(Hedgerow):
    """`hedgerow serve` under `prlimit --fsize`: a write past the limit fails (EFBIG), and
    the kernel sends SIGXFSZ, whose default action kills the process."""

    def __init__(self, *args, fsize: int, **kw):
        super().__init__(*args, **kw)
        self.fsize = fsize

    def command(self) -> list[str]:
        return ["prlimit", f"--fsize={self.fsize}", "--", *super().command()]


def test_a_file_size_limit_fails_writes_not_the_process(tmp_path):
    """RLIMIT_FSIZE of 1 MiB with 4 MiB WAL segments: the append that crosses the limit
    fails (EFBIG) and is answered 503, the WAL goes on in a new segment, and the process
    lives (SIGXFSZ is ignored, as PostgreSQL does). Restarted without the limit, every
    acknowledged event is stored exactly once."""
    srv = _SizeLimited(data_dir=tmp_path / "fsize-data", log_dir=tmp_path / "logs",
                       name="fsize", flush_interval="300ms", fsize=1 << 20,
                       env={"HEDGEROW_WAL_SEGMENT_SIZE": "4MiB",
                            "HEDGEROW_DELETION_SCHEDULE": "off"})
    srv.start()
    acked: list[str] = []
    statuses: Counter = Counter()
    for i in range(120):
        try:
            r = _capture(srv.url, f"fsize-{i}", acked)
        except requests.RequestException as e:
            raise AssertionError(f"the server died at batch {i} (exit {srv.proc.poll()}): {e}\n"
                                 f"{srv.stderr_tail()}")
        statuses[r.status_code] += 1
        if r.status_code != 200:
            assert r.status_code == 503, r.text
            assert "file too large" in r.json()["detail"].lower(), r.text
    assert srv.alive, f"the server died:\n{srv.stderr_tail()}"
    assert statuses[503] > 0, f"the limit was never reached: {statuses}"
    assert statuses[200] > statuses[503], statuses
    srv.stop_cleanly()
    plain = Hedgerow(data_dir=srv.data_dir, log_dir=tmp_path / "logs", name="fsize-after",
                     flush_interval="300ms", env={"HEDGEROW_DELETION_SCHEDULE": "off"})
    plain.start()
    _assert_stored_once(_hogql(plain.url, ALL_UUIDS), acked)
    print(f"file-size limit: capture answered {dict(statuses)}; "
          f"{len(acked)} acknowledged events stored once")
    plain.stop_cleanly()
