"""Page-load logger with real Firefox ESR over WebDriver BiDi: the resource tree of the
testbed's pages (config/testbed.toml [[web]]) is recovered exactly (parents from browsing
contexts and Referer, redirect chains from BiDi's redirectCount), and a hung page leaves an
incomplete visit while the run goes on."""
from __future__ import annotations

import json
import os
import sys

import pytest

from browser_probes.drivers import geckodriver_path
from conftest import run_cli

pytestmark = [pytest.mark.root, pytest.mark.skipif(
    not (os.path.exists("/usr/lib/firefox-esr/firefox-esr") and geckodriver_path()),
    reason="firefox-esr / geckodriver not installed")]


def _pageload(db, *args, timeout=150):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                "browser", "pageload", "--browser", "firefox", "--json", *args, dsn=db.dsn, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _visit(db, run_id, url):
    with db.connect() as conn:
        vid, status, final, browser, height, newconn, plt = conn.execute(
            "SELECT id, status, final_url, browser, tree_height, longest_new_conn_path, page_load_time_ms "
            "FROM browser_visit WHERE run_id=%s AND url=%s", (run_id, url)).fetchone()
        rows = conn.execute(
            """SELECT r.url, p.url, r.hostname, r.redirected_from_no IS NOT NULL, r.created_ms, r.dispatched_ms,
                      r.first_byte_sent_ms, r.first_byte_received_ms, r.last_byte_received_ms, r.failed
               FROM browser_resource r LEFT JOIN browser_resource p ON p.visit_id = r.visit_id AND p.resource_no = r.parent_no
               WHERE r.visit_id = %s ORDER BY r.resource_no""", (vid,)).fetchall()
        edges = set(conn.execute("SELECT parent_hostname, hostname FROM browser_domain_edge WHERE visit_id=%s",
                                 (vid,)).fetchall())
    return status, final, browser, height, newconn, plt, rows, edges


def test_firefox_resource_trees_and_hung_visit(db, testbed):
    truth = testbed.status()["ground_truth"]
    web = {w["hostname"]: w for w in truth["web"]}
    tree, a, redirect = web["tree.track.test"], web["a.test"], web["example.test"]["redirect_to"]
    hang = "https://198.18.2.250/"     # routed to the web namespace, nobody answers
    summary = _pageload(db, "--url", "https://tree.track.test/", "--url", "https://example.test/",
                        "--url", hang, "--browsers", "2", "--page-timeout", "4")
    assert (summary["complete"], summary["incomplete"], summary["restarts"]) == (2, 1, 1)

    status, final, browser, height, newconn, plt, rows, edges = _visit(db, summary["run_id"], "https://tree.track.test/")
    assert status == "complete" and browser == "firefox" and final == "https://tree.track.test/"
    root = "https://tree.track.test/"
    iframe = next(u for u in tree["resources"] if u.endswith(".html"))
    want = {(root, None)} | {(u, root) for u in tree["resources"]} | {(u, iframe) for u in a["resources"]}
    want |= {(redirect, "https://example.test/")}
    assert {(u, p) for u, p, *_ in rows if not u.endswith("/favicon.ico")} == want
    assert all(h == u.split("/")[2] for u, _, h, *_ in rows)
    for *_, created, disp, sent, recv, last, _failed in rows:      # BLAST events in order where present
        seq = [x for x in (created, disp, sent, recv, last) if x is not None]
        assert seq == sorted(seq)
    assert height == 3 and plt is not None and plt > 0
    assert edges == {(None, "tree.track.test"), ("tree.track.test", "t.test"), ("tree.track.test", "example.test"),
                     ("example.test", "www.example.test"), ("tree.track.test", "a.test")}

    status, final, _, _, newconn, _, rows, edges = _visit(db, summary["run_id"], "https://example.test/")
    assert status == "complete" and final == redirect
    chain = [(u, p, red) for u, p, _, red, *_ in rows if not u.endswith("/favicon.ico")]
    assert chain == [("https://example.test/", None, False), (redirect, "https://example.test/", True)]
    # the redirect target is on another address: a second new connection; Firefox sometimes
    # fetches the favicon (a child of the final document) over a connection of its own
    with db.connect() as conn:
        fav_new = conn.execute(
            "SELECT coalesce(bool_or(NOT r.connection_reused AND r.failed IS NULL), false) FROM browser_resource r "
            "JOIN browser_visit v ON v.id = r.visit_id WHERE v.run_id=%s AND v.url=%s AND r.url LIKE %s",
            (summary["run_id"], "https://example.test/", "%/favicon.ico")).fetchone()[0]
    assert newconn == 2 + int(fav_new)
    assert edges == {(None, "example.test"), ("example.test", "www.example.test")}

    with db.connect() as conn:
        st, err = conn.execute("SELECT status, error FROM browser_visit WHERE run_id=%s AND url=%s",
                               (summary["run_id"], hang)).fetchone()
    assert st == "incomplete" and err.startswith("timeout")
