"""The soak's bounded form (`tests/py/soak.py`; `scripts/soak --minutes N` is the long run):
40 s of mixed capture, queries and persons calls with a SIGKILL about every 12 s. Every
acknowledged event is stored exactly once, no call answers a 5xx, and RSS, descriptors and
the WAL stay within their bounds."""

import json

from soak import run_soak


def test_mixed_traffic_with_kills_loses_nothing_and_stays_bounded(tmp_path):
    report = run_soak(seconds=40, workdir=tmp_path, kill_every=12)
    summary = json.dumps({k: v for k, v in report.items() if k != "curve_every_10s"}, indent=1)
    print(summary)
    assert report["problem_count"] == 0, summary
    assert report["kills"] >= 2, summary
    assert report["acknowledged_events"] >= 1000, summary
    for kind in ("capture", "query", "persons_list", "person_by_distinct_id"):
        assert report["latency"][kind]["statuses"].get("200", 0) > 0, summary
