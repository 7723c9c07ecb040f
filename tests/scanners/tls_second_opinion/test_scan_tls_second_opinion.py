"""scan tls-second-opinion (issue 24) against a local stock gnutls-serv: gnutls-cli's
verdicts land in tls_second_opinion; bad input is one line and exit 2; a dry run
contacts nothing. The zoo hosts' verdicts are checked in test_zoo_tls.py."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import run_cli

pytestmark = pytest.mark.skipif(shutil.which("gnutls-cli") is None or shutil.which("gnutls-serv") is None,
                                reason="gnutls-bin not installed (scripts/install.sh)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gnutls_serv(tmp_path):
    from testbed.pki import ensure_ca, issue_cert

    ca, _ = ensure_ca(tmp_path / "pki")
    cert, key = issue_cert(tmp_path / "pki", "local.zoo.test", ["local.zoo.test"])
    port = _free_port()
    p = subprocess.Popen(["gnutls-serv", "--http", "-p", str(port), "--x509certfile", str(cert),
                          "--x509keyfile", str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\n')
    yield port, str(ca), cfg
    p.terminate()
    p.wait(timeout=5)


def test_verdicts_of_a_stock_gnutls_serv(db, gnutls_serv):
    port, ca, cfg = gnutls_serv
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "local.zoo.test=127.0.0.1",
                "--port", str(port), "--ca-file", ca, "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT version, mechanism, status, resumed, client FROM tls_second_opinion"
                            " WHERE run_id = %s ORDER BY 1, 2", (run_id,)).fetchall()
    # gnutls-serv keeps a session cache and issues tickets (src/serv.c), so all three resume
    assert [r[:4] for r in rows] == [("1.2", "id", "success", True), ("1.2", "ticket", "success", True),
                                     ("1.3", "ticket", "success", True)], rows
    assert rows[0][4].startswith("gnutls-cli 3.")


def test_wrong_name_is_no_verdict(db, gnutls_serv):
    port, ca, cfg = gnutls_serv
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "other.zoo.test=127.0.0.1",
                "--port", str(port), "--ca-file", ca, "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT status, resumed, error FROM tls_second_opinion WHERE run_id = %s", (run_id,)).fetchall()
    assert len(rows) == 3 and all(s == "application-error" and res is None and e for s, res, e in rows), rows


def test_testssl_findings_parsed_with_the_version_its_s_client_saw():
    """testssl.sh's JSON findings + the openssl wrapper's notes -> verdicts (no network)."""
    from scanners.tls_second_opinion.testssl import parse, testbed_only

    findings = [{"id": "TLS_session_ticket", "finding": "valid for 604800 seconds (>daily)"},
                {"id": "sessionresumption_ticket", "finding": "supported"},
                {"id": "sessionresumption_ID", "finding": "not supported"}]
    noted = ["ticket out New, TLSv1.2, Cipher is ECDHE-RSA-AES128-GCM-SHA256",   # the resuming one counts
             "ticket in Reused, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256",
             "no_ticket out New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256"]          # no second connection
    assert parse(findings, noted) == [("ticket", "1.3", True, None, None), ("id", "1.3", False, None, None),
                                      ("lifetime-hint", "1.3", None, 604800, None)]
    # a check testssl could not do is no verdict; a version not seen is said
    bad = [{"id": "sessionresumption_ticket", "finding": "check failed because of connect problem"},
           {"id": "TLS_session_ticket", "finding": "no -- no lifetime advertised"}]
    assert parse(bad, []) == [("ticket", None, None, None, "testssl: check failed because of connect problem"),
                              ("lifetime-hint", None, None, None, "testssl: no -- no lifetime advertised")]
    assert parse(findings[1:2], [])[0][4] == "version of the check not seen"
    assert testbed_only("198.19.255.1") and testbed_only("2001:2:0:124::10") and testbed_only("127.0.0.1")
    assert not testbed_only("192.0.2.1") and not testbed_only("2001:db8::1")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("testssl") is None, reason="testssl.sh not installed (scripts/install.sh)")
def test_testssl_verdicts_of_a_stock_gnutls_serv(db, gnutls_serv):
    """testssl.sh (--client testssl) against the stock gnutls-serv: its checks run at the
    version testssl picks (the one its first ticket came with: 1.2 or 1.3 from run to run),
    recorded from its s_client's output. gnutls-serv's ticket lifetime is expire_time,
    21600 s, with either version (testbed/zoo.py GNUTLS_FACTS); it resumes by ticket, and by
    session ID with TLS 1.2."""
    port, ca, cfg = gnutls_serv
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "local.zoo.test=127.0.0.1",
                "--port", str(port), "--client", "testssl", "--json", dsn=db.dsn, timeout=300)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT version, mechanism, status, resumed, lifetime_hint_s, client FROM tls_second_opinion"
                            " WHERE run_id = %s ORDER BY 2", (run_id,)).fetchall()
    v = rows[0][0]
    got = {x[1]: x[:5] for x in rows}
    assert v in ("1.2", "1.3") and set(got) == {"id", "lifetime-hint", "ticket"}, rows
    assert got["lifetime-hint"] == (v, "lifetime-hint", "success", None, 21600), rows
    if v == "1.2":   # the ticket arrives inside the handshake: both checks are sound
        assert got["id"] == (v, "id", "success", True, None) and got["ticket"] == (v, "ticket", "success", True, None)
    else:
        # TLS 1.3: testssl's `s_client -sess_out </dev/null` may quit before the server's
        # post-handshake ticket: then its ticket check has no verdict ("connect problem") and
        # its 'id' check reads "not supported" - the id verdict at 1.3 means nothing (testssl.py)
        assert got["ticket"][2:4] in (("success", True), ("application-error", None)), rows
    assert all(x[5].startswith("testssl 3.") for x in rows)


def test_testssl_only_against_the_testbed(db):
    r = run_cli("scan", "tls-second-opinion", "--target", "x.test=192.0.2.1", "--client", "testssl", dsn=db.dsn)
    assert r.returncode == 2 and "testbed" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'tls-second-opinion'").fetchone()[0] == 0


@pytest.mark.parametrize("args", [["--target", "127.0.0.1"], ["--target", "x.test=not-an-ip"],
                                  ["--target", "x.test=127.0.0.1", "--client", "curl"],
                                  ["--target", "x.test=127.0.0.1", "--timeout", "0"],
                                  ["--target", "x.test=127.0.0.1", "--ca-file", "/nonexistent.pem"],
                                  # testssl.sh word-splits the hostname into s_client's argv
                                  # (-servername $NODE): these would add -connect / pick port 25
                                  ["--target", "x.test -connect 127.0.0.1:9=127.0.0.1", "--client", "testssl"],
                                  ["--target", "x.test:25/=127.0.0.1", "--client", "testssl"],
                                  ["--target", "x$(id).test=127.0.0.1"]])
def test_bad_input_is_one_line_exit_2(db, args):
    r = run_cli("scan", "tls-second-opinion", *args, dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'tls-second-opinion'").fetchone()[0] == 0


def test_dry_run_contacts_nothing(db, tmp_path):
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\n')
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "x.test=127.0.0.1", "--port", str(port),
                "--dry-run", dsn=db.dsn)
    assert r.returncode == 0 and "1 targets would be probed" in r.stdout, (r.stdout, r.stderr)
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()


# ------------------------------------------- sslyze (its own venv: tools/sslyze/.venv)
def _sslyze_available() -> bool:
    from scanners.tls_second_opinion import sslyze

    return sslyze.available()


needs_sslyze = pytest.mark.skipif(not _sslyze_available(),
                                  reason="sslyze venv absent (tools/sslyze/.venv: scripts/install.sh builds it)")


class _SynSniffer:
    """Counts TCP SYNs (no ACK) to one port on the loopback device from outside the client:
    an AF_PACKET socket (root), so every connection sslyze opens is seen, gated or not."""

    def __init__(self, port: int):
        import threading

        self.port, self.times = port, []
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import struct

        while not self.stop.is_set():
            try:
                frame, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14 + 20 + 20:
                continue   # lo shows each packet twice: count the delivered copy only
            if struct.unpack("!H", frame[12:14])[0] != 0x0800 or frame[14 + 9] != 6:
                continue
            ihl = (frame[14] & 0x0F) * 4
            tcp = frame[14 + ihl:]
            dport, flags = struct.unpack("!H", tcp[2:4])[0], tcp[13]
            if dport == self.port and flags & 0x02 and not flags & 0x10:
                self.times.append(time.monotonic())

    def close(self) -> list[float]:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()
        return self.times


@pytest.fixture
def gnutls_serv_early(tmp_path):
    """A stock gnutls-serv that also accepts TLS 1.3 early data (--earlydata)."""
    from testbed.pki import ensure_ca, issue_cert

    ensure_ca(tmp_path / "pki")
    cert, key = issue_cert(tmp_path / "pki", "local.zoo.test", ["local.zoo.test"])
    port = _free_port()
    p = subprocess.Popen(["gnutls-serv", "--http", "--earlydata", "-p", str(port), "--x509certfile", str(cert),
                          "--x509keyfile", str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    yield port, tmp_path
    p.terminate()
    p.wait(timeout=5)


@needs_sslyze
@pytest.mark.skipif(os.geteuid() != 0, reason="the SYN sniffer needs root (AF_PACKET)")
@pytest.mark.timeout(120)
def test_sslyze_verdicts_and_every_connection_paced(db, gnutls_serv_early):
    """sslyze (--client sslyze) against a stock gnutls-serv with --earlydata: session-ID and
    ticket resumption (TLS 1.2) and early data (TLS 1.3) land in tls_second_opinion; every
    TCP connection sslyze opens, counted from outside by a SYN sniffer on lo, was granted
    through the run's limiter (the connections column equals the sniffer's count) and the
    SYNs are spaced by the etiquette's per-destination rate (10/s here). ~5 s."""
    port, tmp = gnutls_serv_early
    cfg = tmp / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\nper_destination_pps = 10\n')
    sniff = _SynSniffer(port)
    try:
        t0 = time.monotonic()
        r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "local.zoo.test=127.0.0.1",
                    "--port", str(port), "--client", "sslyze", "--json", dsn=db.dsn)
        took_s = time.monotonic() - t0
    finally:
        time.sleep(0.3)
        syns = sniff.close()
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT version, mechanism, status, error, resumed, early_data_accepted, attempts,"
                            " resumptions, connections, client FROM tls_second_opinion WHERE run_id = %s"
                            " ORDER BY 2", (run_id,)).fetchall()
    got = {x[1]: x[:8] for x in rows}
    # gnutls-serv keeps a session cache (IDs resume) and, with --earlydata, accepts 0-RTT
    assert got["id"] == ("1.2", "id", "success", None, True, None, 5, 5), rows
    assert got["early-data"] == ("1.3", "early-data", "success", None, None, True, 1, None), rows
    # sslyze's ticket verdict is "the ticket after the resumption is the one offered": GnuTLS
    # 3.7.9 sends no new ticket on a TLS 1.2 ticket resumption, so this reads as resumed
    assert got["ticket"] == ("1.2", "ticket", "success", None, True, None, 5, 5), rows
    assert all(x[9].startswith("sslyze 6.") for x in rows), rows
    n = rows[0][8]
    assert all(x[8] == n for x in rows) and n >= 22, rows   # 2 x 5 x 2 resumption + 2 early data + probes
    assert len(syns) == n, (len(syns), n)                   # no connection bypassed the gate
    gaps = [b - a for a, b in zip(syns, syns[1:])]
    assert min(gaps) >= 0.1 * 0.8, sorted(gaps)[:5]         # per_destination_pps = 10
    assert took_s >= (n - 1) * 0.1, took_s


