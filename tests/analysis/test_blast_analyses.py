"""BLAST's analyses (issue 25, item 5): schema/0075_blast_breakdown.sql and analysis/blast.py.

A visit whose five events per resource are chosen by hand is stored through the logger's own
store (browser_probes/store.py) into a real PostgreSQL; the categories, the page-level path
breakdown, the head-of-line flag and the simulator figures must give the values worked out
by hand below (BLAST sec. II-C rules; the simulator's rules in analysis/models/pageload.py).
The root test loads the testbed's pages with real Chromium and checks the invariants."""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import sys
from dataclasses import replace

import pytest

from analysis.figures import render
from browser_probes.pageload import VisitResult
from browser_probes.store import VisitStore
from browser_probes.tree import Resource, domain_tree, page_load_time_ms, tree_height
from conftest import run_cli

SIZE = 1640          # bytes: 10 ms at BLAST's 164 kB/s


def _r(no, parent, host, conn, reused, c, d, s, f, l):
    return Resource(no=no, parent_no=parent, redirected_from_no=None, url=f"https://{host}/r{no}", hostname=host,
                    resource_type="Script", initiator_type="parser", method="GET", http_status=200,
                    protocol="http/1.1" if host == "a.test" else "h2", connection_id=conn, connection_reused=reused,
                    from_cache=False, remote_address="198.18.2.1", remote_port=443, created_ms=c, dispatched_ms=d,
                    first_byte_sent_ms=s, first_byte_received_ms=f, last_byte_received_ms=l, encoded_bytes=SIZE,
                    failed=None)


#: root r0 on a.test; r1, r5 (a.test) and r2 (b.test) its children; r3, r4 children of r2.
#: r4 is sent on b.test's connection while r3 is still loading on it (multiplexed);
#: r5's timing is that of an earlier load (events before its creation).
RESOURCES = [
    _r(0, None, "a.test", 1, False, 0, 0, 100, 150, 160),
    _r(1, 0, "a.test", 1, True, 170, 170, 171, 221, 301),
    _r(2, 0, "b.test", 2, False, 165, 180, 280, 330, 340),
    _r(3, 2, "b.test", 2, True, 340, 340, 341, 391, 395),
    _r(4, 2, "b.test", 2, True, 342, 342, 343, 400, 420),
    _r(5, 0, "a.test", 1, True, 200, -500, -400, -300, 201),
]


@pytest.fixture
def visit(db):
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status, parameters, vantage, started_at, finished_at) VALUES"
                           " ('browser-pageload', 'finished', '{}', '{\"netns\": \"nstb-vantage\", \"host\": \"t\"}',"
                           " now(), now()) RETURNING id").fetchone()[0]
    store = VisitStore(db, run)
    vid = store(VisitResult(url="https://a.test/", worker=0, browser="chromium", browser_version="1",
                            started_at=dt.datetime.now(dt.timezone.utc), duration_s=1.0, status="complete", error=None,
                            final_url="https://a.test/", resources=tuple(RESOURCES),
                            domain_edges=tuple(domain_tree(RESOURCES)), page_load_time_ms=page_load_time_ms(RESOURCES),
                            tree_height=tree_height(RESOURCES), longest_new_conn_path=2))
    store.close()
    return db, run, vid


