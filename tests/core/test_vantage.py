"""Issue 26 item 5 (first part): each run knows its vantage (scan_run.vantage: a name and
the source addresses from getsockname), `netsurvey runs` shows it, and the
vantage-compare-dns-ecs table compares two vantages where the answer depends on where one
stands. The two vantages are namespaces of this test's own on the testbed bridge:

- ``nsv26a``: 198.18.0.226 / 2001:2:0:ff::226 on the shared link (like the testbed vantage);
- ``nsv26b``: sources 198.18.226.2 / 2001:2:0:226::2 (a sub-range nothing else uses), reached
  over the link address 198.18.0.227; the testbed vantage (the router) gets a route to
  198.18.226.0/24 and 2001:2:0:226::/64 for the test's duration, removed at the end.

Ground truth of the answers: the testbed's [[dns.ecs]] scopes (config/testbed.toml,
ecs.example.test: 198.18.0.0/24 -> 198.18.2.24, rest of 198.18.0.0/16 -> 198.18.2.16),
computed by testbed.dns.ecs_expected; scan dns-ecs sends the vantage's own /24 (/56) by
default (scanners/dns/ecs.py vantage_subnet)."""
from __future__ import annotations

import csv
import ipaddress
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli

pytestmark = needs_root()
VANTAGE_NS, BRIDGE = "nstb-vantage", "tbbr0"
AUTH_V4, AUTH_V6 = "198.18.1.53", "2001:2:0:1::53"
A = {"ns": "nsv26a", "veth": ("v26av", "v26an"), "link4": "198.18.0.226", "link6": "2001:2:0:ff::226",
     "src4": "198.18.0.226", "src6": "2001:2:0:ff::226", "name": "vant-a", "mac": "02:26:00:00:0a:01"}
B = {"ns": "nsv26b", "veth": ("v26bv", "v26bn"), "link4": "198.18.0.227", "link6": "2001:2:0:ff::227",
     "src4": "198.18.226.2", "src6": "2001:2:0:226::2", "name": "vant-b", "mac": "02:26:00:00:0b:01",
     "routed4": "198.18.226.0/24", "routed6": "2001:2:0:226::/64"}


def sh(*a: str) -> None:
    p = subprocess.run(a, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(a)}: {p.stderr}"


def down(v: dict) -> None:
    subprocess.run(["ip", "netns", "del", v["ns"]], capture_output=True)   # takes the veth pair along
    subprocess.run(["ip", "-n", VANTAGE_NS, "link", "del", v["veth"][0]], capture_output=True)
    for fam, key, via in (("-4", "routed4", "link4"), ("-6", "routed6", "link6")):
        if key in v:
            subprocess.run(["ip", "-n", VANTAGE_NS, fam, "route", "del", v[key], "via", v[via]], capture_output=True)
    etc = Path("/etc/netns") / v["ns"]
    (etc / "resolv.conf").unlink(missing_ok=True)
    try:
        etc.rmdir()
    except OSError:
        pass


def up(v: dict) -> None:
    down(v)
    vv, vn = v["veth"]
    sh("ip", "netns", "add", v["ns"])
    # a fixed MAC: the router's neighbour entry of an earlier run stays right (a fresh random
    # MAC left it stale for seconds, and the first queries timed out)
    sh("ip", "link", "add", vv, "type", "veth", "peer", "name", vn, "address", v["mac"])
    sh("ip", "link", "set", vv, "netns", VANTAGE_NS)
    sh("ip", "link", "set", vn, "netns", v["ns"])
    sh("ip", "-n", VANTAGE_NS, "link", "set", vv, "master", BRIDGE, "up")
    sh("ip", "-n", v["ns"], "link", "set", "lo", "up")
    sh("ip", "-n", v["ns"], "link", "set", vn, "up")
    sh("ip", "-n", v["ns"], "addr", "add", v["link4"] + "/24", "dev", vn)
    sh("ip", "-n", v["ns"], "-6", "addr", "add", v["link6"] + "/64", "dev", vn, "nodad")
    if v["src4"] != v["link4"]:
        sh("ip", "-n", v["ns"], "addr", "add", v["src4"] + "/32", "dev", "lo")
        sh("ip", "-n", v["ns"], "-6", "addr", "add", v["src6"] + "/128", "dev", "lo", "nodad")
    for fam, src in (("-4", v["src4"]), ("-6", v["src6"])):
        routes = subprocess.run(["ip", "-n", VANTAGE_NS, fam, "route"], capture_output=True, text=True).stdout
        for ln in routes.splitlines():
            w = ln.split()
            if len(w) >= 3 and w[1] == "via" and not w[0].startswith(("198.18.226.", "2001:2:0:226:")):
                sh("ip", "-n", v["ns"], fam, "route", "add", w[0], "via", w[2], "dev", vn, "src", src)
    if "routed4" in v:   # the router (testbed vantage) reaches the extra sources over the link
        sh("ip", "-n", VANTAGE_NS, "-4", "route", "add", v["routed4"], "via", v["link4"])
        sh("ip", "-n", VANTAGE_NS, "-6", "route", "add", v["routed6"], "via", v["link6"])
    etc = Path("/etc/netns") / v["ns"]
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "resolv.conf").write_text((Path("/etc/netns") / VANTAGE_NS / "resolv.conf").read_text())


