"""Session-31 second adversary against this session's merges (db archive-run and run
partitions, targets streamed from the DB, tls/quic second opinions, browser track,
quic-turnover). Each test failed on the code before its fix."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import REPO, run_cli

pytestmark = [pytest.mark.timeout(300)]


def _has_roles(db) -> bool:
    with db.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN "
                            "('netsurvey_reader', 'netsurvey_writer')").fetchone()[0] == 2


def test_reader_role_cannot_create_partitions(db):
    """ensure_run_partitions() is SECURITY DEFINER (owner's rights) and PUBLIC could execute it:
    the read-only role created and attached tables in run_partitions (a write, as the owner)."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    reader = make_conninfo(db.dsn, user="netsurvey_reader")
    with psycopg.connect(reader, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")   # a role setting: the role may change it
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT ensure_run_partitions(424242)")
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE '%%\\_r424242'").fetchone()[0] == 0
    # the writer still starts runs and gets their partitions (through the trigger)
    writer = make_conninfo(db.dsn, user="netsurvey_writer")
    with psycopg.connect(writer) as conn:
        run = conn.execute("INSERT INTO scan_run (kind) VALUES ('dns-ttl') RETURNING id").fetchone()[0]
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s",
                            (f"tfo_probe_r{run}",)).fetchone()[0] == 1


def test_archive_drop_of_a_handshake_timing_run(db, tmp_path):
    """handshake_timing.run_id references scan_run without ON DELETE CASCADE."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('handshake-timing', 'finished') "
                           "RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO handshake_timing_sample (run_id, hostname, method, sample, status, connect_ms) "
                     "VALUES (%s, 'a.test', 'tcp', 1, 'ok', 1.5)", (run,))
        conn.commit()
    r = run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--format", "jsonl", "--drop",
                dsn=db.dsn)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert '"sample":1' in (tmp_path / "a" / "handshake_timing_sample.jsonl").read_text()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM handshake_timing_sample").fetchone()[0] == 0


def _only_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("case", ["below-file", "dangling-link", "link-loop", "name-too-long"])
def test_archive_run_odd_out_is_one_line_exit_2(db, tmp_path, case):
    """These were internal errors (NotADirectoryError, FileExistsError, OSError), exit 1."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        conn.commit()
    (tmp_path / "afile").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling-link")
    os.symlink("link-loop", tmp_path / "link-loop")
    out = {"below-file": tmp_path / "afile" / "sub", "dangling-link": tmp_path / "dangling-link",
           "link-loop": tmp_path / "link-loop", "name-too-long": tmp_path / "d" / ("a" * 300)}[case]
    before = sorted(os.listdir(tmp_path))
    for cmd in (["db", "archive-run", "--run", str(run), "--drop"], ["export", "--run", str(run), "--format", "csv"]):
        line = _only_line(run_cli(*cmd, "--out", str(out), dsn=db.dsn))
        assert "--out" in line and "internal error" not in line
    assert sorted(os.listdir(tmp_path)) == before and not (tmp_path / "nowhere").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1


def test_archive_drop_refuses_a_queued_run(db, tmp_path):
    """A queued run (--shards N before its first shard, a campaign between rounds) has not
    ended: --drop deleted it, and its shards/rounds still to come."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status, shards) VALUES ('tfo-lb', 'queued', 2) "
                           "RETURNING id").fetchone()[0]
        conn.commit()
    line = _only_line(run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--drop",
                              dsn=db.dsn))
    assert "queued" in line
    assert not (tmp_path / "a").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1


def test_archive_drop_never_drops_rows_committed_after_the_export(db, tmp_path):
    """A late writer (a stalled shard of a run already marked failed, a late outcome) holds an
    uncommitted row of the run while archive-run exports; it commits while the drop waits.
    The drop detached and dropped the partition with that row in it: the row was in neither
    the export nor the database."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'failed') RETURNING id").fetchone()[0]
        conn.commit()
    late = psycopg.connect(db.dsn)
    late.execute("INSERT INTO tfo_probe (run_id, round, hostname, address, port, status, probed_at) "
                 "VALUES (%s, 1, 'late.test', '198.18.3.1', 443, 'success', now())", (run,))
    e = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "db", "archive-run", "--run", str(run), "--out",
                          str(tmp_path / "a"), "--format", "csv", "--drop"], cwd=REPO, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.monotonic() + 60
        with db.connect() as watch:   # wait until the drop waits for the late writer's lock
            while time.monotonic() < deadline and p.poll() is None and not watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()[0]:
                watch.rollback()
                time.sleep(0.1)
        late.commit()
        _, err = p.communicate(timeout=60)
    finally:
        late.close()
        if p.poll() is None:
            p.kill()
    exported = (tmp_path / "a" / "tfo_probe.csv").read_text() if (tmp_path / "a" / "tfo_probe.csv").exists() else ""
    with db.connect() as conn:
        kept = conn.execute("SELECT count(*) FROM tfo_probe WHERE hostname = 'late.test'").fetchone()[0]
    assert kept == 1 or "late.test" in exported, f"the late row is lost (exit {p.returncode}, {err!r})"
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "nothing dropped" in err, err


