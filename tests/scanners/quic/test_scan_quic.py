"""QUIC scanners against the testbed's ground truth (config/testbed.toml [[quic_host]]) and
the QUIC servers' own event logs (/run/netsurvey/testbed/quic/<host>.log). Also hosts
without QUIC, a version-negotiation-only host, a host closing with an error and a host
answering garbage (scanners.quic.oddservers in the vantage namespace)."""
from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli

QUIC_LOG_DIR = Path("/run/netsurvey/testbed/quic")


def _scan(db, *args, timeout=120):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", *args,
                "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _rows(db, sql, *params):
    with db.connect() as conn:
        cur = conn.execute(sql, params)
        cols = [d.name for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def _quic_hosts(testbed) -> dict:
    return {h["hostname"]: h for h in testbed.status()["ground_truth"]["quic_hosts"]}


def _server_log(host: str, since: float) -> list[dict]:
    out = []
    for line in (QUIC_LOG_DIR / f"{host}.log").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec["ts"] >= since:
            out.append(rec)
    return out


def _restarted_since(gt: dict, since: float) -> bool:
    return any(e["event"] == "started" for h in gt for e in _server_log(h, since))


@pytest.fixture(scope="module")
def oddservers():
    """vn-only / close / garbage servers on the vantage's own address 198.18.0.1."""
    proc = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m",
                             "scanners.quic.oddservers", "--bind", "198.18.0.1"], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    ports = dict(kv.split("=") for kv in line.split()[1:])
    yield {k: int(v) for k, v in ports.items()}
    import os
    import signal

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def test_handshake_matches_ground_truth(db, testbed, tmp_path):
    gt = _quic_hosts(testbed)
    t0 = time.time()
    res = _scan(db, "quic", *[f"--target={h}" for h in gt], "--target=a.test", "--target=nxdomain.example.test",
                "--timeout=2s")
    rows = _rows(db, "SELECT * FROM quic_connection WHERE run_id = %s ORDER BY conn_id", res["run_id"])
    tickets = _rows(db, "SELECT * FROM quic_ticket WHERE run_id = %s", res["run_id"])
    tokens = _rows(db, "SELECT * FROM quic_token WHERE run_id = %s", res["run_id"])
    for host, h in gt.items():
        for addr in h["addresses"]:
            fresh = [r for r in rows if r["hostname"] == host and str(r["address"]) == addr and r["purpose"] == "fresh"]
            resumed = [r for r in rows if r["hostname"] == host and str(r["address"]) == addr and r["purpose"] == "resume"]
            assert len(fresh) == 1 and len(resumed) == 1, (host, addr)
            f, s = fresh[0], resumed[0]
            assert f["status"] == "success" and f["version"] == 1 and f["alpn"] == "h3", f
            assert f["retry"] is h["retry"], (host, addr)
            assert host in f["cert_sans"]
            assert f["transport_parameters"]["initial_max_data"] > 0
            # token issuance on/off; IPv4 tokens are 45 bytes, IPv6 57 (address inside)
            assert (f["n_tokens"] > 0) is h["issue_tokens"], (host, addr)
            toks = [t for t in tokens if t["conn_id"] == f["conn_id"]]
            if h["issue_tokens"]:
                assert {t["token_len"] for t in toks} == {45 if ipaddress.ip_address(addr).version == 4 else 57}
                assert all(t["after_handshake_ms"] >= 45 for t in toks)  # sent 50 ms after the handshake
            tks = [t for t in tickets if t["conn_id"] == f["conn_id"]]
            assert len(tks) == 1 and tks[0]["lifetime_s"] == h["ticket_lifetime"], (host, addr, tks)
            assert (tks[0]["max_early_data"] is not None) is h["early_data"]
            # presenting the token and ticket at once: no Retry, resumed, 0-RTT as configured
            assert s["status"] == "success" and s["session_resumed"] is True, s
            if h["issue_tokens"]:
                assert s["retry"] is False and s["presented_token_len"] == toks[0]["token_len"]
            else:
                assert s["retry"] is h["retry"]
            assert s["early_data_sent"] is h["early_data"] and s["early_data_accepted"] is h["early_data"], s
            # the server's own log agrees, connection by connection
            log = [e for e in _server_log(host, t0 - 1) if e["event"] == "connection" and e["client_port"] == s["client_port"]]
            assert len(log) == 1, (host, s["client_port"])
            assert log[0]["ticket_status"] == "valid" and log[0]["session_resumed"] is True
            assert log[0]["token_status"] == ("valid" if h["issue_tokens"] else "none")
            assert log[0]["early_data_accepted"] is h["early_data"]
    other = [r for r in rows if r["hostname"] == "a.test"]
    assert other and all(r["status"] in ("connection-refused", "connection-timeout") for r in other)
    assert [r["status"] for r in rows if r["hostname"] == "nxdomain.example.test"] == ["resolution-failed"]
    # `plot quic-state` (the bench's figure of a scan quic run) counts the same from the ground truth
    from analysis.figures import render

    render(db, "quic-state", tmp_path / "fig", runs=[res["run_id"]])
    import csv

    got = {r["addresses_with"]: int(r["addresses"])
           for r in csv.DictReader((tmp_path / "fig" / "quic-state.csv").open())}
    pairs = [h for h in gt.values() for _ in h["addresses"]]
    assert got == {
        "probed": len([r for r in rows if r["purpose"] == "fresh" and r["status"] != "resolution-failed"]),
        "handshake succeeded": len(pairs),
        "Retry sent (address validated before the handshake)": sum(h["retry"] for h in pairs),
        "NEW_TOKEN token issued": sum(h["issue_tokens"] for h in pairs),
        "session ticket issued": len(pairs),
        "revisit resumed the session (ticket accepted)": len(pairs),
        "revisit's 0-RTT data accepted": sum(h["early_data"] for h in pairs),
    }, got


