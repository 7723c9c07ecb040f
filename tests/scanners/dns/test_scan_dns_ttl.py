"""`netsurvey scan dns-ttl` against the testbed's knot, checked against its ground truth
(config/testbed.toml via `testbed status`): exact TTLs and answers for A and AAAA over IPv4
and IPv6 transport, NODATA, NXDOMAIN, lame delegation, timeouts, truncation -> TCP, the
stored rows, views and the Fig 2.5 numbers."""
from __future__ import annotations

import csv
import json
import sys

import pytest

from conftest import _create_database, run_cli
from netsurvey.db import Database

pytestmark = [pytest.mark.root, pytest.mark.timeout(240)]


def _exec_scan(dsn: str, *args: str) -> dict:
    p = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", dsn, "scan", "dns-ttl",
                *args, "--json", dsn=dsn, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def measurable_names(truth: dict) -> dict[str, dict]:
    """Ground-truth names with A/AAAA that are not at or below a delegation (those are
    glue or lame/dead delegations the scanner cannot reach by design)."""
    zones = set(truth["zones"])
    cuts = [n for n, t in truth["names"].items() if "NS" in t and n not in zones]
    out = {}
    for n, types in truth["names"].items():
        if not ({"A", "AAAA"} & set(types)) or "*" in n:  # wildcards are not hostnames
            continue
        if any(n == c or n.endswith("." + c) for c in cuts):
            continue
        out[n] = types
    return out


@pytest.fixture(scope="module")
def scanned(server_dsn, tmp_path_factory, _testbed_session):
    """One IPv4 and one IPv6 scan of every measurable name plus the failure cases."""
    _testbed_session.up(log=lambda *_: None)
    truth = _testbed_session.status()["ground_truth"]["dns"]
    names = measurable_names(truth)
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    extra = ["nx.example.test", "www.lame.test", "www.dead.test"]
    lst = tmp_path_factory.mktemp("dnsttl") / "list.csv"
    lst.write_text("".join(f"{i},{n}\n" for i, n in enumerate([*sorted(names), *extra], 1)))
    p = run_cli("targets", "import", str(lst), "--list", "dnsttl", dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    v4 = _exec_scan(db.dsn, "--list", "dnsttl", "--family", "4")
    v6 = _exec_scan(db.dsn, "--list", "dnsttl", "--family", "6")
    return db, truth, names, v4, v6


def _rows(db: Database, run_id: int) -> dict[tuple[str, str], tuple]:
    with db.connect() as conn:
        rows = conn.execute("""SELECT hostname, qtype, outcome, ttl, answers, host(nameserver), transport, truncated,
                                      rcode, authoritative, zone, error
                               FROM dns_ttl_probe WHERE run_id = %s""", (run_id,)).fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


@pytest.mark.parametrize("family", ["4", "6"])
def test_ttls_and_answers_exact(scanned, family):
    db, truth, names, v4, v6 = scanned
    res = v4 if family == "4" else v6
    auth = truth["authoritative"]["v4" if family == "4" else "v6"]
    rows = _rows(db, res["run_id"])
    assert len(names) > 30
    assert len(rows) == 2 * (len(names) + 3)
    for name, types in names.items():
        for q in ("A", "AAAA"):
            outcome, ttl, answers, ns, transport, truncated, rcode, aa, zone, err = rows[(name, q)]
            assert ns == auth, (name, q, err)
            if q in types:
                exp = types[q]
                assert (outcome, ttl, sorted(answers)) == ("answer", exp["ttl"], sorted(exp["values"])), (name, q, err)
                assert rcode == "NOERROR" and aa is True
            else:  # the name exists without this type: NODATA
                assert (outcome, ttl, answers, rcode) == ("nodata", None, [], "NOERROR"), (name, q)


def test_failures_recorded(scanned):
    db, truth, names, v4, _ = scanned
    rows = _rows(db, v4["run_id"])
    for q in ("A", "AAAA"):
        assert rows[("nx.example.test", q)][:2] == ("nxdomain", None)
        assert rows[("nx.example.test", q)][6] == "NXDOMAIN"
        lame = rows[("www.lame.test", q)]
        assert lame[0] == "lame" and lame[3] == truth["authoritative"]["v4"] and lame[8] == "lame.test"
        dead = rows[("www.dead.test", q)]
        dead_ns = truth["names"]["deadns.example.test"]["A"]["values"][0]
        assert (dead[0], dead[3], dead[8]) == ("timeout", dead_ns, "dead.test")
    counts = v4["counts"]
    assert counts["targets"] == len(names) + 3
    assert counts["success"] == len(names)
    assert counts["resolution-failed"] == 1 and counts["io-timeout"] == 1 and counts["application-error"] == 1


def test_views_and_figure_match_truth(scanned, tmp_path):
    db, truth, names, v4, _ = scanned
    for q in ("A", "AAAA"):
        ttls = [t[q]["ttl"] for t in names.values() if q in t]
        with db.connect() as conn:
            n, s60, s300, s600, lt60, gt1800 = conn.execute(
                """SELECT n_answers, share_60s, share_300s, share_600s, share_under_60s, share_over_30min
                   FROM dns_ttl_summary WHERE run_id = %s AND qtype = %s""", (v4["run_id"], q)).fetchone()
        assert n == len(ttls)
        for got, exp in ((s60, sum(t == 60 for t in ttls)), (s300, sum(t == 300 for t in ttls)),
                         (s600, sum(t == 600 for t in ttls)), (lt60, sum(t < 60 for t in ttls)),
                         (gt1800, sum(t > 1800 for t in ttls))):
            assert float(got) == pytest.approx(exp / len(ttls), abs=1e-12)
    p = run_cli("plot", "dns-ttl-cdf", "--run", str(v4["run_id"]), "--out", str(tmp_path), "--json", dsn=db.dsn)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "dns-ttl-cdf.png").stat().st_size > 1000
    got = {r["qtype"]: r for r in csv.DictReader((tmp_path / "dns-ttl-cdf.csv").open())}
    a_ttls = [t["A"]["ttl"] for t in names.values() if "A" in t]
    assert int(got["A"]["answers"]) == len(a_ttls)
    assert float(got["A"]["share_300s"]) == pytest.approx(sum(t == 300 for t in a_ttls) / len(a_ttls), abs=1e-6)


