"""WebKit (WebKitGTK MiniBrowser via WebKitWebDriver under Xvfb) as the third engine (issue
27): its page-load log from Resource Timing (pure), a real page-load run with its resource
tree, and the tracking experiments it can and cannot run (n/a with the reason, not blocked)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from browser_probes.webkit_log import resources_from_timing
from conftest import run_cli

HAVE_WEBKIT = os.path.exists("/usr/bin/WebKitWebDriver") and os.path.exists("/usr/bin/Xvfb")


def _e(name, kind, start, **kw):
    d = {"name": name, "entryType": "resource", "initiatorType": kind, "startTime": start, "fetchStart": start,
         "connectStart": 0, "connectEnd": 0, "requestStart": 0, "responseStart": 0, "responseEnd": start + 5,
         "nextHopProtocol": "", "transferSize": 0, "encodedBodySize": 0, "responseStatus": 0}
    d.update(kw)
    return d


def test_resource_timing_entries_become_a_tree_under_the_root():
    nav = _e("https://a.test/", "navigation", 0.0, entryType="navigation", fetchStart=1.0, connectStart=2.0,
             connectEnd=4.0, requestStart=4.5, responseStart=9.0, responseEnd=12.0, nextHopProtocol="http/1.1",
             transferSize=900, encodedBodySize=600, responseStatus=200)
    same = _e("https://a.test/s.js", "script", 20.0, requestStart=21.0, responseStart=22.0, responseEnd=23.0,
              connectStart=20.5, connectEnd=20.5, nextHopProtocol="http/1.1", transferSize=300, encodedBodySize=100)
    cross = _e("https://t.test/t.js", "script", 25.0, responseEnd=40.0)     # no Timing-Allow-Origin: zeros
    blank = _e("about:blank", "other", 30.0)
    res, facts = resources_from_timing([cross, nav, blank, same], "https://a.test/")
    assert [r.url for r in res] == ["https://a.test/", "https://a.test/s.js", "https://t.test/t.js"]
    root, s, c = res
    assert root.parent_no is None and s.parent_no == 0 and c.parent_no == 0 and facts["final_url"] == nav["name"]
    assert (root.created_ms, root.dispatched_ms, root.first_byte_sent_ms, root.first_byte_received_ms,
            root.last_byte_received_ms) == (0.0, 1.0, 4.5, 9.0, 12.0)
    assert root.connection_reused is False and root.http_status == 200 and root.protocol == "http/1.1"
    assert s.connection_reused is True and s.initiator_type == "script" and s.hostname == "a.test"
    assert (c.first_byte_sent_ms, c.first_byte_received_ms, c.connection_reused) == (None, None, None)
    assert c.last_byte_received_ms == 40.0 and facts["pending"] == []
    assert resources_from_timing([same], "https://a.test/") == ([], {"final_url": None, "pending": []})




@pytest.mark.root
@pytest.mark.skipif(not HAVE_WEBKIT, reason="webkit2gtk-driver / xvfb not installed")
def test_webkit_pageload_logs_the_tree_page(db, testbed):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser", "pageload",
                "--browser", "webkit", "--url", "https://tree.track.test/", "--browsers", "1", "--json",
                dsn=db.dsn, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["complete"] == 1
    with db.connect() as conn:
        (browser, version, status, n, plt), = conn.execute(
            "SELECT browser, browser_version, status, n_resources, page_load_time_ms FROM browser_visit WHERE run_id=%s",
            (out["run_id"],)).fetchall()
        hosts = {h for (h,) in conn.execute("SELECT DISTINCT hostname FROM browser_resource WHERE run_id=%s",
                                            (out["run_id"],))}
    assert browser == "webkit" and version.startswith("2.") and status == "complete"
    # tree.track.test embeds t.test's script, example.test (as a stylesheet) and a.test's page (iframe)
    # (config/testbed.toml [[web]] tree.track.test): all are top-level fetches, so all are logged
    assert {"tree.track.test", "t.test", "a.test"} <= hosts and n >= 3 and plt > 0


@pytest.mark.root
@pytest.mark.skipif(not HAVE_WEBKIT, reason="webkit2gtk-driver / xvfb not installed")
def test_webkit_tracking_runs_and_names_what_it_lacks(db, testbed):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser", "track",
                "--browser", "webkit", "--test", "lifetime", "--test", "private", "--test", "quic-lifetime",
                "--json", dsn=db.dsn, timeout=200)
    assert r.returncode == 0, r.stderr[-2000:]
    v = {(x["experiment"], x["mechanism"]): x for x in json.loads(r.stdout.strip().splitlines()[-1])["verdicts"]}
    # the lifetime experiment ran: context 1 was seen server-side for every mechanism
    for mech in ("tls13-psk", "tls-ticket", "tls-session-id"):
        assert v[("lifetime", mech)]["verdict"] in ("viable", "blocked"), v[("lifetime", mech)]
    for mech in ("quic-token", "quic-psk"):
        assert v[("quic-lifetime", mech)]["verdict"] == "n/a" and "HTTP/3" in v[("quic-lifetime", mech)]["detail"]
    assert v[("private", "tls13-psk")]["verdict"] == "n/a" and "private" in v[("private", "tls13-psk")]["detail"]
