"""The QUIC zoo (issue 24): netsurvey's QUIC scanners against quic-go's example server and
ngtcp2's server with their stock defaults (testbed/zoo_quic.py), each ground-truth fact
(testbed/zoo_quic_facts.py, cited from the implementations' sources) recovered; and the
kernel's TFO primary/backup key pair, checked with the kernel's own counters."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli
from support.sniffing import SNIFFER

pytestmark = needs_root()


@pytest.fixture(scope="module")
def zoo():
    os.environ["NETSURVEY_TESTBED_KEEP"] = "1"
    from testbed import zoo_quic

    st = zoo_quic.up(log=lambda *_: None)
    missing = [k for k in ("quicgo", "ngtcp2") if not st["hosts"][k]["installed"]]
    if missing:
        pytest.skip(f"QUIC zoo servers not installed: {missing} (scripts/install.sh)")
    return st


def _scan(db, *args, timeout=120):
    r = run_cli("testbed", "zoo-quic", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan",
                *args, "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _rows(db, sql, *params):
    with db.connect() as conn:
        cur = conn.execute(sql, params)
        cols = [d.name for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def _targets(zoo, label, port=443):
    h = zoo["hosts"][label]
    v4, v6 = h["addresses"]
    return [f"--target={h['hostname']}@{v4}:{port}", f"--target={h['hostname']}@[{v6}]:{port}"]


def _reserved(v: int) -> bool:
    return v & 0x0F0F0F0F == 0x0A0A0A0A


def test_version_negotiation(db, zoo):
    res = _scan(db, "quic-discover", *_targets(zoo, "quicgo"), *_targets(zoo, "ngtcp2"), "--timeout=2s")
    rows = _rows(db, "SELECT * FROM quic_discovery WHERE run_id = %s", res["run_id"])
    assert len(rows) == 4
    for r in rows:
        label = r["hostname"].split(".")[0]
        f = zoo["hosts"][label]["facts"]["vn_versions"]
        assert r["vn_answer"] == "version-negotiation", r
        got = [v for v in r["vn_versions"]]
        assert [v for v in got if not _reserved(v)] == f["value"], (label, [hex(v) for v in got])
        assert sum(_reserved(v) for v in got) == f["greased_extra"], (label, [hex(v) for v in got])


def _label(hostname: str) -> str:
    return hostname.split(".")[0]


def test_handshake_tokens_tickets_0rtt(db, zoo):
    """One fresh + one resume connection per address (scan quic): Retry, NEW_TOKEN (count,
    layout), tickets (count, lifetime, max_early_data), resumption and 0-RTT."""
    rt_port = zoo["hosts"]["ngtcp2"]["validate_addr_real_clock_port"]
    res = _scan(db, "quic", *_targets(zoo, "quicgo"), *_targets(zoo, "ngtcp2"), *_targets(zoo, "ngtcp2", rt_port),
                "--timeout=3s")
    conns = _rows(db, "SELECT * FROM quic_connection WHERE run_id = %s ORDER BY conn_id", res["run_id"])
    # ngtcp2 --validate-addr: Retry without a token; the NEW_TOKEN token of the first
    # connection is accepted on the second (no Retry)
    va = [c for c in conns if c["port"] == rt_port]
    f = zoo["hosts"]["ngtcp2"]["facts"]
    assert len(va) == 4 and all(c["status"] == "success" for c in va), va
    for c in va:
        assert c["retry"] is (f["retry_with_validate_addr"]["value"] if c["purpose"] == "fresh" else False), c
        assert c["purpose"] == "fresh" or c["presented_token_len"] == f["token_format"]["token_len_bytes"], c
    conns = [c for c in conns if c["port"] != rt_port]
    toks = _rows(db, "SELECT * FROM quic_token WHERE run_id = %s", res["run_id"])
    tiks = _rows(db, "SELECT t.*, c.purpose FROM quic_ticket t JOIN quic_connection c USING (run_id, conn_id) "
                     "WHERE run_id = %s", res["run_id"])
    assert len(conns) == 8 and all(c["status"] == "success" for c in conns), conns
    zero_rtt: dict[str, list[bool]] = {}
    for c in conns:
        f = zoo["hosts"][_label(c["hostname"])]["facts"]
        assert c["version"] == 1 and c["alpn"] == "h3"
        assert c["retry"] is f["retry"]["value"], c
        assert c["n_tokens"] == f["new_token"]["count_per_connection"], c
        assert c["n_tickets"] == f["tickets"]["count_per_connection"], c
        if c["purpose"] == "resume":
            assert c["presented_ticket_conn_id"] is not None and c["presented_token_conn_id"] is not None
            assert c["session_resumed"] is f["resumption"]["value"], c
            assert c["early_data_sent"] is (f["ticket_max_early_data"]["value"] is not None), c
            zero_rtt.setdefault(_label(c["hostname"]), []).append(c["early_data_accepted"])
    # quic-go: never (no early_data in its tickets). ngtcp2: yes, but GnuTLS's anti-replay
    # window refuses a ticket issued before its latest rollover (NGTCP2_FACTS zero_rtt): of
    # the two resumptions one may be refused, never both
    assert zero_rtt["quicgo"] == [False, False]
    assert any(zero_rtt["ngtcp2"]), zero_rtt
    for t in toks:
        f = zoo["hosts"][_label(t["hostname"])]["facts"]["token_format"]
        if f["value"] == "quic-go" and t["token_format"] in ("ngtcp2", "ngtcp2-retry"):
            # the documented ambiguity (scanners/quic/tokens.py): quic-go's first byte is random,
            # 1 in 256 tokens starts with ngtcp2's magic (0x36 / 0xb6) at a length ngtcp2 uses
            # too; a CI rehearsal drew one. Anything else is a misreading.
            assert bytes(t["token"])[0] in (0x36, 0xB6), t
            continue
        assert (t["token_format"], t["key_id_len"]) == (f["value"], f["key_id_len"]), t
        if "token_len_bytes" in f:
            assert t["token_len"] == f["token_len_bytes"]
    for t in tiks:
        f = zoo["hosts"][_label(t["hostname"])]["facts"]
        life = f["ticket_lifetime_s"]
        if t["purpose"] == "resume" and life.get("resumed_counts_down"):
            # GnuTLS counts a resumed session's ticket lifetime down from the first handshake
            # (whole seconds, ~1-3 s earlier here)
            assert life["value"] - 5 <= t["lifetime_s"] <= life["value"], t
        else:
            assert t["lifetime_s"] == life["value"], t
        assert t["max_early_data"] == f["ticket_max_early_data"]["value"], t


@pytest.mark.slow
def test_ngtcp2_token_lifetime_and_reuse(db, zoo):
    """ngtcp2 with --validate-addr under a 200x wall clock (testbed/zoo_quic.py): quic-turnover
    sees Retry on every fresh connection, tokens - each presented at one age only, never
    presented before - accepted until they are 3600 s (server clock) = 18 s old, one token
    accepted again when presented a second time (not single-use; tickets neither), ngtcp2's
    token layout (no key id, so no key prefix), and ticket lifetime and early-data size as on
    the stock instance. ~45 s: slow (make test has Retry and token acceptance in
    test_handshake_tokens_tickets_0rtt)."""
    h = zoo["hosts"]["ngtcp2"]
    f = h["facts"]
    life_s = h["validate_addr_token_lifetime_real_s"]
    every = 2.0
    n = int((life_s + 2 * every) // every)
    res = _scan(db, "quic-turnover", f"--target={h['hostname']}@{h['addresses'][0]}:{h['validate_addr_port']}",
                f"--every={every:g}s", f"--for={n * every:g}s", f"--sessions={n}", "--timeout=1.5s", timeout=180)
    (row,) = _rows(db, "SELECT * FROM quic_turnover_host WHERE run_id = %s", res["run_id"])
    assert row["retry_on_fresh"] is f["retry_with_validate_addr"]["value"]
    assert row["tokens_issued"] is True and row["token_format"] == f["token_format"]["value"]
    assert row["token_key_prefix_len"] == 0 and row["token_key_changes"] == 0
    # ages are client-side (arrival to presentation): accepted below the lifetime, refused
    # at or above it, each within one probe step
    assert life_s - every - 0.5 <= row["token_accept_max_age_s"] < life_s + 0.5, row
    assert life_s - 0.5 <= row["token_reject_min_age_s"] <= life_s + every + 0.5, row
    assert row["ticket_lifetime_s"] == f["ticket_lifetime_s"]["value"]
    assert row["ticket_max_early_data"] == f["ticket_max_early_data"]["value"]
    # not single-use: the first accepted token (ticket), presented once more, is accepted again
    assert row["token_reuse_accepted"] is (not f["token_single_use"]["value"]) is True, row
    assert row["ticket_reuse_accepted"] is (not f["ticket_single_use"]["value"]) is True, row
    # each age's token presented once, each a token of its own
    reps = _rows(db, "SELECT presented_token_conn_id AS tok FROM quic_connection WHERE run_id = %s "
                     "AND purpose = 'represent' AND presented_token_len IS NOT NULL", res["run_id"])
    assert len(reps) == len({r["tok"] for r in reps}) == row["token_presentations"] >= 3, reps


def test_token_layouts_from_the_sources():
    """scanners/quic/tokens.py on tokens built as the sources build them."""
    import os as _os

    from scanners.quic.tokens import classify_token, common_key_prefix_len

    ng = bytes([0x36]) + _os.urandom(56)
    assert classify_token(ng).family == "ngtcp2" and classify_token(ng).key_prefix_len == 0
    assert classify_token(bytes([0xB6]) + _os.urandom(77)).family == "ngtcp2-retry"
    ours4 = bytes([1]) + (7).to_bytes(4, "big") + _os.urandom(40)
    ours6 = bytes([1]) + (7).to_bytes(4, "big") + _os.urandom(52)
    assert [classify_token(t).key_prefix_len for t in (ours4, ours6)] == [5, 5]
    for n, v6 in ((89, False), (92, False), (101, True), (104, True)):
        assert classify_token(_os.urandom(1) * 0 + b"\x99" * n, v6).family == "quic-go"
    assert classify_token(b"\x99" * 95, False).family == "unknown"
    # quinn (quinn-proto src/token.rs Token::encode): 46 bytes from IPv4, 58 from IPv6, any first
    # byte - also ngtcp2's 0x36 magic (58 != ngtcp2 0.12's 57)
    for n, v6 in ((46, False), (58, True), (46, None), (58, None)):
        for first in (b"\x36", b"\x01", _os.urandom(1)):
            lay = classify_token(first + _os.urandom(n - 1), v6)
            assert (lay.family, lay.key_prefix_len) == ("quinn", 0), (n, v6, first)
    assert classify_token(b"\x99" * 46, True).family == "unknown"
    assert classify_token(ng, True).family == "ngtcp2" and classify_token(ours4).family == "netsurvey-testbed"
    assert classify_token(b"").family == "unknown"
    assert common_key_prefix_len([classify_token(ng), classify_token(ours4)]) is None   # mixed
    assert common_key_prefix_len([classify_token(ng)] * 3) == 0


@pytest.mark.slow
def test_ngtcp2_gnutls_anti_replay_window(zoo):
    """Why ngtcp2 sometimes refuses 0-RTT (NGTCP2_FACTS zero_rtt): two tickets issued together,
    presented one after the other more than 10 s after the last window rollover: the first
    0-RTT is accepted (and rolls the window over), the second refused; tickets issued after
    the rollover are accepted again. ~15 s."""
    code = f"""
