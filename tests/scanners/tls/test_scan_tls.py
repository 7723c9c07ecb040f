"""scanners/tls against the testbed's nginx hosts: every expectation comes from the
testbed's ground truth (config/testbed.toml via `testbed status`)."""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import time

import pytest

from conftest import REPO, needs_root, run_cli
from scanners.tls.shared import components
from scanners.tls.wire import parse_new_session_ticket, ticket_format

pytestmark = pytest.mark.timeout(240)


def scan(db, *args, timeout=180):
    """`netsurvey scan ...` inside the vantage namespace; returns the --json summary."""
    p = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", *args,
                "--json", dsn=db.dsn, timeout=timeout)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def q(db, sql, *params):
    with db.connect() as conn:
        return conn.execute(sql, params).fetchall()


def tls_hosts(testbed):
    return {h["hostname"]: h for h in testbed.status()["ground_truth"]["tls_hosts"]}


def import_hosts(db, tmp_path, names):
    f = tmp_path / "tls.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
    p = run_cli("targets", "import", str(f), "--list", "tb", dsn=db.dsn)
    assert p.returncode == 0, p.stderr


def announced(h: dict, version: str) -> int:
    """The lifetime a host announces: nginx's ssl_session_timeout, for TLS 1.3 at most 7 days
    (RFC 8446 4.6.1: "Servers MUST NOT use any value greater than 604800 seconds"; OpenSSL
    caps it, ssl/statem/statem_srvr.c tls_construct_new_session_ticket: ONE_WEEK_SEC)."""
    return min(h["session_timeout"], 604800) if version == "1.3" else h["session_timeout"]


def expected_sans(hosts, h):
    """nginx serves one certificate per share group (covering every member's names)."""
    g = hosts[h]["share_group"]
    if not g:
        return sorted(hosts[h]["sans"] or [h])
    members = [m for m in hosts.values() if m["share_group"] == g]
    return sorted({n for m in members for n in [*(m["sans"] or [m["hostname"]]), m["hostname"]]})


# ------------------------------------------------------------------ no testbed needed

def test_tls13_ticket_parsing_and_formats():
    ticket = bytes(range(16)) + bytes(16) + bytes(48) + bytes(32)           # OpenSSL layout
    ext = struct.pack(">HHI", 42, 4, 16384)
    body = struct.pack(">II", 7200, 99) + b"\x01\x00" + struct.pack(">H", len(ticket)) + ticket \
        + struct.pack(">H", len(ext)) + ext
    t = parse_new_session_ticket(body, tls13=True)
    assert (t.lifetime, t.age_add, t.nonce, t.ticket, t.max_early_data) == (7200, 99, b"\x00", ticket, 16384)
    assert ticket_format(ticket) == "rfc5077-openssl"
    state = bytes(40)
    assert ticket_format(bytes(32) + struct.pack(">H", 40) + state + bytes(32)) == "rfc5077"
    assert ticket_format(bytes(32)) == "opaque"
    with pytest.raises(ValueError):
        parse_new_session_ticket(body[:20], tls13=True)


def test_components():
    assert components("abcde", [("a", "b"), ("c", "b"), ("d", "e")]) == [["a", "b", "c"], ["d", "e"]]
    assert components("abc", []) == [["a"], ["b"], ["c"]]


def test_timeout_and_reset_are_classified(tmp_path):
    """Real loopback servers: one stays silent (io-timeout), one resets (connection-closed)."""
    from scanners.tls.engine import handshake, make_context

    async def main():
        async def silent(r, w):
            await asyncio.sleep(3)
            w.close()

        async def reset(r, w):
            await r.read(10)
            s = w.get_extra_info("socket")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()

        s1 = await asyncio.start_server(silent, "127.0.0.1", 0)
        s2 = await asyncio.start_server(reset, "127.0.0.1", 0)
        ctx = make_context("1.2", verify=False)
        a = await handshake("127.0.0.1", s1.sockets[0].getsockname()[1], "x.test", ctx, timeout=0.5)
        b = await handshake("127.0.0.1", s2.sockets[0].getsockname()[1], "x.test", ctx, timeout=2)
        s1.close()
        s2.close()
        return a, b

    a, b = asyncio.run(main())
    assert (a.status.value, a.error) == ("io-timeout", "timeout")
    assert (b.status.value, b.error) == ("connection-closed", "reset")


