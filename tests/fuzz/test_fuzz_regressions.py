"""Fuzz regressions (issue 12): every corpus input still passes its target's contract, and
every crash the fuzzer found is pinned here with its input file (fuzz/crashes/<target>/).

Findings in other engineers' code are reported to the lead and marked strict-xfail: the
test turns red (XPASS) once the owner fixes the bug - then drop the entry from
fuzz/targets.py KNOWN_FINDINGS and the xfail mark.
"""
from __future__ import annotations

import sys
import time

import pytest

from fuzz.targets import CORPUS_DIR, CRASH_DIR, KNOWN_FINDINGS, TARGETS, available, finding_key, guarded
from tests.conftest import run_cli


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_corpus_replays_clean(name):
    t = TARGETS[name]
    if not available(t):
        pytest.skip(f"{t.module} not importable")
    files = sorted((CORPUS_DIR / name).glob("*"))
    assert any(f.name.startswith("seed-") for f in files), "seeds missing: python3 -m fuzz.seed"
    run = guarded(name)
    t0 = time.monotonic()
    for f in files:
        if time.monotonic() - t0 > 20:
            break
        run(f.read_bytes())


CRASHES = sorted((d.name, f.name) for d in CRASH_DIR.iterdir() if d.is_dir() for f in d.iterdir())


@pytest.mark.parametrize("name,crash", CRASHES)
def test_crash_input_is_handled(name, crash):
    """Each crash input must pass the strict contract. Known (reported) findings xfail."""
    data = (CRASH_DIR / name / crash).read_bytes()
    try:
        TARGETS[name].func(data)
    except Exception as exc:  # noqa: BLE001
        key = finding_key(name, exc)
        if key in KNOWN_FINDINGS:
            pytest.xfail(f"reported, unfixed: {key}")
        raise


def test_known_findings_each_have_a_crash_input():
    """Every finding listed as known is reproduced by at least one stored input."""
    seen = set()
    for name, crash in CRASHES:
        try:
            TARGETS[name].func((CRASH_DIR / name / crash).read_bytes())
        except Exception as exc:  # noqa: BLE001
            seen.add(finding_key(name, exc)[:2])
    known = {(t, e) for t, e, _ in KNOWN_FINDINGS}
    assert known <= seen, known - seen   # each known finding still reproduces
    assert seen <= known, seen - known   # no other (e.g. a fixed) finding does


def test_hostile_byte_builders_are_what_the_docs_say():
    """The hostile servers' bytes parse to the documented breakage (independent parsers)."""
    import dns.exception
    import dns.message

    from testbed import hostile

    for mode in ("loop", "forward", "self", "trunc"):
        r = hostile.dns_reply(dns.message.make_query(f"{mode}.x.test", "A").to_wire())
        with pytest.raises(dns.exception.DNSException):
            dns.message.from_wire(r)
    q = dns.message.make_query("wrongid.x.test", "A").to_wire()
    wrong = hostile.dns_reply(q)
    assert int.from_bytes(wrong[:2], "big") == (int.from_bytes(q[:2], "big") + 1) & 0xFFFF
    assert dns.message.from_wire(wrong).answer  # otherwise well-formed
    flight = hostile.badticket_flight(b"")
    from scanners.tls import wire
    recs, rest = wire.split_records(flight)
    assert rest == b"" and [r.content_type for r in recs] == [22, 22]
    msgs = list(wire.handshake_messages(recs[1].payload))
    assert msgs[0][0] == 4 and int.from_bytes(msgs[0][1][4:6], "big") == hostile.BADTICKET_CLAIMED_LEN
    assert len(msgs[0][1]) == 6 + hostile.BADTICKET_SENT_LEN
    from scanners.quic.vn import parse_version_negotiation
    vn = hostile.quicbad_replies(b"")
    assert all(parse_version_negotiation(p, b"", b"") is None for p in vn)


@pytest.mark.parametrize("content,expect", [
    (b'[etiquette]\nallow = ["198.18.0.0/15"\n', "not valid TOML"),
    (b'[etiquette]\nrate_pps = "fast"\n', "etiquette.rate_pps"),
    (b'[etiquette]\nallow = ["not-a-net"]\n', "etiquette.allow"),
    (b'[nonsense]\nx = 1\n', "nonsense"),
])
def test_bad_config_gives_one_line_naming_file_and_field(tmp_path, content, expect):
    f = tmp_path / "survey.toml"
    f.write_bytes(content)
    p = run_cli("--config", str(f), "targets", "list")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(f) in lines[0] and expect in lines[0], p.stderr


