"""TFO scanner against the testbed's ground truth (config/testbed.toml): support scan,
failures, blocklist, load-balancing survey with resume, cross-address cookie reuse,
kernel cross-check and the figures."""
from __future__ import annotations

import csv
import ipaddress
import json
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import needs_root, run_cli

pytestmark = [needs_root(), pytest.mark.root]

AUTH_NS = "198.18.1.53"   # knot: fresh answers for the load-balanced names (no resolver cache)


def scan(db, *args, timeout=120):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", *args,
                "--json", dsn=db.dsn, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def rows(db, q, *p):
    with db.connect() as conn:
        return conn.execute(q, p).fetchall()


def import_list(db, tmp_path, names, name="tfo"):
    f = tmp_path / f"{name}.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
    r = run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn)
    assert r.returncode == 0, r.stderr


def test_support_scan_matches_ground_truth(db, testbed, tmp_path):
    gt = testbed.status()["ground_truth"]
    hosts = [h for h in gt["tfo_hosts"]]
    import_list(db, tmp_path, [h["hostname"] for h in hosts] + ["missing.tfo.test"])
    out = scan(db, "tfo", "--list", "tfo", "--all-addresses", "--kernel-check", "2", "--cooldown", "0.5")
    run = out["run_id"]
    got = {(h, a): (st, reply, kind, clen) for h, a, st, reply, kind, clen in rows(
        db, "SELECT hostname, host(address), status, reply, tfo_kind, cookie_len FROM tfo_probe WHERE run_id=%s", run)}
    # every configured address of every host, classified exactly (IPv4 and IPv6)
    names = gt["dns"]["names"]
    n_expected = 0
    for h in hosts:
        published = names[h["hostname"]].get("A", {}).get("values", []) + names[h["hostname"]].get("AAAA", {}).get("values", [])
        for a in published:
            n_expected += 1
            st, reply, kind, clen = got[(h["hostname"], str(ipaddress.ip_address(a)))]
            assert (st, reply) == ("success", "syn-ack")
            if h["tfo"]:
                assert (kind, clen) == ("rfc7413", 8), (h, a)   # Linux issues 8-byte cookies
            else:
                assert (kind, clen) == (None, None), (h, a)
    assert got[("missing.tfo.test", None)][0] == "resolution-failed"
    assert len(got) == n_expected + 1
    # kernel path: the kernel cached the same cookie and its SYN data was accepted
    kc = rows(db, "SELECT raw_cookie, kernel_cookie, syn_data_acked, error FROM tfo_kernel_check WHERE run_id=%s", run)
    assert len(kc) == 2
    for raw, kern, acked, err in kc:
        assert err is None and raw == kern and acked is True
    # Table 3.1 view: denominator = every hostname of the cut
    n_tfo = sum(1 for h in hosts if h["tfo"])
    cut = rows(db, "SELECT hostnames, resolution_failed, tfo FROM tfo_support_by_cut WHERE run_id=%s AND cut=10", run)
    assert cut == [(len(hosts) + 1, 1, n_tfo)]


