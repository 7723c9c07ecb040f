"""The RIPE Atlas API stand-in (testbed/atlas_api.py) driven by the real clients:
ripe.atlas.cousteau for requests and ripe.atlas.sagan for parsing, over HTTPS on loopback
with a throwaway CA.  Parsed values are compared with atlas_ground_truth()."""
from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

cousteau = pytest.importorskip("ripe.atlas.cousteau")
sagan = pytest.importorskip("ripe.atlas.sagan")

import requests  # noqa: E402  (a dependency of cousteau)
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402
from ripe.atlas.cousteau import (  # noqa: E402
    AtlasCreateRequest,
    AtlasResultsRequest,
    AtlasSource,
    AtlasStopRequest,
    Dns,
    Measurement,
    Ping,
    ProbeRequest,
)
from ripe.atlas.sagan import DnsResult, PingResult, Result  # noqa: E402

from conftest import REPO  # noqa: E402

sys.path.insert(0, str(REPO))

from testbed.atlas_api import DEFAULT_FIXTURES, atlas_ground_truth, ping_series, target_profile  # noqa: E402

KEY = "11111111-2222-3333-4444-555555555555"
STOP_DELAY = 0.8
DE_CONNECTED = [1001, 1002, 1003, 1004, 1005, 1006]
STRICT = {"on_malformation": Result.ACTION_FAIL, "on_error": Result.ACTION_IGNORE}

pytestmark = pytest.mark.timeout(60)


