"""A web page with posthog-js (npm 1.449, `dist/array.full.js`) in headless Chromium, on
another origin than hedgerow: the page of docs/examples/posthog-js-site.html, unchanged.

Checked: no request fails and no console error; remote config and flags load (CORS, the
base64 form body of /flags); a pageview, a custom event and a click (`$autocapture` with
its elements chain) before login; identify; more after it, and a group; every event of the
visitor, before and after identify, on one person in HogQL; and `isFeatureEnabled` /
`getFeatureFlag` of one posthog-js instance per id agree with a reference computation of
PostHog's hash on 2 000 ids.

Chromium is Debian's `chromium` (scripts/test installs it with apt), driven by the Python
`playwright` package.
"""

from __future__ import annotations

import hashlib
import http.server
import shutil
import threading
import time
from functools import partial
from pathlib import Path

import pytest
import requests

from conftest import PERSONAL_API_KEY, PROJECT_API_KEY, REPO_ROOT, new_server

AUTH = {"Authorization": f"Bearer {PERSONAL_API_KEY}"}
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# posthog-js drops the events of a browser that looks like a bot: headless Chromium's agent
# ("HeadlessChrome") and `navigator.webdriver`, which automation sets. The page sees the
# agent of a desktop Chrome, and Chromium runs without the automation flag.
USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/148.0.0.0 Safari/537.36")
POSTHOG_JS = REPO_ROOT / "tests" / "node" / "node_modules" / "posthog-js" / "dist" / "array.full.js"
PAGE = REPO_ROOT / "docs" / "examples" / "posthog-js-site.html"


BROWSER_IDS = 2000


def ph_hash(key: str, distinct_id: str, salt: str = "") -> float:
    """PostHog's hash, computed here as the reference."""
    digest = hashlib.sha1(f"{key}.{distinct_id}{salt}".encode()).hexdigest()
    return int(digest[:15], 16) / float(0xFFFFFFFFFFFFFFF)


# One posthog-js instance per id (in-memory persistence, bootstrapped with the id), each
# asking /flags on load; the answers it reads through its own API.
PER_ID_FLAGS = """async ([token, apiHost, ids]) => {
  const out = {}
  for (const id of ids) {
    const inst = posthog.init(token, {
      api_host: apiHost, persistence: 'memory', bootstrap: {distinctID: id},
      autocapture: false, capture_pageview: false, capture_pageleave: false,
    }, 'id_' + id.replace(/[^A-Za-z0-9]/g, '_'))
    await new Promise((resolve) => inst.onFeatureFlags(resolve))
    out[id] = {half: inst.isFeatureEnabled('half'), split: inst.getFeatureFlag('split')}
  }
  return out
}"""


def hogql(url: str, query: str) -> list:
    r = requests.post(url + "/api/projects/1/query/", headers=AUTH, timeout=60,
                      json={"query": {"kind": "HogQLQuery", "query": query}})
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.fixture
def site(tmp_path):
    """The example page and posthog-js, served from their own origin."""
    if not Path(CHROMIUM).is_file():
        pytest.fail("Chromium is not installed (scripts/test installs Debian's `chromium`)",
                    pytrace=False)
    if not POSTHOG_JS.is_file():
        pytest.fail("tests/node/node_modules has no posthog-js: run `npm ci` in tests/node "
                    "(scripts/test does this)", pytrace=False)
    root = tmp_path / "site"
    root.mkdir()
    shutil.copy(PAGE, root / "index.html")
    shutil.copy(POSTHOG_JS, root / "array.full.js")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://localhost:{httpd.server_address[1]}"
    httpd.shutdown()