def test_rst_silence_unreachable_and_blocklist(db, testbed, tmp_path):
    # closed port -> RST; an address of a namespace nobody answers -> silence
    out = scan(db, "tfo", "--cidr", "198.18.12.0/30", "--port", "443", "--cooldown", "0.5")
    st = dict(rows(db, "SELECT host(address), status FROM tfo_probe WHERE run_id=%s", out["run_id"]))
    assert st == {"198.18.12.0": "connection-timeout", "198.18.12.1": "success",
                  "198.18.12.2": "connection-timeout", "198.18.12.3": "connection-timeout"}
    out = scan(db, "tfo", "--cidr", "198.18.10.1/32", "--port", "444", "--cooldown", "0.5")
    assert rows(db, "SELECT status, reply FROM tfo_probe WHERE run_id=%s", out["run_id"]) == [("connection-refused", "rst")]
    # blocklisted: recorded as blocked and never sent a packet (checked by a sniffer on the vantage bridge)
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.11.0/24"]\n')
    import_list(db, tmp_path, ["on1.tfo.test", "on2.tfo.test"], name="bl")
    sniffer = subprocess.Popen(testbed.exec_argv([sys.executable, "-c", SNIFFER, "198.18.11.1", "12"]),
                               stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "--config", str(cfg),
                "scan", "tfo", "--list", "bl", "--cooldown", "0.5", "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    seen_syns, seen_to_on1 = map(int, sniffer.communicate(timeout=30)[0].split())
    assert seen_syns == 0
    assert seen_to_on1 >= 1   # the sniffer did see the allowed probe
    assert dict(rows(db, "SELECT hostname, status FROM tfo_probe WHERE run_id=%s", run)) == {
        "on1.tfo.test": "success", "on2.tfo.test": "blocked"}


def test_zmap_discovery_then_tfo(db, testbed, tmp_path):
    """--zmap: Debian zmap finds the open port-443 addresses of a /24, only those are TFO-probed;
    the blocklist reaches zmap (it sends nothing to blocked addresses)."""
    gt = testbed.status()["ground_truth"]
    names = gt["dns"]["names"]
    net = ipaddress.ip_network("198.18.10.0/24")
    truth = {}   # address -> TFO on, for every configured TFO host address in the /24
    for h in gt["tfo_hosts"]:
        for a in names[h["hostname"]].get("A", {}).get("values", []):
            if ipaddress.ip_address(a) in net:
                truth[a] = h["tfo"]
    assert len(truth) >= 3
    out = scan(db, "tfo", "--cidr", str(net), "--zmap", "--cooldown", "1")
    assert out["counts"]["zmap-sent"] == 256 and out["counts"]["zmap-open"] == len(truth)
    got = dict(rows(db, "SELECT host(address), cookie_len IS NOT NULL FROM tfo_probe WHERE run_id=%s", out["run_id"]))
    assert got == truth
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.10.0/25"]\n')
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "--config", str(cfg),
                "scan", "tfo", "--cidr", str(net), "--zmap", "--cooldown", "1", "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    upper = {a: v for a, v in truth.items() if ipaddress.ip_address(a) >= ipaddress.ip_address("198.18.10.128")}
    assert out["counts"]["zmap-sent"] == 128 and out["counts"]["zmap-open"] == len(upper)
    # a network the policy blocks entirely: one line, exit 2, nothing sent
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "tfo",
                "--cidr", "10.0.0.0/30", "--zmap", dsn=db.dsn)
    assert r.returncode == 2 and "blocked by the etiquette policy" in r.stderr



def test_parallel_senders_recover_every_cookie(db, testbed):
    """--senders 2 (two forked, CPU-pinned sending processes) over a /20 of the scale
    namespace: one row per address, every address answers with a cookie, and the cookies are
    exactly the ones a single sender gets (same server key, same client address)."""
    one = scan(db, "tfo", "--cidr", "198.19.16.0/20", "--rate", "1e9", "--cooldown", "1")
    two = scan(db, "tfo", "--cidr", "198.19.16.0/20", "--rate", "1e9", "--cooldown", "1", "--senders", "2")
    got = {}
    for out in (one, two):
        r = rows(db, "SELECT host(address), cookie FROM tfo_probe WHERE run_id=%s", out["run_id"])
        assert len(r) == 4096 and len({a for a, _ in r}) == 4096
        assert all(c is not None and len(c) == 8 for _, c in r)
        got[out["run_id"]] = {a: bytes(c) for a, c in r}
    assert got[one["run_id"]] == got[two["run_id"]]
    assert rows(db, "SELECT parameters->>'senders' FROM scan_run WHERE id=%s", two["run_id"]) == [("2",)]


SNIFFER = textwrap.dedent(r"""
    import socket, sys, time
    target = socket.inet_aton(sys.argv[1]); end = time.time() + float(sys.argv[2])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.settimeout(0.2)  # ETH_P_ALL: outgoing too
    blocked = allowed = 0
    while time.time() < end:
        try: p = s.recv(2048)
        except socket.timeout: continue
        if p[12:14] != b'\x08\x00': continue
        ip = p[14:]
        if len(ip) < 40 or ip[9] != 6 or ip[(ip[0] & 15) * 4 + 13] & 0x12 != 0x02: continue
        if ip[16:20] == target: blocked += 1
        elif ip[16:20] == socket.inet_aton("198.18.10.1"): allowed += 1
    print(blocked, allowed)
""")


