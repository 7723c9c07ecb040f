"""`plot quic-state` (analysis/figures) from real `scan quic` runs on the testbed: its
"probed" row counts the addresses contacted - not a name that did not resolve, not a blocked
address, a (name, address) pair probed twice once - and a run without revisits says nothing
about revisits."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import needs_root, run_cli

pytestmark = [pytest.mark.timeout(300)]

def _rows(db, q, *p):
    with db.connect() as conn:
        return conn.execute(q, p).fetchall()

def _quic_state(db, tmp_path, run_id) -> dict:
    import csv

    from analysis.figures import render

    render(db, "quic-state", tmp_path / "fig", runs=[run_id])
    return {r["addresses_with"]: (r["addresses"], r["share_of_handshakes"])
            for r in csv.DictReader((tmp_path / "fig" / "quic-state.csv").open())}

@needs_root()
def test_quic_state_counts_addresses_probed(db, testbed, tmp_path):
    """`plot quic-state`'s "probed" row counts addresses contacted: not a name that did not
    resolve (no address) nor a blocked address (never contacted) - the old figure counted
    every fresh row, 2 more here. A run without revisits (--no-resume) says nothing about
    revisits instead of "0 resumed, share 0"."""
    gt = {h["hostname"]: h for h in testbed.status()["ground_truth"]["quic_hosts"]}
    addrs = gt["www.example.test"]["addresses"]
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "quic",
                "--target", "www.example.test", "--target", "nxdomain.example.test", "--target", "192.0.2.1",
                "--no-resume", "--timeout", "2s", "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    st = dict(_rows(db, "SELECT status, count(*) FROM quic_connection WHERE run_id = %s GROUP BY 1", run_id))
    assert st == {"success": len(addrs), "resolution-failed": 1, "blocked": 1}, st
    got = _quic_state(db, tmp_path, run_id)
    assert got["probed"] == (str(len(addrs)), ""), got
    assert got["handshake succeeded"] == (str(len(addrs)), "1.0"), got
    assert got["revisit resumed the session (ticket accepted)"] == ("", ""), got
    assert got["revisit's 0-RTT data accepted"] == ("", ""), got

@needs_root()
def test_quic_state_counts_a_pair_probed_twice_once(db, testbed, tmp_path):
    """A name in the list and given with --target is probed twice in one run; quic-state
    counts addresses ("distinct (hostname, address) pairs", its comment says): the old
    figure counted rows, 4 handshakes for www.example.test's 2 addresses."""
    gt = {h["hostname"]: h for h in testbed.status()["ground_truth"]["quic_hosts"]}
    n = len(gt["www.example.test"]["addresses"])
    f = tmp_path / "l.csv"
    f.write_text("1,www.example.test\n")
    assert run_cli("targets", "import", str(f), "--list", "twice", dsn=db.dsn).returncode == 0
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "quic",
                "--list", "twice", "--target", "www.example.test", "--timeout", "2s", "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    got = _quic_state(db, tmp_path, run_id)
    assert got["probed"] == (str(n), ""), got
    assert got["handshake succeeded"] == (str(n), "1.0"), got
    assert got["revisit resumed the session (ticket accepted)"] == (str(n), "1.0"), got
