"""The streamed target lists of `scan tls` / `scan quic` / `quic-discover`
(netsurvey.scanning.NameStream / ResolvingStream, issue 26) on a ground of their own; the
same on the shared testbed: tests/core/test_stream_tls_quic.py.

Ground of its own: namespace nsadv32 with a DNS responder on 127.0.0.1 (its resolv.conf)
that answers ``fast*`` names at once, ``slow*`` names after 1.5 s and never answers
``never*`` names, and a TLS server on 198.18.132.10-13 (addresses on nsadv32's lo: an
on-machine route) that answers 198.18.132.11-13 0.5 s late. Both log what they get, with
wall-clock times, so a test sees from outside what the scan asked and when.

Found on the old code:

* the scan's event loop stood still while the stream waited for its next batch to resolve:
  handshakes under way then were frozen with it (3 of 4 recorded io-timeout / 1.5 s
  handshakes against a server answering in 0.5 s);
* SIGTERM while a batch resolved: the command waited for that batch and the one queued after
  it (4 DNS questions sent ~2 s after the signal), exited 1 ~5.7 s later with "internal error
  (RuntimeError: Event loop stopped before Future completed.)" and three "Task was destroyed
  but it is pending!" lines.

The other cases (resolution errors, --top without --list, dry runs, a bracketed address,
the default interleaving window) say what they found in their docstrings.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli

pytestmark = [pytest.mark.timeout(300)]

NS = "nsadv32"
RESOLV = Path("/etc/netns") / NS / "resolv.conf"   # `ip netns exec` mounts it over /etc/resolv.conf
ADDRS = [f"198.18.132.{i}" for i in (10, 11, 12, 13)]

DNS_RESPONDER = r'''
import json, socket, sys, threading, time
import dns.message, dns.rdatatype, dns.rrset
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 53))
log = open(sys.argv[1], "a", buffering=1)
lock = threading.Lock()
print("ready", flush=True)
def answer(d, peer):
    q = dns.message.from_wire(d); r = dns.message.make_response(q)
    qq = q.question[0]; name = qq.name.to_text().rstrip("."); label = name.split(".")[0]
    with lock:
        log.write(json.dumps({"t": time.time(), "name": name, "type": dns.rdatatype.to_text(qq.rdtype)}) + "\n")
    if label.startswith("never"):
        return
    if label.startswith("slow"):
        time.sleep(1.5)   # within dnspython's 2 s per attempt
    if label.startswith("nx"):
        r.set_rcode(3)
    elif qq.rdtype == dns.rdatatype.A:
        n = int(label[4:]) if label.startswith("fast") and label[4:].isdigit() else 0
        addr = "198.18.132.%d" % (10 + n % 4)
        if label.startswith("off"):   # no route but the default one (if any)
            addr = "198.18.77.5"
        r.answer.append(dns.rrset.from_text(qq.name, 60, "IN", "A", addr))
    with lock:
        u.sendto(r.to_wire(), peer)
while True:
    d, peer = u.recvfrom(4096)
    threading.Thread(target=answer, args=(d, peer), daemon=True).start()
'''

TLS_SERVER = r'''
import json, socket, ssl, sys, threading, time
cert, key, logf, addrs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
log = open(logf, "a", buffering=1)
lock = threading.Lock()
def note(**kw):
    with lock:
        log.write(json.dumps({"t": time.time(), **kw}) + "\n")
def serve(conn, addr):
    try:
        conn.settimeout(10)
        note(addr=addr, event="accept")
        if addr != addrs[0]:
            time.sleep(0.5)          # answers 0.5 s late
        s = ctx.wrap_socket(conn, server_side=True)
        note(addr=addr, event="handshake")
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                break
            buf += d
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        s.close()
    except Exception as exc:
        note(addr=addr, event="error", error=str(exc)[:200])
def listen(addr):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, 443)); ls.listen(128)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, addr), daemon=True).start()
for a in addrs:
    threading.Thread(target=listen, args=(a,), daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
'''

#: Batches of 4 names, interleaving windows of 4 targets (the defaults are 2,000 and 40,000).
SMALL = ("import runpy, sys; import netsurvey.scanning as s, netsurvey.spread as w; "
         "s.RESOLVE_BATCH = 4; w.WINDOW = 4; "
         "sys.argv = ['netsurvey'] + sys.argv[1:]; runpy.run_module('netsurvey.cli', run_name='__main__')")

def _ip(*argv):
    subprocess.run(["ip", "-n", NS, *argv], check=True, capture_output=True)

def _log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

@pytest.fixture
def ground(tmp_path):
    """nsadv32 with its resolver and TLS server; yields the two log paths."""
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    procs = []
    try:
        _ip("link", "set", "lo", "up")
        for a in ADDRS:
            _ip("addr", "add", f"{a}/32", "dev", "lo")
        RESOLV.parent.mkdir(parents=True, exist_ok=True)
        RESOLV.write_text("nameserver 127.0.0.1\n")
        key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", "/CN=adv32.test", "-days", "2"],
                       check=True, capture_output=True)
        dns_log, tls_log = tmp_path / "dns.jsonl", tmp_path / "tls.jsonl"
        for argv in ([sys.executable, "-c", DNS_RESPONDER, str(dns_log)],
                     [sys.executable, "-c", TLS_SERVER, str(cert), str(key), str(tls_log), *ADDRS]):
            p = subprocess.Popen(["ip", "netns", "exec", NS, *argv], stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "ready"
        yield dns_log, tls_log
    finally:
        for p in procs:
            p.kill()
            p.wait()
        RESOLV.unlink(missing_ok=True)
        if RESOLV.parent.is_dir() and not any(RESOLV.parent.iterdir()):
            RESOLV.parent.rmdir()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)

def _import(db, tmp_path, names, name):
    f = tmp_path / f"{name}.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
    r = run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn)
    assert r.returncode == 0, r.stderr

def _popen(db, *args, small=True):
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    head = [sys.executable, "-c", SMALL] if small else [sys.executable, "-m", "netsurvey.cli"]
    return subprocess.Popen(["ip", "netns", "exec", NS, *head, *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def _rows(db, q, *p):
    with db.connect() as conn:
        return conn.execute(q, p).fetchall()

TLS_ARGS = ("--tls", "1.3", "--no-check-resumption", "--no-ipv6", "--no-verify", "--timeout", "1", "--json")

@needs_root()
def test_handshakes_in_flight_while_the_next_batch_resolves(ground, db, tmp_path):
    """fast0..3 (one address each; .11-.13 answer in 0.5 s) are handshaken while slow0..3
    resolve (1.5 s). On the old code the first worker to want a target after fast0 blocked
    the event loop in the stream until the slow batch was resolved: the three handshakes
    under way were frozen with it (recorded io-timeout, or ~2.5 s handshakes)."""
    dns_log, tls_log = ground
    names = [f"fast{i}.adv32.test" for i in range(4)] + [f"slow{i}.adv32.test" for i in range(4)]
    _import(db, tmp_path, names, "inflight")
    p = _popen(db, "scan", "tls", "--list", "inflight", "--concurrency", "4", *TLS_ARGS)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-3000:]
    run_id = json.loads(out.strip().splitlines()[-1])["run_id"]
    got = {h: (s, ms) for h, s, ms in _rows(db, "SELECT hostname, status, handshake_ms FROM tls_handshake "
                                                 "WHERE run_id=%s", run_id)}
    assert sorted(got) == sorted(names), got
    for h, (status, ms) in got.items():
        # each server answered within 0.5 s: a handshake of ~0.5 s, never a timeout
        assert status == "success" and ms < 1000, (h, status, ms, got)
    served = [e for e in _log(tls_log) if e["event"] == "handshake"]
    assert len(served) == 8, served

@needs_root()
def test_sigterm_while_a_batch_resolves(ground, db, tmp_path):
    """SIGTERM ~1 s into a scan whose second batch (never0..3) is being resolved (nothing
    answers: dnspython gives up after 3 s) and whose third (never4..7) waits behind it. The
    command stops at once: the run ends 'failed' with the rows of the hosts it handshook,
    and no DNS question goes out for a batch not started when the signal came. On the old
    code it waited for both batches (the questions for never4..7 went out ~2 s after the
    signal) and exited ~5 s after it."""
    dns_log, tls_log = ground
    names = [f"fast{i}.adv32.test" for i in range(4)] + [f"never{i}.adv32.test" for i in range(8)]
    _import(db, tmp_path, names, "term")
    p = _popen(db, "scan", "tls", "--list", "term", "--concurrency", "4", *TLS_ARGS)
    deadline = time.time() + 30
    while len([e for e in _log(tls_log) if e["event"] == "accept"]) < 4 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.8)   # the servers answered (0.5 s); the second batch resolves until ~3 s
    t_term = time.time()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    took = time.time() - t_term
    assert p.returncode == 128 + signal.SIGTERM and "Traceback" not in err, (p.returncode, took, err[-3000:])
    # never4..7's batch had not started when the signal came (never0..3's may be retried by
    # dnspython at 2 s while the command exits: not counted)
    late = [q["name"] for q in _log(dns_log) if q["t"] > t_term and q["name"][5:6] in "4567"]
    assert late == [], f"{len(late)} DNS questions of a batch started after SIGTERM: {late}"
    assert took < 3.0, f"exited {took:.1f} s after SIGTERM"
    (run_id, status), = _rows(db, "SELECT id, status FROM scan_run WHERE kind = 'tls'")
    assert status == "failed"
    got = dict(_rows(db, "SELECT hostname, status FROM tls_handshake WHERE run_id=%s", run_id))
    assert {h: s for h, s in got.items() if h.startswith("fast")} == \
        {f"fast{i}.adv32.test": "success" for i in range(4)}, got

def _run(db, *args, timeout=120):
    p = _popen(db, *args, small=False)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)

@needs_root()
def test_quic_top_without_list_and_dry_runs_contact_no_host(ground, db, tmp_path):
    """`--top` without `--list` is bad input for the quic commands as for tls and dns-ttl
    (the old code ignored it and scanned); a dry run, with a list, `--target` names and
    `--repeat`, asks the resolver about its own names only (as the run does: the plan
    judges their addresses) and contacts no host."""
    dns_log, _ = ground
    _import(db, tmp_path, ["fast0.adv32.test", "fast1.adv32.test"], "dry")
    for cmd in ("quic", "quic-discover", "quic-turnover"):
        r = _run(db, "scan", cmd, "--target", "fast2.adv32.test", "--top", "1", "--dry-run")
        assert r.returncode == 2 and "Traceback" not in r.stderr, (cmd, r.returncode, r.stderr[-2000:])
        assert len(r.stderr.strip().splitlines()) == 1 and "--top" in r.stderr, (cmd, r.stderr)
    assert _rows(db, "SELECT id, kind FROM scan_run") == []
    for argv in (("tls", "--repeat", "2"), ("quic",), ("quic-discover",), ("quic-turnover", "--every", "10m",
                                                                            "--for", "1h")):
        r = _run(db, "scan", *argv, "--list", "dry", "--target", "fast2.adv32.test", "--dry-run")
        assert r.returncode == 0, (argv, r.stderr[-2000:])
        assert "3 targets would be probed" in r.stdout, (argv, r.stdout)
    asked = {q["name"] for q in _log(dns_log)}
    assert asked <= {"fast0.adv32.test", "fast1.adv32.test", "fast2.adv32.test"}, asked
    assert _log(ground[1]) == [], "a dry run connected to a TLS host"

@needs_root()
def test_resolution_errors_keep_their_reason(ground, db, tmp_path):
    """NXDOMAIN and a resolver that never answers: one resolution-failed row each, counted
    once, with the reason ('nxdomain', 'timeout') as scan tls stores it. The quic commands
    stored 'no address' for every failed name (the reason was lost)."""
    _import(db, tmp_path, ["nx0.adv32.test", "never0.adv32.test"], "fail")
    want = {"nx0.adv32.test": "nxdomain", "never0.adv32.test": "timeout"}
    for cmd, table in (("tls", "tls_handshake"), ("quic", "quic_connection"), ("quic-discover", "quic_discovery")):
        extra = ("--no-check-resumption", "--tls", "1.3") if cmd == "tls" else ()
        r = _run(db, "scan", cmd, "--list", "fail", "--json", *extra)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        res = json.loads(r.stdout.strip().splitlines()[-1])
        counts = res.get("counts", res)
        assert counts.get("resolution-failed") == 2, (cmd, res)
        got = _rows(db, f"SELECT hostname, status, error FROM {table} WHERE run_id = %s", res["run_id"])
        assert sorted((h, e) for h, s, e in got if s == "resolution-failed") == sorted(want.items()), (cmd, got)

@needs_root()
def test_probing_overlaps_resolution_with_the_default_window(ground, db, tmp_path):
    """With the default interleaving window (40,000 targets) the scan held every resolved
    target until the window was full, so a list shorter than that was resolved whole before
    the first handshake (test_stream_tls_quic shrinks the window to 4 to see the overlap).
    Now a window ends where the stream has to wait for its next batch: fast0..3 are
    handshaken while slow0..3 resolve (1.5 s)."""
    dns_log, tls_log = ground
    names = [f"fast{i}.adv32.test" for i in range(4)] + [f"slow{i}.adv32.test" for i in range(4)]
    _import(db, tmp_path, names, "overlap")
    batch4 = SMALL.replace(" w.WINDOW = 4;", "")
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    r = subprocess.run(["ip", "netns", "exec", NS, sys.executable, "-c", batch4, "scan", "tls", "--list", "overlap",
                        "--concurrency", "4", *TLS_ARGS], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    slow_asked = min(q["t"] for q in _log(dns_log) if q["name"].startswith("slow"))
    first_accept = min(e["t"] for e in _log(tls_log) if e["event"] == "accept")
    assert first_accept < slow_asked + 1.0, \
        f"first handshake {first_accept - slow_asked:.2f} s after slow0..3 were asked"

@needs_root()
def test_dry_run_plan_judges_a_bracketed_address(ground, db, tmp_path):
    """`scan tls --target [2001:db8::2]`: the run resolves the bracketed literal to itself and
    blocks it (2001:db8::/32 is reserved); the dry-run plan said it would be probed. (The
    plan asks the resolver about the name only, as the run does.)"""
    r = _run(db, "scan", "tls", "--target", "[2001:db8::2]", "--target", "fast0.adv32.test", "--dry-run")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "1 targets would be probed, 1 blocked by policy" in r.stdout, r.stdout
    assert {q["name"] for q in _log(ground[0])} <= {"fast0.adv32.test"}
    assert _log(ground[1]) == []
    r = _run(db, "scan", "tls", "--target", "[2001:db8::2]", *[a for a in TLS_ARGS if a != "--no-ipv6"])
    assert r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1]).get("blocked") == 1, r.stdout
