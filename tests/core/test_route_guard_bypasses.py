"""Attempts to get testbed addresses sent off the machine past the off-machine-route guard
(netsurvey/routes.py; its own tests: tests/core/test_route_guard.py).

Same ground: nsadv31-c's default routes lead into nsadv31-gw (a namespace of this test's, so
a bypass never leaves the machine); a sniffer on nsadv31-c's veth sees what would have gone
to a default gateway. Each case sent packets to testbed addresses there on the old code:

* a policy rule (``to 198.18.77.0/24 lookup 100``, table 100 a default route) while table
  main holds a specific route: tfo --cidr 4 SYNs, dns-ttl 2 questions (routes.py ignored rules);
* resolv.conf naming a testbed resolver: every hostname scan (tfo, tls, quic, tfo-reuse,
  handshake-timing, browser pageload) sent its DNS questions over the default route;
* ``scan tfo-lb --resume`` of a run recorded with a testbed --nameserver: 8 questions;
* routes for only .0 and .255 of a /24: ``--zmap`` sent 256 SYNs (only the two ends were checked);
* ``browser track`` outside the testbed: 29 connections to testbed addresses (no check at all);
* testssl.sh's start-up probe (``-connect invalid.:443``): 22 DNS questions to a testbed resolver;
* a page at a routed testbed address naming subresources at unrouted ones: Chromium fetched them.

Also refused there: the Atlas API host and the database at testbed addresses reached by the
default route; and, with streamed target lists (tls, quic, quic-discover), a resolv.conf
naming a testbed resolver is refused before any run is opened (the check came only when the
first batch was resolved: a 'failed' run per command).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root
from support.sniffing import SNIFFER

pytestmark = [pytest.mark.timeout(300)]

NS_C, NS_GW, DEV = "nsadv31-c", "nsadv31-gw", "av31c"
RESOLV = Path("/etc/netns") / NS_C / "resolv.conf"   # `ip netns exec` mounts it over /etc/resolv.conf

# a resolver in nsadv31-gw answering every *.test A/AAAA with 198.18.77.80 / 2001:2:0:77::80
RESPONDER = r'''
import socket, sys, dns.message, dns.rrset, dns.rdatatype
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    d, peer = u.recvfrom(4096)
    q = dns.message.from_wire(d); r = dns.message.make_response(q)
    for qq in q.question:
        if not qq.name.to_text().endswith(".test."):
            r.set_rcode(3)
        elif qq.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            r.answer.append(dns.rrset.from_text(qq.name, 60, "IN", dns.rdatatype.to_text(qq.rdtype),
                            "198.18.77.80" if qq.rdtype == dns.rdatatype.A else "2001:2:0:77::80"))
    u.sendto(r.to_wire(), peer)
'''

def _ip(*argv, ns=NS_C):
    subprocess.run(["ip", "-n", ns, *argv], check=True, capture_output=True)

@pytest.fixture
def gw_pair():
    """nsadv31-c: default routes into nsadv31-gw; a second veth pair (ax31a/ax31b) inside
    nsadv31-c stands for an on-machine route (what is sent there stays in nsadv31-c)."""
    for ns in (NS_C, NS_GW):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    RESOLV.unlink(missing_ok=True)
    subprocess.run(["ip", "netns", "add", NS_C], check=True)
    subprocess.run(["ip", "netns", "add", NS_GW], check=True)
    try:
        _ip("link", "add", DEV, "type", "veth", "peer", "name", "av31g", "netns", NS_GW)
        _ip("link", "add", "ax31a", "type", "veth", "peer", "name", "ax31b")
        for dev in ("lo", DEV, "ax31a", "ax31b"):
            _ip("link", "set", dev, "up")
        _ip("link", "set", "lo", "up", ns=NS_GW)
        _ip("link", "set", "av31g", "up", ns=NS_GW)
        _ip("addr", "add", "198.18.253.2/30", "dev", DEV)
        _ip("addr", "add", "2001:2:0:fd::2/64", "dev", DEV, "nodad")
        _ip("addr", "add", "198.18.253.1/30", "dev", "av31g", ns=NS_GW)
        _ip("addr", "add", "2001:2:0:fd::1/64", "dev", "av31g", "nodad", ns=NS_GW)
        _ip("route", "add", "default", "via", "198.18.253.1")
        _ip("-6", "route", "add", "default", "via", "2001:2:0:fd::1")
        _ip("route", "add", "local", "10.255.255.53/32", "dev", "lo", ns=NS_GW)
        yield
    finally:
        RESOLV.unlink(missing_ok=True)
        if RESOLV.parent.is_dir() and not any(RESOLV.parent.iterdir()):
            RESOLV.parent.rmdir()
        for ns in (NS_C, NS_GW):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

@pytest.fixture
def responder(gw_pair):
    """10.255.255.53 in nsadv31-gw answers *.test; nsadv31-c asks it (its resolv.conf)."""
    RESOLV.parent.mkdir(parents=True, exist_ok=True)
    RESOLV.write_text("nameserver 10.255.255.53\n")
    p = subprocess.Popen(["ip", "netns", "exec", NS_GW, sys.executable, "-c", RESPONDER, "10.255.255.53"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield
    p.kill()
    p.wait()

class Sniffer:
    def __init__(self, out: Path):
        self.out = out
        self.p = subprocess.Popen(["ip", "netns", "exec", NS_C, sys.executable, str(SNIFFER),
                                   "--out", str(out), "--iface", DEV, "--seconds", "280"],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def to_testbed(self) -> list[str]:
        """Packets that left by the default route to a testbed address (not the link's own)."""
        time.sleep(0.5)
        self.p.terminate()
        assert json.loads(self.p.communicate(timeout=10)[0].strip().splitlines()[-1])["kernel_drops"] == 0
        pkts = [json.loads(ln) for ln in self.out.read_text().splitlines() if ln.strip()]
        return [f"{p['proto']} {p['dst']}:{p.get('dport')}" for p in pkts
                if p["dst"].startswith(("198.18.77.", "2001:2:0:77:"))]

def _cli(db, *args, timeout=120):
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    return subprocess.run(["ip", "netns", "exec", NS_C, sys.executable, "-m", "netsurvey.cli", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)

def _refused(r, words="default gateway"):
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr

def _rows(db, q, *p):
    with db.connect() as conn:
        return conn.execute(q, p).fetchall()

@needs_root()
def test_policy_rule_to_a_default_route(gw_pair, db, tmp_path):
    _ip("route", "add", "198.18.77.0/24", "dev", "ax31a")            # table main: on the machine
    _ip("route", "add", "default", "via", "198.18.253.1", "table", "100")
    _ip("rule", "add", "to", "198.18.77.0/24", "lookup", "100", "pref", "100")   # ... but this rule wins
    sn = Sniffer(tmp_path / "p.jsonl")
    tfo = _cli(db, "scan", "tfo", "--cidr", "198.18.77.80/30", "--cooldown", "0.3")
    dns = _cli(db, "scan", "dns-ttl", "--name", "a.test", "--nameserver", "198.18.77.53", "--retries", "0",
               "--timeout", "0.3")
    assert sn.to_testbed() == []
    assert tfo.returncode == 0 and "blocked 4," in tfo.stdout, tfo.stdout + tfo.stderr
    _refused(dns)

@needs_root()
def test_resolv_conf_naming_a_testbed_resolver(gw_pair, db, tmp_path):
    RESOLV.parent.mkdir(parents=True, exist_ok=True)
    RESOLV.write_text("nameserver 198.18.77.53\n")
    (tmp_path / "l.csv").write_text("1,a.test\n2,b.test\n")
    assert _cli(db, "targets", "import", "--list", "adv", str(tmp_path / "l.csv")).returncode == 0
    sn = Sniffer(tmp_path / "p.jsonl")
    runs = {argv[1]: _cli(db, *argv) for argv in (
        ("scan", "tfo", "--list", "adv", "--cooldown", "0.3"),
        ("scan", "tls", "--list", "adv", "--timeout", "1"),
        ("scan", "quic", "--list", "adv", "--timeout", "1s"),
        ("scan", "tfo-reuse", "--list", "adv", "--cooldown", "0.3"),
        ("scan", "handshake-timing", "--list", "adv", "--samples", "1", "--timeout", "1"),
        ("browser", "pageload", "--list", "adv", "--browsers", "1", "--page-timeout", "3"))}
    assert sn.to_testbed() == []
    for _name, r in runs.items():
        _refused(r, "resolv.conf nameserver 198.18.77.53")

@needs_root()
def test_tfo_lb_resume_checks_the_recorded_nameserver(gw_pair, db, tmp_path):
    _ip("route", "add", "198.18.77.0/24", "dev", "ax31a")   # recorded where the resolver was routed
    (tmp_path / "l.csv").write_text("1,a.test\n")
    assert _cli(db, "targets", "import", "--list", "adv", str(tmp_path / "l.csv")).returncode == 0
    first = _cli(db, "scan", "tfo-lb", "--list", "adv", "--rounds", "3", "--interval", "0", "--cooldown", "0.2",
                 "--nameserver", "198.18.77.53", "--stop-after", "1", "--json")
    assert first.returncode != 2, first.stderr
    with db.connect() as conn:
        (run_id,) = conn.execute("SELECT id FROM scan_run WHERE kind='tfo-lb'").fetchone()
    _ip("route", "del", "198.18.77.0/24", "dev", "ax31a")   # resumed where it is not
    sn = Sniffer(tmp_path / "p.jsonl")
    r = _cli(db, "scan", "tfo-lb", "--resume", str(run_id))
    assert sn.to_testbed() == []
    _refused(r)

@needs_root()
def test_zmap_range_whose_ends_alone_are_routed(gw_pair, db, tmp_path):
    _ip("route", "add", "198.18.77.0/32", "dev", "ax31a")
    _ip("route", "add", "198.18.77.255/32", "dev", "ax31a")
    sn = Sniffer(tmp_path / "p.jsonl")
    tfo = _cli(db, "scan", "tfo", "--cidr", "198.18.77.0/24", "--zmap", "--cooldown", "0.3")
    quic = _cli(db, "scan", "quic-discover", "--cidr", "198.18.77.0/24", "--zmap")
    assert sn.to_testbed() == []
    _refused(tfo)
    _refused(quic)

@needs_root()
def test_browser_track_outside_the_testbed(responder, testbed, db, tmp_path):
    """The testbed is up (its ground truth names the servers), but this namespace reaches
    its addresses only by the default route; the resolver answers the track hosts."""
    sn = Sniffer(tmp_path / "p.jsonl")
    r = _cli(db, "browser", "track", "--test", "lifetime", "--wait", "1", timeout=200)
    assert sn.to_testbed() == []
    _refused(r)

@needs_root()
def test_atlas_api_host_over_the_default_route(responder, db, tmp_path, monkeypatch):
    """The stand-in API (atlas.test, or an address of it) reached by the default route."""
    monkeypatch.setenv("NETSURVEY_ATLAS_KEY", "adversary")
    args = ("atlas", "run", "--probes", "country:DE", "--count", "1", "--server", "198.18.2.9",
            "--zone", "dnstest.example.test", "--timeout", "5", "--poll", "1", "--no-server-ping", "--api-host")
    sn = Sniffer(tmp_path / "p.jsonl")
    try:
        runs = [_cli(db, *args, host, timeout=45) for host in ("198.18.77.80", "atlas.test", "[::ffff:198.18.77.80]")]
    finally:
        sent = sn.to_testbed()
    assert sent == []
    for r in runs:
        _refused(r)

@needs_root()
def test_database_at_a_testbed_address_over_the_default_route(gw_pair, tmp_path):
    sn = Sniffer(tmp_path / "p.jsonl")
    runs = []
    for dsn in ("host=198.18.77.5 port=5432 user=x dbname=y connect_timeout=2",
                "postgresql://x@[2001:2:0:77::5]:5432/y?connect_timeout=2"):
        env = dict(os.environ, NETSURVEY_DSN=dsn, PYTHONPATH=str(REPO))
        runs.append(subprocess.run(["ip", "netns", "exec", NS_C, sys.executable, "-m", "netsurvey.cli", "runs"],
                                   cwd=REPO, env=env, capture_output=True, text=True, timeout=60))
    assert sn.to_testbed() == []
    for r in runs:
        _refused(r)

@needs_root()
def test_testssl_start_up_asks_no_resolver(gw_pair, db, tmp_path):
    """testssl.sh probes openssl at start-up with '-connect invalid.:443': a DNS question each,
    here to a testbed resolver by the default route (22 on the old code, and a hang)."""
    RESOLV.parent.mkdir(parents=True, exist_ok=True)
    RESOLV.write_text("nameserver 198.18.77.53\n")
    sn = Sniffer(tmp_path / "p.jsonl")
    try:
        r = _cli(db, "scan", "tls-second-opinion", "--target", "a.test=198.18.77.80", "--client", "testssl",
                 "--testssl-timeout", "10", timeout=60)
    finally:
        sent = sn.to_testbed()
    assert sent == []
    assert r.returncode == 0 and "blocked 1" in r.stdout, r.stdout + r.stderr

@needs_root()
def test_browser_subresources_over_the_default_route(gw_pair, db, tmp_path):
    """A page at a routed testbed address names subresources at unrouted ones: the policy
    allows the page, and Chromium (past the policy) fetched 198.18.77.99 and 2001:2:0:77::99
    by the default route on the old code."""
    _ip("route", "add", "local", "198.18.77.0/24", "dev", "lo", ns=NS_GW)
    _ip("route", "add", "198.18.77.80/32", "via", "198.18.253.1")
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text('<html><body><img src="http://198.18.77.99/a.png">'
                                    '<img src="http://[2001:2:0:77::99]/b.png"></body></html>')
    srv = subprocess.Popen(["ip", "netns", "exec", NS_GW, sys.executable, "-m", "http.server", "80", "--bind",
                            "198.18.77.80", "--directory", str(www)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        sn = Sniffer(tmp_path / "p.jsonl")
        try:
            r = _cli(db, "browser", "pageload", "--url", "http://198.18.77.80/", "--browsers", "1",
                     "--page-timeout", "20", timeout=150)
        finally:
            sent = [p for p in sn.to_testbed() if not p.endswith(("198.18.77.80:80",))]
    finally:
        srv.kill()
        srv.wait()
    assert sent == []
    _refused(r)

@needs_root()
def test_resolv_conf_over_the_default_route_writes_nothing(gw_pair, db, tmp_path):
    """resolv.conf naming a testbed resolver this namespace reaches by its default route:
    the hostname scans are refused as bad input - one line, exit 2 - and nothing is written.
    Streamed, the check came only when the first batch was resolved, after the run was
    opened: a 'failed' scan_run per command."""
    RESOLV.parent.mkdir(parents=True, exist_ok=True)
    RESOLV.write_text("nameserver 198.18.77.53\n")
    (tmp_path / "l.csv").write_text("1,a.test\n2,b.test\n")
    assert _cli(db, "targets", "import", "--list", "adv", str(tmp_path / "l.csv")).returncode == 0
    for argv in (("tls", "--list", "adv", "--timeout", "1"), ("quic", "--list", "adv", "--timeout", "1s"),
                 ("quic-discover", "--list", "adv"), ("tls", "--target", "a.test")):
        _refused(_cli(db, "scan", *argv), "resolv.conf nameserver 198.18.77.53")
    assert _rows(db, "SELECT id, kind, status FROM scan_run") == []