@pytest.fixture(scope="module")
def vantages(_testbed_session):
    _testbed_session.up(log=lambda *_: None)
    try:
        for v in (A, B):
            up(v)
        yield _testbed_session
    finally:
        for v in (A, B):
            down(v)


def in_ns(v: dict, dsn: str, *args: str, vantage: str | None = None) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NETSURVEY_DSN", None)
    env.pop("NETSURVEY_VANTAGE", None)
    g = ["--vantage", vantage] if vantage else []
    return subprocess.run(["ip", "netns", "exec", v["ns"], sys.executable, "-m", "netsurvey.cli", "--dsn", dsn, *g,
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def scan_ecs(v: dict, dsn: str, resolver: str, vantage: str | None) -> int:
    r = in_ns(v, dsn, "scan", "dns-ecs", "--name", "ecs.example.test", "--name", "www.example.test",
              "--resolver", resolver, "--json", vantage=vantage)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])["run_id"]


def q(db, sql, *p):
    with db.connect() as conn:
        return conn.execute(sql, p).fetchall()


@pytest.mark.slow   # ~30 s (six CLI runs in namespaces); the test below keeps the recording in CI
def test_two_vantages_record_their_sources_and_get_their_answers(db, vantages, tmp_path):
    from testbed.dns import ecs_expected

    cfg = vantages.cfg
    runs = {}
    for v in (A, B):
        runs[(v["name"], 4)] = scan_ecs(v, db.dsn, AUTH_V4, v["name"])
        runs[(v["name"], 6)] = scan_ecs(v, db.dsn, AUTH_V6, v["name"])
    # scan_run.vantage: the name given and the source the kernel picked (getsockname)
    for (name, fam), rid in runs.items():
        v = A if name == "vant-a" else B
        (van,) = q(db, "SELECT vantage FROM scan_run WHERE id = %s", rid)[0]
        assert van["name"] == name
        assert van["sources"] == ({"ipv4": [v["src4"]], "ipv6": []} if fam == 4 else {"ipv4": [], "ipv6": [v["src6"]]})
        assert van["sources_towards"] == "options"
    # rows from each vantage: the subnet each sent is its own /24 (/56) and the answer is
    # the one the testbed configures for it
    got = {}
    for (name, fam), rid in runs.items():
        v = A if name == "vant-a" else B
        for h, subnet, answers, scope in q(db, "SELECT hostname, subnet::text, answers, scope_prefix FROM dns_ecs_probe"
                                              " WHERE run_id = %s AND outcome = 'answer'", rid):
            src = v["src4"] if fam == 4 else v["src6"]
            assert ipaddress.ip_address(src) in ipaddress.ip_network(subnet)
            if h == "ecs.example.test":
                addr, sc = ecs_expected(cfg, h, str(ipaddress.ip_network(subnet).network_address))
                assert (answers, scope) == ([addr], sc), (name, fam, subnet)
                got[(name, fam)] = answers[0]
    everything = q(db, "SELECT run_id, hostname, outcome, error, attempts FROM dns_ecs_probe WHERE run_id = ANY(%s)",
                   list(runs.values()))
    assert len(got) == 4, (runs, everything)
    assert got[("vant-a", 4)] == "198.18.2.24" and got[("vant-b", 4)] == "198.18.2.16"   # where one stands
    assert got[("vant-a", 6)] == got[("vant-b", 6)]                                       # no IPv6 scope: same
    # `runs` shows the vantage and its sources
    r = run_cli("runs", "--json", dsn=db.dsn)
    shown = {x["id"]: (x["vantages"], x["sources"]) for x in json.loads(r.stdout)}
    assert shown[runs[("vant-b", 4)]] == (["vant-b"], ["198.18.226.2"])
    assert shown[runs[("vant-a", 6)]] == (["vant-a"], ["2001:2:0:ff::226"])
    table = run_cli("runs", dsn=db.dsn, env={"COLUMNS": "300"})   # rich wraps at 80 columns otherwise
    assert table.returncode == 0 and "vant-b" in table.stdout and "198.18.226.2" in table.stdout
    # the comparison table, from the runs of the two vantages
    ids = [str(runs[(n, 4)]) for n in ("vant-a", "vant-b")]
    r = run_cli("plot", "vantage-compare-dns-ecs", *[a for i in ids for a in ("--run", i)], "--out", str(tmp_path),
                dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "vantage-compare-dns-ecs.csv") as fh:
        rows = {(x["vantage"], x["hostname"]): x for x in csv.DictReader(fh)}
    assert rows[("vant-a", "ecs.example.test")]["answers"] == "198.18.2.24"
    assert rows[("vant-b", "ecs.example.test")]["answers"] == "198.18.2.16"
    assert rows[("vant-b", "ecs.example.test")]["sources"] == "198.18.226.2"
    assert rows[("vant-a", "www.example.test")]["answers"] == rows[("vant-b", "www.example.test")]["answers"]
    assert float(rows[("vant-a", "ecs.example.test")]["rtt_median_ms"]) > 0
    for x in rows.values():
        print("vantage-compare-dns-ecs:", {k: x[k] for k in ("vantage", "sources", "hostname", "subnet", "scope_prefix",
                                                           "answers", "rtt_median_ms")})