def test_lb_survey_pools_rates_and_resume(db, testbed, tmp_path):
    gt = testbed.status()["ground_truth"]
    pools = {n: set(v["pool"]) for n, v in gt["dns"]["load_balanced"].items()}
    import_list(db, tmp_path, sorted(pools) + ["on1.tfo.test", "off.tfo.test"])
    rounds = 40
    common = ["--nameserver", AUTH_NS, "--cooldown", "0.1"]
    out = scan(db, "tfo-lb", "--list", "tfo", "--rounds", str(rounds), "--interval", "0", "--stop-after", "3", *common)
    assert out["status"] == "cancelled" and out["counts"]["rounds_done"] == 3
    out = scan(db, "tfo-lb", "--resume", str(out["run_id"]), timeout=180)
    run = out["run_id"]
    assert out["status"] == "finished" and out["counts"]["rounds_done"] == rounds
    obs = rows(db, "SELECT hostname, round, host(address), cookie_len FROM tfo_probe WHERE run_id=%s ORDER BY 1, 2", run)
    per_host: dict[str, list[str]] = {}
    always: dict[str, bool] = {}
    for h, _rnd, a, clen in obs:
        per_host.setdefault(h, []).append(a)
        always[h] = always.get(h, True) and bool(clen)
    assert all(len(v) == rounds for v in per_host.values())       # exactly one row per round, no duplicates
    for name, pool in pools.items():
        assert set(per_host[name]) - {None} == pool               # every pool address seen, nothing else
    assert set(per_host["on1.tfo.test"]) - {None} == {"198.18.10.1"}
    # (a None address = a resolution that failed on a loaded machine: recorded, never a crash)
    hosts = dict(rows(db, "SELECT hostname, addresses FROM tfo_lb_host WHERE run_id=%s AND tfo_class='always'", run))
    truth = {**{n: len(p) for n, p in pools.items()}, "on1.tfo.test": 1}
    assert hosts == {h: n for h, n in truth.items() if always[h]}
    assert len(hosts) >= 2
    assert rows(db, "SELECT tfo_class FROM tfo_lb_host WHERE run_id=%s AND hostname='off.tfo.test'", run) == [("never",)]
    # per-connection "new address" counts equal an independent recount of the raw rows
    expected = {}
    for h, seq in per_host.items():
        if h not in hosts:
            continue
        for k in range(2, rounds + 1):
            expected[k] = expected.get(k, 0) + (seq[k - 1] not in seq[:k - 1])
    view = {k: (n, m) for k, n, m in rows(db, "SELECT connection, hostnames, new_address FROM tfo_lb_new_address WHERE run_id=%s", run)}
    assert view == {k: (len(hosts), m) for k, m in expected.items()}
    assert sum(m for m in expected.values()) == sum(len(p) - 1 for p in pools.values())   # each extra address is new once
    # figures from the database
    for name in ("tfo-addresses-per-host", "tfo-lb-failure-rate"):
        r = run_cli("plot", name, "--out", str(tmp_path / "figs"), dsn=db.dsn)
        assert r.returncode == 0, r.stderr
        for ext in ("png", "svg", "csv"):
            assert (tmp_path / "figs" / f"{name}.{ext}").stat().st_size > 0
    with open(tmp_path / "figs" / "tfo-lb-failure-rate.csv") as fh:
        fig_rows = {int(r["connection"]): int(r["new_address"]) for r in csv.DictReader(fh)}
    assert fig_rows == expected


