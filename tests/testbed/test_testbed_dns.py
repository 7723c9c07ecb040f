"""testbed/dns.py against real servers: knot + unbound in a temporary network namespace.

Two throw-away namespaces (``nstmpd-srv`` runs knot and unbound, ``nstmpd-cli`` asks
with dnspython) joined by a veth pair; the configuration is the shipped
``config/testbed.toml``. Every expectation comes from ``dns_ground_truth``.
Needs root, iproute2, knotd (+ knot-module-geoip) and unbound.
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed.dns import dns_ground_truth, ecs_expected, render_dns, top_zones
from testbed.model import load_testbed_config

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

SRV = "nstmpd-srv"
CLI = "nstmpd-cli"

if os.geteuid() != 0 or not all(shutil.which(b) for b in ("ip", "knotd", "unbound")):
    pytest.skip("needs root, iproute2, knotd and unbound", allow_module_level=True)

# Runs inside the client namespace: reads a JSON list of queries on stdin, prints results.
HELPER = textwrap.dedent(r'''
    import json, sys, time
    import dns.edns, dns.flags, dns.message, dns.query, dns.rcode, dns.rdatatype

    def rrsets(section):
        return [{"name": r.name.to_text(), "type": dns.rdatatype.to_text(r.rdtype),
                 "ttl": r.ttl, "values": sorted(x.to_text() for x in r)} for r in section]

    def ask(q):
        opts = []
        if q.get("ecs"):
            opts.append(dns.edns.ECSOption(q["ecs"][0], q["ecs"][1]))
        m = dns.message.make_query(q["name"], q["type"], use_edns=0, options=opts)
        if not q.get("rd", True):
            m.flags &= ~dns.flags.RD
        r = dns.query.udp(m, q["server"], port=53, timeout=q.get("timeout", 2.0))
        ecs = [o for o in r.options if isinstance(o, dns.edns.ECSOption)]
        return {"rcode": dns.rcode.to_text(r.rcode()), "aa": bool(r.flags & dns.flags.AA),
                "ra": bool(r.flags & dns.flags.RA),
                "answer": rrsets(r.answer), "authority": rrsets(r.authority),
                "additional": rrsets(r.additional),
                "ecs": ({"address": ecs[0].address, "srclen": ecs[0].srclen,
                         "scope": ecs[0].scopelen} if ecs else None)}

    queries = json.load(sys.stdin)
    out = []
    for q in queries:
        if q.get("wait"):
            deadline = time.monotonic() + q["wait"]
            while True:
                try:
                    out.append(ask(q)); break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        out.append({"error": repr(exc)}); break
                    time.sleep(0.1)
            continue
        res = []
        for _ in range(q.get("repeat", 1)):
            try:
                res.append(ask(q))
            except Exception as exc:
                res.append({"error": repr(exc)})
        out.append(res if q.get("repeat", 1) > 1 else res[0])
    print(json.dumps(out))
''')


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, timeout=20)


def _del_netns():
    for ns in (CLI, SRV):
        sh("ip", "netns", "del", ns, check=False)


class Env:
    def __init__(self, cfg, out: Path):
        self.cfg = cfg
        self.out = out
        self.truth = dns_ground_truth(cfg)
        self.helper = out / "ask.py"
        self.helper.write_text(HELPER)
        self.auth4, self.auth6 = cfg.dns.authoritative_v4, cfg.dns.authoritative_v6
        self.res4, self.res6 = cfg.network.resolver_v4, cfg.network.resolver_v6

    def ask(self, queries: list[dict]) -> list:
        p = subprocess.run(["ip", "netns", "exec", CLI, sys.executable, str(self.helper)],
                           input=json.dumps(queries), capture_output=True, text=True,
                           timeout=40)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def ask1(self, **q) -> dict:
        return self.ask([q])[0]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cfg = load_testbed_config()
    out = tmp_path_factory.mktemp("dns")
    specs = {s.name: s for s in render_dns(cfg, out)}
    assert set(specs) == {"knot", "unbound"}
    for s in specs.values():
        assert s.namespace == cfg.dns.namespace and s.ready_udp is not None

    net = cfg.network
    link4 = ipaddress.ip_network(net.link_v4)
    link6 = ipaddress.ip_network(net.link_v6)
    srv4, srv6 = str(link4[2]), str(link6[2])  # 198.18.0.2, 2001:2:0:ff::2
    procs: list[subprocess.Popen] = []
    _del_netns()  # leftovers of an interrupted run
    try:
        sh("ip", "netns", "add", SRV)
        sh("ip", "netns", "add", CLI)
        sh("ip", "-n", CLI, "link", "add", "vd0", "type", "veth", "peer", "name", "vd1",
           "netns", SRV)
        for ns in (SRV, CLI):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for a in (cfg.dns.authoritative_v4, net.resolver_v4):
            sh("ip", "-n", SRV, "addr", "add", f"{a}/32", "dev", "lo")
        for a in (cfg.dns.authoritative_v6, net.resolver_v6):
            sh("ip", "-n", SRV, "addr", "add", f"{a}/128", "dev", "lo", "nodad")
        sh("ip", "-n", SRV, "addr", "add", f"{srv4}/{link4.prefixlen}", "dev", "vd1")
        sh("ip", "-n", SRV, "addr", "add", f"{srv6}/{link6.prefixlen}", "dev", "vd1", "nodad")
        sh("ip", "-n", CLI, "addr", "add", f"{net.vantage_v4}/{link4.prefixlen}", "dev", "vd0")
        sh("ip", "-n", CLI, "addr", "add", f"{net.vantage_v6}/{link6.prefixlen}", "dev", "vd0",
           "nodad")
        sh("ip", "-n", SRV, "link", "set", "vd1", "up")
        sh("ip", "-n", CLI, "link", "set", "vd0", "up")
        for a in (cfg.dns.authoritative_v4, net.resolver_v4):
            sh("ip", "-n", CLI, "route", "replace",
               str(ipaddress.ip_network(f"{a}/24", strict=False)), "via", srv4)
        for a in (cfg.dns.authoritative_v6, net.resolver_v6):
            sh("ip", "-n", CLI, "route", "replace",
               str(ipaddress.ip_network(f"{a}/64", strict=False)), "via", srv6)

        for name in ("knot", "unbound"):
            log = (out / f"{name}.stdio").open("wb")
            procs.append(subprocess.Popen(["ip", "netns", "exec", SRV, *specs[name].argv],
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        e = Env(cfg, out)
        ready = e.ask([{"server": e.auth4, "name": "test.", "type": "SOA", "wait": 15},
                       {"server": e.res4, "name": "test.", "type": "SOA", "wait": 15}])
        for r, p in zip(ready, procs):
            assert "error" not in r, (r, p.poll(), (out / "knot.log").read_text()
                                      if (out / "knot.log").exists() else "")
        yield e
    finally:
        for p in procs:  # kill by PID (ip netns exec execs the server: same PID)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        _del_netns()


# ----------------------------------------------------------------------------- pure

def test_ground_truth_shape():
    cfg = load_testbed_config()
    t = dns_ground_truth(cfg)
    assert t["names"]["ttl60.example.test"]["A"] == {
        "ttl": 60, "values": ["198.18.2.10"], "zone": "example.test"}
    assert t["names"]["ttl60.example.test"]["AAAA"]["ttl"] == 600
    assert t["names"]["ttl3600.example.test"]["A"]["ttl"] == 3600
    assert t["names"]["www.example.test"]["A"] == {
        "ttl": 300, "values": ["198.18.2.10"], "zone": "example.test"}
    assert t["names"]["atlas.test"]["AAAA"]["values"] == ["2001:2:0:2::200"]
    assert t["names"]["retry.example.test"]["HTTPS"]["values"] == [
        '1 . alpn="h3" no-default-alpn']
    assert [s["scope"] for s in t["ecs"]["ecs.example.test"]["scopes"]] == [24, 16]
    assert t["ecs"]["ecs.example.test"]["default"] == {"address": "198.18.2.99", "scope": 0}
    assert t["load_balanced"]["lb4.tfo.test"]["pool"] == [
        "198.18.10.41", "198.18.10.42", "198.18.11.43", "198.18.11.44"]
    assert "ecs.example.test" not in t["names"] and "lb2.tfo.test" not in t["names"]
    assert ecs_expected(cfg, "ecs.example.test", "198.18.0.7") == ("198.18.2.24", 24)
    assert ecs_expected(cfg, "ecs.example.test", "198.18.200.7") == ("198.18.2.16", 16)
    assert ecs_expected(cfg, "ecs.example.test", "198.19.0.7") == ("198.18.2.99", 0)
    assert top_zones(cfg) == ["test"]
    json.dumps(t)


def test_render_rejects_name_outside_zones(tmp_path):
    cfg = load_testbed_config()
    rec = cfg.dns.records[0].model_copy(update={"name": "www.example.org"})
    bad = cfg.model_copy(update={"dns": cfg.dns.model_copy(
        update={"records": [*cfg.dns.records, rec]})})
    with pytest.raises(ValueError, match="not inside any served zone"):
        render_dns(bad, tmp_path)
    render_dns(cfg, tmp_path)  # the shipped config renders
    assert (tmp_path / "knot.conf").exists() and (tmp_path / "unbound.conf").exists()
    assert (tmp_path / "zones" / "test.zone").exists()


# ----------------------------------------------------------------------------- live

def _static_queries(e: Env, server: str) -> tuple[list[dict], list[tuple[str, str, dict]]]:
    qs, want = [], []
    zones = set(e.truth["zones"])
    # names at or below an NS record that is not one of knot's zones are delegated away:
    # knot holds only glue for them and answers with a referral
    cuts = {n for n, t in e.truth["names"].items() if "NS" in t and n not in zones}
    for name, types in sorted(e.truth["names"].items()):
        if any(name == c or name.endswith("." + c) for c in cuts):
            continue
        for rtype in ("A", "AAAA"):
            if rtype in types:
                qs.append({"server": server, "name": name, "type": rtype, "rd": False})
                want.append((name, rtype, types[rtype]))
    return qs, want


@pytest.mark.parametrize("family", [4, 6])
def test_authoritative_a_aaaa_exact(env, family):
    server = env.auth4 if family == 4 else env.auth6
    qs, want = _static_queries(env, server)
    assert len(qs) > 30
    for r, (name, rtype, exp) in zip(env.ask(qs), want):
        assert r["rcode"] == "NOERROR" and r["aa"], (name, rtype, r)
        ans = [a for a in r["answer"] if a["type"] == rtype]
        assert len(ans) == 1, (name, rtype, r)
        assert ans[0]["name"] == name + "."
        # compare addresses as addresses: '::ffff:10.0.0.1' and '::ffff:a00:1' are one
        assert sorted(map(ipaddress.ip_address, ans[0]["values"])) == sorted(
            map(ipaddress.ip_address, exp["values"])), (name, rtype)
        assert ans[0]["ttl"] == exp["ttl"], (name, rtype)


def test_authoritative_specific_ttls(env):
    """Literal values from config/testbed.toml (not via ground truth)."""
    r = env.ask([{"server": env.auth4, "name": "ttl60.example.test", "type": "A"},
                 {"server": env.auth4, "name": "ttl60.example.test", "type": "AAAA"},
                 {"server": env.auth4, "name": "ttl3600.example.test", "type": "A"},
                 {"server": env.auth6, "name": "on1.tfo.test", "type": "AAAA"}])
    assert [(a["answer"][0]["ttl"], a["answer"][0]["values"]) for a in r] == [
        (60, ["198.18.2.10"]), (600, ["2001:2:0:2::10"]), (3600, ["198.18.2.10"]),
        (300, ["2001:2:0:10::1"])]


def test_https_records(env):
    names = [n for n, t in env.truth["names"].items() if "HTTPS" in t]
    assert "www.example.test" in names and "retry.example.test" in names
    res = env.ask([{"server": env.auth4, "name": n, "type": "HTTPS"} for n in names])
    for n, r in zip(names, res):
        exp = env.truth["names"][n]["HTTPS"]
        assert r["answer"][0]["type"] == "HTTPS" and r["answer"][0]["ttl"] == exp["ttl"]
        assert r["answer"][0]["values"] == exp["values"], n
    www = res[names.index("www.example.test")]["answer"][0]["values"][0]
    assert 'alpn="h2,h3"' in www


def _ecs_cases(e: Env):
    """(client subnet, srclen): one per configured scope, one outside all of them."""
    return [("198.18.0.0", 24), ("198.18.77.0", 24), ("198.19.5.0", 24),
            ("2001:2:0:7700::", 56)]


def test_authoritative_ecs_scopes(env):
    cases = _ecs_cases(env)
    for name, info in env.truth["ecs"].items():
        qs = [{"server": env.auth4, "name": name, "type": "A", "ecs": list(c)} for c in cases]
        res = env.ask(qs)
        seen = []
        for (addr, srclen), r in zip(cases, res):
            exp_addr, exp_scope = ecs_expected(env.cfg, name, addr)
            assert r["rcode"] == "NOERROR" and r["aa"], r
            assert r["answer"][0]["values"] == [exp_addr], (addr, r)
            assert r["answer"][0]["ttl"] == info["ttl"]
            assert r["ecs"] is not None, r
            assert r["ecs"]["scope"] == exp_scope, (addr, r["ecs"])
            assert r["ecs"]["address"] == addr and r["ecs"]["srclen"] == srclen
            seen.append(r["ecs"]["scope"])
        if name == "ecs.example.test":  # literal expectations of the shipped config
            assert seen == [24, 16, 0, 0]
            assert [r["answer"][0]["values"][0] for r in res] == [
                "198.18.2.24", "198.18.2.16", "198.18.2.99", "198.18.2.99"]


def test_authoritative_ecs_without_option_uses_source(env):
    # The client's own address 198.18.0.1 lies in 198.18.0.0/24; no ECS in, none out.
    name = "ecs.example.test"
    r = env.ask1(server=env.auth4, name=name, type="A")
    assert r["answer"][0]["values"] == [ecs_expected(env.cfg, name, env.cfg.network.vantage_v4)[0]]
    assert r["ecs"] is None
    r6 = env.ask1(server=env.auth6, name=name, type="A")
    assert r6["answer"][0]["values"] == [env.truth["ecs"][name]["default"]["address"]]


def test_load_balanced(env):
    for name, info in env.truth["load_balanced"].items():
        res = env.ask([{"server": env.auth4, "name": name, "type": "A", "repeat": 40}])[0]
        addrs = []
        for r in res:
            assert r["rcode"] == "NOERROR" and r["aa"], r
            assert len(r["answer"]) == 1 and len(r["answer"][0]["values"]) == 1, r
            assert r["answer"][0]["ttl"] == info["ttl"]
            addrs.append(r["answer"][0]["values"][0])
        assert set(addrs) <= set(info["pool"]), (name, addrs)
        assert len(set(addrs)) > 1, (name, addrs)
        if len(info["pool"]) == 2:
            assert set(addrs) == set(info["pool"])
        if info["types"] == ["A"]:  # IPv4-only pool: AAAA is NODATA
            r = env.ask1(server=env.auth4, name=name, type="AAAA")
            assert r["rcode"] == "NOERROR" and r["answer"] == [], r


def test_delegation_walk(env):
    t = env.truth
    auth = {env.auth4, env.auth6}
    r = env.ask1(server=env.auth4, name="test.", type="NS", rd=False)
    assert r["aa"] and r["answer"][0]["values"] == ["ns.test."]
    glue = {v for a in r["additional"] if a["name"] == "ns.test." for v in a["values"]}
    assert glue == auth
    children = sorted(z for z, i in t["zones"].items() if i["parent"] == "test")
    assert children == ["a.test", "b.test", "example.test", "t.test", "tfo.test"]
    # Follow each child's NS (from the glue of the parent) to its own authoritative answer.
    res = env.ask([{"server": env.auth6, "name": z + ".", "type": "NS", "rd": False}
                   for z in children])
    for z, r in zip(children, res):
        assert r["aa"] and r["answer"][0]["values"] == [f"ns.{z}."], r
        glue = {v for a in r["additional"] if a["name"] == f"ns.{z}." for v in a["values"]}
        assert glue == auth
    # The parent zone file itself holds the delegations with glue.
    import dns.zone
    zone = dns.zone.from_file(str(env.out / "zones" / "test.zone"), origin="test.",
                              relativize=False)
    for z in children:
        ns = zone.get_rdataset(z + ".", "NS")
        assert ns is not None and [x.to_text() for x in ns] == [f"ns.{z}."]
        a = zone.get_rdataset(f"ns.{z}.", "A")
        aaaa = zone.get_rdataset(f"ns.{z}.", "AAAA")
        assert {x.to_text() for x in a} | {x.to_text() for x in aaaa} == auth


@pytest.mark.parametrize("family", [4, 6])
def test_resolver_answers(env, family):
    server = env.res4 if family == 4 else env.res6
    names = ["www.example.test", "atlas.test", "on1.tfo.test", "a.test", "ttl3600.example.test"]
    res = env.ask([{"server": server, "name": n, "type": "A"} for n in names]
                  + [{"server": server, "name": "www.example.test", "type": "AAAA"},
                     {"server": server, "name": "nonexistent.example.test", "type": "A"},
                     {"server": server, "name": "example.com", "type": "A"}])
    for n, r in zip(names, res):
        exp = env.truth["names"][n]["A"]
        assert r["rcode"] == "NOERROR" and r["ra"] and not r["aa"], (n, r)
        ans = [a for a in r["answer"] if a["type"] == "A"]
        assert ans[0]["values"] == exp["values"]
        assert 0 < ans[0]["ttl"] <= exp["ttl"]
    assert res[len(names)]["answer"][0]["values"] == \
        env.truth["names"]["www.example.test"]["AAAA"]["values"]
    assert res[len(names) + 1]["rcode"] == "NXDOMAIN"
    assert res[len(names) + 2]["rcode"] == "REFUSED"  # nothing leaves the testbed


def test_resolver_ecs(env, record_property):
    """Through unbound: the client's subnet (or its ECS option) reaches knot.

    Order matters: unbound caches an answer for its scope, and knot's /16 fallback
    (scope 16) covers the /24 exception; had the /16 answer been cached first, a
    198.18.0.0/24 client would get it from the cache. Here the /24 is cached first.
    """
    name = "ecs.example.test"
    cases = _ecs_cases(env)[:3]
    # Without an option unbound sends the client's /24 (198.18.0.0/24).
    first = env.ask1(server=env.res4, name=name, type="A")
    assert first["answer"][0]["values"] == ["198.18.2.24"]
    res = env.ask([{"server": env.res4, "name": name, "type": "A", "ecs": list(c)}
                   for c in cases])
    seen = {}
    for (addr, srclen), r in zip(cases, res):
        assert r["rcode"] == "NOERROR" and r["answer"], r
        seen[f"{addr}/{srclen}"] = {"answer": r["answer"][0]["values"][0],
                                    "ttl": r["answer"][0]["ttl"],
                                    "scope": r["ecs"]["scope"] if r["ecs"] else None}
    record_property("resolver_ecs", json.dumps(seen))
    print("resolver ECS:", json.dumps(seen))
    assert seen["198.19.5.0/24"]["answer"] == "198.18.2.99"
    assert seen["198.18.77.0/24"]["answer"] == "198.18.2.16"
    assert seen["198.18.0.0/24"]["answer"] == "198.18.2.24"
