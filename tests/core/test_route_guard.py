"""The testbed's addresses are never sent off the machine (netsurvey/routes.py: an adversarial
review once sent one DNS question to 198.18.1.53 from the root namespace, where that address
routes to the default gateway). Attempts to get around the guard (policy rules, resolv.conf,
--resume, zmap ranges, browsers, Atlas, the database): tests/core/test_route_guard_bypasses.py.

Observed from outside: a namespace of the test's own whose default route leads into a
second namespace of the test's own (the "gateway"), and a sniffer on the client's only
interface. Targeted at testbed addresses over the default route, the commands refuse or
mark the targets, and the sniffer sees no packet to them; the control (a specific route to
the same addresses) shows the same commands do send, so the test can fail.
"""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root
from netsurvey.routes import Route, RouteTable
from support.sniffing import SNIFFER

pytestmark = [pytest.mark.timeout(240)]

NS_C, NS_GW = "nsrg31-c", "nsrg31-gw"
TARGET4, TARGET6 = "198.18.77.53", "2001:2:0:77::53"


def _net(s):
    return ipaddress.ip_network(s)


def test_longest_prefix_decides():
    t = RouteTable([Route(_net("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1"),
                    Route(_net("198.19.0.0/16"), "unicast", "veth0", "198.18.0.1"),
                    Route(_net("198.18.5.0/24"), "local", "lo", ""),
                    Route(_net("::/0"), "unicast", "eth0", "fd00::1")])
    ip = ipaddress.ip_address
    assert t.via_default(ip("198.18.1.53"))          # only the default route covers it
    assert not t.via_default(ip("198.19.3.4"))       # the testbed's specific route
    assert not t.via_default(ip("198.18.5.9"))       # a local route (answered on this machine)
    assert t.via_default(ip("2001:2::53"))
    assert not RouteTable([]).via_default(ip("198.18.1.53"))   # no route: the kernel refuses
    assert RouteTable(None).via_default(ip("198.18.1.53"))     # unreadable: fail closed
    assert not RouteTable([Route(_net("0.0.0.0/0"), "unreachable", "", "")]).via_default(ip("198.18.1.53"))


def test_policy_refuses_testbed_addresses_over_the_default_route(monkeypatch):
    from netsurvey.config import EtiquetteConfig
    from netsurvey.etiquette import TargetPolicy

    default_only = RouteTable([Route(_net("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1"),
                               Route(_net("::/0"), "unicast", "eth0", "fd00::1")])
    monkeypatch.setattr(RouteTable, "snapshot", classmethod(lambda cls: default_only))
    p = TargetPolicy.from_config(EtiquetteConfig())
    assert p.reason_blocked("198.18.2.10") == "off-machine-route"
    assert p.reason_blocked("2001:2:0:2::10") == "off-machine-route"
    assert p.reason_blocked("::ffff:198.18.2.10") == "off-machine-route"
    assert p.reason_blocked("8.8.8.8") == "not-allowed"      # the allow-list still decides first
    assert p.leaves_machine(_net("198.19.0.0/16"))
    # an Internet scan (everything allowed but the reserved ranges) keeps the default route
    q = TargetPolicy.from_config(EtiquetteConfig(allow=["0.0.0.0/0", "::/0"]))
    assert q.allowed("8.8.8.8") and q.reason_blocked("198.18.2.10") == "blocklisted"


def _sh(*argv, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def gateway_ns():
    """nsrg31-c's default routes (IPv4 and IPv6) lead to nsrg31-gw over one veth pair."""
    for ns in (NS_C, NS_GW):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    _sh("ip", "netns", "add", NS_C)
    _sh("ip", "netns", "add", NS_GW)
    try:
        _sh("ip", "link", "add", "rg31c", "netns", NS_C, "type", "veth", "peer", "name", "rg31g", "netns", NS_GW)
        _sh("ip", "link", "set", "lo", "up", ns=NS_C)
        _sh("ip", "link", "set", "lo", "up", ns=NS_GW)
        _sh("ip", "addr", "add", "198.18.254.2/30", "dev", "rg31c", ns=NS_C)
        _sh("ip", "addr", "add", "2001:2:0:fe::2/64", "dev", "rg31c", "nodad", ns=NS_C)
        _sh("ip", "addr", "add", "198.18.254.1/30", "dev", "rg31g", ns=NS_GW)
        _sh("ip", "addr", "add", "2001:2:0:fe::1/64", "dev", "rg31g", "nodad", ns=NS_GW)
        _sh("ip", "link", "set", "rg31c", "up", ns=NS_C)
        _sh("ip", "link", "set", "rg31g", "up", ns=NS_GW)
        _sh("ip", "route", "add", "default", "via", "198.18.254.1", ns=NS_C)
        _sh("ip", "-6", "route", "add", "default", "via", "2001:2:0:fe::1", ns=NS_C)
        yield
    finally:
        for ns in (NS_C, NS_GW):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Sniffer:
    def __init__(self, out: Path):
        self.out = out
        self.p = subprocess.Popen(["ip", "netns", "exec", NS_C, sys.executable, str(SNIFFER),
                                   "--out", str(out), "--iface", "rg31c", "--seconds", "200"],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def stop(self) -> list[dict]:
        time.sleep(0.5)
        self.p.terminate()
        tail = self.p.communicate(timeout=10)[0].strip().splitlines()
        assert json.loads(tail[-1])["kernel_drops"] == 0
        return [json.loads(ln) for ln in self.out.read_text().splitlines() if ln.strip()]


def _cli(db, *args, timeout=90):
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    return subprocess.run(["ip", "netns", "exec", NS_C, sys.executable, "-m", "netsurvey.cli", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _to_targets(pkts):
    return [p for p in pkts if p["dst"] in (TARGET4, TARGET6) or p["dst"].startswith("198.18.77.")]


COMMANDS = {
    "dns-ttl v4": ("scan", "dns-ttl", "--name", "a.test", "--nameserver", TARGET4, "--retries", "0", "--timeout", "0.3"),
    "dns-ttl v6": ("scan", "dns-ttl", "--name", "a.test", "--nameserver", TARGET6, "--retries", "0", "--timeout", "0.3"),
    "dns-second-opinion": ("scan", "dns-second-opinion", "--name", "a.test", "--nameserver", TARGET4),
    "tfo --nameserver": ("scan", "tfo", "--list", "nosuchlist", "--nameserver", TARGET4),
    "tfo --cidr": ("scan", "tfo", "--cidr", "198.18.77.52/30", "--cooldown", "0.5"),
    "tfo --cidr --zmap": ("scan", "tfo", "--cidr", "198.18.77.0/28", "--zmap"),
}


@needs_root()
def test_testbed_addresses_never_leave_by_the_default_route(gateway_ns, db, tmp_path):
    sn = Sniffer(tmp_path / "pkts.jsonl")
    results = {name: _cli(db, *argv) for name, argv in COMMANDS.items()}
    pkts = sn.stop()
    assert _to_targets(pkts) == [], f"packets to testbed addresses over the default route: {_to_targets(pkts)[:5]}"
    for name, r in results.items():
        assert "Traceback" not in r.stderr, (name, r.stderr)
        if name == "tfo --cidr":   # per-address: every address gets a row saying why it was not probed
            assert r.returncode == 0, (name, r.stderr)
            continue
        if name == "tfo --nameserver" or name.startswith(("dns", "tfo --cidr --zmap")):
            assert r.returncode == 2, (name, r.returncode, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1 and "default gateway" in r.stderr, (name, r.stderr)
    with db.connect() as conn:   # the tfo --cidr run: a row per address, none probed
        statuses = conn.execute("select status, count(*) from tfo_probe group by 1").fetchall()
    assert statuses and {s for s, _ in statuses} == {"blocked"}, statuses


@needs_root()
def test_control_a_specific_route_is_used(gateway_ns, db, tmp_path):
    """The same commands do send once a route of the testbed's own covers the addresses."""
    _sh("ip", "route", "add", "198.18.77.0/24", "via", "198.18.254.1", ns=NS_C)
    _sh("ip", "-6", "route", "add", "2001:2:0:77::/64", "via", "2001:2:0:fe::1", ns=NS_C)
    sn = Sniffer(tmp_path / "pkts.jsonl")
    r4 = _cli(db, *COMMANDS["dns-ttl v4"])
    r6 = _cli(db, *COMMANDS["dns-ttl v6"])
    rt = _cli(db, *COMMANDS["tfo --cidr"])
    pkts = sn.stop()
    for r in (r4, r6, rt):
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    dsts = {p["dst"] for p in _to_targets(pkts)}
    assert TARGET4 in dsts and TARGET6 in dsts, dsts
    assert any(p["dst"].startswith("198.18.77.") and p.get("syn") for p in pkts), "no TFO SYN seen"


def test_rules_and_ranges_as_the_kernel_picks():
    """routes.py without namespaces: rules in priority order, selectors it cannot judge."""
    import ipaddress as ipa

    from netsurvey.routes import STOCK_RULES, Route, RouteTable, Rule

    n, a = ipa.ip_network, ipa.ip_address
    routes = [Route(n("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1"),
              Route(n("198.18.77.0/24"), "unicast", "tb0", ""),
              Route(n("0.0.0.0/0"), "unicast", "wg0", "", table="51820")]
    # wg-quick: 'not fwmark lookup 51820' (may apply) before main -> counts as leaving
    wg = {4: [Rule(0, "lookup", "local"), Rule(32764, "lookup", "main", suppress_prefixlen=0),
              Rule(32765, "lookup", "51820", definite=False), *STOCK_RULES[1:]], 6: list(STOCK_RULES)}
    assert RouteTable(routes).via_default(a("198.18.77.5")) is False
    assert RouteTable(routes, wg).via_default(a("198.18.77.5")) is False   # main's /24 is not suppressed
    assert RouteTable(routes, wg).via_default(a("198.18.78.5")) is True
    to_default = {4: [Rule(0, "lookup", "local"), Rule(100, "lookup", "51820", n("198.18.77.0/24")),
                      *STOCK_RULES[1:]], 6: list(STOCK_RULES)}
    assert RouteTable(routes, to_default).via_default(a("198.18.77.5")) is True
    assert RouteTable(routes, {4: [Rule(5, "goto", "")], 6: []}).via_default(a("198.18.77.5")) is True
    ends = [Route(n("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1"), Route(n("198.18.77.0/32"), "unicast", "tb0", ""),
            Route(n("198.18.77.255/32"), "unicast", "tb0", "")]
    assert RouteTable(ends).range_via_default(n("198.18.77.0/24")) is True
    assert RouteTable(routes).range_via_default(n("198.18.77.0/24")) is False
    assert RouteTable(routes).range_via_default(n("198.18.76.0/23")) is True