def test_bad_input_is_one_line_exit_2(db):
    for args in (["scan", "tls", "--target", "a.test", "--tls", "1.4"],
                 ["scan", "tls"],
                 ["scan", "tls", "--target", "a.test", "--tls13-request", "POST"],
                 ["scan", "tls-lifetime", "--target", "a.test", "--max-age", "5", "--step", "10"],
                 ["scan", "tls-shared", "--target", "a.test", "--family", "5"],
                 ["scan", "tls-shared", "--target", "a.test=198.18.2.20", "--merge", "999999"],   # no such run
                 ["scan", "tls-shared", "--target", "a.test=198.18.2.20", "--merge", "-1"]):
        p = run_cli(*args, dsn=db.dsn)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert q(db, "SELECT count(*) FROM scan_run")[0][0] == 0


# ------------------------------------------------------------------ against the testbed

@needs_root()
def test_survey_matches_ground_truth(db, testbed, tmp_path):
    hosts = tls_hosts(testbed)
    import_hosts(db, tmp_path, [*hosts, "missing.example.test"])
    before = testbed.status()["ground_truth"]["ticket_key_groups"]
    out = scan(db, "tls", "--list", "tb")
    after = testbed.status()["ground_truth"]["ticket_key_groups"]
    rows = q(db, """SELECT hostname, host(address), version, status, error, session_id_len, ticket_count,
                           ticket_lifetime, encode(key_name, 'hex'), ticket_format, ticket_len, id_resumed,
                           ticket_resumed, cert_sans FROM tls_handshake WHERE run_id = %s""", out["run_id"])
    seen = {(r[0], r[1], r[2]): r for r in rows}
    for name, h in hosts.items():
        for addr in h["addresses"]:
            for v in ("1.2", "1.3"):
                r = seen[(name, addr, v)]
                if v not in h["versions"]:
                    assert (r[3], r[4]) == ("application-error", "tls-alert:protocol_version"), r
                    continue
                assert r[3] == "success", r
                assert sorted(r[13]) == expected_sans(hosts, name), r
                if v == "1.2":
                    assert (r[5] > 0) == h["session_ids"], r          # ServerHello session ID
                    assert r[11] is h["session_ids"], r               # ID resumption
                if not h["tickets"]:
                    if v == "1.2":
                        assert r[6] == 0, r
                    else:                                              # stateful TLS 1.3 tickets
                        assert (r[9], r[10], r[8], r[7]) == ("opaque", 32, None, announced(h, v)), r
                    continue
                assert r[7] == announced(h, v), r                      # hint / ticket_lifetime exact
                assert r[6] == (1 if v == "1.2" else 2), r
                assert r[12] is True, r
                g = h["key_group"]
                if before[g]["epoch"] == after[g]["epoch"]:
                    assert r[8] == after[g]["current_key_name"], r
                else:
                    assert r[8] in (before[g]["current_key_name"], after[g]["current_key_name"]), r
    miss = [r for r in rows if r[0] == "missing.example.test"]
    assert {(r[3], r[4]) for r in miss} == {("resolution-failed", "nxdomain")}

    # figures from this run
    outdir = tmp_path / "fig"
    for name in ("tls-support", "tls-lifetime-hint", "tls-lifetime-hint-tail", "tls-key-rotation"):
        p = run_cli("plot", name, "--out", str(outdir), dsn=db.dsn)
        assert p.returncode == 0, p.stderr
        assert (outdir / f"{name}.csv").exists()
    support = (outdir / "tls-support.csv").read_text().splitlines()
    n12 = sum(1 for h in hosts.values() if "1.2" in h["versions"])
    ids12 = sum(1 for h in hosts.values() if "1.2" in h["versions"] and h["session_ids"])
    tk12 = sum(1 for h in hosts.values() if "1.2" in h["versions"] and h["tickets"])
    assert support[1].split(",")[:4] == ["1.2", str(n12), str(ids12), str(tk12)]


