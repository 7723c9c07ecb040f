"""The simulation models fed from the scanners' own data (schema/0010_model_views.sql):
the real scanners run on the testbed (TFO load-balancing survey, TLS survey, TLS shared
state, page-load logger, Atlas campaign), then `netsurvey simulate MODEL` without --input
must reproduce what the testbed's configuration (config/testbed.toml) implies: domain
trees = the [[web]] pages, trust groups = certificates / share groups, addresses seen =
the load-balanced pools, RTTs = the Atlas stand-in's fixtures."""
from __future__ import annotations

import ipaddress
import json
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import _create_database, needs_root, run_cli
from netsurvey.db import Database

pytestmark = [needs_root(), pytest.mark.root, pytest.mark.timeout(300)]

AUTH_NS = "198.18.1.53"            # knot: fresh answers for the load-balanced names
LB_ROUNDS = 16
#: two pages whose domain trees hold known trust relations (config/testbed.toml [[web]])
SITES = ["tree.track.test", "img.example.test"]
ATLAS_ZONE = "whoami.example.test"
ATLAS_SERVER = "198.18.0.1"
ATLAS_ASNS = {"198.18.100.0/24": 64496, "198.18.110.0/24": 64496, "198.18.101.0/24": 64497,
              "198.18.111.0/24": 64497, "198.18.102.0/24": 64498, "198.18.112.0/24": 64498,
              "198.18.112.53/32": 64510, "198.18.0.0/24": 64500}


def _vantage(dsn: str, *args: str, env: dict | None = None, timeout: float = 150) -> dict:
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", dsn, *args, "--json",
                dsn=dsn, env=env, timeout=timeout)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _tree_hosts(truth: dict, site: str) -> list[str]:
    """Every hostname a browser contacts for ``site``: its [[web]] resources, recursively
    through nested pages (.html) and redirects."""
    web = {w["hostname"]: w for w in truth["web"]}
    seen, todo = [site], [site]
    while todo:
        w = web.get(todo.pop(), {})
        urls = list(w.get("resources") or []) + ([w["redirect_to"]] if w.get("redirect_to") else [])
        for u in urls:
            h = u.split("/")[2]
            if h not in seen:
                seen.append(h)
                todo.append(h)
    return seen


@pytest.fixture(scope="module")
def data(server_dsn, _testbed_session, tmp_path_factory):
    """One database filled by every scanner the models read (scanners run concurrently)."""
    _testbed_session.up(log=lambda *_: None)
    truth = _testbed_session.status()["ground_truth"]
    db = Database(dsn=_create_database(server_dsn))
    db.migrate()
    tmp = tmp_path_factory.mktemp("model-views")
    hosts = sorted({h for s in SITES for h in _tree_hosts(truth, s)})
    lb = sorted(truth["dns"]["load_balanced"]) + ["on1.tfo.test", "off.tfo.test"]
    for name, items in (("sites", hosts), ("lb", lb)):
        f = tmp / f"{name}.csv"
        f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(items, 1)))
        r = run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn)
        assert r.returncode == 0, r.stderr
    from atlas.asmap import write_ipasn

    asn = write_ipasn(tmp / "ipasn.dat", ATLAS_ASNS)
    key = Path("/run/netsurvey/testbed/atlas-api-key").read_text().strip()
    jobs = {
        "tfo-lb": ("scan", "tfo-lb", "--list", "lb", "--rounds", str(LB_ROUNDS), "--interval", "0",
                   "--nameserver", AUTH_NS, "--cooldown", "0.1"),
        "tls": ("scan", "tls", "--list", "sites", "--no-ipv6", "--no-check-resumption"),
        "tls-shared": ("scan", "tls-shared", "--list", "sites"),
        "pageload": ("browser", "pageload", "--browsers", "1", *[a for s in SITES for a in ("--url", f"https://{s}/")]),
        "atlas": ("atlas", "run", "--probes", "country:DE", "--count", "800", "--server", ATLAS_SERVER,
                  "--zone", ATLAS_ZONE, "--api-host", "atlas.test", "--poll", "0.3", "--asn-db", str(asn)),
    }
    t0 = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(_vantage, db.dsn, *a, env={"NETSURVEY_ATLAS_KEY": key} if k == "atlas" else None)
                for k, a in jobs.items()}
        out = {k: f.result() for k, f in futs.items()}
    out["seconds"] = time.monotonic() - t0
    return {"db": db, "truth": truth, "runs": out, "hosts": hosts, "tmp": tmp}


def q(db, sql, *params):
    with db.connect() as conn:
        return conn.execute(sql, params).fetchall()


