"""Person flows of the real `posthog` Python SDK (7.x: set, set_once, alias, group_identify,
`$identify` captures, personless captures) change persons as PostHog would, read back through
the persons API and HogQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import uuid

import requests
from posthog import Posthog

from conftest import PERSON_NAMESPACE, PERSONAL_API_KEY, PROJECT_API_KEY, TEAM_ID


def _api(server, path, **kw):
    r = requests.get(server.url + path, headers={"Authorization": f"Bearer {PERSONAL_API_KEY}"},
                     timeout=30, **kw)
    assert r.status_code == 200, r.text
    return r.json()


def _hogql(server, q):
    r = requests.post(server.url + "/api/projects/1/query/", timeout=30,
                      headers={"Authorization": f"Bearer {PERSONAL_API_KEY}"},
                      json={"query": {"kind": "HogQLQuery", "query": q}})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def _person(server, distinct_id):
    v = _api(server, "/api/projects/1/persons/", params={"distinct_id": distinct_id})
    assert v["count"] <= 1, v
    return v["results"][0] if v["results"] else None


def test_sdk_person_flows(server_factory):
    server = server_factory("hedgerow-persons").start()
    errors = []
    ph = Posthog(PROJECT_API_KEY, host=server.url, flush_at=1, sync_mode=True, timeout=30,
                 on_error=lambda e, b: errors.append(repr(e)), enable_exception_autocapture=False)

    # An anonymous visitor browses: a person with automatic and initial properties.
    ph.capture("$pageview", distinct_id="anon-x",
               properties={"$browser": "Firefox", "$current_url": "https://shop.io/a", "utm_source": "news"})
    # The app knows the user under their id and sets properties there.
    ph.set(distinct_id="user-x", properties={"email": "x@shop.io", "plan": "free"})
    ph.set_once(distinct_id="user-x", properties={"signup": "2024-01-01"})
    ph.set_once(distinct_id="user-x", properties={"signup": "2030-01-01"})
    ph.capture("upgraded", distinct_id="user-x", properties={"$set": {"plan": "pro"}})
    # alias (spec §6): the event's distinct id (previous_id) is merged into the alias
    # (distinct_id), which becomes the main id: anon-x's person goes into user-x's.
    ph.alias(previous_id="anon-x", distinct_id="user-x")
    ph.capture("$pageview", distinct_id="anon-x", properties={"$browser": "Safari"})

    # A server-side identify of a second visitor, as an $identify capture.
    ph.capture("$pageview", distinct_id="anon-y", properties={"$browser": "Chrome"})
    ph.capture("$identify", distinct_id="user-y",
               properties={"$anon_distinct_id": "anon-y", "$set": {"email": "y@shop.io"}})
    # user-y is identified now: aliasing it into user-x is refused (the event is kept).
    ph.alias(previous_id="user-y", distinct_id="user-x")

    # Groups.
    ph.group_identify("company", "acme", {"name": "Acme", "seats": 10}, distinct_id="user-x")
    ph.group_identify("company", "acme", {"seats": 12}, distinct_id="user-x")
    ph.capture("order", distinct_id="user-x", groups={"company": "acme"}, properties={"total": 5})
    # A personless event: no distinct_id given.
    ph.capture("anonymous_ping", properties={"k": 1})
    ph.flush()
    ph.shutdown()
    assert not errors, errors

    x = _person(server, "user-x")
    assert x is not None
    assert sorted(x["distinct_ids"]) == ["anon-x", "user-x"]
    assert x["is_identified"] is True
    assert x["uuid"] == str(uuid.uuid5(PERSON_NAMESPACE, f"{TEAM_ID}:user-x")), "the alias's person survives"
    p = x["properties"]
    assert p["email"] == "x@shop.io" and p["plan"] == "pro"
    assert p["signup"] == "2024-01-01", "set_once keeps the first value"
    assert p["$initial_browser"] == "Firefox" and p["$browser"] == "Safari"
    assert p["$initial_utm_source"] == "news"
    assert x["name"] == "x@shop.io"
    assert _person(server, "anon-x")["id"] == x["id"]

    y = _person(server, "user-y")
    assert sorted(y["distinct_ids"]) == ["anon-y", "user-y"] and y["is_identified"] is True
    assert y["id"] != x["id"], "an identified person is never merged by alias"
    warnings = _hogql(server, "SELECT type FROM ingestion_warnings")
    assert ["cannot_merge_already_identified"] in warnings, warnings

    persons = _api(server, "/api/projects/1/persons/")
    assert persons["count"] == 2, persons
    uniq = _hogql(server, "SELECT count(DISTINCT person_id) FROM events WHERE distinct_id != '' "
                          "AND event != 'anonymous_ping'")
    assert uniq == [[2]], uniq

    groups = _hogql(server, "SELECT key, properties.name, properties.seats FROM groups")
    assert groups == [["acme", "Acme", 12]] or groups == [["acme", "Acme", "12"]], groups
    rows = _hogql(server, "SELECT $group_0, group_0.properties.name FROM events WHERE event = 'order'")
    assert rows == [["acme", "Acme"]], rows
    # The personless event made no person.
    ping = _hogql(server, "SELECT distinct_id, person.properties FROM events WHERE event = 'anonymous_ping'")
    assert len(ping) == 1 and ping[0][1] is None, ping
    assert _person(server, ping[0][0]) is None


def test_sdk_personless_activity_joins_the_identified_person(server_factory):
    """posthog-js's default `person_profiles: 'identified_only'` as the real SDK sends it:
    the anonymous visitor's events are personless until login, then `$identify` (and
    `alias`, and a personless event after the merge). Every one of them counts as the one
    person in HogQL, and a funnel across the login sees a single person."""
    server = server_factory("hedgerow-personless").start()
    errors = []
    ph = Posthog(PROJECT_API_KEY, host=server.url, flush_at=1, sync_mode=True, timeout=30,
                 on_error=lambda e, b: errors.append(repr(e)), enable_exception_autocapture=False)
    personless = {"$process_person_profile": False}
    t0 = datetime.now(timezone.utc) - timedelta(hours=1)
    at = lambda s: t0 + timedelta(seconds=s)  # noqa: E731 -- one clock, seconds apart
    # Visitor 1: browses anonymously, logs in ($identify), browses on.
    ph.capture("$pageview", distinct_id="anon-1", timestamp=at(0),
               properties={**personless, "$pathname": "/pricing"})
    ph.capture("viewed_plan", distinct_id="anon-1", timestamp=at(1), properties=personless)
    ph.capture("$identify", distinct_id="user-1", timestamp=at(2),
               properties={"$anon_distinct_id": "anon-1", "$set": {"email": "one@shop.io"}})
    ph.capture("purchase", distinct_id="user-1", timestamp=at(3))
    # A late personless event of the anonymous id (another tab), after the identify.
    ph.capture("$pageview", distinct_id="anon-1", timestamp=at(4), properties=personless)
    # Visitor 2: the user already has a person; the anonymous id is aliased to it.
    ph.capture("signed_up", distinct_id="user-2", timestamp=at(5))
    ph.capture("$pageview", distinct_id="anon-2", timestamp=at(6), properties=personless)
    ph.alias(previous_id="anon-2", distinct_id="user-2", timestamp=at(7))
    ph.flush()
    ph.shutdown()
    assert not errors, errors

    for n in (1, 2):
        person = _person(server, f"user-{n}")
        assert person is not None and sorted(person["distinct_ids"]) == [f"anon-{n}", f"user-{n}"]
        rows = _hogql(server, f"SELECT DISTINCT person_id FROM events "
                              f"WHERE distinct_id IN ('anon-{n}', 'user-{n}')")
        assert rows == [[person["uuid"]]], (n, rows, person["uuid"])
    # The funnel from the anonymous pricing pageview to the identified purchase: one person
    # who converted.
    rows = _hogql(server, """
        SELECT level, count() FROM (
            SELECT person_id, windowFunnel(86400)(toDateTime(timestamp),
                event = '$pageview' AND properties.$pathname = '/pricing',
                event = 'purchase') AS level
            FROM events GROUP BY person_id)
        WHERE level > 0 GROUP BY level ORDER BY level""")
    assert rows == [[2, 1]], rows