def test_default_vantage_name_is_the_hostname_and_bad_name_is_one_line(db, vantages):
    rid = scan_ecs(A, db.dsn, AUTH_V4, None)
    (van,) = q(db, "SELECT vantage FROM scan_run WHERE id = %s", rid)[0]
    host = subprocess.run(["ip", "netns", "exec", A["ns"], "hostname"], capture_output=True, text=True).stdout.strip()
    assert van["name"] == host == socket.gethostname()
    assert van["sources"] == {"ipv4": [A["src4"]], "ipv6": []}   # getsockname towards --resolver
    shown = {x["id"]: x for x in json.loads(run_cli("runs", "--json", dsn=db.dsn).stdout)}[rid]
    assert (shown["vantages"], shown["sources"], shown["rounds"]) == ([host], [A["src4"]], None)
    before = q(db, "SELECT count(*) FROM scan_run")
    r = in_ns(A, db.dsn, "scan", "dns-ecs", "--name", "ecs.example.test", "--resolver", AUTH_V4, vantage="bad name!")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--vantage" in r.stderr, r.stderr
    assert q(db, "SELECT count(*) FROM scan_run") == before


def test_source_lookup_never_resolves_a_name(tmp_path):
    """The source lookup is a UDP connect() towards addresses only: a resolv.conf naming its
    resolver by name (or with odd content) and any name given to source_for were passed to
    connect(), which resolves them (a DNS query to the system's resolver, off the testbed:
    strace showed connect() to resolv.conf's nameserver). Run in an empty network namespace
    (nothing can leave) under strace: every connect() goes to one of the literal addresses;
    and a vantage name with a trailing newline is refused (adversary)."""
    import shutil

    if not shutil.which("strace"):
        pytest.skip("needs strace")
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver dns-adv2.example.test\nnameserver 198.18.1.53#53\nnameserver\n"
                    "nameserver fe80::1%eth0\nnameserver 198.18.1.53\noptions ndots:5\n")
    code = f"""
from pathlib import Path
from netsurvey import vantage
found = vantage._resolvers(Path({str(conf)!r}))
vantage.source_addresses(found + ["dns-adv2.example.test", "198.18.1.53#53"])
print(found)
"""
    p = subprocess.run(["unshare", "-n", "strace", "-f", "-e", "trace=connect,sendto,sendmsg,sendmmsg", sys.executable,
                        "-c", code], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "['fe80::1', '198.18.1.53']", p.stdout
    inet = [ln for ln in p.stderr.splitlines() if "AF_INET" in ln]
    assert inet and all('"198.18.1.53"' in ln or '"fe80::1"' in ln for ln in inet), inet
    assert not [ln for ln in p.stderr.splitlines() if "send" in ln and "AF_UNIX" not in ln], p.stderr
    from netsurvey.errors import UsageError
    from netsurvey.vantage import check_name

    assert check_name("vant-a") == "vant-a"
    with pytest.raises(UsageError):
        check_name("vant-a\n")
