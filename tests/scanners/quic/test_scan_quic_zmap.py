"""quic-discover over an address range: Debian zmap's udp module sends the Version
Negotiation probe to a whole /24 first, then only the addresses that answered are probed.
Ground truth: the IPv4 addresses of config/testbed.toml's [[quic_host]] entries."""
from __future__ import annotations

import ipaddress
import json
import sys

import pytest

from conftest import needs_root, run_cli

pytestmark = [needs_root(), pytest.mark.root]

NET = ipaddress.ip_network("198.18.2.0/24")


def _scan(db, *args):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", *args,
                "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_zmap_finds_exactly_the_quic_servers_of_a_network(db, testbed):
    truth = {a for h in testbed.status()["ground_truth"]["quic_hosts"] for a in h["addresses"]
             if ipaddress.ip_address(a).version == 4 and ipaddress.ip_address(a) in NET}
    assert len(truth) >= 3
    out = _scan(db, "quic-discover", "--cidr", str(NET), "--zmap", "--timeout", "1s")
    assert out["counts"]["zmap-sent"] == NET.num_addresses
    assert out["counts"]["zmap-answered"] == len(truth)
    with db.connect() as conn:
        rows = conn.execute("SELECT host(address), hostname, vn_answer, vn_versions FROM quic_discovery"
                            " WHERE run_id = %s", (out["run_id"],)).fetchall()
    assert {r[0] for r in rows} == truth
    for _addr, hostname, answer, versions in rows:   # each responder then gets the full VN probe
        assert hostname is None and answer == "version-negotiation" and 1 in versions


def test_zmap_needs_a_network_and_respects_the_policy(db):
    r = run_cli("scan", "quic-discover", "--zmap", "--target", "198.18.2.10", dsn=db.dsn)
    assert r.returncode == 2 and "--zmap needs --cidr" in r.stderr
    r = run_cli("scan", "quic-discover", "--cidr", "192.0.2.0/24", "--zmap", dsn=db.dsn)
    assert r.returncode == 2 and "blocked by the etiquette policy" in r.stderr