import asyncio, sys
sys.path.insert(0, {str(REPO)!r})
from scanners.quic.handshake import quic_connect
from scanners.quic.records import ConnectOptions
async def pair(o):
    fresh = [await quic_connect("ngtcp2.zooq.test", a, 443, o) for a in ("198.18.142.10", "2001:2:0:142::10")]
    out = []
    for h, raw in fresh:
        r, _ = await quic_connect("ngtcp2.zooq.test", h.address, 443, o, ticket=raw[0])
        out.append(int(r.session_resumed) * 2 + int(r.early_data_accepted))
    return out
async def main():
    o = ConnectOptions(timeout_s=3)
    await asyncio.sleep(10.5)
    a = await pair(o)
    b = await pair(o)
    print(json.dumps([a, b]))
import json
asyncio.run(main())
"""
    r = run_cli("testbed", "zoo-quic", "exec", "--", sys.executable, "-c", code, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    first, again = json.loads(r.stdout.strip().splitlines()[-1])
    assert first == [3, 2] and again == [3, 3], r.stdout   # 3 = resumed + 0-RTT, 2 = resumed only


# ------------------------------------------------------------------ TFO key pair
_K1, _K2, _K3 = ("11111111-11111111-11111111-11111111", "22222222-22222222-22222222-22222222",
                 "33333333-33333333-33333333-33333333")


def _tfo_cookie(db, addr: str) -> tuple[int, bytes]:
    res = _scan(db, "tfo", f"--cidr={addr}/32", "--port=80", "--cooldown=0.3")
    (row,) = _rows(db, "SELECT cookie FROM tfo_probe WHERE run_id = %s", res["run_id"])
    assert row["cookie"], row
    return res["run_id"], bytes(row["cookie"])


def _represent(db, run_id: int) -> dict:
    res = _scan(db, "tfo-reuse", f"--cookies-from={run_id}", "--port=80", "--cooldown=0.3")
    (row,) = _rows(db, "SELECT * FROM tfo_reuse WHERE run_id = %s", res["run_id"])
    assert row["control"] is True and row["cookie_run_id"] == run_id and row["reply"] == "syn-ack", row
    return row


def test_tfo_backup_key_accepts_old_cookie(db, zoo):
    """Linux's TFO key pair (TFO_FACTS): after a rotation (new primary, old key as backup) a
    cookie made under the old key is still accepted - the SYN's data is acknowledged - and
    the SYN-ACK carries a new cookie from the new primary key; once the old key is dropped
    the cookie is refused. Checked against the server namespace's own counters
    (TcpExtTCPFastOpenPassive / PassiveAltKey / PassiveFail), not only the scanner's rows."""
    from testbed import zoo_quic

    addr = zoo["hosts"]["tfo"]["addresses"][0]
    try:
        zoo_quic.set_tfo_keys(_K1)
        run1, c1 = _tfo_cookie(db, addr)
        assert zoo_quic.set_tfo_keys(_K2, _K1).replace("-", "").count(",") == 1   # kernel reports both keys
        n0 = zoo_quic.tfo_counters()
        r = _represent(db, run1)                                  # c1 under (K2 primary, K1 backup)
        n1 = zoo_quic.tfo_counters()
        assert r["data_acked"] is True and r["new_cookie"] and bytes(r["new_cookie"]) != c1, r
        d = {k: n1.get(k, 0) - n0.get(k, 0) for k in ("TCPFastOpenPassive", "TCPFastOpenPassiveAltKey",
                                                       "TCPFastOpenPassiveFail")}
        assert d == {"TCPFastOpenPassive": 1, "TCPFastOpenPassiveAltKey": 1, "TCPFastOpenPassiveFail": 0}, d
        n2 = n1
        zoo_quic.set_tfo_keys(_K3, _K2)                           # K1 gone
        r3 = _represent(db, run1)
        n3 = zoo_quic.tfo_counters()
        assert r3["data_acked"] is False and r3["new_cookie"] and bytes(r3["new_cookie"]) != c1, r3
        assert n3.get("TCPFastOpenPassiveFail", 0) - n2.get("TCPFastOpenPassiveFail", 0) == 1
        res = _rows(db, "SELECT * FROM tfo_reuse_summary WHERE run_id IN (SELECT max(run_id) FROM tfo_reuse)")
        assert res[0]["accepted"] == 0 and res[0]["new_cookie_issued"] == 1 and res[0]["accepted_new_cookie"] == 0
        s1 = _rows(db, "SELECT s.* FROM tfo_reuse_summary s JOIN tfo_reuse r USING (run_id) "
                       "WHERE r.cookie_run_id = %s AND r.data_acked", run1)
        assert s1[0]["accepted"] == 1 and s1[0]["accepted_new_cookie"] == 1 and s1[0]["new_cookie_issued"] == 0
    finally:
        zoo_quic.set_tfo_keys(*zoo_quic.TFO_KEYS)