@pytest.mark.skipif(shutil.which("testssl") is None, reason="testssl.sh not installed (scripts/install.sh)")
@pytest.mark.skipif(os.geteuid() != 0, reason="the SYN sniffer needs root (AF_PACKET)")
@pytest.mark.timeout(240)
def test_testssl_every_connection_paced(db, gnutls_serv):
    """testssl.sh (--client testssl) runs with connectgate.c preloaded: every TCP connection
    it and its children (bash /dev/tcp, openssl s_client) open, counted from outside by a SYN
    sniffer on lo, was granted through the run's limiter (the connections column equals the
    sniffer's count) and the SYNs keep the etiquette's per-destination rate (2/s here: at
    most limit + burst = 3 in any 1 s window, gaps >= 0.5 s). Ungated, testssl.sh 3.0.8's -S
    sent 24 SYNs, up to 4 within 1 s, gaps down to 0.13 s. ~25-45 s (testssl.sh's own pace)."""
    port, ca, cfg = gnutls_serv
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\nper_destination_pps = 2\n')
    sniff = _SynSniffer(port)
    try:
        r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "local.zoo.test=127.0.0.1",
                    "--port", str(port), "--client", "testssl", "--json", dsn=db.dsn, timeout=230)
    finally:
        time.sleep(0.3)
        syns = sniff.close()
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT mechanism, status, error, connections FROM tls_second_opinion WHERE run_id = %s",
                            (run_id,)).fetchall()
    assert {x[0] for x in rows} == {"id", "lifetime-hint", "ticket"}, rows
    assert len(syns) >= 15, syns
    most = max(sum(1 for u in syns if t <= u < t + 1.0) for t in syns)
    gaps = [b - a for a, b in zip(syns, syns[1:])]
    assert most <= 2 + 1 and min(gaps) >= 0.5 * 0.8, (most, sorted(gaps)[:5])   # per_destination_pps = 2
    n = rows[0][3]
    assert all(x[3] == n for x in rows) and len(syns) == n, (len(syns), rows)   # none bypassed the gate


