"""Tracking-period probes with real Chromium against the testbed: verdicts must match the
servers' configured lifetimes and what the server-side observer saw."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli

pytestmark = [pytest.mark.root, pytest.mark.skipif(not os.path.exists("/usr/bin/chromedriver"),
                                                   reason="chromium-driver not installed")]


def _host(truth, name):
    return next(h for h in truth["tls_hosts"] if h["hostname"] == name)


def test_lifetime_hint_and_vhost_verdicts(db, testbed, tmp_path):
    truth = testbed.status()["ground_truth"]
    wait = 6.0
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser", "track",
                "--browser", "chromium", "--test", "lifetime", "--test", "hint", "--test", "vhost",
                "--wait", str(wait), "--json", dsn=db.dsn, timeout=200)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    got = {(v["experiment"], v["mechanism"]): v["verdict"] for v in out["verdicts"]}
    # expected from the ground truth: presented iff the wait is shorter than the host's lifetime
    for mech, host in (("tls13-psk", "track.test"), ("tls-ticket", "tls12.track.test"),
                       ("tls-session-id", "id.track.test")):
        assert _host(truth, host)["session_timeout"] > wait
        assert got[("lifetime", mech)] == "viable"
    assert _host(truth, "hint.track.test")["session_timeout"] < wait
    assert got[("hint", "tls13-psk")] == "blocked"
    assert got[("vhost", "tls13-psk")] == "blocked"     # Chromium keys sessions by host name
    with db.connect() as conn:
        # the server-side view: TLS 1.2 tickets carry the configured lifetime hint, and the
        # revisit presented exactly a ticket issued in the first context
        hints = {h for (h,) in conn.execute(
            "SELECT DISTINCT issued_ticket_lifetime_s FROM browser_track_connection WHERE run_id=%s "
            "AND server_name='tls12.track.test' AND issued_ticket IS NOT NULL", (out["run_id"],))}
        assert hints == {_host(truth, "tls12.track.test")["session_timeout"]}
        linked = conn.execute(
            """SELECT count(*) FROM browser_track_connection s JOIN browser_track_connection f
               ON f.run_id = s.run_id AND f.experiment = s.experiment AND f.step = 'first' AND s.step = 'second'
               AND f.issued_ticket = s.tls_ticket WHERE s.run_id = %s AND s.experiment = 'lifetime'""",
            (out["run_id"],)).fetchone()[0]
        assert linked >= 1
        nver = conn.execute("SELECT count(*) FROM browser_track_verdict WHERE run_id=%s", (out["run_id"],)).fetchone()[0]
        assert nver == len(out["verdicts"]) == 5
        table = conn.execute("SELECT experiment, mechanism, verdict, longest_presented_wait_s FROM browser_tracking_table "
                             "WHERE run_id=%s AND experiment='lifetime' AND mechanism='tls13-psk'",
                             (out["run_id"],)).fetchone()
        assert table == ("lifetime", "tls13-psk", "viable", wait)
        # from the shared vantage: no delay line recorded, and the servers saw no delay (the
        # control of tests/browser_probes/test_browser_tracking_delay.py, where they see the profile's RTT)
        assert conn.execute("SELECT DISTINCT link_profile FROM browser_track_verdict WHERE run_id=%s",
                            (out["run_id"],)).fetchall() == [(None,)]
        seen = [r[0] for r in conn.execute("SELECT handshake_rtt_ms FROM browser_track_connection WHERE run_id=%s",
                                           (out["run_id"],))]
        assert seen and all(r is not None and r < 5 for r in seen), seen
    r = run_cli("plot", "browser-tracking-table", "--out", str(tmp_path), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    rows = (tmp_path / "browser-tracking-table.csv").read_text().splitlines()
    assert len(rows) == 1 + 5 and "hint,tls13-psk" in "".join(rows)