def test_tfo_cookies_from_bad_input(db, zoo):
    r = run_cli("scan", "tfo-reuse", "--cookies-from=999999", "--port=80", dsn=db.dsn)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no run 999999" in r.stderr, r.stderr
    r = run_cli("scan", "tfo-reuse", "--port=80", dsn=db.dsn)
    assert r.returncode == 2 and "--list or --cookies-from" in r.stderr


@pytest.mark.slow   # ~12 s (four client runs): keeps this file's make-test share near one minute
@pytest.mark.skipif(not Path("/usr/bin/gtlsclient").exists(), reason="ngtcp2-client not installed")
def test_ngtcp2_client_second_opinion(zoo, tmp_path):
    """ngtcp2's own client (Debian ngtcp2-client, GnuTLS) as a second opinion on the facts the
    scanner measured: 0-RTT accepted by the stock server on a fresh ticket (--session-file,
    --tp-file; the client prints 'Early data was rejected by server' otherwise,
    examples/client.cc:300-302 at v0.12.1), and on the --validate-addr server a Retry without a
    token (its --token-file cannot be read back by this build: see below)."""
    h = zoo["hosts"]["ngtcp2"]
    v4 = h["addresses"][0]

    def client(port: int, tag: str) -> str:
        argv = ["timeout", "10", "/usr/bin/gtlsclient", "--exit-on-all-streams-close",
                f"--session-file={tmp_path / (tag + '.sess')}", f"--tp-file={tmp_path / (tag + '.tp')}",
                f"--token-file={tmp_path / (tag + '.tok')}", v4, str(port), f"https://{h['hostname']}/"]
        r = run_cli("testbed", "zoo-quic", "exec", "--", *argv, timeout=30)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout + r.stderr

    first, second = client(443, "stock"), client(443, "stock")
    assert " type=0RTT" not in first and " type=0RTT" in second
    assert "Early data was rejected by server" not in second
    fresh, again = client(h["validate_addr_real_clock_port"], "va"), client(h["validate_addr_real_clock_port"], "va")
    assert "type=Retry" in fresh   # agrees with the scanner: a token-less Initial draws a Retry
    # No second opinion on token acceptance from this client: Debian's gtlsclient 0.12.1 writes
    # its --token-file but cannot read it back (examples/util_gnutls.cc:71-88 read_token() takes
    # the size from tellg() of a stream opened at offset 0, so it decodes 0 bytes; upstream HEAD
    # seeks to the end first, util_gnutls.cc read_pem()), so it connects without a token and
    # gets a Retry again. When a fixed client arrives this fails: then assert no Retry here.
    assert "Could not read token in" in again and "type=Retry" in again