# An aioquic server offering a preferred_address (RFC 9000 9.6) that is not the target: a
# hostile server, or one whose operator opted that address out, moves the client there.
PA_SERVER = r'''
import asyncio, os, sys
import aioquic.quic.connection as qc
from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.events import HandshakeCompleted
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicPreferredAddress

PA = []

class TP(qc.QuicTransportParameters):
    def __init__(self, **kw):
        super().__init__(**kw)
        if PA:
            self.preferred_address = PA[0]
qc.QuicTransportParameters = TP
plain = qc.QuicConnection._serialize_transport_parameters

def serialize(self):
    if self._is_client:
        return plain(self)
    if not hasattr(self, "_pa"):   # the preferred address's CID has sequence number 1 (RFC 9000 5.1.1)
        self._pa = qc.QuicConnectionId(os.urandom(8), self._host_cid_seq, os.urandom(16), True)
        self._host_cid_seq += 1
        self._host_cids.append(self._pa)
    PA[:] = [QuicPreferredAddress((sys.argv[3], int(sys.argv[2])), None, self._pa.cid, self._pa.stateless_reset_token)]
    try:
        return plain(self)
    finally:
        PA.clear()
qc.QuicConnection._serialize_transport_parameters = serialize

class Closing(QuicConnectionProtocol):   # no HTTP/3: closes 1 s after the handshake, so the client ends
    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            asyncio.get_running_loop().call_later(1, lambda: (self._quic.close(), self.transmit()))

async def main():
    cfg = QuicConfiguration(is_client=False, alpn_protocols=["h3"])
    cfg.load_cert_chain(sys.argv[4], sys.argv[5])
    await serve(sys.argv[1], int(sys.argv[2]), configuration=cfg, create_protocol=Closing)
    print("ready", flush=True)
    await asyncio.Future()
asyncio.run(main())
'''

PA_SINK = r'''
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    u.recvfrom(65535)
    print("datagram", flush=True)
'''


@pytest.mark.skipif(not Path("/usr/bin/gtlsclient").exists(), reason="ngtcp2-client not installed")
def test_quic_second_opinion_never_follows_a_preferred_address(db, tmp_path):
    """ngtcp2's client moves to a server's preferred_address by default (--no-preferred-addr
    turns it off): quic-second-opinion sent datagrams to an address that is no target."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace)")
    import time

    ns, target, other, port = "nsadv31b-q", "198.18.77.1", "198.18.77.2", 4433
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    try:
        for argv in (["link", "set", "lo", "up"], ["link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                     ["link", "set", "d0", "up"], ["link", "set", "d1", "up"],
                     ["addr", "add", f"{target}/32", "dev", "d0"], ["addr", "add", f"{other}/32", "dev", "d0"]):
            subprocess.run(["ip", "-n", ns, *argv], check=True)
        key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-subj", "/CN=pa.test", "-days", "2",
                        "-addext", "subjectAltName=DNS:pa.test"], check=True, capture_output=True)
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", PA_SERVER, target, str(port), other,
                                   str(cert), str(key)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sink = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", PA_SINK, other, str(port)],
                                stdout=subprocess.PIPE, text=True)
        procs = [server, sink]
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        assert sink.stdout.readline().strip() == "ready"
        r = run_cli("scan", "quic-second-opinion", "--target", f"pa.test={target}", "--port", str(port),
                    "--timeout", "3", "--json", dsn=db.dsn, netns=ns, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        time.sleep(1)
        sink.kill()
        datagrams = sink.stdout.read().count("datagram")
        with db.connect() as conn:   # the client did reach the target (the check is not vacuous)
            facts = {f: (v, e) for f, v, e in conn.execute("SELECT fact, value, error FROM quic_second_opinion")}
        assert facts["vn_versions"][0] and facts["new_token_count"][0] is not None, facts
        assert datagrams == 0, f"{datagrams} datagrams to {other}, which is no target"
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.parametrize("argv", [
    ["scan", "quic-second-opinion", "--target", "a.test=198.18.0.5", "--timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--client", "testssl", "--testssl-timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--client", "sslyze", "--sslyze-timeout", "inf"],
], ids=["quic-timeout-inf", "gnutls-timeout-inf", "testssl-timeout-inf", "sslyze-timeout-inf"])
def test_second_opinion_infinite_timeouts_are_bad_input(db, routes_ns, argv):
    """'inf' passed 'must be positive' (not inf > 0 is False): a dry run accepted it, and a real
    run raised OverflowError in int(timeout) for every target (the clients' own timeouts)."""
    with db.connect() as conn:
        runs = conn.execute("SELECT count(*) FROM scan_run").fetchone()[0]
    line = _only_line(run_cli(*argv, "--dry-run", dsn=db.dsn, netns=routes_ns))
    assert "timeout" in line and "finite" in line, line
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == runs


def test_ensure_run_partitions_reads_no_temp_table(db):
    """The SECURITY DEFINER function read run_partitioned unqualified with pg_temp searched
    first: a session's temporary table of that name chose, with the owner's rights, which
    tables it partitioned (an empty one: a run without partitions, whose rows then fail)."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    writer = make_conninfo(db.dsn, user="netsurvey_writer")
    with psycopg.connect(writer) as conn:
        conn.execute("CREATE TEMP TABLE run_partitioned (table_name text, time_column text)")
        conn.execute("GRANT SELECT ON run_partitioned TO netsurvey_owner")   # its own table: it may
        run = conn.execute("INSERT INTO scan_run (kind) VALUES ('dns-ttl') RETURNING id").fetchone()[0]
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s",
                            (f"tfo_probe_r{run}",)).fetchone()[0] == 1


def test_archive_run_as_writer(db, tmp_path):
    """As the writer (the workers' DSN) archive-run counted rows in run_partitions.<part>, a
    schema only the owner may use: an internal error, also without --drop. Now it archives;
    --drop (the owner's: DETACH/DROP) is refused up front, one line, nothing written, and no
    password in the message."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        conn.commit()
    writer = make_conninfo(db.dsn, user="netsurvey_writer", password="s3cr3tpw")
    line = _only_line(run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "d"), "--drop",
                              "--format", "csv", dsn=writer))
    assert "--drop" in line and "s3cr3tpw" not in line and not (tmp_path / "d").exists()
    r = run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--format", "csv", "--json",
                dsn=writer)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "manifest.json").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1