@needs_root()
def test_failures_recorded_with_reasons(db, testbed):
    gt = testbed.status()["ground_truth"]
    plain = next(h for h in gt["tfo_hosts"] if h["hostname"] == "on1.tfo.test")["addresses"][0]
    a = tls_hosts(testbed)["a.test"]["addresses"][0]
    out = scan(db, "tls", "--tls", "1.2", "--no-ipv6", "--timeout", "2",
               "--target", f"on1.tfo.test={plain}",           # plain TCP on 443
               "--target", f"wrong.test={a}")                 # a.test's certificate for another name
    rows = dict(q(db, "SELECT hostname, status || ' ' || coalesce(error, '') FROM tls_handshake WHERE run_id = %s",
                  out["run_id"]))
    assert rows["on1.tfo.test"] == "protocol-error not-tls"
    # issue 22: a certificate that fails verification is recorded, and the host measured anyway
    [(status, err, verified, cert_error, sid_len)] = q(
        db, "SELECT status, error, cert_verified, cert_error, session_id_len FROM tls_handshake "
            "WHERE run_id = %s AND hostname = 'wrong.test'", out["run_id"])
    assert (status, err, verified) == ("success", None, False) and sid_len is not None
    assert "mismatch" in cert_error.lower(), cert_error
    assert q(db, "SELECT cert_verified FROM tls_handshake WHERE run_id = %s AND hostname = 'on1.tfo.test'",
             out["run_id"]) == [(None,)]
    out = scan(db, "tls", "--tls", "1.3", "--port", "8443", "--target", f"a.test={a}")
    assert q(db, "SELECT status, error FROM tls_handshake WHERE run_id = %s", out["run_id"]) == \
        [("connection-refused", "refused")]


@needs_root()
def test_key_rotation_period_recovered(db, testbed):
    """rotate.example.test's group rotates every R s; scanning every 2 s recovers R within 2 s."""
    hosts = tls_hosts(testbed)
    h = hosts["rotate.example.test"]
    period = next(g["rotation_s"] for n, g in testbed.status()["ground_truth"]["ticket_key_groups"].items()
                  if n == h["key_group"])
    interval = 2.0
    rounds = int(2.4 * period / interval) + 1
    scan(db, "tls", "--target", f"rotate.example.test={h['addresses'][0]}", "--tls", "1.2",
         "--no-check-resumption", "--repeat", str(rounds), "--interval", str(interval), timeout=rounds * 4 + 30)
    spans = q(db, """SELECT extract(epoch FROM first_seen), encode(key_name, 'hex')
                     FROM tls_key_name_span_v ORDER BY first_seen""")
    assert len(spans) >= 3
    starts = [s for s, _ in spans]
    diffs = [b - a for a, b in zip(starts[1:], starts[2:])]   # first key_name's start unknown
    assert diffs and all(abs(d - period) <= interval for d in diffs), diffs
    assert len({k for _, k in spans}) == len(spans)