def test_discovery_support_and_hints(db, testbed, tmp_path):
    gt = _quic_hosts(testbed)
    tls = {h["hostname"]: h for h in testbed.status()["ground_truth"]["tls_hosts"]}
    names = ["www.example.test", "a.test", "retry.example.test", "b.test", "notoken.example.test",
             "nxdomain.example.test", "t.test", "on1.tfo.test", "img.example.test", "static.example.test",
             "noid.example.test"]
    lst = tmp_path / "l.csv"
    lst.write_text("".join(f"{i},{n}\n" for i, n in enumerate(names, 1)))
    assert run_cli("targets", "import", str(lst), "--list", "q", dsn=db.dsn).returncode == 0
    res = _scan(db, "quic-discover", "--list", "q", "--timeout", "0.5s")
    hosts = {r["hostname"]: r for r in _rows(db, "SELECT * FROM quic_support_host WHERE run_id = %s", res["run_id"])}
    for n in names:
        is_quic = n in gt
        assert bool(hosts[n]["quic"]) is is_quic, n
        assert bool(hosts[n]["https_rr_h3"]) is is_quic, n
        assert bool(hosts[n]["alt_svc_h3"]) is bool(tls.get(n, {}).get("alt_svc_h3")), n
        if is_quic:
            assert hosts[n]["quic_ipv4"] and hosts[n]["quic_ipv6"]
    rows = _rows(db, "SELECT * FROM quic_discovery WHERE run_id = %s AND hostname = 'www.example.test'", res["run_id"])
    assert all(r["vn_versions"][:1] == [1] for r in rows)  # aioquic offers v1 first, then v2
    assert all(r["alt_svc_h3_ma_s"] == 86400 for r in rows)
    cuts = {r["cut"]: r for r in _rows(db, "SELECT * FROM quic_support_by_cut WHERE run_id = %s", res["run_id"])}
    assert cuts[10]["hosts"] == 10 and cuts[10]["quic_hosts"] == 3 and cuts[10]["quic_share"] == pytest.approx(0.3)
    assert cuts[100]["hosts"] == 11 and cuts[100]["quic_share"] == pytest.approx(3 / 11)
    # the Table 6.2 analogue as `netsurvey plot quic-support` writes it
    from analysis.figures import render

    ctx = render(db, "quic-support", tmp_path / "fig", runs=[res["run_id"]])
    lines = (tmp_path / "fig" / "quic-support.csv").read_text().splitlines()
    assert lines[1].split(",")[:4] == ["10", "10", "3", "0.3"] and lines[2].split(",")[:3] == ["100", "11", "3"]
    assert {p.suffix for p in ctx.written} == {".csv", ".png", ".svg"}


