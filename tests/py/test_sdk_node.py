"""The real `posthog-node` SDK against hedgerow (tests/node/sdk_test.mjs does the sending).

posthog-node gzips its batches by default and the script keeps that default, so this also
covers gzip bodies as a real client sends them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess

import pytest

from conftest import (PERSONAL_API_KEY, PROJECT_API_KEY, REPO_ROOT, EventChecks, Sent,
                      new_server, read_table, utcnow, wait_for_events)

NODE_DIR = REPO_ROOT / "tests" / "node"
BULK = 3000


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` is not on PATH (Node 20+ is required for the posthog-node test)",
                    pytrace=False)
    if not (NODE_DIR / "node_modules" / "posthog-node" / "package.json").is_file():
        pytest.fail("tests/node/node_modules is missing posthog-node: run `npm ci` in tests/node "
                    "(scripts/test does this)", pytrace=False)
    return node


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    node = _node()
    tmp = tmp_path_factory.mktemp("sdk-node")
    server = new_server(tmp, "hedgerow-node", flush_interval="500ms").start()
    out = tmp / "node-result.json"
    started = utcnow()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("POSTHOG_")}
        proc = subprocess.run(
            [node, str(NODE_DIR / "sdk_test.mjs"), server.url, PROJECT_API_KEY, str(BULK),
             str(out)],
            cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and out.is_file(), (
            f"sdk_test.mjs failed with exit code {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}"
            f"\nstderr:\n{proc.stderr[-3000:]}")
        result = json.loads(out.read_text())
        table = str(server.data_dir / "events")
        visible = wait_for_events(table, [m["uuid"] for m in result["sent"]], server=server,
                                  timeout=90)
        import requests
        auth = {"Authorization": f"Bearer {PERSONAL_API_KEY}"}
        persons = requests.get(server.url + "/api/projects/1/persons/?limit=1000", headers=auth,
                               timeout=30).json()
        groups = requests.post(server.url + "/api/projects/1/query/", headers=auth, timeout=30,
                               json={"query": {"kind": "HogQLQuery",
                                               "query": "SELECT key, properties FROM groups"}}).json()
        server.stop_cleanly()
        rows = read_table(table)
        finished = utcnow()
    finally:
        if server.alive:
            server.kill()
    merged = {"node-user-5", "node-anon-5"}
    sent = [Sent.from_sdk_message(m, person_uuid5=m["distinct_id"] not in merged)
            for m in result["sent"]]
    return {
        "result": result, "node_stderr": proc.stderr, "sent": sent, "rows": rows,
        "persons": persons, "groups": groups,
        "visible_before_stop": len(visible),
        "checks": EventChecks(sent, rows, created_window=(started - dt.timedelta(seconds=5),
                                                          finished + dt.timedelta(seconds=5))),
    }


def test_sdk_sent_everything_without_errors(run):
    result = run["result"]
    assert result["errors"] == [], f"posthog-node reported errors: {result['errors'][:5]}"
    sent_uuids = [m["uuid"] for m in result["sent"]]
    assert len(sent_uuids) == BULK + 8, f"expected {BULK + 8} events, SDK queued {len(sent_uuids)}"
    assert sorted(result["flushed"]) == sorted(sent_uuids), \
        "posthog-node did not flush every queued event"


def test_every_event_stored_exactly_once(run):
    EventChecks.fail_on(run["checks"].presence(), "events in the table vs events sent")
    assert run["visible_before_stop"] == len(run["rows"])


def test_names_distinct_ids_and_team(run):
    EventChecks.fail_on(run["checks"].identity(), "event names, distinct ids and team ids")


def test_timestamps(run):
    EventChecks.fail_on(run["checks"].timestamps(), "timestamps")


def test_properties(run):
    EventChecks.fail_on(run["checks"].properties(), "properties")


def test_identify_alias_group_payloads(run):
    rows = {r["uuid"]: json.loads(r["properties"]) for r in run["rows"]}
    by_event: dict[str, list[dict]] = {}
    for s in run["sent"]:
        by_event.setdefault(s.event, []).append(rows[s.uuid])
    (identify,) = by_event["$identify"]
    assert identify["$set"] == {"email": "four@example.org", "plan": "free"}
    assert identify["$set_once"] == {"first": "node"}
    (alias,) = by_event["$create_alias"]
    assert alias["alias"] == "node-anon-5"
    (group,) = by_event["$groupidentify"]
    assert group["$group_set"] == {"name": "Node Co", "size": 7}
    assert group["$lib"] == "posthog-node"


def test_hot_property_and_session_columns(run):
    EventChecks.fail_on(run["checks"].columns(), "mat_$… / $session_id / $window_id columns")


def test_group_columns(run):
    EventChecks.fail_on(run["checks"].group_columns(), "$group_0..4 columns")


def test_person_ids(run):
    EventChecks.fail_on(run["checks"].person_ids(), "person_id")


def test_persons_built_from_node_sdk(run):
    """identify, alias and groupIdentify of posthog-node change persons as PostHog would."""
    by_did = {}
    for p in run["persons"]["results"]:
        for d in p["distinct_ids"]:
            by_did[d] = p
    four = by_did["node-user-4"]
    assert four["properties"]["email"] == "four@example.org"
    assert four["properties"]["plan"] == "free" and four["properties"]["first"] == "node"
    assert four["name"] == "four@example.org"
    five = by_did["node-user-5"]
    assert by_did["node-anon-5"]["id"] == five["id"], "alias joins the alias to the person"
    assert five["is_identified"] is True
    assert sorted(five["distinct_ids"]) == ["node-anon-5", "node-user-5"]
    assert all(f"node-bulk-{i}" in by_did for i in range(31))
    assert run["persons"]["count"] == len({p["id"] for p in by_did.values()})
    assert run["groups"]["results"] == [["node-co", '{"name":"Node Co","size":7}']], run["groups"]
