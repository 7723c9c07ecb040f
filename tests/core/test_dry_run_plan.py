"""A dry run's plan counts the targets the policy blocks exactly as the real run blocks
them, and says which rule blocks each.

For every measurement that takes targets or resolves names, inside the testbed's vantage:
a config whose blocklist holds some targets' addresses, then the command with ``--dry-run``
(its run is recorded ``cancelled`` with the plan's counts) and without (the run's own
counts): ``blocked`` must be the same number. Before, the plan judged only addresses given
as targets and resolved no name: for the ``tfo`` case below it said "5 targets would be
probed, 0 blocked by policy" where the run blocked 6 of its 12 addresses (``tfo-lb``,
``tls``, ``tls-lifetime``, ``tls-shared``, ``quic``, ``quic-discover``, ``quic-turnover``,
``browser pageload`` alike); the DNS measurements counted a name spelling a blocked
address as blocked although they only ask about that name (their run blocks nothing);
``tfo --zmap`` counted the network's blocked addresses, its run none, and
``quic-discover --zmap`` planned 0 targets. (``tfo-reuse`` counted an address two names
share once, its run twice; the testbed has no such pair, so no case shows it.)

The dry run resolves names through the resolver the run uses (the run's own resolving
code) and contacts no target; tests/test_promises.py's dry-run case sniffs for that.
"""
from __future__ import annotations

import ipaddress
import json
import shutil
import sys
from dataclasses import dataclass, field
from typing import Optional

import pytest

from conftest import needs_root, run_cli

TFO5 = ["on1.tfo.test", "on2.tfo.test", "off.tfo.test", "lb-pool-a.tfo.test", "lb-pool-b.tfo.test"]
QUIC3 = ["www.example.test", "retry.example.test", "notoken.example.test"]
TLS_ARGS = ["--no-verify", "--timeout", "2"]


@dataclass
class Case:
    """``argv`` after ``group`` ({list}: the imported ``hosts``); ``block``: hostnames whose
    ground-truth addresses (or addresses/networks) go into etiquette.block; ``blocked``:
    what both runs must count (keeps the case from passing vacuously); ``rules``: the
    plan's count per rule; ``kind``: scan_run.kind when it is not the command's name;
    ``needs``: a program the real run needs."""
    argv: list[str]
    hosts: list[str]
    block: list[str]
    blocked: int
    rules: dict = field(default_factory=dict)
    kind: Optional[str] = None
    needs: Optional[str] = None
    asks: bool = False   # a DNS measurement: its names are asked about (an answer may be NXDOMAIN)
    group: str = "scan"


