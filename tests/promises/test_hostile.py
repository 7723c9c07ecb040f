"""Every scanner against the hostile hosts (issue 12; testbed/hostile.py).

Each scan must finish within its timeouts (wall-clock bound derived from its own timeout
options), exit 0, record one row with a non-success status and a reason per hostile
target, keep its peak RSS bounded (GNU time's %M), and the well-behaved-but-huge host
(bigcert) must be measured exactly as the testbed states.
"""
from __future__ import annotations

import re
import sys
import time

import psycopg
import pytest

from tests.conftest import needs_root, run_cli

pytestmark = [needs_root()]

#: Peak RSS allowed for one scanner process over a handful of hostile targets (KiB).
MAX_RSS_KB = 400 * 1024


def _scan(db, *args: str, limit_s: float, grace: float = 30) -> tuple[str, int, float]:
    t0 = time.monotonic()
    p = run_cli("testbed", "exec", "--", "/usr/bin/time", "-f", "MAXRSS_KB=%M", sys.executable, "-m",
                "netsurvey.cli", "--dsn", db.dsn, "scan", *args, timeout=limit_s + grace)
    el = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    rss = int(re.findall(r"MAXRSS_KB=(\d+)", p.stderr)[-1])
    assert el < limit_s, f"scan took {el:.1f} s > {limit_s} s"
    assert rss < MAX_RSS_KB, f"peak RSS {rss} KiB"
    return p.stdout, rss, el


def _rows(db, sql: str) -> list[tuple]:
    with psycopg.connect(db.dsn) as c:
        return c.execute(sql).fetchall()


@pytest.fixture
def hostile(testbed):
    gt = testbed.status()["ground_truth"]["hostile"]
    return {h["label"]: h for h in gt["hosts"]} | {"_gt": gt}


def test_ground_truth_names_match_testbed_dns(testbed, hostile):
    """config/testbed.toml gives every hostile host its name (resolved through the
    testbed's resolver, independent of the scanners)."""
    code = ("import socket,json,sys; print(json.dumps({h: socket.gethostbyname(h) for h in sys.argv[1:]}))")
    names = [h["hostname"] for k, h in hostile.items() if k != "_gt"]
    p = run_cli("testbed", "exec", "--", sys.executable, "-c", code, *names)
    import json
    got = json.loads(p.stdout)
    assert got == {h["hostname"]: h["address"] for k, h in hostile.items() if k != "_gt"}


TLS_HOSTS = ["stall", "bigcert", "badticket", "reset", "garbage", "quicbad"]


def test_tls_scanner_over_hostile_hosts(db, hostile):
    args = ["tls", "--timeout", "2", "--no-ipv6", "--concurrency", "10"]
    for k in TLS_HOSTS:
        args += ["--target", hostile[k]["hostname"]]
    # per target and version: connect + read timeouts (2 s each) and one resumption attempt
    _scan(db, *args, limit_s=40)
    rows = _rows(db, "SELECT hostname, version, status, error, host(address) FROM tls_handshake ORDER BY 1, 2")
    by = {(h, v): (s, e, a) for h, v, s, e, a in rows}
    assert len(rows) == 2 * len(TLS_HOSTS), rows
    for k in TLS_HOSTS:
        for v in ("1.2", "1.3"):
            st, err, addr = by[(hostile[k]["hostname"], v)]
            assert addr == hostile[k]["address"]
            if k != "bigcert":
                assert st != "success" and err, (k, v, st, err)
    # reasons name what happened: timeouts for silence, resets for RSTs
    assert "timeout" in (by[("stall.hostile.test", "1.2")][0] + str(by[("stall.hostile.test", "1.2")][1])).lower()
    assert "reset" in str(by[("reset.hostile.test", "1.2")]).lower()


def test_tls_scanner_bounds_endless_records(db, hostile):
    _scan(db, "tls", "--timeout", "2", "--no-ipv6", "--target", hostile["endless"]["hostname"], limit_s=20, grace=1)


def test_tls_scanner_measures_oversized_certificate(db, hostile):
    h = hostile["bigcert"]
    _scan(db, "tls", "--timeout", "3", "--no-ipv6", "--target", h["hostname"], limit_s=30)
    rows = _rows(db, "SELECT version, status, error FROM tls_handshake ORDER BY 1")
    assert [(v, s) for v, s, _ in rows] == [("1.2", "success"), ("1.3", "success")], rows