@needs_root()
def test_lifetime_within_one_step(db, testbed):
    hosts = tls_hosts(testbed)
    h = hosts["short.example.test"]
    step = 2
    t0 = time.monotonic()
    out = scan(db, "tls-lifetime", "--target", "short.example.test", "--target",
               f"noid.example.test={hosts['noid.example.test']['addresses'][0]}",
               "--target", f"noticket.example.test={hosts['noticket.example.test']['addresses'][0]}",
               "--max-age", str(h["session_timeout"] + 2 * step), "--step", str(step), "--tls", "1.2,1.3")
    assert time.monotonic() - t0 < 60
    rows = q(db, """SELECT hostname, mechanism, version, max_resumed_age_s, min_failed_age_s
                    FROM tls_lifetime_measured_v WHERE run_id = %s""", out["run_id"])
    short = [r for r in rows if r[0] == "short.example.test"]
    assert {(r[1], r[2]) for r in short} == {("id", "1.2"), ("ticket", "1.2"), ("ticket", "1.3")}
    for r in short:
        assert abs(r[3] - h["session_timeout"]) <= step, r
        # attempts start a few ms after their nominal age k*step
        assert r[4] is not None and r[4] - h["session_timeout"] <= step + 0.5, r
    # disabled mechanisms are reported as not offered, never as a lifetime
    na = set(q(db, "SELECT origin_host, mechanism, version FROM tls_resumption WHERE run_id = %s "
                   "AND error = 'not-offered'", out["run_id"]))
    assert ("noid.example.test", "id", "1.2") in na
    assert ("noticket.example.test", "ticket", "1.2") in na
    assert not [r for r in rows if r[0] == "noid.example.test" and r[1] == "id" and r[3] is not None]


@needs_root()
def test_shared_groups_exactly_configured(db, testbed, tmp_path):
    hosts = tls_hosts(testbed)
    import_hosts(db, tmp_path, list(hosts))
    configured = {}
    for h in hosts.values():
        if h["share_group"]:
            configured.setdefault(h["share_group"], set()).add(h["hostname"])
    want = sorted(sorted(g) for g in configured.values())

    def groups(run_id, kind):
        return sorted(sorted(m) for (m,) in q(db, "SELECT members FROM tls_shared_group_size_v WHERE run_id = %s "
                                              "AND kind = %s AND size > 1", run_id, kind))

    out = scan(db, "tls-shared", "--list", "tb")
    assert groups(out["run_id"], "resumption") == want
    san_edges = [(a, b) for a in hosts for b in hosts if a != b and b in expected_sans(hosts, a)]
    want_san = [g for g in components(list(hosts), san_edges) if len(g) > 1]
    assert groups(out["run_id"], "san") == sorted(want_san)
    union = [g for g in components(list(hosts), san_edges + [(a, b) for g in configured.values()
                                                             for a in g for b in g if a != b]) if len(g) > 1]
    assert groups(out["run_id"], "union") == sorted(union)

    # IPv6, sharded by the run path over two processes (each its share of the origins, each
    # against every host; no groups in the sharded run), then merged
    sharded = scan(db, "tls-shared", "--list", "tb", "--family", "6", "--procs", "2")
    r = sharded["run_id"]
    assert sharded["status"] == "finished", sharded
    assert q(db, "SELECT count(*) FROM tls_resumption WHERE run_id = %s AND family(address) <> 6", r) == [(0,)]
    # the shards' origins together are the hosts, each counted once
    assert sharded["counts"]["origins"] == sharded["counts"]["hosts"] > 0, sharded
    assert q(db, "SELECT count(*) FROM tls_shared_group WHERE run_id = %s", r) == [(0,)]
    m = scan(db, "tls-shared", "--list", "tb", "--family", "6", "--merge", str(r))
    assert groups(m["run_id"], "resumption") == want
    outdir = tmp_path / "fig"
    for name in ("tls-shared-groups", "tls-shared-table"):
        p = run_cli("plot", name, "--out", str(outdir), dsn=db.dsn)
        assert p.returncode == 0, p.stderr
    table = (outdir / "tls-shared-table.csv").read_text()
    assert "resumption,%d," % len(want) in table