CASES = {
    "tfo": Case(["tfo", "--list", "{list}", "--all-addresses", "--cooldown", "0.3"], TFO5,
                ["198.18.10.0/24", "2001:2:0:11::/64"], 6, {"blocklist": 6}),
    # zmap scans the network's allowed addresses first: its run counts the others blocked
    "tfo-zmap": Case(["tfo", "--cidr", "198.19.0.0/28", "--zmap", "--port", "80", "--cooldown", "0.5"], [],
                     ["198.19.0.8/30", "198.19.0.0/32"], 5, {"blocklist": 5}, kind="tfo", needs="zmap"),
    "quic-discover-zmap": Case(["quic-discover", "--cidr", "198.19.0.0/28", "--zmap", "--timeout", "1s"], [],
                               ["198.19.0.8/30", "198.19.0.0/32"], 5, {"blocklist": 5}, kind="quic-discover",
                               needs="zmap"),
    "tfo-lb": Case(["tfo-lb", "--list", "{list}", "--rounds", "1", "--interval", "0", "--cooldown", "0.2"],
                   TFO5[:3], ["on1.tfo.test"], 1, {"blocklist": 1}),
    # an address both names have would be two targets (reuse_scan judges per name)
    "tfo-reuse": Case(["tfo-reuse", "--list", "{list}", "--cooldown", "0.3"],
                      ["lb-pool-a.tfo.test", "lb-pool-b.tfo.test", "on1.tfo.test"],
                      ["198.18.10.21/32", "198.18.10.22/32"], 2, {"blocklist": 2}),
    # [2001:db8::2]: an address given as a target, outside etiquette.allow
    "tls": Case(["tls", "--list", "{list}", "--target", "[2001:db8::2]", *TLS_ARGS, "--tls", "1.3",
                 "--no-check-resumption"], ["a.test", "b.test"], ["b.test"], 3, {"blocklist": 2, "not-allowed": 1}),
    "tls-lifetime": Case(["tls-lifetime", "--list", "{list}", *TLS_ARGS, "--no-ipv6", "--max-age", "2s", "--step", "1s",
                          "--mechanism", "ticket", "--tls", "1.2"], ["a.test", "b.test"], ["b.test"], 1,
                         {"blocklist": 1}),
    "tls-shared": Case(["tls-shared", "--list", "{list}", *TLS_ARGS, "--mechanism", "ticket", "--tls", "1.2"],
                       ["a.test", "b.test", "t.test"], ["b.test"], 1, {"blocklist": 1}),
    "tls-zgrab": Case(["tls-zgrab", "--list", "{list}", "--no-ipv6"], ["a.test", "b.test"], ["b.test"], 1,
                      {"blocklist": 1}, kind="tls", needs="zgrab2"),
    "handshake-timing": Case(["handshake-timing", "--list", "{list}", "--methods", "tcp", "--samples", "1",
                              "--timeout", "1"], ["a.test", "b.test", "t.test"], ["b.test"], 1, {"blocklist": 1}),
    "quic": Case(["quic", "--list", "{list}", "--timeout", "1s", "--no-resume"], QUIC3, ["retry.example.test"], 2,
                 {"blocklist": 2}),
    "quic-discover": Case(["quic-discover", "--list", "{list}", "--timeout", "1s"], QUIC3, ["retry.example.test"], 2,
                          {"blocklist": 2}),
    "quic-turnover": Case(["quic-turnover", "--list", "{list}", "--timeout", "1s", "--every", "1s", "--for", "1s"],
                          QUIC3[:2], ["retry.example.test"], 2, {"blocklist": 2}),
    "tls-second-opinion": Case(["tls-second-opinion", "--target", "a.test=198.18.2.20", "--target",
                                "b.test=198.18.2.21", "--timeout", "5"], [], ["b.test"], 1, {"blocklist": 1},
                               needs="gnutls-cli"),
    "quic-second-opinion": Case(["quic-second-opinion", "--target", "www.example.test=198.18.2.10", "--target",
                                 "retry.example.test=198.18.2.30", "--timeout", "3"], [], ["retry.example.test"], 1,
                                {"blocklist": 1}, needs="/usr/bin/gtlsclient"),
    # the DNS measurements ask about names; a name spelling a blocked address is asked, not contacted
    "dns-ttl": Case(["dns-ttl", "--list", "{list}", "--name", "198.18.2.21", "--nameserver", "198.18.1.53",
                     "--timeout", "0.3", "--retries", "0"], ["a.test", "b.test"], ["b.test"], 0, asks=True),
    "dns-ecs": Case(["dns-ecs", "--list", "{list}", "--name", "198.18.2.21", "--resolver", "198.18.1.53",
                     "--subnet", "198.18.0.0/24", "--timeout", "0.3", "--retries", "0"], ["a.test"], ["b.test"], 0,
                    asks=True),
    "dns-second-opinion": Case(["dns-second-opinion", "--list", "{list}", "--name", "198.18.2.21", "--nameserver",
                                "198.18.1.53"], ["a.test"], ["b.test"], 0, needs="kdig", asks=True),
    # the list's pages: a blocked host is skipped before a browser starts (counted blocked, by
    # rule), as is one that does not resolve (counted resolution-failed, not blocked)
    "browser-pageload": Case(["pageload", "--list", "{list}", "--browsers", "1", "--page-timeout", "10"],
                             ["a.test", "b.test"], ["b.test"], 1, {"blocklist": 1}, needs="chromium",
                             group="browser"),
}


def _ground_addresses(testbed) -> dict[str, list[str]]:
    gt = testbed.status()["ground_truth"]
    return {h["hostname"]: list(h["addresses"]) for kind in ("tfo_hosts", "tls_hosts", "quic_hosts") for h in gt[kind]}


