"""`scan dns-second-opinion` (kdig) and, where the same holds, `scan dns-ttl`, observed from
outside: the database's rows and the own log of a loopback authoritative server that records
every question it is asked. Each question's row lands once with the shard that committed
it, --subnet rows, --rate held at the server (kdig's retry and TCP fallback included), --top
without --list refused, one name given to two shards; and kdig's text for a silent server
read as a timeout."""
from __future__ import annotations

import json
import shutil
import socket
import struct
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.rrset
import pytest

from conftest import run_cli

pytestmark = pytest.mark.timeout(120)

@pytest.fixture
def dns_server():
    """An authoritative server on loopback that answers every A question (TTL 42) and logs
    each question it receives: (name, source address, arrival time, transport). Names whose
    first label starts with 'silent' get no reply; 'tc' a truncated one (then TCP answers)."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", udp.getsockname()[1]))
    tcp.listen(16)
    log: list[tuple] = []
    stop = threading.Event()

    def answer(q, tc=False):
        r = dns.message.make_response(q)
        r.flags |= dns.flags.AA
        if tc:
            r.flags |= dns.flags.TC
        else:
            r.answer.append(dns.rrset.from_text(q.question[0].name, 42, "IN", "A", "198.18.2.1"))
        return r.to_wire()

    def serve_tcp():
        tcp.settimeout(0.2)
        while not stop.is_set():
            try:
                c, addr = tcp.accept()
            except socket.timeout:
                continue
            log.append(("(tcp connect)", addr[0], time.monotonic(), "tcp"))
            with c:
                c.settimeout(2)
                try:
                    n = struct.unpack("!H", c.recv(2))[0]
                    q = dns.message.from_wire(c.recv(n))
                except (OSError, struct.error, dns.exception.DNSException):
                    continue
                r = answer(q)
                c.sendall(struct.pack("!H", len(r)) + r)

    def serve():
        udp.settimeout(0.2)
        while not stop.is_set():
            try:
                data, addr = udp.recvfrom(4096)
            except socket.timeout:
                continue
            q = dns.message.from_wire(data)
            name = q.question[0].name.to_text().rstrip(".")
            log.append((name, addr[0], time.monotonic(), "udp"))
            if not name.startswith("silent"):
                udp.sendto(answer(q, tc=name.startswith("tc")), addr)

    threads = [threading.Thread(target=f, daemon=True) for f in (serve, serve_tcp)]
    for t in threads:
        t.start()
    yield udp.getsockname()[1], log
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

@pytest.mark.skipif(shutil.which("kdig") is None, reason="kdig (knot-dnsutils) not installed")
def test_dns_second_opinion_sharded_rows_once_with_their_shard(db, dns_server, loopback_config):
    """`scan dns-second-opinion --procs 2`: each question's row lands once and carries the
    shard that committed it (its rows were committed outside the shard's transaction, so
    every shard's copy of every --name question stayed, shard_id NULL)."""
    port, log = dns_server
    names = [f"n{i}.adv.test" for i in range(4)]
    args = [a for n in names for a in ("--name", n)]
    p = run_cli("--config", str(loopback_config), "scan", "dns-second-opinion", *args,
                "--nameserver", f"127.0.0.1:{port}", "--procs", "2", dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    with db.connect() as conn:
        run_id = conn.execute("SELECT max(id) FROM scan_run WHERE kind = 'dns-second-opinion'").fetchone()[0]
        rows = conn.execute("SELECT hostname, shard_id FROM dns_second_opinion WHERE run_id = %s",
                            (run_id,)).fetchall()
        shard_ids = {r[0] for r in conn.execute("SELECT id FROM job_shard WHERE run_id = %s", (run_id,))}
        status = conn.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()[0]
    assert status == "finished"
    assert sorted(h for h, _ in rows) == sorted(names), rows          # once each
    assert all(s in shard_ids for _, s in rows), (rows, shard_ids)    # stamped with a committed shard
    # each question asked once, by the shard its name belongs to (every shard asked every --name)
    assert sorted(e[0] for e in log) == sorted(names), log

@pytest.mark.skipif(shutil.which("kdig") is None, reason="kdig (knot-dnsutils) not installed")
def test_dns_second_opinion_inline_rows_with_subnet(db, dns_server, loopback_config):
    port, log = dns_server
    p = run_cli("--config", str(loopback_config), "scan", "dns-second-opinion", "--name", "a.adv.test",
                "--subnet", "198.18.0.0/24", "--nameserver", f"127.0.0.1:{port}", "--json", dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    run_id = json.loads(p.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT host(subnet), ttl, status, shard_id FROM dns_second_opinion WHERE run_id = %s"
                            " ORDER BY subnet NULLS FIRST", (run_id,)).fetchall()
    assert rows == [(None, 42, "success", None), ("198.18.0.0", 42, "success", None)], rows
    assert len(log) == 2

@pytest.mark.skipif(shutil.which("kdig") is None, reason="kdig (knot-dnsutils) not installed")
@pytest.mark.parametrize("first", ["silent", "tc"])
def test_dns_second_opinion_rate_holds_at_the_server(db, dns_server, loopback_config, first):
    """--rate 0.4: the server must never see more than 1 + 0.4 x (time span) packets
    (questions and TCP connections) - kdig's own retry (+retry=1, 2 s later) and its TCP
    fallback after a truncated reply (at once) went out without a token."""
    port, log = dns_server
    p = run_cli("--config", str(loopback_config), "scan", "dns-second-opinion", "--name", f"{first}1.adv.test",
                "--nameserver", f"127.0.0.1:{port}", "--rate", "0.4",
                dsn=db.dsn, timeout=60)
    assert p.returncode == 0, p.stderr
    times = sorted(e[2] for e in log)
    assert times
    for i, t0 in enumerate(times):          # every window starting at a packet
        for j in range(i, len(times)):
            allowed = 1 + 0.4 * (times[j] - t0) + 0.1
            assert j - i + 1 <= allowed, f"{j - i + 1} packets in {times[j] - t0:.2f} s at --rate 0.4: {log}"
    assert len(times) == 2, log             # silent: both tries; tc: UDP, then TCP

def test_kdig_silent_server_is_a_timeout():
    """kdig 3.2's output for a server that never answers (captured above, +retry=0) is a
    'timeout', not an 'error' (the first WARNING line, 'response timeout for ...', matched
    neither 'timed out' nor 'failed to query')."""
    from scanners.dns.kdig import parse

    text = (";; WARNING: response timeout for 127.0.0.1@53999(UDP)\n"
            ";; ERROR: failed to query server 127.0.0.1@53999(UDP)\n")
    v = parse(text, "x.test", "A")
    assert v.status == "timeout" and "response timeout" in v.error, v
    unreachable = (";; WARNING: can't send query to 198.18.150.99@53(UDP)\n"
                   ";; ERROR: failed to query server 198.18.150.99@53(UDP)\n")
    assert parse(unreachable, "x.test", "A").status == "error"

def test_dns_top_without_list_is_bad_input(db, dns_server, loopback_config):
    """--top only selects from a --list: with --name alone a --top (here negative) is bad
    input - one line, exit 2, no run, no question (it was ignored: exit 0, the name asked)."""
    port, log = dns_server
    for kind in ("dns-second-opinion", "dns-ttl"):
        p = run_cli("--config", str(loopback_config), "scan", kind, "--name", "a.adv.test", "--top", "-5",
                    "--nameserver", f"127.0.0.1:{port}", dsn=db.dsn)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (kind, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == 0
    assert log == []

@pytest.mark.skipif(shutil.which("kdig") is None, reason="kdig (knot-dnsutils) not installed")
def test_dns_one_name_in_two_shards(db, dns_server, loopback_config):
    """One --name, --procs 2: the shard without a name finishes with nothing to ask; the run
    finishes with the name asked once (dns-ttl and dns-second-opinion)."""
    port, log = dns_server
    for kind, extra, table in (("dns-ttl", ["--types", "A"], "dns_ttl_probe"),
                               ("dns-second-opinion", [], "dns_second_opinion")):
        log.clear()
        p = run_cli("--config", str(loopback_config), "scan", kind, "--name", "one.adv.test", *extra,
                    "--nameserver", f"127.0.0.1:{port}", "--procs", "2", dsn=db.dsn)
        assert p.returncode == 0, (kind, p.stderr)
        with db.connect() as conn:
            run_id, status = conn.execute("SELECT id, status FROM scan_run WHERE kind = %s", (kind,)).fetchone()
            n = conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = %s", (run_id,)).fetchone()[0]
        assert status == "finished" and n == 1, (kind, status, n)
        assert [e[0] for e in log] == ["one.adv.test"], (kind, log)
