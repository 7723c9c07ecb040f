"""RIPE Atlas campaign (atlas/, issue 8) against the testbed: the stand-in API at atlas.test,
unbound, the instrumented authoritative server in the atlasres namespace. Expected values
come from the stand-in's fixtures (atlas_ground_truth) and a hand-made AS map."""
from __future__ import annotations

import csv
import ipaddress
import json
import math
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO, run_cli

sys.path.insert(0, str(REPO))

from atlas.asmap import AsnMap, classify, write_ipasn  # noqa: E402
from atlas.parse import parse_dns, parse_ping  # noqa: E402
from testbed.atlas_api import atlas_ground_truth, build_result, load_fixtures, ping_series, target_profile  # noqa: E402

KEY_FILE = Path("/run/netsurvey/testbed/atlas-api-key")
STATE = Path("/run/netsurvey/testbed/atlas")
ZONE = "whoami.example.test"
SERVER = "198.18.0.1"
DE = [1001, 1002, 1003, 1004, 1005, 1006]
#: hand-made origin ASes: each probe /24 and its ISP's resolver /24 share an AS, except
#: 198.18.112.53 (probe 1005's resolver), a "public" resolver in AS64510.
ASNS = {"198.18.100.0/24": 64496, "198.18.110.0/24": 64496, "198.18.101.0/24": 64497,
        "198.18.111.0/24": 64497, "198.18.102.0/24": 64498, "198.18.112.0/24": 64498,
        "198.18.112.53/32": 64510, "198.18.0.0/24": 64500}
#: egress addresses the atlasres namespace answers pings for (config/testbed.toml)
PINGABLE = [ipaddress.ip_network(n) for n in ("198.18.110.0/23", "198.18.112.0/24")]

pytestmark = pytest.mark.timeout(120)


def _expected_avg(probe: dict, target: str, packets: int = 5):
    got = [x for x in ping_series(target_profile(probe, target, target), packets) if x is not None]
    return round(sum(got) / len(got), 3) if got else None


def _pdisc(values, p):
    s = sorted(values)
    return s[max(0, math.ceil(p * len(s)) - 1)]


# --------------------------------------------------------------------------- pure parsing

def test_parsing_and_as_classification_match_fixture(tmp_path):
    """Results built by the stand-in's own generator, parsed through sagan, equal the
    fixture values: per-resolver response times, timeouts, whoami egress, lost pings."""
    fx = load_fixtures(REPO / "testbed" / "atlas_fixtures")
    gt = atlas_ground_truth()
    dns_msm = {"id": 1, "definition": {"type": "dns", "af": 4, "query_argument": ZONE,
                                       "query_type": "A", "use_probe_resolver": True,
                                       "prepend_probe_id": True, "timeout": 5000}}
    for pid in DE:
        probe = gt["probes"][pid]
        obs = parse_dns(build_result(fx, dns_msm, fx["probes"][pid], 1700000000))
        want = [r for r in probe["resolvers"] if r["af"] == 4]
        assert [o.resolver_addr for o in obs] == [r["address"] for r in want]
        for o, r in zip(obs, want):
            assert o.rt_ms == r["rtt_ms"]
            if r["timeout"]:
                assert (o.error, o.egress_addr) == ("timeout", None)
            else:
                assert (o.error, o.egress_addr) == (None, r["egress_v4"])
                assert o.qname == f"{pid}.1700000000.{ZONE}"
    ping_msm = {"id": 2, "definition": {"type": "ping", "af": 4, "target": "198.18.110.1",
                                        "packets": 5}}
    p = parse_ping(build_result(fx, ping_msm, fx["probes"][1002], 1700000000))
    assert p.rtts_ms == (13.9, None, 14.1, 13.9, None) and (p.sent, p.rcvd) == (5, 3)
    assert p.avg_ms == _expected_avg(gt["probes"][1002], "198.18.110.1") == 13.967
    dead = parse_ping(build_result(fx, ping_msm, fx["probes"][1003], 1700000000))
    assert (dead.rcvd, dead.avg_ms, dead.error) == (0, None, "no-reply")
    amap = AsnMap(write_ipasn(tmp_path / "ipasn.dat", ASNS))
    assert amap.lookup("198.18.112.53").asn == 64510 and amap.lookup("198.18.112.54").asn == 64498
    assert amap.lookup("192.168.1.1").asn is None
    assert classify(64498, 64510) == "other-as" and classify(64496, 64496) == "same-as"
    assert classify(None, 64496) is None