def _csv(ctx, suffix=""):
    with (ctx.out_dir / f"{ctx.name}{suffix}.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_categories_path_and_head_of_line_by_hand(visit):
    db, run, vid = visit
    with db.connect() as conn:
        rows = {r[0]: r[1:] for r in conn.execute(
            "SELECT resource_no, queue_ms, connection_ms, server_wait_ms, transfer_ms, load_ms, events_ordered,"
            " on_busy_connection FROM blast_resource_time WHERE visit_id = %s", (vid,))}
        page = conn.execute("SELECT page_load_time_ms, final_resource_no, path_end_ms, path_resources, queue_ms,"
                            " connection_ms, server_wait_ms, transfer_ms, uncategorized_ms FROM blast_page_time"
                            " WHERE visit_id = %s", (vid,)).fetchone()
    assert rows[0] == (0, 100, 50, 10, 160, True, False)
    assert rows[2] == (15, 100, 50, 10, 175, True, False)
    assert rows[3] == (0, 1, 50, 4, 55, True, False)      # r2 finished (340) before r3 was sent (341)
    assert rows[4] == (0, 1, 57, 20, 78, True, True)      # r3 in flight (341..395) when r4 was sent (343)
    assert rows[1][-1] is False and rows[5][-2] is False
    # page load time: 6th of 6 resources done at 420 ms (r4); path r4 -> r2 -> r0:
    # r4 [342, 420]: 0 / 1 / 57 / 20; r2 cut at r4's creation 342: 15 / 100 / 50 / 10 + 2 idle;
    # r0 cut at r2's creation 165: 0 / 100 / 50 / 10 + 5 idle
    assert page == (420, 4, 420, 3, 15, 201, 157, 40, 7)


def test_breakdown_queue_and_head_of_line_figures(visit, tmp_path):
    db, run, _ = visit
    ctx = render(db, "blast-load-breakdown", tmp_path, runs=[run])
    rows = {r["level"]: r for r in _csv(ctx)}
    assert rows["resource"]["n"] == "5"                    # r5 left out (events out of order)
    assert float(rows["resource"]["queue_ms"]) == pytest.approx(15 / 5)
    assert float(rows["resource"]["mean_total_ms"]) == pytest.approx((160 + 131 + 175 + 55 + 78) / 5)
    assert float(rows["page"]["connection_ms"]) == 201 and float(rows["page"]["mean_total_ms"]) == 420
    assert {"what": "resources left out: events out of order (timing of an earlier load)", "n": 1} in ctx.notes["samples"]
    comp = {c["quantity"]: c for c in ctx.notes["compare"]}
    assert comp["chromium: queue wait share of page load time (Fig 2)"]["ours"] == f"{15 / 420:.1%}"
    assert comp["chromium: queue wait share of page load time (Fig 2)"]["thesis"] == "36%"
    # BLAST: server wait is "the same amount" as the queue wait (~5.8 s, 36%), not a derived 35%
    server = comp["chromium: server wait share of page load time (Fig 2)"]
    assert server["thesis"] == "~36% (the same amount as queue wait)" and "the same amount" in server["quote"]
    assert (tmp_path / "blast-load-breakdown.png").exists()
    assert ctx.notes["provenance"][0]["where"] == "testbed"   # on the figure: where and when

    ctx = render(db, "blast-queue-wait-cdf", tmp_path, runs=[run])
    comp = {c["quantity"]: c["ours"] for c in ctx.notes["compare"]}
    assert comp["chromium: resources that did not wait (< 1 ms)"] == "80.0%"
    assert comp["chromium: resources waiting > 1 s"] == "0.0%"
    assert max(float(r["queue_ms"]) for r in _csv(ctx)) == 15

    ctx = render(db, "blast-head-of-line", tmp_path, runs=[run])
    n = {s["what"]: s["n"] for s in ctx.notes["samples"]}
    assert n == {"resources sent on a busy connection": 1, "other resources with a connection id": 4}
    comp = {c["quantity"]: c for c in ctx.notes["compare"]}
    assert comp["mean server wait, busy connection"]["ours"] == 57
    assert comp["mean server wait, busy connection"]["thesis"] == 1380


def test_simulator_feature_steps_and_sweeps_by_hand(visit, tmp_path):
    """RTT R, transfer t = 1640 B / bandwidth; a.test speaks HTTP/1.1, b.test HTTP/2 (learnt
    by ALPN when its TLS 1.3 handshake ends). Baseline: r0 done at 3R+t; r1 on a.test's idle
    connection (4R+2t), r5 after it (5R+3t: the second connection, opened at 3R+t, is ready
    only at 5R+t); b.test's connection ready at 5R+t, r2 done 6R+2t; r3 and r4 multiplexed on
    it, done 7R+3t = the 6th of 6 = page load time."""
    db, run, _ = visit
    ctx = render(db, "blast-feature-steps", tmp_path, runs=[run])
    rows = {(r["mode"], r["step"]): r for r in _csv(ctx)}
    assert float(rows[("cumulative", "baseline")]["mean_plt_s"]) == pytest.approx(7 * 0.8 + 3 * 0.01)
    assert rows[("cumulative", "baseline")]["connections"] == "3"
    # TFO: a.test's second connection skips the TCP round trip (ready 4R+t, before the first
    # is free at 4R+2t): r5 done 5R+2t; the page load time (b.test) is unchanged
    tfo = rows[("individual", "tfo")]
    assert float(tfo["mean_plt_s"]) == pytest.approx(7 * 0.8 + 3 * 0.01)
    assert (tfo["tfo_connections"], tfo["connections"]) == ("1", "3")
    # prefetching: one visit shows no resource to be stable (BLAST sec. V-D: in >= 90% of a
    # page's instances; we need 2): the database is empty and changes nothing
    assert rows[("individual", "prefetch_db")]["mean_plt_s"] == rows[("individual", "baseline")]["mean_plt_s"]
    # BLAST's extra ALPN round trip costs nothing here: b.test's connection carries r2 as
    # HTTP/1.1 during it (ready 5R+t, r2 done 6R+2t, HTTP/2 from 6R+t)
    assert rows[("individual", "alpn_in_handshake")]["mean_plt_s"] == rows[("individual", "baseline")]["mean_plt_s"]
    comp = {c["quantity"]: c["ours"] for c in ctx.notes["compare"]}
    assert comp["connections that TCP Fast Open shortened"] == "33.3%"

    ctx = render(db, "blast-sweeps", tmp_path, runs=[run])
    rows = _csv(ctx)
    assert len(rows) == 200
    for r in rows:
        R, t = float(r["rtt_s"]), SIZE / float(r["bandwidth_Bps"])
        assert float(r["mean_plt_s"]) == pytest.approx(7 * R + 3 * t, abs=1e-4), r
    comp = {c["quantity"]: c["ours"] for c in ctx.notes["compare"]}
    assert comp["mean page load time when the RTT halves (relative)"] == f"{(2.8 + 0.03) / 5.63:.1%}"


def test_prefetch_database_from_two_visits(visit):
    """A second visit of the same page where r5's URL differs (e.g. a rotating ad): every URL
    seen in both visits (2 of 2 >= 90%) is in the prefetch database, r5's two URLs (1 of 2)
    are not (analysis/models/inputs.py PREFETCH_MIN_SHARE)."""
    from analysis.models import inputs

    db, run, _ = visit
    store = VisitStore(db, run)
    other = [replace(r, url="https://a.test/ad-2") if r.no == 5 else r for r in RESOURCES]
    store(VisitResult(url="https://a.test/", worker=0, browser="firefox", browser_version="1",
                      started_at=dt.datetime.now(dt.timezone.utc), duration_s=1.0, status="complete", error=None,
                      final_url="https://a.test/", resources=tuple(other), domain_edges=tuple(domain_tree(other)),
                      page_load_time_ms=page_load_time_ms(other), tree_height=tree_height(other),
                      longest_new_conn_path=2))
    store.close()
    pages = inputs.pages_db(db, (run,))
    assert len(pages) == 2
    for p in pages:
        assert {r.id for r in p.resources if r.prefetchable} == {"0", "1", "2", "3", "4"}


def test_no_pageload_run_is_one_line(db, tmp_path):
    r = run_cli("plot", "blast-load-breakdown", "--out", str(tmp_path), dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "browser-pageload" in r.stderr


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/chromedriver"),
                    reason="needs root (testbed) and chromium-driver")
def test_testbed_pages_in_chromium(db, testbed, tmp_path):
    """Real loads of the testbed's pages: every page's categories add up to its load time,
    every resource's to its own; the figures render from them with n and provenance."""
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser", "pageload",
                "--json", "--url", "https://tree.track.test/", "--url", "https://img.example.test/", "--browsers", "2",
                dsn=db.dsn, timeout=150)
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        pages = conn.execute("SELECT path_end_ms, page_load_time_ms, queue_ms + connection_ms + server_wait_ms"
                             " + transfer_ms + uncategorized_ms, path_resources FROM blast_page_time WHERE run_id = %s",
                             (run,)).fetchall()
        res = conn.execute("SELECT queue_ms + connection_ms + server_wait_ms + transfer_ms, load_ms, connection_ms,"
                           " connection_reused FROM blast_resource_time WHERE run_id = %s AND events_ordered",
                           (run,)).fetchall()
    assert len(pages) == 2
    for end, plt, total, hops in pages:
        assert total == pytest.approx(end) and end <= plt and hops >= 2
    assert len(res) >= 6
    for total, load, _conn_ms, _reused in res:
        assert total == pytest.approx(load)
    # a new connection costs its TCP + TLS handshake before the first byte is sent
    assert min(c for _, _, c, reused in res if reused is False) > 0
    for name in ("blast-load-breakdown", "blast-queue-wait-cdf", "blast-head-of-line", "blast-feature-steps",
                 "blast-sweeps"):
        ctx = render(db, name, tmp_path, runs=[run])
        assert ctx.notes["samples"] and ctx.notes["compare"], name
        assert (tmp_path / f"{name}.png").exists()


