"""The events table on a real S3 server (Garage): write, restart, and the single-writer rule.

1. hedgerow with `--storage-url s3://bucket/prefix` takes 2 000 events through `/batch/`;
   after SIGTERM the Delta table at s3://bucket/prefix/events holds all of them, read with
   the deltalake package straight from the bucket (nothing under the local data dir).
2. Restarted on the same table, it still has the first run's events and adds new ones
   (batches, and single events on each capture path), visible while it runs.
3. A second `hedgerow serve` on the same S3 table while the first runs refuses to start
   with a message about another writer, and leaves the first one's table intact.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import uuid

from conftest import (PROJECT_API_KEY, EventChecks, Sent, check_table_layout,
                      read_table, utcnow, wait_for_events)

SEED = 424242
ANOTHER_WRITER = re.compile(r"another[\s_-]*writer", re.IGNORECASE)


def _events(rng: random.Random, n: int, tag: str) -> list[dict]:
    """Events with explicit timestamps over the last 3 days and no sent_at: stored as given."""
    now = utcnow().replace(microsecond=0)
    out = []
    for i in range(n):
        ts = now - dt.timedelta(seconds=rng.randint(0, 3 * 86400), milliseconds=rng.randint(0, 999))
        props = {"run": tag, "i": i, "score": rng.randint(0, 10**6) / 100, "ok": rng.random() < .5}
        if i % 4 == 0:
            props.update({"$browser": rng.choice(["Chrome", "Firefox", "Safari"]),
                          "$os": rng.choice(["Linux", "Mac OS X", "iOS"]),
                          "$current_url": f"https://s3.example.com/{tag}/{i}",
                          "$pathname": f"/{tag}/{i}", "$device_type": "Desktop"})
        out.append({
            "event": rng.choice(["$pageview", "clicked", "purchased"]),
            "distinct_id": f"s3-{tag}-{rng.randint(0, 40)}",
            "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "timestamp": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "properties": props,
        })
    return out


def _sent(events: list[dict]) -> list[Sent]:
    return [Sent(e["uuid"], e["event"], e["distinct_id"], e["timestamp"], e["properties"],
                 exact_ts=True, person_uuid5=True) for e in events]


def _send_batches(server, events: list[dict], per_request: int, gzip_every: int = 2) -> None:
    for n, start in enumerate(range(0, len(events), per_request)):
        body = {"api_key": PROJECT_API_KEY, "batch": events[start:start + per_request]}
        server.post_ok("/batch/", body, gzip_body=(n % gzip_every == 1))


def _check_all(sent: list[Sent], rows: list[dict], what: str) -> None:
    checks = EventChecks(sent, rows)
    for check in (checks.presence, checks.identity, checks.timestamps, checks.properties,
                  checks.columns, checks.group_columns):
        EventChecks.fail_on(check(), f"{what}: {check.__name__}")


def test_events_table_on_s3_restart_and_single_writer(garage, server_factory, tmp_path):
    rng = random.Random(SEED)
    prefix = f"run-{uuid.uuid4()}"
    table = f"s3://{garage.bucket}/{prefix}/events"
    opts = garage.storage_options()
    s3_args = garage.hedgerow_args(prefix)

    # 1. Write 2 000 events, stop, read them back from the bucket.
    first = server_factory("hedgerow-s3", extra_args=s3_args).start()
    run1 = _events(rng, 2000, "one")
    _send_batches(first, run1, per_request=500)
    first.stop_cleanly()
    rows = read_table(table, opts)
    _check_all(_sent(run1), rows, "after the first run")
    EventChecks.fail_on(check_table_layout(table, opts), "events table schema on S3")
    objects = garage.list(f"{garage.bucket}/{prefix}/")
    assert any("/events/_delta_log/" in o for o in objects), objects[:20]
    assert any(o.endswith(".parquet") for o in objects), objects[:20]
    assert not (first.data_dir / "events" / "_delta_log").exists(), \
        "with --storage-url the table must live in the bucket, not under the data dir"

    # 2. Restart on the same table: old events stay, new ones are added while it runs.
    first.start()
    run2 = _events(rng, 500, "two")
    _send_batches(first, run2, per_request=250)
    singles = _events(rng, 4, "single")
    for path, ev in zip(["/i/v0/e/", "/e/", "/capture/", "/track/"], singles):
        first.post_ok(path, {"api_key": PROJECT_API_KEY, **ev})
    expected = run1 + run2 + singles
    wait_for_events(table, [e["uuid"] for e in expected], server=first, storage_options=opts,
                    timeout=90)

    # 3. A second writer on the same table must refuse to start …
    second = server_factory("hedgerow-s3-second", extra_args=s3_args)
    code, output = second.start_expecting_refusal(timeout=60)
    assert code != 0, f"second writer exited with code 0:\n{output[-3000:]}"
    assert ANOTHER_WRITER.search(output), \
        f"second writer's refusal does not mention another writer:\n{output[-3000:]}"

    # … and the first keeps working, its table intact.
    run3 = _events(rng, 100, "three")
    _send_batches(first, run3, per_request=100)
    expected += run3
    first.stop_cleanly()
    _check_all(_sent(expected), read_table(table, opts), "after restart and a refused writer")

    # Once the first writer has stopped, the table can be opened by a new server.
    third = server_factory("hedgerow-s3-third", extra_args=s3_args).start()
    third.stop_cleanly()
    assert len(read_table(table, opts)) == len(expected)