# --------------------------------------------------------------------------- testbed

@pytest.fixture
def key(testbed):
    return KEY_FILE.read_text().strip()


def _campaign(db, tmp_path, key, *extra):
    asn = write_ipasn(tmp_path / "ipasn.dat", ASNS)
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                "atlas", "run", "--probes", "country:DE", "--count", "800", "--server", SERVER,
                "--zone", ZONE, "--api-host", "atlas.test", "--poll", "0.3", "--asn-db", str(asn),
                "--json", *extra, env={"NETSURVEY_ATLAS_KEY": key})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_campaign_end_to_end(db, testbed, key, tmp_path):
    before = sum(1 for _ in (STATE / "requests.jsonl").open()) if (STATE / "requests.jsonl").exists() else 0
    res = _campaign(db, tmp_path, key)
    run_id = res["run_id"]
    gt = atlas_ground_truth()

    # the stand-in received well-formed creation requests with the key header
    reqs = [json.loads(x) for x in (STATE / "requests.jsonl").read_text().splitlines()[before:]]
    posts = [r for r in reqs if r["method"] == "POST"]
    assert posts and all(r["status"] == 201 for r in posts)
    assert all(r["headers"]["authorization"] == f"Key {key}" for r in posts)
    dns_posts = [p for p in posts if p["body"]["definitions"][0]["type"] == "dns"]
    assert len(dns_posts) == 1
    d = dns_posts[0]["body"]["definitions"][0]
    assert (d["use_probe_resolver"], d["prepend_probe_id"], d["query_argument"], d["af"]) == (True, True, ZONE, 4)
    assert "target" not in d and dns_posts[0]["body"]["is_oneoff"] is True
    assert dns_posts[0]["body"]["probes"] == [{"type": "country", "value": "DE", "requested": 800}]
    pings = [p["body"] for p in posts if p["body"]["definitions"][0]["type"] == "ping"]
    assert all(b["definitions"][0]["packets"] == 5 for b in pings)
    targets = {b["definitions"][0]["target"] for b in pings}
    egress = {r["egress_v4"] for p in DE for r in gt["probes"][p]["resolvers"]
              if r["af"] == 4 and not r["timeout"]}
    assert SERVER in targets and egress <= targets
    private = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                 "100.64.0.0/10")]
    assert not any(ipaddress.ip_address(t) in n for t in targets for n in private)  # never pinged

    with psycopg.connect(db.dsn) as conn:
        q = lambda sql, *a: conn.execute(sql, a or (run_id,)).fetchall()  # noqa: E731
        assert sorted(r[0] for r in q("SELECT prb_id FROM atlas_probe WHERE run_id=%s")) == DE
        dns = {(p, a): (rt, eg, err) for p, a, rt, eg, err in q(
            "SELECT prb_id, host(resolver_addr), rt_ms, host(egress_addr), error"
            " FROM atlas_dns_response WHERE run_id=%s")}
        want = {(p, r["address"]): (r["rtt_ms"], None if r["timeout"] else r["egress_v4"],
                                    "timeout" if r["timeout"] else None)
                for p in DE for r in gt["probes"][p]["resolvers"] if r["af"] == 4}
        assert dns == want
        rtt = {(p, a): (v, s) for p, a, v, s in q(
            "SELECT prb_id, host(resolver_addr), rtt_ms, same_as FROM atlas_resolver_rtt WHERE run_id=%s")}
        want_rtt = {}
        for (p, _a), (_rt, eg, _e) in want.items():
            if eg and _expected_avg(gt["probes"][p], eg) is not None:
                want_rtt[(p, eg)] = (_expected_avg(gt["probes"][p], eg), eg != "198.18.112.53")
        assert rtt == want_rtt
        # failures are kept: DNS timeouts, private local resolvers, lost pings
        fail = set(q("SELECT prb_id, stage, address, reason FROM atlas_failure WHERE run_id=%s"))
        assert (1002, "dns", "198.18.110.2", "timeout") in fail
        assert (1005, "dns", "192.168.0.1", "timeout") in fail
        assert (1006, "ping-local-resolver", "100.64.0.53", "private-address") in fail
        assert (1003, "ping-server", SERVER, "no-reply") in fail
        # RTT_Server: every egress in the atlasres ranges answered all 5 pings
        sp = {a: (st, s, r) for a, st, s, r in q(
            "SELECT host(address), status, sent, rcvd FROM atlas_server_ping WHERE run_id=%s")}
        assert set(sp) == egress
        for a, (st, s, r) in sp.items():
            ok = any(ipaddress.ip_address(a) in n for n in PINGABLE)
            assert (st, s, r) == (("success", 5, 5) if ok else ("connection-timeout", 5, 0))
        trip = {p: (dns_, direct) for p, dns_, direct in q(
            "SELECT prb_id, rtt_dns_ms, rtt_direct_ms FROM atlas_rtt_triplet WHERE run_id=%s")}
        assert trip == {p: (want_rtt[(p, e)][0], _expected_avg(gt["probes"][p], SERVER))
                        for (p, e), (_v, same) in sorted(want_rtt.items(), reverse=True) if same}

    # figures: numbers equal hand-computed percentiles of the fixture values
    out = tmp_path / "fig"
    r = run_cli("plot", "atlas-resolver-rtt", "--run", str(run_id), "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    rows = {x["group"]: x for x in csv.DictReader((out / "atlas-resolver-rtt.csv").open())}
    allv = [v for v, _s in want_rtt.values()]
    same = [v for v, s in want_rtt.values() if s]
    other = [v for v, s in want_rtt.values() if not s]
    for g, vals in (("all", allv), ("same AS", same), ("other AS", other)):
        assert int(rows[g]["n"]) == len(vals)
        assert float(rows[g]["p95_ms"]) == _pdisc(vals, 0.95)
        assert float(rows[g]["p99_ms"]) == _pdisc(vals, 0.99)
        assert float(rows[g]["share_below_10ms"]) == pytest.approx(sum(v < 10 for v in vals) / len(vals))
    assert (out / "atlas-resolver-rtt.png").stat().st_size > 0
    r = run_cli("plot", "atlas-rtt-triplet", "--run", str(run_id), "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    rows = {x["metric"]: x for x in csv.DictReader((out / "atlas-rtt-triplet.csv").open())}
    assert float(rows["RTT_DNS"]["p50_ms"]) == _pdisc([v[0] for v in trip.values()], 0.5)
    assert float(rows["RTT_direct"]["p90_ms"]) == _pdisc([v[1] for v in trip.values()], 0.9)
    assert int(rows["RTT_Server"]["n"]) == len(trip) == 4

    # re-fetching adds nothing twice
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                "atlas", "fetch", "--run", str(run_id), "--api-host", "atlas.test", "--json")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["added"] == {"raw": 0, "dns": 0, "ping": 0, "resolvers": 0}
    assert again["totals"] == {k: v for k, v in res.items() if k in again["totals"]}


def test_authoritative_logs_resolver_egress_via_unbound(db, testbed):
    """query -> unbound -> instrumented authoritative: the logged source address (and the
    whoami answer) is unbound's egress address, the dns namespace's link address."""
    names = [n["name"] for n in testbed.status()["ground_truth"]["namespaces"]]
    unbound_egress = f"198.18.0.{10 + names.index('dns')}"  # testbed/README.md: 198.18.0.(10+i)
    zone = "dnstest.example.test"
    srv = subprocess.Popen(["ip", "netns", "exec", "nstb-atlasres", sys.executable, "-m",
                            "netsurvey.cli", "--dsn", db.dsn, "atlas", "authoritative", "--zone",
                            zone, "--listen", "198.18.108.53", "--max-seconds", "30"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().startswith("READY"), srv.stderr.read()
        code = (
            "import dns.resolver, dns.message, dns.query, dns.edns, json\n"
            f"a = dns.resolver.resolve('r1.{zone}', 'A')[0].address\n"
            f"q = dns.message.make_query('ecs.{zone}', 'TXT', use_edns=0,"
            " options=[dns.edns.ECSOption('198.18.7.0', 24)])\n"
            "r = dns.query.udp(q, '198.18.108.53', timeout=2)\n"
            "ref = dns.query.udp(dns.message.make_query('www.example.test', 'A'), '198.18.108.53', timeout=2)\n"
            "print(json.dumps([a, r.answer[0][0].strings[0].decode(), ref.rcode()]))\n")
        r = run_cli("testbed", "exec", "--", sys.executable, "-c", code)
        assert r.returncode == 0, r.stderr
        answer, txt, refused = json.loads(r.stdout)
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert answer == unbound_egress
    assert txt == "198.18.0.1" and refused == 5  # vantage address; REFUSED outside the zone
    with psycopg.connect(db.dsn) as conn:
        rows = conn.execute("SELECT qname, qtype, host(src_addr), host(ecs_addr), ecs_source_prefix,"
                            " rcode FROM atlas_auth_query ORDER BY received_at").fetchall()
        run = conn.execute("SELECT status FROM scan_run WHERE kind='atlas-authoritative'").fetchone()
    # unbound forwards ECS (testbed: subnetcache): the vantage's /24
    vantage24 = str(ipaddress.ip_network(testbed.status()["ground_truth"]["network"]["vantage_v4"] + "/24",
                                         strict=False).network_address)
    assert (f"r1.{zone}", "A", unbound_egress, vantage24, 24, "NOERROR") in rows
    assert (f"ecs.{zone}", "TXT", "198.18.0.1", "198.18.7.0", 24, "NOERROR") in rows
    assert ("www.example.test", "A", "198.18.0.1", None, None, "REFUSED") in rows
    assert run == ("finished",)


_API_ERRORS = r"""
import json, sys
sys.path.insert(0, %(repo)r)
import requests
from atlas.api import AtlasClient, ApiOptions, AtlasApiError, AtlasAuthError
key = open(%(keyfile)r).read().strip()
faults = "https://atlas.test/_standin/faults"
waits = []
out = {}
ping = {"type": "ping", "af": 4, "target": "198.18.110.1", "description": "t", "is_oneoff": True}
src = [{"type": "probes", "value": "1001", "requested": 1}]
try:
    requests.post(faults, json={"http_429": 2, "retry_after": 2, "match": "/measurements"})
    c = AtlasClient(ApiOptions(host="atlas.test", key=key), sleep=waits.append)
    out["ids"] = c.create([ping], src)
    out["waits_429"] = list(waits)
    requests.post(faults, json={"http_5xx": 5, "status_5xx": 503, "match": "/measurements"})
    waits.clear()
    c = AtlasClient(ApiOptions(host="atlas.test", key=key, max_retries=2, backoff_s=0.5), sleep=waits.append)
    try:
        c.create([ping], src)
    except AtlasApiError as e:
        out["err_5xx"] = [str(e), e.status, list(waits)]
    requests.post(faults, json={})
    try:
        AtlasClient(ApiOptions(host="atlas.test", key="wrong")).create([ping], src)
    except AtlasAuthError as e:
        out["err_401"] = [str(e), e.status]
    try:
        AtlasClient(ApiOptions(host="atlas.test", key=key)).create([dict(ping, packets=99)], src)
    except AtlasApiError as e:
        out["err_400"] = [str(e), e.status]
finally:
    requests.post(faults, json={})
print(json.dumps(out))
"""


def test_api_errors_retries_and_messages(testbed):
    r = run_cli("testbed", "exec", "--", sys.executable, "-c",
                _API_ERRORS % {"repo": str(REPO), "keyfile": str(KEY_FILE)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["ids"]) == 1 and out["waits_429"] == [2.0, 2.0]  # Retry-After honoured
    msg, status, waits = out["err_5xx"]
    assert status == 503 and waits == [0.5, 1.0]  # exponential backoff, then give up
    assert "after 2 retries" in msg and "server error (503)" in msg
    msg, status = out["err_401"]
    assert status == 401 and "refused the API key" in msg and "NETSURVEY_ATLAS_KEY" in msg
    msg, status = out["err_400"]
    assert status == 400 and "/definitions/0/packets" in msg


def test_cli_bad_input_and_bad_key(db, testbed, tmp_path):
    env = {"NETSURVEY_ATLAS_KEY": "wrong-key"}
    r = run_cli("atlas", "run", "--probes", "planet:earth", "--server", SERVER, "--zone", ZONE,
                dsn=db.dsn, env=env)
    assert r.returncode == 2 and "--probes 'planet:earth'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("atlas", "run", "--probes", "country:DE", "--server", SERVER, "--zone", ZONE,
                "--asn-db", str(tmp_path / "missing.dat"), dsn=db.dsn, env=env)
    assert r.returncode == 2 and "IP-to-ASN file not found" in r.stderr
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                "atlas", "run", "--probes", "country:DE", "--server", SERVER, "--zone", ZONE,
                "--api-host", "atlas.test", env=env)
    assert r.returncode == 2 and "refused the API key (401)" in r.stderr
    with psycopg.connect(db.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM atlas_measurement").fetchone()[0] == 0
        assert conn.execute("SELECT status FROM scan_run WHERE kind='atlas'").fetchall() == [("failed",)]