def test_quic_scanners_over_hostile_hosts(db, hostile):
    """quic (handshakes) and quic-discover (Version Negotiation probe): broken QUIC
    packets, garbage and silence all end as a recorded failure within the timeout."""
    hosts = ["quicbad", "garbage", "stall"]
    args = []
    for k in hosts:
        args += ["--target", hostile[k]["hostname"]]
    _scan(db, "quic", "--timeout", "2s", "--no-resume", *args, limit_s=40)
    rows = _rows(db, "SELECT hostname, host(address), status, error FROM quic_connection ORDER BY 1")
    assert sorted(r[0] for r in rows) == sorted(hostile[k]["hostname"] for k in hosts), rows
    for _h, _a, st, err in rows:
        assert st != "success" and (err or st), rows
    _scan(db, "quic-discover", "--timeout", "2s", *args, limit_s=40)
    rows = {h.split(".")[0]: (st, err, vn, ver) for h, st, err, vn, ver in _rows(
        db, "SELECT hostname, status, error, vn_answer, vn_versions FROM quic_discovery")}
    assert set(rows) == set(hosts), rows
    # broken replies are a recorded protocol error; silence is a probe without a VN answer
    assert rows["quicbad"][0] == "protocol-error" and rows["quicbad"][1], rows
    assert rows["garbage"][0] == "protocol-error" and rows["garbage"][1], rows
    assert rows["quicbad"][2] == rows["garbage"][2] == "garbage", rows
    assert rows["stall"][2] == "none" and not rows["stall"][3], rows


def test_tfo_scanner_over_hostile_range(db, hostile):
    """SYN probes to the first 8 addresses of the hostile prefix: listeners on 443 answer
    SYN-ACK without TFO (the namespace has TFO off), closed addresses RST."""
    _scan(db, "tfo", "--cidr", "198.18.30.0/29", "--rate", "1000", "--cooldown", "1", limit_s=40)
    rows = dict(_rows(db, "SELECT host(address), reply FROM tfo_probe"))
    listening = {h["address"] for k, h in hostile.items() if k != "_gt" and 443 in h["tcp"]}
    expect = {f"198.18.30.{i}": ("syn-ack" if f"198.18.30.{i}" in listening else "rst") for i in range(8)}
    assert {a: rows.get(a) for a in expect} == expect
    assert not _rows(db, "SELECT 1 FROM tfo_probe WHERE tfo_kind IS NOT NULL")


DNS_MODES = ["loop", "forward", "self", "trunc", "garbage", "wrongid"]


def test_dns_scanner_over_hostile_nameserver(db, hostile):
    ns = hostile["dns"]["address"]
    args = []
    for m in DNS_MODES:
        args += ["--name", f"{m}.hostile.test"]
    _scan(db, "dns-ttl", "--nameserver", ns, "--types", "A", "--retries", "1", "--timeout", "0.5", *args,
          limit_s=30)
    rows = {h.split(".")[0]: (o, e) for h, o, e in _rows(db, "SELECT hostname, outcome, error FROM dns_ttl_probe")}
    assert set(rows) == set(DNS_MODES), rows
    for m in ("loop", "forward", "self", "trunc"):
        assert rows[m][0] == "malformed" and rows[m][1], (m, rows[m])
    assert rows["wrongid"][0] in ("timeout", "malformed"), rows["wrongid"]
    assert rows["garbage"][0] in ("timeout", "malformed"), rows["garbage"]


def test_dns_scanner_walks_into_hostile_delegation(db, hostile):
    """dnsloop.hostile.test is delegated to the hostile server: the walk ends in a
    recorded failure, not a hang."""
    _scan(db, "dns-ttl", "--types", "A", "--retries", "1", "--timeout", "0.5", "--name", "loop.dnsloop.hostile.test",
          limit_s=30)
    rows = _rows(db, "SELECT outcome, error FROM dns_ttl_probe")
    assert len(rows) == 1 and rows[0][0] in ("malformed", "lame", "timeout", "error", "servfail"), rows