def test_cookie_reuse_across_addresses(db, testbed, tmp_path):
    gt = testbed.status()["ground_truth"]
    multi = [h for h in gt["tfo_hosts"] if len(h["addresses"]) >= 2 and h["tfo"]]
    import_list(db, tmp_path, [h["hostname"] for h in multi])
    out = scan(db, "tfo-reuse", "--list", "tfo", "--cooldown", "0.5")
    run = out["run_id"]
    got = rows(db, "SELECT hostname, host(cookie_from), host(address), control, reply, data_acked, new_cookie, cookie"
                   " FROM tfo_reuse WHERE run_id=%s", run)
    v4 = {h["hostname"]: [a for a in h["addresses"] if ":" not in a] for h in multi}
    assert len(got) == sum(len(a) ** 2 for a in v4.values() if len(a) >= 2)   # hosts with one v4 address: no pairs
    own_cookie = {(h, frm): c for h, frm, to, ctl, *_rest, c in got if ctl}
    for h, frm, to, _control, reply, acked, new, _cookie in got:
        assert reply == "syn-ack"
        # Linux binds cookies to the (client, server) address pair: only the issuing address
        # accepts it, even inside one key group (the testbed's truth)
        assert acked is (frm == to)
        if frm != to:
            assert new == own_cookie[(h, to)]        # B rejects A's cookie and issues its own
        else:
            assert new is None


def test_usage_errors(db):
    for args in (["tfo", "--list", "nope"], ["tfo", "--cidr", "x"], ["tfo", "--cidr", "198.18.10.1/32", "--port", "0"],
                 ["tfo-lb", "--list", "x", "--interval", "soon"], ["tfo", "--list", "a", "--cidr", "198.18.10.1/32"],
                 ["tfo", "--cidr", "198.18.10.1/32", "--senders", "0"]):
        r = run_cli("scan", *args, dsn=db.dsn)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert rows(db, "SELECT count(*) FROM scan_run") == [(0,)]


def test_names_of_one_address_share_one_probe(db, testbed, tmp_path):
    """A SYN carries no hostname: 20 names of one address (a CDN-like wildcard) get one
    probe, not 20 at the global rate (which broke etiquette.per_destination_pps, issue 26's
    scale run), and every name still gets its row with that probe's answer."""
    names = [f"n{i}.tlsbench.example.test" for i in range(20)]
    import_list(db, tmp_path, names, name="cdn")
    out = scan(db, "tfo", "--list", "cdn", "--port", "443", "--cooldown", "0.5")
    got = rows(db, "SELECT hostname, host(address), status, reply FROM tfo_probe WHERE run_id=%s", out["run_id"])
    assert sorted(h for h, *_ in got) == sorted(names)
    assert {(a, st, reply) for _, a, st, reply in got} == {("198.18.2.10", "success", "syn-ack")}
    assert out["counts"]["sent"] == 1, out["counts"]   # packets the engine put on the wire


def test_a_list_streamed_in_chunks_keeps_one_probe_per_address(db, testbed, tmp_path):
    """Issue 26: the list is read, resolved and probed chunk by chunk (bounded memory); the
    names of one address that a chunk boundary cuts apart still share the one probe (the
    chunk before's outcome is reused), and every name gets its row. Chunks of 7 names here."""
    names = [f"n{i}.tlsbench.example.test" for i in range(20)] + ["nxdomain-x.example.test"]
    import_list(db, tmp_path, names, name="chunks")
    code = ("import runpy, sys; import scanners.tfo.scanner as s; s.TfoScanner.chunk = 7; "
            "import netsurvey.scanning as v; v.RESOLVE_BATCH = 5; "
            "sys.argv = ['netsurvey'] + sys.argv[1:]; runpy.run_module('netsurvey.cli', run_name='__main__')")
    r = run_cli("testbed", "exec", "--", sys.executable, "-c", code, "--dsn", db.dsn, "scan", "tfo", "--list", "chunks",
                "--port", "443", "--cooldown", "0.3", "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    got = rows(db, "SELECT hostname, host(address), status FROM tfo_probe WHERE run_id=%s", out["run_id"])
    assert sorted(h for h, *_ in got) == sorted(names)
    assert {(a, st) for h, a, st in got if h != "nxdomain-x.example.test"} == {("198.18.2.10", "success")}
    assert [st for h, _, st in got if h == "nxdomain-x.example.test"] == ["resolution-failed"]
    assert out["counts"]["sent"] == 1, out["counts"]
