"""End-to-end test harness: the real `hedgerow` binary, a real S3 server (Garage), real SDKs.

What lives here:
  * `Hedgerow`: one `hedgerow serve` process. Binds port 0, reads the bound address back from
    the `hedgerow listening on http://…` line on stdout, keeps stderr in a file whose tail is
    attached to the report of any failing test.
  * `garage` (session fixture): a single-node Garage with a default bucket, on free ports.
  * table helpers: read the Delta events table (local or S3) into dicts, poll until events
    are visible, and `EventChecks`, which compares stored rows with what clients sent.

Nothing here is ever skipped: a missing binary or tool is a test failure with a message
saying how to get it (`scripts/test` installs and builds everything).
"""

from __future__ import annotations

import atexit
import datetime as dt
import gzip
import json
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]

PROJECT_API_KEY = "phc_test_hedgerow_project_0123456789abcdef"
PERSONAL_API_KEY = "phx_test_hedgerow_personal_0123456789abcdef"
TEAM_ID = 1

# compat.md, "Persons": person uuids are UUIDv5("<team_id>:<distinct_id>") in this namespace.
PERSON_NAMESPACE = uuid.UUID("932979b4-65c3-4424-8467-0b66ec27bc22")

LISTEN_RE = re.compile(r"hedgerow listening on (http://\S+)")
START_TIMEOUT = float(os.environ.get("HEDGEROW_TEST_START_TIMEOUT", "120"))
STOP_TIMEOUT = float(os.environ.get("HEDGEROW_TEST_STOP_TIMEOUT", "90"))
VISIBLE_TIMEOUT = float(os.environ.get("HEDGEROW_TEST_VISIBLE_TIMEOUT", "60"))

# Ids in 16 bytes: `binary` to Delta (FIXED_LEN_BYTE_ARRAY(16) in the files).
ID_COLUMNS = ["uuid", "person_id"]
STRING_COLUMNS = [
    "event", "distinct_id", "properties", "person_properties",
    "$session_id", "$window_id", "elements_chain",
    "$group_0", "$group_1", "$group_2", "$group_3", "$group_4",
]

# How the tables are read from outside hedgerow: the documented reader.
import sys as _sys  # noqa: E402
_sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
from read_events import full_properties, ids, property_columns  # noqa: E402