def _make_ca_and_cert(d: Path) -> tuple[Path, Path, Path]:
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netsurvey throwaway test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = d / "ca.pem", d / "server.pem", d / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca_file, cert_file, key_file


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The stand-in as its real command line, on 127.0.0.1 and a free port."""
    d = tmp_path_factory.mktemp("atlas")
    ca, cert, key = _make_ca_and_cert(d)
    state = d / "state"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    log = (d / "stderr.log").open("w")
    proc = subprocess.Popen(  # stopped in the finally below, by this handle only
        [sys.executable, "-m", "testbed.atlas_api", "--listen", "127.0.0.1", "--port", "0",
         "--cert", str(cert), "--key", str(key), "--fixtures", str(DEFAULT_FIXTURES),
         "--state", str(state), "--api-key", KEY, "--stop-delay", str(STOP_DELAY), "--quiet"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        deadline = time.monotonic() + 15
        while not (state / "ready.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"stand-in did not start: {(d / 'stderr.log').read_text()}")
            time.sleep(0.05)
        assert proc.stdout.readline().startswith("READY https://127.0.0.1:")
        port = json.loads((state / "ready.json").read_text())["endpoints"][0][1]
        old = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = "localhost,127.0.0.1"
        yield {"server": f"localhost:{port}", "verify": str(ca), "state": state, "port": port,
               "proc": proc}
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        log.close()


@pytest.fixture(scope="module")
def gt():
    return atlas_ground_truth(DEFAULT_FIXTURES)


def _requests(api) -> list[dict]:
    return [json.loads(x) for x in (api["state"] / "requests.jsonl").read_text().splitlines()]


def _conn(api) -> dict:
    return {"server": api["server"], "verify": api["verify"]}


def _create(api, measurements, sources, key=KEY):
    return AtlasCreateRequest(key=key, measurements=measurements, sources=sources,
                              is_oneoff=True, **_conn(api)).create()


def _wait_stopped(api, msm_id: int, timeout: float = 10.0) -> Measurement:
    end = time.monotonic() + timeout
    while True:
        m = Measurement(id=msm_id, **_conn(api))
        if m.status == "Stopped" or time.monotonic() > end:
            return m
        time.sleep(0.1)


def _results(api, msm_id: int, **kw) -> list[dict]:
    ok, res = AtlasResultsRequest(msm_id=msm_id, **_conn(api), **kw).create()
    assert ok, res
    return res


@pytest.fixture(scope="module")
def campaign(api):
    """One creation request like the thesis's: DNS via the probes' own resolvers, DNS to an
    explicit resolver, and ping to it, from every German probe."""
    dns_local = Dns(af=4, description="netsurvey probe-resolver RTT",
                    query_argument="whoami.example.test", query_type="A", query_class="IN",
                    use_probe_resolver=True, set_rd_bit=True)
    dns_target = Dns(af=4, description="netsurvey resolver RTT", target="198.18.1.1",
                     query_argument="www.example.test", query_type="A", query_class="IN")
    ping = Ping(af=4, description="netsurvey ping", target="198.18.1.1", packets=4)
    src = AtlasSource(type="country", value="DE", requested=20)
    t0 = time.time()
    ok, resp = _create(api, [dns_local, dns_target, ping], [src])
    assert ok, resp
    first = Measurement(id=resp["measurements"][0], **_conn(api))
    return {"ids": resp["measurements"], "first_status": first.status, "t0": t0}


def test_creation_request_recorded_with_definitions_and_key(api, campaign):
    assert len(campaign["ids"]) == 3 and len(set(campaign["ids"])) == 3
    posts = [r for r in _requests(api) if r["method"] == "POST" and r["status"] == 201]
    assert len(posts) == 1
    rec = posts[0]
    assert rec["path"] == "/api/v2/measurements/"
    assert rec["headers"]["authorization"] == f"Key {KEY}"
    assert rec["headers"]["user-agent"].startswith("RIPE ATLAS Cousteau")
    body = rec["body"]
    assert body["is_oneoff"] is True
    assert body["probes"] == [{"type": "country", "value": "DE", "requested": 20}]
    d0, d1, d2 = body["definitions"]
    assert d0 == {"type": "dns", "af": 4, "description": "netsurvey probe-resolver RTT",
                  "query_argument": "whoami.example.test", "query_type": "A",
                  "query_class": "IN", "use_probe_resolver": True, "set_rd_bit": True}
    assert d1["target"] == "198.18.1.1" and "use_probe_resolver" not in d1
    assert d2["type"] == "ping" and d2["packets"] == 4


def test_wrong_or_missing_key_is_401(api):
    src = [AtlasSource(type="probes", value="1001", requested=1)]
    msm = [Ping(af=4, description="x", target="198.18.1.1")]
    ok, resp = _create(api, msm, src, key="not-the-key")
    assert not ok and resp["error"]["status"] == 401
    ok, resp = _create(api, msm, src, key=None)
    assert not ok and resp["error"]["status"] == 401
    recs = [r for r in _requests(api) if r["method"] == "POST" and r["status"] == 401]
    assert any(r["headers"].get("authorization") == "Key not-the-key" for r in recs)
    assert any("authorization" not in r["headers"] for r in recs)


def test_invalid_definition_is_400(api):
    # neither target nor use_probe_resolver; packets out of range
    bad = [Dns(af=4, description="x", query_argument="a.test", query_type="A", query_class="IN"),
           Ping(af=4, description="y", target="198.18.1.1", packets=99)]
    ok, resp = _create(api, bad, [AtlasSource(type="country", value="DE", requested=1)])
    assert not ok and resp["error"]["status"] == 400
    pointers = {e["source"]["pointer"] for e in resp["error"]["errors"]}
    assert pointers == {"/definitions/0/target", "/definitions/1/packets"}


def test_status_goes_to_stopped(api, campaign):
    assert campaign["first_status"] in ("Specified", "Ongoing")
    m = _wait_stopped(api, campaign["ids"][0])
    assert m.status == "Stopped" and m.status_id == 4
    assert m.is_oneoff is True and m.type == "dns"
    assert time.time() - campaign["t0"] >= STOP_DELAY - 0.05


def test_probe_resolver_dns_results_parse_and_match(api, campaign, gt):
    msm_id = campaign["ids"][0]
    _wait_stopped(api, msm_id)
    raw = _results(api, msm_id)
    assert sorted(r["prb_id"] for r in raw) == DE_CONNECTED
    timeouts = 0
    for r in raw:
        res = DnsResult(r, **STRICT)
        probe = gt["probes"][res.probe_id]
        assert res.measurement_id == msm_id and res.origin == probe["address_v4"]
        want = [x for x in probe["resolvers"] if x["af"] == 4]
        assert [x.destination_address for x in res.responses] == [x["address"] for x in want]
        for resp, w, entry in zip(res.responses, want, r["resultset"]):
            assert resp.source_address == probe["src_addr_v4"]
            assert resp.response_time == w["rtt_ms"]
            if w["timeout"]:
                timeouts += 1
                assert entry["error"] == {"timeout": 5000} and resp.abuf is None
            else:
                assert resp.abuf.header.return_code == "NOERROR"
                assert [a.address for a in resp.abuf.answers] == [w["egress_v4"]]
    assert timeouts == 2  # 1002's second resolver, 1005's home router
    # private resolver addresses are reported as data
    assert any(ipaddress.ip_address(e["dst_addr"]).is_private and "error" not in e
               for r in raw for e in r["resultset"])


def test_explicit_target_dns_results_and_timeout(api, campaign, gt):
    msm_id = campaign["ids"][1]
    _wait_stopped(api, msm_id)
    raw = _results(api, msm_id)
    assert sorted(r["prb_id"] for r in raw) == DE_CONNECTED
    for r in raw:
        res = DnsResult(r, **STRICT)
        want = target_profile(gt["probes"][res.probe_id], "198.18.1.1", "198.18.1.1")["dns_rtt_ms"]
        if want is None:
            assert res.is_error and res.error_message == "Timeout: 5000"
            assert r["error"] == {"timeout": 5000} and res.responses == []
        else:
            assert not res.is_error
            (resp,) = res.responses
            assert resp.destination_address == "198.18.1.1"
            assert resp.response_time == want
            assert [a.address for a in resp.abuf.answers] == ["198.18.2.10"]
            assert resp.abuf.header.id == r["result"]["ID"]
    assert {r["prb_id"] for r in raw if "error" in r} == {1003}
    # filters as cousteau sends them
    some = _results(api, msm_id, probe_ids=[1001, 1004])
    assert sorted(r["prb_id"] for r in some) == [1001, 1004]
    ts = sorted(r["timestamp"] for r in raw)
    assert _results(api, msm_id, stop=ts[0] - 1) == []
    assert len(_results(api, msm_id, start=ts[0], stop=ts[2])) == 3


def test_ping_results_with_lost_packets(api, campaign, gt):
    msm_id = campaign["ids"][2]
    _wait_stopped(api, msm_id)
    raw = {r["prb_id"]: r for r in _results(api, msm_id)}
    assert sorted(raw) == DE_CONNECTED
    for pid, r in raw.items():
        res = PingResult(r, **STRICT)
        series = ping_series(target_profile(gt["probes"][pid], "198.18.1.1", "198.18.1.1"), 4)
        got = [x for x in series if x is not None]
        assert [p.rtt for p in res.packets] == series
        assert res.packets_sent == 4 and res.packets_received == len(got)
        assert res.destination_address == "198.18.1.1"
        if got:
            assert res.rtt_min == min(got) and res.rtt_max == max(got)
            assert res.rtt_average == round(sum(got) / len(got), 3)
            assert res.rtt_median == statistics.median(got)
        else:
            assert res.rtt_average is None and r["avg"] == -1
    assert raw[1004]["min"] == 19.5  # the per-target override, not the '*' default
    # pattern [13.9, null, 14.1] repeated over 4 packets
    assert raw[1002]["result"] == [{"rtt": 13.9}, {"x": "*"}, {"rtt": 14.1}, {"rtt": 13.9}]
    assert raw[1003]["result"] == [{"x": "*"}] * 4


def test_probe_request_filters_and_pagination(api):
    ids = [p["id"] for p in ProbeRequest(country_code="DE", status=1, page_size=2, **_conn(api))]
    assert ids == DE_CONNECTED
    objs = list(ProbeRequest(return_objects=True, asn_v4=64497, **_conn(api)))
    assert [(p.id, p.asn_v4, p.country_code, p.status) for p in objs] == \
        [(1003, 64497, "DE", "Connected"), (1004, 64497, "DE", "Connected")]
    assert {p["id"] for p in ProbeRequest(id__in=[1007, 2001], **_conn(api))} == {1007, 2001}
    pages = [r for r in _requests(api) if r["path"] == "/api/v2/probes/"
             and r["query"].get("page_size") == "2"]
    assert [r["query"].get("page", "1") for r in pages] == ["1", "2", "3"]


def test_ipv6_probe_resolver_and_selection(api, gt):
    msm = Dns(af=6, description="v6", query_argument="whoami.example.test", query_type="AAAA",
              query_class="IN", use_probe_resolver=True)
    ok, resp = _create(api, [msm], [AtlasSource(type="asn", value=64496, requested=5),
                                    AtlasSource(type="asn", value=64498, requested=5)])
    assert ok, resp
    (msm_id,) = resp["measurements"]
    _wait_stopped(api, msm_id)
    raw = {r["prb_id"]: r for r in _results(api, msm_id)}
    assert sorted(raw) == [1001, 1005]  # the only probes with IPv6
    r = DnsResult(raw[1001], **STRICT)
    assert r.responses[0].destination_address == "fd00:1::1"
    # sagan prints AAAA uncompressed (2001:2:0:110:0:0:0:1)
    assert ipaddress.ip_address(r.responses[0].abuf.answers[0].address) == \
        ipaddress.ip_address("2001:2:0:110::1")
    assert DnsResult(raw[1005], **STRICT).is_error  # no IPv6 resolver on that probe


def test_429_then_5xx_then_success(api, campaign):
    base = f"https://localhost:{api['port']}"
    plan = {"http_429": 2, "http_5xx": 1, "retry_after": 2, "match": "/results"}
    assert requests.post(f"{base}/_standin/faults", json=plan, verify=api["verify"]).ok
    msm_id = campaign["ids"][1]
    _wait_stopped(api, msm_id)
    r = requests.get(f"{base}/api/v2/measurements/{msm_id}/results/", verify=api["verify"])
    assert r.status_code == 429 and r.headers["Retry-After"] == "2"
    assert r.json()["error"]["status"] == 429
    ok, resp = AtlasResultsRequest(msm_id=msm_id, **_conn(api)).create()
    assert not ok and resp["error"]["status"] == 429
    ok, resp = AtlasResultsRequest(msm_id=msm_id, **_conn(api)).create()
    assert not ok and resp["error"]["status"] == 503
    ok, resp = AtlasResultsRequest(msm_id=msm_id, **_conn(api)).create()
    assert ok and len(resp) == len(DE_CONNECTED)
    # other paths were never affected
    assert Measurement(id=msm_id, **_conn(api)).status == "Stopped"


def test_stop_request_and_partial_results(api):
    ok, resp = _create(api, [Ping(af=4, description="stop me", target="www.example.test")],
                       [AtlasSource(type="probes", value="1001,1002,1006", requested=3)])
    assert ok, resp
    (msm_id,) = resp["measurements"]
    ok, _ = AtlasStopRequest(msm_id=msm_id, key=KEY, **_conn(api)).create()
    assert ok
    m = Measurement(id=msm_id, **_conn(api))
    assert m.status == "Stopped"
    time.sleep(STOP_DELAY + 0.1)
    # stopped before any probe reported: stays without results
    assert _results(api, msm_id) == []
    assert m.stop_time is not None