def _networks(block: list[str], addresses: dict[str, list[str]]) -> list[str]:
    out = []
    for b in block:
        try:
            out.append(str(ipaddress.ip_network(b, strict=False)))
        except ValueError:
            out += [str(ipaddress.ip_network(a)) for a in addresses[b]]
    return out


def _runs_after(db, run_id: int) -> list[tuple]:
    with db.connect() as conn:
        return conn.execute("SELECT id, kind, status, counts FROM scan_run WHERE id > %s ORDER BY id",
                            (run_id,)).fetchall()


def _last_id(db) -> int:
    with db.connect() as conn:
        return conn.execute("SELECT coalesce(max(id), 0) FROM scan_run").fetchone()[0]


def _in_vantage(db, cfg, argv: list[str], group: str = "scan"):
    return run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--config", str(cfg),
                   "--dsn", db.dsn, group, *argv, dsn=db.dsn, timeout=240)


@needs_root()
@pytest.mark.root
@pytest.mark.parametrize("name", list(CASES))
def test_dry_run_counts_what_the_run_blocks(name, db, testbed, tmp_path):
    from netsurvey.targets import import_list

    c = CASES[name]
    if c.needs == "zgrab2":
        from netsurvey.gotools import find_tool

        if find_tool("zgrab2") is None:
            pytest.skip("zgrab2 is not built here (scripts/build_go_tools.sh zgrab2)")
    elif c.needs and not shutil.which(c.needs):
        pytest.skip(f"{c.needs} is not installed")
    argv = [a.replace("{list}", "dryplan") for a in c.argv]
    if c.hosts:
        f = tmp_path / "list.csv"
        f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(c.hosts, 1)))
        import_list(db, f, "dryplan")
    cfg = tmp_path / "block.toml"
    cfg.write_text(f"[etiquette]\nblock = {json.dumps(_networks(c.block, _ground_addresses(testbed)))}\n")
    kind = c.kind or name

    for _attempt in (1, 2):
        before = _last_id(db)
        r = _in_vantage(db, cfg, [*argv, "--dry-run"], c.group)
        assert r.returncode == 0, r.stderr[-2000:]
        runs = _runs_after(db, before)
        assert [(k, s) for _, k, s, _ in runs] == [(kind, "cancelled")], runs
        planned = runs[0][3]

        before = _last_id(db)
        r = _in_vantage(db, cfg, argv, c.group)
        assert r.returncode == 0, r.stderr[-2000:]
        runs = _runs_after(db, before)
        assert [(k, s) for _, k, s, _ in runs] == [(kind, "finished")], runs
        done = runs[0][3]
        # every name here resolves: a failure is the shared testbed's resolver busy or
        # restarted by another session between the two runs (seen once), not the plan
        unresolved = (planned.get("resolution-failed", 0), done.get("resolution-failed", done.get("unresolved", 0)))
        if c.asks or unresolved == (0, 0):
            break
    assert c.asks or unresolved == (0, 0), (planned, done)
    assert planned["blocked"] == done.get("blocked", 0) == c.blocked, (planned, done)
    assert {k[len("blocked-"):]: v for k, v in planned.items() if k.startswith("blocked-") and v} == c.rules, planned