_GATED_CLIENT = r"""
import errno, socket, sys
port, other = int(sys.argv[1]), int(sys.argv[2])
out = []
for dest in (("127.0.0.1", port), ("127.0.0.1", other), ("127.0.0.2", port), ("::1", port)):
    s = socket.socket(socket.AF_INET6 if ":" in dest[0] else socket.AF_INET)
    out.append(errno.errorcode.get(s.connect_ex(dest), "ok"))
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for send in (lambda: u.sendto(b"x", ("127.0.0.1", 53)), lambda: u.sendmsg([b"x"], [], 0, ("127.0.0.1", 53))):
    try:
        send()
        out.append("sent")
    except OSError as e:
        out.append(errno.errorcode[e.errno])
try:
    socket.getaddrinfo("local.zoo.test", 443)
    out.append("resolved")
except socket.gaierror:
    out.append("no-resolution")
print(" ".join(out))
"""


def test_connectgate_asks_the_parent_for_every_connection(tmp_path):
    """connectgate.c (preloaded into testssl.sh and its children) asks the parent before every
    IP connect and datagram: here a Python child connects to the granted address and port
    (ok), to another port and other addresses (ECONNREFUSED without a SYN: the listener
    on the other port accepts nothing), sends UDP datagrams (sendto, sendmsg: EACCES) and resolves a name
    (refused: only address literals). The gate counts the grant and lists the refusals."""
    import asyncio
    import sys

    from scanners.tls_second_opinion.testssl import Gate

    srv, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    other.settimeout(0.3)
    port, oport = srv.getsockname()[1], other.getsockname()[1]

    async def grant(address: str, p: int) -> bool:
        return (address, p) == ("127.0.0.1", port)

    async def main():
        async with Gate(str(tmp_path), grant) as gate:
            p = await asyncio.create_subprocess_exec(sys.executable, "-c", _GATED_CLIENT, str(port), str(oport),
                                                     stdout=asyncio.subprocess.PIPE, env={**os.environ, **gate.env})
            out, _ = await p.communicate()
        return out.decode().split(), gate

    try:
        out, gate = asyncio.run(main())
        assert out == ["ok", "ECONNREFUSED", "ECONNREFUSED", "ECONNREFUSED", "EACCES", "EACCES", "no-resolution"], out
        assert gate.granted == 1 and sorted(gate.refused) == sorted(
            [f"tcp 127.0.0.1 {oport}", f"tcp 127.0.0.2 {port}", f"tcp ::1 {port}", "udp 127.0.0.1 53", "udp 127.0.0.1 53"]), gate.refused
        with pytest.raises(socket.timeout):
            other.accept()
    finally:
        srv.close()
        other.close()


