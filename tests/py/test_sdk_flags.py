"""Feature flags with the real SDKs: posthog-python (remote `/flags` and local evaluation from
`/flags/definitions`) and posthog-node (tests/node/flags_test.mjs), each compared with a
reference computation of PostHog's hash made here, independently of hedgerow, on thousands
of ids.

PostHog's hash: the first 15 hex digits of SHA-1("<flag key>.<id><salt>") over 0xFFFFFFFFFFFFFFF;
an id is in a rollout of p % when the hash is at most p/100, and its variant is the one whose
cumulative range [min, max) holds the hash with the salt "variant".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest
import requests
from posthog import Posthog

from conftest import PERSONAL_API_KEY, PROJECT_API_KEY, REPO_ROOT, new_server

# `get_feature_flag`/`get_all_flags` are what most code calls (deprecated in favour of
# `evaluate_flags` in posthog-python 7, which the tests call too).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

IDS = 2000
AUTH = {"Authorization": f"Bearer {PERSONAL_API_KEY}"}

VARIANTS = [("control", 34), ("test", 33), ("other", 33)]
FLAGS = [
    {"key": "rollout-30", "filters": {"groups": [{"properties": [], "rollout_percentage": 30}],
                                      "payloads": {"true": {"limit": 30}}}},
    {"key": "three-way", "filters": {
        "groups": [{"properties": [], "rollout_percentage": 100}],
        "multivariate": {"variants": [{"key": k, "rollout_percentage": p} for k, p in VARIANTS]},
        "payloads": {"test": {"color": "green"}}}},
    {"key": "pro-plan", "filters": {"groups": [{"properties": [
        {"key": "plan", "value": ["pro"], "operator": "exact", "type": "person"}],
        "rollout_percentage": 100}]}},
    {"key": "org-half", "filters": {"aggregation_group_type_index": 0,
                                    "groups": [{"properties": [], "rollout_percentage": 50}]}},
]


def ph_hash(key: str, distinct_id: str, salt: str = "") -> float:
    digest = hashlib.sha1(f"{key}.{distinct_id}{salt}".encode()).hexdigest()
    return int(digest[:15], 16) / float(0xFFFFFFFFFFFFFFF)


def reference(key: str, distinct_id: str):
    """What PostHog answers for the flags above, for an id without properties."""
    if key == "rollout-30":
        return ph_hash(key, distinct_id) <= 0.30
    if key == "three-way":
        h, low = ph_hash(key, distinct_id, "variant"), 0.0
        for name, pct in VARIANTS:
            if low <= h < low + pct / 100:
                return name
            low += pct / 100
        return True
    if key == "org-half":
        return ph_hash(key, distinct_id) <= 0.50
    raise KeyError(key)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sdk-flags")
    srv = new_server(tmp, "hedgerow-flags", flush_interval="500ms").start()
    for doc in FLAGS:
        r = requests.post(srv.url + "/api/projects/1/feature_flags/", json=doc, headers=AUTH,
                          timeout=30)
        assert r.status_code == 201, r.text
    # The group type `company` (index 0), and a person on the pro plan.
    r = requests.post(srv.url + "/batch/", timeout=30, json={"api_key": PROJECT_API_KEY, "batch": [
        {"event": "$groupidentify", "distinct_id": "setup", "properties": {
            "$group_type": "company", "$group_key": "acme", "$group_set": {"seats": 3}}},
        {"event": "$identify", "distinct_id": "pro-user", "properties": {"$set": {"plan": "pro"}}},
    ]})
    assert r.status_code == 200, r.text
    r = requests.get(srv.url + "/api/projects/1/persons/?distinct_id=pro-user", headers=AUTH,
                     timeout=30)
    assert r.status_code == 200 and r.json()["results"], r.text
    yield srv
    srv.kill()


def _ids(prefix: str) -> list[str]:
    return [f"{prefix}-{i}" for i in range(IDS)]


def test_python_remote_flags_agree_with_the_reference(server):
    ph = Posthog(PROJECT_API_KEY, host=server.url, feature_flags_request_timeout_seconds=15,
                 enable_local_evaluation=False)
    try:
        mismatches, on = [], 0
        for d in _ids("py-remote"):
            flags = ph.get_all_flags(d)
            assert flags is not None, f"no answer for {d}"
            for key in ("rollout-30", "three-way"):
                if flags.get(key) != reference(key, d):
                    mismatches.append((d, key, flags.get(key), reference(key, d)))
            assert flags.get("pro-plan") is False
            on += flags.get("rollout-30") is True
        assert not mismatches, mismatches[:10]
        assert 0.25 * IDS < on < 0.35 * IDS, on
        # Stored person properties decide at the server; the request's override them.
        assert ph.get_feature_flag("pro-plan", "pro-user") is True
        assert ph.get_feature_flag("pro-plan", "pro-user", person_properties={"plan": "free"}) is False
        # A group flag hashes the group key.
        for key in ("acme", "globex", "initech", "umbrella"):
            got = ph.get_feature_flag("org-half", "someone", groups={"company": key})
            assert got == reference("org-half", key), key
        # Payloads arrive as the JSON they were stored as.
        d = next(d for d in _ids("py-remote") if reference("three-way", d) == "test")
        assert ph.get_feature_flag_payload("three-way", d) == {"color": "green"}
        # posthog-python 7's one-request snapshot.
        snapshot = ph.evaluate_flags(d)
        assert snapshot.get_flag("three-way") == "test"
        assert snapshot.get_flag("rollout-30") == reference("rollout-30", d)
    finally:
        ph.shutdown()


def test_python_local_evaluation_agrees_with_the_reference(server):
    ph = Posthog(PROJECT_API_KEY, host=server.url, secret_key=PERSONAL_API_KEY,
                 poll_interval=300, feature_flags_request_timeout_seconds=15)
    try:
        ph.load_feature_flags()
        keys = sorted(f["key"] for f in (ph.feature_flags or []))
        assert keys == sorted(f["key"] for f in FLAGS), keys
        assert ph.group_type_mapping == {"0": "company"}
        mismatches = []
        for d in _ids("py-local"):
            for key in ("rollout-30", "three-way"):
                got = ph.get_feature_flag(key, d, only_evaluate_locally=True,
                                          send_feature_flag_events=False)
                if got != reference(key, d):
                    mismatches.append((d, key, got, reference(key, d)))
        assert not mismatches, mismatches[:10]
        assert ph.get_feature_flag("pro-plan", "x", person_properties={"plan": "PRO"},
                                   only_evaluate_locally=True) is True
        # A project secret key loads the same definitions.
        r = requests.post(server.url + "/api/projects/1/rotate_secret_token/", headers=AUTH,
                          timeout=30)
        assert r.status_code == 200, r.text
        with_secret = Posthog(PROJECT_API_KEY, host=server.url,
                              secret_key=r.json()["secret_api_token"], poll_interval=300)
        try:
            with_secret.load_feature_flags()
            assert len(with_secret.feature_flags or []) == len(FLAGS)
            d = _ids("py-secret")[0]
            assert with_secret.get_feature_flag("three-way", d, only_evaluate_locally=True) \
                == reference("three-way", d)
        finally:
            with_secret.shutdown()
        # The same ids answered remotely and locally agree.
        for d in _ids("py-both")[:200]:
            remote = ph.get_feature_flag("three-way", d, send_feature_flag_events=False)
            local = ph.get_feature_flag("three-way", d, only_evaluate_locally=True,
                                        send_feature_flag_events=False)
            assert remote == local == reference("three-way", d), d
    finally:
        ph.shutdown()


def test_feature_flag_called_events_are_stored(server):
    ph = Posthog(PROJECT_API_KEY, host=server.url, feature_flags_request_timeout_seconds=15,
                 enable_local_evaluation=False, flush_at=1)
    try:
        for d in ("called-1", "called-2", "called-3"):
            ph.get_feature_flag("rollout-30", d)
        ph.flush()
    finally:
        ph.shutdown()
    query = {"query": {"kind": "HogQLQuery", "query":
             "SELECT distinct_id, properties.$feature_flag, properties.$feature_flag_response, "
             "properties.$feature_flag_id FROM events WHERE event = '$feature_flag_called' "
             "AND distinct_id LIKE 'called-%' ORDER BY distinct_id"}}
    deadline, rows = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        r = requests.post(server.url + "/api/projects/1/query/", json=query, headers=AUTH,
                          timeout=30)
        assert r.status_code == 200, r.text
        rows = r.json()["results"]
        if len(rows) == 3:
            break
        time.sleep(0.5)
    assert [r[0] for r in rows] == ["called-1", "called-2", "called-3"], rows
    for d, key, response, flag_id in rows:
        assert key == "rollout-30"
        assert str(response).lower() == str(reference("rollout-30", d)).lower(), (d, response)
        assert flag_id is not None


def test_node_flags_agree_with_the_reference(server, tmp_path):
    node = shutil.which("node")
    assert node, "`node` is not on PATH (Node 20+ is required)"
    node_dir = REPO_ROOT / "tests" / "node"
    out = tmp_path / "node-flags.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTHOG_")}
    proc = subprocess.run([node, str(node_dir / "flags_test.mjs"), server.url, PROJECT_API_KEY,
                           PERSONAL_API_KEY, str(IDS), str(out)],
                          cwd=node_dir, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.is_file(), (
        f"flags_test.mjs failed ({proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\n"
        f"stderr:\n{proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    mismatches = []
    for mode in ("remote", "local"):
        for d, answers in result[mode].items():
            for key in ("rollout-30", "three-way"):
                if answers[key] != reference(key, d):
                    mismatches.append((mode, d, key, answers[key], reference(key, d)))
    assert not mismatches, mismatches[:10]
    assert len(result["remote"]) == len(result["local"]) == IDS
    assert result["pro_remote"] is True and result["pro_local"] is True
    assert result["group"] == {k: reference("org-half", k) for k in result["group"]}
    assert result["payload"] == {"color": "green"}


def test_python_evaluates_cohort_conditions_locally(server_factory):
    """A flag on a cohort of person properties is evaluated by posthog-python itself, from
    the `cohorts` of the definitions; a flag on a static cohort is left to `/flags`."""
    srv = server_factory("hedgerow-flag-cohorts").start()
    r = requests.post(srv.url + "/batch/", timeout=30, json={"api_key": PROJECT_API_KEY, "batch": [
        {"event": "$identify", "distinct_id": "picked", "properties": {"$set": {"plan": "free"}}},
    ]})
    assert r.status_code == 200, r.text

    def create(path: str, doc: dict) -> dict:
        r = requests.post(srv.url + path, json=doc, headers=AUTH, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()

    pros = create("/api/projects/1/cohorts/", {"name": "Pros", "filters": {"properties": {
        "type": "OR", "values": [{"type": "AND", "values": [
            {"key": "plan", "value": ["pro", "team"], "operator": "exact", "type": "person"}]}]}}})
    # A cohort of cohorts: Pros, or anyone in Germany.
    wide = create("/api/projects/1/cohorts/", {"name": "Pros or DE", "filters": {"properties": {
        "type": "OR", "values": [
            {"key": "id", "value": pros["id"], "type": "cohort"},
            {"key": "country", "value": "DE", "operator": "exact", "type": "person"}]}}})
    picked = create("/api/projects/1/cohorts/", {"name": "Picked", "is_static": True,
                                                 "distinct_ids": ["picked"]})
    for key, cohort in (("for-pros", pros), ("for-wide", wide), ("for-picked", picked)):
        create("/api/projects/1/feature_flags/", {"key": key, "filters": {"groups": [{
            "properties": [{"key": "id", "value": cohort["id"], "type": "cohort"}],
            "rollout_percentage": 100}]}})

    ph = Posthog(PROJECT_API_KEY, host=srv.url, secret_key=PERSONAL_API_KEY, poll_interval=300,
                 feature_flags_request_timeout_seconds=15)
    try:
        ph.load_feature_flags()
        assert sorted(ph.cohorts) == sorted([str(pros["id"]), str(wide["id"])]), ph.cohorts

        def local(key: str, props: dict):
            return ph.get_feature_flag(key, "someone", person_properties=props,
                                       only_evaluate_locally=True, send_feature_flag_events=False)

        assert local("for-pros", {"plan": "pro"}) is True
        assert local("for-pros", {"plan": "free"}) is False
        assert local("for-wide", {"plan": "team"}) is True
        assert local("for-wide", {"country": "DE"}) is True
        assert local("for-wide", {"country": "FR", "plan": "free"}) is False
        # A static cohort cannot be evaluated locally; the server knows its members.
        assert local("for-picked", {}) is None
        assert ph.get_feature_flag("for-picked", "picked", send_feature_flag_events=False) is True
        assert ph.get_feature_flag("for-picked", "someone", send_feature_flag_events=False) is False
    finally:
        ph.shutdown()