def test_posthog_js_site(tmp_path, site):
    from playwright.sync_api import sync_playwright

    srv = new_server(tmp_path, "hedgerow-browser", flush_interval="500ms").start()
    try:
        for flag in [
            {"key": "new-checkout", "filters": {"groups": [{"rollout_percentage": 100}]}},
            {"key": "half", "filters": {"groups": [{"rollout_percentage": 50}]}},
            {"key": "split", "filters": {"groups": [{"rollout_percentage": 100}],
                                         "multivariate": {"variants": [
                                             {"key": "a", "rollout_percentage": 50},
                                             {"key": "b", "rollout_percentage": 50}]}}},
        ]:
            r = requests.post(srv.url + "/api/projects/1/feature_flags/", headers=AUTH,
                              timeout=30, json=flag)
            assert r.status_code == 201, r.text
        api = srv.url.replace("localhost", "127.0.0.1")
        problems: list[str] = []
        seen: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=["--no-sandbox", "--disable-gpu",
                                              "--disable-blink-features=AutomationControlled"])
            page = browser.new_context(user_agent=USER_AGENT).new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(
                f"console error: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda rq: problems.append(
                f"request failed: {rq.method} {rq.url} {rq.failure}"))

            def on_response(resp):
                if resp.url.startswith(api):
                    seen.append(f"{resp.request.method} {resp.url.split('?')[0]} {resp.status}")
                    if resp.status >= 400:
                        problems.append(f"{resp.status} from {resp.request.method} {resp.url}")
            page.on("response", on_response)

            page.goto(f"{site}/index.html?api_host={api}&token={PROJECT_API_KEY}")
            page.wait_for_function("document.getElementById('flag').textContent === 'new checkout'",
                                   timeout=30_000)
            anon = page.evaluate("posthog.get_distinct_id()")
            page.evaluate("posthog.capture('viewed_product', {sku: 'sku-1'})")
            page.click("#buy")
            page.evaluate("posthog.identify('user-42', {email: 'u42@example.com'})")
            page.evaluate("posthog.capture('checked_out', {total: 42})")
            page.evaluate("posthog.group('company', 'acme', {name: 'Acme'})")
            page.click("#buy")
            assert page.evaluate("posthog.isFeatureEnabled('new-checkout')") is True
            # posthog-js sends its queue every few seconds; wait until everything is stored.
            deadline, rows = time.monotonic() + 60, []
            while time.monotonic() < deadline:
                rows = hogql(srv.url, "SELECT event, distinct_id, toString(person_id), "
                             "elements_chain, properties.$current_url FROM events "
                             "ORDER BY timestamp")
                names = [r[0] for r in rows]
                if names.count("$autocapture") >= 2 and "checked_out" in names \
                        and "$groupidentify" in names:
                    break
                time.sleep(0.5)
            # isFeatureEnabled / getFeatureFlag on many ids agree with the reference.
            ids = [f"web-{i}" for i in range(BROWSER_IDS)]
            answers = page.evaluate(PER_ID_FLAGS, [PROJECT_API_KEY, api, ids])
            browser.close()

        assert not problems, "\n".join(problems + ["responses:"] + seen)
        wrong = [(d, a) for d, a in answers.items()
                 if a != {"half": ph_hash("half", d) <= 0.5,
                          "split": "a" if ph_hash("split", d, "variant") < 0.5 else "b"}]
        assert len(answers) == BROWSER_IDS and not wrong, wrong[:10]
        paths = {s.rsplit(" ", 1)[0] for s in seen}
        for want in (f"GET {api}/array/{PROJECT_API_KEY}/config.js", f"POST {api}/flags/"):
            assert want in paths, (want, sorted(paths))
        names = [r[0] for r in rows]
        for want in ("$pageview", "viewed_product", "$autocapture", "$identify", "checked_out",
                     "$groupidentify"):
            assert want in names, (want, names)
        clicks = [r for r in rows if r[0] == "$autocapture"]
        assert all("button" in r[3] and "buy-button" in r[3] for r in clicks), clicks
        assert all(r[4].startswith(site) for r in rows if r[0] == "$pageview"), rows
        # Before identify the visitor is anonymous (no person profile); identify makes the
        # person, and every event of either id is on it.
        assert {r[1] for r in rows} == {anon, "user-42"}, rows
        persons = {r[2] for r in rows}
        assert len(persons) == 1, rows
        (count,) = hogql(srv.url, f"SELECT count(DISTINCT person_id) FROM events WHERE "
                                  f"distinct_id IN ('{anon}', 'user-42')")[0]
        assert count == 1
        (email,) = hogql(srv.url, "SELECT properties.email FROM persons")[0]
        assert email == "u42@example.com"
        (group,) = hogql(srv.url, "SELECT properties.name FROM groups WHERE key = 'acme'")[0]
        assert group == "Acme"
    finally:
        srv.kill()