def test_archive_drop_does_not_stall_a_running_scan(db, tmp_path):
    """A shard writes all its rows in one transaction. archive-run --drop of an old run
    waited for it (DROP TABLE of a detached partition takes ACCESS EXCLUSIVE on scan_run, for
    its foreign key's triggers, and the shard's rows hold a key-share lock there), and while
    it waited nobody could read scan_run or start a run (`netsurvey runs`, every new scan)
    until the shard ended (here: for ever). Now the drop gives up after --lock-timeout-s,
    nothing dropped, one line, and the others go on."""
    import time

    with db.connect() as conn:
        old = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        live = conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
        conn.commit()
    shard = psycopg.connect(db.dsn)   # the running scan's open transaction
    shard.execute("INSERT INTO tfo_probe (run_id, round, hostname, address, port, status, probed_at) "
                  "VALUES (%s, 1, 'live.test', '198.18.3.1', 443, 'success', now())", (live,))
    e = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "db", "archive-run", "--run", str(old), "--out",
                          str(tmp_path / "a"), "--format", "csv", "--drop", "--lock-timeout-s", "3"], cwd=REPO, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        with db.connect() as watch:   # until the drop waits for the shard's lock on tfo_probe
            while time.monotonic() < deadline and p.poll() is None and not watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()[0]:
                watch.rollback()
                time.sleep(0.1)
        with psycopg.connect(db.dsn) as other:   # `netsurvey runs`, then a new scan, meanwhile
            other.execute("SET statement_timeout = '20s'")
            t0 = time.monotonic()
            try:
                other.execute("SELECT count(*) FROM scan_run").fetchone()
                other.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb')")
            except psycopg.errors.QueryCanceled:
                pass
            waited_s = time.monotonic() - t0
            other.rollback()
        assert waited_s < 10, f"reading scan_run and starting a run waited {waited_s:.0f} s behind the drop"
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shard.rollback()
        shard.close()
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "nothing dropped" in err, err
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (old,)).fetchone()[0] == 1


def test_connect_gate_library_planted_by_another_user_is_not_preloaded(tmp_path, monkeypatch):
    """gate_library() returned any existing <cache>/netsurvey/connectgate-<tag>.so: with the
    cache in a shared directory another local user could plant the library that root then
    LD_PRELOADs into testssl.sh and every process it starts."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a file of another user)")
    sys.path.insert(0, str(REPO))
    from scanners.tls_second_opinion import testssl

    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o1777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    import hashlib
    tag = hashlib.sha256(testssl.GATE_SOURCE.read_bytes()).hexdigest()[:12]
    (cache / "netsurvey").mkdir()
    (cache / "netsurvey").chmod(0o777)
    planted = cache / "netsurvey" / f"connectgate-{tag}.so"
    planted.write_bytes(b"not the gate")
    os.chown(planted, 65534, 65534)
    lib = testssl.gate_library()
    assert lib.read_bytes() != b"not the gate"
    st = lib.stat()
    assert st.st_uid == os.geteuid() and not st.st_mode & 0o022
    parent = lib.parent.stat()
    assert parent.st_uid == os.geteuid() and not parent.st_mode & 0o022
