"""`netsurvey scan dns-ecs` on the testbed, checked against the ground truth of
testbed/dns.py (``ecs_expected``): exact scopes and answers at the authoritative server for
the /24 match, the /16 fallback, the no-match rule (IPv4 outside every subnet, IPv6) and
names without ECS data; through unbound (order-dependent cache, so only the pairing of
scope and answer is exact there); the views and the dns-ecs-scopes figure."""
from __future__ import annotations

import csv
import ipaddress
import json
import sys

import pytest

from conftest import REPO, _create_database, run_cli
from netsurvey.db import Database
from testbed.dns import ecs_expected

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

SUBNETS = ["198.18.0.0/24", "198.18.7.0/24", "198.19.5.0/24", "10.1.2.0/24", "2001:db8:1::/56"]


def _exec_ecs(dsn: str, *args: str) -> dict:
    p = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", dsn, "scan", "dns-ecs",
                *args, "--json", dsn=dsn, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ecs_scan(server_dsn, _testbed_session):
    _testbed_session.up(log=lambda *_: None)
    truth = _testbed_session.status()["ground_truth"]["dns"]
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    plain = ["www.example.test", "ttl60.example.test"]
    names = [*truth["ecs"], *plain, "nx.example.test"]
    args = [a for n in names for a in ("--name", n)] + [a for s in SUBNETS for a in ("--subnet", s)]
    res = _exec_ecs(db.dsn, *args, "--resolver", truth["authoritative"]["v4"])
    return db, truth, _testbed_session.cfg, plain, res


def _rows(db, run_id):
    with db.connect() as conn:
        return {(r[0], str(r[1])): r[2:] for r in conn.execute(
            """SELECT hostname, subnet, outcome, source_prefix, scope_prefix, host(ecs_address), ttl, answers, rcode
               FROM dns_ecs_probe WHERE run_id = %s""", (run_id,)).fetchall()}


def test_scopes_exact_at_authoritative(ecs_scan):
    db, truth, cfg, plain, res = ecs_scan
    rows = _rows(db, res["run_id"])
    assert len(truth["ecs"]) >= 1
    seen_scopes = set()
    for name, e in truth["ecs"].items():
        for s in SUBNETS:
            net = ipaddress.ip_network(s)
            addr, scope = ecs_expected(cfg, name, str(net.network_address))
            outcome, src, sc, ecs_addr, ttl, answers, rcode = rows[(name, s)]
            if ipaddress.ip_address(addr).version == 4:
                assert (outcome, answers, ttl) == ("answer", [addr], e["ttl"]), (name, s)
            assert (src, sc, ecs_addr) == (net.prefixlen, scope, str(net.network_address)), (name, s)
            seen_scopes.add(scope)
    assert {24, 16, 0} <= seen_scopes  # the match, the fallback and the no-match rule all exercised


def test_names_without_ecs_data_have_global_scope(ecs_scan):
    db, truth, cfg, plain, res = ecs_scan
    rows = _rows(db, res["run_id"])
    for name in plain:
        exp = truth["names"][name]["A"]
        for s in SUBNETS:
            outcome, src, sc, _, ttl, answers, _ = rows[(name, s)]
            assert (outcome, sc, ttl, sorted(answers)) == ("answer", 0, exp["ttl"], sorted(exp["values"]))
    for s in SUBNETS:
        assert rows[("nx.example.test", s)][0] == "nxdomain"


def test_views_and_figure(ecs_scan, tmp_path):
    db, truth, cfg, plain, res = ecs_scan
    n_answer_names = len(truth["ecs"]) + len(plain)
    with db.connect() as conn:
        summ = {str(r[0]): r[1:] for r in conn.execute(
            "SELECT subnet, n_probes, n_answers, n_with_ecs, share_global FROM dns_ecs_summary WHERE run_id = %s",
            (res["run_id"],)).fetchall()}
    for s in SUBNETS:
        scopes = [ecs_expected(cfg, n, s.split("/")[0])[1] for n in truth["ecs"]] + [0] * len(plain)
        assert summ[s][:3] == (n_answer_names + 1, n_answer_names, n_answer_names)
        assert float(summ[s][3]) == pytest.approx(scopes.count(0) / len(scopes), abs=1e-12)
    p = run_cli("plot", "dns-ecs-scopes", "--run", str(res["run_id"]), "--out", str(tmp_path), dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader((tmp_path / "dns-ecs-scopes.csv").open()))
    got = {(r["subnet"], int(r["scope_prefix"])): int(r["answers"]) for r in rows}
    assert got[("198.18.0.0/24", 24)] == sum(ecs_expected(cfg, n, "198.18.0.0")[1] == 24 for n in truth["ecs"])
    assert (tmp_path / "dns-ecs-scopes.png").exists()


def test_through_resolver_scope_matches_answer(server_dsn, testbed):
    """unbound forwards ECS; its subnet cache makes the scope order-dependent, but every
    answer must be the one the authoritative gives for the announced scope."""
    truth = testbed.status()["ground_truth"]["dns"]
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    name = next(iter(truth["ecs"]))
    e = truth["ecs"][name]
    by_scope = {s["scope"]: s["address"] for s in e["scopes"]} | {0: e["default"]["address"]}
    res = _exec_ecs(db.dsn, "--name", name, "--name", "www.example.test")  # default: resolv.conf + vantage /24
    rows = _rows(db, res["run_id"])
    vantage24 = str(ipaddress.ip_network(f"{truth_vantage(testbed)}/24", strict=False))
    outcome, src, sc, ecs_addr, ttl, answers, rcode = rows[(name, vantage24)]
    assert outcome == "answer" and src == 24 and answers == [by_scope[sc]]
    assert 0 <= ttl <= e["ttl"]
    assert rows[("www.example.test", vantage24)][2] == 0


def truth_vantage(testbed) -> str:
    return testbed.status()["ground_truth"]["network"]["vantage_v4"]


@pytest.fixture(scope="module")
def zdns_built():
    """zdns v2.0.5 built from tools/go (idempotent; ~1 s when up to date)."""
    import subprocess

    root = REPO
    p = subprocess.run(["bash", str(root / "scripts" / "build_go_tools.sh"), "zdns"], cwd=root,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"building zdns failed:\n{p.stderr[-2000:]}"


def test_zdns_backend_gives_the_same_scopes(ecs_scan, server_dsn, zdns_built):
    """The pinned zdns backend (one global subnet) records the same exact scopes."""
    _, truth, cfg, plain, _ = ecs_scan
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    names = [*truth["ecs"], *plain, "nx.example.test"]
    for s in ("198.18.0.0/24", "198.18.7.0/24", "10.1.2.0/24"):
        res = _exec_ecs(db.dsn, *[a for n in names for a in ("--name", n)], "--subnet", s, "--backend", "zdns",
                        "--resolver", truth["authoritative"]["v4"])
        rows = _rows(db, res["run_id"])
        for name in truth["ecs"]:
            addr, scope = ecs_expected(cfg, name, s.split("/")[0])
            assert rows[(name, s)][:3] == ("answer", 24, scope) and rows[(name, s)][5] == [addr], (name, s)
        for name in plain:
            assert rows[(name, s)][0] == "answer" and rows[(name, s)][2] == 0
        assert rows[("nx.example.test", s)][0] == "nxdomain"
    p = run_cli("scan", "dns-ecs", "--name", "x.test", "--subnet", "198.18.0.0/24", "--subnet", "198.18.1.0/24",
                "--backend", "zdns", "--resolver", truth["authoritative"]["v4"], dsn=db.dsn)
    assert p.returncode == 2 and "exactly one" in p.stderr
