"""`scan dns-ttl --nameserver` against a misbehaving authoritative server on loopback: a
real UDP/TCP server (below) that answers SERVFAIL, REFUSED, replies with bad compression
pointers or cut-off packets, stays silent, sends a reply for another question first, or
sets TC and answers over TCP. The scan must record each case and never crash; the
etiquette policy must keep it away from loopback unless explicitly allowed."""
from __future__ import annotations

import json
import socket
import struct
import threading

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest

from conftest import run_cli

pytestmark = pytest.mark.timeout(120)

TTL_OK, TTL_SPOOF, TTL_TCP = 42, 77, 99


def _answer(q: dns.message.Message, ttl: int, *, tc: bool = False) -> bytes:
    r = dns.message.make_response(q)
    r.flags |= dns.flags.AA
    name = q.question[0].name
    if tc:
        r.flags |= dns.flags.TC
    elif q.question[0].rdtype == 1:
        r.answer.append(dns.rrset.from_text(name, ttl, "IN", "A", "198.18.2.1"))
    return r.to_wire()


def _udp_reply(data: bytes) -> list[bytes]:
    q = dns.message.from_wire(data)
    label = q.question[0].name.labels[0].decode()
    if label == "servfail" or label == "refused":
        r = dns.message.make_response(q)
        r.set_rcode(dns.rcode.SERVFAIL if label == "servfail" else dns.rcode.REFUSED)
        return [r.to_wire()]
    if label == "badptr":  # answer owner is a pointer beyond the packet
        good = bytearray(_answer(q, TTL_OK))
        qend = 12 + len(q.question[0].name.to_wire()) + 4
        good[qend:qend + 2] = b"\xc0\xff"
        return [bytes(good)]
    if label == "short":
        return [_answer(q, TTL_OK)[:20]]
    if label == "silent":
        return []
    if label == "spoof":  # same ID, another question: must be ignored
        other = dns.message.make_query("other.test", "A")
        other.id = q.id
        return [_answer(other, 1), _answer(q, TTL_SPOOF)]
    if label == "tc":
        return [_answer(q, 0, tc=True)]
    return [_answer(q, TTL_OK)]


@pytest.fixture(scope="module")
def bad_server():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    port = udp.getsockname()[1]
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", port))
    tcp.listen(16)
    stop = threading.Event()

    def serve_udp():
        udp.settimeout(0.2)
        while not stop.is_set():
            try:
                data, addr = udp.recvfrom(4096)
            except socket.timeout:
                continue
            for r in _udp_reply(data):
                udp.sendto(r, addr)

    def serve_tcp():
        tcp.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = tcp.accept()
            except socket.timeout:
                continue
            with c:
                c.settimeout(2)
                n = struct.unpack("!H", c.recv(2))[0]
                q = dns.message.from_wire(c.recv(n))
                r = _answer(q, TTL_TCP)
                c.sendall(struct.pack("!H", len(r)) + r)

    threads = [threading.Thread(target=f, daemon=True) for f in (serve_udp, serve_tcp)]
    for t in threads:
        t.start()
    yield port
    stop.set()
    for t in threads:
        t.join(2)
    udp.close()
    tcp.close()


@pytest.fixture
def loopback_config(tmp_path):
    p = tmp_path / "survey.toml"
    p.write_text('[etiquette]\nallow = ["198.18.0.0/15", "2001:2::/48", "127.0.0.1/32"]\n')
    return p


CASES = {  # first label -> (outcome, ttl, transport, truncated)
    "ok": ("answer", TTL_OK, "udp", False),
    "servfail": ("servfail", None, "udp", False),
    "refused": ("refused", None, "udp", False),  # --nameserver: the server given, not one named for a zone (issue 24)
    "badptr": ("malformed", None, None, False),
    "short": ("malformed", None, None, False),
    "silent": ("timeout", None, None, False),
    "spoof": ("answer", TTL_SPOOF, "udp", False),
    "tc": ("answer", TTL_TCP, "tcp", True),
}


def test_misbehaving_server_recorded_never_crashes(db, bad_server, loopback_config):
    args = []
    for label in CASES:
        args += ["--name", f"{label}.bad.test"]
    p = run_cli("--config", str(loopback_config), "scan", "dns-ttl", *args, "--types", "A",
                "--nameserver", f"127.0.0.1:{bad_server}", "--timeout", "0.2", "--retries", "1", "--json",
                dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["engine"]["mismatched"] == 1
    with db.connect() as conn:
        rows = {r[0].split(".")[0]: r[1:] for r in conn.execute(
            "SELECT hostname, outcome, ttl, transport, truncated, rcode, error FROM dns_ttl_probe WHERE run_id = %s",
            (res["run_id"],)).fetchall()}
        status = conn.execute("SELECT status, counts FROM scan_run WHERE id = %s", (res["run_id"],)).fetchone()
    assert status[0] == "finished" and status[1]["targets"] == len(CASES)
    for label, (outcome, ttl, transport, truncated) in CASES.items():
        got = rows[label]
        assert got[0] == outcome and got[1] == ttl and got[3] == truncated, (label, got)
        if transport:
            assert got[2] == transport, (label, got)
    assert rows["servfail"][4] == "SERVFAIL" and rows["refused"][4] == "REFUSED"
    assert "pointer" in rows["badptr"][5]


def test_loopback_nameserver_refused_by_default_policy(db, bad_server):
    p = run_cli("scan", "dns-ttl", "--name", "ok.bad.test", "--nameserver", f"127.0.0.1:{bad_server}", dsn=db.dsn)
    assert p.returncode == 2 and "127.0.0.1" in p.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == 0