def simulate(db, *args) -> dict:
    r = run_cli("simulate", *args, dsn=db.dsn)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


# ------------------------------------------------------------------ TFO revisits (Fig 3.3 -> Table 3.6)

def test_tfo_revisit_failure_from_lb_survey(data):
    db, truth, run = data["db"], data["truth"], data["runs"]["tfo-lb"]["run_id"]
    pools = {n: {str(ipaddress.ip_address(a)) for a in v["pool"]} for n, v in truth["dns"]["load_balanced"].items()}
    pools["on1.tfo.test"] = {"198.18.10.1"}
    seq: dict[str, list] = {}
    tfo_every_round: dict[str, bool] = {}
    for h, _rnd, a, clen in q(db, "SELECT hostname, round, host(address), cookie_len FROM tfo_probe "
                                  "WHERE run_id = %s ORDER BY 1, 2", run):
        seq.setdefault(h, []).append(a)
        tfo_every_round[h] = tfo_every_round.get(h, True) and bool(clen)
    assert not tfo_every_round["off.tfo.test"]
    always = sorted(h for h, ok in tfo_every_round.items() if ok)
    assert set(always) <= set(pools) and len(always) >= 2
    for h in always:
        assert set(seq[h]) <= pools[h]                 # only configured pool addresses answer
    # independent recount of Fig 3.3: revisit k = connection k+1 landing on an unseen address
    want = {k: sum(seq[h][k] not in seq[h][:k] for h in always) / len(always) for k in range(1, LB_ROUNDS)}
    view = dict(q(db, "SELECT revisit, failure_rate FROM model_tfo_revisit_failure WHERE scan_run_id = %s", run))
    assert view == pytest.approx(want, abs=1e-12)
    # each extra pool address seen is "new" exactly once; on1 (one address) never fails
    assert round(sum(want.values()) * len(always)) == sum(len(set(seq[h])) - 1 for h in always)
    res = simulate(db, "tfo-revisits")
    assert res["runs"] == [run] and res["source"] == "model_tfo_revisit_failure"
    assert [r["failure_rate"] for r in res["revisits"]] == pytest.approx([want[k] for k in sorted(want)])
    for r in res["revisits"]:     # Table 3.6 rule with 19 secondary hosts: P(save 2 RTT) = q^20
        assert r["tfo_tls"]["p_save_2_rtt"] == pytest.approx((1 - r["failure_rate"]) ** 20)
        assert r["tcp_fop_tls"]["mean_delay_saved_ms"] == pytest.approx(120.0)


# ------------------------------------------------------------------ domain trees and trust groups (ch. 5)

def _expected_edges(truth: dict, site: str) -> set[tuple[str, str]]:
    """Domain tree from the [[web]] page: each hostname hangs from the first page (breadth
    first, in page order) that references it, a redirect target from the redirecting host."""
    web = {w["hostname"]: w for w in truth["web"]}
    edges, seen, todo = set(), {site}, deque([site])
    while todo:
        p = todo.popleft()
        w = web.get(p, {})
        for u in list(w.get("resources") or []) + ([w["redirect_to"]] if w.get("redirect_to") else []):
            h = u.split("/")[2]
            if h not in seen:
                seen.add(h)
                edges.add((p, h))
                todo.append(h)
    return edges


def _groups(nodes, pairs):
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    return {n: find(n) for n in nodes}


def _expected_site(site, edges, pairs) -> dict:
    """Thesis 5.4.4 counts, computed independently of analysis.models.trust."""
    depth, frontier = {site: 1}, [site]
    while frontier:
        nxt = []
        for p in frontier:
            for a, b in sorted(edges):
                if a == p and b not in depth:
                    depth[b] = depth[p] + 1
                    nxt.append(b)
        frontier = nxt
    g = _groups(depth, pairs)
    first = {}
    for h, d in depth.items():
        first[g[h]] = min(first.get(g[h], d), d)
    parent = {b: a for a, b in edges}
    path_full = {}
    for h in sorted(depth, key=depth.get):
        path_full[h] = path_full.get(parent.get(h), 0) + (first[g[h]] == depth[h])
    return {"hostnames": len(depth), "full_per_hostname": len(depth), "full_across": len(set(g.values())),
            "longest_path_default": max(depth.values()), "longest_path_across": max(path_full.values())}


