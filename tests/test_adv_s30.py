"""Adversary (session 30): the commands merged this session, observed from outside - the
database's rows and a loopback DNS server's own log of the questions it was asked."""
from __future__ import annotations

import json
import shutil
import socket
import threading

import dns.flags
import dns.message
import dns.rrset
import pytest

from conftest import run_cli

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def dns_server():
    """An authoritative server on loopback that answers every A question (TTL 42) and logs
    each question it receives: (name, source address)."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    log: list[tuple[str, str]] = []
    stop = threading.Event()

    def serve():
        udp.settimeout(0.2)
        while not stop.is_set():
            try:
                data, addr = udp.recvfrom(4096)
            except socket.timeout:
                continue
            q = dns.message.from_wire(data)
            log.append((q.question[0].name.to_text().rstrip("."), addr[0]))
            r = dns.message.make_response(q)
            r.flags |= dns.flags.AA
            r.answer.append(dns.rrset.from_text(q.question[0].name, 42, "IN", "A", "198.18.2.1"))
            udp.sendto(r.to_wire(), addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield udp.getsockname()[1], log
    stop.set()
    t.join(2)
    udp.close()


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
    assert {n for n, _ in log} == set(names)                          # the server saw them all


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