def test_truncation_falls_back_to_tcp(server_dsn, testbed):
    """Without EDNS the 40-record RRset does not fit in 512 bytes: TC, then TCP."""
    truth = testbed.status()["ground_truth"]["dns"]["names"]
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    res = _exec_scan(db.dsn, "--name", "big.example.test", "--name", "ttl60.example.test", "--types", "A",
                     "--edns-payload", "0")
    rows = _rows(db, res["run_id"])
    big = rows[("big.example.test", "A")]
    exp = truth["big.example.test"]["A"]
    assert len(exp["values"]) * 16 > 512
    assert (big[0], big[1], sorted(big[2]), big[4], big[5]) == ("answer", exp["ttl"], sorted(exp["values"]), "tcp", True)
    small = rows[("ttl60.example.test", "A")]
    assert (small[0], small[1], small[4], small[5]) == ("answer", truth["ttl60.example.test"]["A"]["ttl"], "udp", False)
    assert res["engine"]["tcp"] == 1


def test_bad_input_exits_2_and_writes_nothing(db):
    for args in (["--list", "nosuchlist"], ["--name", "x.test", "--family", "5"],
                 ["--name", "x.test", "--types", "MX"], ["--name", "x.test", "--nameserver", "8.8.8.8"],
                 ["--name", "x.test", "--resolver", "not-an-ip"]):
        p = run_cli("scan", "dns-ttl", *args, dsn=db.dsn)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == 0