def test_non_utf8_config_gives_one_line(tmp_path):
    f = tmp_path / "survey.toml"
    f.write_bytes(b'[etiquette]\nallow = ["\xff"]\n')
    p = run_cli("--config", str(f), "targets", "list")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and str(f) in p.stderr, p.stderr


def test_bad_target_list_names_lines_and_writes_nothing(db, tmp_path):
    f = tmp_path / "list.csv"
    f.write_text("1,ok.test\nbanana\n3,bad name.test\n")
    p = run_cli("targets", "import", str(f), "--list", "bad", dsn=db.dsn)
    assert p.returncode == 2, p.stdout + p.stderr
    assert str(f) in p.stderr and ":2" in p.stderr, p.stderr
    import psycopg
    with psycopg.connect(db.dsn) as c:
        assert c.execute("SELECT count(*) FROM target").fetchone()[0] == 0


@pytest.mark.parametrize("args,expect", [
    (["scan", "tls", "--target", "x.test", "--tls", "1.7"], "--tls"),
    (["scan", "tfo", "--cidr", "not-a-net"], "cidr"),
    (["scan", "dns-ttl", "--name", "x.test", "--types", "MX,BOGUS"], "types"),
])
def test_bad_cli_values_exit_2_with_one_line(db, args, expect):
    p = run_cli(*args, dsn=db.dsn)
    assert p.returncode == 2, p.stdout + p.stderr
    assert expect in p.stderr.lower(), p.stderr


def test_malformed_zgrab_file_gives_one_line(db, tmp_path):
    f = tmp_path / "zgrab.json"
    f.write_text('{"ip": "198.18.2.13"}\nnot json\n')
    p = run_cli("scan", "tls-zgrab", "--ingest", str(f), dsn=db.dsn)
    assert p.returncode == 2 and str(f) in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_zgrab_uint32_lifetime_hint_is_stored_whole(db, tmp_path):
    """zgrab2 writes session_ticket.lifetime_hint as uint32 (RFC 5077 3.3): 2^32-1 is a valid
    hint and lands in tls_handshake.ticket_lifetime unchanged; 2^32 is a bad line."""
    import base64
    import json

    import psycopg

    def line(hint):
        hl = {"server_hello": {"version": {"name": "TLSv1.2"}, "cipher_suite": {"name": "TLS_AES"}},
              "session_ticket": {"value": base64.b64encode(bytes(range(64))).decode(), "lifetime_hint": hint}}
        return json.dumps({"ip": "198.18.2.13", "domain": "www.example.test",
                           "data": {"tls": {"status": "success", "result": {"handshake_log": hl}}}})

    f = tmp_path / "zgrab.json"
    f.write_text(line(2**32 - 1) + "\n")
    p = run_cli("scan", "tls-zgrab", "--ingest", str(f), dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    with psycopg.connect(db.dsn) as c:
        assert c.execute("SELECT ticket_lifetime FROM tls_handshake").fetchall() == [(2**32 - 1,)]
        assert c.execute("SELECT lifetime_s FROM tls_lifetime_hint_v").fetchall() == [(2**32 - 1,)]
    f.write_text(line(2**32) + "\n")
    p = run_cli("scan", "tls-zgrab", "--ingest", str(f), dsn=db.dsn)
    assert p.returncode == 2 and "out of range" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_zgrab_ingest_reads_stdin(db):
    """issue 22: `--ingest -` reads the zgrab2 JSON lines from standard input."""
    import os
    import subprocess

    from conftest import REPO

    line = '{"ip": "198.18.2.13", "domain": "www.example.test", "data": {"tls": {"status": "success"}}}\n'
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", "scan", "tls-zgrab", "--ingest", "-", "--json"],
                       input=line, env={**os.environ, "NETSURVEY_DSN": db.dsn, "PYTHONPATH": str(REPO)}, cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert '"ingested": 1' in p.stdout, p.stdout