def test_misbehaving_servers_recorded_as_such(db, testbed, oddservers):
    a = "198.18.0.1"
    targets = [f"--target=vn.quic.test@{a}:{oddservers['vn-only']}", f"--target=close.quic.test@{a}:{oddservers['close']}",
               f"--target=garbage.quic.test@{a}:{oddservers['garbage']}"]
    d = _scan(db, "quic-discover", *targets, "--timeout=0.5s")
    disc = {r["hostname"]: r for r in _rows(db, "SELECT * FROM quic_discovery WHERE run_id = %s", d["run_id"])}
    assert disc["vn.quic.test"]["vn_answer"] == "version-negotiation"
    assert disc["vn.quic.test"]["vn_versions"] == [0xFF00001D, 0x0A0A0A0A]
    assert disc["close.quic.test"]["vn_answer"] == "version-negotiation"
    assert disc["garbage.quic.test"]["vn_answer"] == "garbage" and disc["garbage.quic.test"]["status"] == "protocol-error"
    h = _scan(db, "quic", *targets, "--timeout=1s")
    conn = {r["hostname"]: r for r in _rows(db, "SELECT * FROM quic_connection WHERE run_id = %s", h["run_id"])}
    assert conn["vn.quic.test"]["status"] == "protocol-error"
    assert "no common version" in conn["vn.quic.test"]["error"]
    assert conn["close.quic.test"]["status"] == "application-error"
    assert conn["close.quic.test"]["close_code"] == 0x178  # TLS alert no_application_protocol
    assert conn["garbage.quic.test"]["status"] == "connection-timeout"
    assert h["counts"] == {"protocol-error": 1, "application-error": 1, "connection-timeout": 1}


def test_bad_input_is_one_line_exit_2(db):
    for args in (["quic-turnover", "--target", "198.18.2.10", "--every", "soon"],
                 ["quic", "--target", "198.18.2.10:99999"],
                 ["quic-discover", "--list", "nosuchlist"]):
        r = run_cli("scan", *args, dsn=db.dsn)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == 0