# ------------------------------------------------------------------ quinn
@pytest.fixture(scope="module")
def quinn(zoo):
    if not zoo["hosts"]["quinn"]["installed"]:
        pytest.skip("zoo-quinn not built (scripts/build_zoo_quic.sh needs cargo and crates.io; ~60 s)")
    return zoo["hosts"]["quinn"]


def test_quinn_facts(db, zoo, quinn):
    """quinn with its stock defaults (QUINN_FACTS): Version Negotiation (v1 + drafts 29-34 after
    one greased version), no Retry, NEW_TOKEN tokens (quinn's layout, no key id; 2 per client
    Handshake packet), two stateful 32-byte tickets of 86400 s allowing 0xffffffff bytes of
    early data, resumption with 0-RTT; and, by hand, tickets resume only once. ~3 s."""
    f = quinn["facts"]
    res = _scan(db, "quic-discover", *_targets(zoo, "quinn"), "--timeout=2s")
    rows = _rows(db, "SELECT * FROM quic_discovery WHERE run_id = %s", res["run_id"])
    assert len(rows) == 2
    for r in rows:
        got = list(r["vn_versions"])
        assert r["vn_answer"] == "version-negotiation", r
        assert [v for v in got if not _reserved(v)] == f["vn_versions"]["value"], [hex(v) for v in got]
        assert sum(_reserved(v) for v in got) == f["vn_versions"]["greased_extra"] and _reserved(got[0])
    res = _scan(db, "quic", *_targets(zoo, "quinn"), "--timeout=3s")
    conns = _rows(db, "SELECT * FROM quic_connection WHERE run_id = %s ORDER BY conn_id", res["run_id"])
    assert len(conns) == 4 and all(c["status"] == "success" for c in conns), conns
    for c in conns:
        assert c["version"] == 1 and c["alpn"] == "h3" and c["http_status"] == 200, c
        assert c["retry"] is f["retry"]["value"], c
        n = f["new_token"]["count_per_connection"]
        assert c["n_tokens"] >= n and c["n_tokens"] % n == 0, c     # 2 per client Handshake packet
        assert c["n_tickets"] == f["tickets"]["count_per_connection"], c
        if c["purpose"] == "resume":
            assert c["presented_ticket_conn_id"] is not None and c["presented_token_conn_id"] is not None
            assert c["session_resumed"] is f["resumption"]["value"], c
            assert c["early_data_sent"] is True and c["early_data_accepted"] is f["zero_rtt"]["value"], c
    toks = _rows(db, "SELECT *, family(address) AS fam FROM quic_token WHERE run_id = %s", res["run_id"])
    assert toks
    for t in toks:
        tf = f["token_format"]
        assert (t["token_format"], t["key_id_len"]) == (tf["value"], tf["key_id_len"]), t
        assert t["token_len"] == tf["token_len_bytes"]["ipv6" if t["fam"] == 6 else "ipv4"], t
    tiks = _rows(db, "SELECT * FROM quic_ticket WHERE run_id = %s", res["run_id"])
    assert len(tiks) == 8
    for t in tiks:
        assert t["lifetime_s"] == f["ticket_lifetime_s"]["value"], t
        assert t["max_early_data"] == f["ticket_max_early_data"]["value"], t
        assert t["ticket_len"] == f["ticket_format"]["ticket_len_bytes"], t
    # single-use stateful tickets (rustls session_storage.take()): no netsurvey scanner presents
    # one ticket twice, so by hand with the scanner's connect function; the IPv4 ticket also
    # resumes at the IPv6 address (one session cache per process)
    code = f"""
import asyncio, json, sys
sys.path.insert(0, {str(REPO)!r})
from scanners.quic.handshake import quic_connect
from scanners.quic.records import ConnectOptions
async def main():
    o = ConnectOptions(timeout_s=3)
    h, raw = await quic_connect("quinn.zooq.test", "198.18.144.10", 443, o)
    out = []
    for t, a in ((raw[0], "198.18.144.10"), (raw[0], "198.18.144.10"), (raw[1], "2001:2:0:144::10")):
        r, _ = await quic_connect("quinn.zooq.test", a, 443, o, ticket=t)
        out.append(r.session_resumed)
    print(json.dumps(out))
asyncio.run(main())
"""
    r = run_cli("testbed", "zoo-quic", "exec", "--", sys.executable, "-c", code, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    first, again, other_family = json.loads(r.stdout.strip().splitlines()[-1])
    assert first is True and again is (not f["ticket_single_use"]["value"]), r.stdout
    assert other_family is (f["ticket_key_scope"]["value"] == "process"), r.stdout


# ------------------------------------------------------------------ quic-turnover as a scheduler (issues 24, 26)


def _turnover_argv(db, cfg: Path, *args) -> list[str]:
    return [sys.executable, "-m", "netsurvey.cli", "testbed", "zoo-quic", "exec", "--", sys.executable, "-m",
            "netsurvey.cli", "--config", str(cfg), "--dsn", db.dsn, "scan", "quic-turnover", *args, "--json"]


def _config(tmp_path: Path, pdp: float) -> Path:
    f = tmp_path / "survey.toml"   # no own_servers: the per-destination limit applies to the zoo too
    f.write_text(f"[etiquette]\nallow = [\"198.18.0.0/15\", \"2001:2::/48\"]\nper_destination_pps = {pdp}\n")
    return f


def _server_connections(pkts: Path, server: str) -> list[float]:
    """Connections that reached the server, from its own namespace's received packets: the
    first Initial from each client port (a scanner connection uses a UDP port of its own)."""
    first: dict = {}
    for r in map(json.loads, pkts.read_text().splitlines()):
        if r.get("quic_initial") and r["dst"] == server and r.get("dport") == 443:
            first.setdefault((r["src"], r["sport"]), r["t"])
    return sorted(first.values())


def test_quinn_single_use_tickets_each_age_fresh_killed_run_resumes(db, zoo, quinn, tmp_path):
    """quic-turnover presents at every age a ticket never presented before (one establish
    connection per age), so quinn's single-use 86400 s tickets (QUINN_FACTS) are accepted at
    every age up to the compressed schedule's end (the old probe re-presented one ticket and
    read a 2-4 s lifetime), and the reuse check reads them as single-use. The run is SIGKILLed
    mid-way and continued with --resume: every age is decided exactly once, no ticket is
    presented twice (but the one reuse), and the packets reaching the server (a sniffer in its
    namespace) never show more than the per-destination limit in any second."""
    import signal
    import subprocess
    import time

    f = quinn["facts"]
    addr = quinn["addresses"][0]
    pdp, n = 4, 20
    cfg = _config(tmp_path, pdp)
    pkts = tmp_path / "server.jsonl"
    sniff = subprocess.Popen(["ip", "netns", "exec", "nstq-quinn", sys.executable, str(SNIFFER), "--out", str(pkts),
                              "--iface", "eth0", "--seconds", "120", "--incoming"], stdout=subprocess.PIPE, text=True)
    try:
        assert sniff.stdout.readline().strip() == "ready"
        argv = _turnover_argv(db, cfg, f"--target={quinn['hostname']}@{addr}", "--every=1s", f"--for={n}s",
                              f"--sessions={n}", "--timeout=0.9s")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            t0 = time.monotonic()
            decided = 0
            while time.monotonic() - t0 < 40 and decided < 2 and proc.poll() is None:
                time.sleep(0.2)
                decided = _rows(db, "SELECT count(*) AS n FROM quic_turnover_event WHERE event = 'accepted'")[0]["n"]
            assert decided >= 2 and proc.poll() is None, (decided, proc.poll())
        finally:
            os.killpg(proc.pid, signal.SIGKILL)     # as a crash: nothing more is flushed or finished
            proc.communicate(timeout=30)
        (run,) = _rows(db, "SELECT id, status FROM scan_run WHERE kind = 'quic-turnover'")
        assert run["status"] == "running"
        p = subprocess.run(_turnover_argv(db, cfg, f"--resume={run['id']}"), capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        sniff.send_signal(signal.SIGTERM)
        stats = json.loads(sniff.communicate(timeout=30)[0].strip().splitlines()[-1])
    assert out["run_id"] == run["id"] and out["counts"]["restored_on_restart"] >= 1, out
    assert _rows(db, "SELECT status FROM scan_run WHERE id = %s", run["id"])[0]["status"] == "finished"
    (row,) = _rows(db, "SELECT * FROM quic_turnover_host WHERE run_id = %s", run["id"])
    # single-use tickets of 86400 s: accepted at every age tried (up to the schedule's end), never refused
    assert row["ticket_lifetime_s"] == f["ticket_lifetime_s"]["value"]
    assert row["ticket_reject_min_age_s"] is None and row["ticket_accept_max_age_s"] >= n - 0.5, row
    assert row["ticket_reuse_accepted"] is (not f["ticket_single_use"]["value"]), row
    assert row["retry_on_fresh"] is f["retry"]["value"] and row["token_accept_max_age_s"] is None, row
    assert row["tokens_issued"] is True and row["token_format"] == f["token_format"]["value"], row
    # every age at most once, each by a ticket of its own: an age whose presentation was due
    # while no process ran is logged lost (the dead process may have presented it) and never
    # presented again; the search re-tries it with a fresh ticket unless an acceptance at a
    # larger age already decided it (the search's monotonicity)
    ev = _rows(db, "SELECT grid_index, event, detail FROM quic_turnover_event WHERE run_id = %s AND kind = 'ticket' "
                   "AND event IN ('accepted', 'refused', 'lost', 'dropped', 'finished')", run["id"])
    decided = [e["grid_index"] for e in ev if e["event"] in ("accepted", "refused")]
    lost = {e["grid_index"] for e in ev if e["event"] == "lost"}
    dropped = {e["grid_index"] for e in ev if e["event"] == "dropped"}   # decided by a late acceptance
    assert len(decided) == len(set(decided)) and set(decided) | lost | dropped == set(range(1, n + 1)), ev
    assert all(e["event"] == "accepted" for e in ev if e["event"] in ("accepted", "refused")), ev
    assert lost and max(decided) == n and out["counts"]["lost_on_restart"] == len(lost), (ev, out)
    assert [e["detail"] for e in ev if e["event"] == "finished"] == ["accepted-at-max-age"], ev
    reps = _rows(db, "SELECT purpose, presented_ticket_conn_id AS src, presented_ticket_age_s AS age, session_resumed "
                     "FROM quic_connection WHERE run_id = %s AND purpose IN ('represent', 'reuse') AND status = 'success'",
                 run["id"])
    srcs = [r["src"] for r in reps if r["purpose"] == "represent"]
    assert len(srcs) == len(set(srcs)) >= len(decided), reps          # no ticket presented twice for an age
    assert [r["session_resumed"] for r in reps if r["purpose"] == "reuse"] == [False], reps
    # the secrets are not kept once the run finished
    assert _rows(db, "SELECT count(*) AS n FROM quic_turnover_event WHERE state IS NOT NULL")[0]["n"] == 0
    # the per-destination limit, seen by the server
    assert stats["kernel_drops"] == 0
    conns = _server_connections(pkts, addr)
    made = _rows(db, "SELECT count(*) AS n FROM quic_connection WHERE run_id = %s AND status = 'success'", run["id"])
    assert len(conns) >= made[0]["n"] > n, (len(conns), made)
    worst = max(sum(1 for u in conns if t <= u < t + 1.0) for t in conns)
    assert worst <= pdp + 1, f"{worst} connections within one second at {addr} (limit {pdp}/s)"


# ------------------------------------------------------------------ the zoo table's QUIC rows
def _so(zoo, label):
    h = zoo["hosts"][label]
    return [x for a in h["addresses"] for x in ("--target", f"{h['hostname']}={a}")]


@pytest.mark.skipif(not Path("/usr/bin/gtlsclient").exists(), reason="ngtcp2-client not installed")
def test_zoo_table_quic_rows(db, zoo, quinn, tmp_path):
    """`plot zoo-table` has QUIC rows for quic-go, ngtcp2 (stock, and its --validate-addr
    instance's Retry) and quinn, all from the database: the cited documented default,
    netsurvey's measurement (scan quic-discover, scan quic) and ngtcp2's own client's verdict
    (scan quic-second-opinion: another QUIC and TLS stack than aioquic). Every measured value
    matches the documented one or the row explains why; every second opinion agrees or the
    row explains why; a fact without a second opinion says why. ~45 s."""
    import csv

    va = zoo["hosts"]["ngtcp2"]["validate_addr_real_clock_port"]
    labels = ("quicgo", "ngtcp2", "quinn")
    runs = [_scan(db, "quic-discover", *[t for x in labels for t in _targets(zoo, x)], "--timeout=2s")["run_id"],
            _scan(db, "quic", *[t for x in labels for t in _targets(zoo, x)], *_targets(zoo, "ngtcp2", va),
                  "--timeout=3s")["run_id"],
            _scan(db, "quic-second-opinion", *[t for x in labels for t in _so(zoo, x)], timeout=180)["run_id"],
            _scan(db, "quic-second-opinion", *_so(zoo, "ngtcp2")[:2], "--port", str(va))["run_id"]]
    # the documented defaults zoo-table compares with: recorded in the database
    assert run_cli("testbed", "zoo-record", dsn=db.dsn).returncode == 0
    p = run_cli("plot", "zoo-table", *[x for r in runs for x in ("--run", str(r))], "--out", str(tmp_path),
                dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    with (tmp_path / "zoo-table.csv").open(newline="") as fh:
        table = [r for r in csv.DictReader(fh) if ".zooq.test" in r["hostname"]]
    by = {(r["hostname"], r["fact"]): r for r in table}
    facts = {"vn_versions", "vn_greased_count", "retry", "new_token", "new_token_count_per_connection", "token_format",
             "token_key_id_len", "tickets", "ticket_count_per_connection", "ticket_lifetime_s",
             "ticket_max_early_data", "resumption", "zero_rtt"}
    assert set(by) == {(zoo["hosts"][x]["hostname"], f) for x in labels for f in facts} | \
        {(f"ngtcp2.zooq.test:{va}", "retry")}, sorted(set(by))
    for r in table:
        assert r["documented"] and r["documented_source"] and r["netsurvey"], r
        assert r["netsurvey_matches_documented"] == "yes" or r["note"], r
        if r["second_opinion"]:
            assert r["second_opinion_client"].startswith("ngtcp2-client 0.12"), r
            assert r["agree"] == "yes" or r["note"], r
        else:
            assert "no second opinion: " in r["note"], r
    # ngtcp2's client measured every fact it can see, on every host
    seen = facts - {"token_format", "token_key_id_len"}
    assert {(h, f) for (h, f), r in by.items() if r["second_opinion"]} == \
        {(zoo["hosts"][x]["hostname"], f) for x in labels for f in seen} | {(f"ngtcp2.zooq.test:{va}", "retry")}
    # quinn: 2 NEW_TOKENs per client Handshake packet it processes - each client gets a multiple
    # of 2 (aioquic mostly 4; ngtcp2's client 2, 4 or 8 from run to run), explained in the note
    q = by[("quinn.zooq.test", "new_token_count_per_connection")]
    counts = [int(n) for n in (q["netsurvey"] + "|" + q["second_opinion"]).split("|")]
    assert q["documented"] == "2" and all(n >= 2 and n % 2 == 0 for n in counts), q
    assert "Handshake packet" in q["note"], q
    assert by[(f"ngtcp2.zooq.test:{va}", "retry")]["second_opinion"] == "true"
    assert by[("quicgo.zooq.test", "vn_versions")]["second_opinion"] == "0x00000001|0x6b3343cf"