def test_sslyze_json_parsed():
    """sslyze's JSON (sslyze 6.3.1's shape) -> verdicts (no network)."""
    from scanners.tls_second_opinion.sslyze import parse, server_string

    def doc(highest, resum, early):
        return {"server_scan_results": [{"connectivity_status": "COMPLETED",
                                         "connectivity_result": {"highest_tls_version_supported": highest},
                                         "scan_result": {"session_resumption": resum, "tls_1_3_early_data": early}}]}
    resum = {"status": "COMPLETED", "result": {
        "session_id_resumption_result": "PARTIALLY_SUPPORTED", "session_id_attempted_resumptions_count": 5,
        "session_id_successful_resumptions_count": 3, "tls_ticket_resumption_result": "NOT_SUPPORTED",
        "tls_ticket_attempted_resumptions_count": 5, "tls_ticket_successful_resumptions_count": 0}}
    early = {"status": "COMPLETED", "result": {"supports_early_data": False}}
    assert parse(doc("TLS_1_3", resum, early)) == ([("id", "1.2", True, None, 5, 3, None),
                                                     ("ticket", "1.2", False, None, 5, 0, None),
                                                     ("early-data", "1.3", None, False, 1, None, None)], None)
    rows, _ = parse(doc("TLS_1_2", resum, early))
    assert rows[2] == ("early-data", "1.3", None, None, None, None, "sslyze: no TLS 1.3 (highest TLS_1_2)")
    only13 = {"status": "COMPLETED", "result": {**resum["result"], "session_id_resumption_result":
                                                 "SERVER_IS_TLS_1_3_ONLY", "tls_ticket_resumption_result":
                                                 "SERVER_IS_TLS_1_3_ONLY"}}
    rows, _ = parse(doc("TLS_1_3", only13, {"status": "ERROR", "error_reason": "BUG_IN_SSLYZE",
                                             "error_trace": "Traceback\nValueError: x"}))
    assert [r[2] for r in rows] == [None, None, None] and "TLS 1.3 only" in rows[0][6], rows
    assert rows[2][6] == "sslyze: BUG_IN_SSLYZE: ValueError: x", rows
    assert parse({"server_scan_results": [{"connectivity_status": "ERROR", "connectivity_error_trace":
                                           {"exc_type": "ConnectionToServerFailed"}}]})[1] \
        == "sslyze: connectivity ERROR: ConnectionToServerFailed"
    assert server_string("127.0.0.1", 443, "a.test") == "a.test:443{127.0.0.1}"
    assert server_string("2001:2::1", 443, "a.test") == "a.test:443{[2001:2::1]}"
    assert server_string("2001:2::1", 443, None) == "[2001:2::1]:443"


