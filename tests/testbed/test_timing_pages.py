"""The timing testbed's page server (issue 25, item 6; testbed/timing.py PAGE_HOSTS): what
`testbed status --json` reports under timing.pages is what a client in the timing vantage
gets - each host answers on its address with its own certificate (no other host's name in
it, so browsers cannot coalesce two hosts onto one connection), ALPN h2 exactly on the hosts
reported as HTTP/2, TLS 1.3 only - and `timing up` is idempotent (same processes)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli

PROBE = r"""
import json, socket, ssl, sys
out = {}
for host, info in json.loads(sys.argv[1]).items():
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection((info["addresses"][0], 443), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname=host) as t:
            sans = [v for k, v in t.getpeercert()["subjectAltName"]]
            out[host] = {"alpn": t.selected_alpn_protocol(), "version": t.version(), "sans": sans}
    for v6 in info["addresses"][1:]:   # the IPv6 address answers too
        socket.create_connection((v6, 443), timeout=10).close()
print(json.dumps(out))
"""


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the timing testbed needs root")
def test_page_server_is_what_status_reports():
    from testbed import timing
    from testbed.model import load_testbed_config

    cfg = load_testbed_config()
    st = timing.up(cfg, log=lambda *_: None)
    again = timing.up(cfg, log=lambda *_: None)
    assert st["up"] and [p["pid"] for p in again["processes"]] == [p["pid"] for p in st["processes"]]
    hosts = st["pages"]["hosts"]
    assert len(hosts) == 11 and sum(h["h2"] for h in hosts.values()) == 7
    assert all((timing.pages_root() / h).is_dir() for h in hosts)
    r = run_cli("testbed", "timing", "exec", "--", sys.executable, "-c", PROBE, json.dumps(hosts), timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for host, info in hosts.items():
        assert got[host]["alpn"] == ("h2" if info["h2"] else "http/1.1"), (host, got[host])
        assert got[host]["version"] == "TLSv1.3" and got[host]["sans"] == [host], (host, got[host])