def test_turnover_lifetimes_and_key_rotation(db, testbed, tmp_path):
    """Token issuance, Retry, token acceptance age, ticket lifetime, key rotation periods and
    0-RTT acceptance, recovered from 1-second rounds over 42 s (ages within one interval)."""
    gt = _quic_hosts(testbed)
    every, tol, window = 1.0, 0.3, 42.0  # s; tol covers client-side arrival stamps under load
    for _attempt in range(3):  # other sessions may restart the shared testbed; its servers then lose state
        t0 = time.time()
        # --sessions 42: every age in one round (each with a ticket/token of its own), as the thesis
        res = _scan(db, "quic-turnover", *[f"--target={h}" for h in gt], "--every=1s", "--for=42s", "--timeout=0.9s",
                    "--sessions=42",
                    timeout=150)
        if not _restarted_since(gt, t0):
            break
    else:
        pytest.fail("the testbed's QUIC servers restarted during every attempt (another session?)")
    summary = _rows(db, "SELECT * FROM quic_turnover_host WHERE run_id = %s", res["run_id"])
    conns = _rows(db, "SELECT * FROM quic_connection WHERE run_id = %s AND purpose = 'represent'", res["run_id"])
    assert len(summary) == sum(len(h["addresses"]) for h in gt.values())
    for row in summary:
        h = gt[row["hostname"]]
        where = (row["hostname"], str(row["address"]))
        assert row["rounds"] == 43 and row["connections_ok"] >= 60, where  # of 85
        assert row["retry_on_fresh"] is h["retry"], where
        assert row["tokens_issued"] is h["issue_tokens"], where
        assert row["ticket_lifetime_s"] == h["ticket_lifetime"], where
        assert (row["ticket_max_early_data"] is not None) is h["early_data"], where
        assert row["ticket_key_prefix_len"] == 4, where       # 4-byte key id in front of the ticket
        for kind in ("token", "ticket"):
            rot = h[f"{kind}_key_rotation"]
            if kind == "token" and not h["issue_tokens"]:
                continue
            if rot and 2 * rot <= window - 2 * every:  # at least two changes inside the window
                assert abs(row[f"{kind}_key_period_s"] - rot) <= every, (where, kind, row[f"{kind}_key_period_s"])
                assert row[f"{kind}_key_changes"] >= 2
            elif not rot:
                assert row[f"{kind}_key_changes"] == 0 and row[f"{kind}_key_period_s"] is None, (where, kind)
        if h["issue_tokens"]:
            assert row["token_key_prefix_len"] == 5, where   # version byte + 4-byte key id
        if h["retry"]:
            # token acceptance age = token_max_age, within one interval
            acc, rej = row["token_accept_max_age_s"], row["token_reject_min_age_s"]
            assert h["token_max_age"] - every <= acc <= h["token_max_age"] + tol, (where, acc)
            assert h["token_max_age"] - tol <= rej <= h["token_max_age"] + every + tol, (where, rej)
        else:
            assert row["token_accept_max_age_s"] is None  # unobservable without Retry
        # tickets: accepted up to their lifetime and while their key is the current or the
        # previous one, i.e. between one and two rotations depending on the issue phase
        life, rot = h["ticket_lifetime"], h["ticket_key_rotation"]
        upper = min(life, 2 * rot) if rot else life
        lower = min(life, rot) if rot else life
        acc, rej = row["ticket_accept_max_age_s"], row["ticket_reject_min_age_s"]
        if lower > window:
            assert rej is None and acc >= window - 2 * every, (where, acc, rej)
        else:
            assert lower - every <= acc <= upper + tol, (where, acc)
            assert lower - tol <= rej <= upper + every + tol, (where, rej)
        if h["early_data"]:
            z = row["zero_rtt_accept_max_age_s"]
            assert z is not None and z <= upper + tol, (where, z)
            if lower > window:
                assert z >= window - 2 * every and row["zero_rtt_reject_min_age_s"] is None, where
        else:
            assert row["zero_rtt_accept_max_age_s"] is None, where
    # every single re-presentation against the server's rules (boundary cases skipped)
    checked = 0
    for c in conns:
        h = gt[c["hostname"]]
        start = c["started_at"].timestamp()
        if c["presented_ticket_prefix"] is not None and c["status"] == "success":
            key_id = int.from_bytes(c["presented_ticket_prefix"][:4], "big")
            rot = h["ticket_key_rotation"]
            near = rot and abs(start - round(start / rot) * rot) < tol
            if not near and abs(c["presented_ticket_age_s"] - h["ticket_lifetime"]) > tol:
                expect = c["presented_ticket_age_s"] <= h["ticket_lifetime"] and (
                    rot == 0 or key_id >= int(start // rot) - 1)
                assert c["session_resumed"] is expect, c
                checked += 1
        if h["retry"] and c["presented_token_len"] and c["status"] == "success":
            if abs(c["presented_token_age_s"] - h["token_max_age"]) > tol:
                assert c["retry"] is (c["presented_token_age_s"] > h["token_max_age"]), c
                checked += 1
    assert checked > 150
    # and the server's log agrees with every resumption we recorded
    for host in gt:
        log: dict = {}
        for e in _server_log(host, t0 - 1):
            if e["event"] == "connection":  # ports repeat over a run: key by server address and port, then time
                log.setdefault((e["server_address"], e["client_port"]), []).append(e)
        for c in conns:
            if c["hostname"] == host and c["status"] == "success" and c["presented_ticket_prefix"] is not None:
                cands = log[(str(c["address"]), c["client_port"])]
                e = min(cands, key=lambda e: abs(e["ts"] - c["started_at"].timestamp()))
                assert (e["ticket_status"] == "valid") is c["session_resumed"], c
    # figures: the lifetime CDF holds one point per host address and kind, from the same rows
    from analysis.figures import render

    for name in ("quic-lifetimes", "quic-turnover", "quic-tracking"):
        render(db, name, tmp_path, runs=[res["run_id"]])
    import csv

    life = list(csv.DictReader((tmp_path / "quic-lifetimes.csv").open()))
    n = {r["kind"]: int(r["n_hosts"]) for r in life}
    assert n == {"token": sum(len(h["addresses"]) for h in gt.values() if h["issue_tokens"] and h["retry"]),
                 "ticket": len(summary)}
    assert max(float(r["value_s"]) for r in life if r["kind"] == "token") == pytest.approx(
        max(r["token_accept_max_age_s"] for r in summary if r["token_accept_max_age_s"] is not None))
    track = list(csv.DictReader((tmp_path / "quic-tracking.csv").open()))
    assert len(track) == len(summary)
    assert {r["token_linkability"] for r in track if r["hostname"] == "notoken.example.test"} == {"no tokens"}


@needs_root()
def test_quic_discover_asks_a_names_https_record_once(db, testbed, tmp_path):
    """quic-discover probes a name's addresses together (www.example.test: an IPv4 and an
    IPv6 address) and asks its HTTPS record "once for all its addresses"
    (QuicDiscoverScanner._https_rr): both probes missed the cache at the same moment and
    asked twice (4 DNS questions: A, AAAA, HTTPS, HTTPS)."""
    from support.sniffing import vantage_capture

    with vantage_capture(tmp_path / "pkts.jsonl") as sn:
        r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan",
                    "quic-discover", "--target", "www.example.test", "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["counts"] == {"success": 2}, res
    assert sn.stats["kernel_drops"] == 0
    questions = [p for p in sn.packets if p.get("dns_id") is not None]
    assert len(questions) == 3, [(p["dst"], p["dns_id"]) for p in questions]   # A, AAAA, HTTPS


def test_turnover_resume_reads_brackets_reuse_and_pending_states_back(db):
    """quic-turnover --resume from the event log alone: a chain's bracket counts a late
    outcome by the index it decided, the reuse test is not repeated, a planned state still
    due is restored, one whose due time passed is logged lost (never presented twice)."""
    import datetime as dt

    from scanners.quic.schedule import prior_state

    now = dt.datetime.now(dt.timezone.utc)
    later, earlier = now + dt.timedelta(seconds=60), now - dt.timedelta(seconds=60)
    rows = [("sample", None, None, "started", None, None, None, None),
            ("sample", 0, None, "sampled", None, None, 7, None),
            ("ticket", 1, 4, "planned", earlier, None, 8, b"t4"),
            ("ticket", 1, 2, "accepted", None, "decided-as:3", None, None),
            ("ticket", 1, 6, "refused", None, None, None, None),
            ("ticket", 1, None, "reuse", None, "refused", None, None),
            ("ticket", 2, 5, "planned", later, None, 9, b"t5"),
            ("ticket", 2, 4, "planned", earlier, None, 10, b"x"),
            ("token", 1, None, "finished", None, "no-retry", None, None)]
    with db.connect() as conn:
        run_id = conn.execute("INSERT INTO scan_run (kind) VALUES ('quic-turnover') RETURNING id").fetchone()[0]
        for kind, rnd, k, ev, due, detail, cid, state in rows:
            conn.execute("INSERT INTO quic_turnover_event (run_id, hostname, address, port, kind, round, grid_index, "
                         "event, due_at, at, detail, conn_id, state) VALUES (%s, NULL, '198.18.2.9', 443, %s, %s, %s, "
                         "%s, %s, %s, %s, %s, %s)", (run_id, kind, rnd, k, ev, due, now, detail, cid, state))
        prior, lost = prior_state(conn, run_id, now.timestamp())
        lost_rows = conn.execute("SELECT kind, round, grid_index FROM quic_turnover_event WHERE run_id = %s AND "
                                 "event = 'lost' ORDER BY 2", (run_id,)).fetchall()
    ph = prior[(None, "198.18.2.9", 443)]
    assert ph.rounds_done == frozenset({0}) and ph.reused == frozenset({"ticket"})
    t, k = ph.chains["ticket"], ph.chains["token"]
    assert (t.lo, t.hi, t.round, t.finished) == (3, 6, 2, False) and k.finished
    assert ph.restored == (("ticket", 2, 5, later.timestamp(), (9, b"t5")),)
    # round 1's index 4 (planned, no outcome, its due time passed) and round 2's index 4
    assert lost == 2 and lost_rows == [("ticket", 1, 4), ("ticket", 2, 4)]
