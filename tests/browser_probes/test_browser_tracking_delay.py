"""Tracking experiments under a delay profile (issue 25, item 4): ``browser track --profile P``
runs the browser in the tracking vantage behind a delay line (testbed/trackline.py). The
verdicts must be those without delay, the rows must say which profile they ran under, and
the servers must have seen the profile's round trip (observer.py, server side)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli

pytestmark = [pytest.mark.root, pytest.mark.skipif(not os.path.exists("/usr/bin/chromedriver"),
                                                   reason="chromium-driver not installed")]


def _verdicts(out: dict) -> dict:
    return {(v["experiment"], v["mechanism"]): v["verdict"] for v in out["verdicts"]}


def _track(db, *args: str, timeout: float = 300) -> dict:
    r = run_cli("browser", "track", "--json", *args, dsn=db.dsn, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_chromium_verdicts_unchanged_under_cable_and_the_servers_saw_its_rtt(db, testbed, tmp_path):
    """Chromium, lifetime + hint under 'cable' (20 ms RTT): the verdicts of the fast test
    without delay (tests/browser_probes/test_browser_tracking.py), every verdict labelled with the profile,
    every observed TCP handshake's server-side RTT >= 20 ms (without the line < 5 ms:
    tests/browser_probes/test_browser_tracking.py, the same experiment from the shared vantage)."""
    truth = testbed.status()["ground_truth"]
    cable = next(p for p in truth["profiles"]["definitions"] if p["name"] == "cable")
    out = _track(db, "--browser", "chromium", "--test", "lifetime", "--test", "hint", "--profile", "cable")
    assert _verdicts(out) == {("lifetime", "tls13-psk"): "viable", ("lifetime", "tls-ticket"): "viable",
                              ("lifetime", "tls-session-id"): "viable", ("hint", "tls13-psk"): "blocked"}
    assert out["link_profile"] == "cable" and out["link_rtt_ms"] == cable["rtt_ms"] == 20
    rtt = cable["rtt_ms"]
    with db.connect() as conn:
        assert conn.execute("SELECT DISTINCT link_profile, link_rtt_ms FROM browser_track_verdict WHERE run_id = %s",
                            (out["run_id"],)).fetchall() == [("cable", rtt)]
        seen = [r[0] for r in conn.execute(
            "SELECT handshake_rtt_ms FROM browser_track_connection WHERE run_id = %s AND transport = 'tcp'",
            (out["run_id"],))]
        # one-way delay rtt/2 each way, never less; a loaded machine adds, but not a whole RTT
        assert len(seen) >= 4 and all(r is not None and rtt * 0.98 <= r <= 2 * rtt for r in seen), seen
        params = conn.execute("SELECT parameters FROM scan_run WHERE id = %s", (out["run_id"],)).fetchone()[0]
        assert params["link_profile"] == "cable" and params["link_rate_kbit"] == cable["rate_kbit"]
    # the line is back at 'none' afterwards (ground truth: the delay line's own report)
    applied = testbed.status()["ground_truth"]["profiles"]["applied"]["track"]
    assert applied["profile"] == "none" and applied["delay_line"]["name"] == "none"
    r = run_cli("plot", "browser-tracking-table", "--run", str(out["run_id"]), "--out", str(tmp_path), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    csv = (tmp_path / "browser-tracking-table.csv").read_text().splitlines()
    assert csv[0].endswith("link_profile,link_rtt_ms,measured_rtt_median_ms,measured_rtt_connections")
    assert all(",cable,20.0," in row for row in csv[1:]) and len(csv) == 5


def test_unknown_profile_is_refused_before_anything_runs(db, testbed):
    with db.connect() as conn:
        before = conn.execute("SELECT count(*) FROM scan_run").fetchone()[0]
    r = run_cli("browser", "track", "--browser", "chromium", "--test", "lifetime", "--profile", "nosuch", dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "nosuch" in r.stderr, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == before


@pytest.mark.slow
@pytest.mark.timeout(1200)   # Firefox: ~3 min under lte + ~2.6 min without (the default is 300 s)
@pytest.mark.parametrize("browser", ["chromium", "firefox", "webkit"])
def test_every_verdict_is_the_same_under_lte(db, testbed, browser):
    """All experiments (TLS, QUIC, cross-app TFO) under 'lte' (60 ms) and without delay: the
    same verdict for every experiment and mechanism (~3-6 min per engine)."""
    if browser == "firefox" and not os.path.exists("/usr/bin/firefox-esr"):
        pytest.skip("firefox-esr not installed")
    if browser == "webkit" and not os.path.exists("/usr/bin/WebKitWebDriver"):
        pytest.skip("webkit2gtk-driver not installed")
    delayed = _track(db, "--browser", browser, "--test", "all", "--profile", "lte", timeout=900)
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser", "track",
                "--browser", browser, "--test", "all", "--json", dsn=db.dsn, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    plain = json.loads(r.stdout.strip().splitlines()[-1])
    assert _verdicts(delayed) == _verdicts(plain)
    with db.connect() as conn:
        seen = [r[0] for r in conn.execute(
            "SELECT handshake_rtt_ms FROM browser_track_connection WHERE run_id = %s AND handshake_rtt_ms IS NOT NULL",
            (delayed["run_id"],))]
    assert seen and all(59 <= r <= 120 for r in seen), seen