def test_validation_calibrates_from_the_runs_own_events(visit, tmp_path):
    """RTT = mean server wait of the five ordered resources (50, 50, 50, 50, 57 ms); bandwidth =
    their bytes over their transfer times (none reaches 50 kB: all of them, 5 x 1640 B in
    10 + 80 + 10 + 4 + 20 ms); simulated page load time 7R+3t as worked out above."""
    db, run, _ = visit
    ctx = render(db, "blast-validation", tmp_path, runs=[run])
    R, bw = 0.0514, 5 * SIZE / 0.124
    assert ctx.notes["rtt_s"] == pytest.approx(R) and ctx.notes["bandwidth_Bps"] == pytest.approx(bw)
    (row,) = _csv(ctx)
    assert row["profile"] == "unrecorded"       # the run recorded no link profile: measured constants
    sim = 7 * R + 3 * SIZE / bw
    assert float(row["recorded_plt_s"]) == 0.42 and float(row["simulated_plt_s"]) == pytest.approx(sim, abs=1e-4)
    assert float(row["relative_error"]) == pytest.approx((sim - 0.42) / 0.42, abs=1e-3)
    assert ctx.notes["stats"]["chromium"]["r"] is None          # one page: no correlation
    assert ctx.notes["groups"]["unrecorded"]["bandwidth_source"] == "measured (resources >= 0 bytes)"
    # time per tree level: parent's last byte -> child created: r1 10, r2 5, r5 40, r3 0, r4 2 ms
    assert ctx.notes["groups"]["unrecorded"]["parse_s"] == pytest.approx(0.005)
    assert ctx.notes["groups"]["unrecorded"]["n_parse"] == 5
    assert {"n": 5, "what": "unrecorded: resources behind the measured bandwidth"} in ctx.notes["samples"]


def test_validation_at_the_recorded_profile(visit, tmp_path):
    """A run that recorded its link profile (parameters link_rtt_ms / link_rate_kbit, as
    `browser pageload` in the timing vantage does) is simulated at that RTT and rate: RTT
    0.06 s, 1000 kbit/s = 125 000 B/s: 7R + 3t."""
    db, run, _ = visit
    with db.connect() as conn:
        conn.execute("UPDATE scan_run SET parameters = parameters || '{\"link_profile\": \"lte\", "
                     "\"link_rtt_ms\": 60, \"link_rate_kbit\": 1000}'::jsonb WHERE id = %s", (run,))
    ctx = render(db, "blast-validation", tmp_path, runs=[run])
    g = ctx.notes["groups"]["lte"]
    assert (g["rtt_s"], g["bandwidth_Bps"], g["rtt_source"]) == (0.06, 125000.0, "profile")
    (row,) = _csv(ctx)
    assert row["profile"] == "lte"
    assert float(row["simulated_plt_s"]) == pytest.approx(7 * 0.06 + 3 * SIZE / 125000, abs=1e-4)