def test_domain_trees_and_trust_pairs_from_browser_and_tls(data):
    db, truth = data["db"], data["truth"]
    assert data["runs"]["pageload"]["complete"] == len(SITES)
    want_edges = {s: _expected_edges(truth, s) for s in SITES}
    got = {}
    for s, p, c in q(db, "SELECT site, parent, child FROM model_domain_tree_edge"):
        got.setdefault(s, set()).add((p, c))
    assert got == {s: e | {(s, s)} for s, e in want_edges.items()}
    members = {s: {s} | {c for _, c in e} for s, e in want_edges.items()}
    # SAN trust: a's certificate covers b (either direction), both in one site's tree
    served = {h["hostname"]: h["served_sans"] for h in truth["tls_hosts"]}
    want_san = {(s, *sorted((a, b))) for s, m in members.items() for a in m for b in m
                if a != b and b in served[a]}
    # resumption trust: exactly the configured share groups (shared ticket keys and cache)
    share = {h["hostname"]: h["share_group"] for h in truth["tls_hosts"]}
    want_res = {(s, *sorted((a, b))) for s, m in members.items() for a in m for b in m
                if a != b and share.get(a) and share.get(a) == share.get(b)}
    assert want_san and want_res                       # the pages do hold both kinds
    pairs = q(db, "SELECT site, a, b, source, scan_run_id FROM model_trust_pair")
    assert {(s, a, b) for s, a, b, src, _ in pairs if src == "san"} == want_san
    assert {(s, a, b) for s, a, b, src, _ in pairs if src == "resumption"} == want_res
    assert {r for *_, src, r in pairs if src == "san"} == {data["runs"]["tls"]["run_id"]}
    assert {r for *_, src, r in pairs if src == "resumption"} == {data["runs"]["tls-shared"]["run_id"]}

    for trust, use in (("san", want_san), ("resumption", want_res), ("union", want_san | want_res)):
        res = simulate(db, "tls-across-hostnames", "--trust", trust)
        per = {r["site"]: r for r in res["per_site"]}
        assert set(per) == set(SITES)
        for s in SITES:
            exp = _expected_site(s, want_edges[s], [(a, b) for site, a, b in use if site == s])
            assert {k: per[s][k] for k in exp} == exp, (trust, s)
        assert res["sites"] == 2 and res["two_site_visits"]["pairs"] == 1
    sav = simulate(db, "shared-address-validation", "--trust", "union")
    exp = [_expected_site(s, want_edges[s], [(a, b) for site, a, b in want_san | want_res if site == s])
           for s in SITES]
    assert sav["mean_retry_handshakes"] == {"status_quo": sum(e["full_per_hostname"] for e in exp) / 2,
                                            "shared_validation": sum(e["full_across"] for e in exp) / 2}


# ------------------------------------------------------------------ QuicSocks (Fig 9.7)

def test_rtt_triplets_from_atlas(data):
    from testbed.atlas_api import atlas_ground_truth, ping_series, target_profile

    db, run = data["db"], data["runs"]["atlas"]["run_id"]
    gt = atlas_ground_truth()

    def avg(probe, target):
        got = [x for x in ping_series(target_profile(probe, target, target), 5) if x is not None]
        return round(sum(got) / len(got), 3) if got else None

    rows = q(db, "SELECT client, rtt_dns_ms, rtt_server_ms, rtt_direct_ms FROM model_rtt_triplet "
                 "WHERE scan_run_id = %s ORDER BY 1", run)
    raw = q(db, "SELECT prb_id::text, host(resolver_addr), rtt_server_ms FROM atlas_rtt_triplet WHERE run_id = %s "
                "ORDER BY 1", run)
    assert [r[0] for r in rows] == [r[0] for r in raw] and len(rows) == 4
    for (client, dns_ms, server_ms, direct_ms), (_, egress, raw_server) in zip(rows, raw):
        probe = gt["probes"][int(client)]
        assert dns_ms == avg(probe, egress)                    # fixture RTTs, exactly
        assert direct_ms == avg(probe, ATLAS_SERVER)
        assert server_ms == raw_server and server_ms > 0      # a real ping inside the testbed
    res = simulate(db, "quicsocks")
    assert res["runs"] == [run] and res["clients"] == 4
    per = {p["client"]: p for p in res["per_client"]}
    for client, dns_ms, server_ms, direct_ms in rows:    # Table 9.1 per client
        assert per[client]["status_quo"] == pytest.approx(dns_ms + direct_ms)
        assert per[client]["proposal_retry"] == pytest.approx(dns_ms + 2 * server_ms)


# ------------------------------------------------------------------ BLAST page loads