@pytest.mark.parametrize("target", ["x.test:25{127.0.0.2}=127.0.0.1", "x.test{127.0.0.2}=127.0.0.1",
                                    "[::1]:25=127.0.0.1", "--help=127.0.0.1"])
def test_sslyze_server_string_injection_refused(db, target):
    """sslyze reads 'host:port{ip}': a name carrying ':', '{' or '[' would pick another port
    or address; refused before anything runs, as for testssl.sh."""
    r = run_cli("scan", "tls-second-opinion", "--target", target, "--client", "sslyze", dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'tls-second-opinion'").fetchone()[0] == 0


@needs_sslyze
def test_sslyze_only_against_the_testbed_and_dry_run_contacts_nothing(db, tmp_path):
    r = run_cli("scan", "tls-second-opinion", "--target", "x.test=192.0.2.1", "--client", "sslyze", dsn=db.dsn)
    assert r.returncode == 2 and "testbed" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.5)
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\n')
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "x.test=127.0.0.1", "--port",
                str(srv.getsockname()[1]), "--client", "sslyze", "--dry-run", dsn=db.dsn)
    assert r.returncode == 0 and "1 targets would be probed" in r.stdout, (r.stdout, r.stderr)
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()


@needs_sslyze
def test_sslyze_blocked_target_contacts_nothing(db, tmp_path):
    """The policy holds for sslyze as for every client: a blocklisted address is recorded as
    blocked and sslyze never starts (nothing accepted on the port)."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.5)
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.0/8"]\nblock = ["127.0.0.1/32"]\n')
    r = run_cli("--config", str(cfg), "scan", "tls-second-opinion", "--target", "x.test=127.0.0.1", "--port",
                str(srv.getsockname()[1]), "--client", "sslyze", "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()
    with db.connect() as conn:
        assert conn.execute("SELECT status FROM tls_second_opinion WHERE run_id = %s", (run_id,)).fetchall() \
            == [("blocked",)]