@needs_root()
def test_zgrab2_bulk_mode_ingested(db, testbed):
    from netsurvey.gotools import find_tool

    if find_tool("zgrab2") is None:   # the pinned build (tools/go), ~1 min cold, cached after
        import subprocess

        subprocess.run(["bash", str(REPO / "scripts" / "build_go_tools.sh"),
                        "zgrab2"], check=True, capture_output=True, timeout=900)
    hosts = tls_hosts(testbed)
    h = hosts["www.example.test"]
    out = scan(db, "tls-zgrab", "--target", "www.example.test")
    rows = q(db, "SELECT host(address), status, ticket_lifetime, encode(key_name, 'hex'), source FROM tls_handshake "
                 "WHERE run_id = %s ORDER BY 1", out["run_id"])
    key = testbed.status()["ground_truth"]["ticket_key_groups"][h["key_group"]]["current_key_name"]
    assert rows == sorted((a, "success", h["session_timeout"], key, "zgrab2") for a in h["addresses"])


def test_the_contact_string_reaches_the_server(db, testbed, tmp_path):
    """issue 22: etiquette.contact goes into the User-Agent of the HEAD the TLS survey sends
    (TLS 1.3, to read the tickets); checked in nginx's own access log."""
    import secrets

    marker = f"contact-{secrets.token_hex(6)}"
    cfg = tmp_path / "survey.toml"
    cfg.write_text(f'[etiquette]\ncontact = "research scan {marker}"\n')
    host = next(h for h in tls_hosts(testbed) if h.startswith("www."))
    p = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "--config", str(cfg),
                "scan", "tls", "--target", host, "--tls", "1.3", "--json", dsn=db.dsn, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    from testbed.manager import state_dir

    log = state_dir() / "nginx" / "logs" / "access.log"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if marker in ln] if log.exists() else []
    assert lines and all("HEAD / HTTP/1.1" in ln and f"(+research scan {marker})" in ln for ln in lines), lines


def test_key_logs_of_killed_scanners_are_swept(tmp_path):
    """A scanner killed by SIGKILL never closes its key log (TLS secrets, mode 0600): the
    next KeyLog removes files of dead processes, keeps those of live ones (issue 20
    adversary)."""
    import os
    import subprocess

    from scanners.tls.tls13 import KEYLOG_PREFIX, _sweep_stale_keylogs

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{KEYLOG_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{KEYLOG_PREFIX}{os.getpid()}-def"
    old_unnamed = tmp_path / f"{KEYLOG_PREFIX}x8k2"
    new_unnamed = tmp_path / f"{KEYLOG_PREFIX}y9q1"
    for p in (stale, live, old_unnamed, new_unnamed):
        p.write_text("CLIENT_RANDOM x y\n")
    os.utime(old_unnamed, (0, 0))
    assert _sweep_stale_keylogs(str(tmp_path)) == 2
    assert not stale.exists() and not old_unnamed.exists() and live.exists() and new_unnamed.exists()


def test_key_log_sweep_leaves_links_alone(tmp_path):
    """Only our own plain files are swept: a symlink (or hard link) another user put in /tmp
    under a dead pid's key log name, pointing at a file of ours, stays (stat() followed it
    and the root scanner unlinked the other user's link)."""
    import os
    import subprocess

    from scanners.tls.tls13 import KEYLOG_PREFIX, _sweep_stale_keylogs

    dead = subprocess.Popen(["true"])
    dead.wait()
    ours = tmp_path / "ours"
    ours.write_text("x\n")
    sym = tmp_path / f"{KEYLOG_PREFIX}{dead.pid}-sym"
    sym.symlink_to(ours)
    hard = tmp_path / f"{KEYLOG_PREFIX}{dead.pid}-hard"
    os.link(ours, hard)
    (tmp_path / f"{KEYLOG_PREFIX}{dead.pid}-dir").mkdir()
    assert _sweep_stale_keylogs(str(tmp_path)) == 0
    assert sym.is_symlink() and hard.exists() and ours.exists()