def test_page_views_and_pageload_from_logger(data, tmp_path):
    db, truth = data["db"], data["truth"]
    run = data["runs"]["pageload"]["run_id"]
    visits = q(db, "SELECT visit_id, page, recorded_plt_s FROM model_page_visit WHERE scan_run_id = %s", run)
    assert sorted(p for _, p, _ in visits) == sorted(f"https://{s}/" for s in SITES)
    raw_plt = dict(q(db, "SELECT url, page_load_time_ms FROM browser_visit WHERE run_id = %s", run))
    web = {w["hostname"]: w for w in truth["web"]}
    tls_versions = {h["hostname"]: max(h["versions"]) for h in truth["tls_hosts"]}
    pages = []
    for vid, page, plt in visits:
        assert plt == pytest.approx(raw_plt[page] / 1000)
        res = q(db, "SELECT r.resource_id, b.url, p.url, r.server, r.size_bytes, r.redirect, b.failed "
                    "FROM model_page_resource r JOIN browser_resource b ON b.visit_id = r.visit_id "
                    "AND b.resource_no::text = r.resource_id LEFT JOIN browser_resource p "
                    "ON p.visit_id = r.visit_id AND p.resource_no::text = r.parent_id "
                    "WHERE r.visit_id = %s", vid)
        # the resource tree is the page's: [[web]] resources under the root, nested pages'
        # under them, a redirect target under its 3xx hop; the favicon hangs from the root
        site = page.split("/")[2]
        want = {(page, None)}
        todo = [(page, site)]
        while todo:
            url, host = todo.pop()
            w = web.get(host, {}) if url.endswith("/") or url.endswith(".html") else {}
            for u in w.get("resources") or []:
                want.add((u, url))
                todo.append((u, u.split("/")[2]))
            if w.get("redirect_to"):
                want.add((w["redirect_to"], url))
                todo.append((w["redirect_to"], w["redirect_to"].split("/")[2]))
        got = {(u, pu) for _, u, pu, *_ in res}
        assert got - {(f"https://{site}/favicon.ico", page)} == want
        for _, u, _, server, size, redirect, failed in res:
            assert redirect is bool(web.get(server, {}).get("redirect_to") and u == f"https://{server}/")
            # Chromium logs no bytes for 3xx hops and for responses it blocked (ORB)
            assert server == u.split("/")[2] and (size > 0) is (not redirect and failed is None)
        srv = {s: (tls, ver, h2) for s, tls, ver, h2 in
               q(db, "SELECT server, tls, tls_version, h2 FROM model_page_server WHERE visit_id = %s", vid)}
        assert srv == {s: (True, tls_versions[s], False) for s in {u.split("/")[2] for u, _ in want}}
        # the same page written as a model input file (documented format) from the logged
        # requests, with parents and TLS versions taken from the configuration checked above
        id_of = {u: f"r{rid}" for rid, u, *_x in res}        # parents are pages: unique URLs
        pages.append({"name": page, "recorded_plt_s": plt,
                      "servers": [{"name": s, "tls": True, "tls_version": tls_versions[s], "h2": False} for s in srv],
                      "resources": [{"id": f"r{rid}", "parent": id_of[pu] if pu else None, "server": u.split("/")[2],
                                     "size": size, "redirect": redirect}
                                    for rid, u, pu, _s, size, redirect, _f in sorted(res, key=lambda r: r[0])]})
    f = tmp_path / "pages.json"
    f.write_text(json.dumps({"pages": pages}))
    for flags in ((), ("--tfo", "--zero-rtt", "--redirect-db")):
        from_db = simulate(db, "pageload", "--run", str(run), *flags)
        from_file = simulate(db, "pageload", "--input", str(f), *flags)
        assert from_db["source"] == "model_page_visit"
        assert sorted(from_db["per_page"], key=lambda p: p["page"]) == \
            sorted(from_file["per_page"], key=lambda p: p["page"])
        assert from_db["validation"]["pages_with_recorded_plt"] == len(SITES)


# ------------------------------------------------------------------ no per-user DNS log; report

def test_prolongation_has_no_view_and_report_renders_model_figures(data, tmp_path):
    db = data["db"]
    r = run_cli("simulate", "prolongation", dsn=db.dsn)
    assert r.returncode == 2 and "model_dns_query" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("report", "--out", str(tmp_path / "report"), "--json", dsn=db.dsn, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    figs = json.loads(r.stdout.strip().splitlines()[-1])["figures"]
    for name in ("tfo-revisits-table", "tls-across-hostnames", "shared-address-validation", "quicsocks-cdf",
                 "pageload-validation"):
        assert figs[name]["status"] == "ok", (name, figs[name]["reason"])
    assert figs["prolongation"]["status"] == "missing"
    rows = (tmp_path / "report" / "figures" / "tfo-revisits-table.csv").read_text().splitlines()
    assert len(rows) == LB_ROUNDS      # header + one row per revisit 1..LB_ROUNDS-1
