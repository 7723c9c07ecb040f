"""Page-load logger against the testbed with real Chromium: resource trees (parents,
hostnames, redirect chains) must match the pages the testbed serves (config/testbed.toml
[[web]]), and a browser killed mid-visit leaves an incomplete visit while the run goes on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_cli

pytestmark = [pytest.mark.root, pytest.mark.skipif(not os.path.exists("/usr/bin/chromedriver"),
                                                   reason="chromium-driver not installed")]


def _pageload(db, *args, timeout=150):
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                "browser", "pageload", "--json", *args, dsn=db.dsn, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _tree(db, run_id, url):
    with db.connect() as conn:
        vid, status, final = conn.execute("SELECT id, status, final_url FROM browser_visit WHERE run_id=%s AND url=%s",
                                          (run_id, url)).fetchone()
        rows = conn.execute(
            """SELECT r.resource_no, r.url, p.url, r.hostname, r.redirected_from_no IS NOT NULL, host(r.remote_address),
                      r.created_ms, r.dispatched_ms, r.first_byte_sent_ms, r.first_byte_received_ms,
                      r.last_byte_received_ms, r.failed
               FROM browser_resource r LEFT JOIN browser_resource p ON p.visit_id = r.visit_id AND p.resource_no = r.parent_no
               WHERE r.visit_id = %s ORDER BY r.resource_no""", (vid,)).fetchall()
        edges = conn.execute("SELECT parent_hostname, hostname FROM browser_domain_edge WHERE visit_id=%s",
                             (vid,)).fetchall()
        v = conn.execute("SELECT tree_height, longest_new_conn_path, page_load_time_ms, n_resources FROM browser_visit "
                         "WHERE id=%s", (vid,)).fetchone()
    return status, final, rows, set(edges), v


def _web(truth, host):
    return next(w for w in truth["web"] if w["hostname"] == host)


def _addr(truth, host):
    return next(h["addresses"][0] for h in truth["tls_hosts"] if h["hostname"] == host)


def test_resource_trees_match_the_testbed_pages(db, testbed):
    truth = testbed.status()["ground_truth"]
    tree = _web(truth, "tree.track.test")
    a = _web(truth, "a.test")
    redirect = _web(truth, "example.test")["redirect_to"]
    summary = _pageload(db, "--url", "https://tree.track.test/", "--url", "https://example.test/", "--browsers", "2")
    assert summary["complete"] == 2 and summary["incomplete"] == 0

    status, final, rows, edges, (height, newconn, plt, n) = _tree(db, summary["run_id"], "https://tree.track.test/")
    assert status == "complete" and final == "https://tree.track.test/"
    got = {(u, p) for _, u, p, *_ in rows if not u.endswith("/favicon.ico")}
    root = "https://tree.track.test/"
    want = {(root, None)} | {(u, root) for u in tree["resources"]}
    # the iframe page a.test/index.html embeds a.test's resources; example.test/ redirects
    iframe = next(u for u in tree["resources"] if u.endswith(".html"))
    want |= {(u, iframe) for u in a["resources"]}
    want |= {(redirect, "https://example.test/")}
    assert got == want
    # every resource's hostname and server address is the testbed's
    for _, u, _, host, _, addr, *_ in rows:
        assert host == u.split("/")[2]
        if addr is not None:
            assert addr == _addr(truth, host)
    # the five BLAST events are ordered for every resource that completed
    for *_, created, disp, sent, recv, last, failed in rows:
        if failed is None and last is not None:
            assert created <= disp <= sent <= recv <= last
    assert height == 3          # root -> iframe page -> its script/image (and root -> redirect -> target)
    assert n == len(rows)
    assert plt is not None and plt > 0
    assert edges == {(None, "tree.track.test"), ("tree.track.test", "t.test"), ("tree.track.test", "example.test"),
                     ("example.test", "www.example.test"), ("tree.track.test", "a.test")}

    status, final, rows, edges, (height, newconn, plt, n) = _tree(db, summary["run_id"], "https://example.test/")
    assert status == "complete" and final == redirect
    chain = [(u, p, is_redirect) for _, u, p, _, is_redirect, *_ in rows if not u.endswith("/favicon.ico")]
    assert chain == [("https://example.test/", None, False), (redirect, "https://example.test/", True)]
    assert newconn == 2         # the redirect target lives on another address: a second new connection
    assert edges == {(None, "example.test"), ("example.test", "www.example.test")}


def test_killed_browser_leaves_incomplete_visit_and_run_continues(db, testbed, tmp_path):
    # 198.18.2.250 is routed to the web namespace but nobody answers: the visit hangs
    hang = "https://198.18.2.250/"
    prof = tmp_path / "profiles"
    env = dict(os.environ, NETSURVEY_DSN=db.dsn)
    p = subprocess.Popen(testbed.exec_argv([sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser",
                                            "pageload", "--json", "--browsers", "1", "--page-timeout", "60",
                                            "--profile-root", str(prof), "--url", hang, "--url", "https://a.test/"]),
                         cwd=REPO, env={**env, **testbed.exec_env()}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    from browser_probes.procs import browser_pids, kill_browser
    try:
        # a loaded machine (the suite runs on several workers) can take a while to start a browser
        started, deadline = time.time(), time.time() + 120
        killed = 0
        while time.time() < deadline and not killed:
            time.sleep(0.5)
            dirs = list(prof.glob("chromium-*")) if prof.exists() else []
            # kill once the hanging visit is under way (the browser has been running a moment)
            if dirs and browser_pids(dirs[0]) and time.time() > started + 4:
                time.sleep(2)
                killed = kill_browser(dirs[0])
        assert killed, "browser never started"
        out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["complete"] == 1 and summary["incomplete"] == 1 and summary["restarts"] == 1
    with db.connect() as conn:
        rows = dict(conn.execute("SELECT url, status || ':' || coalesce(error, '') FROM browser_visit WHERE run_id=%s",
                                 (summary["run_id"],)).fetchall())
    assert rows[hang].startswith("incomplete:browser failed")
    assert rows["https://a.test/"] == "complete:"


def test_hung_page_times_out_as_incomplete(db, testbed):
    summary = _pageload(db, "--url", "https://198.18.2.250/", "--url", "https://b.test/", "--browsers", "1",
                        "--page-timeout", "3")
    assert (summary["complete"], summary["incomplete"], summary["restarts"]) == (1, 1, 1)
    with db.connect() as conn:
        err = conn.execute("SELECT error FROM browser_visit WHERE run_id=%s AND status='incomplete'",
                           (summary["run_id"],)).fetchone()[0]
    assert err.startswith("timeout")


def test_bad_input_is_one_line_exit_2(db):
    r = run_cli("browser", "pageload", "--url", "https://192.0.2.1/", dsn=db.dsn)
    assert r.returncode == 2 and "blocked" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("browser", "pageload", dsn=db.dsn)
    assert r.returncode == 2
    r = run_cli("browser", "track", "--test", "nope", dsn=db.dsn)
    assert r.returncode == 2 and "unknown experiment" in r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == 0