@needs_root()
@pytest.mark.root
def test_plan_lines_name_the_rule(db, testbed, tmp_path):
    """The printed plan: the per-rule breakdown on its first line, each blocked target on a
    line saying which rule blocks it; the DNS walk's note (what the plan cannot count)."""
    from netsurvey.targets import import_list

    f = tmp_path / "list.csv"
    f.write_text("1,on1.tfo.test\n2,off.tfo.test\n")
    import_list(db, f, "rules")
    cfg = tmp_path / "block.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.10.1/32"]\n')
    r = _in_vantage(db, cfg, ["tfo", "--list", "rules", "--dry-run"])
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("dry run of 'tfo': 1 targets would be probed, 1 blocked by policy (not in "
                               "etiquette.allow: 0, reserved range: 0, blocklist/opt-out: 1, "
                               "off-machine route: 0);"), lines
    assert any("off.tfo.test" in ln and "198.18.12.1" in ln and "blocked" not in ln for ln in lines[1:]), lines
    assert [ln.split()[:4] for ln in lines if "on1.tfo.test" in ln] == \
        [["blocked", "(blocklist/opt-out):", "1", "on1.tfo.test"]], lines
    r = _in_vantage(db, cfg, ["dns-ttl", "--list", "rules", "--resolver", "198.18.1.1", "--dry-run"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 targets would be probed, 0 blocked by policy" in r.stdout, r.stdout
    assert "note: the nameservers the delegation walk finds are judged by the policy when found" in r.stdout, r.stdout


def test_plan_counts_each_rule():
    """One target per rule of the policy, judged as the run judges them (in-process, the
    plan only: nothing resolved or sent)."""
    from netsurvey.clictx import _plan
    from netsurvey.config import EtiquetteConfig
    from netsurvey.etiquette import TargetPolicy, limiter_from_config
    from netsurvey.routes import Route, RouteTable
    from netsurvey.scanning import ScanTarget

    cfg = EtiquetteConfig(allow=["0.0.0.0/0", "198.18.0.0/15"], block=["93.184.216.0/24"])
    policy = TargetPolicy.from_config(cfg)
    # a namespace without testbed routes: the testbed's addresses would go by the default route
    policy._lazy["routes"] = RouteTable([Route(ipaddress.ip_network("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1")])
    targets = [ScanTarget("ok.example", "8.8.8.8", 443), ScanTarget("v6.example", "2001:4860::8888", 443),
               ScanTarget("private.example", "10.1.2.3", 443), ScanTarget("optout.example", "93.184.216.34", 443),
               ScanTarget("tb.example", "198.18.2.10", 443), ScanTarget("93.184.216.35", None, 443)]
    lines, counts = _plan("x", policy, limiter_from_config(cfg), targets, None)
    assert counts == {"dry-run-targets": 1, "blocked": 5, "blocked-not-allowed": 1, "blocked-reserved": 1,
                      "blocked-blocklist": 2, "blocked-off-machine-route": 1}, counts
    assert "1 targets would be probed, 5 blocked by policy (not in etiquette.allow: 1, reserved range: 1, " \
           "blocklist/opt-out: 2, off-machine route: 1)" in lines[0], lines
    rule_of = {ln.split()[-3]: ln.split(":")[0].strip() for ln in lines[1:] if ln.lstrip().startswith("blocked")}
    assert rule_of == {"v6.example": "blocked (not in etiquette.allow)", "private.example": "blocked (reserved range)",
                       "optout.example": "blocked (blocklist/opt-out)", "tb.example": "blocked (off-machine route)",
                       "93.184.216.35": "blocked (blocklist/opt-out)"}, lines


def test_zmap_range_counts_as_each_address_is_judged():
    """`--cidr NET --zmap` is counted with whole networks (a /8 is 16M addresses): the same
    numbers per rule as judging each address (TargetPolicy.blocking_rule)."""
    from collections import Counter

    from netsurvey.config import EtiquetteConfig
    from netsurvey.etiquette import TargetPolicy
    from netsurvey.routes import Route, RouteTable
    from netsurvey.zmap import blocked_in_range

    cfg = EtiquetteConfig(allow=["198.18.0.0/21", "11.0.0.0/8", "100.0.0.0/6"],
                          block=["198.18.1.0/24", "198.18.1.128/25", "198.18.2.0/23", "100.64.3.0/24", "11.0.0.0/22"])
    policy = TargetPolicy.from_config(cfg)
    policy._lazy["routes"] = RouteTable([Route(ipaddress.ip_network("198.18.0.0/15"), "unicast", "tbv0", "")])
    for net in ("198.18.0.0/20", "100.64.0.0/20", "100.63.248.0/21", "11.0.0.0/20", "10.255.240.0/20"):
        n = ipaddress.ip_network(net)
        each = Counter(policy.blocking_rule(str(a)) for a in n)
        each.pop(None, None)
        got = {r: c for r, c in blocked_in_range(n, policy).items() if c}
        assert got == dict(each), (net, got, dict(each))