# Every server here stores each typed property as a column from its first event on, so the
# checks below read the properties back the way an outside reader must (residual JSON plus
# columns, `docs/examples/read_events.py`).
PROMOTE_EVERYTHING = {
    "HEDGEROW_PROPERTY_COLUMNS_EVERY": "1",
    "HEDGEROW_PROPERTY_COLUMNS_MIN_SHARE": "0",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(ts: dt.datetime) -> str:
    """ISO 8601 with milliseconds and a Z, the way the JS SDKs write timestamps."""
    return ts.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_ts(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path | str, lines: int = 60, width: int = 400) -> str:
    """The last lines of a log, each cut to `width` characters (span fields get long)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    cut = lambda l: l if len(l) <= width else l[:width] + f" …(+{len(l) - width} chars)"
    return "\n".join(cut(l) for l in text.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------
# Processes started by tests, so that failures show their logs and nothing outlives pytest.

_PROCESSES: list["_Tracked"] = []
_CURRENT_MODULE = {"name": "<session>"}


class _Tracked:
    def __init__(self, label: str, proc: subprocess.Popen, log_path: Path):
        self.label = label
        self.proc = proc
        self.log_path = log_path
        self.module = _CURRENT_MODULE["name"]
        _PROCESSES.append(self)


def _kill_leftovers() -> None:
    for t in _PROCESSES:
        if t.proc.poll() is None:
            try:
                t.proc.kill()
                t.proc.wait(timeout=10)
            except Exception:
                pass


atexit.register(_kill_leftovers)


def pytest_runtest_setup(item):
    _CURRENT_MODULE["name"] = item.nodeid.split("::")[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    module = item.nodeid.split("::")[0]
    mine = [t for t in _PROCESSES if t.module == module]
    if "garage" in getattr(item, "fixturenames", ()):
        mine += [t for t in _PROCESSES if t.label == "garage" and t not in mine]
    for t in mine[-5:]:
        state = "running" if t.proc.poll() is None else f"exit code {t.proc.returncode}"
        report.sections.append(
            (f"{t.label} ({state}) log tail: {t.log_path}", tail(t.log_path, 30))
        )


@pytest.fixture(scope="session", autouse=True)
def _stop_everything_at_end():
    yield
    _kill_leftovers()


# --------------------------------------------------------------------------------------------
# The hedgerow binary.

def hedgerow_bin() -> str:
    path = os.environ.get("HEDGEROW_BIN")
    if not path:
        pytest.fail(
            "HEDGEROW_BIN is not set. Run the suite with scripts/test (it builds the binary), "
            "or `cargo build` and export HEDGEROW_BIN=$PWD/target/debug/hedgerow.",
            pytrace=False,
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"HEDGEROW_BIN={path} is not an executable file (did `cargo build` succeed?)",
                    pytrace=False)
    return path


def _server_env(extra: dict[str, str] | None) -> dict[str, str]:
    # The server reads HEDGEROW_* from the environment: start from a clean slate so that a
    # developer's own settings cannot change what a test runs.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDGEROW_")}
    env.setdefault("RUST_BACKTRACE", "1")
    env.setdefault("NO_COLOR", "1")  # plain log files
    env.update(extra or {})
    return env


class Hedgerow:
    """One `hedgerow serve` process. Restartable on the same data dir (new port each time)."""

    def __init__(self, data_dir: Path, log_dir: Path, name: str = "hedgerow",
                 flush_interval: str = "500ms", extra_args: Iterable[str] = (),
                 env: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.name = name
        self.flush_interval = flush_interval
        self.extra_args = list(extra_args)
        self.env = {**PROMOTE_EVERYTHING, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.starts = 0
        self.log_path: Path | None = None
        self.stdout_lines: list[str] = []
        self._listening = threading.Event()

    # -- lifecycle -----------------------------------------------------------------------

    def command(self) -> list[str]:
        return [
            hedgerow_bin(), "serve",
            "--addr", "127.0.0.1:0",
            "--data-dir", str(self.data_dir),
            "--project-api-key", PROJECT_API_KEY,
            "--personal-api-key", PERSONAL_API_KEY,
            "--flush-interval", self.flush_interval,
            *self.extra_args,
        ]

    def _spawn(self, env_overrides: dict[str, str] | None = None) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.log_path = self.log_dir / f"{self.name}-{self.starts}.stderr.log"
        self.stdout_lines = []
        self.url = None
        self._listening = threading.Event()
        log = open(self.log_path, "wb")
        env = _server_env({**self.env, **(env_overrides or {})})
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            env=env, cwd=str(self.data_dir.parent), start_new_session=True,
        )
        log.close()
        _Tracked(f"{self.name}#{self.starts}", self.proc, self.log_path)
        threading.Thread(target=self._read_stdout, args=(self.proc, self._listening,
                                                         self.stdout_lines), daemon=True).start()

    def _read_stdout(self, proc, listening, lines) -> None:
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            m = LISTEN_RE.search(line)
            if m and not listening.is_set():
                self.url = m.group(1).rstrip("/")
                listening.set()
        proc.stdout.close()

    def start(self, timeout: float = START_TIMEOUT,
              env_overrides: dict[str, str] | None = None) -> "Hedgerow":
        self._spawn(env_overrides)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._listening.wait(0.05):
                return self
            if self.proc.poll() is not None:
                self._listening.wait(0.5)  # the line may still be in the pipe
                if self._listening.is_set():
                    break
                pytest.fail(
                    f"{self.name}: `hedgerow serve` exited with code {self.proc.returncode} "
                    f"before listening.\ncommand: {' '.join(self.command())}\n"
                    f"stdout:\n{self.stdout_text()}\nstderr tail:\n{self.stderr_tail()}",
                    pytrace=False)
        if not self._listening.is_set():
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail(
                f"{self.name}: no 'hedgerow listening on http://…' line on stdout within "
                f"{timeout:.0f}s.\nstdout:\n{self.stdout_text()}\nstderr tail:\n"
                f"{self.stderr_tail()}", pytrace=False)
        if self.proc.poll() is not None:
            pytest.fail(f"{self.name}: exited ({self.proc.returncode}) right after listening.\n"
                        f"stderr tail:\n{self.stderr_tail()}", pytrace=False)
        return self

    def start_expecting_refusal(self, timeout: float = 60) -> tuple[int, str]:
        """Start and expect the process to exit non-zero without ever listening.

        Returns (exit code, stdout + stderr)."""
        self._spawn()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail(
                f"{self.name}: expected `hedgerow serve` to refuse to start, but it was still "
                f"running after {timeout:.0f}s (listening: {self._listening.is_set()}).\n"
                f"stderr tail:\n{self.stderr_tail()}", pytrace=False)
        time.sleep(0.2)  # let the stdout reader drain
        output = self.stdout_text() + "\n" + Path(self.log_path).read_text(errors="replace")
        if self._listening.is_set():
            pytest.fail(f"{self.name}: printed its listening line although it should have "
                        f"refused to start.\noutput:\n{output[-4000:]}", pytrace=False)
        return self.proc.returncode, output

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM (flushes buffered events into the table) and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail(f"{self.name}: did not exit within {timeout:.0f}s of SIGTERM.\n"
                        f"stderr tail:\n{self.stderr_tail()}", pytrace=False)

    def stop_cleanly(self) -> None:
        code = self.terminate()
        hint = ""
        if code == -signal.SIGTERM:
            hint = (" — killed by the signal itself: SIGTERM was not handled (is the handler "
                    "installed before the listening line is printed?)")
        assert code == 0, (f"{self.name}: exit code {code} after SIGTERM (expected 0){hint}.\n"
                           f"stderr tail:\n{self.stderr_tail(15)}")

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    # -- diagnostics ----------------------------------------------------------------------

    def stdout_text(self) -> str:
        return "\n".join(self.stdout_lines)

    def stderr_tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines) if self.log_path else "<not started>"

    # -- capture --------------------------------------------------------------------------

    def post(self, path: str, body: Any, *, gzip_body: bool = False, timeout: float = 60,
             session: requests.Session | None = None) -> requests.Response:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if gzip_body:
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        return (session or requests).post(self.url + path, data=data, headers=headers,
                                          timeout=timeout)

    def post_ok(self, path: str, body: Any, **kw) -> None:
        r = self.post(path, body, **kw)
        assert r.status_code == 200, (f"POST {path}: HTTP {r.status_code} {r.text[:500]}\n"
                                      f"stderr tail:\n{self.stderr_tail(20)}")
        assert r.json() == {"status": 1}, f"POST {path}: unexpected body {r.text[:500]}"


def new_server(tmp: Path, name: str = "hedgerow", **kw) -> Hedgerow:
    return Hedgerow(data_dir=tmp / f"{name}-data", log_dir=tmp / "logs", name=name, **kw)


@pytest.fixture
def server_factory(tmp_path):
    """Make (not yet started) servers in this test's temp dir; all are stopped afterwards."""
    made: list[Hedgerow] = []

    def make(name: str = "hedgerow", **kw) -> Hedgerow:
        srv = new_server(tmp_path, name, **kw)
        made.append(srv)
        return srv

    yield make
    for srv in made:
        if srv.alive:
            srv.kill()


# --------------------------------------------------------------------------------------------
# Reading the events table.

def read_table(uri: str, storage_options: dict[str, str] | None = None) -> list[dict]:
    from deltalake import DeltaTable

    table = DeltaTable(uri, storage_options=storage_options).to_pyarrow_table()
    rows = table.to_pylist()
    # Ids are 16-byte UUIDs (binary to Delta): as text, as PostHog shows them.
    for col in ("uuid", "person_id"):
        for row, v in zip(rows, ids(table, col)):
            row[col] = v
    # `properties` as captured and `person_properties` as stamped: the residual JSON plus the
    # promoted columns.
    person_props = full_properties(table, "person_properties")
    for row, props, pprops in zip(rows, full_properties(table), person_props):
        row["properties"] = props
        row["person_properties"] = pprops
        row["_promoted"] = property_columns(table.schema)
    for row in rows:
        for col in ("timestamp", "created_at"):
            if isinstance(row.get(col), dt.datetime) and row[col].tzinfo is None:
                row[col] = row[col].replace(tzinfo=dt.timezone.utc)
    return rows


def wait_for_events(uri: str, want_uuids: Iterable[str], *, server: Hedgerow | None = None,
                    storage_options: dict[str, str] | None = None,
                    timeout: float = VISIBLE_TIMEOUT) -> list[dict]:
    """Poll the table until every uuid in `want_uuids` is in it (flushes are periodic)."""
    want = set(want_uuids)
    deadline = time.monotonic() + timeout
    seen, last_error = 0, None
    while True:
        try:
            rows = read_table(uri, storage_options)
            have = {r["uuid"] for r in rows}
            seen = len(want & have)
            if seen == len(want):
                return rows
            last_error = None
        except Exception as exc:  # table not created yet, or a commit in progress
            last_error = exc
        if server is not None and not server.alive:
            pytest.fail(f"server died while waiting for events (exit {server.proc.returncode})"
                        f"\nstderr tail:\n{server.stderr_tail()}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"after {timeout:.0f}s only {seen}/{len(want)} expected events are in "
                        f"the table at {uri}; last read error: {last_error!r}", pytrace=False)
        time.sleep(0.5)


def check_table_layout(uri: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """Schema and partitioning promised by the contract. Returns problems (empty = fine)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(uri, storage_options=storage_options)
    problems = []
    parts = list(table.metadata().partition_columns)
    if parts != ["team_id", "event_date"]:
        problems.append(f"partition columns are {parts}, expected ['team_id', 'event_date']")
    schema = table.to_pyarrow_table().schema
    is_string = lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or (
        hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    expect: dict[str, Callable[[Any], bool]] = {c: is_string for c in STRING_COLUMNS}
    expect.update({c: lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or (
        hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(t)) for c in ID_COLUMNS})
    utc_us = lambda t: pa.types.is_timestamp(t) and t.unit == "us" and t.tz in ("UTC", "+00:00")
    expect.update({
        "timestamp": utc_us,
        "created_at": utc_us,
        "team_id": lambda t: t == pa.int64(),
        "event_date": pa.types.is_date32,
    })
    for name, ok in expect.items():
        if name not in schema.names:
            problems.append(f"column {name!r} is missing")
        elif not ok(schema.field(name).type):
            problems.append(f"column {name!r} has type {schema.field(name).type}")
    return problems


# --------------------------------------------------------------------------------------------
# Comparing stored rows with what was sent.

def json_same(a: Any, b: Any) -> bool:
    """Equality of JSON values that does not confuse true with 1 or 1 with 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if type(a) is not type(b):
            return False
        return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def expected_properties(msg: dict) -> dict:
    """Properties a sent event must have once stored: its own, with top-level `$set` /
    `$set_once` merged into `properties.$set` / `properties.$set_once` (top level wins)."""
    props = dict(msg.get("properties") or {})
    for key in ("$set", "$set_once"):
        if isinstance(msg.get(key), dict):
            merged = dict(props.get(key) or {})
            merged.update(msg[key])
            props[key] = merged
    return props


class Sent:
    """One event as a client sent it."""

    __slots__ = ("uuid", "event", "distinct_id", "timestamp", "properties", "exact_ts",
                 "person_uuid5")

    def __init__(self, uuid: str, event: str, distinct_id: str, timestamp: dt.datetime,
                 properties: dict, exact_ts: bool = False, person_uuid5: bool = False):
        self.uuid = str(uuid)
        self.event = event
        self.distinct_id = str(distinct_id)
        self.timestamp = parse_ts(timestamp)
        self.properties = properties
        self.exact_ts = exact_ts          # no skew correction expected: equal to the ms
        self.person_uuid5 = person_uuid5  # person_id must be UUIDv5("1:<distinct_id>")

    @classmethod
    def from_sdk_message(cls, msg: dict, **kw) -> "Sent":
        props = expected_properties(msg)
        return cls(msg["uuid"], msg["event"], msg["distinct_id"], parse_ts(msg["timestamp"]),
                   props, exact_ts=bool(props.get("$ignore_sent_at")), **kw)


class EventChecks:
    """Compares rows of the events table with the events sent. Each check returns a list of
    problems; `fail_on` turns a non-empty list into a readable assertion error."""

    def __init__(self, sent: list[Sent], rows: list[dict], *,
                 skew_window: tuple[float, float] = (-0.5, 2.0),
                 created_window: tuple[dt.datetime, dt.datetime] | None = None):
        self.sent = sent
        self.rows = rows
        self.skew_window = skew_window
        self.created_window = created_window
        self.counts = Counter(r["uuid"] for r in rows)
        self.by_uuid = {r["uuid"]: r for r in rows}

    @staticmethod
    def fail_on(problems: list[str], what: str) -> None:
        if problems:
            shown = "\n  ".join(problems[:25])
            more = f"\n  … and {len(problems) - 25} more" if len(problems) > 25 else ""
            pytest.fail(f"{what}: {len(problems)} problem(s)\n  {shown}{more}", pytrace=False)

    def pairs(self):
        for s in self.sent:
            row = self.by_uuid.get(s.uuid)
            if row is not None:
                yield s, row

    def presence(self) -> list[str]:
        problems = [f"uuid {u} stored {n} times" for u, n in self.counts.items() if n > 1]
        problems += [f"{s.event!r} uuid {s.uuid} (distinct_id {s.distinct_id!r}) is missing"
                     for s in self.sent if s.uuid not in self.counts]
        sent_ids = {s.uuid for s in self.sent}
        problems += [f"unexpected row uuid {u} event {self.by_uuid[u]['event']!r}"
                     for u in self.counts if u not in sent_ids]
        return problems

    def identity(self) -> list[str]:
        problems = []
        for s, row in self.pairs():
            if row["event"] != s.event:
                problems.append(f"{s.uuid}: event {row['event']!r} != sent {s.event!r}")
            if row["distinct_id"] != s.distinct_id:
                problems.append(f"{s.uuid}: distinct_id {row['distinct_id']!r} != sent "
                                f"{s.distinct_id!r}")
            if row["team_id"] != TEAM_ID:
                problems.append(f"{s.uuid}: team_id {row['team_id']!r} != {TEAM_ID}")
        return problems

    def timestamps(self) -> list[str]:
        problems = []
        lo, hi = self.skew_window
        for s, row in self.pairs():
            ts = row["timestamp"]
            if not isinstance(ts, dt.datetime):
                problems.append(f"{s.uuid}: timestamp is {ts!r}")
                continue
            delta = (ts - s.timestamp).total_seconds()
            if s.exact_ts:
                if abs(delta) >= 0.001:
                    problems.append(f"{s.uuid} ({s.event}): timestamp {ts.isoformat()} != sent "
                                    f"{s.timestamp.isoformat()} (no skew correction expected)")
            elif not lo <= delta <= hi:
                problems.append(f"{s.uuid} ({s.event}): timestamp {ts.isoformat()} is {delta:+.3f}s"
                                f" from sent {s.timestamp.isoformat()} (allowed {lo}..{hi}s)")
            if row["event_date"] != ts.astimezone(dt.timezone.utc).date():
                problems.append(f"{s.uuid}: event_date {row['event_date']} is not the UTC date "
                                f"of timestamp {ts.isoformat()}")
            created = row["created_at"]
            if not isinstance(created, dt.datetime):
                problems.append(f"{s.uuid}: created_at is {created!r}")
            elif self.created_window and not (
                    self.created_window[0] <= created <= self.created_window[1]):
                problems.append(f"{s.uuid}: created_at {created.isoformat()} is outside the run "
                                f"({self.created_window[0].isoformat()} .. "
                                f"{self.created_window[1].isoformat()})")
        return problems

    def properties(self) -> list[str]:
        problems = []
        for s, row in self.pairs():
            try:
                stored = json.loads(row["properties"])
            except (TypeError, ValueError) as exc:
                problems.append(f"{s.uuid}: properties is not JSON text ({exc}): "
                                f"{str(row['properties'])[:200]}")
                continue
            if not isinstance(stored, dict):
                problems.append(f"{s.uuid}: properties is {type(stored).__name__}, not an object")
                continue
            for key, value in s.properties.items():
                if key not in stored:
                    problems.append(f"{s.uuid} ({s.event}): property {key!r} missing")
                elif not json_same(stored[key], value):
                    problems.append(f"{s.uuid} ({s.event}): property {key!r} is "
                                    f"{stored[key]!r}, sent {value!r}")
        return problems

    def columns(self) -> list[str]:
        """Promoted text-property columns and the session/window id columns mirror the
        properties; at least one property was promoted."""
        problems = []
        promoted = False
        for s, row in self.pairs():
            text = {c: k for c, k in row["_promoted"]
                    if not c.endswith(("__num", "__bool"))}
            promoted = promoted or bool(text)
            direct = {**text, "$session_id": "$session_id", "$window_id": "$window_id"}
            for column, key in direct.items():
                value = s.properties.get(key)
                if value is not None and not isinstance(value, str):
                    continue  # only string values are promised to be mirrored
                value = value or None  # "" reads as NULL, as in HogQL
                # A row written before its property was promoted has it in the JSON only.
                if row.get(column) != value and (column in ("$session_id", "$window_id")
                                                 or row.get(column) is not None):
                    problems.append(f"{s.uuid} ({s.event}): column {column!r} is "
                                    f"{row.get(column)!r}, property {key!r} is {value!r}")
        if not promoted:
            problems.append("no property is stored as a column")
        return problems

    def group_columns(self) -> list[str]:
        """`properties.$groups` → `$group_0..4` (compat.md, Groups: indexes in order of first
        use). Tests use a single group type per project, so it always gets index 0."""
        problems = []
        for s, row in self.pairs():
            groups = s.properties.get("$groups") or {}
            assert len(groups) <= 1, "tests must use a single group type"
            want0 = next(iter(groups.values()), None)
            if row.get("$group_0") != want0:
                problems.append(f"{s.uuid} ({s.event}): $group_0 is {row.get('$group_0')!r}, "
                                f"expected {want0!r} from $groups {groups}")
            for i in range(1, 5):
                if row.get(f"$group_{i}") is not None:
                    problems.append(f"{s.uuid}: $group_{i} is {row.get(f'$group_{i}')!r}")
        return problems

    def person_ids(self) -> list[str]:
        problems = []
        for s, row in self.pairs():
            pid = row.get("person_id")
            try:
                parsed = uuid.UUID(str(pid))
            except ValueError:
                problems.append(f"{s.uuid}: person_id {pid!r} is not a uuid")
                continue
            if s.person_uuid5:
                want = uuid.uuid5(PERSON_NAMESPACE, f"{TEAM_ID}:{s.distinct_id}")
                if parsed != want:
                    problems.append(f"{s.uuid}: person_id {pid} != UUIDv5('{TEAM_ID}:"
                                    f"{s.distinct_id}') = {want}")
        return problems


# --------------------------------------------------------------------------------------------
# Garage: a real S3 server for the object-store tests.

class Garage:
    bucket = "hedgerow-test"
    region = "garage"

    def __init__(self, binary: str, root: Path):
        self.binary = binary
        self.root = root
        self.s3_port, self.rpc_port, self.admin_port = free_port(), free_port(), free_port()
        self.access_key = "GK" + secrets.token_hex(12)
        self.secret_key = secrets.token_hex(32)
        self.endpoint = f"http://127.0.0.1:{self.s3_port}"
        self.proc: subprocess.Popen | None = None
        self.log_path = root / "garage.log"
        # Kept for restarts: a node's RPC secret may not change under its metadata.
        self.rpc_secret = secrets.token_hex(32)

    def start(self, timeout: float = 90) -> None:
        (self.root / "meta").mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        config = self.root / "garage.toml"
        config.write_text(f"""\
metadata_dir = "{self.root / 'meta'}"
data_dir = "{self.root / 'data'}"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{self.rpc_port}"
rpc_public_addr = "127.0.0.1:{self.rpc_port}"
rpc_secret = "{self.rpc_secret}"

[s3_api]
s3_region = "{self.region}"
api_bind_addr = "127.0.0.1:{self.s3_port}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:{self.admin_port}"
""")
        env = {**os.environ,
               "GARAGE_DEFAULT_ACCESS_KEY": self.access_key,
               "GARAGE_DEFAULT_SECRET_KEY": self.secret_key,
               "GARAGE_DEFAULT_BUCKET": self.bucket,
               "RUST_LOG": os.environ.get("GARAGE_LOG", "garage=info")}
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(config), "server", "--single-node", "--default-bucket"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        log.close()
        _Tracked("garage", self.proc, self.log_path)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Ready = the S3 port answers a signed listing of the default bucket."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"garage exited with code {self.proc.returncode} during start-up:\n"
                            f"{tail(self.log_path, 40)}", pytrace=False)
            try:
                requests.get(self.endpoint, timeout=2)  # any HTTP answer: the port is up
                self.list(self.bucket + "/")
                return
            except Exception as exc:
                last = exc
                time.sleep(0.3)
        pytest.fail(f"garage's S3 API at {self.endpoint} was not ready within {timeout:.0f}s "
                    f"(last error: {last!r}):\n{tail(self.log_path, 40)}", pytrace=False)

    def filesystem(self):
        from pyarrow import fs

        return fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key,
                               endpoint_override=self.endpoint, scheme="http",
                               region=self.region, force_virtual_addressing=False)

    def list(self, path: str) -> list[str]:
        from pyarrow import fs

        infos = self.filesystem().get_file_info(fs.FileSelector(path, recursive=True,
                                                                allow_not_found=True))
        return [i.path for i in infos if i.type == fs.FileType.File]

    def storage_options(self) -> dict[str, str]:
        """deltalake (object_store) settings for reading tables from this Garage."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        }

    def hedgerow_args(self, prefix: str) -> list[str]:
        return [
            "--storage-url", f"s3://{self.bucket}/{prefix}",
            "--s3-endpoint", self.endpoint,
            "--s3-region", self.region,
            "--s3-access-key-id", self.access_key,
            "--s3-secret-access-key", self.secret_key,
            "--s3-allow-http",
        ]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def garage_bin() -> str:
    path = os.environ.get("HEDGEROW_GARAGE_BIN")
    if not path:
        cache = os.environ.get("HEDGEROW_CACHE", os.path.expanduser("~/.cache/hedgerow"))
        path = os.path.join(cache, "garage", "bin", "garage")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(
            f"Garage binary not found at {path}. scripts/test installs it with "
            "`cargo install garage@2.5.0 --locked --root $HEDGEROW_CACHE/garage`; "
            "or point HEDGEROW_GARAGE_BIN at a garage 2.5 binary.", pytrace=False)
    return path


@pytest.fixture(scope="session")
def garage(tmp_path_factory):
    g = Garage(garage_bin(), tmp_path_factory.mktemp("garage"))
    g.start()
    yield g
    g.stop()
